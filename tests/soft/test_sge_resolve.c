/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's resolution of a work request's local SGEs
 * (src/rdma/soft/soft.h): the one-SGE path (sge_resolve_one, every Send
 * and Receive the transport posts) against the general loop
 * (sge_resolve_all), proven equal by a differential run over random SGEs
 * (lkeys of live, re-registered, deregistered and foreign MRs and of a
 * window, addresses around and past the regions, lengths 0, small, at the
 * edges and huge), two PDs and both access rights, with the STag table
 * changing between the checks: the same result, the same outputs written
 * in the same cases, the same cache state and the same count of table
 * look-ups after each. */
#include "test.h"

#include <stdlib.h>

#include "rdma/mr_table.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"

#define PD_A ((const void *)0x1000)
#define PD_B ((const void *)0x2000)

struct sge_rng {
	uint64_t s;
};

static uint32_t sge_rnd(struct sge_rng *g, uint32_t n)
{
	g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(g->s >> 33) % n;
}

static struct rr_mrt_region sge_region(uint8_t *buf, uint64_t len, uint32_t access)
{
	struct rr_mrt_region r = {
		.addr = buf, .length = len, .base_to = (uint64_t)(uintptr_t)buf,
		.access = access, .durable_fd = -1,
	};
	return r;
}

TEST(soft_sge_resolve_one_as_all)
{
	enum { NMR = 4, ROUNDS = 300000 };
	static uint8_t buf[NMR][256];
	const void *pds[2] = {PD_A, PD_B};
	const uint32_t rights[] = {0, RPCRDMA_ACCESS_LOCAL_WRITE,
				   RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_READ};
	struct rr_mrt t;
	struct rr_mrt_lcache ca = {0}, cb = {0};
	uint32_t mr[NMR] = {0}, mw = 0, dead[4] = {0};
	struct sge_rng g = {0x5ce1};
	uint64_t oks = 0, fails = 0, empties = 0, hits = 0;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	for (int round = 0; round < ROUNDS; round++) {
		uint32_t op = sge_rnd(&g, 100), i = sge_rnd(&g, NMR);

		if (op < 3) {          /* register (again) MR i */
			struct rr_mrt_region r = sge_region(buf[i] + sge_rnd(&g, 8),
							    64 + sge_rnd(&g, 129),
							    rights[sge_rnd(&g, 3)]);

			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[sge_rnd(&g, 4)] = mr[i], mr[i] = 0;
			if (!mr[i] && rr_mrt_reg(&t, &r, pds[sge_rnd(&g, 4) == 0], NULL, &mr[i]))
				mr[i] = 0;
		} else if (op < 5) {   /* rereg MR i */
			struct rr_mrt_region r = sge_region(buf[i] + sge_rnd(&g, 16),
							    32 + sge_rnd(&g, 200),
							    rights[sge_rnd(&g, 3)]);
			uint32_t old = mr[i];

			if (mr[i] && rr_mrt_rereg(&t, &mr[i], &r) == 0)
				dead[sge_rnd(&g, 4)] = old;
		} else if (op < 6) {   /* dereg MR i */
			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[sge_rnd(&g, 4)] = mr[i], mr[i] = 0;
		} else {               /* one SGE, resolved both ways */
			const void *pd = pds[sge_rnd(&g, 8) == 0];
			uint32_t need = sge_rnd(&g, 2) ? RPCRDMA_ACCESS_LOCAL_WRITE : 0;
			uint32_t k = sge_rnd(&g, 10), ta = 0xdeadbeef, tb = 0xdeadbeef;
			unsigned na = 77, nb = 77;
			struct iovec va[2], vb[2];
			struct rpcrdma_sge sg;
			uint64_t m0, m1, m2;
			int ra, rb;

			if (k < 6 && ca.gen)
				sg.lkey = ca.stag;
			else if (k < 8)
				sg.lkey = mr[i];
			else if (k < 9)
				sg.lkey = mw;
			else
				sg.lkey = dead[sge_rnd(&g, 4)];
			if (k < 6 && ca.gen) {
				pd = sge_rnd(&g, 8) ? ca.pd : pd;
				sg.addr = (uint64_t)(uintptr_t)ca.r.addr +
					  sge_rnd(&g, (uint32_t)ca.r.length + 5) - 2;
			} else {
				sg.addr = (uint64_t)(uintptr_t)buf[i] + sge_rnd(&g, 260);
			}
			switch (sge_rnd(&g, 8)) {
			case 0:
				sg.length = 0;
				break;
			case 1:
				sg.length = UINT32_MAX - sge_rnd(&g, 4);
				break;
			case 2:   /* to the region's end, or one past it */
				sg.length = ca.gen ? (uint32_t)(ca.r.length -
								(sg.addr - (uint64_t)(uintptr_t)ca.r.addr)) +
							     sge_rnd(&g, 2)
						   : 1;
				break;
			default:
				sg.length = 1 + sge_rnd(&g, 96);
			}
			memset(va, 0x5a, sizeof(va));
			memset(vb, 0x5a, sizeof(vb));
			REQUIRE(memcmp(&ca, &cb, sizeof(ca)) == 0);
			m0 = rr_mrt_local_misses(&t);
			ra = sge_resolve_one(&t, pd, &ca, &sg, need, va, &na, &ta);
			m1 = rr_mrt_local_misses(&t);
			rb = sge_resolve_all(&t, pd, &cb, &sg, 1, need, vb, &nb, &tb);
			m2 = rr_mrt_local_misses(&t);
			CHECK_EQ(ra, rb);
			CHECK_EQ(na, nb);
			CHECK_EQ(ta, tb);
			CHECK(memcmp(va, vb, sizeof(va)) == 0);
			CHECK_EQ(m1 - m0, m2 - m1);
			CHECK(memcmp(&ca, &cb, sizeof(ca)) == 0);
			if (ra != rb || na != nb || ta != tb || memcmp(va, vb, sizeof(va)) ||
			    memcmp(&ca, &cb, sizeof(ca)))
				break;
			if (ra)
				fails++;
			else if (!sg.length)
				empties++;
			else
				oks++;
			hits += m1 == m0 && sg.length;
		}
	}
	/* every kind of outcome reached, most resolutions cache hits */
	CHECK(oks > 20000);
	CHECK(fails > 20000);
	CHECK(empties > 10000);
	CHECK(hits > 20000);
	rr_mrt_fini(&t);
}

