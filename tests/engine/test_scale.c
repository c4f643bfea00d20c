/* SPDX-License-Identifier: BSD-2-Clause */
/* The execution model of issue 16 through the public API, on both
 * transports (tcp:// and rdma:// over the soft provider): a process's
 * threads do not grow with its connections, on the client's side or the
 * server's (a server in its own process: rpcrdma-server); a client
 * connection costs at most two file descriptors; many clients live in one
 * process and all their calls complete; each connection stays on one
 * progress thread (its completions, and on the server its handlers, run
 * there), connections being spread over the threads; and with 0 progress
 * threads the application drives everything itself (rpcrdma_progress and
 * the library's own blocking calls), no thread started. */
#include "test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rogue/rogue_fx.h"
#include "rpcrdma/engine.h"
#include "rpcrdma/rpc.h"
#include "xprt_harness.h"

#define FS_PROG 0x2f5a0001u   /* rpcrdma-server's file service */
#define PROG 0x2000029au
#define T_ECHO 1u

static long self_count(const char *what)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	long n = 0;

	snprintf(path, sizeof(path), "/proc/self/%s", what);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static long child_threads(pid_t pid)
{
	char path[64], line[128];
	FILE *f;
	long n = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			n = atol(line + 8);
	if (f)
		fclose(f);
	return n;
}

static void null_call(struct rpcrdma_client *c)
{
	struct rpcrdma_call *call;

	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), 0);
	rpcrdma_call_destroy(call);
}

/* @n clients of rpcrdma-server (@transport) in this process: threads of
 * both processes are the same with 1 and with @n connections, and each
 * client connection costs at most @max_fds file descriptors here. */
static void threads_fixed(const char *transport, unsigned max_fds)
{
	enum { N = 48 };
	struct rr_fx_child srv;
	struct rpcrdma_client *c[N] = {0};
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 20000};
	long t1, t2, f1, f2, s1, s2;
	char url[64];

	REQUIRE_EQ(rr_fx_child_prepare(&srv), 0);
	srv.transport = transport;
	REQUIRE_EQ(rr_fx_child_run(&srv, 0, 2), 0);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", transport, srv.port);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, 1, &o, &c[0]), 0);
	null_call(c[0]);
	t1 = self_count("task");
	f1 = self_count("fd");
	s1 = child_threads(srv.pid);
	for (int i = 1; i < N; i++) {
		REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, 1, &o, &c[i]), 0);
		null_call(c[i]);
	}
	t2 = self_count("task");
	f2 = self_count("fd");
	s2 = child_threads(srv.pid);
	printf("  %s: client threads %ld -> %ld, fds %ld -> %ld (%.2f per connection); "
	       "server threads %ld -> %ld\n", transport, t1, t2, f1, f2,
	       (double)(f2 - f1) / (N - 1), s1, s2);
	CHECK(t1 > 0);
	CHECK_EQ(t2, t1);
	CHECK(s1 > 0);
	CHECK_EQ(s2, s1);
	CHECK(f2 - f1 <= (long)max_fds * (N - 1));
	for (int i = 0; i < N; i++)
		null_call(c[i]);
	for (int i = 0; i < N; i++)
		rpcrdma_client_destroy(c[i]);
	CHECK_EQ(rr_fx_child_stop(&srv, 20000), 0);
}

TEST(scale_threads_fixed_tcp)
{
	threads_fixed("tcp", 1);
}

TEST(scale_threads_fixed_rdma)
{
	if (!rr_th_soft_ok())
		return;
	threads_fixed("rdma", 2);
}

/* ---- many clients in one process, each connection on its own thread ---- */

#define CONNS 24
#define CALLS 12

struct tally {
	pthread_mutex_t lock;
	pthread_t srv_tid[CONNS];     /* the thread of each connection's handlers */
	bool srv_set[CONNS];
	bool srv_mixed;
	pthread_t cli_tid[CONNS];     /* of each client's completions */
	bool cli_set[CONNS];
	bool cli_mixed;
	atomic_int done, good;
};

static struct tally tl = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Forgets every thread noted and the counts. */
static void tally_reset(void)
{
	pthread_mutex_lock(&tl.lock);
	memset(tl.srv_set, 0, sizeof(tl.srv_set));
	memset(tl.cli_set, 0, sizeof(tl.cli_set));
	tl.srv_mixed = tl.cli_mixed = false;
	pthread_mutex_unlock(&tl.lock);
	atomic_store(&tl.done, 0);
	atomic_store(&tl.good, 0);
}

