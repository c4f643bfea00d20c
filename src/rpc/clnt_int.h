/* SPDX-License-Identifier: BSD-2-Clause */
/* What the tests may ask of the RPC client (clnt.c) beyond its public API:
 * whether a synchronous call runs without the client's lock (the one call
 * registered in the client instead of its pending list, rpcrdma_call_run's
 * fast way). */
#ifndef RR_RPC_CLNT_INT_H
#define RR_RPC_CLNT_INT_H

#include <stdbool.h>

#include "rpcrdma/rpc.h"
#include "transport/xprt.h"

/* True when @xc is the call of @c run without the lock right now (its
 * completion by its own thread will take no lock); @c is the ctx the
 * transport was given (struct rr_xprt_client_params). */
bool rr_rpc_client_runs_unlocked(const void *c, const struct rr_xprt_call *xc);

#endif
