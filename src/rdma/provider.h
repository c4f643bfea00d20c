/* SPDX-License-Identifier: BSD-2-Clause */
/* The internal provider interface behind include/rpcrdma/rdma.h: one const
 * table of function pointers per provider (in the manner of rdma-core's
 * verbs_context_ops), base objects that providers embed in their own objects,
 * and the static provider registry.
 *
 * Object model. Each public handle (struct rpcrdma_qp *, ...) is a pointer to
 * the base object (struct rr_qp, ...) that the provider embeds as its member
 * `base`; the provider gets back its object with RR_CONTAINER_OF:
 *
 *	struct soft_qp { struct rr_qp base; ... };
 *	struct soft_qp *sq = RR_CONTAINER_OF(qp, struct soft_qp, base);
 *
 * The provider allocates the object and fills only its own fields; the
 * dispatch layer (src/rdma/rdma.c) fills the base fields (context, pd, cqs,
 * attributes, user context, reference counts) after a successful create op,
 * before returning it to the user, except the fields the provider documents
 * below as "provider sets". Destroy ops free the provider object; the
 * dispatch layer checks reference counts first (-EBUSY) so a destroy op is
 * only called on an unused object.
 *
 * Errors: ops return 0 (or a count) or a negative errno; a NULL op answers
 * -EOPNOTSUPP through the dispatch wrappers. Argument checks that do not
 * depend on the provider (NULL pointers, private data length against the
 * provider's limits, access flag combinations, WR chains) are done by the
 * dispatch layer; providers validate everything that depends on their state.
 *
 * Threading: see rdma.h. The ops are called with no dispatch-layer lock held;
 * the base reference counts are atomics. */
#ifndef RR_RDMA_PROVIDER_H
#define RR_RDMA_PROVIDER_H

#include <stdatomic.h>
#include <stdio.h>

#include "common/common.h"
#include "rdma/async_event.h"
#include "rpcrdma/rdma.h"

struct rr_provider_ops;

/* The spin budget in microseconds that @spin_us (rpcrdma_open_attr.spin_us)
 * asks for: 0 -> RPCRDMA_SOFT_SPIN_US from the environment (a decimal
 * number of microseconds; "0" or "off": none), else RPCRDMA_SPIN_US_DEFAULT;
 * RPCRDMA_SPIN_OFF -> 0; capped at RPCRDMA_SPIN_US_MAX. */
uint32_t rr_spin_us(uint32_t spin_us);

struct rr_context {
	const struct rr_provider_ops *ops;
	const struct rpcrdma_env *env;     /* never NULL (defaults resolved) */
	atomic_int nobjs;                  /* live PDs, CQs, channels */
};

struct rr_pd {
	struct rr_context *ctx;
	atomic_int nobjs;                  /* live MRs, MWs, QPs, SRQs */
};

struct rr_mr {
	struct rr_pd *pd;
	void *addr;
	uint64_t length;
	uint32_t access;
	uint32_t flags;                    /* RPCRDMA_MR_* */
	int durable_fd;
	uint64_t durable_offset;
	uint32_t lkey;                     /* provider sets (reg, rereg) */
	uint32_t rkey;                     /* provider sets (reg, rereg) */
	uint64_t to;                       /* Tagged Offset of addr for a peer:
					      provider sets (reg, rereg), else
					      the address */
};

struct rr_mw {
	struct rr_pd *pd;
	uint32_t rkey;                     /* provider sets (alloc, bind post) */
	uint64_t to;                       /* Tagged Offset of the bound range's
					      first byte: provider sets (bind
					      post) */
};

struct rr_cq {
	struct rr_context *ctx;
	uint32_t cqe;                      /* provider sets (granted capacity) */
	void *user_ctx;
	atomic_int nqps;
	atomic_int test_err;               /* rr_cq_test_fail */
	_Atomic uint64_t test_hits;
};

