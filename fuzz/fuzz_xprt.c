/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the transport core (proto/xprt.h): every input is
 * received by a responder as a Call (RFC 8166 sections 3.5, 5.5) -- with any
 * Read it asks for "performed" by filling the destination with a pattern --
 * then answered with a Reply that has a DDP-eligible item; and received by a
 * requester that has one outstanding Call with a Write chunk and a Reply
 * chunk. Checked: no crash or leak; every Read lands inside the receive
 * context; a Reply never writes more into a Write or Reply chunk than the
 * chunk's segments hold; an RDMA_ERROR answer is 20 or 28 bytes; a completed
 * requester Reply's payload lies inside the Receive or the Reply chunk; the
 * Reply built by rr_xprt_rsp_reply equals the general builder's
 * (rr_xprt_rsp_reply_general: its one-pass form); a Call planned and
 * written by rr_xprt_rqst_prepare and rr_xprt_rqst_marshal equals the
 * general planner's and builder's (their one-pass Short Call), the
 * thresholds and the Call's shape taken from the input's first bytes, and
 * the rest of the input received as its Reply both ways (the one-pass
 * short Reply of rr_xprt_req_recv_found against the general checks). */
#include <stdio.h>
#include <stdlib.h>

#include "proto/xprt.h"

#define FAIL(msg)                                                              \
	do {                                                                   \
		fprintf(stderr, "fuzz_xprt: %s (line %d)\n", msg, __LINE__);   \
		abort();                                                       \
	} while (0)

/* @w lies inside one segment of chunk @c of the Call's header @h. */
static bool in_chunk(const struct rr_hdr *h, const struct rr_hdr_chunk *c,
		     const struct rr_xprt_write_op *w)
{
	for (uint32_t j = 0; j < c->nsegs; j++) {
		const struct rr_hdr_seg *g = &h->segs[c->first + j];

		if (g->handle == w->stag && w->remote >= g->offset &&
		    w->remote - g->offset + w->len <= g->length)
			return true;
	}
	return false;
}

static void responder(const uint8_t *data, size_t size)
{
	struct rr_xprt_params p;
	struct rr_xprt_responder s;
	struct rr_xprt_rcall *rc = NULL;
	static struct rr_xprt_reply_plan plan, plan2;
	static uint8_t sendbuf[8192], sendbuf2[8192], item[3000];
	uint8_t err[32];
	size_t elen = 0;
	enum rr_xprt_rsp_action a;

	rr_xprt_params_default(&p);
	p.max_call = 1u << 20;
	p.reply_inline = 4096;
	p.call_inline = 4096;
	p.local_r = p.peer_r = true;
	rr_xprt_rsp_init(&s, NULL, &p, NULL);
	a = rr_xprt_rsp_recv(&s, data, size, 7, err, &elen, &rc);
	if (a == RR_XPRT_A_ERROR && elen != 20 && elen != 28)
		FAIL("error length");
	if (a == RR_XPRT_A_READ) {
		for (uint32_t i = 0; i < rc->nreads; i++) {
			const struct rr_xprt_read_op *o = &rc->reads[i];

			if ((uint64_t)o->local_off + o->len > rc->buf_len)
				FAIL("read outside the receive context");
			memset(rc->buf + o->local_off, 0x5a, o->len);
		}
		a = rr_xprt_rsp_assemble(&s, rc, 7, err, &elen);
	}
	if (a == RR_XPRT_A_DELIVER || a == RR_XPRT_A_READ) {
		uint8_t head[12] = {0};
		struct rr_xprt_part parts[3] = {
			{head, 12, false}, {item, (uint32_t)(size % sizeof(item)), true},
			{item, (uint32_t)(size * 7 % 5000 > 3000 ? 3000 : size * 7 % 5000), false}};

		int r1, r2;

		/* the one-pass Reply and the general builder agree (issue 16
		 * part AO): result, plan, bytes */
		memset(&plan, 0xa5, sizeof(plan));
		memset(&plan2, 0xa5, sizeof(plan2));
		memset(sendbuf, 0xa5, sizeof(sendbuf));
		memset(sendbuf2, 0xa5, sizeof(sendbuf2));
		r2 = rr_xprt_rsp_reply_general(&s, rc, parts, 3, (uint32_t)(size % 5), sendbuf2, sizeof(sendbuf2),
					       &plan2);
		r1 = rr_xprt_rsp_reply(&s, rc, parts, 3, (uint32_t)(size % 5), sendbuf, sizeof(sendbuf), &plan);
		if (r1 != r2 || memcmp(&plan, &plan2, sizeof(plan)) != 0 ||
		    memcmp(sendbuf, sendbuf2, sizeof(sendbuf)) != 0)
			FAIL("one-pass Reply differs from the general builder");
		if (r1 == 0) {
			/* every write inside one of the requester's chunks */
			for (uint32_t i = 0; i < plan.nwrites; i++) {
				const struct rr_xprt_write_op *w = &plan.writes[i];
				bool ok = false;

				for (uint32_t c = 0; c < rc->hdr.nwrite && !ok; c++)
					ok = in_chunk(&rc->hdr, &rc->hdr.write[c], w);
				if (!ok && rc->hdr.has_reply)
					ok = in_chunk(&rc->hdr, &rc->hdr.reply, w);
				if (!ok)
					FAIL("write outside the requester's chunks");
			}
			if (plan.send_len > sizeof(sendbuf))
				FAIL("send length");
		}
	}
	rr_xprt_rcall_release(&s, rc);
}

