/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal hooks of the RPC server (svc.c) used by the libtirpc glue
 * (tirpc.c): replace a request's reply with an RFC 5531 header-only
 * accepted/denied Reply (section 9), read its decoded Call header, and
 * register a whole (prog, vers) served by an rpcgen-generated service
 * routine. The server calls the glue back only through the function it
 * registered, so svc.c names nothing of tirpc.c. */
#ifndef RR_RPC_SVCINT_H
#define RR_RPC_SVCINT_H

#include "rpc/rpcmsg.h"
#include "rpcrdma/rpc.h"

/* Discards encoded results and sets a header-only Reply; for SUCCESS the
 * results are encoded after it. @low/@high for PROG_MISMATCH. */
void rr_svc_reply_accepted(struct rpcrdma_req *r, uint32_t stat, uint32_t low, uint32_t high);
/* MSG_DENIED: RPC_MISMATCH (2..2) or AUTH_ERROR with @auth_stat. */
void rr_svc_reply_denied(struct rpcrdma_req *r, uint32_t rstat, uint32_t auth_stat);
const struct rr_rpc_call *rr_svc_req_call(const struct rpcrdma_req *r);
/* Runs @fn for @r; returns an enum rpcrdma_svc_stat (OK: the reply in
 * place is sent; DROP: no reply). */
typedef int (*rr_svc_program_fn)(struct rpcrdma_req *r, rpcrdma_svc_dispatch_fn fn);
/* Every procedure of (@prog, @vers) runs @run(r, @fn) (after the server's
 * own checks: RPC version, credential, NULL procedure). Returns 0, -EBUSY
 * once the server started, -EEXIST when a procedure of (@prog, @vers) is
 * registered, -ENOMEM. */
int rr_svc_add_program(struct rpcrdma_server *s, uint32_t prog, uint32_t vers,
		       rr_svc_program_fn run, rpcrdma_svc_dispatch_fn fn);

/* RPCRDMA_SERVER_SEND_TIMEOUT_MS, the test knob of an RDMA server's send
 * timeout (svc.c): @v NULL or empty: *@ms = 0 (the default, 60 s); else
 * decimal milliseconds within these bounds, anything else -EINVAL. */
#define RR_SVC_SEND_TIMEOUT_MIN 100u
#define RR_SVC_SEND_TIMEOUT_MAX 3600000u
int rr_svc_send_timeout_parse(const char *v, uint32_t *ms);

#endif
