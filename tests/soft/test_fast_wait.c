/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's fast wait (docs/soft-iwarp.md "Fast wait"): a lone
 * waiter on a CQ with one QP sleeps in a blocking recvmsg on the QP's socket
 * (bounded by SOFT_FAST_BLOCK_MS) instead of epoll_wait + recvmsg. These
 * tests show that the path is taken, that what it cannot see directly
 * (completions made by other threads, a second waiter) still reaches the
 * consumer in bounded time and turns the fast wait off for a while, that a
 * disconnect or a destroy while the waiter sleeps neither hangs nor touches
 * freed memory, that a CQ with two QPs uses the general path, and that large
 * messages and RDMA Writes arrive intact through it. Two endpoints over
 * loopback TCP through the public API (RFC 5040 Send, RDMA Write). */
#include "test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

/* "Woken, not timed out": the waits below are given RR_TEST_WAIT_MS and
 * must end within RR_TEST_PROMPT_NS (tests/test.h): without the wake-up
 * mechanisms they would last their whole timeout or forever. */
#define PROMPT_NS RR_TEST_PROMPT_NS
#define WAIT_MS RR_TEST_WAIT_MS

#define NET_BUF (2u << 20)

/* Ping-pong through rpcrdma_cq_wait: the waits of both sides (one QP per
 * CQ, one waiter) are fast reads, and every message arrives in order. */
