/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The scheduler and the upper layers of the virtual-time session test
 * (vt_world.h). The requester's upper layer submits Calls whose shapes
 * (sizes, DDP-eligible items, result sinks, reply size bounds) are drawn
 * from the XID so that all forms occur -- Short, Read chunks, Long Call,
 * Write chunks, Reply chunk, Read-chunk Replies -- and checks each
 * completion; the responder's upper layer checks each delivered Call byte
 * for byte and answers it with a Reply derived from the same XID. The
 * invariants (RFC 8166 and docs/protocol.md; the full list in
 * docs/testing.md):
 *   - on the wire (vt_net.c): no Receive overrun, no Call beyond the grant,
 *     one RDMA_DONE per Read-chunk Reply, no access beyond what the peer
 *     exposed, no memory freed or deregistered while the wire still uses it;
 *   - every submitted Call completes exactly once, with a status it may
 *     have (0 with the Reply's exact bytes; -EREMOTEIO only when an
 *     RDMA_ERROR for it went on the wire; the abort status only when it
 *     was aborted; -ENOMEM only when allocations may fail); after the
 *     drain, all have completed;
 *   - every STag a Call exposed is invalid when it completes, and nothing
 *     is registered over its memory any more;
 *   - io->sent comes exactly once per Reply rr_conn_reply posted (1),
 *     never otherwise;
 *   - the session never counts fewer live STags than the wire has;
 *   - at rest after the drain, and after the destruction of both sessions:
 *     no slot, Receive, registration, Read-chunk Reply byte or allocation
 *     of the sessions left. */
#include "conn/vt_world.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "conn/vt_net.h"

#define VT_MAX_ITEMS 3u
#define VT_MAX_CALLS 160u
#define VT_RING 64u
#define VT_LINE 200u

struct vt_spec {
	uint32_t body;                 /* bytes after the RPC header (4k) */
	unsigned nitems;
	uint32_t item[VT_MAX_ITEMS];   /* DDP-eligible argument items */
	uint32_t gap[VT_MAX_ITEMS];    /* bytes after each item (4k) */
	unsigned nsinks;
	uint32_t sink[VT_MAX_ITEMS];   /* result sinks */
	uint32_t max_reply, min_reply;
	bool max_unknown;
	uint32_t rbody;                /* the Reply's bytes after its header */
	uint32_t ritem[VT_MAX_ITEMS];  /* one result per sink */
};

struct vt_call {
	uint32_t xid;
	struct vt_spec sp;
	struct rr_conn_rpc rpc;
	struct rr_xprt_part parts[1 + 2 * VT_MAX_ITEMS];
	struct rr_xprt_sink sinks[VT_MAX_ITEMS];
	uint8_t *buf[1 + 3 * VT_MAX_ITEMS];     /* parts, then sinks */
	uint32_t blen[1 + 3 * VT_MAX_ITEMS];
	unsigned nbuf;
	bool completed;
	struct vt_call *next;
};

enum { Q_DELIVERED, Q_REPLYING, Q_SENT };

struct vt_rsp;

struct vt_req {
	struct rr_conn_sreq *r;
	struct vt_rsp *rsp;
	int state;
	struct rr_xprt_part parts[1 + VT_MAX_ITEMS];
	uint8_t *buf[1 + VT_MAX_ITEMS];
	unsigned nparts;
	struct vt_req *next;
};

struct vt_rsp {
	struct rr_conn *sess;
	struct vt_conn *conn;
	bool ord_set;
	struct vt_req *reqs;
	struct vt_rsp *next;
};

enum {
	XF_SUBMITTED = 1, XF_ABORTED = 2, XF_ERR = 4, XF_SENT = 8,
	XF_CANCELED = 16,   /* rr_conn_abort_all(-ECANCELED) was called */
	XF_FAILQ = 32,      /* rr_conn_fail_queued(-ECONNRESET) was called */
};

struct vt_cfg {
	uint32_t credits[2], send[2], recv[2];
	bool windows[2], rrep[2];
	uint16_t ord[2];
	uint32_t rrep_max;
	uint64_t rrep_timeout_ns, send_timeout_ns, reply_mem_per_conn, reply_mem_total;
	uint32_t max_seg_len;
	bool inline_ddp;
	unsigned fail_permille;
	unsigned calls;
	unsigned max_losses;
	bool retry_replies;           /* retry rr_conn_reply after -ENOBUFS/-ENOMEM
					 (else refuse, as src/rpc/svc.c does) */
	uint32_t tc, tr;              /* call and reply inline thresholds */
	bool share_spares;            /* the responders share freed objects
					 (rr_conn_config.spares; odd seeds) */
	/* the weight of each kind of event, drawn per seed ("swarm"): a
	 * channel or a queue that is slow in one run is fast in another */
	unsigned wops[2], wresp[2], wcq[2][VT_CQ_N], wdown, wsubmit, wreply, wrefuse, wdone,
		wrelease, wabort, wtime, wlose, wconnect, word, wdestroy, wdrop, wabortall,
		wfailq;
};

struct vt_world {
	uint64_t seed, rng;
	const struct vt_opts *o;
	struct vt_cfg cfg;
	struct vt_mem mem;
	struct vt_net net;
	struct rr_xprt_stats st[2];
	struct rr_conn *R;
	struct vt_rsp *rsps;
	struct vt_call *calls;        /* submitted, not released */
	unsigned ncalls, npending, losses;
	uint32_t xid_base;
	uint8_t xflags[VT_MAX_CALLS];
	struct rr_conn_failed failed;
	struct rr_conn_spares spares;  /* every responder's, when cfg.share_spares */
	uint64_t reply_mem_used;
	uint32_t drop_epoch;          /* a Call was dropped on that connection */
	unsigned long step;
	bool draining, destroying;
	struct vt_result *res;
	uint8_t *scratch;
	size_t scratch_len;
	jmp_buf jb;
	char msg[1024];
	char ring[VT_RING][VT_LINE];
	unsigned rpos;
};

/* ---- randomness, reporting ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9e3779b97f4a7c15ull;
	return mix64(*s);
}

/* Uniform in [lo, hi]. */
static uint32_t rrange(uint64_t *s, uint32_t lo, uint32_t hi)
{
	return hi <= lo ? lo : lo + (uint32_t)(rnd(s) % ((uint64_t)hi - lo + 1));
}

static bool chance(uint64_t *s, unsigned percent)
{
	return rnd(s) % 100 < percent;
}

static void trace(void *ctx, const char *fmt, ...)
{
	struct vt_world *w = ctx;
	char *line = w->ring[w->rpos++ % VT_RING];
	va_list ap;
	int n = snprintf(line, VT_LINE, "[%lu] ", w->step);

	va_start(ap, fmt);
	vsnprintf(line + n, VT_LINE - (size_t)n, fmt, ap);
	va_end(ap);
	if (w->o->trace)
		printf("    %s\n", line);
}

