/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* One progress loop (loop.h): epoll over the sources' file descriptors and
 * a wake-up eventfd, a binary min-heap of timers whose slots are reserved
 * when a timer is initialised (setting one never allocates), and a FIFO of
 * tasks posted by other threads. A turn sleeps in epoll_wait until the next
 * timer at most (not at all when tasks wait), dispatches the ready sources,
 * then the due timers, then the tasks, each without the loop's lock. It
 * reads the clock once at most, unless its sleep ran out (see
 * rr_loop_run_once). The
 * eventfd is written only when the runner may be asleep (wake_pending
 * tells a second poster it is already on its way). A turn with no timer
 * due and no task queued takes no lock: the earliest deadline (next_at)
 * and the number of tasks are also kept as atomics, written under the
 * lock, read without it; a task or timer that a look misses has woken
 * the loop (see rr_loop_run_once). With a spin budget (rr_loop_set_spin:
 * the engine's progress threads), a turn that would sleep first polls the
 * epoll set for up to the budget (loop_spin: spin, then sleep), adaptive
 * as the soft provider's fast waiter is. */
#include "engine/loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/common.h"
#include "common/spin_adapt.h"
#include "common/spin_grow.h"

#define LOOP_EVENTS 64
/* The spin's adaptation (as the soft provider's SOFT_SPIN_MISSES and
 * SOFT_SPIN_SKIP): after LOOP_SPIN_MISSES budgets in a row that found
 * nothing, the next LOOP_SPIN_SKIP turns that would spin sleep at once. */
#define LOOP_SPIN_MISSES 4
#define LOOP_SPIN_SKIP 64
/* A near miss grows the budget (src/common/spin_grow.h, the rule the soft
 * provider's fast waiter shares): up to RR_SPIN_GROW_MAX times the one set
 * (docs/PERFORMANCE.md "Issue 16 part EE"). */

struct rr_loop {
	int epfd;
	struct rr_loop_src wake;       /* eventfd */
	struct rr_loop_src tfd;        /* timerfd (fd -1 without) */
	pthread_mutex_t lock;          /* timers, tasks */
	struct rr_loop_timer **heap;
	uint32_t nheap, cap, reserved;
	uint64_t tfd_at;               /* what the timerfd is armed for (0: off) */
	_Atomic uint64_t next_at;      /* earliest timer (UINT64_MAX: none) */
	struct rr_loop_task *tasks, **tasks_tail;
	atomic_uint ntasks;
	atomic_bool wake_pending;
	atomic_bool sleeping;
	/* sources deleted during the current turn: their events are skipped
	 * (grown as needed; when that fails, the rest of the turn's events
	 * are dropped: level-triggered, they come again) */
	struct rr_loop_src **dead;
	unsigned ndead, dead_cap;
	bool dead_overflow;
	/* spin, then sleep (runner's): budget (0: never), adaptation, the
	 * last turn's sleep ran out, the clock (tests: rr_loop_set_spin_clock) */
	uint64_t spin_ns;
	struct rr_spin_grow grow;      /* the budget now: spin_ns .. x RR_SPIN_GROW_MAX */
	unsigned spin_miss, spin_skip;
	bool timed_out;
	/* the adaptive budget instead (rr_loop_set_spin_adaptive; then
	 * spin_miss and spin_skip rest) */
	bool spin_adaptive;
	struct rr_spin_adapt adapt;
	uint64_t (*spin_now)(void *arg);
	void *spin_arg;
	struct rr_loop_spin_stats spin;
	/* the runner's clock reads for its sleeps and timers (tests), and
	 * the timerfd's wake-up (tfd_read; cleared when the timers run: left
	 * set by a timer cancelled meanwhile, it costs one read later) */
	uint64_t clock_reads;
	bool tfd_fired;
};

static __thread struct rr_loop *tls_loop;

/* ------------------------------------------------------------- heap -- */

static bool before(const struct rr_loop_timer *a, const struct rr_loop_timer *b)
{
	return a->at < b->at;
}

static void heap_place(struct rr_loop *l, uint32_t i, struct rr_loop_timer *t)
{
	l->heap[i] = t;
	t->pos = i + 1;
}

static void heap_up(struct rr_loop *l, uint32_t i)
{
	struct rr_loop_timer *t = l->heap[i];

	while (i > 0) {
		uint32_t p = (i - 1) / 2;

		if (!before(t, l->heap[p]))
			break;
		heap_place(l, i, l->heap[p]);
		i = p;
	}
	heap_place(l, i, t);
}

static void heap_down(struct rr_loop *l, uint32_t i)
{
	struct rr_loop_timer *t = l->heap[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= l->nheap)
			break;
		if (c + 1 < l->nheap && before(l->heap[c + 1], l->heap[c]))
			c++;
		if (!before(l->heap[c], t))
			break;
		heap_place(l, i, l->heap[c]);
		i = c;
	}
	heap_place(l, i, t);
}

