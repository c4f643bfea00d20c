/* SPDX-License-Identifier: BSD-2-Clause */
/* The public RPC API over rdma:// (RFC 8166 transport under RFC 5531 RPC):
 * synchronous calls, DDP-eligible arguments moved into Read chunks and
 * DDP-eligible results placed in the caller's sinks through Write chunks
 * (0 B .. 1 MiB, odd lengths, nothing written past the item), a result without
 * a sink coming back inline or through the Reply chunk, concurrent calls.
 * Runs over the software iWARP provider; not run when it is not built in. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/engine.h"
#include "rpcrdma/rpc.h"
#include "xprt_harness.h"

#define PROG 0x20000199u
#define T_ECHO 1u
#define T_BULK 5u
#define T_HOLD 6u

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rpcrdma_req *held[64];
static unsigned nheld;

static int h_hold(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&hold_lock);
	if (nheld == 64) {
		pthread_mutex_unlock(&hold_lock);
		return RPCRDMA_SVC_SYSTEM_ERR;
	}
	held[nheld++] = r;
	pthread_mutex_unlock(&hold_lock);
	return RPCRDMA_SVC_DEFER;
}

static struct rpcrdma_server *start(char *url, size_t n)
{
	struct rpcrdma_server_opts o = {.threads = 2};
	struct rpcrdma_server *s = NULL;

	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, rr_th_h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_BULK, rr_th_h_bulk_seeded, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_HOLD, h_hold, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	REQUIRE(rpcrdma_server_port(s) > 0);
	snprintf(url, n, "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	return s;
}

TEST(xprt_rpc_rdma_echo)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c = NULL;
	char url[64];

	if (!rr_th_soft_ok())
		return;
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	for (uint32_t v = 0; v < 200; v++)
		rr_th_echo(c, T_ECHO, v);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

TEST(xprt_rpc_rdma_ddp_items)
{
	static const uint32_t sizes[] = {0, 1, 3, 4, 5, 4095, 4096, 70001, 1u << 20};
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c = NULL;
	char url[64];
	uint8_t *src = malloc(1u << 20), *sink = malloc((1u << 20) + 8);

	if (!rr_th_soft_ok() || !src || !sink) {
		free(src);
		free(sink);
		REQUIRE(!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT));
		return;
	}
	REQUIRE(src && sink);
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	for (int with_sink = 1; with_sink >= 0; with_sink--) {
		for (size_t k = 0; k < RR_ARRAY_SIZE(sizes); k++) {
			uint32_t n = sizes[k], seed = (uint32_t)k * 31 + 1, len = 0, tail = 0, rlen = 0;
			struct rpcrdma_ddp_sink sk = {sink, (1u << 20) + 8};
			struct rpcrdma_call *call;
			struct rpcrdma_xdr_dec *d;
			const void *p = NULL;

			for (uint32_t i = 0; i < n; i++)
				src[i] = (uint8_t)(seed + i);
			memset(sink, 0xee, (1u << 20) + 8);
			REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), seed);
			REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, n), 0);
			if (with_sink) {
				REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
				rpcrdma_call_set_reply_hint(call, 64);
			}
			REQUIRE_EQ(rpcrdma_call_run(call), 0);
			d = rpcrdma_call_results(call);
			REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &rlen), 0);
			CHECK_EQ(rlen, n);
			REQUIRE_EQ(rpcrdma_xdr_get_ddp(d, &p, &len), 0);
			CHECK_EQ(len, n);
			CHECK(memcmp(p, src, n) == 0);
			if (with_sink) {
				CHECK(p == sink);
				CHECK_EQ(sink[n], 0xee);
			}
			REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &tail), 0);
			CHECK_EQ(tail, 0x7a11);
			rpcrdma_call_destroy(call);
		}
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	free(src);
	free(sink);
}

static atomic_int async_done, async_good;

static void on_done(struct rpcrdma_call *call, int status, void *arg)
{
	uint32_t r = 0;

	if (status == 0 && rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r) == 0 &&
	    r == (uint32_t)(uintptr_t)arg + 1)
		atomic_fetch_add(&async_good, 1);
	atomic_fetch_add(&async_done, 1);
}

/* 200 asynchronous calls in flight, a timed-out call, a cancelled call (both
 * complete after their STags are invalid; a late Reply is discarded). */