__attribute__((noreturn, format(printf, 2, 3))) static void fail(void *ctx, const char *fmt, ...)
{
	struct vt_world *w = ctx;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
	longjmp(w->jb, 1);
}

#define FAIL(w, ...) fail((w), __VA_ARGS__)

/* ---- the shapes of Calls and Replies, from the XID ---- */

static uint32_t size_class(uint64_t *s, uint32_t t)
{
	unsigned k = (unsigned)(rnd(s) % 100);

	if (k < 40)
		return rrange(s, 0, t / 2);
	if (k < 70)
		return rrange(s, t / 2, 2 * t);
	if (k < 95)
		return rrange(s, 2 * t, 6 * t);
	return rrange(s, 6 * t, 60000);
}

static void spec_make(const struct vt_world *w, uint32_t xid, struct vt_spec *sp)
{
	uint64_t s = mix64(w->seed ^ ((uint64_t)xid << 17));
	uint32_t tc = w->cfg.tc, tr = w->cfg.tr;

	memset(sp, 0, sizeof(*sp));
	sp->body = size_class(&s, tc) & ~3u;
	if (chance(&s, 45)) {
		sp->nitems = rrange(&s, 1, VT_MAX_ITEMS);
		for (unsigned i = 0; i < sp->nitems; i++) {
			sp->item[i] = chance(&s, 5)    ? 0 :
				      chance(&s, 50) ? rrange(&s, 1, tc / 4) :
						       rrange(&s, tc / 2, 4 * tc);
			sp->gap[i] = chance(&s, 50) ? 0 : rrange(&s, 0, 64) & ~3u;
		}
	}
	if (chance(&s, 50)) {
		sp->nsinks = rrange(&s, 1, VT_MAX_ITEMS);
		for (unsigned i = 0; i < sp->nsinks; i++)
			sp->sink[i] = chance(&s, 50) ? rrange(&s, 1, tr / 4) : rrange(&s, tr / 4, 3 * tr);
	}
	sp->max_reply = 8 + (size_class(&s, tr) & ~3u);
	sp->max_unknown = chance(&s, 20);
	sp->min_reply = rrange(&s, 8, sp->max_reply);
	sp->rbody = chance(&s, 30) ? sp->max_reply - 8 : rrange(&s, 0, sp->max_reply - 8) & ~3u;
	if (sp->max_unknown && chance(&s, 30))   /* only a ceiling: larger Replies come */
		sp->rbody = rrange(&s, sp->max_reply, RR_MIN(4 * sp->max_reply, 60000u)) & ~3u;
	for (unsigned i = 0; i < sp->nsinks; i++)
		sp->ritem[i] = chance(&s, 10) ? 0 :
			       chance(&s, 30) ? sp->sink[i] : rrange(&s, 1, sp->sink[i]);
}

/* The bytes of piece @salt of @xid: a pattern that differs per XID, piece
 * and offset. */
static void fill(uint8_t *p, uint32_t len, uint32_t xid, uint32_t salt)
{
	uint32_t x = (uint32_t)mix64(((uint64_t)xid << 8) ^ salt);

	for (uint32_t i = 0; i < len; i++) {
		if ((i & 3) == 0)
			x = x * 1664525u + 1013904223u;
		p[i] = (uint8_t)(x >> (8 * (i & 3)));
	}
}

static uint8_t *scratch(struct vt_world *w, size_t len)
{
	if (w->scratch_len < len) {
		free(w->scratch);
		w->scratch = malloc(len);
		if (!w->scratch)
			abort();
		w->scratch_len = len;
	}
	return w->scratch;
}

/* The Call's XDR stream as the responder must rebuild it. */
static uint32_t call_stream(struct vt_world *w, uint32_t xid, const struct vt_spec *sp,
			    uint8_t **out)
{
	uint32_t len = 8 + sp->body, off;
	uint8_t *b;

	for (unsigned i = 0; i < sp->nitems; i++)
		len += (uint32_t)RR_ALIGN4(sp->item[i]) + sp->gap[i];
	b = scratch(w, len);
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, 0);   /* CALL */
	fill(b + 8, sp->body, xid, 1);
	off = 8 + sp->body;
	for (unsigned i = 0; i < sp->nitems; i++) {
		fill(b + off, sp->item[i], xid, 10 + i);
		memset(b + off + sp->item[i], 0, RR_ALIGN4(sp->item[i]) - sp->item[i]);
		off += (uint32_t)RR_ALIGN4(sp->item[i]);
		fill(b + off, sp->gap[i], xid, 20 + i);
		off += sp->gap[i];
	}
	*out = b;
	return len;
}

/* ---- the requester's upper layer ---- */

static void call_free(struct vt_world *w, struct vt_call *k)
{
	for (unsigned i = 0; i < k->nbuf; i++)
		vt_mem_free(&w->mem, k->buf[i]);
	vt_mem_free(&w->mem, k);
}

static uint8_t *call_buf(struct vt_world *w, struct vt_call *k, uint32_t len)
{
	k->blen[k->nbuf] = len;
	return k->buf[k->nbuf++] = vt_mem_alloc(&w->mem, len ? len : 1);
}

static struct vt_call *call_new(struct vt_world *w, uint32_t xid)
{
	struct vt_call *k = vt_mem_alloc(&w->mem, sizeof(*k));
	struct vt_spec *sp = &k->sp;
	unsigned np = 0;
	uint8_t *b;

	k->xid = xid;
	spec_make(w, xid, sp);
	b = call_buf(w, k, 8 + sp->body);
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, 0);
	fill(b + 8, sp->body, xid, 1);
	k->parts[np++] = (struct rr_xprt_part){b, 8 + sp->body, false};
	for (unsigned i = 0; i < sp->nitems; i++) {
		b = call_buf(w, k, sp->item[i]);
		fill(b, sp->item[i], xid, 10 + i);
		k->parts[np++] = (struct rr_xprt_part){b, sp->item[i], true};
		if (sp->gap[i]) {
			b = call_buf(w, k, sp->gap[i]);
			fill(b, sp->gap[i], xid, 20 + i);
			k->parts[np++] = (struct rr_xprt_part){b, sp->gap[i], false};
		}
	}
	for (unsigned i = 0; i < sp->nsinks; i++)
		k->sinks[i] = (struct rr_xprt_sink){call_buf(w, k, sp->sink[i]), sp->sink[i]};
	k->rpc.xid = xid;
	k->rpc.parts = k->parts;
	k->rpc.nparts = np;
	k->rpc.sinks = sp->nsinks ? k->sinks : NULL;
	k->rpc.nsinks = sp->nsinks;
	k->rpc.max_reply = sp->max_reply;
	k->rpc.min_reply = sp->min_reply;
	k->rpc.max_unknown = sp->max_unknown;
	k->rpc.user = k;
	return k;
}

static unsigned xno(const struct vt_world *w, uint32_t xid)
{
	return xid - w->xid_base;
}

