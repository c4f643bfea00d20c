/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The process's progress engine (engine.c, public face in
 * include/rpcrdma/engine.h): a fixed set of loops (loop.h), one per
 * progress thread (default: the number of online CPUs; configurable; 0:
 * one loop and no thread, the application drives it with
 * rpcrdma_progress). Every transport endpoint and connection of the
 * process, both roles, lives on one of these loops, chosen round-robin:
 * the number of threads never depends on the number of connections.
 * Started on first use; the threads live as long as the process (a forked
 * child starts its own). */
#ifndef RR_ENGINE_ENGINE_H
#define RR_ENGINE_ENGINE_H

#include <pthread.h>
#include <time.h>

#include "common/lock.h"
#include "engine/loop.h"

/* The next loop, round-robin (starts the engine): 0 or -errno. */
int rr_engine_pick(struct rr_loop **out);
/* Loops of the started engine (0 before the start) and the i-th. */
unsigned rr_engine_nloops(void);
struct rr_loop *rr_engine_loop(unsigned i);
/* True when the application drives progress (0 threads). Read after a
 * start (the endpoints that ask exist): no lock. */
extern bool rr_engine_app_mode;
static inline bool rr_engine_app_driven(void)
{
	return rr_engine_app_mode;
}

/* Waits on @cv (@m held, as pthread_cond_timedwait; @cv made by
 * rr_engine_cond_init when @abs is given; @abs on CLOCK_MONOTONIC,
 * NULL: no limit) for something a loop does. When the
 * application drives progress, nobody else may be running the loop: the
 * waiter runs it for a slice instead (or, while another thread runs it,
 * waits for the end of that thread's turn). Returns 0 (look again) or
 * ETIMEDOUT once @abs passed. Spurious returns are normal. */
int rr_engine_wait(pthread_cond_t *cv, pthread_mutex_t *m, const struct timespec *abs);
/* rr_engine_wait on the library's own lock and condition (common/lock.h,
 * rr_cond_timedwait): 0 (look again) or -ETIMEDOUT once @abs passed. */
int rr_engine_cond_wait(struct rr_cond *cv, struct rr_lock *l, const struct timespec *abs);
/* Runs @fn(@arg) on @l's runner (at once when the caller is it) and
 * returns once it ran. */
void rr_engine_call(struct rr_loop *l, void (*fn)(void *), void *arg);
/* A short pause (about a millisecond) of a thread waiting for another to
 * let go of something; in the application-driven mode, a turn of the loop
 * instead. */
void rr_engine_nap(void);
/* An absolute CLOCK_MONOTONIC deadline @ms from now: the clock of every
 * deadline of the library (rr_engine_wait, rr_engine_cond_wait,
 * rr_cond_timedwait), which a step of the wall clock (NTP, date -s) does
 * not move: a timeout stays a duration. */
void rr_engine_deadline(struct timespec *ts, uint32_t ms);
/* Initialises @cv for waits with a deadline of rr_engine_deadline (its
 * attribute's clock CLOCK_MONOTONIC; a default pthread condition, and
 * PTHREAD_COND_INITIALIZER, read a deadline on CLOCK_REALTIME): 0 or
 * -errno (pthread_condattr_init's, _setclock's, pthread_cond_init's).
 * Every pthread condition waited on with a deadline is made by it. */
int rr_engine_cond_init(pthread_cond_t *cv);
/* The attribute rr_engine_cond_init uses (made once; NULL when it could
 * not be made): its clock is CLOCK_MONOTONIC. */
const pthread_condattr_t *rr_engine_condattr(void);

#endif
