/* SPDX-License-Identifier: BSD-2-Clause */
/* The Linux kernel NFS client (xprtrdma, 5.16 and later) as a requester, fed
 * to the responder core (src/proto/xprt.h) byte for byte as it builds its
 * Calls (net/sunrpc/xprtrdma/rpc_rdma.c, see /work/shared/spec README "Linux
 * as a requester"), so that a server on librpcrdma meets its habits in the
 * unit suite and not only in the lab (tests/interop/vm-nfsd.sh):
 *  - a Read list together with a Reply chunk in one RDMA_MSG (an NFS WRITE
 *    whose data goes in a Read chunk at the position after the inline head,
 *    with a Reply chunk for a reply it could not bound);
 *  - the extra pad segment in the Write chunk of an unaligned READ: the
 *    segments add up to more than the data, and the responder must neither
 *    write the XDR pad there nor return the unused segment as used;
 *  - 128 credits requested on every Call, a grant of at least 1 answered.
 * The "RDMA" is checked memory: each Read/Write names a segment the Call
 * offered and stays inside it. */
#include <stdlib.h>

#include "test.h"
#include "proto/xprt.h"

struct seg {
	uint32_t handle, len;
	uint64_t off;
};

static size_t put32(uint8_t *p, size_t at, uint32_t v)
{
	rr_put_be32(p + at, v);
	return at + 4;
}

static size_t put_seg(uint8_t *p, size_t at, const struct seg *s)
{
	at = put32(p, at, s->handle);
	at = put32(p, at, s->len);
	rr_put_be64(p + at, s->off);
	return at + 8;
}

/* The RPC Call an NFS client would send: xid CALL 2 100003 3 proc, AUTH_NONE,
 * then @body. */
static size_t rpc_call(uint8_t *p, uint32_t xid, uint32_t proc, const uint8_t *body,
		       size_t n)
{
	size_t at = 0;

	at = put32(p, at, xid);
	at = put32(p, at, 0);
	at = put32(p, at, 2);
	at = put32(p, at, 100003);
	at = put32(p, at, 3);
	at = put32(p, at, proc);
	for (int i = 0; i < 4; i++)
		at = put32(p, at, 0);
	memcpy(p + at, body, n);
	return at + n;
}

struct rsp {
	struct rr_test_env te;
	struct rr_xprt_params p;
	struct rr_xprt_stats st;
	struct rr_xprt_responder r;
};

static void rsp_init(struct rsp *t)
{
	memset(t, 0, sizeof(*t));
	rr_test_env_init(&t->te, 1);
	rr_xprt_params_default(&t->p);
	t->p.call_inline = t->p.reply_inline = 4096;   /* what Linux advertises */
	rr_xprt_rsp_init(&t->r, &t->te.env, &t->p, &t->st);
}

