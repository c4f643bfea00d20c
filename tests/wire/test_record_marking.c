/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of the RFC 5531 section 11 record marking codec
 * (src/transport/tcp/rm.h) alone, without a socket: records from one feed
 * and byte by byte, fragments (empty ones included), empty records, the
 * largest record and one byte more, discarding an oversized record and
 * staying in step, the fragment count limit, an MPA frame at the start of
 * the stream only, memory that grows only as bytes arrive (a hostile length
 * claim costs nothing), a failed allocation that can be retried, misuse
 * answered with an error, the encoder's framing of pieces, and a seeded
 * random round trip through the encoder and the decoder. Also the recycled
 * record buffers of tcp:// (src/transport/tcp/tcp_bufs.h) that feed the
 * decoder there. */
#include "test.h"

#include <stdlib.h>

#include "transport/tcp/rm.h"
#include "transport/tcp/tcp_bufs.h"

/* A decoder over the test env @te with @max, @frags, @skip, @trust. */
static void dec_init(struct rr_rm_dec *d, struct rr_test_env *te, size_t max, unsigned frags,
		     bool skip, bool trust)
{
	struct rr_rm_dec_conf c = {.env = &te->env, .max_record = max, .max_frags = frags,
				   .skip_oversize = skip, .trust_len = trust};

	rr_rm_dec_init(d, &c);
}

/* Appends a fragment header and @n data bytes to @s (at *@off). */
static void put_frag(uint8_t *s, size_t *off, const void *data, uint32_t n, bool last)
{
	rr_rm_put_header(s + *off, n, last);
	*off += 4;
	if (n)
		memcpy(s + *off, data, n);
	*off += n;
}

/* Feeds @len bytes; expects exactly one event, RR_RM_RECORD, at the very end
 * of the bytes, and checks the record equals @want (@wlen bytes). */
static void expect_record(struct rr_rm_dec *d, struct rr_test_env *te, const uint8_t *in,
			  size_t len, const void *want, size_t wlen)
{
	size_t used, rlen, cap;
	uint8_t *rec;

	REQUIRE_EQ(rr_rm_dec_feed(d, in, len, &used), RR_RM_RECORD);
	CHECK_EQ(used, len);
	rec = rr_rm_dec_take(d, &rlen, &cap);
	REQUIRE_EQ(rlen, wlen);
	CHECK(cap >= rlen);
	if (wlen)
		CHECK_MEM(rec, want, wlen);
	else
		CHECK(rec == NULL);
	rr_free(&te->env, rec);
	CHECK(rr_rm_dec_idle(d));
}

