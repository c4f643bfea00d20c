/* SPDX-License-Identifier: BSD-2-Clause */
/* Reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply-04): the requester's
 * reply-mechanism policy (section 5.3.1), the responder's Read-chunk Reply
 * (4.1 and 4.1.1: RDMA_NOMSG with a Position-zero Read chunk), the
 * requester's recognition of it and the check of the pulled Reply (4.1.2),
 * RDMA_DONE encoding and recognition (4.1.3), and the responder's table of
 * exposed Replies searchable by XID with timeouts (5.4.3). See rrep.h. */
#include "proto/rrep.h"

/* ---- policy (draft 5.3.1) ---- */

enum rr_rrep_mech rr_rrep_choose(const struct rr_xprt_params *p, size_t rep_hdr_max,
				 const struct rr_xprt_rqst_desc *d)
{
	uint64_t in = p->reply_inline;

	if (!p->reliable_reply)
		return rep_hdr_max + (uint64_t)d->max_reply > in ? RR_RREP_REPLY_CHUNK :
								  RR_RREP_SEND_ONLY;
	if (!d->max_unknown && rep_hdr_max + (uint64_t)d->max_reply <= in)
		return RR_RREP_SEND_ONLY;
	if (!d->max_unknown && rep_hdr_max + (uint64_t)d->min_reply > in)
		return RR_RREP_REPLY_CHUNK;
	return RR_RREP_READ_CHUNK;
}

/* ---- responder: the Read-chunk Reply ---- */

/* RDMA_NOMSG Reply with a responder-provided Read chunk (draft 4.1; RFC 8166
 * "Read List" with Position zero):
 *   xid - 1 - credit - RDMA_NOMSG(1)
 *   - { 1 - 0 (position) - handle - length - offset(8) } x nsegs - 0
 *   - Write list as echoed - 0 (no Reply chunk)
 * The read segments come first, so segment i's handle is at byte
 * 16 + 24 i + 8 and its offset at 16 + 24 i + 16. */
#define RREP_SEG_AT(i) (RR_HDR_FIXED_SIZE + RR_HDR_READ_SEG_SIZE * (i))

int rr_rrep_rsp_build(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		      struct rr_hdr *h, const struct rr_xprt_part *parts, unsigned nparts,
		      uint64_t reduced, uint8_t *buf, size_t cap,
		      struct rr_xprt_reply_plan *plan)
{
	const struct rr_xprt_params *p = &s->params;
	uint32_t len, seg_len, nsegs, maxs, off = 0;
	unsigned k = 0;
	size_t hlen;
	uint8_t *pb;
	int n;

	if (reduced > UINT32_MAX / 2)
		return -EMSGSIZE;
	len = (uint32_t)reduced;
	seg_len = p->max_seg_len ? p->max_seg_len : 1u << 20;
	maxs = RR_MIN(p->max_segs ? p->max_segs : 16u, RR_XPRT_MAX_READS);
	nsegs = len ? (uint32_t)(((uint64_t)len + seg_len - 1) / seg_len) : 1;
	if (nsegs > maxs) {
		/* Longer segments rather than more of them. */
		seg_len = (uint32_t)RR_ALIGN4(((uint64_t)len + maxs - 1) / maxs);
		nsegs = (uint32_t)(((uint64_t)len + seg_len - 1) / seg_len);
	}
	/* @h has no Read chunk and no Reply chunk yet (the Reply fitted in
	 * neither inline nor a Reply chunk). */
	h->proc = RR_HDR_NOMSG;
	for (uint32_t i = 0; i < nsegs; i++) {
		uint64_t o = (uint64_t)i * seg_len;
		struct rr_hdr_seg g = {0, (uint32_t)RR_MIN((uint64_t)seg_len, len - o), o};

		if (rr_hdr_add_read(h, 0, &g))
			return -EMSGSIZE;   /* beyond the header model */
	}
	hlen = rr_hdr_encoded_size(h);
	if (hlen > p->reply_inline || hlen > cap)
		return -EMSGSIZE;
	pb = rr_alloc(s->env, len ? len : 4);
	if (!pb)
		return -ENOMEM;
	/* The Payload stream: everything not placed in a Write chunk, a
	 * DDP-eligible item inline with its XDR pad (RFC 8166 3.4.3). */
	for (unsigned i = 0; i < nparts; i++) {
		const struct rr_xprt_part *pt = &parts[i];

		if (pt->ddp && k++ < rc->hdr.nwrite)
			continue;
		if (pt->len)
			memcpy(pb + off, pt->base, pt->len);
		off += pt->len;
		if (pt->ddp && (pt->len & 3)) {
			memset(pb + off, 0, 4 - (pt->len & 3));
			off += 4 - (pt->len & 3);
		}
	}
	n = rr_hdr_encode_buf(h, buf, cap);
	if (n < 0 || off != len) {
		rr_free(s->env, pb);
		return n < 0 ? n : -EINVAL;
	}
	plan->send_len = (uint32_t)n;
	plan->proc = RR_HDR_NOMSG;
	plan->is_error = false;
	plan->read_chunk = true;
	plan->rr_buf = pb;
	plan->rr_len = len;
	plan->rr_nsegs = nsegs;
	plan->rr_seg_len = seg_len;
	if (s->stats) {
		struct rr_xprt_stats *st = s->stats;

		st->sends++;
		st->long_msgs++;
		st->rrep_exposed++;
		for (uint32_t i = 0; i < h->nwrite; i++)
			if (h->write[i].nsegs)
				st->write_chunks++;
		st->rdma_write_bytes += plan->write_bytes;
		st->total_rdma_rep += plan->write_bytes;
		st->pullup_bytes += len;
	}
	return 0;
}

