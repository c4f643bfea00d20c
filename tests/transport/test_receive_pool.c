/* SPDX-License-Identifier: BSD-2-Clause */
/* The responder's shared receive pool in the transport (src/transport/rdma/
 * pool.c, server_conns.c) over the soft provider: many connections draw
 * their Receives from one queue whose size follows the Calls in flight, not
 * connections x credits; grants follow demand (a client with many Calls
 * queued ramps up to the configured maximum, an idle one holds little),
 * one queue per progress loop, each loop's connections on it;
 * the accounting stays safe at every check (Receives posted >= what every
 * peer may send); a peer flooding beyond its grant loses its connection at
 * its receive quota while the others keep going without a reconnection;
 * and once every connection left, the pool is given back (the next
 * connection makes a new one). (A requester's own Receives, posted by
 * demand: test_recv_demand.c.) A freed
 * connection's last polls on the CQ its pool's connections share take no
 * new QP meanwhile and leave the CQ armed for the others (progress.c
 * conn_release). */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "proto/conn/credits.h"
#include "rpcrdma/engine.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

/* Answers each Call with 80 bytes (lent: rr_th_answer80). */
static struct rr_tp_server *p_srv;

static void p_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer80(p_srv, r);
}

static void p_release(struct rr_th_cl *c, struct rr_th_small *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(p[i].r.status, 0);
		CHECK_EQ(p[i].r.reply_len, 80);
		rr_tp_client_release_reply(c->tp, &p[i].r);
	}
}

/* The server of these tests, answering with p_answer on @sq's thread:
 * @credits (0: the default) and @no_srq as in struct rr_tp_conf. Returns
 * its port. */
static int p_start_recv(struct rr_th_sq *sq, uint32_t credits, bool no_srq, rr_tp_recv_fn recv)
{
	struct rr_tp_conf sc;

	memset(sq, 0, sizeof(*sq));
	rr_th_sq_init(sq, p_answer);
	rr_tp_conf_default(&sc);
	if (credits)
		sc.credits = credits;
	sc.no_srq = no_srq;
	REQUIRE_EQ(rr_th_tp_server(&sc, recv, sq, &p_srv), 0);
	rr_th_sq_start(sq);
	return rr_tp_server_port(p_srv);
}

static int p_start(struct rr_th_sq *sq, uint32_t credits, bool no_srq)
{
	return p_start_recv(sq, credits, no_srq, rr_th_sq_recv);
}

static void p_stop(struct rr_th_sq *sq)
{
	rr_th_sq_stop(sq);
	rr_tp_server_destroy(p_srv);
	rr_th_sq_destroy(sq);
}

/* The server has one pool per progress loop (its connections spread over
 * them): their accounting summed into *@sum; -ENOENT when none has one. */
static int pools(struct rr_tp_server *s, struct rr_cred_pool *sum)
{
	bool any = false;

	memset(sum, 0, sizeof(*sum));
	for (unsigned key = 0; key < 256; key++) {
		struct rr_cred_pool cp;

		if (rr_tp_server_pool(s, key, &cp))
			continue;
		any = true;
		sum->posted += cp.posted;
		sum->reserved += cp.reserved;
		sum->members += cp.members;
		sum->cap += cp.cap;
		sum->clipped += cp.clipped;
		sum->shared = cp.shared;
	}
	return any ? 0 : -ENOENT;
}

/* Each pool: Receives posted cover what its peers may send, within its cap. */
static bool pool_safe(struct rr_tp_server *s)
{
	for (unsigned key = 0; key < 256; key++) {
		struct rr_cred_pool cp;

		if (rr_tp_server_pool(s, key, &cp) == 0 &&
		    (cp.posted < cp.reserved || cp.posted > cp.cap))
			return false;
	}
	return true;
}

/* single Calls after which a grant is back down (its maximum is 32 here) */
enum { NCL = 24, BURST = 48, SETTLE = RR_CRED_SETTLE(64) };

/* 24 connections: rounds of bursts of 48 Calls each (the accounting safe
 * after every round), then rounds of one Call at a time on each: the
 * grants come down with those Replies and the pool with them, to far
 * below what 24 connections with their own credits + 4 would post; the
 * grant of a connection used one Call at a time comes back down to 2 at
 * most. No connection is lost on the way. */
