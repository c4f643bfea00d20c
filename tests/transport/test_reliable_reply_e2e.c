/* SPDX-License-Identifier: BSD-2-Clause */
/* End-to-end tests of reliable reply (draft-cel-nfsv4-rpcrdma-reliable-reply-04)
 * over the software iWARP provider: Reply sizes from 0 to 16 MiB with and
 * without a Reply chunk, both peers supporting it, one peer not supporting it
 * (each side: plain RFC 8166, ERR_CHUNK), remote invalidation on and off,
 * cancelled RPCs whose Reply arrives later (RDMA_DONE for an unknown XID), a
 * requester that never sends RDMA_DONE (virtual-clock timeout fences the
 * memory), forged and duplicated RDMA_DONE, disconnect with Replies waiting,
 * and the RDMA_DONE credit rule at the credit limit. After each: no responder
 * registration left valid (rr_tp_server_rrep_live), no requester STag valid.
 *
 * Test protocol. Call: xid, CALL(0), reply_n, nitems(0|1), [len, data (DDP)],
 * MAGIC. Reply: xid, REPLY(1), 0, nitems, [len, data (DDP)], MAGIC,
 * filler[reply_n]. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "proto/conn/privdata.h"
#include "proto/rrep.h"
#include "rdma/soft/soft.h"
#include "test.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

#define MAGIC 0xC0FFEEu
#define MIB (1u << 20)

static uint8_t fill(uint32_t xid, uint32_t i)
{
	return (uint8_t)(xid * 31u + i * 3u + (i >> 11));
}

/* ---- responder ---- */
struct srv {
	struct rr_th_sq sq;
	struct rr_tp_server *tp;
	unsigned served, err_chunks, fails;
	uint8_t *filler;
};

static void srv_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	struct srv *s = RR_CONTAINER_OF(sq, struct srv, sq);
	const uint8_t *m = r->msg;
	uint8_t hdr[16], lenw[4], tr[4];
	struct rr_xprt_part parts[6];
	unsigned np = 0;
	uint32_t reply_n, nitems;
	bool err = false;
	int rc;

	if (r->len < 20)
		goto done;
	reply_n = rr_get_be32(m + 8);
	nitems = rr_get_be32(m + 12);
	if (reply_n > 16 * MIB || nitems > 1)
		goto done;
	for (uint32_t i = 0; i < reply_n; i++)
		s->filler[i] = fill(r->xid, i);
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 8, 0);
	rr_put_be32(hdr + 12, nitems);
	parts[np++] = (struct rr_xprt_part){hdr, 16, false};
	if (nitems) {
		uint32_t l = rr_get_be32(m + 16);

		if (l > r->len - 20)
			goto done;
		memcpy(lenw, m + 16, 4);
		parts[np++] = (struct rr_xprt_part){lenw, 4, false};
		parts[np++] = (struct rr_xprt_part){m + 20, l, true};
	}
	rr_put_be32(tr, MAGIC);
	parts[np++] = (struct rr_xprt_part){tr, 4, false};
	if (reply_n)
		parts[np++] = (struct rr_xprt_part){s->filler, reply_n, false};
	rc = rr_tp_server_reply(s->tp, r, parts, np, &err);
	pthread_mutex_lock(&s->sq.lock);
	if (rc)
		s->fails++;
	else if (err)
		s->err_chunks++;
	else
		s->served++;
	pthread_mutex_unlock(&s->sq.lock);
done:
	rr_tp_server_done(s->tp, r);
}

static int srv_start(struct srv *s, const struct rr_tp_conf *conf)
{
	int rc;

	memset(s, 0, sizeof(*s));
	s->filler = malloc(16 * MIB);
	REQUIRE(s->filler);
	rr_th_sq_init(&s->sq, srv_answer);
	rc = rr_th_tp_server(conf, rr_th_sq_recv, &s->sq, &s->tp);
	if (rc)
		return rc;
	rr_th_sq_start(&s->sq);
	return rr_tp_server_port(s->tp);
}

static void srv_stop(struct srv *s)
{
	rr_th_sq_stop(&s->sq);
	rr_tp_server_destroy(s->tp);
	rr_th_sq_destroy(&s->sq);
	free(s->filler);
}

/* Waits (up to 5 s) until no exposed Reply is left valid or waiting. */
static bool srv_quiet(struct srv *s)
{
	for (int i = 0; i < 500; i++) {
		if (rr_tp_server_rrep_live(s->tp) == 0 && rr_tp_server_rrep_waiting(s->tp) == 0)
			return true;
		rr_th_sleep_ms(10);
	}
	printf("  live %u waiting %u\n", rr_tp_server_rrep_live(s->tp),
	       rr_tp_server_rrep_waiting(s->tp));
	return false;
}

