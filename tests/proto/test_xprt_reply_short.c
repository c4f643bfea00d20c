/* SPDX-License-Identifier: BSD-2-Clause */
/* The responder's one-pass Reply (rr_xprt_rsp_reply's short form: a Call
 * without Write list and Reply chunk answered inline) against the general
 * Reply builder (rr_xprt_rsp_reply_general): for Calls of every chunk shape,
 * reply streams of every part shape (none, empty, unaligned, DDP-eligible,
 * a bad part), grants, inline thresholds and buffer sizes around the
 * boundaries, remote invalidation on and off, with and without counters,
 * both ways must return the same, write the same bytes, leave the same plan
 * and count the same (issue 16 part AO). */
#include <stdlib.h>

#include "test.h"
#include "proto/xprt.h"

#define BUFSZ 4200

enum { SH_NONE, SH_READ, SH_WRITE, SH_REPLY, SH_READ_WRITE, SH_COUNT };

/* Call @shape's header in @rc (its XID @xid). */
static void mk_call(struct rr_xprt_rcall *rc, int shape, uint32_t xid)
{
	const struct rr_hdr_seg segs[2] = {{0x1111, 64, 0x1000}, {0x2222, 64, 0x2000}};
	const struct rr_hdr_seg rd = {0x3333, 16, 0x3000};
	struct rr_hdr *h = &rc->hdr;

	memset(rc, 0, sizeof(*rc));
	rc->xid = xid;
	rr_hdr_init(h, xid, 8, RR_HDR_MSG);
	if (shape == SH_READ || shape == SH_READ_WRITE)
		REQUIRE_EQ(rr_hdr_add_read(h, 8, &rd), 0);
	if (shape == SH_WRITE || shape == SH_READ_WRITE)
		REQUIRE_EQ(rr_hdr_add_write(h, segs, 2), 0);
	if (shape == SH_REPLY)
		REQUIRE_EQ(rr_hdr_add_reply(h, segs, 2), 0);
}

struct way {
	int rc;
	uint8_t buf[BUFSZ];
	struct rr_xprt_reply_plan plan;
	struct rr_xprt_stats st;
};

/* Builds the Reply both ways and compares. Returns whether the short form
 * was eligible and succeeded (the general way's result is 0 with RDMA_MSG,
 * no Writes, no error). */
static bool both_ways(struct rr_xprt_responder *s, const struct rr_xprt_rcall *rc,
		      const struct rr_xprt_part *parts, unsigned n, uint32_t grant, size_t cap,
		      bool counters)
{
	static struct way a, b;

	memset(&a, 0xa5, sizeof(a));
	memset(&b, 0xa5, sizeof(b));
	memset(&a.st, 0, sizeof(a.st));
	memset(&b.st, 0, sizeof(b.st));
	s->stats = counters ? &a.st : NULL;
	a.rc = rr_xprt_rsp_reply(s, rc, parts, n, grant, a.buf, cap, &a.plan);
	s->stats = counters ? &b.st : NULL;
	b.rc = rr_xprt_rsp_reply_general(s, rc, parts, n, grant, b.buf, cap, &b.plan);
	CHECK_EQ(a.rc, b.rc);
	if (a.plan.rr_buf != b.plan.rr_buf && a.plan.rr_buf != (void *)0xa5a5a5a5a5a5a5a5ull) {
		/* a reliable-reply buffer (not enabled here): the same bytes */
		CHECK(b.plan.rr_buf && a.plan.rr_len == b.plan.rr_len &&
		      memcmp(a.plan.rr_buf, b.plan.rr_buf, a.plan.rr_len) == 0);
		rr_free(NULL, a.plan.rr_buf);
		rr_free(NULL, b.plan.rr_buf);
		a.plan.rr_buf = b.plan.rr_buf = NULL;
	}
	CHECK(memcmp(a.buf, b.buf, sizeof(a.buf)) == 0);
	CHECK(memcmp(&a.plan, &b.plan, sizeof(a.plan)) == 0);
	CHECK(memcmp(&a.st, &b.st, sizeof(a.st)) == 0);
	return a.rc == 0 && a.plan.proc == RR_HDR_MSG && a.plan.nwrites == 0 && !a.plan.is_error;
}

