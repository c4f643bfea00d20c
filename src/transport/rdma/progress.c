/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* How completions reach the sessions: a port's CQ (port.c), shared by
 * connections of several endpoints, is polled by whoever holds its
 * consumer role -- its loop when the CQ's fd woke it, a caller thread
 * receiving for itself (a synchronous call), a server handler waiting for
 * its Reply's Send -- while a caller that finds it held waits for its own
 * QP alone (the provider's wait_qp), and each completion goes to its connection (the QP's
 * user context) under the connection's endpoint's lock, one endpoint lock
 * at a time (never two: no lock order to keep). The endpoints fed then run
 * their after-work (upcalls, deferred Replies) on their own loop: inline
 * when that is the draining thread's, else through their turn. The CQ's fd
 * is watched by its loop while some connection wants it (tp_cq_want);
 * found held by a caller, the loop stops watching and the caller hands the
 * drain back when it lets go (no busy wake-ups); so does any holder that
 * may have used the loop's arm up while a connection wants the CQ (a
 * wanted CQ is never left unarmed with nobody to arm it: soft then serves
 * its sockets from its own thread, into the ring, with no notification;
 * docs/transport.md "Who re-arms a wanted CQ"). Dead connections are
 * freed here too: their id destroyed (the provider flushes their work),
 * their completions drained out of the shared CQ, their QP destroyed and
 * the CQ drained of what it left, before any of their memory goes. */
#include "transport/rdma/tp_int.h"

#include <sys/epoll.h>

#define WC_BATCH 32

/* Links @ep into *@touched (its lock held). */
static void touch(struct tp_ep *ep, struct tp_ep **touched)
{
	if (ep->touched)
		return;
	ep->touched = true;
	ep->pins++;   /* not freed until its after-work ran (tp_ep_unpin) */
	ep->touched_next = *touched;
	*touched = ep;
}

/* Feeds @n completions of @wc, skipping those of QP @drop (destroyed: its
 * pointer only compared); each under its endpoint's lock. Endpoints fed
 * are linked into *@touched (pinned for their after-work), except @self
 * (may be NULL): the caller's own endpoint, which the caller keeps alive
 * and whose after-work it does itself (tp_touched_after would skip it and
 * only unpin it: one lock and a broadcast per wait saved). With @held
 * (may be NULL): when the last completion was @self's and no endpoint is
 * in *@touched, @self's lock is kept for the caller (*@held true), who
 * takes it next anyway. With @kept (may be NULL): when the endpoint fed
 * last is the only one in *@touched, its lock is kept (*@kept set) for
 * the caller's tp_touched_after, which runs its after-work next (one
 * endpoint lock at a time still: no other is in *@touched). @via_cq: the
 * completions came from the CQ, counted in their connection's seen (what
 * rr_qp_wait is told); false: from rr_qp_wait. The body is inline (one
 * source): tp_cq_wait_once feeds its batch of one through it with the
 * constants made (n 1, no @drop, no @kept), a synchronous Call's Reply
 * without the loop, the call and its frame; cq_drain its batches (the
 * serve loop's, a server's every Call and Reply: issue 16 part DJ, the
 * call, its frame and saved registers, ~25 instructions a batch); every
 * other caller through feed_ex. With @own (may be NULL: a client's
 * connection whose caller waits, tp_cq_wait_once's), @own's completions go
 * through tp_on_wc_own: its Reply's Receive straight to the requester
 * (issue 16 part ID). */
static inline __attribute__((always_inline)) void
feed_body(struct rpcrdma_wc *wc, int n, struct rpcrdma_qp *drop, struct tp_ep **touched,
	  struct tp_ep *self, bool *held, struct tp_ep **kept, bool via_cq, struct tp_conn *own)
{
	struct tp_ep *cur = NULL;

