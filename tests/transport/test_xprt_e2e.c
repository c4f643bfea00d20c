/* SPDX-License-Identifier: BSD-2-Clause */
/* End-to-end tests of the RPC-over-RDMA v1 driver: a requester and a
 * responder over the software iWARP provider in one process (RFC 8166 message
 * forms with data verified, RFC 8797 negotiation, remote invalidation on/off
 * each side, credit exhaustion with hundreds of queued Calls, a connection cut
 * mid-RPC with retransmission, every RPC completed exactly once and no STag
 * left valid), and a scripted rogue requester sending raw headers through the
 * provider and checking the RFC-mandated answers (RFC 8166 section 4.5).
 *
 * Test protocol (invented for these tests). Call:
 *   xid, CALL(0), op, reply_n, filler_n, filler[filler_n],
 *   nitems, { len, data<len> (DDP-eligible) } x nitems, 0xC0FFEE
 * Reply:
 *   xid, REPLY(1), 0, nitems, { len, data<len> (DDP-eligible) } x nitems,
 *   0xC0FFEE, filler[reply_n]
 * The responder echoes every item as a DDP-eligible result. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/rrep.h"
#include "rdma/soft/soft.h"
#include "rogue/probe_diag.h"
#include "test.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

#define MAGIC 0xC0FFEEu
#define MAX_IT 4

/* ---- responder side ---- */
struct srv {
	struct rr_th_sq sq;   /* sq.hold: keep requests instead of answering */
	struct rr_tp_server *tp;
	unsigned served, bad, err_chunks, reply_fail;
	/* where the worker is (under sq.lock), for a failure's report: the
	 * Calls it took, the last one's XID, whether it waits in
	 * rr_tp_server_reply for it */
	bool in_reply;
	uint32_t in_xid;
	unsigned taken;
	/* stops it when a fatal check ends the test first: its threads read
	 * this struct, on the test's stack (tests/test.h) */
	struct rr_test_cleanup cleanup;
};

static uint8_t pat(uint32_t xid, uint32_t i)
{
	return (uint8_t)(xid * 131u + i * 7u + (i >> 9));
}

static void srv_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	struct srv *s = RR_CONTAINER_OF(sq, struct srv, sq);
	const uint8_t *m = r->msg;
	uint32_t len = r->len, off, nitems, reply_n, filler_n;
	uint8_t hdr[16], tr[4], lens[MAX_IT][4];
	static uint8_t filler[300000];
	struct rr_xprt_part parts[4 + 2 * MAX_IT];
	unsigned np = 0;
	bool err = false;
	int rc;

	pthread_mutex_lock(&s->sq.lock);
	s->taken++;
	s->in_xid = r->xid;
	pthread_mutex_unlock(&s->sq.lock);
	if (len < 24)
		goto bad;
	reply_n = rr_get_be32(m + 12);
	filler_n = rr_get_be32(m + 16);
	if (filler_n > len - 24 || reply_n > sizeof(filler))
		goto bad;
	for (uint32_t i = 0; i < filler_n; i++)
		if (m[20 + i] != (uint8_t)(i ^ 0x5a))
			goto bad;
	off = 20 + (uint32_t)RR_ALIGN4(filler_n);
	if (off + 4 > len)
		goto bad;
	nitems = rr_get_be32(m + off);
	off += 4;
	if (nitems > MAX_IT)
		goto bad;
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 8, 0);
	rr_put_be32(hdr + 12, nitems);
	parts[np++] = (struct rr_xprt_part){hdr, 16, false};
	for (uint32_t k = 0; k < nitems; k++) {
		uint32_t l;

		if (off + 4 > len)
			goto bad;
		l = rr_get_be32(m + off);
		off += 4;
		if (l > len - off || RR_ALIGN4(l) > len - off)
			goto bad;
		for (uint32_t i = 0; i < l; i++)
			if (m[off + i] != pat(r->xid + k, i))
				goto bad;
		for (uint32_t i = l; i < RR_ALIGN4(l); i++)
			if (m[off + i] != 0)
				goto bad;   /* the responder supplies zero pad */
		memcpy(lens[k], m + off - 4, 4);
		parts[np++] = (struct rr_xprt_part){lens[k], 4, false};
		parts[np++] = (struct rr_xprt_part){m + off, l, true};
		off += (uint32_t)RR_ALIGN4(l);
	}
	if (off + 4 != len || rr_get_be32(m + off) != MAGIC)
		goto bad;
	rr_put_be32(tr, MAGIC);
	parts[np++] = (struct rr_xprt_part){tr, 4, false};
	for (uint32_t i = 0; i < reply_n; i++)
		filler[i] = (uint8_t)(i * 3 + 1);
	if (reply_n)
		parts[np++] = (struct rr_xprt_part){filler, reply_n, false};
	pthread_mutex_lock(&s->sq.lock);
	s->in_reply = true;
	pthread_mutex_unlock(&s->sq.lock);
	rc = rr_tp_server_reply(s->tp, r, parts, np, &err);
	pthread_mutex_lock(&s->sq.lock);
	s->in_reply = false;
	if (rc)
		s->reply_fail++;
	else if (err)
		s->err_chunks++;
	else
		s->served++;
	pthread_mutex_unlock(&s->sq.lock);
	rr_tp_server_done(s->tp, r);
	return;
bad:
	pthread_mutex_lock(&s->sq.lock);
	s->bad++;
	pthread_mutex_unlock(&s->sq.lock);
	rr_tp_server_done(s->tp, r);
}

static void srv_release(struct srv *s)
{
	rr_th_sq_stop(&s->sq);
	rr_tp_server_destroy(s->tp);
	rr_th_sq_destroy(&s->sq);
}

static void srv_cleanup(void *arg)
{
	srv_release(arg);
}

/* Starts a server answering with srv_answer; its port, or a negative
 * errno. Started, it is stopped by srv_stop or by a fatal check. */
static int srv_start(struct srv *s, const struct rr_tp_conf *conf)
{
	int rc;

	memset(s, 0, sizeof(*s));
	rr_th_sq_init(&s->sq, srv_answer);
	rc = rr_th_tp_server(conf, rr_th_sq_recv, &s->sq, &s->tp);
	if (rc)
		return rc;
	rr_th_sq_start(&s->sq);
	rr_test_cleanup_push(&s->cleanup, srv_cleanup, s);
	return rr_tp_server_port(s->tp);
}

/* The worker counts a Reply after sending it: the peer may see it first. */
static unsigned srv_served(struct srv *s, unsigned want)
{
	unsigned n = 0;

	for (int t = 0; t < 200; t++) {
		pthread_mutex_lock(&s->sq.lock);
		n = s->served;
		pthread_mutex_unlock(&s->sq.lock);
		if (n >= want)
			break;
		rr_th_sleep_ms(5);
	}
	return n;
}

static void srv_stop(struct srv *s)
{
	rr_test_cleanup_pop(&s->cleanup);
	srv_release(s);
}

/* ---- requester side ---- */
struct rpc {
	struct rr_conn_rpc r;
	struct rr_th_cl *cl;
	uint32_t xid;
	uint32_t reply_n, filler_n, nitems, len[MAX_IT];
	bool sink;
	uint8_t hdr[24 + 70000];
	uint8_t mid[MAX_IT][4];
	uint8_t tail[4];
	uint8_t *data[MAX_IT];
	uint8_t *sinkbuf[MAX_IT];
	struct rr_xprt_part parts[2 + 2 * MAX_IT + 1];
	struct rr_xprt_sink sinks[MAX_IT];
	unsigned completions;
	int status;
	bool verified;
};

static void cl_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct rr_th_cl *c = ctx;
	struct rpc *p = RR_CONTAINER_OF(r, struct rpc, r);

	pthread_mutex_lock(&c->lock);
	p->completions++;
	p->status = r->status;
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static int cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port)
{
	return rr_th_cl_start(c, conf, port, cl_complete);
}

static uint32_t next_xid = 0x10000;

/* Builds an RPC: @filler_n inline bytes, items of @lens, optional sinks. */
static struct rpc *mk_rpc(struct rr_th_cl *c, uint32_t reply_n, uint32_t filler_n, unsigned nitems,
			  const uint32_t *lens, bool sink, uint32_t max_reply)
{
	struct rpc *p = calloc(1, sizeof(*p));
	uint32_t off;
	unsigned np = 0;

	REQUIRE(p);
	REQUIRE(filler_n <= 70000);
	p->cl = c;
	p->xid = __atomic_fetch_add(&next_xid, 16, __ATOMIC_RELAXED);
	p->reply_n = reply_n;
	p->filler_n = filler_n;
	p->nitems = nitems;
	p->sink = sink;
	rr_put_be32(p->hdr, p->xid);
	rr_put_be32(p->hdr + 4, 0);
	rr_put_be32(p->hdr + 8, 1);
	rr_put_be32(p->hdr + 12, reply_n);
	rr_put_be32(p->hdr + 16, filler_n);
	for (uint32_t i = 0; i < filler_n; i++)
		p->hdr[20 + i] = (uint8_t)(i ^ 0x5a);
	off = 20 + (uint32_t)RR_ALIGN4(filler_n);
	rr_put_be32(p->hdr + off, nitems);
	off += 4;
	for (unsigned k = 0; k < nitems; k++) {
		p->len[k] = lens[k];
		p->data[k] = malloc(lens[k] + 1);
		REQUIRE(p->data[k]);
		for (uint32_t i = 0; i < lens[k]; i++)
			p->data[k][i] = pat(p->xid + k, i);
		if (sink) {
			p->sinkbuf[k] = malloc(lens[k] + 64);
			REQUIRE(p->sinkbuf[k]);
			memset(p->sinkbuf[k], 0xee, lens[k] + 64);
			p->sinks[k] = (struct rr_xprt_sink){p->sinkbuf[k], lens[k] + 64};
		}
	}
	/* parts: hdr..nitems, then per item: len word (in mid) + data */
	if (nitems) {
		rr_put_be32(p->hdr + off, lens[0]);
		p->parts[np++] = (struct rr_xprt_part){p->hdr, off + 4, false};
		for (unsigned k = 0; k < nitems; k++) {
			p->parts[np++] = (struct rr_xprt_part){p->data[k], lens[k], true};
			if (k + 1 < nitems) {
				rr_put_be32(p->mid[k], p->len[k + 1]);
				p->parts[np++] = (struct rr_xprt_part){p->mid[k], 4, false};
			}
		}
	} else {
		p->parts[np++] = (struct rr_xprt_part){p->hdr, off, false};
	}
	rr_put_be32(p->tail, MAGIC);
	p->parts[np++] = (struct rr_xprt_part){p->tail, 4, false};
	p->r.xid = p->xid;
	p->r.parts = p->parts;
	p->r.nparts = np;
	p->r.sinks = sink ? p->sinks : NULL;
	p->r.nsinks = sink ? nitems : 0;
	p->r.max_reply = max_reply;
	return p;
}

