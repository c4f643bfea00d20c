/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC-over-RDMA Version 1 transport driver (RFC 8166 with RFC 8797
 * private data and remote invalidation): connection setup and negotiation,
 * Receive posting, per-RPC invalidatable registrations, credit-limited Call
 * queueing, Reply matching, invalidation before completion, reconnection with
 * retransmission (requester); Call reception, RDMA Read under the ORD limit,
 * Reply transmission (responder). See rdma_tp.h. The protocol decisions are
 * made by the sans-I/O core (proto/xprt.h); this file only moves bytes and
 * work requests. */
#include "transport/rdma_tp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/listen.h"
#include "proto/credits.h"
#include "rpcrdma/push.h"
#include "proto/privdata.h"
#include "proto/rrep.h"
#include "rdma/provider.h"

void rr_tp_conf_default(struct rr_tp_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->provider = RPCRDMA_PROVIDER_SOFT;
	c->inline_send = RR_TP_INLINE_DEFAULT;
	c->inline_recv = RR_TP_INLINE_DEFAULT;
	c->inline_mem = RR_TP_INLINE_MEM;
	c->credits = RR_CRED_REQUEST_DEFAULT;
	c->remote_inv = true;
	c->use_windows = true;
	c->max_seg_len = 1u << 20;
	c->max_segs = 16;
	c->max_call = 1u << 24;
	c->inline_ddp = true;
	c->connect_timeout_ms = 5000;
	c->reconnect_delay_ms = 50;
	c->ord = 16;
	c->ird = 16;
	c->ext_caps = RR_PD_EXT_CAP_RELIABLE_REPLY;
	c->rrep_timeout_ms = 30000;
	c->rrep_max = 32;
	c->reply_mem_per_conn = RR_TP_REPLY_MEM_PER_CONN;
	c->send_timeout_ms = 60000;
	c->reply_mem_total = RR_TP_REPLY_MEM_TOTAL;
}

/* The inline threshold policy, applied once per endpoint (rdma_tp.h,
 * docs/transport.md "Inline thresholds"): a size of 0 becomes the provider's
 * default, sizes are capped at what RFC 8797 can advertise, and when the
 * per-connection buffers (Receives + send slots, each of the full size) would
 * exceed inline_mem the credits are lowered to fit: the requester posts
 * credits + 8 Receives and as many send slots; the responder credits + 4
 * (+ rrep_max for reliable reply) Receives and 8 more send slots. */
void rr_tp_conf_inline(struct rr_tp_conf *cf, const char *provider, bool server)
{
	uint32_t dflt = provider && strcmp(provider, RPCRDMA_PROVIDER_SOFT) == 0
				? RR_TP_INLINE_SOFT : RR_TP_INLINE_DEFAULT;
	uint64_t per, room;

	if (cf->inline_send == 0)
		cf->inline_send = dflt;
	if (cf->inline_recv == 0)
		cf->inline_recv = dflt;
	cf->inline_send = RR_MIN(cf->inline_send, RR_PD_SIZE_MAX);
	cf->inline_recv = RR_MIN(cf->inline_recv, RR_PD_SIZE_MAX);
	if (!cf->inline_mem)
		return;
	per = (uint64_t)cf->inline_send + cf->inline_recv;
	if (!server) {
		room = cf->inline_mem / per;
		if ((uint64_t)cf->credits + 8 > room)
			cf->credits = (uint32_t)RR_MIN(cf->credits,
						       RR_MAX(room > 8 ? room - 8 : 0,
							      RR_TP_MIN_CREDITS));
	} else {
		uint32_t rrep = (cf->ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) ? cf->rrep_max : 0;
		uint64_t slack = 8ull * cf->inline_send;
		uint64_t n = cf->inline_mem > slack ? (cf->inline_mem - slack) / per : 0;
		uint64_t avail = n > 4 ? n - 4 : 0;

		if ((uint64_t)cf->credits + rrep > avail) {
			if (rrep) {
				rrep = (uint32_t)RR_MAX(RR_MIN(rrep, avail / 3), 1);
				cf->rrep_max = rrep;
			}
			cf->credits = (uint32_t)RR_MIN(cf->credits,
						       RR_MAX(avail > rrep ? avail - rrep : 0,
							      RR_TP_MIN_CREDITS));
		}
	}
}

/* Work request ids: type in the low 4 bits, index or pointer above. */
enum { WR_RECV = 1, WR_SEND = 2, WR_INV = 3, WR_READ = 4, WR_REPLY = 5, WR_BIND = 6,
       WR_WRITE = 7, WR_RREAD = 8, WR_RINV = 9, WR_PUSH = 10 };
#define WRID(t, v) (((uint64_t)(uintptr_t)(v) << 4) | (uint64_t)(t))
#define WRTYPE(id) ((unsigned)((id) & 15u))
#define WRVAL(id) ((id) >> 4)
#define WRPTR(id) ((void *)(uintptr_t)WRVAL(id))

struct tp_ep;
struct tp_sreq;
struct tp_conn;
struct rr_tp_client;
struct tp_expo;

/* Push mode (end of this file). */
static void cl_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc);
static void expo_release_all(struct tp_conn *cn);
static void count_form(struct tp_ep *ep, const uint8_t *buf, uint32_t len, bool sent);

/* One connection (either role). */
struct tp_conn {
	struct tp_ep *ep;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_id *id;
	uint8_t *rbuf;
	struct rpcrdma_mr *rmr;
	uint32_t nrecv, rsize;
	uint8_t *sbuf;          /* send slots, then 4 zero bytes (pad source) */
	struct rpcrdma_mr *smr;
	uint32_t nsend, ssize;
	uint32_t *sfree;
	uint32_t nsfree;
	uint64_t tx_progress_ns; /* responder: a Send completed, or the first
				    of those in flight was posted (sv_tx_stalled) */
	struct tp_sreq **sowner;  /* responder: req waiting for a slot's Send */
	/* responder, Replies answered on the progress thread: their work
	 * requests per send slot (SV_DEFER_WR each), chained and posted at once
	 * after the batch of upcalls (sv_post_deferred). */
	struct rpcrdma_send_wr *dwr;
	struct rpcrdma_sge *dsge;
	uint32_t *dslot;           /* slots waiting, in answer order */
	uint32_t ndefer;
	uint64_t defer_t0;         /* ns: when the first of them was deferred */
	struct rr_pd_conn neg;
	struct rr_xprt_params params;
	uint16_t ord;
	bool established, dead, use_mw;
	bool serve;                  /* server loop: its CQ is served this turn */
	bool in_set;                 /* server loop: its CQ fd is in this turn's
					poll set */
	bool armed;                  /* server loop: armed by it since it last
					served the CQ (a notification wakes it) */
	bool signal_writes;   /* RDMA Writes signaled: see conn_new */
	int err;              /* conn_new: what failed (conn_ok false) */
	bool in_wait;           /* a caller thread waits on cq unlocked: not freed */
	uint32_t lent;          /* requester: Receives lent as rpc->reply (not
				   reposted, not freed until released) */
	/* responder */
	struct rr_xprt_responder rsp;
	struct rr_cred_rsp cred;
	unsigned refs;
	struct tp_sreq *readq;          /* reqs with Reads still to issue */
	uint32_t reads_inflight;
	struct tp_conn *next;
	struct sockaddr_storage peer;   /* responder: the requester's address */
	bool has_peer;
	uint64_t last_rx_ns;            /* responder: its last Receive (idle) */
	bool commit;                    /* RDMA Commit negotiated and enabled */
	struct tp_expo *expo;           /* responder: exposed push-mode regions */
	/* reliable reply (section "Reliable reply" below) */
	struct rr_rrep_table rrep;      /* responder: Replies awaiting RDMA_DONE */
	struct rrep_exp *rrep_dead;     /* responder: fenced, freed with the QP */
	struct rrep_exp *rrep_fencing;  /* responder: Local Invalidate in flight
					   (freed on its completion, or with the
					   QP when that is never polled) */
	uint32_t rrep_forged;           /* responder: forged RDMA_DONEs seen */
	struct tp_park *parkq, **park_tail; /* responder: Read-chunk Replies
					   waiting for a reservation */
	uint64_t rrep_bytes;            /* responder: bytes of exposed, parked
					   and fenced Read-chunk Replies held
					   for this peer (reply_mem_per_conn) */
	struct rrep_pull *pullq;        /* requester: pulls with Reads to issue */
	struct rrep_pull *pulls;        /* requester: every pull in progress */
};

/* What both endpoint kinds share. */
struct tp_ep {
	struct rr_tp_conf conf;
	const struct rpcrdma_env *env;
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool thread_started;
	int evfd;
	bool stop;
	struct rr_xprt_stats stats;
	bool is_server;
	bool adv_r;              /* the R bit we advertise */
	uint32_t rrep_live;      /* responder: exposed Reply STags still valid */
	struct tp_conn *grave;   /* dead connections, freed by grave_sweep */
};

/* ---- client state ---- */
enum call_state { C_QUEUED, C_SENT, C_INVAL, C_DONE };

struct tp_call {
	struct rr_tp_rpc *rpc;
	struct rr_xprt_rqst *rq;
	struct rr_cred_node node;
	struct rpcrdma_mr *mr[RR_XPRT_MAX_REGS];
	struct rpcrdma_mw *mw[RR_XPRT_MAX_REGS];
	unsigned nmem;
	enum call_state state;
	bool has_credit;
	unsigned inv_pending;
	int result;
	bool result_set;
	struct tp_conn *conn;
	struct tp_call *prev, *next;
	struct tp_call *done_next;
	bool sent_once;
	struct rrep_pull *pull;   /* reliable reply: its Reply being pulled */
};

struct rr_tp_client {
	struct tp_ep ep;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	rr_tp_complete_fn complete;
	void *cctx;
	struct rr_xprt_requester req;
	struct rr_cred_req cred;
	struct tp_conn *conn;
	int connect_status;     /* 1 while the first connect is pending */
	uint64_t reconnect_at;  /* ns; 0: none scheduled */
	struct tp_call *calls;
	struct tp_call *done;
	uint32_t live_stags;
	bool destroying;
	bool waiter;            /* a caller thread is receiving (rr_tp_client_wait) */
	struct rr_tp_rpc *wait_for; /* submit reserved the waiter role for it */
	bool stray;             /* a Call was aborted after its Send on this
				   connection: its Reply may still come */
	struct tp_push_op *pushes;  /* push-mode operations in flight */
	uint32_t push_seq;
	struct rrep_done_q *doneq; /* RDMA_DONEs waiting for a send slot */
};

/* ---- server state ---- */
struct tp_sreq {
	struct rr_tp_sreq pub;
	struct tp_conn *conn;
	struct rr_xprt_rcall *rc;
	struct rpcrdma_mr *read_mr;
	uint32_t next_read, reads_done;
	bool failed;
	bool send_done;
	bool send_pending;
	int send_status;
	uint32_t send_slot;
	struct tp_sreq *next;   /* read queue */
	/* The Reply's memory registered for its RDMA Writes: held until its
	 * Send completed (or failed), then deregistered (sv_reply_release). */
	struct rpcrdma_mr *mrs[RR_XPRT_MAX_ITEMS * 2 + 2];
	unsigned nmr;
	/* rr_tp_server_reply_async: told once the Send completed or failed. */
	rr_tp_sent_fn sent;
	void *sent_arg;
	struct tp_sreq *sent_next;      /* server's sent queue */
	bool orphan;                    /* done before its Send completed */
	bool credited;                  /* its Reply is accounted (sv_credit) */
};

struct rr_tp_server {
	struct tp_ep ep;
	struct rpcrdma_cm_id *listen_id;
	int port;                /* listening port */
	bool stopping;           /* rr_tp_server_stop: refuse new connections */
	rr_tp_recv_fn recv;
	void *rctx;
	struct tp_conn *conns;
	unsigned nconns;
	struct tp_sreq *deliver;   /* ready, upcall outside the lock */
	/* Calls whose RDMA Read failed (fatal to their connection): when the
	 * same peer retransmits that XID on a new connection it gets ERR_CHUNK
	 * instead of another failing Read (RFC 8166: do not loop). */
	struct {
		struct sockaddr_storage peer;
		uint32_t xid;
		bool used;
	} failed[32];
	unsigned failed_next;
	uint64_t expo_seq;         /* ids of exposed push-mode regions */
	/* Replies of rr_tp_server_reply_async whose Send completed (or
	 * failed): their sent upcalls run without the lock (sv_sent_upcalls). */
	struct tp_sreq *sent_head, **sent_tail;
	struct rr_xprt_reply_plan *plan_cache;   /* one spare Reply plan */
	uint64_t rrep_bytes;       /* Read-chunk Reply bytes held, all
				      connections (reply_mem_total) */
	unsigned idle_waits;       /* progress: CQ waits in a row that got nothing */
	/* progress: poll(2) set, 2 + one fd per connection, grown with the
	 * connections (the loop's own; freed at destroy) */
	struct pollfd *pfd;
	struct tp_conn **pcns;
	unsigned pcap;             /* connections they hold */
	uint64_t idle_look_ns;     /* next idle sweep (sv_idle_sweep) */
	struct rr_listen_stats lstats_gone;   /* of the listener stop destroyed */
};

static void sreq_free(struct rr_tp_server *s, struct tp_sreq *r);
static void sv_post_deferred(struct rr_tp_server *s);
static void sv_after_upcalls(struct rr_tp_server *s);
static void sv_park_resume(struct rr_tp_server *s, struct tp_conn *cn);
static void sv_park_fail_all(struct rr_tp_server *s, struct tp_conn *cn);
/* Reliable reply hooks (section "Reliable reply" below). */
static void rrep_conn_free(struct tp_conn *cn);
static void cl_rrep_on_pull(struct rr_tp_client *c, struct tp_conn *cn,
			    const struct rr_xprt_reply *res);
static void cl_rrep_read_done(struct rr_tp_client *c, struct tp_conn *cn, struct rrep_pull *p);
static void cl_rrep_flush(struct rr_tp_client *c, struct tp_conn *cn);
static void cl_rrep_detach(struct tp_call *k);
static void sv_rrep_on_done(struct rr_tp_server *s, struct tp_conn *cn,
			    const struct rpcrdma_wc *wc, uint32_t idx, uint32_t xid);
static void sv_rrep_inv_done(struct rr_tp_server *s, struct tp_conn *cn,
			     const struct rpcrdma_wc *wc);
static void sv_rrep_fence_all(struct rr_tp_server *s, struct tp_conn *cn);
static void sv_rrep_expire(struct rr_tp_server *s, struct tp_conn *cn);
static int sv_rrep_expose(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
			  struct rr_xprt_reply_plan *plan, uint32_t slot, uint32_t *grant);

static void failed_note(struct rr_tp_server *s, struct tp_conn *cn, uint32_t xid)
{
	unsigned i = s->failed_next++ % RR_ARRAY_SIZE(s->failed);

	if (!cn->has_peer)
		return;
	s->failed[i].peer = cn->peer;
	s->failed[i].xid = xid;
	s->failed[i].used = true;
}

/* True (and forgets it) when @xid from @cn's peer failed before. */
static bool failed_take(struct rr_tp_server *s, struct tp_conn *cn, uint32_t xid)
{
	if (!cn->has_peer)
		return false;
	for (unsigned i = 0; i < RR_ARRAY_SIZE(s->failed); i++) {
		if (s->failed[i].used && s->failed[i].xid == xid &&
		    rr_addr_same_host(&s->failed[i].peer, &cn->peer)) {
			s->failed[i].used = false;
			return true;
		}
	}
	return false;
}

static uint64_t now_ns(const struct tp_ep *ep)
{
	return rr_now_ns(ep->env);
}

/* ---- connection resources ---- */

/* Receives a requester lends out as inline Replies at once (cl_on_recv). */
#define TP_LEND_MAX 4u

static int conn_alloc_bufs(struct tp_conn *cn, uint32_t nrecv, uint32_t rsize,
			   uint32_t nsend, uint32_t ssize)
{
	const struct rpcrdma_env *env = cn->ep->env;
	int rc;

	cn->nrecv = nrecv;
	cn->rsize = rsize;
	cn->nsend = nsend;
	cn->ssize = ssize;
	/* Mapped zero-filled (rr_alloc_pages): with large inline sizes
	 * (rr_tp_conf_inline) the pages of these buffers become resident only
	 * as far as messages actually filled them, and all of them go back to
	 * the system when the connection is freed (an allocator's arena would
	 * keep them: docs/PERFORMANCE.md "Memory after connection churn").
	 * inline_mem bounds the address space, traffic decides the resident
	 * part. */
	cn->rbuf = rr_alloc_pages(env, (size_t)nrecv * rsize);
	cn->sbuf = rr_alloc_pages(env, (size_t)nsend * ssize + 4);
	cn->sfree = rr_alloc(env, sizeof(uint32_t) * nsend);
	cn->sowner = rr_zalloc(env, sizeof(*cn->sowner) * nsend);
	if (!cn->rbuf || !cn->sbuf || !cn->sfree || !cn->sowner)
		return -ENOMEM;
	for (uint32_t i = 0; i < nsend; i++)
		cn->sfree[i] = nsend - 1 - i;
	cn->nsfree = nsend;
	rc = rpcrdma_reg_mr_simple(cn->pd, cn->rbuf, (uint64_t)nrecv * rsize,
				   RPCRDMA_ACCESS_LOCAL_WRITE, &cn->rmr);
	if (rc)
		return rc;
	return rpcrdma_reg_mr_simple(cn->pd, cn->sbuf, (uint64_t)nsend * ssize + 4,
				     RPCRDMA_ACCESS_LOCAL_WRITE, &cn->smr);
}

static struct tp_conn *conn_new(struct tp_ep *ep, uint32_t nrecv, uint32_t nsend)
{
	struct tp_conn *cn = rr_zalloc(ep->env, sizeof(*cn));
	struct rpcrdma_cq_attr ca = {0};
	struct rpcrdma_qp_attr qa = {0};
	struct rpcrdma_caps caps;
	int rc;

	if (!cn)
		return NULL;
	cn->ep = ep;
	cn->refs = 1;
	rc = rpcrdma_query(ep->ctx, &caps);
	if (rc)
		goto fail;
	rc = rpcrdma_pd_alloc(ep->ctx, &cn->pd);
	if (rc)
		goto fail;
	qa.max_send_wr = RR_MIN(nsend * (2 * RR_XPRT_MAX_REGS + 4) + 64, caps.max_qp_wr);
	qa.max_recv_wr = RR_MIN(nrecv, caps.max_qp_wr);
	ca.cqe = RR_MIN(qa.max_send_wr + qa.max_recv_wr + 64, caps.max_cqe);
	ca.user_ctx = cn;
	rc = rpcrdma_cq_create(ep->ctx, &ca, &cn->cq);
	if (rc)
		goto fail;
	qa.send_cq = cn->cq;
	qa.recv_cq = cn->cq;
	qa.max_send_sge = 1;
	qa.max_recv_sge = 1;
	qa.user_ctx = cn;
	rc = rpcrdma_qp_create(cn->pd, &qa, &cn->qp);
	if (rc)
		goto fail;
	rc = conn_alloc_bufs(cn, nrecv, ep->conf.inline_recv, nsend, ep->conf.inline_send);
	if (rc)
		goto fail;
	cn->use_mw = ep->conf.use_windows && (caps.flags & RPCRDMA_CAP_INVALIDATABLE);
	/* Linux siw (6.1) transmits an unsignaled work request of a page or
	 * more straight from the user pages (zero-copy sendpage): its data is
	 * read when TCP sends, after later completions, so a Reply's source
	 * memory may already be reused by then (seen in the lab: corrupted
	 * Write-chunk data). A signaled one is copied before it completes.
	 * The completions are ignored. */
	cn->signal_writes = caps.transport == RPCRDMA_TRANSPORT_IWARP &&
			    strcmp(rpcrdma_context_provider(ep->ctx), RPCRDMA_PROVIDER_VERBS) == 0;
	(void)rpcrdma_cq_arm(cn->cq, false);
	return cn;
fail:
	cn->err = rc;
	return cn; /* caller checks cn->qp / buffers via conn_ok */
}

