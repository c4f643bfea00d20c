/* SPDX-License-Identifier: BSD-2-Clause */
/* MPA Request/Reply frames and negotiation: RFC 5044 section 7.1 (frame,
 * CRC and marker negotiation, reject), RFC 6581 sections 5-6 (revision 2,
 * IRD/ORD block, peer-to-peer RTR). Follows Linux siw where the RFCs leave a
 * choice (see mpa.h). Sans-I/O; no allocation. */
#include "rdma/soft/mpa.h"

/* Frame (RFC 5044 7.1, RFC 6581 5):
 *   Key(16) | flags M 0x80 C 0x40 R 0x20 E 0x10 | Rev | PD_Length BE16 |
 *   [IRD BE16 | ORD BE16] | private data */
int rr_mpa_encode(const struct rr_mpa_frame *f, uint8_t *out, size_t cap)
{
	size_t block = f->enhanced ? RR_MPA_V2_LEN : 0;
	size_t total = RR_MPA_HDR_LEN + block + f->pd_len;

	if (block + f->pd_len > RR_MPA_PD_MAX)
		return -EMSGSIZE;
	if (total > cap)
		return -ENOSPC;
	memcpy(out, f->reply ? RR_MPA_KEY_REP : RR_MPA_KEY_REQ, RR_MPA_KEY_LEN);
	out[16] = (uint8_t)((f->flags & ~RR_MPA_F_ENHANCED) | (f->enhanced ? RR_MPA_F_ENHANCED : 0));
	out[17] = f->rev;
	rr_put_be16(out + 18, (uint16_t)(block + f->pd_len));
	if (block) {
		rr_put_be16(out + 20, f->ird);
		rr_put_be16(out + 22, f->ord);
	}
	memcpy(out + RR_MPA_HDR_LEN + block, f->pd, f->pd_len);
	return (int)total;
}

void rr_mpa_parser_init(struct rr_mpa_parser *p, bool expect_reply)
{
	memset(p, 0, sizeof(*p));
	p->expect_reply = expect_reply;
	p->need = RR_MPA_HDR_LEN;
}

size_t rr_mpa_want(struct rr_mpa_parser *p, uint8_t **dst)
{
	if (p->err || p->done) {
		*dst = NULL;
		return 0;
	}
	*dst = p->buf + p->have;
	return p->need - p->have;
}

int rr_mpa_advance(struct rr_mpa_parser *p, size_t n)
{
	size_t before = p->have;

	if (p->err)
		return p->err;
	if (p->done)
		return n ? -EINVAL : 1;
	if (n > p->need - p->have)
		return -EINVAL;
	p->have += n;
	/* Check the key as soon as it is in: a peer speaking something else is
	 * found without waiting for 20 bytes. */
	if (before < RR_MPA_KEY_LEN || p->have <= RR_MPA_KEY_LEN) {
		const char *key = p->expect_reply ? RR_MPA_KEY_REP : RR_MPA_KEY_REQ;
		size_t upto = RR_MIN(p->have, (size_t)RR_MPA_KEY_LEN);

		if (memcmp(p->buf, key, upto) != 0)
			return p->err = -EPROTO;
	}
	if (p->have < p->need)
		return 0;
	if (p->need == RR_MPA_HDR_LEN) {
		uint16_t pd = rr_get_be16(p->buf + 18);

		if (pd > RR_MPA_PD_MAX)
			return p->err = -EMSGSIZE;
		p->need += pd;
		if (pd)
			return 0;
	}
	p->done = true;
	return 1;
}

/* ONC RPC record marking (RFC 5531 section 11):
 *   last(1) | fragment length(31) | XID(4) | msg_type(4) | ... */
bool rr_mpa_looks_like_rpc(const uint8_t *b, size_t n)
{
	uint32_t h, mt;

	if (n < 4)
		return false;
	h = rr_get_be32(b);
	if (!(h & 0x80000000u) || (h & 0x7fffffffu) < 8)
		return false;
	if (n < 12)
		return true;
	mt = rr_get_be32(b + 8);
	return mt == 0 || mt == 1;
}

int rr_mpa_feed(struct rr_mpa_parser *p, const uint8_t *data, size_t len, size_t *used)
{
	*used = 0;
	while (*used < len) {
		uint8_t *dst;
		size_t w = rr_mpa_want(p, &dst), c;
		int r;

		if (!w)
			return p->err ? p->err : 1;
		c = RR_MIN(w, len - *used);
		memcpy(dst, data + *used, c);
		*used += c;
		r = rr_mpa_advance(p, c);
		if (r)
			return r;
	}
	return p->done ? 1 : 0;
}

int rr_mpa_parser_frame(const struct rr_mpa_parser *p, struct rr_mpa_frame *f)
{
	uint16_t pd_len;
	const uint8_t *pd;

	if (p->err)
		return p->err;
	if (!p->done)
		return -EAGAIN;
	memset(f, 0, offsetof(struct rr_mpa_frame, pd));
	f->reply = p->expect_reply;
	f->flags = p->buf[16];
	f->rev = p->buf[17];
	pd_len = rr_get_be16(p->buf + 18);
	pd = p->buf + RR_MPA_HDR_LEN;
	if (f->rev == 2 && (f->flags & RR_MPA_F_ENHANCED)) {
		if (pd_len < RR_MPA_V2_LEN)
			return -EPROTO;
		f->enhanced = true;
		f->ird = rr_get_be16(pd);
		f->ord = rr_get_be16(pd + 2);
		pd += RR_MPA_V2_LEN;
		pd_len -= RR_MPA_V2_LEN;
	}
	f->pd_len = pd_len;
	memcpy(f->pd, pd, pd_len);
	return 0;
}

