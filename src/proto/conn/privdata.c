/* SPDX-License-Identifier: BSD-2-Clause */
/* Connection private data of RPC-over-RDMA Version 1: encoder, parser and
 * negotiation for the RFC 8797 block (sections 4, 4.1, 4.2, 5.1, 5.2) and the
 * project's extension block that follows it (docs/protocol.md). Pure
 * functions: bytes in, structures out; explicit bounds checks on every read. */
#include "proto/conn/privdata.h"

uint32_t rr_pd_size_round(uint32_t bytes)
{
	if (bytes < RR_PD_SIZE_MIN)
		return 0;
	if (bytes > RR_PD_SIZE_MAX)
		return RR_PD_SIZE_MAX;
	return bytes & ~(uint32_t)1023u;
}

int rr_pd_size_encode(uint32_t bytes, uint8_t *code)
{
	uint32_t r = rr_pd_size_round(bytes);

	if (r == 0)
		return -EINVAL;
	*code = (uint8_t)(r / 1024u - 1u);
	return 0;
}

static int local_check(const struct rr_pd_local *l, uint8_t *snd, uint8_t *rcv)
{
	if (!l || (l->ext_caps & ~RR_PD_EXT_CAPS_KNOWN))
		return -EINVAL;
	if (rr_pd_size_encode(l->send_size, snd) < 0 ||
	    rr_pd_size_encode(l->recv_size, rcv) < 0)
		return -EINVAL;
	return 0;
}

/* RFC 8797 block (RFC 8797 section 4), 8 octets:
 *   0..3 Format Identifier 0xf6ab0e18 (BE) | 4 Version = 1 |
 *   5 Flags: 7 reserved bits (0) + R in bit 0 | 6 Send Size | 7 Receive Size
 * Extension block (docs/protocol.md), 12 octets, immediately after it:
 *   0..3 Format Identifier 0xac3a363d (BE) | 4 Version = 1 | 5 Length = 12 |
 *   6..7 Reserved (0) | 8..11 Capabilities (BE): bit 0 RELIABLE_REPLY,
 *   bit 1 RDMA_COMMIT, other bits reserved (0) */
int rr_pd_encode(const struct rr_pd_local *l, void *buf, size_t cap)
{
	uint8_t snd, rcv, *p = buf;
	size_t need;
	int rc;

	rc = local_check(l, &snd, &rcv);
	if (rc < 0)
		return rc;
	need = RR_PD_LEN + (l->ext_caps ? RR_PD_EXT_LEN : 0);
	if (!p || cap < need)
		return -EMSGSIZE;
	rr_put_be32(p, RR_PD_FORMAT_ID);
	p[4] = RR_PD_VERSION;
	p[5] = l->remote_inv ? RR_PD_FLAG_R : 0;
	p[6] = snd;
	p[7] = rcv;
	if (l->ext_caps) {
		p += RR_PD_LEN;
		rr_put_be32(p, RR_PD_EXT_FORMAT_ID);
		p[4] = RR_PD_EXT_VERSION;
		p[5] = RR_PD_EXT_LEN;
		p[6] = 0;
		p[7] = 0;
		rr_put_be32(p + 8, l->ext_caps);
	}
	return (int)need;
}

void rr_pd_info_defaults(struct rr_pd_info *out)
{
	memset(out, 0, sizeof(*out));
	out->status = RR_PD_ABSENT_EMPTY;
	out->ext_status = RR_PD_EXT_NO_BASE;
	out->send_size = RR_PD_SIZE_DEFAULT;
	out->recv_size = RR_PD_SIZE_DEFAULT;
}

/* The extension block, looked for only immediately after a valid RFC 8797
 * block (@p, @n: the bytes that follow it). Sets ext_* in @out. */
static void parse_ext(const uint8_t *p, size_t n, struct rr_pd_info *out)
{
	if (n == 0) {
		out->ext_status = RR_PD_EXT_NONE;
		return;
	}
	if (n < 4 || rr_get_be32(p) != RR_PD_EXT_FORMAT_ID) {
		out->ext_status = RR_PD_EXT_FOREIGN;
		return;
	}
	if (n < 6) { /* identifier, but no Version and Length */
		out->ext_status = RR_PD_EXT_TRUNCATED;
		return;
	}
	out->ext_version = p[4];
	out->ext_len = p[5];
	if (p[4] != RR_PD_EXT_VERSION) {
		out->ext_status = RR_PD_EXT_BAD_VERSION;
		return;
	}
	if (p[5] < RR_PD_EXT_LEN) {
		out->ext_status = RR_PD_EXT_BAD_LENGTH;
		return;
	}
	if (p[5] > n) { /* Length >= 12 runs past the data */
		out->ext_status = RR_PD_EXT_TRUNCATED;
		return;
	}
	out->ext_caps_raw = rr_get_be32(p + 8);
	out->ext_caps = out->ext_caps_raw & RR_PD_EXT_CAPS_KNOWN;
	out->ext_status = RR_PD_EXT_PRESENT;
}

/* Parser for the layouts above (RFC 8797 section 5.2): the RFC 8797 block
 * anywhere in the data, at any alignment; the extension block only at the
 * octet right after it. */
