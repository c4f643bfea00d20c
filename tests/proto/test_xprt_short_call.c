/* SPDX-License-Identifier: BSD-2-Clause */
/* The requester's one-pass Short Call without chunks (proto/xprt_req.c
 * prepare_short and marshal_short: one inline part, no result sink, no
 * Reply chunk) against the general planner and builder
 * (rr_xprt_rqst_prepare_general, rr_xprt_rqst_marshal_general): for Call
 * descriptions of every shape (no part, one, two; DDP-eligible or not;
 * lengths around 8 and the alignment; a missing base; sinks or none),
 * inline thresholds, segment limits, reliable reply and inline results on
 * and off, Reply bounds, buffer sizes around the header's 28 bytes, with
 * and without counters, both ways must return the same, leave the same
 * call (every field the planner sets), write the same bytes, count the
 * same and leave the same XID table (issue 16 part AS); also after both
 * are planned again under new parameters, and the plan's one_part (the
 * one-pass builder's test, issue 16 part HC) is that form exactly. */
#include "test.h"
#include "proto/xprt.h"

static uint32_t rnd_x = 0x2545f491u;

static uint32_t rnd(void)
{
	rnd_x ^= rnd_x << 13;
	rnd_x ^= rnd_x >> 17;
	rnd_x ^= rnd_x << 5;
	return rnd_x;
}

#define PICK(a) ((a)[rnd() % (sizeof(a) / sizeof((a)[0]))])

/* Every field of @a the planner writes equals @b's (the borrowed
 * description is the same object). */
static void same_call(const struct rr_xprt_rqst *a, const struct rr_xprt_rqst *b)
{
	REQUIRE_EQ(a->xid, b->xid);
	REQUIRE_EQ(a->form, b->form);
	REQUIRE_EQ(a->desc.xid, b->desc.xid);
	REQUIRE(a->desc.parts == b->desc.parts);
	REQUIRE_EQ(a->desc.nparts, b->desc.nparts);
	REQUIRE(a->desc.sinks == b->desc.sinks);
	REQUIRE_EQ(a->desc.nsinks, b->desc.nsinks);
	REQUIRE_EQ(a->desc.max_reply, b->desc.max_reply);
	REQUIRE_EQ(a->desc.min_reply, b->desc.min_reply);
	REQUIRE_EQ(a->desc.max_unknown, b->desc.max_unknown);
	REQUIRE_EQ(a->xdr_len, b->xdr_len);
	REQUIRE_EQ(a->reduced_len, b->reduced_len);
	REQUIRE_EQ(a->nitems, b->nitems);
	REQUIRE_EQ(a->pullup_reg, b->pullup_reg);
	REQUIRE_EQ(a->pullup != NULL, b->pullup != NULL);
	REQUIRE_EQ(a->results_inline, b->results_inline);
	REQUIRE_EQ(a->reply_reg, b->reply_reg);
	REQUIRE_EQ(a->reply_buf != NULL, b->reply_buf != NULL);
	REQUIRE_EQ(a->reply_len, b->reply_len);
	REQUIRE_EQ(a->nregs, b->nregs);
	REQUIRE_EQ(a->outstanding, b->outstanding);
	for (unsigned k = 0; k < a->nitems; k++) {
		REQUIRE_EQ(a->item_pos[k], b->item_pos[k]);
		REQUIRE_EQ(a->item_reg[k], b->item_reg[k]);
	}
	for (unsigned i = 0; i < a->desc.nsinks; i++)
		REQUIRE_EQ(a->sink_reg[i], b->sink_reg[i]);
	for (unsigned i = 0; i < a->nregs; i++) {
		REQUIRE_EQ(a->regs[i].len, b->regs[i].len);
		REQUIRE_EQ(a->regs[i].access, b->regs[i].access);
	}
}

/* The form the one-pass builder writes (marshal_short's own test of the
 * plan before issue 16 part HC, which moved it into the plan as
 * one_part): Short, no registration, no sink, one inline part whole. */
