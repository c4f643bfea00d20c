/* SPDX-License-Identifier: BSD-2-Clause */
/* The test runner: runs every registered TEST, or those named on the command
 * line, each in turn, and prints "N passed, N failed". `--list` prints the
 * table. A fatal check ends only the current test (longjmp). */
#include "test.h"

#include <stdlib.h>

static struct rr_test *tests;
static jmp_buf test_jmp;
static int test_failed;

void rr_test_register(struct rr_test *t)
{
	t->next = tests;
	tests = t;
}

void rr_test_fail(const char *file, int line, const char *expr, bool fatal)
{
	fprintf(stderr, "  %s:%d: check failed: %s\n", file, line, expr);
	test_failed = 1;
	if (fatal)
		longjmp(test_jmp, 1);
}

void rr_test_fail_eq(const char *file, int line, const char *a, const char *b,
		     long long va, long long vb, bool fatal)
{
	fprintf(stderr, "  %s:%d: check failed: %s == %s (%lld vs %lld)\n", file,
		line, a, b, va, vb);
	test_failed = 1;
	if (fatal)
		longjmp(test_jmp, 1);
}

static void *te_alloc(void *ctx, size_t size)
{
	struct rr_test_env *te = ctx;

	te->allocs++;
	if (te->fail_at && (te->allocs == te->fail_at ||
			    (te->fail_all_after && te->allocs > te->fail_at)))
		return NULL;
	te->live++;
	return malloc(size);
}

static void te_free(void *ctx, void *ptr)
{
	struct rr_test_env *te = ctx;

	te->live--;
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

_Noreturn void rr_test_abort(void)
{
	longjmp(test_jmp, 1);
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

static int run_one(struct rr_test *t)
{
	test_failed = 0;
	if (setjmp(test_jmp) == 0)
		t->fn();
	printf("%s %s\n", test_failed ? "FAIL" : "ok  ", t->name);
	fflush(stdout);
	return !test_failed;
}

int main(int argc, char **argv)
{
	unsigned passed = 0, failed = 0;
	struct rr_test *t;

	tests = reverse(tests);
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		printf("usage: %s [--list] [TEST_NAME ...]\n"
		       "Runs every test, or the named ones.\n", argv[0]);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--list")) {
		for (t = tests; t; t = t->next)
			printf("%s\n", t->name);
		return 0;
	}
	if (argc == 1) {
		for (t = tests; t; t = t->next)
			run_one(t) ? passed++ : failed++;
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
			run_one(t) ? passed++ : failed++;
		}
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
