/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC layer's two roles made from something other than a URL, for the
 * backchannel (RFC 8167; transport/xprt.h section 4): a client whose
 * transport is opened by a function of the caller's (clnt.c; a server's
 * callback client, on a request's connection) and a server likewise
 * (svc.c; a client's callback server, on that client's connections), and
 * the two hooks that reach the transports' backchannel ops. backchannel.c
 * joins them into the public API (rpcrdma_server_callback,
 * rpcrdma_client_callbacks), so that clnt.c and svc.c never call each
 * other. */
#ifndef RR_RPC_BC_H
#define RR_RPC_BC_H

#include "rpcrdma/rpc.h"
#include "transport/xprt.h"

/* Opens the transport of a client being created: *@ops and *@x, or a
 * negative errno. @p is borrowed for the call. */
typedef int (*rr_rpc_client_open_fn)(void *arg, const struct rr_xprt_client_params *p,
				     const struct rr_xprt_client_ops **ops,
				     struct rr_xprt_client **x);
/* rpcrdma_client_create with the transport opened by @open(@arg, ...)
 * instead of from a URL. */
int rr_rpc_client_create_with(uint32_t prog, uint32_t vers,
			      const struct rpcrdma_client_opts *opts, rr_rpc_client_open_fn open,
			      void *arg, struct rpcrdma_client **out);
/* The client transport's bc_serve op: -EOPNOTSUPP without one. */
int rr_rpc_client_bc_serve(struct rpcrdma_client *c, const struct rr_xprt_server_params *p,
			   const struct rr_xprt_server_ops **ops, struct rr_xprt_server **xs);

/* Opens the transport of a server being created. */
typedef int (*rr_svc_open_fn)(void *arg, const struct rr_xprt_server_params *p,
			      const struct rr_xprt_server_ops **ops, struct rr_xprt_server **xs);
/* rpcrdma_server_create with the transport opened by @open(@arg, ...);
 * @default_threads when opts->threads is 0. */
int rr_svc_create_with(const struct rpcrdma_server_opts *opts, unsigned default_threads,
		       rr_svc_open_fn open, void *arg, struct rpcrdma_server **out);
/* The server transport's bc_client op for @r's connection: -EOPNOTSUPP
 * without one, -EINVAL without a request. */
int rr_svc_req_bc_client(struct rpcrdma_req *r, const struct rr_xprt_client_params *p,
			 const struct rr_xprt_client_ops **ops, struct rr_xprt_client **x);

#endif
