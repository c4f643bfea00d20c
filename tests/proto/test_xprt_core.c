/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the sans-I/O transport core (RFC 8166 message forms, chunk
 * reduction and rebuilding, Write/Reply chunk filling, error answers, remote
 * invalidation, Linux peer quirks). The "RDMA" here is a simulated memory
 * space: a registration's remote address is its local address and every
 * simulated Read/Write checks that the STag is valid, has the right access and
 * stays inside the registration, so an overrun fails the test. */
#include <stdlib.h>

#include "test.h"
#include "proto/xprt.h"
#include "xprt_harness.h"

/* ---- simulated registrations ---- */
#define SIM_MAX 64
static struct rr_xprt_reg *sim_regs[SIM_MAX];
static bool sim_valid[SIM_MAX];   /* the "RNIC's" view, apart from the core's */
static unsigned sim_n;
static uint32_t sim_next_stag = 0x100;
static unsigned sim_faults;

static void sim_reset(void)
{
	sim_n = 0;
	sim_faults = 0;
}

static void sim_register(struct rr_xprt_reg *g)
{
	g->stag = sim_next_stag++;
	g->addr = (uint64_t)(uintptr_t)g->base;
	g->valid = true;
	if (sim_n < SIM_MAX) {
		sim_valid[sim_n] = true;
		sim_regs[sim_n++] = g;
	}
}

static struct rr_xprt_reg *sim_lookup(uint32_t stag, uint64_t addr, uint32_t len,
				      unsigned acc)
{
	for (unsigned i = 0; i < sim_n; i++) {
		struct rr_xprt_reg *g = sim_regs[i];

		if (g->stag != stag)
			continue;
		if (!sim_valid[i] || !(g->access & acc) || addr < g->addr ||
		    addr + len > g->addr + g->len)
			break;
		return g;
	}
	sim_faults++;
	return NULL;
}

static bool sim_read(void *dst, uint32_t stag, uint64_t addr, uint32_t len)
{
	if (!sim_lookup(stag, addr, len, RR_XPRT_ACC_REMOTE_READ))
		return false;
	memcpy(dst, (void *)(uintptr_t)addr, len);
	return true;
}

static bool sim_write(uint32_t stag, uint64_t addr, const void *src, uint32_t len)
{
	if (!sim_lookup(stag, addr, len, RR_XPRT_ACC_REMOTE_WRITE))
		return false;
	memcpy((void *)(uintptr_t)addr, src, len);
	return true;
}

static void sim_invalidate(uint32_t stag)
{
	for (unsigned i = 0; i < sim_n; i++)
		if (sim_regs[i]->stag == stag)
			sim_valid[i] = false;
}

/* ---- one RPC through both cores ---- */
struct rt {
	struct rr_test_env te;
	struct rr_xprt_params rp, sp;   /* requester / responder params */
	struct rr_xprt_stats rst, sst;
	struct rr_xprt_requester req;
	struct rr_xprt_responder rsp;
	uint8_t send[70000];
	uint32_t send_len;
	uint8_t reply[70000];
	uint32_t reply_len;
	enum rr_xprt_form form;
	enum rr_xprt_rsp_action act;
	uint8_t call_seen[200000];
	uint32_t call_seen_len;
	struct rr_xprt_reply res;
	struct rr_xprt_reply_plan plan;
	bool inv_used;
	uint32_t inv_stag;
	uint32_t call_proc;
	uint32_t grant;              /* the responder's grant (32) */
};

static void rt_init(struct rt *t)
{
	memset(t, 0, sizeof(*t));
	rr_test_env_init(&t->te, 1);
	rr_xprt_params_default(&t->rp);
	t->rp.inline_ddp = false;
	rr_xprt_params_default(&t->sp);
	t->sp.inline_ddp = false;
	t->grant = 32;
	sim_reset();
}

static void rt_start(struct rt *t)
{
	rr_xprt_req_init(&t->req, &t->te.env, &t->rp, &t->rst);
	rr_xprt_rsp_init(&t->rsp, &t->te.env, &t->sp, &t->sst);
}

/* Runs a Call; the responder answers with @rparts. Returns the requester's
 * completion kind; the call is released. */
static int rt_run(struct rt *t, const struct rr_xprt_rqst_desc *d,
		  const struct rr_xprt_part *rparts, unsigned nrparts)
{
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc = NULL;
	uint8_t err[28];
	size_t elen;
	int n;

	REQUIRE_EQ(rr_xprt_rqst_prepare(&t->req, d, &c), 0);
	for (unsigned i = 0; i < c->nregs; i++)
		sim_register(&c->regs[i]);
	t->form = c->form;
	n = rr_xprt_rqst_marshal(&t->req, c, 128, t->send, sizeof(t->send));
	REQUIRE(n > 0);
	CHECK(n <= (int)t->rp.call_inline);
	t->send_len = (uint32_t)n;
	t->call_proc = rr_get_be32(t->send + 12);

	t->act = rr_xprt_rsp_recv(&t->rsp, t->send, t->send_len, t->grant, err, &elen, &rc);
	if (t->act == RR_XPRT_A_READ) {
		for (uint32_t i = 0; i < rc->nreads; i++) {
			const struct rr_xprt_read_op *o = &rc->reads[i];

			CHECK(o->local_off + o->len <= rc->buf_len);
			CHECK(sim_read(rc->buf + o->local_off, o->stag, o->remote, o->len));
		}
		t->act = rr_xprt_rsp_assemble(&t->rsp, rc, t->grant, err, &elen);
	}
	REQUIRE_EQ(t->act, RR_XPRT_A_DELIVER);
	REQUIRE(rc->msg_len <= sizeof(t->call_seen));
	memcpy(t->call_seen, rc->msg, rc->msg_len);
	t->call_seen_len = rc->msg_len;

	REQUIRE_EQ(rr_xprt_rsp_reply(&t->rsp, rc, rparts, nrparts, t->grant, t->reply,
				     sizeof(t->reply), &t->plan), 0);
	for (uint32_t i = 0; i < t->plan.nwrites; i++) {
		const struct rr_xprt_write_op *w = &t->plan.writes[i];

		CHECK(sim_write(w->stag, w->remote, w->src, w->len));
	}
	t->reply_len = t->plan.send_len;
	CHECK(t->reply_len <= t->sp.reply_inline);
	t->inv_used = t->plan.send_inv;
	t->inv_stag = t->plan.inv_stag;
	if (t->inv_used)
		sim_invalidate(t->inv_stag);
	rr_xprt_rcall_release(&t->rsp, rc);

	rr_xprt_req_recv(&t->req, t->reply, t->reply_len, t->inv_used, t->inv_stag,
			 &t->res);
	if (t->res.kind != RR_XPRT_R_DROP) {
		CHECK(t->res.call == c);
		/* Local invalidation of whatever the peer did not invalidate. */
		for (unsigned i = 0; i < c->nregs; i++) {
			if (c->regs[i].valid) {
				c->regs[i].valid = false;
				t->rst.local_inv++;
			}
		}
	}
	return t->res.kind;
}

static void rt_finish(struct rt *t)
{
	/* The caller releases the completed call (res.call). */
	if (t->res.call)
		rr_xprt_rqst_release(&t->req, t->res.call);
	t->res.call = NULL;
	CHECK_EQ(t->req.outstanding, 0);
	rr_xprt_req_fini(&t->req);
	CHECK_EQ(t->te.live, 0);
}

/* An RPC Call header image with @xid (24 bytes: xid CALL 2 prog vers proc). */
static void mk_call(uint8_t *p, uint32_t xid, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 7 + 3);
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, 0);
}

static void mk_reply(uint8_t *p, uint32_t xid, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + 1);
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, 1);
}

static void fill_pat(uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 31 + (i >> 8));
}

/* The full XDR stream the responder should rebuild. */
static uint32_t expect_stream(const struct rr_xprt_part *parts, unsigned n, uint8_t *out)
{
	uint32_t off = 0;

	for (unsigned i = 0; i < n; i++) {
		memcpy(out + off, parts[i].base, parts[i].len);
		off += parts[i].len;
		if (parts[i].ddp)
			while (off & 3)
				out[off++] = 0;
	}
	return off;
}

static uint8_t head_buf[70000], tail_buf[4096], item_a[70000], item_b[70000],
	item_c[70000], exp_buf[300000];

TEST(xprt_short_call_at_threshold)
{
	static struct rt t;
	uint8_t rep[64];
	struct rr_xprt_part rp = {rep, sizeof(rep), false};

	/* Message 28 + 996 = 1024 bytes: inline iff call_inline >= 1024. */
	for (int delta = -1; delta <= 1; delta++) {
		struct rr_xprt_part cp = {head_buf, 996, false};
		struct rr_xprt_rqst_desc d = {.xid = 7, .parts = &cp, .nparts = 1,
					      .max_reply = 64};

		rt_init(&t);
		t.rp.call_inline = t.sp.call_inline = (uint32_t)(1024 + delta);
		rt_start(&t);
		mk_call(head_buf, 7, 996);
		mk_reply(rep, 7, sizeof(rep));
		REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_REPLY);
		CHECK_EQ(t.form, delta >= 0 ? RR_XPRT_FORM_SHORT : RR_XPRT_FORM_LONG);
		CHECK_EQ(t.call_proc, delta >= 0 ? RR_HDR_MSG : RR_HDR_NOMSG);
		CHECK_EQ(t.call_seen_len, 996);
		CHECK_MEM(t.call_seen, head_buf, 996);
		CHECK_EQ(t.res.payload_len, sizeof(rep));
		CHECK_MEM(t.res.payload, rep, sizeof(rep));
		CHECK_EQ(sim_faults, 0);
		rt_finish(&t);
	}
}

