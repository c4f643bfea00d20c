/* SPDX-License-Identifier: BSD-2-Clause */
/* CRC32c (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the MPA
 * FPDU trailer checksum (RFC 5044 section 4.4, computed as in RFC 3720
 * appendix B.4). A portable slicing-by-8 table implementation and an SSE4.2
 * (crc32 instruction) implementation chosen once at run time.
 *
 * Usage: c = RR_CRC32C_INIT; c = rr_crc32c_update(c, p, n)...;
 * value = rr_crc32c_final(c). On the wire the value goes least significant
 * byte first (rr_crc32c_put), as iSCSI and Linux siw put it. */
#ifndef RR_SOFT_CRC32C_H
#define RR_SOFT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#define RR_CRC32C_INIT 0xffffffffu

uint32_t rr_crc32c_update(uint32_t crc, const void *buf, size_t len);
/* The portable path, whatever the CPU (tests compare both paths). */
uint32_t rr_crc32c_update_sw(uint32_t crc, const void *buf, size_t len);
/* True when the SSE4.2 path is in use. */
int rr_crc32c_hw(void);

static inline uint32_t rr_crc32c_final(uint32_t crc)
{
	return crc ^ 0xffffffffu;
}

static inline uint32_t rr_crc32c(const void *buf, size_t len)
{
	return rr_crc32c_final(rr_crc32c_update(RR_CRC32C_INIT, buf, len));
}

/* Trailer byte order (RFC 5044 4.4 / RFC 3720 B.4): little endian. */
static inline void rr_crc32c_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t rr_crc32c_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

#endif
