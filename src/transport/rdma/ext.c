/* SPDX-License-Identifier: BSD-2-Clause */
/* Transport controls of the "rdma" scheme (rpc/xprt_ctl.h): the public
 * counters (include/rpcrdma/stats.h) from the driver's own struct
 * rr_xprt_stats (proto/xprt.h; nothing is counted twice), and push mode
 * (draft-talpey-rdma-commit-00 section 2) through the driver's Commit
 * support (transport/rdma/tp.h). Called by rdma/rpc.c's ctl ops. */
#include "transport/rdma/ext.h"

#include "proto/conn/privdata.h"

static void stats_export(const struct rr_xprt_stats *s, struct rpcrdma_xprt_stats *o)
{
	memset(o, 0, sizeof(*o));
	rr_xprt_stats_export(s, o);
	snprintf(o->transport, sizeof(o->transport), "rdma");
}

int rr_rdma_client_ctl(struct rr_tp_client *tp, unsigned op, void *arg)
{
	switch (op) {
	case RR_CTL_STATS: {
		struct rr_xprt_stats s;
		struct rr_xprt_params p;

		rr_tp_client_stats(tp, &s);
		stats_export(&s, arg);
		((struct rpcrdma_xprt_stats *)arg)->connections =
			rr_tp_client_params(tp, &p, NULL) == 0 ? 1 : 0;
		return 0;
	}
	case RR_CTL_COMMIT_OK:
		return rr_tp_client_commit_ok(tp);
	case RR_CTL_PUSH: {
		struct rr_ctl_push *c = arg;
		struct rr_tp_push p;
		int rc;

		memset(&p, 0, sizeof(p));
		p.buf = c->buf;
		p.len = c->len;
		p.stag = c->stag;
		p.offset = c->offset;
		p.commit = c->commit;
		p.visible = c->visible;
		p.region.stag = c->stag;
		p.region.offset = c->commit_offset;
		p.region.length = c->commit_len;
		p.timeout_ms = c->timeout_ms;
		rc = rr_tp_client_push(tp, &p);
		c->commit_status = p.commit_status;
		return rc;
	}
	default:
		return -EOPNOTSUPP;
	}
}

int rr_rdma_server_ctl(struct rr_tp_server *tp, struct rr_conn_sreq *sreq, unsigned op, void *arg)
{
	switch (op) {
	case RR_CTL_STATS: {
		struct rr_xprt_stats s;

		if (sreq)
			return -EINVAL;
		rr_tp_server_stats(tp, &s);
		stats_export(&s, arg);
		((struct rpcrdma_xprt_stats *)arg)->connections = rr_tp_server_conns(tp);
		return 0;
	}
	case RR_CTL_COMMIT_OK:
		return sreq ? rr_tp_server_commit_ok(tp, sreq) : -EINVAL;
	case RR_CTL_EXPOSE: {
		struct rr_ctl_expose *x = arg;

		if (!sreq)
			return -EINVAL;
		return rr_tp_server_expose(tp, sreq, x->attr, x->released, x->arg, &x->stag,
					   &x->to, &x->id, &x->levels);
	}
	case RR_CTL_REVOKE:
		return rr_tp_server_revoke(tp, *(const uint64_t *)arg);
	case RR_CTL_PEER_ADDR:
		return sreq && arg ? rr_tp_server_peer_addr(tp, sreq, arg) : -EINVAL;
	default:
		return -EOPNOTSUPP;
	}
}