static bool one_part_shape(const struct rr_xprt_rqst *c)
{
	return c->form == RR_XPRT_FORM_SHORT && !c->nregs && !c->desc.nsinks &&
	       c->desc.nparts == 1 && !c->desc.parts[0].ddp && c->desc.parts[0].len == c->xdr_len;
}

/* Registers @c's ranges as a driver would (the same handles both ways). */
static void reg_all(struct rr_xprt_rqst *c)
{
	for (unsigned i = 0; i < c->nregs; i++) {
		c->regs[i].stag = 0x100 + i;
		c->regs[i].addr = 0x10000ull * (i + 1);
		c->regs[i].valid = true;
	}
}

TEST(xprt_short_call_as_general)
{
	static const uint32_t call_inl[] = {0, 27, 28, 35, 36, 40, 44, 48, 60, 64, 100, 1024, 4096};
	static const uint32_t reply_inl[] = {0, 28, 36, 100, 1024, 4096};
	static const uint32_t seg_len[] = {0, 16, 64, 4096};
	static const uint32_t part_len[] = {0, 3, 4, 7, 8, 9, 12, 16, 20, 32, 40, 64, 100, 200};
	static const uint32_t sink_len[] = {0, 8, 64};
	static const uint32_t max_reply[] = {0, 8, 60, 100, 1000, 5000, 1u << 20};
	static const uint32_t min_reply[] = {0, 8, 100};
	static const size_t caps[] = {0, 27, 28, 35, 36, 40, 64, 100, 300, 4096};
	static uint8_t arg[512], sinkb[64], bufa[4096], bufb[4096];
	unsigned one_pass = 0, general = 0, replanned = 0;

	for (unsigned i = 0; i < sizeof(arg); i++)
		arg[i] = (uint8_t)(i * 7 + 1);
	for (unsigned it = 0; it < 40000; it++) {
		struct rr_xprt_params p;
		struct rr_xprt_requester ra, rb;
		struct rr_xprt_stats sa, sb;
		struct rr_xprt_part parts[2];
		struct rr_xprt_sink sk;
		struct rr_xprt_rqst_desc d;
		struct rr_xprt_rqst *ca = NULL, *cb = NULL;
		bool counted = rnd() & 1;
		int rca, rcb;

		rr_xprt_params_default(&p);
		p.call_inline = PICK(call_inl);
		p.reply_inline = PICK(reply_inl);
		p.reliable_reply = rnd() & 1;
		p.inline_ddp = rnd() & 1;
		p.max_seg_len = PICK(seg_len);
		p.max_segs = rnd() % 8 ? 1 + rnd() % 8 : 0;
		memset(&sa, 0, sizeof(sa));
		memset(&sb, 0, sizeof(sb));
		rr_xprt_req_init(&ra, NULL, &p, counted ? &sa : NULL);
		rr_xprt_req_init(&rb, NULL, &p, counted ? &sb : NULL);

		memset(&d, 0, sizeof(d));
		d.xid = rnd();
		/* mostly one part: the one-pass form's shape and its near misses */
		d.nparts = rnd() % 4 ? 1 : rnd() % 3;
		for (unsigned i = 0; i < 2; i++) {
			parts[i].len = PICK(part_len);
			parts[i].base = rnd() % 16 ? arg + 200 * i : NULL;
			parts[i].ddp = rnd() % 6 == 0;
		}
		d.parts = rnd() % 32 ? parts : NULL;
		sk.base = sinkb;
		sk.len = PICK(sink_len);
		d.nsinks = rnd() % 5 == 0;
		d.sinks = &sk;
		d.max_reply = PICK(max_reply);
		d.min_reply = PICK(min_reply);
		d.max_unknown = rnd() & 1;

		rca = rr_xprt_rqst_prepare(&ra, &d, &ca);
		rcb = rr_xprt_rqst_prepare_general(&rb, &d, &cb);
		REQUIRE_EQ(rca, rcb);
		if (rca == 0) {
			size_t cap = PICK(caps);
			uint32_t credit = rnd() % 70;
			int la, lb;

			REQUIRE(ca && cb);
			same_call(ca, cb);
			if (rnd() % 2 == 0) {
				/* parameters changed (a new connection's): both
				 * planned again, one_part with them (part HC) */
				p.call_inline = PICK(call_inl);
				/* (a connection's: a segment length, which
				 * prepare checked and plan divides by) */
				p.max_seg_len = seg_len[1 + rnd() % 3];
				rr_xprt_req_set_params(&ra, &p);
				rr_xprt_req_set_params(&rb, &p);
				rca = rr_xprt_rqst_replan(&ra, ca);
				rcb = rr_xprt_rqst_replan(&rb, cb);
				REQUIRE_EQ(rca, rcb);
				if (rca) {
					REQUIRE(!ca->one_part && !cb->one_part);
					rr_xprt_rqst_release(&ra, ca);
					rr_xprt_rqst_release(&rb, cb);
					rr_xprt_req_fini(&ra);
					rr_xprt_req_fini(&rb);
					continue;
				}
				same_call(ca, cb);
				replanned++;
			}
			/* the plan's finding is the builder's test, both ways */
			REQUIRE_EQ(ca->one_part, one_part_shape(ca));
			REQUIRE_EQ(cb->one_part, one_part_shape(cb));
			if (d.nparts == 1 && !d.nsinks && !parts[0].ddp && ca->form == RR_XPRT_FORM_SHORT &&
			    ca->nregs == 0)
				one_pass++;
			else
				general++;
			reg_all(ca);
			reg_all(cb);
			memset(bufa, 0xa5, sizeof(bufa));
			memset(bufb, 0xa5, sizeof(bufb));
			la = rr_xprt_rqst_marshal(&ra, ca, credit, bufa, cap);
			lb = rr_xprt_rqst_marshal_general(&rb, cb, credit, bufb, cap);
			REQUIRE_EQ(la, lb);
			REQUIRE(memcmp(bufa, bufb, sizeof(bufa)) == 0);
			REQUIRE(memcmp(&sa, &sb, sizeof(sa)) == 0);
			REQUIRE_EQ(ra.outstanding, rb.outstanding);
			REQUIRE(rr_xprt_req_find(&ra, d.xid) == (la >= 0 ? ca : NULL));
			REQUIRE(rr_xprt_req_find(&rb, d.xid) == (lb >= 0 ? cb : NULL));
			same_call(ca, cb);
			rr_xprt_rqst_release(&ra, ca);
			rr_xprt_rqst_release(&rb, cb);
		} else {
			REQUIRE(ca == NULL && cb == NULL);
		}
		rr_xprt_req_fini(&ra);
		rr_xprt_req_fini(&rb);
	}
	/* both kinds were compared, many times */
	CHECK(one_pass > 1000);
	CHECK(general > 1000);
	CHECK(replanned > 500);
}

