/* SPDX-License-Identifier: BSD-2-Clause */
/* The RPC layer's message buffers behind the public XDR cursor
 * (include/rpcrdma/xdr.h): a growable encoder that keeps DDP-eligible items
 * by reference (inline bytes + a list of referenced bulk items with their XDR
 * positions), and a decoder that yields DDP-eligible items either from the
 * inline bytes, from a caller's result sink, or from an item the transport
 * delivered outside the inline bytes. Wraps the checked cursor of
 * src/xdr/xdr.h (RFC 4506); see src/transport/xprt.h for how transports use these
 * structures (RFC 8166 section 6 "Upper-Layer Binding Specifications",
 * DDP-eligibility; section 3.4.3 "XDR reduction"). */
#ifndef RR_RPC_XBUF_H
#define RR_RPC_XBUF_H

#include "common/common.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/xdr.h"
#include "xdr/xdr.h"

/* Most DDP-eligible items per message, and result sinks per call. */
#define RR_RPC_MAX_DDP 16u

/* An outgoing DDP-eligible item (encoded with rpcrdma_xdr_put_ddp()).
 * The XDR length word of the item is in the inline bytes; its data and pad
 * are not.
 *  @inline_off: offset in the inline bytes where the item's data would start
 *               (just after its length word);
 *  @xdr_pos:    offset of the item's data in the complete XDR message (the
 *               message as TCP sends it: inline bytes with every earlier item's
 *               data and pad inserted), i.e. the RFC 8166 Read chunk Position
 *               when the Payload stream starts with the RPC header;
 *  @ptr, @len:  the caller's bytes (borrowed). The pad is RR_ALIGN4(len)-len
 *               zero bytes, never stored. */
struct rr_rpc_ddp {
	size_t inline_off;
	size_t xdr_pos;
	const uint8_t *ptr;
	uint32_t len;
};

/* An incoming item delivered outside the inline bytes (server side: the data
 * of a Read chunk pulled by RDMA Read). @inline_off as above: the offset in
 * the received inline bytes right after the item's XDR length word. */
struct rr_rpc_ext {
	size_t inline_off;
	const uint8_t *ptr;
	uint32_t len;
};

/* Placement state of a result sink reported by the transport. */
#define RR_RPC_NOT_PLACED UINT32_MAX

struct rpcrdma_xdr_enc {
	const struct rpcrdma_env *env;
	uint8_t *buf;        /* inline bytes, owned */
	size_t cap;
	size_t len;          /* inline bytes used */
	size_t xdr_len;      /* complete XDR length (inline + items + pads) */
	size_t max;          /* limit on xdr_len */
	unsigned nddp;
	int error;           /* sticky (beside the fields every call
				writes, before the items' array) */
	struct rr_rpc_ddp ddp[RR_RPC_MAX_DDP];
};

struct rpcrdma_xdr_dec {
	struct rr_xdr_dec x;
	/* client side: result sinks, in order, with transport placement */
	const struct rpcrdma_ddp_sink *sinks;
	const uint32_t *placed;  /* per sink: RR_RPC_NOT_PLACED or length */
	unsigned nsinks;
	unsigned next_sink;
	/* server side: items outside the inline bytes, by inline_off */
	const struct rr_rpc_ext *ext;
	unsigned n_ext;
	unsigned next_ext;
	int error;           /* sticky */
};

/* Encoder over an owned, growable buffer limited to @max bytes of XDR. */
void rr_xbuf_enc_init(struct rpcrdma_xdr_enc *e, const struct rpcrdma_env *env, size_t max);
/* The largest buffer a spare call or request keeps for its next message
 * (common/spare.h; a larger one, grown for a big message, is freed). */
#define RR_XBUF_SPARE_CAP 4096u
/* Empties @e for a new message; its buffer (and capacity) is kept. */
void rr_xbuf_enc_reset(struct rpcrdma_xdr_enc *e);
void rr_xbuf_enc_free(struct rpcrdma_xdr_enc *e);
/* Drops everything encoded after inline length @len, DDP items included,
 * and clears the sticky error. */
void rr_xbuf_enc_truncate(struct rpcrdma_xdr_enc *e, size_t len);
/* rr_xbuf_enc_room's every case (the buffer grown when it must). */
uint8_t *rr_xbuf_enc_grow(struct rpcrdma_xdr_enc *e, size_t n);

/* Appends @n inline bytes (uninitialised) and returns them, or NULL with
 * the sticky error set (-EMSGSIZE above the limit, -ENOMEM). Inline when
 * they fit the buffer as it is (the same checks, in the same order as
 * rr_xbuf_enc_grow's); anything else is rr_xbuf_enc_grow's. */
static inline uint8_t *rr_xbuf_enc_room(struct rpcrdma_xdr_enc *e, size_t n)
{
	uint8_t *p;

	if (RR_UNLIKELY(e->error || n > e->max || e->xdr_len > e->max - n ||
			e->cap - e->len < n))
		return rr_xbuf_enc_grow(e, n);
	p = e->buf + e->len;
	e->len += n;
	e->xdr_len += n;
	return p;
}

/* rr_xbuf_enc_room on an emptied encoder (len, xdr_len and error 0: just
 * made or reset, nothing appended since): the same bytes, the same result
 * and the same fields after it, with the two checks left of its four (the
 * RPC client's Call header, clnt.c rpcrdma_call_create). Proven equal to
 * rr_xbuf_enc_room by test xbuf_enc_room_empty_as_room. */
/* Whether @n bytes fit in @e's buffer as it is (no growing) and in its
 * limit: rr_xbuf_enc_room_empty's test, which then neither grows nor fails
 * (a caller that tests it first keeps no call for the growing). */
static inline bool rr_xbuf_enc_fits(const struct rpcrdma_xdr_enc *e, size_t n)
{
	return e->cap >= n && e->max >= n;
}

static inline uint8_t *rr_xbuf_enc_room_empty(struct rpcrdma_xdr_enc *e, size_t n)
{
	if (RR_UNLIKELY(!rr_xbuf_enc_fits(e, n)))
		return rr_xbuf_enc_grow(e, n);
	e->len = e->xdr_len = n;
	return e->buf;
}

/* Four zero bytes (XDR pad source for transports that send pads). */
const uint8_t *rr_xbuf_zero_pad(void);

/* Decoder over inline bytes @buf/@len with no DDP information. */
void rr_xbuf_dec_init(struct rpcrdma_xdr_dec *d, const uint8_t *buf, size_t len);

#endif
