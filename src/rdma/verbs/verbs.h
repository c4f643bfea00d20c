/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal objects of the rdma-core provider ("verbs"), shared by its files,
 * split by job: verbs_device.c (device choice, caps, PD, MR, MW, CQ, the ops
 * table; the mapping onto libibverbs/librdmacm is described there),
 * verbs_qp.c (QPs and posting, the CQ admission rule), verbs_srq.c (shared
 * receive queues), verbs_async.c (the context's asynchronous events: their
 * thread, and what each does to CQs and QPs) and verbs_cm.c (rdma_cm ids
 * and events). verbs_cm calls verbs_qp, verbs_device names them all in its
 * table, none calls verbs_device: no loop. */
#ifndef RR_VERBS_H
#define RR_VERBS_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdma/async_event.h"
#include "rdma/provider.h"

_Static_assert(sizeof(struct rpcrdma_sge) == sizeof(struct ibv_sge), "sge layout");
_Static_assert(offsetof(struct rpcrdma_sge, addr) == offsetof(struct ibv_sge, addr), "sge");
_Static_assert(offsetof(struct rpcrdma_sge, length) == offsetof(struct ibv_sge, length), "sge");
_Static_assert(offsetof(struct rpcrdma_sge, lkey) == offsetof(struct ibv_sge, lkey), "sge");

#define VB_BATCH 16
#define RR_RXE_VENDOR_ID 0xffffffu /* Linux rdma_rxe's vendor_id */
#define VB_DEFAULT_TIMEOUT_MS 5000
#define VB_PDATA_MAX 255 /* rdma_conn_param.private_data_len is a uint8_t */
/* Kernel ABI bits of ibv_device_attr_ex.device_cap_flags_ex (Linux
 * include/uapi/rdma/ib_user_verbs.h, enum ib_uverbs_device_cap_flags);
 * rdma-core 56 does not install that header. */
#define VB_DEVICE_FLUSH_GLOBAL (1ull << 38)
#define VB_DEVICE_FLUSH_PERSISTENT (1ull << 39)

struct vb_qp;

struct vb_ctx {
	struct rr_context base;
	struct ibv_context *verbs;   /* from rdma_get_devices(): shared with rdma_cm */
	struct ibv_context **devs;
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	enum rpcrdma_transport transport;
	unsigned int with_inv_flags;  /* wc_flags bits meaning "with invalidate" */
	bool flush_persistent;        /* FLUSH with persistent placement */
	bool flush_global;            /* FLUSH with global visibility placement */
	pthread_mutex_t qlock;       /* qps list (qp_num -> QP for completions) */
	struct vb_qp *qps;
	pthread_mutex_t alock;       /* reading the asynchronous events */
	bool async_nb;               /* their fd made non-blocking */
	pthread_t async_thr;         /* reads them as they come (verbs_async.c) */
	int async_stop;              /* eventfd: ends that thread */
	bool async_on;               /* the thread runs */
};

/* What the asynchronous events did, process-wide (verbs_async.c). */
struct rr_verbs_counters {
	_Atomic uint64_t cq_errors;    /* CQs failed (IBV_EVENT_CQ_ERR, device fatal) */
	_Atomic uint64_t qp_errors;    /* QPs moved to the error state by an event */
	_Atomic uint64_t device_fatal; /* IBV_EVENT_DEVICE_FATAL */
};
extern struct rr_verbs_counters verbs_counters;

