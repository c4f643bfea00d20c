/* SPDX-License-Identifier: BSD-2-Clause */
/* The duplicate request cache (DRC) of the RPC server (src/rpc/svc.c): an
 * RFC 5531 server may receive the same Call twice -- librpcrdma's client
 * retransmits every pending Call with the SAME XID after a reconnect on
 * tcp:// and rdma:// (RFC 5531 section 9, "the XID is used only for the
 * client to match replies"; RFC 8166 section 4.4 / "Retransmissions") -- and
 * a non-idempotent procedure must not run twice. Modelled on what Linux nfsd
 * does (the ideas, not the code): a request is keyed by XID, program,
 * version, procedure, the client's host address and a checksum plus length
 * of its arguments (a reused XID with other arguments is not a duplicate);
 * an entry is IN PROGRESS while the handler runs and DONE once its reply is
 * kept. A duplicate of an IN PROGRESS entry is parked on it (and answered
 * with the original's reply bytes when that completes: the original's
 * connection may be gone, and this client does not retransmit on a timer)
 * or, when the entry already has RR_DRC_MAX_WAITERS parked, dropped; a
 * duplicate of a DONE entry gets the kept reply re-sent, DDP-eligible items
 * included (copied, so the transport places them again, e.g. by RDMA Write
 * into the retransmission's own Write chunks). Memory is bounded: at most
 * max_entries entries (LRU eviction of DONE entries), replies above
 * max_reply bytes (inline + DDP data) are not kept, DONE entries expire
 * ttl_ns after their last use (rr_now_ns of the injected environment). An
 * allocation failure means "not cached", never an error. One mutex guards
 * the table; no lock is held while a handler runs or a reply is copied. */
#ifndef RR_RPC_DRC_H
#define RR_RPC_DRC_H

#include "transport/xprt.h"

#include <stdatomic.h>

/* Argument bytes checksummed (as nfsd's RC_CSUMLEN). */
#define RR_DRC_SUM_BYTES 256u
/* Duplicates parked on one IN PROGRESS entry; further ones are dropped. */
#define RR_DRC_MAX_WAITERS 4u

struct rr_drc_key {
	uint32_t xid, prog, vers, proc;
	uint32_t arg_len;      /* length of the complete XDR arguments */
	uint64_t arg_sum;      /* rr_drc_sum of their first RR_DRC_SUM_BYTES */
	uint8_t family;        /* 0: peer address unknown (all zero) */
	uint8_t addr[16];      /* peer host address, no port (a reconnecting
				  client comes from another port) */
};

/* A kept reply: the inline bytes then every DDP-eligible item's data, each
 * item's @ptr pointing into this block. Reference-counted: the cache holds
 * one reference, every re-send in flight one more. */
struct rr_drc_reply {
	atomic_uint refs;
	size_t head_len;
	size_t xdr_len;
	unsigned nddp;
	struct rr_rpc_ddp ddp[RR_RPC_MAX_DDP];
	uint8_t data[];
};

struct rr_drc_entry {
	struct rr_drc_key key;
	uint32_t hash;
	bool done;
	uint64_t stamp;                /* last use (insertion, completion, hit) */
	struct rr_drc_reply *rep;      /* DONE: the kept reply */
	void *waiters[RR_DRC_MAX_WAITERS];
	unsigned nwaiters;
	struct rr_drc_entry *hnext;    /* hash chain */
	struct rr_drc_entry *newer, *older;  /* LRU list */
};

struct rr_drc_conf {
	const struct rpcrdma_env *env;
	unsigned max_entries;          /* > 0 */
	size_t max_reply;              /* largest reply kept (inline + DDP bytes) */
	uint64_t ttl_ns;               /* DONE entries live this long after last use */
};

struct rr_drc_counters {
	uint64_t hits;                 /* replies re-sent from the cache */
	uint64_t drops_in_progress;    /* duplicates of a running request: parked
					  or dropped */
	uint64_t insertions;           /* entries created */
	uint64_t evictions;            /* DONE entries evicted for room */
	uint64_t expirations;          /* DONE entries expired by age */
	uint64_t not_cached;           /* requests run without an entry, or whose
					  reply was not kept */
	uint32_t entries;              /* entries now */
};

struct rr_drc;

/* Creates an empty cache. 0, -EINVAL (max_entries 0), -ENOMEM. */
int rr_drc_create(const struct rr_drc_conf *conf, struct rr_drc **out);
/* Frees the cache, every entry and the cache's reply references. No entry
 * may be IN PROGRESS (the server finished every request). */
void rr_drc_destroy(struct rr_drc *d);

/* FNV-1a (64 bits) of @len bytes, continuing from @h (start with
 * RR_DRC_SUM_INIT). */
#define RR_DRC_SUM_INIT 0xcbf29ce484222325ull
uint64_t rr_drc_sum(uint64_t h, const void *p, size_t len);

enum rr_drc_verdict {
	RR_DRC_RUN = 0,     /* not a duplicate: run the handler, then
			       rr_drc_complete(*@ent) if *@ent is set (NULL:
			       not cached -- full of running requests or no
			       memory) */
	RR_DRC_PARKED = 1,  /* duplicate of a running request: @waiter is
			       parked; rr_drc_complete of that request hands it
			       back */
	RR_DRC_DROP = 2,    /* duplicate of a running request, no room to
			       park: send nothing */
	RR_DRC_REPLAY = 3,  /* duplicate of a completed request: send *@rep,
			       then rr_drc_reply_put(*@rep) */
};

/* Looks @k up and acts as the verdict says. Borrows @k; @waiter is an
 * opaque pointer kept only for RR_DRC_PARKED. */
enum rr_drc_verdict rr_drc_lookup(struct rr_drc *d, const struct rr_drc_key *k, void *waiter,
				  struct rr_drc_entry **ent, struct rr_drc_reply **rep);

/* True when @m (inline bytes plus DDP data) is small enough to be kept. */
bool rr_drc_keepable(const struct rr_drc *d, const struct rr_xprt_msg *m);
/* Copies @m (the reply of @e's request: inline bytes and DDP items) into a
 * new reference-counted block. NULL on allocation failure. Borrows @m. */
struct rr_drc_reply *rr_drc_reply_copy(struct rr_drc *d, const struct rr_xprt_msg *m);
/* The message that re-sends @rep (points into @rep). */
void rr_drc_reply_msg(const struct rr_drc_reply *rep, struct rr_xprt_msg *m);
void rr_drc_reply_get(struct rr_drc_reply *rep);
void rr_drc_reply_put(struct rr_drc *d, struct rr_drc_reply *rep);

/* Ends the IN PROGRESS entry @e. @rep: its request's reply (NULL: no
 * reply copy: none kept, or no memory). @keep: the reply may be kept
 * (a SUCCESS reply, rr_drc_keepable); otherwise, or when @rep is NULL, the
 * entry is removed so that a later duplicate runs again. Returns the parked waiters (at most
 * RR_DRC_MAX_WAITERS, into @waiters) which the caller answers with @rep (one
 * rr_drc_reply_get each) or drops when @rep is NULL. Takes the caller's
 * reference to @rep when @keep and the reply is kept; otherwise the caller
 * still owns that reference. Sets *@kept accordingly. */
unsigned rr_drc_complete(struct rr_drc *d, struct rr_drc_entry *e, struct rr_drc_reply *rep,
			 bool keep, void **waiters, bool *kept);

void rr_drc_counters(struct rr_drc *d, struct rr_drc_counters *c);

#endif
