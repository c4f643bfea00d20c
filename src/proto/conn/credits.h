/* SPDX-License-Identifier: BSD-2-Clause */
/* RPC-over-RDMA Version 1 credit accounting (sans-I/O; RFC 8166 sections
 * 4.3.1 "Flow Control" and 4.3.3 "Initial Connection State"), for both roles,
 * plus the accounting of RDMA_DONE messages of the reliable-reply extension
 * (draft-cel-nfsv4-rpcrdma-reliable-reply-04 sections 4.1.3 and 5.2.3).
 *
 * Requester: at most `grant` Calls outstanding (sent, no Reply yet); 1 before
 * the first Reply; each Reply's rdma_credit updates the grant, 0 counting as 1
 * (as Linux) and anything above our own request being clamped to it (each
 * outstanding Call needs one of our posted Receives for its Reply). Calls
 * beyond the grant wait in a FIFO made of nodes the caller embeds in its own
 * call objects (no allocation); rr_cred_req_next() pops the next sendable one.
 *
 * Responder: the peer may have at most `grant` Calls outstanding after each
 * Reply, so the responder tracks, in absolute counts, the limit L on the
 * Calls the peer may ever have sent (L = max over the Replies k of k + the
 * grant of Reply k: a lower grant takes effect only as later Replies
 * arrive), the Calls received C, the Replies sent, and the RDMA_DONEs owed
 * D; the peer may still send L - C Calls plus D RDMA_DONEs without waiting.
 * A message beyond that is the peer's violation of RFC 8166 section 4.3.1
 * (-EPROTO: its connection ends). Receives live in a pool (struct
 * rr_cred_pool): a connection's own Receive queue, or a shared receive queue
 * a server's connections draw from. Each connection reserves in its pool
 * max(L - C, 1) + D Receives (the 1: its next grant of 1 costs nothing, so a
 * grant is never 0 and never waits), and the pool never lets what all its
 * peers may send exceed the Receives posted (posted >= reserved). The grant
 * of each Reply follows the peer's demand in a shared pool (doubling while
 * the peer uses its whole permission, shrinking toward twice what it used
 * after a window of Replies in which it never did, at most a fair share of
 * the pool while other connections are active),
 * and is clipped to the pool's free Receives; in a private pool it is the
 * configured maximum, clipped the same way. docs/protocol.md "Credits" has
 * the rules and why they are safe.
 *
 * RDMA_DONE rule (docs/protocol.md "Credits"): an RDMA_DONE consumes NO call
 * credit. Instead the responder reserves one extra posted Receive for every
 * Reply it sends with a responder-provided Read chunk, from the moment it
 * sends that Reply until an RDMA_DONE arrives (any RDMA_DONE: timeout or
 * cancellation do not free the reservation, since the requester MUST still
 * send one) or the connection ends. The number of such reservations is capped
 * (done_max); at the cap the responder cannot send another Read-chunk Reply
 * (the transport answers with a Reply chunk / ERR_CHUNK or waits). The
 * requester may send exactly one RDMA_DONE per Read-chunk Reply it received,
 * at any time, whatever its call credits.
 *
 * Single-threaded: the caller serializes access. Nothing here allocates. */
#ifndef RR_PROTO_CREDITS_H
#define RR_PROTO_CREDITS_H

#include "common/common.h"

#define RR_CRED_REQUEST_DEFAULT 128u /* Linux xprtrdma */
#define RR_CRED_GRANT_DEFAULT 64u    /* Linux svcrdma */
/* Replies without the peer using its whole permission after which a shared
 * pool halves a connection's grant (at most; docs/protocol.md "Credits"). */
#define RR_CRED_WINDOW 8u
/* Replies within which, in a shared pool, the grant of a peer that keeps
 * one Call at a time comes down from @max to 2 (a window lasts
 * max(grant, RR_CRED_WINDOW) Replies and halves the grant at most). */
#define RR_CRED_SETTLE(max) (2u * (max) + 4u * RR_CRED_WINDOW)

/* Intrusive FIFO node: embed one in each call object, recover the object with
 * RR_CONTAINER_OF(). A node is in at most one queue at a time. */
struct rr_cred_node {
	struct rr_cred_node *next;
	struct rr_cred_node *prev;
	bool queued;
};

/* ---- requester ---- */

