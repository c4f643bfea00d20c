/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: RPC-over-RDMA transport counters (RFC 8166) of a
 * client's connection or of a server (aggregate over its connections).
 *
 * The fields cover what Linux prints for an NFS/RDMA mount in
 * /proc/self/mountstats ("xprt: rdma ..."), plus the message forms by
 * direction (rdma_proc of RFC 8166 section 4.2.1: RDMA_MSG, RDMA_NOMSG,
 * RDMA_ERROR, RDMA_DONE), bytes carried inline in Sends, and push-mode
 * counters (draft-talpey-rdma-commit section 2). They are the transport's
 * own counters, copied in one snapshot under its lock; a client's counters
 * accumulate over its reconnections.
 *
 *   struct rpcrdma_xprt_stats a, b, d;
 *   rpcrdma_client_stats(clnt, &a);  rpcrdma_call_run(call);
 *   rpcrdma_client_stats(clnt, &b);  rpcrdma_xprt_stats_diff(&b, &a, &d);
 *   -> d.msg_sent == 1, d.remote_inv == 1, ... for that one call
 *
 * tcp:// has no RPC-over-RDMA message forms, chunks or invalidations: a
 * tcp:// client answers -EOPNOTSUPP; a tcp:// server fills only
 * connections, transport ("tcp") and the connection-limit counters
 * (refused_conns, idle_closed, accept_backoffs), the others being 0. */
#ifndef RPCRDMA_STATS_H
#define RPCRDMA_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "rpcrdma/rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rpcrdma_xprt_stats {
	/* Linux "xprt: rdma" equivalents (client: requester; server: responder) */
	uint64_t sends;              /* Sends posted (Calls, Replies, RDMA_ERRORs) */
	uint64_t recvs;              /* Receives processed */
	uint64_t bad_xids;           /* Replies matching no Call (Linux bad_xids) */
	uint64_t bad_replies;        /* malformed Replies discarded */
	uint64_t dropped;            /* messages silently dropped */
	uint64_t read_chunks;        /* Read chunks sent (client) / pulled (server) */
	uint64_t write_chunks;       /* Write chunks provisioned / filled */
	uint64_t reply_chunks;       /* Reply chunks provisioned / used */
	uint64_t total_rdma_req;     /* bytes moved by RDMA Read (client: the peer pulled
					them from us; server: we pulled them) */
	uint64_t total_rdma_rep;     /* bytes moved by RDMA Write into Write/Reply chunks */
	uint64_t rdma_read_bytes;    /* server: bytes it RDMA Read */
	uint64_t rdma_write_bytes;   /* server: bytes it RDMA Wrote */
	uint64_t pullup_bytes;       /* bytes copied into Sends / Long Call buffers
					(Linux pullup_copy_count) */
	uint64_t short_msgs;         /* Calls sent (client) / received (server) inline,
					no chunks */
	uint64_t chunked_msgs;       /* ... RDMA_MSG with chunks */
	uint64_t long_msgs;          /* ... RDMA_NOMSG (Long Call) */
	/* message forms by direction */
	uint64_t msg_sent, nomsg_sent, error_sent, done_sent;
	uint64_t msg_recv, nomsg_recv, error_recv, done_recv;
	uint64_t inline_sent_bytes;  /* bytes of all Sends posted, headers included */
	uint64_t inline_recv_bytes;  /* bytes of all Receives completed */
	/* errors */
	uint64_t err_vers_sent, err_chunk_sent;
	uint64_t err_received;       /* RDMA_ERROR received */
	uint64_t fatal_errors;       /* connection lost by a failed operation */
	/* invalidation (RFC 8797 / Send With Invalidate) */
	uint64_t remote_inv;         /* our STags the peer invalidated */
	uint64_t local_inv;          /* STags we invalidated ourselves */
	uint64_t bad_remote_inv;     /* Send With Invalidate naming an STag not ours */
	/* flow */
	uint64_t credits_exhausted;  /* Calls that waited for a credit */
	uint64_t retransmits;
	uint64_t reconnects;
	/* push mode (rpcrdma/push.h) */
	uint64_t push_writes;        /* client: RDMA Writes into exposed regions */
	uint64_t push_write_bytes;
	uint64_t commits;            /* client: RDMA Commits answered durable */
	uint64_t commit_errors;      /* client: Commits with Status != 0 or failed */
	uint64_t regions_exposed;    /* server: regions exposed */
	uint64_t regions_released;   /* server: revoked or freed on disconnect */
	/* progress */
	uint64_t cq_polls;           /* CQ polls made by the transport's progress
					loop (each a look at the connection on
					soft): per RPC, how much an idle
					connection costs a busy one */
	/* server, connection limits (docs/security.md "Limits"; also on
	 * tcp://): */
	uint64_t refused_conns;      /* refused: over max_conns or
					max_conns_per_host, shutting down, or
					no resources for it */
	uint64_t idle_closed;        /* closed after idle_timeout_ms */
	uint64_t accept_backoffs;    /* accepting paused for want of file
					descriptors or memory (EMFILE, ENFILE,
					ENOBUFS, ENOMEM) */
	uint64_t handshakes_dropped; /* rdma://: half-open connections closed
					(over max_handshakes, timed out, or
					their fds given to an established one) */
	uint32_t connections;        /* server: live connections; client: 1 if connected */
	char transport[16];          /* "rdma" (soft provider), "tcp" */
};

/* Snapshot of the client's transport counters. 0, -EOPNOTSUPP (tcp://),
 * -EINVAL. */
RPCRDMA_API int rpcrdma_client_stats(struct rpcrdma_client *c, struct rpcrdma_xprt_stats *st);
/* Aggregate over every connection the server has served (tcp://: the
 * connection counters only). */
RPCRDMA_API int rpcrdma_server_stats(struct rpcrdma_server *s, struct rpcrdma_xprt_stats *st);
/* @out = @now - @before, field by field (connections and transport from
 * @now). @out may alias either. */
RPCRDMA_API void rpcrdma_xprt_stats_diff(const struct rpcrdma_xprt_stats *now,
					 const struct rpcrdma_xprt_stats *before,
					 struct rpcrdma_xprt_stats *out);
/* Prints @st to @f in a mountstats-like layout. 0 or -EIO. */
RPCRDMA_API int rpcrdma_xprt_stats_print(const struct rpcrdma_xprt_stats *st, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