/* ---- requester ---- */
struct rpc {
	struct rr_conn_rpc r;
	struct rr_th_cl *cl;
	uint32_t xid, reply_n, item_len;
	uint8_t hdr[20];
	uint8_t *item;
	uint8_t *sink;
	uint8_t tail[4];
	struct rr_xprt_part parts[3];
	struct rr_xprt_sink sinks[1];
	unsigned completions;
};

static void cl_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct rr_th_cl *c = ctx;
	struct rpc *p = RR_CONTAINER_OF(r, struct rpc, r);

	pthread_mutex_lock(&c->lock);
	p->completions++;
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static int cl_start(struct rr_th_cl *c, const struct rr_tp_conf *conf, int port)
{
	return rr_th_cl_start(c, conf, port, cl_complete);
}

static uint32_t next_xid = 0x40000;

/* An RPC asking for @reply_n filler bytes; @item_len > 0 adds a DDP item
 * echoed as a DDP result (into a Write chunk when @sink). @max_reply /
 * @max_unknown: the hint (draft 5.3.1). */
static struct rpc *mk_rpc(struct rr_th_cl *c, uint32_t reply_n, uint32_t item_len, bool sink,
			  uint32_t max_reply, bool max_unknown)
{
	struct rpc *p = calloc(1, sizeof(*p));
	unsigned np = 0;

	REQUIRE(p);
	p->cl = c;
	p->xid = __atomic_fetch_add(&next_xid, 16, __ATOMIC_RELAXED);
	p->reply_n = reply_n;
	p->item_len = item_len;
	rr_put_be32(p->hdr, p->xid);
	rr_put_be32(p->hdr + 4, 0);
	rr_put_be32(p->hdr + 8, reply_n);
	rr_put_be32(p->hdr + 12, item_len ? 1 : 0);
	rr_put_be32(p->hdr + 16, item_len);
	p->parts[np++] = (struct rr_xprt_part){p->hdr, item_len ? 20u : 16u, false};
	if (item_len) {
		p->item = malloc(item_len);
		REQUIRE(p->item);
		for (uint32_t i = 0; i < item_len; i++)
			p->item[i] = (uint8_t)(i * 7 + 1);
		p->parts[np++] = (struct rr_xprt_part){p->item, item_len, true};
		if (sink) {
			p->sink = malloc(item_len + 8);
			REQUIRE(p->sink);
			memset(p->sink, 0xee, item_len + 8);
			p->sinks[0] = (struct rr_xprt_sink){p->sink, item_len + 8};
			p->r.sinks = p->sinks;
			p->r.nsinks = 1;
		}
	}
	rr_put_be32(p->tail, MAGIC);
	p->parts[np++] = (struct rr_xprt_part){p->tail, 4, false};
	p->r.xid = p->xid;
	p->r.parts = p->parts;
	p->r.nparts = np;
	p->r.max_reply = max_reply;
	p->r.max_unknown = max_unknown;
	return p;
}

static bool verify(struct rpc *p)
{
	const uint8_t *m = p->r.reply;
	uint32_t len = p->r.reply_len, off = 16;

	if (p->r.status || !m || len < 20)
		return false;
	if (rr_get_be32(m) != p->xid || rr_get_be32(m + 4) != 1)
		return false;
	if (p->item_len) {
		if (rr_get_be32(m + off) != p->item_len)
			return false;
		off += 4;
		if (p->sink && p->r.is_placed[0]) {
			if (p->r.placed[0] != p->item_len || memcmp(p->sink, p->item, p->item_len))
				return false;
		} else {
			if (memcmp(m + off, p->item, p->item_len))
				return false;
			off += (uint32_t)RR_ALIGN4(p->item_len);
		}
	}
	if (off + 4 + p->reply_n != len || rr_get_be32(m + off) != MAGIC)
		return false;
	off += 4;
	for (uint32_t i = 0; i < p->reply_n; i++)
		if (m[off + i] != fill(p->xid, i))
			return false;
	return true;
}

static void free_rpc(struct rpc *p)
{
	if (p->r.reply)
		rr_tp_client_release_reply(p->cl->tp, &p->r);
	free(p->item);
	free(p->sink);
	free(p);
}

static struct rpc *run1(struct rr_th_cl *c, struct rpc *p)
{
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
}

/* Reply sizes 0 .. 16 MiB, with no Reply chunk (maximum unknown), an
 * undersized Reply chunk, and a sufficient one; R on both, off at the
 * responder, off at the requester. Data verified; Read-chunk Replies only
 * where nothing else fits; every exposed Reply released by RDMA_DONE. */
