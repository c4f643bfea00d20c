/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the STag table (src/rdma/mr_table.c; RFC 5040 section 2.1 STags
 * and the protection checks of section 5.1 / error codes of 7.1):
 * registration and lookup, bounds and wrap, access rights, key rotation,
 * invalidation, PD and QP association, slot reuse and retirement, failing
 * allocations. */
#include "test.h"

#include <unistd.h>
#include "rdma/mr_table.h"
#include "rpcrdma/rdma.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define PD_A ((const void *)0x1000)
#define PD_B ((const void *)0x2000)
#define QP_A ((const void *)0x3000)
#define QP_B ((const void *)0x4000)

static struct rr_mrt_region region(uint8_t *buf, uint64_t len, uint32_t access)
{
	struct rr_mrt_region r = {
		.addr = buf, .length = len, .base_to = (uint64_t)(uintptr_t)buf,
		.access = access, .durable_fd = -1,
	};
	return r;
}

TEST(rdma_mrt_reg_lookup)
{
	struct rr_test_env te;
	struct rr_mrt t;
	uint8_t buf[100];
	uint32_t stag = 0;
	struct rr_mrt_ref ref;
	struct rr_mrt_region r = region(buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
						      RPCRDMA_ACCESS_REMOTE_READ);
	uint64_t base = (uint64_t)(uintptr_t)buf;

	rr_test_env_init(&te, 1);
	REQUIRE_EQ(rr_mrt_init(&t, &te.env, 8), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, buf, &stag), 0);
	CHECK(stag != 0);
	CHECK_EQ(rr_mrt_live(&t), 1);
	REQUIRE_EQ(rr_mrt_check(&t, stag, base + 10, 20, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
				&ref), 0);
	CHECK(ref.ptr == buf + 10);
	CHECK(ref.owner == buf);
	CHECK_EQ(ref.kind, RR_MRT_MR);
	CHECK(!ref.durable);
	/* local access with local write */
	CHECK_EQ(rr_mrt_check(&t, stag, base, 100, RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE,
			      PD_A, NULL, &ref), 0);
	CHECK(ref.ptr == buf);
	/* a different key, same index: invalid STag */
	CHECK_EQ(rr_mrt_check(&t, stag ^ 1, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ENOENT);
	/* an index never handed out, and index 0 */
	CHECK_EQ(rr_mrt_check(&t, stag + 0x100, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
			      NULL), -ENOENT);
	CHECK_EQ(rr_mrt_check(&t, stag & 0xff, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
			      NULL), -ENOENT);
	CHECK_EQ(rr_mrt_check(&t, 0, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ENOENT);
	REQUIRE_EQ(rr_mrt_dereg(&t, stag), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ENOENT);
	CHECK_EQ(rr_mrt_dereg(&t, stag), -ENOENT);
	CHECK_EQ(rr_mrt_live(&t), 0);
	rr_mrt_fini(&t);
	CHECK_EQ(te.live, 0);
}

TEST(rdma_mrt_bounds)
{
	struct rr_mrt t;
	uint8_t buf[64];
	uint32_t stag;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	const uint32_t rd = RPCRDMA_ACCESS_REMOTE_READ;
	struct rr_mrt_region r = region(buf, 64, rd);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base, 64, rd, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base, 65, rd, PD_A, QP_A, NULL), -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, stag, base - 1, 1, rd, PD_A, QP_A, NULL), -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, stag, base + 63, 1, rd, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base + 63, 2, rd, PD_A, QP_A, NULL), -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, stag, base + 64, 1, rd, PD_A, QP_A, NULL), -ERANGE);
	/* zero length: allowed up to one past the end, not beyond */
	CHECK_EQ(rr_mrt_check(&t, stag, base + 64, 0, rd, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base + 65, 0, rd, PD_A, QP_A, NULL), -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, stag, base - 1, 0, rd, PD_A, QP_A, NULL), -ERANGE);
	/* zero length still needs a valid STag and the right */
	CHECK_EQ(rr_mrt_check(&t, stag ^ 0x80, base, 0, rd, PD_A, QP_A, NULL), -ENOENT);
	CHECK_EQ(rr_mrt_check(&t, stag, base, 0, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A, NULL),
		 -EACCES);
	/* offset + length wrapping 64 bits: TO wrap, not a bounds pass */
	CHECK_EQ(rr_mrt_check(&t, stag, base + 1, UINT64_MAX, rd, PD_A, QP_A, NULL), -EOVERFLOW);
	CHECK_EQ(rr_mrt_check(&t, stag, UINT64_MAX, 2, rd, PD_A, QP_A, NULL), -EOVERFLOW);
	CHECK_EQ(rr_mrt_check(&t, stag, base, UINT64_MAX - base, rd, PD_A, QP_A, NULL), -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, stag, UINT64_MAX, 0, rd, PD_A, QP_A, NULL), -ERANGE);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_region_wrap_refused)
{
	struct rr_mrt t;
	uint8_t buf[16];
	uint32_t stag;
	struct rr_mrt_region r = region(buf, 16, RPCRDMA_ACCESS_REMOTE_READ);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	r.base_to = UINT64_MAX - 14; /* last byte would be at 2^64 */
	CHECK_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), -EOVERFLOW);
	r.base_to = UINT64_MAX - 15; /* last byte exactly UINT64_MAX */
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, UINT64_MAX - 15, 16, RPCRDMA_ACCESS_REMOTE_READ, PD_A,
			      QP_A, NULL), -EOVERFLOW); /* to + len = 2^64 */
	CHECK_EQ(rr_mrt_check(&t, stag, UINT64_MAX - 15, 15, RPCRDMA_ACCESS_REMOTE_READ, PD_A,
			      QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_rereg(&t, &stag, &(struct rr_mrt_region){.addr = buf, .length = 2,
					  .base_to = UINT64_MAX}), -EOVERFLOW);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_access_rights)
{
	struct rr_mrt t;
	uint8_t buf[32];
	uint32_t ro, rw, lo;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_region r;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	r = region(buf, 32, RPCRDMA_ACCESS_REMOTE_READ);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &ro), 0);
	r = region(buf, 32, RPCRDMA_ACCESS_REMOTE_WRITE | RPCRDMA_ACCESS_LOCAL_WRITE);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &rw), 0);
	r = region(buf, 32, 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &lo), 0);

	CHECK_EQ(rr_mrt_check(&t, ro, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, ro, base, 4, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A, NULL),
		 -EACCES);
	CHECK_EQ(rr_mrt_check(&t, rw, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -EACCES);
	CHECK_EQ(rr_mrt_check(&t, rw, base, 4, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, lo, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -EACCES);
	/* local: reading (send source) needs nothing; writing needs LOCAL_WRITE */
	CHECK_EQ(rr_mrt_check(&t, lo, base, 4, RR_MRT_LOCAL, PD_A, NULL, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, lo, base, 4, RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, PD_A,
			      NULL, NULL), -EACCES);
	CHECK_EQ(rr_mrt_check(&t, ro, base, 4, RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, PD_A,
			      NULL, NULL), -EACCES);
	CHECK_EQ(rr_mrt_check(&t, rw, base, 4, RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, PD_A,
			      NULL, NULL), 0);
	/* unknown access bits are a caller error */
	CHECK_EQ(rr_mrt_check(&t, rw, base, 4, 1u << 20, PD_A, QP_A, NULL), -EINVAL);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_wrong_pd)
{
	struct rr_mrt t;
	uint8_t buf[32];
	uint32_t mr, mw;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_region r = region(buf, 32, RPCRDMA_ACCESS_ALL);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &mr), 0);
	/* remotely, another PD's STag looks unknown (no oracle); locally the
	 * owner learns why */
	CHECK_EQ(rr_mrt_check(&t, mr, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_B, QP_B, NULL),
		 -ENOENT);
	CHECK_EQ(rr_mrt_check(&t, mr, base, 4, RR_MRT_LOCAL, PD_B, NULL, NULL), -EPERM);
	/* a window of PD_B cannot be bound over an MR of PD_A */
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_B, NULL, &mw), 0);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, mr, base, 8, RPCRDMA_ACCESS_REMOTE_READ, PD_B, QP_B, base),
		 -EPERM);
	/* nor bound by a QP of another PD than the window's */
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, mr, base, 8, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, base),
		 -EPERM);
	REQUIRE_EQ(rr_mrt_mw_free(&t, mw), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, mr, base, 8, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, base),
		   0);
	CHECK_EQ(rr_mrt_check(&t, mw, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_B, QP_A, NULL),
		 -ENOENT);
	CHECK_EQ(rr_mrt_invalidate(&t, mw, PD_B, NULL), -EPERM);
	CHECK_EQ(rr_mrt_invalidate(&t, mw, PD_B, QP_A), -ENOENT);
	/* another PD's MR: not "cannot invalidate" (that would say it exists) */
	CHECK_EQ(rr_mrt_invalidate(&t, mr, PD_B, QP_B), -ENOENT);
	CHECK_EQ(rr_mrt_invalidate(&t, mr, PD_A, QP_A), -EINVAL);
	CHECK_EQ(rr_mrt_check(&t, mw, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL), 0);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_rereg_rotates_key)
{
	struct rr_test_env te;
	struct rr_mrt t;
	uint8_t buf[32], buf2[16];
	uint32_t stag, old;
	uint64_t base = (uint64_t)(uintptr_t)buf, base2 = (uint64_t)(uintptr_t)buf2;
	struct rr_mrt_region r = region(buf, 32, RPCRDMA_ACCESS_REMOTE_READ);
	struct rr_mrt_region r2 = region(buf2, 16, RPCRDMA_ACCESS_REMOTE_READ);

	rr_test_env_init(&te, 7);
	REQUIRE_EQ(rr_mrt_init(&t, &te.env, 4), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), 0);
	for (int i = 0; i < 600; i++) {
		old = stag;
		REQUIRE_EQ(rr_mrt_rereg(&t, &stag, (i & 1) ? &r : &r2), 0);
		CHECK(stag != old);
		CHECK(stag != 0);
		CHECK_EQ(rr_mrt_check(&t, old, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
			 -ENOENT);
		CHECK_EQ(rr_mrt_check(&t, old, base2, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
				      NULL), -ENOENT);
	}
	/* the last rereg (i = 599, odd) installed r */
	CHECK_EQ(rr_mrt_check(&t, stag, base + 31, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
			      NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, base2, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 buf2 >= buf + 32 || buf2 + 16 <= buf ? -ERANGE : 0);
	/* rereg of an unknown / dead STag */
	old = stag ^ 0x55;
	CHECK_EQ(rr_mrt_rereg(&t, &old, &r), -ENOENT);
	rr_mrt_fini(&t);
}

/* Every STag a slot ever issues is distinct: keys within an epoch, then
 * epochs, then the slot is retired and the registration moves. */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

TEST(rdma_mrt_stags_never_repeat)
{
	struct rr_test_env te;
	struct rr_mrt t;
	uint8_t buf[8];
	uint32_t stag;
	struct rr_mrt_region r = region(buf, 8, RPCRDMA_ACCESS_REMOTE_READ);
	/* slot_bits 20: 4 epoch bits, 16 * 256 = 4096 STags per slot */
	const unsigned n = 4096 * 2 + 10;
	uint32_t *all = calloc(n, sizeof(uint32_t));
	unsigned key_hist[256] = {0};

	REQUIRE(all);
	rr_test_env_init(&te, 99);
	REQUIRE_EQ(rr_mrt_init(&t, &te.env, 20), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), 0);
	for (unsigned i = 0; i < n; i++) {
		all[i] = stag;
		key_hist[stag & 0xff]++;
		REQUIRE_EQ(rr_mrt_rereg(&t, &stag, &r), 0);
		/* only the newest STag grants access */
		CHECK_EQ(rr_mrt_check(&t, all[i], (uint64_t)(uintptr_t)buf, 1,
				      RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL), -ENOENT);
	}
	qsort(all, n, sizeof(uint32_t), cmp_u32);
	for (unsigned i = 1; i < n; i++)
		CHECK(all[i] != all[i - 1]);
	CHECK_EQ(rr_mrt_retired(&t), 2);
	CHECK_EQ(rr_mrt_live(&t), 1);
	/* every key value was drawn (random order, all 256 per epoch) */
	for (int k = 0; k < 256; k++)
		CHECK(key_hist[k] >= 32);
	CHECK_EQ(rr_mrt_check(&t, stag, (uint64_t)(uintptr_t)buf, 8, RPCRDMA_ACCESS_REMOTE_READ,
			      PD_A, QP_A, NULL), 0);
	free(all);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_keys_unpredictable_per_seed)
{
	struct rr_test_env te1, te2;
	struct rr_mrt t1, t2;
	uint8_t buf[8];
	uint32_t s1, s2;
	int same = 0;
	struct rr_mrt_region r = region(buf, 8, RPCRDMA_ACCESS_REMOTE_READ);

	rr_test_env_init(&te1, 1);
	rr_test_env_init(&te2, 2);
	REQUIRE_EQ(rr_mrt_init(&t1, &te1.env, 8), 0);
	REQUIRE_EQ(rr_mrt_init(&t2, &te2.env, 8), 0);
	REQUIRE_EQ(rr_mrt_reg(&t1, &r, PD_A, NULL, &s1), 0);
	REQUIRE_EQ(rr_mrt_reg(&t2, &r, PD_A, NULL, &s2), 0);
	for (int i = 0; i < 64; i++) {
		same += (s1 & 0xff) == (s2 & 0xff);
		CHECK_EQ(s1 >> 8 & 0xff, s2 >> 8 & 0xff); /* same slot */
		REQUIRE_EQ(rr_mrt_rereg(&t1, &s1, &r), 0);
		REQUIRE_EQ(rr_mrt_rereg(&t2, &s2, &r), 0);
	}
	CHECK(same < 8); /* two random streams agree about 1 in 256 */
	rr_mrt_fini(&t1);
	rr_mrt_fini(&t2);
}

