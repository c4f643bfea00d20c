/* SPDX-License-Identifier: BSD-2-Clause */
/* A CQ's consumer (rpcrdma_cq_poll, _wait, _arm, _get_event) and the
 * inline progress it makes: the consumer's thread receives and transmits
 * for the CQ's QPs itself, through one epoll_wait over their sockets, or on
 * a CQ with one connected QP through a single recvmsg (fast poll) or a
 * blocking one (fast wait: docs/soft-iwarp.md "Fast wait"); and the wait of
 * one QP's caller on a CQ that others share and consume (wait_qp: that QP's
 * socket read in the caller's thread); and the poll that follows an arm,
 * which reads the ring only unless a Send went out on the QP its consumer
 * last received for (then that QP's socket once: the look after a Send,
 * adaptive). Every call renews the CQ's lease (a
 * get_event and the poll after it are one use, dated at the get_event) and
 * takes its QPs back from the progress thread (lease.c) when it had them. */
#include "rdma/soft/cq_wait.h"

#include <sys/epoll.h>

#include "rdma/async_event.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/lease.h"
#include "rdma/soft/race.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/tx.h"

/* ---------------------------------------------------------- leases -- */

/* The lease clock: the injected one, or with the default environment the
 * coarse monotonic clock (a few ns where CLOCK_MONOTONIC costs ~100 ns on a
 * VM; it lags by at most a tick, well inside SOFT_LEASE_NS). The context's
 * coarse_res_ns (rr_coarse_res_ns, read once at open) says which: read
 * directly, without rr_coarse_now_ns's look at the environment. */
static inline __attribute__((always_inline)) uint64_t lease_now_inline(const struct soft_ctx *c)
{
	struct timespec ts;

	if (c->coarse_res_ns && clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
		return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return rr_coarse_now_ns(c->env);
}

/* lease_now_inline as a call: for every reader but soft_wait's exit (the
 * server's cq_touch per notification kept its call: inlined there it cost
 * the server ~7 instructions per Call, issue 16 part ED) */
static __attribute__((noinline)) uint64_t lease_now(const struct soft_ctx *c)
{
	return lease_now_inline(c);
}

/* A wait's deadline clock: lease_now; the deadline adds coarse_res_ns (the
 * coarse clock lags by up to its resolution), so a wait never ends early
 * and may end up to one tick (~4 ms) late. */
static uint64_t wait_now(const struct soft_ctx *c)
{
	return lease_now(c);
}

static void reclaim_one(struct soft_qp *qp, void *arg)
{
	RR_UNUSED(arg);
	rr_soft_qp_hand(qp, false);
}

/* The consumer of @q is back: its QPs leave the progress thread. */
static void cq_reclaim(struct soft_cq *q)
{
	pthread_mutex_lock(&q->ctx->lock);
	pthread_mutex_lock(&q->qlock);
	rr_soft_cq_for_each_qp(q, reclaim_one, NULL);
	pthread_mutex_unlock(&q->qlock);
	pthread_mutex_unlock(&q->ctx->lock);
	/* QPs the progress thread served need no deadline; now their CQ's
	 * lease is one */
	rr_soft_lease_check(q);
}

/* One QP of an overrun CQ to the error state (qlock held): a fast reader
 * of it is sent away, its work flushed (into the overrun ring: lost too, the
 * CQ is unusable) and its id told RPCRDMA_CM_DISCONNECTED with -EOVERFLOW
 * (the CQ error's errno of src/rdma/async_event.h, as the verbs provider's
 * IBV_EVENT_CQ_ERR). */
static void lost_fail_one(struct soft_qp *qp, void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&qp->rx_lock);
	if (qp->state == QPS_RTS || (qp->state == QPS_ERROR && !qp->rq_flushed)) {
		rr_soft_fast_quiesce(qp);
		rr_qp_set_async_event(&qp->base, RR_ASYNC_CQ_ERR); /* stats: cq_overruns */
		rr_soft_qp_fatal(qp, rr_async_action(RR_ASYNC_CQ_ERR).err, NULL);
	}
	rr_unlock(&qp->rx_lock);
}

/* Completions were lost to an overrun of @q since its consumer last looked
 * (cq.c cq_lost): every QP of @q goes to the error state, as a verbs CQ
 * error (IBV_EVENT_CQ_ERR) takes its QPs there; rpcrdma_cq_poll answers
 * -EOVERFLOW once the completions still held are taken. No lock held. */
static void cq_check_lost(struct soft_cq *q)
{
	uint64_t lost = atomic_load(&q->lost), seen = atomic_load(&q->lost_seen);

	if (lost == seen || !atomic_compare_exchange_strong(&q->lost_seen, &seen, lost))
		return;
	pthread_mutex_lock(&q->qlock);
	rr_soft_cq_for_each_qp(q, lost_fail_one, NULL);
	pthread_mutex_unlock(&q->qlock);
}

