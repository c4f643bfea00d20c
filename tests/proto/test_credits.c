/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the credit accounting (RFC 8166 sections 4.3.1, 4.3.3) for both
 * roles and of the RDMA_DONE rule of the reliable-reply extension: initial
 * credit 1, grant 0 treated as 1, hundreds of Calls queued beyond the grant
 * and drained in order, grants shrinking below the outstanding count, the
 * responder never granting 0 or more than its posted Receives (a lower grant
 * binding only from its Reply on), shared pools (admission, grants following
 * demand, clipped by the free Receives), overruns detected, and a two-peer
 * simulation at the credit limit in which every message the requester sends
 * must find a posted Receive (no overrun) and every Call completes (no
 * deadlock). */
#include "proto/conn/credits.h"
#include "test.h"

struct call {
	uint32_t id;
	struct rr_cred_node node;
};

static struct call *call_of(struct rr_cred_node *n)
{
	return n ? RR_CONTAINER_OF(n, struct call, node) : NULL;
}

/* Id of the next sendable Call, UINT32_MAX when there is none. */
static uint32_t next_id(struct rr_cred_req *c)
{
	struct rr_cred_node *n = rr_cred_req_next(c);

	return n ? call_of(n)->id : UINT32_MAX;
}

/* ---- requester ---- */

TEST(cred_req_initial_one_credit)
{
	struct rr_cred_req c;
	struct call k[3] = {{1}, {2}, {3}};

	rr_cred_req_init(&c, 128);
	CHECK_EQ(rr_cred_req_request(&c), 128);
	CHECK_EQ(c.grant, 1);
	CHECK(rr_cred_req_can_send(&c));
	CHECK_EQ(rr_cred_req_submit(&c, &k[0].node), 1);
	CHECK(!rr_cred_req_can_send(&c));
	CHECK_EQ(rr_cred_req_submit(&c, &k[1].node), 0);
	CHECK_EQ(rr_cred_req_submit(&c, &k[2].node), 0);
	CHECK(rr_cred_req_next(&c) == NULL);
	CHECK_EQ(c.outstanding, 1);
	CHECK_EQ(c.queued, 2);
	/* the first Reply raises the grant: both queued Calls go, in order */
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 64), 0);
	CHECK_EQ(c.grant, 64);
	CHECK_EQ(next_id(&c), 2);
	CHECK_EQ(next_id(&c), 3);
	CHECK(rr_cred_req_next(&c) == NULL);
	CHECK_EQ(c.outstanding, 2);
	CHECK(rr_cred_req_can_send(&c));
}

TEST(cred_req_grant_zero_is_one_and_clamped)
{
	struct rr_cred_req c;

	rr_cred_req_init(&c, 32);
	CHECK_EQ(rr_cred_req_grant(&c, 0), 1);
	CHECK_EQ(c.grant, 1);
	CHECK(c.granted);
	CHECK_EQ(rr_cred_req_grant(&c, 1000), 32); /* our Receives bound it */
	CHECK_EQ(rr_cred_req_grant(&c, 7), 7);
	CHECK_EQ(rr_cred_req_grant(&c, UINT32_MAX), 32);
	rr_cred_req_init(&c, 0);
	CHECK_EQ(rr_cred_req_request(&c), 1);
	rr_cred_req_init(&c, 1u << 20);
	CHECK_EQ(rr_cred_req_request(&c), 65535);
}

TEST(cred_req_grant_zero_never_deadlocks)
{
	struct rr_cred_req c;
	struct call k[4] = {{0}, {1}, {2}, {3}};

	rr_cred_req_init(&c, 8);
	CHECK_EQ(rr_cred_req_submit(&c, &k[0].node), 1);
	for (int i = 1; i < 4; i++)
		CHECK_EQ(rr_cred_req_submit(&c, &k[i].node), 0);
	/* every Reply grants 0: still one Call at a time, all get sent */
	for (int i = 1; i < 4; i++) {
		REQUIRE_EQ(rr_cred_req_on_reply(&c, 0), 0);
		CHECK_EQ(next_id(&c), (uint32_t)i);
		CHECK(rr_cred_req_next(&c) == NULL);
	}
	CHECK_EQ(c.queued, 0);
	CHECK_EQ(c.outstanding, 1);
}

