/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's look after a Send (docs/soft-iwarp.md "The look after
 * a Send"): the poll that follows an arm reads the ring only, unless a Send
 * went out on the QP its consumer last received for since; then it reads
 * that QP's socket once, so that a Reply already there is taken by that poll
 * (the consumer does not go back to epoll_wait for it). These tests show the
 * Reply taken by the poll after the arm with one socket read, on a CQ with
 * one QP (fast poll) and on one with two (epoll); no read without a Send;
 * and the adaptation: after SOFT_LOOK_MISSES looks in a row that found
 * nothing (a peer that answers late), the next SOFT_LOOK_SKIP polls after an
 * arm read nothing, and a look after them finds the Reply again. The
 * context runs on a held clock (soft_net_held_env): the CQs' leases never
 * end, so the progress thread never takes the QPs (it would read the
 * sockets itself). Two endpoints over loopback TCP through the public API
 * (RFC 5040 Send). */
#include "test.h"

#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (1u << 20)
#define MSG 8u   /* a Call's or a Reply's bytes */

struct look {
	struct soft_net_clock hc;
	struct rpcrdma_env env;
	struct net n;
	struct rpcrdma_qp *c, *s, *c2, *s2;
	struct rpcrdma_cm_id *cid, *sid, *cid2, *sid2;
	struct soft_cq *q;     /* the client's CQ */
	struct soft_qp *cq;    /* the client's QP */
	uint64_t id;
};

/* A pair on a held clock; with @two, a second, idle pair on the same CQs
 * (the client CQ then has no one QP: cq_progress's epoll path). */
static void look_up(struct look *l, bool two)
{
	struct rpcrdma_wc wc;

	memset(l, 0, sizeof(*l));
	soft_net_held_env(&l->env, &l->hc);
	atomic_store(&l->hc.held_ns, soft_net_real_now_ns());
	soft_net_up_env(&l->n, 64, 16, NET_BUF, &l->env);
	soft_net_pair(&l->n, 16, &l->c, &l->s, &l->cid, &l->sid);
	if (two) {
		l->c2 = soft_net_qp(&l->n, l->n.ccq, 16);
		l->s2 = soft_net_qp(&l->n, l->n.scq, 16);
		soft_net_link(&l->n, l->c2, l->s2, &l->cid2, &l->sid2);
	}
	l->q = soft_net_cq_of(l->n.ccq);
	l->cq = soft_net_qp_of(l->c);
	l->id = 1;
	/* the consumers come: the progress thread, which serves new QPs
	 * until then, lets go of them (and on the held clock never takes
	 * them again) */
	CHECK_EQ(rpcrdma_cq_poll(l->n.ccq, 1, &wc), 0);
	CHECK_EQ(rpcrdma_cq_poll(l->n.scq, 1, &wc), 0);
	REQUIRE(!soft_net_handed(l->c) && !soft_net_handed(l->s));
	if (two)
		REQUIRE(!soft_net_handed(l->c2) && !soft_net_handed(l->s2));
}

static void look_down(struct look *l)
{
	if (l->c2)
		soft_net_unpair(l->c2, l->s2, l->cid2, l->sid2);
	soft_net_unpair(l->c, l->s, l->cid, l->sid);
	soft_net_down(&l->n);
}

/* One completion of @cq by plain polls (the consumer's inline receive),
 * within RR_TEST_WAIT_MS. */
static void poll_one(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	int got = 0;

	for (uint64_t dl = rr_test_deadline();
	     got == 0 && rr_test_wait_left(dl, "a completion by polling");) {
		got = rpcrdma_cq_poll(cq, 1, wc);
		if (got == 0)
			usleep(200);
	}
	REQUIRE_EQ(got, 1);
	CHECK_EQ(wc->status, RPCRDMA_WC_SUCCESS);
}

/* The client's Call: a Receive posted for its Reply, the Call sent; the
 * server receives it (by polling its CQ). */
static void call(struct look *l)
{
	struct rpcrdma_wc wc;

	soft_net_post_recv(&l->n, l->c, l->id, 4096, MSG);
	soft_net_post_recv(&l->n, l->s, 1000 + l->id, 8192, MSG);
	soft_net_post_send(&l->n, l->c, 2000 + l->id, RPCRDMA_WR_SEND, 0, MSG, 0, false);
	poll_one(l->n.scq, &wc);
	CHECK_EQ(wc.wr_id, 1000 + l->id);
}

