/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA server's connections: a connection request, taken by the
 * listener's loop, admitted within the connection limits (docs/security.md
 * "Limits": total, per source host; refused before anything is allocated;
 * half-open ones shed when file descriptors run out), set up on a shard
 * chosen round-robin (its CQ on the shard's loop), accepted with our
 * private data and given its own session (proto/conn); the CM events of a
 * shard's connections, handled on its loop; a connection lost (its session
 * settles what it had, its push-mode regions are released) or closed for
 * silence (idle_timeout_ms); and the chores after completions (server.c):
 * deferred Replies posted, sent upcalls run, the shard's shared receive
 * pool refilled (pool.c: one per shard, that is per progress loop; a
 * connection is admitted only when its pool has room for the Receive of
 * its first Call; without shared receive queues each connection has its
 * own Receives). */
#include "transport/rdma/tp_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>

/* Half-open connections a connection request may take the file
 * descriptors of when its own setup ran out of them (a soft connection
 * holds 4: its socket and its CQ's). */
#define SV_SHED_HANDSHAKES 4u

void tp_sv_conn_put(struct tp_shard *sh, struct tp_conn *cn)
{
	if (--cn->refs)
		return;
	for (struct tp_conn **pp = &sh->conns; *pp; pp = &(*pp)->next)
		if (*pp == cn) {
			*pp = cn->next;
			sh->nconns--;
			atomic_fetch_sub(&sh->srv->nconns, 1);
			break;
		}
	tp_conn_bury(cn);
}

/* The connection is gone (disconnect, a fatal completion, the session's
 * close, idle): its session settles what it had on it (requests reading
 * freed, Replies with Writes told, exposed Read chunks fenced), its
 * push-mode regions are released. */
void tp_sv_conn_lost(struct tp_shard *sh, struct tp_conn *cn)
{
	if (cn->dead)
		return;
	if (cn->established && !cn->closing_idle)
		sh->ep.stats.fatal_errors++;
	tp_fault_conn_lost(cn, &sh->ep.stats);
	cn->dead = true;
	cn->established = false;
	rr_conn_down(cn->sess);   /* backward Calls complete: -ECONNRESET */
	for (struct rr_tp_bc *b = cn->bcs; b; b = b->next)
		b->cn = NULL;     /* their submits: -ENOTCONN from now on */
	cn->bcs = NULL;
	tp_cq_want(cn, false);
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
	tp_expo_release_all(cn);   /* push-mode regions die with the connection */
	rr_cond_broadcast(&sh->ep.cond);
	tp_sv_conn_put(sh, cn);
}

/* After the session ran: its timers at @now (the clock of tp_sv_clock,
 * read once per walk by the caller), and an end it asked for. The shard's
 * waiters are woken by the caller, once per walk. */
void tp_sv_timers(struct tp_shard *sh, struct tp_conn *cn, uint64_t now)
{
	if (!cn->dead) {
		tp_quiet_watch(cn, now);
		rr_conn_tick(cn->sess, now);
	}
	if ((cn->closing || cn->cm_lost) && !cn->dead)
		tp_sv_conn_lost(sh, cn);
}

/* Whether one more connection, from @peer (NULL: unknown), would exceed
 * max_conns or max_conns_per_host (the listener's lock held; each shard's
 * taken in turn). Connections still being torn down count until they are
 * gone. */
