/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's wait for one QP's completions on a CQ that other QPs
 * share (the wait_qp op, rr_qp_wait: src/rdma/soft/cq_wait.c): the caller
 * receives for its QP in its own thread while another thread waits on the
 * CQ; its completions come to it alone, the other QPs' to the CQ's waiter;
 * what the ring holds of its QP comes first, and never ahead of an older
 * one the CQ's consumer took; a disconnect ends the wait with the flushed
 * Receives. Two endpoints over loopback TCP through the public API. */
#include "test.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "rdma/provider.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (1u << 20)

/* Two client QPs on the client CQ, each linked to a server QP on the
 * server CQ. */
struct two {
	struct net n;
	struct rpcrdma_qp *c[2], *s[2];
	struct rpcrdma_cm_id *cid[2], *sid[2];
};

static void two_qps(struct two *t)
{
	for (int i = 0; i < 2; i++) {
		t->c[i] = soft_net_qp(&t->n, t->n.ccq, 16);
		t->s[i] = soft_net_qp(&t->n, t->n.scq, 16);
		soft_net_link(&t->n, t->c[i], t->s[i], &t->cid[i], &t->sid[i]);
	}
}

static void two_up(struct two *t)
{
	soft_net_up_buf(&t->n, 256, 16, NET_BUF);
	two_qps(t);
}

static void two_down(struct two *t)
{
	for (int i = 0; i < 2; i++)
		soft_net_unpair(t->c[i], t->s[i], t->cid[i], t->sid[i]);
	soft_net_down(&t->n);
}

/* The client CQ attended by this thread until the progress thread handed
 * both QPs back (it serves them while nobody does). */
static void attend(struct two *t)
{
	struct rpcrdma_wc wc;

	for (int i = 0; i < 5000; i++) {
		CHECK_EQ(rpcrdma_cq_wait(t->n.ccq, 1, &wc, 1), 0);
		if (!soft_net_handed(t->c[0]) && !soft_net_handed(t->c[1]))
			break;
	}
	REQUIRE(!soft_net_handed(t->c[0]) && !soft_net_handed(t->c[1]));
}

/* Posts a Send of @len bytes on @qp once a caller reads @waited itself
 * (own_wait and fast_rd: its socket out of the CQ's epoll set), or
 * disconnects @id then. */
struct sender {
	struct two *t;
	struct rpcrdma_qp *waited, *qp;
	struct rpcrdma_cm_id *id;
	uint32_t len;
	int rc;
	pthread_t th;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct soft_qp *w = soft_net_qp_of(s->waited);

	s->rc = -ETIMEDOUT;
	for (long i = 0; i < 50000000; i++) {
		if (__atomic_load_n(&w->own_wait, __ATOMIC_SEQ_CST) &&
		    __atomic_load_n(&w->fast_rd, __ATOMIC_SEQ_CST)) {
			s->rc = s->id ? rpcrdma_disconnect(s->id)
				      : soft_net_try_post_send(&s->t->n, s->qp, 7, RPCRDMA_WR_SEND,
							       0, s->len, 0, false);
			break;
		}
		sched_yield();
	}
	return NULL;
}

/* The caller's own Receive completion comes to it through rr_qp_wait while
 * another thread waits on the CQ, which gets the other QP's. The caller
 * sleeps in its read at once, without the fast wait's spin (on a context
 * that spins 200 us): its CQ counts no spin. */
