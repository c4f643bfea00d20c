/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the public RPC API on 127.0.0.1 over the TCP transport (RFC 5531
 * with record marking, section 11) and, for the same test bodies
 * (rpc_rdma_*), over RPC-over-RDMA (RFC 8166) on the software provider:
 * synchronous and asynchronous calls, 64 concurrent calls, timeouts,
 * cancellation, AUTH_SYS seen by the handler, every RFC 5531 error reply the
 * server produces from the API, DDP-eligible items of 0..1 MiB (Read/Write
 * chunks on RDMA), many connections, graceful shutdown, restart with
 * retransmission, URL schemes, failing allocators (TCP). Every wait is
 * bounded by a call timeout. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "xprt_harness.h"

#define PROG 0x20000099u
#define T_ECHO 1u
#define T_HOLD 2u
#define T_GARBAGE 3u
#define T_WHOAMI 4u
#define T_BULK 5u
#define T_SYSERR 6u
#define T_AUTHERR 7u
#define T_DROP 8u
#define T_BARRIER 9u
#define T_SYSTAIL 10u

/* Requests held by T_HOLD (deferred, never answered unless released). */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cv = PTHREAD_COND_INITIALIZER;   /* one more held */
static struct rpcrdma_req *held[128];
static unsigned nheld;

static int h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v;

	if (ctx)
		atomic_fetch_add((atomic_int *)ctx, 1);
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v + 1);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), rpcrdma_req_vers(r));
	return RPCRDMA_SVC_OK;
}

static int h_hold(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	pthread_mutex_lock(&hold_lock);
	if (nheld == RR_ARRAY_SIZE(held)) {
		pthread_mutex_unlock(&hold_lock);
		return RPCRDMA_SVC_SYSTEM_ERR;
	}
	held[nheld++] = r;
	pthread_cond_broadcast(&hold_cv);
	pthread_mutex_unlock(&hold_lock);
	return RPCRDMA_SVC_DEFER;
}

/* Waits until @n requests are held (at most 10 s): a Call whose client
 * gave up on it (timeout, cancel, destroy) may reach its handler only
 * after the test went on, and a release before it would leave it held
 * (and the server's shutdown waiting for it). True when they are. */
static bool wait_held(unsigned n)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&hold_lock);
	while (nheld < n && !pthread_cond_timedwait(&hold_cv, &hold_lock, &ts))
		;
	ok = nheld >= n;
	pthread_mutex_unlock(&hold_lock);
	return ok;
}

static unsigned release_held(int stat)
{
	unsigned n;

	pthread_mutex_lock(&hold_lock);
	n = nheld;
	for (unsigned i = 0; i < nheld; i++) {
		if (stat == RPCRDMA_SVC_OK)
			rpcrdma_xdr_put_u32(rpcrdma_req_results(held[i]), 0x600d);
		rpcrdma_req_complete(held[i], stat);
	}
	nheld = 0;
	pthread_mutex_unlock(&hold_lock);
	return n;
}

static int h_garbage(struct rpcrdma_req *r, void *ctx)
{
	char s[8];

	(void)ctx;
	if (rpcrdma_xdr_get_string(rpcrdma_req_args(r), s, sizeof(s)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return RPCRDMA_SVC_OK;
}

static int h_whoami(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	const struct rpcrdma_auth_sys *s = rpcrdma_req_auth_sys(r);

	(void)ctx;
	rpcrdma_xdr_put_u32(e, rpcrdma_req_cred_flavor(r));
	if (s) {
		rpcrdma_xdr_put_u32(e, s->stamp);
		rpcrdma_xdr_put_string(e, s->machinename);
		rpcrdma_xdr_put_u32(e, s->uid);
		rpcrdma_xdr_put_u32(e, s->gid);
		rpcrdma_xdr_put_u32(e, s->ngids);
		for (uint32_t i = 0; i < s->ngids; i++)
			rpcrdma_xdr_put_u32(e, s->gids[i]);
	}
	return RPCRDMA_SVC_OK;
}

/* SYSTAIL: u32 ngids, then u32 1 when every byte of the AUTH_SYS
 * parameters beyond the name's NUL and beyond the groups counted is zero
 * (nothing left of another Call's credential in a reused request), else 0;
 * AUTH_NONE: u32 0xffffffff (no parameters). */
static int h_systail(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	const struct rpcrdma_auth_sys *s = rpcrdma_req_auth_sys(r);
	bool clean = true;

	(void)ctx;
	if (!s) {
		rpcrdma_xdr_put_u32(e, 0xffffffffu);
		return RPCRDMA_SVC_OK;
	}
	for (size_t i = strlen(s->machinename); i < sizeof(s->machinename); i++)
		clean = clean && s->machinename[i] == 0;
	for (uint32_t i = s->ngids; i < RPCRDMA_AUTHSYS_MAXGIDS; i++)
		clean = clean && s->gids[i] == 0;
	rpcrdma_xdr_put_u32(e, s->ngids);
	rpcrdma_xdr_put_u32(e, clean);
	return RPCRDMA_SVC_OK;
}

static atomic_int releases;

static void count_release(void *arg)
{
	(void)arg;
	atomic_fetch_add(&releases, 1);
}

/* BULK: args = u32 seed, ddp opaque; checks data[i] == (seed + i) & 0xff and
 * returns u32 len, then the same bytes as a DDP-eligible result referenced
 * from the request (valid until the release callback). */
static int h_bulk(struct rpcrdma_req *r, void *ctx)
{
	int rc = rr_th_h_bulk_seeded(r, ctx);

	if (rc == RPCRDMA_SVC_OK)
		rpcrdma_req_set_release(r, count_release, NULL);
	return rc;
}

static int h_syserr(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	return -EIO;
}

static int h_autherr(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	rpcrdma_req_set_auth_error(r, RPCRDMA_AUTH_TOOWEAK);
	return RPCRDMA_SVC_AUTH_ERROR;
}

static int h_drop(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	return RPCRDMA_SVC_DROP;
}

/* BARRIER: waits (at most 5 s) until 4 BARRIER requests are inside their
 * handlers at the same time; returns 1 if they were, 0 otherwise. */
static pthread_mutex_t bar_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bar_cv = PTHREAD_COND_INITIALIZER;
static unsigned bar_count;

static int h_barrier(struct rpcrdma_req *r, void *ctx)
{
	struct timespec ts;
	uint32_t reached;

	(void)ctx;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 5;
	pthread_mutex_lock(&bar_lock);
	bar_count++;
	pthread_cond_broadcast(&bar_cv);
	while (bar_count < 4)
		if (pthread_cond_timedwait(&bar_cv, &bar_lock, &ts))
			break;
	reached = bar_count >= 4;
	pthread_mutex_unlock(&bar_lock);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), reached);
	return RPCRDMA_SVC_OK;
}

