/* SPDX-License-Identifier: BSD-2-Clause */
/* RPC-over-RDMA Version 1 transport header codec (RFC 8166 sections 4.2 XDR,
 * 3.5.3 / 4.4.5 Read chunks and Position, 4.4.5.1 Read chunk round-up,
 * 4.5 Long Messages, 5.5 Error Handling, 5.6 RDMA_MSGP and RDMA_DONE, 5.7 XDR
 * examples; draft-cel-nfsv4-rpcrdma-reliable-reply 4.1 for the Position-zero
 * Read chunk in a Reply and RDMA_DONE). Decoding validates everything first
 * and reports a verdict; nothing here allocates or makes a syscall. See
 * hdr.h for the interface and docs/header-codec.md for the design choices. */
#include "proto/hdr.h"

void rr_hdr_limits_init(struct rr_hdr_limits *lim)
{
	memset(lim, 0, sizeof(*lim));
	lim->max_segs_per_chunk = RR_HDR_DEFAULT_SEGS_PER_CHUNK;
	lim->max_read_chunks = RR_HDR_DEFAULT_READ_CHUNKS;
	lim->max_write_chunks = RR_HDR_DEFAULT_WRITE_CHUNKS;
	lim->max_chunk_len = UINT32_MAX;
	lim->inline_threshold = RR_HDR_DEFAULT_INLINE;
	lim->max_read_segs = UINT32_MAX;
	lim->reliable_reply = false;
}

static const char *const reason_names[RR_HDR_R_COUNT] = {
	[RR_HDR_R_NONE] = "none",
	[RR_HDR_R_SHORT_XID] = "short-xid",
	[RR_HDR_R_TRUNCATED] = "truncated",
	[RR_HDR_R_VERS] = "version",
	[RR_HDR_R_MSG_TOO_LONG] = "msg-too-long",
	[RR_HDR_R_PROC] = "proc",
	[RR_HDR_R_MSGP] = "msgp",
	[RR_HDR_R_DONE_UNEXPECTED] = "done-unexpected",
	[RR_HDR_R_ERROR_TO_RESPONDER] = "error-to-responder",
	[RR_HDR_R_ERR_UNDECODABLE] = "error-undecodable",
	[RR_HDR_R_ERR_CODE] = "error-code",
	[RR_HDR_R_BAD_DISCRIM] = "bad-discriminator",
	[RR_HDR_R_POS_ALIGN] = "position-align",
	[RR_HDR_R_POS_ORDER] = "position-order",
	[RR_HDR_R_POS_OVERLAP] = "position-overlap",
	[RR_HDR_R_POS_BEYOND] = "position-beyond-payload",
	[RR_HDR_R_TOO_MANY_SEGS] = "too-many-segments",
	[RR_HDR_R_TOO_MANY_CHUNKS] = "too-many-chunks",
	[RR_HDR_R_CAPACITY] = "capacity",
	[RR_HDR_R_SEG_WRAP] = "segment-wrap",
	[RR_HDR_R_CHUNK_TOO_LONG] = "chunk-too-long",
	[RR_HDR_R_NOMSG_NO_CHUNK] = "nomsg-no-chunk",
	[RR_HDR_R_NOMSG_EMPTY] = "nomsg-empty",
	[RR_HDR_R_NOMSG_AMBIGUOUS] = "nomsg-ambiguous",
	[RR_HDR_R_MSG_POS_ZERO] = "msg-position-zero",
	[RR_HDR_R_MSG_NO_PAYLOAD] = "msg-no-payload",
	[RR_HDR_R_XID_MISMATCH] = "xid-mismatch",
	[RR_HDR_R_READ_IN_REPLY] = "read-in-reply",
	[RR_HDR_R_REPLY_READ_POS] = "reply-read-position",
	[RR_HDR_R_WRITE_MISMATCH] = "write-list-mismatch",
	[RR_HDR_R_REPLY_MISMATCH] = "reply-chunk-mismatch",
};

const char *rr_hdr_reason_str(enum rr_hdr_reason reason)
{
	if ((unsigned)reason >= RR_HDR_R_COUNT || !reason_names[reason])
		return "?";
	return reason_names[reason];
}

const char *rr_hdr_verdict_str(enum rr_hdr_verdict verdict)
{
	switch (verdict) {
	case RR_HDR_OK:
		return "ok";
	case RR_HDR_REPLY_ERR_VERS:
		return "reply-err-vers";
	case RR_HDR_REPLY_ERR_CHUNK:
		return "reply-err-chunk";
	case RR_HDR_DISCARD:
		return "discard";
	}
	return "?";
}

/* RFC 8166 5.5: a bad Call header is answered (ERR_VERS for an unsupported
 * version, ERR_CHUNK for any other header error), a bad Reply header is
 * silently discarded. Exceptions on the Call side: nothing to answer without
 * an xid; RDMA_ERROR received by a responder is silently discarded (5.5, the
 * requester never sends one); RDMA_DONE is silently discarded (5.6.2) unless
 * the extension is negotiated (then it is not a rejection at all). */
