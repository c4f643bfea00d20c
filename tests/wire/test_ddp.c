/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of DDP/RDMAP framing (RFC 5041, RFC 5040, RFC 5044 FPDUs,
 * draft-talpey-rdma-commit opcodes): encode/parse round trips of every
 * opcode with payloads from 0 bytes to 256 KiB and odd lengths, every split of
 * the byte stream (1 byte at a time, every cut point, random splits), CRC on
 * and off, CRC errors, a table of malformed segments each with its expected
 * Terminate (layer / error type / error code / header copy), the Terminate
 * codec in the RFC and the siw layouts. A small fake STag table stands in for
 * the provider's. */
#include "test.h"

#include <stdlib.h>

#include "rdma/soft/crc32c.h"
#include "rdma/soft/ddp.h"

/* ---- fake placement: 2 MRs, a receive queue ---- */

struct fake_mr {
	uint32_t stag;
	uint8_t *buf;
	uint64_t base; /* TO of buf[0] */
	uint32_t len;
	bool remote_write;
	int pd;
};

struct fake {
	struct fake_mr mr[3];
	int pd;
	struct iovec recv[4][2];
	unsigned recv_cnt[4];
	unsigned nrecv, recv_head;
	uint8_t recvbuf[2][300000];
	uint8_t tbuf[300000];
	uint8_t tbuf2[64];
};

static enum rr_rx_code fake_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
				   bool last, uint8_t **dst)
{
	struct fake *f = ctx;

	RR_UNUSED(last);
	RR_UNUSED(op);
	for (size_t i = 0; i < RR_ARRAY_SIZE(f->mr); i++) {
		struct fake_mr *m = &f->mr[i];

		if (!m->buf || m->stag != stag)
			continue;
		if (m->pd != f->pd)
			return RR_RXC_PD;
		if (!m->remote_write)
			return RR_RXC_ACCESS;
		if (to < m->base || to - m->base > m->len || len > m->len - (to - m->base))
			return RR_RXC_BOUNDS;
		*dst = m->buf + (to - m->base);
		return RR_RXC_OK;
	}
	return RR_RXC_INVALID_STAG;
}

static enum rr_rx_code fake_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				     const struct iovec **iov, unsigned *iovcnt)
{
	struct fake *f = ctx;
	unsigned slot;

	RR_UNUSED(mo);
	RR_UNUSED(len);
	RR_UNUSED(msn);
	if (f->recv_head >= f->nrecv)
		return RR_RXC_NO_RECV;
	slot = f->recv_head;
	*iov = f->recv[slot];
	*iovcnt = f->recv_cnt[slot];
	if (last)
		f->recv_head++;
	return RR_RXC_OK;
}

static const struct rr_ddp_rx_ops fake_ops = {.tagged = fake_tagged, .untagged = fake_untagged};

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	REQUIRE(f);
	f->mr[0] = (struct fake_mr){.stag = 0x1234ab, .buf = f->tbuf, .base = 0x10000,
				    .len = sizeof(f->tbuf), .remote_write = true};
	f->mr[1] = (struct fake_mr){.stag = 0x2222cd, .buf = f->tbuf2, .base = 0,
				    .len = sizeof(f->tbuf2), .remote_write = false};
	f->mr[2] = (struct fake_mr){.stag = 0x3333ef, .buf = f->tbuf2, .base = 0,
				    .len = sizeof(f->tbuf2), .remote_write = true, .pd = 7};
	return f;
}

/* Posts a receive of two SGEs (split at @cut) over recvbuf[0]. */
static void fake_post_recv(struct fake *f, size_t len, size_t cut)
{
	unsigned s = f->nrecv++;

	REQUIRE(s < 4);
	f->recv[s][0] = (struct iovec){f->recvbuf[s & 1], cut};
	f->recv[s][1] = (struct iovec){f->recvbuf[s & 1] + cut, len - cut};
	f->recv_cnt[s] = 2;
}

/* ---- stream building ---- */

struct stream {
	uint8_t *b;
	size_t len, cap;
	unsigned fpdus;
};

static void st_msg(struct stream *s, struct rr_ddp_txmsg *m, bool crc, size_t fpdu_max)
{
	struct rr_fpdu f;

	while (rr_ddp_tx_next(m, crc, fpdu_max, &f) == 1) {
		size_t tot = 0;

		/* an RDMAP body on QN 1-3 is one segment, whatever fpdu_max */
		REQUIRE(f.len <= fpdu_max || fpdu_max < RR_FPDU_MIN ||
			(!m->tagged && m->qn != RR_QN_SEND));
		if (s->len + f.len > s->cap) {
			s->cap = (s->len + f.len) * 2;
			s->b = realloc(s->b, s->cap);
			REQUIRE(s->b);
		}
		for (unsigned i = 0; i < f.iovcnt; i++) {
			memcpy(s->b + s->len, f.iov[i].iov_base, f.iov[i].iov_len);
			s->len += f.iov[i].iov_len;
			tot += f.iov[i].iov_len;
		}
		REQUIRE_EQ(tot, f.len);
		CHECK_EQ(f.len % 4, 0);
		s->fpdus++;
	}
}

/* Feeds the stream with @chunk-sized pieces (0 = random sizes); collects events. */
static int st_feed(struct rr_ddp_rx *rx, const struct stream *s, size_t chunk, uint64_t seed,
		   struct rr_ddp_event *evs, unsigned max_ev, unsigned *nev)
{
	size_t off = 0;
	uint64_t x = seed | 1;

	*nev = 0;
	while (off < s->len) {
		size_t c = chunk, used;
		int r;

		if (!c) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			c = 1 + x % 97;
		}
		c = RR_MIN(c, s->len - off);
		r = rr_ddp_rx_feed(rx, s->b + off, c, &used, &evs[*nev < max_ev ? *nev : max_ev - 1]);
		off += used;
		if (r < 0)
			return r;
		if (r == 1 && *nev < max_ev)
			(*nev)++;
	}
	return 0;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed + (i >> 8));
}

/* ---- round trips ---- */

