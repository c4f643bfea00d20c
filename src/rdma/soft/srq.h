/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's shared receive queues (srq.c). */
#ifndef RR_SOFT_SRQ_H
#define RR_SOFT_SRQ_H

#include "rdma/soft/soft.h"

/* Receives one SRQ holds at most. */
#define SOFT_MAX_SRQ_WR 65536u

int rr_soft_create_srq(struct rr_pd *pd, const struct rpcrdma_srq_attr *attr,
		       struct rr_srq **out);
int rr_soft_destroy_srq(struct rr_srq *srq);
int rr_soft_post_srq_recv(struct rr_srq *srq, struct rpcrdma_recv_wr *wr,
			  struct rpcrdma_recv_wr **bad);
int rr_soft_arm_srq_limit(struct rr_srq *srq, uint32_t limit);
int rr_soft_srq_get_event(struct rr_srq *srq);
/* The newest Receive (LIFO), for a message beginning on one of the SRQ's QPs
 * (that QP's rx_lock held): 0 and *@out, or -ENOBUFS when none is posted.
 * Fires the limit event when fewer than the armed limit remain. */
int rr_soft_srq_take(struct soft_srq *s, struct soft_rqe *out);
/* A Receive taken for a message that never completed (its QP destroyed
 * in the middle) goes back on top, as if never taken. */
void rr_soft_srq_untake(struct soft_srq *s, const struct soft_rqe *e);

#endif