enum rr_hdr_verdict rr_hdr_verdict_for(enum rr_hdr_dir dir,
				       enum rr_hdr_reason reason)
{
	if (reason == RR_HDR_R_NONE)
		return RR_HDR_OK;
	if (dir != RR_HDR_DIR_CALL)
		return RR_HDR_DISCARD;
	switch (reason) {
	case RR_HDR_R_SHORT_XID:
	case RR_HDR_R_DONE_UNEXPECTED:
	case RR_HDR_R_ERROR_TO_RESPONDER:
	case RR_HDR_R_ERR_UNDECODABLE:
	case RR_HDR_R_ERR_CODE:
		return RR_HDR_DISCARD;
	case RR_HDR_R_VERS:
		return RR_HDR_REPLY_ERR_VERS;
	default:
		return RR_HDR_REPLY_ERR_CHUNK;
	}
}

/* ---- decoding ---- */

struct dec_ctx {
	struct rr_xdr_dec d;
	struct rr_hdr *h;
	uint32_t max_spc;
	uint32_t max_rc;
	uint32_t max_wc;
	uint32_t max_clen;
	uint32_t max_rs;
};

/* XDR optional-data discriminator (RFC 4506 4.19): 0 absent, 1 present. */
static enum rr_hdr_reason get_discrim(struct rr_xdr_dec *d, bool *present)
{
	uint32_t v;

	if (rr_xdr_get_u32(d, &v))
		return RR_HDR_R_TRUNCATED;
	if (v > 1)
		return RR_HDR_R_BAD_DISCRIM;
	*present = v != 0;
	return RR_HDR_R_NONE;
}

/* Plain segment (RFC 8166 4.4.3 "RDMA Segments"): H(4) L(4) OO(8). */
static void load_seg(const uint8_t *p, struct rr_hdr_seg *s)
{
	s->handle = rr_get_be32(p);
	s->length = rr_get_be32(p + 4);
	s->offset = rr_get_be64(p + 8);
}

/* Adds @s to the current chunk @c: overflow and limit checks. */
static enum rr_hdr_reason add_seg(struct dec_ctx *x, struct rr_hdr_chunk *c,
				  const struct rr_hdr_seg *s)
{
	struct rr_hdr *h = x->h;

	if (s->offset > UINT64_MAX - s->length)
		return RR_HDR_R_SEG_WRAP;
	if (c->nsegs >= x->max_spc)
		return RR_HDR_R_TOO_MANY_SEGS;
	if (h->nsegs >= RR_HDR_MAX_SEGS)
		return RR_HDR_R_CAPACITY;
	h->segs[h->nsegs++] = *s;
	c->nsegs++;
	c->length += s->length; /* <= 128 * 2^32: no overflow */
	if (c->length > x->max_clen)
		return RR_HDR_R_CHUNK_TOO_LONG;
	return RR_HDR_R_NONE;
}

/* Read list (RFC 8166 "Read List", 5.7): 1 - PHLOO - 1 - PHLOO - ... - 0.
 * Consecutive segments with the same Position form one Read chunk; positions
 * are multiples of 4 and non-decreasing, so each position has one chunk. */
static enum rr_hdr_reason dec_read_list(struct dec_ctx *x)
{
	struct rr_hdr *h = x->h;
	struct rr_hdr_chunk *c = NULL;
	enum rr_hdr_reason r;

	for (;;) {
		const uint8_t *p;
		struct rr_hdr_seg s;
		uint32_t pos;
		bool more;

		r = get_discrim(&x->d, &more);
		if (r)
			return r;
		if (!more)
			return RR_HDR_R_NONE;
		if (rr_xdr_get_fixed_ref(&x->d, 20, &p))
			return RR_HDR_R_TRUNCATED;
		pos = rr_get_be32(p);
		load_seg(p + 4, &s);
		if (pos & 3)
			return RR_HDR_R_POS_ALIGN;
		if (c && pos < c->position)
			return RR_HDR_R_POS_ORDER;
		if (!c || pos != c->position) {
			if (h->nread >= x->max_rc)
				return RR_HDR_R_TOO_MANY_CHUNKS;
			c = &h->read[h->nread++];
			c->position = pos;
			c->first = (uint16_t)h->nsegs;
			c->nsegs = 0;
			c->length = 0;
		}
		r = add_seg(x, c, &s);
		if (r)
			return r;
		if (h->nsegs > x->max_rs) /* the Read list's segments come first */
			return RR_HDR_R_TOO_MANY_SEGS;
	}
}

/* Write chunk / Reply chunk (RFC 8166 "Write Chunk"): N - HLOO..HLOO. */
static enum rr_hdr_reason dec_wchunk(struct dec_ctx *x, struct rr_hdr_chunk *c)
{
	struct rr_hdr *h = x->h;
	uint32_t n;

	if (rr_xdr_get_u32(&x->d, &n))
		return RR_HDR_R_TRUNCATED;
	c->position = 0;
	c->first = (uint16_t)h->nsegs;
	c->nsegs = 0;
	c->length = 0;
	if (n > x->max_spc)
		return RR_HDR_R_TOO_MANY_SEGS;
	if ((uint64_t)n * RR_HDR_WRITE_SEG_SIZE > rr_xdr_dec_remaining(&x->d))
		return RR_HDR_R_TRUNCATED;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p;
		struct rr_hdr_seg s;
		enum rr_hdr_reason r;

