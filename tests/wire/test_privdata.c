/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the connection private data (RFC 8797 block + the project's
 * extension block) and of the negotiation: vectors (Linux client and server
 * blocks, MPA IRD/ORD prefix, odd alignments), a table of malformed inputs each
 * with its outcome, size rounding, every truncation, and a negotiation matrix
 * over R, extensions, roles and asymmetric sizes. Parsed inputs are copied to
 * exact-size heap buffers so that ASan catches any read past the end. */
#include <stdlib.h>

#include "proto/conn/privdata.h"
#include "test.h"

/* Parses @n bytes of @src from a heap copy of exactly @n bytes. */
static struct rr_pd_info parse_exact(const uint8_t *src, size_t n)
{
	struct rr_pd_info info;
	uint8_t *copy = malloc(n ? n : 1);

	if (!copy)
		rr_test_abort();
	if (n)
		memcpy(copy, src, n);
	memset(&info, 0x5a, sizeof(info));
	if (rr_pd_parse(n ? copy : NULL, n, &info) != 0)
		rr_test_fail(__FILE__, __LINE__, "rr_pd_parse failed", true);
	free(copy);
	return info;
}

static struct rr_pd_info parse_hex(const char *hex)
{
	uint8_t buf[512];
	size_t n = rr_test_hex(hex, buf, sizeof(buf));

	return parse_exact(buf, n);
}

static void check_defaults(const struct rr_pd_info *i)
{
	CHECK(!i->remote_inv);
	CHECK_EQ(i->send_size, 1024);
	CHECK_EQ(i->recv_size, 1024);
	CHECK_EQ(i->ext_caps, 0);
	CHECK_EQ(i->ext_status, RR_PD_EXT_NO_BASE);
}

#define EXT_V1_CAPS(c) "ac3a363d 01 0c 0000 " c

/* ---- vectors ---- */

TEST(pd_linux_client_block)
{
	struct rr_pd_info i = parse_hex("f6ab0e18 01 01 03 03");

	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.offset, 0);
	CHECK(i.remote_inv);
	CHECK_EQ(i.flags, 0x01);
	CHECK_EQ(i.send_size, 4096);
	CHECK_EQ(i.recv_size, 4096);
	CHECK_EQ(i.ext_status, RR_PD_EXT_NONE);
	CHECK_EQ(i.ext_caps, 0);
}

TEST(pd_linux_server_block)
{
	struct rr_pd_info i = parse_hex("f6ab0e18 01 00 03 03");

	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK(!i.remote_inv);
	CHECK_EQ(i.send_size, 4096);
	CHECK_EQ(i.recv_size, 4096);
	CHECK_EQ(i.ext_status, RR_PD_EXT_NONE);
}

TEST(pd_rfc8797_size_examples)
{
	/* RFC 8797 section 4.2: encoded e means (e + 1) * 1024; 1024..262144. */
	struct rr_pd_info i = parse_hex("f6ab0e18 01 00 00 ff");

	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.send_size, 1024);
	CHECK_EQ(i.recv_size, 262144);
	i = parse_hex("f6ab0e18 01 01 3f 0f");
	CHECK_EQ(i.send_size, 65536);
	CHECK_EQ(i.recv_size, 16384);
}

TEST(pd_mpa_ird_ord_prefix)
{
	/* MPA v2 (RFC 6581) puts IRD/ORD in front: Linux's IRD 0, ORD 16. */
	struct rr_pd_info i = parse_hex("0000 0010 f6ab0e18 01 00 03 03");

	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.offset, 4);
	CHECK(!i.remote_inv);
	CHECK_EQ(i.send_size, 4096);
	i = parse_hex("8010 4020 f6ab0e18 01 01 07 01" EXT_V1_CAPS("00000001"));
	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.offset, 4);
	CHECK(i.remote_inv);
	CHECK_EQ(i.send_size, 8192);
	CHECK_EQ(i.recv_size, 2048);
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RELIABLE_REPLY);
}

