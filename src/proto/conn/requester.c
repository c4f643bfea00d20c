/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The requester's Calls (RFC 8166 sections 3.4, 3.5, 4.3, 4.5): queued
 * under the credit grant (at most `grant` outstanding, 1 before the first
 * Reply, section 4.3.1) and sent as credits free up; each one planned
 * (proto/xprt_req.c: Short, chunked or Long), its memory registered (a window
 * per chunk where the provider has them), marshalled into a send slot and
 * sent; its Reply matched by XID (the credit updated from rdma_credit where
 * the header is decoded) and handed to the upper layer only once every STag
 * it exposed is invalid (invalidate.c); on connection loss, Calls without a
 * Reply go back to the head of the queue and are sent again with the same
 * XID on the next connection (section 4.5). */
#include "proto/conn/conn_int.h"

#include <stddef.h>

bool rr_conn_busy(const struct rr_conn *c)
{
	return c->calls || c->pulls || c->pullq || c->doneq || c->stray;
}

bool rr_conn_has_calls(const struct rr_conn *c)
{
	return c->calls != NULL;
}

uint32_t rr_conn_live_stags(const struct rr_conn *c)
{
	return c->live_stags;
}

uint32_t rr_conn_grant(const struct rr_conn *c)
{
	return c->rcred.grant;
}

uint32_t rr_conn_replies_owed(const struct rr_conn *c)
{
	return c->rcred.outstanding;
}

/* Registers, marshals and sends @k on the connection. Returns 0, or a
 * negative errno for a Call that cannot be sent at all (completed by the
 * caller), or -EAGAIN for a connection problem (left to reconnection).
 * Part of rq_send_credited (inlined with it). */
static inline __attribute__((always_inline)) int rq_send(struct rr_conn *c, struct rq_call *k)
{
	struct rr_conn_rpc *rpc = k->rpc;
	struct rr_conn_send s;
	uint8_t *buf;
	uint32_t slot, cap;
	int rc, len;

	if (!k->rq) {
		rc = rr_xprt_rqst_prepare(&c->req, &rpc->desc, &k->rq);
		if (rc)
			return rc;
		k->rq->user = k;
	} else if (c->fresh == k) {
		c->fresh = NULL;   /* planned a moment ago, same parameters */
	} else {
		rc = rr_xprt_rqst_replan(&c->req, k->rq);
		if (rc)
			return rc;
	}
	for (unsigned i = 0; i < k->rq->nregs; i++) {
		struct rr_xprt_reg *g = &k->rq->regs[i];
		struct rr_conn_mem *m = &k->mem[i];

		memset(m, 0, sizeof(*m));
		m->base = g->base;
		m->len = g->len;
		m->access = g->access;
		m->invalidatable = true;
		rc = rr_conn_reg(c, m);
		if (rc) {
			rq_free_mem(c, k);
			return rc == -ENOTCONN ? -EAGAIN : rc;
		}
		k->nmem = i + 1;
		g->stag = m->stag;
		g->addr = m->to;
		g->mr = m;
		g->valid = true;
		c->live_stags++;
	}
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf) {
		rq_free_mem(c, k);
		return -EAGAIN;
	}
	len = rr_xprt_rqst_marshal(&c->req, k->rq, rr_cred_req_request(&c->rcred), buf, cap);
	if (len < 0) {
		c->io.slot_put(c->io.ctx, slot);
		rq_free_mem(c, k);
		return len;
	}
	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = (uint32_t)len;
	s.token = TOK(TOK_SEND, NULL);
	/* the header's rdma_proc, as the builder wrote it (marshal_short's
	 * and the general builder's: RDMA_NOMSG for a Long Call alone) */
	if (rr_conn_post_send_proc(c, &s,
				   k->rq->form == RR_XPRT_FORM_LONG ? RR_HDR_NOMSG : RR_HDR_MSG)) {
		rr_xprt_rqst_forget(&c->req, k->rq);
		c->io.slot_put(c->io.ctx, slot);
		rq_free_mem(c, k);
		rr_conn_fail(c);   /* the QP refuses work: wait for reconnection */
		return -EAGAIN;
	}
	c->st->sends++;   /* posted: a Call that failed to post is not counted */
	if (k->sent_once)
		c->st->retransmits++;
	k->sent_once = true;
	k->state = RQ_SENT;
	return 0;
}