TEST(rm_decode_records_whole_and_byte_by_byte)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[256], got[3][64];
	size_t off = 0, glen[3] = {0}, used;
	unsigned nrec = 0;

	rr_test_env_init(&te, 1);
	dec_init(&d, &te, 1000, 0, false, false);
	/* "hello" in one fragment, "abcdefgh" in three, then "xyz". */
	put_frag(s, &off, "hello", 5, true);
	put_frag(s, &off, "abc", 3, false);
	put_frag(s, &off, "de", 2, false);
	put_frag(s, &off, "fgh", 3, true);
	put_frag(s, &off, "xyz", 3, true);
	/* One feed: it stops at each record. */
	{
		size_t at = 0;
		const char *want[] = {"hello", "abcdefgh", "xyz"};

		for (int i = 0; i < 3; i++) {
			size_t rlen, cap;
			uint8_t *rec;

			REQUIRE_EQ(rr_rm_dec_feed(&d, s + at, off - at, &used), RR_RM_RECORD);
			at += used;
			rec = rr_rm_dec_take(&d, &rlen, &cap);
			REQUIRE_EQ(rlen, strlen(want[i]));
			CHECK_MEM(rec, want[i], rlen);
			rr_free(&te.env, rec);
		}
		CHECK_EQ(at, off);
	}
	/* Byte by byte through space/commit. */
	for (size_t i = 0; i < off; i++) {
		uint8_t *dst;
		size_t n;
		int rc;

		REQUIRE_EQ(rr_rm_dec_space(&d, &dst, &n), 0);
		REQUIRE(dst != NULL);
		REQUIRE(n >= 1);
		*dst = s[i];
		rc = rr_rm_dec_commit(&d, 1);
		REQUIRE(rc == RR_RM_MORE || rc == RR_RM_RECORD);
		if (rc == RR_RM_RECORD) {
			size_t cap;
			uint8_t *rec = rr_rm_dec_take(&d, &glen[nrec], &cap);

			REQUIRE(nrec < 3);
			memcpy(got[nrec], rec, glen[nrec]);
			nrec++;
			rr_free(&te.env, rec);
		}
	}
	REQUIRE_EQ(nrec, 3);
	CHECK_EQ(glen[0], 5);
	CHECK_MEM(got[0], "hello", 5);
	CHECK_EQ(glen[1], 8);
	CHECK_MEM(got[1], "abcdefgh", 8);
	CHECK_EQ(glen[2], 3);
	CHECK_MEM(got[2], "xyz", 3);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_empty_fragments_and_records)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[64];
	size_t off = 0;

	rr_test_env_init(&te, 2);
	dec_init(&d, &te, 100, 0, false, false);
	/* An empty record: one empty last fragment. */
	put_frag(s, &off, NULL, 0, true);
	expect_record(&d, &te, s, off, NULL, 0);
	/* Empty fragments before, between and at the end of data. */
	off = 0;
	put_frag(s, &off, NULL, 0, false);
	put_frag(s, &off, "ab", 2, false);
	put_frag(s, &off, NULL, 0, false);
	put_frag(s, &off, "c", 1, false);
	put_frag(s, &off, NULL, 0, true);
	expect_record(&d, &te, s, off, "abc", 3);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_largest_record_and_one_more)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	static uint8_t s[2 * 100 + 64], data[101];
	size_t off = 0, used;

	rr_test_env_init(&te, 3);
	memset(data, 'x', sizeof(data));
	dec_init(&d, &te, 100, 0, false, false);
	/* Exactly 100 bytes, in two fragments: accepted. */
	put_frag(s, &off, data, 60, false);
	put_frag(s, &off, data, 40, true);
	expect_record(&d, &te, s, off, data, 100);
	/* 101 bytes in one fragment: refused at its header. */
	off = 0;
	put_frag(s, &off, data, 101, true);
	CHECK_EQ(rr_rm_dec_feed(&d, s, off, &used), -EMSGSIZE);
	CHECK_EQ(used, 4);
	/* 101 bytes in two fragments: refused at the second header. */
	rr_rm_dec_reset(&d);
	off = 0;
	put_frag(s, &off, data, 100, false);
	put_frag(s, &off, data, 1, true);
	CHECK_EQ(rr_rm_dec_feed(&d, s, off, &used), -EMSGSIZE);
	CHECK_EQ(used, 108);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_skips_oversized_record_and_stays_in_step)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	static uint8_t s[512], data[200];
	const uint8_t *head;
	size_t off = 0, used, at = 0;

	rr_test_env_init(&te, 4);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;
	dec_init(&d, &te, 100, 0, true, true);
	/* 5 + 3 bytes fit, then a fragment of 150 takes it over: discarded,
	 * its first 8 bytes kept (from two fragments). */
	put_frag(s, &off, data, 5, false);
	put_frag(s, &off, data + 5, 3, false);
	put_frag(s, &off, data + 8, 150, false);
	put_frag(s, &off, data, 7, true);
	put_frag(s, &off, "next", 4, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, off, &used), RR_RM_SKIPPED);
	at += used;
	CHECK_EQ(rr_rm_dec_skipped(&d, &head), 8);
	CHECK_MEM(head, data, 8);
	/* The stream is in step: the next record decodes. */
	expect_record(&d, &te, s + at, off - at, "next", 4);
	/* An oversized first fragment: its first 8 data bytes are kept. */
	off = 0;
	put_frag(s, &off, data + 20, 180, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, off, &used), RR_RM_SKIPPED);
	CHECK_EQ(used, off);
	CHECK_EQ(rr_rm_dec_skipped(&d, &head), 8);
	CHECK_MEM(head, data + 20, 8);
	rr_rm_dec_fini(&d);
	/* Fewer than 8 bytes in all (records of at most 4): what there was. */
	dec_init(&d, &te, 4, 0, true, false);
	off = 0;
	put_frag(s, &off, "abc", 3, false);
	put_frag(s, &off, "def", 3, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, off, &used), RR_RM_SKIPPED);
	CHECK_EQ(used, off);
	CHECK_EQ(rr_rm_dec_skipped(&d, &head), 6);
	CHECK_MEM(head, "abcdef", 6);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_fragment_count_limit)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[128];
	size_t off = 0, used;

	rr_test_env_init(&te, 5);
	dec_init(&d, &te, 1000, 4, false, false);
	/* Four fragments (two empty): accepted, and the count starts again
	 * for the next record. */
	for (int r = 0; r < 2; r++) {
		off = 0;
		put_frag(s, &off, NULL, 0, false);
		put_frag(s, &off, "a", 1, false);
		put_frag(s, &off, NULL, 0, false);
		put_frag(s, &off, "b", 1, true);
		expect_record(&d, &te, s, off, "ab", 2);
	}
	/* A fifth fragment: -EBADMSG at its header, whatever its size. */
	off = 0;
	for (int i = 0; i < 5; i++)
		put_frag(s, &off, NULL, 0, false);
	CHECK_EQ(rr_rm_dec_feed(&d, s, off, &used), -EBADMSG);
	CHECK_EQ(used, off);
	/* Discarding an oversized record counts fragments too: empty
	 * fragments cannot keep it open forever. */
	rr_rm_dec_fini(&d);
	dec_init(&d, &te, 10, 4, true, false);
	off = 0;
	put_frag(s, &off, "0123456789abc", 13, false);
	for (int i = 0; i < 4; i++)
		put_frag(s, &off, NULL, 0, false);
	CHECK_EQ(rr_rm_dec_feed(&d, s, off, &used), -EBADMSG);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
	/* The default for tcp://: 1024, or one per KiB above 1 MiB. */
	CHECK_EQ(rr_rm_frags_default(0), 1024);
	CHECK_EQ(rr_rm_frags_default(1 << 20), 1024);
	CHECK_EQ(rr_rm_frags_default((size_t)8 << 20), 8192);
}

