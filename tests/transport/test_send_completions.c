/* SPDX-License-Identifier: BSD-2-Clause */
/* A client's Sends go mostly unsignaled (transport/rdma/conn.c "a client's
 * unsignaled Sends"): a synchronous Call costs one completion, its Reply's
 * Receive, and every eighth one its Send's too, whose completion brings
 * back the slots of the unsignaled Sends before it. So do a server's quiet
 * Sends (Replies without Writes): a synchronous Call costs the server its
 * Call's Receive and one Reply's Send completion in four; the session does
 * not count a quiet Send in flight, so Replies nobody will complete soon
 * do not look like a peer that stopped reading (send_timeout_ms). Counted
 * through rpcrdma_xprt_stats.cq_polls (a batch of completions fed: one per
 * wait or loop round that found some), not timed. Over the software iWARP
 * provider (RFC 8166 transport, RFC 5531 RPC); not run without it. */
#include "test.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

#define PROG 0x2000029au
#define T_ECHO 1u

static struct rpcrdma_server *start(char *url, size_t n)
{
	struct rpcrdma_server_opts o = {.threads = 1, .flags = RPCRDMA_SERVER_INLINE};
	struct rpcrdma_server *s = NULL;

	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, rr_th_h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, n, "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	return s;
}

static struct rpcrdma_call *echo_call(struct rpcrdma_client *c, uint32_t v)
{
	struct rpcrdma_call *call;

	REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
	return call;
}

static void echo_check(struct rpcrdma_call *call, uint32_t v)
{
	uint32_t r = 0;

	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r), 0);
	CHECK_EQ(r, v + 1);
	rpcrdma_call_destroy(call);
}

/* @n synchronous ECHO Calls of 0..@n-1, each answered right. */
static void echo_sync(struct rpcrdma_client *c, uint32_t n)
{
	for (uint32_t v = 0; v < n; v++) {
		struct rpcrdma_call *call = echo_call(c, v);

		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		echo_check(call, v);
	}
}

/* After 8 synchronous Calls to settle, the completion batches that @calls
 * more cost the client @c or, when @s is given, the server @s. */
static uint64_t batches_for(struct rpcrdma_client *c, struct rpcrdma_server *s, uint32_t calls)
{
	struct rpcrdma_xprt_stats a, b;

	echo_sync(c, 8);
	REQUIRE_EQ(s ? rpcrdma_server_stats(s, &a) : rpcrdma_client_stats(c, &a), 0);
	echo_sync(c, calls);
	REQUIRE_EQ(s ? rpcrdma_server_stats(s, &b) : rpcrdma_client_stats(c, &b), 0);
	rpcrdma_xprt_stats_diff(&b, &a, &b);
	printf("  %s: %llu completion batches for %u Calls\n", s ? "server" : "client",
	       (unsigned long long)b.cq_polls, calls);
	return b.cq_polls;
}

/* @rounds bursts of Calls in flight together on @c, round r's of
 * 1 + (r * @step) % @max Calls (at most 23), each checked. */
static void echo_bursts(struct rpcrdma_client *c, uint32_t rounds, uint32_t step, uint32_t max)
{
	struct rpcrdma_call *calls[23];

	REQUIRE(max <= 23);
	for (uint32_t r = 0; r < rounds; r++) {
		uint32_t n = 1 + (r * step) % max;

		for (uint32_t i = 0; i < n; i++) {
			calls[i] = echo_call(c, r * 100 + i);
			REQUIRE_EQ(rpcrdma_call_start(calls[i], NULL, NULL), 0);
		}
		for (uint32_t i = 0; i < n; i++) {
			CHECK_EQ(rpcrdma_call_wait(calls[i], RR_TEST_WAIT_MS), 0);
			echo_check(calls[i], r * 100 + i);
		}
	}
}

/* 400 synchronous Calls: the client's waits find ~1.125 batches of
 * completions per Call (the Reply; a Send's completion every eighth:
 * 450), not 1.25 (every fourth signaled: 500, before issue 16 part AN),
 * nor 2 (every Send signaled: its completion, then the Reply). */
