/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Reliable reply, the responder's side (draft-cel-nfsv4-rpcrdma-reliable-
 * reply-04 sections 4.1.1, 5.4.3; the requester's is reliable_reply_pull.c,
 * the protocol pieces -- policy, header patching, the table of exposed
 * Replies -- proto/rrep.[ch], the choices the draft leaves open
 * docs/protocol.md): a reduced Reply is exposed read-only through one
 * invalidatable registration of this connection, recorded by XID with a
 * reserved Receive for its RDMA_DONE (when none is free the Reply waits,
 * parked by reply.c); an RDMA_DONE releases its Reply (a Send With
 * Invalidate of its STag fenced it already, else a Local Invalidate does),
 * the timeout fences it, a disconnect fences them all. The memory is freed
 * only after deregistration (docs/security.md "Lifetime rule"); Replies
 * whose RDMA_DONE may have come early (forged, stolen STags) keep their
 * buffer until the connection is gone. The bytes held per connection and
 * per server are bounded (reply_mem_per_conn, reply_mem_total). */
#include "proto/conn/conn_int.h"

bool rs_rrep_room(const struct rr_conn *c, uint32_t len)
{
	return c->rrep_bytes + len <= c->cfg.reply_mem_per_conn &&
	       (!c->cfg.reply_mem_total_used ||
		*c->cfg.reply_mem_total_used + len <= c->cfg.reply_mem_total);
}

/* Read-chunk Reply bytes held for the peer change by @delta. */
void rs_rrep_account(struct rr_conn *c, int64_t delta)
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
	rs_rrep_account(c, -(int64_t)x->len);
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
	/* out of the table: kept here, so that a disconnect before the
	 * completion still fences it (rs_rrep_down) */
	x->next = c->rrep_fencing;
	c->rrep_fencing = x;
}

void rs_rrep_on_inv(struct rr_conn *c, struct rs_exp *x, int status)
{
	struct rs_exp **pp = &c->rrep_fencing;

	while (*pp && *pp != x)   /* at most rrep_max long */
		pp = &(*pp)->next;
	if (!*pp)
		return;   /* settled by rs_rrep_down already */
	*pp = x->next;
	retire(c, x, status == 0);
	if (status)
		rr_conn_fail(c);
}

/* The peer invalidated @x's STag before @x's own RDMA_DONE came (with
 * another XID's RDMA_DONE, or with any other message): that Reply can no
 * longer be pulled; it waits for its own RDMA_DONE (or the timeout) only to
 * release its memory. */
static void steal(struct rr_conn *c, struct rs_exp *x)
{
	x->stolen = true;
	if (++c->rrep_forged > c->cfg.rrep_max)
		rr_conn_fail(c);   /* bound what forgeries make us hold */
	if (x->valid) {
		exp_invalid(c, x);
		c->st->remote_inv++;
	}
}

/* Send With Invalidate of @inv_stag, an STag of ours the table no longer
 * holds: a Reply being fenced (its Local Invalidate in flight) is invalid
 * now, not when that completes. */
static void fencing_inv(struct rr_conn *c, uint32_t inv_stag)
{
	for (struct rs_exp *x = c->rrep_fencing; x; x = x->next)   /* at most rrep_max */
		if (x->valid && x->mem.stag == inv_stag) {
			exp_invalid(c, x);
			c->st->remote_inv++;
			return;
		}
}

void rs_rrep_on_stray_inv(struct rr_conn *c, uint32_t inv_stag)
{
	struct rr_rrep_entry *e = rr_rrep_find_stag(&c->rrep, inv_stag);

	if (!e) {
		fencing_inv(c, inv_stag);
		return;
	}
	e->stag_valid = false;   /* the provider invalidated it */
	steal(c, e->user);
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
	if (d.stolen)
		steal(c, d.stolen->user);   /* another XID's STag */
	else if (has_inv && !(d.release && d.release->stag == inv_stag))
		fencing_inv(c, inv_stag);
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
		*grant = rs_last_grant(c);
	else if (rs_credit(c, r, false, grant))
		*grant = 1;
	n = rr_hdr_encode_error_buf(r->rc->xid, RR_HDR_VERSION, *grant, RR_HDR_ERR_CHUNK, buf,
				    c->cfg.send_size);
	plan->send_len = n > 0 ? (uint32_t)n : 0;
	plan->is_error = true;
	plan->proc = RR_HDR_ERROR;
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
		rr_rrep_entry_free(&c->rrep, e);
		goto fail;
	}
	x->valid = true;
	c->rrep_live++;
	rs_rrep_account(c, (int64_t)x->len);
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

void rs_rrep_tick(struct rr_conn *c, uint64_t now)
{
	struct rr_rrep_entry *e;

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
	return c->rrep.count ? rr_rrep_next_expiry(&c->rrep) : UINT64_MAX;
}

/* Disconnect: exposed Replies are fenced, also those whose Local
 * Invalidate was in flight (no completion comes for it any more); their
 * buffers go with the connection. */
void rs_rrep_down(struct rr_conn *c)
{
	struct rr_rrep_entry *e;

	while (c->rrep_fencing) {
		struct rs_exp *x = c->rrep_fencing;

		c->rrep_fencing = x->next;
		retire(c, x, false);
	}
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
