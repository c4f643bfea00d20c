/* SPDX-License-Identifier: BSD-2-Clause */
/* Benchmark of the RPC-over-RDMA v1 transport (RFC 8166) through the public
 * RPC API, over the software iWARP provider, against the TCP transport on
 * the same loopback as a reference: (a) a small echo call (latency, sync),
 * (b) a 1 MiB DDP-eligible argument echoed back into a caller sink (Read
 * chunk + Write chunk over RDMA; plain record-marked bytes over TCP). Prints
 * microseconds per call, MB/s, and the RDMA/TCP ratio; timing is never
 * asserted. Usage: bench_xprt [small_iters] [bulk_iters] */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpcrdma/rpc.h"

#define PROG 0x20000299u

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), v + 1);
	return RPCRDMA_SVC_OK;
}

static int h_bulk(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), p, len);
	return RPCRDMA_SVC_OK;
}

static int run(const char *scheme, long small, long bulk, double *us, double *mbs)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 30000, .connect_timeout_ms = 5000};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c = NULL;
	const uint32_t blen = 1u << 20;
	uint8_t *src = malloc(blen), *dst = malloc(blen);
	char url[64];
	uint64_t t0;
	int rc;

	if (!src || !dst)
		return -ENOMEM;
	memset(src, 0x5a, blen);
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, &s);
	if (rc)
		goto out;
	rpcrdma_server_register(s, PROG, 1, 1, h_echo, NULL);
	rpcrdma_server_register(s, PROG, 1, 2, h_bulk, NULL);
	rc = rpcrdma_server_start(s);
	if (rc)
		goto out;
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	rc = rpcrdma_client_create(url, PROG, 1, &co, &c);
	if (rc)
		goto out;
	t0 = now_ns();
	for (long i = 0; i < small && !rc; i++) {
		struct rpcrdma_call *call;

		rc = rpcrdma_call_create(c, 1, &call);
		if (rc)
			break;
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), (uint32_t)i);
		if (getenv("BENCH_HINT"))
			rpcrdma_call_set_reply_hint(call, 64);
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	*us = (double)(now_ns() - t0) / 1000.0 / (double)small;
	t0 = now_ns();
	for (long i = 0; i < bulk && !rc; i++) {
		struct rpcrdma_ddp_sink sk = {dst, blen};
		struct rpcrdma_call *call;

		rc = rpcrdma_call_create(c, 2, &call);
		if (rc)
			break;
		rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, blen);
		rpcrdma_call_set_sinks(call, &sk, 1);
		rpcrdma_call_set_reply_hint(call, 64);
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	*mbs = 2.0 * (double)blen * (double)bulk / ((double)(now_ns() - t0) / 1e9) / 1e6;
out:
	if (c)
		rpcrdma_client_destroy(c);
	if (s)
		rpcrdma_server_destroy(s);
	free(src);
	free(dst);
	return rc;
}

int main(int argc, char **argv)
{
	long small = argc > 1 ? atol(argv[1]) : 2000;
	long bulk = argc > 2 ? atol(argv[2]) : 50;
	double rus = 0, rmb = 0, tus = 0, tmb = 0;
	int rc1 = run("rdma", small, bulk, &rus, &rmb);
	int rc2 = run("tcp", small, bulk, &tus, &tmb);

	if (rc1 || rc2) {
		fprintf(stderr, "bench_xprt: rdma %d tcp %d\n", rc1, rc2);
		return 1;
	}
	printf("small echo: rdma %.1f us/call, tcp %.1f us/call, ratio %.2f\n", rus, tus,
	       rus / tus);
	printf("1 MiB DDP echo: rdma %.0f MB/s, tcp %.0f MB/s, ratio %.2f\n", rmb, tmb, rmb / tmb);
	return 0;
}