TEST(rdma_mrt_window_bind_invalidate)
{
	struct rr_mrt t;
	uint8_t buf[64];
	uint32_t mr, mw, first, second;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_ref ref;
	struct rr_mrt_region r = region(buf, 64, RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &mr), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, (void *)&t, &mw), 0);
	/* unbound: not usable */
	CHECK_EQ(rr_mrt_check(&t, mw, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ENOENT);
	first = mw;
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, mr, base + 16, 32,
				  RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_REMOTE_WRITE, PD_A,
				  QP_A, base + 16), 0);
	CHECK(mw != first);
	CHECK_EQ(mw >> 8, first >> 8); /* same index, new key */
	REQUIRE_EQ(rr_mrt_check(&t, mw, base + 16, 32, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A,
				&ref), 0);
	CHECK(ref.ptr == buf + 16);
	CHECK(ref.owner == (void *)&t);
	CHECK_EQ(ref.kind, RR_MRT_MW);
	/* window bounds, not the parent's */
	CHECK_EQ(rr_mrt_check(&t, mw, base + 15, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ERANGE);
	CHECK_EQ(rr_mrt_check(&t, mw, base + 48, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ERANGE);
	/* a window is never an lkey */
	CHECK_EQ(rr_mrt_check(&t, mw, base + 16, 1, RR_MRT_LOCAL, PD_A, NULL, NULL), -ENOENT);
	/* type 2: only the QP it was bound on (another QP: as unknown) */
	CHECK_EQ(rr_mrt_check(&t, mw, base + 16, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_B, NULL),
		 -ENOENT);
	/* bound twice without invalidation */
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, mr, base, 8, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, base),
		 -EBUSY);
	/* the parent cannot go away or change while the window is valid */
	CHECK_EQ(rr_mrt_dereg(&t, mr), -EBUSY);
	CHECK_EQ(rr_mrt_rereg(&t, &mr, &r), -EBUSY);
	/* remote invalidation from another QP is refused (as unknown) */
	CHECK_EQ(rr_mrt_invalidate(&t, mw, PD_A, QP_B), -ENOENT);
	/* remote invalidation on its QP */
	REQUIRE_EQ(rr_mrt_invalidate(&t, mw, PD_A, QP_A), 0);
	CHECK_EQ(rr_mrt_check(&t, mw, base + 16, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL),
		 -ENOENT);
	CHECK_EQ(rr_mrt_invalidate(&t, mw, PD_A, QP_A), -ENOENT);
	CHECK_EQ(rr_mrt_invalidate(&t, mw, PD_A, NULL), -ENOENT);
	/* rebind: new key; the invalidated STag stays dead */
	second = mw;
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, mr, base, 64, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_B, base),
		   0);
	CHECK(mw != second);
	CHECK_EQ(rr_mrt_check(&t, second, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_B, NULL),
		 -ENOENT);
	CHECK_EQ(rr_mrt_check(&t, mw, base, 64, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_B, NULL), 0);
	/* local invalidation by the owner */
	REQUIRE_EQ(rr_mrt_invalidate(&t, mw, PD_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, mw, base, 1, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_B, NULL),
		 -ENOENT);
	/* now the parent may go */
	REQUIRE_EQ(rr_mrt_dereg(&t, mr), 0);
	REQUIRE_EQ(rr_mrt_mw_free(&t, mw), 0);
	CHECK_EQ(rr_mrt_live(&t), 0);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_mr_not_invalidatable)
{
	struct rr_mrt t;
	uint8_t buf[16];
	uint32_t mr;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_region r = region(buf, 16, RPCRDMA_ACCESS_REMOTE_READ);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &mr), 0);
	CHECK_EQ(rr_mrt_invalidate(&t, mr, PD_A, QP_A), -EINVAL);
	CHECK_EQ(rr_mrt_invalidate(&t, mr, PD_A, NULL), -EINVAL);
	/* still valid afterwards */
	CHECK_EQ(rr_mrt_check(&t, mr, base, 16, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, NULL), 0);
	/* and an MR is not a window: cannot be bound or freed as one */
	CHECK_EQ(rr_mrt_mw_bind(&t, &mr, mr, base, 4, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A, base),
		 -ENOENT);
	CHECK_EQ(rr_mrt_mw_free(&t, mr), -ENOENT);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_bind_checks)
{
	struct rr_mrt t;
	uint8_t buf[64];
	uint32_t nobind, ro, mw;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_region r;
	const uint32_t rd = RPCRDMA_ACCESS_REMOTE_READ, wr = RPCRDMA_ACCESS_REMOTE_WRITE;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	r = region(buf, 64, RPCRDMA_ACCESS_LOCAL_WRITE);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &nobind), 0);
	r = region(buf, 64, RPCRDMA_ACCESS_MW_BIND); /* no LOCAL_WRITE */
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &ro), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, nobind, base, 8, rd, PD_A, QP_A, base), -EACCES);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro, base, 8, wr, PD_A, QP_A, base), -EACCES);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro, base - 1, 8, rd, PD_A, QP_A, base - 1), -ERANGE);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro, base + 60, 8, rd, PD_A, QP_A, base + 60), -ERANGE);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro, base + 1, UINT64_MAX, rd, PD_A, QP_A, base + 1), -ERANGE);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro ^ 1, base, 8, rd, PD_A, QP_A, base), -ENOENT);
	CHECK_EQ(rr_mrt_mw_bind(&t, &mw, ro, base, 8, RPCRDMA_ACCESS_MW_BIND, PD_A, QP_A, base), -EINVAL);
	/* failed binds leave it unbound with its old STag */
	CHECK_EQ(rr_mrt_check(&t, mw, base, 1, rd, PD_A, QP_A, NULL), -ENOENT);
	/* zero-length window at the end of the parent */
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, ro, base + 64, 0, rd, PD_A, QP_A, base + 64), 0);
	CHECK_EQ(rr_mrt_check(&t, mw, base + 64, 0, rd, PD_A, QP_A, NULL), 0);
	CHECK_EQ(rr_mrt_check(&t, mw, base + 64, 1, rd, PD_A, QP_A, NULL), -ERANGE);
	/* freeing a bound window releases the parent */
	CHECK_EQ(rr_mrt_dereg(&t, ro), -EBUSY);
	REQUIRE_EQ(rr_mrt_mw_free(&t, mw), 0);
	CHECK_EQ(rr_mrt_dereg(&t, ro), 0);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_capacity_and_reuse)
{
	struct rr_mrt t;
	uint8_t buf[8];
	uint32_t s[4], again;
	struct rr_mrt_region r = region(buf, 8, RPCRDMA_ACCESS_REMOTE_READ);

	/* 4 slots, slot 0 never used: 3 registrations */
	REQUIRE_EQ(rr_mrt_init(&t, NULL, 2), 0);
	for (int i = 0; i < 3; i++)
		REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &s[i]), 0);
	CHECK_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &s[3]), -ENOSPC);
	CHECK_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &s[3]), -ENOSPC);
	REQUIRE_EQ(rr_mrt_dereg(&t, s[1]), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &again), 0);
	CHECK_EQ(again >> 8, s[1] >> 8); /* slot reused ... */
	CHECK(again != s[1]);            /* ... with another key */
	CHECK_EQ(rr_mrt_check(&t, s[1], (uint64_t)(uintptr_t)buf, 1, RPCRDMA_ACCESS_REMOTE_READ,
			      PD_A, QP_A, NULL), -ENOENT);
	CHECK_EQ(rr_mrt_init(&t, NULL, 1), -EINVAL);
	rr_mrt_fini(&t);
}

