/* SPDX-License-Identifier: BSD-2-Clause */
/* What a QP's socket is set to when the QP goes RTS (src/rdma/soft/cm.c
 * go_rdma, sock.c), on both sides of a loopback IPv4 connection: the FPDU
 * size is the path MTU's (65,535 - 52 on loopback), not TCP_MAXSEG's (half
 * the peer's window early on: 32 KiB), which takes the socket's address
 * family, now the peer address's rather than a getsockname; and a QP whose
 * caller may wait on its socket has it blocking, with the fast wait's
 * receive timeout, its status flags set without being read first (two
 * system calls less per side on the path to the first Call: issue 16 part
 * AT); and TCP_NODELAY is on at both ends, the accepted one having it from
 * its listening socket, with no setsockopt at accept (issue 16 part BX). */
#include "test.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

static void check_qp(struct rpcrdma_qp *qp)
{
	struct soft_qp *q = soft_net_qp_of(qp);
	struct timeval tv = {0};
	socklen_t l = sizeof(tv);
	int nodelay = 0;
	socklen_t nl = sizeof(nodelay);

	CHECK_EQ(getsockopt(q->obj.fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &nl), 0);
	CHECK_EQ(nodelay, 1);
	CHECK(q->fpdu_max > 32768);
	CHECK(q->fpdu_max <= 65535 - 52);
	CHECK(q->fast_ok);
	if (!q->fast_ok)
		return;
	CHECK_EQ(fcntl(q->obj.fd, F_GETFL) & O_NONBLOCK, 0);
	CHECK_EQ(getsockopt(q->obj.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l), 0);
	/* read back in the kernel's ticks (HZ 100 or more), rounded up */
	CHECK(tv.tv_sec * 1000 + tv.tv_usec / 1000 >= SOFT_FAST_BLOCK_MS);
	CHECK(tv.tv_sec * 1000 + tv.tv_usec / 1000 <= SOFT_FAST_BLOCK_MS + 10);
}

TEST(soft_qp_socket_set_up_at_rts_both_sides)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;

	soft_net_up(&n, 64, 4);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	check_qp(c);
	check_qp(s);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
