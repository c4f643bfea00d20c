/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's server (responder side of transport/rdma/tp.h): it
 * listens on one progress loop (its connections' admission and setup:
 * server_conns.c) and serves its connections on every loop of the engine,
 * one shard per loop, each connection on the shard it was given
 * round-robin: its completions, CM events, timers and upcalls are handled
 * there under the shard's lock, independently of the other shards. It
 * offers the request API: reply (synchronous or not; Replies answered on
 * the loop are posted as one chain after the batch of upcalls), refuse,
 * done. Every protocol decision is the session's. */
#include "transport/rdma/tp_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>

/* A shard's ticks: session timers (stalled Sends, reliable-reply expiry),
 * the idle sweep, memory trimming, while it has connections. */
#define SV_TICK_NS 100000000ull
/* Turns come with every kick (a CM event, a request done on a dead
 * connection...): the walk over every connection's timers runs at most
 * this often, not once per kick (with 1,000 connections each new one's
 * events cost 1,000 session ticks otherwise). */
#define SV_TIMERS_NS 10000000ull

/* Waits on the shard's cond (lock held; @ts NULL: no deadline), counted
 * (tp_ep.cond_waits): every wait on a shard's cond goes through here, so
 * that the last unpin of a busy shard skips the wake-up when nobody
 * waits (tp_ep_unpin). */
static int sv_wait(struct tp_shard *sh, const struct timespec *ts)
{
	int rc;

	sh->ep.cond_waits++;
	rc = rr_engine_cond_wait(&sh->ep.cond, &sh->ep.lock, ts);
	sh->ep.cond_waits--;
	return rc;
}

/* Received Calls to the upper layer, without the shard's lock: the queue
 * is taken whole and delivered in one release of the lock (one lock pair
 * per batch of Calls, not per Call: a drain at 100 active connections
 * brings about five), in the order received; Calls queued meanwhile make
 * another batch. Nothing else looks at the queue (s_deliver appends).
 * Inlined in its two callers (sv_after's, once per batch, is most of a
 * synchronous caller's: an empty queue costs a compare, not a call). */
static inline __attribute__((always_inline)) void sv_deliver(struct tp_shard *sh)
{
	struct rr_tp_server *s = sh->srv;

	while (sh->deliver) {
		struct rr_conn_sreq *r = sh->deliver;

		sh->deliver = NULL;
		sh->deliver_tail = &sh->deliver;
		sh->ep.stats.deliver_batches++;
		rr_unlock(&sh->ep.lock);
		while (r) {
			struct rr_conn_sreq *nx = r->xnext;

			r->xnext = NULL;
			s->recv(s->rctx, r);
			r = nx;
		}
		rr_lock(&sh->ep.lock);
	}
}

/* After completions of the shard's connections were fed in (lock held):
 * the Calls to the upper layer (inline handlers answer them here, their
 * Replies deferred), then the Replies posted as one chain per connection
 * and the sent upcalls. The CQ is armed and looked at once more by the
 * caller (progress.c), so the completions of those Sends need no
 * notification. */
static void sv_after(struct tp_ep *ep)
{
	struct tp_shard *sh = tp_shard_of(ep);

	sv_deliver(sh);
	tp_sv_after_upcalls(sh);
}

/* The shard's turn (kicked, or its tick): CM events of its connections,
 * their timers, the upcalls, the idle sweep, dead connections freed. */
static void sv_turn(struct tp_ep *ep)
{
	struct tp_shard *sh = tp_shard_of(ep);

	uint64_t now = rr_now_ns(NULL);
	bool lost;

	tp_ep_handle_events(ep);
	rr_lock(&ep->evq_lock);
	lost = ep->cm_lost;   /* its connection ends now, not at the next walk */
	ep->cm_lost = false;
	rr_unlock(&ep->evq_lock);
	if (now >= sh->timers_ns || lost) {
		/* one clock read and one wake-up of the shard's waiters per
		 * walk, not per connection (100 of each per tick at 100
		 * connections; the walk takes microseconds, far below any
		 * timeout it serves) */
		uint64_t tnow = tp_sv_clock(sh);

		sh->timers_ns = now + SV_TIMERS_NS;
		for (struct tp_conn *cn = sh->conns, *nx; cn; cn = nx) {
			nx = cn->next;
			cn->refs++;
			tp_sv_timers(sh, cn, tnow);
			tp_sv_conn_put(sh, cn);
		}
		rr_cond_broadcast(&sh->ep.cond);
	}
	sv_deliver(sh);
	tp_sv_after_upcalls(sh);
	tp_sv_idle_sweep(sh);
	tp_grave_sweep(ep);
	rr_mem_trim_tick();
	if ((sh->conns || sh->ep.grave || sh->pool) && ep->timer_ok)   /* (a pool retires) */
		rr_loop_timer_set(ep->loop, &ep->timer, rr_now_ns(NULL) + SV_TICK_NS);
}

