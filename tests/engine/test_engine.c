/* SPDX-License-Identifier: BSD-2-Clause */
/* The progress engine alone (src/engine, include/rpcrdma/engine.h): a
 * loop's sources, timers (in deadline order, cancelled, re-set, set from
 * other threads) and tasks (posted from other threads, cancelled, run on
 * the runner); the engine's fixed set of loops, one thread each, picked
 * round-robin; and the mode where the application drives progress
 * (0 threads: rpcrdma_progress, rpcrdma_progress_fd, waits that drive the
 * loop themselves, on a pthread condition or the library's own), run in a forked child so that it starts from a fresh
 * engine whatever ran before in this process. */
#include "test.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "rpcrdma/engine.h"
#include "xprt_harness.h"

struct tick {
	struct rr_loop_timer t;
	int *order;
	int *n;
	int id;
};

static void tick_fn(struct rr_loop_timer *t)
{
	struct tick *k = RR_CONTAINER_OF(t, struct tick, t);

	k->order[(*k->n)++] = k->id;
}

struct counted {
	struct rr_loop_task task;
	struct rr_loop_src src;
	atomic_int runs;
	pthread_t ran_on;
	struct rr_loop *loop;
	struct rr_loop_task *victim;   /* cancelled by this task */
};

static void count_task(struct rr_loop_task *t)
{
	struct counted *c = RR_CONTAINER_OF(t, struct counted, task);

	c->ran_on = pthread_self();
	if (c->victim)
		rr_loop_task_cancel(c->loop, c->victim);
	atomic_fetch_add(&c->runs, 1);
}

