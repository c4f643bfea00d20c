/* SPDX-License-Identifier: BSD-2-Clause */
/* The library's own CQ wait (rr_cq_wait_own, the soft provider's
 * wait_cq_own op: src/rdma/soft/cq_wait.c soft_wait with its start dated
 * by the first clock read it needs) against the public rpcrdma_cq_wait:
 * the same scenario run twice over loopback TCP, once through each, must
 * give the same completions in the same order with the same statuses --
 * Replies already in the socket when the wait starts and Replies sent
 * once the waiter is inside, signaled Sends' completions in the ring
 * ahead of them, arrays of 1 to 4 entries, a second QP on the same CQ
 * (the general epoll wait), then a disconnect's flushed Receives. And the
 * own wait that brings nothing still ends (never before its timeout). */
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "rdma/provider.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (1u << 20)
#define ROUNDS 60
#define MAXREC 512

struct rec {
	uint64_t wr_id;
	int status, opcode, qp;
	uint32_t byte_len;
};

struct run {
	struct net n;
	struct rpcrdma_qp *c[2], *s[2];
	struct rpcrdma_cm_id *cid[2], *sid[2];
	bool own;
	struct rec r[MAXREC];
	int nr;
};

static int wait_via(struct run *u, struct rpcrdma_wc *wc, int n, int ms)
{
	return u->own ? rr_cq_wait_own(u->n.ccq, n, wc, ms) : rpcrdma_cq_wait(u->n.ccq, n, wc, ms);
}

/* The client CQ's waits until @want completions were recorded (arrays of
 * @n entries). */
static void collect(struct run *u, int n, int want)
{
	struct rpcrdma_wc wc[4];

	for (int tries = 0; u->nr < want && tries < 200; tries++) {
		int got = wait_via(u, wc, n, RR_TEST_WAIT_MS);

		REQUIRE(got >= 0);
		for (int k = 0; k < got && u->nr < MAXREC; k++)
			u->r[u->nr++] = (struct rec){wc[k].wr_id, (int)wc[k].status, (int)wc[k].opcode,
						     wc[k].qp == u->c[0] ? 0 : wc[k].qp == u->c[1] ? 1 : -1,
						     wc[k].status == RPCRDMA_WC_SUCCESS ? wc[k].byte_len : 0};
	}
	REQUIRE_EQ(u->nr, want);
}

/* A server Send of @len bytes on @qp once the client CQ has a waiter
 * inside (the Reply that comes after the wait starts). */
struct later {
	struct run *u;
	struct rpcrdma_qp *qp;
	uint32_t len;
	int rc;
	pthread_t th;
};

static void *later_main(void *arg)
{
	struct later *l = arg;

	l->rc = -ETIMEDOUT;
	if (soft_net_until_waiting(l->u->n.ccq, 1))
		l->rc = soft_net_try_post_send(&l->u->n, l->qp, 900, RPCRDMA_WR_SEND, 512, l->len, 0,
					       false);
	return NULL;
}