static bool xid_aborted(void *ctx, uint32_t xid)
{
	struct vt_world *w = ctx;

	return xno(w, xid) < VT_MAX_CALLS && (w->xflags[xno(w, xid)] & XF_ABORTED);
}

static void err_sent(void *ctx, uint32_t xid)
{
	struct vt_world *w = ctx;

	if (xno(w, xid) < VT_MAX_CALLS)
		w->xflags[xno(w, xid)] |= XF_ERR;
	w->res->err_chunk++;
}

static void call_sent(void *ctx, uint32_t xid)
{
	struct vt_world *w = ctx;

	if (xno(w, xid) < VT_MAX_CALLS)
		w->xflags[xno(w, xid)] |= XF_SENT;
}

/* A successful Call: the reduced Reply and the placed results are exactly
 * what the responder answered. */
static void check_reply(struct vt_world *w, struct vt_call *k)
{
	const struct vt_spec *sp = &k->sp;
	struct rr_conn_rpc *rpc = &k->rpc;
	uint32_t len = 8 + sp->rbody, off;
	uint8_t *b, *item = NULL;

	for (unsigned i = 0; i < sp->nsinks; i++)
		if (!rpc->is_placed[i])
			len += (uint32_t)RR_ALIGN4(sp->ritem[i]);
	if (!rpc->reply || rpc->reply_len != len)
		FAIL(w, "xid %#x: Reply of %u bytes, %u expected", k->xid, rpc->reply_len, len);
	if (!vt_mem_find(&w->mem, rpc->reply, rpc->reply_len) && !rpc->lent)
		FAIL(w, "xid %#x: Reply not in live memory", k->xid);
	b = scratch(w, len + 60000 + 8);
	rr_put_be32(b, k->xid);
	rr_put_be32(b + 4, 1);   /* REPLY */
	fill(b + 8, sp->rbody, k->xid, 2);
	off = 8 + sp->rbody;
	for (unsigned i = 0; i < sp->nsinks; i++) {
		item = b + len;
		fill(item, sp->ritem[i], k->xid, 30 + i);
		if (rpc->is_placed[i]) {
			if (rpc->placed[i] != sp->ritem[i] ||
			    memcmp(k->sinks[i].base, item, sp->ritem[i]))
				FAIL(w, "xid %#x: result %u placed %u bytes (%u expected) or "
					"wrong bytes", k->xid, i, rpc->placed[i], sp->ritem[i]);
			continue;
		}
		memcpy(b + off, item, sp->ritem[i]);
		memset(b + off + sp->ritem[i], 0, RR_ALIGN4(sp->ritem[i]) - sp->ritem[i]);
		off += (uint32_t)RR_ALIGN4(sp->ritem[i]);
	}
	if (memcmp(rpc->reply, b, len))
		FAIL(w, "xid %#x: the Reply's bytes differ from what the responder sent", k->xid);
}

static void on_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct vt_world *w = ctx;
	struct vt_call *k = rpc->user;
	uint8_t f = w->xflags[xno(w, k->xid)];
	uint32_t stag;
	int st = rpc->status;

	trace(w, "complete xid %#x status %d%s", k->xid, st, rpc->via_read ? " (pulled)" : "");
	if (k->completed)
		FAIL(w, "xid %#x completed twice", k->xid);
	k->completed = true;
	w->npending--;
	stag = vt_net_xid_valid_stag(&w->net, k->xid);
	if (stag)
		FAIL(w, "xid %#x completes with its STag %#x still valid", k->xid, stag);
	for (unsigned i = 0; i < k->nbuf; i++) {
		stag = vt_net_reg_over(&w->net, VT_REQ, k->buf[i], k->blen[i]);
		if (stag)
			FAIL(w, "xid %#x completes with STag %#x still registered over its memory",
			     k->xid, stag);
	}
	if (st == 0)
		check_reply(w, k);
	else if (!((st == -EREMOTEIO && (f & XF_ERR)) || (st == -ETIMEDOUT && (f & XF_ABORTED)) ||
		   (st == -ENOMEM && w->cfg.fail_permille) ||
		   (st == -ECANCELED && (w->destroying || (f & XF_CANCELED))) ||
		   (st == -ECONNRESET && (f & XF_FAILQ))))
		FAIL(w, "xid %#x completes with status %d (%s%s)", k->xid, st,
		     f & XF_ERR ? "RDMA_ERROR sent" : "no RDMA_ERROR sent",
		     f & XF_ABORTED ? ", aborted" : "");
	if (st == 0)
		w->res->completed_ok++;
	else
		w->res->completed_err++;
}

static void submit(struct vt_world *w)
{
	uint32_t xid = w->xid_base + w->ncalls;
	struct vt_call *k = call_new(w, xid);
	int rc;

	w->xflags[w->ncalls++] = XF_SUBMITTED;
	w->npending++;
	k->next = w->calls;
	w->calls = k;
	trace(w, "submit xid %#x body %u items %u sinks %u max_reply %u%s", xid, k->sp.body,
	      k->sp.nitems, k->sp.nsinks, k->sp.max_reply, k->sp.max_unknown ? " unknown" : "");
	rc = rr_conn_submit(w->R, &k->rpc);
	if (rc == 0) {
		w->res->calls++;
		return;
	}
	trace(w, "submit xid %#x: %d", xid, rc);
	if (k->completed)
		FAIL(w, "xid %#x: submit failed (%d) but the Call completed", xid, rc);
	if (rc != -EMSGSIZE && !(rc == -ENOMEM && w->cfg.fail_permille))
		FAIL(w, "xid %#x: submit failed: %d", xid, rc);
	w->npending--;
	w->calls = k->next;
	call_free(w, k);
}

/* A Call completed (or not), among those that went on the wire when
 * @sent (if there is one). */
static struct vt_call *pick_call(struct vt_world *w, bool completed, bool sent)
{
	unsigned n = 0, i;
	struct vt_call *k;

	for (int pass = 0; pass < 2 && !n; pass++, sent = false)
		for (k = w->calls; k; k = k->next)
			n += k->completed == completed &&
			     (!sent || (w->xflags[xno(w, k->xid)] & XF_SENT));
	if (!n)
		return NULL;
	i = rrange(&w->rng, 0, n - 1);
	for (k = w->calls; k; k = k->next)
		if (k->completed == completed &&
		    (!sent || (w->xflags[xno(w, k->xid)] & XF_SENT)) && i-- == 0)
			break;
	return k;
}

static void release(struct vt_world *w, struct vt_call *k)
{
	struct vt_call **pp;

	trace(w, "release xid %#x", k->xid);
	if (k->rpc.reply || k->rpc.lent)
		rr_conn_release_reply(w->R, &k->rpc);
	for (pp = &w->calls; *pp != k; pp = &(*pp)->next)
		;
	*pp = k->next;
	call_free(w, k);
}

