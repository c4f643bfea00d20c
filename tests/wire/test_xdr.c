/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the checked XDR cursor (RFC 4506): round trips, padding, bounds on
 * every decode, capacity on every encode, reserve-then-backfill; the RPC
 * layer's room on an emptied encoder as its general room. */
#include "test.h"
#include "xdr/xdr.h"
#include "rpc/xbuf.h"

TEST(xdr_roundtrip_scalars)
{
	uint8_t buf[64];
	struct rr_xdr_enc e;
	struct rr_xdr_dec d;
	uint32_t u32;
	uint64_t u64;
	bool b;

	rr_xdr_enc_init(&e, buf, sizeof(buf));
	REQUIRE_EQ(rr_xdr_put_u32(&e, 0xdeadbeef), 0);
	REQUIRE_EQ(rr_xdr_put_u64(&e, 0x0102030405060708ull), 0);
	REQUIRE_EQ(rr_xdr_put_bool(&e, true), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), 16);
	CHECK_MEM(buf, "\xde\xad\xbe\xef\x01\x02\x03\x04\x05\x06\x07\x08\0\0\0\x01", 16);

	rr_xdr_dec_init(&d, buf, 16);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &u32), 0);
	CHECK_EQ(u32, 0xdeadbeef);
	REQUIRE_EQ(rr_xdr_get_u64(&d, &u64), 0);
	CHECK(u64 == 0x0102030405060708ull);
	REQUIRE_EQ(rr_xdr_get_bool(&d, &b), 0);
	CHECK(b);
	CHECK_EQ(rr_xdr_dec_remaining(&d), 0);
	CHECK_EQ(rr_xdr_get_u32(&d, &u32), -EBADMSG);
}

TEST(xdr_short_input_every_length)
{
	uint8_t buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	for (size_t n = 0; n < 8; n++) {
		struct rr_xdr_dec d;
		uint64_t v64;
		uint32_t v32;

		rr_xdr_dec_init(&d, buf, n);
		CHECK_EQ(rr_xdr_get_u64(&d, &v64), -EBADMSG);
		CHECK_EQ(rr_xdr_dec_pos(&d), 0);
		if (n < 4) {
			CHECK_EQ(rr_xdr_get_u32(&d, &v32), -EBADMSG);
			CHECK_EQ(rr_xdr_dec_pos(&d), 0);
		}
	}
}

TEST(xdr_bool_rejects_other_values)
{
	uint8_t buf[4] = {0, 0, 0, 2};
	struct rr_xdr_dec d;
	bool b;

	rr_xdr_dec_init(&d, buf, 4);
	CHECK_EQ(rr_xdr_get_bool(&d, &b), -EBADMSG);
	CHECK_EQ(rr_xdr_dec_pos(&d), 0);
}

TEST(xdr_opaque_padding)
{
	uint8_t buf[32];
	struct rr_xdr_enc e;
	struct rr_xdr_dec d;
	const uint8_t *p;
	uint32_t len;
	uint8_t out[8];

	memset(buf, 0xaa, sizeof(buf));
	rr_xdr_enc_init(&e, buf, sizeof(buf));
	REQUIRE_EQ(rr_xdr_put_opaque(&e, "abcde", 5), 0);
	REQUIRE_EQ(rr_xdr_put_fixed(&e, "xyz", 3), 0);
	REQUIRE_EQ(rr_xdr_enc_len(&e), 4 + 8 + 4);
	CHECK_MEM(buf, "\0\0\0\x05" "abcde\0\0\0" "xyz\0", 16);

	rr_xdr_dec_init(&d, buf, 16);
	REQUIRE_EQ(rr_xdr_get_opaque_ref(&d, 16, &p, &len), 0);
	CHECK_EQ(len, 5);
	CHECK_MEM(p, "abcde", 5);
	REQUIRE_EQ(rr_xdr_get_fixed(&d, out, 3), 0);
	CHECK_MEM(out, "xyz", 3);
	CHECK_EQ(rr_xdr_dec_remaining(&d), 0);
}

TEST(xdr_opaque_bounds)
{
	uint8_t buf[16];
	struct rr_xdr_dec d;
	const uint8_t *p;
	uint32_t len;
	uint8_t small[2];

	/* length beyond the input */
	memcpy(buf, "\0\0\0\x09" "abcdefgh", 12);
	rr_xdr_dec_init(&d, buf, 12);
	CHECK_EQ(rr_xdr_get_opaque_ref(&d, 100, &p, &len), -EBADMSG);
	CHECK_EQ(rr_xdr_dec_pos(&d), 0);
	/* length exactly fitting but the pad missing */
	memcpy(buf, "\0\0\0\x07" "abcdefg", 11);
	rr_xdr_dec_init(&d, buf, 11);
	CHECK_EQ(rr_xdr_get_opaque_ref(&d, 100, &p, &len), -EBADMSG);
	/* length above maxlen */
	memcpy(buf, "\0\0\0\x04" "abcd", 8);
	rr_xdr_dec_init(&d, buf, 8);
	CHECK_EQ(rr_xdr_get_opaque_ref(&d, 3, &p, &len), -EBADMSG);
	/* length above the copy capacity */
	rr_xdr_dec_init(&d, buf, 8);
	CHECK_EQ(rr_xdr_get_opaque(&d, 8, small, sizeof(small), &len), -EBADMSG);
	CHECK_EQ(rr_xdr_dec_pos(&d), 0);
	/* huge length: no overflow in the pad computation */
	memcpy(buf, "\xff\xff\xff\xff", 4);
	rr_xdr_dec_init(&d, buf, 8);
	CHECK_EQ(rr_xdr_get_opaque_ref(&d, UINT32_MAX, &p, &len), -EBADMSG);
	rr_xdr_dec_init(&d, buf, 8);
	CHECK_EQ(rr_xdr_skip(&d, SIZE_MAX), -EBADMSG);
	CHECK_EQ(rr_xdr_skip(&d, SIZE_MAX - 2), -EBADMSG);
}