/* The URL scheme the shared test bodies run over ("tcp" or "rdma"). */
static const char *g_scheme = "tcp";
/* rpcrdma_server_opts.credits of start_server (rdma://): the tests that
 * hold N Calls at the server until all N are there need a grant of N from
 * the first Reply on (a fixed grant); by default the grant follows demand
 * and grows only as Replies come. */
static uint32_t g_credits;

static struct rpcrdma_server *start_server(unsigned threads, size_t max_msg, char *url, size_t n)
{
	struct rpcrdma_server_opts o = {.threads = threads, .max_msg = max_msg,
					.credits = g_credits};
	struct rpcrdma_server *s = NULL;

	char lurl[64];

	snprintf(lurl, sizeof(lurl), "%s://127.0.0.1:0", g_scheme);
	REQUIRE_EQ(rpcrdma_server_create(lurl, &o, &s), 0);
	for (uint32_t v = 1; v <= 3; v += 2) {
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_ECHO, h_echo, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_HOLD, h_hold, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_GARBAGE, h_garbage, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_WHOAMI, h_whoami, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_BULK, h_bulk, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_SYSERR, h_syserr, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_AUTHERR, h_autherr, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_DROP, h_drop, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_BARRIER, h_barrier, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, v, T_SYSTAIL, h_systail, NULL), 0);
	}
	CHECK_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, h_echo, NULL), -EEXIST);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	CHECK_EQ(rpcrdma_server_register(s, PROG, 1, 77, h_echo, NULL), -EBUSY);
	REQUIRE(rpcrdma_server_port(s) > 0);
	snprintf(url, n, "%s://127.0.0.1:%d", g_scheme, rpcrdma_server_port(s));
	return s;
}

static struct rpcrdma_client *connect_client(const char *url, uint32_t prog, uint32_t vers)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 5000};
	struct rpcrdma_client *c = NULL;

	REQUIRE_EQ(rpcrdma_client_create(url, prog, vers, &o, &c), 0);
	return c;
}

/* Echo call: returns 0 and checks the result, or the error. */
static int echo(struct rpcrdma_client *c, uint32_t v, uint32_t expect_vers)
{
	struct rpcrdma_call *call;
	uint32_t r = 0, rv = 0;
	int rc;

	rc = rpcrdma_call_create(c, T_ECHO, &call);
	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
	rc = rpcrdma_call_run(call);
	if (!rc) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &r);
		if (!rc)
			rc = rpcrdma_xdr_get_u32(d, &rv);
		if (!rc && (r != v + 1 || rv != expect_vers))
			rc = -EIO;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

static void sync_call_body(void);

TEST(rpc_tcp_sync_call)
{
	g_scheme = "tcp";
	sync_call_body();
}

TEST(rpc_rdma_sync_call)
{
	g_scheme = "rdma";
	sync_call_body();
	g_scheme = "tcp";
}

static void sync_call_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_call *call;
	uint32_t x1, x2;

	for (uint32_t i = 0; i < 20; i++)
		CHECK_EQ(echo(c, i * 7, 1), 0);
	/* XIDs are consecutive from a random start. */
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	x1 = rpcrdma_call_xid(call);
	CHECK_EQ(rpcrdma_call_run(call), 0); /* NULL procedure, automatic */
	CHECK_EQ(rpcrdma_xdr_dec_remaining(rpcrdma_call_results(call)), 0);
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	x2 = rpcrdma_call_xid(call);
	rpcrdma_call_destroy(call);
	CHECK_EQ(x2, x1 + 1);
	rpcrdma_client_destroy(c);

	/* Version 3 of the same program is served too. */
	c = connect_client(url, PROG, 3);
	CHECK_EQ(echo(c, 5, 3), 0);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

struct async_ctx {
	atomic_int done;
	atomic_int ok;
};

static void async_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct async_ctx *a = arg;
	uint32_t r, v;
	struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

	if (status == 0 && d && rpcrdma_xdr_get_u32(d, &r) == 0 &&
	    rpcrdma_xdr_get_u32(d, &v) == 0 && r == rpcrdma_call_xid(call) + 1)
		atomic_fetch_add(&a->ok, 1);
	rpcrdma_call_destroy(call); /* destroying from the callback is allowed */
	atomic_fetch_add(&a->done, 1);
}

static void async_64_in_flight_body(void);

TEST(rpc_tcp_async_64_in_flight)
{
	g_scheme = "tcp";
	async_64_in_flight_body();
}

TEST(rpc_rdma_async_64_in_flight)
{
	g_scheme = "rdma";
	g_credits = 64;   /* 64 held at once */
	async_64_in_flight_body();
	g_credits = 0;
	g_scheme = "tcp";
}

static void async_64_in_flight_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(4, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct async_ctx a;
	struct rpcrdma_call *calls[64];

	atomic_init(&a.done, 0);
	atomic_init(&a.ok, 0);
	/* One completed call first: RPC-over-RDMA allows a single Call in
	 * flight until the first Reply grants credits (RFC 8166). */
	CHECK_EQ(echo(c, 1, 1), 0);
	/* Hold the next 64 calls on the server so all are in flight at once,
	 * then release them: 64 outstanding RPCs on one connection. */
	for (int i = 0; i < 64; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &calls[i]), 0);
		rpcrdma_call_set_timeout(calls[i], 10000);
		REQUIRE_EQ(rpcrdma_call_start(calls[i], NULL, NULL), 0);
	}
	CHECK(wait_held(64));
	pthread_mutex_lock(&hold_lock);
	CHECK_EQ(nheld, 64);
	pthread_mutex_unlock(&hold_lock);
	for (int i = 0; i < 64; i++)
		CHECK_EQ(rpcrdma_call_wait(calls[i], 0), -EAGAIN);
	CHECK_EQ(release_held(RPCRDMA_SVC_OK), 64);
	for (int i = 0; i < 64; i++) {
		uint32_t v = 0;

		CHECK_EQ(rpcrdma_call_wait(calls[i], 10000), 0);
		CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(calls[i]), &v), 0);
		CHECK_EQ(v, 0x600d);
		rpcrdma_call_destroy(calls[i]);
	}

	/* 64 asynchronous echo calls with completion callbacks. */
	for (int i = 0; i < 64; i++) {
		struct rpcrdma_call *call;

		REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), rpcrdma_call_xid(call));
		REQUIRE_EQ(rpcrdma_call_start(call, async_done, &a), 0);
	}
	for (uint64_t dl_ = rr_test_deadline();
	     atomic_load(&a.done) < 64 &&
	     rr_test_wait_left(dl_, "a.done < 64 to turn false");)
		usleep(10000);
	CHECK_EQ(atomic_load(&a.done), 64);
	CHECK_EQ(atomic_load(&a.ok), 64);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

