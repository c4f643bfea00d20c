/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's objects: the context (its options from the
 * environment, the STag table, the progress thread), device and connection
 * queries, protection domains, memory registrations and windows (the STag
 * table of src/rdma/mr_table.h; a deregistration first makes every QP of the
 * PD, and every QP of its shared receive queues, let go of the memory:
 * soft_pd_revoke), and queue pairs (their queues mapped lazily, their place
 * in their CQs, PD and shared receive queue). */
#include "rdma/soft/objects.h"

#include <stdio.h>
#include <stdlib.h>

#include "rdma/soft/cm.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/progress.h"
#include "rdma/soft/race.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/sock.h"
#include "rdma/soft/srq.h"
#include "rdma/soft/tx.h"

/* --------------------------------------------------------- context -- */

int rr_soft_open(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		 struct rr_context **out)
{
	struct soft_ctx *c = rr_zalloc(env, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->env = env;
	c->epfd = -1;
	/* RPCRDMA_SOFT_WAIT=epoll: no fast waits (measurements, debugging) */
	{
		const char *w = getenv("RPCRDMA_SOFT_WAIT");

		c->fast_wait = !(w && !strcmp(w, "epoll"));
		/* RPCRDMA_SOFT_TXCOPY=N: copy small Sends up to N bytes (A/B) */
		w = getenv("RPCRDMA_SOFT_TXCOPY");
		c->tx_copy_max = SOFT_TX_COPY_MAX;
		if (w && *w) {
			unsigned long v = strtoul(w, NULL, 10);

			c->tx_copy_max = (uint32_t)RR_MIN(v, (unsigned long)SOFT_TX_COPY_MAX);
		}
		c->spin_ns = (uint64_t)rr_spin_us(attr ? attr->spin_us : 0) * 1000u;
		c->spin_adaptive = rr_spin_adaptive_env();
	}
	/* RPCRDMA_SOFT_PERTURB=US[,READS]: yield or sleep at the race points,
	 * READS reads per receive turn (debugging: race.h) */
	{
		uint32_t us;

		r = rr_soft_perturb_parse(getenv("RPCRDMA_SOFT_PERTURB"), &us, &c->rx_reads);
		if (r) {
			rr_free(env, c);
			return r;
		}
		if (us)
			rr_soft_perturb_start(us);
	}
	c->coarse_res_ns = rr_coarse_res_ns(env);
	/* RPCRDMA_SOFT_TCP_CC=cubic: that congestion control on every socket */
	r = rr_soft_sock_check_cc(c, getenv("RPCRDMA_SOFT_TCP_CC"));
	if (r) {
		rr_free(env, c);
		return r;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->cq_lock, NULL);
	pthread_mutex_init(&c->place_lock, NULL);
	pthread_cond_init(&c->place_cv, NULL);
	r = rr_mrt_init(&c->mrt, env, 16);
	if (r) {
		rr_free(env, c);
		return r;
	}
	r = rr_soft_progress_start(c);
	if (r) {
		rr_mrt_fini(&c->mrt);
		rr_free(env, c);
		return r;
	}
	*out = &c->base;
	return 0;
}

void rr_soft_close(struct rr_context *base)
{
	struct soft_ctx *c = RR_CONTAINER_OF(base, struct soft_ctx, base);

	rr_soft_progress_stop(c);
	rr_mrt_fini(&c->mrt);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->cq_lock);
	pthread_mutex_destroy(&c->place_lock);
	pthread_cond_destroy(&c->place_cv);
	rr_free(c->env, c);
}