static bool over_limits(struct rr_tp_server *s, const struct sockaddr_storage *peer)
{
	const struct rr_tp_conf *cf = &s->ep.conf;
	unsigned same = 0;

	if (cf->max_conns && atomic_load(&s->nconns) >= cf->max_conns)
		return true;
	if (!cf->max_conns_per_host || !peer)
		return false;
	/* fewer connections in all than one host may have (nconns counts
	 * what the shards' lists hold): no walk over every connection of
	 * every shard, under their locks, per connection request */
	if (atomic_load(&s->nconns) < cf->max_conns_per_host)
		return false;
	for (unsigned i = 0; i < s->nshards; i++) {
		struct tp_shard *sh = s->shards[i];

		rr_lock(&sh->ep.lock);
		for (struct tp_conn *cn = sh->conns; cn && same < cf->max_conns_per_host;
		     cn = cn->next)
			if (cn->has_peer && rr_addr_same_host(&cn->peer, peer))
				same++;
		rr_unlock(&sh->ep.lock);
		if (same >= cf->max_conns_per_host)
			return true;
	}
	return false;
}

/* tp_conn_new for a connection request, without the listener's lock (held
 * on entry and on return). Creating a connection's resources (Receive and
 * Send buffers of megabytes, their registrations, a QP: provider calls
 * that are thread-safe, include/rpcrdma/rdma.h) is the costliest step of
 * the listener's loop; Calls are served by the shards' loops meanwhile
 * (issue 12 finding 7). Nothing else sees @cn before it is linked into
 * its shard; tp_conn_new reads only what is fixed at creation. */
static struct tp_conn *conn_new_unlocked(struct rr_tp_server *s, struct tp_shard *sh,
					 struct tp_pool *pool, uint32_t n)
{
	struct tp_conn *cn;

	rr_unlock(&s->ep.lock);
	cn = pool ? tp_conn_new_pooled(&sh->ep, pool, n + 8) : tp_conn_new(&sh->ep, n, n + 8, true);
	rr_lock(&s->ep.lock);
	return cn;
}

/* Shard @sh's shared receive pool, made with its first connection (its
 * lock held); NULL: each connection has its own Receives (no shared
 * receive queues, or the configuration says so). Where the pool's
 * connections must share its PD (verbs: no RPCRDMA_CAP_SRQ_ANY_PD), none
 * of them may expose memory that another could reach with its STag: a
 * reliable-reply Read chunk only in a window bound to its QP (or reliable
 * reply is not offered), and no push-mode regions (RDMA Commit is not
 * offered): the listener's private data and every shard say so. */
struct tp_pool *tp_sv_pool_of(struct tp_shard *sh)
{
	struct rr_tp_server *s = sh->srv;
	struct tp_ep *ep = &sh->ep;

	if (sh->no_pool || ep->conf.no_srq)
		return NULL;
	if (!sh->pool) {
		unsigned key = 0;

		while (key < s->nshards && s->shards[key] != sh)
			key++;
		if (tp_pool_create(ep, key, &sh->pool)) {
			sh->no_pool = true;
			return NULL;
		}
	}
	return sh->pool;
}

/* The pool's turn: its limit event and refill; a pool whose connections
 * have all been gone for TP_POOL_RETIRE_NS is freed (the Receives posted
 * in its queue go back to the system only that way after the connections
 * that needed them left: memory after churn), and made again by the next
 * connection. */
static void pool_tick(struct tp_shard *sh)
{
	struct tp_pool *p = sh->pool;

	if (!p)
		return;
	if (!p->conns && tp_now_ns(&sh->ep) - p->empty_since >= TP_POOL_RETIRE_NS) {
		tp_pool_destroy(p);
		sh->pool = NULL;
		rr_mem_trim_due(sh->ep.env);
		return;
	}
	tp_pool_tick(p);
}

void tp_sv_pools_refill(struct tp_shard *sh)
{
	pool_tick(sh);   /* what this turn's Replies granted, posted */
	if (!sh->parked)
		return;
	/* Read-chunk Replies that waited for a free Receive of their pool */
	sh->parked = false;
	for (struct tp_conn *cn = sh->conns; cn; cn = cn->next)
		if (cn->pool && !cn->dead && rr_conn_parked(cn->sess)) {
			rr_conn_resume(cn->sess);
			sh->parked |= rr_conn_parked(cn->sess);
		}
}