TEST(soft_fast_wait_ping_pong)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < 200; i++) {
		soft_net_post_recv(&n, s, 1000 + i, 4096, 256);
		soft_net_post_recv(&n, c, 2000 + i, 8192, 256);
		memcpy(n.buf, &i, sizeof(i));
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64 + i % 7, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 1000 + i);
		CHECK_EQ(wc.byte_len, 64 + i % 7);
		CHECK_EQ(memcmp(n.buf + 4096, &i, sizeof(i)), 0);
		soft_net_post_send(&n, s, 2, RPCRDMA_WR_SEND, 4096, 32, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 2000 + i);
		CHECK_EQ(memcmp(n.buf + 8192, &i, sizeof(i)), 0);
	}
	/* every wait but the odd one that found its completion already there */
	CHECK(atomic_load(&soft_net_cq_of(n.ccq)->fast_reads) >= 100);
	CHECK(atomic_load(&soft_net_cq_of(n.scq)->fast_reads) >= 100);
	CHECK_EQ(atomic_load(&soft_net_cq_of(n.ccq)->fast_foreign), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A fast waiter's own receive completions go straight into its array
 * (soft_cq_push, no ring) while nothing older is in the ring; what does not
 * fit goes to the ring and comes next. Twelve Sends wait in the socket
 * behind a completion already in the ring (the server's own signaled Send):
 * waits of up to 5 entries must return that one first, then the receives
 * in order, each with its length and bytes. */
TEST(soft_fast_wait_direct_in_order)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc[5];
	struct soft_net_clock clk = {0};
	struct rpcrdma_env env;
	uint32_t got = 0, rounds = 0;

	/* On the real clock the server CQ's lease (SOFT_LEASE_NS after the
	 * waiter's last wait) could end while the test posts the twelve
	 * Sends and waits for their bytes in the server's socket: the
	 * progress thread then takes the QP back and reads the socket itself,
	 * and the bytes the test waits for never gather there (seen once in
	 * the Debian 12 lab VM, 2026-11-27, as test_wait_qp.c's
	 * soft_wait_qp_never_overtakes_the_cq_consumer before it). The
	 * context's clock is held still from the hand-over to the end: the
	 * lease ends only when the test lets the clock go. */
	soft_net_held_env(&env, &clk);
	soft_net_up_env(&n, 256, 16, NET_BUF, &env);
	soft_net_pair(&n, 32, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < 12; i++) {
		soft_net_post_recv(&n, s, 100 + i, 4096 + 256 * i, 256);
		soft_net_post_recv(&n, c, 200 + i, 16384 + 256 * i, 256);
	}
	/* The server CQ's consumer attends it first (waits, until the
	 * progress thread handed the new QP over): until then that thread
	 * serves it and its completions go through the ring. */
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the progress thread hands the new QP over");) {
		CHECK_EQ(rpcrdma_cq_wait(n.scq, 5, wc, 1), 0);
		if (!soft_net_handed(s))
			break;
	}
	REQUIRE(!soft_net_handed(s));
	atomic_store(&clk.held_ns, soft_net_real_now_ns());
	/* first a direct hand-over with nothing else around */
	memset(n.buf, 0xa5, 64);
	soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
	REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 5, wc, WAIT_MS), 1);
	CHECK_EQ(wc[0].wr_id, 100);
	CHECK_EQ(wc[0].byte_len, 64);
	CHECK_EQ(n.buf[4096 + 63], 0xa5);
	CHECK(soft_net_cq_of(n.scq)->fast_direct >= 1);
	/* the server's signaled Send completes into the ring at once */
	soft_net_post_send(&n, s, 50, RPCRDMA_WR_SEND, 8192, 8, 0, true);
	for (uint32_t i = 1; i < 12; i++) {
		n.buf[256 * i] = (uint8_t)i;
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 256 * i, 10 + i, 0, false);
	}
	/* all in the server's socket */
	{
		size_t bytes = 0;

		for (uint32_t i = 1; i < 12; i++)
			bytes += soft_net_send_fpdu(10 + i);
		REQUIRE(soft_net_until_socket_holds(s, bytes));
	}
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, wc, WAIT_MS), 1); /* the 8-byte Send */
	CHECK_EQ(wc[0].wr_id, 200);
	while (got < 12 && rounds++ < 50) {
		int r = rpcrdma_cq_wait(n.scq, 5, wc, WAIT_MS);

		REQUIRE(r >= 1);
		for (int k = 0; k < r; k++, got++) {
			if (got == 0) {
				CHECK_EQ(wc[k].wr_id, 50);
				CHECK_EQ(wc[k].opcode, RPCRDMA_WC_SEND);
				continue;
			}
			CHECK_EQ(wc[k].wr_id, 100 + got);
			CHECK_EQ(wc[k].opcode, RPCRDMA_WC_RECV);
			CHECK_EQ(wc[k].byte_len, 10 + got);
			CHECK_EQ(n.buf[4096 + 256 * got], (uint8_t)got);
		}
	}
	CHECK_EQ(got, 12);
	atomic_store(&clk.held_ns, 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A completion another thread pushes into the ring while the fast waiter
 * has read a message but not parsed it (SOFT_RACE_RX_READ, the waiter
 * holding its QP's rx_lock): the client's signaled Send, posted by this
 * thread, completes into the ring at once. The message's receive
 * completion must then follow it through the ring, not overtake it into
 * the waiter's array (the CQ's order): the wait returns the Send's
 * completion first, the receive's next. Fails with the ring's look
 * (rr_cq_ring_pending) taken out of rr_soft_cq_direct (cq.h). */
static struct {
	struct soft_qp *qp;
	atomic_int armed, reached, posted;
} ring_race;

static bool ring_reached(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&ring_race.reached) != 0;
}

static bool ring_posted(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&ring_race.posted) != 0;
}

static void push_while_parsing(enum soft_race pt, void *obj)
{
	if (pt != SOFT_RACE_RX_READ || obj != ring_race.qp || !atomic_exchange(&ring_race.armed, 0))
		return;
	atomic_store(&ring_race.reached, 1);
	(void)rr_test_wait_for(ring_posted, NULL, "the test posts while the ring is parsed");
}

