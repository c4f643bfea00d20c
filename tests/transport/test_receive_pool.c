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
 * connection makes a new one). A requester's own Receives, lent out as
 * Replies, are posted again in batches, never more than TP_LEND_MAX of
 * them off the queue (transport/rdma/conn.c recv_flush). */
#include <stdlib.h>

#include "proto/conn/credits.h"
#include "rpcrdma/engine.h"
#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

/* Answers each Call with 16 bytes. */
static struct rr_tp_server *p_srv;

static void p_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer16(p_srv, r);
}

static void p_release(struct rr_th_cl *c, struct rr_th_small *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		CHECK_EQ(p[i].r.status, 0);
		CHECK_EQ(p[i].r.reply_len, 16);
		rr_tp_client_release_reply(c->tp, &p[i].r);
	}
}

/* The server of these tests, answering with p_answer on @sq's thread:
 * @credits (0: the default) and @no_srq as in struct rr_tp_conf. Returns
 * its port. */
static int p_start(struct rr_th_sq *sq, uint32_t credits, bool no_srq)
{
	struct rr_tp_conf sc;

	memset(sq, 0, sizeof(*sq));
	rr_th_sq_init(sq, p_answer);
	rr_tp_conf_default(&sc);
	if (credits)
		sc.credits = credits;
	sc.no_srq = no_srq;
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, sq, &p_srv), 0);
	rr_th_sq_start(sq);
	return rr_tp_server_port(p_srv);
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
			CHECK(rr_th_cl_wait(&c[i], BURST * (round + 1), 10000));
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
			CHECK(rr_th_cl_wait(&c[i], BURST * 4 + k + 1, 10000));
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
	CHECK(rr_th_cl_wait(&c[0], BURST * 5 + settle, 10000));
	p_release(&c[0], p[0], BURST);
	REQUIRE_EQ(rr_tp_client_params(c[0].tp, &prm, &grant), 0);
	printf("  a busy connection's grant: %u\n", grant);
	/* ... and, one Call at a time, comes back down */
	for (unsigned k = 0; k < SETTLE; k++) {
		rr_th_small_submit(&c[0], &p[0][0], xid++);
		CHECK(rr_th_cl_wait(&c[0], BURST * 5 + settle + k + 1, 10000));
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
	CHECK(rr_th_cl_wait(&good, 64, 10000));
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
		CHECK(rr_th_cl_wait(&c, 8, 10000));
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
	CHECK(rr_th_cl_wait(&c, 1, 10000));
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
	CHECK(rr_th_cl_wait(&c, 1, 10000));
	p_release(&c, p, 1);
	REQUIRE_EQ(rr_tp_client_params(c.tp, &prm, &grant), 0);
	CHECK_EQ(grant, 40);
	CHECK_EQ(pools(p_srv, &cp), -ENOENT);
	rr_th_cl_stop(&c);
	p_stop(&sq);
}

/* Receives posted on @c's connection now (its soft QP's, under its lock). */
static uint32_t cl_posted(struct rr_th_cl *c)
{
	struct soft_qp *qp =
		RR_CONTAINER_OF(RR_BASE(qp, c->tp->conn->qp), struct soft_qp, base);
	uint32_t n;

	pthread_mutex_lock(&qp->rx_lock);
	n = qp->rq_count;
	pthread_mutex_unlock(&qp->rx_lock);
	return n;
}

/* A requester's Replies lent from their Receives: released one at a time,
 * the Receives go back to the queue in batches (a release that leaves
 * some off it, then one that posts them all); with Replies held, lent and
 * given back together never keep more than TP_LEND_MAX off the queue, so
 * what the peer may send still finds a Receive. */
TEST(xprt_client_receives_reposted_in_batches)
{
	struct rr_tp_conf cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	static struct rr_th_small p[12];
	uint32_t nrecv, xid = 0x2000, done = 0, done_lent, short_after = 0, full_after = 0;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	port = p_start(&sq, 0, false);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], xid++);
	REQUIRE(rr_th_cl_wait(&c, ++done, 10000));
	REQUIRE(c.tp->conn != NULL);
	pthread_mutex_lock(&c.tp->ep.lock);
	nrecv = c.tp->conn->nrecv;
	done_lent = c.tp->conn->lent;
	pthread_mutex_unlock(&c.tp->ep.lock);
	REQUIRE_EQ(done_lent, 1);   /* the Reply is its Receive */
	p_release(&c, p, 1);
	/* one Call at a time */
	for (unsigned i = 0; i < 3 * TP_LEND_MAX; i++) {
		uint32_t n;

		rr_th_small_submit(&c, &p[0], xid++);
		REQUIRE(rr_th_cl_wait(&c, ++done, 10000));
		p_release(&c, p, 1);
		n = cl_posted(&c);
		CHECK(n + TP_LEND_MAX >= nrecv);
		CHECK(n <= nrecv);
		if (n < nrecv)
			short_after++;
		else
			full_after++;
	}
	printf("  %u Receives; after a release: %u times some left to post, %u times all "
	       "posted\n", nrecv, short_after, full_after);
	CHECK(short_after > 0);
	CHECK(full_after > 0);
	/* Replies held: 12 Calls, none released until all completed */
	for (unsigned i = 0; i < 12; i++) {
		rr_th_small_submit(&c, &p[i], xid++);
		REQUIRE(rr_th_cl_wait(&c, ++done, 10000));
		CHECK(cl_posted(&c) + TP_LEND_MAX >= nrecv);
		pthread_mutex_lock(&c.tp->ep.lock);
		CHECK(c.tp->conn->lent + c.tp->conn->nrback <= TP_LEND_MAX);
		pthread_mutex_unlock(&c.tp->ep.lock);
	}
	p_release(&c, p, 12);
	CHECK(cl_posted(&c) + TP_LEND_MAX >= nrecv);
	for (unsigned i = 0; i < 12; i++) {
		rr_th_small_submit(&c, &p[i], xid++);
		REQUIRE(rr_th_cl_wait(&c, ++done, 10000));
	}
	p_release(&c, p, 12);
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
	bool fired, same;
} rel;

static void reserve_during_release(enum soft_race pt, void *obj)
{
	struct soft_cq *sc = obj;
	struct tp_cq *q, *got = NULL;

	if (pt != SOFT_RACE_POLL || rel.fired || __atomic_load_n(&sc->nlive, __ATOMIC_RELAXED) != 0)
		return;
	q = sc->base.user_ctx;
	if (!q || tp_cq_reserve(q->port, 1, &got) != 0)
		return;
	rel.fired = true;
	rel.same = got == q;
	tp_cq_created(got, NULL);
	tp_cq_unreserve(got, 1);
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
	CHECK(rr_th_cl_wait(&c, 1, 10000));
	p_release(&c, p, 1);
	memset(&rel, 0, sizeof(rel));
	rr_soft_test_set_race_hook(reserve_during_release);
	rr_th_cl_stop(&c);
	/* the server frees the connection on its own loop */
	for (int t = 0; t < 1000 && !__atomic_load_n(&rel.fired, __ATOMIC_SEQ_CST); t++)
		rr_th_sleep_ms(10);
	wait_no_member(&cp);
	rr_soft_test_set_race_hook(prev);
	CHECK(rel.fired);
	CHECK(!rel.same);
	p_stop(&sq);
}
