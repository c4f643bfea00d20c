/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC layer's routing of transport controls (transport/xprt_ctl.h: the
 * public counters, push mode, a request's peer address) to the transport
 * of a client (clnt.c), a server or a delivered request (svc.c): the
 * transport's ctl op, or -EOPNOTSUPP without one. */
#ifndef RR_RPC_CTL_H
#define RR_RPC_CTL_H

#include "rpcrdma/rpc.h"
#include "transport/xprt_ctl.h"

/* Route a control to the transport of a client / server / request. */
int rr_rpc_client_ctl(struct rpcrdma_client *c, unsigned op, void *arg);
int rr_rpc_server_ctl(struct rpcrdma_server *s, unsigned op, void *arg);
int rr_rpc_req_ctl(struct rpcrdma_req *r, unsigned op, void *arg);

#endif