/* Read chunks: three DDP items of odd lengths at different positions, each
 * split into several segments; the responder rebuilds the stream with zero
 * pads; the items' pads are not sent. */
TEST(xprt_read_chunks_odd_lengths_many_segments)
{
	static struct rt t;
	uint8_t rep[40];
	struct rr_xprt_part rp = {rep, sizeof(rep), false};
	struct rr_xprt_part cp[6] = {
		{head_buf, 100, false}, {item_a, 4097, true}, {tail_buf, 8, false},
		{item_b, 1, true},      {tail_buf + 8, 12, false}, {item_c, 4095, true},
	};
	struct rr_xprt_rqst_desc d = {.xid = 0x1234, .parts = cp, .nparts = 6,
				      .max_reply = 40};
	uint32_t elen;

	rt_init(&t);
	t.rp.max_seg_len = 256;
	t.rp.max_segs = 17;
	rt_start(&t);
	mk_call(head_buf, 0x1234, 100);
	fill_pat(item_a, 4097, 1);
	fill_pat(item_b, 1, 2);
	fill_pat(item_c, 4095, 3);
	fill_pat(tail_buf, 20, 4);
	mk_reply(rep, 0x1234, sizeof(rep));
	REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_REPLY);
	CHECK_EQ(t.form, RR_XPRT_FORM_READ);
	CHECK_EQ(t.call_proc, RR_HDR_MSG);
	/* 17 + 1 + 16 read segments of 24 bytes, payload 120 bytes. */
	CHECK_EQ(t.send_len, 16 + 34 * 24 + 4 + 4 + 4 + 120);
	elen = expect_stream(cp, 6, exp_buf);
	CHECK_EQ(t.call_seen_len, elen);
	CHECK_MEM(t.call_seen, exp_buf, elen);
	CHECK_EQ(t.rst.read_chunks, 3);
	CHECK_EQ(t.sst.read_chunks, 3);
	CHECK_EQ(t.sst.rdma_read_bytes, 4097 + 1 + 4095);
	CHECK_EQ(sim_faults, 0);
	rt_finish(&t);
}

/* 16-segment chunks are allowed, 17 are refused with max_segs 16. */
TEST(xprt_sixteen_segment_limit)
{
	static struct rt t;
	struct rr_xprt_rqst *c;
	struct rr_xprt_part cp[2] = {{head_buf, 200, false}, {item_a, 4096, true}};
	struct rr_xprt_rqst_desc d = {.xid = 9, .parts = cp, .nparts = 2, .max_reply = 8};

	rt_init(&t);
	t.rp.max_seg_len = 256;
	t.rp.max_segs = 16;
	rt_start(&t);
	mk_call(head_buf, 9, 200);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
	CHECK_EQ(c->form, RR_XPRT_FORM_READ);
	rr_xprt_rqst_release(&t.req, c);
	cp[1].len = 4097;
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -EMSGSIZE);
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}

/* Long Call: the reduced stream does not fit, so it travels in a
 * position-zero Read chunk and the DDP items in their own chunks. */
TEST(xprt_long_call_with_items)
{
	static struct rt t;
	uint8_t rep[24];
	struct rr_xprt_part rp = {rep, sizeof(rep), false};
	struct rr_xprt_part cp[5] = {
		{head_buf, 3000, false}, {item_a, 10001, true}, {tail_buf, 2000, false},
		{item_b, 7, true}, {tail_buf + 2000, 4, false},
	};
	struct rr_xprt_rqst_desc d = {.xid = 0xabcdef01, .parts = cp, .nparts = 5,
				      .max_reply = 24};
	uint32_t elen;

	rt_init(&t);
	rt_start(&t);
	mk_call(head_buf, 0xabcdef01, 3000);
	fill_pat(item_a, 10001, 9);
	fill_pat(item_b, 7, 8);
	fill_pat(tail_buf, 2004, 7);
	mk_reply(rep, 0xabcdef01, sizeof(rep));
	REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_REPLY);
	CHECK_EQ(t.form, RR_XPRT_FORM_LONG);
	CHECK_EQ(t.call_proc, RR_HDR_NOMSG);
	CHECK_EQ(t.send_len, 16 + 3 * 24 + 4 + 4 + 4);
	elen = expect_stream(cp, 5, exp_buf);
	CHECK_EQ(t.call_seen_len, elen);
	CHECK_MEM(t.call_seen, exp_buf, elen);
	CHECK_EQ(t.rst.long_msgs, 1);
	CHECK_EQ(t.sst.long_msgs, 1);
	CHECK_EQ(sim_faults, 0);
	rt_finish(&t);
}

/* Long Call without DDP items, many segments in the position-zero chunk. */
TEST(xprt_long_call_plain)
{
	static struct rt t;
	uint8_t rep[8];
	struct rr_xprt_part rp = {rep, sizeof(rep), false};
	struct rr_xprt_part cp = {head_buf, 65536, false};
	struct rr_xprt_rqst_desc d = {.xid = 5, .parts = &cp, .nparts = 1, .max_reply = 8};

	rt_init(&t);
	t.rp.max_seg_len = 4096;
	rt_start(&t);
	fill_pat(head_buf, 65536, 5);
	mk_call(head_buf, 5, 8);
	mk_reply(rep, 5, 8);
	REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_REPLY);
	CHECK_EQ(t.form, RR_XPRT_FORM_LONG);
	CHECK_EQ(t.call_seen_len, 65536);
	CHECK_MEM(t.call_seen, head_buf, 65536);
	CHECK_EQ(t.res.payload_len, 8);
	rt_finish(&t);
}

/* Write chunks: two result sinks, odd lengths, data placed, no pad bytes
 * written, actual lengths reported; the length word stays inline. */
TEST(xprt_write_chunks_filled_no_pad)
{
	static struct rt t;
	static uint8_t sink1[5000], sink2[300];
	struct rr_xprt_sink sinks[2] = {{sink1, sizeof(sink1)}, {sink2, sizeof(sink2)}};
	uint8_t call[32], rh[28], rt2[8];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp[4] = {
		{rh, sizeof(rh), false}, {item_a, 4099, true}, {item_b, 255, true},
		{rt2, sizeof(rt2), false},
	};
	struct rr_xprt_rqst_desc d = {.xid = 77, .parts = &cp, .nparts = 1,
				      .sinks = sinks, .nsinks = 2, .max_reply = 100};

	rt_init(&t);
	t.rp.max_seg_len = 1024;
	rt_start(&t);
	mk_call(call, 77, sizeof(call));
	mk_reply(rh, 77, sizeof(rh));
	fill_pat(item_a, 4099, 1);
	fill_pat(item_b, 255, 2);
	fill_pat(rt2, 8, 3);
	memset(sink1, 0xee, sizeof(sink1));
	memset(sink2, 0xee, sizeof(sink2));
	REQUIRE_EQ(rt_run(&t, &d, rp, 4), RR_XPRT_R_REPLY);
	CHECK_EQ(t.res.nsinks, 2);
	CHECK_EQ(t.res.sink_len[0], 4099);
	CHECK_EQ(t.res.sink_len[1], 255);
	CHECK_MEM(sink1, item_a, 4099);
	CHECK_EQ(sink1[4099], 0xee);   /* no XDR pad written */
	CHECK_MEM(sink2, item_b, 255);
	CHECK_EQ(sink2[255], 0xee);
	/* The reduced reply: header words and trailer only. */
	CHECK_EQ(t.res.payload_len, 36);
	CHECK_MEM(t.res.payload, rh, 28);
	CHECK_MEM(t.res.payload + 28, rt2, 8);
	/* 5 segments of the first chunk consumed (4 full + 1 partial). */
	CHECK_EQ(t.reply_len, 16 + 4 + (4 + 4 + 5 * 16) + (4 + 4 + 16) + 4 + 4 + 36);
	CHECK_EQ(t.sst.write_chunks, 2);
	CHECK_EQ(t.sst.rdma_write_bytes, 4099 + 255);
	CHECK_EQ(sim_faults, 0);
	rt_finish(&t);
}

/* An unused Write chunk is returned with a segment count of zero. */
TEST(xprt_unused_write_chunk_count_zero)
{
	static struct rt t;
	static uint8_t sink1[64], sink2[64];
	struct rr_xprt_sink sinks[2] = {{sink1, sizeof(sink1)}, {sink2, sizeof(sink2)}};
	uint8_t call[32], rh[12];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp[2] = {{rh, sizeof(rh), false}, {item_a, 10, true}};
	struct rr_xprt_rqst_desc d = {.xid = 78, .parts = &cp, .nparts = 1,
				      .sinks = sinks, .nsinks = 2, .max_reply = 100};
	struct rr_hdr *h = malloc(sizeof(*h));
	struct rr_hdr_limits lim;

	REQUIRE(h);
	rt_init(&t);
	rt_start(&t);
	mk_call(call, 78, sizeof(call));
	mk_reply(rh, 78, sizeof(rh));
	fill_pat(item_a, 10, 1);
	REQUIRE_EQ(rt_run(&t, &d, rp, 2), RR_XPRT_R_REPLY);
	rr_xprt_hdr_limits(&lim, 0, 0, false);
	REQUIRE_EQ(rr_hdr_decode(h, t.reply, t.reply_len, RR_HDR_DIR_REPLY, &lim), 0);
	CHECK_EQ(h->nwrite, 2);
	CHECK_EQ(h->write[0].nsegs, 1);
	CHECK_EQ(h->segs[h->write[0].first].length, 10);
	CHECK_EQ(h->write[1].nsegs, 0);
	CHECK_EQ(t.res.sink_len[0], 10);
	CHECK_EQ(t.res.sink_len[1], 0);
	CHECK_MEM(sink1, item_a, 10);
	free(h);
	rt_finish(&t);
}

