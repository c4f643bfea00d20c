/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Fencing a Call's memory before the Call completes (RFC 8166 section
 * 3.4.3 "Invalidation": every STag the requester exposed for an RPC is
 * invalid before the upper layer sees the RPC complete, also for an RPC
 * that was aborted or timed out), with remote invalidation
 * (draft-cel-nfsv4-rpcrdma-remote-invalidation, RFC 8797 section 4): a
 * Reply that came as Send With Invalidate already invalidated one STag of
 * its Call; every other STag still valid gets a Local Invalidate, and the
 * Call completes (call.c) when the last of them completed. A registration without a
 * window (providers without them) is fenced by its deregistration. The
 * count of STags still valid (live_stags) is kept here, from what the peer
 * invalidated and what we did. */
#include "proto/conn/conn_int.h"

/* rq_free_mem's work (@k has registrations). */
static __attribute__((noinline)) void free_regs(struct rr_conn *c, struct rq_call *k)
{
	for (unsigned i = 0; i < k->nmem; i++) {
		if (k->rq && i < k->rq->nregs && k->rq->regs[i].valid) {
			k->rq->regs[i].valid = false;
			c->st->local_inv++;
			if (c->live_stags)
				c->live_stags--;
		}
		rr_conn_unreg(c, &k->mem[i]);
	}
	k->nmem = 0;
}

/* Inlined in its callers where the link-time optimiser sees them, the
 * deregistrations out of line: a Call without registrations (a NULL, any
 * Short Call) pays one test at its finish (issue 16 part ID: left to the
 * inliner, it went out of line once rq_on_recv grew, a call of 16). */
inline __attribute__((always_inline)) void rq_free_mem(struct rr_conn *c, struct rq_call *k)
{
	if (k->nmem)
		free_regs(c, k);
}

/* rq_invalidate's Local Invalidates (@k has registrations and a plan, the
 * connection is up). */
static __attribute__((noinline)) void inv_regs(struct rr_conn *c, struct rq_call *k)
{
	for (unsigned i = 0; i < k->rq->nregs && i < k->nmem; i++) {
		if (!k->rq->regs[i].valid || !k->mem[i].window)
			continue;
		if (c->io.inv(c->io.ctx, &k->mem[i], TOK(TOK_CALL_INV, k)) == 0) {
			k->rq->regs[i].valid = false;
			c->st->local_inv++;
			if (c->live_stags)
				c->live_stags--;
			k->inv_pending++;
		}
	}
}

/* Inlined in its callers where the link-time optimiser sees them, the
 * Local Invalidates out of line: a Call without registrations (a NULL, any
 * Short Call) pays three tests (issue 16 part HD). */
inline __attribute__((always_inline)) unsigned rq_invalidate(struct rr_conn *c, struct rq_call *k)
{
	k->state = RQ_INVAL;
	if (k->rq && c->up && k->nmem)
		inv_regs(c, k);
	return k->inv_pending;
}

bool rq_inv_done(struct rr_conn *c, struct rq_call *k, int status)
{
	if (status) {
		/* a failed work request ends the connection: rr_conn_down
		 * finishes the Calls being fenced */
		if (k->inv_pending)
			k->inv_pending--;
		rr_conn_fail(c);
		return false;
	}
	return k->inv_pending && --k->inv_pending == 0 && k->state == RQ_INVAL;
}

void rq_remote_inv(struct rr_conn *c, struct rr_xprt_rqst *rq, unsigned valid_before)
{
	unsigned valid_after = 0;

	if (!rq)
		return;
	for (unsigned i = 0; i < rq->nregs; i++)
		valid_after += rq->regs[i].valid;
	c->live_stags -= RR_MIN(c->live_stags, valid_before - valid_after);
}
