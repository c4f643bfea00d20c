/* SPDX-License-Identifier: BSD-2-Clause */
/* The sans-I/O core of the RPC-over-RDMA Version 1 transport (RFC 8166), both
 * roles. No syscalls, no verbs: bytes and events in, decisions and bytes out.
 *
 * Requester (RFC 8166 section 3.5 "Message Size", 3.4/3.5 chunks, 4.4 "Header
 * Errors"): rr_xprt_rqst_prepare() decides the message form of a Call -- a
 * Short message (RDMA_MSG) when the whole Call fits the call inline threshold,
 * DDP-eligible argument items reduced into Read chunks (one Read chunk per item,
 * XDR pad removed from the Payload stream and not sent in the chunk) when it
 * does not, and a Long Call (RDMA_NOMSG, position-zero Read chunk carrying the
 * reduced stream, items still in their own Read chunks) when even the reduced
 * Call does not fit. It provisions one Write chunk per expected DDP-eligible
 * result -- none when the largest possible Reply with the results inline fits
 * the reply inline threshold (params.inline_ddp, RFC 8166 section 3.4.2: Write
 * chunks are the requester's option) -- and a Reply chunk when the largest
 * possible Reply exceeds the reply inline threshold. The output is the list of memory ranges the driver must
 * register (with access rights); after registration rr_xprt_rqst_marshal()
 * writes the complete Send (header + inline payload) into the driver's send
 * buffer. rr_xprt_req_recv() matches a Reply to its Call by XID, validates it
 * against what was provisioned (silently discarding malformed Replies and
 * unknown XIDs, RFC 8166 section 4.5) and rebuilds the reply: the Payload
 * stream (inline or from the Reply chunk) and the actual length written into
 * each result sink.
 *
 * Responder (RFC 8166 sections 3.5, 4.5, 5): rr_xprt_rsp_recv() parses a Call
 * into either an RDMA_ERROR to send (ERR_VERS 1..1, ERR_CHUNK), a silent drop,
 * or a receive context with the RDMA Reads to issue (directly into the final
 * positions of the rebuilt Payload stream, pads supplied as zeros);
 * rr_xprt_rsp_assemble() finishes the stream once the Reads completed.
 * rr_xprt_rsp_reply() builds the Reply: DDP-eligible result items pushed with
 * RDMA Write into the requester's Write chunks (contiguous fill, only consumed
 * segments returned, unused chunks with a count of 0, no pad bytes written), the
 * rest inline, or through the Reply chunk (Long Reply), or RDMA_ERROR ERR_CHUNK
 * when it fits nowhere. With remote invalidation negotiated it names one STag
 * of that Call for Send With Invalidate (draft-cel-nfsv4-rpcrdma-remote-
 * invalidation, RFC 8797 section 4).
 *
 * Reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply, proto/rrep.h), when
 * params.reliable_reply is negotiated: the responder's "fits nowhere" branch
 * (rsp_reply_oversize) builds an RDMA_NOMSG Reply with a Position-zero Read
 * chunk instead of ERR_CHUNK; the requester turns a Reply carrying one (the
 * header codec accepts it only then) into R_PULL, and the Reply-chunk
 * decision follows the policy of draft 5.3.1 (rr_rrep_choose).
 *
 * Ownership: the core never keeps pointers to caller memory beyond what each
 * function states. Calls (struct rr_xprt_rqst) and receive contexts (struct
 * rr_xprt_rcall) are allocated through the environment and owned by the core
 * until released. */
#ifndef RR_PROTO_XPRT_H
#define RR_PROTO_XPRT_H

#include <stdio.h>

#include "common/common.h"
#include "proto/hdr.h"
#include "rpcrdma/stats.h"

/* The header is the codec's struct rr_hdr (proto/hdr.h), decoded into and
 * built in place; the wire constants are the codec's (RR_HDR_MSG, ...). */

/* Limits of this implementation (peers exceeding them get ERR_CHUNK; a
 * Reply exceeding them is discarded). The header model's capacity
 * (RR_HDR_MAX_SEGS segments, RR_HDR_MAX_READ_CHUNKS Read chunks,
 * RR_HDR_MAX_WRITE_CHUNKS Write chunks) bounds the headers the core sends
 * as well as those it accepts. */
#define RR_XPRT_MAX_SEGS 64u      /* segments in one chunk */
#define RR_XPRT_MAX_READS 64u     /* read segments in a Read list */
#define RR_XPRT_MAX_WCHUNKS 16u   /* Write chunks in a Write list */
#define RR_XPRT_MAX_ITEMS 16u     /* DDP-eligible items in one Call or Reply */
#define RR_XPRT_MAX_REGS (RR_XPRT_MAX_ITEMS * 2u + 2u)