/* Checks a completed RPC's Reply. */
static bool verify(struct rpc *p)
{
	const uint8_t *m = p->r.reply;
	uint32_t len = p->r.reply_len, off = 16;

	if (p->status || !m || len < 20)
		return false;
	if (rr_get_be32(m) != p->xid || rr_get_be32(m + 4) != 1 ||
	    rr_get_be32(m + 12) != p->nitems)
		return false;
	for (unsigned k = 0; k < p->nitems; k++) {
		uint32_t l = p->len[k];

		if (off + 4 > len || rr_get_be32(m + off) != l)
			return false;
		off += 4;
		if (p->sink && p->r.is_placed[k]) {
			if (p->r.placed[k] != l || memcmp(p->sinkbuf[k], p->data[k], l))
				return false;
			if (p->sinkbuf[k][l] != 0xee)
				return false;   /* pad must not be written */
		} else {
			if (off + RR_ALIGN4(l) > len || memcmp(m + off, p->data[k], l))
				return false;
			off += (uint32_t)RR_ALIGN4(l);
		}
	}
	if (off + 4 + p->reply_n != len || rr_get_be32(m + off) != MAGIC)
		return false;
	off += 4;
	for (uint32_t i = 0; i < p->reply_n; i++)
		if (m[off + i] != (uint8_t)(i * 3 + 1))
			return false;
	return true;
}

static void free_rpc(struct rpc *p)
{
	if (p->r.reply)
		rr_tp_client_release_reply(p->cl->tp, &p->r);
	for (unsigned k = 0; k < p->nitems; k++) {
		free(p->data[k]);
		free(p->sinkbuf[k]);
	}
	free(p);
}

/* Runs one RPC synchronously; returns it completed. */
static struct rpc *run1(struct rr_th_cl *c, uint32_t reply_n, uint32_t filler_n, unsigned nitems,
			const uint32_t *lens, bool sink, uint32_t max_reply)
{
	struct rpc *p = mk_rpc(c, reply_n, filler_n, nitems, lens, sink, max_reply);
	unsigned before;

	pthread_mutex_lock(&c->lock);
	before = c->done;
	pthread_mutex_unlock(&c->lock);
	REQUIRE_EQ(rr_tp_client_submit(c->tp, &p->r), 0);
	REQUIRE(rr_th_cl_wait(c, before + 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p->completions, 1);
	return p;
}

static void confs(struct rr_tp_conf *sc, struct rr_tp_conf *cc)
{
	rr_tp_conf_default(sc);
	rr_tp_conf_default(cc);
	sc->credits = 64;
	cc->connect_timeout_ms = 3000;
	/* These tests cover plain RFC 8166; reliable reply is covered by
	 * tests/transport/test_reliable_reply_e2e.c. */
	sc->ext_caps = 0;
	cc->ext_caps = 0;
}

/* Every message form, both directions, data verified; sizes around the
 * 4096-byte thresholds. */
/* The counters as rpcrdma_xprt_stats_print shows them. */
static void print_stats(const struct rr_xprt_stats *st)
{
	struct rpcrdma_xprt_stats o;

	memset(&o, 0, sizeof(o));
	rr_xprt_stats_export(st, &o);
	snprintf(o.transport, sizeof(o.transport), "rdma");
	(void)rpcrdma_xprt_stats_print(&o, stdout);
}

TEST(xprt_e2e_message_forms)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rr_xprt_stats st;
	struct rr_xprt_params prm;
	int port;
	struct {
		uint32_t reply_n, filler_n, nitems, len0;
		bool sink;
		uint32_t max_reply;
		int expect;
	} cases[] = {
		{0, 0, 1, 100, false, 1024, 0},        /* Short Call, inline Reply */
		{0, 0, 1, 4100, false, 8192, 0},       /* item moved to a Read chunk */
		{0, 5000, 1, 13, false, 4096, 0},      /* Long Call */
		{0, 9000, 1, 20001, true, 4096, 0},    /* Long Call + item + Write chunk */
		{0, 0, 1, 65537, true, 1024, 0},       /* Read chunk + Write chunk */
		{4048, 0, 0, 0, false, 8192, 0},       /* Reply 28 + 20 + 4048 = 4096 */
		{4052, 0, 0, 0, false, 8192, 0},       /* 4100: Long Reply */
		{4044, 0, 0, 0, false, 8192, 0},       /* 4092: inline */
		{200000, 0, 1, 7, false, 210000, 0},   /* big Long Reply */
		{5000, 0, 0, 0, false, 1000, -EREMOTEIO}, /* fits nowhere: ERR_CHUNK */
	};

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	REQUIRE_EQ(rr_tp_client_params(c.tp, &prm, NULL), 0);
	CHECK_EQ(prm.call_inline, 4096);
	CHECK_EQ(prm.reply_inline, 4096);
	CHECK(prm.peer_r);
	for (unsigned i = 0; i < RR_ARRAY_SIZE(cases); i++) {
		uint32_t lens[1] = {cases[i].len0};
		struct rpc *p = run1(&c, cases[i].reply_n, cases[i].filler_n, cases[i].nitems,
				     lens, cases[i].sink, cases[i].max_reply);

		CHECK_EQ(p->status, cases[i].expect);
		if (cases[i].expect == 0) {
			bool ok = verify(p);

			if (!ok)
				printf("  case %u failed verification\n", i);
			CHECK(ok);
		}
		if (cases[i].sink)
			CHECK(p->r.is_placed[0]);
		free_rpc(p);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.short_msgs >= 1);
	CHECK(st.short_msgs + st.chunked_msgs >= 6);
	CHECK(st.long_msgs >= 2);
	CHECK(st.read_chunks >= 4);
	CHECK_EQ(st.err_received, 1);
	CHECK(st.remote_inv > 0);
	print_stats(&st);
	rr_th_cl_stop(&c);
	rr_tp_server_stats(s.tp, &st);
	print_stats(&st);
	CHECK_EQ(st.err_chunk_sent, 1);
	CHECK(st.rdma_read_bytes >= 4100 + 5000 + 9000 + 20001 + 65537);
	srv_stop(&s);
	CHECK_EQ(s.bad, 0);
}

/* Several Read chunks and Write chunks, 16 segments each, odd lengths; an
 * unused Write chunk. */
TEST(xprt_e2e_many_chunks_and_segments)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	int port;
	uint32_t lens[3] = {16 * 1024 - 64, 15 * 1024 + 3, 16 * 1024 - 65};
	struct rpc *p;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	cc.max_seg_len = 1024;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	p = run1(&c, 0, 0, 3, lens, true, 4096);
	CHECK(verify(p));
	for (unsigned k = 0; k < 3; k++)
		CHECK(p->r.is_placed[k]);
	free_rpc(p);
	/* 17 segments exceed the limit: refused synchronously. */
	lens[0] = 16 * 1024 + 1;
	p = mk_rpc(&c, 0, 0, 1, lens, false, 4096);
	CHECK_EQ(rr_tp_client_submit(c.tp, &p->r), -EMSGSIZE);
	free_rpc(p);
	/* Two sinks, a reply with one item: the second chunk comes back unused.
	 * (The Call carries one item; the caller offers two sinks.) */
	lens[0] = 5000;
	p = mk_rpc(&c, 0, 0, 1, lens, true, 4096);
	{
		static uint8_t extra[100];

		p->sinks[1] = (struct rr_xprt_sink){extra, sizeof(extra)};
		p->r.nsinks = 2;
	}
	{
		unsigned before = c.done;

		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p->r), 0);
		REQUIRE(rr_th_cl_wait(&c, before + 1, RR_TEST_WAIT_MS));
	}
	CHECK(verify(p));
	CHECK(p->r.is_placed[0]);
	CHECK(!p->r.is_placed[1]);
	free_rpc(p);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	srv_stop(&s);
	CHECK_EQ(s.bad, 0);
}

/* Remote invalidation on/off on either side. */
TEST(xprt_e2e_remote_invalidation_matrix)
{
	if (!rr_th_soft_ok())
		return;
	for (int m = 0; m < 4; m++) {
		struct rr_tp_conf sc, cc;
		struct srv s;
		struct rr_th_cl c;
		struct rr_xprt_stats cst;
		int port;
		uint32_t lens[1] = {3000};
		struct rpc *p;

		confs(&sc, &cc);
		cc.remote_inv = m & 1;
		sc.remote_inv = (m & 2) != 0;
		port = srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(cl_start(&c, &cc, port), 0);
		for (int i = 0; i < 5; i++) {
			p = run1(&c, 0, 0, 1, lens, true, 4096);
			CHECK(verify(p));
			free_rpc(p);
		}
		rr_tp_client_stats(c.tp, &cst);
		CHECK_EQ(cst.remote_inv > 0, m == 3);
		CHECK_EQ(cst.bad_remote_inv, 0);
		CHECK(cst.local_inv + cst.remote_inv >= 5);
		CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
		rr_th_cl_stop(&c);
		srv_stop(&s);
	}
}

/* Credit exhaustion: a grant of 4 and 400 Calls submitted at once. */
TEST(xprt_e2e_credit_exhaustion)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rr_xprt_stats st;
	struct rpc *ps[400];
	int port;
	unsigned good = 0;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.credits = 4;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	for (unsigned i = 0; i < 400; i++) {
		uint32_t lens[1] = {i % 3 == 0 ? 6000u : 40u + i};

		ps[i] = mk_rpc(&c, i % 5 == 0 ? 5000 : 0, 0, 1, lens, i % 2 == 0, 16384);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &ps[i]->r), 0);
	}
	REQUIRE(rr_th_cl_wait(&c, 400, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < 400; i++) {
		CHECK_EQ(ps[i]->completions, 1);
		if (verify(ps[i]))
			good++;
		else
			printf("  rpc %u: status %d len %u reply_len %u placed %d/%u\n", i,
			       ps[i]->status, ps[i]->len[0], ps[i]->r.reply_len,
			       ps[i]->r.is_placed[0], ps[i]->r.placed[0]);
		free_rpc(ps[i]);
	}
	CHECK_EQ(good, 400);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.credits_exhausted > 0);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	srv_stop(&s);
}

