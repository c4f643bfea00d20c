/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The session's life (proto/conn/conn.h): creation, the connection coming
 * up with the RFC 8797 negotiation of its parameters and going down,
 * received messages handed to the role that takes them, completions routed
 * by their token, and time. The top of the session's files (conn_int.h):
 * after an event it does what a lower file cannot ask for itself --
 * sending queued Calls once a credit is free, resuming parked Replies once
 * an RDMA_DONE freed a reservation. */
#include "proto/conn/conn_int.h"

/* A requester's call's fields of the session (conn_int.h: env to doneq,
 * before the requester's codec core) stay within three cache lines; the
 * responder's are together further on (a static assertion in
 * responder.c). */
_Static_assert(offsetof(struct rr_conn, req) - offsetof(struct rr_conn, env) <= 3 * 64,
	       "rr_conn: the requester's per-call fields beyond three cache lines");
/* What every Call writes or reads of its rr_conn_rpc, before the per-sink
 * arrays, fits two cache lines (part CS). */
_Static_assert(offsetof(struct rr_conn_rpc, placed) <= 2 * 64,
	       "rr_conn_rpc: the per-call fields beyond two cache lines");

/* The io ops every call uses (@ctx to @sent) are the last 64 bytes of the
 * session's copy of them, right before env, st and up (conn.h struct
 * rr_conn_io). */
_Static_assert(sizeof(struct rr_conn_io) - offsetof(struct rr_conn_io, ctx) == 64 &&
		       offsetof(struct rr_conn, env) ==
			       offsetof(struct rr_conn, io) + sizeof(struct rr_conn_io),
	       "rr_conn_io: the per-call ops beside the session's env");
_Static_assert(offsetof(struct rr_conn, io.ctx) % 64 == 0 && _Alignof(struct rr_conn) == 64,
	       "rr_conn_io: the per-call ops not on one line of a line-aligned session");

int rr_conn_create(const struct rr_conn_config *cfg, const struct rr_conn_io *io,
		   struct rr_conn **out)
{
	const struct rpcrdma_env *env = rr_env(cfg->env);
	/* line-aligned (struct rr_conn's groups are placed by cache line) */
	struct rr_conn *c = rr_alloc_line(env, sizeof(*c));
	struct rr_xprt_params p;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->cfg = *cfg;
	c->io = *io;
	c->env = env;
	c->plan_tls = rr_env_default_alloc(env);
	c->clock = cfg->clock ? cfg->clock : env;
	c->st = cfg->stats ? cfg->stats : &c->own_stats;
	c->responder = cfg->role == RR_CONN_RESPONDER;
	c->tx_watched = c->responder && cfg->send_timeout_ns;
	if (!c->cfg.credits)
		c->cfg.credits = 1;
	c->park_tail = &c->parkq;
	if (cfg->role == RR_CONN_REQUESTER) {
		rr_xprt_params_default(&p);
		rr_xprt_req_init(&c->req, env, &p, c->st);
		rr_cred_req_init(&c->rcred, c->cfg.credits);
	}
	*out = c;
	return 0;
}

void rr_conn_destroy(struct rr_conn *c)
{
	if (!c)
		return;
	bc_destroy(c);
	if (c->cfg.role == RR_CONN_REQUESTER) {
		rq_destroy(c);
		rr_xprt_req_fini(&c->req);
	} else {
		rs_destroy(c);
	}
	rr_free(c->env, c->plan_cache);
	rr_free_line(c->env, c);
}

/* The parameters of the connection from the peer's private data (RFC 8797
 * sections 4 and 5; none, or not ours: the RFC 8166 defaults). */
