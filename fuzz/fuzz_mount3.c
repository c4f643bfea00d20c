/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for rpcrdma-nfsd's MOUNT v3 argument decoder (RFC 1813
 * appendix I, dirpath<MNTPATHLEN> of MNT and UMNT; tools/nfsd/nfs3_xdr.c):
 * accept or refuse with -EBADMSG, never read out of bounds; an accepted
 * path is at most 1024 bytes, inside the input, and the whole input was
 * consumed. */
#include <stdlib.h>

#include "nfs3_xdr.h"
#include "rpc/xbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpcrdma_xdr_dec d;
	struct nfs3_str p;
	int rc;

	rr_xbuf_dec_init(&d, data, size);
	rc = mnt3_decode_dirpath(&d, &p);
	if (rc != 0 && rc != -EBADMSG)
		abort();
	if (rc == 0 && (p.len > MNT_PATH_MAX || (p.len && ((const uint8_t *)p.p < data ||
							   (const uint8_t *)p.p + p.len > data + size)) ||
			size != 4 + ((p.len + 3u) & ~3u)))
		abort();
	return 0;
}
