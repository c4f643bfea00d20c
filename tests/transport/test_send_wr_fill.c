/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma:// transport's Send work request (src/transport/rdma/conn.c
 * tp_send_wr_fill), filled field by field instead of cleared whole and
 * then filled (issue 16 part BM): on storage that holds garbage, every
 * field rdma.h gives a Send (wr_id, next, sg_list, num_sge, opcode, flags,
 * u.send.invalidate_stag) and every field of its SGE comes out as a
 * cleared struct's fill would make it, for a Send and a Send With
 * Invalidate in the first and a later chunk of send slots. */
#include <stdlib.h>
#include <string.h>

#include "rpcrdma/rdma.h"
#include "test.h"
#include "rdma/post_own.h"
#include "transport/rdma/tp_int.h"

TEST(tp_send_wr_fill_sets_a_sends_fields)
{
	static uint8_t mem0[8 * 64], mem1[8 * 64];
	struct tp_conn *cn = calloc(1, sizeof(*cn));
	unsigned checked = 0;

	REQUIRE(cn != NULL);
	cn->nsch = 2;
	cn->ssize = 64;
	cn->sch[0] = (struct tp_slots){.mem = mem0, .first = 0, .n = 8, .lkey = 0x1111u};
	cn->sch[1] = (struct tp_slots){.mem = mem1, .first = 8, .n = 8, .lkey = 0x2222u};
	for (uint32_t slot = 0; slot < 16; slot++)
		for (int inv = 0; inv < 2; inv++) {
			struct rr_conn_send s = {.slot = slot,
						 .len = 17 + slot,
						 .inv = inv != 0,
						 .inv_stag = 0xabcd0000u + slot,
						 .token = 99};
			struct rpcrdma_send_wr wr;
			struct rpcrdma_sge sge;
			const struct tp_slots *k = &cn->sch[slot >= 8];

			memset(&wr, 0xa5, sizeof(wr));
			memset(&sge, 0x5a, sizeof(sge));
			tp_send_wr_fill(cn, &s, &wr, &sge);
			CHECK_EQ(wr.wr_id, WRID(WR_SEND, slot));
			CHECK(wr.next == NULL);
			CHECK(wr.sg_list == &sge);
			CHECK_EQ(wr.num_sge, 1u);
			CHECK_EQ(wr.opcode, inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND);
			CHECK_EQ(wr.flags, (uint32_t)RPCRDMA_SEND_SIGNALED);
			/* a Send's own member of the union: the STag, or 0 as a
			 * cleared struct had it */
			CHECK_EQ(wr.u.send.invalidate_stag, inv ? 0xabcd0000u + slot : 0u);
			CHECK_EQ(sge.addr,
				 (uint64_t)(uintptr_t)(k->mem + (size_t)(slot - k->first) * 64));
			CHECK_EQ(sge.length, 17 + slot);
			CHECK_EQ(sge.lkey, k->lkey);
			checked++;
		}
	CHECK_EQ(checked, 32u);
	free(cn);
}

/* The rdma:// transport posts its own work requests without the public
 * rpcrdma_post_send's shape checks (src/rdma/post_own.h, issue 16 part
 * CE): every Send chain its builders make must pass those checks, so
 * that nothing the internal entry lets through would be refused by the
 * public one. 20,000 chains built by tp_send_wrs_build in every shape
 * the transport posts: a lone Send or Send With Invalidate; 1 to 12 RDMA
 * Writes before it (the stack's 9 and beyond), each from a registered
 * buffer or the XDR pad; Writes signaled (signal_writes) or not; the
 * Send signaled or unsignaled (as tp_unsig_choose clears its flags); 1 to 4
 * such chains linked as tp_post_deferred links deferred Replies; slots
 * in the first and a later chunk. Each work request of each chain goes
 * through rr_send_wr_check, the public entry's checks, on a QP granted
 * the one SGE the transport asks for (the least any provider grants). */