static void abort_call(struct vt_world *w, struct vt_call *k)
{
	trace(w, "abort xid %#x", k->xid);
	w->xflags[xno(w, k->xid)] |= XF_ABORTED;
	w->res->aborts++;
	rr_conn_abort(w->R, &k->rpc, -ETIMEDOUT);
}

/* Every pending Call is marked with @flag, then @what is done to them. */
static void all_pending(struct vt_world *w, uint8_t flag)
{
	for (struct vt_call *k = w->calls; k; k = k->next)
		if (!k->completed)
			w->xflags[xno(w, k->xid)] |= flag;
}

static void abort_all(struct vt_world *w)
{
	trace(w, "abort all");
	all_pending(w, XF_ABORTED | XF_CANCELED);
	rr_conn_abort_all(w->R, -ECANCELED);
}

/* No connection and the upper layer gives up on what is queued (the client
 * with no_reconnect). */
static void fail_queued(struct vt_world *w)
{
	trace(w, "fail the queued Calls");
	all_pending(w, XF_FAILQ);
	rr_conn_fail_queued(w->R, -ECONNRESET);
}

/* ---- the responder's upper layer ---- */

static struct vt_rsp *rsp_of(struct vt_world *w, const struct vt_qp *q)
{
	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		if (s->conn == q->conn)
			return s;
	FAIL(w, "an upcall from a responder session the test does not know");
}

static void on_deliver(void *ctx, struct vt_qp *q, struct rr_conn_sreq *r)
{
	struct vt_world *w = ctx;
	struct vt_rsp *s = rsp_of(w, q);
	struct vt_req *rq;
	struct vt_spec sp;
	uint8_t *want;
	uint32_t len;

	trace(w, "deliver xid %#x len %u", r->xid, r->len);
	if (xno(w, r->xid) >= w->ncalls)
		FAIL(w, "delivered xid %#x was never submitted", r->xid);
	for (rq = s->reqs; rq; rq = rq->next)
		if (rq->r->xid == r->xid)
			FAIL(w, "xid %#x delivered twice on one connection", r->xid);
	spec_make(w, r->xid, &sp);
	len = call_stream(w, r->xid, &sp, &want);
	if (r->len != len || memcmp(r->msg, want, len))
		FAIL(w, "xid %#x: the delivered Call (%u bytes) differs from the one submitted "
			"(%u bytes)", r->xid, r->len, len);
	rq = vt_mem_alloc(&w->mem, sizeof(*rq));
	rq->r = r;
	rq->rsp = s;
	rq->state = Q_DELIVERED;
	r->user = rq;
	rq->next = s->reqs;
	s->reqs = rq;
}

static unsigned on_held(void *ctx, struct vt_qp *q)
{
	unsigned n = 0;

	for (struct vt_req *rq = rsp_of(ctx, q)->reqs; rq; rq = rq->next)
		n++;
	return n;
}

static void req_free_bufs(struct vt_world *w, struct vt_req *rq)
{
	for (unsigned i = 0; i < rq->nparts; i++)
		vt_mem_free(&w->mem, rq->buf[i]);
	rq->nparts = 0;
}

static void on_sent(void *ctx, struct vt_qp *q, struct rr_conn_sreq *r, int status)
{
	struct vt_world *w = ctx;
	struct vt_req *rq = r->user;

	(void)q;
	trace(w, "sent xid %#x status %d", r->xid, status);
	if (!rq || rq->state != Q_REPLYING)
		FAIL(w, "io->sent for xid %#x whose Reply was not posted (or twice)", r->xid);
	rq->state = Q_SENT;
	req_free_bufs(w, rq);   /* the Reply's memory is free now */
}

static void req_done(struct vt_world *w, struct vt_req *rq)
{
	struct vt_req **pp;

	for (pp = &rq->rsp->reqs; *pp != rq; pp = &(*pp)->next)
		;
	*pp = rq->next;
	trace(w, "done xid %#x", rq->r->xid);
	if (!rr_conn_done(rq->rsp->sess, rq->r))
		FAIL(w, "rr_conn_done(xid %#x) kept the request", rq->r->xid);
	req_free_bufs(w, rq);
	vt_mem_free(&w->mem, rq);
}

static void refuse(struct vt_world *w, struct vt_req *rq);

static void reply(struct vt_world *w, struct vt_req *rq)
{
	struct vt_spec sp;
	uint32_t xid = rq->r->xid;
	bool errc = false;
	uint8_t *b;
	int rc;

	spec_make(w, xid, &sp);
	b = rq->buf[0] = vt_mem_alloc(&w->mem, 8 + sp.rbody);
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, 1);
	fill(b + 8, sp.rbody, xid, 2);
	rq->parts[0] = (struct rr_xprt_part){b, 8 + sp.rbody, false};
	for (unsigned i = 0; i < sp.nsinks; i++) {
		b = rq->buf[1 + i] = vt_mem_alloc(&w->mem, sp.ritem[i]);
		fill(b, sp.ritem[i], xid, 30 + i);
		rq->parts[1 + i] = (struct rr_xprt_part){b, sp.ritem[i], true};
	}
	rq->nparts = 1 + sp.nsinks;
	rc = rr_conn_reply(rq->rsp->sess, rq->r, rq->parts, rq->nparts, &errc);
	trace(w, "reply xid %#x rbody %u: %d%s", xid, sp.rbody, rc, errc ? " ERR_CHUNK" : "");
	if (rc == 1) {
		if (rq->state == Q_DELIVERED)
			rq->state = Q_REPLYING;
		return;
	}
	if (rq->state != Q_DELIVERED)
		FAIL(w, "xid %#x: io->sent came before rr_conn_reply returned %d", xid, rc);
	if (rc == 0 || rc == -ENOTCONN) {
		req_done(w, rq);
		return;
	}
	req_free_bufs(w, rq);
	if (rc != -ENOBUFS && !(rc == -ENOMEM && w->cfg.fail_permille))
		FAIL(w, "xid %#x: rr_conn_reply returned %d", xid, rc);
	if (!w->cfg.retry_replies)
		refuse(w, rq);   /* not built or not posted: ERR_CHUNK */
}

static void refuse(struct vt_world *w, struct vt_req *rq)
{
	trace(w, "refuse xid %#x", rq->r->xid);
	rr_conn_refuse(rq->rsp->sess, rq->r);
	req_done(w, rq);
}

/* The upper layer drops the Call without a Reply (a server that stops, a
 * duplicate in progress): the requester's RPC layer times out. */
static void drop(struct vt_world *w, struct vt_req *rq)
{
	trace(w, "drop xid %#x", rq->r->xid);
	w->drop_epoch = RR_MAX(w->drop_epoch, rq->rsp->conn->epoch);
	req_done(w, rq);
}

/* ---- connections ---- */

