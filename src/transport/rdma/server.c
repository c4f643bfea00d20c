/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's server (responder side of transport/rdma/tp.h): it
 * listens (its connections, their admission and loss: server_conns.c), runs
 * its progress thread, and offers the request API: reply (synchronous or
 * not; Replies answered on the progress thread are posted as one chain
 * after the batch of upcalls), refuse, done. Every protocol decision is the
 * session's. */
#include "transport/rdma/tp_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>

/* Received Calls to the upper layer, without the endpoint's lock. */
static void sv_deliver(struct rr_tp_server *s)
{
	while (s->deliver) {
		struct rr_conn_sreq *r = s->deliver;

		s->deliver = r->xnext;
		if (!s->deliver)
			s->deliver_tail = &s->deliver;
		r->xnext = NULL;
		pthread_mutex_unlock(&s->ep.lock);
		s->recv(s->rctx, r);
		pthread_mutex_lock(&s->ep.lock);
	}
}

/* One connection: sleep in its CQ (soft: a blocking recvmsg on its
 * socket), one system call per Call where poll + epoll_wait + recvmsg made
 * three. Other threads end the wait through tp_wake (interrupt latch); the
 * CM channel is looked at (no system call when empty) after each wait,
 * which lasts at most SV_CQ_WAIT_MS: a second client's request waits that
 * long at most. Replies posted here complete into the ring, which the next
 * wait looks at first: no arm. Idle for SV_IDLE_WAITS slices (~200 ms), the
 * loop goes back to poll(2) over every fd, which sleeps until something
 * happens (at most 100 ms): an idle server does not wake 200 times a
 * second; the first Call after the pause brings the slices back. Returns
 * false when the one-connection wait does not apply. */
static bool server_one(struct rr_tp_server *s)
{
	enum { SV_CQ_WAIT_MS = 5, SV_IDLE_WAITS = 40 };
	struct tp_ep *ep = &s->ep;
	struct tp_conn *one = s->conns;
	struct rpcrdma_wc wc[32];
	int got;

	if (!one || one->next || !one->established || one->dead || s->deliver ||
	    s->idle_waits >= SV_IDLE_WAITS || !rr_context_can_interrupt(ep->ctx))
		return false;
	one->refs++;
	one->armed = false; /* waited on, not armed */
	pthread_mutex_unlock(&ep->lock);
	got = rpcrdma_cq_wait(one->cq, (int)RR_ARRAY_SIZE(wc), wc, SV_CQ_WAIT_MS);
	pthread_mutex_lock(&ep->lock);
	s->idle_waits = got > 0 ? 0 : s->idle_waits + 1;
	for (int i = 0; i < got; i++)
		tp_on_wc(one, &wc[i]);
	tp_sv_cm_turn(s);
	tp_sv_timers(s, one);
	sv_deliver(s);
	/* Replies answered on this thread: post them (one batch) and run
	 * their sent upcalls. */
	tp_sv_after_upcalls(s);
	tp_sv_conn_put(s, one);
	tp_sv_idle_sweep(s);
	tp_grave_sweep(ep);
	rr_mem_trim_tick();
	return true;
}

/* The poll(2) set of a turn: the eventfd, the CM channel, the CQs to
 * watch (*@ncn of them in @cns); the timeout in *@timeout. */
static unsigned gather(struct rr_tp_server *s, struct pollfd *pfd, struct tp_conn **cns,
		       unsigned cap, unsigned *ncn, int *timeout)
{
	struct tp_ep *ep = &s->ep;
	bool unarmed = false;
	unsigned n = 0;

	*ncn = 0;
	pfd[n++] = (struct pollfd){ep->evfd, POLLIN, 0};
	pfd[n++] = (struct pollfd){rpcrdma_cm_channel_fd(ep->ch), POLLIN, 0};
	/* beyond @cap (an allocation failed): served on every turn, woken by
	 * the others or the 100 ms timeout */
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next) {
		cn->in_set = *ncn < cap;
		if (cn->in_set)
			cns[(*ncn)++] = cn;
		unarmed |= !cn->armed && !cn->dead;
	}
	if (unarmed)
		*timeout = 0; /* served at once, then armed */
	for (unsigned i = 0; i < *ncn; i++)
		pfd[n++] = (struct pollfd){rpcrdma_cq_fd(cns[i]->cq), POLLIN, 0};
	return n;
}