static void one_connection_runs_requests_in_parallel_body(void);

TEST(rpc_tcp_one_connection_runs_requests_in_parallel)
{
	g_scheme = "tcp";
	one_connection_runs_requests_in_parallel_body();
}

TEST(rpc_rdma_one_connection_runs_requests_in_parallel)
{
	g_scheme = "rdma";
	g_credits = 64;   /* 4 barrier Calls at once */
	one_connection_runs_requests_in_parallel_body();
	g_credits = 0;
	g_scheme = "tcp";
}

static void one_connection_runs_requests_in_parallel_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(4, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_call *calls[4];

	CHECK_EQ(echo(c, 1, 1), 0); /* credits granted (RDMA) */
	bar_count = 0;
	for (int i = 0; i < 4; i++) {
		REQUIRE_EQ(rpcrdma_call_create(c, T_BARRIER, &calls[i]), 0);
		REQUIRE_EQ(rpcrdma_call_start(calls[i], NULL, NULL), 0);
	}
	for (int i = 0; i < 4; i++) {
		uint32_t reached = 0;

		CHECK_EQ(rpcrdma_call_wait(calls[i], 10000), 0);
		CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(calls[i]), &reached), 0);
		CHECK_EQ(reached, 1);
		rpcrdma_call_destroy(calls[i]);
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

struct thr_arg {
	struct rpcrdma_client *c;
	int fails;
};

static void *thr_main(void *p)
{
	struct thr_arg *t = p;

	for (uint32_t i = 0; i < 50; i++)
		if (echo(t->c, i, 1))
			t->fails++;
	return NULL;
}

static void threads_and_connections_body(void);

TEST(rpc_tcp_threads_and_connections)
{
	g_scheme = "tcp";
	threads_and_connections_body();
}

TEST(rpc_rdma_threads_and_connections)
{
	g_scheme = "rdma";
	threads_and_connections_body();
	g_scheme = "tcp";
}

static void threads_and_connections_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(4, 0, url, sizeof(url));
	struct rpcrdma_client *shared = connect_client(url, PROG, 1);
	struct rpcrdma_client *own[8];
	pthread_t th[16];
	struct thr_arg ta[16];

	/* 8 threads on one client, 8 threads with a connection each. */
	for (int i = 0; i < 16; i++) {
		ta[i].c = i < 8 ? shared : (own[i - 8] = connect_client(url, PROG, 1));
		ta[i].fails = 0;
		REQUIRE_EQ(pthread_create(&th[i], NULL, thr_main, &ta[i]), 0);
	}
	for (int i = 0; i < 16; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(ta[i].fails, 0);
	}
	for (int i = 0; i < 8; i++)
		rpcrdma_client_destroy(own[i]);
	rpcrdma_client_destroy(shared);
	rpcrdma_server_destroy(s);
}

static void timeout_and_cancel_body(void);

TEST(rpc_tcp_timeout_and_cancel)
{
	g_scheme = "tcp";
	timeout_and_cancel_body();
}

TEST(rpc_rdma_timeout_and_cancel)
{
	g_scheme = "rdma";
	timeout_and_cancel_body();
	g_scheme = "tcp";
}

static void timeout_and_cancel_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_call *call;
	struct rpcrdma_rpc_status st;
	struct async_ctx a;
	int rc;

	/* A handler that never answers: the call times out. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	rpcrdma_call_set_timeout(call, 200);
	CHECK_EQ(rpcrdma_call_run(call), -ETIMEDOUT);
	CHECK(rpcrdma_call_results(call) == NULL);
	CHECK_EQ(rpcrdma_call_status(call, &st), -ENOENT);
	rpcrdma_call_destroy(call);
	/* A dropped request (no reply at all) also times out. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_DROP, &call), 0);
	rpcrdma_call_set_timeout(call, 200);
	CHECK_EQ(rpcrdma_call_run(call), -ETIMEDOUT);
	rpcrdma_call_destroy(call);
	/* The connection is still fine. */
	CHECK_EQ(echo(c, 1, 1), 0);

	/* Cancel an asynchronous call: its callback gets -ECANCELED. */
	atomic_init(&a.done, 0);
	atomic_init(&a.ok, 0);
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	CHECK_EQ(rpcrdma_call_wait(call, 50), -EAGAIN);
	rpcrdma_call_cancel(call);
	rc = rpcrdma_call_wait(call, 5000);
	CHECK_EQ(rc, -ECANCELED);
	rpcrdma_call_cancel(call); /* again: no effect */
	CHECK_EQ(rpcrdma_call_wait(call, 0), -ECANCELED);
	rpcrdma_call_destroy(call);

	/* A late reply to a timed-out/cancelled XID is discarded. */
	CHECK(wait_held(2));
	CHECK_EQ(release_held(RPCRDMA_SVC_OK), 2);
	CHECK_EQ(echo(c, 2, 1), 0);

	/* Destroying a pending call cancels it. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	rpcrdma_call_destroy(call);
	CHECK_EQ(echo(c, 3, 1), 0);
	rpcrdma_client_destroy(c);
	CHECK(wait_held(1));
	release_held(RPCRDMA_SVC_DROP);
	rpcrdma_server_destroy(s);
}

static void auth_sys_body(void);

TEST(rpc_tcp_auth_sys)
{
	g_scheme = "tcp";
	auth_sys_body();
}

TEST(rpc_rdma_auth_sys)
{
	g_scheme = "rdma";
	auth_sys_body();
	g_scheme = "tcp";
}

static void auth_sys_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_auth_sys sys = {.stamp = 77, .uid = 1234, .gid = 99, .ngids = 3,
				       .gids = {5, 6, 7}};
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t v[8];
	char name[64];

	strcpy(sys.machinename, "client.example");
	/* AUTH_NONE first. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_WHOAMI, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v[0]), 0);
	CHECK_EQ(v[0], RPCRDMA_AUTH_NONE);
	rpcrdma_call_destroy(call);

	REQUIRE_EQ(rpcrdma_client_set_auth_sys(c, &sys), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, T_WHOAMI, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &v[0]), 0);
	CHECK_EQ(v[0], RPCRDMA_AUTH_SYS);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &v[1]), 0);
	CHECK_EQ(v[1], 77);
	REQUIRE_EQ(rpcrdma_xdr_get_string(d, name, sizeof(name)), 0);
	CHECK(strcmp(name, "client.example") == 0);
	for (int i = 2; i < 8; i++)
		REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &v[i]), 0);
	CHECK_EQ(v[2], 1234);
	CHECK_EQ(v[3], 99);
	CHECK_EQ(v[4], 3);
	CHECK_EQ(v[5], 5);
	CHECK_EQ(v[6], 6);
	CHECK_EQ(v[7], 7);
	CHECK_EQ(rpcrdma_xdr_dec_remaining(d), 0);
	rpcrdma_call_destroy(call);

	/* Own identity helper; too many groups refused. */
	CHECK_EQ(rpcrdma_auth_sys_self(&sys), 0);
	CHECK_EQ(sys.uid, (uint32_t)getuid());
	CHECK_EQ(rpcrdma_client_set_auth_sys(c, &sys), 0);
	sys.ngids = 17;
	CHECK_EQ(rpcrdma_client_set_auth_sys(c, &sys), -EINVAL);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