static void heap_remove(struct rr_loop *l, struct rr_loop_timer *t)
{
	uint32_t i = t->pos - 1;
	struct rr_loop_timer *last = l->heap[--l->nheap];

	t->pos = 0;
	if (last == t)
		return;
	heap_place(l, i, last);
	heap_up(l, i);
	heap_down(l, last->pos - 1);
}

/* --------------------------------------------------------- wake-ups -- */

static void wake_read(struct rr_loop_src *src, uint32_t ev)
{
	uint64_t v;

	(void)ev;
	if (read(src->fd, &v, sizeof(v)) < 0) {
		/* nothing pending */
	}
}

static void tfd_read(struct rr_loop_src *src, uint32_t ev)
{
	uint64_t v;

	(void)ev;
	RR_CONTAINER_OF(src, struct rr_loop, tfd)->tfd_fired = true;
	if (read(src->fd, &v, sizeof(v)) < 0) {
		/* disarmed meanwhile */
	}
}

void rr_loop_wake(struct rr_loop *l)
{
	uint64_t one = 1;

	if (atomic_exchange(&l->wake_pending, true))
		return;   /* a wake-up is on its way */
	if (write(l->wake.fd, &one, sizeof(one)) < 0) {
		/* saturated: readable anyway */
	}
}

/* next_at and the timerfd follow the earliest timer (lock held; after
 * every change of the heap's top, at the latest before the lock is let go:
 * between, next_at may only be early, never late). */
static void tfd_follow(struct rr_loop *l)
{
	uint64_t at = l->nheap ? l->heap[0]->at : 0;
	struct itimerspec its = {{0, 0}, {0, 0}};

	atomic_store(&l->next_at, l->nheap ? at : UINT64_MAX);
	if (l->tfd.fd < 0 || at == l->tfd_at)
		return;
	l->tfd_at = at;
	if (at) {
		uint64_t now = rr_now_ns(NULL), d = at > now ? at - now : 1;

		its.it_value.tv_sec = (time_t)(d / 1000000000u);
		its.it_value.tv_nsec = (long)(d % 1000000000u);
	}
	(void)timerfd_settime(l->tfd.fd, 0, &its, NULL);
}

/* ------------------------------------------------------------ object -- */

int rr_loop_create(bool with_timerfd, struct rr_loop **out)
{
	struct rr_loop *l = rr_zalloc(NULL, sizeof(*l));
	int rc;

	if (!l)
		return -ENOMEM;
	l->wake.fd = l->tfd.fd = -1;
	l->tasks_tail = &l->tasks;
	atomic_init(&l->next_at, UINT64_MAX);
	atomic_init(&l->ntasks, 0);
	pthread_mutex_init(&l->lock, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		goto fail;
	l->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->wake.fd < 0)
		goto fail;
	rc = rr_loop_add(l, &l->wake, l->wake.fd, EPOLLIN, wake_read);
	if (rc) {
		errno = -rc;
		goto fail;
	}
	if (with_timerfd) {
		l->tfd.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (l->tfd.fd < 0)
			goto fail;
		rc = rr_loop_add(l, &l->tfd, l->tfd.fd, EPOLLIN, tfd_read);
		if (rc) {
			errno = -rc;
			goto fail;
		}
	}
	*out = l;
	return 0;
fail:
	rc = -errno;
	rr_loop_destroy(l);
	return rc;
}

void rr_loop_destroy(struct rr_loop *l)
{
	if (!l)
		return;
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->wake.fd >= 0)
		close(l->wake.fd);
	if (l->tfd.fd >= 0)
		close(l->tfd.fd);
	pthread_mutex_destroy(&l->lock);
	rr_free(NULL, l->heap);
	rr_free(NULL, l->dead);
	rr_free(NULL, l);
}