/* Serve the CQs whose fd woke the poll, and connections that came after
 * the fds were gathered; the others stay armed from their last turn (a CQ
 * is armed again, below, every time it is served), so nothing is missed,
 * and an idle connection costs no system call per Call of another one (on
 * soft a poll looks at the socket: one recv each). Served: its fd woke the
 * poll; or it is not in the set (accepted meanwhile, or beyond it); or the
 * loop has not armed it since it last served it (new, or waited on
 * directly): its completions could come with no notification. cns[] entries
 * stay valid for the turn (a dropped connection is freed by the sweep). */
static void serve_server(struct rr_tp_server *s, const struct pollfd *pfd, struct tp_conn **cns,
			 unsigned ncn)
{
	struct tp_ep *ep = &s->ep;
	struct tp_conn *cn, *nx;

	for (cn = s->conns; cn; cn = cn->next)
		cn->serve = !cn->armed || !cn->in_set;
	for (unsigned i = 0; i < ncn; i++)
		if (pfd[i + 2].revents)
			cns[i]->serve = true;
	for (cn = s->conns; cn; cn = nx) {
		nx = cn->next;
		cn->refs++;
		if (cn->serve) {
			(void)rpcrdma_cq_get_event(cn->cq);
			tp_drain_cq(ep, cn);
		}
		tp_sv_timers(s, cn);
		tp_sv_conn_put(s, cn);
	}
	/* Calls answered on this thread post their Sends now: arm only after
	 * them, then look once more, so that those completions need no
	 * notification (and no extra wake-up) while none is lost. */
	sv_deliver(s);
	for (cn = s->conns; cn; cn = cn->next)
		tp_post_deferred(cn);
	for (cn = s->conns; cn; cn = nx) {
		nx = cn->next;
		if (!cn->serve)
			continue;
		cn->refs++;
		cn->armed = tp_arm_drain(ep, cn);
		tp_sv_timers(s, cn);
		tp_sv_conn_put(s, cn);
	}
}

/* The server's progress thread: it sleeps in poll(2) over the wake-up
 * eventfd, the CM channel and the CQs of its connections (with one
 * connection, in that connection's CQ instead: server_one), feeds CM
 * events and completions to the sessions, runs their timers, delivers the
 * received Calls to the upper layer without the endpoint's lock, then
 * posts the Replies answered meanwhile and runs their sent upcalls. */
