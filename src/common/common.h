/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal helpers shared by every layer: the environment accessors
 * (allocation, time, randomness through struct rpcrdma_env), byte-order
 * loads/stores and small macros. Internal symbols use the rr_ prefix and are
 * hidden from the shared library (only rpcrdma_* is exported). */
#ifndef RR_COMMON_H
#define RR_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "rpcrdma/env.h"

#define RR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define RR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RR_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RR_ALIGN4(x) (((x) + 3u) & ~(size_t)3u)
#define RR_UNUSED(x) ((void)(x))
#define RR_LIKELY(x) __builtin_expect(!!(x), 1)
#define RR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RR_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Listen backlog of the servers (tcp://, rdma://, verbs://): the kernel's
 * queue of connections whose TCP handshake is complete. When it is full the
 * kernel drops SYNs and the client retries after 1 s, then 3 s: a burst of
 * connect-and-vanish attempts larger than the backlog delayed a new client
 * by seconds with 64 (docs/security.md "Limits"). The kernel caps it at
 * net.core.somaxconn (4096 by default). */
#define RR_LISTEN_BACKLOG 1024

/* Environment accessors; @env may be NULL (defaults). */
static inline const struct rpcrdma_env *rr_env(const struct rpcrdma_env *env)
{
	return env ? env : rpcrdma_env_default();
}
void *rr_alloc(const struct rpcrdma_env *env, size_t size);
void *rr_zalloc(const struct rpcrdma_env *env, size_t size);
void rr_free(const struct rpcrdma_env *env, void *ptr);
/* Whether @env allocates with the library's default allocator (malloc):
 * memory it gives may be kept past the objects of @env (a thread's cache
 * freed when the thread exits); an injected allocator sees every block. */
bool rr_env_default_alloc(const struct rpcrdma_env *env);
/* @size bytes that start on a 64-byte boundary (a cache line), from
 * rr_alloc whatever alignment the allocator gives: an object whose
 * per-call fields are laid out by line touches the lines it was laid out
 * for, not one more (issue 16 part FD). The block given by rr_alloc is
 * up to 63 + sizeof(void *) bytes larger; its address is kept in the word
 * before the returned one. Free with rr_free_line. */
void *rr_alloc_line(const struct rpcrdma_env *env, size_t size);
void rr_free_line(const struct rpcrdma_env *env, void *ptr);
/* Zero-filled memory for a connection's large rings and buffers (work
 * queues, Receive and send slots): with the default allocator it is mapped
 * straight from the kernel (mmap), so its pages become resident only when
 * touched and go back to the system when freed, whatever the allocator's
 * arenas and mmap threshold did meanwhile (docs/PERFORMANCE.md "Memory
 * after connection churn"); below a page, with an injected allocator
 * (tests) or under AddressSanitizer it is rr_zalloc. Free with
 * rr_free_pages and the same @size. */
void *rr_alloc_pages(const struct rpcrdma_env *env, size_t size);
void rr_free_pages(const struct rpcrdma_env *env, void *ptr, size_t size);
/* Memory given back after connection churn. A server that freed a
 * connection calls rr_mem_trim_due(); its loop calls rr_mem_trim_tick() on
 * every turn (it wakes at least every second), which, when trimming is due
 * and the last trim is at least RR_MEM_TRIM_NS old (on the default clock:
 * a CPU budget, not protocol time), hands the allocator's free pages back
 * to the system (glibc: malloc_trim). Freed per-connection blocks otherwise
 * stay resident in the allocator's arenas, fragmented between live ones
 * (156 MB of arena for 2.7 MB in use measured after 2,000 connections:
 * docs/PERFORMANCE.md "Memory after connection churn"). No-op with an
 * injected allocator, which owns its memory. Process-wide; any thread. */
#define RR_MEM_TRIM_NS 1000000000ull
void rr_mem_trim_due(const struct rpcrdma_env *env);
void rr_mem_trim_tick(void);
/* What the trims cost so far (tests' diagnostics: a trim runs on a
 * progress loop, which serves nothing else meanwhile): trims run, the
 * longest (ns), and the start of the one running now (rr_now_ns; 0: none). */