TEST(ddp_write_roundtrip_sizes_and_splits)
{
	static const size_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 1419, 1420, 1421, 1440, 1441, 4097, 65537, 262147};
	static uint8_t src[262147 + 16];
	struct fake *f = fake_new();

	fill(src, sizeof(src), 3);
	for (size_t si = 0; si < RR_ARRAY_SIZE(sizes); si++)
		for (int crc = 0; crc < 2; crc++) {
			size_t n = sizes[si];
			struct iovec v[3] = {{src, n / 3}, {src + n / 3, 0}, {src + n / 3, n - n / 3}};
			struct rr_ddp_txmsg m;
			struct stream s = {0};
			struct rr_ddp_event ev[256];
			unsigned nev;
			size_t chunks[] = {1, 3, 1460, 0, 100000};

			REQUIRE_EQ(rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, 0x1234ab, 0x10000 + 5, v, 3), 0);
			st_msg(&s, &m, crc, RR_FPDU_DEFAULT);
			CHECK_EQ(s.fpdus, n ? (n + 1439) / 1440 : 1);
			for (size_t ci = 0; ci < RR_ARRAY_SIZE(chunks); ci++) {
				struct rr_ddp_rx rx;

				if (n > 5000 && chunks[ci] == 1)
					continue; /* 1-byte splits below; keep the test quick */
				memset(f->tbuf, 0, n + 16);
				rr_ddp_rx_init(&rx, &fake_ops, f, crc, false);
				REQUIRE_EQ(st_feed(&rx, &s, chunks[ci], si * 7 + ci, ev, 256, &nev), 0);
				REQUIRE_EQ(nev, s.fpdus);
				CHECK_EQ(ev[nev - 1].type, RR_EV_TAGGED);
				CHECK(ev[nev - 1].last);
				CHECK_MEM(f->tbuf + 5, src, n);
				CHECK_EQ(f->tbuf[4], 0);
				CHECK_EQ(f->tbuf[5 + n], 0);
			}
			free(s.b);
		}
	free(f);
}

TEST(ddp_send_every_cut_point)
{
	/* two Sends of 37 and 1501 bytes, CRC on: cut the stream at every
	 * position into two feeds, and feed it one byte at a time */
	static uint8_t src[1501];
	struct fake *f = fake_new();
	struct stream s = {0};
	struct rr_ddp_txmsg m;
	struct iovec v;

	fill(src, sizeof(src), 9);
	v = (struct iovec){src, 37};
	rr_ddp_txmsg_untagged(&m, RR_OP_SEND_SE, RR_QN_SEND, 1, 0, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	v = (struct iovec){src, 1501};
	rr_ddp_txmsg_untagged(&m, RR_OP_SEND_INV, RR_QN_SEND, 2, 0xabcdef01, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	REQUIRE_EQ(s.fpdus, 3);
	for (size_t cut = 0; cut <= s.len; cut++) {
		struct rr_ddp_rx rx;
		struct rr_ddp_event ev[8];
		unsigned nev = 0;
		size_t used, off = 0;
		int r;

		f->nrecv = f->recv_head = 0;
		fake_post_recv(f, 40, 13);
		fake_post_recv(f, 1600, 700);
		memset(f->recvbuf, 0, sizeof(f->recvbuf));
		rr_ddp_rx_init(&rx, &fake_ops, f, true, false);
		while (off < s.len) {
			size_t end = off < cut ? cut : s.len;

			r = rr_ddp_rx_feed(&rx, s.b + off, end - off, &used, &ev[nev]);
			REQUIRE(r >= 0);
			off += used;
			nev += (unsigned)r;
		}
		REQUIRE_EQ(nev, 3);
		CHECK_EQ(ev[0].type, RR_EV_SEND);
		CHECK_EQ(ev[0].op, RR_OP_SEND_SE);
		CHECK(ev[0].last);
		CHECK_EQ(ev[0].msg_len, 37);
		CHECK_EQ(ev[0].inv_stag, 0);
		CHECK(!ev[1].last);
		CHECK_EQ(ev[2].msn, 2);
		CHECK(ev[2].last);
		CHECK_EQ(ev[2].msg_len, 1501);
		CHECK_EQ(ev[2].inv_stag, 0xabcdef01);
		CHECK_MEM(f->recvbuf[0], src, 37);
		CHECK_MEM(f->recvbuf[1], src, 1501);
	}
	/* one byte at a time */
	{
		struct rr_ddp_rx rx;
		struct rr_ddp_event ev[8];
		unsigned nev;

		f->nrecv = f->recv_head = 0;
		fake_post_recv(f, 40, 1);
		fake_post_recv(f, 1501, 1500);
		rr_ddp_rx_init(&rx, &fake_ops, f, true, false);
		REQUIRE_EQ(st_feed(&rx, &s, 1, 0, ev, 8, &nev), 0);
		CHECK_EQ(nev, 3);
		CHECK_MEM(f->recvbuf[1], src, 1501);
	}
	free(s.b);
	free(f);
}

TEST(ddp_small_fpdu_max_and_msn_wrap)
{
	static uint8_t src[999];
	struct fake *f = fake_new();
	struct stream s = {0};
	struct rr_ddp_txmsg m;
	struct rr_ddp_rx rx;
	struct rr_ddp_event ev[64];
	struct iovec v = {src, sizeof(src)};
	unsigned nev;

	fill(src, sizeof(src), 1);
	rr_ddp_txmsg_untagged(&m, RR_OP_SEND, RR_QN_SEND, 0xffffffffu, 0, &v, 1);
	st_msg(&s, &m, false, 64); /* 40 payload bytes per FPDU */
	rr_ddp_txmsg_untagged(&m, RR_OP_SEND, RR_QN_SEND, 0, 0, &v, 1);
	st_msg(&s, &m, false, 64);
	CHECK_EQ(s.fpdus, 2 * 25);
	fake_post_recv(f, 999, 500);
	fake_post_recv(f, 1000, 1);
	rr_ddp_rx_init(&rx, &fake_ops, f, false, false);
	rx.msn_expect[0] = 0xffffffffu; /* MSN wraps to 0 (RFC 5041 5.1) */
	REQUIRE_EQ(st_feed(&rx, &s, 0, 42, ev, 64, &nev), 0);
	CHECK_EQ(nev, 50);
	CHECK_EQ(rx.msn_expect[0], 1);
	CHECK_MEM(f->recvbuf[1], src, 999);
	free(s.b);
	free(f);
}

/* A Commit Request of 32 regions (516 bytes) with a small fpdu_max (a
 * path MSS of 536 bytes holds less): one segment, which the receiver takes
 * whole. Found by fuzz_soft_rx: it was split, and the peer terminated the
 * connection (DDP, untagged, message too long). */
TEST(ddp_commit_request_is_one_segment)
{
	struct fake *f = fake_new();
	struct stream s = {0};
	struct rr_ddp_txmsg m;
	struct rr_ddp_rx rx;
	struct rr_ddp_event ev[4];
	struct rr_commit_req cr = {.id = 5, .nregions = RR_COMMIT_MAX_REGIONS};
	uint8_t body[RR_RX_BODY_MAX];
	struct iovec v = {body, 0};
	unsigned nev;
	int n;

	for (unsigned i = 0; i < cr.nregions; i++)
		cr.region[i] = (struct rr_commit_region){0x100 + i, 4096, 4096ull * i};
	n = rr_rdmap_commit_req_encode(&cr, body, sizeof(body));
	REQUIRE_EQ(n, 4 + 32 * 16);
	v.iov_len = (size_t)n;
	rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, RR_QN_READ, 1, 0, &v, 1);
	st_msg(&s, &m, true, 536);
	rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, RR_QN_READ, 2, 0, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_MIN);
	CHECK_EQ(s.fpdus, 2);
	rr_ddp_rx_init(&rx, &fake_ops, f, true, true);
	REQUIRE_EQ(st_feed(&rx, &s, 0, 7, ev, 4, &nev), 0);
	REQUIRE_EQ(nev, 2);
	CHECK_EQ(ev[1].type, RR_EV_COMMIT_REQ);
	CHECK_EQ(ev[1].u.creq.nregions, 32);
	CHECK(ev[1].u.creq.region[31].to == 4096ull * 31);
	free(s.b);
	free(f);
}