TEST(cred_req_hundreds_queued_drain_in_order)
{
	enum { N = 700 };
	static struct call k[N];
	struct rr_cred_req c;
	uint32_t sent_order[N], in_flight[N];
	uint32_t nsent = 0, head = 0, tail = 0, replies = 0;
	static const uint32_t grants[] = {0, 1, 3, 16, 128, 64, 2, 200, 5, 32};

	rr_cred_req_init(&c, 128);
	for (uint32_t i = 0; i < N; i++) {
		int r;

		k[i].id = i;
		r = rr_cred_req_submit(&c, &k[i].node);
		REQUIRE(r == 0 || r == 1);
		if (r == 1) {
			sent_order[nsent++] = i;
			in_flight[tail++] = i;
		}
	}
	CHECK_EQ(nsent, 1);
	CHECK_EQ(c.queued, N - 1);
	while (head < tail) {
		struct rr_cred_node *n;

		CHECK_EQ(in_flight[head], head); /* the oldest Call gets its Reply */
		head++;
		REQUIRE_EQ(rr_cred_req_on_reply(&c, grants[replies++ % RR_ARRAY_SIZE(grants)]), 0);
		while ((n = rr_cred_req_next(&c)) != NULL) {
			sent_order[nsent++] = call_of(n)->id;
			in_flight[tail++] = call_of(n)->id;
			CHECK(!n->queued);
			CHECK(c.outstanding <= c.grant); /* never beyond the grant */
		}
		CHECK_EQ(c.outstanding, tail - head);
	}
	REQUIRE_EQ(nsent, N);
	for (uint32_t i = 0; i < N; i++)
		CHECK_EQ(sent_order[i], i);
	CHECK_EQ(c.queued, 0);
	CHECK_EQ(c.outstanding, 0);
}

TEST(cred_req_grant_shrinks_below_outstanding)
{
	static struct call k[100];
	struct rr_cred_req c;
	uint32_t sent = 0;

	rr_cred_req_init(&c, 128);
	for (uint32_t i = 0; i < 100; i++) {
		k[i].id = i;
		sent += rr_cred_req_submit(&c, &k[i].node) == 1;
	}
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 40), 0); /* Call 0 done */
	while (rr_cred_req_next(&c))
		sent++;
	CHECK_EQ(c.outstanding, 40);
	CHECK_EQ(sent, 41);
	/* the responder cuts the grant to 4 while 40 are out */
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
	CHECK_EQ(c.outstanding, 39);
	CHECK(rr_cred_req_next(&c) == NULL);
	CHECK(!rr_cred_req_can_send(&c));
	for (int i = 0; i < 35; i++) {
		REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
		if (c.outstanding >= 4)
			CHECK(rr_cred_req_next(&c) == NULL);
	}
	CHECK_EQ(c.outstanding, 4); /* 39 - 35 */
	CHECK(rr_cred_req_next(&c) == NULL);
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
	CHECK_EQ(next_id(&c), 41);
	CHECK(rr_cred_req_next(&c) == NULL);
	CHECK_EQ(c.outstanding, 4);
}

TEST(cred_req_new_call_never_overtakes_queue)
{
	struct call k[4] = {{0}, {1}, {2}, {3}};
	struct rr_cred_req c;

	rr_cred_req_init(&c, 8);
	CHECK_EQ(rr_cred_req_submit(&c, &k[0].node), 1);
	CHECK_EQ(rr_cred_req_submit(&c, &k[1].node), 0);
	CHECK_EQ(rr_cred_req_submit(&c, &k[2].node), 0);
	/* credits are free now, but the caller submits before draining */
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
	CHECK(!rr_cred_req_can_send(&c));
	CHECK_EQ(rr_cred_req_submit(&c, &k[3].node), 0);
	CHECK_EQ(next_id(&c), 1);
	CHECK_EQ(next_id(&c), 2);
	CHECK_EQ(next_id(&c), 3);
	CHECK(rr_cred_req_next(&c) == NULL);
	CHECK(rr_cred_req_can_send(&c));
}

TEST(cred_req_errors_cancel_requeue_reset)
{
	struct call k[5] = {{0}, {1}, {2}, {3}, {4}};
	struct rr_cred_req c, other;

	rr_cred_req_init(&c, 4);
	rr_cred_req_init(&other, 4);
	CHECK_EQ(rr_cred_req_complete(&c), -EPROTO);
	CHECK_EQ(c.outstanding, 0);
	CHECK_EQ(rr_cred_req_submit(&c, NULL), -EINVAL);
	CHECK_EQ(rr_cred_req_submit(&c, &k[0].node), 1);
	CHECK_EQ(rr_cred_req_submit(&c, &k[1].node), 0);
	CHECK_EQ(rr_cred_req_submit(&c, &k[1].node), -EINVAL); /* already queued */
	CHECK_EQ(rr_cred_req_submit(&c, &k[2].node), 0);
	CHECK_EQ(rr_cred_req_submit(&c, &k[3].node), 0);
	CHECK_EQ(rr_cred_req_cancel(&other, &k[2].node), -ENOENT);
	CHECK_EQ(rr_cred_req_cancel(&c, &k[2].node), 0);
	CHECK_EQ(rr_cred_req_cancel(&c, &k[2].node), -ENOENT);
	CHECK_EQ(c.queued, 2);
	/* reconnect: Call 0 had no Reply; it goes first on the new connection */
	rr_cred_req_reset(&c);
	CHECK_EQ(c.grant, 1);
	CHECK_EQ(c.outstanding, 0);
	CHECK(!c.granted);
	CHECK_EQ(rr_cred_req_requeue(&c, &k[0].node), 0);
	CHECK_EQ(rr_cred_req_requeue(&c, &k[0].node), -EINVAL);
	CHECK_EQ(next_id(&c), 0);
	CHECK(rr_cred_req_next(&c) == NULL); /* 1 credit after reconnect */
	/* a new Call must not overtake the queued ones */
	CHECK_EQ(rr_cred_req_submit(&c, &k[4].node), 0);
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 3), 0);
	CHECK_EQ(next_id(&c), 1);
	CHECK_EQ(next_id(&c), 3);
	CHECK_EQ(next_id(&c), 4);
	CHECK(rr_cred_req_next(&c) == NULL);
}

