/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the credit accounting (RFC 8166 sections 4.3.1, 4.3.3) for both
 * roles and of the RDMA_DONE rule of the reliable-reply extension: initial
 * credit 1, grant 0 treated as 1, hundreds of Calls queued beyond the grant
 * and drained in order, grants shrinking below the outstanding count, the
 * responder never granting 0 or more than its posted Receives, and a two-peer
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

TEST(cred_rsp_never_zero_never_above_posted)
{
	struct rr_cred_rsp r;
	uint32_t g = 0;

	rr_cred_rsp_init(&r, 64, 0);
	CHECK_EQ(rr_cred_rsp_need(&r, false), 64);
	CHECK(!rr_cred_rsp_safe(&r)); /* nothing posted, peer assumes 1 */
	CHECK_EQ(rr_cred_rsp_reply(&r, false, &g), -EPROTO); /* no Call */
	CHECK_EQ(rr_cred_rsp_on_call(&r), -EPROTO);          /* overrun seen */
	rr_cred_rsp_posted(&r, 1);
	CHECK(rr_cred_rsp_safe(&r));
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	/* the only Receive was consumed: granting anything would be a lie */
	CHECK_EQ(rr_cred_rsp_reply(&r, false, &g), -ENOBUFS);
	CHECK_EQ(r.in_progress, 1);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 1);
	/* 10 posted, max 64: grant 10 */
	rr_cred_rsp_posted(&r, 9);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 10);
	/* 100 posted: grant capped at 64 */
	rr_cred_rsp_posted(&r, 90);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
	CHECK_EQ(r.hw_grant, 64);
	CHECK(rr_cred_rsp_safe(&r));
	rr_cred_rsp_init(&r, 0, 0);
	CHECK_EQ(r.max_credits, 1);
}

TEST(cred_rsp_never_zero_even_when_peer_exceeds_grant)
{
	struct rr_cred_rsp r;
	uint32_t g = 99;

	rr_cred_rsp_init(&r, 16, 2);
	rr_cred_rsp_posted(&r, 3);
	/* the peer was granted 1 but sends 3 Calls: all Receives consumed */
	for (int i = 0; i < 3; i++)
		REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	CHECK_EQ(rr_cred_rsp_on_call(&r), -EPROTO);
	CHECK_EQ(rr_cred_rsp_reply(&r, false, &g), -ENOBUFS);
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOBUFS);
	CHECK_EQ(g, 99);
	rr_cred_rsp_posted(&r, 1);
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOBUFS); /* 1 posted, 1 reserved */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 1);
}

TEST(cred_rsp_grant_shrink_keeps_receives_for_old_grant)
{
	struct rr_cred_rsp r;
	uint32_t g;

	rr_cred_rsp_init(&r, 64, 0);
	rr_cred_rsp_posted(&r, 64);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
	/* 10 Calls arrive; only 5 Receives are reposted */
	for (int i = 0; i < 10; i++)
		REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 5);
	CHECK_EQ(r.posted, 59);
	/* a smaller grant (59) is fine only while the old 64 stays covered:
	 * 59 posted + 9 in progress >= 64 */
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 59);
	CHECK(rr_cred_rsp_safe(&r));
	for (int i = 0; i < 4; i++)
		REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	/* 59 + 5 in progress = 64: one more Reply would leave 63 < 64 */
	CHECK_EQ(r.in_progress, 5);
	CHECK_EQ(rr_cred_rsp_reply(&r, false, &g), -ENOBUFS);
	CHECK_EQ(rr_cred_rsp_need(&r, false), 5);
	rr_cred_rsp_posted(&r, rr_cred_rsp_need(&r, false));
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 64);
}

TEST(cred_rsp_read_chunk_reply_reserves_a_receive)
{
	struct rr_cred_rsp r;
	uint32_t g;

	rr_cred_rsp_init(&r, 8, 2);
	rr_cred_rsp_posted(&r, rr_cred_rsp_need(&r, false));
	CHECK_EQ(r.posted, 8);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1); /* steady state: reposted, 8 posted */
	/* a Read-chunk Reply needs a 9th Receive for its RDMA_DONE */
	CHECK_EQ(rr_cred_rsp_need(&r, true), 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(g, 7); /* 8 posted, 1 reserved */
	CHECK_EQ(r.done_owed, 1);
	CHECK(rr_cred_rsp_safe(&r));
	/* with the extra Receive the full grant is back */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, rr_cred_rsp_need(&r, true));
	CHECK_EQ(r.posted, 10);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(g, 8);
	CHECK_EQ(r.done_owed, 2);
	/* done_max reached: no third Read-chunk Reply, plain Replies still go */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, 1);
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOSPC);
	CHECK_EQ(r.in_progress, 1);
	REQUIRE_EQ(rr_cred_rsp_reply(&r, false, &g), 0);
	CHECK_EQ(g, 8);
	/* RDMA_DONEs come back; a third is a peer error, still counted */
	CHECK_EQ(rr_cred_rsp_on_done(&r), 0);
	CHECK_EQ(rr_cred_rsp_on_done(&r), 0);
	CHECK_EQ(r.done_owed, 0);
	CHECK_EQ(r.posted, 8);
	CHECK_EQ(rr_cred_rsp_on_done(&r), -EPROTO);
	CHECK_EQ(r.posted, 7);
	CHECK_EQ(r.done_owed, 0);
	/* a stray message consumes a Receive but never a reservation */
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	rr_cred_rsp_posted(&r, rr_cred_rsp_need(&r, true));
	REQUIRE_EQ(rr_cred_rsp_reply(&r, true, &g), 0);
	CHECK_EQ(r.done_owed, 1);
	CHECK_EQ(r.posted, 9);
	CHECK_EQ(rr_cred_rsp_on_stray(&r), 0);
	CHECK_EQ(r.posted, 8);
	CHECK_EQ(r.done_owed, 1);
	/* it ate a Receive the peer is entitled to: repost before anything */
	CHECK(!rr_cred_rsp_safe(&r));
	CHECK_EQ(rr_cred_rsp_need(&r, false), 1);
	rr_cred_rsp_posted(&r, 1);
	CHECK(rr_cred_rsp_safe(&r));
	r.posted = 0;
	CHECK_EQ(rr_cred_rsp_on_stray(&r), -EPROTO);
	CHECK_EQ(r.posted, 0);
	/* reliable reply off: done_max 0 refuses every Read-chunk Reply */
	rr_cred_rsp_init(&r, 8, 0);
	rr_cred_rsp_posted(&r, 100);
	REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
	CHECK_EQ(rr_cred_rsp_reply(&r, true, &g), -ENOSPC);
	rr_cred_rsp_reset(&r);
	CHECK_EQ(r.posted, 0);
	CHECK_EQ(r.in_progress, 0);
	CHECK_EQ(r.hw_grant, 1);
	CHECK_EQ(r.max_credits, 8);
}

