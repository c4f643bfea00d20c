/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The session's way out (proto/conn/conn.h struct rr_conn_io): the work
 * every file of the session asks of its executor -- registrations, Sends,
 * ending the connection -- with what is counted on the way (the form of
 * every Send posted and Receive completed, RFC 8166 section 4.2.1
 * rdma_proc; the Sends in flight for the stall timer), and the session's
 * clock. The bottom of the session: it calls no other file of it. */
#include "proto/conn/conn_int.h"

uint64_t rr_conn_now(const struct rr_conn *c)
{
	return rr_now_ns(c->clock);
}

void rr_conn_fail(struct rr_conn *c)
{
	if (c->up && c->io.close)
		c->io.close(c->io.ctx);
}

/* What is counted of a message of @len bytes whose rdma_proc is @proc
 * (host order; RR_CONN_PROC_NONE: shorter than the fixed header, its
 * bytes alone counted). Inlined in its callers where the link-time
 * optimiser sees them (each with @sent a constant: one side of the switch;
 * with @proc a constant too, the switch is one increment: issue 16 part
 * JD; part ID: left to the inliner, the Receive's went out of line, a call
 * of 20). */
inline __attribute__((always_inline)) void rr_conn_count_proc(struct rr_conn *c, uint32_t proc,
							      uint32_t len, bool sent)
{
	struct rr_xprt_stats *st = c->st;

	if (sent)
		st->inline_sent_bytes += len;
	else
		st->inline_recv_bytes += len;
	switch (proc) {
	case RR_HDR_MSG:
		sent ? st->msg_sent++ : st->msg_recv++;
		break;
	case RR_HDR_NOMSG:
		sent ? st->nomsg_sent++ : st->nomsg_recv++;
		break;
	case RR_HDR_DONE:
		sent ? st->done_sent++ : st->done_recv++;
		break;
	case RR_HDR_ERROR:
		sent ? st->error_sent++ : st->error_recv++;
		break;
	default:
		break;
	}
}

inline __attribute__((always_inline)) void rr_conn_count_form(struct rr_conn *c,
							      const uint8_t *buf, uint32_t len,
							      bool sent)
{
	rr_conn_count_proc(c, len < 16 ? RR_CONN_PROC_NONE : rr_get_be32(buf + 12), len, sent);
}

/* Inlined in its callers where the link-time optimiser sees them (a
 * Send's one frame fewer, issue 16 part GC). */
inline __attribute__((always_inline)) int rr_conn_post_send_proc(struct rr_conn *c,
								 const struct rr_conn_send *s,
								 uint32_t proc)
{
	int rc;

	rr_conn_count_proc(c, proc, s->len, true);
	rc = c->io.send(c->io.ctx, s);
	if (rc)
		return rc < 0 ? rc : 0;   /* 1: quiet, never told: not in flight */
	if (!c->sends_inflight && rr_conn_tx_watched(c))
		c->tx_progress = rr_conn_now(c);   /* the first in flight */
	c->sends_inflight++;
	return 0;
}

inline __attribute__((always_inline)) int rr_conn_post_send(struct rr_conn *c,
							    const struct rr_conn_send *s,
							    const uint8_t *slot_buf)
{
	return rr_conn_post_send_proc(c, s,
				      s->len < 16 ? RR_CONN_PROC_NONE : rr_get_be32(slot_buf + 12));
}

void rr_conn_send_watch(struct rr_conn *c, uint64_t since)
{
	if (!c->sends_inflight && rr_conn_tx_watched(c))
		c->tx_progress = since;
	c->sends_inflight++;
}

int rr_conn_reg(struct rr_conn *c, struct rr_conn_mem *m)
{
	return c->io.reg(c->io.ctx, m);
}

void rr_conn_unreg(struct rr_conn *c, struct rr_conn_mem *m)
{
	if (m->handle)
		c->io.unreg(c->io.ctx, m);
	m->handle = NULL;
}