/* Sends @k, which holds a credit taken for it (out of the FIFO: by
 * rr_cred_req_next or rr_cred_req_submit), on a connection that is up.
 * Inlined in its two callers (rq_pump, rr_conn_submit: a synchronous
 * Call's one frame fewer, issue 16 part GC); the same body in both.
 * Returns false when the connection refused it (-EAGAIN from rq_send): its
 * credit is given back and it goes back to the head of the FIFO, to be
 * sent after reconnection; a Call that cannot be sent at all is completed
 * with its error. */
static inline __attribute__((always_inline)) bool rq_send_credited(struct rr_conn *c,
								     struct rq_call *k)
{
	int rc;

	k->has_credit = true;
	rc = rq_send(c, k);
	if (rc == 0)
		return true;
	(void)rr_cred_req_complete(&c->rcred);
	k->has_credit = false;
	if (rc == -EAGAIN) {
		(void)rr_cred_req_requeue(&c->rcred, &k->node);
		return false;
	}
	rq_set_result(k, rc);
	rq_finish(c, k);
	return true;
}

/* The end of a pump: every credit is held by Calls the upper layer
 * abandoned, whose Replies may never come (a responder that dropped them):
 * only a new connection gives the credits back (as Linux, which reconnects
 * on an RPC timeout); the waiting Calls go on it. */
static void rq_stray_check(struct rr_conn *c)
{
	if (c->rcred.queued && c->stray_credits >= c->rcred.grant)
		rr_conn_fail(c);
}

/* Sends queued Calls while credits allow. */
void rq_pump(struct rr_conn *c)
{
	struct rr_cred_node *n;

	/* nothing queued (a synchronous caller's Reply): nothing to send, and
	 * the check at the end needs a queued Call */
	if (!c->up || !c->rcred.queued)
		return;
	while ((n = rr_cred_req_next(&c->rcred)) != NULL)
		if (!rq_send_credited(c, RR_CONTAINER_OF(n, struct rq_call, node)))
			break;
	rq_stray_check(c);
}

void rq_up(struct rr_conn *c)
{
	rq_pump(c);
}

/* The connection is gone: every STag of every Call is invalid with it,
 * Calls without a Reply go back to the head of the queue in their original
 * order, pulls end. */
void rq_down(struct rr_conn *c)
{
	struct rq_call *k, *nx;

	rq_pull_down(c);
	for (k = c->calls; k; k = nx) {
		nx = k->next;
		if (k->state == RQ_INVAL) {
			k->inv_pending = 0;
			rq_finish(c, k);
		} else if (k->state == RQ_SENT) {
			rq_pull_detach(k);
			rq_free_mem(c, k);
			rr_xprt_rqst_forget(&c->req, k->rq);
			k->state = RQ_QUEUED;
			k->has_credit = false;
		}
	}
	c->stray = false;   /* nothing more comes on that connection */
	c->stray_credits = 0;
	rr_cred_req_reset(&c->rcred);
	for (k = c->calls; k; k = k->next)
		if (k->state == RQ_QUEUED && !k->node.queued && k->sent_once)
			(void)rr_cred_req_requeue(&c->rcred, &k->node);
}

/* Completes every Call not sent yet with @status (no reconnection). */
void rr_conn_fail_queued(struct rr_conn *c, int status)
{
	for (struct rq_call *k = c->calls, *nx; k; k = nx) {
		nx = k->next;
		if (k->state == RQ_QUEUED) {
			(void)rr_cred_req_cancel(&c->rcred, &k->node);
			rq_set_result(k, status);
			rq_finish(c, k);
		}
	}
}

