/* SPDX-License-Identifier: BSD-2-Clause */
/* Dispatch layer of the provider interface (include/rpcrdma/rdma.h):
 * argument checks that do not depend on a provider,
 * reference counting that makes destroy calls answer -EBUSY while dependent
 * objects remain, and one wrapper per operation that answers -EOPNOTSUPP when
 * the provider leaves the op NULL. No RFC wire format lives here; the
 * semantics follow RFC 5040 (STags, Send with Invalidate, Read/Write) and
 * draft-talpey-rdma-commit (Commit) as stated in rdma.h. The registry of
 * providers is src/rdma/providers.c; the helpers providers call back
 * (rr_cm_id_*, rr_spin_us) are src/rdma/provider.c, so that no provider
 * calls this file and this file names no provider. */
#include "rdma/post_own.h"
#include "rdma/provider.h"

#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* ---- context ---- */

int rr_open_with_ops(const struct rr_provider_ops *ops, const struct rpcrdma_open_attr *attr,
		     struct rpcrdma_context **out)
{
	struct rpcrdma_open_attr def = {0};
	struct rr_context *ctx = NULL;
	int rc;

	if (!ops || !out)
		return -EINVAL;
	*out = NULL;
	if (!attr)
		attr = &def;
	if (attr->flags)
		return -EINVAL;
	if (!ops->open || !ops->close)
		return -EOPNOTSUPP;
	rc = ops->open(attr, rr_env(attr->env), &ctx);
	if (rc < 0)
		return rc;
	if (!ctx)
		return -EIO;
	ctx->ops = ops;
	ctx->env = rr_env(attr->env);
	atomic_init(&ctx->nobjs, 0);
	*out = RR_PUB(context, ctx);
	return 0;
}

RPCRDMA_API int rpcrdma_open(const char *provider, const struct rpcrdma_open_attr *attr,
			     struct rpcrdma_context **out)
{
	const struct rr_provider_ops *ops;

	if (!out)
		return -EINVAL;
	*out = NULL;
	ops = rr_provider_find(provider);
	if (!ops)
		return -ENOENT;
	return rr_open_with_ops(ops, attr, out);
}

RPCRDMA_API int rpcrdma_close(struct rpcrdma_context *pctx)
{
	struct rr_context *ctx = RR_BASE(context, pctx);

	if (!ctx)
		return -EINVAL;
	if (atomic_load(&ctx->nobjs) != 0)
		return -EBUSY;
	ctx->ops->close(ctx);
	return 0;
}

RPCRDMA_API const char *rpcrdma_context_provider(const struct rpcrdma_context *pctx)
{
	const struct rr_context *ctx = (const struct rr_context *)(const void *)pctx;

	return ctx ? ctx->ops->name : NULL;
}

RPCRDMA_API int rpcrdma_query(struct rpcrdma_context *pctx, struct rpcrdma_caps *caps)
{
	struct rr_context *ctx = RR_BASE(context, pctx);

	if (!ctx || !caps)
		return -EINVAL;
	memset(caps, 0, sizeof(*caps));
	if (!ctx->ops->query)
		return -EOPNOTSUPP;
	return ctx->ops->query(ctx, caps);
}

/* ---- PD ---- */

RPCRDMA_API int rpcrdma_pd_alloc(struct rpcrdma_context *pctx, struct rpcrdma_pd **out)
{
	struct rr_context *ctx = RR_BASE(context, pctx);
	struct rr_pd *pd = NULL;
	int rc;

	if (!ctx || !out)
		return -EINVAL;
	*out = NULL;
	if (!ctx->ops->alloc_pd || !ctx->ops->dealloc_pd)
		return -EOPNOTSUPP;
	rc = ctx->ops->alloc_pd(ctx, &pd);
	if (rc < 0)
		return rc;
	pd->ctx = ctx;
	atomic_init(&pd->nobjs, 0);
	atomic_fetch_add(&ctx->nobjs, 1);
	*out = RR_PUB(pd, pd);
	return 0;
}

RPCRDMA_API int rpcrdma_pd_free(struct rpcrdma_pd *ppd)
{
	struct rr_pd *pd = RR_BASE(pd, ppd);
	struct rr_context *ctx;
	int rc;

	if (!pd)
		return -EINVAL;
	if (atomic_load(&pd->nobjs) != 0)
		return -EBUSY;
	ctx = pd->ctx;
	rc = ctx->ops->dealloc_pd(pd);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&ctx->nobjs, 1);
	return 0;
}

/* ---- MR / MW ---- */