TEST(rrep_e2e_sizes_and_r)
{
	static const uint32_t sizes[] = {0, 100, 4000, 4076, 4077, 5000, 65536, MIB + 3,
					 4 * MIB, 16 * MIB - 64};
	struct {
		bool srv_r, cl_r;
	} rs[] = {{true, true}, {false, true}, {true, false}};

	if (!rr_th_soft_ok())
		return;
	for (unsigned ri = 0; ri < RR_ARRAY_SIZE(rs); ri++) {
		struct rr_tp_conf sc, cc;
		struct rr_xprt_stats st;
		struct srv s;
		struct rr_th_cl c;
		int port;
		uint64_t exposed = 0, rinv0 = atomic_load(&soft_counters.remote_invs);

		confs(&sc, &cc);
		sc.remote_inv = rs[ri].srv_r;
		cc.remote_inv = rs[ri].cl_r;
		port = srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(cl_start(&c, &cc, port), 0);
		CHECK_EQ(rr_tp_client_reliable_reply(c.tp), 1);
		for (unsigned i = 0; i < RR_ARRAY_SIZE(sizes); i++) {
			for (unsigned mode = 0; mode < 3; mode++) {
				/* 0: unknown max (no Reply chunk); 1: Reply chunk
				 * too small (known max 8000, min 6000 > inline);
				 * 2: Reply chunk big enough (min = max = size). */
				uint32_t n = sizes[i], maxr = 0, minr = 0;
				bool unknown = mode == 0;
				struct rpc *p;
				bool expect_read;

				if (mode == 1) {
					maxr = 8000;
					minr = 6000;
				} else if (mode == 2) {
					maxr = minr = n + 64;
				} else {
					maxr = 16 * MIB;
				}
				p = mk_rpc(&c, n, i & 1 ? 33 : 0, i % 4 == 1, maxr, unknown);
				p->r.min_reply = minr;
				run1(&c, p);
				CHECK_EQ(p->r.status, 0);
				if (!verify(p)) {
					printf("  size %u mode %u R %u/%u: bad reply (status %d len %u)\n",
					       n, mode, rs[ri].srv_r, rs[ri].cl_r, p->r.status,
					       p->r.reply_len);
					CHECK(false);
				}
				/* Clear-cut sizes only (boundaries: data checked). */
				if (n <= 4000 || mode == 2)
					expect_read = false;
				else if (n >= 5000)
					expect_read = mode == 0 || n + 64 > 8000;
				else
					expect_read = p->r.via_read;
				if (p->r.via_read != expect_read)
					printf("  size %u mode %u: via_read %d expected %d\n", n, mode,
					       p->r.via_read, expect_read);
				CHECK_EQ(p->r.via_read, expect_read);
				exposed += p->r.via_read;
				free_rpc(p);
			}
		}
		CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
		CHECK(srv_quiet(&s));
		rr_tp_client_stats(c.tp, &st);
		CHECK_EQ(st.rrep_pulled, exposed);
		CHECK_EQ(st.rrep_done_sent, exposed);
		rr_tp_server_stats(s.tp, &st);
		CHECK_EQ(st.rrep_exposed, exposed);
		CHECK_EQ(st.rrep_done_matched, exposed);
		CHECK_EQ(st.rrep_done_forged, 0);
		CHECK_EQ(st.rrep_expired, 0);
		CHECK_EQ(st.err_chunk_sent, 0);
		/* With R on both sides the RDMA_DONE invalidated remotely; with
		 * R on one side only, no Send With Invalidate at all (RFC 8797
		 * 4.1), as the provider saw it. */
		if (rs[ri].srv_r && rs[ri].cl_r) {
			CHECK(st.remote_inv >= exposed);
			CHECK(atomic_load(&soft_counters.remote_invs) - rinv0 >= exposed);
		} else {
			CHECK(st.local_inv >= exposed);
			CHECK_EQ(atomic_load(&soft_counters.remote_invs) - rinv0, 0);
		}
		rr_th_cl_stop(&c);
		srv_stop(&s);
	}
}

/* One peer without the extension (each side): plain RFC 8166 -- a Reply
 * that fits nowhere is ERR_CHUNK, a sufficient Reply chunk is used, no
 * Read chunk is ever exposed. */
TEST(rrep_e2e_one_peer_without)
{
	if (!rr_th_soft_ok())
		return;
	for (int side = 0; side < 2; side++) {
		struct rr_tp_conf sc, cc;
		struct rr_xprt_stats st;
		struct srv s;
		struct rr_th_cl c;
		struct rpc *p;
		int port;

		confs(&sc, &cc);
		if (side == 0)
			sc.ext_caps = 0;
		else
			cc.ext_caps = 0;
		port = srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(cl_start(&c, &cc, port), 0);
		CHECK_EQ(rr_tp_client_reliable_reply(c.tp), 0);
		p = run1(&c, mk_rpc(&c, 100000, 0, false, 1000, false));
		CHECK_EQ(p->r.status, -EREMOTEIO);   /* ERR_CHUNK */
		CHECK(!p->r.via_read);
		free_rpc(p);
		p = run1(&c, mk_rpc(&c, 100000, 0, false, 100100, false));
		CHECK_EQ(p->r.status, 0);
		CHECK(verify(p));
		CHECK(!p->r.via_read);
		free_rpc(p);
		/* Unknown maximum: RFC 8166 sizes the Reply chunk by it. */
		p = run1(&c, mk_rpc(&c, 10, 0, false, 200000, true));
		CHECK_EQ(p->r.status, 0);
		CHECK(verify(p));
		free_rpc(p);
		rr_tp_client_stats(c.tp, &st);
		CHECK_EQ(st.rrep_pulled, 0);
		CHECK(st.reply_chunks >= 2);
		rr_tp_server_stats(s.tp, &st);
		CHECK_EQ(st.rrep_exposed, 0);
		CHECK_EQ(st.err_chunk_sent, 1);
		CHECK_EQ(rr_tp_server_rrep_live(s.tp), 0);
		rr_th_cl_stop(&c);
		srv_stop(&s);
	}
}

