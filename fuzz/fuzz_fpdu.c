/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the DDP/RDMAP FPDU stream parser (RFC 5041, RFC 5040,
 * RFC 5044 framing, commit draft opcodes) with a fake placement callback over
 * a small fake STag table and receive queue. Input byte 0: CRC / Commit
 * negotiated / split size; byte 1: upper-layer verdict for Read Requests.
 * Placement never writes outside the fake buffers (ASan checks), the parser
 * never asks for more than the segment holds, and every Terminate it builds
 * encodes and decodes back. The input is parsed twice, in pieces of the
 * chosen size and one byte at a time: outcomes must be identical. And the
 * input's first bytes as an untagged message (opcode, queue, MSN, the rest
 * its payload in up to three pieces): the one-pass FPDU builder
 * (rr_ddp_tx_one) writes what rr_ddp_tx_next writes, or declines; and
 * for a Send in one piece the builder without checks (rr_ddp_tx_send1)
 * writes what rr_ddp_tx_one writes, up to the limit (rr_ddp_tx_send_max)
 * past which rr_ddp_tx_one declines. A third
 * parse gives each piece first to the one-pass receive of a lone Send
 * (rr_ddp_rx_send_one, as the soft QP reads its stage), the rest to the
 * general parser: the same outcomes again, and a declined piece leaves
 * the parser untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/soft/ddp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t mr_buf[2][256];
static uint8_t recv_buf[3][64];
static struct iovec recv_iov[3][2];
static unsigned recv_head;

static enum rr_rx_code f_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
				bool last, uint8_t **dst)
{
	unsigned i = stag & 0xff;

	(void)ctx, (void)op, (void)last;
	if ((stag >> 8) != 0x1234 || i > 1)
		return RR_RXC_INVALID_STAG;
	if (to > sizeof(mr_buf[i]) || len > sizeof(mr_buf[i]) - to)
		return RR_RXC_BOUNDS;
	*dst = mr_buf[i] + to;
	return RR_RXC_OK;
}

static enum rr_rx_code f_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				  const struct iovec **iov, unsigned *iovcnt)
{
	(void)ctx, (void)msn, (void)mo, (void)len;
	if (recv_head >= 3)
		return RR_RXC_NO_RECV;
	*iov = recv_iov[recv_head];
	*iovcnt = 2;
	if (last)
		recv_head++;
	return RR_RXC_OK;
}

static const struct rr_ddp_rx_ops ops = {.tagged = f_tagged, .untagged = f_untagged};

struct run {
	int r;
	unsigned nev;
	struct rr_ddp_event ev[16];
	struct rr_ddp_rx rx;
	uint8_t mr[2][256], recv[3][64];
};

/* Feeds data[2..] in pieces of @chunk bytes (@one: each first to
 * rr_ddp_rx_send_one); records the outcome. */
static void run(const uint8_t *data, size_t size, size_t chunk, bool one, struct run *o)
{
	struct rr_ddp_rx *rx = &o->rx;
	struct rr_ddp_event ev;
	size_t off = 2;
	int r = 0;

	memset(mr_buf, 0, sizeof(mr_buf));
	memset(recv_buf, 0, sizeof(recv_buf));
	for (int i = 0; i < 3; i++) {
		recv_iov[i][0] = (struct iovec){recv_buf[i], 10};
		recv_iov[i][1] = (struct iovec){recv_buf[i] + 10, 54};
	}
	recv_head = 0;
	o->nev = 0;
	rr_ddp_rx_init(rx, &ops, NULL, data[0] & 1, data[0] & 2);
	while (off < size) {
		size_t used, n = RR_MIN(chunk, size - off);

		r = 0;
		if (one) {
			static struct rr_ddp_rx before;
			unsigned head = recv_head;

			before = *rx;
			r = rr_ddp_rx_send_one(rx, data + off, n, &used, &ev);
			if (r == 0 && (used || recv_head != head || memcmp(&before, rx, sizeof(before))))
				abort(); /* declined, yet consumed or changed something */
		}
		if (r == 0)
			r = rr_ddp_rx_feed(rx, data + off, n, &used, &ev);
		off += used;
		if (r < 0)
			break;
		if (r == 1 && o->nev < 16)
			o->ev[o->nev++] = ev;
		if (r == 1 && (ev.type == RR_EV_READ_REQ || ev.type == RR_EV_COMMIT_REQ) &&
		    data[1] % 4 == 1) {
			r = rr_ddp_rx_fail(rx, (enum rr_rx_code)(1 + data[1] / 4 % 11));
			break;
		}
		if (used == 0 && r == 0)
			abort(); /* no progress */
	}
	o->r = r;
	memcpy(o->mr, mr_buf, sizeof(mr_buf));
	memcpy(o->recv, recv_buf, sizeof(recv_buf));
}

