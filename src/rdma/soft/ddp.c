/* SPDX-License-Identifier: BSD-2-Clause */
/* DDP over MPA: FPDU segmentation (TX) and the validating pull parser (RX).
 * RFC 5041 sections 4 (header formats), 5 (data transfer: MSN, MO, Last),
 * 7 (placement and validation), 8 (errors); RFC 5044 section 4 (FPDU framing,
 * pad, CRC32c; markers are never negotiated); RFC 5040 sections 4-7 (opcodes,
 * queue numbers, Terminate); draft-talpey-rdma-commit-00 3.2 (opcodes 0xC on
 * QN 1 and 0xD on QN 3). Sans-I/O: no syscalls, no allocation; the I/O layer
 * moves bytes and this file decides where they go and whether they are legal. */
#include "rdma/soft/ddp.h"

#include <stdlib.h>

#include "rdma/soft/crc32c.h"

/* A small payload's copy, inline (a Call or Reply of a NULL is 52-68
 * bytes): 16-byte pieces from both ends, overlapping, without libc's
 * memcpy call (its call, the registers live across it and its size
 * dispatch cost more than the copy at these sizes: issue 16 part GB);
 * memcpy from DDP_COPY_INLINE_MAX bytes on. @dst and @src do not
 * overlap, as memcpy's. */
#define DDP_COPY_INLINE_MAX 128

static inline void ddp_copy16(uint8_t *d, const uint8_t *s)
{
	memcpy(d, s, 16); /* a fixed size: one 16-byte load and store */
}

static inline __attribute__((always_inline)) void ddp_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (n > DDP_COPY_INLINE_MAX) {
		memcpy(d, s, n);
	} else if (n > 64) { /* 65-128: 4 from the start, 4 to the end */
		ddp_copy16(d, s);
		ddp_copy16(d + 16, s + 16);
		ddp_copy16(d + 32, s + 32);
		ddp_copy16(d + 48, s + 48);
		ddp_copy16(d + n - 64, s + n - 64);
		ddp_copy16(d + n - 48, s + n - 48);
		ddp_copy16(d + n - 32, s + n - 32);
		ddp_copy16(d + n - 16, s + n - 16);
	} else if (n > 32) { /* 33-64 */
		ddp_copy16(d, s);
		ddp_copy16(d + 16, s + 16);
		ddp_copy16(d + n - 32, s + n - 32);
		ddp_copy16(d + n - 16, s + n - 16);
	} else if (n >= 16) { /* 16-32 */
		ddp_copy16(d, s);
		ddp_copy16(d + n - 16, s + n - 16);
	} else if (n >= 8) { /* 8-15 */
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) { /* 4-7 */
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n) { /* 1-3 */
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}

/* ------------------------------------------------------------------ TX -- */

size_t rr_ddp_seg_payload(size_t hdr, size_t fpdu_max)
{
	size_t p, cap;

	if (fpdu_max < RR_FPDU_MIN)
		fpdu_max = RR_FPDU_MIN;
	p = (fpdu_max - hdr - RR_CRC_LEN) & ~(size_t)3;
	cap = (RR_ULPDU_MAX - (hdr - RR_MPA_LEN_FIELD)) & ~(size_t)3;
	return RR_MIN(p, cap);
}

static int txmsg_init(struct rr_ddp_txmsg *m, const struct iovec *iov, unsigned iovcnt)
{
	size_t total = 0;

	/* a message that fails here is empty (as when it was zeroed whole) */
	m->iov = NULL;
	m->iovcnt = 0;
	m->total = 0;
	m->done = 0;
	m->iov_idx = 0;
	m->iov_off = 0;
	m->started = false;
	if (iovcnt > RR_DDP_MAX_SGE || (iovcnt && !iov))
		return -EINVAL;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > UINT32_MAX - total)
			return -EMSGSIZE;
		total += iov[i].iov_len;
	}
	m->iov = iov;
	m->iovcnt = iovcnt;
	m->total = total;
	return 0;
}

int rr_ddp_txmsg_tagged(struct rr_ddp_txmsg *m, uint8_t op, uint32_t stag, uint64_t to,
			const struct iovec *iov, unsigned iovcnt)
{
	if (!rr_rdmap_op_tagged(op))
		return -EINVAL;
	/* every field set, no memset (per-message path) */
	m->op = op;
	m->tagged = true;
	m->crc = false;
	m->fpdu_max = 0;
	m->stag = stag;
	m->to = to;
	m->qn = m->msn = m->inv_stag = 0;
	return txmsg_init(m, iov, iovcnt);
}

int rr_ddp_txmsg_untagged(struct rr_ddp_txmsg *m, uint8_t op, uint32_t qn, uint32_t msn,
			  uint32_t inv_stag, const struct iovec *iov, unsigned iovcnt)
{
	if (rr_rdmap_op_tagged(op) || op > 0xf || qn >= RR_QN_COUNT)
		return -EINVAL;
	m->op = op;
	m->tagged = false;
	m->crc = false;
	m->fpdu_max = 0;
	m->stag = 0;
	m->to = 0;
	m->qn = qn;
	m->msn = msn;
	m->inv_stag = inv_stag;
	return txmsg_init(m, iov, iovcnt);
}

void rr_ddp_txmsg_rebase(struct rr_ddp_txmsg *m, const struct iovec *iov, unsigned iovcnt)
{
	m->iov = iov;
	m->iovcnt = iovcnt;
	m->iov_idx = 0;
	m->iov_off = 0;
}