TEST(cred_req_done_needs_no_call_credit)
{
	static struct call k[20];
	struct rr_cred_req c;

	rr_cred_req_init(&c, 4);
	CHECK_EQ(rr_cred_req_done_sent(&c), -EPROTO); /* none owed */
	for (uint32_t i = 0; i < 20; i++) {
		k[i].id = i;
		rr_cred_req_submit(&c, &k[i].node);
	}
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
	while (rr_cred_req_next(&c))
		;
	CHECK_EQ(c.outstanding, 4);
	/* at the credit limit a Read-chunk Reply arrives ... */
	REQUIRE_EQ(rr_cred_req_on_reply(&c, 4), 0);
	rr_cred_req_on_read_reply(&c);
	CHECK(rr_cred_req_next(&c) != NULL); /* its credit went to the next Call */
	CHECK(!rr_cred_req_can_send(&c));
	/* ... and its RDMA_DONE still goes, without a credit */
	CHECK_EQ(rr_cred_req_done_sent(&c), 0);
	CHECK_EQ(c.outstanding, 4);
	CHECK_EQ(rr_cred_req_done_sent(&c), -EPROTO); /* exactly one per Reply */
	rr_cred_req_on_read_reply(&c);
	rr_cred_req_reset(&c);
	CHECK_EQ(c.done_owed, 0);
}

/* ---- responder ---- */

/* A connection on a private pool of @nrecv Receives, all posted, joined. */
static void rsp_private(struct rr_cred_rsp *r, uint32_t max, uint32_t dmax, uint32_t nrecv)
{
	rr_cred_rsp_init(r, max, dmax, nrecv);
	rr_cred_rsp_posted(r, nrecv);
	REQUIRE_EQ(rr_cred_rsp_join(r, NULL), 0);
}

TEST(cred_rsp_never_zero_never_above_posted)
{
	struct rr_cred_rsp r;
	uint32_t g = 0;

	rr_cred_rsp_init(&r, 64, 0, 1);
	CHECK_EQ(r.limit, 1); /* the peer assumes one credit */
	REQUIRE_EQ(rr_cred_rsp_join(&r, NULL), 0);
	CHECK_EQ(rr_cred_rsp_join(&r, NULL), -EINVAL);
	CHECK_EQ(rr_cred_rsp_take_added(&r), 1); /* its first Call */
	CHECK(!rr_cred_rsp_safe(&r)); /* nothing posted, peer assumes 1 */
	CHECK_EQ(rr_cred_rsp_reply(&r, false, &g), -EPROTO); /* no Call */
	rr_cred_rsp_posted(&r, 1);
	CHECK(rr_cred_rsp_safe(&r));
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	/* the only Receive was consumed: still a grant of 1, the one Call the
	 * reservation holds (its Receive is reposted before the peer may use
	 * it: the executor posts as it takes the Call out) */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 1);
	CHECK(!rr_cred_rsp_safe(&r));
	rr_cred_rsp_posted(&r, 1);
	CHECK(rr_cred_rsp_safe(&r));
	/* 10 posted, max 64: grant 10 */
	rsp_private(&r, 64, 0, 10);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 10);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 10);
	CHECK(rr_cred_rsp_safe(&r));
	/* 100 posted: grant capped at 64 */
	rsp_private(&r, 64, 0, 100);
	CHECK_EQ(rr_cred_rsp_take_added(&r), 1);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
	CHECK_EQ(r.limit, 65); /* one Reply + 64 */
	CHECK_EQ(rr_cred_rsp_take_added(&r), 64);
	CHECK(rr_cred_rsp_safe(&r));
	rr_cred_rsp_init(&r, 0, 0, 1);
	CHECK_EQ(r.max_credits, 1);
}

TEST(cred_rsp_overrun_is_detected)
{
	struct rr_cred_rsp r;
	uint32_t g = 99;

	rsp_private(&r, 16, 2, 8);
	/* granted 1 (the initial credit), the peer sends 3 Calls */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	CHECK_EQ(rr_cred_rsp_on_call(&r), -EPROTO);
	CHECK_EQ(rr_cred_rsp_on_call(&r), -EPROTO);
	CHECK_EQ(r.pool->overruns, 2);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 0);
	/* what the peer already sent is still answerable, never with 0 */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK(g >= 1);
	/* an RDMA_DONE nobody owes counts as a Call: within the permission it
	 * is settled, beyond it an overrun */
	rsp_private(&r, 4, 2, 8);
	CHECK_EQ(rr_cred_rsp_on_done(&r), 1);
	REQUIRE_EQ(rr_cred_rsp_settle(&r), 0);
	CHECK_EQ(rr_cred_rsp_in_progress(&r), 0);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 4);
	for (int i = 0; i < 4; i++)
		REQUIRE_EQ(rr_cred_rsp_on_done(&r), 1);
	CHECK_EQ(rr_cred_rsp_on_done(&r), -EPROTO);
}

