/* SPDX-License-Identifier: BSD-2-Clause */
/* Where inline beats chunks on the software provider (RFC 8797 section 4.2
 * inline thresholds, RFC 8166 section 3.4.2 inline DDP-eligible items): one
 * rdma:// server advertising 262144-byte Send/Receive sizes (in a forked
 * child, inline handlers) and two clients, one advertising 4096 (Linux's
 * size: items above it travel as Read chunks / Write chunks) and one
 * advertising 262144 (every size below travels inline). For each size, WRITE
 * (DDP-eligible argument) and READ (DDP-eligible result into a sink, reply
 * hint 64) alternate between the two clients for @rounds rounds of @iters
 * calls; the table gives the median over rounds of each round's p50 and the
 * inline/chunk ratio (< 1: inline is faster). Chooses RR_TP_INLINE_SOFT
 * (docs/transport.md "Inline thresholds"); timing is never asserted.
 * Usage: bench_inline [iters] [rounds] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "rpcrdma/xdr.h"

#define PROG 0x2000029au
#define P_READ 1u
#define P_WRITE 2u
#define MAXSZ (256u * 1024u)

static uint8_t src[MAXSZ], sink[MAXSZ];

static int h_read(struct rpcrdma_req *req, void *ctx)
{
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &n) || n > MAXSZ)
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(req), src, n) ? RPCRDMA_SVC_SYSTEM_ERR
								     : RPCRDMA_SVC_OK;
}

static int h_write(struct rpcrdma_req *req, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(req), &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(req), len) ? RPCRDMA_SVC_SYSTEM_ERR
								  : RPCRDMA_SVC_OK;
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One call; its latency in microseconds, or a negative value on failure. */
static double one(struct rpcrdma_client *c, unsigned op, uint32_t size)
{
	struct rpcrdma_call *call;
	double t0 = now_us();
	int rc = rpcrdma_call_create(c, op, &call);

	if (rc)
		return -1;
	if (op == P_READ) {
		struct rpcrdma_ddp_sink sk = {sink, size};

		rc = rpcrdma_xdr_put_u32(rpcrdma_call_args(call), size);
		if (!rc)
			rc = rpcrdma_call_set_sinks(call, &sk, 1);
		rpcrdma_call_set_reply_hint(call, 64);
	} else {
		rc = rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, size);
	}
	if (!rc)
		rc = rpcrdma_call_run(call);
	rpcrdma_call_destroy(call);
	return rc ? -1 : now_us() - t0;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = {16384, 32768, 65536, 98304, 131072, 163840, 196608,
					 253952};
	static const uint32_t thr[2] = {4096, 262144};
	int iters = argc > 1 ? atoi(argv[1]) : 300;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	struct rpcrdma_client *cl[2] = {NULL, NULL};
	double *lat, p50[2][16];
	char url[64];
	int pfd[2], port = 0;
	pid_t pid;

	if (iters < 10 || rounds < 1 || rounds > 16 || pipe(pfd))
		return 2;
	pid = fork();
	if (pid == 0) {
		struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE,
						 .inline_size = 262144};
		struct rpcrdma_server *s;

		if (rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s) ||
		    rpcrdma_server_register(s, PROG, 1, P_READ, h_read, NULL) ||
		    rpcrdma_server_register(s, PROG, 1, P_WRITE, h_write, NULL) ||
		    rpcrdma_server_start(s))
			_exit(1);
		port = rpcrdma_server_port(s);
		if (write(pfd[1], &port, sizeof(port)) != (ssize_t)sizeof(port))
			_exit(1);
		pause();
		_exit(0);
	}
	if (pid < 0 || read(pfd[0], &port, sizeof(port)) != (ssize_t)sizeof(port) || port <= 0) {
		fprintf(stderr, "bench_inline: no rdma:// server (soft provider built in?)\n");
		return 1;
	}
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
	for (int t = 0; t < 2; t++) {
		struct rpcrdma_client_opts o = {.inline_size = thr[t]};

		if (rpcrdma_client_create(url, PROG, 1, &o, &cl[t])) {
			fprintf(stderr, "bench_inline: cannot connect to %s\n", url);
			kill(pid, SIGTERM);
			return 1;
		}
	}
	lat = malloc(sizeof(double) * (size_t)iters);
	if (!lat)
		return 1;
	printf("%-6s %8s %14s %14s %14s\n", "op", "bytes", "chunk p50 us", "inline p50 us",
	       "inline/chunk");
	for (unsigned op = P_WRITE; op >= P_READ; op--) {
		for (unsigned si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			for (int r = 0; r < rounds; r++) {
				for (int t = 0; t < 2; t++) {
					for (int i = 0; i < 20; i++)
						(void)one(cl[t], op, sizes[si]);
					for (int i = 0; i < iters; i++) {
						lat[i] = one(cl[t], op, sizes[si]);
						if (lat[i] < 0) {
							fprintf(stderr, "bench_inline: call failed\n");
							return 1;
						}
					}
					qsort(lat, (size_t)iters, sizeof(*lat), cmp_d);
					p50[t][r] = lat[iters / 2];
				}
			}
			qsort(p50[0], (size_t)rounds, sizeof(double), cmp_d);
			qsort(p50[1], (size_t)rounds, sizeof(double), cmp_d);
			printf("%-6s %8u %14.1f %14.1f %14.2f\n", op == P_WRITE ? "WRITE" : "READ",
			       sizes[si], p50[0][rounds / 2], p50[1][rounds / 2],
			       p50[1][rounds / 2] / p50[0][rounds / 2]);
			fflush(stdout);
		}
	}
	free(lat);
	rpcrdma_client_destroy(cl[0]);
	rpcrdma_client_destroy(cl[1]);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return 0;
}
