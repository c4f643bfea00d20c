/* SPDX-License-Identifier: BSD-2-Clause */
/* The default environment (malloc, CLOCK_MONOTONIC, getrandom) and the
 * accessors every layer uses to allocate, read time and draw randomness, so
 * tests can substitute all three. Also the library's error strings. */
#include "common/common.h"

#include <malloc.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

static void *default_alloc(void *ctx, size_t size)
{
	RR_UNUSED(ctx);
	return malloc(size);
}

static void default_free(void *ctx, void *ptr)
{
	RR_UNUSED(ctx);
	free(ptr);
}

static uint64_t default_now(void *ctx)
{
	RR_UNUSED(ctx);
	return rr_mono_ns();   /* rr_now_ns reads it inline without an env */
}

static void default_random(void *ctx, void *buf, size_t len)
{
	uint8_t *p = buf;

	RR_UNUSED(ctx);
	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n <= 0) {
			/* getrandom only fails before the pool is seeded or on
			 * EINTR; fall back to a time-mixed generator rather than
			 * returning predictable zeros. */
			uint64_t x = default_now(NULL) ^ (uintptr_t)p;

			x ^= x >> 33;
			x *= 0xff51afd7ed558ccdull;
			x ^= x >> 33;
			*p++ = (uint8_t)x;
			len--;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
}

static const struct rpcrdma_env default_env = {
	.alloc = default_alloc,
	.free = default_free,
	.now_ns = default_now,
	.random = default_random,
};

RPCRDMA_API const struct rpcrdma_env *rpcrdma_env_default(void)
{
	return &default_env;
}

void *rr_alloc(const struct rpcrdma_env *env, size_t size)
{
	env = rr_env(env);
	return env->alloc(env->alloc_ctx, size ? size : 1);
}

void *rr_zalloc(const struct rpcrdma_env *env, size_t size)
{
	void *p;

	env = rr_env(env);
	/* The default allocator's calloc: memory it maps fresh is zero
	 * already and stays untouched (glibc, and ASan's allocator, skip the
	 * memset for it), where malloc + memset made every page resident.
	 * That is what rr_alloc_pages comes down to under ASan: a
	 * connection's Receive and Send buffers (megabytes) were written
	 * whole at every setup. */
	if (env->alloc == default_alloc)
		return calloc(1, size ? size : 1);
	p = rr_alloc(env, size);

	if (p)
		memset(p, 0, size);
	return p;
}

bool rr_env_default_alloc(const struct rpcrdma_env *env)
{
	return rr_env(env)->alloc == default_alloc;
}

void rr_free(const struct rpcrdma_env *env, void *ptr)
{
	if (!ptr)
		return;
	env = rr_env(env);
	env->free(env->alloc_ctx, ptr);
}

void *rr_alloc_line(const struct rpcrdma_env *env, size_t size)
{
	uint8_t *raw = rr_alloc(env, size + 63 + sizeof(void *));
	uintptr_t at;

	if (!raw)
		return NULL;
	at = ((uintptr_t)raw + sizeof(void *) + 63) & ~(uintptr_t)63;
	memcpy((void *)(at - sizeof(void *)), &raw, sizeof(raw));
	return (void *)at;
}

void rr_free_line(const struct rpcrdma_env *env, void *ptr)
{
	void *raw;

	if (!ptr)
		return;
	memcpy(&raw, (uint8_t *)ptr - sizeof(void *), sizeof(raw));
	rr_free(env, raw);
}

#if defined(__SANITIZE_ADDRESS__)
#define RR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RR_ASAN 1
#endif
#endif

/* Page mappings only where the allocator is ours: an injected one must see
 * (and may fail) every allocation, and ASan tracks only what it allocates. */
static bool pages_direct(const struct rpcrdma_env *env)
{
#ifdef RR_ASAN
	RR_UNUSED(env);
	return false;
#else
	return env->alloc == default_alloc;
#endif
}

/* Below a page a mapping of its own buys nothing (the page is touched as
 * soon as the block is used) and costs an mmap and an munmap (~6 us
 * together on the VMs measured): such a block comes from the allocator,
 * packed with others (issue 16 part J: a QP on a shared receive queue
 * mapped 32 bytes for its unused ring). */
#define RR_PAGES_MIN 4096u

static bool pages_mapped(const struct rpcrdma_env *env, size_t size)
{
	return size >= RR_PAGES_MIN && pages_direct(env);
}