/* RFC 8166 section 4.3.1: a lower grant binds the peer only from the Reply
 * that carries it on; until then it may act on the higher one, and the
 * responder keeps Receives for that. */
TEST(cred_rsp_grant_shrink_keeps_receives_for_old_grant)
{
	struct rr_cred_pool pool;
	struct rr_cred_rsp r;
	uint32_t g;

	rr_cred_pool_init(&pool, 1000, 0, true);
	rr_cred_rsp_init(&r, 64, 0, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&r, &pool), 0);
	rr_cred_pool_posted(&pool, 200);
	r.target = 32; /* a peer that had shown a demand of 32 */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0); /* its one Call: limited */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
	CHECK_EQ(r.limit, 65);
	/* 10 Calls; its demand has fallen to 11 (a window of Replies in which
	 * it had 10 in progress at most) */
	for (int i = 0; i < 10; i++)
		REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 54);
	r.target = 11;
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 11);
	/* ... but the 64 of the first Reply still binds: 65 Calls in all */
	CHECK_EQ(r.limit, 65);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 54);
	CHECK_EQ(r.res, 54);
	CHECK(rr_cred_rsp_safe(&r));
	/* as Replies go, the new limit overtakes the old one */
	for (int i = 0; i < 9; i++)
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(rr_cred_rsp_in_progress(&r), 0);
	CHECK(r.limit <= 65);
	CHECK_EQ(rr_cred_rsp_sendable(&r), r.limit - r.calls);
	CHECK_EQ(pool.reserved, r.res);
	rr_cred_rsp_leave(&r);
	CHECK_EQ(pool.reserved, 0);
	CHECK_EQ(pool.members, 0);
}

TEST(cred_rsp_read_chunk_reply_reserves_a_receive)
{
	struct rr_cred_rsp r;
	uint32_t g;

	rsp_private(&r, 8, 2, 9);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1); /* steady state: reposted, 9 posted */
	/* a Read-chunk Reply keeps a Receive for its RDMA_DONE */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(g, 8);
	CHECK_EQ(r.done_owed, 1);
	CHECK_EQ(rr_cred_rsp_sendable(&r), 9);
	CHECK(rr_cred_rsp_safe(&r));
	/* a second: only 9 Receives, 8 Calls + 2 RDMA_DONEs do not fit */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(g, 7);
	CHECK_EQ(r.done_owed, 2);
	CHECK(rr_cred_rsp_safe(&r));
	/* done_max reached: no third Read-chunk Reply, plain Replies still go */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOSPC);
	CHECK_EQ(rr_cred_rsp_in_progress(&r), 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 7);
	/* RDMA_DONEs come back */
	CHECK_EQ(rr_cred_rsp_on_done(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	CHECK_EQ(rr_cred_rsp_on_done(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	CHECK_EQ(r.done_owed, 0);
	CHECK(rr_cred_rsp_safe(&r));
	/* no free Receive for the RDMA_DONE: -ENOBUFS, nothing changed, and
	 * rr_cred_rsp_done_room says so beforehand (the Reply waits) */
	rsp_private(&r, 8, 2, 1);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	CHECK(!rr_cred_rsp_done_room(&r));
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOBUFS);
	CHECK_EQ(r.done_owed, 0);
	CHECK_EQ(rr_cred_rsp_in_progress(&r), 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 1);
	/* reliable reply off: done_max 0 refuses every Read-chunk Reply */
	rsp_private(&r, 8, 0, 100);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	CHECK(!rr_cred_rsp_done_room(&r));
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOSPC);
}

/* In a shared pool a Read-chunk Reply needs a free Receive for its
 * RDMA_DONE: rr_cred_rsp_done_room is false while the pool has none (the
 * session parks the Reply instead of answering ERR_CHUNK) and true once
 * the executor posted one; whenever it says true, the Reply goes. */
TEST(cred_pool_done_room_follows_free_receives)
{
	struct rr_cred_pool pool;
	struct rr_cred_rsp r;
	uint32_t g;

	rr_cred_pool_init(&pool, 100, 0, true);
	rr_cred_rsp_init(&r, 8, 4, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&r, &pool), 0);
	rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool));   /* its first Call's */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_pool_posted(&pool, 1);   /* reposted */
	CHECK_EQ(rr_cred_pool_free(&pool), 0);
	CHECK(!rr_cred_rsp_done_room(&r));
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOBUFS);
	rr_cred_pool_posted(&pool, 1);
	CHECK(rr_cred_rsp_done_room(&r));
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(r.done_owed, 1);
	CHECK(rr_cred_rsp_safe(&r));
	/* up to done_max, each time a Receive is posted for it */
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool) + 1);
		CHECK(rr_cred_rsp_done_room(&r));
		REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
		CHECK(rr_cred_rsp_safe(&r));
	}
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_pool_posted(&pool, 10);
	CHECK(!rr_cred_rsp_done_room(&r));   /* at done_max */
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOSPC);
}

