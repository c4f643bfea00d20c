/* SPDX-License-Identifier: BSD-2-Clause */
/* Small DDP-eligible items conveyed inline (RFC 8166 section 3.4.2/3.4.3:
 * Read and Write chunks are the requester's option; Linux xprtrdma's
 * rpcrdma_args_inline / rpcrdma_results_inline): a Call that fits the call
 * inline threshold with its items inline goes as a Short message, and result
 * sinks whose largest possible Reply fits the reply inline threshold get no
 * Write chunk -- no registration, no invalidation -- and the responder's
 * inline item is copied into the caller's sink by the results decoder. The
 * inline_ddp knob (rr_xprt_params, rr_tp_conf, rpcrdma_client_opts
 * .no_inline_ddp) restores one Write chunk per sink. Core tests check the plan
 * and the requester's checks of a Reply to such a Call; end-to-end tests over
 * rdma:// (soft iWARP) check the counters, the data and the exact switch
 * points. */
#include "test.h"

#include <stdlib.h>

#include "proto/xprt.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"

/* ---- core (proto/xprt.h) ---- */

/* A 40-byte RPC Call header stand-in (XID first) as the inline part. */
static void mk_head(uint8_t *b, uint32_t xid)
{
	memset(b, 0, 40);
	rr_put_be32(b, xid);
}

static int prep(struct rr_xprt_requester *r, struct rr_xprt_rqst_desc *d,
		struct rr_xprt_part *parts, uint8_t *head, struct rr_xprt_sink *sk,
		uint32_t sink_len, uint32_t max_reply, struct rr_xprt_rqst **out)
{
	mk_head(head, 0x1234);
	parts[0] = (struct rr_xprt_part){head, 40, false};
	memset(d, 0, sizeof(*d));
	d->xid = 0x1234;
	d->parts = parts;
	d->nparts = 1;
	d->sinks = sk;
	d->nsinks = 1;
	sk->len = sink_len;
	d->max_reply = max_reply;
	return rr_xprt_rqst_prepare(r, d, out);
}

/* Threshold: MIN_HDR (28) + max_reply + ALIGN4(sink) <= reply_inline. */
TEST(xprt_inline_results_plan_threshold)
{
	static uint8_t sinkbuf[2048];
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_requester r;
	struct rr_xprt_rqst_desc d;
	struct rr_xprt_part parts[1];
	struct rr_xprt_sink sk = {sinkbuf, 0};
	struct rr_xprt_rqst *c;
	uint8_t head[40];
	const uint32_t max_reply = 100;
	/* reply_inline 1024 (default): 1024 - 28 - 100 = 896 */
	const uint32_t thr = 896;
	struct {
		uint32_t len;
		bool inl;
	} cases[] = {{1, true}, {thr - 1, true}, {thr, true}, {thr + 1, false},
		     {thr + 4, false}, {2048, false}};

	rr_test_env_init(&te, 7);
	rr_xprt_params_default(&p);
	memset(&st, 0, sizeof(st));
	CHECK(p.inline_ddp);   /* on by default */
	rr_xprt_req_init(&r, &te.env, &p, &st);
	for (unsigned i = 0; i < RR_ARRAY_SIZE(cases); i++) {
		REQUIRE_EQ(prep(&r, &d, parts, head, &sk, cases[i].len, max_reply, &c), 0);
		CHECK_EQ(c->results_inline, cases[i].inl);
		CHECK_EQ(c->form, RR_XPRT_FORM_SHORT);
		/* inline: nothing to register; else the sink's Write chunk */
		CHECK_EQ(c->nregs, cases[i].inl ? 0u : 1u);
		CHECK_EQ(c->sink_reg[0], cases[i].inl ? -1 : 0);
		rr_xprt_rqst_release(&r, c);
	}
	/* knob off: a Write chunk even for one byte */
	p.inline_ddp = false;
	rr_xprt_req_set_params(&r, &p);
	REQUIRE_EQ(prep(&r, &d, parts, head, &sk, 1, max_reply, &c), 0);
	CHECK(!c->results_inline);
	CHECK_EQ(c->nregs, 1u);
	rr_xprt_rqst_release(&r, c);
	/* an unknown Reply bound (the RPC layer passes max_msg) keeps the chunk */
	p.inline_ddp = true;
	rr_xprt_req_set_params(&r, &p);
	REQUIRE_EQ(prep(&r, &d, parts, head, &sk, 1, 1u << 20, &c), 0);
	CHECK(!c->results_inline);
	CHECK_EQ(c->sink_reg[0], 0);
	rr_xprt_rqst_release(&r, c);
	rr_xprt_req_fini(&r);
	CHECK_EQ(te.live, 0);   /* no leak */
}