static void sess_config(const struct vt_world *w, int side, struct rr_conn_config *c)
{
	const struct vt_cfg *cf = &w->cfg;

	memset(c, 0, sizeof(*c));
	c->role = side == VT_REQ ? RR_CONN_REQUESTER : RR_CONN_RESPONDER;
	c->env = &w->mem.te.env;
	c->stats = (struct rr_xprt_stats *)&w->st[side];
	c->local = (struct rr_pd_local){cf->send[side], cf->recv[side], cf->windows[side],
					cf->rrep[side] ? RR_PD_EXT_CAP_RELIABLE_REPLY : 0};
	c->credits = cf->credits[side];
	c->max_seg_len = cf->max_seg_len;
	c->max_segs = 16;
	c->max_call = 1u << 20;
	c->inline_ddp = cf->inline_ddp;
	c->use_windows = cf->windows[side];
	c->send_size = cf->send[side];
	c->recv_size = cf->recv[side];
	c->rrep_max = cf->rrep_max;
	c->rrep_timeout_ns = cf->rrep_timeout_ns;
	c->reply_mem_per_conn = cf->reply_mem_per_conn;
	c->reply_mem_total_used = (uint64_t *)&w->reply_mem_used;
	c->reply_mem_total = cf->reply_mem_total;
	c->send_timeout_ns = cf->send_timeout_ns;
	c->failed = (struct rr_conn_failed *)&w->failed;
	if (side == VT_RSP && cf->share_spares)
		c->spares = (struct rr_conn_spares *)&w->spares;
}

static void conn_up(struct vt_world *w)
{
	struct rr_conn_config cfg;
	struct rr_pd_local l[2];
	uint8_t pd[2][RR_PD_MAX_LEN];
	int len[2];
	struct vt_conn *c;
	struct vt_rsp *s;
	bool fail_on = w->mem.fail_on;

	for (int i = 0; i < 2; i++) {
		sess_config(w, i, &cfg);
		l[i] = cfg.local;
		len[i] = rr_pd_encode(&l[i], pd[i], sizeof(pd[i]));
		if (len[i] < 0)
			FAIL(w, "rr_pd_encode: %d", len[i]);
	}
	c = vt_net_connect(&w->net);
	s = vt_mem_alloc(&w->mem, sizeof(*s));
	s->conn = c;
	s->next = w->rsps;
	w->rsps = s;
	sess_config(w, VT_RSP, &cfg);
	w->mem.fail_on = false;   /* the server refuses a connection it cannot make */
	if (rr_conn_create(&cfg, &c->qp[VT_RSP].io, &s->sess))
		FAIL(w, "rr_conn_create (responder) failed");
	w->mem.fail_on = fail_on;
	c->qp[VT_RSP].sess = s->sess;
	c->qp[VT_REQ].sess = w->R;
	c->qp[VT_RSP].up = true;
	rr_conn_up(s->sess, pd[VT_REQ], (size_t)len[VT_REQ], w->net.cfg[VT_RSP].nrecv, 1, 1);
	c->qp[VT_REQ].up = true;
	w->res->connects++;
	rr_conn_up(w->R, pd[VT_RSP], (size_t)len[VT_RSP], w->net.cfg[VT_REQ].nrecv,
		   w->cfg.ord[VT_REQ], 0);
}

static void destroy_rsp(struct vt_world *w, struct vt_rsp *s)
{
	struct vt_rsp **pp;
	struct vt_conn *c = s->conn;

	trace(w, "destroy responder of epoch %u", c->epoch);
	if (rr_conn_in_progress(s->sess))
		FAIL(w, "responder of epoch %u in progress with no request held", c->epoch);
	rr_conn_destroy(s->sess);
	c->qp[VT_RSP].sess = NULL;
	if (vt_net_registered(&w->net, VT_RSP, c->epoch))
		FAIL(w, "responder registrations of epoch %u left after rr_conn_destroy", c->epoch);
	for (pp = &w->rsps; *pp != s; pp = &(*pp)->next)
		;
	*pp = s->next;
	vt_mem_free(&w->mem, s);
	vt_net_reap(&w->net, c);
}

/* ---- time ---- */

static uint64_t next_timeout(struct vt_world *w)
{
	uint64_t t = UINT64_MAX;

	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		if (!s->conn->qp[VT_RSP].down && !s->conn->qp[VT_RSP].closing)
			t = RR_MIN(t, rr_conn_next_timeout(s->sess, w->mem.te.now_ns));
	return t;
}

/* The responder runs its timers after every event (as the RDMA server's
 * progress loop does). */
static void tick(struct vt_world *w)
{
	w->net.in_tick = true;
	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		if (!s->conn->qp[VT_RSP].down)
			rr_conn_tick(s->sess, w->mem.te.now_ns);
	w->net.in_tick = false;
}

static void advance(struct vt_world *w)
{
	uint64_t t = next_timeout(w), now = w->mem.te.now_ns;
	unsigned k = (unsigned)(rnd(&w->rng) % 100);

	if (k < 50)
		w->mem.te.now_ns += rrange(&w->rng, 1, 2000000);
	else if (k < 80 && t != UINT64_MAX && t > now)
		w->mem.te.now_ns = t;
	else
		w->mem.te.now_ns += rrange(&w->rng, 1, (uint32_t)(w->cfg.rrep_timeout_ns * 3 / 2));
	trace(w, "time +%" PRIu64 " us", (w->mem.te.now_ns - now) / 1000);
}

/* ---- the scheduler ---- */

enum ev {
	E_DELIVER, E_COMPLETE, E_SUBMIT, E_REPLY, E_REFUSE, E_DONE, E_RELEASE, E_ABORT, E_TIME,
	E_LOSE, E_DOWN, E_CONNECT, E_ORD, E_DESTROY, E_DROP, E_ABORT_ALL, E_FAILQ,
};

struct cand {
	enum ev ev;
	unsigned weight;
	void *p;
	int a, b;
};

struct cands {
	struct cand c[128];
	unsigned n, total;
};

static void add(struct cands *cs, enum ev ev, unsigned weight, void *p, int a, int b)
{
	if (!weight || cs->n == RR_ARRAY_SIZE(cs->c))
		return;
	cs->c[cs->n++] = (struct cand){ev, weight, p, a, b};
	cs->total += weight;
}

static void wire_cands(struct vt_world *w, struct cands *cs)
{
	for (struct vt_conn *c = w->net.conns; c; c = c->next) {
		for (int t = 0; t < 2; t++) {
			struct vt_qp *q = &c->qp[t];

			if (!c->broken && c->ops[t].n)
				add(cs, E_DELIVER, w->cfg.wops[t], c, t, 0);
			if (!c->broken && c->resp[t].n)
				add(cs, E_DELIVER, w->cfg.wresp[t], c, t, 1);
			for (int cl = 0; cl < VT_CQ_N; cl++)
				if (!q->down && q->cq[cl].n)
					add(cs, E_COMPLETE, w->cfg.wcq[t][cl], q, cl, 0);
			if (c->broken && !q->down)
				add(cs, E_DOWN, w->cfg.wdown, c, t, 0);
		}
	}
}

