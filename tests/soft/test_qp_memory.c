/* SPDX-License-Identifier: BSD-2-Clause */
/* What a soft queue pair holds in memory from its creation (issue 16 part L,
 * docs/soft-iwarp.md "Memory of a queue pair"): its inbound Read/Commit
 * queue (RFC 5040 section 6.4: IRD entries, 252 KiB) is mapped only when the
 * peer's first Read Request arrives, so a QP nobody reads from never maps it;
 * after that the responder answers every Read as before. Two endpoints over
 * loopback TCP through the public API (tests/soft_net.h). */
#include "test.h"

#include <string.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF 65536u

/* Connected and exchanging Sends, neither side has an inbound Read queue;
 * the first Read Request maps the responder's (only), and Reads go on being
 * answered from it. */
TEST(soft_qp_read_queue_mapped_on_first_request)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	soft_net_up_buf(&n, 64, 16, NET_BUF);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	CHECK(soft_net_qp_of(s)->irq == NULL);
	/* a Send each way maps nothing */
	soft_net_post_recv(&n, s, 1, 0, 64);
	soft_net_post_send(&n, c, 2, RPCRDMA_WR_SEND, 64, 16, 0, true);
	REQUIRE_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	CHECK(soft_net_qp_of(s)->irq == NULL);
	/* the first Read: the responder's queue appears, the requester's not */
	soft_net_read_check(&n, c, 3, 256);
	CHECK(soft_net_qp_of(s)->irq != NULL);
	CHECK(soft_net_qp_of(c)->irq == NULL);
	/* more Reads than IRD entries in all, each answered */
	for (uint64_t i = 0; i < 2u * SOFT_MAX_IRD; i += 16)
		soft_net_read_check(&n, c, 4 + i, 512);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