int rr_tp_server_pool(struct rr_tp_server *s, unsigned key, struct rr_cred_pool *out)
{
	struct tp_shard *sh;
	int rc = -ENOENT;

	if (key >= s->nshards)
		return rc;
	sh = s->shards[key];
	rr_lock(&sh->ep.lock);
	if (sh->pool) {
		*out = sh->pool->cred;
		rc = 0;
	}
	rr_unlock(&sh->ep.lock);
	return rc;
}

/* Refuses connection request @id (an MPA Reject on soft; rdma_cm's
 * reject on verbs) and counts it. */
static void refuse_conn(struct rr_tp_server *s, struct rpcrdma_cm_id *id)
{
	(void)rpcrdma_reject(id, NULL, 0);
	(void)rpcrdma_cm_id_destroy(id);
	s->ep.stats.refused_conns++;
}

/* The key of a peer host for the failed-Read table. */
static uint64_t host_key(const struct sockaddr_storage *a)
{
	uint64_t k = 0;

	if (a->ss_family == AF_INET)
		return 0x100000000ull | ((const struct sockaddr_in *)a)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6) {
		const uint8_t *b = ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;

		for (int i = 0; i < 16; i++)
			k = k * 1099511628211ull ^ b[i];
		return k | 1;
	}
	return 0;
}

/* Idle timeout (conf.idle_timeout_ms): an established connection whose
 * last Receive is that old, with nothing in progress (requests held by the
 * upper layer, Replies waiting for their RDMA_DONE), is disconnected and
 * counted. Looked at no more often than every tenth of the timeout (at
 * least every 100 ms); lock held. Only the first Receive since the last
 * look reads the clock (cn->last_rx_ns), the others are counted (cn->nrx):
 * one clock read per connection and look, not per Call. A look that finds
 * one Receive since the previous look has its time; more than one, a
 * later one of unknown time: stamped with the look's time (never sooner
 * than its timeout; at most one look later than by the last Receive's
 * own time).
 * Before a connection is closed, its CQ is served (sv_idle_cq_served): the
 * look runs in the shard's turn, after whatever held the loop up (an
 * inline handler, a task before it, a stalled thread), and a Call that
 * came meanwhile waits in the CQ, fed to nobody, while the clock has
 * passed the timeout (docs/testing.md, part CJ). Only a connection found
 * idle costs that (once per CQ and look); the walk and the Call path are
 * as they were. */
#define SV_IDLE_CQS 4u

struct sv_idle_cqs {
	struct tp_cq *q[SV_IDLE_CQS];
	bool held[SV_IDLE_CQS];   /* a caller held it: not served */
	unsigned n;
};

/* Whether @cn, found idle, may be closed now: its CQ was served in this
 * look (by an earlier call; a caller holding it then: not now). false
 * with *@served: its CQ was served now (the lock dropped meanwhile): the
 * caller walks its connections again, with the clock read again. false
 * alone: not judged in this look (more CQs to serve than a look serves). */
static bool sv_idle_cq_served(struct tp_shard *sh, struct tp_conn *cn, struct sv_idle_cqs *c,
			      bool *served)
{
	struct tp_cq *q = cn->tcq;
	unsigned i;

	*served = false;
	if (!q || q->port->loop != sh->ep.loop || !rr_loop_on_runner(sh->ep.loop))
		return true;   /* nothing to serve here */
	for (i = 0; i < c->n; i++)
		if (c->q[i] == q)
			return !c->held[i];
	if (c->n == SV_IDLE_CQS)
		return false;
	c->q[c->n] = q;
	/* its CQ lives while the port's loop (this thread) is in here: they
	 * go by a task of that loop (port_gc) */
	rr_unlock(&sh->ep.lock);
	c->held[c->n++] = !tp_cq_serve_now(q);
	rr_lock(&sh->ep.lock);
	*served = true;
	return false;
}