TEST(rdma_mrt_failing_alloc)
{
	struct rr_test_env te;
	struct rr_mrt t;
	uint8_t buf[8];
	uint32_t stag;
	struct rr_mrt_region r = region(buf, 8, RPCRDMA_ACCESS_REMOTE_READ);

	rr_test_env_init(&te, 3);
	te.fail_at = 1;
	CHECK_EQ(rr_mrt_init(&t, &te.env, 8), -ENOMEM);
	rr_test_env_init(&te, 3);
	te.fail_at = 2; /* the first chunk */
	REQUIRE_EQ(rr_mrt_init(&t, &te.env, 8), 0);
	CHECK_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), -ENOMEM);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &stag), 0);
	CHECK_EQ(rr_mrt_check(&t, stag, (uint64_t)(uintptr_t)buf, 8, RPCRDMA_ACCESS_REMOTE_READ,
			      PD_A, QP_A, NULL), 0);
	rr_mrt_fini(&t);
	CHECK_EQ(te.live, 0);
}

TEST(rdma_mrt_durable_window_ref)
{
	struct rr_mrt t;
	uint8_t buf[64];
	uint32_t mr, mw;
	uint64_t base = (uint64_t)(uintptr_t)buf;
	struct rr_mrt_ref ref;
	struct rr_mrt_region r = region(buf, 64, RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND);

	r.durable = true;
	r.durable_fd = 42;
	r.durable_offset = 4096;
	REQUIRE_EQ(rr_mrt_init(&t, NULL, 4), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &mr), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, mr, base + 8, 16, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A,
				  QP_A, base + 8), 0);
	REQUIRE_EQ(rr_mrt_check(&t, mw, base + 12, 4, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A,
				&ref), 0);
	CHECK(ref.durable);
	CHECK_EQ(ref.durable_fd, 42);
	CHECK_EQ(ref.durable_offset, 4096 + 12);
	rr_mrt_fini(&t);
}

