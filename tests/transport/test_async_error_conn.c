/* SPDX-License-Identifier: BSD-2-Clause */
/* A connection whose QP a device's asynchronous error fails is counted
 * under that error (rpcrdma/stats.h group faults), once, on the side whose
 * QP failed. The soft provider raises none of the verbs events itself (its
 * one asynchronous error is the CQ overrun, test_cq_overrun_conn.c), so the
 * test stands in for the device: it does to a live connection's soft QP
 * what the verbs provider does on an event (verbs_async.c qp_fail_locked):
 * the event recorded as the QP's cause (rr_qp_set_async_event), then the
 * QP to the error state with rr_async_action's errno, which ends its
 * connection with a DISCONNECTED carrying that errno. Which objects a verbs
 * event fails (a CQ's QPs, an SRQ's, the whole device's) is the verbs
 * provider's (rdma_verbs_async_errors in the lab, docs/interop.md
 * "Asynchronous errors on verbs://"). Each event on the client's QP, then
 * on a server connection's QP: the counter of that cause moves by one, no
 * other fault counter does, and the next Call is answered over a new
 * connection. And a CQ that refuses a new connection's QP (the provider's
 * count of its QPs' queues leaves no room: -ENOSPC, as on rxe, whose queues
 * are deeper than asked) is counted in cq_refused, the connection made on
 * another CQ. */
#include <stdlib.h>

#include "rdma/provider.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static struct rr_tp_server *ae_srv;
static atomic_uint ae_fail_xid;
static atomic_int ae_event;

/* What the verbs provider does to a QP an asynchronous event @ev fails. */
static void ae_raise(struct rpcrdma_qp *pqp, enum rr_async_event ev)
{
	struct soft_qp *qp = RR_CONTAINER_OF((struct rr_qp *)(void *)pqp, struct soft_qp, base);

	rr_lock(&qp->rx_lock);
	rr_soft_fast_quiesce(qp);
	rr_qp_set_async_event(&qp->base, ev);
	rr_soft_qp_fatal(qp, rr_async_action(ev).err, NULL);
	rr_unlock(&qp->rx_lock);
}

/* Answers each Call with 80 bytes (lent: rr_th_answer80); the Call of ae_fail_xid (once: the
 * client sends it again on its new connection) first fails its
 * connection's QP with ae_event (the request pins the connection). */
static void ae_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = r->xconn;
	unsigned xid = r->xid;

	(void)sq;
	if (cn && cn->qp && atomic_compare_exchange_strong(&ae_fail_xid, &xid, 0))
		ae_raise(cn->qp, (enum rr_async_event)atomic_load(&ae_event));
	rr_th_answer80(ae_srv, r);
}

static void ae_counts(const struct rr_xprt_stats *st, uint64_t out[RR_ASYNC_DEVICE_FATAL + 1])
{
	memset(out, 0, sizeof(uint64_t) * (RR_ASYNC_DEVICE_FATAL + 1));
	out[RR_ASYNC_OTHER] = st->cq_failures + st->wr_errors;
	out[RR_ASYNC_CQ_ERR] = st->cq_overruns;
	out[RR_ASYNC_QP_FATAL] = st->qp_fatal;
	out[RR_ASYNC_QP_REQ_ERR] = st->qp_req_errors;
	out[RR_ASYNC_QP_ACCESS_ERR] = st->qp_access_errors;
	out[RR_ASYNC_SRQ_ERR] = st->srq_errors;
	out[RR_ASYNC_DEVICE_FATAL] = st->device_fatal;
}

struct ae_wait {
	struct rr_th_cl *c;   /* NULL: the server's counters */
	enum rr_async_event ev;
};

static bool ae_counted(void *arg)
{
	const struct ae_wait *w = arg;
	struct rr_xprt_stats st;
	uint64_t n[RR_ASYNC_DEVICE_FATAL + 1];

	if (w->c)
		rr_tp_client_stats(w->c->tp, &st);
	else
		rr_tp_server_stats(ae_srv, &st);
	ae_counts(&st, n);
	return n[w->ev] != 0;
}

/* The counts of @st are @want, after the one of @moved (-1: none) moved by
 * one. */
static void ae_check(const struct rr_xprt_stats *st, uint64_t want[RR_ASYNC_DEVICE_FATAL + 1],
		     int moved)
{
	uint64_t n[RR_ASYNC_DEVICE_FATAL + 1];

	if (moved >= 0)
		want[moved]++;
	ae_counts(st, n);
	for (int i = 0; i <= RR_ASYNC_DEVICE_FATAL; i++)
		CHECK_EQ(n[i], want[i]);
}

/* A Call, completed (its Reply, lent, given back); @ok: answered. */
static void ae_call(struct rr_th_cl *c, struct rr_th_small *p, uint32_t xid, unsigned *done,
		    bool ok)
{
	rr_th_small_submit(c, p, xid);
	REQUIRE(rr_th_cl_wait(c, ++*done, RR_TEST_WAIT_MS));
	if (ok)
		CHECK_EQ(p->r.status, 0);
	if (p->r.status == 0)
		rr_tp_client_release_reply(c->tp, &p->r);
}

/* A server answering through ae_answer (no Call failed yet) in ae_srv, and
 * a client @c connected to it; both with the default configuration. */
