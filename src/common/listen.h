/* SPDX-License-Identifier: BSD-2-Clause */
/* What the servers' listeners share (tcp:// in src/transport/tcp/, the soft
 * provider's in src/rdma/soft/cm.c; docs/security.md "Limits"): the
 * host identity of peers, for limits per source address, and the accept
 * back-off when the process is out of file descriptors or memory. No wire
 * format, no system call. */
#ifndef RR_COMMON_LISTEN_H
#define RR_COMMON_LISTEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rpcrdma/env.h"

/* True when @a and @b (AF_INET or AF_INET6) name the same host: the IP
 * address without the port, an IPv4-mapped IPv6 address being the IPv4
 * address it maps; false for any other family. */
bool rr_addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

/* Accept back-off: a listener whose accept4 fails for want of descriptors
 * or memory stops being watched for RR_BACKOFF_MIN_MS, doubling up to
 * RR_BACKOFF_MAX_MS while that lasts (level-triggered, a listener left in
 * an epoll set wakes its thread at once, forever: a busy loop). */
#define RR_BACKOFF_MIN_MS 100u
#define RR_BACKOFF_MAX_MS 1000u

struct rr_backoff {
	uint32_t ms;           /* last pause; 0 after an accept succeeded */
	bool logged;
	uint64_t count;        /* pauses so far (accept_backoffs) */
};

/* Whether accept4's @err (errno) calls for a pause: EMFILE, ENFILE,
 * ENOBUFS, ENOMEM. */
bool rr_backoff_wanted(int err);
/* Starts a pause after accept4 failed with @err: counts it, tells it once
 * on stderr ("librpcrdma: @who: accept: ..."; the library has no log) and
 * returns when to watch the listener again, on @env's clock. */
uint64_t rr_backoff_begin(struct rr_backoff *b, const struct rpcrdma_env *env, const char *who,
			  int err);

#endif