/* A DDP-eligible result with no Write chunk stays inline, padded. */
TEST(xprt_ddp_result_without_write_chunk_inline)
{
	static struct rt t;
	uint8_t call[32], rh[12];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp[2] = {{rh, sizeof(rh), false}, {item_a, 13, true}};
	struct rr_xprt_rqst_desc d = {.xid = 79, .parts = &cp, .nparts = 1, .max_reply = 100};

	rt_init(&t);
	rt_start(&t);
	mk_call(call, 79, sizeof(call));
	mk_reply(rh, 79, sizeof(rh));
	fill_pat(item_a, 13, 4);
	REQUIRE_EQ(rt_run(&t, &d, rp, 2), RR_XPRT_R_REPLY);
	CHECK_EQ(t.res.payload_len, 12 + 16);
	CHECK_MEM(t.res.payload + 12, item_a, 13);
	CHECK_EQ(t.res.payload[12 + 13], 0);
	rt_finish(&t);
}

/* Reply chunk provisioned when the largest reply exceeds the threshold; a
 * small reply still goes inline, a large one as a Long Reply; sizes around
 * the reply threshold. */
TEST(xprt_reply_chunk_and_long_reply)
{
	static struct rt t;
	uint8_t call[32];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	/* Reply header in RDMA_MSG without Write list: 28 bytes. */
	const uint32_t sizes[] = {8, 992, 996, 1000, 5000, 60000};

	for (unsigned i = 0; i < RR_ARRAY_SIZE(sizes); i++) {
		struct rr_xprt_part rp = {item_a, sizes[i], false};
		struct rr_xprt_rqst_desc d = {.xid = 80 + i, .parts = &cp, .nparts = 1,
					      .max_reply = 65536};

		rt_init(&t);
		t.rp.max_seg_len = 8192;
		rt_start(&t);
		mk_call(call, 80 + i, sizeof(call));
		fill_pat(item_a, sizes[i], (uint8_t)i);
		mk_reply(item_a, 80 + i, 8);
		REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_REPLY);
		CHECK_EQ(t.res.payload_len, sizes[i]);
		CHECK_MEM(t.res.payload, item_a, sizes[i]);
		CHECK_EQ(t.res.long_reply, 28 + sizes[i] > 1024);
		CHECK_EQ(t.plan.proc, 28 + sizes[i] > 1024 ? RR_HDR_NOMSG : RR_HDR_MSG);
		CHECK_EQ(sim_faults, 0);
		rt_finish(&t);
	}
}

/* A grant of 0 never reaches the wire (RFC 8166 section 4.3.1: the
 * requester could never send again): given 0, the Reply builder puts 1 in
 * rdma_credit of an inline Reply, a Long Reply and an ERR_CHUNK. */
TEST(xprt_core_reply_never_grants_zero)
{
	static struct rt t;
	uint8_t call[32];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	const uint32_t sizes[] = {8, 5000, 2000};
	const uint32_t max_reply[] = {64, 65536, 64};
	const uint32_t proc[] = {RR_HDR_MSG, RR_HDR_NOMSG, RR_HDR_ERROR};

	for (unsigned i = 0; i < RR_ARRAY_SIZE(sizes); i++) {
		struct rr_xprt_part rp = {item_a, sizes[i], false};
		struct rr_xprt_rqst_desc d = {.xid = 120 + i, .parts = &cp, .nparts = 1,
					      .max_reply = max_reply[i]};

		rt_init(&t);
		t.grant = 0;
		rt_start(&t);
		mk_call(call, 120 + i, sizeof(call));
		mk_reply(item_a, 120 + i, sizes[i]);
		CHECK_EQ(rt_run(&t, &d, &rp, 1), i == 2 ? RR_XPRT_R_ERROR : RR_XPRT_R_REPLY);
		REQUIRE(t.reply_len >= 16);
		CHECK_EQ(rr_get_be32(t.reply + 12), proc[i]);
		CHECK_EQ(rr_get_be32(t.reply + 8), 1);   /* rdma_credit on the wire */
		CHECK_EQ(t.res.credit, 1);
		rt_finish(&t);
	}
}

/* No Reply chunk is provisioned when the largest reply fits inline. */
TEST(xprt_reply_chunk_threshold)
{
	static struct rt t;
	struct rr_xprt_rqst *c;
	uint8_t call[32];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_rqst_desc d = {.xid = 1, .parts = &cp, .nparts = 1};

	rt_init(&t);
	rt_start(&t);
	mk_call(call, 1, 32);
	for (uint32_t m = 995; m <= 997; m++) {
		d.max_reply = m;
		REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
		CHECK_EQ(c->reply_reg >= 0, 28 + m > 1024);
		rr_xprt_rqst_release(&t.req, c);
	}
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}

/* Nothing fits: ERR_CHUNK, and the requester completes with an error. A
 * result larger than its Write chunk is never written past the chunk. */
TEST(xprt_err_chunk_when_nothing_fits)
{
	static struct rt t;
	static uint8_t sink[100];
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	uint8_t call[32], rh[12];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp = {item_a, 2000, false};
	struct rr_xprt_part rp2[2] = {{rh, 12, false}, {item_b, 101, true}};
	struct rr_xprt_rqst_desc d = {.xid = 90, .parts = &cp, .nparts = 1, .max_reply = 64};

	rt_init(&t);
	rt_start(&t);
	mk_call(call, 90, 32);
	mk_reply(item_a, 90, 2000);
	REQUIRE_EQ(rt_run(&t, &d, &rp, 1), RR_XPRT_R_ERROR);
	CHECK_EQ(t.res.err, -EREMOTEIO);
	CHECK(t.plan.is_error);
	CHECK_EQ(t.sst.err_chunk_sent, 1);
	rt_finish(&t);

	d.xid = 91;
	d.sinks = &sk;
	d.nsinks = 1;
	mk_call(call, 91, 32);
	mk_reply(rh, 91, 12);
	memset(sink, 0xee, sizeof(sink));
	REQUIRE_EQ(rt_run(&t, &d, rp2, 2), RR_XPRT_R_ERROR);
	CHECK_EQ(t.plan.nwrites, 0);
	CHECK_EQ(sink[0], 0xee);
	CHECK_EQ(sim_faults, 0);
	rt_finish(&t);
}

/* Remote invalidation: Send With Invalidate only when both peers set R;
 * the named STag belongs to the Call; the requester marks it invalid and
 * invalidates the others locally. */
TEST(xprt_remote_invalidation_matrix)
{
	static struct rt t;
	static uint8_t sink[64];
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	uint8_t call[32], rh[12];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp[2] = {{rh, 12, false}, {item_a, 20, true}};

	for (int m = 0; m < 4; m++) {
		bool req_r = m & 1, rsp_r = m & 2;
		struct rr_xprt_rqst_desc d = {.xid = 100 + (uint32_t)m, .parts = &cp,
					      .nparts = 1, .sinks = &sk, .nsinks = 1,
					      .max_reply = 4000};

		rt_init(&t);
		t.rp.local_r = req_r;
		t.rp.peer_r = rsp_r;
		t.sp.local_r = rsp_r;
		t.sp.peer_r = req_r;
		rt_start(&t);
		mk_call(call, d.xid, 32);
		mk_reply(rh, d.xid, 12);
		REQUIRE_EQ(rt_run(&t, &d, rp, 2), RR_XPRT_R_REPLY);
		CHECK_EQ(t.inv_used, req_r && rsp_r);
		CHECK_EQ(t.rst.remote_inv, (req_r && rsp_r) ? 1 : 0);
		/* Write chunk + Reply chunk registered: 2 STags in all. */
		CHECK_EQ(t.rst.remote_inv + t.rst.local_inv, 2);
		CHECK_EQ(t.rst.bad_remote_inv, 0);
		for (unsigned i = 0; i < t.res.call->nregs; i++)
			CHECK(!t.res.call->regs[i].valid);
		rt_finish(&t);
	}
}

/* Linux svcrdma sends Send With Invalidate when only the requester set R:
 * the requester copes (the STag is marked invalid, not invalidated twice). */
TEST(xprt_linux_invalidates_without_its_r)
{
	static struct rt t;
	static uint8_t sink[64];
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	uint8_t call[32], rh[12];
	struct rr_xprt_part cp = {call, sizeof(call), false};
	struct rr_xprt_part rp[2] = {{rh, 12, false}, {item_a, 20, true}};
	struct rr_xprt_rqst_desc d = {.xid = 200, .parts = &cp, .nparts = 1,
				      .sinks = &sk, .nsinks = 1, .max_reply = 100};

	rt_init(&t);
	t.rp.local_r = true;
	t.sp.local_r = true;   /* emulate Linux: acts on the requester's R */
	t.sp.peer_r = true;
	rt_start(&t);
	mk_call(call, 200, 32);
	mk_reply(rh, 200, 12);
	REQUIRE_EQ(rt_run(&t, &d, rp, 2), RR_XPRT_R_REPLY);
	CHECK(t.inv_used);
	CHECK_EQ(t.rst.remote_inv, 1);
	CHECK_EQ(t.rst.local_inv, 0);
	rt_finish(&t);
}

/* ---- requester: malformed Replies are silently discarded ---- */