static uint16_t ddp_ctrl(bool tagged, bool last, uint8_t op)
{
	return (uint16_t)((tagged ? RR_DDP_T : 0) | (last ? RR_DDP_L : 0) |
			  RR_DDP_VERSION << RR_DDP_DV_SHIFT |
			  RR_RDMAP_VERSION << RR_RDMAP_RV_SHIFT | (op & RR_RDMAP_OP_MASK));
}

/* FPDU (RFC 5044 4.1): ULPDU_Length | ULPDU (DDP header + payload) | pad | CRC */
int rr_ddp_tx_next(struct rr_ddp_txmsg *m, bool crc, size_t fpdu_max, struct rr_fpdu *f)
{
	size_t hdr = m->tagged ? RR_HDR_TAGGED : RR_HDR_UNTAGGED;
	size_t n, want, ulpdu, pad;
	unsigned cnt = 0;

	if (m->started && m->done >= m->total)
		return 0;
	n = RR_MIN(m->total - m->done, rr_ddp_seg_payload(hdr, fpdu_max));
	/* QN 1-3 carry an RDMAP body (Read Request, Commit Request and
	 * Response, Terminate) that the receiver takes in one segment only
	 * (rx_hdr): never split, whatever fpdu_max (a Commit Request of 32
	 * regions is 516 bytes, more than a 536-byte MSS holds) */
	if (!m->tagged && m->qn != RR_QN_SEND)
		n = m->total - m->done;
	f->last = m->done + n == m->total;
	ulpdu = hdr - RR_MPA_LEN_FIELD + n;
	rr_put_be16(f->hdr, (uint16_t)ulpdu);
	rr_put_be16(f->hdr + 2, ddp_ctrl(m->tagged, f->last, m->op));
	if (m->tagged) {
		rr_put_be32(f->hdr + 4, m->stag);
		rr_put_be64(f->hdr + 8, m->to + m->done);
	} else {
		rr_put_be32(f->hdr + 4, m->inv_stag);
		rr_put_be32(f->hdr + 8, m->qn);
		rr_put_be32(f->hdr + 12, m->msn);
		rr_put_be32(f->hdr + 16, (uint32_t)m->done);
	}
	f->iov[cnt].iov_base = f->hdr;
	f->iov[cnt++].iov_len = hdr;
	want = n;
	while (want) {
		const struct iovec *v = &m->iov[m->iov_idx];
		size_t take = RR_MIN(v->iov_len - m->iov_off, want);

		if (take) {
			f->iov[cnt].iov_base = (uint8_t *)v->iov_base + m->iov_off;
			f->iov[cnt++].iov_len = take;
		}
		m->iov_off += take;
		want -= take;
		if (m->iov_off == v->iov_len) {
			m->iov_idx++;
			m->iov_off = 0;
		}
	}
	pad = (4 - ((RR_MPA_LEN_FIELD + ulpdu) & 3)) & 3;
	memset(f->trailer, 0, sizeof(f->trailer));
	if (crc) {
		uint32_t c = RR_CRC32C_INIT;

		for (unsigned i = 0; i < cnt; i++)
			c = rr_crc32c_update(c, f->iov[i].iov_base, f->iov[i].iov_len);
		c = rr_crc32c_update(c, f->trailer, pad);
		rr_crc32c_put(f->trailer + pad, rr_crc32c_final(c));
	}
	f->iov[cnt].iov_base = f->trailer;
	f->iov[cnt++].iov_len = pad + RR_CRC_LEN;
	f->iovcnt = cnt;
	f->payload = n;
	f->len = hdr + n + pad + RR_CRC_LEN;
	m->done += n;
	m->started = true;
	return 1;
}

/* FPDU (RFC 5044 4.1) of a whole untagged message, contiguous: the bytes
 * rr_ddp_tx_next writes for it (Last set, MO 0), built in one pass. */
size_t rr_ddp_tx_one(uint8_t op, uint32_t qn, uint32_t msn, uint32_t inv_stag,
		     const struct iovec *iov, unsigned iovcnt, bool crc, size_t fpdu_max,
		     uint8_t *out, size_t cap)
{
	size_t n = 0, ulpdu, pad, len;
	uint8_t *p;

	if (rr_rdmap_op_tagged(op) || op > 0xf || qn >= RR_QN_COUNT ||
	    iovcnt > RR_DDP_MAX_SGE || (iovcnt && !iov))
		return 0;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > cap)
			return 0;
		n += iov[i].iov_len;
	}
	/* one segment: what rr_ddp_tx_next would not split (QN 1-3 never) */
	if (qn == RR_QN_SEND && n > rr_ddp_seg_payload(RR_HDR_UNTAGGED, fpdu_max))
		return 0;
	ulpdu = RR_HDR_UNTAGGED - RR_MPA_LEN_FIELD + n;
	pad = (4 - ((RR_MPA_LEN_FIELD + ulpdu) & 3)) & 3;
	len = RR_HDR_UNTAGGED + n + pad + RR_CRC_LEN;
	if (len > cap || ulpdu > RR_ULPDU_MAX)
		return 0;
	rr_put_be16(out, (uint16_t)ulpdu);
	rr_put_be16(out + 2, ddp_ctrl(false, true, op));
	rr_put_be32(out + 4, inv_stag);
	rr_put_be32(out + 8, qn);
	rr_put_be32(out + 12, msn);
	rr_put_be32(out + 16, 0);
	p = out + RR_HDR_UNTAGGED;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	memset(p, 0, pad + RR_CRC_LEN);
	if (crc)
		rr_crc32c_put(p + pad, rr_crc32c(out, (size_t)(p + pad - out)));
	return len;
}

