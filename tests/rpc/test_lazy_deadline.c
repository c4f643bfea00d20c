/* SPDX-License-Identifier: BSD-2-Clause */
/* The lazy deadline of a synchronous call (rpc/clnt.c run_fast, run_dated;
 * transport/xprt.h submit_wait): a call run through a transport's
 * submit_wait reads no clock before its first wait, so a call answered in
 * that wait reads none at all; one that is not answered is dated by the
 * clock read after that wait, so its timeout never fires early and fires at
 * most that wait (RR_XPRT_FIRST_WAIT_MS asked) late. Checked on
 * virtual time (the client's env clock, stepped by the test; every read
 * counted by thread):
 *   - with a scripted transport whose first wait takes 5 ms of virtual
 *     time and whose second wait 100 ms (rpc_lazy_deadline_on_virtual_time):
 *     no read on the calling thread before the first wait; not timed out
 *     at the timeout less 1 ms after the call's start (a deadline dated
 *     before its start, e.g. from the read less the slice, fires there);
 *     timed out by 20 ms after it (one dated after the second wait fires
 *     100 ms late);
 *   - over rdma:// with a real server (rpc_rdma_lazy_deadline_virtual):
 *     synchronous NULL calls answered at once do not read the client's
 *     clock on the calling thread (but for the soft provider's reads in a
 *     wait whose Reply came late); a Call the server drops is dated within
 *     20 ms of the client's clock (its first wait is the soft provider's,
 *     which ends by that clock too: stepped 1 ms at a time), then times
 *     out not before its timeout after the call's start, and by 20 ms
 *     after it.
 * No timed assertion: the virtual clock is the only time read. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "rpc/clnt_int.h"
#include "rpcrdma/rpc.h"
#include "transport/xprt.h"

/* ---- the virtual clock, its reads counted by thread ---- */

#define V0 10000000000ull   /* the clock when a call starts (10 s) */
#define MS 1000000ull

static _Atomic uint64_t vt_ns;
static atomic_ulong vt_reads_run;     /* by the thread that runs the call */
static atomic_ulong vt_reads_other;   /* by every other thread */
static _Thread_local bool vt_is_run;

static uint64_t vt_now(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(vt_is_run ? &vt_reads_run : &vt_reads_other, 1);
	return atomic_load(&vt_ns);
}

static void vt_env(struct rpcrdma_env *env)
{
	*env = *rpcrdma_env_default();
	env->now_ns = vt_now;
	env->clock_ctx = NULL;
}

/* ---- a call run on its own thread ---- */

struct run {
	struct rpcrdma_call *call;
	pthread_t t;
	atomic_bool done;
	int rc;
};

static void *run_thread(void *arg)
{
	struct run *r = arg;

	vt_is_run = true;
	r->rc = rpcrdma_call_run(r->call);
	atomic_store(&r->done, true);
	return NULL;
}

static void run_start(struct run *r, struct rpcrdma_call *call)
{
	r->call = call;
	atomic_init(&r->done, false);
	r->rc = 1;
	REQUIRE_EQ(pthread_create(&r->t, NULL, run_thread, r), 0);
}

static bool run_done(void *arg)
{
	return atomic_load(&((struct run *)arg)->done);
}

/* @n more reads of the clock by the threads counted in @ctr */
struct reads {
	atomic_ulong *ctr;
	unsigned long until;
};

static bool reads_seen(void *arg)
{
	struct reads *w = arg;

	return atomic_load(w->ctr) >= w->until;
}

static void wait_reads(atomic_ulong *ctr, unsigned long n, const char *what)
{
	struct reads w = {ctr, atomic_load(ctr) + n};

	REQUIRE(rr_test_wait_for(reads_seen, &w, what));
}

/* @n more reads by the threads counted in @ctr, or the call over */
struct reads_or_done {
	struct reads w;
	struct run *r;
};

static bool reads_or_done(void *arg)
{
	struct reads_or_done *x = arg;

	return reads_seen(&x->w) || atomic_load(&x->r->done);
}

/* The clock stepped to @t; then the call, not timed out, is looked at by
 * the threads counted in @ctr (@n reads: its timer or its wait saw @t):
 * it must still be running. */
static void still_running_at(struct run *r, uint64_t t, atomic_ulong *ctr, unsigned long n)
{
	struct reads_or_done x = {{ctr, atomic_load(ctr) + n}, r};

	atomic_store(&vt_ns, t);
	REQUIRE(rr_test_wait_for(reads_or_done, &x,
				 "the call's deadline looked at on the stepped clock"));
	CHECK(!atomic_load(&r->done));
}

