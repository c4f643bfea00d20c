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
