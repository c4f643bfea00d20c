/* SPDX-License-Identifier: BSD-2-Clause */
/* The responder's credit accounting (proto/conn/credits.c) against its
 * former form, kept here as the reference: rr_cred_rsp_on_call reads the
 * connection's counters once and computes what settle_res recomputed
 * (issue 16 part CO); the reference is the responder code of main
 * 0c2db27, each step of it re-reading the state (what the peer may send
 * before and after, the reservation). A Reply's accounting
 * (rr_cred_rsp_reply, rr_cred_rsp_settle) is main's unchanged, so both
 * copies run the library's own for it (the walk's later steps depend on
 * it); only what part CO rewrote is kept here twice. A
 * random walk of every responder operation, on private pools and on
 * shared pools of several connections, is run on two copies of the same
 * state, one through each form: after every step the return values, the
 * grants and every field of every connection and pool must be equal. */
#include "proto/conn/credits.h"
#include "test.h"

/* ---- the reference: credits.c of main 0c2db27, responder side ---- */

static uint32_t ref_sat32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static uint64_t ref_call_perm(const struct rr_cred_rsp *c)
{
	return c->limit > c->calls ? c->limit - c->calls : 0;
}

static uint64_t ref_sendable(const struct rr_cred_rsp *c)
{
	return ref_call_perm(c) + c->done_owed + c->bc_owed;
}

static uint32_t ref_need_res(const struct rr_cred_rsp *c)
{
	return ref_sat32(RR_MAX(ref_call_perm(c), 1) + (uint64_t)c->done_owed + c->bc_owed);
}

static void ref_settle_res(struct rr_cred_rsp *c, uint64_t before)
{
	uint64_t after = ref_sendable(c);

	if (c->joined) {
		uint32_t r = ref_need_res(c);

		c->pool->reserved = c->pool->reserved - c->res + r;
		c->res = r;
	}
	if (after > before)
		c->added = ref_sat32((uint64_t)c->added + (after - before));
}

static void ref_consumed(struct rr_cred_rsp *c)
{
	if (c->pool->posted)
		c->pool->posted--;
}

static int ref_on_call(struct rr_cred_rsp *c)
{
	struct rr_cred_pool *p = c->pool;
	bool over = c->calls >= c->limit;
	uint64_t before = ref_sendable(c);

	ref_consumed(c);
	if (c->joined && c->calls == c->replies)
		p->active++;
	c->calls++;
	if (rr_cred_rsp_in_progress(c) > c->peak)
		c->peak = ref_sat32(rr_cred_rsp_in_progress(c));
	if (ref_call_perm(c) == 0)
		c->limited = true;
	ref_settle_res(c, before);
	if (over) {
		p->overruns++;
		return -EPROTO;
	}
	return 0;
}

static int ref_on_done(struct rr_cred_rsp *c)
{
	uint64_t before = ref_sendable(c);

	if (c->done_owed == 0)
		return ref_on_call(c) < 0 ? -EPROTO : 1;
	ref_consumed(c);
	c->done_owed--;
	ref_settle_res(c, before);
	return 0;
}

static int ref_on_bc_reply(struct rr_cred_rsp *c)
{
	uint64_t before = ref_sendable(c);

	if (c->bc_owed == 0)
		return ref_on_call(c) < 0 ? -EPROTO : 1;
	ref_consumed(c);
	c->bc_owed--;
	ref_settle_res(c, before);
	return 0;
}

/* ---- the walk ---- */

enum { NCONN = 5 };

struct side {
	struct rr_cred_pool pool;
	struct rr_cred_rsp c[NCONN];
	bool joined_once[NCONN];
};

