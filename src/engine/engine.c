/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The process's progress engine (engine.h, include/rpcrdma/engine.h): it
 * starts, on first use, a fixed number of loops (loop.c), each run by a
 * progress thread of its own ("rr-progress-N"), or one loop that the
 * application runs (rpcrdma_progress) when configured with 0 threads;
 * endpoints take a loop each round-robin. Waits of the library that depend
 * on progress go through rr_engine_wait, which in the application-driven
 * mode runs the loop meanwhile (one runner at a time: run_lock). A forked
 * child forgets the parent's engine (its threads do not exist there) and
 * starts its own on first use. The progress threads spin, then sleep
 * (rr_loop_set_spin), with the soft provider's budget (rr_spin_us). Every
 * deadline of the library is an absolute time on CLOCK_MONOTONIC
 * (rr_engine_deadline), and every pthread condition waited on with one is
 * made by rr_engine_cond_init: a step of the wall clock (NTP, date -s)
 * neither stretches nor cuts a wait. */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/common.h"
#include "common/spin_adapt.h"
#include "rdma/provider.h"
#include "rpcrdma/engine.h"

#define THREADS_UNSET UINT32_MAX
/* A waiter that drives an application-driven loop sleeps at most this
 * long per turn before it looks at its condition again. */
#define DRIVE_SLICE_MS 10

struct engine {
	pthread_mutex_t lock;          /* configuration and start */
	unsigned conf;                 /* THREADS_UNSET or a count (0: app) */
	bool started;
	unsigned n;                    /* loops */
	struct rr_loop **loops;
	pthread_t *threads;
	atomic_uint next;              /* round-robin */
	/* application-driven mode: one runner at a time; waiters for the end
	 * of another runner's turn sleep on run_cv */
	pthread_mutex_t run_lock;
	pthread_cond_t run_cv;         /* on CLOCK_MONOTONIC: made by start */
	bool running;
	uint64_t turns;
};

static struct engine g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.conf = THREADS_UNSET,
	.run_lock = PTHREAD_MUTEX_INITIALIZER,
	/* run_cv: start (a static initialiser cannot carry its clock) */
};
static pthread_once_t g_condattr_once = PTHREAD_ONCE_INIT;
static pthread_condattr_t g_condattr;   /* CLOCK_MONOTONIC */
static int g_condattr_rc;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

/* g.started && g.conf == 0, kept as one word for rr_engine_app_driven
 * (engine.h, inline: asked twice or more per call on the callers' paths);
 * written where g.started is. */
bool rr_engine_app_mode;

static void after_fork_child(void)
{
	/* The parent's threads are gone: a fresh engine on first use (the
	 * parent's loops are left as they are). */
	pthread_mutex_init(&g.lock, NULL);
	pthread_mutex_init(&g.run_lock, NULL);
	/* run_cv: made again by the child's start (nobody waits on it
	 * before: drive runs only in a started application-driven engine) */
	g.started = false;
	rr_engine_app_mode = false;
	g.n = 0;
	g.loops = NULL;
	g.threads = NULL;
	g.running = false;
}

static void fork_hook(void)
{
	(void)pthread_atfork(NULL, NULL, after_fork_child);
}

static unsigned default_threads(void)
{
	const char *e = getenv("RPCRDMA_PROGRESS_THREADS");
	long cpus;

	if (e && *e) {
		char *end;
		unsigned long v = strtoul(e, &end, 10);

		if (!*end)
			return (unsigned)RR_MIN(v, (unsigned long)RPCRDMA_PROGRESS_THREADS_MAX);
	}
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus > 0 ? (unsigned)RR_MIN((unsigned long)cpus,
					   (unsigned long)RPCRDMA_PROGRESS_THREADS_MAX) : 1u;
}

/* The progress threads' spin budget: RPCRDMA_SOFT_SPIN_US's (0 or "off":
 * none), else RPCRDMA_SPIN_US_DEFAULT (rr_spin_us). */
static uint64_t loop_spin_ns(void)
{
	return (uint64_t)rr_spin_us(0) * 1000u;
}

static void *progress_main(void *arg)
{
	struct rr_loop *l = arg;
	char name[16];
	unsigned i;

	for (i = 0; i < g.n && g.loops[i] != l; i++)
		;
	snprintf(name, sizeof(name), "rr-progress-%u", i);
	pthread_setname_np(pthread_self(), name);   /* top -H, gdb, perf */
	for (;;)
		(void)rr_loop_run_once(l, -1);
	return NULL;
}