TEST(soft_wait_qp_own_completions_while_cq_waited)
{
	struct two t;
	struct soft_net_waiter w;
	struct sender snd = {0};
	struct rpcrdma_wc wc[4];
	struct rr_qp_seen seen = {0, 0};
	struct soft_cq *q;
	int r = 0;

	setenv("RPCRDMA_SOFT_SPIN_US", "200", 1);
	two_up(&t);
	unsetenv("RPCRDMA_SOFT_SPIN_US");
	q = soft_net_cq_of(t.n.ccq);
	CHECK(rr_qp_can_wait(t.c[0]));
	attend(&t);
	soft_net_post_recv(&t.n, t.c[0], 11, 4096, 256);
	soft_net_post_recv(&t.n, t.c[1], 21, 8192, 256);
	soft_net_wait_start(&w, t.n.ccq, RR_TEST_WAIT_MS);
	REQUIRE(soft_net_until_waiting(t.n.ccq, 1));
	memset(t.n.buf, 0x5a, 100);
	snd = (struct sender){.t = &t, .waited = t.c[0], .qp = t.s[0], .len = 100};
	REQUIRE_EQ(pthread_create(&snd.th, NULL, sender_main, &snd), 0);
	/* a wait may end with nothing (its read's slice, a piece read) */
	for (int i = 0; i < 100 && r == 0; i++)
		r = rr_qp_wait(t.c[0], 4, wc, RR_TEST_WAIT_MS, &seen);
	pthread_join(snd.th, NULL);
	CHECK_EQ(snd.rc, 0);
	REQUIRE_EQ(r, 1);
	CHECK(wc[0].qp == t.c[0]);
	CHECK_EQ(wc[0].wr_id, 11u);
	CHECK_EQ(wc[0].opcode, RPCRDMA_WC_RECV);
	CHECK_EQ(wc[0].status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc[0].byte_len, 100u);
	CHECK_EQ(t.n.buf[4096 + 99], 0x5a);
	CHECK(atomic_load(&q->qp_waits) >= 1);
	CHECK(atomic_load(&q->qp_direct) >= 1);
	CHECK_EQ(atomic_load(&q->spin_hits) + atomic_load(&q->spin_misses), 0u);
	/* the CQ's waiter was not given it: it gets the other QP's */
	soft_net_post_send(&t.n, t.s[1], 8, RPCRDMA_WR_SEND, 0, 40, 0, false);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK(w.wc.qp == t.c[1]);
	CHECK_EQ(w.wc.wr_id, 21u);
	/* back in the CQ's epoll set: the CQ's waiters receive for it again */
	CHECK(soft_net_qp_of(t.c[0])->cq_watched);
	CHECK(!soft_net_qp_of(t.c[0])->own_wait);
	soft_net_post_recv(&t.n, t.c[0], 12, 4096, 256);
	soft_net_post_send(&t.n, t.s[0], 9, RPCRDMA_WR_SEND, 0, 30, 0, false);
	REQUIRE_EQ(rpcrdma_cq_wait(t.n.ccq, 4, wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc[0].wr_id, 12u);
	/* a wait shorter than a read's slice is not taken */
	CHECK_EQ(rr_qp_wait(t.c[0], 4, wc, 1, &seen), -EAGAIN);
	two_down(&t);
}

/* Two Receive completions of one QP: the CQ's consumer polls the first,
 * the second stays in the ring. A caller that has not been given the first
 * (seen) must not take the second ahead of it: -EAGAIN, it waits through
 * the CQ; once it has had the first, the second comes from the ring. */
TEST(soft_wait_qp_never_overtakes_the_cq_consumer)
{
	struct two t;
	struct soft_net_clock clk = {0};
	struct rpcrdma_env env;
	struct rpcrdma_wc wc[4];
	struct rr_qp_seen seen = {0, 0};
	int got = 0;

	/* On the real clock the CQ's lease (SOFT_LEASE_NS after attend's
	 * last wait) could end while the test posts and waits: the progress
	 * thread then takes the QPs back and reads the socket itself, whose
	 * bytes the test waits for in vain (seen once in a TCG lab VM at host
	 * load ~25). The context's clock is held still from attend to the
	 * end: the lease ends only when the test lets the clock go. Every
	 * wait below is bounded by real time (the socket's, the test's). */
	soft_net_held_env(&env, &clk);
	soft_net_up_env(&t.n, 256, 16, NET_BUF, &env);
	two_qps(&t);
	attend(&t);
	atomic_store(&clk.held_ns, soft_net_real_now_ns());
	soft_net_post_recv(&t.n, t.c[0], 11, 4096, 256);
	soft_net_post_recv(&t.n, t.c[0], 12, 8192, 256);
	soft_net_post_send(&t.n, t.s[0], 1, RPCRDMA_WR_SEND, 0, 20, 0, false);
	soft_net_post_send(&t.n, t.s[0], 2, RPCRDMA_WR_SEND, 0, 24, 0, false);
	REQUIRE(soft_net_until_socket_holds(t.c[0],
					    soft_net_send_fpdu(20) + soft_net_send_fpdu(24)));
	for (int i = 0; i < 100 && got == 0; i++)
		got = rpcrdma_cq_poll(t.n.ccq, 1, wc);
	REQUIRE_EQ(got, 1);
	CHECK_EQ(wc[0].wr_id, 11u);
	REQUIRE_EQ(rr_cq_ring_count(&soft_net_cq_of(t.n.ccq)->ring), 1u);
	CHECK_EQ(rr_qp_wait(t.c[0], 4, wc, RR_TEST_WAIT_MS, &seen), -EAGAIN);
	CHECK_EQ(rr_cq_ring_count(&soft_net_cq_of(t.n.ccq)->ring), 1u);
	seen.rq = 1;
	REQUIRE_EQ(rr_qp_wait(t.c[0], 4, wc, RR_TEST_WAIT_MS, &seen), 1);
	CHECK_EQ(wc[0].wr_id, 12u);
	CHECK_EQ(wc[0].byte_len, 24u);
	CHECK_EQ(rr_cq_ring_count(&soft_net_cq_of(t.n.ccq)->ring), 0u);
	/* nothing more: a wait of one slice ends with none */
	CHECK_EQ(rr_qp_wait(t.c[0], 4, wc, 5, &seen), 0);
	atomic_store(&clk.held_ns, 0);
	two_down(&t);
}

/* The peer disconnects while the caller sleeps in its QP's read: the wait
 * ends with the QP's Receive flushed, given to the caller, and the dead
 * socket stays out of the CQ's epoll set. */
TEST(soft_wait_qp_disconnect_ends_the_wait)
{
	struct two t;
	struct sender snd;
	struct rpcrdma_wc wc[4];
	struct rr_qp_seen seen = {0, 0};
	int r = 0;

	two_up(&t);
	attend(&t);
	soft_net_post_recv(&t.n, t.c[0], 11, 4096, 256);
	snd = (struct sender){.t = &t, .waited = t.c[0], .id = t.sid[0]};
	REQUIRE_EQ(pthread_create(&snd.th, NULL, sender_main, &snd), 0);
	for (int i = 0; i < 100 && r == 0; i++)
		r = rr_qp_wait(t.c[0], 4, wc, RR_TEST_WAIT_MS, &seen);
	pthread_join(snd.th, NULL);
	CHECK_EQ(snd.rc, 0);
	REQUIRE_EQ(r, 1);
	CHECK_EQ(wc[0].wr_id, 11u);
	CHECK_EQ(wc[0].status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK(!soft_net_qp_of(t.c[0])->cq_watched);
	CHECK(!soft_net_qp_of(t.c[0])->own_wait);
	/* not connected any more: refused */
	CHECK_EQ(rr_qp_wait(t.c[0], 4, wc, RR_TEST_WAIT_MS, &seen), -EAGAIN);
	two_down(&t);
}