/* A connection cut while Calls wait for their Replies: reconnection,
 * retransmission with the same XIDs, each RPC completed exactly once, no
 * STag left valid. */
TEST(xprt_e2e_cut_and_retransmit)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rr_xprt_stats st;
	struct rpc *ps[30];
	int port;
	unsigned good = 0;
	uint32_t lens[1] = {7000};

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.no_srq = true;   /* 30 held at once: a fixed grant from the first Reply */
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	/* One RPC first so that the grant opens beyond 1. */
	ps[0] = run1(&c, 0, 0, 1, lens, true, 4096);
	CHECK(verify(ps[0]));
	free_rpc(ps[0]);
	pthread_mutex_lock(&s.sq.lock);
	s.sq.hold = true;
	pthread_mutex_unlock(&s.sq.lock);
	for (unsigned i = 0; i < 30; i++) {
		ps[i] = mk_rpc(&c, i % 3 == 0 ? 6000 : 0, i % 4 == 0 ? 5000 : 0, 1, lens,
			       i % 2 == 0, 16384);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &ps[i]->r), 0);
	}
	for (int t = 0; t < 500; t++) {
		unsigned n;

		pthread_mutex_lock(&s.sq.lock);
		n = s.sq.nheld;
		pthread_mutex_unlock(&s.sq.lock);
		if (n == 30)
			break;
		rr_th_sleep_ms(10);
	}
	CHECK_EQ(rr_th_sq_nheld(&s.sq), 30);
	CHECK(rr_tp_client_live_stags(c.tp) > 0);
	REQUIRE_EQ(rr_tp_client_cut(c.tp), 0);
	/* The first Call retransmitted on the new connection (held too; the
	 * grant is 1 until a Reply): the old connection is gone by then, and
	 * the held Calls' Replies on it go nowhere. */
	for (int t = 0; t < 2000 && rr_th_sq_nheld(&s.sq) < 31; t++)
		rr_th_sleep_ms(10);
	CHECK_EQ(rr_th_sq_nheld(&s.sq), 31);
	rr_th_sq_release_held(&s.sq);
	REQUIRE(rr_th_cl_wait(&c, 31, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < 30; i++) {
		CHECK_EQ(ps[i]->completions, 1);
		if (verify(ps[i]))
			good++;
		else
			printf("  rpc %u: status %d\n", i, ps[i]->status);
		free_rpc(ps[i]);
	}
	CHECK_EQ(good, 30);
	rr_tp_client_stats(c.tp, &st);
	CHECK(st.reconnects >= 1);
	CHECK(st.retransmits >= 30);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	srv_stop(&s);
	CHECK(s.reply_fail >= 1);
}

/* Aborted RPCs complete with the abort status once their STags are invalid. */
TEST(xprt_e2e_abort)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rpc *p;
	int port;
	uint32_t lens[1] = {9000};

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	pthread_mutex_lock(&s.sq.lock);
	s.sq.hold = true;
	pthread_mutex_unlock(&s.sq.lock);
	p = mk_rpc(&c, 0, 0, 1, lens, true, 4096);
	REQUIRE_EQ(rr_tp_client_submit(c.tp, &p->r), 0);
	for (int t = 0; t < 500 && rr_th_sq_nheld(&s.sq) == 0; t++)
		rr_th_sleep_ms(10);
	CHECK(rr_tp_client_live_stags(c.tp) > 0);
	rr_tp_client_abort(c.tp, &p->r, -ETIMEDOUT);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p->status, -ETIMEDOUT);
	CHECK_EQ(p->completions, 1);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	/* The late Reply: its RDMA Write names a dead STag (the requester's
	 * provider refuses it, the connection is renewed) or, had it gone
	 * through, it would be discarded as an unknown XID. The responder's
	 * reply returns once its fate is sealed; then the transport still
	 * works (after the reconnection), and by the next RPC's completion the
	 * late Reply has changed nothing. */
	rr_th_sq_release_held(&s.sq);
	{
		unsigned answered = 0;

		for (int t = 0; t < 2000 && answered == 0; t++) {
			pthread_mutex_lock(&s.sq.lock);
			answered = s.served + s.reply_fail + s.err_chunks;
			pthread_mutex_unlock(&s.sq.lock);
			if (!answered)
				rr_th_sleep_ms(5);
		}
		CHECK_EQ(answered, 1);
	}
	{
		struct rpc *q = run1(&c, 0, 0, 1, lens, true, 4096);

		if (!verify(q))
			printf("  q: status %d len %u placed %d/%u\n", q->status, q->r.reply_len,
			       q->r.is_placed[0], q->r.placed[0]);
		CHECK(verify(q));
		free_rpc(q);
	}
	CHECK_EQ(p->completions, 1);
	free_rpc(p);
	rr_th_cl_stop(&c);
	srv_stop(&s);
}

/* ---- a scripted rogue requester: raw RPC-over-RDMA headers ---- */
static int rogue_open(struct rr_th_rogue *g, int port)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};

	return rr_th_rogue_open(g, port, pd, 8, false);
}

static size_t rogue_call(uint8_t *b, uint32_t xid, uint32_t vers, uint32_t proc,
			 uint32_t rpc_xid)
{
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, vers);
	rr_put_be32(b + 8, 8);
	rr_put_be32(b + 12, proc);
	rr_put_be32(b + 16, 0);   /* no Read list */
	rr_put_be32(b + 20, 0);   /* no Write list */
	rr_put_be32(b + 24, 0);   /* no Reply chunk */
	/* test-protocol Call: xid CALL op reply_n filler_n nitems MAGIC */
	rr_put_be32(b + 28, rpc_xid);
	rr_put_be32(b + 32, 0);
	rr_put_be32(b + 36, 1);
	rr_put_be32(b + 40, 0);
	rr_put_be32(b + 44, 0);
	rr_put_be32(b + 48, 0);
	rr_put_be32(b + 52, MAGIC);
	return 56;
}

static void expect_error_v(const uint8_t *r, int n, uint32_t xid, uint32_t err, uint32_t vers)
{
	if (n != (err == RR_HDR_ERR_VERS ? 28 : 20))
		printf("  xid %#x: got %d bytes (proc %u)\n", xid, n, n >= 16 ? rr_get_be32(r + 12) : 0);
	REQUIRE_EQ(n, (err == RR_HDR_ERR_VERS ? 28 : 20));
	CHECK_EQ(rr_get_be32(r), xid);
	CHECK_EQ(rr_get_be32(r + 4), vers);      /* echoes the failing message */
	CHECK(rr_get_be32(r + 8) >= 1);          /* never a grant of 0 */
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_ERROR);
	CHECK_EQ(rr_get_be32(r + 16), err);
	if (err == RR_HDR_ERR_VERS) {
		CHECK_EQ(rr_get_be32(r + 20), 1);
		CHECK_EQ(rr_get_be32(r + 24), 1);
	}
}

static void expect_error(const uint8_t *r, int n, uint32_t xid, uint32_t err)
{
	expect_error_v(r, n, xid, err, 1);
}

/* A responder granting 8 credits from its first Reply on (its own
 * Receives: the rogue sends up to 5 messages without waiting, within that
 * grant) and the rogue requester connected to it (RFC 8797 block
 * 4096/4096, no R); returns the responder's port. */
static int srv_and_rogue(struct srv *s, struct rr_tp_conf *sc, struct rr_th_rogue *g)
{
	int port;

	rr_tp_conf_default(sc);
	sc->credits = 8;
	sc->no_srq = true;
	port = srv_start(s, sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rogue_open(g, port), 0);
	return port;
}

/* Every malformed header class gets exactly the RFC 8166 section 4.5
 * answer, and the connection survives; a Read chunk naming a bad STag is an
 * operational error that ends the connection. */