int rr_soft_query(struct rr_context *ctx, struct rpcrdma_caps *caps)
{
	RR_UNUSED(ctx);
	memset(caps, 0, sizeof(*caps));
	caps->flags = RPCRDMA_CAP_INVALIDATABLE | RPCRDMA_CAP_REMOTE_INV | RPCRDMA_CAP_COMMIT |
		      RPCRDMA_CAP_DURABLE | RPCRDMA_CAP_SOLICITED | RPCRDMA_CAP_SRQ |
		      RPCRDMA_CAP_SRQ_ANY_PD | RPCRDMA_CAP_RECV_QUOTA;
	caps->max_srq_wr = SOFT_MAX_SRQ_WR;
	caps->transport = RPCRDMA_TRANSPORT_IWARP;
	caps->max_sge = SOFT_MAX_SGE;
	caps->max_inline = SOFT_MAX_INLINE;
	caps->max_qp_wr = SOFT_MAX_WR;
	caps->max_cqe = 65536;
	caps->max_ird = SOFT_MAX_IRD;
	caps->max_ord = SOFT_MAX_ORD;
	caps->max_msg_size = 1u << 30;
	caps->max_commit_regions = RR_COMMIT_MAX_REGIONS;
	caps->max_mr_size = UINT64_MAX >> 1;
	caps->max_private_data_connect = RR_MPA_ULP_PD_MAX;
	caps->max_private_data_accept = RR_MPA_ULP_PD_MAX;
	caps->max_private_data_reject = RR_MPA_ULP_PD_MAX;
	snprintf(caps->provider, sizeof(caps->provider), "soft");
	snprintf(caps->device, sizeof(caps->device), "soft0");
	snprintf(caps->commit, sizeof(caps->commit),
		 "RDMAP Commit 0xC/0xD (persistent: msync); no visibility-only Commit");
	return 0;
}

int rr_soft_conn_query(struct rr_cm_id *base, struct rpcrdma_conn_info *info)
{
	struct soft_id *id = id_of(base);

	memset(info, 0, sizeof(*info));
	rr_soft_query(&id->ctx->base, &info->caps);
	if (id->state == IDS_CONNECTED && id->qp) {
		rr_lock(&id->qp->tx_lock);
		if (!id->qp->commit_tx)
			info->caps.flags &= ~RPCRDMA_CAP_COMMIT;
		rr_unlock(&id->qp->tx_lock);
		info->ird = id->qp->ird;
		info->ord = id->qp->ord;
	} else if (id->state == IDS_REQ_RCVD) {
		info->ird = id->conn.ird;
		info->ord = id->conn.ord;
	} else {
		info->caps.flags &= ~RPCRDMA_CAP_COMMIT;
	}
	return 0;
}

/* ------------------------------------------------------ PD, MR, MW -- */

