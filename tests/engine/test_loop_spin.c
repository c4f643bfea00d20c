/* SPDX-License-Identifier: BSD-2-Clause */
/* Spin, then sleep in a progress loop (src/engine/loop.c loop_spin), with
 * the spin's clock injected (rr_loop_set_spin_clock) so that a budget is a
 * known number of looks: a turn that would sleep looks at its epoll set
 * up to the budget, then sleeps; the adaptation (misses in a row make the
 * next turns sleep at once; a hit resets the count); a task posted or a
 * timer due during a spin ends it at the next look; a budget of 0 never
 * looks; a turn after a sleep that ran out does not spin. No test waits
 * on time: the injected clock's hook makes the events. */
#include "test.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/spin_adapt.h"
#include "engine/engine.h"
#include "engine/loop.h"
#include "rdma/provider.h"
#include "xprt_harness.h"

#define STEP_NS 100u        /* the injected clock per read */
#define BUDGET_NS 1000u     /* 10 reads */

struct spin_rig {
	struct rr_loop *l;
	struct rr_loop_src src;
	int efd;
	int src_runs;
	uint64_t base, reads;
	/* at this read (0: never) the hook does @act */
	uint64_t act_at;
	enum { ACT_READY, ACT_READY_LATE, ACT_TASK, ACT_TIMER, ACT_JUMP } act;
	struct rr_loop_task task;
	int task_runs;
	struct rr_loop_timer timer;
	int timer_runs;
};

static void rig_src(struct rr_loop_src *s, uint32_t ev)
{
	struct spin_rig *r = RR_CONTAINER_OF(s, struct spin_rig, src);
	uint64_t v;

	CHECK(ev & EPOLLIN);
	CHECK_EQ(read(s->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	r->src_runs++;
}

static void rig_task(struct rr_loop_task *t)
{
	RR_CONTAINER_OF(t, struct spin_rig, task)->task_runs++;
}

static void rig_timer(struct rr_loop_timer *t)
{
	RR_CONTAINER_OF(t, struct spin_rig, timer)->timer_runs++;
}

static void rig_ready(struct spin_rig *r)
{
	uint64_t one = 1;

	CHECK_EQ(write(r->efd, &one, sizeof(one)), (ssize_t)sizeof(one));
}

/* The injected clock: base + STEP_NS per read; at read act_at it makes
 * the source readable (ACT_READY_LATE: and jumps 9 budgets ahead; ACT_JUMP:
 * only jumps), posts the task (from the runner: no eventfd) or
 * sets the timer due (from the runner: no wake-up). */
static uint64_t rig_now(void *arg)
{
	struct spin_rig *r = arg;
	uint64_t k = r->reads++;

	if (r->act_at && k == r->act_at) {
		if (r->act == ACT_READY) {
			rig_ready(r);
		} else if (r->act == ACT_READY_LATE) {
			rig_ready(r);   /* and the clock jumps: a late answer */
			r->base += 9 * BUDGET_NS;
		} else if (r->act == ACT_JUMP) {
			r->base += 9 * BUDGET_NS; /* time passes: a late end */
		}
		else if (r->act == ACT_TASK)
			rr_loop_post(r->l, &r->task);
		else
			rr_loop_timer_set(r->l, &r->timer, 1);
	}
	return r->base + k * STEP_NS;
}

static void rig_init(struct spin_rig *r, uint64_t budget_ns)
{
	*r = (struct spin_rig){.base = rr_now_ns(NULL)};
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	REQUIRE(r->efd >= 0);
	REQUIRE_EQ(rr_loop_create(false, &r->l), 0);
	REQUIRE_EQ(rr_loop_add(r->l, &r->src, r->efd, EPOLLIN, rig_src), 0);
	REQUIRE_EQ(rr_loop_timer_init(r->l, &r->timer, rig_timer), 0);
	r->task.fn = rig_task;
	rr_loop_set_spin(r->l, budget_ns);
	rr_loop_set_spin_clock(r->l, rig_now, r);
}

static void rig_fini(struct spin_rig *r)
{
	rr_loop_timer_fini(r->l, &r->timer);
	rr_loop_destroy(r->l);
	close(r->efd);
}

static struct rr_loop_spin_stats rig_stats(const struct spin_rig *r)
{
	struct rr_loop_spin_stats s;

	rr_loop_get_spin_stats(r->l, &s);
	return s;
}

/* One turn whose spin finds nothing: the source becomes readable at the
 * read that ends the budget it has now (read 10 for BUDGET_NS: t0 is read
 * 0; a near miss, so the next budget is grown), so a spin that went
 * on past its budget would find it (a hit, not a miss), and the sleep
 * after the spin ends at once. A turn that does not spin (the property
 * under test broken) is not left asleep forever: it ends after 1 s, and
 * the counts then say what went wrong. */
static void miss_turn(struct spin_rig *r)
{
	r->reads = 0;
	r->act = ACT_READY;
	r->act_at = rr_loop_spin_budget_now(r->l) / STEP_NS;
	(void)rr_loop_run_once(r->l, 1000);
	r->act_at = 0;
}

/* A budget is BUDGET_NS / STEP_NS looks, then the turn sleeps (and is
 * woken by the source); a turn after a sleep that ran out does not spin. */
TEST(engine_loop_spin_budget_then_sleep)
{
	struct spin_rig r;
	struct rr_loop_spin_stats s;

	rig_init(&r, BUDGET_NS);
	miss_turn(&r);
	s = rig_stats(&r);
	CHECK_EQ(s.polls, (uint64_t)(BUDGET_NS / STEP_NS));
	CHECK_EQ(s.misses, 1u);
	CHECK_EQ(s.hits, 0u);
	CHECK_EQ(r.src_runs, 1);
	/* a spin (nothing comes), then a 1 ms sleep that runs out */
	CHECK_EQ(rr_loop_run_once(r.l, 1), 0);
	s = rig_stats(&r);
	CHECK_EQ(s.misses, 2u);
	/* after that sleep: no look at all */
	r.reads = 0;
	CHECK_EQ(rr_loop_run_once(r.l, 1), 0);
	CHECK_EQ(rig_stats(&r).polls, s.polls);
	CHECK_EQ(r.reads, 0u);
	/* woken by the source, the next turn spins again */
	rig_ready(&r);
	CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).misses, 3u);
	rig_fini(&r);
}