/* The largest payload rr_ddp_tx_one takes as one FPDU on queue 0 (a
 * Send) with @fpdu_max and a buffer of @cap bytes: one segment
 * (rr_ddp_seg_payload, a multiple of 4 below the ULPDU limit), and the
 * header, the payload rounded up to 4 and the CRC field within @cap.
 * 0 with a buffer too small for even an empty Send (none fits then,
 * rr_ddp_tx_send1 is not to be used). */
size_t rr_ddp_tx_send_max(size_t fpdu_max, size_t cap)
{
	size_t seg = rr_ddp_seg_payload(RR_HDR_UNTAGGED, fpdu_max);

	if (cap < RR_HDR_UNTAGGED + RR_CRC_LEN)
		return 0;
	return RR_MIN(seg, (cap - RR_HDR_UNTAGGED - RR_CRC_LEN) & ~(size_t)3);
}

/* FPDU of a whole Send on queue 0 (RFC 5044 4.1, RFC 5041 4.3, RFC 5040
 * 4.1): ULPDU_Length BE16 (18 + @n) | ctrl BE16 (L, DV 1, RV 1, @op) |
 * Inv STag BE32 | QN BE32 0 | MSN BE32 | MO BE32 0 | @n payload bytes |
 * pad to 4 (zero) | CRC32c BE32 (zero without CRC). The bytes
 * rr_ddp_tx_one writes for the same Send from one piece, without its
 * checks: the caller guarantees @op a Send opcode (RR_OP_SEND,
 * RR_OP_SEND_INV, RR_OP_SEND_SE, RR_OP_SEND_SE_INV), @n at most
 * rr_ddp_tx_send_max of the FPDU size and of @out's size. Returns the
 * FPDU's length. */
size_t rr_ddp_tx_send1(uint8_t op, uint32_t msn, uint32_t inv_stag, const void *src, size_t n,
		       bool crc, uint8_t *out)
{
	size_t pad = (0u - n) & 3;
	uint8_t *p = out + RR_HDR_UNTAGGED + n;

	rr_put_be16(out, (uint16_t)(RR_HDR_UNTAGGED - RR_MPA_LEN_FIELD + n));
	rr_put_be16(out + 2, ddp_ctrl(false, true, op));
	rr_put_be32(out + 4, inv_stag);
	rr_put_be32(out + 8, RR_QN_SEND);
	rr_put_be32(out + 12, msn);
	rr_put_be32(out + 16, 0);
	ddp_copy(out + RR_HDR_UNTAGGED, src, n);
	/* the pad (up to 3 bytes), then the CRC field over its last byte(s) */
	rr_put_be32(p, 0);
	rr_put_be32(p + pad, 0);
	if (crc)
		rr_crc32c_put(p + pad, rr_crc32c(out, (size_t)(p + pad - out)));
	return RR_HDR_UNTAGGED + n + pad + RR_CRC_LEN;
}

size_t rr_ddp_build_terminate(const struct rr_term *t, uint32_t msn, bool crc,
			      uint8_t out[RR_TERM_FPDU_MAX])
{
	uint8_t body[RR_TERM_MAX_BODY];
	size_t blen = rr_rdmap_term_encode(t, body);
	struct iovec v = {.iov_base = body, .iov_len = blen};
	struct rr_ddp_txmsg m;
	struct rr_fpdu f;
	size_t off = 0;

	rr_ddp_txmsg_untagged(&m, RR_OP_TERMINATE, RR_QN_TERM, msn, 0, &v, 1);
	rr_ddp_tx_next(&m, crc, RR_TERM_FPDU_MAX, &f);
	for (unsigned i = 0; i < f.iovcnt; i++) {
		memcpy(out + off, f.iov[i].iov_base, f.iov[i].iov_len);
		off += f.iov[i].iov_len;
	}
	return off;
}

/* ------------------------------------------------------------------ RX -- */

void rr_ddp_rx_init(struct rr_ddp_rx *rx, const struct rr_ddp_rx_ops *ops, void *ctx,
		    bool crc, bool commit)
{
	memset(rx, 0, sizeof(*rx));
	rx->ops = ops;
	rx->ctx = ctx;
	rx->crc = crc;
	rx->commit = commit;
	rx->state = RR_RX_HDR;
	rx->hdr_need = 4;
	rx->crc_state = RR_CRC32C_INIT;
	for (int q = 0; q < RR_QN_COUNT; q++)
		rx->msn_expect[q] = 1;
}

static bool op_known(const struct rr_ddp_rx *rx, unsigned op)
{
	if (op <= RR_OP_TERMINATE)
		return true;
	return rx->commit && (op == RR_OP_COMMIT_REQ || op == RR_OP_COMMIT_RESP);
}

static uint32_t op_qn(unsigned op)
{
	switch (op) {
	case RR_OP_READ_REQ:
	case RR_OP_COMMIT_REQ:
		return RR_QN_READ;
	case RR_OP_TERMINATE:
		return RR_QN_TERM;
	case RR_OP_COMMIT_RESP:
		return RR_QN_RESP;
	default:
		return RR_QN_SEND;
	}
}

/* Stops the parser with a Terminate of @layer/@etype/@ecode. @copy_hdr
 * attaches the DDP segment length and the DDP header (M, D); @copy_rdmap
 * attaches the Read Request header (R). A Terminate is never answered with a
 * Terminate (RFC 5040 7.1). */