static int check_mr_attr(const struct rpcrdma_mr_attr *a)
{
	uintptr_t addr;

	if (!a || !a->addr || a->length == 0)
		return -EINVAL;
	if (a->access & ~RPCRDMA_ACCESS_ALL)
		return -EINVAL;
	if (a->flags & ~(RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE))
		return -EINVAL;
	/* verbs rule: remote write needs local write. */
	if ((a->access & RPCRDMA_ACCESS_REMOTE_WRITE) &&
	    !(a->access & RPCRDMA_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	addr = (uintptr_t)a->addr;
	if (a->length > (uint64_t)UINTPTR_MAX - addr + 1)
		return -EINVAL; /* wraps the address space */
	if ((a->flags & RPCRDMA_MR_DURABLE) &&
	    (a->durable_fd < 0 || a->durable_offset > (uint64_t)INT64_MAX - a->length))
		return -EINVAL;
	return 0;
}

static void mr_copy_attr(struct rr_mr *mr, const struct rpcrdma_mr_attr *a)
{
	mr->addr = a->addr;
	mr->length = a->length;
	mr->access = a->access;
	mr->flags = a->flags;
	mr->durable_fd = (a->flags & RPCRDMA_MR_DURABLE) ? a->durable_fd : -1;
	mr->durable_offset = (a->flags & RPCRDMA_MR_DURABLE) ? a->durable_offset : 0;
}

RPCRDMA_API int rpcrdma_reg_mr(struct rpcrdma_pd *ppd, const struct rpcrdma_mr_attr *attr,
			       struct rpcrdma_mr **out)
{
	struct rr_pd *pd = RR_BASE(pd, ppd);
	struct rr_mr *mr = NULL;
	int rc;

	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	rc = check_mr_attr(attr);
	if (rc < 0)
		return rc;
	if (!pd->ctx->ops->reg_mr || !pd->ctx->ops->dereg_mr)
		return -EOPNOTSUPP;
	rc = pd->ctx->ops->reg_mr(pd, attr, &mr);
	if (rc < 0)
		return rc;
	mr->pd = pd;
	mr_copy_attr(mr, attr);
	if (!mr->to)
		mr->to = (uint64_t)(uintptr_t)mr->addr;
	atomic_fetch_add(&pd->nobjs, 1);
	*out = RR_PUB(mr, mr);
	return 0;
}

RPCRDMA_API int rpcrdma_reg_mr_simple(struct rpcrdma_pd *pd, void *addr, uint64_t length,
				      uint32_t access, struct rpcrdma_mr **out)
{
	struct rpcrdma_mr_attr a = {
		.addr = addr, .length = length, .access = access, .durable_fd = -1,
	};

	return rpcrdma_reg_mr(pd, &a, out);
}

RPCRDMA_API int rpcrdma_rereg_mr(struct rpcrdma_mr *pmr, const struct rpcrdma_mr_attr *attr)
{
	struct rr_mr *mr = RR_BASE(mr, pmr);
	int rc;

	if (!mr)
		return -EINVAL;
	rc = check_mr_attr(attr);
	if (rc < 0)
		return rc;
	if (!mr->pd->ctx->ops->rereg_mr)
		return -EOPNOTSUPP;
	{
		uint64_t old = mr->to;

		mr->to = 0;
		rc = mr->pd->ctx->ops->rereg_mr(mr, attr);
		if (rc < 0) {
			mr->to = old;
			return rc;
		}
	}
	mr_copy_attr(mr, attr);
	if (!mr->to)
		mr->to = (uint64_t)(uintptr_t)mr->addr;
	return 0;
}

RPCRDMA_API int rpcrdma_dereg_mr(struct rpcrdma_mr *pmr)
{
	struct rr_mr *mr = RR_BASE(mr, pmr);
	struct rr_pd *pd;
	int rc;

	if (!mr)
		return -EINVAL;
	pd = mr->pd;
	rc = pd->ctx->ops->dereg_mr(mr);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&pd->nobjs, 1);
	return 0;
}

RPCRDMA_API uint32_t rpcrdma_mr_lkey(const struct rpcrdma_mr *pmr)
{
	return pmr ? ((const struct rr_mr *)(const void *)pmr)->lkey : 0;
}

RPCRDMA_API uint32_t rpcrdma_mr_rkey(const struct rpcrdma_mr *pmr)
{
	return pmr ? ((const struct rr_mr *)(const void *)pmr)->rkey : 0;
}

RPCRDMA_API void *rpcrdma_mr_addr(const struct rpcrdma_mr *pmr)
{
	return pmr ? ((const struct rr_mr *)(const void *)pmr)->addr : NULL;
}

RPCRDMA_API uint64_t rpcrdma_mr_length(const struct rpcrdma_mr *pmr)
{
	return pmr ? ((const struct rr_mr *)(const void *)pmr)->length : 0;
}

RPCRDMA_API uint64_t rpcrdma_mr_remote_offset(const struct rpcrdma_mr *pmr)
{
	return pmr ? ((const struct rr_mr *)(const void *)pmr)->to : 0;
}

RPCRDMA_API int rpcrdma_mw_alloc(struct rpcrdma_pd *ppd, struct rpcrdma_mw **out)
{
	struct rr_pd *pd = RR_BASE(pd, ppd);
	struct rr_mw *mw = NULL;
	int rc;

	if (!pd || !out)
		return -EINVAL;
	*out = NULL;
	if (!pd->ctx->ops->alloc_mw || !pd->ctx->ops->dealloc_mw)
		return -EOPNOTSUPP;
	rc = pd->ctx->ops->alloc_mw(pd, &mw);
	if (rc < 0)
		return rc;
	mw->pd = pd;
	atomic_fetch_add(&pd->nobjs, 1);
	*out = RR_PUB(mw, mw);
	return 0;
}

RPCRDMA_API int rpcrdma_mw_free(struct rpcrdma_mw *pmw)
{
	struct rr_mw *mw = RR_BASE(mw, pmw);
	struct rr_pd *pd;
	int rc;

	if (!mw)
		return -EINVAL;
	pd = mw->pd;
	rc = pd->ctx->ops->dealloc_mw(mw);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&pd->nobjs, 1);
	return 0;
}

