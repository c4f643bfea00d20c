/* SPDX-License-Identifier: BSD-2-Clause */
/* How a connection's CM events reach its endpoint's loop (src/transport/
 * rdma/port.c tp_ev_hand, issue 16 part Y): a server shard's connection's
 * ESTABLISHED is queued without a kick of the shard's loop (the kick woke
 * the shard's thread between the MPA Reply and the first Call for nothing
 * that Call needs); the shard takes it at its next turn, its tick at the
 * latest. Every other event, an ESTABLISHED of an endpoint that does not
 * take it lazily, one of a shard without a tick, and the loss of an event
 * for want of memory still kick. And over a real server the shard's
 * connections end up established (ORD, idle sweep) without that kick. */
#include <stdlib.h>

#include "rpcrdma/engine.h"
#include "test.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static void no_cm(struct tp_ep *ep, const struct rpcrdma_cm_event *ev)
{
	(void)ep;
	(void)ev;
}

static const struct tp_ep_ops lazy_ops = {.on_cm = no_cm, .lazy_established = true};
static const struct tp_ep_ops eager_ops = {.on_cm = no_cm};

/* An endpoint with just what tp_ev_hand uses, on loop @l (never run), and
 * one connection of it. */
static void fake_ep(struct tp_ep *ep, struct tp_conn *cn, struct rr_loop *l,
		    const struct tp_ep_ops *ops, bool timer_ok)
{
	memset(ep, 0, sizeof(*ep));
	memset(cn, 0, sizeof(*cn));
	ep->ops = ops;
	ep->loop = l;
	ep->timer_ok = timer_ok;
	ep->evq_tail = &ep->evq;
	cn->ep = ep;
}

/* Hands an event of @type of @cn to its endpoint: whether that kicked the
 * endpoint's loop. The event is queued either way, then dropped. */
static bool hand_kicks(struct tp_conn *cn, enum rpcrdma_cm_event_type type)
{
	struct tp_ep *ep = cn->ep;
	struct rpcrdma_cm_event ev = {.type = type, .user_ctx = cn};
	struct tp_ev *e;
	bool kicked;

	CHECK(tp_ev_hand(NULL, &ev));
	kicked = ep->kick.queued;
	rr_loop_task_cancel(ep->loop, &ep->kick);
	e = tp_ep_take_events(ep);
	CHECK(e != NULL);
	while (e) {
		struct tp_ev *nx = e->next;

		CHECK_EQ(e->ev.type, type);
		tp_ev_free(ep, e);
		e = nx;
	}
	return kicked;
}

TEST(xprt_established_waits_for_shard_turn)
{
	struct rr_loop *l;
	struct tp_ep ep;
	struct tp_conn cn;

	REQUIRE_EQ(rr_loop_create(false, &l), 0);
	fake_ep(&ep, &cn, l, &lazy_ops, true);
	CHECK(!hand_kicks(&cn, RPCRDMA_CM_ESTABLISHED));
	CHECK(hand_kicks(&cn, RPCRDMA_CM_DISCONNECTED));
	CHECK(hand_kicks(&cn, RPCRDMA_CM_ERROR));

	/* no tick to take it: kicked */
	fake_ep(&ep, &cn, l, &lazy_ops, false);
	CHECK(hand_kicks(&cn, RPCRDMA_CM_ESTABLISHED));

	/* an endpoint that does not take it lazily (a client): kicked */
	fake_ep(&ep, &cn, l, &eager_ops, true);
	CHECK(hand_kicks(&cn, RPCRDMA_CM_ESTABLISHED));

	/* not queued (no memory): the loss is noted, and kicked */
	fake_ep(&ep, &cn, l, &lazy_ops, true);
	CHECK(!tp_ev_lazy(&ep, NULL));
	rr_loop_destroy(l);
}

/* Answers each Call with 16 bytes. */
static struct rr_tp_server *le_srv;

static void le_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	(void)sq;
	rr_th_answer16(le_srv, r);
}

/* The server's connections, and those of them established (each shard's
 * under its lock). */
static void le_count(unsigned *conns, unsigned *est)
{
	*conns = *est = 0;
	for (unsigned i = 0; i < le_srv->nshards; i++) {
		struct tp_shard *sh = le_srv->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next) {
			++*conns;
			*est += cn->established && !cn->dead;
		}
		rr_unlock(&sh->ep.lock);
	}
}

#define LE_CLIENTS 4

TEST(xprt_shard_connections_established_without_kick)
{
	struct rr_tp_conf sc, cc;
	struct rr_th_sq sq;
	struct rr_th_cl c[LE_CLIENTS];
	struct rr_th_small p[LE_CLIENTS];
	unsigned conns = 0, est = 0;
	int port;

	if (!rr_th_soft_ok())
		return;
	memset(&sq, 0, sizeof(sq));
	rr_th_sq_init(&sq, le_answer);
	rr_tp_conf_default(&sc);
	REQUIRE_EQ(rr_th_tp_server(&sc, rr_th_sq_recv, &sq, &le_srv), 0);
	rr_th_sq_start(&sq);
	port = rr_tp_server_port(le_srv);
	rr_tp_conf_default(&cc);
	for (int i = 0; i < LE_CLIENTS; i++) {
		REQUIRE_EQ(rr_th_cl_start(&c[i], &cc, port, rr_th_cl_count), 0);
		rr_th_small_submit(&c[i], &p[i], 0x5000u + (uint32_t)i);
		CHECK(rr_th_cl_wait(&c[i], 1, RR_TEST_WAIT_MS));
		CHECK_EQ(p[i].r.status, 0);
		CHECK_EQ(p[i].r.reply_len, 16);
		rr_tp_client_release_reply(c[i].tp, &p[i].r);
	}
	/* the shards' ticks take the queued ESTABLISHEDs */
	for (int t = 0; t < 1000; t++) {
		le_count(&conns, &est);
		if (conns == LE_CLIENTS && est == LE_CLIENTS)
			break;
		rr_th_sleep_ms(10);
	}
	CHECK_EQ(conns, LE_CLIENTS);
	CHECK_EQ(est, LE_CLIENTS);
	for (int i = 0; i < LE_CLIENTS; i++)
		rr_th_cl_stop(&c[i]);
	rr_th_sq_stop(&sq);
	rr_tp_server_destroy(le_srv);
	rr_th_sq_destroy(&sq);
}
