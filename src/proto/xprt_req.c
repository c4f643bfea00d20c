/* SPDX-License-Identifier: BSD-2-Clause */
/* The requester half of the RPC-over-RDMA v1 transport core (RFC 8166 section
 * 3.5 "Message Size": Short, Chunked and Long Calls; 3.4.5-3.4.7 Read, Write
 * and Reply chunks; 4.5 "Error Handling": a requester silently discards
 * malformed Replies). Plans each Call, marshals its Send (the header built
 * in the codec's struct rr_hdr), and matches and validates Replies (decoded
 * by the codec) against what the Call provisioned. See xprt.h. */
#include "proto/rrep.h"
#include "proto/xprt.h"

/* What every Reply reads of the requester (env to spare) stays within its
 * first two cache lines, before the XID table. */
_Static_assert(offsetof(struct rr_xprt_requester, table) <= 128,
	       "rr_xprt_requester: the per-Reply fields beyond two cache lines");

static const uint8_t rr_xprt_zero_pad[4];

_Static_assert(offsetof(struct rr_xprt_rqst, xid) <= 64, "a call's zeroed fields within 64 bytes");

void rr_xprt_req_init(struct rr_xprt_requester *r, const struct rpcrdma_env *env,
		      const struct rr_xprt_params *p, struct rr_xprt_stats *stats)
{
	memset(r, 0, sizeof(*r));
	r->env = env;
	r->stats = stats;
	rr_xprt_req_set_params(r, p);
}

void rr_xprt_req_set_params(struct rr_xprt_requester *r, const struct rr_xprt_params *p)
{
	uint32_t max = 0;   /* the longest part a Short Call without chunks may have */

	r->params = *p;
	rr_xprt_hdr_limits(&r->lim, p->reply_inline, 0, p->reliable_reply);
	/* prepare_short's tests of the parameters (no segment allowed: no
	 * such Call; the whole Call within the call inline threshold behind
	 * the header with three empty lists) and of the part's length (8
	 * to UINT32_MAX / 2 bytes) in one limit: len - 8 < short_lim */
	if (p->max_seg_len && p->max_segs && p->call_inline >= RR_HDR_FIXED_SIZE + 12)
		max = RR_MIN(p->call_inline - (RR_HDR_FIXED_SIZE + 12), UINT32_MAX / 2);
	r->short_lim = max >= 8 ? max - 8 + 1 : 0;
}

static unsigned bucket(uint32_t xid)
{
	return (xid ^ (xid >> 6) ^ (xid >> 12)) & 63u;
}

/* The outstanding call of @xid: r->solo first (the newest call of its
 * XID, table_add), then the XID's chain (newest first), so that the call
 * found is the newest of that XID either way. */
struct rr_xprt_rqst *rr_xprt_req_find(struct rr_xprt_requester *r, uint32_t xid)
{
	if (r->solo && r->solo->xid == xid)
		return r->solo;
	if (r->outstanding <= (r->solo != NULL))
		return NULL;   /* (none in the table: its line not read) */
	for (struct rr_xprt_rqst *c = r->table[bucket(xid)]; c; c = c->next)
		if (c->xid == xid)
			return c;
	return NULL;
}

/* rr_xprt_rqst_forget's body, inline in the one-pass Reply (which its
 * callers inline in turn: a call of 9 otherwise). */
static inline __attribute__((always_inline)) void rqst_forget(struct rr_xprt_requester *r,
							      struct rr_xprt_rqst *c)
{
	if (!c->outstanding)
		return;
	*c->pprev = c->next;   /* (table_add's link: no walk of the chain) */
	if (c->next)
		c->next->pprev = c->pprev;
	c->next = NULL;
	c->outstanding = false;
	r->outstanding--;
}

void rr_xprt_rqst_forget(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	rqst_forget(r, c);
}

/* Number of segments covering @len bytes. */
static uint32_t nsegs_for(const struct rr_xprt_params *p, uint32_t len)
{
	if (len == 0)
		return 1;
	return (uint32_t)(((uint64_t)len + p->max_seg_len - 1) / p->max_seg_len);
}

static unsigned add_reg(struct rr_xprt_rqst *c, void *base, size_t len, unsigned acc)
{
	struct rr_xprt_reg *g = &c->regs[c->nregs];

	memset(g, 0, sizeof(*g));
	g->base = base;
	g->len = len;
	g->access = acc;
	return c->nregs++;
}

/* Reply chunk buffers are recycled: most Calls of a connection ask for the
 * same size (the RPC layer's maximum message), and allocating several MiB
 * per Call costs more than the Call. */
static uint8_t *rbuf_get(struct rr_xprt_requester *r, uint32_t len)
{
	for (unsigned i = 0; i < RR_ARRAY_SIZE(r->rcache); i++) {
		if (r->rcache[i].buf && r->rcache[i].len == len) {
			uint8_t *b = r->rcache[i].buf;

			r->rcache[i].buf = NULL;
			return b;
		}
	}
	return rr_alloc(r->env, len);
}

