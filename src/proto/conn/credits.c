/* SPDX-License-Identifier: BSD-2-Clause */
/* RPC-over-RDMA Version 1 credit accounting (RFC 8166 sections 4.3.1 and
 * 4.3.3) for requester and responder, with the project's RDMA_DONE rule for
 * the reliable-reply extension (draft-cel-nfsv4-rpcrdma-reliable-reply-04
 * section 5.2.3; docs/protocol.md "Credits"). Counters and an intrusive FIFO;
 * no allocation, no system call. */
#include "proto/conn/credits.h"

#define RR_CRED_REQUEST_MAX 65535u

/* ---- intrusive FIFO (circular, sentinel) ---- */

static void fifo_init(struct rr_cred_node *h)
{
	h->next = h;
	h->prev = h;
	h->queued = false;
}

static void fifo_insert(struct rr_cred_node *prev, struct rr_cred_node *n)
{
	n->prev = prev;
	n->next = prev->next;
	prev->next->prev = n;
	prev->next = n;
	n->queued = true;
}

static void fifo_unlink(struct rr_cred_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = NULL;
	n->prev = NULL;
	n->queued = false;
}

/* ---- requester ---- */

void rr_cred_req_init(struct rr_cred_req *c, uint32_t request)
{
	memset(c, 0, sizeof(*c));
	if (request == 0)
		request = 1;
	if (request > RR_CRED_REQUEST_MAX)
		request = RR_CRED_REQUEST_MAX;
	c->request = request;
	c->grant = 1; /* RFC 8166 section 4.3.3: assume one credit */
	fifo_init(&c->head);
}

bool rr_cred_req_can_send(const struct rr_cred_req *c)
{
	return c->queued == 0 && c->outstanding < c->grant;
}

int rr_cred_req_submit(struct rr_cred_req *c, struct rr_cred_node *n)
{
	if (!n || n->queued)
		return -EINVAL;
	if (rr_cred_req_can_send(c)) {
		c->outstanding++;
		return 1;
	}
	fifo_insert(c->head.prev, n);
	c->queued++;
	return 0;
}

int rr_cred_req_requeue(struct rr_cred_req *c, struct rr_cred_node *n)
{
	if (!n || n->queued)
		return -EINVAL;
	fifo_insert(&c->head, n);
	c->queued++;
	return 0;
}

struct rr_cred_node *rr_cred_req_next(struct rr_cred_req *c)
{
	struct rr_cred_node *n;

	if (c->queued == 0 || c->outstanding >= c->grant)
		return NULL;
	n = c->head.next;
	fifo_unlink(n);
	c->queued--;
	c->outstanding++;
	return n;
}

int rr_cred_req_cancel(struct rr_cred_req *c, struct rr_cred_node *n)
{
	struct rr_cred_node *it;

	if (!n || !n->queued)
		return -ENOENT;
	/* Check membership: a node queued on another requester is not ours. */
	for (it = c->head.next; it != &c->head; it = it->next)
		if (it == n)
			break;
	if (it != n)
		return -ENOENT;
	fifo_unlink(n);
	c->queued--;
	return 0;
}

uint32_t rr_cred_req_grant(struct rr_cred_req *c, uint32_t grant)
{
	if (grant == 0)
		grant = 1; /* a grant of 0 would deadlock: Linux treats it as 1 */
	if (grant > c->request)
		grant = c->request;
	c->grant = grant;
	c->granted = true;
	return grant;
}

int rr_cred_req_complete(struct rr_cred_req *c)
{
	if (c->outstanding == 0)
		return -EPROTO;
	c->outstanding--;
	return 0;
}

int rr_cred_req_on_reply(struct rr_cred_req *c, uint32_t grant)
{
	rr_cred_req_grant(c, grant);
	return rr_cred_req_complete(c);
}

void rr_cred_req_on_read_reply(struct rr_cred_req *c)
{
	c->done_owed++;
}

int rr_cred_req_done_sent(struct rr_cred_req *c)
{
	if (c->done_owed == 0)
		return -EPROTO;
	c->done_owed--;
	return 0;
}

void rr_cred_req_reset(struct rr_cred_req *c)
{
	c->grant = 1;
	c->granted = false;
	c->outstanding = 0;
	c->done_owed = 0;
}

