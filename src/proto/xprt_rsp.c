/* SPDX-License-Identifier: BSD-2-Clause */
/* The responder half of the RPC-over-RDMA v1 transport core (RFC 8166 section
 * 3.5 "Message Size", 3.4.5 "Read Chunks" with XDR round-up, 3.4.6 "Write
 * Chunks" (contiguous fill, consumed segments only, unused chunks as count 0,
 * no pad bytes), 3.4.7 "Reply Chunk" (Long Reply), 4.5 "Error Handling"
 * (ERR_VERS 1..1, ERR_CHUNK), remote invalidation per RFC 8797 section 4 and
 * draft-cel-nfsv4-rpcrdma-remote-invalidation). Calls are decoded by the
 * header codec, whose struct rr_hdr groups the Read list into chunks by
 * Position; Replies are built in the same struct. See xprt.h. */
#include "proto/rrep.h"
#include "proto/xprt.h"

/* What a Call's decoding resets (the context's scalars, then the header's
 * up to its Reply chunk: rcall_get, rr_hdr_decode) is the first 128 bytes
 * of a line-aligned context: two cache lines (issue 16 part FD; three or
 * four before, 152 bytes from a 16-byte aligned start). */
_Static_assert(offsetof(struct rr_xprt_rcall, hdr) + RR_HDR_RESET <= 128,
	       "rr_xprt_rcall: the scalars reset per Call beyond two cache lines");
/* What a Call reads or writes of the responder core (stats, shared, params,
 * lim) comes first, in 84 bytes, its own spares' counts and the spare
 * contexts' array (whose first entries are the ones in use) right after
 * (issue 16 part EB: three lines, not five; part GF's @shared, looked at
 * first; part HF: the own spares' counts, read only when the shared ones
 * are empty or full, after lim). */
_Static_assert(offsetof(struct rr_xprt_responder, stats) == 0 &&
		       offsetof(struct rr_xprt_responder, shared) == 8 &&
		       offsetof(struct rr_xprt_responder, params) == 16 &&
		       offsetof(struct rr_xprt_responder, lim) ==
			       16 + sizeof(struct rr_xprt_params) &&
		       offsetof(struct rr_xprt_responder, lim) + sizeof(struct rr_hdr_limits) <=
			       offsetof(struct rr_xprt_responder, spares) &&
		       offsetof(struct rr_xprt_responder, spares) <= 112 &&
		       offsetof(struct rr_xprt_responder, small) >
			       offsetof(struct rr_xprt_responder, spares),
	       "rr_xprt_responder: the per-call fields not first, in 84 bytes");
/* A Call's Read chunks are its inline pieces' separators: one rebuilt item
 * each (item_pos[], item_len[]), one copy between two of them (copies[]). */
_Static_assert(RR_HDR_MAX_READ_CHUNKS <= RR_XPRT_MAX_ITEMS,
	       "a Call context holds an item per Read chunk");

static const uint8_t rr_xprt_zeros[4];

void rr_xprt_rsp_init(struct rr_xprt_responder *s, const struct rpcrdma_env *env,
		      const struct rr_xprt_params *p, struct rr_xprt_stats *stats)
{
	memset(s, 0, sizeof(*s));
	s->env = env;
	s->params = *p;
	s->stats = stats;
	/* RDMA_DONE reaches the session before this core (proto/conn): here
	 * it is a message the core does not take, never the extension's. */
	rr_xprt_hdr_limits(&s->lim, p->call_inline, p->max_call, false);
}

void rr_xprt_rsp_keep_spares(struct rr_xprt_responder *s, unsigned n)
{
	s->max_spares = RR_MIN(n, RR_XPRT_RSP_SPARES);
}

void rr_xprt_rsp_share(struct rr_xprt_responder *s, struct rr_xprt_rsp_shared *sh)
{
	s->shared = sh;
}

void rr_xprt_rsp_shared_drain(struct rr_xprt_rsp_shared *sh, const struct rpcrdma_env *env)
{
	while (sh->nctxs)
		rr_free_line(env, sh->ctxs[--sh->nctxs]);
	while (sh->nbufs)
		rr_free(env, sh->bufs[--sh->nbufs]);
}

