/* SPDX-License-Identifier: BSD-2-Clause */
/* Memory after connection churn (issue 12 finding 7: "after 12,200
 * connections opened and closed the server keeps 1.72 GB RSS"): a server in
 * a forked child process, and N clients that each connect, make one NULL
 * call and close, W of them connected at once (one wave after another).
 * Prints the server's RSS when idle (after a first client came and went),
 * its peak over the waves, and after the last client once the server has
 * no connection left and a settle time passed (the trim of freed memory
 * runs at most once a second). Uses only the public API, so the same file
 * measures an older library (docs/PERFORMANCE.md "Memory after connection
 * churn"). With W = N it measures the cost of idle connections: the
 * server's RSS with all N connected, each idle after its one NULL call,
 * over its idle RSS, per connection ("per idle connection"), and the
 * same for the clients' process (docs/PERFORMANCE.md "Shared receive
 * pool"). The server admits up to W connections from this one address.
 * Timing is never asserted.
 * Usage: bench_churn [N (12200)] [W (50)] [scheme rdma|tcp (rdma)] */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"

#define PROG 0x2f5a0004u

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static int h_nop(struct rpcrdma_req *req, void *ctx)
{
	(void)req;
	(void)ctx;
	return RPCRDMA_SVC_OK;
}

/* The child: serves until its control socket closes; each byte read is
 * answered with {rss_kb, connections (-1: no counters)}. */
static _Noreturn void serve(int ctl, const char *scheme, long w)
{
	struct rpcrdma_server_opts so = {.threads = 2, .max_conns = (unsigned)w + 16,
					 .max_conns_per_host = (unsigned)w + 16};
	struct rpcrdma_server *s = NULL;
	char url[64];
	int port = -1;
	char c;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	if (rpcrdma_server_create(url, &so, &s) == 0 &&
	    rpcrdma_server_register(s, PROG, 1, 1, h_nop, NULL) == 0 &&
	    rpcrdma_server_start(s) == 0)
		port = rpcrdma_server_port(s);
	if (write(ctl, &port, sizeof(port)) != sizeof(port) || port < 0)
		_exit(1);
	while (read(ctl, &c, 1) == 1) {
		struct rpcrdma_xprt_stats st;
		long r[2] = {rss_kb(), -1};

		if (rpcrdma_server_stats(s, &st) == 0)
			r[1] = st.connections;
		if (write(ctl, r, sizeof(r)) != sizeof(r))
			break;
	}
	rpcrdma_server_destroy(s);
	_exit(0);
}

static void ask(int ctl, long *rss, long *conns)
{
	long r[2] = {-1, -1};
	char c = 's';

	if (write(ctl, &c, 1) != 1 || read(ctl, r, sizeof(r)) != sizeof(r)) {
		fprintf(stderr, "bench_churn: the server went away\n");
		exit(1);
	}
	*rss = r[0];
	*conns = r[1];
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Waits (up to 10 s) for the server to have no connection, then @settle ms. */
static void settle(int ctl, unsigned settle_ms, long *rss)
{
	long conns = 1;

	for (int i = 0; i < 1000 && conns != 0; i++) {
		ask(ctl, rss, &conns);
		if (conns < 0)
			break;   /* no counters: the settle time alone */
		if (conns)
			sleep_ms(10);
	}
	sleep_ms(settle_ms);
	ask(ctl, rss, &conns);
}

static int one_client(const char *url, struct rpcrdma_client **out)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 10000};
	struct rpcrdma_call *call;
	int rc = rpcrdma_client_create(url, PROG, 1, &o, out);

	if (rc)
		return rc;
	rc = rpcrdma_call_create(*out, 0, &call);
	if (!rc) {
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	return rc;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 12200, w = argc > 2 ? atol(argv[2]) : 50;
	const char *scheme = argc > 3 ? argv[3] : "rdma";
	struct rpcrdma_client **c;
	long idle, peak = 0, end, rss, conns, done = 0, failed = 0, cl0, cl_peak = 0;
	int sv[2], port, st;
	char url[64];
	pid_t pid;

	if (n < 1 || w < 1 || w > n || (strcmp(scheme, "rdma") && strcmp(scheme, "tcp"))) {
		fprintf(stderr, "usage: bench_churn [N] [W <= N] [rdma|tcp]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		serve(sv[1], scheme, w);
	}
	close(sv[1]);
	if (read(sv[0], &port, sizeof(port)) != sizeof(port) || port < 0) {
		fprintf(stderr, "bench_churn: the server did not start\n");
		return 1;
	}
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, port);
	c = calloc((size_t)w, sizeof(*c));
	if (!c)
		return 1;
	if (one_client(url, &c[0]) != 0) {
		fprintf(stderr, "bench_churn: cannot call %s\n", url);
		return 1;
	}
	rpcrdma_client_destroy(c[0]);
	settle(sv[0], 1500, &idle);
	cl0 = rss_kb();
	while (done < n) {
		long k = n - done < w ? n - done : w;

		for (long i = 0; i < k; i++)
			if (one_client(url, &c[i]) != 0)
				failed++;
		ask(sv[0], &rss, &conns);
		if (rss > peak)
			peak = rss;
		if (rss_kb() - cl0 > cl_peak)
			cl_peak = rss_kb() - cl0;
		for (long i = 0; i < k; i++)
			if (c[i])
				rpcrdma_client_destroy(c[i]);
		memset(c, 0, sizeof(*c) * (size_t)w);
		done += k;
	}
	settle(sv[0], 2500, &end);
	printf("%s: %ld connections (%ld at once, %ld failed): server RSS idle %ld KiB, "
	       "peak %ld KiB, after %ld KiB (%+ld KiB over idle)\n",
	       scheme, n, w, failed, idle, peak, end, end - idle);
	if (n == w)
		printf("%s: per idle connection (%ld at once): server %.1f KiB, clients' process "
		       "%.1f KiB\n", scheme, w, (double)(peak - idle) / (double)w,
		       (double)cl_peak / (double)w);
	close(sv[0]);
	waitpid(pid, &st, 0);
	free(c);
	return 0;
}
