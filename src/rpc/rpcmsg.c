/* SPDX-License-Identifier: BSD-2-Clause */
/* ONC RPC message header codecs (RFC 5531 sections 8.2, 9, 10.1 and
 * appendix A): Call and Reply headers, opaque_auth, AUTH_SYS. See rpcmsg.h for
 * the error conventions. Decoders are all-or-nothing: on any failure the
 * cursor is restored to where it was. */
#include "rpc/rpcmsg.h"

int rr_rpcmsg_peek(const void *buf, size_t len, uint32_t *xid, uint32_t *mtype)
{
	const uint8_t *p = buf;
	uint32_t t;

	if (len < 8)
		return -EBADMSG;
	t = rr_get_be32(p + 4);
	if (t != RR_RPC_CALL && t != RR_RPC_REPLY)
		return -EBADMSG;
	*xid = rr_get_be32(p);
	*mtype = t;
	return 0;
}

/* opaque_auth (RFC 5531 section 8.2):
 *   flavor(4) - length(4) - body[length] - pad to 4;  length <= 400 */
int rr_rpcmsg_encode_auth(struct rr_xdr_enc *e, const struct rr_rpc_auth *a)
{
	size_t start = e->pos;
	int rc;

	if (a->len > RR_RPC_AUTH_MAXBODY || (a->len && !a->body))
		return -EINVAL;
	rc = rr_xdr_put_u32(e, a->flavor);
	if (!rc)
		rc = rr_xdr_put_opaque(e, a->body, a->len);
	if (rc)
		e->pos = start;
	return rc;
}

int rr_rpcmsg_decode_auth(struct rr_xdr_dec *d, struct rr_rpc_auth *a)
{
	size_t start = d->pos;
	int rc;

	rc = rr_xdr_get_u32(d, &a->flavor);
	if (!rc)
		rc = rr_xdr_get_opaque_ref(d, RR_RPC_AUTH_MAXBODY, &a->body, &a->len);
	if (rc) {
		d->pos = start;
		return -EBADMSG;
	}
	if (a->len == 0)
		a->body = NULL;
	return 0;
}

/* Call (RFC 5531 section 9, call_body):
 *   xid - 0 (CALL) - rpcvers (2) - prog - vers - proc - cred - verf - args */
/* opaque_auth @a at @p (room checked by the caller); returns the end. */
static uint8_t *put_auth(uint8_t *p, const struct rr_rpc_auth *a)
{
	size_t pn = RR_ALIGN4((size_t)a->len);

	rr_put_be32(p, a->flavor);
	rr_put_be32(p + 4, a->len);
	if (a->len)
		memcpy(p + 8, a->body, a->len);
	rr_xdr_zero_pad(p + 8 + a->len, pn - a->len);
	return p + 8 + pn;
}

int rr_rpcmsg_encode_call(struct rr_xdr_enc *e, const struct rr_rpc_call *c)
{
	size_t need;
	uint8_t *p;

	/* validate, then one room check for the whole header (the XDR
	 * encoder's per-item checks cost more than the 40 bytes of an
	 * AUTH_NONE header) */
	if (c->cred.len > RR_RPC_AUTH_MAXBODY || (c->cred.len && !c->cred.body) ||
	    c->verf.len > RR_RPC_AUTH_MAXBODY || (c->verf.len && !c->verf.body))
		return -EINVAL;
	need = 24 + 8 + (size_t)RR_ALIGN4(c->cred.len) + 8 + (size_t)RR_ALIGN4(c->verf.len);
	if (e->pos > e->cap || e->cap - e->pos < need)
		return -EMSGSIZE;
	p = e->buf + e->pos;
	rr_put_be32(p, c->xid);
	rr_put_be32(p + 4, RR_RPC_CALL);
	rr_put_be32(p + 8, RR_RPC_VERSION);
	rr_put_be32(p + 12, c->prog);
	rr_put_be32(p + 16, c->vers);
	rr_put_be32(p + 20, c->proc);
	p = put_auth(p + 24, &c->cred);
	(void)put_auth(p, &c->verf);
	e->pos += need;
	return 0;
}

