/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's CQ objects (cq.c): creation, the QPs' slots,
 * completions, wake-ups, interrupts and the epoll sets that watch a QP's
 * socket. The consumer's side (poll, wait) is cq_wait.h. */
#ifndef RR_SOFT_CQ_H
#define RR_SOFT_CQ_H

#include "rdma/soft/soft.h"

/* The CQ this thread is progressing inline (cq_wait.c sets it around its
 * receive/transmit calls): completions it pushes there need no wake-up (for
 * itself; rr_soft_tls_waiter: it is one of q->waiting). rr_soft_tls_direct:
 * the fast waiter's own array (cq_wait.c cq_fast_wait), or NULL. Local
 * dynamic: one __tls_get_addr per function for all three, in a shared
 * library as when they were static in one file (the push is per
 * completion). */
#define RR_SOFT_TLS __attribute__((visibility("hidden"), tls_model("local-dynamic")))
extern __thread struct soft_cq *rr_soft_tls_cq RR_SOFT_TLS;
extern __thread bool rr_soft_tls_waiter RR_SOFT_TLS;
extern __thread struct soft_direct *rr_soft_tls_direct RR_SOFT_TLS;

int rr_soft_create_cq(struct rr_context *ctx, const struct rpcrdma_cq_attr *attr,
		      struct rr_cq **out);
int rr_soft_destroy_cq(struct rr_cq *cq);
int rr_soft_cq_fd(struct rr_cq *cq);
/* @qp uses @q (a slot; *@tok: its epoll token, slot << 32 | generation):
 * 0, -ENOSPC when the completions it may have outstanding on @q (its work
 * queues' depths; an SRQ's Receives are bounded by the QP's receive quota
 * instead, cq.c cq_need) with those of @q's other QPs
 * exceed @q's entries (an overrun would be possible), -EIO when @q overran
 * already, or -ENOMEM. */
int rr_soft_cq_add_qp(struct soft_cq *q, struct soft_qp *qp, uint64_t *tok);
/* @qp leaves @q's slots; returns once no fast waiter of @q that read it
 * without qlock is still on its way to @qp's rx_lock (soft.h one_qp).
 * Called with no lock held. */
void rr_soft_cq_del_qp(struct soft_cq *q, struct soft_qp *qp);
/* Calls @fn for every QP of @q; the caller holds q->qlock. */
void rr_soft_cq_for_each_qp(struct soft_cq *q, void (*fn)(struct soft_qp *qp, void *arg),
			    void *arg);
/* Appends a completion; wakes a consumer waiting in another thread. */
void rr_soft_cq_push(struct soft_cq *q, const struct rpcrdma_wc *wc);

/* The counter a completion @wc is counted in before it reaches its
 * consumer: its QP's cq_rq (a Receive) or cq_sq (the rest), NULL without
 * a QP (soft.h cq_rq). */
static inline _Atomic uint64_t *rr_soft_wc_count(const struct rpcrdma_wc *wc)
{
	struct soft_qp *wq;

	if (!wc->qp)
		return NULL;
	wq = RR_CONTAINER_OF((struct rr_qp *)(void *)wc->qp, struct soft_qp, base);
	return wc->opcode == RPCRDMA_WC_RECV ? &wq->cq_rq : &wq->cq_sq;
}

/* The fast waiter's own completion (this thread progresses @q inline for
 * its rpcrdma_cq_wait, whose array has room), nothing older in the ring
 * and the ring not armed: counted in @count (rr_soft_wc_count of the
 * completion: the receive path names its QP's cq_rq itself, issue 16 part
 * HA), and the array's next entry taken for it: its address, which the
 * caller fills at once (no other thread reads the array: it is the
 * calling thread's own wait's); NULL: nothing done, rr_soft_cq_push
 * decides. Per work queue order holds: pushes of one queue are serialized
 * by its lock (rx_lock / tx_lock), so a completion another thread pushed
 * earlier is seen here as a pending ring and everything after it goes to
 * the ring too. An armed ring takes the push (its notification semantics
 * stay the ring's). Inline: the receive path of every Reply and Call
 * calls it, and writes a Receive's completion straight into the entry
 * (issue 16 part IA: no copy of it built on the stack first). Always
 * inlined: merely inline, the link-time inliner weighed rr_soft_cq_push
 * otherwise and left the lease check out of soft_wait (+4 per sync
 * NULL). */
static inline __attribute__((always_inline)) struct rpcrdma_wc *
rr_soft_cq_direct_slot(struct soft_cq *q, _Atomic uint64_t *count)
{
	struct soft_direct *d = rr_soft_tls_direct;

	if (!d || d->qp || d->q != q || rr_soft_tls_cq != q || d->got >= d->n ||
	    rr_cq_ring_pending(&q->ring) || rr_cq_ring_armed(&q->ring))
		return NULL;
	/* counted first, as every completion through the CQ */
	if (count)
		atomic_fetch_add_explicit(count, 1, memory_order_seq_cst);
	q->fast_direct++;
	return &d->wc[d->got++];
}

/* rr_soft_cq_direct_slot with @wc copied into the entry: true when handed
 * over; false: nothing done, rr_soft_cq_push decides. */
static inline bool rr_soft_cq_direct(struct soft_cq *q, const struct rpcrdma_wc *wc,
				     _Atomic uint64_t *count)
{
	struct rpcrdma_wc *slot = rr_soft_cq_direct_slot(q, count);

	if (!slot)
		return false;
	*slot = *wc;
	return true;
}
/* Consumes what the CQ's wake eventfd holds. */
void rr_soft_cq_wake_drain(struct soft_cq *q);
/* tx_lock held (and rx_lock for watch/unwatch): the QP wants EPOLLOUT (@on:
 * a transmit backlog) in every epoll set that holds its socket. */
void rr_soft_want_out(struct soft_qp *qp, bool on);
/* Socket into / out of the CQs' epoll sets (rx_lock and tx_lock held). */
void rr_soft_watch(struct soft_qp *qp);
void rr_soft_unwatch(struct soft_qp *qp);
/* Latches every CQ of @c and wakes its waiters (@cool: and turns their
 * fast waits off for SOFT_FAST_COOLDOWN_NS). */
void rr_soft_cqs_interrupt(struct soft_ctx *c, bool cool);
/* The interrupt op: latches every CQ of @ctx and wakes its waiters (a fast
 * waiter asleep in recvmsg sees it when its read ends, and the fast wait is
 * off on that CQ for SOFT_FAST_COOLDOWN_NS). From then on, every CM event
 * pushed to a channel of @ctx interrupts its CQs too, without the cool-down
 * (rr_soft_chan_push; docs/soft-iwarp.md "CM events end CQ waits"). */
int rr_soft_interrupt(struct rr_context *ctx);

#endif