/* The server's Reply to the last call, and it is in the client's socket. */
static void reply(struct look *l)
{
	soft_net_post_send(&l->n, l->s, 3000 + l->id, RPCRDMA_WR_SEND, 8192, MSG, 0, false);
	REQUIRE(soft_net_until_socket_holds(l->c, soft_net_send_fpdu(MSG)));
}

/* Arm the client CQ, then poll once: what that poll returns (@wc: its
 * completion) and *@reads the client QP's socket reads it made. */
static int arm_poll(struct look *l, struct rpcrdma_wc *wc, uint64_t *reads)
{
	uint64_t r0 = l->cq->rx_reads;
	int got;

	REQUIRE_EQ(rpcrdma_cq_arm(l->n.ccq, false), 0);
	got = rpcrdma_cq_poll(l->n.ccq, 1, wc);
	*reads = l->cq->rx_reads - r0;
	return got;
}

/* Rounds of Call, Reply in the socket, arm and poll: from the second on
 * (the first Reply is received by a plain poll, which notes the QP), the
 * poll after the arm takes the Reply with one socket read. */
static void replies_taken_after_the_arm(bool two)
{
	struct look l;
	struct rpcrdma_wc wc;
	uint64_t reads;

	look_up(&l, two);
	REQUIRE(two == (atomic_load(&l.q->one_qp) == NULL));
	call(&l);
	reply(&l);
	poll_one(l.n.ccq, &wc);
	CHECK_EQ(wc.wr_id, l.id);
	/* no Send since: the poll after an arm reads nothing */
	CHECK_EQ(arm_poll(&l, &wc, &reads), 0);
	CHECK_EQ(reads, 0u);
	CHECK_EQ(atomic_load(&l.q->look_hits) + atomic_load(&l.q->look_misses), 0u);
	for (int i = 1; i <= 5; i++) {
		l.id++;
		call(&l);
		reply(&l);
		/* the property: taken by the poll after the arm */
		REQUIRE_EQ(arm_poll(&l, &wc, &reads), 1);
		CHECK_EQ(wc.wr_id, l.id);
		CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
		CHECK_EQ(wc.byte_len, MSG);
		CHECK_EQ(reads, 1u);
		CHECK_EQ(atomic_load(&l.q->look_hits), (uint64_t)i);
		CHECK_EQ(atomic_load(&l.q->look_misses), 0u);
		/* one look per Send: the next poll after an arm reads nothing */
		CHECK_EQ(arm_poll(&l, &wc, &reads), 0);
		CHECK_EQ(reads, 0u);
	}
	look_down(&l);
}

TEST(soft_look_after_send_takes_the_reply)
{
	replies_taken_after_the_arm(false);
}

TEST(soft_look_after_send_takes_the_reply_two_qps)
{
	replies_taken_after_the_arm(true);
}

/* A peer that answers late: each poll after an arm that follows a Call
 * reads the socket once and finds nothing; after SOFT_LOOK_MISSES of them
 * the next SOFT_LOOK_SKIP polls after an arm read nothing (a Call between
 * them or not); then a Reply received notes the QP again and the look
 * after the next Call takes its Reply. */
