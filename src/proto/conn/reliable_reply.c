/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply-04): Replies of any
 * size as responder-provided Read chunks, and RDMA_DONE, in both roles. The
 * protocol pieces (policy, header patching, the table of exposed Replies)
 * are proto/rrep.[ch]; the choices the draft leaves open are in
 * docs/protocol.md.
 *
 * Requester (4.1.2, 4.1.3): an RDMA_NOMSG Reply with a Position-zero Read
 * chunk is pulled by RDMA Read (under ORD) into a buffer of ours, checked as
 * the Call's Reply, and answered with RDMA_DONE -- a Send With Invalidate
 * naming the responder's STag when both set R -- also for a Reply whose Call
 * is gone or that cannot be pulled; an RDMA_DONE needs no call credit and
 * waits for a send slot when none is free.
 *
 * Responder (4.1.1, 5.4.3): the reduced Reply is exposed read-only through
 * one invalidatable registration of this connection, recorded by XID with a
 * reserved Receive for its RDMA_DONE; at rrep_max reservations the next one
 * is parked (no thread waits: sent when an RDMA_DONE frees a reservation,
 * ERR_CHUNK after rrep_timeout_ms); an RDMA_DONE releases its Reply (a Send
 * With Invalidate of its STag fenced it already, else a Local Invalidate
 * does), the timeout fences it, a disconnect fences them all. The memory
 * is freed only after deregistration (docs/security.md "Lifetime rule");
 * Replies whose RDMA_DONE may have come early (forged, stolen STags) keep
 * their buffer until the connection is gone. The bytes held per connection
 * and per server are bounded (reply_mem_per_conn, reply_mem_total). */
#include "proto/conn/conn_int.h"

/* ======================================================================
 * requester
 * ====================================================================== */

void rq_pull_detach(struct rq_call *k)
{
	if (k->pull) {
		k->pull->k = NULL;
		k->pull = NULL;
	}
}

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
		const struct rr_xprt_seg *g = &p->segs[p->next];
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
			rq_invalidate(c, k);
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
		rq_invalidate(c, k);
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
		rq_invalidate(c, k);
	}
	/* Pull completion notification after the Reads (draft 4.1.2). */
	send_done(c, p->xid, p->inv, p->stag);
	pull_free(c, p);
	pump_pulls(c);
	rq_pump(c);
}

/* The connection is gone: the pulls end (their Calls are retransmitted). */
void rq_pull_down(struct rr_conn *c)
{
	while (c->pulls)
		pull_free(c, c->pulls);
	c->pullq = NULL;
}

/* ======================================================================
 * responder
 * ====================================================================== */

bool rs_rrep_room(const struct rr_conn *c, uint32_t len)
{
	return c->rrep_bytes + len <= c->cfg.reply_mem_per_conn &&
	       (!c->cfg.reply_mem_total_used ||
		*c->cfg.reply_mem_total_used + len <= c->cfg.reply_mem_total);
}

/* Read-chunk Reply bytes held for the peer change by @delta. */
static void account(struct rr_conn *c, int64_t delta)
{
	c->rrep_bytes += (uint64_t)delta;
	if (c->cfg.reply_mem_total_used)
		*c->cfg.reply_mem_total_used += (uint64_t)delta;
}

uint64_t rr_conn_rrep_bytes(const struct rr_conn *c)
{
	return c->rrep_bytes;
}

uint32_t rr_conn_rrep_live(const struct rr_conn *c)
{
	return c->rrep_live;
}

uint32_t rr_conn_rrep_waiting(const struct rr_conn *c)
{
	return c->rrep.count;
}

static void exp_invalid(struct rr_conn *c, struct rs_exp *x)
{
	if (x->valid) {
		x->valid = false;
		if (c->rrep_live)
			c->rrep_live--;
	}
}

/* Deregistration first: once it returns nothing reads the buffer, whatever
 * the peer still asks for, so freeing it is safe. */
static void exp_free(struct rr_conn *c, struct rs_exp *x)
{
	exp_invalid(c, x);
	rr_conn_unreg(c, &x->mem);
	account(c, -(int64_t)x->len);
	rr_free(c->env, x->buf);
	rr_free(c->env, x);
}

/* The STag of @x is no longer valid for the peer: its memory goes now
 * (@now) or, its buffer, when the connection does (Read Responses of an
 * RDMA_DONE that came early may still be on their way: kernel providers
 * read pinned pages after deregistration). */
static void retire(struct rr_conn *c, struct rs_exp *x, bool now)
{
	if (now) {
		exp_free(c, x);
		return;
	}
	exp_invalid(c, x);
	rr_conn_unreg(c, &x->mem);
	x->next = c->rrep_dead;
	c->rrep_dead = x;
}

/* Fences @x: Local Invalidate of its window, resources freed on its
 * completion; without a window the registration is dropped at once; its
 * buffer is freed now when the peer's Reads are over (@reads_over: its
 * RDMA_DONE came), else with the connection. */