/* The limits the core decodes a received header under: the ones above,
 * @inline_max the receive inline threshold and @max_chunk the largest chunk
 * (0: none), @reliable_reply the extension's Position-zero Read chunk in a
 * Reply (proto/hdr.h). */
void rr_xprt_hdr_limits(struct rr_hdr_limits *lim, uint32_t inline_max, uint32_t max_chunk,
			bool reliable_reply);

/* ---- negotiated parameters ---- */

struct rr_xprt_params {
	uint32_t call_inline;   /* largest Call Send (header + payload) */
	uint32_t reply_inline;  /* largest Reply Send (header + payload) */
	bool local_r;           /* we advertised R (accept remote invalidation) */
	bool peer_r;            /* the peer advertised R */
	uint32_t max_seg_len;   /* largest segment we expose (split above) */
	uint32_t max_segs;      /* most segments we put in one chunk */
	uint32_t max_call;      /* responder: largest Call it accepts */
	/* Reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply, proto/rrep.h):
	 * negotiated by both peers' RELIABLE_REPLY capability. */
	bool reliable_reply;
	uint32_t max_pull;      /* requester: largest Reply it pulls (0: 256 MiB) */
	/* Requester: small DDP-eligible results inline (Linux xprtrdma's
	 * rpcrdma_results_inline; RFC 8166 section 3.4.2 makes Write chunks the
	 * requester's option): sinks whose largest possible Reply (MIN_HDR +
	 * max_reply + every sink's length padded) fits reply_inline get no
	 * Write chunk (and no registration). false: one Write chunk per sink,
	 * always. Default true. (Argument items are inline whenever the whole
	 * Call fits call_inline, with either setting.) */
	bool inline_ddp;
	/* Requester, with inline_ddp: the most sink bytes (every sink's length
	 * padded, summed) that may come inline; larger results get Write
	 * chunks even when the Reply would fit reply_inline. A result
	 * conveyed inline is copied twice (the responder's Send buffer, then
	 * the caller's sink); RDMA Written, it is placed in the sink and costs
	 * no round trip more (the Write precedes the Reply's Send). Matters
	 * where the inline threshold is large (rdma://: 132 KiB): a 64 KiB
	 * READ took ~40 us inline, ~34 us through a Write chunk
	 * (docs/PERFORMANCE.md "Issue 16 part I"). Default
	 * RR_XPRT_INLINE_DDP_MAX; 0: no bound but reply_inline. */
	uint32_t inline_ddp_max;
};

/* The default inline_ddp_max: at 16 KiB both forms measured alike on
 * rdma://, at 1-4 KiB inline is ~1 us faster, at 64 KiB ~6 us slower. */
#define RR_XPRT_INLINE_DDP_MAX 16384u

/* Defaults: RFC 8166 1024/1024 inline (RR_HDR_DEFAULT_INLINE), no R, 1 MiB
 * segments, 16 per chunk, inline_ddp on up to RR_XPRT_INLINE_DDP_MAX. */
void rr_xprt_params_default(struct rr_xprt_params *p);

/* ---- statistics ----
 * The transport's counters: every one of the public table
 * (include/rpcrdma/stats.h RPCRDMA_XPRT_STATS, where each is described),
 * counted by the session and the executor, exported by name
 * (rr_xprt_stats_export). Their order is not the public struct's: the
 * ones every inline Call and Reply adds to come first, together in 64
 * bytes (issue 16 part DC: in the table's order they were in three lines,
 * each a miss per call at 100 connections), then the rest in the table's
 * order. A counter named in RR_XPRT_STATS_HOT needs its RR_XPRT_HOT_<name>
 * below (else it is declared twice: an error), and one with an
 * RR_XPRT_HOT_<name> not in the list is missing (the size check fails). */
#define RR_XPRT_STATS_HOT(X) \
	X(sends) X(recvs) X(msg_sent) X(msg_recv) X(inline_sent_bytes) X(inline_recv_bytes) \
	X(short_msgs) X(pullup_bytes)