/* The consumer came back to @q: its QPs taken back from the progress
 * thread, and after an overrun to the error state. */
static inline void cq_back(struct soft_cq *q)
{
	if (RR_UNLIKELY(atomic_load(&q->handed) > 0))
		cq_reclaim(q);
	if (RR_UNLIKELY(atomic_load_explicit(&q->lost, memory_order_relaxed)))
		cq_check_lost(q);
}

/* The consumer used @q at @now (lease_now): its lease renewed, then
 * cq_back. */
static inline void cq_touch_at(struct soft_cq *q, uint64_t now)
{
	atomic_store_explicit(&q->last_use_ns, now, memory_order_relaxed);
	cq_back(q);
}

static void cq_touch(struct soft_cq *q)
{
	cq_touch_at(q, lease_now(q->ctx));
}

/* ------------------------------------------------- inline progress -- */

/* qlock held: the live QP an epoll token names, or NULL (destroyed since). */
static struct soft_qp *soft_cq_lookup(struct soft_cq *q, uint64_t tok)
{
	uint32_t slot = (uint32_t)(tok >> 32), gen = (uint32_t)tok;

	if (slot >= q->nslots || !q->slots[slot].qp || q->slots[slot].gen != gen)
		return NULL;
	return q->slots[slot].qp;
}

/* ------------------------------------------- the look after a Send -- */

/* @qp (its rx_lock held by this thread, or qlock: alive), whose receive
 * CQ is @q, was just received for by @q's consumer polling or taking an
 * event (@tok: its token in @q): the look after a Send starts from its
 * Send MSN now. Not while the looks are skipped (their end clears the
 * token: noted afresh after). tx_lock by trylock (held, another thread
 * transmits for it: no note, no look). */
static void cq_look_note(struct soft_cq *q, struct soft_qp *qp, uint64_t tok)
{
	uint32_t msn;

	if (atomic_load_explicit(&q->look_skip, memory_order_relaxed) || qp->rcq != q)
		return;
	if (!rr_trylock(&qp->tx_lock)) {
		atomic_store_explicit(&q->look_tok, 0, memory_order_relaxed);
		return;
	}
	msn = qp->tx_msn[RR_QN_SEND];
	rr_unlock(&qp->tx_lock);
	atomic_store_explicit(&q->look_msn, msn, memory_order_relaxed);
	atomic_store_explicit(&q->look_tok, tok, memory_order_relaxed);
}

/* A waiter (rpcrdma_cq_wait) received for @q's QPs: its Call went out
 * before it slept, so the poll after its next arm has nothing to look for
 * (a synchronous caller's arm and poll: no lock, no look). */
static inline void cq_look_clear(struct soft_cq *q)
{
	if (atomic_load_explicit(&q->look_tok, memory_order_relaxed))
		atomic_store_explicit(&q->look_tok, 0, memory_order_relaxed);
}

/* The look after a Send, by the poll that follows an arm of @q: when a Send
 * went out since on the QP the consumer last received for (cq_look_note),
 * that QP's socket is read once, non-blocking, in this thread (what it
 * completes goes to the ring, quietly: rr_soft_cq_push's own push, which
 * uses the arm up; the caller takes it and arms again before it sleeps),
 * as tcp:// reads its socket after its send: a Reply already there costs
 * no epoll_wait and no wake-up of the consumer's loop. Never blocks and
 * never waits for a lock (qlock, rx_lock, tx_lock by trylock); only a QP
 * that this CQ's consumer receives for (connected, in the CQ's epoll set,
 * not served by the progress thread, no fast or own reader, nothing to
 * transmit). Its epoll registration is untouched: a look only drains
 * earlier what the fd would have woken the consumer for. Adaptive
 * (SOFT_LOOK_MISSES, SOFT_LOOK_SKIP): a hit is a look that completed
 * anything (a Receive, or a Read's or Commit's Response: their send-queue
 * completions). Returns whether it read: then what it pushed is in the
 * ring, quietly (the arm used up without a notification), and the caller
 * must take it (a receive completion or any other). */
