/* SPDX-License-Identifier: BSD-2-Clause */
/* A cancel of a synchronous rdma:// call (rpcrdma_call_run) from another
 * thread, landing in the window between the call's registration in the
 * client (run unlocked: rpc/clnt.c run_fast) and the transport's hold of
 * it: the transport's abort finds nothing there, and the call's thread then
 * waits inside the transport's submit_wait for a Reply that the server
 * never sends. The call must end with -ECANCELED at once (the transport's
 * wait looks at the call's abort request after a wait that brought
 * nothing: transport/rdma/client.c cl_abort_asked), not at its deadline
 * (30 s). The moment is the client's allocation of the call's transport
 * wrapper (rdma/rpc.c cl_wrap, the first allocation of the run thread in
 * rpcrdma_call_run): an allocator of the client's environment cancels the
 * call there from a thread of its own and waits for that cancel to return.
 * The test waits for the call's return with the suite's bound
 * (RR_TEST_WAIT_MS, under the deadline): "before the deadline" against
 * "at the deadline" is the property, not a speed. Runs over the software
 * iWARP provider; not run when it is not built in. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "xprt_harness.h"

#define PROG 0x20000299u
#define T_DROP 1u
#define CW_DEADLINE_MS 30000u   /* over RR_TEST_WAIT_MS */

_Static_assert(CW_DEADLINE_MS > RR_TEST_WAIT_MS, "the deadline is later than the wait bound");

static int h_drop(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	return RPCRDMA_SVC_DROP;   /* never answered */
}

static _Thread_local bool cw_armed;        /* the run thread's next allocation */
static struct rpcrdma_call *cw_call;
static _Atomic unsigned cw_cancels;        /* made from the allocator */

static void *cw_canceller(void *arg)
{
	rpcrdma_call_cancel(arg);
	return NULL;
}

static void *cw_alloc(void *ctx, size_t size)
{
	const struct rpcrdma_env *d = ctx;
	pthread_t t;

	if (cw_armed) {
		cw_armed = false;
		/* inside the transport's submit, before it holds the call */
		if (pthread_create(&t, NULL, cw_canceller, cw_call) == 0 &&
		    pthread_join(t, NULL) == 0)
			cw_cancels++;   /* (on the run thread: checked by the test) */
	}
	return d->alloc(d->alloc_ctx, size);
}

static void cw_free(void *ctx, void *p)
{
	const struct rpcrdma_env *d = ctx;

	d->free(d->alloc_ctx, p);
}

struct cw_run {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int rc;
};

static void *cw_runner(void *arg)
{
	struct cw_run *r = arg;
	int rc;

	cw_armed = true;
	rc = rpcrdma_call_run(cw_call);
	cw_armed = false;
	pthread_mutex_lock(&r->lock);
	r->rc = rc;
	r->done = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

TEST(rpc_rdma_sync_cancel_before_transport_holds_it_ends_at_once)
{
	const struct rpcrdma_env *d = rpcrdma_env_default();
	struct rpcrdma_env env = *d;
	struct rpcrdma_server_opts so = {.threads = 1};
	struct rpcrdma_client_opts o = {.timeout_ms = CW_DEADLINE_MS, .connect_timeout_ms = 5000,
					.env = &env};
	struct cw_run r = {.rc = 1};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c = NULL;
	struct timespec ts;
	pthread_t t;
	char url[64];
	bool done;

	if (!rr_th_soft_ok())
		return;
	env.alloc = cw_alloc;
	env.free = cw_free;
	env.alloc_ctx = (void *)(uintptr_t)d;
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_DROP, h_drop, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, T_DROP, &cw_call), 0);
	cw_cancels = 0;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cv, NULL);
	REQUIRE_EQ(pthread_create(&t, NULL, cw_runner, &r), 0);
	/* the call's return, waited for with the suite's bound: before the
	 * deadline (on main it came at the deadline, 30 s) */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += RR_TEST_WAIT_MS / 1000;
	pthread_mutex_lock(&r.lock);
	while (!r.done && pthread_cond_timedwait(&r.cv, &r.lock, &ts) == 0)
		;
	done = r.done;
	pthread_mutex_unlock(&r.lock);
	CHECK(done);   /* else it waits for its deadline */
	REQUIRE_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(r.rc, -ECANCELED);
	CHECK_EQ(cw_cancels, 1);   /* the cancel came in the window */
	CHECK(rpcrdma_call_results(cw_call) == NULL);
	rpcrdma_call_destroy(cw_call);
	pthread_mutex_destroy(&r.lock);
	pthread_cond_destroy(&r.cv);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}