/* ---- responder: pools ---- */

static uint32_t sat32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void rr_cred_pool_init(struct rr_cred_pool *p, uint32_t cap, uint32_t spare, bool shared)
{
	memset(p, 0, sizeof(*p));
	p->cap = cap ? cap : 1;
	p->spare = spare;
	p->shared = shared;
}

void rr_cred_pool_posted(struct rr_cred_pool *p, uint32_t n)
{
	p->posted = sat32((uint64_t)p->posted + n);
}

void rr_cred_pool_lost(struct rr_cred_pool *p, uint32_t n)
{
	p->posted = p->posted > n ? p->posted - n : 0;
}

int64_t rr_cred_pool_free(const struct rr_cred_pool *p)
{
	return (int64_t)p->posted - (int64_t)p->reserved;
}

uint32_t rr_cred_pool_want(struct rr_cred_pool *p)
{
	uint64_t t = p->cap;

	if (p->shared)
		t = RR_MIN(t, (uint64_t)p->reserved + p->spare + p->deficit);
	p->deficit = 0;
	return t > p->posted ? (uint32_t)(t - p->posted) : 0;
}

bool rr_cred_pool_keep(const struct rr_cred_pool *p)
{
	if (!p->shared)
		return true;
	/* hysteresis: grown by want() up to reserved + spare, shrunk only
	 * beyond twice that much spare */
	return p->posted < p->cap &&
	       ((uint64_t)p->posted < (uint64_t)p->reserved + 2ull * p->spare + 1 || p->deficit);
}

bool rr_cred_pool_room(const struct rr_cred_pool *p)
{
	return (uint64_t)p->reserved + 1 <= p->cap;
}

bool rr_cred_pool_safe(const struct rr_cred_pool *p)
{
	return p->posted >= p->reserved;
}

/* ---- responder: one connection ---- */

/* Calls the peer may still send (0 once it went past its limit). */
static uint64_t call_perm(const struct rr_cred_rsp *c)
{
	return c->limit > c->calls ? c->limit - c->calls : 0;
}

uint64_t rr_cred_rsp_sendable(const struct rr_cred_rsp *c)
{
	return call_perm(c) + c->done_owed + c->bc_owed;
}

/* The Receives a connection must hold: what its peer may send (@perm
 * Calls, @done_owed RDMA_DONEs, @bc_owed backward Replies), and at least
 * one for Calls, so that its next grant of 1 costs nothing. */
static uint32_t need_res_of(uint64_t perm, uint32_t done_owed, uint32_t bc_owed)
{
	return sat32(RR_MAX(perm, 1) + (uint64_t)done_owed + bc_owed);
}

/* The same, for the connection's state now. */
static uint32_t need_res(const struct rr_cred_rsp *c)
{
	return need_res_of(call_perm(c), c->done_owed, c->bc_owed);
}

/* The Receives the connection may count on: its reservation and its pool's
 * free ones. */
static uint64_t room_of(const struct rr_cred_rsp *c)
{
	int64_t fr = rr_cred_pool_free(c->pool);

	return (uint64_t)c->res + (fr > 0 ? (uint64_t)fr : 0);
}

/* Brings the connection's reservation, and its pool's sum, in line with its
 * state; records by how much what the peer may send grew since @before. */
static void settle_res(struct rr_cred_rsp *c, uint64_t before)
{
	uint64_t after = rr_cred_rsp_sendable(c);

	if (c->joined) {
		uint32_t r = need_res(c);

		c->pool->reserved = c->pool->reserved - c->res + r;
		c->res = r;
	}
	if (after > before)
		c->added = sat32((uint64_t)c->added + (after - before));
}

void rr_cred_rsp_init(struct rr_cred_rsp *c, uint32_t max_credits, uint32_t done_max,
		      uint32_t nrecv)
{
	memset(c, 0, sizeof(*c));
	c->max_credits = max_credits ? max_credits : 1;
	c->done_max = done_max;
	c->limit = 1; /* RFC 8166 section 4.3.3: the peer assumes one */
	c->target = 1;
	rr_cred_pool_init(&c->own, nrecv, 0, false);
	c->pool = &c->own;
}