static void auth_sys_reused_body(void);

TEST(rpc_tcp_auth_sys_reused_request_clean)
{
	g_scheme = "tcp";
	auth_sys_reused_body();
}

TEST(rpc_rdma_auth_sys_reused_request_clean)
{
	g_scheme = "rdma";
	auth_sys_reused_body();
	g_scheme = "tcp";
}

/* One synchronous Call at a time, so that the server reuses its request
 * objects: a long machine name and 16 groups, then shorter names and fewer
 * groups, then AUTH_NONE, then a short one again; the handler sees nothing
 * of the earlier credentials. */
static void auth_sys_reused_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(1, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	static const uint32_t ngids[] = {16, 1, 0, 5, 2, 0};
	static const size_t namelen[] = {255, 3, 40, 1, 200, 0};

	for (unsigned round = 0; round < 3; round++) {
		for (unsigned i = 0; i < RR_ARRAY_SIZE(ngids); i++) {
			struct rpcrdma_auth_sys sys = {.stamp = i, .uid = 1000 + i, .gid = 7,
						       .ngids = ngids[i]};
			struct rpcrdma_call *call;
			struct rpcrdma_xdr_dec *d;
			uint32_t n = 0, clean = 0;

			for (uint32_t g = 0; g < ngids[i]; g++)
				sys.gids[g] = 0xabc00000u + g;
			memset(sys.machinename, 'a' + (int)i, namelen[i]);
			REQUIRE_EQ(rpcrdma_client_set_auth_sys(c, &sys), 0);
			REQUIRE_EQ(rpcrdma_call_create(c, T_SYSTAIL, &call), 0);
			REQUIRE_EQ(rpcrdma_call_run(call), 0);
			d = rpcrdma_call_results(call);
			REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &n), 0);
			REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &clean), 0);
			CHECK_EQ(n, ngids[i]);
			CHECK_EQ(clean, 1);
			rpcrdma_call_destroy(call);
		}
		REQUIRE_EQ(rpcrdma_client_set_auth_none(c), 0);
		{
			struct rpcrdma_call *call;
			uint32_t v = 0;

			REQUIRE_EQ(rpcrdma_call_create(c, T_SYSTAIL, &call), 0);
			REQUIRE_EQ(rpcrdma_call_run(call), 0);
			REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
			CHECK_EQ(v, 0xffffffffu);
			rpcrdma_call_destroy(call);
		}
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* Runs @proc with @args_u32 (if nonzero count) and returns status + rst. */
static int run_status(struct rpcrdma_client *c, uint32_t proc, struct rpcrdma_rpc_status *st)
{
	struct rpcrdma_call *call;
	int rc;

	memset(st, 0xff, sizeof(*st));
	REQUIRE_EQ(rpcrdma_call_create(c, proc, &call), 0);
	rc = rpcrdma_call_run(call);
	if (rpcrdma_call_status(call, st) != 0)
		memset(st, 0xee, sizeof(*st));
	rpcrdma_call_destroy(call);
	return rc;
}

static void error_replies_body(void);

TEST(rpc_tcp_error_replies)
{
	g_scheme = "tcp";
	error_replies_body();
}

TEST(rpc_rdma_error_replies)
{
	g_scheme = "rdma";
	error_replies_body();
	g_scheme = "tcp";
}

