/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's endpoint (transport/rdma/tp.h), what a client, a
 * server's listener and a server's shard share: the configuration and its
 * inline-threshold policy, the shared provider context (ctx.c) and the
 * port of the endpoint's progress loop (port.c), what we advertise in the
 * private data (RFC 8797 and the extension block, proto/conn/privdata.h),
 * the session configuration derived from it, and the endpoint's turn on
 * its loop (its kick task and timer). */
#include "transport/rdma/tp_int.h"

#include <time.h>

void rr_tp_conf_default(struct rr_tp_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->provider = RPCRDMA_PROVIDER_SOFT;
	c->inline_send = RR_TP_INLINE_DEFAULT;
	c->inline_recv = RR_TP_INLINE_DEFAULT;
	c->inline_mem = RR_TP_INLINE_MEM;
	c->credits = RR_CRED_REQUEST_DEFAULT;
	c->remote_inv = true;
	c->use_windows = true;
	c->max_seg_len = 1u << 20;
	c->max_segs = 16;
	c->max_call = 1u << 24;
	c->inline_ddp = true;
	c->connect_timeout_ms = 5000;
	c->reconnect_delay_ms = 50;
	c->ord = 16;
	c->ird = 16;
	c->ext_caps = RR_PD_EXT_CAP_RELIABLE_REPLY;
	c->rrep_timeout_ms = 30000;
	c->rrep_max = 32;
	c->reply_mem_per_conn = RR_TP_REPLY_MEM_PER_CONN;
	c->send_timeout_ms = 60000;
	c->reply_mem_total = RR_TP_REPLY_MEM_TOTAL;
}

/* The inline threshold policy, applied once per endpoint (rdma/tp.h,
 * docs/transport.md "Inline thresholds"): a size of 0 becomes the provider's
 * default, sizes are capped at what RFC 8797 can advertise, and when the
 * per-connection buffers (Receives + send slots, each of the full size) would
 * exceed inline_mem the credits are lowered to fit: the requester posts
 * credits + 8 Receives and as many send slots; the responder credits + 4
 * (+ rrep_max for reliable reply) Receives and 8 more send slots. */
void rr_tp_conf_inline(struct rr_tp_conf *cf, const char *provider, bool server)
{
	uint32_t dflt = provider && strcmp(provider, RPCRDMA_PROVIDER_SOFT) == 0
				? RR_TP_INLINE_SOFT : RR_TP_INLINE_DEFAULT;
	uint64_t per, room;

	if (cf->inline_send == 0)
		cf->inline_send = dflt;
	if (cf->inline_recv == 0)
		cf->inline_recv = dflt;
	cf->inline_send = RR_MIN(cf->inline_send, RR_PD_SIZE_MAX);
	cf->inline_recv = RR_MIN(cf->inline_recv, RR_PD_SIZE_MAX);
	if (!cf->inline_mem)
		return;
	per = (uint64_t)cf->inline_send + cf->inline_recv;
	if (!server) {
		uint64_t fixed = 8ull + cf->bc_slots;   /* + the backchannel's */

		room = cf->inline_mem / per;
		if ((uint64_t)cf->credits + fixed > room)
			cf->credits = (uint32_t)RR_MIN(cf->credits,
						       RR_MAX(room > fixed ? room - fixed : 0,
							      RR_TP_MIN_CREDITS));
	} else {
		uint32_t rrep = (cf->ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) ? cf->rrep_max : 0;
		uint64_t slack = 8ull * cf->inline_send;
		uint64_t n = cf->inline_mem > slack ? (cf->inline_mem - slack) / per : 0;
		uint64_t fixed = 4ull + cf->bc_slots;   /* + the backchannel's */
		uint64_t avail = n > fixed ? n - fixed : 0;

		if ((uint64_t)cf->credits + rrep > avail) {
			if (rrep) {
				rrep = (uint32_t)RR_MAX(RR_MIN(rrep, avail / 3), 1);
				cf->rrep_max = rrep;
			}
			cf->credits = (uint32_t)RR_MIN(cf->credits,
						       RR_MAX(avail > rrep ? avail - rrep : 0,
							      RR_TP_MIN_CREDITS));
		}
	}
}

uint64_t tp_now_ns(const struct tp_ep *ep)
{
	return rr_now_ns(ep->env);
}

void tp_ep_kick(struct tp_ep *ep)
{
	rr_lock(&ep->evq_lock);
	if (!ep->detached)
		rr_loop_post(ep->loop, &ep->kick);
	rr_unlock(&ep->evq_lock);
}