TEST(soft_fast_wait_direct_behind_a_ring_push)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_net_waiter w;
	rr_soft_race_fn old = atomic_load(&rr_soft_race_hook);

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_post_recv(&n, c, 200, 8192, 256);
	soft_net_post_recv(&n, s, 100, 4096, 256);
	/* the client CQ's consumer attends it (the progress thread may have
	 * the new QP: its completions would go through the ring anyway) */
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the progress thread hands the new QP over");) {
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 1), 0);
		if (!soft_net_handed(c))
			break;
	}
	REQUIRE(!soft_net_handed(c));
	ring_race.qp = soft_net_qp_of(c);
	atomic_store(&ring_race.reached, 0);
	atomic_store(&ring_race.posted, 0);
	atomic_store(&ring_race.armed, 1);
	rr_soft_test_set_race_hook(push_while_parsing);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	soft_net_post_send(&n, s, 2, RPCRDMA_WR_SEND, 4096, 32, 0, false);
	REQUIRE(rr_test_wait_for(ring_reached, NULL, "the progress thread parses the Send"));
	soft_net_post_send(&n, c, 7, RPCRDMA_WR_SEND, 0, 16, 0, true);
	CHECK(rr_cq_ring_pending(&soft_net_cq_of(n.ccq)->ring));
	atomic_store(&ring_race.posted, 1);
	soft_net_wait_join(&w);
	rr_soft_test_set_race_hook(old);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 7);
	CHECK_EQ(w.wc.opcode, RPCRDMA_WC_SEND);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, WAIT_MS), 1);
	CHECK_EQ(wc.wr_id, 200);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
	CHECK_EQ(wc.byte_len, 32);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A waiter asleep in a fast read does not see a completion another thread
 * makes (a signaled Write: nothing comes back on the socket), so that
 * completion is delivered when the read's timeout ends it, promptly; the
 * fast wait is then off on that CQ (the next wait sleeps in epoll and is
 * woken at once). */
TEST(soft_fast_wait_foreign_completion)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct soft_cq *q;
	struct soft_net_waiter w;
	uint64_t reads;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	q = soft_net_cq_of(n.ccq);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	soft_net_post_send(&n, c, 7, RPCRDMA_WR_RDMA_WRITE, 0, 64, 65536, true);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 7);
	CHECK_EQ(w.wc.status, RPCRDMA_WC_SUCCESS);
	CHECK(w.ns < PROMPT_NS);
	CHECK(atomic_load(&q->fast_foreign) >= 1);
	CHECK(atomic_load(&q->fast_off_until) > rr_now_ns(NULL));
	/* off now: a second foreign completion wakes an epoll waiter at once,
	 * with no fast read */
	reads = atomic_load(&q->fast_reads);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_waiting(n.ccq, 1));
	soft_net_post_send(&n, c, 8, RPCRDMA_WR_RDMA_WRITE, 0, 64, 65536, true);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 8);
	CHECK(w.ns < PROMPT_NS);
	CHECK_EQ(atomic_load(&q->fast_reads), reads);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A disconnect from this side while the waiter sleeps in a fast read: the
 * socket's shutdown ends the read, the posted receive is flushed. */