struct rr_srq {
	struct rr_pd *pd;
	atomic_int nqps;                   /* QPs using it */
	struct rpcrdma_srq_attr attr;      /* provider sets max_wr, max_sge
					      (granted) and srq_limit */
	void *user_ctx;
};

struct rr_qp {
	struct rr_pd *pd;
	struct rr_cq *send_cq;
	struct rr_cq *recv_cq;
	struct rr_srq *srq;                /* Receives from it (NULL: own) */
	struct rpcrdma_qp_attr attr;       /* provider sets (granted caps) */
	void *user_ctx;
	struct rr_cm_id *id;               /* bound connection, set by the
					      dispatch layer on connect/accept */
	uint32_t qp_num;                   /* provider sets (for logs) */
	atomic_int async_ev;               /* enum rr_async_event that failed it
					      (rr_qp_set_async_event), 0: none */
};

/* wait_qp: a QP's completions its caller had from the CQ (receive ones:
 * opcode RPCRDMA_WC_RECV). */
struct rr_qp_seen {
	uint64_t rq, sq;
};

struct rr_cm_channel {
	struct rr_context *ctx;
	atomic_int nids;
};

struct rr_cm_id {
	struct rr_cm_channel *ch;
	struct rr_qp *qp;                  /* after connect/accept */
	void *user_ctx;
	bool listener;
};

/* Public handle <-> base object (the public types are never defined). */
#define RR_PUB(type, p) ((struct rpcrdma_##type *)(void *)(p))
#define RR_BASE(type, p) ((struct rr_##type *)(void *)(p))

/* A listener's connections still in their handshake ("half-open": soft:
 * TCP accepted, MPA Request not received yet; docs/security.md "Limits").
 * At most @max_handshakes at once: one more accepted closes the oldest
 * (a peer that completes its handshake does so within a round trip, so
 * the oldest is the likeliest to be a peer that will never send). Each
 * is closed when its MPA Request has not come within @timeout_ms. 0: the
 * provider's default (soft: RR_LISTEN_MAX_HANDSHAKES, 10 s as siw).
 * Soft: the listening socket has TCP_DEFER_ACCEPT for @timeout_ms rounded
 * up to seconds (the kernel holds a connection that has sent nothing yet,
 * at no cost to the listener; docs/security.md "Half-open connections and
 * TCP_DEFER_ACCEPT"), unless @no_defer_accept. */
struct rr_listen_limits {
	unsigned max_handshakes;
	uint32_t timeout_ms;
	bool no_defer_accept;
};

#define RR_LISTEN_MAX_HANDSHAKES 128u

/* A listener's counters (since rpcrdma_listen). */
struct rr_listen_stats {
	uint64_t accept_backoffs;    /* accepting paused: out of file
					descriptors (EMFILE/ENFILE) or memory
					(ENOBUFS/ENOMEM) */
	uint64_t handshakes_dropped; /* half-open connections closed: oldest
					at the limit, timed out, or one that
					gave way to accept at EMFILE */
	uint32_t handshakes;         /* half-open now */
	uint32_t defer_accept_s;     /* soft: the listening socket's
					TCP_DEFER_ACCEPT as the kernel holds
					it (seconds); 0: off */
};

/* One per provider; all pointers optional except name and open/close. */
struct rr_provider_ops {
	const char *name;

	/* Context. open allocates the provider context (embedding struct
	 * rr_context base) using @env, which is never NULL. Return -ENODEV
	 * when the provider has no usable device. */
	int (*open)(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		    struct rr_context **out);
	void (*close)(struct rr_context *ctx);
	int (*query)(struct rr_context *ctx, struct rpcrdma_caps *caps);

	/* Protection domains. */
	int (*alloc_pd)(struct rr_context *ctx, struct rr_pd **out);
	int (*dealloc_pd)(struct rr_pd *pd);

