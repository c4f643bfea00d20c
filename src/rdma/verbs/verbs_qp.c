/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma-core provider's queue pairs (verbs_device.c has the mapping): created on
 * the rdma_cm id once the route is known (active side) or at accept (passive
 * side), with their shared receive queue if they have one, and the receives
 * posted before that held and posted then;
 * posting send work requests in batches (type 2 window binds with a fresh
 * key byte, Send With Invalidate as libsiw reads it) and RDMA Commit as one
 * IBV_WR_FLUSH through the extended QP. The CQ admission rule of both
 * providers (docs/rdma-provider.md "CQ sizing"): a QP is created only while
 * the depths of its queues that complete on a CQ, with those of the CQ's
 * other QPs, fit the CQ's cqe (-ENOSPC otherwise; -EIO on a failed CQ); an
 * SRQ's Receives are not counted (as on soft: the consumer bounds what its
 * peers may send, the RPC transport by its credits; a peer sending beyond
 * overruns the CQ, a CQ error); what the device grants beyond the
 * request at creation is counted then, and reported only if it fits. */
#include "rdma/verbs/verbs.h"

#include <stdlib.h>

int vb_cq_charge(struct vb_cq *cq, uint32_t need)
{
	int rc = 0;

	pthread_mutex_lock(&cq->lock);
	if (atomic_load(&cq->err))
		rc = -EIO; /* failed for good: takes no QP */
	else if (need > cq->base.cqe || cq->used > cq->base.cqe - need)
		rc = -ENOSPC;
	else
		cq->used += need;
	pthread_mutex_unlock(&cq->lock);
	return rc;
}

void vb_cq_uncharge(struct vb_cq *cq, uint32_t n)
{
	pthread_mutex_lock(&cq->lock);
	cq->used -= RR_MIN(n, cq->used);
	pthread_mutex_unlock(&cq->lock);
}

/* Gives back what @q took of its CQs. */
static void vb_qp_uncharge(struct vb_qp *q)
{
	if (q->charged_send)
		vb_cq_uncharge(VB_CQ(q->base.send_cq), q->charged_send);
	if (q->charged_recv)
		vb_cq_uncharge(VB_CQ(q->base.recv_cq), q->charged_recv);
	q->charged_send = q->charged_recv = 0;
}

/* Takes @send more entries of @q's send CQ and @recv of its receive CQ
 * (its own Receives), all or none. */
static int vb_qp_charge(struct vb_qp *q, uint32_t send, uint32_t recv)
{
	int rc = send ? vb_cq_charge(VB_CQ(q->base.send_cq), send) : 0;

	if (rc < 0)
		return rc;
	if (recv) {
		rc = vb_cq_charge(VB_CQ(q->base.recv_cq), recv);
		if (rc < 0) {
			if (send)
				vb_cq_uncharge(VB_CQ(q->base.send_cq), send);
			return rc;
		}
	}
	q->charged_send += send;
	q->charged_recv += recv;
	return 0;
}

int rr_verbs_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *a, struct rr_qp **out)
{
	struct vb_ctx *c = VB_CTX(pd->ctx);
	struct vb_qp *q;
	int rc;

	if (a->max_send_wr > (uint32_t)c->attr.max_qp_wr ||
	    a->max_recv_wr > (uint32_t)c->attr.max_qp_wr ||
	    a->max_send_sge > (uint32_t)c->attr.max_sge ||
	    a->max_recv_sge > (uint32_t)c->attr.max_sge)
		return -EINVAL;
	q = rr_zalloc(pd->ctx->env, sizeof(*q));
	if (!q)
		return -ENOMEM;
	if (pthread_mutex_init(&q->lock, NULL) != 0) {
		rr_free(pd->ctx->env, q);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&q->post_lock, NULL) != 0) {
		pthread_mutex_destroy(&q->lock);
		rr_free(pd->ctx->env, q);
		return -ENOMEM;
	}
	atomic_init(&q->ibv, NULL);
	atomic_init(&q->commit_tx, false);
	atomic_init(&q->fatal, 0);
	q->held_tail = &q->held;
	q->base.attr = *a;
	q->base.qp_num = 0;
	/* the dispatch layer sets these after create; the rule needs them now
	 * (the PD too: the teardown of a failed create uses its context) */
	q->base.pd = pd;
	q->base.send_cq = RR_BASE(cq, a->send_cq);
	q->base.recv_cq = RR_BASE(cq, a->recv_cq);
	q->base.srq = a->srq ? RR_BASE(srq, a->srq) : NULL;
	rc = vb_qp_charge(q, a->max_send_wr, q->base.srq ? 0 : a->max_recv_wr);
	if (rc < 0) {
		vb_qp_uncharge(q);
		pthread_mutex_destroy(&q->post_lock);
		pthread_mutex_destroy(&q->lock);
		rr_free(pd->ctx->env, q);
		return rc;
	}
	*out = &q->base;
	return 0;
}

