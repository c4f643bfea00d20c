/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The transport's fault counters (include/rpcrdma/stats.h group faults):
 * under which cause a connection's end is counted -- the asynchronous error
 * its provider recorded on its QP (rr_qp_async_event: a CQ overrun, a QP's
 * fatal, invalid-request or access error, its SRQ's error, the device's
 * fatal error; src/rdma/async_event.h), else the error its CQ failed with
 * (tp_cq_failed: -EOVERFLOW is the overrun's errno, any other a CQ that
 * failed) -- a work request of ours that completed in error (not flushed),
 * and the QPs a CQ refused (conn.c conn_new, counted without the
 * endpoint's lock, added to its counters when they are read). Nothing here
 * runs for a completion that succeeded or a connection that ended
 * cleanly. */
#include "transport/rdma/tp_int.h"

void tp_fault_conn_lost(const struct tp_conn *cn, struct rr_xprt_stats *st)
{
	int err;

	switch (cn->qp ? rr_qp_async_event(cn->qp) : RR_ASYNC_OTHER) {
	case RR_ASYNC_CQ_ERR: st->cq_overruns++; return;
	case RR_ASYNC_QP_FATAL: st->qp_fatal++; return;
	case RR_ASYNC_QP_REQ_ERR: st->qp_req_errors++; return;
	case RR_ASYNC_QP_ACCESS_ERR: st->qp_access_errors++; return;
	case RR_ASYNC_SRQ_ERR: st->srq_errors++; return;
	case RR_ASYNC_DEVICE_FATAL: st->device_fatal++; return;
	default: break;
	}
	err = cn->tcq ? atomic_load(&cn->tcq->err) : 0;
	if (err == rr_async_action(RR_ASYNC_CQ_ERR).err)
		st->cq_overruns++;
	else if (err)
		st->cq_failures++;
}

void tp_fault_wc(struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	/* a flush follows the failure; a Commit Status is the operation's
	 * answer (draft-talpey-rdma-commit 5.1), the connection stays */
	if (WRTYPE(wc->wr_id) == WR_RECV || wc->status == RPCRDMA_WC_SUCCESS ||
	    wc->status == RPCRDMA_WC_WR_FLUSH_ERR || wc->status == RPCRDMA_WC_COMMIT_ERR)
		return;
	cn->ep->stats.wr_errors++;
}

void tp_fault_cq_refused(struct tp_ep *ep)
{
	atomic_fetch_add_explicit(&ep->cq_refused, 1, memory_order_relaxed);
}

void tp_fault_fold(struct tp_ep *ep, struct rr_xprt_stats *st)
{
	st->cq_refused += atomic_load_explicit(&ep->cq_refused, memory_order_relaxed);
	st->cq_polls += atomic_load_explicit(&ep->cq_polls, memory_order_relaxed);
}