TEST(pd_magic_at_every_alignment)
{
	static const uint8_t blk[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 1, 0x0f, 0x1f};
	uint8_t buf[64];

	for (size_t off = 0; off <= 40; off++) {
		struct rr_pd_info i;

		memset(buf, 0x77, sizeof(buf));
		memcpy(buf + off, blk, sizeof(blk));
		/* exactly ends with the block, then with trailing bytes */
		i = parse_exact(buf, off + 8);
		CHECK_EQ(i.status, RR_PD_PRESENT);
		CHECK_EQ(i.offset, off);
		CHECK_EQ(i.send_size, 16384);
		CHECK_EQ(i.recv_size, 32768);
		CHECK_EQ(i.ext_status, RR_PD_EXT_NONE);
		i = parse_exact(buf, off + 8 + 5);
		CHECK_EQ(i.status, RR_PD_PRESENT);
		CHECK_EQ(i.offset, off);
		CHECK_EQ(i.ext_status, RR_PD_EXT_FOREIGN);
		/* one byte short: the identifier is there, the block is not */
		i = parse_exact(buf, off + 7);
		CHECK_EQ(i.status, RR_PD_ABSENT_TRUNCATED);
		check_defaults(&i);
	}
}

TEST(pd_every_truncation_of_full_block)
{
	uint8_t full[RR_PD_MAX_LEN];
	struct rr_pd_local l = {8192, 4096, true, RR_PD_EXT_CAPS_KNOWN};

	REQUIRE_EQ(rr_pd_encode(&l, full, sizeof(full)), 20);
	for (size_t n = 0; n <= sizeof(full); n++) {
		struct rr_pd_info i = parse_exact(full, n);

		if (n == 0) {
			CHECK_EQ(i.status, RR_PD_ABSENT_EMPTY);
			check_defaults(&i);
		} else if (n < 4) {
			CHECK_EQ(i.status, RR_PD_ABSENT_NO_MAGIC);
			check_defaults(&i);
		} else if (n < 8) {
			CHECK_EQ(i.status, RR_PD_ABSENT_TRUNCATED);
			check_defaults(&i);
		} else {
			CHECK_EQ(i.status, RR_PD_PRESENT);
			CHECK(i.remote_inv);
			CHECK_EQ(i.send_size, 8192);
			CHECK_EQ(i.recv_size, 4096);
			if (n == 8)
				CHECK_EQ(i.ext_status, RR_PD_EXT_NONE);
			else if (n < 12)
				CHECK_EQ(i.ext_status, RR_PD_EXT_FOREIGN);
			else if (n < 20)
				CHECK_EQ(i.ext_status, RR_PD_EXT_TRUNCATED);
			else
				CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
			CHECK_EQ(i.ext_caps, n == 20 ? RR_PD_EXT_CAPS_KNOWN : 0);
		}
	}
}

TEST(pd_extension_vectors)
{
	struct rr_pd_info i;

	i = parse_hex("f6ab0e18 01 01 03 03" EXT_V1_CAPS("00000003"));
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_version, 1);
	CHECK_EQ(i.ext_len, 12);
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RELIABLE_REPLY | RR_PD_EXT_CAP_RDMA_COMMIT);
	i = parse_hex("f6ab0e18 01 01 03 03" EXT_V1_CAPS("00000002"));
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RDMA_COMMIT);
	i = parse_hex("f6ab0e18 01 01 03 03" EXT_V1_CAPS("00000000"));
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_caps, 0);
	/* a longer version-1 block (future trailing fields) is fine */
	i = parse_hex("f6ab0e18 01 01 03 03 ac3a363d 01 14 0000 00000001 "
		      "deadbeef cafef00d");
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_len, 20);
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RELIABLE_REPLY);
	/* reserved octets set by a sender: ignored */
	i = parse_hex("f6ab0e18 01 01 03 03 ac3a363d 01 0c ffff 00000001");
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RELIABLE_REPLY);
	/* bytes after our extension block are tolerated */
	i = parse_hex("f6ab0e18 01 01 03 03" EXT_V1_CAPS("00000001") "01020304");
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
}