static void upper_cands(struct vt_world *w, struct cands *cs)
{
	unsigned delivered = 0, sent = 0, done = 0;

	for (struct vt_rsp *s = w->rsps; s; s = s->next) {
		struct vt_qp *q = &s->conn->qp[VT_RSP];

		for (struct vt_req *rq = s->reqs; rq; rq = rq->next) {
			delivered += rq->state == Q_DELIVERED;
			sent += rq->state == Q_SENT;
		}
		if (!s->ord_set && !q->down)
			add(cs, E_ORD, w->cfg.word, s, 0, 0);
		if (q->down && !s->reqs)
			add(cs, E_DESTROY, w->cfg.wdestroy, s, 0, 0);
	}
	for (struct vt_call *k = w->calls; k; k = k->next)
		done += k->completed;
	add(cs, E_REPLY, delivered ? w->cfg.wreply : 0, NULL, 0, 0);
	add(cs, E_REFUSE, delivered ? w->cfg.wrefuse : 0, NULL, 0, 0);
	add(cs, E_DONE, sent ? w->cfg.wdone : 0, NULL, 0, 0);
	add(cs, E_RELEASE, done ? w->cfg.wrelease : 0, NULL, 0, 0);
	if (!w->net.cur && (w->npending || !w->draining))
		add(cs, E_CONNECT, w->cfg.wconnect, NULL, 0, 0);
	if (w->draining)
		return;
	if (w->ncalls < w->cfg.calls && w->npending < 2 * w->cfg.credits[VT_REQ] + 6)
		add(cs, E_SUBMIT, w->cfg.wsubmit, NULL, 0, 0);
	add(cs, E_ABORT, w->npending ? w->cfg.wabort : 0, NULL, 0, 0);
	add(cs, E_ABORT_ALL, w->npending ? w->cfg.wabortall : 0, NULL, 0, 0);
	add(cs, E_FAILQ, w->npending && !w->net.cur ? w->cfg.wfailq : 0, NULL, 0, 0);
	add(cs, E_DROP, delivered ? w->cfg.wdrop : 0, NULL, 0, 0);
	add(cs, E_TIME, w->cfg.wtime, NULL, 0, 0);
	if (w->net.cur && !w->net.cur->broken && w->losses < w->cfg.max_losses)
		add(cs, E_LOSE, w->cfg.wlose, NULL, 0, 0);
}

static struct vt_req *pick_req(struct vt_world *w, int state)
{
	unsigned n = 0, i;

	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		for (struct vt_req *rq = s->reqs; rq; rq = rq->next)
			n += rq->state == state;
	i = rrange(&w->rng, 0, n - 1);
	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		for (struct vt_req *rq = s->reqs; rq; rq = rq->next)
			if (rq->state == state && i-- == 0)
				return rq;
	FAIL(w, "no request in state %d", state);
}

static void run_cand(struct vt_world *w, const struct cand *c)
{
	switch (c->ev) {
	case E_DELIVER:
		vt_net_deliver(&w->net, c->p, c->a, c->b);
		break;
	case E_COMPLETE:
		vt_net_complete(&w->net, c->p, c->a);
		break;
	case E_SUBMIT:
		submit(w);
		break;
	case E_REPLY:
		reply(w, pick_req(w, Q_DELIVERED));
		break;
	case E_REFUSE:
		refuse(w, pick_req(w, Q_DELIVERED));
		break;
	case E_DONE:
		req_done(w, pick_req(w, Q_SENT));
		break;
	case E_RELEASE:
		release(w, pick_call(w, true, false));
		break;
	case E_ABORT:
		abort_call(w, pick_call(w, false, chance(&w->rng, 70)));
		break;
	case E_TIME:
		advance(w);
		break;
	case E_LOSE:
		trace(w, "lose the connection");
		w->losses++;
		w->res->losses++;
		vt_net_break(&w->net, w->net.cur);
		break;
	case E_DOWN:
		vt_net_down(&w->net, c->p, c->a);
		break;
	case E_CONNECT:
		conn_up(w);
		break;
	case E_ORD: {
		struct vt_rsp *s = c->p;

		s->ord_set = true;
		trace(w, "responder ORD %u", w->cfg.ord[VT_RSP]);
		rr_conn_set_ord(s->sess, w->cfg.ord[VT_RSP]);
		break;
	}
	case E_DESTROY:
		destroy_rsp(w, c->p);
		break;
	case E_DROP:
		drop(w, pick_req(w, Q_DELIVERED));
		break;
	case E_ABORT_ALL:
		abort_all(w);
		break;
	case E_FAILQ:
		fail_queued(w);
		break;
	}
}

/* After every step: the session never counts fewer live STags than the
 * wire has (at rest, the same number: check_quiet). It may count more for a
 * while: a Send With Invalidate naming an STag of a Call it aborted (no
 * longer matched by XID) whose Local Invalidate could not be posted is not
 * attributed; that STag is deregistered before the Call completes. */
static void check_step(struct vt_world *w)
{
	uint32_t live = rr_conn_live_stags(w->R);
	unsigned wire = w->net.cur && w->net.cur->qp[VT_REQ].up && !w->net.cur->qp[VT_REQ].down ?
				vt_net_live_remote(&w->net, VT_REQ, w->net.cur->epoch) : 0;

	if (live < wire)
		FAIL(w, "rr_conn_live_stags says %u STags of Calls are valid, the wire %u", live,
		     wire);
	/* what a failed probe's dump reads (rpcrdma_client_stats): Sends
	 * the requester posted, not ones it tried to */
	if (w->st[VT_REQ].sends != w->net.side_sends[VT_REQ])
		FAIL(w, "the requester counts %llu Sends, it posted %lu",
		     (unsigned long long)w->st[VT_REQ].sends, w->net.side_sends[VT_REQ]);
}

/* One step; false when nothing is left to do. */
static bool step(struct vt_world *w)
{
	struct cands cs = {.n = 0};
	unsigned x;

	wire_cands(w, &cs);
	upper_cands(w, &cs);
	if (!cs.total) {
		uint64_t t = next_timeout(w);

		if (t == UINT64_MAX && w->npending && w->net.cur && !w->net.cur->broken &&
		    w->drop_epoch == w->net.cur->epoch) {
			/* a Call dropped by the responder holds its credit: the
			 * RPC layer's timeout resets the connection */
			trace(w, "RPC timeout: the connection is reset");
			vt_net_break(&w->net, w->net.cur);
		} else if (t == UINT64_MAX) {
			return false;
		} else {
			if (t > w->mem.te.now_ns)
				w->mem.te.now_ns = t;
			trace(w, "time: to the next timeout");
		}
	} else {
		x = (unsigned)(rnd(&w->rng) % cs.total);
		for (unsigned i = 0; i < cs.n; i++) {
			if (x < cs.c[i].weight) {
				run_cand(w, &cs.c[i]);
				break;
			}
			x -= cs.c[i].weight;
		}
	}
	tick(w);
	check_step(w);
	w->step++;
	return true;
}

