/* SPDX-License-Identifier: BSD-2-Clause */
/* The duplicate request cache (src/rpc/drc.c) in front of an rpcgen-style
 * service (rpcrdma_server_register_svc, libtirpc's svc_getargs /
 * svc_sendreply / svcerr_*): a retransmitted Call (RFC 5531 section 9, same
 * XID, sent by a raw record-marking client, section 11) of a procedure that
 * answers SUCCESS runs once; one whose service answered SYSTEM_ERR through
 * svcerr_systemerr (the dispatch function "succeeds" at the librpcrdma
 * level) is not cached and runs again; an idempotent-marked one runs again.
 * Built only when libtirpc's headers are on the path and the library has
 * the libtirpc glue. */
#include "test.h"
#include "tirpc_hdr.h"

#ifdef HAVE_TIRPC_HDR
#include <rpc/rpc.h>
#include <stdatomic.h>
#include <unistd.h>

#include "rpc_raw.h"
#include "rpcrdma/rpc.h"

#define DPROG 0x200001ddu

static atomic_uint druns;

static void ddispatch(struct svc_req *rq, SVCXPRT *xp)
{
	u_int v = 0;

	if (!svc_getargs(xp, (xdrproc_t)xdr_u_int, (caddr_t)&v)) {
		svcerr_decode(xp);
		return;
	}
	v = atomic_fetch_add(&druns, 1) + 1;
	if (rq->rq_proc == 2) {
		svcerr_systemerr(xp);
		return;
	}
	svc_sendreply(xp, (xdrproc_t)xdr_u_int, (caddr_t)&v);
}

/* Sends Call @xid of @proc (u32 argument 1); returns the accept_stat and,
 * for SUCCESS, the u32 result in *@res. */
static uint32_t dxchg(int fd, uint32_t xid, uint32_t proc, uint32_t *res)
{
	const uint32_t one = 1;
	uint8_t r[64];
	long len;

	rpc_raw_send_call(fd, xid, DPROG, 1, proc, &one, 1);
	len = rpc_raw_recv_record(fd, r, sizeof(r), 5000);
	REQUIRE(len >= 24);
	CHECK_EQ(rr_get_be32(r), xid);
	if (rr_get_be32(r + 20) == 0) {
		REQUIRE_EQ(len, 28);
		*res = rr_get_be32(r + 24);
	}
	return rr_get_be32(r + 20);
}

TEST(drc_tirpc_service)
{
	struct rpcrdma_server_opts o = {.threads = 2, .drc_entries = 32};
	struct rpcrdma_server *s = NULL;
	uint32_t res = 0;
	int rc, fd;

	atomic_store(&druns, 0);
	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &o, &s), 0);
	rc = rpcrdma_server_register_svc(s, DPROG, 1, ddispatch);
	if (rc == -ENOSYS) {
		rr_test_mark_skipped("built without libtirpc");
		rpcrdma_server_destroy(s);
		return;
	}
	REQUIRE_EQ(rc, 0);
	REQUIRE_EQ(rpcrdma_server_set_idempotent(s, DPROG, 1, 3), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	fd = rpc_raw_connect(rpcrdma_server_port(s));
	CHECK_EQ(dxchg(fd, 0x9001, 1, &res), 0);
	CHECK_EQ(res, 1);
	CHECK_EQ(dxchg(fd, 0x9001, 1, &res), 0);
	CHECK_EQ(res, 1);                                  /* from the cache */
	CHECK_EQ(dxchg(fd, 0x9002, 2, &res), RPCRDMA_SYSTEM_ERR);
	CHECK_EQ(dxchg(fd, 0x9002, 2, &res), RPCRDMA_SYSTEM_ERR);
	CHECK_EQ(atomic_load(&druns), 3);                  /* SYSTEM_ERR ran twice */
	CHECK_EQ(dxchg(fd, 0x9003, 3, &res), 0);
	CHECK_EQ(res, 4);
	CHECK_EQ(dxchg(fd, 0x9003, 3, &res), 0);
	CHECK_EQ(res, 5);                                  /* idempotent: runs again */
	close(fd);
	rpcrdma_server_destroy(s);
}

#else

/* Indented: CMake registers the name once, from the branch above. */
 TEST(drc_tirpc_service)
{
	rr_test_skip("libtirpc headers not found");
}

#endif