	/* Registrations. The dispatch layer has checked @attr: non-zero
	 * length, addr + length does not wrap, REMOTE_WRITE implies
	 * LOCAL_WRITE, no unknown bits, DURABLE has fd >= 0. reg_mr and
	 * rereg_mr set mr->lkey/rkey (new key on every call); on rereg failure
	 * the old registration must be intact. The dispatch layer copies the
	 * attributes into the base after success. */
	int (*reg_mr)(struct rr_pd *pd, const struct rpcrdma_mr_attr *attr, struct rr_mr **out);
	int (*rereg_mr)(struct rr_mr *mr, const struct rpcrdma_mr_attr *attr);
	int (*dereg_mr)(struct rr_mr *mr);
	int (*alloc_mw)(struct rr_pd *pd, struct rr_mw **out);
	int (*dealloc_mw)(struct rr_mw *mw);

	/* Completion queues. A provider may use the generic ring
	 * (src/rdma/cq_ring.h) for all of poll/arm/fd/get_event. */
	int (*create_cq)(struct rr_context *ctx, const struct rpcrdma_cq_attr *attr,
			 struct rr_cq **out);
	int (*destroy_cq)(struct rr_cq *cq);
	int (*poll_cq)(struct rr_cq *cq, int n, struct rpcrdma_wc *wc);
	int (*arm_cq)(struct rr_cq *cq, bool solicited_only);
	int (*cq_fd)(struct rr_cq *cq);
	int (*cq_get_event)(struct rr_cq *cq);

	/* Queue pairs. create_qp gets the checked attr (CQs of this context);
	 * it sets qp->attr to the granted capacities. post_send/post_recv get
	 * chains whose shape the dispatch layer checked (num_sge within the
	 * QP's max, opcode known, commit regions 1..max, bind has mw and mr)
	 * and set *bad on failure. */
	int (*create_qp)(struct rr_pd *pd, const struct rpcrdma_qp_attr *attr, struct rr_qp **out);
	int (*destroy_qp)(struct rr_qp *qp);
	int (*post_send)(struct rr_qp *qp, struct rpcrdma_send_wr *wr,
			 struct rpcrdma_send_wr **bad);
	int (*post_recv)(struct rr_qp *qp, struct rpcrdma_recv_wr *wr,
			 struct rpcrdma_recv_wr **bad);
	/* post_send1 (optional; the library's own lone Send, rdma/post_own.h
	 * rr_post_send1_own_ops): post_send of @wr, which its caller vouches
	 * is a lone Send or Send With Invalidate (no next) of one SGE, not
	 * inline (the shape the dispatch layer's checks pass); the
	 * same result, completions and bytes on the wire as post_send of it,
	 * without the tests of the shape (the soft provider builds the FPDU
	 * straight from the SGE; its post_send takes this op for that
	 * shape). NULL: post_send is used. */
	int (*post_send1)(struct rr_qp *qp, struct rpcrdma_send_wr *wr);

	/* Shared receive queues. create_srq gets a checked attr (max_wr >= 1)
	 * and sets srq->attr to what it granted; create_qp finds the SRQ in
	 * attr->srq (same context; same PD unless RPCRDMA_CAP_SRQ_ANY_PD,
	 * checked by the dispatch layer, which also refuses post_recv on such
	 * a QP). post_srq_recv as post_recv. arm_srq_limit: 0 disarms.
	 * srq_get_event: 1 (consumed) or 0. qp_recv_quota: optional. */
	int (*create_srq)(struct rr_pd *pd, const struct rpcrdma_srq_attr *attr,
			  struct rr_srq **out);
	int (*destroy_srq)(struct rr_srq *srq);
	int (*post_srq_recv)(struct rr_srq *srq, struct rpcrdma_recv_wr *wr,
			     struct rpcrdma_recv_wr **bad);
	int (*arm_srq_limit)(struct rr_srq *srq, uint32_t limit);
	int (*srq_get_event)(struct rr_srq *srq);
	int (*qp_recv_quota)(struct rr_qp *qp, uint32_t add);