/* Several checker threads validate accesses while the owner re-registers,
 * binds and invalidates: every check answers 0 or an invalid-STag error,
 * never a stale grant (a success through an STag the owner already retired
 * after the checker last saw it published would be a bug), and the table
 * stays consistent. Run under the sanitizer build for races on memory. */
#define MT_CHECKERS 3
#define MT_ROUNDS 20000

struct mt_state {
	struct rr_mrt *t;
	uint8_t *buf;
	_Atomic uint32_t cur_mw;      /* published valid window STag (0 = none) */
	_Atomic uint32_t dead[64];    /* recently invalidated STags */
	_Atomic int stop;
	_Atomic long grants, denials, bad;
};

static void *mt_checker(void *p)
{
	struct mt_state *s = p;
	uint64_t base = (uint64_t)(uintptr_t)s->buf;
	unsigned i = 0;

	while (!atomic_load(&s->stop)) {
		uint32_t st = atomic_load(&s->cur_mw);
		uint32_t dead = atomic_load(&s->dead[i++ % 64]);
		struct rr_mrt_ref ref;
		int rc;

		if (st) {
			rc = rr_mrt_check(s->t, st, base + 8, 8, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A,
					  QP_A, &ref);
			if (rc == 0 && ref.ptr == s->buf + 8)
				atomic_fetch_add(&s->grants, 1);
			else if (rc == -ENOENT)
				atomic_fetch_add(&s->denials, 1);
			else
				atomic_fetch_add(&s->bad, 1);
		}
		/* an STag that was invalidated never works again */
		if (dead && rr_mrt_check(s->t, dead, base + 8, 8, RPCRDMA_ACCESS_REMOTE_WRITE, PD_A,
					 QP_A, NULL) != -ENOENT)
			atomic_fetch_add(&s->bad, 1);
	}
	return NULL;
}

TEST(rdma_mrt_multithread_bind_invalidate)
{
	struct rr_mrt t;
	static uint8_t buf[4096];
	struct mt_state s = {.t = &t, .buf = buf};
	pthread_t th[MT_CHECKERS];
	uint32_t mr, mw, other;
	struct rr_mrt_region r = region(buf, sizeof(buf),
					RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND);
	struct rr_mrt_region r2 = region(buf, 64, RPCRDMA_ACCESS_REMOTE_READ);

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, NULL, &mr), 0);
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r2, PD_A, NULL, &other), 0);
	for (int i = 0; i < MT_CHECKERS; i++)
		REQUIRE_EQ(pthread_create(&th[i], NULL, mt_checker, &s), 0);
	for (unsigned i = 0; i < MT_ROUNDS; i++) {
		REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, mr, (uint64_t)(uintptr_t)buf, 64,
					  RPCRDMA_ACCESS_REMOTE_WRITE, PD_A, QP_A, (uint64_t)(uintptr_t)buf), 0);
		atomic_store(&s.cur_mw, mw);
		/* the first round waits (bounded) until a checker has looked at
		 * a bound window: on a loaded machine the checkers may not run
		 * at all before the rounds are over */
		for (uint64_t dl = rr_test_deadline();
		     i == 0 && atomic_load(&s.grants) + atomic_load(&s.denials) == 0 &&
		     rr_test_wait_left(dl, "a checker looks at a bound window");)
			usleep(1000);
		/* churn another registration meanwhile */
		REQUIRE_EQ(rr_mrt_rereg(&t, &other, &r2), 0);
		atomic_store(&s.cur_mw, 0);
		REQUIRE_EQ(rr_mrt_invalidate(&t, mw, PD_A, (i & 1) ? QP_A : NULL), 0);
		atomic_store(&s.dead[i % 64], mw);
	}
	atomic_store(&s.stop, 1);
	for (int i = 0; i < MT_CHECKERS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(atomic_load(&s.bad), 0);
	CHECK(atomic_load(&s.grants) + atomic_load(&s.denials) > 0);
	CHECK_EQ(rr_mrt_live(&t), 3);
	CHECK_EQ(rr_mrt_mw_free(&t, mw), 0);
	CHECK_EQ(rr_mrt_dereg(&t, mr), 0);
	CHECK_EQ(rr_mrt_dereg(&t, other), 0);
	rr_mrt_fini(&t);
}

