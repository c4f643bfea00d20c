/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's race points (race.h): the test hook, the counts of
 * points passed, and the perturbing hook RPCRDMA_SOFT_PERTURB installs,
 * which yields or sleeps at every other point a thread passes (a fixed
 * rotation per thread, no randomness: the scheduler supplies the variety).
 * Calls nothing else of the provider. */
#include "rdma/soft/race.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "common/common.h"
#include "rdma/soft/soft.h"

_Atomic(rr_soft_race_fn) rr_soft_race_hook;

static _Atomic uint64_t race_passed[SOFT_RACE_COUNT];
static _Atomic uint32_t perturb_us;
static __thread uint32_t perturb_turn;

void rr_soft_test_set_race_hook(rr_soft_race_fn fn)
{
	for (int i = 0; i < SOFT_RACE_COUNT; i++)
		atomic_store(&race_passed[i], 0);
	atomic_store(&rr_soft_race_hook, fn);
}

uint64_t rr_soft_race_count(enum soft_race pt)
{
	return pt < SOFT_RACE_COUNT ? atomic_load(&race_passed[pt]) : 0;
}

void rr_soft_race_pass(enum soft_race pt, void *obj)
{
	rr_soft_race_fn fn = atomic_load(&rr_soft_race_hook);

	atomic_fetch_add_explicit(&race_passed[pt], 1, memory_order_relaxed);
	if (fn)
		fn(pt, obj);
}

static void race_perturb(enum soft_race pt, void *obj)
{
	uint32_t turn = perturb_turn++, us = atomic_load_explicit(&perturb_us, memory_order_relaxed);

	RR_UNUSED(pt), RR_UNUSED(obj);
	if ((turn & 3) == 1) {
		sched_yield();
	} else if ((turn & 3) == 3 && us) {
		/* 1..us microseconds, stepping with the thread's turns */
		uint32_t t = 1 + (turn >> 2) % us;
		struct timespec ts = {0, (long)t * 1000};

		nanosleep(&ts, NULL);
	}
}

void rr_soft_perturb_start(uint32_t us)
{
	rr_soft_race_fn none = NULL;

	atomic_store(&perturb_us, us);
	atomic_compare_exchange_strong(&rr_soft_race_hook, &none, race_perturb);
}

int rr_soft_perturb_parse(const char *s, uint32_t *us, uint32_t *reads)
{
	char *end;
	unsigned long v;

	*us = 0;
	*reads = SOFT_RX_READS;
	if (!s || !*s)
		return 0;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || v > 1000000ul)
		return -EINVAL;
	*us = (uint32_t)v;
	if (*end == ',') {
		s = end + 1;
		v = strtoul(s, &end, 10);
		if (errno || end == s || v == 0 || v > SOFT_RX_READS)
			return -EINVAL;
		*reads = (uint32_t)v;
	}
	return *end ? -EINVAL : 0;
}