struct vb_srq {
	struct rr_srq base;
	struct ibv_srq *srq;
	atomic_int fired;            /* IBV_EVENT_SRQ_LIMIT_REACHED, not consumed */
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
	atomic_int err;                   /* failed for good (IBV_EVENT_CQ_ERR):
					     poll and arm answer it */
	pthread_mutex_t lock;             /* used */
	uint32_t used;                    /* entries its QPs' queues may fill */
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
	pthread_mutex_t post_lock;        /* with qpx: ibv_post_send batches and
					     ibv_wr_start..complete never overlap
					     (ibv_wr_post(3)) */
	_Atomic bool commit_tx;           /* Commit WRs may be posted */
	struct vb_precv *held, **held_tail;
	uint32_t nheld;
	struct vb_qp *next;               /* in vb_ctx.qps while ibv != NULL */
	struct rdma_cm_id *cm;            /* its id while in vb_ctx.qps */
	atomic_int fatal;                 /* failed by an asynchronous event: the
					     errno of its DISCONNECTED */
	uint32_t charged_send, charged_recv; /* CQ entries taken (vb_cq.used) */
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
#define VB_SRQ(s) RR_CONTAINER_OF((s), struct vb_srq, base)

/* libibverbs returns a positive errno (sometimes -1 + errno). */
static inline int vb_err(int rc)
{
	if (rc > 0)
		return -rc;
	if (rc < 0)
		return errno > 0 ? -errno : -EIO;
	return 0;
}

/* librdmacm returns -1 and sets errno. */
static inline int cm_err(void)
{
	return errno > 0 ? -errno : -EIO;
}

static inline int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static inline bool vb_has_flush(const struct vb_ctx *c)
{
	return c->flush_persistent || c->flush_global;
}

static inline int vb_access(uint32_t a)
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

/* verbs_qp.c */
/* The admission rule (docs/rdma-provider.md "CQ sizing"): @need more
 * entries on @cq, or -ENOSPC (they would not fit its cqe), -EIO (failed). */
int vb_cq_charge(struct vb_cq *cq, uint32_t need);
void vb_cq_uncharge(struct vb_cq *cq, uint32_t n);
int rr_verbs_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *a, struct rr_qp **out);
int rr_verbs_destroy_qp(struct rr_qp *qp);
/* Creates the verbs QP on @cm, posts the held receives, and publishes it:
 * 0 or -errno (-ENODEV: the route leads to another device). */
int rr_verbs_qp_attach(struct vb_qp *q, struct rdma_cm_id *cm);
/* Undoes rr_verbs_qp_attach (the cm id is going away). */
void rr_verbs_qp_detach(struct vb_qp *q, struct rdma_cm_id *cm);
int rr_verbs_set_commit(struct rr_qp *qp, bool enable);
int rr_verbs_post_send(struct rr_qp *qp, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad);
int rr_verbs_post_recv(struct rr_qp *qp, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad);
/* Receives for ibv_post_recv/ibv_post_srq_recv: up to VB_BATCH of the chain
 * *@wr converted into @w (linked); *@wr moves past them; returns how many.
 * vb_recv_failed: the Receive of that batch (from @first, @n long) that
 * verbs named as @ibad (the first when it named none). */
int vb_recv_batch(struct ibv_recv_wr *w, struct rpcrdma_recv_wr **wr);
struct rpcrdma_recv_wr *vb_recv_failed(struct rpcrdma_recv_wr *first,
				       const struct ibv_recv_wr *w,
				       const struct ibv_recv_wr *ibad, int n);

/* verbs_srq.c */
int rr_verbs_create_srq(struct rr_pd *pd, const struct rpcrdma_srq_attr *a, struct rr_srq **out);
int rr_verbs_destroy_srq(struct rr_srq *srq);
int rr_verbs_post_srq_recv(struct rr_srq *srq, struct rpcrdma_recv_wr *wr,
			   struct rpcrdma_recv_wr **bad);
int rr_verbs_arm_srq_limit(struct rr_srq *srq, uint32_t limit);
int rr_verbs_srq_get_event(struct rr_srq *srq);

/* verbs_async.c */
/* The library's name of a verbs asynchronous event (pure). */
enum rr_async_event vb_async_event(enum ibv_event_type t);
/* Starts / stops the thread that reads the context's asynchronous events
 * (vb_open / vb_close): 0 or -errno. */
int vb_async_start(struct vb_ctx *c);
void vb_async_stop(struct vb_ctx *c);
/* Reads and acts on every event queued now, without blocking. */
void vb_async_drain(struct vb_ctx *c);

/* verbs_cm.c */
int rr_verbs_create_channel(struct rr_context *ctx, struct rr_cm_channel **out);
int rr_verbs_destroy_channel(struct rr_cm_channel *ch);
int rr_verbs_channel_fd(struct rr_cm_channel *ch);
int rr_verbs_get_event(struct rr_cm_channel *ch, struct rpcrdma_cm_event *ev);
int rr_verbs_listen(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		    int backlog, void *user_ctx, struct rr_cm_id **out);
int rr_verbs_connect(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		     socklen_t dstlen, const struct rpcrdma_conn_param *p, void *user_ctx,
		     struct rr_cm_id **out);
int rr_verbs_accept(struct rr_cm_id *id, struct rr_qp *qp, const struct rpcrdma_conn_param *p);
int rr_verbs_reject(struct rr_cm_id *id, const void *data, uint16_t len);
int rr_verbs_disconnect(struct rr_cm_id *id);
int rr_verbs_destroy_id(struct rr_cm_id *id);
int rr_verbs_local_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);
int rr_verbs_peer_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);

#endif