/* After 4 misses in a row, 64 turns sleep at once (no look); then it
 * spins again. A hit resets the count: 3 misses, a hit, 3 misses leave
 * it spinning. */
TEST(engine_loop_spin_adapts)
{
	struct spin_rig r;
	struct rr_loop_spin_stats s;

	rig_init(&r, BUDGET_NS);
	for (int i = 0; i < 4; i++)
		miss_turn(&r);
	s = rig_stats(&r);
	REQUIRE_EQ(s.misses, 4u);
	for (int i = 0; i < 64; i++) {
		rig_ready(&r);
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	}
	CHECK_EQ(rig_stats(&r).skipped, 64u);
	CHECK_EQ(rig_stats(&r).polls, s.polls);
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).misses, 5u);
	CHECK_EQ(rig_stats(&r).skipped, 64u);
	rig_fini(&r);

	rig_init(&r, BUDGET_NS);
	for (int i = 0; i < 3; i++)
		miss_turn(&r);
	/* a hit: the source readable at read 3, found by the 4th look */
	r.reads = 0;
	r.act = ACT_READY;
	r.act_at = 3;
	CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	r.act_at = 0;
	CHECK_EQ(rig_stats(&r).hits, 1u);
	for (int i = 0; i < 3; i++)
		miss_turn(&r);
	s = rig_stats(&r);
	CHECK_EQ(s.misses, 6u);
	/* still spinning: the next turn looks */
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).skipped, 0u);
	CHECK(rig_stats(&r).polls > s.polls);
	rig_fini(&r);
}

/* A near miss (the spin found nothing, its sleep ended with events within
 * 8 times the budget set of the spin's start) doubles the next budget, up
 * to 4 times the one set;
 * a grown budget finds what the one set would have missed (a hit, kept);
 * a sleep that runs out sets it back, and so does the miss that makes the
 * turns sleep at once. */