TEST(xprt_e2e_rogue_requester)
{
	struct rr_tp_conf sc;
	struct srv s;
	struct rr_th_rogue g;
	uint8_t m[256], r[4096];
	size_t l;
	int port, n;

	if (!rr_th_soft_ok())
		return;
	port = srv_and_rogue(&s, &sc, &g);

	/* A valid Call first: answered inline, grant >= 1. */
	l = rogue_call(m, 0x100, 1, RR_HDR_MSG, 0x100);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE(n >= 28 + 20);
	CHECK_EQ(rr_get_be32(r), 0x100);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_MSG);
	CHECK_EQ(rr_get_be32(r + 28), 0x100);
	/* Version 2 and version 0: ERR_VERS 1..1. */
	l = rogue_call(m, 0x101, 2, RR_HDR_MSG, 0x101);
	expect_error_v(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x101, RR_HDR_ERR_VERS, 2);
	l = rogue_call(m, 0x102, 0, RR_HDR_MSG, 0x102);
	expect_error_v(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x102, RR_HDR_ERR_VERS, 0);
	/* RDMA_MSGP, unknown procedure: ERR_CHUNK. */
	l = rogue_call(m, 0x103, 1, RR_HDR_MSGP, 0x103);
	expect_error(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x103, RR_HDR_ERR_CHUNK);
	l = rogue_call(m, 0x104, 1, 99, 0x104);
	expect_error(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x104, RR_HDR_ERR_CHUNK);
	/* Truncated chunk lists: a Read list entry cut short. */
	l = rogue_call(m, 0x105, 1, RR_HDR_MSG, 0x105);
	rr_put_be32(m + 16, 1);
	expect_error(r, rr_th_rogue_xchg(&g, m, 28, r, 3000), 0x105, RR_HDR_ERR_CHUNK);
	/* Bad discriminator. */
	l = rogue_call(m, 0x106, 1, RR_HDR_MSG, 0x106);
	rr_put_be32(m + 20, 7);
	expect_error(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x106, RR_HDR_ERR_CHUNK);
	/* RDMA_NOMSG without any chunk. */
	l = rogue_call(m, 0x107, 1, RR_HDR_NOMSG, 0x107);
	expect_error(r, rr_th_rogue_xchg(&g, m, 28, r, 3000), 0x107, RR_HDR_ERR_CHUNK);
	/* Unaligned Read position. */
	rr_put_be32(m, 0x108);
	rr_put_be32(m + 4, 1);
	rr_put_be32(m + 8, 8);
	rr_put_be32(m + 12, RR_HDR_MSG);
	rr_put_be32(m + 16, 1);
	rr_put_be32(m + 20, 6);          /* position */
	rr_put_be32(m + 24, 0x1234);     /* handle */
	rr_put_be32(m + 28, 8);          /* length */
	rr_put_be64(m + 32, 0x1000);     /* offset */
	rr_put_be32(m + 40, 0);
	rr_put_be32(m + 44, 0);
	rr_put_be32(m + 48, 0);
	rogue_call(m + 52 - 28, 0, 0, 0, 0x108);   /* body after the lists */
	rr_put_be32(m, 0x108);
	rr_put_be32(m + 4, 1);
	rr_put_be32(m + 8, 8);
	rr_put_be32(m + 12, RR_HDR_MSG);
	expect_error(r, rr_th_rogue_xchg(&g, m, 52 + 28, r, 3000), 0x108, RR_HDR_ERR_CHUNK);
	/* rdma_xid differs from the RPC XID. */
	l = rogue_call(m, 0x109, 1, RR_HDR_MSG, 0x999);
	expect_error(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x109, RR_HDR_ERR_CHUNK);
	/* Truncated inside the fixed header (an XID is there): ERR_CHUNK. */
	l = rogue_call(m, 0x110, 1, RR_HDR_MSG, 0x110);
	expect_error(r, rr_th_rogue_xchg(&g, m, 12, r, 3000), 0x110, RR_HDR_ERR_CHUNK);
	/* Silently discarded: RDMA_DONE, RDMA_ERROR, no XID, an RPC Reply.
	 * Sent without waiting; the Reply to the valid Call after them is
	 * the next message (no answer to any of them came first). */
	l = rogue_call(m, 0x10a, 1, RR_HDR_DONE, 0x10a);
	CHECK_EQ(rr_th_rogue_send(&g, m, 16, 0, NULL, 3000), 0);
	n = rr_hdr_encode_error_buf(0x10b, 1, 1, RR_HDR_ERR_CHUNK, m, sizeof(m));
	CHECK_EQ(rr_th_rogue_send(&g, m, (size_t)n, 0, NULL, 3000), 0);
	l = rogue_call(m, 0x10c, 1, RR_HDR_MSG, 0x10c);
	CHECK_EQ(rr_th_rogue_send(&g, m, 3, 0, NULL, 3000), 0);
	l = rogue_call(m, 0x10d, 1, RR_HDR_MSG, 0x10d);
	rr_put_be32(m + 32, 1);   /* msg_type REPLY */
	CHECK_EQ(rr_th_rogue_send(&g, m, l, 0, NULL, 3000), 0);
	/* The connection survived all of that. */
	l = rogue_call(m, 0x10e, 1, RR_HDR_MSG, 0x10e);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE(n >= 48);
	CHECK_EQ(rr_get_be32(r), 0x10e);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_MSG);
	/* A Read chunk naming an STag that does not exist: the RDMA Read
	 * fails, which is fatal to the connection (RFC 8166 section 4.5.1? it
	 * is an operational error): no answer, the connection ends. */
	rr_put_be32(m, 0x10f);
	rr_put_be32(m + 4, 1);
	rr_put_be32(m + 8, 8);
	rr_put_be32(m + 12, RR_HDR_MSG);
	rr_put_be32(m + 16, 1);
	rr_put_be32(m + 20, 24);          /* position: after nitems */
	rr_put_be32(m + 24, 0xdead0001);  /* handle */
	rr_put_be32(m + 28, 16);
	rr_put_be64(m + 32, 0x1000);
	rr_put_be32(m + 40, 0);
	rr_put_be32(m + 44, 0);
	rr_put_be32(m + 48, 0);
	rr_put_be32(m + 52, 0x10f);
	rr_put_be32(m + 56, 0);
	rr_put_be32(m + 60, 1);
	rr_put_be32(m + 64, 0);
	rr_put_be32(m + 68, 0);
	rr_put_be32(m + 72, 1);           /* nitems */
	rr_put_be32(m + 76, 16);          /* len; data in the chunk */
	rr_put_be32(m + 80, MAGIC);
	n = rr_th_rogue_xchg(&g, m, 84, r, 3000);
	CHECK(n <= 0);
	CHECK_EQ(srv_served(&s, 2), 2);
	rr_th_rogue_close(&g);
	/* The same peer retransmits that XID on a new connection: ERR_CHUNK,
	 * not another failing Read; the connection stays up. */
	REQUIRE_EQ(rogue_open(&g, port), 0);
	expect_error(r, rr_th_rogue_xchg(&g, m, 84, r, 3000), 0x10f, RR_HDR_ERR_CHUNK);
	l = rogue_call(m, 0x111, 1, RR_HDR_MSG, 0x111);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	REQUIRE(n >= 48);
	CHECK_EQ(rr_get_be32(r), 0x111);
	CHECK_EQ(srv_served(&s, 3), 3);
	rr_th_rogue_close(&g);
	srv_stop(&s);
}

/* ---- every Call rule end to end, with complete messages ---- */

/* A test-protocol Call body (28 bytes, RPC XID @x): what follows the chunk
 * lists, so that a header rule that were not checked would let the message
 * through as a valid Call. */
#define BODY(x) (x), 0, 1, 0, 0, 0, MAGIC
#define RX 0x4000u
/* a segment naming no memory of the rogue (a Read of it would fail) */
#define SEG(len) 0x1234u, (len), 0, 0x1000u
#define WRAPSEG 0x1234u, 16, 0xffffffffu, 0xfffffff8u
#define FIX(vers, proc) RX, (vers), 8, (proc)

enum want { W_ERR_VERS, W_ERR_CHUNK, W_DROP };

struct rule {
	const char *name;
	uint32_t w[40];
	size_t nw;
	int len;          /* bytes sent; 0: all words */
	enum want want;
	/* generated instead of @w: a Write list of @wchunks chunks of @wsegs
	 * segments each */
	uint32_t wchunks, wsegs;
};

#define WORDS(...) .w = {__VA_ARGS__}, .nw = sizeof((uint32_t[]){__VA_ARGS__}) / 4

/* RFC 8166 section 5.5 (header errors) and the chunk rules of sections
 * 3.4-3.5 and 4.4, one complete and otherwise valid Call each. */
