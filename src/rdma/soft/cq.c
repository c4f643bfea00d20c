/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's completion queues: the object (the generic ring of
 * src/rdma/cq_ring.h, an epoll set over its QPs' sockets that is the CQ's
 * public fd, a wake eventfd), the slots naming its QPs, pushing a completion
 * (straight into a fast waiter's array when it is its own: soft_direct),
 * waking waiters in other threads, the interrupt latch (rr_context_interrupt)
 * and which epoll sets watch a QP's socket for input and output (want_out,
 * watch, unwatch). Polling and waiting, which receive and transmit in the
 * consumer's thread, are cq_wait.c. */
#include "rdma/soft/cq.h"

#include <sched.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma/soft/lease.h"
#include "rdma/soft/race.h"

/* Process-wide counts of soft QPs (soft.h); here because every file that
 * counts calls this one or a file below it. */
struct soft_counters soft_counters;

/* -------------------------------------------------------- wake-ups -- */

/* The CQ's wake eventfd: written for a thread that waits (epoll, or a
 * SOFT_FAST_POLL fast wait); wake_pending says a count may be left in it,
 * so that a consumer which does not look through epoll (fast poll) drains
 * it and the CQ's fd does not stay readable (a poll(2) user of that fd
 * would otherwise be woken on every turn for nothing). */
static void cq_wake(struct soft_cq *q)
{
	uint64_t one = 1;

	atomic_store(&q->wake_pending, 1);
	if (write(q->wake_efd, &one, sizeof(one)) < 0) {
		/* saturated counter: still readable */
	}
}

void rr_soft_cq_wake_drain(struct soft_cq *q)
{
	uint64_t v;

	atomic_store(&q->wake_pending, 0);
	if (read(q->wake_efd, &v, sizeof(v)) < 0) {
		/* raced with another drain */
	}
}

/* A completion or transmit need arose in a thread other than the CQ's
 * fast-waiting one: no more fast waits on @q for a while. */
static void cq_fast_off(struct soft_cq *q)
{
	atomic_store(&q->fast_off_until, rr_now_ns(q->ctx->env) + SOFT_FAST_COOLDOWN_NS);
	atomic_fetch_add(&q->fast_foreign, 1);
}

/* Another thread's event (a transmit backlog, a new QP) that a fast waiter
 * of @q asleep now does not watch: an interruptible one (SOFT_FAST_POLL) is
 * woken, a recv one is left to its timeout and the fast wait is off for a
 * while (caller: the event is stored, then this look). */
static void fast_poke(struct soft_cq *q)
{
	int b = atomic_load(&q->fast_blocked);

	if (b == SOFT_FAST_RECV) {
		cq_fast_off(q);
	} else if (b == SOFT_FAST_POLL) {
		cq_wake(q);
	}
}

/* --------------------------------------- sockets in the epoll sets -- */

static void cq_epoll(struct soft_qp *qp, int op, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.u64 = qp->rtok};

	epoll_ctl(qp->rcq->epfd, op, qp->obj.fd, &ev);
	if (qp->scq != qp->rcq) {
		ev.data.u64 = qp->stok;
		epoll_ctl(qp->scq->epfd, op, qp->obj.fd, &ev);
	}
}

/* tx_lock held (and rx_lock for watch/unwatch): every epoll set that holds
 * the socket follows want_out. */
void rr_soft_want_out(struct soft_qp *qp, bool on)
{
	uint32_t ev = EPOLLIN | (on ? EPOLLOUT : 0);

	/* Set, then look: a waiter asleep in this socket's recvmsg would not
	 * transmit (qp_rx looks at want_out after setting fast_blocked). */
	__atomic_store_n(&qp->want_out, on, __ATOMIC_SEQ_CST);
	if (on)
		fast_poke(qp->rcq);

	rr_soft_obj_mod(qp->ctx, &qp->obj, ev);
	if (qp->cq_watched)
		cq_epoll(qp, EPOLL_CTL_MOD, ev);
}

void rr_soft_watch(struct soft_qp *qp)
{
	if (qp->cq_watched || qp->obj.fd < 0)
		return;
	/* a socket a fast waiter of these CQs does not look at */
	atomic_thread_fence(memory_order_seq_cst);
	fast_poke(qp->rcq);
	if (qp->scq != qp->rcq)
		fast_poke(qp->scq);
	cq_epoll(qp, EPOLL_CTL_ADD, EPOLLIN | (qp->want_out ? EPOLLOUT : 0));
	qp->cq_watched = true;
}

