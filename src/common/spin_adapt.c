/* SPDX-License-Identifier: BSD-2-Clause */
/* The adaptive spin budget: a waiter spins while spinning pays and backs
 * off when it does not. Each wait asks for its budget (rr_spin_adapt_begin)
 * and says what its spin found (rr_spin_adapt_end). A miss (the budget ran
 * out with nothing) and a late hit (data found more than
 * RR_SPIN_ADAPT_LATE budgets into the spin: the spinner was descheduled,
 * so its looks were not what found the data early; the cores are
 * contended and the spin takes the CPU the peer needs) add one to a score;
 * an honest hit takes one off and doubles a reduced budget back. When the
 * score reaches RR_SPIN_ADAPT_MISSES the budget halves, down to 0 after
 * RR_SPIN_ADAPT_OFF halvings (20 us: 10, 5, 2.5, 0). At 0 the waiter
 * sleeps at once, and a probe restores the whole budget: one wait in
 * RR_SPIN_ADAPT_PROBE spins it, and a hit in time brings it back. (A sleep
 * that ended within the budget does not: a sleep that did not block, its
 * data there already, looks just as short, and under load that is the
 * usual one, so it restored the budget where spinning did not pay:
 * docs/PERFORMANCE.md "Issue 16 part JF".) Data at the first look says
 * nothing. The caller reads its clock and passes the times:
 * tests feed virtual time (tests/engine/test_spin_adapt.c). The budget set
 * (RPCRDMA_SOFT_SPIN_US) is the most it ever spins; 0 never spins. */
#include "common/spin_adapt.h"

#include <stdlib.h>
#include <string.h>

bool rr_spin_adaptive_env(void)
{
	const char *e = getenv("RPCRDMA_SOFT_SPIN");

	/* Fixed unless asked: on a quiet machine the fixed budget was ahead
	 * (docs/PERFORMANCE.md "The adaptive spin's default"). */
	return e && !strcmp(e, "adaptive");
}

uint64_t rr_spin_adapt_begin(struct rr_spin_adapt *a, uint64_t max)
{
	if (!max)
		return 0;
	if (a->shift < RR_SPIN_ADAPT_OFF)
		return max >> a->shift;
	if (a->probe) {
		a->probe--;
		return 0;
	}
	a->probe = RR_SPIN_ADAPT_PROBE - 1;
	return max; /* the probe */
}

/* A miss, or a hit that came late: the score up, the budget halved when it
 * reaches RR_SPIN_ADAPT_MISSES (at budget 0, a probe's: stays 0). */
static bool spin_missed(struct rr_spin_adapt *a)
{
	if (a->shift >= RR_SPIN_ADAPT_OFF || ++a->score < RR_SPIN_ADAPT_MISSES)
		return false;
	a->score = 0;
	if (++a->shift == RR_SPIN_ADAPT_OFF)
		a->probe = RR_SPIN_ADAPT_PROBE - 1;
	return true;
}

bool rr_spin_adapt_end(struct rr_spin_adapt *a, uint64_t max, uint64_t budget,
		       enum rr_spin_outcome out, uint64_t elapsed)
{
	uint8_t shift = a->shift;

	if (!max)
		return false;
	switch (out) {
	case RR_SPIN_READY:
		return false;
	case RR_SPIN_MISS:
		return spin_missed(a);
	case RR_SPIN_HIT:
		if (elapsed > RR_SPIN_ADAPT_LATE * budget)
			return spin_missed(a);
		if (a->score)
			a->score--;
		/* a probe's hit restores the whole budget, a reduced
		 * budget's doubles it */
		a->shift = shift >= RR_SPIN_ADAPT_OFF ? 0 : (uint8_t)(shift ? shift - 1 : 0);
		break;
	}
	if (a->shift == shift)
		return false;
	if (a->shift == 0)
		a->probe = 0;
	return true;
}
