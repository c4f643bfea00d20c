/* SPDX-License-Identifier: BSD-2-Clause */
/* The chunk table of a responder's shared receive pool (src/transport/rdma/
 * pool.c buf_get): a pool grows by taking the lowest chunk not mapped and
 * looks only at the chunks below the highest one mapped, never at the rest
 * of the table (a chunk per 64 Receives of the pool's capacity: 1,024
 * entries, 152 KiB at the default). Reading all of it cost a shard's first
 * connection 31 page faults before its MPA Reply (issue 16 part AT). Here
 * the table is swapped for one whose pages after the first cannot be read:
 * a look beyond the chunks in use ends the test with SIGSEGV. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rpcrdma/env.h"
#include "rpcrdma/rdma.h"
#include "test.h"
#include "transport/rdma/tp_int.h"

TEST(xprt_pool_growth_reads_only_the_chunks_in_use)
{
	struct tp_ep ep;
	struct rpcrdma_context *ctx;
	struct tp_pool *p;
	struct tp_chunk *orig, *t;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len, maplen;
	uint32_t want = 2 * TP_POOL_CHUNK + 1;   /* three chunks */

	memset(&ep, 0, sizeof(ep));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	ep.ctx = ctx;
	ep.env = rpcrdma_env_default();
	ep.conf.inline_recv = 1024;
	REQUIRE_EQ(tp_pool_create(&ep, 0, &p), 0);
	len = sizeof(*p->chunks) * p->nchunks;
	maplen = (len + pg - 1) / pg * pg;
	/* the default capacity: a table of more pages than the chunks used
	 * here fill, which all fit in its first page */
	REQUIRE(maplen >= 3 * pg);
	REQUIRE(3 * sizeof(*p->chunks) <= pg);
	t = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(t != MAP_FAILED);
	REQUIRE_EQ(mprotect((char *)t + pg, maplen - pg, PROT_NONE), 0);
	orig = p->chunks;
	p->chunks = t;

	/* the first fill (a shard's first connection: its reservation and
	 * the spare), then two more chunks' worth */
	p->cred.reserved = 1;
	tp_pool_fill(p);
	CHECK_EQ(ep.stats.pool_grown, 1 + TP_POOL_SPARE);
	CHECK(t[0].mem != NULL);
	CHECK(t[1].mem == NULL);
	p->cred.reserved = want - TP_POOL_SPARE;
	tp_pool_fill(p);
	CHECK_EQ(ep.stats.pool_grown, want);
	CHECK_EQ(p->cred.posted, want);
	/* the lowest chunks, in order: the first two used up, the third
	 * holding the one more */
	CHECK(t[0].mem != NULL && t[1].mem != NULL && t[2].mem != NULL);
	CHECK_EQ(t[0].nfree, 0);
	CHECK_EQ(t[1].nfree, 0);
	CHECK_EQ(t[2].nfree, TP_POOL_CHUNK - 1);
	CHECK_EQ(p->hi, 3);

	memcpy(orig, t, 3 * sizeof(*t));
	p->chunks = orig;
	munmap(t, maplen);
	tp_pool_destroy(p);
	rpcrdma_close(ctx);
}