void tp_sv_idle_sweep(struct tp_shard *sh)
{
	uint64_t to = (uint64_t)sh->ep.conf.idle_timeout_ms * 1000000u;
	struct sv_idle_cqs cqs = {.n = 0};
	uint64_t now;
	struct tp_conn *cn, *nx;
	bool served;

	if (!to)
		return;
	now = tp_now_ns(&sh->ep);
	if (now < sh->idle_look_ns)
		return;
	sh->idle_look_ns = now + RR_MIN(to / 10, 100000000ull);
again:
	for (cn = sh->conns; cn; cn = nx) {
		nx = cn->next;
		if (cn->nrx - cn->idle_nrx > 1)   /* several since the last look */
			cn->last_rx_ns = now;
		cn->idle_nrx = cn->nrx;
		if (cn->dead || !cn->established || rr_conn_in_progress(cn->sess) || cn->ndefer ||
		    now - cn->last_rx_ns < to)
			continue;
		if (!sv_idle_cq_served(sh, cn, &cqs, &served)) {
			if (!served)
				continue;
			/* what was fed stamped its time: read again (else
			 * later than now, its age would wrap) */
			now = tp_now_ns(&sh->ep);
			goto again;
		}
		sh->ep.stats.idle_closed++;
		cn->closing_idle = true;   /* an orderly close, not a fatal error */
		tp_sv_conn_lost(sh, cn);
	}
}

/* Capabilities a connection of @pool cannot have. A provider whose shared
 * receive queue takes QPs of its own PD only (verbs) puts every pooled
 * connection in that one PD, where a push region (RDMA Commit) or a Read
 * chunk exposed through a memory region (reliable reply without memory
 * windows) registered for one peer would answer another peer's STag. */
static uint32_t pool_caps_drop(const struct tp_ep *ep, const struct tp_pool *pool)
{
	uint32_t drop;

	if (!pool || !pool->share_pd)
		return 0;
	drop = RR_PD_EXT_CAP_RDMA_COMMIT;
	if (!ep->conf.use_windows || !(ep->tc->caps.flags & RPCRDMA_CAP_INVALIDATABLE))
		drop |= RR_PD_EXT_CAP_RELIABLE_REPLY;
	return drop;
}

/* Shard @sh's pool for a new connection whose peer advertised @peer_caps,
 * if it has room for one more connection (the Receive of its first Call):
 * counted in it (pool->conns) so that it is not retired while the
 * connection is set up; *@refused: it has none. NULL: no pool, or the peer
 * asks for a capability that the pool's shared PD cannot isolate
 * (pool_caps_drop), which the connection gets on a PD and Receives of its
 * own (as with a fixed grant) rather than going without. *@drop: the
 * capabilities the connection goes without. */
static struct tp_pool *pool_enter(struct tp_shard *sh, uint32_t peer_caps, bool *refused,
				  uint32_t *drop)
{
	struct tp_pool *pool;

	rr_lock(&sh->ep.lock);
	pool = tp_sv_pool_of(sh);
	*drop = pool_caps_drop(&sh->ep, pool);
	if (*drop & peer_caps & sh->ep.conf.ext_caps) {
		pool = NULL;
		*drop = 0;
	}
	*refused = pool && !rr_cred_pool_room(&pool->cred);
	if (*refused)
		pool->cred.refused++;
	else if (pool)
		pool->conns++;   /* tp_conn_free counts it out */
	rr_unlock(&sh->ep.lock);
	return pool;
}

/* A new connection's resources and session on shard @sh; NULL when they
 * cannot be had (the request is refused). Listener's lock held; the
 * session joins the pool under the shard's. */