TEST(tp_send_wrs_pass_the_public_checks)
{
	static uint8_t mem0[8 * 64], mem1[8 * 64], src[4096];
	struct tp_conn *cn = calloc(1, sizeof(*cn));
	struct rr_qp qp;
	struct rr_conn_mem m = {.base = src, .len = sizeof(src), .lkey = 0x3333u};
	struct rpcrdma_send_wr wr[4][13];
	struct rpcrdma_sge sge[4][13];
	uint64_t seed = 0x9e3779b97f4a7c15u;
	unsigned chains = 0, wrs = 0, refused = 0, writes = 0, pads = 0, invs = 0, unsig = 0;

	REQUIRE(cn != NULL);
	memset(&qp, 0, sizeof(qp));
	qp.attr.max_send_sge = 1;
	cn->nsch = 2;
	cn->ssize = 64;
	cn->sch[0] = (struct tp_slots){.mem = mem0, .first = 0, .n = 8, .lkey = 0x1111u};
	cn->sch[1] = (struct tp_slots){.mem = mem1, .first = 8, .n = 8, .lkey = 0x2222u};
	for (unsigned round = 0; round < 20000; round++) {
		unsigned nchain;
		struct rpcrdma_send_wr *head = NULL, *tail = NULL;

		seed = seed * 6364136223846793005u + 1442695040888963407u;
		nchain = 1 + (unsigned)(seed >> 62);
		cn->signal_writes = (seed >> 20) & 1;
		for (unsigned c = 0; c < nchain; c++) {
			struct rr_conn_write w[12];
			struct rr_conn_send s;

			seed = seed * 6364136223846793005u + 1442695040888963407u;
			s = (struct rr_conn_send){.slot = (uint32_t)(seed >> 59) & 15u,
						  .len = 1 + (uint32_t)(seed >> 40) % 64u,
						  .inv = (seed >> 33) & 1,
						  .inv_stag = (uint32_t)(seed >> 8),
						  .writes = w,
						  .nwrites = (unsigned)(seed >> 50) % 13u,
						  .token = seed};
			for (unsigned i = 0; i < s.nwrites; i++) {
				seed = seed * 6364136223846793005u + 1442695040888963407u;
				w[i] = (struct rr_conn_write){
					.mem = (seed >> 61) ? &m : NULL,
					.src = src + (seed >> 32) % 2048u,
					.len = (uint32_t)(seed >> 20) % 2048u,
					.stag = (uint32_t)seed,
					.to = seed >> 3};
				pads += w[i].mem == NULL;
			}
			tp_send_wrs_build(cn, &s, wr[c], sge[c]);
			if ((seed >> 45) & 1) {   /* as tp_unsig_choose makes it */
				wr[c][s.nwrites].flags = 0;
				unsig++;
			}
			writes += s.nwrites;
			invs += s.inv;
			if (tail)
				tail->next = wr[c];
			else
				head = wr[c];
			tail = &wr[c][s.nwrites];
			CHECK(tail->next == NULL);
		}
		for (const struct rpcrdma_send_wr *x = head; x; x = x->next) {
			if (rr_send_wr_check(&qp, x))
				refused++;
			wrs++;
		}
		chains++;
	}
	CHECK_EQ(refused, 0u);
	CHECK_EQ(chains, 20000u);
	/* every shape was built many times */
	CHECK(wrs > 100000u);
	CHECK(writes > 50000u && pads > 5000u && invs > 10000u && unsig > 10000u);
	free(cn);
}

/* Whether a Send goes unsignaled (tp_unsig_choose), its connection's part
 * of the rule read from one flag set at conn_new (tp_conn_unsig_setup,
 * from the endpoint's role and signal_writes; issue 16 part IG). For every
 * combination of the rule's inputs -- client or server, signal_writes,
 * quiet, Writes, invalidation, the run, the ring, the free slots -- and
 * sequence numbers near the wrap, the answer, the Send's flags and the
 * mark in its wr_id must be the rule's as it was written before the flag
 * (unsignaled when (a client's or quiet) and no Writes, no invalidation,
 * no signal_writes, urun < TP_UNSIG_RUN, ucount < TP_UNSIG_MAX and a free
 * slot left; the mark uposted + 1 when unsignaled, else uposted), on the
 * Send as tp_send_wr_fill and tp_send_wrs_build build it. */