static void negotiate(struct rr_conn *c, const void *pd, size_t pdlen)
{
	const struct rr_conn_config *cf = &c->cfg;
	bool req = cf->role == RR_CONN_REQUESTER;

	if (rr_pd_negotiate(&cf->local, req ? RR_PD_REQUESTER : RR_PD_RESPONDER, pd, pdlen,
			    &c->neg)) {
		memset(&c->neg, 0, sizeof(c->neg));
		c->neg.call_threshold = c->neg.reply_threshold = RR_HDR_DEFAULT_INLINE;
	}
	rr_xprt_params_default(&c->params);
	c->params.call_inline = RR_MIN(c->neg.call_threshold, req ? cf->send_size : cf->recv_size);
	c->params.reply_inline = RR_MIN(c->neg.reply_threshold, req ? cf->recv_size : cf->send_size);
	c->params.local_r = cf->local.remote_inv;
	c->params.peer_r = c->neg.peer_r;
	c->params.max_seg_len = cf->max_seg_len;
	c->params.max_segs = cf->max_segs;
	c->params.max_call = cf->max_call;
	c->params.inline_ddp = cf->inline_ddp;
	c->params.reliable_reply = (c->neg.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) != 0;
}

void rr_conn_up(struct rr_conn *c, const void *peer_pd, size_t pd_len, uint32_t nrecv,
		uint16_t ord, uint64_t peer_host)
{
	negotiate(c, peer_pd, pd_len);
	c->ord = ord ? ord : 1;
	c->peer_host = peer_host;
	c->reads_inflight = 0;
	c->sends_inflight = 0;
	c->up = true;
	bc_up(c);
	if (c->cfg.role == RR_CONN_REQUESTER) {
		rr_xprt_req_set_params(&c->req, &c->params);
		rq_up(c);
		return;
	}
	rr_xprt_rsp_init(&c->rsp, c->env, &c->params, c->st);
	rr_xprt_rsp_keep_spares(&c->rsp, RR_XPRT_RSP_SPARES);
	if (c->cfg.spares)
		rr_xprt_rsp_share(&c->rsp, &c->cfg.spares->rsp);
	rr_cred_rsp_init(&c->scred, c->cfg.credits,
			 c->params.reliable_reply ? c->cfg.rrep_max : 0, nrecv);
	/* all of them: a backward Call reserves its Reply's (bc_sent) */
	rr_cred_rsp_posted(&c->scred, nrecv);
	rr_rrep_table_init(&c->rrep, c->clock, c->cfg.rrep_timeout_ns, c->st);
	if (rr_cred_rsp_join(&c->scred, c->cfg.pool)) {
		rr_conn_fail(c);   /* no Receive for its first Call */
		return;
	}
	rs_quota(c);   /* its first Call */
}

void rr_conn_set_ord(struct rr_conn *c, uint16_t ord)
{
	c->ord = ord ? ord : 1;
}

void rr_conn_down(struct rr_conn *c)
{
	if (!c->up)
		return;
	c->up = false;
	bc_down(c);
	if (c->cfg.role == RR_CONN_REQUESTER)
		rq_down(c);
	else
		rs_down(c);
}

bool rr_conn_is_up(const struct rr_conn *c)
{
	return c->up;
}

const struct rr_xprt_params *rr_conn_params(const struct rr_conn *c)
{
	return &c->params;
}

bool rr_conn_commit(const struct rr_conn *c)
{
	return (c->neg.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT) != 0;
}

bool rr_conn_reliable_reply(const struct rr_conn *c)
{
	return c->up && c->params.reliable_reply;
}

inline __attribute__((always_inline)) void rr_conn_on_recv_rq(struct rr_conn *c, uint32_t idx,
								const uint8_t *buf, uint32_t len,
								bool has_inv, uint32_t inv_stag)
{
	rr_conn_count_form(c, buf, len, false);
	/* its reverse Calls (RFC 8167) are told apart in rq_on_recv, after
	 * the one-pass Reply's test: a message that passes it is no Call
	 * (issue 16 part ID) */
	rq_on_recv(c, idx, buf, len, has_inv, inv_stag);
}

/* rr_conn_on_recv_rq out of line, for rr_conn_on_recv: the responder's
 * way without the requester's frame. */
static __attribute__((noinline)) void on_recv_rq(struct rr_conn *c, uint32_t idx,
						 const uint8_t *buf, uint32_t len, bool has_inv,
						 uint32_t inv_stag)
{
	rr_conn_on_recv_rq(c, idx, buf, len, has_inv, inv_stag);
}

