/* SPDX-License-Identifier: BSD-2-Clause */
/* A spin budget that a near miss grows: the engine loop's rule
 * (src/engine/loop.c loop_spin), in one body with its own test; the soft
 * provider's fast waiter does not use it (part FE measured more CPU per
 * READ under load, no gain in READs/s: docs/soft-iwarp.md). A spin that found
 * nothing is remembered (its start); when the sleep after it ends with
 * something to do within RR_SPIN_NEAR times the budget set of the spin's
 * start (the sleep's own wake-up from the other CPU is in that time:
 * ~20-50 us on this VM), the next budget doubles, up to RR_SPIN_GROW_MAX
 * times the one set; a sleep that ran out or ended later, and the miss
 * that makes the next spins skip (the caller's back-off), set it back. On
 * this VM a 64 KiB READ's turnaround at one connection is ~25-40 us, just
 * over the default 20: every spin missed and paid two cross-CPU wake-ups
 * per READ (docs/PERFORMANCE.md "Issue 16 part EE" and "part FE"). The
 * caller reads its clock and passes it: tests inject theirs
 * (tests/engine/test_spin_grow.c). Not thread-safe: one spinner's own. */
#ifndef RR_COMMON_SPIN_GROW_H
#define RR_COMMON_SPIN_GROW_H

#include <stdbool.h>
#include <stdint.h>

#define RR_SPIN_GROW_MAX 4u     /* the budget at most this times the one set */
#define RR_SPIN_GROW_SHIFT 2u   /* log2(RR_SPIN_GROW_MAX) */
#define RR_SPIN_NEAR 8u         /* near: the sleep ended within this x the set */
_Static_assert(RR_SPIN_GROW_MAX == 1u << RR_SPIN_GROW_SHIFT, "the growth is by doubling");

struct rr_spin_grow {
	uint64_t t0;     /* a missed spin's start, until its sleep ends (0: none) */
	uint8_t shift;   /* the budget now: the one set << shift */
};

/* The budget now, of @set (the one set; 0: no spin). */
static inline uint64_t rr_spin_grow_budget(const struct rr_spin_grow *g, uint64_t set)
{
	return set << g->shift;
}

/* A spin that started at @t0 found nothing. @backoff: the miss that makes
 * the caller's next spins skip: the budget goes back to the one set; else
 * the sleep that follows says how near it was (rr_spin_grow_after). */
static inline void rr_spin_grow_missed(struct rr_spin_grow *g, uint64_t t0, bool backoff)
{
	if (backoff)
		g->shift = 0;
	else
		g->t0 = t0 ? t0 : 1;
}

/* Whether a missed spin waits for its sleep's end (then the caller calls
 * rr_spin_grow_after once that sleep ended). */
static inline bool rr_spin_grow_pending(const struct rr_spin_grow *g)
{
	return g->t0 != 0;
}

/* After the sleep that followed a missed spin: @got, it ended with
 * something to do, at @now (read only then: the caller may pass 0
 * without @got). Returns whether the budget grew. */
static inline bool rr_spin_grow_after(struct rr_spin_grow *g, uint64_t set, bool got,
				      uint64_t now)
{
	uint64_t t0 = g->t0;

	g->t0 = 0;
	if (got && now - t0 <= RR_SPIN_NEAR * set) {
		if (g->shift < RR_SPIN_GROW_SHIFT) {
			g->shift++;
			return true;
		}
		return false;
	}
	g->shift = 0;
	return false;
}

#endif
