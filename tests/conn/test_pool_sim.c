/* SPDX-License-Identifier: BSD-2-Clause */
/* A virtual-time simulation of one server's shared receive pool under
 * 1,024 requesters with bursty demand (docs/protocol.md "Credits"): the
 * requesters' credit state machines (rr_cred_req), each connection's
 * responder accounting (rr_cred_rsp) joined to one shared pool
 * (rr_cred_pool), a model of the shared receive queue as hardware sees it
 * (a Send consumes a posted Receive when it arrives; the executor learns of
 * it only when it polls the completion, later), per-connection receive
 * quotas (rpcrdma_qp_recv_quota, as the soft provider enforces them),
 * network latency in both directions with per-connection ordering, service
 * times, Read-chunk Replies and their RDMA_DONEs, connections that drop and
 * come back (Calls retransmitted), and hostile requesters that send beyond
 * their grant. After every tick:
 *   - what all peers may send (their grants' room, owed RDMA_DONEs, and
 *     what is in flight to the server) never exceeds the Receives posted in
 *     the queue, and the responders' own accounting agrees (sum of what each
 *     may send <= the pool's posted Receives);
 *   - no message of a well-behaved peer ever finds the queue empty or its
 *     quota spent (no overrun), while a hostile peer's burst is stopped at
 *     its quota: it never takes more than its grant of the pool;
 *   - every grant is >= 1; the pool stays within its cap;
 * and in the end every Call of every well-behaved peer was answered exactly
 * once (no deadlock, no starvation), and after the bursts the pool shrinks
 * back toward what its connections reserve. Virtual time only: nothing is
 * timed. */
#include <stdio.h>
#include <stdlib.h>

#include "proto/conn/credits.h"
#include "test.h"

enum {
	NPEERS = 1024,
	QMAX = 600,         /* Calls a peer has at once (queued + in flight) */
	CHAN = 1024,        /* messages in flight per direction and connection */
	MAX_GRANT = 64,
	REQUEST = 128,
	POOL_CAP = 2 * NPEERS + 256,
	POOL_SPARE = 64,
	T_BURSTS = 12000,   /* ticks during which bursts start (the first test) */
	T_LIMIT = 400000,
};

enum { M_CALL = 1, M_DONE = 2 };

struct up_msg {
	uint8_t type;
	uint16_t slot;      /* the Call's slot at the peer */
	uint32_t seq;       /* the Call's number (answered once) */
	uint64_t at;        /* arrival tick */
};

struct dn_msg {
	uint16_t slot;
	uint32_t seq;
	uint32_t grant;
	bool read_chunk;
	uint64_t at;
};

struct sv_call {
	uint16_t slot;
	uint32_t seq;
	uint64_t ready;     /* its Reply may go */
};

struct sim_call {
	struct rr_cred_node node;
	uint16_t slot;
	uint32_t seq;
	bool used, sent;
};

struct peer {
	/* requester */
	struct rr_cred_req q;
	struct sim_call calls[QMAX];
	uint32_t ncalls;            /* slots in use */
	uint16_t freel[QMAX];       /* free slots (a stack) */
	uint32_t nfree;
	uint32_t next_seq;
	uint32_t done_to_send;
	uint64_t next_burst;
	bool hostile, alive;
	uint64_t back_at;           /* reconnects then */
	/* the wire */
	struct up_msg up[CHAN];
	uint32_t up_h, up_t;
	struct dn_msg dn[CHAN];
	uint32_t dn_h, dn_t;
	/* responder */
	struct rr_cred_rsp s;
	uint32_t quota;             /* the provider's: Receives it may still take */
	uint32_t stolen;            /* taken beyond it (no quotas), not yet caught */
	struct up_msg cq[CHAN];     /* arrived, completion not polled yet */
	uint32_t cq_h, cq_t;
	struct sv_call inprog[CHAN];
	uint32_t ninprog;
	uint32_t dmax;
};