void rr_xprt_rsp_fini(struct rr_xprt_responder *s)
{
	while (s->nspares)
		rr_free_line(s->env, s->spares[--s->nspares]);
	rr_free(s->env, s->spare_buf);
	s->spare_buf = NULL;
	s->spare_buf_cap = 0;
	while (s->nsmall)
		rr_free(s->env, s->small[--s->nsmall]);
	s->max_spares = 0;
}

/* A Call context, a spare one or a new one, with its scalars zeroed (the
 * header and arrays behind them are only read below the counts set while
 * parsing; zeroing all of it per Call, ~21 KiB with the transport's former
 * header representation, was most of a NULL Call's work). */
static struct rr_xprt_rcall *rcall_get(struct rr_xprt_responder *s)
{
	struct rr_xprt_rcall *rc;

	if (s->shared && s->shared->nctxs)
		rc = s->shared->ctxs[--s->shared->nctxs];
	else if (s->nspares)
		rc = s->spares[--s->nspares];
	else
		rc = rr_alloc_line(s->env, sizeof(*rc));
	if (rc)
		memset(rc, 0, offsetof(struct rr_xprt_rcall, hdr));
	return rc;
}

/* The rebuilt-Call buffer of @len bytes (> 0): the kept one if it is large
 * enough, or a new one. Its bytes are all overwritten before the Call is
 * delivered (inline copies, RDMA Reads, zero padding). */
static uint8_t *cbuf_get(struct rr_xprt_responder *s, uint32_t len, uint32_t *cap)
{
	uint8_t *b;

	if (len <= RR_XPRT_RSP_SMALL_BUF && s->shared && s->shared->nbufs) {
		*cap = RR_XPRT_RSP_SMALL_BUF;
		return s->shared->bufs[--s->shared->nbufs];
	}
	if (s->spare_buf && s->spare_buf_cap >= len) {
		b = s->spare_buf;
		*cap = s->spare_buf_cap;
		s->spare_buf = NULL;
		s->spare_buf_cap = 0;
		return b;
	}
	if (len <= RR_XPRT_RSP_SMALL_BUF && s->nsmall) {
		*cap = RR_XPRT_RSP_SMALL_BUF;
		return s->small[--s->nsmall];
	}
	if (len <= RR_XPRT_RSP_SMALL_BUF && s->max_spares)
		len = RR_XPRT_RSP_SMALL_BUF;   /* interchangeable once kept */
	b = rr_alloc(s->env, len);
	*cap = b ? len : 0;
	return b;
}

/* A small buffer goes to the small slots (or is freed): true when @b was
 * of the small size. */
static bool small_put(struct rr_xprt_responder *s, uint8_t *b, uint32_t cap)
{
	if (cap != RR_XPRT_RSP_SMALL_BUF)
		return false;
	if (s->nsmall < RR_XPRT_RSP_SMALL_BUFS)
		s->small[s->nsmall++] = b;
	else
		rr_free(s->env, b);
	return true;
}

void rr_xprt_rcall_buf_keep(struct rr_xprt_responder *s, uint8_t *b, uint32_t cap)
{
	if (!b)
		return;
	if (!s->max_spares || cap > RR_XPRT_RSP_BUF_KEEP) {
		rr_free(s->env, b);
		return;
	}
	if (cap <= s->spare_buf_cap) {
		if (!small_put(s, b, cap))
			rr_free(s->env, b);
		return;
	}
	/* Keep the larger of the two; the other as a small one if it is. */
	if (s->spare_buf && !small_put(s, s->spare_buf, s->spare_buf_cap))
		rr_free(s->env, s->spare_buf);
	s->spare_buf = b;
	s->spare_buf_cap = cap;
}

static enum rr_xprt_rsp_action answer(struct rr_xprt_responder *s, uint32_t xid,
				      uint32_t vers, uint32_t grant, uint32_t err,
				      uint8_t *err_msg, size_t *err_len)
{
	int n = rr_hdr_encode_error_buf(xid, vers, grant ? grant : 1, err, err_msg, 28);

	if (n < 0)
		return RR_XPRT_A_DROP;
	*err_len = (size_t)n;
	if (s->stats) {
		s->stats->sends++;
		if (err == RR_HDR_ERR_VERS)
			s->stats->err_vers_sent++;
		else
			s->stats->err_chunk_sent++;
	}
	return RR_XPRT_A_ERROR;
}

void rr_xprt_rcall_keep(struct rr_xprt_responder *s, struct rr_xprt_rcall *rc)
{
	if (s->nspares < s->max_spares)
		s->spares[s->nspares++] = rc;
	else
		rr_free_line(s->env, rc);
}