/* With a large reply threshold (rdma://'s 132 KiB) results larger than
 * inline_ddp_max (16 KiB by default) get a Write chunk although the Reply
 * would fit inline: copied twice inline, placed once by RDMA Write (issue 16
 * part I). inline_ddp_max 0 lifts the bound; two sinks count together. */
TEST(xprt_inline_results_plan_ddp_max)
{
	static uint8_t sinkbuf[65536];
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_requester r;
	struct rr_xprt_rqst_desc d;
	struct rr_xprt_part parts[1];
	struct rr_xprt_sink sk = {sinkbuf, 0}, two[2];
	struct rr_xprt_rqst *c;
	uint8_t head[40];
	const uint32_t max = RR_XPRT_INLINE_DDP_MAX;
	struct {
		uint32_t len;
		bool inl;
	} cases[] = {{1, true}, {max - 4, true}, {max - 3, true}, {max, true},
		     {max + 1, false}, {max + 4, false}, {65536, false}};

	rr_test_env_init(&te, 7);
	rr_xprt_params_default(&p);
	CHECK_EQ(p.inline_ddp_max, max);
	p.reply_inline = 132 * 1024;
	memset(&st, 0, sizeof(st));
	rr_xprt_req_init(&r, &te.env, &p, &st);
	for (unsigned i = 0; i < RR_ARRAY_SIZE(cases); i++) {
		REQUIRE_EQ(prep(&r, &d, parts, head, &sk, cases[i].len, 64, &c), 0);
		CHECK_EQ(c->results_inline, cases[i].inl);
		CHECK_EQ(c->nregs, cases[i].inl ? 0u : 1u);
		CHECK_EQ(c->sink_reg[0], cases[i].inl ? -1 : 0);
		rr_xprt_rqst_release(&r, c);
	}
	/* two sinks of 8 KiB + 1 (padded 8196 each): 16392 > 16384 */
	two[0] = (struct rr_xprt_sink){sinkbuf, 8193};
	two[1] = (struct rr_xprt_sink){sinkbuf + 16384, 8193};
	REQUIRE_EQ(prep(&r, &d, parts, head, &sk, 1, 64, &c), 0);
	rr_xprt_rqst_release(&r, c);
	d.sinks = two;
	d.nsinks = 2;
	REQUIRE_EQ(rr_xprt_rqst_prepare(&r, &d, &c), 0);
	CHECK(!c->results_inline);
	CHECK_EQ(c->nregs, 2u);
	rr_xprt_rqst_release(&r, c);
	/* no bound: only the reply threshold decides */
	p.inline_ddp_max = 0;
	rr_xprt_req_set_params(&r, &p);
	REQUIRE_EQ(prep(&r, &d, parts, head, &sk, 65536, 64, &c), 0);
	CHECK(c->results_inline);
	CHECK_EQ(c->nregs, 0u);
	rr_xprt_rqst_release(&r, c);
	rr_xprt_req_fini(&r);
	CHECK_EQ(te.live, 0);   /* no leak */
}

/* Builds a Reply (RDMA_MSG) for XID 0x1234 with @nwrites Write chunks of one
 * segment each and an RPC Reply payload of @plen bytes. */
static size_t mk_reply(uint8_t *buf, size_t cap, uint32_t nwrites, uint32_t plen)
{
	static struct rr_hdr h;
	const struct rr_hdr_seg w = {0x77, 8, 0x1000};
	int n;

	rr_hdr_init(&h, 0x1234, 1, RR_HDR_MSG);
	for (uint32_t i = 0; i < nwrites; i++)
		if (rr_hdr_add_write(&h, &w, 1))
			return 0;
	n = rr_hdr_encode_buf(&h, buf, cap);
	if (n < 0 || (size_t)n + plen > cap)
		return 0;
	memset(buf + n, 0, plen);
	rr_put_be32(buf + n, 0x1234);
	rr_put_be32(buf + n + 4, 1);   /* REPLY */
	return (size_t)n + plen;
}

