/* SPDX-License-Identifier: BSD-2-Clause */
/* ONC RPC message headers (RFC 5531): the Call header (section 9, "The RPC
 * Message Protocol": xid, CALL, rpcvers 2, prog, vers, proc, cred, verf), the
 * Reply header (MSG_ACCEPTED with accept_stat SUCCESS / PROG_UNAVAIL /
 * PROG_MISMATCH low-high / PROC_UNAVAIL / GARBAGE_ARGS / SYSTEM_ERR, and
 * MSG_DENIED with RPC_MISMATCH low-high / AUTH_ERROR auth_stat),
 * opaque_auth (section 8.2, body at most 400 bytes), the AUTH_NONE and AUTH_SYS
 * flavors (section 10.1 and appendix A), and a cheap peek at the XID and
 * message type (the RPC-over-RDMA transport checks rdma_xid == XID, RFC 8166
 * "Fixed Header Fields", and tells Calls from Replies, RFC 8167).
 *
 * Decoders go through the checked XDR cursor, never allocate, and return
 * pointers into the input (credential bodies, machine names): those are valid
 * as long as the input buffer is. Encoders write through a checked encoder and
 * fail with -EMSGSIZE when it is too small; invalid values are -EINVAL.
 *
 * Return values of decoders: 0 on success; -EBADMSG when the input is
 * truncated, holds an undefined enum value (msg_type, reply_stat, accept_stat,
 * reject_stat) or a variable-length item above its XDR maximum;
 * -EPROTONOSUPPORT from rr_rpcmsg_decode_call when rpcvers != 2 (then only
 * the xid and rpcvers fields are valid: the server answers MSG_DENIED
 * RPC_MISMATCH 2..2). On failure the cursor is left where it was. */
#ifndef RR_RPC_RPCMSG_H
#define RR_RPC_RPCMSG_H

#include "common/common.h"
#include "xdr/xdr.h"

#define RR_RPC_VERSION 2u

/* msg_type */
#define RR_RPC_CALL 0u
#define RR_RPC_REPLY 1u

/* reply_stat */
#define RR_RPC_MSG_ACCEPTED 0u
#define RR_RPC_MSG_DENIED 1u

/* accept_stat */
#define RR_RPC_SUCCESS 0u
#define RR_RPC_PROG_UNAVAIL 1u
#define RR_RPC_PROG_MISMATCH 2u
#define RR_RPC_PROC_UNAVAIL 3u
#define RR_RPC_GARBAGE_ARGS 4u
#define RR_RPC_SYSTEM_ERR 5u

/* reject_stat */
#define RR_RPC_RPC_MISMATCH 0u
#define RR_RPC_AUTH_ERROR 1u

/* auth_stat (section 9 plus RFC 2203's RPCSEC_GSS values) */
#define RR_RPC_AUTH_OK 0u
#define RR_RPC_AUTH_BADCRED 1u
#define RR_RPC_AUTH_REJECTEDCRED 2u
#define RR_RPC_AUTH_BADVERF 3u
#define RR_RPC_AUTH_REJECTEDVERF 4u
#define RR_RPC_AUTH_TOOWEAK 5u
#define RR_RPC_AUTH_INVALIDRESP 6u
#define RR_RPC_AUTH_FAILED 7u

/* auth_flavor (section 8.2 and the IANA registry) */
#define RR_RPC_AUTH_NONE 0u
#define RR_RPC_AUTH_SYS 1u
#define RR_RPC_AUTH_SHORT 2u
#define RR_RPC_AUTH_DH 3u
#define RR_RPC_RPCSEC_GSS 6u

#define RR_RPC_AUTH_MAXBODY 400u       /* opaque body<400> */
#define RR_RPC_AUTHSYS_MAXNAME 255u    /* string machinename<255> */
#define RR_RPC_AUTHSYS_MAXGIDS 16u     /* unsigned int gids<16> */

/* Largest Call header: 6 words + two opaque_auth of 2 words + 400 bytes. */
#define RR_RPC_CALL_HDR_MAX (6 * 4 + 2 * (8 + RR_RPC_AUTH_MAXBODY))
/* Largest Reply header before results (accepted: xid, type, stat, verf,
 * accept_stat, low, high). */
#define RR_RPC_REPLY_HDR_MAX (3 * 4 + 8 + RR_RPC_AUTH_MAXBODY + 3 * 4)

/* opaque_auth: flavor and body; @body points into the decoded input (or, for
 * encoding, at the caller's bytes). */
struct rr_rpc_auth {
	uint32_t flavor;
	uint32_t len;
	const uint8_t *body;
};