static uint64_t rng(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static bool pool_eq(const struct rr_cred_pool *a, const struct rr_cred_pool *b)
{
	return a->posted == b->posted && a->reserved == b->reserved &&
	       a->members == b->members && a->active == b->active && a->cap == b->cap &&
	       a->spare == b->spare && a->deficit == b->deficit && a->shared == b->shared &&
	       a->clipped == b->clipped && a->overruns == b->overruns &&
	       a->refused == b->refused;
}

static bool rsp_eq(const struct rr_cred_rsp *a, const struct rr_cred_rsp *b)
{
	return a->max_credits == b->max_credits && a->done_max == b->done_max &&
	       a->limit == b->limit && a->calls == b->calls && a->replies == b->replies &&
	       a->done_owed == b->done_owed && a->bc_owed == b->bc_owed && a->res == b->res &&
	       a->target == b->target && a->peak == b->peak && a->calm == b->calm &&
	       a->raised_at == b->raised_at && a->limited == b->limited &&
	       a->joined == b->joined && a->last_grant == b->last_grant &&
	       a->added == b->added && pool_eq(&a->own, &b->own);
}

static void side_init(struct side *s, bool shared, uint32_t cap, uint32_t spare,
		      uint32_t max, uint32_t dmax)
{
	memset(s, 0, sizeof(*s));
	rr_cred_pool_init(&s->pool, cap, spare, true);
	for (unsigned i = 0; i < NCONN; i++) {
		rr_cred_rsp_init(&s->c[i], max + i, dmax, shared ? 0 : max + dmax + 2);
		if (!shared)
			rr_cred_rsp_posted(&s->c[i], max + dmax + 2);
	}
}

/* One step, the same on both sides; @ref selects the reference for the
 * operations whose form changed. Returns the operation's result (grants
 * folded in) for comparison. */
static int64_t step(struct side *s, bool ref, bool shared, uint64_t op, unsigned i)
{
	struct rr_cred_rsp *c = &s->c[i];
	uint32_t g = 0;
	int rc;

	switch (op % 12) {
	case 0:
	case 1:
	case 2: /* a Call, whether or not it may (overruns included) */
		if (op % 7 == 0 || rr_cred_rsp_sendable(c) > c->done_owed + c->bc_owed)
			return ref ? ref_on_call(c) : rr_cred_rsp_on_call(c);
		return 0;
	case 3:
	case 4:
	case 5: /* a Reply, some with a Read chunk */
		rc = rr_cred_rsp_reply(c, (op >> 8) & 1, &g);
		return (int64_t)rc * 100000 + g;
	case 6: /* an RDMA_DONE (owed or not) */
		rc = ref ? ref_on_done(c) : rr_cred_rsp_on_done(c);
		if (rc == 1)
			rc = 10 + rr_cred_rsp_settle(c);
		return rc;
	case 7: /* a Call dropped: settled */
		return rr_cred_rsp_settle(c);
	case 8: /* backward Call and its Reply */
		if (rr_cred_rsp_bc_room(c) && (op >> 9) & 1) {
			rr_cred_rsp_bc_sent(c);
			return 1;
		}
		return ref ? ref_on_bc_reply(c) : rr_cred_rsp_on_bc_reply(c);
	case 9: /* the executor posts what the pool wants */
		if (shared) {
			uint32_t n = rr_cred_pool_want(&s->pool);

			rr_cred_pool_posted(&s->pool, n);
			return n;
		}
		rr_cred_rsp_posted(c, (uint32_t)(op >> 12) % 3);
		return 0;
	case 10: /* joins and leaves */
		if (!shared)
			return 0;
		if (c->joined) {
			if ((op >> 10) % 4 == 0) {
				rr_cred_rsp_leave(c);
				rr_cred_rsp_init(c, c->max_credits, c->done_max, 0);
			}
			return 0;
		}
		return rr_cred_rsp_join(c, &s->pool);
	default:
		return rr_cred_rsp_take_added(c);
	}
}

TEST(cred_rsp_matches_reference)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint64_t steps = 0, replies = 0, clipped = 0, overruns = 0;

	for (int round = 0; round < 400; round++) {
		static struct side a, b;
		bool shared = round % 3 != 0;
		uint32_t cap = 4 + (uint32_t)(rng(&x) % 60), spare = (uint32_t)(rng(&x) % 6);
		uint32_t max = 1 + (uint32_t)(rng(&x) % 40), dmax = (uint32_t)(rng(&x) % 4);

		side_init(&a, shared, cap, spare, max, dmax);
		side_init(&b, shared, cap, spare, max, dmax);
		if (shared) {
			for (unsigned i = 0; i < NCONN; i++) {
				int ra = rr_cred_rsp_join(&a.c[i], &a.pool);

				REQUIRE_EQ(ra, rr_cred_rsp_join(&b.c[i], &b.pool));
			}
			rr_cred_pool_posted(&a.pool, rr_cred_pool_want(&a.pool));
			rr_cred_pool_posted(&b.pool, rr_cred_pool_want(&b.pool));
		}
		for (int n = 0; n < 3000; n++) {
			uint64_t op = rng(&x);
			unsigned i = (unsigned)((op >> 20) % NCONN);
			int64_t ra = step(&a, false, shared, op, i);
			int64_t rb = step(&b, true, shared, op, i);

			steps++;
			if (op % 12 >= 3 && op % 12 <= 5 && ra % 100000 != 0 && ra > 0)
				replies++;
			REQUIRE_EQ(ra, rb);
			REQUIRE(pool_eq(&a.pool, &b.pool));
			for (unsigned j = 0; j < NCONN; j++)
				REQUIRE(rsp_eq(&a.c[j], &b.c[j]));
		}
		clipped += a.pool.clipped;
		overruns += a.pool.overruns;
		for (unsigned j = 0; j < NCONN; j++)
			overruns += a.c[j].own.overruns;
	}
	/* the walk reached what it is for: granted Replies, clipped grants,
	 * overruns */
	CHECK(replies > steps / 20);
	CHECK(clipped > 0);
	CHECK(overruns > 0);
}