TEST(xprt_rpc_rdma_async_timeout_cancel)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *calls[200], *t1, *t2;
	static uint8_t sink[4096];
	struct rpcrdma_ddp_sink sk = {sink, sizeof(sink)};
	char url[64];

	if (!rr_th_soft_ok())
		return;
	s = start(url, sizeof(url));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	atomic_store(&async_done, 0);
	atomic_store(&async_good, 0);
	for (uintptr_t i = 0; i < 200; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &calls[i]), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(calls[i]), (uint32_t)i);
		REQUIRE_EQ(rpcrdma_call_start(calls[i], on_done, (void *)i), 0);
	}
	for (int i = 0; i < 200; i++)
		CHECK_EQ(rpcrdma_call_wait(calls[i], 20000), 0);
	CHECK_EQ(atomic_load(&async_good), 200);
	for (int i = 0; i < 200; i++)
		rpcrdma_call_destroy(calls[i]);

	/* held by the server: a timeout, then a cancel (with a Write chunk) */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &t1), 0);
	rpcrdma_call_set_timeout(t1, 300);
	CHECK_EQ(rpcrdma_call_run(t1), -ETIMEDOUT);
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &t2), 0);
	REQUIRE_EQ(rpcrdma_call_set_sinks(t2, &sk, 1), 0);
	REQUIRE_EQ(rpcrdma_call_start(t2, on_done, (void *)(uintptr_t)7), 0);
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "two requests held");) {
		unsigned n;

		pthread_mutex_lock(&hold_lock);
		n = nheld;
		pthread_mutex_unlock(&hold_lock);
		if (n == 2)
			break;
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	rpcrdma_call_cancel(t2);
	CHECK_EQ(rpcrdma_call_wait(t2, 5000), -ECANCELED);
	/* late Replies for both: discarded */
	pthread_mutex_lock(&hold_lock);
	for (unsigned i = 0; i < nheld; i++) {
		rpcrdma_xdr_put_u32(rpcrdma_req_results(held[i]), 1);
		rpcrdma_req_complete(held[i], RPCRDMA_SVC_OK);
	}
	nheld = 0;
	pthread_mutex_unlock(&hold_lock);
	rpcrdma_call_destroy(t1);
	rpcrdma_call_destroy(t2);
	rr_th_echo(c, T_ECHO, 41);   /* the connection still works */
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* RPCRDMA_SERVER_INLINE: handlers run on the progress thread of their
 * connection (connections are spread over the engine's threads
 * round-robin, and each stays on its own), not on workers; replies
 * with Write chunks (the thread waits for its own Writes), Read-chunk
 * arguments, Long Replies and a deferred request completed from another
 * thread all work there. */
static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t tids[64];
static unsigned ntids;

static int h_bulk_tid(struct rpcrdma_req *r, void *ctx)
{
	pthread_mutex_lock(&tid_lock);
	if (ntids < 64)
		tids[ntids++] = pthread_self();
	pthread_mutex_unlock(&tid_lock);
	return rr_th_h_bulk_seeded(r, ctx);
}

static void *run_deferred(void *arg)
{
	struct rpcrdma_call *call = arg;

	return (void *)(intptr_t)rpcrdma_call_run(call);
}

TEST(xprt_rpc_rdma_inline_handlers)
{
	static const uint32_t sizes[] = {0, 5, 4096, 70001, 1u << 20};
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 5000};
	struct rpcrdma_server_opts so = {.threads = 2, .flags = RPCRDMA_SERVER_INLINE};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c[2] = {NULL, NULL};
	uint8_t *src = malloc(1u << 20), *sink = malloc((1u << 20) + 8);
	struct rpcrdma_call *call;
	char url[64];
	pthread_t th;
	void *ret;

	if (!rr_th_soft_ok() || !src || !sink) {
		free(src);
		free(sink);
		REQUIRE(!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT));
		return;
	}
	ntids = 0;
	nheld = 0;
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_BULK, h_bulk_tid, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_HOLD, h_hold, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c[0]), 0);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c[1]), 0);
	for (size_t k = 0; k < 2 * RR_ARRAY_SIZE(sizes); k++) {
		uint32_t n = sizes[k % RR_ARRAY_SIZE(sizes)], seed = (uint32_t)k * 7 + 3;
		uint32_t len = 0, rlen = 0, tail = 0;
		struct rpcrdma_ddp_sink sk = {sink, (1u << 20) + 8};
		const void *p = NULL;
		bool with_sink = k < RR_ARRAY_SIZE(sizes);   /* then Long Replies */

		for (uint32_t i = 0; i < n; i++)
			src[i] = (uint8_t)(seed + i);
		memset(sink, 0xee, (1u << 20) + 8);
		REQUIRE_EQ(rpcrdma_call_create(c[k & 1], T_BULK, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), seed);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, n), 0);
		if (with_sink)
			REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), 0);
		CHECK_EQ(rlen, n);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
		CHECK_EQ(len, n);
		CHECK(memcmp(p, src, n) == 0);
		if (with_sink && n)
			CHECK(p == sink);
		REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &tail), 0);
		CHECK_EQ(tail, 0x7a11);
		rpcrdma_call_destroy(call);
	}
	/* every handler of a connection ran on one thread, its own, not on
	 * this one; the two connections were given different progress threads
	 * (round-robin) when there are several */
	REQUIRE_EQ(ntids, 2 * RR_ARRAY_SIZE(sizes));
	for (unsigned i = 0; i < ntids; i++) {
		CHECK(pthread_equal(tids[i], tids[i & 1]));
		CHECK(!pthread_equal(tids[i], pthread_self()));
	}
	if (rpcrdma_progress_threads() >= 2)
		CHECK(!pthread_equal(tids[0], tids[1]));
	/* A deferred request is completed from this thread. */
	REQUIRE_EQ(rpcrdma_call_create(c[0], T_HOLD, &call), 0);
	REQUIRE_EQ(pthread_create(&th, NULL, run_deferred, call), 0);
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "the deferred request held");) {
		struct timespec ts = {0, 10000000};
		unsigned n;

		pthread_mutex_lock(&hold_lock);
		n = nheld;
		pthread_mutex_unlock(&hold_lock);
		if (n)
			break;
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&hold_lock);
	REQUIRE_EQ(nheld, 1u);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(held[0]), 1);
	rpcrdma_req_complete(held[0], RPCRDMA_SVC_OK);
	nheld = 0;
	pthread_mutex_unlock(&hold_lock);
	pthread_join(th, &ret);
	CHECK_EQ((int)(intptr_t)ret, 0);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c[0]);
	rpcrdma_client_destroy(c[1]);
	rpcrdma_server_destroy(s);
	free(src);
	free(sink);
}
