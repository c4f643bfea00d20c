/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA server's connections: a connection request admitted within the
 * connection limits (docs/security.md "Limits": total, per source host;
 * refused before anything is allocated; half-open ones shed when file
 * descriptors run out), accepted with our private data and given its own
 * session (proto/conn); CM events; a connection lost (its session settles
 * what it had, its push-mode regions are released) or closed for silence
 * (idle_timeout_ms); and the chores after each turn of the server loop
 * (server.c): deferred Replies posted, sent upcalls run. */
#include "transport/rdma/tp_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>

/* Half-open connections a connection request may take the file
 * descriptors of when its own setup ran out of them (a soft connection
 * holds 4: its socket and its CQ's). */
#define SV_SHED_HANDSHAKES 4u

void tp_sv_conn_put(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (--cn->refs)
		return;
	for (struct tp_conn **pp = &s->conns; *pp; pp = &(*pp)->next)
		if (*pp == cn) {
			*pp = cn->next;
			s->nconns--;
			break;
		}
	tp_conn_bury(cn);
}

/* The connection is gone (disconnect, a fatal completion, the session's
 * close, idle): its session settles what it had on it (requests reading
 * freed, Replies with Writes told, exposed Read chunks fenced), its
 * push-mode regions are released. */
void tp_sv_conn_lost(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (cn->dead)
		return;
	if (cn->established && !cn->closing_idle)
		s->ep.stats.fatal_errors++;
	cn->dead = true;
	cn->established = false;
	rr_conn_down(cn->sess);   /* backward Calls complete: -ECONNRESET */
	for (struct rr_tp_bc *b = cn->bcs; b; b = b->next)
		b->cn = NULL;     /* their submits: -ENOTCONN from now on */
	cn->bcs = NULL;
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
	tp_expo_release_all(cn);   /* push-mode regions die with the connection */
	pthread_cond_broadcast(&s->ep.cond);
	tp_sv_conn_put(s, cn);
}

/* After the session ran: its timers, and an end it asked for. */
void tp_sv_timers(struct rr_tp_server *s, struct tp_conn *cn)
{
	if (!cn->dead) {
		rr_conn_tick(cn->sess, rr_now_ns(s->ep.conf.rrep_clock ? s->ep.conf.rrep_clock
								      : s->ep.env));
		pthread_cond_broadcast(&s->ep.cond);
	}
	if (cn->closing && !cn->dead)
		tp_sv_conn_lost(s, cn);
}

/* Whether one more connection, from @peer (NULL: unknown), would exceed
 * max_conns or max_conns_per_host (lock held). Connections still being
 * torn down count until they are gone. */
static bool over_limits(struct rr_tp_server *s, const struct sockaddr_storage *peer)
{
	const struct rr_tp_conf *cf = &s->ep.conf;
	unsigned same = 0;

	if (cf->max_conns && s->nconns >= cf->max_conns)
		return true;
	if (!cf->max_conns_per_host || !peer)
		return false;
	for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
		if (cn->has_peer && rr_addr_same_host(&cn->peer, peer) &&
		    ++same >= cf->max_conns_per_host)
			return true;
	return false;
}

/* tp_conn_new for a connection request, without the endpoint's lock (held
 * on entry and on return). Creating a connection's resources (Receive and
 * Send buffers of megabytes, their registrations, a CQ and a QP: provider
 * calls that are thread-safe, include/rpcrdma/rdma.h) is the costliest
 * step of the server loop; the threads that answer Calls need the lock to
 * post their Replies, and a mutex released only for an instant between
 * turns left them waiting for seconds while a storm of connections was set
 * up (issue 12 finding 7). Nothing else sees @cn before it is linked into
 * s->conns; tp_conn_new reads only what is fixed at creation. */
static struct tp_conn *conn_new_unlocked(struct rr_tp_server *s, uint32_t n)
{
	struct tp_conn *cn;

	pthread_mutex_unlock(&s->ep.lock);
	cn = tp_conn_new(&s->ep, n, n + 8);
	pthread_mutex_lock(&s->ep.lock);
	return cn;
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
 * least every 100 ms); lock held. */