TEST(rm_decode_mpa_frame_only_at_stream_start)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[64];
	size_t off = 0, used;

	rr_test_env_init(&te, 6);
	dec_init(&d, &te, (size_t)0x7fffffff, 0, false, false);
	/* "MPA ID Req Frame" (RFC 5044 section 7.1) at the start. */
	CHECK_EQ(rr_rm_dec_feed(&d, (const uint8_t *)"MPA ID Req Frame", 16, &used), -EPROTOTYPE);
	CHECK_EQ(used, 4);
	/* After a reset (a new connection) it is checked again. */
	rr_rm_dec_reset(&d);
	CHECK_EQ(rr_rm_dec_feed(&d, (const uint8_t *)"MPA ", 4, &used), -EPROTOTYPE);
	/* Later in a stream the same bytes are a fragment header (a 1.3 GB
	 * non-last fragment) and data bytes "MPA " are data. */
	rr_rm_dec_reset(&d);
	put_frag(s, &off, "MPA ", 4, true);
	expect_record(&d, &te, s, off, "MPA ", 4);
	CHECK_EQ(rr_rm_dec_feed(&d, (const uint8_t *)"MPA ", 4, &used), RR_RM_MORE);
	CHECK_EQ(used, 4);
	CHECK_EQ(d.frag_left, 0x4d504120u);
	CHECK(!d.last);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

