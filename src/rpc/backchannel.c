/* SPDX-License-Identifier: BSD-2-Clause */
/* The backchannel of the public API (include/rpcrdma/rpc.h; RFC 8167 on
 * rdma:// and verbs://, NFSv4.1-style reverse Calls on tcp://): a server's
 * handler gets a client whose Calls go to the client of its request's
 * connection (rpcrdma_server_callback), and a client gets a server that
 * serves the Calls its server sends back on its connection
 * (rpcrdma_client_callbacks). Both are the RPC layer's ordinary client and
 * server (clnt.c, svc.c) on the transports' backchannel ops
 * (transport/xprt.h section 4), so timeouts, cancellation, asynchronous
 * calls, credentials, dispatch and the duplicate request cache work as in
 * the forward direction. The top of the RPC layer: it calls clnt.c and
 * svc.c, which call nothing here. */
#include "rpc/bc.h"

/* A callback server of one thread unless asked: reverse Calls are rare
 * (NFSv4.1: CB_NULL probes, recalls) and each handler may block. */
#define DEFAULT_CB_THREADS 1u

static int open_bc_client(void *arg, const struct rr_xprt_client_params *p,
			  const struct rr_xprt_client_ops **ops, struct rr_xprt_client **x)
{
	return rr_svc_req_bc_client(arg, p, ops, x);
}

RPCRDMA_API int rpcrdma_server_callback(struct rpcrdma_req *req, uint32_t prog, uint32_t vers,
					const struct rpcrdma_client_opts *opts,
					struct rpcrdma_client **out)
{
	if (!req || !out)
		return -EINVAL;
	return rr_rpc_client_create_with(prog, vers, opts, open_bc_client, req, out);
}

static int open_bc_server(void *arg, const struct rr_xprt_server_params *p,
			  const struct rr_xprt_server_ops **ops, struct rr_xprt_server **xs)
{
	return rr_rpc_client_bc_serve(arg, p, ops, xs);
}

RPCRDMA_API int rpcrdma_client_callbacks(struct rpcrdma_client *c,
					 const struct rpcrdma_server_opts *opts,
					 struct rpcrdma_server **out)
{
	if (!c || !out)
		return -EINVAL;
	return rr_svc_create_with(opts, DEFAULT_CB_THREADS, open_bc_server, c, out);
}