struct rr_mem_trim_stats {
	uint64_t runs, longest_ns, running_since_ns;
};
void rr_mem_trim_stats(struct rr_mem_trim_stats *out);
/* CLOCK_MONOTONIC in ns: the default environment's clock (env.c). */
static inline uint64_t rr_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* @env's clock (ns). Inline, and without @env (the default environment)
 * CLOCK_MONOTONIC read here, not through the default environment's
 * function pointer (its frame and the indirect call: ~8 instructions per
 * read; a synchronous RPC call reads it once for its deadline). The
 * default environment's own pointer reads the same clock (env.c). */
static inline uint64_t rr_now_ns(const struct rpcrdma_env *env)
{
	if (RR_LIKELY(!env))
		return rr_mono_ns();
	return env->now_ns(env->clock_ctx);
}
/* A cheap clock for leases and waits that may end a little late or early.
 * With the default environment: CLOCK_MONOTONIC_COARSE (a few ns where
 * CLOCK_MONOTONIC costs ~100 ns on a VM), which lags rr_now_ns by at least
 * rr_coarse_res_ns and by more on a tickless idle kernel (7 ms measured
 * with a 4 ms resolution): never a base for a deadline that must not be
 * early (the RPC client's call timeouts use rr_now_ns); with an injected
 * clock (tests on virtual time) or no usable coarse clock: rr_now_ns and a
 * resolution of 0. */
uint64_t rr_coarse_now_ns(const struct rpcrdma_env *env);
uint64_t rr_coarse_res_ns(const struct rpcrdma_env *env);
void rr_random(const struct rpcrdma_env *env, void *buf, size_t len);

/* Big-endian loads and stores (wire order for XDR, MPA, DDP, RDMAP).
 * With GCC or Clang each is one load or store of the whole word (memcpy:
 * no alignment assumed) and a byte swap on a little-endian host; written
 * byte by byte, GCC 12 merged neighbouring stores into a wide word built
 * with shifts (rr_rpcmsg_encode_call_none: 48 instructions, issue 16 part
 * AP). The bytes in memory are the same either way. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && \
	(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ || __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RR_BE16(v) __builtin_bswap16(v)
#define RR_BE32(v) __builtin_bswap32(v)
#else
#define RR_BE16(v) (v)
#define RR_BE32(v) (v)
#endif
static inline uint16_t rr_get_be16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return (uint16_t)RR_BE16(v);
}
static inline uint32_t rr_get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return (uint32_t)RR_BE32(v);
}
static inline void rr_put_be16(uint8_t *p, uint16_t v)
{
	v = (uint16_t)RR_BE16(v);
	memcpy(p, &v, sizeof(v));
}
static inline void rr_put_be32(uint8_t *p, uint32_t v)
{
	v = (uint32_t)RR_BE32(v);
	memcpy(p, &v, sizeof(v));
}
#undef RR_BE16
#undef RR_BE32
#else
static inline uint16_t rr_get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t rr_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void rr_put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void rr_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
#endif
/* @n (at most RR_COPY_SMALL_MAX, 64) bytes from @src to @dst, which do
 * not overlap: two copies of a fixed size that overlap in the middle (each
 * a move or two, not a call nor a string instruction counted per byte),
 * bytes below 4. A short Reply into its call (issue 16 part FB), a short
 * Call's one part into its Send (part HC). */
#define RR_COPY_SMALL_MAX 64u
static inline void rr_copy_small(uint8_t *dst, const void *src_, uint32_t n)
{
	const uint8_t *src = src_;

	if (n >= 32) {
		memcpy(dst, src, 32);
		memcpy(dst + n - 32, src + n - 32, 32);
	} else if (n >= 16) {
		memcpy(dst, src, 16);
		memcpy(dst + n - 16, src + n - 16, 16);
	} else if (n >= 8) {
		memcpy(dst, src, 8);
		memcpy(dst + n - 8, src + n - 8, 8);
	} else if (n >= 4) {
		memcpy(dst, src, 4);
		memcpy(dst + n - 4, src + n - 4, 4);
	} else {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = src[i];
	}
}

static inline uint64_t rr_get_be64(const uint8_t *p)
{
	return (uint64_t)rr_get_be32(p) << 32 | rr_get_be32(p + 4);
}
static inline void rr_put_be64(uint8_t *p, uint64_t v)
{
	rr_put_be32(p, (uint32_t)(v >> 32));
	rr_put_be32(p + 4, (uint32_t)v);
}

#endif