	for (int i = 0; i < n; i++) {
		struct tp_conn *cn;

		if (drop && wc[i].qp == drop)
			continue;
		cn = wc[i].qp ? rpcrdma_qp_user_ctx(wc[i].qp) : NULL;
		if (!cn)
			continue;
		if (cn->ep != cur) {
			if (cur)
				rr_unlock(&cur->lock);
			cur = cn->ep;
			rr_lock(&cur->lock);
			/* polls that found its work (stats.cq_polls) */
			atomic_store_explicit(&cur->cq_polls,
					      atomic_load_explicit(&cur->cq_polls,
								   memory_order_relaxed) + 1,
					      memory_order_relaxed);
		}
		if (via_cq) {
			if (wc[i].opcode == RPCRDMA_WC_RECV)
				cn->seen.rq++;
			else
				cn->seen.sq++;
		}
		if (own && cn == own)
			tp_on_wc_own(cn, &wc[i]);
		else
			tp_on_wc(cn, &wc[i]);
		if (cur != self)
			touch(cur, touched);
	}
	if (held && cur && cur == self && !*touched)
		*held = true;
	else if (kept && cur && cur != self && *touched == cur && !cur->touched_next)
		*kept = cur;
	else if (cur)
		rr_unlock(&cur->lock);
}

static void feed_ex(struct rpcrdma_wc *wc, int n, struct rpcrdma_qp *drop, struct tp_ep **touched,
		    struct tp_ep *self, bool *held, struct tp_ep **kept, bool via_cq,
		    struct tp_conn *own)
{
	feed_body(wc, n, drop, touched, self, held, kept, via_cq, own);
}

static void feed(struct rpcrdma_wc *wc, int n, struct rpcrdma_qp *drop, struct tp_ep **touched,
		 struct tp_ep *self, bool *held, struct tp_ep **kept)
{
	feed_ex(wc, n, drop, touched, self, held, kept, true, NULL);
}

static void cq_watch_locked(struct tp_cq *q, bool on);

/* @n completions were taken from @q: any arm of the loop's was used up
 * (the loop's arms are followed by a poll that found nothing, so whatever
 * comes later was pushed after them); unwanted, the CQ is left alone.
 * Returns whether a connection wants the loop to watch it (then the loop
 * must arm it again: nothing else will). */
