/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's libtirpc backend (built when <rpc/rpc.h> is there): the
 * benchmark service as an svc_vc_create server run by svc_run, and the
 * client side as clnttcp_create + clnt_call, one call at a time (libtirpc's
 * clnt_call is synchronous). */
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"

#if BENCH_HAVE_TIRPC

/* -- libtirpc -- */
struct tdata {
	char *buf;
	u_int len;
};

static bool_t xdr_tdata(XDR *x, struct tdata *d)
{
	return xdr_bytes(x, &d->buf, &d->len, MAXIO);
}

/* xdr_void is declared without parameters; this one has the xdrproc_t shape */
static bool_t xdr_nothing(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

static uint8_t *tirpc_wbuf;

static void tirpc_dispatch(struct svc_req *rq, SVCXPRT *xp)
{
	switch (rq->rq_proc) {
	case 0:
		svc_sendreply(xp, (xdrproc_t)xdr_nothing, NULL);
		break;
	case BENCH_READ: {
		u_int count = 0;
		struct tdata d;

		if (!svc_getargs(xp, (xdrproc_t)xdr_u_int, (char *)&count)) {
			svcerr_decode(xp);
			break;
		}
		d.buf = (char *)srcbuf;
		d.len = count > MAXIO ? MAXIO : count;
		svc_sendreply(xp, (xdrproc_t)xdr_tdata, (char *)&d);
		break;
	}
	case BENCH_WRITE: {
		struct tdata d = {(char *)tirpc_wbuf, 0};

		if (!svc_getargs(xp, (xdrproc_t)xdr_tdata, (char *)&d)) {
			svcerr_decode(xp);
			break;
		}
		svc_sendreply(xp, (xdrproc_t)xdr_u_int, (char *)&d.len);
		break;
	}
	default:
		svcerr_noproc(xp);
	}
}

int tirpc_server(int lfd)
{
	SVCXPRT *xp;

	tirpc_wbuf = malloc(MAXIO);
	xp = svc_vc_create(lfd, 0, 0);
	if (!tirpc_wbuf || !xp || !svc_register(xp, BENCH_PROG, BENCH_VERS, tirpc_dispatch, 0))
		return -EIO;
	return 0;
}

/* A libtirpc CLIENT (clnttcp_create) on a connected socket. */
int tirpc_open(struct conn *c)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = connect_loopback(tp_port[c->tp]);

	if (fd < 0)
		return fd;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)tp_port[c->tp]);
	c->tc = clnttcp_create(&sin, BENCH_PROG, BENCH_VERS, &fd, 0, 0);
	if (!c->tc) {
		close(fd);
		return -ECONNREFUSED;
	}
	clnt_control(c->tc, CLSET_FD_CLOSE, NULL);
	return 0;
}

/* One operation (conn_op) as a clnt_call: NULL, READ or WRITE of @size. */
int tirpc_op(struct conn *c, int op, uint32_t size)
{
	struct timeval tv = {30, 0};
	enum clnt_stat st;

	if (op == 0) {
		st = clnt_call(c->tc, 0, (xdrproc_t)xdr_nothing, NULL, (xdrproc_t)xdr_nothing, NULL,
			       tv);
	} else if (op == 1) {
		u_int count = size;
		struct tdata d = {(char *)c->sink, 0};

		st = clnt_call(c->tc, BENCH_READ, (xdrproc_t)xdr_u_int, (char *)&count,
			       (xdrproc_t)xdr_tdata, (char *)&d, tv);
		if (st == RPC_SUCCESS && d.len != size)
			return -EBADMSG;
	} else {
		struct tdata d = {(char *)srcbuf, size};
		u_int n = 0;

		st = clnt_call(c->tc, BENCH_WRITE, (xdrproc_t)xdr_tdata, (char *)&d,
			       (xdrproc_t)xdr_u_int, (char *)&n, tv);
		if (st == RPC_SUCCESS && n != size)
			return -EBADMSG;
	}
	return st == RPC_SUCCESS ? 0 : -EIO;
}

#endif
