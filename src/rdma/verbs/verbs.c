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
 *  - RDMA Commit = IBV_WR_FLUSH (persistent placement, range) posted with the
 *    extended-QP API ibv_wr_flush(), when built against rdma-core >= 45
 *    (RPCRDMA_HAVE_IBV_FLUSH, a configure check) and the device reports
 *    IB_UVERBS_DEVICE_FLUSH_PERSISTENT; one region per Commit WR (a FLUSH
 *    names one range). Durable registrations then add
 *    IBV_ACCESS_FLUSH_PERSISTENT (the device decides whether the memory can
 *    be made persistent: rxe wants pmem). Otherwise, as with Debian 12's
 *    rdma-core 44, Commit and durable registrations are reported unsupported
 *    (never a silent no-op).
 *  - QPs are created on the rdma_cm id (rdma_create_qp) once the route is
 *    known (active side) or at accept (passive side); receives posted before
 *    that are held and posted at creation. Sends before then: -ENOTCONN.
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
#include "rdma/provider.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

_Static_assert(sizeof(struct rpcrdma_sge) == sizeof(struct ibv_sge), "sge layout");
_Static_assert(offsetof(struct rpcrdma_sge, addr) == offsetof(struct ibv_sge, addr), "sge");
_Static_assert(offsetof(struct rpcrdma_sge, length) == offsetof(struct ibv_sge, length), "sge");
_Static_assert(offsetof(struct rpcrdma_sge, lkey) == offsetof(struct ibv_sge, lkey), "sge");

#define VB_BATCH 16
#define RR_RXE_VENDOR_ID 0xffffffu /* Linux rdma_rxe's vendor_id */
#define VB_DEFAULT_TIMEOUT_MS 5000
#define VB_PDATA_MAX 255 /* rdma_conn_param.private_data_len is a uint8_t */

struct vb_qp;

struct vb_ctx {
	struct rr_context base;
	struct ibv_context *verbs;   /* from rdma_get_devices(): shared with rdma_cm */
	struct ibv_context **devs;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	enum rpcrdma_transport transport;
	unsigned int with_inv_flags;  /* wc_flags bits meaning "with invalidate" */
	bool flush;                   /* FLUSH with persistent placement */
	pthread_mutex_t qlock;       /* qps list (qp_num -> QP for completions) */
	struct vb_qp *qps;
};

struct vb_pd {
	struct rr_pd base;
	struct ibv_pd *pd;
};

struct vb_mr {
	struct rr_mr base;
	struct ibv_mr *mr;
};

struct vb_mw {
	struct rr_mw base;
	struct ibv_mw *mw;
};

struct vb_cq {
	struct rr_cq base;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
};

struct vb_precv {
	struct vb_precv *next;
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge sge[];
};

struct vb_qp {
	struct rr_qp base;
	pthread_mutex_t lock;             /* ibv creation vs held receives */
	struct ibv_qp *_Atomic ibv;
	struct ibv_qp_ex *qpx;            /* extended QP (FLUSH) or NULL */
	struct vb_precv *held, **held_tail;
	uint32_t nheld;
	struct vb_qp *next;               /* in vb_ctx.qps while ibv != NULL */
};

struct vb_ch {
	struct rr_cm_channel base;
	struct rdma_event_channel *ec;
};

struct vb_id {
	struct rr_cm_id base;
	struct rdma_cm_id *cm;
	struct vb_qp *qp;                 /* active side: to create at route */
	uint32_t timeout_ms;
	bool active;                      /* made by connect */
	uint8_t want_ird, want_ord;
	uint8_t pdata_len;
	uint8_t pdata[VB_PDATA_MAX];
	uint16_t peer_ird, peer_ord;      /* from the request / the accept */
	uint16_t ird, ord;                /* negotiated */
};

#define VB_CTX(c) RR_CONTAINER_OF((c), struct vb_ctx, base)
#define VB_PD(p) RR_CONTAINER_OF((p), struct vb_pd, base)
#define VB_MR(m) RR_CONTAINER_OF((m), struct vb_mr, base)
#define VB_MW(m) RR_CONTAINER_OF((m), struct vb_mw, base)
#define VB_CQ(c) RR_CONTAINER_OF((c), struct vb_cq, base)
#define VB_QP(q) RR_CONTAINER_OF((q), struct vb_qp, base)
#define VB_CH(c) RR_CONTAINER_OF((c), struct vb_ch, base)
#define VB_ID(i) RR_CONTAINER_OF((i), struct vb_id, base)

