/* SPDX-License-Identifier: BSD-2-Clause */
/* A soft QP connected over a socketpair (soft_socketpair.h): one body for
 * the tests that drive the provider in their own thread. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rdma/soft/rx.h"
#include "soft/soft_socketpair.h"
#include "test.h"

void soft_sp_up(struct soft_sp *s, bool crc, uint32_t max_recv_wr)
{
	struct rpcrdma_cq_attr ca = {.cqe = 64};
	struct rpcrdma_qp_attr qa = {.max_send_wr = 8, .max_recv_wr = max_recv_wr,
				     .max_send_sge = 1, .max_recv_sge = 1};
	struct rr_mpa_conn conn = {.rev = 2, .enhanced = true, .crc = crc, .ird = 8, .ord = 8};
	int sv[2];

	memset(s, 0, sizeof(*s));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &s->ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(s->ctx, &s->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(s->ctx, &ca, &s->cq), 0);
	qa.send_cq = qa.recv_cq = s->cq;
	REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &s->qp), 0);
	s->sq = RR_CONTAINER_OF(RR_BASE(qp, s->qp), struct soft_qp, base);
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	s->peer = sv[1];
	s->sq->fpdu_max = RR_FPDU_DEFAULT;
	REQUIRE_EQ(rr_soft_qp_connected(s->sq, sv[0], &conn, false, false), 0);
}

void soft_sp_down(struct soft_sp *s, struct rpcrdma_mr *mr)
{
	rpcrdma_qp_destroy(s->qp);
	if (mr)
		REQUIRE_EQ(rpcrdma_dereg_mr(mr), 0);
	rpcrdma_cq_destroy(s->cq);
	rpcrdma_pd_free(s->pd);
	rpcrdma_close(s->ctx);
	close(s->peer);
}
