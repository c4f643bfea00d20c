/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's receive side and QP states (rx.c). */
#ifndef RR_SOFT_RX_H
#define RR_SOFT_RX_H

#include "rdma/soft/soft.h"

int rr_soft_post_recv(struct rr_qp *qp, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad);
/* rpcrdma_qp_recv_quota: bounds what @qp takes from its shared queue. */
int rr_soft_qp_recv_quota(struct rr_qp *qp, uint32_t add);
/* Receives and processes what the socket holds (rx_lock held). Returns 0,
 * or a negative errno once the connection is finished. */
int rr_soft_qp_rx(struct soft_qp *qp);
/* The same for a fast wait: the first read sleeps (rx_lock is released
 * during it); returns with rx_lock RELEASED, and the QP may be gone then. */
int rr_soft_qp_rx_fast(struct soft_qp *qp);
/* The same for rr_soft_wait_qp (qp->own_wait set): rx_lock held on return
 * too (released while it sleeps); the first read sleeps only on the
 * socket. */
int rr_soft_qp_rx_own(struct soft_qp *qp);
/* QP to error (rx_lock held): the send queue flushed (the first unfinished
 * WQE with the peer's Terminate @peer_term, if any), the receive queue
 * flushed, DISCONNECTED reported with @err unless an error came first. */
void rr_soft_qp_fatal(struct soft_qp *qp, int err, const struct rr_term *peer_term);
/* A fast-waiting reader of @qp (rx_lock held, released while waiting;
 * tx_lock must not be held: rx.c) is made to leave before the socket is
 * closed. */
void rr_soft_fast_quiesce(struct soft_qp *qp);
/* The QP takes socket @fd after the MPA exchange (@conn), to RTS.
 * @commit_rx/@commit_tx enable Commit (added to what rpcrdma_qp_set_commit
 * already enabled). */
int rr_soft_qp_connected(struct soft_qp *qp, int fd, const struct rr_mpa_conn *conn, bool commit_rx,
			 bool commit_tx);
int rr_soft_set_commit(struct rr_qp *qp, bool enable);
/* Memory [@lo, @hi) is being deregistered: @qp lets go of it (caller holds
 * no lock of @qp; objects.c soft_pd_revoke). */
void rr_soft_qp_revoke(struct soft_qp *qp, uintptr_t lo, uintptr_t hi);

#endif