/* Cancelled RPCs whose Reply arrives later: the requester no longer knows
 * the XID, pulls nothing, and still sends RDMA_DONE (draft 4.1.3); the
 * responder's table empties. */
TEST(rrep_e2e_cancelled_reply_later)
{
	struct rr_tp_conf sc, cc;
	struct rr_xprt_stats st;
	struct srv s;
	struct rr_th_cl c;
	struct rpc *p[4];
	int port;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.no_srq = true;   /* 4 held at once: a fixed grant from the first Reply */
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	free_rpc(run1(&c, mk_rpc(&c, 10, 0, false, 0, true)));   /* grant > 1 */
	s.sq.hold = true;
	for (unsigned i = 0; i < 4; i++) {
		p[i] = mk_rpc(&c, 50000 + i, 0, false, 0, true);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	for (int t = 0; t < 300 && s.sq.nheld < 4; t++)
		rr_th_sleep_ms(10);
	REQUIRE_EQ(s.sq.nheld, 4);
	for (unsigned i = 0; i < 4; i++)
		rr_tp_client_abort(c.tp, &p[i]->r, -ECANCELED);
	REQUIRE(rr_th_cl_wait(&c, 5, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(p[i]->r.status, -ECANCELED);
	rr_th_sq_release_held(&s.sq);
	for (int t = 0; t < 500 && s.served < 5; t++)
		rr_th_sleep_ms(10);
	CHECK_EQ(s.served, 5);
	CHECK(srv_quiet(&s));
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.rrep_done_sent, 4);
	CHECK_EQ(st.rrep_pulled, 0);
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_exposed, 4);
	CHECK_EQ(st.rrep_done_matched, 4);
	/* The connection still works. */
	{
		struct rpc *q = run1(&c, mk_rpc(&c, 9000, 0, false, 0, true));

		CHECK(verify(q));
		CHECK(q->r.via_read);
		free_rpc(q);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	CHECK(srv_quiet(&s));
	for (unsigned i = 0; i < 4; i++)
		free_rpc(p[i]);
	rr_th_cl_stop(&c);
	srv_stop(&s);
}

/* ---- a scripted rogue requester (raw headers, with the extension) ---- */
static int rogue_open(struct rr_th_rogue *g, int port)
{
	static const uint8_t pd[20] = {0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3, 0xac, 0x3a, 0x36,
				       0x3d, 1, 12, 0, 0, 0, 0, 0, 1};

	return rr_th_rogue_open(g, port, pd, sizeof(pd), true);
}

/* RDMA Read of @len bytes from (@stag, @off) into g->pull. 0 or -1. */
static int rogue_read(struct rr_th_rogue *g, uint32_t stag, uint64_t off, uint32_t len)
{
	return rr_th_rogue_read(g, stag, off, len, 3000) == RPCRDMA_WC_SUCCESS ? 0 : -1;
}

/* A Call asking for a @reply_n-byte filler; returns the header length. */
static size_t rogue_call(uint8_t *b, uint32_t xid, uint32_t reply_n)
{
	rr_put_be32(b, xid);
	rr_put_be32(b + 4, 1);
	rr_put_be32(b + 8, 8);
	rr_put_be32(b + 12, RR_HDR_MSG);
	rr_put_be32(b + 16, 0);
	rr_put_be32(b + 20, 0);
	rr_put_be32(b + 24, 0);
	rr_put_be32(b + 28, xid);
	rr_put_be32(b + 32, 0);
	rr_put_be32(b + 36, reply_n);
	rr_put_be32(b + 40, 0);
	rr_put_be32(b + 44, MAGIC);
	return 48;
}

static size_t rogue_done(uint8_t *b, uint32_t xid)
{
	return (size_t)rr_rrep_encode_done(xid, 1, b, 16);
}

/* A Call with a small Reply, and that Reply: everything the rogue sent
 * before it has been taken by the responder (one connection is served in
 * order). 0, or -1 when no proper Reply came. */
static int rogue_round_trip(struct rr_th_rogue *g, uint32_t xid)
{
	uint8_t m[64], r[4096];
	size_t l = rogue_call(m, xid, 8);
	int n = rr_th_rogue_send(g, m, l, 0, r, 5000);

	return n >= 28 && rr_get_be32(r) == xid && rr_get_be32(r + 12) == RR_HDR_MSG ? 0 : -1;
}

/* Gets the Read-chunk Reply to a Call for @xid: its STag and length. */
static bool rogue_exposed(struct rr_th_rogue *g, uint32_t xid, uint32_t *stag, uint64_t *off,
			  uint32_t *len)
{
	uint8_t m[64], r[4096];
	size_t l = rogue_call(m, xid, 20000);
	int n = rr_th_rogue_send(g, m, l, 0, r, 3000);

	if (n < 44 || rr_get_be32(r) != xid || rr_get_be32(r + 12) != RR_HDR_NOMSG ||
	    rr_get_be32(r + 16) != 1 || rr_get_be32(r + 20) != 0)
		return false;
	*stag = rr_get_be32(r + 24);
	*len = rr_get_be32(r + 28);
	*off = rr_get_be64(r + 32);
	return true;
}

static void vclock_env(struct rr_test_env *te)
{
	rr_test_env_init(te, 7);
	te->now_ns = 1000000000ull;
}

/* A responder whose exposed Replies expire after 5 s of @te's (virtual)
 * clock, with its own Receives and a fixed grant (the rogue requester
 * sends several RDMA_DONEs before its next Call: each takes a credit, as
 * a Call, when none is owed); returns its port. */
static int srv_start_vclock(struct srv *s, struct rr_test_env *te)
{
	struct rr_tp_conf sc;
	int port;

	vclock_env(te);
	rr_tp_conf_default(&sc);
	sc.no_srq = true;
	sc.rrep_clock = &te->env;
	sc.rrep_timeout_ms = 5000;
	port = srv_start(s, &sc);
	REQUIRE(port > 0);
	return port;
}

/* A requester that never sends RDMA_DONE: the timeout (virtual clock)
 * fences the Reply; a Read after that fails (its connection ends). Then
 * forged and duplicated RDMA_DONEs: silently dropped, no crash, no
 * registration left valid; a Send With Invalidate naming another XID's STag
 * invalidates only that STag, which stays accounted to its owner. */
TEST(rrep_e2e_rogue_requester)
{
	struct rr_test_env te;
	struct rr_xprt_stats st;
	struct srv s;
	struct rr_th_rogue g;
	uint32_t stag, stag2, len, len2;
	uint64_t off, off2;
	uint8_t m[64];
	int port;

	if (!rr_th_soft_ok())
		return;
	port = srv_start_vclock(&s, &te);
	REQUIRE_EQ(rogue_open(&g, port), 0);

	/* 1. never sends RDMA_DONE: fenced after the (virtual) timeout */
	REQUIRE(rogue_exposed(&g, 0x500, &stag, &off, &len));
	CHECK_EQ(len, 20000 + 20);
	CHECK_EQ(rogue_read(&g, stag, off, 64), 0);   /* pullable */
	CHECK_EQ(rr_get_be32(g.pull), 0x500);
	CHECK_EQ(rr_tp_server_rrep_live(s.tp), 1);
	/* only the (virtual) rrep clock expires it: after another round trip
	 * through the responder it is still pullable */
	CHECK_EQ(rogue_round_trip(&g, 0x5f0), 0);
	CHECK_EQ(rogue_read(&g, stag, off, 64), 0);
	CHECK_EQ(rr_tp_server_rrep_live(s.tp), 1);
	__atomic_add_fetch(&te.now_ns, 5001000000ull, __ATOMIC_SEQ_CST);
	CHECK(srv_quiet(&s));
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_expired, 1);

	/* 2. its late RDMA_DONE: nothing waits, silently dropped (and it
	 * releases the Receive reserved for it) */
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x500), 0, NULL, 500), 0);
	/* 3. duplicate: a second RDMA_DONE for the same XID, and one for an
	 * XID never used */
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x500), 0, NULL, 500), 0);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x5ff), 0, NULL, 500), 0);
	/* the responder took them before the next Call (in order) */
	CHECK_EQ(rogue_round_trip(&g, 0x5f1), 0);
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_done_unknown, 3);
	CHECK_EQ(st.rrep_done_matched, 0);

	/* 4. forged: RDMA_DONE for A by Send With Invalidate naming B's STag */
	REQUIRE(rogue_exposed(&g, 0x501, &stag, &off, &len));
	REQUIRE(rogue_exposed(&g, 0x502, &stag2, &off2, &len2));
	CHECK(stag != stag2);
	CHECK_EQ(rr_tp_server_rrep_live(s.tp), 2);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x501), stag2, NULL, 500), 0);
	CHECK_EQ(rogue_round_trip(&g, 0x5f2), 0);
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_done_forged, 1);
	CHECK_EQ(st.rrep_done_matched, 1);            /* A released (fenced locally) */
	CHECK_EQ(rr_tp_server_rrep_live(s.tp), 0);    /* B's STag is gone too */
	CHECK_EQ(rr_tp_server_rrep_waiting(s.tp), 1); /* B still awaits its RDMA_DONE */
	/* B's own RDMA_DONE, by Send With Invalidate of its (already invalid)
	 * STag would be refused by the provider; a plain one releases it. */
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x502), 0, NULL, 500), 0);
	CHECK(srv_quiet(&s));

	/* 5. a proper pull + Send With Invalidate: remote invalidation */
	REQUIRE(rogue_exposed(&g, 0x503, &stag, &off, &len));
	CHECK_EQ(rogue_read(&g, stag, off, len < 65536 ? len : 65536), 0);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x503), stag, NULL, 500), 0);
	CHECK(srv_quiet(&s));

	/* 6. Read after the timeout: the STag is invalid, the connection ends */
	REQUIRE(rogue_exposed(&g, 0x504, &stag, &off, &len));
	__atomic_add_fetch(&te.now_ns, 6000000000ull, __ATOMIC_SEQ_CST);
	CHECK(srv_quiet(&s));
	CHECK_EQ(rogue_read(&g, stag, off, 64), -1);
	rr_th_rogue_close(&g);
	CHECK(srv_quiet(&s));
	srv_stop(&s);
}