static void rbuf_put(struct rr_xprt_requester *r, uint8_t *b, uint32_t len)
{
	if (!b)
		return;
	for (unsigned i = 0; i < RR_ARRAY_SIZE(r->rcache); i++) {
		if (!r->rcache[i].buf) {
			r->rcache[i].buf = b;
			r->rcache[i].len = len;
			return;
		}
	}
	rr_free(r->env, b);
}

void rr_xprt_req_fini(struct rr_xprt_requester *r)
{
	for (unsigned i = 0; i < RR_ARRAY_SIZE(r->rcache); i++) {
		rr_free(r->env, r->rcache[i].buf);
		r->rcache[i].buf = NULL;
	}
	rr_free(r->env, r->spare);
	r->spare = NULL;
}

/* A call with its first fields zeroed (the rest is written before it is
 * read: struct rr_xprt_rqst): the kept one, or a new one. */
static struct rr_xprt_rqst *rqst_get(struct rr_xprt_requester *r)
{
	struct rr_xprt_rqst *c = r->spare;

	if (c)
		r->spare = NULL;
	else
		c = rr_alloc(r->env, sizeof(*c));
	if (c)
		memset(c, 0, offsetof(struct rr_xprt_rqst, xid));
	return c;
}

static void rqst_put(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	if (r->spare)
		rr_free(r->env, c);
	else
		r->spare = c;
}

static void free_bufs(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	if (c->pullup)   /* a Long Call's only: no call for the others */
		rr_free(r->env, c->pullup);
	rbuf_put(r, c->reply_buf, c->reply_len);
	c->pullup = NULL;
	c->reply_buf = NULL;
}

void rr_xprt_rqst_drop_bufs(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	free_bufs(r, c);
}

/* Header sizes: fixed(16) + read list + write list + reply chunk. */
static size_t write_list_size(const struct rr_xprt_params *p, const struct rr_xprt_rqst *c)
{
	size_t n = 4;

	if (c->results_inline)
		return n;
	for (unsigned i = 0; i < c->desc.nsinks; i++)
		n += 8 + (size_t)16 * nsegs_for(p, c->desc.sinks[i].len);
	return n;
}

/* Small DDP-eligible results conveyed inline (as Linux xprtrdma's
 * rpcrdma_results_inline; RFC 8166 section 3.4.2 makes Write chunks an
 * option of the requester): true when the largest possible Reply -- a
 * header with empty lists and no Reply chunk, the reduced Reply bound
 * @max_reply, and every sink's maximum length with its XDR pad -- fits the
 * reply inline threshold, and the sinks' padded lengths add up to at most
 * inline_ddp_max (0: no such bound). The responder then returns the items
 * inline and the RPC layer copies them into the sinks (RR_RPC_NOT_PLACED). */
static bool results_fit_inline(const struct rr_xprt_params *p,
			       const struct rr_xprt_rqst_desc *d)
{
	uint64_t sinks = 0;

	if (!p->inline_ddp || d->nsinks == 0)
		return false;
	for (unsigned i = 0; i < d->nsinks; i++)
		sinks += RR_ALIGN4((uint64_t)d->sinks[i].len);
	if (p->inline_ddp_max && sinks > p->inline_ddp_max)
		return false;
	return RR_HDR_MIN_MSG_SIZE + (uint64_t)d->max_reply + sinks <= p->reply_inline;
}

/* The Call's header fits the header model (proto/hdr.h): at most
 * RR_HDR_MAX_SEGS segments (@nreads Read segments, the Write chunks' and
 * the Reply chunk's) and RR_HDR_MAX_READ_CHUNKS Read chunks (one per
 * reduced item, the Position-zero chunk of a Long Call, which an item at
 * Position zero joins). */
static bool fits_hdr_model(const struct rr_xprt_params *p, const struct rr_xprt_rqst *c,
			   uint32_t nreads)
{
	const struct rr_xprt_rqst_desc *d = &c->desc;
	uint64_t segs = nreads;
	uint32_t chunks = c->form == RR_XPRT_FORM_LONG, k = 0;

	for (unsigned i = 0; c->form != RR_XPRT_FORM_SHORT && i < d->nparts; i++) {
		if (!d->parts[i].ddp)
			continue;
		if (d->parts[i].len && !(c->form == RR_XPRT_FORM_LONG && c->item_pos[k] == 0))
			chunks++;
		k++;
	}
	for (unsigned i = 0; i < d->nsinks && !c->results_inline; i++)
		segs += nsegs_for(p, d->sinks[i].len);
	if (c->reply_len)
		segs += nsegs_for(p, c->reply_len);
	return segs <= RR_HDR_MAX_SEGS && chunks <= RR_HDR_MAX_READ_CHUNKS;
}

