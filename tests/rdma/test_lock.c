/* SPDX-License-Identifier: BSD-2-Clause */
/* The futex lock and condition of src/common/lock.h (the soft provider's
 * per-QP locks, the CQ ring's lock):
 * the lock excludes (threads that update a counter in two steps under it,
 * with a yield in between, lose no update), trylock fails while it is
 * held, an unlock wakes a thread asleep on it, and a broadcast wakes a
 * waiter of the condition, which released the lock while it waited and
 * holds it again when it returns. */
#include "test.h"

#include <pthread.h>
#include <sched.h>

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
