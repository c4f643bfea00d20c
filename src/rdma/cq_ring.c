/* SPDX-License-Identifier: BSD-2-Clause */
/* Fixed-capacity completion ring with eventfd notification (see cq_ring.h):
 * the software providers' completion queue. No RFC wire format. */
#include "rdma/cq_ring.h"

#include <sys/eventfd.h>
#include <unistd.h>

_Atomic uint64_t rr_cq_ring_signals;

int rr_cq_ring_init(struct rr_cq_ring *r, const struct rpcrdma_env *env, uint32_t cap)
{
	if (!r || cap == 0 || cap > (1u << 24))
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->env = rr_env(env);
	r->slots = rr_alloc_pages(r->env, (size_t)cap * sizeof(*r->slots)); /* resident as used */
	if (!r->slots)
		return -ENOMEM;
	r->cap = cap;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		int err = -errno;

		rr_free_pages(r->env, r->slots, (size_t)r->cap * sizeof(*r->slots));
		r->slots = NULL;
		return err;
	}
	atomic_init(&r->lock.v, 0);
	return 0;
}

void rr_cq_ring_fini(struct rr_cq_ring *r)
{
	if (!r || !r->slots)
		return;
	close(r->efd);
	rr_free_pages(r->env, r->slots, (size_t)r->cap * sizeof(*r->slots));
	r->slots = NULL;
}

