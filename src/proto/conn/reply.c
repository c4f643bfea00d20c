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
 * registered until the Send completed. A Call that cannot be answered for
 * lack of memory gets RDMA_ERROR/ERR_CHUNK (it needs no allocation), or its
 * connection ends when not even that can go: never a silent drop. A peer
 * whose Sends make no progress for send_timeout_ms loses its connection (it
 * holds every Reply we sent it). */
#include "proto/conn/conn_int.h"

int rs_credit(struct rr_conn *c, struct rs_req *r, bool read_chunk, uint32_t *grant)
{
	int rc = rr_cred_rsp_reply(&c->scred, read_chunk, grant);

	if (rc == 0 && r)
		r->credited = true;
	return rc;
}

/* The grant of a Reply whose accounting was already taken. */
static uint32_t last_grant(const struct rr_conn *c)
{
	return c->scred.last_grant ? c->scred.last_grant : 1;
}

void rs_send_error(struct rr_conn *c, struct rs_req *r, const uint8_t *msg, size_t len)
{
	struct rr_conn_send s;
	uint32_t slot, cap, grant;
	uint8_t *buf;

	if (r && r->credited)
		grant = last_grant(c);
	else if (rs_credit(c, r, false, &grant))
		grant = 1;
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf || cap < len) {
		if (buf)
			c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
		return;
	}
	memcpy(buf, msg, len);
	rr_put_be32(buf + 8, grant);
	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = (uint32_t)len;
	s.token = TOK(TOK_SEND, NULL);
	if (rr_conn_post_send(c, &s, buf)) {
		c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
	}
}

void rs_refuse_xid(struct rr_conn *c, struct rs_req *r, uint32_t xid)
{
	uint8_t err[32];
	int n = rr_xprt_encode_error(xid, RR_XPRT_VERSION, 1, RR_XPRT_ERR_CHUNK, err,
				     sizeof(err));

	if (!c->up || n <= 0)
		return;
	c->st->calls_refused++;
	c->st->err_chunk_sent++;
	c->st->sends++;
	rs_send_error(c, r, err, (size_t)n);
}

void rr_conn_refuse(struct rr_conn *c, struct rr_conn_sreq *pub)
{
	struct rs_req *r = RR_CONTAINER_OF(pub, struct rs_req, pub);

	if (!r->send_pending && !r->send_done)
		rs_refuse_xid(c, r, r->rc->xid);
}

struct rr_xprt_reply_plan *rs_plan_get(struct rr_conn *c)
{
	struct rr_xprt_reply_plan *plan = c->plan_cache;

	if (plan) {
		c->plan_cache = NULL;
		return plan;
	}
	return rr_alloc(c->env, sizeof(*plan));
}

void rs_plan_put(struct rr_conn *c, struct rr_xprt_reply_plan *plan)
{
	if (!c->plan_cache)
		c->plan_cache = plan;
	else
		rr_free(c->env, plan);
}

static void replying_del(struct rr_conn *c, struct rs_req *r)
{
	for (struct rs_req **pp = &c->replying; *pp; pp = &(*pp)->snext)
		if (*pp == r) {
			*pp = r->snext;
			break;
		}
	r->snext = NULL;
}

/* The memory the Reply's Writes read is no longer used. */
static void release_wmem(struct rr_conn *c, struct rs_req *r)
{
	for (unsigned i = 0; i < r->nwmem; i++)
		rr_conn_unreg(c, &r->wmem[i]);
	r->nwmem = 0;
}

void rs_reply_sent(struct rr_conn *c, struct rs_req *r, int status)
{
	replying_del(c, r);
	r->send_done = true;
	r->send_pending = false;
	r->send_status = status;
	release_wmem(c, r);
	if (r->orphan) {
		rs_req_free(c, r);   /* rr_conn_done came first */
		return;
	}
	c->io.sent(c->io.ctx, &r->pub, status);
}

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
	rc = rr_xprt_rsp_reply(&c->rsp, r->rc, parts, nparts, last_grant(c), buf, cap, plan);
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
	if (plan->read_chunk && c->scred.done_owed >= c->scred.done_max &&
	    rs_park(c, r, parts, nparts, plan, slot, buf) == 0)
		return 1;
	return rs_reply_finish(c, r, parts, nparts, plan, slot, buf, false, err_chunk);
}

/* Registers the parts the Reply's Writes read from (only those: an XDR pad
 * comes from the executor's zero bytes) and builds the Writes in @w.
 * Returns 0 or a negative errno. */
static int build_writes(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
			unsigned nparts, const struct rr_xprt_reply_plan *plan,
			struct rr_conn_write *w)
{
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
		if (rr_conn_reg(c, &r->wmem[r->nwmem]) == 0)
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

int rs_reply_finish(struct rr_conn *c, struct rs_req *r, const struct rr_xprt_part *parts,
		    unsigned nparts, struct rr_xprt_reply_plan *plan, uint32_t slot, uint8_t *buf,
		    bool settled, bool *err_chunk)
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
	rc = build_writes(c, r, parts, nparts, plan, w);
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
	r->send_done = false;
	r->send_pending = plan->nwrites != 0;
	if (r->send_pending) {
		r->snext = c->replying;
		c->replying = r;
	}
	if (rr_conn_post_send(c, &s, buf)) {
		if (r->send_pending)
			replying_del(c, r);
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
		release_wmem(c, r);
	if (w != wstack)
		rr_free(c->env, w);
	rs_plan_put(c, plan);
	return rc;
}

void rs_tick_stall(struct rr_conn *c, uint64_t now)
{
	if (!c->sends_inflight || !c->cfg.send_timeout_ns ||
	    now - c->tx_progress < c->cfg.send_timeout_ns)
		return;
	c->st->send_stalls++;
	rr_conn_fail(c);
}