/* Until a Read of (@stag, @off) is refused (the Reply's Read chunk is
 * fenced), at most 5 s: a Read of a valid STag is harmless, and the first
 * refused one ends the connection. */
static bool refused_within(struct rr_th_rogue *g, uint32_t stag, uint64_t off)
{
	for (int i = 0; i < 500; i++) {
		int st = rr_th_rogue_read(g, stag, off, 64, 3000);

		if (st == RPCRDMA_WC_REM_ACCESS_ERR)
			return true;
		if (st != RPCRDMA_WC_SUCCESS)
			return false;
		rr_th_sleep_ms(10);
	}
	return false;
}

/* The responder's exposures fenced, seen on the wire: for each way a
 * Reply's life ends -- its RDMA_DONE, its RDMA_DONE by Send With
 * Invalidate of its STag, the timeout, another Reply's forged RDMA_DONE
 * naming it -- the rogue first pulls the Read chunk (it was valid), then
 * its RDMA Reads of that STag are refused (a Terminate), each on a
 * connection of its own. */
TEST(rrep_e2e_fenced_on_the_wire)
{
	enum { DONE, DONE_INV, TIMEOUT, FORGED, NWAYS };
	struct rr_test_env te;
	struct srv s;
	int port;

	if (!rr_th_soft_ok())
		return;
	port = srv_start_vclock(&s, &te);
	for (int w = 0; w < NWAYS; w++) {
		struct rr_th_rogue g;
		uint32_t stag, len, stag2, len2, xid = 0x900 + 0x10 * (uint32_t)w;
		uint64_t off, off2;
		uint8_t m[64];

		REQUIRE_EQ(rogue_open(&g, port), 0);
		REQUIRE(rogue_exposed(&g, xid, &stag, &off, &len));
		CHECK_EQ(rogue_read(&g, stag, off, 64), 0);   /* valid until now */
		CHECK_EQ(rr_get_be32(g.pull), xid);
		switch (w) {
		case DONE:
			CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, xid), 0, NULL, 3000), 0);
			break;
		case DONE_INV:
			CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, xid), stag, NULL, 3000), 0);
			break;
		case TIMEOUT:
			__atomic_add_fetch(&te.now_ns, 6000000000ull, __ATOMIC_SEQ_CST);
			break;
		case FORGED:
			/* B's RDMA_DONE by Send With Invalidate of A's STag: the
			 * provider invalidated A; the transport must fence B */
			REQUIRE(rogue_exposed(&g, xid + 1, &stag2, &off2, &len2));
			CHECK_EQ(rogue_read(&g, stag2, off2, 64), 0);
			CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, xid + 1), stag, NULL, 3000),
				 0);
			stag = stag2;
			off = off2;
			break;
		}
		CHECK(refused_within(&g, stag, off));
		rr_th_rogue_close(&g);
	}
	srv_stop(&s);
}