static bool conn_ok(const struct tp_conn *cn)
{
	return cn && cn->qp && cn->rmr && cn->smr;
}

static void conn_free(struct tp_conn *cn)
{
	const struct rpcrdma_env *env;

	if (!cn)
		return;
	env = cn->ep->env;
	if (cn->id) {
		(void)rpcrdma_cm_id_destroy(cn->id);
		cn->id = NULL;
	}
	if (cn->qp)
		(void)rpcrdma_qp_destroy(cn->qp);
	expo_release_all(cn);
	rrep_conn_free(cn);
	rr_xprt_rsp_fini(&cn->rsp);   /* responder spares (no-op otherwise) */
	if (cn->rmr)
		(void)rpcrdma_dereg_mr(cn->rmr);
	if (cn->smr)
		(void)rpcrdma_dereg_mr(cn->smr);
	if (cn->cq)
		(void)rpcrdma_cq_destroy(cn->cq);
	if (cn->pd)
		(void)rpcrdma_pd_free(cn->pd);
	rr_free_pages(env, cn->rbuf, (size_t)cn->nrecv * cn->rsize);
	rr_free_pages(env, cn->sbuf, (size_t)cn->nsend * cn->ssize + 4);
	rr_free(env, cn->sfree);
	rr_free(env, cn->sowner);
	rr_free(env, cn->dwr);
	rr_free(env, cn->dsge);
	rr_free(env, cn->dslot);
	rr_free(env, cn);
}

/* A dead connection is freed at the end of the progress iteration that
 * buried it (no handler holds it then). Destroying its id drops the CM
 * events still queued for it in the provider, so none names it later. */
static void conn_bury(struct tp_conn *cn)
{
	struct tp_ep *ep = cn->ep;

	cn->dead = true;
	cn->established = false;
	cn->next = ep->grave;
	ep->grave = cn;
}

static void grave_sweep(struct tp_ep *ep)
{
	struct tp_conn **pp = &ep->grave;

	while (*pp) {
		struct tp_conn *cn = *pp;

		if (cn->in_wait || cn->lent) {
			/* a caller thread sleeps on its CQ (rr_tp_client_wait),
			 * or a Reply still points into a Receive buffer:
			 * freed on a later sweep */
			pp = &cn->next;
			continue;
		}
		*pp = cn->next;
		conn_free(cn);
		if (ep->is_server)
			rr_mem_trim_due(ep->env);   /* the loop gives it back */
	}
}

static int post_recv(struct tp_conn *cn, uint32_t idx)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)(cn->rbuf + (size_t)idx * cn->rsize),
				  cn->rsize, rpcrdma_mr_lkey(cn->rmr)};
	struct rpcrdma_recv_wr wr = {WRID(WR_RECV, idx), NULL, &sge, 1};

	return rpcrdma_post_recv(cn->qp, &wr, NULL);
}

static int post_all_recvs(struct tp_conn *cn)
{
	for (uint32_t i = 0; i < cn->nrecv; i++) {
		int rc = post_recv(cn, i);

		if (rc)
			return rc;
	}
	return 0;
}

static int slot_get(struct tp_conn *cn, uint32_t *slot)
{
	if (!cn->nsfree)
		return -ENOBUFS;
	if (cn->nsfree == cn->nsend && cn->ep->is_server)
		cn->tx_progress_ns = now_ns(cn->ep);   /* the first in flight */
	*slot = cn->sfree[--cn->nsfree];
	return 0;
}

static void slot_put(struct tp_conn *cn, uint32_t slot)
{
	if (slot < cn->nsend && cn->nsfree < cn->nsend)
		cn->sfree[cn->nsfree++] = slot;
}

static uint8_t *slot_buf(struct tp_conn *cn, uint32_t slot)
{
	return cn->sbuf + (size_t)slot * cn->ssize;
}

static int post_slot_send(struct tp_conn *cn, uint32_t slot, uint32_t len,
			  uint64_t wr_id, bool inv, uint32_t inv_stag,
			  struct rpcrdma_send_wr *chain_head)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)slot_buf(cn, slot), len,
				  rpcrdma_mr_lkey(cn->smr)};
	struct rpcrdma_send_wr wr;
	struct rpcrdma_send_wr *first = &wr;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	if (inv)
		wr.u.send.invalidate_stag = inv_stag;
	if (chain_head) {
		struct rpcrdma_send_wr *w = chain_head;

		while (w->next)
			w = w->next;
		w->next = &wr;
		first = chain_head;
	}
	count_form(cn->ep, slot_buf(cn, slot), len, true);
	return rpcrdma_post_send(cn->qp, first, NULL);
}

/* Private data and negotiation (RFC 8797). */
static int local_pd(const struct tp_ep *ep, uint8_t *buf, size_t cap)
{
	struct rr_pd_local l = {ep->conf.inline_send, ep->conf.inline_recv, ep->adv_r,
				ep->conf.ext_caps};

	return rr_pd_encode(&l, buf, cap);
}

static void conn_negotiate(struct tp_conn *cn, enum rr_pd_role role,
			   const void *pd, size_t pdlen)
{
	const struct rr_tp_conf *cf = &cn->ep->conf;
	struct rr_pd_local l = {cf->inline_send, cf->inline_recv, cn->ep->adv_r, cf->ext_caps};

	if (rr_pd_negotiate(&l, role, pd, pdlen, &cn->neg)) {
		memset(&cn->neg, 0, sizeof(cn->neg));
		cn->neg.call_threshold = cn->neg.reply_threshold = RR_XPRT_DEFAULT_INLINE;
	}
	rr_xprt_params_default(&cn->params);
	cn->params.call_inline = RR_MIN(cn->neg.call_threshold,
					role == RR_PD_REQUESTER ? cn->ssize : cn->rsize);
	cn->params.reply_inline = RR_MIN(cn->neg.reply_threshold,
					 role == RR_PD_REQUESTER ? cn->rsize : cn->ssize);
	cn->params.local_r = cn->ep->adv_r;
	cn->params.peer_r = cn->neg.peer_r;
	cn->params.max_seg_len = cf->max_seg_len;
	cn->params.max_segs = cf->max_segs;
	cn->params.max_call = cf->max_call;
	cn->params.inline_ddp = cf->inline_ddp;
	cn->params.reliable_reply = (cn->neg.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) != 0;
}

static void ep_wake(struct tp_ep *ep)
{
	uint64_t one = 1;

	if (write(ep->evfd, &one, sizeof(one)) < 0) {
		/* eventfd saturated: the thread is awake anyway */
	}
	/* A server's progress thread may sleep in its one connection's CQ
	 * (progress()): the interrupt latch ends that wait, or the next. */
	if (ep->is_server && ep->ctx)
		(void)rr_context_interrupt(ep->ctx);
}

/* ======================================================================
 * Client (requester)
 * ====================================================================== */

static void cl_list_add(struct rr_tp_client *c, struct tp_call *k)
{
	k->prev = NULL;
	k->next = c->calls;
	if (c->calls)
		c->calls->prev = k;
	c->calls = k;
}

static void cl_list_del(struct rr_tp_client *c, struct tp_call *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->calls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	k->prev = k->next = NULL;
}

/* Work only a drain of the CQ moves on: the progress thread watches the CQ
 * while there is some (and no caller thread receives). Idle, a synchronous
 * caller's Reply wakes that caller alone. */
static bool cl_busy(const struct rr_tp_client *c)
{
	return c->calls || c->done || c->pushes || c->doneq || c->stray ||
	       (c->conn && (c->conn->pullq || c->conn->pulls));
}

/* After a caller thread received for itself (a synchronous call, a push)
 * on connection @cn: whether the progress thread must look again, i.e.
 * work is left for it (other calls, a lost or changed connection); an
 * idle client's next call needs nobody else. */
static bool cl_needs_progress(const struct rr_tp_client *c, const struct tp_conn *cn)
{
	return cl_busy(c) || c->conn != cn || !c->conn || c->conn->dead || c->reconnect_at ||
	       c->destroying;
}

static bool on_progress_thread(const struct tp_ep *ep)
{
	return ep->thread_started && pthread_equal(pthread_self(), ep->thread);
}

/* Frees the registrations of @k. Every STag still valid counts as locally
 * invalidated (freeing a window or deregistering invalidates it). */
static void cl_free_mem(struct rr_tp_client *c, struct tp_call *k)
{
	for (unsigned i = 0; i < k->nmem; i++) {
		if (k->rq && i < k->rq->nregs && k->rq->regs[i].valid) {
			k->rq->regs[i].valid = false;
			c->ep.stats.local_inv++;
			c->live_stags--;
		}
		if (k->mw[i])
			(void)rpcrdma_mw_free(k->mw[i]);
		if (k->mr[i])
			(void)rpcrdma_dereg_mr(k->mr[i]);
		k->mw[i] = NULL;
		k->mr[i] = NULL;
	}
	k->nmem = 0;
}

static void cl_finish(struct rr_tp_client *c, struct tp_call *k)
{
	cl_rrep_detach(k);
	cl_free_mem(c, k);
	if (k->rq) {
		rr_xprt_rqst_release(&c->req, k->rq);
		k->rq = NULL;
	}
	k->state = C_DONE;
	k->rpc->status = k->result;
	cl_list_del(c, k);
	k->done_next = c->done;
	c->done = k;
}

static void cl_set_result(struct tp_call *k, int status)
{
	if (!k->result_set) {
		k->result = status;
		k->result_set = true;
	}
}

/* Local invalidation of every STag of @k still valid; finishes @k when none
 * is left. */
static void cl_invalidate(struct rr_tp_client *c, struct tp_call *k)
{
	struct tp_conn *cn = k->conn;

	k->state = C_INVAL;
	if (k->rq && cn && !cn->dead && k->nmem) {
		for (unsigned i = 0; i < k->rq->nregs && i < k->nmem; i++) {
			struct rpcrdma_send_wr wr;

			if (!k->rq->regs[i].valid || !k->mw[i])
				continue;
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = WRID(WR_INV, k);
			wr.opcode = RPCRDMA_WR_LOCAL_INV;
			wr.flags = RPCRDMA_SEND_SIGNALED;
			wr.u.local_inv.stag = k->rq->regs[i].stag;
			if (rpcrdma_post_send(cn->qp, &wr, NULL) == 0) {
				k->rq->regs[i].valid = false;
				c->ep.stats.local_inv++;
				c->live_stags--;
				k->inv_pending++;
			}
		}
	}
	if (k->inv_pending == 0)
		cl_finish(c, k);
}

static unsigned map_access(unsigned acc)
{
	unsigned a = RPCRDMA_ACCESS_LOCAL_WRITE;

	if (acc & RR_XPRT_ACC_REMOTE_READ)
		a |= RPCRDMA_ACCESS_REMOTE_READ;
	if (acc & RR_XPRT_ACC_REMOTE_WRITE)
		a |= RPCRDMA_ACCESS_REMOTE_WRITE;
	return a;
}

/* Registers, marshals and sends @k on the current connection. Returns 0, or
 * a negative errno for a Call that cannot be sent at all (completed by the
 * caller), or -EAGAIN for a connection problem (left to reconnection). */
static int cl_send(struct rr_tp_client *c, struct tp_call *k)
{
	struct tp_conn *cn = c->conn;
	struct rpcrdma_send_wr binds[RR_XPRT_MAX_REGS];
	struct rr_tp_rpc *rpc = k->rpc;
	uint32_t slot;
	int rc, len;

	if (!k->rq) {
		struct rr_xprt_rqst_desc d = {rpc->xid, rpc->parts, rpc->nparts, rpc->sinks,
					      rpc->nsinks, rpc->max_reply, rpc->min_reply,
					      rpc->max_unknown};

		rc = rr_xprt_rqst_prepare(&c->req, &d, &k->rq);
		if (rc)
			return rc;
		k->rq->user = k;
	} else {
		rc = rr_xprt_rqst_replan(&c->req, k->rq);
		if (rc)
			return rc;
	}
	k->conn = cn;
	for (unsigned i = 0; i < k->rq->nregs; i++) {
		struct rr_xprt_reg *g = &k->rq->regs[i];
		unsigned acc = map_access(g->access);

		if (cn->use_mw)
			acc |= RPCRDMA_ACCESS_MW_BIND;
		rc = rpcrdma_reg_mr_simple(cn->pd, g->base, g->len, acc, &k->mr[i]);
		k->nmem = i + 1;
		if (rc)
			goto fail_mem;
		if (cn->use_mw) {
			rc = rpcrdma_mw_alloc(cn->pd, &k->mw[i]);
			if (rc)
				goto fail_mem;
			memset(&binds[i], 0, sizeof(binds[i]));
			binds[i].wr_id = WRID(WR_BIND, 0);
			binds[i].opcode = RPCRDMA_WR_BIND_MW;
			binds[i].u.bind.mw = k->mw[i];
			binds[i].u.bind.mr = k->mr[i];
			binds[i].u.bind.addr = (uint64_t)(uintptr_t)g->base;
			binds[i].u.bind.length = g->len;
			binds[i].u.bind.access = acc & (RPCRDMA_ACCESS_REMOTE_READ |
							RPCRDMA_ACCESS_REMOTE_WRITE);
			rc = rpcrdma_post_send(cn->qp, &binds[i], NULL);
			if (rc)
				goto fail_conn;
			g->stag = rpcrdma_mw_rkey(k->mw[i]);
			g->addr = rpcrdma_mw_remote_offset(k->mw[i]);
		} else {
			g->stag = rpcrdma_mr_rkey(k->mr[i]);
			g->addr = rpcrdma_mr_remote_offset(k->mr[i]);
		}
		g->mr = k->mr[i];
		g->valid = true;
		c->live_stags++;
	}
	if (slot_get(cn, &slot)) {
		rc = -EAGAIN;
		goto fail_mem;
	}
	len = rr_xprt_rqst_marshal(&c->req, k->rq, rr_cred_req_request(&c->cred),
				   slot_buf(cn, slot), cn->ssize);
	if (len < 0) {
		slot_put(cn, slot);
		rc = len;
		goto fail_mem;
	}
	rc = post_slot_send(cn, slot, (uint32_t)len, WRID(WR_SEND, slot), false, 0, NULL);
	if (rc) {
		rr_xprt_rqst_forget(&c->req, k->rq);
		slot_put(cn, slot);
		goto fail_conn;
	}
	if (k->sent_once)
		c->ep.stats.retransmits++;
	k->sent_once = true;
	k->state = C_SENT;
	return 0;
fail_mem:
	cl_free_mem(c, k);
	return rc;
fail_conn:
	/* The QP refuses work (connection going down): the Call waits for
	 * the reconnection instead of failing. */
	cl_free_mem(c, k);
	if (!cn->dead) {
		cn->dead = true;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
	}
	return -EAGAIN;
}

/* Sends queued Calls while credits allow. */
static void cl_pump(struct rr_tp_client *c)
{
	struct rr_cred_node *n;

	if (!c->conn || !c->conn->established || c->conn->dead)
		return;
	while ((n = rr_cred_req_next(&c->cred)) != NULL) {
		struct tp_call *k = RR_CONTAINER_OF(n, struct tp_call, node);
		int rc;

		k->has_credit = true;
		rc = cl_send(c, k);
		if (rc == 0)
			continue;
		(void)rr_cred_req_complete(&c->cred);
		k->has_credit = false;
		if (rc == -EAGAIN) {
			(void)rr_cred_req_requeue(&c->cred, n);
			break;
		}
		cl_set_result(k, rc);
		cl_finish(c, k);
	}
}

static void cl_schedule_reconnect(struct rr_tp_client *c, uint32_t delay_ms)
{
	c->reconnect_at = now_ns(&c->ep) + (uint64_t)delay_ms * 1000000u;
	ep_wake(&c->ep);
}

static int cl_connect(struct rr_tp_client *c)
{
	uint8_t pd[RR_PD_MAX_LEN];
	struct rpcrdma_conn_param prm = {0};
	struct tp_conn *cn;
	int n, rc;

	cn = conn_new(&c->ep, c->ep.conf.credits + 8, c->ep.conf.credits + 8);
	if (!conn_ok(cn)) {
		conn_free(cn);
		return -ENOMEM;
	}
	rc = post_all_recvs(cn);
	if (rc) {
		conn_free(cn);
		return rc;
	}
	n = local_pd(&c->ep, pd, sizeof(pd));
	if (n < 0) {
		conn_free(cn);
		return n;
	}
	prm.private_data = pd;
	prm.private_data_len = (uint16_t)n;
	prm.responder_resources = c->ep.conf.ird;
	prm.initiator_depth = c->ep.conf.ord;
	prm.timeout_ms = c->ep.conf.connect_timeout_ms;
	/* Our private data offers RDMA Commit: serve the peer's Commits from
	 * establishment on; post ours once its accept data agreed. */
	if (c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT)
		prm.flags |= RPCRDMA_CONN_COMMIT;
	c->conn = cn;
	rc = rpcrdma_connect(c->ep.ch, cn->qp, (const struct sockaddr *)&c->addr,
			     c->addrlen, &prm, cn, &cn->id);
	if (rc) {
		c->conn = NULL;
		conn_free(cn);
		return rc;
	}
	return 0;
}

/* The connection is gone: every STag of every Call is made invalid, Calls
 * without a Reply go back to the head of the queue in their original order,
 * and a reconnection is scheduled. */
static void cl_conn_lost(struct rr_tp_client *c, struct tp_conn *cn)
{
	struct tp_call *k, *nx, *last = NULL;

	if (c->conn != cn)
		return;
	cn->dead = true;
	if (cn->established)
		c->ep.stats.fatal_errors++;
	/* Calls are listed newest first: requeue from the newest so the
	 * oldest ends at the head. */
	for (k = c->calls; k; k = nx) {
		nx = k->next;
		if (k->conn != cn)
			continue;
		if (k->state == C_INVAL) {
			k->inv_pending = 0;
			cl_finish(c, k);
		} else if (k->state == C_SENT) {
			cl_rrep_detach(k);
			cl_free_mem(c, k);
			rr_xprt_rqst_forget(&c->req, k->rq);
			k->state = C_QUEUED;
			k->has_credit = false;
			k->conn = NULL;
			last = k;
		}
	}
	(void)last;
	c->stray = false;   /* nothing more comes on @cn */
	rr_cred_req_reset(&c->cred);
	for (k = c->calls; k; k = k->next)
		if (k->state == C_QUEUED && !k->node.queued && k->sent_once)
			(void)rr_cred_req_requeue(&c->cred, &k->node);
	c->conn = NULL;
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
	conn_bury(cn);
	if (c->destroying)
		return;
	if (c->ep.conf.no_reconnect) {
		for (k = c->calls; k; k = nx) {
			nx = k->next;
			if (k->state == C_QUEUED) {
				(void)rr_cred_req_cancel(&c->cred, &k->node);
				cl_set_result(k, -ECONNRESET);
				cl_finish(c, k);
			}
		}
		return;
	}
	/* Nothing to retransmit: connect again when a Call needs it
	 * (rr_tp_client_submit), not now: a server that closes idle
	 * connections would otherwise see this client come back at once,
	 * once per its idle timeout, for nothing. */
	if (!c->calls && !c->pushes)
		return;
	cl_schedule_reconnect(c, c->ep.conf.reconnect_delay_ms);
}

