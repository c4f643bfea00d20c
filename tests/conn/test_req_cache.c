/* SPDX-License-Identifier: BSD-2-Clause */
/* Where the responder's request objects come from (proto/conn/request.c
 * rs_req_take, rs_req_put; issue 16 part CT): with the default allocator a
 * request ended on one session is the next Call's on any session of the
 * same thread (last in, first out, at most 16 kept), never kept by a
 * session with an injected allocator nor handed to one, and freed when its
 * thread exits. */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto/conn/conn_int.h"

static struct rr_conn *conn_stub(const struct rpcrdma_env *env)
{
	struct rr_conn *c = calloc(1, sizeof(*c));

	REQUIRE(c);
	c->env = env;
	c->plan_tls = rr_env_default_alloc(env);
	return c;
}

/* what rs_destroy frees of a session's own spares */
static void conn_stub_free(struct rr_conn *c)
{
	for (void *r; (r = rr_spare_take(&c->spare_reqs));)
		rr_free(c->env, r);
	free(c);
}

static int live;

static void *count_alloc(void *ctx, size_t n)
{
	++*(int *)ctx;
	return malloc(n);
}

static void count_free(void *ctx, void *p)
{
	--*(int *)ctx;
	free(p);
}

TEST(conn_req_cache_thread_lifo_default_only)
{
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rr_conn *a = conn_stub(rpcrdma_env_default());
	struct rr_conn *b = conn_stub(NULL);
	struct rr_conn *own;
	struct rs_req *r[18], *x, *y, *z;

	env.alloc = count_alloc;
	env.free = count_free;
	env.alloc_ctx = &live;
	own = conn_stub(&env);
	CHECK(a->plan_tls && b->plan_tls && !own->plan_tls);
	/* what earlier tests of this process left in the thread's cache */
	while (rs_req_tls_count())
		rr_free(a->env, rs_req_take(a));

	/* ended on a, the next Call's on b: the same object, a keeps none */
	x = rs_req_take(a);
	REQUIRE(x);
	rs_req_put(a, x);
	CHECK_EQ(rs_req_tls_count(), 1u);
	CHECK(rr_spare_take(&a->spare_reqs) == NULL);
	CHECK(rs_req_take(b) == x);
	CHECK_EQ(rs_req_tls_count(), 0u);

	/* an injected allocator's session: its own, seen by its allocator,
	 * kept by the session, never by the thread */
	y = rs_req_take(own);
	REQUIRE(y);
	CHECK_EQ(live, 1);
	rs_req_put(own, y);
	CHECK_EQ(rs_req_tls_count(), 0u);
	CHECK(rs_req_take(own) == y);
	/* nor does it take the thread's */
	rs_req_put(b, x);
	z = rs_req_take(own);
	REQUIRE(z);
	CHECK(z != x);                  /* a new one of its allocator */
	CHECK_EQ(live, 2);
	CHECK_EQ(rs_req_tls_count(), 1u);
	CHECK(rs_req_take(a) == x);

	/* last in, first out; 16 kept, the 17th and 18th go to the
	 * session's spares */
	for (int i = 0; i < 18; i++) {
		r[i] = i ? rs_req_take(a) : x;
		REQUIRE(r[i]);
	}
	for (int i = 0; i < 18; i++)
		rs_req_put(a, r[i]);
	CHECK_EQ(rs_req_tls_count(), 16u);
	CHECK(rs_req_take(b) == r[15]);
	CHECK(rs_req_take(b) == r[14]);
	rs_req_put(b, r[14]);
	rs_req_put(b, r[15]);
	CHECK(rr_spare_take(&b->spare_reqs) == NULL);
	{
		struct rs_req *s1 = rr_spare_take(&a->spare_reqs);
		struct rs_req *s2 = rr_spare_take(&a->spare_reqs);

		CHECK((s1 == r[16] && s2 == r[17]) || (s1 == r[17] && s2 == r[16]));
		rr_free(a->env, s1);
		rr_free(a->env, s2);
	}
	/* the thread's 16 are freed when it exits (the next test's thread) */
	conn_stub_free(a);
	conn_stub_free(b);
	/* own's two back to its spares, freed with it by its allocator */
	rs_req_put(own, y);
	rs_req_put(own, z);
	CHECK_EQ(rs_req_tls_count(), 16u);   /* the thread's, unchanged */
	conn_stub_free(own);
	CHECK_EQ(live, 0);
}

static void *other_thread(void *arg)
{
	struct rr_conn *c = arg;
	struct rs_req *r[3];

	for (int i = 0; i < 3; i++)
		r[i] = rs_req_take(c);
	for (int i = 0; i < 3; i++)
		if (r[i])
			rs_req_put(c, r[i]);
	return (void *)(uintptr_t)rs_req_tls_count();
}

TEST(conn_req_cache_freed_at_thread_exit)
{
	struct rr_conn *a = conn_stub(rpcrdma_env_default());
	unsigned long before = rs_req_tls_freed();
	pthread_t th;
	void *kept;

	REQUIRE_EQ(pthread_create(&th, NULL, other_thread, a), 0);
	REQUIRE_EQ(pthread_join(th, &kept), 0);
	CHECK_EQ((uintptr_t)kept, 3u);
	/* its exit freed them (LeakSanitizer would see them otherwise) */
	CHECK_EQ(rs_req_tls_freed() - before, 3ul);
	CHECK(rr_spare_take(&a->spare_reqs) == NULL);
	conn_stub_free(a);
}