/* The AUTH_NONE Call header (cred and verf both AUTH_NONE, empty):
 *   xid - 0 (CALL) - 2 - prog - vers - proc - 0 - 0 - 0 - 0 */
void rr_rpcmsg_encode_call_none(uint8_t p[RR_RPC_CALL_NONE_SIZE], uint32_t xid, uint32_t prog,
				uint32_t vers, uint32_t proc)
{
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, RR_RPC_CALL);
	rr_put_be32(p + 8, RR_RPC_VERSION);
	rr_put_be32(p + 12, prog);
	rr_put_be32(p + 16, vers);
	rr_put_be32(p + 20, proc);
	memset(p + 24, 0, 16);
}

int rr_rpcmsg_decode_call_general(struct rr_xdr_dec *d, struct rr_rpc_call *c)
{
	size_t start = d->pos;
	uint32_t mtype;
	int rc;

	rc = rr_xdr_get_u32(d, &c->xid);
	if (!rc)
		rc = rr_xdr_get_u32(d, &mtype);
	if (!rc && mtype != RR_RPC_CALL)
		rc = -EBADMSG;
	if (!rc)
		rc = rr_xdr_get_u32(d, &c->rpcvers);
	if (!rc && c->rpcvers != RR_RPC_VERSION) {
		/* The rest may follow another version's layout: stop here so
		 * the server can answer RPC_MISMATCH for this xid. */
		d->pos = start;
		return -EPROTONOSUPPORT;
	}
	if (!rc)
		rc = rr_xdr_get_u32(d, &c->prog);
	if (!rc)
		rc = rr_xdr_get_u32(d, &c->vers);
	if (!rc)
		rc = rr_xdr_get_u32(d, &c->proc);
	if (!rc)
		rc = rr_rpcmsg_decode_auth(d, &c->cred);
	if (!rc)
		rc = rr_rpcmsg_decode_auth(d, &c->verf);
	if (rc) {
		d->pos = start;
		return -EBADMSG;
	}
	return 0;
}

/* Reply (RFC 5531 section 9, reply_body):
 *   xid - 1 (REPLY) - reply_stat, then
 *   MSG_ACCEPTED(0): verf - accept_stat
 *       - SUCCESS(0): results
 *       - PROG_MISMATCH(2): low - high
 *       - PROG_UNAVAIL(1), PROC_UNAVAIL(3), GARBAGE_ARGS(4), SYSTEM_ERR(5): void
 *   MSG_DENIED(1): reject_stat
 *       - RPC_MISMATCH(0): low - high
 *       - AUTH_ERROR(1): auth_stat */
int rr_rpcmsg_encode_reply(struct rr_xdr_enc *e, const struct rr_rpc_reply *r)
{
	size_t start = e->pos;
	int rc;

	rc = rr_xdr_put_u32(e, r->xid);
	if (!rc)
		rc = rr_xdr_put_u32(e, RR_RPC_REPLY);
	if (!rc)
		rc = rr_xdr_put_u32(e, r->stat);
	if (rc)
		goto fail;
	switch (r->stat) {
	case RR_RPC_MSG_ACCEPTED:
		if (r->accept_stat > RR_RPC_SYSTEM_ERR) {
			rc = -EINVAL;
			break;
		}
		rc = rr_rpcmsg_encode_auth(e, &r->verf);
		if (!rc)
			rc = rr_xdr_put_u32(e, r->accept_stat);
		if (!rc && r->accept_stat == RR_RPC_PROG_MISMATCH) {
			rc = rr_xdr_put_u32(e, r->low);
			if (!rc)
				rc = rr_xdr_put_u32(e, r->high);
		}
		break;
	case RR_RPC_MSG_DENIED:
		if (r->reject_stat == RR_RPC_RPC_MISMATCH) {
			rc = rr_xdr_put_u32(e, r->reject_stat);
			if (!rc)
				rc = rr_xdr_put_u32(e, r->low);
			if (!rc)
				rc = rr_xdr_put_u32(e, r->high);
		} else if (r->reject_stat == RR_RPC_AUTH_ERROR) {
			rc = rr_xdr_put_u32(e, r->reject_stat);
			if (!rc)
				rc = rr_xdr_put_u32(e, r->auth_stat);
		} else {
			rc = -EINVAL;
		}
		break;
	default:
		rc = -EINVAL;
	}
fail:
	if (rc)
		e->pos = start;
	return rc;
}

