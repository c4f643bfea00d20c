/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the ONC RPC message header codecs (RFC 5531): every
 * input is decoded as a Call, as a Reply, as an AUTH_SYS body and peeked for
 * its XID; whatever decodes is re-encoded and must reproduce the input bytes
 * it consumed (encode(decode(x)) == x), and must decode again to the same
 * structure. The results of a decoded Reply are then read with the public
 * XDR cursor (rpcrdma_xdr_get_*), including DDP-eligible items into result
 * sinks, as "placed" items and as transport-delivered items, driven by the
 * input's own bytes. Decoders must never read or write out of bounds (ASan)
 * or crash. rr_rpcmsg_decode_reply (with its one-pass decoding of the short
 * form) and rr_rpcmsg_decode_reply_general must return the same, leave the
 * same struct (both started from the same bytes) and the cursor at the same
 * place, at offsets 0, 4 and 8 of the input; so must rr_rpcmsg_decode_call
 * and rr_rpcmsg_decode_call_general. A decoded accepted Reply with an empty
 * AUTH_NONE verifier and no range is also encoded by
 * rr_rpcmsg_encode_accepted_none (the server's), which must write the
 * bytes rr_rpcmsg_encode_reply wrote. rr_rpcmsg_reply_success_short (the
 * client's check of a successful Reply) must give the results' offset
 * exactly when rr_rpcmsg_decode_reply accepts the input as a successful
 * Reply with an empty verifier to the XID asked for. */
#include <stdlib.h>
#include <string.h>

#include "rpc/rpcmsg.h"
#include "rpc/xbuf.h"

static void check(int cond)
{
	if (!cond)
		abort();
}

static void fuzz_call(const uint8_t *data, size_t size)
{
	struct rr_xdr_dec d;
	struct rr_xdr_enc e;
	struct rr_rpc_call c;
	uint8_t out[RR_RPC_CALL_HDR_MAX];
	struct rr_rpc_authsys s;
	int rc;

	rr_xdr_dec_init(&d, data, size);
	rc = rr_rpcmsg_decode_call(&d, &c);
	check(rc == 0 || rc == -EBADMSG || rc == -EPROTONOSUPPORT);
	if (rc) {
		check(rr_xdr_dec_pos(&d) == 0);
		return;
	}
	rr_xdr_enc_init(&e, out, sizeof(out));
	check(rr_rpcmsg_encode_call(&e, &c) == 0);
	/* Pads are not checked on decode, so compare with the input up to
	 * pad bytes: re-decode the output and compare fields instead. */
	check(rr_xdr_enc_len(&e) == rr_xdr_dec_pos(&d));
	{
		struct rr_xdr_dec d2;
		struct rr_rpc_call c2;

		rr_xdr_dec_init(&d2, out, rr_xdr_enc_len(&e));
		check(rr_rpcmsg_decode_call(&d2, &c2) == 0);
		check(c2.xid == c.xid && c2.prog == c.prog && c2.vers == c.vers &&
		      c2.proc == c.proc && c2.cred.flavor == c.cred.flavor &&
		      c2.cred.len == c.cred.len && c2.verf.flavor == c.verf.flavor &&
		      c2.verf.len == c.verf.len);
		check(c.cred.len == 0 || memcmp(c2.cred.body, c.cred.body, c.cred.len) == 0);
		check(c.verf.len == 0 || memcmp(c2.verf.body, c.verf.body, c.verf.len) == 0);
	}
	if (c.cred.flavor == RR_RPC_AUTH_SYS &&
	    rr_rpcmsg_decode_authsys(c.cred.body, c.cred.len, &s) == 0) {
		uint8_t body[RR_RPC_AUTH_MAXBODY];
		struct rr_rpc_auth a;
		struct rr_rpc_authsys s2;

		check(rr_rpcmsg_make_authsys(&s, body, sizeof(body), &a) == 0);
		check(a.len == c.cred.len);
		check(rr_rpcmsg_decode_authsys(a.body, a.len, &s2) == 0);
		check(s2.stamp == s.stamp && s2.uid == s.uid && s2.gid == s.gid &&
		      s2.ngids == s.ngids && s2.machinename_len == s.machinename_len);
		check(memcmp(s2.gids, s.gids, s.ngids * 4) == 0);
		check(s.machinename_len == 0 ||
		      memcmp(s2.machinename, s.machinename, s.machinename_len) == 0);
	}
}

/* Reads the bytes after @off with the public cursor; the first byte of the
 * input chooses sink sizes, placement and the sequence of gets. */
static void fuzz_results(const uint8_t *data, size_t size, size_t off)
{
	uint8_t sinkbuf[2][64];
	struct rpcrdma_ddp_sink sinks[2] = {{sinkbuf[0], 0}, {sinkbuf[1], 64}};
	uint32_t placed[2] = {RR_RPC_NOT_PLACED, RR_RPC_NOT_PLACED};
	struct rr_rpc_ext ext;
	struct rpcrdma_xdr_dec d;
	uint8_t ctl = size ? data[0] : 0;
	char str[16];

	sinks[0].max = ctl & 0x3f;
	if (ctl & 0x40)
		placed[0] = sinks[0].max;
	rr_xbuf_dec_init(&d, data, size);
	d.x.pos = off;
	d.sinks = sinks;
	d.placed = placed;
	d.nsinks = 2;
	if (ctl & 0x80) {
		/* a transport-delivered item right after the first word */
		ext.inline_off = off + 8;
		ext.ptr = data;
		ext.len = (uint32_t)RR_MIN(size, (size_t)(ctl & 0x3f));
		d.ext = &ext;
		d.n_ext = 1;
	}
	for (size_t i = 1; i < size && i < 24; i++) {
		const void *p;
		uint32_t len, v;
		uint64_t v64;
		int rc = 0;

		switch (data[i] & 7) {
		case 0: rc = rpcrdma_xdr_get_u32(&d, &v); break;
		case 1: rc = rpcrdma_xdr_get_u64(&d, &v64); break;
		case 2: rc = rpcrdma_xdr_get_opaque(&d, data[i], &p, &len); break;
		case 3: rc = rpcrdma_xdr_get_string(&d, str, sizeof(str)); break;
		default:
			rc = rpcrdma_xdr_get_ddp(&d, &p, &len);
			if (!rc && len) /* touch the item's last byte (ASan) */
				check(((const volatile uint8_t *)p)[len - 1] ==
				      ((const volatile uint8_t *)p)[len - 1]);
			break;
		}
		check(rc == 0 || rc == rpcrdma_xdr_dec_error(&d));
		if (rc)
			break;
	}
	check(rpcrdma_xdr_dec_remaining(&d) <= size);
}

/* The short form's decoding against the general decoder's, the cursor
 * starting at @off of the input. */
static void reply_short_as_general(const uint8_t *data, size_t size, size_t off)
{
	struct rr_xdr_dec d, d2;
	struct rr_rpc_reply r, r2;

	memset(&r, 0x5a, sizeof(r));
	memset(&r2, 0x5a, sizeof(r2));
	rr_xdr_dec_init(&d, data, size);
	rr_xdr_dec_init(&d2, data, size);
	d.pos = d2.pos = off;
	check(rr_rpcmsg_decode_reply(&d, &r) == rr_rpcmsg_decode_reply_general(&d2, &r2));
	check(memcmp(&r, &r2, sizeof(r)) == 0 && d.pos == d2.pos);
}

/* The same for a Call header. */
static void call_short_as_general(const uint8_t *data, size_t size, size_t off)
{
	struct rr_xdr_dec d, d2;
	struct rr_rpc_call c, c2;

	memset(&c, 0x5a, sizeof(c));
	memset(&c2, 0x5a, sizeof(c2));
	rr_xdr_dec_init(&d, data, size);
	rr_xdr_dec_init(&d2, data, size);
	d.pos = d2.pos = off;
	check(rr_rpcmsg_decode_call(&d, &c) == rr_rpcmsg_decode_call_general(&d2, &c2));
	check(memcmp(&c, &c2, sizeof(c)) == 0 && d.pos == d2.pos);
}

static void fuzz_reply(const uint8_t *data, size_t size)
{
	struct rr_xdr_dec d, d2;
	struct rr_xdr_enc e;
	struct rr_rpc_reply r, r2;
	uint8_t out[RR_RPC_REPLY_HDR_MAX];
	int rc;

	for (size_t off = 0; off <= size && off <= 8; off += 4) {
		reply_short_as_general(data, size, off);
		call_short_as_general(data, size, off);
	}
	rr_xdr_dec_init(&d, data, size);
	rc = rr_rpcmsg_decode_reply(&d, &r);
	check(rc == 0 || rc == -EBADMSG);
	for (uint32_t k = 0; k < 2; k++) {
		/* the client's one-pass check of a successful Reply: the
		 * results' offset exactly when the decoder accepts it as one
		 * to that XID with an empty verifier */
		uint32_t xid = (size >= 4 ? rr_get_be32(data) : 0) + k;
		uint32_t pos = rr_rpcmsg_reply_success_short(data, size, xid);

		check((pos != 0) == (rc == 0 && r.xid == xid && r.stat == RR_RPC_MSG_ACCEPTED &&
				     r.accept_stat == RR_RPC_SUCCESS && r.verf.len == 0));
		check(pos == 0 || pos == rr_xdr_dec_pos(&d));
	}
	if (rc) {
		check(rr_xdr_dec_pos(&d) == 0);
		return;
	}
	rr_xdr_enc_init(&e, out, sizeof(out));
	check(rr_rpcmsg_encode_reply(&e, &r) == 0);
	check(rr_xdr_enc_len(&e) == rr_xdr_dec_pos(&d));
	if (r.stat == RR_RPC_MSG_ACCEPTED && r.verf.flavor == RR_RPC_AUTH_NONE &&
	    r.verf.len == 0 && r.accept_stat != RR_RPC_PROG_MISMATCH) {
		/* the server's one-pass header: the same bytes */
		uint8_t hdr[RR_RPC_ACCEPTED_NONE_SIZE];

		rr_rpcmsg_encode_accepted_none(hdr, r.xid, r.accept_stat);
		check(rr_xdr_enc_len(&e) == sizeof(hdr) && memcmp(hdr, out, sizeof(hdr)) == 0);
	}
	rr_xdr_dec_init(&d2, out, rr_xdr_enc_len(&e));
	check(rr_rpcmsg_decode_reply(&d2, &r2) == 0);
	check(r2.xid == r.xid && r2.stat == r.stat && r2.accept_stat == r.accept_stat &&
	      r2.reject_stat == r.reject_stat && r2.auth_stat == r.auth_stat &&
	      r2.low == r.low && r2.high == r.high && r2.verf.len == r.verf.len);
	fuzz_results(data, size, rr_xdr_dec_pos(&d));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t xid, mt;
	struct rr_rpc_authsys s;

	if (rr_rpcmsg_peek(data, size, &xid, &mt) == 0)
		check(mt == RR_RPC_CALL || mt == RR_RPC_REPLY);
	fuzz_call(data, size);
	fuzz_reply(data, size);
	(void)rr_rpcmsg_decode_authsys(data, (uint32_t)RR_MIN(size, (size_t)UINT32_MAX), &s);
	return 0;
}