struct reqfix {
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_requester req;
	struct rr_xprt_rqst *c;
	uint8_t call[32];
	struct rr_xprt_part cp;
	uint8_t sink[64];
	struct rr_xprt_sink sk;
	uint8_t send[2048];
};

static void reqfix_init(struct reqfix *f, uint32_t max_reply)
{
	struct rr_xprt_rqst_desc d;

	rr_xprt_req_fini(&f->req);   /* a previous use's recycled buffers */
	memset(f, 0, sizeof(*f));
	rr_test_env_init(&f->te, 3);
	rr_xprt_params_default(&f->p);
	f->p.inline_ddp = false;
	rr_xprt_req_init(&f->req, &f->te.env, &f->p, &f->st);
	sim_reset();
	mk_call(f->call, 0x55, 32);
	f->cp = (struct rr_xprt_part){f->call, 32, false};
	f->sk = (struct rr_xprt_sink){f->sink, 64};
	d = (struct rr_xprt_rqst_desc){.xid = 0x55, .parts = &f->cp, .nparts = 1,
				       .sinks = &f->sk, .nsinks = 1,
				       .max_reply = max_reply};
	REQUIRE_EQ(rr_xprt_rqst_prepare(&f->req, &d, &f->c), 0);
	for (unsigned i = 0; i < f->c->nregs; i++)
		sim_register(&f->c->regs[i]);
	REQUIRE(rr_xprt_rqst_marshal(&f->req, f->c, 8, f->send, sizeof(f->send)) > 0);
}

/* Builds a reply header + payload into @buf. */
static size_t mk_reply_msg(uint8_t *buf, struct rr_hdr *h, uint32_t rpc_xid,
			   uint32_t payload)
{
	int n = rr_th_hdr_raw(h, buf, 4096);

	if (n < 0)
		return 0;
	if (payload >= 8) {
		mk_reply(buf + n, rpc_xid, payload);
	}
	return (size_t)n + payload;
}