int rr_loop_fd(const struct rr_loop *l)
{
	return l->epfd;
}

/* ---------------------------------------------------------- sources -- */

int rr_loop_add(struct rr_loop *l, struct rr_loop_src *src, int fd, uint32_t events,
		void (*fn)(struct rr_loop_src *, uint32_t))
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	src->fd = fd;
	src->events = events;
	src->fn = fn;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int rr_loop_mod(struct rr_loop *l, struct rr_loop_src *src, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	src->events = events;
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, src->fd, &ev) < 0)
		return -errno;
	return 0;
}

void rr_loop_del(struct rr_loop *l, struct rr_loop_src *src)
{
	if (src->fd >= 0)
		(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, src->fd, NULL);
	if (l->ndead == l->dead_cap) {
		unsigned ncap = l->dead_cap ? l->dead_cap * 2 : 16;
		struct rr_loop_src **nd = rr_alloc(NULL, sizeof(*nd) * ncap);

		if (!nd) {
			l->dead_overflow = true;
			return;
		}
		if (l->ndead)
			memcpy(nd, l->dead, sizeof(*nd) * l->ndead);
		rr_free(NULL, l->dead);
		l->dead = nd;
		l->dead_cap = ncap;
	}
	l->dead[l->ndead++] = src;
}

/* ----------------------------------------------------------- timers -- */

