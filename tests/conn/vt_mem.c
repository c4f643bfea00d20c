/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The environment of the virtual-time session test (vt_net.h struct
 * vt_mem): the virtual clock and seeded random generator of tests/test.h
 * with an allocator of its own, which fails allocations at a seeded rate
 * and keeps the set of live memory blocks (sorted by address) against
 * which the wire checks every registration and access; a block freed
 * while a registration still covers it, or freed twice, is a violation. */
#include "conn/vt_net.h"

#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Index of the first block whose address is > @a. */
static size_t upper(const struct vt_mem *m, uintptr_t a)
{
	size_t lo = 0, hi = m->nblk;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->blk[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void *vt_grow(void *arr, size_t *cap, size_t n, size_t elem)
{
	size_t c = *cap ? *cap * 2 : 64;

	if (n < *cap)
		return arr;
	arr = realloc(arr, c * elem);
	if (!arr)
		abort();
	*cap = c;
	return arr;
}

static void track(struct vt_mem *m, void *p, size_t size, bool session, unsigned long seq)
{
	size_t i;

	m->blk = vt_grow(m->blk, &m->cap, m->nblk, sizeof(*m->blk));
	i = upper(m, (uintptr_t)p);
	memmove(&m->blk[i + 1], &m->blk[i], (m->nblk - i) * sizeof(m->blk[0]));
	m->blk[i] = (struct vt_block){(uintptr_t)p, size, seq, session};
	m->nblk++;
	if (session)
		m->session_live++;
}

static void untrack(struct vt_mem *m, void *p, bool session)
{
	size_t i = upper(m, (uintptr_t)p);

	if (i == 0 || m->blk[i - 1].addr != (uintptr_t)p)
		m->fail(m->ctx, "free of %p: not a live block (double free?)", p);
	i--;
	if (m->blk[i].session != session)
		m->fail(m->ctx, "free of %p by the %s: allocated by the %s", p,
			session ? "session" : "test", m->blk[i].session ? "session" : "test");
	if (m->on_free)
		m->on_free(m->free_ctx, &m->blk[i]);
	memmove(&m->blk[i], &m->blk[i + 1], (m->nblk - i - 1) * sizeof(m->blk[0]));
	m->nblk--;
	if (session)
		m->session_live--;
}

bool vt_mem_fail_now(struct vt_mem *m, unsigned div)
{
	if (!m->fail_on || !m->fail_permille)
		return false;
	return xorshift(&m->fail_rng) % (1000u * (div ? div : 1)) < m->fail_permille;
}

static void *env_alloc(void *ctx, size_t size)
{
	struct vt_mem *m = ctx;
	void *p;

	m->allocs++;
	if (vt_mem_fail_now(m, 1)) {
		m->fails++;
		return NULL;
	}
	p = malloc(size ? size : 1);
	if (!p)
		abort();
	track(m, p, size ? size : 1, true, m->allocs);
	if (m->allocs == m->trap) {
		void *bt[32];

		fprintf(stderr, "allocation %lu (%zu bytes):\n", m->allocs, size);
		backtrace_symbols_fd(bt, backtrace(bt, 32), STDERR_FILENO);
	}
	return p;
}

static void env_free(void *ctx, void *p)
{
	struct vt_mem *m = ctx;

	untrack(m, p, true);
	free(p);
}

void vt_mem_init(struct vt_mem *m, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	rr_test_env_init(&m->te, seed | 1);
	m->te.env.alloc = env_alloc;
	m->te.env.free = env_free;
	m->te.env.alloc_ctx = m;
	m->fail_rng = (seed * 0x9e3779b97f4a7c15ull) | 1;
}

/* What is left (a test that failed half way) goes without checks. */
void vt_mem_fini(struct vt_mem *m)
{
	for (size_t i = 0; i < m->nblk; i++)
		free((void *)m->blk[i].addr);
	free(m->blk);
	m->blk = NULL;
	m->nblk = m->cap = 0;
}

void *vt_mem_alloc(struct vt_mem *m, size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (!p)
		abort();
	track(m, p, size ? size : 1, false, 0);
	return p;
}

void vt_mem_free(struct vt_mem *m, void *p)
{
	if (!p)
		return;
	untrack(m, p, false);
	free(p);
}

const struct vt_block *vt_mem_find(const struct vt_mem *m, const void *p, size_t len)
{
	size_t i = upper(m, (uintptr_t)p);
	const struct vt_block *b;

	if (i == 0)
		return NULL;
	b = &m->blk[i - 1];
	if ((uintptr_t)p + len < (uintptr_t)p || (uintptr_t)p + len > b->addr + b->size)
		return NULL;
	return b;
}

void vt_mem_leaks(const struct vt_mem *m, char *out, size_t cap, unsigned max)
{
	size_t off = 0;

	out[0] = 0;
	for (size_t i = 0; i < m->nblk && max && off < cap; i++) {
		if (!m->blk[i].session)
			continue;
		off += (size_t)snprintf(out + off, cap - off, " %lu:%zu", m->blk[i].seq,
					m->blk[i].size);
		max--;
	}
}