/* The RDMA Reads of chunk @c into rc->buf at @off, one per non-empty
 * segment. */
static void add_reads(struct rr_xprt_rcall *rc, const struct rr_hdr *h,
		      const struct rr_hdr_chunk *c, uint32_t off)
{
	/* rc->reads[] holds RR_XPRT_MAX_READS: the decoding limit of the
	 * whole Read list (rr_xprt_hdr_limits) */
	for (uint32_t j = 0; j < c->nsegs; j++) {
		const struct rr_hdr_seg *g = &h->segs[c->first + j];

		if (!g->length)
			continue;
		rc->reads[rc->nreads].stag = g->handle;
		rc->reads[rc->nreads].remote = g->offset;
		rc->reads[rc->nreads].len = g->length;
		rc->reads[rc->nreads].local_off = off;
		rc->nreads++;
		off += g->length;
	}
}

/* Lays out the rebuilt stream of @rc (@total bytes): the inline pieces
 * (@ilen bytes at @src, or in the staging area after the stream when @src
 * is NULL: a Long Call) between the Read chunks h->read[@first..nread) at
 * their positions, each chunk followed by zeros up to a multiple of four;
 * the Reads that fill them; a Long Call's position-zero chunk read into the
 * staging area. -EBADMSG for overlapping chunks or a position beyond the
 * message (the codec has rejected both already: RFC 8166 4.4.5). */
static int lay_out(struct rr_xprt_rcall *rc, const struct rr_hdr *h, unsigned first,
		   const uint8_t *src, uint64_t ilen, uint64_t total)
{
	const struct rr_hdr_chunk *ch = h->read;
	uint32_t out_off = 0, consumed = 0;

	if (first == h->nread && src) {
		/* an RDMA_MSG without Read chunks: its inline part is the
		 * whole stream, one copy (the loop below would record it in
		 * copies[] and copy it from there) */
		memcpy(rc->buf, src, (size_t)ilen);
		return 0;
	}
	for (unsigned i = first; i < h->nread; i++) {
		uint32_t gap;

		if (ch[i].position < out_off)
			return -EBADMSG;   /* overlapping chunks */
		gap = ch[i].position - out_off;
		if (gap > ilen - consumed)
			return -EBADMSG;   /* position beyond the message */
		rc->copies[rc->ncopies].dst = out_off;
		rc->copies[rc->ncopies].src = consumed;
		rc->copies[rc->ncopies].len = gap;
		rc->copies[rc->ncopies].from_stage = src == NULL;
		rc->ncopies++;
		consumed += gap;
		out_off += gap;
		rc->item_pos[rc->nitems] = out_off;
		rc->item_len[rc->nitems] = (uint32_t)ch[i].length;
		rc->nitems++;
		add_reads(rc, h, &ch[i], out_off);
		memset(rc->buf + out_off + ch[i].length, 0, RR_ALIGN4(ch[i].length) - ch[i].length);
		out_off += (uint32_t)RR_ALIGN4(ch[i].length);
	}
	rc->copies[rc->ncopies].dst = out_off;
	rc->copies[rc->ncopies].src = consumed;
	rc->copies[rc->ncopies].len = (uint32_t)(ilen - consumed);
	rc->copies[rc->ncopies].from_stage = src == NULL;
	rc->ncopies++;
	if (first) {
		/* The position-zero chunk is read into the staging area after
		 * the stream. */
		add_reads(rc, h, &ch[0], (uint32_t)total);
	} else {
		for (uint32_t i = 0; i < rc->ncopies; i++)
			if (rc->copies[i].len)
				memcpy(rc->buf + rc->copies[i].dst,
				       src + rc->copies[i].src, rc->copies[i].len);
		rc->ncopies = 0;
	}
	return 0;
}

/* The counters of a received Call. */
static void count_call(struct rr_xprt_stats *st, const struct rr_xprt_rcall *rc,
		       const struct rr_hdr *h)
{
	st->read_chunks += h->nread;
	st->rdma_read_bytes += rc->read_bytes;
	st->total_rdma_req += rc->read_bytes;
	if (h->proc == RR_HDR_NOMSG)
		st->long_msgs++;
	else if (h->nread || h->nwrite || h->has_reply)
		st->chunked_msgs++;
	else
		st->short_msgs++;
}

