/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: the injected environment (allocator, clock, randomness)
 * and the library's error convention.
 *
 * Every function of the library returns 0 (or a non-negative count) on success
 * and a negative errno value on failure; rpcrdma_strerror() names them. Objects
 * that allocate, read the time or draw random numbers take a struct rpcrdma_env;
 * passing NULL selects the process defaults (malloc, CLOCK_MONOTONIC, getrandom).
 * Tests inject their own to run endpoints on virtual time and to fail the i-th
 * allocation. */
#ifndef RPCRDMA_ENV_H
#define RPCRDMA_ENV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RPCRDMA_API __attribute__((visibility("default")))

struct rpcrdma_env {
	/* Returns NULL on failure. @ctx is alloc_ctx. */
	void *(*alloc)(void *ctx, size_t size);
	void (*free)(void *ctx, void *ptr);
	void *alloc_ctx;
	/* Monotonic time in nanoseconds. */
	uint64_t (*now_ns)(void *ctx);
	void *clock_ctx;
	/* Fills @buf with @len unpredictable bytes. */
	void (*random)(void *ctx, void *buf, size_t len);
	void *random_ctx;
};

/* The process-wide default environment (never NULL). */
RPCRDMA_API const struct rpcrdma_env *rpcrdma_env_default(void);

/* A static description of a negative errno returned by the library, e.g.
 * -EADDRINUSE: "address already in use" (any errno the C library knows;
 * a positive value is read as its negative; "unknown error" otherwise).
 * Thread-safe. */
RPCRDMA_API const char *rpcrdma_strerror(int err);

/* Library version string, e.g. "0.1.0". */
RPCRDMA_API const char *rpcrdma_version(void);

#ifdef __cplusplus
}
#endif
#endif