void rr_soft_unwatch(struct soft_qp *qp)
{
	if (!qp->cq_watched)
		return;
	cq_epoll(qp, EPOLL_CTL_DEL, 0);
	qp->cq_watched = false;
}

/* ----------------------------------------------------- completions -- */

/* cq.h: set by cq_wait.c around its inline progress */
__thread struct soft_cq *rr_soft_tls_cq RR_SOFT_TLS;
__thread bool rr_soft_tls_waiter RR_SOFT_TLS;
__thread struct soft_direct *rr_soft_tls_direct RR_SOFT_TLS;

/* The ring was full (or overrun before): @wc is lost. Counted, said once
 * per CQ, and left for the CQ's consumer, who is woken (the ring signals
 * its fd on an overrun) and on its next poll, wait or get_event moves the
 * CQ's QPs to the error state (cq_wait.c cq_check_lost): the pusher holds
 * its QP's rx_lock or tx_lock and may take no other QP's. */
static void cq_lost(struct soft_cq *q, const struct rpcrdma_wc *wc)
{
	atomic_fetch_add_explicit(&soft_counters.cq_overflows, 1, memory_order_relaxed);
	if (atomic_fetch_add(&q->lost, 1) == 0)
		fprintf(stderr,
			"librpcrdma: soft: CQ of %u entries overran (a completion of wr_id "
			"%llu lost, status %d): its QPs go to the error state and their "
			"connections are torn down (counted as cq_overflows)\n",
			q->base.cqe, (unsigned long long)wc->wr_id, (int)wc->status);
	cq_wake(q);
}

void rr_soft_cq_push(struct soft_cq *q, const struct rpcrdma_wc *wc)
{
	bool own = rr_soft_tls_cq == q;
	struct soft_direct *d = rr_soft_tls_direct;
	_Atomic uint64_t *count = rr_soft_wc_count(wc);
	bool armed;

	/* The fast waiter's own completion, nothing older in the ring: hand
	 * it over directly (cq.h). */
	if (rr_soft_cq_direct(q, wc, count))
		return;

	/* A caller waiting for its own QP (rr_soft_wait_qp): that QP's
	 * completion goes to its array unless the ring holds an older one of
	 * the QP (a flush pushed by a closer, or the array was full): then
	 * this one follows it through the ring. */
	if (d && d->qp && d->q == q && wc->qp == d->qp && d->got < d->n &&
	    !rr_cq_ring_holds_qp(&q->ring, d->qp)) {
		d->wc[d->got++] = *wc;
		atomic_fetch_add_explicit(&q->qp_direct, 1, memory_order_relaxed);
		return;
	}
	/* through the CQ's ring: counted first, so that a one-QP waiter
	 * never counts it as its own */
	if (count)
		atomic_fetch_add_explicit(count, 1, memory_order_seq_cst);

	/* Pushed by the consumer's own inline progress: it polls the ring
	 * next (poll, wait, get_event then poll), so no fd notification. */
	armed = rr_cq_ring_armed(&q->ring);
	if (rr_cq_ring_push_ex(&q->ring, wc, own) == -EOVERFLOW)
		cq_lost(q, wc);
	soft_race(SOFT_RACE_PUSH, q);
	/* A fast waiter asleep in recvmsg sees this only when its read
	 * returns (<= SOFT_FAST_BLOCK_MS): no more fast waits for a while. */
	atomic_thread_fence(memory_order_seq_cst); /* push, then look (qp_rx) */
	if (!own && atomic_load(&q->fast_blocked) == SOFT_FAST_RECV)
		cq_fast_off(q); /* a SOFT_FAST_POLL one: the wake-up below */
	/* This push consumed the arm: without a waiter the CQ is attended
	 * only until its lease ends, and the progress thread, which counted
	 * on the arm, must look by then (the consumer may not come back). */
	if (armed && !rr_cq_ring_armed(&q->ring) && atomic_load(&q->waiting) == 0)
		rr_soft_lease_check(q);
	/* Other waiters (in epoll) are woken. */
	if (atomic_load(&q->waiting) > (own && rr_soft_tls_waiter ? 1 : 0))
		cq_wake(q);
}

/* ------------------------------------------------------ interrupts -- */