/* At most a slice late: with the clock 20 ms past the call's 1,000 ms
 * timeout, the call has timed out (its thread joined, the call destroyed). */
static void timed_out_by_a_slice(struct run *r)
{
	atomic_store(&vt_ns, V0 + 1020 * MS);
	REQUIRE(rr_test_wait_for(run_done, r, "the call timed out"));
	REQUIRE_EQ(pthread_join(r->t, NULL), 0);
	CHECK_EQ(r->rc, -ETIMEDOUT);
	rpcrdma_call_destroy(r->call);
}

/* ---- a scripted transport: answers at once, or never ---- */

struct rr_xprt_client {
	struct rr_xprt_client_params p;
	pthread_mutex_t lock;
	struct rr_xprt_call *held;   /* taken, not completed */
};

static bool lf_answer;                 /* submit_wait answers inside */
static uint64_t lf_first_ns;           /* its undated wait's virtual length */
static uint64_t lf_wait_ns;            /* wait()'s virtual length */
static uint32_t lf_ms;                 /* submit_wait's @timeout_ms */
static unsigned long lf_reads_before;  /* the run thread's reads by then */
static atomic_bool lf_waited;
static uint8_t lf_reply[24];

static int lf_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
		     struct rr_xprt_client **out)
{
	struct rr_xprt_client *x = calloc(1, sizeof(*x));

	(void)t;
	if (!x)
		return -ENOMEM;
	x->p = *p;
	pthread_mutex_init(&x->lock, NULL);
	*out = x;
	return 0;
}

static void lf_hold(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	pthread_mutex_lock(&x->lock);
	x->held = call;
	pthread_mutex_unlock(&x->lock);
}

static int lf_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	lf_hold(x, call);
	return 0;
}

static int lf_submit_wait(struct rr_xprt_client *x, struct rr_xprt_call *call,
			  uint32_t timeout_ms)
{
	lf_ms = timeout_ms;
	lf_reads_before = atomic_load(&vt_reads_run);
	if (lf_answer) {
		/* xid, REPLY, MSG_ACCEPTED, AUTH_NONE, 0, SUCCESS */
		memset(lf_reply, 0, sizeof(lf_reply));
		rr_put_be32(lf_reply, call->xid);
		rr_put_be32(lf_reply + 4, 1);
		call->reply = lf_reply;
		call->reply_len = sizeof(lf_reply);
		call->status = 0;
		x->p.complete(x->p.ctx, call);   /* its Reply, on its thread */
		return 0;
	}
	lf_hold(x, call);
	atomic_fetch_add(&vt_ns, lf_first_ns);   /* the wait took this long */
	return 0;
}

static void lf_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	(void)x;
	(void)call;
	(void)timeout_ms;
	atomic_fetch_add(&vt_ns, lf_wait_ns);   /* returned early: allowed */
	atomic_store(&lf_waited, true);
}

static void lf_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	bool held;

	pthread_mutex_lock(&x->lock);
	held = x->held == call;
	if (held)
		x->held = NULL;
	pthread_mutex_unlock(&x->lock);
	if (!held)
		return;
	call->status = status;
	call->reply = NULL;
	call->reply_len = 0;
	x->p.complete(x->p.ctx, call);
}

static void lf_release(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	(void)x;
	call->reply = NULL;
}

static void lf_destroy(struct rr_xprt_client *x)
{
	pthread_mutex_destroy(&x->lock);
	free(x);
}

static const struct rr_xprt_client_ops lf_ops = {
	.create = lf_create,
	.submit = lf_submit,
	.abort = lf_abort,
	.release_reply = lf_release,
	.destroy = lf_destroy,
	.wait = lf_wait,
	.submit_wait = lf_submit_wait,
};
static const struct rr_xprt_class lf_class = {"lazyfake", &lf_ops, NULL};

static bool lf_waited_p(void *arg)
{
	(void)arg;
	return atomic_load(&lf_waited);
}

