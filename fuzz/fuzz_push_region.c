/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the push-mode region handle (include/rpcrdma/push.h,
 * XDR per RFC 4506: uint32 stag | uint64 offset | uint64 length | uint32
 * flags), as a client decodes it from a server's results. For any input the
 * decoder fails cleanly (fewer than 24 bytes, or level bits this library
 * does not know) or yields known levels only, and what it yields encodes
 * back to the same 24 bytes. Violations abort. */
#include <stdlib.h>
#include <string.h>

#include "rpc/xbuf.h"
#include "rpcrdma/push.h"

#define FZ_ASSERT(c)                                                            \
	do {                                                                    \
		if (!(c))                                                       \
			abort();                                                \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpcrdma_xdr_dec d;
	struct rpcrdma_xdr_enc e;
	struct rpcrdma_push_region r;
	int rc;

	rr_xbuf_dec_init(&d, data, size);
	rc = rpcrdma_xdr_get_push_region(&d, &r);
	if (size < 24) {
		FZ_ASSERT(rc < 0);
		return 0;
	}
	if (rc) {
		/* the only other refusal: unknown level bits */
		FZ_ASSERT(rc == -EBADMSG);
		FZ_ASSERT(((uint32_t)data[20] << 24 | (uint32_t)data[21] << 16 |
			   (uint32_t)data[22] << 8 | data[23]) &
			  ~(uint32_t)(RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE));
		return 0;
	}
	FZ_ASSERT((r.flags & ~(RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE)) == 0);
	FZ_ASSERT(rpcrdma_xdr_dec_remaining(&d) == size - 24);
	rr_xbuf_enc_init(&e, NULL, 64);
	FZ_ASSERT(rpcrdma_xdr_put_push_region(&e, &r) == 0);
	FZ_ASSERT(rpcrdma_xdr_enc_len(&e) == 24 && memcmp(e.buf, data, 24) == 0);
	rr_xbuf_enc_free(&e);
	return 0;
}