/* rr_xprt_rsp_assemble's work: inlined in rr_xprt_rsp_recv, where every
 * Call without Read chunks (a NULL Call's) ends (issue 16 part DH: out of
 * line it cost a call and its saved registers, ~20 instructions). */
static inline __attribute__((always_inline)) enum rr_xprt_rsp_action
assemble(struct rr_xprt_responder *s, struct rr_xprt_rcall *rc, uint32_t grant,
	 uint8_t *err_msg, size_t *err_len)
{
	uint32_t stage = rc->msg_len;

	*err_len = 0;
	for (uint32_t i = 0; i < rc->ncopies; i++)
		if (rc->copies[i].len)
			memmove(rc->buf + rc->copies[i].dst,
				rc->buf + stage + rc->copies[i].src, rc->copies[i].len);
	rc->ncopies = 0;
	/* rdma_xid must equal the XID of the RPC message (RFC 8166 4.2.1);
	 * a Call carries msg_type CALL. */
	if (rc->msg_len < 8 || rr_get_be32(rc->msg) != rc->xid)
		return answer(s, rc->xid, RR_HDR_VERSION, grant, RR_HDR_ERR_CHUNK, err_msg,
			      err_len);
	if (rr_get_be32(rc->msg + 4) != 0u) {
		/* A Reply travelling backwards (RFC 8167 backchannel): not
		 * supported, dropped. */
		if (s->stats)
			s->stats->dropped++;
		return RR_XPRT_A_DROP;
	}
	return RR_XPRT_A_DELIVER;
}

enum rr_xprt_rsp_action rr_xprt_rsp_recv(struct rr_xprt_responder *s,
					 const uint8_t *buf, size_t len,
					 uint32_t grant, uint8_t *err_msg,
					 size_t *err_len,
					 struct rr_xprt_rcall **out)
{
	struct rr_xprt_stats *st = s->stats;
	struct rr_xprt_rcall *rc;
	struct rr_hdr *h;
	unsigned first = 0;
	uint64_t total, ilen = 0, stage_len = 0;
	const uint8_t *src = NULL;

	*out = NULL;
	*err_len = 0;
	if (st)
		st->recvs++;
	rc = rcall_get(s);
	if (!rc) {
		/* no memory for the context: a Call (RDMA_MSG or RDMA_NOMSG
		 * of version 1) still gets an answer, ERR_CHUNK, never
		 * silence (docs/security.md) */
		if (len >= RR_HDR_MIN_MSG_SIZE && rr_get_be32(buf + 4) == RR_HDR_VERSION &&
		    (rr_get_be32(buf + 12) == RR_HDR_MSG || rr_get_be32(buf + 12) == RR_HDR_NOMSG)) {
			if (st)
				st->calls_refused++;
			return answer(s, rr_get_be32(buf), RR_HDR_VERSION, grant,
				      RR_HDR_ERR_CHUNK, err_msg, err_len);
		}
		if (st)
			st->dropped++;
		return RR_XPRT_A_DROP;
	}
	h = &rc->hdr;
	/* RFC 8166 5.5: the codec's verdict for a received Call. */
	(void)rr_hdr_decode(h, buf, len, RR_HDR_DIR_CALL, &s->lim);
	switch (h->verdict) {
	case RR_HDR_OK:
		break;
	case RR_HDR_REPLY_ERR_VERS:
	case RR_HDR_REPLY_ERR_CHUNK: {
		uint32_t xid = h->xid, vers = h->vers;
		uint32_t err = h->verdict == RR_HDR_REPLY_ERR_VERS ? RR_HDR_ERR_VERS
								  : RR_HDR_ERR_CHUNK;

		rr_xprt_rcall_release(s, rc);
		return answer(s, xid, vers, grant, err, err_msg, err_len);
	}
	default:
		goto drop;
	}
	/* RDMA_DONE without the reliable-reply extension, and RDMA_ERROR
	 * (a requester never sends one), are silently discarded. */
	if (h->proc == RR_HDR_DONE || h->proc == RR_HDR_ERROR)
		goto drop;
	rc->xid = h->xid;

