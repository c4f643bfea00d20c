/* SPDX-License-Identifier: BSD-2-Clause */
/* Connection private data of RPC-over-RDMA Version 1 (sans-I/O): the RFC 8797
 * block (Format Identifier 0xf6ab0e18, version 1, R = remote invalidation,
 * Send/Receive Size, RFC 8797 section 4 and 4.2), the project's extension block
 * that follows it (docs/protocol.md "Extension block"), and the negotiation of
 * the connection parameters from both peers' data: the two inline thresholds
 * (RFC 8797 section 4.2, RFC 8166 section 4.3.2), remote invalidation (RFC 8797
 * section 4.1) and the extension capabilities (an extension is used only when
 * both peers advertise it). Absent or unusable peer data yields the defaults of
 * RFC 8797 section 5.1: 1024-byte thresholds, no remote invalidation, no
 * extensions. Nothing here allocates or makes a system call.
 *
 * Sizes: RFC 8797 encodes a size as one octet e, meaning (e + 1) * 1024 bytes,
 * so 1024 .. 262144 in steps of 1024. A configured size that is not
 * representable is rounded DOWN to the next representable one (never up: a
 * peer must never be told we can send or receive more than we can); a size
 * below 1024 is a configuration error (-EINVAL), as 1024 is RFC 8166's
 * minimum. Thresholds are computed from the sizes AS ADVERTISED (after
 * rounding), so both peers compute the same pair of numbers. */
#ifndef RR_PROTO_PRIVDATA_H
#define RR_PROTO_PRIVDATA_H

#include "common/common.h"

/* ---- RFC 8797 block ---- */
#define RR_PD_FORMAT_ID 0xf6ab0e18u  /* RFC 8797 section 4 */
#define RR_PD_VERSION 1u
#define RR_PD_LEN 8u                 /* the version-1 block */
#define RR_PD_FLAG_R 0x01u           /* flags octet, bit 0: remote invalidation */
#define RR_PD_SIZE_MIN 1024u         /* encoded 0 */
#define RR_PD_SIZE_MAX 262144u       /* encoded 255 */
#define RR_PD_SIZE_DEFAULT 1024u     /* RFC 8797 section 5.1 / RFC 8166 4.3.3 */

/* ---- the project's extension block (docs/protocol.md) ---- */
#define RR_PD_EXT_FORMAT_ID 0xac3a363du
#define RR_PD_EXT_VERSION 1u
#define RR_PD_EXT_LEN 12u            /* version-1 block as we send it */
#define RR_PD_EXT_CAP_RELIABLE_REPLY 0x00000001u /* responder-provided Read chunks + RDMA_DONE */
#define RR_PD_EXT_CAP_RDMA_COMMIT 0x00000002u    /* RDMAP Commit (draft-talpey-rdma-commit) */
#define RR_PD_EXT_CAPS_KNOWN (RR_PD_EXT_CAP_RELIABLE_REPLY | RR_PD_EXT_CAP_RDMA_COMMIT)

/* Largest private data rr_pd_encode() writes: well under the 56 bytes RDMA CM
 * leaves in an InfiniBand CM REQ and MPA's 252 upper-layer bytes. */
#define RR_PD_MAX_LEN (RR_PD_LEN + RR_PD_EXT_LEN)

/* What our side advertises. */
struct rr_pd_local {
	uint32_t send_size;  /* bytes we may transmit in one Send (>= 1024) */
	uint32_t recv_size;  /* bytes each of our Receives accepts (>= 1024) */
	bool remote_inv;     /* R: peer may invalidate our STags with Send With Invalidate */
	uint32_t ext_caps;   /* RR_PD_EXT_CAP_*; 0 = send no extension block at all */
};

/* Why a parse found no usable RFC 8797 block; for diagnostics and tests. When
 * several Format Identifier candidates are rejected, the first one's reason is
 * reported. */
enum rr_pd_status {
	RR_PD_PRESENT = 0,
	RR_PD_ABSENT_EMPTY,        /* no private data at all */
	RR_PD_ABSENT_NO_MAGIC,     /* no 0xf6ab0e18 anywhere */
	RR_PD_ABSENT_TRUNCATED,    /* identifier found, fewer than 8 bytes from it */
	RR_PD_ABSENT_BAD_VERSION,  /* identifier found, version != 1 */
};

enum rr_pd_ext_status {
	RR_PD_EXT_PRESENT = 0,
	RR_PD_EXT_NO_BASE,     /* no RFC 8797 block, so no extension is looked for */
	RR_PD_EXT_NONE,        /* nothing after the RFC 8797 block */
	RR_PD_EXT_FOREIGN,     /* bytes follow, but not our identifier */
	RR_PD_EXT_TRUNCATED,   /* our identifier, block shorter than its header/Length */
	RR_PD_EXT_BAD_VERSION, /* our identifier, version != 1: ignored */
	RR_PD_EXT_BAD_LENGTH,  /* our identifier, Length < 12: ignored */
};