TEST(xprt_rsp_reply_short_as_general)
{
	static const uint32_t lens[] = {0, 1, 2, 3, 4, 5, 27, 100, 1000, 1023, 1024, 4000};
	static const uint32_t grants[] = {0, 1, 7, 0xffffffffu};
	static const uint32_t inl[] = {27, 28, 29, 31, 32, 60, 1024, 4096};
	static const size_t caps[] = {0, 27, 28, 29, 32, 40, 128, 1100, 4096, BUFSZ};
	static uint8_t data[3][4096];
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_responder s;
	static struct rr_xprt_rcall rc;
	unsigned shorts = 0, runs = 0;

	for (size_t i = 0; i < sizeof(data); i++)
		((uint8_t *)data)[i] = (uint8_t)(i * 7 + 3);
	rr_test_env_init(&te, 11);
	for (int shape = 0; shape < SH_COUNT; shape++)
		for (int rmode = 0; rmode < 4; rmode++)
			for (size_t ii = 0; ii < RR_ARRAY_SIZE(inl); ii++) {
				rr_xprt_params_default(&p);
				p.reply_inline = inl[ii];
				p.local_r = rmode & 1;
				p.peer_r = (rmode & 2) != 0;
				rr_xprt_rsp_init(&s, &te.env, &p, NULL);
				mk_call(&rc, shape, 0x01020304u + (uint32_t)shape);
				for (size_t ci = 0; ci < RR_ARRAY_SIZE(caps); ci++)
					for (size_t li = 0; li < RR_ARRAY_SIZE(lens); li++)
						for (int form = 0; form < 6; form++) {
							struct rr_xprt_part pt[3];
							unsigned n = 1;
							uint32_t g = grants[(li + ci + (size_t)form) %
									    RR_ARRAY_SIZE(grants)];

							pt[0] = (struct rr_xprt_part){data[0], lens[li],
										      false};
							switch (form) {
							case 0:   /* no parts at all */
								n = 0;
								break;
							case 1:   /* one inline part */
								break;
							case 2:   /* one DDP-eligible part */
								pt[0].ddp = true;
								break;
							case 3:   /* header, DDP item, trailer */
								pt[1] = (struct rr_xprt_part){
									data[1], lens[li] % 13, true};
								pt[2] = (struct rr_xprt_part){data[2], 3,
											      false};
								n = 3;
								break;
							case 4:   /* a bad part: bytes, no memory */
								pt[1] = (struct rr_xprt_part){NULL, 4,
											      false};
								n = 2;
								break;
							case 5:   /* an empty part without memory */
								pt[1] = (struct rr_xprt_part){NULL, 0,
											      true};
								n = 2;
								break;
							}
							shorts += both_ways(&s, &rc, pt, n, g, caps[ci],
									    (form + li) % 2 == 0);
							runs++;
						}
				rr_xprt_rsp_fini(&s);
			}
	/* the comparison covered both outcomes */
	CHECK(shorts > 100);
	CHECK(shorts < runs);
}

/* The short form's bytes, spelled out: RFC 8166 section 4.2's header with
 * the three lists empty, the grant (zero raised to one), the part padded
 * when DDP-eligible, and Send With Invalidate of the Call's Read chunk
 * when both sides advertised R. */
TEST(xprt_rsp_reply_short_bytes)
{
	static const uint8_t item[5] = {1, 2, 3, 4, 5};
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_responder s;
	struct rr_xprt_stats st;
	static struct rr_xprt_rcall rc;
	static struct rr_xprt_reply_plan plan;
	uint8_t buf[64];
	size_t n;
	uint8_t want[64];
	struct rr_xprt_part pt = {item, sizeof(item), true};

	rr_test_env_init(&te, 12);
	rr_xprt_params_default(&p);
	p.local_r = p.peer_r = true;
	memset(&st, 0, sizeof(st));
	rr_xprt_rsp_init(&s, &te.env, &p, &st);
	mk_call(&rc, SH_READ, 0xdeadbeef);
	memset(buf, 0xee, sizeof(buf));
	REQUIRE_EQ(rr_xprt_rsp_reply(&s, &rc, &pt, 1, 0, buf, sizeof(buf), &plan), 0);
	n = rr_test_hex("deadbeef 00000001 00000001 00000000 00000000 00000000 00000000"
			"01020304 05000000",
			want, sizeof(want));
	CHECK_EQ(plan.send_len, n);
	CHECK(memcmp(buf, want, n) == 0);
	CHECK_EQ(buf[n], 0xee);
	CHECK(plan.send_inv);
	CHECK_EQ(plan.inv_stag, 0x3333);
	CHECK_EQ(plan.proc, RR_HDR_MSG);
	CHECK_EQ(plan.nwrites, 0);
	CHECK_EQ(st.sends, 1);
	CHECK_EQ(st.pullup_bytes, n);
	rr_xprt_rsp_fini(&s);
}
