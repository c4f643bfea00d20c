/* The transport core's view of the RPC-over-RDMA v1 header (RFC 8166 section
 * 4 "RPC-over-RDMA Protocol Messages" and its XDR, section 4.1-4.3): decode
 * into struct rr_xprt_hdr with the structural verdict of section 4.5 "Error
 * Handling" (ERR_VERS for an unknown version, ERR_CHUNK for an XDR error, an
 * unknown or RDMA_MSGP procedure, an unaligned Read position; silently drop
 * what cannot be answered), and encode the forms the transport sends.
 *
 * This is the transport's adapter: it keeps the core independent of the
 * header codec's data structures so that either can evolve. */
#include "proto/xprt.h"
#include "xdr/xdr.h"

void rr_xprt_params_default(struct rr_xprt_params *p)
{
	memset(p, 0, sizeof(*p));
	p->call_inline = RR_XPRT_DEFAULT_INLINE;
	p->reply_inline = RR_XPRT_DEFAULT_INLINE;
	p->max_seg_len = 1u << 20;
	p->max_segs = 16;
	p->max_call = 1u << 24;
}

/* xdr_rdma_segment: handle(4) length(4) offset(8) */
static int get_seg(struct rr_xdr_dec *d, struct rr_xprt_seg *s)
{
	if (rr_xdr_get_u32(d, &s->handle) || rr_xdr_get_u32(d, &s->length) ||
	    rr_xdr_get_u64(d, &s->offset))
		return -EBADMSG;
	return 0;
}

/* Counted segment array (Write chunk, Reply chunk): N - HLOO..HLOO.
 * -E2BIG when valid but longer than our limit. */
static int get_chunk(struct rr_xdr_dec *d, struct rr_xprt_chunk *c)
{
	uint32_t n;

	if (rr_xdr_get_u32(d, &n))
		return -EBADMSG;
	if ((uint64_t)n * 16 > rr_xdr_dec_remaining(d))
		return -EBADMSG;
	if (n > RR_XPRT_MAX_SEGS)
		return -E2BIG;
	c->nsegs = n;
	for (uint32_t i = 0; i < n; i++)
		if (get_seg(d, &c->segs[i]))
			return -EBADMSG;
	return 0;
}

/* Read list (RFC 8166 4.1): 1 - PHLOO - 1 - PHLOO - ... - 0
 * Write list:                1 - N - HLOO.. - 1 - N - HLOO.. - 0
 * Reply chunk (optional):    0 | 1 - N - HLOO.. */