/* A short Reply to a Call without sinks copied into the call's own
 * storage (its Receive goes back at once: no lend, nothing to give back at
 * release, issue 16 part FB);
 * a longer inline one handed over in place (the Receive lent until
 * release), or copied. */
static void take_reply(struct rr_conn *c, struct rq_call *k, uint32_t idx, const uint8_t *buf,
		       uint32_t len, const struct rr_xprt_reply *res, bool *lent)
{
	struct rr_conn_rpc *rpc = k->rpc;
	void *h = NULL;

	if (!rpc->nsinks && res->payload_len <= sizeof(rpc->reply_own)) {
		_Static_assert(RR_CONN_REPLY_OWN <= RR_COPY_SMALL_MAX, "reply_own fits rr_copy_small");
		rr_copy_small(rpc->reply_own, res->payload, res->payload_len);
		rpc->reply = rpc->reply_own;
	} else if (res->payload >= buf && res->payload + res->payload_len <= buf + len &&
		   c->io.lend && c->io.lend(c->io.ctx, idx, &h) == 0) {
		rpc->reply = (uint8_t *)(uintptr_t)res->payload;
		rpc->lent = h;
		rpc->lent_idx = idx;
		*lent = true;
	} else {
		rpc->reply = rr_alloc(c->env, res->payload_len ? res->payload_len : 1);
		if (rpc->reply)
			memcpy(rpc->reply, res->payload, res->payload_len);
	}
	if (!rpc->reply) {
		rq_set_result(k, -ENOMEM);
		return;
	}
	rpc->reply_len = res->payload_len;
	for (unsigned i = 0; i < res->nsinks; i++) {
		rpc->placed[i] = res->sink_len[i];
		rpc->is_placed[i] = res->sink_placed[i];
	}
	rq_set_result(k, 0);
}

/* The general way of a Reply (@rq the Call of its XID, or NULL): every
 * header the one-pass form does not take, its STag bookkeeping before and
 * after. Not inlined into rq_on_recv: its frame (the header decoder's
 * state, six saved registers) is then paid by these Replies alone, not by
 * the common short one (issue 16 part GD). */
static __attribute__((noinline)) void
rq_recv_general(struct rr_conn *c, struct rr_xprt_rqst *rq, const uint8_t *buf, uint32_t len,
		bool has_inv, uint32_t inv_stag, struct rr_xprt_reply *res)
{
	unsigned valid_before = 0;

	if (rq) {
		for (unsigned i = 0; i < rq->nregs; i++)
			valid_before += rq->regs[i].valid;
	} else if (len >= 16 && c->stray_credits) {
		/* a Reply no Call waits for: an aborted Call's (one per Call
		 * and connection from a responder that keeps the rules) */
		c->stray_credits--;
		(void)rr_cred_req_on_reply(&c->rcred, rr_get_be32(buf + 8));
	}
	rr_xprt_req_recv_found_general(&c->req, rq, buf, len, has_inv, inv_stag, res);
	if (res->inv_other && c->live_stags)
		c->live_stags--;   /* another Call's STag, invalidated by the peer */
	rq_remote_inv(c, rq, valid_before);
}

/* The one-pass form's msg_type (RR_HDR_MIN_MSG_SIZE + 4, REPLY) is the
 * word bc_may_be_call reads (word 8, CALL): the two never both pass. */
_Static_assert(RR_HDR_MIN_MSG_SIZE + 4 == 8 * 4, "one-pass msg_type is bc_may_be_call's word");

/* (Inlined in its caller where the link-time optimiser sees it: the
 * waiter's own Receive, rr_conn_on_recv_rq inlined in tp_on_wc_own, which
 * tp_cq_wait_once inlines: no frame of its own for the common Reply.) */
