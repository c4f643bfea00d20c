/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the ONC RPC message header codecs (RFC 5531): hand-built hex
 * vectors for the Call header (AUTH_NONE, AUTH_SYS), every Reply form
 * (accepted: SUCCESS, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS,
 * SYSTEM_ERR; denied: RPC_MISMATCH, AUTH_ERROR), the XID/type peek, round
 * trips, and a table of malformed inputs each with its expected error. */
#include "test.h"
#include "rpc/rpcmsg.h"

/* NULL call to NFS (100003) v3 with AUTH_NONE cred and verf. */
static const char call_none_hex[] =
	"12345678 00000000 00000002 000186a3 00000003 00000000"
	"00000000 00000000" /* cred AUTH_NONE */
	"00000000 00000000" /* verf AUTH_NONE */
	"cafef00d";         /* one word of arguments */

/* AUTH_SYS cred: stamp 0x11223344, machine "host1" (pad 3), uid 1000,
 * gid 100, gids {100, 4, 27}. Body = 4+4+8+4+4+4+12 = 40 bytes. */
static const char call_sys_hex[] =
	"0000abcd 00000000 00000002 20000001 00000001 00000007"
	"00000001 00000028"
	"11223344 00000005 686f7374 31000000 000003e8 00000064"
	"00000003 00000064 00000004 0000001b"
	"00000000 00000000";

TEST(rpcmsg_call_auth_none_vector)
{
	uint8_t buf[64], out[64];
	size_t n = rr_test_hex(call_none_hex, buf, sizeof(buf));
	struct rr_xdr_dec d;
	struct rr_xdr_enc e;
	struct rr_rpc_call c;
	uint32_t xid, mt, arg;

	rr_xdr_dec_init(&d, buf, n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &c), 0);
	CHECK_EQ(c.xid, 0x12345678);
	CHECK_EQ(c.rpcvers, 2);
	CHECK_EQ(c.prog, 100003);
	CHECK_EQ(c.vers, 3);
	CHECK_EQ(c.proc, 0);
	CHECK_EQ(c.cred.flavor, RR_RPC_AUTH_NONE);
	CHECK_EQ(c.cred.len, 0);
	CHECK_EQ(c.verf.flavor, RR_RPC_AUTH_NONE);
	CHECK_EQ(rr_xdr_dec_pos(&d), 40);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &arg), 0);
	CHECK_EQ(arg, 0xcafef00d);

	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_rpcmsg_encode_call(&e, &c), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), 40);
	CHECK_MEM(out, buf, 40);

	REQUIRE_EQ(rr_rpcmsg_peek(buf, n, &xid, &mt), 0);
	CHECK_EQ(xid, 0x12345678);
	CHECK_EQ(mt, RR_RPC_CALL);
}

TEST(rpcmsg_call_auth_sys_vector)
{
	uint8_t buf[128], out[128], body[400];
	size_t n = rr_test_hex(call_sys_hex, buf, sizeof(buf));
	struct rr_xdr_dec d;
	struct rr_xdr_enc e;
	struct rr_rpc_call c, c2;
	struct rr_rpc_authsys s;

	rr_xdr_dec_init(&d, buf, n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &c), 0);
	CHECK_EQ(c.xid, 0xabcd);
	CHECK_EQ(c.prog, 0x20000001);
	CHECK_EQ(c.vers, 1);
	CHECK_EQ(c.proc, 7);
	CHECK_EQ(c.cred.flavor, RR_RPC_AUTH_SYS);
	REQUIRE_EQ(c.cred.len, 40);
	CHECK(c.cred.body == buf + 32); /* points into the input */
	CHECK_EQ(rr_xdr_dec_remaining(&d), 0);

	REQUIRE_EQ(rr_rpcmsg_decode_authsys(c.cred.body, c.cred.len, &s), 0);
	CHECK_EQ(s.stamp, 0x11223344);
	REQUIRE_EQ(s.machinename_len, 5);
	CHECK_MEM(s.machinename, "host1", 5);
	CHECK_EQ(s.uid, 1000);
	CHECK_EQ(s.gid, 100);
	REQUIRE_EQ(s.ngids, 3);
	CHECK_EQ(s.gids[0], 100);
	CHECK_EQ(s.gids[1], 4);
	CHECK_EQ(s.gids[2], 27);

	/* Re-encode from the parsed AUTH_SYS parameters. */
	c2 = c;
	REQUIRE_EQ(rr_rpcmsg_make_authsys(&s, body, sizeof(body), &c2.cred), 0);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_rpcmsg_encode_call(&e, &c2), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), n);
	CHECK_MEM(out, buf, n);
}