/* rr_mrt_check_local and its one-entry cache: the same answers as
 * rr_mrt_check, a filled cache after a success (and only then), and a
 * cached copy that dies with every rereg and dereg (a stale copy would pass
 * the old STag or the old region). */
TEST(rdma_mrt_local_cache)
{
	struct rr_mrt t;
	struct rr_mrt_lcache c = {0};
	struct rr_mrt_ref ref;
	uint8_t buf[64], buf2[32];
	uint32_t stag = 0, old, mw = 0;
	struct rr_mrt_region r = region(buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE |
						      RPCRDMA_ACCESS_MW_BIND);
	struct rr_mrt_region r2 = region(buf2, sizeof(buf2), RPCRDMA_ACCESS_LOCAL_WRITE);
	const uint32_t lw = RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE;
	uint64_t base = (uint64_t)(uintptr_t)buf;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 8), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, buf, &stag), 0);
	/* not a local access, no cache: refused */
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base, 1, RPCRDMA_ACCESS_LOCAL_WRITE, PD_A, &ref),
		 -EINVAL);
	CHECK_EQ(rr_mrt_check_local(&t, NULL, stag, base, 1, lw, PD_A, &ref), -EINVAL);
	CHECK_EQ(c.gen, 0);
	/* a miss fills it; a hit answers as the table */
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, base + 8, 16, lw, PD_A, &ref), 0);
	CHECK(ref.ptr == buf + 8);
	CHECK(c.gen != 0);
	CHECK_EQ(c.stag, stag);
	memset(&ref, 0, sizeof(ref));
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, base, 64, lw, PD_A, &ref), 0);
	CHECK(ref.ptr == buf);
	CHECK(ref.owner == buf);
	CHECK_EQ(ref.kind, RR_MRT_MR);
	CHECK(!ref.durable);
	CHECK_EQ(ref.durable_fd, -1);
	/* what the cached copy must still refuse */
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base + 60, 5, lw, PD_A, &ref), -ERANGE);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base - 1, 1, lw, PD_A, &ref), -ERANGE);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base, UINT64_MAX, lw, PD_A, &ref), -EOVERFLOW);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base, 1, lw, PD_B, &ref), -EPERM);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag ^ 1, base, 1, lw, PD_A, &ref), -ENOENT);
	/* a window never passes a local check */
	REQUIRE_EQ(rr_mrt_mw_alloc(&t, PD_A, NULL, &mw), 0);
	REQUIRE_EQ(rr_mrt_mw_bind(&t, &mw, stag, base, 8, RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
				  base), 0);
	CHECK_EQ(rr_mrt_check_local(&t, &c, mw, base, 1, lw, PD_A, &ref), -ENOENT);
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, base, 1, lw, PD_A, &ref), 0);
	REQUIRE_EQ(rr_mrt_mw_free(&t, mw), 0);
	/* rereg: the old STag dies, the new one names the new region */
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, base, 1, lw, PD_A, &ref), 0);
	old = stag;
	REQUIRE_EQ(rr_mrt_rereg(&t, &stag, &r2), 0);
	CHECK_EQ(rr_mrt_check_local(&t, &c, old, base, 1, lw, PD_A, &ref), -ENOENT);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, base, 1, lw, PD_A, &ref), -ERANGE);
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, (uint64_t)(uintptr_t)buf2, 32, lw, PD_A, &ref),
		   0);
	CHECK(ref.ptr == buf2);
	/* dereg: the cached STag dies */
	REQUIRE_EQ(rr_mrt_check_local(&t, &c, stag, (uint64_t)(uintptr_t)buf2, 1, lw, PD_A, &ref), 0);
	REQUIRE_EQ(rr_mrt_dereg(&t, stag), 0);
	CHECK_EQ(rr_mrt_check_local(&t, &c, stag, (uint64_t)(uintptr_t)buf2, 1, lw, PD_A, &ref),
		 -ENOENT);
	rr_mrt_fini(&t);
}

/* rr_mrt_local_ptr (a work request's SGE, its cache hit checked inline)
 * answers as rr_mrt_check_local: on a hit, on what the cached copy must
 * refuse, after a rereg and a dereg. */
TEST(rdma_mrt_local_ptr_as_check_local)
{
	struct rr_mrt t;
	struct rr_mrt_lcache c = {0};
	uint8_t buf[64], buf2[32], ro[16], *p = NULL;
	uint32_t stag = 0, rstag = 0, old;
	struct rr_mrt_region r = region(buf, sizeof(buf), RPCRDMA_ACCESS_LOCAL_WRITE);
	struct rr_mrt_region r2 = region(buf2, sizeof(buf2), RPCRDMA_ACCESS_LOCAL_WRITE);
	struct rr_mrt_region rr = region(ro, sizeof(ro), 0);
	const uint32_t lw = RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE;
	uint64_t base = (uint64_t)(uintptr_t)buf;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 8), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &r, PD_A, buf, &stag), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &rr, PD_A, ro, &rstag), 0);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 1, RPCRDMA_ACCESS_LOCAL_WRITE, PD_A, &p),
		 -EINVAL);
	/* a miss fills the cache, then hits */
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, stag, base + 8, 16, lw, PD_A, &p), 0);
	CHECK(p == buf + 8);
	CHECK_EQ(c.stag, stag);
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 64, lw, PD_A, &p), 0);
	CHECK(p == buf);
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, stag, base + 64, 0, lw, PD_A, &p), 0);
	CHECK(p == buf + 64);
	/* refused on a hit as by the table */
	p = NULL;
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base + 60, 5, lw, PD_A, &p), -ERANGE);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base + 65, 0, lw, PD_A, &p), -ERANGE);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base - 1, 1, lw, PD_A, &p), -ERANGE);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base, UINT64_MAX, lw, PD_A, &p), -EOVERFLOW);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 1, lw, PD_B, &p), -EPERM);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag ^ 1, base, 1, lw, PD_A, &p), -ENOENT);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 1, lw | (1u << 20), PD_A, &p), -EINVAL);
	CHECK(p == NULL);
	/* rights: a read-only MR cached (a good copy of another is replaced
	 * at the second miss in a row), then asked to be written */
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, rstag, (uint64_t)(uintptr_t)ro, 4, RR_MRT_LOCAL, PD_A,
				    &p), 0);
	CHECK(p == ro);
	CHECK_EQ(c.stag, stag);
	CHECK_EQ(c.pending, rstag);
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, rstag, (uint64_t)(uintptr_t)ro, 4, RR_MRT_LOCAL, PD_A,
				    &p), 0);
	CHECK_EQ(c.stag, rstag);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, rstag, (uint64_t)(uintptr_t)ro, 4, lw, PD_A, &p),
		 -EACCES);
	/* rereg and dereg move the table's generation: the copy is not used */
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 1, lw, PD_A, &p), 0);
	old = stag;
	REQUIRE_EQ(rr_mrt_rereg(&t, &stag, &r2), 0);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, old, base, 1, lw, PD_A, &p), -ENOENT);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, base, 1, lw, PD_A, &p), -ERANGE);
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, stag, (uint64_t)(uintptr_t)buf2, 32, lw, PD_A, &p), 0);
	CHECK(p == buf2);
	REQUIRE_EQ(rr_mrt_dereg(&t, stag), 0);
	CHECK_EQ(rr_mrt_local_ptr(&t, &c, stag, (uint64_t)(uintptr_t)buf2, 1, lw, PD_A, &p),
		 -ENOENT);
	rr_mrt_fini(&t);
}