static void requester(const uint8_t *data, size_t size)
{
	struct rr_xprt_params p;
	struct rr_xprt_requester r;
	struct rr_xprt_rqst *c;
	struct rr_xprt_reply res;
	static uint8_t call[32], sink[512], send[4096], rbuf[4096];
	struct rr_xprt_part cp = {call, 32, false};
	struct rr_xprt_sink sk = {sink, sizeof(sink)};
	struct rr_xprt_rqst_desc d = {0, &cp, 1, &sk, 1, 20000};
	size_t n = size < sizeof(rbuf) ? size : sizeof(rbuf);

	if (size < 4)
		return;
	rr_xprt_params_default(&p);
	p.max_seg_len = 4096;
	rr_xprt_req_init(&r, NULL, &p, NULL);
	d.xid = rr_get_be32(data);   /* make the XID match often */
	rr_put_be32(call, d.xid);
	if (rr_xprt_rqst_prepare(&r, &d, &c)) {
		rr_xprt_req_fini(&r);
		return;
	}
	for (unsigned i = 0; i < c->nregs; i++) {
		c->regs[i].stag = 0x100 + i;
		c->regs[i].addr = 0x10000ull * (i + 1);
		c->regs[i].valid = true;
	}
	if (rr_xprt_rqst_marshal(&r, c, 4, send, sizeof(send)) < 0)
		FAIL("marshal");
	memcpy(rbuf, data, n);
	rr_xprt_req_recv(&r, rbuf, n, size & 1, 0x100, &res);
	if (res.kind == RR_XPRT_R_REPLY) {
		bool in_recv = res.payload >= rbuf && res.payload + res.payload_len <= rbuf + n;
		bool in_chunk = c->reply_buf && res.payload == c->reply_buf &&
				res.payload_len <= c->reply_len;

		if (!in_recv && !in_chunk)
			FAIL("payload outside its buffer");
		if (res.sink_len[0] > sizeof(sink))
			FAIL("sink overrun");
	}
	rr_xprt_rqst_release(&r, c);
	rr_xprt_req_fini(&r);
}

/* The rest of the input (after its first 12 bytes) received as a Reply
 * by requesters @ra and @rb, each with its Call (@ca, @cb) outstanding:
 * through rr_xprt_req_recv (its one-pass short Reply) and through
 * rr_xprt_req_recv_found_general; both must say the same and count the
 * same. @k: 1, the XID of the Call put at offsets 0 and 28 (the header's
 * and the Payload's); 2, the Reply's msg_type (1) at offset 32. */
static void short_reply(struct rr_xprt_requester *ra, struct rr_xprt_requester *rb,
			struct rr_xprt_rqst *ca, struct rr_xprt_rqst *cb, const uint8_t *data,
			size_t size, uint8_t k, const struct rr_xprt_stats *sa,
			const struct rr_xprt_stats *sb)
{
	static uint8_t ma[512], mb[512];
	struct rr_xprt_reply oa, ob;
	size_t n = size > 12 ? size - 12 : 0;

	n = n < sizeof(ma) ? n : sizeof(ma);
	memcpy(ma, data + (size > 12 ? 12 : size), n);
	if ((k & 1) && n >= 32) {
		rr_put_be32(ma, ca->xid);
		rr_put_be32(ma + 28, ca->xid);
	}
	if ((k & 2) && n >= 36)
		rr_put_be32(ma + 32, 1);
	memcpy(mb, ma, n);
	rr_xprt_req_recv(ra, ma, n, k & 4, 0x100, &oa);
	rr_xprt_req_recv_found_general(rb, n >= 4 ? rr_xprt_req_find(rb, rr_get_be32(mb)) : NULL,
				       mb, n, k & 4, 0x100, &ob);
	if (oa.kind != ob.kind || (oa.call == ca) != (ob.call == cb) ||
	    memcmp(sa, sb, sizeof(*sa)) || ra->outstanding != rb->outstanding)
		FAIL("one-pass short Reply taken unlike the general checks");
	if (oa.kind == RR_XPRT_R_REPLY &&
	    (oa.credit != ob.credit || oa.payload_len != ob.payload_len ||
	     oa.nsinks != ob.nsinks || oa.long_reply != ob.long_reply ||
	     (!oa.long_reply && oa.payload - ma != ob.payload - mb)))
		FAIL("one-pass short Reply's result differs");
}