TEST(soft_look_after_send_stops_after_misses)
{
	struct look l;
	struct rpcrdma_wc wc;
	uint64_t reads;

	look_up(&l, false);
	call(&l);
	reply(&l);
	poll_one(l.n.ccq, &wc);
	CHECK_EQ(wc.wr_id, l.id);
	for (unsigned k = 0; k < SOFT_LOOK_MISSES; k++) {
		l.id++;
		call(&l);   /* not answered */
		CHECK_EQ(arm_poll(&l, &wc, &reads), 0);
		CHECK_EQ(reads, 1u);   /* looked: EAGAIN */
		CHECK_EQ(atomic_load(&l.q->look_misses), (uint64_t)k + 1);
	}
	CHECK_EQ(atomic_load(&l.q->look_skip), SOFT_LOOK_SKIP);
	/* the property: a Call, and the poll after the arm does not look */
	l.id++;
	call(&l);
	CHECK_EQ(arm_poll(&l, &wc, &reads), 0);
	CHECK_EQ(reads, 0u);
	CHECK_EQ(atomic_load(&l.q->look_misses), (uint64_t)SOFT_LOOK_MISSES);
	for (unsigned k = 1; k < SOFT_LOOK_SKIP; k++) {
		CHECK_EQ(arm_poll(&l, &wc, &reads), 0);
		CHECK_EQ(reads, 0u);
	}
	CHECK_EQ(atomic_load(&l.q->look_skip), 0);
	CHECK_EQ(atomic_load(&l.q->look_hits), 0u);
	/* the late Replies (one per Call made), received by plain polls:
	 * the QP noted again */
	for (uint64_t i = 2; i <= l.id; i++) {
		soft_net_post_send(&l.n, l.s, 3000 + i, RPCRDMA_WR_SEND, 8192, MSG, 0, false);
		poll_one(l.n.ccq, &wc);
		CHECK_EQ(wc.wr_id, i);
	}
	l.id++;
	call(&l);
	reply(&l);
	REQUIRE_EQ(arm_poll(&l, &wc, &reads), 1);
	CHECK_EQ(wc.wr_id, l.id);
	CHECK_EQ(reads, 1u);
	CHECK_EQ(atomic_load(&l.q->look_hits), 1u);
	CHECK_EQ(atomic_load(&l.q->look_miss), 0);
	look_down(&l);
}

/* A look that completes a Read (the Response read by the look gives a
 * send-queue completion, not a receive one) hands it over too: what the
 * look pushed used the arm up without a notification, so the poll after
 * the arm must return it (else it would stay in the ring with nobody told:
 * the hang of xprt_pipe_rpc_inline_handlers_64 in this part's first try). */
TEST(soft_look_after_send_takes_a_read_response)
{
	struct look l;
	struct rpcrdma_wc wc;
	struct rpcrdma_mr *src;
	uint64_t reads;
	int avail = 0, got = 0;

	look_up(&l, false);
	call(&l);
	reply(&l);
	poll_one(l.n.ccq, &wc);
	CHECK_EQ(wc.wr_id, l.id);
	for (uint32_t i = 0; i < 64; i++)
		l.n.buf[i] = (uint8_t)(i * 7 + 1);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(l.n.pd, l.n.buf, 64, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &src), 0);
	/* a Send (the look's condition) and a signaled Read of 64 bytes */
	l.id++;
	soft_net_post_recv(&l.n, l.s, 1000 + l.id, 8192, MSG);
	soft_net_post_send(&l.n, l.c, 2000 + l.id, RPCRDMA_WR_SEND, 0, MSG, 0, false);
	{
		struct rpcrdma_sge sg = {(uintptr_t)l.n.buf + 16384, 64, rpcrdma_mr_lkey(l.n.mr)};
		struct rpcrdma_send_wr wr = {.wr_id = 77, .sg_list = &sg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_RDMA_READ,
					     .flags = RPCRDMA_SEND_SIGNALED,
					     .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(src),
							.stag = rpcrdma_mr_rkey(src)}};

		REQUIRE_EQ(rpcrdma_post_send(l.c, &wr, NULL), 0);
	}
	/* the server's consumer receives the Send and answers the Read
	 * Request; until the whole Response is in the client's socket */
	for (uint64_t dl = rr_test_deadline();
	     avail < (int)(64 + 20) && rr_test_wait_left(dl, "the Read Response");) {
		if (got == 0 && rpcrdma_cq_poll(l.n.scq, 1, &wc) == 1) {
			CHECK_EQ(wc.wr_id, 1000 + l.id);
			got = 1;
		}
		REQUIRE_EQ(ioctl(l.cq->obj.fd, FIONREAD, &avail), 0);
		if (avail < (int)(64 + 20))
			usleep(200);
	}
	REQUIRE(got == 1);
	/* the property: the Read's completion from the poll after the arm */
	REQUIRE_EQ(arm_poll(&l, &wc, &reads), 1);
	CHECK_EQ(wc.wr_id, 77u);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_RDMA_READ);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(memcmp(l.n.buf + 16384, l.n.buf, 64), 0);
	CHECK_EQ(atomic_load(&l.q->look_hits), 1u);
	CHECK_EQ(rpcrdma_dereg_mr(src), 0);
	look_down(&l);
}