static void vb_drop_held(struct vb_qp *q, const struct rpcrdma_env *env)
{
	while (q->held) {
		struct vb_precv *p = q->held;

		q->held = p->next;
		rr_free(env, p);
	}
	q->held_tail = &q->held;
	q->nheld = 0;
}

int rr_verbs_destroy_qp(struct rr_qp *qp)
{
	struct vb_qp *q = VB_QP(qp);
	const struct rpcrdma_env *env = qp->pd->ctx->env;

	/* the ibv QP went with its cm id (the dispatch layer made sure the
	 * id is gone) */
	vb_drop_held(q, env);
	vb_qp_uncharge(q);
	pthread_mutex_destroy(&q->post_lock);
	pthread_mutex_destroy(&q->lock);
	rr_free(env, q);
	return 0;
}

/* Creates the verbs QP on @cm, posts the held receives, and publishes it. */
int rr_verbs_qp_attach(struct vb_qp *q, struct rdma_cm_id *cm)
{
	struct vb_ctx *c = VB_CTX(q->base.pd->ctx);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *iq;
	int rc;

	if (cm->verbs != c->verbs)
		return -ENODEV; /* the route leads to another device */
	if (atomic_load(&VB_CQ(q->base.send_cq)->err) || atomic_load(&VB_CQ(q->base.recv_cq)->err))
		return -EIO; /* a CQ of it failed meanwhile (verbs_async.c) */
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = q;
	ia.send_cq = VB_CQ(q->base.send_cq)->cq;
	ia.recv_cq = VB_CQ(q->base.recv_cq)->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = q->base.attr.sq_sig_all ? 1 : 0;
	ia.cap.max_send_wr = q->base.attr.max_send_wr;
	ia.cap.max_recv_wr = q->base.attr.max_recv_wr;
	ia.cap.max_send_sge = RR_MAX(q->base.attr.max_send_sge, 1u);
	ia.cap.max_recv_sge = RR_MAX(q->base.attr.max_recv_sge, 1u);
	if (q->base.srq) {
		/* Receives from the shared queue: the QP has none of its own */
		ia.srq = VB_SRQ(q->base.srq)->srq;
		ia.cap.max_recv_wr = 0;
		ia.cap.max_recv_sge = 0;
	}
	ia.cap.max_inline_data = q->base.attr.max_inline;
	pthread_mutex_lock(&q->lock);
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	if (vb_has_flush(c)) {
		struct ibv_qp_init_attr_ex ix;

		memset(&ix, 0, sizeof(ix));
		ix.qp_context = ia.qp_context;
		ix.send_cq = ia.send_cq;
		ix.recv_cq = ia.recv_cq;
		ix.qp_type = ia.qp_type;
		ix.sq_sig_all = ia.sq_sig_all;
		ix.cap = ia.cap;
		ix.srq = ia.srq;
		ix.pd = VB_PD(q->base.pd)->pd;
		ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ix.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_INV |
				    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ |
				    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
				    IBV_QP_EX_WITH_FLUSH;
		if (rdma_create_qp_ex(cm, &ix) != 0) {
			rc = cm_err();
			pthread_mutex_unlock(&q->lock);
			return rc;
		}
		ia.cap = ix.cap;
		q->qpx = ibv_qp_to_qp_ex(cm->qp);
	} else
#endif
	if (rdma_create_qp(cm, VB_PD(q->base.pd)->pd, &ia) != 0) {
		rc = cm_err();
		pthread_mutex_unlock(&q->lock);
		return rc;
	}
	iq = cm->qp;
	/* the device may grant deeper queues than asked (rxe rounds up):
	 * reported (qp->attr) only when the CQs have room for them too,
	 * else the QP says what was asked and counted */
	if (vb_qp_charge(q, ia.cap.max_send_wr > q->charged_send ?
			 ia.cap.max_send_wr - q->charged_send : 0,
			 !q->base.srq && ia.cap.max_recv_wr > q->charged_recv ?
			 ia.cap.max_recv_wr - q->charged_recv : 0) < 0) {
		ia.cap.max_send_wr = q->charged_send;
		if (!q->base.srq)
			ia.cap.max_recv_wr = q->charged_recv;
	}
	/* held receives, in order */
	while (q->held) {
		struct vb_precv *p = q->held;
		struct ibv_recv_wr w = {.wr_id = p->wr_id, .sg_list = p->sge,
					.num_sge = (int)p->num_sge}, *bad;

		rc = vb_err(ibv_post_recv(iq, &w, &bad));
		if (rc < 0) {
			pthread_mutex_unlock(&q->lock);
			rdma_destroy_qp(cm);
			return rc;
		}
		q->held = p->next;
		q->nheld--;
		rr_free(q->base.pd->ctx->env, p);
	}
	q->held_tail = &q->held;
	q->base.qp_num = iq->qp_num;
	q->base.attr.max_send_wr = RR_MAX(q->base.attr.max_send_wr, ia.cap.max_send_wr);
	q->base.attr.max_recv_wr = RR_MAX(q->base.attr.max_recv_wr, ia.cap.max_recv_wr);
	q->base.attr.max_inline = RR_MAX(q->base.attr.max_inline, ia.cap.max_inline_data);
	atomic_store(&q->ibv, iq);
	pthread_mutex_unlock(&q->lock);
	pthread_mutex_lock(&c->qlock);
	q->cm = cm;
	q->next = c->qps;
	c->qps = q;
	pthread_mutex_unlock(&c->qlock);
	return 0;
}