static bool cq_look(struct soft_cq *q, bool date)
{
	uint64_t tok = atomic_load_explicit(&q->look_tok, memory_order_relaxed), done;
	uint16_t skip;
	struct soft_qp *qp;
	uint32_t msn;
	bool ok, hit;

	if (!tok)
		return false;
	skip = atomic_load_explicit(&q->look_skip, memory_order_relaxed);
	if (skip) {
		atomic_store_explicit(&q->look_skip, (uint16_t)(skip - 1), memory_order_relaxed);
		if (skip == 1) /* stale by now: noted afresh at the next receive */
			atomic_store_explicit(&q->look_tok, 0, memory_order_relaxed);
		return false;
	}
	if (pthread_mutex_trylock(&q->qlock))
		return false; /* another consumer serves the CQ's sockets now */
	qp = soft_cq_lookup(q, tok);
	if (!qp || !rr_trylock(&qp->rx_lock)) {
		pthread_mutex_unlock(&q->qlock);
		return false;
	}
	ok = qp->rcq == q && qp->state == QPS_RTS && qp->cq_watched && !qp->fast_rd &&
	     !qp->own_wait && !__atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED) &&
	     rr_trylock(&qp->tx_lock);
	if (ok) {
		msn = qp->tx_msn[RR_QN_SEND];
		ok = !qp->want_out && !qp->term_pending &&
		     msn != atomic_load_explicit(&q->look_msn, memory_order_relaxed);
		rr_unlock(&qp->tx_lock);
	}
	if (!ok) {
		rr_unlock(&qp->rx_lock);
		pthread_mutex_unlock(&q->qlock);
		return false;
	}
	/* one look per Send: the next needs another */
	atomic_store_explicit(&q->look_msn, msn, memory_order_relaxed);
	/* a read is a use of the CQ: dated before it (its pushes may use up
	 * the arm, whose lease check reads the date) */
	if (date)
		atomic_store_explicit(&q->last_use_ns, lease_now(q->ctx), memory_order_relaxed);
	done = atomic_load_explicit(&qp->cq_rq, memory_order_relaxed) +
	       atomic_load_explicit(&qp->cq_sq, memory_order_relaxed);
	rr_soft_tls_cq = q;
	rr_soft_tls_waiter = false;
	rr_soft_qp_rx(qp);
	rr_soft_tls_cq = NULL;
	hit = atomic_load_explicit(&qp->cq_rq, memory_order_relaxed) +
		      atomic_load_explicit(&qp->cq_sq, memory_order_relaxed) !=
	      done;
	rr_unlock(&qp->rx_lock);
	pthread_mutex_unlock(&q->qlock);
	if (hit) {
		atomic_store_explicit(&q->look_miss, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&q->look_hits, 1, memory_order_relaxed);
	} else {
		uint16_t m = (uint16_t)(atomic_load_explicit(&q->look_miss, memory_order_relaxed) + 1);

		atomic_fetch_add_explicit(&q->look_misses, 1, memory_order_relaxed);
		if (m >= SOFT_LOOK_MISSES) {
			m = 0;
			atomic_store_explicit(&q->look_skip, SOFT_LOOK_SKIP, memory_order_relaxed);
		}
		atomic_store_explicit(&q->look_miss, m, memory_order_relaxed);
	}
	return true;
}

/* Receives / transmits on the ready sockets of @q in the calling thread:
 * epoll_wait for up to @timeout_ms (0: what is ready now). @drain consumes
 * the ring's notification too (a waiter would spin on it). Returns the
 * number of ready fds, 0, or -errno. */
static int cq_progress(struct soft_cq *q, int timeout_ms, bool drain, bool block)
{
	struct epoll_event evs[32];
	struct soft_qp *last = NULL;
	uint64_t last_tok = 0;
	int n;

	do
		n = epoll_wait(q->epfd, evs, 32, timeout_ms);
	while (n < 0 && errno == EINTR && timeout_ms == 0);
	if (n <= 0)
		return n < 0 && errno != EINTR ? -errno : 0;
	soft_race(SOFT_RACE_CQ_EPOLL, q);
	rr_soft_tls_cq = q;
	rr_soft_tls_waiter = drain; /* drain: called by rpcrdma_cq_wait */
	pthread_mutex_lock(&q->qlock);
	for (int i = 0; i < n; i++) {
		uint64_t tok = evs[i].data.u64;
		struct soft_qp *qp;

		if (tok == SOFT_TOK_RING) {
			if (drain)
				rr_cq_ring_get_event(&q->ring);
			continue;
		}
		if (tok == SOFT_TOK_WAKE) {
			rr_soft_cq_wake_drain(q);
			continue;
		}
		qp = soft_cq_lookup(q, tok);
		if (!qp)
			continue;
		if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
			if (block ? (rr_lock(&qp->rx_lock), true) : rr_trylock(&qp->rx_lock)) {
				rr_soft_qp_rx(qp);
				rr_unlock(&qp->rx_lock);
				last = qp;
				last_tok = tok;
			}
		}
		if (evs[i].events & EPOLLOUT) {
			if (block ? (rr_lock(&qp->tx_lock), true) : rr_trylock(&qp->tx_lock)) {
				rr_soft_qp_tx_locked(qp);
				rr_unlock(&qp->tx_lock);
			}
		}
	}
	if (drain) /* a waiter's */
		cq_look_clear(q);
	else if (last) /* qlock held: alive */
		cq_look_note(q, last, last_tok);
	pthread_mutex_unlock(&q->qlock);
	rr_soft_tls_cq = NULL;
	return n;
}