void rr_conn_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len,
		     bool has_inv, uint32_t inv_stag)
{
	uint32_t xid;

	if (!c->responder) {
		on_recv_rq(c, idx, buf, len, has_inv, inv_stag);
		return;
	}
	rr_conn_count_form(c, buf, len, false);
	if (bc_may_be_reply(buf, len) && bc_on_recv(c, idx, buf, len))
		return;   /* the reverse direction's (RFC 8167) */
	if (c->params.reliable_reply && rr_rrep_is_done(buf, len, &xid)) {
		rs_rrep_on_done(c, idx, xid, has_inv, inv_stag);
		rs_park_resume(c, rr_conn_now(c));   /* a reservation may be free */
		return;
	}
	if (has_inv)
		rs_rrep_on_stray_inv(c, inv_stag);
	rs_on_recv(c, idx, buf, len);
}

void rr_conn_on_send(struct rr_conn *c, uint64_t token, int status)
{
	if (c->sends_inflight)
		c->sends_inflight--;
	/* progress matters while Sends are left in flight; none left, the
	 * next post takes the clock (the first in flight): no clock read
	 * per call on a connection with one Reply at a time */
	if (c->sends_inflight && rr_conn_tx_watched(c))
		c->tx_progress = rr_conn_now(c);
	if (TOK_KIND(token) == TOK_REPLY)
		rs_reply_sent(c, TOK_PTR(token), status ? -EIO : 0);
	if (status) {
		rr_conn_fail(c);
		return;
	}
	rr_conn_on_slot(c);
}

void rr_conn_on_sends(struct rr_conn *c, unsigned n)
{
	if (!n)
		return;
	/* (no token looked at: a Send without Writes carries TOK_SEND,
	 * nothing to do but count it; issue 16 part IC) */
	c->sends_inflight -= RR_MIN(n, c->sends_inflight);
	if (c->sends_inflight && rr_conn_tx_watched(c))
		c->tx_progress = rr_conn_now(c);
	rr_conn_on_slot(c);
}

/* A send slot is free. A requester: RDMA_DONEs first (they need no credit),
 * then Calls that found no slot when their credit came (they wait at the head
 * of the queue, and nothing else may come to send them: every Reply may be
 * in). A responder: backward Calls waiting for a send slot. */
void rr_conn_on_slot(struct rr_conn *c)
{
	if (!c->responder) {
		rq_done_flush(c);
		rq_pump(c);
	} else {
		bc_pump(c);
	}
}

void rr_conn_on_work(struct rr_conn *c, uint64_t token, int status)
{
	switch (TOK_KIND(token)) {
	case TOK_PULL_READ:
		if (c->reads_inflight)
			c->reads_inflight--;
		rq_pull_on_read(c, TOK_PTR(token), status);
		if (!status)
			rq_pump(c);
		break;
	case TOK_REQ_READ:
		if (c->reads_inflight)
			c->reads_inflight--;
		rs_on_read(c, TOK_PTR(token), status);
		break;
	case TOK_CALL_INV:
		rq_on_inv(c, TOK_PTR(token), status);
		if (!status)
			rq_pump(c);   /* a credit may be free */
		break;
	case TOK_EXP_INV:
		rs_rrep_on_inv(c, TOK_PTR(token), status);
		break;
	default:
		break;
	}
}

void rr_conn_tick(struct rr_conn *c, uint64_t now)
{
	if (!c->responder || !c->up)
		return;
	rs_tick_stall(c, now);
	rs_park_resume(c, now);   /* parked too long: ERR_CHUNK */
	rs_rrep_tick(c, now);
}

bool rr_conn_parked(const struct rr_conn *c)
{
	return c->parkq != NULL || c->bc_wait_room;
}

void rr_conn_resume(struct rr_conn *c)
{
	if (c->parkq && c->responder && c->up)
		rs_park_resume(c, rr_conn_now(c));
	if (c->bc_wait_room && c->up) {
		c->bc_wait_room = false;
		bc_pump(c);   /* may wait again */
	}
}

uint64_t rr_conn_next_timeout(const struct rr_conn *c, uint64_t now)
{
	uint64_t t = UINT64_MAX;

	(void)now;
	if (!c->responder || !c->up)
		return t;
	if (c->sends_inflight && c->cfg.send_timeout_ns)
		t = c->tx_progress + c->cfg.send_timeout_ns;
	return RR_MIN(t, RR_MIN(rs_park_next(c), rs_rrep_next(c)));
}
