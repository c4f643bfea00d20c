/* SPDX-License-Identifier: BSD-2-Clause */
/* The contended halves of the futex lock and condition (lock.h): sleeping
 * in and waking from futex(2) on the lock's word (mutex3 of Drepper's
 * "Futexes Are Tricky": a waiter marks the word 2, so that the unlock that
 * finds 2 wakes one) and on the condition's sequence word. */
#include "common/lock.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex_wait(void *addr, int val)
{
	/* EAGAIN (the word changed), EINTR, a spurious wake: the caller
	 * looks again */
	(void)syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(void *addr, int n)
{
	(void)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* @c: what the failed fast take found (1 or 2). */
void rr_lock_wait(struct rr_lock *l, int c)
{
	if (c != 2)
		c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	while (c != 0) {
		futex_wait(&l->v, 2);
		c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	}
}

void rr_lock_wake(struct rr_lock *l)
{
	futex_wake(&l->v, 1);
}

void rr_cond_wait(struct rr_cond *cv, struct rr_lock *l)
{
	/* read with @l held: a broadcast made under @l after the caller's
	 * look changes seq after this read, and the futex's compare sees it */
	unsigned s = atomic_load_explicit(&cv->seq, memory_order_relaxed);

	rr_unlock(l);
	futex_wait(&cv->seq, (int)s);
	/* taken as contended (the word set to 2): others woken with this one
	 * may wait for it. For the race detectors a lock as rr_lock's (what
	 * the waiter reads after its wait is ordered by @l, not by seq) */
	RR_VG_PRE_LOCK(l, 0);
	RR_TSAN_PRE_LOCK(l, 0);
	rr_lock_wait(l, 1);
	RR_TSAN_POST_LOCK(l, 0);
	RR_VG_POST_LOCK(l);
}

void rr_cond_broadcast(struct rr_cond *cv)
{
	/* (TSan: no accesses of the lock's own to check in here) */
	RR_TSAN_PRE_SIGNAL(cv);
	atomic_fetch_add_explicit(&cv->seq, 1, memory_order_release);
	futex_wake(&cv->seq, INT_MAX);
	RR_TSAN_POST_SIGNAL(cv);
}