	/* RDMA_NOMSG carries the Call in a position-zero Read chunk; RDMA_MSG
	 * carries it inline and must not have one. The codec's Read chunks
	 * are grouped by position, in increasing order. */
	if (h->proc == RR_HDR_NOMSG) {
		if (h->nread == 0 || h->read[0].position != 0)
			goto chunk_err;
		stage_len = h->read[0].length;
		ilen = stage_len;
		first = 1;
	} else {
		if (h->nread && h->read[0].position == 0)
			goto chunk_err;
		src = buf + h->hdr_len;
		ilen = len - h->hdr_len;
	}
	total = ilen;
	for (unsigned i = first; i < h->nread; i++)
		total += RR_ALIGN4(h->read[i].length);
	if (total > s->params.max_call || total + stage_len > UINT32_MAX)
		goto chunk_err;
	rc->buf_len = (uint32_t)(total + stage_len);
	rc->buf = cbuf_get(s, rc->buf_len ? rc->buf_len : 4, &rc->buf_cap);
	if (!rc->buf) {
		if (st)
			st->calls_refused++;
		goto chunk_err;   /* no memory: answered, not dropped */
	}

	if (lay_out(rc, h, first, src, ilen, total))
		goto chunk_err;
	for (uint32_t i = 0; i < rc->nreads; i++)
		rc->read_bytes += rc->reads[i].len;
	rc->msg = rc->buf;
	rc->msg_len = (uint32_t)total;
	if (st)
		count_call(st, rc, h);
	if (rc->nreads == 0) {
		/* Everything is here: check the Call now. */
		enum rr_xprt_rsp_action a = assemble(s, rc, grant, err_msg, err_len);

		if (a != RR_XPRT_A_DELIVER) {
			rr_xprt_rcall_release(s, rc);
			return a;
		}
	}
	*out = rc;
	return rc->nreads ? RR_XPRT_A_READ : RR_XPRT_A_DELIVER;

chunk_err: {
	uint32_t xid = h->xid;

	rr_xprt_rcall_release(s, rc);
	return answer(s, xid, RR_HDR_VERSION, grant, RR_HDR_ERR_CHUNK, err_msg, err_len);
}
drop:
	if (st)
		st->dropped++;
	rr_xprt_rcall_release(s, rc);
	return RR_XPRT_A_DROP;
}

enum rr_xprt_rsp_action rr_xprt_rsp_assemble(struct rr_xprt_responder *s,
					     struct rr_xprt_rcall *rc,
					     uint32_t grant, uint8_t *err_msg,
					     size_t *err_len)
{
	return assemble(s, rc, grant, err_msg, err_len);
}

/* Cursor filling a chunk's segments in order with RDMA Writes: chunk
 * @chunk of the Call's header @h. */
struct fill {
	const struct rr_hdr *h;
	const struct rr_hdr_chunk *chunk;
	uint32_t seg, seg_off;
	uint64_t cap, used;
	struct rr_xprt_reply_plan *plan;
	uint32_t max_ops;
};

static int fill_bytes(struct fill *f, const uint8_t *src, uint32_t len)
{
	while (len) {
		const struct rr_hdr_seg *g;
		uint32_t l;

		if (f->seg >= f->chunk->nsegs)
			return -EMSGSIZE;
		g = &f->h->segs[f->chunk->first + f->seg];
		l = RR_MIN(len, g->length - f->seg_off);
		if (l) {
			struct rr_xprt_write_op *w;

			if (f->plan->nwrites == f->max_ops)
				return -EMSGSIZE;
			w = &f->plan->writes[f->plan->nwrites++];
			w->src = src;
			w->len = l;
			w->stag = g->handle;
			w->remote = g->offset + f->seg_off;
			f->plan->write_bytes += l;
			src += l;
			len -= l;
			f->seg_off += l;
			f->used += l;
		}
		if (f->seg_off == g->length) {
			f->seg++;
			f->seg_off = 0;
		}
	}
	return 0;
}

/* The consumed segments with their actual lengths, appended to chunk
 * @outc of the Reply's header @out (at most as many as the Call's chunk
 * has: they fit). */
static int fill_result(const struct fill *f, struct rr_hdr *out, struct rr_hdr_chunk *outc)
{
	uint64_t left = f->used;
	int rc = 0;

	for (uint32_t i = 0; i < f->chunk->nsegs && left && rc == 0; i++) {
		struct rr_hdr_seg g = f->h->segs[f->chunk->first + i];

		if (g.length > left)
			g.length = (uint32_t)left;
		left -= g.length;
		if (g.length)
			rc = rr_hdr_add_seg(out, outc, &g);
	}
	return rc;
}