TEST(ddp_read_request_response_terminate_commit_roundtrip)
{
	struct fake *f = fake_new();
	struct stream s = {0};
	struct rr_ddp_txmsg m;
	struct rr_ddp_rx rx;
	struct rr_ddp_event ev[16];
	struct rr_rreq rq = {.sink_stag = 0x1234ab, .sink_to = 0x10000, .size = 3,
			     .src_stag = 0x99, .src_to = 0x1122334455667788ull}, got;
	struct rr_commit_req cr = {.id = 77, .nregions = 2,
				   .region = {{0x1234ab, 100, 0x10000}, {0x5, 7, 9}}};
	struct rr_commit_resp cp = {.id = 77, .status = 0};
	struct rr_term t = {.layer = RR_TL_DDP, .etype = RR_DDP_ET_UNTAGGED, .ecode = 3};
	uint8_t body[RR_RREQ_BODY], cbody[64], pbody[8], tfpdu[RR_TERM_FPDU_MAX];
	struct iovec v;
	unsigned nev;
	size_t tl;

	rr_rdmap_rreq_encode(&rq, body);
	v = (struct iovec){body, sizeof(body)};
	rr_ddp_txmsg_untagged(&m, RR_OP_READ_REQ, RR_QN_READ, 1, 0, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	v = (struct iovec){"abc", 3};
	rr_ddp_txmsg_tagged(&m, RR_OP_READ_RESP, 0x1234ab, 0x10000, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	REQUIRE_EQ(rr_rdmap_commit_req_encode(&cr, cbody, sizeof(cbody)), 36);
	v = (struct iovec){cbody, 36};
	rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, RR_QN_READ, 2, 0, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	rr_rdmap_commit_resp_encode(&cp, pbody);
	v = (struct iovec){pbody, 8};
	rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_RESP, RR_QN_RESP, 1, 0, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	tl = rr_ddp_build_terminate(&t, 1, true, tfpdu);
	memcpy(s.b + s.len, tfpdu, tl); /* room: cap doubled */
	s.len += tl;
	rr_ddp_rx_init(&rx, &fake_ops, f, true, true);
	CHECK_EQ(st_feed(&rx, &s, 1, 0, ev, 16, &nev), 0);
	CHECK_EQ(rr_ddp_rx_advance(&rx, 1, &ev[15]), -ECONNRESET); /* dead after it */
	REQUIRE_EQ(nev, 5);
	REQUIRE_EQ(ev[0].type, RR_EV_READ_REQ);
	got = ev[0].u.rreq;
	CHECK_EQ(got.sink_stag, rq.sink_stag);
	CHECK(got.src_to == rq.src_to);
	CHECK_EQ(got.size, 3);
	CHECK_EQ(ev[1].type, RR_EV_TAGGED);
	CHECK_EQ(ev[1].op, RR_OP_READ_RESP);
	CHECK_MEM(f->tbuf, "abc", 3);
	REQUIRE_EQ(ev[2].type, RR_EV_COMMIT_REQ);
	CHECK_EQ(ev[2].u.creq.id, 77);
	CHECK_EQ(ev[2].u.creq.nregions, 2);
	CHECK_EQ(ev[2].u.creq.region[1].len, 7);
	REQUIRE_EQ(ev[3].type, RR_EV_COMMIT_RESP);
	CHECK_EQ(ev[3].u.cresp.id, 77);
	REQUIRE_EQ(ev[4].type, RR_EV_TERMINATE);
	CHECK_EQ(ev[4].u.term.layer, RR_TL_DDP);
	CHECK_EQ(ev[4].u.term.ecode, 3);
	CHECK(!rx.term_valid); /* never answer a Terminate with one */
	free(s.b);
	free(f);
}

TEST(ddp_crc_error_terminates)
{
	struct fake *f = fake_new();
	struct stream s = {0};
	struct rr_ddp_txmsg m;
	struct rr_ddp_rx rx;
	struct rr_ddp_event ev[4];
	struct iovec v = {"hello world", 11};
	unsigned nev;

	rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, 0x1234ab, 0x10000, &v, 1);
	st_msg(&s, &m, true, RR_FPDU_DEFAULT);
	for (size_t i = 0; i < s.len; i++) {
		if (i < 4)
			continue; /* length/control errors are other tests */
		s.b[i] ^= 0x20;
		rr_ddp_rx_init(&rx, &fake_ops, f, true, false);
		int r = st_feed(&rx, &s, 3, 0, ev, 4, &nev);

		CHECK_EQ(r, -EPROTO);
		if (i >= 16) { /* header intact: the CRC catches it */
			CHECK_EQ(rx.term.layer, RR_TL_LLP);
			CHECK_EQ(rx.term.ecode, RR_LLP_EC_CRC);
		}
		CHECK(rx.term_valid);
		s.b[i] ^= 0x20;
	}
	/* with CRC off the same corruption of the payload is not detected,
	 * and the CRC field (zero) is ignored */
	s.len = 0;
	s.fpdus = 0;
	rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, 0x1234ab, 0x10000, &v, 1);
	st_msg(&s, &m, false, RR_FPDU_DEFAULT);
	CHECK_MEM(s.b + s.len - 4, "\0\0\0\0", 4);
	s.b[20] ^= 1;
	rr_ddp_rx_init(&rx, &fake_ops, f, false, false);
	CHECK_EQ(st_feed(&rx, &s, 3, 0, ev, 4, &nev), 0);
	CHECK_EQ(nev, 1);
	free(s.b);
	free(f);
}