TEST(xprt_linux_read_list_with_reply_chunk)
{
	static uint8_t wire[8192], call[4096], data[5000], reply[8192], rchunk[16384];
	static uint8_t big_result[9000];
	uint8_t head[64], err[32];
	struct rsp t;
	struct rr_xprt_rcall *rc = NULL;
	struct rr_xprt_reply_plan plan;
	struct seg rd = {0x1111, sizeof(data), 0x7000}, rp = {0x2222, sizeof(rchunk), 0x9000};
	size_t at = 0, clen, hlen = 0, elen = 0;
	enum rr_xprt_rsp_action act;
	struct rr_xprt_part parts[1];

	rsp_init(&t);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + 5);
	/* WRITE3args head: fh<8> offset count stable, then the data's length
	 * word; the data itself (5000 bytes, already a multiple of 4) is the
	 * Read chunk at the position where it would start */
	hlen = put32(head, hlen, 8);
	memset(head + hlen, 0xab, 8);
	hlen += 8;
	rr_put_be64(head + hlen, 0);
	hlen += 8;
	hlen = put32(head, hlen, sizeof(data));
	hlen = put32(head, hlen, 2);
	hlen = put32(head, hlen, sizeof(data));
	clen = rpc_call(call, 0xabcd0001, 7, head, hlen);
	/* header: xid vers credits(128) RDMA_MSG; read list (1 position seg) 0;
	 * write list 0; reply chunk 1 {1 seg} */
	at = put32(wire, at, 0xabcd0001);
	at = put32(wire, at, 1);
	at = put32(wire, at, 128);
	at = put32(wire, at, 0);
	at = put32(wire, at, 1);
	at = put32(wire, at, (uint32_t)clen);  /* position: after the inline head */
	at = put_seg(wire, at, &rd);
	at = put32(wire, at, 0);
	at = put32(wire, at, 0);
	at = put32(wire, at, 1);
	at = put32(wire, at, 1);
	at = put_seg(wire, at, &rp);
	memcpy(wire + at, call, clen);
	at += clen;

	act = rr_xprt_rsp_recv(&t.r, wire, at, 64, err, &elen, &rc);
	REQUIRE_EQ(act, RR_XPRT_A_READ);
	CHECK_EQ(rc->hdr.credit, 128);
	REQUIRE_EQ(rc->nreads, 1);
	CHECK_EQ(rc->reads[0].stag, rd.handle);
	CHECK(rc->reads[0].remote == rd.off);
	CHECK_EQ(rc->reads[0].len, sizeof(data));
	REQUIRE(rc->reads[0].local_off + sizeof(data) <= rc->buf_len);
	memcpy(rc->buf + rc->reads[0].local_off, data, sizeof(data));
	act = rr_xprt_rsp_assemble(&t.r, rc, 64, err, &elen);
	REQUIRE_EQ(act, RR_XPRT_A_DELIVER);
	/* the rebuilt Call: inline head + data in place */
	REQUIRE_EQ(rc->msg_len, clen + sizeof(data));
	CHECK(memcmp(rc->msg, call, clen) == 0);
	CHECK(memcmp(rc->msg + clen, data, sizeof(data)) == 0);

	/* a reply larger than the 4096-byte inline threshold: Reply chunk,
	 * RDMA_NOMSG (Linux refuses RDMA_MSG with a used Reply chunk) */
	for (size_t i = 0; i < sizeof(big_result); i++)
		big_result[i] = (uint8_t)(i ^ 0x5a);
	rr_put_be32(big_result, 0xabcd0001);
	rr_put_be32(big_result + 4, 1);
	parts[0] = (struct rr_xprt_part){big_result, sizeof(big_result), false};
	REQUIRE_EQ(rr_xprt_rsp_reply(&t.r, rc, parts, 1, 64, reply, sizeof(reply), &plan), 0);
	CHECK(!plan.is_error);
	CHECK_EQ(plan.proc, 1 /* RDMA_NOMSG */);
	CHECK_EQ(rr_get_be32(reply + 8), 64);     /* grant, not 0 and not the 128 asked */
	REQUIRE(plan.nwrites >= 1);
	{
		uint32_t total = 0;

		for (uint32_t i = 0; i < plan.nwrites; i++) {
			const struct rr_xprt_write_op *w = &plan.writes[i];

			CHECK_EQ(w->stag, rp.handle);
			CHECK(w->remote >= rp.off && w->remote + w->len <= rp.off + rp.len);
			memcpy(rchunk + (w->remote - rp.off), w->src, w->len);
			total += w->len;
		}
		CHECK_EQ(total, sizeof(big_result));
		CHECK(memcmp(rchunk, big_result, sizeof(big_result)) == 0);
	}
	rr_xprt_rcall_release(&t.r, rc);
	rr_xprt_rsp_fini(&t.r);
	CHECK_EQ(t.te.live, 0);
}

