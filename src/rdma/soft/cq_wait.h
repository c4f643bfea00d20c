/* SPDX-License-Identifier: BSD-2-Clause */
/* A soft CQ's consumer ops (cq_wait.c): poll, wait, arm, get_event, each
 * receiving and transmitting for the CQ's QPs in the caller's thread. */
#ifndef RR_SOFT_CQ_WAIT_H
#define RR_SOFT_CQ_WAIT_H

#include "rdma/soft/soft.h"

int rr_soft_poll_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc);
int rr_soft_wait_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms);
/* The wait_cq_own op: rr_soft_wait_cq with its start dated by the first
 * clock read it needs (cq_wait.c soft_wait). */
int rr_soft_wait_cq_own(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms);
int rr_soft_arm_cq(struct rr_cq *cq, bool solicited_only);
int rr_soft_cq_get_event(struct rr_cq *cq);
/* The wait_qp op: one QP's completions on a shared CQ (rr_qp_wait). */
int rr_soft_wait_qp(struct rr_qp *qp, int n, struct rpcrdma_wc *wc, int timeout_ms,
		    const struct rr_qp_seen *seen);

#endif