/* ---- malformed segments ---- */

struct bad_case {
	const char *name;
	int kind;          /* 0 write, 1 send, 2 read req, 3 commit resp, 4 commit req */
	uint16_t ctrl_xor; /* applied to the control word */
	int field;         /* 0 none; 1 qn; 2 msn; 3 mo; 4 stag; 5 to; 6 ulpdu; 7 len change */
	uint64_t value;
	bool commit;
	int nrecv;         /* receives posted */
	uint8_t layer, etype, ecode;
	bool hdr_copy;
};

static const struct bad_case bad_cases[] = {
	{"ddp version 0 (untagged)", 1, 0x0100, 0, 0, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_VERSION, false},
	{"ddp version 3 (tagged)", 0, 0x0200, 0, 0, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_VERSION, false},
	{"rdmap version 0", 1, 0x0040, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_VERSION, false},
	{"rdmap version 2", 0, 0x00c0, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_VERSION, false},
	{"opcode 8", 1, 0x000b, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"opcode 0xf", 1, 0x000c, 0, 0, true, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"commit response not negotiated", 3, 0, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"commit request not negotiated", 4, 0, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"write without T", 0, 0x8000, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"send with T", 1, 0x8000, 0, 0, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false},
	{"send on QN 1", 1, 0, 1, 1, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN, true},
	{"send on QN 9", 1, 0, 1, 9, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN, true},
	{"read request on QN 0", 2, 0, 1, 0, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN, true},
	{"send MSN 2, expected 1", 1, 0, 2, 2, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_RANGE, true},
	{"send MSN 0", 1, 0, 2, 0, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_RANGE, true},
	{"read request MSN 5", 2, 0, 2, 5, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_RANGE, true},
	{"send MO 4 first", 1, 0, 3, 4, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MO, true},
	{"send without posted receive", 1, 0, 0, 0, false, 0, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_NOBUF, true},
	{"send longer than receive", 1, 0, 7, 200, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true},
	{"write invalid STag", 0, 0, 4, 0x777777, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG, true},
	{"write wrong key byte", 0, 0, 4, 0x1234ac, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG, true},
	{"write below base", 0, 0, 5, 0xffff, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_BOUNDS, true},
	{"write past end", 0, 0, 5, 0x10000 + 300000 - 5, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_BOUNDS, true},
	{"write TO wrap", 0, 0, 5, 0xfffffffffffffffcull, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_TO_WRAP, true},
	{"write no remote write right", 0, 0, 4, 0x2222cd, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_ACCESS, true},
	{"write STag of another PD", 0, 0, 4, 0x3333ef, false, 1, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_STAG_NOT_ASSOC, true},
	{"read request body 24 bytes", 2, 0, 7, 24, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true},
	{"read request not last", 2, RR_DDP_L, 0, 0, false, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true},
	{"ULPDU_Length below header", 1, 0, 6, 10, false, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, false},
	{"commit response 4 bytes", 3, 0, 7, 4, true, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true},
	{"commit request 12 bytes", 4, 0, 7, 12, true, 1, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true},
	{"commit request 33 regions", 4, 0, 7, 4 + 33 * 16, true, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true},
	{"commit response on QN 1", 3, 0, 1, 1, true, 1, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN, true},
};

/* Builds one FPDU of the given kind with a field changed, CRC recomputed. */
static size_t build_bad(const struct bad_case *c, uint8_t *out)
{
	static uint8_t payload[2048];
	struct rr_ddp_txmsg m;
	struct rr_fpdu f;
	struct iovec v = {payload, 16};
	size_t len = 0, plen = 16;
	uint8_t *h;

	memset(payload, 0x5a, sizeof(payload));
	if (c->field == 7)
		plen = (size_t)c->value;
	switch (c->kind) {
	case 0:
		v.iov_len = plen;
		rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, 0x1234ab, 0x10000, &v, 1);
		break;
	case 1:
		v.iov_len = plen;
		rr_ddp_txmsg_untagged(&m, RR_OP_SEND, 0, 1, 0, &v, 1);
		break;
	case 2:
		v.iov_len = c->field == 7 ? plen : RR_RREQ_BODY;
		rr_ddp_txmsg_untagged(&m, RR_OP_READ_REQ, 1, 1, 0, &v, 1);
		break;
	case 3:
		v.iov_len = c->field == 7 ? plen : 8;
		rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_RESP, 3, 1, 0, &v, 1);
		break;
	default:
		v.iov_len = c->field == 7 ? plen : 20;
		rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, 1, 1, 0, &v, 1);
		break;
	}
	REQUIRE_EQ(rr_ddp_tx_next(&m, false, 4096, &f), 1);
	for (unsigned i = 0; i < f.iovcnt; i++) {
		memcpy(out + len, f.iov[i].iov_base, f.iov[i].iov_len);
		len += f.iov[i].iov_len;
	}
	h = out;
	rr_put_be16(h + 2, rr_get_be16(h + 2) ^ c->ctrl_xor);
	switch (c->field) {
	case 1: rr_put_be32(h + 8, (uint32_t)c->value); break;
	case 2: rr_put_be32(h + 12, (uint32_t)c->value); break;
	case 3: rr_put_be32(h + 16, (uint32_t)c->value); break;
	case 4: rr_put_be32(h + 4, (uint32_t)c->value); break;
	case 5: rr_put_be64(h + 8, c->value); break;
	case 6: rr_put_be16(h, (uint16_t)c->value); break;
	default: break;
	}
	{
		uint32_t crc = rr_crc32c(out, len - 4);

		rr_crc32c_put(out + len - 4, crc);
	}
	return len;
}

