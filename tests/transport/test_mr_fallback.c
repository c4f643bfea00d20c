/* SPDX-License-Identifier: BSD-2-Clause */
/* The transport on providers without invalidatable registrations (siw via
 * rdma-core), and the verbs:// scheme (issue 6).
 *
 * - verbs:// is registered for client and server; on a host without RDMA
 *   devices it answers -ENODEV (-EPROTONOSUPPORT when built without
 *   rdma-core), with rpcrdma_strerror naming the device.
 * - Registration by capability (RFC 8166 section 4.2, RFC 8797 section 4):
 *   with rr_tp_conf.use_windows = false the soft provider behaves like siw:
 *   per-RPC memory registrations, deregistered before the upper layer sees
 *   the completion, and no R bit. Every message form end to end (Short,
 *   Read chunks, Long Call, Write chunks, Long Reply through a Reply chunk,
 *   reliable reply through a responder-provided Read chunk, ERR_CHUNK) with
 *   the fallback on either side or both, data verified, no STag left valid.
 * - A raw responder checks on the wire that the requester's R bit is clear
 *   and that the STags of a completed RPC really refuse remote access.
 *
 * Test protocol (invented here). Call: xid, 0, reply_n, filler_n,
 * filler[filler_n], len, data<len> (DDP-eligible), 0xC0FFEE. Reply: xid, 1,
 * len, data<len> (DDP-eligible), 0xC0FFEE, filler[reply_n]. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "proto/conn/privdata.h"
#include "rpcrdma/rpc.h"
#include "test.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

#define VX_MAGIC 0xC0FFEEu

static uint8_t vx_pat(uint32_t xid, uint32_t i)
{
	return (uint8_t)(xid * 29u + i * 13u + (i >> 11));
}

/* ---- verbs:// scheme ---- */

TEST(verbs_scheme_without_device)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_server *s = NULL;
	struct rpcrdma_context *ctx = NULL;
	int orc, rc, want;

	orc = rpcrdma_open(RPCRDMA_PROVIDER_VERBS, NULL, &ctx);
	if (orc == 0) {
		(void)rpcrdma_close(ctx);
		rr_test_skip("this host has an RDMA device: the -ENODEV case cannot run");
	}
	/* Built with rdma-core: no device here. Without: not supported. */
	want = rpcrdma_provider_available(RPCRDMA_PROVIDER_VERBS) ? -ENODEV : -EPROTONOSUPPORT;
	if (want == -ENODEV)
		CHECK_EQ(orc, -ENODEV);
	rc = rpcrdma_client_create("verbs://127.0.0.1:20049", 100003, 3, NULL, &c);
	CHECK_EQ(rc, want);
	CHECK(c == NULL);
	rc = rpcrdma_server_create("verbs://127.0.0.1:0", NULL, &s);
	CHECK_EQ(rc, want);
	CHECK(s == NULL);
	rc = rpcrdma_server_create("VERBS://0.0.0.0:0", NULL, &s);
	CHECK_EQ(rc, want);
	if (want == -ENODEV)
		CHECK(strstr(rpcrdma_strerror(rc), "device") != NULL);
	/* The transport itself, directly. */
	{
		struct rr_tp_conf conf;
		struct rr_tp_client *tc = NULL;
		struct sockaddr_in a = {0};

		rr_tp_conf_default(&conf);
		conf.provider = RPCRDMA_PROVIDER_VERBS;
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons(20049);
		rc = rr_tp_client_create(&conf, (struct sockaddr *)&a, sizeof(a),
					 (rr_tp_complete_fn)(void (*)(void))abort, NULL, &tc);
		CHECK_EQ(rc, want == -ENODEV ? -ENODEV : -ENOENT);
		CHECK(tc == NULL);
	}
	/* rdma:// (soft) is unaffected. */
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", NULL, &s), 0);
	rpcrdma_server_destroy(s);
}

/* ---- responder (rr_tp server) ---- */

struct vx_srv {
	struct rr_th_sq sq;
	struct rr_tp_server *tp;
	unsigned served, bad, err_chunks;
};

