/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma-core provider ("verbs"): libibverbs + librdmacm behind the
 * provider ops table (src/rdma/provider.h), for RDMA NICs and the kernel's
 * siw (iWARP, RFC 5040/5041/5044) and rxe (RoCEv2) devices.
 *
 * Mapping:
 *  - context = one device from rdma_get_devices(), so that PDs, CQs and the
 *    rdma_cm ids share one ibv_context; a connection whose route resolves to
 *    another device fails with -ENODEV (UNREACHABLE event / accept error).
 *  - long-lived MRs = ibv_reg_mr; re-registration registers the new range
 *    before deregistering the old one, so the new keys always differ (the
 *    key byte of an MR is the device's choice).
 *  - invalidatable registrations = type 2 memory windows (IBV_MW_TYPE_2,
 *    bound with IBV_WR_BIND_MW; this provider draws the key byte from the
 *    env's randomness, never the current one) where the device reports
 *    IBV_DEVICE_MEM_WINDOW_TYPE_2B (rxe); otherwise (siw) windows answer
 *    -EOPNOTSUPP and the caps say no RPCRDMA_CAP_INVALIDATABLE /
 *    RPCRDMA_CAP_REMOTE_INV, so the transport does not advertise remote
 *    invalidation (RFC 8797 R bit). Send With Invalidate can still be posted
 *    (RPCRDMA_CAP_SEND_INV) on devices with memory management extensions.
 *  - RDMA Commit = IBV_WR_FLUSH (IBTA 1.5 FLUSH, range level), one region per
 *    Commit WR, posted with the extended-QP API ibv_wr_flush() when built
 *    against rdma-core >= 45 (RPCRDMA_HAVE_IBV_FLUSH, a configure check) and
 *    the device reports the placement type in ibv_query_device_ex():
 *    IB_UVERBS_DEVICE_FLUSH_PERSISTENT -> RPCRDMA_CAP_COMMIT + _DURABLE
 *    (IBV_FLUSH_PERSISTENT to registrations with IBV_ACCESS_FLUSH_PERSISTENT,
 *    from RPCRDMA_MR_DURABLE), IB_UVERBS_DEVICE_FLUSH_GLOBAL ->
 *    RPCRDMA_CAP_COMMIT_VISIBLE (IBV_FLUSH_GLOBAL with RPCRDMA_SEND_VISIBLE,
 *    to registrations with IBV_ACCESS_FLUSH_GLOBAL, from RPCRDMA_MR_VISIBLE).
 *    The device decides which memory it can persist (rxe: persistent-memory
 *    pages only): a durable registration it refuses while the same one
 *    without the persistent flag succeeds answers -EOPNOTSUPP. The FLUSH
 *    responder is the device (no code of ours runs), so it serves every
 *    registration with the flags; rpcrdma_qp_set_commit / RPCRDMA_CONN_COMMIT
 *    only allow posting. Otherwise, as with Debian 12's rdma-core 44 or Linux
 *    6.1, the caps say no Commit and Commits answer -EOPNOTSUPP (never a
 *    silent no-op).
 *  - QPs are created on the rdma_cm id (rdma_create_qp) once the route is
 *    known (active side) or at accept (passive side); receives posted before
 *    that are held and posted at creation. Sends before then: -ENOTCONN.
 *  - shared receive queues = ibv_create_srq (verbs_srq.c) where the device
 *    reports max_srq; a QP takes one at creation (ibv_qp_init_attr.srq).
 *    The limit event is IBV_EVENT_SRQ_LIMIT_REACHED from the context's
 *    asynchronous events. QPs must share the SRQ's PD (no
 *    RPCRDMA_CAP_SRQ_ANY_PD) and have no receive quota.
 *  - CQ fd = the completion channel fd (non-blocking); CM fd = the rdma_cm
 *    event channel fd (non-blocking). Internal rdma_cm steps (address and
 *    route resolution) are driven inside rpcrdma_cm_get_event.
 *  - Private data limits (rdma_connect(3), rdma_accept(3), IB CM REJ): IB and
 *    RoCE 56 connect / 196 accept / 148 reject; iWARP 252 (MPA 256 minus the
 *    4-byte revision-2 IRD/ORD block, as siw). IB delivers the whole
 *    (zero-padded) private data area to the receiver: consumers must accept
 *    trailing bytes (RFC 8797 section 5.2 asks them to).
 * Verbs' positive errno returns and librdmacm's -1 + errno are converted to
 * negative errno here. */
#include "rdma/verbs/verbs.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- context ---- */

/* The device rdma_cm would use for @addr: the one owning it (@passive:
 * bind) or the one the route to it leads to (active: synchronous address
 * resolution, at most 2 s). NULL for a wildcard address or when it cannot be
 * told (then the caller takes the first device). The ibv_context pointers
 * come from the same rdma_cm device list as rdma_get_devices() returns. */
static struct ibv_context *vb_device_for_addr(const struct sockaddr *addr, bool passive)
{
	struct rdma_cm_id *id = NULL;
	struct ibv_context *dev = NULL;
	struct sockaddr_storage ss;
	int rc;

	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return NULL;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, addr, addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						   sizeof(struct sockaddr_in6));
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) != 0)
		return NULL;
	if (passive) {
		/* port 0: only the device is wanted, not the port */
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = 0;
		rc = rdma_bind_addr(id, (struct sockaddr *)&ss);
	} else {
		rc = rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, 2000);
	}
	if (rc == 0)
		dev = id->verbs;
	rdma_destroy_id(id);
	return dev;
}

