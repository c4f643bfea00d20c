/* SPDX-License-Identifier: BSD-2-Clause */
/* A mutex of one atomic word and a broadcast-only condition of one sequence
 * word, both sleeping in futex(2) (lock.c) when contended: the soft
 * provider's per-QP locks (rx_lock, tx_lock) and the condition a fast
 * reader's closer waits on (fast_cv), the CQ ring's lock, and a shared
 * receive queue's lock. Uncontended, a lock and an unlock are one atomic
 * instruction each, inline; glibc's pthread_mutex_lock and _unlock cost ~55
 * instructions together, taken three times per Call or Reply by the soft
 * provider, about six times per call by a server's CQ ring
 * (docs/PERFORMANCE.md "Issue 16 part BC") and twice per Call by an SRQ
 * (a Receive taken, one posted again: part BP).
 * The mutex is the three-state one of Drepper's "Futexes Are Tricky"
 * (mutex3): 0 free, 1 held, 2 held and maybe waited for; acquire on taking,
 * release on leaving, as a pthread mutex orders memory. Not recursive, no
 * owner check (as the default pthread mutex these replace); no timeouts;
 * the process's own (FUTEX_PRIVATE). Zero-filled memory is a free lock and
 * a fresh condition. */
#ifndef RR_COMMON_LOCK_H
#define RR_COMMON_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/common.h"

struct rr_lock {
	atomic_int v;
};

/* Broadcast-only: waiters wait for a change of seq (rr_cond_wait). */
struct rr_cond {
	atomic_uint seq;
};

#define RR_LOCK_INIT {0}

void rr_lock_wait(struct rr_lock *l, int c);
void rr_lock_wake(struct rr_lock *l);

static inline void rr_lock(struct rr_lock *l)
{
	int c = 0;

	if (RR_UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
								  memory_order_relaxed)))
		rr_lock_wait(l, c);
}

/* true: taken. */
static inline bool rr_trylock(struct rr_lock *l)
{
	int c = 0;

	return atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void rr_unlock(struct rr_lock *l)
{
	if (RR_UNLIKELY(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
		rr_lock_wake(l);
}

/* @l held: releases it, sleeps until an rr_cond_broadcast of @cv after
 * this call began (or spuriously: the caller looks again, in a loop), and
 * takes @l again. */
void rr_cond_wait(struct rr_cond *cv, struct rr_lock *l);
/* Wakes every waiter of @cv (with the waiters' lock held, or not). */
void rr_cond_broadcast(struct rr_cond *cv);

#endif