/* ---- a run ---- */

/* A weight: mostly around @base, sometimes far below or above it. */
static unsigned weight(uint64_t *s, unsigned base)
{
	static const unsigned f[] = {1, 4, 10, 10, 10, 25, 100};   /* tenths */
	unsigned v = base * f[rnd(s) % RR_ARRAY_SIZE(f)] / 10;

	return v ? v : 1;
}

static void choose_weights(struct vt_world *w)
{
	struct vt_cfg *c = &w->cfg;
	uint64_t *s = &w->rng;

	for (int t = 0; t < 2; t++) {
		c->wops[t] = weight(s, 20);
		c->wresp[t] = weight(s, 20);
		for (int cl = 0; cl < VT_CQ_N; cl++)
			c->wcq[t][cl] = weight(s, 12);
	}
	c->wdown = weight(s, 6);
	c->wsubmit = weight(s, 10);
	c->wreply = weight(s, 14);
	c->wrefuse = chance(s, 50) ? 0 : weight(s, 1);
	c->wdone = weight(s, 10);
	c->wrelease = weight(s, 8);
	c->wabort = chance(s, 30) ? 0 : weight(s, 2);
	c->wtime = weight(s, 2);
	c->wlose = weight(s, 1);
	c->wconnect = weight(s, 4);
	c->word = weight(s, 4);
	c->wdestroy = weight(s, 6);
	c->wdrop = chance(s, 70) ? 0 : weight(s, 1);
	c->wabortall = chance(s, 80) ? 0 : 1;
	c->wfailq = chance(s, 70) ? 0 : weight(s, 1);
}

static void choose_cfg(struct vt_world *w)
{
	struct vt_cfg *c = &w->cfg;
	uint64_t *s = &w->rng;
	static const uint32_t sizes[] = {1024, 1024, 2048, 4096};

	for (int i = 0; i < 2; i++) {
		c->credits[i] = chance(s, 30) ? rrange(s, 1, 4) : rrange(s, 1, 64);
		c->send[i] = sizes[rnd(s) % 4];
		c->recv[i] = sizes[rnd(s) % 4];
		c->windows[i] = chance(s, 75);
		c->rrep[i] = chance(s, 70);
		c->ord[i] = (uint16_t)rrange(s, 1, 4);
	}
	c->rrep_max = rrange(s, 1, 4);
	c->rrep_timeout_ns = (uint64_t)rrange(s, 5, 100) * 1000000u;
	c->send_timeout_ns = chance(s, 50) ? 0 : (uint64_t)rrange(s, 50, 500) * 1000000u;
	c->reply_mem_per_conn = chance(s, 20) ? rrange(s, 1000, 40000) : 64u << 20;
	c->reply_mem_total = chance(s, 10) ? rrange(s, 1000, 40000) : 256u << 20;
	c->max_seg_len = chance(s, 40) ? 4096 : 1u << 20;
	c->inline_ddp = chance(s, 70);
	c->fail_permille = w->o->fail_permille >= 0 ? (unsigned)w->o->fail_permille :
			   chance(s, 30) ? rrange(s, 2, 30) : 0;
	c->calls = rrange(s, 10, 70);
	c->max_losses = rrange(s, 0, 3);
	c->retry_replies = chance(s, 25);
	c->share_spares = (w->seed & 1) != 0;   /* not drawn: the seeds' runs stay */
	choose_weights(w);
	c->tc = RR_MIN(c->send[VT_REQ], c->recv[VT_RSP]);
	c->tr = RR_MIN(c->send[VT_RSP], c->recv[VT_REQ]);
	/* Receives and send slots as the RDMA executor makes them
	 * (transport/rdma client.c, server_conns.c) */
	w->net.cfg[VT_REQ] = (struct vt_side_cfg){
		c->credits[VT_REQ], c->credits[VT_REQ] + 8, c->recv[VT_REQ], c->credits[VT_REQ] + 8,
		c->send[VT_REQ], c->ord[VT_REQ], c->windows[VT_REQ]};
	{
		uint32_t n = c->credits[VT_RSP] + 4 + (c->rrep[VT_RSP] ? c->rrep_max : 0);

		w->net.cfg[VT_RSP] = (struct vt_side_cfg){c->credits[VT_RSP], n, c->recv[VT_RSP],
							  n + 8, c->send[VT_RSP], c->ord[VT_RSP],
							  c->windows[VT_RSP]};
	}
}

static void print_cfg(const struct vt_world *w)
{
	const struct vt_cfg *c = &w->cfg;

	fprintf(stderr,
		"    config: credits %u/%u, inline send %u/%u recv %u/%u, windows %d/%d, "
		"reliable reply %d/%d (rrep_max %u, timeout %" PRIu64 " ms), ORD %u/%u, "
		"send_timeout %" PRIu64 " ms, reply_mem %" PRIu64 "/%" PRIu64 ", max_seg_len %u, "
		"inline_ddp %d, alloc failures %u/1000, %u calls, %s%s\n",
		c->credits[0], c->credits[1], c->send[0], c->send[1], c->recv[0], c->recv[1],
		c->windows[0], c->windows[1], c->rrep[0], c->rrep[1], c->rrep_max,
		c->rrep_timeout_ns / 1000000, c->ord[0], c->ord[1], c->send_timeout_ns / 1000000,
		c->reply_mem_per_conn, c->reply_mem_total, c->max_seg_len, c->inline_ddp,
		c->fail_permille, c->calls, c->retry_replies ? "replies retried" : "replies refused",
		c->share_spares ? ", responders' spares shared" : "");
}

/* The end: nothing left in flight, every Call completed, and the state of
 * both sessions at rest. */
static void check_quiet(struct vt_world *w)
{
	struct vt_conn *c = w->net.cur;

	for (struct vt_call *k = w->calls; k; k = k->next)
		if (!k->completed)
			FAIL(w, "xid %#x never completed (requester %s, grant %u, live STags %u)",
			     k->xid, c ? "up" : "down", rr_conn_grant(w->R),
			     rr_conn_live_stags(w->R));
	if (w->npending)
		FAIL(w, "%u Calls pending after the drain", w->npending);
	if (rr_conn_has_calls(w->R) || rr_conn_live_stags(w->R))
		FAIL(w, "requester still holds Calls or live STags after the drain");
	for (struct vt_rsp *s = w->rsps; s; s = s->next)
		for (struct vt_req *rq = s->reqs; rq; rq = rq->next)
			if (rq->state == Q_REPLYING)
				FAIL(w, "xid %#x: rr_conn_reply posted its Reply (1) but io->sent "
					"never came", rq->r->xid);
	if (!c || c->broken)
		return;
	if (vt_net_done_owed(c) && !w->cfg.fail_permille)
		FAIL(w, "xid %#x: its Read-chunk Reply came, its RDMA_DONE was never sent",
		     vt_net_done_owed(c));
	for (int t = 0; t < 2; t++) {
		struct vt_qp *q = &c->qp[t];

		if (q->nsfree != q->nsend)
			FAIL(w, "%s: %u of %u send slots free at rest", t ? "responder" : "requester",
			     q->nsfree, q->nsend);
		if (q->rcount + q->lent != q->nrecv)
			FAIL(w, "%s: %u of %u Receives posted at rest", t ? "responder" : "requester",
			     q->rcount, q->nrecv);
	}
	if (c->qp[VT_RSP].sess && (rr_conn_rrep_waiting(c->qp[VT_RSP].sess) ||
				   rr_conn_rrep_live(c->qp[VT_RSP].sess)))
		FAIL(w, "responder: %u Read-chunk Replies waiting, %u live at rest",
		     rr_conn_rrep_waiting(c->qp[VT_RSP].sess), rr_conn_rrep_live(c->qp[VT_RSP].sess));
	if (c->qp[VT_RSP].sess && rr_conn_in_progress(c->qp[VT_RSP].sess))
		FAIL(w, "responder in progress at rest, with no request held");
}