TEST(xprt_pool_connections_share_one_queue)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	static struct rr_th_cl c[NCL];
	static struct rr_th_small p[NCL][BURST];
	struct rr_cred_pool cp;
	struct rr_xprt_stats st;
	struct rr_xprt_params prm;
	uint32_t grant = 0, xid = 0x1000, settle;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	cc.credits = 64;
	port = p_start(&sq, 32, false);
	for (unsigned i = 0; i < NCL; i++)
		REQUIRE_EQ(rr_th_cl_start(&c[i], &cc, port, rr_th_cl_count), 0);
	REQUIRE_EQ(pools(p_srv, &cp), 0);
	CHECK(cp.shared);
	/* one queue per progress loop, each with its share of the
	 * connections (round-robin) */
	{
		unsigned loops = rpcrdma_progress_threads(), n = 0;

		for (unsigned key = 0; key < 256; key++) {
			struct rr_cred_pool k;

			if (rr_tp_server_pool(p_srv, key, &k) == 0) {
				n++;
				CHECK(k.members >= NCL / RR_MAX(loops, 1u) - 1);
			}
		}
		if (loops)
			CHECK_EQ(n, RR_MIN(loops, (unsigned)NCL));
		printf("  %u progress loops, %u pools\n", loops, n);
	}
	CHECK_EQ(cp.members, NCL);
	for (unsigned round = 0; round < 4; round++) {
		for (unsigned i = 0; i < NCL; i++)
			for (unsigned k = 0; k < BURST; k++)
				rr_th_small_submit(&c[i], &p[i][k], xid++);
		for (unsigned i = 0; i < NCL; i++) {
			CHECK(rr_th_cl_wait(&c[i], BURST * (round + 1), RR_TEST_WAIT_MS));
			p_release(&c[i], p[i], BURST);
		}
		CHECK(pool_safe(p_srv));
	}
	REQUIRE_EQ(pools(p_srv, &cp), 0);
	printf("  after the bursts: %u Receives posted, %u reserved, %u connections, cap %u; "
	       "%llu grants clipped\n", cp.posted, cp.reserved, cp.members, cp.cap,
	       (unsigned long long)cp.clipped);
	/* (a queue gives its Receives back only as they are consumed: enough
	 * rounds for every connection's grant to come down and for the
	 * Receives posted beyond twice the spare to be used once; how many
	 * the bursts left posted depends on the threads' timing) */
	settle = SETTLE + cp.posted / NCL + 1;
	for (unsigned k = 0; k < settle; k++) {
		for (unsigned i = 0; i < NCL; i++)
			rr_th_small_submit(&c[i], &p[i][0], xid++);
		for (unsigned i = 0; i < NCL; i++) {
			CHECK(rr_th_cl_wait(&c[i], BURST * 4 + k + 1, RR_TEST_WAIT_MS));
			p_release(&c[i], p[i], 1);
		}
	}
	CHECK(pool_safe(p_srv));
	REQUIRE_EQ(pools(p_srv, &cp), 0);
	printf("  after single Calls: %u Receives posted, %u reserved\n", cp.posted, cp.reserved);
	/* own Receives would be 24 x (32 + 4) = 864 */
	CHECK(cp.posted < NCL * (32 + 4) / 4);
	rr_tp_server_stats(p_srv, &st);
	CHECK(st.pool_grown > 0);
	CHECK_EQ(st.credit_overruns, 0);
	CHECK_EQ(st.fatal_errors, 0);
	/* a burst on one connection again ... */
	for (unsigned k = 0; k < BURST; k++)
		rr_th_small_submit(&c[0], &p[0][k], xid++);
	CHECK(rr_th_cl_wait(&c[0], BURST * 5 + settle, RR_TEST_WAIT_MS));
	p_release(&c[0], p[0], BURST);
	REQUIRE_EQ(rr_tp_client_params(c[0].tp, &prm, &grant), 0);
	printf("  a busy connection's grant: %u\n", grant);
	/* ... and, one Call at a time, comes back down */
	for (unsigned k = 0; k < SETTLE; k++) {
		rr_th_small_submit(&c[0], &p[0][0], xid++);
		CHECK(rr_th_cl_wait(&c[0], BURST * 5 + settle + k + 1, RR_TEST_WAIT_MS));
		p_release(&c[0], p[0], 1);
	}
	REQUIRE_EQ(rr_tp_client_params(c[0].tp, &prm, &grant), 0);
	CHECK(grant <= 2);
	for (unsigned i = 0; i < NCL; i++) {
		struct rr_xprt_stats cs;

		rr_tp_client_stats(c[i].tp, &cs);
		CHECK_EQ(cs.reconnects, 0);
		rr_th_cl_stop(&c[i]);
	}
	p_stop(&sq);
}

/* A requester that ignores its grant: a raw soft QP that sends 200 Calls in
 * one chain after its first Reply. The server's provider stops it at its
 * receive quota (its connection ends; its burst takes no more Receives of
 * the queue than its grant, none meant for another peer), while a well-behaved client, busy all along,
 * completes every Call on its one connection. */