static void *sv_progress(void *arg)
{
	struct rr_tp_server *s = arg;
	struct tp_ep *ep = &s->ep;

	pthread_setname_np(pthread_self(), "rr-rdma-srv");   /* top -H, gdb, perf */
	pthread_mutex_lock(&ep->lock);
	while (!ep->stop) {
		struct pollfd pfd_one[3], *pfd = pfd_one;
		struct tp_conn *cns_one[1], **cns = cns_one;
		unsigned n, ncn, cap = 1;
		int timeout = 100;

		if (server_one(s))
			continue;
		tp_sv_poll_grow(s);
		if (s->pfd) {
			pfd = s->pfd;
			cns = s->pcns;
			cap = s->pcap;
		}
		n = gather(s, pfd, cns, cap, &ncn, &timeout);
		tp_poll(ep, pfd, n, timeout);
		/* traffic on a CQ: back to the one-connection wait */
		for (unsigned i = 2; i < n; i++)
			if (pfd[i].revents)
				s->idle_waits = 0;
		/* The channel's fd is readable while events are queued: a
		 * few per turn (tp_sv_cm_turn). */
		if (pfd[1].revents & POLLIN)
			tp_sv_cm_turn(s);
		serve_server(s, pfd, cns, ncn);
		sv_deliver(s);
		tp_sv_after_upcalls(s);
		tp_sv_idle_sweep(s);
		tp_grave_sweep(ep);
		rr_mem_trim_tick();
	}
	pthread_mutex_unlock(&ep->lock);
	return NULL;
}

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
	s->deliver_tail = &s->deliver;
	s->sent_tail = &s->sent_head;
	s->bc_done_tail = &s->bc_done;
	s->io = tp_server_io;
	rc = tp_ep_init(&s->ep, conf, true, addr);
	if (rc == 0)
		rc = rpcrdma_listen(s->ep.ch, addr, addrlen, RR_LISTEN_BACKLOG, NULL,
				    &s->listen_id);
	if (rc == 0) {
		/* half-open connections: the provider's (rdma_cm leaves them
		 * to the kernel: -EOPNOTSUPP) */
		struct rr_listen_limits lim = {.max_handshakes = conf->max_handshakes};

		rc = rr_cm_listen_limits(s->listen_id, &lim);
		if (rc == -EOPNOTSUPP)
			rc = 0;
	}
	if (rc == 0) {
		s->port = listen_port(s->listen_id);
		rc = s->port < 0 ? s->port : 0;
	}
	s->recv = recv;
	s->rctx = ctx;
	if (rc == 0)
		rc = tp_ep_start(&s->ep, sv_progress);
	if (rc) {
		if (s->listen_id)
			(void)rpcrdma_cm_id_destroy(s->listen_id);
		tp_ep_fini(&s->ep);
		rr_free(env, s);
		return rc;
	}
	*out = s;
	return 0;
}

int rr_tp_server_port(struct rr_tp_server *s)
{
	return s->port;
}

void rr_tp_server_stop(struct rr_tp_server *s)
{
	pthread_mutex_lock(&s->ep.lock);
	if (s->listen_id) {
		/* closes the listening socket and frees the requests not
		 * consumed yet: new connections are refused from now on */
		(void)rr_cm_listen_stats(s->listen_id, &s->lstats_gone);
		(void)rpcrdma_cm_id_destroy(s->listen_id);
		s->listen_id = NULL;
	}
	s->stopping = true;
	pthread_mutex_unlock(&s->ep.lock);
}

static struct tp_conn *conn_of(struct rr_conn_sreq *r)
{
	return r->xconn;
}

/* The session asked to end @cn during an API call: end it now. */
static void settle(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (cn->closing && !cn->dead)
		tp_sv_conn_lost(s, cn);
}

/* Answered from the receiving thread (inline dispatch): no one else drains
 * this CQ, so wait for the Writes and Send here. Lock held. */
static void wait_sent_here(struct rr_tp_server *s, struct tp_conn *cn, struct rr_conn_sreq *r)
{
	while (!r->xsent_done && !cn->dead) {
		struct pollfd pfd = {rpcrdma_cq_fd(cn->cq), POLLIN, 0};

		cn->armed = false; /* the loop arms it again (tp_arm_drain) */
		tp_drain_cq(&s->ep, cn);
		settle(s, cn);
		if (r->xsent_done || cn->dead)
			break;
		(void)rpcrdma_cq_arm(cn->cq, false);
		tp_drain_cq(&s->ep, cn);
		settle(s, cn);
		if (r->xsent_done || cn->dead)
			break;
		pthread_mutex_unlock(&s->ep.lock);
		(void)poll(&pfd, 1, 10);
		pthread_mutex_lock(&s->ep.lock);
		(void)rpcrdma_cq_get_event(cn->cq);
	}
}

