/* SPDX-License-Identifier: BSD-2-Clause */
/* The adaptive spin budget (RPCRDMA_SOFT_SPIN=adaptive, the default): how
 * long one waiter (a soft QP's fast reader, an engine loop) spins before it
 * sleeps, learnt from what its spins found. Declarations of spin_adapt.c;
 * the rule is documented there and in docs/soft-iwarp.md "Spinning". */
#ifndef RR_COMMON_SPIN_ADAPT_H
#define RR_COMMON_SPIN_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

/* the budget halves down to max >> (RR_SPIN_ADAPT_OFF - 1), then 0 */
#define RR_SPIN_ADAPT_OFF 4u
/* misses less honest hits that halve the budget */
#define RR_SPIN_ADAPT_MISSES 3u
/* at budget 0: every this many waits one probe spins the whole budget */
#define RR_SPIN_ADAPT_PROBE 32u
/* a hit later than this times its budget: the spinner was not running
 * (descheduled: the cores are contended), a miss for the rule */
#define RR_SPIN_ADAPT_LATE 2u

/* What one wait's spin found (rr_spin_adapt_end). */
enum rr_spin_outcome {
	RR_SPIN_READY, /* data at the first look: no spin, says nothing */
	RR_SPIN_HIT,   /* data after an empty look, @elapsed ns into the spin */
	RR_SPIN_MISS,  /* the budget ran out with nothing */
};

/* One waiter's state; all zero: the whole budget. Not thread-safe: the
 * waiter's own. */
struct rr_spin_adapt {
	uint8_t shift;  /* budget = max >> shift; RR_SPIN_ADAPT_OFF: 0 */
	uint8_t score;  /* misses less honest hits, < RR_SPIN_ADAPT_MISSES */
	uint16_t probe; /* at budget 0: waits left before the next probe */
};

/* The mode RPCRDMA_SOFT_SPIN asks for: true (adaptive) unless it is
 * "fixed" (the fixed budget with the skip after misses: soft.h
 * SOFT_SPIN_MISSES, engine/loop.c LOOP_SPIN_MISSES). Read at each call. */
bool rr_spin_adaptive_env(void);

/* The budget of the wait that starts now, of @max (the one set: the most;
 * 0: never spins, and no state changes). Counts down to a probe at 0. */
uint64_t rr_spin_adapt_begin(struct rr_spin_adapt *a, uint64_t max);

/* The spin that rr_spin_adapt_begin gave @budget (> 0) ended with @out
 * (HIT: @elapsed ns from the spin's start to the look that found data;
 * others: unused). Returns whether the budget changed. */
bool rr_spin_adapt_end(struct rr_spin_adapt *a, uint64_t max, uint64_t budget,
		       enum rr_spin_outcome out, uint64_t elapsed);

/* The budget now, of @max (0 while backed off, probes aside). */
static inline uint64_t rr_spin_adapt_budget(const struct rr_spin_adapt *a, uint64_t max)
{
	return a->shift >= RR_SPIN_ADAPT_OFF ? 0 : max >> a->shift;
}

#endif