#define RR_XPRT_HOT_sends ~, 1
#define RR_XPRT_HOT_recvs ~, 1
#define RR_XPRT_HOT_msg_sent ~, 1
#define RR_XPRT_HOT_msg_recv ~, 1
#define RR_XPRT_HOT_inline_sent_bytes ~, 1
#define RR_XPRT_HOT_inline_recv_bytes ~, 1
#define RR_XPRT_HOT_short_msgs ~, 1
#define RR_XPRT_HOT_pullup_bytes ~, 1
/* RR_XPRT_IS_HOT(name): 1 if RR_XPRT_HOT_<name> is defined, else 0 */
#define RR_XPRT_SECOND_(a, b, ...) b
#define RR_XPRT_PROBE_(...) RR_XPRT_SECOND_(__VA_ARGS__, 0, ~)
#define RR_XPRT_IS_HOT(name) RR_XPRT_PROBE_(RR_XPRT_HOT_##name)
#define RR_XPRT_CAT_(a, b) a##b
#define RR_XPRT_CAT(a, b) RR_XPRT_CAT_(a, b)
#define RR_XPRT_UNLESS_0(x) x
#define RR_XPRT_UNLESS_1(x)
#define RR_XPRT_HOT_FIELD_(name) uint64_t name;
#define RR_XPRT_COLD_FIELD_(group, name, what) \
	RR_XPRT_CAT(RR_XPRT_UNLESS_, RR_XPRT_IS_HOT(name))(uint64_t name;)

struct rr_xprt_stats {
	RR_XPRT_STATS_HOT(RR_XPRT_HOT_FIELD_)
	RPCRDMA_XPRT_STATS(RR_XPRT_COLD_FIELD_)
};
_Static_assert(sizeof(struct rr_xprt_stats) == offsetof(struct rpcrdma_xprt_stats, connections),
	       "struct rr_xprt_stats has every counter of the table once");
_Static_assert(offsetof(struct rr_xprt_stats, pullup_bytes) + sizeof(uint64_t) <= 64,
	       "the counters every call adds to fit 64 bytes");

/* @o gets every counter of @s (connections and transport: left as they
 * are). */
void rr_xprt_stats_export(const struct rr_xprt_stats *s, struct rpcrdma_xprt_stats *o);

/* ---- memory the driver must register ---- */
#define RR_XPRT_ACC_REMOTE_READ 1u   /* peer RDMA Reads it (Read chunk) */
#define RR_XPRT_ACC_REMOTE_WRITE 2u  /* peer RDMA Writes it (Write/Reply chunk) */
#define RR_XPRT_ACC_LOCAL_WRITE 4u   /* RDMA Read sink (responder) */

struct rr_xprt_reg {
	void *base;
	size_t len;
	unsigned access;
	/* Filled by the driver on registration: */
	uint32_t stag;
	uint64_t addr;     /* remote address of base (offset field of segments) */
	void *mr;          /* driver's handle */
	bool valid;        /* registered and not yet invalidated */
};

/* ---- requester ---- */

/* One piece of a Call's XDR stream. A DDP-eligible item (@ddp) is the data of
 * an opaque: @len unpadded; its XDR pad is implied and must not be included. */
struct rr_xprt_part {
	const void *base;
	uint32_t len;
	bool ddp;
};

/* Where an expected DDP-eligible result lands (a Write chunk). */
struct rr_xprt_sink {
	void *base;
	uint32_t len;
};

struct rr_xprt_rqst_desc {
	uint32_t xid;
	const struct rr_xprt_part *parts;
	unsigned nparts;
	const struct rr_xprt_sink *sinks;
	unsigned nsinks;
	uint32_t max_reply;  /* largest reduced Reply (excluding sink data) */
	/* Reliable reply policy inputs (draft 5.3.1, proto/rrep.h): */
	uint32_t min_reply;  /* smallest reduced Reply the upper layer expects */
	bool max_unknown;    /* @max_reply is only a ceiling, not a known bound */
};

enum rr_xprt_form {
	RR_XPRT_FORM_SHORT,   /* RDMA_MSG, no Read chunk */
	RR_XPRT_FORM_READ,    /* RDMA_MSG with Read chunks */
	RR_XPRT_FORM_LONG,    /* RDMA_NOMSG, position-zero Read chunk */
};