TEST(rpc_lazy_deadline_on_virtual_time)
{
	struct rpcrdma_env env;
	struct rpcrdma_client_opts o = {0};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	struct run r;

	vt_env(&env);
	o.env = &env;
	atomic_store(&vt_ns, V0);
	REQUIRE_EQ(rr_xprt_register(&lf_class), 0);
	REQUIRE_EQ(rpcrdma_client_create("lazyfake://x:1", 7, 1, &o, &c), 0);

	/* answered in the first wait: a first wait asked, no clock read */
	lf_answer = true;
	vt_is_run = true;
	atomic_store(&vt_reads_run, 0);
	for (int i = 0; i < 3; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
		CHECK_EQ(rpcrdma_call_run(call), 0);
		rpcrdma_call_destroy(call);
		CHECK_EQ(lf_ms, RR_XPRT_FIRST_WAIT_MS);
	}
	CHECK_EQ(atomic_load(&vt_reads_run), 0);
	vt_is_run = false;

	/* not answered: 5 ms (virtual) in the first wait, 100 in the
	 * second; timeout 1000 ms */
	lf_answer = false;
	lf_first_ns = 5 * MS;
	lf_wait_ns = 100 * MS;
	atomic_store(&lf_waited, false);
	atomic_store(&vt_reads_run, 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	rpcrdma_call_set_timeout(call, 1000);
	run_start(&r, call);
	REQUIRE(rr_test_wait_for(lf_waited_p, NULL, "the call's second wait"));
	CHECK_EQ(lf_reads_before, 0);   /* no clock read before the first wait */
	/* never early: its timer looks at 1 ms before the timeout */
	still_running_at(&r, V0 + 999 * MS, &vt_reads_other, 4);
	timed_out_by_a_slice(&r);

	/* and the next call is answered without a clock read again */
	lf_answer = true;
	vt_is_run = true;
	atomic_store(&vt_reads_run, 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), 0);
	rpcrdma_call_destroy(call);
	CHECK_EQ(atomic_load(&vt_reads_run), 0);
	vt_is_run = false;
	rpcrdma_client_destroy(c);
}

/* ---- over rdma:// ---- */

static int h_null(struct rpcrdma_req *req, void *ctx)
{
	(void)req;
	(void)ctx;
	return RPCRDMA_SVC_OK;
}

static int h_drop(struct rpcrdma_req *req, void *ctx)
{
	(void)req;
	(void)ctx;
	return RPCRDMA_SVC_DROP;
}

static bool sync_listed(void *arg)
{
	return !rr_rpc_client_sync_busy(arg);
}

TEST(rpc_rdma_lazy_deadline_virtual)
{
	struct rpcrdma_server_opts so = {.threads = 1};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client_opts o = {.connect_timeout_ms = RR_TEST_WAIT_MS};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	struct rpcrdma_env env;
	unsigned steps;
	struct run r;
	char url[64];

	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 0x2f5a0123, 1, 0, h_null, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 0x2f5a0123, 1, 1, h_drop, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	vt_env(&env);
	o.env = &env;
	atomic_store(&vt_ns, V0);
	REQUIRE_EQ(rpcrdma_client_create(url, 0x2f5a0123, 1, &o, &c), 0);

	/* connected by a first call; then answered calls read no clock on
	 * their thread */
	vt_is_run = true;
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	rpcrdma_call_destroy(call);
	atomic_store(&vt_reads_run, 0);
	for (int i = 0; i < 50; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
		CHECK_EQ(rpcrdma_call_run(call), 0);
		rpcrdma_call_destroy(call);
	}
	/* none of the RPC layer's or the transport's; the soft provider reads
	 * the client's clock in a wait whose Reply missed its first 5 ms fast
	 * slice (a loaded machine): fewer than one per two calls, where a
	 * deadline read per call makes 50 */
	CHECK(atomic_load(&vt_reads_run) < 25);
	vt_is_run = false;

	/* a dropped Call, timeout 1000 ms. Its first wait is the provider's,
	 * on the client's clock too (the soft provider's wait ends by it): the
	 * clock is stepped 1 ms at a time, each step read by the call's
	 * thread, until the call is dated and listed (no longer the client's
	 * unlocked call): within one 20 ms slice */
	atomic_store(&vt_reads_run, 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	rpcrdma_call_set_timeout(call, 1000);
	run_start(&r, call);
	/* (its thread reads the clock only once it runs, registered) */
	wait_reads(&vt_reads_run, 1, "the call's thread read the clock");
	for (steps = 0; steps <= 20 && rr_rpc_client_sync_busy(c); steps++) {
		atomic_fetch_add(&vt_ns, MS);
		wait_reads(&vt_reads_run, 1, "the call's thread read the stepped clock");
	}
	CHECK(steps <= 20);
	REQUIRE(rr_test_wait_for(sync_listed, c, "the call dated after its first wait"));
	fprintf(stderr, "  first wait: %u ms of the client's clock\n", steps);
	/* never early: its timer and its wait (every slice) look at 1 ms
	 * before */
	still_running_at(&r, V0 + 999 * MS, &vt_reads_other, 2);
	still_running_at(&r, V0 + 999 * MS, &vt_reads_run, 2);
	timed_out_by_a_slice(&r);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}