struct sim {
	struct peer *p;
	struct rr_cred_pool pool;
	uint32_t srq;               /* Receives really in the queue */
	uint64_t now, x, t_bursts;
	bool quotas;                /* the provider enforces receive quotas */
	/* results */
	uint64_t submitted, answered, replies, read_replies, dones;
	uint64_t hostile_stopped, hostile_taken_over, reconnects, max_posted, victims;
	uint64_t done_forgiven;
	uint64_t grants, grant_sum, clipped;
	uint8_t *seen;              /* per (peer, seq): answered */
	uint32_t seen_stride;
};

static uint64_t rnd(struct sim *m)
{
	m->x ^= m->x << 13;
	m->x ^= m->x >> 7;
	m->x ^= m->x << 17;
	return m->x;
}

static uint64_t lat(struct sim *m)
{
	return 1 + rnd(m) % 20;
}

static void up_push(struct peer *p, uint8_t type, uint16_t slot, uint32_t seq, uint64_t at)
{
	uint64_t last = p->up_t != p->up_h ? p->up[(p->up_t - 1) % CHAN].at : 0;

	REQUIRE(p->up_t - p->up_h < CHAN);
	p->up[p->up_t % CHAN] = (struct up_msg){type, slot, seq, at > last ? at : last};
	p->up_t++;
}

/* The executor posts what the pool wants (synchronously, as it allocates
 * and posts in the same turn). */
static void grow(struct sim *m)
{
	uint32_t n = rr_cred_pool_want(&m->pool);

	rr_cred_pool_posted(&m->pool, n);
	m->srq += n;
	REQUIRE(m->pool.posted <= m->pool.cap);
	if (m->pool.posted > m->max_posted)
		m->max_posted = m->pool.posted;
}

static void quota_sync(struct peer *p)
{
	p->quota += rr_cred_rsp_take_added(&p->s);
}

/* A connection is (re)established: the responder joins the pool. */
static bool connect_peer(struct sim *m, struct peer *p)
{
	rr_cred_rsp_init(&p->s, MAX_GRANT, p->dmax, 0);
	if (!rr_cred_pool_room(&m->pool))
		return false;
	REQUIRE_EQ(rr_cred_rsp_join(&p->s, &m->pool), 0);
	p->quota = 0;
	quota_sync(p);
	grow(m);
	p->alive = true;
	return true;
}

/* The requester sends what its grant lets it (a hostile one: everything). */
static void pump(struct sim *m, struct peer *p)
{
	struct rr_cred_node *n;

	if (!p->alive)
		return;
	while ((n = rr_cred_req_next(&p->q)) != NULL) {
		struct sim_call *k = RR_CONTAINER_OF(n, struct sim_call, node);

		k->sent = true;
		up_push(p, M_CALL, k->slot, k->seq, m->now + lat(m));
	}
}

static void call_free(struct peer *p, struct sim_call *k)
{
	k->used = false;
	p->ncalls--;
	p->freel[p->nfree++] = k->slot;
}

static void burst(struct sim *m, struct peer *p)
{
	uint32_t b = 1 + (uint32_t)(rnd(m) % ((rnd(m) & 3) ? 64 : 500));

	for (uint32_t i = 0; i < b && p->nfree; i++) {
		struct sim_call *k = &p->calls[p->freel[--p->nfree]];

		k->slot = (uint16_t)(k - p->calls);
		k->used = true;
		k->sent = false;
		k->seq = p->next_seq++;
		REQUIRE(k->seq < m->seen_stride);
		p->ncalls++;
		m->submitted += !p->hostile;
		if (p->hostile && p->alive) {
			/* ignores its grant: straight onto the wire */
			k->sent = true;
			up_push(p, M_CALL, k->slot, k->seq, m->now + lat(m));
		} else if (rr_cred_req_submit(&p->q, &k->node) == 1) {
			k->sent = true;
			if (p->alive)
				up_push(p, M_CALL, k->slot, k->seq, m->now + lat(m));
		}
	}
	p->next_burst = m->now + 1 + rnd(m) % 3000;
}

/* The connection ends (network failure, or the provider's Terminate of an
 * overrun): in-flight messages are lost, the responder leaves the pool, its
 * unpolled completions are flushed (Receives lost, reposted as the pool
 * keeps them), Calls without a Reply are retransmitted on the next
 * connection with the same number (RFC 8166 section 3.5.7... as the
 * transport does). */
