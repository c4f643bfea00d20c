/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: the XDR cursor (RFC 4506) used to encode RPC
 * arguments and results and to decode them, with DDP-eligible bulk items.
 *
 * An encoder (struct rpcrdma_xdr_enc) is handed out by the library: the
 * arguments of a Call (rpcrdma_call_args()) or the results of a Reply in a
 * server handler (rpcrdma_req_results()). It grows as needed up to the
 * connection's maximum message size. A decoder (struct rpcrdma_xdr_dec) reads
 * the results of a completed Call (rpcrdma_call_results()) or the arguments
 * in a server handler (rpcrdma_req_args()).
 *
 * Errors are sticky: after the first failure every later put/get on the same
 * cursor fails with that error, so a sequence of puts can be checked once
 * (rpcrdma_xdr_enc_error()). Every get is bounds-checked. A NULL cursor
 * (e.g. the results of a failed call) is -EINVAL. Functions return 0
 * or a negative errno: -EBADMSG (decode: input ends early or a value is
 * invalid), -EMSGSIZE (encode: above the maximum message size, or a decoded
 * bulk item larger than its sink), -ENOMEM, -EINVAL.
 *
 * DDP-eligible items (RFC 8166 section 6, "Upper-Layer Binding
 * Specifications"): bulk opaque data that an RDMA transport may move by
 * direct data placement instead of inline.
 *  - Encoding: rpcrdma_xdr_put_ddp() encodes an XDR variable-length opaque
 *    (length, data, pad) whose data is REFERENCED, not copied. On TCP the
 *    bytes are sent with writev; on RDMA they become a Read chunk (Calls) or a
 *    Write chunk (Replies), XDR pad removed. The buffer must stay valid and
 *    unchanged until the Call completes (client) or the request's release
 *    callback runs (server).
 *  - Decoding: rpcrdma_xdr_get_ddp() decodes such an opaque. In a Reply the
 *    i-th call to it consumes the i-th result sink the caller supplied
 *    (rpcrdma_call_set_sinks()): the data ends up in that sink's buffer
 *    whether it came inline (copied) or was placed there by RDMA Write, and
 *    *ptr points at the sink. Without a sink (or beyond the last one), *ptr
 *    points into the received message. In a server handler, *ptr points at
 *    the item's bytes as the transport received them. */
#ifndef RPCRDMA_XDR_H
#define RPCRDMA_XDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpcrdma/env.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rpcrdma_xdr_enc;
struct rpcrdma_xdr_dec;

/* ---- encoding (RFC 4506 section 4) ---- */
RPCRDMA_API int rpcrdma_xdr_put_u32(struct rpcrdma_xdr_enc *e, uint32_t v);
RPCRDMA_API int rpcrdma_xdr_put_i32(struct rpcrdma_xdr_enc *e, int32_t v);
RPCRDMA_API int rpcrdma_xdr_put_u64(struct rpcrdma_xdr_enc *e, uint64_t v);
RPCRDMA_API int rpcrdma_xdr_put_i64(struct rpcrdma_xdr_enc *e, int64_t v);
RPCRDMA_API int rpcrdma_xdr_put_bool(struct rpcrdma_xdr_enc *e, bool v);
/* opaque[n]: @n bytes copied, zero pad to four. */
RPCRDMA_API int rpcrdma_xdr_put_fixed(struct rpcrdma_xdr_enc *e, const void *p, size_t n);
/* opaque<>: length, @n bytes copied, zero pad to four. */
RPCRDMA_API int rpcrdma_xdr_put_opaque(struct rpcrdma_xdr_enc *e, const void *p, uint32_t n);
/* string<>: the NUL-terminated @s without its NUL. */
RPCRDMA_API int rpcrdma_xdr_put_string(struct rpcrdma_xdr_enc *e, const char *s);
/* Reserves @n bytes (plus zero pad to four) in place and returns them in
 * *@p for the caller to fill before the Call is sent or the handler returns. */
RPCRDMA_API int rpcrdma_xdr_put_space(struct rpcrdma_xdr_enc *e, size_t n, void **p);
/* DDP-eligible opaque<>: length, then @n bytes REFERENCED from @p (not
 * copied), pad. Borrows @p until the Call completes / the request is
 * released (see above). */
RPCRDMA_API int rpcrdma_xdr_put_ddp(struct rpcrdma_xdr_enc *e, const void *p, uint32_t n);
/* Bytes of XDR encoded so far (inline and referenced, with pads). */
RPCRDMA_API size_t rpcrdma_xdr_enc_len(const struct rpcrdma_xdr_enc *e);
/* The first error of this encoder, or 0. */
RPCRDMA_API int rpcrdma_xdr_enc_error(const struct rpcrdma_xdr_enc *e);

/* ---- decoding ---- */
RPCRDMA_API int rpcrdma_xdr_get_u32(struct rpcrdma_xdr_dec *d, uint32_t *v);
RPCRDMA_API int rpcrdma_xdr_get_i32(struct rpcrdma_xdr_dec *d, int32_t *v);
RPCRDMA_API int rpcrdma_xdr_get_u64(struct rpcrdma_xdr_dec *d, uint64_t *v);
RPCRDMA_API int rpcrdma_xdr_get_i64(struct rpcrdma_xdr_dec *d, int64_t *v);
/* XDR bool: exactly 0 or 1. */
RPCRDMA_API int rpcrdma_xdr_get_bool(struct rpcrdma_xdr_dec *d, bool *v);
/* opaque[n] copied into @out. */
RPCRDMA_API int rpcrdma_xdr_get_fixed(struct rpcrdma_xdr_dec *d, void *out, size_t n);
/* opaque<maxlen> in place: *@p points into the message (valid as long as
 * the decoder is). */
RPCRDMA_API int rpcrdma_xdr_get_opaque(struct rpcrdma_xdr_dec *d, uint32_t maxlen,
				       const void **p, uint32_t *len);
/* string<>: copied into @buf (capacity @cap, NUL-terminated); a string that
 * does not fit with its NUL, or that contains a NUL, is -EBADMSG. */
RPCRDMA_API int rpcrdma_xdr_get_string(struct rpcrdma_xdr_dec *d, char *buf, size_t cap);
/* DDP-eligible opaque<>: see the top of this file. */
RPCRDMA_API int rpcrdma_xdr_get_ddp(struct rpcrdma_xdr_dec *d, const void **p, uint32_t *len);
/* Bytes not yet decoded in the inline part of the message. */
RPCRDMA_API size_t rpcrdma_xdr_dec_remaining(const struct rpcrdma_xdr_dec *d);
RPCRDMA_API int rpcrdma_xdr_dec_error(const struct rpcrdma_xdr_dec *d);

#ifdef __cplusplus
}
#endif
#endif