/* The parameters' part of the one-pass planner's test, made once per
 * parameters (struct rr_xprt_requester short_lim, issue 16 part JD): for
 * call inline thresholds, segment limits and part lengths around every
 * edge (the header's 28 bytes, the part's 8, UINT32_MAX / 2, a segment
 * length or count of 0), len - 8 < short_lim says exactly what the tests
 * it replaced said: 8 <= len <= UINT32_MAX / 2, 28 + len <= call_inline,
 * max_seg_len and max_segs not 0. (A limit too strict would only send
 * such Calls the general planner's way, which xprt_short_call_as_general
 * cannot tell.) */
TEST(xprt_short_limit_is_the_rule)
{
	static const uint32_t call_inl[] = {0, 1, 27, 28, 35, 36, 37, 40, 41, 44, 1024, 4096,
					    UINT32_MAX / 2, UINT32_MAX / 2 + 27, UINT32_MAX / 2 + 28,
					    UINT32_MAX / 2 + 29, UINT32_MAX - 1, UINT32_MAX};
	static const uint32_t seg[] = {0, 1, 4096};
	unsigned yes = 0, no = 0;

	for (unsigned a = 0; a < RR_ARRAY_SIZE(call_inl); a++)
		for (unsigned b = 0; b < RR_ARRAY_SIZE(seg); b++)
			for (unsigned e = 0; e < RR_ARRAY_SIZE(seg); e++) {
				struct rr_xprt_params p;
				struct rr_xprt_requester r;
				uint32_t ci = call_inl[a];
				uint32_t lens[] = {0,  1,  4,  7,  8,  9,  12, 16, ci - 29, ci - 28,
						   ci - 27, ci, UINT32_MAX / 2 - 1, UINT32_MAX / 2,
						   UINT32_MAX / 2 + 1, UINT32_MAX - 7, UINT32_MAX};

				rr_xprt_params_default(&p);
				p.call_inline = ci;
				p.max_seg_len = seg[b];
				p.max_segs = seg[e];
				rr_xprt_req_init(&r, NULL, &p, NULL);
				for (unsigned i = 0; i < RR_ARRAY_SIZE(lens); i++) {
					uint32_t len = lens[i];
					bool rule = len >= 8 && len <= UINT32_MAX / 2 &&
						    28 + (uint64_t)len <= ci && p.max_seg_len &&
						    p.max_segs;
					bool lim = len - 8u < r.short_lim;

					if (rule != lim)
						fprintf(stderr, "call_inline %u seg %u/%u len %u: rule %d limit %d\n",
							ci, p.max_seg_len, p.max_segs, len, rule, lim);
					REQUIRE_EQ(rule, lim);
					rule ? yes++ : no++;
				}
				rr_xprt_req_fini(&r);
			}
	CHECK(yes > 100);
	CHECK(no > 100);
}

