/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The in-memory wire of the virtual-time session test (vt_net.h): the io
 * callbacks of both sessions (struct rr_conn_io, as src/transport/rdma/
 * conn.c implements them on a provider), registrations in a table keyed by
 * STag, Sends with their RDMA Writes and RDMA Reads queued on an ordered
 * wire per direction, completions queued per class, and the checks of every
 * access, Receive and send slot. The headers the sessions send are read by
 * a small parser of its own (RFC 8166 section 4.2: Read list, Write list,
 * Reply chunk), independent of the code under test: it learns which XID
 * exposed which STag, and checks that every segment advertised names a
 * valid registration of that connection, in bounds, with the right. */
#include "conn/vt_net.h"

#include <stdlib.h>

#define FAIL(n, ...) (n)->fail((n)->ctx, __VA_ARGS__)
#define TRACE(n, ...)                                                          \
	do {                                                                   \
		if ((n)->trace)                                                \
			(n)->trace((n)->ctx, __VA_ARGS__);                     \
	} while (0)

static const uint8_t zeros[4];

static const char *side_name(int s)
{
	return s == VT_REQ ? "requester" : "responder";
}

static uint64_t checksum(const uint8_t *p, uint32_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (len--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* ---- queues ---- */

static void fifo_push(struct vt_fifo *f, struct vt_op *op)
{
	op->next = NULL;
	if (f->tail)
		f->tail->next = op;
	else
		f->head = op;
	f->tail = op;
	f->n++;
}

static struct vt_op *fifo_pop(struct vt_fifo *f)
{
	struct vt_op *op = f->head;

	if (op) {
		f->head = op->next;
		if (!f->head)
			f->tail = NULL;
		f->n--;
	}
	return op;
}

static void cq_push(struct vt_qp *q, int cl, uint64_t token, uint32_t slot, uint32_t stag,
		    int status)
{
	struct vt_cqe *e = calloc(1, sizeof(*e));

	if (!e)
		abort();
	e->token = token;
	e->slot = slot;
	e->stag = stag;
	e->status = status;
	if (q->cq[cl].tail)
		q->cq[cl].tail->next = e;
	else
		q->cq[cl].head = e;
	q->cq[cl].tail = e;
	q->cq[cl].n++;
}

static struct vt_cqe *cq_pop(struct vt_qp *q, int cl)
{
	struct vt_cqe *e = q->cq[cl].head;

	if (e) {
		q->cq[cl].head = e->next;
		if (!q->cq[cl].head)
			q->cq[cl].tail = NULL;
		q->cq[cl].n--;
	}
	return e;
}

static struct vt_op *op_new(enum vt_op_kind k, int from)
{
	struct vt_op *op = calloc(1, sizeof(*op));

	if (!op)
		abort();
	op->kind = k;
	op->from = (uint8_t)from;
	return op;
}

/* ---- registrations ---- */

static void active_add(struct vt_net *n, struct vt_reg *r)
{
	n->active = vt_grow(n->active, &n->capactive, n->nactive, sizeof(*n->active));
	r->active = (int)n->nactive;
	n->active[n->nactive++] = r->stag;
}

static void active_del(struct vt_net *n, struct vt_reg *r)
{
	uint32_t last = n->active[--n->nactive];

	n->active[r->active] = last;
	vt_net_reg(n, last)->active = r->active;
	r->active = -1;
}

static struct vt_reg *reg_of(const struct vt_net *n, const struct rr_conn_mem *m)
{
	return m ? vt_net_reg(n, (uint32_t)(uintptr_t)m->handle) : NULL;
}

/* A memory block goes: nothing registered may still cover it. */
static void on_free(void *ctx, const struct vt_block *b)
{
	struct vt_net *n = ctx;

	for (uint32_t i = 0; i < n->nactive; i++) {
		struct vt_reg *r = vt_net_reg(n, n->active[i]);

		if ((uintptr_t)r->base < b->addr + b->size &&
		    (uintptr_t)r->base + (r->len ? r->len : 1) > b->addr)
			FAIL(n, "memory %#lx+%zu freed while %s STag %#x (xid %#x, %s) still "
				"registered over it", (unsigned long)b->addr, b->size,
			     side_name(r->side), r->stag, r->xid,
			     r->invalid ? "invalid" : "valid");
	}
}

/* Whether the protocol allows @r to be gone when the peer or a Local
 * Invalidate reaches it: the memory of an aborted Call, or a Read-chunk
 * Reply fenced by its timeout (docs/protocol.md: a late Read or RDMA_DONE
 * then ends the connection). */
static bool may_be_gone(struct vt_net *n, const struct vt_reg *r)
{
	return r->side == VT_REQ ? r->has_xid && n->xid_aborted(n->ctx, r->xid)
				 : r->fenced_in_tick;
}

/* ---- the io callbacks ---- */

static struct vt_qp *req_qp(struct vt_net *n)
{
	return n->cur ? &n->cur->qp[VT_REQ] : NULL;
}

static struct vt_net *qp_net(const struct vt_qp *q)
{
	return q->conn->net;
}

static int do_reg(struct vt_net *n, struct vt_qp *q, int side, struct rr_conn_mem *m)
{
	unsigned remote = m->access & (RR_XPRT_ACC_REMOTE_READ | RR_XPRT_ACC_REMOTE_WRITE);
	struct vt_reg *r;

	if (!q || q->down)
		return -ENOTCONN;
	if (!m->base || !vt_mem_find(n->mem, m->base, m->len ? m->len : 1))
		FAIL(n, "%s registers %p+%zu: not inside live memory", side_name(side), m->base,
		     m->len);
	if (m->handle)
		FAIL(n, "%s registers a struct rr_conn_mem already registered (STag %#x)",
		     side_name(side), (unsigned)(uintptr_t)m->handle);
	if (vt_mem_fail_now(n->mem, 4))
		return -ENOMEM;
	n->regs = vt_grow(n->regs, &n->capregs, n->nregs, sizeof(*n->regs));
	r = &n->regs[n->nregs];
	memset(r, 0, sizeof(*r));
	r->stag = VT_STAG_BASE + n->nregs++;
	r->side = (uint8_t)side;
	r->epoch = q->conn->epoch;
	r->base = m->base;
	r->len = m->len;
	r->to = ((uint64_t)r->stag << 32) | 0x100u;
	r->access = m->access;
	r->window = m->invalidatable && remote && n->cfg[side].use_windows;
	r->registered = true;
	active_add(n, r);
	m->stag = r->stag;
	m->to = r->to;
	m->lkey = r->stag;
	m->handle = (void *)(uintptr_t)r->stag;
	m->handle2 = NULL;
	m->window = r->window;
	TRACE(n, "%s reg %#x %p+%zu acc %u%s", side_name(side), r->stag, m->base, m->len,
	      m->access, r->window ? " window" : "");
	return 0;
}

static void do_unreg(struct vt_net *n, int side, struct rr_conn_mem *m)
{
	struct vt_reg *r = reg_of(n, m);
	struct vt_conn *c;

	if (!r || !r->registered)
		FAIL(n, "%s deregisters STag %#x: not registered", side_name(side),
		     (unsigned)(uintptr_t)m->handle);
	if (r->side != side)
		FAIL(n, "%s deregisters STag %#x of the %s", side_name(side), r->stag,
		     side_name(r->side));
	for (c = n->conns; c && c->epoch != r->epoch; c = c->next)
		;
	if (r->inv_posted && c && !c->broken && !c->qp[side].closing && !c->qp[side].down)
		FAIL(n, "%s deregisters STag %#x (xid %#x) while its Local Invalidate is in "
			"flight on a live connection", side_name(side), r->stag, r->xid);
	if (!r->invalid && n->in_tick)
		r->fenced_in_tick = true;
	r->registered = false;
	active_del(n, r);
	m->handle = NULL;
	TRACE(n, "%s unreg %#x", side_name(side), r->stag);
}

static int do_inv(struct vt_net *n, struct vt_qp *q, int side, struct rr_conn_mem *m,
		  uint64_t token)
{
	struct vt_reg *r = reg_of(n, m);

	if (!q || q->down)
		return -ENOTCONN;
	if (!r || !r->registered || !r->window)
		FAIL(n, "%s posts a Local Invalidate of STag %#x: %s", side_name(side),
		     r ? r->stag : 0, !r || !r->registered ? "not registered" : "not a window");
	if (r->inv_posted)
		FAIL(n, "%s posts a second Local Invalidate of STag %#x (xid %#x)",
		     side_name(side), r->stag, r->xid);
	if (n->in_tick)
		r->fenced_in_tick = true;
	if (r->invalid && !may_be_gone(n, r))
		FAIL(n, "%s posts a Local Invalidate of STag %#x (xid %#x) already %s",
		     side_name(side), r->stag, r->xid,
		     r->remote_inv ? "invalidated by the peer" : "invalid");
	if (vt_mem_fail_now(n->mem, 4))
		return -ENOMEM;
	r->inv_posted = true;
	cq_push(q, VT_CQ_INV, token, 0, r->stag, q->conn->broken ? VT_FLUSH : 0);
	n->linv++;
	TRACE(n, "%s LINV post %#x", side_name(side), r->stag);
	return 0;
}

static uint8_t *do_slot_get(struct vt_qp *q, uint32_t *slot, uint32_t *cap)
{
	struct vt_net *n;

	if (!q || q->down || !q->nsfree)
		return NULL;
	n = qp_net(q);
	*slot = q->sfree[--q->nsfree];
	if (q->sstate[*slot] != VT_S_FREE)
		FAIL(n, "free slot %u of the %s not free", *slot, side_name(q->side));
	q->sstate[*slot] = VT_S_HELD;
	*cap = q->ssize;
	return q->sbuf + (size_t)*slot * q->ssize;
}

static void slot_free(struct vt_qp *q, uint32_t slot)
{
	q->sstate[slot] = VT_S_FREE;
	q->sfree[q->nsfree++] = slot;
}

static void do_slot_put(struct vt_qp *q, uint32_t slot)
{
	struct vt_net *n;

	if (!q)
		return;
	n = qp_net(q);
	if (slot >= q->nsend || q->sstate[slot] != VT_S_HELD)
		FAIL(n, "%s puts back slot %u it does not hold (state %d)", side_name(q->side),
		     slot, slot < q->nsend ? q->sstate[slot] : -1);
	slot_free(q, slot);
}

/* ---- the headers the sessions send (RFC 8166 section 4.2) ---- */

struct hcur {
	const uint8_t *p;
	uint32_t len, off;
	bool bad;
};

static uint32_t h32(struct hcur *h)
{
	uint32_t v;

	if (h->len - h->off < 4) {
		h->bad = true;
		return 0;
	}
	v = rr_get_be32(h->p + h->off);
	h->off += 4;
	return v;
}

/* One segment advertised by @q's side for @xid: a valid registration of
 * this connection and side, in bounds, with @acc. */
static void seg_check(struct vt_net *n, struct vt_qp *q, struct hcur *h, uint32_t xid,
		      unsigned acc)
{
	uint32_t stag = h32(h), len = h32(h);
	uint64_t off = (uint64_t)h32(h) << 32;
	struct vt_reg *r;

	off |= h32(h);
	if (h->bad)
		return;
	r = vt_net_reg(n, stag);
	if (!r || r->side != q->side || r->epoch != q->conn->epoch || !r->registered ||
	    r->invalid || r->inv_posted || !(r->access & acc) || off < r->to ||
	    off - r->to + len > r->len)
		FAIL(n, "%s advertises segment %#x:%u@%#llx for xid %#x: %s", side_name(q->side),
		     stag, len, (unsigned long long)off, xid,
		     !r ? "unknown STag" :
		     r->side != q->side || r->epoch != q->conn->epoch ? "foreign STag" :
		     !r->registered || r->invalid || r->inv_posted ? "STag not valid" :
		     !(r->access & acc) ? "access right missing" : "out of bounds");
	if (r->has_xid && r->xid != xid)
		FAIL(n, "STag %#x advertised for xid %#x and xid %#x", stag, r->xid, xid);
	r->has_xid = true;
	r->xid = xid;
}

static void chunk_list(struct vt_net *n, struct vt_qp *q, struct hcur *h, uint32_t xid,
		       unsigned acc, bool read_list, bool one)
{
	while (!h->bad && h32(h)) {
		uint32_t nsegs = 1;

		if (read_list)
			(void)h32(h);   /* position */
		else
			nsegs = h32(h);
		if (nsegs > 4096)
			h->bad = true;
		for (uint32_t i = 0; i < nsegs && !h->bad; i++)
			seg_check(n, q, h, xid, acc);
		if (one)
			break;
	}
}

static struct vt_owed *owed(struct vt_conn *c, uint32_t xid)
{
	for (unsigned i = 0; i < c->ndone; i++)
		if (c->done[i].xid == xid)
			return &c->done[i];
	c->done = vt_grow(c->done, &c->capdone, c->ndone, sizeof(*c->done));
	c->done[c->ndone] = (struct vt_owed){xid, 0};
	return &c->done[c->ndone++];
}

uint32_t vt_net_done_owed(const struct vt_conn *c)
{
	for (unsigned i = 0; i < c->ndone; i++)
		if (c->done[i].owed)
			return c->done[i].xid;
	return 0;
}

/* What the message @q's side is about to send says: the STags it exposes,
 * the grant of a Reply, an RDMA_ERROR, an RDMA_DONE (exactly one per
 * Read-chunk Reply received on this connection, draft 4.1.3). */
static void parse_sent(struct vt_net *n, struct vt_qp *q, const uint8_t *buf, uint32_t len)
{
	struct hcur h = {buf, len, 0, false};
	uint32_t xid = h32(&h), vers = h32(&h), credit = h32(&h), proc = h32(&h);
	bool req = q->side == VT_REQ;

	if (h.bad || vers != RR_HDR_VERSION)
		FAIL(n, "%s sends a message of %u bytes without a valid header", side_name(q->side),
		     len);
	if (!req && credit == 0)
		FAIL(n, "responder grants 0 credits (xid %#x)", xid);
	if (proc == RR_HDR_ERROR) {
		if (req)
			FAIL(n, "requester sends RDMA_ERROR (xid %#x)", xid);
		n->err_sent(n->ctx, xid);
		return;
	}
	if (proc == RR_HDR_DONE) {
		struct vt_owed *o = owed(q->conn, xid);

		if (!req)
			FAIL(n, "responder sends RDMA_DONE (xid %#x)", xid);
		if (o->owed <= 0)
			FAIL(n, "requester sends an RDMA_DONE for xid %#x it does not owe on this "
				"connection", xid);
		o->owed--;
		return;
	}
	if (proc != RR_HDR_MSG && proc != RR_HDR_NOMSG)
		FAIL(n, "%s sends rdma_proc %u", side_name(q->side), proc);
	if (req) {
		struct vt_conn *c = q->conn;

		n->call_sent(n->ctx, xid);
		if (++c->calls - c->replies > c->grant)
			FAIL(n, "requester sends xid %#x with %u Calls outstanding and a grant of %u",
			     xid, c->calls - c->replies, c->grant);
	}
	/* Read list: the sender's memory the peer reads */
	chunk_list(n, q, &h, xid, RR_XPRT_ACC_REMOTE_READ, true, false);
	if (!req)
		return;   /* the Write list and Reply chunk echo the requester's */
	chunk_list(n, q, &h, xid, RR_XPRT_ACC_REMOTE_WRITE, false, false);
	chunk_list(n, q, &h, xid, RR_XPRT_ACC_REMOTE_WRITE, false, true);
	if (h.bad)
		FAIL(n, "requester sends a malformed header (xid %#x)", xid);
}

static int do_send(struct vt_net *n, struct vt_qp *q, const struct rr_conn_send *s)
{
	const uint8_t *buf;
	bool quiet;
	int peer;

	if (!q || q->down)
		return -ENOTCONN;
	if (s->slot >= q->nsend || q->sstate[s->slot] != VT_S_HELD)
		FAIL(n, "%s posts a Send from slot %u it does not hold", side_name(q->side),
		     s->slot);
	if (s->len > q->ssize)
		FAIL(n, "%s Send of %u bytes from a slot of %u", side_name(q->side), s->len,
		     q->ssize);
	for (unsigned i = 0; i < s->nwrites; i++) {
		const struct rr_conn_write *w = &s->writes[i];
		struct vt_reg *r = reg_of(n, w->mem);

		if (!w->mem ? w->len > 3 || memcmp(w->src, zeros, w->len) :
			      !r || !r->registered || w->src < r->base ||
			      w->src + w->len > r->base + r->len)
			FAIL(n, "%s Write %u (%u bytes) from memory not registered for it",
			     side_name(q->side), i, w->len);
	}
	if (vt_mem_fail_now(n->mem, 4))
		return -EIO;
	if (s->alone && (q->side != VT_RSP || (n->held && n->held(n->ctx, q) > 1)))
		FAIL(n, "%s Send marked alone while %u requests of its session are held",
		     side_name(q->side), n->held ? n->held(n->ctx, q) : 0);
	buf = q->sbuf + (size_t)s->slot * q->ssize;
	parse_sent(n, q, buf, s->len);
	/* a quiet Send taken quiet three times in four, as the transport's
	 * runs of unsignaled Sends end (the session must take both) */
	quiet = s->quiet && n->sends % 4 != 3;
	q->sstate[s->slot] = quiet ? VT_S_QUIET : VT_S_POSTED;
	n->sends++;
	n->side_sends[q->side]++;
	TRACE(n, "%s send slot %u len %u xid %#x proc %u writes %u%s", side_name(q->side),
	      s->slot, s->len, s->len >= 4 ? rr_get_be32(buf) : 0,
	      s->len >= 16 ? rr_get_be32(buf + 12) : 99, s->nwrites, s->inv ? " SWI" : "");
	if (q->conn->broken) {
		cq_push(q, VT_CQ_SEND, s->token, s->slot, 0, VT_FLUSH);
		return quiet ? 1 : 0;
	}
	peer = !q->side;
	for (unsigned i = 0; i < s->nwrites; i++) {
		struct vt_op *op = op_new(VT_OP_WRITE, q->side);

		op->src = s->writes[i].src;
		op->src_stag = s->writes[i].mem ? s->writes[i].mem->stag : 0;
		op->len = s->writes[i].len;
		op->stag = s->writes[i].stag;
		op->to = s->writes[i].to;
		fifo_push(&q->conn->ops[peer], op);
	}
	{
		struct vt_op *op = op_new(VT_OP_SEND, q->side);

		op->slot = s->slot;
		op->len = s->len;
		op->inv = s->inv;
		op->inv_stag = s->inv_stag;
		op->token = s->token;
		op->xid = s->len >= 4 ? rr_get_be32(buf) : 0;
		op->sum = checksum(buf, s->len);
		fifo_push(&q->conn->ops[peer], op);
	}
	return quiet ? 1 : 0;
}

static int do_read(struct vt_net *n, struct vt_qp *q, const struct rr_conn_read *rd)
{
	struct vt_reg *r;
	struct vt_op *op;

	if (!q || q->down)
		return -ENOTCONN;
	r = reg_of(n, rd->mem);
	if (!r || !r->registered || !(r->access & RR_XPRT_ACC_LOCAL_WRITE) || rd->dst < r->base ||
	    rd->dst + rd->len > r->base + r->len)
		FAIL(n, "%s RDMA Read into memory not registered for it", side_name(q->side));
	if (q->reads_out >= q->ord)
		FAIL(n, "%s posts a Read beyond ORD %u", side_name(q->side), q->ord);
	if (vt_mem_fail_now(n->mem, 4))
		return -EIO;
	q->reads_out++;
	n->reads++;
	TRACE(n, "%s read %#x:%u", side_name(q->side), rd->stag, rd->len);
	if (q->conn->broken) {
		cq_push(q, VT_CQ_READ, rd->token, 0, 0, VT_FLUSH);
		return 0;
	}
	op = op_new(VT_OP_READ, q->side);
	op->stag = rd->stag;
	op->to = rd->to;
	op->len = rd->len;
	op->dst = rd->dst;
	op->dst_stag = rd->mem->stag;
	op->token = rd->token;
	fifo_push(&q->conn->ops[!q->side], op);
	return 0;
}

static int do_post_recv(struct vt_net *n, struct vt_qp *q, uint32_t idx)
{
	if (!q || q->down)
		return -ENOTCONN;
	if (idx >= q->nrecv || q->rstate[idx] != VT_R_HELD)
		FAIL(n, "%s posts Receive %u that it does not hold (state %d)", side_name(q->side),
		     idx, idx < q->nrecv ? q->rstate[idx] : -1);
	q->rstate[idx] = VT_R_POSTED;
	q->rfifo[(q->rhead + q->rcount++) % q->nrecv] = idx;
	return 0;
}

static void do_close(struct vt_qp *q)
{
	if (!q || q->down || q->closing)
		return;
	TRACE(qp_net(q), "%s closes epoch %u", side_name(q->side), q->conn->epoch);
	q->closing = true;
	vt_net_break(qp_net(q), q->conn);
}

/* requester: ctx is the net, the connection its current one */

static int r_reg(void *ctx, struct rr_conn_mem *m)
{
	return do_reg(ctx, req_qp(ctx), VT_REQ, m);
}

static void r_unreg(void *ctx, struct rr_conn_mem *m)
{
	do_unreg(ctx, VT_REQ, m);
}

static int r_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	return do_inv(ctx, req_qp(ctx), VT_REQ, m, token);
}

static uint8_t *r_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	return do_slot_get(req_qp(ctx), slot, cap);
}

