/* SPDX-License-Identifier: BSD-2-Clause */
/* Dispatch layer of shared receive queues (include/rpcrdma/rdma.h "shared
 * receive queues"): argument checks that do not depend on a provider, the
 * PD's reference count and the SRQ's own (its QPs, counted by rdma.c's
 * rpcrdma_qp_create/destroy, so that a destroy answers -EBUSY while one
 * remains), per-QP receive quotas, and one wrapper per operation that
 * answers -EOPNOTSUPP when the provider leaves the op NULL. As rdma.c, it
 * names no provider. */
#include "rdma/provider.h"

RPCRDMA_API int rpcrdma_srq_create(struct rpcrdma_pd *ppd, const struct rpcrdma_srq_attr *attr,
				   struct rpcrdma_srq **out)
{
	struct rr_pd *pd = RR_BASE(pd, ppd);
	struct rr_srq *srq = NULL;
	int rc;

	if (!pd || !attr || !out)
		return -EINVAL;
	*out = NULL;
	if (attr->max_wr == 0 || attr->srq_limit > attr->max_wr)
		return -EINVAL;
	if (!pd->ctx->ops->create_srq || !pd->ctx->ops->destroy_srq ||
	    !pd->ctx->ops->post_srq_recv)
		return -EOPNOTSUPP;
	rc = pd->ctx->ops->create_srq(pd, attr, &srq);
	if (rc < 0)
		return rc;
	srq->pd = pd;
	srq->user_ctx = attr->user_ctx;
	srq->attr.user_ctx = attr->user_ctx;
	srq->attr.max_wr = RR_MAX(srq->attr.max_wr, attr->max_wr);
	srq->attr.max_sge = RR_MAX(srq->attr.max_sge, RR_MAX(attr->max_sge, 1u));
	atomic_init(&srq->nqps, 0);
	atomic_fetch_add(&pd->nobjs, 1);
	*out = RR_PUB(srq, srq);
	return 0;
}

RPCRDMA_API int rpcrdma_srq_destroy(struct rpcrdma_srq *psrq)
{
	struct rr_srq *srq = RR_BASE(srq, psrq);
	struct rr_pd *pd;
	int rc;

	if (!srq)
		return -EINVAL;
	if (atomic_load(&srq->nqps) != 0)
		return -EBUSY;
	pd = srq->pd;
	rc = pd->ctx->ops->destroy_srq(srq);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&pd->nobjs, 1);
	return 0;
}

RPCRDMA_API int rpcrdma_srq_query(struct rpcrdma_srq *psrq, struct rpcrdma_srq_attr *attr)
{
	struct rr_srq *srq = RR_BASE(srq, psrq);

	if (!srq || !attr)
		return -EINVAL;
	*attr = srq->attr;
	return 0;
}

RPCRDMA_API void *rpcrdma_srq_user_ctx(const struct rpcrdma_srq *psrq)
{
	return psrq ? ((const struct rr_srq *)(const void *)psrq)->user_ctx : NULL;
}

RPCRDMA_API int rpcrdma_post_srq_recv(struct rpcrdma_srq *psrq, struct rpcrdma_recv_wr *wr,
				      struct rpcrdma_recv_wr **bad_wr)
{
	struct rr_srq *srq = RR_BASE(srq, psrq);
	struct rpcrdma_recv_wr *bad = NULL;
	int rc;

	if (bad_wr)
		*bad_wr = NULL;
	if (!srq || !wr) {
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}
	for (struct rpcrdma_recv_wr *w = wr; w; w = w->next) {
		if (w->num_sge > srq->attr.max_sge || (w->num_sge && !w->sg_list)) {
			if (bad_wr)
				*bad_wr = wr;
			return -EINVAL;
		}
	}
	rc = srq->pd->ctx->ops->post_srq_recv(srq, wr, &bad);
	if (rc < 0 && bad_wr)
		*bad_wr = bad ? bad : wr;
	return rc;
}

RPCRDMA_API int rpcrdma_srq_arm_limit(struct rpcrdma_srq *psrq, uint32_t limit)
{
	struct rr_srq *srq = RR_BASE(srq, psrq);
	int rc;

	if (!srq || limit > srq->attr.max_wr)
		return -EINVAL;
	if (!srq->pd->ctx->ops->arm_srq_limit)
		return -EOPNOTSUPP;
	rc = srq->pd->ctx->ops->arm_srq_limit(srq, limit);
	if (rc == 0)
		srq->attr.srq_limit = limit;
	return rc;
}

RPCRDMA_API int rpcrdma_srq_get_event(struct rpcrdma_srq *psrq)
{
	struct rr_srq *srq = RR_BASE(srq, psrq);
	int rc;

	if (!srq)
		return -EINVAL;
	if (!srq->pd->ctx->ops->srq_get_event)
		return -EOPNOTSUPP;
	rc = srq->pd->ctx->ops->srq_get_event(srq);
	if (rc > 0)
		srq->attr.srq_limit = 0;   /* fired: disarmed */
	return rc;
}

RPCRDMA_API int rpcrdma_qp_recv_quota(struct rpcrdma_qp *pqp, uint32_t add)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);

	if (!qp || !qp->srq)
		return -EINVAL;
	if (!qp->pd->ctx->ops->qp_recv_quota)
		return -EOPNOTSUPP;
	return qp->pd->ctx->ops->qp_recv_quota(qp, add);
}
