/* SPDX-License-Identifier: BSD-2-Clause */
/* The RFC 8167 backchannel of the RDMA transport (proto/conn/backchannel.c
 * through transport/rdma/tp.h) against scripted raw peers on the soft
 * provider, checked on the wire:
 * - a rogue responder sends reverse Calls to a requester: one that offered
 *   no backchannel drops them and keeps its connection; one that granted 2
 *   backward credits delivers 2 and drops a third (and those arriving while
 *   it does not serve, and those it cannot tell from a Reply: with chunks,
 *   truncated), answers RDMA_MSG with empty lists, the Call's XID and the
 *   grant of 2 in rdma_credit, and serves the next ones once the first are
 *   done;
 * - a rogue requester gets backward Calls from a responder: RDMA_MSG, empty
 *   lists, a CALL whose XID is rdma_xid, rdma_credit the responder's
 *   request; one Call outstanding before the first backward Reply, then as
 *   many as that Reply grants (never above the request), the others queued
 *   (bc_credits_exhausted); a Reply of unknown XID is dropped, an RDMA_ERROR
 *   for a backward Call fails it with -EREMOTEIO, a Call above the inline
 *   threshold is -EMSGSIZE, and a pending one fails with -ECONNRESET when
 *   the connection goes, after which the opened direction answers -ENOTCONN.
 * Every wait is bounded. */
#include "test.h"

#include <pthread.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "transport/rdma/tp.h"
#include "transport/rdma/tp_int.h"
#include "xprt_harness.h"

static const uint8_t rogue_pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* RDMA_MSG (@wlist: with a one-segment Write list) carrying an RPC message
 * of type @mtype (CALL 0 / REPLY 1), XID @xid, then @extra words: its
 * length. */
static size_t mk_msg(uint8_t *b, uint32_t xid, uint32_t credit, uint32_t mtype, bool wlist,
		     unsigned extra)
{
	size_t n = 0;

	put32(b + n, xid), n += 4;
	put32(b + n, 1), n += 4;
	put32(b + n, credit), n += 4;
	put32(b + n, 0), n += 4;            /* RDMA_MSG */
	put32(b + n, 0), n += 4;            /* no Read list */
	if (wlist) {
		put32(b + n, 1), n += 4;    /* a Write chunk of one segment */
		put32(b + n, 1), n += 4;
		put32(b + n, 0x1234), n += 4;
		put32(b + n, 64), n += 4;
		memset(b + n, 0, 8), n += 8;
		put32(b + n, 0), n += 4;    /* end of the Write list */
	}
	put32(b + n, 0), n += 4;            /* no (more) Write list */
	put32(b + n, 0), n += 4;            /* no Reply chunk */
	put32(b + n, xid), n += 4;          /* RPC: xid, msg_type */
	put32(b + n, mtype), n += 4;
	for (unsigned i = 0; i < extra; i++)
		put32(b + n, 0x50000 + i), n += 4;
	return n;
}

/* ---- the requester's side: reverse Calls from a rogue responder ---- */

struct rq_fx {
	struct rr_th_rresp g;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	pthread_mutex_t lock;
	struct rr_conn_sreq *got[16];
	unsigned ngot;
};

static void rq_recv(void *ctx, struct rr_conn_sreq *r)
{
	struct rq_fx *f = ctx;

	pthread_mutex_lock(&f->lock);
	if (f->ngot < RR_ARRAY_SIZE(f->got))
		f->got[f->ngot++] = r;
	pthread_mutex_unlock(&f->lock);
}

static unsigned rq_ngot(struct rq_fx *f)
{
	unsigned n;

	pthread_mutex_lock(&f->lock);
	n = f->ngot;
	pthread_mutex_unlock(&f->lock);
	return n;
}

static void rq_up(struct rq_fx *f, uint32_t slots)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	REQUIRE_EQ(rr_th_rresp_open(&f->g), 0);
	rr_tp_conf_default(&f->cc);
	f->cc.bc_slots = slots;
	f->cc.credits = 8;
	f->cc.ext_caps = 0;
	REQUIRE_EQ(rr_th_rresp_connect(&f->g, &f->c, &f->cc, rr_th_cl_count, rogue_pd,
				       sizeof(rogue_pd)), 0);
	rr_tp_client_bc_set(f->c.tp, rq_recv, f);
}