/* A region registered for one work request (a Reply's Write source:
 * registered, checked once, deregistered) neither evicts the cached copy
 * of the MR checked again and again (the send buffers') nor, never cached
 * itself, makes its dereg kill that copy: one miss per round, the one-shot
 * region's own (two before: the copy evicted, then dead at the dereg). An
 * MR that misses twice in a row does replace the copy, and the dereg of an
 * MR a cache was filled with still kills it. */
TEST(rdma_mrt_local_cache_kept_through_one_shot_regions)
{
	enum { ROUNDS = 50 };
	struct rr_mrt t;
	struct rr_mrt_lcache c = {0};
	static uint8_t sbuf[256], wbuf[ROUNDS][64];
	uint8_t *p;
	uint32_t s = 0, w, x = 0;
	struct rr_mrt_region rs = region(sbuf, sizeof(sbuf), RPCRDMA_ACCESS_LOCAL_WRITE);
	const uint32_t lw = RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE;
	uint64_t m0;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 8), 0);
	REQUIRE_EQ(rr_mrt_reg(&t, &rs, PD_A, sbuf, &s), 0);
	REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, s, (uint64_t)(uintptr_t)sbuf, 8, lw, PD_A, &p), 0);
	/* another cache's MR deregistered: @c's copy is stale, but its STag
	 * is still good, so the first one-shot miss keeps it too */
	{
		struct rr_mrt_lcache c2 = {0};
		struct rr_mrt_region ry = region(wbuf[0], sizeof(wbuf[0]),
						 RPCRDMA_ACCESS_LOCAL_WRITE);
		uint64_t g0 = atomic_load(&t.mr_gen);

		REQUIRE_EQ(rr_mrt_reg(&t, &ry, PD_A, wbuf[0], &x), 0);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c2, x, (uint64_t)(uintptr_t)wbuf[0], 1, lw, PD_A,
					    &p), 0);
		REQUIRE_EQ(rr_mrt_dereg(&t, x), 0);
		CHECK(atomic_load(&t.mr_gen) != g0);
		x = 0;
	}
	m0 = rr_mrt_local_misses(&t);
	for (unsigned i = 0; i < ROUNDS; i++) {
		struct rr_mrt_region rw = region(wbuf[i], sizeof(wbuf[i]),
						 RPCRDMA_ACCESS_LOCAL_WRITE);

		w = 0;
		REQUIRE_EQ(rr_mrt_reg(&t, &rw, PD_A, wbuf[i], &w), 0);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, w, (uint64_t)(uintptr_t)wbuf[i], 64, lw, PD_A,
					    &p), 0);
		CHECK(p == wbuf[i]);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, s, (uint64_t)(uintptr_t)sbuf + 16, 32, lw, PD_A,
					    &p), 0);
		CHECK(p == sbuf + 16);
		REQUIRE_EQ(rr_mrt_dereg(&t, w), 0);
		CHECK_EQ(rr_mrt_local_ptr(&t, &c, w, (uint64_t)(uintptr_t)wbuf[i], 1, lw, PD_A, &p),
			 -ENOENT);
	}
	/* per round: the one-shot region's miss and its refused check after
	 * the dereg (a miss too); the send buffers' check always hit (the
	 * stale copy made good again at the first round's miss) */
	CHECK_EQ(rr_mrt_local_misses(&t) - m0, 2u * ROUNDS);
	CHECK_EQ(c.stag, s);
	/* from a one-shot region's copy (good, then dead at its dereg: the
	 * cycle where each one-shot region took the copy of the one before):
	 * the send buffers' MR, pending, gets it back within two rounds */
	{
		struct rr_mrt_region ry = region(wbuf[0], sizeof(wbuf[0]),
						 RPCRDMA_ACCESS_LOCAL_WRITE);
		uint64_t m1 = 0;

		REQUIRE_EQ(rr_mrt_reg(&t, &ry, PD_A, wbuf[0], &x), 0);
		for (int k = 0; k < 2; k++)
			REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, x, (uint64_t)(uintptr_t)wbuf[0], 1, lw,
						    PD_A, &p), 0);
		CHECK_EQ(c.stag, x);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, s, (uint64_t)(uintptr_t)sbuf, 1, lw, PD_A, &p),
			   0);
		CHECK_EQ(c.stag, x);
		REQUIRE_EQ(rr_mrt_dereg(&t, x), 0);
		x = 0;
		for (unsigned i = 0; i < ROUNDS; i++) {
			struct rr_mrt_region rw = region(wbuf[i], sizeof(wbuf[i]),
							 RPCRDMA_ACCESS_LOCAL_WRITE);

			if (i == 2)
				m1 = rr_mrt_local_misses(&t);
			w = 0;
			REQUIRE_EQ(rr_mrt_reg(&t, &rw, PD_A, wbuf[i], &w), 0);
			REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, w, (uint64_t)(uintptr_t)wbuf[i], 64, lw,
						    PD_A, &p), 0);
			REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, s, (uint64_t)(uintptr_t)sbuf, 32, lw,
						    PD_A, &p), 0);
			REQUIRE_EQ(rr_mrt_dereg(&t, w), 0);
		}
		/* from the third round on: the one-shot region's miss alone */
		CHECK_EQ(rr_mrt_local_misses(&t) - m1, ROUNDS - 2u);
		CHECK_EQ(c.stag, s);
	}
	/* two misses replace the copy; that MR's dereg kills it */
	{
		struct rr_mrt_region rx = region(wbuf[0], sizeof(wbuf[0]),
						 RPCRDMA_ACCESS_LOCAL_WRITE);

		REQUIRE_EQ(rr_mrt_reg(&t, &rx, PD_A, wbuf[0], &x), 0);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, x, (uint64_t)(uintptr_t)wbuf[0], 1, lw, PD_A,
					    &p), 0);
		CHECK_EQ(c.stag, s);
		REQUIRE_EQ(rr_mrt_local_ptr(&t, &c, x, (uint64_t)(uintptr_t)wbuf[0], 1, lw, PD_A,
					    &p), 0);
		CHECK_EQ(c.stag, x);
		REQUIRE_EQ(rr_mrt_dereg(&t, x), 0);
		CHECK_EQ(rr_mrt_local_ptr(&t, &c, x, (uint64_t)(uintptr_t)wbuf[0], 1, lw, PD_A, &p),
			 -ENOENT);
	}
	CHECK_EQ(rr_mrt_dereg(&t, s), 0);
	rr_mrt_fini(&t);
}

