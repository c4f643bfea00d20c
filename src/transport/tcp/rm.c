/* SPDX-License-Identifier: BSD-2-Clause */
/* RFC 5531 section 11 record marking, sans I/O (rm.h): the decoder turns a
 * byte stream into records under the limits rm.h lists, asking the caller
 * to place bytes straight into the record buffer (rr_rm_dec_space /
 * rr_rm_dec_commit: no copy on the receive path) or copying them in
 * (rr_rm_dec_feed); the encoder frames a record given as pieces into
 * fragments for a gathering write. No system call. */
#include "transport/tcp/rm.h"

#define RM_MPA_KEY4 "MPA "
#define RM_GROW_MIN ((size_t)16384)

unsigned rr_rm_frags_default(size_t max_record)
{
	size_t per_kib = max_record / 1024;

	return per_kib > 1024 ? (unsigned)RR_MIN(per_kib, (size_t)UINT32_MAX) : 1024u;
}

void rr_rm_dec_init(struct rr_rm_dec *d, const struct rr_rm_dec_conf *c)
{
	memset(d, 0, sizeof(*d));
	d->c = *c;
}

static void dec_put(struct rr_rm_dec *d, uint8_t *buf, size_t cap)
{
	if (!buf)
		return;
	if (d->c.bufs.put)
		d->c.bufs.put(d->c.bufs.arg, buf, cap);
	else
		rr_free(d->c.env, buf);
}

static uint8_t *dec_get(struct rr_rm_dec *d, size_t min, size_t need, size_t *cap)
{
	uint8_t *b;

	if (d->c.bufs.get)
		return d->c.bufs.get(d->c.bufs.arg, min, need, d->cap, cap);
	b = rr_alloc(d->c.env, min);
	*cap = min;
	return b;
}

/* Drops the record in progress, keeps the stream position. */
static void dec_drop_record(struct rr_rm_dec *d)
{
	dec_put(d, d->buf, d->cap);
	d->buf = NULL;
	d->cap = d->len = 0;
}

void rr_rm_dec_reset(struct rr_rm_dec *d)
{
	dec_drop_record(d);
	d->hdr_got = 0;
	d->in_frag = false;
	d->skipping = false;
	d->started = false;
	d->complete = false;
	d->nfrags = 0;
	d->offered = 0;
}

void rr_rm_dec_fini(struct rr_rm_dec *d)
{
	rr_rm_dec_reset(d);
}

/* The record buffer is full: a larger one. The server grows as bytes
 * arrive (at most double what was received), so a hostile length claim
 * costs nothing; with trust_len (client: within max_record, from the server
 * we chose) the fragment at once. Never beyond what the headers announced. */
static int dec_grow(struct rr_rm_dec *d)
{
	size_t need = d->len + d->frag_left;
	size_t ncap = d->c.trust_len ? need : RR_MAX(d->cap * 2, RM_GROW_MIN);
	size_t got = 0;
	uint8_t *nb;

	if (ncap > need)
		ncap = need;
	nb = dec_get(d, ncap, need, &got);
	if (!nb)
		return -ENOMEM;
	if (d->len)
		memcpy(nb, d->buf, d->len);
	dec_put(d, d->buf, d->cap);
	d->buf = nb;
	d->cap = got;
	return 0;
}

int rr_rm_dec_space(struct rr_rm_dec *d, uint8_t **dst, size_t *n)
{
	int rc;

	d->offered = 0;
	if (d->complete)
		return -EBUSY;
	if (!d->in_frag) {
		*dst = d->hdr + d->hdr_got;
		*n = RR_RM_HDR_LEN - d->hdr_got;
	} else if (d->skipping) {
		if (d->skip_have < sizeof(d->head8)) {
			*dst = d->head8 + d->skip_have;
			*n = RR_MIN((size_t)(sizeof(d->head8) - d->skip_have), (size_t)d->frag_left);
		} else {
			*dst = NULL;
			*n = d->frag_left;
		}
	} else {
		if (d->cap == d->len) {
			rc = dec_grow(d);
			if (rc)
				return rc;
		}
		*dst = d->buf + d->len;
		*n = RR_MIN((size_t)d->frag_left, d->cap - d->len);
	}
	d->offered = *n;
	return 0;
}

/* The end of a fragment's data: the record is complete when it was the
 * last one. */
static int dec_frag_end(struct rr_rm_dec *d)
{
	d->in_frag = false;
	if (!d->last)
		return RR_RM_MORE;
	d->nfrags = 0;
	if (d->skipping) {
		d->skipping = false;
		return RR_RM_SKIPPED;
	}
	d->complete = true;
	return RR_RM_RECORD;
}

/* Fragment header (RFC 5531 section 11): L (1 bit, last fragment) |
 * length (31 bits), big-endian; then that many data bytes. The header is
 * in: check it against the limits. */