/* libibverbs returns a positive errno (sometimes -1 + errno). */
static int vb_err(int rc)
{
	if (rc > 0)
		return -rc;
	if (rc < 0)
		return errno > 0 ? -errno : -EIO;
	return 0;
}

/* librdmacm returns -1 and sets errno. */
static int cm_err(void)
{
	return errno > 0 ? -errno : -EIO;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

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
	int n = 0, pick = -1;

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
		if (ibv_query_device_ex(c->verbs, NULL, &ax) == 0 &&
		    (ax.device_cap_flags_ex & IB_UVERBS_DEVICE_FLUSH_PERSISTENT))
			c->flush = true;
	}
#endif
	if (pthread_mutex_init(&c->qlock, NULL) != 0) {
		rdma_free_devices(devs);
		rr_free(env, c);
		return -ENOMEM;
	}
	*out = &c->base;
	return 0;
}

static void vb_close(struct rr_context *ctx)
{
	struct vb_ctx *c = VB_CTX(ctx);

	pthread_mutex_destroy(&c->qlock);
	rdma_free_devices(c->devs);
	rr_free(ctx->env, c);
}

static bool vb_has_mw2(const struct vb_ctx *c)
{
	return (c->attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
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
	caps->max_commit_regions = 0;
	if (c->flush) {
		caps->flags |= RPCRDMA_CAP_COMMIT | RPCRDMA_CAP_DURABLE;
		caps->max_commit_regions = 1;
	}
	caps->max_mr_size = a->max_mr_size;
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

static int vb_access(uint32_t a)
{
	int f = 0;

	if (a & RPCRDMA_ACCESS_LOCAL_WRITE)
		f |= IBV_ACCESS_LOCAL_WRITE;
	if (a & RPCRDMA_ACCESS_REMOTE_WRITE)
		f |= IBV_ACCESS_REMOTE_WRITE;
	if (a & RPCRDMA_ACCESS_REMOTE_READ)
		f |= IBV_ACCESS_REMOTE_READ;
	if (a & RPCRDMA_ACCESS_MW_BIND)
		f |= IBV_ACCESS_MW_BIND;
	return f;
}

static int vb_reg(struct rr_pd *pd, const struct rpcrdma_mr_attr *a, struct ibv_mr **out)
{
	struct vb_ctx *c = VB_CTX(pd->ctx);

	int access = vb_access(a->access);

	if (a->flags & RPCRDMA_MR_DURABLE) {
		if (!c->flush)
			return -EOPNOTSUPP; /* no persistent flush here */
#ifdef RPCRDMA_HAVE_IBV_FLUSH
		access |= IBV_ACCESS_FLUSH_PERSISTENT;
#endif
	}
	if ((a->access & RPCRDMA_ACCESS_MW_BIND) && !vb_has_mw2(c))
		return -EOPNOTSUPP;
	if (a->length > (uint64_t)SIZE_MAX)
		return -EINVAL;
	*out = ibv_reg_mr(VB_PD(pd)->pd, a->addr, (size_t)a->length, access);
	return *out ? 0 : cm_err();
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

		if (k < 0)
			return got ? got : -EIO;
		if (k == 0)
			break;
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

/* ---- QP ---- */

static int vb_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *a, struct rr_qp **out)
{
	struct vb_ctx *c = VB_CTX(pd->ctx);
	struct vb_qp *q;

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
	atomic_init(&q->ibv, NULL);
	q->held_tail = &q->held;
	q->base.attr = *a;
	q->base.qp_num = 0;
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

static int vb_destroy_qp(struct rr_qp *qp)
{
	struct vb_qp *q = VB_QP(qp);
	const struct rpcrdma_env *env = qp->pd->ctx->env;

	/* the ibv QP went with its cm id (the dispatch layer made sure the
	 * id is gone) */
	vb_drop_held(q, env);
	pthread_mutex_destroy(&q->lock);
	rr_free(env, q);
	return 0;
}

/* Creates the verbs QP on @cm, posts the held receives, and publishes it. */
static int vb_qp_attach(struct vb_qp *q, struct rdma_cm_id *cm)
{
	struct vb_ctx *c = VB_CTX(q->base.pd->ctx);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *iq;
	int rc;

	if (cm->verbs != c->verbs)
		return -ENODEV; /* the route leads to another device */
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
	ia.cap.max_inline_data = q->base.attr.max_inline;
	pthread_mutex_lock(&q->lock);
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	if (c->flush) {
		struct ibv_qp_init_attr_ex ix;

		memset(&ix, 0, sizeof(ix));
		ix.qp_context = ia.qp_context;
		ix.send_cq = ia.send_cq;
		ix.recv_cq = ia.recv_cq;
		ix.qp_type = ia.qp_type;
		ix.sq_sig_all = ia.sq_sig_all;
		ix.cap = ia.cap;
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
	q->next = c->qps;
	c->qps = q;
	pthread_mutex_unlock(&c->qlock);
	return 0;
}

/* Undoes vb_qp_attach (the cm id is going away). */
static void vb_qp_detach(struct vb_qp *q, struct rdma_cm_id *cm)
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
	pthread_mutex_unlock(&c->qlock);
	pthread_mutex_lock(&q->lock);
	atomic_store(&q->ibv, NULL);
	q->qpx = NULL;
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

/* RDMA Commit as one IBV_WR_FLUSH (persistent, range) through the extended
 * QP; the region's STag and offset name the remote range. */
static int vb_post_commit(struct vb_qp *q, const struct rpcrdma_send_wr *wr)
{
#ifdef RPCRDMA_HAVE_IBV_FLUSH
	const struct rpcrdma_remote_region *r = wr->u.commit.regions;
	struct ibv_qp_ex *qx = q->qpx;
	unsigned int flags = 0;

	if (!qx)
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
	ibv_wr_flush(qx, r->stag, r->offset, r->length, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	return vb_err(ibv_wr_complete(qx));
#else
	RR_UNUSED(q);
	RR_UNUSED(wr);
	return -EOPNOTSUPP;
#endif
}

static int vb_post_send(struct rr_qp *qp, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad)
{
	struct vb_qp *q = VB_QP(qp);
	struct ibv_qp *iq = atomic_load(&q->ibv);

	if (!iq) {
		*bad = wr;
		return -ENOTCONN;
	}
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

static int vb_post_recv(struct rr_qp *qp, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad)
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
		struct rpcrdma_recv_wr *src[VB_BATCH];
		int n = 0, rc;

		while (wr && n < VB_BATCH) {
			memset(&w[n], 0, sizeof(w[n]));
			w[n].wr_id = wr->wr_id;
			w[n].sg_list = (struct ibv_sge *)(uintptr_t)wr->sg_list;
			w[n].num_sge = (int)wr->num_sge;
			if (n)
				w[n - 1].next = &w[n];
			src[n++] = wr;
			wr = wr->next;
		}
		rc = vb_err(ibv_post_recv(iq, w, &ibad));
		if (rc < 0) {
			*bad = src[ibad ? RR_MIN((int)(ibad - w), n - 1) : 0];
			return rc;
		}
	}
	return 0;
}

/* ---- CM ---- */

static int vb_create_channel(struct rr_context *ctx, struct rr_cm_channel **out)
{
	struct vb_ch *c = rr_zalloc(ctx->env, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->ec = rdma_create_event_channel();
	if (!c->ec) {
		rc = cm_err();
		rr_free(ctx->env, c);
		return rc;
	}
	rc = set_nonblock(c->ec->fd);
	if (rc < 0) {
		rdma_destroy_event_channel(c->ec);
		rr_free(ctx->env, c);
		return rc;
	}
	*out = &c->base;
	return 0;
}

static int vb_destroy_channel(struct rr_cm_channel *ch)
{
	rdma_destroy_event_channel(VB_CH(ch)->ec);
	rr_free(ch->ctx->env, VB_CH(ch));
	return 0;
}

static int vb_channel_fd(struct rr_cm_channel *ch)
{
	return VB_CH(ch)->ec->fd;
}

static struct vb_id *vb_id_new(struct rr_cm_channel *ch)
{
	return rr_zalloc(ch->ctx->env, sizeof(struct vb_id));
}

static int vb_listen(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		     int backlog, void *user_ctx, struct rr_cm_id **out)
{
	struct vb_id *id = vb_id_new(ch);
	int rc;

	RR_UNUSED(addrlen);
	if (!id)
		return -ENOMEM;
	if (rdma_create_id(VB_CH(ch)->ec, &id->cm, id, RDMA_PS_TCP) != 0) {
		rc = cm_err();
		rr_free(ch->ctx->env, id);
		return rc;
	}
	rr_cm_id_init(ch, &id->base, user_ctx, NULL, true);
	if (rdma_bind_addr(id->cm, (struct sockaddr *)(uintptr_t)addr) != 0 ||
	    rdma_listen(id->cm, backlog) != 0) {
		rc = cm_err();
		rr_cm_id_dropped(ch, &id->base);
		rdma_destroy_id(id->cm);
		rr_free(ch->ctx->env, id);
		return rc;
	}
	*out = &id->base;
	return 0;
}

static void vb_fill_param(struct rdma_conn_param *cp, const struct vb_id *id, uint8_t ird,
			  uint8_t ord)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = id->pdata_len ? id->pdata : NULL;
	cp->private_data_len = id->pdata_len;
	cp->responder_resources = ird;
	cp->initiator_depth = ord;
	cp->retry_count = 6;
	cp->rnr_retry_count = 7;
}

static int vb_connect(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		      socklen_t dstlen, const struct rpcrdma_conn_param *p, void *user_ctx,
		      struct rr_cm_id **out)
{
	struct vb_ctx *c = VB_CTX(ch->ctx);
	struct vb_id *id;
	int rc;

	RR_UNUSED(dstlen);
	if (p->private_data_len > VB_PDATA_MAX)
		return -EMSGSIZE;
	id = vb_id_new(ch);
	if (!id)
		return -ENOMEM;
	id->qp = VB_QP(qp);
	id->active = true;
	id->timeout_ms = p->timeout_ms ? p->timeout_ms : VB_DEFAULT_TIMEOUT_MS;
	id->want_ird = (uint8_t)RR_MIN(p->responder_resources,
				       (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_rd_atom, 0), 255));
	id->want_ord = (uint8_t)RR_MIN(p->initiator_depth,
				       (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_init_rd_atom, 0), 255));
	id->pdata_len = (uint8_t)p->private_data_len;
	if (p->private_data_len)
		memcpy(id->pdata, p->private_data, p->private_data_len);
	if (rdma_create_id(VB_CH(ch)->ec, &id->cm, id, RDMA_PS_TCP) != 0) {
		rc = cm_err();
		rr_free(ch->ctx->env, id);
		return rc;
	}
	rr_cm_id_init(ch, &id->base, user_ctx, qp, false);
	if (rdma_resolve_addr(id->cm, (struct sockaddr *)(uintptr_t)p->src_addr,
			      (struct sockaddr *)(uintptr_t)dst,
			      (int)RR_MIN(id->timeout_ms, (uint32_t)INT32_MAX)) != 0) {
		rc = cm_err();
		rr_cm_id_dropped(ch, &id->base);
		rdma_destroy_id(id->cm);
		rr_free(ch->ctx->env, id);
		return rc;
	}
	*out = &id->base;
	return 0;
}

static int vb_accept(struct rr_cm_id *bid, struct rr_qp *qp, const struct rpcrdma_conn_param *p)
{
	struct vb_id *id = VB_ID(bid);
	struct vb_ctx *c = VB_CTX(bid->ch->ctx);
	struct rdma_conn_param cp;
	int rc;

	if (p->private_data_len > VB_PDATA_MAX)
		return -EMSGSIZE;
	id->pdata_len = (uint8_t)p->private_data_len;
	if (p->private_data_len)
		memcpy(id->pdata, p->private_data, p->private_data_len);
	/* IRD: Reads we serve, at most what the peer will issue; ORD: Reads we
	 * issue, at most what the peer serves; both within the device. */
	id->ird = (uint16_t)RR_MIN(RR_MIN(p->responder_resources, id->peer_ord),
				   (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_rd_atom, 0), 255));
	id->ord = (uint16_t)RR_MIN(RR_MIN(p->initiator_depth, id->peer_ird),
				   (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_init_rd_atom, 0), 255));
	rc = vb_qp_attach(VB_QP(qp), id->cm);
	if (rc < 0)
		return rc;
	id->qp = VB_QP(qp);
	vb_fill_param(&cp, id, (uint8_t)id->ird, (uint8_t)id->ord);
	if (rdma_accept(id->cm, &cp) != 0) {
		rc = cm_err();
		vb_qp_detach(id->qp, id->cm);
		id->qp = NULL;
		return rc;
	}
	return 0;
}