/* The Call of an inline-results plan carries no Write list; a Reply that
 * returns a Write chunk anyway (none was provisioned) is malformed and
 * silently discarded (RFC 8166 section 4.5); the inline Reply completes the
 * Call with the sink reported not placed. */
TEST(xprt_inline_results_wire_and_rogue_write_chunk)
{
	static uint8_t sinkbuf[64], sendbuf[1024], rbuf[1024];
	static struct rr_hdr h;
	struct rr_hdr_limits lim;
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_requester r;
	struct rr_xprt_rqst_desc d;
	struct rr_xprt_part parts[1];
	struct rr_xprt_sink sk = {sinkbuf, 0};
	struct rr_xprt_rqst *c;
	struct rr_xprt_reply res;
	uint8_t head[40];
	size_t n;
	int len;

	rr_test_env_init(&te, 8);
	rr_xprt_params_default(&p);
	memset(&st, 0, sizeof(st));
	rr_xprt_req_init(&r, &te.env, &p, &st);
	REQUIRE_EQ(prep(&r, &d, parts, head, &sk, 64, 64, &c), 0);
	REQUIRE(c->results_inline);
	len = rr_xprt_rqst_marshal(&r, c, 8, sendbuf, sizeof(sendbuf));
	REQUIRE(len > 0);
	rr_xprt_hdr_limits(&lim, 1024, 0, false);
	REQUIRE_EQ(rr_hdr_decode(&h, sendbuf, (size_t)len, RR_HDR_DIR_CALL, &lim), 0);
	CHECK_EQ(h.nwrite, 0u);
	CHECK(!h.has_reply);
	CHECK_EQ(h.nread, 0u);
	CHECK_EQ((uint32_t)len, 28u + 40u);
	CHECK_EQ(st.short_msgs, 1);
	CHECK_EQ(st.write_chunks, 0);

	/* rogue: a Write chunk in the Reply */
	n = mk_reply(rbuf, sizeof(rbuf), 1, 32);
	REQUIRE(n > 0);
	rr_xprt_req_recv(&r, rbuf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	CHECK_EQ(st.bad_replies, 1);
	CHECK(rr_xprt_req_find(&r, 0x1234) == c);   /* still waiting */

	/* the inline Reply */
	n = mk_reply(rbuf, sizeof(rbuf), 0, 32);
	REQUIRE(n > 0);
	rr_xprt_req_recv(&r, rbuf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_REPLY);
	CHECK(res.call == c);
	CHECK_EQ(res.nsinks, 1u);
	CHECK(!res.sink_placed[0]);
	CHECK_EQ(res.payload_len, 32u);
	rr_xprt_rqst_release(&r, c);
	rr_xprt_req_fini(&r);
	CHECK_EQ(te.live, 0);   /* no leak */
}

/* ---- end to end over rdma:// (soft iWARP) ---- */

#define PROG 0x2000019cu
#define P_SUM 1u   /* opaque<> (DDP) -> u32 len, u32 sum */
#define P_GEN 2u   /* u32 n -> opaque<n> (DDP), byte i = (i * 13 + n) & 0xff */

struct rr_xprt_class;
extern const struct rr_xprt_class rr_xprt_rdma_class;
const void *volatile rr_test_pull_rdma_inline = &rr_xprt_rdma_class;

static bool soft_ok(void)
{
	if (!rpcrdma_provider_available(RPCRDMA_PROVIDER_SOFT)) {
		rr_test_mark_skipped("soft provider not built in");
		return false;
	}
	return true;
}

static uint32_t sum_of(const uint8_t *p, uint32_t len)
{
	uint32_t s = 0;

	for (uint32_t i = 0; i < len; i++)
		s = s * 31u + p[i];
	return s;
}

static int h_sum(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), sum_of(p, len));
	return RPCRDMA_SVC_OK;
}

/* The server's result data, filled before the server starts (the Reply
 * references it until it is sent). */
static uint8_t gen_buf[65536];

