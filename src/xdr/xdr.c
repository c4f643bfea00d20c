/* SPDX-License-Identifier: BSD-2-Clause */
/* Out-of-line parts of the checked XDR cursor (RFC 4506 sections 4.9, 4.10:
 * fixed and variable-length opaque data with zero padding to four bytes).
 * See xdr.h for the conventions. */
#include "xdr/xdr.h"

/* Padded size of @n, or 0 with *ok false on overflow. */
static size_t padded(size_t n, bool *ok)
{
	if (n > SIZE_MAX - 3) {
		*ok = false;
		return 0;
	}
	*ok = true;
	return RR_ALIGN4(n);
}

int rr_xdr_skip(struct rr_xdr_dec *d, size_t n)
{
	bool ok;
	size_t p = padded(n, &ok);

	if (!ok || d->len - d->pos < p)
		return -EBADMSG;
	d->pos += p;
	return 0;
}

int rr_xdr_get_fixed(struct rr_xdr_dec *d, void *out, size_t n)
{
	const uint8_t *p;
	int rc = rr_xdr_get_fixed_ref(d, n, &p);

	if (rc == 0 && n)
		memcpy(out, p, n);
	return rc;
}

int rr_xdr_get_opaque_ref(struct rr_xdr_dec *d, uint32_t maxlen,
			  const uint8_t **p, uint32_t *len)
{
	size_t start = d->pos;
	uint32_t n;
	int rc;

	rc = rr_xdr_get_u32(d, &n);
	if (rc)
		return rc;
	if (n > maxlen) {
		d->pos = start;
		return -EBADMSG;
	}
	rc = rr_xdr_get_fixed_ref(d, n, p);
	if (rc) {
		d->pos = start;
		return rc;
	}
	*len = n;
	return 0;
}

int rr_xdr_get_opaque(struct rr_xdr_dec *d, uint32_t maxlen, void *out,
		      size_t cap, uint32_t *len)
{
	size_t start = d->pos;
	const uint8_t *p;
	uint32_t n;
	int rc;

	rc = rr_xdr_get_opaque_ref(d, maxlen, &p, &n);
	if (rc)
		return rc;
	if (n > cap) {
		d->pos = start;
		return -EBADMSG;
	}
	if (n)
		memcpy(out, p, n);
	*len = n;
	return 0;
}

int rr_xdr_put_fixed(struct rr_xdr_enc *e, const void *data, size_t n)
{
	bool ok;
	size_t pn = padded(n, &ok);

	if (!ok || e->cap - e->pos < pn)
		return -EMSGSIZE;
	if (n)
		memcpy(e->buf + e->pos, data, n);
	rr_xdr_zero_pad(e->buf + e->pos + n, pn - n);
	e->pos += pn;
	return 0;
}

int rr_xdr_put_opaque(struct rr_xdr_enc *e, const void *data, uint32_t len)
{
	size_t start = e->pos;
	int rc;

	rc = rr_xdr_put_u32(e, len);
	if (rc)
		return rc;
	rc = rr_xdr_put_fixed(e, data, len);
	if (rc)
		e->pos = start;
	return rc;
}

int rr_xdr_reserve(struct rr_xdr_enc *e, size_t n, size_t *off)
{
	if ((n & 3) || e->cap - e->pos < n)
		return -EMSGSIZE;
	memset(e->buf + e->pos, 0, n);
	*off = e->pos;
	e->pos += n;
	return 0;
}