static int vb_reject(struct rr_cm_id *bid, const void *data, uint16_t len)
{
	if (len > VB_PDATA_MAX)
		return -EMSGSIZE;
	if (rdma_reject(VB_ID(bid)->cm, data, (uint8_t)len) != 0)
		return cm_err();
	return 0;
}

static int vb_disconnect(struct rr_cm_id *bid)
{
	if (rdma_disconnect(VB_ID(bid)->cm) != 0)
		return cm_err();
	return 0;
}

static int vb_destroy_id(struct rr_cm_id *bid)
{
	struct vb_id *id = VB_ID(bid);

	if (id->qp)
		vb_qp_detach(id->qp, id->cm);
	if (rdma_destroy_id(id->cm) != 0)
		return cm_err();
	rr_free(bid->ch->ctx->env, id);
	return 0;
}

static int vb_copy_addr(const struct sockaddr *sa, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!sa)
		return -ENOTCONN;
	if (sa->sa_family == AF_INET)
		memcpy(ss, sa, sizeof(struct sockaddr_in));
	else if (sa->sa_family == AF_INET6)
		memcpy(ss, sa, sizeof(struct sockaddr_in6));
	else
		return -EAFNOSUPPORT;
	return 0;
}

static int vb_local_addr(struct rr_cm_id *bid, struct sockaddr_storage *ss)
{
	return vb_copy_addr(rdma_get_local_addr(VB_ID(bid)->cm), ss);
}