/* The accepted Reply with an AUTH_NONE verifier and no words after the
 * accept_stat (every accept_stat but PROG_MISMATCH):
 *   xid - 1 (REPLY) - 0 (MSG_ACCEPTED) - 0 (AUTH_NONE) - 0 - accept_stat */
void rr_rpcmsg_encode_accepted_none(uint8_t p[RR_RPC_ACCEPTED_NONE_SIZE], uint32_t xid,
				    uint32_t stat)
{
	rr_put_be32(p, xid);
	rr_put_be32(p + 4, RR_RPC_REPLY);
	memset(p + 8, 0, 12);
	rr_put_be32(p + 20, stat);
}

/* The short form of a Reply, decoded in one pass: accepted, with an empty
 * verifier (of any flavor), and an accept_stat that no more words follow
 * (every one but PROG_MISMATCH):
 *   xid - 1 (REPLY) - 0 (MSG_ACCEPTED) - flavor - 0 - accept_stat
 * Returns true when @d holds exactly that: @r and @d are then what
 * rr_rpcmsg_decode_reply_general leaves. False: both untouched, the general
 * decoder decides (every other Reply, and every one it rejects). Proven
 * equal to it by test rpcmsg_reply_short_as_general and by fuzz_rpcmsg. */
static bool decode_reply_short(struct rr_xdr_dec *d, struct rr_rpc_reply *r)
{
	struct rr_xdr_dec c = *d;
	const uint8_t *p;
	uint32_t as;

	if (rr_xdr_get_fixed_ref(&c, 24, &p))
		return false;
	as = rr_get_be32(p + 20);
	if (rr_get_be32(p + 4) != RR_RPC_REPLY || rr_get_be32(p + 8) != RR_RPC_MSG_ACCEPTED ||
	    rr_get_be32(p + 16) != 0 || as > RR_RPC_SYSTEM_ERR || as == RR_RPC_PROG_MISMATCH)
		return false;
	memset(r, 0, sizeof(*r));
	r->xid = rr_get_be32(p);
	r->stat = RR_RPC_MSG_ACCEPTED;
	r->verf.flavor = rr_get_be32(p + 12);
	r->accept_stat = as;
	*d = c;
	return true;
}

int rr_rpcmsg_decode_reply(struct rr_xdr_dec *d, struct rr_rpc_reply *r)
{
	/* RR_LIKELY: as rr_rpcmsg_decode_call's */
	if (RR_LIKELY(decode_reply_short(d, r)))
		return 0;
	return rr_rpcmsg_decode_reply_general(d, r);
}

int rr_rpcmsg_decode_reply_general(struct rr_xdr_dec *d, struct rr_rpc_reply *r)
{
	size_t start = d->pos;
	uint32_t mtype;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = rr_xdr_get_u32(d, &r->xid);
	if (!rc)
		rc = rr_xdr_get_u32(d, &mtype);
	if (!rc && mtype != RR_RPC_REPLY)
		rc = -EBADMSG;
	if (!rc)
		rc = rr_xdr_get_u32(d, &r->stat);
	if (rc)
		goto fail;
	switch (r->stat) {
	case RR_RPC_MSG_ACCEPTED:
		rc = rr_rpcmsg_decode_auth(d, &r->verf);
		if (!rc)
			rc = rr_xdr_get_u32(d, &r->accept_stat);
		if (!rc && r->accept_stat > RR_RPC_SYSTEM_ERR)
			rc = -EBADMSG;
		if (!rc && r->accept_stat == RR_RPC_PROG_MISMATCH) {
			rc = rr_xdr_get_u32(d, &r->low);
			if (!rc)
				rc = rr_xdr_get_u32(d, &r->high);
		}
		break;
	case RR_RPC_MSG_DENIED:
		rc = rr_xdr_get_u32(d, &r->reject_stat);
		if (rc)
			break;
		if (r->reject_stat == RR_RPC_RPC_MISMATCH) {
			rc = rr_xdr_get_u32(d, &r->low);
			if (!rc)
				rc = rr_xdr_get_u32(d, &r->high);
		} else if (r->reject_stat == RR_RPC_AUTH_ERROR) {
			/* Any auth_stat value is carried through: RPCSEC_GSS
			 * and later flavors extend the enum (RFC 2203). */
			rc = rr_xdr_get_u32(d, &r->auth_stat);
		} else {
			rc = -EBADMSG;
		}
		break;
	default:
		rc = -EBADMSG;
	}
fail:
	if (rc) {
		d->pos = start;
		return -EBADMSG;
	}
	return 0;
}