/* The CQ's only QP when it serves both directions of it, with its
 * rx_lock held, or NULL; without qlock: one_qp is read under a count in
 * fast_hold, which rr_soft_cq_del_qp waits out, so the QP is not freed
 * before this thread has its rx_lock (and once it has it, a destroy waits
 * for rx_lock). @busy non-NULL: only if its rx_lock is free now (else NULL
 * and *@busy set: another thread receives for it). */
static inline struct soft_qp *cq_one_hold(struct soft_cq *q, bool *busy)
{
	struct soft_qp *qp;
	bool held;

	if (!atomic_load_explicit(&q->one_qp, memory_order_relaxed))
		return NULL; /* a hint only: nothing is read through it */
	atomic_fetch_add(&q->fast_hold, 1);
	/* read after the count: a delete that did not see the count wrote
	 * one_qp before this read */
	qp = atomic_load(&q->one_qp);
	if (!qp) {
		atomic_fetch_sub(&q->fast_hold, 1);
		return NULL;
	}
	soft_race(SOFT_RACE_ONE_QP, q);
	held = busy ? rr_trylock(&qp->rx_lock)
		    : (rr_lock(&qp->rx_lock), true);
	atomic_fetch_sub(&q->fast_hold, 1);
	if (!held && busy)
		*busy = true;
	return held ? qp : NULL;
}

/* The non-blocking counterpart of cq_fast_wait for poll_cq / get_event: on
 * a CQ with one connected QP (nothing to transmit), receives with one
 * recvmsg instead of epoll_wait(0) + recvmsg. false: use cq_progress. */
static bool cq_fast_poll(struct soft_cq *q)
{
	struct soft_qp *qp;
	bool busy = false;

	if (!q->ctx->fast_wait)
		return false;
	/* its rx_lock busy (another thread receives for it): the general
	 * way, which transmits too if the QP wants to */
	qp = cq_one_hold(q, &busy);
	if (!qp)
		return false;
	/* the receive side alone: what wants EPOLLOUT goes the general way */
	if (qp->state != QPS_RTS || !qp->cq_watched ||
	    __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED)) {
		rr_unlock(&qp->rx_lock);
		return false;
	}
	if (atomic_load_explicit(&q->wake_pending, memory_order_relaxed))
		rr_soft_cq_wake_drain(q); /* nobody waits now: a count left behind */
	rr_soft_tls_cq = q;
	rr_soft_tls_waiter = false;
	rr_soft_qp_rx(qp);
	rr_soft_tls_cq = NULL;
	cq_look_note(q, qp, qp->rtok);
	rr_unlock(&qp->rx_lock);
	return true;
}

/* Fast wait (SOFT_FAST_BLOCK_MS): when the calling waiter is the only one on
 * @q, @q has one connected QP (send and receive CQ both @q) with nothing to
 * transmit and the fast wait is not off, receives for it with a blocking
 * recvmsg and returns true (completions, if any, are in the ring or, its
 * own, in @d); false when the general epoll wait must be used. */
static bool cq_fast_wait(struct soft_cq *q, struct soft_direct *d)
{
	struct soft_qp *qp = NULL;
	bool ok;

	uint64_t off = atomic_load(&q->fast_off_until);

	if (!q->ctx->fast_wait || atomic_load(&q->waiting) != 1)
		return false;
	if (off) { /* no clock read unless a cool-down was set */
		if (rr_now_ns(q->ctx->env) < off)
			return false;
		atomic_compare_exchange_strong(&q->fast_off_until, &off, 0);
	}
	/* a destroy takes the QP out of the slots and waits for fast_hold
	 * (cq_one_hold), then waits for this reader under rx_lock
	 * (rr_soft_fast_quiesce) */
	qp = cq_one_hold(q, NULL);
	if (!qp)
		return false;
	/* The transmit side's flags are read without tx_lock: one set by
	 * another thread just after this look finds fast_blocked set (it is
	 * set before the read sleeps) and turns the fast wait off; the read
	 * ends within SOFT_FAST_BLOCK_MS anyway. in_epoll cannot become true
	 * while this thread waits (the CQ is attended). */
	ok = __atomic_load_n(&qp->fast_ok, __ATOMIC_RELAXED) && qp->state == QPS_RTS &&
	     qp->cq_watched && !qp->fast_rd && qp->stage_off == qp->stage_len &&
	     !__atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST) &&
	     !__atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED) &&
	     !__atomic_load_n(&qp->term_pending, __ATOMIC_RELAXED);
	if (!ok) {
		rr_unlock(&qp->rx_lock);
		return false;
	}
	cq_look_clear(q);
	rr_soft_tls_cq = q;
	rr_soft_tls_waiter = true;
	rr_soft_tls_direct = d;
	rr_soft_qp_rx_fast(qp); /* releases rx_lock */
	rr_soft_tls_direct = NULL;
	rr_soft_tls_cq = NULL;
	return true;
}

/* ------------------------------------------------ one QP's waiter -- */