static void fill_init(struct fill *f, const struct rr_hdr *h, const struct rr_hdr_chunk *c,
		      struct rr_xprt_reply_plan *plan)
{
	memset(f, 0, sizeof(*f));
	f->h = h;
	f->chunk = c;
	f->cap = c->length;
	f->plan = plan;
	f->max_ops = (uint32_t)RR_ARRAY_SIZE(plan->writes);
}

/* Picks the STag for Send With Invalidate: one registered by the requester
 * for this Call (Write chunk, Reply chunk, then Read chunk). */
static bool pick_inv(const struct rr_hdr *h, uint32_t *stag)
{
	for (uint32_t i = 0; i < h->nwrite; i++)
		if (h->write[i].nsegs) {
			*stag = h->segs[h->write[i].first].handle;
			return true;
		}
	if (h->has_reply && h->reply.nsegs) {
		*stag = h->segs[h->reply.first].handle;
		return true;
	}
	if (h->nread) {
		*stag = h->segs[h->read[0].first].handle;
		return true;
	}
	return false;
}

/* What happens when the Reply fits neither inline nor in a Reply chunk:
 * RFC 8166 section 3.5.4 -- ERR_CHUNK. (The reliable-reply extension will
 * offer a responder-provided Read chunk here.) */
static int rsp_reply_fallback(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
			      uint32_t grant, uint8_t *buf, size_t cap,
			      struct rr_xprt_reply_plan *plan)
{
	int n;

	plan->send_inv = false;
	plan->nwrites = 0;
	plan->write_bytes = 0;
	n = rr_hdr_encode_error_buf(rc->xid, RR_HDR_VERSION, grant, RR_HDR_ERR_CHUNK, buf, cap);
	if (n < 0)
		return n;
	plan->send_len = (uint32_t)n;
	plan->is_error = true;
	plan->proc = RR_HDR_ERROR;
	if (s->stats) {
		s->stats->sends++;
		s->stats->err_chunk_sent++;
	}
	return 0;
}

/* The reduced Reply exceeds every requester-provided reply resource (inline
 * threshold and Reply chunk). With reliable reply negotiated the responder
 * MUST expose it as a Position-zero Read chunk (draft 4.1.1, proto/rrep.c);
 * otherwise, or when even that header does not fit, ERR_CHUNK. @h holds the
 * Write list as echoed (DDP-eligible results already placed). */
static int rsp_reply_oversize(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
			      struct rr_hdr *h, const struct rr_xprt_part *parts,
			      unsigned nparts, uint64_t reduced, uint32_t grant, uint8_t *buf,
			      size_t cap, struct rr_xprt_reply_plan *plan)
{
	if (s->params.reliable_reply) {
		int n = rr_rrep_rsp_build(s, rc, h, parts, nparts, reduced, buf, cap, plan);

		if (n == 0) {
			if (s->params.local_r && s->params.peer_r)
				plan->send_inv = pick_inv(&rc->hdr, &plan->inv_stag);
			return 0;
		}
		if (n != -EMSGSIZE)
			return n;
	}
	return rsp_reply_fallback(s, rc, grant, buf, cap, plan);
}

/* An inline Reply (RDMA_MSG): header @h, then every part not placed in a
 * Write chunk of Call @ch (@reduced bytes, DDP items padded). 0 or
 * -EMSGSIZE. */
static int reply_inline(const struct rr_hdr *ch, const struct rr_hdr *h,
			const struct rr_xprt_part *parts, unsigned nparts, uint64_t reduced,
			uint8_t *buf, size_t cap, struct rr_xprt_reply_plan *plan)
{
	unsigned k = 0;
	int n = rr_hdr_encode_buf(h, buf, cap);

	if (n < 0 || cap - (size_t)n < reduced)
		return -EMSGSIZE;
	plan->send_len = (uint32_t)n;
	for (unsigned i = 0; i < nparts; i++) {
		const struct rr_xprt_part *pt = &parts[i];

		if (pt->ddp && k++ < ch->nwrite)
			continue;
		if (pt->len)
			memcpy(buf + plan->send_len, pt->base, pt->len);
		plan->send_len += pt->len;
		if (pt->ddp && (pt->len & 3)) {
			memset(buf + plan->send_len, 0, 4 - (pt->len & 3));
			plan->send_len += 4 - (pt->len & 3);
		}
	}
	plan->proc = RR_HDR_MSG;
	return 0;
}