TEST(ddp_malformed_segment_table)
{
	struct fake *f = fake_new();
	static uint8_t buf[4096];

	for (size_t i = 0; i < RR_ARRAY_SIZE(bad_cases); i++) {
		const struct bad_case *c = &bad_cases[i];
		size_t len = build_bad(c, buf);

		for (int crc = 0; crc < 2; crc++)
			for (size_t chunk = 1; chunk <= len; chunk = chunk < 8 ? chunk + 1 : chunk * 3) {
				struct rr_ddp_rx rx;
				struct rr_ddp_event ev;
				size_t off = 0, used;
				int r = 0;

				f->nrecv = f->recv_head = 0;
				for (int k = 0; k < c->nrecv; k++)
					fake_post_recv(f, 100, 50);
				memset(f->tbuf, 0, 64);
				rr_ddp_rx_init(&rx, &fake_ops, f, crc, c->commit);
				while (off < len && r == 0) {
					r = rr_ddp_rx_feed(&rx, buf + off, RR_MIN(chunk, len - off), &used, &ev);
					off += used;
				}
				if (r != -EPROTO || rx.term.layer != c->layer || rx.term.etype != c->etype ||
				    rx.term.ecode != c->ecode)
					fprintf(stderr, "  case '%s' crc %d chunk %zu: r %d term %u/%u/%u\n",
						c->name, crc, chunk, r, rx.term.layer, rx.term.etype, rx.term.ecode);
				CHECK_EQ(r, -EPROTO);
				CHECK(rx.term_valid);
				CHECK_EQ(rx.term.layer, c->layer);
				CHECK_EQ(rx.term.etype, c->etype);
				CHECK_EQ(rx.term.ecode, c->ecode);
				CHECK_EQ(rx.term.m, c->hdr_copy);
				if (c->hdr_copy) {
					/* DDP Segment Length = ULPDU_Length, then the header copy */
					CHECK_MEM(rx.term.ddp_hdr, buf, rx.term.ddp_hdr_len);
					CHECK_EQ(rx.term.ddp_hdr_len, c->kind == 0 ? 16 : 20);
				}
				/* no byte was placed anywhere */
				CHECK_EQ(f->tbuf[0], 0);
				CHECK_EQ(f->recvbuf[0][0], 0);
				/* dead for good */
				CHECK_EQ(rr_ddp_rx_advance(&rx, 1, &ev), -EPROTO);
			}
	}
	free(f);
}

TEST(ddp_upper_layer_verdicts)
{
	/* the provider rejects what the parser reported: Read Request source
	 * STag, IRD overflow, Send with Invalidate of an MR */
	struct fake *f = fake_new();
	struct rr_rreq rq = {.sink_stag = 1, .sink_to = 2, .size = 3, .src_stag = 4, .src_to = 5};
	struct rr_ddp_txmsg m;
	struct rr_ddp_rx rx;
	struct rr_ddp_event ev;
	struct stream s = {0};
	uint8_t body[RR_RREQ_BODY];
	struct iovec v = {body, sizeof(body)};
	size_t used;

	rr_rdmap_rreq_encode(&rq, body);
	rr_ddp_txmsg_untagged(&m, RR_OP_READ_REQ, 1, 1, 0, &v, 1);
	st_msg(&s, &m, false, RR_FPDU_DEFAULT);
	rr_ddp_rx_init(&rx, &fake_ops, f, false, false);
	REQUIRE_EQ(rr_ddp_rx_feed(&rx, s.b, s.len, &used, &ev), 1);
	REQUIRE_EQ(ev.type, RR_EV_READ_REQ);
	CHECK_EQ(rr_ddp_rx_fail(&rx, RR_RXC_INVALID_STAG), -EPROTO);
	CHECK_EQ(rx.term.layer, RR_TL_RDMAP);
	CHECK_EQ(rx.term.etype, RR_RDMAP_ET_PROTECTION);
	CHECK_EQ(rx.term.ecode, RR_RDMAP_EC_INVALID_STAG);
	CHECK(rx.term.m && rx.term.d && rx.term.r);
	CHECK_MEM(rx.term.rdmap_hdr, body, RR_RREQ_BODY);

	rr_ddp_rx_init(&rx, &fake_ops, f, false, false);
	REQUIRE_EQ(rr_ddp_rx_feed(&rx, s.b, s.len, &used, &ev), 1);
	rr_ddp_rx_fail(&rx, RR_RXC_IRD);
	CHECK_EQ(rx.term.etype, RR_RDMAP_ET_OPERATION);
	CHECK_EQ(rx.term.ecode, RR_RDMAP_EC_CATA_STREAM);

	s.len = 0;
	v = (struct iovec){"x", 1};
	rr_ddp_txmsg_untagged(&m, RR_OP_SEND_INV, 0, 1, 0x1234ab, &v, 1);
	st_msg(&s, &m, false, RR_FPDU_DEFAULT);
	f->nrecv = f->recv_head = 0;
	fake_post_recv(f, 10, 5);
	rr_ddp_rx_init(&rx, &fake_ops, f, false, false);
	REQUIRE_EQ(rr_ddp_rx_feed(&rx, s.b, s.len, &used, &ev), 1);
	CHECK_EQ(ev.inv_stag, 0x1234ab);
	rr_ddp_rx_fail(&rx, RR_RXC_CANNOT_INV);
	CHECK_EQ(rx.term.layer, RR_TL_RDMAP);
	CHECK_EQ(rx.term.etype, RR_RDMAP_ET_OPERATION);
	CHECK_EQ(rx.term.ecode, RR_RDMAP_EC_CANNOT_INVALIDATE);
	CHECK(!rx.term.r);
	free(s.b);
	free(f);
}

/* ---- Terminate codec ---- */

TEST(rdmap_terminate_rfc_and_siw_layouts)
{
	struct rr_term t = {.layer = RR_TL_DDP, .etype = RR_DDP_ET_UNTAGGED, .ecode = 3,
			    .m = true, .d = true, .ddp_hdr_len = 20}, u;
	uint8_t out[RR_TERM_MAX_BODY], siw[RR_TERM_MAX_BODY];
	size_t n;

	rr_put_be16(t.ddp_hdr, 18);
	rr_put_be16(t.ddp_hdr + 2, 0x4143);
	n = rr_rdmap_term_encode(&t, out);
	REQUIRE_EQ(n, 24);
	CHECK_MEM(out, "\x12\x03\xc0\x00", 4);
	REQUIRE_EQ(rr_rdmap_term_decode(out, n, &u), 0);
	CHECK(!u.siw_layout);
	CHECK_EQ(u.layer, 1);
	CHECK_EQ(u.etype, 2);
	CHECK_EQ(u.ecode, 3);
	CHECK(u.m && u.d && !u.r);
	CHECK_MEM(u.ddp_hdr, t.ddp_hdr, 20);
	/* siw: 21 03 03 00 */
	memcpy(siw, out, n);
	memcpy(siw, "\x21\x03\x03\x00", 4);
	REQUIRE_EQ(rr_rdmap_term_decode(siw, n, &u), 0);
	CHECK(u.siw_layout);
	CHECK_EQ(u.layer, 1);
	CHECK_EQ(u.etype, 2);
	CHECK_EQ(u.ecode, 3);
	CHECK(u.m && u.d);
	/* siw Read Request protection error: layer 0 type 1, M D R (0x07) + rreq */
	{
		uint8_t b[52] = {0x10, 0x00, 0x07, 0x00};

		rr_put_be16(b + 6, 0x4141);
		REQUIRE_EQ(rr_rdmap_term_decode(b, 52, &u), 0);
		CHECK(u.siw_layout);
		CHECK_EQ(u.layer, RR_TL_RDMAP);
		CHECK_EQ(u.etype, RR_RDMAP_ET_PROTECTION);
		CHECK(u.r);
	}
	/* RFC layout, no headers: RDMAP catastrophic */
	CHECK_EQ(rr_rdmap_term_decode((const uint8_t *)"\x00\x00\x00\x00", 4, &u), 0);
	CHECK(!u.siw_layout && !u.m);
	/* truncated header copies, garbage */
	CHECK_EQ(rr_rdmap_term_decode(out, 10, &u), -EBADMSG);
	CHECK_EQ(rr_rdmap_term_decode(out, 3, &u), -EBADMSG);
	CHECK_EQ(rr_rdmap_term_decode((const uint8_t *)"\x33\x00\x00\x00", 4, &u), -EBADMSG);
	CHECK_EQ(rr_rdmap_term_decode((const uint8_t *)"\x12\x00\xff\x00", 4, &u), -EBADMSG);
}