static void cl_on_recv(struct rr_tp_client *c, struct tp_conn *cn,
		       const struct rpcrdma_wc *wc)
{
	uint32_t idx = (uint32_t)WRVAL(wc->wr_id);
	const uint8_t *buf = cn->rbuf + (size_t)idx * cn->rsize;
	bool inv = wc->flags & RPCRDMA_WC_WITH_INV;
	struct rr_xprt_reply res;
	struct rr_xprt_rqst *rq = NULL;
	unsigned valid_before = 0;

	count_form(&c->ep, buf, RR_MIN(wc->byte_len, cn->rsize), false);
	if (wc->byte_len >= 4)
		rq = rr_xprt_req_find(&c->req, rr_get_be32(buf));
	if (rq)
		for (unsigned i = 0; i < rq->nregs; i++)
			valid_before += rq->regs[i].valid;
	rr_xprt_req_recv(&c->req, buf, RR_MIN(wc->byte_len, cn->rsize), inv,
			 wc->invalidated_stag, &res);
	if (res.inv_other && c->live_stags)
		c->live_stags--;   /* another Call's STag, invalidated by the peer */
	if (rq) {
		unsigned valid_after = 0;

		for (unsigned i = 0; i < rq->nregs; i++)
			valid_after += rq->regs[i].valid;
		c->live_stags -= valid_before - valid_after;
	}
	if (res.kind == RR_XPRT_R_PULL) {
		(void)post_recv(cn, idx);
		cl_rrep_on_pull(c, cn, &res);
		cl_pump(c);
		return;
	}
	if (res.kind != RR_XPRT_R_DROP) {
		struct tp_call *k = res.call->user;
		struct rr_tp_rpc *rpc = k->rpc;
		bool lent = false;

		if (res.kind == RR_XPRT_R_REPLY) {
			/* An inline Reply is handed over in place: the Receive
			 * is reposted when the reply is released. At most
			 * TP_LEND_MAX per connection, so credits + 4 Receives
			 * stay posted; beyond, or for a Long Reply (in the
			 * Reply chunk buffer), a copy. */
			if (res.payload >= buf && res.payload + res.payload_len <= buf + cn->rsize &&
			    cn->lent < TP_LEND_MAX) {
				rpc->reply = (uint8_t *)(uintptr_t)res.payload;
				rpc->lent_conn = cn;
				rpc->lent_idx = idx;
				cn->lent++;
				lent = true;
			} else {
				rpc->reply = rr_alloc(c->ep.env,
						      res.payload_len ? res.payload_len : 1);
				if (rpc->reply)
					memcpy(rpc->reply, res.payload, res.payload_len);
			}
			if (rpc->reply) {
				rpc->reply_len = res.payload_len;
				for (unsigned i = 0; i < res.nsinks; i++) {
					rpc->placed[i] = res.sink_len[i];
					rpc->is_placed[i] = res.sink_placed[i];
				}
				cl_set_result(k, 0);
			} else {
				cl_set_result(k, -ENOMEM);
			}
		} else {
			cl_set_result(k, res.err);
		}
		if (k->has_credit) {
			(void)rr_cred_req_on_reply(&c->cred, res.credit);
			k->has_credit = false;
		} else {
			(void)rr_cred_req_grant(&c->cred, res.credit);
		}
		if (!lent)
			(void)post_recv(cn, idx);
		cl_invalidate(c, k);
	} else {
		(void)post_recv(cn, idx);
	}
	cl_pump(c);
}

static void cl_on_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	if (WRTYPE(wc->wr_id) == WR_PUSH) {
		cl_push_wc(c, cn, wc);
		return;
	}
	if (wc->status != RPCRDMA_WC_SUCCESS) {
		if (WRTYPE(wc->wr_id) == WR_INV) {
			struct tp_call *k = WRPTR(wc->wr_id);

			if (k->inv_pending)
				k->inv_pending--;
		}
		if (WRTYPE(wc->wr_id) == WR_SEND)
			slot_put(cn, (uint32_t)WRVAL(wc->wr_id));
		if (!cn->dead) {
			cn->dead = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
		}
		return;
	}
	switch (WRTYPE(wc->wr_id)) {
	case WR_RECV:
		if (!cn->dead)
			cl_on_recv(c, cn, wc);
		break;
	case WR_SEND:
		slot_put(cn, (uint32_t)WRVAL(wc->wr_id));
		cl_rrep_flush(c, cn);
		break;
	case WR_RREAD:
		cl_rrep_read_done(c, cn, WRPTR(wc->wr_id));
		cl_pump(c);
		break;
	case WR_INV: {
		struct tp_call *k = WRPTR(wc->wr_id);

		if (k->inv_pending && --k->inv_pending == 0 && k->state == C_INVAL)
			cl_finish(c, k);
		cl_pump(c);
		break;
	}
	default:
		break;
	}
}

static void cl_on_cm(struct rr_tp_client *c, const struct rpcrdma_cm_event *ev)
{
	struct tp_conn *cn = ev->user_ctx;

	if (!cn || cn != c->conn) {
		return;
	}
	switch (ev->type) {
	case RPCRDMA_CM_ESTABLISHED: {
		struct rpcrdma_conn_info info;

		conn_negotiate(cn, RR_PD_REQUESTER, ev->private_data, ev->private_data_len);
		cn->commit = (cn->neg.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT) &&
			     rpcrdma_qp_set_commit(cn->qp, true) == 0;
		if (!cn->commit && (c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT))
			(void)rpcrdma_qp_set_commit(cn->qp, false);
		cn->ord = rpcrdma_conn_query(cn->id, &info) == 0 ? info.ord : 1;
		rr_xprt_req_set_params(&c->req, &cn->params);
		cn->established = true;
		if (c->connect_status == 1)
			c->connect_status = 0;
		else
			c->ep.stats.reconnects++;
		pthread_cond_broadcast(&c->ep.cond);
		cl_pump(c);
		break;
	}
	case RPCRDMA_CM_REJECTED:
	case RPCRDMA_CM_UNREACHABLE:
	case RPCRDMA_CM_ERROR:
	case RPCRDMA_CM_DISCONNECTED:
		if (c->connect_status == 1) {
			c->connect_status = ev->status ? ev->status : -ECONNREFUSED;
			pthread_cond_broadcast(&c->ep.cond);
			c->conn = NULL;
			conn_bury(cn);
			return;
		}
		cl_conn_lost(c, cn);
		break;
	default:
		break;
	}
}

/* ======================================================================
 * Server (responder)
 * ====================================================================== */

static void sv_conn_put(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (--cn->refs)
		return;
	{
		struct tp_conn **pp;

		for (pp = &s->conns; *pp; pp = &(*pp)->next)
			if (*pp == cn) {
				*pp = cn->next;
				s->nconns--;
				break;
			}
	}
	conn_bury(cn);
}

static void sv_conn_lost(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (cn->dead && !cn->established)
		return;
	if (!cn->dead && cn->established)
		s->ep.stats.fatal_errors++;
	cn->dead = true;
	cn->established = false;
	sv_park_fail_all(s, cn);
	sv_rrep_fence_all(s, cn);
	/* Reqs still reading were never delivered: free those with no Read
	 * in flight now, the others when their Reads are flushed. */
	cn->refs++;
	while (cn->readq) {
		struct tp_sreq *r = cn->readq;

		cn->readq = r->next;
		r->failed = true;
		if (r->reads_done == r->next_read)
			sreq_free(s, r);
	}
	cn->refs--;
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
	expo_release_all(cn);   /* push-mode regions die with the connection */
	pthread_cond_broadcast(&s->ep.cond);
	sv_conn_put(s, cn);
}

/* Frees @r and drops its reference on the connection. */
static void sreq_free(struct rr_tp_server *s, struct tp_sreq *r)
{
	struct tp_conn *cn = r->conn;

	if (r->read_mr)
		(void)rpcrdma_dereg_mr(r->read_mr);
	rr_xprt_rcall_release(&cn->rsp, r->rc);
	rr_free(s->ep.env, r);
	sv_conn_put(s, cn);
}

/* The Reply's RDMA Writes are over: its registrations go. */
static void sv_reply_release(struct tp_sreq *r)
{
	for (unsigned i = 0; i < r->nmr; i++)
		(void)rpcrdma_dereg_mr(r->mrs[i]);
	r->nmr = 0;
}

/* @r's Send completed (@status 0) or failed: nothing references the Reply's
 * memory any more. A synchronous replier is woken; an asynchronous one is
 * queued for its sent upcall (sv_sent_upcalls, without the lock). */
static void sv_reply_sent(struct rr_tp_server *s, struct tp_sreq *r, int status)
{
	r->send_done = true;
	r->send_pending = false;
	r->send_status = status;
	sv_reply_release(r);
	if (r->orphan) {
		sreq_free(s, r);   /* rr_tp_server_done came first */
		return;
	}
	if (r->sent) {
		r->sent_next = NULL;
		if (!s->sent_head)
			s->sent_tail = &s->sent_head;
		*s->sent_tail = r;
		s->sent_tail = &r->sent_next;
	}
}

/* Runs the sent upcalls of completed asynchronous Replies, in completion
 * order, without the endpoint's lock (they may call rr_tp_server_done).
 * Called with the lock held, on the progress thread (or by destroy). */
static void sv_sent_upcalls(struct rr_tp_server *s)
{
	while (s->sent_head) {
		struct tp_sreq *r = s->sent_head;
		rr_tp_sent_fn fn = r->sent;
		void *arg = r->sent_arg;
		int st = r->send_status;

		s->sent_head = r->sent_next;
		r->sent_next = NULL;
		r->sent = NULL;
		pthread_mutex_unlock(&s->ep.lock);
		fn(arg, st);
		pthread_mutex_lock(&s->ep.lock);
	}
}

/* The Reply to @r is about to be sent (a Read-chunk Reply when
 * @read_chunk): its credit accounting (rr_cred_rsp_reply), once. */
static int sv_credit(struct tp_conn *cn, struct tp_sreq *r, bool read_chunk, uint32_t *grant)
{
	int rc = rr_cred_rsp_reply(&cn->cred, read_chunk, grant);

	if (rc == 0 && r)
		r->credited = true;
	return rc;
}

/* Sends the RDMA_ERROR prepared in @msg, the answer to a Call (@r, when it
 * has one, else its credit accounting is taken here). With no send slot
 * free (the peer does not take our Sends) the connection ends: never a
 * silent drop. */
static void sv_send_error_for(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
			      const uint8_t *msg, size_t len)
{
	uint32_t slot, grant;

	if (r && r->credited)
		grant = cn->cred.last_grant ? cn->cred.last_grant : 1;
	else if (sv_credit(cn, r, false, &grant))
		grant = 1;
	if (slot_get(cn, &slot)) {
		if (!cn->dead)
			sv_conn_lost(s, cn);
		return;
	}
	memcpy(slot_buf(cn, slot), msg, len);
	rr_put_be32(slot_buf(cn, slot) + 8, grant);
	if (post_slot_send(cn, slot, (uint32_t)len, WRID(WR_SEND, slot), false, 0, NULL)) {
		slot_put(cn, slot);
		if (!cn->dead)
			sv_conn_lost(s, cn);
	}
}

static void sv_send_error(struct rr_tp_server *s, struct tp_conn *cn,
			  const uint8_t *msg, size_t len)
{
	sv_send_error_for(s, cn, NULL, msg, len);
}

/* The responder cannot process the Call @xid (@r, if it has one): no memory,
 * or its Reply could not be built. It gets RDMA_ERROR/ERR_CHUNK, which
 * needs no allocation (RFC 8166 has no better code for it). */
static void sv_refuse(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
		      uint32_t xid)
{
	uint8_t err[32];
	int n = rr_xprt_encode_error(xid, RR_XPRT_VERSION, 1, RR_XPRT_ERR_CHUNK, err,
				     sizeof(err));

	if (cn->dead || n <= 0)
		return;
	s->ep.stats.calls_refused++;
	s->ep.stats.err_chunk_sent++;
	s->ep.stats.sends++;
	sv_send_error_for(s, cn, r, err, (size_t)n);
}

/* Issues RDMA Reads from the queue while fewer than ORD are outstanding. */
static void sv_pump_reads(struct rr_tp_server *s, struct tp_conn *cn)
{
	uint32_t ord = cn->ord ? cn->ord : 1;

	while (cn->readq && cn->reads_inflight < ord && !cn->dead) {
		struct tp_sreq *r = cn->readq;
		const struct rr_xprt_read_op *o = &r->rc->reads[r->next_read];
		struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)(r->rc->buf + o->local_off),
					  o->len, rpcrdma_mr_lkey(r->read_mr)};
		struct rpcrdma_send_wr wr;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID(WR_READ, r);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = RPCRDMA_WR_RDMA_READ;
		wr.flags = RPCRDMA_SEND_SIGNALED;
		wr.u.rdma.stag = o->stag;
		wr.u.rdma.remote_offset = o->remote;
		if (rpcrdma_post_send(cn->qp, &wr, NULL)) {
			sv_conn_lost(s, cn);
			return;
		}
		cn->reads_inflight++;
		if (++r->next_read == r->rc->nreads)
			cn->readq = r->next;
	}
	(void)s;
}

static void sv_deliver(struct rr_tp_server *s, struct tp_sreq *r)
{
	r->pub.msg = r->rc->msg;
	r->pub.len = r->rc->msg_len;
	r->pub.xid = r->rc->xid;
	r->pub.priv = r;
	r->next = s->deliver;
	s->deliver = r;
}

static void sv_on_recv(struct rr_tp_server *s, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	uint32_t idx = (uint32_t)WRVAL(wc->wr_id);
	const uint8_t *buf = cn->rbuf + (size_t)idx * cn->rsize;
	struct rr_xprt_rcall *rc = NULL;
	uint8_t err[32];
	size_t elen;
	enum rr_xprt_rsp_action a;
	struct tp_sreq *r;
	uint32_t dxid;

	count_form(&s->ep, buf, RR_MIN(wc->byte_len, cn->rsize), false);
	if (s->ep.conf.idle_timeout_ms)
		cn->last_rx_ns = now_ns(&s->ep);
	if (cn->params.reliable_reply &&
	    rr_rrep_is_done(buf, RR_MIN(wc->byte_len, cn->rsize), &dxid)) {
		sv_rrep_on_done(s, cn, wc, idx, dxid);
		return;
	}
	(void)rr_cred_rsp_on_call(&cn->cred);
	a = rr_xprt_rsp_recv(&cn->rsp, buf, RR_MIN(wc->byte_len, cn->rsize),
			     cn->cred.last_grant ? cn->cred.last_grant : 1, err, &elen, &rc);
	if (post_recv(cn, idx) == 0)
		rr_cred_rsp_posted(&cn->cred, 1);
	switch (a) {
	case RR_XPRT_A_DROP: {
		uint32_t g;

		(void)rr_cred_rsp_reply(&cn->cred, false, &g); /* no Reply owed */
		return;
	}
	case RR_XPRT_A_ERROR:
		sv_send_error(s, cn, err, elen);
		return;
	default:
		break;
	}
	r = rr_zalloc(s->ep.env, sizeof(*r));
	if (!r) {
		uint32_t xid = rc->xid;

		rr_xprt_rcall_release(&cn->rsp, rc);
		sv_refuse(s, cn, NULL, xid);
		return;
	}
	r->conn = cn;
	cn->refs++;
	r->rc = rc;
	if (a == RR_XPRT_A_DELIVER) {
		sv_deliver(s, r);
		return;
	}
	if (failed_take(s, cn, rc->xid)) {
		int n = rr_xprt_encode_error(rc->xid, RR_XPRT_VERSION, 1, RR_XPRT_ERR_CHUNK,
					     err, sizeof(err));

		if (n > 0) {
			s->ep.stats.sends++;
			s->ep.stats.err_chunk_sent++;
			sv_send_error(s, cn, err, (size_t)n);
		}
		sreq_free(s, r);
		return;
	}
	if (rpcrdma_reg_mr_simple(cn->pd, rc->buf, rc->buf_len, RPCRDMA_ACCESS_LOCAL_WRITE,
				  &r->read_mr)) {
		sreq_free(s, r);
		sv_conn_lost(s, cn);
		return;
	}
	r->next = NULL;
	{
		struct tp_sreq **pp = &cn->readq;

		while (*pp)
			pp = &(*pp)->next;
		*pp = r;
	}
	sv_pump_reads(s, cn);
}

static void sv_on_read_done(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r)
{
	uint8_t err[32];
	size_t elen;
	enum rr_xprt_rsp_action a;

	cn->reads_inflight--;
	if (++r->reads_done < r->rc->nreads)
		return;
	a = rr_xprt_rsp_assemble(&cn->rsp, r->rc, cn->cred.last_grant ? cn->cred.last_grant : 1,
				 err, &elen);
	if (a == RR_XPRT_A_DELIVER) {
		sv_deliver(s, r);
		return;
	}
	if (a == RR_XPRT_A_ERROR) {
		sv_send_error(s, cn, err, elen);
	} else {
		uint32_t g;

		(void)rr_cred_rsp_reply(&cn->cred, false, &g);
	}
	sreq_free(s, r);
}

static void sv_on_wc(struct rr_tp_server *s, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	unsigned t = WRTYPE(wc->wr_id);

	if (t == WR_RINV) {
		sv_rrep_inv_done(s, cn, wc);
		if (wc->status != RPCRDMA_WC_SUCCESS && !cn->dead)
			sv_conn_lost(s, cn);
		return;
	}
	if (t == WR_REPLY || t == WR_SEND)
		cn->tx_progress_ns = now_ns(&s->ep);
	if (t == WR_REPLY) {
		/* The slot names its waiting req, if it still waits: a req
		 * given up on a dead connection is no longer reachable. */
		uint32_t slot = (uint32_t)WRVAL(wc->wr_id);
		struct tp_sreq *r = slot < cn->nsend ? cn->sowner[slot] : NULL;

		if (slot < cn->nsend)
			cn->sowner[slot] = NULL;
		if (r)
			sv_reply_sent(s, r, wc->status == RPCRDMA_WC_SUCCESS ? 0 : -EIO);
		slot_put(cn, slot);
		pthread_cond_broadcast(&s->ep.cond);
	} else if (t == WR_SEND) {
		slot_put(cn, (uint32_t)WRVAL(wc->wr_id));
	}
	if (wc->status != RPCRDMA_WC_SUCCESS) {
		if (t == WR_READ) {
			struct tp_sreq *r = WRPTR(wc->wr_id);
			bool was_failed = r->failed;

			if (!was_failed && wc->status != RPCRDMA_WC_WR_FLUSH_ERR)
				failed_note(s, cn, r->rc->xid);

			cn->reads_inflight--;
			r->reads_done++;
			if (!cn->dead)
				sv_conn_lost(s, cn);   /* fails r unless in flight only */
			if (!was_failed && !r->failed) {
				/* r was fully issued (not in the queue). */
				r->failed = true;
			}
			if (r->reads_done == r->next_read)
				sreq_free(s, r);
			return;
		}
		if (!cn->dead)
			sv_conn_lost(s, cn);
		return;
	}
	switch (t) {
	case WR_RECV:
		if (!cn->dead)
			sv_on_recv(s, cn, wc);
		break;
	case WR_READ: {
		struct tp_sreq *r = WRPTR(wc->wr_id);

		if (r->failed || cn->dead) {
			cn->reads_inflight--;
			r->failed = true;
			if (++r->reads_done == r->next_read && r != cn->readq)
				sreq_free(s, r);
			break;
		}
		sv_on_read_done(s, cn, r);
		sv_pump_reads(s, cn);
		break;
	}
	default:
		break;
	}
}

/* Half-open connections a connection request may take the file
 * descriptors of when its own setup ran out of them (a soft connection
 * holds 4: its socket and its CQ's). */
#define SV_SHED_HANDSHAKES 4u

/* Whether one more connection, from @peer (NULL: unknown), would exceed
 * max_conns or max_conns_per_host (lock held). Connections still being
 * torn down count until they are gone. */
static bool sv_over_limits(struct rr_tp_server *s, const struct sockaddr_storage *peer)
{
	const struct rr_tp_conf *cf = &s->ep.conf;
	unsigned same = 0;

	if (cf->max_conns && s->nconns >= cf->max_conns)
		return true;
	if (!cf->max_conns_per_host || !peer)
		return false;
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		if (cn->has_peer && rr_addr_same_host(&cn->peer, peer) &&
		    ++same >= cf->max_conns_per_host)
			return true;
	return false;
}

/* conn_new for a connection request, without the endpoint's lock (held on
 * entry and on return). Creating a connection's resources (Receive and
 * Send buffers of megabytes, their registrations, a CQ and a QP: provider
 * calls that are thread-safe, docs in include/rpcrdma/rdma.h) is the
 * costliest step of the server loop; the threads that answer Calls need the
 * lock to post their Replies, and a mutex released only for an instant
 * between turns left them waiting for seconds while a storm of connections
 * was set up (issue 12 finding 7). Nothing else sees @cn before the loop
 * links it into s->conns; conn_new reads only what is fixed at creation. */