static void signal_fd(struct rr_cq_ring *r)
{
	uint64_t one = 1;

	/* An eventfd write only fails when the counter would overflow, which
	 * still leaves it readable: the notification is not lost. */
	while (write(r->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	r->signaled = true;
	atomic_fetch_add_explicit(&rr_cq_ring_signals, 1, memory_order_relaxed);
}

/* Written under r->lock, read without it by rr_cq_ring_armed(). */
static void set_armed(struct rr_cq_ring *r, int v)
{
	__atomic_store_n(&r->armed, v, __ATOMIC_RELAXED);
}

/* Whether @wc counts for a solicited-only arm (cq_ring.h): looked at only
 * when the ring is armed so. */
static bool wc_solicited(const struct rpcrdma_wc *wc)
{
	return wc->status != RPCRDMA_WC_SUCCESS ||
	       (wc->opcode == RPCRDMA_WC_RECV && (wc->flags & RPCRDMA_WC_SOLICITED));
}

int rr_cq_ring_push(struct rr_cq_ring *r, const struct rpcrdma_wc *wc)
{
	return rr_cq_ring_push_ex(r, wc, false);
}

int rr_cq_ring_push_ex(struct rr_cq_ring *r, const struct rpcrdma_wc *wc, bool quiet)
{
	bool notify = false;
	int rc = 0;

	if (!r || !wc)
		return -EINVAL;
	rr_lock(&r->lock);
	if (r->overflow || r->count == r->cap) {
		/* Overrun: the completion is lost; wake the consumer whether
		 * armed or not so that it sees the error state. */
		__atomic_store_n(&r->overflow, true, __ATOMIC_SEQ_CST);
		notify = true;
		rc = -EOVERFLOW;
	} else {
		uint32_t i = r->head + r->count;   /* < 2 * cap: head < cap, count < cap */

		r->slots[i >= r->cap ? i - r->cap : i] = *wc;
		__atomic_store_n(&r->count, r->count + 1, __ATOMIC_SEQ_CST);
		r->pushed++;
		if (r->armed == RR_CQ_ARMED_ALL ||
		    (r->armed == RR_CQ_ARMED_SOLICITED && wc_solicited(wc))) {
			set_armed(r, RR_CQ_DISARMED);
			notify = !quiet;
		}
	}
	/* Signal under the lock so that an arm racing with this push cannot be
	 * reordered against it. */
	if (notify)
		signal_fd(r);
	rr_unlock(&r->lock);
	return rc;
}

int rr_cq_ring_poll(struct rr_cq_ring *r, int n, struct rpcrdma_wc *out)
{
	uint32_t count;
	int got = 0;

	if (!r || n < 0 || (n && !out))
		return -EINVAL;
	rr_lock(&r->lock);
	count = r->count;   /* only the lock's holders write it */
	while (got < n && count) {
		out[got++] = r->slots[r->head];
		if (++r->head == r->cap)   /* (no division per completion) */
			r->head = 0;
		count--;
	}
	if (!count)
		r->head = 0;   /* empty: the slots in use stay the first ones */
	/* Read without the lock by rr_cq_ring_pending: an atomic store (a C11
	 * data race otherwise), relaxed. A lower count publishes nothing a
	 * reader then uses: it only tells a reader that polling would find
	 * less, and a reader that still sees the old count polls under the
	 * lock and finds what is there. The stores that do publish (a push's
	 * increment, which a sleeping waiter must not miss) are the
	 * sequentially consistent ones in rr_cq_ring_push_ex. Relaxed is a
	 * plain store on x86-64: the same instructions as before. */
	if (got)
		__atomic_store_n(&r->count, count, __ATOMIC_RELAXED);
	if (got == 0 && r->overflow)
		got = -EOVERFLOW;
	rr_unlock(&r->lock);
	return got;
}

int rr_cq_ring_arm(struct rr_cq_ring *r, bool solicited_only)
{
	if (!r)
		return -EINVAL;
	rr_lock(&r->lock);
	/* ARMED_ALL is not narrowed by a later solicited-only request (verbs:
	 * the broader request wins until it fires). */
	if (!solicited_only)
		set_armed(r, RR_CQ_ARMED_ALL);
	else if (r->armed == RR_CQ_DISARMED)
		set_armed(r, RR_CQ_ARMED_SOLICITED);
	rr_unlock(&r->lock);
	return 0;
}

int rr_cq_ring_fd(const struct rr_cq_ring *r)
{
	return r ? r->efd : -EINVAL;
}

int rr_cq_ring_get_event(struct rr_cq_ring *r)
{
	uint64_t v;
	ssize_t n;

	if (!r)
		return -EINVAL;
	/* Nothing written since the last look: no system call. */
	rr_lock(&r->lock);
	if (!r->signaled) {
		rr_unlock(&r->lock);
		return 0;
	}
	r->signaled = false;
	do
		n = read(r->efd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
	rr_unlock(&r->lock);
	if (n == (ssize_t)sizeof(v))
		return 1;
	if (n < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

uint32_t rr_cq_ring_count(struct rr_cq_ring *r)
{
	uint32_t n;

	rr_lock(&r->lock);
	n = r->count;
	rr_unlock(&r->lock);
	return n;
}

/* A receive completion (of a QP's receive queue), or another. */
static bool is_rq(const struct rpcrdma_wc *wc)
{
	return wc->opcode == RPCRDMA_WC_RECV;
}

/* The completions of one QP taken out of a ring that others' completions
 * share (cq_ring.h). Counts first, then takes, in one hold of the lock;
 * the rest keep their order (compacted towards the head). O(count). */
int rr_cq_ring_take_qp(struct rr_cq_ring *r, struct rr_cq_ring_take *t, int n,
		       struct rpcrdma_wc *out)
{
	uint32_t kept = 0, count;
	bool take_rq, take_sq;
	int got = 0;

	if (!r || !t || !t->qp || n < 0 || (n && !out))
		return -EINVAL;
	t->held_rq = t->held_sq = t->took_rq = t->took_sq = 0;
	if (!rr_cq_ring_pending(r))
		return 0;   /* no lock for an empty ring */
	rr_lock(&r->lock);
	count = r->count;
	for (uint32_t i = 0; i < count; i++) {
		const struct rpcrdma_wc *wc = &r->slots[(r->head + i) % r->cap];

		if (wc->qp == t->qp) {
			if (is_rq(wc))
				t->held_rq++;
			else
				t->held_sq++;
		}
	}
	take_rq = t->held_rq && t->held_rq == t->want_rq;
	take_sq = t->held_sq && t->held_sq == t->want_sq;
	if (!take_rq && !take_sq) {
		rr_unlock(&r->lock);
		return 0;
	}
	for (uint32_t i = 0; i < count; i++) {
		const struct rpcrdma_wc *wc = &r->slots[(r->head + i) % r->cap];
		bool rq = is_rq(wc);

		if (wc->qp == t->qp && (rq ? take_rq : take_sq) && got < n) {
			out[got++] = *wc;
			if (rq)
				t->took_rq++;
			else
				t->took_sq++;
		} else if (kept++ != i) {
			r->slots[(r->head + kept - 1) % r->cap] = *wc;
		}
	}
	__atomic_store_n(&r->count, kept, __ATOMIC_SEQ_CST);
	if (!kept)
		r->head = 0;
	rr_unlock(&r->lock);
	return got;
}

bool rr_cq_ring_holds_qp(struct rr_cq_ring *r, const struct rpcrdma_qp *qp)
{
	bool found = false;

	if (!rr_cq_ring_pending(r))
		return false;
	rr_lock(&r->lock);
	for (uint32_t i = 0; i < r->count && !found; i++)
		found = r->slots[(r->head + i) % r->cap].qp == qp;
	rr_unlock(&r->lock);
	return found;
}
