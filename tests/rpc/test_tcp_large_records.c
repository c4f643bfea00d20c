/* SPDX-License-Identifier: BSD-2-Clause */
/* Large records on tcp:// (RFC 5531 section 11 record marking): the guard
 * of the 8 MiB pathology fix in src/transport/tcp/. Each end runs on an
 * environment whose allocator counts allocations of 1 MiB and more. After a
 * first 8 MiB WRITE (Call) and READ (Reply), the next ones are received into
 * memory already held (the server's shared large-record buffer, the
 * client's spare): no large allocation, hence no growth copies and no fresh
 * pages to fault in. Before the fix every 8 MiB Call grew its buffer by
 * doubling (1, 2, 4, 8 MiB: copied each time) and every 8 MiB Reply was a
 * new allocation. Counts, not timings. */
#include "test.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "rpcrdma/rpc.h"

#define BIG_PROG 0x2000009au
#define P_WRITE 1u
#define P_READ 2u
#define BIG (8u * 1024 * 1024)
#define LARGE_ALLOC ((size_t)1024 * 1024)

struct counting {
	atomic_ulong large;      /* allocations >= LARGE_ALLOC */
	atomic_ulong large_bytes;
};

static void *count_alloc(void *ctx, size_t size)
{
	struct counting *k = ctx;

	if (size >= LARGE_ALLOC) {
		atomic_fetch_add(&k->large, 1);
		atomic_fetch_add(&k->large_bytes, size);
	}
	return malloc(size);
}

static void count_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void counting_env(struct rpcrdma_env *e, struct counting *k)
{
	*e = *rpcrdma_env_default();
	e->alloc = count_alloc;
	e->free = count_free;
	e->alloc_ctx = k;
	atomic_init(&k->large, 0);
	atomic_init(&k->large_bytes, 0);
}

static uint8_t *g_data;   /* BIG bytes, the READ result */

static int h_write(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(r)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len) ? RPCRDMA_SVC_SYSTEM_ERR
								: RPCRDMA_SVC_OK;
}

static int h_read(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), g_data, BIG) ? RPCRDMA_SVC_SYSTEM_ERR
									: RPCRDMA_SVC_OK;
}

static int big_write(struct rpcrdma_client *c, const uint8_t *buf)
{
	struct rpcrdma_call *call;
	uint32_t n = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_WRITE, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), buf, BIG), 0);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &n);
	if (!rc && n != BIG)
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

static int big_read(struct rpcrdma_client *c, uint8_t *sink)
{
	struct rpcrdma_call *call;
	struct rpcrdma_ddp_sink s = {sink, BIG};
	const void *p;
	uint32_t len = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_READ, &call), 0);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &s, 1), 0);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
	if (!rc && (len != BIG || memcmp(sink, g_data, BIG) != 0))
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

TEST(rpc_tcp_8mib_records_reuse_buffers)
{
	struct counting ks, kc;
	struct rpcrdma_env es, ec;
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 60000};
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	uint8_t *buf = malloc(BIG), *sink = malloc(BIG);
	char url[64];

	g_data = malloc(BIG);
	REQUIRE(buf && sink && g_data);
	for (uint32_t i = 0; i < BIG; i++) {
		buf[i] = (uint8_t)(i * 7u);
		g_data[i] = (uint8_t)(i * 13u + 1);
	}
	counting_env(&es, &ks);
	counting_env(&ec, &kc);
	so.env = &es;
	co.env = &ec;
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, BIG_PROG, 1, P_WRITE, h_write, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, BIG_PROG, 1, P_READ, h_read, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, BIG_PROG, 1, &co, &c), 0);

	/* the first ones allocate */
	REQUIRE_EQ(big_write(c, buf), 0);
	REQUIRE_EQ(big_read(c, sink), 0);
	fprintf(stderr, "first 8 MiB WRITE + READ: server %lu large allocations (%lu bytes), "
			"client %lu (%lu bytes)\n",
		atomic_load(&ks.large), atomic_load(&ks.large_bytes), atomic_load(&kc.large),
		atomic_load(&kc.large_bytes));
	/* a record grows geometrically, not by small steps */
	CHECK(atomic_load(&ks.large) <= 8);

	atomic_store(&ks.large, 0);
	atomic_store(&kc.large, 0);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(big_write(c, buf), 0);
		CHECK_EQ(big_read(c, sink), 0);
	}
	fprintf(stderr, "next 4 WRITE + READ: server %lu large allocations, client %lu\n",
		atomic_load(&ks.large), atomic_load(&kc.large));
	/* The server's second slot (RR_TCP_CACHE_SLOTS) is filled the first
	 * time a WRITE arrives while the previous record's buffer is still
	 * held (its Reply being sent): that may happen in the warm-up or in
	 * these rounds, once. A server that did not reuse its buffers would
	 * allocate for every one of the 4 WRITEs. */
	CHECK(atomic_load(&ks.large) <= 1);
	CHECK_EQ(atomic_load(&kc.large), 0);

	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	free(buf);
	free(sink);
	free(g_data);
	g_data = NULL;
}
