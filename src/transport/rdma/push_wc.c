/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Completions of the client's push-mode work requests (push.c: an RDMA
 * Write, then RDMA Commit, draft-talpey-rdma-commit): the operation waiting
 * for them is found by its sequence number and told its status and Commit
 * Status; any other failure ends the connection, as every failed work
 * request does. */
#include "transport/rdma/tp_int.h"

/* A completion of a push WR (lock held). The Write is unsignaled when a
 * Commit follows, so a success is always the operation's last WR. An error
 * other than a Commit Status (draft 5.1 item 3: the connection stays) is
 * fatal to the connection, as every failed work request. */
void tp_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	uint32_t seq = (uint32_t)WRVAL(wc->wr_id);
	struct tp_push_op *op;

	for (op = c->pushes; op; op = op->next)
		if (op->seq == seq)
			break;
	if (op && !op->done) {
		op->done = true;
		op->status = wc->status;
		op->remote_status = wc->remote_status;
		if (wc->status == RPCRDMA_WC_SUCCESS) {
			if (op->len) {
				c->ep.stats.push_writes++;
				c->ep.stats.push_write_bytes += op->len;
			}
			if (op->commit)
				c->ep.stats.commits++;
		} else if (op->commit) {
			c->ep.stats.commit_errors++;
		}
		rr_cond_broadcast(&c->ep.cond);
	}
	if (wc->status != RPCRDMA_WC_SUCCESS)
		tp_fault_wc(cn, wc);
	if (wc->status != RPCRDMA_WC_SUCCESS && wc->status != RPCRDMA_WC_COMMIT_ERR &&
	    !cn->dead && !cn->closing) {
		cn->closing = true;   /* the caller (client loop) ends it */
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
	}
}
