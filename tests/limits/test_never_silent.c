/* SPDX-License-Identifier: BSD-2-Clause */
/* A Call is never dropped silently (issue 12 finding 4; docs/security.md
 * "Limits"): when the server cannot allocate what a Call needs anywhere on
 * its way (transport request, RPC request, results, reply plan), the
 * requester still gets an answer for that XID: the Reply, RDMA_ERROR
 * ERR_CHUNK (rdma://), or an RPC SYSTEM_ERR; and the server goes on serving.
 * A raw RPC-over-RDMA requester (tests/xprt_harness.h rr_th_rogue) against
 * an rdma:// RPC server whose allocator fails the k-th allocation after a
 * point, for every k in turn. */
#include <stdatomic.h>
#include <stdlib.h>

#include "rpc_raw.h"
#include "rpcrdma/rpc.h"
#include "test.h"
#include "xprt_harness.h"

#define PROG 0x20000777u
#define P_ECHO 1u

/* Fails one allocation: the @countdown-th from when it is set. */
struct fenv {
	struct rpcrdma_env env;
	atomic_long countdown;
	atomic_long failed;
};

static void *fenv_alloc(void *ctx, size_t size)
{
	struct fenv *f = ctx;

	if (atomic_load(&f->countdown) > 0 && atomic_fetch_sub(&f->countdown, 1) == 1) {
		atomic_fetch_add(&f->failed, 1);
		return NULL;
	}
	return malloc(size);
}

static void fenv_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

static void fenv_init(struct fenv *f)
{
	const struct rpcrdma_env *d = rpcrdma_env_default();

	memset(f, 0, sizeof(*f));
	f->env = *d;
	f->env.alloc = fenv_alloc;
	f->env.free = fenv_free;
	f->env.alloc_ctx = f;
}

static int echo(struct rpcrdma_req *req, void *ctx)
{
	uint32_t v;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(req), v);
	return RPCRDMA_SVC_OK;
}

/* An inline RDMA_MSG Call of P_ECHO(@arg), no chunks. */
static size_t call_msg(uint8_t *b, uint32_t xid, uint32_t arg)
{
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, 1);
	rr_put_be32(b + 8, 8);
	rr_put_be32(b + 12, 0);   /* RDMA_MSG */
	rr_put_be32(b + 16, 0);   /* no Read list */
	rr_put_be32(b + 20, 0);   /* no Write list */
	rr_put_be32(b + 24, 0);   /* no Reply chunk */
	return 28 + rpc_raw_call(b + 28, xid, PROG, 1, P_ECHO, &arg, 1);
}

enum answer { A_NONE, A_REPLY, A_SYSTEM_ERR, A_ERR_CHUNK, A_OTHER };

/* What came back for @xid in @r (@n bytes). */
static enum answer classify(const uint8_t *r, int n, uint32_t xid, uint32_t arg)
{
	if (n < 16 || rr_get_be32(r) != xid)
		return A_OTHER;
	if (rr_get_be32(r + 12) == 4)   /* RDMA_ERROR */
		return n >= 20 && rr_get_be32(r + 16) == 2 ? A_ERR_CHUNK : A_OTHER;
	/* RDMA_MSG, empty lists, then the RPC Reply: xid REPLY ACCEPTED
	 * verf(0,0) stat [result] */
	if (n < 28 + 24 || rr_get_be32(r + 12) != 0)
		return A_OTHER;
	r += 28;
	n -= 28;
	if (rr_get_be32(r + 20) == 5)   /* SYSTEM_ERR */
		return A_SYSTEM_ERR;
	if (rr_get_be32(r + 20) == 0 && n >= 28 && rr_get_be32(r + 24) == arg)
		return A_REPLY;
	return A_OTHER;
}

TEST(server_refuse_never_silent)
{
	static struct fenv fe;
	struct rpcrdma_server_opts o = {.threads = 2};
	struct rpcrdma_server *s;
	struct rr_th_rogue g;
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	unsigned counts[A_OTHER + 1] = {0};
	uint8_t m[256], r[4096];
	int port, n0;

	if (!rr_th_soft_ok())
		return;
	fenv_init(&fe);
	o.env = &fe.env;
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_ECHO, echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	port = rpcrdma_server_port(s);
	REQUIRE_EQ(rr_th_rogue_open(&g, port, pd, 8, false), 0);
	/* warm up: spares and caches allocated once */
	for (uint32_t i = 0; i < 4; i++) {
		int n = rr_th_rogue_xchg(&g, m, call_msg(m, 0x100 + i, i), r, 5000);

		REQUIRE_EQ(classify(r, n, 0x100 + i, i), A_REPLY);
	}
	/* Each k on a connection of its own, opened before the countdown
	 * starts: a session keeps its freed requests for its next Calls
	 * (proto/conn spare_reqs), so only a session's first Calls allocate
	 * on the Call's own way once the server-wide spares are warm. */
	for (long k = 1; k <= 12; k++) {
		uint32_t xid = 0x1000 + (uint32_t)k;
		struct rr_th_rogue g2;
		int n;
		enum answer a;

		REQUIRE_EQ(rr_th_rogue_open(&g2, port, pd, 8, false), 0);
		atomic_store(&fe.countdown, k);
		n = rr_th_rogue_xchg(&g2, m, call_msg(m, xid, (uint32_t)k), r, 5000);
		a = n > 0 ? classify(r, n, xid, (uint32_t)k) : A_NONE;
		if (a == A_NONE || a == A_OTHER)
			printf("  allocation %ld failed: answer %d (length %d)\n", k, (int)a, n);
		CHECK(a != A_NONE && a != A_OTHER);
		counts[a]++;
		atomic_store(&fe.countdown, 0);
		/* the next Call is served as usual */
		n = rr_th_rogue_xchg(&g2, m, call_msg(m, xid + 0x10000, 7), r, 5000);
		REQUIRE_EQ(classify(r, n, xid + 0x10000, 7), A_REPLY);
		rr_th_rogue_close(&g2);
	}
	/* and the first connection is still served */
	n0 = rr_th_rogue_xchg(&g, m, call_msg(m, 0x200, 9), r, 5000);
	REQUIRE_EQ(classify(r, n0, 0x200, 9), A_REPLY);
	printf("  answers: reply %u, SYSTEM_ERR %u, ERR_CHUNK %u; allocations failed %ld\n",
	       counts[A_REPLY], counts[A_SYSTEM_ERR], counts[A_ERR_CHUNK],
	       (long)atomic_load(&fe.failed));
	/* some failure hit the Call's own way (not only later ones) */
	CHECK(counts[A_SYSTEM_ERR] + counts[A_ERR_CHUNK] > 0);
	rr_th_rogue_close(&g);
	rpcrdma_server_destroy(s);
}