/* rr_mrt_check_remote (a QP's cache of the STag its last tagged segment
 * passed through) answers as rr_mrt_check, proven by a differential run:
 * random table changes (registration, rereg, dereg, window allocation,
 * bind, local and remote invalidation, free) between random remote
 * checks, each asked of both -- the same errno, and on success the same
 * reference (pointer, durable fields, owner, kind). Every change that can
 * make a passed check fail (an entry freed, a window invalidated, an entry
 * re-keyed) must move the table's rm_gen, else a copy answers for an STag
 * the table refuses. The checks are biased to the cached STag and to
 * ranges around its region's edges, so most of them are cache hits. */
struct mrt_rng {
	uint64_t s;
};

static uint32_t mrt_rnd(struct mrt_rng *g, uint32_t n)
{
	g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(g->s >> 33) % n;
}

TEST(rdma_mrt_remote_cache_as_check)
{
	enum { NMR = 4, NMW = 4, ROUNDS = 400000 };
	static uint8_t buf[NMR][128];
	const void *pds[2] = {PD_A, PD_B}, *qps[3] = {QP_A, QP_B, NULL};
	const uint32_t rights[] = {RPCRDMA_ACCESS_REMOTE_WRITE, RPCRDMA_ACCESS_REMOTE_READ,
				   RPCRDMA_ACCESS_REMOTE_WRITE | RPCRDMA_ACCESS_REMOTE_READ,
				   RPCRDMA_ACCESS_LOCAL_WRITE};
	struct rr_mrt t;
	struct rr_mrt_rcache c[2] = {{0}};   /* one per QP, as the provider's */
	uint32_t mr[NMR] = {0}, mw[NMW] = {0}, dead[8] = {0};
	const void *mrpd[NMR] = {0}, *mwpd[NMW] = {0};
	struct mrt_rng g = {0x5eed};
	uint64_t hits = 0, checks = 0, oks = 0;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	for (int round = 0; round < ROUNDS; round++) {
		uint32_t op = mrt_rnd(&g, 160), i = mrt_rnd(&g, NMR), j = mrt_rnd(&g, NMW);

		if (op < 4) {          /* register (again) MR i */
			struct rr_mrt_region r = region(buf[i], 64 + mrt_rnd(&g, 65),
							RPCRDMA_ACCESS_LOCAL_WRITE |
								RPCRDMA_ACCESS_MW_BIND |
								rights[mrt_rnd(&g, 3)]);

			r.base_to = mrt_rnd(&g, 2) ? (uint64_t)(uintptr_t)buf[i] : 1ull << 40;
			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[mrt_rnd(&g, 8)] = mr[i], mr[i] = 0;
			if (!mr[i]) {
				mrpd[i] = pds[mrt_rnd(&g, 2)];
				if (rr_mrt_reg(&t, &r, mrpd[i], buf[i], &mr[i]))
					mr[i] = 0;
			}
		} else if (op < 7) {   /* rereg MR i */
			struct rr_mrt_region r = region(buf[i] + mrt_rnd(&g, 16), 32 + mrt_rnd(&g, 80),
							RPCRDMA_ACCESS_LOCAL_WRITE |
								RPCRDMA_ACCESS_MW_BIND |
								rights[mrt_rnd(&g, 4)]);
			uint32_t old = mr[i];

			if (mr[i] && rr_mrt_rereg(&t, &mr[i], &r) == 0)
				dead[mrt_rnd(&g, 8)] = old;
		} else if (op < 9) {   /* dereg MR i */
			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[mrt_rnd(&g, 8)] = mr[i], mr[i] = 0;
		} else if (op < 12) {  /* allocate or bind window j through MR i */
			if (!mw[j]) {
				mwpd[j] = pds[mrt_rnd(&g, 2)];
				if (rr_mrt_mw_alloc(&t, mwpd[j], &mw[j], &mw[j]))
					mw[j] = 0;
			} else if (mr[i]) {
				uint32_t old = mw[j], off = mrt_rnd(&g, 40);

				if (rr_mrt_mw_bind(&t, &mw[j], mr[i],
						   (uint64_t)(uintptr_t)buf[i] + off,
						   mrt_rnd(&g, 33), rights[mrt_rnd(&g, 3)], mwpd[j],
						   qps[mrt_rnd(&g, 2)], (1ull << 41) + off) == 0)
					dead[mrt_rnd(&g, 8)] = old;
			}
		} else if (op < 15) {  /* invalidate window j, locally or remotely */
			if (mw[j])
				(void)rr_mrt_invalidate(&t, mw[j], pds[mrt_rnd(&g, 2)],
							qps[mrt_rnd(&g, 3)]);
		} else if (op < 16) {  /* free window j */
			if (mw[j] && rr_mrt_mw_free(&t, mw[j]) == 0)
				dead[mrt_rnd(&g, 8)] = mw[j], mw[j] = 0;
		} else {               /* a remote check, asked of both */
			uint32_t q = mrt_rnd(&g, 2), k = mrt_rnd(&g, 10), stag;
			const void *pd = pds[mrt_rnd(&g, 8) == 0 ? 1 : 0];
			const void *qp = mrt_rnd(&g, 8) ? qps[q] : qps[mrt_rnd(&g, 3)];
			struct rr_mrt_ref a, b;
			uint64_t to, len;
			int ra, rb;

			if (k < 5 && c[q].gen)
				stag = c[q].stag;   /* the cached STag: mostly hits */
			else if (k < 7)
				stag = mr[i];
			else if (k < 9)
				stag = mw[j];
			else
				stag = dead[mrt_rnd(&g, 8)];
			if (k < 5 && c[q].gen) {
				pd = mrt_rnd(&g, 8) ? c[q].pd : pds[mrt_rnd(&g, 2)];
				/* inside the cached region and around its edges */
				to = c[q].r.base_to + mrt_rnd(&g, (uint32_t)c[q].r.length + 5) - 2;
			} else {
				to = mrt_rnd(&g, 2) ? (1ull << 41) + mrt_rnd(&g, 80)
						    : (uint64_t)(uintptr_t)buf[i] + mrt_rnd(&g, 140);
			}
			len = mrt_rnd(&g, 50) ? mrt_rnd(&g, mrt_rnd(&g, 2) ? 8 : 48)
					      : UINT64_MAX - mrt_rnd(&g, 4);
			memset(&a, 0x5a, sizeof(a));
			memset(&b, 0x5a, sizeof(b));
			{
				uint64_t m0 = rr_mrt_remote_misses(&t);
				uint32_t need = rights[mrt_rnd(&g, 3)];

				ra = rr_mrt_check_remote(&t, &c[q], stag, to, len, need, pd, qp, &a);
				hits += rr_mrt_remote_misses(&t) == m0;
				rb = rr_mrt_check(&t, stag, to, len, need, pd, qp, &b);
			}
			checks++;
			if (ra != rb) {
				CHECK_EQ(ra, rb);
				break;
			}
			if (!ra) {
				oks++;
				CHECK(a.ptr == b.ptr && a.durable == b.durable &&
				      a.durable_fd == b.durable_fd &&
				      a.durable_offset == b.durable_offset && a.owner == b.owner &&
				      a.kind == b.kind);
			}
		}
	}
	/* the run reached both answers and used the cache */
	CHECK(checks > 300000 && oks > 20000 && hits > 10000);
	/* the cache refuses a local check and an unknown right */
	CHECK_EQ(rr_mrt_check_remote(&t, &c[0], mr[0], 0, 1, RR_MRT_LOCAL, PD_A, QP_A, NULL),
		 -EINVAL);
	CHECK_EQ(rr_mrt_check_remote(&t, &c[0], mr[0], 0, 1, 1u << 20, PD_A, QP_A, NULL),
		 -EINVAL);
	rr_mrt_fini(&t);
}