struct rr_xprt_rqst {
	/* First: zeroed when the call is prepared (rqst_get; within 64
	 * bytes, a few stores). What follows is written before it is read:
	 * xid, desc, xdr_len, reduced_len, nitems and item_pos[k] for k <
	 * nitems by prepare; form, one_part, results_inline, the *_reg fields,
	 * reply_len and nregs by plan (one_part and form by prepare_short), item_reg[k] and sink_reg[i] for k < nitems and i
	 * < desc.nsinks, regs[i] for i < nregs (add_reg); pprev by the XID
	 * table's add. */
	struct rr_xprt_rqst *next;       /* XID table chain */
	void *user;                      /* driver's cookie */
	uint8_t *pullup;
	uint8_t *reply_buf;
	bool outstanding;                /* in the XID table awaiting a Reply */
	uint32_t xid;
	enum rr_xprt_form form;
	/* a Short Call of one inline part, no chunk, no sink (the form
	 * marshal_short writes): set by the plan (prepare_short's or
	 * plan's), so that the builder does not test the plan's fields
	 * again per Send (issue 16 part HC) */
	bool one_part;
	/* the link that points at this call in its XID table chain (the
	 * bucket's head or the previous call's next): written when it
	 * enters the table, read only while it is there (outstanding), so
	 * that it leaves without a walk of its chain */
	struct rr_xprt_rqst **pprev;
	struct rr_xprt_rqst_desc desc;   /* borrowed until the Call completes */
	uint32_t xdr_len;                /* full (unreduced) XDR length */
	uint32_t reduced_len;            /* inline parts only */
	unsigned nitems;
	int pullup_reg;                  /* Long Call buffer, -1 if none */
	bool results_inline;             /* no Write chunks: sinks' data inline */
	int reply_reg;                   /* Reply chunk, -1 if none */
	uint32_t reply_len;
	unsigned nregs;
	uint32_t item_pos[RR_XPRT_MAX_ITEMS];
	int item_reg[RR_XPRT_MAX_ITEMS]; /* -1 when sent inline */
	int sink_reg[RR_XPRT_MAX_ITEMS]; /* -1 when results come inline */
	struct rr_xprt_reg regs[RR_XPRT_MAX_REGS];
};


/* The result of a received Reply. */
enum rr_xprt_rkind {
	RR_XPRT_R_DROP,    /* discarded (malformed, unknown XID, not a Reply) */
	RR_XPRT_R_REPLY,   /* @call completed with a Reply */
	RR_XPRT_R_ERROR,   /* @call completed with RDMA_ERROR (@err) */
	RR_XPRT_R_PULL,    /* reliable reply: RDMA_NOMSG with a responder-provided
			      Read chunk; @call (NULL: XID unknown) is out of the
			      XID table; pull @pull_segs, then
			      rr_xprt_req_pulled(); an RDMA_DONE is owed */
};

struct rr_xprt_reply {
	/* First, cleared by rr_xprt_req_recv (64 bytes: a few stores). */
	enum rr_xprt_rkind kind;
	uint32_t credit;              /* the grant (0 treated as 1) */
	struct rr_xprt_rqst *call;
	const uint8_t *payload;       /* rebuilt Payload stream (reduced) */
	struct rr_xprt_rqst *inv_other;   /* another Call whose STag the peer
					     invalidated (peer error) */
	int err;                      /* R_ERROR: -EPROTONOSUPPORT / -EREMOTEIO */
	uint32_t payload_len;         /* points into the Receive or Reply chunk */
	uint32_t nsinks;
	/* R_PULL: */
	uint32_t xid;                 /* rdma_xid (for the RDMA_DONE) */
	uint32_t pull_nsegs;          /* 0: nothing to read (unknown XID / too big) */
	uint32_t pull_len;            /* sum of the segment lengths */
	uint32_t pull_stag;
	bool pull_inv;                /* one STag for every segment: may be named
					 by Send With Invalidate */
	bool long_reply;
	/* Per result sink: cleared for the first nsinks where nsinks is set
	 * (read only up to nsinks). */
	uint32_t sink_len[RR_XPRT_MAX_ITEMS]; /* bytes written per result sink */
	bool sink_placed[RR_XPRT_MAX_ITEMS];  /* its Write chunk came back used */
	/* last: read only up to pull_nsegs (not cleared, 1 KiB) */
	struct rr_hdr_seg pull_segs[RR_XPRT_MAX_READS];
};


struct rr_xprt_requester {
	const struct rpcrdma_env *env;
	struct rr_xprt_params params;
	struct rr_xprt_stats *stats;
	/* what every Reply reads (rr_xprt_req_recv_found, rr_xprt_req_recv_short) before
	 * the 512-byte table, in the struct's first two cache lines (issue 16
	 * part CI) */
	struct rr_hdr_limits lim;        /* decoding Replies (from params) */
	unsigned outstanding;
	/* the parameters' part of prepare_short's test (xprt_req.c), made
	 * once per parameters: a one-part Call of len bytes passes it when
	 * len - 8 < short_lim (0: none does) */
	uint32_t short_lim;
	struct rr_xprt_rqst *spare;      /* one released call, reused */
	/* an outstanding call kept out of the table (its chain of one: a
	 * lone call adds, finds and unlinks it without the table's line,
	 * issue 16 part DC); the newest outstanding call of its XID */
	struct rr_xprt_rqst *solo;
	struct rr_xprt_rqst *table[64];  /* XID hash */
	struct {
		uint8_t *buf;
		uint32_t len;
	} rcache[4];                     /* recycled Reply chunk buffers */
	/* The header marshalled into each Call and decoded from each Reply
	 * (~2.6 KiB): kept here, not on the stack or allocated per RPC.
	 * rr_hdr_init() and rr_hdr_decode() reset its counts; nothing of a
	 * previous message reaches the wire (the encoder writes only what the
	 * counts name). */
	struct rr_hdr hdr;
};

