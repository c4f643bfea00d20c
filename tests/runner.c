/* SPDX-License-Identifier: BSD-2-Clause */
/* The test runner: runs every registered TEST, or those named on the command
 * line, each in turn, and prints "N passed, N failed, N skipped". `--list`
 * prints the table. A fatal check ends only the current test (longjmp, on
 * the test's own thread; on any other thread it ends that thread). A test
 * that cannot run here is reported "skip", never "ok"; a fatal end first
 * runs the cleanups the test still has pushed (rr_test_cleanup_push), on
 * its stack, so that nothing it started outlives it; when nothing that
 * ran passed and something was skipped the exit status is
 * RR_TEST_SKIP_CODE (CTest SKIP_RETURN_CODE). */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct rr_test *tests;
static jmp_buf test_jmp;
static atomic_int test_failed;
static atomic_int test_skipped;
static _Thread_local bool is_test_thread;
/* the current test's cleanups for a fatal end, last pushed first */
static struct rr_test_cleanup *cleanups;

void rr_test_register(struct rr_test *t)
{
	t->next = tests;
	tests = t;
}

bool rr_test_on_test_thread(void)
{
	return is_test_thread;
}

/* Ends the current test from the test thread, after its cleanups (run
 * here, on the test's stack, while what they clean up still lives; one
 * that itself ends in a fatal check comes back here for the rest); any
 * other thread ends itself (a longjmp into another thread's stack is
 * undefined). */
static _Noreturn void end_test(void)
{
	if (!is_test_thread) {
		fprintf(stderr, "  (a fatal check on a worker thread: that thread ends)\n");
		fflush(stderr);
		pthread_exit(NULL);
	}
	while (cleanups) {
		struct rr_test_cleanup *c = cleanups;

		cleanups = c->next;
		c->fn(c->arg);
	}
	longjmp(test_jmp, 1);
}

void rr_test_cleanup_push(struct rr_test_cleanup *c, void (*fn)(void *arg), void *arg)
{
	if (!is_test_thread) {
		fprintf(stderr, "  a cleanup pushed on a thread that is not the test's\n");
		atomic_store(&test_failed, 1);
		return;
	}
	c->fn = fn;
	c->arg = arg;
	c->next = cleanups;
	cleanups = c;
}

void rr_test_cleanup_pop(struct rr_test_cleanup *c)
{
	struct rr_test_cleanup **pp = &cleanups;

	if (is_test_thread)
		while (*pp && *pp != c)
			pp = &(*pp)->next;
	if (!is_test_thread || !*pp) {
		fprintf(stderr, "  a cleanup popped that is not pushed (or not on the test's thread)\n");
		atomic_store(&test_failed, 1);
		return;
	}
	*pp = c->next;
}

/* Runs @fn as the current test on this (the test's) thread: a fatal check
 * ends it here, after its cleanups. */
static void run_body(void (*fn)(void))
{
	cleanups = NULL;   /* a forked child's copy of its parent's are not its own */
	if (setjmp(test_jmp) == 0) {
		fn();
		if (cleanups) {
			fprintf(stderr, "  the test returned with a cleanup still pushed\n");
			atomic_store(&test_failed, 1);
		}
	}
	cleanups = NULL;
}

void rr_test_require_here(const char *file, int line)
{
	if (is_test_thread)
		return;
	fprintf(stderr, "  %s:%d: REQUIRE on a thread that is not the test's (use CHECK)\n", file,
		line);
	atomic_store(&test_failed, 1);
}

void rr_test_fail(const char *file, int line, const char *expr, bool fatal)
{
	fprintf(stderr, "  %s:%d: check failed: %s\n", file, line, expr);
	atomic_store(&test_failed, 1);
	if (fatal)
		end_test();
}

void rr_test_fail_eq(const char *file, int line, const char *a, const char *b,
		     long long va, long long vb, bool fatal)
{
	fprintf(stderr, "  %s:%d: check failed: %s == %s (%lld vs %lld)\n", file,
		line, a, b, va, vb);
	atomic_store(&test_failed, 1);
	if (fatal)
		end_test();
}

void rr_test_mark_skipped(const char *why)
{
	if (!is_test_thread) {
		fprintf(stderr, "  skip requested on a worker thread: %s\n", why);
		atomic_store(&test_failed, 1);
		return;
	}
	printf("  skipped: %s\n", why);
	atomic_store(&test_skipped, 1);
}

_Noreturn void rr_test_skip(const char *why)
{
	rr_test_mark_skipped(why);
	end_test();
}

int rr_test_fresh_status(void (*body)(void))
{
	pid_t pid;
	int st = 0;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "  fork() for a fresh process failed\n");
		return -1;
	}
	if (pid == 0) {
		/* the forking thread is the child's only one: the test's */
		atomic_store(&test_failed, 0);
		atomic_store(&test_skipped, 0);
		run_body(body);
		fflush(NULL);
		_exit(atomic_load(&test_failed) ? 1 : atomic_load(&test_skipped) ? RR_TEST_SKIP_CODE : 0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
		fprintf(stderr, "  the test's child process ended abnormally (status %#x)\n", st);
		return -1;
	}
	return WEXITSTATUS(st);
}

void rr_test_in_fresh_process(void (*body)(void))
{
	int st = rr_test_fresh_status(body);

	if (st == RR_TEST_SKIP_CODE)
		atomic_store(&test_skipped, 1);
	else if (st != 0)
		atomic_store(&test_failed, 1);
}