struct rr_rpc_call {
	uint32_t xid;
	uint32_t rpcvers;
	uint32_t prog;
	uint32_t vers;
	uint32_t proc;
	struct rr_rpc_auth cred;
	struct rr_rpc_auth verf;
};

/* A Reply header. Fields used depend on @stat:
 *  MSG_ACCEPTED: @verf, @accept_stat; @low/@high for PROG_MISMATCH; results
 *                follow the header for SUCCESS.
 *  MSG_DENIED:   @reject_stat; @low/@high for RPC_MISMATCH; @auth_stat for
 *                AUTH_ERROR. */
struct rr_rpc_reply {
	uint32_t xid;
	uint32_t stat;
	struct rr_rpc_auth verf;
	uint32_t accept_stat;
	uint32_t reject_stat;
	uint32_t auth_stat;
	uint32_t low;
	uint32_t high;
};

/* AUTH_SYS credential body (RFC 5531 appendix A, "authsys_parms").
 * @machinename points into the decoded body or at the caller's bytes. */
struct rr_rpc_authsys {
	uint32_t stamp;
	uint32_t machinename_len;
	const uint8_t *machinename;
	uint32_t uid;
	uint32_t gid;
	uint32_t ngids;
	uint32_t gids[RR_RPC_AUTHSYS_MAXGIDS];
};

/* The first two words of any RPC message: xid and msg_type. Returns 0, or
 * -EBADMSG when @len < 8 or msg_type is neither CALL nor REPLY. Reads
 * exactly 8 bytes of @buf; no cursor needed. */
int rr_rpcmsg_peek(const void *buf, size_t len, uint32_t *xid, uint32_t *mtype);

/* opaque_auth: flavor - length - body - pad. */
int rr_rpcmsg_encode_auth(struct rr_xdr_enc *e, const struct rr_rpc_auth *a);
int rr_rpcmsg_decode_auth(struct rr_xdr_dec *d, struct rr_rpc_auth *a);

/* Call header; on success the decoder is positioned at the procedure
 * arguments. @c->rpcvers is ignored when encoding (always 2). */
int rr_rpcmsg_encode_call(struct rr_xdr_enc *e, const struct rr_rpc_call *c);
/* The Call header with AUTH_NONE credential and verifier into @p: the
 * bytes rr_rpcmsg_encode_call writes for them (test
 * rpcmsg_call_none_as_general), without its checks (there is nothing of
 * the caller's to check). */
#define RR_RPC_CALL_NONE_SIZE 40u
void rr_rpcmsg_encode_call_none(uint8_t p[RR_RPC_CALL_NONE_SIZE], uint32_t xid, uint32_t prog,
				uint32_t vers, uint32_t proc);
/* rr_rpcmsg_decode_call() without its one-pass decoding of the short form
 * (RPC version 2, empty credential and verifier): every Call through the
 * general decoder. The same results on every input; for the tests and
 * fuzz_rpcmsg that prove it. */
int rr_rpcmsg_decode_call_general(struct rr_xdr_dec *d, struct rr_rpc_call *c);
/* The short form of a Call header, decoded in one pass: RPC version 2,
 * credential and verifier both empty (of any flavor: AUTH_NONE's form):
 *   xid - 0 (CALL) - 2 - prog - vers - proc - flavor - 0 - flavor - 0
 * Returns true when @d holds exactly that: @c and @d are then what
 * rr_rpcmsg_decode_call_general leaves (the fields it writes, the same).
 * False: both untouched, the general decoder decides. Proven equal by test
 * rpcmsg_call_short_as_general and by fuzz_rpcmsg. */
static inline bool rr_rpcmsg_decode_call_short(struct rr_xdr_dec *d, struct rr_rpc_call *c)
{
	struct rr_xdr_dec k = *d;
	const uint8_t *p;

	if (rr_xdr_get_fixed_ref(&k, RR_RPC_CALL_NONE_SIZE, &p))
		return false;
	if (rr_get_be32(p + 4) != RR_RPC_CALL || rr_get_be32(p + 8) != RR_RPC_VERSION ||
	    (rr_get_be32(p + 28) | rr_get_be32(p + 36)) != 0)
		return false;
	c->xid = rr_get_be32(p);
	c->rpcvers = RR_RPC_VERSION;
	c->prog = rr_get_be32(p + 12);
	c->vers = rr_get_be32(p + 16);
	c->proc = rr_get_be32(p + 20);
	c->cred.flavor = rr_get_be32(p + 24);
	c->cred.len = 0;
	c->cred.body = NULL;
	c->verf.flavor = rr_get_be32(p + 32);
	c->verf.len = 0;
	c->verf.body = NULL;
	*d = k;
	return true;
}