static const struct rule rules[] = {
	{"version 2", WORDS(FIX(2, 0), 0, 0, 0, BODY(RX)), 0, W_ERR_VERS},
	{"version 0", WORDS(FIX(0, 0), 0, 0, 0, BODY(RX)), 0, W_ERR_VERS},
	{"version ~0", WORDS(FIX(0xffffffffu, 0), 0, 0, 0, BODY(RX)), 0, W_ERR_VERS},
	{"xid only", WORDS(RX), 0, W_ERR_CHUNK},
	{"no proc", WORDS(RX, 1, 8), 0, W_ERR_CHUNK},
	{"unknown proc 5", WORDS(FIX(1, 5), 0, 0, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"RDMA_MSGP", WORDS(FIX(1, 2), 0, 0, 0, 0, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"Read discriminator 2", WORDS(FIX(1, 0), 2, 0, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"Write discriminator 2", WORDS(FIX(1, 0), 0, 2, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"Reply discriminator 7", WORDS(FIX(1, 0), 0, 0, 7, BODY(RX)), 0, W_ERR_CHUNK},
	{"Read list cut short", WORDS(FIX(1, 0), 1, 8, SEG(4)), 0, W_ERR_CHUNK},
	{"Position not a multiple of 4", WORDS(FIX(1, 0), 1, 6, SEG(4), 0, 0, 0, BODY(RX)), 0,
	 W_ERR_CHUNK},
	{"Positions decrease", WORDS(FIX(1, 0), 1, 8, SEG(4), 1, 4, SEG(4), 0, 0, 0, BODY(RX)), 0,
	 W_ERR_CHUNK},
	{"Read chunks overlap", WORDS(FIX(1, 0), 1, 4, SEG(16), 1, 8, SEG(4), 0, 0, 0, BODY(RX)),
	 0, W_ERR_CHUNK},
	{"Position beyond the Payload", WORDS(FIX(1, 0), 1, 32, SEG(4), 0, 0, 0, BODY(RX)), 0,
	 W_ERR_CHUNK},
	{"Read segment wraps", WORDS(FIX(1, 0), 1, 28, WRAPSEG, 0, 0, 0, BODY(RX)), 0,
	 W_ERR_CHUNK},
	{"Write segment wraps", WORDS(FIX(1, 0), 0, 1, 1, WRAPSEG, 0, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"Reply segment wraps", WORDS(FIX(1, 0), 0, 0, 1, 1, WRAPSEG, BODY(RX)), 0, W_ERR_CHUNK},
	{"a Write chunk of 65 segments (limit 64)", .wchunks = 1, .wsegs = RR_XPRT_MAX_SEGS + 1,
	 .want = W_ERR_CHUNK},
	{"17 Write chunks (limit 16)", .wchunks = RR_XPRT_MAX_WCHUNKS + 1, .wsegs = 1,
	 .want = W_ERR_CHUNK},
	{"RDMA_NOMSG without chunks", WORDS(FIX(1, 1), 0, 0, 0, BODY(RX)), 0, W_ERR_CHUNK},
	{"RDMA_NOMSG with a Write list only", WORDS(FIX(1, 1), 0, 1, 1, SEG(100), 0, 0, BODY(RX)),
	 0, W_ERR_CHUNK},
	{"RDMA_NOMSG with a Reply chunk only", WORDS(FIX(1, 1), 0, 0, 1, 1, SEG(100), BODY(RX)), 0,
	 W_ERR_CHUNK},
	{"RDMA_NOMSG, empty Position-zero chunk", WORDS(FIX(1, 1), 1, 0, SEG(0), 0, 0, 0,
							BODY(RX)), 0, W_ERR_CHUNK},
	{"RDMA_NOMSG, Read chunk not at zero", WORDS(FIX(1, 1), 1, 8, SEG(16), 0, 0, 0, BODY(RX)),
	 0, W_ERR_CHUNK},
	{"RDMA_MSG with a Position-zero chunk", WORDS(FIX(1, 0), 1, 0, SEG(100), 0, 0, 0, BODY(RX)),
	 0, W_ERR_CHUNK},
	{"RDMA_MSG without payload", WORDS(FIX(1, 0), 0, 0, 0), 0, W_ERR_CHUNK},
	{"RDMA_MSG with a 2-byte payload", WORDS(FIX(1, 0), 0, 0, 0, RX), 30, W_ERR_CHUNK},
	{"rdma_xid differs from the RPC XID", WORDS(FIX(1, 0), 0, 0, 0, BODY(RX + 1)), 0,
	 W_ERR_CHUNK},
	{"fewer than 4 bytes", WORDS(RX), 3, W_DROP},
	{"RDMA_DONE (not negotiated)", WORDS(FIX(1, 3)), 0, W_DROP},
	{"RDMA_ERROR to a responder", WORDS(FIX(1, 4), 2), 0, W_DROP},
	{"RDMA_ERROR with an unknown code", WORDS(FIX(1, 4), 9), 0, W_DROP},
	{"an RPC Reply, not a Call", WORDS(FIX(1, 0), 0, 0, 0, RX, 1, 0, 0, 0, 0, MAGIC), 0,
	 W_DROP},
};

/* Each rule, end to end through a responder: a complete message that
 * breaks only that rule gets exactly the answer RFC 8166 section 5.5
 * mandates (ERR_VERS 1..1 echoing the version, ERR_CHUNK, or silence), and
 * the connection goes on. Silence is proved by the next valid Call: its
 * Reply is the next message the rogue receives. */
TEST(xprt_e2e_call_rules_end_to_end)
{
	struct rr_tp_conf sc;
	struct srv s;
	struct rr_th_rogue g;
	uint8_t m[2048], r[4096];

	if (!rr_th_soft_ok())
		return;
	(void)srv_and_rogue(&s, &sc, &g);
	for (size_t i = 0; i < RR_ARRAY_SIZE(rules); i++) {
		const struct rule *c = &rules[i];
		uint32_t ping = 0x4100 + (uint32_t)i;
		size_t l = 0;
		int n;

		static const uint32_t fix[] = {FIX(1, 0), 0}, seg[] = {SEG(4)}, body[] = {BODY(RX)};

		for (size_t k = 0; k < c->nw; k++, l += 4)
			rr_put_be32(m + l, c->w[k]);
		for (uint32_t ch = 0; ch < c->wchunks; ch++) {
			if (ch == 0)
				for (size_t k = 0; k < RR_ARRAY_SIZE(fix); k++, l += 4)
					rr_put_be32(m + l, fix[k]);
			rr_put_be32(m + l, 1);
			rr_put_be32(m + l + 4, c->wsegs);
			l += 8;
			for (uint32_t sg = 0; sg < c->wsegs; sg++)
				for (size_t k = 0; k < RR_ARRAY_SIZE(seg); k++, l += 4)
					rr_put_be32(m + l, seg[k]);
			if (ch + 1 == c->wchunks) {
				rr_put_be32(m + l, 0);       /* end of Write list */
				rr_put_be32(m + l + 4, 0);   /* no Reply chunk */
				l += 8;
				for (size_t k = 0; k < RR_ARRAY_SIZE(body); k++, l += 4)
					rr_put_be32(m + l, body[k]);
			}
		}
		REQUIRE(l <= sizeof(m));
		if (c->len)
			l = (size_t)c->len;
		if (c->want == W_DROP) {
			REQUIRE_EQ(rr_th_rogue_send(&g, m, l, 0, NULL, 3000), 0);
		} else {
			n = rr_th_rogue_xchg(&g, m, l, r, 3000);
			if (n < 16 || rr_get_be32(r + 12) != RR_HDR_ERROR)
				printf("  rule \"%s\": got %d bytes, proc %u\n", c->name, n,
				       n >= 16 ? rr_get_be32(r + 12) : 0);
			expect_error_v(r, n, RX, c->want == W_ERR_VERS ? RR_HDR_ERR_VERS
								       : RR_HDR_ERR_CHUNK,
				       c->nw > 1 ? c->w[1] : 1);
			CHECK(n <= 0 || rr_get_be32(r + 8) <= 8);   /* grant within ours */
		}
		/* the next message is the Reply to the next Call */
		l = rogue_call(m, ping, 1, RR_HDR_MSG, ping);
		n = rr_th_rogue_xchg(&g, m, l, r, 3000);
		if (n < 48 || rr_get_be32(r) != ping || rr_get_be32(r + 12) != RR_HDR_MSG)
			printf("  rule \"%s\": after it, got %d bytes for xid %#x proc %u\n", c->name,
			       n, n >= 4 ? rr_get_be32(r) : 0, n >= 16 ? rr_get_be32(r + 12) : 0);
		REQUIRE(n >= 48);
		CHECK_EQ(rr_get_be32(r), ping);
		CHECK_EQ(rr_get_be32(r + 12), RR_HDR_MSG);
		CHECK(rr_get_be32(r + 8) >= 1);
	}
	CHECK_EQ(srv_served(&s, RR_ARRAY_SIZE(rules)), RR_ARRAY_SIZE(rules));
	rr_th_rogue_close(&g);
	srv_stop(&s);
	CHECK_EQ(s.bad, 0);
}
#undef BODY
#undef SEG
#undef WRAPSEG
#undef FIX

static uint32_t xs32(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 11);
}

/* Posts the @n messages of @msg (each at most 512 bytes, @len[i]) as one
 * burst of signaled Sends from the rogue, from its send buffer's 512-byte
 * slots @slot0 on (not waited for). */
static void burst_post(struct rr_th_rogue *g, uint8_t (*msg)[512], const size_t *len, unsigned n,
		       unsigned slot0)
{
	struct rpcrdma_sge sge[8];
	struct rpcrdma_send_wr wr[8];

	REQUIRE(slot0 + n <= 8);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *b = g->sbuf + 512 * (slot0 + i);

		memcpy(b, msg[i], len[i]);
		sge[i] = (struct rpcrdma_sge){(uint64_t)(uintptr_t)b,
					      (uint32_t)len[i], rpcrdma_mr_lkey(g->smr)};
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 3000 + i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = RPCRDMA_WR_SEND;
		wr[i].flags = RPCRDMA_SEND_SIGNALED;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	REQUIRE_EQ(rpcrdma_post_send(g->qp, wr, NULL), 0);
}

/* Every message a responder sends carries a grant of at least 1 (RFC 8166
 * section 4.3.1: a grant of 0 would deadlock the requester) and at most
 * its configured credits, across randomized runs: responders with 0 (a
 * configuration error), 1, 2, 3, 5, 8 or 64 credits, with and without
 * reliable reply; a rogue requester sending bursts of up to 5 messages
 * (within its grant: the last credit it read; a message beyond it ends the
 * connection, RFC 8166 section 4.3.1) of valid Calls with small Replies,
 * Calls whose Reply fits nowhere (ERR_CHUNK, or a Read-chunk Reply answered
 * with RDMA_DONE), header errors of every class, and RDMA_DONEs nobody
 * asked for (each takes a Call's credit; a burst ends with an answered
 * Call, so that once its answers came every message of it was settled).
 * Every answer is read off the wire; the number of answers is exactly the
 * number owed. */
TEST(xprt_e2e_grants_randomized)
{
	static const uint32_t credits[] = {0, 1, 2, 3, 5, 8, 64};
	unsigned checked = 0;

	if (!rr_th_soft_ok())
		return;
	for (uint64_t seed = 1; seed <= 14; seed++) {
		uint64_t rng = seed * 0x9e3779b97f4a7c15ull;
		struct rr_tp_conf sc;
		struct srv s;
		struct rr_th_rogue g;
		bool rrep = seed & 1;
		uint32_t max_grant, xid = 0x60000 + (uint32_t)seed * 0x1000, grant = 1;
		unsigned sent = 0;   /* the rogue's messages (to set beside the server's recvs) */
		static const uint8_t pd_rr[20] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3, 0xac, 0x3a,
						  0x36, 0x3d, 1, 12, 0, 0, 0, 0, 0, 1};
		int port;

		rr_tp_conf_default(&sc);
		sc.credits = credits[(seed - 1) % RR_ARRAY_SIZE(credits)];
		sc.rrep_max = 2;
		max_grant = sc.credits ? sc.credits : 1;
		port = srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(rr_th_rogue_open(&g, port, pd_rr, rrep ? 20 : 8, true), 0);
		for (int step = 0; step < 25; step++) {
			uint8_t msg[8][512], r[4096];
			size_t len[8];
			unsigned n = 1 + xs32(&rng) % 5, owed = 0, got = 0, dslot = 0;
			uint64_t end;

			n = RR_MIN(n, grant);
			for (unsigned i = 0; i < n; i++) {
				uint32_t kind = xs32(&rng) % 8, x = ++xid;

				if (i == n - 1 && (kind == 4 || kind == 5))
					kind = 0;   /* the last one is answered */

				len[i] = rogue_call(msg[i], x, 1, RR_HDR_MSG, x);
				switch (kind) {
				case 0: case 1: case 2:   /* small Reply */
					rr_put_be32(msg[i] + 40, xs32(&rng) % 1000);
					owed++;
					break;
				case 3:                   /* fits nowhere / Read chunk */
					rr_put_be32(msg[i] + 40, 5000 + xs32(&rng) % 15000);
					owed++;
					break;
				case 4: {                 /* a header error */
					const struct rule *c;

					do
						c = &rules[xs32(&rng) % RR_ARRAY_SIZE(rules)];
					while (c->wchunks);
					len[i] = 0;
					for (size_t k = 0; k < c->nw; k++, len[i] += 4)
						rr_put_be32(msg[i] + len[i], c->w[k]);
					if (c->len)
						len[i] = (size_t)c->len;
					rr_put_be32(msg[i], x);   /* its own XID */
					if (len[i] >= 32 && rr_get_be32(msg[i] + 28) == RX)
						rr_put_be32(msg[i] + 28, x);
					owed += c->want != W_DROP;
					break;
				}
				case 5:                   /* RDMA_DONE owed to nobody */
					len[i] = (size_t)rr_hdr_encode_error_buf(x, 1, 1, 2, msg[i], 512);
					rr_put_be32(msg[i] + 12, RR_HDR_DONE);
					len[i] = 16;
					break;
				default:                  /* an empty Reply */
					owed++;
					break;
				}
			}
			burst_post(&g, msg, len, n, 0);
			sent += n;
			end = rr_now_ns(NULL) + 5000000000ull;
			while (got < owed && rr_now_ns(NULL) < end) {
				struct rpcrdma_wc wc;

				if (rpcrdma_cq_wait(g.cq, 1, &wc, 100) != 1)
					continue;
				REQUIRE_EQ(wc.status, RPCRDMA_WC_SUCCESS);
				if (wc.opcode != RPCRDMA_WC_RECV)
					continue;
				memcpy(r, g.rbuf[wc.wr_id], wc.byte_len);
				rr_th_rogue_post_recv(&g, (unsigned)wc.wr_id);
				got++;
				REQUIRE(wc.byte_len >= 16);
				if (rr_get_be32(r + 8) < 1 || rr_get_be32(r + 8) > max_grant)
					printf("  seed %llu: grant %u (credits %u) in proc %u\n",
					       (unsigned long long)seed, rr_get_be32(r + 8), sc.credits,
					       rr_get_be32(r + 12));
				CHECK(rr_get_be32(r + 8) >= 1);
				CHECK(rr_get_be32(r + 8) <= max_grant);
				grant = RR_MAX(rr_get_be32(r + 8), 1u);
				checked++;
				/* a Read-chunk Reply: the RDMA_DONE it is owed */
				if (rr_get_be32(r + 12) == RR_HDR_NOMSG && rr_get_be32(r + 16) == 1) {
					size_t dl = 16;

					CHECK(rrep);
					REQUIRE_EQ(rr_rrep_encode_done(rr_get_be32(r), 1, msg[7], 16), 16);
					burst_post(&g, msg + 7, &dl, 1, 5 + dslot++ % 3);
					sent++;
				}
			}
			CHECK_EQ(got, owed);
			if (got < owed) {
				/* the unanswered Calls still hold credits: a next
				 * burst within the last grant would overrun them
				 * and end the connection (a second, made-up
				 * failure). Say where, then the next seed. */
				struct rr_xprt_stats st;
				struct rpcrdma_xprt_stats ex = {0};

				printf("  seed %llu step %d (credits %u, reliable reply %d, burst %u):"
				       " %u of %u answers, %u messages sent in all; the server:\n",
				       (unsigned long long)seed, step, sc.credits, rrep, n, got, owed,
				       sent);
				rr_tp_server_stats(s.tp, &st);
				rr_xprt_stats_export(&st, &ex);
				pthread_mutex_lock(&s.sq.lock);
				printf("  served %u bad %u err_chunks %u reply_fail %u; the worker"
				       " took %u Calls, %u queued, %s%#x\n", s.served, s.bad,
				       s.err_chunks, s.reply_fail, s.taken, s.sq.tail - s.sq.head,
				       s.in_reply ? "waiting in rr_tp_server_reply for xid "
						  : "not in rr_tp_server_reply; last xid ", s.in_xid);
				pthread_mutex_unlock(&s.sq.lock);
				(void)rpcrdma_xprt_stats_print(&ex, stdout);
				/* the process around it, as a failed probe prints
				 * it (docs/interop.md, the Debian 13 lab section of
				 * part GA: how to read it): the Calls' bytes read
				 * off the server's socket or not, the CQs (fed to
				 * the session, or waiting in a ring nobody looks
				 * at), the loops answering, the worker's wait */
				rr_diag_dump_around(port, stdout);
				break;
			}
		}
		rr_th_rogue_close(&g);
		srv_stop(&s);
	}
	CHECK(checked >= 200);
}


/* ---- a scripted rogue responder: raw Replies to our requester ---- */

/* The test protocol's Reply body after a header of @off bytes: xid REPLY
 * @mark nitems=1 len=40 MAGIC (the item's data went by RDMA Write). */
#define RBODY_MARK(buf, off, rx, mark)                                         \
	do {                                                                   \
		rr_put_be32(buf + off, rx); rr_put_be32(buf + off + 4, 1);     \
		rr_put_be32(buf + off + 8, mark); rr_put_be32(buf + off + 12, 1); \
		rr_put_be32(buf + off + 16, 40); rr_put_be32(buf + off + 20, MAGIC); \
	} while (0)

/* Submits a Call of the requester @c carrying one 40-byte item and a sink
 * for it (a Write chunk: @c runs without inline_ddp), and a largest Reply of
 * @max_reply; the rogue takes it (decoded into @h) and RDMA-Writes the
 * item's data into the Write chunk, as a responder does. */
static struct rpc *written_call(struct rr_th_rresp *g, struct rr_th_cl *c, uint32_t max_reply,
				struct rr_hdr *h)
{
	uint32_t lens[1] = {40}, vend;
	uint8_t m[4096];
	struct rpc *p = mk_rpc(c, 0, 0, 1, lens, true, max_reply);
	int n;

	REQUIRE_EQ(rr_tp_client_submit(c->tp, &p->r), 0);
	n = rr_th_rresp_recv(g, m, 5000);
	REQUIRE(n > 28);
	REQUIRE_EQ(rr_th_hdr_call(h, m, n, 0), 0);
	REQUIRE_EQ(h->nwrite, 1);
	REQUIRE_EQ(h->write[0].nsegs, 1);
	memcpy(g->data, p->data[0], 40);
	CHECK_EQ(rr_th_rresp_rdma(g, true, h->segs[h->write[0].first].handle,
				  h->segs[h->write[0].first].offset, 40, 0, &vend, 5000),
		 RPCRDMA_WC_SUCCESS);
	return p;
}

/* The first segment of chunk @c of header @h. */
#define SEG0(h, c) ((h).segs[(h).c.first])

/* Sends @len bytes of @m from rogue @g and waits (bounded) until requester
 * @c received them: a rogue's messages nobody asked for, one at a time. A
 * client keeps posted the Receives its peer may use and a few more
 * (transport/rdma/conn.c "Receives by demand"): a burst of more of them
 * than that, ahead of its processing, overruns its queue and ends the
 * connection (a Receive overrun). */
static void paced_send(struct rr_th_rresp *g, struct rr_th_cl *c, const uint8_t *m, size_t len)
{
	struct rr_xprt_stats st;
	uint64_t b0;
	int i;

	rr_tp_client_stats(c->tp, &st);
	b0 = st.inline_recv_bytes;
	REQUIRE_EQ(rr_th_rresp_send(g, m, len, 0, 5000), 0);
	for (i = 0; i < 2000; i++) {
		rr_tp_client_stats(c->tp, &st);
		if (st.inline_recv_bytes > b0)
			break;
		rr_th_sleep_ms(5);
	}
	CHECK(i < 2000);
}

/* Malformed Replies are silently discarded: after nine of them (each with
 * its own marker in the RPC body) the valid Reply completes the Call, with
 * its own body and the data the rogue RDMA-Wrote into the Write chunk, on
 * the same connection. It comes by Send With Invalidate of the Write
 * chunk's STag although this responder advertised no R (Linux svcrdma does
 * this when the requester set R): the provider saw exactly that window
 * invalidated by the peer and no Local Invalidate, and the STag is refused
 * afterwards. A duplicate of the Reply (unknown XID by then) is dropped: the
 * next Call's completion proves it was processed without effect. */
TEST(xprt_e2e_rogue_responder)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3}; /* R = 0 */
	static struct rr_th_rresp g;
	struct rr_tp_conf sc, cc;
	struct rr_th_cl c;
	static struct rr_hdr h, rh;
	uint8_t call[4096], m[4096];
	uint32_t xid, wstag, vend;
	uint64_t woff;
	uint64_t li0, ri0;
	struct rpc *p, *q;
	int n, hl;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	cc.inline_ddp = false;   /* a Write chunk for the small sink */
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, cl_complete, pd, sizeof(pd)), 0);

	/* One Call with a Write chunk; the Reply will echo it. */
	p = written_call(&g, &c, 256, &h);
	xid = h.xid;
	wstag = SEG0(h, write[0]).handle;
	woff = SEG0(h, write[0]).offset;