static int rx_die(struct rr_ddp_rx *rx, uint8_t layer, uint8_t etype, uint8_t ecode,
		  bool copy_hdr, bool copy_rdmap)
{
	struct rr_term *t = &rx->term;

	memset(t, 0, sizeof(*t));
	t->layer = layer;
	t->etype = etype;
	t->ecode = ecode;
	if (copy_hdr) {
		size_t hl = rx->tagged ? RR_HDR_TAGGED : RR_HDR_UNTAGGED;

		t->m = t->d = true;
		rr_put_be16(t->ddp_hdr, rx->ulpdu_len);
		memcpy(t->ddp_hdr + 2, rx->hdr + 2, hl - 2);
		t->ddp_hdr_len = (uint8_t)hl;
	}
	if (copy_rdmap) {
		t->r = true;
		memcpy(t->rdmap_hdr, rx->body, RR_RREQ_BODY);
	}
	rx->term_valid = rx->op != RR_OP_TERMINATE;
	rx->state = RR_RX_DEAD;
	rx->err = -EPROTO;
	return rx->err;
}

/* Maps an upper-layer / placement verdict to RFC 5040 7.2 / RFC 5041 8. */
static int rx_die_code(struct rr_ddp_rx *rx, enum rr_rx_code code)
{
	bool rreq = !rx->tagged && rx->op == RR_OP_READ_REQ;

	if (rx->tagged) {
		switch (code) {
		case RR_RXC_INVALID_STAG:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_INVALID_STAG, true, false);
		case RR_RXC_BOUNDS:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_BOUNDS, true, false);
		case RR_RXC_PD:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_STAG_NOT_ASSOC, true, false);
		case RR_RXC_TO_WRAP:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_TAGGED, RR_DDP_EC_T_TO_WRAP, true, false);
		case RR_RXC_ACCESS:
			/* DDP has no access-rights code; RDMAP checks rights. */
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_ACCESS, true, false);
		case RR_RXC_UNEXPECTED:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, true, false);
		default:
			break;
		}
	} else {
		switch (code) {
		case RR_RXC_NO_RECV:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_NOBUF, true, false);
		case RR_RXC_TOO_LONG:
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true, false);
		case RR_RXC_INVALID_STAG:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_INVALID_STAG, true, rreq);
		case RR_RXC_BOUNDS:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_BOUNDS, true, rreq);
		case RR_RXC_ACCESS:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_ACCESS, true, rreq);
		case RR_RXC_PD:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_STAG_NOT_ASSOC, true, rreq);
		case RR_RXC_TO_WRAP:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_PROTECTION, RR_RDMAP_EC_TO_WRAP, true, rreq);
		case RR_RXC_CANNOT_INV:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_CANNOT_INVALIDATE, true, false);
		case RR_RXC_IRD:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_CATA_STREAM, true, false);
		case RR_RXC_UNEXPECTED:
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, true, false);
		default:
			break;
		}
	}
	return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_CATASTROPHIC, 0, false, false);
}

int rr_ddp_rx_fail(struct rr_ddp_rx *rx, enum rr_rx_code code)
{
	if (rx->state == RR_RX_DEAD)
		return rx->err;
	return rx_die_code(rx, code);
}

/* First 4 bytes: ULPDU_Length and the DDP/RDMAP control field (RFC 5041 4.2,
 * RFC 5040 4.2). Nothing about the layout is trusted before these pass. */
static int rx_ctrl(struct rr_ddp_rx *rx)
{
	unsigned dv, rv;

	rx->ulpdu_len = rr_get_be16(rx->hdr);
	rx->ctrl = rr_get_be16(rx->hdr + 2);
	rx->tagged = rx->ctrl & RR_DDP_T;
	rx->last = rx->ctrl & RR_DDP_L;
	rx->op = (uint8_t)(rx->ctrl & RR_RDMAP_OP_MASK);
	dv = (rx->ctrl & RR_DDP_DV_MASK) >> RR_DDP_DV_SHIFT;
	rv = (rx->ctrl & RR_RDMAP_RV_MASK) >> RR_RDMAP_RV_SHIFT;
	if (dv != RR_DDP_VERSION)
		return rx_die(rx, RR_TL_DDP, rx->tagged ? RR_DDP_ET_TAGGED : RR_DDP_ET_UNTAGGED,
			      rx->tagged ? RR_DDP_EC_T_VERSION : RR_DDP_EC_U_VERSION, false, false);
	if (rv != RR_RDMAP_VERSION)
		return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_VERSION, false, false);
	if (!op_known(rx, rx->op) || rx->tagged != rr_rdmap_op_tagged(rx->op))
		return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_OPCODE, false, false);
	rx->hdr_need = rx->tagged ? RR_HDR_TAGGED : RR_HDR_UNTAGGED;
	if (rx->ulpdu_len < rx->hdr_need - RR_MPA_LEN_FIELD)
		return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, false, false);
	rx->seg_len = rx->ulpdu_len - (uint32_t)(rx->hdr_need - RR_MPA_LEN_FIELD);
	return 0;
}

static void rx_to_trailer(struct rr_ddp_rx *rx)
{
	rx->state = RR_RX_TRAILER;
	rx->tr_have = 0;
	rx->tr_need = ((4 - ((RR_MPA_LEN_FIELD + rx->ulpdu_len) & 3)) & 3) + RR_CRC_LEN;
}