static int get_lists(struct rr_xdr_dec *d, struct rr_xprt_hdr *h, bool *limit)
{
	bool more;
	int rc;

	h->nreads = 0;
	for (;;) {
		struct rr_xprt_rseg rs;

		if (rr_xdr_get_bool(d, &more))
			return -EBADMSG;
		if (!more)
			break;
		if (rr_xdr_get_u32(d, &rs.position) || get_seg(d, &rs.seg))
			return -EBADMSG;
		if (h->nreads < RR_XPRT_MAX_READS)
			h->reads[h->nreads++] = rs;
		else
			*limit = true;
	}
	h->nwrites = 0;
	for (;;) {
		struct rr_xprt_chunk tmp;

		if (rr_xdr_get_bool(d, &more))
			return -EBADMSG;
		if (!more)
			break;
		rc = get_chunk(d, h->nwrites < RR_XPRT_MAX_WCHUNKS ?
					  &h->writes[h->nwrites] : &tmp);
		if (rc == -E2BIG) {
			*limit = true;
			return 0;
		}
		if (rc)
			return rc;
		if (h->nwrites < RR_XPRT_MAX_WCHUNKS)
			h->nwrites++;
		else
			*limit = true;
	}
	if (rr_xdr_get_bool(d, &h->has_reply))
		return -EBADMSG;
	if (h->has_reply) {
		rc = get_chunk(d, &h->reply);
		if (rc == -E2BIG) {
			*limit = true;
			return 0;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Fixed header (RFC 8166 4.2): xid(4) vers(4) credit(4) proc(4), then the
 * body selected by proc. */
enum rr_xprt_verdict rr_xprt_hdr_decode(const uint8_t *buf, size_t len,
					struct rr_xprt_hdr *h)
{
	struct rr_xdr_dec d;
	bool limit = false;

	h->nreads = h->nwrites = 0;
	h->has_reply = false;
	h->err = 0;
	h->hdr_len = 0;
	if (len < RR_XPRT_FIXED_HDR) {
		/* A version check needs only xid + vers: answer ERR_VERS when
		 * those are present and the version is not ours. */
		if (len >= 8 && rr_get_be32(buf + 4) != RR_XPRT_VERSION) {
			h->xid = rr_get_be32(buf);
			h->vers = rr_get_be32(buf + 4);
			return RR_XPRT_V_ERR_VERS;
		}
		return RR_XPRT_V_DROP;
	}
	rr_xdr_dec_init(&d, buf, len);
	(void)rr_xdr_get_u32(&d, &h->xid);
	(void)rr_xdr_get_u32(&d, &h->vers);
	(void)rr_xdr_get_u32(&d, &h->credit);
	(void)rr_xdr_get_u32(&d, &h->proc);
	if (h->vers != RR_XPRT_VERSION)
		return RR_XPRT_V_ERR_VERS;
	switch (h->proc) {
	case RR_XPRT_MSG:
	case RR_XPRT_NOMSG:
		if (get_lists(&d, h, &limit))
			return RR_XPRT_V_ERR_CHUNK;
		if (limit)
			return RR_XPRT_V_LIMIT;
		for (uint32_t i = 0; i < h->nreads; i++)
			if (h->reads[i].position & 3)
				return RR_XPRT_V_ERR_CHUNK;
		break;
	case RR_XPRT_DONE:
		break;
	case RR_XPRT_ERROR:
		if (rr_xdr_get_u32(&d, &h->err))
			return RR_XPRT_V_DROP;
		if (h->err == RR_XPRT_ERR_VERS) {
			if (rr_xdr_get_u32(&d, &h->vers_low) ||
			    rr_xdr_get_u32(&d, &h->vers_high))
				return RR_XPRT_V_DROP;
		} else if (h->err != RR_XPRT_ERR_CHUNK) {
			return RR_XPRT_V_DROP;
		}
		break;
	default: /* RDMA_MSGP and unknown procedures */
		return RR_XPRT_V_ERR_CHUNK;
	}
	h->hdr_len = (uint32_t)rr_xdr_dec_pos(&d);
	return RR_XPRT_V_OK;
}

static size_t chunk_size(const struct rr_xprt_chunk *c)
{
	return 4 + (size_t)c->nsegs * 16;
}

size_t rr_xprt_hdr_size(const struct rr_xprt_hdr *h)
{
	size_t n = RR_XPRT_FIXED_HDR;

	switch (h->proc) {
	case RR_XPRT_MSG:
	case RR_XPRT_NOMSG:
		n += (size_t)h->nreads * 24 + 4;
		for (uint32_t i = 0; i < h->nwrites; i++)
			n += 4 + chunk_size(&h->writes[i]);
		n += 4;
		n += 4 + (h->has_reply ? chunk_size(&h->reply) : 0);
		return n;
	case RR_XPRT_ERROR:
		return n + 4 + (h->err == RR_XPRT_ERR_VERS ? 8 : 0);
	default:
		return n;
	}
}

static int put_seg(struct rr_xdr_enc *e, const struct rr_xprt_seg *s)
{
	if (rr_xdr_put_u32(e, s->handle) || rr_xdr_put_u32(e, s->length) ||
	    rr_xdr_put_u64(e, s->offset))
		return -EMSGSIZE;
	return 0;
}

static int put_chunk(struct rr_xdr_enc *e, const struct rr_xprt_chunk *c)
{
	if (rr_xdr_put_u32(e, c->nsegs))
		return -EMSGSIZE;
	for (uint32_t i = 0; i < c->nsegs; i++)
		if (put_seg(e, &c->segs[i]))
			return -EMSGSIZE;
	return 0;
}

int rr_xprt_hdr_encode(const struct rr_xprt_hdr *h, uint8_t *buf, size_t cap)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, buf, cap);
	if (rr_xdr_put_u32(&e, h->xid) || rr_xdr_put_u32(&e, h->vers) ||
	    rr_xdr_put_u32(&e, h->credit) || rr_xdr_put_u32(&e, h->proc))
		return -EMSGSIZE;
	switch (h->proc) {
	case RR_XPRT_MSG:
	case RR_XPRT_NOMSG:
		for (uint32_t i = 0; i < h->nreads; i++)
			if (rr_xdr_put_bool(&e, true) ||
			    rr_xdr_put_u32(&e, h->reads[i].position) ||
			    put_seg(&e, &h->reads[i].seg))
				return -EMSGSIZE;
		if (rr_xdr_put_bool(&e, false))
			return -EMSGSIZE;
		for (uint32_t i = 0; i < h->nwrites; i++)
			if (rr_xdr_put_bool(&e, true) || put_chunk(&e, &h->writes[i]))
				return -EMSGSIZE;
		if (rr_xdr_put_bool(&e, false) || rr_xdr_put_bool(&e, h->has_reply))
			return -EMSGSIZE;
		if (h->has_reply && put_chunk(&e, &h->reply))
			return -EMSGSIZE;
		break;
	case RR_XPRT_ERROR:
		if (rr_xdr_put_u32(&e, h->err))
			return -EMSGSIZE;
		if (h->err == RR_XPRT_ERR_VERS &&
		    (rr_xdr_put_u32(&e, h->vers_low) || rr_xdr_put_u32(&e, h->vers_high)))
			return -EMSGSIZE;
		break;
	case RR_XPRT_DONE:
		break;
	default:
		return -EINVAL;
	}
	return (int)rr_xdr_enc_len(&e);
}

/* RDMA_ERROR (RFC 8166 4.3.2): xid vers credit 4 err [low high]. ERR_VERS
 * advertises 1..1. */
int rr_xprt_encode_error(uint32_t xid, uint32_t grant, uint32_t err,
			 uint8_t *buf, size_t cap)
{
	struct rr_xprt_hdr h;

	h.xid = xid;
	h.vers = RR_XPRT_VERSION;
	h.credit = grant;
	h.proc = RR_XPRT_ERROR;
	h.err = err;
	h.vers_low = RR_XPRT_VERSION;
	h.vers_high = RR_XPRT_VERSION;
	return rr_xprt_hdr_encode(&h, buf, cap);
}

int rr_xprt_stats_print(const struct rr_xprt_stats *s, FILE *f)
{
	int n = fprintf(f,
		"\txprt:\trdma sends %llu recvs %llu bad_xids %llu bad_replies %llu\n"
		"\t\tread_chunks %llu write_chunks %llu reply_chunks %llu\n"
		"\t\ttotal_rdma_req %llu total_rdma_rep %llu rdma_read_bytes %llu rdma_write_bytes %llu\n"
		"\t\tshort %llu chunked %llu long %llu pullup_bytes %llu\n"
		"\t\terr_vers_sent %llu err_chunk_sent %llu err_received %llu dropped %llu\n"
		"\t\tremote_inv %llu local_inv %llu bad_remote_inv %llu\n"
		"\t\tcredits_exhausted %llu retransmits %llu reconnects %llu fatal_errors %llu\n",
		(unsigned long long)s->sends, (unsigned long long)s->recvs,
		(unsigned long long)s->bad_xids, (unsigned long long)s->bad_replies,
		(unsigned long long)s->read_chunks, (unsigned long long)s->write_chunks,
		(unsigned long long)s->reply_chunks,
		(unsigned long long)s->total_rdma_req, (unsigned long long)s->total_rdma_rep,
		(unsigned long long)s->rdma_read_bytes, (unsigned long long)s->rdma_write_bytes,
		(unsigned long long)s->short_msgs, (unsigned long long)s->chunked_msgs,
		(unsigned long long)s->long_msgs, (unsigned long long)s->pullup_bytes,
		(unsigned long long)s->err_vers_sent, (unsigned long long)s->err_chunk_sent,
		(unsigned long long)s->err_received, (unsigned long long)s->dropped,
		(unsigned long long)s->remote_inv, (unsigned long long)s->local_inv,
		(unsigned long long)s->bad_remote_inv,
		(unsigned long long)s->credits_exhausted, (unsigned long long)s->retransmits,
		(unsigned long long)s->reconnects, (unsigned long long)s->fatal_errors);
	return n < 0 ? -EIO : 0;
}