TEST(xprt_requester_discards_malformed)
{
	static struct reqfix f;
	static struct rr_hdr h;
	struct rr_xprt_reply res;
	uint8_t buf[4096];
	size_t n;

	reqfix_init(&f, 100);
	/* Template: a valid RDMA_MSG reply with the Write chunk returned. */
#define BASE()                                                                 \
	do {                                                                   \
		struct rr_hdr_seg w0 = {f.c->regs[0].stag, 10, f.c->regs[0].addr}; \
		rr_hdr_init(&h, 0x55, 10, RR_HDR_MSG);                          \
		REQUIRE_EQ(rr_hdr_add_write(&h, &w0, 1), 0);                    \
	} while (0)
#define W0 h.segs[h.write[0].first]

	/* Truncated headers of every length below a complete one. */
	BASE();
	n = mk_reply_msg(buf, &h, 0x55, 16);
	for (size_t l = 0; l < n - 16; l++) {
		rr_xprt_req_recv(&f.req, buf, l, false, 0, &res);
		CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	}
	/* Wrong version. */
	BASE(); h.vers = 2; n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* Unknown XID. */
	BASE(); h.xid = 0x56; n = mk_reply_msg(buf, &h, 0x56, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	CHECK_EQ(f.st.bad_xids, 1);
	/* rdma_xid differs from the RPC XID. */
	BASE(); n = mk_reply_msg(buf, &h, 0x99, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* An RPC Call, not a Reply. */
	BASE(); n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_put_be32(buf + n - 12, 0);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* A Read list in a Reply. */
	BASE(); REQUIRE_EQ(rr_hdr_add_read(&h, 4, &(struct rr_hdr_seg){0, 4, 0}), 0);
	n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* Write chunk longer than provisioned, foreign handle, foreign offset,
	 * too many chunks. */
	BASE(); W0.length = 65; n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	BASE(); W0.handle ^= 1; n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	BASE(); W0.offset += 4; n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	BASE(); REQUIRE_EQ(rr_hdr_add_write(&h, NULL, 0), 0); n = mk_reply_msg(buf, &h, 0x55, 16);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* RDMA_NOMSG without a provisioned Reply chunk. */
	BASE(); h.proc = RR_HDR_NOMSG;
	REQUIRE_EQ(rr_hdr_add_reply(&h, &(struct rr_hdr_seg){1, 8, 0}, 1), 0);
	n = mk_reply_msg(buf, &h, 0x55, 0);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* RDMA_DONE, RDMA_MSGP, unknown procedure, bad error code. */
	BASE(); h.proc = RR_HDR_DONE; n = mk_reply_msg(buf, &h, 0x55, 0);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	rr_put_be32(buf, 0x55); rr_put_be32(buf + 4, 1); rr_put_be32(buf + 8, 1);
	rr_put_be32(buf + 12, 2);
	memset(buf + 16, 0, 12);
	rr_xprt_req_recv(&f.req, buf, 28, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	rr_put_be32(buf + 12, 9);
	rr_xprt_req_recv(&f.req, buf, 28, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	rr_put_be32(buf + 12, RR_HDR_ERROR); rr_put_be32(buf + 16, 3);
	rr_xprt_req_recv(&f.req, buf, 20, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	rr_put_be32(buf + 16, RR_HDR_ERR_VERS);
	rr_xprt_req_recv(&f.req, buf, 24, false, 0, &res);   /* truncated */
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	/* The call is still waiting; a valid Reply completes it. */
	CHECK_EQ(f.req.outstanding, 1);
	BASE(); n = mk_reply_msg(buf, &h, 0x55, 16);
	memcpy(f.sink, "0123456789", 10);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_REPLY);
	CHECK_EQ(res.sink_len[0], 10);
	CHECK_EQ(res.credit, 10);
	CHECK_EQ(f.req.outstanding, 0);
	/* A duplicate Reply is now an unknown XID. */
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	CHECK_EQ(res.kind, RR_XPRT_R_DROP);
	CHECK_EQ(f.st.bad_xids, 2);
	rr_xprt_rqst_release(&f.req, f.c);
	rr_xprt_req_fini(&f.req);
	CHECK_EQ(f.te.live, 0);
#undef BASE
#undef W0
}

/* A Reply that returns fewer Write chunks than the Call provisioned (here
 * none of one): the sinks it did not fill read as 0 bytes, not placed,
 * whatever the caller's result struct held before (rr_xprt_req_recv
 * clears the per-sink fields only for the Call's sinks). */
TEST(xprt_reply_unreturned_sinks_read_zero)
{
	static struct reqfix f;
	static struct rr_hdr h;
	struct rr_xprt_reply res;
	uint8_t buf[4096];
	size_t n;

	reqfix_init(&f, 100);
	REQUIRE_EQ(f.c->desc.nsinks, 1u);
	REQUIRE(!f.c->results_inline);   /* a Write chunk was provisioned */
	rr_hdr_init(&h, 0x55, 10, RR_HDR_MSG);   /* empty Write list */
	n = mk_reply_msg(buf, &h, 0x55, 16);
	memset(&res, 0xff, sizeof(res));
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_REPLY);
	CHECK_EQ(res.nsinks, 1u);
	CHECK_EQ(res.sink_len[0], 0u);
	CHECK(!res.sink_placed[0]);
	CHECK(res.inv_other == NULL);
	CHECK_EQ(res.payload_len, 16u);
	rr_xprt_rqst_release(&f.req, f.c);
	rr_xprt_req_fini(&f.req);
	CHECK_EQ(f.te.live, 0);
}

TEST(xprt_requester_rdma_error_completes)
{
	static struct reqfix f;
	struct rr_xprt_reply res;
	uint8_t buf[64];
	int n;

	reqfix_init(&f, 100);
	n = rr_hdr_encode_error_buf(0x55, 1, 0, RR_HDR_ERR_VERS, buf, sizeof(buf));
	REQUIRE_EQ(n, 28);
	rr_xprt_req_recv(&f.req, buf, (size_t)n, false, 0, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_ERROR);
	CHECK_EQ(res.err, -EPROTONOSUPPORT);
	CHECK_EQ(res.credit, 1);   /* a grant of 0 counts as 1 */
	rr_xprt_rqst_release(&f.req, f.c);

	reqfix_init(&f, 100);
	n = rr_hdr_encode_error_buf(0x55, 1, 5, RR_HDR_ERR_CHUNK, buf, sizeof(buf));
	REQUIRE_EQ(n, 20);
	rr_xprt_req_recv(&f.req, buf, (size_t)n, false, 0, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_ERROR);
	CHECK_EQ(res.err, -EREMOTEIO);
	CHECK_EQ(res.credit, 5);
	rr_xprt_rqst_release(&f.req, f.c);
	rr_xprt_req_fini(&f.req);
	CHECK_EQ(f.te.live, 0);
}

/* Linux quirks a requester must accept: a Reply chunk used for a tiny reply,
 * unconsumed Reply chunk segments returned with length 0. */
TEST(xprt_linux_reply_chunk_quirks)
{
	static struct reqfix f;
	static struct rr_hdr h;
	struct rr_xprt_reply res;
	uint8_t buf[4096];
	size_t n;
	int rr;

	reqfix_init(&f, 100000);
	f.p.max_seg_len = 1u << 20;
	rr = f.c->reply_reg;
	REQUIRE(rr >= 0);
	rr_hdr_init(&h, 0x55, 64, RR_HDR_NOMSG);
	REQUIRE_EQ(rr_hdr_add_write(&h, NULL, 0), 0);
	REQUIRE_EQ(rr_hdr_add_reply(&h, &(struct rr_hdr_seg){f.c->regs[rr].stag, 24,
							       f.c->regs[rr].addr}, 1), 0);
	n = mk_reply_msg(buf, &h, 0x55, 0);
	mk_reply(f.c->reply_buf, 0x55, 24);
	rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_REPLY);
	CHECK(res.long_reply);
	CHECK_EQ(res.payload_len, 24);
	CHECK_EQ(res.sink_len[0], 0);
	CHECK_EQ(res.credit, 64);
	rr_xprt_rqst_release(&f.req, f.c);

	/* Several segments, the unused ones echoed with length 0. */
	reqfix_init(&f, 100000);
	f.p.max_seg_len = 1u << 20;
	(void)f;
	rr_xprt_rqst_release(&f.req, f.c);
	{
		struct rr_xprt_rqst_desc d;
		struct rr_xprt_rqst *c;
		struct rr_xprt_params p;

		rr_xprt_params_default(&p);
		p.inline_ddp = false;
		p.max_seg_len = 8192;
		rr_xprt_req_set_params(&f.req, &p);
		d = (struct rr_xprt_rqst_desc){.xid = 0x56, .parts = &f.cp, .nparts = 1,
					       .max_reply = 30000};
		mk_call(f.call, 0x56, 32);
		REQUIRE_EQ(rr_xprt_rqst_prepare(&f.req, &d, &c), 0);
		for (unsigned i = 0; i < c->nregs; i++)
			sim_register(&c->regs[i]);
		REQUIRE(rr_xprt_rqst_marshal(&f.req, c, 8, f.send, sizeof(f.send)) > 0);
		rr_hdr_init(&h, 0x56, 64, RR_HDR_NOMSG);
		REQUIRE_EQ(rr_hdr_add_reply(&h, NULL, 0), 0);
		for (unsigned i = 0; i < 4; i++) {
			struct rr_hdr_seg g = {c->regs[c->reply_reg].stag,
					       i == 0 ? 8192 : i == 1 ? 100 : 0,
					       c->regs[c->reply_reg].addr + 8192u * i};

			REQUIRE_EQ(rr_hdr_add_seg(&h, &h.reply, &g), 0);
		}
		n = mk_reply_msg(buf, &h, 0x56, 0);
		mk_reply(c->reply_buf, 0x56, 8292);
		rr_xprt_req_recv(&f.req, buf, n, false, 0, &res);
		REQUIRE_EQ(res.kind, RR_XPRT_R_REPLY);
		CHECK_EQ(res.payload_len, 8292);
		/* A hole (partial segment followed by data) is malformed. */
		rr_xprt_rqst_release(&f.req, c);
	}
	rr_xprt_req_fini(&f.req);
	CHECK_EQ(f.te.live, 0);
}

/* ---- responder: the RFC-mandated answer for each malformed Call ---- */

static enum rr_xprt_rsp_action rsp_try(struct rr_xprt_responder *s, const uint8_t *buf,
				       size_t len, uint8_t *err, size_t *elen)
{
	struct rr_xprt_rcall *rc = NULL;
	enum rr_xprt_rsp_action a = rr_xprt_rsp_recv(s, buf, len, 16, err, elen, &rc);

	if (a == RR_XPRT_A_READ) {
		/* Reads are not performed: zeros stand in for the data. */
		for (uint32_t i = 0; i < rc->nreads; i++)
			memset(rc->buf + rc->reads[i].local_off, 0, rc->reads[i].len);
		a = rr_xprt_rsp_assemble(s, rc, 16, err, elen);
	}
	rr_xprt_rcall_release(s, rc);
	return a;
}

static size_t mk_call_msg(uint8_t *buf, struct rr_hdr *h, uint32_t rpc_xid,
			  uint32_t payload)
{
	int n = rr_th_hdr_raw(h, buf, 4096);

	REQUIRE(n > 0);
	if (payload >= 8)
		mk_call(buf + n, rpc_xid, payload);
	return (size_t)n + payload;
}

/* Chunks of zero-filled segments for the malformed Calls below: a Read
 * segment of @len bytes at @pos, a Write chunk or the Reply chunk of @n
 * segments. */
static const struct rr_hdr_seg zsegs[RR_XPRT_MAX_SEGS];
#define RD(pos, len) REQUIRE_EQ(rr_hdr_add_read(&h, (pos), &(struct rr_hdr_seg){0, (len), 0}), 0)
#define WR(n) REQUIRE_EQ(rr_hdr_add_write(&h, zsegs, (n)), 0)
#define RP(n) REQUIRE_EQ(rr_hdr_add_reply(&h, zsegs, (n)), 0)

TEST(xprt_responder_error_answers)
{
	static struct rr_hdr h;
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_responder s;
	uint8_t buf[4096], err[28];
	size_t n, elen;

	rr_test_env_init(&te, 5);
	rr_xprt_params_default(&p);
	p.inline_ddp = false;
	p.max_call = 100000;
	memset(&st, 0, sizeof(st));
	rr_xprt_rsp_init(&s, &te.env, &p, &st);
#define BASE() rr_hdr_init(&h, 0x77, 4, RR_HDR_MSG)
#define EXPECT_ERR(code) EXPECT_ERR_V(code, 1)
#define EXPECT_ERR_V(code, vers)                                              \
	do {                                                                  \
		CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_ERROR);   \
		CHECK_EQ(rr_get_be32(err), 0x77);                             \
		CHECK_EQ(rr_get_be32(err + 4), (vers));                       \
		CHECK_EQ(rr_get_be32(err + 8), 16);                           \
		CHECK_EQ(rr_get_be32(err + 12), RR_HDR_ERROR);               \
		CHECK_EQ(rr_get_be32(err + 16), (code));                      \
		CHECK_EQ(elen, (code) == RR_HDR_ERR_VERS ? 28u : 20u);       \
	} while (0)

	/* A good Call is delivered. */
	BASE(); n = mk_call_msg(buf, &h, 0x77, 40);
	CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_DELIVER);
	/* Version 2 -> ERR_VERS 1..1 echoing rdma_vers 2 (RFC 8166 5.5), even
	 * with a body we cannot parse. */
	BASE(); h.vers = 2; n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR_V(RR_HDR_ERR_VERS, 2);
	CHECK_EQ(rr_get_be32(err + 20), 1);
	CHECK_EQ(rr_get_be32(err + 24), 1);
	n = 12;
	EXPECT_ERR_V(RR_HDR_ERR_VERS, 2);
	/* RDMA_MSGP and unknown procedures -> ERR_CHUNK. */
	BASE(); h.proc = RR_HDR_MSG; n = mk_call_msg(buf, &h, 0x77, 40);
	rr_put_be32(buf + 12, RR_HDR_MSGP);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	rr_put_be32(buf + 12, 5);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	rr_put_be32(buf + 12, 0xffffffff);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* Chunk lists truncated at every length, or with a bad discriminator. */
	BASE(); RD(8, 4); WR(2); RP(1);
	n = mk_call_msg(buf, &h, 0x77, 0);
	for (size_t l = 16; l < n; l += 4) {
		size_t save = n;

		n = l;
		EXPECT_ERR(RR_HDR_ERR_CHUNK);
		n = save;
	}
	rr_put_be32(buf + 16, 2);   /* read list discriminator 2 */
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* A segment count larger than the message. */
	BASE(); WR(1); n = mk_call_msg(buf, &h, 0x77, 0);
	rr_put_be32(buf + 24, 0x40000000);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* Unaligned position. */
	BASE(); RD(6, 4);
	n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* RDMA_NOMSG without a position-zero chunk (none at all, or only at a
	 * non-zero position). */
	BASE(); h.proc = RR_HDR_NOMSG; n = mk_call_msg(buf, &h, 0x77, 0);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	BASE(); h.proc = RR_HDR_NOMSG; RD(8, 8); n = mk_call_msg(buf, &h, 0x77, 0);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* RDMA_MSG with a position-zero chunk. */
	BASE(); RD(0, 8); n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* Position beyond the message; overlapping chunks. */
	BASE(); RD(44, 8);
	n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	BASE(); RD(8, 8); RD(12, 8);
	n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* A chunk beyond the responder's largest Call. */
	BASE(); RD(8, 0xfffffff0);
	n = mk_call_msg(buf, &h, 0x77, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* rdma_xid differs from the RPC XID (inline and after a Long Call). */
	BASE(); n = mk_call_msg(buf, &h, 0x78, 40);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	BASE(); h.proc = RR_HDR_NOMSG; RD(0, 40);
	n = mk_call_msg(buf, &h, 0x77, 0);
	EXPECT_ERR(RR_HDR_ERR_CHUNK);   /* zeros read: XID 0 != 0x77 */
	/* Too many segments for this implementation -> ERR_CHUNK. */
	BASE(); WR(RR_XPRT_MAX_SEGS);
	n = mk_call_msg(buf, &h, 0x77, 0);
	rr_put_be32(buf + 24, RR_XPRT_MAX_SEGS + 1);
	memset(buf + n, 0, 16);
	rr_put_be32(buf + n + 16, 0);
	n += 16;
	EXPECT_ERR(RR_HDR_ERR_CHUNK);
	/* Silently dropped: RDMA_DONE, RDMA_ERROR, too short to answer, a
	 * Reply message (backchannel). */
	BASE(); h.proc = RR_HDR_DONE; n = mk_call_msg(buf, &h, 0x77, 0);
	CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_DROP);
	n = (size_t)rr_hdr_encode_error_buf(0x77, 1, 1, RR_HDR_ERR_CHUNK, buf, sizeof(buf));
	CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_DROP);
	for (n = 0; n < 4; n++) {
		BASE(); (void)rr_th_hdr_raw(&h, buf, sizeof(buf));
		CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_DROP);
	}
	/* With an XID but truncated before the end of the fixed header: an XDR
	 * error, answered with ERR_CHUNK (the codec's verdict). */
	for (n = 4; n < 16; n++) {
		BASE(); (void)rr_th_hdr_raw(&h, buf, sizeof(buf));
		EXPECT_ERR(RR_HDR_ERR_CHUNK);
	}
	BASE(); n = mk_call_msg(buf, &h, 0x77, 40);
	rr_put_be32(buf + 28 + 4, 1);
	CHECK_EQ(rsp_try(&s, buf, n, err, &elen), RR_XPRT_A_DROP);
	CHECK_EQ(te.live, 0);
