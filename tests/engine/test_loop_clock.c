/* SPDX-License-Identifier: BSD-2-Clause */
/* The progress loop's clock reads (src/engine/loop.c rr_loop_run_once,
 * sleep_ms, run_timers): a turn reads the clock once at most for its sleep
 * and its timers (a turn that does not sleep reads it once, after its
 * sources); a timer never runs before its deadline; a turn that slept
 * until a timer (its sleep ran out, or the timerfd ended it) ends with the
 * timer run; one set due by the sources is run by the next turn without a
 * sleep. No test asserts on elapsed time: each waits for the timer's run
 * or counts reads (rr_loop_clock_reads). */
#include "test.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/loop.h"

struct clk_rig {
	struct rr_loop *l;
	struct rr_loop_timer t;
	uint64_t at;
	int runs, early;
	struct rr_loop_src src;
	int efd, src_runs;
	bool src_sets_due;
	struct rr_loop_task task;
	int task_runs;
};

static void clk_fire(struct rr_loop_timer *t)
{
	struct clk_rig *r = RR_CONTAINER_OF(t, struct clk_rig, t);

	r->runs++;
	if (rr_now_ns(NULL) < r->at)
		r->early++;
}

static void clk_set(struct clk_rig *r, uint64_t at)
{
	r->at = at;
	rr_loop_timer_set(r->l, &r->t, at);
}

static void clk_src(struct rr_loop_src *s, uint32_t ev)
{
	struct clk_rig *r = RR_CONTAINER_OF(s, struct clk_rig, src);

	(void)ev;
	r->src_runs++;
	if (r->src_sets_due) {
		uint64_t v;

		r->src_sets_due = false;
		clk_set(r, rr_now_ns(NULL));   /* due now, from the runner */
		if (read(r->efd, &v, sizeof(v)) < 0) {
			/* not ready */
		}
	}
}

static void clk_task(struct rr_loop_task *t)
{
	RR_CONTAINER_OF(t, struct clk_rig, task)->task_runs++;
}

static void rig_init(struct clk_rig *r, bool with_timerfd)
{
	*r = (struct clk_rig){.efd = -1};
	REQUIRE_EQ(rr_loop_create(with_timerfd, &r->l), 0);
	REQUIRE_EQ(rr_loop_timer_init(r->l, &r->t, clk_fire), 0);
	r->task.fn = clk_task;
}

