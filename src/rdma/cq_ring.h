/* SPDX-License-Identifier: BSD-2-Clause */
/* A completion queue for software providers: a fixed-capacity ring of work
 * completions (struct rpcrdma_wc) filled by the provider's progress (any
 * number of producer threads) and drained by one consumer, with verbs-style
 * notification: an armed ring writes its eventfd once, on the next
 * completion (or, armed solicited-only, on the next solicited receive or
 * error completion). Overrun is an error state as on a verbs CQ: the
 * completion is lost, push answers -EOVERFLOW, the fd is signalled so the
 * consumer notices, and poll answers -EOVERFLOW once the held completions
 * are drained. No RFC wire format here.
 *
 * Thread safety: push may run concurrently with everything (mutex); poll,
 * arm and get_event are for one consumer at a time (they also take the
 * mutex, so concurrent consumers are safe but get no ordering guarantee);
 * rr_cq_ring_take_qp lets a consumer of one QP's completions take them out
 * beside the ring's consumer without overtaking what that one took. */
#ifndef RR_RDMA_CQ_RING_H
#define RR_RDMA_CQ_RING_H

#include <stdatomic.h>

#include "common/common.h"
#include "common/lock.h"
#include "rpcrdma/rdma.h"

enum { RR_CQ_DISARMED = 0, RR_CQ_ARMED_ALL, RR_CQ_ARMED_SOLICITED };

struct rr_cq_ring {
	struct rr_lock lock;   /* common/lock.h */
	const struct rpcrdma_env *env;
	struct rpcrdma_wc *slots;
	uint32_t cap;
	uint32_t head;      /* next to poll */
	uint32_t count;     /* written under lock, atomically (rr_cq_ring_pending) */
	bool overflow;
	int armed;          /* written under lock, atomically (rr_cq_ring_armed) */
	int efd;            /* eventfd, EFD_NONBLOCK | EFD_CLOEXEC */
	bool signaled;      /* efd written since the last get_event (lock) */
	uint64_t pushed;    /* statistics */
};

/* Notifications written (eventfd writes) by every ring of the process:
 * statistics, read by tests and benchmarks. */
extern _Atomic uint64_t rr_cq_ring_signals;

/* @cap completions (>= 1). -ENOMEM, or a negative errno from eventfd. */
int rr_cq_ring_init(struct rr_cq_ring *r, const struct rpcrdma_env *env, uint32_t cap);
void rr_cq_ring_fini(struct rr_cq_ring *r);

/* Appends a copy of @wc. -EOVERFLOW when full (then the ring is in the
 * error state for good). A completion is "solicited" for notification when
 * it is a receive with RPCRDMA_WC_SOLICITED or has a non-success status. */
int rr_cq_ring_push(struct rr_cq_ring *r, const struct rpcrdma_wc *wc);
/* The same; @quiet: an armed ring is disarmed without writing its fd (the
 * pusher is the consumer itself, progressing inline, and polls the ring right
 * after: the notification is delivered by that poll; the consumer re-arms
 * before it sleeps, as after any notification). */
int rr_cq_ring_push_ex(struct rr_cq_ring *r, const struct rpcrdma_wc *wc, bool quiet);
/* Moves up to @n completions to @out: count, 0 when empty, -EOVERFLOW after
 * an overrun once empty. */
int rr_cq_ring_poll(struct rr_cq_ring *r, int n, struct rpcrdma_wc *out);
int rr_cq_ring_arm(struct rr_cq_ring *r, bool solicited_only);
/* Armed now (a lock-free hint for other threads: may change at once).
 * Inline: the soft provider looks at it at every completion it pushes. */
static inline bool rr_cq_ring_armed(const struct rr_cq_ring *r)
{
	return __atomic_load_n(&r->armed, __ATOMIC_RELAXED) != RR_CQ_DISARMED;
}
int rr_cq_ring_fd(const struct rr_cq_ring *r);
/* Consumes pending notifications: 1 if any, 0 if none. */
int rr_cq_ring_get_event(struct rr_cq_ring *r);
/* Completions held now. */
uint32_t rr_cq_ring_count(struct rr_cq_ring *r);
/* Whether poll would return something now, without the lock (a hint: a
 * push may land right after; callers that sleep on the answer pair it with
 * a wake-up of their own, see soft/rx.c rx_read_fast). Sequentially
 * consistent with respect to the caller's atomics. Inline: looked at
 * about three times per completion a fast waiter takes. */
static inline bool rr_cq_ring_pending(const struct rr_cq_ring *r)
{
	return __atomic_load_n(&r->count, __ATOMIC_SEQ_CST) != 0 ||
	       __atomic_load_n(&r->overflow, __ATOMIC_SEQ_CST);
}
/* Taking one QP's completions out of a ring that other QPs' completions
 * share (a consumer of that QP alone, while another consumes the ring):
 * @qp's receive completions (opcode RPCRDMA_WC_RECV) are taken only when
 * the ring holds exactly @want_rq of them, its others only when it holds
 * exactly @want_sq (the caller's count of those not consumed by anyone
 * else: so that none of a queue's completions overtakes an older one
 * another consumer holds). */
struct rr_cq_ring_take {
	const struct rpcrdma_qp *qp;
	uint32_t want_rq, want_sq;
	uint32_t held_rq, held_sq;   /* out: how many the ring held */
	uint32_t took_rq, took_sq;   /* out: how many were taken */
};
/* Moves up to @n completions (@t says which) to @out, oldest first,
 * leaving the others in their order: the number moved, or -EINVAL. */
int rr_cq_ring_take_qp(struct rr_cq_ring *r, struct rr_cq_ring_take *t, int n,
		       struct rpcrdma_wc *out);
/* Whether the ring holds a completion of @qp now. */
bool rr_cq_ring_holds_qp(struct rr_cq_ring *r, const struct rpcrdma_qp *qp);

#endif