static void drop_peer(struct sim *m, struct peer *p)
{
	p->alive = false;
	m->done_forgiven += p->s.done_owed; /* the RDMA_DONEs owed die with it */
	p->up_h = p->up_t;
	p->dn_h = p->dn_t;
	rr_cred_rsp_leave(&p->s);
	while (p->cq_h != p->cq_t) {
		p->cq_h++;
		rr_cred_pool_lost(&m->pool, 1);
		if (rr_cred_pool_keep(&m->pool)) {
			rr_cred_pool_posted(&m->pool, 1);
			m->srq++;
		}
	}
	p->ninprog = 0;
	p->stolen = 0;
	rr_cred_req_reset(&p->q);
	p->done_to_send = 0;
	for (int j = QMAX - 1; j >= 0; j--) {
		struct sim_call *k = &p->calls[j];

		if (k->used && k->sent) {
			k->sent = false;
			if (!p->hostile)
				REQUIRE_EQ(rr_cred_req_requeue(&p->q, &k->node), 0);
		}
	}
	if (p->hostile) {
		/* a hostile peer's Calls are not our business to complete */
		for (int j = 0; j < QMAX; j++)
			if (p->calls[j].used && !p->calls[j].node.queued)
				call_free(p, &p->calls[j]);
	}
	p->back_at = m->now + 50 + rnd(m) % 500;
	m->reconnects++;
}

/* Messages reach the server: each takes a Receive of the queue (it must
 * find one) within the connection's quota. */
static void arrive(struct sim *m, struct peer *p)
{
	while (p->alive && p->up_h != p->up_t && p->up[p->up_h % CHAN].at <= m->now) {
		struct up_msg *u = &p->up[p->up_h % CHAN];

		if (m->quotas && p->quota == 0) {
			/* the provider's Terminate: only a hostile peer */
			REQUIRE(p->hostile);
			m->hostile_stopped++;
			drop_peer(m, p);
			return;
		}
		if (m->srq == 0) {
			/* a Send finds no Receive: its connection ends (iWARP).
			 * Only when a hostile peer took Receives not its own,
			 * which quotas prevent. */
			REQUIRE(!m->quotas);
			m->victims += !p->hostile;
			drop_peer(m, p);
			return;
		}
		m->srq--;
		if (p->quota)
			p->quota--;
		else
			p->stolen++;
		p->cq[p->cq_t++ % CHAN] = *u;
		p->up_h++;
	}
}

/* The executor polls the connection's completions into its session. */
static void poll_cq(struct sim *m, struct peer *p)
{
	while (p->alive && p->cq_h != p->cq_t) {
		struct up_msg u = p->cq[p->cq_h++ % CHAN];
		int r;

		if (u.type == M_DONE) {
			r = rr_cred_rsp_on_done(&p->s);
			REQUIRE(r >= 0);
			m->dones++;
		} else {
			r = rr_cred_rsp_on_call(&p->s);
			if (r < 0) {
				/* beyond its grant: without quotas only */
				REQUIRE(p->hostile && !m->quotas);
				m->hostile_taken_over++;
			} else {
				REQUIRE(p->ninprog < CHAN);
				p->inprog[p->ninprog++] =
					(struct sv_call){u.slot, u.seq, m->now + rnd(m) % 40};
			}
		}
		/* the session reposts the Receive (or the pool releases it) */
		if (rr_cred_pool_keep(&m->pool)) {
			rr_cred_rsp_posted(&p->s, 1);
			m->srq++;
		}
		if (r < 0) {
			drop_peer(m, p);   /* RFC 8166 4.3.1 violation: ends */
			grow(m);
			return;
		}
	}
	grow(m);
}