RPCRDMA_API uint32_t rpcrdma_mw_rkey(const struct rpcrdma_mw *pmw)
{
	return pmw ? ((const struct rr_mw *)(const void *)pmw)->rkey : 0;
}

RPCRDMA_API uint64_t rpcrdma_mw_remote_offset(const struct rpcrdma_mw *pmw)
{
	return pmw ? ((const struct rr_mw *)(const void *)pmw)->to : 0;
}

/* ---- CQ ---- */

RPCRDMA_API int rpcrdma_cq_create(struct rpcrdma_context *pctx, const struct rpcrdma_cq_attr *attr,
				  struct rpcrdma_cq **out)
{
	struct rr_context *ctx = RR_BASE(context, pctx);
	struct rr_cq *cq = NULL;
	int rc;

	if (!ctx || !attr || !out || attr->cqe == 0)
		return -EINVAL;
	*out = NULL;
	if (!ctx->ops->create_cq || !ctx->ops->destroy_cq)
		return -EOPNOTSUPP;
	rc = ctx->ops->create_cq(ctx, attr, &cq);
	if (rc < 0)
		return rc;
	cq->ctx = ctx;
	cq->user_ctx = attr->user_ctx;
	if (cq->cqe < attr->cqe)
		cq->cqe = attr->cqe;
	atomic_init(&cq->nqps, 0);
	atomic_fetch_add(&ctx->nobjs, 1);
	*out = RR_PUB(cq, cq);
	return 0;
}

RPCRDMA_API int rpcrdma_cq_destroy(struct rpcrdma_cq *pcq)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	struct rr_context *ctx;
	int rc;

	if (!cq)
		return -EINVAL;
	if (atomic_load(&cq->nqps) != 0)
		return -EBUSY;
	ctx = cq->ctx;
	rc = ctx->ops->destroy_cq(cq);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&ctx->nobjs, 1);
	return 0;
}

/* rr_cq_test_fail's error on @cq (counted), or 0: one relaxed load. */
static int cq_injected(struct rr_cq *cq)
{
	int err = atomic_load_explicit(&cq->test_err, memory_order_relaxed);

	if (err)
		atomic_fetch_add_explicit(&cq->test_hits, 1, memory_order_relaxed);
	return err;
}

void rr_cq_test_fail(struct rpcrdma_cq *pcq, int err)
{
	atomic_store(&RR_BASE(cq, pcq)->test_err, err);
}

uint64_t rr_cq_test_hits(const struct rpcrdma_cq *pcq)
{
	return atomic_load(&((const struct rr_cq *)(const void *)pcq)->test_hits);
}

RPCRDMA_API int rpcrdma_cq_poll(struct rpcrdma_cq *pcq, int n, struct rpcrdma_wc *wc)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	int err;

	if (!cq || n < 0 || (n > 0 && !wc))
		return -EINVAL;
	if (!cq->ctx->ops->poll_cq)
		return -EOPNOTSUPP;
	err = cq_injected(cq);
	if (err)
		return err;
	return cq->ctx->ops->poll_cq(cq, n, wc);
}

RPCRDMA_API int rpcrdma_cq_arm(struct rpcrdma_cq *pcq, bool solicited_only)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	int err;

	if (!cq)
		return -EINVAL;
	if (!cq->ctx->ops->arm_cq)
		return -EOPNOTSUPP;
	if ((err = cq_injected(cq)) != 0)
		return err;
	return cq->ctx->ops->arm_cq(cq, solicited_only);
}

RPCRDMA_API int rpcrdma_cq_fd(struct rpcrdma_cq *pcq)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);

	if (!cq)
		return -EINVAL;
	if (!cq->ctx->ops->cq_fd)
		return -EOPNOTSUPP;
	return cq->ctx->ops->cq_fd(cq);
}

RPCRDMA_API int rpcrdma_cq_get_event(struct rpcrdma_cq *pcq)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	int err;

	if (!cq)
		return -EINVAL;
	if (!cq->ctx->ops->cq_get_event)
		return -EOPNOTSUPP;
	if ((err = cq_injected(cq)) != 0)
		return err;
	return cq->ctx->ops->cq_get_event(cq);
}

int rr_context_interrupt(struct rpcrdma_context *pctx)
{
	struct rr_context *ctx = RR_BASE(context, pctx);

	if (!ctx)
		return -EINVAL;
	return ctx->ops->interrupt && ctx->ops->wait_cq ? ctx->ops->interrupt(ctx) : -EOPNOTSUPP;
}

bool rr_context_can_interrupt(const struct rpcrdma_context *pctx)
{
	const struct rr_context *ctx = RR_BASE(context, (struct rpcrdma_context *)pctx);

	return ctx && ctx->ops->interrupt && ctx->ops->wait_cq;
}