/* Initialises a requester core. Borrows @env and @stats for its lifetime. */
void rr_xprt_req_init(struct rr_xprt_requester *r, const struct rpcrdma_env *env,
		      const struct rr_xprt_params *p, struct rr_xprt_stats *stats);
/* Frees the recycled buffers. */
void rr_xprt_req_fini(struct rr_xprt_requester *r);
/* New settings (after a reconnect). */
void rr_xprt_req_set_params(struct rr_xprt_requester *r, const struct rr_xprt_params *p);

/* Plans a Call. On success *@out is a new call whose regs[0..nregs) the driver
 * registers (filling stag/addr/mr/valid). Borrows @d (and the memory it names)
 * until the call is released. Returns 0, -EINVAL (bad description: unaligned
 * item position, too many items), -EMSGSIZE (cannot be conveyed even as a Long
 * Call within the segment limits) or -ENOMEM. */
int rr_xprt_rqst_prepare(struct rr_xprt_requester *r, const struct rr_xprt_rqst_desc *d,
			 struct rr_xprt_rqst **out);

/* Re-plans an existing call under the current params (after a reconnect the
 * thresholds may have changed): drops the old registration list (the driver
 * must have invalidated it) and rebuilds it. Same errors as prepare. */
int rr_xprt_rqst_replan(struct rr_xprt_requester *r, struct rr_xprt_rqst *c);

/* Frees @c's pull-up and Reply chunk buffers (a queued Call that will be
 * re-planned when it is sent). Its registrations must not be in use. */
void rr_xprt_rqst_drop_bufs(struct rr_xprt_requester *r, struct rr_xprt_rqst *c);

/* Writes the Send for @c (header with @credit request, then the inline payload)
 * into @buf. Every reg must be valid. Inserts @c in the XID table. Returns the
 * length or -EMSGSIZE / -EINVAL. */
int rr_xprt_rqst_marshal(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			 uint32_t credit, uint8_t *buf, size_t cap);

/* rr_xprt_rqst_prepare and rr_xprt_rqst_marshal without their one-pass
 * form for the Short Call without chunks (one inline part, no result
 * sink, no Reply chunk): every Call through the general planner and
 * builder. The same contracts; for the tests and fuzz_xprt that prove the
 * one-pass form equal to them. */
int rr_xprt_rqst_prepare_general(struct rr_xprt_requester *r, const struct rr_xprt_rqst_desc *d,
				 struct rr_xprt_rqst **out);
int rr_xprt_rqst_marshal_general(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
				 uint32_t credit, uint8_t *buf, size_t cap);

/* Processes a received message. @inv_stag is the STag the peer invalidated
 * (Send With Invalidate) when @has_inv. Fills @out; for R_REPLY/R_ERROR the
 * call is removed from the XID table and the caller must invalidate every
 * reg still valid before reporting completion. @out->payload points into @buf
 * or the call's Reply chunk buffer. */
void rr_xprt_req_recv(struct rr_xprt_requester *r, const uint8_t *buf, size_t len,
		      bool has_inv, uint32_t inv_stag, struct rr_xprt_reply *out);
/* rr_xprt_req_recv for a caller that looked the XID up already: @c is
 * rr_xprt_req_find's answer for the XID in @buf's first four bytes (NULL
 * when @len < 4 or none), so the table is searched once per message. */
void rr_xprt_req_recv_found(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			    const uint8_t *buf, size_t len, bool has_inv, uint32_t inv_stag,
			    struct rr_xprt_reply *out);
/* rr_xprt_req_recv_found's one-pass form alone: true when @buf is the
 * common short Reply for @c (the short header of RFC 8166 4.2 with three
 * empty lists, no invalidation: @has_inv false), @out filled and @c out of
 * the XID table exactly as rr_xprt_req_recv_found does for it (no
 * registration's valid flag changes, out->inv_other NULL); false: nothing
 * touched, rr_xprt_req_recv_found_general decides. */
bool rr_xprt_req_recv_short(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			    const uint8_t *buf, size_t len, bool has_inv,
			    struct rr_xprt_reply *out);
/* rr_xprt_req_recv_found without its one-pass form for the common short
 * Reply (the short header of RFC 8166 4.2 with three empty lists, for a
 * Call found, no invalidation): every message through the codec and the
 * general checks. The same contract; for the tests and fuzz_xprt that
 * prove the one-pass form equal to it. (The header scratch, r->hdr, is
 * not filled by the one-pass form: nothing reads it after a receive.) */