static struct tp_conn *sv_conn_new(struct rr_tp_server *s, uint32_t n)
{
	struct tp_conn *cn;

	pthread_mutex_unlock(&s->ep.lock);
	cn = conn_new(&s->ep, n, n + 8);
	pthread_mutex_lock(&s->ep.lock);
	return cn;
}

/* Refuses connection request @id (an MPA Reject on soft; rdma_cm's
 * reject on verbs) and counts it. */
static void sv_refuse_conn(struct rr_tp_server *s, struct rpcrdma_cm_id *id)
{
	(void)rpcrdma_reject(id, NULL, 0);
	(void)rpcrdma_cm_id_destroy(id);
	s->ep.stats.refused_conns++;
}

/* Idle timeout (conf.idle_timeout_ms): an established connection whose
 * last Receive is that old, with no Call in progress (every request holds
 * a reference on it until done) and no Reply waiting for its RDMA_DONE, is
 * disconnected and counted. Looked at no more often than every tenth of
 * the timeout (at least every 100 ms); lock held. */
static void sv_idle_sweep(struct rr_tp_server *s)
{
	uint64_t to = (uint64_t)s->ep.conf.idle_timeout_ms * 1000000u;
	uint64_t now;
	struct tp_conn *cn, *nx;

	if (!to)
		return;
	now = now_ns(&s->ep);
	if (now < s->idle_look_ns)
		return;
	s->idle_look_ns = now + RR_MIN(to / 10, 100000000ull);
	for (cn = s->conns; cn; cn = nx) {
		nx = cn->next;
		if (cn->dead || !cn->established || cn->refs > 1 || cn->rrep.count ||
		    cn->ndefer || now - cn->last_rx_ns < to)
			continue;
		s->ep.stats.idle_closed++;
		cn->established = false;   /* an orderly close, not a fatal error */
		sv_conn_lost(s, cn);
	}
}

static void sv_on_cm(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev)
{
	switch (ev->type) {
	case RPCRDMA_CM_CONNECT_REQUEST: {
		struct tp_conn *cn;
		uint8_t pd[RR_PD_MAX_LEN];
		struct rpcrdma_conn_param prm = {0};
		uint32_t n = s->ep.conf.credits + 4;
		struct sockaddr_storage peer;
		bool has_peer = rpcrdma_cm_peer_addr(ev->id, &peer) == 0;
		int len;

		/* Limits first, before anything is allocated for it. */
		if (s->stopping || sv_over_limits(s, has_peer ? &peer : NULL)) {
			sv_refuse_conn(s, ev->id);
			return;
		}
		/* Reliable reply: one more Receive per Read-chunk Reply that
		 * may await its RDMA_DONE (docs/protocol.md "Credits"). */
		if (s->ep.conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY)
			n += s->ep.conf.rrep_max;

		cn = sv_conn_new(s, n);
		if (cn && !conn_ok(cn) && (cn->err == -EMFILE || cn->err == -ENFILE) &&
		    s->listen_id && rr_cm_listen_shed(s->listen_id, SV_SHED_HANDSHAKES) > 0) {
			/* out of file descriptors: half-open connections (peers
			 * that never sent their MPA Request) give theirs to
			 * this one, which completed its handshake */
			conn_free(cn);
			cn = sv_conn_new(s, n);
		}
		/* stopped meanwhile (rr_tp_server_stop): refused as above */
		if (!conn_ok(cn) || s->stopping || post_all_recvs(cn)) {
			conn_free(cn);
			sv_refuse_conn(s, ev->id);
			return;
		}
		conn_negotiate(cn, RR_PD_RESPONDER, ev->private_data, ev->private_data_len);
		rr_xprt_rsp_init(&cn->rsp, s->ep.env, &cn->params, &s->ep.stats);
		rr_xprt_rsp_keep_spares(&cn->rsp, RR_XPRT_RSP_SPARES);
		rr_cred_rsp_init(&cn->cred, s->ep.conf.credits,
				 cn->params.reliable_reply ? s->ep.conf.rrep_max : 0);
		rr_rrep_table_init(&cn->rrep,
				   s->ep.conf.rrep_clock ? s->ep.conf.rrep_clock : s->ep.env,
				   (uint64_t)s->ep.conf.rrep_timeout_ms * 1000000u, &s->ep.stats);
		rr_cred_rsp_posted(&cn->cred, n);
		cn->id = ev->id;
		cn->has_peer = has_peer;
		if (has_peer)
			cn->peer = peer;
		cn->last_rx_ns = now_ns(&s->ep);
		rpcrdma_cm_id_set_user_ctx(ev->id, cn);
		len = local_pd(&s->ep, pd, sizeof(pd));
		prm.private_data = pd;
		prm.private_data_len = len > 0 ? (uint16_t)len : 0;
		prm.responder_resources = s->ep.conf.ird;
		prm.initiator_depth = s->ep.conf.ord;
		/* Both advertised RDMA Commit: the QP serves Commits. */
		cn->commit = (cn->neg.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT) != 0;
		if (cn->commit)
			prm.flags |= RPCRDMA_CONN_COMMIT;
		if (rpcrdma_accept(ev->id, cn->qp, &prm)) {
			conn_free(cn);   /* destroys the id: the peer sees a close */
			s->ep.stats.refused_conns++;
			return;
		}
		cn->next = s->conns;
		s->conns = cn;
		s->nconns++;
		break;
	}
	case RPCRDMA_CM_ESTABLISHED: {
		struct tp_conn *cn = ev->user_ctx;
		struct rpcrdma_conn_info info;

		if (!cn || cn->dead)
			return;
		cn->ord = rpcrdma_conn_query(cn->id, &info) == 0 ? info.ord : 1;
		if (cn->ord == 0)
			cn->ord = 1;
		cn->established = true;
		break;
	}
	case RPCRDMA_CM_DISCONNECTED:
	case RPCRDMA_CM_ERROR: {
		struct tp_conn *cn = ev->user_ctx;

		if (cn && (!cn->dead || cn->established))
			sv_conn_lost(s, cn);
		break;
	}
	default:
		break;
	}
}

/* ======================================================================
 * Progress thread
 * ====================================================================== */

/* Polls @cn's CQ until a short batch; the number of completions. */
static int drain_cq(struct tp_ep *ep, struct tp_conn *cn)
{
	struct rpcrdma_wc wc[32];
	int n, total = 0, batches = 0;

	/* A short batch emptied the queue: stop there rather than poll once
	 * more (on soft, a poll of an empty queue is a system call: it looks
	 * at the sockets). What arrives later makes the CQ's fd readable. */
	do {
		n = rpcrdma_cq_poll(cn->cq, (int)RR_ARRAY_SIZE(wc), wc);
		ep->stats.cq_polls++;
		for (int i = 0; i < n; i++) {
			if (ep->is_server)
				sv_on_wc((struct rr_tp_server *)ep, cn, &wc[i]);
			else
				cl_on_wc((struct rr_tp_client *)ep, cn, &wc[i]);
		}
		if (n > 0)
			total += n;
		/* a busy peer's completions: the rest on the next turn (its CQ
		 * then counts as unarmed and is served first), not before the
		 * other connections */
	} while (n == (int)RR_ARRAY_SIZE(wc) && ++batches < 8);
	return total;
}

/* Arms @cn's CQ and polls it, again until a poll after the arm finds
 * nothing: a completion that the poll's own receive pushes uses the arm up
 * without a notification (soft: rr_cq_ring_push_ex quiet), and a CQ left
 * disarmed stops counting as attended, so the provider could then receive
 * for it with no notification at all (a lost wake-up). Whether it is armed. */
static bool arm_drain(struct tp_ep *ep, struct tp_conn *cn)
{
	for (int i = 0; i < 64; i++) {
		if (rpcrdma_cq_arm(cn->cq, false) != 0)
			return false;
		if (drain_cq(ep, cn) == 0)
			return true;
		if (cn->dead)
			break;
	}
	return false; /* still busy: the caller serves it on its next turn */
}

static void deliver_upcalls(struct tp_ep *ep)
{
	if (ep->is_server) {
		struct rr_tp_server *s = (struct rr_tp_server *)ep;

		while (s->deliver) {
			struct tp_sreq *r = s->deliver;

			s->deliver = r->next;
			r->next = NULL;
			pthread_mutex_unlock(&ep->lock);
			s->recv(s->rctx, &r->pub);
			pthread_mutex_lock(&ep->lock);
		}
	} else {
		struct rr_tp_client *c = (struct rr_tp_client *)ep;

		while (c->done) {
			struct tp_call *k = c->done;
			struct rr_tp_rpc *rpc = k->rpc;

			c->done = k->done_next;
			rpc->priv = NULL;
			rr_free(ep->env, k);
			pthread_mutex_unlock(&ep->lock);
			c->complete(c->cctx, rpc);
			pthread_mutex_lock(&ep->lock);
		}
		pthread_cond_broadcast(&ep->cond);
	}
}

/* Connection-manager events the server loop handles per turn, between two
 * services of its connections' CQs. Each CONNECT_REQUEST sets up a
 * connection (buffers, registrations, a QP: the costliest thing the loop
 * does), and while the loop emptied the channel new requests kept coming:
 * a storm of connections arriving as fast as the loop set them up kept it
 * there for as long as the storm lasted, every established connection's
 * Calls waiting (issue 12 finding 7; seconds under ASan, or wherever a
 * setup costs milliseconds). With a budget per turn, established
 * connections are served every few setups whatever the storm's size, and
 * a new client's request waits only for the requests queued before it
 * (the channel is a FIFO; a peer's connection has one request there until
 * it is answered). A connection brings about three events (request,
 * established, disconnected): 4 are one or two setups. The channel's fd
 * stays readable while events are left, so the next turn comes at once. */
#define SV_CM_PER_TURN 4

/* Handles up to SV_CM_PER_TURN queued CM events of server @s (lock held). */
static void sv_cm_turn(struct rr_tp_server *s)
{
	struct rpcrdma_cm_event ev;

	for (int i = 0; i < SV_CM_PER_TURN && rpcrdma_cm_get_event(s->ep.ch, &ev) == 0; i++)
		sv_on_cm(s, &ev);
}

/* Makes the server loop's poll set hold every connection (lock held).
 * On allocation failure the old arrays stay (or none: a one-connection
 * set), and the loop serves the connections beyond them on every turn. */
static void sv_poll_grow(struct rr_tp_server *s)
{
	struct tp_ep *ep = &s->ep;
	unsigned want = s->nconns < 8 ? 8 : s->nconns;
	struct pollfd *pfd;
	struct tp_conn **cns;

	if (s->pfd && s->pcap >= want)
		return;
	want = want + want / 2;
	pfd = rr_alloc(ep->env, sizeof(*pfd) * (want + 2));
	cns = rr_alloc(ep->env, sizeof(*cns) * want);
	if (!pfd || !cns) {
		rr_free(ep->env, pfd);
		rr_free(ep->env, cns);
		return;
	}
	rr_free(ep->env, s->pfd);
	rr_free(ep->env, s->pcns);
	s->pfd = pfd;
	s->pcns = cns;
	s->pcap = want;
}

static void *progress(void *arg)
{
	struct tp_ep *ep = arg;

	/* named for top -H, gdb, perf */
	pthread_setname_np(pthread_self(), ep->is_server ? "rr-rdma-srv" : "rr-rdma-clnt");

	pthread_mutex_lock(&ep->lock);
	while (!ep->stop) {
		struct pollfd pfd_one[3], *pfd = pfd_one;
		struct tp_conn *cns_one[1], **cns = cns_one;
		unsigned n = 0, ncn = 0, cap = 1;
		int timeout = 100;
		struct rpcrdma_cm_event ev;
		bool unarmed = false;

		if (ep->is_server) {
			struct rr_tp_server *s = (struct rr_tp_server *)ep;
			struct tp_conn *one = s->conns;

			/* One connection: sleep in its CQ (soft: a blocking
			 * recvmsg on its socket), one system call per Call
			 * where poll + epoll_wait + recvmsg made three. Other
			 * threads end the wait through ep_wake (interrupt
			 * latch); the CM channel is looked at (no system call
			 * when empty) after each wait, which lasts at most
			 * SV_CQ_WAIT_MS: a second client's request waits that
			 * long at most. Replies posted here complete into the
			 * ring, which the next wait looks at first: no arm.
			 * Idle for SV_IDLE_WAITS slices (~200 ms), the loop
			 * goes back to poll(2) over every fd, which sleeps
			 * until something happens (at most 100 ms): an idle
			 * server does not wake 200 times a second; the first
			 * Call after the pause brings the slices back. */
			enum { SV_CQ_WAIT_MS = 5, SV_IDLE_WAITS = 40 };

			if (one && !one->next && one->established && !one->dead && !s->deliver &&
			    s->idle_waits < SV_IDLE_WAITS && rr_context_can_interrupt(ep->ctx)) {
				struct rpcrdma_wc wc[32];
				int got;

				one->refs++;
				one->armed = false; /* waited on, not armed */
				pthread_mutex_unlock(&ep->lock);
				got = rpcrdma_cq_wait(one->cq, (int)RR_ARRAY_SIZE(wc), wc,
						      SV_CQ_WAIT_MS);
				pthread_mutex_lock(&ep->lock);
				s->idle_waits = got > 0 ? 0 : s->idle_waits + 1;
				for (int i = 0; i < got; i++)
					sv_on_wc(s, one, &wc[i]);
				sv_cm_turn(s);
				sv_rrep_expire(s, one);
				deliver_upcalls(ep);
				/* Replies answered on this thread: post them
				 * (one batch) and run their sent upcalls. */
				sv_after_upcalls(s);
				sv_conn_put(s, one);
				sv_idle_sweep(s);
				grave_sweep(ep);
				rr_mem_trim_tick();
				continue;
			}
		}
		if (ep->is_server) {
			struct rr_tp_server *s = (struct rr_tp_server *)ep;

			sv_poll_grow(s);
			if (s->pfd) {
				pfd = s->pfd;
				cns = s->pcns;
				cap = s->pcap;
			}
		}
		pfd[n++] = (struct pollfd){ep->evfd, POLLIN, 0};
		pfd[n++] = (struct pollfd){rpcrdma_cm_channel_fd(ep->ch), POLLIN, 0};
		if (ep->is_server) {
			struct rr_tp_server *s = (struct rr_tp_server *)ep;

			/* beyond @cap (an allocation failed): served on every
			 * turn, woken by the others or the 100 ms timeout */
			for (struct tp_conn *cn = s->conns; cn; cn = cn->next) {
				cn->in_set = ncn < cap;
				if (cn->in_set)
					cns[ncn++] = cn;
				unarmed |= !cn->armed && !cn->dead;
			}
			if (unarmed)
				timeout = 0; /* served at once, then armed */
		} else {
			struct rr_tp_client *c = (struct rr_tp_client *)ep;

			/* While a caller thread receives, it alone drains the
			 * CQ (one consumer: no lost notification). */
			if (c->conn && !c->waiter && cl_busy(c))
				cns[ncn++] = c->conn;
			if (c->reconnect_at) {
				uint64_t t = now_ns(ep);

				timeout = c->reconnect_at > t ?
					(int)((c->reconnect_at - t) / 1000000u) + 1 : 0;
			}
		}
		for (unsigned i = 0; i < ncn; i++)
			pfd[n++] = (struct pollfd){rpcrdma_cq_fd(cns[i]->cq), POLLIN, 0};
		pthread_mutex_unlock(&ep->lock);
		(void)poll(pfd, n, timeout);
		pthread_mutex_lock(&ep->lock);
		if (ep->is_server) {
			/* traffic on a CQ: back to the one-connection wait */
			for (unsigned i = 2; i < n; i++)
				if (pfd[i].revents)
					((struct rr_tp_server *)ep)->idle_waits = 0;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;

			if (read(ep->evfd, &v, sizeof(v)) < 0) {
				/* nothing pending */
			}
		}
		/* The channel's fd is readable while events are queued. A
		 * server takes a few per turn (sv_cm_turn), a client all. */
		if ((pfd[1].revents & POLLIN) && ep->is_server)
			sv_cm_turn((struct rr_tp_server *)ep);
		while ((pfd[1].revents & POLLIN) && !ep->is_server &&
		       rpcrdma_cm_get_event(ep->ch, &ev) == 0)
			cl_on_cm((struct rr_tp_client *)ep, &ev);
		/* Serve the CQs whose fd woke the poll, and connections that
		 * came after the fds were gathered; the others stay armed
		 * from their last turn (a CQ is armed again, below, every
		 * time it is served), so nothing is missed, and an idle
		 * connection costs no system call per Call of another one
		 * (on soft a poll looks at the socket: one recv each). */
		if (ep->is_server) {
			struct rr_tp_server *s = (struct rr_tp_server *)ep;
			struct tp_conn *cn = s->conns, *nx;

			/* served: its fd woke the poll; or it is not in the
			 * set (accepted meanwhile, or beyond it); or the loop
			 * has not armed it since it last served it (new, or
			 * waited on directly): its completions could come with
			 * no notification. cns[] entries stay valid for the
			 * turn (a dropped connection is freed by grave_sweep). */
			for (cn = s->conns; cn; cn = cn->next)
				cn->serve = !cn->armed || !cn->in_set;
			for (unsigned i = 0; i < ncn; i++)
				if (pfd[i + 2].revents)
					cns[i]->serve = true;
			for (cn = s->conns; cn; cn = nx) {
				nx = cn->next;
				cn->refs++;
				if (cn->serve) {
					(void)rpcrdma_cq_get_event(cn->cq);
					drain_cq(ep, cn);
				}
				sv_rrep_expire(s, cn);
				sv_conn_put(s, cn);
			}
			/* Calls answered on this thread post their Sends now:
			 * arm only after them, then look once more, so that
			 * those completions need no notification (and no extra
			 * wake-up) while none is lost. */
			deliver_upcalls(ep);
			sv_post_deferred(s);
			for (cn = s->conns; cn; cn = nx) {
				nx = cn->next;
				if (!cn->serve)
					continue;
				cn->refs++;
				cn->armed = arm_drain(ep, cn);
				sv_conn_put(s, cn);
			}
		} else {
			struct rr_tp_client *c = (struct rr_tp_client *)ep;
			struct tp_conn *cn = c->waiter ? NULL : c->conn;

			if (cn && !cl_busy(c) && !cn->dead) {
				/* Idle: the CQ's fd is not watched, so that the
				 * next synchronous caller's Reply wakes that
				 * caller alone; a look without blocking on each
				 * wake-up (at least every 100 ms) still notices
				 * what arrives unasked (a disconnection). */
				drain_cq(ep, cn);
				if (c->conn == cn && cn->dead && cn->established)
					cl_conn_lost(c, cn);
			} else if (cn) {
				(void)rpcrdma_cq_get_event(cn->cq);
				(void)arm_drain(ep, cn);
				if (c->conn == cn && cn->dead && cn->established) {
					/* a fatal completion: wait for DISCONNECTED,
					 * or tear down now */
					cl_conn_lost(c, cn);
				}
			}
			if (c->reconnect_at && now_ns(ep) >= c->reconnect_at && !c->conn &&
			    !c->destroying) {
				c->reconnect_at = 0;
				if (cl_connect(c))
					cl_schedule_reconnect(c, c->ep.conf.reconnect_delay_ms * 4);
			}
		}
		deliver_upcalls(ep);
		if (ep->is_server) {
			sv_after_upcalls((struct rr_tp_server *)ep);
			sv_idle_sweep((struct rr_tp_server *)ep);
		}
		grave_sweep(ep);
		if (ep->is_server)
			rr_mem_trim_tick();
	}
	pthread_mutex_unlock(&ep->lock);
	return NULL;
}

