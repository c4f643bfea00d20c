/* SPDX-License-Identifier: BSD-2-Clause */
/* Who serves a connected QP's socket (docs/soft-iwarp.md "Threading"): the
 * consumer of its CQs while one of them is attended (polled, armed or
 * waited on within SOFT_LEASE_NS: its lease), else the progress thread.
 * This file holds the progress thread's epoll set (listeners, handshakes and
 * the QPs handed to it: struct soft_obj), its wake-up eventfd, the hand-over
 * of a QP to the thread and back (rr_soft_qp_hand), the thread's periodic
 * look that hands over and takes back (rr_soft_balance), and the check a
 * consumer that leaves a CQ makes so that the thread looks in time
 * (rr_soft_lease_check). The thread's loop itself is progress.c. */
#include "rdma/soft/lease.h"

#include <sys/epoll.h>
#include <unistd.h>

#include "rdma/soft/race.h"

/* --------------------------------- the progress thread's epoll set -- */

void rr_soft_obj_add(struct soft_ctx *c, struct soft_obj *o, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = o};

	if (o->in_epoll || o->fd < 0)
		return;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, o->fd, &ev) == 0) {
		for (uint32_t i = 0; i < c->ngone; i++)
			if (c->gone[i] == o) { /* back: its events count again */
				c->gone[i] = c->gone[--c->ngone];
				break;
			}
		/* atomic: the fast waiters read it without the lock
		 * (cq_wait.c; the fences here and there order it) */
		__atomic_store_n(&o->in_epoll, true, __ATOMIC_RELAXED);
		o->events = events;
		o->next = c->live.next;
		o->prev = &c->live;
		c->live.next->prev = o;
		c->live.next = o;
	}
}

void rr_soft_obj_mod(struct soft_ctx *c, struct soft_obj *o, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = o};

	if (!o->in_epoll)
		return;
	o->events = events;
	epoll_ctl(c->epfd, EPOLL_CTL_MOD, o->fd, &ev);
}

void rr_soft_obj_del(struct soft_ctx *c, struct soft_obj *o)
{
	if (!o->in_epoll)
		return;
	epoll_ctl(c->epfd, EPOLL_CTL_DEL, o->fd, NULL);
	__atomic_store_n(&o->in_epoll, false, __ATOMIC_RELAXED);
	o->prev->next = o->next;
	o->next->prev = o->prev;
	o->prev = o->next = NULL;
	if (c->ngone < SOFT_GONE_MAX)
		c->gone[c->ngone++] = o;
	else
		c->gone_over = true;
}

bool rr_soft_obj_live(struct soft_ctx *c, struct soft_obj *o)
{
	for (struct soft_obj *p = c->live.next; p != &c->live; p = p->next)
		if (p == o)
			return true;
	return false;
}

/* An event names an object that was in the set while the thread waited
 * (every removal is made under ctx->lock, which the thread held when it
 * forgot the departures before its wait): it is in the set still unless
 * it left since and did not come back, which c->gone says without a walk
 * over the set (one look per departure of this turn). */
bool rr_soft_obj_live_since(struct soft_ctx *c, struct soft_obj *o)
{
	if (c->gone_over)
		return rr_soft_obj_live(c, o);
	for (uint32_t i = 0; i < c->ngone; i++)
		if (c->gone[i] == o)
			return false;
	return true;
}

void rr_soft_gone_forget(struct soft_ctx *c)
{
	c->ngone = 0;
	c->gone_over = false;
}

void rr_soft_wake(struct soft_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->wake.fd, &one, sizeof(one)) < 0) {
		/* a full counter still wakes the thread */
	}
}

/* ------------------------------------------------------- hand-over -- */

/* The progress thread serves (@on) or leaves the QP's socket; ctx->lock
 * held. The CQs count how many of their QPs it serves. */
void rr_soft_qp_hand(struct soft_qp *qp, bool on)
{
	struct soft_ctx *c = qp->ctx;

	rr_lock(&qp->tx_lock);
	if (on && !qp->obj.in_epoll && qp->obj.fd >= 0 && qp->state == QPS_RTS) {
		rr_soft_obj_add(c, &qp->obj, EPOLLIN | (qp->want_out ? EPOLLOUT : 0));
		if (qp->obj.in_epoll) {
			atomic_fetch_add_explicit(&c->qp_hands, 1, memory_order_relaxed);
			atomic_fetch_add(&qp->rcq->handed, 1);
			if (qp->scq != qp->rcq)
				atomic_fetch_add(&qp->scq->handed, 1);
		}
	} else if (!on && qp->obj.in_epoll) {
		rr_soft_obj_del(c, &qp->obj);
		atomic_fetch_sub(&qp->rcq->handed, 1);
		if (qp->scq != qp->rcq)
			atomic_fetch_sub(&qp->scq->handed, 1);
	}
	rr_unlock(&qp->tx_lock);
}

void rr_soft_lease_check(struct soft_cq *q)
{
	struct soft_ctx *c = q->ctx;
	uint64_t su, end;

	/* the caller's stores (last_use_ns, waiting, the arm), then this
	 * look; the progress thread stores sleep_until, then looks at the
	 * CQs (balance): one of the two sees the other */
	atomic_thread_fence(memory_order_seq_cst);
	su = atomic_load(&c->sleep_until);
	end = (atomic_load_explicit(&q->last_use_ns, memory_order_relaxed) & ~SOFT_USE_UNDATED) +
	      SOFT_LEASE_NS + (uint64_t)SOFT_TICK_MS * 1000000u;
	if (su <= end)
		return; /* it looks in time (or a wake-up is on its way: 0) */
	if (atomic_compare_exchange_strong(&c->sleep_until, &su, 0)) {
		atomic_store(&c->bal_wanted, true);
		rr_soft_wake(c);
	}
}