/* A source that stays ready (an eventfd nobody reads) */
static void rig_src(struct clk_rig *r)
{
	uint64_t one = 1;

	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	REQUIRE(r->efd >= 0);
	REQUIRE_EQ(rr_loop_add(r->l, &r->src, r->efd, EPOLLIN, clk_src), 0);
	REQUIRE_EQ(write(r->efd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

static void rig_fini(struct clk_rig *r)
{
	if (r->efd >= 0) {
		rr_loop_del(r->l, &r->src);
		close(r->efd);
	}
	rr_loop_timer_fini(r->l, &r->t);
	rr_loop_destroy(r->l);
}

/* A busy loop (a source always ready) with a far timer (a server's 100 ms
 * tick): one clock read per turn that would sleep, the sleep's; one per
 * turn that does not (a caller's 0, a task queued), the timers'. Fails
 * (200 reads) when the timers read again after a sleep that a source
 * ended, or when a turn of 0 reads for a sleep it does not make. */
TEST(engine_loop_one_clock_read_per_turn)
{
	struct clk_rig r;
	uint64_t r0;

	rig_init(&r, false);
	rig_src(&r);
	clk_set(&r, rr_now_ns(NULL) + 10000000000ull);
	r0 = rr_loop_clock_reads(r.l);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	CHECK_EQ(rr_loop_clock_reads(r.l) - r0, 100);
	r0 = rr_loop_clock_reads(r.l);
	for (int i = 0; i < 100; i++)
		CHECK_EQ(rr_loop_run_once(r.l, 0), 1);
	CHECK_EQ(rr_loop_clock_reads(r.l) - r0, 100);
	r0 = rr_loop_clock_reads(r.l);
	for (int i = 0; i < 100; i++) {
		rr_loop_post(r.l, &r.task);   /* (from outside: a wake-up) */
		CHECK_EQ(rr_loop_run_once(r.l, -1), 2);
	}
	CHECK_EQ(rr_loop_clock_reads(r.l) - r0, 100);
	CHECK_EQ(r.task_runs, 100);
	CHECK_EQ(r.src_runs, 300);
	CHECK_EQ(r.runs, 0);
	rig_fini(&r);
}

/* No timer set: no turn reads the clock (as before: a loop without timers
 * never did). Fails when a read is made whatever the timers. */
TEST(engine_loop_no_timer_no_clock_read)
{
	struct clk_rig r;

	rig_init(&r, false);
	rig_src(&r);
	for (int i = 0; i < 50; i++) {
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
		CHECK_EQ(rr_loop_run_once(r.l, 0), 1);
	}
	CHECK_EQ(rr_loop_clock_reads(r.l), 0);
	rig_fini(&r);
}

/* One rr_loop_run_once(-1) with one timer ahead, no timerfd: the turn
 * sleeps until it and returns with it run, never early. Fails (runs 0)
 * without the timers' run after a sleep that ran out. */
TEST(engine_loop_sleep_until_timer_runs_it)
{
	struct clk_rig r;

	rig_init(&r, false);
	for (int i = 0; i < 5; i++) {
		clk_set(&r, rr_now_ns(NULL) + (uint64_t)(i + 1) * 2000000u);
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
		CHECK_EQ(r.runs, i + 1);
	}
	/* and a bounded caller's turn that the timer bounds */
	clk_set(&r, rr_now_ns(NULL) + 3000000u);
	CHECK_EQ(rr_loop_run_once(r.l, 10000), 1);
	CHECK_EQ(r.runs, 6);
	CHECK_EQ(r.early, 0);
	rig_fini(&r);
}

/* The same with a timerfd (an application-driven loop's): the sleep is
 * bounded by the timer rounded up to a millisecond, the timerfd fires at
 * the deadline itself, so the turn is ended by the timerfd's event (not
 * by the sleep running out) and must run the timer. Fails (runs 0, the
 * turn returns 1: the timerfd's source) without the run after the
 * timerfd's wake-up. Then as an application drives it: poll on the fd,
 * then a turn of 0. */
TEST(engine_loop_timerfd_turn_runs_the_timer)
{
	struct clk_rig r;

	rig_init(&r, true);
	for (int i = 0; i < 5; i++) {
		clk_set(&r, rr_now_ns(NULL) + 2000000u);
		/* the fd's source and the timer (the timer alone when the
		 * turn came late enough to find it due) */
		CHECK(rr_loop_run_once(r.l, -1) >= 1);
		CHECK_EQ(r.runs, i + 1);
	}
	for (int i = 0; i < 5; i++) {
		struct pollfd p = {.fd = rr_loop_fd(r.l), .events = POLLIN};

		clk_set(&r, rr_now_ns(NULL) + 2000000u);
		REQUIRE_EQ(poll(&p, 1, -1), 1);
		(void)rr_loop_run_once(r.l, 0);
		CHECK_EQ(r.runs, i + 6);
	}
	CHECK_EQ(r.early, 0);
	rig_fini(&r);
}

/* A timer set due by a source (the runner, no wake-up) in a turn that
 * slept: the next turn, even one with no bound of its own, runs it
 * without a sleep, by that turn's one clock read. Then timers due now,
 * each run by a turn of 0; none early. A next turn that slept would hang
 * here (nothing else wakes it: the test's timeout fails it). */
TEST(engine_loop_timer_due_in_sources_runs_next_turn)
{
	struct clk_rig r;
	uint64_t r0;

	rig_init(&r, false);
	rig_src(&r);
	r.src_sets_due = true;
	(void)rr_loop_run_once(r.l, -1);   /* the source (and maybe the timer) */
	CHECK_EQ(r.src_runs, 1);
	if (r.runs == 0) {
		r0 = rr_loop_clock_reads(r.l);
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);   /* the timer, no sleep */
		CHECK_EQ(rr_loop_clock_reads(r.l) - r0, 1);
	}
	CHECK_EQ(r.runs, 1);
	for (int i = 0; i < 100; i++) {
		clk_set(&r, rr_now_ns(NULL));
		CHECK_EQ(rr_loop_run_once(r.l, 0), 1);
		CHECK_EQ(r.runs, i + 2);
	}
	CHECK_EQ(r.early, 0);
	rig_fini(&r);
}