int rr_pd_parse(const void *buf, size_t len, struct rr_pd_info *out)
{
	const uint8_t *p = buf;
	enum rr_pd_status first = RR_PD_ABSENT_NO_MAGIC;
	bool seen = false;

	if (!out || (!buf && len))
		return -EINVAL;
	rr_pd_info_defaults(out);
	if (len == 0)
		return 0;
	out->status = RR_PD_ABSENT_NO_MAGIC;
	/* RFC 8797 section 5.2: search the whole buffer, any alignment. A
	 * rejected candidate (truncated or unknown version) does not end the
	 * search: prepended transport data may contain the identifier by chance. */
	for (size_t off = 0; len >= 4 && off <= len - 4; off++) {
		enum rr_pd_status why;

		if (rr_get_be32(p + off) != RR_PD_FORMAT_ID)
			continue;
		if (len - off < RR_PD_LEN) {
			why = RR_PD_ABSENT_TRUNCATED;
		} else if (p[off + 4] != RR_PD_VERSION) {
			why = RR_PD_ABSENT_BAD_VERSION;
		} else {
			out->status = RR_PD_PRESENT;
			out->offset = off;
			out->flags = p[off + 5];
			out->remote_inv = (p[off + 5] & RR_PD_FLAG_R) != 0;
			out->send_size = rr_pd_size_decode(p[off + 6]);
			out->recv_size = rr_pd_size_decode(p[off + 7]);
			parse_ext(p + off + RR_PD_LEN, len - off - RR_PD_LEN, out);
			return 0;
		}
		if (!seen) {
			first = why;
			seen = true;
		}
	}
	out->status = first;
	return 0;
}

int rr_pd_negotiate_info(const struct rr_pd_local *l, enum rr_pd_role role,
			 const struct rr_pd_info *peer, struct rr_pd_conn *out)
{
	struct rr_pd_info none;
	uint32_t own_send, own_recv;
	uint8_t snd, rcv;
	int rc;

	if (!out || (role != RR_PD_REQUESTER && role != RR_PD_RESPONDER))
		return -EINVAL;
	rc = local_check(l, &snd, &rcv);
	if (rc < 0)
		return rc;
	if (!peer || peer->status != RR_PD_PRESENT) {
		/* RFC 8797 section 5.1: as if R = 0 and both sizes encoded 0. */
		rr_pd_info_defaults(&none);
		peer = &none;
	}
	own_send = rr_pd_size_decode(snd);
	own_recv = rr_pd_size_decode(rcv);

	memset(out, 0, sizeof(*out));
	out->peer_present = peer->status == RR_PD_PRESENT;
	/* RFC 8797 section 4.2: each sender uses min(own send, peer receive);
	 * the other direction is what the peer computes by the same rule. */
	out->send_threshold = RR_MIN(own_send, peer->recv_size);
	out->recv_threshold = RR_MIN(peer->send_size, own_recv);
	if (role == RR_PD_REQUESTER) {
		out->call_threshold = out->send_threshold;
		out->reply_threshold = out->recv_threshold;
	} else {
		out->call_threshold = out->recv_threshold;
		out->reply_threshold = out->send_threshold;
	}
	/* RFC 8797 section 4.1: Send With Invalidate only when both set R. We
	 * still accept it whenever we set R (Linux's server sends it when the
	 * client set R, whatever its own R). */
	out->peer_r = peer->remote_inv;
	out->send_inv = l->remote_inv && peer->remote_inv;
	out->peer_may_inv = l->remote_inv;
	out->ext_caps = l->ext_caps &
			(peer->ext_status == RR_PD_EXT_PRESENT ? peer->ext_caps : 0);
	return 0;
}

int rr_pd_negotiate(const struct rr_pd_local *l, enum rr_pd_role role,
		    const void *peer_buf, size_t peer_len, struct rr_pd_conn *out)
{
	struct rr_pd_info info;

	if (!peer_buf)
		peer_len = 0;
	if (rr_pd_parse(peer_buf, peer_len, &info) < 0)
		rr_pd_info_defaults(&info);
	return rr_pd_negotiate_info(l, role, &info, out);
}

const char *rr_pd_status_name(enum rr_pd_status s)
{
	switch (s) {
	case RR_PD_PRESENT: return "present";
	case RR_PD_ABSENT_EMPTY: return "absent: empty";
	case RR_PD_ABSENT_NO_MAGIC: return "absent: no format identifier";
	case RR_PD_ABSENT_TRUNCATED: return "absent: truncated";
	case RR_PD_ABSENT_BAD_VERSION: return "absent: unknown version";
	}
	return "?";
}

const char *rr_pd_ext_status_name(enum rr_pd_ext_status s)
{
	switch (s) {
	case RR_PD_EXT_PRESENT: return "present";
	case RR_PD_EXT_NO_BASE: return "no RFC 8797 block";
	case RR_PD_EXT_NONE: return "nothing follows";
	case RR_PD_EXT_FOREIGN: return "foreign bytes follow";
	case RR_PD_EXT_TRUNCATED: return "truncated";
	case RR_PD_EXT_BAD_VERSION: return "unknown version";
	case RR_PD_EXT_BAD_LENGTH: return "bad length";
	}
	return "?";
}