int rr_cred_rsp_join(struct rr_cred_rsp *c, struct rr_cred_pool *pool)
{
	if (c->joined)
		return -EINVAL;
	if (!pool)
		pool = &c->own;
	if (!rr_cred_pool_room(pool)) {
		pool->refused++;
		return -ENOSPC;
	}
	c->pool = pool;
	c->joined = true;
	c->res = 0;
	pool->members++;
	settle_res(c, 0);
	return 0;
}

void rr_cred_rsp_leave(struct rr_cred_rsp *c)
{
	struct rr_cred_pool *p = c->pool;

	if (!c->joined)
		return;
	p->reserved -= c->res;
	p->members--;
	if (rr_cred_rsp_in_progress(c) && p->active)
		p->active--;
	c->res = 0;
	c->joined = false;
}

void rr_cred_rsp_posted(struct rr_cred_rsp *c, uint32_t n)
{
	rr_cred_pool_posted(c->pool, n);
}

/* A message took one of the pool's Receives. */
static void consumed(struct rr_cred_rsp *c)
{
	if (c->pool->posted)
		c->pool->posted--;
}

/* What settle_res does, for a message counted as a Call: what the peer may
 * send never grows (its permission shrinks by one, or stays 0 past it), so
 * nothing is added; the reservation follows from the permission left
 * @perm. Computed from values in registers (issue 16 part CO): the pool's
 * and the connection's fields are not read again after each store. */
static void settle_call(struct rr_cred_rsp *c, struct rr_cred_pool *p, uint64_t perm)
{
	if (c->joined) {
		uint32_t r = need_res_of(perm, c->done_owed, c->bc_owed);

		p->reserved = p->reserved - c->res + r;
		c->res = r;
	}
}

int rr_cred_rsp_on_call(struct rr_cred_rsp *c)
{
	struct rr_cred_pool *p = c->pool;
	uint64_t calls = c->calls, limit = c->limit, in;
	bool over = calls >= limit;
	/* the permission left once this message is counted */
	uint64_t perm = over ? 0 : limit - calls - 1;

	consumed(c);
	if (c->joined && calls == c->replies)
		p->active++;
	c->calls = ++calls;
	in = calls - c->replies;
	if (in > c->peak)
		c->peak = sat32(in);
	if (perm == 0)
		c->limited = true;
	settle_call(c, p, perm);
	if (over) {
		p->overruns++;
		return -EPROTO;
	}
	return 0;
}

int rr_cred_rsp_on_done(struct rr_cred_rsp *c)
{
	uint64_t before = rr_cred_rsp_sendable(c);

	if (c->done_owed == 0)
		return rr_cred_rsp_on_call(c) < 0 ? -EPROTO : 1;
	consumed(c);
	c->done_owed--;
	settle_res(c, before);
	return 0;
}

/* The grant demand asks for, and the demand window moved on. Private pool:
 * the configured maximum (its Receives serve this connection alone).
 * Shared: doubled when the peer used its whole permission since the last
 * Reply; after a window of as many Replies as the grant (RR_CRED_WINDOW
 * at least) in which it never did, cut to twice the most Calls it had in
 * progress during the window, but at most by half. Calls and Replies in
 * flight hide part of the demand from the responder: a requester that
 * keeps 32 Calls outstanding on a fast responder shows it 10 to 25 at a
 * time, and when a window was 8 Replies and the cut went to one above
 * that, it waited for a credit on every other Call (rpcrdma-bench's 32
 * outstanding READs: 50 % of Calls waited, now 2 %): the tail
 * of a burst brings its grant down, so an idle connection keeps little of
 * the pool. Replies count toward that window only once a Call sent after a
 * raise arrived (before, the peer could not have used it yet: a batch of
 * Calls answered one by one is no sign of calm). At most a fair share of
 * the pool's capacity among the connections with Calls in progress. */