/* Latches every CQ of @c and wakes its waiters. A fast reader sees the
 * latch when its read ends (<= SOFT_FAST_BLOCK_MS; while it spins, at
 * once); @cool: the fast wait is then off on that CQ for
 * SOFT_FAST_COOLDOWN_NS, so that further interrupts meanwhile wake an
 * epoll waiter at once. */
void rr_soft_cqs_interrupt(struct soft_ctx *c, bool cool)
{
	pthread_mutex_lock(&c->cq_lock);
	for (struct soft_cq *q = c->cqs; q; q = q->next_cq) {
		atomic_store(&q->intr, 1); /* seq_cst, then look (qp_rx) */
		if (atomic_load(&q->waiting) == 0)
			continue; /* the latch ends its next wait at once */
		if (cool && atomic_load(&q->fast_blocked) == SOFT_FAST_RECV)
			cq_fast_off(q);
		/* epoll and SOFT_FAST_POLL waiters wake now */
		cq_wake(q);
	}
	pthread_mutex_unlock(&c->cq_lock);
}

int rr_soft_interrupt(struct rr_context *base)
{
	struct soft_ctx *c = RR_CONTAINER_OF(base, struct soft_ctx, base);

	/* its user is prepared for waits that end early: CM events end
	 * them from now on as well (rr_soft_chan_push) */
	atomic_store(&c->cm_intr, true);
	rr_soft_cqs_interrupt(c, true);
	return 0;
}

/* ------------------------------------------------------ the object -- */

static int cq_fds_init(struct soft_cq *q)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int r = 0;

	q->epfd = epoll_create1(EPOLL_CLOEXEC);
	q->wake_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->epfd < 0 || q->wake_efd < 0)
		r = -errno;
	ev.data.u64 = SOFT_TOK_RING;
	if (!r && epoll_ctl(q->epfd, EPOLL_CTL_ADD, rr_cq_ring_fd(&q->ring), &ev) != 0)
		r = -errno;
	ev.data.u64 = SOFT_TOK_WAKE;
	if (!r && epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->wake_efd, &ev) != 0)
		r = -errno;
	if (r) {
		if (q->epfd >= 0)
			close(q->epfd);
		if (q->wake_efd >= 0)
			close(q->wake_efd);
	}
	return r;
}

static void cq_fds_fini(struct soft_cq *q)
{
	close(q->epfd);
	close(q->wake_efd);
}

int rr_soft_create_cq(struct rr_context *ctx, const struct rpcrdma_cq_attr *attr,
		      struct rr_cq **out)
{
	struct soft_cq *q = rr_zalloc(ctx->env, sizeof(*q));
	int r;

	if (!q)
		return -ENOMEM;
	r = rr_cq_ring_init(&q->ring, ctx->env, attr->cqe ? attr->cqe : 1);
	if (r) {
		rr_free(ctx->env, q);
		return r;
	}
	r = cq_fds_init(q);
	if (r) {
		rr_cq_ring_fini(&q->ring);
		rr_free(ctx->env, q);
		return r;
	}
	pthread_mutex_init(&q->qlock, NULL);
	q->ctx = sctx(ctx);
	q->base.cqe = attr->cqe ? attr->cqe : 1;
	pthread_mutex_lock(&q->ctx->lock);   /* the lease walk reads cqs */
	pthread_mutex_lock(&q->ctx->cq_lock);
	q->next_cq = q->ctx->cqs;
	q->ctx->cqs = q;
	pthread_mutex_unlock(&q->ctx->cq_lock);
	pthread_mutex_unlock(&q->ctx->lock);
	*out = &q->base;
	return 0;
}

int rr_soft_destroy_cq(struct rr_cq *cq)
{
	struct soft_cq *q = scq_of(cq);

	pthread_mutex_lock(&q->ctx->lock);   /* the lease walk reads cqs */
	pthread_mutex_lock(&q->ctx->cq_lock);
	for (struct soft_cq **p = &q->ctx->cqs; *p; p = &(*p)->next_cq)
		if (*p == q) {
			*p = q->next_cq;
			break;
		}
	pthread_mutex_unlock(&q->ctx->cq_lock);
	pthread_mutex_unlock(&q->ctx->lock);
	cq_fds_fini(q);
	rr_cq_ring_fini(&q->ring);
	pthread_mutex_destroy(&q->qlock);
	rr_free(q->ctx->env, q->slots);
	rr_free(q->ctx->env, q);
	return 0;
}

int rr_soft_cq_fd(struct rr_cq *cq)
{
	return scq_of(cq)->epfd;
}