static void rq_down(struct rq_fx *f)
{
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < f->ngot; i++)
		rr_tp_client_bc_done(f->c.tp, f->got[i]);
	f->ngot = 0;
	pthread_mutex_unlock(&f->lock);
	rr_th_cl_stop(&f->c);
	rr_th_rresp_close(&f->g);
	pthread_mutex_destroy(&f->lock);
}

static uint64_t rq_stat_dropped(struct rq_fx *f)
{
	struct rr_xprt_stats st;

	rr_tp_client_stats(f->c.tp, &st);
	return st.bc_calls_dropped;
}

/* Waits until the requester counted @n reverse Calls dropped. */
/* Bounded waits (10 s: the lab runs this under TCG) for @n reverse Calls
 * dropped, and for @n delivered: the delivery upcall runs after the
 * executor's lock is released, so it may come after a later Call's drop
 * was counted. */
static bool rq_wait_dropped(struct rq_fx *f, uint64_t n)
{
	for (int i = 0; i < 2000 && rq_stat_dropped(f) < n; i++)
		rr_th_sleep_ms(5);
	return rq_stat_dropped(f) >= n;
}

static bool rq_wait_got(struct rq_fx *f, unsigned n)
{
	for (int i = 0; i < 2000 && rq_ngot(f) < n; i++)
		rr_th_sleep_ms(5);
	return rq_ngot(f) >= n;
}

/* A forward Call of the requester answered by the rogue: the connection
 * still works. */
static void rq_forward_ok(struct rq_fx *f, uint32_t xid)
{
	static uint8_t call[12], rep[64], in[4096];
	struct rr_xprt_part part = {call, sizeof(call), false};
	struct rr_conn_rpc rpc;
	unsigned done0 = f->c.done;
	int n;

	put32(call, xid);
	put32(call + 4, 0);   /* CALL (no more: the rogue does not parse it) */
	memset(&rpc, 0, sizeof(rpc));
	rpc.xid = xid;
	rpc.parts = &part;
	rpc.nparts = 1;
	rpc.max_reply = 256;
	REQUIRE_EQ(rr_tp_client_submit(f->c.tp, &rpc), 0);
	n = rr_th_rresp_recv(&f->g, in, 5000);
	REQUIRE(n >= 28);
	CHECK_EQ(get32(in), xid);
	n = (int)mk_msg(rep, xid, 8, 1, false, 2);
	REQUIRE_EQ(rr_th_rresp_send(&f->g, rep, (size_t)n, 0, 5000), 0);
	CHECK(rr_th_cl_wait(&f->c, done0 + 1, RR_TEST_WAIT_MS));
	CHECK_EQ(rpc.status, 0);
	CHECK_EQ(rpc.reply_len, 16u);
	rr_tp_client_release_reply(f->c.tp, &rpc);
}

TEST(bc_rdma_rogue_reverse_call_not_offered)
{
	struct rq_fx f;
	uint8_t m[256];

	if (!rr_th_soft_ok())
		return;
	rq_up(&f, 0);
	rr_tp_client_bc_enable(f.c.tp, true);   /* no slots: stays off */
	REQUIRE_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xb0001, 1, 0, false, 6), 0, 5000), 0);
	/* an idle client's loop does not watch its CQ (the engine): the
	 * forward Call's Reply, behind it on the stream, has it received */
	rq_forward_ok(&f, 0xa0001);
	CHECK(rq_wait_dropped(&f, 1));
	CHECK_EQ(rq_ngot(&f), 0u);
	rq_down(&f);
}