struct rr_cred_req {
	uint32_t request;     /* rdma_credit value of our Calls = our Reply Receives */
	uint32_t grant;       /* current limit on outstanding Calls, >= 1 */
	uint32_t outstanding; /* Calls sent whose Reply has not arrived */
	uint32_t queued;      /* Calls waiting in the FIFO */
	uint32_t done_owed;   /* RDMA_DONEs we must still send */
	bool granted;         /* a Reply has set the grant on this connection */
	struct rr_cred_node head; /* FIFO sentinel */
};

/* @request: credits asked for in each Call, 1..65535 (0 becomes 1). */
void rr_cred_req_init(struct rr_cred_req *c, uint32_t request);

/* Value for the rdma_credit field of a Call. */
static inline uint32_t rr_cred_req_request(const struct rr_cred_req *c)
{
	return c->request;
}

/* True when a new Call could be sent now (a credit is free and nobody waits). */
bool rr_cred_req_can_send(const struct rr_cred_req *c);

/* Offers a Call for sending. Returns 1 when it may be sent now (its credit is
 * taken), 0 when it was appended to the FIFO, -EINVAL when @n is already
 * queued. Borrows @n until it leaves the FIFO (rr_cred_req_next/cancel/reset
 * hand it back). */
int rr_cred_req_submit(struct rr_cred_req *c, struct rr_cred_node *n);

/* Puts a Call at the HEAD of the FIFO (retransmission after reconnect goes
 * before new Calls). Returns 0, or -EINVAL when @n is already queued. */
int rr_cred_req_requeue(struct rr_cred_req *c, struct rr_cred_node *n);

/* Pops the next queued Call that may be sent now, taking its credit; NULL when
 * the FIFO is empty or no credit is free. Call it in a loop after every grant
 * update or Reply. */
struct rr_cred_node *rr_cred_req_next(struct rr_cred_req *c);

/* Removes a still-queued Call (cancelled before it was sent). Returns 0, or
 * -ENOENT when @n is not queued. */
int rr_cred_req_cancel(struct rr_cred_req *c, struct rr_cred_node *n);

/* A Reply (or RDMA_ERROR) carrying rdma_credit @grant was received: updates the
 * grant (0 -> 1; above `request` -> `request`). Returns the grant in force. */
uint32_t rr_cred_req_grant(struct rr_cred_req *c, uint32_t grant);

/* An outstanding Call got its Reply: frees its credit. -EPROTO when nothing
 * was outstanding (the state is unchanged). */
int rr_cred_req_complete(struct rr_cred_req *c);

/* Both of the above, in the order a matched Reply needs. */
int rr_cred_req_on_reply(struct rr_cred_req *c, uint32_t grant);

/* Reliable reply: a Reply carrying a responder-provided Read chunk arrived
 * (also for an unknown XID): we now owe one RDMA_DONE. */
void rr_cred_req_on_read_reply(struct rr_cred_req *c);

/* Reliable reply: we are about to send an RDMA_DONE. It needs no call credit.
 * Returns 0, or -EPROTO when none is owed (sending it could overrun the
 * responder's Receives: don't). */
int rr_cred_req_done_sent(struct rr_cred_req *c);

/* New connection: grant back to 1, nothing outstanding, no RDMA_DONE owed
 * (the responder fenced its Read chunks on disconnect). The FIFO is kept, so
 * Calls to retransmit can be requeued in front of it. */
void rr_cred_req_reset(struct rr_cred_req *c);

/* ---- responder ---- */

/* The Receives of one queue: a connection's own (private: its Receives,
 * reposted as they are consumed) or a shared receive queue (shared: the
 * executor posts what rr_cred_pool_want asks and reposts a consumed Receive
 * only while rr_cred_pool_keep says so). Not thread-safe: the sessions of a
 * pool and its executor are serialized by their caller. */
struct rr_cred_pool {
	uint32_t posted;      /* Receives posted and not consumed */
	uint32_t reserved;    /* sum of the members' reservations */
	uint32_t members;     /* connections drawing from it */
	uint32_t active;      /* members with Calls in progress */
	uint32_t cap;         /* most Receives it may hold (>= 1) */
	uint32_t spare;       /* free Receives kept posted beyond the reservations */
	uint32_t deficit;     /* Receives clipped grants wanted (rr_cred_pool_want) */
	bool shared;
	/* counters (never reset) */
	uint64_t clipped;     /* grants lowered for lack of free Receives */
	uint64_t overruns;    /* messages beyond a peer's permission */
	uint64_t refused;     /* joins refused: the pool is full */
};