/* Backchannel (RFC 8167) in a shared pool: a backward Call reserves the
 * Receive of its Reply (it waits while the pool has none free), the peer may
 * then send it (sendable + 1, in the receive quota's increase); its Reply
 * consumes it; a Reply that was not owed counts as a Call (an overrun when
 * the peer has no permission left). */
TEST(cred_pool_backward_replies_reserved)
{
	struct rr_cred_pool pool;
	struct rr_cred_rsp r;
	uint64_t before;
	uint32_t g;

	rr_cred_pool_init(&pool, 100, 0, true);
	rr_cred_rsp_init(&r, 8, 0, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&r, &pool), 0);
	rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool));
	(void)rr_cred_rsp_take_added(&r);
	CHECK_EQ(rr_cred_pool_free(&pool), 0);
	CHECK(!rr_cred_rsp_bc_room(&r));     /* nothing free for its Reply */
	rr_cred_rsp_want_one(&r);
	CHECK_EQ(rr_cred_pool_want(&pool), 1u);   /* the executor is asked */
	rr_cred_pool_posted(&pool, 1);
	CHECK(rr_cred_rsp_bc_room(&r));
	before = rr_cred_rsp_sendable(&r);
	rr_cred_rsp_bc_sent(&r);
	CHECK_EQ(rr_cred_rsp_sendable(&r), before + 1);
	CHECK_EQ(rr_cred_rsp_take_added(&r), 1u);
	CHECK(rr_cred_rsp_safe(&r));
	CHECK(!rr_cred_rsp_bc_room(&r));     /* the free one is its */
	/* a forward Call and its Reply: the grant leaves the backward
	 * Reply's Receive alone */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_pool_posted(&pool, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK(rr_cred_rsp_safe(&r));
	/* its Reply: owed */
	CHECK_EQ(rr_cred_rsp_on_bc_reply(&r), 0);
	CHECK_EQ(r.bc_owed, 0u);
	rr_cred_pool_posted(&pool, 1);
	CHECK(rr_cred_rsp_safe(&r));
	/* one more, not owed: a Call of the peer's permission (g), settled */
	CHECK_EQ(rr_cred_rsp_on_bc_reply(&r), 1);
	REQUIRE_EQ(rr_cred_rsp_settle(&r), 0);
	/* beyond the permission: an overrun */
	for (uint32_t i = 0; i < g; i++)
		(void)rr_cred_rsp_on_call(&r);
	CHECK_EQ(rr_cred_rsp_on_bc_reply(&r), -EPROTO);
}

/* A shared pool: admission within its cap, grants following demand
 * (doubling while the peer is limited, shrinking to what it used), clipped
 * by the free Receives (the deficit asks the executor for more), reposting
 * only while the pool is not above its target. */