static int vb_peer_addr(struct rr_cm_id *bid, struct sockaddr_storage *ss)
{
	return vb_copy_addr(rdma_get_peer_addr(VB_ID(bid)->cm), ss);
}

static int vb_conn_query(struct rr_cm_id *bid, struct rpcrdma_conn_info *info)
{
	struct vb_id *id = VB_ID(bid);
	int rc = vb_query(bid->ch->ctx, &info->caps);

	if (rc < 0)
		return rc;
	info->ird = id->ird;
	info->ord = id->ord;
	if (id->qp)
		info->caps.max_inline = id->qp->base.attr.max_inline;
	return 0;
}

/* Fills @ev with the peer's private data of @e. */
static void vb_ev_pdata(struct rpcrdma_cm_event *ev, const struct rdma_cm_event *e)
{
	uint16_t n = e->param.conn.private_data ? e->param.conn.private_data_len : 0;

	n = RR_MIN(n, (uint16_t)RPCRDMA_PRIVATE_DATA_MAX);
	ev->private_data_len = n;
	if (n)
		memcpy(ev->private_data, e->param.conn.private_data, n);
	ev->peer_ird = e->param.conn.responder_resources;
	ev->peer_ord = e->param.conn.initiator_depth;
}

static int status_or(int st, int dflt)
{
	return st < 0 ? st : dflt;
}