TEST(send_completions_client_sends_unsignaled)
{
	enum { CALLS = 400 };
	struct rpcrdma_client_opts o = {.timeout_ms = RR_TEST_WAIT_MS};
	struct rpcrdma_client *c;
	struct rpcrdma_server *s;
	uint64_t batches;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	batches = batches_for(c, NULL, CALLS);
	CHECK(batches >= (uint64_t)CALLS);
	CHECK(batches <= (uint64_t)CALLS * 6 / 5);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* Calls in flight together, started in bursts longer than a run of
 * unsignaled Sends and than the slots they may hold: each signaled Send's
 * completion gives back only the slots posted before it, the Calls after
 * it keep theirs; every Reply right, nothing left waiting. Then the same
 * connection still serves synchronous Calls. */
TEST(send_completions_bursts_in_flight)
{
	enum { BURST = 23, ROUNDS = 20 };
	struct rpcrdma_client_opts o = {.timeout_ms = RR_TEST_WAIT_MS};
	struct rpcrdma_client *c;
	struct rpcrdma_server *s;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	echo_bursts(c, ROUNDS, 7, BURST);   /* 1..23, not a multiple of 8 */
	echo_sync(c, 9);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* 400 synchronous Calls to a server answering on its progress thread (its
 * Replies deferred to the end of each batch, then posted): its loop finds
 * ~1.25 batches of completions per Call (the Call; one Reply's Send
 * completion in four, its first chunk of four send slots ending each run
 * of quiet Sends), not 2 (every Reply's Send signaled: a second round of
 * the loop per Call, before issue 16 part AV). */
TEST(send_completions_server_replies_unsignaled)
{
	enum { CALLS = 400 };
	struct rpcrdma_client_opts o = {.timeout_ms = RR_TEST_WAIT_MS};
	struct rpcrdma_client *c;
	struct rpcrdma_server *s;
	uint64_t batches;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	batches = batches_for(c, s, CALLS);
	CHECK(batches >= (uint64_t)CALLS);
	CHECK(batches <= (uint64_t)CALLS * 3 / 2);
	/* and the connection goes on: bursts of Calls in flight together */
	echo_bursts(c, 8, 5, 11);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

static struct rr_tp_server *qs_srv;

static void qs_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer16(qs_srv, r);
}

static bool qs_ended(void *arg)
{
	struct rr_xprt_stats st;

	(void)arg;
	rr_tp_server_stats(qs_srv, &st);
	return st.idle_closed + st.send_stalls > 0;
}

/* A server with a send timeout of 20 ms answers 3 Calls from a worker
 * thread (each Reply posted at once, alone): all three go quiet (a free
 * slot is left beside each), and nothing will complete them until a later
 * Reply's signaled Send. The client then stays silent: the connection ends
 * by its idle timeout (300 ms), not as a peer whose Sends stalled (which
 * it would, after 20 ms, if quiet Sends were counted in flight: the stall
 * watch would wait for completions that never come). Waits for the end,
 * whichever it is, then checks which. */
TEST(send_completions_server_quiet_sends_not_stalled)
{
	struct rr_th_small p[3];
	struct rr_tp_conf sc, cc;
	struct rr_xprt_stats st;
	struct rr_th_sq sq;
	struct rr_th_cl c;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	sc.send_timeout_ms = 20;
	sc.idle_timeout_ms = 300;
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, qs_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &qs_srv), 0);
	rr_th_sq_start(&sq);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(qs_srv), rr_th_cl_count), 0);
	for (unsigned i = 0; i < 3; i++) {
		rr_th_small_submit(&c, &p[i], 0x500 + i);
		REQUIRE(rr_th_cl_wait(&c, i + 1, RR_TEST_WAIT_MS));
		CHECK_EQ(p[i].r.status, 0);
		if (p[i].r.status == 0 && p[i].r.lent)
			rr_tp_client_release_reply(c.tp, &p[i].r);
	}
	REQUIRE(rr_test_until(qs_ended, NULL, RR_TEST_WAIT_MS));
	rr_tp_server_stats(qs_srv, &st);
	CHECK_EQ(st.send_stalls, 0);
	CHECK_EQ(st.idle_closed, 1);
	rr_th_cl_stop(&c);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(qs_srv);
	rr_th_sq_destroy(&sq);
}