/* Replies whose service time is over. */
static void reply(struct sim *m, struct peer *p)
{
	for (uint32_t i = 0; p->alive && i < p->ninprog;) {
		struct sv_call c = p->inprog[i];
		bool rc = p->dmax && (rnd(m) & 3) == 0;
		uint32_t g = 0;
		int r;

		if (c.ready > m->now) {
			i++;
			continue;
		}
		r = rr_cred_rsp_reply(&p->s, rc, &g);
		if (r == -ENOSPC || r == -ENOBUFS) {
			rc = false; /* another form: a plain Reply or ERR_CHUNK */
			r = rr_cred_rsp_reply(&p->s, rc, &g);
		}
		REQUIRE_EQ(r, 0);
		REQUIRE(g >= 1 && g <= MAX_GRANT);
		m->grants++;
		m->grant_sum += g;
		quota_sync(p);
		REQUIRE(p->dn_t - p->dn_h < CHAN);
		{
			uint64_t last = p->dn_t != p->dn_h ? p->dn[(p->dn_t - 1) % CHAN].at : 0,
				 at = m->now + lat(m);

			p->dn[p->dn_t++ % CHAN] = (struct dn_msg){c.slot, c.seq, g, rc,
								  at > last ? at : last};
		}
		p->inprog[i] = p->inprog[--p->ninprog];
		m->replies++;
		m->read_replies += rc;
		grow(m);
	}
}

/* Replies reach the requester. */
static void deliver(struct sim *m, struct peer *p, uint32_t idx)
{
	while (p->alive && p->dn_h != p->dn_t && p->dn[p->dn_h % CHAN].at <= m->now) {
		struct dn_msg d = p->dn[p->dn_h++ % CHAN];
		struct sim_call *k = &p->calls[d.slot];

		REQUIRE(d.grant >= 1);
		if (p->hostile) {
			if (k->used && k->seq == d.seq)
				call_free(p, k);
			continue;
		}
		REQUIRE(k->used && k->seq == d.seq);
		REQUIRE_EQ(rr_cred_req_on_reply(&p->q, d.grant), 0);
		if (d.read_chunk) {
			rr_cred_req_on_read_reply(&p->q);
			p->done_to_send++;
		}
		REQUIRE(!m->seen[(size_t)idx * m->seen_stride + d.seq]);
		m->seen[(size_t)idx * m->seen_stride + d.seq] = 1;
		call_free(p, k);
		m->answered++;
	}
	pump(m, p);
	while (p->alive && p->done_to_send && (rnd(m) & 1)) {
		REQUIRE_EQ(rr_cred_req_done_sent(&p->q), 0);
		p->done_to_send--;
		up_push(p, M_DONE, 0, 0, m->now + lat(m));
	}
}

/* What all peers may still send, from their side, plus what is on its way
 * to the server, never exceeds the Receives in the queue; the responders'
 * view agrees with the pool's. */
static void check(struct sim *m)
{
	uint64_t may = 0, sendable = 0, stolen = 0;

	for (uint32_t i = 0; i < NPEERS; i++) {
		struct peer *p = &m->p[i];

		if (!p->alive)
			continue;
		if (!p->hostile) {
			uint32_t room = p->q.grant > p->q.outstanding ? p->q.grant - p->q.outstanding
								  : 0;

			may += room + p->done_to_send + (p->up_t - p->up_h);
			/* the quota never stops a well-behaved peer */
			REQUIRE(p->quota >= room + p->done_to_send + (p->up_t - p->up_h));
		}
		sendable += rr_cred_rsp_sendable(&p->s);
		stolen += p->stolen;
		REQUIRE(rr_cred_rsp_safe(&p->s));
	}
	/* (without quotas a hostile peer's Receives taken beyond its grant
	 * count against the others until its completions are polled) */
	REQUIRE(may <= m->srq + stolen);
	REQUIRE(sendable <= m->pool.posted);
	REQUIRE(m->pool.reserved <= m->pool.posted);
	REQUIRE(m->pool.posted <= m->pool.cap);
	/* the executor's count is the queue's plus what it has not polled */
	{
		uint64_t pending = 0;

		for (uint32_t i = 0; i < NPEERS; i++)
			pending += m->p[i].cq_t - m->p[i].cq_h;
		REQUIRE_EQ((uint64_t)m->pool.posted, m->srq + pending);
	}
}

static bool quiet(struct sim *m)
{
	for (uint32_t i = 0; i < NPEERS; i++) {
		struct peer *p = &m->p[i];

		if (p->hostile)
			continue;
		if (p->ncalls || p->done_to_send || p->up_h != p->up_t || p->dn_h != p->dn_t ||
		    p->cq_h != p->cq_t || !p->alive)
			return false;
	}
	return true;
}

