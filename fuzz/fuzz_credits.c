/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the credit accounting (proto/conn/credits.h, RFC
 * 8166 section 4.3.1, docs/protocol.md "Credits") as a state machine: the
 * input is a sequence of operations on one receive pool (shared, or the
 * private pool of one connection, chosen by the first byte) and up to four
 * connections, each a requester (rr_cred_req) wired to a responder
 * (rr_cred_rsp) through in-order channels: a requester sends a Call when
 * its grant allows (or, for a hostile one, whenever the input says), the
 * queue gives it a Receive within the connection's receive quota (what
 * the responder said its peer may send: rr_cred_rsp_take_added; a message
 * beyond it is stopped there, as the soft provider does), the responder's
 * executor takes it out of the queue, the responder answers
 * (plain or with a Read chunk, RDMA_DONE owed), Replies reach the
 * requester, owed RDMA_DONEs go back, the executor posts what the pool
 * wants and reposts what it keeps, connections leave and come back. After
 * every operation: a grant is never 0 nor above its maximum; a
 * well-behaved peer's message always finds a posted Receive, within its
 * quota, and is never taken for an overrun; what all peers may send (in
 * flight included) never exceeds the Receives posted; every connection's
 * reservation covers what its peer may send; once every connection left,
 * nothing is reserved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/conn/credits.h"

#define FAIL(msg)                                                              \
	do {                                                                   \
		fprintf(stderr, "fuzz_credits: %s (line %d)\n", msg, __LINE__); \
		abort();                                                       \
	} while (0)

enum { NC = 4, Q = 256, MAXC = 16 };

struct call {
	struct rr_cred_node node;
};

struct conn {
	bool up, hostile;
	struct rr_cred_req q;
	struct rr_cred_rsp s;
	struct call calls[Q];
	unsigned ncalls;
	uint8_t up_msg[Q];         /* 1 Call, 2 RDMA_DONE: requester -> queue */
	unsigned up_h, up_t;
	unsigned taken;            /* in the queue's hands, not yet polled */
	uint8_t taken_msg[Q];
	unsigned tk_h;
	unsigned inprog;           /* Calls the responder holds */
	uint32_t dn_grant[Q];      /* Replies on their way */
	bool dn_rc[Q];
	unsigned dn_h, dn_t;
	unsigned done_owed;        /* RDMA_DONEs the requester will send */
	uint64_t quota;            /* the provider's: Receives it may still take */
};

static struct rr_cred_pool pool;
static struct conn cn[NC];
static uint32_t srq;           /* Receives really in the queue */
static bool shared;

static void join(struct conn *c, unsigned i)
{
	memset(c, 0, sizeof(*c));
	rr_cred_req_init(&c->q, 1 + i * 5);
	rr_cred_rsp_init(&c->s, MAXC - i, i & 1 ? 3 : 0, shared ? 0 : MAXC + 4);
	if (!shared) {
		rr_cred_rsp_posted(&c->s, MAXC + 4);
		srq = MAXC + 4;
	}
	if (rr_cred_rsp_join(&c->s, shared ? &pool : NULL) == 0)
		c->up = true;
	c->hostile = i == 3;
	c->quota = rr_cred_rsp_take_added(&c->s);
}

static struct rr_cred_pool *pool_of(struct conn *c)
{
	return c->s.pool;
}

static void fill(void)
{
	uint32_t n = rr_cred_pool_want(&pool);

	if (!shared)
		return;
	rr_cred_pool_posted(&pool, n);
	srq += n;
}

/* The requester puts a Call on the wire (hostile: whatever its grant). */
static void send_call(struct conn *c, bool force)
{
	struct call *k;

	if (c->ncalls == Q || c->up_t - c->up_h >= Q)
		return;
	k = &c->calls[c->ncalls % Q];
	memset(k, 0, sizeof(*k));
	c->ncalls++;
	if (force && c->hostile) {
		c->up_msg[c->up_t++ % Q] = 1;
		return;
	}
	if (rr_cred_req_submit(&c->q, &k->node) == 1)
		c->up_msg[c->up_t++ % Q] = 1;
}

/* The queue gives a message a Receive, within the connection's quota (a
 * hostile peer's excess is stopped there: its connection ends, what it
 * sent is lost); it must find one. */
static void arrive(struct conn *c)
{
	if (c->up_h == c->up_t || c->taken == Q)
		return;
	if (!c->quota) {
		if (!c->hostile)
			FAIL("a well-behaved peer's message beyond its quota");
		c->up_h = c->up_t;
		return;
	}
	if (!srq)
		FAIL("a message found the queue empty");
	srq--;
	c->quota--;
	c->taken_msg[(c->tk_h + c->taken++) % Q] = c->up_msg[c->up_h++ % Q];
}

static void leave(struct conn *c, unsigned i);

