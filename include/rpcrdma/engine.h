/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: the progress engine (docs/api.md "Progress
 * threads"). Every connection and server of the process, on every
 * transport and in both roles, is served by one of a fixed set of progress
 * threads, chosen round-robin when the connection is made; a connection
 * stays on its thread. The number of threads never grows with the number
 * of connections: by default it is the number of online CPUs
 * (RPCRDMA_PROGRESS_THREADS in the environment overrides it). With 0 the
 * library starts no progress thread at all: the application drives
 * progress itself, calling rpcrdma_progress() in its own loop (for
 * instance when rpcrdma_progress_fd() is readable). The library's
 * blocking calls (rpcrdma_client_create, rpcrdma_call_run, destroys) then
 * drive progress themselves while they wait.
 *
 * The soft provider (rdma://) also runs one thread per provider context,
 * the "NIC" that sets up connections and serves sockets nobody attends;
 * contexts are shared by all connections of a role and configuration, so
 * that thread does not grow with connections either. */
#ifndef RPCRDMA_ENGINE_H
#define RPCRDMA_ENGINE_H

#include "rpcrdma/env.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of progress threads. */
#define RPCRDMA_PROGRESS_THREADS_MAX 256u

/* Sets the number of progress threads: 0 means the application drives
 * progress (rpcrdma_progress); larger than RPCRDMA_PROGRESS_THREADS_MAX is
 * taken as that. Only before the engine started (it starts with the first
 * client or server of the process): 0, or -EBUSY afterwards. */
RPCRDMA_API int rpcrdma_progress_threads_set(unsigned n);
/* The number of progress threads: the running engine's, else what it will
 * start with (the configured number, RPCRDMA_PROGRESS_THREADS, or the
 * number of online CPUs). 0: the application drives progress. */
RPCRDMA_API unsigned rpcrdma_progress_threads(void);
/* With 0 progress threads: runs one turn of the library's progress (what
 * is ready on its connections, its due timers, work posted by other
 * threads), sleeping up to @timeout_ms (-1: until something happens, 0:
 * not at all) for something to do. Returns the number of things done, or
 * -EINVAL when the library has progress threads (nothing to drive). Safe
 * from any thread; concurrent callers take turns. */
RPCRDMA_API int rpcrdma_progress(int timeout_ms);
/* With 0 progress threads: a file descriptor that is readable whenever
 * rpcrdma_progress has something to do (for the application's poll, epoll
 * or event library); owned by the library. -EINVAL with progress threads,
 * or a negative errno when the engine cannot start. */
RPCRDMA_API int rpcrdma_progress_fd(void);

#ifdef __cplusplus
}
#endif
#endif
