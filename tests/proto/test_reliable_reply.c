/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of the reliable-reply core (proto/rrep.h,
 * draft-cel-nfsv4-rpcrdma-reliable-reply-04): the requester policy of
 * section 5.3.1, the Read-chunk Reply built by the responder core and parsed
 * by the requester core (4.1, 4.1.1, 4.1.2) with and without negotiation,
 * RDMA_DONE encoding (4.1.3), and the responder's table (5.4.3): matching,
 * unknown / duplicate / forged RDMA_DONE, timeouts on a virtual clock,
 * disconnect, allocation failures. */
#include "proto/rrep.h"
#include "test.h"

static struct rr_xprt_rqst_desc desc(uint32_t min, uint32_t max, bool unknown)
{
	struct rr_xprt_rqst_desc d;

	memset(&d, 0, sizeof(d));
	d.min_reply = min;
	d.max_reply = max;
	d.max_unknown = unknown;
	return d;
}

TEST(rrep_policy)
{
	struct rr_xprt_params p;
	struct rr_xprt_rqst_desc d;

	rr_xprt_params_default(&p);
	p.reply_inline = 4096;
	/* RFC 8166 (not negotiated): the maximum decides. */
	d = desc(0, 4000, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_SEND_ONLY);
	d = desc(0, 4069, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_REPLY_CHUNK);
	d = desc(0, 1 << 20, true);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_REPLY_CHUNK);
	p.reliable_reply = true;
	d = desc(0, 4068, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_SEND_ONLY);      /* fits */
	d = desc(100, 65536, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_READ_CHUNK);     /* usually small */
	d = desc(0, 1 << 20, true);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_READ_CHUNK);     /* unknown */
	d = desc(8000, 1 << 20, true);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_READ_CHUNK);     /* min big, max unknown */
	d = desc(8000, 9000, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_REPLY_CHUNK);    /* certainly large */
	d = desc(4069, 9000, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_REPLY_CHUNK);
	d = desc(4068, 9000, false);
	CHECK_EQ(rr_rrep_choose(&p, 28, &d), RR_RREP_READ_CHUNK);
}

TEST(rrep_done_encoding)
{
	uint8_t b[20];
	uint32_t xid = 0;

	CHECK_EQ(rr_rrep_encode_done(0x11223344, 128, b, 15), -EMSGSIZE);
	REQUIRE_EQ(rr_rrep_encode_done(0x11223344, 128, b, sizeof(b)), 16);
	CHECK_MEM(b, "\x11\x22\x33\x44\0\0\0\x01\0\0\0\x80\0\0\0\x03", 16);
	CHECK(rr_rrep_is_done(b, 16, &xid));
	CHECK_EQ(xid, 0x11223344);
	CHECK(rr_rrep_is_done(b, 20, &xid));   /* trailing bytes ignored */
	CHECK(!rr_rrep_is_done(b, 15, &xid));
	b[7] = 2;
	CHECK(!rr_rrep_is_done(b, 16, &xid));   /* version 2 */
	b[7] = 1;
	b[15] = 0;
	CHECK(!rr_rrep_is_done(b, 16, &xid));   /* RDMA_MSG */
}

/* A Call from the requester core, answered by the responder core with a
 * @n-byte Reply that fits nowhere, parsed back by the requester core. */
struct rt {
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats rst, sst;
	struct rr_xprt_requester req;
	struct rr_xprt_responder rsp;
	uint8_t send[4096];
	struct rr_xprt_reply_plan plan;
	struct rr_xprt_reply res;
	uint8_t body[3u << 20];
};

static uint32_t rt_seg_len;   /* 0: default (1 MiB) */

