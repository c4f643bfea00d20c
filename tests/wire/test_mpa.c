/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the MPA layer (RFC 5044, RFC 6581) and CRC32c: RFC 3720 B.4
 * vectors on both CRC paths, Request/Reply frames of revision 1 and 2, every
 * split of a frame, wrong keys, oversized and truncated frames, and the
 * initiator/responder negotiation rules (CRC, markers, revision, IRD/ORD,
 * reject with private data, peer-to-peer). */
#include "test.h"

#include "rdma/soft/crc32c.h"
#include "rdma/soft/mpa.h"

/* ---- CRC32c ---- */

TEST(soft_crc32c_rfc3720_vectors)
{
	uint8_t buf[48];
	static const char *scsi =
		"01 c0 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
		"14 00 00 00 00 00 04 00 00 00 00 14 00 00 00 18"
		"28 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00";

	memset(buf, 0, 32);
	CHECK_EQ(rr_crc32c(buf, 32), 0x8a9136aa);
	memset(buf, 0xff, 32);
	CHECK_EQ(rr_crc32c(buf, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	CHECK_EQ(rr_crc32c(buf, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	CHECK_EQ(rr_crc32c(buf, 32), 0x113fdb5c);
	REQUIRE_EQ(rr_test_hex(scsi, buf, sizeof(buf)), 48);
	CHECK_EQ(rr_crc32c(buf, 48), 0xd9963a56);
	CHECK_EQ(rr_crc32c("123456789", 9), 0xe3069283);
	/* wire order: least significant byte first (iSCSI: aa 36 91 8a) */
	memset(buf, 0, 32);
	rr_crc32c_put(buf + 32, rr_crc32c(buf, 32));
	CHECK_MEM(buf + 32, "\xaa\x36\x91\x8a", 4);
}

TEST(soft_crc32c_hw_matches_sw_every_alignment)
{
	static uint8_t buf[4096 + 16];
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len < 300; len += 7) {
			uint32_t a = rr_crc32c_update(RR_CRC32C_INIT, buf + off, len);
			uint32_t b = rr_crc32c_update_sw(RR_CRC32C_INIT, buf + off, len);

			CHECK_EQ(a, b);
		}
	/* incremental == one shot */
	{
		uint32_t c = RR_CRC32C_INIT;

		for (size_t i = 0; i < 4096; i += 13)
			c = rr_crc32c_update(c, buf + i, RR_MIN((size_t)13, 4096 - i));
		CHECK_EQ(c, rr_crc32c_update_sw(RR_CRC32C_INIT, buf, 4096));
	}
	printf("  crc32c path: %s\n", rr_crc32c_hw() ? "sse4.2" : "table");
}

/* ---- MPA frames ---- */

static size_t enc(const struct rr_mpa_frame *f, uint8_t *out)
{
	int n = rr_mpa_encode(f, out, RR_MPA_HDR_LEN + RR_MPA_PD_MAX);

	REQUIRE(n > 0);
	return (size_t)n;
}

/* Feeds @len bytes in chunks of @chunk; returns the parser result. */
static int parse(struct rr_mpa_parser *p, bool reply, const uint8_t *b, size_t len, size_t chunk,
		 size_t *consumed)
{
	int r = 0;
	size_t off = 0;

	rr_mpa_parser_init(p, reply);
	while (off < len) {
		size_t used;

		r = rr_mpa_feed(p, b + off, RR_MIN(chunk, len - off), &used);
		off += used;
		if (r)
			break;
	}
	*consumed = off;
	return r;
}

TEST(mpa_request_rev2_bytes)
{
	struct rr_mpa_cfg cfg = {.rev = 2, .crc = false, .ird = 16, .ord = 16};
	struct rr_mpa_frame f;
	uint8_t buf[600], want[40];
	size_t n;

	REQUIRE_EQ(rr_mpa_make_request(&cfg, "\xf6\xab\x0e\x18\x01\x00\x03\x03", 8, &f), 0);
	n = enc(&f, buf);
	REQUIRE_EQ(n, 32);
	REQUIRE_EQ(rr_test_hex("4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65"
			       "10 02 00 0c 00 10 00 10 f6 ab 0e 18 01 00 03 03",
			       want, sizeof(want)), 32);
	CHECK_MEM(buf, want, 32);
}

TEST(mpa_frame_roundtrip_every_split)
{
	struct rr_mpa_cfg cfg = {.rev = 2, .crc = true, .ird = 7, .ord = 9};
	struct rr_mpa_frame f, g;
	struct rr_mpa_parser p;
	uint8_t buf[600], pd[252];

	for (size_t i = 0; i < sizeof(pd); i++)
		pd[i] = (uint8_t)(i * 7);
	for (size_t pdl = 0; pdl <= 252; pdl += 63) {
		size_t n, used;

		REQUIRE_EQ(rr_mpa_make_request(&cfg, pd, pdl, &f), 0);
		n = enc(&f, buf);
		/* trailing FPDU bytes must not be consumed */
		memset(buf + n, 0x55, 8);
		for (size_t chunk = 1; chunk <= n + 8; chunk++) {
			int r = parse(&p, false, buf, n + 8, chunk, &used);

			REQUIRE_EQ(r, 1);
			CHECK_EQ(used, n);
			REQUIRE_EQ(rr_mpa_parser_frame(&p, &g), 0);
			CHECK(g.enhanced);
			CHECK_EQ(g.rev, 2);
			CHECK_EQ(g.ird, 7);
			CHECK_EQ(g.ord, 9);
			CHECK(g.flags & RR_MPA_F_CRC);
			REQUIRE_EQ(g.pd_len, pdl);
			CHECK_MEM(g.pd, pd, pdl);
		}
	}
}

TEST(mpa_bad_key_found_at_first_wrong_byte)
{
	struct rr_mpa_parser p;
	uint8_t buf[40];
	size_t used;

	memcpy(buf, "MPA ID Req Frame\x00\x01\x00\x00", 20);
	/* expecting a reply: "Req" and "Rep" differ at byte 9 */
	CHECK_EQ(parse(&p, true, buf, 20, 1, &used), -EPROTO);
	CHECK_EQ(used, 10);
	memcpy(buf, "GET / HTTP/1.1\r\n", 16);
	CHECK_EQ(parse(&p, false, buf, 16, 1, &used), -EPROTO);
	CHECK_EQ(used, 1);
	/* sticky */
	CHECK_EQ(rr_mpa_advance(&p, 1), -EPROTO);
}

TEST(mpa_oversized_and_truncated)
{
	struct rr_mpa_parser p;
	struct rr_mpa_frame f;
	uint8_t buf[40];
	size_t used;

	memcpy(buf, "MPA ID Req Frame\x10\x02\x02\x01", 20); /* pd 513 */
	CHECK_EQ(parse(&p, false, buf, 20, 3, &used), -EMSGSIZE);
	memcpy(buf, "MPA ID Req Frame\x10\x02\x02\x00", 20); /* pd 512: fine, truncated */
	CHECK_EQ(parse(&p, false, buf, 20, 20, &used), 0);
	CHECK_EQ(rr_mpa_parser_frame(&p, &f), -EAGAIN);
	/* E set with PD_Length 2: no room for the IRD/ORD block */
	memcpy(buf, "MPA ID Req Frame\x10\x02\x00\x02\x00\x10", 22);
	CHECK_EQ(parse(&p, false, buf, 22, 22, &used), 1);
	CHECK_EQ(rr_mpa_parser_frame(&p, &f), -EPROTO);
	/* encode refuses more than 512 bytes of private data */
	memset(&f, 0, sizeof(f));
	f.enhanced = true;
	f.rev = 2;
	f.pd_len = 510;
	CHECK_EQ(rr_mpa_encode(&f, (uint8_t[600]){0}, 600), -EMSGSIZE);
}

TEST(mpa_make_request_limits)
{
	struct rr_mpa_cfg cfg = {.rev = 2, .ird = 0, .ord = 4};
	struct rr_mpa_frame f;
	uint8_t pd[253] = {0};

	CHECK_EQ(rr_mpa_make_request(&cfg, NULL, 0, &f), -EINVAL); /* IRD 0 */
	cfg.ird = 4;
	cfg.ord = 0;
	CHECK_EQ(rr_mpa_make_request(&cfg, NULL, 0, &f), -EINVAL);
	cfg.ord = 0x4000;
	CHECK_EQ(rr_mpa_make_request(&cfg, NULL, 0, &f), -EINVAL);
	cfg.ord = 4;
	CHECK_EQ(rr_mpa_make_request(&cfg, pd, 253, &f), -EINVAL);
	CHECK_EQ(rr_mpa_make_request(&cfg, pd, 252, &f), 0);
	CHECK(!(f.ird & RR_MPA_IRD_P2P)); /* never peer-to-peer */
	cfg.rev = 3;
	CHECK_EQ(rr_mpa_make_request(&cfg, NULL, 0, &f), -EINVAL);
}

/* Runs a whole exchange through bytes: request -> responder -> reply -> initiator. */
static int exchange(const struct rr_mpa_cfg *ini, const struct rr_mpa_cfg *resp,
		    struct rr_mpa_conn *ci, struct rr_mpa_conn *cr, int *resp_rc)
{
	struct rr_mpa_frame req, rep, got;
	struct rr_mpa_parser p;
	struct rr_term term;
	uint8_t buf[600];
	size_t n, used;
	int rc;

	REQUIRE_EQ(rr_mpa_make_request(ini, "hi", 2, &req), 0);
	n = enc(&req, buf);
	REQUIRE_EQ(parse(&p, false, buf, n, 5, &used), 1);
	REQUIRE_EQ(rr_mpa_parser_frame(&p, &got), 0);
	*resp_rc = rr_mpa_responder_check(resp, &got, cr);
	REQUIRE_EQ(rr_mpa_make_reply(cr, *resp_rc != 0, "yo", 2, &rep), 0);
	n = enc(&rep, buf);
	REQUIRE_EQ(parse(&p, true, buf, n, 3, &used), 1);
	REQUIRE_EQ(rr_mpa_parser_frame(&p, &got), 0);
	CHECK_EQ(got.pd_len, 2);
	CHECK_MEM(got.pd, "yo", 2);
	rc = rr_mpa_initiator_check(ini, &got, ci, &term);
	return rc;
}

TEST(mpa_negotiate_crc_matrix)
{
	for (int a = 0; a < 2; a++)
		for (int b = 0; b < 2; b++) {
			struct rr_mpa_cfg ini = {.rev = 2, .crc = a, .ird = 8, .ord = 8};
			struct rr_mpa_cfg resp = {.rev = 2, .crc = b, .ird = 8, .ord = 8};
			struct rr_mpa_conn ci, cr;
			int rrc;

			REQUIRE_EQ(exchange(&ini, &resp, &ci, &cr, &rrc), 0);
			CHECK_EQ(rrc, 0);
			CHECK_EQ(ci.crc, a || b);
			CHECK_EQ(cr.crc, a || b);
			CHECK(ci.enhanced && cr.enhanced);
		}
}

TEST(mpa_negotiate_ird_ord)
{
	struct rr_mpa_cfg ini = {.rev = 2, .ird = 4, .ord = 32};
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 128, .ord = 2};
	struct rr_mpa_conn ci, cr;
	int rrc;

	REQUIRE_EQ(exchange(&ini, &resp, &ci, &cr, &rrc), 0);
	CHECK_EQ(cr.ird, 32); /* responder accepts as many reads as the initiator issues */
	CHECK_EQ(cr.ord, 2);  /* min(own 2, initiator IRD 4) */
	CHECK_EQ(ci.ord, 32); /* responder IRD 32 */
	CHECK_EQ(ci.ird, 4);
	/* responder ORD above our IRD: insufficient IRD terminate */
	{
		struct rr_mpa_frame rep;
		struct rr_mpa_conn c = {.rev = 2, .enhanced = true, .ird = 8, .ord = 9};
		struct rr_term t;

		REQUIRE_EQ(rr_mpa_make_reply(&c, false, NULL, 0, &rep), 0);
		CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &ci, &t), -ENOBUFS);
		CHECK_EQ(t.layer, RR_TL_LLP);
		CHECK_EQ(t.ecode, RR_LLP_EC_INSUFFICIENT_IRD);
	}
}

