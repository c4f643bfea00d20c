/* SPDX-License-Identifier: BSD-2-Clause */
/* iWARP RDMAP (RFC 5040) and DDP (RFC 5041) wire constants, the RDMAP
 * message bodies (RDMA Read Request, RDMA Commit Request/Response of
 * draft-talpey-rdma-commit-00) and the Terminate message: error codes
 * (RFC 5040 section 7, RFC 5041 section 8, RFC 5044 section 8), encoding in
 * the RFC layout and decoding of both the RFC layout and Linux siw's
 * bitfield-swapped layout. Sans-I/O: bytes in, structures out. */
#ifndef RR_SOFT_RDMAP_H
#define RR_SOFT_RDMAP_H

#include "common/common.h"

/* DDP/RDMAP control field (RFC 5041 4.2 / RFC 5040 4.2), 16 bits BE:
 * T 0x8000 | L 0x4000 | Rsvd 0x3c00 | DV 0x0300 | RV 0x00c0 | Rsv 0x0030 | Opcode 0x000f */
#define RR_DDP_T 0x8000u
#define RR_DDP_L 0x4000u
#define RR_DDP_DV_MASK 0x0300u
#define RR_DDP_DV_SHIFT 8
#define RR_RDMAP_RV_MASK 0x00c0u
#define RR_RDMAP_RV_SHIFT 6
#define RR_RDMAP_OP_MASK 0x000fu
#define RR_DDP_VERSION 1
#define RR_RDMAP_VERSION 1

enum rr_rdmap_op {
	RR_OP_WRITE = 0x0,
	RR_OP_READ_REQ = 0x1,
	RR_OP_READ_RESP = 0x2,
	RR_OP_SEND = 0x3,
	RR_OP_SEND_INV = 0x4,
	RR_OP_SEND_SE = 0x5,
	RR_OP_SEND_SE_INV = 0x6,
	RR_OP_TERMINATE = 0x7,
	RR_OP_COMMIT_REQ = 0xc,  /* draft-talpey-rdma-commit-00 3.2 */
	RR_OP_COMMIT_RESP = 0xd,
};

/* DDP untagged queues (RFC 5040 5.1, RFC 7306 10.2, commit draft 3.2.3). */
enum { RR_QN_SEND = 0, RR_QN_READ = 1, RR_QN_TERM = 2, RR_QN_RESP = 3, RR_QN_COUNT = 4 };

/* Header sizes counted from the ULPDU_Length field (MPA 2 + DDP/RDMAP). */
#define RR_HDR_TAGGED 16   /* len(2) ctrl(2) STag(4) TO(8) */
#define RR_HDR_UNTAGGED 20 /* len(2) ctrl(2) InvSTag/rsvd(4) QN(4) MSN(4) MO(4) */
#define RR_RREQ_BODY 28    /* sink STag(4) sink TO(8) size(4) src STag(4) src TO(8) */
#define RR_CRC_LEN 4
#define RR_MPA_LEN_FIELD 2

static inline bool rr_rdmap_op_tagged(unsigned op)
{
	return op == RR_OP_WRITE || op == RR_OP_READ_RESP;
}
static inline bool rr_rdmap_op_is_send(unsigned op)
{
	return op >= RR_OP_SEND && op <= RR_OP_SEND_SE_INV;
}

/* ---- RDMA Read Request body (RFC 5040 4.4) ----
 * Data Sink STag(4) | Data Sink TO(8) | RDMA Read Message Size(4) |
 * Data Source STag(4) | Data Source TO(8)  -- 28 bytes, big endian */
struct rr_rreq {
	uint32_t sink_stag;
	uint64_t sink_to;
	uint32_t size;
	uint32_t src_stag;
	uint64_t src_to;
};
void rr_rdmap_rreq_encode(const struct rr_rreq *r, uint8_t out[RR_RREQ_BODY]);
void rr_rdmap_rreq_decode(const uint8_t in[RR_RREQ_BODY], struct rr_rreq *r);

/* ---- RDMA Commit (draft-talpey-rdma-commit-00 3.2.1/3.2.2) ----
 * Request body:  Request Identifier(4) | { STag(4) | Length(4) | TO(8) } x n (n >= 1)
 * Response body: Original Request Identifier(4) | Status(4) */
#define RR_COMMIT_MAX_REGIONS 32
#define RR_COMMIT_REGION_LEN 16
#define RR_COMMIT_RESP_BODY 8
struct rr_commit_region {
	uint32_t stag;
	uint32_t len;
	uint64_t to;
};
struct rr_commit_req {
	uint32_t id;
	unsigned nregions;
	struct rr_commit_region region[RR_COMMIT_MAX_REGIONS];
};
struct rr_commit_resp {
	uint32_t id;
	uint32_t status;
};
static inline size_t rr_rdmap_commit_req_len(unsigned nregions)
{
	return 4 + (size_t)nregions * RR_COMMIT_REGION_LEN;
}
/* Returns the body length, or -EINVAL (0 or too many regions) / -ENOSPC. */
int rr_rdmap_commit_req_encode(const struct rr_commit_req *c, uint8_t *out, size_t cap);
/* Returns 0 or -EBADMSG (length not 4 + 16n with 1 <= n <= max). */
int rr_rdmap_commit_req_decode(const uint8_t *in, size_t len, struct rr_commit_req *c);
void rr_rdmap_commit_resp_encode(const struct rr_commit_resp *c, uint8_t out[8]);
void rr_rdmap_commit_resp_decode(const uint8_t in[8], struct rr_commit_resp *c);