/* rx_lock held, own_wait set: whether the caller may receive for @qp
 * itself now. Connected, both its CQs the same, nobody else reading it
 * (fast_rd), nothing staged, nothing to transmit or Terminate, and not
 * served by the progress thread (own_wait was set first: the thread's
 * balance, which hands it over and then looks at own_wait, sees it, or
 * this look sees in_epoll). */
static bool qp_own_ok(struct soft_qp *qp)
{
	atomic_thread_fence(memory_order_seq_cst);
	return __atomic_load_n(&qp->fast_ok, __ATOMIC_RELAXED) && qp->state == QPS_RTS &&
	       qp->rcq == qp->scq && qp->cq_watched && !qp->fast_rd &&
	       qp->stage_off == qp->stage_len &&
	       !__atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&qp->obj.in_epoll, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&qp->term_pending, __ATOMIC_RELAXED);
}

/* rx_lock held, own_wait set: what the ring holds of @qp's completions is
 * taken into @wc (older than anything the read makes), queue by queue when
 * nobody else holds some of that queue (@seen: what the caller had from
 * the CQ). Returns the number taken, or -EAGAIN when a receive completion
 * of @qp is with another consumer of the CQ (or being pushed): the caller
 * gets it through the CQ, and must not sleep on the socket meanwhile. */
static int qp_take(struct soft_qp *qp, int n, struct rpcrdma_wc *wc, const struct rr_qp_seen *seen)
{
	struct rr_cq_ring_take t = {.qp = RR_PUB(qp, &qp->base)};
	uint64_t rq = atomic_load(&qp->cq_rq), sq = atomic_load(&qp->cq_sq);
	int got;

	/* handed out through the CQ, less what the caller had, less what
	 * this op took: what must still be in the ring */
	t.want_rq = (uint32_t)(rq - seen->rq - qp->took_rq);
	t.want_sq = (uint32_t)(sq - seen->sq - qp->took_sq);
	got = rr_cq_ring_take_qp(&qp->rcq->ring, &t, n, wc);
	if (got < 0)
		return got;
	qp->took_rq += t.took_rq;
	qp->took_sq += t.took_sq;
	if (t.held_rq != t.want_rq && got == 0)
		return -EAGAIN;
	return got;
}

/* The wait_qp op (provider.h): a caller waits for @base's completions on a
 * CQ that other QPs share and another thread may consume. What the ring
 * holds of the QP is taken first (qp_take: older); else the caller takes
 * the QP's socket out of the CQ's epoll set (the CQ's waiter is not woken
 * by it, and never waits for this thread's rx_lock), reads it in a
 * blocking read (spin, then sleep, as a fast wait: at most
 * SOFT_FAST_BLOCK_MS), and the QP's completions that reading makes go
 * straight to @wc (soft_direct with its qp: others' go to the ring,
 * notified as from any thread); then the socket goes back into the set
 * (level-triggered: what came meanwhile is seen at once). -EAGAIN when it
 * cannot (qp_own_ok, another thread in the QP's receive path, a receive
 * completion of the QP with the CQ's consumer). */
int rr_soft_wait_qp(struct rr_qp *base, int n, struct rpcrdma_wc *wc, int timeout_ms,
		    const struct rr_qp_seen *seen)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	struct soft_cq *q = qp->rcq;
	struct soft_direct d = {.q = q, .wc = wc, .n = n, .qp = RR_PUB(qp, &qp->base)};
	int got;

	if (!q->ctx->fast_wait || (timeout_ms >= 0 && timeout_ms < SOFT_FAST_BLOCK_MS))
		return -EAGAIN;
	cq_touch(q);
	if (!rr_trylock(&qp->rx_lock))
		return -EAGAIN;   /* the CQ's consumer receives for it now */
	__atomic_store_n(&qp->own_wait, true, __ATOMIC_SEQ_CST);
	if (!qp_own_ok(qp)) {
		__atomic_store_n(&qp->own_wait, false, __ATOMIC_SEQ_CST);
		rr_unlock(&qp->rx_lock);
		return -EAGAIN;
	}
	/* rx_lock held: no other thread receives for it until the read */
	got = qp_take(qp, n, wc, seen);
	if (got == 0) {
		rr_lock(&qp->tx_lock);
		rr_soft_unwatch(qp);
		rr_unlock(&qp->tx_lock);
		rr_soft_tls_direct = &d;
		(void)rr_soft_qp_rx_own(qp);
		rr_soft_tls_direct = NULL;
		got = d.got;
		/* A closer waits on fast_cv (rr_soft_fast_quiesce, before it
		 * takes tx_lock) and must get rx_lock back before it closes
		 * the socket and frees the QP: not watched again (fast_kill).
		 * A QP that failed stays out of the sets (rr_soft_qp_fatal). */
		if (!qp->fast_kill && qp->state == QPS_RTS) {
			rr_lock(&qp->tx_lock);
			rr_soft_watch(qp);
			rr_unlock(&qp->tx_lock);
		}
		atomic_fetch_add_explicit(&q->qp_waits, 1, memory_order_relaxed);
	}
	__atomic_store_n(&qp->own_wait, false, __ATOMIC_SEQ_CST);
	rr_unlock(&qp->rx_lock);
	/* its lease from now, and the progress thread told in time if it
	 * left the QP alone for this wait */
	cq_touch(q);
	rr_soft_lease_check(q);
	return got;
}