/* A provider that counts the bytes it hands out (and gives plain memory). */
struct counting_bufs {
	struct rr_test_env *te;
	size_t largest, gets, puts;
};

static uint8_t *cb_get(void *arg, size_t min, size_t need, size_t above, size_t *cap)
{
	struct counting_bufs *k = arg;

	CHECK(min <= need);
	CHECK(min > above);
	k->gets++;
	k->largest = RR_MAX(k->largest, min);
	*cap = min;
	return rr_alloc(&k->te->env, min);
}

static void cb_put(void *arg, uint8_t *buf, size_t cap)
{
	struct counting_bufs *k = arg;

	(void)cap;
	k->puts++;
	rr_free(&k->te->env, buf);
}

TEST(rm_decode_memory_grows_as_bytes_arrive)
{
	struct rr_test_env te;
	struct counting_bufs k = {.te = NULL};
	struct rr_rm_dec_conf c = {.max_record = (size_t)0x7fffffff};
	struct rr_rm_dec d;
	static uint8_t chunk[40000];
	uint8_t h[4];
	size_t used;

	rr_test_env_init(&te, 7);
	k.te = &te;
	c.env = &te.env;
	c.bufs = (struct rr_rm_bufs){.get = cb_get, .put = cb_put, .arg = &k};
	rr_rm_dec_init(&d, &c);
	/* A header claiming 1 GiB and 10 bytes: 16 KiB, not 1 GiB. */
	rr_rm_put_header(h, 1u << 30, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, h, 4, &used), RR_RM_MORE);
	REQUIRE_EQ(rr_rm_dec_feed(&d, chunk, 10, &used), RR_RM_MORE);
	CHECK_EQ(k.largest, 16384);
	/* 40010 bytes in: never more than double what arrived. */
	REQUIRE_EQ(rr_rm_dec_feed(&d, chunk, sizeof(chunk), &used), RR_RM_MORE);
	CHECK(k.largest <= 2 * (sizeof(chunk) + 10));
	CHECK(k.largest >= sizeof(chunk) + 10);
	CHECK_EQ(k.puts + 1, k.gets);   /* each smaller one given back */
	rr_rm_dec_fini(&d);
	CHECK_EQ(k.puts, k.gets);
	/* trust_len: the whole announced fragment at once. */
	c.trust_len = true;
	k.largest = 0;
	rr_rm_dec_init(&d, &c);
	rr_rm_put_header(h, 100000, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, h, 4, &used), RR_RM_MORE);
	REQUIRE_EQ(rr_rm_dec_feed(&d, chunk, 10, &used), RR_RM_MORE);
	CHECK_EQ(k.largest, 100000);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_failed_allocation_can_be_retried)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[64];
	size_t off = 0, used;
	uint8_t *dst;
	size_t n;

	rr_test_env_init(&te, 8);
	dec_init(&d, &te, 1000, 0, false, false);
	put_frag(s, &off, "abcdef", 6, true);
	te.fail_at = 1;
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, off, &used), -ENOMEM);
	CHECK_EQ(used, 4);   /* the header is in, the data has nowhere to go */
	CHECK_EQ(rr_rm_dec_space(&d, &dst, &n), 0);   /* the 2nd allocation */
	CHECK_EQ(n, 6);
	CHECK_EQ(rr_rm_dec_commit(&d, 0), RR_RM_MORE);
	expect_record(&d, &te, s + used, off - used, "abcdef", 6);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_decode_misuse_is_an_error)
{
	struct rr_test_env te;
	struct rr_rm_dec d;
	uint8_t s[64], *dst;
	size_t off = 0, used, n, len, cap;

	rr_test_env_init(&te, 9);
	dec_init(&d, &te, 1000, 0, false, false);
	/* Committing more than offered, or without an offer. */
	CHECK_EQ(rr_rm_dec_commit(&d, 1), -EINVAL);
	REQUIRE_EQ(rr_rm_dec_space(&d, &dst, &n), 0);
	CHECK_EQ(n, 4);
	CHECK_EQ(rr_rm_dec_commit(&d, 5), -EINVAL);
	/* A record not taken blocks the stream. */
	put_frag(s, &off, "ab", 2, true);
	put_frag(s, &off, "cd", 2, true);
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, off, &used), RR_RM_RECORD);
	CHECK_EQ(used, 6);
	CHECK_EQ(rr_rm_dec_space(&d, &dst, &n), -EBUSY);
	CHECK_EQ(rr_rm_dec_feed(&d, s + used, off - used, &used), -EBUSY);
	CHECK_EQ(used, 0);
	/* Taking twice: nothing the second time. */
	rr_free(&te.env, rr_rm_dec_take(&d, &len, &cap));
	CHECK(rr_rm_dec_take(&d, &len, &cap) == NULL);
	CHECK_EQ(len, 0);
	/* A partial record then a reset: its buffer goes back, the next
	 * stream starts clean. */
	REQUIRE_EQ(rr_rm_dec_feed(&d, s, 5, &used), RR_RM_MORE);
	CHECK(!rr_rm_dec_idle(&d));
	rr_rm_dec_reset(&d);
	CHECK(rr_rm_dec_idle(&d));
	expect_record(&d, &te, s + 6, 6, "cd", 2);
	rr_rm_dec_fini(&d);
	CHECK_EQ(te.live, 0);
}

