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

#if defined(__has_include)
#if __has_include(<rpc/rpc.h>)
#define HAVE_TIRPC_HDR 1
#endif
#endif

#ifdef HAVE_TIRPC_HDR
#include <arpa/inet.h>
#include <poll.h>
#include <rpc/rpc.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

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

static int dconnect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	REQUIRE(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static size_t drecv(int fd, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pfd, 1, 5000) <= 0)
			break;
		k = recv(fd, p + got, n - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

/* Sends Call @xid of @proc (u32 argument 1); returns the accept_stat and,
 * for SUCCESS, the u32 result in *@res. */
static uint32_t dxchg(int fd, uint32_t xid, uint32_t proc, uint32_t *res)
{
	static const uint32_t w[12] = {0x80000000u | 44, 0, 0, 2, DPROG, 1, 0, 0, 0, 0, 0, 1};
	uint8_t b[48], r[64];
	uint32_t len;

	for (unsigned i = 0; i < 12; i++)
		rr_put_be32(b + 4 * i, w[i]);
	rr_put_be32(b + 4, xid);
	rr_put_be32(b + 24, proc);
	REQUIRE_EQ(send(fd, b, sizeof(b), MSG_NOSIGNAL), (ssize_t)sizeof(b));
	REQUIRE_EQ(drecv(fd, r, 4), 4u);
	len = rr_get_be32(r) & 0x7fffffffu;
	REQUIRE(len >= 24 && len <= sizeof(r));
	REQUIRE_EQ(drecv(fd, r, len), len);
	CHECK_EQ(rr_get_be32(r), xid);
	if (rr_get_be32(r + 20) == 0) {
		REQUIRE_EQ(len, 28u);
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
		printf("  built without libtirpc: test not run\n");
		rpcrdma_server_destroy(s);
		return;
	}
	REQUIRE_EQ(rc, 0);
	REQUIRE_EQ(rpcrdma_server_set_idempotent(s, DPROG, 1, 3), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	fd = dconnect(rpcrdma_server_port(s));
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
	printf("  libtirpc headers not found: test not run\n");
}

#endif