TEST(xdr_encode_capacity)
{
	uint8_t buf[12];
	struct rr_xdr_enc e;
	size_t off;

	rr_xdr_enc_init(&e, buf, 6);
	CHECK_EQ(rr_xdr_put_u64(&e, 1), -EMSGSIZE);
	REQUIRE_EQ(rr_xdr_put_u32(&e, 1), 0);
	CHECK_EQ(rr_xdr_put_u32(&e, 1), -EMSGSIZE);
	CHECK_EQ(rr_xdr_enc_len(&e), 4);

	rr_xdr_enc_init(&e, buf, 8);
	CHECK_EQ(rr_xdr_put_opaque(&e, "abcde", 5), -EMSGSIZE);
	CHECK_EQ(rr_xdr_enc_len(&e), 0);
	CHECK_EQ(rr_xdr_reserve(&e, 3, &off), -EMSGSIZE);
	CHECK_EQ(rr_xdr_reserve(&e, 12, &off), -EMSGSIZE);
}

TEST(xdr_reserve_backfill)
{
	uint8_t buf[16];
	struct rr_xdr_enc e;
	struct rr_xdr_dec d;
	size_t off;
	uint32_t n, v;

	rr_xdr_enc_init(&e, buf, sizeof(buf));
	REQUIRE_EQ(rr_xdr_reserve(&e, 4, &off), 0);
	for (uint32_t i = 0; i < 3; i++)
		REQUIRE_EQ(rr_xdr_put_u32(&e, 10 + i), 0);
	rr_xdr_backfill_u32(&e, off, 3);
	rr_xdr_dec_init(&d, buf, rr_xdr_enc_len(&e));
	REQUIRE_EQ(rr_xdr_get_u32(&d, &n), 0);
	CHECK_EQ(n, 3);
	for (uint32_t i = 0; i < n; i++) {
		REQUIRE_EQ(rr_xdr_get_u32(&d, &v), 0);
		CHECK_EQ(v, 10 + i);
	}
}

TEST(env_failing_allocator)
{
	struct rr_test_env te;
	void *a, *b, *c;

	rr_test_env_init(&te, 1);
	te.fail_at = 2;
	a = rr_alloc(&te.env, 8);
	b = rr_alloc(&te.env, 8);
	c = rr_zalloc(&te.env, 8);
	CHECK(a != NULL);
	CHECK(b == NULL);
	CHECK(c != NULL);
	rr_free(&te.env, a);
	rr_free(&te.env, c);
	CHECK_EQ(te.live, 0);
	CHECK_EQ(rr_now_ns(&te.env), 1000000000ull);
}

/* One encoder of the RPC layer's for test xbuf_enc_room_empty_as_room:
 * emptied (rr_xbuf_enc_reset) after @used bytes, with a buffer of @cap
 * bytes (none for 0) and the limit @max. */
static void xbuf_emptied(struct rpcrdma_xdr_enc *e, size_t cap, size_t max, size_t used)
{
	rr_xbuf_enc_init(e, NULL, max);
	if (cap) {
		e->buf = rr_alloc(NULL, cap);
		REQUIRE(e->buf != NULL);
		e->cap = cap;
	}
	if (used && used <= cap && used <= max)
		REQUIRE(rr_xbuf_enc_room(e, used) != NULL);
	rr_xbuf_enc_reset(e);
}

/* rr_xbuf_enc_room_empty (the RPC client's Call header) gives what
 * rr_xbuf_enc_room gives on an emptied encoder: the same result (NULL or
 * the buffer's start), length, XDR length, error and capacity, for
 * buffers and limits below, at and above the size asked for, without a
 * buffer, and after earlier use. */
TEST(xbuf_enc_room_empty_as_room)
{
	static const size_t caps[] = {0, 8, 39, 40, 41, 512};
	static const size_t maxs[] = {0, 39, 40, 41, 1000};
	static const size_t ns[] = {0, 4, 40, 41, 600};

	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
		for (size_t j = 0; j < sizeof(maxs) / sizeof(maxs[0]); j++)
			for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
				for (size_t used = 0; used <= 8; used += 8) {
					struct rpcrdma_xdr_enc a, b;
					uint8_t *pa, *pb;

					xbuf_emptied(&a, caps[i], maxs[j], used);
					xbuf_emptied(&b, caps[i], maxs[j], used);
					pa = rr_xbuf_enc_room(&a, ns[k]);
					pb = rr_xbuf_enc_room_empty(&b, ns[k]);
					CHECK_EQ(pa == NULL, pb == NULL);
					if (pa && pb) {
						CHECK(pa == a.buf);
						CHECK(pb == b.buf);
					}
					CHECK_EQ(a.len, b.len);
					CHECK_EQ(a.xdr_len, b.xdr_len);
					CHECK_EQ(a.error, b.error);
					CHECK_EQ(a.cap, b.cap);
					CHECK_EQ(a.nddp, b.nddp);
					rr_xbuf_enc_free(&a);
					rr_xbuf_enc_free(&b);
				}
}