void tp_sv_idle_sweep(struct rr_tp_server *s)
{
	uint64_t to = (uint64_t)s->ep.conf.idle_timeout_ms * 1000000u;
	uint64_t now;
	struct tp_conn *cn, *nx;

	if (!to)
		return;
	now = tp_now_ns(&s->ep);
	if (now < s->idle_look_ns)
		return;
	s->idle_look_ns = now + RR_MIN(to / 10, 100000000ull);
	for (cn = s->conns; cn; cn = nx) {
		nx = cn->next;
		if (cn->dead || !cn->established || rr_conn_in_progress(cn->sess) || cn->ndefer ||
		    now - cn->last_rx_ns < to)
			continue;
		s->ep.stats.idle_closed++;
		cn->closing_idle = true;   /* an orderly close, not a fatal error */
		tp_sv_conn_lost(s, cn);
	}
}

/* A new connection's resources and session; NULL when they cannot be had
 * (the request is refused). */
static struct tp_conn *accept_new(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev)
{
	struct rr_conn_config cfg;
	uint32_t n = s->ep.conf.credits + 4;
	struct tp_conn *cn;

	/* Reliable reply: one more Receive per Read-chunk Reply that may
	 * await its RDMA_DONE (docs/protocol.md "Credits"). */
	if (s->ep.conf.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY)
		n += s->ep.conf.rrep_max;
	/* Backchannel: one per backward Call's Reply (RFC 8167), and as many
	 * send slots (n + 8 below) */
	n += s->ep.conf.bc_slots;
	cn = conn_new_unlocked(s, n);
	if (cn && !tp_conn_ok(cn) && (cn->err == -EMFILE || cn->err == -ENFILE) &&
	    s->listen_id && rr_cm_listen_shed(s->listen_id, SV_SHED_HANDSHAKES) > 0) {
		/* out of file descriptors: half-open connections (peers that
		 * never sent their MPA Request) give theirs to this one, which
		 * completed its handshake */
		tp_conn_free(cn);
		cn = conn_new_unlocked(s, n);
	}
	/* stopped meanwhile (rr_tp_server_stop): refused as above */
	if (!tp_conn_ok(cn) || s->stopping || tp_post_all_recvs(cn)) {
		tp_conn_free(cn);
		return NULL;
	}
	cn->io = s->io;
	cn->io.ctx = cn;
	tp_sess_config(&s->ep, &cfg);
	if (rr_conn_create(&cfg, &cn->io, &cn->sess)) {
		tp_conn_free(cn);
		return NULL;
	}
	cn->has_peer = rpcrdma_cm_peer_addr(ev->id, &cn->peer) == 0;
	rr_conn_up(cn->sess, ev->private_data, ev->private_data_len, n, 1,
		   cn->has_peer ? host_key(&cn->peer) : 0);
	return cn;
}

static void on_connect_request(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev)
{
	uint8_t pd[RR_PD_MAX_LEN];
	struct rpcrdma_conn_param prm = {0};
	struct sockaddr_storage peer;
	bool has_peer = rpcrdma_cm_peer_addr(ev->id, &peer) == 0;
	struct tp_conn *cn;
	int len;

	/* Limits first, before anything is allocated for it. */
	if (s->stopping || over_limits(s, has_peer ? &peer : NULL)) {
		refuse_conn(s, ev->id);
		return;
	}
	cn = accept_new(s, ev);
	if (!cn) {
		refuse_conn(s, ev->id);
		return;
	}
	cn->id = ev->id;
	cn->last_rx_ns = tp_now_ns(&s->ep);
	rpcrdma_cm_id_set_user_ctx(ev->id, cn);
	len = tp_encode_pd(&s->ep, pd, sizeof(pd));
	prm.private_data = pd;
	prm.private_data_len = len > 0 ? (uint16_t)len : 0;
	prm.responder_resources = s->ep.conf.ird;
	prm.initiator_depth = s->ep.conf.ord;
	/* Both advertised RDMA Commit: the QP serves Commits. */
	cn->commit = rr_conn_commit(cn->sess);
	if (cn->commit)
		prm.flags |= RPCRDMA_CONN_COMMIT;
	if (rpcrdma_accept(ev->id, cn->qp, &prm)) {
		tp_conn_free(cn);   /* destroys the id: the peer sees a close */
		s->ep.stats.refused_conns++;
		return;
	}
	cn->next = s->conns;
	s->conns = cn;
	s->nconns++;
}

