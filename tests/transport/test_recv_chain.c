/* SPDX-License-Identifier: BSD-2-Clause */
/* A new connection's own Receives, posted at connect as chains of work
 * requests (src/transport/rdma/conn.c tp_post_first_recvs, issue 16 part
 * DK) rather than one post each: over the soft provider, for Receive
 * counts below, at, just past and well past a chain's length (so whole
 * chains, a short last one and a lone one; a client posts its backward
 * Receives and a few more at connect, the rest by demand: part EA, so its
 * bc_slots set the count), the client's receive queue after its first
 * Reply (kept, so its Receive is off the queue) holds every other Receive
 * posted at connect exactly once, in buffer order, each with its own wr_id
 * and its own buffer of the connection's Receive size; the server, given
 * its own Receives (no shared queue), posts all of them the same way and
 * answers. */
#include <stdlib.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/engine.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static struct rr_tp_server *rc_srv;

static void rc_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer80(rc_srv, r);
}

/* Checks the client's queue after one Reply kept; returns the Receives
 * posted at connect. */
static uint32_t rc_check_queue(struct rr_th_cl *c)
{
	struct tp_conn *cn = c->tp->conn;
	struct soft_qp *qp;
	uint32_t nrecv, rsize, bad = 0;
	const uint8_t *rbuf;

	REQUIRE(cn != NULL);
	rr_lock(&c->tp->ep.lock);
	nrecv = cn->rbase + TP_RECV_BATCH - 1;
	REQUIRE(nrecv <= cn->nrecv);
	rsize = cn->rsize;
	rbuf = cn->rbuf;
	CHECK_EQ(cn->lent, 1u);   /* the Reply is in its Receive, off the queue */
	rr_unlock(&c->tp->ep.lock);
	qp = RR_CONTAINER_OF(RR_BASE(qp, cn->qp), struct soft_qp, base);
	rr_lock(&qp->rx_lock);
	CHECK_EQ(qp->rq_count, nrecv - 1);
	for (uint32_t i = 0; i < qp->rq_count; i++) {
		const struct soft_qrqe *e = soft_rq_at(qp, ring_idx(qp->rq_head, i, qp->rq_cap));

		/* Receive 0 took the Reply: the rest follow it in order */
		if (e->wr_id != WRID(WR_RECV, i + 1) || e->iovcnt != 1 ||
		    e->iov[0].iov_base != (const void *)(rbuf + (size_t)(i + 1) * rsize) ||
		    e->iov[0].iov_len != rsize)
			bad++;
	}
	rr_unlock(&qp->rx_lock);
	CHECK_EQ(bad, 0u);
	return nrecv;
}

TEST(xprt_connect_posts_its_receives_as_chains_in_order)
{
	static const uint32_t credits[] = {1, 23, 24, 25, 56, 57, 0};
	/* the client's: TP_RECV_SLACK + TP_RECV_BATCH - 1 (7) more posted */
	static const uint32_t bc[] = {2, 24, 25, 26, 57, 58, 0};
	static struct rr_th_small p;
	uint32_t seen_short = 0, seen_long = 0;

	if (!rr_th_soft_ok())
		return;
	for (size_t k = 0; k < sizeof(credits) / sizeof(credits[0]); k++) {
		struct rr_tp_conf sc, cc;
		struct rr_th_sq sq;
		struct rr_th_cl c;
		uint32_t n;

		memset(&sq, 0, sizeof(sq));
		rr_th_sq_init(&sq, rc_answer);
		rr_tp_conf_default(&sc);
		if (credits[k])
			sc.credits = credits[k];
		sc.no_srq = true;   /* the server's own Receives, posted as the client's */
		REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &rc_srv), 0);
		rr_th_sq_start(&sq);
		rr_tp_conf_default(&cc);
		if (credits[k])
			cc.credits = credits[k];
		cc.bc_slots = bc[k];
		REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(rc_srv), rr_th_cl_count), 0);
		rr_th_small_submit(&c, &p, 0x3000u + (uint32_t)k);
		REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
		CHECK_EQ(p.r.status, 0);
		CHECK_EQ(p.r.reply_len, 80);
		n = rc_check_queue(&c);
		printf("  credits %u, bc_slots %u: %u Receives at connect\n", credits[k], bc[k], n);
		if (n <= 32)
			seen_short++;
		else if (n % 32 != 0)
			seen_long++;
		rr_tp_client_release_reply(c.tp, &p.r);
		rr_th_cl_stop(&c);
		rr_th_sq_stop(&sq);
		rr_tp_server_destroy(rc_srv);
		rr_th_sq_destroy(&sq);
	}
	CHECK(seen_short > 0);   /* one chain */
	CHECK(seen_long > 0);    /* whole chains and a short last one */
}