static struct tp_conn *accept_new(struct rr_tp_server *s, struct tp_shard *sh,
				  const struct rpcrdma_cm_event *ev)
{
	struct rr_conn_config cfg;
	uint32_t n = s->ep.conf.credits + 4;
	struct tp_conn *cn;
	struct tp_pool *pool;
	struct rr_pd_info peer;
	uint32_t drop;
	bool refused, ok;

	/* Reliable reply: one more Receive per Read-chunk Reply that may
	 * await its RDMA_DONE (docs/protocol.md "Credits"). */
	if (s->ep.conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY)
		n += s->ep.conf.rrep_max;
	/* admission: the pool must hold the Receive of its first Call */
	if (rr_pd_parse(ev->private_data, ev->private_data_len, &peer))
		rr_pd_info_defaults(&peer);
	pool = pool_enter(sh, peer.ext_caps, &refused, &drop);
	if (refused)
		return NULL;
	/* Backchannel: its send slots (n + 8 below); the Receives of backward
	 * Replies are reserved in the pool as backward Calls go out */
	n += s->ep.conf.bc_slots;
	cn = conn_new_unlocked(s, sh, pool, n);
	if (cn && !tp_conn_ok(cn) && (cn->err == -EMFILE || cn->err == -ENFILE) &&
	    s->listen_id && rr_cm_listen_shed(s->listen_id, SV_SHED_HANDSHAKES) > 0) {
		/* out of file descriptors: half-open connections (peers that
		 * never sent their MPA Request) give theirs to this one, which
		 * completed its handshake */
		if (pool) {
			rr_lock(&sh->ep.lock);
			pool->conns++;   /* tp_conn_free counts this one out */
			rr_unlock(&sh->ep.lock);
		}
		tp_conn_free(cn);
		cn = conn_new_unlocked(s, sh, pool, n);
	}
	if (!cn && pool) {
		rr_lock(&sh->ep.lock);
		if (!--pool->conns)
			pool->empty_since = tp_now_ns(&sh->ep);
		rr_unlock(&sh->ep.lock);
	}
	/* stopped meanwhile (rr_tp_server_stop): refused as above */
	if (!tp_conn_ok(cn) || atomic_load(&s->stopping) || tp_post_all_recvs(cn)) {
		tp_conn_free(cn);
		return NULL;
	}
	cn->io = s->io;
	cn->io.ctx = cn;
	tp_sess_config(&sh->ep, &cfg);
	cfg.pool = pool ? &pool->cred : NULL;
	cfg.spares = &sh->spares;
	cfg.local.ext_caps &= ~drop;
	cn->caps_drop = drop;
	if (rr_conn_create(&cfg, &cn->io, &cn->sess)) {
		tp_conn_free(cn);
		return NULL;
	}
	cn->has_peer = rpcrdma_cm_peer_addr(ev->id, &cn->peer) == 0;
	/* joins the pool and sets the connection's receive quota; the
	 * Receive of its first Call posted now */
	rr_lock(&sh->ep.lock);
	rr_conn_up(cn->sess, ev->private_data, ev->private_data_len, pool ? 0 : n, 1,
		   cn->has_peer ? host_key(&cn->peer) : 0);
	ok = true;
	if (pool) {
		tp_pool_fill(pool);
		ok = rr_cred_pool_safe(&pool->cred);
	}
	rr_unlock(&sh->ep.lock);
	if (!ok) {
		tp_conn_free(cn);   /* no memory for it: its reservation goes */
		return NULL;
	}
	return cn;
}

/* Links @cn into its shard (shard's lock held): its loop serves it from
 * now on (its CQ watched, its ticks). The shard's tick is armed here only
 * when the shard had no connection: otherwise its last turn armed it
 * (sv_turn, while it has connections), and setting it again pushed it
 * later, the loop's head timer, which woke the shard's thread for nothing
 * at every connection (one context switch per connect on the path of the
 * first Call: issue 16 part J). */
static void shard_link(struct tp_shard *sh, struct tp_conn *cn)
{
	bool first = !sh->conns;

	cn->next = sh->conns;
	sh->conns = cn;
	sh->nconns++;
	atomic_fetch_add(&sh->srv->nconns, 1);
	tp_cq_want(cn, true);
	if (first)
		rr_loop_timer_set(sh->ep.loop, &sh->ep.timer, rr_now_ns(NULL) + 100000000u);
}

