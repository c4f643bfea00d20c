/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's per-QP locks (rx_lock, tx_lock) and the condition a
 * fast reader's closer waits on (fast_cv): a mutex of one atomic word and a
 * broadcast-only condition of one sequence word, both sleeping in futex(2)
 * (lock.c) when contended. Uncontended, a lock and an unlock are one atomic
 * instruction each, inline; glibc's pthread_mutex_lock and _unlock cost ~55
 * instructions together, taken three times per Call or Reply
 * (docs/PERFORMANCE.md "Issue 16 part BC"). The mutex is the three-state
 * one of Drepper's "Futexes Are Tricky" (mutex3): 0 free, 1 held, 2 held
 * and maybe waited for; acquire on taking, release on leaving, as a
 * pthread mutex orders memory. Not recursive, no owner check (as the
 * default pthread mutex these replace); no timeouts; the process's own
 * (FUTEX_PRIVATE). */
#ifndef RR_SOFT_LOCK_H
#define RR_SOFT_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/common.h"

struct soft_lock {
	atomic_int v;
};

/* Broadcast-only: waiters wait for a change of seq (soft_cond_wait). */
struct soft_cond {
	atomic_uint seq;
};

#define SOFT_LOCK_INIT {0}

void soft_lock_wait(struct soft_lock *l, int c);
void soft_lock_wake(struct soft_lock *l);

static inline void soft_lock(struct soft_lock *l)
{
	int c = 0;

	if (RR_UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
								  memory_order_relaxed)))
		soft_lock_wait(l, c);
}

/* true: taken. */
static inline bool soft_trylock(struct soft_lock *l)
{
	int c = 0;

	return atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void soft_unlock(struct soft_lock *l)
{
	if (RR_UNLIKELY(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
		soft_lock_wake(l);
}

/* @l held: releases it, sleeps until a soft_cond_broadcast of @cv after
 * this call began (or spuriously: the caller looks again, in a loop), and
 * takes @l again. */
void soft_cond_wait(struct soft_cond *cv, struct soft_lock *l);
/* Wakes every waiter of @cv (with the waiters' lock held, or not). */
void soft_cond_broadcast(struct soft_cond *cv);

#endif