TEST(mpa_responder_accepts_rev1)
{
	struct rr_mpa_cfg ini = {.rev = 1, .ird = 4, .ord = 4};
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 16, .ord = 16};
	struct rr_mpa_conn ci, cr;
	struct rr_mpa_frame req, rep;
	uint8_t buf[64];
	int rrc;

	REQUIRE_EQ(exchange(&ini, &resp, &ci, &cr, &rrc), 0);
	CHECK_EQ(rrc, 0);
	CHECK_EQ(cr.rev, 1);
	CHECK(!cr.enhanced);
	CHECK_EQ(ci.rev, 1);
	/* the reply carries no IRD/ORD block: PD_Length is the ULP's alone */
	REQUIRE_EQ(rr_mpa_make_request(&ini, NULL, 0, &req), 0);
	CHECK_EQ(enc(&req, buf), 20);
	CHECK_EQ(buf[17], 1);
	REQUIRE_EQ(rr_mpa_make_reply(&cr, false, "ab", 2, &rep), 0);
	CHECK_EQ(enc(&rep, buf), 22);
	CHECK_EQ(buf[16] & RR_MPA_F_ENHANCED, 0);
	CHECK_EQ(rr_get_be16(buf + 18), 2);
}

TEST(mpa_rev2_without_e_and_bad_revisions)
{
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 16, .ord = 16};
	struct rr_mpa_frame req;
	struct rr_mpa_conn c;

	memset(&req, 0, sizeof(req));
	req.rev = 2; /* no E: no block, no IRD/ORD negotiation */
	CHECK_EQ(rr_mpa_responder_check(&resp, &req, &c), 0);
	CHECK(!c.enhanced);
	CHECK_EQ(c.rev, 2);
	req.rev = 3;
	CHECK_EQ(rr_mpa_responder_check(&resp, &req, &c), -EPROTONOSUPPORT);
	req.rev = 0;
	CHECK_EQ(rr_mpa_responder_check(&resp, &req, &c), -EPROTONOSUPPORT);
	req.rev = 2;
	req.reply = true;
	CHECK_EQ(rr_mpa_responder_check(&resp, &req, &c), -EPROTO);
}