static void note(pthread_t *tid, bool *set, bool *mixed, unsigned k)
{
	pthread_mutex_lock(&tl.lock);
	if (!set[k]) {
		tid[k] = pthread_self();
		set[k] = true;
	} else if (!pthread_equal(tid[k], pthread_self())) {
		*mixed = true;
	}
	pthread_mutex_unlock(&tl.lock);
}

/* ECHO(conn index, v) -> v + 1: notes the handler's thread for @conn. */
static int h_note(struct rpcrdma_req *r, void *ctx)
{
	uint32_t k = 0, v = 0;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &k) ||
	    rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v) || k >= CONNS)
		return RPCRDMA_SVC_GARBAGE_ARGS;
	note(tl.srv_tid, tl.srv_set, &tl.srv_mixed, k);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v + 1);
	return RPCRDMA_SVC_OK;
}

static void on_done(struct rpcrdma_call *call, int status, void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	uint32_t r = 0;

	if (status == 0 && rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r) == 0 && r == k + 1)
		atomic_fetch_add(&tl.good, 1);
	note(tl.cli_tid, tl.cli_set, &tl.cli_mixed, k);
	atomic_fetch_add(&tl.done, 1);
}

static unsigned distinct(const pthread_t *t, unsigned n)
{
	unsigned d = 0;

	for (unsigned i = 0; i < n; i++) {
		bool seen = false;

		for (unsigned j = 0; j < i && !seen; j++)
			seen = pthread_equal(t[i], t[j]);
		d += !seen;
	}
	return d;
}

static void stays(const char *scheme)
{
	struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE,
					 .max_conns_per_host = 1024};
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 20000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c[CONNS];
	struct rpcrdma_call *calls[CONNS * CALLS];
	unsigned nthreads = rpcrdma_progress_threads();
	char url[64];

	tally_reset();
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	REQUIRE_EQ(rpcrdma_server_create(url, &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, h_note, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	for (unsigned k = 0; k < CONNS; k++)
		REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c[k]), 0);
	/* every connection busy at once: asynchronous calls on all of them */
	for (unsigned i = 0; i < CALLS; i++)
		for (unsigned k = 0; k < CONNS; k++) {
			struct rpcrdma_call **call = &calls[i * CONNS + k];

			REQUIRE_EQ(rpcrdma_call_create(c[k], T_ECHO, call), 0);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(*call), k);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(*call), k);
			REQUIRE_EQ(rpcrdma_call_start(*call, on_done, (void *)(uintptr_t)k), 0);
		}
	for (unsigned i = 0; i < CONNS * CALLS; i++)
		CHECK_EQ(rpcrdma_call_wait(calls[i], 20000), 0);
	CHECK_EQ(atomic_load(&tl.done), CONNS * CALLS);
	CHECK_EQ(atomic_load(&tl.good), CONNS * CALLS);
	for (unsigned i = 0; i < CONNS * CALLS; i++)
		rpcrdma_call_destroy(calls[i]);
	/* a connection's handlers, and a client's completions, on one thread
	 * each; connections spread over every progress thread */
	CHECK(!tl.srv_mixed);
	CHECK(!tl.cli_mixed);
	for (unsigned k = 0; k < CONNS; k++) {
		CHECK(tl.srv_set[k]);
		CHECK(tl.cli_set[k]);
		CHECK(!pthread_equal(tl.srv_tid[k], pthread_self()));
		CHECK(!pthread_equal(tl.cli_tid[k], pthread_self()));
	}
	printf("  %s: %u connections, handlers on %u threads, completions on %u threads "
	       "(%u progress threads)\n", scheme, CONNS, distinct(tl.srv_tid, CONNS),
	       distinct(tl.cli_tid, CONNS), nthreads);
	CHECK(distinct(tl.srv_tid, CONNS) <= nthreads);
	CHECK(distinct(tl.cli_tid, CONNS) <= nthreads);
	CHECK_EQ(distinct(tl.srv_tid, CONNS), RR_MIN(nthreads, CONNS));
	CHECK_EQ(distinct(tl.cli_tid, CONNS), RR_MIN(nthreads, CONNS));
	for (unsigned k = 0; k < CONNS; k++)
		rpcrdma_client_destroy(c[k]);
	rpcrdma_server_destroy(s);
}

TEST(scale_connection_stays_on_its_thread_tcp)
{
	stays("tcp");
}

TEST(scale_connection_stays_on_its_thread_rdma)
{
	if (!rr_th_soft_ok())
		return;
	stays("rdma");
}

/* 200 clients of each transport in this process against one server each
 * (also here): all connected at once, an asynchronous call on every one
 * at the same time, every result right. */
