/* SPDX-License-Identifier: BSD-2-Clause */
/* Push mode (include/rpcrdma/push.h, draft-talpey-rdma-commit-00 section 2)
 * of the RPC API: argument checks, the region handle's XDR, and routing to
 * the transport's ctl op (transport/xprt_ctl.h). Transports without it
 * (tcp://) answer -EOPNOTSUPP. */
#include "transport/xprt.h"
#include "rpc/ctl.h"

#include <stdio.h>

#define PUSH_REGION_LEVELS (RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE)

/* XDR: uint32 stag, uint64 offset, uint64 length, uint32 flags. */
RPCRDMA_API int rpcrdma_xdr_put_push_region(struct rpcrdma_xdr_enc *e,
					    const struct rpcrdma_push_region *r)
{
	if (!e || !r || (r->flags & ~PUSH_REGION_LEVELS))
		return -EINVAL;
	rpcrdma_xdr_put_u32(e, r->stag);
	rpcrdma_xdr_put_u64(e, r->offset);
	rpcrdma_xdr_put_u64(e, r->length);
	return rpcrdma_xdr_put_u32(e, r->flags);
}

RPCRDMA_API int rpcrdma_xdr_get_push_region(struct rpcrdma_xdr_dec *d,
					    struct rpcrdma_push_region *r)
{
	int rc;

	if (!d || !r)
		return -EINVAL;
	rc = rpcrdma_xdr_get_u32(d, &r->stag);
	if (!rc)
		rc = rpcrdma_xdr_get_u64(d, &r->offset);
	if (!rc)
		rc = rpcrdma_xdr_get_u64(d, &r->length);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(d, &r->flags);
	if (!rc && (r->flags & ~PUSH_REGION_LEVELS))
		rc = -EBADMSG; /* a level this library does not know */
	return rc;
}

RPCRDMA_API int rpcrdma_req_push_capable(struct rpcrdma_req *req)
{
	return rr_rpc_req_ctl(req, RR_CTL_COMMIT_OK, NULL);
}

RPCRDMA_API int rpcrdma_req_push_expose(struct rpcrdma_req *req,
					const struct rpcrdma_mr_attr *attr,
					void (*released)(void *arg), void *arg,
					struct rpcrdma_push_region *out, uint64_t *id)
{
	struct rr_ctl_expose x = {attr, released, arg, 0, 0, 0, 0};
	int rc;

	if (!req || !attr || !out || !id || !attr->addr || !attr->length)
		return -EINVAL;
	if (!(attr->flags & (RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE)))
		return -EINVAL;
	rc = rr_rpc_req_ctl(req, RR_CTL_EXPOSE, &x);
	if (rc)
		return rc;
	out->stag = x.stag;
	out->offset = x.to;   /* not an address (rpcrdma_mr_remote_offset) */
	out->length = attr->length;
	out->flags = x.levels;
	*id = x.id;
	return 0;
}

RPCRDMA_API int rpcrdma_server_push_revoke(struct rpcrdma_server *s, uint64_t id)
{
	return rr_rpc_server_ctl(s, RR_CTL_REVOKE, &id);
}

RPCRDMA_API int rpcrdma_client_push_capable(struct rpcrdma_client *c)
{
	return rr_rpc_client_ctl(c, RR_CTL_COMMIT_OK, NULL);
}

static int push_do(struct rpcrdma_client *c, const struct rpcrdma_push_region *r, uint64_t off,
		   const void *buf, uint64_t len, bool write, bool commit, bool visible,
		   uint32_t *status)
{
	struct rr_ctl_push p;
	int rc;

	if (status)
		*status = 0;
	if (!c || !r || (write && len && !buf))
		return -EINVAL;
	if (len > (1u << 31))
		return -EMSGSIZE;
	if (off > r->length || len > r->length - off || r->offset > UINT64_MAX - r->length)
		return -ERANGE;
	if (commit && len == 0)
		return -EINVAL;   /* a Commit names at least one byte */
	/* the region must serve the level asked: never a weaker Commit */
	if (commit && !(r->flags & (visible ? RPCRDMA_PUSH_REGION_VISIBLE
					    : RPCRDMA_PUSH_REGION_DURABLE)))
		return -EOPNOTSUPP;
	memset(&p, 0, sizeof(p));
	p.buf = buf;
	p.len = write ? (uint32_t)len : 0;
	p.commit = commit;
	p.visible = commit && visible;
	p.stag = r->stag;
	p.offset = r->offset + off;
	p.commit_offset = r->offset + off;
	p.commit_len = (uint32_t)len;
	if (!write && !commit)
		return -EINVAL;
	if (write && len == 0 && !commit)
		return 0;
	rc = rr_rpc_client_ctl(c, RR_CTL_PUSH, &p);
	if (status)
		*status = p.commit_status;
	return rc;
}

RPCRDMA_API int rpcrdma_push_write(struct rpcrdma_client *c, const struct rpcrdma_push_region *r,
				   uint64_t off, const void *buf, size_t len, uint32_t flags,
				   uint32_t *commit_status)
{
	if ((flags & ~(RPCRDMA_PUSH_COMMIT | RPCRDMA_PUSH_VISIBLE)) ||
	    (flags & RPCRDMA_PUSH_COMMIT && flags & RPCRDMA_PUSH_VISIBLE))
		return -EINVAL;
	return push_do(c, r, off, buf, len, true, flags != 0, flags & RPCRDMA_PUSH_VISIBLE,
		       commit_status);
}

RPCRDMA_API int rpcrdma_push_commit(struct rpcrdma_client *c, const struct rpcrdma_push_region *r,
				    uint64_t off, uint64_t len, uint32_t *commit_status)
{
	return push_do(c, r, off, NULL, len, false, true, false, commit_status);
}
