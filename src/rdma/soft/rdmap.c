/* SPDX-License-Identifier: BSD-2-Clause */
/* RDMAP message bodies and the Terminate message (RFC 5040 sections 4.4, 4.8
 * and 7; RFC 5041 section 8; RFC 5044 section 8; draft-talpey-rdma-commit-00
 * sections 3.2.1-3.2.2). Pure codecs: every decode bounds-checks its input and
 * fails with -EBADMSG; nothing here allocates or performs I/O. */
#include "rdma/soft/rdmap.h"


/* RDMA Read Request (RFC 5040 4.4):
 * sink STag(4) | sink TO(8) | size(4) | source STag(4) | source TO(8) */
void rr_rdmap_rreq_encode(const struct rr_rreq *r, uint8_t out[RR_RREQ_BODY])
{
	rr_put_be32(out, r->sink_stag);
	rr_put_be64(out + 4, r->sink_to);
	rr_put_be32(out + 12, r->size);
	rr_put_be32(out + 16, r->src_stag);
	rr_put_be64(out + 20, r->src_to);
}

void rr_rdmap_rreq_decode(const uint8_t in[RR_RREQ_BODY], struct rr_rreq *r)
{
	r->sink_stag = rr_get_be32(in);
	r->sink_to = rr_get_be64(in + 4);
	r->size = rr_get_be32(in + 12);
	r->src_stag = rr_get_be32(in + 16);
	r->src_to = rr_get_be64(in + 20);
}

/* RDMA Commit Request (commit draft 3.2.1):
 * Request Identifier(4) | { Data Sink STag(4) | Length(4) | Data Sink TO(8) }+ */
int rr_rdmap_commit_req_encode(const struct rr_commit_req *c, uint8_t *out, size_t cap)
{
	size_t len;

	if (c->nregions == 0 || c->nregions > RR_COMMIT_MAX_REGIONS)
		return -EINVAL;
	len = rr_rdmap_commit_req_len(c->nregions);
	if (len > cap)
		return -ENOSPC;
	rr_put_be32(out, c->id);
	for (unsigned i = 0; i < c->nregions; i++) {
		uint8_t *p = out + 4 + (size_t)i * RR_COMMIT_REGION_LEN;

		rr_put_be32(p, c->region[i].stag);
		rr_put_be32(p + 4, c->region[i].len);
		rr_put_be64(p + 8, c->region[i].to);
	}
	return (int)len;
}

int rr_rdmap_commit_req_decode(const uint8_t *in, size_t len, struct rr_commit_req *c)
{
	size_t n;

	if (len < 4 + RR_COMMIT_REGION_LEN || (len - 4) % RR_COMMIT_REGION_LEN)
		return -EBADMSG;
	n = (len - 4) / RR_COMMIT_REGION_LEN;
	if (n > RR_COMMIT_MAX_REGIONS)
		return -EBADMSG;
	c->id = rr_get_be32(in);
	c->nregions = (unsigned)n;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *p = in + 4 + i * RR_COMMIT_REGION_LEN;

		c->region[i].stag = rr_get_be32(p);
		c->region[i].len = rr_get_be32(p + 4);
		c->region[i].to = rr_get_be64(p + 8);
	}
	return 0;
}

/* RDMA Commit Response (commit draft 3.2.2): Original Request Id(4) | Status(4) */
void rr_rdmap_commit_resp_encode(const struct rr_commit_resp *c, uint8_t out[8])
{
	rr_put_be32(out, c->id);
	rr_put_be32(out + 4, c->status);
}

void rr_rdmap_commit_resp_decode(const uint8_t in[8], struct rr_commit_resp *c)
{
	c->id = rr_get_be32(in);
	c->status = rr_get_be32(in + 4);
}

/* Terminate header (RFC 5040 4.8), RFC layout:
 *   byte 0: Layer << 4 | EType;  byte 1: Error Code;
 *   byte 2: M 0x80 | D 0x40 | R 0x20;  byte 3: reserved
 *   then [DDP Segment Length(2) + Terminated DDP Header] if M or D,
 *   then [Terminated RDMA Header (28)] if R. */
size_t rr_rdmap_term_encode(const struct rr_term *t, uint8_t out[RR_TERM_MAX_BODY])
{
	size_t n = RR_TERM_CTRL_LEN;

	out[0] = (uint8_t)((t->layer & 0xf) << 4 | (t->etype & 0xf));
	out[1] = t->ecode;
	out[2] = (uint8_t)((t->m ? 0x80 : 0) | (t->d ? 0x40 : 0) | (t->r ? 0x20 : 0));
	out[3] = 0;
	if ((t->m || t->d) && t->ddp_hdr_len) {
		size_t hl = RR_MIN((size_t)t->ddp_hdr_len, (size_t)RR_TERM_DDP_MAX);

		memcpy(out + n, t->ddp_hdr, hl);
		n += hl;
	}
	if (t->r) {
		memcpy(out + n, t->rdmap_hdr, RR_RREQ_BODY);
		n += RR_RREQ_BODY;
	}
	return n;
}

