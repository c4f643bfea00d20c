/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* One progress loop (loop.c): an epoll set with a wake-up eventfd, a heap
 * of timers and a queue of tasks posted from any thread. Whoever runs the
 * loop (a progress thread of the engine, engine.c, or the application in
 * the mode where it drives progress) dispatches ready file descriptors to
 * their sources, then the timers that are due, then the posted tasks, each
 * without the loop's lock. Everything a source, timer or task touches is
 * owned by the loop's runner: one runner at a time (rr_loop_run_once). No
 * protocol here.
 *
 * Threads: rr_loop_post, rr_loop_timer_set/_cancel and rr_loop_wake may be
 * called from any thread; rr_loop_add/_mod may too (epoll_ctl); rr_loop_del
 * and freeing what a source, timer or task points to only by the runner
 * (or before the loop runs: rr_loop_call brings a caller there). */
#ifndef RR_ENGINE_LOOP_H
#define RR_ENGINE_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct rr_loop;

/* A file descriptor watched by a loop. @fn runs on the runner with the
 * epoll events that were ready. Readiness may be spurious (a source freed
 * and its memory reused within one turn): sources do non-blocking work. */
struct rr_loop_src {
	int fd;
	uint32_t events;
	void (*fn)(struct rr_loop_src *src, uint32_t revents);
};

/* A one-shot timer on the default clock (CLOCK_MONOTONIC, rr_now_ns(NULL)).
 * Initialised once with rr_loop_timer_init (which reserves its place in the
 * heap: setting it later cannot fail), then set and cancelled at will; its
 * @fn runs on the runner once @at passed. */
struct rr_loop_timer {
	uint64_t at;
	void (*fn)(struct rr_loop_timer *t);
	uint32_t pos;               /* heap index + 1; 0: not set (loop lock) */
	bool reserved;
};

/* Work for the runner, posted from any thread. At most once in the queue:
 * posting a queued task again does nothing. */
struct rr_loop_task {
	void (*fn)(struct rr_loop_task *t);
	struct rr_loop_task *next;
	bool queued;                /* loop lock */
};

/* Creates a loop (an epoll fd and an eventfd; @with_timerfd: also a timerfd
 * kept armed to the next timer, so that the epoll fd alone says when the
 * loop has work: rr_loop_fd). 0 or -errno. */
int rr_loop_create(bool with_timerfd, struct rr_loop **out);
/* Frees @l: nothing may use it any more (its sources, timers and tasks are
 * forgotten, not run). */
void rr_loop_destroy(struct rr_loop *l);
/* The epoll fd: readable when a source, a posted task or (with the
 * timerfd) a timer wants the runner. */
int rr_loop_fd(const struct rr_loop *l);

/* Watches @fd for @events (EPOLLIN, EPOLLOUT, EPOLLONESHOT...): 0 or -errno. */
int rr_loop_add(struct rr_loop *l, struct rr_loop_src *src, int fd, uint32_t events,
		void (*fn)(struct rr_loop_src *, uint32_t));
int rr_loop_mod(struct rr_loop *l, struct rr_loop_src *src, uint32_t events);
/* Stops watching (runner only): no event of this turn reaches @src after. */
void rr_loop_del(struct rr_loop *l, struct rr_loop_src *src);

/* Reserves @t's place (0 or -ENOMEM); rr_loop_timer_fini gives it back
 * (runner, or before the loop runs). */
int rr_loop_timer_init(struct rr_loop *l, struct rr_loop_timer *t,
		       void (*fn)(struct rr_loop_timer *));
void rr_loop_timer_fini(struct rr_loop *l, struct rr_loop_timer *t);
/* Sets @t to fire at @at (rr_now_ns(NULL) clock), replacing an earlier
 * setting; wakes the loop when that is earlier than its sleep. */
void rr_loop_timer_set(struct rr_loop *l, struct rr_loop_timer *t, uint64_t at);
void rr_loop_timer_cancel(struct rr_loop *l, struct rr_loop_timer *t);

/* Queues @t for the runner and wakes it (no wake-up from the runner
 * itself: it looks at the queue before it sleeps). */
void rr_loop_post(struct rr_loop *l, struct rr_loop_task *t);
/* Removes @t from the queue if it is there. */
void rr_loop_task_cancel(struct rr_loop *l, struct rr_loop_task *t);
/* Ends the runner's current or next sleep. */
void rr_loop_wake(struct rr_loop *l);

/* One turn: sleeps up to @timeout_ms (-1: until something happens; capped
 * by the next timer) in epoll_wait, then runs what is ready: the sources,
 * the timers due, the tasks. A turn that a source or a task woke from its
 * sleep runs no timer: one that fell due during that sleep's last
 * millisecond or the sources is run by the next turn, which does not
 * sleep before it (after its sources). The clock is read once per turn at
 * most (twice after a sleep that ran out or the timerfd ended). The number
 * of sources, timers and tasks run. Only one thread at a time (the caller
 * guarantees it: engine.c). */
int rr_loop_run_once(struct rr_loop *l, int timeout_ms);
/* Tests: the runner's clock reads for its sleeps and timers so far (the
 * spin's and the timerfd's arming are not counted). By the runner, or
 * after it stopped. */
uint64_t rr_loop_clock_reads(const struct rr_loop *l);
/* Spin, then sleep (loop.c loop_spin): a turn that would sleep polls the
 * epoll set for up to @budget_ns first (0: never; the engine's progress
 * threads: rr_spin_us, the soft provider's knob). Before the loop runs,
 * or by its runner. */
void rr_loop_set_spin(struct rr_loop *l, uint64_t budget_ns);
/* The budget set above is the most; @on: each spin's budget adapts
 * (src/common/spin_adapt.c: misses and late hits halve it down to 0, honest
 * hits double it back, a probe's hit restores it) instead of the fixed
 * budget's skip and near-miss growth. Off for a new loop; the engine's
 * progress threads follow RPCRDMA_SOFT_SPIN (rr_spin_adaptive_env). */
void rr_loop_set_spin_adaptive(struct rr_loop *l, bool on);
/* Tests: the spin's clock (ns; NULL: CLOCK_MONOTONIC). It measures the
 * budget and says when a timer is due during a spin. */
void rr_loop_set_spin_clock(struct rr_loop *l, uint64_t (*now)(void *arg), void *arg);
/* What the spins did (runner's counters: read by the runner, or when it
 * no longer runs): looks at the set, budgets that ended with events after
 * an empty look (hits), with events at the first look (ready), with
 * nothing (misses), at a task or due timer (ended), turns that slept at
 * once because of the adaptation (skipped). */
struct rr_loop_spin_stats {
	uint64_t polls, hits, ready, misses, ended, skipped;
	uint64_t grown;     /* near misses that doubled the budget */
};
void rr_loop_get_spin_stats(const struct rr_loop *l, struct rr_loop_spin_stats *out);
/* The spin budget set (ns; 0: none). */
uint64_t rr_loop_spin_budget(const struct rr_loop *l);
/* The budget the next spin has: the one set, doubled by each near miss
 * (a spin that found nothing, whose sleep ended with events within 8
 * times the one set of the spin's start) up to 4 times it; back to the one set after a sleep that
 * ran out or ended later, and when the misses make turns sleep at once.
 * Runner's. */
uint64_t rr_loop_spin_budget_now(const struct rr_loop *l);
/* True on the thread running @l now. */
bool rr_loop_on_runner(const struct rr_loop *l);
/* The loop the calling thread runs now, NULL when none. */
struct rr_loop *rr_loop_current(void);

#endif