static int ep_init(struct tp_ep *ep, const struct rr_tp_conf *conf, bool server,
		   const struct sockaddr *addr)
{
	struct rpcrdma_open_attr oa = {0};
	int rc;

	ep->conf = *conf;
	ep->env = rr_env(conf->env);
	ep->is_server = server;
	ep->evfd = -1;
	if (ep->conf.credits == 0)
		ep->conf.credits = 1;
	rr_tp_conf_inline(&ep->conf, conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT,
			  server);
	if (ep->conf.inline_send < 1024 || ep->conf.inline_recv < 1024)
		return -EINVAL;
	oa.env = conf->env;
	oa.device = conf->device;
	oa.addr = addr;
	oa.passive = server;
	oa.spin_us = conf->spin_us;
	rc = rpcrdma_open(conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT, &oa, &ep->ctx);
	if (rc)
		return rc;
	/* The server loop handles waits that end early (ep_wake): using the
	 * interrupt once (no CQ yet: nothing latched) lets the provider end
	 * them on CM events too (soft: a second client's request). */
	if (server)
		(void)rr_context_interrupt(ep->ctx);
	rc = rpcrdma_cm_channel_create(ep->ctx, &ep->ch);
	if (rc)
		return rc;
	{
		struct rpcrdma_caps caps;

		/* R tells the peer it may invalidate our STags: a requester can
		 * honour it only with invalidatable registrations. */
		ep->adv_r = ep->conf.remote_inv;
		if (!server && (!ep->conf.use_windows || rpcrdma_query(ep->ctx, &caps) ||
				!(caps.flags & RPCRDMA_CAP_INVALIDATABLE)))
			ep->adv_r = false;
		/* Never advertise RDMA Commit the provider cannot carry (verbs
		 * without FLUSH): persistence (Commit + durable registrations)
		 * or global visibility (FLUSH global). */
		if (rpcrdma_query(ep->ctx, &caps) ||
		    !((caps.flags & RPCRDMA_CAP_COMMIT && caps.flags & RPCRDMA_CAP_DURABLE) ||
		      caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE))
			ep->conf.ext_caps &= ~RR_PD_EXT_CAP_RDMA_COMMIT;
		/* A responder exposing Read chunks (reliable reply) can honour
		 * R only with invalidatable registrations too. */
		if (server && (ep->conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) &&
		    (!ep->conf.use_windows || rpcrdma_query(ep->ctx, &caps) ||
		     !(caps.flags & RPCRDMA_CAP_INVALIDATABLE)))
			ep->adv_r = false;
	}
	ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->evfd < 0)
		return -errno;
	pthread_mutex_init(&ep->lock, NULL);
	pthread_cond_init(&ep->cond, NULL);
	return 0;
}

static int ep_start(struct tp_ep *ep)
{
	if (pthread_create(&ep->thread, NULL, progress, ep))
		return -EAGAIN;
	ep->thread_started = true;
	return 0;
}

static void ep_stop(struct tp_ep *ep)
{
	if (ep->thread_started) {
		pthread_mutex_lock(&ep->lock);
		ep->stop = true;
		pthread_mutex_unlock(&ep->lock);
		ep_wake(ep);
		pthread_join(ep->thread, NULL);
		ep->thread_started = false;
	}
}

static void ep_fini(struct tp_ep *ep)
{
	grave_sweep(ep);
	if (ep->ch)
		(void)rpcrdma_cm_channel_destroy(ep->ch);
	if (ep->ctx)
		(void)rpcrdma_close(ep->ctx);
	if (ep->evfd >= 0) {
		close(ep->evfd);
		pthread_mutex_destroy(&ep->lock);
		pthread_cond_destroy(&ep->cond);
	}
}

static void abs_deadline(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* ======================================================================
 * Reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply-04; the protocol
 * decisions are in proto/rrep.[ch], the choices in docs/protocol.md)
 * ====================================================================== */

/* Responder: one exposed Reply. The window (or, without windows, the MR's
 * rkey) is the STag in the Read chunk; @buf is the Reply's Payload stream. */
struct rrep_exp {
	struct tp_conn *cn;
	struct rpcrdma_mr *mr;
	struct rpcrdma_mw *mw;
	uint8_t *buf;
	uint32_t len;              /* bytes of @buf (counted in rrep_bytes) */
	bool valid;                /* its STag may still be used by the peer */
	bool stolen;               /* invalidated by another XID's RDMA_DONE */
	bool mr_exposed;           /* no windows: @mr's own STag is exposed,
				      and deregistering it is the fence */
	struct rrep_exp *next;     /* conn's rrep_dead list */
	struct rrep_exp *fnext;    /* conn's rrep_fencing list */
};

/* Requester: one Reply being pulled. */
struct rrep_pull {
	struct tp_call *k;         /* NULL once the call is gone */
	uint32_t xid;
	bool inv;                  /* name @stag in Send With Invalidate */
	uint32_t stag;
	uint8_t *buf;
	uint32_t len;
	struct rpcrdma_mr *mr;
	struct rr_xprt_seg segs[RR_XPRT_MAX_READS];
	uint32_t nsegs, next, done;
	struct rrep_pull *qnext;   /* conn's pullq */
	struct rrep_pull *anext;   /* conn's pulls */
};

/* Requester: an RDMA_DONE waiting for a send slot. */
struct rrep_done_q {
	uint32_t xid;
	bool inv;
	uint32_t stag;
	struct rrep_done_q *next;
};

static void rrep_exp_drop_stag(struct tp_ep *ep, struct rrep_exp *x)
{
	if (x->mw) {
		(void)rpcrdma_mw_free(x->mw);   /* a freed window is invalid */
		x->mw = NULL;
	} else if (x->mr_exposed && x->mr) {
		(void)rpcrdma_dereg_mr(x->mr);  /* so is a deregistered MR */
		x->mr = NULL;
	}
	if (x->valid) {
		x->valid = false;
		ep->rrep_live--;
	}
}

/* Read-chunk Reply bytes held for @cn's peer change by @delta (exposed,
 * parked or fenced and not yet freed): the reply_mem budgets. */
static void rrep_account(struct tp_conn *cn, int64_t delta)
{
	struct rr_tp_server *s = (struct rr_tp_server *)cn->ep;

	cn->rrep_bytes += (uint64_t)delta;
	s->rrep_bytes += (uint64_t)delta;
}

/* Deregistration first: once it returns the provider no longer reads the
 * buffer, whatever the peer still asks for (the lifetime rule,
 * docs/security.md), so freeing it is safe. */
static void rrep_exp_free(struct tp_ep *ep, struct rrep_exp *x)
{
	rrep_exp_drop_stag(ep, x);
	if (x->mr)
		(void)rpcrdma_dereg_mr(x->mr);
	rrep_account(x->cn, -(int64_t)x->len);
	rr_free(ep->env, x->buf);
	rr_free(ep->env, x);
}

/* After the QP is destroyed: nothing can touch these buffers any more. */
static void rrep_conn_free(struct tp_conn *cn)
{
	struct tp_ep *ep = cn->ep;
	struct rr_rrep_entry *e;

	if (ep->is_server) {
		while ((e = rr_rrep_pop(&cn->rrep)) != NULL) {
			rrep_exp_free(ep, e->user);
			rr_rrep_entry_free(&cn->rrep, e);
		}
		while (cn->rrep_dead) {
			struct rrep_exp *x = cn->rrep_dead;

			cn->rrep_dead = x->next;
			rrep_exp_free(ep, x);
		}
		while (cn->rrep_fencing) {
			struct rrep_exp *x = cn->rrep_fencing;

			cn->rrep_fencing = x->fnext;
			rrep_exp_free(ep, x);
		}
		return;
	}
	while (cn->pulls) {
		struct rrep_pull *p = cn->pulls;

		cn->pulls = p->anext;
		if (p->k)
			p->k->pull = NULL;
		if (p->mr)
			(void)rpcrdma_dereg_mr(p->mr);
		rr_free(ep->env, p->buf);
		rr_free(ep->env, p);
	}
	cn->pullq = NULL;
}

/* ---- requester ---- */

static void cl_rrep_detach(struct tp_call *k)
{
	if (k->pull) {
		k->pull->k = NULL;
		k->pull = NULL;
	}
}

/* Sends (or queues) the RDMA_DONE owed for @xid: Send With Invalidate naming
 * the responder's STag when both peers set R (RFC 8797 4.1, draft 4.1.4). It
 * needs no call credit (docs/protocol.md "RDMA_DONE accounting"). */
static void cl_rrep_send_done(struct rr_tp_client *c, struct tp_conn *cn, uint32_t xid,
			      bool inv, uint32_t stag)
{
	uint32_t slot;
	int n;

	if (!cn || cn->dead || c->conn != cn)
		return;   /* the responder fences on disconnect */
	if (slot_get(cn, &slot)) {
		struct rrep_done_q *q = rr_zalloc(c->ep.env, sizeof(*q)), **pp;

		if (!q)
			return;   /* the responder's timeout fences it */
		q->xid = xid;
		q->inv = inv;
		q->stag = stag;
		for (pp = &c->doneq; *pp; pp = &(*pp)->next)
			;
		*pp = q;
		return;
	}
	if (rr_cred_req_done_sent(&c->cred)) {
		slot_put(cn, slot);   /* not owed: never overrun the responder */
		return;
	}
	n = rr_rrep_encode_done(xid, rr_cred_req_request(&c->cred), slot_buf(cn, slot), cn->ssize);
	inv = inv && cn->neg.send_inv;
	if (n < 0 || post_slot_send(cn, slot, (uint32_t)n, WRID(WR_SEND, slot), inv, stag, NULL)) {
		slot_put(cn, slot);
		return;
	}
	c->ep.stats.rrep_done_sent++;
	c->ep.stats.sends++;
}

static void cl_rrep_flush(struct rr_tp_client *c, struct tp_conn *cn)
{
	while (c->doneq && cn->nsfree && c->conn == cn && !cn->dead) {
		struct rrep_done_q *q = c->doneq;

		c->doneq = q->next;
		cl_rrep_send_done(c, cn, q->xid, q->inv, q->stag);
		rr_free(c->ep.env, q);
	}
}

static void cl_rrep_pump_reads(struct rr_tp_client *c, struct tp_conn *cn)
{
	uint32_t ord = cn->ord ? cn->ord : 1;

	while (cn->pullq && cn->reads_inflight < ord && !cn->dead) {
		struct rrep_pull *p = cn->pullq;
		const struct rr_xprt_seg *g = &p->segs[p->next];
		uint64_t off = 0;
		struct rpcrdma_sge sge;
		struct rpcrdma_send_wr wr;

		for (uint32_t i = 0; i < p->next; i++)
			off += p->segs[i].length;
		sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)(p->buf + off), g->length,
					   rpcrdma_mr_lkey(p->mr)};
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID(WR_RREAD, p);
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = RPCRDMA_WR_RDMA_READ;
		wr.flags = RPCRDMA_SEND_SIGNALED;
		wr.u.rdma.stag = g->handle;
		wr.u.rdma.remote_offset = g->offset;
		if (rpcrdma_post_send(cn->qp, &wr, NULL)) {
			cn->dead = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
			return;
		}
		cn->reads_inflight++;
		if (++p->next == p->nsegs)
			cn->pullq = p->qnext;
	}
	(void)c;
}

static void cl_rrep_pull_free(struct rr_tp_client *c, struct tp_conn *cn, struct rrep_pull *p)
{
	struct rrep_pull **pp;

	for (pp = &cn->pulls; *pp; pp = &(*pp)->anext)
		if (*pp == p) {
			*pp = p->anext;
			break;
		}
	if (p->k)
		p->k->pull = NULL;
	if (p->mr)
		(void)rpcrdma_dereg_mr(p->mr);
	rr_free(c->ep.env, p->buf);
	rr_free(c->ep.env, p);
}

/* An RDMA_NOMSG Reply with a responder-provided Read chunk (draft 4.1.2). */
static void cl_rrep_on_pull(struct rr_tp_client *c, struct tp_conn *cn,
			    const struct rr_xprt_reply *res)
{
	struct tp_call *k = res->call ? res->call->user : NULL;
	struct rrep_pull *p;

	rr_cred_req_on_read_reply(&c->cred);
	if (k) {
		struct rr_tp_rpc *rpc = k->rpc;

		if (k->has_credit) {
			(void)rr_cred_req_on_reply(&c->cred, res->credit);
			k->has_credit = false;
		} else {
			(void)rr_cred_req_grant(&c->cred, res->credit);
		}
		for (unsigned i = 0; i < res->nsinks; i++) {
			rpc->placed[i] = res->sink_len[i];
			rpc->is_placed[i] = res->sink_placed[i];
		}
	}
	if (!k || res->pull_nsegs == 0) {
		/* Unknown XID (cancelled RPC) or nothing we can take: no Read,
		 * but the RDMA_DONE is owed all the same (draft 4.1.3). */
		if (k) {
			cl_set_result(k, res->err ? res->err : -EBADMSG);
			cl_invalidate(c, k);
		}
		cl_rrep_send_done(c, cn, res->xid, res->pull_inv, res->pull_stag);
		return;
	}
	p = rr_zalloc(c->ep.env, sizeof(*p));
	if (p)
		p->buf = rr_alloc(c->ep.env, res->pull_len);
	if (!p || !p->buf ||
	    rpcrdma_reg_mr_simple(cn->pd, p->buf, res->pull_len, RPCRDMA_ACCESS_LOCAL_WRITE,
				  &p->mr)) {
		if (p) {
			rr_free(c->ep.env, p->buf);
			rr_free(c->ep.env, p);
		}
		cl_set_result(k, -ENOMEM);
		cl_invalidate(c, k);
		cl_rrep_send_done(c, cn, res->xid, res->pull_inv, res->pull_stag);
		return;
	}
	p->k = k;
	k->pull = p;
	p->xid = res->xid;
	p->inv = res->pull_inv;
	p->stag = res->pull_stag;
	p->len = res->pull_len;
	p->nsegs = res->pull_nsegs;
	memcpy(p->segs, res->pull_segs, sizeof(p->segs[0]) * p->nsegs);
	p->anext = cn->pulls;
	cn->pulls = p;
	{
		struct rrep_pull **pp = &cn->pullq;

		while (*pp)
			pp = &(*pp)->qnext;
		*pp = p;
	}
	cl_rrep_pump_reads(c, cn);
}

static void cl_rrep_read_done(struct rr_tp_client *c, struct tp_conn *cn, struct rrep_pull *p)
{
	struct tp_call *k;

	if (cn->reads_inflight)
		cn->reads_inflight--;
	if (++p->done < p->nsegs) {
		cl_rrep_pump_reads(c, cn);
		return;
	}
	k = p->k;
	(void)rpcrdma_dereg_mr(p->mr);
	p->mr = NULL;
	if (k) {
		struct rr_xprt_reply res;

		memset(&res, 0, sizeof(res));
		rr_xprt_req_pulled(&c->req, k->rq, p->buf, p->len, &res);
		if (res.kind == RR_XPRT_R_REPLY) {
			k->rpc->reply = p->buf;   /* handed over: freed by release_reply */
			k->rpc->reply_len = p->len;
			k->rpc->via_read = true;
			p->buf = NULL;
			cl_set_result(k, 0);
		} else {
			cl_set_result(k, -EBADMSG);
		}
		k->pull = NULL;
		p->k = NULL;
		cl_invalidate(c, k);
	}
	/* Pull completion notification after the Reads (draft 4.1.2). */
	cl_rrep_send_done(c, cn, p->xid, p->inv, p->stag);
	cl_rrep_pull_free(c, cn, p);
	cl_rrep_pump_reads(c, cn);
}

/* ---- responder ---- */

/* The STag of @x is no longer valid for the peer: free its resources now
 * when that is safe (@now), else after the QP is gone. */
static void sv_rrep_retire(struct tp_conn *cn, struct rrep_exp *x, bool now)
{
	if (now) {
		rrep_exp_free(cn->ep, x);
		return;
	}
	rrep_exp_drop_stag(cn->ep, x);
	x->next = cn->rrep_dead;
	cn->rrep_dead = x;
}

/* Fences @x: Local Invalidate (ordered after any Read Response the QP is
 * still sending from it), resources freed on its completion. Without
 * windows the exposed MR is deregistered at once; its buffer is freed now
 * when the peer's Reads are over (@reads_over: its RDMA_DONE came), else
 * with the QP. */
