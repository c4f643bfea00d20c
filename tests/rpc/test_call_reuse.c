/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the objects a call needs, kept for reuse instead of allocated per
 * call (issue 16 "Per-call cost"; src/common/spare.h): the spare slots are
 * bounded and hand each object out once; over tcp:// and rdma:// (soft
 * provider, 127.0.0.1) a client makes its calls without an allocation from
 * its environment once warm, a reused call carries nothing of the previous
 * one (arguments, reply hint, sinks, status), and the client gives every
 * block back at its destruction (the test allocator's live count); a
 * thread's cache of call objects (clnt.c) serves the clients of the default
 * allocator only and is freed when the thread exits. */
#include "test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spare.h"
#include "proto/conn/conn_int.h"
#include "rpc/clnt_int.h"
#include "rpcrdma/rpc.h"

#define PROG 0x20000a11u
#define P_COUNT 1u
#define P_FAIL 2u
/* The Call header a new call's arguments follow (RFC 5531 section 9:
 * xid, CALL, rpcvers, prog, vers, proc, AUTH_NONE credential and
 * verifier). */
#define CALL_HDR_LEN 40u

/* Results: the number of 32-bit words of the arguments. */
static int h_count(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	uint32_t n = 0, v;

	(void)ctx;
	while (rpcrdma_xdr_get_u32(d, &v) == 0)
		n++;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), n);
	return RPCRDMA_SVC_OK;
}

static int h_fail(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	return RPCRDMA_SVC_SYSTEM_ERR;
}

TEST(spare_slots_bounded_each_object_once)
{
	struct rr_spare s;
	int obj[RR_SPARE_SLOTS + 1];
	bool seen[RR_SPARE_SLOTS + 1] = {false};
	void *p;

	memset(&s, 0, sizeof(s));   /* clang refuses {0} for an _Atomic pointer */
	CHECK(rr_spare_take(&s) == NULL);
	for (unsigned i = 0; i < RR_SPARE_SLOTS; i++)
		CHECK(rr_spare_put(&s, &obj[i]));
	CHECK(!rr_spare_put(&s, &obj[RR_SPARE_SLOTS]));   /* full: caller frees */
	for (unsigned i = 0; i < RR_SPARE_SLOTS; i++) {
		p = rr_spare_take(&s);
		REQUIRE(p != NULL);
		REQUIRE((int *)p >= obj && (int *)p < obj + RR_SPARE_SLOTS);
		CHECK(!seen[(int *)p - obj]);
		seen[(int *)p - obj] = true;
	}
	CHECK(rr_spare_take(&s) == NULL);
	CHECK(rr_spare_put(&s, &obj[RR_SPARE_SLOTS]));
	CHECK(rr_spare_take(&s) == &obj[RR_SPARE_SLOTS]);
}

/* The session's kept Calls (proto/conn/conn_int.h rq_call_take and
 * rq_call_keep, a plain list since issue 16 part JD): as the spare slots,
 * at most RQ_SPARE_CALLS kept (one more is the caller's to free), each
 * handed out once, none when empty, the count back to 0. */
TEST(session_spare_calls_bounded_each_once)
{
	struct rr_conn *c = calloc(1, sizeof(*c));
	struct rq_call *k = calloc(RQ_SPARE_CALLS + 1, sizeof(*k));
	bool seen[RQ_SPARE_CALLS + 1] = {false};
	struct rq_call *p;

	REQUIRE(c && k);
	CHECK(rq_call_take(c) == NULL);
	for (unsigned i = 0; i < RQ_SPARE_CALLS; i++)
		CHECK(rq_call_keep(c, &k[i]));
	CHECK(!rq_call_keep(c, &k[RQ_SPARE_CALLS]));   /* full: caller frees */
	CHECK_EQ(c->nspare_calls, RQ_SPARE_CALLS);
	for (unsigned i = 0; i < RQ_SPARE_CALLS; i++) {
		p = rq_call_take(c);
		REQUIRE(p != NULL);
		REQUIRE(p >= k && p < k + RQ_SPARE_CALLS);
		CHECK(!seen[p - k]);
		seen[p - k] = true;
	}
	CHECK(rq_call_take(c) == NULL);
	CHECK_EQ(c->nspare_calls, 0);
	CHECK(rq_call_keep(c, &k[RQ_SPARE_CALLS]));
	CHECK(rq_call_take(c) == &k[RQ_SPARE_CALLS]);
	free(k);
	free(c);
}

/* Two threads trade objects through one set of slots: none is handed out
 * twice at once, none is lost. */
struct trade {
	struct rr_spare s;
	_Atomic int owner[64];   /* 0 free to take/put, else the thread */
	atomic_int lost;
};