/* A connection's ESTABLISHED waits for the shard's next turn (its tick
 * at the latest, armed while it has connections): the kick woke the
 * shard's thread between the MPA Reply and the first Call, for nothing
 * the Call needs (issue 16 part Y). */
static const struct tp_ep_ops sv_shard_ops = {.on_cm = tp_sv_on_cm, .after = sv_after,
					       .turn = sv_turn, .lazy_established = true};

static int listen_port(struct rpcrdma_cm_id *id)
{
	struct sockaddr_storage ss;

	if (rpcrdma_cm_local_addr(id, &ss))
		return -EINVAL;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

/* One shard per loop of the engine. */
static int make_shards(struct rr_tp_server *s)
{
	unsigned n = rr_engine_nloops();

	s->shards = rr_zalloc(s->ep.env, sizeof(*s->shards) * (n ? n : 1));
	if (!s->shards)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct tp_shard *sh = rr_zalloc(s->ep.env, sizeof(*sh));
		int rc;

		if (!sh)
			return -ENOMEM;
		sh->srv = s;
		sh->ep.waits_counted = true;   /* sv_wait */
		sh->deliver_tail = &sh->deliver;
		sh->sent_tail = &sh->sent_head;
		sh->bc_done_tail = &sh->bc_done;
		s->shards[s->nshards++] = sh;
		rc = tp_ep_init_like(&sh->ep, &s->ep, rr_engine_loop(i), &sv_shard_ops);
		if (rc)
			return rc;
	}
	return 0;
}

/* The test hook of destroy (tp.h), called with the shard's lock held: it
 * runs without it. */
static void destroy_hook(struct tp_shard *sh, int phase)
{
	struct rr_tp_server *s = sh->srv;
	unsigned i = 0;

	if (!s->destroy_hook)
		return;
	while (i < s->nshards && s->shards[i] != sh)
		i++;
	rr_unlock(&sh->ep.lock);
	s->destroy_hook(s->destroy_hook_arg, phase, i);
	rr_lock(&sh->ep.lock);
}

/* Takes the shard's connections down and frees it (no API call comes any
 * more; the listener is gone). */
static void shard_free(struct tp_shard *sh)
{
	const struct rpcrdma_env *env = sh->ep.env;

	if (sh->ep.loop) {
		rr_lock(&sh->ep.lock);
		sh->ep.stop = true;
		sh->ep.deferred = NULL;
		/* Replies still waiting for their Send completion (the RPC
		 * layer waits for them before it destroys; a direct caller
		 * may not): told -ENOTCONN now. */
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next) {
			cn->dead = true;
			rr_conn_down(cn->sess);
			tp_cq_want(cn, false);
		}
		/* An upcall the loop runs now (a sent upcall calling
		 * rr_tp_server_done, a handler answering) still uses its
		 * request and connection: it returns before they go. */
		destroy_hook(sh, RR_TP_DESTROY_WAIT_LOOP);
		tp_ep_quiesce(&sh->ep);
		tp_sv_sent_upcalls(sh);
		tp_sv_bc_upcalls(sh);
		while (sh->conns || sh->ep.grave) {
			struct tp_conn *cn = sh->conns ? sh->conns : sh->ep.grave;

			if (cn == sh->conns)
				sh->conns = cn->next;
			else
				sh->ep.grave = cn->next;
			cn->lent = 0;
			rr_unlock(&sh->ep.lock);
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
			tp_conn_release(cn);
			rr_lock(&sh->ep.lock);
		}
		destroy_hook(sh, RR_TP_DESTROY_RELEASED);
		while (sh->ep.pins)
			(void)sv_wait(sh, NULL);
		rr_unlock(&sh->ep.lock);
		tp_ep_detach(&sh->ep);
	}
	tp_pool_destroy(sh->pool);   /* after every connection that used it */
	sh->pool = NULL;
	rr_conn_spares_drain(&sh->spares, env);   /* the same */
	tp_ep_fini(&sh->ep);
	rr_free(env, sh);
}

