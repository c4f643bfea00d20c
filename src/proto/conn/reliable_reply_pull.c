/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Reliable reply, the requester's side (draft-cel-nfsv4-rpcrdma-reliable-
 * reply-04 sections 4.1.2, 4.1.3): an RDMA_NOMSG Reply with a Position-zero
 * Read chunk is pulled by RDMA Read (under ORD) into a buffer of ours,
 * checked as the Call's Reply, and answered with RDMA_DONE -- a Send With
 * Invalidate naming the responder's STag when both set R -- also for a
 * Reply whose Call is gone or that cannot be pulled; an RDMA_DONE needs no
 * call credit and waits for a send slot when none is free. The responder's
 * side is reliable_reply.c. */
#include "proto/conn/conn_int.h"


/* Sends (or queues) the RDMA_DONE owed for @xid (docs/protocol.md
 * "RDMA_DONE accounting": no call credit). */
static void send_done(struct rr_conn *c, uint32_t xid, bool inv, uint32_t stag)
{
	struct rr_conn_send s;
	uint32_t slot, cap;
	uint8_t *buf;
	int n;

	if (!c->up)
		return;   /* the responder fences on disconnect */
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf) {
		struct rq_done *q = rr_zalloc(c->env, sizeof(*q)), **pp;

		if (!q)
			return;   /* the responder's timeout fences it */
		q->xid = xid;
		q->inv = inv;
		q->stag = stag;
		for (pp = &c->doneq; *pp; pp = &(*pp)->next)
			;
		*pp = q;
		return;
	}
	if (rr_cred_req_done_sent(&c->rcred)) {
		c->io.slot_put(c->io.ctx, slot);   /* not owed: never overrun the responder */
		return;
	}
	n = rr_rrep_encode_done(xid, rr_cred_req_request(&c->rcred), buf, cap);
	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = n > 0 ? (uint32_t)n : 0;
	s.inv = inv && c->neg.send_inv;
	s.inv_stag = stag;
	s.token = TOK(TOK_SEND, NULL);
	if (n < 0 || rr_conn_post_send(c, &s, buf)) {
		c->io.slot_put(c->io.ctx, slot);
		return;
	}
	c->st->rrep_done_sent++;
	c->st->sends++;
}

void rq_done_flush(struct rr_conn *c)
{
	while (c->doneq && c->up) {
		struct rq_done *q = c->doneq;
		uint32_t slot, cap;
		uint8_t *buf = c->io.slot_get(c->io.ctx, &slot, &cap);

		if (!buf)
			return;
		c->io.slot_put(c->io.ctx, slot);
		c->doneq = q->next;
		send_done(c, q->xid, q->inv, q->stag);
		rr_free(c->env, q);
	}
}

static void pump_pulls(struct rr_conn *c)
{
	while (c->pullq && c->reads_inflight < c->ord && c->up) {
		struct rq_pull *p = c->pullq;
		const struct rr_hdr_seg *g = &p->segs[p->next];
		uint64_t off = 0;
		struct rr_conn_read rd;

		for (uint32_t i = 0; i < p->next; i++)
			off += p->segs[i].length;
		rd = (struct rr_conn_read){&p->mem, p->buf + off, g->length, g->handle, g->offset,
					   TOK(TOK_PULL_READ, p)};
		if (c->io.read(c->io.ctx, &rd)) {
			rr_conn_fail(c);
			return;
		}
		c->reads_inflight++;
		if (++p->next == p->nsegs)
			c->pullq = p->qnext;
	}
}

static void pull_free(struct rr_conn *c, struct rq_pull *p)
{
	struct rq_pull **pp;

	for (pp = &c->pulls; *pp; pp = &(*pp)->anext)
		if (*pp == p) {
			*pp = p->anext;
			break;
		}
	if (p->k)
		p->k->pull = NULL;
	rr_conn_unreg(c, &p->mem);
	rr_free(c->env, p->buf);
	rr_free(c->env, p);
}

