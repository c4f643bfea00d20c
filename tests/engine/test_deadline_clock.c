/* SPDX-License-Identifier: BSD-2-Clause */
/* The clock of the library's deadlines (src/engine/engine.c, src/common/lock.c):
 * every deadline is an absolute CLOCK_MONOTONIC time, so that a step of the wall
 * clock (NTP, date -s) neither stretches nor cuts a wait. rr_engine_deadline reads
 * CLOCK_MONOTONIC; rr_cond_timedwait sleeps until a CLOCK_MONOTONIC time (one 60 s
 * ahead is ended by a broadcast, not read as a wall-clock time decades past) and
 * finds one already passed at once; the pthread conditions waited on with a
 * deadline (rr_engine_cond_init: the engine's run_cv, the server's idle_cv) carry
 * a CLOCK_MONOTONIC attribute, and a wait through rr_engine_wait on one, 60 s
 * ahead, is ended by a broadcast. No test changes the system clock, and none
 * times anything: a wait that never ends fails by the test's own bound. */
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common/lock.h"
#include "engine/engine.h"

#define NS_PER_S 1000000000LL

static long long ts_ns(const struct timespec *ts)
{
	return (long long)ts->tv_sec * NS_PER_S + ts->tv_nsec;
}

/* CLOCK_MONOTONIC's now + @ns (may be negative) */
static void mono_in(struct timespec *ts, long long ns)
{
	struct timespec now;
	long long t;

	clock_gettime(CLOCK_MONOTONIC, &now);
	t = ts_ns(&now) + ns;
	ts->tv_sec = (time_t)(t / NS_PER_S);
	ts->tv_nsec = (long)(t % NS_PER_S);
}

/* ---- rr_cond_timedwait ---- */

static struct {
	struct rr_lock l;
	struct rr_cond cv;
	struct timespec abs;
	atomic_int done;
	bool flag;   /* under l */
	int rc;      /* the last wait's */
} fw;

static void *fw_waiter(void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&fw.l);
	fw.rc = 0;
	while (!fw.flag && fw.rc == 0)
		fw.rc = rr_cond_timedwait(&fw.cv, &fw.l, &fw.abs);
	rr_unlock(&fw.l);
	atomic_store(&fw.done, 1);
	return NULL;
}

/* inside its wait (counted, the lock let go), or returned */
static bool fw_inside_or_done(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&fw.cv.waiters) == 1 || atomic_load(&fw.done);
}

/* A deadline 60 s ahead on CLOCK_MONOTONIC: the wait sleeps until the
 * broadcast and returns 0. Read as a CLOCK_REALTIME time it is decades past:
 * -ETIMEDOUT at once (the waiter is done before anyone broadcast). */
TEST(deadline_cond_timedwait_monotonic_60s_woken)
{
	pthread_t t;

	memset(&fw, 0, sizeof(fw));
	fw.rc = 1;
	mono_in(&fw.abs, 60 * NS_PER_S);
	REQUIRE(pthread_create(&t, NULL, fw_waiter, NULL) == 0);
	REQUIRE(rr_test_until(fw_inside_or_done, NULL, RR_TEST_WAIT_MS));
	rr_lock(&fw.l);
	fw.flag = true;
	rr_cond_broadcast(&fw.cv);
	rr_unlock(&fw.l);
	pthread_join(t, NULL);
	CHECK_EQ(fw.rc, 0);
	CHECK(fw.flag);
	CHECK_EQ(atomic_load(&fw.cv.waiters), 0);
	CHECK_EQ(atomic_load(&fw.l.v), 0);
}

/* A deadline 1 ns in the past on CLOCK_MONOTONIC: -ETIMEDOUT at once, the
 * lock never let go (taken again after a sleep it would be marked contended,
 * 2), nobody counted as waiting; also through rr_engine_cond_wait. A wait
 * that slept instead (a deadline read on a clock behind CLOCK_MONOTONIC)
 * would never end: nobody broadcasts; the test's own timeout fails it. */