bool tp_on_progress_thread(const struct tp_ep *ep)
{
	return ep->loop && rr_loop_on_runner(ep->loop);
}

/* The endpoint's turn on its loop: posted (tp_ep_kick), or its timer.
 * Pinned: its upcalls run without the lock, and destroy must not free the
 * connections they use meanwhile. */
static void ep_turn(struct tp_ep *ep)
{
	rr_lock(&ep->lock);
	if (!ep->stop && ep->ops->turn) {
		ep->pins++;
		ep->ops->turn(ep);
		tp_ep_unpin(ep);
	}
	rr_unlock(&ep->lock);
}

void tp_ep_quiesce(struct tp_ep *ep)
{
	ep->stop = true;   /* tp_touched_after and ep_turn start nothing */
	rr_cond_broadcast(&ep->cond);   /* callers waiting on it look */
	while (ep->pins)
		(void)rr_engine_cond_wait(&ep->cond, &ep->lock, NULL);
}

static void ep_kick_run(struct rr_loop_task *t)
{
	ep_turn(RR_CONTAINER_OF(t, struct tp_ep, kick));
}

static void ep_timer_run(struct rr_loop_timer *t)
{
	ep_turn(RR_CONTAINER_OF(t, struct tp_ep, timer));
}

static void ep_turn_call(void *arg)
{
	ep_turn(arg);
}

void tp_ep_turn_now(struct tp_ep *ep)
{
	rr_engine_call(ep->loop, ep_turn_call, ep);
}

/* What every endpoint sets up on loop @l with port @p's context. */
static int ep_attach(struct tp_ep *ep, struct rr_loop *l, const struct tp_ep_ops *ops)
{
	int rc;

	if (!l) {
		rc = rr_engine_pick(&l);
		if (rc)
			return rc;
	}
	ep->loop = l;
	ep->ops = ops;
	ep->kick.fn = ep_kick_run;
	ep->evq_tail = &ep->evq;
	ep->lock = (struct rr_lock)RR_LOCK_INIT;
	ep->cond = (struct rr_cond){0};
	ep->evq_lock = (struct rr_lock)RR_LOCK_INIT;
	ep->timer_ok = rr_loop_timer_init(l, &ep->timer, ep_timer_run) == 0;
	if (!ep->timer_ok)
		return -ENOMEM;
	return tp_port_get(ep->tc, l, &ep->port);
}

int tp_ep_init(struct tp_ep *ep, const struct rr_tp_conf *conf, bool server,
	       const struct sockaddr *addr, struct rr_loop *l, const struct tp_ep_ops *ops)
{
	struct rpcrdma_caps *caps;
	int rc;

	ep->conf = *conf;
	ep->env = rr_env(conf->env);
	ep->is_server = server;
	if (ep->conf.credits == 0)
		ep->conf.credits = 1;
	rr_tp_conf_inline(&ep->conf, conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT,
			  server);
	if (ep->conf.inline_send < 1024 || ep->conf.inline_recv < 1024)
		return -EINVAL;
	rc = tp_ctx_get(conf, addr, server, &ep->tc);
	if (rc)
		return rc;
	ep->ctx = ep->tc->ctx;
	caps = &ep->tc->caps;
	/* R tells the peer it may invalidate our STags: a requester can
	 * honour it only with invalidatable registrations. */
	ep->adv_r = ep->conf.remote_inv;
	if (!server && (!ep->conf.use_windows || !(caps->flags & RPCRDMA_CAP_INVALIDATABLE)))
		ep->adv_r = false;
	/* Never advertise RDMA Commit the provider cannot carry (verbs
	 * without FLUSH): persistence (Commit + durable registrations) or
	 * global visibility (FLUSH global). */
	if (!((caps->flags & RPCRDMA_CAP_COMMIT && caps->flags & RPCRDMA_CAP_DURABLE) ||
	      caps->flags & RPCRDMA_CAP_COMMIT_VISIBLE))
		ep->conf.ext_caps &= ~RR_PD_EXT_CAP_RDMA_COMMIT;
	/* A responder exposing Read chunks (reliable reply) can honour R
	 * only with invalidatable registrations too. */
	if (server && (ep->conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) &&
	    (!ep->conf.use_windows || !(caps->flags & RPCRDMA_CAP_INVALIDATABLE)))
		ep->adv_r = false;
	return ep_attach(ep, l, ops);
}

