/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's progress model (docs/soft-iwarp.md "Threading"): the
 * CQ's consumer receives in its own thread (rpcrdma_cq_wait sleeps in the
 * CQ's epoll over the QPs' sockets); the progress thread serves QPs whose
 * CQ nobody attends (passive RDMA Read responders), and gives them back
 * when the consumer returns; a waiter wakes on completions produced by
 * another thread; a CQ serves any number of QPs (no fixed limit). Two
 * endpoints over loopback TCP through the public API (RFC 5040 Read,
 * Send). */
#include "test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"


/* Reads of the server's memory are answered while the server application
 * does not touch its CQ at all, and again after it polled once and then
 * went quiet (its QP goes back to the progress thread after the lease). */
TEST(soft_progress_thread_answers_reads_without_polling)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	static uint8_t src[100000], dst[100000];
	struct rpcrdma_mr *smr, *dmr;
	struct rpcrdma_wc wc;

	soft_net_up(&n, 1024, 256);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, src, sizeof(src), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &smr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, dst, sizeof(dst), RPCRDMA_ACCESS_LOCAL_WRITE, &dmr), 0);
	for (int round = 0; round < 2; round++) {
		struct rpcrdma_sge sg = {(uintptr_t)dst, sizeof(dst), rpcrdma_mr_lkey(dmr)};
		struct rpcrdma_send_wr r = {.wr_id = 40 + round, .sg_list = &sg, .num_sge = 1,
					    .opcode = RPCRDMA_WR_RDMA_READ, .flags = RPCRDMA_SEND_SIGNALED,
					    .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(smr),
						       .stag = rpcrdma_mr_rkey(smr)}};

		if (round == 1) {
			/* the server consumer shows up once: it takes its QP */
			CHECK_EQ(rpcrdma_cq_poll(n.scq, 1, &wc), 0);
			CHECK(!soft_net_handed(s));
		}
		memset(dst, 0, sizeof(dst));
		REQUIRE_EQ(rpcrdma_post_send(c, &r, NULL), 0);
		REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 40 + round);
		CHECK_EQ(wc.byte_len, sizeof(dst));
		CHECK_MEM(dst, src, sizeof(dst));
		/* the progress thread served the server's socket */
		CHECK(soft_net_handed(s));
	}
	/* the client waited in rpcrdma_cq_wait: its QP stayed with it */
	CHECK(!soft_net_handed(c));
	soft_net_unpair(c, s, cid, sid);
	CHECK_EQ(rpcrdma_dereg_mr(smr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(dmr), 0);
	soft_net_down(&n);
}

/* A thread asleep in rpcrdma_cq_wait wakes on a completion another thread
 * produces (a signaled Write completing inside post_send), on a receive
 * from the wire, and the wait times out when nothing comes. The CQ fd
 * (armed) becomes readable for a completion made elsewhere. */
TEST(soft_cq_wait_wakes_on_completion)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	static uint8_t buf[256], tgt[256];
	struct rpcrdma_mr *bmr, *tmr;
	struct rpcrdma_wc wc;
	struct soft_net_waiter w;
	struct rpcrdma_sge sg;
	uint64_t t0;

	soft_net_up(&n, 1024, 256);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE, &bmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, tgt, sizeof(tgt), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &tmr), 0);
	sg = (struct rpcrdma_sge){(uintptr_t)buf, 64, rpcrdma_mr_lkey(bmr)};
	/* timeout */
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 50), 0);
	/* completion made by another thread */
	soft_net_wait_start(&w, n.ccq, RR_TEST_WAIT_MS);
	REQUIRE(soft_net_until_waiting(n.ccq, 1));
	{
		struct rpcrdma_send_wr wr = {.wr_id = 7, .sg_list = &sg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_RDMA_WRITE,
					     .flags = RPCRDMA_SEND_SIGNALED,
					     .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(tmr),
							.stag = rpcrdma_mr_rkey(tmr)}};

		t0 = rr_now_ns(NULL);
		REQUIRE_EQ(rpcrdma_post_send(c, &wr, NULL), 0);
	}
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 7);
	CHECK(rr_now_ns(NULL) - t0 < RR_TEST_PROMPT_NS);   /* woken, not timed out */
	/* a receive from the wire wakes the server's waiter */
	{
		struct rpcrdma_recv_wr rw = {.wr_id = 8, .sg_list = &sg, .num_sge = 1};
		struct rpcrdma_sge ssg = {(uintptr_t)buf + 128, 10, rpcrdma_mr_lkey(bmr)};
		struct rpcrdma_send_wr sw = {.wr_id = 9, .sg_list = &ssg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_SEND};

		REQUIRE_EQ(rpcrdma_post_recv(s, &rw, NULL), 0);
		soft_net_wait_start(&w, n.scq, RR_TEST_WAIT_MS);
		REQUIRE(soft_net_until_waiting(n.scq, 1));
		REQUIRE_EQ(rpcrdma_post_send(c, &sw, NULL), 0);
		soft_net_wait_join(&w);
		CHECK_EQ(w.rc, 1);
		CHECK_EQ(w.wc.wr_id, 8);
		CHECK_EQ(w.wc.opcode, RPCRDMA_WC_RECV);
		CHECK_EQ(w.wc.byte_len, 10);
	}
	/* armed fd, completion made in this thread by post_send */
	{
		struct rpcrdma_send_wr wr = {.wr_id = 11, .sg_list = &sg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_RDMA_WRITE,
					     .flags = RPCRDMA_SEND_SIGNALED,
					     .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(tmr),
							.stag = rpcrdma_mr_rkey(tmr)}};
		struct pollfd p = {.fd = rpcrdma_cq_fd(n.ccq), .events = POLLIN};

		while (rpcrdma_cq_get_event(n.ccq) == 1)
			;
		REQUIRE_EQ(rpcrdma_cq_arm(n.ccq, false), 0);
		CHECK_EQ(rpcrdma_cq_poll(n.ccq, 1, &wc), 0);
		REQUIRE_EQ(rpcrdma_post_send(c, &wr, NULL), 0);
		CHECK_EQ(poll(&p, 1, 5000), 1);
		CHECK_EQ(rpcrdma_cq_get_event(n.ccq), 1);
		REQUIRE_EQ(rpcrdma_cq_poll(n.ccq, 1, &wc), 1);
		CHECK_EQ(wc.wr_id, 11);
	}
	soft_net_unpair(c, s, cid, sid);
	CHECK_EQ(rpcrdma_dereg_mr(bmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(tmr), 0);
	soft_net_down(&n);
}