static void error_replies_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c;
	struct rpcrdma_rpc_status st;

	/* PROG_UNAVAIL: a program nobody registered. */
	c = connect_client(url, PROG + 1, 1);
	CHECK_EQ(run_status(c, 0, &st), -EREMOTEIO);
	CHECK_EQ(st.reply_stat, RPCRDMA_MSG_ACCEPTED);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROG_UNAVAIL);
	rpcrdma_client_destroy(c);

	/* PROG_MISMATCH with the registered range 1..3. */
	c = connect_client(url, PROG, 2);
	CHECK_EQ(run_status(c, T_ECHO, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROG_MISMATCH);
	CHECK_EQ(st.low, 1);
	CHECK_EQ(st.high, 3);
	rpcrdma_client_destroy(c);

	c = connect_client(url, PROG, 1);
	/* PROC_UNAVAIL */
	CHECK_EQ(run_status(c, 99, &st), -EREMOTEIO);
	CHECK_EQ(st.reply_stat, RPCRDMA_MSG_ACCEPTED);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROC_UNAVAIL);
	/* GARBAGE_ARGS: the handler could not decode its (absent) args */
	CHECK_EQ(run_status(c, T_GARBAGE, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	CHECK_EQ(run_status(c, T_ECHO, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	/* SYSTEM_ERR from a negative errno */
	CHECK_EQ(run_status(c, T_SYSERR, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_SYSTEM_ERR);
	/* AUTH_ERROR chosen by the handler */
	CHECK_EQ(run_status(c, T_AUTHERR, &st), -EREMOTEIO);
	CHECK_EQ(st.reply_stat, RPCRDMA_MSG_DENIED);
	CHECK_EQ(st.reject_stat, RPCRDMA_AUTH_ERROR);
	CHECK_EQ(st.auth_stat, RPCRDMA_AUTH_TOOWEAK);
	/* NULL procedure is answered for registered programs: the whole
	 * status (the call object is the AUTH_ERROR call's when the
	 * thread's cache gives it back: nothing of that Reply's status may
	 * be left; on_complete writes a successful Reply's status whole, not
	 * copied from the decoder) */
	CHECK_EQ(run_status(c, 0, &st), 0);
	CHECK_EQ(st.reply_stat, RPCRDMA_MSG_ACCEPTED);
	CHECK_EQ(st.accept_stat, RPCRDMA_SUCCESS);
	CHECK_EQ(st.reject_stat, 0);
	CHECK_EQ(st.auth_stat, 0);
	CHECK_EQ(st.low, 0);
	CHECK_EQ(st.high, 0);
	/* after PROG_MISMATCH's versions, on the same object */
	rpcrdma_client_destroy(c);
	c = connect_client(url, PROG, 2);
	CHECK_EQ(run_status(c, T_ECHO, &st), -EREMOTEIO);
	CHECK_EQ(st.low, 1);
	rpcrdma_client_destroy(c);
	c = connect_client(url, PROG, 1);
	CHECK_EQ(run_status(c, 0, &st), 0);
	CHECK_EQ(st.reply_stat, RPCRDMA_MSG_ACCEPTED);
	CHECK_EQ(st.accept_stat, RPCRDMA_SUCCESS);
	CHECK_EQ(st.low, 0);
	CHECK_EQ(st.high, 0);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i);
}

static void ddp_items_body(void);

TEST(rpc_tcp_ddp_items)
{
	g_scheme = "tcp";
	ddp_items_body();
}

TEST(rpc_rdma_ddp_items)
{
	g_scheme = "rdma";
	ddp_items_body();
	g_scheme = "tcp";
}

static void ddp_items_body(void)
{
	static const uint32_t sizes[] = {0, 1, 3, 4, 5, 4095, 1u << 20};
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	uint8_t *src = malloc(1u << 20), *sink = malloc((1u << 20) + 8);

	REQUIRE(src && sink);
	atomic_store(&releases, 0);
	for (size_t k = 0; k < RR_ARRAY_SIZE(sizes); k++) {
		uint32_t n = sizes[k], seed = (uint32_t)k * 31 + 1, len = 0, tail = 0, rlen = 0;
		struct rpcrdma_ddp_sink sk = {sink, (1u << 20) + 8};
		struct rpcrdma_call *call;
		struct rpcrdma_xdr_dec *d;
		const void *p = NULL;

		fill(src, n, seed);
		memset(sink, 0xee, (1u << 20) + 8);
		REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), seed);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, n), 0);
		/* complete XDR size: header + seed + len + data + pad */
		CHECK_EQ(rpcrdma_xdr_enc_len(rpcrdma_call_args(call)), 40 + 4 + 4 + RR_ALIGN4(n));
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rpcrdma_call_set_reply_hint(call, 64);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		d = rpcrdma_call_results(call);
		REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &rlen), 0);
		CHECK_EQ(rlen, n);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(d, &p, &len), 0);
		CHECK(p == sink);
		CHECK_EQ(len, n);
		CHECK(memcmp(sink, src, n) == 0);
		CHECK_EQ(sink[n], 0xee); /* nothing written beyond the item */
		REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &tail), 0);
		CHECK_EQ(tail, 0x7a11);
		CHECK_EQ(rpcrdma_xdr_dec_remaining(d), 0);
		rpcrdma_call_destroy(call);
	}
	/* A sink too small for the item: -EMSGSIZE from the decoder. */
	{
		struct rpcrdma_ddp_sink sk = {sink, 4};
		struct rpcrdma_call *call;
		const void *p;
		uint32_t len, rlen;

		fill(src, 5, 9);
		memset(sink, 0xee, 16);
		REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 9);
		rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, 5);
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		if (strcmp(g_scheme, "rdma") == 0) {
			/* RDMA: the 4-byte Write chunk cannot hold the item;
			 * the responder answers RDMA_ERROR/ERR_CHUNK (RFC 8166)
			 * instead of overrunning it: no RPC reply. */
			struct rpcrdma_rpc_status st;

			CHECK_EQ(rpcrdma_call_run(call), -EREMOTEIO);
			CHECK_EQ(rpcrdma_call_status(call, &st), -ENOENT);
			CHECK_EQ(sink[4], 0xee);
			rpcrdma_call_destroy(call);
		} else {
			REQUIRE_EQ(rpcrdma_call_run(call), 0);
			REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), 0);
			CHECK_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len),
				 -EMSGSIZE);
			/* sticky */
			CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), -EMSGSIZE);
			rpcrdma_call_destroy(call);
		}
	}
	/* Without a sink the item points into the reply. */
	{
		struct rpcrdma_call *call;
		const void *p;
		uint32_t len, rlen;

		fill(src, 6, 3);
		REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 3);
		rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, 6);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), 0);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
		CHECK_EQ(len, 6);
		CHECK(memcmp(p, src, 6) == 0);
		rpcrdma_call_destroy(call);
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	CHECK_EQ(atomic_load(&releases), (int)RR_ARRAY_SIZE(sizes) + 2);
	free(src);
	free(sink);
}

TEST(rpc_tcp_message_size_limits)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 65536, url, sizeof(url));
	struct rpcrdma_client_opts o = {.timeout_ms = 5000, .no_reconnect = true,
					.max_msg = 1 << 20};
	struct rpcrdma_client *c = NULL, *c2;
	struct rpcrdma_call *call;
	uint8_t *big = calloc(1, 2 << 20);

	REQUIRE(big);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	c2 = connect_client(url, PROG, 1);
	/* Above the client's own limit: refused while encoding. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0);
	CHECK_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), big, 2 << 20), -EMSGSIZE);
	CHECK_EQ(rpcrdma_call_run(call), -EMSGSIZE);
	rpcrdma_call_destroy(call);
	/* Above the server's limit: the server closes this connection; with
	 * no_reconnect the call fails with -ECONNRESET. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0);
	CHECK_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), big, 100000), 0);
	CHECK_EQ(rpcrdma_call_run(call), -ECONNRESET);
	rpcrdma_call_destroy(call);
	/* Later calls on the dead client fail fast; others are unaffected. */
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), -ENOTCONN);
	rpcrdma_call_destroy(call);
	CHECK_EQ(echo(c2, 11, 1), 0);
	rpcrdma_client_destroy(c);
	rpcrdma_client_destroy(c2);
	rpcrdma_server_destroy(s);
	free(big);
}