TEST(xprt_pool_flood_beyond_grant_ends_only_that_connection)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl good;
	struct rr_th_rogue g;
	static struct rr_th_small p[64];
	struct rr_xprt_stats cs;
	uint8_t m[64], r[4096];
	uint32_t grant;
	int port, n;
	bool ended = false;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	REQUIRE_EQ(rr_th_cl_start(&good, &cc, port, rr_th_cl_count), 0);
	REQUIRE_EQ(rr_th_rogue_open(&g, port, pd, sizeof(pd), false), 0);
	/* a first Call, answered: its grant is small */
	rr_put_be32(m, 0x77);
	rr_put_be32(m + 4, 1);
	rr_put_be32(m + 8, 128);
	rr_put_be32(m + 12, 0);   /* RDMA_MSG, empty lists */
	rr_put_be32(m + 16, 0);
	rr_put_be32(m + 20, 0);
	rr_put_be32(m + 24, 0);
	rr_put_be32(m + 28, 0x77);
	rr_put_be32(m + 32, 0);   /* CALL */
	rr_put_be32(m + 36, 7);
	n = rr_th_rogue_xchg(&g, m, 40, r, 5000);
	REQUIRE(n >= 28);
	grant = rr_get_be32(r + 8);
	CHECK(grant >= 1 && grant <= 4);
	/* the good client is busy meanwhile */
	for (unsigned k = 0; k < 64; k++)
		rr_th_small_submit(&good, &p[k], 0x9000 + k);
	/* 200 Calls in one chain, whatever the grant */
	{
		struct rpcrdma_sge sge[200];
		struct rpcrdma_send_wr wr[200];

		for (unsigned i = 0; i < 200; i++) {
			uint8_t *b = g.sbuf + (i % 64) * 64;

			memcpy(b, m, 40);
			rr_put_be32(b, 0x100 + i);
			rr_put_be32(b + 28, 0x100 + i);
			sge[i] = (struct rpcrdma_sge){(uint64_t)(uintptr_t)b, 40,
						      rpcrdma_mr_lkey(g.smr)};
			memset(&wr[i], 0, sizeof(wr[i]));
			wr[i].wr_id = 5000 + i;
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
			wr[i].opcode = RPCRDMA_WR_SEND;
			wr[i].next = i + 1 < 200 ? &wr[i + 1] : NULL;
		}
		wr[199].flags = RPCRDMA_SEND_SIGNALED;
		(void)rpcrdma_post_send(g.qp, wr, NULL);
	}
	/* its connection ends (the Terminate of its quota); a few Replies
	 * to what was within its grant may come first */
	for (int t = 0; t < 200 && !ended; t++) {
		n = rr_th_rogue_recv(&g, r, 50);
		ended = n < 0 || g.disconnected;
	}
	CHECK(ended);
	CHECK(rr_th_cl_wait(&good, 64, RR_TEST_WAIT_MS));
	p_release(&good, p, 64);
	rr_tp_client_stats(good.tp, &cs);
	CHECK_EQ(cs.reconnects, 0);
	{
		struct rr_xprt_stats st;

		/* stopped by the provider at its quota: the session never saw
		 * a message beyond the grant, and of the 200 the burst took
		 * no more Receives than its grant (the good client's 64 and
		 * the first Call besides) */
		rr_tp_server_stats(p_srv, &st);
		CHECK_EQ(st.credit_overruns, 0);
		CHECK(st.short_msgs <= 64 + 1 + grant);
	}
	CHECK(pool_safe(p_srv));
	rr_th_rogue_close(&g);
	rr_th_cl_stop(&good);
	p_stop(&sq);
}

/* Waits (at most 2 s) until the server's pool has no member and nothing
 * reserved, or is gone; @cp is left with its last reading. */
static void wait_no_member(struct rr_cred_pool *cp)
{
	for (int t = 0; t < 200; t++) {
		if (pools(p_srv, cp) || (cp->members == 0 && cp->reserved == 0))
			return;
		rr_th_sleep_ms(10);
	}
}

/* Connections come and go: while they live the pool holds their
 * reservations; when the last has gone, the reservations are back, and
 * after TP_POOL_RETIRE_NS the pool itself is freed (its queue's Receives
 * with it); a new connection gets a new pool and is served. */
