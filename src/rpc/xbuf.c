/* SPDX-License-Identifier: BSD-2-Clause */
/* The public XDR cursor (include/rpcrdma/xdr.h) over the RPC layer's message
 * buffers: RFC 4506 items encoded into a growable inline buffer, DDP-eligible
 * opaque items kept by reference with their positions (RFC 8166 section 6),
 * and decoding of DDP-eligible items from inline bytes, result sinks or
 * transport-delivered items. Every decode goes through the checked cursor
 * of src/xdr/xdr.h. Errors are sticky per cursor. */
#include "rpc/xbuf.h"

#include <limits.h>

static const uint8_t zero_pad[4];

void rr_xbuf_enc_init(struct rpcrdma_xdr_enc *e, const struct rpcrdma_env *env, size_t max)
{
	memset(e, 0, sizeof(*e));
	e->env = env;
	e->max = max;
}

void rr_xbuf_enc_reset(struct rpcrdma_xdr_enc *e)
{
	e->len = e->xdr_len = 0;
	e->nddp = 0;
	e->error = 0;
}

void rr_xbuf_enc_free(struct rpcrdma_xdr_enc *e)
{
	rr_free(e->env, e->buf);
	e->buf = NULL;
	e->cap = e->len = e->xdr_len = 0;
	e->nddp = 0;
}

void rr_xbuf_enc_truncate(struct rpcrdma_xdr_enc *e, size_t len)
{
	if (len > e->len)
		return;
	while (e->nddp && e->ddp[e->nddp - 1].inline_off > len)
		e->nddp--;
	e->len = len;
	e->xdr_len = len;
	for (unsigned i = 0; i < e->nddp; i++)
		e->xdr_len += RR_ALIGN4((size_t)e->ddp[i].len);
	e->error = 0;
}

uint8_t *rr_xbuf_enc_grow(struct rpcrdma_xdr_enc *e, size_t n)
{
	uint8_t *p;

	if (e->error)
		return NULL;
	if (n > e->max || e->xdr_len > e->max - n) {
		e->error = -EMSGSIZE;
		return NULL;
	}
	if (e->cap - e->len < n) {
		size_t ncap = e->cap ? e->cap : 512;
		uint8_t *nb;

		while (ncap - e->len < n)
			ncap *= 2;
		nb = rr_alloc(e->env, ncap);
		if (!nb) {
			e->error = -ENOMEM;
			return NULL;
		}
		if (e->len)
			memcpy(nb, e->buf, e->len);
		rr_free(e->env, e->buf);
		e->buf = nb;
		e->cap = ncap;
	}
	p = e->buf + e->len;
	e->len += n;
	e->xdr_len += n;
	return p;
}

RPCRDMA_API int rpcrdma_xdr_put_u32(struct rpcrdma_xdr_enc *e, uint32_t v)
{
	uint8_t *p;

	if (!e)
		return -EINVAL;
	p = rr_xbuf_enc_room(e, 4);

	if (!p)
		return e->error;
	rr_put_be32(p, v);
	return 0;
}

RPCRDMA_API int rpcrdma_xdr_put_i32(struct rpcrdma_xdr_enc *e, int32_t v)
{
	return rpcrdma_xdr_put_u32(e, (uint32_t)v);
}

RPCRDMA_API int rpcrdma_xdr_put_u64(struct rpcrdma_xdr_enc *e, uint64_t v)
{
	uint8_t *p;

	if (!e)
		return -EINVAL;
	p = rr_xbuf_enc_room(e, 8);

	if (!p)
		return e->error;
	rr_put_be64(p, v);
	return 0;
}

RPCRDMA_API int rpcrdma_xdr_put_i64(struct rpcrdma_xdr_enc *e, int64_t v)
{
	return rpcrdma_xdr_put_u64(e, (uint64_t)v);
}

RPCRDMA_API int rpcrdma_xdr_put_bool(struct rpcrdma_xdr_enc *e, bool v)
{
	return rpcrdma_xdr_put_u32(e, v ? 1 : 0);
}

RPCRDMA_API int rpcrdma_xdr_put_space(struct rpcrdma_xdr_enc *e, size_t n, void **out)
{
	uint8_t *p;

	if (!e || !out)
		return -EINVAL;
	if (n > SIZE_MAX - 3) {
		if (!e->error)
			e->error = -EMSGSIZE;
		return e->error;
	}
	p = rr_xbuf_enc_room(e, RR_ALIGN4(n));
	if (!p)
		return e->error;
	memset(p + n, 0, RR_ALIGN4(n) - n);
	*out = p;
	return 0;
}