/* rr_mrt_check_local and rr_mrt_local_ptr through caches answer as
 * rr_mrt_check, proven by a differential run: random registrations,
 * rereg, dereg (most of them of MRs no cache was ever filled with: their
 * dereg leaves mr_gen alone) and window traffic between random local
 * checks through three caches, each asked of the table too -- the same
 * errno, and on success the same pointer and owner. A dereg or rereg that
 * failed to kill a cached copy shows here as a cache answering for an STag
 * the table refuses. */
TEST(rdma_mrt_local_cache_as_check)
{
	enum { NMR = 6, ROUNDS = 300000 };
	static uint8_t buf[NMR][128];
	const void *pds[2] = {PD_A, PD_B};
	const uint32_t rights[] = {0, RPCRDMA_ACCESS_LOCAL_WRITE,
				   RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_READ,
				   RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_MW_BIND};
	struct rr_mrt t;
	struct rr_mrt_lcache c[3] = {{0}};
	uint32_t mr[NMR] = {0}, mw = 0, dead[8] = {0};
	struct mrt_rng g = {0x10ca1};
	uint64_t hits = 0, checks = 0, oks = 0;

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 6), 0);
	for (int round = 0; round < ROUNDS; round++) {
		uint32_t op = mrt_rnd(&g, 100), i = mrt_rnd(&g, NMR);

		if (op < 5) {          /* register (again) MR i */
			struct rr_mrt_region r = region(buf[i] + mrt_rnd(&g, 8), 48 + mrt_rnd(&g, 65),
							rights[mrt_rnd(&g, 4)]);

			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[mrt_rnd(&g, 8)] = mr[i], mr[i] = 0;
			if (!mr[i] && rr_mrt_reg(&t, &r, pds[mrt_rnd(&g, 4) == 0], buf[i], &mr[i]))
				mr[i] = 0;
		} else if (op < 7) {   /* rereg MR i */
			struct rr_mrt_region r = region(buf[i] + mrt_rnd(&g, 16), 32 + mrt_rnd(&g, 80),
							rights[mrt_rnd(&g, 4)]);
			uint32_t old = mr[i];

			if (mr[i] && rr_mrt_rereg(&t, &mr[i], &r) == 0)
				dead[mrt_rnd(&g, 8)] = old;
		} else if (op < 10) {  /* dereg MR i */
			if (mr[i] && rr_mrt_dereg(&t, mr[i]) == 0)
				dead[mrt_rnd(&g, 8)] = mr[i], mr[i] = 0;
		} else if (op < 12) {  /* a window through MR i, or freed */
			if (mw) {
				if (rr_mrt_mw_free(&t, mw) == 0)
					dead[mrt_rnd(&g, 8)] = mw, mw = 0;
			} else if (rr_mrt_mw_alloc(&t, PD_A, NULL, &mw)) {
				mw = 0;
			} else if (mr[i]) {
				(void)rr_mrt_mw_bind(&t, &mw, mr[i], (uint64_t)(uintptr_t)buf[i] + 8, 16,
						     RPCRDMA_ACCESS_REMOTE_READ, PD_A, QP_A,
						     1ull << 41);
			}
		} else {               /* a local check, asked of both */
			uint32_t q = mrt_rnd(&g, 3), k = mrt_rnd(&g, 10), stag;
			const void *pd = pds[mrt_rnd(&g, 8) == 0];
			uint32_t need = RR_MRT_LOCAL |
					(mrt_rnd(&g, 2) ? RPCRDMA_ACCESS_LOCAL_WRITE : 0);
			struct rr_mrt_ref b;
			uint8_t *pa = NULL;
			void *oa = NULL;
			bool owned = false;   /* oa set (rr_mrt_check_local) */
			uint64_t addr, len, m0;
			int ra, rb;

			if (k < 5 && c[q].gen)
				stag = c[q].stag;
			else if (k < 6 && c[q].pending)
				stag = c[q].pending;
			else if (k < 8)
				stag = mr[i];
			else if (k < 9)
				stag = mw;
			else
				stag = dead[mrt_rnd(&g, 8)];
			if (k < 5 && c[q].gen) {
				pd = mrt_rnd(&g, 8) ? c[q].pd : pds[mrt_rnd(&g, 2)];
				addr = (uint64_t)(uintptr_t)c[q].r.addr +
				       mrt_rnd(&g, (uint32_t)c[q].r.length + 5) - 2;
			} else {
				addr = (uint64_t)(uintptr_t)buf[i] + mrt_rnd(&g, 140);
			}
			len = mrt_rnd(&g, 50) ? mrt_rnd(&g, mrt_rnd(&g, 2) ? 8 : 64)
					      : UINT64_MAX - mrt_rnd(&g, 4);
			memset(&b, 0x5a, sizeof(b));
			m0 = rr_mrt_local_misses(&t);
			if (mrt_rnd(&g, 2)) {
				struct rr_mrt_ref a;

				ra = rr_mrt_check_local(&t, &c[q], stag, addr, len, need, pd, &a);
				if (!ra)
					pa = a.ptr, oa = a.owner, owned = true;
			} else {
				ra = rr_mrt_local_ptr(&t, &c[q], stag, addr, len, need, pd, &pa);
			}
			hits += rr_mrt_local_misses(&t) == m0;
			rb = rr_mrt_check(&t, stag, addr, len, need, pd, NULL, &b);
			checks++;
			if (ra != rb) {
				CHECK_EQ(ra, rb);
				break;
			}
			if (!ra) {
				oks++;
				if (pa != b.ptr || (owned && oa != b.owner)) {
					CHECK(pa == b.ptr);
					CHECK(!owned || oa == b.owner);
					break;
				}
			}
		}
	}
	/* the run reached both answers and used the caches */
	CHECK(checks > 200000 && oks > 20000 && hits > 20000);
	rr_mrt_fini(&t);
}