TEST(rdmap_commit_codec)
{
	struct rr_commit_req c = {.id = 5, .nregions = 1, .region = {{1, 2, 3}}}, d;
	uint8_t b[600];

	CHECK_EQ(rr_rdmap_commit_req_encode(&c, b, 19), -ENOSPC);
	REQUIRE_EQ(rr_rdmap_commit_req_encode(&c, b, sizeof(b)), 20);
	CHECK_MEM(b, "\0\0\0\x05\0\0\0\x01\0\0\0\x02\0\0\0\0\0\0\0\x03", 20);
	REQUIRE_EQ(rr_rdmap_commit_req_decode(b, 20, &d), 0);
	CHECK_EQ(d.region[0].to, 3);
	CHECK_EQ(rr_rdmap_commit_req_decode(b, 21, &d), -EBADMSG);
	CHECK_EQ(rr_rdmap_commit_req_decode(b, 4, &d), -EBADMSG);
	c.nregions = 0;
	CHECK_EQ(rr_rdmap_commit_req_encode(&c, b, sizeof(b)), -EINVAL);
	c.nregions = RR_COMMIT_MAX_REGIONS + 1;
	CHECK_EQ(rr_rdmap_commit_req_encode(&c, b, sizeof(b)), -EINVAL);
}

/* rr_ddp_tx_one (the soft provider's one-pass small Send, issue 16 part W)
 * writes the bytes of rr_ddp_txmsg_untagged + rr_ddp_tx_next: every
 * payload length from 0 to 300 bytes in one, two and three pieces (an
 * empty piece among them), each Send opcode, CRC on and off, an MSN and
 * an invalidate STag that show in the header; and it declines (0) what
 * does not fit its buffer or one FPDU, or is not an untagged op, where
 * the caller must segment the general way. */
TEST(ddp_tx_one_as_tx_next)
{
	static const uint8_t ops[] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE,
				      RR_OP_SEND_SE_INV};
	static uint8_t src[300], one[512];
	unsigned checked = 0;

	fill(src, sizeof(src), 7);
	for (size_t n = 0; n <= sizeof(src); n++)
		for (unsigned pieces = 1; pieces <= 3; pieces++)
			for (unsigned k = 0; k < 8; k++) {
				size_t a = pieces > 1 ? n / 3 : n, b = pieces > 2 ? 0 : n - a;
				struct iovec v[3] = {{src, a}, {src + a, b}, {src + a + b, n - a - b}};
				uint8_t op = ops[k % 4];
				bool crc = k >= 4;
				uint32_t msn = 0x01020304u + (uint32_t)n, inv = 0xa0b0c0d0u ^ k;
				struct rr_ddp_txmsg m;
				struct stream s = {0};
				size_t len;

				REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, op, RR_QN_SEND, msn, inv, v, 3), 0);
				st_msg(&s, &m, crc, 4096);
				REQUIRE_EQ(s.fpdus, 1);
				len = rr_ddp_tx_one(op, RR_QN_SEND, msn, inv, v, 3, crc, 4096, one,
						    sizeof(one));
				REQUIRE_EQ(len, s.len);
				CHECK_MEM(one, s.b, len);
				free(s.b);
				checked++;
			}
	CHECK_EQ(checked, 301u * 3 * 8);
	{
		struct iovec v = {src, 200};
		struct rr_ddp_txmsg m;
		struct stream s = {0};

		/* the buffer: 200 + 18 header + 2 pad + 4 CRC = 224 bytes */
		CHECK_EQ(rr_ddp_tx_one(RR_OP_SEND, RR_QN_SEND, 1, 0, &v, 1, true, 4096, one, 223), 0);
		CHECK_EQ(rr_ddp_tx_one(RR_OP_SEND, RR_QN_SEND, 1, 0, &v, 1, true, 4096, one, 224),
			 224);
		/* two FPDUs of fpdu_max 128: declined, tx_next segments it */
		CHECK_EQ(rr_ddp_tx_one(RR_OP_SEND, RR_QN_SEND, 1, 0, &v, 1, false, 128, one,
				       sizeof(one)),
			 0);
		REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, RR_OP_SEND, RR_QN_SEND, 1, 0, &v, 1), 0);
		st_msg(&s, &m, false, 128);
		CHECK_EQ(s.fpdus, 2);
		free(s.b);
		/* tagged ops, an unknown queue, a missing iovec array */
		CHECK_EQ(rr_ddp_tx_one(RR_OP_WRITE, RR_QN_SEND, 1, 0, &v, 1, false, 4096, one,
				       sizeof(one)),
			 0);
		CHECK_EQ(rr_ddp_tx_one(RR_OP_READ_RESP, RR_QN_SEND, 1, 0, &v, 1, false, 4096, one,
				       sizeof(one)),
			 0);
		CHECK_EQ(rr_ddp_tx_one(RR_OP_SEND, RR_QN_COUNT, 1, 0, &v, 1, false, 4096, one,
				       sizeof(one)),
			 0);
		CHECK_EQ(rr_ddp_tx_one(RR_OP_SEND, RR_QN_SEND, 1, 0, NULL, 1, false, 4096, one,
				       sizeof(one)),
			 0);
	}
}

