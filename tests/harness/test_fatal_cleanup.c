/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the runner's cleanups for a fatal end (tests/test.h,
 * rr_test_cleanup_push): a test that ends in a fatal check runs the
 * cleanups it still has pushed, last pushed first, before its stack
 * unwinds, and none it popped; a fatal check inside a cleanup still lets
 * the others run; a test that returns with one still pushed fails. Each
 * case runs in a forked child (rr_test_fresh_status) whose failure is
 * this test's evidence, not its outcome; the cleanups report through a
 * pipe. Without them, the Debian 13 lab's unit suite hung for 28 minutes
 * after one failed REQUIRE left a server's threads reading the failed
 * test's stack, reused by the next test (issue 16 part FF). */
#include <fcntl.h>
#include <unistd.h>

#include "test.h"

static int fc_pipe[2];

static void fc_note(void *arg)
{
	const char *s = arg;

	CHECK_EQ(write(fc_pipe[1], s, 1), 1);
}

/* ends in a REQUIRE inside a cleanup: the others still run */
static void fc_fatal_in_cleanup(void *arg)
{
	fc_note(arg);
	REQUIRE(false);
}

/* Reads what the child's cleanups wrote (the pipe is non-blocking). */
static size_t fc_read(char *buf, size_t cap)
{
	ssize_t n = read(fc_pipe[0], buf, cap - 1);

	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? (size_t)n : 0;
}

static void fc_body_fatal(void)
{
	struct rr_test_cleanup a, b, c, d;
	int held = 7;

	rr_test_cleanup_push(&a, fc_note, "a");
	rr_test_cleanup_push(&b, fc_fatal_in_cleanup, "b");
	rr_test_cleanup_push(&c, fc_note, "c");
	rr_test_cleanup_push(&d, fc_note, "d");
	rr_test_cleanup_pop(&c);   /* released by the test itself: not run */
	fprintf(stderr, "  (a child test: the failed check below is expected)\n");
	REQUIRE_EQ(held, 8);
	fc_note("x");   /* never reached */
}

static void fc_body_returns_pushed(void)
{
	static struct rr_test_cleanup e;

	rr_test_cleanup_push(&e, fc_note, "e");
	fprintf(stderr, "  (a child test: the misuse below is expected)\n");
}

static void fc_body_clean(void)
{
	struct rr_test_cleanup f;

	rr_test_cleanup_push(&f, fc_note, "f");
	rr_test_cleanup_pop(&f);
}

TEST(harness_fatal_check_runs_cleanups)
{
	char got[16];

	REQUIRE_EQ(pipe(fc_pipe), 0);
	REQUIRE_EQ(fcntl(fc_pipe[0], F_SETFL, O_NONBLOCK), 0);
	/* d, then b (whose own REQUIRE ends it), then a; c was popped */
	CHECK_EQ(rr_test_fresh_status(fc_body_fatal), 1);
	fc_read(got, sizeof(got));
	CHECK(!strcmp(got, "dba"));
	if (strcmp(got, "dba"))
		printf("  cleanups ran: \"%s\", want \"dba\"\n", got);
	/* a return with one still pushed: a failure, nothing run */
	CHECK_EQ(rr_test_fresh_status(fc_body_returns_pushed), 1);
	CHECK_EQ(fc_read(got, sizeof(got)), 0);
	/* pushed and popped: passes, nothing run */
	CHECK_EQ(rr_test_fresh_status(fc_body_clean), 0);
	CHECK_EQ(fc_read(got, sizeof(got)), 0);
	close(fc_pipe[0]);
	close(fc_pipe[1]);
}