TEST(bc_rdma_rogue_reverse_calls_over_grant)
{
	struct rq_fx f;
	uint8_t m[256], in[4096];
	static const uint8_t rpc_reply[24] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
					      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	uint8_t body[24];
	struct rr_xprt_stats st;

	if (!rr_th_soft_ok())
		return;
	rq_up(&f, 2);
	/* not serving yet: dropped (received with a forward Call's Reply: an
	 * idle client's loop does not watch its CQ) */
	REQUIRE_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xb0000, 1, 0, false, 2), 0, 5000), 0);
	rq_forward_ok(&f, 0xa0000);
	CHECK(rq_wait_dropped(&f, 1));
	rr_tp_client_bc_enable(f.c.tp, true);
	/* three at once against a grant of two */
	for (uint32_t i = 1; i <= 3; i++)
		REQUIRE_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xb0000 + i, 1, 0, false, 2), 0,
					    5000), 0);
	CHECK(rq_wait_dropped(&f, 2));
	CHECK(rq_wait_got(&f, 2));
	CHECK_EQ(rq_ngot(&f), 2u);
	/* what a requester cannot tell from a Reply: with a Write list,
	 * truncated before msg_type; neither is delivered */
	REQUIRE_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xb0010, 1, 0, true, 2), 0, 5000), 0);
	REQUIRE_EQ(rr_th_rresp_send(&f.g, m, 32, 0, 5000), 0);
	rr_th_sleep_ms(200);
	CHECK_EQ(rq_ngot(&f), 2u);
	/* each answered: RDMA_MSG, empty lists, the grant of 2 */
	for (unsigned i = 0; i < 2; i++) {
		struct rr_conn_sreq *r = f.got[i];
		struct rr_xprt_part part = {body, sizeof(body), false};
		int n;

		CHECK_EQ(r->xid, 0xb0001u + i);
		CHECK_EQ(r->len, 16u);          /* xid, CALL, 2 words */
		CHECK_EQ(get32(r->msg + 4), 0u);
		memcpy(body, rpc_reply, sizeof(body));
		put32(body, r->xid);
		REQUIRE_EQ(rr_tp_client_bc_reply(f.c.tp, r, &part, 1), 0);
		n = rr_th_rresp_recv(&f.g, in, 5000);
		REQUIRE_EQ(n, 28 + 24);
		CHECK_EQ(get32(in), r->xid);          /* rdma_xid */
		CHECK_EQ(get32(in + 4), 1u);          /* version */
		CHECK_EQ(get32(in + 8), 2u);          /* the backward grant */
		CHECK_EQ(get32(in + 12), 0u);         /* RDMA_MSG */
		CHECK_EQ(get32(in + 16) | get32(in + 20) | get32(in + 24), 0u);
		CHECK_MEM(in + 28, body, 24);
	}
	/* a Reply too large for the inline threshold: refused, not sent */
	{
		static uint8_t big[8192];
		struct rr_xprt_part part = {big, sizeof(big), false};

		CHECK_EQ(rr_tp_client_bc_reply(f.c.tp, f.got[0], &part, 1), -EMSGSIZE);
	}
	pthread_mutex_lock(&f.lock);
	rr_tp_client_bc_done(f.c.tp, f.got[0]);
	rr_tp_client_bc_done(f.c.tp, f.got[1]);
	f.ngot = 0;
	pthread_mutex_unlock(&f.lock);
	/* the slots are free again */
	for (uint32_t i = 4; i <= 5; i++)
		REQUIRE_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xb0000 + i, 1, 0, false, 2), 0,
					    5000), 0);
	CHECK(rq_wait_got(&f, 2));
	CHECK_EQ(rq_ngot(&f), 2u);
	rr_tp_client_stats(f.c.tp, &st);
	CHECK_EQ(st.bc_calls_recv, 4u);
	CHECK_EQ(st.bc_replies_sent, 2u);
	CHECK_EQ(st.bc_calls_dropped, 2u);
	rq_forward_ok(&f, 0xa0002);
	rq_down(&f);
}

/* A synchronous caller on its own thread (the harness's REQUIRE runs on
 * the test's thread only, and the rogue is driven from there): submits
 * @rpc with caller_waits, so that this thread receives (the loop is not
 * woken), and waits for it (rr_tp_client_wait, bounded). */
struct sync_caller {
	struct rr_tp_client *tp;
	struct rr_conn_rpc *rpc;
	int rc;
};

static void *sync_caller_run(void *arg)
{
	struct sync_caller *a = arg;

	a->rpc->caller_waits = true;
	a->rc = rr_tp_client_submit(a->tp, a->rpc);
	if (a->rc == 0)
		rr_tp_client_wait(a->tp, a->rpc, 30000);
	return NULL;
}