/* rr_ddp_tx_send1 (tx_send_bare's Send without rr_ddp_tx_one's checks,
 * issue 16 part BM) writes the bytes of rr_ddp_tx_one for the same Send in
 * one piece, for every payload length up to rr_ddp_tx_send_max and eight
 * past it, under FPDU sizes and buffer sizes around every rounding edge
 * (below RR_FPDU_MIN, not multiples of 4, smaller than an empty Send),
 * each Send opcode, CRC on and off; it writes nothing past the FPDU; and
 * rr_ddp_tx_send_max is exact: rr_ddp_tx_one takes every length up to it
 * and declines the first one past it. */
TEST(ddp_tx_send1_as_tx_one)
{
	static const uint8_t ops[] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE,
				      RR_OP_SEND_SE_INV};
	static const size_t fpdus[] = {0, 63, 64, 65, 66, 67, 68, 71, 100, 127, 128, 129,
				       130, 131, 1460, 9000, 70000};
	static const size_t caps[] = {0, 23, 24, 25, 26, 27, 28, 29, 31, 32, 64, 97, 98, 99,
				      100, 223, 224, 225, 256};
	static uint8_t src[300], one[300], fast[300 + 8];
	unsigned checked = 0, edges = 0;

	fill(src, sizeof(src), 3);
	for (size_t fi = 0; fi < sizeof(fpdus) / sizeof(fpdus[0]); fi++)
		for (size_t ci = 0; ci < sizeof(caps) / sizeof(caps[0]); ci++) {
			size_t max = rr_ddp_tx_send_max(fpdus[fi], caps[ci]);
			bool none = rr_ddp_tx_one(RR_OP_SEND, RR_QN_SEND, 1, 0,
						  &(struct iovec){src, 0}, 1, false, fpdus[fi],
						  one, caps[ci]) == 0;

			/* 0: not even an empty Send fits (or only an empty one) */
			if (none)
				CHECK_EQ(max, 0u);
			for (size_t n = 0; n <= max + 8 && n <= 256; n++)
				for (unsigned k = 0; k < 8; k++) {
					struct iovec v = {src + k, n};
					uint8_t op = ops[k % 4];
					bool crc = k >= 4;
					uint32_t msn = 0x11223344u * (uint32_t)(n + 1),
						 inv = 0xa1b2c3d4u ^ (uint32_t)(k * 77 + n);
					size_t want = rr_ddp_tx_one(op, RR_QN_SEND, msn, inv, &v, 1, crc,
								    fpdus[fi], one, caps[ci]),
					       got;

					if (none || n > max) {
						/* past the limit the general builder declines */
						CHECK_EQ(want, 0u);
						edges += n == max + 1;
						continue;
					}
					REQUIRE(want != 0);
					memset(fast, 0xa5, sizeof(fast));
					got = rr_ddp_tx_send1(op, msn, inv, n ? src + k : NULL, n, crc,
							      fast);
					REQUIRE_EQ(got, want);
					CHECK_MEM(fast, one, got);
					for (size_t i = got; i < sizeof(fast); i++)
						CHECK_EQ(fast[i], 0xa5);
					checked++;
				}
		}
	/* every combination with room for a Send reached its limit and past it */
	CHECK(checked > 20000);
	CHECK(edges > 500);
}

/* ---- a lone Send in one pass (rr_ddp_rx_send_one) against the general parser ---- */

struct one_out {
	int r;
	unsigned nev, fast; /* events; of them taken by rr_ddp_rx_send_one */
	struct rr_ddp_event ev[4];
	struct rr_ddp_rx rx;
	struct fake *f;
};

/* Parses @b (@n bytes) with @nrecv Receives of @rlen bytes (two SGEs cut
 * at @cut): @fast as the soft QP reads its stage (rr_ddp_rx_send_one, then
 * rr_ddp_rx_feed for what it declines), else one byte at a time (the
 * general parser's byte-wise path, never its bulk path). */
static void one_parse(const uint8_t *b, size_t n, bool crc, bool fast, unsigned nrecv, size_t rlen,
		      size_t cut, struct one_out *o)
{
	size_t off = 0;
	int r = 0;

	memset(o, 0, sizeof(*o));
	o->f = fake_new();
	for (unsigned i = 0; i < nrecv; i++)
		fake_post_recv(o->f, rlen, cut);
	rr_ddp_rx_init(&o->rx, &fake_ops, o->f, crc, false);
	while (off < n) {
		struct rr_ddp_event ev;
		size_t used = 0;

		r = 0;
		if (fast) {
			struct rr_ddp_rx before = o->rx;
			unsigned head = o->f->recv_head;

			r = rr_ddp_rx_send_one(&o->rx, b + off, n - off, &used, &ev);
			if (r == 0) {
				/* declined: nothing consumed, nothing changed,
				 * no Receive looked up */
				CHECK_EQ(used, 0);
				CHECK(memcmp(&before, &o->rx, sizeof(before)) == 0);
				CHECK_EQ(o->f->recv_head, head);
				r = rr_ddp_rx_feed(&o->rx, b + off, n - off, &used, &ev);
			} else if (r == 1) {
				o->fast++;
			}
		} else {
			r = rr_ddp_rx_feed(&o->rx, b + off, 1, &used, &ev);
		}
		off += used;
		if (r < 0)
			break;
		if (r == 1 && o->nev < RR_ARRAY_SIZE(o->ev))
			o->ev[o->nev++] = ev;
		REQUIRE(used > 0 || r == 1);
	}
	o->r = r;
}

/* What the two parses must agree on: the outcome, every event, the
 * parser's lasting state (per-queue MSN and MO, counters, the next header,
 * the Terminate) and the segment fields a later Terminate copies, the
 * Receive buffers and which Receives were consumed. */