	/* Connection manager. Events the provider produces carry its rr_cm_id
	 * pointers converted with RR_PUB(cm_id, ...). New ids made for
	 * incoming requests are allocated by the provider and counted by it
	 * with rr_cm_id_created() before the event is delivered. listen and
	 * connect call rr_cm_id_init() (count, user_ctx, QP binding) before
	 * the new id can produce an event another thread may consume.
	 * destroy_id drops every event still queued that names the id (as id
	 * or listen_id; a queued CONNECT_REQUEST's new id is freed then and
	 * uncounted with rr_cm_id_dropped()): a consumed event never names a
	 * destroyed id. */
	int (*create_channel)(struct rr_context *ctx, struct rr_cm_channel **out);
	int (*destroy_channel)(struct rr_cm_channel *ch);
	int (*channel_fd)(struct rr_cm_channel *ch);
	int (*get_event)(struct rr_cm_channel *ch, struct rpcrdma_cm_event *ev);
	/* Optional (rr_cm_channel_quiet): on, the events the calling thread
	 * queues on @ch do not make its descriptor readable (the caller
	 * reads the channel itself before it turns this off); off, the
	 * descriptor is readable if events wait. One thread at a time:
	 * -EBUSY (on: another thread has it), -EINVAL (off: not this
	 * thread's). */
	int (*channel_quiet)(struct rr_cm_channel *ch, bool on);
	int (*listen)(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		      int backlog, void *user_ctx, struct rr_cm_id **out);
	int (*connect)(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		       socklen_t dstlen, const struct rpcrdma_conn_param *param,
		       void *user_ctx, struct rr_cm_id **out);
	/* Optional (rr_cm_connect_driven / rr_cm_connect_drive): an id that
	 * connect made with RR_CONN_DRIVEN in param->flags is stepped by no
	 * thread of the provider; the thread that calls connect_drive runs its
	 * handshake (socket, MPA exchange, the handshake's deadline) until it
	 * ends, and receives its last event (ESTABLISHED, REJECTED,
	 * UNREACHABLE, ERROR) in @ev instead of the channel: 0. -ETIMEDOUT
	 * when @timeout_ms (real time) passed first, -ECONNABORTED when @id
	 * was disconnected meanwhile, -EINVAL when @id is not a driven
	 * connect in its handshake or is being driven. The caller destroys @id after
	 * connect_drive returns, never during it. */
	int (*connect_drive)(struct rr_cm_id *id, int timeout_ms, struct rpcrdma_cm_event *ev);
	int (*accept)(struct rr_cm_id *id, struct rr_qp *qp, const struct rpcrdma_conn_param *param);
	int (*reject)(struct rr_cm_id *id, const void *data, uint16_t len);
	int (*disconnect)(struct rr_cm_id *id);
	int (*destroy_id)(struct rr_cm_id *id);
	int (*local_addr)(struct rr_cm_id *id, struct sockaddr_storage *ss);
	int (*peer_addr)(struct rr_cm_id *id, struct sockaddr_storage *ss);
	int (*conn_query)(struct rr_cm_id *id, struct rpcrdma_conn_info *info);
	/* Optional (rr_cm_listen_limits / rr_cm_listen_stats): a listener's
	 * half-open connections and counters. Absent: -EOPNOTSUPP. */
	int (*listen_limits)(struct rr_cm_id *id, const struct rr_listen_limits *lim);
	int (*listen_stats)(struct rr_cm_id *id, struct rr_listen_stats *out);
	int (*listen_shed)(struct rr_cm_id *id, unsigned n);
	/* Optional (rr_cm_listen_driven / rr_cm_listen_drive): the
	 * consumer's thread accepts listener @id's connections and reads
	 * their MPA Requests itself, where it reads the channel (no hand-off
	 * from the provider's thread). listen_driven(on): the provider's
	 * thread stops watching the listener; returns the descriptor to
	 * watch for readability (>= 0), -EBUSY while accepting is paused
	 * (the provider's thread resumes it), -EINVAL (not a listener);
	 * listen_driven(off): the provider's thread watches it again (0).
	 * listen_drive: accepts what is waiting and reads the Requests that
	 * are there (CONNECT_REQUEST events go to the channel, the others'
	 * handshakes to the provider's thread, every limit of
	 * rr_listen_limits applied as there); 0, or 1 when the listener was
	 * given back to the provider's thread (accept paused for want of
	 * descriptors or memory: the caller stops watching). */
	int (*listen_driven)(struct rr_cm_id *id, bool on);
	int (*listen_drive)(struct rr_cm_id *id);

