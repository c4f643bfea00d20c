/* SPDX-License-Identifier: BSD-2-Clause */
/* A soft QP connected over a socketpair, no progress thread on it: the
 * set-up and tear-down of the tests that drive the provider's receive and
 * transmit in their own thread (rr_soft_qp_rx, rr_soft_qp_tx_locked), the
 * peer's FPDUs built with the DDP codec (test_terminate.c,
 * test_rx_complete.c). */
#ifndef RR_TESTS_SOFT_SOCKETPAIR_H
#define RR_TESTS_SOFT_SOCKETPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "rdma/soft/soft.h"

struct soft_sp {
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct soft_qp *sq;
	int peer;                  /* the other end of the socketpair */
};

/* A CQ of 64, a QP of 8 Sends and @max_recv_wr Receives (one SGE each),
 * connected as MPA rev 2 with CRC @crc, IRD = ORD = 8. */
void soft_sp_up(struct soft_sp *s, bool crc, uint32_t max_recv_wr);
/* The QP destroyed, then @mr (may be NULL: none) deregistered, then the
 * rest. */
void soft_sp_down(struct soft_sp *s, struct rpcrdma_mr *mr);

#endif