/* The requester's one-pass Short Call without chunks against the general
 * planner and builder (rr_xprt_rqst_prepare_general,
 * rr_xprt_rqst_marshal_general): the input's first bytes choose the
 * thresholds, limits, Call description and buffer; both ways must return
 * the same, plan the same, write the same bytes and count the same. */
static void short_call(const uint8_t *data, size_t size)
{
	static uint8_t arg[512], sinkb[64], bufa[600], bufb[600];
	struct rr_xprt_params p;
	struct rr_xprt_requester ra, rb;
	struct rr_xprt_stats sa, sb;
	struct rr_xprt_part parts[2];
	struct rr_xprt_sink sk = {sinkb, sizeof(sinkb)};
	struct rr_xprt_rqst_desc d;
	struct rr_xprt_rqst *ca = NULL, *cb = NULL;
	uint8_t b[12] = {0};
	int rca, rcb;

	memcpy(b, data, size < sizeof(b) ? size : sizeof(b));
	rr_xprt_params_default(&p);
	p.call_inline = b[0] < 200 ? b[0] : 4096u * (b[0] - 199);
	p.reply_inline = b[1] < 200 ? b[1] : 4096u * (b[1] - 199);
	p.reliable_reply = b[2] & 1;
	p.inline_ddp = b[2] & 2;
	p.max_seg_len = (b[2] & 4) ? 16u << (b[3] & 15) : 0;
	p.max_segs = b[3] >> 4;
	memset(&sa, 0, sizeof(sa));
	memset(&sb, 0, sizeof(sb));
	rr_xprt_req_init(&ra, NULL, &p, (b[2] & 8) ? &sa : NULL);
	rr_xprt_req_init(&rb, NULL, &p, (b[2] & 8) ? &sb : NULL);
	memset(&d, 0, sizeof(d));
	d.xid = rr_get_be32(b + 8);
	d.nparts = (b[4] & 3) == 3 ? 2 : 1 - ((b[4] & 3) == 2);
	d.parts = (b[4] & 4) ? NULL : parts;
	for (unsigned i = 0; i < 2; i++) {
		parts[i].base = (b[4] & (8 << i)) ? NULL : arg + 256 * i;
		parts[i].len = b[5 + i];
		parts[i].ddp = b[4] & (32 << i);
	}
	d.nsinks = (b[7] & 1);
	d.sinks = &sk;
	sk.len = (b[7] & 2) ? 0 : sizeof(sinkb);
	d.max_reply = (uint32_t)(b[7] >> 2) * 64u;
	d.max_unknown = b[2] & 16;
	d.min_reply = (b[2] & 32) ? 8 : 0;
	rca = rr_xprt_rqst_prepare(&ra, &d, &ca);
	rcb = rr_xprt_rqst_prepare_general(&rb, &d, &cb);
	if (rca != rcb)
		FAIL("one-pass Short Call planned unlike the general planner");
	if (rca == 0) {
		size_t cap = (b[2] & 64) ? sizeof(bufa) : (size_t)b[8] % 64;
		int la, lb;

		if (ca->form != cb->form || ca->nregs != cb->nregs || ca->xdr_len != cb->xdr_len ||
		    ca->reduced_len != cb->reduced_len || ca->nitems != cb->nitems ||
		    ca->results_inline != cb->results_inline || ca->reply_reg != cb->reply_reg ||
		    ca->reply_len != cb->reply_len || ca->pullup_reg != cb->pullup_reg)
			FAIL("one-pass Short Call's plan differs");
		for (unsigned i = 0; i < ca->nregs; i++) {
			ca->regs[i].stag = cb->regs[i].stag = 0x100 + i;
			ca->regs[i].addr = cb->regs[i].addr = 0x10000ull * (i + 1);
			ca->regs[i].valid = cb->regs[i].valid = true;
		}
		memset(bufa, 0, sizeof(bufa));
		memset(bufb, 0, sizeof(bufb));
		la = rr_xprt_rqst_marshal(&ra, ca, b[9], bufa, cap);
		lb = rr_xprt_rqst_marshal_general(&rb, cb, b[9], bufb, cap);
		if (la != lb || memcmp(bufa, bufb, sizeof(bufa)) || memcmp(&sa, &sb, sizeof(sa)) ||
		    ra.outstanding != rb.outstanding)
			FAIL("one-pass Short Call written unlike the general builder");
		if (la >= 0)
			short_reply(&ra, &rb, ca, cb, data, size, b[10], &sa, &sb);
		rr_xprt_rqst_release(&ra, ca);
		rr_xprt_rqst_release(&rb, cb);
	}
	rr_xprt_req_fini(&ra);
	rr_xprt_req_fini(&rb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	responder(data, size);
	requester(data, size);
	short_call(data, size);
	return 0;
}
