/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The responder's Replies (RFC 8166 sections 3.4, 3.5, 4.3.1, 5): built by
 * proto/xprt_rsp.c into a send slot (inline, DDP-eligible items by RDMA
 * Write into the requester's Write chunks, a Long Reply through its Reply
 * chunk, ERR_CHUNK when nothing fits, or a responder Read chunk:
 * reliable_reply.c), the grant settled once per Reply (never 0, never above
 * the Receives posted and not reserved for RDMA_DONE: proto/conn/credits.h) and
 * written into rdma_credit by the header code, Send With Invalidate naming
 * one STag of the Call when both peers set R, the memory the Writes read
 * registered until the Send completed; a Read-chunk Reply for which no
 * RDMA_DONE Receive can be reserved is parked until one can (or ERR_CHUNK
 * after rrep_timeout_ms). A Call that cannot be answered for
 * lack of memory gets RDMA_ERROR/ERR_CHUNK (it needs no allocation), or its
 * connection ends when not even that can go: never a silent drop. A peer
 * whose Sends make no progress for send_timeout_ms loses its connection (it
 * holds every Reply we sent it). */
#include "proto/conn/conn_int.h"

void rr_conn_refuse(struct rr_conn *c, struct rr_conn_sreq *pub)
{
	struct rs_req *r = RR_CONTAINER_OF(pub, struct rs_req, pub);

	if (!r->send_pending && !r->send_done)
		rs_refuse_xid(c, r, r->rc->xid);
}

static int park(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
		unsigned nparts, struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf);
static inline __attribute__((always_inline)) int
reply_finish(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts, unsigned nparts,
	     struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf, bool settled,
	     bool *err_chunk);

int rr_conn_reply(struct rr_conn *c, struct rr_conn_sreq *pub, const struct rr_xprt_part *parts,
		  unsigned nparts, bool *err_chunk)
{
	struct rs_req *r = RR_CONTAINER_OF(pub, struct rs_req, pub);
	struct rr_xprt_reply_plan *plan;
	uint32_t slot, cap, grant;
	uint8_t *buf;
	int rc;

	if (err_chunk)
		*err_chunk = false;
	if (!c->up)
		return -ENOTCONN;
	if (r->send_pending || r->nwmem)
		return -EBUSY;   /* a Reply is already on its way */
	plan = rs_plan_get(c);
	if (!plan)
		return -ENOMEM;
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf) {
		rs_plan_put(c, plan);
		return -ENOBUFS;
	}
	/* The grant is settled after the Reply is built (a Read-chunk Reply
	 * reserves a Receive for its RDMA_DONE) and written into rdma_credit. */
	rc = rr_xprt_rsp_reply(&c->rsp, r->rc, parts, nparts, rs_last_grant(c), buf, cap, plan);
	if (rc) {
		c->io.slot_put(c->io.ctx, slot);
		(void)rs_credit(c, r, false, &grant);
		rs_plan_put(c, plan);
		return rc;
	}
	if (plan->read_chunk && !rs_rrep_room(c, plan->rr_len)) {
		/* over the memory budget: another form at once */
		c->st->rrep_over_budget++;
		rs_rrep_to_err_chunk(c, r, plan, buf, &grant);
		rr_put_be32(buf + 8, grant);
		return rs_reply_finish(c, r, parts, nparts, plan, slot, buf, true, err_chunk);
	}
	/* no RDMA_DONE reservation now (at the cap, or no free Receive in a
	 * shared pool): it waits for one, until rrep_timeout */
	if (plan->read_chunk && !rr_cred_rsp_done_room(&c->scred) &&
	    park(c, r, parts, nparts, plan, slot, buf) == 0)
		return 1;
	return reply_finish(c, r, parts, nparts, plan, slot, buf, false, err_chunk);
}

/* Registers the parts the Reply's Writes read from (only those: an XDR pad
 * comes from the executor's zero bytes) and builds the Writes in @w.
 * Returns 0, a registration's error, or -EFAULT for a Write whose source is
 * in none of the parts. */
static int build_writes(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
			unsigned nparts, const struct rr_xprt_reply_plan *plan,
			struct rr_conn_write *w)
{
	int rc;

	for (unsigned i = 0; i < nparts && plan->nwrites; i++) {
		const uint8_t *b = parts[i].base;
		bool used = false;

		if (!parts[i].len || r->nwmem == RR_ARRAY_SIZE(r->wmem))
			continue;
		for (uint32_t j = 0; j < plan->nwrites && !used; j++)
			used = plan->writes[j].src >= b && plan->writes[j].src < b + parts[i].len;
		if (!used)
			continue;
		memset(&r->wmem[r->nwmem], 0, sizeof(r->wmem[0]));
		r->wmem[r->nwmem].base = (void *)(uintptr_t)b;
		r->wmem[r->nwmem].len = parts[i].len;
		r->wmem[r->nwmem].access = RR_XPRT_ACC_LOCAL_WRITE;
		rc = rr_conn_reg(c, &r->wmem[r->nwmem]);
		if (rc)
			return rc;   /* the caller releases those registered */
		r->nwmem++;
	}
	for (uint32_t i = 0; i < plan->nwrites; i++) {
		const struct rr_xprt_write_op *op = &plan->writes[i];
		const struct rr_conn_mem *m = NULL;

		for (unsigned j = 0; j < r->nwmem && !m; j++) {
			const uint8_t *b = r->wmem[j].base;

			if (op->src >= b && op->src + op->len <= b + r->wmem[j].len)
				m = &r->wmem[j];
		}
		if (!m && !(op->len < 4 && !memcmp(op->src, "\0\0\0", op->len)))
			return -EFAULT;
		w[i] = (struct rr_conn_write){m, op->src, op->len, op->stag, op->remote};
	}
	return 0;
}