static uint8_t gen_byte(uint32_t n, uint32_t i)
{
	(void)n;
	return (uint8_t)((i * 13u + 5u) & 0xffu);
}

static int h_gen(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > sizeof(gen_buf))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), gen_buf, n) ? RPCRDMA_SVC_SYSTEM_ERR
								       : RPCRDMA_SVC_OK;
}

struct env2 {
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
};

/* @inline_size 0: the transport's choice (rdma://: 132 KiB). */
static void e2e_start_sized(struct env2 *e, bool no_inline_ddp, uint32_t inline_size)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_client_opts co = {.timeout_ms = 10000, .connect_timeout_ms = 5000,
					 .no_inline_ddp = no_inline_ddp,
					 .inline_size = inline_size};
	char url[64];

	for (uint32_t i = 0; i < sizeof(gen_buf); i++)
		gen_buf[i] = gen_byte(0, i);
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &e->s), 0);
	REQUIRE_EQ(rpcrdma_server_register(e->s, PROG, 1, P_SUM, h_sum, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(e->s, PROG, 1, P_GEN, h_gen, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(e->s), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(e->s));
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &co, &e->c), 0);
}

static void e2e_start(struct env2 *e, bool no_inline_ddp)
{
	e2e_start_sized(e, no_inline_ddp, 4096);   /* Linux's thresholds */
}

static void e2e_stop(struct env2 *e)
{
	rpcrdma_client_destroy(e->c);
	rpcrdma_server_destroy(e->s);
}

/* One P_SUM call with @len bytes of argument; returns the client counter
 * difference in @dc. */
static void do_sum(struct env2 *e, uint32_t len, struct rpcrdma_xprt_stats *dc)
{
	struct rpcrdma_xprt_stats c0, c1;
	struct rpcrdma_call *call;
	uint8_t *src = malloc(len ? len : 1);
	uint32_t rlen = 0, rsum = 0;

	REQUIRE(src);
	for (uint32_t i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 7u + len);
	REQUIRE_EQ(rpcrdma_client_stats(e->c, &c0), 0);
	REQUIRE_EQ(rpcrdma_call_create(e->c, P_SUM, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, len), 0);
	rpcrdma_call_set_reply_hint(call, 64);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rlen), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &rsum), 0);
	CHECK_EQ(rlen, len);
	CHECK_EQ(rsum, sum_of(src, len));
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_client_stats(e->c, &c1), 0);
	rpcrdma_xprt_stats_diff(&c1, &c0, dc);
	free(src);
}

/* One P_GEN call of @n bytes into a sink of @n bytes, reply hint 64. */
static void do_gen(struct env2 *e, uint32_t n, struct rpcrdma_xprt_stats *dc)
{
	struct rpcrdma_xprt_stats c0, c1;
	struct rpcrdma_call *call;
	uint8_t *sink = malloc(n);
	struct rpcrdma_ddp_sink sk = {sink, n};
	const void *p = NULL;
	uint32_t len = 0, bad = 0;

	REQUIRE(sink);
	memset(sink, 0xee, n);
	REQUIRE_EQ(rpcrdma_client_stats(e->c, &c0), 0);
	REQUIRE_EQ(rpcrdma_call_create(e->c, P_GEN, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), n), 0);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
	rpcrdma_call_set_reply_hint(call, 64);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
	CHECK_EQ(len, n);
	CHECK(p == sink);   /* in the caller's sink, as when placed by RDMA Write */
	for (uint32_t i = 0; i < n; i++)
		bad += sink[i] != gen_byte(n, i);
	CHECK_EQ(bad, 0);
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_client_stats(e->c, &c1), 0);
	rpcrdma_xprt_stats_diff(&c1, &c0, dc);
	free(sink);
}

static void check_no_chunks(const struct rpcrdma_xprt_stats *dc)
{
	CHECK_EQ(dc->read_chunks + dc->write_chunks + dc->reply_chunks, 0);
	CHECK_EQ(dc->remote_inv + dc->local_inv, 0);   /* nothing registered */
	CHECK_EQ(dc->total_rdma_req + dc->total_rdma_rep, 0);
	CHECK_EQ(dc->short_msgs, 1);
	CHECK_EQ(dc->msg_sent, 1);
	CHECK_EQ(dc->msg_recv, 1);
}