static void sv_rrep_fence(struct rr_tp_server *s, struct tp_conn *cn, struct rrep_exp *x,
			  bool reads_over)
{
	struct rpcrdma_send_wr wr;

	if (x->valid && x->mr_exposed && !cn->dead) {
		s->ep.stats.local_inv++;
		sv_rrep_retire(cn, x, reads_over && !x->stolen);
		return;
	}
	if (!x->valid || !x->mw || cn->dead) {
		/* Already invalid: by this XID's own RDMA_DONE (its Reads are
		 * over, free now), or by a forged one (Reads may still be in
		 * flight: keep the memory until the QP is gone; a peer that
		 * keeps forging loses its connection, see sv_rrep_on_done). */
		sv_rrep_retire(cn, x, !cn->dead && !x->valid && !x->stolen);
		return;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID(WR_RINV, x);
	wr.opcode = RPCRDMA_WR_LOCAL_INV;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	wr.u.local_inv.stag = rpcrdma_mw_rkey(x->mw);
	if (rpcrdma_post_send(cn->qp, &wr, NULL)) {
		sv_rrep_retire(cn, x, false);
		return;
	}
	/* referenced by the work request alone until its completion: kept on
	 * a list too, freed with the QP if that completion is never polled
	 * (a destroy, a connection lost meanwhile) */
	x->fnext = cn->rrep_fencing;
	cn->rrep_fencing = x;
	s->ep.stats.local_inv++;
}

static void sv_rrep_inv_done(struct rr_tp_server *s, struct tp_conn *cn,
			     const struct rpcrdma_wc *wc)
{
	struct rrep_exp *x = WRPTR(wc->wr_id);
	struct rrep_exp **pp = &cn->rrep_fencing;

	while (*pp && *pp != x)   /* at most rrep_max long */
		pp = &(*pp)->fnext;
	if (*pp)
		*pp = x->fnext;
	sv_rrep_retire(cn, x, wc->status == RPCRDMA_WC_SUCCESS);
	pthread_cond_broadcast(&s->ep.cond);
}

static void sv_rrep_on_done(struct rr_tp_server *s, struct tp_conn *cn,
			    const struct rpcrdma_wc *wc, uint32_t idx, uint32_t xid)
{
	struct rr_rrep_done d;

	/* Releases the Receive reserved for it, whatever it names; one not
	 * owed is counted (-EPROTO) and dropped. */
	(void)rr_cred_rsp_on_done(&cn->cred);
	if (post_recv(cn, idx) == 0)
		rr_cred_rsp_posted(&cn->cred, 1);
	s->ep.stats.recvs++;
	rr_rrep_on_done(&cn->rrep, xid, (wc->flags & RPCRDMA_WC_WITH_INV) != 0,
			wc->invalidated_stag, &d);
	if (d.stolen) {
		/* Another XID's STag was invalidated by the peer: that Reply
		 * can no longer be pulled; it waits for its own RDMA_DONE (or
		 * the timeout) only to release its memory. */
		struct rrep_exp *x = d.stolen->user;

		x->stolen = true;
		if (++cn->rrep_forged > s->ep.conf.rrep_max && !cn->dead) {
			/* Memory of forged Replies is held until the QP is
			 * destroyed: bound it by ending this peer's connection. */
			sv_conn_lost(s, cn);
		}
		if (x->valid) {
			x->valid = false;
			s->ep.stats.remote_inv++;
			s->ep.rrep_live--;
		}
	}
	if (d.release) {
		struct rrep_exp *x = d.release->user;

		if (!d.release->stag_valid && x->valid) {
			/* Remotely invalidated by this RDMA_DONE. */
			x->valid = false;
			s->ep.stats.remote_inv++;
			s->ep.rrep_live--;
		}
		rr_rrep_entry_free(&cn->rrep, d.release);
		sv_rrep_fence(s, cn, x, true);
	}
	if (d.unknown || d.forged)
		s->ep.stats.dropped++;
	sv_park_resume(s, cn);                 /* a reservation may be free */
	pthread_cond_broadcast(&s->ep.cond);
}

/* A peer that does not read its socket holds every Reply we sent it (and
 * their memory) and every send slot: when Sends have made no progress for
 * send_timeout_ms, its connection ends (docs/security.md "Limits"). */
static void sv_tx_stalled(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (cn->dead || cn->nsfree == cn->nsend || !s->ep.conf.send_timeout_ms ||
	    now_ns(&s->ep) - cn->tx_progress_ns < (uint64_t)s->ep.conf.send_timeout_ms * 1000000u)
		return;
	s->ep.stats.send_stalls++;
	sv_conn_lost(s, cn);
}

static void sv_rrep_expire(struct rr_tp_server *s, struct tp_conn *cn)
{
	struct rr_rrep_entry *e;

	sv_tx_stalled(s, cn);
	if (cn->parkq && !cn->dead) {
		sv_park_resume(s, cn);   /* parked too long: ERR_CHUNK */
		pthread_cond_broadcast(&s->ep.cond);
	}
	if (cn->dead || !cn->rrep.count)
		return;
	while ((e = rr_rrep_expire(&cn->rrep, rr_now_ns(cn->rrep.env))) != NULL) {
		struct rrep_exp *x = e->user;

		rr_rrep_entry_free(&cn->rrep, e);
		sv_rrep_fence(s, cn, x, false);
	}
}

/* Disconnect or device removal: every exposed Reply of @cn is fenced now
 * (windows freed); buffers go when the QP is destroyed. */
static void sv_rrep_fence_all(struct rr_tp_server *s, struct tp_conn *cn)
{
	struct rr_rrep_entry *e;

	while ((e = rr_rrep_pop(&cn->rrep)) != NULL) {
		struct rrep_exp *x = e->user;

		rr_rrep_entry_free(&cn->rrep, e);
		sv_rrep_retire(cn, x, false);
	}
	pthread_cond_broadcast(&s->ep.cond);
}

/* Turns the Reply in @slot into ERR_CHUNK (nothing else fits). */
static void sv_rrep_to_err_chunk(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
				 struct rr_xprt_reply_plan *plan, uint32_t slot, uint32_t *grant)
{
	int n;

	rr_free(s->ep.env, plan->rr_buf);
	plan->rr_buf = NULL;
	plan->read_chunk = false;
	plan->nwrites = 0;
	plan->write_bytes = 0;
	plan->send_inv = false;
	if (r->credited)
		*grant = cn->cred.last_grant ? cn->cred.last_grant : 1;
	else if (sv_credit(cn, r, false, grant))
		*grant = 1;
	n = rr_xprt_encode_error(r->rc->xid, RR_XPRT_VERSION, *grant, RR_XPRT_ERR_CHUNK,
				 slot_buf(cn, slot), cn->ssize);
	plan->send_len = n > 0 ? (uint32_t)n : 0;
	plan->is_error = true;
	plan->proc = RR_XPRT_ERROR;
	s->ep.stats.err_chunk_sent++;
	if (s->ep.stats.rrep_exposed)
		s->ep.stats.rrep_exposed--;
}

/* Exposes plan->rr_buf as the Position-zero Read chunk (draft 4.1.1) once a
 * reservation is free (the caller parks the Reply otherwise: sv_park):
 * registers it read-only and invalidatable (a memory window bound on this
 * QP, so only this peer can reach or invalidate it), patches the header,
 * records it by XID, reserves a Receive for the RDMA_DONE. When that cannot
 * be done the Reply becomes ERR_CHUNK. Returns 0 (Send what is in @slot) or
 * -ENOTCONN. Never waits. Called with the endpoint lock. */
static int sv_rrep_expose(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
			  struct rr_xprt_reply_plan *plan, uint32_t slot, uint32_t *grant)
{
	struct rrep_exp *x;
	struct rr_rrep_entry *e;
	uint32_t stag;
	uint64_t to;
	unsigned acc;

	if (cn->dead) {
		rr_free(s->ep.env, plan->rr_buf);
		plan->rr_buf = NULL;
		return -ENOTCONN;
	}
	if (cn->cred.done_owed >= cn->cred.done_max) {
		sv_rrep_to_err_chunk(s, cn, r, plan, slot, grant);
		return 0;
	}
	x = rr_zalloc(s->ep.env, sizeof(*x));
	if (!x) {
		sv_rrep_to_err_chunk(s, cn, r, plan, slot, grant);
		return 0;
	}
	x->cn = cn;
	x->buf = plan->rr_buf;
	x->len = plan->rr_len;
	acc = RPCRDMA_ACCESS_LOCAL_WRITE |
	      (cn->use_mw ? RPCRDMA_ACCESS_MW_BIND : RPCRDMA_ACCESS_REMOTE_READ);
	if (rpcrdma_reg_mr_simple(cn->pd, x->buf, plan->rr_len ? plan->rr_len : 4, acc, &x->mr))
		goto fail;
	if (cn->use_mw) {
		struct rpcrdma_send_wr bw;

		if (rpcrdma_mw_alloc(cn->pd, &x->mw))
			goto fail;
		memset(&bw, 0, sizeof(bw));
		bw.wr_id = WRID(WR_BIND, 0);
		bw.opcode = RPCRDMA_WR_BIND_MW;
		bw.u.bind.mw = x->mw;
		bw.u.bind.mr = x->mr;
		bw.u.bind.addr = (uint64_t)(uintptr_t)x->buf;
		bw.u.bind.length = plan->rr_len;
		bw.u.bind.access = RPCRDMA_ACCESS_REMOTE_READ;   /* read-only */
		if (rpcrdma_post_send(cn->qp, &bw, NULL))
			goto fail;
		stag = rpcrdma_mw_rkey(x->mw);
		to = rpcrdma_mw_remote_offset(x->mw);
	} else {
		stag = rpcrdma_mr_rkey(x->mr);
		to = rpcrdma_mr_remote_offset(x->mr);
		x->mr_exposed = true;
	}
	e = rr_rrep_add(&cn->rrep, r->rc->xid, stag, x);
	if (!e)
		goto fail;
	if (sv_credit(cn, r, true, grant)) {
		rr_rrep_remove(&cn->rrep, e);
		goto fail;
	}
	x->valid = true;
	s->ep.rrep_live++;
	rrep_account(cn, (int64_t)x->len);
	plan->rr_buf = NULL;   /* owned by x now */
	rr_rrep_rsp_patch(slot_buf(cn, slot), plan, stag, to);
	return 0;
fail:
	if (x->mw)
		(void)rpcrdma_mw_free(x->mw);
	if (x->mr)
		(void)rpcrdma_dereg_mr(x->mr);
	rr_free(s->ep.env, x);   /* plan->rr_buf is still ours: freed below */
	sv_rrep_to_err_chunk(s, cn, r, plan, slot, grant);
	return 0;
}


/* ---- client API ---- */

int rr_tp_client_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_complete_fn complete, void *ctx,
			struct rr_tp_client **out)
{
	const struct rpcrdma_env *env = rr_env(conf->env);
	struct rr_tp_client *c;
	struct rr_xprt_params p;
	struct timespec ts;
	int rc;

	*out = NULL;
	if (addrlen > sizeof(c->addr) || !complete)
		return -EINVAL;
	c = rr_zalloc(env, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = ep_init(&c->ep, conf, false, addr);
	if (rc) {
		ep_fini(&c->ep);
		rr_free(env, c);
		return rc;
	}
	memcpy(&c->addr, addr, addrlen);
	c->addrlen = addrlen;
	c->complete = complete;
	c->cctx = ctx;
	rr_xprt_params_default(&p);
	rr_xprt_req_init(&c->req, c->ep.env, &p, &c->ep.stats);
	rr_cred_req_init(&c->cred, c->ep.conf.credits);
	pthread_mutex_lock(&c->ep.lock);
	c->connect_status = 1;
	rc = cl_connect(c);
	pthread_mutex_unlock(&c->ep.lock);
	if (rc == 0)
		rc = ep_start(&c->ep);
	if (rc) {
		pthread_mutex_lock(&c->ep.lock);
		if (c->conn)
			conn_free(c->conn);
		pthread_mutex_unlock(&c->ep.lock);
		ep_fini(&c->ep);
		rr_xprt_req_fini(&c->req);
		rr_free(env, c);
		return rc;
	}
	abs_deadline(&ts, c->ep.conf.connect_timeout_ms + 1000);
	pthread_mutex_lock(&c->ep.lock);
	while (c->connect_status == 1) {
		if (pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts)) {
			c->connect_status = -ETIMEDOUT;
			break;
		}
	}
	rc = c->connect_status;
	pthread_mutex_unlock(&c->ep.lock);
	if (rc) {
		c->destroying = true;
		ep_stop(&c->ep);
		if (c->conn)
			conn_free(c->conn);
		ep_fini(&c->ep);
		rr_xprt_req_fini(&c->req);
		rr_free(env, c);
		return rc;
	}
	*out = c;
	return 0;
}

int rr_tp_client_submit(struct rr_tp_client *c, struct rr_tp_rpc *rpc)
{
	struct tp_call *k;
	int rc;

	if (!rpc || rpc->nsinks > RR_XPRT_MAX_ITEMS || (rpc->nparts && !rpc->parts))
		return -EINVAL;
	k = rr_zalloc(c->ep.env, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->rpc = rpc;
	rpc->status = 0;
	rpc->reply = NULL;
	rpc->reply_len = 0;
	rpc->lent_conn = NULL;
	rpc->via_read = false;
	for (unsigned i = 0; i < RR_XPRT_MAX_ITEMS; i++) {
		rpc->placed[i] = 0;
		rpc->is_placed[i] = false;
	}
	pthread_mutex_lock(&c->ep.lock);
	if (c->destroying) {
		pthread_mutex_unlock(&c->ep.lock);
		rr_free(c->ep.env, k);
		return -ESHUTDOWN;
	}
	/* Validate the description once, now, so that errors are synchronous. */
	{
		struct rr_xprt_rqst_desc d = {rpc->xid, rpc->parts, rpc->nparts, rpc->sinks,
					      rpc->nsinks, rpc->max_reply, rpc->min_reply,
					      rpc->max_unknown};

		rc = rr_xprt_rqst_prepare(&c->req, &d, &k->rq);
		if (rc) {
			pthread_mutex_unlock(&c->ep.lock);
			rr_free(c->ep.env, k);
			return rc;
		}
		k->rq->user = k;
		/* Buffers are made when it is sent (re-planned then). */
		rr_xprt_rqst_drop_bufs(&c->req, k->rq);
	}
	rpc->priv = k;
	k->state = C_QUEUED;
	cl_list_add(c, k);
	if (!c->conn && !c->reconnect_at && c->connect_status != 1)
		cl_schedule_reconnect(c, 0);   /* lost while idle: connect now */
	rc = rr_cred_req_submit(&c->cred, &k->node);
	if (rc == 1) {
		/* A credit is free: give it back and let the pump take it
		 * (it also handles "not connected"). */
		(void)rr_cred_req_complete(&c->cred);
		(void)rr_cred_req_requeue(&c->cred, &k->node);
	} else {
		c->ep.stats.credits_exhausted++;
	}
	cl_pump(c);
	{
		bool up = c->conn && c->conn->established && !c->conn->dead;
		bool wake = true;

		if (rpc->caller_waits && !c->waiter && up) {
			/* This thread will receive the Reply itself: no hop
			 * through the progress thread, which is not woken. */
			c->waiter = true;
			c->wait_for = rpc;
			wake = false;
		} else if (on_progress_thread(&c->ep)) {
			wake = false;   /* it recomputes its wait set next */
		}
		pthread_mutex_unlock(&c->ep.lock);
		if (wake)
			ep_wake(&c->ep);
	}
	return 0;
}

void rr_tp_client_abort(struct rr_tp_client *c, struct rr_tp_rpc *rpc, int status)
{
	struct tp_call *k;

	pthread_mutex_lock(&c->ep.lock);
	k = rpc->priv;
	if (!k || k->state == C_DONE || k->state == C_INVAL) {
		pthread_mutex_unlock(&c->ep.lock);
		return;
	}
	cl_set_result(k, status);
	if (k->state == C_QUEUED) {
		(void)rr_cred_req_cancel(&c->cred, &k->node);
		cl_finish(c, k);
	} else {
		c->stray = true;
		rr_xprt_rqst_forget(&c->req, k->rq);
		if (k->has_credit) {
			(void)rr_cred_req_complete(&c->cred);
			k->has_credit = false;
		}
		cl_invalidate(c, k);
		cl_pump(c);
	}
	pthread_mutex_unlock(&c->ep.lock);
	ep_wake(&c->ep);
}

/* One wait of the thread that holds the receiving role (c->waiter) for at
 * most @left_ns (and 20 ms): sleeps on the connection's socket and receives
 * on this thread (rpcrdma_cq_wait), then handles what came. Bounded so that
 * state changes made by the progress thread (connection loss) are seen; the
 * connection is not freed meanwhile (in_wait). Called and returns with the
 * lock held; returns rpcrdma_cq_wait's result. */
static int cl_wait_once(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns)
{
	struct rpcrdma_wc wc[32];
	int n;

	cn->in_wait = true;
	pthread_mutex_unlock(&c->ep.lock);
	n = rpcrdma_cq_wait(cn->cq, (int)RR_ARRAY_SIZE(wc), wc,
			    (int)RR_MIN(left_ns / 1000000u + 1, 20u));
	pthread_mutex_lock(&c->ep.lock);
	cn->in_wait = false;
	for (int i = 0; i < n; i++)
		cl_on_wc(c, cn, &wc[i]);
	if (c->conn == cn && cn->dead && cn->established)
		cl_conn_lost(c, cn);
	deliver_upcalls(&c->ep);
	return n;
}

void rr_tp_client_wait(struct rr_tp_client *c, struct rr_tp_rpc *rpc, uint32_t timeout_ms)
{
	uint64_t t0 = rr_now_ns(c->ep.env), end = t0 + (uint64_t)timeout_ms * 1000000u;
	struct tp_conn *cn0 = NULL;
	bool wake;

	pthread_mutex_lock(&c->ep.lock);
	if (c->waiter && c->wait_for != rpc) {
		pthread_mutex_unlock(&c->ep.lock);
		return;
	}
	c->waiter = true;
	c->wait_for = NULL;
	cn0 = c->conn;
	while (rpc->priv && !c->destroying) {
		struct tp_conn *cn = c->conn;
		uint64_t t;
		int n;

		if (!cn || !cn->established || cn->dead)
			break;
		/* one clock read per call when the Reply comes in the first
		 * wait (~100 ns each on a VM) */
		t = t0 ? t0 : now_ns(&c->ep);
		t0 = 0;
		if (t >= end)
			break;
		n = cl_wait_once(c, cn, end - t);
		if (n < 0)
			break;
	}
	c->waiter = false;
	wake = cl_needs_progress(c, cn0);
	pthread_mutex_unlock(&c->ep.lock);
	if (wake)
		ep_wake(&c->ep);
}

void rr_tp_client_release_reply(struct rr_tp_client *c, struct rr_tp_rpc *rpc)
{
	if (rpc->lent_conn) {
		/* The Reply was the Receive buffer itself: repost it (the
		 * connection is not freed while lent: grave_sweep). */
		struct tp_conn *cn = rpc->lent_conn;

		pthread_mutex_lock(&c->ep.lock);
		cn->lent--;
		if (!cn->dead && c->conn == cn)
			(void)post_recv(cn, rpc->lent_idx);
		pthread_mutex_unlock(&c->ep.lock);
		rpc->lent_conn = NULL;
	} else {
		rr_free(c->ep.env, rpc->reply);
	}
	rpc->reply = NULL;
	rpc->reply_len = 0;
}

void rr_tp_client_destroy(struct rr_tp_client *c)
{
	const struct rpcrdma_env *env;
	struct timespec ts;

	if (!c)
		return;
	env = c->ep.env;
	pthread_mutex_lock(&c->ep.lock);
	c->destroying = true;
	for (struct tp_call *k = c->calls, *nx; k; k = nx) {
		nx = k->next;
		if (k->state == C_QUEUED) {
			cl_set_result(k, -ECANCELED);
			(void)rr_cred_req_cancel(&c->cred, &k->node);
			cl_finish(c, k);
		} else if (k->state == C_SENT) {
			cl_set_result(k, -ECANCELED);
			rr_xprt_rqst_forget(&c->req, k->rq);
			cl_invalidate(c, k);
		}
	}
	/* Wait (bounded) for local invalidations and upcalls. */
	abs_deadline(&ts, 2000);
	while (c->calls || c->done) {
		ep_wake(&c->ep);
		if (pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts))
			break;
	}
	pthread_mutex_unlock(&c->ep.lock);
	ep_stop(&c->ep);
	/* Whatever is left (connection stuck): free windows, then upcall. */
	for (struct tp_call *k = c->calls, *nx; k; k = nx) {
		nx = k->next;
		cl_finish(c, k);
	}
	if (c->conn) {
		if (c->conn->id)
			(void)rpcrdma_disconnect(c->conn->id);
		conn_free(c->conn);
		c->conn = NULL;
	}
	pthread_mutex_lock(&c->ep.lock);
	deliver_upcalls(&c->ep);
	/* Replies must be released before destroy (rdma_tp.h); any still
	 * lent no longer keeps its connection. */
	for (struct tp_conn *cn = c->ep.grave; cn; cn = cn->next)
		cn->lent = 0;
	pthread_mutex_unlock(&c->ep.lock);
	ep_fini(&c->ep);
	rr_xprt_req_fini(&c->req);
	rr_free(env, c);
}

void rr_tp_client_stats(struct rr_tp_client *c, struct rr_xprt_stats *out)
{
	pthread_mutex_lock(&c->ep.lock);
	*out = c->ep.stats;
	pthread_mutex_unlock(&c->ep.lock);
}

uint32_t rr_tp_client_live_stags(struct rr_tp_client *c)
{
	uint32_t n;

	pthread_mutex_lock(&c->ep.lock);
	n = c->live_stags;
	pthread_mutex_unlock(&c->ep.lock);
	return n;
}

int rr_tp_client_cut(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->id && c->conn->established && !c->conn->dead)
		rc = rpcrdma_disconnect(c->conn->id);
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

int rr_tp_client_params(struct rr_tp_client *c, struct rr_xprt_params *out, uint32_t *grant)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->established) {
		*out = c->conn->params;
		if (grant)
			*grant = c->cred.grant;
		rc = 0;
	}
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

/* ---- server API ---- */

/* The listening port, known from creation on (still after rr_tp_server_stop). */
static int listen_port(struct rpcrdma_cm_id *id)
{
	struct sockaddr_storage ss;

	if (rpcrdma_cm_local_addr(id, &ss))
		return -EINVAL;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

int rr_tp_server_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_recv_fn recv, void *ctx,
			struct rr_tp_server **out)
{
	const struct rpcrdma_env *env = rr_env(conf->env);
	struct rr_tp_server *s;
	int rc;

	*out = NULL;
	if (!recv)
		return -EINVAL;
	s = rr_zalloc(env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = ep_init(&s->ep, conf, true, addr);
	if (rc == 0)
		rc = rpcrdma_listen(s->ep.ch, addr, addrlen, RR_LISTEN_BACKLOG, NULL,
				    &s->listen_id);
	if (rc == 0) {
		/* half-open connections: the provider's (rdma_cm leaves them
		 * to the kernel: -EOPNOTSUPP) */
		struct rr_listen_limits lim = {.max_handshakes = conf->max_handshakes};

		rc = rr_cm_listen_limits(s->listen_id, &lim);
		if (rc == -EOPNOTSUPP)
			rc = 0;
	}
	if (rc == 0) {
		s->port = listen_port(s->listen_id);
		rc = s->port < 0 ? s->port : 0;
	}
	s->recv = recv;
	s->rctx = ctx;
	if (rc == 0)
		rc = ep_start(&s->ep);
	if (rc) {
		if (s->listen_id)
			(void)rpcrdma_cm_id_destroy(s->listen_id);
		ep_fini(&s->ep);
		rr_free(env, s);
		return rc;
	}
	*out = s;
	return 0;
}

int rr_tp_server_port(struct rr_tp_server *s)
{
	return s->port;
}

void rr_tp_server_stop(struct rr_tp_server *s)
{
	pthread_mutex_lock(&s->ep.lock);
	if (s->listen_id) {
		/* closes the listening socket and frees the requests not
		 * consumed yet: new connections are refused from now on */
		(void)rr_cm_listen_stats(s->listen_id, &s->lstats_gone);
		(void)rpcrdma_cm_id_destroy(s->listen_id);
		s->listen_id = NULL;
	}
	s->stopping = true;
	pthread_mutex_unlock(&s->ep.lock);
}

/* The registration covering [p, p+len) among @mrs. */
static struct rpcrdma_mr *find_mr(struct rpcrdma_mr **mrs, unsigned n, const uint8_t *p,
				  uint32_t len)
{
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *b = rpcrdma_mr_addr(mrs[i]);

		if (p >= b && p + len <= b + rpcrdma_mr_length(mrs[i]))
			return mrs[i];
	}
	return NULL;
}