/* rs_reply_finish's work: inlined at the end of rr_conn_reply, where every
 * Reply not parked and not over the Read-chunk budget (a NULL Call's) is
 * finished (issue 16 part DH: out of line it cost a call, its frame and
 * saved registers, ~25 instructions); the same code. */
static inline __attribute__((always_inline)) int
reply_finish(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts, unsigned nparts,
	     struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf, bool settled,
	     bool *err_chunk)
{
	struct rr_conn_write wstack[8], *w = wstack;
	struct rr_conn_send s;
	uint32_t grant;
	bool exposed = false;   /* a Read chunk is recorded and reserved */
	int rc = 0;

	if (settled) {
		grant = rr_get_be32(buf + 8);
	} else if (plan->read_chunk) {
		rc = rs_rrep_expose(c, r, plan, buf, &grant);
		if (rc) {
			c->io.slot_put(c->io.ctx, slot);
			goto out;
		}
		exposed = plan->read_chunk;
	} else if (rs_credit(c, r, false, &grant)) {
		grant = 1;
	}
	rr_put_be32(buf + 8, grant);
	if (err_chunk)
		*err_chunk = plan->is_error;
	if (plan->nwrites > RR_ARRAY_SIZE(wstack)) {
		w = rr_alloc(c->env, sizeof(*w) * plan->nwrites);
		if (!w) {
			rc = -ENOMEM;
			c->io.slot_put(c->io.ctx, slot);
			goto out;
		}
	}
	/* (nothing to build without Writes: a call less) */
	rc = plan->nwrites ? build_writes(c, r, parts, nparts, plan, w) : 0;
	if (rc) {
		c->io.slot_put(c->io.ctx, slot);
		goto out;
	}
	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = plan->send_len;
	s.inv = plan->send_inv;
	s.inv_stag = plan->inv_stag;
	s.writes = w;
	s.nwrites = plan->nwrites;
	s.token = plan->nwrites ? TOK(TOK_REPLY, r) : TOK(TOK_SEND, NULL);
	s.quiet = !plan->nwrites;   /* nothing of the request rides on it */
	s.alone = c->nreqs <= 1;    /* (@r is counted until it is done) */
	r->send_done = false;
	r->send_pending = plan->nwrites != 0;
	if (r->send_pending) {
		r->snext = c->replying;
		c->replying = r;
	}
	if (rr_conn_post_send(c, &s, buf)) {
		if (r->send_pending)
			rs_replying_del(c, r);
		r->send_pending = false;
		c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
		rc = -ENOTCONN;
		goto out;
	}
	/* Everything else was copied into the send slot: the caller's memory
	 * is referenced by the Writes only; a Reply without them needs no
	 * completion (a failed Send ends the connection anyway). */
	rc = plan->nwrites ? 1 : 0;
out:
	/* An exposed Reply that was never sent would keep its RDMA_DONE
	 * reservation forever: end the connection (fences it) instead. */
	if (rc < 0 && exposed)
		rr_conn_fail(c);
	if (rc < 0)
		rs_release_wmem(c, r);
	if (w != wstack)
		rr_free(c->env, w);
	rs_plan_put(c, plan);
	return rc;
}

int rs_reply_finish(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
		    unsigned nparts, struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf,
		    bool settled, bool *err_chunk)
{
	return reply_finish(c, r, parts, nparts, plan, slot, buf, settled, err_chunk);
}

void rs_tick_stall(struct rr_conn *c, uint64_t now)
{
	if (!c->sends_inflight || !c->cfg.send_timeout_ns ||
	    now - c->tx_progress < c->cfg.send_timeout_ns)
		return;
	c->st->send_stalls++;
	rr_conn_fail(c);
}

/* ---- parked Replies ----
 * A Read-chunk Reply whose RDMA_DONE Receive cannot be reserved (rrep_max
 * of them are) waits here, no thread blocked: sent when an RDMA_DONE frees
 * a reservation, ERR_CHUNK after rrep_timeout_ms, -ENOTCONN to its upper
 * layer when the connection goes. */

static int park(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
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
	rs_rrep_account(c, (int64_t)plan->rr_len);
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
		rs_rrep_account(c, -(int64_t)p->plan->rr_len);
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

		if (!expired && !rr_cred_rsp_done_room(&c->scred))
			break;
		park_send(c, park_pop(c), expired);
	}
}

void rs_park_fail_all(struct rr_conn *c)
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

uint64_t rs_park_next(const struct rr_conn *c)
{
	return c->parkq ? c->parkq->deadline : UINT64_MAX;
}
