/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* A requester's Call from its Reply (or failure) to its completion: the
 * result is kept (the first one set wins), its STags are fenced
 * (invalidate.c) and only then is it completed to the upper layer -- its
 * memory deregistered, its plan released, io->complete called (RFC 8166
 * section 3.4.3). Also the list of Calls not completed. */
#include "proto/conn/conn_int.h"

void rq_list_add(struct rr_conn *c, struct rq_call *k)
{
	k->prev = NULL;
	k->next = c->calls;
	if (c->calls)
		c->calls->prev = k;
	c->calls = k;
}

static void list_del(struct rr_conn *c, struct rq_call *k)
{
	if (k->prev)
		k->prev->next = k->next;
	else
		c->calls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	/* (@k's own links are not cleared: it is freed or kept spare next,
	 * and rr_conn_submit clears a spare one before its use) */
}

void rq_set_result(struct rq_call *k, int status)
{
	if (!k->result_set) {
		k->result = status;
		k->result_set = true;
	}
}

/* @k is over: its memory and plan go, the upper layer is told. The body
 * of rq_finish, inlined also in a Reply's fence (rq_fence_reply). */
static inline __attribute__((always_inline)) void finish_body(struct rr_conn *c,
							      struct rq_call *k)
{
	struct rr_conn_rpc *rpc = k->rpc;

	if (c->fresh == k)
		c->fresh = NULL;
	rq_pull_detach(k);
	rq_free_mem(c, k);
	if (k->rq)
		rr_xprt_rqst_release(&c->req, k->rq);
	/* @k's rq and state are not written: it is freed or kept spare
	 * below, and a spare one is cleared before its use (rr_conn_submit:
	 * every field before @mem; issue 16 part GD) */
	rpc->status = k->result;
	rpc->priv = NULL;
	list_del(c, k);
	if (!rq_call_keep(c, k))
		rr_free(c->env, k);
	c->io.complete(c->io.ctx, rpc);
}

void rq_finish(struct rr_conn *c, struct rq_call *k)
{
	finish_body(c, k);
}

void rq_pull_detach(struct rq_call *k)
{
	if (k->pull) {
		k->pull->k = NULL;
		k->pull = NULL;
	}
}

/* @k has its result: once every STag it exposed is invalid it completes.
 * Inlined in its callers where the link-time optimiser sees them (a
 * Reply's one frame fewer, issue 16 part GC). */
inline __attribute__((always_inline)) void rq_fence(struct rr_conn *c, struct rq_call *k)
{
	if (rq_invalidate(c, k) == 0)
		rq_finish(c, k);
}

/* rq_fence with rq_finish's body inlined as well: for the Reply's own way
 * (rq_on_recv), where a Call's completion is the usual end (its call, the
 * frame and its six saved registers: ~15 instructions per Reply, issue 16
 * part HD); the other callers keep the call. */
inline __attribute__((always_inline)) void rq_fence_reply(struct rr_conn *c, struct rq_call *k)
{
	if (rq_invalidate(c, k) == 0)
		finish_body(c, k);
}

void rq_on_inv(struct rr_conn *c, struct rq_call *k, int status)
{
	if (rq_inv_done(c, k, status))
		rq_finish(c, k);
}
