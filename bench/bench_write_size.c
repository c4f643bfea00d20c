/* SPDX-License-Identifier: BSD-2-Clause */
/* Micro-benchmark of one size of WRITE (a DDP-eligible argument, as
 * rpcrdma-bench's WRITE: a plain record over tcp://, a Read chunk over
 * rdma://) on one connection, one call at a time, against a server with
 * inline handlers (RPCRDMA_SERVER_INLINE) in a separate process, so that
 * the server's system calls and CPU per record can be counted alone:
 *   bench_write_size serve [scheme]           prints its port, then serves
 *   bench_write_size client PORT SIZE N [scheme]   N WRITEs of SIZE bytes
 * e.g. perf stat -e 'syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait'
 * -p SERVER_PID while the client runs, divided by N. The client prints its
 * MB/s (for reading, never asserted). Without arguments, both in one run:
 * a forked server and 2000 WRITEs of 256 KiB over tcp://. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"

#define PROG 0x2f5a0013u
#define PROC_WRITE 1u
#define MAXSZ (64u << 20)

static int h_write(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(r)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len) ? RPCRDMA_SVC_SYSTEM_ERR
								: RPCRDMA_SVC_OK;
}

/* Starts a server on an ephemeral port: its port, or a negative errno. */
static int serve(const char *scheme, struct rpcrdma_server **out)
{
	struct rpcrdma_server_opts so = {.threads = 4, .flags = RPCRDMA_SERVER_INLINE,
					 .max_msg = MAXSZ + 4096};
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, out);
	if (rc)
		return rc;
	rc = rpcrdma_server_register(*out, PROG, 1, PROC_WRITE, h_write, NULL);
	if (!rc)
		rc = rpcrdma_server_start(*out);
	return rc ? rc : rpcrdma_server_port(*out);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* @n WRITEs of @size bytes to @port; prints MB/s. 0 or a negative errno. */
static int client(const char *scheme, int port, uint32_t size, long n)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 30000, .connect_timeout_ms = 5000,
					.max_msg = MAXSZ + 4096};
	struct rpcrdma_client *c = NULL;
	uint8_t *src = malloc(size ? size : 1);
	char url[64];
	double t0;
	int rc;

	if (!src)
		return -ENOMEM;
	memset(src, 0x5a, size);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, port);
	rc = rpcrdma_client_create(url, PROG, 1, &o, &c);
	t0 = now_s();
	for (long i = 0; i < n && !rc; i++) {
		struct rpcrdma_call *call;
		uint32_t got = 0;

		rc = rpcrdma_call_create(c, PROC_WRITE, &call);
		if (rc)
			break;
		rc = rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, size);
		if (!rc)
			rc = rpcrdma_call_run(call);
		if (!rc)
			rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &got);
		if (!rc && got != size)
			rc = -EBADMSG;
		rpcrdma_call_destroy(call);
	}
	if (!rc)
		printf("%s WRITE %u bytes x %ld: %.1f MB/s\n", scheme, size, n,
		       (double)size * (double)n / (now_s() - t0) / 1e6);
	if (c)
		rpcrdma_client_destroy(c);
	free(src);
	return rc;
}

int main(int argc, char **argv)
{
	struct rpcrdma_server *s = NULL;
	int port, rc, p[2];
	pid_t pid;

	if (argc >= 2 && !strcmp(argv[1], "serve")) {
		port = serve(argc > 2 ? argv[2] : "tcp", &s);
		if (port < 0) {
			fprintf(stderr, "bench_write_size: server: %s\n", rpcrdma_strerror(port));
			return 1;
		}
		printf("%d\n", port);
		fflush(stdout);
		for (;;)
			pause();
	}
	if (argc >= 5 && !strcmp(argv[1], "client")) {
		unsigned long size = strtoul(argv[3], NULL, 0);

		if (size > MAXSZ) {
			fprintf(stderr, "bench_write_size: SIZE above %u\n", MAXSZ);
			return 2;
		}
		rc = client(argc > 5 ? argv[5] : "tcp", atoi(argv[2]), (uint32_t)size,
			    atol(argv[4]));
		if (rc)
			fprintf(stderr, "bench_write_size: %s\n", rpcrdma_strerror(rc));
		return rc ? 1 : 0;
	}
	if (argc > 1) {
		fprintf(stderr, "usage: bench_write_size serve [scheme]\n"
				"       bench_write_size client PORT SIZE N [scheme]\n");
		return 2;
	}
	if (pipe(p) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		port = serve("tcp", &s);
		if (write(p[1], &port, sizeof(port)) != (ssize_t)sizeof(port) || port < 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &port, sizeof(port)) != (ssize_t)sizeof(port) || port < 0) {
		fprintf(stderr, "bench_write_size: no server\n");
		return 1;
	}
	rc = client("tcp", port, 256u * 1024, 2000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (rc)
		fprintf(stderr, "bench_write_size: %s\n", rpcrdma_strerror(rc));
	return rc ? 1 : 0;
}