	/* RDMA Commit on one QP, both directions (rpcrdma_qp_set_commit). */
	int (*set_commit)(struct rr_qp *qp, bool enable);

	/* Blocking poll (rpcrdma_cq_wait); optional: the dispatch layer falls
	 * back to arm + poll + poll(2) on cq_fd + get_event. */
	int (*wait_cq)(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms);
	/* Optional (rr_context_interrupt): the current wait_cq on every CQ of
	 * the context, or the next one on each CQ if none waits now, returns
	 * soon -- 0 when no completion came. A latch per CQ: no wake-up is
	 * lost between a waiter's last look at its own state and its wait. */
	int (*interrupt)(struct rr_context *ctx);
	/* Optional (rr_qp_wait): waits up to @timeout_ms for completions of
	 * @qp alone, on a CQ that other QPs share, while another thread may
	 * consume that CQ: the caller receives for @qp in its own thread.
	 * @seen: the completions of @qp the caller has had from the CQ so far
	 * (its polls and waits, whoever made them), receive ones and others.
	 * Returns completions of @qp (>= 1) in their order, 0 (none came in
	 * time), or -EAGAIN when it cannot serve @qp now (another thread
	 * serves it, something to transmit, not connected, or a receive
	 * completion of @qp went to the CQ and its consumer has it): then
	 * the caller waits through the CQ. */
	int (*wait_qp)(struct rr_qp *qp, int n, struct rpcrdma_wc *wc, int timeout_ms,
		       const struct rr_qp_seen *seen);
	/* Optional (rr_cq_describe, diagnostics): writes the state of @cq
	 * and of each QP on it to @f, a line each, indented as the caller's
	 * dump; @name (may be NULL) writes who uses a QP, from its user
	 * context. Takes no lock that a completion path holds long (a QP
	 * whose receive side is busy is said so, not waited for). */
	void (*cq_describe)(struct rr_cq *cq, FILE *f, void (*name)(FILE *f, void *user_ctx));
	/* Optional (rr_cq_wait_own: the library's own waits, which bound
	 * themselves with their own clock): wait_cq, whose start may be
	 * dated by the first clock read the wait needs rather than at its
	 * entry, so that a wait whose completion comes in its first sleep
	 * reads no clock for its deadline; such a wait may end up to one of
	 * the provider's sleep slices later than wait_cq's (soft:
	 * SOFT_FAST_BLOCK_MS), never earlier. Same completions, same order,
	 * same result as wait_cq otherwise, but for one more freedom: when
	 * its first look finds only Sends' successful completions
	 * (RPCRDMA_WC_SEND) and room for more in @wc, it may keep them for
	 * one sleep slice and return them with what that slice brings,
	 * after them (soft: a synchronous Call's signaled Send with its
	 * Reply, one wait; no other completion is kept). Without it:
	 * wait_cq. */
	int (*wait_cq_own)(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms);
};

/* Internal flag of rpcrdma_conn_param (never accepted from an application:
 * rpcrdma_connect refuses it): the connecting thread drives the handshake
 * itself (the connect_drive op). */
#define RR_CONN_DRIVEN (1u << 31)

/* rpcrdma_connect for a caller that then drives the handshake in its own
 * thread with rr_cm_connect_drive (no hand-off to the provider's thread
 * and back through the channel). *@driven tells whether the provider
 * supports it; when false, the id was made by a plain connect and its
 * events come through the channel. Returns as rpcrdma_connect. */