static bool ev_same(const struct rr_ddp_event *a, const struct rr_ddp_event *b)
{
	return a->type == b->type && a->op == b->op && a->last == b->last && a->len == b->len &&
	       a->stag == b->stag && a->to == b->to && a->msn == b->msn && a->mo == b->mo &&
	       a->inv_stag == b->inv_stag && a->msg_len == b->msg_len;
}

/* Two parses of one input agree: verdict, events, placement, Terminate. */
static void same(const struct run *a, const struct run *b)
{
	if (a->r != b->r || a->nev != b->nev || a->rx.term_valid != b->rx.term_valid ||
	    memcmp(a->mr, b->mr, sizeof(a->mr)) || memcmp(a->recv, b->recv, sizeof(a->recv)))
		abort();
	for (unsigned i = 0; i < a->nev; i++)
		if (!ev_same(&a->ev[i], &b->ev[i]))
			abort();
	if (a->rx.term_valid &&
	    (a->rx.term.layer != b->rx.term.layer || a->rx.term.etype != b->rx.term.etype ||
	     a->rx.term.ecode != b->rx.term.ecode ||
	     a->rx.term.ddp_hdr_len != b->rx.term.ddp_hdr_len ||
	     memcmp(a->rx.term.ddp_hdr, b->rx.term.ddp_hdr, a->rx.term.ddp_hdr_len)))
		abort();
}

/* rr_ddp_tx_one against rr_ddp_txmsg_untagged + rr_ddp_tx_next. */
static void tx_one_same(const uint8_t *data, size_t size)
{
	static uint8_t one[600], next[600];
	size_t plen = size > 8 ? RR_MIN(size - 8, (size_t)300) : 0;
	const uint8_t *pl = data + (size > 8 ? 8 : size);
	struct iovec v[3] = {{(void *)(uintptr_t)pl, RR_MIN(plen, (size_t)data[1] % 64)}};
	uint8_t op = data[2] & 0xf;
	uint32_t qn = data[3] % 5, msn = rr_get_be32(data + 4);
	size_t fpdu_max = 64 + (size_t)data[0] * 4, cap = 64 + (size_t)data[1] * 2, len, n = 0;
	bool crc = data[2] & 0x10;
	struct rr_ddp_txmsg m;
	struct rr_fpdu f;

	v[1] = (struct iovec){(void *)(uintptr_t)(pl + v[0].iov_len), (plen - v[0].iov_len) / 2};
	v[2] = (struct iovec){(void *)(uintptr_t)(pl + v[0].iov_len + v[1].iov_len),
			      plen - v[0].iov_len - v[1].iov_len};
	len = rr_ddp_tx_one(op, qn, msn, msn ^ 0x5a5a5a5au, v, 3, crc, fpdu_max, one, cap);
	if (rr_ddp_txmsg_untagged(&m, op, qn, msn, msn ^ 0x5a5a5a5au, v, 3) != 0) {
		if (len)
			abort(); /* built what the general path refuses */
		return;
	}
	if (rr_ddp_tx_next(&m, crc, fpdu_max, &f) != 1)
		abort();
	for (unsigned i = 0; i < f.iovcnt; i++) {
		if (n + f.iov[i].iov_len > sizeof(next))
			abort();
		memcpy(next + n, f.iov[i].iov_base, f.iov[i].iov_len);
		n += f.iov[i].iov_len;
	}
	if (len == 0) {
		/* declined: more than one FPDU, or more than the buffer */
		if (f.last && f.len <= cap)
			abort();
		return;
	}
	if (!f.last || len != f.len || len > cap || memcmp(one, next, len))
		abort();
}