TEST(xprt_pool_given_back_after_churn)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[8];
	struct rr_cred_pool cp;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	CHECK_EQ(pools(p_srv, &cp), -ENOENT);
	for (unsigned round = 0; round < 20; round++) {
		REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
		for (unsigned k = 0; k < 8; k++)
			rr_th_small_submit(&c, &p[k], 0x2000 + round * 8 + k);
		CHECK(rr_th_cl_wait(&c, 8, RR_TEST_WAIT_MS));
		p_release(&c, p, 8);
		REQUIRE_EQ(pools(p_srv, &cp), 0);
		CHECK_EQ(cp.members, 1);
		CHECK(cp.posted >= cp.reserved);
		rr_th_cl_stop(&c);
		/* the server frees the connection on its own loop, after
		 * the client has gone: the next round counts its own only */
		wait_no_member(&cp);
	}
	/* all gone: no member, nothing reserved */
	wait_no_member(&cp);
	if (pools(p_srv, &cp) == 0) {
		CHECK_EQ(cp.members, 0);
		CHECK_EQ(cp.reserved, 0);
	}
	/* and then the pool goes */
	for (int t = 0; t < 300 && pools(p_srv, &cp) == 0; t++)
		rr_th_sleep_ms(10);
	CHECK_EQ(pools(p_srv, &cp), -ENOENT);
	/* a new connection: a new pool */
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x3000);
	CHECK(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	CHECK_EQ(pools(p_srv, &cp), 0);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* With no_srq (or a provider without shared queues) every connection has
 * its own Receives and a grant of the configured credits from its first
 * Reply on, as before: no pool. */
TEST(xprt_pool_off_gives_fixed_grants)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[1];
	struct rr_cred_pool cp;
	struct rr_xprt_params prm;
	uint32_t grant = 0;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, p_start(&sq, 40, true), rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x4000);
	CHECK(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	REQUIRE_EQ(rr_tp_client_params(c.tp, &prm, &grant), 0);
	CHECK_EQ(grant, 40);
	CHECK_EQ(pools(p_srv, &cp), -ENOENT);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* A Reply released without the client's lock after its connection died
 * (noted in that connection, tp_conn_unlend_later): the dead connection is
 * kept while the Reply is held (it points into its Receive buffer), and
 * the next turn's sweep takes the note and frees it. A sweep that did not
 * take the notes would keep the connection for ever. */
TEST(xprt_client_reply_released_after_loss_frees_connection)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_xprt_stats st;
	static struct rr_th_small p[1];
	uint64_t fatal0;
	bool lost = false;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	cc.no_reconnect = true;
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, p_start(&sq, 0, false), rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x5000);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p[0].r.status, 0);
	REQUIRE(p[0].r.lent != NULL);   /* the Reply is its Receive */
	rr_tp_client_stats(c.tp, &st);
	fatal0 = st.fatal_errors;
	REQUIRE_EQ(rr_tp_client_cut(c.tp), 0);
	/* untimed: the provider hands the disconnect to the loop */
	for (unsigned i = 0; i < 10000 && !lost; i++) {
		rr_tp_client_turn(c.tp);
		rr_tp_client_stats(c.tp, &st);
		lost = st.fatal_errors > fatal0;
		if (!lost)
			rr_th_sleep_ms(1);
	}
	REQUIRE(lost);
	rr_tp_client_turn(c.tp);
	CHECK_EQ(rr_tp_client_dead_conns(c.tp), 1);   /* the Reply holds it */
	p_release(&c, p, 1);
	CHECK(p[0].r.reply == NULL);
	rr_tp_client_turn(c.tp);
	CHECK_EQ(rr_tp_client_dead_conns(c.tp), 0);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* A connection's QP is destroyed and what it left in its CQ polled, those
 * completions told apart by the freed QP's pointer (progress.c
 * conn_release). A QP created on that CQ meanwhile could get the same
 * address and see its first messages dropped there (on soft, even
 * received there: a poll of an empty ring reads the CQ's sockets): in the
 * Debian 13 VM a fresh connection's Call never answered. So while it is
 * polled, the CQ is given to no new connection: at the soft poll point of
 * that poll (the CQ has no QP left, its ring is empty), a reservation made
 * then gets another CQ. */
static struct {
	pthread_mutex_t lock;   /* the hook runs on any polling thread */
	pthread_cond_t cv;
	bool fired, same;
} rel = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false};

static void reserve_during_release(enum soft_race pt, void *obj)
{
	struct soft_cq *sc = obj;
	struct tp_cq *q, *got = NULL;

	if (pt != SOFT_RACE_POLL || __atomic_load_n(&sc->nlive, __ATOMIC_RELAXED) != 0)
		return;
	pthread_mutex_lock(&rel.lock);
	q = sc->base.user_ctx;
	if (!rel.fired && q && tp_cq_reserve(q->port, 1, &got) == 0) {
		rel.fired = true;
		rel.same = got == q;
		tp_cq_created(got, NULL);
		tp_cq_unreserve(got, 1);
		pthread_cond_broadcast(&rel.cv);
	}
	pthread_mutex_unlock(&rel.lock);
}

/* Waits (bounded) for the hook to have fired: rel.fired then. */
static void rel_wait_fired(void)
{
	struct timespec dl;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&rel.lock);
	while (!rel.fired && rc == 0)
		rc = pthread_cond_timedwait(&rel.cv, &rel.lock, &dl);
	pthread_mutex_unlock(&rel.lock);
}

TEST(xprt_released_qp_cq_takes_no_new_qp_while_polled)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[1];
	struct rr_cred_pool cp;
	rr_soft_race_fn prev = atomic_load(&rr_soft_race_hook);
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x4000);
	CHECK(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	pthread_mutex_lock(&rel.lock);
	rel.fired = rel.same = false;
	pthread_mutex_unlock(&rel.lock);
	rr_soft_test_set_race_hook(reserve_during_release);
	rr_th_cl_stop(&c);
	/* the server frees the connection on its own loop */
	rel_wait_fired();
	wait_no_member(&cp);
	rr_soft_test_set_race_hook(prev);
	pthread_mutex_lock(&rel.lock);
	CHECK(rel.fired);
	CHECK(!rel.same);
	pthread_mutex_unlock(&rel.lock);
	p_stop(&sq);
}

/* The loop keeps a CQ that a connection wants armed (progress.c): the
 * provider counts on that arm to tell the loop of what comes; unarmed and
 * held by nobody, a completion pushed by another thread (soft: its
 * progress thread, once the CQ's lease ended) waits in the ring with no
 * notification, and the message is lost (the Debian 12 VM's dump: a CQ
 * wanted, watched, not armed, no owner). A freed connection's polls
 * (conn_release: the drain after its id went, then the poll of what its
 * destroyed QP left) may use that arm up without a notification: on soft
 * a poll of an empty ring receives for the CQ's other QPs, and its own
 * pushes are quiet. At the soft poll point of one of those two polls
 * (@phase 1: a QP of a dead connection whose id is gone on the CQ; 2: a
 * released QP's last completions polled), with another QP on the CQ, the
 * CQ wanted by a connection and armed, a quiet push of a completion of no
 * QP stands for the other connection's message that poll receives (the
 * arm used up the same way; the transport drops a completion of no QP):
 * once the release ends, the loop must arm the CQ again. Without the loop
 * told (the release's polls ignored the arm), the ring stays unarmed. */