/* The whole DDP header: tagged (RFC 5041 4.3) or untagged (4.4). */
static int rx_header(struct rr_ddp_rx *rx)
{
	enum rr_rx_code c;

	rx->placed = 0;
	if (rx->tagged) {
		rx->stag = rr_get_be32(rx->hdr + 4);
		rx->to = rr_get_be64(rx->hdr + 8);
		if (rx->seg_len && rx->to + rx->seg_len - 1 < rx->to)
			return rx_die_code(rx, RR_RXC_TO_WRAP);
		rx->tdst = NULL;
		c = rx->ops->tagged(rx->ctx, rx->op, rx->stag, rx->to, rx->seg_len, rx->last,
				    &rx->tdst);
		if (c != RR_RXC_OK)
			return rx_die_code(rx, c);
		if (rx->seg_len && !rx->tdst)
			return rx_die_code(rx, RR_RXC_CATASTROPHIC);
		if (rx->seg_len)
			rx->state = RR_RX_PAYLOAD;
		else
			rx_to_trailer(rx);
		return 0;
	}
	rx->inv_stag = rr_get_be32(rx->hdr + 4);
	rx->qn = rr_get_be32(rx->hdr + 8);
	rx->msn = rr_get_be32(rx->hdr + 12);
	rx->mo = rr_get_be32(rx->hdr + 16);
	if (rx->qn != op_qn(rx->op))
		return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_INVALID_QN, true, false);
	if (rx->msn != rx->msn_expect[rx->qn])
		return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MSN_RANGE, true, false);
	if (rx->mo != rx->mo_expect[rx->qn])
		return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_MO, true, false);
	if (rx->qn == RR_QN_SEND) {
		uint64_t total = 0, skip = rx->mo;

		rx->uiov = NULL;
		rx->uiovcnt = 0;
		c = rx->ops->untagged(rx->ctx, rx->msn, rx->mo, rx->seg_len, rx->last, &rx->uiov,
				      &rx->uiovcnt);
		if (c != RR_RXC_OK)
			return rx_die_code(rx, c);
		for (unsigned i = 0; i < rx->uiovcnt; i++)
			total += rx->uiov[i].iov_len;
		if ((uint64_t)rx->mo + rx->seg_len > total)
			return rx_die_code(rx, RR_RXC_TOO_LONG);
		rx->uidx = 0;
		rx->uoff = 0;
		while (rx->uidx < rx->uiovcnt && skip >= rx->uiov[rx->uidx].iov_len) {
			skip -= rx->uiov[rx->uidx].iov_len;
			rx->uidx++;
		}
		rx->uoff = (size_t)skip;
		if (rx->seg_len)
			rx->state = RR_RX_PAYLOAD;
		else
			rx_to_trailer(rx);
		return 0;
	}
	/* QN 1-3 carry a single-segment RDMAP body that the parser keeps. */
	if (!rx->last)
		return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true, false);
	switch (rx->op) {
	case RR_OP_READ_REQ:
		if (rx->seg_len != RR_RREQ_BODY)
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true, false);
		break;
	case RR_OP_COMMIT_RESP:
		if (rx->seg_len != RR_COMMIT_RESP_BODY)
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true, false);
		break;
	case RR_OP_COMMIT_REQ:
		if (rx->seg_len > RR_RX_BODY_MAX)
			return rx_die(rx, RR_TL_DDP, RR_DDP_ET_UNTAGGED, RR_DDP_EC_U_TOO_LONG, true, false);
		if (rx->seg_len < 4 + RR_COMMIT_REGION_LEN || (rx->seg_len - 4) % RR_COMMIT_REGION_LEN)
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true, false);
		break;
	default: /* Terminate */
		if (rx->seg_len < RR_TERM_CTRL_LEN || rx->seg_len > RR_TERM_MAX_BODY)
			return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, false, false);
		break;
	}
	rx->state = RR_RX_BODY;
	rx->body_have = 0;
	rx->body_need = rx->seg_len;
	return 0;
}

/* End of an FPDU: CRC (RFC 5044 4.4, only when negotiated), then the event. */
static int rx_finish(struct rr_ddp_rx *rx, struct rr_ddp_event *ev)
{
	size_t pad = rx->tr_need - RR_CRC_LEN;

	if (rx->crc) {
		uint32_t want = rr_crc32c_final(rx->crc_state);

		if (rr_crc32c_get(rx->trailer + pad) != want)
			return rx_die(rx, RR_TL_LLP, 0, RR_LLP_EC_CRC, false, false);
	}
	/* the union is filled by the decoder of the event that uses it */
	memset(ev, 0, offsetof(struct rr_ddp_event, u));
	ev->op = rx->op;
	ev->last = rx->last;
	ev->len = rx->seg_len;
	if (rx->tagged) {
		ev->type = RR_EV_TAGGED;
		ev->stag = rx->stag;
		ev->to = rx->to;
	} else {
		ev->msn = rx->msn;
		ev->mo = rx->mo;
		switch (rx->op) {
		case RR_OP_READ_REQ:
			ev->type = RR_EV_READ_REQ;
			rr_rdmap_rreq_decode(rx->body, &ev->u.rreq);
			break;
		case RR_OP_COMMIT_REQ:
			ev->type = RR_EV_COMMIT_REQ;
			if (rr_rdmap_commit_req_decode(rx->body, rx->seg_len, &ev->u.creq))
				return rx_die(rx, RR_TL_RDMAP, RR_RDMAP_ET_OPERATION, RR_RDMAP_EC_UNSPECIFIED, true, false);
			break;
		case RR_OP_COMMIT_RESP:
			ev->type = RR_EV_COMMIT_RESP;
			rr_rdmap_commit_resp_decode(rx->body, &ev->u.cresp);
			break;
		case RR_OP_TERMINATE:
			ev->type = RR_EV_TERMINATE;
			if (rr_rdmap_term_decode(rx->body, rx->seg_len, &ev->u.term)) {
				/* Undecodable: report what we can. */
				memset(&ev->u.term, 0, sizeof(ev->u.term));
				ev->u.term.layer = 0xf;
			}
			break;
		default:
			ev->type = RR_EV_SEND;
			if (rx->op == RR_OP_SEND_INV || rx->op == RR_OP_SEND_SE_INV)
				ev->inv_stag = rx->inv_stag;
			ev->msg_len = rx->mo + rx->seg_len;
			break;
		}
		if (rx->last) {
			rx->msn_expect[rx->qn]++;
			rx->mo_expect[rx->qn] = 0;
		} else {
			rx->mo_expect[rx->qn] = rx->mo + rx->seg_len;
		}
	}
	rx->segments++;
	rx->bytes += rx->seg_len;
	rx->state = RR_RX_HDR;
	rx->hdr_have = 0;
	rx->hdr_need = 4;
	rx->crc_state = RR_CRC32C_INIT;
	if (ev->type == RR_EV_TERMINATE) {
		rx->state = RR_RX_DEAD;
		rx->err = -ECONNRESET;
		rx->term_valid = false;
	}
	return 1;
}