#define RBASE()                                                                \
	do {                                                                   \
		struct rr_hdr_seg w_ = SEG0(h, write[0]);                      \
		w_.length = 40;                                                \
		rr_hdr_init(&rh, xid, 16, RR_HDR_MSG);                          \
		REQUIRE_EQ(rr_hdr_add_write(&rh, &w_, 1), 0);                   \
	} while (0)
	/* the valid Reply has mark 0, the bad ones 1..9 */
#define RBODY RBODY_MARK
	/* 1. wrong RPC XID */
	RBASE(); hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid + 1, 1);
	paced_send(&g, &c, m, (size_t)hl + 24);
	/* 2. version 2 */
	RBASE(); rh.vers = 2; hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 2);
	paced_send(&g, &c, m, (size_t)hl + 24);
	/* 3. truncated inside the Write list */
	RBASE(); hl = rr_th_hdr_raw(&rh, m, sizeof(m));
	paced_send(&g, &c, m, 30);
	/* 4. a Read list in a Reply (no reliable reply here) */
	RBASE(); REQUIRE_EQ(rr_hdr_add_read(&rh, 8, &SEG0(h, write[0])), 0);
	hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 4);
	paced_send(&g, &c, m, (size_t)hl + 24);
	/* 5., 6. a Write chunk longer than provided; a foreign handle */
	RBASE(); SEG0(rh, write[0]).length = SEG0(h, write[0]).length + 1;
	hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 5);
	paced_send(&g, &c, m, (size_t)hl + 24);
	RBASE(); SEG0(rh, write[0]).handle ^= 0x100;
	hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 6);
	paced_send(&g, &c, m, (size_t)hl + 24);
	/* 7., 8., 9. RDMA_DONE, RDMA_MSGP, an RDMA_ERROR with an unknown code */
	RBASE(); rh.proc = RR_HDR_DONE; hl = rr_th_hdr_raw(&rh, m, sizeof(m));
	paced_send(&g, &c, m, (size_t)hl);
	RBASE(); hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 8);
	rr_put_be32(m + 12, RR_HDR_MSGP);
	paced_send(&g, &c, m, (size_t)hl + 24);
	rr_put_be32(m + 12, RR_HDR_ERROR);
	rr_put_be32(m + 16, 9);
	paced_send(&g, &c, m, 20);

	/* The valid Reply, with Send With Invalidate of our Write chunk's STag
	 * although this responder advertised R = 0. */
	li0 = atomic_load(&soft_counters.local_invs);
	ri0 = atomic_load(&soft_counters.remote_invs);
	RBASE(); hl = rr_th_hdr_raw(&rh, m, sizeof(m)); RBODY(m, hl, xid, 0);
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 24, wstag, 5000), 0);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p->completions, 1);
	CHECK_EQ(p->status, 0);
	CHECK(verify(p));                  /* the Written data in the sink */
	CHECK_EQ(p->r.reply_len, 24);
	if (p->r.reply_len >= 12)
		CHECK_EQ(rr_get_be32(p->r.reply + 8), 0);   /* the valid one's body */
	CHECK_EQ(g.conns, 1);              /* no bad Reply broke the connection */
	/* its only STag invalidated by the peer, not twice */
	CHECK_EQ(atomic_load(&soft_counters.remote_invs) - ri0, 1);
	CHECK_EQ(atomic_load(&soft_counters.local_invs) - li0, 0);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	/* A duplicate of the valid Reply: unknown XID by now. The next Call,
	 * answered after it on the same connection, completes: the duplicate
	 * was taken and changed nothing. */
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 24, 0, 5000), 0);
	q = mk_rpc(&c, 0, 0, 0, NULL, false, 256);
	REQUIRE_EQ(rr_tp_client_submit(c.tp, &q->r), 0);
	n = rr_th_rresp_recv(&g, call, 5000);
	REQUIRE(n > 28);
	REQUIRE_EQ(rr_th_hdr_call(&h, call, n, 0), 0);
	rr_hdr_init(&rh, h.xid, 16, RR_HDR_MSG);
	hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
	rr_put_be32(m + hl, h.xid); rr_put_be32(m + hl + 4, 1); rr_put_be32(m + hl + 8, 0);
	rr_put_be32(m + hl + 12, 0); rr_put_be32(m + hl + 16, MAGIC);
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 20, 0, 5000), 0);
	REQUIRE(rr_th_cl_wait(&c, 2, RR_TEST_WAIT_MS));
	CHECK_EQ(q->status, 0);
	CHECK(verify(q));
	CHECK_EQ(p->completions, 1);
	/* after its completion the Write chunk's STag is refused */
	CHECK_EQ(rr_th_rresp_rdma(&g, true, wstag, woff, 8, 0, &vend, 5000),
		 RPCRDMA_WC_REM_ACCESS_ERR);