TEST(engine_loop_spin_grows_on_near_miss)
{
	struct spin_rig r;
	struct rr_loop_spin_stats s;

	rig_init(&r, BUDGET_NS);
	REQUIRE_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)BUDGET_NS);
	miss_turn(&r);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)2 * BUDGET_NS);
	CHECK_EQ(rig_stats(&r).grown, 1u);
	/* the grown budget: 20 looks, and the source at read 15 is a hit */
	r.reads = 0;
	r.act = ACT_READY;
	r.act_at = 15;
	CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	r.act_at = 0;
	s = rig_stats(&r);
	CHECK_EQ(s.hits, 1u);
	CHECK_EQ(s.polls, (uint64_t)(BUDGET_NS / STEP_NS + 16));
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)2 * BUDGET_NS);
	/* near misses: 20 looks, then 40, then 40 (the most) */
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).polls, s.polls + 2 * BUDGET_NS / STEP_NS);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)4 * BUDGET_NS);
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).polls, s.polls + 6 * BUDGET_NS / STEP_NS);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)4 * BUDGET_NS);
	CHECK_EQ(rig_stats(&r).grown, 2u);
	/* a spin that misses, then a sleep that runs out: back to the one set */
	CHECK_EQ(rr_loop_run_once(r.l, 1), 0);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)BUDGET_NS);
	rig_fini(&r);

	/* a near miss, then a miss whose answer came later than 8 budgets:
	 * back to the one set */
	rig_init(&r, BUDGET_NS);
	miss_turn(&r);
	REQUIRE_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)2 * BUDGET_NS);
	r.reads = 0;
	r.act = ACT_READY_LATE;
	r.act_at = 2 * BUDGET_NS / STEP_NS;
	CHECK_EQ(rr_loop_run_once(r.l, 1000), 1);
	r.act_at = 0;
	CHECK_EQ(rig_stats(&r).misses, 2u);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)BUDGET_NS);
	rig_fini(&r);

	/* the 4th miss in a row sets it back too (and the turns sleep) */
	rig_init(&r, BUDGET_NS);
	for (int i = 0; i < 3; i++)
		miss_turn(&r);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)4 * BUDGET_NS);
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).misses, 4u);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), (uint64_t)BUDGET_NS);
	rig_fini(&r);
}

/* A task the runner posts (no eventfd) or a timer that falls due during a
 * spin ends it at the next look, and runs in that turn. */
TEST(engine_loop_spin_ends_at_task_and_timer)
{
	struct spin_rig r;
	struct rr_loop_spin_stats s;

	rig_init(&r, 100u * BUDGET_NS);
	r.act = ACT_TASK;
	r.act_at = 3;
	CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	s = rig_stats(&r);
	CHECK_EQ(r.task_runs, 1);
	CHECK_EQ(s.ended, 1u);
	CHECK_EQ(s.misses, 0u);
	CHECK_EQ(s.polls, 3u);   /* reads 1..3 follow looks 1..3 */

	r.reads = 0;
	r.act = ACT_TIMER;
	r.act_at = 3;
	CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	s = rig_stats(&r);
	CHECK_EQ(r.timer_runs, 1);
	CHECK_EQ(s.ended, 2u);
	CHECK_EQ(s.misses, 0u);
	CHECK_EQ(s.polls, 6u);
	rig_fini(&r);
}

/* Budget 0: no look and no clock read, whatever the turn. */
TEST(engine_loop_spin_zero_never_spins)
{
	struct spin_rig r;

	rig_init(&r, 0);
	for (int i = 0; i < 3; i++) {
		rig_ready(&r);
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	}
	CHECK_EQ(rr_loop_run_once(r.l, 1), 0);
	CHECK_EQ(rig_stats(&r).polls, 0u);
	CHECK_EQ(r.reads, 0u);
	CHECK_EQ(r.src_runs, 3);
	rig_fini(&r);
}

/* The engine's progress threads get the soft provider's budget: the
 * default (RPCRDMA_SPIN_US_DEFAULT) with RPCRDMA_SOFT_SPIN_US unset, its
 * value when set, none with "off" or 0 (read when the engine starts: each
 * case in a child of its own, whose engine starts there). Fails with the
 * spin left opt-in (unset: no budget) or not passed to the loops. */