static void roundtrip(struct rt *t, bool rrep, uint32_t n, bool unknown_xid)
{
	uint8_t call[16], hdr[8], err[28];
	struct rr_xprt_part cp = {call, 16, false};
	struct rr_xprt_part rp[2] = {{hdr, 8, false}, {t->body, n, false}};
	struct rr_xprt_rqst_desc d = {.xid = 0x77, .parts = &cp, .nparts = 1,
				      .max_reply = 1 << 20, .max_unknown = true};
	struct rr_xprt_rqst *c;
	struct rr_xprt_rcall *rc;
	size_t elen;
	int len;

	memset(t, 0, offsetof(struct rt, body));
	rr_test_env_init(&t->te, 3);
	rr_xprt_params_default(&t->p);
	t->p.call_inline = t->p.reply_inline = 4096;
	t->p.reliable_reply = rrep;
	if (rt_seg_len)
		t->p.max_seg_len = rt_seg_len;
	rr_xprt_req_init(&t->req, &t->te.env, &t->p, &t->rst);
	rr_xprt_rsp_init(&t->rsp, &t->te.env, &t->p, &t->sst);
	rr_put_be32(call, 0x77);
	rr_put_be32(call + 4, 0);
	rr_put_be32(hdr, 0x77);
	rr_put_be32(hdr + 4, 1);
	for (uint32_t i = 0; i < n; i++)
		t->body[i] = (uint8_t)(i * 5);
	REQUIRE_EQ(rr_xprt_rqst_prepare(&t->req, &d, &c), 0);
	CHECK_EQ(c->reply_reg >= 0, !rrep);   /* 5.3.1: no Reply chunk when negotiated */
	for (unsigned i = 0; i < c->nregs; i++) {
		c->regs[i].stag = 0x1000 + i;
		c->regs[i].addr = 0x10000;
		c->regs[i].valid = true;
	}
	len = rr_xprt_rqst_marshal(&t->req, c, 32, t->send, sizeof(t->send));
	REQUIRE(len > 0);
	REQUIRE_EQ(rr_xprt_rsp_recv(&t->rsp, t->send, (size_t)len, 8, err, &elen, &rc),
		   RR_XPRT_A_DELIVER);
	REQUIRE_EQ(rr_xprt_rsp_reply(&t->rsp, rc, rp, 2, 8, t->send, sizeof(t->send), &t->plan),
		   0);
	rr_xprt_rcall_release(&t->rsp, rc);
	if (unknown_xid)
		rr_xprt_rqst_forget(&t->req, c);
	if (t->plan.read_chunk)
		rr_rrep_rsp_patch(t->send, &t->plan, 0xabcd01, 0x5000000);
	rr_xprt_req_recv(&t->req, t->send, t->plan.send_len, false, 0, &t->res);
	if (t->res.kind == RR_XPRT_R_PULL && t->res.call) {
		struct rr_xprt_reply r2;

		/* Emulate the pull: the exposed buffer is the Payload stream. */
		memset(&r2, 0, sizeof(r2));
		rr_xprt_req_pulled(&t->req, c, t->plan.rr_buf, t->plan.rr_len, &r2);
		CHECK_EQ(r2.kind, RR_XPRT_R_REPLY);
		CHECK_EQ(r2.payload_len, 8 + n);
		CHECK(r2.payload_len == 8 + n && !memcmp(r2.payload + 8, t->body, n));
	}
	rr_free(&t->te.env, t->plan.rr_buf);
	rr_xprt_rqst_release(&t->req, c);
	rr_xprt_req_fini(&t->req);   /* recycled Reply chunk buffers */
	CHECK_EQ(t->te.live, 0);
}

TEST(rrep_core_read_chunk_reply)
{
	static struct rt t;

	/* Negotiated, 100 000 bytes: one segment (< 1 MiB). */
	roundtrip(&t, true, 100000, false);
	CHECK(t.plan.read_chunk);
	CHECK_EQ(t.plan.proc, RR_HDR_NOMSG);
	CHECK_EQ(t.plan.rr_len, 100008);
	CHECK_EQ(t.plan.rr_nsegs, 1);
	CHECK_EQ(t.res.kind, RR_XPRT_R_PULL);
	CHECK_EQ(t.res.pull_nsegs, 1);
	CHECK_EQ(t.res.pull_segs[0].handle, 0xabcd01);
	CHECK_EQ(t.res.pull_segs[0].offset, 0x5000000);
	CHECK_EQ(t.res.pull_len, 100008);
	CHECK(t.res.pull_inv);
	CHECK_EQ(t.res.xid, 0x77);
	CHECK_EQ(t.sst.rrep_exposed, 1);
	CHECK_EQ(t.rst.rrep_pulled, 1);
	/* Unknown XID: still R_PULL (RDMA_DONE owed), nothing to read. */
	roundtrip(&t, true, 100000, true);
	CHECK_EQ(t.res.kind, RR_XPRT_R_PULL);
	CHECK(t.res.call == NULL);
	CHECK_EQ(t.res.pull_nsegs, 0);
	CHECK_EQ(t.res.xid, 0x77);
	/* Not negotiated: the responder answers ERR_CHUNK... */
	roundtrip(&t, false, 2u << 20, false);
	CHECK(!t.plan.read_chunk);
	CHECK(t.plan.is_error);
	CHECK_EQ(t.res.kind, RR_XPRT_R_ERROR);
}

TEST(rrep_core_segments_and_unnegotiated_requester)
{
	static struct rt t;
	struct rr_xprt_requester r;
	struct rr_xprt_params p;
	struct rr_xprt_stats st = {0};

	/* 290 000 bytes, segments of 64 KiB: 5 segments, consecutive; the
	 * requester pulls exactly what was exposed. */
	rt_seg_len = 65536;
	roundtrip(&t, true, 290000, false);
	CHECK_EQ(t.plan.rr_nsegs, 5);
	CHECK_EQ(t.res.pull_nsegs, 5);
	for (uint32_t i = 0; i < t.res.pull_nsegs && i < 5; i++) {
		CHECK_EQ(t.res.pull_segs[i].offset, 0x5000000 + 65536ull * i);
		CHECK_EQ(t.res.pull_segs[i].handle, 0xabcd01);
	}
	CHECK_EQ(t.res.pull_segs[4].length, 290008 - 4 * 65536);
	/* 2 MiB at 64 KiB and 16 segments at most: longer segments. */
	roundtrip(&t, true, 2u << 20, false);
	CHECK_EQ(t.plan.rr_nsegs, 16);
	CHECK_EQ(t.plan.rr_seg_len, RR_ALIGN4(((2u << 20) + 8 + 15) / 16));
	CHECK_EQ(t.res.pull_len, (2u << 20) + 8);
	rt_seg_len = 0;
	/* A requester that did not negotiate drops a Read-chunk Reply: the
	 * codec rejects a Read list in a Reply. */
	rr_xprt_params_default(&p);
	p.reply_inline = 4096;
	roundtrip(&t, true, 100000, false);
	rr_rrep_rsp_patch(t.send, &t.plan, 0xabcd01, 0x5000000);
	rr_xprt_req_init(&r, &t.te.env, &p, &st);
	{
		struct rr_xprt_reply res;

		rr_xprt_req_recv(&r, t.send, t.plan.send_len, false, 0, &res);
		CHECK_EQ(res.kind, RR_XPRT_R_DROP);
		CHECK_EQ(st.bad_replies, 1);
	}
}