int rr_cm_connect_driven(struct rpcrdma_cm_channel *ch, struct rpcrdma_qp *qp,
			 const struct sockaddr *dst, socklen_t dstlen,
			 const struct rpcrdma_conn_param *param, void *user_ctx,
			 struct rpcrdma_cm_id **out, bool *driven);
/* Whether connects on @ch can be driven (rr_cm_connect_driven gives
 * *driven true): the provider has the connect_drive op. */
bool rr_cm_can_drive(struct rpcrdma_cm_channel *ch);
/* Runs the handshake of @id, made by rr_cm_connect_driven with *driven
 * true, in the calling thread until it ends or @timeout_ms passes; the
 * last event (ev->user_ctx filled) in @ev. As the connect_drive op. */
int rr_cm_connect_drive(struct rpcrdma_cm_id *id, int timeout_ms, struct rpcrdma_cm_event *ev);

/* Sets @lim on listener @id (the soft provider; rdma_cm leaves half-open
 * connections to the kernel's CM: -EOPNOTSUPP). 0, -EINVAL (not a
 * listener), -EOPNOTSUPP. */
int rr_cm_listen_limits(struct rpcrdma_cm_id *id, const struct rr_listen_limits *lim);
/* Reads listener @id's counters: 0, -EINVAL, -EOPNOTSUPP. */
int rr_cm_listen_stats(struct rpcrdma_cm_id *id, struct rr_listen_stats *out);
/* Closes up to @n of listener @id's oldest half-open connections (counted
 * as dropped), so that the descriptors they held serve an established one:
 * the consumer calls it when setting up an accepted connection ran out of
 * file descriptors (EMFILE), then tries again. How many were closed, or
 * -EINVAL / -EOPNOTSUPP. */
int rr_cm_listen_shed(struct rpcrdma_cm_id *id, unsigned n);
/* The listen_driven and listen_drive ops on listener @id (-EINVAL: not a
 * listener; -EOPNOTSUPP: the provider has none, its thread accepts). */
int rr_cm_listen_driven(struct rpcrdma_cm_id *id, bool on);
int rr_cm_listen_drive(struct rpcrdma_cm_id *id);
/* The channel_quiet op on @ch: 0, -EBUSY, -EINVAL, -EOPNOTSUPP (the
 * provider's events always make the descriptor readable). */
int rr_cm_channel_quiet(struct rpcrdma_cm_channel *ch, bool on);

/* Providers call this when they create an id for an incoming request (the
 * channel's id count guards rpcrdma_cm_channel_destroy). provider.c, as
 * rr_cm_id_init, rr_cm_id_dropped and rr_spin_us. */
void rr_cm_id_created(struct rr_cm_channel *ch, struct rr_cm_id *id);
/* listen/connect: counts @id and sets its base fields (@qp non-NULL binds
 * it both ways; NULL for a listener) before the provider publishes it. */
void rr_cm_id_init(struct rr_cm_channel *ch, struct rr_cm_id *id, void *user_ctx,
		   struct rr_qp *qp, bool listener);
/* Uncounts an id the provider freed without handing it to the consumer (an
 * undelivered CONNECT_REQUEST), or after rr_cm_id_init on a failure path. */
void rr_cm_id_dropped(struct rr_cm_channel *ch, struct rr_cm_id *id);

/* Internal (the RPC transport's progress loop sleeps in rpcrdma_cq_wait and
 * is woken by other threads through this): see the interrupt op.
 * -EOPNOTSUPP when the provider has no such op (then wait in poll(2) on the
 * CQ's fd and an eventfd instead). */
int rr_context_interrupt(struct rpcrdma_context *ctx);
bool rr_context_can_interrupt(const struct rpcrdma_context *ctx);

/* Internal (a synchronous RPC caller whose connection shares its CQ with
 * others): the wait_qp op. -EOPNOTSUPP without it (verbs), then the caller
 * waits through the CQ as before. */
int rr_qp_wait(struct rpcrdma_qp *qp, int n, struct rpcrdma_wc *wc, int timeout_ms,
	       const struct rr_qp_seen *seen);