size_t rr_ddp_rx_want(struct rr_ddp_rx *rx, uint8_t **dst)
{
	size_t n = 0;

	*dst = NULL;
	switch (rx->state) {
	case RR_RX_HDR:
		*dst = rx->hdr + rx->hdr_have;
		n = rx->hdr_need - rx->hdr_have;
		break;
	case RR_RX_BODY:
		*dst = rx->body + rx->body_have;
		n = rx->body_need - rx->body_have;
		break;
	case RR_RX_PAYLOAD:
		if (rx->tagged) {
			*dst = rx->tdst + rx->placed;
			n = rx->seg_len - rx->placed;
		} else {
			while (rx->uidx < rx->uiovcnt && rx->uoff >= rx->uiov[rx->uidx].iov_len) {
				rx->uidx++;
				rx->uoff = 0;
			}
			if (rx->uidx >= rx->uiovcnt) /* cannot happen: length checked */
				break;
			*dst = (uint8_t *)rx->uiov[rx->uidx].iov_base + rx->uoff;
			n = RR_MIN(rx->uiov[rx->uidx].iov_len - rx->uoff,
				   (size_t)(rx->seg_len - rx->placed));
		}
		break;
	case RR_RX_TRAILER:
		*dst = rx->trailer + rx->tr_have;
		n = rx->tr_need - rx->tr_have;
		break;
	case RR_RX_DEAD:
		break;
	}
	rx->want_ptr = *dst;
	return n;
}

int rr_ddp_rx_advance(struct rr_ddp_rx *rx, size_t n, struct rr_ddp_event *ev)
{
	uint8_t *dst;
	size_t w;
	int r;

	if (rx->state == RR_RX_DEAD)
		return rx->err;
	if (n == 0)
		return 0;
	w = rr_ddp_rx_want(rx, &dst);
	if (n > w)
		return -EINVAL;
	if (rx->crc && rx->state != RR_RX_TRAILER)
		rx->crc_state = rr_crc32c_update(rx->crc_state, dst, n);
	switch (rx->state) {
	case RR_RX_HDR:
		rx->hdr_have += n;
		if (rx->hdr_have < rx->hdr_need)
			return 0;
		if (rx->hdr_need == 4)
			return rx_ctrl(rx); /* 0: the rest of the header follows */
		r = rx_header(rx);
		if (r < 0)
			return r;
		break;
	case RR_RX_BODY:
		rx->body_have += n;
		if (rx->body_have == rx->body_need)
			rx_to_trailer(rx);
		break;
	case RR_RX_PAYLOAD:
		rx->placed += (uint32_t)n;
		rx->uoff += n;
		if (rx->placed == rx->seg_len)
			rx_to_trailer(rx);
		break;
	case RR_RX_TRAILER: {
		size_t pad = rx->tr_need - RR_CRC_LEN;

		if (rx->crc && rx->tr_have < pad)
			rx->crc_state = rr_crc32c_update(rx->crc_state, dst,
							 RR_MIN(n, pad - rx->tr_have));
		rx->tr_have += n;
		if (rx->tr_have == rx->tr_need)
			return rx_finish(rx, ev);
		break;
	}
	case RR_RX_DEAD:
		return rx->err;
	}
	return 0;
}

/* A copy of tagged payload at the current position (rx->placed) made by
 * the parser itself: through ops->place when there is one (it may refuse:
 * the memory was invalidated since the header was checked). 0 or the
 * negative errno of the Terminate. */
static int rx_place(struct rr_ddp_rx *rx, uint8_t *dst, const uint8_t *src, size_t n)
{
	enum rr_rx_code c;

	if (!rx->ops->place) {
		memcpy(dst, src, n);
		return 0;
	}
	c = rx->ops->place(rx->ctx, rx->op, rx->stag, rx->to + rx->placed, dst, src, n);
	return c == RR_RXC_OK ? 0 : rx_die_code(rx, c);
}