static void poll1(struct conn *c)
{
	int r;
	uint8_t m;

	if (!c->taken)
		return;
	m = c->taken_msg[c->tk_h++ % Q];
	c->taken--;
	r = m == 2 ? rr_cred_rsp_on_done(&c->s) : rr_cred_rsp_on_call(&c->s);
	/* a hostile peer may spend its RDMA_DONE reservations on Calls: one
	 * quota holds both, the session tells them apart and ends it */
	if (r < 0 && !c->hostile)
		FAIL("a well-behaved peer taken for an overrun");
	if (r >= 0 && (m == 1 || r == 1))
		c->inprog++;
	if (rr_cred_pool_keep(pool_of(c))) {
		rr_cred_rsp_posted(&c->s, 1);
		srq++;
	}
	if (r < 0)
		leave(c, (unsigned)(c - cn));
}

static void reply(struct conn *c, bool rc)
{
	uint32_t g = 0;
	int r;

	if (!c->inprog || c->dn_t - c->dn_h >= Q)
		return;
	r = rr_cred_rsp_reply(&c->s, rc, &g);
	if (r == -ENOSPC || r == -ENOBUFS) {
		rc = false;
		r = rr_cred_rsp_reply(&c->s, false, &g);
	}
	if (r)
		FAIL("a Reply without a Read chunk failed");
	if (g < 1 || g > c->s.max_credits)
		FAIL("grant out of range");
	c->quota += rr_cred_rsp_take_added(&c->s);
	c->inprog--;
	c->dn_grant[c->dn_t % Q] = g;
	c->dn_rc[c->dn_t++ % Q] = rc;
	fill();
}

static void deliver(struct conn *c)
{
	if (c->dn_h == c->dn_t)
		return;
	if (!c->hostile && rr_cred_req_on_reply(&c->q, c->dn_grant[c->dn_h % Q]))
		FAIL("a Reply with nothing outstanding");
	if (c->dn_rc[c->dn_h % Q]) {
		rr_cred_req_on_read_reply(&c->q);
		c->done_owed++;
	}
	c->dn_h++;
	while (!c->hostile && rr_cred_req_next(&c->q) && c->up_t - c->up_h < Q)
		c->up_msg[c->up_t++ % Q] = 1;
}

static void send_done(struct conn *c)
{
	if (!c->done_owed || c->up_t - c->up_h >= Q)
		return;
	if (rr_cred_req_done_sent(&c->q))
		FAIL("RDMA_DONE not owed");
	c->done_owed--;
	c->up_msg[c->up_t++ % Q] = 2;
}

/* The connection ends: what is on the wire is lost, the queue's unpolled
 * completions are flushed back, the reservation goes last. */
static void leave(struct conn *c, unsigned i)
{
	while (c->taken) {
		c->taken--;
		c->tk_h++;
		rr_cred_pool_lost(pool_of(c), 1);
		if (rr_cred_pool_keep(pool_of(c))) {
			rr_cred_pool_posted(pool_of(c), 1);
			srq++;
		}
	}
	rr_cred_rsp_leave(&c->s);
	join(c, i);
	fill();
}

static void check(void)
{
	uint64_t may = 0;

	for (unsigned i = 0; i < NC; i++) {
		struct conn *c = &cn[i];

		if (!c->up)
			continue;
		if (rr_cred_rsp_sendable(&c->s) > c->s.res)
			FAIL("a reservation does not cover what its peer may send");
		if (c->quota != rr_cred_rsp_sendable(&c->s) - c->taken)
			FAIL("the quota is not what the peer may still send");
		if (!c->hostile) {
			uint32_t room = c->q.grant > c->q.outstanding ? c->q.grant - c->q.outstanding : 0;

			may += room + c->done_owed + (c->up_t - c->up_h);
		} else {
			may += c->quota;   /* whatever it does, it gets that many */
		}
	}
	if (may > srq)
		FAIL("the peers may send more than the Receives posted");
	if (shared && pool.posted > pool.cap)
		FAIL("the pool beyond its cap");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	shared = data[0] & 1;
	srq = 0;
	rr_cred_pool_init(&pool, 8 + data[0] / 2, data[0] & 2 ? 4 : 0, true);
	for (unsigned i = 0; i < NC; i++)
		join(&cn[i], i);
	fill();
	if (!shared)   /* one connection on its own Receives */
		for (unsigned i = 1; i < NC; i++)
			cn[i].up = false;
	check();
	for (size_t p = 1; p < size; p++) {
		struct conn *c = &cn[data[p] & 3];
		unsigned op = data[p] >> 2;

		if (!c->up)
			continue;
		switch (op % 9) {
		case 0: send_call(c, false); break;
		case 1: send_call(c, true); break;
		case 2: arrive(c); break;
		case 3: poll1(c); break;
		case 4: reply(c, false); break;
		case 5: reply(c, true); break;
		case 6: deliver(c); break;
		case 7: send_done(c); break;
		default:
			if (shared && op >= 60)
				leave(c, (unsigned)(c - cn));
			else
				fill();
			break;
		}
		check();
	}
	for (unsigned i = 0; i < NC; i++)
		rr_cred_rsp_leave(&cn[i].s);
	if (shared && pool.reserved)
		FAIL("reservations left after every connection went");
	return 0;
}