int rr_tp_server_reply(struct rr_tp_server *s, struct rr_conn_sreq *r,
		       const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk)
{
	struct tp_conn *cn = conn_of(r);
	int rc;

	pthread_mutex_lock(&s->ep.lock);
	r->xsent = NULL;
	r->xsent_done = false;
	rc = cn->dead ? -ENOTCONN : rr_conn_reply(cn->sess, r, parts, nparts, err_chunk);
	settle(s, cn);
	if (rc <= 0) {
		pthread_mutex_unlock(&s->ep.lock);
		return rc;
	}
	if (tp_on_progress_thread(&s->ep)) {
		wait_sent_here(s, cn, r);
	} else {
		tp_wake(&s->ep);
		while (!r->xsent_done && !cn->dead)
			pthread_cond_wait(&s->ep.cond, &s->ep.lock);
	}
	rc = r->xsent_done ? r->xsent_status : -ENOTCONN;
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

int rr_tp_server_reply_async(struct rr_tp_server *s, struct rr_conn_sreq *r,
			     const struct rr_xprt_part *parts, unsigned nparts, bool *err_chunk,
			     rr_tp_sent_fn sent, void *arg)
{
	struct tp_conn *cn = conn_of(r);
	int rc;

	if (!sent)
		return -EINVAL;
	pthread_mutex_lock(&s->ep.lock);
	/* The progress thread drains the completion: it arms every
	 * connection's CQ before it sleeps, so no wake-up is needed. */
	r->xsent = sent;
	r->xsent_arg = arg;
	r->xsent_done = false;
	s->ep.defer = tp_on_progress_thread(&s->ep);
	rc = cn->dead ? -ENOTCONN : rr_conn_reply(cn->sess, r, parts, nparts, err_chunk);
	s->ep.defer = false;
	if (rc != 1)
		r->xsent = NULL;
	settle(s, cn);
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

void rr_tp_server_refuse(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = conn_of(r);

	pthread_mutex_lock(&s->ep.lock);
	if (!cn->dead)
		rr_conn_refuse(cn->sess, r);
	settle(s, cn);
	pthread_mutex_unlock(&s->ep.lock);
}

void rr_tp_server_done(struct rr_tp_server *s, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = conn_of(r);

	pthread_mutex_lock(&s->ep.lock);
	r->xsent = NULL;
	(void)rr_conn_done(cn->sess, r);
	pthread_mutex_unlock(&s->ep.lock);
}

void rr_tp_server_destroy(struct rr_tp_server *s)
{
	const struct rpcrdma_env *env;
	struct rpcrdma_cm_event ev;

	if (!s)
		return;
	env = s->ep.env;
	tp_ep_stop(&s->ep);
	/* No new connection requests, then refuse the queued ones (their ids
	 * are ours to destroy). */
	if (s->listen_id) {
		(void)rpcrdma_cm_id_destroy(s->listen_id);
		s->listen_id = NULL;
	}
	while (rpcrdma_cm_get_event(s->ep.ch, &ev) == 0) {
		if (ev.type == RPCRDMA_CM_CONNECT_REQUEST && ev.id) {
			(void)rpcrdma_reject(ev.id, NULL, 0);
			(void)rpcrdma_cm_id_destroy(ev.id);
		}
	}
	/* Replies still waiting for their Send completion (the RPC layer
	 * waits for them before it destroys; a direct caller may not): told
	 * -ENOTCONN now, once nothing drains their CQs. */
	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next) {
		cn->dead = true;
		rr_conn_down(cn->sess);
	}
	tp_sv_sent_upcalls(s);
	tp_sv_bc_upcalls(s);
	pthread_mutex_unlock(&s->ep.lock);
	while (s->conns) {
		struct tp_conn *cn = s->conns;

		s->conns = cn->next;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
		tp_conn_free(cn);
	}
	for (struct tp_conn *cn = s->ep.grave; cn; cn = cn->next)
		cn->lent = 0;
	rr_free(env, s->pfd);
	rr_free(env, s->pcns);
	tp_grave_sweep(&s->ep);
	tp_ep_fini(&s->ep);
	rr_free(env, s);
}

void rr_tp_server_stats(struct rr_tp_server *s, struct rr_xprt_stats *out)
{
	struct rr_listen_stats ls;

	pthread_mutex_lock(&s->ep.lock);
	*out = s->ep.stats;
	ls = s->lstats_gone;
	if (s->listen_id)
		(void)rr_cm_listen_stats(s->listen_id, &ls);
	pthread_mutex_unlock(&s->ep.lock);
	out->accept_backoffs = ls.accept_backoffs;
	out->handshakes_dropped = ls.handshakes_dropped;
}

unsigned rr_tp_server_conns(struct rr_tp_server *s)
{
	unsigned n;

	pthread_mutex_lock(&s->ep.lock);
	n = s->nconns;
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

uint32_t rr_tp_server_rrep_live(struct rr_tp_server *s)
{
	uint32_t n = 0;

	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		n += rr_conn_rrep_live(cn->sess);
	for (struct tp_conn *cn = s->ep.grave; cn; cn = cn->next)
		if (cn->sess)
			n += rr_conn_rrep_live(cn->sess);
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

uint32_t rr_tp_server_rrep_waiting(struct rr_tp_server *s)
{
	uint32_t n = 0;

	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		n += rr_conn_rrep_waiting(cn->sess);
	pthread_mutex_unlock(&s->ep.lock);
	return n;
}

void rr_tp_server_cut(struct rr_tp_server *s)
{
	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		if (cn->id && !cn->dead)
			(void)rpcrdma_disconnect(cn->id);
	pthread_mutex_unlock(&s->ep.lock);
}

int rr_tp_server_commit_ok(struct rr_tp_server *s, struct rr_conn_sreq *req)
{
	struct tp_conn *cn = conn_of(req);
	int rc;

	pthread_mutex_lock(&s->ep.lock);
	if (cn->dead)
		rc = -ENOTCONN;
	else
		rc = cn->commit ? 0 : -EOPNOTSUPP;
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

int rr_tp_server_peer_addr(struct rr_tp_server *s, struct rr_conn_sreq *req,
			   struct sockaddr_storage *out)
{
	struct tp_conn *cn = conn_of(req);
	int rc = 0;

	pthread_mutex_lock(&s->ep.lock);
	if (cn->has_peer)
		*out = cn->peer;
	else
		rc = -ENOTCONN;
	pthread_mutex_unlock(&s->ep.lock);
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
	pthread_mutex_lock(&s->ep.lock);
	if (cn->dead || cn->closing) {
		pthread_mutex_unlock(&s->ep.lock);
		rr_free(s->ep.env, b);
		return -ENOTCONN;
	}
	b->cn = cn;
	b->next = cn->bcs;
	cn->bcs = b;
	pthread_mutex_unlock(&s->ep.lock);
	*out = b;
	return 0;
}

int rr_tp_server_bc_submit(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc)
{
	int rc;

	if (!rpc)
		return -EINVAL;
	/* its Reply comes in on the progress thread */
	if (rpc->caller_waits && tp_on_progress_thread(&s->ep))
		return -EDEADLK;
	rpc->xbc = b;
	rpc->xdone = false;
	rpc->xnext = NULL;
	pthread_mutex_lock(&s->ep.lock);
	rc = b->cn && !b->cn->dead ? rr_conn_bc_submit(b->cn->sess, rpc) : -ENOTCONN;
	if (b->cn)
		settle(s, b->cn);
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

void rr_tp_server_bc_abort(struct rr_tp_server *s, struct rr_tp_bc *b, struct rr_conn_rpc *rpc,
			   int status)
{
	pthread_mutex_lock(&s->ep.lock);
	if (b->cn && !b->cn->dead)
		rr_conn_bc_abort(b->cn->sess, rpc, status);
	pthread_mutex_unlock(&s->ep.lock);
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
	pthread_mutex_lock(&s->ep.lock);
	if (b->cn)
		for (struct rr_tp_bc **pp = &b->cn->bcs; *pp; pp = &(*pp)->next)
			if (*pp == b) {
				*pp = b->next;
				break;
			}
	pthread_mutex_unlock(&s->ep.lock);
	rr_free(s->ep.env, b);
}