static void r_slot_put(void *ctx, uint32_t slot)
{
	do_slot_put(req_qp(ctx), slot);
}

static int r_send(void *ctx, const struct rr_conn_send *s)
{
	return do_send(ctx, req_qp(ctx), s);
}

static int r_read(void *ctx, const struct rr_conn_read *r)
{
	return do_read(ctx, req_qp(ctx), r);
}

static int r_post_recv(void *ctx, uint32_t idx)
{
	return do_post_recv(ctx, req_qp(ctx), idx);
}

static int r_lend(void *ctx, uint32_t idx, void **handle)
{
	struct vt_net *n = ctx;
	struct vt_qp *q = req_qp(n);

	if (!q || q->down)
		return -ENOBUFS;
	if (idx >= q->nrecv || q->rstate[idx] != VT_R_HELD)
		FAIL(n, "requester lends Receive %u that it does not hold", idx);
	if (q->lent >= VT_LEND_MAX || vt_mem_fail_now(n->mem, 1))
		return -ENOBUFS;
	q->rstate[idx] = VT_R_LENT;
	q->lent++;
	*handle = q;
	return 0;
}

static void r_unlend(void *ctx, void *handle, uint32_t idx)
{
	struct vt_net *n = ctx;
	struct vt_qp *q = handle;

	if (!q || idx >= q->nrecv || q->rstate[idx] != VT_R_LENT)
		FAIL(n, "requester gives back Receive %u that was not lent", idx);
	q->lent--;
	if (n->cur == q->conn && !q->down) {
		q->rstate[idx] = VT_R_POSTED;
		q->rfifo[(q->rhead + q->rcount++) % q->nrecv] = idx;
	} else {
		q->rstate[idx] = VT_R_IDLE;
	}
}