static void server_free(struct rr_tp_server *s)
{
	const struct rpcrdma_env *env = s->ep.env;

	for (unsigned i = 0; i < s->nshards; i++)
		shard_free(s->shards[i]);
	rr_free(env, s->shards);
	if (s->ep.loop)
		tp_ep_detach(&s->ep);
	tp_ep_fini(&s->ep);
	rr_free(env, s);
}

/* The listening socket is readable (on the listener's loop): the
 * connections are accepted and their MPA Requests read here, and the
 * CONNECT_REQUESTs that makes are handled in this same turn of the loop
 * (tp_ev_hand posts the listener's turn on its own runner: no wake-up),
 * where the soft provider's thread used to accept and wake this loop
 * through the channel. The channel is kept quiet meanwhile: the
 * CONNECT_REQUESTs are read right after (no eventfd written and read back
 * per request: issue 16 part AZ). */
static void listen_ready(struct rr_loop_src *src, uint32_t events)
{
	struct rr_tp_server *s = RR_CONTAINER_OF(src, struct rr_tp_server, lsrc);
	bool quiet;

	(void)events;
	rr_lock(&s->ep.lock);
	if (!s->ldriven || !s->listen_id) {
		rr_unlock(&s->ep.lock);
		return;
	}
	quiet = tp_port_quiet_begin(s->ep.port);
	if (rr_cm_listen_drive(s->listen_id) != 0) {
		/* accepting paused: the provider's thread has it now */
		rr_loop_del(s->ep.loop, &s->lsrc);
		s->ldriven = false;
	}
	rr_unlock(&s->ep.lock);
	tp_port_quiet_end(s->ep.port, quiet);
}

/* The listener's loop watches the listening socket itself when the
 * provider lets it (rr_cm_listen_driven; not verbs://). */
static void listen_drive_start(struct rr_tp_server *s)
{
	int fd = rr_cm_listen_driven(s->listen_id, true);

	if (fd < 0)
		return;
	rr_lock(&s->ep.lock);
	s->ldriven = rr_loop_add(s->ep.loop, &s->lsrc, fd, EPOLLIN, listen_ready) == 0;
	rr_unlock(&s->ep.lock);
	if (!s->ldriven)
		(void)rr_cm_listen_driven(s->listen_id, false);
}

/* On the listener's loop: it stops watching the listening socket (before
 * the socket is closed: no readiness of it reaches a freed server). */
static void listen_drive_stop_here(void *arg)
{
	struct rr_tp_server *s = arg;

	rr_lock(&s->ep.lock);
	if (s->ldriven) {
		rr_loop_del(s->ep.loop, &s->lsrc);
		s->ldriven = false;
	}
	rr_unlock(&s->ep.lock);
}

static void listen_drive_stop(struct rr_tp_server *s)
{
	bool on;

	rr_lock(&s->ep.lock);
	on = s->ldriven;
	rr_unlock(&s->ep.lock);
	if (on)
		rr_engine_call(s->ep.loop, listen_drive_stop_here, s);
}

int rr_tp_server_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_recv_fn recv, void *ctx,
			struct rr_tp_server **out)
{
	const struct rpcrdma_env *env = rr_env(conf->env);
	struct rr_tp_server *s;
	int rc;