TEST(deadline_cond_timedwait_passed_at_once)
{
	memset(&fw, 0, sizeof(fw));
	rr_lock(&fw.l);
	mono_in(&fw.abs, -1);
	CHECK_EQ(rr_cond_timedwait(&fw.cv, &fw.l, &fw.abs), -ETIMEDOUT);
	CHECK_EQ(atomic_load(&fw.l.v), 1);
	CHECK_EQ(atomic_load(&fw.cv.waiters), 0);
	mono_in(&fw.abs, -1);
	CHECK_EQ(rr_engine_cond_wait(&fw.cv, &fw.l, &fw.abs), -ETIMEDOUT);
	CHECK_EQ(atomic_load(&fw.l.v), 1);
	rr_unlock(&fw.l);
}

/* ---- rr_engine_deadline ---- */

/* rr_engine_deadline(ts, 1000) is CLOCK_MONOTONIC's now + 1 s: between the
 * clock read before the call + 1 s and the one after + 1 s (no slack needed:
 * the call reads the clock between the two reads); a well-formed timespec. */
TEST(deadline_engine_deadline_is_monotonic)
{
	static const uint32_t ms[] = {1000, 0, 999, 1001, 60000};

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
		struct timespec before, after, ts;
		long long d = (long long)ms[i] * 1000000LL;

		clock_gettime(CLOCK_MONOTONIC, &before);
		rr_engine_deadline(&ts, ms[i]);
		clock_gettime(CLOCK_MONOTONIC, &after);
		CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < NS_PER_S);
		CHECK(ts_ns(&ts) >= ts_ns(&before) + d);
		CHECK(ts_ns(&ts) <= ts_ns(&after) + d);
	}
}

/* ---- the pthread conditions waited on with a deadline ---- */

/* rr_engine_cond_init's attribute (the engine's run_cv, the server's
 * idle_cv) reports CLOCK_MONOTONIC. */
TEST(deadline_engine_condattr_monotonic)
{
	const pthread_condattr_t *a = rr_engine_condattr();
	clockid_t id = CLOCK_REALTIME;

	REQUIRE(a != NULL);
	REQUIRE_EQ(pthread_condattr_getclock(a, &id), 0);
	CHECK_EQ((int)id, (int)CLOCK_MONOTONIC);
}

static struct {
	pthread_mutex_t m;
	pthread_cond_t cv;
	struct timespec abs;
	atomic_int started, done;
	bool flag;   /* under m */
	int rc;      /* the last wait's */
} pw;

static void *pw_waiter(void *arg)
{
	RR_UNUSED(arg);
	pthread_mutex_lock(&pw.m);
	atomic_store(&pw.started, 1);
	pw.rc = 0;
	while (!pw.flag && pw.rc == 0)
		pw.rc = rr_engine_wait(&pw.cv, &pw.m, &pw.abs);
	pthread_mutex_unlock(&pw.m);
	atomic_store(&pw.done, 1);
	return NULL;
}

static bool pw_started(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&pw.started) != 0;
}

/* A condition of rr_engine_cond_init, waited on through rr_engine_wait with
 * a deadline 60 s ahead on CLOCK_MONOTONIC: the waiter holds the mutex from before it says
 * it started until its wait lets it go, so the broadcast made under the mutex
 * after that finds it asleep (or already returned): its wait returns 0. On a
 * condition on CLOCK_REALTIME the monotonic deadline is decades past: ETIMEDOUT
 * at once, before the broadcast. */
TEST(deadline_engine_wait_monotonic_cond_woken)
{
	pthread_t t;

	memset(&pw, 0, sizeof(pw));
	pw.rc = 1;
	REQUIRE_EQ(pthread_mutex_init(&pw.m, NULL), 0);
	REQUIRE_EQ(rr_engine_cond_init(&pw.cv), 0);
	mono_in(&pw.abs, 60 * NS_PER_S);
	REQUIRE(pthread_create(&t, NULL, pw_waiter, NULL) == 0);
	REQUIRE(rr_test_until(pw_started, NULL, RR_TEST_WAIT_MS));
	pthread_mutex_lock(&pw.m);
	pw.flag = true;
	pthread_cond_broadcast(&pw.cv);
	pthread_mutex_unlock(&pw.m);
	pthread_join(t, NULL);
	CHECK_EQ(pw.rc, 0);
	CHECK(pw.flag);
	pthread_cond_destroy(&pw.cv);
	pthread_mutex_destroy(&pw.m);
}