/* A requester sends its RDMA_DONE and the responder is destroyed (or the
 * connection dies) right behind it: the responder's fence of that Reply, a
 * Local Invalidate, may still be in flight, its completion not yet polled.
 * Nothing of it may be lost: after each destroy every allocation of the
 * responder's environment is freed (the exposed Reply's record used to be
 * referenced by that work request alone and leaked, and with its window the
 * connection's protection domain could not be freed either). 40 rounds,
 * since the interleaving is the threads'. */
TEST(rrep_e2e_done_then_destroy_frees_all)
{
	unsigned leaked = 0;

	if (!rr_th_soft_ok())
		return;
	for (uint32_t i = 0; i < 40; i++) {
		struct rr_test_env te;
		struct rr_tp_conf sc;
		struct srv s;
		struct rr_th_rogue g;
		uint32_t stag, len, xid = 0xa00 + i;
		uint64_t off;
		uint8_t m[64];
		int port;

		rr_test_env_init(&te, 11 + i);
		rr_tp_conf_default(&sc);
		sc.env = &te.env;
		port = srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(rogue_open(&g, port), 0);
		REQUIRE(rogue_exposed(&g, xid, &stag, &off, &len));
		CHECK_EQ(rogue_read(&g, stag, off, 64), 0);
		/* the RDMA_DONE, then at once: the responder goes (even
		 * rounds) or the connection does (odd rounds) */
		CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, xid), 0, NULL, 3000), 0);
		if (i & 1)
			rr_th_rogue_close(&g);
		srv_stop(&s);
		if (!(i & 1))
			rr_th_rogue_close(&g);
		leaked += te.live != 0;
	}
	CHECK_EQ(leaked, 0);
}