static struct {
	int phase;
	struct soft_cq *sc;   /* written by the thread that claimed, before fired */
	bool claimed;         /* atomic: the hook runs on any polling thread */
	bool fired;           /* atomic, seq_cst: publishes sc to the test */
} rearm;

/* Whether @sc (of @q) has two QPs or more and one of them belongs to a
 * connection no longer on @q's list: tp_cq_unlink, the first step of
 * conn_release, before its id goes; the QP leaves @sc's slots when it is
 * destroyed, after the drain. The role of the CQ is held by that release
 * from before the unlink (tp_conn_release), so a poll now is its drain.
 * Pointers only, under the locks that guard them (the slots: qlock; the
 * list: the port's lock; never both at once): the connection's own fields
 * (dead, id) are its releasing thread's, and read from any polling thread
 * they raced with it (ThreadSanitizer, docs/testing.md part BZ). */
static bool cq_has_released_conn(struct soft_cq *sc, struct tp_cq *q)
{
	const struct tp_conn *cns[16];
	unsigned n = 0;
	bool found = false, two;

	pthread_mutex_lock(&sc->qlock);
	two = sc->nlive >= 2;
	for (uint32_t i = 0; i < sc->nslots && n < 16; i++)
		if (sc->slots[i].qp && sc->slots[i].qp->base.user_ctx)
			cns[n++] = sc->slots[i].qp->base.user_ctx;
	pthread_mutex_unlock(&sc->qlock);
	if (!two)
		return false;
	pthread_mutex_lock(&q->port->lock);
	for (unsigned i = 0; i < n && !found; i++) {
		const struct tp_conn *l = q->conns;

		while (l && l != cns[i])
			l = l->qnext;
		found = l == NULL;
	}
	pthread_mutex_unlock(&q->port->lock);
	return found;
}

static void use_arm_during_release(enum soft_race pt, void *obj)
{
	struct soft_cq *sc = obj;
	struct rpcrdma_wc wc;
	struct soft_cq *prev_cq = rr_soft_tls_cq;
	struct tp_cq *q;
	bool in_phase;
	unsigned want;

	if (pt != SOFT_RACE_POLL || __atomic_load_n(&rearm.fired, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&sc->nlive, __ATOMIC_RELAXED) == 0)
		return;
	q = sc->base.user_ctx;
	if (!q || !rr_cq_ring_armed(&sc->ring))
		return;
	if (rearm.phase == 2) {
		in_phase = __atomic_load_n(&q->releasing, __ATOMIC_SEQ_CST) > 0;
	} else {
		in_phase = cq_has_released_conn(sc, q);
	}
	if (!in_phase)
		return;
	pthread_mutex_lock(&q->lock);
	want = q->want;   /* (a dead server connection wants it no more) */
	pthread_mutex_unlock(&q->lock);
	if (want == 0 || __atomic_exchange_n(&rearm.claimed, true, __ATOMIC_SEQ_CST))
		return;   /* (one thread pushes) */
	memset(&wc, 0, sizeof(wc));
	rr_soft_tls_cq = sc;   /* pushed by the poll's own receive: quiet */
	rr_soft_cq_push(sc, &wc);
	rr_soft_tls_cq = prev_cq;
	rearm.sc = sc;
	__atomic_store_n(&rearm.fired, true, __ATOMIC_SEQ_CST);
}

/* The test for @phase: N connections over the engine's loops (two share a
 * loop's CQ when there are fewer loops than N, as on the test machines),
 * freed one after the other until one that shares its CQ with a
 * connection still up is freed (on the server's loop) with the hook. */
static void released_conn_polls(int phase)
{
	enum { N = 4 };
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	static struct rr_th_cl c[N];
	struct rr_th_small p[1];
	rr_soft_race_fn prev = atomic_load(&rr_soft_race_hook);
	bool armed = false;
	unsigned stopped = 0, want;
	struct tp_cq *q;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	for (unsigned i = 0; i < N; i++) {
		REQUIRE_EQ(rr_th_cl_start(&c[i], &cc, port, rr_th_cl_count), 0);
		rr_th_small_submit(&c[i], &p[0], 0x5000 + i);
		REQUIRE(rr_th_cl_wait(&c[i], 1, RR_TEST_WAIT_MS));
		p_release(&c[i], p, 1);
	}
	if (rr_engine_nloops() >= N)
		rr_test_skip("as many engine loops as connections: no CQ shared");
	memset(&rearm, 0, sizeof(rearm));
	rearm.phase = phase;
	rr_soft_test_set_race_hook(use_arm_during_release);
	while (stopped < N - 1 && !__atomic_load_n(&rearm.fired, __ATOMIC_SEQ_CST)) {
		rr_th_cl_stop(&c[stopped++]);
		for (int t = 0; t < 200 && !__atomic_load_n(&rearm.fired, __ATOMIC_SEQ_CST); t++)
			rr_th_sleep_ms(10);
	}
	REQUIRE(__atomic_load_n(&rearm.fired, __ATOMIC_SEQ_CST));
	rr_soft_test_set_race_hook(prev);
	q = rearm.sc->base.user_ctx;
	pthread_mutex_lock(&q->lock);
	want = q->want;
	pthread_mutex_unlock(&q->lock);
	REQUIRE(want > 0);   /* a connection still up wants the CQ watched */
	/* the loop arms it again (a bounded wait for a state, no time
	 * asserted) */
	for (int t = 0; t < 500 && !armed; t++) {
		armed = rr_cq_ring_armed(&rearm.sc->ring);
		if (!armed)
			rr_th_sleep_ms(10);
	}
	CHECK(armed);
	/* and a Call on each connection still up is answered */
	for (unsigned i = stopped; i < N; i++) {
		rr_th_small_submit(&c[i], &p[0], 0x6000 + i);
		CHECK(rr_th_cl_wait(&c[i], 2, RR_TEST_WAIT_MS));
		p_release(&c[i], p, 1);
		rr_th_cl_stop(&c[i]);
	}
	p_stop(&sq);
}