TEST(mpa_markers_rejected)
{
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 16, .ord = 16};
	struct rr_mpa_cfg ini = {.rev = 2, .ird = 16, .ord = 16};
	struct rr_mpa_frame req, rep;
	struct rr_mpa_conn c;
	struct rr_term t;
	uint8_t buf[64];

	REQUIRE_EQ(rr_mpa_make_request(&ini, NULL, 0, &req), 0);
	req.flags |= RR_MPA_F_MARKERS;
	CHECK_EQ(rr_mpa_responder_check(&resp, &req, &c), -EPROTO);
	/* the reject goes out with R set and M clear */
	REQUIRE_EQ(rr_mpa_make_reply(&c, true, NULL, 0, &rep), 0);
	enc(&rep, buf);
	CHECK(buf[16] & RR_MPA_F_REJECT);
	CHECK(!(buf[16] & RR_MPA_F_MARKERS));
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -ECONNREFUSED);
	/* a reply demanding markers fails the connection */
	c = (struct rr_mpa_conn){.rev = 2, .enhanced = true, .ird = 1, .ord = 1};
	REQUIRE_EQ(rr_mpa_make_reply(&c, false, NULL, 0, &rep), 0);
	rep.flags |= RR_MPA_F_MARKERS;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -EPROTO);
}