static void one_same(const struct one_out *a, const struct one_out *b)
{
	CHECK_EQ(a->r, b->r);
	REQUIRE_EQ(a->nev, b->nev);
	for (unsigned i = 0; i < a->nev; i++) {
		const struct rr_ddp_event *x = &a->ev[i], *y = &b->ev[i];

		CHECK(x->type == y->type && x->op == y->op && x->last == y->last &&
		      x->len == y->len && x->msn == y->msn && x->mo == y->mo &&
		      x->inv_stag == y->inv_stag && x->msg_len == y->msg_len && x->stag == y->stag &&
		      x->to == y->to);
	}
	CHECK_EQ(a->rx.state, b->rx.state);
	CHECK_EQ(a->rx.err, b->rx.err);
	CHECK_EQ(a->rx.term_valid, b->rx.term_valid);
	if (a->rx.term_valid && b->rx.term_valid)
		CHECK(memcmp(&a->rx.term, &b->rx.term, sizeof(a->rx.term)) == 0);
	CHECK(memcmp(a->rx.msn_expect, b->rx.msn_expect, sizeof(a->rx.msn_expect)) == 0);
	CHECK(memcmp(a->rx.mo_expect, b->rx.mo_expect, sizeof(a->rx.mo_expect)) == 0);
	CHECK_EQ(a->rx.segments, b->rx.segments);
	CHECK_EQ(a->rx.bytes, b->rx.bytes);
	if (a->rx.state != RR_RX_DEAD) {
		CHECK_EQ(a->rx.hdr_have, b->rx.hdr_have);
		CHECK_EQ(a->rx.hdr_need, b->rx.hdr_need);
		CHECK_EQ(a->rx.crc_state, b->rx.crc_state);
	}
	if (a->nev && a->r >= 0) {
		/* what a later rr_ddp_rx_fail copies into its Terminate (a
		 * stream that died has its Terminate compared above): the
		 * fields, and the Terminates such a failure builds, of an
		 * untagged code (header attached) and a tagged one; the
		 * segment's other fields (seg_len, QN, MSN, MO, inv_stag)
		 * are the parse's own, not kept by rr_ddp_rx_send_one (issue
		 * 16 part FC) */
		static const enum rr_rx_code codes[] = {RR_RXC_CANNOT_INV, RR_RXC_BOUNDS,
							RR_RXC_NO_RECV};

		CHECK(memcmp(a->rx.hdr, b->rx.hdr, RR_HDR_UNTAGGED) == 0);
		CHECK_EQ(a->rx.ulpdu_len, b->rx.ulpdu_len);
		CHECK_EQ(a->rx.op, b->rx.op);
		CHECK_EQ(a->rx.tagged, b->rx.tagged);
		for (unsigned i = 0; i < RR_ARRAY_SIZE(codes) && a->rx.state != RR_RX_DEAD; i++) {
			struct rr_ddp_rx x = a->rx, y = b->rx;

			CHECK_EQ(rr_ddp_rx_fail(&x, codes[i]), rr_ddp_rx_fail(&y, codes[i]));
			CHECK_EQ(x.term_valid, y.term_valid);
			CHECK(memcmp(&x.term, &y.term, sizeof(x.term)) == 0);
		}
	}
	CHECK_EQ(a->f->recv_head, b->f->recv_head);
	CHECK(memcmp(a->f->recvbuf[0], b->f->recvbuf[0], 512) == 0);
	CHECK(memcmp(a->f->recvbuf[1], b->f->recvbuf[1], 512) == 0);
}

TEST(ddp_rx_send_one_as_general_parser)
{
	static const uint8_t ops[] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE,
				      RR_OP_SEND_SE_INV};
	/* every branch of the one-pass path's inline copy (ddp.c ddp_copy:
	 * 1-3, 4-7, 8-15, 16-32, 33-64, 65-128, memcpy above) at and
	 * around its bounds */
	static const size_t lens[] = {0,  1,  2,  3,  4,  7,  8,  15, 16,  24,
				      32, 33, 52, 64, 65, 68, 100, 128, 129, 200};
	static const uint8_t flips[] = {0x01, 0x40, 0xff};
	static uint8_t src[256];
	unsigned runs = 0, fast = 0;

	fill(src, sizeof(src), 11);
	for (size_t li = 0; li < RR_ARRAY_SIZE(lens); li++)
		for (unsigned k = 0; k < 8; k++) {
			size_t len = lens[li];
			uint8_t op = ops[k % 4];
			bool crc = k >= 4;
			struct iovec v = {src, len};
			struct rr_ddp_txmsg m;
			struct stream s = {0};
			size_t one;

			/* two lone Sends back to back (MSN 1 and 2) */
			REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, op, RR_QN_SEND, 1, 0xa1b2c3d4u, &v, 1), 0);
			st_msg(&s, &m, crc, 4096);
			one = s.len;
			REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, op, RR_QN_SEND, 2, 0x01020304u, &v, 1), 0);
			st_msg(&s, &m, crc, 4096);
			/* mutation -1: none; then each header byte, the first
			 * payload byte and the CRC's last byte, with each flip */
			for (int at = -1; at < (int)one; at++)
				for (size_t fi = 0; fi < RR_ARRAY_SIZE(flips); fi++) {
					static const size_t rl[][2] = {{256, 256}, {256, 0}, {256, 1},
								       {2, 2}};
					uint8_t *b;

					if (at >= RR_HDR_UNTAGGED && at != RR_HDR_UNTAGGED &&
					    at != (int)one - 1)
						continue;
					if (at < 0 && fi)
						continue;
					b = malloc(s.len);
					REQUIRE(b);
					memcpy(b, s.b, s.len);
					if (at >= 0)
						b[at] ^= flips[fi];
					for (size_t ri = 0; ri <= RR_ARRAY_SIZE(rl); ri++) {
						/* the last: no Receive posted */
						unsigned nrecv = ri < RR_ARRAY_SIZE(rl) ? 2 : 0;
						size_t rlen = ri < RR_ARRAY_SIZE(rl) ? rl[ri][0] : 0;
						size_t cut = ri < RR_ARRAY_SIZE(rl) ? rl[ri][1] : 0;
						struct one_out x, y;

						one_parse(b, s.len, crc, true, nrecv, rlen, cut, &x);
						one_parse(b, s.len, crc, false, nrecv, rlen, cut, &y);
						one_same(&x, &y);
						if (at < 0 && nrecv && rlen >= len && cut == rlen)
							CHECK_EQ(x.fast, 2u); /* both taken in one pass */
						fast += x.fast;
						runs++;
						free(x.f);
						free(y.f);
					}
					free(b);
				}
			free(s.b);
		}
	/* lengths x 8 x 67 mutations x 5 Receive shapes */
	CHECK_EQ(runs, (unsigned)RR_ARRAY_SIZE(lens) * 8u * 67u * 5u);
	CHECK(fast > 1000);
	{
		/* a Send in two segments (Last clear on the first): declined,
		 * both go to the general parser */
		struct iovec v = {src, 200};
		struct rr_ddp_txmsg m;
		struct stream s = {0};
		struct one_out x, y;

		REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, RR_OP_SEND, RR_QN_SEND, 1, 0, &v, 1), 0);
		st_msg(&s, &m, true, 128);
		REQUIRE_EQ(s.fpdus, 2);
		one_parse(s.b, s.len, true, true, 1, 256, 256, &x);
		one_parse(s.b, s.len, true, false, 1, 256, 256, &y);
		one_same(&x, &y);
		CHECK_EQ(x.fast, 0u);
		CHECK_EQ(x.nev, 2u);
		CHECK_MEM(x.f->recvbuf[0], src, 200);
		free(x.f);
		free(y.f);
		free(s.b);
	}
}