/* A forward Call @rpc of XID @xid (12 bytes in @call), room for 256. */
static void fwd_call(struct rr_conn_rpc *rpc, uint8_t *call, struct rr_xprt_part *part,
		     uint32_t xid)
{
	put32(call, xid);
	put32(call + 4, 0);   /* CALL (no more: the rogue does not parse it) */
	*part = (struct rr_xprt_part){call, 12, false};
	memset(rpc, 0, sizeof(*rpc));
	rpc->xid = xid;
	rpc->parts = part;
	rpc->nparts = 1;
	rpc->max_reply = 256;
}

static uint64_t rq_recv_bytes(struct rq_fx *f)
{
	struct rr_xprt_stats st;

	rr_tp_client_stats(f->c.tp, &st);
	return st.inline_recv_bytes;
}

/* Sends @m (@len) from the rogue, then waits (bounded) until the client
 * received it (its bytes counted): the next one then comes alone. */
static bool rq_send_seen(struct rq_fx *f, const uint8_t *m, size_t len)
{
	uint64_t want = rq_recv_bytes(f) + len;
	int k;

	if (rr_th_rresp_send(&f->g, m, len, 0, 5000))
		return false;
	for (k = 0; k < 2000 && rq_recv_bytes(f) < want; k++)
		rr_th_sleep_ms(5);
	return k < 2000;
}

/* A reverse Call whose XID is that of a forward Call waiting for its Reply
 * (RFC 8167: the two directions' XIDs are unrelated), received by the
 * Call's own synchronous waiter (its Receive straight to the requester,
 * transport/rdma/conn.c tp_on_wc_own): delivered as a reverse Call, not
 * taken for the Reply (the one-pass Reply's test refuses it: word 8 is
 * CALL; then the reverse direction's test, proto/conn/requester.c
 * rq_on_recv, issue 16 part ID); the Call then completes with its own
 * Reply, sent once the reverse Call was delivered (bounded), so that each
 * comes alone. */