RPCRDMA_API int rpcrdma_xdr_put_fixed(struct rpcrdma_xdr_enc *e, const void *data, size_t n)
{
	void *p;
	int rc;

	if (!e)
		return -EINVAL;
	if (n && !data) {
		if (!e->error)
			e->error = -EINVAL;
		return e->error;
	}
	rc = rpcrdma_xdr_put_space(e, n, &p);
	if (rc)
		return rc;
	if (n)
		memcpy(p, data, n);
	return 0;
}

RPCRDMA_API int rpcrdma_xdr_put_opaque(struct rpcrdma_xdr_enc *e, const void *data, uint32_t n)
{
	int rc = rpcrdma_xdr_put_u32(e, n);

	return rc ? rc : rpcrdma_xdr_put_fixed(e, data, n);
}

RPCRDMA_API int rpcrdma_xdr_put_string(struct rpcrdma_xdr_enc *e, const char *s)
{
	size_t n;

	if (!e)
		return -EINVAL;
	if (!s) {
		if (!e->error)
			e->error = -EINVAL;
		return e->error;
	}
	n = strlen(s);
	if (n > UINT32_MAX) {
		if (!e->error)
			e->error = -EMSGSIZE;
		return e->error;
	}
	return rpcrdma_xdr_put_opaque(e, s, (uint32_t)n);
}

RPCRDMA_API int rpcrdma_xdr_put_ddp(struct rpcrdma_xdr_enc *e, const void *data, uint32_t n)
{
	size_t padded = RR_ALIGN4((size_t)n);
	struct rr_rpc_ddp *it;
	int rc;

	if (!e)
		return -EINVAL;
	if (e->error)
		return e->error;
	if (n && !data) {
		e->error = -EINVAL;
		return e->error;
	}
	if (e->nddp == RR_RPC_MAX_DDP) {
		e->error = -E2BIG;
		return e->error;
	}
	rc = rpcrdma_xdr_put_u32(e, n);
	if (rc)
		return rc;
	if (padded > e->max || e->xdr_len > e->max - padded) {
		e->error = -EMSGSIZE;
		return e->error;
	}
	it = &e->ddp[e->nddp++];
	it->inline_off = e->len;
	it->xdr_pos = e->xdr_len;
	it->ptr = data;
	it->len = n;
	e->xdr_len += padded;
	return 0;
}

RPCRDMA_API size_t rpcrdma_xdr_enc_len(const struct rpcrdma_xdr_enc *e)
{
	return e ? e->xdr_len : 0;
}

RPCRDMA_API int rpcrdma_xdr_enc_error(const struct rpcrdma_xdr_enc *e)
{
	return e ? e->error : -EINVAL;
}

/* ---- decoding ---- */

void rr_xbuf_dec_init(struct rpcrdma_xdr_dec *d, const uint8_t *buf, size_t len)
{
	memset(d, 0, sizeof(*d));
	rr_xdr_dec_init(&d->x, buf, len);
}

static int dec_fail(struct rpcrdma_xdr_dec *d, int rc)
{
	if (!d->error)
		d->error = rc;
	return d->error;
}

RPCRDMA_API int rpcrdma_xdr_get_u32(struct rpcrdma_xdr_dec *d, uint32_t *v)
{
	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	return rr_xdr_get_u32(&d->x, v) ? dec_fail(d, -EBADMSG) : 0;
}

RPCRDMA_API int rpcrdma_xdr_get_i32(struct rpcrdma_xdr_dec *d, int32_t *v)
{
	uint32_t u;
	int rc = rpcrdma_xdr_get_u32(d, &u);

	if (!rc)
		*v = (int32_t)u;
	return rc;
}

RPCRDMA_API int rpcrdma_xdr_get_u64(struct rpcrdma_xdr_dec *d, uint64_t *v)
{
	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	return rr_xdr_get_u64(&d->x, v) ? dec_fail(d, -EBADMSG) : 0;
}

RPCRDMA_API int rpcrdma_xdr_get_i64(struct rpcrdma_xdr_dec *d, int64_t *v)
{
	uint64_t u;
	int rc = rpcrdma_xdr_get_u64(d, &u);

	if (!rc)
		*v = (int64_t)u;
	return rc;
}