struct shut_arg {
	struct rpcrdma_server *s;
	atomic_int done;
};

static void *shut_main(void *p)
{
	struct shut_arg *a = p;

	rpcrdma_server_shutdown(a->s);
	atomic_store(&a->done, 1);
	return NULL;
}

static void graceful_shutdown_body(void);

TEST(rpc_tcp_graceful_shutdown)
{
	g_scheme = "tcp";
	graceful_shutdown_body();
}

TEST(rpc_rdma_graceful_shutdown)
{
	g_scheme = "rdma";
	graceful_shutdown_body();
	g_scheme = "tcp";
}

static void graceful_shutdown_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_client *c2 = NULL;
	struct rpcrdma_call *call;
	struct shut_arg a = {.s = s};
	pthread_t th;
	uint32_t v = 0;

	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	CHECK(wait_held(1));
	atomic_init(&a.done, 0);
	REQUIRE_EQ(pthread_create(&th, NULL, shut_main, &a), 0);
	/* Shutdown no longer accepts connections (once it began: until then
	 * a connection is made and dropped again)... */
	{
		int rc = 0;

		for (uint64_t dl = rr_test_deadline();
		     rr_test_wait_left(dl, "the shutdown refuses connections");) {
			rc = rpcrdma_client_create(url, PROG, 1, NULL, &c2);
			if (rc < 0)
				break;
			rpcrdma_client_destroy(c2);
			c2 = NULL;
			usleep(5000);
		}
		CHECK(rc < 0);
	}
	/* ...and waits for the request in flight (held: it cannot end) */
	CHECK_EQ(atomic_load(&a.done), 0);
	CHECK_EQ(release_held(RPCRDMA_SVC_OK), 1);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&a.done), 1);
	/* The in-flight call got its reply. */
	CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(v, 0x600d);
	rpcrdma_call_destroy(call);
	rpcrdma_server_destroy(s);
	rpcrdma_client_destroy(c);
}

TEST(rpc_url_schemes)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_server *s = NULL;
	char url[64];
	int port;

	int rc;

	/* rdma:// is served by the RPC-over-RDMA transport on the soft provider:
	 * a closed port is refused like TCP, a listener can be created. */
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", NULL, &s), 0);
	port = rpcrdma_server_port(s);
	rpcrdma_server_destroy(s);
	s = NULL;
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
	CHECK_EQ(rpcrdma_client_create(url, 1, 1, NULL, &c), -ECONNREFUSED);
	/* verbs:// needs an RDMA device: unsupported or no device on a host
	 * without one; with devices (the lab VM) rdma_cm refuses loopback
	 * addresses. Either way the create fails and leaves no client. */
	rc = rpcrdma_client_create("verbs://127.0.0.1:20049", 1, 1, NULL, &c);
	CHECK(rc < 0);
	CHECK(c == NULL);
	if (!rpcrdma_provider_available("verbs"))
		CHECK_EQ(rc, -EPROTONOSUPPORT);
	CHECK_EQ(rpcrdma_client_create("udp://127.0.0.1:1", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create("tcp://127.0.0.1", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create("tcp://127.0.0.1:70000", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create("tcp://:80", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create("tcp://127.0.0.1:12x", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create("127.0.0.1:80", 1, 1, NULL, &c), -EINVAL);
	CHECK_EQ(rpcrdma_client_create(NULL, 1, 1, NULL, &c), -EINVAL);
	/* A port nobody listens on: find one by binding and closing. */
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", NULL, &s), 0);
	port = rpcrdma_server_port(s);
	rpcrdma_server_destroy(s);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	CHECK_EQ(rpcrdma_client_create(url, 1, 1, NULL, &c), -ECONNREFUSED);
	/* IPv6 literal form parses (connect may fail without ::1). */
	snprintf(url, sizeof(url), "TCP://[::1]:%d", port);
	rc = rpcrdma_client_create(url, 1, 1, NULL, &c);
	CHECK(rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -EADDRNOTAVAIL ||
	      rc == -ENETUNREACH || rc == -EAFNOSUPPORT);
}

TEST(rpc_xdr_public_cursor)
{
	char url[64];
	struct rpcrdma_server *s = start_server(1, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	void *sp;
	uint8_t small[3] = {1, 2, 3};

	REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &call), 0);
	e = rpcrdma_call_args(call);
	CHECK_EQ(rpcrdma_xdr_enc_len(e), 40); /* the Call header */
	CHECK_EQ(rpcrdma_xdr_put_u64(e, 1), 0);
	CHECK_EQ(rpcrdma_xdr_put_i32(e, -1), 0);
	CHECK_EQ(rpcrdma_xdr_put_bool(e, true), 0);
	CHECK_EQ(rpcrdma_xdr_put_fixed(e, small, 3), 0);
	CHECK_EQ(rpcrdma_xdr_put_opaque(e, small, 3), 0);
	CHECK_EQ(rpcrdma_xdr_put_string(e, "abcde"), 0);
	CHECK_EQ(rpcrdma_xdr_put_space(e, 5, &sp), 0);
	memset(sp, 'x', 5);
	CHECK_EQ(rpcrdma_xdr_enc_len(e), 40 + 8 + 4 + 4 + 4 + 8 + 12 + 8);
	/* 16 DDP items at most */
	for (int i = 0; i < 16; i++)
		CHECK_EQ(rpcrdma_xdr_put_ddp(e, small, 3), 0);
	CHECK_EQ(rpcrdma_xdr_put_ddp(e, small, 3), -E2BIG);
	CHECK_EQ(rpcrdma_xdr_put_u32(e, 1), -E2BIG); /* sticky */
	CHECK_EQ(rpcrdma_xdr_enc_error(e), -E2BIG);
	CHECK_EQ(rpcrdma_call_start(call, NULL, NULL), -E2BIG);
	rpcrdma_call_destroy(call);

	/* Decoding: an echo reply read past its end fails and stays failed. */
	REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 41);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	{
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
		uint64_t v64;
		int32_t i32;
		bool b;

		CHECK_EQ(rpcrdma_xdr_get_i32(d, &i32), 0);
		CHECK_EQ(i32, 42);
		CHECK_EQ(rpcrdma_xdr_get_bool(d, &b), 0); /* version 1 reads as true */
		CHECK_EQ(rpcrdma_xdr_get_u64(d, &v64), -EBADMSG);
		CHECK_EQ(rpcrdma_xdr_get_bool(d, &b), -EBADMSG);
		CHECK_EQ(rpcrdma_xdr_dec_error(d), -EBADMSG);
	}
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* ---- failing allocator: every client-side allocation fails once ---- */

static pthread_mutex_t fa_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rr_test_env fa_te;

static void *fa_alloc(void *ctx, size_t n)
{
	void *p;

	(void)ctx;
	pthread_mutex_lock(&fa_lock);
	p = fa_te.env.alloc(fa_te.env.alloc_ctx, n);
	pthread_mutex_unlock(&fa_lock);
	return p;
}

static void fa_free(void *ctx, void *p)
{
	(void)ctx;
	pthread_mutex_lock(&fa_lock);
	fa_te.env.free(fa_te.env.alloc_ctx, p);
	pthread_mutex_unlock(&fa_lock);
}

TEST(rpc_tcp_client_failing_allocator)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	const struct rpcrdma_env *def = rpcrdma_env_default();
	struct rpcrdma_env env = *def;
	unsigned ok_runs = 0;

	env.alloc = fa_alloc;
	env.free = fa_free;
	for (unsigned long i = 1; i <= 12; i++) {
		struct rpcrdma_client_opts o = {.env = &env, .timeout_ms = 3000};
		struct rpcrdma_client *c = NULL;
		struct rpcrdma_call *call = NULL;
		uint8_t data[5] = {1, 2, 3, 4, 5}, sinkb[8];
		struct rpcrdma_ddp_sink sk = {sinkb, sizeof(sinkb)};
		int rc;

		rr_test_env_init(&fa_te, i);
		fa_te.fail_at = i;
		rc = rpcrdma_client_create(url, PROG, 1, &o, &c);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			goto check;
		}
		rc = rpcrdma_call_create(c, T_BULK, &call);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			goto out;
		}
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 1);
		rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), data, 5);
		/* The grown argument buffer may be the failing allocation. */
		rc = rpcrdma_xdr_enc_error(rpcrdma_call_args(call));
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			CHECK_EQ(rpcrdma_call_run(call), -ENOMEM);
			goto out;
		}
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rc = rpcrdma_call_run(call);
		/* A failed reply-buffer allocation drops the connection; the
		 * client reconnects and retransmits. */
		CHECK(rc == 0 || rc == -ENOMEM);
		if (rc == 0)
			ok_runs++;
		if (getenv("RR_VERBOSE"))
			printf("  fail_at %lu: call %d (allocs %lu)\n", i, rc, fa_te.allocs);
