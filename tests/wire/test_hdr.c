/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the RPC-over-RDMA v1 header codec (RFC 8166): hand-built vectors
 * for each message form including the chunk-list examples of RFC 8166
 * section 5.7, round trips, a table of malformed headers each checked in
 * both directions (Call: the RDMA_ERROR RFC 8166 5.5 mandates or a discard;
 * Reply: silent discard) with its reason, encoder errors, and a seeded
 * property test (random valid header -> encode -> decode -> encode is
 * byte-identical). */
#include "proto/hdr.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define X 0x11223344u /* the xid of every vector */
#define FIX(proc) X, 1, 32, (proc)
#define SEG(l) 0xAB, (l), 0, 0x1000
#define WRAPSEG 0xAB, 0x10, 0xffffffffu, 0xfffffff8u

static size_t put_words(uint8_t *out, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rr_put_be32(out + 4 * i, w[i]);
	return 4 * n;
}

static void test_limits(struct rr_hdr_limits *lim)
{
	rr_hdr_limits_init(lim);
	lim->inline_threshold = 4096;
}

/* ---- hand-built vectors ---- */

TEST(hdr_vec_short_msg)
{
	/* A Short Call: RDMA_MSG, empty lists, the RPC Call follows. */
	uint8_t msg[64], out[64];
	size_t n = rr_test_hex("11223344 00000001 00000020 00000000"
			       "00000000 00000000 00000000"
			       "11223344 00000000 00000002", msg, sizeof(msg));
	struct rr_xdr_enc e;
	struct rr_hdr h, d;

	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_CALL, NULL), 0);
	CHECK_EQ(h.verdict, RR_HDR_OK);
	CHECK_EQ(h.reason, RR_HDR_R_NONE);
	CHECK_EQ(h.xid, X);
	CHECK_EQ(h.vers, 1);
	CHECK_EQ(h.credit, 32);
	CHECK_EQ(h.proc, RR_HDR_MSG);
	CHECK_EQ(h.nread, 0);
	CHECK_EQ(h.nwrite, 0);
	CHECK(!h.has_reply);
	CHECK_EQ(h.hdr_len, 28);
	CHECK_EQ(h.payload_off, 28);
	CHECK_EQ(h.payload_len, 12);
	/* the same bytes as a Reply */
	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, NULL), 0);

	rr_hdr_init(&d, X, 32, RR_HDR_MSG);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode(&e, &d), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), 28);
	CHECK_MEM(out, msg, 28);
	CHECK_EQ(rr_hdr_encoded_size(&d), 28);
	CHECK_EQ(rr_hdr_size(0, 0, 0, false, 0), RR_HDR_MIN_MSG_SIZE);
}

/* rr_hdr_decode(@msg[0..@n)) and rr_hdr_decode_general() return the same
 * and leave the same bytes in the whole struct rr_hdr (both started from
 * the same contents), in both directions, under @lim and the defaults. */
static void check_short_as_general(const uint8_t *msg, size_t n, const struct rr_hdr_limits *lim)
{
	static struct rr_hdr a, b;

	for (int dir = 0; dir < 2; dir++) {
		enum rr_hdr_dir d = dir ? RR_HDR_DIR_REPLY : RR_HDR_DIR_CALL;

		for (int l = 0; l < 2; l++) {
			const struct rr_hdr_limits *ll = l ? lim : NULL;

			memset(&a, 0x5a, sizeof(a));
			memset(&b, 0x5a, sizeof(b));
			CHECK_EQ(rr_hdr_decode(&a, msg, n, d, ll),
				 rr_hdr_decode_general(&b, msg, n, d, ll));
			CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		}
	}
}

/* The short form's one-pass decoding (an RDMA_MSG with three empty lists,
 * rr_hdr_decode) gives the general decoder's result: on the form itself,
 * on every truncation and extension of it, on every byte of its first 36
 * changed to each of a few values (another version, procedure, list
 * discriminator, a Payload XID that differs, ...), and beyond the inline
 * threshold. */
TEST(hdr_decode_short_as_general)
{
	static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x04, 0x11, 0x80, 0xff};
	uint8_t msg[64], m[64];
	size_t n = rr_test_hex("11223344 00000001 00000020 00000000"
			       "00000000 00000000 00000000"
			       "11223344 00000000 00000002", msg, sizeof(msg));
	struct rr_hdr_limits lim;
	struct rr_hdr h;

	test_limits(&lim);
	/* the form itself is accepted, as the general decoder accepts it */
	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, &lim), 0);
	CHECK_EQ(h.payload_len, 12);
	check_short_as_general(msg, n, &lim);
	for (size_t k = 0; k <= sizeof(msg); k++)
		check_short_as_general(msg, k, &lim);   /* truncated, extended by zeros */
	for (size_t i = 0; i < 36; i++)
		for (size_t v = 0; v < sizeof(vals); v++) {
			memcpy(m, msg, sizeof(m));
			m[i] = vals[v];
			check_short_as_general(m, n, &lim);
		}
	/* beyond the inline threshold: the general decoder's MSG_TOO_LONG */
	lim.inline_threshold = (uint32_t)n - 1;
	check_short_as_general(msg, n, &lim);
	REQUIRE(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_CALL, &lim) != 0);
	CHECK_EQ(h.reason, RR_HDR_R_MSG_TOO_LONG);
	/* a Payload XID that differs: discarded as the general decoder does */
	test_limits(&lim);
	msg[31] ^= 1;
	REQUIRE(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, &lim) != 0);
	CHECK_EQ(h.reason, RR_HDR_R_XID_MISMATCH);
}

/* rr_hdr_encode_short writes the bytes the builder and rr_hdr_encode_buf
 * write for a chunkless RDMA_MSG, for XIDs and credits of every byte
 * pattern, at every capacity around the header's 28 bytes (too small:
 * -EMSGSIZE from both; rr_hdr_encode_short writes nothing). */
TEST(hdr_encode_short_as_general)
{
	static const uint32_t vals[] = {0, 1, 32, 0x80, 0xffff, 0x11223344, 0x80000000u,
					0xffffffffu};
	uint8_t a[40], b[40];
	struct rr_hdr h;

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		for (size_t j = 0; j < sizeof(vals) / sizeof(vals[0]); j++)
			for (size_t cap = 0; cap <= sizeof(a); cap++) {
				memset(a, 0xa5, sizeof(a));
				memset(b, 0xa5, sizeof(b));
				rr_hdr_init(&h, vals[i], vals[j], RR_HDR_MSG);
				int n = rr_hdr_encode_short(a, cap, vals[i], vals[j]);

				CHECK_EQ(n, rr_hdr_encode_buf(&h, b, cap));
				if (n > 0)
					CHECK_MEM(a, b, sizeof(a));
				else   /* the builder may leave a partial header */
					CHECK_EQ(a[0], 0xa5);
			}
	REQUIRE_EQ(rr_hdr_encode_short(a, sizeof(a), X, 32), 28);
	CHECK_EQ(rr_get_be32(a + 12), RR_HDR_MSG);
}

/* RFC 8166 5.7: Read list 1 - PHLOO - 1 - PHLOO - 1 - PHLOO - 0 (two
 * segments at Position 8 form one chunk, one at 20 another), Write list
 * 1 - N - HLOO - HLOO - 1 - N - HLOO - 0, Reply chunk 1 - N - HLOO. */
static const char chunked_call_hex[] =
	"11223344 00000001 00000080 00000000"
	/* Read list */
	"00000001 00000008 00000101 00000010 00000000 0000a000"
	"00000001 00000008 00000102 00000006 00000001 0000b000"
	"00000001 00000028 00000103 00000008 00000000 0000c000"
	"00000000"
	/* Write list */
	"00000001 00000002 00000201 00001000 00000000 000d0000"
	"                  00000202 00000800 00000000 000e0000"
	"00000001 00000001 00000203 00000400 00000000 000f0000"
	"00000000"
	/* Reply chunk */
	"00000001 00000001 00000301 00002000 00000002 00000000"
	/* reduced Payload stream, 16 bytes: chunk 1 (22 bytes, 24 with its
	 * pad) was cut at inline offset 8 (Position 8), chunk 2 at the end of
	 * the inline bytes (inline offset 16 + 24 = Position 40) */
	"11223344 00000000 00000002 00000003";