/* The result of parsing a peer's private data. Always fully set, also when
 * nothing usable was found (then the RFC 8797 section 5.1 defaults). */
struct rr_pd_info {
	enum rr_pd_status status;
	enum rr_pd_ext_status ext_status;
	size_t offset;         /* of the RFC 8797 block in the input (when present) */
	uint8_t flags;         /* raw flags octet (reserved bits as received) */
	bool remote_inv;       /* R */
	uint32_t send_size;    /* decoded bytes: peer's maximum Send */
	uint32_t recv_size;    /* decoded bytes: peer's Receive size */
	uint8_t ext_version;   /* when our identifier was found */
	uint8_t ext_len;       /* Length field, when our identifier was found */
	uint32_t ext_caps_raw; /* capabilities as received (present only) */
	uint32_t ext_caps;     /* known capabilities only; 0 unless PRESENT */
};

/* Which end of the connection we are (RFC 8166: the requester sends Calls and
 * is the active side, the responder replies and accepts). */
enum rr_pd_role {
	RR_PD_REQUESTER,
	RR_PD_RESPONDER,
};

/* The negotiated connection parameters. */
struct rr_pd_conn {
	bool peer_present;       /* peer sent a valid RFC 8797 block */
	uint32_t send_threshold; /* max bytes WE put in one Send: min(own send, peer recv) */
	uint32_t recv_threshold; /* max bytes the PEER puts in one Send: min(peer send, own recv) */
	uint32_t call_threshold; /* requester -> responder direction */
	uint32_t reply_threshold;/* responder -> requester direction */
	bool send_inv;           /* WE may use Send With Invalidate (both set R) */
	bool peer_may_inv;       /* we set R: be ready for Send With Invalidate naming our STags */
	bool peer_r;             /* peer's R bit as advertised */
	uint32_t ext_caps;       /* both advertise: local & peer, known bits only */
};

/* Size codec (RFC 8797 section 4.2). rr_pd_size_round() rounds @bytes down to a
 * representable size, clamping above 262144; 0 for sizes below 1024. */
uint32_t rr_pd_size_round(uint32_t bytes);
/* Encoded octet for @bytes (rounded down); -EINVAL below 1024. */
int rr_pd_size_encode(uint32_t bytes, uint8_t *code);
static inline uint32_t rr_pd_size_decode(uint8_t code)
{
	return ((uint32_t)code + 1u) * 1024u;
}

/* Writes our private data into @buf (capacity @cap): the RFC 8797 block, then
 * the extension block when @l->ext_caps != 0. Returns the length written (8 or
 * 20), -EINVAL for a size below 1024 or unknown capability bits, -EMSGSIZE when
 * @cap is too small (nothing written). Borrows @l and @buf for the duration of
 * the call. */
int rr_pd_encode(const struct rr_pd_local *l, void *buf, size_t cap);

/* Parses a peer's private data (@buf may be NULL when @len is 0): searches the
 * RFC 8797 Format Identifier at every offset (any alignment), accepts the first
 * candidate with 8 bytes in range and version 1, then looks for the extension
 * block immediately after it. Never reads outside @buf[0..len). Returns 0 and
 * fills @out (defaults when nothing usable was found: check out->status), or
 * -EINVAL for a NULL @out or a NULL @buf with @len != 0. Borrows @buf for the
 * duration of the call; @out holds no pointer into it. */
int rr_pd_parse(const void *buf, size_t len, struct rr_pd_info *out);

/* Fills @out with what an absent block means (RFC 8797 section 5.1). */
void rr_pd_info_defaults(struct rr_pd_info *out);

/* Negotiates from our settings and the peer's parsed data. Returns 0, or
 * -EINVAL when @l is not encodable (see rr_pd_encode). @peer may be NULL:
 * the peer sent no private data. */
int rr_pd_negotiate_info(const struct rr_pd_local *l, enum rr_pd_role role,
			 const struct rr_pd_info *peer, struct rr_pd_conn *out);

/* The same from the peer's raw private data (may be absent, truncated or
 * garbage: it never fails because of the peer's bytes). Borrows @peer_buf for
 * the duration of the call. */
int rr_pd_negotiate(const struct rr_pd_local *l, enum rr_pd_role role,
		    const void *peer_buf, size_t peer_len, struct rr_pd_conn *out);

const char *rr_pd_status_name(enum rr_pd_status s);
const char *rr_pd_ext_status_name(enum rr_pd_ext_status s);

#endif
