/* SPDX-License-Identifier: BSD-2-Clause */
/* A Call's description checked once, by the planner (issue 16 part GC):
 * rr_conn_submit no longer checks the sinks' count and the parts' array
 * itself before planning; the planner's own checks refuse what it refused,
 * with the same -EINVAL, synchronously (nothing sent, nothing completed,
 * nothing left queued or holding a credit), on a live rdma:// connection
 * (the soft provider) whose next valid Calls are then answered as before. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "xprt_harness.h"

static struct rr_tp_server *chk_srv;

static void chk_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer16(chk_srv, r);
}

TEST(submit_refuses_a_bad_description_synchronously)
{
	static uint8_t sink_mem[RR_XPRT_MAX_ITEMS + 1][8];
	struct rr_xprt_sink sinks[RR_XPRT_MAX_ITEMS + 1];
	struct rr_tp_conf sc, cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *p = calloc(1, sizeof(*p));
	struct rr_xprt_stats st0, st1;
	unsigned done = 0;

	if (!rr_th_soft_ok()) {
		free(p);
		return;
	}
	REQUIRE(p);
	for (unsigned i = 0; i < RR_ARRAY_SIZE(sinks); i++)
		sinks[i] = (struct rr_xprt_sink){sink_mem[i], sizeof(sink_mem[i])};
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	cc.credits = 1;   /* a refused Call that kept a credit would stall the next */
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, chk_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &chk_srv), 0);
	rr_th_sq_start(&sq);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(chk_srv), rr_th_cl_count), 0);
	/* one answered first: the connection is up and granted */
	rr_th_small_submit(&c, p, 0x5000);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p->r.status, 0);
	rr_tp_client_release_reply(c.tp, &p->r);
	rr_tp_client_stats(c.tp, &st0);

	for (unsigned round = 0; round < 3; round++) {
		/* parts without their array */
		rr_th_small_fill(p, 0x5100 + round);
		p->r.parts = NULL;
		CHECK_EQ(rr_tp_client_submit(c.tp, &p->r), -EINVAL);
		/* parts without their array, and more of them */
		rr_th_small_fill(p, 0x5200 + round);
		p->r.parts = NULL;
		p->r.nparts = 3;
		CHECK_EQ(rr_tp_client_submit(c.tp, &p->r), -EINVAL);
		/* one sink more than RR_XPRT_MAX_ITEMS */
		rr_th_small_fill(p, 0x5300 + round);
		p->r.sinks = sinks;
		p->r.nsinks = RR_XPRT_MAX_ITEMS + 1;
		CHECK_EQ(rr_tp_client_submit(c.tp, &p->r), -EINVAL);
		/* far more */
		rr_th_small_fill(p, 0x5400 + round);
		p->r.sinks = sinks;
		p->r.nsinks = 1u << 20;
		CHECK_EQ(rr_tp_client_submit(c.tp, &p->r), -EINVAL);
		/* none of them completed nor held anything: the next valid
		 * Call, on one credit, is sent and answered */
		rr_th_small_submit(&c, p, 0x5500 + round);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		CHECK_EQ(p->r.status, 0);
		CHECK_EQ(rr_get_be32(p->r.reply), 0x5500 + round);
		rr_tp_client_release_reply(c.tp, &p->r);
	}
	rr_th_sleep_ms(20);
	pthread_mutex_lock(&c.lock);
	CHECK_EQ(c.done, done);   /* no completion of a refused Call */
	pthread_mutex_unlock(&c.lock);
	rr_tp_client_stats(c.tp, &st1);
	CHECK_EQ(st1.sends - st0.sends, 3u);   /* the valid ones only */
	CHECK_EQ(st1.msg_sent - st0.msg_sent, 3u);
	CHECK_EQ(st1.reconnects, st0.reconnects);
	rr_th_cl_stop(&c);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(chk_srv);
	rr_th_sq_destroy(&sq);
	free(p);
}
