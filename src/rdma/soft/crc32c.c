/* SPDX-License-Identifier: BSD-2-Clause */
/* CRC32c for the MPA trailer (RFC 5044 section 4.4; algorithm and test
 * vectors of RFC 3720 appendix B.4). Portable slicing-by-8 tables built on
 * first use, and on x86-64 an SSE4.2 path (the crc32 instruction, 8 bytes per
 * step) selected at run time with __builtin_cpu_supports. Pure computation: no
 * syscalls, no allocation. */
#include "rdma/soft/crc32c.h"

#include <pthread.h>
#include <string.h>

#define RR_CRC32C_POLY 0x82f63b78u

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static uint32_t (*crc_impl)(uint32_t, const void *, size_t);

static void crc_build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ RR_CRC32C_POLY : c >> 1;
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^
					crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

static uint32_t crc_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
		len--;
	}
	while (len >= 8) {
		uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			      (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 |
			      (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;

		lo ^= crc;
		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
		      crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
		      crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const void *buf,
							   size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static void crc_init(void)
{
	crc_build_tables();
	crc_impl = crc_sw;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		crc_impl = crc_hw;
#endif
}

uint32_t rr_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return crc_impl(crc, buf, len);
}

uint32_t rr_crc32c_update_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return crc_sw(crc, buf, len);
}

int rr_crc32c_hw(void)
{
	pthread_once(&crc_once, crc_init);
	return crc_impl != crc_sw;
}