#undef BASE
#undef EXPECT_ERR
}
#undef RD
#undef WR
#undef RP

/* Read list entries in any order are grouped by position. */
TEST(xprt_responder_unsorted_read_list)
{
	static struct rr_hdr h;
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_responder s;
	struct rr_xprt_rcall *rc;
	uint8_t buf[4096], err[28];
	size_t n, elen;

	rr_test_env_init(&te, 5);
	rr_xprt_params_default(&p);
	p.inline_ddp = false;
	rr_xprt_rsp_init(&s, &te.env, &p, NULL);
	rr_hdr_init(&h, 1, 1, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_read(&h, 16, &(struct rr_hdr_seg){0xa, 5, 0x1000}), 0);
	REQUIRE_EQ(rr_hdr_add_read(&h, 8, &(struct rr_hdr_seg){0xb, 3, 0x2000}), 0);
	REQUIRE_EQ(rr_hdr_add_read(&h, 16, &(struct rr_hdr_seg){0xc, 2, 0x3000}), 0);
	n = mk_call_msg(buf, &h, 1, 16);
	/* The header codec rejects decreasing positions (docs/header-codec.md):
	 * ERR_CHUNK. */
	CHECK_EQ(rr_xprt_rsp_recv(&s, buf, n, 4, err, &elen, &rc), RR_XPRT_A_ERROR);
	CHECK(rc == NULL);
	/* Sorted, with the two segments of position 16 adjacent: one chunk of
	 * two segments, each Read placed at its final offset. */
	rr_hdr_init(&h, 1, 1, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_read(&h, 8, &(struct rr_hdr_seg){0xb, 3, 0x2000}), 0);
	REQUIRE_EQ(rr_hdr_add_read(&h, 16, &(struct rr_hdr_seg){0xa, 5, 0x1000}), 0);
	REQUIRE_EQ(rr_hdr_add_read(&h, 16, &(struct rr_hdr_seg){0xc, 2, 0x3000}), 0);
	REQUIRE_EQ(h.nread, 2);
	n = mk_call_msg(buf, &h, 1, 16);
	REQUIRE_EQ(rr_xprt_rsp_recv(&s, buf, n, 4, err, &elen, &rc), RR_XPRT_A_READ);
	REQUIRE_EQ(rc->nreads, 3);
	CHECK_EQ(rc->reads[0].stag, 0xb);
	CHECK_EQ(rc->reads[0].local_off, 8);
	CHECK_EQ(rc->reads[1].stag, 0xa);
	CHECK_EQ(rc->reads[1].local_off, 16);   /* position in the full stream */
	CHECK_EQ(rc->reads[2].stag, 0xc);
	CHECK_EQ(rc->reads[2].local_off, 16 + 5);
	CHECK_EQ(rc->msg_len, 16 + 4 + 8);
	rr_xprt_rcall_release(&s, rc);
	CHECK_EQ(te.live, 0);
}

/* Allocation failures leave no leak and no half-built call. */
TEST(xprt_alloc_failures)
{
	static struct rt t;
	struct rr_xprt_rqst *c;
	struct rr_xprt_part cp = {head_buf, 4000, false};
	struct rr_xprt_rqst_desc d = {.xid = 3, .parts = &cp, .nparts = 1,
				      .max_reply = 10000};

	mk_call(head_buf, 3, 4000);
	for (unsigned long k = 1; k <= 3; k++) {
		rt_init(&t);
		t.te.fail_at = k;
		rt_start(&t);
		CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -ENOMEM);
		rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
	}
}

/* The responder out of memory still answers a Call: ERR_CHUNK for its XID
 * (docs/security.md: never a silent drop), both when the receive context
 * and when the rebuilt-Call buffer cannot be allocated. */
TEST(xprt_responder_alloc_failure_answers)
{
	static struct rt t;
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc;
	struct rr_xprt_part cp = {head_buf, 200, false};
	struct rr_xprt_rqst_desc d = {.xid = 0x77, .parts = &cp, .nparts = 1,
				      .max_reply = 100};
	uint8_t err[28];
	size_t elen;
	int n;

	mk_call(head_buf, 0x77, 200);
	for (unsigned long k = 1; k <= 2; k++) {
		rt_init(&t);
		rt_start(&t);
		REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
		n = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
		REQUIRE(n > 0);
		t.te.fail_at = t.te.allocs + k;
		CHECK_EQ(rr_xprt_rsp_recv(&t.rsp, t.send, (size_t)n, 4, err, &elen, &rc),
			 RR_XPRT_A_ERROR);
		CHECK(rc == NULL);
		CHECK_EQ(elen, 20);
		CHECK_EQ(rr_get_be32(err), 0x77);
		CHECK_EQ(rr_get_be32(err + 12), RR_HDR_ERROR);
		CHECK_EQ(rr_get_be32(err + 16), RR_HDR_ERR_CHUNK);
		CHECK_EQ(t.sst.calls_refused, 1);
		rr_xprt_rqst_release(&t.req, c);
		rr_xprt_req_fini(&t.req);
		rr_xprt_rsp_fini(&t.rsp);
		CHECK_EQ(t.te.live, 0);
	}
}

TEST(xprt_bad_descriptions)
{
	static struct rt t;
	struct rr_xprt_rqst *c;
	uint8_t b[64];
	struct rr_xprt_part cp[2] = {{b, 6, false}, {item_a, 8, true}};
	struct rr_xprt_rqst_desc d = {.xid = 3, .parts = cp, .nparts = 2};
	struct rr_xprt_sink sk = {NULL, 0};

	rt_init(&t);
	rt_start(&t);
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -EINVAL);   /* unaligned item */
	cp[0].len = 8;
	cp[1].len = 3;
	d.nparts = 2;
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);      /* 8 + 4 = 12 */
	rr_xprt_rqst_release(&t.req, c);
	d.sinks = &sk;
	d.nsinks = 1;
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -EINVAL);   /* empty sink */
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}

/* The header model (proto/hdr.h) bounds the Calls a requester sends as it
 * bounds the headers a responder accepts: a Call whose header needs more
 * than RR_HDR_MAX_SEGS segments or RR_HDR_MAX_READ_CHUNKS Read chunks is
 * -EMSGSIZE at prepare (not a failure at marshal after registration); at
 * the limit it is sent, and the responder core takes it. */
TEST(xprt_call_within_header_model)
{
	static struct rt t;
	static uint8_t sinkmem[9 * 1024], items[16 * 4];
	static struct rr_hdr h;
	struct rr_xprt_sink sk[9];
	struct rr_xprt_part parts[17];
	struct rr_xprt_rqst_desc d = {.xid = 5, .parts = parts, .nparts = 1, .sinks = sk,
				      .max_reply = 64};
	struct rr_xprt_rqst *c;
	int n;

	rt_init(&t);
	t.rp.max_seg_len = 64;   /* 16 segments per 1 KiB sink */
	t.rp.call_inline = t.rp.reply_inline = 8192;
	t.sp.call_inline = t.sp.reply_inline = 8192;
	rt_start(&t);
	mk_call(head_buf, 5, 1000);
	parts[0] = (struct rr_xprt_part){head_buf, 32, false};
	for (unsigned i = 0; i < 9; i++)
		sk[i] = (struct rr_xprt_sink){sinkmem + 1024 * i, 1024};
	/* 8 Write chunks of 16 segments: 128, the capacity */
	d.nsinks = 8;
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
	for (unsigned i = 0; i < c->nregs; i++)
		sim_register(&c->regs[i]);
	n = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	REQUIRE(n > 0);
	REQUIRE_EQ(rr_th_hdr_call(&h, t.send, n, 8192), 0);
	CHECK_EQ(h.nwrite, 8);
	CHECK_EQ(h.nsegs, RR_HDR_MAX_SEGS);
	rr_xprt_rqst_release(&t.req, c);
	d.nsinks = 9;            /* 144 */
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -EMSGSIZE);

	/* A Long Call (1000 bytes reduced, call threshold 1024): the
	 * Position-zero chunk and one Read chunk per DDP argument; 15
	 * arguments make 16 Read chunks, 16 would make 17. */
	rr_xprt_req_fini(&t.req);
	t.rp.max_seg_len = 1u << 20;
	t.rp.call_inline = 1024;
	rr_xprt_req_init(&t.req, &t.te.env, &t.rp, &t.rst);
	parts[0].len = 1000;
	for (unsigned i = 0; i < 16; i++)
		parts[1 + i] = (struct rr_xprt_part){items + 4 * i, 4, true};
	d.nsinks = 0;
	d.nparts = 16;
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
	CHECK_EQ(c->form, RR_XPRT_FORM_LONG);
	for (unsigned i = 0; i < c->nregs; i++)
		sim_register(&c->regs[i]);
	n = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	REQUIRE(n > 0);
	REQUIRE_EQ(rr_th_hdr_call(&h, t.send, n, 1024), 0);
	CHECK_EQ(h.nread, RR_HDR_MAX_READ_CHUNKS);
	rr_xprt_rqst_release(&t.req, c);
	d.nparts = 17;
	CHECK_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), -EMSGSIZE);
	rr_xprt_req_fini(&t.req);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK_EQ(t.te.live, 0);
}