		if (rr_xdr_get_fixed_ref(&x->d, RR_HDR_WRITE_SEG_SIZE, &p))
			return RR_HDR_R_TRUNCATED; /* not reached: checked */
		load_seg(p, &s);
		r = add_seg(x, c, &s);
		if (r)
			return r;
	}
	return RR_HDR_R_NONE;
}

/* Write list (RFC 8166 "Write List", 5.7): 1 - N - HLOO..HLOO - 1 - ... - 0 */
static enum rr_hdr_reason dec_write_list(struct dec_ctx *x)
{
	struct rr_hdr *h = x->h;

	for (;;) {
		enum rr_hdr_reason r;
		bool more;

		r = get_discrim(&x->d, &more);
		if (r)
			return r;
		if (!more)
			return RR_HDR_R_NONE;
		if (h->nwrite >= x->max_wc)
			return RR_HDR_R_TOO_MANY_CHUNKS;
		r = dec_wchunk(x, &h->write[h->nwrite++]);
		if (r)
			return r;
	}
}

/* Reply chunk (RFC 8166 "Reply Chunk", 5.7): 0 | 1 - N - HLOO..HLOO */
static enum rr_hdr_reason dec_reply_chunk(struct dec_ctx *x)
{
	struct rr_hdr *h = x->h;
	enum rr_hdr_reason r;
	bool present;

	r = get_discrim(&x->d, &present);
	if (r || !present)
		return r;
	h->has_reply = true;
	memset(&h->reply, 0, sizeof(h->reply));   /* (not reset per message) */
	return dec_wchunk(x, &h->reply);
}

static uint64_t roundup4(uint64_t n)
{
	return (n + 3) & ~(uint64_t)3;
}

/* Read chunk positions against the Payload stream (RFC 8166 4.4.5: Position
 * is the byte offset in the unreduced Payload stream; 4.4.5.1: a data item
 * moved to a Read chunk leaves the Payload stream with its XDR pad, so it
 * occupies roundup4(length) bytes of the unreduced stream). @reduced_len is
 * the length of the reduced Payload stream: the inline payload of RDMA_MSG,
 * the Position-zero chunk of RDMA_NOMSG. Chunks @from.. must neither overlap
 * the previous one nor start beyond the inline bytes left before them. */
static enum rr_hdr_reason check_positions(const struct rr_hdr *h, uint32_t from,
					  uint64_t reduced_len)
{
	uint64_t consumed = 0, prev_end = 0;

	for (uint32_t i = from; i < h->nread; i++) {
		const struct rr_hdr_chunk *c = &h->read[i];

		if (c->position < prev_end)
			return RR_HDR_R_POS_OVERLAP;
		if (c->position - consumed > reduced_len)
			return RR_HDR_R_POS_BEYOND;
		consumed += roundup4(c->length);
		prev_end = c->position + roundup4(c->length);
	}
	return RR_HDR_R_NONE;
}

/* Meaning of an RDMA_MSG / RDMA_NOMSG header once its XDR is valid. */
static enum rr_hdr_reason check_msg(struct rr_hdr *h, const uint8_t *buf,
				    size_t len, enum rr_hdr_dir dir,
				    const struct rr_hdr_limits *lim)
{
	const struct rr_hdr_chunk *p0 = rr_hdr_pos0_chunk(h);

	if (h->proc == RR_HDR_MSG) {
		/* Short or Chunked message: the Payload stream follows the
		 * header and starts with the RPC XID (RFC 8166 4.1). */
		h->payload_off = h->hdr_len;
		h->payload_len = (uint32_t)(len - h->hdr_len);
		if (h->nread && dir == RR_HDR_DIR_REPLY)
			return RR_HDR_R_READ_IN_REPLY;
		if (p0)
			return RR_HDR_R_MSG_POS_ZERO;
		if (h->payload_len < 4)
			return RR_HDR_R_MSG_NO_PAYLOAD;
		if (rr_get_be32(buf + h->payload_off) != h->xid)
			return RR_HDR_R_XID_MISMATCH;
		return check_positions(h, 0, h->payload_len);
	}

	/* RDMA_NOMSG: a Long message; the Send carries only the header. */
	h->trailing = (uint32_t)(len - h->hdr_len);
	if (dir == RR_HDR_DIR_CALL) {
		/* Long Call: the Payload stream is the Position-zero Read
		 * chunk (RFC 8166 4.5.3); other Read chunks are positioned in
		 * it. */
		if (!p0)
			return RR_HDR_R_NOMSG_NO_CHUNK;
		if (p0->length < 4)
			return RR_HDR_R_NOMSG_EMPTY;
		return check_positions(h, 1, p0->length);
	}
	/* Long Reply: the Payload stream is in the Reply chunk, or, with the
	 * reliable-reply extension, in a responder-provided Position-zero
	 * Read chunk (the only Read chunk a Reply may carry). */
	if (h->nread) {
		if (!lim->reliable_reply)
			return RR_HDR_R_READ_IN_REPLY;
		if (h->nread != 1 || !p0)
			return RR_HDR_R_REPLY_READ_POS;
		if (h->has_reply)
			return RR_HDR_R_NOMSG_AMBIGUOUS;
		return p0->length < 4 ? RR_HDR_R_NOMSG_EMPTY : RR_HDR_R_NONE;
	}
	if (!h->has_reply)
		return RR_HDR_R_NOMSG_NO_CHUNK;
	return h->reply.length < 4 ? RR_HDR_R_NOMSG_EMPTY : RR_HDR_R_NONE;
}