TEST(tp_unsig_choose_follows_the_rule)
{
	static uint8_t mem0[8 * 64], mem1[8 * 64], src[64];
	static const uint32_t posted[] = {0, 5, TP_UNSIG_MASK - 1, TP_UNSIG_MASK, 0xfffffff0u};
	struct tp_conn *cn = calloc(1, sizeof(*cn));
	struct tp_ep *ep = calloc(1, sizeof(*ep));
	struct rr_conn_mem m = {.base = src, .len = sizeof(src), .lkey = 0x3333u};
	struct rr_conn_write w[3];
	unsigned cases = 0, cl_unsig = 0, sv_unsig = 0;

	REQUIRE(cn != NULL && ep != NULL);
	cn->ep = ep;
	cn->nsch = 2;
	cn->ssize = 64;
	cn->sch[0] = (struct tp_slots){.mem = mem0, .first = 0, .n = 8, .lkey = 0x1111u};
	cn->sch[1] = (struct tp_slots){.mem = mem1, .first = 8, .n = 8, .lkey = 0x2222u};
	for (unsigned i = 0; i < 3; i++)
		w[i] = (struct rr_conn_write){.mem = &m, .src = src, .len = 8, .stag = 7, .to = 9};
	for (unsigned bits = 0; bits < 64; bits++) {
		bool server = bits & 1, sigw = bits & 2, quiet = bits & 4, inv = bits & 8;
		unsigned nwrites = (bits >> 4) & 3;

		ep->is_server = server;
		cn->signal_writes = sigw;
		tp_conn_unsig_setup(cn);   /* as conn_new sets it */
		for (uint32_t urun = 0; urun <= TP_UNSIG_RUN + 1; urun++)
			for (uint32_t ucount = 0; ucount <= TP_UNSIG_MAX; ucount++)
				for (uint32_t nsfree = 0; nsfree < 3; nsfree++)
					for (unsigned p = 0; p < RR_ARRAY_SIZE(posted); p++) {
						uint32_t slot = (urun * 5 + ucount + p) % 16;
						struct rr_conn_send s = {.slot = slot,
									 .len = 20,
									 .inv = inv,
									 .quiet = quiet,
									 .inv_stag = 0x77u,
									 .writes = w,
									 .nwrites = nwrites,
									 .token = 5};
						bool want = (!server || quiet) && !nwrites && !inv &&
							    !sigw && urun < TP_UNSIG_RUN &&
							    ucount < TP_UNSIG_MAX && nsfree;
						uint32_t mark = posted[p] + (want ? 1u : 0u);
						struct rpcrdma_send_wr wr[4];
						struct rpcrdma_sge sge[4];
						bool got;

						cn->urun = urun;
						cn->ucount = ucount;
						cn->nsfree = nsfree;
						cn->uposted = posted[p];
						memset(wr, 0xa5, sizeof(wr));
						tp_send_wrs_build(cn, &s, wr, sge);
						got = tp_unsig_choose(cn, &s, &wr[nwrites]);
						CHECK_EQ(got, want);
						CHECK_EQ(wr[nwrites].flags,
							 want ? 0u : (uint32_t)RPCRDMA_SEND_SIGNALED);
						CHECK_EQ(wr[nwrites].wr_id, WRID_SEND(slot, mark));
						CHECK_EQ(WRMARK(wr[nwrites].wr_id), mark & TP_UNSIG_MASK);
						CHECK(wr[nwrites].next == NULL);
						cases++;
						cl_unsig += want && !server;
						sv_unsig += want && server;
					}
	}
	CHECK_EQ(cases, 64u * (TP_UNSIG_RUN + 2) * (TP_UNSIG_MAX + 1) * 3 * RR_ARRAY_SIZE(posted));
	CHECK(cl_unsig > 100u && sv_unsig > 100u);
	free(ep);
	free(cn);
}
