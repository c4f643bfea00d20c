/* SPDX-License-Identifier: BSD-2-Clause */
/* The futex lock and condition of src/common/lock.h (the soft provider's
 * per-QP locks, the CQ ring's lock, the RDMA transport's endpoint lock):
 * the lock excludes (threads that update a counter in two steps under it,
 * with a yield in between, lose no update), trylock fails while it is
 * held, an unlock wakes a thread asleep on it, and a broadcast wakes a
 * waiter of the condition, which released the lock while it waited and
 * holds it again when it returns; a wait with a deadline ends with
 * -ETIMEDOUT once the deadline passed (at once, the lock kept, when it
 * had passed before), or with 0 by a broadcast before it; and broadcasts
 * that skip the system call when nobody waits lose no wake-up. */
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "common/lock.h"

#define LOCK_THREADS 4
#define LOCK_ROUNDS 20000

static struct {
	struct rr_lock l;
	struct rr_cond cv;
	volatile long count;   /* updated in two steps, under l */
	atomic_int started, done;
	bool flag;             /* under l */
	bool held_after;       /* the waiter held l when its wait returned */
} lk;

static void *lock_adder(void *arg)
{
	RR_UNUSED(arg);
	for (int i = 0; i < LOCK_ROUNDS; i++) {
		long v;

		rr_lock(&lk.l);
		v = lk.count;
		if ((i & 63) == 0)
			sched_yield(); /* another thread runs inside, unless excluded */
		lk.count = v + 1;
		rr_unlock(&lk.l);
	}
	return NULL;
}

TEST(rr_lock_excludes)
{
	pthread_t t[LOCK_THREADS];

	atomic_init(&lk.l.v, 0);
	lk.count = 0;
	for (int i = 0; i < LOCK_THREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, lock_adder, NULL) == 0);
	for (int i = 0; i < LOCK_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(lk.count, (long)LOCK_THREADS * LOCK_ROUNDS);
	CHECK_EQ(atomic_load(&lk.l.v), 0);
}

static void *lock_sleeper(void *arg)
{
	RR_UNUSED(arg);
	atomic_store(&lk.started, 1);
	rr_lock(&lk.l);   /* held by the test: sleeps */
	rr_unlock(&lk.l);
	atomic_store(&lk.done, 1);
	return NULL;
}

static bool lock_marked(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&lk.l.v) == 2;
}

static bool flag_done(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&lk.done) != 0;
}

TEST(rr_lock_unlock_wakes_a_sleeper)
{
	pthread_t t;

	atomic_init(&lk.l.v, 0);
	atomic_store(&lk.started, 0);
	atomic_store(&lk.done, 0);
	rr_lock(&lk.l);
	CHECK(!rr_trylock(&lk.l));
	REQUIRE(pthread_create(&t, NULL, lock_sleeper, NULL) == 0);
	/* the sleeper marked the word (2: waited for) before it sleeps */
	REQUIRE(rr_test_until(lock_marked, NULL, RR_TEST_WAIT_MS));
	CHECK(!atomic_load(&lk.done));
	rr_unlock(&lk.l);
	/* only the unlock's wake ends its sleep */
	REQUIRE(rr_test_until(flag_done, NULL, RR_TEST_WAIT_MS));
	pthread_join(t, NULL);
	CHECK_EQ(atomic_load(&lk.l.v), 0);
	CHECK(rr_trylock(&lk.l));
	rr_unlock(&lk.l);
}

static void *cond_waiter(void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&lk.l);
	atomic_store(&lk.started, 1);
	while (!lk.flag)
		rr_cond_wait(&lk.cv, &lk.l);
	/* held again: a trylock of this thread must fail */
	lk.held_after = !rr_trylock(&lk.l);
	rr_unlock(&lk.l);
	atomic_store(&lk.done, 1);
	return NULL;
}

static bool waiter_started(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&lk.started) != 0;
}

