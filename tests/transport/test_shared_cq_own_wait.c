/* SPDX-License-Identifier: BSD-2-Clause */
/* Synchronous callers of different rdma:// connections of one process
 * share their loop's CQ (src/transport/rdma/progress.c "caller waits"):
 * the one that holds the CQ receives for the connections nobody waits on;
 * a caller that finds it held receives for its own connection in its own
 * thread (the provider's wait_qp: soft) rather than sleeping until the
 * holder hands it its Reply. Several threads, each with its own client,
 * make synchronous calls at once: every call completes once with its own
 * result, and callers did wait for their own QP. A caller blocked on a
 * slow Reply holds the CQ while another makes calls: the other's Replies
 * reach it through its own wait, not through the holder. Counted through
 * the transport's counters (rr_tp_wait_counts), not timed. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "rpcrdma/engine.h"
#include "rpcrdma/rpc.h"
#include "transport/rdma/tp.h"

#define PROG 0x20000a17u
#define P_ECHO 1u
#define P_SLOW 2u

static int h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v = 0;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v);
	return RPCRDMA_SVC_OK;
}

/* Answers once the test lets it (10 s at most). */
static atomic_int g_release;

static int h_slow(struct rpcrdma_req *r, void *ctx)
{
	struct timespec ts = {0, 1000000};

	for (uint64_t dl_ = rr_test_deadline();
	     !atomic_load(&g_release) &&
	     rr_test_wait_left(dl_, "!g_release to turn false");)
		nanosleep(&ts, NULL);
	return h_echo(r, ctx);
}

/* One progress thread: every client of the process on one loop, so on one
 * CQ. */
static void one_loop(void)
{
	if (rpcrdma_progress_threads_set(1) != 0 && rpcrdma_progress_threads() != 1)
		rr_test_skip("the engine runs with several progress threads already");
}

struct caller {
	struct rpcrdma_client *c;
	uint32_t proc;
	unsigned calls, ok, wrong;
};

static void *caller_main(void *arg)
{
	struct caller *k = arg;

	for (unsigned i = 0; i < k->calls; i++) {
		struct rpcrdma_call *call;
		struct rpcrdma_xdr_dec *d;
		uint32_t v, got = UINT32_MAX;

		if (rpcrdma_call_create(k->c, k->proc, &call)) {
			k->wrong++;
			continue;
		}
		v = rpcrdma_call_xid(call) * 2654435761u;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
		rpcrdma_call_set_timeout(call, 20000);
		if (rpcrdma_call_run(call) == 0 && (d = rpcrdma_call_results(call)) &&
		    rpcrdma_xdr_get_u32(d, &got) == 0 && got == v)
			k->ok++;
		else
			k->wrong++;
		rpcrdma_call_destroy(call);
	}
	return NULL;
}

static struct rpcrdma_server *server_up(char *url, size_t len)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_server *s = NULL;

	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_ECHO, h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_SLOW, h_slow, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, len, "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	return s;
}

static void print_waits(const struct rr_tp_wait_counts *a, const struct rr_tp_wait_counts *b)
{
	fprintf(stderr, "waits: cq %llu own qp %llu refused %llu cond %llu\n",
		(unsigned long long)(b->cq - a->cq), (unsigned long long)(b->qp - a->qp),
		(unsigned long long)(b->qp_refused - a->qp_refused),
		(unsigned long long)(b->cond - a->cond));
}

#define CALLERS 3
#define CALLS 1000

TEST(rdma_sync_callers_on_one_cq_receive_for_themselves)
{
	struct caller k[CALLERS] = {{0}};
	struct rr_tp_wait_counts w0, w1;
	struct rpcrdma_server *s;
	pthread_t th[CALLERS];
	char url[64];

	one_loop();
	s = server_up(url, sizeof(url));
	for (int i = 0; i < CALLERS; i++) {
		REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &k[i].c), 0);
		k[i].proc = P_ECHO;
		k[i].calls = CALLS;
	}
	rr_tp_wait_counts(&w0);
	for (int i = 0; i < CALLERS; i++)
		REQUIRE_EQ(pthread_create(&th[i], NULL, caller_main, &k[i]), 0);
	for (int i = 0; i < CALLERS; i++)
		pthread_join(th[i], NULL);
	rr_tp_wait_counts(&w1);
	print_waits(&w0, &w1);
	for (int i = 0; i < CALLERS; i++) {
		CHECK_EQ(k[i].wrong, 0u);
		CHECK_EQ(k[i].ok, (unsigned)CALLS);
		rpcrdma_client_destroy(k[i].c);
	}
	rpcrdma_server_destroy(s);
	/* the callers overlapped on the CQ, and those that found it held
	 * received for themselves: few slept until the holder fed them (only
	 * when it had read their Reply before their wait began); without the
	 * own wait, about one such sleep per call */
	CHECK(w1.qp > w0.qp);
	CHECK(w1.cond - w0.cond < CALLERS * CALLS / 4u);
}

/* One caller's Reply is slow: it holds the CQ meanwhile, in slices (or,
 * once the other holds it, waits for its own QP). The other caller's
 * Replies come to it through its own CQ hold or its own QP's wait, seldom
 * through a sleep on its endpoint until the holder feeds it. */
TEST(rdma_caller_on_held_cq_receives_its_replies_itself)
{
	struct caller slow = {.proc = P_SLOW, .calls = 1}, fast = {.proc = P_ECHO, .calls = 400};
	struct rr_tp_wait_counts w0, w1;
	struct rpcrdma_server *s;
	pthread_t ts, tf;
	char url[64];

	one_loop();
	atomic_store(&g_release, 0);
	s = server_up(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &slow.c), 0);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &fast.c), 0);
	rr_tp_wait_counts(&w0);
	REQUIRE_EQ(pthread_create(&ts, NULL, caller_main, &slow), 0);
	/* the slow caller holds the CQ (its first wait claimed it) before
	 * the other starts */
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "the slow caller claims the CQ");) {
		struct timespec ms = {0, 1000000};

		rr_tp_wait_counts(&w1);
		if (w1.cq > w0.cq)
			break;
		nanosleep(&ms, NULL);
	}
	REQUIRE(w1.cq > w0.cq);
	REQUIRE_EQ(pthread_create(&tf, NULL, caller_main, &fast), 0);
	pthread_join(tf, NULL);
	atomic_store(&g_release, 1);
	pthread_join(ts, NULL);
	rr_tp_wait_counts(&w1);
	print_waits(&w0, &w1);
	CHECK_EQ(fast.wrong, 0u);
	CHECK_EQ(fast.ok, 400u);
	CHECK_EQ(slow.ok, 1u);
	rpcrdma_client_destroy(slow.c);
	rpcrdma_client_destroy(fast.c);
	rpcrdma_server_destroy(s);
	/* it waited for its own QP, and slept for the holder's hand-over for
	 * fewer than a quarter of its calls (the holder had read its Reply
	 * before its wait began): without the own wait, for most of them */
	CHECK(w1.qp > w0.qp);
	CHECK(w1.cond - w0.cond < 100u);
}