/* The general loop over a chain of SGEs, with an empty one among them,
 * and its failure part-way (as many resolved as passed, no total), and
 * the one-SGE path on the same SGEs: known answers. */
TEST(soft_sge_resolve_chain)
{
	static uint8_t buf[512];
	struct rr_mrt t;
	struct rr_mrt_lcache c = {0};
	struct rr_mrt_region r = sge_region(buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE);
	uint32_t lkey, tot = 0;
	struct iovec v[4];
	unsigned n = 0;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &lkey), 0);
	{
		struct rpcrdma_sge sg[4] = {{(uint64_t)(uintptr_t)buf, 10, lkey},
					    {(uint64_t)(uintptr_t)buf + 10, 0, lkey},
					    {(uint64_t)(uintptr_t)buf + 20, 30, lkey},
					    {(uint64_t)(uintptr_t)buf + 500, 12, lkey}};

		REQUIRE_EQ(sge_resolve_all(&t, PD_A, &c, sg, 4, 0, v, &n, &tot), 0);
		CHECK_EQ(n, 3);
		CHECK_EQ(tot, 52);
		CHECK(v[0].iov_base == buf && v[0].iov_len == 10);
		CHECK(v[1].iov_base == buf + 20 && v[1].iov_len == 30);
		CHECK(v[2].iov_base == buf + 500 && v[2].iov_len == 12);
		/* the last one past the end: as many as resolved, the errno */
		sg[3].length = 13;
		tot = 7;
		CHECK_EQ(sge_resolve_all(&t, PD_A, &c, sg, 4, 0, v, &n, &tot), -ERANGE);
		CHECK_EQ(n, 2);
		CHECK_EQ(tot, 7);
		CHECK_EQ(sge_resolve_one(&t, PD_A, &c, &sg[3], 0, v, &n, &tot), -ERANGE);
		CHECK_EQ(n, 0);
		CHECK_EQ(tot, 7);
		CHECK_EQ(sge_resolve_one(&t, PD_B, &c, &sg[0], 0, v, &n, &tot), -EPERM);
		CHECK_EQ(sge_resolve_one(&t, PD_A, &c, &sg[1], 0, v, &n, &tot), 0);
		CHECK_EQ(n, 0);
		CHECK_EQ(tot, 0);
	}
	rr_mrt_fini(&t);
}
