/* SPDX-License-Identifier: BSD-2-Clause */
/* The README's example: an "add" service and its client in one program, over
 * any librpcrdma transport. Usage: hello [URL] (default rdma://127.0.0.1:0).
 * The server listens on URL (port 0 = any free port), the client calls
 * ADD(40, 2) and prints the sum; exit status 0 only if the sum is 42. */
#include <rpcrdma/rpc.h>
#include <stdio.h>
#include <string.h>

enum { PROG = 0x2f5a00ff, VERS = 1, PROC_ADD = 1 };

/* ---- the server's handler ---- */
static int add(struct rpcrdma_req *req, void *ctx)
{
	uint32_t a, b;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &a) ||
	    rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &b))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(req), a + b);
	return RPCRDMA_SVC_OK;
}

int main(int argc, char **argv)
{
	const char *listen = argc > 1 ? argv[1] : "rdma://127.0.0.1:0";
	struct rpcrdma_server *srv;
	struct rpcrdma_client *clnt;
	struct rpcrdma_call *call;
	char url[128], scheme[16] = "";
	uint32_t sum = 0;
	int rc;

	/* ---- server: three lines ---- */
	if ((rc = rpcrdma_server_create(listen, NULL, &srv)) ||
	    (rc = rpcrdma_server_register(srv, PROG, VERS, PROC_ADD, add, NULL)) ||
	    (rc = rpcrdma_server_start(srv))) {
		fprintf(stderr, "hello: server on %s: %s\n", listen, rpcrdma_strerror(rc));
		return 1;
	}
	sscanf(listen, "%15[a-z]", scheme);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(srv));

	/* ---- client: the ten lines of the README ---- */
	rc = rpcrdma_client_create(url, PROG, VERS, NULL, &clnt);
	if (rc == 0) {
		rc = rpcrdma_call_create(clnt, PROC_ADD, &call);
		if (rc == 0) {
			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 40);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 2);
			rc = rpcrdma_call_run(call);
			if (rc == 0)
				rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &sum);
			rpcrdma_call_destroy(call);
		}
		rpcrdma_client_destroy(clnt);
	}
	rpcrdma_server_destroy(srv);
	if (rc) {
		fprintf(stderr, "hello: call over %s: %s\n", url, rpcrdma_strerror(rc));
		return 1;
	}
	printf("%s: 40 + 2 = %u\n", url, sum);
	return sum == 42 ? 0 : 1;
}