void rr_xprt_req_recv_found_general(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
				    const uint8_t *buf, size_t len, bool has_inv,
				    uint32_t inv_stag, struct rr_xprt_reply *out);

/* Reliable reply: the @len bytes pulled for an R_PULL of @c are in @buf
 * (the Reply's Payload stream). Checks it is the RPC Reply of @c and fills
 * @out->payload/@out->payload_len (pointing into @buf) and @out->kind
 * (R_REPLY, or R_DROP for a Reply that is not @c's). Borrows @buf. */
void rr_xprt_req_pulled(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			const uint8_t *buf, uint32_t len, struct rr_xprt_reply *out);

/* Removes @c from the XID table (timeout / cancel); idempotent. */
void rr_xprt_rqst_forget(struct rr_xprt_requester *r, struct rr_xprt_rqst *c);

/* Frees @c (and its pull-up and Reply buffers). The driver must have
 * invalidated every registration first. */
void rr_xprt_rqst_release(struct rr_xprt_requester *r, struct rr_xprt_rqst *c);

/* Finds an outstanding call. */
struct rr_xprt_rqst *rr_xprt_req_find(struct rr_xprt_requester *r, uint32_t xid);

/* ---- responder ---- */

/* One RDMA Read to issue: remote segment into @local_off of the context's
 * buffer. */
struct rr_xprt_read_op {
	uint32_t stag;
	uint64_t remote;
	uint32_t len;
	uint32_t local_off;
};

enum rr_xprt_rsp_action {
	RR_XPRT_A_DROP,      /* say nothing */
	RR_XPRT_A_ERROR,     /* send @err_msg (RDMA_ERROR) */
	RR_XPRT_A_READ,      /* issue @rc->reads, then rr_xprt_rsp_assemble() */
	RR_XPRT_A_DELIVER,   /* @rc->msg is the Call */
};

/* A received Call in progress (responder receive context). */
struct rr_xprt_rcall {
	/* Scalars first: a context is zeroed up to @hdr when (re)used, and
	 * the header's scalars up to its Reply chunk by the decoder: 128
	 * bytes on a line-aligned context (rr_alloc_line), two cache lines
	 * (static assertions in xprt_rsp.c keep them so: issue 16 parts AF,
	 * FD); the header and the arrays after it are read only below the
	 * counts the decoder and rr_xprt_rsp_recv set. The Call's requested
	 * credits and procedure are the header's (hdr.credit, hdr.proc). The
	 * Read sink's registration is the session's (struct rs_req's
	 * read_mem). */
	uint8_t *buf;                /* rebuilt stream (+ staging for Long Call) */
	uint8_t *msg;                /* the Call message */
	void *user;
	uint32_t xid;
	uint32_t buf_len;
	uint32_t buf_cap;            /* bytes allocated at @buf (>= buf_len) */
	uint32_t msg_len;
	uint32_t nreads;
	uint32_t read_bytes;
	/* Layout plan, used by assemble: inline pieces to copy. */
	uint32_t ncopies;
	uint32_t nitems;            /* Read chunks other than position zero */
	struct rr_hdr hdr;           /* the Call's header (chunks) */
	struct rr_xprt_read_op reads[RR_XPRT_MAX_READS];
	struct {
		uint32_t dst, src, len;
		bool from_stage;    /* Long Call: from the position-zero staging */
	} copies[RR_XPRT_MAX_ITEMS + 1];
	uint32_t item_pos[RR_XPRT_MAX_ITEMS], item_len[RR_XPRT_MAX_ITEMS];
};

#define RR_XPRT_RSP_SPARES 16u
/* Rebuilt-Call buffers of small Calls (up to RFC 8166's default inline
 * size): all of one capacity, so that any kept one serves any small
 * Call; at most RR_XPRT_RSP_SMALL_BUFS kept besides spare_buf. */
#define RR_XPRT_RSP_SMALL_BUF 1024u
#define RR_XPRT_RSP_SMALL_BUFS 4u

/* Released Call contexts and small rebuilt-Call buffers (of
 * RR_XPRT_RSP_SMALL_BUF bytes) kept for every responder that shares them:
 * the sessions of one progress loop, whose next Call, on whichever
 * connection, takes the ones released last, still in cache (issue 16 part
 * GF: a connection's own spares are cold at 100 connections). Two stacks
 * of at most RR_XPRT_RSP_SHARED entries (enough for a batch of Calls
 * served together: a drain at 100 connections brings about 12); what
 * does not fit goes to the responder's own spares as before. No lock of
 * its own: every responder sharing one is called under one lock (the
 * executor's), allocates on the same env, and its owner empties it
 * (rr_xprt_rsp_shared_drain) once none of them is left. */