TEST(cred_pool_shared_demand_and_admission)
{
	struct rr_cred_pool pool;
	struct rr_cred_rsp a, b, c;
	uint32_t g, want;

	rr_cred_pool_init(&pool, 4, 2, true);
	rr_cred_rsp_init(&a, 64, 0, 0);
	rr_cred_rsp_init(&b, 64, 0, 0);
	rr_cred_rsp_init(&c, 64, 0, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&a, &pool), 0);
	REQUIRE_EQ(rr_cred_rsp_join(&b, &pool), 0);
	CHECK_EQ(pool.reserved, 2);
	CHECK(!rr_cred_pool_safe(&pool));
	want = rr_cred_pool_want(&pool);
	CHECK_EQ(want, 4); /* 2 reserved + 2 spare, within the cap */
	rr_cred_pool_posted(&pool, want);
	CHECK(rr_cred_pool_safe(&pool));
	CHECK_EQ(rr_cred_pool_want(&pool), 0);
	/* cap 4: two more fit, then no more */
	REQUIRE_EQ(rr_cred_rsp_join(&c, &pool), 0);
	CHECK(rr_cred_pool_room(&pool));
	rr_cred_rsp_leave(&c);
	/* a's Calls: limited at 1, the grant doubles, clipped by the pool */
	REQUIRE_EQ(rr_cred_rsp_on_call(&a), 0);
	CHECK(a.limited);
	CHECK_EQ(pool.active, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&a, false, &g), 0);
	CHECK_EQ(g, 2);
	CHECK_EQ(pool.active, 0);
	CHECK_EQ(pool.reserved, 3);
	CHECK(rr_cred_pool_safe(&pool) == (pool.posted >= 3));
	for (int i = 0; i < 2; i++)
		REQUIRE_EQ(rr_cred_rsp_on_call(&a), 0);
	CHECK(a.limited);
	/* 4 wanted: a holds 2 (both in progress, their Receives consumed), the
	 * pool 4 - 2 posted, b 1: room for a grant of 3 after this Reply */
	REQUIRE_EQ(rr_cred_rsp_reply(&a, false, &g), 0);
	CHECK(g < 4);
	CHECK(pool.clipped >= 1);
	CHECK(pool.deficit >= 1);
	CHECK(rr_cred_pool_want(&pool) == 0 || pool.posted < pool.cap);
	CHECK_EQ(pool.deficit, 0);
	/* the pool never promises more than it holds */
	CHECK(pool.reserved <= pool.posted + 2); /* two consumed, not reposted yet */
	rr_cred_pool_posted(&pool, 2);
	CHECK(rr_cred_pool_safe(&pool));
	CHECK(rr_cred_rsp_safe(&a) && rr_cred_rsp_safe(&b));
	/* cap reached: b cannot get more than its floor from it */
	rr_cred_rsp_leave(&a);
	rr_cred_rsp_leave(&b);
	CHECK_EQ(pool.reserved, 0);
	CHECK_EQ(pool.members, 0);
	/* nothing reserved: a consumed Receive beyond twice the spare goes */
	CHECK(!rr_cred_pool_keep(&pool) || pool.posted < 2 * pool.spare + 1);
	rr_cred_pool_init(&pool, 1, 0, true);
	REQUIRE_EQ(rr_cred_rsp_join(&a, &pool), 0);
	CHECK(!rr_cred_pool_room(&pool));
	CHECK_EQ(rr_cred_rsp_join(&b, &pool), -ENOSPC);
	CHECK_EQ(pool.refused, 1);
}

/* Demand: a peer that keeps its whole permission in use is doubled up to
 * the maximum; one that uses d Calls at most settles at 2d; an idle one
 * at the end of its burst keeps little. */
TEST(cred_pool_grant_follows_demand)
{
	struct rr_cred_pool pool;
	struct rr_cred_rsp r;
	uint32_t g = 0;

	rr_cred_pool_init(&pool, 100000, 0, true);
	rr_cred_pool_posted(&pool, 100000);
	rr_cred_rsp_init(&r, 64, 0, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&r, &pool), 0);
	/* a deep queue: always as many Calls as allowed */
	for (int i = 0; i < 200; i++) {
		while (rr_cred_rsp_sendable(&r))
			REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	}
	CHECK_EQ(g, 64);
	/* then a pipeline of 5 */
	while (rr_cred_rsp_in_progress(&r))
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	for (int i = 0; i < 200; i++) {
		while (rr_cred_rsp_in_progress(&r) < 5 && rr_cred_rsp_sendable(&r))
			REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	}
	CHECK_EQ(g, 10);
	/* then one Call at a time, then idle */
	while (rr_cred_rsp_in_progress(&r))
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	for (unsigned i = 0; i < RR_CRED_SETTLE(10); i++) {
		REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	}
	CHECK(g <= 2);
	CHECK(rr_cred_rsp_sendable(&r) <= 2);
	CHECK(pool.reserved <= 2);
	/* a peer that sends its whole grant in one batch and waits for the
	 * Replies (a ramp): the grant doubles every round */
	while (rr_cred_rsp_in_progress(&r))
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	for (int round = 0; round < 7; round++) {
		uint64_t s = rr_cred_rsp_sendable(&r);

		for (uint64_t i = 0; i < s; i++)
			REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		while (rr_cred_rsp_in_progress(&r))
			REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	}
	CHECK_EQ(g, 64);
	/* a private pool grants its maximum whatever the demand */
	rsp_private(&r, 64, 0, 100);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
}

/* A requester that keeps 32 Calls outstanding over a wire of latency D
 * ticks each way, on a responder that answers every Call the tick it
 * arrives (a shared pool): the responder sees about 32 / 2D of them in
 * progress at a time, the rest are Calls and Replies in flight. Its grant
 * must still let the pipeline run: after the ramp, fewer than 5 % of the
 * Calls wait for a credit. (When a window was 8 Replies and the cut went to
 * one above the most Calls in progress, half of them waited.) */