TEST(rrep_table)
{
	struct rr_test_env te;
	struct rr_xprt_stats st = {0};
	struct rr_rrep_table t;
	struct rr_rrep_entry *a, *b, *a2, *e;
	struct rr_rrep_done d;
	int tag[4];

	rr_test_env_init(&te, 5);
	te.now_ns = 1000;
	rr_rrep_table_init(&t, &te.env, 5000, &st);
	CHECK_EQ(rr_rrep_next_expiry(&t), UINT64_MAX);
	a = rr_rrep_add(&t, 10, 0xa0, &tag[0]);
	te.now_ns = 2000;
	b = rr_rrep_add(&t, 11, 0xb0, &tag[1]);
	te.now_ns = 3000;
	a2 = rr_rrep_add(&t, 10, 0xa1, &tag[2]);   /* same XID again */
	REQUIRE(a && b && a2);
	CHECK_EQ(t.count, 3);
	CHECK_EQ(rr_rrep_next_expiry(&t), 6000);
	/* unknown XID: dropped */
	rr_rrep_on_done(&t, 99, false, 0, &d);
	CHECK(d.unknown && !d.release && !d.forged);
	/* duplicates: the oldest first */
	rr_rrep_on_done(&t, 10, false, 0, &d);
	CHECK(d.release == a);
	CHECK(d.release->stag_valid);
	rr_rrep_entry_free(&t, d.release);
	/* forged: RDMA_DONE for 10 invalidating 11's STag */
	rr_rrep_on_done(&t, 10, true, 0xb0, &d);
	CHECK(d.forged);
	CHECK(d.stolen == b);
	CHECK(!b->stag_valid);
	CHECK(d.release == a2);
	CHECK(a2->stag_valid);   /* its own STag still needs a local fence */
	rr_rrep_entry_free(&t, d.release);
	CHECK_EQ(t.count, 1);
	/* remote invalidation of an STag of nobody: forged, nothing released */
	rr_rrep_on_done(&t, 12, true, 0xdead, &d);
	CHECK(d.forged && d.unknown && !d.release && !d.stolen);
	/* retransmitted RDMA_DONE for 10: nothing waits */
	rr_rrep_on_done(&t, 10, false, 0, &d);
	CHECK(d.unknown);
	/* timeout on the virtual clock */
	te.now_ns = 6999;
	CHECK(rr_rrep_expire(&t, te.now_ns) == NULL);
	te.now_ns = 7000;
	e = rr_rrep_expire(&t, te.now_ns);
	CHECK(e == b);
	CHECK(e && e->user == &tag[1]);
	rr_rrep_entry_free(&t, e);
	CHECK_EQ(t.count, 0);
	/* a matching Send With Invalidate releases with the STag invalid */
	a = rr_rrep_add(&t, 20, 0xc0, NULL);
	REQUIRE(a);
	rr_rrep_on_done(&t, 20, true, 0xc0, &d);
	CHECK(d.release == a && !d.forged && !a->stag_valid);
	rr_rrep_entry_free(&t, d.release);
	/* disconnect: pop everything */
	for (uint32_t i = 0; i < 70; i++)
		REQUIRE(rr_rrep_add(&t, 100 + i, 0x1000 + i, NULL));
	for (uint32_t i = 0; i < 70; i++) {
		e = rr_rrep_pop(&t);
		REQUIRE(e);
		CHECK_EQ(e->xid, 100 + i);
		rr_rrep_entry_free(&t, e);
	}
	CHECK(rr_rrep_pop(&t) == NULL);
	CHECK_EQ(st.rrep_done_matched, 3);
	CHECK_EQ(st.rrep_done_unknown, 3);
	CHECK_EQ(st.rrep_done_forged, 2);
	CHECK_EQ(st.rrep_expired, 1);
	CHECK_EQ(st.rrep_fenced, 70);
	/* allocation failure */
	te.fail_at = te.allocs + 1;
	CHECK(rr_rrep_add(&t, 1, 1, NULL) == NULL);
	CHECK_EQ(t.count, 0);
	CHECK_EQ(te.live, 0);
}