TEST(scale_many_clients_one_process)
{
	enum { N = 200 };
	static struct rpcrdma_client *c[N];
	static struct rpcrdma_call *calls[N];
	struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE, .max_conns_per_host = 1024};
	struct rpcrdma_client_opts o = {.timeout_ms = 30000, .connect_timeout_ms = 30000};
	const char *schemes[2] = {"tcp", "rdma"};

	for (int t = 0; t < 2; t++) {
		struct rpcrdma_server *s;
		char url[64];

		if (t == 1 && !rpcrdma_provider_available("soft"))
			break;
		atomic_store(&tl.done, 0);
		atomic_store(&tl.good, 0);
		snprintf(url, sizeof(url), "%s://127.0.0.1:0", schemes[t]);
		REQUIRE_EQ(rpcrdma_server_create(url, &so, &s), 0);
		REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, T_ECHO, h_note, NULL), 0);
		REQUIRE_EQ(rpcrdma_server_start(s), 0);
		snprintf(url, sizeof(url), "%s://127.0.0.1:%d", schemes[t], rpcrdma_server_port(s));
		for (unsigned k = 0; k < N; k++)
			REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c[k]), 0);
		for (unsigned k = 0; k < N; k++) {
			REQUIRE_EQ(rpcrdma_call_create(c[k], T_ECHO, &calls[k]), 0);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(calls[k]), k % CONNS);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(calls[k]), k % CONNS);
			REQUIRE_EQ(rpcrdma_call_start(calls[k], on_done,
						      (void *)(uintptr_t)(k % CONNS)), 0);
		}
		for (unsigned k = 0; k < N; k++) {
			CHECK_EQ(rpcrdma_call_wait(calls[k], 30000), 0);
			rpcrdma_call_destroy(calls[k]);
		}
		CHECK_EQ(atomic_load(&tl.good), N);
		for (unsigned k = 0; k < N; k++)
			rpcrdma_client_destroy(c[k]);
		rpcrdma_server_destroy(s);
	}
}

/* ---- 0 progress threads: the application drives ---- */

static int app_one(const char *scheme)
{
	struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE};
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 20000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_call *call, *a[8];
	char url[64];
	uint32_t r = 0;
	int rc;

	/* the threads noted by earlier tests of this process (rr-tests runs
	 * every test in one process when no name is given, as in the lab's
	 * VM; this test's child inherits them) are not this test's */
	tally_reset();
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	if (rpcrdma_server_create(url, &so, &s) ||
	    rpcrdma_server_register(s, PROG, 1, T_ECHO, h_note, NULL) || rpcrdma_server_start(s))
		return 1;
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	/* blocking calls drive progress themselves (connect, call) */
	if (rpcrdma_client_create(url, PROG, 1, &o, &c))
		return 2;
	for (int i = 0; i < 20; i++) {
		if (rpcrdma_call_create(c, T_ECHO, &call))
			return 3;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 1);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), (uint32_t)i);
		rc = rpcrdma_call_run(call);
		if (rc || rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r) || r != (uint32_t)i + 1)
			return 4;
		rpcrdma_call_destroy(call);
	}
	/* asynchronous calls complete while the application calls
	 * rpcrdma_progress, on its thread */
	for (int i = 0; i < 8; i++) {
		if (rpcrdma_call_create(c, T_ECHO, &a[i]))
			return 5;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(a[i]), 2);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(a[i]), 2);
		if (rpcrdma_call_start(a[i], on_done, (void *)(uintptr_t)2))
			return 6;
	}
	for (int t = 0; t < 20000 && atomic_load(&tl.done) < 8; t++)
		if (rpcrdma_progress(1) < 0)
			return 7;
	if (atomic_load(&tl.good) != 8 || !pthread_equal(tl.cli_tid[2], pthread_self()) ||
	    !pthread_equal(tl.srv_tid[2], pthread_self()))
		return 8;
	for (int i = 0; i < 8; i++)
		rpcrdma_call_destroy(a[i]);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	return 0;
}

static int app_driven(void)
{
	int rc;

	if (rpcrdma_progress_threads_set(0) || rpcrdma_progress_threads() != 0)
		return 10;
	rc = app_one("tcp");
	if (rc)
		return 20 + rc;
	if (rpcrdma_provider_available("soft")) {
		rc = app_one("rdma");
		if (rc)
			return 40 + rc;
	}
	/* no progress thread was ever started */
	return rr_th_threads_named("rr-progress-*") == 0 ? 0 : 60;
}

TEST(scale_app_driven_progress)
{
	CHECK_EQ(rr_th_in_child(app_driven), 0);
}