TEST(hdr_vec_rfc8166_chunk_lists)
{
	uint8_t msg[256], out[256];
	size_t n = rr_test_hex(chunked_call_hex, msg, sizeof(msg));
	struct rr_hdr_limits lim;
	struct rr_xdr_enc e;
	struct rr_hdr h;

	test_limits(&lim);
	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_CALL, &lim), 0);
	CHECK_EQ(h.credit, 0x80);
	/* Read chunks grouped by position */
	REQUIRE_EQ(h.nread, 2);
	CHECK_EQ(h.read[0].position, 8);
	CHECK_EQ(h.read[0].nsegs, 2);
	CHECK_EQ(h.read[0].length, 0x16);
	CHECK_EQ(h.segs[h.read[0].first].handle, 0x101);
	CHECK_EQ(h.segs[h.read[0].first + 1].handle, 0x102);
	CHECK(h.segs[h.read[0].first + 1].offset == 0x10000b000ull);
	CHECK_EQ(h.read[1].position, 40);
	CHECK_EQ(h.read[1].nsegs, 1);
	CHECK_EQ(h.read[1].length, 8);
	/* Write chunks */
	REQUIRE_EQ(h.nwrite, 2);
	CHECK_EQ(h.write[0].nsegs, 2);
	CHECK_EQ(h.write[0].length, 0x1800);
	CHECK_EQ(h.segs[h.write[0].first].handle, 0x201);
	CHECK_EQ(h.segs[h.write[0].first + 1].handle, 0x202);
	CHECK_EQ(h.write[1].nsegs, 1);
	CHECK_EQ(h.segs[h.write[1].first].handle, 0x203);
	/* Reply chunk */
	REQUIRE(h.has_reply);
	CHECK_EQ(h.reply.nsegs, 1);
	CHECK_EQ(h.reply.length, 0x2000);
	CHECK(h.segs[h.reply.first].offset == 0x200000000ull);
	CHECK_EQ(h.nsegs, 7);
	CHECK_EQ(h.hdr_len, n - 16);
	CHECK_EQ(h.payload_len, 16);
	CHECK_EQ(h.hdr_len, rr_hdr_size(3, 2, 3, true, 1));

	/* re-encode: byte-identical */
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode(&e, &h), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), h.hdr_len);
	CHECK_MEM(out, msg, h.hdr_len);

	/* the same header built segment by segment, the Reply chunk first
	 * (any order: each chunk's segments are consecutive) */
	{
		const struct rr_hdr_seg rs[3] = {{0x101, 0x10, 0xa000},
						 {0x102, 0x6, 0x10000b000ull},
						 {0x103, 0x8, 0xc000}};
		const struct rr_hdr_seg w0[2] = {{0x201, 0x1000, 0xd0000},
						 {0x202, 0x800, 0xe0000}};
		const struct rr_hdr_seg w1[1] = {{0x203, 0x400, 0xf0000}};
		const struct rr_hdr_seg r0[1] = {{0x301, 0x2000, 0x200000000ull}};
		static struct rr_hdr d;

		rr_hdr_init(&d, X, 0x80, RR_HDR_MSG);
		REQUIRE_EQ(rr_hdr_add_reply(&d, r0, 1), 0);
		REQUIRE_EQ(rr_hdr_add_read(&d, 8, &rs[0]), 0);
		REQUIRE_EQ(rr_hdr_add_read(&d, 8, &rs[1]), 0);
		REQUIRE_EQ(rr_hdr_add_read(&d, 40, &rs[2]), 0);
		REQUIRE_EQ(rr_hdr_add_write(&d, w0, 2), 0);
		REQUIRE_EQ(rr_hdr_add_write(&d, NULL, 0), 0);
		REQUIRE_EQ(rr_hdr_add_seg(&d, &d.write[1], &w1[0]), 0);
		CHECK_EQ(d.nread, 2);   /* the two segments at 8 are one chunk */
		CHECK_EQ(d.read[0].nsegs, 2);
		CHECK_EQ(d.read[0].length, 0x16);
		CHECK_EQ(d.write[0].length, 0x1800);
		CHECK_EQ(rr_hdr_add_seg(&d, &d.write[0], &w1[0]), -EINVAL); /* not last */
		CHECK_EQ(rr_hdr_add_reply(&d, r0, 1), -EINVAL);             /* twice */
		memset(out, 0, sizeof(out));
		rr_xdr_enc_init(&e, out, sizeof(out));
		REQUIRE_EQ(rr_hdr_encode(&e, &d), 0);
		REQUIRE_EQ(rr_xdr_enc_len(&e), h.hdr_len);
		CHECK_MEM(out, msg, h.hdr_len);
		CHECK_EQ(rr_hdr_encoded_size(&d), h.hdr_len);
		CHECK_EQ(rr_hdr_encode_buf(&d, out, sizeof(out)), (int)h.hdr_len);
		CHECK_EQ(rr_hdr_encode_buf(&d, out, h.hdr_len - 1), -EMSGSIZE);
	}
}

TEST(hdr_vec_long_call_nomsg)
{
	/* Long Call: RDMA_NOMSG, Position-zero Read chunk of two segments,
	 * a Read chunk at 12 inside it, and a Reply chunk. */
	uint8_t msg[256], out[256];
	size_t n = rr_test_hex("11223344 00000001 00000010 00000001"
			       "00000001 00000000 00000011 00000040 00000000 00001000"
			       "00000001 00000000 00000012 00000010 00000000 00002000"
			       "00000001 0000000c 00000013 00000100 00000000 00003000"
			       "00000000"
			       "00000000"
			       "00000001 00000001 00000021 00001000 00000000 00004000",
			       msg, sizeof(msg));
	struct rr_hdr h;
	struct rr_xdr_enc e;
	const struct rr_hdr_chunk *p0;

	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_CALL, NULL), 0);
	CHECK_EQ(h.proc, RR_HDR_NOMSG);
	p0 = rr_hdr_pos0_chunk(&h);
	REQUIRE(p0 != NULL);
	CHECK_EQ(p0->nsegs, 2);
	CHECK_EQ(p0->length, 0x50);
	REQUIRE_EQ(h.nread, 2);
	CHECK_EQ(h.read[1].position, 12);
	CHECK(h.has_reply);
	CHECK_EQ(h.payload_len, 0);
	CHECK_EQ(h.trailing, 0);
	CHECK_EQ(h.hdr_len, n);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode(&e, &h), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), n);
	CHECK_MEM(out, msg, n);
}

TEST(hdr_vec_long_reply_nomsg)
{
	/* Long Reply: RDMA_NOMSG with the Reply chunk (two segments, the
	 * second unconsumed with length 0 as Linux returns it) and a Write
	 * chunk returned with count 0 (unused). */
	uint8_t msg[128];
	size_t n = rr_test_hex("11223344 00000001 00000040 00000001"
			       "00000000"
			       "00000001 00000000 00000000"
			       "00000001 00000002 00000021 00000300 00000000 00004000"
			       "                  00000022 00000000 00000000 00005000",
			       msg, sizeof(msg));
	struct rr_hdr h;

	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, NULL), 0);
	CHECK_EQ(h.credit, 64);
	CHECK_EQ(h.nwrite, 1);
	CHECK_EQ(h.write[0].nsegs, 0);
	CHECK_EQ(h.write[0].length, 0);
	CHECK(h.has_reply);
	CHECK_EQ(h.reply.nsegs, 2);
	CHECK_EQ(h.reply.length, 0x300);
	/* the same bytes as a Call: no Payload stream -> ERR_CHUNK */
	CHECK_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_CALL, NULL), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_CHUNK);
	CHECK_EQ(h.reason, RR_HDR_R_NOMSG_NO_CHUNK);
}