inline __attribute__((always_inline)) void rq_on_recv(struct rr_conn *c, uint32_t idx,
						     const uint8_t *buf, uint32_t len,
						     bool has_inv, uint32_t inv_stag)
{
	struct rr_xprt_reply res;
	struct rr_xprt_rqst *rq = NULL;
	bool lent = false;

	if (len >= 4)
		rq = rr_xprt_req_find(&c->req, rr_get_be32(buf));   /* looked up once */
	/* The common short Reply to a Call found (rr_xprt_req_recv_found's
	 * one-pass form, first as there): no STag invalidated, of its Call
	 * or another, so nothing of the general way's is to do. Such a
	 * message is no reverse Call (its word 8, the RPC msg_type, is REPLY,
	 * where bc_may_be_call wants CALL): the reverse direction's test
	 * (RFC 8167) comes only for what it refuses, before the general way,
	 * as it came before every message (its word read once per Reply
	 * less, issue 16 part ID). Neither test changes anything when it
	 * says no (rr_xprt_req_find and the one-pass form touch nothing). */
	if (!rq || !rr_xprt_req_recv_short(&c->req, rq, buf, len, has_inv, &res)) {
		if (bc_may_be_call(buf, len) && bc_on_recv(c, idx, buf, len))
			return;   /* the reverse direction's (RFC 8167) */
		rq_recv_general(c, rq, buf, len, has_inv, inv_stag, &res);
	}
	if (res.kind == RR_XPRT_R_PULL) {
		(void)c->io.post_recv(c->io.ctx, idx);
		rq_pull_start(c, &res);
		rq_pump(c);
		return;
	}
	if (res.kind != RR_XPRT_R_DROP) {
		struct rq_call *k = res.call->user;

		if (res.kind == RR_XPRT_R_REPLY)
			take_reply(c, k, idx, buf, len, &res, &lent);
		else
			rq_set_result(k, res.err);
		if (k->has_credit) {
			(void)rr_cred_req_on_reply(&c->rcred, res.credit);
			k->has_credit = false;
		} else {
			(void)rr_cred_req_grant(&c->rcred, res.credit);
		}
		if (!lent)
			(void)c->io.post_recv(c->io.ctx, idx);
		rq_fence_reply(c, k);
	} else {
		(void)c->io.post_recv(c->io.ctx, idx);
	}
	rq_pump(c);
}

int rr_conn_submit(struct rr_conn *c, struct rr_conn_rpc *rpc)
{
	struct rq_call *k;
	int rc;

	k = rq_call_take(c);
	if (!k) {
		k = rr_alloc(c->env, sizeof(*k));
		if (!k)
			return -ENOMEM;
	}
	memset(k, 0, offsetof(struct rq_call, mem));
	k->rpc = rpc;
	rpc->status = 0;
	rpc->reply = NULL;
	rpc->reply_len = 0;
	rpc->lent = NULL;
	rpc->via_read = false;
	/* Validate the description once, now, so that errors are synchronous:
	 * the planner's checks are the only ones (the general planner refuses
	 * more than RR_XPRT_MAX_ITEMS sinks and parts without their array
	 * with -EINVAL, as this function did before it; issue 16 part GC). */
	rc = rr_xprt_rqst_prepare(&c->req, &rpc->desc, &k->rq);
	if (rc) {
		if (!rq_call_keep(c, k))
			rr_free(c->env, k);
		return rc;
	}
	/* (only the first nsinks are read: conn.h; at most
	 * RR_XPRT_MAX_ITEMS, the plan's check) */
	for (unsigned i = 0; i < rpc->nsinks; i++) {
		rpc->placed[i] = 0;
		rpc->is_placed[i] = false;
	}
	k->rq->user = k;
	rpc->priv = k;
	k->state = RQ_QUEUED;
	rq_list_add(c, k);
	/* Sent now, it goes with the plan just made; left queued, its
	 * buffers go until it is sent (re-planned then: the connection and
	 * its parameters may change meanwhile). A Call finished on the way is
	 * no longer @c->fresh (rq_finish). */
	c->fresh = k;
	rc = rr_cred_req_submit(&c->rcred, &k->node);
	if (rc == 1 && c->up) {
		/* A credit is free, so nothing was queued
		 * (rr_cred_req_can_send): sent at once with the credit submit
		 * took, as the pump would send the head of the FIFO (credits
		 * counted once, not taken, given back and taken again). Sent,
		 * nothing is queued still: the pump would do nothing; refused,
		 * it is queued again and the pump would stop there. */
		if (!rq_send_credited(c, k))
			rq_stray_check(c);
	} else {
		if (rc == 1) {
			/* not connected: queued for the pump of rq_up */
			(void)rr_cred_req_complete(&c->rcred);
			(void)rr_cred_req_requeue(&c->rcred, &k->node);
		} else {
			c->st->credits_exhausted++;
		}
		rq_pump(c);
	}
	if (c->fresh == k) {
		rr_xprt_rqst_drop_bufs(&c->req, k->rq);
		c->fresh = NULL;
	}
	return 0;
}

