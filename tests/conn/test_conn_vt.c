/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The sans-I/O session of src/proto/conn alone (issue 15): a requester and
 * a responder session wired to each other in memory on virtual time
 * (vt_net.h, vt_world.h), thousands of randomized interleavings per run,
 * every invariant checked after every step. docs/testing.md says how to
 * run more seeds, one seed with its trace, or the long run.
 *
 *   conn_vt_random       a fixed set of seeds (allocation failures in some)
 *                        with a check that every mechanism was exercised;
 *   conn_vt_regressions  the seeds that found bugs in the session;
 *   conn_vt_seed         RR_VT_SEED=<seed> (one, RR_VT_TRACE=1 prints its
 *                        events) or RR_VT_SEEDS=<n> more from RR_VT_SEED0
 *                        (default: 64 seeds past the fixed set). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn/vt_world.h"
#include "test.h"

/* Seeds of conn_vt_random: ~2 s of CPU in Release; fewer under the
 * sanitizers (about ten times slower). */
#if defined(__SANITIZE_ADDRESS__)
#define VT_FIXED_SEEDS 1000u
#else
#define VT_FIXED_SEEDS 2000u
#endif

/* At least @per1000 events per 1000 seeds (about a third of what is seen). */
#define CHECK_RATE(n, per1000) CHECK((n) * 1000ul > (unsigned long)(per1000) * VT_FIXED_SEEDS)

static uint64_t env_u64(const char *name, uint64_t dflt, bool *set)
{
	const char *v = getenv(name);

	if (set)
		*set = v && *v;
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

/* Runs @n seeds from @first; returns how many failed. */
static unsigned run_seeds(uint64_t first, uint64_t n, const struct vt_opts *o,
			  struct vt_result *sum)
{
	unsigned failed = 0;

	memset(sum, 0, sizeof(*sum));
	for (uint64_t s = first; s < first + n; s++) {
		struct vt_result r;

		if (!vt_run(s, o, &r))
			failed++;
		vt_result_add(sum, &r);
		if (failed >= 5)
			break;   /* enough to look at */
	}
	return failed;
}

static void print_sum(const char *what, uint64_t seeds, const struct vt_result *s)
{
	printf("  %s: %" PRIu64 " seeds, %lu steps, %lu Calls (%lu ok, %lu failed, %lu aborted), "
	       "%lu connections lost, %lu fatal errors the protocol allows, %lu allocations "
	       "failed\n"
	       "  forms: %lu short, %lu with Read chunks, %lu Long Calls; %lu Write chunks and "
	       "%lu Reply chunks filled; %lu Read-chunk Replies exposed, %lu pulled, %lu parked, "
	       "%lu expired; %lu RDMA_ERROR; %lu retransmits; %lu Send With Invalidate, %lu "
	       "Local Invalidate; %lu stalls\n",
	       what, seeds, s->steps, s->calls, s->completed_ok, s->completed_err, s->aborts,
	       s->losses, s->legit_fatal, s->alloc_fails, s->short_calls, s->read_calls,
	       s->long_calls, s->write_chunks, s->reply_chunks, s->rrep_exposed, s->rrep_pulled,
	       s->rrep_parked, s->rrep_expired, s->err_chunk, s->retransmits, s->swi, s->linv,
	       s->stalls);
}

TEST(conn_vt_random)
{
	struct vt_opts o = {.trace = false, .quiet = false, .fail_permille = -1};
	struct vt_result s;

	CHECK_EQ(run_seeds(1, VT_FIXED_SEEDS, &o, &s), 0);
	print_sum("conn_vt_random", VT_FIXED_SEEDS, &s);
	/* every mechanism was exercised (the test sees what it checks) */
	CHECK_RATE(s.short_calls, 1300);
	CHECK_RATE(s.read_calls, 3800);
	CHECK_RATE(s.long_calls, 5500);
	CHECK_RATE(s.write_chunks, 6000);
	CHECK_RATE(s.reply_chunks, 1900);
	CHECK_RATE(s.rrep_exposed, 700);
	CHECK_RATE(s.rrep_pulled, 500);
	CHECK_RATE(s.rrep_parked, 90);
	CHECK_RATE(s.rrep_expired, 180);
	CHECK_RATE(s.err_chunk, 1000);
	CHECK_RATE(s.retransmits, 2000);
	CHECK_RATE(s.aborts, 5000);
	CHECK_RATE(s.losses, 400);
	CHECK_RATE(s.stalls, 2500);
	CHECK_RATE(s.legit_fatal, 500);
	CHECK_RATE(s.alloc_fails, 230);
	CHECK_RATE(s.swi, 3500);
	CHECK_RATE(s.linv, 13000);
}

/* Seeds that found bugs in src/proto/conn: each fails with its fix
 * reverted (docs/testing.md "Bugs found"). */
static const struct {
	uint64_t seed;
	const char *bug;
} regressions[] = {
	{0x2, "an aborted Call gave its credit back before its Reply came"},
	{0x5, "an aborted Call gave its credit back before its Reply came"},
	{0x31, "a Call that found no send slot waited for a Reply that never came"},
	{0xbd, "a Call that found no send slot waited for a Reply that never came"},
	{0xa, "a Read-chunk Reply fenced by its timeout leaked when the connection went"},
	{0x16, "a Read-chunk Reply fenced by its timeout leaked when the connection went"},
	{0xd3e, "a queued RDMA_DONE went on the next connection"},
	{0xe41, "a queued RDMA_DONE went on the next connection"},
	{0x40d, "the table entry of a Read-chunk Reply not sent leaked"},
	{0x6f9, "the table entry of a Read-chunk Reply not sent leaked"},
	{0x121, "a failed registration of a Reply's Write source was -EFAULT"},
	{0x138, "a failed registration of a Reply's Write source was -EFAULT"},
};

TEST(conn_vt_regressions)
{
	struct vt_opts o = {.trace = false, .quiet = false, .fail_permille = -1};

	for (size_t i = 0; i < RR_ARRAY_SIZE(regressions); i++) {
		struct vt_result r;

		if (!vt_run(regressions[i].seed, &o, &r)) {
			fprintf(stderr, "  (this seed first found: %s)\n", regressions[i].bug);
			CHECK(false);
		}
	}
}

TEST(conn_vt_seed)
{
	struct vt_opts o = {.trace = false, .quiet = false, .fail_permille = -1};
	struct vt_result s;
	bool one, more;
	uint64_t seed = env_u64("RR_VT_SEED", 0, &one);
	uint64_t n = env_u64("RR_VT_SEEDS", 64, &more);
	uint64_t first = env_u64("RR_VT_SEED0", VT_FIXED_SEEDS + 1, NULL);

	o.trace = env_u64("RR_VT_TRACE", 0, NULL) != 0;
	o.fail_permille = (int)env_u64("RR_VT_FAIL", (uint64_t)-1, NULL);
	o.trap_alloc = env_u64("RR_VT_TRAP_ALLOC", 0, NULL);
	if (one) {
		struct vt_result r;

		CHECK(vt_run(seed, &o, &r));
		print_sum("conn_vt_seed", 1, &r);
		return;
	}
	CHECK_EQ(run_seeds(first, n, &o, &s), 0);
	if (more)
		print_sum("conn_vt_seed", n, &s);
}