/* The server takes one Call (the general wait on its CQ). */
static void server_take(struct run *u)
{
	struct rpcrdma_wc wc;

	REQUIRE_EQ(rpcrdma_cq_wait(u->n.scq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
}

static void scenario(struct run *u)
{
	int want = 0;

	soft_net_up_buf(&u->n, 256, 16, NET_BUF);
	soft_net_pair(&u->n, 32, &u->c[0], &u->s[0], &u->cid[0], &u->sid[0]);
	/* the client CQ attended until the progress thread handed the new QP
	 * over (until then it reads the socket: a Reply "before" the wait
	 * would be in the ring, never in the socket) */
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the progress thread hands the new QP over");) {
		struct rpcrdma_wc wc;

		REQUIRE_EQ(wait_via(u, &wc, 1, 1), 0);
		if (!soft_net_handed(u->c[0]))
			break;
	}
	/* one QP: the fast wait; the Reply before the wait or after */
	for (uint32_t i = 0; i < ROUNDS; i++) {
		bool sig = i % 3 == 0, before = i % 2 == 0;
		uint32_t len = 16 + i % 5 * 8;

		soft_net_post_recv(&u->n, u->s[0], 500 + i, 4096, 256);
		soft_net_post_recv(&u->n, u->c[0], 100 + i, 8192 + 256 * (i % 8), 256);
		soft_net_post_send(&u->n, u->c[0], 300 + i, RPCRDMA_WR_SEND, 0, 32, 0, sig);
		want += sig ? 2 : 1;
		server_take(u);
		if (before) {
			soft_net_post_send(&u->n, u->s[0], 900, RPCRDMA_WR_SEND, 512, len, 0, false);
			/* (the progress thread may have read it: then it waits
			 * in the ring, before the wait as well) */
			(void)soft_net_until_socket_holds(u->c[0], soft_net_send_fpdu(len));
			collect(u, 1 + (int)(i % 4), want);
		} else {
			struct later l = {.u = u, .qp = u->s[0], .len = len};

			REQUIRE_EQ(pthread_create(&l.th, NULL, later_main, &l), 0);
			collect(u, 1 + (int)(i % 4), want);
			pthread_join(l.th, NULL);
			CHECK_EQ(l.rc, 0);
		}
	}
	/* a second QP on the same CQ: the general (epoll) wait */
	{
		u->c[1] = soft_net_qp(&u->n, u->n.ccq, 16);
		u->s[1] = soft_net_qp(&u->n, u->n.scq, 16);
		soft_net_link(&u->n, u->c[1], u->s[1], &u->cid[1], &u->sid[1]);
	}
	for (uint32_t i = 0; i < 20; i++) {
		for (int q = 0; q < 2; q++) {
			soft_net_post_recv(&u->n, u->c[q], 2000 + 10 * i + (uint32_t)q,
					   8192 + 256 * (uint32_t)q, 256);
			soft_net_post_send(&u->n, u->s[q], 900, RPCRDMA_WR_SEND, 512,
					   24 + (uint32_t)q * 8, 0, false);
			/* one after the other: the order is the Sends' */
			want++;
			collect(u, 1 + (int)(i % 4), want);
		}
	}
	/* flushed Receives: the first QP's disconnect */
	for (uint32_t i = 0; i < 5; i++)
		soft_net_post_recv(&u->n, u->c[0], 7000 + i, 8192, 256);
	want += 5;
	REQUIRE_EQ(rpcrdma_disconnect(u->cid[0]), 0);
	collect(u, 4, want);
	for (int q = 0; q < 2; q++)
		soft_net_unpair(u->c[q], u->s[q], u->cid[q], u->sid[q]);
	soft_net_down(&u->n);
}

TEST(soft_wait_own_equals_cq_wait)
{
	struct run *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));

	REQUIRE(a && b);
	a->own = false;
	b->own = true;
	scenario(a);
	scenario(b);
	REQUIRE_EQ(a->nr, b->nr);
	for (int i = 0; i < a->nr; i++) {
		CHECK_EQ(a->r[i].wr_id, b->r[i].wr_id);
		CHECK_EQ(a->r[i].status, b->r[i].status);
		CHECK_EQ(a->r[i].opcode, b->r[i].opcode);
		CHECK_EQ(a->r[i].qp, b->r[i].qp);
		CHECK_EQ(a->r[i].byte_len, b->r[i].byte_len);
	}
	/* the run covered what it says: Sends' completions, Receives on
	 * both QPs, flushes */
	{
		int sends = 0, q1 = 0, flushed = 0;

		for (int i = 0; i < b->nr; i++) {
			sends += b->r[i].opcode == RPCRDMA_WC_SEND;
			q1 += b->r[i].qp == 1;
			flushed += b->r[i].status == RPCRDMA_WC_WR_FLUSH_ERR;
		}
		CHECK_EQ(sends, ROUNDS / 3);
		CHECK_EQ(q1, 20);
		CHECK_EQ(flushed, 5);
	}
	free(a);
	free(b);
}

/* An own wait that brings nothing ends with 0, not before its timeout
 * (the deadline dated after the first slice may only make it later). */
TEST(soft_wait_own_empty_ends)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_post_recv(&n, c, 1, 8192, 256);
	for (int ms = 1; ms <= 12; ms += 11) {
		uint64_t t0 = soft_net_real_now_ns(), dt;

		CHECK_EQ(rr_cq_wait_own(n.ccq, 1, &wc, ms), 0);
		dt = soft_net_real_now_ns() - t0;
		CHECK(dt >= (uint64_t)ms * 1000000u);
	}
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The own wait whose first look finds only Sends' completions keeps them
 * for its first fast slice and returns them with what that slice brings
 * (issue 16 part IB: a synchronous Call's signaled Send and its Reply in
 * one wait); any other completion it returns at once. Client QP @c, its
 * CQ attended (not handed to the progress thread). Each round: the
 * client's signaled @op (a Send, or an RDMA Write into the server's
 * buffer, both completed when posted), the server's Reply already in the
 * client's socket when the own wait (an array of 4) starts. A round counts
 * when the Reply's bytes were still in the socket and the QP with its
 * consumer just before the wait (else the progress thread may have read
 * it into the ring, where any wait finds both). Returns how many rounds
 * counted; *@together: how many of those returned both in one wait. */
static int keep_rounds(struct net *n, struct rpcrdma_qp *c, struct rpcrdma_qp *s,
		       enum rpcrdma_wr_opcode op, int *together)
{
	int counted = 0;