static void on_connect_request(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev)
{
	uint8_t pd[RR_PD_MAX_LEN];
	struct rpcrdma_conn_param prm = {0};
	struct sockaddr_storage peer;
	bool has_peer = rpcrdma_cm_peer_addr(ev->id, &peer) == 0;
	struct tp_shard *sh;
	struct tp_conn *cn;
	int len;

	/* Limits first, before anything is allocated for it. */
	if (atomic_load(&s->stopping) || over_limits(s, has_peer ? &peer : NULL)) {
		refuse_conn(s, ev->id);
		return;
	}
	sh = s->shards[s->next_shard++ % s->nshards];
	cn = accept_new(s, sh, ev);
	if (!cn) {
		refuse_conn(s, ev->id);
		return;
	}
	cn->id = ev->id;
	cn->chport = s->ep.port;   /* its events come on the listener's channel */
	cn->last_rx_ns = tp_now_ns(&s->ep);
	len = tp_encode_pd(&s->ep, cn->caps_drop, pd, sizeof(pd));
	prm.private_data = pd;
	prm.private_data_len = len > 0 ? (uint16_t)len : 0;
	prm.responder_resources = s->ep.conf.ird;
	prm.initiator_depth = s->ep.conf.ord;
	/* Both advertised RDMA Commit: the QP serves Commits. */
	cn->commit = rr_conn_commit(cn->sess);
	if (cn->commit)
		prm.flags |= RPCRDMA_CONN_COMMIT;
	/* Its events go to the shard from here on, which handles them once
	 * the connection is linked (its lock held until then). */
	rr_lock(&sh->ep.lock);
	rpcrdma_cm_id_set_user_ctx(ev->id, cn);
	if (rpcrdma_accept(ev->id, cn->qp, &prm)) {
		rr_unlock(&sh->ep.lock);
		tp_conn_free(cn);   /* destroys the id: the peer sees a close */
		s->ep.stats.refused_conns++;
		return;
	}
	shard_link(sh, cn);
	rr_unlock(&sh->ep.lock);
}

/* A CM event of a shard's connection, on the shard's loop (lock held). */
void tp_sv_on_cm(struct tp_ep *ep, const struct rpcrdma_cm_event *ev)
{
	struct tp_shard *sh = tp_shard_of(ep);
	struct tp_conn *cn = ev->user_ctx;

	switch (ev->type) {
	case RPCRDMA_CM_ESTABLISHED: {
		struct rpcrdma_conn_info info;

		if (!cn || cn->dead)
			return;
		cn->ord = rpcrdma_conn_query(cn->id, &info) == 0 ? info.ord : 1;
		if (cn->ord == 0)
			cn->ord = 1;
		rr_conn_set_ord(cn->sess, cn->ord);
		cn->established = true;
		break;
	}
	case RPCRDMA_CM_DISCONNECTED:
	case RPCRDMA_CM_ERROR:
		if (cn)
			tp_sv_conn_lost(sh, cn);
		break;
	default:
		break;
	}
}

/* Connection requests the listener's loop sets up per turn. Each one sets
 * up a connection (buffers, registrations, a QP: the costliest thing the
 * loop does), and while the loop emptied the channel new requests kept
 * coming: a storm of connections arriving as fast as the loop set them up
 * kept it there for as long as the storm lasted, every established
 * connection of its loop waiting (issue 12 finding 7; seconds under ASan,
 * or wherever a setup costs milliseconds). With a budget per turn, the
 * loop's connections are served every few setups whatever the storm's
 * size (the other shards' loops are not held at all), and a new client's
 * request waits only for the requests queued before it (a FIFO; a peer's
 * connection has one request there until it is answered). */
