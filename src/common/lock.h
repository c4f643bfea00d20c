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
 * (a Receive taken, one posted again: part BP); the RDMA transport's
 * endpoint lock, condition and CM-event lock (struct tp_ep: part BV); and
 * the RPC client's lock and condition (rpc/clnt.c, taken five times per
 * asynchronous call: part CL).
 * The mutex is the three-state one of Drepper's "Futexes Are Tricky"
 * (mutex3): 0 free, 1 held, 2 held and maybe waited for; acquire on taking,
 * release on leaving, as a pthread mutex orders memory. Not recursive, no
 * owner check (as the default pthread mutex these replace); a condition's
 * wait may have a deadline (rr_cond_timedwait, on CLOCK_MONOTONIC as
 * every deadline of the library: rr_engine_deadline); the process's own
 * (FUTEX_PRIVATE).
 * Zero-filled memory is a free lock and a fresh condition.
 *   Race detectors see it as a mutex, not only as atomics: under
 * ThreadSanitizer (-fsanitize=thread, RPCRDMA_TSAN) the TSan mutex
 * annotations (a lock's order against the others, the locks held in a
 * report; its acquire and release TSan sees without them); with
 * RR_LOCK_VALGRIND (RPCRDMA_VALGRIND_LOCKS, <valgrind/helgrind.h>)
 * helgrind's mutex client requests (without them helgrind sees no order
 * at all). Neither costs anything in an ordinary build (docs/testing.md
 * "Race detectors"). */
#ifndef RR_COMMON_LOCK_H
#define RR_COMMON_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "common/common.h"

/* RR_TSAN: built with ThreadSanitizer (also used by soft/sock.c) */
#if defined(RR_LOCK_NO_ANNOTATE)
/* (a manual check of what the detectors see without: docs/testing.md) */
#elif defined(__SANITIZE_THREAD__)
#define RR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RR_TSAN 1
#endif
#endif

#if defined(RR_TSAN)
#include <sanitizer/tsan_interface.h>
#define RR_TSAN_PRE_LOCK(l, f) __tsan_mutex_pre_lock((l), (f))
#define RR_TSAN_POST_LOCK(l, f) __tsan_mutex_post_lock((l), (f), 0)
#define RR_TSAN_PRE_UNLOCK(l) ((void)__tsan_mutex_pre_unlock((l), 0))
#define RR_TSAN_POST_UNLOCK(l) __tsan_mutex_post_unlock((l), 0)
#define RR_TSAN_PRE_SIGNAL(c) __tsan_mutex_pre_signal((c), 0)
#define RR_TSAN_POST_SIGNAL(c) __tsan_mutex_post_signal((c), 0)
#define RR_TSAN_TRY __tsan_mutex_try_lock
#define RR_TSAN_TRY_FAILED (__tsan_mutex_try_lock | __tsan_mutex_try_lock_failed)
#else
#define RR_TSAN_PRE_LOCK(l, f) ((void)0)
#define RR_TSAN_POST_LOCK(l, f) ((void)0)
#define RR_TSAN_PRE_UNLOCK(l) ((void)0)
#define RR_TSAN_POST_UNLOCK(l) ((void)0)
#define RR_TSAN_PRE_SIGNAL(c) ((void)0)
#define RR_TSAN_POST_SIGNAL(c) ((void)0)
#define RR_TSAN_TRY 0
#define RR_TSAN_TRY_FAILED 0
#endif

/* helgrind only: DRD does not take these requests (docs/testing.md) */
#if defined(RR_LOCK_VALGRIND) && !defined(RR_LOCK_NO_ANNOTATE)
#include <valgrind/helgrind.h>
#define RR_VG_PRE_LOCK(l, try) VALGRIND_HG_MUTEX_LOCK_PRE((l), (try))
#define RR_VG_POST_LOCK(l) VALGRIND_HG_MUTEX_LOCK_POST(l)
#define RR_VG_PRE_UNLOCK(l) VALGRIND_HG_MUTEX_UNLOCK_PRE(l)
#define RR_VG_POST_UNLOCK(l) VALGRIND_HG_MUTEX_UNLOCK_POST(l)
#else
#define RR_VG_PRE_LOCK(l, try) ((void)0)
#define RR_VG_POST_LOCK(l) ((void)0)
#define RR_VG_PRE_UNLOCK(l) ((void)0)
#define RR_VG_POST_UNLOCK(l) ((void)0)
#endif

struct rr_lock {
	atomic_int v;
};

/* Broadcast-only: waiters wait for a change of seq (rr_cond_wait);
 * waiters counts the threads inside a wait, so that a broadcast with
 * nobody waiting makes no system call (as glibc's condition). */
struct rr_cond {
	atomic_uint seq;
	atomic_uint waiters;
};

#define RR_LOCK_INIT {0}

void rr_lock_wait(struct rr_lock *l, int c);
void rr_lock_wake(struct rr_lock *l);

static inline void rr_lock(struct rr_lock *l)
{
	int c = 0;

	RR_VG_PRE_LOCK(l, 0);
	RR_TSAN_PRE_LOCK(l, 0);
	if (RR_UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
								  memory_order_relaxed)))
		rr_lock_wait(l, c);
	RR_TSAN_POST_LOCK(l, 0);
	RR_VG_POST_LOCK(l);
}

/* true: taken. */
static inline bool rr_trylock(struct rr_lock *l)
{
	int c = 0;
	bool taken;

	RR_TSAN_PRE_LOCK(l, RR_TSAN_TRY);
	taken = atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
							memory_order_relaxed);
	RR_TSAN_POST_LOCK(l, taken ? RR_TSAN_TRY : RR_TSAN_TRY_FAILED);
	/* (helgrind: a failed try is not reported, only a lock taken) */
	if (taken) {
		RR_VG_PRE_LOCK(l, 1);
		RR_VG_POST_LOCK(l);
	}
	return taken;
}

static inline __attribute__((always_inline)) void rr_unlock(struct rr_lock *l)
{
	RR_VG_PRE_UNLOCK(l);
	RR_TSAN_PRE_UNLOCK(l);
	if (RR_UNLIKELY(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
		rr_lock_wake(l);
	RR_TSAN_POST_UNLOCK(l);
	RR_VG_POST_UNLOCK(l);
}

/* @l held: releases it, sleeps until an rr_cond_broadcast of @cv after
 * this call began (or spuriously: the caller looks again, in a loop), and
 * takes @l again. */
void rr_cond_wait(struct rr_cond *cv, struct rr_lock *l);
/* rr_cond_wait until the absolute deadline @abs on CLOCK_MONOTONIC (the
 * clock of rr_engine_deadline; NULL: none; a step of the wall clock
 * neither stretches nor cuts the wait): 0 woken (or spuriously, or by
 * a signal: look again), -ETIMEDOUT once @abs passed (at once, @l not
 * let go, when it had passed before the call), -EINVAL when @abs's
 * tv_nsec is not in [0, 1e9). @l is held again in every case. */
int rr_cond_timedwait(struct rr_cond *cv, struct rr_lock *l, const struct timespec *abs);
/* Wakes every waiter of @cv (with the waiters' lock held, or not). */
void rr_cond_broadcast(struct rr_cond *cv);

#endif
