/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's transmit side (tx.c). */
#ifndef RR_SOFT_TX_H
#define RR_SOFT_TX_H

#include "rdma/soft/soft.h"

int rr_soft_post_send(struct rr_qp *qp, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad);
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

#endif