static void *trader(void *arg)
{
	struct trade *t = arg;
	static atomic_int ids;
	int me = atomic_fetch_add(&ids, 1) + 1;
	for (int i = 0; i < 20000; i++) {
		int *p = rr_spare_take(&t->s);
		int expect = 0;

		if (!p)
			continue;
		if (!atomic_compare_exchange_strong(&t->owner[*p], &expect, me))
			atomic_fetch_add(&t->lost, 1);   /* taken twice */
		atomic_store(&t->owner[*p], 0);
		if (!rr_spare_put(&t->s, p))
			atomic_fetch_add(&t->lost, 1);   /* no room for its own */
	}
	return NULL;
}

TEST(spare_slots_two_threads)
{
	static struct trade t;
	static int ids[RR_SPARE_SLOTS];
	pthread_t a, b;
	unsigned n = 0;

	for (int i = 0; i < RR_SPARE_SLOTS; i++) {
		ids[i] = i;
		REQUIRE(rr_spare_put(&t.s, &ids[i]));
	}
	REQUIRE_EQ(pthread_create(&a, NULL, trader, &t), 0);
	REQUIRE_EQ(pthread_create(&b, NULL, trader, &t), 0);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK_EQ(atomic_load(&t.lost), 0);
	while (rr_spare_take(&t.s))
		n++;
	CHECK_EQ(n, RR_SPARE_SLOTS);
}

static uint32_t count_call(struct rpcrdma_client *c, uint32_t words, bool hint)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t v = UINT32_MAX;

	REQUIRE_EQ(rpcrdma_call_create(c, P_COUNT, &call), 0);
	CHECK_EQ(rpcrdma_xdr_enc_len(rpcrdma_call_args(call)), CALL_HDR_LEN);
	for (uint32_t i = 0; i < words; i++)
		REQUIRE_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), i), 0);
	if (hint)
		rpcrdma_call_set_reply_hint(call, 64);
	rpcrdma_call_set_timeout(call, 20000);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	REQUIRE(d != NULL);
	CHECK_EQ(rpcrdma_xdr_get_u32(d, &v), 0);
	rpcrdma_call_destroy(call);
	return v;
}

static void reuse_on(const char *scheme, unsigned long max_server_allocs)
{
	struct rr_test_env te, ts;
	struct rpcrdma_server_opts so = {.threads = 1, .env = &ts.env};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client_opts co = {.env = &te.env};
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	struct rpcrdma_rpc_status st;
	char url[64];
	unsigned long allocs, sallocs;

	rr_test_env_init(&te, 11);
	rr_test_env_init(&ts, 12);
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	REQUIRE_EQ(rpcrdma_server_create(url, &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_COUNT, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_FAIL, h_fail, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &c), 0);

	/* Warm: the first calls allocate what is then kept. */
	CHECK_EQ(count_call(c, 7, true), 7);
	CHECK_EQ(count_call(c, 0, false), 0);
	/* A failed call leaves its status behind in the object... */
	REQUIRE_EQ(rpcrdma_call_create(c, P_FAIL, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), -EREMOTEIO);
	CHECK_EQ(rpcrdma_call_status(call, &st), 0);
	rpcrdma_call_destroy(call);
	/* ...and the next one (the same object) starts clean. */
	REQUIRE_EQ(rpcrdma_call_create(c, P_COUNT, &call), 0);
	CHECK_EQ(rpcrdma_call_status(call, &st), -ENOENT);
	CHECK(rpcrdma_call_results(call) == NULL);
	CHECK_EQ(rpcrdma_xdr_enc_len(rpcrdma_call_args(call)), CALL_HDR_LEN);
	rpcrdma_call_destroy(call);

	allocs = te.allocs;
	sallocs = ts.allocs;
	for (uint32_t i = 0; i < 40; i++)
		CHECK_EQ(count_call(c, i % 5, i & 1), i % 5);
	/* No allocation per call from the client's environment once warm
	 * (the RPC call, the transport's wrapper and the session's Call were
	 * each allocated and freed per call before); on the server none in
	 * the RPC layer and the transport (the request, its results buffer,
	 * the rdma transport's wrapper, tcp://'s record of a request, the
	 * rdma:// session's responder request): at most @max_server_allocs
	 * besides a few while the spares fill (a request released after the
	 * next one came: two in use at once; on rdma:// also the rebuilt-Call
	 * buffer's small slots, proto/xprt_rsp.c). Without the spares: 3
	 * more per call on the client, and on the server one more per call
	 * (tcp://'s record, rdma://'s responder request of 2.5 KiB: 40 here),
	 * and on rdma:// with one kept rebuilt-Call buffer alone, another
	 * whenever two Calls of different sizes overlap (0-10 here). */
	CHECK_EQ(te.allocs - allocs, 0);
	if (ts.allocs - sallocs > max_server_allocs + 2 * RR_SPARE_SLOTS)
		fprintf(stderr, "server allocations: %lu\n", ts.allocs - sallocs);
	CHECK(ts.allocs - sallocs <= max_server_allocs + 2 * RR_SPARE_SLOTS);
	rpcrdma_client_destroy(c);
	CHECK_EQ(te.live, 0);
	rpcrdma_server_destroy(s);
	CHECK_EQ(ts.live, 0);
}