static int plan_call(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	const struct rr_xprt_params *p = &r->params;
	const struct rr_xprt_rqst_desc *d = &c->desc;
	size_t wl, rep_hdr_max, hdr, reads;
	uint32_t nreads = 0;

	free_bufs(r, c);
	c->nregs = 0;
	c->pullup_reg = -1;
	c->reply_reg = -1;
	c->reply_len = 0;
	for (unsigned i = 0; i < c->nitems; i++)
		c->item_reg[i] = -1;
	for (unsigned i = 0; i < d->nsinks; i++)
		c->sink_reg[i] = -1;
	c->results_inline = results_fit_inline(p, d);
	wl = write_list_size(p, c);

	for (unsigned i = 0; i < d->nsinks && !c->results_inline; i++) {
		if (nsegs_for(p, d->sinks[i].len) > p->max_segs)
			return -EMSGSIZE;
	}
	/* Reply chunk: needed when the largest Reply (reduced, with a header
	 * echoing every Write segment) exceeds the reply inline threshold. */
	rep_hdr_max = RR_HDR_FIXED_SIZE + 4 + wl + 4;
	hdr = RR_HDR_FIXED_SIZE + 4 + wl + 4;
	/* (With reliable reply negotiated, draft 5.3.1 decides: proto/rrep.h.) */
	if (!c->results_inline && rr_rrep_want_reply_chunk(p, rep_hdr_max, d)) {
		uint32_t rl = (uint32_t)RR_ALIGN4(d->max_reply);

		if (nsegs_for(p, rl) > p->max_segs)
			return -EMSGSIZE;
		c->reply_len = rl;
		hdr += 4 + (size_t)16 * nsegs_for(p, rl);
	}

	/* Arguments: the whole Call, DDP-eligible items inline with their pad,
	 * in one Short message when it fits (RFC 8166 section 3.4.3: reducing
	 * an item is the requester's choice). With the results inline the
	 * header has no Write list to carry, which leaves more room. */
	if (hdr + c->xdr_len <= p->call_inline) {
		c->form = RR_XPRT_FORM_SHORT;
	} else {
		/* Move every non-empty DDP-eligible item into a Read chunk. */
		reads = 0;
		for (unsigned k = 0; k < c->nitems; k++) {
			uint32_t len = 0;
			unsigned seen = 0;

			for (unsigned i = 0; i < d->nparts; i++)
				if (d->parts[i].ddp && seen++ == k)
					len = d->parts[i].len;
			if (len == 0)
				continue;
			if (nsegs_for(p, len) > p->max_segs)
				return -EMSGSIZE;
			nreads += nsegs_for(p, len);
			reads += (size_t)24 * nsegs_for(p, len);
		}
		if (hdr + reads + c->reduced_len <= p->call_inline) {
			c->form = RR_XPRT_FORM_READ;
		} else {
			uint32_t n0 = nsegs_for(p, c->reduced_len);

			if (n0 > p->max_segs)
				return -EMSGSIZE;
			nreads += n0;
			reads += (size_t)24 * n0;
			if (hdr + reads > p->call_inline)
				return -EMSGSIZE;
			c->form = RR_XPRT_FORM_LONG;
		}
		if (nreads > RR_XPRT_MAX_READS)
			return -EMSGSIZE;
	}
	if (!fits_hdr_model(p, c, nreads))
		return -EMSGSIZE;

	/* Registrations, in header order. */
	if (c->form == RR_XPRT_FORM_LONG) {
		uint32_t off = 0;

		c->pullup = rr_alloc(r->env, c->reduced_len ? c->reduced_len : 4);
		if (!c->pullup)
			return -ENOMEM;
		for (unsigned i = 0; i < d->nparts; i++) {
			if (d->parts[i].ddp)
				continue;
			if (d->parts[i].len)
				memcpy(c->pullup + off, d->parts[i].base, d->parts[i].len);
			off += d->parts[i].len;
		}
		if (r->stats)
			r->stats->pullup_bytes += off;
		c->pullup_reg = (int)add_reg(c, c->pullup, c->reduced_len,
					     RR_XPRT_ACC_REMOTE_READ);
	}
	if (c->form != RR_XPRT_FORM_SHORT) {
		unsigned k = 0;

		for (unsigned i = 0; i < d->nparts; i++) {
			if (!d->parts[i].ddp)
				continue;
			if (d->parts[i].len)
				c->item_reg[k] = (int)add_reg(c, (void *)(uintptr_t)d->parts[i].base,
							      d->parts[i].len,
							      RR_XPRT_ACC_REMOTE_READ);
			k++;
		}
	}
	for (unsigned i = 0; i < d->nsinks && !c->results_inline; i++)
		c->sink_reg[i] = (int)add_reg(c, d->sinks[i].base, d->sinks[i].len,
					      RR_XPRT_ACC_REMOTE_WRITE);
	if (c->reply_len) {
		c->reply_buf = rbuf_get(r, c->reply_len);
		if (!c->reply_buf)
			return -ENOMEM;
		c->reply_reg = (int)add_reg(c, c->reply_buf, c->reply_len,
					    RR_XPRT_ACC_REMOTE_WRITE);
	}
	return 0;
}

/* plan_call, and whether its plan is the form marshal_short writes (its
 * test of the plan before issue 16 part HC, made here once per plan, not
 * per Send; false after a failed plan). */
static int plan(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	const struct rr_xprt_rqst_desc *d = &c->desc;
	int rc = plan_call(r, c);

	c->one_part = rc == 0 && c->form == RR_XPRT_FORM_SHORT && !c->nregs && !d->nsinks &&
		      d->nparts == 1 && !d->parts[0].ddp && d->parts[0].len == c->xdr_len;
	return rc;
}