/* --------------------------------------------------------- the ops -- */

/* The ring's completions into @wc, or 0 without its lock when it is
 * empty (rr_cq_ring_pending, a sequentially consistent look): a push that
 * ended before this look began, in this thread or in another that this
 * one synchronized with since (an arm takes the ring's lock: the poll
 * after an arm sees every push before it), is seen; one that ends after
 * it is the next poll's, as it would be after a locked poll that found
 * the ring empty. An overrun is pending too (-EOVERFLOW). */
static int cq_ring_take(struct soft_cq *q, int n, struct rpcrdma_wc *wc)
{
	return rr_cq_ring_pending(&q->ring) ? rr_cq_ring_poll(&q->ring, n, wc) : 0;
}

/* Inline progress: the polling thread receives what its QPs' sockets hold
 * (one epoll_wait for any number of QPs), no thread hop. */
int rr_soft_poll_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc)
{
	struct soft_cq *q = scq_of(cq);
	bool fresh = atomic_load_explicit(&q->arm_fresh, memory_order_relaxed);
	bool used = atomic_load_explicit(&q->got_fresh, memory_order_relaxed);
	bool undated = false;
	int got;

	atomic_store_explicit(&q->arm_fresh, false, memory_order_relaxed);
	/* "get_event, then poll" is one use: the get_event's clock read
	 * dates it (the lease runs from the get_event; the transport polls
	 * right after it: one lease_now per served notification less,
	 * docs/PERFORMANCE.md "Issue 16 part CF"). "Arm, then poll" is
	 * attended by the arm until a completion uses it up (lease.c
	 * cq_attended_until): the poll after an arm reads no clock unless it
	 * uses the CQ, i.e. takes completions or reads a socket (dated then;
	 * issue 16 part FC: the server's arm and empty poll per turn read
	 * the clock for nothing). QPs to take back: a read, so that the
	 * reclaim's lease check finds the lease live. */
	if (RR_UNLIKELY(atomic_load(&q->handed) > 0) || RR_LIKELY(!(used || fresh))) {
		if (used)
			atomic_store_explicit(&q->got_fresh, false, memory_order_relaxed);
		cq_touch(q);
	} else {
		if (used)
			atomic_store_explicit(&q->got_fresh, false, memory_order_relaxed);
		undated = !used;
		if (RR_UNLIKELY(atomic_load_explicit(&q->lost, memory_order_relaxed)))
			cq_check_lost(q);
	}
	got = cq_ring_take(q, n, wc);
	if (got != 0) {
		if (undated) /* what it took is a use */
			atomic_store_explicit(&q->last_use_ns, lease_now(q->ctx), memory_order_relaxed);
		return got;
	}
	soft_race(SOFT_RACE_POLL, q);
	/* The poll that follows an arm ("arm, then poll again before
	 * waiting") takes the ring only, while the arm holds: the consumer
	 * comes back when the CQ's fd is readable (rpcrdma_cq_arm), and that
	 * epoll fd is readable while any of its sockets holds data or takes
	 * a backlog, armed or not; get_event and wait receive then, and so
	 * does any later poll (a consumer that keeps polling is served as
	 * before). That look at the sockets was a system call that, at
	 * 1,000 connections, found nothing 5 times in 6 (docs/PERFORMANCE.md
	 * "Issue 16 part BA"). But when a Send went out on the QP the
	 * consumer last received for, that QP's socket is read once (the
	 * look after a Send, cq_look: its Reply may be there already). */
	if (fresh && rr_cq_ring_armed(&q->ring))
		return cq_look(q, undated) ? cq_ring_take(q, n, wc) : 0;
	if (undated) /* the arm used up meanwhile: this poll reads the sockets */
		atomic_store_explicit(&q->last_use_ns, lease_now(q->ctx), memory_order_relaxed);
	if (!cq_fast_poll(q))
		cq_progress(q, 0, false, false);
	return cq_ring_take(q, n, wc);
}

/* ceil(left / 1 ms) >= SOFT_FAST_BLOCK_MS, i.e. left + 999999 ns >=
 * SOFT_FAST_BLOCK_MS ms, is left > this */
#define SOFT_FAST_SLICE_MIN_NS ((uint64_t)SOFT_FAST_BLOCK_MS * 1000000u - 1000000u)