/* Acts on one rdma_cm event. Returns 1 when @ev holds an event for the
 * caller, 0 for internal steps. *@destroy_new is set when a new id must be
 * destroyed after the event is acknowledged. */
static int vb_handle(struct vb_ch *ch, struct rdma_cm_event *e, struct rpcrdma_cm_event *ev,
		     struct rdma_cm_id **destroy_new)
{
	struct vb_id *id = e->id ? e->id->context : NULL;
	struct rdma_conn_param cp;
	int rc;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id->cm, (int)RR_MIN(id->timeout_ms, (uint32_t)INT32_MAX)) == 0)
			return 0;
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = cm_err();
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rc = vb_qp_attach(id->qp, id->cm);
		if (rc == 0) {
			vb_fill_param(&cp, id, id->want_ird, id->want_ord);
			if (rdma_connect(id->cm, &cp) == 0)
				return 0;
			rc = cm_err();
		}
		ev->type = rc == -ENODEV ? RPCRDMA_CM_UNREACHABLE : RPCRDMA_CM_ERROR;
		ev->status = rc;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = status_or(e->status, -ENETUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = status_or(e->status, -ETIMEDOUT);
		break;
	case RDMA_CM_EVENT_REJECTED: {
		struct vb_ctx *c = VB_CTX(ch->base.ctx);

		/* IB CM: reason 28 = consumer reject (carries the peer's
		 * private data); others (8 = no listener) are unreachable.
		 * iWARP reports -ECONNREFUSED for both. */
		if (c->transport != RPCRDMA_TRANSPORT_IWARP && e->status != 28) {
			ev->type = RPCRDMA_CM_UNREACHABLE;
			ev->status = -ECONNREFUSED;
		} else {
			ev->type = RPCRDMA_CM_REJECTED;
			ev->status = -ECONNREFUSED;
			vb_ev_pdata(ev, e);
		}
		break;
	}
	case RDMA_CM_EVENT_CONNECT_ERROR:
		ev->type = RPCRDMA_CM_ERROR;
		ev->status = status_or(e->status, -ECONNABORTED);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		struct vb_id *lid = e->listen_id ? e->listen_id->context : NULL;
		struct vb_id *nid = vb_id_new(&ch->base);

		if (!nid || !lid) {
			rr_free(ch->base.ctx->env, nid);
			rdma_reject(e->id, NULL, 0);
			*destroy_new = e->id;
			return 0;
		}
		nid->cm = e->id;
		e->id->context = nid;
		nid->timeout_ms = VB_DEFAULT_TIMEOUT_MS;
		rr_cm_id_created(&ch->base, &nid->base);
		ev->type = RPCRDMA_CM_CONNECT_REQUEST;
		ev->id = RR_PUB(cm_id, &nid->base);
		ev->listen_id = RR_PUB(cm_id, &lid->base);
		vb_ev_pdata(ev, e);
		/* A connection request's values come from the local side's
		 * point of view (iw_cm and the IB CM both swap the wire's):
		 * initiator_depth is what we may issue, the peer's IRD;
		 * responder_resources what we must serve, the peer's ORD.
		 * Taken unswapped, a Linux NFS client (IRD 128, ORD 0) left a
		 * server with ORD 0: every RDMA Read of a WRITE's Read chunk
		 * failed and the connection dropped. */
		ev->peer_ird = e->param.conn.initiator_depth;
		ev->peer_ord = e->param.conn.responder_resources;
		nid->peer_ird = ev->peer_ird;
		nid->peer_ord = ev->peer_ord;
		return 1;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		ev->type = RPCRDMA_CM_ESTABLISHED;
		vb_ev_pdata(ev, e);
		if (id->active) {
			/* what the accept granted: the peer's IRD bounds our ORD
			 * and its ORD our IRD */
			id->peer_ird = ev->peer_ird;
			id->peer_ord = ev->peer_ord;
			id->ird = RR_MIN(id->want_ird, ev->peer_ord);
			id->ord = RR_MIN(id->want_ord, ev->peer_ird);
		} else {
			ev->peer_ird = id->peer_ird;
			ev->peer_ord = id->peer_ord;
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		ev->type = RPCRDMA_CM_DISCONNECTED;
		/* complete the handshake (IB CM: answer the DREQ with a DREP;
		 * otherwise the peer waits for its DREQ timeout); an error
		 * just means we had started the disconnect ourselves */
		if (id)
			rdma_disconnect(id->cm);
		if (id && id->qp) {
			struct ibv_qp *iq = atomic_load(&id->qp->ibv);
			struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};

			if (iq) /* flush what is still queued */
				ibv_modify_qp(iq, &qa, IBV_QP_STATE);
		}
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		ev->type = RPCRDMA_CM_ERROR;
		ev->status = -ENODEV;
		break;
	default: /* TIMEWAIT_EXIT, ADDR_CHANGE, CONNECT_RESPONSE, multicast */
		return 0;
	}
	ev->id = id ? RR_PUB(cm_id, &id->base) : NULL;
	return 1;
}

static int vb_get_event(struct rr_cm_channel *bch, struct rpcrdma_cm_event *ev)
{
	struct vb_ch *ch = VB_CH(bch);

	for (;;) {
		struct rdma_cm_event *e;
		struct rdma_cm_id *destroy_new = NULL;
		int got;

		if (rdma_get_cm_event(ch->ec, &e) != 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : cm_err();
		got = vb_handle(ch, e, ev, &destroy_new);
		rdma_ack_cm_event(e);
		if (destroy_new)
			rdma_destroy_id(destroy_new);
		if (got)
			return 0;
	}
}

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
	.create_qp = vb_create_qp,
	.destroy_qp = vb_destroy_qp,
	.post_send = vb_post_send,
	.post_recv = vb_post_recv,
	.create_channel = vb_create_channel,
	.destroy_channel = vb_destroy_channel,
	.channel_fd = vb_channel_fd,
	.get_event = vb_get_event,
	.listen = vb_listen,
	.connect = vb_connect,
	.accept = vb_accept,
	.reject = vb_reject,
	.disconnect = vb_disconnect,
	.destroy_id = vb_destroy_id,
	.local_addr = vb_local_addr,
	.peer_addr = vb_peer_addr,
	.conn_query = vb_conn_query,
};