/* The Short Call without chunks, planned in one pass: one inline part
 * (no DDP-eligible item) of 8 or more bytes, a multiple of 4, no result
 * sink, the whole Call within the call inline threshold behind a header
 * with three empty lists, and no Reply chunk wanted (rr_rrep's rule, as
 * plan applies it). Every synchronous NULL-like Call is one. The call is
 * left as plan leaves it for such a Call (form Short, no registration, no
 * buffer). Returns 1 when @d is not of that form (nothing touched: the
 * general planner decides, and rejects what it rejects), else
 * rr_xprt_rqst_prepare's result. Proven equal to the general planner by
 * test xprt_short_call_as_general and by fuzz_xprt, which plans every
 * input both ways. */
static int prepare_short(struct rr_xprt_requester *r, const struct rr_xprt_rqst_desc *d,
			 struct rr_xprt_rqst **out)
{
	const struct rr_xprt_params *p = &r->params;
	const struct rr_xprt_part *pt = d->parts;
	struct rr_xprt_rqst *c;

	/* (pt->len - 8 < r->short_lim: 8 <= pt->len <= UINT32_MAX / 2,
	 * RR_HDR_FIXED_SIZE + 12 + pt->len <= p->call_inline, and
	 * p->max_seg_len and p->max_segs not 0: rr_xprt_req_set_params) */
	if (d->nsinks || d->nparts != 1 || !pt || pt->ddp || !pt->base ||
	    pt->len - 8u >= r->short_lim || (pt->len & 3) ||
	    rr_rrep_want_reply_chunk(p, RR_HDR_FIXED_SIZE + 12, d))
		return 1;
	c = rqst_get(r);
	if (!c)
		return -ENOMEM;
	c->xid = d->xid;
	c->form = RR_XPRT_FORM_SHORT;
	c->one_part = true;
	c->desc = *d;
	c->xdr_len = pt->len;
	c->reduced_len = pt->len;
	c->nitems = 0;
	c->pullup_reg = -1;
	c->results_inline = false;
	c->reply_reg = -1;
	c->reply_len = 0;
	c->nregs = 0;
	*out = c;
	return 0;
}

/* (Inlined in its callers where the link-time optimiser sees them: the
 * session's submit, issue 16 part GC.) */
inline __attribute__((always_inline)) int rr_xprt_rqst_prepare(struct rr_xprt_requester *r,
							       const struct rr_xprt_rqst_desc *d,
							       struct rr_xprt_rqst **out)
{
	int rc = prepare_short(r, d, out);

	if (RR_LIKELY(rc != 1))
		return rc;
	return rr_xprt_rqst_prepare_general(r, d, out);
}

int rr_xprt_rqst_prepare_general(struct rr_xprt_requester *r, const struct rr_xprt_rqst_desc *d,
				 struct rr_xprt_rqst **out)
{
	struct rr_xprt_rqst *c;
	uint64_t pos = 0, reduced = 0;
	unsigned nitems = 0;
	int rc;

	*out = NULL;
	if (d->nsinks > RR_XPRT_MAX_ITEMS || d->nsinks > RR_XPRT_MAX_WCHUNKS ||
	    (d->nparts && !d->parts))
		return -EINVAL;
	if (r->params.max_seg_len == 0 || r->params.max_segs == 0)
		return -EINVAL;
	for (unsigned i = 0; i < d->nsinks; i++)
		if (d->sinks[i].len == 0 || !d->sinks[i].base)
			return -EINVAL;
	c = rqst_get(r);
	if (!c)
		return -ENOMEM;
	for (unsigned i = 0; i < d->nparts; i++) {
		const struct rr_xprt_part *pt = &d->parts[i];

		if (pt->len && !pt->base)
			goto inval;
		if (pt->ddp) {
			if (nitems == RR_XPRT_MAX_ITEMS || (pos & 3))
				goto inval;
			c->item_pos[nitems++] = (uint32_t)pos;
			pos += RR_ALIGN4((uint64_t)pt->len);
		} else {
			pos += pt->len;
			reduced += pt->len;
		}
	}
	if ((pos & 3) || pos < 8 || pos > UINT32_MAX / 2)
		goto inval;
	c->xid = d->xid;
	c->desc = *d;
	c->nitems = nitems;
	c->xdr_len = (uint32_t)pos;
	c->reduced_len = (uint32_t)reduced;
	rc = plan(r, c);
	if (rc) {
		free_bufs(r, c);
		rqst_put(r, c);
		return rc;
	}
	*out = c;
	return 0;
inval:
	rqst_put(r, c);
	return -EINVAL;
}

int rr_xprt_rqst_replan(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	return plan(r, c);
}

/* Segment @i of the first @len bytes of registration @g split into segments
 * of at most max_seg_len (nsegs_for() of them; one of length 0 when @len is
 * 0). */