void rr_rrep_rsp_patch(uint8_t *buf, const struct rr_xprt_reply_plan *plan, uint32_t stag,
		       uint64_t addr)
{
	for (uint32_t i = 0; i < plan->rr_nsegs; i++) {
		uint8_t *g = buf + RREP_SEG_AT(i);

		rr_put_be32(g + 8, stag);
		rr_put_be64(g + 16, addr + (uint64_t)i * plan->rr_seg_len);
	}
}

/* RDMA_DONE (draft 4.1.3; RFC 8166 rdma_proc 3): xid - 1 - credit - 3 */
bool rr_rrep_is_done(const uint8_t *buf, size_t len, uint32_t *xid)
{
	if (len < RR_HDR_DONE_SIZE || rr_get_be32(buf + 4) != RR_HDR_VERSION ||
	    rr_get_be32(buf + 12) != RR_HDR_DONE)
		return false;
	*xid = rr_get_be32(buf);
	return true;
}

int rr_rrep_encode_done(uint32_t xid, uint32_t credit, uint8_t *buf, size_t cap)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, buf, cap);
	return rr_hdr_encode_done(&e, xid, credit) ? -EMSGSIZE : (int)RR_HDR_DONE_SIZE;
}

/* ---- requester ---- */

int rr_rrep_req_reply(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
		      const struct rr_hdr *h, struct rr_xprt_reply *out)
{
	const struct rr_hdr_chunk *ck = &h->read[0];
	const struct rr_hdr_seg *segs = &h->segs[ck->first];
	uint64_t total = 0;
	bool one = true;
	uint32_t n = 0;
	uint32_t max = r->params.max_pull ? r->params.max_pull : 1u << 28;

	/* one Read chunk, at Position zero (the codec's Read chunks are
	 * grouped by position), and no Reply chunk */
	if (h->proc != RR_HDR_NOMSG || h->nread != 1 || ck->position != 0 || h->has_reply ||
	    ck->nsegs > RR_XPRT_MAX_READS)
		return -EBADMSG;
	for (uint32_t i = 0; i < ck->nsegs; i++) {
		total += segs[i].length;
		if (segs[i].handle != segs[0].handle)
			one = false;
	}
	out->kind = RR_XPRT_R_PULL;
	out->call = c;
	out->xid = h->xid;
	out->credit = h->credit ? h->credit : 1;
	out->long_reply = true;
	out->pull_len = (uint32_t)RR_MIN(total, (uint64_t)UINT32_MAX);
	out->pull_inv = one;
	out->pull_stag = segs[0].handle;
	out->err = 0;
	if (c && total >= 8 && total <= max) {
		for (uint32_t i = 0; i < ck->nsegs; i++)
			if (segs[i].length)
				out->pull_segs[n++] = segs[i];
	} else if (c) {
		/* Cannot be an RPC Reply we can take: complete the call with
		 * an error; RDMA_DONE is still owed. */
		out->err = total > max ? -EMSGSIZE : -EBADMSG;
		if (r->stats)
			r->stats->bad_replies++;
	}
	out->pull_nsegs = n;
	if (c)
		out->nsinks = c->desc.nsinks;   /* the caller forgets @c */
	return 0;
}

void rr_xprt_req_pulled(struct rr_xprt_requester *r, struct rr_xprt_rqst *c,
			const uint8_t *buf, uint32_t len, struct rr_xprt_reply *out)
{
	out->call = c;
	if (len < 8 || rr_get_be32(buf) != c->xid || rr_get_be32(buf + 4) != 1u) {
		out->kind = RR_XPRT_R_DROP;
		if (r->stats) {
			r->stats->bad_replies++;
			r->stats->dropped++;
		}
		return;
	}
	out->kind = RR_XPRT_R_REPLY;
	out->payload = buf;
	out->payload_len = len;
	out->long_reply = true;
	if (r->stats) {
		r->stats->rrep_pulled++;
		r->stats->total_rdma_rep += len;
	}
}

