/* SPDX-License-Identifier: BSD-2-Clause */
/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012): a keyed 64-bit MAC over short inputs. rpcrdma-nfsd signs its file
 * handles with it (fh.c), so that a client cannot forge a handle for an
 * object outside the export. Written from the paper's description: 128-bit
 * key as two little-endian words, 2 compression rounds per 8-byte block,
 * the length in the top byte of the last block, 4 finalization rounds. */
#include "siphash.h"

static uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

struct sip {
	uint64_t v0, v1, v2, v3;
};

static void sipround(struct sip *s)
{
	s->v0 += s->v1; s->v1 = rotl(s->v1, 13); s->v1 ^= s->v0; s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3; s->v3 = rotl(s->v3, 16); s->v3 ^= s->v2;
	s->v0 += s->v3; s->v3 = rotl(s->v3, 21); s->v3 ^= s->v0;
	s->v2 += s->v1; s->v1 = rotl(s->v1, 17); s->v1 ^= s->v2; s->v2 = rotl(s->v2, 32);
}

static void absorb(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	sipround(s);
	sipround(s);
	s->v0 ^= m;
}

uint64_t nfsd_siphash24(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t k0 = le64(key), k1 = le64(key + 8), last;
	struct sip s = {
		.v0 = k0 ^ 0x736f6d6570736575ull,
		.v1 = k1 ^ 0x646f72616e646f6dull,
		.v2 = k0 ^ 0x6c7967656e657261ull,
		.v3 = k1 ^ 0x7465646279746573ull,
	};
	size_t n = len;

	for (; n >= 8; n -= 8, p += 8)
		absorb(&s, le64(p));
	last = (uint64_t)(len & 0xff) << 56;
	for (size_t i = 0; i < n; i++)
		last |= (uint64_t)p[i] << (8 * i);
	absorb(&s, last);
	s.v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		sipround(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