TEST(xprt_linux_unaligned_read_pad_segment)
{
	static uint8_t wire[4096], call[1024], reply[8192], placed[2048], padseg[4];
	static uint8_t file[1001];
	uint8_t body[64], head_res[128], err[32];
	struct rsp t;
	struct rr_xprt_rcall *rc = NULL;
	struct rr_xprt_reply_plan plan;
	/* the pages segment sized to the READ count, then xprtrdma's small
	 * persistently registered pad segment */
	struct seg pages = {0x3333, 1001, 0x10000}, pad = {0x4444, 4, 0x20000};
	size_t at = 0, clen, blen = 0, elen = 0, rlen = 0;
	struct rr_xprt_part parts[3];
	enum rr_xprt_rsp_action act;
	uint32_t pos;

	rsp_init(&t);
	memset(placed, 0xee, sizeof(placed));
	memset(padseg, 0xee, sizeof(padseg));
	for (size_t i = 0; i < sizeof(file); i++)
		file[i] = (uint8_t)(i * 3 + 1);
	/* READ3args: fh<8> offset count */
	blen = put32(body, blen, 8);
	memset(body + blen, 0xcd, 8);
	blen += 8;
	rr_put_be64(body + blen, 0);
	blen += 8;
	blen = put32(body, blen, 1001);
	clen = rpc_call(call, 0xabcd0002, 6, body, blen);
	at = put32(wire, at, 0xabcd0002);
	at = put32(wire, at, 1);
	at = put32(wire, at, 128);
	at = put32(wire, at, 0);
	at = put32(wire, at, 0);                 /* no read list */
	at = put32(wire, at, 1);                 /* write list: one chunk */
	at = put32(wire, at, 2);                 /* of two segments */
	at = put_seg(wire, at, &pages);
	at = put_seg(wire, at, &pad);
	at = put32(wire, at, 0);                 /* end of write list */
	at = put32(wire, at, 0);                 /* no reply chunk */
	memcpy(wire + at, call, clen);
	at += clen;

	act = rr_xprt_rsp_recv(&t.r, wire, at, 64, err, &elen, &rc);
	REQUIRE_EQ(act, RR_XPRT_A_DELIVER);
	CHECK_EQ(rc->hdr.credit, 128);
	/* READ3resok: reply header, status, post_op_attr (none), count, eof,
	 * then data<1001> DDP-eligible, XDR pad to 1004 */
	rlen = put32(head_res, rlen, 0xabcd0002);
	rlen = put32(head_res, rlen, 1);
	for (int i = 0; i < 4; i++)
		rlen = put32(head_res, rlen, 0);     /* accepted, verf, SUCCESS */
	rlen = put32(head_res, rlen, 0);         /* NFS3_OK */
	rlen = put32(head_res, rlen, 0);         /* no attributes */
	rlen = put32(head_res, rlen, 1001);      /* count */
	rlen = put32(head_res, rlen, 1);         /* eof */
	rlen = put32(head_res, rlen, 1001);      /* data length */
	parts[0] = (struct rr_xprt_part){head_res, (uint32_t)rlen, false};
	parts[1] = (struct rr_xprt_part){file, sizeof(file), true};
	REQUIRE_EQ(rr_xprt_rsp_reply(&t.r, rc, parts, 2, 64, reply, sizeof(reply), &plan), 0);
	CHECK(!plan.is_error);
	CHECK_EQ(plan.proc, 0 /* RDMA_MSG */);
	/* only the pages segment is written, exactly the data */
	for (uint32_t i = 0; i < plan.nwrites; i++) {
		const struct rr_xprt_write_op *w = &plan.writes[i];

		REQUIRE_EQ(w->stag, pages.handle);
		REQUIRE(w->remote >= pages.off && w->remote + w->len <= pages.off + pages.len);
		memcpy(placed + (w->remote - pages.off), w->src, w->len);
	}
	CHECK_EQ(plan.write_bytes, 1001);
	CHECK(memcmp(placed, file, 1001) == 0);
	CHECK_EQ(placed[1001], 0xee);            /* no XDR pad written past the data */
	CHECK_EQ(padseg[0], 0xee);
	/* the Reply's Write list: one chunk, one segment (the pad segment
	 * unused and omitted) with the data's length */
	pos = 16;
	CHECK_EQ(rr_get_be32(reply + 8), 64);
	CHECK_EQ(rr_get_be32(reply + pos), 0);        /* no read list */
	CHECK_EQ(rr_get_be32(reply + pos + 4), 1);    /* a write chunk */
	CHECK_EQ(rr_get_be32(reply + pos + 8), 1);    /* one segment used */
	CHECK_EQ(rr_get_be32(reply + pos + 12), pages.handle);
	CHECK_EQ(rr_get_be32(reply + pos + 16), 1001);
	CHECK_EQ(rr_get_be32(reply + pos + 28), 0);   /* end of write list */
	CHECK_EQ(rr_get_be32(reply + pos + 32), 0);   /* no reply chunk */
	/* inline: the RPC reply up to the data's length word, no data, no pad */
	CHECK_EQ(plan.send_len, pos + 36 + rlen);
	CHECK(memcmp(reply + pos + 36, head_res, rlen) == 0);
	rr_xprt_rcall_release(&t.r, rc);
	rr_xprt_rsp_fini(&t.r);
	CHECK_EQ(t.te.live, 0);
}
