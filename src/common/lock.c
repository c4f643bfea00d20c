/* SPDX-License-Identifier: BSD-2-Clause */
/* The contended halves of the futex lock and condition (lock.h): sleeping
 * in and waking from futex(2) on the lock's word (mutex3 of Drepper's
 * "Futexes Are Tricky": a waiter marks the word 2, so that the unlock that
 * finds 2 wakes one) and on the condition's sequence word, with or
 * without a deadline (FUTEX_WAIT_BITSET without FUTEX_CLOCK_REALTIME:
 * absolute on CLOCK_MONOTONIC, which a step of the wall clock does not
 * move). */
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

/* futex_wait until the absolute @abs on CLOCK_MONOTONIC (FUTEX_WAIT_BITSET
 * without FUTEX_CLOCK_REALTIME): true once the kernel found it passed. */
static bool futex_wait_until(void *addr, int val, const struct timespec *abs)
{
	return syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, abs, NULL,
		       FUTEX_BITSET_MATCH_ANY) == -1 &&
	       errno == ETIMEDOUT;
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

/* true: @abs is not later than CLOCK_MONOTONIC's now */
static bool deadline_passed(const struct timespec *abs)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return abs->tv_sec < now.tv_sec || (abs->tv_sec == now.tv_sec && abs->tv_nsec <= now.tv_nsec);
}

int rr_cond_timedwait(struct rr_cond *cv, struct rr_lock *l, const struct timespec *abs)
{
	unsigned s;
	bool timed_out = false;

	if (abs) {
		if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L)
			return -EINVAL;
		if (deadline_passed(abs))
			return -ETIMEDOUT;
	}
	/* Counted before seq is read; a broadcast reads waiters after it
	 * changes seq (all four sequentially consistent, Dekker's pattern):
	 * either this read sees the broadcast's seq, or the broadcast sees
	 * this waiter and wakes it (a wake before the sleep: the futex's
	 * compare of seq sees the change). Read with @l held: a broadcast
	 * made under @l after the caller's look changes seq after this
	 * read. */
	atomic_fetch_add_explicit(&cv->waiters, 1, memory_order_seq_cst);
	s = atomic_load_explicit(&cv->seq, memory_order_seq_cst);
	rr_unlock(l);
	if (abs)
		timed_out = futex_wait_until(&cv->seq, (int)s, abs);
	else
		futex_wait(&cv->seq, (int)s);
	atomic_fetch_sub_explicit(&cv->waiters, 1, memory_order_relaxed);
	/* taken as contended (the word set to 2): others woken with this one
	 * may wait for it. For the race detectors a lock as rr_lock's (what
	 * the waiter reads after its wait is ordered by @l, not by seq) */
	RR_VG_PRE_LOCK(l, 0);
	RR_TSAN_PRE_LOCK(l, 0);
	rr_lock_wait(l, 1);
	RR_TSAN_POST_LOCK(l, 0);
	RR_VG_POST_LOCK(l);
	return timed_out ? -ETIMEDOUT : 0;
}

void rr_cond_wait(struct rr_cond *cv, struct rr_lock *l)
{
	(void)rr_cond_timedwait(cv, l, NULL);
}

void rr_cond_broadcast(struct rr_cond *cv)
{
	/* (TSan: no accesses of the lock's own to check in here) */
	RR_TSAN_PRE_SIGNAL(cv);
	atomic_fetch_add_explicit(&cv->seq, 1, memory_order_seq_cst);
	/* nobody inside a wait: no system call (rr_cond_timedwait) */
	if (atomic_load_explicit(&cv->waiters, memory_order_seq_cst))
		futex_wake(&cv->seq, INT_MAX);
	RR_TSAN_POST_SIGNAL(cv);
}