static bool cq_got(struct tp_cq *q, int n)
{
	bool want;

	if (n <= 0)
		return false;
	/* the role's holder reads armed without the lock (only holders
	 * write it); not armed and not wanted: nothing to do, no lock */
	if (!q->armed && !atomic_load_explicit(&q->wanted, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&q->lock);
	if (q->armed) {
		q->armed = false;
		if (!q->want)
			cq_watch_locked(q, false);
	}
	want = q->want > 0;
	pthread_mutex_unlock(&q->lock);
	return want;
}

/* Drains @q (at most @max batches); with @got, what was taken uses up
 * the loop's arm (cq_got); with @kept (may be NULL), the last batch's
 * feed may keep its endpoint's lock (feed). Returns the completions
 * taken. */
static int cq_drain(struct tp_cq *q, struct tp_ep **touched, int max, bool got,
		    struct tp_ep **kept)
{
	struct rpcrdma_wc wc[WC_BATCH];
	int n, total = 0, batches = 0;

	if (atomic_load_explicit(&q->err, memory_order_relaxed))
		return 0;   /* failed: never polled again (tp_cq_failed) */
	/* A short batch emptied the queue: stop there rather than poll once
	 * more (on soft, a poll of an empty queue is a system call: it looks
	 * at the sockets). What arrives later makes the CQ's fd readable. */
	do {
		n = rpcrdma_cq_poll(q->cq, WC_BATCH, wc);
		if (n > 0) {
			bool last = n < WC_BATCH || batches + 1 >= max;

			feed_body(wc, n, NULL, touched, NULL, NULL, last ? kept : NULL,
				  true, NULL);
			total += n;
		}
	} while (n == WC_BATCH && ++batches < max);
	if (n < 0)   /* an error, not "empty": its connections end */
		(void)tp_cq_failed(q, n);
	if (got)
		cq_got(q, total);
	return total;
}

/* Arms @q, then drains it once: the number of completions taken after the
 * arm, or -1 when it could not be armed. With @keep (cq_serve, which
 * counts the CQ as armed again whatever the look took), what the look
 * takes leaves q->armed as it is rather than clearing it under the lock
 * for cq_serve to set it again under the lock. */
static int cq_arm_once(struct tp_cq *q, struct tp_ep **touched, bool keep, struct tp_ep **kept)
{
	int rc;

	if (atomic_load_explicit(&q->err, memory_order_relaxed))
		return -1;   /* failed: never armed again */
	rc = rpcrdma_cq_arm(q->cq, false);
	if (rc != 0) {
		(void)tp_cq_failed(q, rc);
		return -1;
	}
	/* armed: the loop must come when it fires. For cq_serve, counted
	 * armed and watched already (the previous round's): nothing to
	 * write. The loop's thread holding the role reads both without the
	 * lock: armed is written by holders only, and watched, while armed,
	 * by holders and the loop's own thread only (tp_cq_want unwatches
	 * an unarmed CQ alone). */
	if (!keep || !q->armed || !q->watched) {
		pthread_mutex_lock(&q->lock);
		q->armed = true;
		cq_watch_locked(q, true);
		pthread_mutex_unlock(&q->lock);
	}
	return cq_drain(q, touched, 8, !keep, kept);
}

bool tp_cq_arm_drain(struct tp_cq *q, struct tp_ep **touched)
{
	/* a completion that the poll's own receive pushes uses the arm up
	 * without a notification (soft: rr_cq_ring_push_ex quiet): poll again
	 * until one after the arm finds nothing */
	for (int i = 0; i < 64; i++) {
		int n = cq_arm_once(q, touched, false, NULL);

		if (n < 0)
			return false;
		if (n == 0)
			return true;
	}
	/* still busy, or not armed: served again by the loop once the caller
	 * lets go (what the last look took used the arm up; a connection
	 * that wants the CQ would otherwise find it unarmed, with nobody to
	 * arm it again) */
	atomic_store(&q->missed, true);
	return false;
}

/* tp_touched_after, with @kept's lock (may be NULL; in @touched) held by
 * the caller (feed kept it). */
static void touched_after(struct tp_ep *touched, struct tp_ep *self, struct tp_ep *kept)
{
	/* (nobody touched, the caller's own wait's usual case: no look at
	 * the thread's loop) */
	struct rr_loop *here = touched ? rr_loop_current() : NULL;

	while (touched) {
		struct tp_ep *ep = touched;
		bool inline_here = ep != self && ep->loop == here;

		if (ep != kept)
			rr_lock(&ep->lock);
		touched = ep->touched_next;
		ep->touched = false;
		ep->touched_next = NULL;
		if (inline_here && ep->ops->after && !ep->stop)
			ep->ops->after(ep);
		if (!inline_here && ep != self && !ep->stop)
			tp_ep_kick(ep);
		tp_ep_unpin(ep);
		rr_unlock(&ep->lock);
	}
}

void tp_touched_after(struct tp_ep *touched, struct tp_ep *self)
{
	touched_after(touched, self, NULL);
}

/* ---------------------------------------------------- the loop's CQs -- */

/* Rounds of one cq_serve before the loop's other sources get their turn
 * (each drains at most 8 batches): a busy CQ is served again by its task. */
#define SERVE_ROUNDS 16

/* @q failed (tp_cq_failed; its role held): it is no longer armed or
 * watched (a failed CQ's fd may stay readable: watched, the loop would
 * spin on it), and no round of cq_serve comes again. */
static bool cq_failed_stop(struct tp_cq *q)
{
	if (!atomic_load_explicit(&q->err, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&q->lock);
	q->armed = false;
	cq_watch_locked(q, false);
	pthread_mutex_unlock(&q->lock);
	return true;
}

/* Serves @q on its loop, the role held: its notification, then rounds of
 * drain and after-work (the endpoints fed run their upcalls and post their
 * Replies) until, while the CQ is wanted, an arm is followed by a look that
 * finds nothing. The arm comes after the after-work of what was drained:
 * the Send completions of the Replies the handlers just posted land in an
 * unarmed ring and are taken by the next round's poll, so they cost no
 * notification (on soft: an eventfd write, a wake-up of this same loop and
 * an eventfd read per Reply; docs/PERFORMANCE.md "Issue 16 part F"). No
 * longer wanted and its arm used up, it is no longer watched: a synchronous
 * caller's Reply wakes that caller alone, and the provider serves what
 * comes unasked (soft: its thread, once the CQ's lease ended). */
static bool loop_claim(struct tp_cq *q);

static void cq_serve(struct tp_cq *q)
{
	bool fired;

	if (cq_failed_stop(q)) {
		tp_cq_release(q);
		return;
	}
	fired = rpcrdma_cq_get_event(q->cq) == 1;
	for (int round = 0;; round++) {
		struct tp_ep *t = NULL, *kept = NULL;
		bool want, settled;
		int n;

		/* the first round takes what is there; later ones arm first
		 * (the previous round's after-work is done). One endpoint fed
		 * (a connection's Call, its Reply's Send): its lock is kept
		 * from the feed to its after-work (one pair per round less);
		 * the CQ's lock below is taken inside it, as elsewhere (an
		 * endpoint's lock, then its CQ's: tp_cq_want, tp_cq_wait_once) */
		/* What round 0 takes (or its notification) used the loop's
		 * arm up. While the CQ is wanted, the round leaves it counted
		 * armed all the same: the next round arms it again, and a
		 * holder that takes the role in the gap finds the loop told
		 * to come back (loop_claim), its own cq_got clearing the
		 * count as before. So neither this drain (cq_got) nor the
		 * next round's arm takes the CQ's lock: two pairs per Call
		 * on a busy server (docs/PERFORMANCE.md "Issue 16 part BE").
		 * Unwanted (by the look below), the count is cleared under
		 * the lock, as cq_got did. */
		n = round == 0 ? cq_drain(q, &t, 8, false, &kept)
			       : cq_arm_once(q, &t, true, &kept);
		if (n < 0) {
			bool stop = cq_failed_stop(q);

			tp_cq_release(q);
			if (t)   /* (kept is in t: none without it) */
				touched_after(t, NULL, kept);
			if (!stop)
				rr_loop_post(q->port->loop, &q->task);   /* again */
			return;
		}
		/* nothing to change: wanted (then the CQ's watch stays as it
		 * is), no arm to count as used up, none to count again that
		 * is not counted and watched already; the holder reads armed
		 * and watched without the lock (cq_arm_once), wanted is the
		 * atomic copy of want. The busy path's rounds (arm, a look
		 * that finds the next Call, its after-work) take no lock of
		 * the CQ: three pairs per round before. */
		if (!(round > 0 && n > 0 && !(q->armed && q->watched)) &&
		    atomic_load_explicit(&q->wanted, memory_order_relaxed)) {
			want = true;
			goto unlocked;
		}
		pthread_mutex_lock(&q->lock);
		if (fired || (round == 0 && n > 0))
			q->armed = false;
		if (round > 0 && n > 0) {
			/* the look after the arm may have taken only what
			 * came before it: the arm may still be set (soft: an
			 * armed CQ is its consumer's, the provider's thread
			 * leaves its QPs alone). Counted as armed, the CQ
			 * stays watched whatever happens before the next
			 * round (no longer wanted, a caller holding it). */
			q->armed = true;
			cq_watch_locked(q, true);
		}
		want = q->want > 0;
		if (!want && !q->armed)
			cq_watch_locked(q, false);
		pthread_mutex_unlock(&q->lock);
unlocked:
		fired = false;
		settled = round > 0 && n == 0;
		tp_cq_release(q);
		/* a round that fed nothing has no after-work: no call (its
		 * prologue, epilogue and return, ~15 instructions; issue 16
		 * part DJ: most Calls' serve has one such round) */
		if (t)
			touched_after(t, NULL, kept);
		/* once armed, rounds go on until a look after the arm finds
		 * nothing, wanted or not, as tp_cq_arm_drain */
		if ((!want && round == 0) || settled)
			return;
		if (round + 1 >= SERVE_ROUNDS) {
			rr_loop_post(q->port->loop, &q->task);   /* still busy: again */
			return;
		}
		/* A caller holds it: it hands the drain back when it lets go,
		 * told so (missed), as when the loop finds it held on a
		 * wake-up. Not left to the holder's own look: a wait that
		 * took nothing (a slice that ended, a freed connection with
		 * nothing left) would let go of a CQ that a connection wants,
		 * unarmed since this round's drain, that nobody arms again. */
		if (!loop_claim(q))
			return;
	}
}

/* The loop finds @q held by a caller: it stops watching its fd (which
 * would stay readable) until the caller lets go and posts q->task. */
static bool loop_claim(struct tp_cq *q)
{
	if (tp_cq_claim(q, TP_CQ_LOOP))
		return true;
	atomic_store(&q->missed, true);
	pthread_mutex_lock(&q->lock);
	cq_watch_locked(q, false);
	pthread_mutex_unlock(&q->lock);
	/* let go meanwhile: then it is ours */
	return tp_cq_claim(q, TP_CQ_LOOP);
}

bool tp_cq_serve_now(struct tp_cq *q)
{
	if (!loop_claim(q))
		return false;
	cq_serve(q);
	return true;
}

static void cq_ready(struct rr_loop_src *src, uint32_t events)
{
	struct tp_cq *q = RR_CONTAINER_OF(src, struct tp_cq, src);

	(void)events;
	if (loop_claim(q))
		cq_serve(q);
}

/* Posted when a connection came to want the CQ (arm it, look) or a
 * caller let it go after the loop found it held. */
static void cq_task(struct rr_loop_task *t)
{
	struct tp_cq *q = RR_CONTAINER_OF(t, struct tp_cq, task);

	pthread_mutex_lock(&q->lock);
	cq_watch_locked(q, q->want > 0 || q->armed);
	pthread_mutex_unlock(&q->lock);
	if (loop_claim(q))
		cq_serve(q);
}

/* q->lock held. */
static void cq_watch_locked(struct tp_cq *q, bool on)
{
	struct rr_loop *l = q->port->loop;

	if (on == q->watched)
		return;
	if (!q->added) {
		if (!on)
			return;
		if (!__atomic_load_n(&q->task.fn, __ATOMIC_RELAXED))   /* tp_cq_want */
			__atomic_store_n(&q->task.fn, cq_task, __ATOMIC_RELAXED);
		if (rr_loop_add(l, &q->src, rpcrdma_cq_fd(q->cq), EPOLLIN, cq_ready) == 0) {
			q->added = true;
			q->watched = true;
		}
		return;
	}
	if (rr_loop_mod(l, &q->src, on ? EPOLLIN : 0) == 0)
		q->watched = on;
}

void tp_cq_want(struct tp_conn *cn, bool want)
{
	struct tp_cq *q = cn->tcq;
	bool post;

	if (!q || cn->wants == want)
		return;
	cn->wants = want;
	pthread_mutex_lock(&q->lock);
	/* Set once, at the first want (before the task can be posted: by
	 * this call, or by the loop once the CQ is added), and never written
	 * again; tp_cq_release reads it without the lock, as "was it ever
	 * wanted". Atomic, relaxed: a C11 data race otherwise (the same value
	 * written again at every want, as it was, raced with that read); a
	 * release that sees it set after missed was raised orders nothing
	 * else through it (the task's run goes through the loop's lock). */
	if (!__atomic_load_n(&q->task.fn, __ATOMIC_RELAXED))
		__atomic_store_n(&q->task.fn, cq_task, __ATOMIC_RELAXED);
	if (want)
		q->want++;
	else
		q->want--;
	atomic_store_explicit(&q->wanted, q->want > 0, memory_order_relaxed);
	/* newly wanted: armed and looked at by its loop; no longer wanted:
	 * a synchronous caller's Reply wakes that caller alone */
	post = want && q->want == 1;
	if (!q->want && !q->armed)
		cq_watch_locked(q, false);
	pthread_mutex_unlock(&q->lock);
	if (post)
		rr_loop_post(q->port->loop, &q->task);
}

/* ------------------------------------------------------ caller waits -- */

/* How callers waited (rr_tp_wait_counts): process-wide statistics. */
static struct {
	_Atomic uint64_t cq, qp, qp_refused, cond;
} g_waits;

void rr_tp_wait_counts(struct rr_tp_wait_counts *out)
{
	out->cq = atomic_load(&g_waits.cq);
	out->qp = atomic_load(&g_waits.qp);
	out->qp_refused = atomic_load(&g_waits.qp_refused);
	out->cond = atomic_load(&g_waits.cond);
}

/* Another thread consumes @cn's CQ: the caller waits for its own QP's
 * completions alone, receiving them in this thread (rr_qp_wait: soft), so
 * that the callers of connections sharing one CQ receive in parallel and
 * none waits for another to hand it its Reply. The completions are this
 * endpoint's (fed as tp_cq_wait_once's, its after-work the caller's); the
 * CQ's consumer goes on serving the other connections. Called with the
 * lock held, returns with it held: the completions fed (>= 0), or -EAGAIN
 * when the provider cannot wait for the QP now (verbs has no such op; soft
 * when another thread is in the QP's receive path, or it has something to
 * transmit; and whenever the application drives progress): then the
 * caller waits as before, on the endpoint's condition variable, unless a
 * completion was fed to it meanwhile (*@fed). */
static int qp_wait(struct tp_ep *ep, struct tp_conn *cn, int ms, bool *fed)
{
	struct rpcrdma_wc wc[WC_BATCH];
	struct tp_ep *t = NULL;
	uint64_t polls = atomic_load_explicit(&ep->cq_polls, memory_order_relaxed);
	struct rr_qp_seen seen = cn->seen;   /* (under the lock) */
	bool held = false;
	int n;

	/* (when the application drives progress, a waiter runs the loop,
	 * which may serve the other end: rr_engine_cond_wait, as before) */
	if (!cn->qp || atomic_load_explicit(&cn->tcq->no_qp_wait, memory_order_relaxed) ||
	    rr_engine_app_driven())
		return -EAGAIN;
	cn->in_wait = true;   /* cn->qp stays (conn_release waits) */
	rr_unlock(&ep->lock);
	n = rr_qp_wait(cn->qp, WC_BATCH, wc, ms, &seen);
	if (n < 0 && n != -EOPNOTSUPP)   /* a failed CQ's connections end */
		(void)tp_cq_failed(cn->tcq, n);
	if (n > 0)   /* all ep's: t stays NULL */
		feed_ex(wc, n, NULL, &t, ep, &held, NULL, false, NULL);
	if (!held)
		rr_lock(&ep->lock);
	cn->in_wait = false;
	if (n == -EOPNOTSUPP)
		atomic_store_explicit(&cn->tcq->no_qp_wait, true, memory_order_relaxed);
	*fed = atomic_load_explicit(&ep->cq_polls, memory_order_relaxed) != polls;
	atomic_fetch_add_explicit(n >= 0 ? &g_waits.qp : &g_waits.qp_refused, 1,
				  memory_order_relaxed);
	return n < 0 ? -EAGAIN : n;
}

int tp_cq_wait_once(struct tp_ep *ep, struct tp_conn *cn, int ms,
		    bool (*again)(struct tp_ep *ep, struct tp_conn *cn))
{
	struct tp_cq *q = cn->tcq;
	struct rpcrdma_wc wc[WC_BATCH];
	struct tp_ep *t = NULL;
	bool locked = false;
	int n;

	if (!tp_cq_claim(q, TP_CQ_CALLER)) {
		/* another thread consumes it: we receive for our QP, or our
		 * completions come to us through it (cond broadcast by their
		 * after-work) */
		struct timespec ts;
		bool fed = false;

		n = qp_wait(ep, cn, ms, &fed);
		if (n >= 0 || fed)
			return n < 0 ? 0 : n;
		/* let go meanwhile: then it is ours */
		if (tp_cq_claim(q, TP_CQ_CALLER))
			goto claimed;
		atomic_fetch_add_explicit(&g_waits.cond, 1, memory_order_relaxed);
		tp_abs_deadline(&ts, (uint32_t)ms);
		(void)rr_engine_cond_wait(&ep->cond, &ep->lock, &ts);
		return 0;
	}
claimed:
	n = atomic_load_explicit(&q->err, memory_order_relaxed);
	if (n) {   /* failed: its error at once, no wait on it */
		tp_cq_release(q);
		return n;
	}
	atomic_fetch_add_explicit(&g_waits.cq, 1, memory_order_relaxed);
	cn->in_wait = true;
	rr_unlock(&ep->lock);
	for (int round = 0;; round++) {
		bool held = false, recv = false;

		n = rr_cq_wait_own(q->cq, WC_BATCH, wc, ms);
		if (n < 0)
			(void)tp_cq_failed(q, n);
		/* its own endpoint is not pinned: this thread holds it (its
		 * lock taken again below, or kept by feed: held), and its
		 * after-work is this caller's. A batch of one (a synchronous
		 * Call's Reply): feed's body with n 1, inline, @cn's own
		 * completion through tp_on_wc_own (@cn is a client's: only
		 * client.c waits here). */
		if (n == 1) {
			recv = wc[0].opcode == RPCRDMA_WC_RECV;
			feed_body(wc, 1, NULL, &t, ep, &held, NULL, true, cn);
		} else if (n > 0) {
			/* a batch (the soft own wait returns a signaled
			 * Send's completion with the Reply behind it: issue
			 * 16 part IB): @cn's Receives through tp_on_wc_own
			 * as well, out of line */
			feed_ex(wc, n, NULL, &t, ep, &held, NULL, true, cn);
		}
		/* The wait armed the CQ and took its notification (verbs:
		 * ibv_get_cq_event) or used up the loop's arm: while a
		 * connection wants the loop to watch the CQ (a client serving
		 * backward Calls, another's asynchronous calls), the loop arms
		 * it again once we let go. Else a message that comes unasked
		 * after this one (nfsd's CB_RECALL right after the OPEN Reply)
		 * waits for the next caller. A wait that took nothing (or
		 * failed) may have used the arm up as well: its notification
		 * consumed, the completion behind it taken by another QP's own
		 * waiter (qp_wait). Counted as a use while the CQ is wanted:
		 * one more serve by the loop after a slice that ended empty,
		 * never an arm that nobody renews (unwanted, the arm is left
		 * as it was: no connection waits for the loop). */
		if (cq_got(q, n > 0 ? n : atomic_load_explicit(&q->wanted, memory_order_relaxed)))
			atomic_store(&q->missed, true);
		/* One more wait at most, holding the CQ, when only this
		 * endpoint was fed (no other's after-work waits) and the
		 * caller says what it waits for has not come: a synchronous
		 * Call's Send completion, then its Reply, in one hold. Not
		 * asked after a lone Receive completion (a Reply: the caller's
		 * loop looks at what it completed and waits again itself if
		 * that was not its own; the caller's question there is
		 * answered "no" for a synchronous Call's usual end). The lone
		 * Receive, that usual end, is tested first: one compare
		 * rather than six (issue 16 part GD). */
		if (recv || round > 0 || n <= 0 || n == WC_BATCH || t || !again) {
			locked = held;   /* (then t is NULL) */
			break;
		}
		if (!held)
			rr_lock(&ep->lock);
		if (!again(ep, cn)) {
			locked = true;
			break;
		}
		rr_unlock(&ep->lock);
	}
	tp_cq_release(q);
	if (t)   /* t is NULL when locked */
		tp_touched_after(t, ep);
	if (!locked)
		rr_lock(&ep->lock);
	cn->in_wait = false;
	return n;
}

/* --------------------------------------------- freeing connections -- */

/* @cn is dead and unreachable: its id, its completions and its QP go
 * (the role of its CQ held, no endpoint lock), then the rest (conn.c). */
static void conn_release(struct tp_conn *cn)
{
	struct tp_cq *q = cn->tcq;
	struct tp_ep *t = NULL;
	struct rpcrdma_qp *qp = cn->qp;

	tp_cq_unlink(cn);              /* before its id goes (tp_cq_failed) */
	tp_port_id_destroy(cn);        /* the provider flushes its work */
	if (q) {
		uint32_t seen = (uint32_t)cq_drain(q, &t, 1 << 20, false, NULL);

		if (qp) {
			uint32_t last = 0;
			struct rpcrdma_wc wc[WC_BATCH];
			int n;

			/* Its completions are told apart by its pointer only
			 * (the QP is freed): no QP is created on this CQ until
			 * they are polled, which could get the same address and
			 * have its first messages dropped here (on soft even
			 * received here: a poll of an empty ring reads the
			 * CQ's sockets; docs/transport.md "A released QP's last
			 * completions"). */
			tp_cq_quiet_begin(q);
			(void)rpcrdma_qp_destroy(qp);
			cn->qp = NULL;
			/* what it pushed before it went: at most a ring's
			 * worth, in order, before anything pushed after */
			do {
				n = rpcrdma_cq_poll(q->cq, WC_BATCH, wc);
				if (n > 0) {
					feed(wc, n, qp, &t, NULL, NULL, NULL);
					last += (uint32_t)n;
				}
			} while (n > 0 && last < q->cap);
			tp_cq_quiet_end(q);
			seen += last;
		}
		tp_cq_want(cn, false);
		/* What these polls took may have used up the loop's arm, and
		 * without a notification (soft: a poll of an empty ring
		 * receives, and its own pushes are quiet): while another
		 * connection wants the CQ watched, the loop arms it again
		 * once we let go (the VM's lost message: a CQ wanted, watched,
		 * unarmed and held by nobody; docs/transport.md "Who re-arms
		 * a wanted CQ"). */
		if (cq_got(q, (int)RR_MIN(seen, (uint32_t)INT32_MAX)))
			atomic_store(&q->missed, true);
		cn->tcq = NULL;
		/* let go while reserved: the last unreserve lets the port's
		 * loop free the CQ (port_gc) as soon as it is let go, and
		 * tp_cq_release reads it after its store (ThreadSanitizer,
		 * docs/testing.md "Race detectors") */
		tp_cq_release(q);
		tp_cq_unreserve(q, cn->cqe);
	}
	tp_touched_after(t, NULL);
	tp_conn_free(cn);
}

void tp_grave_sweep(struct tp_ep *ep)
{
	struct tp_conn **pp = &ep->grave, *ready = NULL;
	bool later = false;

	while (*pp) {
		struct tp_conn *cn = *pp;
		bool role;

		tp_conn_unlend_drain(cn, NULL);   /* Replies released since */
		if (cn->in_wait || cn->lent || cn->pushing ||
		    (ep->is_server && cn->sess && rr_conn_in_progress(cn->sess))) {
			/* a caller thread sleeps on its CQ (rr_tp_client_wait),
			 * a Reply still points into a Receive buffer, a push
			 * still has its source registered in the PD, or the
			 * upper layer still holds requests of it: freed on a
			 * later sweep */
			pp = &cn->next;
			continue;
		}
		role = !cn->tcq || tp_cq_claim(cn->tcq, rr_loop_on_runner(ep->loop) ?
						    TP_CQ_LOOP : TP_CQ_CALLER);
		if (!role) {
			later = true;   /* a caller receives on its CQ now */
			pp = &cn->next;
			continue;
		}
		*pp = cn->next;
		cn->next = ready;
		ready = cn;
		for (struct tp_conn **dp = &ep->deferred; cn->dlisted && *dp; dp = &(*dp)->dnext)
			if (*dp == cn) {
				*dp = cn->dnext;
				cn->dnext = NULL;
				cn->dlisted = false;
				break;
			}
	}
	if (!ready) {
		if (later && ep->timer_ok)
			rr_loop_timer_set(ep->loop, &ep->timer, rr_now_ns(NULL) + 1000000u);
		return;
	}
	rr_unlock(&ep->lock);
	while (ready) {
		struct tp_conn *cn = ready;

		ready = cn->next;
		conn_release(cn);
		if (ep->is_server)
			rr_mem_trim_due(ep->env);   /* the loop gives it back */
	}
	rr_lock(&ep->lock);
	if (later && ep->timer_ok)
		rr_loop_timer_set(ep->loop, &ep->timer, rr_now_ns(NULL) + 1000000u);
}

void tp_conn_release(struct tp_conn *cn)
{
	bool here = rr_loop_on_runner(cn->ep->loop);

	/* a caller holds it for at most one wait slice */
	while (cn->tcq && !tp_cq_claim(cn->tcq, here ? TP_CQ_LOOP : TP_CQ_CALLER))
		rr_engine_nap();
	conn_release(cn);
}