TEST(hdr_vec_error_and_done)
{
	uint8_t vers[32], chunk[32], done[16], out[32];
	size_t nv = rr_test_hex("11223344 00000001 00000001 00000004"
				"00000001 00000001 00000001", vers, sizeof(vers));
	size_t nc = rr_test_hex("11223344 00000001 00000001 00000004 00000002",
				chunk, sizeof(chunk));
	size_t nd = rr_test_hex("11223344 00000001 00000005 00000003", done,
				sizeof(done));
	struct rr_hdr_limits lim;
	struct rr_xdr_enc e;
	struct rr_hdr h;

	REQUIRE_EQ(rr_hdr_decode(&h, vers, nv, RR_HDR_DIR_REPLY, NULL), 0);
	CHECK_EQ(h.proc, RR_HDR_ERROR);
	CHECK_EQ(h.err, RR_HDR_ERR_VERS);
	CHECK_EQ(h.vers_low, 1);
	CHECK_EQ(h.vers_high, 1);
	CHECK_EQ(h.hdr_len, 28);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode_err_vers(&e, X, 1, 1, 1, 1), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), nv);
	CHECK_MEM(out, vers, nv);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode(&e, &h), 0);
	CHECK_MEM(out, vers, nv);

	REQUIRE_EQ(rr_hdr_decode(&h, chunk, nc, RR_HDR_DIR_REPLY, NULL), 0);
	CHECK_EQ(h.err, RR_HDR_ERR_CHUNK);
	CHECK_EQ(h.hdr_len, 20);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode_err_chunk(&e, X, 1, 1), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), nc);
	CHECK_MEM(out, chunk, nc);

	/* RDMA_DONE: accepted by a responder only with the extension */
	rr_hdr_limits_init(&lim);
	lim.reliable_reply = true;
	REQUIRE_EQ(rr_hdr_decode(&h, done, nd, RR_HDR_DIR_CALL, &lim), 0);
	CHECK_EQ(h.proc, RR_HDR_DONE);
	CHECK_EQ(h.xid, X);
	CHECK_EQ(h.credit, 5);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode_done(&e, X, 5), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), nd);
	CHECK_MEM(out, done, nd);
	CHECK_EQ(rr_hdr_decode(&h, done, nd, RR_HDR_DIR_CALL, NULL), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_DISCARD);
	CHECK_EQ(h.reason, RR_HDR_R_DONE_UNEXPECTED);
	CHECK_EQ(h.xid, X); /* still decoded for a transport that wants it */
}

TEST(hdr_reliable_reply_pos0_reply)
{
	/* Responder-provided Read chunk: RDMA_NOMSG Reply with a
	 * Position-zero Read chunk, allowed only when negotiated. */
	uint8_t msg[128];
	size_t n = rr_test_hex("11223344 00000001 00000040 00000001"
			       "00000001 00000000 00000077 00002000 00000000 00009000"
			       "00000000 00000000 00000000", msg, sizeof(msg));
	struct rr_hdr_limits lim;
	struct rr_hdr h;

	rr_hdr_limits_init(&lim);
	CHECK_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, &lim), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_DISCARD);
	CHECK_EQ(h.reason, RR_HDR_R_READ_IN_REPLY);
	lim.reliable_reply = true;
	REQUIRE_EQ(rr_hdr_decode(&h, msg, n, RR_HDR_DIR_REPLY, &lim), 0);
	REQUIRE(rr_hdr_pos0_chunk(&h) != NULL);
	CHECK_EQ(rr_hdr_pos0_chunk(&h)->length, 0x2000);
}

/* ---- malformed headers: the table ---- */

struct bad_case {
	const char *name;
	uint32_t w[48];
	size_t nw;
	int len;          /* bytes to feed; 0: all words; -1: none */
	bool rr;          /* reliable_reply negotiated */
	uint32_t thresh;  /* inline threshold; 0: 4096 */
	uint32_t spc;     /* max segments per chunk; 0: default */
	uint32_t maxr, maxw, clen; /* 0: defaults */
	enum rr_hdr_verdict call_v;
	enum rr_hdr_reason call_r;
	enum rr_hdr_verdict reply_v;
	enum rr_hdr_reason reply_r;
};

#define W(...) .w = {__VA_ARGS__}, .nw = sizeof((uint32_t[]){__VA_ARGS__}) / 4
#define CALL(v, r) .call_v = RR_HDR_##v, .call_r = RR_HDR_R_##r
#define REPLY(v, r) .reply_v = RR_HDR_##v, .reply_r = RR_HDR_R_##r
#define CHUNK(r) CALL(REPLY_ERR_CHUNK, r), REPLY(DISCARD, r) /* both sides */