static void run(struct sim *m, uint64_t seed, bool quotas, unsigned nhostile, uint64_t t_bursts,
		uint32_t cap)
{
	memset(m, 0, sizeof(*m));
	m->t_bursts = t_bursts;
	m->p = calloc(NPEERS, sizeof(*m->p));
	REQUIRE(m->p);
	m->x = seed;
	m->quotas = quotas;
	m->seen_stride = 1u << 13;
	m->seen = calloc((size_t)NPEERS, m->seen_stride);
	REQUIRE(m->seen);
	rr_cred_pool_init(&m->pool, cap, POOL_SPARE, true);
	for (uint32_t i = 0; i < NPEERS; i++) {
		struct peer *p = &m->p[i];

		rr_cred_req_init(&p->q, REQUEST);
		for (uint32_t j = 0; j < QMAX; j++)
			p->freel[p->nfree++] = (uint16_t)(QMAX - 1 - j);
		p->dmax = (i % 8 == 0) ? 4 : 0;
		p->hostile = i < nhostile;
		p->next_burst = rnd(m) % 2000;
		REQUIRE(connect_peer(m, p));
	}
	check(m);
	for (m->now = 0; m->now < T_LIMIT; m->now++) {
		for (uint32_t i = 0; i < NPEERS; i++) {
			struct peer *p = &m->p[i];

			if (!p->alive) {
				if (m->now >= p->back_at && connect_peer(m, p))
					pump(m, p);
				continue;
			}
			if (m->now < m->t_bursts && m->now >= p->next_burst)
				burst(m, p);
			arrive(m, p);
			if ((rnd(m) & 3) != 0)
				poll_cq(m, p);
			reply(m, p);
			deliver(m, p, i);
			/* a rare connection loss */
			if (p->alive && rnd(m) % 200000 == 0)
				drop_peer(m, p);
		}
		check(m);
		if (m->now > m->t_bursts && quiet(m))
			break;
	}
	REQUIRE(m->now < T_LIMIT); /* everything settled: no deadlock */
}

static void report(const struct sim *m, const char *name)
{
	printf("  %s: %llu Calls answered of %llu, %llu Replies (%llu Read chunk, %llu "
	       "RDMA_DONE), mean grant %.1f, %llu clipped, pool max %llu Receives (cap %u), "
	       "%llu reconnections, hostile: %llu stopped at their quota, %llu overruns "
	       "caught, %llu other connections ended by them; settled at tick %llu\n",
	       name, (unsigned long long)m->answered, (unsigned long long)m->submitted,
	       (unsigned long long)m->replies, (unsigned long long)m->read_replies,
	       (unsigned long long)m->dones, m->grants ? (double)m->grant_sum / m->grants : 0.0,
	       (unsigned long long)m->pool.clipped, (unsigned long long)m->max_posted,
	       m->pool.cap, (unsigned long long)m->reconnects,
	       (unsigned long long)m->hostile_stopped, (unsigned long long)m->hostile_taken_over,
	       (unsigned long long)m->victims, (unsigned long long)m->now);
}

static void sim_free(struct sim *m)
{
	free(m->p);
	free(m->seen);
}

/* A round of one Call per connection, after the bursts: the Receives a
 * shrinking pool does not post again are those of this traffic. */
static void single_calls(struct sim *m)
{
	for (uint32_t i = 0; i < NPEERS; i++) {
		struct peer *p = &m->p[i];
		struct sim_call *k = &p->calls[p->freel[--p->nfree]];

		k->used = true;
		k->sent = false;
		k->slot = (uint16_t)(k - p->calls);
		k->seq = p->next_seq++;
		p->ncalls++;
		m->submitted++;
		if (rr_cred_req_submit(&p->q, &k->node) == 1) {
			k->sent = true;
			up_push(p, M_CALL, k->slot, k->seq, m->now + 1);
		}
	}
	for (uint64_t end = m->now + 200; m->now < end; m->now++) {
		for (uint32_t i = 0; i < NPEERS; i++) {
			arrive(m, &m->p[i]);
			poll_cq(m, &m->p[i]);
			reply(m, &m->p[i]);
			deliver(m, &m->p[i], i);
		}
		check(m);
	}
}