int rr_qp_wait(struct rpcrdma_qp *pqp, int n, struct rpcrdma_wc *wc, int timeout_ms,
	       const struct rr_qp_seen *seen)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);
	int err;

	if (!qp || n < 1 || !wc || !seen)
		return -EINVAL;
	if (!qp->pd->ctx->ops->wait_qp)
		return -EOPNOTSUPP;
	if ((err = cq_injected(qp->recv_cq)) != 0 || (err = cq_injected(qp->send_cq)) != 0)
		return err;
	return qp->pd->ctx->ops->wait_qp(qp, n, wc, timeout_ms, seen);
}

bool rr_qp_can_wait(const struct rpcrdma_qp *pqp)
{
	const struct rr_qp *qp = RR_BASE(qp, (struct rpcrdma_qp *)pqp);

	return qp && qp->pd->ctx->ops->wait_qp;
}

RPCRDMA_API int rpcrdma_cq_wait(struct rpcrdma_cq *pcq, int n, struct rpcrdma_wc *wc,
				int timeout_ms)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	const struct rr_provider_ops *ops;
	int err;
	uint64_t end;

	if (!cq || n < 1 || !wc)
		return -EINVAL;
	ops = cq->ctx->ops;
	if ((err = cq_injected(cq)) != 0)
		return err;
	if (ops->wait_cq)
		return ops->wait_cq(cq, n, wc, timeout_ms);
	if (!ops->poll_cq || !ops->arm_cq || !ops->cq_fd || !ops->cq_get_event)
		return -EOPNOTSUPP;
	end = timeout_ms < 0 ? 0 : rr_now_ns(cq->ctx->env) + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		struct pollfd pfd = {.fd = ops->cq_fd(cq), .events = POLLIN};
		int got = ops->poll_cq(cq, n, wc), ms = -1, rc;

		if (got)
			return got;
		rc = ops->arm_cq(cq, false);
		if (rc < 0)
			return rc;
		got = ops->poll_cq(cq, n, wc);
		if (got)
			return got;
		if (timeout_ms >= 0) {
			uint64_t now = rr_now_ns(cq->ctx->env);

			if (now >= end)
				return 0;
			ms = (int)((end - now + 999999u) / 1000000u);
		}
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return -errno;
		rc = ops->cq_get_event(cq);
		if (rc < 0)
			return rc;
	}
}

RPCRDMA_API void *rpcrdma_cq_user_ctx(const struct rpcrdma_cq *pcq)
{
	return pcq ? ((const struct rr_cq *)(const void *)pcq)->user_ctx : NULL;
}

/* ---- QP ---- */

RPCRDMA_API int rpcrdma_qp_create(struct rpcrdma_pd *ppd, const struct rpcrdma_qp_attr *attr,
				  struct rpcrdma_qp **out)
{
	struct rr_pd *pd = RR_BASE(pd, ppd);
	struct rr_cq *scq, *rcq;
	struct rr_srq *srq;
	struct rr_qp *qp = NULL;
	int rc;

	if (!pd || !attr || !out)
		return -EINVAL;
	*out = NULL;
	scq = RR_BASE(cq, attr->send_cq);
	rcq = RR_BASE(cq, attr->recv_cq);
	srq = RR_BASE(srq, attr->srq);
	if (!scq || !rcq || scq->ctx != pd->ctx || rcq->ctx != pd->ctx)
		return -EINVAL;
	if (attr->max_send_wr == 0 || (attr->max_recv_wr == 0 && !srq))
		return -EINVAL;
	if (srq) {
		/* same context; same PD unless the provider says otherwise */
		struct rpcrdma_caps caps;

		if (srq->pd->ctx != pd->ctx)
			return -EINVAL;
		if (srq->pd != pd && (rpcrdma_query(RR_PUB(context, pd->ctx), &caps) ||
				      !(caps.flags & RPCRDMA_CAP_SRQ_ANY_PD)))
			return -EINVAL;
	}
	if (!pd->ctx->ops->create_qp || !pd->ctx->ops->destroy_qp)
		return -EOPNOTSUPP;
	rc = pd->ctx->ops->create_qp(pd, attr, &qp);
	if (rc < 0)
		return rc;
	qp->pd = pd;
	qp->send_cq = scq;
	qp->recv_cq = rcq;
	qp->srq = srq;
	qp->user_ctx = attr->user_ctx;
	qp->id = NULL;
	/* Granted capacities: providers set qp->attr; never below the request. */
	qp->attr.send_cq = attr->send_cq;
	qp->attr.recv_cq = attr->recv_cq;
	qp->attr.user_ctx = attr->user_ctx;
	qp->attr.sq_sig_all = attr->sq_sig_all;
	qp->attr.max_send_wr = RR_MAX(qp->attr.max_send_wr, attr->max_send_wr);
	qp->attr.max_recv_wr = RR_MAX(qp->attr.max_recv_wr, attr->max_recv_wr);
	qp->attr.max_send_sge = RR_MAX(qp->attr.max_send_sge, attr->max_send_sge);
	qp->attr.max_recv_sge = RR_MAX(qp->attr.max_recv_sge, attr->max_recv_sge);
	qp->attr.max_inline = RR_MAX(qp->attr.max_inline, attr->max_inline);
	qp->attr.srq = attr->srq;
	if (srq)
		atomic_fetch_add(&srq->nqps, 1);
	atomic_fetch_add(&scq->nqps, 1);
	atomic_fetch_add(&rcq->nqps, 1);
	atomic_fetch_add(&pd->nobjs, 1);
	*out = RR_PUB(qp, qp);
	return 0;
}