static const struct bad_case bad_cases[] = {
	{"empty", W(0), .len = -1, CALL(DISCARD, SHORT_XID), REPLY(DISCARD, SHORT_XID)},
	{"three bytes", W(X), .len = 3, CALL(DISCARD, SHORT_XID), REPLY(DISCARD, SHORT_XID)},
	{"xid only", W(X), CHUNK(TRUNCATED)},
	{"xid + version 2", W(X, 2), CALL(REPLY_ERR_VERS, VERS), REPLY(DISCARD, VERS)},
	{"version 0", W(X, 0, 32, 0, 0, 0, 0, X), CALL(REPLY_ERR_VERS, VERS), REPLY(DISCARD, VERS)},
	{"version ~0", W(X, 0xffffffffu, 32, 0, 0, 0, 0, X), CALL(REPLY_ERR_VERS, VERS), REPLY(DISCARD, VERS)},
	{"no credit", W(X, 1), CHUNK(TRUNCATED)},
	{"no proc", W(X, 1, 32), CHUNK(TRUNCATED)},
	{"proc 5", W(FIX(5), 0, 0, 0), CHUNK(PROC)},
	{"proc ~0", W(FIX(0xffffffffu), 0, 0, 0), CHUNK(PROC)},
	{"RDMA_MSGP", W(FIX(2), 0, 0, 0, 0, 0, X), CHUNK(MSGP)},
	{"RDMA_DONE not negotiated", W(FIX(3)), CALL(DISCARD, DONE_UNEXPECTED), REPLY(DISCARD, DONE_UNEXPECTED)},
	{"RDMA_DONE to a requester", W(FIX(3)), .rr = true, CALL(OK, NONE), REPLY(DISCARD, DONE_UNEXPECTED)},
	{"RDMA_ERROR to a responder", W(FIX(4), 2), CALL(DISCARD, ERROR_TO_RESPONDER), REPLY(OK, NONE)},
	{"RDMA_ERROR without err", W(FIX(4)), CALL(DISCARD, ERROR_TO_RESPONDER), REPLY(DISCARD, ERR_UNDECODABLE)},
	{"RDMA_ERROR err 3", W(FIX(4), 3), CALL(DISCARD, ERROR_TO_RESPONDER), REPLY(DISCARD, ERR_CODE)},
	{"ERR_VERS without high", W(FIX(4), 1, 1), CALL(DISCARD, ERROR_TO_RESPONDER), REPLY(DISCARD, ERR_UNDECODABLE)},
	{"MSG without Read list", W(FIX(0)), CHUNK(TRUNCATED)},
	{"Read discriminator 2", W(FIX(0), 2, 0, 0, X), CHUNK(BAD_DISCRIM)},
	{"Read entry cut in segment", W(FIX(0), 1, 4, SEG(4)), .len = 16 + 8 + 6, CHUNK(TRUNCATED)},
	{"Read list unterminated", W(FIX(0), 1, 4, SEG(4)), CHUNK(TRUNCATED)},
	{"Position not multiple of 4", W(FIX(0), 1, 6, SEG(4), 0, 0, 0, X, 0), CALL(REPLY_ERR_CHUNK, POS_ALIGN), REPLY(DISCARD, POS_ALIGN)},
	{"Positions decrease", W(FIX(0), 1, 8, SEG(4), 1, 4, SEG(4), 0, 0, 0, X, 0, 0), CHUNK(POS_ORDER)},
	{"Position repeats apart", W(FIX(0), 1, 8, SEG(4), 1, 12, SEG(4), 1, 8, SEG(4), 0, 0, 0, X, 0, 0, 0), CHUNK(POS_ORDER)},
	{"Read chunks overlap", W(FIX(0), 1, 4, SEG(16), 1, 8, SEG(4), 0, 0, 0, X, 0, 0, 0), CALL(REPLY_ERR_CHUNK, POS_OVERLAP), REPLY(DISCARD, READ_IN_REPLY)},
	{"Position beyond payload", W(FIX(0), 1, 12, SEG(4), 0, 0, 0, X, 0), CALL(REPLY_ERR_CHUNK, POS_BEYOND), REPLY(DISCARD, READ_IN_REPLY)},
	{"second Position beyond payload", W(FIX(0), 1, 8, SEG(5), 1, 24, SEG(4), 0, 0, 0, X, 0, 0), CALL(REPLY_ERR_CHUNK, POS_BEYOND), REPLY(DISCARD, READ_IN_REPLY)},
	{"Read chunk over segment limit", W(FIX(0), 1, 4, SEG(4), 1, 4, SEG(4), 1, 4, SEG(4), 0, 0, 0, X), .spc = 2, CHUNK(TOO_MANY_SEGS)},
	{"Write chunk over segment limit", W(FIX(0), 0, 1, 3, SEG(4), SEG(4), SEG(4), 0, 0, X), .spc = 2, CHUNK(TOO_MANY_SEGS)},
	{"Write count ~0", W(FIX(0), 0, 1, 0xffffffffu, SEG(4), 0, 0, X), CHUNK(TOO_MANY_SEGS)},
	{"Write count beyond input", W(FIX(0), 0, 1, 3, SEG(4), SEG(4)), CHUNK(TRUNCATED)},
	{"Write count ~0 unlimited", W(FIX(0), 0, 1, 0xffffffffu, SEG(4), 0, 0, X), .spc = 0xffffffffu, CHUNK(TRUNCATED)},
	{"too many Write chunks", W(FIX(0), 0, 1, 1, SEG(4), 1, 1, SEG(4), 0, 0, X), .maxw = 1, CHUNK(TOO_MANY_CHUNKS)},
	{"too many Read chunks", W(FIX(0), 1, 4, SEG(4), 1, 8, SEG(4), 0, 0, 0, X, 0), .maxr = 1, CHUNK(TOO_MANY_CHUNKS)},
	{"Read segment wraps", W(FIX(0), 1, 4, WRAPSEG, 0, 0, 0, X), CHUNK(SEG_WRAP)},
	{"Write segment wraps", W(FIX(0), 0, 1, 1, WRAPSEG, 0, 0, X), CHUNK(SEG_WRAP)},
	{"Reply segment wraps", W(FIX(0), 0, 0, 1, 1, WRAPSEG, X), CHUNK(SEG_WRAP)},
	{"Write discriminator 2", W(FIX(0), 0, 2, 0, X), CHUNK(BAD_DISCRIM)},
	{"Reply discriminator 7", W(FIX(0), 0, 0, 7, X), CHUNK(BAD_DISCRIM)},
	{"Write list unterminated", W(FIX(0), 0, 1, 1, SEG(4)), CHUNK(TRUNCATED)},
	{"Reply chunk without count", W(FIX(0), 0, 0, 1), CHUNK(TRUNCATED)},
	{"chunk over length limit", W(FIX(0), 0, 1, 2, SEG(60), SEG(60), 0, 0, X), .clen = 100, CHUNK(CHUNK_TOO_LONG)},
	{"NOMSG without chunks", W(FIX(1), 0, 0, 0), CHUNK(NOMSG_NO_CHUNK)},
	{"NOMSG with Write list only", W(FIX(1), 0, 1, 1, SEG(100), 0, 0), CHUNK(NOMSG_NO_CHUNK)},
	{"NOMSG Call with Reply chunk only", W(FIX(1), 0, 0, 1, 1, SEG(100)), CALL(REPLY_ERR_CHUNK, NOMSG_NO_CHUNK), REPLY(OK, NONE)},
	{"NOMSG empty Position-zero chunk", W(FIX(1), 1, 0, SEG(0), 0, 0, 0), CALL(REPLY_ERR_CHUNK, NOMSG_EMPTY), REPLY(DISCARD, READ_IN_REPLY)},
	{"NOMSG Read chunk not at zero", W(FIX(1), 1, 8, SEG(16), 0, 0, 0), CALL(REPLY_ERR_CHUNK, NOMSG_NO_CHUNK), REPLY(DISCARD, READ_IN_REPLY)},
	{"NOMSG Read chunk beyond call", W(FIX(1), 1, 0, SEG(16), 1, 20, SEG(4), 0, 0, 0), CALL(REPLY_ERR_CHUNK, POS_BEYOND), REPLY(DISCARD, READ_IN_REPLY)},
	{"NOMSG Reply chunk all zero", W(FIX(1), 0, 0, 1, 2, SEG(0), SEG(0)), CALL(REPLY_ERR_CHUNK, NOMSG_NO_CHUNK), REPLY(DISCARD, NOMSG_EMPTY)},
	{"NOMSG Reply with pos0 and Reply chunk", W(FIX(1), 1, 0, SEG(64), 0, 0, 1, 1, SEG(64)), .rr = true, CALL(OK, NONE), REPLY(DISCARD, NOMSG_AMBIGUOUS)},
	{"NOMSG Reply Read chunk at 8", W(FIX(1), 1, 8, SEG(64), 0, 0, 0), .rr = true, CALL(REPLY_ERR_CHUNK, NOMSG_NO_CHUNK), REPLY(DISCARD, REPLY_READ_POS)},
	{"NOMSG Reply pos0 plus another", W(FIX(1), 1, 0, SEG(16), 1, 8, SEG(4), 0, 0, 0), .rr = true, CALL(OK, NONE), REPLY(DISCARD, REPLY_READ_POS)},
	{"MSG with Position-zero chunk", W(FIX(0), 1, 0, SEG(100), 0, 0, 0, X), CALL(REPLY_ERR_CHUNK, MSG_POS_ZERO), REPLY(DISCARD, READ_IN_REPLY)},
	{"MSG Reply with Read chunk", W(FIX(0), 1, 8, SEG(4), 0, 0, 0, X, 0), CALL(OK, NONE), REPLY(DISCARD, READ_IN_REPLY)},
	{"MSG without payload", W(FIX(0), 0, 0, 0), CHUNK(MSG_NO_PAYLOAD)},
	{"MSG with 2-byte payload", W(FIX(0), 0, 0, 0, X), .len = 30, CHUNK(MSG_NO_PAYLOAD)},
	{"XID mismatch", W(FIX(0), 0, 0, 0, X + 1, 0), CHUNK(XID_MISMATCH)},
	{"longer than inline threshold", W(FIX(0), 0, 0, 0, X, 0, 0, 0, 0, 0, 0, 0, 0, 0), .thresh = 64, CHUNK(MSG_TOO_LONG)},
};

static void run_case(const struct bad_case *c, enum rr_hdr_dir dir)
{
	uint8_t buf[256];
	struct rr_hdr_limits lim;
	struct rr_hdr h;
	size_t n = put_words(buf, c->w, c->nw);
	enum rr_hdr_verdict v = dir == RR_HDR_DIR_CALL ? c->call_v : c->reply_v;
	enum rr_hdr_reason r = dir == RR_HDR_DIR_CALL ? c->call_r : c->reply_r;
	int rc;

	if (c->len > 0)
		n = (size_t)c->len;
	else if (c->len < 0)
		n = 0;
	test_limits(&lim);
	lim.reliable_reply = c->rr;
	if (c->thresh)
		lim.inline_threshold = c->thresh;
	if (c->spc)
		lim.max_segs_per_chunk = c->spc;
	if (c->maxr)
		lim.max_read_chunks = c->maxr;
	if (c->maxw)
		lim.max_write_chunks = c->maxw;
	if (c->clen)
		lim.max_chunk_len = c->clen;
	rc = rr_hdr_decode(&h, buf, n, dir, &lim);
	if (h.verdict != v || h.reason != r || rc != (v == RR_HDR_OK ? 0 : -EPROTO))
		fprintf(stderr, "  case \"%s\" (%s): got %s/%s rc %d, want %s/%s\n",
			c->name, dir == RR_HDR_DIR_CALL ? "call" : "reply",
			rr_hdr_verdict_str(h.verdict), rr_hdr_reason_str(h.reason), rc,
			rr_hdr_verdict_str(v), rr_hdr_reason_str(r));
	CHECK_EQ(h.verdict, v);
	CHECK_EQ(h.reason, r);
	CHECK_EQ(rc, v == RR_HDR_OK ? 0 : -EPROTO);
	CHECK_EQ(h.verdict, rr_hdr_verdict_for(dir, h.reason));
	if (n >= 4)
		CHECK_EQ(h.xid, X);
	/* a rejected Call can always be answered */
	if (v == RR_HDR_REPLY_ERR_CHUNK) {
		uint8_t out[32];
		struct rr_xdr_enc e;
		struct rr_hdr eh;

		rr_xdr_enc_init(&e, out, sizeof(out));
		REQUIRE_EQ(rr_hdr_encode_reject(&e, &h, 7), 0);
		REQUIRE_EQ(rr_hdr_decode(&eh, out, rr_xdr_enc_len(&e),
					 RR_HDR_DIR_REPLY, NULL), 0);
		CHECK_EQ(eh.proc, RR_HDR_ERROR);
		CHECK_EQ(eh.xid, X);
		CHECK_EQ(eh.credit, 7);
		CHECK_EQ(eh.err, RR_HDR_ERR_CHUNK);
	} else if (v == RR_HDR_REPLY_ERR_VERS) {
		/* echoes the unsupported version, so check the bytes */
		uint8_t out[32];
		struct rr_xdr_enc e;

		rr_xdr_enc_init(&e, out, sizeof(out));
		REQUIRE_EQ(rr_hdr_encode_reject(&e, &h, 7), 0);
		REQUIRE_EQ(rr_xdr_enc_len(&e), RR_HDR_ERR_VERS_SIZE);
		CHECK_EQ(rr_get_be32(out), X);
		CHECK_EQ(rr_get_be32(out + 4), c->w[1]);
		CHECK_EQ(rr_get_be32(out + 8), 7);
		CHECK_EQ(rr_get_be32(out + 12), RR_HDR_ERROR);
		CHECK_EQ(rr_get_be32(out + 16), RR_HDR_ERR_VERS);
		CHECK_EQ(rr_get_be32(out + 20), 1);
		CHECK_EQ(rr_get_be32(out + 24), 1);
	}
}

