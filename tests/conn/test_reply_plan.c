/* SPDX-License-Identifier: BSD-2-Clause */
/* Where the responder builds a Reply (proto/conn/request.c rs_plan_get,
 * issue 16 part L): with the default allocator the plan (28 KiB) is one per
 * thread, handed from connection to connection, never kept by an idle
 * connection, and freed when its thread exits; with an injected allocator
 * each connection keeps its own (freed with it, seen by the allocator). */
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

static void *other_thread(void *arg)
{
	struct rr_conn *c = arg;
	struct rr_xprt_reply_plan *p = rs_plan_get(c);

	/* a thread of its own builds in a plan of its own, kept by the
	 * thread and freed as it exits (LeakSanitizer would see it otherwise) */
	rs_plan_put(c, p);
	return p;
}

TEST(conn_reply_plan_per_thread)
{
	struct rr_conn *a = conn_stub(rpcrdma_env_default());
	struct rr_conn *b = conn_stub(NULL);
	struct rr_xprt_reply_plan *p, *q;
	pthread_t th;
	void *theirs;

	CHECK(a->plan_tls);
	p = rs_plan_get(a);
	REQUIRE(p);
	rs_plan_put(a, p);
	CHECK(a->plan_cache == NULL); /* the connection keeps nothing */
	q = rs_plan_get(b);
	CHECK(q == p);                /* the next connection's Reply reuses it */
	REQUIRE_EQ(pthread_create(&th, NULL, other_thread, a), 0);
	REQUIRE_EQ(pthread_join(th, &theirs), 0);
	CHECK(theirs != q);
	/* two Replies at once on one thread: the second plan is freed */
	p = rs_plan_get(a);
	REQUIRE(p);
	CHECK(p != q);
	rs_plan_put(b, q);
	rs_plan_put(a, p);
	CHECK(rs_plan_get(a) == q);
	rs_plan_put(a, q);
	free(a);
	free(b);
}

/* An injected allocator: the connection keeps its own plan, as before. */
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

TEST(conn_reply_plan_injected_allocator)
{
	int live = 0;
	struct rpcrdma_env env = *rpcrdma_env_default();
	struct rr_conn *c;
	struct rr_xprt_reply_plan *p;

	env.alloc = count_alloc;
	env.free = count_free;
	env.alloc_ctx = &live;
	c = conn_stub(&env);
	CHECK(!c->plan_tls);
	p = rs_plan_get(c);
	REQUIRE(p);
	CHECK_EQ(live, 1);
	rs_plan_put(c, p);
	CHECK(c->plan_cache == p);
	CHECK(rs_plan_get(c) == p);
	rs_plan_put(c, p);
	rr_free(&env, c->plan_cache);
	CHECK_EQ(live, 0);
	free(c);
}
