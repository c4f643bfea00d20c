/* SPDX-License-Identifier: BSD-2-Clause */
/* Who reads a tcp:// client's Replies (src/transport/tcp/tcp_client.c,
 * "reader role"): a synchronous caller takes the role in its submit and
 * reads until its own Reply, completing on the way the Replies of the
 * asynchronous calls that overtake it; when it gives the role back the
 * client's loop reads for the calls still pending; a synchronous call that
 * finds the role taken is served by the holder or the loop. Several
 * threads make synchronous calls to a slow procedure while another keeps
 * asynchronous calls to a fast one in flight on the same client (the
 * server's four workers answer the fast ones first): every call completes
 * once, with its own result. A wrong hand-off shows as a call that never
 * completes (the test's wait fails) or a result that is another call's. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "rpcrdma/rpc.h"

#define PROG 0x20000a12u
#define P_ECHO 1u
#define P_SLOW 2u
#define SYNC_THREADS 3
#define SYNC_CALLS 60
#define ASYNC_INFLIGHT 6
#define ASYNC_CALLS 600

/* Results: the argument, as it came. */
static int h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v = 0;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v);
	return RPCRDMA_SVC_OK;
}

/* The same, a moment later: the fast calls overtake it. */
static int h_slow(struct rpcrdma_req *r, void *ctx)
{
	struct timespec ts = {0, 2000000};

	nanosleep(&ts, NULL);
	return h_echo(r, ctx);
}

struct mix {
	struct rpcrdma_client *c;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned async_left, async_inflight, async_done;
	atomic_uint wrong;
};

static uint32_t result_of(struct rpcrdma_call *call)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
	uint32_t v = UINT32_MAX;

	if (!d || rpcrdma_xdr_get_u32(d, &v))
		return UINT32_MAX;
	return v;
}

static void async_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct mix *m = arg;
	uint32_t want = rpcrdma_call_xid(call);   /* argument = its XID */

	if (status || result_of(call) != want)
		atomic_fetch_add(&m->wrong, 1);
	rpcrdma_call_destroy(call);
	pthread_mutex_lock(&m->lock);
	m->async_inflight--;
	m->async_done++;
	pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->lock);
}

/* One asynchronous call whose argument is its XID. */
static int start_async(struct mix *m)
{
	struct rpcrdma_call *call;
	int rc;

	rc = rpcrdma_call_create(m->c, P_ECHO, &call);
	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), rpcrdma_call_xid(call));
	rc = rpcrdma_call_start(call, async_done, m);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void *async_main(void *arg)
{
	struct mix *m = arg;

	pthread_mutex_lock(&m->lock);
	while (m->async_left) {
		struct timespec ts;

		while (m->async_left && m->async_inflight < ASYNC_INFLIGHT) {
			m->async_left--;
			m->async_inflight++;
			pthread_mutex_unlock(&m->lock);
			if (start_async(m)) {
				atomic_fetch_add(&m->wrong, 1);
				pthread_mutex_lock(&m->lock);
				m->async_inflight--;
				continue;
			}
			pthread_mutex_lock(&m->lock);
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		if (m->async_left && pthread_cond_timedwait(&m->cv, &m->lock, &ts)) {
			atomic_fetch_add(&m->wrong, 1000);   /* a call never completed */
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

static void *sync_main(void *arg)
{
	struct mix *m = arg;

	for (unsigned i = 0; i < SYNC_CALLS; i++) {
		struct rpcrdma_call *call;
		uint32_t v;

		if (rpcrdma_call_create(m->c, P_SLOW, &call)) {
			atomic_fetch_add(&m->wrong, 1);
			continue;
		}
		v = rpcrdma_call_xid(call) ^ 0x5a5a5a5au;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
		rpcrdma_call_set_timeout(call, 20000);
		if (rpcrdma_call_run(call) || result_of(call) != v)
			atomic_fetch_add(&m->wrong, 1);
		rpcrdma_call_destroy(call);
	}
	return NULL;
}

TEST(rpc_tcp_sync_callers_and_async_calls_share_the_reading)
{
	struct rpcrdma_server_opts so = {.threads = 4};
	struct rpcrdma_server *s = NULL;
	struct mix m = {.async_left = ASYNC_CALLS};
	pthread_t st[SYNC_THREADS], at;
	struct timespec ts;
	char url[64];

	pthread_mutex_init(&m.lock, NULL);
	pthread_cond_init(&m.cv, NULL);
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_ECHO, h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_SLOW, h_slow, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &m.c), 0);

	REQUIRE_EQ(pthread_create(&at, NULL, async_main, &m), 0);
	for (int i = 0; i < SYNC_THREADS; i++)
		REQUIRE_EQ(pthread_create(&st[i], NULL, sync_main, &m), 0);
	for (int i = 0; i < SYNC_THREADS; i++)
		pthread_join(st[i], NULL);
	pthread_join(at, NULL);
	/* the last asynchronous calls */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&m.lock);
	while (m.async_inflight && !pthread_cond_timedwait(&m.cv, &m.lock, &ts))
		;
	CHECK_EQ(m.async_inflight, 0);
	CHECK_EQ(m.async_done, ASYNC_CALLS);
	pthread_mutex_unlock(&m.lock);
	CHECK_EQ(atomic_load(&m.wrong), 0);
	rpcrdma_client_destroy(m.c);
	rpcrdma_server_destroy(s);
	pthread_mutex_destroy(&m.lock);
	pthread_cond_destroy(&m.cv);
}