TEST(soft_fast_wait_disconnect_while_blocked)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct soft_net_waiter w;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_post_recv(&n, c, 77, 0, 64);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	CHECK_EQ(rpcrdma_disconnect(cid), 0);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 77);
	CHECK_EQ(w.wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK(w.ns < PROMPT_NS);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The id is destroyed while the waiter sleeps in a fast read on its QP's
 * socket: the destroy makes the reader leave before it closes the socket
 * (ASan / fd reuse: nothing read from a closed socket), neither side hangs,
 * and the waiter goes on waiting on the CQ until its timeout; the QP is then
 * destroyed. Then the peer closes while a waiter sleeps. */
TEST(soft_fast_wait_destroy_while_blocked)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct soft_net_waiter w;
	uint64_t t0;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_wait_start(&w, n.ccq, 400);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	t0 = rr_now_ns(NULL);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK(rr_now_ns(NULL) - t0 < PROMPT_NS);
	soft_net_wait_join(&w);
	CHECK(w.rc >= 0);
	CHECK(w.ns < 3 * PROMPT_NS);
	/* the peer closes while the waiter sleeps: EOF ends the read, the
	 * receive posted meanwhile by this thread is flushed */
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	soft_net_post_recv(&n, c, 55, 0, 64);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 1);
	CHECK_EQ(w.wc.wr_id, 55);
	CHECK_EQ(w.wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK(w.ns < PROMPT_NS);
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* The fast wait finds the CQ's one QP without the CQ's lock (cq_wait.c
 * cq_one_hold): it counts itself in fast_hold, reads one_qp, then locks the
 * QP's rx_lock. A destroy of that QP between the read and the lock must
 * wait for it (rr_soft_cq_del_qp), or the waiter locks freed memory. The
 * hook stops the waiter at SOFT_RACE_ONE_QP (read, not locked) while this
 * thread destroys the id and the QP: it waits there until the destroy has
 * taken the QP out of the CQ (one_qp cleared), then gives the destroy up
 * to 300 ms to return. It must not return while the waiter is held: with
 * the wait in rr_soft_cq_del_qp removed it does, and this check fails (in
 * Release and ASan builds alike; the waiter then locks the freed QP's
 * rx_lock, which ASan does not see: glibc's lock is not instrumented).
 * With the wait, the waiter finds the QP closed and waits on in epoll
 * until its timeout. */
static struct {
	struct soft_cq *q;
	atomic_int armed;       /* act at the next SOFT_RACE_ONE_QP of q */
	atomic_int reached;     /* the waiter is held at the point */
	atomic_int destroyed;   /* rpcrdma_qp_destroy returned */
	atomic_int early;       /* ... while the waiter was held */
} one_race;

static bool one_qp_gone(void *arg)
{
	return atomic_load(&((struct soft_cq *)arg)->one_qp) == NULL;
}

static bool one_reached(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&one_race.reached) != 0;
}

static void hold_one_qp(enum soft_race pt, void *obj)
{
	if (pt != SOFT_RACE_ONE_QP || obj != one_race.q || !atomic_exchange(&one_race.armed, 0))
		return;
	atomic_store(&one_race.reached, 1);
	(void)rr_test_wait_for(one_qp_gone, one_race.q, "the destroy takes the one QP off the CQ");
	for (int i = 0; i < 300 && !atomic_load(&one_race.destroyed); i++)
		usleep(1000);
	atomic_store(&one_race.early, atomic_load(&one_race.destroyed));
}

TEST(soft_fast_wait_destroy_waits_for_one_qp_reader)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct soft_net_waiter w;
	rr_soft_race_fn old = atomic_load(&rr_soft_race_hook);

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	one_race.q = soft_net_cq_of(n.ccq);
	CHECK(atomic_load(&one_race.q->one_qp) == soft_net_qp_of(c));
	atomic_store(&one_race.reached, 0);
	atomic_store(&one_race.destroyed, 0);
	atomic_store(&one_race.early, 0);
	atomic_store(&one_race.armed, 1);
	rr_soft_test_set_race_hook(hold_one_qp);
	soft_net_wait_start(&w, n.ccq, 1000);
	REQUIRE(rr_test_wait_for(one_reached, NULL, "the waiter reads its one QP"));
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	atomic_store(&one_race.destroyed, 1);
	soft_net_wait_join(&w);
	rr_soft_test_set_race_hook(old);
	CHECK_EQ(atomic_load(&one_race.early), 0);
	CHECK_EQ(w.rc, 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* Two QPs on one CQ: the general path (epoll) serves both; no fast read. */
TEST(soft_fast_wait_two_qps_use_epoll)
{
	struct net n;
	struct rpcrdma_qp *c[2], *s[2];
	struct rpcrdma_cm_id *cid[2], *sid[2];
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	for (int i = 0; i < 2; i++) {
		soft_net_pair(&n, 16, &c[i], &s[i], &cid[i], &sid[i]);
	}
	for (int r = 0; r < 20; r++) {
		for (int i = 0; i < 2; i++) {
			soft_net_post_recv(&n, s[i], 100 + i, 4096, 256);
			soft_net_post_send(&n, c[i], 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
		}
		for (int i = 0; i < 2; i++) {
			REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
			CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
			CHECK(wc.wr_id == 100 || wc.wr_id == 101);
		}
	}
	CHECK_EQ(atomic_load(&soft_net_cq_of(n.scq)->fast_reads), 0);
	/* one of them gone: the other is waited on directly again */
	soft_net_unpair(c[1], s[1], cid[1], sid[1]);
	for (int r = 0; r < 5; r++) {
		soft_net_post_recv(&n, s[0], 200, 4096, 256);
		soft_net_post_send(&n, c[0], 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 200);
	}
	CHECK(atomic_load(&soft_net_cq_of(n.scq)->fast_reads) >= 1);
	soft_net_unpair(c[0], s[0], cid[0], sid[0]);
	soft_net_down(&n);
}

/* A second waiter joins while the first sleeps in a fast read: it waits in
 * epoll; two Sends arrive; each waiter gets one completion, none is left
 * asleep with a completion in the ring (the fast reader's pushes wake the
 * other waiter). */
TEST(soft_fast_wait_second_waiter)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct soft_net_waiter w[2];

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_post_recv(&n, s, 1, 4096, 256);
	soft_net_post_recv(&n, s, 2, 8192, 256);
	soft_net_wait_start(&w[0], n.scq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.scq));
	soft_net_wait_start(&w[1], n.scq, WAIT_MS);
	REQUIRE(soft_net_until_waiting(n.scq, 2));
	soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
	soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
	soft_net_wait_join(&w[0]);
	soft_net_wait_join(&w[1]);
	CHECK_EQ(w[0].rc, 1);
	CHECK_EQ(w[1].rc, 1);
	CHECK_EQ(w[0].wc.wr_id + w[1].wc.wr_id, 3);
	CHECK(w[0].ns < PROMPT_NS);
	CHECK(w[1].ns < PROMPT_NS);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* Large messages through fast reads: a 1 MiB RDMA Write (placed straight
 * into the target memory after the first read) followed by a Send, and a
 * 200000-byte Send; every byte checked. */
TEST(soft_fast_wait_large_messages)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	const uint32_t big = 1u << 20, mid = 200000;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < big; i++)
		n.buf[i] = (uint8_t)(i * 7 + 3);
	for (int r = 0; r < 3; r++) {
		memset(n.buf + big, 0, big);
		soft_net_post_recv(&n, s, 5, big, mid);
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_RDMA_WRITE, 0, big, big, false);
		soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, 0, 16, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 5);
		CHECK_EQ(wc.byte_len, 16);
		CHECK_EQ(memcmp(n.buf + big + 16, n.buf + 16, big - 16), 0);
		memset(n.buf + big, 0, mid);
		soft_net_post_recv(&n, s, 6, big, mid);
		soft_net_post_send(&n, c, 3, RPCRDMA_WR_SEND, 0, mid, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 6);
		CHECK_EQ(wc.byte_len, mid);
		CHECK_EQ(memcmp(n.buf + big, n.buf, mid), 0);
	}
	CHECK(atomic_load(&soft_net_cq_of(n.scq)->fast_reads) >= 1);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* RPCRDMA_SOFT_WAIT=epoll turns the fast wait off (read at open). */