TEST(xprt_released_conn_drain_leaves_wanted_cq_armed)
{
	released_conn_polls(1);
}

TEST(xprt_released_qp_poll_leaves_wanted_cq_armed)
{
	released_conn_polls(2);
}

/* The loop serves a CQ in rounds (progress.c cq_serve): a drain, the
 * after-work of what it fed (the server's Calls delivered), then an arm
 * and a look, the role let go in between. A caller that takes the CQ in
 * that gap (a synchronous client's wait, a connection freed by another
 * thread) and lets go having taken nothing must find the loop told to
 * come back: the round's drain used up the arm, and a CQ wanted, watched,
 * unarmed and held by nobody waits for nothing (the Debian 12 VM's dump).
 * The server's upcall of a Call runs in that gap, on the loop: there this
 * test takes the role as a caller would; once the loop's round is over,
 * it lets go, as a caller whose wait took nothing. The CQ must be armed
 * again (it stayed unarmed before the fix), then the Call is answered. */
static struct {
	bool active, claimed;
	struct tp_cq *q;
} gap;

static void claim_in_gap(void *ctx, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = r->xconn;
	struct tp_cq *q = cn ? cn->tcq : NULL;

	/* (in the gap the transport may count the CQ as armed or not: a
	 * look after an arm that took something leaves it counted armed;
	 * what matters is the provider's arm, used up) */
	if (gap.active && !gap.claimed && q && rr_loop_on_runner(cn->ep->loop) &&
	    atomic_load(&q->owner) == TP_CQ_FREE && atomic_load(&q->wanted) &&
	    !rr_cq_ring_armed(&scq_of(RR_BASE(cq, q->cq))->ring) && tp_cq_claim(q, TP_CQ_CALLER)) {
		gap.q = q;
		__atomic_store_n(&gap.claimed, true, __ATOMIC_SEQ_CST);
	}
	rr_th_sq_recv(ctx, r);
}

static void loop_noop(void *arg)
{
	(void)arg;
}