#define RR_XPRT_RSP_SHARED 32u
struct rr_xprt_rsp_shared {
	unsigned nctxs, nbufs;
	struct rr_xprt_rcall *ctxs[RR_XPRT_RSP_SHARED];
	uint8_t *bufs[RR_XPRT_RSP_SHARED];
};

struct rr_xprt_responder {
	/* What a Call reads or writes here first (the counters' pointer,
	 * the shared contexts and buffers it takes from and releases to,
	 * the limits its decoding and its Reply check: 84 bytes), the
	 * session's own kept buffers' and contexts' counts (read when the
	 * shared ones are empty or full) and the spares' array after them (a
	 * LIFO: its low entries are the ones in use), what is read only at
	 * set-up last: a session's per-call lines (issue 16 parts EB, HF). */
	struct rr_xprt_stats *stats;
	/* contexts and small buffers taken from and released to first
	 * (rr_xprt_rsp_share) */
	struct rr_xprt_rsp_shared *shared;
	struct rr_xprt_params params;
	struct rr_hdr_limits lim;        /* decoding Calls (from params) */
	unsigned nspares;
	unsigned nsmall;
	/* With spares kept: one released rebuilt-Call buffer (capacity at
	 * most RR_XPRT_RSP_BUF_KEEP) is reused by the next Call that fits
	 * (a malloc/free of 96 KiB .. 1 MiB per Call makes glibc trim and
	 * regrow the heap, or mmap/munmap, around it); and up to
	 * RR_XPRT_RSP_SMALL_BUFS more of RR_XPRT_RSP_SMALL_BUF bytes (the
	 * size every Call up to it gets), for Calls in flight at once. */
	uint8_t *spare_buf;
	uint32_t spare_buf_cap;
	/* rr_xprt_rsp_keep_spares: released Call contexts (~4.6 KiB each)
	 * are kept for reuse instead of freed (the Reply-building header is
	 * on the stack, rr_xprt_rsp_reply): an allocation per RPC is
	 * avoidable work, and a larger one can make the allocator give pages
	 * back and fault them in again. */
	unsigned max_spares;
	struct rr_xprt_rcall *spares[RR_XPRT_RSP_SPARES];
	/* read only when more than one Call is in flight (the spare_buf
	 * serves one at a time): after the spares' first entries (part FD) */
	uint8_t *small[RR_XPRT_RSP_SMALL_BUFS];
	const struct rpcrdma_env *env;
};


#define RR_XPRT_RSP_BUF_KEEP ((1u << 20) + 65536u)

void rr_xprt_rsp_init(struct rr_xprt_responder *s, const struct rpcrdma_env *env,
		      const struct rr_xprt_params *p, struct rr_xprt_stats *stats);
/* Keeps up to @n (at most RR_XPRT_RSP_SPARES) released Call contexts and the
 * Reply header for reuse; rr_xprt_rsp_fini frees them. Off after init. */
void rr_xprt_rsp_keep_spares(struct rr_xprt_responder *s, unsigned n);
/* Frees what rr_xprt_rsp_keep_spares kept (no-op otherwise). The Call
 * contexts still held by the caller are released as before. */
void rr_xprt_rsp_fini(struct rr_xprt_responder *s);
/* Call contexts and small buffers are taken from @sh first and released
 * to it first (NULL: none, the default), whatever rr_xprt_rsp_keep_spares
 * says. @sh must
 * outlive @s, and every responder sharing @sh allocate on the same env. */
void rr_xprt_rsp_share(struct rr_xprt_responder *s, struct rr_xprt_rsp_shared *sh);
/* Frees what @sh keeps (allocated on @env); no responder uses it any more. */
void rr_xprt_rsp_shared_drain(struct rr_xprt_rsp_shared *sh, const struct rpcrdma_env *env);

/* Parses a received Call of @len bytes. Returns the action:
 *  DROP: nothing to do; ERROR: send the @err_len bytes written to @err_msg
 *  (capacity >= 28); READ/DELIVER: *@out is a new receive context (the
 *  inline part of @buf has been copied; @buf may be reposted). @grant is the
 *  credit value placed in an RDMA_ERROR. Out of memory, a Call is answered
 *  ERR_CHUNK (stats->calls_refused), never dropped. */
enum rr_xprt_rsp_action rr_xprt_rsp_recv(struct rr_xprt_responder *s,
					 const uint8_t *buf, size_t len,
					 uint32_t grant, uint8_t *err_msg,
					 size_t *err_len,
					 struct rr_xprt_rcall **out);