TEST(hdr_malformed_table)
{
	size_t rejected = 0;

	for (size_t i = 0; i < RR_ARRAY_SIZE(bad_cases); i++) {
		run_case(&bad_cases[i], RR_HDR_DIR_CALL);
		run_case(&bad_cases[i], RR_HDR_DIR_REPLY);
		if (bad_cases[i].call_v != RR_HDR_OK || bad_cases[i].reply_v != RR_HDR_OK)
			rejected++;
	}
	CHECK(rejected >= 30);
	CHECK(RR_ARRAY_SIZE(bad_cases) >= 50);
}

TEST(hdr_malformed_every_truncation)
{
	/* Every strict prefix of a valid chunked Call is rejected, never
	 * read past, and answered with ERR_CHUNK once the xid and version
	 * are in (a prefix ending inside the payload fails a payload check:
	 * the last Read chunk is positioned after all 16 inline bytes). */
	uint8_t msg[256];
	size_t n = rr_test_hex(chunked_call_hex, msg, sizeof(msg));
	struct rr_hdr_limits lim;
	struct rr_hdr h;

	test_limits(&lim);
	for (size_t len = 0; len < n; len++) {
		uint8_t *copy = malloc(len ? len : 1); /* exact size for ASan */

		memcpy(copy, msg, len);
		CHECK_EQ(rr_hdr_decode(&h, copy, len, RR_HDR_DIR_CALL, &lim), -EPROTO);
		if (len < 4)
			CHECK_EQ(h.verdict, RR_HDR_DISCARD);
		else
			CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_CHUNK);
		CHECK_EQ(rr_hdr_decode(&h, copy, len, RR_HDR_DIR_REPLY, &lim), -EPROTO);
		CHECK_EQ(h.verdict, RR_HDR_DISCARD);
		free(copy);
	}
}

/* ---- limits and capacity built in code ---- */

static size_t build_read_chunk(uint8_t *buf, uint32_t nsegs)
{
	size_t n = 0;
	uint32_t w[4] = {FIX(0)};

	n += put_words(buf + n, w, 4);
	for (uint32_t i = 0; i < nsegs; i++) {
		uint32_t s[6] = {1, 4, 0x100 + i, 1, 0, 0x1000 * i};

		n += put_words(buf + n, s, 6);
	}
	{
		uint32_t t[4] = {0, 0, 0, X};

		n += put_words(buf + n, t, 4);
	}
	return n;
}

TEST(hdr_limit_default_16_segments)
{
	uint8_t buf[1024];
	struct rr_hdr h;
	struct rr_hdr_limits lim;
	size_t n;

	test_limits(&lim);
	n = build_read_chunk(buf, 16);
	REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, &lim), 0);
	CHECK_EQ(h.nread, 1);
	CHECK_EQ(h.read[0].nsegs, 16);
	CHECK_EQ(h.read[0].length, 16);
	n = build_read_chunk(buf, 17);
	CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, &lim), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_CHUNK);
	CHECK_EQ(h.reason, RR_HDR_R_TOO_MANY_SEGS);
	/* the default inline threshold (1024) rejects this 436-byte message
	 * only when lowered */
	lim.inline_threshold = 400;
	n = build_read_chunk(buf, 16);
	CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, &lim), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_MSG_TOO_LONG);
}

/* max_read_segs bounds the whole Read list, whatever its chunks. */
TEST(hdr_limit_read_list_segments)
{
	uint8_t buf[1024];
	struct rr_hdr h;
	struct rr_hdr_limits lim;
	struct rr_hdr_seg sg = {0x100, 4, 0x1000};
	struct rr_hdr b;
	int n;

	test_limits(&lim);
	lim.max_read_segs = 3;
	/* two chunks of two segments: four in the list */
	rr_hdr_init(&b, X, 32, RR_HDR_MSG);
	for (uint32_t i = 0; i < 4; i++)
		REQUIRE_EQ(rr_hdr_add_read(&b, 8 + 8 * (i / 2), &sg), 0);
	REQUIRE_EQ(b.nread, 2);
	n = rr_hdr_encode_buf(&b, buf, sizeof(buf) - 16);
	REQUIRE(n > 0);
	rr_put_be32(buf + n, X);
	memset(buf + n + 4, 0, 12);
	CHECK_EQ(rr_hdr_decode(&h, buf, (size_t)n + 16, RR_HDR_DIR_CALL, &lim), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_CHUNK);
	CHECK_EQ(h.reason, RR_HDR_R_TOO_MANY_SEGS);
	CHECK_EQ(rr_hdr_decode(&h, buf, (size_t)n + 16, RR_HDR_DIR_REPLY, &lim), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_DISCARD);
	lim.max_read_segs = 4;
	CHECK_EQ(rr_hdr_decode(&h, buf, (size_t)n + 16, RR_HDR_DIR_CALL, &lim), 0);
	/* the default: no limit beyond the capacity */
	rr_hdr_limits_init(&lim);
	CHECK_EQ(lim.max_read_segs, UINT32_MAX);
}

TEST(hdr_capacity_is_a_violation)
{
	/* 9 Write chunks of 16 segments = 144 > RR_HDR_MAX_SEGS: a violation
	 * even with limits that would allow it. */
	static uint8_t buf[4096];
	struct rr_hdr_limits lim;
	struct rr_hdr h;
	size_t n = 0;
	uint32_t w[5] = {FIX(0), 0};

	n += put_words(buf, w, 5);
	for (int c = 0; c < 9; c++) {
		uint32_t hd[2] = {1, 16};

		n += put_words(buf + n, hd, 2);
		for (int s = 0; s < 16; s++) {
			uint32_t sg[4] = {SEG(8)};

			n += put_words(buf + n, sg, 4);
		}
	}
	{
		uint32_t t[3] = {0, 0, X};

		n += put_words(buf + n, t, 3);
	}
	rr_hdr_limits_init(&lim);
	lim.inline_threshold = sizeof(buf);
	lim.max_write_chunks = 1000;
	lim.max_segs_per_chunk = 1000;
	CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, &lim), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_CAPACITY);
	CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_CHUNK);
	CHECK_EQ(h.nsegs, RR_HDR_MAX_SEGS);
	/* 17 Write chunks: the compile-time chunk cap */
	lim.max_segs_per_chunk = 0; /* zero-segment chunks pass any limit */
	n = 0;
	n += put_words(buf, w, 5);
	for (int c = 0; c < 17; c++) {
		uint32_t hd[2] = {1, 0};

		n += put_words(buf + n, hd, 2);
	}
	{
		uint32_t t[3] = {0, 0, X};

		n += put_words(buf + n, t, 3);
	}
	CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, &lim), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_TOO_MANY_CHUNKS);
	CHECK_EQ(h.nwrite, RR_HDR_MAX_WRITE_CHUNKS);
}

/* ---- policies ---- */