out:
		rpcrdma_call_destroy(call);
		rpcrdma_client_destroy(c);
check:
		pthread_mutex_lock(&fa_lock);
		CHECK_EQ(fa_te.live, 0);
		pthread_mutex_unlock(&fa_lock);
	}
	CHECK(ok_runs > 0);
	rpcrdma_server_destroy(s);
}

static atomic_int load_stop;

struct load_arg {
	struct rpcrdma_client *c;
	int fails;
	int done;
};

/* Echo calls until told to stop, then 50 more (at most 60 s). */
static void *load_main(void *p)
{
	struct load_arg *a = p;
	int extra = 0;
	time_t end = time(NULL) + 60;

	for (uint32_t i = 0; extra < 50 && time(NULL) < end; i++) {
		/* Counted only if started after the new server was up. */
		bool after = atomic_load(&load_stop);
		int rc = echo(a->c, i, 1);

		if (rc) {
			fprintf(stderr, "  load call %u: %d %s\n", i, rc, rpcrdma_strerror(rc));
			a->fails++;
		}
		a->done++;
		if (after)
			extra++;
	}
	return NULL;
}

static void async_count(struct rpcrdma_call *call, int status, void *arg)
{
	struct async_ctx *a = arg;

	if (status == 0)
		atomic_fetch_add(&a->ok, 1);
	rpcrdma_call_destroy(call);
	atomic_fetch_add(&a->done, 1);
}

static void server_restart_under_load_body(void);

TEST(rpc_tcp_server_restart_under_load)
{
	g_scheme = "tcp";
	server_restart_under_load_body();
}

TEST(rpc_rdma_server_restart_under_load)
{
	g_scheme = "rdma";
	server_restart_under_load_body();
	g_scheme = "tcp";
}

static void server_restart_under_load_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_server_opts o = {.threads = 2};
	struct load_arg la[3];
	pthread_t th[3];
	struct async_ctx a;
	atomic_int served_by_new;
	int rc = -1;

	atomic_init(&served_by_new, 0);
	atomic_store(&load_stop, 0);
	atomic_init(&a.done, 0);
	atomic_init(&a.ok, 0);
	for (int i = 0; i < 3; i++) {
		la[i] = (struct load_arg){.c = c};
		REQUIRE_EQ(pthread_create(&th[i], NULL, load_main, &la[i]), 0);
	}
	/* Asynchronous calls mixed in, then the server goes away and comes
	 * back on the same port: every call completes, retransmitted with its
	 * XID on the new connection. */
	for (int i = 0; i < 32; i++) {
		struct rpcrdma_call *call;

		REQUIRE_EQ(rpcrdma_call_create(c, T_ECHO, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), (uint32_t)i);
		REQUIRE_EQ(rpcrdma_call_start(call, async_count, &a), 0);
	}
	/* traffic flows (an asynchronous call came back) when the server goes */
	for (uint64_t dl_ = rr_test_deadline();
	     atomic_load(&a.done) < 1 &&
	     rr_test_wait_left(dl_, "a.done < 1 to turn false");)
		usleep(5000);
	CHECK(atomic_load(&a.done) >= 1);
	rpcrdma_server_destroy(s);
	s = NULL;
	for (uint64_t dl = rr_test_deadline();
	     rc && rr_test_wait_left(dl, "the port free for the new server");) {
		rc = rpcrdma_server_create(url, &o, &s);
		if (rc)
			usleep(20000);
	}
	REQUIRE_EQ(rc, 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, h_echo, &served_by_new), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	atomic_store(&load_stop, 1);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(la[i].fails, 0);
		CHECK(la[i].done >= 50);
	}
	if (atomic_load(&served_by_new) < 150)
		fprintf(stderr, "  served_by_new %d, done %d %d %d\n", atomic_load(&served_by_new), la[0].done, la[1].done, la[2].done);
	CHECK(atomic_load(&served_by_new) >= 150);
	for (uint64_t dl_ = rr_test_deadline();
	     atomic_load(&a.done) < 32 &&
	     rr_test_wait_left(dl_, "a.done < 32 to turn false");)
		usleep(10000);
	CHECK_EQ(atomic_load(&a.done), 32);
	CHECK_EQ(atomic_load(&a.ok), 32);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