static struct rr_hdr_seg seg_at(const struct rr_xprt_params *p, const struct rr_xprt_reg *g,
				uint32_t len, uint32_t i)
{
	uint32_t off = (uint32_t)RR_MIN((uint64_t)i * p->max_seg_len, (uint64_t)len);

	return (struct rr_hdr_seg){g->stag, RR_MIN(len - off, p->max_seg_len), g->addr + off};
}

/* Appends the segments of the first @len bytes of registration @g to chunk
 * @c of @h, or with @c NULL as a Read chunk at @pos. 0 or -EMSGSIZE. */
static int segs_of(const struct rr_xprt_params *p, const struct rr_xprt_reg *g, uint32_t len,
		   struct rr_hdr *h, struct rr_hdr_chunk *c, uint32_t pos)
{
	uint32_t n = nsegs_for(p, len);
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		struct rr_hdr_seg s = seg_at(p, g, len, i);

		rc = c ? rr_hdr_add_seg(h, c, &s) : rr_hdr_add_read(h, pos, &s);
	}
	return rc;
}

/* Links @c at the head of its XID's chain (newest first). */
static void chain_add(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	unsigned b = bucket(c->xid);

	c->next = r->table[b];
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &r->table[b];
	r->table[b] = c;
}

/* Puts @c in the XID table (once): in r->solo when that is free (a chain
 * of one: c->pprev points at it, so that forget unlinks it as any), else
 * in its chain. A call in solo of the same XID moves to its chain first:
 * solo stays the newest of its XID, which rr_xprt_req_find relies on. */
static void table_add(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	if (!c->outstanding) {
		if (r->solo && r->solo->xid == c->xid) {
			chain_add(r, r->solo);
			r->solo = NULL;
		}
		if (!r->solo) {
			c->next = NULL;
			c->pprev = &r->solo;
			r->solo = c;
		} else {
			chain_add(r, c);
		}
		c->outstanding = true;
		r->outstanding++;
	}
}

/* The Send of a Short Call without chunks (prepare_short's form, however
 * planned: Short, no registration, no sink, one inline part) written in
 * one pass: the header's 28 bytes, then the part. Returns 1 when @c is not
 * of that form (nothing touched: the general builder writes it), else
 * rr_xprt_rqst_marshal's result, with the same bytes, statistics and XID
 * table. Proven equal to the general builder by test
 * xprt_short_call_as_general and by fuzz_xprt. */
static int marshal_short(struct rr_xprt_requester *r, struct rr_xprt_rqst *c, uint32_t credit,
			 uint8_t *buf, size_t cap)
{
	const struct rr_xprt_part *pt = c->desc.parts;
	int len;

	if (!c->one_part)   /* (the plan's finding: struct rr_xprt_rqst) */
		return 1;
	len = rr_hdr_encode_short(buf, cap, c->xid, credit);
	if (len < 0)
		return len;
	if (cap - (size_t)len < c->xdr_len || (size_t)len + c->xdr_len > r->params.call_inline)
		return -EMSGSIZE;
	if (pt->len <= RR_COPY_SMALL_MAX)
		rr_copy_small(buf + len, pt->base, pt->len);   /* a NULL's 40 bytes: no call */
	else
		memcpy(buf + len, pt->base, pt->len);
	if (r->stats) {
		r->stats->pullup_bytes += pt->len;
		r->stats->short_msgs++;
	}
	table_add(r, c);
	return len + (int)pt->len;
}

int rr_xprt_rqst_marshal(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			 uint32_t credit, uint8_t *buf, size_t cap)
{
	int rc = marshal_short(r, c, credit, buf, cap);

	if (RR_LIKELY(rc != 1))
		return rc;
	return rr_xprt_rqst_marshal_general(r, c, credit, buf, cap);
}