/* Disconnect with Replies waiting: every exposed Reply is fenced at once. */
TEST(rrep_e2e_disconnect_with_replies_waiting)
{
	struct rr_tp_conf sc;
	struct rr_xprt_stats st;
	struct srv s;
	struct rr_th_rogue g;
	uint32_t stag, len;
	uint64_t off;
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&sc);
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rogue_open(&g, port), 0);
	for (uint32_t i = 0; i < 5; i++)
		REQUIRE(rogue_exposed(&g, 0x600 + i, &stag, &off, &len));
	CHECK_EQ(rr_tp_server_rrep_live(s.tp), 5);
	CHECK_EQ(rr_tp_server_rrep_waiting(s.tp), 5);
	rr_th_rogue_close(&g);
	CHECK(srv_quiet(&s));
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_fenced, 5);
	srv_stop(&s);
}

/* The RDMA_DONE credit rule at the credit limit, end to end: a grant of 2,
 * a cap of 2 Read-chunk Replies awaiting RDMA_DONE, 200 Calls of which
 * two thirds get Read-chunk Replies, all submitted at once: every Call
 * completes with its data, no Receive overrun (the connection never
 * drops), every RDMA_DONE accounted. */
TEST(rrep_e2e_credit_limit)
{
	struct rr_tp_conf sc, cc;
	struct rr_xprt_stats st;
	struct srv s;
	struct rr_th_cl c;
	struct rpc *p[200];
	unsigned ok = 0, reads = 0;
	int port;

	if (!rr_th_soft_ok())
		return;
	confs(&sc, &cc);
	sc.credits = 2;
	sc.rrep_max = 2;
	cc.credits = 4;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(cl_start(&c, &cc, port), 0);
	for (unsigned i = 0; i < 200; i++) {
		p[i] = mk_rpc(&c, i % 3 ? 5000 + i : 100, 0, false, 0, true);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	REQUIRE(rr_th_cl_wait(&c, 200, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < 200; i++) {
		ok += p[i]->r.status == 0 && verify(p[i]);
		reads += p[i]->r.via_read;
		CHECK_EQ(p[i]->completions, 1);
		free_rpc(p[i]);
	}
	CHECK_EQ(ok, 200);
	CHECK_EQ(reads, 133);
	CHECK(srv_quiet(&s));
	rr_tp_client_stats(c.tp, &st);
	CHECK_EQ(st.reconnects, 0);
	CHECK_EQ(st.rrep_done_sent, 133);
	CHECK(st.credits_exhausted > 0);
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_done_matched, 133);
	CHECK_EQ(st.fatal_errors, 0);
	CHECK_EQ(st.err_chunk_sent, 0);
	rr_th_cl_stop(&c);
	srv_stop(&s);
}

/* A requester that keeps forging (Send With Invalidate naming another XID's
 * STag) loses its connection after rrep_max forgeries: the memory of those
 * Replies is held until the QP is gone, so it must be bounded. */
TEST(rrep_e2e_forger_disconnected)
{
	struct rr_tp_conf sc;
	struct srv s;
	struct rr_th_rogue g;
	uint8_t m[64], r[4096];
	int port;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&sc);
	sc.rrep_max = 2;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rogue_open(&g, port), 0);
	for (uint32_t k = 0; k < 3; k++) {
		uint32_t sa, sb, la, lb;
		uint64_t oa, ob;

		REQUIRE(rogue_exposed(&g, 0x700 + 2 * k, &sa, &oa, &la));
		REQUIRE(rogue_exposed(&g, 0x701 + 2 * k, &sb, &ob, &lb));
		CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x700 + 2 * k), sb, NULL, 500), 0);
		if (k < 2)
			CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x701 + 2 * k), 0, NULL, 500), 0);
	}
	/* the third forgery ended the connection */
	{
		size_t l = rogue_call(m, 0x7ff, 10);
		int n = rr_th_rogue_send(&g, m, l, 0, r, 1000);

		CHECK(n <= 0);
	}
	CHECK(srv_quiet(&s));
	rr_th_rogue_close(&g);
	CHECK(srv_quiet(&s));
	srv_stop(&s);
}

