/* SPDX-License-Identifier: BSD-2-Clause */
/* The checked XDR cursor (RFC 4506): every decode is bounds-checked and can
 * fail; every encode checks capacity and can fail. All XDR items are multiples
 * of four bytes, big-endian (RFC 4506 section 3). Variable-length and fixed
 * opaque data are padded to four bytes with zeros (sections 4.9, 4.10); pad
 * contents are not checked on decode (liberal in what we accept, as Linux).
 * Counts can be reserved and back-filled once known.
 *
 * Decoders never allocate: variable data is returned as a pointer into the
 * input buffer, valid as long as that buffer is.
 *
 * Return values: 0 on success; -EBADMSG when the input ends early or holds an
 * invalid value (decode); -EMSGSIZE when the output buffer is too small
 * (encode). The cursor does not advance on failure. */
#ifndef RR_XDR_H
#define RR_XDR_H

#include "common/common.h"

struct rr_xdr_dec {
	const uint8_t *buf;
	size_t len;
	size_t pos;
};

struct rr_xdr_enc {
	uint8_t *buf;
	size_t cap;
	size_t pos;
};

/* ---- decoding ---- */

static inline void rr_xdr_dec_init(struct rr_xdr_dec *d, const void *buf, size_t len)
{
	d->buf = buf;
	d->len = len;
	d->pos = 0;
}

static inline size_t rr_xdr_dec_remaining(const struct rr_xdr_dec *d)
{
	return d->len - d->pos;
}

static inline size_t rr_xdr_dec_pos(const struct rr_xdr_dec *d)
{
	return d->pos;
}

/* Pointer to the next undecoded byte. */
static inline const uint8_t *rr_xdr_dec_ptr(const struct rr_xdr_dec *d)
{
	return d->buf + d->pos;
}

static inline int rr_xdr_get_u32(struct rr_xdr_dec *d, uint32_t *v)
{
	if (RR_UNLIKELY(d->len - d->pos < 4))
		return -EBADMSG;
	*v = rr_get_be32(d->buf + d->pos);
	d->pos += 4;
	return 0;
}

static inline int rr_xdr_get_u64(struct rr_xdr_dec *d, uint64_t *v)
{
	if (RR_UNLIKELY(d->len - d->pos < 8))
		return -EBADMSG;
	*v = rr_get_be64(d->buf + d->pos);
	d->pos += 8;
	return 0;
}

/* XDR bool: exactly 0 or 1 (RFC 4506 section 4.4); anything else is invalid. */
static inline int rr_xdr_get_bool(struct rr_xdr_dec *d, bool *v)
{
	uint32_t x;

	if (RR_UNLIKELY(d->len - d->pos < 4))
		return -EBADMSG;
	x = rr_get_be32(d->buf + d->pos);
	if (RR_UNLIKELY(x > 1))
		return -EBADMSG;
	*v = x != 0;
	d->pos += 4;
	return 0;
}

/* Skips @n bytes plus padding to four. */
int rr_xdr_skip(struct rr_xdr_dec *d, size_t n);

/* Fixed-length opaque[n] (section 4.9), copied into @out (n bytes). */
int rr_xdr_get_fixed(struct rr_xdr_dec *d, void *out, size_t n);

/* Fixed-length opaque[n] returned in place: *@p points into the input.
 * Inline: the one-pass decoders of the common headers (proto/hdr.c,
 * rpc/rpcmsg.c) take their fixed words through it on every message. */
static inline int rr_xdr_get_fixed_ref(struct rr_xdr_dec *d, size_t n, const uint8_t **p)
{
	if (RR_UNLIKELY(n > SIZE_MAX - 3 || d->len - d->pos < RR_ALIGN4(n)))
		return -EBADMSG;
	*p = d->buf + d->pos;
	d->pos += RR_ALIGN4(n);
	return 0;
}

/* Variable-length opaque<maxlen> (section 4.10) returned in place. A length
 * above @maxlen, or beyond the input, is -EBADMSG. */
int rr_xdr_get_opaque_ref(struct rr_xdr_dec *d, uint32_t maxlen,
			  const uint8_t **p, uint32_t *len);

/* Variable-length opaque<maxlen> copied into @out (capacity @cap >= maxlen is
 * not required: a length above @cap is -EBADMSG). */
int rr_xdr_get_opaque(struct rr_xdr_dec *d, uint32_t maxlen, void *out,
		      size_t cap, uint32_t *len);

/* ---- encoding ---- */

static inline void rr_xdr_enc_init(struct rr_xdr_enc *e, void *buf, size_t cap)
{
	e->buf = buf;
	e->cap = cap;
	e->pos = 0;
}

static inline size_t rr_xdr_enc_len(const struct rr_xdr_enc *e)
{
	return e->pos;
}

static inline int rr_xdr_put_u32(struct rr_xdr_enc *e, uint32_t v)
{
	if (RR_UNLIKELY(e->cap - e->pos < 4))
		return -EMSGSIZE;
	rr_put_be32(e->buf + e->pos, v);
	e->pos += 4;
	return 0;
}

static inline int rr_xdr_put_u64(struct rr_xdr_enc *e, uint64_t v)
{
	if (RR_UNLIKELY(e->cap - e->pos < 8))
		return -EMSGSIZE;
	rr_put_be64(e->buf + e->pos, v);
	e->pos += 8;
	return 0;
}

static inline int rr_xdr_put_bool(struct rr_xdr_enc *e, bool v)
{
	return rr_xdr_put_u32(e, v ? 1 : 0);
}

/* Zeroes the @n (0 to 3) padding bytes at @p, without a memset call (which
 * costs more than the bytes). */
static inline void rr_xdr_zero_pad(uint8_t *p, size_t n)
{
	if (n > 0)
		p[0] = 0;
	if (n > 1)
		p[1] = 0;
	if (n > 2)
		p[2] = 0;
}

/* Fixed-length opaque[n]: @n bytes of @data then zero padding to four. */
int rr_xdr_put_fixed(struct rr_xdr_enc *e, const void *data, size_t n);

/* Variable-length opaque: the length, the bytes, zero padding to four. */
int rr_xdr_put_opaque(struct rr_xdr_enc *e, const void *data, uint32_t len);

/* Reserves @n bytes (a multiple of four) to be written later; *@off receives
 * their offset. The reserved bytes are zeroed. */
int rr_xdr_reserve(struct rr_xdr_enc *e, size_t n, size_t *off);

/* Writes @v at offset @off reserved earlier with rr_xdr_reserve(). */
static inline void rr_xdr_backfill_u32(struct rr_xdr_enc *e, size_t off, uint32_t v)
{
	rr_put_be32(e->buf + off, v);
}

#endif