/* @a (from requester A, its call @ca, its message @ba) says what @b (B,
 * @cb, @bb) says. */
static void same_reply(const struct rr_xprt_reply *a, const struct rr_xprt_reply *b,
		       const struct rr_xprt_rqst *ca, const struct rr_xprt_rqst *cb,
		       const uint8_t *ba, const uint8_t *bb)
{
	REQUIRE_EQ(a->kind, b->kind);
	REQUIRE_EQ(a->call == ca, b->call == cb);
	REQUIRE_EQ(a->call == NULL, b->call == NULL);
	REQUIRE_EQ(a->inv_other == NULL, b->inv_other == NULL);
	if (a->kind == RR_XPRT_R_DROP)
		return;
	REQUIRE_EQ(a->credit, b->credit);
	REQUIRE_EQ(a->err, b->err);
	REQUIRE_EQ(a->nsinks, b->nsinks);
	for (unsigned i = 0; i < a->nsinks; i++) {
		REQUIRE_EQ(a->sink_len[i], b->sink_len[i]);
		REQUIRE_EQ(a->sink_placed[i], b->sink_placed[i]);
	}
	REQUIRE_EQ(a->long_reply, b->long_reply);
	if (a->kind == RR_XPRT_R_REPLY) {
		REQUIRE_EQ(a->payload_len, b->payload_len);
		if (a->long_reply)
			REQUIRE(a->payload == ca->reply_buf && b->payload == cb->reply_buf);
		else
			REQUIRE_EQ(a->payload - ba, b->payload - bb);
	}
	if (a->kind == RR_XPRT_R_PULL) {
		REQUIRE_EQ(a->xid, b->xid);
		REQUIRE_EQ(a->pull_nsegs, b->pull_nsegs);
		REQUIRE_EQ(a->pull_len, b->pull_len);
		REQUIRE_EQ(a->pull_inv, b->pull_inv);
		REQUIRE_EQ(a->pull_stag, b->pull_stag);
	}
}