static void r_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct vt_net *n = ctx;

	n->complete(n->ctx, rpc);
}

static void r_close(void *ctx)
{
	do_close(req_qp(ctx));
}

/* responder: ctx is its qp */

static int s_reg(void *ctx, struct rr_conn_mem *m)
{
	struct vt_qp *q = ctx;

	return do_reg(qp_net(q), q, VT_RSP, m);
}

static void s_unreg(void *ctx, struct rr_conn_mem *m)
{
	do_unreg(qp_net(ctx), VT_RSP, m);
}

static int s_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	return do_inv(qp_net(ctx), ctx, VT_RSP, m, token);
}

static uint8_t *s_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	return do_slot_get(ctx, slot, cap);
}

static void s_slot_put(void *ctx, uint32_t slot)
{
	do_slot_put(ctx, slot);
}

static int s_send(void *ctx, const struct rr_conn_send *s)
{
	return do_send(qp_net(ctx), ctx, s);
}

static int s_read(void *ctx, const struct rr_conn_read *r)
{
	return do_read(qp_net(ctx), ctx, r);
}

static int s_post_recv(void *ctx, uint32_t idx)
{
	return do_post_recv(qp_net(ctx), ctx, idx);
}

static void s_deliver(void *ctx, struct rr_conn_sreq *r)
{
	struct vt_net *n = qp_net(ctx);

	n->deliver(n->ctx, ctx, r);
}