TEST(soft_fast_wait_env_off)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	setenv("RPCRDMA_SOFT_WAIT", "epoll", 1);
	soft_net_up_buf(&n, 256, 16, NET_BUF);
	unsetenv("RPCRDMA_SOFT_WAIT");
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (int i = 0; i < 10; i++) {
		soft_net_post_recv(&n, s, 9, 4096, 256);
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 64, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 1);
		CHECK_EQ(wc.wr_id, 9);
	}
	CHECK_EQ(atomic_load(&soft_net_cq_of(n.scq)->fast_reads), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* rr_context_interrupt (the RPC server's progress loop sleeps in its one
 * connection's CQ and is woken by other threads through it): a waiter in a
 * fast read returns 0 promptly; with nobody waiting the latch ends the next
 * wait at once, and only that one. */
TEST(soft_interrupt_ends_wait)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_net_waiter w;
	uint64_t t0;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	CHECK(rr_context_can_interrupt(n.ctx));
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	soft_net_wait_start(&w, n.ccq, WAIT_MS);
	REQUIRE(soft_net_until_fast_blocked(n.ccq));
	CHECK_EQ(rr_context_interrupt(n.ctx), 0);
	soft_net_wait_join(&w);
	CHECK_EQ(w.rc, 0);
	CHECK(w.ns < PROMPT_NS);
	/* latched: both CQs' next waits end at once, the one after does not */
	CHECK_EQ(rr_context_interrupt(n.ctx), 0);
	t0 = rr_now_ns(NULL);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, WAIT_MS), 0);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, WAIT_MS), 0);
	CHECK(rr_now_ns(NULL) - t0 < PROMPT_NS);
	/* a lower bound: the latch was consumed, this wait lasts its time
	 * (load can only make it longer) */
	t0 = rr_now_ns(NULL);
	CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 60), 0);
	CHECK(rr_now_ns(NULL) - t0 >= 50000000ull);
	/* a completion is still delivered after an interrupt */
	soft_net_post_recv(&n, s, 4, 4096, 256);
	soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 8, 0, false);
	CHECK_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 3000), 1);
	CHECK_EQ(wc.wr_id, 4);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The CM channel's fd is readable exactly while events are queued: looking
 * at an empty channel (rpcrdma_cm_get_event, -EAGAIN) leaves it quiet and
 * costs no system call; a new event makes it readable again. */