TEST(rr_cond_broadcast_wakes_a_waiter)
{
	pthread_t t;

	atomic_init(&lk.l.v, 0);
	atomic_init(&lk.cv.seq, 0u);
	atomic_store(&lk.started, 0);
	atomic_store(&lk.done, 0);
	lk.flag = false;
	lk.held_after = false;
	REQUIRE(pthread_create(&t, NULL, cond_waiter, NULL) == 0);
	REQUIRE(rr_test_until(waiter_started, NULL, RR_TEST_WAIT_MS));
	/* the waiter set started under the lock, then waits: this take
	 * succeeds only once its wait released the lock */
	rr_lock(&lk.l);
	lk.flag = true;
	rr_cond_broadcast(&lk.cv);
	rr_unlock(&lk.l);
	REQUIRE(rr_test_until(flag_done, NULL, RR_TEST_WAIT_MS));
	pthread_join(t, NULL);
	CHECK(lk.held_after);
	CHECK_EQ(atomic_load(&lk.l.v), 0);
}

/* ---- the condition's deadline (rr_cond_timedwait, part BV) ---- */

static struct {
	struct rr_lock l;
	struct rr_cond cv;
	struct timespec abs;
	atomic_int started, done;
	bool flag;          /* under l */
	int rc;             /* the last wait's result */
	int waits;          /* waits made */
	bool held_after;
	bool passed_after;  /* the clock had reached abs when it returned */
} tw;

static void tw_reset(void)
{
	atomic_init(&tw.l.v, 0);
	atomic_init(&tw.cv.seq, 0u);
	atomic_init(&tw.cv.waiters, 0u);
	atomic_store(&tw.started, 0);
	atomic_store(&tw.done, 0);
	tw.flag = false;
	tw.rc = 1;
	tw.waits = 0;
	tw.held_after = false;
	tw.passed_after = false;
}

/* deadlines on CLOCK_MONOTONIC, rr_cond_timedwait's clock */
static bool ts_reached(const struct timespec *abs)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > abs->tv_sec || (now.tv_sec == abs->tv_sec && now.tv_nsec >= abs->tv_nsec);
}

static void ts_in(struct timespec *ts, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Waits (as the library's callers do: in a loop, looking at its flag)
 * until the flag or the deadline. */
static void *timed_waiter(void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&tw.l);
	atomic_store(&tw.started, 1);
	while (!tw.flag) {
		tw.rc = rr_cond_timedwait(&tw.cv, &tw.l, &tw.abs);
		tw.waits++;
		if (tw.rc)
			break;
	}
	tw.passed_after = ts_reached(&tw.abs);
	tw.held_after = !rr_trylock(&tw.l);
	rr_unlock(&tw.l);
	atomic_store(&tw.done, 1);
	return NULL;
}

static bool tw_done(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&tw.done) != 0;
}

static bool tw_inside(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&tw.cv.waiters) == 1;
}

/* Nobody broadcasts: the wait ends with -ETIMEDOUT, not before the
 * deadline (the clock read after it has reached it), the lock held. */
TEST(rr_cond_timedwait_deadline_passes)
{
	pthread_t t;

	tw_reset();
	ts_in(&tw.abs, 20);
	REQUIRE(pthread_create(&t, NULL, timed_waiter, NULL) == 0);
	/* a deadline that never ends the wait hangs it: fails here */
	REQUIRE(rr_test_until(tw_done, NULL, RR_TEST_WAIT_MS));
	pthread_join(t, NULL);
	CHECK_EQ(tw.rc, -ETIMEDOUT);
	CHECK(tw.passed_after);
	CHECK(tw.held_after);
	CHECK(!tw.flag);
	CHECK_EQ(atomic_load(&tw.cv.waiters), 0);
	CHECK_EQ(atomic_load(&tw.l.v), 0);
}

/* A broadcast long before the deadline (an hour away) wakes the waiter,
 * which finds its flag: its last wait returned 0. */
TEST(rr_cond_timedwait_broadcast_wakes)
{
	pthread_t t;

	tw_reset();
	ts_in(&tw.abs, 3600 * 1000L);
	REQUIRE(pthread_create(&t, NULL, timed_waiter, NULL) == 0);
	/* inside the wait (counted, the lock let go) */
	REQUIRE(rr_test_until(tw_inside, NULL, RR_TEST_WAIT_MS));
	rr_lock(&tw.l);
	tw.flag = true;
	rr_cond_broadcast(&tw.cv);
	rr_unlock(&tw.l);
	REQUIRE(rr_test_until(tw_done, NULL, RR_TEST_WAIT_MS));
	pthread_join(t, NULL);
	CHECK_EQ(tw.rc, 0);
	CHECK(tw.flag);
	CHECK(!tw.passed_after);
	CHECK(tw.held_after);
	CHECK_EQ(atomic_load(&tw.cv.waiters), 0);
}

