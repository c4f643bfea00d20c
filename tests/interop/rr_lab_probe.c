/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_probe: which providers this build of librpcrdma has, and what the
 * RDMA devices of the lab VM look like through the public provider API
 * (include/rpcrdma/rdma.h). Arguments: PROVIDER[:DEVICE[:TRANSPORT]] ...,
 * TRANSPORT one of iwarp, ib, roce; e.g. "verbs:siw0:iwarp verbs:rxe0:roce
 * soft". Prints one "ok"/"not ok" line per argument (open + query, and the
 * transport when given). Exit 0 all passed, 1 a failure, 77 when a provider
 * is not built in or cannot open/query yet ("not yet available"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpcrdma/rdma.h"

static const char *tname(enum rpcrdma_transport t)
{
	return t == RPCRDMA_TRANSPORT_IWARP ? "iwarp" : t == RPCRDMA_TRANSPORT_IB ? "ib"
	       : t == RPCRDMA_TRANSPORT_ROCE ? "roce" : "?";
}

int main(int argc, char **argv)
{
	const char *names[8];
	size_t n = rpcrdma_provider_list(names, 8);
	int fail = 0, na = 0;

	printf("# providers built in:");
	for (size_t i = 0; i < n && i < 8; i++)
		printf(" %s", names[i]);
	printf("\n");
	for (int a = 1; a < argc; a++) {
		char buf[128], *prov, *dev, *want;
		struct rpcrdma_open_attr oa = {0};
		struct rpcrdma_context *ctx = NULL;
		struct rpcrdma_caps caps;
		int rc;

		snprintf(buf, sizeof(buf), "%s", argv[a]);
		prov = strtok(buf, ":");
		dev = strtok(NULL, ":");
		want = strtok(NULL, ":");
		oa.device = dev;
		if (!rpcrdma_provider_available(prov)) {
			printf("# %s: provider not built in\n", argv[a]);
			na++;
			continue;
		}
		rc = rpcrdma_open(prov, &oa, &ctx);
		if (rc) {
			printf("not ok open %s: %s\n", argv[a], strerror(-rc));
			fail++;
			continue;
		}
		rc = rpcrdma_query(ctx, &caps);
		if (rc == -EOPNOTSUPP) {
			printf("# %s: query not implemented yet\n", argv[a]);
			na++;
		} else if (rc) {
			printf("not ok query %s: %s\n", argv[a], strerror(-rc));
			fail++;
		} else {
			int ok = !want || !strcmp(want, tname(caps.transport));

			printf("%s open+query %s: device %s transport %s flags 0x%x%s%s%s%s%s "
			       "max_ird %u max_ord %u max_sge %u max_qp_wr %u pd connect/accept %u/%u\n",
			       ok ? "ok" : "not ok", argv[a], caps.device, tname(caps.transport), caps.flags,
			       caps.flags & RPCRDMA_CAP_INVALIDATABLE ? " INVALIDATABLE" : "",
			       caps.flags & RPCRDMA_CAP_REMOTE_INV ? " REMOTE_INV" : "",
			       caps.flags & RPCRDMA_CAP_COMMIT ? " COMMIT" : "",
			       caps.flags & RPCRDMA_CAP_DURABLE ? " DURABLE" : "",
			       caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE ? " COMMIT_VISIBLE" : "",
			       caps.max_ird, caps.max_ord, caps.max_sge, caps.max_qp_wr,
			       caps.max_private_data_connect, caps.max_private_data_accept);
			printf("# %s: RDMA Commit: %s\n", argv[a], caps.commit);
			fail += !ok;
		}
		rpcrdma_close(ctx);
	}
	if (fail)
		return 1;
	if (na) {
		printf("not yet available: a provider or its query is missing in this build\n");
		return 77;
	}
	return 0;
}