void rr_conn_abort(struct rr_conn *c, struct rr_conn_rpc *rpc, int status)
{
	struct rq_call *k = rpc->priv;

	if (!k || k->state == RQ_DONE || k->state == RQ_INVAL)
		return;
	rq_set_result(k, status);
	if (k->state == RQ_QUEUED) {
		(void)rr_cred_req_cancel(&c->rcred, &k->node);
		rq_finish(c, k);
		return;
	}
	c->stray = true;
	rr_xprt_rqst_forget(&c->req, k->rq);
	if (k->has_credit) {
		/* its credit stays taken until its Reply comes: the responder
		 * still runs the Call and answers it (reliable-reply draft
		 * section 3.4), and counts it until then (RFC 8166 4.3.1) */
		c->stray_credits++;
		k->has_credit = false;
	}
	rq_fence(c, k);
	rq_pump(c);
}

void rr_conn_abort_all(struct rr_conn *c, int status)
{
	for (struct rq_call *k = c->calls, *nx; k; k = nx) {
		nx = k->next;
		if (k->state == RQ_QUEUED) {
			rq_set_result(k, status);
			(void)rr_cred_req_cancel(&c->rcred, &k->node);
			rq_finish(c, k);
		} else if (k->state == RQ_SENT) {
			rq_set_result(k, status);
			rr_xprt_rqst_forget(&c->req, k->rq);
			if (k->has_credit) {
				c->stray = true;   /* as rr_conn_abort */
				c->stray_credits++;
				k->has_credit = false;
			}
			rq_fence(c, k);
		}
	}
}

bool rr_conn_release_own(struct rr_conn_rpc *rpc)
{
	if (rpc->reply != rpc->reply_own)
		return false;
	rpc->reply = NULL;
	rpc->reply_len = 0;
	return true;
}

void rr_conn_release_reply(struct rr_conn *c, struct rr_conn_rpc *rpc)
{
	if (rr_conn_release_own(rpc))
		return;
	if (rpc->lent) {
		c->io.unlend(c->io.ctx, rpc->lent, rpc->lent_idx);
		rpc->lent = NULL;
	} else {
		rr_free(c->env, rpc->reply);
	}
	rpc->reply = NULL;
	rpc->reply_len = 0;
}

/* Destroy: every Call still held completes with -ECANCELED (its memory
 * deregistered: nothing touches it afterwards). */
void rq_destroy(struct rr_conn *c)
{
	rq_pull_down(c);
	while (c->calls) {
		struct rq_call *k = c->calls;

		if (k->state == RQ_QUEUED)
			(void)rr_cred_req_cancel(&c->rcred, &k->node);
		else if (k->rq)
			rr_xprt_rqst_forget(&c->req, k->rq);
		rq_set_result(k, -ECANCELED);
		k->inv_pending = 0;
		rq_finish(c, k);
	}
	for (struct rq_call *k; (k = rq_call_take(c));)
		rr_free(c->env, k);
}