/* Bulk path of rr_ddp_rx_feed: a whole DDP header is in @p (@avail bytes,
 * at least RR_HDR_UNTAGGED) at the start of a segment. The header is taken
 * in one copy and checked by the same rx_ctrl / rx_header as byte-wise
 * input; when the payload and the trailer follow in @p too, and the payload
 * goes to one contiguous place, they are placed and the segment finished
 * here as well (one event). Returns what rr_ddp_rx_advance would after the
 * bytes consumed (*@adv), so the result does not depend on the split. */
static int rx_bulk(struct rr_ddp_rx *rx, const uint8_t *p, size_t avail, size_t *adv,
		   struct rr_ddp_event *ev)
{
	size_t hl, tl, pad;
	uint8_t *dst;
	int r;

	memcpy(rx->hdr, p, RR_HDR_UNTAGGED); /* a tagged header uses 16 of them */
	rx->hdr_have = 4;
	r = rx_ctrl(rx);
	if (r < 0) {
		*adv = 4;
		return r;
	}
	hl = rx->hdr_need;
	rx->hdr_have = hl;
	*adv = hl;
	if (rx->crc)
		rx->crc_state = rr_crc32c_update(rx->crc_state, p, hl);
	r = rx_header(rx);
	if (r < 0 || rx->state != RR_RX_PAYLOAD)
		return r;
	pad = (4 - ((RR_MPA_LEN_FIELD + rx->ulpdu_len) & 3)) & 3;
	tl = pad + RR_CRC_LEN;
	if (avail - hl < (size_t)rx->seg_len + tl)
		return 0;
	if (rx->tagged) {
		dst = rx->tdst;
		r = rx_place(rx, dst, p + hl, rx->seg_len);
		if (r < 0)
			return r;
	} else {
		if (rx->uidx >= rx->uiovcnt ||
		    rx->uiov[rx->uidx].iov_len - rx->uoff < rx->seg_len)
			return 0; /* spans receive SGEs: the general path */
		dst = (uint8_t *)rx->uiov[rx->uidx].iov_base + rx->uoff;
		memcpy(dst, p + hl, rx->seg_len);
	}
	memcpy(rx->trailer, p + hl + rx->seg_len, tl);
	if (rx->crc) {
		rx->crc_state = rr_crc32c_update(rx->crc_state, dst, rx->seg_len);
		rx->crc_state = rr_crc32c_update(rx->crc_state, rx->trailer, pad);
	}
	rx->placed = rx->seg_len;
	rx->uoff += rx->seg_len;
	rx->state = RR_RX_TRAILER;
	rx->tr_have = rx->tr_need = tl;
	*adv = hl + rx->seg_len + tl;
	return rx_finish(rx, ev);
}

/* A lone Send in one pass (ddp.h): Send, Send with Invalidate, with
 * Solicited Event, Last set, on QN 0 with the next MSN at MO 0, whole in
 * @p (untagged header, RFC 5041 4.4 | payload | pad | CRC, RFC 5044 4.1).
 * The header's fields are checked as rx_ctrl and rx_header check them, in
 * the same order; any field they would reject, a message that is not
 * alone (MO, Last) or not whole in @p declines (0) before anything is
 * touched, and the general parser gives that input its Terminate. From the
 * Receive's look-up on (ops->untagged: it may take a shared Receive) this
 * function answers alone, as the general path would at the same step: a
 * refused Receive, a Send longer than it (rx_header), the payload placed
 * across its SGEs, then the CRC (rx_finish). The fields the parser keeps
 * of the segment (its header for a later Terminate, the per-queue MSN
 * and MO, the counters) end as the general path leaves them. */