static bool term_plausible(unsigned layer, unsigned etype)
{
	switch (layer) {
	case RR_TL_RDMAP:
	case RR_TL_DDP:
		return etype <= 2;
	case RR_TL_LLP:
		return etype == 0;
	default:
		return false;
	}
}

/* Decodes either layout. siw's x86 bitfields put Layer in the low nibble of
 * byte 0 and M/D/R in bits 0x01/0x02/0x04 of byte 2. The layout is chosen by
 * which flag bits are used, then by which nibble order is a valid
 * layer/type pair; when both read validly the RFC layout wins. */
int rr_rdmap_term_decode(const uint8_t *in, size_t len, struct rr_term *t)
{
	unsigned b0, b2;
	bool rfc_ok, siw_ok;
	size_t pos = RR_TERM_CTRL_LEN;

	memset(t, 0, sizeof(*t));
	if (len < RR_TERM_CTRL_LEN)
		return -EBADMSG;
	b0 = in[0];
	b2 = in[2];
	rfc_ok = !(b2 & 0x1f) && term_plausible(b0 >> 4, b0 & 0xf);
	siw_ok = !(b2 & 0xf8) && term_plausible(b0 & 0xf, b0 >> 4);
	if (rfc_ok) {
		t->layer = (uint8_t)(b0 >> 4);
		t->etype = (uint8_t)(b0 & 0xf);
		t->m = b2 & 0x80;
		t->d = b2 & 0x40;
		t->r = b2 & 0x20;
	} else if (siw_ok) {
		t->siw_layout = true;
		t->layer = (uint8_t)(b0 & 0xf);
		t->etype = (uint8_t)(b0 >> 4);
		t->m = b2 & 0x01;
		t->d = b2 & 0x02;
		t->r = b2 & 0x04;
	} else {
		return -EBADMSG;
	}
	t->ecode = in[1];
	if (t->m || t->d) {
		size_t hl;

		if (len < pos + 4)
			return -EBADMSG;
		hl = (rr_get_be16(in + pos + 2) & RR_DDP_T) ? RR_HDR_TAGGED : RR_HDR_UNTAGGED;
		if (len < pos + hl)
			return -EBADMSG;
		memcpy(t->ddp_hdr, in + pos, hl);
		t->ddp_hdr_len = (uint8_t)hl;
		pos += hl;
	}
	if (t->r) {
		/* siw sets R on Send errors without appending an RDMA header. */
		if (len >= pos + RR_RREQ_BODY)
			memcpy(t->rdmap_hdr, in + pos, RR_RREQ_BODY);
		else
			t->r = false;
	}
	return 0;
}

const char *rr_rdmap_term_str(const struct rr_term *t)
{
	static const char *const rdmap_names[] = {
		[RR_RDMAP_EC_INVALID_STAG] = "invalid STag",
		[RR_RDMAP_EC_BOUNDS] = "base or bounds violation",
		[RR_RDMAP_EC_ACCESS] = "access rights violation",
		[RR_RDMAP_EC_STAG_NOT_ASSOC] = "STag not associated with RDMAP stream",
		[RR_RDMAP_EC_TO_WRAP] = "TO wrap",
		[RR_RDMAP_EC_VERSION] = "invalid RDMAP version",
		[RR_RDMAP_EC_OPCODE] = "unexpected opcode",
		[RR_RDMAP_EC_CATA_STREAM] = "catastrophic, localized to stream",
		[RR_RDMAP_EC_CATA_GLOBAL] = "catastrophic, global",
		[RR_RDMAP_EC_CANNOT_INVALIDATE] = "STag cannot be invalidated",
	};
	static const char *const ddp_t[] = {"invalid STag", "base or bounds violation",
					    "STag not associated with stream", "TO wrap",
					    "invalid DDP version"};
	static const char *const ddp_u[] = {"?", "invalid QN", "invalid MSN - no buffer",
					    "invalid MSN - range", "invalid MO",
					    "DDP message too long", "invalid DDP version"};
	static const char *const llp[] = {"?", "TCP closed", "MPA CRC error",
					  "MPA marker error", "invalid MPA request/reply",
					  "local catastrophic", "insufficient IRD",
					  "no matching RTR"};

	switch (t->layer) {
	case RR_TL_RDMAP:
		if (t->etype == RR_RDMAP_ET_CATASTROPHIC)
			return "RDMAP local catastrophic";
		if (t->ecode < RR_ARRAY_SIZE(rdmap_names) && rdmap_names[t->ecode])
			return rdmap_names[t->ecode];
		return "RDMAP unspecified";
	case RR_TL_DDP:
		if (t->etype == RR_DDP_ET_TAGGED && t->ecode < RR_ARRAY_SIZE(ddp_t))
			return ddp_t[t->ecode];
		if (t->etype == RR_DDP_ET_UNTAGGED && t->ecode < RR_ARRAY_SIZE(ddp_u))
			return ddp_u[t->ecode];
		return "DDP catastrophic";
	case RR_TL_LLP:
		if (t->ecode < RR_ARRAY_SIZE(llp))
			return llp[t->ecode];
		return "LLP error";
	default:
		return "unknown layer";
	}
}