/* 100 connections, all client QPs on one CQ and all server QPs on another
 * (the previous provider tracked at most 64 QPs per CQ): every Send is
 * received through a single waiting consumer. */
TEST(soft_many_qps_on_one_cq)
{
	enum { NQ = 100 };
	struct net n;
	static struct rpcrdma_qp *c[NQ], *s[NQ];
	static struct rpcrdma_cm_id *cid[NQ], *sid[NQ];
	static uint8_t rbuf[NQ][16], sbuf[NQ][16];
	struct rpcrdma_mr *rmr, *smr;
	int seen[NQ] = {0}, got = 0;

	/* each CQ holds what its QPs' queues may complete: 8 + 8 each */
	soft_net_up(&n, NQ * 16, 256);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, rbuf, sizeof(rbuf), RPCRDMA_ACCESS_LOCAL_WRITE, &rmr), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, sbuf, sizeof(sbuf), RPCRDMA_ACCESS_LOCAL_WRITE, &smr), 0);
	for (int i = 0; i < NQ; i++) {
		struct rpcrdma_sge rs = {(uintptr_t)rbuf[i], 16, rpcrdma_mr_lkey(rmr)};
		struct rpcrdma_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &rs, .num_sge = 1};

		c[i] = soft_net_qp(&n, n.ccq, 8);
		s[i] = soft_net_qp(&n, n.scq, 8);
		REQUIRE_EQ(rpcrdma_post_recv(s[i], &rw, NULL), 0);
		soft_net_link(&n, c[i], s[i], &cid[i], &sid[i]);
	}
	for (int i = 0; i < NQ; i++) {
		struct rpcrdma_sge ss = {(uintptr_t)sbuf[i], 4, rpcrdma_mr_lkey(smr)};
		struct rpcrdma_send_wr sw = {.sg_list = &ss, .num_sge = 1, .opcode = RPCRDMA_WR_SEND};

		memcpy(sbuf[i], &i, 4);
		REQUIRE_EQ(rpcrdma_post_send(c[i], &sw, NULL), 0);
	}
	while (got < NQ) {
		struct rpcrdma_wc wc[16];
		int k = rpcrdma_cq_wait(n.scq, 16, wc, 5000);

		REQUIRE(k > 0);
		for (int j = 0; j < k; j++) {
			int v;

			CHECK_EQ(wc[j].status, RPCRDMA_WC_SUCCESS);
			REQUIRE(wc[j].wr_id < NQ);
			CHECK(wc[j].qp == s[wc[j].wr_id]);
			memcpy(&v, rbuf[wc[j].wr_id], 4);
			CHECK_EQ(v, (int)wc[j].wr_id);
			seen[wc[j].wr_id]++;
			got++;
		}
	}
	for (int i = 0; i < NQ; i++)
		CHECK_EQ(seen[i], 1);
	for (int i = 0; i < NQ; i++)
		soft_net_unpair(c[i], s[i], cid[i], sid[i]);
	CHECK_EQ(rpcrdma_dereg_mr(rmr), 0);
	CHECK_EQ(rpcrdma_dereg_mr(smr), 0);
	soft_net_down(&n);
}

/* The peer goes away while this side sleeps in rpcrdma_cq_wait: the waiter
 * receives the EOF itself, its posted receive is flushed and reported, and
 * the dead socket no longer wakes the CQ (a later wait times out). */
TEST(soft_cq_wait_sees_peer_close)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	static uint8_t buf[64];
	struct rpcrdma_mr *mr;
	struct soft_net_waiter w;
	struct rpcrdma_wc wc;

	soft_net_up(&n, 1024, 256);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE, &mr), 0);
	{
		struct rpcrdma_sge sg = {(uintptr_t)buf, sizeof(buf), rpcrdma_mr_lkey(mr)};
		struct rpcrdma_recv_wr rw = {.wr_id = 77, .sg_list = &sg, .num_sge = 1};

		REQUIRE_EQ(rpcrdma_post_recv(c, &rw, NULL), 0);
	}
	soft_net_wait_start(&w, n.ccq, RR_TEST_WAIT_MS);
	REQUIRE(soft_net_until_waiting(n.ccq, 1));
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0); /* the server side closes */
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 77);
	CHECK_EQ(w.wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK(!soft_net_qp_of(c)->cq_watched);
	{
		uint64_t t0 = rr_now_ns(NULL);

		/* a lower bound: the dead socket does not end waits early */
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 100), 0);
		CHECK(rr_now_ns(NULL) - t0 >= 90000000ull);
	}
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	CHECK_EQ(rpcrdma_dereg_mr(mr), 0);
	soft_net_down(&n);
}