TEST(soft_cm_channel_fd_tracks_queue)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_cm_event ev;
	struct pollfd p;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	p = (struct pollfd){.fd = rpcrdma_cm_channel_fd(n.ch), .events = POLLIN};
	CHECK_EQ(poll(&p, 1, 0), 0);
	CHECK_EQ(rpcrdma_cm_get_event(n.ch, &ev), -EAGAIN);
	CHECK_EQ(poll(&p, 1, 0), 0);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid); /* consumes every event */
	CHECK_EQ(poll(&p, 1, 0), 0);
	CHECK_EQ(rpcrdma_disconnect(cid), 0);
	CHECK_EQ(poll(&p, 1, 3000), 1);
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
	/* the peer's DISCONNECTED follows */
	REQUIRE_EQ(soft_net_get_cm(n.ch, &ev), 0);
	CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
	CHECK_EQ(rpcrdma_cm_get_event(n.ch, &ev), -EAGAIN);
	CHECK_EQ(poll(&p, 1, 0), 0);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* rpcrdma_cq_poll on a single-QP CQ receives with one recvmsg (no
 * epoll_wait): messages of every size class arrive intact and in order,
 * also while a Write stream the peer sent is being placed. */
TEST(soft_fast_poll_receives)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	static const uint32_t sizes[] = {0, 1, 63, 64, 4095, 4096, 65536, 200001};

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < 300000; i++)
		n.buf[i] = (uint8_t)(i * 13 + 5);
	for (unsigned k = 0; k < RR_ARRAY_SIZE(sizes); k++) {
		int got = 0;

		memset(n.buf + (1u << 20), 0, 300000);
		soft_net_post_recv(&n, s, 100 + k, 1u << 20, 300000);
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_RDMA_WRITE, 0, 300000, (1u << 20) + 300000, false);
		soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, 0, sizes[k], 0, false);
		for (uint64_t dl = rr_test_deadline();
		     got == 0 && rr_test_wait_left(dl, "the Send's Receive completion");) {
			got = rpcrdma_cq_poll(n.scq, 1, &wc);
			if (got == 0)
				usleep(1000);
		}
		REQUIRE_EQ(got, 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + k);
		CHECK_EQ(wc.byte_len, sizes[k]);
		CHECK_EQ(memcmp(n.buf + (1u << 20), n.buf, sizes[k]), 0);
		CHECK_EQ(memcmp(n.buf + (1u << 20) + 300000, n.buf, 300000), 0);
	}
	CHECK_EQ(atomic_load(&soft_net_cq_of(n.scq)->fast_reads), 0); /* no blocking read */
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