/* A Long Reply (RDMA_NOMSG) through Call @ch's Reply chunk: every part not
 * placed in a Write chunk RDMA Written into it, header @h (Write list and
 * Reply chunk) in the Send. 0, -EMSGSIZE, or 1 when it does not fit (the
 * chunk, or the header the inline threshold: the caller falls back). */
static int reply_long(struct rr_xprt_responder *s, const struct rr_hdr *ch,
		      struct rr_hdr *h, const struct rr_xprt_part *parts, unsigned nparts,
		      uint8_t *buf, size_t cap, struct rr_xprt_reply_plan *plan)
{
	struct fill f;
	unsigned k = 0;
	int n;

	fill_init(&f, ch, &ch->reply, plan);
	for (unsigned i = 0; i < nparts; i++) {
		const struct rr_xprt_part *pt = &parts[i];

		if (pt->ddp && k++ < ch->nwrite)
			continue;
		if (fill_bytes(&f, pt->base, pt->len) ||
		    (pt->ddp && (pt->len & 3) && fill_bytes(&f, rr_xprt_zeros, 4 - (pt->len & 3))))
			return 1;
	}
	h->proc = RR_HDR_NOMSG;
	if (rr_hdr_add_reply(h, NULL, 0) || fill_result(&f, h, &h->reply) ||
	    rr_hdr_encoded_size(h) > s->params.reply_inline)
		return 1;
	n = rr_hdr_encode_buf(h, buf, cap);
	if (n < 0)
		return -EMSGSIZE;
	plan->send_len = (uint32_t)n;
	plan->proc = RR_HDR_NOMSG;
	if (s->stats)
		s->stats->reply_chunks++;
	return 0;
}

/* The common Reply in one pass: a Call without Write list and Reply chunk
 * (its Read list does not matter) answered inline, every part in the Send.
 * Wire layout (RFC 8166 section 4.2: xid, vers, credits, RDMA_MSG, and the
 * three lists empty, then the RPC Reply):
 *
 *   rdma_xid | 1 | grant | RDMA_MSG (0) | 0 (Read list) | 0 (Write list) |
 *   0 (Reply chunk) | parts, a DDP-eligible one padded to 4 bytes
 *
 * Returns what rr_xprt_rsp_reply_general returns (0), with the same @buf
 * bytes, @plan and counters, or 1 without touching anything when the Reply
 * is not of that form, does not fit inline or in @cap, or a part is bad:
 * the general path decides those. Proven equal to the general path by test
 * xprt_rsp_reply_short_as_general and by fuzz_xprt, which builds every
 * Reply both ways. Issue 16 part AO: the header was built in a struct on
 * the stack, sized and encoded by the general encoder (~150 instructions
 * per NULL call). */
static int reply_short(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		       const struct rr_xprt_part *parts, unsigned nparts, uint32_t grant,
		       uint8_t *buf, size_t cap, struct rr_xprt_reply_plan *plan)
{
	const struct rr_hdr *ch = &rc->hdr;
	uint64_t need = RR_XPRT_SHORT_HDR;
	uint32_t len;

	if (ch->nwrite || ch->has_reply)
		return 1;
	for (unsigned i = 0; i < nparts; i++) {
		if (parts[i].len && !parts[i].base)
			return 1;
		need += parts[i].ddp ? RR_ALIGN4((uint64_t)parts[i].len) : parts[i].len;
	}
	if (need > s->params.reply_inline || need > cap)
		return 1;
	rr_put_be32(buf, rc->xid);
	rr_put_be32(buf + 4, RR_HDR_VERSION);
	rr_put_be32(buf + 8, grant ? grant : 1);   /* never grant zero */
	rr_put_be32(buf + 12, RR_HDR_MSG);
	memset(buf + 16, 0, 12);
	len = RR_XPRT_SHORT_HDR;
	for (unsigned i = 0; i < nparts; i++) {
		const struct rr_xprt_part *pt = &parts[i];

		if (pt->len)
			memcpy(buf + len, pt->base, pt->len);
		len += pt->len;
		if (pt->ddp && (pt->len & 3)) {
			memset(buf + len, 0, 4 - (pt->len & 3));
			len += 4 - (pt->len & 3);
		}
	}
	plan->nwrites = 0;
	plan->write_bytes = 0;
	plan->send_len = len;
	plan->send_inv = false;
	plan->is_error = false;
	plan->read_chunk = false;
	plan->rr_buf = NULL;
	plan->rr_len = plan->rr_nsegs = plan->rr_seg_len = 0;
	plan->proc = RR_HDR_MSG;
	if (s->params.local_r && s->params.peer_r)
		plan->send_inv = pick_inv(ch, &plan->inv_stag);
	if (s->stats) {
		s->stats->sends++;
		s->stats->pullup_bytes += len;
	}
	return 0;
}

