/* SPDX-License-Identifier: BSD-2-Clause */
/* The STag table's chunks of slots (src/rdma/mr_table.c) with the default
 * allocator: resident only as far as slots are used. A chunk (256 slots,
 * some 34 KiB) from calloc on a thread with a malloc arena of its own was
 * cleared whole: 7 page faults at a fresh server's first registration, on
 * the path to its first MPA Reply (issue 16 part AT). Here one region is
 * registered from a new thread (its own arena, as a progress thread's) and
 * the pages of the first chunk that are resident are counted (mincore). */
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdma/mr_table.h"
#include "rpcrdma/rdma.h"
#include "test.h"

/* Every slot holds at least its keymap (32 bytes), three pointers and a
 * region (address, length, base): a chunk spans at least this much. */
#define MRT_SLOT_MIN 96u

#if !defined(__SANITIZE_ADDRESS__)
static uint8_t reg_buf[64];

static void *reg_one(void *arg)
{
	struct rr_mrt_region r = {.addr = reg_buf,
				  .length = sizeof(reg_buf),
				  .base_to = (uint64_t)(uintptr_t)reg_buf,
				  .access = RPCRDMA_ACCESS_LOCAL_WRITE,
				  .durable_fd = -1};
	uint32_t stag = 0;

	return (void *)(intptr_t)rr_mrt_reg(arg, &r, (const void *)0x1000, reg_buf, &stag);
}
#endif

TEST(rdma_mrt_chunk_resident_as_slots_are_used)
{
#if defined(__SANITIZE_ADDRESS__)
	rr_test_skip("ASan: the chunk comes from ASan's allocator either way");
#else
	struct rr_mrt t;
	pthread_t th;
	void *rc = (void *)1;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), resident = 0, npages;
	uintptr_t a, b;
	unsigned char vec[64];

	REQUIRE_EQ(rr_mrt_init(&t, NULL, 8), 0);
	REQUIRE_EQ(pthread_create(&th, NULL, reg_one, &t), 0);
	pthread_join(th, &rc);
	CHECK_EQ((intptr_t)rc, 0);
	REQUIRE(t.chunks[0] != NULL);
	/* the pages the chunk's first 256 x MRT_SLOT_MIN bytes lie in */
	a = (uintptr_t)t.chunks[0] / pg * pg;
	b = ((uintptr_t)t.chunks[0] + RR_MRT_CHUNK * MRT_SLOT_MIN + pg - 1) / pg * pg;
	npages = (b - a) / pg;
	REQUIRE(npages >= 5 && npages <= sizeof(vec));
	REQUIRE_EQ(mincore((void *)a, b - a, vec), 0);
	for (size_t i = 0; i < npages; i++)
		resident += vec[i] & 1;
	/* the slot used (and the page before it, when the chunk starts
	 * inside a page the allocator had touched) */
	CHECK(resident <= 2);
	rr_mrt_fini(&t);
#endif
}