RPCRDMA_API int rpcrdma_qp_destroy(struct rpcrdma_qp *pqp)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);
	struct rr_srq *srq;
	struct rr_cq *scq, *rcq;
	struct rr_pd *pd;
	int rc;

	if (!qp)
		return -EINVAL;
	if (qp->id)
		return -EBUSY;
	pd = qp->pd;
	scq = qp->send_cq;
	rcq = qp->recv_cq;
	srq = qp->srq;
	rc = pd->ctx->ops->destroy_qp(qp);
	if (rc < 0)
		return rc;
	if (srq)
		atomic_fetch_sub(&srq->nqps, 1);
	atomic_fetch_sub(&scq->nqps, 1);
	atomic_fetch_sub(&rcq->nqps, 1);
	atomic_fetch_sub(&pd->nobjs, 1);
	return 0;
}

RPCRDMA_API int rpcrdma_qp_query(struct rpcrdma_qp *pqp, struct rpcrdma_qp_attr *attr)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);

	if (!qp || !attr)
		return -EINVAL;
	*attr = qp->attr;
	return 0;
}

RPCRDMA_API void *rpcrdma_qp_user_ctx(const struct rpcrdma_qp *pqp)
{
	return pqp ? ((const struct rr_qp *)(const void *)pqp)->user_ctx : NULL;
}

RPCRDMA_API int rpcrdma_qp_set_commit(struct rpcrdma_qp *pqp, bool enable)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);

	if (!qp)
		return -EINVAL;
	if (!qp->pd->ctx->ops->set_commit)
		return -EOPNOTSUPP;
	return qp->pd->ctx->ops->set_commit(qp, enable);
}

/* Shape checks of one send WR against the QP's granted capacities (also
 * the proof of the library's own posts, rdma/post_own.h). */
int rr_send_wr_check(const struct rr_qp *qp, const struct rpcrdma_send_wr *wr)
{
	if (wr->num_sge > qp->attr.max_send_sge || (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	if (wr->flags & ~(RPCRDMA_SEND_SIGNALED | RPCRDMA_SEND_SOLICITED | RPCRDMA_SEND_INLINE |
			  RPCRDMA_SEND_FENCE | RPCRDMA_SEND_VISIBLE))
		return -EINVAL;
	if ((wr->flags & RPCRDMA_SEND_VISIBLE) && wr->opcode != RPCRDMA_WR_RDMA_COMMIT)
		return -EINVAL;
	switch (wr->opcode) {
	case RPCRDMA_WR_SEND:
	case RPCRDMA_WR_SEND_WITH_INV:
	case RPCRDMA_WR_RDMA_WRITE:
	case RPCRDMA_WR_RDMA_READ:
		break;
	case RPCRDMA_WR_RDMA_COMMIT:
		if (wr->num_sge != 0 || wr->u.commit.num_regions == 0 || !wr->u.commit.regions)
			return -EINVAL;
		break;
	case RPCRDMA_WR_BIND_MW: {
		const struct rr_mw *mw = RR_BASE(mw, wr->u.bind.mw);
		const struct rr_mr *mr = RR_BASE(mr, wr->u.bind.mr);

		if (!mw || !mr || wr->num_sge != 0)
			return -EINVAL;
		if (wr->u.bind.access &
		    ~(RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_REMOTE_WRITE |
		      RPCRDMA_ACCESS_LOCAL_WRITE))
			return -EINVAL;
		if (mw->pd != qp->pd || mr->pd != qp->pd)
			return -EINVAL;
		break;
	}
	case RPCRDMA_WR_LOCAL_INV:
		if (wr->num_sge != 0)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

RPCRDMA_API int rpcrdma_post_send(struct rpcrdma_qp *pqp, struct rpcrdma_send_wr *wr,
				  struct rpcrdma_send_wr **bad_wr)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);
	struct rpcrdma_send_wr *bad = NULL;
	int rc;

	if (bad_wr)
		*bad_wr = NULL;
	if (!qp || !wr) {
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}
	for (struct rpcrdma_send_wr *w = wr; w; w = w->next) {
		rc = rr_send_wr_check(qp, w);
		if (rc < 0) {
			/* Nothing posted yet: the whole chain is refused from
			 * the first WR so that no partial state exists. */
			if (bad_wr)
				*bad_wr = wr;
			return rc;
		}
	}
	if (!qp->pd->ctx->ops->post_send) {
		if (bad_wr)
			*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	rc = qp->pd->ctx->ops->post_send(qp, wr, &bad);
	if (rc < 0 && bad_wr)
		*bad_wr = bad ? bad : wr;
	return rc;
}

RPCRDMA_API int rpcrdma_post_recv(struct rpcrdma_qp *pqp, struct rpcrdma_recv_wr *wr,
				  struct rpcrdma_recv_wr **bad_wr)
{
	struct rr_qp *qp = RR_BASE(qp, pqp);
	struct rpcrdma_recv_wr *bad = NULL;
	int rc;

	if (bad_wr)
		*bad_wr = NULL;
	if (!qp || !wr || qp->srq) {   /* an SRQ's QP: rpcrdma_post_srq_recv */
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}
	for (struct rpcrdma_recv_wr *w = wr; w; w = w->next) {
		if (w->num_sge > qp->attr.max_recv_sge || (w->num_sge && !w->sg_list)) {
			if (bad_wr)
				*bad_wr = wr;
			return -EINVAL;
		}
	}
	if (!qp->pd->ctx->ops->post_recv) {
		if (bad_wr)
			*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	rc = qp->pd->ctx->ops->post_recv(qp, wr, &bad);
	if (rc < 0 && bad_wr)
		*bad_wr = bad ? bad : wr;
	return rc;
}

/* ---- CM ---- */

RPCRDMA_API int rpcrdma_cm_channel_create(struct rpcrdma_context *pctx,
					  struct rpcrdma_cm_channel **out)
{
	struct rr_context *ctx = RR_BASE(context, pctx);
	struct rr_cm_channel *ch = NULL;
	int rc;

	if (!ctx || !out)
		return -EINVAL;
	*out = NULL;
	if (!ctx->ops->create_channel || !ctx->ops->destroy_channel)
		return -EOPNOTSUPP;
	rc = ctx->ops->create_channel(ctx, &ch);
	if (rc < 0)
		return rc;
	ch->ctx = ctx;
	atomic_init(&ch->nids, 0);
	atomic_fetch_add(&ctx->nobjs, 1);
	*out = RR_PUB(cm_channel, ch);
	return 0;
}

RPCRDMA_API int rpcrdma_cm_channel_destroy(struct rpcrdma_cm_channel *pch)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);
	struct rr_context *ctx;
	int rc;

	if (!ch)
		return -EINVAL;
	if (atomic_load(&ch->nids) != 0)
		return -EBUSY;
	ctx = ch->ctx;
	rc = ctx->ops->destroy_channel(ch);
	if (rc < 0)
		return rc;
	atomic_fetch_sub(&ctx->nobjs, 1);
	return 0;
}

RPCRDMA_API int rpcrdma_cm_channel_fd(struct rpcrdma_cm_channel *pch)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);

	if (!ch)
		return -EINVAL;
	if (!ch->ctx->ops->channel_fd)
		return -EOPNOTSUPP;
	return ch->ctx->ops->channel_fd(ch);
}

