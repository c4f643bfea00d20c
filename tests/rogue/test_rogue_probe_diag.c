/* SPDX-License-Identifier: BSD-2-Clause */
/* The rogue suite's failed probe tells what it saw (probe_diag.h): which
 * step failed and when, the probed server's counters, each engine loop's
 * liveness and the process's threads. A probe timeout seen once in a lab
 * VM must be explainable from its log (docs/interop.md). */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine.h"
#include "rpcrdma/rpc.h"
#include "probe_diag.h"
#include "rogue_fx.h"
#include "test.h"
#include "xprt_harness.h"

/* Runs @fn with the process's stderr going to a temporary file; the file's
 * text (malloc'ed, NUL-terminated) or NULL. */
static char *stderr_of(void (*fn)(void *), void *arg)
{
	char path[] = "/tmp/rr-probe-diag-XXXXXX";
	int fd = mkstemp(path), saved;
	char *text = NULL;
	off_t len;

	if (fd < 0)
		return NULL;
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	if (saved < 0 || dup2(fd, 2) < 0) {
		close(fd);
		return NULL;
	}
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	len = lseek(fd, 0, SEEK_END);
	if (len >= 0 && (text = calloc(1, (size_t)len + 1)) != NULL &&
	    pread(fd, text, (size_t)len, 0) != len) {
		free(text);
		text = NULL;
	}
	close(fd);
	return text;
}

struct probe_run {
	int port;
	int rc;
};

static void run_probe(void *arg)
{
	struct probe_run *p = arg;

	p->rc = rr_fx_probe(p->port, 2000);
}

/* A probe of a port where nothing listens: connect fails, and the dump
 * follows (no such server in this process, the loops, the threads). */
TEST(rogue_probe_failure_dumps_state)
{
	struct rr_fx_srv f;
	struct probe_run p;
	char *out, want[64];

	if (!rr_th_soft_ok())
		return;
	/* a port that was ours a moment ago: nobody listens on it now */
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);
	p.port = f.port;
	rr_fx_srv_stop(&f);
	out = stderr_of(run_probe, &p);
	REQUIRE(out);
	fputs(out, stdout);   /* what a failed probe prints */
	CHECK(p.rc != 0);
	CHECK(strstr(out, "probe: connect failed after") != NULL);
	snprintf(want, sizeof(want), "diag: server :%d: not a server of this process", p.port);
	CHECK(strstr(out, want) != NULL);
	CHECK(strstr(out, "diag: malloc_trim: ") != NULL);
	CHECK(strstr(out, "diag: loop 0: ") != NULL);   /* (its answer: load-dependent) */
	CHECK(strstr(out, "diag: thread ") != NULL);
	CHECK(strstr(out, "rr-progress") != NULL);
	free(out);
}

/* ---- a loop held busy: the dump says so ---- */

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool started, release;
	struct rr_loop_task t;
} g_hold = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, {0}};

static void hold_run(struct rr_loop_task *t)
{
	(void)t;
	pthread_mutex_lock(&g_hold.lock);
	g_hold.started = true;
	pthread_cond_broadcast(&g_hold.cond);
	while (!g_hold.release)
		pthread_cond_wait(&g_hold.cond, &g_hold.lock);
	pthread_mutex_unlock(&g_hold.lock);
}

static void run_dump(void *arg)
{
	rr_diag_dump(*(int *)arg, stderr);
}

TEST(rogue_probe_dump_names_a_blocked_loop)
{
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .connect_timeout_ms = 10000};
	struct rpcrdma_client *c = NULL;
	struct rr_fx_srv f;
	long ms[64];
	unsigned n;
	char *out, want[64], url[64];

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rr_fx_srv_start(&f, NULL), 0);   /* the engine runs */
	REQUIRE(rr_engine_nloops() >= 1);
	/* a connection: the transport has CQs to show */
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", f.port);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &c), 0);
	g_hold.started = g_hold.release = false;
	g_hold.t.fn = hold_run;
	rr_loop_post(rr_engine_loop(0), &g_hold.t);
	pthread_mutex_lock(&g_hold.lock);
	while (!g_hold.started)
		pthread_cond_wait(&g_hold.cond, &g_hold.lock);
	pthread_mutex_unlock(&g_hold.lock);
	/* loop 0 runs nothing else now */
	n = rr_diag_loops(200, ms, 64);
	CHECK(n >= 1);
	CHECK_EQ(ms[0], -1);
	out = stderr_of(run_dump, &f.port);
	REQUIRE(out);
	CHECK(strstr(out, "diag: loop 0: no answer within") != NULL);
	snprintf(want, sizeof(want), "diag: server :%d: connections ", f.port);
	CHECK(strstr(out, want) != NULL);
	snprintf(want, sizeof(want), "diag: tcp :%d LISTEN accept queue 0", f.port);
	CHECK(strstr(out, want) != NULL);
	CHECK(strstr(out, "diag: cq soft loop ") != NULL);   /* the server's CQs */
	/* under each CQ its ring, and each QP with the connection using it:
	 * the client's and the server's of that connection */
	CHECK(strstr(out, "diag:   ring pending ") != NULL);
	CHECK(strstr(out, " (client connection, wants the loop ") != NULL);
	CHECK(strstr(out, " (server connection, wants the loop 1") != NULL);
	CHECK(strstr(out, ", receives posted ") != NULL || strstr(out, ", srq posted ") != NULL);
	if (strstr(out, " (server connection, wants the loop 1") == NULL)
		fputs(out, stderr);   /* what it showed instead */
	free(out);
	pthread_mutex_lock(&g_hold.lock);
	g_hold.release = true;
	pthread_cond_broadcast(&g_hold.cond);
	pthread_mutex_unlock(&g_hold.lock);
	/* released: its pending task runs (bounded, not timed) */
	n = rr_diag_loops(30000, ms, 64);
	for (unsigned i = 0; i < n; i++)
		CHECK(ms[i] >= 0);
	rpcrdma_client_destroy(c);
	rr_fx_srv_stop(&f);
}