static void count_src(struct rr_loop_src *s, uint32_t ev)
{
	struct counted *c = RR_CONTAINER_OF(s, struct counted, src);
	uint64_t v;

	CHECK(ev & EPOLLIN);
	CHECK_EQ(read(s->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	CHECK(rr_loop_on_runner(c->loop));
	atomic_fetch_add(&c->runs, 1);
}

static void *post_from_thread(void *arg)
{
	struct counted *c = arg;

	rr_loop_post(c->loop, &c->task);
	return NULL;
}

/* Timers fire in deadline order whatever order they were set in; a
 * cancelled one never fires; re-setting moves it. */
TEST(engine_loop_timers_in_order)
{
	struct rr_loop *l;
	struct tick k[6];
	int order[8], n = 0;
	uint64_t now = rr_now_ns(NULL);
	const uint64_t at[6] = {30, 10, 50, 20, 40, 60};

	REQUIRE_EQ(rr_loop_create(false, &l), 0);
	for (int i = 0; i < 6; i++) {
		k[i] = (struct tick){.order = order, .n = &n, .id = i};
		REQUIRE_EQ(rr_loop_timer_init(l, &k[i].t, tick_fn), 0);
		rr_loop_timer_set(l, &k[i].t, now + at[i] * 1000000ull);
	}
	rr_loop_timer_cancel(l, &k[4].t);                      /* 40: never */
	rr_loop_timer_set(l, &k[5].t, now + 5 * 1000000ull);   /* 60 -> 5 */
	for (int turns = 0; n < 5 && turns < 1000; turns++)
		(void)rr_loop_run_once(l, 100);
	REQUIRE_EQ(n, 5);
	CHECK_EQ(order[0], 5);
	CHECK_EQ(order[1], 1);
	CHECK_EQ(order[2], 3);
	CHECK_EQ(order[3], 0);
	CHECK_EQ(order[4], 2);
	/* nothing left: a turn with a short timeout runs nothing */
	CHECK_EQ(rr_loop_run_once(l, 1), 0);
	for (int i = 0; i < 6; i++)
		rr_loop_timer_fini(l, &k[i].t);
	rr_loop_destroy(l);
}

/* A task posted from another thread wakes a runner asleep without a
 * deadline and runs on the runner; posting a queued task again runs it
 * once; a task cancelled by an earlier one of the same turn does not run;
 * a source's readiness reaches its callback. */
TEST(engine_loop_tasks_and_sources)
{
	struct rr_loop *l;
	struct counted a = {0}, b = {0}, c = {0}, s = {0};
	pthread_t th;
	uint64_t one = 1;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	REQUIRE(efd >= 0);
	REQUIRE_EQ(rr_loop_create(false, &l), 0);
	a.loop = b.loop = c.loop = s.loop = l;
	a.task.fn = b.task.fn = c.task.fn = count_task;
	REQUIRE_EQ(pthread_create(&th, NULL, post_from_thread, &a), 0);
	/* -1: only the post can end this turn */
	while (atomic_load(&a.runs) == 0)
		(void)rr_loop_run_once(l, -1);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&a.runs), 1);
	CHECK(pthread_equal(a.ran_on, pthread_self()));

	rr_loop_post(l, &b.task);
	rr_loop_post(l, &b.task);   /* already queued */
	c.victim = &a.task;
	rr_loop_post(l, &c.task);
	rr_loop_post(l, &a.task);   /* after c, which cancels it */
	(void)rr_loop_run_once(l, 0);
	CHECK_EQ(atomic_load(&b.runs), 1);
	CHECK_EQ(atomic_load(&c.runs), 1);
	CHECK_EQ(atomic_load(&a.runs), 1);

	REQUIRE_EQ(rr_loop_add(l, &s.src, efd, EPOLLIN, count_src), 0);
	CHECK_EQ(rr_loop_run_once(l, 0), 0);
	CHECK_EQ(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	while (atomic_load(&s.runs) == 0)
		(void)rr_loop_run_once(l, -1);
	CHECK_EQ(atomic_load(&s.runs), 1);
	rr_loop_del(l, &s.src);
	CHECK_EQ(write(efd, &one, sizeof(one)), (ssize_t)sizeof(one));
	CHECK_EQ(rr_loop_run_once(l, 0), 0);   /* deleted: not called */
	close(efd);
	rr_loop_destroy(l);
}

struct on_loop {
	struct rr_loop *l;
	bool ok;
	pthread_t th;
};

static void note_thread(void *arg)
{
	struct on_loop *o = arg;

	o->ok = rr_loop_on_runner(o->l) && rr_loop_current() == o->l;
	o->th = pthread_self();
}

/* The engine's loops: as many as progress threads, picked round-robin,
 * each run by its own thread, and picking more never adds a thread. */
TEST(engine_fixed_threads_round_robin)
{
	unsigned n = rpcrdma_progress_threads();
	struct rr_loop *first, *l;
	struct on_loop o[RPCRDMA_PROGRESS_THREADS_MAX];

	REQUIRE(n >= 1);
	REQUIRE_EQ(rr_engine_pick(&first), 0);
	REQUIRE_EQ(rr_engine_nloops(), n);
	CHECK_EQ(rpcrdma_progress_threads_set(3), -EBUSY);   /* started */
	CHECK_EQ(rpcrdma_progress(0), -EINVAL);               /* threads drive */
	CHECK_EQ(rpcrdma_progress_fd(), -EINVAL);
	/* round-robin: any n picks in a row take each loop once */
	for (unsigned round = 0; round < 4; round++) {
		unsigned hits[RPCRDMA_PROGRESS_THREADS_MAX] = {0};

		for (unsigned i = 0; i < n; i++) {
			REQUIRE_EQ(rr_engine_pick(&l), 0);
			for (unsigned j = 0; j < n; j++)
				hits[j] += l == rr_engine_loop(j);
		}
		for (unsigned j = 0; j < n; j++)
			CHECK_EQ(hits[j], 1);
	}
	(void)first;
	/* each loop has a thread of its own */
	for (unsigned i = 0; i < n; i++) {
		o[i].l = rr_engine_loop(i);
		REQUIRE(o[i].l != NULL);
		rr_engine_call(o[i].l, note_thread, &o[i]);
		CHECK(o[i].ok);
		CHECK(!pthread_equal(o[i].th, pthread_self()));
		for (unsigned j = 0; j < i; j++)
			CHECK(!pthread_equal(o[i].th, o[j].th));
	}
	for (unsigned i = 0; i < 1000; i++)
		REQUIRE_EQ(rr_engine_pick(&l), 0);
	CHECK_EQ(rr_th_threads_named("rr-progress-*"), n);
}

/* ---- the application drives progress (0 threads) ---- */

struct bump {
	struct rr_loop_task task;
	struct rr_loop_timer timer;
	pthread_mutex_t m;
	pthread_cond_t cv;
	int done;
};

static void bump_task(struct rr_loop_task *t)
{
	struct bump *b = RR_CONTAINER_OF(t, struct bump, task);

	pthread_mutex_lock(&b->m);
	b->done++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->m);
}

static void bump_timer(struct rr_loop_timer *t)
{
	struct bump *b = RR_CONTAINER_OF(t, struct bump, timer);

	bump_task(&b->task);
}

static void *post_later(void *arg)
{
	struct bump *b = arg;
	struct rr_loop *l = rr_engine_loop(0);

	rr_loop_post(l, &b->task);
	return NULL;
}

/* bump's, on the library's own lock and condition (rr_engine_cond_wait) */
struct bump_rr {
	struct rr_loop_task task;
	struct rr_lock l;
	struct rr_cond cv;
	int done;
};