int tp_ep_init_like(struct tp_ep *ep, const struct tp_ep *like, struct rr_loop *l,
		    const struct tp_ep_ops *ops)
{
	ep->conf = like->conf;
	ep->env = like->env;
	ep->is_server = like->is_server;
	ep->adv_r = like->adv_r;
	ep->tc = tp_ctx_ref(like->tc);   /* one more endpoint on it */
	ep->ctx = like->ctx;
	return ep_attach(ep, l, ops);
}

static void ep_detach_here(void *arg)
{
	struct tp_ep *ep = arg;

	rr_lock(&ep->evq_lock);
	ep->detached = true;
	rr_loop_task_cancel(ep->loop, &ep->kick);
	rr_unlock(&ep->evq_lock);
	if (ep->timer_ok)
		rr_loop_timer_fini(ep->loop, &ep->timer);
	ep->timer_ok = false;
}

void tp_ep_detach(struct tp_ep *ep)
{
	if (!ep->loop)
		return;
	rr_lock(&ep->lock);
	ep->stop = true;
	rr_unlock(&ep->lock);
	rr_engine_call(ep->loop, ep_detach_here, ep);
}

void tp_ep_fini(struct tp_ep *ep)
{
	struct tp_ev *e;

	if (ep->loop) {
		/* events handed and never taken */
		while ((e = tp_ep_take_events(ep))) {
			while (e) {
				struct tp_ev *nx = e->next;

				if (e->ev.type == RPCRDMA_CM_CONNECT_REQUEST && e->ev.id) {
					(void)rpcrdma_reject(e->ev.id, NULL, 0);
					(void)rpcrdma_cm_id_destroy(e->ev.id);
				}
				tp_ev_free(ep, e);
				e = nx;
			}
		}
		if (ep->timer_ok)
			rr_loop_timer_fini(ep->loop, &ep->timer);
	}
	tp_port_put(ep->port);
	ep->port = NULL;
	tp_ctx_put(ep->tc);
	ep->tc = NULL;
	ep->ctx = NULL;
}

/* An absolute CLOCK_MONOTONIC deadline @ms from now (rr_engine_deadline). */
void tp_abs_deadline(struct timespec *ts, uint32_t ms)
{
	rr_engine_deadline(ts, ms);
}

struct rr_pd_local tp_local_pd(const struct tp_ep *ep)
{
	struct rr_pd_local l = {ep->conf.inline_send, ep->conf.inline_recv, ep->adv_r,
				ep->conf.ext_caps};

	return l;
}

int tp_encode_pd(const struct tp_ep *ep, uint32_t drop, uint8_t *buf, size_t cap)
{
	struct rr_pd_local l = tp_local_pd(ep);

	l.ext_caps &= ~drop;
	return rr_pd_encode(&l, buf, cap);
}

void tp_sess_config(const struct tp_ep *ep, struct rr_conn_config *cfg)
{
	const struct rr_tp_conf *cf = &ep->conf;

	memset(cfg, 0, sizeof(*cfg));
	cfg->role = ep->is_server ? RR_CONN_RESPONDER : RR_CONN_REQUESTER;
	cfg->env = ep->env;
	cfg->clock = cf->rrep_clock ? cf->rrep_clock : ep->env;
	cfg->stats = (struct rr_xprt_stats *)&ep->stats;
	cfg->local = tp_local_pd(ep);
	cfg->credits = cf->credits;
	cfg->max_seg_len = cf->max_seg_len;
	cfg->max_segs = cf->max_segs;
	cfg->max_call = cf->max_call;
	cfg->inline_ddp = cf->inline_ddp;
	cfg->use_windows = cf->use_windows;
	cfg->send_size = cf->inline_send;
	cfg->recv_size = cf->inline_recv;
	cfg->rrep_max = cf->rrep_max;
	cfg->rrep_timeout_ns = (uint64_t)cf->rrep_timeout_ms * 1000000u;
	cfg->reply_mem_per_conn = cf->reply_mem_per_conn;
	cfg->reply_mem_total = cf->reply_mem_total;
	cfg->send_timeout_ns = (uint64_t)cf->send_timeout_ms * 1000000u;
	cfg->bc_slots = cf->bc_slots;
	if (ep->is_server) {
		/* shared by the server's shards (atomics in the session) */
		struct rr_tp_server *s = tp_shard_of((struct tp_ep *)(uintptr_t)ep)->srv;

		cfg->reply_mem_total_used = &s->rrep_bytes;
		cfg->failed = &s->failed;
	}
}