TEST(rpc_calls_reuse_objects_tcp)
{
	reuse_on("tcp", 0);
}

TEST(rpc_calls_reuse_objects_rdma)
{
	reuse_on("rdma", 0);
}

/* The thread's cache of call objects (clnt.c tls_calls, issue 16 part CR):
 * a call destroyed on one client of the default allocator is the object
 * the next call this thread creates gets, on another client too (with that
 * client's limits: max_msg); a client with its own allocator never takes
 * one of them nor gives its own to it (its allocator sees each of its
 * blocks: te.allocs counts the fresh one). */
TEST(rpc_thread_call_cache_same_env_only)
{
	struct rr_test_env te, ts;
	struct rpcrdma_server_opts so = {.threads = 1, .env = &ts.env};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client_opts co_small = {.max_msg = 4096};
	struct rpcrdma_client_opts co_own = {.env = &te.env};
	struct rpcrdma_client *a, *b, *own;
	struct rpcrdma_call *call, *pa, *po;
	unsigned long allocs;
	char url[64];
	int rc = 0;

	rr_test_env_init(&te, 21);
	rr_test_env_init(&ts, 22);
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_COUNT, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &a), 0);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co_small, &b), 0);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co_own, &own), 0);

	/* a's call, destroyed, is b's next call: b's limit, b's calls work */
	REQUIRE_EQ(rpcrdma_call_create(a, P_COUNT, &pa), 0);
	rpcrdma_call_destroy(pa);
	CHECK(rr_rpc_client_tls_calls() >= 1);
	REQUIRE_EQ(rpcrdma_call_create(b, P_COUNT, &call), 0);
	CHECK(call == pa);
	for (uint32_t i = 0; i < 2000 && !rc; i++)   /* 8 KiB: over b's 4 KiB */
		rc = rpcrdma_xdr_put_u32(rpcrdma_call_args(call), i);
	CHECK(rc != 0);
	rpcrdma_call_destroy(call);
	CHECK_EQ(count_call(b, 5, false), 5);
	CHECK_EQ(count_call(a, 3, true), 3);

	/* the cache's objects never go to own (own's allocator makes its
	 * call), and own's call never goes to the cache (a does not get it) */
	REQUIRE(rr_rpc_client_tls_calls() >= 1);
	allocs = te.allocs;
	REQUIRE_EQ(rpcrdma_call_create(own, P_COUNT, &po), 0);
	CHECK(te.allocs > allocs);
	rpcrdma_call_destroy(po);
	REQUIRE_EQ(rpcrdma_call_create(a, P_COUNT, &call), 0);
	CHECK(call != po);
	rpcrdma_call_destroy(call);
	CHECK_EQ(count_call(own, 2, false), 2);

	rpcrdma_client_destroy(own);
	CHECK_EQ(te.live, 0);
	rpcrdma_client_destroy(b);
	rpcrdma_client_destroy(a);
	rpcrdma_server_destroy(s);
	CHECK_EQ(ts.live, 0);
}

/* A thread's cache holds at most 4 calls (more destroyed at once go to
 * their client's spares or are freed) and is freed when the thread exits:
 * the count of calls the caches freed grows by what the thread held. */
struct tls_exit_arg {
	struct rpcrdma_client *c;
	unsigned held;
	int rc;
};

static void *tls_exit_thread(void *p)
{
	struct tls_exit_arg *x = p;
	struct rpcrdma_call *calls[6];
	unsigned n = 0;

	for (; n < 6; n++)
		if ((x->rc = rpcrdma_call_create(x->c, P_COUNT, &calls[n])) != 0)
			break;
	while (n)
		rpcrdma_call_destroy(calls[--n]);
	x->held = rr_rpc_client_tls_calls();
	return NULL;
}

TEST(rpc_thread_call_cache_freed_at_thread_exit)
{
	struct rr_test_env ts;
	struct rpcrdma_server_opts so = {.threads = 1, .env = &ts.env};
	struct rpcrdma_server *s = NULL;
	struct tls_exit_arg x = {0};
	unsigned long freed;
	pthread_t t;
	char url[64];

	rr_test_env_init(&ts, 23);
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_COUNT, h_count, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, NULL, &x.c), 0);
	freed = rr_rpc_client_tls_freed();
	REQUIRE_EQ(pthread_create(&t, NULL, tls_exit_thread, &x), 0);
	REQUIRE_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(x.rc, 0);
	CHECK_EQ(x.held, 4u);
	CHECK_EQ(rr_rpc_client_tls_freed() - freed, 4ul);
	rpcrdma_client_destroy(x.c);
	rpcrdma_server_destroy(s);
}