bool rr_qp_can_wait(const struct rpcrdma_qp *qp);

/* Internal (the rdma:// transport's own waits, src/transport/rdma/progress.c
 * tp_cq_wait_once): rpcrdma_cq_wait on the library's own CQ with its own
 * array (@pcq non-NULL, @n >= 1, @wc non-NULL by construction), without
 * the public entry's checks of them: the provider's wait_cq op straight,
 * (its wait_cq_own op when it has one: the wait dated by the first clock
 * read it needs, it may end a slice later), or rpcrdma_cq_wait itself when
 * the provider has no wait_cq or a failure is injected (rr_cq_test_fail,
 * counted there). The same completions and result as rpcrdma_cq_wait. */
static inline int rr_cq_wait_own(struct rpcrdma_cq *pcq, int n, struct rpcrdma_wc *wc,
				 int timeout_ms)
{
	struct rr_cq *cq = RR_BASE(cq, pcq);
	const struct rr_provider_ops *ops = cq->ctx->ops;

	if (atomic_load_explicit(&cq->test_err, memory_order_relaxed) || !ops->wait_cq)
		return rpcrdma_cq_wait(pcq, n, wc, timeout_ms);
	return ops->wait_cq_own ? ops->wait_cq_own(cq, n, wc, timeout_ms)
				: ops->wait_cq(cq, n, wc, timeout_ms);
}

/* Internal (a failure's dump): the cq_describe op; nothing without it. */
void rr_cq_describe(struct rpcrdma_cq *cq, FILE *f, void (*name)(FILE *f, void *user_ctx));

/* Internal (a provider failing @qp for an asynchronous error of its device,
 * src/rdma/async_event.h; soft: its CQ's overrun): records @ev as the cause,
 * before the QP goes to the error state (its flushed completions and its
 * DISCONNECTED come after). The first cause stays. rr_qp_async_event: that
 * cause, or RR_ASYNC_OTHER when no asynchronous error failed @qp; the
 * transport counts its connection's end under it (rpcrdma/stats.h group
 * faults). Any thread, no lock; inline: the providers, below the dispatch
 * layer, set it. */
static inline void rr_qp_set_async_event(struct rr_qp *qp, enum rr_async_event ev)
{
	int none = RR_ASYNC_OTHER;

	(void)atomic_compare_exchange_strong(&qp->async_ev, &none, (int)ev);
}

static inline enum rr_async_event rr_qp_async_event(const struct rpcrdma_qp *qp)
{
	return (enum rr_async_event)atomic_load(&((const struct rr_qp *)(const void *)qp)->async_ev);
}

/* Test hook (a race point of the dispatch layer): from now on every
 * rpcrdma_cq_poll, rpcrdma_cq_arm, rpcrdma_cq_wait and rpcrdma_cq_get_event
 * on @cq, and rr_qp_wait on a QP completing there, answers @err (a negative
 * errno; 0 ends it) without calling the provider, as a CQ that failed
 * would. rr_cq_test_hits: how many calls it answered so. */
void rr_cq_test_fail(struct rpcrdma_cq *cq, int err);
uint64_t rr_cq_test_hits(const struct rpcrdma_cq *cq);

/* ---- registry ---- */

/* The built-in providers (providers.c). "soft" is linked when src/rdma/soft
 * provides rdma/soft/soft_provider.h declaring `extern const struct
 * rr_provider_ops rr_soft_ops;`; "verbs" when RPCRDMA_HAVE_VERBS
 * (rr_verbs_ops). */
const struct rr_provider_ops *rr_provider_find(const char *name);
size_t rr_provider_count(void);
const struct rr_provider_ops *rr_provider_at(size_t i);

/* Test hook: opens a context on an explicit ops table (the registry is
 * static). */
int rr_open_with_ops(const struct rr_provider_ops *ops, const struct rpcrdma_open_attr *attr,
		     struct rpcrdma_context **out);

#endif