/* An opaque_auth body whose length is not a multiple of four is followed
 * by zero padding, whatever the output buffer held before (the Call header
 * encoder stores the padding itself). Also rr_xdr_put_fixed's. */
TEST(rpcmsg_call_pads_with_zeros)
{
	static const uint8_t body5[5] = {1, 2, 3, 4, 5}, body2[2] = {9, 9};
	static const uint8_t want[] = {
		0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5,
		0, 0, 0, 1, 0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0,   /* cred, pad 3 */
		0, 0, 0, 6, 0, 0, 0, 2, 9, 9, 0, 0,               /* verf, pad 2 */
	};
	struct rr_rpc_call c = {.xid = 7, .prog = 3, .vers = 4, .proc = 5};
	struct rr_xdr_enc e;
	uint8_t out[80];

	c.cred = (struct rr_rpc_auth){.flavor = 1, .body = body5, .len = 5};
	c.verf = (struct rr_rpc_auth){.flavor = 6, .body = body2, .len = 2};
	memset(out, 0xee, sizeof(out));
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_rpcmsg_encode_call(&e, &c), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), sizeof(want));
	CHECK_MEM(out, want, sizeof(want));
	CHECK_EQ(out[sizeof(want)], 0xee);   /* nothing written past it */

	memset(out, 0xee, sizeof(out));
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_xdr_put_fixed(&e, body5, 5), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), 8);
	CHECK_MEM(out, want + 32, 8);
	CHECK_EQ(out[8], 0xee);
	/* a header that does not fit writes nothing */
	memset(out, 0xee, sizeof(out));
	rr_xdr_enc_init(&e, out, sizeof(want) - 1);
	CHECK_EQ(rr_rpcmsg_encode_call(&e, &c), -EMSGSIZE);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	CHECK_EQ(out[0], 0xee);
}

TEST(rpcmsg_authsys_limits)
{
	uint8_t body[400], name[256];
	struct rr_rpc_authsys s = {0}, s2;
	struct rr_rpc_auth a;

	memset(name, 'm', sizeof(name));
	s.machinename = name;
	s.machinename_len = 255;
	s.ngids = 16;
	for (uint32_t i = 0; i < 16; i++)
		s.gids[i] = 1000 + i;
	REQUIRE_EQ(rr_rpcmsg_make_authsys(&s, body, sizeof(body), &a), 0);
	CHECK_EQ(a.len, 4 + 4 + 256 + 4 + 4 + 4 + 64);
	REQUIRE_EQ(rr_rpcmsg_decode_authsys(a.body, a.len, &s2), 0);
	CHECK_EQ(s2.ngids, 16);
	CHECK_EQ(s2.gids[15], 1015);
	CHECK_EQ(s2.machinename_len, 255);

	s.machinename_len = 256;
	CHECK_EQ(rr_rpcmsg_make_authsys(&s, body, sizeof(body), &a), -EINVAL);
	s.machinename_len = 255;
	s.ngids = 17;
	CHECK_EQ(rr_rpcmsg_make_authsys(&s, body, sizeof(body), &a), -EINVAL);
	s.ngids = 16;
	CHECK_EQ(rr_rpcmsg_make_authsys(&s, body, 100, &a), -EMSGSIZE);
}

struct reply_vec {
	const char *name;
	const char *hex;
	uint32_t stat, accept_stat, reject_stat, auth_stat, low, high;
	size_t hdr_len;
};