TEST(cred_pool_pipelined_peer_keeps_its_pipeline)
{
	enum { W = 32, D = 4, TICKS = 4000 };
	static struct rr_cred_node call[W * TICKS];
	uint32_t up[D] = {0}, down[D][W + 1], ndown[D] = {0};
	struct rr_cred_pool pool;
	struct rr_cred_rsp r;
	struct rr_cred_req q;
	unsigned made = 0, waited = 0, late_waited = 0, late_made = 0;

	rr_cred_pool_init(&pool, 100000, 32, true);
	rr_cred_pool_posted(&pool, 100000);
	rr_cred_rsp_init(&r, 64, 0, 0);
	REQUIRE_EQ(rr_cred_rsp_join(&r, &pool), 0);
	rr_cred_req_init(&q, 128);
	for (unsigned t = 0; t < TICKS; t++) {
		unsigned slot = t % D, n = 0;

		/* Replies sent D ticks ago arrive; the requester tops up to W */
		for (unsigned i = 0; i < ndown[slot]; i++) {
			REQUIRE_EQ(rr_cred_req_on_reply(&q, down[slot][i]), 0);
			while (rr_cred_req_next(&q))
				n++;
		}
		ndown[slot] = 0;
		while (q.outstanding + q.queued < W) {
			int rc = rr_cred_req_submit(&q, &call[made++]);

			REQUIRE(rc >= 0);
			if (rc == 1)
				n++;
			else
				waited++, late_waited += t > TICKS / 4;
			late_made += t > TICKS / 4;
		}
		/* Calls sent D ticks ago arrive and are answered at once */
		for (unsigned i = 0; i < up[slot]; i++)
			REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
		while (rr_cred_rsp_in_progress(&r)) {
			uint32_t g;

			REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
			REQUIRE(ndown[slot] <= W);
			down[slot][ndown[slot]++] = g;
		}
		rr_cred_pool_posted(&pool, up[slot]);   /* reposted */
		up[slot] = n;
		REQUIRE(rr_cred_rsp_safe(&r));
	}
	printf("  %u Calls, %u waited for a credit (%u of %u after the ramp), grant %u\n",
	       made, waited, late_waited, late_made, q.grant);
	CHECK(late_made > 1000);
	CHECK(late_waited * 20 < late_made);
}

/* Random responder event sequences on a private pool whose Receives are
 * reposted at random: every grant is >= 1 and <= max, a Reply without a
 * Read chunk never fails, and once every consumed Receive is back, what the
 * peer may send is covered (reservation and Receives posted). */
TEST(cred_rsp_random_policy_properties)
{
	uint64_t x = 0xfeedfacecafebeefull;

	for (int round = 0; round < 50; round++) {
		struct rr_cred_rsp r;
		uint32_t max = 1 + round % 70, dmax = round % 5, nrecv = max + dmax + 1;
		uint32_t owed_back = 0;

		rsp_private(&r, max, dmax, nrecv);
		for (int step = 0; step < 2000; step++) {
			uint32_t g = 0, done0 = r.done_owed;
			uint64_t in0 = rr_cred_rsp_in_progress(&r);
			bool rc;
			int ret;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			switch (x % 5) {
			case 0: /* Receives consumed are reposted */
				rr_cred_rsp_posted(&r, owed_back);
				owed_back = 0;
				REQUIRE(rr_cred_rsp_safe(&r));
				break;
			case 1: /* the peer sends a Call whenever it may */
				if (rr_cred_rsp_sendable(&r) > r.done_owed) {
					REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
					owed_back++;
				}
				break;
			case 2:
				if (r.done_owed) {
					REQUIRE_EQ(rr_cred_rsp_on_done(&r), 0);
					owed_back++;
				}
				break;
			default:
				rc = (x >> 9) & 1;
				ret = rr_cred_rsp_reply(&r, rc, &g);
				if (ret == 0) {
					CHECK(g >= 1);
					CHECK(g <= max);
				} else {
					CHECK(ret == -ENOSPC || ret == -EPROTO ||
					      (ret == -ENOBUFS && rc));
					CHECK(ret != -EPROTO || in0 == 0);
					CHECK_EQ(r.done_owed, done0);
					CHECK_EQ(rr_cred_rsp_in_progress(&r), in0);
				}
				break;
			}
			REQUIRE(r.done_owed <= dmax);
			REQUIRE(rr_cred_rsp_sendable(&r) <= r.res);
			REQUIRE(r.pool->posted + owed_back >= r.pool->reserved);
		}
	}
}

/* ---- two peers at the credit limit, with RDMA_DONE ---- */

enum { MSG_CALL = 1, MSG_DONE = 2 };

struct sim_reply {
	uint32_t id, grant;
	bool read_chunk;
};