static void *te_alloc(void *ctx, size_t size)
{
	struct rr_test_env *te = ctx;
	unsigned long n = atomic_fetch_add(&te->allocs, 1) + 1;

	if (te->fail_at && (n == te->fail_at || (te->fail_all_after && n > te->fail_at)))
		return NULL;
	atomic_fetch_add(&te->live, 1);
	return malloc(size);
}

static void te_free(void *ctx, void *ptr)
{
	struct rr_test_env *te = ctx;

	atomic_fetch_sub(&te->live, 1);
	free(ptr);
}

static uint64_t te_now(void *ctx)
{
	return ((struct rr_test_env *)ctx)->now_ns;
}

static void te_random(void *ctx, void *buf, size_t len)
{
	struct rr_test_env *te = ctx;
	uint8_t *p = buf;

	while (len--) {
		te->rng ^= te->rng << 13;
		te->rng ^= te->rng >> 7;
		te->rng ^= te->rng << 17;
		*p++ = (uint8_t)te->rng;
	}
}

void rr_test_env_init(struct rr_test_env *te, uint64_t seed)
{
	memset(te, 0, sizeof(*te));
	te->env.alloc = te_alloc;
	te->env.free = te_free;
	te->env.alloc_ctx = te;
	te->env.now_ns = te_now;
	te->env.clock_ctx = te;
	te->env.random = te_random;
	te->env.random_ctx = te;
	te->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
	te->now_ns = 1000000000ull;
}

size_t rr_test_hex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;
	int hi = -1;

	for (; *hex; hex++) {
		int v;
		char c = *hex;

		if (c == ' ' || c == '\n' || c == '\t' || c == '|')
			continue;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else {
			rr_test_fail(__FILE__, __LINE__, "bad hex digit", false);
			rr_test_abort();
		}
		if (hi < 0) {
			hi = v;
			continue;
		}
		if (n >= cap) {
			rr_test_fail(__FILE__, __LINE__, "hex overflow", false);
			rr_test_abort();
		}
		out[n++] = (uint8_t)(hi << 4 | v);
		hi = -1;
	}
	if (hi >= 0) {
		rr_test_fail(__FILE__, __LINE__, "odd hex digits", false);
		rr_test_abort();
	}
	return n;
}

bool rr_test_until(bool (*cond)(void *arg), void *arg, unsigned ms)
{
	const struct timespec nap = {0, 1000000};
	uint64_t end = rr_now_ns(NULL) + (uint64_t)ms * 1000000u;

	while (!cond(arg)) {
		if (rr_now_ns(NULL) >= end)
			return cond(arg);
		nanosleep(&nap, NULL);
	}
	return true;
}

static void ran_out(const char *what)
{
	printf("  RAN OUT after %u ms waiting for: %s\n", (unsigned)RR_TEST_WAIT_MS, what);
}

bool rr_test_wait_for(bool (*cond)(void *arg), void *arg, const char *what)
{
	if (rr_test_until(cond, arg, RR_TEST_WAIT_MS))
		return true;
	ran_out(what);
	return false;
}

uint64_t rr_test_deadline(void)
{
	return rr_now_ns(NULL) + (uint64_t)RR_TEST_WAIT_MS * 1000000u;
}

bool rr_test_wait_left(uint64_t deadline, const char *what)
{
	if (rr_now_ns(NULL) < deadline)
		return true;
	ran_out(what);
	return false;
}

_Noreturn void rr_test_abort(void)
{
	end_test();
}

static struct rr_test *reverse(struct rr_test *t)
{
	struct rr_test *r = NULL;

	while (t) {
		struct rr_test *next = t->next;

		t->next = r;
		r = t;
		t = next;
	}
	return r;
}

enum outcome { T_PASS, T_FAIL, T_SKIP };

static enum outcome run_one(struct rr_test *t)
{
	enum outcome o;

	atomic_store(&test_failed, 0);
	atomic_store(&test_skipped, 0);
	run_body(t->fn);
	o = atomic_load(&test_failed) ? T_FAIL : atomic_load(&test_skipped) ? T_SKIP : T_PASS;
	printf("%s %s\n", o == T_FAIL ? "FAIL" : o == T_SKIP ? "skip" : "ok  ", t->name);
	fflush(stdout);
	return o;
}

static void count(enum outcome o, unsigned *passed, unsigned *failed, unsigned *skipped)
{
	if (o == T_PASS)
		(*passed)++;
	else if (o == T_FAIL)
		(*failed)++;
	else
		(*skipped)++;
}

int main(int argc, char **argv)
{
	unsigned passed = 0, failed = 0, skipped = 0;
	struct rr_test *t;

	is_test_thread = true;
	tests = reverse(tests);
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s [--list] [TEST_NAME ...]\n"
		       "Runs every test, or the named ones. Exit status: 0 when none\n"
		       "failed, 1 when one failed, %d when every test run was skipped\n"
		       "(cannot run here: CTest's SKIP_RETURN_CODE).\n", argv[0],
		       RR_TEST_SKIP_CODE);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--list")) {
		for (t = tests; t; t = t->next)
			printf("%s\n", t->name);
		return 0;
	}
	if (argc == 1) {
		for (t = tests; t; t = t->next)
			count(run_one(t), &passed, &failed, &skipped);
	} else {
		for (int i = 1; i < argc; i++) {
			for (t = tests; t; t = t->next)
				if (!strcmp(t->name, argv[i]))
					break;
			if (!t) {
				fprintf(stderr, "no such test: %s\n", argv[i]);
				failed++;
				continue;
			}
			count(run_one(t), &passed, &failed, &skipped);
		}
	}
	printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
	if (failed)
		return 1;
	return skipped && !passed ? RR_TEST_SKIP_CODE : 0;
}
