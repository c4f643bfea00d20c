/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's per-QP receive ring is as wide as the QP's
 * max_recv_sge (issue 16 part J, docs/soft-iwarp.md "Work queues"): a QP
 * created for one SGE per Receive refuses a wider one (-EINVAL, the verbs
 * rule) and reports the width it granted; a QP created for three scatters
 * each message over its Receive's three SGEs, in order, while its ring
 * wraps several times with the wider stride. Two endpoints over loopback
 * TCP through the public API (RFC 5040 Send). */
#include "test.h"

#include <stdlib.h>

#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (1u << 20)

static struct rpcrdma_qp *qp_sge(struct net *n, struct rpcrdma_cq *cq, uint32_t depth, uint32_t sge)
{
	struct rpcrdma_qp_attr qa = {.send_cq = cq, .recv_cq = cq, .max_send_wr = depth,
				     .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = sge};
	struct rpcrdma_qp *qp;

	REQUIRE_EQ(rpcrdma_qp_create(n->pd, &qa, &qp), 0);
	return qp;
}

TEST(soft_rq_width_follows_max_recv_sge)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	uint32_t lkey;

	soft_net_up_buf(&n, 256, 16, NET_BUF);
	lkey = rpcrdma_mr_lkey(n.mr);
	c = qp_sge(&n, n.ccq, 4, 1);
	s = qp_sge(&n, n.scq, 4, 3);
	{
		struct rpcrdma_qp_attr a;

		REQUIRE_EQ(rpcrdma_qp_query(c, &a), 0);
		CHECK_EQ(a.max_recv_sge, 1u);   /* SOFT_MAX_SGE (16) before */
		REQUIRE_EQ(rpcrdma_qp_query(s, &a), 0);
		CHECK_EQ(a.max_recv_sge, 3u);
	}
	{
		/* two SGEs on a one-SGE QP: refused, nothing posted */
		struct rpcrdma_sge sg[2] = {{(uintptr_t)n.buf, 8, lkey}, {(uintptr_t)n.buf + 8, 8, lkey}};
		struct rpcrdma_recv_wr rw = {.wr_id = 7, .sg_list = sg, .num_sge = 2};
		struct rpcrdma_recv_wr *bad = NULL;

		CHECK_EQ(rpcrdma_post_recv(c, &rw, &bad), -EINVAL);
		CHECK(bad == &rw);
		rw.num_sge = 1;
		CHECK_EQ(rpcrdma_post_recv(c, &rw, &bad), 0);
	}
	soft_net_link(&n, c, s, &cid, &sid);
	/* 13 messages through a 4-entry ring of 3-SGE Receives: it wraps
	 * three times; each message of 7 + 5 + 9 bytes lands in its three
	 * pieces (placed apart in the buffer), in order */
	for (uint32_t i = 0; i < 13; i++) {
		uint8_t *dst = n.buf + 65536;
		struct rpcrdma_sge sg[3] = {{(uintptr_t)dst, 7, lkey},
					    {(uintptr_t)dst + 100, 5, lkey},
					    {(uintptr_t)dst + 200, 9, lkey}};
		struct rpcrdma_recv_wr rw = {.wr_id = 100 + i, .sg_list = sg, .num_sge = 3};

		memset(dst, 0, 256);
		REQUIRE_EQ(rpcrdma_post_recv(s, &rw, NULL), 0);
		for (uint32_t k = 0; k < 21; k++)
			n.buf[k] = (uint8_t)(i * 31 + k);
		soft_net_post_send(&n, c, 1, RPCRDMA_WR_SEND, 0, 21, 0, false);
		REQUIRE_EQ(rpcrdma_cq_wait(n.scq, 1, &wc, 5000), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 100 + i);
		CHECK_EQ(wc.byte_len, 21u);
		CHECK_EQ(memcmp(dst, n.buf, 7), 0);
		CHECK_EQ(memcmp(dst + 100, n.buf + 7, 5), 0);
		CHECK_EQ(memcmp(dst + 200, n.buf + 12, 9), 0);
		CHECK_EQ(dst[7], 0);
		CHECK_EQ(dst[105], 0);
	}
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