RPCRDMA_API int rpcrdma_cm_get_event(struct rpcrdma_cm_channel *pch, struct rpcrdma_cm_event *ev)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);
	int rc;

	if (!ch || !ev)
		return -EINVAL;
	if (!ch->ctx->ops->get_event)
		return -EOPNOTSUPP;
	memset(ev, 0, offsetof(struct rpcrdma_cm_event, private_data));
	rc = ch->ctx->ops->get_event(ch, ev);
	if (rc < 0)
		return rc;
	if (ev->private_data_len > RPCRDMA_PRIVATE_DATA_MAX)
		ev->private_data_len = RPCRDMA_PRIVATE_DATA_MAX;
	if (ev->listen_id)
		ev->user_ctx = RR_BASE(cm_id, ev->listen_id)->user_ctx;
	else if (ev->id)
		ev->user_ctx = RR_BASE(cm_id, ev->id)->user_ctx;
	return rc;
}

/* Private data length against the provider's limit for that message. */
static int check_pdata(struct rr_context *ctx, uint16_t len, const void *data, int which)
{
	struct rpcrdma_caps caps;
	uint16_t max;
	int rc;

	if (len && !data)
		return -EINVAL;
	if (len == 0)
		return 0;
	if (!ctx->ops->query)
		return len <= 56 ? 0 : -EMSGSIZE;
	memset(&caps, 0, sizeof(caps));
	rc = ctx->ops->query(ctx, &caps);
	if (rc < 0)
		return rc;
	max = which == 0 ? caps.max_private_data_connect
	    : which == 1 ? caps.max_private_data_accept
			 : caps.max_private_data_reject;
	return len <= max ? 0 : -EMSGSIZE;
}

RPCRDMA_API int rpcrdma_listen(struct rpcrdma_cm_channel *pch, const struct sockaddr *addr,
			       socklen_t addrlen, int backlog, void *user_ctx,
			       struct rpcrdma_cm_id **out)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);
	struct rr_cm_id *id = NULL;
	int rc;

	if (!ch || !addr || !out || addrlen < (socklen_t)sizeof(sa_family_t) || backlog < 0)
		return -EINVAL;
	*out = NULL;
	if (!ch->ctx->ops->listen || !ch->ctx->ops->destroy_id)
		return -EOPNOTSUPP;
	/* the provider sets user_ctx before the id can produce events */
	rc = ch->ctx->ops->listen(ch, addr, addrlen, backlog, user_ctx, &id);
	if (rc < 0)
		return rc;
	*out = RR_PUB(cm_id, id);
	return 0;
}

int rr_cm_listen_limits(struct rpcrdma_cm_id *pid, const struct rr_listen_limits *lim)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !lim || !id->listener)
		return -EINVAL;
	if (!id->ch->ctx->ops->listen_limits)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->listen_limits(id, lim);
}

int rr_cm_listen_stats(struct rpcrdma_cm_id *pid, struct rr_listen_stats *out)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !out || !id->listener)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!id->ch->ctx->ops->listen_stats)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->listen_stats(id, out);
}

