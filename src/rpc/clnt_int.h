/* SPDX-License-Identifier: BSD-2-Clause */
/* What the tests may ask of the RPC client (clnt.c) beyond its public API:
 * whether a synchronous call runs without the client's lock (the one call
 * registered in the client instead of its pending list, rpcrdma_call_run's
 * fast way), the identity of the thread that runs one (rr_clnt_self), and
 * the state of the thread's cache of call objects (clnt.c tls_calls). */
#ifndef RR_RPC_CLNT_INT_H
#define RR_RPC_CLNT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpcrdma/rpc.h"
#include "transport/xprt.h"

/* True when @xc is the call of @c run without the lock right now (its
 * completion by its own thread will take no lock); @c is the ctx the
 * transport was given (struct rr_xprt_client_params). */
bool rr_rpc_client_runs_unlocked(const void *c, const struct rr_xprt_call *xc);

/* Whether a synchronous call of @c runs without the lock now (registered
 * in the client, not listed: before its deadline is dated, rpcrdma_call_run's
 * lazy deadline). */
bool rr_rpc_client_sync_busy(const struct rpcrdma_client *c);

/* The call objects the calling thread's cache holds now (0 to 4), and how
 * many objects the caches of all threads freed so far (a thread's exit, or
 * the library's unload). */
unsigned rr_rpc_client_tls_calls(void);
unsigned long rr_rpc_client_tls_freed(void);

/* The calling thread, as a synchronous call's run_thread (clnt.c): the
 * thread pointer (its TCB's address, distinct among live threads as
 * pthread_self is; one instruction, where pthread_self is a call into libc,
 * twice per synchronous call: issue 16 part BM), or pthread_self where the
 * compiler has no such builtin. Every run_thread is written and compared
 * through this one function, so the two are never mixed (test
 * rpc_clnt_self_tells_threads_apart). */
static inline uintptr_t rr_clnt_self(void)
{
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define RR_CLNT_SELF_TP 1
#endif
#endif
#ifdef RR_CLNT_SELF_TP
	return (uintptr_t)__builtin_thread_pointer();
#else
	return (uintptr_t)pthread_self();
#endif
}

#endif