/* @cap: the most Receives the pool may hold (0 becomes 1); @spare: free
 * Receives a shared pool keeps posted (a burst's grants need no wait);
 * @shared: several connections draw from it. */
void rr_cred_pool_init(struct rr_cred_pool *p, uint32_t cap, uint32_t spare, bool shared);
/* @n Receives were posted. */
void rr_cred_pool_posted(struct rr_cred_pool *p, uint32_t n);
/* @n posted Receives were consumed with no session to count them (flushed
 * with a dead connection, or a message of a connection already gone). */
void rr_cred_pool_lost(struct rr_cred_pool *p, uint32_t n);
/* posted - reserved: the Receives no peer may use yet (negative only after
 * peers overran their permission, until the executor refills). */
int64_t rr_cred_pool_free(const struct rr_cred_pool *p);
/* Receives to post now: up to the reservations + spare + what clipped
 * grants wanted (private: up to @cap), within @cap. Clears the deficit. */
uint32_t rr_cred_pool_want(struct rr_cred_pool *p);
/* A consumed Receive is posted again (true) or released (false: a shared
 * pool holds more than twice its spare beyond the reservations). */
bool rr_cred_pool_keep(const struct rr_cred_pool *p);
/* Whether one more connection fits (its first Call's Receive within @cap). */
bool rr_cred_pool_room(const struct rr_cred_pool *p);
/* The pool invariant: posted >= reserved. */
bool rr_cred_pool_safe(const struct rr_cred_pool *p);

struct rr_cred_rsp {
	struct rr_cred_pool own;    /* the private pool, until joined: first,
				       so that the fields every Call and Reply
				       touches are the struct's last bytes,
				       which the session's other per-call
				       fields follow (issue 16 part EB) */
	/* the fields every Call and Reply touches, together (Issue 16
	 * part AF: @own between @pool and them cost a line per call) */
	struct rr_cred_pool *pool;  /* &own, or a shared pool once joined */
	uint32_t max_credits; /* configured grant ceiling, >= 1 */
	uint32_t done_max;    /* cap on RDMA_DONEs owed; 0: reliable reply off */
	uint64_t limit;       /* L: Calls the peer may have sent in all (1 at start) */
	uint64_t calls;       /* C: Calls (any message but an owed RDMA_DONE) received */
	uint64_t replies;     /* Replies accounted (sent, or settled without one) */
	uint32_t done_owed;   /* D: Read-chunk Replies sent, RDMA_DONE not yet received */
	uint32_t bc_owed;     /* B: backward Calls (RFC 8167) sent, Reply not yet received */
	uint32_t res;         /* this connection's part of pool->reserved */
	uint32_t target;      /* the grant demand asks for (shared pool) */
	uint32_t peak;        /* most Calls in progress in the demand window */
	uint32_t calm;        /* Replies in it without the peer being limited */
	uint64_t raised_at;   /* Calls received when the grant was last raised */
	bool limited;         /* the peer used its whole permission since the
				 last Reply */
	bool joined;          /* counted in its pool */
	uint32_t last_grant;  /* grant of the last Reply (0 before the first) */
	uint32_t added;       /* increase of what the peer may send, not yet
				 taken (rr_cred_rsp_take_added) */
};

/* A connection with a private pool of @nrecv Receives (posted by the
 * caller; rr_cred_rsp_posted counts them) and no member yet. @max_credits:
 * largest grant (0 becomes 1); @done_max: how many Read-chunk Replies may
 * await their RDMA_DONE at once (0 when reliable reply is not negotiated). */
void rr_cred_rsp_init(struct rr_cred_rsp *c, uint32_t max_credits, uint32_t done_max,
		      uint32_t nrecv);
/* The connection draws from @pool (NULL: its private one): it reserves the
 * Receive of the peer's first Call. -ENOSPC when the pool is full (the
 * connection must be refused). */
int rr_cred_rsp_join(struct rr_cred_rsp *c, struct rr_cred_pool *pool);
/* The connection is gone: its reservation goes back to the pool. Call it
 * once nothing of the connection can take a Receive any more and every
 * completion of its Receives was counted (in a shared queue the messages
 * its peer sent within its permission, consumed and not yet polled, are
 * covered by that reservation until then). */
