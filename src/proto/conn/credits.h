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
 * Responder: tracks Receives posted, Calls in progress and the RDMA_DONE
 * messages still owed; computes each Reply's grant: never 0, never above the
 * configured maximum, never above the Receives posted and not reserved for
 * RDMA_DONE; refuses a Reply that would let the peer overrun our Receives.
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

struct rr_cred_rsp {
	uint32_t max_credits; /* configured grant ceiling, >= 1 */
	uint32_t done_max;    /* cap on RDMA_DONEs owed; 0: reliable reply off */
	uint32_t posted;      /* Receives posted and not yet consumed */
	uint32_t in_progress; /* Calls received whose Reply is not yet sent */
	uint32_t done_owed;   /* Read-chunk Replies sent, RDMA_DONE not yet received */
	uint32_t hw_grant;    /* highest grant the peer may act on (1 at start) */
	uint32_t last_grant;  /* grant of the last Reply (0 before the first) */
};

/* @max_credits: largest grant (0 becomes 1); @done_max: how many Read-chunk
 * Replies may await their RDMA_DONE at once (0 when reliable reply is not
 * negotiated). */
void rr_cred_rsp_init(struct rr_cred_rsp *c, uint32_t max_credits, uint32_t done_max);

/* @n Receives were posted. */
void rr_cred_rsp_posted(struct rr_cred_rsp *c, uint32_t n);

/* Receives to post now so that the next Reply (a Read-chunk Reply when
 * @read_chunk) can carry the full grant: max_credits + RDMA_DONEs owed
 * (+1) - posted, or 0. */
uint32_t rr_cred_rsp_need(const struct rr_cred_rsp *c, bool read_chunk);

/* A Call (any message the requester counts as a Call) consumed a Receive.
 * -EPROTO when none was posted (the peer exceeded its grant); the Call is then
 * not counted. */
int rr_cred_rsp_on_call(struct rr_cred_rsp *c);

/* An RDMA_DONE consumed a Receive. Returns 0 when one was owed, -EPROTO when
 * none was (duplicate, forged, or reliable reply not negotiated): the Receive
 * is counted as consumed either way, the owed count never goes below 0. */
int rr_cred_rsp_on_done(struct rr_cred_rsp *c);

/* Any other message consumed a Receive and gets no Reply (e.g. an RDMA_ERROR a
 * requester must never send): counted as consumed; RDMA_DONE reservations are
 * untouched. -EPROTO when none was posted. Everything the requester counts as
 * a Call (every message it sends except RDMA_DONE, including ones answered
 * with RDMA_ERROR) goes through rr_cred_rsp_on_call() instead. */
int rr_cred_rsp_on_stray(struct rr_cred_rsp *c);

/* A Reply (RDMA_MSG, RDMA_NOMSG or RDMA_ERROR) for a Call in progress is about
 * to be sent; @read_chunk: it carries a responder-provided Read chunk.
 * On success sets *@grant (>= 1) for its rdma_credit field and commits the
 * accounting. Fails without changing anything:
 *   -EPROTO  no Call in progress;
 *   -ENOSPC  @read_chunk and done_max RDMA_DONEs are already owed;
 *   -ENOBUFS too few Receives posted: post rr_cred_rsp_need() more, retry. */
int rr_cred_rsp_reply(struct rr_cred_rsp *c, bool read_chunk, uint32_t *grant);

/* The overrun invariant: Receives posted cover every message the peer may
 * still send without waiting for us: posted + in_progress >=
 * hw_grant + done_owed. Tests and debug checks use it. */
bool rr_cred_rsp_safe(const struct rr_cred_rsp *c);

/* New connection: nothing posted, in progress or owed; peer assumes 1. */
void rr_cred_rsp_reset(struct rr_cred_rsp *c);

#endif
