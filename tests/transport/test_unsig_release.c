/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma:// transport's unsignaled Sends (src/transport/rdma/conn.c
 * tp_unsig_posted, tp_unsig_release; "a client's unsignaled Sends"):
 * against a model of a send queue that completes in order. Sends go
 * unsignaled as tp_unsig_choose lets them (at most TP_UNSIG_RUN in a row and
 * TP_UNSIG_MAX waiting, a free slot left beside each), their marks as
 * tp_unsig_choose sets them; a signaled Send always completes, an unsignaled one silently
 * or, now and then, with its own (failure) completion; now and then a
 * completion with a mark from the past comes (a probe's, a stale one).
 * Each completion must put back exactly the slots of the unsignaled Sends
 * posted before its mark (both below TP_SFREE_BITS, as bits, and beyond,
 * on the stack), say whether its own Send was one of them and how many
 * others, and leave the free set and its count the model's. Connections
 * of 8 to 200 slots, sequence numbers wrapping at TP_UNSIG_MASK. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "transport/rdma/tp_int.h"

#define UR_MAXQ 512u

struct ur_send {
	uint32_t slot, mark, seq;
	bool unsig;
};

struct ur_model {
	bool is_free[256];
	uint32_t nfree;
	struct ur_send q[UR_MAXQ];   /* posted, not completed yet (oldest first) */
	uint32_t qh, qn;
	struct ur_send u[UR_MAXQ];   /* unsignaled, not released (oldest first) */
	uint32_t un;
};

static uint64_t ur_seed = 0x243f6a8885a308d3u;

static uint32_t ur_rand(void)
{
	ur_seed = ur_seed * 6364136223846793005u + 1442695040888963407u;
	return (uint32_t)(ur_seed >> 33);
}

static bool ur_before(uint32_t a, uint32_t m)
{
	uint32_t d = (m - a) & TP_UNSIG_MASK;

	return d && d <= TP_UNSIG_MASK / 2;
}

/* A completion of @mark for the Send in @self: checked against the model. */
static void ur_complete(struct tp_conn *cn, struct ur_model *m, uint32_t mark, uint32_t self,
			unsigned *nrel)
{
	bool want_self = false, had_self;
	unsigned want_other = 0, nother = 99;
	uint32_t keep = 0;

	for (uint32_t i = 0; i < m->un; i++) {
		if (ur_before(m->u[i].seq, mark)) {
			if (m->u[i].slot == self)
				want_self = true;
			else
				want_other++;
			m->is_free[m->u[i].slot] = true;
			m->nfree++;
		} else {
			m->u[keep++] = m->u[i];
		}
	}
	m->un = keep;
	had_self = tp_unsig_release(cn, mark, self, &nother);
	CHECK_EQ(had_self, want_self);
	CHECK_EQ(nother, want_other);
	*nrel += want_other + want_self;
	if (!had_self && self != TP_PROBE_SLOT) {
		/* tp_on_wc puts a signaled Send's own slot back */
		tp_slot_put(cn, self);
		m->is_free[self] = true;
		m->nfree++;
	}
	CHECK_EQ(cn->ucount, m->un);
}

static void ur_check_free(const struct tp_conn *cn, const struct ur_model *m)
{
	for (uint32_t i = 0; i < cn->nslots + 2; i++)
		CHECK_EQ(tp_slot_is_free(cn, i), m->is_free[i]);
	REQUIRE_EQ(cn->nsfree, m->nfree);
}

TEST(tp_unsig_release_matches_a_send_queue_model)
{
	static const uint32_t sizes[] = {8, 12, 63, 64, 65, 100, 200};
	unsigned nrel = 0, nself = 0, nstale = 0, nhigh = 0, npartial = 0;

	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t nsend = sizes[z];
		struct tp_conn *cn = calloc(1, sizeof(*cn));
		struct ur_model *m = calloc(1, sizeof(*m));

		REQUIRE(cn != NULL && m != NULL);
		cn->nsend = nsend;
		if (nsend > TP_SFREE_BITS)
			cn->sfree = calloc(nsend - TP_SFREE_BITS, sizeof(uint32_t));
		tp_slots_add(cn, 0, nsend);
		cn->nslots = nsend;
		for (uint32_t i = 0; i < nsend; i++)
			m->is_free[i] = true;
		m->nfree = nsend;
		/* sequence numbers wrap within the run */
		cn->uposted = TP_UNSIG_MASK - 3000u + (uint32_t)z * 7u;
		for (unsigned op = 0; op < 40000; op++) {
			uint32_t r = ur_rand(), slot;
			/* long bursts in flight (high slots), then drains */
			bool post = (op / 2000) % 2 == 0 ? r % 8 < 6 : r % 8 < 2;

			if (post && cn->nsfree) {
				struct ur_send s;
				bool unsig;

				REQUIRE(tp_slot_take(cn, &slot));
				REQUIRE(m->is_free[slot]);
				m->is_free[slot] = false;
				m->nfree--;
				unsig = (r >> 8) % 4 != 0 && cn->urun < TP_UNSIG_RUN &&
					cn->ucount < TP_UNSIG_MAX && cn->nsfree;
				s = (struct ur_send){.slot = slot,
						     .mark = (cn->uposted + (unsig ? 1u : 0u)) & TP_UNSIG_MASK,
						     .seq = cn->uposted & TP_UNSIG_MASK,
						     .unsig = unsig};
				tp_unsig_posted(cn, slot, unsig);
				REQUIRE(m->qn < UR_MAXQ);
				m->q[(m->qh + m->qn++) % UR_MAXQ] = s;
				if (unsig) {
					m->u[m->un++] = s;
					nhigh += slot >= TP_SFREE_BITS;
				}
			} else if (r % 32 == 31) {
				/* a completion whose mark is behind the ring's head */
				ur_complete(cn, m, (cn->uposted - cn->ucount - 1 - (r >> 8) % 100) & TP_UNSIG_MASK,
					    TP_PROBE_SLOT, &nrel);
				nstale++;
			} else if (m->qn) {
				struct ur_send s = m->q[m->qh];

				m->qh = (m->qh + 1) % UR_MAXQ;
				m->qn--;
				if (!s.unsig || (r >> 8) % 8 == 0) {
					if (s.unsig)
						nself++;
					if (m->un && !s.unsig && m->qn &&
					    m->q[m->qh].unsig)
						npartial++;
					ur_complete(cn, m, s.mark, s.slot, &nrel);
				}
			}
			ur_check_free(cn, m);
		}
		free(cn->sfree);
		free(cn);
		free(m);
	}
	/* every case was there: releases, an unsignaled Send's own
	 * completion, stale marks, high slots in the ring, a signaled
	 * completion with unsignaled Sends after it still waiting */
	CHECK(nrel > 10000);
	CHECK(nself > 100);
	CHECK(nstale > 100);
	CHECK(nhigh > 100);
	CHECK(npartial > 100);
}