	*out = NULL;
	if (!recv)
		return -EINVAL;
	s = rr_zalloc(env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->io = tp_server_io;
	s->recv = recv;
	s->rctx = ctx;
	s->lconn.ep = &s->ep;
	rc = tp_ep_init(&s->ep, conf, true, addr, NULL, &tp_listener_ops);
	if (rc == 0)
		rc = make_shards(s);
	if (rc == 0) {
		pthread_mutex_lock(&s->ep.port->cm_lock);
		rc = rpcrdma_listen(s->ep.port->ch, addr, addrlen, RR_LISTEN_BACKLOG, &s->lconn,
				    &s->listen_id);
		pthread_mutex_unlock(&s->ep.port->cm_lock);
	}
	if (rc == 0) {
		/* half-open connections: the provider's (rdma_cm leaves them
		 * to the kernel: -EOPNOTSUPP) */
		struct rr_listen_limits lim = {.max_handshakes = conf->max_handshakes,
					       .no_defer_accept = conf->no_defer_accept};

		rc = rr_cm_listen_limits(s->listen_id, &lim);
		if (rc == -EOPNOTSUPP)
			rc = 0;
	}
	if (rc == 0) {
		s->port = listen_port(s->listen_id);
		rc = s->port < 0 ? s->port : 0;
	}
	if (rc) {
		if (s->listen_id) {
			pthread_mutex_lock(&s->ep.port->cm_lock);
			(void)rpcrdma_cm_id_destroy(s->listen_id);
			pthread_mutex_unlock(&s->ep.port->cm_lock);
		}
		server_free(s);
		return rc;
	}
	listen_drive_start(s);
	*out = s;
	return 0;
}

int rr_tp_server_port(struct rr_tp_server *s)
{
	return s->port;
}

/* Closes the listening socket and drops the requests not consumed yet:
 * new connections are refused from now on (listener's lock held). */
static void unlisten(struct rr_tp_server *s)
{
	if (!s->listen_id)
		return;
	(void)rr_cm_listen_stats(s->listen_id, &s->lstats_gone);
	pthread_mutex_lock(&s->ep.port->cm_lock);
	(void)rpcrdma_cm_id_destroy(s->listen_id);
	pthread_mutex_unlock(&s->ep.port->cm_lock);
	s->listen_id = NULL;
}

void rr_tp_server_stop(struct rr_tp_server *s)
{
	listen_drive_stop(s);
	rr_lock(&s->ep.lock);
	atomic_store(&s->stopping, true);
	unlisten(s);
	rr_unlock(&s->ep.lock);
}

static struct tp_conn *conn_of(struct rr_conn_sreq *r)
{
	return r->xconn;
}

static struct tp_shard *shard_of(struct tp_conn *cn)
{
	return tp_shard_of(cn->ep);
}

/* The session asked to end @cn during an API call: end it now. */
static void settle(struct tp_shard *sh, struct tp_conn *cn)
{
	if (cn->closing && !cn->dead)
		tp_sv_conn_lost(sh, cn);
}

/* A Reply of a pooled connection parked (waiting for a free Receive for
 * its RDMA_DONE): the end of its loop's turn looks for it. Returns whether
 * it parked. */
static bool note_parked(struct tp_shard *sh, struct tp_conn *cn, int rc)
{
	if (rc != 1 || !cn->pool || !rr_conn_parked(cn->sess))
		return false;
	sh->parked = true;
	return true;
}

/* Answered on the connection's loop (inline dispatch): the loop does not
 * drain while this handler runs, so consume the CQ here until the Writes
 * and the Send completed (the Replies of others that come meanwhile go to
 * their shards; this shard's own after-work is its caller's). Lock held. */
static void wait_sent_here(struct tp_shard *sh, struct tp_conn *cn, struct rr_conn_sreq *r)
{
	while (!r->xsent_done && !cn->dead && cn->tcq) {
		struct tp_cq *q = cn->tcq;
		struct tp_ep *t = NULL;
		struct pollfd pfd;

		if (!tp_cq_claim(q, TP_CQ_LOOP)) {
			struct timespec ts;

			tp_abs_deadline(&ts, 10);
			(void)sv_wait(sh, &ts);
			continue;
		}
		rr_unlock(&sh->ep.lock);
		(void)rpcrdma_cq_get_event(q->cq);
		(void)tp_cq_arm_drain(q, &t);
		tp_cq_release(q);
		tp_touched_after(t, &sh->ep);
		rr_lock(&sh->ep.lock);
		settle(sh, cn);
		if (r->xsent_done || cn->dead)
			break;
		if (atomic_load(&q->err)) {
			/* its CQ failed (tp_cq_failed): the DISCONNECTED handed
			 * to this loop would come after this wait, never */
			tp_sv_conn_lost(sh, cn);
			break;
		}
		if (cn->pool && sh->parked) {
			/* a Read-chunk Reply waits for a free Receive: the
			 * loop that would post more is this one */
			tp_sv_pools_refill(sh);
			settle(sh, cn);
			if (r->xsent_done || cn->dead)
				break;
		}
		pfd = (struct pollfd){rpcrdma_cq_fd(q->cq), POLLIN, 0};
		rr_unlock(&sh->ep.lock);
		(void)poll(&pfd, 1, 10);
		rr_lock(&sh->ep.lock);
	}
}

int rr_tp_server_reply(struct rr_tp_server *s, struct rr_conn_sreq *r,
		       const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk)
{
	struct tp_conn *cn = conn_of(r);
	struct tp_shard *sh = shard_of(cn);
	int rc;

	(void)s;
	rr_lock(&sh->ep.lock);
	r->xsent = NULL;
	r->xsent_done = false;
	rc = cn->dead ? -ENOTCONN : rr_conn_reply(cn->sess, r, parts, nparts, err_chunk);
	note_parked(sh, cn, rc);
	settle(sh, cn);
	if (rc <= 0) {
		rr_unlock(&sh->ep.lock);
		return rc;
	}
	if (tp_on_progress_thread(&sh->ep)) {
		wait_sent_here(sh, cn, r);
	} else {
		/* the CQ is watched and armed: its loop brings the completion
		 * (and, parked, posts the Receives that let it go) */
		if (sh->parked)
			tp_ep_kick(&sh->ep);
		while (!r->xsent_done && !cn->dead)
			(void)sv_wait(sh, NULL);
	}
	rc = r->xsent_done ? r->xsent_status : -ENOTCONN;
	rr_unlock(&sh->ep.lock);
	return rc;
}

/* rr_tp_server_done's work (the endpoint's lock held). */
static void done_locked(struct tp_shard *sh, struct tp_conn *cn, struct rr_conn_sreq *r)
{
	r->xsent = NULL;
	(void)rr_conn_done(cn->sess, r);
	/* a dead connection waits for its last request: its loop frees it */
	if (cn->dead && !rr_conn_in_progress(cn->sess) && !tp_on_progress_thread(&sh->ep))
		tp_ep_kick(&sh->ep);
}

/* rr_tp_server_reply_async, and with @finish rr_tp_server_done too when
 * the Reply left nothing referenced (0): one hold of the lock. Inlined in
 * both (a NULL Call's Reply: one call less, @finish a constant). */
static inline __attribute__((always_inline)) int reply_async(struct rr_conn_sreq *r, const struct rr_xprt_part *parts,
		       unsigned nparts, bool *err_chunk, rr_tp_sent_fn sent, void *arg,
		       bool finish)
{
	struct tp_conn *cn = conn_of(r);
	struct tp_shard *sh = shard_of(cn);
	int rc;

	if (!sent)
		return -EINVAL;
	rr_lock(&sh->ep.lock);
	/* The loop drains the completion: every connection's CQ is watched
	 * and armed, so no wake-up is needed. */
	r->xsent = sent;
	r->xsent_arg = arg;
	r->xsent_done = false;
	sh->ep.defer = tp_on_progress_thread(&sh->ep);
	rc = cn->dead ? -ENOTCONN : rr_conn_reply(cn->sess, r, parts, nparts, err_chunk);
	sh->ep.defer = false;
	if (rc != 1)
		r->xsent = NULL;
	else if (note_parked(sh, cn, rc) && !tp_on_progress_thread(&sh->ep))
		tp_ep_kick(&sh->ep);   /* parked: its loop posts Receives, resumes it */
	settle(sh, cn);
	if (rc == 0 && finish)
		done_locked(sh, cn, r);
	rr_unlock(&sh->ep.lock);
	return rc;
}

int rr_tp_server_reply_async(struct rr_tp_server *s, struct rr_conn_sreq *r,
			     const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk,
			     rr_tp_sent_fn sent, void *arg)
{
	(void)s;
	return reply_async(r, parts, nparts, err_chunk, sent, arg, false);
}

int rr_tp_server_reply_done(struct rr_tp_server *s, struct rr_conn_sreq *r,
			    const struct rr_xprt_part *parts, unsigned nparts,
			    rr_tp_sent_fn sent, void *arg)
{
	(void)s;
	return reply_async(r, parts, nparts, NULL, sent, arg, true);
}

void rr_tp_server_refuse(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = conn_of(r);
	struct tp_shard *sh = shard_of(cn);

	(void)s;
	rr_lock(&sh->ep.lock);
	if (!cn->dead)
		rr_conn_refuse(cn->sess, r);
	settle(sh, cn);
	rr_unlock(&sh->ep.lock);
}

void rr_tp_server_done(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = conn_of(r);
	struct tp_shard *sh = shard_of(cn);

	(void)s;
	rr_lock(&sh->ep.lock);
	done_locked(sh, cn, r);
	rr_unlock(&sh->ep.lock);
}

void rr_tp_server_destroy(struct rr_tp_server *s)
{
	if (!s)
		return;
	listen_drive_stop(s);
	rr_lock(&s->ep.lock);
	atomic_store(&s->stopping, true);
	unlisten(s);
	rr_unlock(&s->ep.lock);
	/* the listener's loop sets nothing up any more */
	tp_ep_detach(&s->ep);
	server_free(s);
}

/* @a += @b for every counter. */
static void stats_add(struct rr_xprt_stats *a, const struct rr_xprt_stats *b)
{
#define ADD_(group, name, what) a->name += b->name;
	RPCRDMA_XPRT_STATS(ADD_)
#undef ADD_
}

void rr_tp_server_stats(struct rr_tp_server *s, struct rr_xprt_stats *out)
{
	struct rr_listen_stats ls;

	rr_lock(&s->ep.lock);
	*out = s->ep.stats;
	ls = s->lstats_gone;
	if (s->listen_id)
		(void)rr_cm_listen_stats(s->listen_id, &ls);
	rr_unlock(&s->ep.lock);
	for (unsigned i = 0; i < s->nshards; i++) {
		struct tp_shard *sh = s->shards[i];

		rr_lock(&sh->ep.lock);
		stats_add(out, &sh->ep.stats);
		rr_unlock(&sh->ep.lock);
		tp_fault_fold(&sh->ep, out);
	}
	tp_fault_fold(&s->ep, out);
	out->accept_backoffs = ls.accept_backoffs;
	out->handshakes_dropped = ls.handshakes_dropped;
}

unsigned rr_tp_server_conns(struct rr_tp_server *s)
{
	return atomic_load(&s->nconns);
}

uint32_t rr_tp_server_rrep_live(struct rr_tp_server *s)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < s->nshards; i++) {
		struct tp_shard *sh = s->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next)
			n += rr_conn_rrep_live(cn->sess);
		for (struct tp_conn *cn = sh->ep.grave; cn; cn = cn->next)
			if (cn->sess)
				n += rr_conn_rrep_live(cn->sess);
		rr_unlock(&sh->ep.lock);
	}
	return n;
}