/* Starts the engine (g.lock held). */
static int start(void)
{
	unsigned want = g.conf == THREADS_UNSET ? default_threads() : g.conf;
	unsigned n = want ? want : 1;
	struct rr_loop **loops;
	pthread_t *threads = NULL;
	int rc = 0;

	pthread_once(&g_fork_once, fork_hook);
	/* nobody waits on it yet: drive runs once g.started */
	rc = rr_engine_cond_init(&g.run_cv);
	if (rc)
		return rc;
	loops = rr_zalloc(NULL, sizeof(*loops) * n);
	if (want)
		threads = rr_zalloc(NULL, sizeof(*threads) * n);
	if (!loops || (want && !threads)) {
		rr_free(NULL, loops);
		rr_free(NULL, threads);
		pthread_cond_destroy(&g.run_cv);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n && !rc; i++)
		rc = rr_loop_create(want == 0, &loops[i]);
	if (rc) {
		for (unsigned i = 0; i < n; i++)
			rr_loop_destroy(loops[i]);
		rr_free(NULL, loops);
		rr_free(NULL, threads);
		pthread_cond_destroy(&g.run_cv);
		return rc;
	}
	/* The progress threads spin before they sleep (loop.c loop_spin),
	 * with the budget of RPCRDMA_SOFT_SPIN_US (read once, at the start;
	 * 0 or "off": never), else the default: at one connection on a quiet
	 * machine it saves the wake-up of each message (asynchronous NULL
	 * calls 5.7x; docs/PERFORMANCE.md "Thirteenth session: the loops'
	 * spin on a quiet machine"); on a loaded one it finds nothing and
	 * its adaptation stops it (RPCRDMA_SOFT_SPIN: adaptive by default,
	 * src/common/spin_adapt.c, or fixed). A loop serves many endpoints, so no
	 * endpoint's own spin_us applies; an application-driven loop never
	 * spins (the application chose its waits). */
	for (unsigned i = 0; want && i < n; i++) {
		rr_loop_set_spin(loops[i], loop_spin_ns());
		rr_loop_set_spin_adaptive(loops[i], rr_spin_adaptive_env());
	}
	g.loops = loops;
	g.n = n;
	g.threads = threads;
	g.conf = want;
	for (unsigned i = 0; want && i < n; i++) {
		if (pthread_create(&threads[i], NULL, progress_main, loops[i])) {
			/* the loops without a thread are never picked */
			if (i == 0) {
				pthread_cond_destroy(&g.run_cv);
				return -EAGAIN;
			}
			g.n = i;
			break;
		}
	}
	g.started = true;
	rr_engine_app_mode = want == 0;
	return 0;
}

static int ensure(void)
{
	int rc = 0;

	pthread_mutex_lock(&g.lock);
	if (!g.started)
		rc = start();
	pthread_mutex_unlock(&g.lock);
	return rc;
}

int rr_engine_pick(struct rr_loop **out)
{
	int rc = ensure();

	if (rc)
		return rc;
	*out = g.loops[atomic_fetch_add(&g.next, 1) % g.n];
	return 0;
}

unsigned rr_engine_nloops(void)
{
	unsigned n;

	pthread_mutex_lock(&g.lock);
	n = g.started ? g.n : 0;
	pthread_mutex_unlock(&g.lock);
	return n;
}

struct rr_loop *rr_engine_loop(unsigned i)
{
	struct rr_loop *l = NULL;

	pthread_mutex_lock(&g.lock);
	if (g.started && i < g.n)
		l = g.loops[i];
	pthread_mutex_unlock(&g.lock);
	return l;
}

/* Application-driven mode: one turn of the loop by this thread, or the end
 * of another runner's turn. */
static int drive(int slice_ms)
{
	struct rr_loop *l = g.loops[0];
	int n;

	pthread_mutex_lock(&g.run_lock);
	if (g.running) {
		uint64_t turn = g.turns;
		struct timespec ts;

		rr_engine_deadline(&ts, (uint32_t)(slice_ms < 0 ? 1000 : slice_ms));
		while (g.running && g.turns == turn)
			if (pthread_cond_timedwait(&g.run_cv, &g.run_lock, &ts))
				break;
		pthread_mutex_unlock(&g.run_lock);
		return 0;
	}
	g.running = true;
	pthread_mutex_unlock(&g.run_lock);
	n = rr_loop_run_once(l, slice_ms);
	pthread_mutex_lock(&g.run_lock);
	g.running = false;
	g.turns++;
	pthread_cond_broadcast(&g.run_cv);
	pthread_mutex_unlock(&g.run_lock);
	return n;
}

static void condattr_make(void)
{
	g_condattr_rc = -pthread_condattr_init(&g_condattr);
	if (!g_condattr_rc)
		g_condattr_rc = -pthread_condattr_setclock(&g_condattr, CLOCK_MONOTONIC);
}

const pthread_condattr_t *rr_engine_condattr(void)
{
	pthread_once(&g_condattr_once, condattr_make);
	return g_condattr_rc ? NULL : &g_condattr;
}

