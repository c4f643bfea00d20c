/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The responder's Calls (RFC 8166 sections 3.5, 4.5, 5): a received
 * message is answered RDMA_ERROR (ERR_VERS, ERR_CHUNK), dropped, or becomes
 * a request; a request with Read chunks is pulled by RDMA Read into its
 * rebuilt Call (never more Reads outstanding than the negotiated ORD) and
 * delivered once they completed; a Call whose Read failed ends the
 * connection, and when the same peer sends that XID again on a new
 * connection it gets ERR_CHUNK instead of another failing Read (RFC 8166:
 * do not loop; struct rr_conn_failed). The credit of each Call is counted
 * where its header is decoded (rr_cred_rsp_on_call): a message beyond the
 * peer's permission ends the connection unparsed (RFC 8166 section 4.3.1;
 * in a shared receive queue it took a Receive reserved for another peer).
 * Out of memory, a Call is answered ERR_CHUNK, never dropped silently. */
#include "proto/conn/conn_int.h"

void rs_failed_note(struct rr_conn *c, uint32_t xid)
{
	struct rr_conn_failed *f = c->cfg.failed;
	unsigned i;

	if (!f || !c->peer_host)
		return;
	i = f->next++ % RR_CONN_FAILED_MAX;
	f->e[i].host = c->peer_host;
	f->e[i].xid = xid;
	f->e[i].used = true;
}

/* True (and forgets it) when @xid from this peer failed before. */
static bool failed_take(struct rr_conn *c, uint32_t xid)
{
	struct rr_conn_failed *f = c->cfg.failed;

	if (!f || !c->peer_host)
		return false;
	for (unsigned i = 0; i < RR_CONN_FAILED_MAX; i++) {
		if (f->e[i].used && f->e[i].xid == xid && f->e[i].host == c->peer_host) {
			f->e[i].used = false;
			return true;
		}
	}
	return false;
}

static void deliver(struct rr_conn *c, struct rs_req *r)
{
	r->pub.msg = r->rc->msg;
	r->pub.len = r->rc->msg_len;
	r->pub.xid = r->rc->xid;
	r->delivered = true;
	c->io.deliver(c->io.ctx, &r->pub);
}

/* Issues RDMA Reads from the queue while fewer than ORD are outstanding. */
static void pump_reads(struct rr_conn *c)
{
	while (c->readq && c->reads_inflight < c->ord && c->up) {
		struct rs_req *r = c->readq;
		const struct rr_xprt_read_op *o = &r->rc->reads[r->next_read];
		struct rr_conn_read rd = {&r->read_mem, r->rc->buf + o->local_off, o->len, o->stag,
					  o->remote, TOK(TOK_REQ_READ, r)};

		if (c->io.read(c->io.ctx, &rd)) {
			rr_conn_fail(c);
			return;
		}
		c->reads_inflight++;
		if (++r->next_read == r->rc->nreads)
			c->readq = r->next;
	}
}

/* @r's Call needs its Read chunks: register the rebuilt Call as their sink
 * and queue its Reads. */
static void start_reads(struct rr_conn *c, struct rs_req *r)
{
	struct rs_req **pp = &c->readq;

	memset(&r->read_mem, 0, sizeof(r->read_mem));
	r->next_read = r->reads_done = 0;   /* not cleared when it was made */
	r->read_reg = true;
	r->read_mem.base = r->rc->buf;
	r->read_mem.len = r->rc->buf_len;
	r->read_mem.access = RR_XPRT_ACC_LOCAL_WRITE;
	if (rr_conn_reg(c, &r->read_mem)) {
		rs_req_free(c, r);
		rr_conn_fail(c);
		return;
	}
	r->next = NULL;
	while (*pp)
		pp = &(*pp)->next;
	*pp = r;
	r->reading = true;
	r->rnext = c->reading;
	c->reading = r;
	pump_reads(c);
}

/* The reset of a request (rs_on_recv) and the executor's object (pub.xreq)
 * after it stay within two cache lines: its first 128 bytes, a request
 * being line-aligned (rr_alloc_line; issue 16 part FD: with malloc's
 * 16-byte alignment they were three lines but for one start in four). */
_Static_assert(offsetof(struct rs_req, pub) + sizeof(struct rr_conn_sreq) <= 128,
	       "rs_req: the per-call fields beyond two cache lines");

/* A Call's fields of the session (conn_int.h: the reliable Replies' count,
 * scred's per-call fields, nreqs to bcalls, the responder codec core's
 * per-call fields up to the limits its decoding reads) are four cache lines
 * of the line-aligned session: the count at a line's start with scred's
 * private pool (unused once joined), scred's per-call fields from the next
 * (issue 16 part EB: nine lines, ten lines apart, before; part HF: six). */
#define RS_HOT0 offsetof(struct rr_conn, rrep.count)
_Static_assert(RS_HOT0 % 64 == 0 && _Alignof(struct rr_conn) == 64 &&
		       offsetof(struct rr_conn, scred) + offsetof(struct rr_cred_rsp, pool) ==
			       RS_HOT0 + 64 &&
		       offsetof(struct rr_conn, scred) + sizeof(struct rr_cred_rsp) ==
			       offsetof(struct rr_conn, nreqs) &&
		       offsetof(struct rr_conn, rsp) + offsetof(struct rr_xprt_responder, lim) +
				       offsetof(struct rr_hdr_limits, max_read_segs) + 4 <=
			       RS_HOT0 + 4 * 64,
	       "rr_conn: the responder's per-call fields beyond four cache lines");

