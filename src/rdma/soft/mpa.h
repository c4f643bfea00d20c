/* SPDX-License-Identifier: BSD-2-Clause */
/* MPA connection setup (RFC 5044 section 7, RFC 6581 enhanced connection
 * establishment, "revision 2"): the Request/Reply frames, an incremental
 * parser that never reads past the frame, and the negotiation rules of the
 * initiator and the responder as Linux siw applies them. Sans-I/O: the I/O
 * layer moves the bytes and enforces the timeout with the injected clock.
 *
 * Choices (docs/soft-iwarp.md): markers are never used (a request with M is
 * rejected, a reply with M fails the connection); CRC is used when either
 * side asks; our initiator sends revision 2 with E and a nonzero IRD/ORD
 * (Linux refuses IRD 0 and revision 1 from a requester) and never asks for
 * peer-to-peer mode; as responder we accept revision 1 and 2, and honour a
 * peer-to-peer request the way siw does (Write RTR preferred). */
#ifndef RR_SOFT_MPA_H
#define RR_SOFT_MPA_H

#include "rdma/soft/rdmap.h"

#define RR_MPA_KEY_LEN 16
#define RR_MPA_HDR_LEN 20
#define RR_MPA_PD_MAX 512      /* RFC 5044 7.1: PD_Length at most 512 */
#define RR_MPA_ULP_PD_MAX 252  /* what we send: 256 total with the IRD/ORD block (siw) */
#define RR_MPA_V2_LEN 4

#define RR_MPA_KEY_REQ "MPA ID Req Frame"
#define RR_MPA_KEY_REP "MPA ID Rep Frame"

enum {
	RR_MPA_F_MARKERS = 0x80,
	RR_MPA_F_CRC = 0x40,
	RR_MPA_F_REJECT = 0x20,
	RR_MPA_F_ENHANCED = 0x10,
};
/* RFC 6581 IRD/ORD words */
#define RR_MPA_IRD_P2P 0x8000u
#define RR_MPA_IRD_ZERO_RTR 0x4000u
#define RR_MPA_ORD_WRITE_RTR 0x8000u
#define RR_MPA_ORD_READ_RTR 0x4000u
#define RR_MPA_IRDORD_MASK 0x3fffu

/* Request/Reply frame (RFC 5044 7.1, RFC 6581 5):
 *   Key(16) | M C R E Res(4) | Rev(8) | PD_Length BE16 |
 *   [E: IRD BE16 | ORD BE16] | private data */
struct rr_mpa_frame {
	bool reply;         /* key: Rep (true) or Req */
	uint8_t flags;      /* byte 16 as received / to send */
	uint8_t rev;
	bool enhanced;      /* revision 2, E set, IRD/ORD block present */
	uint16_t ird, ord;  /* raw words including the P2P/RTR bits */
	uint16_t pd_len;    /* upper-layer private data (after the block) */
	uint8_t pd[RR_MPA_PD_MAX];
};

/* Encodes @f; returns the frame length or -EMSGSIZE / -ENOSPC. */
int rr_mpa_encode(const struct rr_mpa_frame *f, uint8_t *out, size_t cap);

struct rr_mpa_parser {
	bool expect_reply;
	uint8_t buf[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	size_t have, need;
	int err;           /* sticky error */
	bool done;
};
void rr_mpa_parser_init(struct rr_mpa_parser *p, bool expect_reply);
/* Pull interface: how many bytes next and where; 0 once done or failed. */
size_t rr_mpa_want(struct rr_mpa_parser *p, uint8_t **dst);
/* Returns 1 when the frame is complete, 0 for more, or -EPROTO (wrong key)
 * / -EMSGSIZE (PD_Length above 512). */
int rr_mpa_advance(struct rr_mpa_parser *p, size_t n);
/* True when the @n bytes a peer sent where an MPA frame belongs look like
 * ONC RPC record marking (RFC 5531 section 11): a last-fragment header
 * (high bit set) announcing at least an XID and a message type, and, when
 * 12 bytes are in, message type CALL (0) or REPLY (1). That peer speaks
 * ONC RPC over plain TCP (a tcp:// server or client), not iWARP. */
bool rr_mpa_looks_like_rpc(const uint8_t *b, size_t n);
/* Copying convenience; *@used never goes past the end of the frame. */
int rr_mpa_feed(struct rr_mpa_parser *p, const uint8_t *data, size_t len, size_t *used);
/* Decodes the complete frame. Returns 0, -EAGAIN (incomplete) or -EPROTO
 * (E set but no room for the IRD/ORD block). */
int rr_mpa_parser_frame(const struct rr_mpa_parser *p, struct rr_mpa_frame *f);

/* Local settings. */
struct rr_mpa_cfg {
	uint8_t rev;        /* initiator: 1 or 2 (2 unless testing) */
	bool crc;           /* ask for CRC */
	uint16_t ird, ord;  /* local limits, 1..0x3fff for an initiator */
};

/* The negotiated connection. */
struct rr_mpa_conn {
	uint8_t rev;
	bool enhanced;
	bool crc;
	uint16_t ird;       /* inbound Read/Commit Requests we accept */
	uint16_t ord;       /* outbound Read/Commit Requests we may have outstanding */
	bool p2p;           /* responder: peer-to-peer mode agreed */
	uint16_t rtr;       /* RR_MPA_ORD_WRITE_RTR or _READ_RTR when p2p */
};

/* Initiator: builds the Request. @pd (<= 252 bytes) is copied.
 * Returns 0 or -EINVAL (bad revision, IRD/ORD 0 or above 0x3fff, pd too long). */
int rr_mpa_make_request(const struct rr_mpa_cfg *cfg, const void *pd, size_t pd_len,
			struct rr_mpa_frame *f);
/* Responder: checks the Request and computes @conn. Returns 0 when it can be
 * accepted, or -EPROTONOSUPPORT (revision), -EPROTO (markers, E without the
 * block, a Reply key) when it must be rejected. @conn is filled in both cases
 * so a Reject can be built. */
int rr_mpa_responder_check(const struct rr_mpa_cfg *cfg, const struct rr_mpa_frame *req,
			   struct rr_mpa_conn *conn);
/* Responder: builds the Reply (or a Reject, R set) for @conn. */
int rr_mpa_make_reply(const struct rr_mpa_conn *conn, bool reject, const void *pd,
		      size_t pd_len, struct rr_mpa_frame *f);
/* Initiator: checks the Reply against what we asked. Returns 0 (connected,
 * @conn filled), -ECONNREFUSED (R: rejected, private data in @rep),
 * -EPROTO (markers, revision or CRC rules broken), or -ENOBUFS (peer ORD above
 * our IRD: *@term is the LLP "insufficient IRD" Terminate to send). */
int rr_mpa_initiator_check(const struct rr_mpa_cfg *cfg, const struct rr_mpa_frame *rep,
			   struct rr_mpa_conn *conn, struct rr_term *term);

#endif