static void s_sent(void *ctx, struct rr_conn_sreq *r, int status)
{
	struct vt_net *n = qp_net(ctx);

	n->sent(n->ctx, ctx, r, status);
}

static void s_close(void *ctx)
{
	do_close(ctx);
}

const struct rr_conn_io vt_rsp_io = {
	.reg = s_reg, .unreg = s_unreg, .inv = s_inv, .slot_get = s_slot_get,
	.slot_put = s_slot_put, .send = s_send, .read = s_read, .post_recv = s_post_recv,
	.deliver = s_deliver, .sent = s_sent, .close = s_close,
};

/* ---- life ---- */

void vt_net_init(struct vt_net *n, struct vt_mem *mem)
{
	memset(n, 0, sizeof(*n));
	n->mem = mem;
	mem->on_free = on_free;
	mem->free_ctx = n;
	n->req_io = (struct rr_conn_io){
		.ctx = n, .reg = r_reg, .unreg = r_unreg, .inv = r_inv, .slot_get = r_slot_get,
		.slot_put = r_slot_put, .send = r_send, .read = r_read,
		.post_recv = r_post_recv, .lend = r_lend, .unlend = r_unlend,
		.complete = r_complete, .close = r_close,
	};
}

static void qp_init(struct vt_conn *c, int side, const struct vt_side_cfg *cf)
{
	struct vt_qp *q = &c->qp[side];

	q->conn = c;
	q->side = (uint8_t)side;
	q->nrecv = cf->nrecv;
	q->rsize = cf->rsize;
	q->nsend = cf->nsend;
	q->ssize = cf->ssize;
	q->ord = cf->ord;
	q->rbuf = calloc(cf->nrecv, cf->rsize);
	q->rstate = calloc(cf->nrecv, 1);
	q->rfifo = calloc(cf->nrecv, sizeof(uint32_t));
	q->sbuf = calloc(cf->nsend, cf->ssize);
	q->sstate = calloc(cf->nsend, 1);
	q->sfree = calloc(cf->nsend, sizeof(uint32_t));
	if (!q->rbuf || !q->rstate || !q->rfifo || !q->sbuf || !q->sstate || !q->sfree)
		abort();
	for (uint32_t i = 0; i < cf->nrecv; i++) {
		q->rstate[i] = VT_R_POSTED;
		q->rfifo[i] = i;
	}
	q->rcount = cf->nrecv;
	for (uint32_t i = 0; i < cf->nsend; i++)
		q->sfree[i] = cf->nsend - 1 - i;
	q->nsfree = cf->nsend;
	if (side == VT_RSP) {
		q->io = vt_rsp_io;
		q->io.ctx = q;
	}
}