void tp_sv_on_cm(struct rr_tp_server *s, const struct rpcrdma_cm_event *ev)
{
	struct tp_conn *cn = ev->user_ctx;

	switch (ev->type) {
	case RPCRDMA_CM_CONNECT_REQUEST:
		on_connect_request(s, ev);
		break;
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
			tp_sv_conn_lost(s, cn);
		break;
	default:
		break;
	}
}

/* Connection-manager events the server loop handles per turn, between two
 * services of its connections' CQs. Each CONNECT_REQUEST sets up a
 * connection (buffers, registrations, a QP: the costliest thing the loop
 * does), and while the loop emptied the channel new requests kept coming:
 * a storm of connections arriving as fast as the loop set them up kept it
 * there for as long as the storm lasted, every established connection's
 * Calls waiting (issue 12 finding 7; seconds under ASan, or wherever a
 * setup costs milliseconds). With a budget per turn, established
 * connections are served every few setups whatever the storm's size, and
 * a new client's request waits only for the requests queued before it
 * (the channel is a FIFO; a peer's connection has one request there until
 * it is answered). A connection brings about three events (request,
 * established, disconnected): 4 are one or two setups. The channel's fd
 * stays readable while events are left, so the next turn comes at once. */
#define SV_CM_PER_TURN 4

void tp_sv_cm_turn(struct rr_tp_server *s)
{
	struct rpcrdma_cm_event ev;

	for (int i = 0; i < SV_CM_PER_TURN && rpcrdma_cm_get_event(s->ep.ch, &ev) == 0; i++)
		tp_sv_on_cm(s, &ev);
}

/* Makes the server loop's poll set hold every connection (lock held).
 * On allocation failure the old arrays stay (or none: a one-connection
 * set), and the loop serves the connections beyond them on every turn. */
void tp_sv_poll_grow(struct rr_tp_server *s)
{
	struct tp_ep *ep = &s->ep;
	unsigned want = s->nconns < 8 ? 8 : s->nconns;
	struct pollfd *pfd;
	struct tp_conn **cns;

	if (s->pfd && s->pcap >= want)
		return;
	want = want + want / 2;
	pfd = rr_alloc(ep->env, sizeof(*pfd) * (want + 2));
	cns = rr_alloc(ep->env, sizeof(*cns) * want);
	if (!pfd || !cns) {
		rr_free(ep->env, pfd);
		rr_free(ep->env, cns);
		return;
	}
	rr_free(ep->env, s->pfd);
	rr_free(ep->env, s->pcns);
	s->pfd = pfd;
	s->pcns = cns;
	s->pcap = want;
}

/* Runs the sent upcalls of completed asynchronous Replies, in completion
 * order, without the endpoint's lock (they may call rr_tp_server_done).
 * Called with the lock held, on the progress thread (or by destroy). */
void tp_sv_sent_upcalls(struct rr_tp_server *s)
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
		pthread_mutex_unlock(&s->ep.lock);
		fn(arg, st);
		pthread_mutex_lock(&s->ep.lock);
	}
}

/* Hook at the end of each progress iteration: posts the deferred Replies
 * and runs the sent upcalls, until neither is left (a sent upcall may answer
 * another request: its Reply is posted now, not at the next wake-up). */
void tp_sv_after_upcalls(struct rr_tp_server *s)
{
	for (;;) {
		for (struct tp_conn *cn = s->conns; cn; cn = cn->next)
			tp_post_deferred(cn);
		for (struct tp_conn *cn = s->conns, *nx; cn; cn = nx) {
			nx = cn->next;
			if (cn->closing && !cn->dead)
				tp_sv_conn_lost(s, cn);
		}
		if (!s->sent_head && !s->bc_done)
			break;
		tp_sv_sent_upcalls(s);
		tp_sv_bc_upcalls(s);
	}
}

/* Runs the completion upcalls of backward Calls, in completion order,
 * without the endpoint's lock (lock held on entry and return). */
void tp_sv_bc_upcalls(struct rr_tp_server *s)
{
	while (s->bc_done) {
		struct rr_conn_rpc *rpc = s->bc_done;
		struct rr_tp_bc *b = rpc->xbc;

		s->bc_done = rpc->xnext;
		if (!s->bc_done)
			s->bc_done_tail = &s->bc_done;
		rpc->xnext = NULL;
		rpc->xdone = true;
		pthread_mutex_unlock(&s->ep.lock);
		b->complete(b->ctx, rpc);
		pthread_mutex_lock(&s->ep.lock);
	}
}