/* RDMA_ERROR body (RFC 8166 5.5): err - [low - high] */
static enum rr_hdr_reason dec_error(struct dec_ctx *x)
{
	struct rr_hdr *h = x->h;

	if (rr_xdr_get_u32(&x->d, &h->err))
		return RR_HDR_R_ERR_UNDECODABLE;
	if (h->err == RR_HDR_ERR_VERS) {
		if (rr_xdr_get_u32(&x->d, &h->vers_low) ||
		    rr_xdr_get_u32(&x->d, &h->vers_high))
			return RR_HDR_R_ERR_UNDECODABLE;
	} else if (h->err != RR_HDR_ERR_CHUNK) {
		return RR_HDR_R_ERR_CODE;
	}
	return RR_HDR_R_NONE;
}

static int finish(struct rr_hdr *h, enum rr_hdr_dir dir, enum rr_hdr_reason r)
{
	h->reason = r;
	h->verdict = rr_hdr_verdict_for(dir, r);
	return h->verdict == RR_HDR_OK ? 0 : -EPROTO;
}

/* The short form, decoded in one pass: the header of every inline Call
 * and Reply without chunks (RFC 8166 4.2 with three empty lists; 4.1: the
 * Payload stream follows and starts with the RPC XID):
 *   xid - 1 - credit - RDMA_MSG - 0 - 0 - 0 | xid ...
 * Returns true when @buf[0..@len) has exactly that form and the general
 * decoder would accept it (within the inline threshold, the Payload's XID
 * equal): @h then holds what the general decoder leaves in it (the same
 * scalars; no chunk). False: @h untouched, the general decoder decides
 * (every other message, and every one it rejects). The direction does not
 * matter: such a header is valid both ways. Proven equal to the general
 * decoder by test hdr_decode_short_as_general and by fuzz_hdr, which
 * decodes every input both ways (rr_hdr_decode_general). */
static bool decode_short(struct rr_hdr *h, const void *buf, size_t len,
			 const struct rr_hdr_limits *lim)
{
	struct rr_xdr_dec d;
	const uint8_t *p;
	uint32_t xid;

	if (len > lim->inline_threshold)
		return false;
	rr_xdr_dec_init(&d, buf, len);
	if (rr_xdr_get_fixed_ref(&d, RR_HDR_MIN_MSG_SIZE + 4, &p))
		return false;
	xid = rr_get_be32(p);
	if (rr_get_be32(p + 4) != RR_HDR_VERSION || rr_get_be32(p + 12) != RR_HDR_MSG ||
	    (rr_get_be32(p + 16) | rr_get_be32(p + 20) | rr_get_be32(p + 24)) != 0 ||
	    rr_get_be32(p + RR_HDR_MIN_MSG_SIZE) != xid)
		return false;
	memset(h, 0, RR_HDR_RESET);
	h->xid = xid;
	h->vers = RR_HDR_VERSION;
	h->credit = rr_get_be32(p + 8);
	h->proc = RR_HDR_MSG;
	h->hdr_len = RR_HDR_MIN_MSG_SIZE;
	h->payload_off = RR_HDR_MIN_MSG_SIZE;
	h->payload_len = (uint32_t)(len - RR_HDR_MIN_MSG_SIZE);
	h->reason = RR_HDR_R_NONE;
	h->verdict = RR_HDR_OK;
	return true;
}

static const struct rr_hdr_limits *limits_or(const struct rr_hdr_limits *lim,
					     struct rr_hdr_limits *defaults)
{
	if (lim)
		return lim;
	rr_hdr_limits_init(defaults);
	return defaults;
}

int rr_hdr_decode(struct rr_hdr *h, const void *buf, size_t len,
		  enum rr_hdr_dir dir, const struct rr_hdr_limits *lim)
{
	struct rr_hdr_limits defaults;

	if (!h || (!buf && len))
		return -EINVAL;
	lim = limits_or(lim, &defaults);
	if (decode_short(h, buf, len, lim))
		return 0;
	return rr_hdr_decode_general(h, buf, len, dir, lim);
}

/* Fixed fields (RFC 8166 4.2): xid - vers - credit - proc - body */
int rr_hdr_decode_general(struct rr_hdr *h, const void *buf, size_t len,
			  enum rr_hdr_dir dir, const struct rr_hdr_limits *lim)
{
	struct rr_hdr_limits defaults;
	struct dec_ctx x;
	enum rr_hdr_reason r;

	if (!h || (!buf && len))
		return -EINVAL;
	lim = limits_or(lim, &defaults);
	/* Only the scalar fields (all before @reply) are reset; the Reply
	 * chunk is set whole when one is decoded (read only while
	 * has_reply), the arrays are written before they are read (bounded
	 * by nread, nwrite, nsegs). */
	memset(h, 0, RR_HDR_RESET);
	h->vers = RR_HDR_VERSION;

