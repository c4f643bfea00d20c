/* SPDX-License-Identifier: BSD-2-Clause */
/* The client's soft CQ overruns (made to, through the provider's race
 * hook: its ring is put in the overrun state right after a push, so the
 * next completion pushed there is lost): the transport ends the connection
 * instead of waiting for a completion that was dropped, and reconnects. The
 * old connection still holds that CQ (a Reply of it is still lent to the
 * test), so the new one is offered the same CQ first: the provider refuses
 * a QP there (-EIO) and the connection goes to another CQ (conn.c conn_new,
 * port.c tp_cq_refused) rather than failing for good. Every Call
 * completes, the last ones with their Replies. The client's counters say so
 * (group faults: one connection ended by an overrun); the server's
 * connection, ended by the client, counts no fault. */
#include <stdlib.h>

#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static struct rr_tp_server *ov_srv;

/* Answers each Call with 80 bytes (lent: rr_th_answer80). */
static void ov_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer80(ov_srv, r);
}

static atomic_bool ov_armed, ov_fired;
static struct tp_cq *ov_target;

/* At the first push into @ov_target's CQ once armed: its ring as if it had
 * overrun (the overrun state is sticky: the next push is lost). */
static void overrun_next(enum soft_race pt, void *obj)
{
	struct soft_cq *sc = obj;

	if (pt != SOFT_RACE_PUSH || sc->base.user_ctx != ov_target ||
	    !atomic_exchange(&ov_armed, false))
		return;
	rr_lock(&sc->ring.lock);
	__atomic_store_n(&sc->ring.overflow, true, __ATOMIC_SEQ_CST);
	rr_unlock(&sc->ring.lock);
	atomic_store(&ov_fired, true);
}

TEST(xprt_cq_overrun_ends_connection_not_calls)
{
	struct rr_tp_conf sc, cc;
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *p = calloc(8, sizeof(*p));
	struct rr_xprt_stats st;
	rr_soft_race_fn prev = atomic_load(&rr_soft_race_hook);
	uint64_t lost0 = atomic_load(&soft_counters.cq_overflows);
	unsigned done = 0, ok = 0;

	if (!rr_th_soft_ok()) {
		free(p);
		return;
	}
	REQUIRE(p != NULL);
	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, ov_answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &ov_srv), 0);
	rr_th_sq_start(&sq);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(ov_srv), rr_th_cl_count), 0);
	rr_th_small_submit(&c, &p[0], 0x100);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[0].r.status, 0);
	/* kept: its connection, and the CQ it is on, stay until released */
	REQUIRE(p[0].r.lent != NULL);
	rr_lock(&c.tp->ep.lock);
	ov_target = c.tp->conn->tcq;
	rr_unlock(&c.tp->ep.lock);
	REQUIRE(ov_target != NULL);
	atomic_store(&ov_fired, false);
	atomic_store(&ov_armed, true);
	rr_soft_test_set_race_hook(overrun_next);
	/* Calls one at a time: one of them, or its Reply, meets the overrun;
	 * each still completes (an error, or its Reply after the reconnect) */
	for (unsigned i = 1; i < 8; i++) {
		rr_th_small_submit(&c, &p[i], 0x100 + i);
		REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
		ok += p[i].r.status == 0;
		if (p[i].r.status == 0)
			rr_tp_client_release_reply(c.tp, &p[i].r);
	}
	rr_soft_test_set_race_hook(prev);
	CHECK(atomic_load(&ov_fired));
	CHECK(atomic_load(&soft_counters.cq_overflows) > lost0);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.reconnects >= 1);
	CHECK_EQ(st.cq_overruns, 1);
	CHECK_EQ(st.cq_failures + st.wr_errors + st.qp_fatal, 0);
	rr_tp_server_stats(ov_srv, &st);
	CHECK_EQ(st.cq_overruns + st.cq_failures + st.cq_refused, 0);
	/* the last Calls went over a connection on another CQ */
	CHECK_EQ(p[7].r.status, 0);
	CHECK(ok >= 1);
	rr_lock(&c.tp->ep.lock);
	CHECK(c.tp->conn && c.tp->conn->tcq != ov_target);
	rr_unlock(&c.tp->ep.lock);
	rr_tp_client_release_reply(c.tp, &p[0].r);
	rr_th_cl_stop(&c);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(ov_srv);
	rr_th_sq_destroy(&sq);
	free(p);
}