static uint64_t engine_budget(void)
{
	struct rr_loop *l = NULL;
	uint64_t b = UINT64_MAX;

	if (rr_engine_pick(&l) == 0 && l) {
		b = rr_loop_spin_budget(l);
		for (unsigned i = 0; i < rr_engine_nloops(); i++)
			if (rr_loop_spin_budget(rr_engine_loop(i)) != b)
				return UINT64_MAX - 1;
	}
	return b;
}

static int budget_unset(void)
{
	unsetenv("RPCRDMA_SOFT_SPIN_US");
	return engine_budget() == (uint64_t)RPCRDMA_SPIN_US_DEFAULT * 1000u ? 0 : 1;
}

static int budget_50(void)
{
	setenv("RPCRDMA_SOFT_SPIN_US", "50", 1);
	return engine_budget() == 50000u ? 0 : 1;
}

static int budget_off(void)
{
	setenv("RPCRDMA_SOFT_SPIN_US", "off", 1);
	return engine_budget() == 0 ? 0 : 1;
}

static int budget_zero(void)
{
	setenv("RPCRDMA_SOFT_SPIN_US", "0", 1);
	return engine_budget() == 0 ? 0 : 1;
}

TEST(engine_progress_threads_spin_budget_by_default)
{
	CHECK_EQ(rr_th_in_child(budget_unset), 0);
	CHECK_EQ(rr_th_in_child(budget_50), 0);
	CHECK_EQ(rr_th_in_child(budget_off), 0);
	CHECK_EQ(rr_th_in_child(budget_zero), 0);
}

/* The adaptive budget (rr_loop_set_spin_adaptive; src/common/spin_adapt.c,
 * tested alone in test_spin_adapt.c) in the loop, with 1,600 ns set (16
 * looks): misses halve it in threes, 16, 8, 4, 2 looks, then 0 (each
 * miss_turn is a near miss too, so within a three the budget grows as
 * the fixed one's: 16, 32, 64; the halving sets the growth back); at 0 a
 * turn sleeps without a look, but one in RR_SPIN_ADAPT_PROBE spins the
 * whole budget (the probe), and the probe's hit restores it. Fails if the
 * loop never backs off (it looks every turn) or never recovers. */
TEST(engine_loop_spin_adaptive_backs_off_and_recovers)
{
	const uint64_t set = 16 * STEP_NS;
	struct spin_rig r;
	struct rr_loop_spin_stats s;
	uint64_t want = set;

	rig_init(&r, set);
	rr_loop_set_spin_adaptive(r.l, true);
	for (int h = 0; h < 4; h++, want /= 2) {
		for (int i = 0; i < 3; i++) {
			CHECK_EQ(rr_loop_spin_budget_now(r.l), want << i);
			miss_turn(&r);
		}
	}
	s = rig_stats(&r);
	CHECK_EQ(s.misses, 12u);
	CHECK_EQ(s.polls, 7u * (16 + 8 + 4 + 2));
	REQUIRE_EQ(rr_loop_spin_budget_now(r.l), 0u);
	/* at 0: no look, RR_SPIN_ADAPT_PROBE - 1 turns */
	for (unsigned i = 0; i + 1 < RR_SPIN_ADAPT_PROBE; i++) {
		rig_ready(&r);
		CHECK_EQ(rr_loop_run_once(r.l, -1), 1);
	}
	CHECK_EQ(rig_stats(&r).polls, s.polls);
	CHECK_EQ(rig_stats(&r).skipped, s.skipped + RR_SPIN_ADAPT_PROBE - 1);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), 0u);
	/* the probe: the source readable at read 3, found by its 4th look
	 * (a hit, 400 ns into a 1,600 ns budget): restored */
	r.reads = 0;
	r.act = ACT_READY;
	r.act_at = 3;
	/* (no probe, the property broken: the turn sleeps and its 1 s ends it) */
	CHECK_EQ(rr_loop_run_once(r.l, 1000), 1);
	r.act_at = 0;
	CHECK_EQ(rig_stats(&r).polls, s.polls + 4);
	CHECK_EQ(rig_stats(&r).hits, s.hits + 1);
	CHECK_EQ(rr_loop_spin_budget_now(r.l), set);
	/* and the next turn spins the whole budget */
	miss_turn(&r);
	CHECK_EQ(rig_stats(&r).polls, s.polls + 4 + 16);
	CHECK_EQ(rig_stats(&r).misses, 13u);
	rig_fini(&r);
}
