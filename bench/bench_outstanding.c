/* SPDX-License-Identifier: BSD-2-Clause */
/* Micro-benchmark of pipelined RPCs on one connection (issue 7 target "32
 * outstanding RPCs give >= 1.8x the throughput of one"): READ of SIZE bytes
 * (result DDP-eligible: a Write chunk over rdma://, RFC 8166 section 3.4.4)
 * from a server with inline handlers (RPCRDMA_SERVER_INLINE, as
 * rpcrdma-bench), with 1 and W calls outstanding, alternated ROUNDS times;
 * prints ops/s per point, the per-round W/1 ratio, the Calls that waited
 * for a credit (the server's grant) and the median ratio.
 * Timing is never asserted. The server runs in a forked child (or alone with
 * "serve", so that it can be profiled: strace -c -f -p PID, perf record).
 * Usage: bench_outstanding [URL-scheme rdma|tcp] [W] [secs] [rounds] [size]
 *        bench_outstanding serve [scheme]        (prints the port, runs)
 *        bench_outstanding client PORT [scheme] [W] [secs] [rounds]
 *        (BENCH_ONLY_W set: the W point only, for CPU-per-call profiles) */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"

#define PROG 0x2f5a0003u
#define MAXSZ (1u << 20)

static uint8_t srcbuf[MAXSZ];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int h_read(struct rpcrdma_req *req, void *ctx)
{
	uint32_t count;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &count))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (count > MAXSZ)
		count = MAXSZ;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(req), srcbuf, count) ?
		       RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static int serve(const char *scheme, int pipefd)
{
	struct rpcrdma_server_opts so = {.threads = 4, .flags = RPCRDMA_SERVER_INLINE};
	struct rpcrdma_server *srv;
	char url[64];
	int port, rc;

	for (unsigned i = 0; i < MAXSZ; i++)
		srcbuf[i] = (uint8_t)(i * 7);
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, &srv);
	if (!rc)
		rc = rpcrdma_server_register(srv, PROG, 1, 1, h_read, NULL);
	if (!rc)
		rc = rpcrdma_server_start(srv);
	port = rc ? rc : rpcrdma_server_port(srv);
	if (pipefd >= 0) {
		if (write(pipefd, &port, sizeof(port)) != sizeof(port))
			return 1;
	} else {
		printf("%d\n", port);
		fflush(stdout);
	}
	if (rc)
		return 1;
	for (;;)
		pause();
}

struct slot;
struct run {
	struct rpcrdma_client *clnt;
	uint32_t size;
	uint64_t end, ops;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned inflight;
	int err;
};

struct slot {
	struct run *r;
	uint8_t *sink;
};

static void done(struct rpcrdma_call *call, int status, void *arg);

static int start(struct slot *s)
{
	struct rpcrdma_call *call;
	struct rpcrdma_ddp_sink sk = {s->sink, s->r->size};
	int rc = rpcrdma_call_create(s->r->clnt, 1, &call);

	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), s->r->size);
	rc = rpcrdma_call_set_sinks(call, &sk, 1);
	if (!rc)
		rc = rpcrdma_call_start(call, done, s);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void done(struct rpcrdma_call *call, int status, void *arg)
{
	struct slot *s = arg;
	struct run *r = s->r;
	int rc = status;

	if (!rc) {
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && (len != r->size || memcmp(p, srcbuf, len)))
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	pthread_mutex_lock(&r->lock);
	if (!rc)
		r->ops++;
	else if (!r->err)
		r->err = rc;
	pthread_mutex_unlock(&r->lock);
	if (!rc && now_ns() < r->end)
		rc = start(s);
	else if (!rc)
		rc = 1;
	if (rc) {
		pthread_mutex_lock(&r->lock);
		if (rc < 0 && !r->err)
			r->err = rc;
		r->inflight--;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->lock);
	}
}