TEST(hdr_zero_length_segments_accepted)
{
	/* Zero-length segments are valid XDR and RFC 8166 does not forbid
	 * them: a zero-length Read chunk, a zero-length Write segment. */
	uint32_t w[] = {FIX(0), 1, 8, SEG(0), 1, 8 + 0, SEG(0), 0,
			1, 2, SEG(0), SEG(32), 0, 0, X, 0};
	uint8_t buf[256];
	size_t n = put_words(buf, w, RR_ARRAY_SIZE(w));
	struct rr_hdr h;

	REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), 0);
	CHECK_EQ(h.nread, 1); /* same position: one chunk of two segments */
	CHECK_EQ(h.read[0].nsegs, 2);
	CHECK_EQ(h.read[0].length, 0);
	CHECK_EQ(h.write[0].length, 32);
}

TEST(hdr_trailing_bytes_after_nomsg_ignored)
{
	uint32_t w[] = {FIX(1), 1, 0, SEG(64), 0, 0, 0, 0xdeadbeef, 0xfeedface};
	uint8_t buf[128];
	size_t n = put_words(buf, w, RR_ARRAY_SIZE(w));
	struct rr_hdr h;

	REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), 0);
	CHECK_EQ(h.hdr_len, n - 8);
	CHECK_EQ(h.trailing, 8);
	CHECK_EQ(h.payload_len, 0);
	/* and after RDMA_ERROR */
	{
		uint32_t e[] = {FIX(4), 2, 0x55};

		n = put_words(buf, e, RR_ARRAY_SIZE(e));
		REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_REPLY, NULL), 0);
		CHECK_EQ(h.trailing, 4);
	}
}

TEST(hdr_position_at_end_of_payload)
{
	/* A Read chunk may sit exactly at the end of the inline payload (the
	 * data item was the last one); a 6-byte chunk at 8 took its 2 pad
	 * bytes with it, so it spans 8..16 of the unreduced stream and the
	 * next chunk cannot start before 16. */
	uint32_t ok[] = {FIX(0), 1, 8, SEG(6), 1, 16, SEG(4), 0, 0, 0, X, 0};
	uint32_t overlap[] = {FIX(0), 1, 8, SEG(6), 1, 12, SEG(4), 0, 0, 0, X, 0};
	uint8_t buf[128];
	struct rr_hdr h;
	size_t n;

	n = put_words(buf, ok, RR_ARRAY_SIZE(ok));
	REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), 0);
	CHECK_EQ(h.nread, 2);
	n = put_words(buf, overlap, RR_ARRAY_SIZE(overlap));
	CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_POS_OVERLAP);
}

TEST(hdr_reject_needs_reply_verdict)
{
	struct rr_hdr h;
	uint8_t out[8];
	struct rr_xdr_enc e;
	uint32_t w[] = {FIX(0), 0, 0, 0, X};
	uint8_t buf[64];
	size_t n = put_words(buf, w, RR_ARRAY_SIZE(w));

	REQUIRE_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), 0);
	rr_xdr_enc_init(&e, out, sizeof(out));
	CHECK_EQ(rr_hdr_encode_reject(&e, &h, 1), -EINVAL);
	/* ERR_VERS echoes the failing version (RFC 8166 5.5) */
	{
		uint32_t v[] = {X, 7, 3, 0};
		uint8_t eb[32];

		n = put_words(buf, v, 4);
		CHECK_EQ(rr_hdr_decode(&h, buf, n, RR_HDR_DIR_CALL, NULL), -EPROTO);
		CHECK_EQ(h.verdict, RR_HDR_REPLY_ERR_VERS);
		CHECK_EQ(h.vers, 7);
		rr_xdr_enc_init(&e, eb, sizeof(eb));
		REQUIRE_EQ(rr_hdr_encode_reject(&e, &h, 9), 0);
		REQUIRE_EQ(rr_xdr_enc_len(&e), 28);
		CHECK_MEM(eb, "\x11\x22\x33\x44\0\0\0\x07\0\0\0\x09\0\0\0\x04"
			      "\0\0\0\x01\0\0\0\x01\0\0\0\x01", 28);
		rr_xdr_enc_init(&e, eb, 27);
		CHECK_EQ(rr_hdr_encode_reject(&e, &h, 9), -EMSGSIZE);
		CHECK_EQ(rr_xdr_enc_len(&e), 0);
	}
	CHECK_EQ(rr_hdr_decode(NULL, buf, n, RR_HDR_DIR_CALL, NULL), -EINVAL);
	CHECK_EQ(rr_hdr_decode(&h, NULL, 4, RR_HDR_DIR_CALL, NULL), -EINVAL);
	CHECK_EQ(rr_hdr_decode(&h, NULL, 0, RR_HDR_DIR_CALL, NULL), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_SHORT_XID);
}

TEST(hdr_reason_names_and_verdicts)
{
	for (int r = 0; r < RR_HDR_R_COUNT; r++) {
		enum rr_hdr_verdict vc = rr_hdr_verdict_for(RR_HDR_DIR_CALL, r);
		enum rr_hdr_verdict vr = rr_hdr_verdict_for(RR_HDR_DIR_REPLY, r);

		CHECK(strcmp(rr_hdr_reason_str(r), "?") != 0);
		/* a requester never answers with RDMA_ERROR */
		CHECK_EQ(vr, r == RR_HDR_R_NONE ? RR_HDR_OK : RR_HDR_DISCARD);
		CHECK_EQ(vc == RR_HDR_OK, r == RR_HDR_R_NONE);
		CHECK_EQ(vc == RR_HDR_REPLY_ERR_VERS, r == RR_HDR_R_VERS);
	}
	CHECK(strcmp(rr_hdr_reason_str(RR_HDR_R_COUNT), "?") == 0);
	CHECK(strcmp(rr_hdr_verdict_str(RR_HDR_DISCARD), "discard") == 0);
}

/* ---- encoder errors ---- */

TEST(hdr_encode_invalid_and_short_buffer)
{
	const struct rr_hdr_seg r1 = {1, 4, 0}, r2 = {2, 4, 0};
	const struct rr_hdr_seg ws[2] = {{3, 100, 0x1000}, {4, 50, 0x2000}};
	static struct rr_hdr d;
	uint8_t out[256];
	struct rr_xdr_enc e;
	size_t full;

	rr_hdr_init(&d, X, 1, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_read(&d, 8, &r1), 0);
	REQUIRE_EQ(rr_hdr_add_write(&d, ws, 2), 0);
	REQUIRE_EQ(rr_hdr_add_reply(&d, ws, 2), 0);
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_encode(&e, &d), 0);
	full = rr_xdr_enc_len(&e);
	CHECK_EQ(full, rr_hdr_encoded_size(&d));
	CHECK_EQ(full, rr_hdr_size(1, 1, 2, true, 2));
	for (size_t cap = 0; cap < full; cap++) {
		rr_xdr_enc_init(&e, out, cap);
		CHECK_EQ(rr_hdr_encode(&e, &d), -EMSGSIZE);
		CHECK_EQ(rr_xdr_enc_len(&e), 0);
	}
	rr_xdr_enc_init(&e, out, sizeof(out));
	REQUIRE_EQ(rr_hdr_add_read(&d, 4, &r2), 0); /* decreasing positions */
	CHECK_EQ(d.nread, 2);
	CHECK_EQ(rr_hdr_encode(&e, &d), -EINVAL);
	CHECK_EQ(rr_hdr_encode_raw(&e, &d), 0);     /* what a rogue peer sends */
	CHECK_EQ(rr_xdr_enc_len(&e), full + 24);
	rr_xdr_enc_init(&e, out, sizeof(out));
	d.read[1].position = 10;                    /* unaligned */
	CHECK_EQ(rr_hdr_encode(&e, &d), -EINVAL);
	d.nread = 1;
	d.proc = RR_HDR_MSGP;
	CHECK_EQ(rr_hdr_encode(&e, &d), -EINVAL);
	d.proc = RR_HDR_NOMSG;
	d.reply.first = 5;                          /* segments outside segs[] */
	CHECK_EQ(rr_hdr_encode(&e, &d), -EINVAL);
	d.has_reply = false;
	d.write[0].nsegs = 9;
	CHECK_EQ(rr_hdr_encode(&e, &d), -EINVAL);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	/* the builders refuse what does not fit the model */
	rr_hdr_init(&d, X, 1, RR_HDR_MSG);
	CHECK_EQ(rr_hdr_add_write(&d, NULL, 1), -EINVAL);
	for (uint32_t i = 0; i < RR_HDR_MAX_WRITE_CHUNKS; i++)
		REQUIRE_EQ(rr_hdr_add_write(&d, NULL, 0), 0);
	CHECK_EQ(rr_hdr_add_write(&d, NULL, 0), -EMSGSIZE);
	for (uint32_t i = 0; i < RR_HDR_MAX_READ_CHUNKS; i++)
		REQUIRE_EQ(rr_hdr_add_read(&d, 4 * i, &r1), 0);
	CHECK_EQ(rr_hdr_add_read(&d, 4 * RR_HDR_MAX_READ_CHUNKS, &r1), -EMSGSIZE);
	for (uint32_t i = RR_HDR_MAX_READ_CHUNKS; i < RR_HDR_MAX_SEGS; i++)
		REQUIRE_EQ(rr_hdr_add_seg(&d, &d.read[RR_HDR_MAX_READ_CHUNKS - 1], &r1), 0);
	CHECK_EQ(rr_hdr_add_seg(&d, &d.read[RR_HDR_MAX_READ_CHUNKS - 1], &r1), -EMSGSIZE);
	CHECK_EQ(rr_hdr_add_reply(&d, ws, 1), -EMSGSIZE);
	CHECK_EQ(rr_hdr_add_reply(&d, NULL, 0), 0);
	CHECK_EQ(rr_hdr_add_seg(&d, &d.reply, &r1), -EMSGSIZE);
	/* DONE and errors in a short buffer */
	rr_xdr_enc_init(&e, out, 15);
	CHECK_EQ(rr_hdr_encode_done(&e, X, 1), -EMSGSIZE);
	rr_xdr_enc_init(&e, out, 19);
	CHECK_EQ(rr_hdr_encode_err_chunk(&e, X, 1, 1), -EMSGSIZE);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	CHECK_EQ(rr_hdr_encode_error_buf(X, 2, 1, RR_HDR_ERR_VERS, out, 27), -EMSGSIZE);
	CHECK_EQ(rr_hdr_encode_error_buf(X, 2, 1, RR_HDR_ERR_VERS, out, 28), 28);
	CHECK_MEM(out, "\x11\x22\x33\x44\0\0\0\x02\0\0\0\x01\0\0\0\x04"
		  "\0\0\0\x01\0\0\0\x01\0\0\0\x01", 28);
	CHECK_EQ(rr_hdr_encode_error_buf(X, 1, 1, RR_HDR_ERR_CHUNK, out, 28), 20);
	CHECK_EQ(rr_hdr_encode_error_buf(X, 1, 1, 3, out, 28), -EINVAL);
}

