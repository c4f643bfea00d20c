/* SPDX-License-Identifier: BSD-2-Clause */
/* The adaptive spin budget (src/common/spin_adapt.c) on virtual time: the
 * test says what each wait's spin found and when. Misses, and hits that
 * came later than RR_SPIN_ADAPT_LATE budgets (a descheduled spinner), halve
 * the budget once the score reaches RR_SPIN_ADAPT_MISSES, down to 0; honest
 * hits take the score down; data at the first look and a budget set of 0
 * change nothing. From 0, a probe (one wait in RR_SPIN_ADAPT_PROBE spins
 * the whole budget) that hits in time restores the whole budget; an honest
 * hit at a reduced budget doubles it. (The engine loop's use: tests/engine/test_loop_spin.c
 * engine_loop_spin_adaptive_backs_off_and_recovers.) */
#include "test.h"

#include <stdlib.h>

#include "common/spin_adapt.h"

#define MAX 20000u /* 20 us */

/* One wait: its budget from begin, then @out after @elapsed. */
static uint64_t wait_one(struct rr_spin_adapt *a, enum rr_spin_outcome out, uint64_t elapsed)
{
	uint64_t b = rr_spin_adapt_begin(a, MAX);

	rr_spin_adapt_end(a, MAX, b, out, elapsed);
	return b;
}

/* Misses in threes halve it to 0 */
static void back_off(struct rr_spin_adapt *a)
{
	for (unsigned i = 0; i < RR_SPIN_ADAPT_OFF * RR_SPIN_ADAPT_MISSES; i++)
		wait_one(a, RR_SPIN_MISS, 0);
	REQUIRE_EQ(rr_spin_adapt_budget(a, MAX), 0u);
}

TEST(spin_adapt_backs_off_when_spinning_does_not_pay)
{
	struct rr_spin_adapt a = {0};
	uint64_t want = MAX;

	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX);
	/* misses: halved every RR_SPIN_ADAPT_MISSES, down to 0 */
	for (unsigned h = 0; h < RR_SPIN_ADAPT_OFF; h++) {
		for (unsigned i = 0; i < RR_SPIN_ADAPT_MISSES; i++) {
			CHECK_EQ(rr_spin_adapt_budget(&a, MAX), want);
			CHECK_EQ(wait_one(&a, RR_SPIN_MISS, 0), want);
		}
		want = h + 1 < RR_SPIN_ADAPT_OFF ? want / 2 : 0;
		CHECK_EQ(rr_spin_adapt_budget(&a, MAX), want);
	}
	CHECK_EQ(want, 0u);
	CHECK_EQ(rr_spin_adapt_begin(&a, MAX), 0u);

	/* a hit later than RR_SPIN_ADAPT_LATE budgets is a miss; one at
	 * that edge is not */
	a = (struct rr_spin_adapt){0};
	for (int i = 0; i < 5; i++)
		wait_one(&a, RR_SPIN_HIT, RR_SPIN_ADAPT_LATE * MAX);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX);
	for (unsigned i = 0; i < RR_SPIN_ADAPT_MISSES; i++)
		wait_one(&a, RR_SPIN_HIT, RR_SPIN_ADAPT_LATE * MAX + 1);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX / 2);

	/* honest hits take the score down: miss, miss, hit, miss keep it;
	 * one more miss halves it */
	a = (struct rr_spin_adapt){0};
	wait_one(&a, RR_SPIN_MISS, 0);
	wait_one(&a, RR_SPIN_MISS, 0);
	wait_one(&a, RR_SPIN_HIT, 1000);
	wait_one(&a, RR_SPIN_MISS, 0);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX);
	wait_one(&a, RR_SPIN_MISS, 0);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX / 2);

	/* data at the first look says nothing */
	a = (struct rr_spin_adapt){0};
	wait_one(&a, RR_SPIN_MISS, 0);
	wait_one(&a, RR_SPIN_MISS, 0);
	for (int i = 0; i < 100; i++)
		wait_one(&a, RR_SPIN_READY, 0);
	wait_one(&a, RR_SPIN_MISS, 0);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX / 2);

	/* a budget set of 0 never spins, and nothing changes */
	a = (struct rr_spin_adapt){0};
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(rr_spin_adapt_begin(&a, 0), 0u);
		CHECK(!rr_spin_adapt_end(&a, 0, 0, RR_SPIN_MISS, 0));
	}
	CHECK_EQ(a.shift, 0u);
	CHECK_EQ(a.score, 0u);
}

