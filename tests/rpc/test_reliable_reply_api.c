/* SPDX-License-Identifier: BSD-2-Clause */
/* Reliable reply through the public RPC API over rdma:// (draft-cel-nfsv4-
 * rpcrdma-reliable-reply-04 under RFC 5531 RPC): rpcrdma_client_reliable_reply()
 * reports the negotiation, rpcrdma_call_set_reply_range() drives the
 * requester's per-call choice (draft 5.3.1), rpcrdma_call_reply_via_read()
 * tells which Replies were pulled from a responder-provided Read chunk.
 * Not run when the software provider is not built in. */
#include "test.h"

#include <stdlib.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"

#define PROG 0x2000019au

/* Returns an opaque of the requested length (a directory-listing stand-in). */
static int h_list(struct rpcrdma_req *r, void *ctx)
{
	static uint8_t buf[1 << 20];
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > sizeof(buf))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	for (uint32_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 13 + n);
	rpcrdma_xdr_put_opaque(rpcrdma_req_results(r), buf, n);
	return RPCRDMA_SVC_OK;
}

TEST(rrep_rpc_public_api)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .connect_timeout_ms = 5000,
					 .inline_size = 4096};   /* Linux's thresholds */
	static const uint32_t sizes[] = {0, 100, 3000, 5000, 100000, 1 << 20};
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_client *c = NULL;
	char url[64];

	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT))
		rr_test_skip("soft provider not built in");
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, 1, h_list, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &c), 0);
	CHECK_EQ(rpcrdma_client_reliable_reply(c), 1);
	for (unsigned i = 0; i < RR_ARRAY_SIZE(sizes); i++) {
		for (int known = 0; known < 2; known++) {
			struct rpcrdma_call *call;
			const void *p;
			uint32_t n = 0;

			REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), sizes[i]);
			/* Large maximum, usually small: unknown or 0..2 MiB. */
			rpcrdma_call_set_reply_range(call, known ? sizes[i] + 28 : 0,
						     known ? sizes[i] + 28 : 0);
			CHECK_EQ(rpcrdma_call_run(call), 0);
			CHECK_EQ(rpcrdma_xdr_get_opaque(rpcrdma_call_results(call), 1 << 20,
							&p, &n), 0);
			CHECK_EQ(n, sizes[i]);
			for (uint32_t j = 0; j < n; j++)
				if (((const uint8_t *)p)[j] != (uint8_t)(j * 13 + n)) {
					CHECK(false);
					break;
				}
			/* A known, certainly-large Reply gets a Reply chunk;
			 * an unknown one larger than inline comes by Read. */
			CHECK_EQ(rpcrdma_call_reply_via_read(call),
				 !known && sizes[i] > 4096 ? 1 : 0);
			rpcrdma_call_destroy(call);
		}
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}