struct vt_conn *vt_net_connect(struct vt_net *n)
{
	struct vt_conn *c = calloc(1, sizeof(*c));

	if (!c)
		abort();
	c->net = n;
	c->epoch = ++n->epochs;
	c->grant = 1;   /* RFC 8166 section 4.3.3: one before the first Reply */
	qp_init(c, VT_REQ, &n->cfg[VT_REQ]);
	qp_init(c, VT_RSP, &n->cfg[VT_RSP]);
	c->next = n->conns;
	n->conns = c;
	n->cur = c;
	TRACE(n, "connect epoch %u", c->epoch);
	return c;
}

/* An operation that will not be delivered: its issuer's completion is a
 * flush (the slot of a Send comes back with it). */
static void flush_op(struct vt_conn *c, struct vt_op *op)
{
	struct vt_qp *from = &c->qp[op->from];

	if (op->kind == VT_OP_SEND)
		cq_push(from, VT_CQ_SEND, op->token, op->slot, 0, VT_FLUSH);
	else if (op->kind == VT_OP_READ || op->kind == VT_OP_RESP)
		cq_push(from, VT_CQ_READ, op->token, 0, 0, VT_FLUSH);
	free(op->data);
	free(op);
}

void vt_net_break(struct vt_net *n, struct vt_conn *c)
{
	struct vt_op *op;

	if (c->broken)
		return;
	TRACE(n, "break epoch %u", c->epoch);
	c->broken = true;
	for (int i = 0; i < 2; i++) {
		while ((op = fifo_pop(&c->ops[i])) != NULL)
			flush_op(c, op);
		while ((op = fifo_pop(&c->resp[i])) != NULL)
			flush_op(c, op);
	}
}