TEST(rpc_tcp_server_failing_allocator)
{
	const struct rpcrdma_env *def = rpcrdma_env_default();
	struct rpcrdma_env env = *def;
	unsigned ok_runs = 0;

	env.alloc = fa_alloc;
	env.free = fa_free;
	for (unsigned long i = 1; i <= 14; i++) {
		struct rpcrdma_server_opts so = {.env = &env, .threads = 2};
		struct rpcrdma_client_opts co = {.timeout_ms = 300, .no_reconnect = true};
		struct rpcrdma_server *s = NULL;
		struct rpcrdma_client *c = NULL;
		char url[64];
		int rc;

		rr_test_env_init(&fa_te, i);
		fa_te.fail_at = i;
		rc = rpcrdma_server_create("tcp://127.0.0.1:0", &so, &s);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			goto check;
		}
		rc = rpcrdma_server_register(s, PROG, 1, T_BULK, h_bulk, NULL);
		if (!rc)
			rc = rpcrdma_server_start(s);
		if (rc) {
			CHECK_EQ(rc, -ENOMEM);
			goto out;
		}
		snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(s));
		if (rpcrdma_client_create(url, PROG, 1, &co, &c) == 0) {
			for (int k = 0; k < 2; k++) {
				struct rpcrdma_call *call;
				uint8_t data[600];

				fill(data, sizeof(data), 5);
				REQUIRE_EQ(rpcrdma_call_create(c, T_BULK, &call), 0);
				rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 5);
				rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), data, sizeof(data));
				rc = rpcrdma_call_run(call);
				/* A failed server allocation drops the request
				 * or the connection, or becomes SYSTEM_ERR. */
				CHECK(rc == 0 || rc == -ETIMEDOUT || rc == -ECONNRESET ||
				      rc == -ENOTCONN || rc == -EREMOTEIO);
				if (rc == 0)
					ok_runs++;
				if (getenv("RR_VERBOSE"))
					printf("  server fail_at %lu call %d: %d\n", i, k, rc);
				rpcrdma_call_destroy(call);
			}
			rpcrdma_client_destroy(c);
		}
out:
		rpcrdma_server_destroy(s);
check:
		pthread_mutex_lock(&fa_lock);
		CHECK_EQ(fa_te.live, 0);
		pthread_mutex_unlock(&fa_lock);
	}
	CHECK(ok_runs > 0);
}

/* A completion callback may destroy its call (rpcrdma_call_done_fn), also
 * when the completion is a timeout, a cancel or the client's destroy: the
 * transport may complete the call inside its abort, on the aborting thread,
 * which holds a reference on the call until abort returns. That thread must
 * not wait for its own reference (it did: the timer thread, a canceller and
 * rpcrdma_client_destroy hung). */
struct selfdestroy {
	atomic_int fired;
	atomic_int status;
};

static void cb_destroy_self(struct rpcrdma_call *call, int status, void *arg)
{
	struct selfdestroy *d = arg;

	rpcrdma_call_destroy(call);
	atomic_store(&d->status, status);
	atomic_fetch_add(&d->fired, 1);
}

static int wait_fired(struct selfdestroy *d, int n)
{
	for (uint64_t dl_ = rr_test_deadline();
	     atomic_load(&d->fired) < n &&
	     rr_test_wait_left(dl_, "d->fired < n to turn false");)
		usleep(5000);
	return atomic_load(&d->fired);
}

static void selfdestroy_body(void)
{
	char url[64];
	struct rpcrdma_server *s = start_server(2, 0, url, sizeof(url));
	struct rpcrdma_client *c = connect_client(url, PROG, 1);
	struct rpcrdma_call *call;
	struct selfdestroy d;

	atomic_init(&d.fired, 0);
	atomic_init(&d.status, 0);
	/* timeout: the timer thread aborts */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	rpcrdma_call_set_timeout(call, 100);
	REQUIRE_EQ(rpcrdma_call_start(call, cb_destroy_self, &d), 0);
	CHECK_EQ(wait_fired(&d, 1), 1);
	CHECK_EQ(atomic_load(&d.status), -ETIMEDOUT);
	/* the timer thread is still alive: a second timeout fires too */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	rpcrdma_call_set_timeout(call, 100);
	REQUIRE_EQ(rpcrdma_call_start(call, cb_destroy_self, &d), 0);
	CHECK_EQ(wait_fired(&d, 2), 2);
	CHECK_EQ(atomic_load(&d.status), -ETIMEDOUT);
	/* cancel from this thread (the call is gone once the callback ran) */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, cb_destroy_self, &d), 0);
	rpcrdma_call_cancel(call);
	CHECK_EQ(wait_fired(&d, 3), 3);
	CHECK_EQ(atomic_load(&d.status), -ECANCELED);
	CHECK_EQ(echo(c, 5, 1), 0);
	/* client destroy with such a call pending */
	REQUIRE_EQ(rpcrdma_call_create(c, T_HOLD, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, cb_destroy_self, &d), 0);
	rpcrdma_client_destroy(c);
	CHECK_EQ(atomic_load(&d.fired), 4);
	CHECK_EQ(atomic_load(&d.status), -ECANCELED);
	/* The server finishes every request it received before it shuts down,
	 * held ones included: release all four, the last of which may still be
	 * on its way to the handler (it hung here when released too early). */
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "four requests held");) {
		unsigned n;

		pthread_mutex_lock(&hold_lock);
		n = nheld;
		pthread_mutex_unlock(&hold_lock);
		if (n >= 4)
			break;
		usleep(10000);
	}
	release_held(RPCRDMA_SVC_DROP);
	rpcrdma_server_destroy(s);
}

TEST(rpc_tcp_callback_destroys_call_on_abort)
{
	g_scheme = "tcp";
	selfdestroy_body();
}

TEST(rpc_rdma_callback_destroys_call_on_abort)
{
	g_scheme = "rdma";
	selfdestroy_body();
	g_scheme = "tcp";
}