void rs_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len)
{
	struct rr_xprt_rcall *rc = NULL;
	uint8_t err[32];
	size_t elen;
	enum rr_xprt_rsp_action a;
	struct rs_req *r;

	if (rr_cred_rsp_on_call(&c->scred) < 0) {
		if (c->io.post_recv(c->io.ctx, idx) == 0)
			rr_cred_rsp_posted(&c->scred, 1);
		rs_overrun(c);
		return;
	}
	a = rr_xprt_rsp_recv(&c->rsp, buf, len, rs_last_grant(c),
			     err, &elen, &rc);
	if (c->io.post_recv(c->io.ctx, idx) == 0)
		rr_cred_rsp_posted(&c->scred, 1);
	switch (a) {
	case RR_XPRT_A_DROP:
		rs_settle(c); /* no Reply owed */
		return;
	case RR_XPRT_A_ERROR:
		rs_send_error(c, NULL, err, elen);
		return;
	default:
		break;
	}
	r = rs_spare_take(c);
	if (!r)
		r = rr_alloc_line(c->env, sizeof(*r));
	if (!r) {
		uint32_t xid = rc->xid;

		rr_xprt_rcall_release(&c->rsp, rc);
		rs_refuse_xid(c, NULL, xid);
		return;
	}
	memset(r, 0, RS_REQ_CLEAR);
	c->nreqs++;
	r->rc = rc;
	if (a == RR_XPRT_A_DELIVER) {
		deliver(c, r);
		return;
	}
	if (failed_take(c, rc->xid)) {
		int n = rr_hdr_encode_error_buf(rc->xid, RR_HDR_VERSION, 1, RR_HDR_ERR_CHUNK,
						err, sizeof(err));

		if (n > 0) {
			c->st->sends++;
			c->st->err_chunk_sent++;
			rs_send_error(c, r, err, (size_t)n);
		}
		rs_req_free(c, r);
		return;
	}
	start_reads(c, r);
}

void rs_on_read(struct rr_conn *c, struct rs_req *r, int status)
{
	uint8_t err[32];
	size_t elen;
	enum rr_xprt_rsp_action a;

	if (status) {
		/* fatal to the connection (rr_conn_down frees @r); a peer that
		 * sends this XID again gets ERR_CHUNK */
		if (!r->failed)
			rs_failed_note(c, r->rc->xid);
		r->failed = true;
		rr_conn_fail(c);
		return;
	}
	if (++r->reads_done < r->rc->nreads) {
		pump_reads(c);
		return;
	}
	rr_conn_unreg(c, &r->read_mem);   /* read_reg: start_reads */
	rs_reading_del(c, r);
	r->reading = false;
	a = rr_xprt_rsp_assemble(&c->rsp, r->rc, rs_last_grant(c),
				 err, &elen);
	if (a == RR_XPRT_A_DELIVER) {
		deliver(c, r);
	} else {
		if (a == RR_XPRT_A_ERROR) {
			rs_send_error(c, r, err, elen);
		} else {
			uint32_t g;

			(void)rs_credit(c, r, false, &g);
		}
		rs_req_free(c, r);
	}
	pump_reads(c);
}

/* The connection is gone: requests still reading were never delivered and
 * go now (none of their completions comes any more); parked Replies are told
 * -ENOTCONN, exposed ones fenced (reliable_reply.c). */
void rs_down(struct rr_conn *c)
{
	rs_park_fail_all(c);
	rs_rrep_down(c);
	c->readq = NULL;
	while (c->reading)
		rs_req_free(c, c->reading);
	/* Replies with RDMA Writes still on their way: their Sends are
	 * flushed with the connection */
	while (c->replying)
		rs_reply_sent(c, c->replying, -ENOTCONN);
}

bool rr_conn_in_progress(const struct rr_conn *c)
{
	return c->nreqs || c->rrep.count || c->bcalls;   /* backward Calls too */
}

bool rr_conn_done(struct rr_conn *c, struct rr_conn_sreq *pub)
{
	struct rs_req *r = RR_CONTAINER_OF(pub, struct rs_req, pub);

	if (r->send_pending) {
		/* its Reply's Send has not completed: freed then (the caller
		 * broke the contract of rr_conn_reply; the memory of the Reply
		 * must stay valid until then) */
		r->orphan = true;
		return false;
	}
	rs_req_free(c, r);
	return true;
}

/* Destroy: whatever is left (the executor finished what it was given). */
void rs_destroy(struct rr_conn *c)
{
	/* the executor may destroy a session outside the lock its loop's
	 * shared spares are used under (transport tp_conn_free without a
	 * pool): what is freed from here on stays the session's own */
	rr_xprt_rsp_share(&c->rsp, NULL);
	rs_down(c);
	/* its reservation back to the pool: the executor destroys the session
	 * once its queue pair is gone and its completions are counted */
	rr_cred_rsp_leave(&c->scred);
	rs_rrep_free_all(c);
	if (c->up || c->rsp.env)
		rr_xprt_rsp_fini(&c->rsp);
	for (void *r; (r = rr_spare_take(&c->spare_reqs));)
		rr_free_line(c->env, r);
}
