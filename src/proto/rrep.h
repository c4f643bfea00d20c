/* SPDX-License-Identifier: BSD-2-Clause */
/* Reliable reply: responder-provided Read chunks and RDMA_DONE
 * (draft-cel-nfsv4-rpcrdma-reliable-reply-04), the sans-I/O part.
 *
 * - Requester policy (draft 5.3.1): per Call, Send-only, Reply chunk or
 *   responder-provided Read chunk, from what the upper layer knows of the
 *   Reply's size (minimum, maximum, or maximum unknown).
 * - Responder duties (4.1.1): when the reduced Reply exceeds every
 *   requester-provided reply resource, an RDMA_NOMSG Reply whose Payload
 *   stream is a Position-zero Read chunk of one or more segments over one
 *   read-only, invalidatable registration (Write chunks still carry the
 *   DDP-eligible results). The header is built with placeholder handles
 *   and offsets which the driver patches once it has registered the buffer.
 * - Requester duties (4.1.2, 4.1.3): recognise the Read chunk, hand the
 *   segments to the driver (which pulls them by RDMA Read, then sends
 *   RDMA_DONE, also for an XID it no longer knows), check the pulled Reply.
 * - The responder's table of exposed Replies (5.4.3), searchable by XID,
 *   with a timeout on the injected clock: RDMA_DONE matching, dropping of
 *   RDMA_DONE for nothing waiting, retransmitted and forged ones, fencing
 *   on timeout and on disconnect / device removal.
 *
 * Everything the draft leaves open is written down in docs/protocol.md
 * ("Reliable reply: choices the draft leaves open"). Single-threaded: the
 * caller serializes access. No syscalls. */
#ifndef RR_PROTO_RREP_H
#define RR_PROTO_RREP_H

#include "proto/xprt.h"

/* ---- requester policy (draft 5.3.1) ---- */

enum rr_rrep_mech {
	RR_RREP_SEND_ONLY,    /* the largest Reply fits inline: no Reply chunk */
	RR_RREP_REPLY_CHUNK,  /* provide a Reply chunk sized for the largest */
	RR_RREP_READ_CHUNK,   /* no Reply chunk: a large Reply comes as a
				 responder-provided Read chunk */
};

/* The mechanism for a Call described by @d under @p, where @rep_hdr_max is
 * the largest Reply header (Write list echoed in full). Without reliable
 * reply (RFC 8166): a Reply chunk whenever @rep_hdr_max + max_reply exceeds
 * the reply inline threshold. With it: Send-only when a known maximum fits;
 * a Reply chunk only when the known minimum already exceeds the threshold
 * (the Reply is certainly large, so a Reply chunk saves the Read round trip)
 * and the maximum is known; otherwise the Read chunk. */
enum rr_rrep_mech rr_rrep_choose(const struct rr_xprt_params *p, size_t rep_hdr_max,
				 const struct rr_xprt_rqst_desc *d);

static inline bool rr_rrep_want_reply_chunk(const struct rr_xprt_params *p,
					    size_t rep_hdr_max,
					    const struct rr_xprt_rqst_desc *d)
{
	return rr_rrep_choose(p, rep_hdr_max, d) == RR_RREP_REPLY_CHUNK;
}

/* ---- responder: building the Read-chunk Reply ---- */

/* Builds an RDMA_NOMSG Reply for @rc whose Payload stream (@reduced bytes:
 * the @parts not placed in Write chunks, DDP items with their pad) is copied
 * into a new buffer exposed as a Position-zero Read chunk. @h holds the Write
 * list as it is echoed. Writes the header into @buf with zero handles and
 * offsets relative to the buffer (rr_rrep_rsp_patch() fixes them) and sets
 * plan->read_chunk, rr_buf (the caller owns it on success: rr_free with the
 * responder's env), rr_len, rr_nsegs, rr_seg_len, send_len, proc. Returns 0,
 * -EMSGSIZE (header beyond the reply inline threshold, @cap or the header
 * model's capacity: answer ERR_CHUNK), -ENOMEM. */
int rr_rrep_rsp_build(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		      struct rr_hdr *h, const struct rr_xprt_part *parts, unsigned nparts,
		      uint64_t reduced, uint8_t *buf, size_t cap,
		      struct rr_xprt_reply_plan *plan);

/* Puts the registration's @stag and remote address @addr into the Read
 * segments of the header that rr_rrep_rsp_build() wrote into @buf. */
void rr_rrep_rsp_patch(uint8_t *buf, const struct rr_xprt_reply_plan *plan, uint32_t stag,
		       uint64_t addr);

/* RDMA_DONE (draft 4.1.3): xid - 1 - credit - RDMA_DONE(3), 16 bytes. True
 * when @buf (@len bytes) is a version-1 RDMA_DONE; *@xid gets its rdma_xid.
 * Trailing bytes are ignored. */