/* ---- property: random valid headers ---- */

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint32_t rng_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)(rng_next(s) % n) : 0;
}

static void rand_seg(uint64_t *s, struct rr_hdr_seg *sg, uint32_t maxlen)
{
	sg->handle = (uint32_t)rng_next(s);
	sg->length = rng_below(s, maxlen + 1);
	sg->offset = rng_next(s) & 0x0000ffffffffffffull;
}

struct gen {
	struct rr_hdr d;
	uint32_t payload_len;
	enum rr_hdr_dir dir;
	bool rr;
};

/* Adds @k random Read segments at @pos to @d; returns their total length
 * (at least @min: the first segment grows when they are shorter). */
static uint64_t gen_read_chunk(uint64_t *s, struct rr_hdr *d, uint32_t pos, uint32_t k,
			       uint32_t maxlen, uint64_t min)
{
	struct rr_hdr_seg sg[3];
	uint64_t len = 0;

	for (uint32_t i = 0; i < k; i++) {
		rand_seg(s, &sg[i], maxlen);
		len += sg[i].length;
	}
	if (len < min) {
		sg[0].length += (uint32_t)(min - len);
		len = min;
	}
	for (uint32_t i = 0; i < k; i++)
		REQUIRE_EQ(rr_hdr_add_read(d, pos, &sg[i]), 0);
	return len;
}

/* Random valid header: Read chunks laid out in the unreduced stream so that
 * their positions satisfy RFC 8166 4.4.5 with respect to the reduced Payload
 * stream (inline for RDMA_MSG, the Position-zero chunk for RDMA_NOMSG). */
static void gen_header(uint64_t *s, struct gen *g)
{
	struct rr_hdr_seg sg[4];
	uint32_t k;
	uint64_t reduced, consumed = 0, inline_at = 4;
	struct rr_hdr *d = &g->d;

	g->dir = rng_below(s, 2) ? RR_HDR_DIR_REPLY : RR_HDR_DIR_CALL;
	g->rr = rng_below(s, 2);
	rr_hdr_init(d, (uint32_t)rng_next(s), 0, 0);
	d->credit = rng_below(s, 256);
	d->proc = rng_below(s, 2) ? RR_HDR_NOMSG : RR_HDR_MSG;
	g->payload_len = 4 * (1 + rng_below(s, 16));

	if (d->proc == RR_HDR_NOMSG && (g->dir == RR_HDR_DIR_CALL ||
					(g->rr && rng_below(s, 2))))
		/* Position-zero chunk carrying the Payload stream */
		reduced = gen_read_chunk(s, d, 0, 1 + rng_below(s, 3), 4096, 4);
	else
		reduced = g->payload_len;
	/* data-item Read chunks (Calls only) */
	if (g->dir == RR_HDR_DIR_CALL) {
		uint32_t nchunks = rng_below(s, 4);

		if (d->proc == RR_HDR_NOMSG)
			inline_at = 0;
		for (uint32_t c = 0; c < nchunks; c++) {
			uint64_t room = reduced - RR_MIN(inline_at, reduced);
			uint32_t pos;

			inline_at += 4 * rng_below(s, (uint32_t)(room / 4) + 1);
			if (inline_at == 0)
				inline_at = 4; /* never Position zero here */
			if (inline_at > reduced)
				break;
			pos = (uint32_t)(inline_at + consumed);
			consumed += (gen_read_chunk(s, d, pos, 1 + rng_below(s, 3), 2000, 0) + 3) &
				    ~3ull;
		}
	}
	/* Write chunks */
	for (uint32_t c = rng_below(s, 4); c > 0; c--) {
		k = rng_below(s, 5);
		REQUIRE_EQ(rr_hdr_add_write(d, NULL, 0), 0);
		for (uint32_t i = 0; i < k; i++) {
			rand_seg(s, &sg[0], 1u << 20);
			REQUIRE_EQ(rr_hdr_add_seg(d, &d->write[d->nwrite - 1], &sg[0]), 0);
		}
	}
	/* Reply chunk: needed by a NOMSG Reply without a Position-zero chunk */
	if (rng_below(s, 2) || (d->proc == RR_HDR_NOMSG &&
				g->dir == RR_HDR_DIR_REPLY && d->nread == 0)) {
		bool carries = d->proc == RR_HDR_NOMSG && g->dir == RR_HDR_DIR_REPLY;

		if (d->proc == RR_HDR_NOMSG && g->dir == RR_HDR_DIR_REPLY && d->nread)
			return; /* both would be ambiguous */
		k = 1 + rng_below(s, 4);
		for (uint32_t i = 0; i < k; i++)
			rand_seg(s, &sg[i], 4096);
		if (carries)
			sg[0].length += 4;
		REQUIRE_EQ(rr_hdr_add_reply(d, sg, k), 0);
	}
}

static void check_chunk_eq(const struct rr_hdr *a, const struct rr_hdr_chunk *ca,
			   const struct rr_hdr *b, const struct rr_hdr_chunk *cb)
{
	CHECK_EQ(ca->position, cb->position);
	CHECK_EQ(ca->length, cb->length);
	REQUIRE_EQ(ca->nsegs, cb->nsegs);
	CHECK(memcmp(&a->segs[ca->first], &b->segs[cb->first],
		     ca->nsegs * sizeof(struct rr_hdr_seg)) == 0);
}