	rr_xdr_dec_init(&x.d, buf, len);
	x.h = h;
	x.max_spc = lim->max_segs_per_chunk;
	x.max_rc = RR_MIN(lim->max_read_chunks, RR_HDR_MAX_READ_CHUNKS);
	x.max_wc = RR_MIN(lim->max_write_chunks, RR_HDR_MAX_WRITE_CHUNKS);
	x.max_clen = lim->max_chunk_len;
	x.max_rs = lim->max_read_segs;

	if (rr_xdr_get_u32(&x.d, &h->xid))
		return finish(h, dir, RR_HDR_R_SHORT_XID);
	if (rr_xdr_get_u32(&x.d, &h->vers))
		return finish(h, dir, RR_HDR_R_TRUNCATED);
	if (h->vers != RR_HDR_VERSION)
		return finish(h, dir, RR_HDR_R_VERS);
	if (len > lim->inline_threshold)
		return finish(h, dir, RR_HDR_R_MSG_TOO_LONG);
	if (rr_xdr_get_u32(&x.d, &h->credit) || rr_xdr_get_u32(&x.d, &h->proc))
		return finish(h, dir, RR_HDR_R_TRUNCATED);

	switch (h->proc) {
	case RR_HDR_MSG:
	case RR_HDR_NOMSG:
		r = dec_read_list(&x);
		if (!r)
			r = dec_write_list(&x);
		if (!r)
			r = dec_reply_chunk(&x);
		h->hdr_len = (uint32_t)rr_xdr_dec_pos(&x.d);
		if (!r)
			r = check_msg(h, buf, len, dir, lim);
		return finish(h, dir, r);
	case RR_HDR_ERROR:
		if (dir == RR_HDR_DIR_CALL)
			return finish(h, dir, RR_HDR_R_ERROR_TO_RESPONDER);
		r = dec_error(&x);
		h->hdr_len = (uint32_t)rr_xdr_dec_pos(&x.d);
		h->trailing = (uint32_t)(len - h->hdr_len);
		return finish(h, dir, r);
	case RR_HDR_DONE:
		h->hdr_len = RR_HDR_DONE_SIZE;
		h->trailing = (uint32_t)(len - h->hdr_len);
		if (dir != RR_HDR_DIR_CALL || !lim->reliable_reply)
			return finish(h, dir, RR_HDR_R_DONE_UNEXPECTED);
		return finish(h, dir, RR_HDR_R_NONE);
	case RR_HDR_MSGP:
		return finish(h, dir, RR_HDR_R_MSGP);
	default:
		return finish(h, dir, RR_HDR_R_PROC);
	}
}

const struct rr_hdr_chunk *rr_hdr_pos0_chunk(const struct rr_hdr *h)
{
	if ((h->proc == RR_HDR_MSG || h->proc == RR_HDR_NOMSG) && h->nread &&
	    h->read[0].position == 0)
		return &h->read[0];
	return NULL;
}

/* ---- returned chunks ---- */

/* A returned chunk (@rc of @h) against the offered segments @segs[@n]. */
static bool returned_ok(const struct rr_hdr *h, const struct rr_hdr_chunk *rc,
			const struct rr_hdr_seg *segs, uint32_t n)
{
	if (rc->nsegs > n)
		return false;
	for (uint32_t i = 0; i < rc->nsegs; i++) {
		const struct rr_hdr_seg *got = &h->segs[rc->first + i];

		if (got->handle != segs[i].handle || got->offset != segs[i].offset ||
		    got->length > segs[i].length)
			return false;
	}
	return true;
}

int rr_hdr_check_reply(struct rr_hdr *reply, const struct rr_hdr *call)
{
	enum rr_hdr_reason r = RR_HDR_R_NONE;

	if (reply->verdict != RR_HDR_OK)
		return -EPROTO;
	if (reply->proc != RR_HDR_MSG && reply->proc != RR_HDR_NOMSG)
		return 0;
	if (reply->nwrite > call->nwrite) {
		r = RR_HDR_R_WRITE_MISMATCH;
	} else {
		for (uint32_t i = 0; i < reply->nwrite; i++)
			if (!returned_ok(reply, &reply->write[i], &call->segs[call->write[i].first],
					 call->write[i].nsegs)) {
				r = RR_HDR_R_WRITE_MISMATCH;
				break;
			}
	}
	if (!r && reply->has_reply &&
	    (!call->has_reply || !returned_ok(reply, &reply->reply,
					      &call->segs[call->reply.first],
					      call->reply.nsegs)))
		r = RR_HDR_R_REPLY_MISMATCH;
	return finish(reply, RR_HDR_DIR_REPLY, r);
}

int rr_hdr_consume_chunk(const struct rr_hdr *call, const struct rr_hdr_chunk *c,
			 uint64_t used, struct rr_hdr_seg *out, uint32_t cap)
{
	uint32_t n = 0;

	if (used > c->length)
		return -EMSGSIZE;
	for (uint32_t i = 0; used && i < c->nsegs; i++) {
		const struct rr_hdr_seg *s = &call->segs[c->first + i];
		uint32_t take = (uint32_t)RR_MIN((uint64_t)s->length, used);

		/* a zero-length offered segment stays in the returned prefix
		 * with length 0, so the result is always a prefix */
		if (n >= cap)
			return -EMSGSIZE;
		out[n] = *s;
		out[n].length = take;
		n++;
		used -= take;
	}
	return (int)n;
}