TEST(rm_encode_headers_and_pieces)
{
	static const uint8_t a[] = "abc", b[] = "defgh", c[] = "ij";
	struct iovec in[4] = {{(void *)a, 3}, {(void *)b, 0}, {(void *)b, 5}, {(void *)c, 2}};
	uint8_t hdrs[4][4], flat[64];
	struct iovec out[16];
	size_t off = 0;
	int n;

	rr_rm_put_header(hdrs[0], 5, true);
	CHECK_MEM(hdrs[0], "\x80\x00\x00\x05", 4);
	rr_rm_put_header(hdrs[0], RR_RM_MAX_FRAG, false);
	CHECK_MEM(hdrs[0], "\x7f\xff\xff\xff", 4);
	CHECK_EQ(rr_rm_enc_frags(0, 4), 1);
	CHECK_EQ(rr_rm_enc_frags(4, 4), 1);
	CHECK_EQ(rr_rm_enc_frags(5, 4), 2);
	CHECK_EQ(rr_rm_enc_frags(5, 0), 0);
	/* 10 bytes in fragments of 4: 4 + 4 + 2, split across pieces. */
	n = rr_rm_enc_iov(in, 4, 4, hdrs, 4, out, 16);
	REQUIRE(n > 0);
	for (int i = 0; i < n; i++) {
		REQUIRE(out[i].iov_len > 0);
		memcpy(flat + off, out[i].iov_base, out[i].iov_len);
		off += out[i].iov_len;
	}
	REQUIRE_EQ(off, 22);
	CHECK_MEM(flat, "\x00\x00\x00\x04" "abcd" "\x00\x00\x00\x04" "efgh"
			"\x80\x00\x00\x02" "ij", 22);
	/* Too few headers, too few iovecs, a bad fragment size. */
	CHECK_EQ(rr_rm_enc_iov(in, 4, 4, hdrs, 2, out, 16), -EMSGSIZE);
	CHECK_EQ(rr_rm_enc_iov(in, 4, 4, hdrs, 4, out, 5), -ENOSPC);
	CHECK_EQ(rr_rm_enc_iov(in, 4, 0, hdrs, 4, out, 16), -EINVAL);
	CHECK_EQ(rr_rm_enc_iov(in, 4, RR_RM_MAX_FRAG + 1u, hdrs, 4, out, 16), -EINVAL);
	/* An empty record is one empty last fragment. */
	n = rr_rm_enc_iov(in, 0, 4, hdrs, 1, out, 1);
	REQUIRE_EQ(n, 1);
	CHECK_EQ(out[0].iov_len, 4);
	CHECK_MEM(out[0].iov_base, "\x80\x00\x00\x00", 4);
}

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