int rr_cm_listen_shed(struct rpcrdma_cm_id *pid, unsigned n)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !id->listener)
		return -EINVAL;
	if (!id->ch->ctx->ops->listen_shed)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->listen_shed(id, n);
}

int rr_cm_listen_driven(struct rpcrdma_cm_id *pid, bool on)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !id->listener)
		return -EINVAL;
	if (!id->ch->ctx->ops->listen_driven || !id->ch->ctx->ops->listen_drive)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->listen_driven(id, on);
}

int rr_cm_listen_drive(struct rpcrdma_cm_id *pid)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !id->listener)
		return -EINVAL;
	if (!id->ch->ctx->ops->listen_drive)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->listen_drive(id);
}

int rr_cm_channel_quiet(struct rpcrdma_cm_channel *pch, bool on)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);

	if (!ch)
		return -EINVAL;
	if (!ch->ctx->ops->channel_quiet)
		return -EOPNOTSUPP;
	return ch->ctx->ops->channel_quiet(ch, on);
}

static int cm_connect(struct rpcrdma_cm_channel *pch, struct rpcrdma_qp *pqp,
		      const struct sockaddr *dst, socklen_t dstlen,
		      const struct rpcrdma_conn_param *param, void *user_ctx,
		      struct rpcrdma_cm_id **out, bool *driven)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);
	struct rr_qp *qp = RR_BASE(qp, pqp);
	struct rpcrdma_conn_param def = {0};
	struct rr_cm_id *id = NULL;
	int rc;

	if (!ch || !qp || !dst || !out || dstlen < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	*out = NULL;
	if (!param)
		param = &def;
	if (qp->pd->ctx != ch->ctx)
		return -EINVAL;
	if (param->src_addr && param->src_addrlen < (socklen_t)sizeof(sa_family_t))
		return -EINVAL;
	if (qp->id)
		return -EBUSY;
	rc = check_pdata(ch->ctx, param->private_data_len, param->private_data, 0);
	if (rc < 0)
		return rc;
	if (!ch->ctx->ops->connect || !ch->ctx->ops->destroy_id)
		return -EOPNOTSUPP;
	if (param->flags & RR_CONN_DRIVEN)
		return -EINVAL; /* internal: only through rr_cm_connect_driven */
	if (driven && ch->ctx->ops->connect_drive) {
		struct rpcrdma_conn_param p = *param;

		p.flags |= RR_CONN_DRIVEN;
		*driven = true;
		rc = ch->ctx->ops->connect(ch, qp, dst, dstlen, &p, user_ctx, &id);
	} else {
		rc = ch->ctx->ops->connect(ch, qp, dst, dstlen, param, user_ctx, &id);
	}
	if (rc < 0)
		return rc;
	*out = RR_PUB(cm_id, id);
	return 0;
}

RPCRDMA_API int rpcrdma_connect(struct rpcrdma_cm_channel *pch, struct rpcrdma_qp *pqp,
				const struct sockaddr *dst, socklen_t dstlen,
				const struct rpcrdma_conn_param *param, void *user_ctx,
				struct rpcrdma_cm_id **out)
{
	return cm_connect(pch, pqp, dst, dstlen, param, user_ctx, out, NULL);
}

int rr_cm_connect_driven(struct rpcrdma_cm_channel *pch, struct rpcrdma_qp *pqp,
			 const struct sockaddr *dst, socklen_t dstlen,
			 const struct rpcrdma_conn_param *param, void *user_ctx,
			 struct rpcrdma_cm_id **out, bool *driven)
{
	*driven = false;
	return cm_connect(pch, pqp, dst, dstlen, param, user_ctx, out, driven);
}

bool rr_cm_can_drive(struct rpcrdma_cm_channel *pch)
{
	struct rr_cm_channel *ch = RR_BASE(cm_channel, pch);

	return ch && ch->ctx->ops->connect && ch->ctx->ops->connect_drive;
}

int rr_cm_connect_drive(struct rpcrdma_cm_id *pid, int timeout_ms, struct rpcrdma_cm_event *ev)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);
	int rc;

	if (!id || !ev || id->listener || timeout_ms < 0)
		return -EINVAL;
	if (!id->ch->ctx->ops->connect_drive)
		return -EOPNOTSUPP;
	rc = id->ch->ctx->ops->connect_drive(id, timeout_ms, ev);
	if (rc == 0) {
		if (ev->private_data_len > RPCRDMA_PRIVATE_DATA_MAX)
			ev->private_data_len = RPCRDMA_PRIVATE_DATA_MAX;
		ev->user_ctx = id->user_ctx;
	}
	return rc;
}

RPCRDMA_API int rpcrdma_accept(struct rpcrdma_cm_id *pid, struct rpcrdma_qp *pqp,
			       const struct rpcrdma_conn_param *param)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);
	struct rr_qp *qp = RR_BASE(qp, pqp);
	struct rpcrdma_conn_param def = {0};
	int rc;

	if (!id || !qp || id->listener)
		return -EINVAL;
	if (!param)
		param = &def;
	if (qp->pd->ctx != id->ch->ctx)
		return -EINVAL;
	if (qp->id || id->qp)
		return -EBUSY;
	rc = check_pdata(id->ch->ctx, param->private_data_len, param->private_data, 1);
	if (rc < 0)
		return rc;
	if (!id->ch->ctx->ops->accept)
		return -EOPNOTSUPP;
	rc = id->ch->ctx->ops->accept(id, qp, param);
	if (rc < 0)
		return rc;
	id->qp = qp;
	qp->id = id;
	return 0;
}