/* ---- responder's table ---- */

static unsigned bucket(uint32_t xid)
{
	return (xid ^ (xid >> 6) ^ (xid >> 12)) & 63u;
}

void rr_rrep_table_init(struct rr_rrep_table *t, const struct rpcrdma_env *env,
			uint64_t timeout_ns, struct rr_xprt_stats *stats)
{
	memset(t, 0, sizeof(*t));
	t->env = env;
	t->timeout_ns = timeout_ns;
	t->stats = stats;
}

struct rr_rrep_entry *rr_rrep_add(struct rr_rrep_table *t, uint32_t xid, uint32_t stag,
				  void *user)
{
	struct rr_rrep_entry *e = rr_zalloc(t->env, sizeof(*e));
	unsigned b = bucket(xid);

	if (!e)
		return NULL;
	e->xid = xid;
	e->stag = stag;
	e->stag_valid = true;
	e->user = user;
	e->expires_ns = t->timeout_ns ? rr_now_ns(t->env) + t->timeout_ns : UINT64_MAX;
	e->hnext = t->hash[b];
	t->hash[b] = e;
	e->older = t->newest;
	if (t->newest)
		t->newest->newer = e;
	else
		t->oldest = e;
	t->newest = e;
	t->count++;
	return e;
}

static void unlink_entry(struct rr_rrep_table *t, struct rr_rrep_entry *e)
{
	struct rr_rrep_entry **pp;

	for (pp = &t->hash[bucket(e->xid)]; *pp; pp = &(*pp)->hnext)
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	if (e->older)
		e->older->newer = e->newer;
	else
		t->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		t->newest = e->older;
	e->hnext = e->older = e->newer = NULL;
	t->count--;
}

/* The oldest entry waiting for @xid (the hash chain holds newest first). */
static struct rr_rrep_entry *find_xid(struct rr_rrep_table *t, uint32_t xid)
{
	struct rr_rrep_entry *found = NULL;

	for (struct rr_rrep_entry *e = t->hash[bucket(xid)]; e; e = e->hnext)
		if (e->xid == xid)
			found = e;
	return found;
}

static struct rr_rrep_entry *find_stag(struct rr_rrep_table *t, uint32_t stag)
{
	for (struct rr_rrep_entry *e = t->oldest; e; e = e->newer)
		if (e->stag == stag && e->stag_valid)
			return e;
	return NULL;
}

struct rr_rrep_entry *rr_rrep_find_stag(struct rr_rrep_table *t, uint32_t stag)
{
	return find_stag(t, stag);
}

void rr_rrep_on_done(struct rr_rrep_table *t, uint32_t xid, bool has_inv, uint32_t inv_stag,
		     struct rr_rrep_done *out)
{
	struct rr_rrep_entry *e = find_xid(t, xid);

	memset(out, 0, sizeof(*out));
	if (has_inv) {
		struct rr_rrep_entry *owner = find_stag(t, inv_stag);

		if (owner)
			owner->stag_valid = false;   /* the provider invalidated it */
		if (owner && owner->xid == xid) {
			e = owner;
		} else {
			out->forged = true;
			out->stolen = owner;
			if (t->stats)
				t->stats->rrep_done_forged++;
		}
	}
	if (!e) {
		out->unknown = true;
		if (t->stats)
			t->stats->rrep_done_unknown++;
		return;
	}
	unlink_entry(t, e);
	out->release = e;
	if (t->stats)
		t->stats->rrep_done_matched++;
}

struct rr_rrep_entry *rr_rrep_expire(struct rr_rrep_table *t, uint64_t now)
{
	struct rr_rrep_entry *e = t->oldest;

	if (!e || e->expires_ns > now)
		return NULL;
	unlink_entry(t, e);
	if (t->stats)
		t->stats->rrep_expired++;
	return e;
}

struct rr_rrep_entry *rr_rrep_pop(struct rr_rrep_table *t)
{
	struct rr_rrep_entry *e = t->oldest;

	if (!e)
		return NULL;
	unlink_entry(t, e);
	if (t->stats)
		t->stats->rrep_fenced++;
	return e;
}

void rr_rrep_remove(struct rr_rrep_table *t, struct rr_rrep_entry *e)
{
	unlink_entry(t, e);
}

uint64_t rr_rrep_next_expiry(const struct rr_rrep_table *t)
{
	return t->oldest ? t->oldest->expires_ns : UINT64_MAX;
}

void rr_rrep_entry_free(struct rr_rrep_table *t, struct rr_rrep_entry *e)
{
	rr_free(t->env, e);
}