#undef RBASE
#undef RBODY
	free_rpc(p);
	free_rpc(q);
	rr_th_cl_stop(&c);
	rr_th_rresp_close(&g);
}

/* The requester keeps to its grant (RFC 8166 section 4.3.1), 1 before the
 * first Reply (4.3.3): a rogue responder posts only 2 Receives and grants
 * 1, 2, 1, 2, ...; 12 Calls submitted at once. Each Call it receives is
 * within the grant it last sent (Calls received - Replies sent), and the
 * connection never breaks -- a Call beyond the grant would find no posted
 * Receive and the rogue's provider would end the connection. */
TEST(xprt_e2e_requester_keeps_to_grant)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	static struct rr_th_rresp g;
	static struct rr_hdr h, rh;
	struct rr_tp_conf sc, cc;
	struct rr_th_cl c;
	struct rpc *p[12];
	uint32_t xids[12], grant = 1;
	unsigned got = 0, replied = 0;
	uint8_t m[4096];

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	g.recvs = 2;
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, cl_complete, pd, sizeof(pd)), 0);
	for (unsigned i = 0; i < 12; i++) {
		p[i] = mk_rpc(&c, 0, 0, 0, NULL, false, 256);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	while (replied < 12) {
		int n, hl;

		/* take every Call there is before answering the oldest */
		while (got < 12 && (n = rr_th_rresp_recv(&g, m, got == replied ? 5000 : 50)) > 0) {
			REQUIRE_EQ(rr_th_hdr_call(&h, m, n, 0), 0);
			xids[got++] = h.xid;
			if (got - replied > grant)
				printf("  %u Calls outstanding with a grant of %u\n", got - replied,
				       grant);
			CHECK(got - replied <= grant);
		}
		REQUIRE(got > replied);
		grant = replied % 2 ? 1 : 2;
		rr_hdr_init(&rh, xids[replied], grant, RR_HDR_MSG);
		hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
		rr_put_be32(m + hl, xids[replied]); rr_put_be32(m + hl + 4, 1);
		rr_put_be32(m + hl + 8, 0); rr_put_be32(m + hl + 12, 0);
		rr_put_be32(m + hl + 16, MAGIC);
		REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 20, 0, 5000), 0);
		replied++;
	}
	REQUIRE(rr_th_cl_wait(&c, 12, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < 12; i++) {
		CHECK_EQ(p[i]->completions, 1);
		CHECK(verify(p[i]));
		free_rpc(p[i]);
	}
	CHECK_EQ(g.conns, 1);   /* no Call found its Receive missing */
	rr_th_cl_stop(&c);
	rr_th_rresp_close(&g);
}

/* The Reply rules end to end (RFC 8166 section 5.5: a requester silently
 * discards a Reply it cannot accept), each with a complete Reply that
 * breaks only that rule, to a Call offering a Write chunk (40 bytes of its
 * item, RDMA-Written first) and a Reply chunk: a Long Reply without the
 * Reply chunk, with a Reply chunk longer than offered or all empty, an
 * RDMA_MSG with a used Reply chunk, a Write list with a chunk more than
 * offered, a Position-zero Read chunk without reliable reply, an RDMA_ERROR
 * that cannot be decoded, a Reply for an XID never sent. Each carries its
 * own marker; then the valid Reply (marker 0) completes the Call, on the
 * first connection: none of them was taken. */
TEST(xprt_e2e_reply_rules_end_to_end)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	static struct rr_th_rresp g;
	static struct rr_hdr h, rh;
	struct rr_tp_conf sc, cc;
	struct rr_th_cl c;
	uint8_t m[4096];
	struct rpc *p;
	int hl;
	enum { NOMSG_NO_REPLY, REPLY_TOO_LONG, REPLY_ALL_EMPTY, MSG_REPLY_USED, WRITE_EXTRA,
	       READ_IN_REPLY, ERR_CUT, OTHER_XID, NRULES };

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	cc.inline_ddp = false;
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, cl_complete, pd, sizeof(pd)), 0);
	p = written_call(&g, &c, 10000, &h);
	REQUIRE(h.has_reply);
	for (int rule = 0; rule <= NRULES; rule++) {
		uint32_t body_xid = h.xid;
		struct rr_hdr_seg w = SEG0(h, write[0]), r = SEG0(h, reply);
		size_t len;

		w.length = 40;
		rr_hdr_init(&rh, h.xid, 16, RR_HDR_MSG);
		if (rule != READ_IN_REPLY)
			REQUIRE_EQ(rr_hdr_add_write(&rh, &w, 1), 0);
		switch (rule) {
		case NOMSG_NO_REPLY:
			rh.proc = RR_HDR_NOMSG;
			break;
		case REPLY_TOO_LONG:
			rh.proc = RR_HDR_NOMSG;
			r.length += 4;
			REQUIRE_EQ(rr_hdr_add_reply(&rh, &r, 1), 0);
			break;
		case REPLY_ALL_EMPTY:
			rh.proc = RR_HDR_NOMSG;
			r.length = 0;
			REQUIRE_EQ(rr_hdr_add_reply(&rh, &r, 1), 0);
			break;
		case MSG_REPLY_USED:
			r.length = 24;
			REQUIRE_EQ(rr_hdr_add_reply(&rh, &r, 1), 0);
			break;
		case WRITE_EXTRA:
			REQUIRE_EQ(rr_hdr_add_write(&rh, &w, 1), 0);
			break;
		case READ_IN_REPLY:
			rh.proc = RR_HDR_NOMSG;
			REQUIRE_EQ(rr_hdr_add_read(&rh, 0, &(struct rr_hdr_seg){g.data_stag, 24,
						   (uint64_t)(uintptr_t)g.data}), 0);
			break;
		case OTHER_XID:
			rh.xid = body_xid = h.xid + 0x100;
			break;
		default:
			break;
		}
		hl = rr_th_hdr_raw(&rh, m, sizeof(m));
		REQUIRE(hl > 0);
		RBODY_MARK(m, hl, body_xid, rule == NRULES ? 0 : 1 + (uint32_t)rule);
		len = rh.proc == RR_HDR_NOMSG ? (size_t)hl : (size_t)hl + 24;
		if (rule == ERR_CUT) {
			/* ERR_VERS without its high version */
			len = (size_t)rr_hdr_encode_error_buf(h.xid, 1, 16, RR_HDR_ERR_VERS, m, sizeof(m));
			REQUIRE(len == 28);
			len = 24;
		}
		paced_send(&g, &c, m, len);
	}
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p->completions, 1);
	CHECK_EQ(p->status, 0);
	CHECK(verify(p));
	if (p->r.reply_len >= 12)
		CHECK_EQ(rr_get_be32(p->r.reply + 8), 0);   /* the valid one's body */
	CHECK_EQ(g.conns, 1);
	free_rpc(p);
	rr_th_cl_stop(&c);
	rr_th_rresp_close(&g);
}

/* A Long Reply's Payload stream lies in the Reply chunk, where the header
 * codec cannot see it: the requester checks its RPC XID itself (RFC 8166
 * section 4.1) and discards a Long Reply carrying another XID; the inline
 * Reply that follows with the right one completes the Call (the chunk is
 * not written again: had the wrong one been taken, its bytes would be the
 * Reply). */
TEST(xprt_e2e_long_reply_xid_checked)
{
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	static struct rr_th_rresp g;
	static struct rr_hdr h, rh;
	struct rr_hdr_seg r;
	struct rr_tp_conf sc, cc;
	struct rr_th_cl c;
	uint8_t m[4096];
	uint32_t vend;
	struct rpc *p;
	int n, hl;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, cl_complete, pd, sizeof(pd)), 0);
	p = mk_rpc(&c, 0, 0, 0, NULL, false, 10000);   /* a Reply chunk */
	REQUIRE_EQ(rr_tp_client_submit(c.tp, &p->r), 0);
	n = rr_th_rresp_recv(&g, m, 5000);
	REQUIRE(n > 28);
	REQUIRE_EQ(rr_th_hdr_call(&h, m, n, 0), 0);
	REQUIRE(h.has_reply);
	r = SEG0(h, reply);
	/* 1. the Reply of another XID, through the Reply chunk */
	rr_put_be32(g.data, p->xid + 1);
	rr_put_be32(g.data + 4, 1);
	rr_put_be32(g.data + 8, 0);
	rr_put_be32(g.data + 12, 0);
	rr_put_be32(g.data + 16, MAGIC);
	CHECK_EQ(rr_th_rresp_rdma(&g, true, r.handle, r.offset, 20, 0, &vend, 5000),
		 RPCRDMA_WC_SUCCESS);
	rr_hdr_init(&rh, h.xid, 8, RR_HDR_NOMSG);
	r.length = 20;
	REQUIRE_EQ(rr_hdr_add_reply(&rh, &r, 1), 0);
	hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
	REQUIRE(hl > 0);
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl, 0, 5000), 0);
	/* 2. the right one, inline */
	rr_hdr_init(&rh, h.xid, 8, RR_HDR_MSG);
	hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
	rr_put_be32(m + hl, p->xid); rr_put_be32(m + hl + 4, 1); rr_put_be32(m + hl + 8, 0);
	rr_put_be32(m + hl + 12, 0); rr_put_be32(m + hl + 16, MAGIC);
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 20, 0, 5000), 0);
	REQUIRE(rr_th_cl_wait(&c, 1, RR_TEST_WAIT_MS));
	CHECK_EQ(p->completions, 1);
	CHECK_EQ(p->status, 0);
	CHECK(verify(p));
	CHECK_EQ(g.conns, 1);
	free_rpc(p);
	rr_th_cl_stop(&c);
	rr_th_rresp_close(&g);
}