static int vb_open(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		   struct rr_context **out)
{
	struct ibv_context **devs;
	struct vb_ctx *c;
	int n = 0, pick = -1, rc;

	/* No devices, no kernel support (ENOSYS on this kind of host) or no
	 * matching name: all mean "no usable device". */
	devs = rdma_get_devices(&n);
	if (!devs)
		return -ENODEV;
	if (n == 0) {
		rdma_free_devices(devs);
		return -ENODEV;
	}
	if (!attr->device && attr->addr) {
		struct ibv_context *by = vb_device_for_addr(attr->addr, attr->passive);

		for (int i = 0; i < n && by && pick < 0; i++)
			if (devs[i] == by || devs[i]->device == by->device)
				pick = i;
		if (by && pick < 0) {
			rdma_free_devices(devs);
			return -ENODEV;
		}
	}
	for (int i = 0; i < n && pick < 0; i++)
		if (!attr->device || strcmp(ibv_get_device_name(devs[i]->device), attr->device) == 0)
			pick = i;
	if (pick < 0) {
		rdma_free_devices(devs);
		return -ENODEV;
	}
	c = rr_zalloc(env, sizeof(*c));
	if (!c) {
		rdma_free_devices(devs);
		return -ENOMEM;
	}
	c->devs = devs;
	c->verbs = devs[pick];
	if (ibv_query_device(c->verbs, &c->attr) != 0 ||
	    ibv_query_port(c->verbs, 1, &c->port) != 0) {
		rdma_free_devices(devs);
		rr_free(env, c);
		return -ENODEV;
	}
	if (c->verbs->device->transport_type == IBV_TRANSPORT_IWARP)
		c->transport = RPCRDMA_TRANSPORT_IWARP;
	else if (c->port.link_layer == IBV_LINK_LAYER_ETHERNET)
		c->transport = RPCRDMA_TRANSPORT_ROCE;
	else
		c->transport = RPCRDMA_TRANSPORT_IB;
	/* Linux rxe (seen on 6.1) writes the kernel's IB_WC_WITH_INVALIDATE
	 * (bit 2) into the user-mapped CQ, where libibverbs reads bit 2 as
	 * IBV_WC_IP_CSUM_OK, which never applies to an RC receive; the STag
	 * is in invalidated_rkey as it should be. Accept both bits there. */
	c->with_inv_flags = IBV_WC_WITH_INV;
	if (c->attr.vendor_id == RR_RXE_VENDOR_ID)
		c->with_inv_flags |= IBV_WC_IP_CSUM_OK;
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	{
		struct ibv_device_attr_ex ax;

		memset(&ax, 0, sizeof(ax));
		if (ibv_query_device_ex(c->verbs, NULL, &ax) == 0) {
			c->flush_persistent = (ax.device_cap_flags_ex & VB_DEVICE_FLUSH_PERSISTENT) != 0;
			c->flush_global = (ax.device_cap_flags_ex & VB_DEVICE_FLUSH_GLOBAL) != 0;
		}
	}
#endif
	if (pthread_mutex_init(&c->qlock, NULL) != 0) {
		rdma_free_devices(devs);
		rr_free(env, c);
		return -ENOMEM;
	}
	if (pthread_mutex_init(&c->alock, NULL) != 0) {
		pthread_mutex_destroy(&c->qlock);
		rdma_free_devices(devs);
		rr_free(env, c);
		return -ENOMEM;
	}
	rc = vb_async_start(c);
	if (rc < 0) {
		pthread_mutex_destroy(&c->alock);
		pthread_mutex_destroy(&c->qlock);
		rdma_free_devices(devs);
		rr_free(env, c);
		return rc;
	}
	*out = &c->base;
	return 0;
}