/* rr_ddp_tx_send1 against rr_ddp_tx_one: a Send in one piece up to
 * rr_ddp_tx_send_max is the same bytes, and no byte past them is written;
 * past the limit rr_ddp_tx_one declines it. */
static void tx_send1_same(const uint8_t *data, size_t size)
{
	static const uint8_t sends[] = {RR_OP_SEND, RR_OP_SEND_INV, RR_OP_SEND_SE,
					RR_OP_SEND_SE_INV};
	static uint8_t one[600], fast[600];
	size_t plen = size > 8 ? RR_MIN(size - 8, (size_t)300) : 0;
	const uint8_t *pl = data + (size > 8 ? 8 : size);
	struct iovec v = {(void *)(uintptr_t)pl, plen};
	uint8_t op = sends[data[2] & 3];
	uint32_t msn = rr_get_be32(data + 4);
	size_t fpdu_max = (size_t)data[0] * 5, cap = (size_t)data[1] * 2 + (data[3] & 1);
	size_t max = rr_ddp_tx_send_max(fpdu_max, cap), len, got;
	bool crc = data[2] & 0x10;

	len = rr_ddp_tx_one(op, RR_QN_SEND, msn, ~msn, &v, 1, crc, fpdu_max, one, cap);
	if (plen > max || (!max && !len)) {
		if (len && plen > max)
			abort(); /* the limit is below what the general builder takes */
		return;
	}
	if (!len)
		abort(); /* the limit is above it */
	memset(fast, 0xa5, sizeof(fast));
	got = rr_ddp_tx_send1(op, msn, ~msn, plen ? pl : NULL, plen, crc, fast);
	if (got != len || memcmp(fast, one, len))
		abort();
	for (size_t i = got; i < sizeof(fast); i++)
		if (fast[i] != 0xa5)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run a, b, c;

	if (size < 2)
		return 0;
	if (size >= 8) {
		tx_one_same(data, size);
		tx_send1_same(data, size);
	}
	run(data, size, 1 + (data[0] >> 2), false, &a);
	/* The same stream one byte at a time (never the bulk path): the
	 * same events, placement, verdict and Terminate (ddp.c rx_bulk). */
	run(data, size, 1, false, &b);
	same(&a, &b);
	/* Pieces of the chosen size, each offered to the one-pass receive
	 * of a lone Send first (ddp.c rr_ddp_rx_send_one) */
	run(data, size, 1 + (data[0] >> 2), true, &c);
	same(&c, &b);
	if (c.rx.msn_expect[RR_QN_SEND] != b.rx.msn_expect[RR_QN_SEND] ||
	    c.rx.segments != b.rx.segments || c.rx.bytes != b.rx.bytes)
		abort();
	if (a.r < 0 && a.rx.term_valid) {
		uint8_t fpdu[RR_TERM_FPDU_MAX];
		struct rr_term t;
		size_t n = rr_ddp_build_terminate(&a.rx.term, 1, true, fpdu);

		if (n < RR_HDR_UNTAGGED + 8 || n > sizeof(fpdu) || n % 4)
			abort();
		if (rr_rdmap_term_decode(fpdu + RR_HDR_UNTAGGED, rr_get_be16(fpdu) - 18, &t) != 0 ||
		    t.layer != a.rx.term.layer || t.etype != a.rx.term.etype || t.ecode != a.rx.term.ecode)
			abort();
	}
	return 0;
}