static int dec_header(struct rr_rm_dec *d)
{
	uint32_t h;

	d->hdr_got = 0;
	if (!d->started && !memcmp(d->hdr, RM_MPA_KEY4, RR_RM_HDR_LEN))
		return -EPROTOTYPE;
	d->started = true;
	h = rr_get_be32(d->hdr);
	d->last = (h & RR_RM_LAST) != 0;
	d->frag_left = h & RR_RM_MAX_FRAG;
	if (d->c.max_frags && ++d->nfrags > d->c.max_frags)
		return -EBADMSG;
	if (!d->skipping &&
	    (d->frag_left > d->c.max_record || d->len > d->c.max_record - d->frag_left)) {
		if (!d->c.skip_oversize)
			return -EMSGSIZE;
		d->skipping = true;
		d->skip_have = (unsigned)RR_MIN(d->len, sizeof(d->head8));
		if (d->skip_have)
			memcpy(d->head8, d->buf, d->skip_have);
		dec_drop_record(d);
	}
	d->in_frag = true;
	return d->frag_left ? RR_RM_MORE : dec_frag_end(d);
}

int rr_rm_dec_commit(struct rr_rm_dec *d, size_t n)
{
	if (n > d->offered)
		return -EINVAL;
	d->offered = 0;
	if (n == 0)
		return RR_RM_MORE;
	if (!d->in_frag) {
		d->hdr_got += (unsigned)n;
		return d->hdr_got < RR_RM_HDR_LEN ? RR_RM_MORE : dec_header(d);
	}
	if (d->skipping) {
		if (d->skip_have < sizeof(d->head8))
			d->skip_have += (unsigned)n;
	} else {
		d->len += n;
	}
	d->frag_left -= (uint32_t)n;
	return d->frag_left ? RR_RM_MORE : dec_frag_end(d);
}

int rr_rm_dec_feed(struct rr_rm_dec *d, const uint8_t *in, size_t len, size_t *used)
{
	int rc = RR_RM_MORE;

	*used = 0;
	while (*used < len) {
		uint8_t *dst;
		size_t n;

		rc = rr_rm_dec_space(d, &dst, &n);
		if (rc)
			return rc;
		n = RR_MIN(n, len - *used);
		if (dst)
			memcpy(dst, in + *used, n);
		*used += n;
		rc = rr_rm_dec_commit(d, n);
		if (rc)
			return rc;
	}
	return rc;
}

uint8_t *rr_rm_dec_take(struct rr_rm_dec *d, size_t *len, size_t *cap)
{
	uint8_t *b = d->buf;

	if (!d->complete) {
		*len = *cap = 0;
		return NULL;
	}
	*len = d->len;
	*cap = d->cap;
	d->buf = NULL;
	d->cap = d->len = 0;
	d->complete = false;
	return b;
}

unsigned rr_rm_dec_skipped(const struct rr_rm_dec *d, const uint8_t **head)
{
	*head = d->head8;
	return d->skip_have;
}

bool rr_rm_dec_idle(const struct rr_rm_dec *d)
{
	return !d->complete && !d->in_frag && d->hdr_got == 0 && d->nfrags == 0 && d->len == 0;
}

/* ---- encoder ---- */

/* Fragment header (RFC 5531 section 11): last flag | 31-bit length */
void rr_rm_put_header(uint8_t out[RR_RM_HDR_LEN], uint32_t len, bool last)
{
	rr_put_be32(out, (last ? RR_RM_LAST : 0) | (len & RR_RM_MAX_FRAG));
}

size_t rr_rm_enc_frags(size_t len, uint32_t max_frag)
{
	if (!max_frag)
		return 0;
	return len ? (len - 1) / max_frag + 1 : 1;
}

/* Record = fragment*; fragment = header(L | len) data[len] (RFC 5531
 * section 11). */
int rr_rm_enc_iov(const struct iovec *in, unsigned nin, uint32_t max_frag,
		  uint8_t (*hdrs)[RR_RM_HDR_LEN], unsigned nhdrs, struct iovec *out,
		  unsigned out_cap)
{
	size_t total = 0, left, nfrag;
	unsigned i = 0, n = 0, f = 0;
	size_t off = 0;   /* consumed bytes of in[i] */

	if (!max_frag || max_frag > RR_RM_MAX_FRAG)
		return -EINVAL;
	for (unsigned k = 0; k < nin; k++)
		total += in[k].iov_len;
	nfrag = rr_rm_enc_frags(total, max_frag);
	if (nfrag > nhdrs)
		return -EMSGSIZE;
	left = total;
	for (f = 0; f < nfrag; f++) {
		size_t flen = RR_MIN(left, (size_t)max_frag);

		if (n == out_cap)
			return -ENOSPC;
		rr_rm_put_header(hdrs[f], (uint32_t)flen, f + 1 == nfrag);
		out[n].iov_base = hdrs[f];
		out[n++].iov_len = RR_RM_HDR_LEN;
		left -= flen;
		while (flen) {
			size_t k;

			while (in[i].iov_len == off) {   /* empty or used up */
				i++;
				off = 0;
			}
			k = RR_MIN(flen, in[i].iov_len - off);
			if (n == out_cap)
				return -ENOSPC;
			out[n].iov_base = (uint8_t *)in[i].iov_base + off;
			out[n++].iov_len = k;
			off += k;
			flen -= k;
		}
	}
	return (int)n;
}
