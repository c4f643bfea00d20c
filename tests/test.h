/* SPDX-License-Identifier: BSD-2-Clause */
/* The test runner's interface. A test is `TEST(name) { ... }` at the start of
 * a line in any tests/ C file: it registers itself in the runner's named table
 * at start-up, and CMake adds one CTest test per name (`rr-tests name`).
 *
 * CHECK(cond) records a failure and continues; REQUIRE(cond) records it and
 * ends the test. CHECK_EQ/REQUIRE_EQ compare integers and print both values.
 *
 * Threads: CHECK may be used on any thread (failures are recorded
 * atomically). REQUIRE, rr_test_abort and rr_test_skip end the test with a
 * longjmp, which is only defined on the test's own thread: evaluated on any
 * other thread a REQUIRE is itself recorded as a failure (misuse), and one
 * whose condition is false ends that thread (pthread_exit) instead of
 * jumping across threads. Worker threads use CHECK and return.
 *
 * Skips: a test that cannot run here (a provider or library not built in,
 * no RDMA device) calls rr_test_skip(why) (ends it at once) or
 * rr_test_mark_skipped(why) (then returns by itself, after its cleanup). It
 * is reported "skip", never "ok"; a failure recorded as well still makes it
 * FAIL. The runner exits with RR_TEST_SKIP_CODE when nothing it ran passed
 * and something was skipped (CTest's SKIP_RETURN_CODE).
 *
 * Also here: test environments (a failing allocator that fails the i-th
 * allocation, a virtual clock, a seeded random generator) and hexdump helpers. */
#ifndef RR_TEST_H
#define RR_TEST_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdio.h>

#include "common/common.h"

struct rr_test {
	const char *name;
	void (*fn)(void);
	struct rr_test *next;
};

/* Exit status of the runner when every test it ran was skipped. */
#define RR_TEST_SKIP_CODE 77

void rr_test_register(struct rr_test *t);
void rr_test_fail(const char *file, int line, const char *expr, bool fatal);
void rr_test_fail_eq(const char *file, int line, const char *a, const char *b,
		     long long va, long long vb, bool fatal);
/* Ends the current test (after a recorded failure). On a thread other than
 * the test's it ends that thread. */
_Noreturn void rr_test_abort(void);
/* Records a misuse when called on a thread other than the test's (REQUIRE
 * evaluates it). */
void rr_test_require_here(const char *file, int line);
/* True on the thread that runs the tests. */
bool rr_test_on_test_thread(void);
/* The current test cannot run here: prints @why, marks it skipped and ends
 * it (test thread only; elsewhere a misuse failure). */
_Noreturn void rr_test_skip(const char *why);
/* As rr_test_skip without ending the test: the caller cleans up and
 * returns. */
void rr_test_mark_skipped(const char *why);

/* Cleanups for a fatal end (test thread only). A test holding something
 * that outlives its stack frame (a server whose threads read a struct on
 * its stack, a peer's registered buffers) pushes a cleanup after taking
 * it and pops it before releasing it itself. A REQUIRE, rr_test_abort or
 * rr_test_skip that ends the test runs the cleanups still pushed, last
 * pushed first, on the test's stack before it unwinds: without them the
 * threads went on reading a stack the next test reused (the Debian 13
 * lab's unit suite hung 28 minutes after one failed check, issue 16 part
 * FF). A fatal check inside a cleanup ends that cleanup; the rest still
 * run. A test that returns with one still pushed is a misuse, recorded as
 * a failure (its frame is gone: nothing is run). @c lives as long as what
 * it cleans up (embed it there). */
struct rr_test_cleanup {
	void (*fn)(void *arg);
	void *arg;
	struct rr_test_cleanup *next;
};
void rr_test_cleanup_push(struct rr_test_cleanup *c, void (*fn)(void *arg), void *arg);
/* Removes @c (pushed, not yet popped) without running it. */
void rr_test_cleanup_pop(struct rr_test_cleanup *c);

/* Runs @body (test thread only) in a child process forked from this one,
 * as part of the current test: its failures and its skip become the
 * test's. For a test that needs the library as a fresh process has it
 * (the engine's progress threads set before it starts: a forked child
 * starts from a fresh engine) and must still run when one rr-tests
 * process runs every test in a row (the lab VM's unit suite). */
void rr_test_in_fresh_process(void (*body)(void));
/* As rr_test_in_fresh_process, but the child's outcome is returned, not
 * made the test's: 0 passed, 1 failed, RR_TEST_SKIP_CODE skipped, -1 it
 * ended abnormally. For a test of the runner itself. */