void *rr_alloc_pages(const struct rpcrdma_env *env, size_t size)
{
	void *p;

	env = rr_env(env);
	if (!pages_mapped(env, size))
		return rr_zalloc(env, size);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void rr_free_pages(const struct rpcrdma_env *env, void *ptr, size_t size)
{
	if (!ptr)
		return;
	env = rr_env(env);
	if (!pages_mapped(env, size)) {
		rr_free(env, ptr);
		return;
	}
	(void)munmap(ptr, size);
}

static atomic_bool trim_due;
static _Atomic uint64_t trim_last;   /* default clock, ns */
/* rr_mem_trim_stats: trims run, the longest, the one running (its start) */
static _Atomic uint64_t trim_runs, trim_longest_ns, trim_running_since;

void rr_mem_trim_due(const struct rpcrdma_env *env)
{
	if (rr_env(env)->alloc == default_alloc)
		atomic_store_explicit(&trim_due, true, memory_order_relaxed);
}

void rr_mem_trim_tick(void)
{
	uint64_t now, last;

	if (!atomic_load_explicit(&trim_due, memory_order_relaxed))
		return;
	now = rr_now_ns(NULL);
	last = atomic_load_explicit(&trim_last, memory_order_relaxed);
	if (last && now - last < RR_MEM_TRIM_NS)
		return;
	/* one thread trims per interval */
	if (!atomic_compare_exchange_strong(&trim_last, &last, now))
		return;
	atomic_store_explicit(&trim_due, false, memory_order_relaxed);
#if defined(__GLIBC__) && !defined(RR_ASAN)
	atomic_store(&trim_running_since, now);
	(void)malloc_trim(0);
	now = rr_now_ns(NULL) - now;
	atomic_store(&trim_running_since, 0);
	atomic_fetch_add(&trim_runs, 1);
	if (now > atomic_load(&trim_longest_ns))
		atomic_store(&trim_longest_ns, now);   /* one trimmer at a time */
#endif
}

void rr_mem_trim_stats(struct rr_mem_trim_stats *out)
{
	out->runs = atomic_load(&trim_runs);
	out->longest_ns = atomic_load(&trim_longest_ns);
	out->running_since_ns = atomic_load(&trim_running_since);
}

/* CLOCK_MONOTONIC_COARSE's resolution, read once; 0 when unusable. */
static uint64_t coarse_res;
static pthread_once_t coarse_once = PTHREAD_ONCE_INIT;

static void coarse_init(void)
{
	struct timespec res;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 &&
	    res.tv_nsec > 0 && res.tv_nsec <= 20000000)
		coarse_res = (uint64_t)res.tv_nsec;
}

uint64_t rr_coarse_res_ns(const struct rpcrdma_env *env)
{
	if (rr_env(env)->now_ns != default_env.now_ns)
		return 0;
	pthread_once(&coarse_once, coarse_init);
	return coarse_res;
}

uint64_t rr_coarse_now_ns(const struct rpcrdma_env *env)
{
	struct timespec ts;

	if (!rr_coarse_res_ns(env) || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		return rr_now_ns(env);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rr_random(const struct rpcrdma_env *env, void *buf, size_t len)
{
	env = rr_env(env);
	env->random(env->random_ctx, buf, len);
}

/* Every other errno (the library passes on what sockets, files and
 * rdma-core report, e.g. EADDRINUSE from a busy port): the C library's
 * description in lower case, like the table's. Built once (strerrordesc_np
 * returns static text, unlike strerror, which may use a per-thread buffer),
 * so the results stay static and the function thread-safe. */
#define RR_ERRDESC_MAX 160
#define RR_ERRDESC_LEN 64
static char errdesc[RR_ERRDESC_MAX][RR_ERRDESC_LEN];
static pthread_once_t errdesc_once = PTHREAD_ONCE_INIT;

static void errdesc_init(void)
{
	for (int e = 1; e < RR_ERRDESC_MAX; e++) {
		const char *d = strerrordesc_np(e);
		size_t i;

		if (!d)
			continue;
		for (i = 0; d[i] && i + 1 < RR_ERRDESC_LEN; i++)
			errdesc[e][i] = (char)tolower((unsigned char)d[i]);
		errdesc[e][i] = '\0';
	}
}

static const char *sys_errdesc(int e)
{
	pthread_once(&errdesc_once, errdesc_init);
	if (e <= 0 || e >= RR_ERRDESC_MAX || !errdesc[e][0])
		return "unknown error";
	return errdesc[e];
}

RPCRDMA_API const char *rpcrdma_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case -EINVAL: return "invalid argument";
	case -ENOMEM: return "out of memory";
	case -EBADMSG: return "malformed message";
	case -EPROTO: return "protocol error";
	case -EMSGSIZE: return "message too large";
	case -ENOSPC: return "no space left in buffer";
	case -ERANGE: return "value out of range";
	case -EOPNOTSUPP: return "operation not supported";
	case -ECONNREFUSED: return "connection refused";
	case -ECONNRESET: return "connection reset by peer";
	case -ECONNABORTED: return "connection aborted";
	case -ENOTCONN: return "not connected";
	case -ETIMEDOUT: return "timed out";
	case -ECANCELED: return "cancelled";
	case -EAGAIN: return "resource temporarily unavailable";
	case -EACCES: return "access denied";
	case -ENOENT: return "not found";
	case -EEXIST: return "already exists";
	case -EBUSY: return "busy";
	case -EIO: return "input/output error";
	case -EREMOTEIO: return "remote peer reported an error";
	case -EPROTONOSUPPORT: return "protocol version not supported";
	case -ENODEV: return "no such device";
	case -EFAULT: return "bad address or memory access";
	case -EPERM: return "operation not permitted";
	case -ENOBUFS: return "no buffer space available";
	case -EOVERFLOW: return "value too large";
	case -ESHUTDOWN: return "transport shut down";
	case -ENOSYS: return "function not implemented";
	case -EPROTOTYPE: return "the server speaks another transport "
				 "(tcp:// met an rdma:// iWARP server, or rdma:// a tcp:// one)";
	default: return sys_errdesc(err < 0 ? -err : err);
	}
}

RPCRDMA_API const char *rpcrdma_version(void)
{
	return "0.1.0";
}