static void vb_close(struct rr_context *ctx)
{
	struct vb_ctx *c = VB_CTX(ctx);

	vb_async_stop(c);
	pthread_mutex_destroy(&c->qlock);
	pthread_mutex_destroy(&c->alock);
	rdma_free_devices(c->devs);
	rr_free(ctx->env, c);
}

static bool vb_has_mw2(const struct vb_ctx *c)
{
	return (c->attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
}

/* Why Commit is or is not here: the library, then the kernel and device. */
static void vb_commit_note(const struct vb_ctx *c, char *buf, size_t n)
{
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	if (vb_has_flush(c))
		snprintf(buf, n, "IBV_WR_FLUSH:%s%s (device %.32s)",
			 c->flush_persistent ? " persistent" : "", c->flush_global ? " global" : "",
			 ibv_get_device_name(c->verbs->device));
	else
		snprintf(buf, n, "none: %.32s reports no FLUSH (kernel/device; rxe has it since "
			 "Linux 6.2, siw not)", ibv_get_device_name(c->verbs->device));
#else
	RR_UNUSED(c);
	snprintf(buf, n, "none: built against rdma-core without IBV_WR_FLUSH (needs >= 45)");
#endif
}

static int vb_query(struct rr_context *ctx, struct rpcrdma_caps *caps)
{
	struct vb_ctx *c = VB_CTX(ctx);
	const struct ibv_device_attr *a = &c->attr;

	caps->flags = RPCRDMA_CAP_SOLICITED;
	if (vb_has_mw2(c))
		caps->flags |= RPCRDMA_CAP_INVALIDATABLE | RPCRDMA_CAP_REMOTE_INV;
	if (a->device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS)
		caps->flags |= RPCRDMA_CAP_SEND_INV;
	caps->transport = c->transport;
	caps->max_sge = (uint32_t)RR_MAX(a->max_sge, 0);
	caps->max_inline = 0; /* device-specific: granted per QP (rpcrdma_qp_query) */
	caps->max_qp_wr = (uint32_t)RR_MAX(a->max_qp_wr, 0);
	caps->max_cqe = (uint32_t)RR_MAX(a->max_cqe, 0);
	caps->max_ird = (uint32_t)RR_MIN(RR_MAX(a->max_qp_rd_atom, 0), 255);
	caps->max_ord = (uint32_t)RR_MIN(RR_MAX(a->max_qp_init_rd_atom, 0), 255);
	caps->max_msg_size = c->port.max_msg_sz;
	caps->max_commit_regions = vb_has_flush(c) ? 1 : 0; /* a FLUSH names one range */
	if (c->flush_persistent)
		caps->flags |= RPCRDMA_CAP_COMMIT | RPCRDMA_CAP_DURABLE;
	if (c->flush_global)
		caps->flags |= RPCRDMA_CAP_COMMIT_VISIBLE;
	caps->max_mr_size = a->max_mr_size;
	if (a->max_srq > 0 && a->max_srq_wr > 0) {
		caps->flags |= RPCRDMA_CAP_SRQ;   /* QPs must share the SRQ's PD */
		caps->max_srq_wr = (uint32_t)a->max_srq_wr;
	}
	if (c->transport == RPCRDMA_TRANSPORT_IWARP) {
		caps->max_private_data_connect = 252;
		caps->max_private_data_accept = 252;
		caps->max_private_data_reject = 252;
	} else {
		caps->max_private_data_connect = 56;
		caps->max_private_data_accept = 196;
		caps->max_private_data_reject = 148;
	}
	snprintf(caps->provider, sizeof(caps->provider), "verbs");
	snprintf(caps->device, sizeof(caps->device), "%s", ibv_get_device_name(c->verbs->device));
	vb_commit_note(c, caps->commit, sizeof(caps->commit));
	return 0;
}

static int vb_conn_query(struct rr_cm_id *bid, struct rpcrdma_conn_info *info)
{
	struct vb_id *id = VB_ID(bid);
	int rc = vb_query(bid->ch->ctx, &info->caps);

	if (rc < 0)
		return rc;
	info->ird = id->ird;
	info->ord = id->ord;
	if (id->qp) {
		info->caps.max_inline = id->qp->base.attr.max_inline;
		/* narrowed to this connection: may Commits be posted? */
		if (!atomic_load(&id->qp->commit_tx))
			info->caps.flags &= ~(RPCRDMA_CAP_COMMIT | RPCRDMA_CAP_COMMIT_VISIBLE);
	}
	return 0;
}

/* ---- PD, MR, MW ---- */

static int vb_alloc_pd(struct rr_context *ctx, struct rr_pd **out)
{
	struct vb_pd *p = rr_zalloc(ctx->env, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->pd = ibv_alloc_pd(VB_CTX(ctx)->verbs);
	if (!p->pd) {
		int err = cm_err();

		rr_free(ctx->env, p);
		return err;
	}
	*out = &p->base;
	return 0;
}

static int vb_dealloc_pd(struct rr_pd *pd)
{
	struct vb_pd *p = VB_PD(pd);
	int rc = vb_err(ibv_dealloc_pd(p->pd));

	if (rc == 0)
		rr_free(pd->ctx->env, p);
	return rc;
}

static int vb_reg(struct rr_pd *pd, const struct rpcrdma_mr_attr *a, struct ibv_mr **out)
{
	struct vb_ctx *c = VB_CTX(pd->ctx);
	int access = vb_access(a->access), persist = 0, err;

	if ((a->flags & RPCRDMA_MR_DURABLE) && !c->flush_persistent)
		return -EOPNOTSUPP; /* no persistent FLUSH here */
	if ((a->flags & RPCRDMA_MR_VISIBLE) && !c->flush_global)
		return -EOPNOTSUPP; /* no global-visibility FLUSH here */
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	if (a->flags & RPCRDMA_MR_DURABLE)
		persist = IBV_ACCESS_FLUSH_PERSISTENT;
	if (a->flags & RPCRDMA_MR_VISIBLE)
		access |= IBV_ACCESS_FLUSH_GLOBAL;
#endif
	if ((a->access & RPCRDMA_ACCESS_MW_BIND) && !vb_has_mw2(c))
		return -EOPNOTSUPP;
	if (a->length > (uint64_t)SIZE_MAX)
		return -EINVAL;
	*out = ibv_reg_mr(VB_PD(pd)->pd, a->addr, (size_t)a->length, access | persist);
	if (*out)
		return 0;
	err = cm_err();
	if (persist && err == -EINVAL) {
		/* rxe refuses IBV_ACCESS_FLUSH_PERSISTENT on memory that is
		 * not persistent memory ("Page can't be persistent"): tell that
		 * apart from a bad registration by trying without it. */
		struct ibv_mr *probe = ibv_reg_mr(VB_PD(pd)->pd, a->addr, (size_t)a->length, access);

		if (probe) {
			ibv_dereg_mr(probe);
			err = -EOPNOTSUPP; /* this memory cannot be made persistent here */
		}
	}
	return err;
}

static int vb_reg_mr(struct rr_pd *pd, const struct rpcrdma_mr_attr *a, struct rr_mr **out)
{
	struct vb_mr *m = rr_zalloc(pd->ctx->env, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	rc = vb_reg(pd, a, &m->mr);
	if (rc < 0) {
		rr_free(pd->ctx->env, m);
		return rc;
	}
	m->base.lkey = m->mr->lkey;
	m->base.rkey = m->mr->rkey;
	*out = &m->base;
	return 0;
}

static int vb_rereg_mr(struct rr_mr *mr, const struct rpcrdma_mr_attr *a)
{
	struct vb_mr *m = VB_MR(mr);
	struct ibv_mr *n;
	int rc = vb_reg(mr->pd, a, &n);

	if (rc < 0)
		return rc;
	rc = vb_err(ibv_dereg_mr(m->mr));
	if (rc < 0) {
		ibv_dereg_mr(n);
		return rc;
	}
	m->mr = n;
	mr->lkey = n->lkey;
	mr->rkey = n->rkey;
	return 0;
}

static int vb_dereg_mr(struct rr_mr *mr)
{
	int rc = vb_err(ibv_dereg_mr(VB_MR(mr)->mr));

	if (rc == 0)
		rr_free(mr->pd->ctx->env, VB_MR(mr));
	return rc;
}

static int vb_alloc_mw(struct rr_pd *pd, struct rr_mw **out)
{
	struct vb_mw *w;

	if (!vb_has_mw2(VB_CTX(pd->ctx)))
		return -EOPNOTSUPP;
	w = rr_zalloc(pd->ctx->env, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mw = ibv_alloc_mw(VB_PD(pd)->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		int err = cm_err();

		rr_free(pd->ctx->env, w);
		return err;
	}
	w->base.rkey = w->mw->rkey;
	*out = &w->base;
	return 0;
}

static int vb_dealloc_mw(struct rr_mw *mw)
{
	int rc = vb_err(ibv_dealloc_mw(VB_MW(mw)->mw));

	if (rc == 0)
		rr_free(mw->pd->ctx->env, VB_MW(mw));
	return rc;
}

/* ---- CQ ---- */

static int vb_create_cq(struct rr_context *ctx, const struct rpcrdma_cq_attr *a, struct rr_cq **out)
{
	struct vb_ctx *c = VB_CTX(ctx);
	struct vb_cq *q;
	int rc;

	if (a->cqe > (uint32_t)RR_MAX(c->attr.max_cqe, 0))
		return -EINVAL;
	q = rr_zalloc(ctx->env, sizeof(*q));
	if (!q)
		return -ENOMEM;
	atomic_init(&q->err, 0);
	if (pthread_mutex_init(&q->lock, NULL) != 0) {
		rr_free(ctx->env, q);
		return -ENOMEM;
	}
	q->ch = ibv_create_comp_channel(c->verbs);
	if (!q->ch) {
		rc = cm_err();
		goto fail;
	}
	rc = set_nonblock(q->ch->fd);
	if (rc < 0)
		goto fail_ch;
	q->cq = ibv_create_cq(c->verbs, (int)a->cqe, q, q->ch, 0);
	if (!q->cq) {
		rc = cm_err();
		goto fail_ch;
	}
	q->base.cqe = (uint32_t)q->cq->cqe;
	*out = &q->base;
	return 0;
fail_ch:
	ibv_destroy_comp_channel(q->ch);
fail:
	pthread_mutex_destroy(&q->lock);
	rr_free(ctx->env, q);
	return rc;
}

static int vb_destroy_cq(struct rr_cq *cq)
{
	struct vb_cq *q = VB_CQ(cq);
	int rc = vb_err(ibv_destroy_cq(q->cq));

	if (rc < 0)
		return rc;
	ibv_destroy_comp_channel(q->ch);
	pthread_mutex_destroy(&q->lock);
	rr_free(cq->ctx->env, q);
	return 0;
}

static enum rpcrdma_wc_status vb_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return RPCRDMA_WC_SUCCESS;
	case IBV_WC_LOC_LEN_ERR: return RPCRDMA_WC_LOC_LEN_ERR;
	case IBV_WC_LOC_QP_OP_ERR: return RPCRDMA_WC_LOC_QP_OP_ERR;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_LOC_ACCESS_ERR: return RPCRDMA_WC_LOC_PROT_ERR;
	case IBV_WC_WR_FLUSH_ERR: return RPCRDMA_WC_WR_FLUSH_ERR;
	case IBV_WC_MW_BIND_ERR: return RPCRDMA_WC_MW_BIND_ERR;
	case IBV_WC_REM_INV_REQ_ERR: return RPCRDMA_WC_REM_INV_REQ_ERR;
	case IBV_WC_REM_ACCESS_ERR: return RPCRDMA_WC_REM_ACCESS_ERR;
	case IBV_WC_REM_OP_ERR: return RPCRDMA_WC_REM_OP_ERR;
	case IBV_WC_REM_ABORT_ERR: return RPCRDMA_WC_REM_ABORT_ERR;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_RESP_TIMEOUT_ERR: return RPCRDMA_WC_RETRY_EXC_ERR;
	case IBV_WC_INV_EEC_STATE_ERR:
	case IBV_WC_INV_EECN_ERR: return RPCRDMA_WC_GENERAL_ERR;
	case IBV_WC_FATAL_ERR: return RPCRDMA_WC_FATAL_ERR;
	default: return RPCRDMA_WC_GENERAL_ERR;
	}
}

static enum rpcrdma_wc_opcode vb_opcode(enum ibv_wc_opcode o)
{
	switch (o) {
	case IBV_WC_SEND: return RPCRDMA_WC_SEND;
	case IBV_WC_RDMA_WRITE: return RPCRDMA_WC_RDMA_WRITE;
	case IBV_WC_RDMA_READ: return RPCRDMA_WC_RDMA_READ;
	case IBV_WC_BIND_MW: return RPCRDMA_WC_BIND_MW;
	case IBV_WC_LOCAL_INV: return RPCRDMA_WC_LOCAL_INV;
	case IBV_WC_RECV:
	case IBV_WC_RECV_RDMA_WITH_IMM: return RPCRDMA_WC_RECV;
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	case IBV_WC_FLUSH: return RPCRDMA_WC_COMMIT;
#endif
	default: return (enum rpcrdma_wc_opcode)0;
	}
}

static struct rr_qp *vb_find_qp(struct vb_ctx *c, uint32_t qp_num)
{
	for (struct vb_qp *q = c->qps; q; q = q->next) {
		struct ibv_qp *iq = atomic_load(&q->ibv);

		if (iq && iq->qp_num == qp_num)
			return &q->base;
	}
	return NULL;
}

static int vb_poll_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *out)
{
	struct vb_ctx *c = VB_CTX(cq->ctx);
	struct ibv_wc w[32];
	int got = 0;

	while (got < n) {
		int k = ibv_poll_cq(VB_CQ(cq)->cq, RR_MIN(n - got, 32), w);

		if (k <= 0) {
			/* a failed CQ (IBV_EVENT_CQ_ERR, verbs_async.c):
			 * its errno once what it held is taken */
			int err = atomic_load(&VB_CQ(cq)->err);

			if (got)
				return got;
			return k < 0 ? (err ? err : -EIO) : err;
		}
		pthread_mutex_lock(&c->qlock);
		for (int i = 0; i < k; i++) {

			struct rpcrdma_wc *o = &out[got + i];

			memset(o, 0, sizeof(*o));
			o->wr_id = w[i].wr_id;
			o->status = vb_status(w[i].status);
			o->opcode = vb_opcode(w[i].opcode);
			o->byte_len = w[i].byte_len;
			o->vendor_err = w[i].vendor_err;
			if (w[i].status == IBV_WC_SUCCESS && (w[i].opcode & IBV_WC_RECV) &&
			    (w[i].wc_flags & c->with_inv_flags)) {
				o->flags |= RPCRDMA_WC_WITH_INV;
				o->invalidated_stag = w[i].invalidated_rkey;
			}
			o->qp = (struct rpcrdma_qp *)(void *)vb_find_qp(c, w[i].qp_num);
		}
		pthread_mutex_unlock(&c->qlock);
		got += k;
		if (k < 32)
			break;
	}
	return got;
}

static int vb_arm_cq(struct rr_cq *cq, bool solicited_only)
{
	int err = atomic_load(&VB_CQ(cq)->err);

	if (err)
		return err;
	return vb_err(ibv_req_notify_cq(VB_CQ(cq)->cq, solicited_only ? 1 : 0));
}

static int vb_cq_fd(struct rr_cq *cq)
{
	return VB_CQ(cq)->ch->fd;
}

static int vb_cq_get_event(struct rr_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (ibv_get_cq_event(VB_CQ(cq)->ch, &ev_cq, &ev_ctx) != 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : cm_err();
	ibv_ack_cq_events(ev_cq, 1);
	return 1;
}

/* ---- the table ---- */

const struct rr_provider_ops rr_verbs_ops = {
	.name = "verbs",
	.open = vb_open,
	.close = vb_close,
	.query = vb_query,
	.alloc_pd = vb_alloc_pd,
	.dealloc_pd = vb_dealloc_pd,
	.reg_mr = vb_reg_mr,
	.rereg_mr = vb_rereg_mr,
	.dereg_mr = vb_dereg_mr,
	.alloc_mw = vb_alloc_mw,
	.dealloc_mw = vb_dealloc_mw,
	.create_cq = vb_create_cq,
	.destroy_cq = vb_destroy_cq,
	.poll_cq = vb_poll_cq,
	.arm_cq = vb_arm_cq,
	.cq_fd = vb_cq_fd,
	.cq_get_event = vb_cq_get_event,
	.create_qp = rr_verbs_create_qp,
	.destroy_qp = rr_verbs_destroy_qp,
	.post_send = rr_verbs_post_send,
	.post_recv = rr_verbs_post_recv,
	.create_srq = rr_verbs_create_srq,
	.destroy_srq = rr_verbs_destroy_srq,
	.post_srq_recv = rr_verbs_post_srq_recv,
	.arm_srq_limit = rr_verbs_arm_srq_limit,
	.srq_get_event = rr_verbs_srq_get_event,
	.create_channel = rr_verbs_create_channel,
	.destroy_channel = rr_verbs_destroy_channel,
	.channel_fd = rr_verbs_channel_fd,
	.get_event = rr_verbs_get_event,
	.listen = rr_verbs_listen,
	.connect = rr_verbs_connect,
	.accept = rr_verbs_accept,
	.reject = rr_verbs_reject,
	.disconnect = rr_verbs_disconnect,
	.destroy_id = rr_verbs_destroy_id,
	.local_addr = rr_verbs_local_addr,
	.peer_addr = rr_verbs_peer_addr,
	.conn_query = vb_conn_query,
	.set_commit = rr_verbs_set_commit,
};