uint32_t rr_tp_server_rrep_waiting(struct rr_tp_server *s)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < s->nshards; i++) {
		struct tp_shard *sh = s->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next)
			n += rr_conn_rrep_waiting(cn->sess);
		rr_unlock(&sh->ep.lock);
	}
	return n;
}

void rr_tp_server_destroy_hook(struct rr_tp_server *s, rr_tp_destroy_hook_fn fn, void *arg)
{
	s->destroy_hook = fn;
	s->destroy_hook_arg = arg;
}

unsigned rr_tp_server_listen_loop(struct rr_tp_server *s)
{
	unsigned i = 0;

	while (i < rr_engine_nloops() && rr_engine_loop(i) != s->ep.loop)
		i++;
	return i;
}

void rr_tp_server_cut(struct rr_tp_server *s)
{
	for (unsigned i = 0; i < s->nshards; i++) {
		struct tp_shard *sh = s->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn; cn = cn->next)
			if (cn->id && !cn->dead)
				(void)rpcrdma_disconnect(cn->id);
		rr_unlock(&sh->ep.lock);
	}
}

int rr_tp_server_commit_ok(struct rr_tp_server *s, struct rr_conn_sreq *req)
{
	struct tp_conn *cn = conn_of(req);
	struct tp_shard *sh = shard_of(cn);
	int rc;

	(void)s;
	rr_lock(&sh->ep.lock);
	if (cn->dead)
		rc = -ENOTCONN;
	else
		rc = cn->commit ? 0 : -EOPNOTSUPP;
	rr_unlock(&sh->ep.lock);
	return rc;
}