static void fence(struct rr_conn *c, struct rs_exp *x, bool reads_over)
{
	if (x->valid && !x->mem.window && c->up) {
		c->st->local_inv++;
		retire(c, x, reads_over && !x->stolen);
		return;
	}
	if (!x->valid || !x->mem.window || !c->up) {
		/* Already invalid: by this XID's own RDMA_DONE (its Reads are
		 * over, free now), or by a forged one (Reads may still be in
		 * flight: keep the buffer until the connection is gone; a
		 * peer that keeps forging loses it, see rs_rrep_on_done). */
		retire(c, x, c->up && !x->valid && !x->stolen);
		return;
	}
	if (c->io.inv(c->io.ctx, &x->mem, TOK(TOK_EXP_INV, x))) {
		retire(c, x, false);
		return;
	}
	c->st->local_inv++;
}

void rs_rrep_on_inv(struct rr_conn *c, struct rs_exp *x, int status)
{
	retire(c, x, status == 0);
	if (status)
		rr_conn_fail(c);
}

void rs_rrep_on_done(struct rr_conn *c, uint32_t idx, uint32_t xid, bool has_inv,
		     uint32_t inv_stag)
{
	struct rr_rrep_done d;

	/* Releases the Receive reserved for it, whatever it names; one not
	 * owed is counted (-EPROTO) and dropped. */
	(void)rr_cred_rsp_on_done(&c->scred);
	if (c->io.post_recv(c->io.ctx, idx) == 0)
		rr_cred_rsp_posted(&c->scred, 1);
	c->st->recvs++;
	rr_rrep_on_done(&c->rrep, xid, has_inv, inv_stag, &d);
	if (d.stolen) {
		/* Another XID's STag was invalidated by the peer: that Reply
		 * can no longer be pulled; it waits for its own RDMA_DONE (or
		 * the timeout) only to release its memory. */
		struct rs_exp *x = d.stolen->user;

		x->stolen = true;
		if (++c->rrep_forged > c->cfg.rrep_max)
			rr_conn_fail(c);   /* bound what forgeries make us hold */
		if (x->valid) {
			exp_invalid(c, x);
			c->st->remote_inv++;
		}
	}
	if (d.release) {
		struct rs_exp *x = d.release->user;

		if (!d.release->stag_valid && x->valid) {
			/* Remotely invalidated by this RDMA_DONE. */
			exp_invalid(c, x);
			c->st->remote_inv++;
		}
		rr_rrep_entry_free(&c->rrep, d.release);
		fence(c, x, true);
	}
	if (d.unknown || d.forged)
		c->st->dropped++;
	rs_park_resume(c, rr_conn_now(c));   /* a reservation may be free */
}

void rs_rrep_to_err_chunk(struct rr_conn *c, struct rs_req *r, struct rr_xprt_reply_plan *plan,
			  uint8_t *buf, uint32_t *grant)
{
	int n;

	rr_free(c->env, plan->rr_buf);
	plan->rr_buf = NULL;
	plan->read_chunk = false;
	plan->nwrites = 0;
	plan->write_bytes = 0;
	plan->send_inv = false;
	if (r->credited)
		*grant = c->scred.last_grant ? c->scred.last_grant : 1;
	else if (rs_credit(c, r, false, grant))
		*grant = 1;
	n = rr_xprt_encode_error(r->rc->xid, RR_XPRT_VERSION, *grant, RR_XPRT_ERR_CHUNK, buf,
				 c->cfg.send_size);
	plan->send_len = n > 0 ? (uint32_t)n : 0;
	plan->is_error = true;
	plan->proc = RR_XPRT_ERROR;
	c->st->err_chunk_sent++;
	if (c->st->rrep_exposed)
		c->st->rrep_exposed--;
}

int rs_rrep_expose(struct rr_conn *c, struct rs_req *r, struct rr_xprt_reply_plan *plan,
		   uint8_t *buf, uint32_t *grant)
{
	struct rs_exp *x;
	struct rr_rrep_entry *e;

	if (!c->up) {
		rr_free(c->env, plan->rr_buf);
		plan->rr_buf = NULL;
		return -ENOTCONN;
	}
	if (c->scred.done_owed >= c->scred.done_max)
		goto err_chunk;
	x = rr_zalloc(c->env, sizeof(*x));
	if (!x)
		goto err_chunk;
	x->buf = plan->rr_buf;
	x->len = plan->rr_len;
	x->mem.base = x->buf;
	x->mem.len = plan->rr_len ? plan->rr_len : 4;
	x->mem.access = RR_XPRT_ACC_REMOTE_READ;   /* read-only */
	x->mem.invalidatable = true;
	if (rr_conn_reg(c, &x->mem))
		goto fail;
	e = rr_rrep_add(&c->rrep, r->rc->xid, x->mem.stag, x);
	if (!e)
		goto fail;
	if (rs_credit(c, r, true, grant)) {
		rr_rrep_remove(&c->rrep, e);
		goto fail;
	}
	x->valid = true;
	c->rrep_live++;
	account(c, (int64_t)x->len);
	plan->rr_buf = NULL;   /* owned by x now */
	rr_rrep_rsp_patch(buf, plan, x->mem.stag, x->mem.to);
	return 0;
fail:
	rr_conn_unreg(c, &x->mem);
	rr_free(c->env, x);   /* plan->rr_buf is still ours: freed below */
err_chunk:
	rs_rrep_to_err_chunk(c, r, plan, buf, grant);
	return 0;
}

