/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The responder's request (struct rs_req) from its Call to its end: the
 * credit its Reply grants, settled once (RFC 8166 section 4.3.1; never 0,
 * never above the Receives posted and not reserved for RDMA_DONE:
 * proto/conn/credits.h); the answers that need no Reply built -- RDMA_ERROR
 * messages, ERR_CHUNK for a Call refused; a Reply's Send completed (the
 * memory its Writes read deregistered, the upper layer told); and freeing
 * the request (into the session's spare slots, common/spare.h: the next
 * Call takes it back instead of allocating 2.5 KiB). Replies themselves
 * are reply.c. */
#include "proto/conn/conn_int.h"
#include "common/tls_exit.h"

#include <pthread.h>

void rs_reading_del(struct rr_conn *c, struct rs_req *r)
{
	for (struct rs_req **pp = &c->reading; *pp; pp = &(*pp)->rnext)
		if (*pp == r) {
			*pp = r->rnext;
			break;
		}
	r->rnext = NULL;
}

void rs_req_free(struct rr_conn *c, struct rs_req *r)
{
	if (r->reading) {
		rs_reading_del(c, r);
		r->reading = false;
	}
	if (r->read_reg)
		rr_conn_unreg(c, &r->read_mem);
	rr_xprt_rcall_release(&c->rsp, r->rc);
	if (!rs_spare_put(c, r))
		rr_free_line(c->env, r);
	if (c->nreqs)
		c->nreqs--;
}

struct rs_req *rs_spare_take(struct rr_conn *c)
{
	struct rr_conn_spares *sh = rs_shared_reqs(c);

	if (sh && sh->nreqs)
		return sh->reqs[--sh->nreqs];
	return rr_spare_take(&c->spare_reqs);
}

bool rs_spare_put(struct rr_conn *c, struct rs_req *r)
{
	struct rr_conn_spares *sh = rs_shared_reqs(c);

	if (sh && sh->nreqs < RR_CONN_SPARES) {
		sh->reqs[sh->nreqs++] = r;
		return true;
	}
	return rr_spare_put(&c->spare_reqs, r);
}

void rr_conn_spares_drain(struct rr_conn_spares *sp, const struct rpcrdma_env *env)
{
	while (sp->nreqs)
		rr_free_line(env, sp->reqs[--sp->nreqs]);
	rr_xprt_rsp_shared_drain(&sp->rsp, env);
}

void rs_quota(struct rr_conn *c)
{
	uint32_t n = rr_cred_rsp_take_added(&c->scred);

	if (n && c->io.recv_quota)
		c->io.recv_quota(c->io.ctx, n);
}

int rs_credit(struct rr_conn *c, struct rs_req *r, bool read_chunk, uint32_t *grant)
{
	uint64_t clipped = c->scred.pool->clipped;
	int rc = rr_cred_rsp_reply(&c->scred, read_chunk, grant);

	if (rc == 0 && r)
		r->credited = true;
	c->st->grants_clipped += c->scred.pool->clipped - clipped;
	rs_quota(c);
	return rc;
}

void rs_settle(struct rr_conn *c)
{
	(void)rr_cred_rsp_settle(&c->scred);
	rs_quota(c);
}

void rs_overrun(struct rr_conn *c)
{
	c->st->credit_overruns++;
	rr_conn_fail(c);
}

/* The grant of a Reply whose accounting was already taken. */
uint32_t rs_last_grant(const struct rr_conn *c)
{
	return c->scred.last_grant ? c->scred.last_grant : 1;
}

void rs_send_error(struct rr_conn *c, struct rs_req *r, const uint8_t *msg, size_t len)
{
	struct rr_conn_send s;
	uint32_t slot, cap, grant;
	uint8_t *buf;

	if (r && r->credited)
		grant = rs_last_grant(c);
	else if (rs_credit(c, r, false, &grant))
		grant = 1;
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf || cap < len) {
		if (buf)
			c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
		return;
	}
	memcpy(buf, msg, len);
	rr_put_be32(buf + 8, grant);
	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = (uint32_t)len;
	s.token = TOK(TOK_SEND, NULL);
	if (rr_conn_post_send(c, &s, buf)) {
		c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
	}
}

void rs_refuse_xid(struct rr_conn *c, struct rs_req *r, uint32_t xid)
{
	uint8_t err[32];
	int n = rr_hdr_encode_error_buf(xid, RR_HDR_VERSION, 1, RR_HDR_ERR_CHUNK, err,
					sizeof(err));

	if (!c->up || n <= 0)
		return;
	c->st->calls_refused++;
	c->st->err_chunk_sent++;
	c->st->sends++;
	rs_send_error(c, r, err, (size_t)n);
}

/* The plan a Reply is built in (struct rr_xprt_reply_plan, 28 KiB) is
 * needed only while rr_conn_reply builds and posts the Reply (or while a
 * Read-chunk Reply is parked). With the default allocator one plan per
 * thread, kept between Replies, serves every connection the thread answers:
 * one kept per connection faulted fresh pages on each connection's first
 * Reply and stayed with it while idle (issue 16 part L). A thread's plan is
 * freed when the thread exits (plan_exit, common/tls_exit.h). With an injected
 * allocator the connection keeps its own (c->plan_cache), so that every
 * block is the allocator's to see and is freed with the connection. */
static __thread struct rr_xprt_reply_plan *tls_plan;
static __thread bool tls_plan_keyed;

static void plan_drain(void)
{
	rr_free(rpcrdma_env_default(), tls_plan); /* plan_tls: the default allocator's */
	tls_plan = NULL;
}

static struct rr_tls_exit plan_exit = {.drain = plan_drain};

struct rr_xprt_reply_plan *rs_plan_get(struct rr_conn *c)
{
	struct rr_xprt_reply_plan **slot = c->plan_tls ? &tls_plan : &c->plan_cache;
	struct rr_xprt_reply_plan *plan = *slot;

	if (plan) {
		*slot = NULL;
		return plan;
	}
	return rr_alloc(c->env, sizeof(*plan));
}

void rs_plan_put(struct rr_conn *c, struct rr_xprt_reply_plan *plan)
{
	if (c->plan_tls) {
		if (tls_plan) {
			rr_free(c->env, plan);
			return;
		}
		/* kept by this thread: freed at its exit (plan_exit) */
		if (!tls_plan_keyed) {
			if (!rr_tls_exit_arm(&plan_exit)) {
				rr_free(c->env, plan);
				return;
			}
			tls_plan_keyed = true;
		}
		tls_plan = plan;
		return;
	}
	if (!c->plan_cache)
		c->plan_cache = plan;
	else
		rr_free(c->env, plan);
}

void rs_replying_del(struct rr_conn *c, struct rs_req *r)
{
	for (struct rs_req **pp = &c->replying; *pp; pp = &(*pp)->snext)
		if (*pp == r) {
			*pp = r->snext;
			break;
		}
	r->snext = NULL;
}

/* The memory the Reply's Writes read is no longer used. */
void rs_release_wmem(struct rr_conn *c, struct rs_req *r)
{
	for (unsigned i = 0; i < r->nwmem; i++)
		rr_conn_unreg(c, &r->wmem[i]);
	r->nwmem = 0;
}

void rs_reply_sent(struct rr_conn *c, struct rs_req *r, int status)
{
	rs_replying_del(c, r);
	r->send_done = true;
	r->send_pending = false;
	r->send_status = status;
	rs_release_wmem(c, r);
	if (r->orphan) {
		rs_req_free(c, r);   /* rr_conn_done came first */
		return;
	}
	c->io.sent(c->io.ctx, &r->pub, status);
}