/* A Reply plan (large: every possible RDMA Write): the spare one, or a new
 * one. Called with the lock held. */
static struct rr_xprt_reply_plan *sv_plan_get(struct rr_tp_server *s)
{
	struct rr_xprt_reply_plan *plan = s->plan_cache;

	if (plan) {
		s->plan_cache = NULL;
		return plan;
	}
	return rr_alloc(s->ep.env, sizeof(*plan));
}

static void sv_plan_put(struct rr_tp_server *s, struct rr_xprt_reply_plan *plan)
{
	if (!s->plan_cache)
		s->plan_cache = plan;
	else
		rr_free(s->ep.env, plan);
}

/* Hook at the end of each progress iteration: posts the deferred Replies
 * and runs the sent upcalls, until neither is left (a sent upcall may answer
 * another request: its Reply is posted now, not at the next wake-up). */
static void sv_after_upcalls(struct rr_tp_server *s)
{
	for (;;) {
		sv_post_deferred(s);
		if (!s->sent_head)
			break;
		sv_sent_upcalls(s);
	}
}

#define SV_WR_STACK 8u   /* RDMA Writes built on the stack; more: heap */
#define SV_DEFER_WR 5u   /* a deferred Reply: up to 4 RDMA Writes + Send */
#define SV_DEFER_MAX 32u /* deferred Replies per connection before a post */
#define SV_DEFER_NS 200000u  /* nor older than this (slow inline handlers) */

/* The per-slot work request storage of deferred Replies (on first use). */
static bool sv_defer_ready(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (cn->dwr)
		return true;
	cn->dwr = rr_zalloc(s->ep.env, sizeof(*cn->dwr) * cn->nsend * SV_DEFER_WR);
	cn->dsge = rr_zalloc(s->ep.env, sizeof(*cn->dsge) * cn->nsend * SV_DEFER_WR);
	cn->dslot = rr_zalloc(s->ep.env, sizeof(*cn->dslot) * cn->nsend);
	if (cn->dwr && cn->dsge && cn->dslot)
		return true;
	rr_free(s->ep.env, cn->dwr);
	rr_free(s->ep.env, cn->dsge);
	rr_free(s->ep.env, cn->dslot);
	cn->dwr = NULL;
	cn->dsge = NULL;
	cn->dslot = NULL;
	return false;
}

/* Posts the deferred Replies of @cn as one chain (the soft provider sends
 * them in one sendmsg). A post failure ends the connection; the Replies not
 * posted are told -ENOTCONN. Called with the lock held. */
static void sv_post_deferred_conn(struct rr_tp_server *s, struct tp_conn *cn)
{
	struct rpcrdma_send_wr *head = NULL, *tail = NULL, *bad = NULL;
	uint32_t n = cn->ndefer;
	bool unposted = false;
	int rc;

	if (!n)
		return;
	cn->ndefer = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rpcrdma_send_wr *w = &cn->dwr[(size_t)cn->dslot[i] * SV_DEFER_WR];

		if (tail)
			tail->next = w;
		else
			head = w;
		while (w->next)
			w = w->next;
		tail = w;
	}
	rc = cn->dead ? -ENOTCONN : rpcrdma_post_send(cn->qp, head, &bad);
	if (!rc)
		return;
	if (rc == -ENOTCONN || !bad)
		bad = head;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = cn->dslot[i];
		struct rpcrdma_send_wr *w = &cn->dwr[(size_t)slot * SV_DEFER_WR];
		struct tp_sreq *r;

		for (; w && !unposted; w = w->next)
			unposted = w == bad;
		if (!unposted)
			continue;
		r = cn->sowner[slot];
		cn->sowner[slot] = NULL;
		if (r)
			sv_reply_sent(s, r, -ENOTCONN);
		slot_put(cn, slot);
	}
	if (!cn->dead)
		sv_conn_lost(s, cn);
}

/* Hook of the progress thread, after its upcalls: posts the Replies they
 * deferred. Called with the lock held. */
static void sv_post_deferred(struct rr_tp_server *s)
{
	struct tp_conn *cn = s->conns, *nx;

	while (cn) {
		nx = cn->next;
		if (cn->ndefer) {
			cn->refs++;
			sv_post_deferred_conn(s, cn);
			sv_conn_put(s, cn);
		}
		cn = nx;
	}
}

/* A Read-chunk Reply waiting for a reservation (rrep_max Replies of its
 * connection already await their RDMA_DONE): built in its send slot, its
 * plan and parts kept, no thread waiting for it. Sent when an RDMA_DONE
 * frees a reservation (sv_park_resume), answered ERR_CHUNK after
 * rrep_timeout_ms, told -ENOTCONN when the connection goes. Its buffer
 * counts in the reply_mem budgets meanwhile. */
struct tp_park {
	struct tp_sreq *r;
	struct rr_xprt_reply_plan *plan;
	uint32_t slot;
	struct rr_xprt_part *parts;
	unsigned nparts;
	uint64_t deadline;          /* rrep clock, ns */
	struct tp_park *next;
};

static int sv_reply_finish(struct rr_tp_server *s, struct tp_sreq *r,
			   const struct rr_xprt_part *parts, unsigned nparts,
			   struct rr_xprt_reply_plan *plan, uint32_t slot, bool settled,
			   bool *err_chunk, bool may_defer);

/* Whether @len more bytes of Read-chunk Replies may be held for @cn's peer
 * (reply_mem_per_conn, reply_mem_total: docs/security.md "Limits"). */
static bool sv_rrep_room(struct rr_tp_server *s, struct tp_conn *cn, uint32_t len)
{
	return cn->rrep_bytes + len <= s->ep.conf.reply_mem_per_conn &&
	       s->rrep_bytes + len <= s->ep.conf.reply_mem_total;
}

/* Parks @r's Reply (see struct tp_park). Takes ownership of @plan and @slot
 * on success (0); on failure (-ENOMEM) the caller still owns them. */
static int sv_park(struct rr_tp_server *s, struct tp_conn *cn, struct tp_sreq *r,
		   const struct rr_xprt_part *parts, unsigned nparts,
		   struct rr_xprt_reply_plan *plan, uint32_t slot)
{
	struct tp_park *p = rr_zalloc(s->ep.env, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->parts = nparts ? rr_alloc(s->ep.env, sizeof(*parts) * nparts) : NULL;
	if (nparts && !p->parts) {
		rr_free(s->ep.env, p);
		return -ENOMEM;
	}
	if (nparts)
		memcpy(p->parts, parts, sizeof(*parts) * nparts);
	p->r = r;
	p->plan = plan;
	p->slot = slot;
	p->nparts = nparts;
	p->deadline = rr_now_ns(cn->rrep.env) + (uint64_t)s->ep.conf.rrep_timeout_ms * 1000000u;
	if (!cn->parkq)
		cn->park_tail = &cn->parkq;
	*cn->park_tail = p;
	cn->park_tail = &p->next;
	r->send_pending = true;   /* on its way: a Reply is owed to the upper layer */
	rrep_account(cn, (int64_t)plan->rr_len);
	s->ep.stats.rrep_parked++;
	return 0;
}

static struct tp_park *sv_park_pop(struct tp_conn *cn)
{
	struct tp_park *p = cn->parkq;

