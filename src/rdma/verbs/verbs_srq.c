/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma-core provider's shared receive queues: ibv_create_srq on the
 * PD, ibv_post_srq_recv, the limit armed with ibv_modify_srq
 * (IBV_SRQ_LIMIT), and its event, IBV_EVENT_SRQ_LIMIT_REACHED, read from
 * the device context's asynchronous events (verbs_async.c: their thread
 * notes it on the SRQ; rpcrdma_srq_get_event also reads what is queued).
 * QPs take an SRQ at creation (verbs_qp.c); rxe and siw check a Receive's
 * lkey against the QP's PD, so this provider does not report
 * RPCRDMA_CAP_SRQ_ANY_PD, and it has no per-QP receive quota. */
#include "rdma/verbs/verbs.h"

int rr_verbs_create_srq(struct rr_pd *pd, const struct rpcrdma_srq_attr *a, struct rr_srq **out)
{
	struct vb_ctx *c = VB_CTX(pd->ctx);
	struct ibv_srq_init_attr ia;
	struct vb_srq *s;
	int rc;

	if (c->attr.max_srq <= 0 || a->max_wr > (uint32_t)c->attr.max_srq_wr ||
	    a->max_sge > (uint32_t)c->attr.max_srq_sge)
		return c->attr.max_srq <= 0 ? -EOPNOTSUPP : -EINVAL;
	s = rr_zalloc(pd->ctx->env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = s;
	ia.attr.max_wr = a->max_wr;
	ia.attr.max_sge = RR_MAX(a->max_sge, 1u);
	ia.attr.srq_limit = a->srq_limit;
	atomic_init(&s->fired, 0);
	s->srq = ibv_create_srq(VB_PD(pd)->pd, &ia);
	if (!s->srq) {
		rc = errno > 0 ? -errno : -EIO;
		rr_free(pd->ctx->env, s);
		return rc;
	}
	/* what the device granted (ibv_create_srq writes it back) */
	s->base.attr.max_wr = ia.attr.max_wr;
	s->base.attr.max_sge = ia.attr.max_sge;
	s->base.attr.srq_limit = a->srq_limit;
	*out = &s->base;
	return 0;
}

int rr_verbs_destroy_srq(struct rr_srq *srq)
{
	struct vb_srq *s = VB_SRQ(srq);
	int rc = vb_err(ibv_destroy_srq(s->srq));

	if (rc)
		return rc;
	rr_free(srq->pd->ctx->env, s);
	return 0;
}

int rr_verbs_post_srq_recv(struct rr_srq *srq, struct rpcrdma_recv_wr *wr,
			   struct rpcrdma_recv_wr **bad)
{
	struct ibv_recv_wr w[VB_BATCH], *ib_bad = NULL;
	int rc = 0;

	while (wr && !rc) {
		struct rpcrdma_recv_wr *first = wr;
		int n = vb_recv_batch(w, &wr);

		rc = vb_err(ibv_post_srq_recv(VB_SRQ(srq)->srq, w, &ib_bad));
		if (rc && bad)
			*bad = vb_recv_failed(first, w, ib_bad, n);
	}
	return rc;
}

int rr_verbs_arm_srq_limit(struct rr_srq *srq, uint32_t limit)
{
	struct ibv_srq_attr a;

	memset(&a, 0, sizeof(a));
	a.srq_limit = limit;
	/* a limit of 0 disarms (verbs: an SRQ limit of 0 never fires) */
	return vb_err(ibv_modify_srq(VB_SRQ(srq)->srq, &a, IBV_SRQ_LIMIT));
}

int rr_verbs_srq_get_event(struct rr_srq *srq)
{
	vb_async_drain(VB_CTX(srq->pd->ctx));
	return atomic_exchange(&VB_SRQ(srq)->fired, 0) ? 1 : 0;
}