/* The counters are defined once (RPCRDMA_XPRT_STATS): every one of the
 * transport's is exported under its name and printed in its group; the
 * difference of two snapshots subtracts every counter. */
TEST(xprt_stats_print)
{
	struct rr_xprt_stats s;
	struct rpcrdma_xprt_stats o, z, d;
	char out[8192];
	FILE *f = fmemopen(out, sizeof(out), "w");
	const char *head = "xprt: rdma connections 0\n\txprt: sends 1 recvs 2 ";
	uint64_t v = 1;

	REQUIRE(f);
	memset(&s, 0, sizeof(s));
#define SET_(group, name, what) s.name = v++;
	RPCRDMA_XPRT_STATS(SET_)
#undef SET_
	memset(&o, 0, sizeof(o));
	rr_xprt_stats_export(&s, &o);
	v = 1;
#define CHK_(group, name, what) CHECK_EQ(o.name, v++);
	RPCRDMA_XPRT_STATS(CHK_)
#undef CHK_
	snprintf(o.transport, sizeof(o.transport), "rdma");
	CHECK_EQ(rpcrdma_xprt_stats_print(&o, f), 0);
	fclose(f);
	CHECK(strncmp(out, head, strlen(head)) == 0);
	CHECK(strstr(out, "\tinv: remote_inv ") != NULL);
	CHECK(strstr(out, "\trrep: rrep_exposed ") != NULL);
	CHECK(strstr(out, " handshakes_dropped ") != NULL);
	CHECK(strstr(out, "\tfaults: cq_overruns ") != NULL);
	CHECK(strstr(out, " device_fatal ") != NULL);
	memset(&z, 0, sizeof(z));
	rpcrdma_xprt_stats_diff(&o, &o, &d);
	z.connections = o.connections;
	memcpy(z.transport, o.transport, sizeof(z.transport));
	CHECK(memcmp(&d, &z, sizeof(d)) == 0);
}

/* A peer that names another Call's STag in Send With Invalidate: the RNIC
 * invalidated it; the core records it on that Call (so it is not invalidated
 * twice) and counts the peer error. */
TEST(xprt_foreign_remote_invalidation)
{
	static struct rt t;
	static uint8_t sa[64], sb[64];
	struct rr_xprt_sink ska = {sa, sizeof(sa)}, skb = {sb, sizeof(sb)};
	uint8_t ca[32], cb[32], buf[256];
	struct rr_xprt_part pa = {ca, 32, false}, pb = {cb, 32, false};
	struct rr_xprt_rqst_desc da = {0xa0, &pa, 1, &ska, 1, 100};
	struct rr_xprt_rqst_desc db = {0xb0, &pb, 1, &skb, 1, 100};
	struct rr_xprt_rqst *a, *b;
	struct rr_xprt_reply res;
	static struct rr_hdr h;
	int n;

	rt_init(&t);
	rt_start(&t);
	mk_call(ca, 0xa0, 32);
	mk_call(cb, 0xb0, 32);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &da, &a), 0);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &db, &b), 0);
	sim_register(&a->regs[0]);
	sim_register(&b->regs[0]);
	REQUIRE(rr_xprt_rqst_marshal(&t.req, a, 4, t.send, sizeof(t.send)) > 0);
	REQUIRE(rr_xprt_rqst_marshal(&t.req, b, 4, t.send, sizeof(t.send)) > 0);
	rr_hdr_init(&h, 0xa0, 4, RR_HDR_MSG);
	REQUIRE_EQ(rr_hdr_add_write(&h, NULL, 0), 0);
	n = rr_hdr_encode_buf(&h, buf, sizeof(buf));
	REQUIRE(n > 0);
	mk_reply(buf + n, 0xa0, 16);
	rr_xprt_req_recv(&t.req, buf, (size_t)n + 16, true, b->regs[0].stag, &res);
	REQUIRE_EQ(res.kind, RR_XPRT_R_REPLY);
	CHECK(res.call == a);
	CHECK(res.inv_other == b);
	CHECK(a->regs[0].valid);         /* still ours to invalidate */
	CHECK(!b->regs[0].valid);        /* the peer did it */
	CHECK_EQ(t.rst.bad_remote_inv, 1);
	CHECK_EQ(t.rst.remote_inv, 0);
	rr_xprt_rqst_release(&t.req, a);
	rr_xprt_rqst_release(&t.req, b);
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}

/* The XID table's lone call kept apart from its chains (r->solo, issue 16
 * part DC), proven equal to the chains alone: 40,000 random steps of
 * marshal (a new Call of one of 6 XIDs, three of them in one chain, so
 * that a Call of the same XID as an outstanding one is common), forget
 * (any Call made, outstanding or not) and look-up of every XID, each
 * checked against a model of the chains alone: the Call found for an XID
 * is the newest outstanding one of it (a chain's head first), none when
 * none is; the outstanding count right. A solo Call that stayed apart
 * when a newer one of its XID came would be found instead of the newer. */
TEST(xprt_xid_table_solo_as_chains)
{
	enum { N = 12, NX = 6 };
	static const uint32_t xids[NX] = {0x100u, 0x141u, 0x182u, 0x2345u, 0x2346u, 0x9999u};
	static struct rr_test_env te;
	static struct rr_xprt_requester req;
	static struct rr_xprt_rqst *c[N];
	static uint8_t call[N][32], send[256];
	static struct rr_xprt_part cp[N];
	static bool in[N];
	static unsigned seq[N];
	struct rr_xprt_params p;
	unsigned made = 0, live = 0, dup_found = 0, solo_found = 0, chain_found = 0;
	uint32_t seed = 777;

	memset(&te, 0, sizeof(te));
	rr_test_env_init(&te, 3);
	rr_xprt_params_default(&p);
	rr_xprt_req_init(&req, &te.env, &p, NULL);
	for (unsigned step = 0; step < 40000; step++) {
		unsigned r, k;

		seed = seed * 1103515245u + 12345u;
		r = (seed >> 8) % 16;
		k = (seed >> 12) % N;
		if (r < 6 && !c[k]) {
			/* a new Call of one of the XIDs, the newest */
			uint32_t xid = xids[(seed >> 20) % NX];
			struct rr_xprt_rqst_desc d = {.xid = xid, .parts = &cp[k], .nparts = 1,
						      .max_reply = 100};

			mk_call(call[k], xid, 32);
			cp[k] = (struct rr_xprt_part){call[k], 32, false};
			REQUIRE_EQ(rr_xprt_rqst_prepare(&req, &d, &c[k]), 0);
			REQUIRE(rr_xprt_rqst_marshal(&req, c[k], 8, send, sizeof(send)) > 0);
			in[k] = true;
			seq[k] = ++made;
			live++;
		} else if (r < 12 && c[k]) {
			/* forgotten (again, at times: a no-op), then released */
			rr_xprt_rqst_forget(&req, c[k]);
			if (in[k])
				live--;
			in[k] = false;
			if (r >= 10) {
				rr_xprt_rqst_release(&req, c[k]);
				c[k] = NULL;
			}
		}
		CHECK_EQ(req.outstanding, live);
		for (unsigned x = 0; x < NX; x++) {
			struct rr_xprt_rqst *want = NULL, *got = rr_xprt_req_find(&req, xids[x]);
			unsigned n = 0, best = 0;

			for (unsigned i = 0; i < N; i++)
				if (in[i] && c[i]->xid == xids[x]) {
					n++;
					if (seq[i] > best) {
						best = seq[i];
						want = c[i];
					}
				}
			CHECK(got == want);
			if (n > 1)
				dup_found++;
			if (got && got == req.solo)
				solo_found++;
			else if (got)
				chain_found++;
		}
	}
	/* both kinds of look-up, and XIDs outstanding twice, were seen */
	CHECK(dup_found > 1000);
	CHECK(solo_found > 1000);
	CHECK(chain_found > 1000);
	CHECK(made > 1000);
	for (unsigned i = 0; i < N; i++)
		if (c[i])
			rr_xprt_rqst_release(&req, c[i]);
	rr_xprt_req_fini(&req);
	CHECK_EQ(te.live, 0);
}

/* The XID table: 256 Calls in its 64 chains (so at least 192 share a
 * chain with another, whatever the hash), put in by marshal and taken out
 * by rr_xprt_rqst_forget in a scrambled order, every Call's look-up
 * checked against a model after every step: each outstanding Call found
 * by its XID, each forgotten one not, a second forget a no-op, the
 * outstanding count right. An unlink that left a chain broken (a stale
 * link of the Call before or after it) loses or keeps the wrong Calls. */