static void teardown(struct vt_world *w)
{
	w->destroying = true;
	for (struct vt_conn *c = w->net.conns; c; c = c->next) {
		vt_net_break(&w->net, c);
		vt_net_down(&w->net, c, VT_REQ);
		vt_net_down(&w->net, c, VT_RSP);
	}
	while (w->rsps) {
		struct vt_rsp *s = w->rsps;

		while (s->reqs)
			req_done(w, s->reqs);
		destroy_rsp(w, s);
	}
	while (w->calls)
		release(w, w->calls);
	rr_conn_destroy(w->R);
	w->R = NULL;
	/* the responders' shared spares go after the last of them */
	rr_conn_spares_drain(&w->spares, &w->mem.te.env);
	while (w->net.conns)
		if (!vt_net_reap(&w->net, w->net.conns))
			FAIL(w, "connection of epoch %u still referenced at the end",
			     w->net.conns->epoch);
	if (vt_net_registered(&w->net, VT_REQ, UINT32_MAX) ||
	    vt_net_registered(&w->net, VT_RSP, UINT32_MAX))
		FAIL(w, "registrations left after both sessions were destroyed");
	if (w->reply_mem_used)
		FAIL(w, "%" PRIu64 " bytes of Read-chunk Replies still accounted after destroy",
		     w->reply_mem_used);
	if (w->mem.session_live) {
		char l[200];

		vt_mem_leaks(&w->mem, l, sizeof(l), 8);
		FAIL(w, "%ld allocations of the sessions not freed (number:size%s; "
			"RR_VT_TRAP_ALLOC=number prints where)", w->mem.session_live, l);
	}
	if (w->mem.nblk)
		FAIL(w, "%zu blocks of the test not freed", w->mem.nblk);
}

static void run(struct vt_world *w)
{
	struct rr_conn_config cfg;
	unsigned long limit;

	choose_cfg(w);
	w->mem.fail_permille = w->cfg.fail_permille;
	w->mem.trap = w->o->trap_alloc;
	sess_config(w, VT_REQ, &cfg);
	if (rr_conn_create(&cfg, &w->net.req_io, &w->R))
		FAIL(w, "rr_conn_create (requester) failed");
	w->mem.fail_on = true;
	conn_up(w);
	limit = 40ul * w->cfg.calls + 2000;
	while (w->ncalls < w->cfg.calls && w->step < limit)
		step(w);
	w->draining = true;
	w->mem.fail_on = false;
	limit = w->step + 200000;
	while (step(w))
		if (w->step > limit)
			FAIL(w, "no rest after 200000 steps of drain");
	check_quiet(w);
	teardown(w);
}

static void report(const struct vt_world *w)
{
	fprintf(stderr, "  conn_vt: seed %#" PRIx64 " failed at step %lu: %s\n", w->seed, w->step,
		w->msg);
	print_cfg(w);
	fprintf(stderr, "    last events:\n");
	for (unsigned i = w->rpos > VT_RING ? w->rpos - VT_RING : 0; i < w->rpos; i++)
		fprintf(stderr, "      %s\n", w->ring[i % VT_RING]);
	fprintf(stderr, "    replay: RR_VT_SEED=%#" PRIx64 " [RR_VT_TRACE=1] rr-tests conn_vt_seed\n",
		w->seed);
}

bool vt_run(uint64_t seed, const struct vt_opts *o, struct vt_result *res)
{
	struct vt_world *w = calloc(1, sizeof(*w));
	bool ok;

	if (!w)
		abort();
	memset(res, 0, sizeof(*res));
	w->seed = seed;
	w->rng = seed;
	w->o = o;
	w->res = res;
	w->xid_base = (uint32_t)mix64(seed) | 0x10000000u;
	w->xid_base &= 0x7fffff00u;
	vt_mem_init(&w->mem, seed);
	w->mem.ctx = w;
	w->mem.fail = fail;
	vt_net_init(&w->net, &w->mem);
	w->net.ctx = w;
	w->net.fail = fail;
	w->net.xid_aborted = xid_aborted;
	w->net.err_sent = err_sent;
	w->net.call_sent = call_sent;
	w->net.deliver = on_deliver;
	w->net.complete = on_complete;
	w->net.sent = on_sent;
	w->net.held = on_held;
	w->net.trace = trace;
	ok = setjmp(w->jb) == 0;
	if (ok)
		run(w);
	else if (!o->quiet)
		report(w);
	res->steps = w->step;
	res->alloc_fails = w->mem.fails;
	res->legit_fatal = w->net.legit_fatal;
	res->swi = w->net.swi;
	res->linv = w->net.linv;
	res->sends = w->net.sends;
	res->writes = w->net.writes;
	res->reads = w->net.reads;
	res->short_calls = w->st[VT_REQ].short_msgs;
	res->read_calls = w->st[VT_REQ].chunked_msgs;
	res->long_calls = w->st[VT_REQ].long_msgs;
	res->write_chunks = w->st[VT_RSP].write_chunks;
	res->reply_chunks = w->st[VT_RSP].reply_chunks;
	res->rrep_exposed = w->st[VT_RSP].rrep_exposed;
	res->rrep_pulled = w->st[VT_REQ].rrep_pulled;
	res->rrep_parked = w->st[VT_RSP].rrep_parked;
	res->rrep_expired = w->st[VT_RSP].rrep_expired;
	res->retransmits = w->st[VT_REQ].retransmits;
	res->stalls = w->st[VT_RSP].send_stalls;
	vt_net_fini(&w->net);
	vt_mem_fini(&w->mem);
	free(w->scratch);
	free(w);
	return ok;
}

void vt_result_add(struct vt_result *sum, const struct vt_result *r)
{
	unsigned long *a = (unsigned long *)sum;
	const unsigned long *b = (const unsigned long *)r;

	for (size_t i = 0; i < sizeof(*r) / sizeof(unsigned long); i++)
		a[i] += b[i];
}