/* An RDMA_NOMSG Reply with a responder-provided Read chunk (draft 4.1.2). */
void rq_pull_start(struct rr_conn *c, const struct rr_xprt_reply *res)
{
	struct rq_call *k = res->call ? res->call->user : NULL;
	struct rq_pull *p;

	rr_cred_req_on_read_reply(&c->rcred);
	if (k) {
		struct rr_conn_rpc *rpc = k->rpc;

		if (k->has_credit) {
			(void)rr_cred_req_on_reply(&c->rcred, res->credit);
			k->has_credit = false;
		} else {
			(void)rr_cred_req_grant(&c->rcred, res->credit);
		}
		for (unsigned i = 0; i < res->nsinks; i++) {
			rpc->placed[i] = res->sink_len[i];
			rpc->is_placed[i] = res->sink_placed[i];
		}
	}
	if (!k || res->pull_nsegs == 0) {
		/* Unknown XID (cancelled RPC) or nothing we can take: no Read,
		 * but the RDMA_DONE is owed all the same (draft 4.1.3). */
		if (k) {
			rq_set_result(k, res->err ? res->err : -EBADMSG);
			rq_fence(c, k);
		}
		send_done(c, res->xid, res->pull_inv, res->pull_stag);
		return;
	}
	p = rr_zalloc(c->env, sizeof(*p));
	if (p)
		p->buf = rr_alloc(c->env, res->pull_len);
	if (p && p->buf) {
		p->mem.base = p->buf;
		p->mem.len = res->pull_len;
		p->mem.access = RR_XPRT_ACC_LOCAL_WRITE;
	}
	if (!p || !p->buf || rr_conn_reg(c, &p->mem)) {
		if (p) {
			rr_free(c->env, p->buf);
			rr_free(c->env, p);
		}
		rq_set_result(k, -ENOMEM);
		rq_fence(c, k);
		send_done(c, res->xid, res->pull_inv, res->pull_stag);
		return;
	}
	p->k = k;
	k->pull = p;
	p->xid = res->xid;
	p->inv = res->pull_inv;
	p->stag = res->pull_stag;
	p->len = res->pull_len;
	p->nsegs = res->pull_nsegs;
	memcpy(p->segs, res->pull_segs, sizeof(p->segs[0]) * p->nsegs);
	p->anext = c->pulls;
	c->pulls = p;
	{
		struct rq_pull **pp = &c->pullq;

		while (*pp)
			pp = &(*pp)->qnext;
		*pp = p;
	}
	pump_pulls(c);
}

void rq_pull_on_read(struct rr_conn *c, struct rq_pull *p, int status)
{
	struct rq_call *k;

	if (status) {
		rr_conn_fail(c);   /* rr_conn_down ends the pull */
		return;
	}
	if (++p->done < p->nsegs) {
		pump_pulls(c);
		return;
	}
	k = p->k;
	rr_conn_unreg(c, &p->mem);
	if (k) {
		struct rr_xprt_reply res;

		memset(&res, 0, sizeof(res));
		rr_xprt_req_pulled(&c->req, k->rq, p->buf, p->len, &res);
		if (res.kind == RR_XPRT_R_REPLY) {
			k->rpc->reply = p->buf;   /* handed over: freed by release_reply */
			k->rpc->reply_len = p->len;
			k->rpc->via_read = true;
			p->buf = NULL;
			rq_set_result(k, 0);
		} else {
			rq_set_result(k, -EBADMSG);
		}
		k->pull = NULL;
		p->k = NULL;
		rq_fence(c, k);
	}
	/* Pull completion notification after the Reads (draft 4.1.2). */
	send_done(c, p->xid, p->inv, p->stag);
	pull_free(c, p);
	pump_pulls(c);
}

/* The connection is gone: the pulls end (their Calls are retransmitted),
 * and so do the RDMA_DONEs waiting for a slot: the responder fenced their
 * Read chunks, and on the next connection one would name an STag of this
 * one and spend an RDMA_DONE owed there. */
void rq_pull_down(struct rr_conn *c)
{
	while (c->pulls)
		pull_free(c, c->pulls);
	c->pullq = NULL;
	while (c->doneq) {
		struct rq_done *q = c->doneq;

		c->doneq = q->next;
		rr_free(c->env, q);
	}
}