/* Undoes rr_verbs_qp_attach (the cm id is going away). */
void rr_verbs_qp_detach(struct vb_qp *q, struct rdma_cm_id *cm)
{
	struct vb_ctx *c = VB_CTX(q->base.pd->ctx);

	if (!atomic_load(&q->ibv))
		return;
	pthread_mutex_lock(&c->qlock);
	for (struct vb_qp **pp = &c->qps; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	q->cm = NULL;
	pthread_mutex_unlock(&c->qlock);
	pthread_mutex_lock(&q->lock);
	atomic_store(&q->ibv, NULL);
	pthread_mutex_lock(&q->post_lock);
	q->qpx = NULL;
	pthread_mutex_unlock(&q->post_lock);
	pthread_mutex_unlock(&q->lock);
	rdma_destroy_qp(cm);
}

static int vb_new_mw_rkey(struct vb_qp *q, uint32_t cur, uint32_t *out)
{
	uint8_t k;

	do
		rr_random(q->base.pd->ctx->env, &k, 1);
	while (k == (uint8_t)cur);
	*out = (cur & ~0xffu) | k;
	return 0;
}

/* Converts one WR; *@new_rkey gets the bind's new rkey (BIND_MW). */
static int vb_conv_send(struct vb_qp *q, const struct rpcrdma_send_wr *wr, struct ibv_send_wr *w,
			uint32_t *new_rkey)
{
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->sg_list = (struct ibv_sge *)(uintptr_t)wr->sg_list;
	w->num_sge = (int)wr->num_sge;
	if (wr->flags & RPCRDMA_SEND_SIGNALED)
		w->send_flags |= IBV_SEND_SIGNALED;
	if (wr->flags & RPCRDMA_SEND_SOLICITED)
		w->send_flags |= IBV_SEND_SOLICITED;
	if (wr->flags & RPCRDMA_SEND_INLINE)
		w->send_flags |= IBV_SEND_INLINE;
	if (wr->flags & RPCRDMA_SEND_FENCE)
		w->send_flags |= IBV_SEND_FENCE;
	switch (wr->opcode) {
	case RPCRDMA_WR_SEND:
		w->opcode = IBV_WR_SEND;
		break;
	case RPCRDMA_WR_SEND_WITH_INV:
		w->opcode = IBV_WR_SEND_WITH_INV;
		w->invalidate_rkey = wr->u.send.invalidate_stag;
		/* libsiw (rdma-core 44) takes the Invalidate STag from
		 * wr.rdma.rkey, not invalidate_rkey (docs/interop.md finding 1);
		 * wr.rdma is unused for Sends, so this is harmless elsewhere. */
		w->wr.rdma.rkey = wr->u.send.invalidate_stag;
		break;
	case RPCRDMA_WR_RDMA_WRITE:
		w->opcode = IBV_WR_RDMA_WRITE;
		w->wr.rdma.remote_addr = wr->u.rdma.remote_offset;
		w->wr.rdma.rkey = wr->u.rdma.stag;
		break;
	case RPCRDMA_WR_RDMA_READ:
		w->opcode = IBV_WR_RDMA_READ;
		w->wr.rdma.remote_addr = wr->u.rdma.remote_offset;
		w->wr.rdma.rkey = wr->u.rdma.stag;
		break;
	case RPCRDMA_WR_BIND_MW: {
		struct vb_mw *mw = VB_MW(RR_BASE(mw, wr->u.bind.mw));
		struct vb_mr *mr = VB_MR(RR_BASE(mr, wr->u.bind.mr));

		w->opcode = IBV_WR_BIND_MW;
		vb_new_mw_rkey(q, mw->base.rkey, new_rkey);
		w->bind_mw.mw = mw->mw;
		w->bind_mw.rkey = *new_rkey;
		w->bind_mw.bind_info.mr = mr->mr;
		w->bind_mw.bind_info.addr = wr->u.bind.addr;
		w->bind_mw.bind_info.length = wr->u.bind.length;
		w->bind_mw.bind_info.mw_access_flags =
			(unsigned)vb_access(wr->u.bind.access & ~RPCRDMA_ACCESS_LOCAL_WRITE);
		break;
	}
	case RPCRDMA_WR_LOCAL_INV:
		w->opcode = IBV_WR_LOCAL_INV;
		w->invalidate_rkey = wr->u.local_inv.stag;
		break;
	case RPCRDMA_WR_RDMA_COMMIT:
	default:
		return -EOPNOTSUPP;
	}
	return 0;
}

/* RDMA Commit as one IBV_WR_FLUSH (range level) through the extended QP:
 * IBV_FLUSH_PERSISTENT, or IBV_FLUSH_GLOBAL with RPCRDMA_SEND_VISIBLE; the
 * region's STag and offset name the remote range. Called with post_lock. */
static int vb_post_commit(struct vb_qp *q, const struct rpcrdma_send_wr *wr)
{
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	const struct vb_ctx *c = VB_CTX(q->base.pd->ctx);
	const struct rpcrdma_remote_region *r = wr->u.commit.regions;
	struct ibv_qp_ex *qx = q->qpx;
	bool visible = (wr->flags & RPCRDMA_SEND_VISIBLE) != 0;
	unsigned int flags = 0;

	if (!qx || !atomic_load(&q->commit_tx) ||
	    !(visible ? c->flush_global : c->flush_persistent))
		return -EOPNOTSUPP;
	if (wr->u.commit.num_regions != 1)
		return -EINVAL; /* caps.max_commit_regions is 1 */
	if (wr->flags & RPCRDMA_SEND_SIGNALED)
		flags |= IBV_SEND_SIGNALED;
	if (wr->flags & RPCRDMA_SEND_FENCE)
		flags |= IBV_SEND_FENCE;
	ibv_wr_start(qx);
	qx->wr_id = wr->wr_id;
	qx->wr_flags = flags;
	ibv_wr_flush(qx, r->stag, r->offset, r->length,
		     visible ? IBV_FLUSH_GLOBAL : IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	return vb_err(ibv_wr_complete(qx));
#else
	RR_UNUSED(q);
	RR_UNUSED(wr);
	return -EOPNOTSUPP;
#endif
}

/* The upper layer's Commit decision (rpcrdma_qp_set_commit): posting
 * Commits is allowed or not; the device serves the peer's FLUSHes to our
 * flush-enabled registrations either way. */
int rr_verbs_set_commit(struct rr_qp *qp, bool enable)
{
	if (!vb_has_flush(VB_CTX(qp->pd->ctx)))
		return -EOPNOTSUPP;
	atomic_store(&VB_QP(qp)->commit_tx, enable);
	return 0;
}

static int vb_post_send_locked(struct vb_qp *q, struct ibv_qp *iq, struct rpcrdma_send_wr *wr,
				struct rpcrdma_send_wr **bad)
{
	while (wr) {
		struct ibv_send_wr w[VB_BATCH], *ibad = NULL;
		struct rpcrdma_send_wr *src[VB_BATCH];
		uint32_t rkeys[VB_BATCH];
		int n = 0, conv = 0, rc;

		if (wr->opcode == RPCRDMA_WR_RDMA_COMMIT) {
			int rc2 = vb_post_commit(q, wr);

			if (rc2 < 0) {
				*bad = wr;
				return rc2;
			}
			wr = wr->next;
			continue;
		}
		while (wr && n < VB_BATCH && wr->opcode != RPCRDMA_WR_RDMA_COMMIT) {
			conv = vb_conv_send(q, wr, &w[n], &rkeys[n]);
			if (conv < 0)
				break;
			if (n)
				w[n - 1].next = &w[n];
			src[n++] = wr;
			wr = wr->next;
		}
		if (n) {
			rc = vb_err(ibv_post_send(iq, w, &ibad));
			int posted = rc < 0 ? (ibad ? (int)(ibad - w) : 0) : n;

			/* A bound type 2 window has the new rkey; ibv_mw.rkey is
			 * the consumer's to update (providers such as rxe check
			 * the next bind against it). */
			for (int i = 0; i < posted; i++) {
				if (src[i]->opcode == RPCRDMA_WR_BIND_MW) {
					struct rr_mw *bmw = RR_BASE(mw, src[i]->u.bind.mw);

					bmw->rkey = rkeys[i];
					bmw->to = src[i]->u.bind.addr;
					VB_MW(bmw)->mw->rkey = rkeys[i];
				}
			}
			if (rc < 0) {
				*bad = src[RR_MIN(posted, n - 1)];
				return rc;
			}
		}
		if (conv < 0) {
			*bad = wr;
			return conv;
		}
	}
	return 0;
}

int rr_verbs_post_send(struct rr_qp *qp, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad)
{
	struct vb_qp *q = VB_QP(qp);
	struct ibv_qp *iq = atomic_load(&q->ibv);
	int rc;

	if (!iq) {
		*bad = wr;
		return -ENOTCONN;
	}
	/* QPs of a FLUSH-capable context are extended QPs (rr_verbs_qp_attach) */
	if (!vb_has_flush(VB_CTX(qp->pd->ctx)))
		return vb_post_send_locked(q, iq, wr, bad);
	pthread_mutex_lock(&q->post_lock);
	rc = vb_post_send_locked(q, iq, wr, bad);
	pthread_mutex_unlock(&q->post_lock);
	return rc;
}

int rr_verbs_post_recv(struct rr_qp *qp, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad)
{
	struct vb_qp *q = VB_QP(qp);
	struct ibv_qp *iq = atomic_load(&q->ibv);
	const struct rpcrdma_env *env = qp->pd->ctx->env;

	if (!iq) {
		pthread_mutex_lock(&q->lock);
		iq = atomic_load(&q->ibv);
		if (!iq) {
			/* not connected yet: hold them, posted at creation */
			for (; wr; wr = wr->next) {
				struct vb_precv *p;

				if (q->nheld >= q->base.attr.max_recv_wr) {
					pthread_mutex_unlock(&q->lock);
					*bad = wr;
					return -ENOMEM;
				}
				p = rr_alloc(env, sizeof(*p) + wr->num_sge * sizeof(struct ibv_sge));
				if (!p) {
					pthread_mutex_unlock(&q->lock);
					*bad = wr;
					return -ENOMEM;
				}
				p->next = NULL;
				p->wr_id = wr->wr_id;
				p->num_sge = wr->num_sge;
				if (wr->num_sge)
					memcpy(p->sge, wr->sg_list, wr->num_sge * sizeof(struct ibv_sge));
				*q->held_tail = p;
				q->held_tail = &p->next;
				q->nheld++;
			}
			pthread_mutex_unlock(&q->lock);
			return 0;
		}
		pthread_mutex_unlock(&q->lock);
	}
	while (wr) {
		struct ibv_recv_wr w[VB_BATCH], *ibad = NULL;
		struct rpcrdma_recv_wr *first = wr;
		int n = vb_recv_batch(w, &wr), rc;

		rc = vb_err(ibv_post_recv(iq, w, &ibad));
		if (rc < 0) {
			*bad = vb_recv_failed(first, w, ibad, n);
			return rc;
		}
	}
	return 0;
}

int vb_recv_batch(struct ibv_recv_wr *w, struct rpcrdma_recv_wr **wr)
{
	int n = 0;

	/* struct rpcrdma_sge is laid out as ibv_sge: verbs.h checks it */
	for (; *wr && n < VB_BATCH; *wr = (*wr)->next, n++) {
		memset(&w[n], 0, sizeof(w[n]));
		w[n].wr_id = (*wr)->wr_id;
		w[n].sg_list = (struct ibv_sge *)(uintptr_t)(*wr)->sg_list;
		w[n].num_sge = (int)(*wr)->num_sge;
		if (n)
			w[n - 1].next = &w[n];
	}
	return n;
}

struct rpcrdma_recv_wr *vb_recv_failed(struct rpcrdma_recv_wr *first,
				       const struct ibv_recv_wr *w,
				       const struct ibv_recv_wr *ibad, int n)
{
	int i = ibad ? RR_MIN((int)(ibad - w), n - 1) : 0;

	while (i-- > 0)
		first = first->next;
	return first;
}