int rr_xprt_rqst_marshal_general(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
				 uint32_t credit, uint8_t *buf, size_t cap)
{
	const struct rr_xprt_params *p = &r->params;
	const struct rr_xprt_rqst_desc *d = &c->desc;
	struct rr_hdr *h = &r->hdr;
	uint32_t h_nwrites = c->results_inline ? 0 : d->nsinks;
	size_t off;
	int len = 0;

	for (unsigned i = 0; i < c->nregs; i++)
		if (!c->regs[i].valid)
			return -EINVAL;
	if (c->form == RR_XPRT_FORM_SHORT && c->nregs == 0) {
		/* no chunk (no registration): the short form's header, the
		 * bytes the builder below would encode (@h, scratch, is not
		 * filled: nothing reads it before the next decode into it) */
		len = rr_hdr_encode_short(buf, cap, c->xid, credit);
		goto payload;
	}
	rr_hdr_init(h, c->xid, credit, c->form == RR_XPRT_FORM_LONG ? RR_HDR_NOMSG : RR_HDR_MSG);
	if (c->pullup_reg >= 0)
		len = segs_of(p, &c->regs[c->pullup_reg], c->reduced_len, h, NULL, 0);
	for (unsigned k = 0; k < c->nitems && len == 0; k++) {
		if (c->item_reg[k] < 0)
			continue;
		const struct rr_xprt_reg *g = &c->regs[c->item_reg[k]];

		len = segs_of(p, g, (uint32_t)g->len, h, NULL, c->item_pos[k]);
	}
	for (unsigned i = 0; i < h_nwrites && len == 0; i++) {
		len = rr_hdr_add_write(h, NULL, 0);
		if (len == 0)
			len = segs_of(p, &c->regs[c->sink_reg[i]], d->sinks[i].len, h,
				      &h->write[i], 0);
	}
	if (c->reply_reg >= 0 && len == 0) {
		len = rr_hdr_add_reply(h, NULL, 0);
		if (len == 0)
			len = segs_of(p, &c->regs[c->reply_reg], c->reply_len, h, &h->reply, 0);
	}
	if (len == 0)
		len = rr_hdr_encode_buf(h, buf, cap);
payload:
	if (len < 0)
		return len;
	off = (size_t)len;
	if (c->form != RR_XPRT_FORM_LONG) {
		size_t need = c->form == RR_XPRT_FORM_SHORT ? c->xdr_len : c->reduced_len;

		if (cap - off < need || off + need > p->call_inline)
			return -EMSGSIZE;
		for (unsigned i = 0; i < d->nparts; i++) {
			const struct rr_xprt_part *pt = &d->parts[i];

			if (pt->ddp && c->form != RR_XPRT_FORM_SHORT)
				continue;
			if (pt->len)
				memcpy(buf + off, pt->base, pt->len);
			off += pt->len;
			if (pt->ddp && (pt->len & 3)) {
				memcpy(buf + off, rr_xprt_zero_pad, 4 - (pt->len & 3));
				off += 4 - (pt->len & 3);
			}
		}
	}
	if (r->stats) {
		struct rr_xprt_stats *s = r->stats;

		/* sends: counted by the caller once the Send is posted */
		s->pullup_bytes += off - (size_t)len;
		if (c->form == RR_XPRT_FORM_SHORT && !h_nwrites && c->reply_reg < 0)
			s->short_msgs++;
		else if (c->form == RR_XPRT_FORM_LONG)
			s->long_msgs++;
		else
			s->chunked_msgs++;
		for (unsigned k = 0; k < c->nitems; k++)
			if (c->item_reg[k] >= 0) {
				s->read_chunks++;
				s->total_rdma_req += c->regs[c->item_reg[k]].len;
			}
		if (c->pullup_reg >= 0) {
			s->read_chunks++;
			s->total_rdma_req += c->reduced_len;
		}
		s->write_chunks += h_nwrites;
		if (c->reply_reg >= 0)
			s->reply_chunks++;
	}
	table_add(r, c);
	return (int)off;
}

/* Checks the segments a Reply @h returns in chunk @got for a chunk we
 * provisioned (the first @len bytes of @reg, split as segs_of() splits
 * them): same handles and offsets in order, lengths within ours, filled
 * contiguously (only the last non-empty segment may be partial; Linux
 * returns unused trailing segments with length 0, which we accept). Returns
 * the byte count or -EBADMSG. */
static int64_t check_chunk(const struct rr_hdr *h, const struct rr_hdr_chunk *got,
			   const struct rr_xprt_params *p, const struct rr_xprt_reg *reg,
			   uint32_t len)
{
	int64_t total = 0;
	bool partial = false;

	if (got->nsegs > nsegs_for(p, len))
		return -EBADMSG;
	for (uint32_t i = 0; i < got->nsegs; i++) {
		const struct rr_hdr_seg *g = &h->segs[got->first + i];
		struct rr_hdr_seg mine = seg_at(p, reg, len, i);

		if (g->handle != mine.handle || g->offset != mine.offset ||
		    g->length > mine.length)
			return -EBADMSG;
		if (partial && g->length)
			return -EBADMSG;
		if (g->length < mine.length)
			partial = true;
		total += g->length;
	}
	return total;
}

static bool mark_inv(struct rr_xprt_rqst *c, uint32_t stag)
{
	bool found = false;

	for (unsigned i = 0; c && i < c->nregs; i++) {
		if (c->regs[i].stag == stag && c->regs[i].valid) {
			c->regs[i].valid = false;
			found = true;
		}
	}
	return found;
}

/* The peer invalidated @stag. Normally it belongs to the Reply's Call; a
 * peer that names another Call's STag has invalidated that one (RNICs do
 * not check ownership by XID): record it there so that it is not
 * invalidated again locally (which an iWARP RNIC would treat as an error).
 * Returns the other Call, if any. */
static struct rr_xprt_rqst *note_inv(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
				     uint32_t stag)
{
	struct rr_xprt_rqst *other = NULL;
	bool found = mark_inv(c, stag);

	if (!found) {
		if (r->solo && r->solo != c && mark_inv(r->solo, stag))
			other = r->solo;
		for (unsigned b = 0; b < RR_ARRAY_SIZE(r->table) && !other; b++)
			for (struct rr_xprt_rqst *o = r->table[b]; o && !other; o = o->next)
				if (o != c && mark_inv(o, stag))
					other = o;
	}
	if (r->stats) {
		if (found)
			r->stats->remote_inv++;
		else
			r->stats->bad_remote_inv++;
	}
	return other;
}