int rr_ddp_rx_send1(struct rr_ddp_rx *rx,
		    enum rr_rx_code (*untagged)(void *ctx, uint32_t msn, uint32_t mo, uint32_t len,
						bool last, const struct iovec **iov,
						unsigned *iovcnt),
		    const uint8_t *p, size_t avail, size_t *adv, struct rr_ddp_send1 *out)
{
	const unsigned hdr_bits = RR_DDP_L | RR_DDP_VERSION << RR_DDP_DV_SHIFT |
				  RR_RDMAP_VERSION << RR_RDMAP_RV_SHIFT;
	uint16_t ulpdu, ctrl;
	uint32_t seg, pad, need, left, msn;
	const struct iovec *iov = NULL;
	unsigned iovcnt = 0;
	uint64_t total = 0;
	const uint8_t *src;
	enum rr_rx_code c;
	uint8_t op;

	*adv = 0;
	if (rx->state != RR_RX_HDR || rx->hdr_have != 0 || avail < RR_HDR_UNTAGGED)
		return 0;
	ulpdu = rr_get_be16(p);
	ctrl = rr_get_be16(p + 2);
	op = (uint8_t)(ctrl & RR_RDMAP_OP_MASK);
	/* untagged, Last, DDP and RDMAP version 1, a Send opcode */
	if ((ctrl & ~RR_RDMAP_OP_MASK) != hdr_bits || !rr_rdmap_op_is_send(op) ||
	    ulpdu < RR_HDR_UNTAGGED - RR_MPA_LEN_FIELD)
		return 0;
	seg = ulpdu - (uint32_t)(RR_HDR_UNTAGGED - RR_MPA_LEN_FIELD);
	pad = (4 - ((RR_MPA_LEN_FIELD + ulpdu) & 3)) & 3;
	need = RR_HDR_UNTAGGED + seg + pad + RR_CRC_LEN;
	msn = rx->msn_expect[RR_QN_SEND];
	if (avail < need || rr_get_be32(p + 8) != RR_QN_SEND || rr_get_be32(p + 12) != msn ||
	    rr_get_be32(p + 16) != 0 || rx->mo_expect[RR_QN_SEND] != 0)
		return 0;
	/* The segment's fields that outlive it, as rx_ctrl and rx_header
	 * leave them: what a Terminate copies (rx_die: the header, its
	 * length, tagged, the opcode), for a failure here or a later
	 * rr_ddp_rx_fail of this segment. The rest of them (ctrl, last, QN,
	 * MSN, MO, seg_len, placed, inv_stag, the Receive's iovec, the
	 * header's progress) are read only while their own segment is
	 * parsed, and rx_ctrl / rx_header write them again before the next
	 * segment reads them: not written here (issue 16 part FC). */
	memcpy(rx->hdr, p, RR_HDR_UNTAGGED);
	rx->ulpdu_len = ulpdu;
	rx->tagged = false;
	rx->op = op;
	*adv = RR_HDR_UNTAGGED; /* what the general path has taken if it fails here */
#ifndef NDEBUG
	if (untagged != rx->ops->untagged)
		abort();   /* not the parser's own look-up */
#endif
	c = untagged(rx->ctx, msn, 0, seg, true, &iov, &iovcnt);
	if (c != RR_RXC_OK)
		return rx_die_code(rx, c);
	src = p + RR_HDR_UNTAGGED;
	if (iovcnt && seg <= iov[0].iov_len) {
		/* the usual Receive: one SGE (or the first one holds it) */
		ddp_copy(iov[0].iov_base, src, seg);
	} else {
		for (unsigned i = 0; i < iovcnt; i++)
			total += iov[i].iov_len;
		if (seg > total)
			return rx_die_code(rx, RR_RXC_TOO_LONG);
		left = seg;
		for (unsigned i = 0; left; i++) {
			size_t n = RR_MIN((size_t)left, iov[i].iov_len);

			if (n)
				memcpy(iov[i].iov_base, src, n);
			src += n;
			left -= (uint32_t)n;
		}
	}
	*adv = need;
	if (rx->crc &&
	    rr_crc32c_get(p + need - RR_CRC_LEN) != rr_crc32c(p, need - RR_CRC_LEN))
		return rx_die(rx, RR_TL_LLP, 0, RR_LLP_EC_CRC, false, false);
	/* rx_finish: the outcome (the event's fields), the queue's next MSN,
	 * the counters, the next header. The two counters are added apart,
	 * on either side of the outcome: side by side GCC's straight-line
	 * vectoriser made their two adds seven instructions (a vector built,
	 * added and stored: issue 16 part HA). */
	rx->segments++;
	out->op = op;
	out->len = seg;
	out->inv_stag = op == RR_OP_SEND_INV || op == RR_OP_SEND_SE_INV ? rr_get_be32(p + 4) : 0;
	out->iov = iov;
	rx->msn_expect[RR_QN_SEND] = msn + 1;
	rx->bytes += seg;
	/* the next header: hdr_have 0 and hdr_need 4 as found (in RR_RX_HDR
	 * no header byte taken means the first four wanted: rx_ctrl sets
	 * hdr_need only with hdr_have 4, rx_finish resets both) */
	return 1;
}

int rr_ddp_rx_send_one_with(struct rr_ddp_rx *rx,
			    enum rr_rx_code (*untagged)(void *ctx, uint32_t msn, uint32_t mo,
							uint32_t len, bool last,
							const struct iovec **iov, unsigned *iovcnt),
			    const uint8_t *p, size_t avail, size_t *adv, struct rr_ddp_event *ev)
{
	struct rr_ddp_send1 s;
	int r = rr_ddp_rx_send1(rx, untagged, p, avail, adv, &s);

	if (r != 1)
		return r;
	/* the event rx_finish reports for this segment */
	memset(ev, 0, offsetof(struct rr_ddp_event, u));
	ev->type = RR_EV_SEND;
	ev->op = s.op;
	ev->last = true;
	ev->len = s.len;
	ev->msn = rx->msn_expect[RR_QN_SEND] - 1;
	ev->inv_stag = s.inv_stag;
	ev->msg_len = s.len;
	return 1;
}

int rr_ddp_rx_send_one(struct rr_ddp_rx *rx, const uint8_t *p, size_t avail, size_t *adv,
		       struct rr_ddp_event *ev)
{
	return rr_ddp_rx_send_one_with(rx, rx->ops->untagged, p, avail, adv, ev);
}

int rr_ddp_rx_feed(struct rr_ddp_rx *rx, const uint8_t *data, size_t len, size_t *used,
		   struct rr_ddp_event *ev)
{
	*used = 0;
	while (*used < len) {
		uint8_t *dst;
		size_t w, c;
		int r;

		if (rx->state == RR_RX_HDR && rx->hdr_have == 0 && len - *used >= RR_HDR_UNTAGGED) {
			r = rx_bulk(rx, data + *used, len - *used, &c, ev);
			*used += c;
			if (r)
				return r;
			continue;
		}
		w = rr_ddp_rx_want(rx, &dst);
		if (!w)
			return rx->err ? rx->err : -EPROTO;
		c = RR_MIN(w, len - *used);
		if (rx->state == RR_RX_PAYLOAD && rx->tagged) {
			r = rx_place(rx, dst, data + *used, c);
			if (r)
				return r;
		} else {
			memcpy(dst, data + *used, c);
		}
		*used += c;
		r = rr_ddp_rx_advance(rx, c, ev);
		if (r)
			return r;
	}
	return 0;
}