int rr_soft_alloc_pd(struct rr_context *ctx, struct rr_pd **out)
{
	struct soft_pd *p = rr_zalloc(ctx->env, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	*out = &p->base;
	return 0;
}

int rr_soft_dealloc_pd(struct rr_pd *pd)
{
	struct soft_pd *p = RR_CONTAINER_OF(pd, struct soft_pd, base);

	pthread_mutex_destroy(&p->lock);
	rr_free(pd->ctx->env, p);
	return 0;
}

/* The table's description of @a; remote Tagged Offsets start at a random
 * base (mr_table.h: peers learn no address of ours), except for a region no
 * remote access and no window can reach (no REMOTE_READ, REMOTE_WRITE or
 * MW_BIND: its Tagged Offsets name nothing, every remote access is refused
 * by the rights check), which gets the fixed rr_mrt_local_to, drawing no
 * random bytes and taking no lock (the source of a Reply's RDMA Writes,
 * registered per Reply). */
static void mr_region(struct soft_ctx *c, const struct rpcrdma_mr_attr *a, struct rr_mrt_region *r)
{
	uint64_t va = (uint64_t)(uintptr_t)a->addr;

	memset(r, 0, sizeof(*r));
	r->addr = a->addr;
	r->length = a->length;
	if (a->access & (RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_REMOTE_WRITE |
			 RPCRDMA_ACCESS_MW_BIND))
		r->base_to = rr_mrt_random_to(&c->mrt, va, a->length);
	else
		r->base_to = rr_mrt_local_to(va, a->length);
	r->access = a->access;
	r->durable = a->flags & RPCRDMA_MR_DURABLE;
	r->durable_fd = a->durable_fd;
	r->durable_offset = a->durable_offset;
}

/* A Commit here always persists (one Commit Request, no visibility-only
 * kind on the wire): a region for visibility Commits must be durable too. */
static int soft_check_visible(const struct rpcrdma_mr_attr *attr)
{
	if ((attr->flags & RPCRDMA_MR_VISIBLE) && !(attr->flags & RPCRDMA_MR_DURABLE))
		return -EOPNOTSUPP;
	return 0;
}

int rr_soft_reg_mr(struct rr_pd *pd, const struct rpcrdma_mr_attr *attr, struct rr_mr **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	struct soft_mr *m;
	struct rr_mrt_region reg;
	uint32_t stag;
	int r = soft_check_visible(attr);

	if (r)
		return r;
	m = rr_zalloc(c->env, sizeof(*m));
	if (!m)
		return -ENOMEM;
	mr_region(c, attr, &reg);
	r = rr_mrt_reg(&c->mrt, &reg, pd, m, &stag);
	if (r) {
		rr_free(c->env, m);
		return r;
	}
	m->base.lkey = m->base.rkey = stag;
	m->base.to = reg.base_to;
	*out = &m->base;
	return 0;
}

/* Memory [@lo, @hi) of @pd was deregistered: no QP of the PD reads or writes
 * it once this returns. A tagged placement into it in progress is dropped
 * (a fast reader writing there is waited for: at most SOFT_FAST_BLOCK_MS);
 * a transmit that still needs it (a Read Response, a Send or Write not yet
 * sent) ends its QP with a Terminate (RDMAP, Remote Protection Error,
 * Invalid STag) sent as far as the socket takes it now (rx.c
 * rr_soft_qp_revoke, tx.c rr_soft_tx_revoke). */
static void soft_pd_revoke(struct soft_pd *pd, uintptr_t lo, uintptr_t hi)
{
	pthread_mutex_lock(&pd->lock);
	for (struct soft_qp *qp = pd->qps; qp; qp = qp->pd_next)
		rr_soft_qp_revoke(qp, lo, hi);
	/* QPs of other PDs receive into this PD's memory through its shared
	 * receive queues */
	for (struct soft_srq *s = pd->srqs; s; s = s->pd_next)
		for (struct soft_qp *qp = s->qps; qp; qp = qp->srq_next)
			if (qp->pd != pd)
				rr_soft_qp_revoke(qp, lo, hi);
	pthread_mutex_unlock(&pd->lock);
}

/* The registration of @mr ended (dereg, or rereg away from its memory):
 * from now on nothing of the provider touches that memory. */
static void mr_revoke(struct rr_mr *mr)
{
	uintptr_t lo = (uintptr_t)mr->addr;

	if (mr->length)
		soft_pd_revoke(RR_CONTAINER_OF(mr->pd, struct soft_pd, base), lo,
			       lo + (uintptr_t)mr->length);
}

int rr_soft_rereg_mr(struct rr_mr *mr, const struct rpcrdma_mr_attr *attr)
{
	struct soft_ctx *c = sctx(mr->pd->ctx);
	struct rr_mrt_region reg;
	uint32_t stag = mr->lkey;
	int r = soft_check_visible(attr);

	if (r)
		return r;
	mr_region(c, attr, &reg);
	r = rr_mrt_rereg(&c->mrt, &stag, &reg);
	if (!r) {
		rr_soft_place_fence(c, mr->lkey);   /* the old STag's pieces end */
		mr->lkey = mr->rkey = stag;
		mr->to = reg.base_to;
		mr_revoke(mr);   /* still the old attributes (rdma.c copies after) */
	}
	return r;
}

int rr_soft_dereg_mr(struct rr_mr *mr)
{
	struct soft_ctx *c = sctx(mr->pd->ctx);
	int r = rr_mrt_dereg(&c->mrt, mr->lkey);

	if (r)
		return r;
	rr_soft_place_fence(c, mr->lkey);   /* its pieces end, none skips a check */
	mr_revoke(mr);
	rr_free(c->env, RR_CONTAINER_OF(mr, struct soft_mr, base));
	return 0;
}

int rr_soft_alloc_mw(struct rr_pd *pd, struct rr_mw **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	struct soft_mw *w = rr_zalloc(c->env, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	r = rr_mrt_mw_alloc(&c->mrt, pd, w, &w->base.rkey);
	if (r) {
		rr_free(c->env, w);
		return r;
	}
	*out = &w->base;
	return 0;
}

int rr_soft_dealloc_mw(struct rr_mw *mw)
{
	struct soft_ctx *c = sctx(mw->pd->ctx);

	rr_mrt_mw_free(&c->mrt, mw->rkey);
	rr_soft_place_fence(c, mw->rkey); /* a bound window's pieces end */
	rr_free(c->env, RR_CONTAINER_OF(mw, struct soft_mw, base));
	return 0;
}

/* -------------------------------------------------------------- QP -- */

static void soft_destroy_qp_mem(struct soft_qp *qp)
{
	const struct rpcrdma_env *env = qp->ctx->env;

	if (qp->sq)
		for (uint32_t i = 0; i < qp->sq_touched; i++)
			rr_free(env, qp->sq[i].inline_buf);
	rr_free_pages(env, qp->sq, sizeof(*qp->sq) * qp->sq_cap);
	rr_free_pages(env, qp->rq, soft_rq_esize(qp) * qp->rq_cap);
	rr_free(env, qp->place_buf);
	rr_free(env, qp->bnc);
	rr_free(env, qp->bbig);
	rr_free_pages(env, qp->irq, sizeof(*qp->irq) * qp->irq_cap);
	rr_free(env, qp->blk);
}

/* One block holds the QP and its three working arrays, in this order: the
 * stage, the first batch's iovecs, the first batch's FPDUs (each at a
 * 64-byte boundary; the full batch's arrays come with the first message
 * that fills the first: SOFT_BATCH_FPDUS_FIRST, 9.3 KiB in all where the
 * full batch made it 45 KiB, issue 16 part CH). One allocation instead of
 * four: a thread's malloc arena grows
 * by one mprotect per allocation that does not fit (issue 16 part L; the
 * pages faulted are as many as before, malloc's chunk headers touched the
 * arrays' neighbours anyway). Only the QP is cleared: qp_rx reads the
 * stage only as far as a read put bytes there, the transmit side the
 * batch's entries only as far as it wrote them (tx.c), so nothing in the
 * arrays is read before it is written, whatever the block held before
 * (they were malloc'd uncleared before too): no QP sees bytes of another. */
#define QP_AL(x) (((x) + 63u) & ~(size_t)63u)
#define QP_STAGE_OFF QP_AL(sizeof(struct soft_qp))
#define QP_BIOV_OFF (QP_STAGE_OFF + QP_AL(SOFT_STAGE))
#define QP_FPDU_OFF (QP_BIOV_OFF + QP_AL(sizeof(struct iovec) * SOFT_BATCH_IOV_FIRST))
#define QP_BLOCK (QP_FPDU_OFF + sizeof(struct rr_fpdu) * SOFT_BATCH_FPDUS_FIRST)

int rr_soft_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *attr, struct rr_qp **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	const struct rpcrdma_env *env = c->env;
	/* the QP on a cache line's start: its layout by use (soft.h) counts
	 * lines from there (the allocator's blocks are 16-byte aligned) */
	uint8_t *raw = rr_alloc(env, QP_BLOCK + 63), *blk;
	struct soft_qp *qp;
	int r;

	if (!raw)
		return -ENOMEM;
	blk = raw + (-(uintptr_t)raw & 63u);
	qp = (struct soft_qp *)(void *)blk;
	memset(qp, 0, sizeof(*qp));
	qp->blk = raw;
	qp->stage = blk + QP_STAGE_OFF;
	qp->biov = (struct iovec *)(blk + QP_BIOV_OFF);
	qp->fpdu = (struct rr_fpdu *)(blk + QP_FPDU_OFF);
	qp->bfcap = SOFT_BATCH_FPDUS_FIRST;
	if (attr->max_send_wr > SOFT_MAX_WR || attr->max_recv_wr > SOFT_MAX_WR ||
	    attr->max_send_sge > SOFT_MAX_SGE || attr->max_recv_sge > SOFT_MAX_SGE ||
	    attr->max_inline > SOFT_MAX_INLINE) {
		rr_free(env, raw);
		return -EINVAL;
	}
	qp->ctx = c;
	qp->pd = RR_CONTAINER_OF(pd, struct soft_pd, base);
	qp->scq = scq_of(RR_BASE(cq, attr->send_cq));
	qp->rcq = scq_of(RR_BASE(cq, attr->recv_cq));
	qp->obj.type = SOFT_OBJ_QP;
	qp->obj.fd = -1;
	qp->sq_cap = RR_MAX(attr->max_send_wr, 1u);
	/* with a shared receive queue its own is never used */
	qp->srq = attr->srq ? RR_CONTAINER_OF(RR_BASE(srq, attr->srq), struct soft_srq, base)
			    : NULL;
	qp->rq_cap = qp->srq ? 1u : RR_MAX(attr->max_recv_wr, 1u);
	qp->rq_sge = qp->srq ? 1u : RR_MAX(attr->max_recv_sge, 1u);
	/* The work queues (a 4096-entry send queue is 3.6 MiB) are mapped
	 * zero-filled and become resident only as far as they are used: an
	 * idle or short-lived connection costs a few pages, and all of it goes
	 * back to the system when the QP is destroyed (rr_alloc_pages). */
	qp->sq = rr_alloc_pages(env, sizeof(*qp->sq) * qp->sq_cap);
	qp->rq = rr_alloc_pages(env, soft_rq_esize(qp) * qp->rq_cap);
	/* The inbound Read/Commit queue (252 KiB) is mapped when the first
	 * request arrives (rx_request): a QP the peer never reads from spares
	 * an mmap + munmap and a mapping (issue 16 part L). */
	qp->irq_cap = SOFT_MAX_IRD;
	atomic_init(&qp->rx_lock.v, 0);
	atomic_init(&qp->tx_lock.v, 0);
	atomic_init(&qp->fast_cv.seq, 0u);
	if (!qp->sq || !qp->rq) {
		soft_destroy_qp_mem(qp);
		return -ENOMEM;
	}
	qp->base.attr = *attr;
	qp->base.attr.max_send_wr = qp->sq_cap;
	qp->base.attr.max_recv_wr = qp->rq_cap;
	qp->base.attr.max_send_sge = SOFT_MAX_SGE;
	qp->base.attr.max_recv_sge = qp->rq_sge;   /* the ring's width */
	qp->base.attr.max_inline = SOFT_MAX_INLINE;
	pthread_mutex_lock(&c->lock);
	qp->base.qp_num = ++c->next_qpn;
	pthread_mutex_unlock(&c->lock);
	r = rr_soft_cq_add_qp(qp->rcq, qp, &qp->rtok);
	if (!r && qp->scq != qp->rcq) {
		r = rr_soft_cq_add_qp(qp->scq, qp, &qp->stok);
		if (r)
			rr_soft_cq_del_qp(qp->rcq, qp);
	}
	if (r) {
		soft_destroy_qp_mem(qp);
		return r;
	}
	pthread_mutex_lock(&qp->pd->lock);
	qp->pd_next = qp->pd->qps;
	qp->pd->qps = qp;
	pthread_mutex_unlock(&qp->pd->lock);
	if (qp->srq) {
		pthread_mutex_lock(&qp->srq->pd->lock);
		qp->srq_next = qp->srq->qps;
		qp->srq->qps = qp;
		pthread_mutex_unlock(&qp->srq->pd->lock);
	}
	*out = &qp->base;
	return 0;
}

int rr_soft_destroy_qp(struct rr_qp *base)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	const struct rpcrdma_env *env = qp->ctx->env;

	pthread_mutex_lock(&qp->pd->lock);
	for (struct soft_qp **pp = &qp->pd->qps; *pp; pp = &(*pp)->pd_next)
		if (*pp == qp) {
			*pp = qp->pd_next;
			break;
		}
	pthread_mutex_unlock(&qp->pd->lock);
	if (qp->srq) {
		pthread_mutex_lock(&qp->srq->pd->lock);
		for (struct soft_qp **pp = &qp->srq->qps; *pp; pp = &(*pp)->srq_next)
			if (*pp == qp) {
				*pp = qp->srq_next;
				break;
			}
		pthread_mutex_unlock(&qp->srq->pd->lock);
	}
	rr_soft_cq_del_qp(qp->rcq, qp);
	if (qp->scq != qp->rcq)
		rr_soft_cq_del_qp(qp->scq, qp);
	pthread_mutex_lock(&qp->ctx->lock);
	rr_lock(&qp->rx_lock);
	rr_soft_fast_quiesce(qp); /* before tx_lock (rx.c) */
	rr_lock(&qp->tx_lock);
	rr_soft_qp_closed(qp);
	rr_soft_place_unlink(qp); /* no piece in progress: rx_lock, no fast reader */
	if (qp->srq_have) {
		/* a message was being placed: its Receive was never completed,
		 * it goes back to the shared queue (nothing is flushed on
		 * destroy, and no Receive of the queue is lost) */
		rr_soft_srq_untake(qp->srq, &qp->srq_cur);
		qp->srq_have = false;
	}
	rr_unlock(&qp->tx_lock);
	rr_unlock(&qp->rx_lock);
	pthread_mutex_unlock(&qp->ctx->lock);
	RR_UNUSED(env);
	soft_destroy_qp_mem(qp);
	return 0;
}