TEST(xprt_xid_table_forget_any_order)
{
	enum { N = 256 };
	static struct rr_test_env te;
	static struct rr_xprt_requester req;
	static struct rr_xprt_rqst *c[N];
	static uint8_t call[N][32], send[256];
	static struct rr_xprt_part cp[N];
	struct rr_xprt_params p;
	bool in[N];
	uint32_t seed = 12345;

	for (unsigned round = 0; round < 12; round++) {
		unsigned left = N;

		memset(&te, 0, sizeof(te));
		rr_test_env_init(&te, 3);
		rr_xprt_params_default(&p);
		rr_xprt_req_init(&req, &te.env, &p, NULL);
		for (unsigned i = 0; i < N; i++) {
			/* rounds alternate: consecutive XIDs, 64 apart, 4096 apart */
			uint32_t xid = round % 3 == 0   ? 0x9000u + i
				       : round % 3 == 1 ? 0x1000u + 64u * i
							: 0x7000u + 4096u * i;
			struct rr_xprt_rqst_desc d = {.xid = xid, .parts = &cp[i], .nparts = 1,
						      .max_reply = 100};

			mk_call(call[i], xid, 32);
			cp[i] = (struct rr_xprt_part){call[i], 32, false};
			REQUIRE_EQ(rr_xprt_rqst_prepare(&req, &d, &c[i]), 0);
			REQUIRE(rr_xprt_rqst_marshal(&req, c[i], 8, send, sizeof(send)) > 0);
			in[i] = true;
		}
		REQUIRE_EQ(req.outstanding, N);
		while (left) {
			unsigned k;

			seed = seed * 1103515245u + 12345u;
			k = (seed >> 8) % N;
			rr_xprt_rqst_forget(&req, c[k]);
			if (in[k])
				left--;
			in[k] = false;
			CHECK_EQ(req.outstanding, left);
			for (unsigned i = 0; i < N; i++)
				CHECK(rr_xprt_req_find(&req, c[i]->xid) == (in[i] ? c[i] : NULL));
		}
		for (unsigned i = 0; i < N; i++)
			rr_xprt_rqst_release(&req, c[i]);
		rr_xprt_req_fini(&req);
		CHECK_EQ(te.live, 0);
	}
}

/* An allocator that gives blocks at every offset from a 64-byte boundary
 * (1 .. 63 bytes past one, in turn) and checks that each block it gets back
 * is one it gave. */
struct skew_alloc {
	unsigned next;          /* the next block's offset from a line */
	unsigned live;
	void *given[8], *base[8];
};

static void *skew_alloc(void *ctx, size_t size)
{
	struct skew_alloc *a = ctx;
	uint8_t *b = NULL;

	for (unsigned i = 0; i < 8; i++)
		if (!a->given[i]) {
			if (posix_memalign((void **)&b, 64, size + 64))
				return NULL;
			a->base[i] = b;
			a->given[i] = b + 1 + a->next++ % 63;
			a->live++;
			return a->given[i];
		}
	return NULL;
}

static void skew_free(void *ctx, void *p)
{
	struct skew_alloc *a = ctx;

	for (unsigned i = 0; i < 8; i++)
		if (a->given[i] == p) {
			free(a->base[i]);
			a->given[i] = NULL;
			a->live--;
			return;
		}
	rr_test_fail(__FILE__, __LINE__, "a block freed that the allocator did not give", false);
}

/* rr_alloc_line's blocks start on a cache line whatever the allocator's
 * alignment, hold @size bytes, and go back to the allocator as it gave
 * them; the responder's Call contexts are such blocks, so that what a
 * Call resets in them (128 bytes, proto/xprt_rsp.c) is two lines (issue 16
 * part FD). */
TEST(xprt_responder_contexts_line_aligned)
{
	static struct rt t;
	struct skew_alloc a = {0};
	struct rpcrdma_env env = {.alloc = skew_alloc, .free = skew_free, .alloc_ctx = &a};
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc[3];
	struct rr_xprt_part cp = {head_buf, 200, false};
	struct rr_xprt_rqst_desc d = {.xid = 0x78, .parts = &cp, .nparts = 1,
				      .max_reply = 100};
	uint8_t err[28];
	size_t elen;
	int n;

	for (unsigned k = 0; k < 70; k++) {
		size_t size = 1 + (size_t)k * 97;
		uint8_t *p = rr_alloc_line(&env, size);

		REQUIRE(p != NULL);
		CHECK_EQ((uintptr_t)p & 63, 0);
		memset(p, 0xa5, size);
		rr_free_line(&env, p);
		CHECK_EQ(a.live, 0);
	}
	rr_free_line(&env, NULL);

	mk_call(head_buf, 0x78, 200);
	rt_init(&t);
	rr_xprt_req_init(&t.req, &t.te.env, &t.rp, &t.rst);
	rr_xprt_rsp_init(&t.rsp, &env, &t.sp, &t.sst);
	rr_xprt_rsp_keep_spares(&t.rsp, 1);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
	n = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	REQUIRE(n > 0);
	for (unsigned i = 0; i < 3; i++) {
		/* three at once: new contexts; then one kept, freed at fini */
		REQUIRE_EQ(rr_xprt_rsp_recv(&t.rsp, t.send, (size_t)n, 4, err, &elen, &rc[i]),
			   RR_XPRT_A_DELIVER);
		CHECK_EQ((uintptr_t)rc[i] & 63, 0);
		CHECK_EQ(rc[i]->xid, 0x78);
		CHECK_EQ(rc[i]->hdr.credit, 8);
	}
	for (unsigned i = 0; i < 3; i++)
		rr_xprt_rcall_release(&t.rsp, rc[i]);
	rr_xprt_rsp_fini(&t.rsp);
	CHECK_EQ(a.live, 0);
	rr_xprt_rqst_release(&t.req, c);
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}

/* Responders that share their spares (rr_xprt_rsp_share: the sessions of
 * one loop, issue 16 part GF): a Call context and small buffer one of them
 * released are the next Call's on another; more Calls at once than the
 * shared stacks hold take the rest from the responder's own spares or the
 * allocator, and give them back there (bounded: RR_XPRT_RSP_SHARED shared,
 * the responder's own limit, the rest freed); nothing is left after fini
 * and the drain. */
TEST(xprt_responders_share_spares)
{
	static struct rt t;
	static struct rr_xprt_responder r2;
	static struct rr_xprt_rsp_shared sh;
	struct rr_xprt_rcall *rc[RR_XPRT_RSP_SHARED + 3], *first;
	struct rr_xprt_rqst *c;
	struct rr_xprt_part cp = {head_buf, 200, false};
	struct rr_xprt_rqst_desc d = {.xid = 0x79, .parts = &cp, .nparts = 1,
				      .max_reply = 100};
	const unsigned many = RR_XPRT_RSP_SHARED + 3;
	uint8_t err[28], *fbuf;
	size_t elen;
	int n;

	memset(&sh, 0, sizeof(sh));
	mk_call(head_buf, 0x79, 200);
	rt_init(&t);
	rr_xprt_req_init(&t.req, &t.te.env, &t.rp, &t.rst);
	rr_xprt_rsp_init(&t.rsp, &t.te.env, &t.sp, &t.sst);
	rr_xprt_rsp_init(&r2, &t.te.env, &t.sp, &t.sst);
	rr_xprt_rsp_keep_spares(&t.rsp, 2);
	rr_xprt_rsp_keep_spares(&r2, 2);
	rr_xprt_rsp_share(&t.rsp, &sh);
	rr_xprt_rsp_share(&r2, &sh);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t.req, &d, &c), 0);
	n = rr_xprt_rqst_marshal(&t.req, c, 8, t.send, sizeof(t.send));
	REQUIRE(n > 0);

	REQUIRE_EQ(rr_xprt_rsp_recv(&t.rsp, t.send, (size_t)n, 4, err, &elen, &rc[0]),
		   RR_XPRT_A_DELIVER);
	first = rc[0];
	fbuf = rc[0]->buf;
	REQUIRE(fbuf != NULL);
	CHECK_EQ(rc[0]->buf_cap, RR_XPRT_RSP_SMALL_BUF);
	rr_xprt_rcall_release(&t.rsp, rc[0]);
	CHECK_EQ(sh.nctxs, 1);
	CHECK_EQ(sh.nbufs, 1);
	CHECK_EQ(t.rsp.nspares, 0);
	REQUIRE_EQ(rr_xprt_rsp_recv(&r2, t.send, (size_t)n, 4, err, &elen, &rc[0]),
		   RR_XPRT_A_DELIVER);
	CHECK(rc[0] == first);
	CHECK(rc[0]->buf == fbuf);
	CHECK_EQ(rc[0]->xid, 0x79);
	CHECK_EQ(rc[0]->hdr.credit, 8);
	CHECK_EQ(rc[0]->msg_len, 200);
	CHECK_EQ(memcmp(rc[0]->msg, head_buf, 200), 0);
	CHECK_EQ(sh.nctxs, 0);
	CHECK_EQ(sh.nbufs, 0);

	for (unsigned i = 1; i < many; i++) {
		REQUIRE_EQ(rr_xprt_rsp_recv(&r2, t.send, (size_t)n, 4, err, &elen, &rc[i]),
			   RR_XPRT_A_DELIVER);
		CHECK_EQ(rc[i]->xid, 0x79);
	}
	for (unsigned i = 0; i < many; i++)
		rr_xprt_rcall_release(&r2, rc[i]);
	CHECK_EQ(sh.nctxs, RR_XPRT_RSP_SHARED);
	CHECK_EQ(sh.nbufs, RR_XPRT_RSP_SHARED);
	CHECK_EQ(r2.nspares, 2);
	CHECK_EQ(r2.nsmall + (r2.spare_buf != NULL), 3);
	rr_xprt_rsp_fini(&t.rsp);
	rr_xprt_rsp_fini(&r2);
	rr_xprt_rsp_shared_drain(&sh, &t.te.env);
	CHECK_EQ(sh.nctxs, 0);
	CHECK_EQ(sh.nbufs, 0);
	rr_xprt_rqst_release(&t.req, c);
	rr_xprt_req_fini(&t.req);
	CHECK_EQ(t.te.live, 0);
}