RPCRDMA_API int rpcrdma_xdr_get_bool(struct rpcrdma_xdr_dec *d, bool *v)
{
	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	return rr_xdr_get_bool(&d->x, v) ? dec_fail(d, -EBADMSG) : 0;
}

RPCRDMA_API int rpcrdma_xdr_get_fixed(struct rpcrdma_xdr_dec *d, void *out, size_t n)
{
	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	return rr_xdr_get_fixed(&d->x, out, n) ? dec_fail(d, -EBADMSG) : 0;
}

RPCRDMA_API int rpcrdma_xdr_get_opaque(struct rpcrdma_xdr_dec *d, uint32_t maxlen,
				       const void **p, uint32_t *len)
{
	const uint8_t *q;

	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	if (rr_xdr_get_opaque_ref(&d->x, maxlen, &q, len))
		return dec_fail(d, -EBADMSG);
	*p = q;
	return 0;
}

RPCRDMA_API int rpcrdma_xdr_get_string(struct rpcrdma_xdr_dec *d, char *buf, size_t cap)
{
	size_t start;
	const uint8_t *q;
	uint32_t n;

	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	start = d->x.pos;
	if (!cap)
		return dec_fail(d, -EINVAL);
	if (rr_xdr_get_opaque_ref(&d->x, UINT32_MAX, &q, &n))
		return dec_fail(d, -EBADMSG);
	if ((size_t)n >= cap || memchr(q, 0, n)) {
		d->x.pos = start;
		return dec_fail(d, -EBADMSG);
	}
	memcpy(buf, q, n);
	buf[n] = '\0';
	return 0;
}

/* A DDP-eligible opaque<>: length word inline, then the data from (in this
 * order of precedence) a transport-delivered item at this inline position
 * (server), the transport's placement into the next sink (client), or the
 * inline bytes (copied into the next sink if there is one). */
RPCRDMA_API int rpcrdma_xdr_get_ddp(struct rpcrdma_xdr_dec *d, const void **p, uint32_t *len)
{
	size_t start;
	const uint8_t *q;
	uint32_t n;

	if (!d)
		return -EINVAL;
	if (d->error)
		return d->error;
	start = d->x.pos;
	if (rr_xdr_get_u32(&d->x, &n))
		return dec_fail(d, -EBADMSG);

	if (d->next_ext < d->n_ext && d->ext[d->next_ext].inline_off == d->x.pos) {
		const struct rr_rpc_ext *x = &d->ext[d->next_ext];

		if (x->len != n) {
			d->x.pos = start;
			return dec_fail(d, -EBADMSG);
		}
		d->next_ext++;
		*p = x->ptr;
		*len = n;
		return 0;
	}
	if (d->next_sink < d->nsinks) {
		const struct rpcrdma_ddp_sink *s = &d->sinks[d->next_sink];
		uint32_t placed = d->placed ? d->placed[d->next_sink] : RR_RPC_NOT_PLACED;

		if (placed != RR_RPC_NOT_PLACED) {
			/* Placed by the transport (RDMA Write): only the
			 * length word is inline. */
			if (placed != n || n > s->max) {
				d->x.pos = start;
				return dec_fail(d, -EBADMSG);
			}
		} else {
			d->x.pos = start;
			if (rr_xdr_get_opaque_ref(&d->x, UINT32_MAX, &q, &n))
				return dec_fail(d, -EBADMSG);
			if (n > s->max) {
				d->x.pos = start;
				return dec_fail(d, -EMSGSIZE);
			}
			if (n)
				memcpy(s->buf, q, n);
		}
		d->next_sink++;
		*p = s->buf;
		*len = n;
		return 0;
	}
	d->x.pos = start;
	if (rr_xdr_get_opaque_ref(&d->x, UINT32_MAX, &q, &n))
		return dec_fail(d, -EBADMSG);
	*p = q;
	*len = n;
	return 0;
}

RPCRDMA_API size_t rpcrdma_xdr_dec_remaining(const struct rpcrdma_xdr_dec *d)
{
	return d ? rr_xdr_dec_remaining(&d->x) : 0;
}

RPCRDMA_API int rpcrdma_xdr_dec_error(const struct rpcrdma_xdr_dec *d)
{
	return d ? d->error : -EINVAL;
}

/* Keeps the zero pad referenced for transports that send it (TCP). */
const uint8_t *rr_xbuf_zero_pad(void)
{
	return zero_pad;
}