/* The Write list of Reply @h against the Write chunks @c provisioned: each
 * one ours, within what we offered; the bytes placed per sink go to @out.
 * 0, or -EBADMSG. */
static int check_writes(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			const struct rr_hdr *h, struct rr_xprt_reply *out)
{
	for (uint32_t i = 0; i < h->nwrite; i++) {
		int64_t got = check_chunk(h, &h->write[i], &r->params, &c->regs[c->sink_reg[i]],
					  c->desc.sinks[i].len);

		if (got < 0)
			return -EBADMSG;
		out->sink_len[i] = (uint32_t)got;
		out->sink_placed[i] = h->write[i].nsegs != 0;
		if (r->stats)
			r->stats->total_rdma_rep += (uint64_t)got;
	}
	return 0;
}

/* @out says R_DROP and nothing else: every field before sink_len cleared
 * (the per-sink ones are read only up to nsinks, 0 now; the segments only
 * up to pull_nsegs, 0 now). */
static void reply_reset(struct rr_xprt_reply *out)
{
	memset(out, 0, offsetof(struct rr_xprt_reply, sink_len));
	out->kind = RR_XPRT_R_DROP;
}

_Static_assert(offsetof(struct rr_xprt_reply, sink_len) <= 64,
	       "a Reply's cleared fields within 64 bytes");

void rr_xprt_req_recv(struct rr_xprt_requester *r, const uint8_t *buf, size_t len,
		      bool has_inv, uint32_t inv_stag, struct rr_xprt_reply *out)
{
	rr_xprt_req_recv_found(r, len >= 4 ? rr_xprt_req_find(r, rr_get_be32(buf)) : NULL, buf,
			       len, has_inv, inv_stag, out);
}

/* The common Reply checked in one pass: its header the short form
 *   xid - 1 - credit - RDMA_MSG - 0 - 0 - 0 | xid - REPLY ...
 * (RFC 8166 4.2, three empty lists; the Payload an RPC Reply, RFC 5531,
 * of at least its XID and msg_type) within the receive inline threshold,
 * for Call @c found by that XID, without invalidation (@has_inv false).
 * Whatever @c provisioned, such a Reply is accepted by the general checks
 * (no chunk comes back: a Write chunk left unused, a Reply chunk unused):
 * @out is filled as rr_xprt_req_recv_found_general fills it, the same
 * counters are counted and @c leaves the XID table. False: nothing
 * touched, the general way decides. Proven equal to it by test
 * xprt_reply_short_as_general and by fuzz_xprt. */
bool rr_xprt_req_recv_short(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			    const uint8_t *buf, size_t len, bool has_inv,
			    struct rr_xprt_reply *out)
{
	uint32_t credit;

	if (!c || has_inv || len < RR_HDR_MIN_MSG_SIZE + 8 || len > r->lim.inline_threshold ||
	    rr_get_be32(buf) != c->xid || rr_get_be32(buf + 4) != RR_HDR_VERSION ||
	    rr_get_be32(buf + 12) != RR_HDR_MSG ||
	    (rr_get_be32(buf + 16) | rr_get_be32(buf + 20) | rr_get_be32(buf + 24)) != 0 ||
	    rr_get_be32(buf + RR_HDR_MIN_MSG_SIZE) != c->xid ||
	    rr_get_be32(buf + RR_HDR_MIN_MSG_SIZE + 4) != 1u)
		return false;
	credit = rr_get_be32(buf + 8);
	/* every field reply_reset clears, each stored once with its value
	 * (not the reset's 40-byte clear and then the stores: gcc makes that
	 * clear a `rep stos`, which callgrind counts per word; issue 16 part
	 * HD). A field added before sink_len is to be set here too: the
	 * assertion sums the sizes of the fields set (no other, no hole). */
#define RS_SZ(f) sizeof(((struct rr_xprt_reply *)0)->f)
	_Static_assert(RS_SZ(kind) + RS_SZ(credit) + RS_SZ(call) + RS_SZ(payload) +
				       RS_SZ(inv_other) + RS_SZ(err) + RS_SZ(payload_len) +
				       RS_SZ(nsinks) + RS_SZ(xid) + RS_SZ(pull_nsegs) +
				       RS_SZ(pull_len) + RS_SZ(pull_stag) + RS_SZ(pull_inv) +
				       RS_SZ(long_reply) ==
			       offsetof(struct rr_xprt_reply, long_reply) + sizeof(bool),
		       "recv_short sets every field that reply_reset clears");
#undef RS_SZ
	out->kind = RR_XPRT_R_REPLY;
	out->credit = credit ? credit : 1;
	out->call = c;
	out->payload = buf + RR_HDR_MIN_MSG_SIZE;
	out->inv_other = NULL;
	out->err = 0;
	out->payload_len = (uint32_t)(len - RR_HDR_MIN_MSG_SIZE);
	out->nsinks = c->desc.nsinks;
	out->xid = 0;
	out->pull_nsegs = 0;
	out->pull_len = 0;
	out->pull_stag = 0;
	out->pull_inv = false;
	out->long_reply = false;
	if (out->nsinks) {
		memset(out->sink_len, 0, out->nsinks * sizeof(out->sink_len[0]));
		memset(out->sink_placed, 0, out->nsinks * sizeof(out->sink_placed[0]));
	}
	if (r->stats)
		r->stats->recvs++;
	rqst_forget(r, c);
	return true;
}