bool rr_rrep_is_done(const uint8_t *buf, size_t len, uint32_t *xid);

/* ---- requester ---- */

/* Called by the requester core for a decoded RDMA_NOMSG Reply carrying a
 * Position-zero Read chunk (the codec admits nothing else in a Reply): @c
 * is the matched call (its Write list already checked into @out) or NULL
 * for an XID no longer known. Fills @out as R_PULL (the caller then removes
 * @c from the XID table). Returns 0, or -EBADMSG (a malformed chunk: the
 * Reply is discarded and, since it is not a Reply we can act on, no
 * RDMA_DONE is owed). */
int rr_rrep_req_reply(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
		      const struct rr_hdr *h, struct rr_xprt_reply *out);

/* Encodes an RDMA_DONE for @xid into @buf (credit field: our request, as
 * every message we send carries). Returns 16 or -EMSGSIZE. */
int rr_rrep_encode_done(uint32_t xid, uint32_t credit, uint8_t *buf, size_t cap);

/* ---- responder: the table of exposed Replies (draft 5.4.3) ---- */

struct rr_rrep_entry {
	uint32_t xid;
	uint32_t stag;          /* the STag exposing the Reply */
	bool stag_valid;        /* not yet invalidated (remotely or locally) */
	uint64_t expires_ns;    /* on the env clock */
	void *user;             /* the driver's registration, buffer */
	struct rr_rrep_entry *hnext;          /* XID hash chain */
	struct rr_rrep_entry *older, *newer;  /* age list (oldest expires first) */
};

struct rr_rrep_table {
	const struct rpcrdma_env *env;
	uint64_t timeout_ns;    /* 0: never expire */
	struct rr_rrep_entry *hash[64];
	struct rr_rrep_entry *oldest, *newest;
	struct rr_xprt_stats *stats;   /* may be NULL */
	/* last: every Reply of a session reads it (any exposed?), and the
	 * session's per-call fields follow the table (proto/conn/conn_int.h,
	 * issue 16 part EB) */
	uint32_t count;
};

/* @timeout_ns: how long an exposed Reply waits for its RDMA_DONE. Borrows
 * @env and @stats for the table's lifetime. */
void rr_rrep_table_init(struct rr_rrep_table *t, const struct rpcrdma_env *env,
			uint64_t timeout_ns, struct rr_xprt_stats *stats);

/* Records a Reply exposed under @stag for @xid (expires at now + timeout).
 * Several Replies with one XID may wait at once (a Call executed twice):
 * each RDMA_DONE releases the oldest. Returns the new entry or NULL
 * (-ENOMEM). The table owns the entry until it hands it back. */
struct rr_rrep_entry *rr_rrep_add(struct rr_rrep_table *t, uint32_t xid, uint32_t stag,
				  void *user);

/* What an RDMA_DONE did. */
struct rr_rrep_done {
	struct rr_rrep_entry *release;  /* removed from the table: fence it
					   (unless !stag_valid) and free it */
	struct rr_rrep_entry *stolen;   /* another XID's entry whose STag the
					   peer invalidated (forged): it stays
					   in the table, stag_valid now false */
	bool forged;                    /* Send With Invalidate named an STag
					   that is not this XID's */
	bool unknown;                   /* nothing waiting for this XID:
					   silently dropped (draft 4.1.3) */
};

/* An RDMA_DONE for @xid arrived, with @has_inv / @inv_stag from the Receive
 * completion (Send With Invalidate). The provider has already invalidated
 * @inv_stag, which it only does for an STag bound to this connection, i.e.
 * one we exposed to this peer; this attributes that invalidation to the
 * entry that owns the STag, whichever XID it belongs to. */
void rr_rrep_on_done(struct rr_rrep_table *t, uint32_t xid, bool has_inv, uint32_t inv_stag,
		     struct rr_rrep_done *out);

/* The entry exposed under @stag and not yet invalidated, or NULL (it stays
 * in the table). */
struct rr_rrep_entry *rr_rrep_find_stag(struct rr_rrep_table *t, uint32_t stag);

/* The next entry whose timeout passed at @now (removed from the table), or
 * NULL. Fence it (if stag_valid) and free it. */
struct rr_rrep_entry *rr_rrep_expire(struct rr_rrep_table *t, uint64_t now);

/* Any entry (removed), for disconnect / device removal; NULL when empty. */
struct rr_rrep_entry *rr_rrep_pop(struct rr_rrep_table *t);

/* Deadline of the oldest entry, or UINT64_MAX when empty. */
uint64_t rr_rrep_next_expiry(const struct rr_rrep_table *t);

/* Removes @e from the table (the Reply it describes was never sent). */
void rr_rrep_remove(struct rr_rrep_table *t, struct rr_rrep_entry *e);

/* Frees an entry handed back by the table. */
void rr_rrep_entry_free(struct rr_rrep_table *t, struct rr_rrep_entry *e);

#endif