int rr_xprt_rsp_reply(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		      const struct rr_xprt_part *parts, unsigned nparts,
		      uint32_t grant, uint8_t *buf, size_t cap,
		      struct rr_xprt_reply_plan *plan)
{
	if (reply_short(s, rc, parts, nparts, grant, buf, cap, plan) == 0)
		return 0;
	return rr_xprt_rsp_reply_general(s, rc, parts, nparts, grant, buf, cap, plan);
}

int rr_xprt_rsp_reply_general(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
			      const struct rr_xprt_part *parts, unsigned nparts,
			      uint32_t grant, uint8_t *buf, size_t cap,
			      struct rr_xprt_reply_plan *plan)
{
	const struct rr_hdr *ch = &rc->hdr;
	/* The Reply's header is built on the stack (~2.6 KiB, as the
	 * backchannel's): its scalars, all that a Reply without chunks
	 * touches, are in the stack's warm lines, where a header kept per
	 * connection was cold again after the other connections' calls
	 * (and held 2.6 KiB per connection that had replied once). */
	struct rr_hdr hb;
	struct rr_hdr *h = &hb;
	struct fill f;
	uint64_t reduced = 0;
	unsigned k = 0;
	size_t hlen;
	int rc_ = 0;

	plan->nwrites = 0;
	plan->write_bytes = 0;
	plan->send_len = 0;
	plan->send_inv = false;
	plan->is_error = false;
	plan->read_chunk = false;
	plan->rr_buf = NULL;
	plan->rr_len = plan->rr_nsegs = plan->rr_seg_len = 0;
	if (grant == 0)
		grant = 1;   /* never grant zero */
	rr_hdr_init(h, rc->xid, grant, RR_HDR_MSG);
	for (uint32_t i = 0; i < ch->nwrite; i++)
		(void)rr_hdr_add_write(h, NULL, 0);   /* unused chunks: count 0 */

	/* DDP-eligible items into the Write chunks, in order. */
	for (unsigned i = 0; i < nparts; i++) {
		const struct rr_xprt_part *pt = &parts[i];

		if (pt->len && !pt->base)
			return -EINVAL;
		if (!pt->ddp) {
			reduced += pt->len;
			continue;
		}
		if (k < ch->nwrite) {
			fill_init(&f, ch, &ch->write[k], plan);
			if (pt->len > f.cap || fill_bytes(&f, pt->base, pt->len) ||
			    fill_result(&f, h, &h->write[k]))
				return rsp_reply_fallback(s, rc, grant, buf, cap, plan);
		} else {
			reduced += RR_ALIGN4((uint64_t)pt->len);
		}
		k++;
	}
	hlen = rr_hdr_encoded_size(h);
	if (hlen + reduced <= s->params.reply_inline) {
		rc_ = reply_inline(ch, h, parts, nparts, reduced, buf, cap, plan);
		if (rc_)
			return rc_;
	} else if (ch->has_reply && reduced <= ch->reply.length) {
		rc_ = reply_long(s, ch, h, parts, nparts, buf, cap, plan);
		if (rc_ == 1)
			return rsp_reply_fallback(s, rc, grant, buf, cap, plan);
		if (rc_)
			return rc_;
	} else {
		return rsp_reply_oversize(s, rc, h, parts, nparts, reduced, grant, buf, cap,
					  plan);
	}
	if (s->params.local_r && s->params.peer_r)
		plan->send_inv = pick_inv(ch, &plan->inv_stag);
	if (s->stats) {
		struct rr_xprt_stats *st = s->stats;

		st->sends++;
		for (uint32_t i = 0; i < h->nwrite; i++)
			if (h->write[i].nsegs)
				st->write_chunks++;
		st->rdma_write_bytes += plan->write_bytes;
		st->total_rdma_rep += plan->write_bytes;
		st->pullup_bytes += plan->send_len;
	}
	return 0;
}