/* Whether the own wait whose first look, undated (its first turn: the
 * whole timeout is left), took @got > 0 completions into @wc, an array of
 * @n, keeps them for its first fast slice: room for more, and every one a
 * Send's success (a synchronous Call's signaled Send, completed when it
 * was posted: its caller waits for the Reply, not for that). They are then
 * the fast wait's first (soft_direct.got): what the slice completes for
 * its QP follows them in the array, in their order (the ring is empty now,
 * so rr_soft_cq_direct hands it over; a push by another thread meanwhile
 * goes to the ring and ends the slice, as in any fast wait), and the wait
 * returns them all after that one slice (SOFT_FAST_BLOCK_MS at most), or
 * at once when there is no fast wait: one wait for a synchronous Call's
 * signaled Send and its Reply, not a second wait for the Reply (issue 16
 * part IB). Any other completion (an error; a Read's, Write's or
 * Commit's, which a caller may be waiting for) is returned at once, as
 * before. Out of line: a wait whose first look finds the ring empty, the
 * usual one, never calls it. */
static __attribute__((noinline)) bool wait_keeps(const struct rpcrdma_wc *wc, int got, int n)
{
	if (got >= n)
		return false;
	for (int i = 0; i < got; i++)
		if (wc[i].opcode != RPCRDMA_WC_SEND || wc[i].status != RPCRDMA_WC_SUCCESS)
			return false;
	return true;
}

/* Blocking poll: sleeps in epoll on the sockets and receives itself; a
 * lone waiter on a single-QP CQ sleeps in the QP's recvmsg instead (fast
 * wait, cq_fast_wait), in slices of SOFT_FAST_BLOCK_MS. One instance
 * for both ops (two made its callees' inlining worse: +15 instructions
 * per wait), each op a tail call. @own: the library's own wait (the
 * wait_cq_own op), whose start is dated by the first clock read it needs: none at the
 * entry unless QPs are to be taken back (their lease check needs it);
 * the first turn counts the whole timeout as left; the wait's deadline is
 * dated after a first fast slice that brought nothing, or before the
 * first epoll sleep, so such a wait may end up to one slice
 * (SOFT_FAST_BLOCK_MS) later than rr_soft_wait_cq's, never earlier. The
 * lease is the exit's read (rr_soft_wait_cq), or for the own wait an
 * undated use that the progress thread dates at its next look (lease.h
 * SOFT_USE_UNDATED): a synchronous caller whose Reply comes in its first
 * fast slice reads no clock in its wait; one whose first look finds only
 * Sends' completions keeps them for its first fast slice (wait_keeps). */