/* A deadline already passed: -ETIMEDOUT at once, the lock never let go
 * (a lock taken again after a wait is marked contended, 2: it stays 1);
 * a malformed one (tv_nsec out of range) is -EINVAL, also without a
 * wait. */
TEST(rr_cond_timedwait_past_deadline_at_once)
{
	struct timespec past[] = {{0, 0}, {-5, 0}, {1, 999999999L}, {0, 0}};

	tw_reset();
	ts_in(&past[3], -1000);   /* a second ago */
	rr_lock(&tw.l);
	for (size_t i = 0; i < sizeof(past) / sizeof(past[0]); i++) {
		CHECK_EQ(rr_cond_timedwait(&tw.cv, &tw.l, &past[i]), -ETIMEDOUT);
		CHECK_EQ(atomic_load(&tw.l.v), 1);
		CHECK_EQ(atomic_load(&tw.cv.waiters), 0);
	}
	tw.abs.tv_sec = 0;
	tw.abs.tv_nsec = 1000000000L;
	CHECK_EQ(rr_cond_timedwait(&tw.cv, &tw.l, &tw.abs), -EINVAL);
	tw.abs.tv_nsec = -1;
	CHECK_EQ(rr_cond_timedwait(&tw.cv, &tw.l, &tw.abs), -EINVAL);
	CHECK_EQ(atomic_load(&tw.l.v), 1);
	rr_unlock(&tw.l);
}

/* Two threads hand a turn back and forth 50,000 times through one
 * condition, each waiting until it is its turn: a broadcast that skipped
 * its wake-up while the other was about to sleep (the waiters count,
 * rr_cond_broadcast) leaves both asleep for ever, and this test hangs. */
#define PINGPONG_ROUNDS 50000

static struct {
	struct rr_lock l;
	struct rr_cond cv;
	int turn;          /* under l: 0 the test's, 1 the thread's */
	int rounds;        /* under l */
	atomic_int done;
} pp;

static void *pong(void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&pp.l);
	while (pp.rounds < PINGPONG_ROUNDS) {
		while (pp.turn != 1)
			rr_cond_wait(&pp.cv, &pp.l);
		pp.turn = 0;
		pp.rounds++;
		rr_cond_broadcast(&pp.cv);
	}
	rr_unlock(&pp.l);
	return NULL;
}

static void *ping(void *arg)
{
	RR_UNUSED(arg);
	rr_lock(&pp.l);
	while (pp.rounds < PINGPONG_ROUNDS) {
		while (pp.turn != 0)
			rr_cond_wait(&pp.cv, &pp.l);
		if (pp.rounds >= PINGPONG_ROUNDS)
			break;
		pp.turn = 1;
		/* outside the lock too, half the time */
		if (pp.rounds & 1) {
			rr_unlock(&pp.l);
			rr_cond_broadcast(&pp.cv);
			rr_lock(&pp.l);
		} else {
			rr_cond_broadcast(&pp.cv);
		}
	}
	rr_unlock(&pp.l);
	atomic_store(&pp.done, 1);
	return NULL;
}

static bool pp_done(void *arg)
{
	RR_UNUSED(arg);
	return atomic_load(&pp.done) != 0;
}

TEST(rr_cond_broadcast_loses_no_wake_up)
{
	pthread_t a, b;

	atomic_init(&pp.l.v, 0);
	atomic_init(&pp.cv.seq, 0u);
	atomic_init(&pp.cv.waiters, 0u);
	pp.turn = 0;
	pp.rounds = 0;
	atomic_store(&pp.done, 0);
	REQUIRE(pthread_create(&b, NULL, pong, NULL) == 0);
	REQUIRE(pthread_create(&a, NULL, ping, NULL) == 0);
	REQUIRE(rr_test_until(pp_done, NULL, RR_TEST_WAIT_MS));
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK_EQ(pp.rounds, PINGPONG_ROUNDS);
	CHECK_EQ(atomic_load(&pp.cv.waiters), 0);
}
