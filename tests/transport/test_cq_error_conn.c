/* SPDX-License-Identifier: BSD-2-Clause */
/* A CQ of the client that reports an error (made to, through the dispatch
 * layer's race point rr_cq_test_fail: every poll, arm, wait and
 * notification read of it answers that errno, as a CQ that failed would):
 * the transport takes it as a failure, not as "empty" -- the connection on
 * it ends with that errno (tp_cq_failed: q->err), the CQ is never polled or
 * armed again (no loop spins on it: its answers are counted), the Call that
 * was waiting for a Reply there completes rather than hangs, and the client
 * reconnects on another CQ. Once through the progress loop (the Reply
 * comes while the loop watches the CQ), once through a caller thread
 * receiving for itself (rr_tp_client_wait). And a server connection's CQ
 * that fails as a Call is answered: the server's loop ends that connection
 * (it spun re-serving the CQ before, and the client's next Call hung).
 * Each end is counted under its cause (rpcrdma/stats.h faults: cq_failures)
 * on the side whose CQ failed, not on the other. */
#include <stdlib.h>

#include "rdma/provider.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static struct rr_tp_server *ce_srv;

/* Answers each Call with 80 bytes (lent: rr_th_answer80). */
static void ce_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer80(ce_srv, r);
}

/* A server whose worker answers with @answer, and a client of it. */
static void ce_up(struct rr_th_sq *sq, void (*answer)(struct rr_th_sq *, struct rr_conn_sreq *),
		  struct rr_th_cl *c)
{
	struct rr_tp_conf sc, cc;

	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	memset(sq, 0, sizeof(*sq));
	rr_th_sq_init(sq, answer);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, sq, &ce_srv), 0);
	rr_th_sq_start(sq);
	REQUIRE_EQ(rr_th_cl_start(c, &cc, rr_tp_server_port(ce_srv), rr_th_cl_count), 0);
}

static void ce_down(struct rr_th_sq *sq, struct rr_th_cl *c)
{
	rr_th_cl_stop(c);
	rr_th_sq_stop(sq);
	rr_tp_server_destroy(ce_srv);
	rr_th_sq_destroy(sq);
}

/* The client's CQ now (a Reply of its connection, lent to the test, keeps
 * that connection and its CQ until released). */
static struct tp_cq *ce_cq(struct rr_th_cl *c)
{
	struct tp_cq *q;

	rr_lock(&c->tp->ep.lock);
	q = c->tp->conn ? c->tp->conn->tcq : NULL;
	rr_unlock(&c->tp->ep.lock);
	return q;
}

static bool ce_one_held(void *arg)
{
	return rr_th_sq_nheld(arg) >= 1;
}

/* Call @p is held by the server; @q's CQ then fails with @err and the
 * server answers. @sync: the test thread receives for the Call
 * (rr_tp_client_wait) instead of leaving it to the progress loop. The Call
 * completes (an error, or its Reply after the reconnect). */
static void ce_fail_during_call(struct rr_th_cl *c, struct rr_th_sq *sq, struct tp_cq *q,
				struct rr_th_small *p, uint32_t xid, int err, unsigned done, bool sync)
{
	pthread_mutex_lock(&sq->lock);
	sq->hold = true;
	pthread_mutex_unlock(&sq->lock);
	rr_th_small_submit(c, p, xid);
	REQUIRE(rr_test_until(ce_one_held, sq, RR_TEST_WAIT_MS));
	rr_cq_test_fail(q->cq, err);
	rr_th_sq_release_held(sq);
	if (sync)
		rr_tp_client_wait(c->tp, &p->r, 10000);
	REQUIRE(rr_th_cl_wait(c, done, RR_TEST_WAIT_MS));
	CHECK_EQ(atomic_load(&q->err), err);
}

TEST(xprt_cq_error_ends_connection_no_spin)
{
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *p = calloc(8, sizeof(*p));
	struct rr_xprt_stats st;
	struct tp_cq *q1, *q2, *q3;
	uint64_t h1, h2;
	unsigned done = 0;

	if (!rr_th_soft_ok()) {
		free(p);
		return;
	}
	REQUIRE(p != NULL);
	ce_up(&sq, ce_answer, &c);

	/* the first connection: its Reply kept, so is its CQ */
	rr_th_small_submit(&c, &p[0], 0x100);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	REQUIRE_EQ(p[0].r.status, 0);
	REQUIRE(p[0].r.lent != NULL);
	q1 = ce_cq(&c);
	REQUIRE(q1 != NULL);

	/* its CQ fails while a Reply is on its way: the loop's path */
	ce_fail_during_call(&c, &sq, q1, &p[1], 0x101, -EIO, ++done, false);
	if (p[1].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[1].r);

	/* the next Call goes over a new connection on another CQ */
	rr_th_small_submit(&c, &p[2], 0x102);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[2].r.status, 0);
	q2 = ce_cq(&c);
	CHECK(q2 != NULL && q2 != q1);
	/* the failed CQ is left alone: nothing polls or arms it any more
	 * (a loop spinning on it would answer thousands of times during a
	 * round trip; a wide bound) */
	h1 = rr_cq_test_hits(q1->cq);
	rr_th_small_submit(&c, &p[3], 0x103);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[3].r.status, 0);
	if (p[3].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[3].r);
	h2 = rr_cq_test_hits(q1->cq);
	CHECK(h2 - h1 <= 2);

	/* the second connection's CQ fails under a caller receiving itself */
	REQUIRE(p[2].r.status == 0 && p[2].r.lent != NULL);
	REQUIRE(q2 != NULL && q2 != q1);
	ce_fail_during_call(&c, &sq, q2, &p[4], 0x104, -EPROTO, ++done, true);
	if (p[4].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[4].r);
	rr_th_small_submit(&c, &p[5], 0x105);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[5].r.status, 0);
	if (p[5].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[5].r);
	q3 = ce_cq(&c);
	CHECK(q3 != NULL && q3 != q1 && q3 != q2);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.reconnects >= 2);
	CHECK(st.fatal_errors >= 2);
	/* counted under their cause (group faults): two CQs failed */
	CHECK_EQ(st.cq_failures, 2);
	CHECK_EQ(st.cq_overruns, 0);

	rr_tp_client_release_reply(c.tp, &p[0].r);
	rr_tp_client_release_reply(c.tp, &p[2].r);
	ce_down(&sq, &c);
	free(p);
}