void rr_cred_rsp_leave(struct rr_cred_rsp *c);

/* @n Receives were posted to the connection's pool. */
void rr_cred_rsp_posted(struct rr_cred_rsp *c, uint32_t n);

/* A message consumed a Receive and counts as a Call (every message the
 * requester sends but an RDMA_DONE it owes). -EPROTO when the peer had no
 * permission left (an overrun, RFC 8166 section 4.3.1: the caller ends the
 * connection); it is counted either way. */
int rr_cred_rsp_on_call(struct rr_cred_rsp *c);

/* An RDMA_DONE consumed a Receive. 0 when one was owed; when none was
 * (duplicate, forged, or reliable reply not negotiated) it counts as a Call
 * (its Receive came from the Call permission): 1, and the caller settles it
 * with rr_cred_rsp_settle, or -EPROTO when that was an overrun. */
int rr_cred_rsp_on_done(struct rr_cred_rsp *c);

/* A Reply (RDMA_MSG, RDMA_NOMSG or RDMA_ERROR) for a Call in progress is about
 * to be sent; @read_chunk: it carries a responder-provided Read chunk.
 * On success sets *@grant (>= 1) for its rdma_credit field and commits the
 * accounting. Fails without changing anything:
 *   -EPROTO  no Call in progress;
 *   -ENOSPC  @read_chunk and done_max RDMA_DONEs are already owed;
 *   -ENOBUFS @read_chunk and the pool has no free Receive for its RDMA_DONE
 *            (send another form). A Reply without a Read chunk never fails
 *            for lack of Receives: a grant of 1 is always reserved. */
int rr_cred_rsp_reply(struct rr_cred_rsp *c, bool read_chunk, uint32_t *grant);
/* A Call that gets no Reply (dropped) is settled: as a Reply, the grant it
 * would have carried kept in force. 0 or -EPROTO (no Call in progress). */
int rr_cred_rsp_settle(struct rr_cred_rsp *c);

/* Whether a Read-chunk Reply could be sent now: fewer than done_max
 * RDMA_DONEs owed, and a free Receive in the pool for its RDMA_DONE (when
 * there is none, the Reply waits for the executor to post more, as at the
 * cap: docs/protocol.md "Credits"). */
bool rr_cred_rsp_done_room(const struct rr_cred_rsp *c);

/* Backchannel (RFC 8167): whether a backward Call could be sent now, the
 * Receive of its Reply reserved (a free one in the pool, as for an
 * RDMA_DONE); when not, it waits for the executor to post more. */
bool rr_cred_rsp_bc_room(const struct rr_cred_rsp *c);
/* No free Receive for a backward Call's Reply: the executor is asked for
 * one more (the pool's deficit). */
void rr_cred_rsp_want_one(struct rr_cred_rsp *c);
/* A backward Call is about to be sent: the Receive of its Reply is
 * reserved (B + 1). Call it after rr_cred_rsp_bc_room said yes. */
void rr_cred_rsp_bc_sent(struct rr_cred_rsp *c);
/* A backward Reply (or an RDMA_ERROR naming a backward Call) consumed a
 * Receive. 0 when one was owed; when none was it counts as a Call: 1, and
 * the caller settles it with rr_cred_rsp_settle, or -EPROTO when that was an
 * overrun. */
int rr_cred_rsp_on_bc_reply(struct rr_cred_rsp *c);

/* What the peer may still send: L - C (0 past it) + D + B. */
uint64_t rr_cred_rsp_sendable(const struct rr_cred_rsp *c);
/* Calls received and not yet answered. */
static inline uint64_t rr_cred_rsp_in_progress(const struct rr_cred_rsp *c)
{
	return c->calls - c->replies;
}
/* Returns and clears by how much what the peer may send grew since the last
 * call (Replies' grants, RDMA_DONE reservations, joining): an executor that
 * bounds the Receives one connection may take from a shared queue
 * (rpcrdma_qp_recv_quota) adds it. */
uint32_t rr_cred_rsp_take_added(struct rr_cred_rsp *c);

/* The overrun invariants: the connection's reservation covers what its peer
 * may send, and its pool has that many Receives posted. Tests and debug
 * checks use it. */
bool rr_cred_rsp_safe(const struct rr_cred_rsp *c);

#endif