/* ---- Terminate (RFC 5040 4.8, 7) ---- */
enum rr_term_layer { RR_TL_RDMAP = 0, RR_TL_DDP = 1, RR_TL_LLP = 2 };
/* RDMAP error types / codes (RFC 5040 7.2) */
enum { RR_RDMAP_ET_CATASTROPHIC = 0, RR_RDMAP_ET_PROTECTION = 1, RR_RDMAP_ET_OPERATION = 2 };
enum {
	RR_RDMAP_EC_INVALID_STAG = 0x00,
	RR_RDMAP_EC_BOUNDS = 0x01,
	RR_RDMAP_EC_ACCESS = 0x02,
	RR_RDMAP_EC_STAG_NOT_ASSOC = 0x03,
	RR_RDMAP_EC_TO_WRAP = 0x04,
	RR_RDMAP_EC_VERSION = 0x05,
	RR_RDMAP_EC_OPCODE = 0x06,
	RR_RDMAP_EC_CATA_STREAM = 0x07,
	RR_RDMAP_EC_CATA_GLOBAL = 0x08,
	RR_RDMAP_EC_CANNOT_INVALIDATE = 0x09,
	RR_RDMAP_EC_UNSPECIFIED = 0xff,
};
/* DDP error types / codes (RFC 5041 8) */
enum { RR_DDP_ET_CATASTROPHIC = 0, RR_DDP_ET_TAGGED = 1, RR_DDP_ET_UNTAGGED = 2 };
enum {
	RR_DDP_EC_T_INVALID_STAG = 0x00,
	RR_DDP_EC_T_BOUNDS = 0x01,
	RR_DDP_EC_T_STAG_NOT_ASSOC = 0x02,
	RR_DDP_EC_T_TO_WRAP = 0x03,
	RR_DDP_EC_T_VERSION = 0x04,
	RR_DDP_EC_U_INVALID_QN = 0x01,
	RR_DDP_EC_U_MSN_NOBUF = 0x02,
	RR_DDP_EC_U_MSN_RANGE = 0x03,
	RR_DDP_EC_U_MO = 0x04,
	RR_DDP_EC_U_TOO_LONG = 0x05,
	RR_DDP_EC_U_VERSION = 0x06,
};
/* LLP (MPA) error codes (RFC 5044 8, RFC 6581 6), error type 0 */
enum {
	RR_LLP_EC_CLOSED = 0x01,
	RR_LLP_EC_CRC = 0x02,
	RR_LLP_EC_MARKER = 0x03,
	RR_LLP_EC_BAD_REQ_REP = 0x04,
	RR_LLP_EC_LOCAL_CATA = 0x05,
	RR_LLP_EC_INSUFFICIENT_IRD = 0x06,
	RR_LLP_EC_NO_MATCHING_RTR = 0x07,
};

/* Terminate header (RFC 5040 4.8), after the untagged DDP header (QN 2):
 *   Layer(4) | EType(4) | Error Code(8) | M D R (3) | Reserved(13)
 *   [if M or D: DDP Segment Length(2) | Terminated DDP Header from the
 *    control field on (2 + 12 tagged or 2 + 16 untagged)]
 *   [if R: Terminated RDMAP Header (28, RDMA Read Request body)]
 * Example (RFC layout): 12 03 c0 00 = DDP, untagged buffer, MSN range, M+D.
 * siw (x86 bitfields) sends 21 03 03 00 for the same thing. */
#define RR_TERM_CTRL_LEN 4
#define RR_TERM_DDP_MAX 20 /* seg len(2) + ctrl(2) + 16 */
#define RR_TERM_MAX_BODY (RR_TERM_CTRL_LEN + RR_TERM_DDP_MAX + RR_RREQ_BODY)
struct rr_term {
	uint8_t layer, etype, ecode;
	bool m, d, r;
	bool siw_layout;    /* decode only: the peer used siw's layout */
	uint8_t ddp_hdr_len; /* bytes in ddp_hdr: 0, 16 or 20 */
	uint8_t ddp_hdr[RR_TERM_DDP_MAX]; /* seg len + header copy */
	uint8_t rdmap_hdr[RR_RREQ_BODY];  /* valid when r */
};
/* Encodes the Terminate body (RFC layout) into @out; returns its length. */
size_t rr_rdmap_term_encode(const struct rr_term *t, uint8_t out[RR_TERM_MAX_BODY]);
/* Decodes a Terminate body in either layout. Returns 0 or -EBADMSG. */
int rr_rdmap_term_decode(const uint8_t *in, size_t len, struct rr_term *t);
/* "DDP/untagged/MSN range" style name for logs and docs. */
const char *rr_rdmap_term_str(const struct rr_term *t);

#endif