TEST(bc_rdma_rogue_reverse_call_with_a_waiting_calls_xid)
{
	static uint8_t call[12], in[4096];
	struct rr_xprt_part part;
	struct rr_conn_rpc rpc;
	struct rr_xprt_stats st;
	struct sync_caller a;
	struct rq_fx f;
	uint8_t m[256];
	pthread_t th;
	int n;

	if (!rr_th_soft_ok())
		return;
	rq_up(&f, 2);
	rr_tp_client_bc_enable(f.c.tp, true);
	fwd_call(&rpc, call, &part, 0xc0001);
	a = (struct sync_caller){f.c.tp, &rpc, -1};
	REQUIRE_EQ(pthread_create(&th, NULL, sync_caller_run, &a), 0);
	n = rr_th_rresp_recv(&f.g, in, 5000);
	CHECK(n >= 28);
	CHECK_EQ(get32(in), 0xc0001u);
	CHECK_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xc0001, 1, 0 /* CALL */, false, 2), 0,
				  5000), 0);
	CHECK(rq_wait_got(&f, 1));
	CHECK_EQ(rr_th_rresp_send(&f.g, m, mk_msg(m, 0xc0001, 8, 1, false, 2), 0, 5000), 0);
	pthread_join(th, NULL);
	REQUIRE_EQ(a.rc, 0);
	CHECK(rr_th_cl_wait(&f.c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(rpc.status, 0);
	REQUIRE_EQ(rpc.reply_len, 16u);   /* xid, REPLY, 2 words: the Reply's */
	CHECK_EQ(get32(rpc.reply), 0xc0001u);
	CHECK_EQ(get32(rpc.reply + 4), 1u);
	CHECK_EQ(get32(rpc.reply + 8), 0x50000u);
	rr_tp_client_release_reply(f.c.tp, &rpc);
	REQUIRE_EQ(rq_ngot(&f), 1u);
	CHECK_EQ(f.got[0]->xid, 0xc0001u);
	CHECK_EQ(f.got[0]->len, 16u);
	CHECK_EQ(get32(f.got[0]->msg + 4), 0u);   /* CALL */
	rr_tp_client_stats(f.c.tp, &st);
	CHECK_EQ(st.bc_calls_recv, 1u);
	CHECK_EQ(st.bc_calls_dropped, 0u);
	CHECK_EQ(st.bad_xids, 0u);
	CHECK_EQ(st.bad_replies, 0u);
	rq_down(&f);
}

/* The synchronous waiter's own Receives (transport/rdma/conn.c
 * tp_on_wc_own, straight to the requester, issue 16 part ID) against the
 * progress loop's (tp_on_wc, the general way): the same messages, each
 * sent alone once the one before it was received (its bytes counted),
 * give the same result and the same counters either way. While a Call
 * waits: a reverse Call with its XID (no backchannel offered: dropped),
 * a Reply of an XID nobody waits for, a Reply of its XID with a bad
 * version (discarded), then its Reply. */
static void own_seq_run(bool sync, struct rr_xprt_stats *st, int *status, uint8_t *reply,
			uint32_t *reply_len)
{
	static uint8_t call[12], in[4096];
	uint8_t m[4][96];
	size_t len[4];
	struct rr_xprt_part part;
	struct rr_conn_rpc rpc;
	struct sync_caller a;
	struct rq_fx f;
	pthread_t th;
	int n;

	rq_up(&f, 0);
	len[0] = mk_msg(m[0], 0xd0001, 1, 0 /* CALL */, false, 2);
	len[1] = mk_msg(m[1], 0xd0777, 8, 1, false, 2);   /* nobody's */
	len[2] = mk_msg(m[2], 0xd0001, 8, 1, false, 2);
	put32(m[2] + 4, 7);                                /* version 7 */
	len[3] = mk_msg(m[3], 0xd0001, 8, 1, false, 3);
	fwd_call(&rpc, call, &part, 0xd0001);
	a = (struct sync_caller){f.c.tp, &rpc, -1};
	if (sync)
		REQUIRE_EQ(pthread_create(&th, NULL, sync_caller_run, &a), 0);
	else
		REQUIRE_EQ(a.rc = rr_tp_client_submit(f.c.tp, &rpc), 0);
	n = rr_th_rresp_recv(&f.g, in, 5000);
	CHECK(n >= 28);
	CHECK_EQ(get32(in), 0xd0001u);
	for (unsigned i = 0; i < 4; i++)
		CHECK(rq_send_seen(&f, m[i], len[i]));
	if (sync)
		pthread_join(th, NULL);
	REQUIRE_EQ(a.rc, 0);
	CHECK(rr_th_cl_wait(&f.c, 1, RR_TEST_WAIT_MS));
	rr_tp_client_stats(f.c.tp, st);
	/* the Receives the transport counts posted are those on the queue
	 * (conn.c "Receives by demand": each consumed one uncounted) */
	rr_lock(&f.c.tp->ep.lock);
	{
		struct tp_conn *cn = f.c.tp->conn;
		struct soft_qp *q;

		CHECK(cn != NULL);
		if (cn) {
			q = RR_CONTAINER_OF(RR_BASE(qp, cn->qp), struct soft_qp, base);
			rr_lock(&q->rx_lock);
			CHECK_EQ(q->rq_count, cn->rposted);
			rr_unlock(&q->rx_lock);
		}
	}
	rr_unlock(&f.c.tp->ep.lock);
	*status = rpc.status;
	*reply_len = rpc.reply_len;
	if (rpc.status == 0 && rpc.reply_len <= 64)
		memcpy(reply, rpc.reply, rpc.reply_len);
	if (rpc.status == 0)
		rr_tp_client_release_reply(f.c.tp, &rpc);
	rq_down(&f);
}

TEST(xprt_client_own_receive_as_loop)
{
	struct rr_xprt_stats st[2];
	uint8_t reply[2][64];
	uint32_t len[2];
	int status[2];

	if (!rr_th_soft_ok())
		return;
	for (int sync = 0; sync < 2; sync++)
		own_seq_run(sync, &st[sync], &status[sync], reply[sync], &len[sync]);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(status[i], 0);
		REQUIRE_EQ(len[i], 20u);   /* xid, REPLY, 3 words: the last one's */
		CHECK_EQ(get32(reply[i] + 16), 0x50002u);
		CHECK_EQ(st[i].bc_calls_dropped, 1u);
		CHECK_EQ(st[i].bad_xids, 1u);
		CHECK_EQ(st[i].bad_replies, 1u);
	}
	CHECK_MEM(reply[0], reply[1], 20);
	CHECK_EQ(st[0].recvs, st[1].recvs);
	CHECK_EQ(st[0].msg_recv, st[1].msg_recv);
	CHECK_EQ(st[0].inline_recv_bytes, st[1].inline_recv_bytes);
	CHECK_EQ(st[0].bad_xids, st[1].bad_xids);
	CHECK_EQ(st[0].bad_replies, st[1].bad_replies);
	CHECK_EQ(st[0].bc_calls_recv, st[1].bc_calls_recv);
	CHECK_EQ(st[0].bc_calls_dropped, st[1].bc_calls_dropped);
	CHECK_EQ(st[0].error_recv, st[1].error_recv);
	CHECK_EQ(st[0].nomsg_recv, st[1].nomsg_recv);
}