/* Random records framed with random fragment sizes, concatenated, fed in
 * random slices: the records come back, in order, byte for byte. */
TEST(rm_round_trip_random)
{
	enum { NREC = 6, MAXREC = 3000 };
	struct rr_test_env te;
	static uint8_t rec[NREC][MAXREC], stream[NREC * (MAXREC + 4 * MAXREC)];
	size_t rlen[NREC];
	uint64_t seed = 0x5eed;

	rr_test_env_init(&te, 10);
	for (int iter = 0; iter < 400; iter++) {
		struct rr_rm_dec d;
		size_t slen = 0, at = 0;
		unsigned got = 0;

		dec_init(&d, &te, MAXREC, 0, false, iter & 1);
		for (int r = 0; r < NREC; r++) {
			uint8_t hdrs[MAXREC + 1][4];
			struct iovec in[3], out[2 * (MAXREC + 1) + 3];
			uint32_t max_frag = 1 + rnd(&seed) % 700;
			size_t cut1, cut2;
			int n;

			rlen[r] = rnd(&seed) % (MAXREC + 1);
			for (size_t i = 0; i < rlen[r]; i++)
				rec[r][i] = (uint8_t)rnd(&seed);
			cut1 = rlen[r] ? rnd(&seed) % (rlen[r] + 1) : 0;
			cut2 = cut1 + (rlen[r] - cut1 ? rnd(&seed) % (rlen[r] - cut1 + 1) : 0);
			in[0] = (struct iovec){rec[r], cut1};
			in[1] = (struct iovec){rec[r] + cut1, cut2 - cut1};
			in[2] = (struct iovec){rec[r] + cut2, rlen[r] - cut2};
			n = rr_rm_enc_iov(in, 3, max_frag, hdrs, MAXREC + 1, out, RR_ARRAY_SIZE(out));
			REQUIRE(n > 0);
			for (int i = 0; i < n; i++) {
				memcpy(stream + slen, out[i].iov_base, out[i].iov_len);
				slen += out[i].iov_len;
			}
		}
		while (at < slen) {
			size_t want = 1 + rnd(&seed) % 900, used;
			int rc = rr_rm_dec_feed(&d, stream + at, RR_MIN(want, slen - at), &used);

			REQUIRE(rc == RR_RM_MORE || rc == RR_RM_RECORD);
			at += used;
			if (rc == RR_RM_RECORD) {
				size_t len, cap;
				uint8_t *b = rr_rm_dec_take(&d, &len, &cap);

				REQUIRE(got < NREC);
				REQUIRE_EQ(len, rlen[got]);
				if (len)
					CHECK_MEM(b, rec[got], len);
				rr_free(&te.env, b);
				got++;
			}
		}
		CHECK_EQ(got, NREC);
		CHECK(rr_rm_dec_idle(&d));
		rr_rm_dec_fini(&d);
	}
	CHECK_EQ(te.live, 0);
}
/* The recycled buffers of tcp:// (issue 13): a buffer given back is handed
 * out again whole for a record it fits, a large one through the shared
 * pool; what the caches do not keep is freed. */
