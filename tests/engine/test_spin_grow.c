/* SPDX-License-Identifier: BSD-2-Clause */
/* The spin budget a near miss grows (src/common/spin_grow.h), the one rule
 * of the engine loop's spin, with the
 * clock given by the test: a missed spin whose sleep ends with something
 * to do within RR_SPIN_NEAR budgets set of its start doubles the next
 * budget, up to RR_SPIN_GROW_MAX times the one set, and no further; a
 * sleep that ended later, or with nothing (ran out), and the miss that
 * starts the caller's back-off, set it back; nothing is pending without a
 * missed spin, and a spin that started at time 0 still counts. (The loop's
 * use of it: tests/engine/test_loop_spin.c engine_loop_spin_grows_on_near_miss.) */
#include "test.h"

#include "common/spin_grow.h"

#define SET 20000u   /* 20 us */

/* A missed spin at @t0 (not the back-off's), its sleep ending at @end with
 * @got: whether the budget grew. */
static bool near(struct rr_spin_grow *g, uint64_t t0, uint64_t end, bool got)
{
	rr_spin_grow_missed(g, t0, false);
	CHECK(rr_spin_grow_pending(g));
	return rr_spin_grow_after(g, SET, got, end);
}

TEST(spin_grow_by_near_miss_up_to_its_max)
{
	struct rr_spin_grow g = {0};
	uint64_t t = 1000000;

	CHECK(!rr_spin_grow_pending(&g));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)SET);
	/* near: within RR_SPIN_NEAR x the set, the edge included */
	CHECK(near(&g, t, t + RR_SPIN_NEAR * SET, true));
	CHECK(!rr_spin_grow_pending(&g));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), 2u * SET);
	CHECK(near(&g, t, t + 1, true));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)RR_SPIN_GROW_MAX * SET);
	/* at the most: stays there */
	CHECK(!near(&g, t, t + 1, true));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)RR_SPIN_GROW_MAX * SET);
	/* a later end sets it back */
	CHECK(!near(&g, t, t + RR_SPIN_NEAR * SET + 1, true));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)SET);
	/* so does a sleep that ran out, however soon */
	CHECK(near(&g, t, t + 1, true));
	CHECK(!near(&g, t, 0, false));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)SET);
	/* the back-off's miss sets it back, and leaves nothing pending */
	CHECK(near(&g, t, t + 1, true));
	CHECK(near(&g, t, t + 1, true));
	rr_spin_grow_missed(&g, t, true);
	CHECK(!rr_spin_grow_pending(&g));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), (uint64_t)SET);
	/* a spin that started at time 0 is still pending */
	CHECK(near(&g, 0, 5, true));
	CHECK_EQ(rr_spin_grow_budget(&g, SET), 2u * SET);
	/* no budget set: none grows */
	CHECK_EQ(rr_spin_grow_budget(&g, 0), 0u);
}
