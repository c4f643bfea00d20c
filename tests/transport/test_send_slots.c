/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma:// transport's free send slots (src/transport/rdma/conn.c
 * tp_slots_add, tp_slot_take, tp_slot_put), kept as bits in struct
 * tp_conn's own lines for the first slots and on a stack beyond (issue 16
 * part DC). Against a model of the
 * free set over random takes and puts (double puts, slots never made,
 * connections of 4 to 200 slots grown chunk by chunk as slots_grow does):
 * a take gives a free slot, the lowest below TP_SFREE_BITS while one is
 * free, else the one made free last (the old stack's order), none when
 * none is free; a put of a slot not made, or of a free one below
 * TP_SFREE_BITS, changes nothing; the count is the model's. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "transport/rdma/tp_int.h"

/* a conn of @nsend slots' free set, as conn_alloc_bufs makes it */
static struct tp_conn *slots_conn(uint32_t nsend)
{
	struct tp_conn *cn = calloc(1, sizeof(*cn));

	if (!cn)
		return NULL;
	cn->nsend = nsend;
	if (nsend > TP_SFREE_BITS)
		cn->sfree = calloc(nsend - TP_SFREE_BITS, sizeof(uint32_t));
	return cn;
}

static void slots_conn_free(struct tp_conn *cn)
{
	free(cn->sfree);
	free(cn);
}

/* one more chunk, sized as slots_grow sizes a server's */
static void grow(struct tp_conn *cn, bool *is_free, uint32_t *order, uint32_t *norder)
{
	uint32_t n = RR_MIN(RR_MAX(cn->nslots, TP_SLOTS_FIRST), cn->nsend - cn->nslots);

	tp_slots_add(cn, cn->nslots, n);
	/* the stack gets them with the lowest on top */
	for (uint32_t i = n; i-- > 0;) {
		is_free[cn->nslots + i] = true;
		if (cn->nslots + i >= TP_SFREE_BITS)
			order[(*norder)++] = cn->nslots + i;
	}
	cn->nslots += n;
}

TEST(tp_send_slots_free_set_matches_a_model)
{
	static const uint32_t sizes[] = {4, 8, 12, 63, 64, 65, 100, 200};
	uint64_t seed = 0x9e3779b97f4a7c15u;
	unsigned takes = 0, puts_ignored = 0, stack_takes = 0, empty = 0;

	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t nsend = sizes[z];
		struct tp_conn *cn = slots_conn(nsend);
		bool is_free[256] = {false};
		uint32_t order[256], norder = 0, nfree;

		REQUIRE(cn != NULL);
		grow(cn, is_free, order, &norder);
		for (unsigned op = 0; op < 20000; op++) {
			uint32_t r, slot;

			seed = seed * 6364136223846793005u + 1442695040888963407u;
			r = (uint32_t)(seed >> 33);
			if (r % 16 == 0 && cn->nslots < nsend) {
				grow(cn, is_free, order, &norder);
			} else if (r % 16 < 8) {
				uint32_t want = UINT32_MAX;
				bool got = tp_slot_take(cn, &slot);

				for (uint32_t i = 0; i < cn->nslots && i < TP_SFREE_BITS; i++)
					if (is_free[i]) {
						want = i;
						break;
					}
				if (want == UINT32_MAX && norder)
					want = order[norder - 1];
				if (want == UINT32_MAX) {
					CHECK(!got);
					empty++;
					continue;
				}
				REQUIRE(got);
				CHECK_EQ(slot, want);
				REQUIRE(slot < cn->nslots && is_free[slot]);
				is_free[slot] = false;
				if (slot >= TP_SFREE_BITS) {
					norder--;
					stack_takes++;
				}
				takes++;
			} else {
				/* any slot, some not made, many free already
				 * (those below TP_SFREE_BITS only: a free one
				 * from there on would go on the stack twice,
				 * as on the stack alone before) */
				slot = (r >> 8) % (nsend + 4);
				if (slot < cn->nslots && slot >= TP_SFREE_BITS && is_free[slot])
					continue;
				tp_slot_put(cn, slot);
				if (slot >= cn->nslots || is_free[slot]) {
					puts_ignored++;
				} else {
					is_free[slot] = true;
					if (slot >= TP_SFREE_BITS)
						order[norder++] = slot;
				}
			}
			nfree = 0;
			for (uint32_t i = 0; i < cn->nslots + 2; i++) {
				nfree += is_free[i];
				CHECK_EQ(tp_slot_is_free(cn, i), is_free[i]);
			}
			REQUIRE_EQ(cn->nsfree, nfree);
		}
		slots_conn_free(cn);
	}
	/* every branch was taken */
	CHECK(takes > 10000);
	CHECK(puts_ignored > 1000);
	CHECK(stack_takes > 1000);
	CHECK(empty > 100);
}