TEST(xprt_cq_taken_between_serve_rounds_is_armed_again)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[1];
	struct soft_cq *sc;
	bool armed = false;
	int port;

	if (!rr_th_soft_ok())
		return;
	memset(&gap, 0, sizeof(gap));
	rr_tp_conf_default(&cc);
	port = p_start_recv(&sq, 0, false, claim_in_gap);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x7000);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	/* the next Call is held (no Reply traffic meanwhile) and its
	 * upcall takes the CQ */
	pthread_mutex_lock(&sq.lock);
	sq.hold = true;
	pthread_mutex_unlock(&sq.lock);
	__atomic_store_n(&gap.active, true, __ATOMIC_SEQ_CST);
	rr_th_small_submit(&c, &p[0], 0x7001);
	for (int t = 0; t < 1000 && !__atomic_load_n(&gap.claimed, __ATOMIC_SEQ_CST); t++)
		rr_th_sleep_ms(10);
	REQUIRE(__atomic_load_n(&gap.claimed, __ATOMIC_SEQ_CST));
	sc = scq_of(RR_BASE(cq, gap.q->cq));
	/* the loop's round is over (a task of that loop ran after it);
	 * meanwhile nobody could arm the CQ */
	rr_engine_call(gap.q->port->loop, loop_noop, NULL);
	CHECK(!rr_cq_ring_armed(&sc->ring));
	tp_cq_release(gap.q);   /* a caller that took nothing lets go */
	for (int t = 0; t < 500 && !armed; t++) {
		armed = rr_cq_ring_armed(&sc->ring);
		if (!armed)
			rr_th_sleep_ms(10);
	}
	CHECK(armed);
	rr_th_sq_release_held(&sq);
	CHECK(rr_th_cl_wait(&c, 2, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* A CQ that no connection wants any more (a client's, once its
 * asynchronous Call was answered) stays counted armed and watched after
 * the loop's last round (its arm is the provider's). When the loop serves
 * it again and round 0's drain takes something (on soft: what the
 * notification's own poll received, so no notification is counted as
 * fired), that arm is used up: the round clears the count under the CQ's
 * lock and, unwanted, stops watching its fd (progress.c cq_serve; part BE
 * kept this branch when it took the lock out of a wanted CQ's rounds).
 * Left counted armed, the CQ would stay watched for nothing: the next
 * synchronous caller's Reply would wake the loop too. A quiet push of a
 * completion of no QP (as the poll's own receive pushes) stands for what
 * that poll took; the loop is sent to the CQ by its task. */
static void loop_noop_sync(struct rr_loop *l)
{
	rr_engine_call(l, loop_noop, NULL);
}

TEST(xprt_unwanted_cq_drained_at_round0_is_unwatched)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[1];
	struct rpcrdma_wc wc;
	struct soft_cq *sc, *prev_cq;
	struct tp_cq *q;
	bool idle = false, armed, watched;
	unsigned want;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x7100);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	q = c.tp->conn->tcq;
	REQUIRE(q != NULL);
	sc = scq_of(RR_BASE(cq, q->cq));
	/* the loop's rounds for that Reply are over: unwanted, counted
	 * armed, watched (a bounded wait for a state, no time asserted) */
	for (int t = 0; t < 500 && !idle; t++) {
		loop_noop_sync(q->port->loop);
		pthread_mutex_lock(&q->lock);
		idle = q->want == 0 && q->armed && q->watched &&
		       atomic_load(&q->owner) == TP_CQ_FREE;
		pthread_mutex_unlock(&q->lock);
		if (!idle)
			rr_th_sleep_ms(10);
	}
	REQUIRE(idle);
	memset(&wc, 0, sizeof(wc));
	prev_cq = rr_soft_tls_cq;
	rr_soft_tls_cq = sc;   /* pushed as by a poll's own receive: quiet */
	rr_soft_cq_push(sc, &wc);
	rr_soft_tls_cq = prev_cq;
	rr_loop_post(q->port->loop, &q->task);
	loop_noop_sync(q->port->loop);   /* (after the task's cq_serve) */
	pthread_mutex_lock(&q->lock);
	want = q->want;
	armed = q->armed;
	watched = q->watched;
	pthread_mutex_unlock(&q->lock);
	CHECK_EQ(want, 0u);
	CHECK(!armed);
	CHECK(!watched);
	/* and the connection still works */
	rr_th_small_submit(&c, &p[0], 0x7101);
	CHECK(rr_th_cl_wait(&c, 2, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* A synchronous caller holding a CQ (progress.c tp_cq_wait_once) may
 * consume the loop's notification and take nothing: on soft its wait
 * reads the ring's notification while the completion behind it was taken
 * by another QP's own waiter (rr_soft_wait_qp takes its QP's completions
 * out of the ring). The loop counted on that notification: once the
 * caller lets go, a CQ that a connection wants must be armed again. The
 * loop is held by a task meanwhile (so that only the caller sees the
 * notification); the push and the take of a completion of no QP, in the
 * test's thread, stand for the other QP's message and its own waiter. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, release;
	struct rr_loop_task t;
} hold_loop = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, {0}};

static void hold_loop_run(struct rr_loop_task *t)
{
	(void)t;
	pthread_mutex_lock(&hold_loop.lock);
	hold_loop.started = true;
	pthread_cond_broadcast(&hold_loop.cond);
	while (!hold_loop.release)
		pthread_cond_wait(&hold_loop.cond, &hold_loop.lock);
	pthread_mutex_unlock(&hold_loop.lock);
}

/* Posts a task to @l that holds it until hold_loop_end. */
static void hold_loop_start(struct rr_loop *l)
{
	hold_loop.started = hold_loop.release = false;
	hold_loop.t.fn = hold_loop_run;
	rr_loop_post(l, &hold_loop.t);
	pthread_mutex_lock(&hold_loop.lock);
	while (!hold_loop.started)
		pthread_cond_wait(&hold_loop.cond, &hold_loop.lock);
	pthread_mutex_unlock(&hold_loop.lock);
}

static void hold_loop_end(void)
{
	pthread_mutex_lock(&hold_loop.lock);
	hold_loop.release = true;
	pthread_cond_broadcast(&hold_loop.cond);
	pthread_mutex_unlock(&hold_loop.lock);
}