/* ---- building ---- */

/* The scalars reset per message fit two cache lines (struct rr_hdr). */
_Static_assert(offsetof(struct rr_hdr, read) <= 128, "rr_hdr: scalars beyond two cache lines");

void rr_hdr_init(struct rr_hdr *h, uint32_t xid, uint32_t credit, uint32_t proc)
{
	/* As rr_hdr_decode(): the scalars only; the arrays are written
	 * before they are read. */
	memset(h, 0, offsetof(struct rr_hdr, read));
	h->xid = xid;
	h->vers = RR_HDR_VERSION;
	h->credit = credit;
	h->proc = proc;
}

int rr_hdr_add_seg(struct rr_hdr *h, struct rr_hdr_chunk *c, const struct rr_hdr_seg *s)
{
	if (c->nsegs == 0)
		c->first = (uint16_t)h->nsegs;
	else if ((uint32_t)c->first + c->nsegs != h->nsegs)
		return -EINVAL;
	if (h->nsegs >= RR_HDR_MAX_SEGS)
		return -EMSGSIZE;
	h->segs[h->nsegs++] = *s;
	c->nsegs++;
	c->length += s->length;
	return 0;
}

int rr_hdr_add_read(struct rr_hdr *h, uint32_t position, const struct rr_hdr_seg *s)
{
	struct rr_hdr_chunk *c = h->nread ? &h->read[h->nread - 1] : NULL;

	if (!c || c->position != position || (uint32_t)c->first + c->nsegs != h->nsegs) {
		if (h->nread >= RR_HDR_MAX_READ_CHUNKS || h->nsegs >= RR_HDR_MAX_SEGS)
			return -EMSGSIZE;
		c = &h->read[h->nread++];
		*c = (struct rr_hdr_chunk){position, (uint16_t)h->nsegs, 0, 0};
	}
	return rr_hdr_add_seg(h, c, s);
}

/* A new empty chunk @c filled with @segs[@n]. */
static int add_chunk(struct rr_hdr *h, struct rr_hdr_chunk *c, const struct rr_hdr_seg *segs,
		     uint32_t n)
{
	*c = (struct rr_hdr_chunk){0, (uint16_t)h->nsegs, 0, 0};
	for (uint32_t i = 0; i < n; i++) {
		int rc = rr_hdr_add_seg(h, c, &segs[i]);

		if (rc)
			return rc;
	}
	return 0;
}

int rr_hdr_add_write(struct rr_hdr *h, const struct rr_hdr_seg *segs, uint32_t n)
{
	if (n && !segs)
		return -EINVAL;
	if (h->nwrite >= RR_HDR_MAX_WRITE_CHUNKS || n > RR_HDR_MAX_SEGS - h->nsegs)
		return -EMSGSIZE;
	return add_chunk(h, &h->write[h->nwrite++], segs, n);
}

int rr_hdr_add_reply(struct rr_hdr *h, const struct rr_hdr_seg *segs, uint32_t n)
{
	if ((n && !segs) || h->has_reply)
		return -EINVAL;
	if (n > RR_HDR_MAX_SEGS - h->nsegs)
		return -EMSGSIZE;
	h->has_reply = true;
	return add_chunk(h, &h->reply, segs, n);
}

/* ---- encoding ---- */

static int put_seg(struct rr_xdr_enc *e, const struct rr_hdr_seg *s)
{
	uint8_t *p;

	if (e->cap - e->pos < RR_HDR_WRITE_SEG_SIZE)
		return -EMSGSIZE;
	p = e->buf + e->pos;
	rr_put_be32(p, s->handle);
	rr_put_be32(p + 4, s->length);
	rr_put_be64(p + 8, s->offset);
	e->pos += RR_HDR_WRITE_SEG_SIZE;
	return 0;
}

/* Read list entry: 1 - P - HLOO */
static int put_read_seg(struct rr_xdr_enc *e, uint32_t position,
			const struct rr_hdr_seg *s)
{
	if (e->cap - e->pos < RR_HDR_READ_SEG_SIZE)
		return -EMSGSIZE;
	rr_put_be32(e->buf + e->pos, 1);
	rr_put_be32(e->buf + e->pos + 4, position);
	e->pos += 8;
	return put_seg(e, s);
}

/* Write/Reply chunk body: N - HLOO..HLOO */
static int put_wchunk(struct rr_xdr_enc *e, const struct rr_hdr_seg *segs,
		      uint32_t n)
{
	int rc = rr_xdr_put_u32(e, n);

	for (uint32_t i = 0; rc == 0 && i < n; i++)
		rc = put_seg(e, &segs[i]);
	return rc;
}

static int put_fixed(struct rr_xdr_enc *e, uint32_t xid, uint32_t vers,
		     uint32_t credit, uint32_t proc)
{
	if (e->cap - e->pos < RR_HDR_FIXED_SIZE)
		return -EMSGSIZE;
	rr_put_be32(e->buf + e->pos, xid);
	rr_put_be32(e->buf + e->pos + 4, vers);
	rr_put_be32(e->buf + e->pos + 8, credit);
	rr_put_be32(e->buf + e->pos + 12, proc);
	e->pos += RR_HDR_FIXED_SIZE;
	return 0;
}

