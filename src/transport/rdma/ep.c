/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's endpoint (transport/rdma/tp.h), what a client and a
 * server share: the configuration and its inline-threshold policy, the
 * provider context and CM channel, what we advertise in the private data
 * (RFC 8797 and the extension block, proto/conn/privdata.h), the session
 * configuration derived from it, the progress thread's start, stop and
 * wake-up. */
#include "transport/rdma/tp_int.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

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

void tp_wake(struct tp_ep *ep)
{
	uint64_t one = 1;

	if (write(ep->evfd, &one, sizeof(one)) < 0) {
		/* eventfd saturated: the thread is awake anyway */
	}
	/* A server's progress thread may sleep in its one connection's CQ
	 * (tp_progress): the interrupt latch ends that wait, or the next. */
	if (ep->is_server && ep->ctx)
		(void)rr_context_interrupt(ep->ctx);
}

bool tp_on_progress_thread(const struct tp_ep *ep)
{
	return ep->thread_started && pthread_equal(pthread_self(), ep->thread);
}

struct rr_pd_local tp_local_pd(const struct tp_ep *ep)
{
	struct rr_pd_local l = {ep->conf.inline_send, ep->conf.inline_recv, ep->adv_r,
				ep->conf.ext_caps};

	return l;
}

int tp_encode_pd(const struct tp_ep *ep, uint8_t *buf, size_t cap)
{
	struct rr_pd_local l = tp_local_pd(ep);

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
		struct rr_tp_server *s = (struct rr_tp_server *)(uintptr_t)ep;

		cfg->reply_mem_total_used = &s->rrep_bytes;
		cfg->failed = &s->failed;
	}
}

int tp_ep_init(struct tp_ep *ep, const struct rr_tp_conf *conf, bool server,
		   const struct sockaddr *addr)
{
	struct rpcrdma_open_attr oa = {0};
	int rc;

	ep->conf = *conf;
	ep->env = rr_env(conf->env);
	ep->is_server = server;
	ep->evfd = -1;
	if (ep->conf.credits == 0)
		ep->conf.credits = 1;
	rr_tp_conf_inline(&ep->conf, conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT,
			  server);
	if (ep->conf.inline_send < 1024 || ep->conf.inline_recv < 1024)
		return -EINVAL;
	oa.env = conf->env;
	oa.device = conf->device;
	oa.addr = addr;
	oa.passive = server;
	oa.spin_us = conf->spin_us;
	rc = rpcrdma_open(conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT, &oa, &ep->ctx);
	if (rc)
		return rc;
	/* The server loop handles waits that end early (ep_wake): using the
	 * interrupt once (no CQ yet: nothing latched) lets the provider end
	 * them on CM events too (soft: a second client's request). */
	if (server)
		(void)rr_context_interrupt(ep->ctx);
	rc = rpcrdma_cm_channel_create(ep->ctx, &ep->ch);
	if (rc)
		return rc;
	{
		struct rpcrdma_caps caps;

		/* R tells the peer it may invalidate our STags: a requester can
		 * honour it only with invalidatable registrations. */
		ep->adv_r = ep->conf.remote_inv;
		if (!server && (!ep->conf.use_windows || rpcrdma_query(ep->ctx, &caps) ||
				!(caps.flags & RPCRDMA_CAP_INVALIDATABLE)))
			ep->adv_r = false;
		/* Never advertise RDMA Commit the provider cannot carry (verbs
		 * without FLUSH): persistence (Commit + durable registrations)
		 * or global visibility (FLUSH global). */
		if (rpcrdma_query(ep->ctx, &caps) ||
		    !((caps.flags & RPCRDMA_CAP_COMMIT && caps.flags & RPCRDMA_CAP_DURABLE) ||
		      caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE))
			ep->conf.ext_caps &= ~RR_PD_EXT_CAP_RDMA_COMMIT;
		/* A responder exposing Read chunks (reliable reply) can honour
		 * R only with invalidatable registrations too. */
		if (server && (ep->conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) &&
		    (!ep->conf.use_windows || rpcrdma_query(ep->ctx, &caps) ||
		     !(caps.flags & RPCRDMA_CAP_INVALIDATABLE)))
			ep->adv_r = false;
	}
	ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->evfd < 0)
		return -errno;
	pthread_mutex_init(&ep->lock, NULL);
	pthread_cond_init(&ep->cond, NULL);
	return 0;
}

int tp_ep_start(struct tp_ep *ep, void *(*loop)(void *))
{
	if (pthread_create(&ep->thread, NULL, loop, ep))
		return -EAGAIN;
	ep->thread_started = true;
	return 0;
}

void tp_ep_stop(struct tp_ep *ep)
{
	if (ep->thread_started) {
		pthread_mutex_lock(&ep->lock);
		ep->stop = true;
		pthread_mutex_unlock(&ep->lock);
		tp_wake(ep);
		pthread_join(ep->thread, NULL);
		ep->thread_started = false;
	}
}

void tp_ep_fini(struct tp_ep *ep)
{
	if (ep->ch)
		(void)rpcrdma_cm_channel_destroy(ep->ch);
	if (ep->ctx)
		(void)rpcrdma_close(ep->ctx);
	if (ep->evfd >= 0) {
		close(ep->evfd);
		pthread_mutex_destroy(&ep->lock);
		pthread_cond_destroy(&ep->cond);
	}
}

void tp_abs_deadline(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