/* @q's last use as of @now (the progress thread's look): an undated one
 * (SOFT_USE_UNDATED: an own wait left since) is dated @now here, once (a
 * consumer's store meanwhile wins: dated or undated again, it is seen as
 * such). */
static uint64_t cq_last_use(struct soft_cq *q, uint64_t now)
{
	uint64_t v = atomic_load(&q->last_use_ns);

	while ((v & SOFT_USE_UNDATED) && !atomic_compare_exchange_weak(&q->last_use_ns, &v, now))
		;
	return v & SOFT_USE_UNDATED ? now : v;
}

/* Until when @q is attended, as of @now: the end of its lease (a time
 * after @now); UINT64_MAX when only its consumer's leaving can end it (a
 * waiter inside, or armed, since longer than the lease: the leaving one
 * calls rr_soft_lease_check); 0: not attended (no waiter, not armed, not
 * used within SOFT_LEASE_NS). Reads waiting and the arm before last_use_ns:
 * a waiter that left stored its last use before it left. */
static uint64_t cq_attended_until(struct soft_cq *q, uint64_t now)
{
	bool held = atomic_load(&q->waiting) > 0 || rr_cq_ring_armed(&q->ring);
	uint64_t end = cq_last_use(q, now) + SOFT_LEASE_NS;

	if (end > now)
		return end;
	return held ? UINT64_MAX : 0;
}

/* Until when @qp is attended: while either of its CQs is. */
static uint64_t qp_attended_until(struct soft_qp *qp, uint64_t now)
{
	uint64_t until = cq_attended_until(qp->rcq, now);

	/* a caller receives for it (rr_soft_wait_qp): until it leaves, which
	 * renews the CQ's lease and looks (rr_soft_lease_check) */
	if (__atomic_load_n(&qp->own_wait, __ATOMIC_SEQ_CST))
		return UINT64_MAX;

	if (qp->scq != qp->rcq)
		until = RR_MAX(until, cq_attended_until(qp->scq, now));
	return until;
}

/* One connected QP of rr_soft_balance: when it must be looked at again
 * (UINT64_MAX: not before something wakes the thread). */
static uint64_t balance_qp(struct soft_qp *qp, uint64_t now)
{
	uint64_t until = qp_attended_until(qp, now);

	if ((until != 0) == qp->obj.in_epoll)
		rr_soft_qp_hand(qp, until == 0);
	if (until == 0 && qp->obj.in_epoll) {
		/* Handed (handed++), then look again: a waiter that entered
		 * meanwhile (waiting++, then it looks at handed) is seen
		 * here, or it sees handed and takes the QP back itself. No
		 * waiter is left in epoll with its QP here and no deadline to
		 * fix that. */
		soft_race(SOFT_RACE_HAND, qp);
		atomic_thread_fence(memory_order_seq_cst);
		until = qp_attended_until(qp, now);
		if (until != 0)
			rr_soft_qp_hand(qp, false);
	}
	return until != 0 && __atomic_load_n(&qp->state, __ATOMIC_RELAXED) == QPS_RTS ? until
										     : UINT64_MAX;
}

void rr_soft_balance_one(struct soft_ctx *c, struct soft_qp *qp, uint64_t now)
{
	c->bal_next = RR_MIN(c->bal_next, balance_qp(qp, now));
}

/* The general walk: every connected QP, through the list of ids. */
uint64_t rr_soft_balance_all(struct soft_ctx *c, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (struct soft_id *id = c->ids; id; id = id->next_all) {
		if (!id->qp || id->state != IDS_CONNECTED)
			continue; /* rr_soft_qp_hand checks the QP state under tx_lock */
		c->bal_visits++;
		next = RR_MIN(next, balance_qp(id->qp, now));
	}
	c->bal_next = next;
	return next;
}

/* The walk by CQ. A CQ that is attended (until @u != 0) and serves none
 * of its QPs from the progress thread (handed == 0) needs no look at its
 * QPs: each is attended at least until @u (qp_attended_until takes the
 * later of its two CQs, or UINT64_MAX while a caller receives for it) and
 * none is in the thread's set, so balance_qp would hand nothing; @u goes
 * into the deadline for them (no later than any of theirs: the thread
 * may look earlier than the general walk would, never later). Every other
 * CQ's connected QPs get balance_qp, as in the general walk (a QP of two
 * such CQs twice: the second finds nothing to change). handed only
 * changes under ctx->lock, held here. Equal in what it hands to
 * rr_soft_balance_all (tests/soft/test_lease_walk.c). */
uint64_t rr_soft_balance(struct soft_ctx *c, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (struct soft_cq *q = c->cqs; q; q = q->next_cq) {
		uint64_t u;

		if (!__atomic_load_n(&q->nlive, __ATOMIC_RELAXED))
			continue; /* no QP: nothing to hand, no deadline */
		u = cq_attended_until(q, now);
		if (u != 0 && atomic_load(&q->handed) == 0) {
			next = RR_MIN(next, u);
			continue;
		}
		pthread_mutex_lock(&q->qlock);
		for (uint32_t i = 0; i < q->nslots; i++) {
			struct soft_qp *qp = q->slots[i].qp;

			if (!qp || !qp->id || qp->id->state != IDS_CONNECTED)
				continue;
			c->bal_visits++;
			next = RR_MIN(next, balance_qp(qp, now));
		}
		pthread_mutex_unlock(&q->qlock);
	}
	c->bal_next = next;
	return next;
}
