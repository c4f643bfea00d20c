/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's transmit side (tx.c). */
#ifndef RR_SOFT_TX_H
#define RR_SOFT_TX_H

#include "rdma/soft/soft.h"

int rr_soft_post_send(struct rr_qp *qp, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad);
/* The post_send1 op (provider.h): rr_soft_post_send of a lone Send of one
 * SGE whose shape the caller vouches for. */
int rr_soft_post_send1(struct rr_qp *qp, struct rpcrdma_send_wr *wr);
/* Transmits queued work; caller holds tx_lock. */
void rr_soft_qp_tx_locked(struct soft_qp *qp);
/* Builds the QP's Terminate from @t unless one is pending already (the QP
 * ends with the first error it found; tx_lock held). */
void rr_soft_term_set(struct soft_qp *qp, const struct rr_term *t);
/* Pops finished WQEs in order and completes them (tx_lock held). */
void rr_soft_sq_complete_locked(struct soft_qp *qp);
/* QP to the error state from the send side (tx_lock held): flush the send
 * queue (the first unfinished WQE carries the peer's Terminate @t, if any)
 * and shut the socket; the receive side flushes the receive queue. */
void rr_soft_qp_error_tx_locked(struct soft_qp *qp, const struct rr_term *t);
/* Whether transmitting still needs bytes of [@lo, @hi) (tx_lock held). */
bool rr_soft_tx_needs(struct soft_qp *qp, uintptr_t lo, uintptr_t hi);
/* Ends the batch being sent (tx_lock held, its memory still valid): the
 * FPDU half on the wire finished as far as the socket takes it now, the rest
 * dropped. True when the stream is at an FPDU boundary (a Terminate may
 * follow). */
bool rr_soft_tx_end_batch(struct soft_qp *qp);
/* Transmit needs memory that is being deregistered (tx_lock held, QP in
 * RTS): the FPDU on the wire is finished, a Terminate (Invalid STag) sent as
 * far as the socket takes it now, and the QP ends. */
void rr_soft_tx_revoke(struct soft_qp *qp);

/* The placement fence (docs/security.md "The lifetime rule"; as siw, which
 * checks the STag for every piece it places, siw_check_mem). A piece is
 * what one read or one copy writes of a tagged payload (RDMA Write, Read
 * Response) into registered memory. rr_soft_place_begin checks [@to, @to +
 * @n) of @stag (opcode @op: a Write through the remote-write right on @qp,
 * a Read Response into a local sink) just before the piece is written to
 * @dst (NULL for durable memory, which is written with pwrite) and returns
 * 0 or the STag table's negative errno (-EFAULT: the STag names other
 * memory than @dst): on 0 the piece is in progress until
 * rr_soft_place_end, and the caller writes it, holding no lock and taking
 * none until it calls rr_soft_place_end. rr_soft_place_fence is called
 * after an STag was invalidated or freed (Local Invalidate, Send With
 * Invalidate, a window freed) and before that is reported complete: it
 * waits until no piece through @stag that passed its check is in progress,
 * so that afterwards not one more byte lands through it. A piece takes no
 * lock while no fence came since its segment's check (a store and a load
 * each in begin and end); a fence looks at the QPs linked by
 * rr_soft_place_link. ctx->place_lock is a leaf: any lock may be held by
 * the caller of any of these. */
int rr_soft_place_begin(struct soft_qp *qp, uint8_t op, uint32_t stag, uint64_t to,
			const uint8_t *dst, size_t n);
void rr_soft_place_end(struct soft_qp *qp);
void rr_soft_place_fence(struct soft_ctx *c, uint32_t stag);
/* The receive side of @qp (rx_lock, or fast_rd) links it into the fence's
 * list before a tagged segment's STag is checked at its header (before
 * rr_soft_place_gen is read for it), and unlinks it after the last segment
 * of a tagged message was placed, or when the QP is destroyed: never with a
 * piece in progress. A fence looks at linked QPs only. */
void rr_soft_place_link(struct soft_qp *qp);
void rr_soft_place_unlink(struct soft_qp *qp);
/* The fence generation, read (into qp->place_gen) just before a segment's
 * STag is checked at its header: its pieces need no check of their own
 * until a fence (any STag) comes after that read. Every path that makes an
 * STag invalid (invalidation, deregistration, re-registration, a window
 * freed) calls rr_soft_place_fence afterwards. */
uint64_t rr_soft_place_gen(struct soft_ctx *c);

/* Test hook: run with tx_lock held just before the payload of a durable
 * Read Response is copied from its file for the batch being built (the
 * point where a file shrinking under the response must cost a Terminate,
 * never a signal). Not used by the library; NULL: none (one atomic load per
 * copy). Process-wide. */
typedef void (*rr_soft_durable_hook_fn)(struct soft_qp *qp);
void rr_soft_test_set_durable_hook(rr_soft_durable_hook_fn fn);

#endif