static void bump_rr_task(struct rr_loop_task *t)
{
	struct bump_rr *b = RR_CONTAINER_OF(t, struct bump_rr, task);

	rr_lock(&b->l);
	b->done++;
	rr_cond_broadcast(&b->cv);
	rr_unlock(&b->l);
}

static void *post_rr_later(void *arg)
{
	struct bump_rr *b = arg;

	rr_loop_post(rr_engine_loop(0), &b->task);
	return NULL;
}

/* The application drives progress: rr_engine_cond_wait runs the loop
 * itself (a task posted by another thread runs, nobody else runs it);
 * a deadline already passed is -ETIMEDOUT at once, with the lock held. */
static int app_driven_cond_wait(void)
{
	struct bump_rr b = {.task.fn = bump_rr_task};
	struct timespec ts;
	pthread_t th;
	int rc = 0;

	if (pthread_create(&th, NULL, post_rr_later, &b))
		return 30;
	rr_engine_deadline(&ts, RR_TEST_WAIT_MS);
	rr_lock(&b.l);
	while (b.done < 1 && rc != -ETIMEDOUT)
		rc = rr_engine_cond_wait(&b.cv, &b.l, &ts);
	pthread_join(th, NULL);
	if (b.done != 1 || rc != 0)
		return 31;
	ts.tv_sec -= 2 * (RR_TEST_WAIT_MS / 1000);   /* passed */
	if (rr_engine_cond_wait(&b.cv, &b.l, &ts) != -ETIMEDOUT || rr_trylock(&b.l))
		return 32;
	rr_unlock(&b.l);
	return 0;
}

static int app_driven_child(void)
{
	/* b.cv: waited on with a deadline (rr_engine_wait), so made as the
	 * library's are (rr_engine_cond_init: CLOCK_MONOTONIC) */
	struct bump b = {.task.fn = bump_task, .m = PTHREAD_MUTEX_INITIALIZER};
	struct rr_loop *l;
	struct pollfd pfd;
	pthread_t th;
	struct timespec ts;
	int fd, rc;

	if (rr_engine_cond_init(&b.cv))
		return 9;
	if (rpcrdma_progress_threads_set(0) || rpcrdma_progress_threads() != 0)
		return 10;
	if (rr_engine_pick(&l) || rr_engine_nloops() != 1 || !rr_engine_app_driven())
		return 11;
	if (rr_th_threads_named("rr-progress-*") != 0)
		return 12;
	fd = rpcrdma_progress_fd();
	if (fd < 0)
		return 13;
	/* a posted task makes the fd readable; rpcrdma_progress runs it */
	rr_loop_post(l, &b.task);
	pfd = (struct pollfd){fd, POLLIN, 0};
	if (poll(&pfd, 1, RR_TEST_WAIT_MS) != 1)
		return 14;
	if (rpcrdma_progress(0) < 1 || b.done != 1)
		return 15;
	/* a timer makes the fd readable when due (timerfd) */
	if (rr_loop_timer_init(l, &b.timer, bump_timer))
		return 16;
	rr_loop_timer_set(l, &b.timer, rr_now_ns(NULL) + 2000000u);
	if (poll(&pfd, 1, RR_TEST_WAIT_MS) != 1)
		return 17;
	for (int i = 0; i < 100 && b.done < 2; i++)
		(void)rpcrdma_progress(10);
	if (b.done != 2)
		return 18;
	/* a wait of the library drives the loop itself: nobody else runs it */
	if (pthread_create(&th, NULL, post_later, &b))
		return 19;
	rr_engine_deadline(&ts, RR_TEST_WAIT_MS);
	pthread_mutex_lock(&b.m);
	rc = 0;
	while (b.done < 3 && rc != ETIMEDOUT)
		rc = rr_engine_wait(&b.cv, &b.m, &ts);
	pthread_mutex_unlock(&b.m);
	pthread_join(th, NULL);
	if (b.done != 3)
		return 20;
	rc = app_driven_cond_wait();
	if (rc)
		return rc;
	rr_loop_timer_fini(l, &b.timer);
	if (rr_th_threads_named("rr-progress-*") != 0)
		return 21;
	/* a child forked from it starts from a fresh engine: not driven by
	 * the application until its own start says so (rr_engine_app_driven
	 * reads one word, which the fork handler clears) */
	{
		pid_t pid = fork();
		int st = 0;

		if (pid < 0)
			return 22;
		if (pid == 0)
			_exit(rr_engine_app_driven() ? 1 : 0);
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 23;
	}
	return rr_engine_app_driven() ? 0 : 24;
}

TEST(engine_app_driven_progress)
{
	CHECK_EQ(rr_th_in_child(app_driven_child), 0);
}