/* 1,024 well-behaved peers in bursts on a pool of 2 x 1,024 + 256
 * Receives: every invariant holds at every tick, every Call is answered
 * once, and the pool, not a fixed grant, is the limit (grants clipped when
 * bursts coincide, a fair share each). */
TEST(pool_sim_1024_bursty_peers)
{
	static struct sim m;

	run(&m, 0x5eed1234abcdull, true, 0, T_BURSTS, POOL_CAP);
	report(&m, "1024 peers");
	CHECK_EQ(m.answered, m.submitted);
	CHECK(m.submitted > 200000);
	CHECK(m.read_replies > 1000);
	CHECK_EQ(m.dones + m.done_forgiven, m.read_replies);
	CHECK(m.pool.clipped > 0);
	CHECK_EQ(m.max_posted, POOL_CAP);
	sim_free(&m);
}

/* The same peers on a roomy pool (16 x 1,024): grants follow demand (the
 * pool grows with the bursts, well beyond one grant per connection); once
 * the bursts are over, what a connection reserves comes down with its
 * Replies (a grant halves after a window of Replies that did not use
 * it): after RR_CRED_SETTLE rounds of single Calls the Receives posted
 * are back near what the connections reserve, about two each for these
 * one-Call-at-a-time peers. Memory follows the load; a connection that
 * goes idle right after a burst keeps its last grant until its next
 * Replies (RFC 8166 has no other way to lower a grant). */
TEST(pool_sim_grants_follow_demand_and_pool_shrinks)
{
	static struct sim m;

	run(&m, 0x77e1a5edull, true, 0, T_BURSTS / 2, 16 * NPEERS);
	report(&m, "1024 peers, roomy pool");
	CHECK_EQ(m.answered, m.submitted);
	CHECK(m.max_posted > 4 * NPEERS);
	CHECK((double)m.grant_sum / (double)m.grants > 4.0);
	printf("  after the bursts: %u Receives posted, %u reserved\n", m.pool.posted,
	       m.pool.reserved);
	for (unsigned round = 0; round < RR_CRED_SETTLE(MAX_GRANT); round++)
		single_calls(&m);
	CHECK_EQ(m.answered, m.submitted);
	printf("  after single Calls: %u Receives posted, %u reserved (%u connections)\n",
	       m.pool.posted, m.pool.reserved, m.pool.members);
	CHECK(m.pool.posted <= m.pool.reserved + 2 * POOL_SPARE + 1);
	CHECK(m.pool.reserved <= 3 * NPEERS);  /* idle connections keep little */
	sim_free(&m);
}

/* Hostile peers that send far beyond their grant, with the provider's
 * per-connection quotas (the soft provider): each is stopped (Terminate)
 * at its quota, so it never takes a Receive reserved for another peer; no
 * well-behaved peer ever meets an empty queue, and all their Calls are
 * answered. */
TEST(pool_sim_hostile_peers_stopped_at_their_grant)
{
	static struct sim m;

	run(&m, 0xbad5eedull, true, 16, T_BURSTS / 3, POOL_CAP);
	report(&m, "1024 peers, 16 hostile, quotas");
	CHECK(m.hostile_stopped > 0);
	CHECK_EQ(m.hostile_taken_over, 0);
	CHECK_EQ(m.victims, 0);
	CHECK_EQ(m.answered, m.submitted);
	sim_free(&m);
}

/* Without quotas (verbs: a device takes Receives from a shared queue
 * without any per-connection bound), an overrun is seen when its
 * completion is polled: the connection ends, the pool is refilled. The
 * well-behaved peers' invariants are checked as above; the test also
 * counts on the pool's spare to absorb what a hostile burst takes before
 * it is polled (docs/protocol.md "Credits": the limit of a queue without
 * quotas). */
TEST(pool_sim_overrun_without_quotas_is_caught)
{
	static struct sim m;

	run(&m, 0xfeedbeefull, false, 1, T_BURSTS / 3, POOL_CAP);
	report(&m, "1024 peers, 1 hostile, no quotas");
	CHECK(m.hostile_taken_over > 0);
	CHECK_EQ(m.answered, m.submitted);
	sim_free(&m);
}