void vt_net_down(struct vt_net *n, struct vt_conn *c, int side)
{
	struct vt_qp *q = &c->qp[side];
	struct vt_cqe *e;

	if (q->down)
		return;
	TRACE(n, "%s down epoch %u", side_name(side), c->epoch);
	q->down = true;
	if (q->up && q->sess)
		rr_conn_down(q->sess);
	for (int cl = 0; cl < VT_CQ_N; cl++)
		while ((e = cq_pop(q, cl)) != NULL) {
			if (cl == VT_CQ_SEND)
				slot_free(q, e->slot);
			if (cl == VT_CQ_RECV)
				q->rstate[e->slot] = VT_R_IDLE;
			free(e);
		}
	if (side == VT_REQ && n->cur == c)
		n->cur = NULL;
	if (vt_net_registered(n, side, c->epoch))
		FAIL(n, "%u %s registrations of epoch %u left after rr_conn_down",
		     vt_net_registered(n, side, c->epoch), side_name(side), c->epoch);
	for (uint32_t i = 0; i < q->nsend; i++)
		if (q->sstate[i] != VT_S_FREE)
			FAIL(n, "%s send slot %u still %s after rr_conn_down", side_name(side), i,
			     q->sstate[i] == VT_S_HELD ? "held by the session" : "posted");
}