int rr_engine_cond_init(pthread_cond_t *cv)
{
	const pthread_condattr_t *a = rr_engine_condattr();

	if (!a)
		return g_condattr_rc;
	return -pthread_cond_init(cv, a);
}

void rr_engine_deadline(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void rr_engine_nap(void)
{
	struct timespec ts = {0, 1000000};

	if (rr_engine_app_driven() && !rr_loop_current()) {
		(void)drive(1);
		return;
	}
	nanosleep(&ts, NULL);
}

/* The application-driven waiter's slice of the loop: at most
 * DRIVE_SLICE_MS, less when @abs (may be NULL) comes sooner; -ETIMEDOUT
 * when @abs passed. */
static int64_t drive_slice_ms(const struct timespec *abs)
{
	struct timespec now;
	int64_t left_ms;

	if (!abs)
		return DRIVE_SLICE_MS;
	clock_gettime(CLOCK_MONOTONIC, &now);
	left_ms = (int64_t)(abs->tv_sec - now.tv_sec) * 1000 + (abs->tv_nsec - now.tv_nsec) / 1000000;
	if (left_ms <= 0)
		return -ETIMEDOUT;
	return RR_MIN(left_ms, (int64_t)DRIVE_SLICE_MS);
}

int rr_engine_wait(pthread_cond_t *cv, pthread_mutex_t *m, const struct timespec *abs)
{
	int64_t ms;

	if (!rr_engine_app_driven() || rr_loop_current())
		return abs ? pthread_cond_timedwait(cv, m, abs) : pthread_cond_wait(cv, m);
	ms = drive_slice_ms(abs);
	if (ms < 0)
		return ETIMEDOUT;
	pthread_mutex_unlock(m);
	(void)drive((int)ms);
	pthread_mutex_lock(m);
	return 0;
}

int rr_engine_cond_wait(struct rr_cond *cv, struct rr_lock *l, const struct timespec *abs)
{
	int64_t ms;

	if (!rr_engine_app_driven() || rr_loop_current())
		return rr_cond_timedwait(cv, l, abs) == -ETIMEDOUT ? -ETIMEDOUT : 0;
	ms = drive_slice_ms(abs);
	if (ms < 0)
		return -ETIMEDOUT;
	rr_unlock(l);
	(void)drive((int)ms);
	rr_lock(l);
	return 0;
}

struct call_task {
	struct rr_loop_task task;
	void (*fn)(void *);
	void *arg;
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
};

static void call_run(struct rr_loop_task *t)
{
	struct call_task *c = RR_CONTAINER_OF(t, struct call_task, task);

	c->fn(c->arg);
	pthread_mutex_lock(&c->m);
	c->done = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->m);
}

void rr_engine_call(struct rr_loop *l, void (*fn)(void *), void *arg)
{
	struct call_task c = {.task.fn = call_run, .fn = fn, .arg = arg};

	if (rr_loop_on_runner(l)) {
		fn(arg);
		return;
	}
	pthread_mutex_init(&c.m, NULL);
	pthread_cond_init(&c.cv, NULL);
	rr_loop_post(l, &c.task);
	pthread_mutex_lock(&c.m);
	while (!c.done)
		(void)rr_engine_wait(&c.cv, &c.m, NULL);
	pthread_mutex_unlock(&c.m);
	pthread_mutex_destroy(&c.m);
	pthread_cond_destroy(&c.cv);
}

/* ---- public API ---- */

RPCRDMA_API int rpcrdma_progress_threads_set(unsigned n)
{
	int rc = 0;

	pthread_mutex_lock(&g.lock);
	if (g.started)
		rc = -EBUSY;
	else
		g.conf = RR_MIN(n, RPCRDMA_PROGRESS_THREADS_MAX);
	pthread_mutex_unlock(&g.lock);
	return rc;
}

RPCRDMA_API unsigned rpcrdma_progress_threads(void)
{
	unsigned n;

	pthread_mutex_lock(&g.lock);
	if (g.started)
		n = g.conf ? g.n : 0;
	else
		n = g.conf == THREADS_UNSET ? default_threads() : g.conf;
	pthread_mutex_unlock(&g.lock);
	return n;
}

RPCRDMA_API int rpcrdma_progress(int timeout_ms)
{
	int rc = ensure();

	if (rc)
		return rc;
	if (!rr_engine_app_driven())
		return -EINVAL;
	return drive(timeout_ms);
}

RPCRDMA_API int rpcrdma_progress_fd(void)
{
	int rc = ensure();

	if (rc)
		return rc;
	if (!rr_engine_app_driven())
		return -EINVAL;
	return rr_loop_fd(g.loops[0]);
}