int rr_mpa_make_request(const struct rr_mpa_cfg *cfg, const void *pd, size_t pd_len,
			struct rr_mpa_frame *f)
{
	if ((cfg->rev != 1 && cfg->rev != 2) || pd_len > RR_MPA_ULP_PD_MAX || (pd_len && !pd))
		return -EINVAL;
	if (cfg->rev == 2 && (cfg->ird == 0 || cfg->ord == 0 || cfg->ird > RR_MPA_IRDORD_MASK ||
			      cfg->ord > RR_MPA_IRDORD_MASK))
		return -EINVAL;
	memset(f, 0, offsetof(struct rr_mpa_frame, pd));
	f->reply = false;
	f->rev = cfg->rev;
	f->flags = cfg->crc ? RR_MPA_F_CRC : 0;
	if (cfg->rev == 2) {
		/* Never peer-to-peer (as siw): no P2P/RTR bits. */
		f->enhanced = true;
		f->ird = cfg->ird;
		f->ord = cfg->ord;
	}
	f->pd_len = (uint16_t)pd_len;
	if (pd_len)
		memcpy(f->pd, pd, pd_len);
	return 0;
}

int rr_mpa_responder_check(const struct rr_mpa_cfg *cfg, const struct rr_mpa_frame *req,
			   struct rr_mpa_conn *conn)
{
	memset(conn, 0, sizeof(*conn));
	conn->rev = req->rev == 1 ? 1 : 2;
	conn->crc = cfg->crc || (req->flags & RR_MPA_F_CRC);
	conn->ird = cfg->ird;
	conn->ord = cfg->ord;
	if (req->reply)
		return -EPROTO;
	if (req->rev != 1 && req->rev != 2)
		return -EPROTONOSUPPORT;
	if (req->rev == 2 && (req->flags & RR_MPA_F_ENHANCED) && !req->enhanced)
		return -EPROTO;
	if (req->enhanced) {
		/* RFC 6581 5: the peer's ORD bounds our IRD and its IRD our ORD. */
		conn->enhanced = true;
		conn->ird = RR_MIN(cfg->ird, (uint16_t)(req->ord & RR_MPA_IRDORD_MASK));
		conn->ord = RR_MIN(cfg->ord, (uint16_t)(req->ird & RR_MPA_IRDORD_MASK));
		if (req->ird & RR_MPA_IRD_P2P) {
			conn->p2p = true;
			if (req->ord & RR_MPA_ORD_WRITE_RTR)
				conn->rtr = RR_MPA_ORD_WRITE_RTR;
			else if (req->ord & RR_MPA_ORD_READ_RTR)
				conn->rtr = RR_MPA_ORD_READ_RTR;
			else
				conn->rtr = RR_MPA_ORD_WRITE_RTR;
		}
	}
	if (req->flags & RR_MPA_F_MARKERS)
		return -EPROTO; /* markers are not supported (as siw) */
	return 0;
}

int rr_mpa_make_reply(const struct rr_mpa_conn *conn, bool reject, const void *pd,
		      size_t pd_len, struct rr_mpa_frame *f)
{
	if (pd_len > RR_MPA_ULP_PD_MAX || (pd_len && !pd))
		return -EINVAL;
	memset(f, 0, offsetof(struct rr_mpa_frame, pd));
	f->reply = true;
	f->rev = conn->rev;
	f->flags = (uint8_t)((conn->crc ? RR_MPA_F_CRC : 0) | (reject ? RR_MPA_F_REJECT : 0));
	if (conn->enhanced) {
		f->enhanced = true;
		f->ird = (uint16_t)(conn->ird | (conn->p2p ? RR_MPA_IRD_P2P : 0));
		f->ord = (uint16_t)(conn->ord | (conn->p2p ? conn->rtr : 0));
	}
	f->pd_len = (uint16_t)pd_len;
	if (pd_len)
		memcpy(f->pd, pd, pd_len);
	return 0;
}

int rr_mpa_initiator_check(const struct rr_mpa_cfg *cfg, const struct rr_mpa_frame *rep,
			   struct rr_mpa_conn *conn, struct rr_term *term)
{
	uint16_t rep_ird, rep_ord;

	memset(conn, 0, sizeof(*conn));
	memset(term, 0, sizeof(*term));
	if (!rep->reply)
		return -EPROTO;
	if (rep->flags & RR_MPA_F_REJECT)
		return -ECONNREFUSED;
	if (rep->flags & RR_MPA_F_MARKERS)
		return -EPROTO;
	/* RFC 5044 7.1: the responder must use CRC when the initiator asked. */
	if (cfg->crc && !(rep->flags & RR_MPA_F_CRC))
		return -EPROTO;
	if (rep->rev > cfg->rev || rep->rev < 1)
		return -EPROTO;
	conn->rev = rep->rev;
	conn->crc = rep->flags & RR_MPA_F_CRC;
	conn->ird = cfg->ird;
	conn->ord = cfg->ord;
	if (cfg->rev == 2) {
		/* siw: a revision 2 initiator requires revision 2 + E back. */
		if (rep->rev != 2 || !rep->enhanced)
			return -EPROTO;
		conn->enhanced = true;
		rep_ird = rep->ird & RR_MPA_IRDORD_MASK;
		rep_ord = rep->ord & RR_MPA_IRDORD_MASK;
		if (rep_ord > cfg->ird) {
			term->layer = RR_TL_LLP;
			term->etype = 0;
			term->ecode = RR_LLP_EC_INSUFFICIENT_IRD;
			return -ENOBUFS;
		}
		conn->ird = cfg->ird;
		conn->ord = RR_MIN(cfg->ord, rep_ird);
	}
	return 0;
}