bool vt_net_reap(struct vt_net *n, struct vt_conn *c)
{
	struct vt_conn **pp;

	if (!c->qp[VT_REQ].down || !c->qp[VT_RSP].down || c->qp[VT_RSP].sess ||
	    c->qp[VT_REQ].lent || n->cur == c)
		return false;
	for (pp = &n->conns; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	for (int i = 0; i < 2; i++) {
		struct vt_qp *q = &c->qp[i];

		free(q->rbuf);
		free(q->rstate);
		free(q->rfifo);
		free(q->sbuf);
		free(q->sstate);
		free(q->sfree);
	}
	free(c->done);
	free(c);
	return true;
}

void vt_net_fini(struct vt_net *n)
{
	while (n->conns) {
		struct vt_conn *c = n->conns;

		vt_net_break(n, c);
		for (int i = 0; i < 2; i++) {
			struct vt_cqe *e;

			c->qp[i].down = true;
			for (int cl = 0; cl < VT_CQ_N; cl++)
				while ((e = cq_pop(&c->qp[i], cl)) != NULL)
					free(e);
		}
		c->qp[VT_RSP].sess = NULL;
		c->qp[VT_REQ].lent = 0;
		n->cur = NULL;
		vt_net_reap(n, c);
	}
	free(n->regs);
	free(n->active);
	n->regs = NULL;
	n->active = NULL;
	n->nregs = n->nactive = 0;
}

/* ---- delivery ---- */

enum acc_res { ACC_OK, ACC_GONE, ACC_BAD };

/* Whether @stag names a registration of side @t on this connection that is
 * still valid; *@why when not. */
static enum acc_res stag_state(struct vt_net *n, struct vt_conn *c, int t, uint32_t stag,
			       struct vt_reg **out, const char **why)
{
	struct vt_reg *r = vt_net_reg(n, stag);

	*out = r;
	if (!r) {
		*why = "unknown STag";
		return ACC_BAD;
	}
	if (r->side != t || r->epoch != c->epoch) {
		*why = "STag of another connection or side";
		return ACC_BAD;
	}
	if (!r->registered || r->invalid) {
		*why = !r->registered ? "deregistered STag" : "invalidated STag";
		return ACC_GONE;
	}
	return ACC_OK;
}

/* The same for an access of @len bytes at @to with right @acc. */
static enum acc_res acc_check(struct vt_net *n, struct vt_conn *c, int t, uint32_t stag,
			      uint64_t to, uint32_t len, unsigned acc, struct vt_reg **out,
			      const char **why)
{
	enum acc_res a = stag_state(n, c, t, stag, out, why);
	struct vt_reg *r = *out;

	if (a != ACC_OK)
		return a;
	if (!(r->access & acc)) {
		*why = "access right missing";
		return ACC_BAD;
	}
	if (to < r->to || to - r->to > r->len || len > r->len - (to - r->to)) {
		*why = "out of bounds";
		return ACC_BAD;
	}
	return ACC_OK;
}

/* A remote access to an STag that is no longer valid: the real provider
 * ends the connection; the protocol allows it only for the memory of an
 * aborted Call or of a Read-chunk Reply fenced by its timeout. */
static void gone(struct vt_net *n, struct vt_conn *c, struct vt_reg *r, const char *why,
		 const char *what)
{
	if (!may_be_gone(n, r))
		FAIL(n, "%s to %s STag %#x (xid %#x) %s%s", what, side_name(r->side), r->stag,
		     r->xid, why, r->side == VT_REQ ? " of a Call not aborted"
						  : " not fenced by the timeout");
	n->legit_fatal++;
	TRACE(n, "fatal (allowed): %s to %#x %s", what, r->stag, why);
	vt_net_break(n, c);
}

static void bad(struct vt_net *n, struct vt_reg *r, uint32_t stag, const char *why,
		const char *what)
{
	FAIL(n, "%s names STag %#x (%s, xid %#x): %s", what, stag,
	     r ? side_name(r->side) : "none", r ? r->xid : 0, why);
}

static void deliver_write(struct vt_net *n, struct vt_conn *c, int t, struct vt_op *op)
{
	struct vt_reg *r, *src = op->src_stag ? vt_net_reg(n, op->src_stag) : NULL;
	const char *why;
	enum acc_res a;

	if (op->src_stag && (!src || !src->registered || !vt_mem_find(n->mem, op->src, op->len)))
		FAIL(n, "RDMA Write of the %s reads memory deregistered or freed before its "
			"Send completed (STag %#x)", side_name(op->from), op->src_stag);
	a = acc_check(n, c, t, op->stag, op->to, op->len, RR_XPRT_ACC_REMOTE_WRITE, &r, &why);
	if (a == ACC_BAD)
		bad(n, r, op->stag, why, "RDMA Write");
	if (a == ACC_GONE) {
		gone(n, c, r, why, "RDMA Write");
		return;
	}
	if (!vt_mem_find(n->mem, r->base + (op->to - r->to), op->len))
		FAIL(n, "RDMA Write into freed memory under STag %#x", r->stag);
	memcpy(r->base + (op->to - r->to), op->src_stag ? op->src : zeros, op->len);
	n->writes++;
}

static void deliver_read(struct vt_net *n, struct vt_conn *c, int t, struct vt_op *op)
{
	struct vt_reg *r;
	const char *why;
	enum acc_res a = acc_check(n, c, t, op->stag, op->to, op->len, RR_XPRT_ACC_REMOTE_READ,
				   &r, &why);

	if (a == ACC_BAD)
		bad(n, r, op->stag, why, "RDMA Read");
	if (a == ACC_GONE) {
		uint64_t token = op->token;

		gone(n, c, r, why, "RDMA Read");
		/* the Read's own completion is an error, not a flush */
		cq_push(&c->qp[!t], VT_CQ_READ, token, 0, 0, -EIO);
		free(op);
		return;
	}
	if (!vt_mem_find(n->mem, r->base + (op->to - r->to), op->len))
		FAIL(n, "RDMA Read of freed memory under STag %#x", r->stag);
	op->data = malloc(op->len ? op->len : 1);
	if (!op->data)
		abort();
	memcpy(op->data, r->base + (op->to - r->to), op->len);
	op->kind = VT_OP_RESP;
	fifo_push(&c->resp[!t], op);
}

static void deliver_resp(struct vt_net *n, struct vt_conn *c, int t, struct vt_op *op)
{
	struct vt_reg *r = vt_net_reg(n, op->dst_stag);

	if (!r || !r->registered || op->dst < r->base || op->dst + op->len > r->base + r->len ||
	    !vt_mem_find(n->mem, op->dst, op->len))
		FAIL(n, "Read Response for the %s lands in memory deregistered or freed while "
			"its Read was outstanding (STag %#x)", side_name(t), op->dst_stag);
	memcpy(op->dst, op->data, op->len);
	cq_push(&c->qp[t], VT_CQ_READ, op->token, 0, 0, 0);
	free(op->data);
	free(op);
}

/* Send With Invalidate: the receiver invalidates @stag, one of its own
 * windows exposed for this XID. Returns false when the connection ended. */
static bool remote_inv(struct vt_net *n, struct vt_conn *c, int t, struct vt_op *op)
{
	struct vt_reg *r;
	const char *why;
	enum acc_res a = stag_state(n, c, t, op->inv_stag, &r, &why);

	if (a == ACC_GONE) {
		gone(n, c, r, why, "Send With Invalidate");
		return false;
	}
	if (a == ACC_BAD)
		bad(n, r, op->inv_stag, why, "Send With Invalidate");
	if (!r->window)
		bad(n, r, op->inv_stag, "not a window", "Send With Invalidate");
	if (r->has_xid && r->xid != op->xid)
		FAIL(n, "Send With Invalidate for xid %#x names STag %#x of xid %#x", op->xid,
		     r->stag, r->xid);
	r->invalid = true;
	r->remote_inv = true;
	n->swi++;
	return true;
}

static void deliver_send(struct vt_net *n, struct vt_conn *c, int t, struct vt_op *op)
{
	struct vt_qp *q = &c->qp[t], *from = &c->qp[!t];
	const uint8_t *sb = from->sbuf + (size_t)op->slot * from->ssize;
	uint32_t idx;
	uint8_t *rb;

	if ((from->sstate[op->slot] != VT_S_POSTED && from->sstate[op->slot] != VT_S_QUIET) ||
	    checksum(sb, op->len) != op->sum)
		FAIL(n, "%s send slot %u changed before its Send went", side_name(!t), op->slot);
	if (op->len > q->rsize)
		FAIL(n, "%s sends %u bytes to Receives of %u", side_name(!t), op->len, q->rsize);
	if (op->inv && !remote_inv(n, c, t, op)) {
		flush_op(c, op);   /* the connection ended: the Send never completes */
		return;
	}
	if (!q->rcount)
		FAIL(n, "Receive overrun: the %s's Send (xid %#x, proc %u) finds no Receive "
			"posted by the %s (epoch %u, %u Receives, %u completions not yet run)",
		     side_name(!t), op->xid, op->len >= 16 ? rr_get_be32(sb + 12) : 99,
		     side_name(t), c->epoch, q->nrecv, q->cq[VT_CQ_RECV].n);
	idx = q->rfifo[q->rhead];
	q->rhead = (q->rhead + 1) % q->nrecv;
	q->rcount--;
	q->rstate[idx] = VT_R_ARRIVED;
	rb = q->rbuf + (size_t)idx * q->rsize;
	memcpy(rb, sb, op->len);
	cq_push(from, VT_CQ_SEND, op->token, op->slot, 0, 0);
	cq_push(q, VT_CQ_RECV, 0, idx, op->inv ? op->inv_stag : 0, 0);
	q->cq[VT_CQ_RECV].tail->len = op->len;
	q->cq[VT_CQ_RECV].tail->inv = op->inv;
	n->recvs++;
	free(op);
}

/* The session hears of a Receive (as the executor's completion handler
 * calls rr_conn_on_recv); it must repost or lend it before it returns. */
static void complete_recv(struct vt_net *n, struct vt_qp *q, struct vt_cqe *e)
{
	uint32_t idx = e->slot;
	uint8_t *rb = q->rbuf + (size_t)idx * q->rsize;

	if (q->rstate[idx] != VT_R_ARRIVED)
		FAIL(n, "%s Receive %u completes in state %d", side_name(q->side), idx,
		     q->rstate[idx]);
	if (q->closing || !q->up) {
		q->rstate[idx] = VT_R_IDLE;   /* the executor ignores it */
		return;
	}
	if (q->side == VT_REQ && e->len >= 20 && rr_get_be32(rb + 12) == RR_HDR_NOMSG &&
	    rr_get_be32(rb + 16) == 1)
		owed(q->conn, rr_get_be32(rb))->owed++;   /* a Read-chunk Reply */
	if (q->side == VT_REQ && e->len >= 16) {
		/* a Reply frees a credit and sets the grant: 0 counts as 1,
		 * more than requested as the request */
		uint32_t g = rr_get_be32(rb + 8);

		q->conn->replies++;
		q->conn->grant = RR_MIN(RR_MAX(g, 1u), n->cfg[VT_REQ].credits);
	}
	q->rstate[idx] = VT_R_HELD;
	rr_conn_on_recv(q->sess, idx, rb, e->len, e->inv, e->stag);
	if (q->rstate[idx] == VT_R_HELD)
		FAIL(n, "%s neither reposted nor lent Receive %u", side_name(q->side), idx);
}

void vt_net_deliver(struct vt_net *n, struct vt_conn *c, int t, bool resp)
{
	struct vt_op *op = fifo_pop(resp ? &c->resp[t] : &c->ops[t]);

	if (!op || c->broken)
		FAIL(n, "delivery on an empty or broken wire");
	TRACE(n, "deliver to %s: %s len %u", side_name(t),
	      (const char *[]){"WRITE", "SEND", "READ", "RESP"}[op->kind], op->len);
	switch (op->kind) {
	case VT_OP_WRITE:
		deliver_write(n, c, t, op);
		free(op);
		break;
	case VT_OP_SEND:
		deliver_send(n, c, t, op);
		break;
	case VT_OP_READ:
		deliver_read(n, c, t, op);
		break;
	case VT_OP_RESP:
		deliver_resp(n, c, t, op);
		break;
	}
}

/* ---- completions ---- */

static void complete_inv(struct vt_net *n, struct vt_qp *q, struct vt_cqe *e)
{
	struct vt_reg *r = vt_net_reg(n, e->stag);

	r->inv_posted = false;
	if (r->registered && !r->invalid) {
		r->invalid = true;
		rr_conn_on_work(q->sess, e->token, 0);
		return;
	}
	/* invalid already: the RNIC fails the work request */
	if (!may_be_gone(n, r))
		FAIL(n, "%s Local Invalidate of STag %#x (xid %#x) executes on a %s STag",
		     side_name(q->side), r->stag, r->xid,
		     r->registered ? "remotely invalidated" : "deregistered");
	n->legit_fatal++;
	rr_conn_on_work(q->sess, e->token, -EIO);
	do_close(q);
}

void vt_net_complete(struct vt_net *n, struct vt_qp *q, int cl)
{
	struct vt_cqe *e = cq_pop(q, cl);
	bool quiet = false;

	if (!e || q->down)
		FAIL(n, "completion from an empty queue or a connection that is down");
	TRACE(n, "%s completion %s status %d", side_name(q->side),
	      (const char *[]){"SEND", "READ", "INV", "RECV"}[cl], e->status);
	if (cl == VT_CQ_RECV) {
		complete_recv(n, q, e);
		free(e);
		return;
	}
	if (cl == VT_CQ_SEND) {
		if (q->sstate[e->slot] != VT_S_POSTED && q->sstate[e->slot] != VT_S_QUIET)
			FAIL(n, "completion of slot %u not posted", e->slot);
		quiet = q->sstate[e->slot] == VT_S_QUIET;
		slot_free(q, e->slot);
	} else if (cl == VT_CQ_READ && q->reads_out) {
		q->reads_out--;
	}
	if (e->status == VT_FLUSH) {
		/* a flushed work request: the executor ends the connection */
		q->closing = true;
	} else if (!q->closing && q->up) {
		if (cl == VT_CQ_SEND) {
			if (!quiet)   /* a quiet Send is never told */
				rr_conn_on_send(q->sess, e->token, 0);
		} else if (cl == VT_CQ_READ) {
			rr_conn_on_work(q->sess, e->token, e->status);
			if (e->status)
				do_close(q);
		} else {
			complete_inv(n, q, e);
		}
	} else if (cl == VT_CQ_INV) {
		/* executed, but the executor tells the session nothing */
		struct vt_reg *r = vt_net_reg(n, e->stag);

		r->inv_posted = false;
		if (e->status != VT_FLUSH && r->registered)
			r->invalid = true;
	}
	free(e);
}

/* ---- queries ---- */

unsigned vt_net_registered(const struct vt_net *n, int side, uint32_t epoch)
{
	unsigned k = 0;

	for (uint32_t i = 0; i < n->nactive; i++) {
		const struct vt_reg *r = vt_net_reg(n, n->active[i]);

		k += r->side == side && (epoch == UINT32_MAX || r->epoch == epoch);
	}
	return k;
}

unsigned vt_net_live_remote(const struct vt_net *n, int side, uint32_t epoch)
{
	unsigned k = 0;

	for (uint32_t i = 0; i < n->nactive; i++) {
		const struct vt_reg *r = vt_net_reg(n, n->active[i]);

		k += r->side == side && r->epoch == epoch && !r->invalid && !r->inv_posted &&
		     (r->access & (RR_XPRT_ACC_REMOTE_READ | RR_XPRT_ACC_REMOTE_WRITE));
	}
	return k;
}

uint32_t vt_net_xid_valid_stag(const struct vt_net *n, uint32_t xid)
{
	for (uint32_t i = 0; i < n->nactive; i++) {
		const struct vt_reg *r = vt_net_reg(n, n->active[i]);

		if (r->side == VT_REQ && r->has_xid && r->xid == xid && !r->invalid)
			return r->stag;
	}
	return 0;
}

uint32_t vt_net_reg_over(const struct vt_net *n, int side, const void *p, size_t len)
{
	for (uint32_t i = 0; i < n->nactive; i++) {
		const struct vt_reg *r = vt_net_reg(n, n->active[i]);

		if (r->side == side && (const uint8_t *)p < r->base + (r->len ? r->len : 1) &&
		    (const uint8_t *)p + len > r->base)
			return r->stag;
	}
	return 0;
}