static void vx_answer(struct rr_th_sq *sq, struct rr_conn_sreq *r)
{
	struct vx_srv *s = RR_CONTAINER_OF(sq, struct vx_srv, sq);
	static uint8_t filler[300000];
	const uint8_t *m = r->msg;
	uint32_t len = r->len, reply_n, filler_n, off, l;
	uint8_t hdr[12], tr[4];
	struct rr_xprt_part parts[4];
	unsigned np = 0;
	bool err = false;
	int rc;

	if (len < 24)
		goto bad;
	reply_n = rr_get_be32(m + 8);
	filler_n = rr_get_be32(m + 12);
	if (filler_n > len - 24 || reply_n > sizeof(filler))
		goto bad;
	for (uint32_t i = 0; i < filler_n; i++)
		if (m[16 + i] != (uint8_t)(i ^ 0xa5))
			goto bad;
	off = 16 + (uint32_t)RR_ALIGN4(filler_n);
	if (off + 4 > len)
		goto bad;
	l = rr_get_be32(m + off);
	off += 4;
	if (l > len - off || RR_ALIGN4(l) + 4 > len - off)
		goto bad;
	for (uint32_t i = 0; i < l; i++)
		if (m[off + i] != vx_pat(r->xid, i))
			goto bad;
	if (rr_get_be32(m + off + RR_ALIGN4(l)) != VX_MAGIC || off + RR_ALIGN4(l) + 4 != len)
		goto bad;
	rr_put_be32(hdr, r->xid);
	rr_put_be32(hdr + 4, 1);
	rr_put_be32(hdr + 8, l);
	parts[np++] = (struct rr_xprt_part){hdr, 12, false};
	if (l)
		parts[np++] = (struct rr_xprt_part){m + off, l, true};
	rr_put_be32(tr, VX_MAGIC);
	parts[np++] = (struct rr_xprt_part){tr, 4, false};
	for (uint32_t i = 0; i < reply_n; i++)
		filler[i] = (uint8_t)(i * 7 + 3);
	if (reply_n)
		parts[np++] = (struct rr_xprt_part){filler, reply_n, false};
	rc = rr_tp_server_reply(s->tp, r, parts, np, &err);
	pthread_mutex_lock(&s->sq.lock);
	if (rc)
		s->bad++;
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

static int vx_srv_start(struct vx_srv *s, const struct rr_tp_conf *conf)
{
	int rc;

	memset(s, 0, sizeof(*s));
	rr_th_sq_init(&s->sq, vx_answer);
	rc = rr_th_tp_server(conf, rr_th_sq_recv, &s->sq, &s->tp);
	if (rc)
		return rc;
	rr_th_sq_start(&s->sq);
	return rr_tp_server_port(s->tp);
}

static void vx_srv_stop(struct vx_srv *s)
{
	rr_th_sq_stop(&s->sq);
	rr_tp_server_destroy(s->tp);
	rr_th_sq_destroy(&s->sq);
}

/* ---- requester ---- */

struct vx_rpc {
	struct rr_conn_rpc r;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned completions;
	uint32_t live_at_completion;
	struct rr_tp_client *tp;
	uint32_t reply_n, len;
	bool sink;
	uint8_t hdr[16 + 70000 + 4];
	uint8_t tail[4];
	uint8_t *data, *sinkbuf;
	struct rr_xprt_part parts[3];
	struct rr_xprt_sink sinks[1];
};

static void vx_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct vx_rpc *p = RR_CONTAINER_OF(r, struct vx_rpc, r);

	(void)ctx;
	pthread_mutex_lock(&p->lock);
	/* Deregistration is the fence: by now no STag of any RPC in this
	 * test may be live (they run one at a time). */
	p->live_at_completion = rr_tp_client_live_stags(p->tp);
	p->completions++;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

static uint32_t vx_next_xid = 0x7000;

static struct vx_rpc *vx_mk(struct rr_tp_client *tp, uint32_t reply_n, uint32_t filler_n,
			    uint32_t len, bool sink, uint32_t max_reply)
{
	struct vx_rpc *p = calloc(1, sizeof(*p));
	uint32_t off;

	REQUIRE(p);
	REQUIRE(filler_n <= 70000);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->tp = tp;
	p->r.xid = vx_next_xid += 16;
	p->reply_n = reply_n;
	p->len = len;
	p->sink = sink;
	rr_put_be32(p->hdr, p->r.xid);
	rr_put_be32(p->hdr + 4, 0);
	rr_put_be32(p->hdr + 8, reply_n);
	rr_put_be32(p->hdr + 12, filler_n);
	for (uint32_t i = 0; i < filler_n; i++)
		p->hdr[16 + i] = (uint8_t)(i ^ 0xa5);
	off = 16 + (uint32_t)RR_ALIGN4(filler_n);
	rr_put_be32(p->hdr + off, len);
	off += 4;
	p->data = malloc(len + 1);
	REQUIRE(p->data);
	for (uint32_t i = 0; i < len; i++)
		p->data[i] = vx_pat(p->r.xid, i);
	p->parts[0] = (struct rr_xprt_part){p->hdr, off, false};
	p->parts[1] = (struct rr_xprt_part){p->data, len, true};
	rr_put_be32(p->tail, VX_MAGIC);
	p->parts[2] = (struct rr_xprt_part){p->tail, 4, false};
	p->r.parts = p->parts;
	p->r.nparts = 3;
	if (sink) {
		p->sinkbuf = malloc(len + 64);
		REQUIRE(p->sinkbuf);
		memset(p->sinkbuf, 0xee, len + 64);
		p->sinks[0] = (struct rr_xprt_sink){p->sinkbuf, len + 64};
		p->r.sinks = p->sinks;
		p->r.nsinks = 1;
	}
	p->r.max_reply = max_reply;
	return p;
}

static bool vx_wait(struct vx_rpc *p, unsigned ms)
{
	return rr_th_wait_count(&p->lock, &p->cond, &p->completions, 1, ms);
}

static bool vx_verify(struct vx_rpc *p)
{
	const uint8_t *m = p->r.reply;
	uint32_t len = p->r.reply_len, off = 12, l = p->len;

	if (p->r.status || !m || len < 16 || rr_get_be32(m) != p->r.xid ||
	    rr_get_be32(m + 4) != 1 || rr_get_be32(m + 8) != l)
		return false;
	if (l && p->sink && p->r.is_placed[0]) {
		if (p->r.placed[0] != l || memcmp(p->sinkbuf, p->data, l) || p->sinkbuf[l] != 0xee)
			return false;
	} else if (l) {
		if (off + RR_ALIGN4(l) > len || memcmp(m + off, p->data, l))
			return false;
		off += (uint32_t)RR_ALIGN4(l);
	}
	if (off + 4 + p->reply_n != len || rr_get_be32(m + off) != VX_MAGIC)
		return false;
	off += 4;
	for (uint32_t i = 0; i < p->reply_n; i++)
		if (m[off + i] != (uint8_t)(i * 7 + 3))
			return false;
	return true;
}

static void vx_free(struct vx_rpc *p)
{
	if (p->r.reply)
		rr_tp_client_release_reply(p->tp, &p->r);
	free(p->data);
	free(p->sinkbuf);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

static int vx_cl_start(const struct rr_tp_conf *conf, int port, struct rr_tp_client **out)
{
	return rr_th_tp_client(conf, port, vx_complete, NULL, out);
}

/* Every message form with the per-RPC MR fallback on the requester, the
 * responder, or both (and windows on both, as the reference); with reliable
 * reply (modes 0-3) and without (modes 4-5: ERR_CHUNK, Reply chunks). */
TEST(mr_fallback_message_forms)
{
	struct {
		uint32_t reply_n, filler_n, len;
		bool sink;
		uint32_t max_reply;
		int expect;
	} cases[] = {
		{0, 0, 100, false, 1024, 0},          /* Short Call, inline Reply */
		{0, 0, 4100, false, 8192, 0},         /* Read chunk; Long Reply */
		{0, 5000, 12, false, 4096, 0},        /* Long Call */
		{0, 9000, 20000, true, 4096, 0},      /* Long Call + Read + Write chunk */
		{0, 0, 65536, true, 1024, 0},         /* Read chunk + Write chunk */
		{4052, 0, 0, false, 8192, 0},         /* Long Reply (Reply chunk) */
		{200000, 0, 8, false, 210000, 0},     /* big Long Reply */
		{5000, 0, 0, false, 1000, 1},         /* fits nowhere: reliable reply
							 Read chunk, else ERR_CHUNK */
		{3000, 0, 7000, true, 0, 0},          /* max unknown: reliable reply */
		{60000, 0, 16, false, 0, 0},          /* responder-provided Read chunk */
	};

	if (!rr_th_soft_ok())
		return;
	for (int mode = 0; mode < 6; mode++) {
		bool cw = mode & 1, sw = (mode & 2) != 0, rrep = mode < 4;
		struct rr_tp_conf sc, cc;
		struct rr_tp_client *tp = NULL;
		struct rr_xprt_stats cst, sst;
		struct rr_xprt_params prm;
		struct vx_srv s;
		unsigned via_read = 0;
		int port;

		rr_tp_conf_default(&sc);
		rr_tp_conf_default(&cc);
		sc.credits = 32;
		cc.connect_timeout_ms = 3000;
		sc.use_windows = sw;
		cc.use_windows = cw;
		sc.rrep_timeout_ms = 5000;
		if (!rrep)
			sc.ext_caps = cc.ext_caps = 0;
		port = vx_srv_start(&s, &sc);
		REQUIRE(port > 0);
		REQUIRE_EQ(vx_cl_start(&cc, port, &tp), 0);
		REQUIRE_EQ(rr_tp_client_params(tp, &prm, NULL), 0);
		/* R only with invalidatable registrations (RFC 8797 section 4). */
		CHECK_EQ(prm.local_r, cw);
		/* A responder exposes STags only for reliable reply. */
		CHECK_EQ(prm.peer_r, sw || !rrep);
		CHECK_EQ(rr_tp_client_reliable_reply(tp), rrep);
		for (unsigned i = 0; i < RR_ARRAY_SIZE(cases); i++) {
			struct vx_rpc *p = vx_mk(tp, cases[i].reply_n, cases[i].filler_n,
						 cases[i].len, cases[i].sink, cases[i].max_reply);
			int expect = cases[i].expect;

			if (expect == 1)
				expect = rrep ? 0 : -EREMOTEIO;

			p->r.max_unknown = cases[i].max_reply == 0;
			if (p->r.max_unknown)
				p->r.max_reply = 300000;
			REQUIRE_EQ(rr_tp_client_submit(tp, &p->r), 0);
			REQUIRE(vx_wait(p, 10000));
			CHECK_EQ(p->completions, 1);
			CHECK_EQ(p->r.status, expect);
			CHECK_EQ(p->live_at_completion, 0);
			if (cases[i].expect == 1 && rrep)
				CHECK(p->r.via_read);
			via_read += p->r.via_read;
			if (expect == 0) {
				bool ok = vx_verify(p);

				if (!ok)
					printf("  mode %d case %u: verification failed\n", mode, i);
				CHECK(ok);
			}
			if (cases[i].sink)
				CHECK(p->r.is_placed[0]);
			vx_free(p);
		}
		CHECK_EQ(rr_tp_client_live_stags(tp), 0);
		rr_tp_client_stats(tp, &cst);
		CHECK(cst.read_chunks >= 4);
		CHECK(cst.long_msgs >= 2);
		CHECK_EQ(cst.err_received, rrep ? 0 : 1);
		CHECK_EQ(cst.bad_remote_inv, 0);
		if (!cw)
			CHECK_EQ(cst.remote_inv, 0);   /* nothing to invalidate remotely */
		if (cw && sw)
			CHECK(cst.remote_inv > 0);
		/* The responder's Read-chunk Replies are all fenced. */
		for (int t = 0; t < 200 && rr_tp_server_rrep_live(s.tp); t++)
			rr_th_sleep_ms(5);
		CHECK_EQ(rr_tp_server_rrep_live(s.tp), 0);
		rr_tp_server_stats(s.tp, &sst);
		/* Without windows the responder's R is clear: each Read-chunk
		 * Reply was fenced locally, by deregistering its MR. */
		if (!sw && rrep) {
			CHECK(via_read >= 1);
			CHECK_EQ(sst.local_inv, via_read);
			CHECK_EQ(sst.remote_inv, 0);
		}
		CHECK(sst.rdma_read_bytes >= 4100 + 5000 + 9000 + 20000 + 65536);
		rr_tp_client_destroy(tp);
		vx_srv_stop(&s);
		CHECK_EQ(s.bad, 0);
		CHECK_EQ(s.err_chunks, rrep ? 0 : 1);
		CHECK_EQ(s.served, RR_ARRAY_SIZE(cases) - (rrep ? 0 : 1));
	}
}

/* ---- raw responder: STags on the wire ---- */

struct vx_conn_arg {
	const struct rr_tp_conf *cc;
	int port;
	struct rr_tp_client *tp;
};

/* On the harness's connecting thread: vx_cl_start has no REQUIRE. */
static int vx_connect(void *a)
{
	struct vx_conn_arg *x = a;

	return vx_cl_start(x->cc, x->port, &x->tp);
}

/* Without windows the requester sends R = 0, exposes MR STags for its Read,
 * Write and Reply chunks, and once the RPC completed each of those STags
 * refuses remote access at the provider (deregistered), not only in the
 * transport's count. */
TEST(mr_fallback_stags_dead_after_completion)
{
	static const uint8_t apd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3}; /* R = 0 */
	static struct rr_th_rresp g;
	static struct rr_hdr h, rh;
	struct rr_hdr_seg rd, wr;
	struct rr_tp_conf cc;
	struct rr_pd_info pdi;
	struct vx_conn_arg x;
	struct vx_rpc *p;
	uint8_t call[4096], m[512];
	uint32_t dlen = 9000, vend;
	int n, hl;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&cc);
	cc.use_windows = false;
	cc.ext_caps = 0;
	cc.connect_timeout_ms = 3000;
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	x = (struct vx_conn_arg){&cc, g.port, NULL};
	REQUIRE_EQ(rr_th_rresp_connect_with(&g, vx_connect, &x, apd, sizeof(apd), 5000), 0);
	/* The requester's RFC 8797 block: R clear. */
	REQUIRE_EQ(rr_pd_parse(g.req.private_data, g.req.private_data_len, &pdi), 0);
	CHECK_EQ(pdi.status, RR_PD_PRESENT);
	CHECK(!pdi.remote_inv);

	/* A Call with a Read chunk (9000 bytes), a Write chunk and a Reply
	 * chunk (reply_n 5000 > inline). */
	p = vx_mk(x.tp, 5000, 0, dlen, true, 8192);
	REQUIRE_EQ(rr_tp_client_submit(x.tp, &p->r), 0);
	n = rr_th_rresp_recv(&g, call, 5000);
	REQUIRE(n > 28);
	REQUIRE_EQ(rr_th_hdr_call(&h, call, n, 4096), 0);
	REQUIRE_EQ(h.nread, 1);
	REQUIRE_EQ(h.read[0].nsegs, 1);
	REQUIRE_EQ(h.nwrite, 1);
	REQUIRE(h.has_reply);
	rd = h.segs[h.read[0].first];
	wr = h.segs[h.write[0].first];
	CHECK(rr_tp_client_live_stags(x.tp) >= 3);
	/* Before the Reply every STag works: pull the Read chunk, place the
	 * result with an RDMA Write. */
	REQUIRE_EQ(rr_th_rresp_rdma(&g, false, rd.handle, rd.offset, rd.length, 0, &vend, 5000),
		   RPCRDMA_WC_SUCCESS);
	for (uint32_t i = 0; i < dlen; i++)
		if (g.data[i] != vx_pat(p->r.xid, i)) {
			CHECK(!"read chunk data");
			break;
		}
	REQUIRE_EQ(rr_th_rresp_rdma(&g, true, wr.handle, wr.offset, dlen, 0, &vend, 5000),
		   RPCRDMA_WC_SUCCESS);
	/* The Reply: RDMA_MSG, the Write chunk used for dlen bytes, body
	 * inline (reply_n = 0 in this Reply: the requester checks only the
	 * transport here, so use a short body). */
	rr_hdr_init(&rh, h.xid, 8, RR_HDR_MSG);
	wr.length = dlen;
	REQUIRE_EQ(rr_hdr_add_write(&rh, &wr, 1), 0);
	hl = rr_hdr_encode_buf(&rh, m, sizeof(m));
	REQUIRE(hl > 0);
	rr_put_be32(m + hl, h.xid);
	rr_put_be32(m + hl + 4, 1);
	rr_put_be32(m + hl + 8, dlen);
	rr_put_be32(m + hl + 12, VX_MAGIC);
	REQUIRE_EQ(rr_th_rresp_send(&g, m, (size_t)hl + 16, 0, 5000), 0);
	REQUIRE(vx_wait(p, 5000));
	CHECK_EQ(p->r.status, 0);
	CHECK(p->r.is_placed[0]);
	CHECK_EQ(p->r.placed[0], dlen);
	CHECK(memcmp(p->sinkbuf, p->data, dlen) == 0);
	CHECK_EQ(p->live_at_completion, 0);
	CHECK_EQ(rr_tp_client_live_stags(x.tp), 0);
	/* After completion the Write chunk's STag refuses an RDMA Write: the
	 * requester's provider answers with a Terminate (every chunk kind and
	 * way of completing: tests/transport/test_fence.c). The sink is untouched. */
	memset(g.data, 0x5a, 64);
	CHECK_EQ(rr_th_rresp_rdma(&g, true, wr.handle, wr.offset, 64, 0, &vend, 5000),
		 RPCRDMA_WC_REM_ACCESS_ERR);
	CHECK(memcmp(p->sinkbuf, p->data, dlen) == 0);
	vx_free(p);
	rr_tp_client_destroy(x.tp);
	rr_th_rresp_close(&g);
}