	if (p) {
		cn->parkq = p->next;
		rrep_account(cn, -(int64_t)p->plan->rr_len);
	}
	return p;
}

/* Sends the parked Reply @p (exposed now, or ERR_CHUNK when @expired or
 * nothing can be exposed) and tells its upper layer as a posted Reply would
 * have been told. */
static void sv_park_send(struct rr_tp_server *s, struct tp_park *p, bool expired)
{
	struct tp_sreq *r = p->r;
	int rc;

	r->send_pending = false;
	if (expired) {
		uint32_t grant;

		/* no reservation came in time: another form, and the Receive
		 * the grant counted on is released with it */
		sv_rrep_to_err_chunk(s, r->conn, r, p->plan, p->slot, &grant);
		rr_put_be32(slot_buf(r->conn, p->slot) + 8, grant);
	}
	rc = sv_reply_finish(s, r, p->parts, p->nparts, p->plan, p->slot, expired, NULL, false);
	if (rc <= 0)
		sv_reply_sent(s, r, rc);   /* 1: its Send completion tells */
	rr_free(s->ep.env, p->parts);
	rr_free(s->ep.env, p);
}

/* A reservation may be free, or parked Replies expired: send what can go. */
static void sv_park_resume(struct rr_tp_server *s, struct tp_conn *cn)
{
	uint64_t now = cn->parkq ? rr_now_ns(cn->rrep.env) : 0;

	while (cn->parkq && !cn->dead) {
		bool expired = now >= cn->parkq->deadline;

		if (!expired && cn->cred.done_owed >= cn->cred.done_max)
			break;
		sv_park_send(s, sv_park_pop(cn), expired);
	}
}

/* The connection is gone: parked Replies are told -ENOTCONN. */
static void sv_park_fail_all(struct rr_tp_server *s, struct tp_conn *cn)
{
	struct tp_park *p;

	while ((p = sv_park_pop(cn)) != NULL) {
		p->r->send_pending = false;
		rr_free(s->ep.env, p->plan->rr_buf);
		slot_put(cn, p->slot);
		sv_plan_put(s, p->plan);
		sv_reply_sent(s, p->r, -ENOTCONN);
		rr_free(s->ep.env, p->parts);
		rr_free(s->ep.env, p);
	}
}

/* Builds and posts the Reply to @r (RDMA Writes chained before the Send).
 * Called with the lock held. Returns 1: posted (or parked), the Send
 * completion will call sv_reply_sent (the registrations of @parts are in
 * r->mrs until then); 0: posted from our send slot only (nothing of @parts
 * is referenced any more); negative errno: not posted. */
static int sv_reply_post(struct rr_tp_server *s, struct tp_sreq *r,
			 const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk,
			 bool may_defer)
{
	struct tp_conn *cn = r->conn;
	struct rr_xprt_reply_plan *plan;
	uint32_t slot, grant;
	int rc;

	if (err_chunk)
		*err_chunk = false;
	/* Deferred Replies wait for the end of the batch, but not for long:
	 * a batch of many, or one behind a slow handler, is posted now. */
	if (cn->ndefer && (cn->ndefer >= SV_DEFER_MAX ||
			   now_ns(&s->ep) - cn->defer_t0 > SV_DEFER_NS))
		sv_post_deferred_conn(s, cn);
	if (cn->dead)
		return -ENOTCONN;
	if (r->send_pending || r->nmr)
		return -EBUSY;   /* a Reply is already on its way */
	plan = sv_plan_get(s);
	if (!plan)
		return -ENOMEM;
	if (slot_get(cn, &slot)) {
		sv_plan_put(s, plan);
		return -ENOBUFS;
	}
	/* The grant is settled after the Reply is built (a Read-chunk Reply
	 * reserves a Receive for its RDMA_DONE) and patched into rdma_credit. */
	rc = rr_xprt_rsp_reply(&cn->rsp, r->rc, parts, nparts,
			       cn->cred.last_grant ? cn->cred.last_grant : 1, slot_buf(cn, slot),
			       cn->ssize, plan);
	if (rc) {
		slot_put(cn, slot);
		(void)sv_credit(cn, r, false, &grant);
		sv_plan_put(s, plan);
		return rc;
	}
	if (plan->read_chunk && !sv_rrep_room(s, cn, plan->rr_len)) {
		/* over the memory budget: another form at once */
		s->ep.stats.rrep_over_budget++;
		sv_rrep_to_err_chunk(s, cn, r, plan, slot, &grant);
		rr_put_be32(slot_buf(cn, slot) + 8, grant);
		return sv_reply_finish(s, r, parts, nparts, plan, slot, true, err_chunk,
				       may_defer);
	}
	if (plan->read_chunk && cn->cred.done_owed >= cn->cred.done_max &&
	    sv_park(s, cn, r, parts, nparts, plan, slot) == 0)
		return 1;
	return sv_reply_finish(s, r, parts, nparts, plan, slot, false, err_chunk, may_defer);
}

/* The rest of sv_reply_post for a Reply built in @slot by @plan (taken over:
 * freed or kept here): its Read chunk exposed, its grant settled (unless
 * @settled: ERR_CHUNK with its grant already in the slot), its Writes'
 * memory registered, the Writes and the Send posted. Same returns. */
static int sv_reply_finish(struct rr_tp_server *s, struct tp_sreq *r,
			   const struct rr_xprt_part *parts, unsigned nparts,
			   struct rr_xprt_reply_plan *plan, uint32_t slot, bool settled,
			   bool *err_chunk, bool may_defer)
{
	struct tp_conn *cn = r->conn;
	struct rpcrdma_send_wr wstack[SV_WR_STACK], *wrs = wstack;
	struct rpcrdma_sge sstack[SV_WR_STACK], *sges = sstack;
	uint32_t grant;
	bool exposed = false;   /* a Read chunk is recorded and reserved */
	int rc;

	rc = 0;
	if (settled) {
		grant = rr_get_be32(slot_buf(cn, slot) + 8);
	} else if (plan->read_chunk) {
		rc = sv_rrep_expose(s, cn, r, plan, slot, &grant);
		if (rc) {
			slot_put(cn, slot);
			goto out;
		}
		exposed = plan->read_chunk;
	} else if (sv_credit(cn, r, false, &grant)) {
		grant = 1;
	}
	rr_put_be32(slot_buf(cn, slot) + 8, grant);
	if (err_chunk)
		*err_chunk = plan->is_error;
	/* Register the Reply's memory that RDMA Writes read from: only the
	 * parts some Write reads (an XDR pad comes from our zero bytes). */
	for (unsigned i = 0; i < nparts && plan->nwrites; i++) {
		const uint8_t *b = parts[i].base;
		bool used = false;

		if (!parts[i].len || r->nmr == RR_ARRAY_SIZE(r->mrs))
			continue;
		for (uint32_t j = 0; j < plan->nwrites && !used; j++)
			used = plan->writes[j].src >= b && plan->writes[j].src < b + parts[i].len;
		if (used && rpcrdma_reg_mr_simple(cn->pd, (void *)(uintptr_t)b, parts[i].len,
						  RPCRDMA_ACCESS_LOCAL_WRITE,
						  &r->mrs[r->nmr]) == 0)
			r->nmr++;
	}
	/* On the progress thread, a small Reply is posted after the batch of
	 * upcalls, chained with the others (sv_post_deferred). */
	may_defer = may_defer && plan->nwrites < SV_DEFER_WR && sv_defer_ready(s, cn);
	if (may_defer) {
		wrs = &cn->dwr[(size_t)slot * SV_DEFER_WR];
		sges = &cn->dsge[(size_t)slot * SV_DEFER_WR];
		memset(wrs, 0, sizeof(*wrs) * SV_DEFER_WR);
	} else if (plan->nwrites > SV_WR_STACK) {
		wrs = rr_zalloc(s->ep.env, sizeof(*wrs) * plan->nwrites);
		sges = rr_zalloc(s->ep.env, sizeof(*sges) * plan->nwrites);
		if (!wrs || !sges) {
			rc = -ENOMEM;
			slot_put(cn, slot);
			goto out;
		}
	} else {
		memset(wstack, 0, sizeof(wstack[0]) * plan->nwrites);
	}
	for (uint32_t i = 0; i < plan->nwrites; i++) {
		const struct rr_xprt_write_op *w = &plan->writes[i];
		struct rpcrdma_mr *mr = find_mr(r->mrs, r->nmr, w->src, w->len);
		const uint8_t *src = w->src;
		uint32_t lkey;

		if (mr) {
			lkey = rpcrdma_mr_lkey(mr);
		} else if (w->len < 4 && !memcmp(w->src, "\0\0\0", w->len)) {
			/* XDR pad: from the zero bytes after the send slots */
			lkey = rpcrdma_mr_lkey(cn->smr);
			src = cn->sbuf + (size_t)cn->nsend * cn->ssize;
		} else {
			rc = -EFAULT;
			slot_put(cn, slot);
			goto out;
		}
		sges[i] = (struct rpcrdma_sge){(uint64_t)(uintptr_t)src, w->len, lkey};
		wrs[i].wr_id = WRID(WR_WRITE, 0);
		wrs[i].sg_list = &sges[i];
		wrs[i].num_sge = 1;
		wrs[i].opcode = RPCRDMA_WR_RDMA_WRITE;
		if (cn->signal_writes)
			wrs[i].flags = RPCRDMA_SEND_SIGNALED;
		wrs[i].u.rdma.stag = w->stag;
		wrs[i].u.rdma.remote_offset = w->remote;
		wrs[i].next = i + 1 < plan->nwrites ? &wrs[i + 1] : NULL;
	}
	r->send_slot = slot;
	r->send_done = false;
	r->send_pending = plan->nwrites != 0;
	/* Everything else was copied into our send slot: the caller's memory
	 * is referenced by the Writes only; a Reply without them needs no
	 * completion (a failed Send ends the connection anyway). */
	cn->sowner[slot] = plan->nwrites ? r : NULL;
	if (may_defer) {
		struct rpcrdma_send_wr *w = &wrs[plan->nwrites];

		sges[plan->nwrites] = (struct rpcrdma_sge){(uint64_t)(uintptr_t)slot_buf(cn, slot),
							   plan->send_len, rpcrdma_mr_lkey(cn->smr)};
		w->wr_id = WRID(WR_REPLY, slot);
		w->sg_list = &sges[plan->nwrites];
		w->num_sge = 1;
		w->opcode = plan->send_inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
		w->flags = RPCRDMA_SEND_SIGNALED;
		if (plan->send_inv)
			w->u.send.invalidate_stag = plan->inv_stag;
		w->next = NULL;
		if (plan->nwrites)
			wrs[plan->nwrites - 1].next = w;
		count_form(cn->ep, slot_buf(cn, slot), plan->send_len, true);
		if (!cn->ndefer)
			cn->defer_t0 = now_ns(&s->ep);
		cn->dslot[cn->ndefer++] = slot;
		rc = plan->nwrites ? 1 : 0;
		goto out;
	}
	rc = post_slot_send(cn, slot, plan->send_len, WRID(WR_REPLY, slot), plan->send_inv,
			    plan->inv_stag, plan->nwrites ? wrs : NULL);
	if (rc) {
		cn->sowner[slot] = NULL;
		r->send_pending = false;
		slot_put(cn, slot);
		sv_conn_lost(s, cn);
		rc = -ENOTCONN;
		goto out;
	}
	rc = plan->nwrites ? 1 : 0;
out:
	/* An exposed Reply that was never sent would keep its RDMA_DONE
	 * reservation forever: end the connection (fences it) instead. */
	if (rc < 0 && exposed && !cn->dead)
		sv_conn_lost(s, cn);
	if (rc < 0)
		sv_reply_release(r);
	if (wrs != wstack && !may_defer)
		rr_free(s->ep.env, wrs);
	if (sges != sstack && !may_defer)
		rr_free(s->ep.env, sges);
	sv_plan_put(s, plan);
	return rc;
}

int rr_tp_server_reply(struct rr_tp_server *s, struct rr_tp_sreq *pub,
		       const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk)
{
	struct tp_sreq *r = pub->priv;
	struct tp_conn *cn = r->conn;
	int rc;

	pthread_mutex_lock(&s->ep.lock);
	rc = sv_reply_post(s, r, parts, nparts, err_chunk, false);
	if (rc <= 0) {
		pthread_mutex_unlock(&s->ep.lock);
		return rc;
	}
	if (on_progress_thread(&s->ep)) {
		/* Answered from the receiving thread (inline dispatch): no one
		 * else drains this CQ, so wait for the Writes and Send here. */
		while (!r->send_done && !cn->dead) {
			struct pollfd pfd = {rpcrdma_cq_fd(cn->cq), POLLIN, 0};

			cn->armed = false; /* the loop arms it again (arm_drain) */
			drain_cq(&s->ep, cn);
			if (r->send_done || cn->dead)
				break;
			(void)rpcrdma_cq_arm(cn->cq, false);
			drain_cq(&s->ep, cn);
			if (r->send_done || cn->dead)
				break;
			pthread_mutex_unlock(&s->ep.lock);
			(void)poll(&pfd, 1, 10);
			pthread_mutex_lock(&s->ep.lock);
			(void)rpcrdma_cq_get_event(cn->cq);
		}
	} else {
		ep_wake(&s->ep);
		while (!r->send_done && !cn->dead)
			pthread_cond_wait(&s->ep.cond, &s->ep.lock);
	}
	rc = r->send_done ? r->send_status : -ENOTCONN;
	if (r->send_pending) {
		/* Gave up on a dead connection: forget the slot's owner. */
		cn->sowner[r->send_slot] = NULL;
		r->send_pending = false;
		sv_reply_release(r);
	}
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

int rr_tp_server_reply_async(struct rr_tp_server *s, struct rr_tp_sreq *pub,
			     const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk,
			     rr_tp_sent_fn sent, void *arg)
{
	struct tp_sreq *r = pub->priv;
	int rc;

	if (!sent)
		return -EINVAL;
	pthread_mutex_lock(&s->ep.lock);
	rc = sv_reply_post(s, r, parts, nparts, err_chunk, on_progress_thread(&s->ep));
	if (rc == 1) {
		/* The progress thread drains the completion: it arms every
		 * connection's CQ before it sleeps, so no wake-up is needed. */
		r->sent = sent;
		r->sent_arg = arg;
	}
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

void rr_tp_server_refuse(struct rr_tp_server *s, struct rr_tp_sreq *pub)
{
	struct tp_sreq *r = pub->priv;

	pthread_mutex_lock(&s->ep.lock);
	if (!r->send_pending && !r->send_done)
		sv_refuse(s, r->conn, r, r->rc->xid);
	pthread_mutex_unlock(&s->ep.lock);
}

void rr_tp_server_done(struct rr_tp_server *s, struct rr_tp_sreq *pub)
{
	struct tp_sreq *r = pub->priv;

	pthread_mutex_lock(&s->ep.lock);
	if (r->send_pending) {
		/* Its Reply's Send has not completed: freed then (the caller
		 * broke the rr_tp_server_reply_async contract; the memory of
		 * the Reply must stay valid until then). */
		r->orphan = true;
		r->sent = NULL;
	} else {
		sreq_free(s, r);
	}
	pthread_mutex_unlock(&s->ep.lock);
}

void rr_tp_server_destroy(struct rr_tp_server *s)
{
	const struct rpcrdma_env *env;

	if (!s)
		return;
	env = s->ep.env;
	ep_stop(&s->ep);
	/* No new connection requests, then refuse the queued ones. */
	if (s->listen_id) {
		(void)rpcrdma_cm_id_destroy(s->listen_id);
		s->listen_id = NULL;
	}
	{
		/* Connection requests nobody took: refuse them (their ids are
		 * ours to destroy). */
		struct rpcrdma_cm_event ev;

		while (rpcrdma_cm_get_event(s->ep.ch, &ev) == 0) {
			if (ev.type == RPCRDMA_CM_CONNECT_REQUEST && ev.id) {
				(void)rpcrdma_reject(ev.id, NULL, 0);
				(void)rpcrdma_cm_id_destroy(ev.id);
			}
		}
	}
	/* Asynchronous Replies still waiting for their Send completion (the
	 * RPC layer waits for them before it destroys; a direct caller may
	 * not): told -ENOTCONN now, once nothing drains their CQs. */
	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns, *nx; cn; cn = nx) {
		nx = cn->next;   /* an orphan's sreq_free may bury cn */
		sv_park_fail_all(s, cn);
		for (uint32_t i = 0; i < cn->nsend; i++) {
			struct tp_sreq *r = cn->sowner[i];

			if (r) {
				cn->sowner[i] = NULL;
				sv_reply_sent(s, r, -ENOTCONN);
			}
		}
	}
	sv_sent_upcalls(s);
	pthread_mutex_unlock(&s->ep.lock);
	while (s->conns) {
		struct tp_conn *cn = s->conns;

		s->conns = cn->next;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
		conn_free(cn);
	}
	rr_free(env, s->plan_cache);
	rr_free(env, s->pfd);
	rr_free(env, s->pcns);
	if (s->listen_id)
		(void)rpcrdma_cm_id_destroy(s->listen_id);
	ep_fini(&s->ep);
	rr_free(env, s);
}

void rr_tp_server_stats(struct rr_tp_server *s, struct rr_xprt_stats *out)
{
	struct rr_listen_stats ls;

	pthread_mutex_lock(&s->ep.lock);
	*out = s->ep.stats;
	ls = s->lstats_gone;
	if (s->listen_id)
		(void)rr_cm_listen_stats(s->listen_id, &ls);
	pthread_mutex_unlock(&s->ep.lock);
	out->accept_backoffs = ls.accept_backoffs;
	out->handshakes_dropped = ls.handshakes_dropped;
}

unsigned rr_tp_server_conns(struct rr_tp_server *s)
{
	unsigned n;

	pthread_mutex_lock(&s->ep.lock);
	n = s->nconns;
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

/* ======================================================================
 * Message-form counters and push mode (draft-talpey-rdma-commit section 2)
 * ====================================================================== */

/* Counts the form of a Send posted or a Receive completed from its
 * rdma_proc (RFC 8166 section 4.2.1: XID, vers, credit, proc). Called with
 * the endpoint's lock held. */
static void count_form(struct tp_ep *ep, const uint8_t *buf, uint32_t len, bool sent)
{
	struct rr_xprt_stats *st = &ep->stats;

	if (sent)
		st->inline_sent_bytes += len;
	else
		st->inline_recv_bytes += len;
	if (len < 16)
		return;
	switch (rr_get_be32(buf + 12)) {
	case RR_XPRT_MSG:
		sent ? st->msg_sent++ : st->msg_recv++;
		break;
	case RR_XPRT_NOMSG:
		sent ? st->nomsg_sent++ : st->nomsg_recv++;
		break;
	case RR_XPRT_DONE:
		sent ? st->done_sent++ : st->done_recv++;
		break;
	case RR_XPRT_ERROR:
		sent ? st->error_sent++ : st->error_recv++;
		break;
	default:
		break;
	}
}

/* ---- requester: RDMA Write + RDMA Commit into a peer's region ---- */

struct tp_push_op {
	uint32_t seq;
	bool done;
	bool commit;
	enum rpcrdma_wc_status status;
	uint32_t remote_status;
	uint32_t len;
	struct tp_push_op *next;
};

/* A completion of a push WR (lock held). The Write is unsignaled when a
 * Commit follows, so a success is always the operation's last WR. An error
 * other than a Commit Status (draft 5.1 item 3: the connection stays) is
 * fatal to the connection, as every failed work request. */
static void cl_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	uint32_t seq = (uint32_t)WRVAL(wc->wr_id);
	struct tp_push_op *op;

	for (op = c->pushes; op; op = op->next)
		if (op->seq == seq)
			break;
	if (op && !op->done) {
		op->done = true;
		op->status = wc->status;
		op->remote_status = wc->remote_status;
		if (wc->status == RPCRDMA_WC_SUCCESS) {
			if (op->len) {
				c->ep.stats.push_writes++;
				c->ep.stats.push_write_bytes += op->len;
			}
			if (op->commit)
				c->ep.stats.commits++;
		} else if (op->commit) {
			c->ep.stats.commit_errors++;
		}
		pthread_cond_broadcast(&c->ep.cond);
	}
	if (wc->status != RPCRDMA_WC_SUCCESS && wc->status != RPCRDMA_WC_COMMIT_ERR &&
	    !cn->dead) {
		cn->dead = true;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
	}
}

int rr_tp_client_commit_ok(struct rr_tp_client *c)
{
	int rc;

	pthread_mutex_lock(&c->ep.lock);
	if (!(c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT))
		rc = -EOPNOTSUPP;
	else if (!c->conn || !c->conn->established || c->conn->dead)
		rc = -ENOTCONN;
	else
		rc = c->conn->commit ? 0 : -EOPNOTSUPP;
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

static int push_errno(const struct tp_push_op *op)
{
	switch (op->status) {
	case RPCRDMA_WC_SUCCESS:
		return 0;
	case RPCRDMA_WC_COMMIT_ERR:
		return -EIO;
	case RPCRDMA_WC_REM_ACCESS_ERR:
	case RPCRDMA_WC_LOC_PROT_ERR:
		return -EACCES;
	case RPCRDMA_WC_REM_INV_REQ_ERR:
		return -EOPNOTSUPP;
	case RPCRDMA_WC_WR_FLUSH_ERR:
	case RPCRDMA_WC_REM_ABORT_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

int rr_tp_client_push(struct rr_tp_client *c, struct rr_tp_push *p)
{
	struct tp_push_op op = {0};
	struct rpcrdma_send_wr wr[2];
	struct rpcrdma_sge sge;
	struct rpcrdma_mr *mr = NULL;
	struct tp_conn *cn;
	struct tp_push_op **pp;
	uint64_t end;
	unsigned nwr = 0;
	bool waiter = false;
	int rc;

	p->wc_status = RPCRDMA_WC_GENERAL_ERR;
	p->commit_status = 0;
	if ((!p->len && !p->commit) || (p->len && !p->buf))
		return -EINVAL;
	end = now_ns(&c->ep) + (uint64_t)(p->timeout_ms ? p->timeout_ms : 30000) * 1000000u;
	pthread_mutex_lock(&c->ep.lock);
	cn = c->conn;
	if (p->commit && !(c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	if (!cn || !cn->established || cn->dead || c->destroying) {
		rc = -ENOTCONN;
		goto out;
	}
	if (p->commit && !cn->commit) {
		rc = -EOPNOTSUPP;   /* the peer did not advertise RDMA Commit */
		goto out;
	}
	memset(wr, 0, sizeof(wr));
	op.seq = ++c->push_seq;
	op.commit = p->commit;
	op.len = p->len;
	if (p->len) {
		rc = rpcrdma_reg_mr_simple(cn->pd, (void *)(uintptr_t)p->buf, p->len,
					   RPCRDMA_ACCESS_LOCAL_WRITE, &mr);
		if (rc)
			goto out;
		sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)p->buf, p->len,
					   rpcrdma_mr_lkey(mr)};
		wr[nwr].wr_id = WRID(WR_PUSH, op.seq);
		wr[nwr].sg_list = &sge;
		wr[nwr].num_sge = 1;
		wr[nwr].opcode = RPCRDMA_WR_RDMA_WRITE;
		wr[nwr].flags = p->commit ? 0 : RPCRDMA_SEND_SIGNALED;
		wr[nwr].u.rdma.stag = p->stag;
		wr[nwr].u.rdma.remote_offset = p->offset;
		nwr++;
	}
	if (p->commit) {
		wr[nwr].wr_id = WRID(WR_PUSH, op.seq);
		wr[nwr].opcode = RPCRDMA_WR_RDMA_COMMIT;
		wr[nwr].flags = RPCRDMA_SEND_SIGNALED | (p->visible ? RPCRDMA_SEND_VISIBLE : 0);
		wr[nwr].u.commit.regions = &p->region;
		wr[nwr].u.commit.num_regions = 1;
		if (nwr)
			wr[nwr - 1].next = &wr[nwr];
		nwr++;
	}
	op.next = c->pushes;
	c->pushes = &op;
	rc = rpcrdma_post_send(cn->qp, wr, NULL);
	if (rc) {
		/* Nothing (or only the Write) was posted: a refused WR is an
		 * error of the connection (cl_send does the same). */
		if (rc != -EOPNOTSUPP && rc != -EINVAL && !cn->dead) {
			cn->dead = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
		}
		goto unlink;
	}
	/* Wait for the last WR, receiving on this thread when nobody else
	 * does (as rr_tp_client_wait). */
	while (!op.done) {
		uint64_t t = now_ns(&c->ep);

		if (c->conn != cn || cn->dead || c->destroying) {
			rc = -ECONNRESET;
			break;
		}
		if (t >= end) {
			/* The peer never answered: the connection is unusable
			 * for this region (and our memory must be released). */
			rc = -ETIMEDOUT;
			cn->dead = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
			break;
		}
		if (!c->waiter || waiter) {
			/* the Commit Response costs one recvmsg, not arm +
			 * poll + epoll_wait + recvmsg */
			int n;

			c->waiter = waiter = true;
			n = cl_wait_once(c, cn, end - t);
			if (n < 0 && !op.done) {
				struct timespec ts;

				abs_deadline(&ts, 1);   /* no busy loop on a failing wait */
				(void)pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts);
			}
		} else {
			struct timespec ts;

			abs_deadline(&ts, 20);
			(void)pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts);
		}
	}
	if (op.done) {
		rc = push_errno(&op);
		p->wc_status = op.status;
		p->commit_status = op.remote_status;
	}
unlink:
	for (pp = &c->pushes; *pp; pp = &(*pp)->next)
		if (*pp == &op) {
			*pp = op.next;
			break;
		}
	if (waiter) {
		c->waiter = false;
		/* a wake-up per push costs a thread switch and, with spinning
		 * waiters on two CPUs, the CPU it runs on */
		if (cl_needs_progress(c, cn))
			ep_wake(&c->ep);
	}
out:
	if (mr)
		(void)rpcrdma_dereg_mr(mr);
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

/* ---- responder: regions exposed on a connection ---- */

struct tp_expo {
	uint64_t id;
	struct rpcrdma_mr *mr;
	void (*released)(void *arg);
	void *arg;
	struct tp_expo *next;
};

#define TP_EXPO_MAX 64   /* regions per connection */

/* Deregisters every region of @cn (its STags stop granting access at once)
 * and tells their owners (lock held, or no other thread). */
static void expo_release_all(struct tp_conn *cn)
{
	while (cn->expo) {
		struct tp_expo *x = cn->expo;

		cn->expo = x->next;
		(void)rpcrdma_dereg_mr(x->mr);
		cn->ep->stats.regions_released++;
		if (x->released)
			x->released(x->arg);
		rr_free(cn->ep->env, x);
	}
}

int rr_tp_server_commit_ok(struct rr_tp_server *s, struct rr_tp_sreq *req)
{
	struct tp_sreq *r = req->priv;
	int rc;

	pthread_mutex_lock(&s->ep.lock);
	if (r->conn->dead)
		rc = -ENOTCONN;
	else
		rc = r->conn->commit ? 0 : -EOPNOTSUPP;
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

int rr_tp_server_peer_addr(struct rr_tp_server *s, struct rr_tp_sreq *req,
			   struct sockaddr_storage *out)
{
	struct tp_sreq *r = req->priv;
	int rc = 0;

	pthread_mutex_lock(&s->ep.lock);
	if (r->conn->has_peer)
		*out = r->conn->peer;
	else
		rc = -ENOTCONN;
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

/* The registration of an exposed region (lock held): every level of
 * @want (RPCRDMA_MR_DURABLE / _VISIBLE) that the provider and the memory
 * allow; *@levels gets the RPCRDMA_PUSH_REGION_* it serves. */
static int expo_register(struct tp_conn *cn, const struct rpcrdma_mr_attr *attr,
			 struct rpcrdma_mr **mr, uint32_t *levels)
{
	const uint32_t want = attr->flags & (RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE);
	struct rpcrdma_mr_attr a = *attr;
	struct rpcrdma_caps caps;
	bool vis_cap;
	int rc;

	rc = rpcrdma_query(cn->ep->ctx, &caps);
	if (rc)
		return rc;
	vis_cap = (caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE) != 0;
	a.access = RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE;
	a.flags = want;
	/* Without visibility-only Commits (soft) a visibility Commit travels
	 * as a persistent one: a durable region serves both. */
	if (!vis_cap)
		a.flags &= ~RPCRDMA_MR_VISIBLE;
	if (!(caps.flags & RPCRDMA_CAP_DURABLE))
		a.flags &= ~RPCRDMA_MR_DURABLE;
	if (!a.flags)
		return -EOPNOTSUPP;
	rc = rpcrdma_reg_mr(cn->pd, &a, mr);
	if (rc == -EOPNOTSUPP && (a.flags & RPCRDMA_MR_DURABLE) && (a.flags & RPCRDMA_MR_VISIBLE)) {
		/* memory the device cannot persist (rxe without pmem): the
		 * caller accepted visibility alone */
		a.flags = RPCRDMA_MR_VISIBLE;
		rc = rpcrdma_reg_mr(cn->pd, &a, mr);
	}
	if (rc)
		return rc;
	*levels = 0;
	if (a.flags & RPCRDMA_MR_DURABLE)
		*levels |= RPCRDMA_PUSH_REGION_DURABLE;
	if ((a.flags & RPCRDMA_MR_VISIBLE) || (!vis_cap && (a.flags & RPCRDMA_MR_DURABLE)))
		*levels |= RPCRDMA_PUSH_REGION_VISIBLE;
	return 0;
}

int rr_tp_server_expose(struct rr_tp_server *s, struct rr_tp_sreq *req,
			const struct rpcrdma_mr_attr *attr, void (*released)(void *arg),
			void *arg, uint32_t *stag, uint64_t *to, uint64_t *id, uint32_t *levels)
{
	struct tp_sreq *r = req->priv;
	struct tp_conn *cn = r->conn;
	struct tp_expo *x;
	unsigned n = 0;
	int rc;

	if (!attr || !(attr->flags & (RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE)) || !attr->length)
		return -EINVAL;
	x = rr_zalloc(s->ep.env, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_expo *e = cn->expo; e; e = e->next)
		n++;
	if (cn->dead)
		rc = -ENOTCONN;
	else if (!cn->commit)
		rc = -EOPNOTSUPP;
	else if (n >= TP_EXPO_MAX)
		rc = -ENOSPC;
	else
		rc = expo_register(cn, attr, &x->mr, levels);
	if (rc) {
		pthread_mutex_unlock(&s->ep.lock);
		rr_free(s->ep.env, x);
		return rc;
	}
	x->id = ++s->expo_seq;
	x->released = released;
	x->arg = arg;
	x->next = cn->expo;
	cn->expo = x;
	s->ep.stats.regions_exposed++;
	*stag = rpcrdma_mr_rkey(x->mr);
	*to = rpcrdma_mr_remote_offset(x->mr);
	*id = x->id;
	pthread_mutex_unlock(&s->ep.lock);
	return 0;
}

int rr_tp_server_revoke(struct rr_tp_server *s, uint64_t id)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn && rc; cn = cn->next) {
		for (struct tp_expo **pp = &cn->expo; *pp; pp = &(*pp)->next) {
			struct tp_expo *x = *pp;

			if (x->id != id)
				continue;
			*pp = x->next;
			(void)rpcrdma_dereg_mr(x->mr);
			s->ep.stats.regions_released++;
			if (x->released)
				x->released(x->arg);
			rr_free(s->ep.env, x);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

/* ---- reliable reply: queries and test hooks ---- */

int rr_tp_client_reliable_reply(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->established)
		rc = c->conn->params.reliable_reply ? 1 : 0;
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

uint32_t rr_tp_server_rrep_live(struct rr_tp_server *s)
{
	uint32_t n;

	pthread_mutex_lock(&s->ep.lock);
	n = s->ep.rrep_live;
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

uint32_t rr_tp_server_rrep_waiting(struct rr_tp_server *s)
{
	uint32_t n = 0;

	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		n += cn->rrep.count;
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

void rr_tp_server_cut(struct rr_tp_server *s)
{
	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		if (cn->id && !cn->dead)
			(void)rpcrdma_disconnect(cn->id);
	pthread_mutex_unlock(&s->ep.lock);
}