static double point(struct rpcrdma_client *c, unsigned w, double secs, uint32_t size)
{
	struct run r;
	struct slot *sl = calloc(w, sizeof(*sl));
	uint64_t t0;

	memset(&r, 0, sizeof(r));
	r.clnt = c;
	r.size = size;
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cv, NULL);
	t0 = now_ns();
	r.end = t0 + (uint64_t)(secs * 1e9);
	for (unsigned i = 0; i < w; i++) {
		sl[i].r = &r;
		sl[i].sink = malloc(size);
		pthread_mutex_lock(&r.lock);
		r.inflight++;
		pthread_mutex_unlock(&r.lock);
		if (start(&sl[i])) {
			pthread_mutex_lock(&r.lock);
			r.inflight--;
			r.err = -EIO;
			pthread_mutex_unlock(&r.lock);
			break;
		}
	}
	pthread_mutex_lock(&r.lock);
	while (r.inflight)
		pthread_cond_wait(&r.cv, &r.lock);
	pthread_mutex_unlock(&r.lock);
	t0 = now_ns() - t0;
	for (unsigned i = 0; i < w; i++)
		free(sl[i].sink);
	free(sl);
	if (r.err) {
		fprintf(stderr, "window %u: error %d\n", w, r.err);
		return -1;
	}
	return (double)r.ops / ((double)t0 / 1e9);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int client(const char *scheme, int port, unsigned w, double secs, unsigned rounds,
		  uint32_t size)
{
	struct rpcrdma_client *c;
	struct rpcrdma_xprt_stats st;
	double ratio[64];
	char url[64];
	int rc;

	for (unsigned i = 0; i < MAXSZ; i++)
		srcbuf[i] = (uint8_t)(i * 7);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, port);
	rc = rpcrdma_client_create(url, PROG, 1, NULL, &c);
	if (rc) {
		fprintf(stderr, "client: %d\n", rc);
		return 1;
	}
	if (rounds > 64)
		rounds = 64;
	for (unsigned i = 0; i < rounds; i++) {
		double many = point(c, w, secs, size);
		double one = getenv("BENCH_ONLY_W") ? many : point(c, 1, secs, size);

		if (one <= 0 || many <= 0) {
			rpcrdma_client_destroy(c);
			return 1;
		}
		ratio[i] = many / one;
		/* Calls that waited for a credit so far (the server's grants) */
		if (rpcrdma_client_stats(c, &st) != 0)
			st.credits_exhausted = 0;
		printf("round %u: 1: %.0f ops/s  %u: %.0f ops/s  ratio %.2f  (waited for a credit: "
		       "%llu of %llu Calls)\n", i, one, w, many, ratio[i],
		       (unsigned long long)st.credits_exhausted, (unsigned long long)st.sends);
		fflush(stdout);
	}
	qsort(ratio, rounds, sizeof(double), cmp_d);
	printf("%s: %u outstanding READ %u give %.2fx (median of %u) the throughput of 1\n",
	       scheme, w, size, ratio[rounds / 2], rounds);
	rpcrdma_client_destroy(c);
	return 0;
}

int main(int argc, char **argv)
{
	const char *scheme = "rdma";
	unsigned w = 32, rounds = 3;
	double secs = 0.4;
	uint32_t size = 4096;
	int p[2], port, st;
	pid_t pid;

	if (argc > 1 && !strcmp(argv[1], "serve"))
		return serve(argc > 2 ? argv[2] : scheme, -1);
	if (argc > 2 && !strcmp(argv[1], "client"))
		return client(argc > 3 ? argv[3] : scheme, atoi(argv[2]),
			      argc > 4 ? (unsigned)atoi(argv[4]) : w,
			      argc > 5 ? atof(argv[5]) : secs, argc > 6 ? (unsigned)atoi(argv[6]) : 1,
			      size);
	if (argc > 1)
		scheme = argv[1];
	if (argc > 2)
		w = (unsigned)atoi(argv[2]);
	if (argc > 3)
		secs = atof(argv[3]);
	if (argc > 4)
		rounds = (unsigned)atoi(argv[4]);
	if (argc > 5)
		size = (uint32_t)atoi(argv[5]);
	if (!w || !rounds || size > MAXSZ || secs <= 0) {
		fprintf(stderr, "usage: bench_outstanding [rdma|tcp] [W] [secs] [rounds] [size]\n");
		return 2;
	}
	if (pipe(p))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(p[0]);
		_exit(serve(scheme, p[1]));
	}
	close(p[1]);
	if (read(p[0], &port, sizeof(port)) != sizeof(port) || port <= 0) {
		fprintf(stderr, "server failed\n");
		return 1;
	}
	st = client(scheme, port, w, secs, rounds, size);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return st;
}