__attribute__((noinline)) static int soft_wait(struct rr_cq *cq, int n, struct rpcrdma_wc *wc,
						int timeout_ms, bool own)
{
	struct soft_cq *q = scq_of(cq);
	struct soft_direct d = {.q = q, .wc = wc, .n = n > 0 && wc ? n : 0};
	uint64_t t0 = 0, end = 0, now = 0, left = 0, use;
	bool slept = false, undated = false;
	bool dated = !own || RR_UNLIKELY(atomic_load(&q->handed) > 0);
	int got;

	atomic_store_explicit(&q->arm_fresh, false, memory_order_relaxed);
	/* one clock read serves the lease and the deadline; then one per
	 * turn at most, and one as it leaves if it slept */
	if (dated) {
		t0 = now = wait_now(q->ctx);
		cq_touch_at(q, t0);
	} else if (RR_UNLIKELY(atomic_load_explicit(&q->lost, memory_order_relaxed))) {
		/* (own) cq_back but its look at handed, just made: a QP
		 * handed over since is taken back at the loop's first turn
		 * (after waiting++) */
		cq_check_lost(q);
	}
	if (timeout_ms > 0) {
		if (dated)
			end = t0 + q->ctx->coarse_res_ns + (uint64_t)timeout_ms * 1000000u;
		else
			undated = true;
	}
	atomic_fetch_add(&q->waiting, 1);
	for (;;) {
		int ms = -1, r;

		/* A QP the progress thread serves while this thread waits: a
		 * new connection, or one handed over as this wait began (the
		 * thread's balance looks at waiting after handing; this looks
		 * at handed after waiting++: one of the two sees the other).
		 * Its thread no longer looks by itself (no tick): take it
		 * back here, one load per turn. */
		if (atomic_load(&q->handed) > 0)
			cq_reclaim(q);
		got = cq_ring_take(q, n, wc);
		if (got != 0 || (atomic_load(&q->intr) && atomic_exchange(&q->intr, 0))) {
			/* (own, first turn) kept for a fast slice: its first */
			if (!undated || got <= 0 || !wait_keeps(wc, got, n))
				break;
			d.got = got;
		}
		if (undated) {
			/* (own) the first turn: the whole timeout is left */
			left = q->ctx->coarse_res_ns + (uint64_t)timeout_ms * 1000000u;
		} else if (timeout_ms >= 0) {
			if (timeout_ms > 0 && now == 0)
				now = wait_now(q->ctx);
			if (timeout_ms == 0 || now >= end) {
				/* last look at what is ready */
				cq_progress(q, 0, true, true);
				got = rr_cq_ring_poll(&q->ring, n, wc);
				break;
			}
			left = end - now;
			now = 0;
		}
		slept = true; /* (or looked at the sockets: time may pass) */
		/* what is left, in ms rounded up, is >= SOFT_FAST_BLOCK_MS: the
		 * division only for the epoll wait's timeout */
		if ((timeout_ms < 0 || left > SOFT_FAST_SLICE_MIN_NS) && cq_fast_wait(q, &d)) {
			if (d.got) {
				/* its own completions, handed over directly (after
				 * those kept, if any: one slice only); what came
				 * after the array was full is in the ring */
				got = d.got;
				break;
			}
			if (undated) {
				/* (own) a slice that brought nothing: the wait
				 * is dated from here, its whole timeout left */
				undated = false;
				now = wait_now(q->ctx);
				end = now + q->ctx->coarse_res_ns + (uint64_t)timeout_ms * 1000000u;
			}
			continue;
		}
		if (d.got) {
			/* kept, but no fast wait: returned now */
			got = d.got;
			break;
		}
		if (undated) {
			/* (own) dated before an epoll sleep: that sleep is the
			 * timeout's, and never a second one */
			undated = false;
			now = wait_now(q->ctx);
			end = now + q->ctx->coarse_res_ns + (uint64_t)timeout_ms * 1000000u;
			now = 0;
		}
		if (timeout_ms >= 0)
			ms = (int)((left + 999999u) / 1000000u);
		r = cq_progress(q, ms, true, true);
		if (r < 0) {
			got = r;
			break;
		}
	}
	/* Leaving: the last use first (the progress thread reads waiting,
	 * then last_use_ns), then waiting. The last waiter of an unarmed CQ
	 * with QPs ends the CQ's hold: from now on only its lease keeps the
	 * QPs here, and the progress thread may be asleep without a deadline
	 * for this CQ (it counted on the waiter). What was in the ring on
	 * the first look took no time: the entry's clock read serves. The
	 * library's own wait reads no clock here: its use is undated
	 * (SOFT_USE_UNDATED, lease.h), dated by the progress thread's next
	 * look at the CQ, which that thread makes by its deadline anyway (or
	 * is woken for below); a synchronous caller's wait for one Reply
	 * reads no clock at all (issue 16 part HB). */
	if (dated && !slept)
		use = t0;
	else if (own)
		use = atomic_load_explicit(&q->last_use_ns, memory_order_relaxed) | SOFT_USE_UNDATED;
	else
		use = lease_now_inline(q->ctx);
	atomic_store_explicit(&q->last_use_ns, use, memory_order_relaxed);
	if (atomic_fetch_sub(&q->waiting, 1) == 1 &&
	    __atomic_load_n(&q->nlive, __ATOMIC_RELAXED) > 0) {
		atomic_thread_fence(memory_order_seq_cst);
		if (!rr_cq_ring_armed(&q->ring))
			rr_soft_lease_check(q);
	}
	if (atomic_load(&q->handed) > 0)
		cq_reclaim(q);
	return got;
}

int rr_soft_wait_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms)
{
	return soft_wait(cq, n, wc, timeout_ms, false);
}

int rr_soft_wait_cq_own(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms)
{
	return soft_wait(cq, n, wc, timeout_ms, true);
}

int rr_soft_arm_cq(struct rr_cq *cq, bool solicited_only)
{
	struct soft_cq *q = scq_of(cq);
	int rc;

	/* The lease renewed (a clock read) only when QPs are taken back:
	 * the reclaim's lease check must find it live, or the thread takes
	 * them again before the ring is armed. Otherwise none: an armed CQ
	 * is attended by its arm; the poll that follows it (verbs'
	 * arm-then-poll, the transport's cq_arm_once) renews the lease only
	 * when it uses the CQ (rr_soft_poll_cq), else the next use does (the
	 * get_event of the arm's notification). */
	if (RR_UNLIKELY(atomic_load(&q->handed) > 0))
		cq_touch(q);
	else
		cq_back(q);
	soft_race(SOFT_RACE_ARM, q);
	rc = rr_cq_ring_arm(&q->ring, solicited_only);
	atomic_store_explicit(&q->arm_fresh, rc == 0, memory_order_relaxed);
	return rc;
}

/* The fd woke: receive what is ready, then consume the notification. */
int rr_soft_cq_get_event(struct rr_cq *cq)
{
	struct soft_cq *q = scq_of(cq);

	atomic_store_explicit(&q->arm_fresh, false, memory_order_relaxed);
	cq_touch(q);
	atomic_store_explicit(&q->got_fresh, true, memory_order_relaxed);
	if (!cq_fast_poll(q))
		cq_progress(q, 0, false, false);
	return rr_cq_ring_get_event(&q->ring);
}