int rr_tp_server_peer_addr(struct rr_tp_server *s, struct rr_conn_sreq *req,
			   struct sockaddr_storage *out)
{
	struct tp_conn *cn = conn_of(req);
	struct tp_shard *sh = shard_of(cn);
	int rc = 0;

	(void)s;
	rr_lock(&sh->ep.lock);
	if (cn->has_peer)
		*out = cn->peer;
	else
		rc = -ENOTCONN;
	rr_unlock(&sh->ep.lock);
	return rc;
}

/* ---- backchannel (RFC 8167): backward Calls on a request's connection ---- */

int rr_tp_server_bc_open(struct rr_tp_server *s, struct rr_conn_sreq *req,
			 rr_tp_complete_fn complete, void *ctx, struct rr_tp_bc **out)
{
	struct tp_conn *cn = conn_of(req);
	struct rr_tp_bc *b;

	if (!complete)
		return -EINVAL;
	if (!s->ep.conf.bc_slots)
		return -EOPNOTSUPP;
	b = rr_zalloc(s->ep.env, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->complete = complete;
	b->ctx = ctx;
	b->sh = shard_of(cn);
	rr_lock(&b->sh->ep.lock);
	if (cn->dead || cn->closing) {
		rr_unlock(&b->sh->ep.lock);
		rr_free(s->ep.env, b);
		return -ENOTCONN;
	}
	b->cn = cn;
	b->next = cn->bcs;
	cn->bcs = b;
	rr_unlock(&b->sh->ep.lock);
	*out = b;
	return 0;
}

int rr_tp_server_bc_submit(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc)
{
	int rc;

	RR_UNUSED(s);
	if (!rpc)
		return -EINVAL;
	/* its Reply comes in on the connection's loop */
	if (rpc->caller_waits && tp_on_progress_thread(&b->sh->ep))
		return -EDEADLK;
	rpc->xbc = b;
	rpc->xdone = false;
	rpc->xnext = NULL;
	rr_lock(&b->sh->ep.lock);
	rc = b->cn && !b->cn->dead ? rr_conn_bc_submit(b->cn->sess, rpc) : -ENOTCONN;
	if (b->cn && b->cn->pool && rr_conn_parked(b->cn->sess)) {
		/* it waits for a free Receive of the pool for its Reply: the
		 * end of the loop's turn refills and resumes it */
		b->sh->parked = true;
		tp_ep_kick(&b->sh->ep);
	}
	if (b->cn)
		settle(b->sh, b->cn);
	rr_unlock(&b->sh->ep.lock);
	return rc;
}

void rr_tp_server_bc_abort(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc,
			   int status)
{
	RR_UNUSED(s);
	rr_lock(&b->sh->ep.lock);
	if (b->cn && !b->cn->dead)
		rr_conn_bc_abort(b->cn->sess, rpc, status);
	rr_unlock(&b->sh->ep.lock);
}

void rr_tp_server_bc_release(struct rr_tp_server *s, struct rr_conn_rpc *rpc)
{
	/* a copy from the endpoint's allocator (rr_conn_bc_submit): it
	 * outlives its connection, no lock needed */
	rr_free(s->ep.env, rpc->reply);
	rpc->reply = NULL;
	rpc->reply_len = 0;
}

void rr_tp_server_bc_close(struct rr_tp_server *s, struct rr_tp_bc *b)
{
	if (!b)
		return;
	rr_lock(&b->sh->ep.lock);
	if (b->cn)
		for (struct rr_tp_bc **pp = &b->cn->bcs; *pp; pp = &(*pp)->next)
			if (*pp == b) {
				*pp = b->next;
				break;
			}
	rr_unlock(&b->sh->ep.lock);
	rr_free(s->ep.env, b);
}