/* Completions @qp may have outstanding on @q at once: its send queue's
 * depth when @q is its send CQ, its receive queue's when @q is its receive
 * CQ. A flush completes these same work requests, nothing more; what the
 * consumer has not polled yet is the consumer's to bound (it posts again
 * only after polling, as on verbs). A shared receive queue's Receives are
 * not counted: its depth is shared by its QPs on any number of CQs (the
 * transport's pool sizes it to the whole CQ), and a QP's share of it is
 * bounded by its receive quota (rpcrdma_qp_recv_quota: the transport grants
 * a pooled connection its credits, and reserves that many entries), which
 * is set after the QP is made. An overrun through them is still caught
 * (cq_lost). */
static uint32_t cq_need(const struct soft_cq *q, const struct soft_qp *qp)
{
	return (qp->scq == q ? qp->sq_cap : 0) + (qp->rcq == q && !qp->srq ? qp->rq_cap : 0);
}

/* qlock held: one_qp follows the slots (soft.h). Sequentially consistent:
 * a fast waiter counts itself in fast_hold, then reads one_qp;
 * rr_soft_cq_del_qp writes it, then reads fast_hold: one of the two sees
 * the other. */
static void cq_one_set(struct soft_cq *q)
{
	struct soft_qp *qp = NULL;

	if (q->nlive == 1)
		for (uint32_t i = 0; i < q->nslots && !qp; i++)
			qp = q->slots[i].qp;
	if (qp && (qp->rcq != q || qp->scq != q))
		qp = NULL;
	atomic_store(&q->one_qp, qp);
}

int rr_soft_cq_add_qp(struct soft_cq *q, struct soft_qp *qp, uint64_t *tok)
{
	uint32_t i, need = cq_need(q, qp);
	int r = 0;

	pthread_mutex_lock(&q->qlock);
	if (atomic_load(&q->lost)) {
		r = -EIO; /* overran: unusable (rpcrdma_cq_poll) */
		goto out;
	}
	if (q->reserved + need > q->base.cqe) {
		r = -ENOSPC;
		goto out;
	}
	for (i = 0; i < q->nslots; i++)
		if (!q->slots[i].qp)
			break;
	if (i == q->nslots) {
		if (q->nslots == q->slot_cap) {
			uint32_t cap = q->slot_cap ? q->slot_cap * 2 : 8;
			struct soft_cq_slot *ns = rr_zalloc(q->ctx->env, sizeof(*ns) * cap);

			if (!ns) {
				r = -ENOMEM;
				goto out;
			}
			if (q->nslots)
				memcpy(ns, q->slots, sizeof(*ns) * q->nslots);
			rr_free(q->ctx->env, q->slots);
			q->slots = ns;
			q->slot_cap = cap;
		}
		q->nslots++;
	}
	q->slots[i].qp = qp;
	q->slots[i].gen = ++q->gen;
	q->slots[i].need = need;
	q->reserved += need;
	__atomic_store_n(&q->nlive, q->nlive + 1, __ATOMIC_RELAXED); /* read unlocked */
	*tok = (uint64_t)i << 32 | q->slots[i].gen;
	cq_one_set(q);
out:
	pthread_mutex_unlock(&q->qlock);
	return r;
}

void rr_soft_cq_del_qp(struct soft_cq *q, struct soft_qp *qp)
{
	pthread_mutex_lock(&q->qlock);
	for (uint32_t i = 0; i < q->nslots; i++)
		if (q->slots[i].qp == qp) {
			q->slots[i].qp = NULL;
			q->reserved -= q->slots[i].need;
			__atomic_store_n(&q->nlive, q->nlive - 1, __ATOMIC_RELAXED);
		}
	cq_one_set(q);
	pthread_mutex_unlock(&q->qlock);
	/* A fast waiter that read one_qp before this write may be about to
	 * lock @qp's rx_lock: it is counted in fast_hold until it has it
	 * (then this QP's destroy waits for rx_lock as before). No lock is
	 * held here, and a holder waits for nothing but rx_lock. */
	while (atomic_load(&q->fast_hold) != 0)
		sched_yield();
}

/* The QPs of @q (qlock held by the caller): for cq_reclaim. */
void rr_soft_cq_for_each_qp(struct soft_cq *q, void (*fn)(struct soft_qp *qp, void *arg), void *arg)
{
	for (uint32_t i = 0; i < q->nslots; i++)
		if (q->slots[i].qp)
			fn(q->slots[i].qp, arg);
}