TEST(hdr_property_roundtrip)
{
	static uint8_t buf[8192], out[8192];
	static struct gen g;
	static struct rr_hdr h, h2;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct rr_hdr_limits lim;
	unsigned ok = 0;

	for (int iter = 0; iter < 5000; iter++) {
		struct rr_xdr_enc e;
		size_t hlen, n;

		gen_header(&seed, &g);
		rr_xdr_enc_init(&e, buf, sizeof(buf));
		REQUIRE_EQ(rr_hdr_encode(&e, &g.d), 0);
		hlen = rr_xdr_enc_len(&e);
		REQUIRE_EQ(hlen, rr_hdr_encoded_size(&g.d));
		n = hlen;
		if (g.d.proc == RR_HDR_MSG) {
			rr_put_be32(buf + n, g.d.xid);
			for (uint32_t i = 4; i < g.payload_len; i++)
				buf[n + i] = (uint8_t)rng_next(&seed);
			n += g.payload_len;
		}
		rr_hdr_limits_init(&lim);
		lim.inline_threshold = sizeof(buf);
		lim.reliable_reply = g.rr;
		if (rr_hdr_decode(&h, buf, n, g.dir, &lim) != 0) {
			fprintf(stderr, "  iter %d: %s/%s\n", iter,
				rr_hdr_verdict_str(h.verdict), rr_hdr_reason_str(h.reason));
			REQUIRE(0);
		}
		/* the decoded model equals the built one, chunk by chunk */
		CHECK_EQ(h.xid, g.d.xid);
		CHECK_EQ(h.credit, g.d.credit);
		CHECK_EQ(h.proc, g.d.proc);
		CHECK_EQ(h.hdr_len, hlen);
		CHECK_EQ(h.nsegs, g.d.nsegs);
		REQUIRE_EQ(h.nread, g.d.nread);
		REQUIRE_EQ(h.nwrite, g.d.nwrite);
		REQUIRE_EQ(h.has_reply, g.d.has_reply);
		for (uint32_t c = 0; c < h.nread; c++)
			check_chunk_eq(&h, &h.read[c], &g.d, &g.d.read[c]);
		for (uint32_t c = 0; c < h.nwrite; c++)
			check_chunk_eq(&h, &h.write[c], &g.d, &g.d.write[c]);
		if (h.has_reply)
			check_chunk_eq(&h, &h.reply, &g.d, &g.d.reply);
		/* encode(decode(x)) == x, decode of it equal again */
		rr_xdr_enc_init(&e, out, sizeof(out));
		REQUIRE_EQ(rr_hdr_encode(&e, &h), 0);
		REQUIRE_EQ(rr_xdr_enc_len(&e), hlen);
		REQUIRE(memcmp(out, buf, hlen) == 0);
		memcpy(out + hlen, buf + hlen, n - hlen);
		REQUIRE_EQ(rr_hdr_decode(&h2, out, n, g.dir, &lim), 0);
		CHECK_EQ(h2.nsegs, h.nsegs);
		CHECK(memcmp(h2.segs, h.segs, h.nsegs * sizeof(h.segs[0])) == 0);
		ok++;
	}
	CHECK_EQ(ok, 5000);
}

/* ---- returned chunks ---- */

/* A Reply built from @w (@nw segments, one Write chunk; @nw2 > 0: a second
 * Write chunk of @w's first @nw2 - 1 segments) and @r (@nr segments, a
 * Reply chunk; NULL: none), encoded and decoded into @h. */
static void reply_of(struct rr_hdr *h, const struct rr_hdr_seg *w, uint32_t nw, uint32_t nw2,
		     const struct rr_hdr_seg *r, uint32_t nr, uint32_t proc)
{
	static struct rr_hdr b;
	uint8_t buf[512];
	int n;

	rr_hdr_init(&b, X, 8, proc);
	REQUIRE_EQ(rr_hdr_add_write(&b, w, nw), 0);
	if (nw2)
		REQUIRE_EQ(rr_hdr_add_write(&b, w, nw2 - 1), 0);
	if (r)
		REQUIRE_EQ(rr_hdr_add_reply(&b, r, nr), 0);
	n = rr_hdr_encode_buf(&b, buf, sizeof(buf));
	REQUIRE(n > 0);
	if (proc == RR_HDR_MSG) {
		rr_put_be32(buf + n, X);
		n += 4;
	}
	REQUIRE_EQ(rr_hdr_decode(h, buf, (size_t)n, RR_HDR_DIR_REPLY, NULL), 0);
}

TEST(hdr_check_reply_against_call)
{
	const struct rr_hdr_seg w0[3] = {{0x201, 4096, 0x10000}, {0x202, 4096, 0x20000},
					 {0x203, 4096, 0x30000}};
	const struct rr_hdr_seg r0[2] = {{0x301, 8192, 0x40000}, {0x302, 8192, 0x50000}};
	/* returned: Write chunk with the 2 consumed segments, Reply chunk
	 * with the unconsumed second segment at length 0 (Linux) */
	const struct rr_hdr_seg back_w[2] = {{0x201, 4096, 0x10000}, {0x202, 100, 0x20000}};
	const struct rr_hdr_seg back_r[2] = {{0x301, 300, 0x40000}, {0x302, 0, 0x50000}};
	static struct rr_hdr call, call2, h;
	struct rr_hdr_seg bad[2];

	rr_hdr_init(&call, X, 8, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_write(&call, w0, 3), 0);
	REQUIRE_EQ(rr_hdr_add_reply(&call, r0, 2), 0);
	reply_of(&h, back_w, 2, 0, back_r, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), 0);
	CHECK_EQ(h.verdict, RR_HDR_OK);

	/* a returned length larger than offered */
	memcpy(bad, back_w, sizeof(bad));
	bad[1].length = 4097;
	reply_of(&h, bad, 2, 0, back_r, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), -EPROTO);
	CHECK_EQ(h.verdict, RR_HDR_DISCARD);
	CHECK_EQ(h.reason, RR_HDR_R_WRITE_MISMATCH);
	/* a foreign handle */
	bad[1].length = 100;
	bad[0].handle = 0x999;
	REQUIRE_EQ(rr_hdr_decode(&h, bad, 0, RR_HDR_DIR_REPLY, NULL), -EPROTO);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), -EPROTO); /* already rejected */
	reply_of(&h, bad, 2, 0, back_r, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_WRITE_MISMATCH);
	/* more Write chunks than offered */
	reply_of(&h, back_w, 2, 1, back_r, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_WRITE_MISMATCH);
	/* a Reply chunk that was never offered, or with a changed offset */
	rr_hdr_init(&call2, X, 8, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_write(&call2, w0, 3), 0);
	reply_of(&h, back_w, 2, 0, back_r, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call2), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_REPLY_MISMATCH);
	memcpy(bad, back_r, sizeof(bad));
	bad[0].offset += 8;
	reply_of(&h, back_w, 2, 0, bad, 2, RR_HDR_NOMSG);
	CHECK_EQ(rr_hdr_check_reply(&h, &call), -EPROTO);
	CHECK_EQ(h.reason, RR_HDR_R_REPLY_MISMATCH);
}

TEST(hdr_consume_chunk)
{
	/* Responder: a Call offering a 3 x 4096 Write chunk; a 5000-byte
	 * result fills the first segment and 904 bytes of the second. */
	const struct rr_hdr_seg w0[3] = {{0x201, 4096, 0x10000}, {0x202, 4096, 0x20000},
					 {0x203, 4096, 0x30000}};
	static struct rr_hdr call, h, rh;
	uint8_t buf[256];
	struct rr_hdr_seg out[3];
	int n;

	rr_hdr_init(&call, X, 0, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_write(&call, w0, 3), 0);
	n = rr_hdr_encode_buf(&call, buf, sizeof(buf));
	REQUIRE(n > 0);
	rr_put_be32(buf + n, X);
	REQUIRE_EQ(rr_hdr_decode(&h, buf, (size_t)n + 4, RR_HDR_DIR_CALL, NULL), 0);
	REQUIRE_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 5000, out, 3), 2);
	CHECK_EQ(out[0].handle, 0x201);
	CHECK_EQ(out[0].length, 4096);
	CHECK_EQ(out[1].handle, 0x202);
	CHECK_EQ(out[1].length, 904);
	CHECK(out[1].offset == 0x20000);
	CHECK_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 0, out, 3), 0);
	CHECK_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 3 * 4096, out, 3), 3);
	CHECK_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 3 * 4096 + 1, out, 3), -EMSGSIZE);
	CHECK_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 5000, out, 1), -EMSGSIZE);

	/* the returned chunk passes the requester's check */
	REQUIRE_EQ(rr_hdr_consume_chunk(&h, &h.write[0], 5000, out, 3), 2);
	reply_of(&rh, out, 2, 0, NULL, 0, RR_HDR_MSG);
	CHECK_EQ(rr_hdr_check_reply(&rh, &call), 0);
}
