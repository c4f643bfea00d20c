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
	o->sends = s->sends;
	o->recvs = s->recvs;
	o->bad_xids = s->bad_xids;
	o->bad_replies = s->bad_replies;
	o->dropped = s->dropped;
	o->read_chunks = s->read_chunks;
	o->write_chunks = s->write_chunks;
	o->reply_chunks = s->reply_chunks;
	o->total_rdma_req = s->total_rdma_req;
	o->total_rdma_rep = s->total_rdma_rep;
	o->rdma_read_bytes = s->rdma_read_bytes;
	o->rdma_write_bytes = s->rdma_write_bytes;
	o->pullup_bytes = s->pullup_bytes;
	o->short_msgs = s->short_msgs;
	o->chunked_msgs = s->chunked_msgs;
	o->long_msgs = s->long_msgs;
	o->msg_sent = s->msg_sent;
	o->nomsg_sent = s->nomsg_sent;
	o->error_sent = s->error_sent;
	o->done_sent = s->done_sent;
	o->msg_recv = s->msg_recv;
	o->nomsg_recv = s->nomsg_recv;
	o->error_recv = s->error_recv;
	o->done_recv = s->done_recv;
	o->inline_sent_bytes = s->inline_sent_bytes;
	o->inline_recv_bytes = s->inline_recv_bytes;
	o->err_vers_sent = s->err_vers_sent;
	o->err_chunk_sent = s->err_chunk_sent;
	o->err_received = s->err_received;
	o->fatal_errors = s->fatal_errors;
	o->remote_inv = s->remote_inv;
	o->local_inv = s->local_inv;
	o->bad_remote_inv = s->bad_remote_inv;
	o->credits_exhausted = s->credits_exhausted;
	o->retransmits = s->retransmits;
	o->reconnects = s->reconnects;
	o->push_writes = s->push_writes;
	o->push_write_bytes = s->push_write_bytes;
	o->commits = s->commits;
	o->commit_errors = s->commit_errors;
	o->regions_exposed = s->regions_exposed;
	o->regions_released = s->regions_released;
	o->cq_polls = s->cq_polls;
	o->refused_conns = s->refused_conns;
	o->idle_closed = s->idle_closed;
	o->accept_backoffs = s->accept_backoffs;
	o->handshakes_dropped = s->handshakes_dropped;
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