#define SV_CM_PER_TURN 2

/* The listener's turn (lock held): a few connection requests; the rest go
 * back to the head of its queue for the next turn. */
static void listener_turn(struct tp_ep *ep)
{
	struct rr_tp_server *s = RR_CONTAINER_OF(ep, struct rr_tp_server, ep);
	struct tp_ev *e = tp_ep_take_events(ep);
	bool quiet = false;
	int n = 0;

	/* The accepts' ESTABLISHEDs are read from the channel at the end of
	 * the turn, not signaled to this same thread through its eventfd
	 * (issue 16 part AZ); the lock order is the listener's, then the
	 * port's cm_lock, as in unlisten. */
	if (e)
		quiet = tp_port_quiet_begin(s->ep.port);
	while (e && n < SV_CM_PER_TURN) {
		struct tp_ev *nx = e->next;

		if (e->ev.type == RPCRDMA_CM_CONNECT_REQUEST) {
			on_connect_request(s, &e->ev);
			n++;
		}
		tp_ev_free(ep, e);
		e = nx;
	}
	if (e) {
		struct tp_ev *last = e;

		rr_lock(&ep->evq_lock);
		while (last->next)
			last = last->next;
		last->next = ep->evq;
		if (!ep->evq)
			ep->evq_tail = &last->next;
		ep->evq = e;
		rr_unlock(&ep->evq_lock);
		tp_ep_kick(ep);
	}
	if (quiet)
		tp_port_quiet_end(s->ep.port, true);
}

const struct tp_ep_ops tp_listener_ops = {.turn = listener_turn};

/* Runs the sent upcalls of completed asynchronous Replies, in completion
 * order, without the endpoint's lock (they may call rr_tp_server_done).
 * Called with the lock held, on the progress thread (or by destroy). */
void tp_sv_sent_upcalls(struct tp_shard *s)
{
	while (s->sent_head) {
		struct rr_conn_sreq *r = s->sent_head;
		void (*fn)(void *, int) = r->xsent;
		void *arg = r->xsent_arg;
		int st = r->xsent_status;

		s->sent_head = r->xnext;
		if (!s->sent_head)
			s->sent_tail = &s->sent_head;
		r->xnext = NULL;
		r->xsent = NULL;
		rr_unlock(&s->ep.lock);
		fn(arg, st);
		rr_lock(&s->ep.lock);
	}
}

/* Hook at the end of each progress iteration: posts the deferred Replies
 * and runs the sent upcalls, until neither is left (a sent upcall may answer
 * another request: its Reply is posted now, not at the next wake-up). */
void tp_sv_after_upcalls(struct tp_shard *s)
{
	tp_sv_pools_refill(s);
	for (;;) {
		tp_post_all_deferred(&s->ep);
		if (s->ep.closing_asked) {
			s->ep.closing_asked = 0;
			for (struct tp_conn *cn = s->conns, *nx; cn; cn = nx) {
				nx = cn->next;
				if (cn->closing && !cn->dead)
					tp_sv_conn_lost(s, cn);
			}
		}
		if (!s->sent_head && !s->bc_done)
			break;
		tp_sv_sent_upcalls(s);
		tp_sv_bc_upcalls(s);
	}
}

/* Runs the completion upcalls of backward Calls, in completion order,
 * without the endpoint's lock (lock held on entry and return). */
void tp_sv_bc_upcalls(struct tp_shard *s)
{
	while (s->bc_done) {
		struct rr_conn_rpc *rpc = s->bc_done;
		struct rr_tp_bc *b = rpc->xbc;

		s->bc_done = rpc->xnext;
		if (!s->bc_done)
			s->bc_done_tail = &s->bc_done;
		rpc->xnext = NULL;
		rpc->xdone = true;
		rr_unlock(&s->ep.lock);
		b->complete(b->ctx, rpc);
		rr_lock(&s->ep.lock);
	}
}