static const struct reply_vec reply_vecs[] = {
	{"success", "00000001 00000001 00000000 00000000 00000000 00000000 0000002a",
	 0, RR_RPC_SUCCESS, 0, 0, 0, 0, 24},
	{"prog_unavail", "00000002 00000001 00000000 00000000 00000000 00000001",
	 0, RR_RPC_PROG_UNAVAIL, 0, 0, 0, 0, 24},
	{"prog_mismatch", "00000003 00000001 00000000 00000000 00000000 00000002"
	 "00000002 00000004", 0, RR_RPC_PROG_MISMATCH, 0, 0, 2, 4, 32},
	{"proc_unavail", "00000004 00000001 00000000 00000000 00000000 00000003",
	 0, RR_RPC_PROC_UNAVAIL, 0, 0, 0, 0, 24},
	{"garbage_args", "00000005 00000001 00000000 00000000 00000000 00000004",
	 0, RR_RPC_GARBAGE_ARGS, 0, 0, 0, 0, 24},
	{"system_err", "00000006 00000001 00000000 00000000 00000000 00000005",
	 0, RR_RPC_SYSTEM_ERR, 0, 0, 0, 0, 24},
	{"rpc_mismatch", "00000007 00000001 00000001 00000000 00000002 00000002",
	 1, 0, RR_RPC_RPC_MISMATCH, 0, 2, 2, 24},
	{"auth_error", "00000008 00000001 00000001 00000001 00000005",
	 1, 0, RR_RPC_AUTH_ERROR, RR_RPC_AUTH_TOOWEAK, 0, 0, 20},
	{"auth_error_gss", "00000009 00000001 00000001 00000001 0000000d",
	 1, 0, RR_RPC_AUTH_ERROR, 13, 0, 0, 20},
};

TEST(rpcmsg_reply_vectors)
{
	for (size_t i = 0; i < RR_ARRAY_SIZE(reply_vecs); i++) {
		const struct reply_vec *v = &reply_vecs[i];
		uint8_t buf[64], out[64];
		size_t n = rr_test_hex(v->hex, buf, sizeof(buf));
		struct rr_xdr_dec d;
		struct rr_xdr_enc e;
		struct rr_rpc_reply r;
		uint32_t xid, mt;

		rr_xdr_dec_init(&d, buf, n);
		if (rr_rpcmsg_decode_reply(&d, &r) != 0) {
			fprintf(stderr, "  vector %s\n", v->name);
			CHECK(0);
			continue;
		}
		CHECK_EQ(r.xid, i + 1);
		CHECK_EQ(r.stat, v->stat);
		if (v->stat == RR_RPC_MSG_ACCEPTED) {
			CHECK_EQ(r.accept_stat, v->accept_stat);
			CHECK_EQ(r.verf.flavor, RR_RPC_AUTH_NONE);
		} else {
			CHECK_EQ(r.reject_stat, v->reject_stat);
			CHECK_EQ(r.auth_stat, v->auth_stat);
		}
		CHECK_EQ(r.low, v->low);
		CHECK_EQ(r.high, v->high);
		CHECK_EQ(rr_xdr_dec_pos(&d), v->hdr_len);

		rr_xdr_enc_init(&e, out, sizeof(out));
		REQUIRE_EQ(rr_rpcmsg_encode_reply(&e, &r), 0);
		CHECK_EQ(rr_xdr_enc_len(&e), v->hdr_len);
		CHECK_MEM(out, buf, v->hdr_len);

		REQUIRE_EQ(rr_rpcmsg_peek(buf, n, &xid, &mt), 0);
		CHECK_EQ(xid, i + 1);
		CHECK_EQ(mt, RR_RPC_REPLY);
	}
}

TEST(rpcmsg_reply_with_verifier)
{
	/* Accepted SUCCESS with a 5-byte verifier of flavor 6 (pad 3). */
	uint8_t buf[64];
	size_t n = rr_test_hex("000000aa 00000001 00000000 00000006 00000005"
			       "01020304 05000000 00000000 deadbeef", buf, sizeof(buf));
	struct rr_xdr_dec d;
	struct rr_rpc_reply r;
	uint32_t res;

	rr_xdr_dec_init(&d, buf, n);
	REQUIRE_EQ(rr_rpcmsg_decode_reply(&d, &r), 0);
	CHECK_EQ(r.verf.flavor, 6);
	REQUIRE_EQ(r.verf.len, 5);
	CHECK(r.verf.body == buf + 20);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &res), 0);
	CHECK_EQ(res, 0xdeadbeef);
}

struct bad_vec {
	const char *name;
	const char *hex;
	int call_rc;  /* expected from decode_call, 1 = not applicable */
	int reply_rc; /* expected from decode_reply, 1 = not applicable */
};

