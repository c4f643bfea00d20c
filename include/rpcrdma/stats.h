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

/* Every counter, once: RPCRDMA_XPRT_STATS(X) expands X(group, name, what)
 * for each, in the order of the struct's fields. The library generates its
 * own counters, their export and the printer from it; a program may use it
 * too (to print or compare every counter by name). Groups: xprt, chunks,
 * rdma, calls, sent, recv, errors, inv, flow, push, progress, rrep, bc, limits,
 * pool, faults. New counters are added at the end of the table: the struct
 * grows (docs/api.md "ABI"), the fields before them keep their offsets. */
#define RPCRDMA_XPRT_STATS(X) \
	/* Linux "xprt: rdma" equivalents (client: requester; server: responder) */ \
	X(xprt, sends, "Sends posted (Calls, Replies, RDMA_ERRORs, RDMA_DONEs)") \
	X(xprt, recvs, "Receives processed") \
	X(xprt, bad_xids, "Replies matching no Call (Linux bad_xids)") \
	X(xprt, bad_replies, "malformed Replies discarded") \
	X(xprt, dropped, "messages silently dropped") \
	X(chunks, read_chunks, "Read chunks sent (client) / pulled (server)") \
	X(chunks, write_chunks, "Write chunks provisioned / filled") \
	X(chunks, reply_chunks, "Reply chunks provisioned / used") \
	X(rdma, total_rdma_req, "bytes moved by RDMA Read (client: the peer pulled them " \
				"from us; server: we pulled them)") \
	X(rdma, total_rdma_rep, "bytes moved by RDMA Write into Write/Reply chunks") \
	X(rdma, rdma_read_bytes, "server: bytes it RDMA Read") \
	X(rdma, rdma_write_bytes, "server: bytes it RDMA Wrote") \
	X(rdma, pullup_bytes, "bytes copied into Sends / Long Call buffers (Linux " \
			      "pullup_copy_count)") \
	X(calls, short_msgs, "Calls sent (client) / received (server) inline, no chunks") \
	X(calls, chunked_msgs, "... RDMA_MSG with chunks") \
	X(calls, long_msgs, "... RDMA_NOMSG (Long Call)") \
	/* message forms by direction (rdma_proc, RFC 8166 section 4.2.1) */ \
	X(sent, msg_sent, "RDMA_MSG sent") \
	X(sent, nomsg_sent, "RDMA_NOMSG sent") \
	X(sent, error_sent, "RDMA_ERROR sent") \
	X(sent, done_sent, "RDMA_DONE sent") \
	X(sent, inline_sent_bytes, "bytes of all Sends posted, headers included") \
	X(recv, msg_recv, "RDMA_MSG received") \
	X(recv, nomsg_recv, "RDMA_NOMSG received") \
	X(recv, error_recv, "RDMA_ERROR received") \
	X(recv, done_recv, "RDMA_DONE received") \
	X(recv, inline_recv_bytes, "bytes of all Receives completed") \
	X(errors, err_vers_sent, "RDMA_ERROR ERR_VERS sent") \
	X(errors, err_chunk_sent, "RDMA_ERROR ERR_CHUNK sent") \
	X(errors, err_received, "RDMA_ERROR received") \
	X(errors, fatal_errors, "connections lost by a failed operation") \
	/* invalidation (RFC 8797 / Send With Invalidate) */ \
	X(inv, remote_inv, "our STags the peer invalidated") \
	X(inv, local_inv, "STags we invalidated ourselves") \
	X(inv, bad_remote_inv, "Send With Invalidate naming an STag not ours") \
	X(flow, credits_exhausted, "Calls that waited for a credit") \
	X(flow, retransmits, "Calls sent again on a new connection") \
	X(flow, reconnects, "connections established again") \
	/* push mode (rpcrdma/push.h) */ \
	X(push, push_writes, "client: RDMA Writes into exposed regions") \
	X(push, push_write_bytes, "client: bytes of those") \
	X(push, commits, "client: RDMA Commits answered durable") \
	X(push, commit_errors, "client: Commits with Status != 0 or failed") \
	X(push, regions_exposed, "server: regions exposed") \
	X(push, regions_released, "server: revoked or freed on disconnect") \
	X(progress, cq_polls, "CQ polls by the transport's progress loop (on soft each " \
			      "looks at the connection): per RPC, what an idle " \
			      "connection costs a busy one") \
	X(progress, deliver_batches, "server: batches of received Calls handed to the " \
				     "RPC layer, one release of the shard's lock each " \
				     "(Calls delivered / this: Calls per batch)") \
	/* reliable reply (responder-provided Read chunks and RDMA_DONE) */ \
	X(rrep, rrep_exposed, "server: Replies sent as a Read chunk") \
	X(rrep, rrep_pulled, "client: Replies pulled by RDMA Read") \
	X(rrep, rrep_done_sent, "client: RDMA_DONE sent") \
	X(rrep, rrep_done_unknown, "client: RDMA_DONE for an XID no longer known; " \
				   "server: RDMA_DONE naming nothing waiting") \
	X(rrep, rrep_done_matched, "server: RDMA_DONE released a Reply") \
	X(rrep, rrep_done_forged, "server: Send With Invalidate naming another XID's " \
				  "STag or none of ours") \
	X(rrep, rrep_expired, "server: Read chunks fenced by rrep_timeout_ms") \
	X(rrep, rrep_fenced, "server: fenced on disconnect or destroy") \
	X(rrep, rrep_parked, "server: Read-chunk Replies that waited for an RDMA_DONE " \
			     "reservation (rrep_max)") \
	X(rrep, rrep_over_budget, "server: answered ERR_CHUNK, reply_mem_per_conn or " \
				  "reply_mem_total being used up") \
	/* backchannel (RFC 8167; rpcrdma_server_callback, rpcrdma_client_callbacks) */ \
	X(bc, bc_calls_sent, "server: Calls sent to the client (backward direction)") \
	X(bc, bc_replies_recv, "server: their Replies received") \
	X(bc, bc_replies_dropped, "server: Replies matching no Call of ours (late, unknown)") \
	X(bc, bc_credits_exhausted, "server: Calls that waited for a backward credit") \
	X(bc, bc_calls_recv, "client: Calls from the server delivered to its callback " \
			     "server") \
	X(bc, bc_replies_sent, "client: Replies to them sent") \
	X(bc, bc_calls_dropped, "client: Calls from the server dropped: no callback " \
				"server started, more than callback_slots at once, or " \
				"too long") \
	/* server limits (docs/security.md "Limits"; the connection ones also \
	 * on tcp://) */ \
	X(limits, calls_refused, "Calls answered ERR_CHUNK for lack of memory (never " \
				 "dropped silently)") \
	X(limits, send_stalls, "connections closed, their Sends stalled for " \
			       "send_timeout_ms") \
	X(limits, refused_conns, "connection requests refused: over max_conns or " \
				 "max_conns_per_host, stopping, or no resources") \
	X(limits, idle_closed, "connections closed after idle_timeout_ms") \
	X(limits, accept_backoffs, "accepting paused for want of file descriptors or " \
				   "memory (EMFILE, ENFILE, ENOBUFS, ENOMEM)") \
	X(limits, handshakes_dropped, "rdma://: half-open connections closed (over " \
				      "max_handshakes, timed out, or their fds given to " \
				      "an established one)") \
	/* credits and the server's shared receive pools (docs/protocol.md \
	 * "Credits") */ \
	X(pool, credit_overruns, "server: messages beyond the peer's grant (RFC 8166 " \
				 "4.3.1): their connections ended") \
	X(pool, grants_clipped, "server: grants lowered for want of free Receives in " \
				"the pool") \
	X(pool, pool_grown, "server: Receives added to shared receive queues") \
	X(pool, pool_released, "server: consumed Receives not posted again (a pool " \
			       "shrinking to its demand)") \
	X(pool, srq_limit_events, "server: shared receive queue low-water events") \
	/* faults of the RDMA provider (docs/rdma-provider.md "Asynchronous \
	 * errors", "CQ sizing"): each connection ended by one is counted once, \
	 * under its cause, besides fatal_errors */ \
	X(faults, cq_overruns, "connections ended by an overrun of their CQ (soft: a " \
			       "full ring; verbs: IBV_EVENT_CQ_ERR): -EOVERFLOW") \
	X(faults, cq_failures, "connections ended because a poll, arm or wait of " \
			       "their CQ answered an error (that errno)") \
	X(faults, cq_refused, "QPs a CQ refused (no room for their queues: -ENOSPC; " \
			      "overran: -EIO), then made on another CQ") \
	X(faults, wr_errors, "our send-queue work requests that completed in error, " \
			     "not flushed (a bad local key, a failed Read, the " \
			     "peer's Terminate): the QP to error, the connection ended") \
	X(faults, qp_fatal, "verbs: connections ended by IBV_EVENT_QP_FATAL (-EIO); " \
			    "not on the soft provider") \
	X(faults, qp_req_errors, "verbs: ... by IBV_EVENT_QP_REQ_ERR (-EPROTO); not " \
				 "on the soft provider") \
	X(faults, qp_access_errors, "verbs: ... by IBV_EVENT_QP_ACCESS_ERR (-EACCES); " \
				    "not on the soft provider") \
	X(faults, srq_errors, "verbs: ... by IBV_EVENT_SRQ_ERR of their shared " \
			      "receive queue (-EIO); not on the soft provider") \
	X(faults, device_fatal, "verbs: ... by IBV_EVENT_DEVICE_FATAL (-ENODEV); not " \
				"on the soft provider") \
	/* the quiet Sends' watch (docs/security.md "Limits"): a server's \
	 * Replies posted unsignaled and left unproven for half the send \
	 * timeout get a probe, a signaled zero-length RDMA Write */ \
	X(watch, quiet_probes, "server: probes posted for quiet Replies left " \
			       "waiting half the send timeout") \
	X(watch, quiet_probes_done, "server: probes completed successfully (their " \
				    "quiet Replies' slots given back)")

#define RPCRDMA_XPRT_STAT_FIELD_(group, name, what) uint64_t name;

struct rpcrdma_xprt_stats {
	RPCRDMA_XPRT_STATS(RPCRDMA_XPRT_STAT_FIELD_)
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
/* Prints @st to @f, one line per group ("\tgroup: name value ..."), after
 * "xprt: TRANSPORT connections N". 0, -EINVAL or -EIO. */
RPCRDMA_API int rpcrdma_xprt_stats_print(const struct rpcrdma_xprt_stats *st, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