static atomic_uint sv_fail_xid;
static atomic_int sv_reply_rc, sv_cq_err;

static bool sv_cq_failed(void *arg)
{
	return atomic_load(&((struct tp_cq *)arg)->err) != 0;
}

static bool sv_err_noted(void *arg)
{
	(void)arg;
	return atomic_load(&sv_cq_err) != 0;
}

static bool sv_cq_counted(void *arg)
{
	struct rr_xprt_stats st;

	(void)arg;
	rr_tp_server_stats(ce_srv, &st);
	return st.cq_failures != 0;
}

/* Answers each Call with 16 bytes; the Call of sv_fail_xid first makes its
 * connection's CQ fail, then answers and notes what the reply and the CQ
 * said (the request pins its connection, and the CQ, until done). */
static void sv_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = r->xconn;
	uint8_t hdr[16];
	struct rr_xprt_part part = {hdr, sizeof(hdr), false};

	(void)sq;
	if (r->xid != atomic_load(&sv_fail_xid) || !cn || !cn->tcq) {
		rr_th_answer16(ce_srv, r);
		return;
	}
	rr_cq_test_fail(cn->tcq->cq, -EACCES);
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 8, 0);
	rr_put_be32(hdr + 12, 0x600d);
	/* its Send's completion is never polled now: the loop's poll fails
	 * the CQ (and ends the connection) rather than take it as empty */
	atomic_store(&sv_reply_rc, rr_tp_server_reply(ce_srv, r, &part, 1, NULL));
	(void)rr_test_until(sv_cq_failed, cn->tcq, RR_TEST_WAIT_MS);
	atomic_store(&sv_cq_err, atomic_load(&cn->tcq->err) ? atomic_load(&cn->tcq->err) : 1);
	rr_tp_server_done(ce_srv, r);
}

TEST(xprt_server_cq_error_ends_connection)
{
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small *p = calloc(4, sizeof(*p));
	struct rr_xprt_stats st;
	unsigned done = 0;

	if (!rr_th_soft_ok()) {
		free(p);
		return;
	}
	REQUIRE(p != NULL);
	atomic_store(&sv_fail_xid, 0x201);
	atomic_store(&sv_reply_rc, 1);
	atomic_store(&sv_cq_err, 0);
	ce_up(&sq, sv_answer, &c);
	rr_th_small_submit(&c, &p[0], 0x200);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[0].r.status, 0);
	if (p[0].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[0].r);
	/* the server's CQ fails as this Call is answered: the Reply is
	 * posted, the failure seen at the loop's next poll of the CQ, which
	 * the next Call's arrival brings */
	rr_th_small_submit(&c, &p[1], 0x201);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	if (p[1].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[1].r);
	rr_th_small_submit(&c, &p[2], 0x202);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	if (p[2].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[2].r);
	REQUIRE(rr_test_until(sv_err_noted, NULL, RR_TEST_WAIT_MS));
	CHECK_EQ(atomic_load(&sv_cq_err), -EACCES);
	CHECK(atomic_load(&sv_reply_rc) <= 0);   /* posted (0), or -ENOTCONN */
	/* and the next Call is answered, over a new connection */
	rr_th_small_submit(&c, &p[3], 0x203);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	CHECK_EQ(p[3].r.status, 0);
	if (p[3].r.status == 0)
		rr_tp_client_release_reply(c.tp, &p[3].r);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.reconnects >= 1);   /* the server ended the connection */
	CHECK_EQ(st.cq_failures, 0);  /* the client's CQ did not fail */
	/* the server counts its connection's end under its CQ's failure */
	REQUIRE(rr_test_until(sv_cq_counted, NULL, RR_TEST_WAIT_MS));
	rr_tp_server_stats(ce_srv, &st);
	CHECK_EQ(st.cq_failures, 1);
	CHECK_EQ(st.cq_overruns, 0);
	ce_down(&sq, &c);
	free(p);
}