void rr_xprt_req_recv_found(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			    const uint8_t *buf, size_t len, bool has_inv, uint32_t inv_stag,
			    struct rr_xprt_reply *out)
{
	if (RR_LIKELY(rr_xprt_req_recv_short(r, c, buf, len, has_inv, out)))
		return;
	rr_xprt_req_recv_found_general(r, c, buf, len, has_inv, inv_stag, out);
}

void rr_xprt_req_recv_found_general(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
				    const uint8_t *buf, size_t len, bool has_inv,
				    uint32_t inv_stag, struct rr_xprt_reply *out)
{
	const struct rr_xprt_params *p = &r->params;
	struct rr_xprt_stats *s = r->stats;
	struct rr_hdr *h = &r->hdr;
	struct rr_xprt_rqst *other = NULL;
	bool ok;

	reply_reset(out);
	if (s)
		s->recvs++;
	/* RFC 8166 5.5: a bad Reply header is discarded (never answered). */
	ok = rr_hdr_decode(h, buf, len, RR_HDR_DIR_REPLY, &r->lim) == 0;
	/* The peer already invalidated the STag, whatever else is wrong. */
	if (has_inv)
		other = note_inv(r, c, inv_stag);
	if (!ok) {
		if (s)
			s->bad_replies++;
		goto drop;
	}
	if (h->proc == RR_HDR_DONE)
		goto drop_quiet;
	if (!c) {
		if (s)
			s->bad_xids++;
		/* Reliable reply (draft 4.1.3): RDMA_DONE is owed even for an
		 * XID we no longer know. */
		if (h->nread && rr_rrep_req_reply(r, NULL, h, out) == 0) {
			out->inv_other = other;
			return;
		}
		goto drop_quiet;
	}
	out->call = c;
	out->credit = h->credit ? h->credit : 1;
	out->nsinks = c->desc.nsinks;
	if (out->nsinks) {
		memset(out->sink_len, 0, out->nsinks * sizeof(out->sink_len[0]));
		memset(out->sink_placed, 0, out->nsinks * sizeof(out->sink_placed[0]));
	}
	if (h->proc == RR_HDR_ERROR) {
		out->kind = RR_XPRT_R_ERROR;
		out->err = h->err == RR_HDR_ERR_VERS ? -EPROTONOSUPPORT : -EREMOTEIO;
		out->inv_other = other;
		if (s)
			s->err_received++;
		rr_xprt_rqst_forget(r, c);
		return;
	}
	/* A Read list in a Reply needs the reliable-reply extension (the
	 * codec only lets one through when it is negotiated). */
	/* Results conveyed inline: no Write chunk was provisioned, so none
	 * may come back. */
	if ((h->nread && !p->reliable_reply) ||
	    h->nwrite > (c->results_inline ? 0u : c->desc.nsinks))
		goto bad;
	if (check_writes(r, c, h, out))
		goto bad;
	if (h->nread) {
		/* Reliable reply: responder-provided Read chunk (proto/rrep.c). */
		if (rr_rrep_req_reply(r, c, h, out))
			goto bad;
		rr_xprt_rqst_forget(r, c);   /* its Reply is pulled now */
		out->inv_other = other;
		return;
	}
	if (h->proc == RR_HDR_NOMSG) {
		int64_t got;

		if (!h->has_reply || c->reply_reg < 0)
			goto bad;
		got = check_chunk(h, &h->reply, p, &c->regs[c->reply_reg], c->reply_len);
		if (got < 0)
			goto bad;
		out->payload = c->reply_buf;
		out->payload_len = (uint32_t)got;
		out->long_reply = true;
		if (s)
			s->total_rdma_rep += (uint64_t)got;
	} else {
		/* RDMA_MSG: a Reply chunk, if echoed at all, must be empty. */
		if (h->has_reply && (c->reply_reg < 0 || h->reply.length))
			goto bad;
		out->payload = buf + h->hdr_len;
		out->payload_len = (uint32_t)(len - h->hdr_len);
	}
	/* rdma_xid must be the XID of the RPC Reply it carries. */
	if (out->payload_len < 8 || rr_get_be32(out->payload) != c->xid ||
	    rr_get_be32(out->payload + 4) != 1u)
		goto bad;
	out->kind = RR_XPRT_R_REPLY;
	out->inv_other = other;
	rr_xprt_rqst_forget(r, c);
	return;
bad:
	if (s)
		s->bad_replies++;
drop:
	if (s)
		s->dropped++;
drop_quiet:
	reply_reset(out);
	out->inv_other = other;
}

void rr_xprt_rqst_release(struct rr_xprt_requester *r, struct rr_xprt_rqst *c)
{
	if (!c)
		return;
	rr_xprt_rqst_forget(r, c);
	free_bufs(r, c);
	rqst_put(r, c);
}