static uint64_t demand(struct rr_cred_rsp *c, uint64_t k)
{
	const struct rr_cred_pool *p = c->pool;
	uint64_t t = c->target, fair;

	if (!p->shared)
		return c->max_credits;
	if (c->limited) {
		t = RR_MAX(2 * t, 2u);
		c->calm = 0;
		c->peak = sat32(k);
		c->raised_at = c->calls;
	} else if (c->calls > c->raised_at &&
		   ++c->calm >= RR_MAX(t, (uint64_t)RR_CRED_WINDOW)) {
		t = RR_MAX(t / 2, RR_MIN(t, 2ull * RR_MAX(c->peak, 1u)));
		c->calm = 0;
		c->peak = sat32(k);
	}
	fair = (p->cap - RR_MIN(p->cap, p->members)) / RR_MAX(p->active, 1u) + 1;
	t = RR_MIN(t, fair);
	return RR_MAX(RR_MIN(t, (uint64_t)c->max_credits), 1u);
}

int rr_cred_rsp_reply(struct rr_cred_rsp *c, bool read_chunk, uint32_t *grant)
{
	struct rr_cred_pool *p = c->pool;
	uint64_t in = rr_cred_rsp_in_progress(c), k, room, want, g, before;
	uint32_t d2;

	if (in == 0)
		return -EPROTO;
	if (read_chunk && c->done_owed >= c->done_max)
		return -ENOSPC;
	d2 = c->done_owed + (read_chunk ? 1 : 0);
	k = in - 1; /* Calls still in progress once this Reply is sent */
	/* The Receives this connection may hold after the Reply: its own and
	 * the pool's free ones. Its peer may then send max(L - C, g - k) Calls
	 * and d2 RDMA_DONEs, and it reserves one Call at least. */
	room = room_of(c);
	if (RR_MAX(call_perm(c), 1) + d2 + c->bc_owed > room)
		return -ENOBUFS; /* only an RDMA_DONE reservation can fail */
	want = demand(c, k);
	g = RR_MIN(want, k + (room - d2 - c->bc_owed));
	if (g < want) {
		p->clipped++;
		p->deficit = sat32((uint64_t)p->deficit + (want - g));
	}
	if (g == 0)
		g = 1; /* affordable: the reservation holds one Call */
	before = rr_cred_rsp_sendable(c);
	c->replies++;
	c->done_owed = d2;
	c->limit = RR_MAX(c->limit, c->replies + g);
	if (c->joined && k == 0 && p->active)
		p->active--;
	c->limited = false;
	c->target = sat32(want);
	c->last_grant = (uint32_t)g;
	settle_res(c, before);
	*grant = (uint32_t)g;
	return 0;
}

/* Whether one more Receive could be reserved (an RDMA_DONE or a backward
 * Reply owed), as rr_cred_rsp_reply checks it. */
static bool one_more_fits(const struct rr_cred_rsp *c)
{
	return (uint64_t)need_res(c) + 1 <= room_of(c);
}

bool rr_cred_rsp_done_room(const struct rr_cred_rsp *c)
{
	return c->done_owed < c->done_max && one_more_fits(c);
}

bool rr_cred_rsp_bc_room(const struct rr_cred_rsp *c)
{
	return one_more_fits(c);
}

void rr_cred_rsp_want_one(struct rr_cred_rsp *c)
{
	c->pool->deficit = sat32((uint64_t)c->pool->deficit + 1);
}

void rr_cred_rsp_bc_sent(struct rr_cred_rsp *c)
{
	uint64_t before = rr_cred_rsp_sendable(c);

	c->bc_owed++;
	settle_res(c, before);
}

int rr_cred_rsp_on_bc_reply(struct rr_cred_rsp *c)
{
	uint64_t before = rr_cred_rsp_sendable(c);

	if (c->bc_owed == 0)
		return rr_cred_rsp_on_call(c) < 0 ? -EPROTO : 1;
	consumed(c);
	c->bc_owed--;
	settle_res(c, before);
	return 0;
}

int rr_cred_rsp_settle(struct rr_cred_rsp *c)
{
	uint32_t g;

	return rr_cred_rsp_reply(c, false, &g);
}

uint32_t rr_cred_rsp_take_added(struct rr_cred_rsp *c)
{
	uint32_t n = c->added;

	c->added = 0;
	return n;
}

bool rr_cred_rsp_safe(const struct rr_cred_rsp *c)
{
	if (!c->joined)
		return true;
	return rr_cred_rsp_sendable(c) <= c->res && rr_cred_pool_safe(c->pool);
}