/* Reply bound: 28 (header, empty lists) + 64 (hint) + ALIGN4(n) <= 4096
 * (negotiated reply threshold) -> n <= 4004. */
TEST(xprt_inline_results_e2e_threshold)
{
	const uint32_t thr = 4096 - 28 - 64;
	struct rpcrdma_xprt_stats dc;
	struct env2 e;

	if (!soft_ok())
		return;
	e2e_start(&e, false);
	do_gen(&e, 1, &dc);
	check_no_chunks(&dc);
	do_gen(&e, 1024, &dc);
	check_no_chunks(&dc);
	CHECK(dc.inline_recv_bytes >= 1024);   /* the data came in the Reply */
	do_gen(&e, thr - 1, &dc);
	check_no_chunks(&dc);
	do_gen(&e, thr, &dc);
	check_no_chunks(&dc);
	do_gen(&e, thr + 1, &dc);   /* one Write chunk, invalidated by the peer */
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.read_chunks, 0);
	CHECK_EQ(dc.total_rdma_rep, thr + 1);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 1);
	CHECK(dc.inline_recv_bytes < 200);
	do_gen(&e, 65536, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 65536);
	e2e_stop(&e);
}

/* Call bound: 28 (header) + 40 (RPC Call header, AUTH_NONE) + 4 (length
 * word) + ALIGN4(n) <= 4096 (negotiated call threshold) -> n <= 4024. */
TEST(xprt_inline_args_e2e_threshold)
{
	const uint32_t thr = 4096 - 28 - 40 - 4;
	struct rpcrdma_xprt_stats dc;
	struct env2 e;

	if (!soft_ok())
		return;
	e2e_start(&e, false);
	do_sum(&e, 1, &dc);
	check_no_chunks(&dc);
	do_sum(&e, 1024, &dc);
	check_no_chunks(&dc);
	CHECK(dc.inline_sent_bytes >= 1024 + 28 + 40 + 4);
	do_sum(&e, thr - 1, &dc);
	check_no_chunks(&dc);
	do_sum(&e, thr, &dc);
	check_no_chunks(&dc);
	do_sum(&e, thr + 1, &dc);   /* one Read chunk, invalidated locally */
	CHECK_EQ(dc.read_chunks, 1);
	CHECK_EQ(dc.chunked_msgs, 1);
	CHECK_EQ(dc.total_rdma_req, thr + 1);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 1);
	CHECK(dc.inline_sent_bytes < 200);
	e2e_stop(&e);
}

/* no_inline_ddp: a Write chunk for the smallest sink, the data placed by
 * RDMA Write and still verified. */
TEST(xprt_inline_knob_off_restores_write_chunks)
{
	struct rpcrdma_xprt_stats dc;
	struct env2 e;

	if (!soft_ok())
		return;
	e2e_start(&e, true);
	do_gen(&e, 1, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 1);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 1);
	do_gen(&e, 1024, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 1024);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 1);
	CHECK(dc.inline_recv_bytes < 200);
	e2e_stop(&e);
}

/* rdma://'s own thresholds (132 KiB): a 16 KiB result still comes inline,
 * one byte more and a 64 KiB one are RDMA Written into the sink (the bound
 * RR_XPRT_INLINE_DDP_MAX, not the 132 KiB threshold, decides). */
TEST(xprt_inline_results_e2e_ddp_max)
{
	struct rpcrdma_xprt_stats dc;
	struct env2 e;

	if (!soft_ok())
		return;
	e2e_start_sized(&e, false, 0);
	do_gen(&e, 4096, &dc);
	check_no_chunks(&dc);
	do_gen(&e, RR_XPRT_INLINE_DDP_MAX, &dc);
	check_no_chunks(&dc);
	CHECK(dc.inline_recv_bytes >= RR_XPRT_INLINE_DDP_MAX);
	do_gen(&e, RR_XPRT_INLINE_DDP_MAX + 1, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, RR_XPRT_INLINE_DDP_MAX + 1);
	CHECK(dc.inline_recv_bytes < 200);
	do_gen(&e, 65536, &dc);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 65536);
	CHECK(dc.inline_recv_bytes < 200);
	e2e_stop(&e);
}