/* ---- the responder's side: backward Calls to a rogue requester ---- */

struct rs_fx {
	struct rr_th_rogue g;
	struct rr_tp_server *s;
	struct rr_tp_conf conf;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rr_conn_sreq *req;     /* the forward Call that opened the way */
	unsigned nreq;                /* requests seen (lock, cond) */
	struct rr_tp_bc *bc;
	unsigned done;
	struct rr_conn_rpc rpc[8];
	uint8_t call[8][64];
	struct rr_xprt_part part[8];
};

static void rs_recv(void *ctx, struct rr_conn_sreq *r)
{
	struct rs_fx *f = ctx;

	pthread_mutex_lock(&f->lock);
	if (!f->req)
		f->req = r;
	f->nreq++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void rs_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct rs_fx *f = ctx;

	(void)rpc;
	pthread_mutex_lock(&f->lock);
	f->done++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static bool rs_wait_done(struct rs_fx *f, unsigned n)
{
	return rr_th_wait_count(&f->lock, &f->cond, &f->done, n, RR_TEST_WAIT_MS);
}

/* Backward Call @i: 16 bytes of RPC Call (xid, CALL, 2 words), or @len. */
static int rs_submit(struct rs_fx *f, unsigned i, uint32_t len)
{
	struct rr_conn_rpc *rpc = &f->rpc[i];

	memset(rpc, 0, sizeof(*rpc));
	memset(f->call[i], 0, sizeof(f->call[i]));
	put32(f->call[i], 0xc0000 + i);
	f->part[i] = (struct rr_xprt_part){f->call[i], len ? len : 16, false};
	rpc->xid = 0xc0000 + i;
	rpc->parts = &f->part[i];
	rpc->nparts = 1;
	return rr_tp_server_bc_submit(f->s, f->bc, rpc);
}

/* The rogue's next message: a backward Call @i (checked), its length. */
static void rs_expect_call(struct rs_fx *f, unsigned i, uint32_t credit)
{
	uint8_t in[4096];
	int n = rr_th_rogue_recv(&f->g, in, 5000);

	REQUIRE_EQ(n, 28 + 16);
	CHECK_EQ(get32(in), 0xc0000u + i);
	CHECK_EQ(get32(in + 4), 1u);
	CHECK_EQ(get32(in + 8), credit);        /* the responder's request */
	CHECK_EQ(get32(in + 12), 0u);           /* RDMA_MSG */
	CHECK_EQ(get32(in + 16) | get32(in + 20) | get32(in + 24), 0u);
	CHECK_EQ(get32(in + 28), 0xc0000u + i); /* RPC xid = rdma_xid */
	CHECK_EQ(get32(in + 32), 0u);           /* CALL */
}

static int rs_reply(struct rs_fx *f, uint32_t xid, uint32_t credit)
{
	uint8_t m[256];

	return rr_th_rogue_send(&f->g, m, mk_msg(m, xid, credit, 1, false, 4), 0, NULL, 5000) < 0
		       ? -1 : 0;
}

TEST(bc_rdma_rogue_backward_calls)
{
	struct rs_fx f;
	struct rr_xprt_stats st;
	uint8_t m[256];
	int port;

	if (!rr_th_soft_ok())
		return;
	memset(&f, 0, sizeof(f));
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cond, NULL);
	rr_tp_conf_default(&f.conf);
	f.conf.credits = 8;
	f.conf.bc_slots = 2;
	f.conf.ext_caps = 0;
	REQUIRE_EQ(rr_th_tp_server(&f.conf, rs_recv, &f, &f.s), 0);
	port = rr_tp_server_port(f.s);
	REQUIRE_EQ(rr_th_rogue_open(&f.g, port, rogue_pd, sizeof(rogue_pd), false), 0);
	/* a forward Call: its request opens the backward direction */
	REQUIRE_EQ(rr_th_rogue_send(&f.g, m, mk_msg(m, 0xa1, 8, 0, false, 4), 0, NULL, 5000), 0);
	/* handed over under the lock (set once, then only read) */
	REQUIRE(rr_th_wait_count(&f.lock, &f.cond, &f.nreq, 1, RR_TEST_WAIT_MS));
	REQUIRE(f.req != NULL);
	REQUIRE_EQ(rr_tp_server_bc_open(f.s, f.req, rs_complete, &f, &f.bc), 0);
	rr_tp_server_done(f.s, f.req);   /* the direction outlives the request */
	/* one outstanding before the first backward Reply */
	REQUIRE_EQ(rs_submit(&f, 0, 0), 0);
	REQUIRE_EQ(rs_submit(&f, 1, 0), 0);
	rs_expect_call(&f, 0, 2);
	CHECK_EQ(rr_th_rogue_recv(&f.g, m, 300), 0);   /* call 1 waits */
	/* the Reply of call 0 grants 5: clamped to the request of 2 */
	REQUIRE_EQ(rs_reply(&f, 0xc0000, 5), 0);
	CHECK(rs_wait_done(&f, 1));
	CHECK_EQ(f.rpc[0].status, 0);
	CHECK_EQ(f.rpc[0].reply_len, 24u);   /* xid, REPLY, 4 words */
	rs_expect_call(&f, 1, 2);
	REQUIRE_EQ(rs_submit(&f, 2, 0), 0);
	rs_expect_call(&f, 2, 2);
	REQUIRE_EQ(rs_submit(&f, 3, 0), 0);
	CHECK_EQ(rr_th_rogue_recv(&f.g, m, 300), 0);   /* two out: call 3 waits */
	/* an RDMA_ERROR for call 1: it fails, call 3 goes */
	put32(m, 0xc0001);
	put32(m + 4, 1);
	put32(m + 8, 2);
	put32(m + 12, 4);   /* RDMA_ERROR */
	put32(m + 16, 2);   /* ERR_CHUNK */
	REQUIRE_EQ(rr_th_rogue_send(&f.g, m, 20, 0, NULL, 5000), 0);
	CHECK(rs_wait_done(&f, 2));
	CHECK_EQ(f.rpc[1].status, -EREMOTEIO);
	rs_expect_call(&f, 3, 2);
	/* above the inline threshold (4096 both ways here): refused */
	CHECK_EQ(rs_submit(&f, 4, 4096), -EMSGSIZE);
	rr_tp_server_stats(f.s, &st);
	CHECK_EQ(st.bc_calls_sent, 4u);
	CHECK_EQ(st.bc_replies_recv, 2u);
	CHECK(st.bc_credits_exhausted >= 2);
	/* a Reply nobody asked for takes a Receive as a Call would, and the
	 * rogue may send none (its one Call was finished without a Reply): an
	 * overrun (RFC 8166 section 4.3.1), the connection goes, with calls 2
	 * and 3 pending (the soft provider's receive quota may end it first) */
	REQUIRE_EQ(rs_reply(&f, 0xdead, 5), 0);
	CHECK(rs_wait_done(&f, 4));
	rr_th_rogue_close(&f.g);
	CHECK_EQ(f.rpc[2].status, -ECONNRESET);
	CHECK_EQ(f.rpc[3].status, -ECONNRESET);
	CHECK_EQ(rs_submit(&f, 5, 0), -ENOTCONN);
	for (unsigned i = 0; i < 4; i++)
		rr_tp_server_bc_release(f.s, &f.rpc[i]);
	rr_tp_server_bc_close(f.s, f.bc);
	rr_tp_server_destroy(f.s);
	pthread_mutex_destroy(&f.lock);
	pthread_cond_destroy(&f.cond);
}