TEST(xprt_caller_wait_taking_nothing_leaves_wanted_cq_armed)
{
	enum { N = 4 };
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	static struct rr_th_cl c[N];
	static struct rr_th_small p[N];
	struct rr_th_cl *use = NULL;
	struct rpcrdma_wc wc;
	struct soft_cq *sc;
	struct tp_cq *q = NULL;
	bool armed = false;
	int port, n;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	for (unsigned i = 0; i < N; i++) {
		REQUIRE_EQ(rr_th_cl_start(&c[i], &cc, port, rr_th_cl_count), 0);
		rr_th_small_submit(&c[i], &p[0], 0x8000 + i);
		REQUIRE(rr_th_cl_wait(&c[i], 1, RR_TEST_WAIT_MS));
		p_release(&c[i], p, 1);
	}
	/* Calls held by the server: every client has asynchronous work, so
	 * wants its CQ watched. Two client connections on one CQ (a loop's
	 * clients share it), armed by the loop, held by nobody: the second
	 * one's caller waits there. */
	pthread_mutex_lock(&sq.lock);
	sq.hold = true;
	pthread_mutex_unlock(&sq.lock);
	for (unsigned i = 0; i < N; i++)
		rr_th_small_submit(&c[i], &p[i], 0x8100 + i);
	for (int t = 0; t < 500 && rr_th_sq_nheld(&sq) < N; t++)
		rr_th_sleep_ms(10);
	REQUIRE_EQ(rr_th_sq_nheld(&sq), N);
	for (int t = 0; t < 500 && !use; t++) {
		for (unsigned i = 0; i < N && !use; i++)
			for (unsigned j = i + 1; j < N && !use; j++) {
				struct tp_cq *cq = c[j].tp->conn ? c[j].tp->conn->tcq : NULL;

				if (cq && c[i].tp->conn && c[i].tp->conn->tcq == cq &&
				    atomic_load(&cq->wanted) &&
				    atomic_load(&cq->owner) == TP_CQ_FREE &&
				    rr_cq_ring_armed(&scq_of(RR_BASE(cq, cq->cq))->ring)) {
					use = &c[j];
					q = cq;
				}
			}
		if (!use)
			rr_th_sleep_ms(10);
	}
	if (!use) {
		rr_th_sq_release_held(&sq);
		rr_test_skip("no two client connections share a CQ (one loop per connection)");
	}
	sc = scq_of(RR_BASE(cq, q->cq));
	hold_loop_start(q->port->loop);
	/* a completion pushed (the arm used up, the notification written),
	 * then taken by its QP's own waiter */
	memset(&wc, 0, sizeof(wc));
	rr_soft_cq_push(sc, &wc);
	CHECK(!rr_cq_ring_armed(&sc->ring));
	CHECK_EQ(rr_cq_ring_poll(&sc->ring, 1, &wc), 1);
	/* the caller's wait: the notification consumed, nothing taken */
	rr_lock(&use->tp->ep.lock);
	n = tp_cq_wait_once(&use->tp->ep, use->tp->conn, 50, NULL);
	rr_unlock(&use->tp->ep.lock);
	CHECK_EQ(n, 0);
	hold_loop_end();
	for (int t = 0; t < 500 && !armed; t++) {
		armed = rr_cq_ring_armed(&sc->ring);
		if (!armed)
			rr_th_sleep_ms(10);
	}
	CHECK(armed);
	/* the held Calls answered */
	rr_th_sq_release_held(&sq);
	for (unsigned i = 0; i < N; i++) {
		CHECK(rr_th_cl_wait(&c[i], 2, RR_TEST_WAIT_MS));
		p_release(&c[i], &p[i], 1);
		rr_th_cl_stop(&c[i]);
	}
	p_stop(&sq);
}

/* A thread that arms and drains a CQ while it holds it (progress.c
 * tp_cq_arm_drain: a server handler on the loop waiting for its Reply's
 * Send, server.c) gives up after 64 looks that each found something: the
 * last one used the arm up. Once it lets go, a CQ that a connection wants
 * must be armed again by the loop. At the soft poll point of each look of
 * this thread a quiet push of a completion of no QP keeps the CQ busy (as
 * the look's own receive would; the transport drops it). */
static __thread bool busy_looks;

static void keep_busy(enum soft_race pt, void *obj)
{
	struct soft_cq *sc = obj;
	struct rpcrdma_wc wc;
	struct soft_cq *prev_cq = rr_soft_tls_cq;

	if (pt != SOFT_RACE_POLL || !busy_looks)
		return;
	memset(&wc, 0, sizeof(wc));
	rr_soft_tls_cq = sc;   /* the look's own receive: quiet */
	rr_soft_cq_push(sc, &wc);
	rr_soft_tls_cq = prev_cq;
}

TEST(xprt_arm_drain_given_up_leaves_wanted_cq_armed)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p[1];
	rr_soft_race_fn prev = atomic_load(&rr_soft_race_hook);
	struct tp_cq *q = NULL;
	struct tp_ep *t = NULL;
	struct soft_cq *sc;
	bool armed = false, settled;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0xa000);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	/* the server connection's CQ (it wants it), taken when the loop
	 * let it go */
	for (unsigned k = 0; k < p_srv->nshards && !q; k++) {
		struct tp_shard *sh = p_srv->shards[k];

		rr_lock(&sh->ep.lock);
		if (sh->conns && sh->conns->tcq)
			q = sh->conns->tcq;
		rr_unlock(&sh->ep.lock);
	}
	REQUIRE(q != NULL);
	REQUIRE(atomic_load(&q->wanted));
	sc = scq_of(RR_BASE(cq, q->cq));
	/* the loop held by a task meanwhile: it neither serves the CQ nor
	 * finds it held (only the release tells it) */
	hold_loop_start(q->port->loop);
	REQUIRE(tp_cq_claim(q, TP_CQ_CALLER));
	rr_soft_test_set_race_hook(keep_busy);
	busy_looks = true;
	settled = tp_cq_arm_drain(q, &t);
	busy_looks = false;
	rr_soft_test_set_race_hook(prev);
	CHECK(!settled);   /* it gave up */
	CHECK(!rr_cq_ring_armed(&sc->ring));
	tp_cq_release(q);
	tp_touched_after(t, NULL);
	hold_loop_end();
	for (int i = 0; i < 500 && !armed; i++) {
		armed = rr_cq_ring_armed(&sc->ring);
		if (!armed)
			rr_th_sleep_ms(10);
	}
	CHECK(armed);
	rr_th_small_submit(&c, &p[0], 0xa001);
	CHECK(rr_th_cl_wait(&c, 2, RR_TEST_WAIT_MS));
	p_release(&c, p, 1);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}