	*together = 0;
	for (uint32_t i = 0; i < 20 && counted < 3; i++) {
		struct rpcrdma_wc wc[4];
		bool fresh;
		int got, total = 0;

		soft_net_post_recv(n, s, 500 + i, 4096, 256);
		soft_net_post_recv(n, c, 100 + i, 8192, 256);
		if (op != RPCRDMA_WR_SEND) /* (the server's Receive not used) */
			soft_net_post_send(n, c, 200 + i, op, 0, 32, 16384, true);
		soft_net_post_send(n, c, 300 + i, RPCRDMA_WR_SEND, 0, 32, 0,
				   op == RPCRDMA_WR_SEND);
		{
			struct rpcrdma_wc swc;

			REQUIRE_EQ(rpcrdma_cq_wait(n->scq, 1, &swc, RR_TEST_WAIT_MS), 1);
			CHECK_EQ(swc.status, RPCRDMA_WC_SUCCESS);
		}
		soft_net_post_send(n, s, 900, RPCRDMA_WR_SEND, 512, 24, 0, false);
		fresh = soft_net_until_socket_holds(c, soft_net_send_fpdu(24)) && !soft_net_handed(c);
		got = rr_cq_wait_own(n->ccq, 4, wc, RR_TEST_WAIT_MS);
		REQUIRE(got >= 1);
		/* the first is the client's signaled work request, in order */
		CHECK_EQ(wc[0].wr_id, op == RPCRDMA_WR_SEND ? 300 + i : 200 + i);
		CHECK_EQ(wc[0].status, RPCRDMA_WC_SUCCESS);
		if (got >= 2) {
			CHECK_EQ(wc[1].opcode, RPCRDMA_WC_RECV);
			CHECK_EQ(wc[1].wr_id, 100 + i);
		}
		total = got;
		while (total < 2) { /* the Reply, if not yet taken */
			int k = rr_cq_wait_own(n->ccq, 4, wc, RR_TEST_WAIT_MS);

			REQUIRE(k >= 1);
			CHECK_EQ(wc[0].opcode, RPCRDMA_WC_RECV);
			CHECK_EQ(wc[0].wr_id, 100 + i);
			total += k;
		}
		CHECK_EQ(total, 2);
		if (fresh) {
			counted++;
			*together += got == 2;
		}
	}
	return counted;
}

static void keep_setup(struct net *n, struct rpcrdma_qp **c, struct rpcrdma_qp **s,
		       struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid)
{
	soft_net_up_buf(n, 256, 16, NET_BUF);
	soft_net_pair(n, 32, c, s, cid, sid);
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the progress thread hands the new QP over");) {
		struct rpcrdma_wc wc;

		REQUIRE_EQ(rr_cq_wait_own(n->ccq, 1, &wc, 1), 0);
		if (!soft_net_handed(*c))
			break;
	}
}

TEST(soft_wait_own_keeps_a_sends_completion_for_the_reply)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	int together, counted;

	keep_setup(&n, &c, &s, &cid, &sid);
	counted = keep_rounds(&n, c, s, RPCRDMA_WR_SEND, &together);
	CHECK(counted >= 1);
	CHECK_EQ(together, counted);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

TEST(soft_wait_own_returns_a_writes_completion_at_once)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	int together, counted;

	keep_setup(&n, &c, &s, &cid, &sid);
	counted = keep_rounds(&n, c, s, RPCRDMA_WR_RDMA_WRITE, &together);
	CHECK(counted >= 1);
	CHECK_EQ(together, 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* Kept Sends' completions whose slice brings nothing are returned when it
 * ends: the wait still ends with them (never 0, never lost). */
TEST(soft_wait_own_kept_sends_return_without_a_reply)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc[4], swc;

	keep_setup(&n, &c, &s, &cid, &sid);
	soft_net_post_recv(&n, s, 500, 4096, 256);
	soft_net_post_recv(&n, s, 501, 4096 + 256, 256);
	soft_net_post_recv(&n, c, 100, 8192, 256);
	soft_net_post_send(&n, c, 300, RPCRDMA_WR_SEND, 0, 32, 0, true);
	soft_net_post_send(&n, c, 301, RPCRDMA_WR_SEND, 0, 32, 0, true);
	for (int k = 0; k < 2; k++)
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &swc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(rr_cq_wait_own(n.ccq, 4, wc, 20), 2);
	CHECK_EQ(wc[0].wr_id, 300);
	CHECK_EQ(wc[1].wr_id, 301);
	CHECK_EQ(wc[1].opcode, RPCRDMA_WC_SEND);
	/* and nothing more came */
	CHECK_EQ(rr_cq_wait_own(n.ccq, 4, wc, 6), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