static inline int rr_rpcmsg_decode_call(struct rr_xdr_dec *d, struct rr_rpc_call *c)
{
	/* RR_LIKELY: the general decoder stays a tail call (inlined here, its
	 * register saves cost the short form ~9 instructions, part AP); in
	 * this header: inlined in the server's dispatch, whose frame it no
	 * longer fits since part CM (a call, ~13 instructions) */
	if (RR_LIKELY(rr_rpcmsg_decode_call_short(d, c)))
		return 0;
	return rr_rpcmsg_decode_call_general(d, c);
}


/* Reply header; after an accepted SUCCESS the decoder is positioned at the
 * results (other replies carry no body; trailing bytes are left unread). */
int rr_rpcmsg_encode_reply(struct rr_xdr_enc *e, const struct rr_rpc_reply *r);
/* The accepted Reply header with an AUTH_NONE verifier and an accept_stat
 * @stat that no more words follow (every one but PROG_MISMATCH; the caller
 * passes one of them) into @p: the bytes rr_rpcmsg_encode_reply writes for
 * it (test rpcmsg_accepted_none_as_general, fuzz_rpcmsg), without its
 * checks (a server's own Reply: nothing of a peer's to check). */
#define RR_RPC_ACCEPTED_NONE_SIZE 24u
void rr_rpcmsg_encode_accepted_none(uint8_t p[RR_RPC_ACCEPTED_NONE_SIZE], uint32_t xid,
				    uint32_t stat);
int rr_rpcmsg_decode_reply(struct rr_xdr_dec *d, struct rr_rpc_reply *r);
/* Whether the @len bytes at @p begin with the short form of an accepted
 * SUCCESS Reply to @xid (xid - 1 (REPLY) - 0 (MSG_ACCEPTED) - flavor - 0 -
 * 0 (SUCCESS)): RR_RPC_ACCEPTED_NONE_SIZE, the results' offset, when they
 * do; then rr_rpcmsg_decode_reply from offset 0 returns 0 with that xid, an
 * accepted SUCCESS status and every other field zero but the verifier's
 * flavor, and leaves its decoder at that offset. 0 when they do not (the
 * caller decodes them with rr_rpcmsg_decode_reply). One pass over the
 * words, no decoder and no struct: the RPC client's check of every
 * successful Reply (clnt.c on_complete). Proven against
 * rr_rpcmsg_decode_reply by test rpcmsg_reply_success_short_as_decode. */
_Static_assert(RR_RPC_MSG_ACCEPTED == 0 && RR_RPC_SUCCESS == 0,
	       "rr_rpcmsg_reply_success_short tests the zero words together");
static inline uint32_t rr_rpcmsg_reply_success_short(const uint8_t *p, size_t len, uint32_t xid)
{
	if (len < RR_RPC_ACCEPTED_NONE_SIZE || rr_get_be32(p) != xid ||
	    rr_get_be32(p + 4) != RR_RPC_REPLY ||
	    (rr_get_be32(p + 8) | rr_get_be32(p + 16) | rr_get_be32(p + 20)) != 0)
		return 0;
	return RR_RPC_ACCEPTED_NONE_SIZE;
}
/* rr_rpcmsg_decode_reply() without its one-pass decoding of the short form
 * (accepted, empty verifier, no more words): every Reply through the general
 * decoder. The same results on every input; for the tests and fuzz_rpcmsg
 * that prove it. */
int rr_rpcmsg_decode_reply_general(struct rr_xdr_dec *d, struct rr_rpc_reply *r);

/* AUTH_SYS body: stamp - machinename<255> - uid - gid - gids<16>.
 * rr_rpcmsg_decode_authsys parses a whole credential body (@body, @len as in
 * struct rr_rpc_auth); bytes left over after gids are -EBADMSG. The result
 * points into @body. */
int rr_rpcmsg_encode_authsys(struct rr_xdr_enc *e, const struct rr_rpc_authsys *s);
int rr_rpcmsg_decode_authsys(const uint8_t *body, uint32_t len,
			     struct rr_rpc_authsys *s);

/* Encodes an AUTH_SYS body into @buf (capacity @cap, 400 is always enough)
 * and points @a at it. Returns 0 or a negative errno. */
int rr_rpcmsg_make_authsys(const struct rr_rpc_authsys *s, uint8_t *buf,
			   size_t cap, struct rr_rpc_auth *a);

#endif