int rr_test_fresh_status(void (*body)(void));

#define TEST(n)                                                                \
	static void test_##n(void);                                            \
	static struct rr_test rr_test_##n = {#n, test_##n, NULL};              \
	__attribute__((constructor)) static void rr_test_reg_##n(void)         \
	{                                                                      \
		rr_test_register(&rr_test_##n);                                \
	}                                                                      \
	static void test_##n(void)

#define CHECK(c)                                                               \
	do {                                                                   \
		if (!(c))                                                      \
			rr_test_fail(__FILE__, __LINE__, #c, false);           \
	} while (0)
#define REQUIRE(c)                                                             \
	do {                                                                   \
		rr_test_require_here(__FILE__, __LINE__);                      \
		if (!(c))                                                      \
		{                                                              \
			rr_test_fail(__FILE__, __LINE__, #c, true);            \
			rr_test_abort();                                       \
		}                                                              \
	} while (0)
#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long va_ = (long long)(a), vb_ = (long long)(b);          \
		if (va_ != vb_)                                                \
			rr_test_fail_eq(__FILE__, __LINE__, #a, #b, va_, vb_,  \
					false);                                \
	} while (0)
#define REQUIRE_EQ(a, b)                                                       \
	do {                                                                   \
		rr_test_require_here(__FILE__, __LINE__);                      \
		long long va_ = (long long)(a), vb_ = (long long)(b);          \
		if (va_ != vb_)                                                \
		{                                                              \
			rr_test_fail_eq(__FILE__, __LINE__, #a, #b, va_, vb_,  \
					true);                                 \
			rr_test_abort();                                       \
		}                                                              \
	} while (0)
#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

/* ---- timing (docs/testing.md "Timing") ----
 * No test asserts how fast something is (benchmarks report ratios) and none
 * sleeps to let something happen: it waits for the condition, bounded.
 * Liveness: a wait that an event must end is given RR_TEST_WAIT_MS and must
 * end within RR_TEST_PROMPT_NS (half of it): only a lost wake-up or a hang
 * takes that long, not a loaded machine. A loop that must sleep, not spin,
 * is checked by counting its wake-ups with a wide bound. */
#define RR_TEST_WAIT_MS 20000
#define RR_TEST_PROMPT_NS 10000000000ull

/* Polls @cond(@arg) until true or @ms passed (a short sleep between
 * looks); returns the last result. */
bool rr_test_until(bool (*cond)(void *arg), void *arg, unsigned ms);

/* For a wait of an event that must come, bounded by RR_TEST_WAIT_MS and
 * named: rr_test_until(@cond, @arg, RR_TEST_WAIT_MS), and when it runs out
 * it prints "RAN OUT after RR_TEST_WAIT_MS ms waiting for: @what". */
bool rr_test_wait_for(bool (*cond)(void *arg), void *arg, const char *what);

/* A polling loop's bound, for an event that must come: the deadline
 * RR_TEST_WAIT_MS from now, and whether it is still ahead (once passed,
 * prints "RAN OUT ... waiting for: @what" and returns false):
 *   for (uint64_t dl = rr_test_deadline(); !done && rr_test_wait_left(dl, "..");)
 *           usleep(1000); */
uint64_t rr_test_deadline(void);
bool rr_test_wait_left(uint64_t deadline, const char *what);

/* ---- test environments ---- */

/* A failing allocator: allocation number @fail_at (1-based) and every later
 * one fails when @fail_all_after, only that one otherwise; 0 never fails.
 * Counts allocations and live blocks (for leak checks). The library calls
 * the allocator from several threads at once (a transport's poller, its
 * accept path, the application's), so both counts are atomic: a plain
 * ++/-- lost an update under load and read as a leak (issue 16 part BN). */
struct rr_test_env {
	struct rpcrdma_env env;
	unsigned long fail_at;
	bool fail_all_after;
	_Atomic unsigned long allocs;
	_Atomic long live;
	uint64_t now_ns;   /* virtual clock, advanced by tests */
	uint64_t rng;      /* xorshift state */
};

void rr_test_env_init(struct rr_test_env *te, uint64_t seed);

/* Parses hex text ("de ad be ef", spaces/newlines ignored) into @out; returns
 * the byte count. Aborts the test on bad text or overflow. */
size_t rr_test_hex(const char *hex, uint8_t *out, size_t cap);

#endif