/* ---- parked Replies (a reservation is not free) ---- */

int rs_park(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
	    unsigned nparts, struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf)
{
	struct rs_park *p = rr_zalloc(c->env, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->parts = nparts ? rr_alloc(c->env, sizeof(*parts) * nparts) : NULL;
	if (nparts && !p->parts) {
		rr_free(c->env, p);
		return -ENOMEM;
	}
	if (nparts)
		memcpy(p->parts, parts, sizeof(*parts) * nparts);
	p->r = r;
	p->plan = plan;
	p->slot = slot;
	p->buf = buf;
	p->nparts = nparts;
	p->deadline = rr_conn_now(c) + c->cfg.rrep_timeout_ns;
	*c->park_tail = p;
	c->park_tail = &p->next;
	r->send_pending = true;   /* on its way: a Reply is owed to the upper layer */
	account(c, (int64_t)plan->rr_len);
	c->st->rrep_parked++;
	return 0;
}

static struct rs_park *park_pop(struct rr_conn *c)
{
	struct rs_park *p = c->parkq;

	if (p) {
		c->parkq = p->next;
		if (!c->parkq)
			c->park_tail = &c->parkq;
		account(c, -(int64_t)p->plan->rr_len);
	}
	return p;
}

/* Sends the parked Reply @p (exposed now, or ERR_CHUNK when @expired or
 * nothing can be exposed) and tells its upper layer as a posted Reply would
 * have been told. */
static void park_send(struct rr_conn *c, struct rs_park *p, bool expired)
{
	struct rs_req *r = p->r;
	int rc;

	r->send_pending = false;
	if (expired) {
		uint32_t grant;

		/* no reservation came in time: another form */
		rs_rrep_to_err_chunk(c, r, p->plan, p->buf, &grant);
		rr_put_be32(p->buf + 8, grant);
	}
	rc = rs_reply_finish(c, r, p->parts, p->nparts, p->plan, p->slot, p->buf, expired, NULL);
	if (rc <= 0)
		rs_reply_sent(c, r, rc);   /* 1: its Send completion tells */
	rr_free(c->env, p->parts);
	rr_free(c->env, p);
}

void rs_park_resume(struct rr_conn *c, uint64_t now)
{
	while (c->parkq && c->up) {
		bool expired = now >= c->parkq->deadline;

		if (!expired && c->scred.done_owed >= c->scred.done_max)
			break;
		park_send(c, park_pop(c), expired);
	}
}

static void park_fail_all(struct rr_conn *c)
{
	struct rs_park *p;

	while ((p = park_pop(c)) != NULL) {
		p->r->send_pending = false;
		rr_free(c->env, p->plan->rr_buf);
		c->io.slot_put(c->io.ctx, p->slot);
		rs_plan_put(c, p->plan);
		rs_reply_sent(c, p->r, -ENOTCONN);
		rr_free(c->env, p->parts);
		rr_free(c->env, p);
	}
}

void rs_rrep_tick(struct rr_conn *c, uint64_t now)
{
	struct rr_rrep_entry *e;

	if (c->parkq)
		rs_park_resume(c, now);   /* parked too long: ERR_CHUNK */
	if (!c->up || !c->rrep.count)
		return;
	while ((e = rr_rrep_expire(&c->rrep, now)) != NULL) {
		struct rs_exp *x = e->user;

		rr_rrep_entry_free(&c->rrep, e);
		fence(c, x, false);
	}
}

uint64_t rs_rrep_next(const struct rr_conn *c)
{
	uint64_t t = c->parkq ? c->parkq->deadline : UINT64_MAX;

	if (c->rrep.count)
		t = RR_MIN(t, rr_rrep_next_expiry(&c->rrep));
	return t;
}

/* Disconnect: parked Replies are told -ENOTCONN, exposed ones fenced (their
 * buffers go with the connection). */
void rs_rrep_down(struct rr_conn *c)
{
	struct rr_rrep_entry *e;

	park_fail_all(c);
	if (!c->rrep.env)
		return;
	while ((e = rr_rrep_pop(&c->rrep)) != NULL) {
		struct rs_exp *x = e->user;

		rr_rrep_entry_free(&c->rrep, e);
		retire(c, x, false);
	}
}

/* The connection's resources are gone: the fenced buffers too. */
void rs_rrep_free_all(struct rr_conn *c)
{
	while (c->rrep_dead) {
		struct rs_exp *x = c->rrep_dead;

		c->rrep_dead = x->next;
		exp_free(c, x);
	}
}