/* The three empty lists of a chunkless header: 0 - 0 - 0 */
static void put_empty_lists(uint8_t *p)
{
	memset(p, 0, RR_HDR_MIN_MSG_SIZE - RR_HDR_FIXED_SIZE);
}

/* xid - 1 - credit - RDMA_MSG - 0 - 0 - 0 (RFC 8166 4.2) */
int rr_hdr_encode_short(uint8_t *buf, size_t cap, uint32_t xid, uint32_t credit)
{
	if (cap < RR_HDR_MIN_MSG_SIZE)
		return -EMSGSIZE;
	rr_put_be32(buf, xid);
	rr_put_be32(buf + 4, RR_HDR_VERSION);
	rr_put_be32(buf + 8, credit);
	rr_put_be32(buf + 12, RR_HDR_MSG);
	put_empty_lists(buf + RR_HDR_FIXED_SIZE);
	return (int)RR_HDR_MIN_MSG_SIZE;
}

static bool chunk_in_range(const struct rr_hdr *h, const struct rr_hdr_chunk *c)
{
	return (uint32_t)c->first + c->nsegs <= h->nsegs;
}

/* Read positions (RFC 8166 3.5.3 / 4.4.5): multiples of 4, non-decreasing. */
static bool positions_ok(const struct rr_hdr *h)
{
	for (uint32_t i = 0; i < h->nread; i++)
		if ((h->read[i].position & 3) ||
		    (i && h->read[i].position < h->read[i - 1].position))
			return false;
	return true;
}

int rr_hdr_encode(struct rr_xdr_enc *e, const struct rr_hdr *h)
{
	if ((h->proc == RR_HDR_MSG || h->proc == RR_HDR_NOMSG) && !positions_ok(h))
		return -EINVAL;
	return rr_hdr_encode_raw(e, h);
}

/* RDMA_MSG / RDMA_NOMSG (RFC 8166 4.2):
 * xid - vers - credit - proc - Read list - Write list - Reply chunk, with
 * Read list 1-PHLOO-...-0, Write list 1-N-HLOO..-...-0, Reply 0 | 1-N-HLOO.. */
int rr_hdr_encode_raw(struct rr_xdr_enc *e, const struct rr_hdr *h)
{
	size_t start = e->pos;
	int rc;

	switch (h->proc) {
	case RR_HDR_ERROR:
		if (h->err == RR_HDR_ERR_VERS)
			return rr_hdr_encode_err_vers(e, h->xid, h->vers, h->credit,
						      h->vers_low, h->vers_high);
		if (h->err == RR_HDR_ERR_CHUNK)
			return rr_hdr_encode_err_chunk(e, h->xid, h->vers,
						       h->credit);
		return -EINVAL;
	case RR_HDR_DONE:
		return put_fixed(e, h->xid, h->vers, h->credit, RR_HDR_DONE);
	case RR_HDR_MSG:
	case RR_HDR_NOMSG:
		break;
	default:
		return -EINVAL;
	}
	if (h->nread > RR_HDR_MAX_READ_CHUNKS || h->nwrite > RR_HDR_MAX_WRITE_CHUNKS ||
	    h->nsegs > RR_HDR_MAX_SEGS)
		return -EINVAL;
	for (uint32_t i = 0; i < h->nread; i++)
		if (!chunk_in_range(h, &h->read[i]))
			return -EINVAL;
	for (uint32_t i = 0; i < h->nwrite; i++)
		if (!chunk_in_range(h, &h->write[i]))
			return -EINVAL;
	if (h->has_reply && !chunk_in_range(h, &h->reply))
		return -EINVAL;
	if (!h->nread && !h->nwrite && !h->has_reply &&
	    e->cap - e->pos >= RR_HDR_MIN_MSG_SIZE) {
		/* no chunk (every inline Call and Reply): the three empty
		 * lists in one pass, the bytes of the general path below */
		(void)put_fixed(e, h->xid, h->vers, h->credit, h->proc);
		put_empty_lists(e->buf + e->pos);
		e->pos += RR_HDR_MIN_MSG_SIZE - RR_HDR_FIXED_SIZE;
		return 0;
	}

	rc = put_fixed(e, h->xid, h->vers, h->credit, h->proc);
	for (uint32_t i = 0; rc == 0 && i < h->nread; i++) {
		const struct rr_hdr_chunk *c = &h->read[i];

		for (uint32_t j = 0; rc == 0 && j < c->nsegs; j++)
			rc = put_read_seg(e, c->position, &h->segs[c->first + j]);
	}
	if (rc == 0)
		rc = rr_xdr_put_u32(e, 0);
	for (uint32_t i = 0; rc == 0 && i < h->nwrite; i++) {
		rc = rr_xdr_put_u32(e, 1);
		if (rc == 0)
			rc = put_wchunk(e, &h->segs[h->write[i].first],
					h->write[i].nsegs);
	}
	if (rc == 0)
		rc = rr_xdr_put_u32(e, 0);
	if (rc == 0)
		rc = rr_xdr_put_u32(e, h->has_reply ? 1 : 0);
	if (rc == 0 && h->has_reply)
		rc = put_wchunk(e, &h->segs[h->reply.first], h->reply.nsegs);
	if (rc)
		e->pos = start;
	return rc;
}