/* authsys_parms (RFC 5531 appendix A):
 *   stamp - machinename<255> (len, bytes, pad) - uid - gid - gids<16> (n, n*4) */
int rr_rpcmsg_encode_authsys(struct rr_xdr_enc *e, const struct rr_rpc_authsys *s)
{
	size_t start = e->pos;
	int rc;

	if (s->machinename_len > RR_RPC_AUTHSYS_MAXNAME ||
	    (s->machinename_len && !s->machinename) ||
	    s->ngids > RR_RPC_AUTHSYS_MAXGIDS)
		return -EINVAL;
	rc = rr_xdr_put_u32(e, s->stamp);
	if (!rc)
		rc = rr_xdr_put_opaque(e, s->machinename, s->machinename_len);
	if (!rc)
		rc = rr_xdr_put_u32(e, s->uid);
	if (!rc)
		rc = rr_xdr_put_u32(e, s->gid);
	if (!rc)
		rc = rr_xdr_put_u32(e, s->ngids);
	for (uint32_t i = 0; !rc && i < s->ngids; i++)
		rc = rr_xdr_put_u32(e, s->gids[i]);
	if (rc)
		e->pos = start;
	return rc;
}

int rr_rpcmsg_decode_authsys(const uint8_t *body, uint32_t len,
			     struct rr_rpc_authsys *s)
{
	struct rr_xdr_dec d;
	int rc;

	if (len && !body)
		return -EBADMSG;
	rr_xdr_dec_init(&d, body, len);
	rc = rr_xdr_get_u32(&d, &s->stamp);
	if (!rc)
		rc = rr_xdr_get_opaque_ref(&d, RR_RPC_AUTHSYS_MAXNAME,
					   &s->machinename, &s->machinename_len);
	if (!rc)
		rc = rr_xdr_get_u32(&d, &s->uid);
	if (!rc)
		rc = rr_xdr_get_u32(&d, &s->gid);
	if (!rc)
		rc = rr_xdr_get_u32(&d, &s->ngids);
	if (!rc && s->ngids > RR_RPC_AUTHSYS_MAXGIDS)
		rc = -EBADMSG;
	for (uint32_t i = 0; !rc && i < s->ngids; i++)
		rc = rr_xdr_get_u32(&d, &s->gids[i]);
	if (!rc && rr_xdr_dec_remaining(&d) != 0)
		rc = -EBADMSG;
	return rc ? -EBADMSG : 0;
}

int rr_rpcmsg_make_authsys(const struct rr_rpc_authsys *s, uint8_t *buf,
			   size_t cap, struct rr_rpc_auth *a)
{
	struct rr_xdr_enc e;
	int rc;

	rr_xdr_enc_init(&e, buf, RR_MIN(cap, (size_t)RR_RPC_AUTH_MAXBODY));
	rc = rr_rpcmsg_encode_authsys(&e, s);
	if (rc)
		return rc;
	a->flavor = RR_RPC_AUTH_SYS;
	a->len = (uint32_t)rr_xdr_enc_len(&e);
	a->body = buf;
	return 0;
}