TEST(pd_ib_cm_zero_padded_56_bytes)
{
	/* RDMA CM on InfiniBand hands the passive side the whole 56-octet REQ
	 * private data area, zero-padded after what the requester wrote. */
	uint8_t buf[56];
	struct rr_pd_local l = {4096, 8192, true, RR_PD_EXT_CAP_RELIABLE_REPLY};
	struct rr_pd_info i;

	memset(buf, 0, sizeof(buf));
	REQUIRE_EQ(rr_pd_encode(&l, buf, sizeof(buf)), 20);
	i = parse_exact(buf, sizeof(buf));
	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.ext_status, RR_PD_EXT_PRESENT);
	CHECK_EQ(i.ext_caps, RR_PD_EXT_CAP_RELIABLE_REPLY);
	CHECK_EQ(i.recv_size, 8192);
	memset(buf, 0, sizeof(buf));
	l.ext_caps = 0;
	REQUIRE_EQ(rr_pd_encode(&l, buf, sizeof(buf)), 8);
	i = parse_exact(buf, sizeof(buf));
	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.ext_status, RR_PD_EXT_FOREIGN);
	CHECK_EQ(i.ext_caps, 0);
}

/* ---- encoder ---- */

TEST(pd_encode_linux_equivalents)
{
	uint8_t buf[32], exp[32];
	struct rr_pd_local cl = {4096, 4096, true, 0};
	struct rr_pd_local sv = {4096, 4096, false, 0};
	size_t n;

	memset(buf, 0xee, sizeof(buf));
	REQUIRE_EQ(rr_pd_encode(&cl, buf, sizeof(buf)), 8);
	n = rr_test_hex("f6ab0e18 01 01 03 03", exp, sizeof(exp));
	CHECK_MEM(buf, exp, n);
	CHECK_EQ(buf[8], 0xee); /* nothing written past the block */
	REQUIRE_EQ(rr_pd_encode(&sv, buf, sizeof(buf)), 8);
	n = rr_test_hex("f6ab0e18 01 00 03 03", exp, sizeof(exp));
	CHECK_MEM(buf, exp, n);
}

TEST(pd_encode_extension_exact_bytes)
{
	uint8_t buf[RR_PD_MAX_LEN], exp[RR_PD_MAX_LEN];
	struct rr_pd_local l = {65536, 262144, false, RR_PD_EXT_CAP_RELIABLE_REPLY};
	size_t n;

	REQUIRE_EQ(rr_pd_encode(&l, buf, sizeof(buf)), 20);
	n = rr_test_hex("f6ab0e18 01 00 3f ff  ac3a363d 01 0c 00 00 00000001", exp,
			sizeof(exp));
	REQUIRE_EQ(n, 20);
	CHECK_MEM(buf, exp, n);
	l.ext_caps = RR_PD_EXT_CAPS_KNOWN;
	REQUIRE_EQ(rr_pd_encode(&l, buf, sizeof(buf)), 20);
	CHECK_EQ(rr_get_be32(buf + 16), 3);
	CHECK(RR_PD_MAX_LEN <= 56); /* RDMA CM REQ private data on IB */
}

