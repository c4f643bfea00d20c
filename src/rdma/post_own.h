/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The library's own entry to post Send-queue work requests (issue 16 part
 * CE): the rdma:// transport (src/transport/rdma/conn.c, push.c) builds
 * every work request it posts itself, in a fixed set of shapes (a Send or
 * Send With Invalidate of one SGE, RDMA Writes of one SGE chained before
 * it, an RDMA Read of one SGE, a Local Invalidate, a memory window bind, a
 * zero-length RDMA Write probe, a push's Write and Commit), so the shape
 * checks of the public rpcrdma_post_send (rr_send_wr_check: SGE count
 * against the QP's granted max_send_sge, which is at least the 1 the
 * transport asks for; known flags and opcode; a Commit's regions; a bind's
 * objects) hold by construction and are not made again per call here. The
 * public entry keeps every check (a user's work request is not ours).
 * That they hold is proven, not assumed: test
 * tp_send_wrs_pass_the_public_checks builds work requests with the
 * transport's own builders in every shape and runs the public checks on
 * each, and in a build without NDEBUG (Debug, the sanitizer builds) every
 * chain posted here goes through rr_send_wr_check first and aborts on a
 * refusal, so every test run there checks every work request the
 * transport posts. Same provider op, same result as rpcrdma_post_send on
 * a chain that passes its checks: 0 or a negative errno (-EOPNOTSUPP: the
 * provider has no post_send). */
#ifndef RR_RDMA_POST_OWN_H
#define RR_RDMA_POST_OWN_H

#include <stdlib.h>

#include "rdma/provider.h"

/* The public entry's shape checks of one work request @wr on @qp (what
 * rpcrdma_post_send makes on every work request of a chain): 0 or
 * -EINVAL. */
int rr_send_wr_check(const struct rr_qp *qp, const struct rpcrdma_send_wr *wr);

/* Posts the chain @wr, built by the library itself (see above), on @pqp.
 * Returns 0 or a negative errno; on failure nothing after the work
 * request the provider refused was posted (as rpcrdma_post_send).
 * rr_post_send_own_ops: the same with @ops, the caller's copy of the
 * provider ops of @pqp's context (it holds the context, a line every
 * call reads anyway; the walk qp -> pd -> ctx read the QP's own PD, a
 * cold line per call with many connections: issue 16 part CT); a build
 * without NDEBUG aborts if @ops are not @pqp's. */
static inline int rr_post_send_own_ops(const struct rr_provider_ops *ops, struct rpcrdma_qp *pqp,
					struct rpcrdma_send_wr *wr)
{
	struct rr_qp *qp = (struct rr_qp *)(void *)pqp;
	struct rpcrdma_send_wr *bad = NULL;

#ifndef NDEBUG
	if (ops != qp->pd->ctx->ops)
		abort();   /* not the ops of @pqp's context */
	for (const struct rpcrdma_send_wr *w = wr; w; w = w->next)
		if (rr_send_wr_check(qp, w))
			abort();   /* a shape the public entry refuses */
#endif
	if (RR_UNLIKELY(!ops->post_send))
		return -EOPNOTSUPP;
	return ops->post_send(qp, wr, &bad);
}

/* rr_post_send_own_ops of @wr, a lone Send or Send With Invalidate of one
 * SGE, not inline (the transport's lone Send: every inline Call, a Reply
 * without Writes; tp_send_wr_fill builds it), through the provider's post_send1 op when it has one
 * (provider.h: the same result without the tests of the shape), else
 * post_send. A build without NDEBUG aborts on any other shape, after the
 * public checks (as rr_post_send_own_ops). */
static inline int rr_post_send1_own_ops(const struct rr_provider_ops *ops, struct rpcrdma_qp *pqp,
					struct rpcrdma_send_wr *wr)
{
	struct rr_qp *qp = (struct rr_qp *)(void *)pqp;

#ifndef NDEBUG
	if (ops != qp->pd->ctx->ops || rr_send_wr_check(qp, wr))
		abort();   /* not @pqp's ops, or a shape the public entry refuses */
	if (wr->next || wr->num_sge != 1 || (wr->flags & RPCRDMA_SEND_INLINE) ||
	    (wr->opcode != RPCRDMA_WR_SEND && wr->opcode != RPCRDMA_WR_SEND_WITH_INV))
		abort();   /* not a lone Send of one SGE */
#endif
	if (RR_LIKELY(ops->post_send1 != NULL))
		return ops->post_send1(qp, wr);
	return rr_post_send_own_ops(ops, pqp, wr);
}

static inline int rr_post_send_own(struct rpcrdma_qp *pqp, struct rpcrdma_send_wr *wr)
{
	return rr_post_send_own_ops(((struct rr_qp *)(void *)pqp)->pd->ctx->ops, pqp, wr);
}

#endif