TEST(mpa_reject_carries_private_data)
{
	struct rr_mpa_cfg ini = {.rev = 2, .ird = 2, .ord = 2};
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 2, .ord = 2};
	struct rr_mpa_conn ci, cr;
	struct rr_mpa_frame req, rep, got;
	struct rr_mpa_parser p;
	struct rr_term t;
	uint8_t buf[600];
	size_t n, used;

	REQUIRE_EQ(rr_mpa_make_request(&ini, NULL, 0, &req), 0);
	REQUIRE_EQ(rr_mpa_responder_check(&resp, &req, &cr), 0);
	REQUIRE_EQ(rr_mpa_make_reply(&cr, true, "no thanks", 9, &rep), 0);
	n = enc(&rep, buf);
	REQUIRE_EQ(parse(&p, true, buf, n, 1, &used), 1);
	REQUIRE_EQ(rr_mpa_parser_frame(&p, &got), 0);
	CHECK_EQ(rr_mpa_initiator_check(&ini, &got, &ci, &t), -ECONNREFUSED);
	REQUIRE_EQ(got.pd_len, 9);
	CHECK_MEM(got.pd, "no thanks", 9);
}

TEST(mpa_initiator_rules)
{
	struct rr_mpa_cfg ini = {.rev = 2, .crc = true, .ird = 2, .ord = 2};
	struct rr_mpa_conn c = {.rev = 2, .enhanced = true, .crc = true, .ird = 2, .ord = 2};
	struct rr_mpa_frame rep;
	struct rr_term t;

	REQUIRE_EQ(rr_mpa_make_reply(&c, false, NULL, 0, &rep), 0);
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), 0);
	/* we asked for CRC, the reply drops it */
	rep.flags &= (uint8_t)~RR_MPA_F_CRC;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -EPROTO);
	ini.crc = false; /* we did not ask: the responder's choice stands */
	rep.flags |= RR_MPA_F_CRC;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), 0);
	CHECK(c.crc);
	/* revision 2 initiator, revision 1 reply (siw refuses it) */
	rep.rev = 1;
	rep.enhanced = false;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -EPROTO);
	/* revision 2 reply without E */
	rep.rev = 2;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -EPROTO);
	/* a Request key where a Reply was expected */
	rep.enhanced = true;
	rep.reply = false;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), -EPROTO);
	/* Linux server: IRD 0 / ORD 16 reply, we offered IRD 16 */
	ini.ird = 16;
	ini.ord = 8;
	rep.reply = true;
	rep.ird = 0;
	rep.ord = 16;
	CHECK_EQ(rr_mpa_initiator_check(&ini, &rep, &c, &t), 0);
	CHECK_EQ(c.ord, 0);
	CHECK_EQ(c.ird, 16);
}

TEST(mpa_peer_to_peer_as_siw)
{
	struct rr_mpa_cfg resp = {.rev = 2, .ird = 16, .ord = 16};
	struct rr_mpa_frame req, rep;
	struct rr_mpa_conn c;

	memset(&req, 0, sizeof(req));
	req.rev = 2;
	req.enhanced = true;
	req.ird = RR_MPA_IRD_P2P | 4;
	req.ord = RR_MPA_ORD_READ_RTR | 4;
	REQUIRE_EQ(rr_mpa_responder_check(&resp, &req, &c), 0);
	CHECK(c.p2p);
	CHECK_EQ(c.rtr, RR_MPA_ORD_READ_RTR);
	REQUIRE_EQ(rr_mpa_make_reply(&c, false, NULL, 0, &rep), 0);
	CHECK_EQ(rep.ird, RR_MPA_IRD_P2P | 4);
	CHECK_EQ(rep.ord, RR_MPA_ORD_READ_RTR | 4);
	req.ord = 4; /* no RTR offered: Write RTR proposed */
	REQUIRE_EQ(rr_mpa_responder_check(&resp, &req, &c), 0);
	CHECK_EQ(c.rtr, RR_MPA_ORD_WRITE_RTR);
}