/* Random responder event sequences: every grant is in [1, max] and within the
 * Receives posted and not reserved; the overrun invariant never breaks. */
TEST(cred_rsp_random_policy_properties)
{
	uint64_t x = 0xfeedfacecafebeefull;

	for (int round = 0; round < 50; round++) {
		struct rr_cred_rsp r;
		uint32_t max = 1 + round % 70, dmax = round % 5;

		rr_cred_rsp_init(&r, max, dmax);
		rr_cred_rsp_posted(&r, 1 + round % 3);
		for (int step = 0; step < 2000; step++) {
			uint32_t g = 0, posted0 = r.posted, done0 = r.done_owed;
			bool rc;
			int ret;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			switch (x % 5) {
			case 0:
				rr_cred_rsp_posted(&r, (uint32_t)(x >> 8) % 4);
				break;
			case 1: /* the peer sends a Call whenever its grant allows */
				if (r.in_progress < r.hw_grant) {
					/* ... and finds a Receive not reserved for RDMA_DONE */
					REQUIRE(r.posted > r.done_owed);
					REQUIRE_EQ(rr_cred_rsp_on_call(&r), 0);
				}
				break;
			case 2:
				if (r.done_owed)
					REQUIRE_EQ(rr_cred_rsp_on_done(&r), 0);
				break;
			default:
				rc = (x >> 9) & 1;
				ret = rr_cred_rsp_reply(&r, rc, &g);
				if (ret == 0) {
					CHECK(g >= 1);
					CHECK(g <= max);
					CHECK(g + done0 + rc <= posted0);
				} else {
					CHECK(ret == -ENOBUFS || ret == -ENOSPC || ret == -EPROTO);
					CHECK_EQ(r.posted, posted0);
					CHECK_EQ(r.done_owed, done0);
				}
				break;
			}
			REQUIRE(r.done_owed <= dmax);
			REQUIRE(rr_cred_rsp_safe(&r));
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

/* Runs one simulation; returns the number of Read-chunk Replies. @lazy: the
 * responder transport reposts Receives only when a Reply needs them. */
static uint32_t run_sim(uint64_t seed, uint32_t max, uint32_t dmax, bool lazy)
{
	enum { N = 400 };
	static struct call k[N];
	static uint8_t up[2 * N + 8];           /* requester -> responder */
	static uint32_t up_id[2 * N + 8];
	static struct sim_reply down[N + 8];    /* responder -> requester */
	static uint32_t inprog[N + 8];
	uint32_t up_h = 0, up_t = 0, dn_h = 0, dn_t = 0, n_inprog = 0;
	uint32_t replied = 0, dones_rx = 0, read_replies = 0, sent = 0;
	struct rr_cred_req q;
	struct rr_cred_rsp s;
	uint64_t x = seed;
	uint32_t done_to_send = 0;

	rr_cred_req_init(&q, max);
	rr_cred_rsp_init(&s, max, dmax);
	rr_cred_rsp_posted(&s, rr_cred_rsp_need(&s, false));
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
				if (up[up_h] == MSG_CALL) {
					REQUIRE_EQ(rr_cred_rsp_on_call(&s), 0); /* no overrun */
					inprog[n_inprog++] = up_id[up_h];
				} else {
					REQUIRE(s.posted > 0); /* no overrun */
					REQUIRE_EQ(rr_cred_rsp_on_done(&s), 0);
					dones_rx++;
				}
				up_h++;
				if (!lazy)
					rr_cred_rsp_posted(&s, rr_cred_rsp_need(&s, false));
			}
			break;
		case 1: /* the responder replies to some Call in progress */
			if (n_inprog) {
				uint32_t pick = (uint32_t)(v >> 8) % n_inprog;
				bool rc = (v >> 20) % 3 == 0;
				uint32_t g;
				int ret = rr_cred_rsp_reply(&s, rc, &g);

				if (ret == -ENOSPC) { /* fallback: plain Reply / ERR_CHUNK */
					rc = false;
					ret = rr_cred_rsp_reply(&s, rc, &g);
				}
				if (ret == -ENOBUFS) {
					rr_cred_rsp_posted(&s, rr_cred_rsp_need(&s, rc));
					ret = rr_cred_rsp_reply(&s, rc, &g);
				}
				REQUIRE_EQ(ret, 0);
				REQUIRE(g >= 1 && g <= max);
				down[dn_t++] = (struct sim_reply){inprog[pick], g, rc};
				inprog[pick] = inprog[--n_inprog];
				read_replies += rc;
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