/* The responder in another process (fork before any thread): message forms
 * with data verified across process boundaries. */
TEST(xprt_e2e_across_processes)
{
	struct rr_tp_conf sc, cc;
	int to_child[2], to_parent[2];
	pid_t pid;
	int port = 0, status = 0;
	struct rr_th_cl c;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	REQUIRE_EQ(pipe(to_child), 0);
	REQUIRE_EQ(pipe(to_parent), 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct srv s;
		char b;
		int pt;

		close(to_child[1]);
		close(to_parent[0]);
		pt = srv_start(&s, &sc);
		if (write(to_parent[1], &pt, sizeof(pt)) != sizeof(pt))
			_exit(2);
		/* serve until the parent closes its end */
		while (read(to_child[0], &b, 1) > 0)
			;
		srv_stop(&s);
		_exit(s.bad == 0 && s.served >= 4 ? 0 : 1);
	}
	close(to_child[0]);
	close(to_parent[1]);
	REQUIRE_EQ(read(to_parent[0], &port, sizeof(port)), (long)sizeof(port));
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	{
		uint32_t l1[1] = {100}, l2[1] = {9001}, l3[3] = {5000, 1, 70000};
		struct rpc *p;

		p = run1(&c, 0, 0, 1, l1, false, 1024);       /* Short */
		CHECK(verify(p));
		free_rpc(p);
		p = run1(&c, 0, 6000, 1, l2, true, 4096);     /* Long Call + Write */
		CHECK(verify(p));
		free_rpc(p);
		p = run1(&c, 50000, 0, 3, l3, true, 60000);   /* Reads, Writes, Long Reply */
		CHECK(verify(p));
		free_rpc(p);
		p = run1(&c, 0, 0, 3, l3, false, 200000);     /* results through Reply chunk */
		CHECK(verify(p));
		free_rpc(p);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	close(to_child[1]);
	REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(to_parent[0]);
}

/* Without invalidatable registrations (plain MRs): the requester does not
 * advertise R, exposes MR STags and invalidates by deregistration. */
TEST(xprt_e2e_without_windows)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rr_xprt_stats st;
	struct rr_xprt_params prm;
	uint32_t lens[1] = {20000};
	int port;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	cc.use_windows = false;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	for (int i = 0; i < 10; i++) {
		struct rpc *p = run1(&c, i * 1000, 0, 1, lens, i & 1, 40000);

		CHECK(verify(p));
		free_rpc(p);
	}
	REQUIRE_EQ(rr_tp_client_params(c.tp, &prm, NULL), 0);
	CHECK(!prm.local_r);
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.remote_inv, 0);
	CHECK(st.local_inv >= 10);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	srv_stop(&s);
}

/* Destroying a client with Calls in flight: each completes exactly once with
 * -ECANCELED after its STags are invalid. */
TEST(xprt_e2e_destroy_with_pending)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rpc *ps[6];
	uint32_t lens[1] = {6000};
	int port;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.no_srq = true;   /* 6 held at once: a fixed grant from the first Reply */
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	/* open the grant */
	ps[0] = run1(&c, 0, 0, 1, lens, true, 4096);
	free_rpc(ps[0]);
	pthread_mutex_lock(&s.sq.lock);
	s.sq.hold = true;
	pthread_mutex_unlock(&s.sq.lock);
	for (unsigned i = 0; i < 6; i++) {
		ps[i] = mk_rpc(&c, 0, 0, 1, lens, true, 4096);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &ps[i]->r), 0);
	}
	for (int t = 0; t < 500 && rr_th_sq_nheld(&s.sq) < 6; t++)
		rr_th_sleep_ms(10);
	CHECK_EQ(rr_th_sq_nheld(&s.sq), 6);
	rr_th_cl_stop(&c);   /* its destroy cancels the 6 held */
	for (unsigned i = 0; i < 6; i++) {
		CHECK_EQ(ps[i]->completions, 1);
		CHECK_EQ(ps[i]->status, -ECANCELED);
		ps[i]->r.reply = NULL;
		for (unsigned k = 0; k < ps[i]->nitems; k++) {
			free(ps[i]->data[k]);
			free(ps[i]->sinkbuf[k]);
		}
		free(ps[i]);
	}
	rr_th_sq_release_held(&s.sq);
	srv_stop(&s);   /* drains the released requests first */
}

/* RFC 8797 section 5.1: a requester that sends no private data gets the RFC
 * 8166 defaults: a Reply that needs more than 1024 bytes inline and has no
 * Reply chunk is ERR_CHUNK; with the peer's 4096-byte block it fits. */
TEST(xprt_e2e_no_private_data_defaults)
{
	struct rr_tp_conf sc;
	struct srv s;
	struct rr_th_rogue g;
	uint8_t m[256], r[4096];
	size_t l;
	int port, n;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&sc);
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rr_th_rogue_open(&g, port, NULL, 0, false), 0);
	l = rogue_call(m, 0x200, 1, RR_HDR_MSG, 0x200);
	rr_put_be32(m + 40, 1500);   /* reply_n: a 1520-byte Reply */
	expect_error(r, rr_th_rogue_xchg(&g, m, l, r, 3000), 0x200, RR_HDR_ERR_CHUNK);
	rr_put_be32(m + 40, 900);    /* 28 + 920 fits 1024 */
	rr_put_be32(m, 0x201);
	rr_put_be32(m + 28, 0x201);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	CHECK_EQ(n, 28 + 20 + 900);
	rr_th_rogue_close(&g);
	REQUIRE_EQ(rogue_open(&g, port), 0);    /* 4096/4096 */
	rr_put_be32(m, 0x202);
	rr_put_be32(m + 28, 0x202);
	rr_put_be32(m + 40, 1500);
	n = rr_th_rogue_xchg(&g, m, l, r, 3000);
	CHECK_EQ(n, 28 + 20 + 1500);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_MSG);
	rr_th_rogue_close(&g);
	srv_stop(&s);
}

/* The responder's connection limit: the second requester is refused. */
TEST(xprt_e2e_max_conns)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c1, c2;
	uint32_t lens[1] = {10};
	struct rpc *p;
	int port;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.max_conns = 1;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c1, &cc, port), 0);
	CHECK(cl_start(&c2, &cc, port) < 0);
	pthread_mutex_destroy(&c2.lock);
	pthread_cond_destroy(&c2.cond);
	p = run1(&c1, 0, 0, 1, lens, false, 1024);
	CHECK(verify(p));
	free_rpc(p);
	rr_th_cl_stop(&c1);
	srv_stop(&s);
}

/* Calls of 4092, 4096 and 4100 bytes against the 4096-byte call threshold:
 * Short, Short, Long (RDMA_NOMSG); each rebuilt exactly by the responder. */
TEST(xprt_e2e_call_threshold)
{
	struct rr_tp_conf sc, cc;
	struct srv s;
	struct rr_th_cl c;
	struct rr_xprt_stats st0, st1;
	int port;
	const uint32_t fill[3] = {4036, 4040, 4044};
	const bool is_long[3] = {false, false, true};

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	for (unsigned i = 0; i < 3; i++) {
		struct rpc *p;

		rr_tp_client_stats(c.tp, &st0);
		/* header 28 + xid..filler_n 20 + filler + nitems 4 + magic 4 */
		p = run1(&c, 0, fill[i], 0, NULL, false, 64);
		CHECK(verify(p));
		free_rpc(p);
		rr_tp_client_stats(c.tp, &st1);
		CHECK_EQ(st1.long_msgs - st0.long_msgs, is_long[i] ? 1 : 0);
		CHECK_EQ(st1.short_msgs - st0.short_msgs, is_long[i] ? 0 : 1);
	}
	rr_th_cl_stop(&c);
	srv_stop(&s);
	CHECK_EQ(s.bad, 0);
}

/* New settings on every reconnection: the responder first accepts with a
 * 4096-byte R=1 block, then (after cutting the connection) with no private
 * data at all; the requester renegotiates: RFC 8797 5.1 defaults, in force
 * before its first Call on the new connection. */
TEST(xprt_e2e_renegotiate_on_reconnect)
{
	static const uint8_t pd1[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3}; /* R=1 */
	static struct rr_th_rresp g;
	struct rr_tp_conf sc, cc;
	struct rr_xprt_params p;
	struct rr_th_cl c;
	uint8_t call[4096];
	struct rpc *k;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	cc.reconnect_delay_ms = 1;
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, cl_complete, pd1, sizeof(pd1)), 0);
	REQUIRE_EQ(rr_tp_client_params(c.tp, &p, NULL), 0);
	CHECK_EQ(p.call_inline, 4096);
	CHECK_EQ(p.reply_inline, 4096);
	CHECK(p.peer_r);

	/* Cut; a Call makes the requester reconnect (not before: nothing to
	 * retransmit); accept without private data. The Call goes out on the
	 * new connection, whose settings were negotiated at its
	 * establishment. */
	rr_th_rresp_drop(&g);
	k = mk_rpc(&c, 0, 0, 0, NULL, false, 64);
	REQUIRE_EQ(rr_tp_client_submit(c.tp, &k->r), 0);
	REQUIRE_EQ(rr_th_rresp_accept(&g, NULL, 0, 5000), 0);
	REQUIRE(rr_th_rresp_recv(&g, call, 5000) >= 28);
	REQUIRE_EQ(rr_tp_client_params(c.tp, &p, NULL), 0);
	CHECK_EQ(p.call_inline, 1024);
	CHECK_EQ(p.reply_inline, 1024);
	CHECK(!p.peer_r);
	rr_th_cl_stop(&c);   /* the Call completes -ECANCELED */
	CHECK_EQ(k->completions, 1);
	k->r.reply = NULL;
	free_rpc(k);
	rr_th_rresp_close(&g);
}
