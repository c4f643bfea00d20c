/* SPDX-License-Identifier: BSD-2-Clause */
/* Recycled record buffers of tcp:// (issue 13): a used record buffer is kept
 * for the next record, so steady traffic does not allocate, copy while
 * growing, or fault in fresh pages for every message. A reader keeps its
 * own buffers up to @spare_max bytes (the client: its maximum message; a
 * server connection: RR_TCP_SPARE_MAX) and gives larger ones to a @pool
 * shared by a server's connections, so idle connections hold no large
 * buffer each. The record marking decoder (rm.h) gets and puts its buffers
 * here (rr_tcp_bufs_provider). Any thread may put a buffer back. The last
 * buffer put back waits in a lock-free slot (@hot, an atomic exchange on
 * put and on take), so a connection that reads one record at a time (a
 * synchronous client's Reply, a server's Call) takes no lock for its
 * buffers; only the buffers it displaces go to the caches. */
#ifndef RR_TRANSPORT_TCP_BUFS_H
#define RR_TRANSPORT_TCP_BUFS_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/common.h"
#include "transport/tcp/rm.h"

/* Two slots: with a synchronous peer the next record often arrives while
 * the previous one's buffer is still in use (its Reply is being sent), and
 * one slot would then be empty every time. With the hot slot a reader
 * keeps at most three buffers of up to spare_max bytes. */
#define RR_TCP_CACHE_SLOTS 2
/* What a server connection keeps for itself. */
#define RR_TCP_SPARE_MAX ((size_t)256 * 1024 + 4096)

/* A few recycled buffers under a lock. */
struct rr_tcp_cache {
	pthread_mutex_t lock;
	uint8_t *buf[RR_TCP_CACHE_SLOTS];
	size_t cap[RR_TCP_CACHE_SLOTS];
};

void rr_tcp_cache_init(struct rr_tcp_cache *k);
void rr_tcp_cache_fini(struct rr_tcp_cache *k, const struct rpcrdma_env *env);

/* One reader's buffers: the last one put back, its own spare and,
 * optionally, a shared pool. A buffer in @hot holds its capacity in its
 * first bytes (a size_t): only buffers of at least that size go there. */
struct rr_tcp_bufs {
	const struct rpcrdma_env *env;
	uint8_t *_Atomic hot;
	struct rr_tcp_cache spare;
	size_t spare_max;
	struct rr_tcp_cache *pool;      /* NULL: none (client) */
};

/* Borrows @pool (may be NULL: buffers above @spare_max are freed) for the
 * life of @b. */
void rr_tcp_bufs_init(struct rr_tcp_bufs *b, const struct rpcrdma_env *env, size_t spare_max,
		      struct rr_tcp_cache *pool);
void rr_tcp_bufs_fini(struct rr_tcp_bufs *b);
/* Takes back a record buffer of capacity @cap once its consumer is done
 * (any thread); @buf NULL: nothing. */
void rr_tcp_bufs_put(struct rr_tcp_bufs *b, uint8_t *buf, size_t cap);
/* The decoder's buffer provider (struct rr_rm_bufs) over @b. */
struct rr_rm_bufs rr_tcp_bufs_provider(struct rr_tcp_bufs *b);

#endif