TEST(spin_adapt_recovers_when_spinning_pays_again)
{
	struct rr_spin_adapt a = {0};

	/* the probe: every RR_SPIN_ADAPT_PROBE-th wait at 0 spins the
	 * whole budget; a miss or a late hit there keeps it 0 */
	back_off(&a);
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i + 1 < RR_SPIN_ADAPT_PROBE; i++)
			CHECK_EQ(rr_spin_adapt_begin(&a, MAX), 0u);
		if (round == 0)
			CHECK_EQ(wait_one(&a, RR_SPIN_MISS, 0), (uint64_t)MAX);
		else
			CHECK_EQ(wait_one(&a, RR_SPIN_HIT, RR_SPIN_ADAPT_LATE * MAX + 1),
				 (uint64_t)MAX);
		CHECK_EQ(rr_spin_adapt_budget(&a, MAX), 0u);
	}
	/* data at a probe's first look says nothing either */
	for (unsigned i = 0; i + 1 < RR_SPIN_ADAPT_PROBE; i++)
		CHECK_EQ(rr_spin_adapt_begin(&a, MAX), 0u);
	CHECK_EQ(wait_one(&a, RR_SPIN_READY, 0), (uint64_t)MAX);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), 0u);
	/* a probe that hits in time restores it */
	for (unsigned i = 0; i + 1 < RR_SPIN_ADAPT_PROBE; i++)
		CHECK_EQ(rr_spin_adapt_begin(&a, MAX), 0u);
	CHECK_EQ(wait_one(&a, RR_SPIN_HIT, MAX / 2), (uint64_t)MAX);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX);
	/* after a restore the next back-off starts its probe count afresh */
	back_off(&a);
	for (unsigned i = 0; i + 1 < RR_SPIN_ADAPT_PROBE; i++)
		CHECK_EQ(rr_spin_adapt_begin(&a, MAX), 0u);
	CHECK_EQ(rr_spin_adapt_begin(&a, MAX), (uint64_t)MAX);

	/* a reduced budget: an honest hit doubles it, up to the set */
	a = (struct rr_spin_adapt){0};
	for (unsigned i = 0; i < 2 * RR_SPIN_ADAPT_MISSES; i++)
		wait_one(&a, RR_SPIN_MISS, 0);
	REQUIRE_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX / 4);
	CHECK_EQ(wait_one(&a, RR_SPIN_HIT, MAX / 8), (uint64_t)MAX / 4);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX / 2);
	wait_one(&a, RR_SPIN_HIT, MAX / 8);
	wait_one(&a, RR_SPIN_HIT, MAX / 8);
	CHECK_EQ(rr_spin_adapt_budget(&a, MAX), (uint64_t)MAX);
}

/* RPCRDMA_SOFT_SPIN: fixed unless "adaptive" */
TEST(spin_adapt_mode_from_environment)
{
	unsetenv("RPCRDMA_SOFT_SPIN");
	CHECK(!rr_spin_adaptive_env());
	setenv("RPCRDMA_SOFT_SPIN", "", 1);
	CHECK(!rr_spin_adaptive_env());
	setenv("RPCRDMA_SOFT_SPIN", "adaptive", 1);
	CHECK(rr_spin_adaptive_env());
	setenv("RPCRDMA_SOFT_SPIN", "fixed", 1);
	CHECK(!rr_spin_adaptive_env());
	unsetenv("RPCRDMA_SOFT_SPIN");
}