static const struct bad_vec bad_vecs[] = {
	{"empty", "", -EBADMSG, -EBADMSG},
	{"xid_only", "00000001", -EBADMSG, -EBADMSG},
	{"call_wrong_type_2", "00000001 00000002 00000002", -EBADMSG, -EBADMSG},
	{"call_rpcvers_1", "00000001 00000000 00000001 00000001 00000001 00000000",
	 -EPROTONOSUPPORT, -EBADMSG},
	{"call_rpcvers_3_short", "00000001 00000000 00000003", -EPROTONOSUPPORT, -EBADMSG},
	{"call_truncated_before_proc", "00000001 00000000 00000002 00000001 00000001",
	 -EBADMSG, 1},
	{"call_no_verf", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000000 00000000", -EBADMSG, 1},
	{"call_cred_401", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000001 00000191", -EBADMSG, 1},
	{"call_cred_len_huge", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000001 ffffffff 00000000", -EBADMSG, 1},
	{"call_cred_body_truncated", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000001 00000008 00000000", -EBADMSG, 1},
	{"call_cred_pad_missing", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000001 00000003 616263", -EBADMSG, 1},
	{"call_verf_401", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000000 00000000 00000000 00000191", -EBADMSG, 1},
	{"reply_as_call", "00000001 00000001 00000000 00000000 00000000 00000000",
	 -EBADMSG, 0},
	{"call_as_reply", "00000001 00000000 00000002 00000001 00000001 00000000"
	 "00000000 00000000 00000000 00000000", 0, -EBADMSG},
	{"reply_stat_2", "00000001 00000001 00000002", 1, -EBADMSG},
	{"reply_no_stat", "00000001 00000001", 1, -EBADMSG},
	{"accept_stat_6", "00000001 00000001 00000000 00000000 00000000 00000006", 1, -EBADMSG},
	{"accept_no_stat", "00000001 00000001 00000000 00000000 00000000", 1, -EBADMSG},
	{"prog_mismatch_no_high", "00000001 00000001 00000000 00000000 00000000 00000002"
	 "00000002", 1, -EBADMSG},
	{"reply_verf_401", "00000001 00000001 00000000 00000000 00000191", 1, -EBADMSG},
	{"reject_stat_2", "00000001 00000001 00000001 00000002 00000000", 1, -EBADMSG},
	{"rpc_mismatch_no_high", "00000001 00000001 00000001 00000000 00000002", 1, -EBADMSG},
	{"auth_error_no_stat", "00000001 00000001 00000001 00000001", 1, -EBADMSG},
};

TEST(rpcmsg_malformed_table)
{
	for (size_t i = 0; i < RR_ARRAY_SIZE(bad_vecs); i++) {
		const struct bad_vec *v = &bad_vecs[i];
		uint8_t buf[128];
		size_t n = rr_test_hex(v->hex, buf, sizeof(buf));
		struct rr_xdr_dec d;
		struct rr_rpc_call c;
		struct rr_rpc_reply r;
		int rc;

		if (v->call_rc != 1) {
			rr_xdr_dec_init(&d, buf, n);
			rc = rr_rpcmsg_decode_call(&d, &c);
			if (rc != v->call_rc)
				fprintf(stderr, "  %s: call rc %d\n", v->name, rc);
			CHECK_EQ(rc, v->call_rc);
			if (rc < 0)
				CHECK_EQ(rr_xdr_dec_pos(&d), 0);
			if (rc == -EPROTONOSUPPORT) {
				CHECK_EQ(c.xid, 1);
				CHECK(c.rpcvers != 2);
			}
		}
		if (v->reply_rc != 1) {
			rr_xdr_dec_init(&d, buf, n);
			rc = rr_rpcmsg_decode_reply(&d, &r);
			if (rc != v->reply_rc)
				fprintf(stderr, "  %s: reply rc %d\n", v->name, rc);
			CHECK_EQ(rc, v->reply_rc);
			if (rc < 0)
				CHECK_EQ(rr_xdr_dec_pos(&d), 0);
		}
	}
}

TEST(rpcmsg_authsys_malformed)
{
	static const char *const bad[] = {
		"",                                                   /* empty */
		"00000001 00000100",                                  /* name 256 > 255 */
		"00000001 00000002 6162",                             /* name pad missing */
		"00000001 00000000 00000000 00000000",                /* no gids count */
		"00000001 00000000 00000000 00000000 00000011",       /* 17 gids */
		"00000001 00000000 00000000 00000000 00000002 00000001", /* gids short */
		"00000001 00000000 00000000 00000000 00000000 00000000", /* trailing */
	};
	struct rr_rpc_authsys s;

	for (size_t i = 0; i < RR_ARRAY_SIZE(bad); i++) {
		uint8_t buf[64];
		size_t n = rr_test_hex(bad[i], buf, sizeof(buf));

		if (rr_rpcmsg_decode_authsys(buf, (uint32_t)n, &s) != -EBADMSG) {
			fprintf(stderr, "  authsys case %zu\n", i);
			CHECK(0);
		}
	}
	{
		uint8_t buf[64];
		size_t n = rr_test_hex("00000001 00000000 00000002 00000003 00000000",
				       buf, sizeof(buf));

		REQUIRE_EQ(rr_rpcmsg_decode_authsys(buf, (uint32_t)n, &s), 0);
		CHECK_EQ(s.machinename_len, 0);
		CHECK_EQ(s.uid, 2);
		CHECK_EQ(s.gid, 3);
		CHECK_EQ(s.ngids, 0);
	}
}

TEST(rpcmsg_peek_rejects)
{
	uint8_t buf[8] = {0, 0, 0, 1, 0, 0, 0, 2};
	uint32_t xid = 0, mt = 0;

	CHECK_EQ(rr_rpcmsg_peek(buf, 8, &xid, &mt), -EBADMSG);
	buf[7] = 1;
	CHECK_EQ(rr_rpcmsg_peek(buf, 7, &xid, &mt), -EBADMSG);
	CHECK_EQ(rr_rpcmsg_peek(buf, 0, &xid, &mt), -EBADMSG);
	REQUIRE_EQ(rr_rpcmsg_peek(buf, 8, &xid, &mt), 0);
	CHECK_EQ(xid, 1);
	CHECK_EQ(mt, RR_RPC_REPLY);
}

TEST(rpcmsg_encode_rejects)
{
	uint8_t out[1024], big[401] = {0};
	struct rr_xdr_enc e;
	struct rr_rpc_call c = {.xid = 1, .prog = 2, .vers = 3};
	struct rr_rpc_reply r = {.xid = 1};

	rr_xdr_enc_init(&e, out, sizeof(out));
	c.cred.flavor = 1;
	c.cred.body = big;
	c.cred.len = 401;
	CHECK_EQ(rr_rpcmsg_encode_call(&e, &c), -EINVAL);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	c.cred.len = 400;
	c.verf.body = big;
	c.verf.len = 400;
	REQUIRE_EQ(rr_rpcmsg_encode_call(&e, &c), 0);
	CHECK_EQ(rr_xdr_enc_len(&e), RR_RPC_CALL_HDR_MAX);

	rr_xdr_enc_init(&e, out, RR_RPC_CALL_HDR_MAX - 1);
	CHECK_EQ(rr_rpcmsg_encode_call(&e, &c), -EMSGSIZE);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);

	rr_xdr_enc_init(&e, out, sizeof(out));
	r.stat = 2;
	CHECK_EQ(rr_rpcmsg_encode_reply(&e, &r), -EINVAL);
	r.stat = RR_RPC_MSG_ACCEPTED;
	r.accept_stat = 6;
	CHECK_EQ(rr_rpcmsg_encode_reply(&e, &r), -EINVAL);
	r.stat = RR_RPC_MSG_DENIED;
	r.reject_stat = 2;
	CHECK_EQ(rr_rpcmsg_encode_reply(&e, &r), -EINVAL);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	r.stat = RR_RPC_MSG_ACCEPTED;
	r.accept_stat = RR_RPC_PROG_MISMATCH;
	r.verf.len = 400;
	r.verf.body = big;
	REQUIRE_EQ(rr_rpcmsg_encode_reply(&e, &r), 0);
	CHECK_EQ(rr_xdr_enc_len(&e), RR_RPC_REPLY_HDR_MAX);
}

/* rr_rpcmsg_decode_reply(@msg[0..@n) from @off) and
 * rr_rpcmsg_decode_reply_general() return the same, leave the same struct
 * (both started from the same bytes) and the cursor at the same place. */
static void check_reply_short_as_general(const uint8_t *msg, size_t n, size_t off)
{
	struct rr_xdr_dec a, b;
	struct rr_rpc_reply ra, rb;

	memset(&ra, 0x5a, sizeof(ra));
	memset(&rb, 0x5a, sizeof(rb));
	rr_xdr_dec_init(&a, msg, n);
	rr_xdr_dec_init(&b, msg, n);
	a.pos = b.pos = off;
	CHECK_EQ(rr_rpcmsg_decode_reply(&a, &ra), rr_rpcmsg_decode_reply_general(&b, &rb));
	CHECK(memcmp(&ra, &rb, sizeof(ra)) == 0);
	CHECK_EQ(a.pos, b.pos);
}

/* The short form's one-pass decoding (accepted, empty verifier, an
 * accept_stat with no more words: rr_rpcmsg_decode_reply) gives the
 * general decoder's result: for every accept_stat 0..7 and verifier
 * flavor, on every truncation, on every byte of the first 28 changed to
 * each of a few values (a Call, a denied Reply, a verifier with a body,
 * PROG_MISMATCH with or without its range, ...), from offsets 0 and 4. */
TEST(rpcmsg_reply_short_as_general)
{
	static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x03, 0x05, 0x06, 0x80, 0xff};
	uint8_t msg[40], m[40];
	struct rr_xdr_dec d;
	struct rr_rpc_reply r;
	size_t n = rr_test_hex("00000000 12345678 00000001 00000000 00000000 00000000"
			       "00000000 cafef00d 00000001 00000002", msg, sizeof(msg));

	REQUIRE_EQ(n, 40);
	rr_xdr_dec_init(&d, msg, n);
	d.pos = 4;
	REQUIRE_EQ(rr_rpcmsg_decode_reply(&d, &r), 0);
	CHECK_EQ(r.xid, 0x12345678);
	CHECK_EQ(rr_xdr_dec_pos(&d), 28);
	for (uint32_t as = 0; as < 8; as++)
		for (uint32_t fl = 0; fl < 3; fl++) {
			memcpy(m, msg, sizeof(m));
			rr_put_be32(m + 16, fl);
			rr_put_be32(m + 24, as);
			for (size_t k = 0; k <= sizeof(m); k++) {
				check_reply_short_as_general(m, k, 4);
				if (k >= 4)
					check_reply_short_as_general(m + 4, k - 4, 0);
			}
		}
	for (size_t i = 4; i < 32; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(m, msg, sizeof(m));
			m[i] = vals[v];
			check_reply_short_as_general(m, n, 4);
			check_reply_short_as_general(m, n, 0);
		}
}

/* rr_rpcmsg_reply_success_short on @n bytes at @msg with @xid answers
 * what rr_rpcmsg_decode_reply does: the results' offset exactly when the
 * decoder accepts them as a successful Reply to @xid with an empty
 * verifier (and then leaves every status field but the verifier's flavor
 * zero), else 0. */
static void check_success_short_as_decode(const uint8_t *msg, size_t n, uint32_t xid)
{
	struct rr_xdr_dec d;
	struct rr_rpc_reply r;
	uint32_t pos = rr_rpcmsg_reply_success_short(msg, n, xid);
	bool ok;

	memset(&r, 0x5a, sizeof(r));
	rr_xdr_dec_init(&d, msg, n);
	ok = rr_rpcmsg_decode_reply(&d, &r) == 0 && r.xid == xid && r.stat == RR_RPC_MSG_ACCEPTED &&
	     r.accept_stat == RR_RPC_SUCCESS && r.verf.len == 0;
	CHECK_EQ(pos != 0, ok);
	if (pos && ok) {
		CHECK_EQ(pos, rr_xdr_dec_pos(&d));
		CHECK_EQ(r.reject_stat | r.auth_stat | r.low | r.high, 0);
	}
}

/* The client's one-pass check of a successful Reply
 * (rr_rpcmsg_reply_success_short, clnt.c on_complete) against the Reply
 * decoder: for every accept_stat 0..7 and verifier flavor, on every
 * truncation, with the right XID and others, and on every byte of the
 * first 28 changed to each of a few values (a Call, a denied Reply, a
 * verifier with a body, another XID, ...). */
TEST(rpcmsg_reply_success_short_as_decode)
{
	static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x03, 0x05, 0x06, 0x80, 0xff};
	static const uint32_t xids[] = {0x12345678, 0x12345679, 0x78563412, 0};
	uint8_t msg[40], m[40];
	size_t n = rr_test_hex("12345678 00000001 00000000 00000000 00000000 00000000"
			       "cafef00d 00000001 00000002 00000003", msg, sizeof(msg));

	REQUIRE_EQ(n, 40);
	REQUIRE_EQ(rr_rpcmsg_reply_success_short(msg, n, 0x12345678), 24);
	for (uint32_t as = 0; as < 8; as++)
		for (uint32_t fl = 0; fl < 3; fl++) {
			memcpy(m, msg, sizeof(m));
			rr_put_be32(m + 12, fl);
			rr_put_be32(m + 20, as);
			for (size_t k = 0; k <= sizeof(m); k++)
				for (size_t x = 0; x < 4; x++)
					check_success_short_as_decode(m, k, xids[x]);
		}
	for (size_t i = 0; i < 28; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(m, msg, sizeof(m));
			m[i] = vals[v];
			for (size_t x = 0; x < 4; x++)
				check_success_short_as_decode(m, n, xids[x]);
		}
}

/* rr_rpcmsg_encode_call_none writes the bytes rr_rpcmsg_encode_call
 * writes for an AUTH_NONE Call (the client's header of every call without
 * a credential), for fields of every byte pattern; and the vector. */
TEST(rpcmsg_call_none_as_general)
{
	static const uint32_t vals[] = {0, 1, 3, 100003, 0x80, 0xffff, 0x80000000u, 0xffffffffu};
	uint8_t a[RR_RPC_CALL_NONE_SIZE], b[RR_RPC_CALL_NONE_SIZE + 4], v[64];
	size_t nv = rr_test_hex(call_none_hex, v, sizeof(v));

	for (size_t i = 0; i < 8; i++)
		for (size_t j = 0; j < 8; j++) {
			struct rr_rpc_call c = {.xid = vals[i], .prog = vals[j], .vers = vals[7 - j],
						.proc = vals[(i + j) % 8]};
			struct rr_xdr_enc e;

			rr_xdr_enc_init(&e, b, sizeof(b));
			REQUIRE_EQ(rr_rpcmsg_encode_call(&e, &c), 0);
			REQUIRE_EQ(rr_xdr_enc_len(&e), RR_RPC_CALL_NONE_SIZE);
			memset(a, 0xa5, sizeof(a));
			rr_rpcmsg_encode_call_none(a, c.xid, c.prog, c.vers, c.proc);
			CHECK_MEM(a, b, sizeof(a));
		}
	REQUIRE(nv >= sizeof(a));
	rr_rpcmsg_encode_call_none(a, 0x12345678, 100003, 3, 0);
	CHECK_MEM(a, v, sizeof(a));
}

/* rr_rpcmsg_encode_accepted_none writes the bytes rr_rpcmsg_encode_reply
 * writes for an accepted Reply with an empty AUTH_NONE verifier, for every
 * accept_stat that no more words follow and XIDs of every byte pattern;
 * and the vector (RFC 5531 section 9: xid, REPLY, MSG_ACCEPTED, AUTH_NONE,
 * 0, PROC_UNAVAIL). */
TEST(rpcmsg_accepted_none_as_general)
{
	static const uint32_t xids[] = {0, 1, 0x80, 0xffff, 0x12345678, 0x80000000u, 0xffffffffu};
	static const uint32_t stats[] = {RR_RPC_SUCCESS, RR_RPC_PROG_UNAVAIL, RR_RPC_PROC_UNAVAIL,
					 RR_RPC_GARBAGE_ARGS, RR_RPC_SYSTEM_ERR};
	uint8_t a[RR_RPC_ACCEPTED_NONE_SIZE + 4], b[RR_RPC_REPLY_HDR_MAX], v[32];
	size_t nv = rr_test_hex("12345678 00000001 00000000 00000000 00000000 00000003", v,
				sizeof(v));

	for (size_t i = 0; i < sizeof(xids) / sizeof(xids[0]); i++)
		for (size_t j = 0; j < sizeof(stats) / sizeof(stats[0]); j++) {
			struct rr_rpc_reply r = {.xid = xids[i], .stat = RR_RPC_MSG_ACCEPTED,
						 .accept_stat = stats[j],
						 .verf = {.flavor = RR_RPC_AUTH_NONE}};
			struct rr_xdr_enc e;

			memset(b, 0x5a, sizeof(b));
			rr_xdr_enc_init(&e, b, sizeof(b));
			REQUIRE_EQ(rr_rpcmsg_encode_reply(&e, &r), 0);
			REQUIRE_EQ(rr_xdr_enc_len(&e), RR_RPC_ACCEPTED_NONE_SIZE);
			memset(a, 0xa5, sizeof(a));
			rr_rpcmsg_encode_accepted_none(a, r.xid, r.accept_stat);
			CHECK_MEM(a, b, RR_RPC_ACCEPTED_NONE_SIZE);
			CHECK_EQ(a[RR_RPC_ACCEPTED_NONE_SIZE], 0xa5);   /* nothing after */
		}
	REQUIRE_EQ(nv, RR_RPC_ACCEPTED_NONE_SIZE);
	rr_rpcmsg_encode_accepted_none(a, 0x12345678, RR_RPC_PROC_UNAVAIL);
	CHECK_MEM(a, v, RR_RPC_ACCEPTED_NONE_SIZE);
}

/* rr_rpcmsg_decode_call(@msg[0..@n) from @off) and
 * rr_rpcmsg_decode_call_general() return the same, leave the same struct
 * (both started from the same bytes) and the cursor at the same place. */
static void check_call_short_as_general(const uint8_t *msg, size_t n, size_t off)
{
	struct rr_xdr_dec a, b;
	struct rr_rpc_call ca, cb;

	memset(&ca, 0x5a, sizeof(ca));
	memset(&cb, 0x5a, sizeof(cb));
	rr_xdr_dec_init(&a, msg, n);
	rr_xdr_dec_init(&b, msg, n);
	a.pos = b.pos = off;
	CHECK_EQ(rr_rpcmsg_decode_call(&a, &ca), rr_rpcmsg_decode_call_general(&b, &cb));
	CHECK(memcmp(&ca, &cb, sizeof(ca)) == 0);
	CHECK_EQ(a.pos, b.pos);
}

/* The short form's one-pass decoding of a Call header (version 2, empty
 * credential and verifier: rr_rpcmsg_decode_call) gives the general
 * decoder's result: for 3 credential and verifier flavors each at every
 * truncation, on every byte of the header changed to each of a few values
 * (a Reply, another RPC version, a credential or verifier with a body, ...),
 * from offsets 0 and 4. */
TEST(rpcmsg_call_short_as_general)
{
	static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x80, 0xff};
	uint8_t msg[48], m[48];
	struct rr_xdr_dec d;
	struct rr_rpc_call c;
	size_t n = rr_test_hex("00000000 12345678 00000000 00000002 000186a3 00000003 00000000"
			       "00000000 00000000 00000000 00000000 cafef00d", msg, sizeof(msg));

	REQUIRE_EQ(n, 48);
	rr_xdr_dec_init(&d, msg, n);
	d.pos = 4;
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &c), 0);
	CHECK_EQ(c.prog, 100003);
	CHECK_EQ(rr_xdr_dec_pos(&d), 44);
	for (uint32_t cf = 0; cf < 3; cf++)
		for (uint32_t vf = 0; vf < 3; vf++) {
			memcpy(m, msg, sizeof(m));
			rr_put_be32(m + 28, cf);
			rr_put_be32(m + 36, vf);
			for (size_t k = 0; k <= sizeof(m); k++) {
				check_call_short_as_general(m, k, 4);
				if (k >= 4)
					check_call_short_as_general(m + 4, k - 4, 0);
			}
		}
	for (size_t i = 4; i < 44; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(m, msg, sizeof(m));
			m[i] = vals[v];
			check_call_short_as_general(m, n, 4);
			check_call_short_as_general(m, n, 0);
		}
}
