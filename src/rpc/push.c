/* SPDX-License-Identifier: BSD-2-Clause */
/* Public transport counters (include/rpcrdma/stats.h) and push mode
 * (include/rpcrdma/push.h, draft-talpey-rdma-commit-00 section 2) of the RPC
 * API: argument checks, the region handle's XDR, and routing to the
 * transport's ctl op (transport/xprt_ctl.h). Transports without them
 * (tcp://) answer -EOPNOTSUPP. */
#include "transport/xprt.h"
#include "rpc/ctl.h"

#include <stdio.h>

RPCRDMA_API int rpcrdma_client_stats(struct rpcrdma_client *c, struct rpcrdma_xprt_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	return rr_rpc_client_ctl(c, RR_CTL_STATS, st);
}

RPCRDMA_API int rpcrdma_server_stats(struct rpcrdma_server *s, struct rpcrdma_xprt_stats *st)
{
	if (!s || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	return rr_rpc_server_ctl(s, RR_CTL_STATS, st);
}

RPCRDMA_API void rpcrdma_xprt_stats_diff(const struct rpcrdma_xprt_stats *now,
					 const struct rpcrdma_xprt_stats *before,
					 struct rpcrdma_xprt_stats *out)
{
	/* Every field before `connections` is a uint64_t counter. */
	const size_t n = offsetof(struct rpcrdma_xprt_stats, connections) / sizeof(uint64_t);
	struct rpcrdma_xprt_stats r = *now;
	uint64_t *o = (uint64_t *)(void *)&r;
	const uint64_t *b = (const uint64_t *)(const void *)before;

	for (size_t i = 0; i < n; i++)
		o[i] -= b[i];
	*out = r;
}

RPCRDMA_API int rpcrdma_xprt_stats_print(const struct rpcrdma_xprt_stats *s, FILE *f)
{
	int n;

	if (!s || !f)
		return -EINVAL;
	n = fprintf(f,
		"xprt: %s connections %u\n"
		"\tsends %llu recvs %llu bad_xids %llu bad_replies %llu dropped %llu\n"
		"\tread_chunks %llu write_chunks %llu reply_chunks %llu\n"
		"\ttotal_rdma_req %llu total_rdma_rep %llu rdma_read_bytes %llu rdma_write_bytes %llu\n"
		"\tpullup_bytes %llu short %llu chunked %llu long %llu\n"
		"\tsent: RDMA_MSG %llu RDMA_NOMSG %llu RDMA_ERROR %llu RDMA_DONE %llu, %llu bytes\n"
		"\trecv: RDMA_MSG %llu RDMA_NOMSG %llu RDMA_ERROR %llu RDMA_DONE %llu, %llu bytes\n"
		"\terr_vers_sent %llu err_chunk_sent %llu err_received %llu fatal_errors %llu\n"
		"\tremote_inv %llu local_inv %llu bad_remote_inv %llu\n"
		"\tcredits_exhausted %llu retransmits %llu reconnects %llu\n"
		"\tpush_writes %llu push_write_bytes %llu commits %llu commit_errors %llu\n"
		"\tregions_exposed %llu regions_released %llu cq_polls %llu\n"
		"\tconnections refused %llu idle_closed %llu accept_backoffs %llu "
		"handshakes_dropped %llu\n",
		s->transport[0] ? s->transport : "?", s->connections,
		(unsigned long long)s->sends, (unsigned long long)s->recvs,
		(unsigned long long)s->bad_xids, (unsigned long long)s->bad_replies,
		(unsigned long long)s->dropped, (unsigned long long)s->read_chunks,
		(unsigned long long)s->write_chunks, (unsigned long long)s->reply_chunks,
		(unsigned long long)s->total_rdma_req, (unsigned long long)s->total_rdma_rep,
		(unsigned long long)s->rdma_read_bytes, (unsigned long long)s->rdma_write_bytes,
		(unsigned long long)s->pullup_bytes, (unsigned long long)s->short_msgs,
		(unsigned long long)s->chunked_msgs, (unsigned long long)s->long_msgs,
		(unsigned long long)s->msg_sent, (unsigned long long)s->nomsg_sent,
		(unsigned long long)s->error_sent, (unsigned long long)s->done_sent,
		(unsigned long long)s->inline_sent_bytes,
		(unsigned long long)s->msg_recv, (unsigned long long)s->nomsg_recv,
		(unsigned long long)s->error_recv, (unsigned long long)s->done_recv,
		(unsigned long long)s->inline_recv_bytes,
		(unsigned long long)s->err_vers_sent, (unsigned long long)s->err_chunk_sent,
		(unsigned long long)s->err_received, (unsigned long long)s->fatal_errors,
		(unsigned long long)s->remote_inv, (unsigned long long)s->local_inv,
		(unsigned long long)s->bad_remote_inv,
		(unsigned long long)s->credits_exhausted, (unsigned long long)s->retransmits,
		(unsigned long long)s->reconnects,
		(unsigned long long)s->push_writes, (unsigned long long)s->push_write_bytes,
		(unsigned long long)s->commits, (unsigned long long)s->commit_errors,
		(unsigned long long)s->regions_exposed, (unsigned long long)s->regions_released,
		(unsigned long long)s->cq_polls,
		(unsigned long long)s->refused_conns, (unsigned long long)s->idle_closed,
		(unsigned long long)s->accept_backoffs, (unsigned long long)s->handshakes_dropped);
	return n < 0 ? -EIO : 0;
}

/* ---- push mode ---- */

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