int rr_loop_timer_init(struct rr_loop *l, struct rr_loop_timer *t,
		       void (*fn)(struct rr_loop_timer *))
{
	int rc = 0;

	t->fn = fn;
	t->pos = 0;
	t->at = 0;
	pthread_mutex_lock(&l->lock);
	if (l->reserved == l->cap) {
		uint32_t ncap = l->cap ? l->cap * 2 : 16;
		struct rr_loop_timer **nh = rr_alloc(NULL, sizeof(*nh) * ncap);

		if (!nh) {
			rc = -ENOMEM;
		} else {
			if (l->nheap)
				memcpy(nh, l->heap, sizeof(*nh) * l->nheap);
			rr_free(NULL, l->heap);
			l->heap = nh;
			l->cap = ncap;
		}
	}
	if (!rc) {
		l->reserved++;
		t->reserved = true;
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void rr_loop_timer_fini(struct rr_loop *l, struct rr_loop_timer *t)
{
	if (!t->reserved)
		return;
	pthread_mutex_lock(&l->lock);
	if (t->pos)
		heap_remove(l, t);
	l->reserved--;
	t->reserved = false;
	tfd_follow(l);
	pthread_mutex_unlock(&l->lock);
}

void rr_loop_timer_set(struct rr_loop *l, struct rr_loop_timer *t, uint64_t at)
{
	bool first;

	if (!t->reserved)
		return;
	pthread_mutex_lock(&l->lock);
	if (t->pos && t->at == at) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	if (t->pos)
		heap_remove(l, t);
	t->at = at;
	heap_place(l, l->nheap++, t);
	heap_up(l, l->nheap - 1);
	first = l->heap[0] == t;
	tfd_follow(l);
	pthread_mutex_unlock(&l->lock);
	/* an earlier deadline than the one the runner sleeps for */
	if (first && atomic_load(&l->sleeping) && !rr_loop_on_runner(l))
		rr_loop_wake(l);
}

void rr_loop_timer_cancel(struct rr_loop *l, struct rr_loop_timer *t)
{
	pthread_mutex_lock(&l->lock);
	if (t->pos)
		heap_remove(l, t);
	tfd_follow(l);
	pthread_mutex_unlock(&l->lock);
}

/* ------------------------------------------------------------ tasks -- */

void rr_loop_post(struct rr_loop *l, struct rr_loop_task *t)
{
	bool wake;

	pthread_mutex_lock(&l->lock);
	if (t->queued) {
		pthread_mutex_unlock(&l->lock);
		return;
	}
	t->queued = true;
	t->next = NULL;
	*l->tasks_tail = t;
	l->tasks_tail = &t->next;
	l->ntasks++;
	wake = !rr_loop_on_runner(l);
	pthread_mutex_unlock(&l->lock);
	if (wake)
		rr_loop_wake(l);
}

void rr_loop_task_cancel(struct rr_loop *l, struct rr_loop_task *t)
{
	pthread_mutex_lock(&l->lock);
	if (t->queued) {
		struct rr_loop_task **pp = &l->tasks;

		while (*pp && *pp != t)
			pp = &(*pp)->next;
		if (*pp) {
			*pp = t->next;
			if (l->tasks_tail == &t->next)
				l->tasks_tail = pp;
			l->ntasks--;
		}
		t->queued = false;
	}
	pthread_mutex_unlock(&l->lock);
}

/* ------------------------------------------------------------- spin -- */

void rr_loop_set_spin(struct rr_loop *l, uint64_t budget_ns)
{
	l->spin_ns = budget_ns;
	l->grow = (struct rr_spin_grow){0};
	l->spin_miss = l->spin_skip = 0;
	l->adapt = (struct rr_spin_adapt){0};
}

void rr_loop_set_spin_adaptive(struct rr_loop *l, bool on)
{
	l->spin_adaptive = on;
	l->adapt = (struct rr_spin_adapt){0};
}

uint64_t rr_loop_spin_budget_now(const struct rr_loop *l)
{
	if (l->spin_adaptive)
		return rr_spin_grow_budget(&l->grow, rr_spin_adapt_budget(&l->adapt, l->spin_ns));
	return rr_spin_grow_budget(&l->grow, l->spin_ns);
}

void rr_loop_set_spin_clock(struct rr_loop *l, uint64_t (*now)(void *arg), void *arg)
{
	l->spin_now = now;
	l->spin_arg = arg;
}

uint64_t rr_loop_spin_budget(const struct rr_loop *l)
{
	return l->spin_ns;
}

void rr_loop_get_spin_stats(const struct rr_loop *l, struct rr_loop_spin_stats *out)
{
	*out = l->spin;
}

uint64_t rr_loop_clock_reads(const struct rr_loop *l)
{
	return l->clock_reads;
}

static uint64_t spin_clock(struct rr_loop *l)
{
	return l->spin_now ? l->spin_now(l->spin_arg) : rr_now_ns(NULL);
}

/* Work for the runner without a look at the epoll set: a task queued (one
 * posted by the runner itself writes no eventfd) or a timer due. */
static bool spin_work(struct rr_loop *l, uint64_t now)
{
	return atomic_load(&l->ntasks) || atomic_load(&l->next_at) <= now;
}

/* Spin, then sleep: before a turn that would sleep (@timeout_ms not 0),
 * polls the epoll set (epoll_wait with timeout 0; no sched_yield between
 * looks: measured 3-6x slower on a loaded machine, docs/PERFORMANCE.md
 * "Issue 16 part BO") for up to the budget, capped by @timeout_ms. What it saves is the wake-up of a
 * sleeping thread, on this VM ~20-25 us when it comes from the other CPU:
 * at one connection every message paid it (docs/PERFORMANCE.md "Issue 16
 * part BO"). Returns the events found (> 0), or 0: sleep as before. Never
 * spins while a task waits or a timer is due, and stops at once when one
 * does (a task posted by another thread makes the set readable; one the
 * runner posted, or a timer, is seen by spin_work), so a spin never
 * delays either. Adaptive: a budget that found nothing is a miss; after
 * LOOP_SPIN_MISSES in a row, LOOP_SPIN_SKIP turns sleep at once; only a
 * hit (events after a look that found none) resets the count, and events
 * there at the first look are neither (spin.ready). A near miss grows the
 * budget (loop_spin_after). A turn after a sleep that ran out does not
 * spin (the loop is idle, or waits for a timer). With the adaptive budget
 * (rr_loop_set_spin_adaptive) src/common/spin_adapt.c's rule replaces the
 * count and the skip (misses and late hits halve the budget down to 0, a
 * probe's hit restores it); a near miss grows it as before, and a halving
 * sets the growth back. */
static int loop_spin(struct rr_loop *l, struct epoll_event *evs, int timeout_ms)
{
	uint64_t budget = rr_spin_grow_budget(&l->grow, l->spin_ns), t0, now;
	int n;

	if (l->timed_out)
		return 0;
	if (l->spin_adaptive) {
		/* the adaptive budget, grown by near misses as the fixed one */
		budget = rr_spin_grow_budget(&l->grow, rr_spin_adapt_begin(&l->adapt, l->spin_ns));
		if (!budget) { /* backed off: sleeps at once */
			l->spin.skipped++;
			return 0;
		}
	} else if (l->spin_skip) {
		l->spin_skip--;
		l->spin.skipped++;
		return 0;
	}
	if (timeout_ms > 0 && budget > (uint64_t)timeout_ms * 1000000u)
		budget = (uint64_t)timeout_ms * 1000000u;
	t0 = now = spin_clock(l);
	if (spin_work(l, now))
		return 0;
	for (unsigned looks = 0;; looks++) {
		n = epoll_wait(l->epfd, evs, LOOP_EVENTS, 0);
		l->spin.polls++;
		if (n > 0) {
			if (looks == 0) {
				l->spin.ready++;
			} else {
				l->spin.hits++;
				l->spin_miss = 0;
				if (l->spin_adaptive) /* how late */
					rr_spin_adapt_end(&l->adapt, l->spin_ns, budget, RR_SPIN_HIT,
							  spin_clock(l) - t0);
			}
			return n;
		}
		now = spin_clock(l);
		if (spin_work(l, now)) {
			l->spin.ended++;
			return 0;
		}
		if (now - t0 >= budget)
			break;
	}
	l->spin.misses++;
	if (l->spin_adaptive) {
		/* a miss that halves the budget sets the growth back, as the
		 * fixed budget's back-off does */
		rr_spin_grow_missed(&l->grow, t0,
				    rr_spin_adapt_end(&l->adapt, l->spin_ns, budget, RR_SPIN_MISS, 0));
	} else if (++l->spin_miss >= LOOP_SPIN_MISSES) {
		l->spin_miss = 0;
		l->spin_skip = LOOP_SPIN_SKIP;
		rr_spin_grow_missed(&l->grow, t0, true);
	} else {
		rr_spin_grow_missed(&l->grow, t0, false);   /* its sleep says how near */
	}
	return 0;
}

/* After the sleep that followed a missed spin: events (@n > 0) near its
 * start grow the next budget, a sleep that ran out or ended later sets it
 * back (rr_spin_grow_after; the clock read only with events). */
static void loop_spin_after(struct rr_loop *l, int n)
{
	if (rr_spin_grow_after(&l->grow, l->spin_ns, n > 0, n > 0 ? spin_clock(l) : 0))
		l->spin.grown++;
}

/* ------------------------------------------------------------- turns -- */

bool rr_loop_on_runner(const struct rr_loop *l)
{
	return tls_loop == l;
}

struct rr_loop *rr_loop_current(void)
{
	return tls_loop;
}

static bool is_dead(const struct rr_loop *l, const struct rr_loop_src *src)
{
	if (l->dead_overflow)
		return true;
	for (unsigned i = 0; i < l->ndead; i++)
		if (l->dead[i] == src)
			return true;
	return false;
}

/* The loop's clock for its sleeps and timers (CLOCK_MONOTONIC), counted. */
static uint64_t loop_now(struct rr_loop *l)
{
	l->clock_reads++;
	return rr_now_ns(NULL);
}

/* How long the turn may sleep (no lock: the atomics). The clock is read
 * only when no task waits and a timer is set; when the turn then does not
 * sleep (a timer is due, or the caller's 0), *@now is that read, which
 * the timers after the sources use (else left 0). */
static int sleep_ms(struct rr_loop *l, int timeout_ms, uint64_t *now)
{
	uint64_t d, at, t;

	if (atomic_load(&l->ntasks))
		return 0;
	at = atomic_load(&l->next_at);
	if (at == UINT64_MAX)
		return timeout_ms;
	t = loop_now(l);
	if (at <= t || timeout_ms == 0) {
		*now = t;
		return 0;
	}
	d = (at - t + 999999u) / 1000000u;
	if (timeout_ms >= 0 && d > (uint64_t)timeout_ms)
		return timeout_ms;
	return d > INT32_MAX ? INT32_MAX : (int)d;
}

/* The timers due at @now (0: a clock read); one is set (the caller's
 * look at next_at). */
static int run_timers(struct rr_loop *l, uint64_t now)
{
	int n = 0;

	if (!now)
		now = loop_now(l);
	if (atomic_load(&l->next_at) > now)
		return 0;   /* none due (one set meanwhile: next turn) */
	pthread_mutex_lock(&l->lock);
	while (l->nheap && l->heap[0]->at <= now) {
		struct rr_loop_timer *t = l->heap[0];

		heap_remove(l, t);
		pthread_mutex_unlock(&l->lock);
		t->fn(t);
		n++;
		pthread_mutex_lock(&l->lock);
	}
	tfd_follow(l);
	pthread_mutex_unlock(&l->lock);
	return n;
}

static int run_tasks(struct rr_loop *l)
{
	uint32_t left;
	int n = 0;

	/* Only the tasks queued now (one posted by a task waits for the next
	 * turn, which then does not sleep), taken one at a time: a task
	 * cancelled by an earlier one is no longer there. None: no lock (a
	 * task posted meanwhile by another thread woke the loop). */
	if (!atomic_load(&l->ntasks))
		return 0;
	pthread_mutex_lock(&l->lock);
	left = l->ntasks;
	while (left-- && l->tasks) {
		struct rr_loop_task *t = l->tasks;

		l->tasks = t->next;
		if (!l->tasks)
			l->tasks_tail = &l->tasks;
		l->ntasks--;
		t->queued = false;
		t->next = NULL;
		pthread_mutex_unlock(&l->lock);
		t->fn(t);
		n++;
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	return n;
}

int rr_loop_run_once(struct rr_loop *l, int timeout_ms)
{
	struct epoll_event evs[LOOP_EVENTS];
	struct rr_loop *outer = tls_loop;
	int n = 0, ran = 0, ms = 0;
	uint64_t now = 0;

	tls_loop = l;
	/* a spin first (not "sleeping": a timer set by another thread during
	 * it is seen by its looks at next_at), then as without */
	if (l->spin_ns && timeout_ms != 0)
		n = loop_spin(l, evs, timeout_ms);
	if (n <= 0) {
		/* "sleeping" before the look at the deadline: a timer set
		 * earlier by another thread meanwhile is either seen by the
		 * look or sees the flag and wakes the loop (both sequentially
		 * consistent). Tasks posted by other threads always wake it. */
		atomic_store(&l->sleeping, true);
		ms = sleep_ms(l, timeout_ms, &now);
		if (ms == 0)
			atomic_store(&l->sleeping, false);
		n = epoll_wait(l->epfd, evs, LOOP_EVENTS, ms);
		atomic_store(&l->sleeping, false);
		l->timed_out = n == 0 && ms > 0;
		if (rr_spin_grow_pending(&l->grow))
			loop_spin_after(l, n);
	} else {
		l->timed_out = false;
	}
	l->ndead = 0;
	l->dead_overflow = false;
	for (int i = 0; i < n; i++) {
		struct rr_loop_src *src = evs[i].data.ptr;

		if (src == &l->wake) {
			/* read, then cleared: cleared first, a wake-up
			 * written in between was read here with the flag
			 * left set, and every later post then skipped its
			 * write while the loop slept (its tasks, posted
			 * before the tasks below run, are run this turn) */
			wake_read(src, evs[i].events);
			atomic_store(&l->wake_pending, false);
			continue;
		}
		if (is_dead(l, src))
			continue;
		src->fn(src, evs[i].events);
		ran++;
	}
	l->ndead = 0;
	l->dead_overflow = false;
	/* The timers: by the sleep's clock read when it found one due (the
	 * turn did not sleep: that read serves); by a read of their own
	 * after a turn that did not sleep for another reason (tasks, a
	 * caller's 0, events found by the spin), or after a sleep that ran
	 * out or that the timerfd ended. A turn woken from its sleep by a
	 * source or a task looks at no timer: its sleep was bounded by the
	 * earliest one, and one that falls due meanwhile (or is set due by
	 * the sources) is run by the next turn, whose sleep_ms finds it due
	 * and does not sleep (its sources first, then it). */
	if (atomic_load(&l->next_at) != UINT64_MAX &&
	    (ms == 0 || l->timed_out || l->tfd_fired)) {
		l->tfd_fired = false;
		ran += run_timers(l, now);
	}
	ran += run_tasks(l);
	tls_loop = outer;
	return ran;
}
