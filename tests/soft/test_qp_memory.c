/* SPDX-License-Identifier: BSD-2-Clause */
/* What a soft queue pair holds in memory from its creation (issue 16 part L,
 * docs/soft-iwarp.md "Memory of a queue pair"): its inbound Read/Commit
 * queue (RFC 5040 section 6.4: IRD entries, 252 KiB) is mapped only when the
 * peer's first Read Request arrives, so a QP nobody reads from never maps it;
 * after that the responder answers every Read as before. Two endpoints over
 * loopback TCP through the public API (tests/soft_net.h). */
#include "test.h"

#include <string.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF 65536u

/* Connected and exchanging Sends, neither side has an inbound Read queue;
 * the first Read Request maps the responder's (only), and Reads go on being
 * answered from it. */
TEST(soft_qp_read_queue_mapped_on_first_request)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	CHECK(soft_net_qp_of(s)->irq == NULL);
	/* a Send each way maps nothing */
	soft_net_post_recv(&n, s, 1, 0, 64);
	soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, 64, 16, 0, true);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	CHECK(soft_net_qp_of(s)->irq == NULL);
	/* the first Read: the responder's queue appears, the requester's not */
	soft_net_read_check(&n, c, 3, 256);
	CHECK(soft_net_qp_of(s)->irq != NULL);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	/* more Reads than IRD entries in all, each answered */
	for (uint64_t i = 0; i < 2u * SOFT_MAX_IRD; i += 16)
		soft_net_read_check(&n, c, 4 + i, 512);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A QP's batch arrays sized by need (issue 16 part CH, soft.h
 * SOFT_BATCH_FPDUS_FIRST): created with the first ones in its block
 * (SOFT_BATCH_FPDUS_FIRST FPDUs), kept through short messages; a message
 * of more FPDUs than that (an RDMA Write of 8 path-MTU FPDUs and more)
 * fills them and the next batch takes the full arrays; every byte of it
 * and of the next one placed as sent. Fails with the full arrays made at
 * creation (bfcap 64 at first), with no growth (bfcap 4 after the Write),
 * and with the arrays swapped while a batch is in flight (bytes wrong). */
#define BIG_BUF (2u << 20)
#define BIG_LEN (BIG_BUF / 2)

static void big_write_check(struct net *n, struct rpcrdma_qp *c, struct rpcrdma_qp *s,
			    uint64_t id, uint8_t seed)
{
	struct rpcrdma_wc wc;

	for (uint32_t i = 0; i < BIG_LEN; i++)
		n->buf[i] = (uint8_t)(i * 13 + seed + (i >> 12));
	memset(n->buf + BIG_LEN, 0, BIG_LEN);
	soft_net_post_recv(n, s, id + 1, 0, 64);
	soft_net_post_send(n, c, id, RPCRDMA_WR_RDMA_WRITE, 0, BIG_LEN, BIG_LEN, true);
	/* a Send after it: its Receive done, the Write is placed (RFC 5040
	 * section 5.5: placement in order) */
	soft_net_post_send(n, c, id + 2, RPCRDMA_WR_SEND, 0, 16, 0, false);
	REQUIRE_EQ(rpcrdma_cq_wait(n->ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id);
	REQUIRE_EQ(rpcrdma_cq_wait(n->scq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id + 1);
	CHECK(memcmp(n->buf + BIG_LEN, n->buf, BIG_LEN) == 0);
}

TEST(soft_qp_batch_arrays_grow_on_first_long_message)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 64, 16, BIG_BUF);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	CHECK_EQ(soft_net_qp_of(c)->bfcap, SOFT_BATCH_FPDUS_FIRST);
	CHECK(soft_net_qp_of(c)->bbig == NULL);
	CHECK(soft_net_qp_of(s)->bbig == NULL);
	/* a short Send keeps the first arrays */
	soft_net_post_recv(&n, s, 1, 0, 64);
	soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, 64, 16, 0, true);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK(soft_net_qp_of(c)->bbig == NULL);
	CHECK_EQ(soft_net_qp_of(c)->bfcap, SOFT_BATCH_FPDUS_FIRST);
	/* a long Write: more FPDUs than the first arrays hold */
	REQUIRE(BIG_LEN / soft_net_qp_of(c)->fpdu_max > SOFT_BATCH_FPDUS_FIRST);
	big_write_check(&n, c, s, 10, 1);
	CHECK(soft_net_qp_of(c)->bbig != NULL);
	CHECK_EQ(soft_net_qp_of(c)->bfcap, SOFT_BATCH_FPDUS);
	CHECK(soft_net_qp_of(s)->bbig == NULL);   /* it only received */
	big_write_check(&n, c, s, 20, 7);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The same for many short messages queued at once: a chain of more Sends
 * than the first arrays hold fills them with more work requests waiting,
 * and the next batch takes the full arrays (a batch of 4 FPDUs per
 * write would cost a loaded server's chained Replies 8 writes for 32);
 * each Send arrives, in order. Fails with growth only for the rest of a
 * message (bbig NULL after the chain). */
#define CHAIN_N 12u

TEST(soft_qp_batch_arrays_grow_on_queued_sends)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct rpcrdma_send_wr wr[CHAIN_N];
	struct rpcrdma_sge sg[CHAIN_N];

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < CHAIN_N; i++) {
		soft_net_post_recv(&n, s, 100 + i, 4096 + 64u * i, 64);
		memset(n.buf + 64u * i, (int)('A' + i), 32);
		sg[i] = (struct rpcrdma_sge){(uintptr_t)n.buf + 64u * i, 32, rpcrdma_mr_lkey(n.mr)};
		wr[i] = (struct rpcrdma_send_wr){.wr_id = i, .sg_list = &sg[i], .num_sge = 1,
						 .opcode = RPCRDMA_WR_SEND,
						 .flags = i + 1 == CHAIN_N ? RPCRDMA_SEND_SIGNALED : 0,
						 .next = i + 1 < CHAIN_N ? &wr[i + 1] : NULL};
	}
	CHECK(soft_net_qp_of(c)->bbig == NULL);
	REQUIRE_EQ(rpcrdma_post_send(c, wr, NULL), 0);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, CHAIN_N - 1);
	for (uint32_t i = 0; i < CHAIN_N; i++) {
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, RR_TEST_WAIT_MS), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + i);
		CHECK_EQ(wc.byte_len, 32u);
		CHECK_EQ(n.buf[4096 + 64u * i], (uint8_t)('A' + i));
	}
	CHECK(soft_net_qp_of(c)->bbig != NULL);
	CHECK_EQ(soft_net_qp_of(c)->bfcap, SOFT_BATCH_FPDUS);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