static uint64_t sim_rng(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* Runs one simulation; returns the number of Read-chunk Replies. @shared:
 * the connection draws from a shared pool (grants follow demand, the
 * executor posts what the pool wants and reposts what it keeps) instead of
 * its own Receives. */
static uint32_t run_sim(uint64_t seed, uint32_t max, uint32_t dmax, bool shared)
{
	enum { N = 400 };
	static struct call k[N];
	static uint8_t up[2 * N + 8];           /* requester -> responder */
	static uint32_t up_id[2 * N + 8];
	static struct sim_reply down[N + 8];    /* responder -> requester */
	static uint32_t inprog[N + 8];
	uint32_t up_h = 0, up_t = 0, dn_h = 0, dn_t = 0, n_inprog = 0;
	uint32_t replied = 0, dones_rx = 0, read_replies = 0, sent = 0;
	struct rr_cred_pool pool;
	struct rr_cred_req q;
	struct rr_cred_rsp s;
	uint64_t x = seed;
	uint32_t done_to_send = 0;

	rr_cred_req_init(&q, max);
	if (shared) {
		rr_cred_pool_init(&pool, max + dmax + 1, 1, true);
		rr_cred_rsp_init(&s, max, dmax, 0);
		REQUIRE_EQ(rr_cred_rsp_join(&s, &pool), 0);
		rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool));
	} else {
		rsp_private(&s, max, dmax, max + dmax + 1);
	}
	for (uint32_t i = 0; i < N; i++) {
		int r;

		k[i].id = i;
		r = rr_cred_req_submit(&q, &k[i].node);
		if (r == 1) {
			up[up_t] = MSG_CALL;
			up_id[up_t++] = i;
			sent++;
		}
	}
	for (long step = 0; step < 2000000; step++) {
		uint64_t v = sim_rng(&x);
		struct rr_cred_node *n;

		if (replied == N && done_to_send == 0 && up_h == up_t &&
		    dn_h == dn_t && dones_rx == read_replies)
			break;
		switch (v % 4) {
		case 0: /* deliver a requester message to the responder */
			if (up_h < up_t) {
				REQUIRE(s.pool->posted > 0); /* no overrun */
				if (up[up_h] == MSG_CALL) {
					REQUIRE_EQ(rr_cred_rsp_on_call(&s), 0);
					inprog[n_inprog++] = up_id[up_h];
				} else {
					REQUIRE_EQ(rr_cred_rsp_on_done(&s), 0);
					dones_rx++;
				}
				up_h++;
				/* the executor reposts (or, shared, keeps what the
				 * pool keeps and posts what it wants) */
				if (!shared || rr_cred_pool_keep(&pool))
					rr_cred_rsp_posted(&s, 1);
				if (shared)
					rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool));
			}
			break;
		case 1: /* the responder replies to some Call in progress */
			if (n_inprog) {
				uint32_t pick = (uint32_t)(v >> 8) % n_inprog;
				bool rc = (v >> 20) % 3 == 0;
				uint32_t g;
				int ret = rr_cred_rsp_reply(&s, rc, &g);

				if (ret == -ENOSPC || ret == -ENOBUFS) {
					/* fallback: plain Reply / ERR_CHUNK */
					rc = false;
					ret = rr_cred_rsp_reply(&s, rc, &g);
				}
				REQUIRE_EQ(ret, 0);
				REQUIRE(g >= 1 && g <= max);
				down[dn_t++] = (struct sim_reply){inprog[pick], g, rc};
				inprog[pick] = inprog[--n_inprog];
				read_replies += rc;
				if (shared)
					rr_cred_pool_posted(&pool, rr_cred_pool_want(&pool));
			}
			break;
		case 2: /* the requester receives a Reply */
			if (dn_h < dn_t) {
				struct sim_reply *rp = &down[dn_h++];

				REQUIRE_EQ(rr_cred_req_on_reply(&q, rp->grant), 0);
				if (rp->read_chunk) {
					rr_cred_req_on_read_reply(&q);
					done_to_send++;
				}
				replied++;
				while ((n = rr_cred_req_next(&q)) != NULL) {
					REQUIRE_EQ(call_of(n)->id, sent); /* FIFO order */
					up[up_t] = MSG_CALL;
					up_id[up_t++] = call_of(n)->id;
					sent++;
					REQUIRE(q.outstanding <= q.grant);
				}
			}
			break;
		default: /* the requester sends an owed RDMA_DONE, credits or not */
			if (done_to_send) {
				REQUIRE_EQ(rr_cred_req_done_sent(&q), 0);
				done_to_send--;
				up[up_t] = MSG_DONE;
				up_id[up_t++] = 0;
			}
			break;
		}
		/* what the peer may send (in flight included) is covered */
		REQUIRE(rr_cred_rsp_sendable(&s) >= (uint64_t)(up_t - up_h));
		REQUIRE(rr_cred_rsp_safe(&s));
	}
	/* no deadlock: everything completed */
	REQUIRE_EQ(replied, N);
	REQUIRE_EQ(sent, N);
	REQUIRE_EQ(dones_rx, read_replies);
	REQUIRE_EQ(s.done_owed, 0);
	REQUIRE_EQ(q.done_owed, 0);
	REQUIRE_EQ(q.outstanding, 0);
	return read_replies;
}

TEST(cred_sim_rdma_done_at_credit_limit)
{
	uint32_t reads = 0;

	for (uint64_t seed = 1; seed <= 40; seed++) {
		reads += run_sim(seed * 0x9e3779b97f4a7c15ull, 1 + (uint32_t)(seed % 9),
				 (uint32_t)(seed % 4), seed & 1);
	}
	CHECK(reads > 100); /* the Read-chunk path was really exercised */
}

TEST(cred_sim_rdma_done_large_grant)
{
	CHECK(run_sim(77, 64, 64, false) > 0);
	CHECK(run_sim(78, 128, 1, true) > 0);
}