RPCRDMA_API int rpcrdma_reject(struct rpcrdma_cm_id *pid, const void *data, uint16_t len)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);
	int rc;

	if (!id || id->listener || id->qp)
		return -EINVAL;
	rc = check_pdata(id->ch->ctx, len, data, 2);
	if (rc < 0)
		return rc;
	if (!id->ch->ctx->ops->reject)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->reject(id, data, len);
}

RPCRDMA_API int rpcrdma_disconnect(struct rpcrdma_cm_id *pid)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || id->listener)
		return -EINVAL;
	if (!id->ch->ctx->ops->disconnect)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->disconnect(id);
}

RPCRDMA_API int rpcrdma_cm_id_destroy(struct rpcrdma_cm_id *pid)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);
	struct rr_cm_channel *ch;
	struct rr_qp *qp;
	int rc;

	if (!id)
		return -EINVAL;
	ch = id->ch;
	qp = id->qp;
	if (!ch->ctx->ops->destroy_id)
		return -EOPNOTSUPP;
	rc = ch->ctx->ops->destroy_id(id);
	if (rc < 0)
		return rc;
	if (qp)
		qp->id = NULL;
	atomic_fetch_sub(&ch->nids, 1);
	return 0;
}

RPCRDMA_API void rpcrdma_cm_id_set_user_ctx(struct rpcrdma_cm_id *pid, void *user_ctx)
{
	if (pid)
		RR_BASE(cm_id, pid)->user_ctx = user_ctx;
}

RPCRDMA_API void *rpcrdma_cm_id_user_ctx(const struct rpcrdma_cm_id *pid)
{
	return pid ? ((const struct rr_cm_id *)(const void *)pid)->user_ctx : NULL;
}

RPCRDMA_API int rpcrdma_cm_local_addr(struct rpcrdma_cm_id *pid, struct sockaddr_storage *ss)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !ss)
		return -EINVAL;
	if (!id->ch->ctx->ops->local_addr)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->local_addr(id, ss);
}

RPCRDMA_API int rpcrdma_cm_peer_addr(struct rpcrdma_cm_id *pid, struct sockaddr_storage *ss)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !ss)
		return -EINVAL;
	if (!id->ch->ctx->ops->peer_addr)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->peer_addr(id, ss);
}

RPCRDMA_API int rpcrdma_conn_query(struct rpcrdma_cm_id *pid, struct rpcrdma_conn_info *info)
{
	struct rr_cm_id *id = RR_BASE(cm_id, pid);

	if (!id || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	if (!id->ch->ctx->ops->conn_query)
		return -EOPNOTSUPP;
	return id->ch->ctx->ops->conn_query(id, info);
}

/* ---- names ---- */

RPCRDMA_API const char *rpcrdma_wc_status_str(enum rpcrdma_wc_status s)
{
	switch (s) {
	case RPCRDMA_WC_SUCCESS: return "success";
	case RPCRDMA_WC_LOC_LEN_ERR: return "local length error";
	case RPCRDMA_WC_LOC_QP_OP_ERR: return "local QP operation error";
	case RPCRDMA_WC_LOC_PROT_ERR: return "local protection error";
	case RPCRDMA_WC_WR_FLUSH_ERR: return "work request flushed";
	case RPCRDMA_WC_MW_BIND_ERR: return "memory window bind error";
	case RPCRDMA_WC_REM_INV_REQ_ERR: return "remote invalid request";
	case RPCRDMA_WC_REM_ACCESS_ERR: return "remote access error";
	case RPCRDMA_WC_REM_OP_ERR: return "remote operation error";
	case RPCRDMA_WC_REM_ABORT_ERR: return "remote abort (terminate)";
	case RPCRDMA_WC_INV_STAG_ERR: return "invalidate STag error";
	case RPCRDMA_WC_COMMIT_ERR: return "commit failed at responder";
	case RPCRDMA_WC_RETRY_EXC_ERR: return "transport retry exceeded";
	case RPCRDMA_WC_FATAL_ERR: return "fatal error";
	case RPCRDMA_WC_GENERAL_ERR: return "general error";
	}
	return "unknown status";
}

RPCRDMA_API const char *rpcrdma_cm_event_str(enum rpcrdma_cm_event_type t)
{
	switch (t) {
	case RPCRDMA_CM_CONNECT_REQUEST: return "connect request";
	case RPCRDMA_CM_ESTABLISHED: return "established";
	case RPCRDMA_CM_REJECTED: return "rejected";
	case RPCRDMA_CM_UNREACHABLE: return "unreachable";
	case RPCRDMA_CM_DISCONNECTED: return "disconnected";
	case RPCRDMA_CM_ERROR: return "error";
	}
	return "unknown event";
}

void rr_cq_describe(struct rpcrdma_cq *pcq, FILE *f, void (*name)(FILE *f, void *user_ctx))
{
	struct rr_cq *cq = RR_BASE(cq, pcq);

	if (cq && f && cq->ctx->ops->cq_describe)
		cq->ctx->ops->cq_describe(cq, f, name);
}