TEST(pd_encode_errors)
{
	uint8_t buf[RR_PD_MAX_LEN];
	struct rr_pd_local l = {4096, 4096, true, RR_PD_EXT_CAP_RDMA_COMMIT};

	memset(buf, 0xee, sizeof(buf));
	CHECK_EQ(rr_pd_encode(&l, buf, 19), -EMSGSIZE);
	CHECK_EQ(buf[0], 0xee);
	CHECK_EQ(rr_pd_encode(&l, NULL, 20), -EMSGSIZE);
	l.ext_caps = 0;
	CHECK_EQ(rr_pd_encode(&l, buf, 7), -EMSGSIZE);
	CHECK_EQ(rr_pd_encode(&l, buf, 8), 8);
	l.ext_caps = 0x4;
	CHECK_EQ(rr_pd_encode(&l, buf, sizeof(buf)), -EINVAL);
	l.ext_caps = 0;
	l.send_size = 1023;
	CHECK_EQ(rr_pd_encode(&l, buf, sizeof(buf)), -EINVAL);
	l.send_size = 1024;
	l.recv_size = 0;
	CHECK_EQ(rr_pd_encode(&l, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(rr_pd_encode(NULL, buf, sizeof(buf)), -EINVAL);
}

TEST(pd_size_rounds_down_never_up)
{
	static const struct { uint32_t in, out; } v[] = {
		{0, 0},         {1, 0},           {1023, 0},       {1024, 1024},
		{1025, 1024},   {2047, 1024},     {2048, 2048},    {4095, 3072},
		{4096, 4096},   {5000, 4096},     {65535, 64512},  {65536, 65536},
		{262143, 261120}, {262144, 262144}, {262145, 262144},
		{1048576, 262144}, {UINT32_MAX, 262144},
	};

	for (size_t k = 0; k < RR_ARRAY_SIZE(v); k++) {
		uint8_t code = 0xaa;
		int rc = rr_pd_size_encode(v[k].in, &code);

		CHECK_EQ(rr_pd_size_round(v[k].in), v[k].out);
		if (v[k].out == 0) {
			CHECK_EQ(rc, -EINVAL);
			CHECK_EQ(code, 0xaa);
		} else {
			CHECK_EQ(rc, 0);
			CHECK_EQ(rr_pd_size_decode(code), v[k].out);
			CHECK(rr_pd_size_decode(code) <= v[k].in);
		}
	}
	for (unsigned c = 0; c < 256; c++) {
		uint8_t code;

		REQUIRE_EQ(rr_pd_size_encode(rr_pd_size_decode((uint8_t)c), &code), 0);
		CHECK_EQ(code, c);
	}
}

TEST(pd_roundtrip_all_fields)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (int k = 0; k < 2000; k++) {
		struct rr_pd_local l;
		struct rr_pd_info i;
		uint8_t buf[RR_PD_MAX_LEN];
		int n;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		l.send_size = 1024 + (uint32_t)(x % 300000);
		l.recv_size = 1024 + (uint32_t)((x >> 20) % 300000);
		l.remote_inv = (x >> 40) & 1;
		l.ext_caps = (uint32_t)(x >> 41) & RR_PD_EXT_CAPS_KNOWN;
		n = rr_pd_encode(&l, buf, sizeof(buf));
		REQUIRE(n == 8 || n == 20);
		i = parse_exact(buf, (size_t)n);
		REQUIRE_EQ(i.status, RR_PD_PRESENT);
		CHECK_EQ(i.send_size, rr_pd_size_round(l.send_size));
		CHECK_EQ(i.recv_size, rr_pd_size_round(l.recv_size));
		CHECK_EQ(i.remote_inv, l.remote_inv);
		CHECK_EQ(i.ext_status, l.ext_caps ? RR_PD_EXT_PRESENT : RR_PD_EXT_NONE);
		CHECK_EQ(i.ext_caps, l.ext_caps);
	}
}

/* ---- malformed inputs: each with its outcome ---- */

struct bad_case {
	const char *name;
	const char *hex;
	enum rr_pd_status status;
	enum rr_pd_ext_status ext;
	uint32_t send, recv; /* decoded (defaults when absent) */
	uint32_t caps;
};

static const struct bad_case bad_cases[] = {
	{"empty", "", RR_PD_ABSENT_EMPTY, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"one byte", "f6", RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"three magic bytes", "f6ab0e", RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"byte-swapped magic", "180eabf6 01 01 03 03", RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"magic only", "f6ab0e18", RR_PD_ABSENT_TRUNCATED, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"seven bytes", "f6ab0e18 01 01 03", RR_PD_ABSENT_TRUNCATED, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"version 0", "f6ab0e18 00 01 03 03", RR_PD_ABSENT_BAD_VERSION, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"version 2", "f6ab0e18 02 01 03 03", RR_PD_ABSENT_BAD_VERSION, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"version 255", "f6ab0e18 ff 01 03 03" EXT_V1_CAPS("00000003"), RR_PD_ABSENT_BAD_VERSION, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"bad version then good block", "f6ab0e18 02 01 03 03 f6ab0e18 01 00 07 07", RR_PD_PRESENT, RR_PD_EXT_NONE, 8192, 8192, 0},
	{"magic inside prefix, real block after", "f6ab 0e18 f6ab0e18 01 00 01 01", RR_PD_PRESENT, RR_PD_EXT_NONE, 2048, 2048, 0},
	{"truncated duplicate after good block", "f6ab0e18 01 00 03 03 f6ab0e18", RR_PD_PRESENT, RR_PD_EXT_FOREIGN, 4096, 4096, 0},
	{"extension without RFC 8797 block", EXT_V1_CAPS("00000003"), RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"extension not adjacent", "f6ab0e18 01 01 03 03 00000000" EXT_V1_CAPS("00000003"), RR_PD_PRESENT, RR_PD_EXT_FOREIGN, 4096, 4096, 0},
	{"extension id only", "f6ab0e18 01 01 03 03 ac3a363d", RR_PD_PRESENT, RR_PD_EXT_TRUNCATED, 4096, 4096, 0},
	{"extension id + version", "f6ab0e18 01 01 03 03 ac3a363d 01", RR_PD_PRESENT, RR_PD_EXT_TRUNCATED, 4096, 4096, 0},
	{"extension 11 bytes", "f6ab0e18 01 01 03 03 ac3a363d 01 0c 0000 000000", RR_PD_PRESENT, RR_PD_EXT_TRUNCATED, 4096, 4096, 0},
	{"extension Length past end", "f6ab0e18 01 01 03 03 ac3a363d 01 10 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_TRUNCATED, 4096, 4096, 0},
	{"extension Length 255", "f6ab0e18 01 01 03 03 ac3a363d 01 ff 0000 00000003 00000000", RR_PD_PRESENT, RR_PD_EXT_TRUNCATED, 4096, 4096, 0},
	{"extension Length 0", "f6ab0e18 01 01 03 03 ac3a363d 01 00 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_BAD_LENGTH, 4096, 4096, 0},
	{"extension Length 11", "f6ab0e18 01 01 03 03 ac3a363d 01 0b 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_BAD_LENGTH, 4096, 4096, 0},
	{"extension version 0", "f6ab0e18 01 01 03 03 ac3a363d 00 0c 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_BAD_VERSION, 4096, 4096, 0},
	{"extension version 2", "f6ab0e18 01 01 03 03 ac3a363d 02 0c 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_BAD_VERSION, 4096, 4096, 0},
	{"extension version 2 short", "f6ab0e18 01 01 03 03 ac3a363d 02 08", RR_PD_PRESENT, RR_PD_EXT_BAD_VERSION, 4096, 4096, 0},
	{"extension unknown flags only", "f6ab0e18 01 01 03 03" EXT_V1_CAPS("fffffffc"), RR_PD_PRESENT, RR_PD_EXT_PRESENT, 4096, 4096, 0},
	{"extension unknown + known flags", "f6ab0e18 01 01 03 03" EXT_V1_CAPS("80000001"), RR_PD_PRESENT, RR_PD_EXT_PRESENT, 4096, 4096, 1},
	{"extension byte-swapped id", "f6ab0e18 01 01 03 03 3d363aac 01 0c 0000 00000003", RR_PD_PRESENT, RR_PD_EXT_FOREIGN, 4096, 4096, 0},
	{"reserved flag bits set, R clear", "f6ab0e18 01 fe 03 03", RR_PD_PRESENT, RR_PD_EXT_NONE, 4096, 4096, 0},
	{"all zero", "00000000 00000000 00000000", RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
	{"all ff", "ffffffff ffffffff", RR_PD_ABSENT_NO_MAGIC, RR_PD_EXT_NO_BASE, 1024, 1024, 0},
};

TEST(pd_malformed_table)
{
	for (size_t k = 0; k < RR_ARRAY_SIZE(bad_cases); k++) {
		const struct bad_case *b = &bad_cases[k];
		struct rr_pd_info i = parse_hex(b->hex);
		bool ok = i.status == b->status && i.ext_status == b->ext &&
			  i.send_size == b->send && i.recv_size == b->recv &&
			  i.ext_caps == b->caps;

		if (!ok)
			fprintf(stderr, "  case '%s': status %s ext %s send %u recv %u caps %u\n",
				b->name, rr_pd_status_name(i.status),
				rr_pd_ext_status_name(i.ext_status), i.send_size,
				i.recv_size, i.ext_caps);
		CHECK(ok);
		if (i.status != RR_PD_PRESENT)
			CHECK(!i.remote_inv);
	}
	CHECK(RR_ARRAY_SIZE(bad_cases) >= 12);
}

TEST(pd_malformed_flags_detail)
{
	struct rr_pd_info i;

	i = parse_hex("f6ab0e18 01 fe 03 03");
	CHECK(!i.remote_inv);
	CHECK_EQ(i.flags, 0xfe);
	i = parse_hex("f6ab0e18 01 ff 03 03");
	CHECK(i.remote_inv);
	i = parse_hex("f6ab0e18 01 01 03 03" EXT_V1_CAPS("fffffffc"));
	CHECK_EQ(i.ext_caps_raw, 0xfffffffcu);
	CHECK_EQ(i.ext_caps, 0);
}

TEST(pd_parse_bad_arguments)
{
	struct rr_pd_info i;
	uint8_t b[8] = {0};

	CHECK_EQ(rr_pd_parse(NULL, 8, &i), -EINVAL);
	CHECK_EQ(rr_pd_parse(b, 8, NULL), -EINVAL);
	CHECK_EQ(rr_pd_parse(NULL, 0, &i), 0);
	CHECK_EQ(i.status, RR_PD_ABSENT_EMPTY);
}

TEST(pd_long_private_data_mpa_limit)
{
	/* 252 bytes (MPA's upper-layer maximum) of noise, block at the end. */
	uint8_t buf[252];
	struct rr_pd_info i;

	for (size_t k = 0; k < sizeof(buf); k++)
		buf[k] = (uint8_t)(k * 37 + 11);
	memcpy(buf + 252 - 8, "\xf6\xab\x0e\x18\x01\x01\x00\x00", 8);
	i = parse_exact(buf, sizeof(buf));
	CHECK_EQ(i.status, RR_PD_PRESENT);
	CHECK_EQ(i.offset, 244);
	CHECK_EQ(i.ext_status, RR_PD_EXT_NONE);
}

/* ---- negotiation ---- */

static struct rr_pd_conn negotiate(const struct rr_pd_local *me, enum rr_pd_role role,
				   const struct rr_pd_local *peer)
{
	uint8_t buf[RR_PD_MAX_LEN];
	struct rr_pd_conn c;
	int n = rr_pd_encode(peer, buf, sizeof(buf));

	if (n < 0)
		rr_test_fail(__FILE__, __LINE__, "encode", true);
	memset(&c, 0x5a, sizeof(c));
	if (rr_pd_negotiate(me, role, buf, (size_t)n, &c) != 0)
		rr_test_fail(__FILE__, __LINE__, "negotiate", true);
	return c;
}

TEST(pd_negotiate_matrix_r_and_ext)
{
	static const uint32_t caps[] = {0, RR_PD_EXT_CAP_RELIABLE_REPLY,
					RR_PD_EXT_CAP_RDMA_COMMIT, RR_PD_EXT_CAPS_KNOWN};

	for (int rq_r = 0; rq_r < 2; rq_r++)
	for (int rs_r = 0; rs_r < 2; rs_r++)
	for (size_t a = 0; a < RR_ARRAY_SIZE(caps); a++)
	for (size_t b = 0; b < RR_ARRAY_SIZE(caps); b++) {
		struct rr_pd_local rq = {4096, 4096, rq_r, caps[a]};
		struct rr_pd_local rs = {4096, 4096, rs_r, caps[b]};
		struct rr_pd_conn c = negotiate(&rq, RR_PD_REQUESTER, &rs);
		struct rr_pd_conn s = negotiate(&rs, RR_PD_RESPONDER, &rq);

		CHECK(c.peer_present && s.peer_present);
		CHECK_EQ(c.send_inv, rq_r && rs_r);
		CHECK_EQ(s.send_inv, rq_r && rs_r);
		CHECK_EQ(c.peer_may_inv, rq_r);
		CHECK_EQ(s.peer_may_inv, rs_r);
		CHECK_EQ(c.peer_r, rs_r);
		CHECK_EQ(s.peer_r, rq_r);
		CHECK_EQ(c.ext_caps, caps[a] & caps[b]);
		CHECK_EQ(s.ext_caps, caps[a] & caps[b]);
		CHECK_EQ(c.call_threshold, 4096);
		CHECK_EQ(s.reply_threshold, 4096);
	}
}

TEST(pd_negotiate_asymmetric_sizes)
{
	struct rr_pd_local rq = {8192, 4096, true, 0};
	struct rr_pd_local rs = {2048, 65536, true, 0};
	struct rr_pd_conn c = negotiate(&rq, RR_PD_REQUESTER, &rs);
	struct rr_pd_conn s = negotiate(&rs, RR_PD_RESPONDER, &rq);

	/* requester -> responder: min(requester send, responder recv) */
	CHECK_EQ(c.call_threshold, 8192);
	CHECK_EQ(c.send_threshold, 8192);
	/* responder -> requester: min(responder send, requester recv) */
	CHECK_EQ(c.reply_threshold, 2048);
	CHECK_EQ(c.recv_threshold, 2048);
	CHECK_EQ(s.call_threshold, 8192);
	CHECK_EQ(s.recv_threshold, 8192);
	CHECK_EQ(s.reply_threshold, 2048);
	CHECK_EQ(s.send_threshold, 2048);

	/* the other way round: small receive on the requester bounds replies */
	rq = (struct rr_pd_local){65536, 1024, false, 0};
	rs = (struct rr_pd_local){16384, 3072, false, 0};
	c = negotiate(&rq, RR_PD_REQUESTER, &rs);
	s = negotiate(&rs, RR_PD_RESPONDER, &rq);
	CHECK_EQ(c.call_threshold, 3072);
	CHECK_EQ(c.reply_threshold, 1024);
	CHECK_EQ(s.call_threshold, 3072);
	CHECK_EQ(s.reply_threshold, 1024);
}

TEST(pd_negotiate_uses_rounded_own_sizes)
{
	/* 5000 is advertised as 4096; both ends must use 4096. */
	struct rr_pd_local rq = {5000, 9000, false, 0};
	struct rr_pd_local rs = {65536, 65536, false, 0};
	struct rr_pd_conn c = negotiate(&rq, RR_PD_REQUESTER, &rs);
	struct rr_pd_conn s = negotiate(&rs, RR_PD_RESPONDER, &rq);

	CHECK_EQ(c.call_threshold, 4096);
	CHECK_EQ(s.call_threshold, 4096);
	CHECK_EQ(c.reply_threshold, 8192);
	CHECK_EQ(s.reply_threshold, 8192);
}

TEST(pd_negotiate_both_sides_agree_random)
{
	uint64_t x = 12345;

	for (int k = 0; k < 3000; k++) {
		struct rr_pd_local a, b;
		struct rr_pd_conn c, s;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		a = (struct rr_pd_local){1024 + (uint32_t)((x >> 8) % 270000),
					 1024 + (uint32_t)((x >> 28) % 270000),
					 (x >> 50) & 1, (uint32_t)(x >> 51) & 3};
		b = (struct rr_pd_local){1024 + (uint32_t)((x >> 3) % 270000),
					 1024 + (uint32_t)((x >> 33) % 270000),
					 (x >> 55) & 1, (uint32_t)(x >> 56) & 3};
		c = negotiate(&a, RR_PD_REQUESTER, &b);
		s = negotiate(&b, RR_PD_RESPONDER, &a);
		CHECK_EQ(c.call_threshold, s.call_threshold);
		CHECK_EQ(c.reply_threshold, s.reply_threshold);
		CHECK_EQ(c.send_inv, s.send_inv);
		CHECK_EQ(c.ext_caps, s.ext_caps);
		/* never more than either end said it can do */
		CHECK(c.call_threshold <= a.send_size && c.call_threshold <= b.recv_size);
		CHECK(c.reply_threshold <= b.send_size && c.reply_threshold <= a.recv_size);
		CHECK(c.call_threshold >= 1024 && c.reply_threshold >= 1024);
	}
}

TEST(pd_negotiate_absent_or_garbage_peer)
{
	struct rr_pd_local me = {65536, 65536, true, RR_PD_EXT_CAPS_KNOWN};
	static const char *garbage[] = {
		"", "00", "f6ab0e18", "f6ab0e18 02 01 ff ff", "deadbeef cafebabe",
		EXT_V1_CAPS("00000003"),
	};

	for (size_t k = 0; k < RR_ARRAY_SIZE(garbage); k++) {
		for (int role = 0; role < 2; role++) {
			uint8_t buf[64];
			size_t n = rr_test_hex(garbage[k], buf, sizeof(buf));
			struct rr_pd_conn c;

			REQUIRE_EQ(rr_pd_negotiate(&me, (enum rr_pd_role)role,
						   n ? buf : NULL, n, &c), 0);
			CHECK(!c.peer_present);
			CHECK_EQ(c.call_threshold, 1024);
			CHECK_EQ(c.reply_threshold, 1024);
			CHECK(!c.send_inv);
			CHECK(!c.peer_r);
			CHECK_EQ(c.ext_caps, 0);
		}
	}
	{
		struct rr_pd_conn c;

		REQUIRE_EQ(rr_pd_negotiate_info(&me, RR_PD_RESPONDER, NULL, &c), 0);
		CHECK_EQ(c.call_threshold, 1024);
		CHECK_EQ(c.reply_threshold, 1024);
	}
}

TEST(pd_negotiate_against_linux_server)
{
	/* Our requester (R, both extensions, 4 KiB) against Linux nfsd. */
	struct rr_pd_local me = {4096, 4096, true, RR_PD_EXT_CAPS_KNOWN};
	uint8_t buf[16];
	size_t n = rr_test_hex("0000 0010 f6ab0e18 01 00 03 03", buf, sizeof(buf));
	struct rr_pd_conn c;

	REQUIRE_EQ(rr_pd_negotiate(&me, RR_PD_REQUESTER, buf, n, &c), 0);
	CHECK(c.peer_present);
	CHECK_EQ(c.call_threshold, 4096);
	CHECK_EQ(c.reply_threshold, 4096);
	CHECK(!c.send_inv);     /* Linux's R is 0 */
	CHECK(c.peer_may_inv);  /* ... yet it invalidates: we set R */
	CHECK_EQ(c.ext_caps, 0);
}

TEST(pd_negotiate_ext_damaged_means_none)
{
	struct rr_pd_local me = {4096, 4096, false, RR_PD_EXT_CAPS_KNOWN};
	static const char *peer[] = {
		"f6ab0e18 01 00 03 03 ac3a363d 02 0c 0000 00000003",
		"f6ab0e18 01 00 03 03 ac3a363d 01 0c 0000 000000",
		"f6ab0e18 01 00 03 03 ac3a363d 01 08 0000 00000003",
		"f6ab0e18 01 00 03 03 00000000 ac3a363d 01 0c 0000 00000003",
	};

	for (size_t k = 0; k < RR_ARRAY_SIZE(peer); k++) {
		uint8_t buf[64];
		size_t n = rr_test_hex(peer[k], buf, sizeof(buf));
		struct rr_pd_conn c;

		REQUIRE_EQ(rr_pd_negotiate(&me, RR_PD_RESPONDER, buf, n, &c), 0);
		CHECK(c.peer_present);
		CHECK_EQ(c.reply_threshold, 4096);
		CHECK_EQ(c.ext_caps, 0);
	}
}

TEST(pd_negotiate_bad_local)
{
	struct rr_pd_local me = {512, 4096, false, 0};
	struct rr_pd_conn c;

	CHECK_EQ(rr_pd_negotiate(&me, RR_PD_REQUESTER, NULL, 0, &c), -EINVAL);
	me.send_size = 4096;
	me.ext_caps = 0x100;
	CHECK_EQ(rr_pd_negotiate(&me, RR_PD_REQUESTER, NULL, 0, &c), -EINVAL);
	me.ext_caps = 0;
	CHECK_EQ(rr_pd_negotiate(&me, (enum rr_pd_role)7, NULL, 0, &c), -EINVAL);
	CHECK_EQ(rr_pd_negotiate(&me, RR_PD_REQUESTER, NULL, 0, NULL), -EINVAL);
	CHECK_EQ(rr_pd_negotiate(&me, RR_PD_REQUESTER, NULL, 0, &c), 0);
}
