/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's lease walk (src/rdma/soft/lease.c; docs/soft-iwarp.md
 * "Threading"): the progress thread's periodic look that hands the QPs of
 * CQs nobody attends to itself and takes attended ones back. The walk by CQ
 * (rr_soft_balance) skips the QPs of a CQ that is attended and serves none
 * of them from the thread; it must hand over exactly what the general walk
 * over every connected QP (rr_soft_balance_all) hands, from any state, and
 * look again no later than it: a differential test over random states of
 * CQs (armed, leased, idle) and hand-overs, with QPs whose two CQs differ.
 * And no connection is starved: beside many QPs on an armed CQ, a QP whose
 * CQ nobody attends is served by the thread, and one whose consumer polled
 * once and left is taken over when the lease ends (no wake-up announces
 * that: only the walk's deadline). Two endpoints over loopback TCP. */
#include "test.h"

#include <stdlib.h>

#include "rdma/soft/lease.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NCQ 4
#define NQP 10

static struct soft_ctx *ctx_of(struct net *n)
{
	return RR_CONTAINER_OF(RR_BASE(context, n->ctx), struct soft_ctx, base);
}

static struct rpcrdma_cq *cq_make(struct net *n, int cqe)
{
	struct rpcrdma_cq_attr ca = {.cqe = cqe};
	struct rpcrdma_cq *cq;

	REQUIRE_EQ(rpcrdma_cq_create(n->ctx, &ca, &cq), 0);
	return cq;
}

static struct rpcrdma_qp *qp_make(struct net *n, struct rpcrdma_cq *rcq, struct rpcrdma_cq *scq)
{
	struct rpcrdma_qp_attr qa = {.send_cq = scq, .recv_cq = rcq, .max_send_wr = 2,
				     .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1};
	struct rpcrdma_qp *qp;

	REQUIRE_EQ(rpcrdma_qp_create(n->pd, &qa, &qp), 0);
	return qp;
}

/* @cq armed, its notifications and completions taken: attended until a
 * completion consumes the arm. */
static void arm_empty(struct rpcrdma_cq *cq)
{
	struct rpcrdma_wc wc;

	while (rpcrdma_cq_get_event(cq) == 1)
		;
	REQUIRE_EQ(rpcrdma_cq_arm(cq, false), 0);
	CHECK_EQ(rpcrdma_cq_poll(cq, 1, &wc), 0);
}

static bool handed(void *qp)
{
	return soft_net_handed(qp);
}

static uint64_t rnd_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct pairs {
	struct rpcrdma_qp *qp[2 * NQP];          /* clients, then servers */
	struct rpcrdma_cm_id *id[2 * NQP];
	int n;
};

static void pairs_down(struct pairs *p)
{
	for (int i = 0; i < p->n; i++)
		soft_net_unpair(p->qp[i], p->qp[NQP + i], p->id[i], p->id[NQP + i]);
}

static void hands(struct pairs *p, bool *out)
{
	for (int i = 0; i < p->n; i++) {
		out[i] = soft_net_qp_of(p->qp[i])->obj.in_epoll;
		out[NQP + i] = soft_net_qp_of(p->qp[NQP + i])->obj.in_epoll;
	}
}

static void set_hands(struct pairs *p, const bool *to)
{
	for (int i = 0; i < p->n; i++) {
		rr_soft_qp_hand(soft_net_qp_of(p->qp[i]), to[i]);
		rr_soft_qp_hand(soft_net_qp_of(p->qp[NQP + i]), to[NQP + i]);
	}
}

/* @rounds walks from random hand-overs of @p's QPs, B (@b) polled just
 * before each, the walks' clock now, 10 ms or 1 s later (leases running or
 * over): the walk by CQ and the general walk each from the same start
 * (restored between them), under ctx->lock (the progress thread does not
 * walk meanwhile). Counts the QPs they leave in different hands into
 * *@differ, the rounds where the walk by CQ would look later into *@later,
 * and those where it skipped some QP into *@skipped. */
static void rounds(struct soft_ctx *c, struct pairs *p, struct rpcrdma_cq *b, int nrounds,
		   uint64_t *seed, int *differ, int *later, int *skipped)
{
	for (int round = 0; round < nrounds; round++) {
		bool start[2 * NQP] = {false}, by_cq[2 * NQP] = {false}, all[2 * NQP] = {false};
		uint64_t r = rnd_next(seed), now, next_cq, next_all, v0, v1;
		struct rpcrdma_wc wc;

		CHECK_EQ(rpcrdma_cq_poll(b, 1, &wc), 0); /* B leased from now */
		now = rr_now_ns(NULL) + (r % 3 == 0 ? 0 : r % 3 == 1 ? 10000000u : 1000000000u);
		pthread_mutex_lock(&c->lock);
		for (int i = 0; i < 2 * NQP; i++)
			start[i] = (rnd_next(seed) & 3) == 0;
		set_hands(p, start);
		hands(p, start); /* what the hand-over made of it */
		v0 = c->bal_visits;
		next_cq = rr_soft_balance(c, now);
		v1 = c->bal_visits;
		hands(p, by_cq);
		set_hands(p, start);
		next_all = rr_soft_balance_all(c, now);
		hands(p, all);
		pthread_mutex_unlock(&c->lock);
		for (int i = 0; i < 2 * NQP; i++)
			if (by_cq[i] != all[i])
				(*differ)++;
		if (next_cq > next_all)
			(*later)++;
		if (v1 - v0 < 2u * (unsigned)p->n)
			(*skipped)++;
	}
}

/* The walk by CQ hands exactly what the general walk hands and looks
 * again no later, from random states: CQs A and D armed, B polled, C and
 * the servers' CQ never attended; first with QPs of every (receive, send)
 * pair of the four CQs (the four with one CQ, then six with two), then
 * with the four of one CQ alone. Fails when the skip is taken for a CQ
 * whose QPs need a look (e.g. without its handed == 0 condition: attended
 * QPs left with the thread) or when a skipped CQ's lease end is left out
 * of the deadline (the second phase: no QP of two CQs carries it). */
TEST(soft_lease_walk_by_cq_equals_the_general_walk)
{
	struct net n;
	struct rpcrdma_cq *cq[NCQ], *svcq;
	struct pairs p = {.n = NQP};
	struct soft_ctx *c;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int differ = 0, later = 0, skipped = 0, k = 0;

	soft_net_up(&n, 64, 32);
	c = ctx_of(&n);
	for (int i = 0; i < NCQ; i++)
		cq[i] = cq_make(&n, 64);
	svcq = cq_make(&n, 256);
	for (int i = 0; i < NCQ; i++, k++)
		p.qp[k] = qp_make(&n, cq[i], cq[i]);
	for (int i = 0; i < NCQ; i++)
		for (int j = i + 1; j < NCQ; j++, k++)
			p.qp[k] = qp_make(&n, cq[i], cq[j]);
	for (k = 0; k < NQP; k++) {
		p.qp[NQP + k] = qp_make(&n, svcq, svcq);
		soft_net_link(&n, p.qp[k], p.qp[NQP + k], &p.id[k], &p.id[NQP + k]);
	}
	arm_empty(cq[0]);
	arm_empty(cq[3]);
	rounds(c, &p, cq[1], 200, &seed, &differ, &later, &skipped);
	CHECK_EQ(differ, 0);
	CHECK_EQ(later, 0);
	CHECK(skipped > 0); /* the skip was taken (nothing of A's handed) */
	for (k = NCQ; k < NQP; k++)
		soft_net_unpair(p.qp[k], p.qp[NQP + k], p.id[k], p.id[NQP + k]);
	p.n = NCQ;
	for (k = NCQ; k < NQP; k++)
		p.qp[k] = p.qp[NQP + k] = NULL;
	differ = later = skipped = 0;
	rounds(c, &p, cq[1], 200, &seed, &differ, &later, &skipped);
	CHECK_EQ(differ, 0);
	CHECK_EQ(later, 0);
	CHECK(skipped > 0);
	pairs_down(&p);
	for (int i = 0; i < NCQ; i++)
		CHECK_EQ(rpcrdma_cq_destroy(cq[i]), 0);
	CHECK_EQ(rpcrdma_cq_destroy(svcq), 0);
	soft_net_down(&n);
}

/* Many connections on armed CQs (the server's loops, the clients'), one
 * whose CQ nobody attends and one whose consumer polled once and went away:
 * the progress thread serves the unattended one, takes the other over when
 * its lease ends (the poll wakes nobody: only the walk's deadline brings
 * the thread back), and its walks look at no QP of the armed CQs (counted:
 * the general walk looked at all 2 x 8 every time). Fails when a skipped
 * CQ's lease end is left out of the deadline (the polled QP is never taken
 * over) or when the walk looks at every QP. */
TEST(soft_lease_walk_serves_every_connection_beside_armed_ones)
{
	struct net n;
	struct rpcrdma_cq *armed, *idle, *polled, *svcq;
	struct pairs p = {.n = 8};
	struct soft_ctx *c;
	struct rpcrdma_wc wc;
	uint64_t v0, v1;

	soft_net_up(&n, 64, 32);
	c = ctx_of(&n);
	armed = cq_make(&n, 64);
	idle = cq_make(&n, 64);
	polled = cq_make(&n, 64);
	svcq = cq_make(&n, 256);
	for (int i = 0; i < p.n; i++) {
		struct rpcrdma_cq *mine = i == 0 ? idle : i == 1 ? polled : armed;

		p.qp[i] = qp_make(&n, mine, mine);
		p.qp[NQP + i] = qp_make(&n, svcq, svcq);
		soft_net_link(&n, p.qp[i], p.qp[NQP + i], &p.id[i], &p.id[NQP + i]);
	}
	arm_empty(armed);
	arm_empty(svcq);
	/* nobody attends idle: the thread takes its QP */
	REQUIRE(rr_test_until(handed, p.qp[0], RR_TEST_WAIT_MS));
	/* polled: its consumer comes once (takes the QP back if the thread
	 * had it), then stays away; the lease (20 ms) ends unannounced */
	CHECK_EQ(rpcrdma_cq_poll(polled, 1, &wc), 0);
	REQUIRE(rr_test_until(handed, p.qp[1], RR_TEST_WAIT_MS));
	for (int i = 2; i < p.n; i++)
		CHECK(!soft_net_handed(p.qp[i]));
	for (int i = 0; i < p.n; i++)
		CHECK(!soft_net_handed(p.qp[NQP + i]));
	/* a walk now: the QPs of the two CQs with a QP handed (1 each); the
	 * armed CQs' 14 are skipped */
	pthread_mutex_lock(&c->lock);
	v0 = c->bal_visits;
	(void)rr_soft_balance(c, rr_now_ns(NULL));
	v1 = c->bal_visits;
	pthread_mutex_unlock(&c->lock);
	CHECK_EQ(v1 - v0, 2);
	pairs_down(&p);
	CHECK_EQ(rpcrdma_cq_destroy(armed), 0);
	CHECK_EQ(rpcrdma_cq_destroy(idle), 0);
	CHECK_EQ(rpcrdma_cq_destroy(polled), 0);
	CHECK_EQ(rpcrdma_cq_destroy(svcq), 0);
	soft_net_down(&n);
}