TEST(tcp_bufs_reuse_and_pool)
{
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_bufs a, b;
	struct rr_rm_bufs pa, pb;
	uint8_t *x, *y, *z;
	size_t cap;

	rr_test_env_init(&te, 11);
	rr_tcp_cache_init(&pool);
	rr_tcp_bufs_init(&a, &te.env, 1000, &pool);
	rr_tcp_bufs_init(&b, &te.env, 1000, &pool);
	pa = rr_tcp_bufs_provider(&a);
	pb = rr_tcp_bufs_provider(&b);
	/* Nothing kept: a new buffer of the size asked for. */
	x = pa.get(pa.arg, 500, 800, 0, &cap);
	REQUIRE(x != NULL);
	CHECK_EQ(cap, 500);
	pa.put(pa.arg, x, cap);
	/* Kept by a: handed out again for a record it fits (not for one it
	 * does not, nor when it is no larger than the buffer in use). */
	CHECK(pa.get(pa.arg, 500, 800, 0, &cap) == x);
	pa.put(pa.arg, x, 500);
	y = pa.get(pa.arg, 600, 800, 0, &cap);
	CHECK(y != x);
	CHECK_EQ(cap, 600);
	z = pa.get(pa.arg, 300, 800, 500, &cap);   /* above 500: not x */
	CHECK(z != x);
	rr_tcp_bufs_put(&a, y, 600);
	rr_tcp_bufs_put(&a, z, 300);   /* 300 in the hot slot, 500 and 600 cached */
	/* A large buffer goes to the pool, and another reader takes it whole
	 * for a large record. */
	x = rr_alloc(&te.env, 5000);
	rr_tcp_bufs_put(&a, x, 5000);
	CHECK(pb.get(pb.arg, 4000, 4500, 0, &cap) == x);
	CHECK_EQ(cap, 5000);
	pb.put(pb.arg, x, cap);
	rr_tcp_bufs_fini(&a);
	rr_tcp_bufs_fini(&b);
	rr_tcp_cache_fini(&pool, &te.env);
	CHECK_EQ(te.live, 0);
}

/* The last buffer put back waits in the lock-free hot slot (the caches
 * stay empty) and is the next one handed out; one too small for the next
 * record moves to the cache, and a buffer the hot slot displaces goes
 * there too. A buffer smaller than the capacity it would carry skips the
 * hot slot. Every block comes back at fini. */
TEST(tcp_bufs_last_buffer_in_hot_slot)
{
	struct rr_test_env te;
	struct rr_tcp_bufs a;
	struct rr_rm_bufs pa;
	uint8_t *x, *y, *t;
	size_t cap;

	rr_test_env_init(&te, 12);
	rr_tcp_bufs_init(&a, &te.env, 1000, NULL);
	pa = rr_tcp_bufs_provider(&a);
	x = pa.get(pa.arg, 500, 500, 0, &cap);
	REQUIRE(x != NULL);
	pa.put(pa.arg, x, cap);
	CHECK(a.hot == x);
	CHECK(a.spare.buf[0] == NULL && a.spare.buf[1] == NULL);
	CHECK(pa.get(pa.arg, 400, 500, 0, &cap) == x);
	CHECK_EQ(cap, 500);
	CHECK(a.hot == NULL);
	/* displaced: x to the cache */
	y = pa.get(pa.arg, 200, 200, 0, &cap);
	REQUIRE(y != NULL && y != x);
	pa.put(pa.arg, x, 500);
	pa.put(pa.arg, y, 200);
	CHECK(a.hot == y);
	CHECK(a.spare.buf[0] == x || a.spare.buf[1] == x);
	/* too small for a 300-byte record: y goes to the cache, and the
	 * cached x (500) serves */
	CHECK(pa.get(pa.arg, 300, 300, 0, &cap) == x);
	CHECK(a.hot == NULL);
	CHECK(a.spare.buf[0] == y || a.spare.buf[1] == y);
	pa.put(pa.arg, x, 500);
	/* a 4-byte buffer cannot carry its capacity: cached, not hot */
	t = rr_alloc(&te.env, 4);
	REQUIRE(t != NULL);
	pa.put(pa.arg, t, 4);
	CHECK(a.hot == x);
	rr_tcp_bufs_fini(&a);
	CHECK_EQ(te.live, 0);
}