TEST(xprt_reply_short_as_general)
{
	static const uint32_t reply_inl[] = {0, 35, 36, 40, 64, 1024, 4096};
	static const uint32_t lens[] = {0, 3, 4, 27, 28, 31, 32, 35, 36, 37, 40, 44, 64, 200};
	static const uint8_t vals[] = {0, 1, 2, 3, 4, 0x7f, 0x80, 0xff};
	static uint8_t arg[64], sinkb[64], bufa[300], bufb[300], snd[4096];
	unsigned one_pass = 0, other = 0;

	for (unsigned it = 0; it < 40000; it++) {
		struct rr_xprt_params p;
		struct rr_xprt_requester ra, rb;
		struct rr_xprt_stats sa, sb;
		struct rr_xprt_part part = {arg, sizeof(arg), false};
		struct rr_xprt_sink sk = {sinkb, sizeof(sinkb)};
		struct rr_xprt_rqst_desc d;
		struct rr_xprt_rqst *ca, *cb;
		struct rr_xprt_reply oa, ob;
		uint32_t xid = rnd(), mxid, stag = 0;
		size_t len = PICK(lens);
		bool has_inv = rnd() % 8 == 0;

		rr_xprt_params_default(&p);
		p.call_inline = 4096;
		p.reply_inline = rnd() % 4 ? 4096 : PICK(reply_inl);
		p.reliable_reply = rnd() % 4 == 0;
		p.inline_ddp = rnd() & 1;
		memset(&sa, 0, sizeof(sa));
		memset(&sb, 0, sizeof(sb));
		rr_xprt_req_init(&ra, NULL, &p, &sa);
		rr_xprt_req_init(&rb, NULL, &p, &sb);
		memset(&d, 0, sizeof(d));
		d.xid = xid;
		d.parts = &part;
		d.nparts = 1;
		d.sinks = &sk;
		d.nsinks = rnd() % 3 == 0;
		d.max_reply = rnd() % 3 ? 100 : 1u << 20;   /* the latter: a Reply chunk */
		REQUIRE_EQ(rr_xprt_rqst_prepare_general(&ra, &d, &ca), 0);
		REQUIRE_EQ(rr_xprt_rqst_prepare_general(&rb, &d, &cb), 0);
		reg_all(ca);
		reg_all(cb);
		REQUIRE(rr_xprt_rqst_marshal_general(&ra, ca, 8, snd, sizeof(snd)) > 0);
		REQUIRE(rr_xprt_rqst_marshal_general(&rb, cb, 8, snd, sizeof(snd)) > 0);
		if (has_inv)
			stag = rnd() % 2 && ca->nregs ? ca->regs[0].stag : rnd();

		/* the common short Reply, then one of its near misses */
		mxid = rnd() % 8 ? xid : rnd();
		memset(bufa, 0, sizeof(bufa));
		rr_put_be32(bufa, mxid);
		rr_put_be32(bufa + 4, 1);
		rr_put_be32(bufa + 8, rnd() % 4 ? rnd() % 130 : rnd());
		rr_put_be32(bufa + 12, RR_HDR_MSG);
		rr_put_be32(bufa + 28, mxid);
		rr_put_be32(bufa + 32, 1);
		for (unsigned i = 36; i < sizeof(bufa); i++)
			bufa[i] = (uint8_t)rnd();
		if (rnd() % 2)
			bufa[rnd() % 40] = PICK(vals);
		if (rnd() % 4 == 0)
			len = 36 + rnd() % (sizeof(bufa) - 36);
		memcpy(bufb, bufa, sizeof(bufa));
		memset(&oa, 0xff, sizeof(oa));
		memset(&ob, 0xff, sizeof(ob));
		rr_xprt_req_recv(&ra, bufa, len, has_inv, stag, &oa);
		rr_xprt_req_recv_found_general(&rb, len >= 4 ? rr_xprt_req_find(&rb, rr_get_be32(bufb)) : NULL,
					       bufb, len, has_inv, stag, &ob);
		same_reply(&oa, &ob, ca, cb, bufa, bufb);
		REQUIRE(memcmp(&sa, &sb, sizeof(sa)) == 0);
		REQUIRE_EQ(ra.outstanding, rb.outstanding);
		REQUIRE_EQ(ca->outstanding, cb->outstanding);
		for (unsigned i = 0; i < ca->nregs; i++)
			REQUIRE_EQ(ca->regs[i].valid, cb->regs[i].valid);
		if (oa.kind == RR_XPRT_R_REPLY && !has_inv && !oa.long_reply && len <= p.reply_inline)
			one_pass++;
		else
			other++;
		rr_xprt_rqst_release(&ra, ca);
		rr_xprt_rqst_release(&rb, cb);
		rr_xprt_req_fini(&ra);
		rr_xprt_req_fini(&rb);
	}
	CHECK(one_pass > 1000);
	CHECK(other > 1000);
}