/* RDMA_ERROR ERR_VERS (RFC 8166 5.5.1): xid - vers - credit - 4 - 1 - low - high */
int rr_hdr_encode_err_vers(struct rr_xdr_enc *e, uint32_t xid, uint32_t vers,
			   uint32_t credit, uint32_t low, uint32_t high)
{
	uint8_t *p;

	if (e->cap - e->pos < RR_HDR_ERR_VERS_SIZE)
		return -EMSGSIZE;
	(void)put_fixed(e, xid, vers, credit, RR_HDR_ERROR);
	p = e->buf + e->pos;
	rr_put_be32(p, RR_HDR_ERR_VERS);
	rr_put_be32(p + 4, low);
	rr_put_be32(p + 8, high);
	e->pos += 12;
	return 0;
}

/* RDMA_ERROR ERR_CHUNK (RFC 8166 5.5.2): xid - vers - credit - 4 - 2 */
int rr_hdr_encode_err_chunk(struct rr_xdr_enc *e, uint32_t xid, uint32_t vers,
			    uint32_t credit)
{
	if (e->cap - e->pos < RR_HDR_ERR_CHUNK_SIZE)
		return -EMSGSIZE;
	(void)put_fixed(e, xid, vers, credit, RR_HDR_ERROR);
	return rr_xdr_put_u32(e, RR_HDR_ERR_CHUNK);
}

int rr_hdr_encode_reject(struct rr_xdr_enc *e, const struct rr_hdr *h,
			 uint32_t credit)
{
	switch (h->verdict) {
	case RR_HDR_REPLY_ERR_VERS:
		return rr_hdr_encode_err_vers(e, h->xid, h->vers, credit,
					      RR_HDR_VERSION, RR_HDR_VERSION);
	case RR_HDR_REPLY_ERR_CHUNK:
		return rr_hdr_encode_err_chunk(e, h->xid, h->vers, credit);
	default:
		return -EINVAL;
	}
}

int rr_hdr_encode_buf(const struct rr_hdr *h, uint8_t *buf, size_t cap)
{
	struct rr_xdr_enc e;
	int rc;

	rr_xdr_enc_init(&e, buf, cap);
	rc = rr_hdr_encode(&e, h);
	return rc ? rc : (int)rr_xdr_enc_len(&e);
}

int rr_hdr_encode_error_buf(uint32_t xid, uint32_t vers, uint32_t credit, uint32_t err,
			    uint8_t *buf, size_t cap)
{
	struct rr_xdr_enc e;
	int rc;

	rr_xdr_enc_init(&e, buf, cap);
	if (err == RR_HDR_ERR_VERS)
		rc = rr_hdr_encode_err_vers(&e, xid, vers, credit, RR_HDR_VERSION,
					    RR_HDR_VERSION);
	else if (err == RR_HDR_ERR_CHUNK)
		rc = rr_hdr_encode_err_chunk(&e, xid, vers, credit);
	else
		rc = -EINVAL;
	return rc ? rc : (int)rr_xdr_enc_len(&e);
}

/* RDMA_DONE (draft-cel-nfsv4-rpcrdma-reliable-reply 4.1.3): xid - 1 - credit - 3 */
int rr_hdr_encode_done(struct rr_xdr_enc *e, uint32_t xid, uint32_t credit)
{
	return put_fixed(e, xid, RR_HDR_VERSION, credit, RR_HDR_DONE);
}

size_t rr_hdr_size(uint32_t nread_segs, uint32_t nwrite_chunks,
		   uint32_t nwrite_segs, bool reply, uint32_t nreply_segs)
{
	uint64_t n = RR_HDR_FIXED_SIZE;

	n += (uint64_t)nread_segs * RR_HDR_READ_SEG_SIZE + 4;
	n += (uint64_t)nwrite_chunks * 8 + (uint64_t)nwrite_segs * RR_HDR_WRITE_SEG_SIZE + 4;
	n += 4;
	if (reply)
		n += 4 + (uint64_t)nreply_segs * RR_HDR_WRITE_SEG_SIZE;
	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

size_t rr_hdr_encoded_size(const struct rr_hdr *h)
{
	uint32_t rsegs = 0, wsegs = 0;

	switch (h->proc) {
	case RR_HDR_MSG:
	case RR_HDR_NOMSG:
		for (uint32_t i = 0; i < h->nread; i++)
			rsegs += h->read[i].nsegs;
		for (uint32_t i = 0; i < h->nwrite; i++)
			wsegs += h->write[i].nsegs;
		return rr_hdr_size(rsegs, h->nwrite, wsegs, h->has_reply,
				   h->has_reply ? h->reply.nsegs : 0);
	case RR_HDR_ERROR:
		return h->err == RR_HDR_ERR_VERS ? RR_HDR_ERR_VERS_SIZE : RR_HDR_ERR_CHUNK_SIZE;
	default:
		return RR_HDR_FIXED_SIZE;
	}
}