static void ae_start(struct rr_th_sq *sq, struct rr_th_cl *c)
{
	struct rr_tp_conf sc, cc;

	rr_tp_conf_default(&sc);
	rr_tp_conf_default(&cc);
	memset(sq, 0, sizeof(*sq));
	rr_th_sq_init(sq, ae_answer);
	atomic_store(&ae_fail_xid, 0);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, sq, &ae_srv), 0);
	rr_th_sq_start(sq);
	REQUIRE_EQ(rr_th_cl_start(c, &cc, rr_tp_server_port(ae_srv), rr_th_cl_count), 0);
}

static void ae_stop(struct rr_th_sq *sq, struct rr_th_cl *c)
{
	rr_th_cl_stop(c);
	rr_th_sq_stop(sq);
	rr_tp_server_destroy(ae_srv);
	rr_th_sq_destroy(sq);
}

TEST(xprt_async_errors_counted_by_cause)
{
	static const enum rr_async_event evs[] = {RR_ASYNC_QP_FATAL, RR_ASYNC_QP_REQ_ERR,
						  RR_ASYNC_QP_ACCESS_ERR, RR_ASYNC_SRQ_ERR,
						  RR_ASYNC_DEVICE_FATAL, RR_ASYNC_CQ_ERR};
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p;
	struct rr_xprt_stats st;
	uint64_t cwant[RR_ASYNC_DEVICE_FATAL + 1] = {0}, swant[RR_ASYNC_DEVICE_FATAL + 1] = {0};
	uint32_t xid = 0x300;
	unsigned done = 0;

	if (!rr_th_soft_ok())
		return;
	ae_start(&sq, &c);
	for (size_t i = 0; i < RR_ARRAY_SIZE(evs); i++) {
		struct ae_wait cw = {&c, evs[i]}, sw = {NULL, evs[i]};

		/* the client's QP, connected and idle */
		ae_call(&c, &p, ++xid, &done, true);
		rr_lock(&c.tp->ep.lock);
		REQUIRE(c.tp->conn != NULL && c.tp->conn->qp != NULL);
		ae_raise(c.tp->conn->qp, evs[i]);
		rr_unlock(&c.tp->ep.lock);
		REQUIRE(rr_test_until(ae_counted, &cw, RR_TEST_WAIT_MS));
		ae_call(&c, &p, ++xid, &done, true);   /* over a new connection */
		/* counted once, under its cause, on the client alone */
		rr_tp_client_stats(c.tp, &st);
		ae_check(&st, cwant, (int)evs[i]);
		rr_tp_server_stats(ae_srv, &st);
		ae_check(&st, swant, -1);

		/* a server connection's QP, while it answers a Call (the
		 * Call completes: its Reply, or after the reconnect) */
		atomic_store(&ae_event, (int)evs[i]);
		atomic_store(&ae_fail_xid, ++xid);
		ae_call(&c, &p, xid, &done, false);
		REQUIRE(rr_test_until(ae_counted, &sw, RR_TEST_WAIT_MS));
		ae_call(&c, &p, ++xid, &done, true);
		rr_tp_server_stats(ae_srv, &st);
		ae_check(&st, swant, (int)evs[i]);
		rr_tp_client_stats(c.tp, &st);
		ae_check(&st, cwant, -1);
	}
	ae_stop(&sq, &c);
}

TEST(xprt_cq_refusal_counted)
{
	struct rr_th_sq sq;
	struct rr_th_cl c;
	struct rr_th_small p, keep;
	struct rr_xprt_stats st;
	struct ae_wait cw = {NULL, RR_ASYNC_QP_FATAL};
	struct soft_cq *q;
	struct tp_cq *old;
	uint64_t full;
	unsigned done = 0;

	if (!rr_th_soft_ok())
		return;
	ae_start(&sq, &c);
	cw.c = &c;
	/* its Reply kept: the connection, and its share of the CQ, stay
	 * until it is given back */
	rr_th_small_submit(&c, &keep, 0x400);
	REQUIRE(rr_th_cl_wait(&c, ++done, RR_TEST_WAIT_MS));
	REQUIRE_EQ(keep.r.status, 0);
	REQUIRE(keep.r.lent != NULL);
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.cq_refused, 0);
	/* the provider's count of the client's CQ: full from now on (the
	 * transport's own leaves room), and its connection ends */
	rr_lock(&c.tp->ep.lock);
	REQUIRE(c.tp->conn != NULL && c.tp->conn->qp != NULL);
	old = c.tp->conn->tcq;
	q = scq_of(RR_BASE(cq, old->cq));
	full = q->base.cqe;
	pthread_mutex_lock(&q->qlock);
	q->reserved += full;
	pthread_mutex_unlock(&q->qlock);
	ae_raise(c.tp->conn->qp, RR_ASYNC_QP_FATAL);
	rr_unlock(&c.tp->ep.lock);
	REQUIRE(rr_test_until(ae_counted, &cw, RR_TEST_WAIT_MS));
	/* the next Call's connection: offered that CQ first (room in the
	 * transport's count), refused there, made on another */
	ae_call(&c, &p, 0x401, &done, true);
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.cq_refused, 1);
	CHECK_EQ(st.qp_fatal, 1);
	CHECK_EQ(st.cq_overruns + st.cq_failures + st.wr_errors, 0);
	rr_lock(&c.tp->ep.lock);
	CHECK(c.tp->conn != NULL && c.tp->conn->tcq != old);
	rr_unlock(&c.tp->ep.lock);
	pthread_mutex_lock(&q->qlock);
	q->reserved -= full;
	pthread_mutex_unlock(&q->qlock);
	rr_tp_client_release_reply(c.tp, &keep.r);
	ae_stop(&sq, &c);
}