/* After all reads of @rc completed: copies the inline pieces into place and
 * checks the Call (XID agreement, RPC Call message type). Returns DELIVER, or
 * ERROR with an ERR_CHUNK in @err_msg. */
enum rr_xprt_rsp_action rr_xprt_rsp_assemble(struct rr_xprt_responder *s,
					     struct rr_xprt_rcall *rc,
					     uint32_t grant, uint8_t *err_msg,
					     size_t *err_len);

/* One RDMA Write to issue from local memory. */
struct rr_xprt_write_op {
	const uint8_t *src;
	uint32_t len;
	uint32_t stag;
	uint64_t remote;
};

/* The Reply plan. */
struct rr_xprt_reply_plan {
	struct rr_xprt_write_op writes[RR_XPRT_MAX_WCHUNKS * RR_XPRT_MAX_SEGS +
				       RR_XPRT_MAX_SEGS];
	uint32_t nwrites;
	uint32_t write_bytes;
	uint32_t send_len;      /* bytes written to the send buffer */
	bool send_inv;          /* use Send With Invalidate */
	uint32_t inv_stag;
	bool is_error;          /* ERR_CHUNK sent instead */
	uint32_t proc;          /* RDMA_MSG / RDMA_NOMSG / RDMA_ERROR */
	/* Reliable reply: the reduced Reply goes in a responder-provided
	 * Position-zero Read chunk. The driver registers @rr_buf (@rr_len
	 * bytes, owned by the driver from now on: rr_free with the core's env)
	 * read-only and invalidatable, patches the header in the send buffer
	 * with rr_rrep_rsp_patch(), and keeps it until RDMA_DONE / timeout. */
	bool read_chunk;
	uint8_t *rr_buf;
	uint32_t rr_len;
	uint32_t rr_nsegs, rr_seg_len;
};

/* Builds the Reply to @rc from the reply stream @parts (DDP-eligible items
 * flagged; the k-th item goes to the k-th Write chunk when there is one).
 * Writes the Send into @buf (capacity >= reply_inline) and fills @plan with the
 * RDMA Writes to post before the Send. Returns 0, -EINVAL (bad parts), or
 * -EMSGSIZE (@buf too small). When nothing fits, @plan->is_error is set and
 * @buf holds ERR_CHUNK. Borrows @parts until the writes complete. */
int rr_xprt_rsp_reply(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		      const struct rr_xprt_part *parts, unsigned nparts,
		      uint32_t grant, uint8_t *buf, size_t cap,
		      struct rr_xprt_reply_plan *plan);
/* rr_xprt_rsp_reply without its one-pass form (a Call without Write list
 * and Reply chunk answered inline, RR_XPRT_SHORT_HDR bytes of header):
 * every Reply through the general builder. The same results; for the tests
 * and fuzz_xprt, which build Replies both ways. */
int rr_xprt_rsp_reply_general(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
			      const struct rr_xprt_part *parts, unsigned nparts,
			      uint32_t grant, uint8_t *buf, size_t cap,
			      struct rr_xprt_reply_plan *plan);
/* An RDMA_MSG header with three empty lists: 7 XDR words. */
#define RR_XPRT_SHORT_HDR 28u

/* rr_xprt_rcall_release's out-of-line parts: a buffer the shared stack
 * does not take (not small, or no room), and a context it does not take:
 * kept in the responder's own spares or freed. */
void rr_xprt_rcall_buf_keep(struct rr_xprt_responder *s, uint8_t *b, uint32_t cap);
void rr_xprt_rcall_keep(struct rr_xprt_responder *s, struct rr_xprt_rcall *rc);
/* Releases @rc (NULL: nothing) and its rebuilt-Call buffer: kept for reuse
 * or freed, a small buffer and the context to the shared stacks first
 * (without a call: the common case). One body for every case (part GF had
 * a second, out of line, for all but the common one). */
static inline void rr_xprt_rcall_release(struct rr_xprt_responder *s, struct rr_xprt_rcall *rc)
{
	struct rr_xprt_rsp_shared *sh = s->shared;

	if (!rc)
		return;
	if (sh && rc->buf_cap == RR_XPRT_RSP_SMALL_BUF && sh->nbufs < RR_XPRT_RSP_SHARED)
		sh->bufs[sh->nbufs++] = rc->buf;
	else if (rc->buf)
		rr_xprt_rcall_buf_keep(s, rc->buf, rc->buf_cap);
	rc->buf = NULL;
	rc->buf_cap = 0;
	if (sh && sh->nctxs < RR_XPRT_RSP_SHARED)
		sh->ctxs[sh->nctxs++] = rc;
	else
		rr_xprt_rcall_keep(s, rc);
}

#endif