/* At rrep_max Replies awaiting RDMA_DONE the next Read-chunk Reply is
 * parked (no thread waits for it): sent once an RDMA_DONE frees a
 * reservation, ERR_CHUNK after rrep_timeout_ms. The timeout fences an
 * exposed Reply's memory but does not free its reservation
 * (docs/protocol.md "RDMA_DONE accounting"); its RDMA_DONE does, and the
 * parked Reply is exposed then. */
TEST(rrep_e2e_reservation_cap)
{
	struct rr_tp_conf sc;
	struct rr_test_env te;
	struct srv s;
	struct rr_th_rogue g;
	uint32_t stag, len;
	uint64_t off;
	uint8_t m[64], r[4096];
	int port, n;

	if (!rr_th_soft_ok())
		return;
	vclock_env(&te);
	rr_tp_conf_default(&sc);
	sc.rrep_max = 1;
	sc.rrep_timeout_ms = 300;     /* exposed and parked Replies (virtual) */
	sc.rrep_clock = &te.env;
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rogue_open(&g, port), 0);
	REQUIRE(rogue_exposed(&g, 0x800, &stag, &off, &len));
	/* second large Reply: no reservation left -> parked, nothing sent */
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_call(m, 0x801, 20000), 0, r, 300), 0);
	/* both time out: the exposed one is fenced (reservation kept), the
	 * parked one is answered ERR_CHUNK */
	__atomic_add_fetch(&te.now_ns, 1000000000ull, __ATOMIC_SEQ_CST);
	n = rr_th_rogue_recv(&g, r, 3000);
	CHECK_EQ(n, 20);
	CHECK_EQ(rr_get_be32(r), 0x801);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_ERROR);
	CHECK_EQ(rr_get_be32(r + 16), RR_HDR_ERR_CHUNK);
	CHECK(srv_quiet(&s));
	/* the reservation is still held: the next one is parked again */
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_call(m, 0x802, 20000), 0, r, 300), 0);
	/* the first Reply's (late) RDMA_DONE frees it: the parked Reply goes */
	n = rr_th_rogue_send(&g, m, rogue_done(m, 0x800), 0, r, 3000);
	REQUIRE(n >= 44);
	CHECK_EQ(rr_get_be32(r), 0x802);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_NOMSG);
	stag = rr_get_be32(r + 24);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x802), stag, NULL, 500), 0);
	CHECK(srv_quiet(&s));
	rr_th_rogue_close(&g);
	srv_stop(&s);
}

/* Memory a peer can make the responder hold is bounded (docs/security.md
 * "Limits"): Read-chunk Replies held for one connection (exposed or parked,
 * until freed) stay within reply_mem_per_conn; one that would go over is
 * answered ERR_CHUNK at once, and once the peer's RDMA_DONE frees memory the
 * next large Reply is exposed again. */
TEST(rrep_e2e_memory_budget)
{
	struct rr_tp_conf sc;
	struct rr_xprt_stats st;
	struct srv s;
	struct rr_th_rogue g;
	uint32_t stag, len;
	uint64_t off;
	uint8_t m[64], r[4096];
	int port, n;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&sc);
	sc.reply_mem_per_conn = 30000;   /* one 20000-byte Reply, not two */
	port = srv_start(&s, &sc);
	REQUIRE(port > 0);
	REQUIRE_EQ(rogue_open(&g, port), 0);
	REQUIRE(rogue_exposed(&g, 0x900, &stag, &off, &len));
	n = rr_th_rogue_send(&g, m, rogue_call(m, 0x901, 20000), 0, r, 3000);
	CHECK_EQ(n, 20);
	CHECK_EQ(rr_get_be32(r), 0x901);
	CHECK_EQ(rr_get_be32(r + 12), RR_HDR_ERROR);
	CHECK_EQ(rr_get_be32(r + 16), RR_HDR_ERR_CHUNK);
	rr_tp_server_stats(s.tp, &st);
	CHECK_EQ(st.rrep_over_budget, 1);
	CHECK_EQ(st.rrep_parked, 0);
	/* the first Reply is pulled and released: room again */
	CHECK_EQ(rogue_read(&g, stag, off, len), 0);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x900), stag, NULL, 500), 0);
	CHECK(srv_quiet(&s));
	REQUIRE(rogue_exposed(&g, 0x902, &stag, &off, &len));
	CHECK_EQ(rogue_read(&g, stag, off, len), 0);
	CHECK_EQ(rr_th_rogue_send(&g, m, rogue_done(m, 0x902), stag, NULL, 500), 0);
	CHECK(srv_quiet(&s));
	rr_th_rogue_close(&g);
	srv_stop(&s);
}
