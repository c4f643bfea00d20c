/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's connection manager: ids, listen / connect / accept /
 * reject / disconnect / destroy, the MPA Request/Reply exchange (RFC 5044
 * section 7.1, RFC 6581) driven by the pull parser of mpa.c, its timeout on
 * the injected clock, a listener's limits on half-open connections and its
 * accept back-off (struct rr_listen_limits, docs/security.md "Limits"), and
 * the hand-over of an established socket to its QP (go_rdma). The progress
 * thread (progress.c) calls the handshake steps when a listener or a
 * handshake socket is ready, except for a driven connect, whose creating
 * thread runs the same steps itself (rr_soft_connect_drive; its Request
 * sent at connect when the socket connected at once), and a driven
 * listener, whose consumer's thread accepts and reads the Requests
 * (rr_soft_listen_drive, on an epoll set of the listener's own); socket calls
 * go through sock.c. The ids with a deadline are on a list of their own
 * (timed_add), so that the timeouts' walk costs the handshakes running. */
#include "rdma/soft/cm.h"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "rdma/soft/chan.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/lease.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/sock.h"

#define SOFT_DEFAULT_DEPTH 16

/* ------------------------------------------------------------- ids -- */

static void id_discard(struct soft_id *id, bool counted);

/* Ids on @ch the consumer never received (c->lock held; with @ch NULL, all
 * of them: the context is closing). The dispatch layer refuses to destroy a
 * channel with counted ids, so only uncounted ones can be left here. */
void rr_soft_ids_discard_uncounted(struct soft_ctx *c, struct soft_chan *ch)
{
	struct soft_id *id = c->ids, *next;

	for (; id; id = next) {
		next = id->next_all;
		if (!ch || id->ch == ch)
			id_discard(id, false);
	}
}

int rr_soft_destroy_channel(struct rr_cm_channel *base)
{
	struct soft_chan *ch = chan_of(base);

	pthread_mutex_lock(&ch->ctx->lock);
	rr_soft_ids_discard_uncounted(ch->ctx, ch);
	pthread_mutex_unlock(&ch->ctx->lock);
	close(ch->efd);
	pthread_mutex_destroy(&ch->lock);
	rr_free(ch->ctx->env, ch->evs);
	rr_free(ch->ctx->env, ch);
	return 0;
}

static struct soft_id *id_new(struct soft_chan *ch, int fd)
{
	struct soft_id *id = rr_zalloc(ch->ctx->env, sizeof(*id));

	if (!id)
		return NULL;
	id->ch = ch;
	id->ctx = ch->ctx;
	id->obj.type = SOFT_OBJ_HANDSHAKE;
	id->obj.fd = fd;
	id->next_all = ch->ctx->ids;
	ch->ctx->ids = id;
	return id;
}

/* The timed list (c->lock held): the ids rr_soft_cm_timeouts looks at, so
 * that a handshake step costs the handshakes running, not every id of the
 * context. An id is put on it when it gets a deadline and taken off when
 * freed, or by the walk once it has none any more. */
static void timed_add(struct soft_id *id)
{
	struct soft_ctx *c = id->ctx;

	if (id->timed)
		return;
	id->timed = true;
	id->tm_prev = NULL;
	id->tm_next = c->timed;
	if (c->timed)
		c->timed->tm_prev = id;
	c->timed = id;
}

static void timed_del(struct soft_id *id)
{
	if (!id->timed)
		return;
	id->timed = false;
	if (id->tm_prev)
		id->tm_prev->tm_next = id->tm_next;
	else
		id->ctx->timed = id->tm_next;
	if (id->tm_next)
		id->tm_next->tm_prev = id->tm_prev;
	id->tm_next = id->tm_prev = NULL;
}

static bool in_handshake(const struct soft_id *id)
{
	return id->state == IDS_CONNECTING || id->state == IDS_AWAIT_REP ||
	       id->state == IDS_AWAIT_REQ;
}

static void id_unlink(struct soft_id *id)
{
	timed_del(id);
	for (struct soft_id **p = &id->ctx->ids; *p; p = &(*p)->next_all)
		if (*p == id) {
			*p = id->next_all;
			break;
		}
}

/* Handshake @id leaves its driven listener's set (c->lock held). */
static void lep_unwatch(struct soft_id *id)
{
	if (!id->in_lep)
		return;
	if (id->listen && id->listen->lep_ok)
		(void)epoll_ctl(id->listen->lep, EPOLL_CTL_DEL, id->obj.fd, NULL);
	if (id->listen)
		id->listen->lep_hs--;
	id->in_lep = false;
}

static void id_close_fd(struct soft_id *id)
{
	lep_unwatch(id);
	if (id->lep_ok) {
		close(id->lep);
		id->lep_ok = false;
	}
	rr_soft_obj_del(id->ctx, &id->obj);
	if (id->obj.fd >= 0 && !(id->qp && id->qp->obj.fd == id->obj.fd))
		close(id->obj.fd);
	id->obj.fd = -1;
}

static uint64_t deadline(struct soft_ctx *c, uint32_t ms)
{
	return rr_now_ns(c->env) + (uint64_t)(ms ? ms : SOFT_DEFAULT_TIMEOUT_MS) * 1000000u;
}

static void fill_cfg(struct rr_mpa_cfg *cfg, const struct rpcrdma_conn_param *p)
{
	cfg->rev = (p && (p->flags & RPCRDMA_CONN_SOFT_MPA_REV1)) ? 1 : 2;
	cfg->crc = p && (p->flags & RPCRDMA_CONN_SOFT_CRC);
	cfg->ird = p && p->responder_resources ? p->responder_resources : SOFT_DEFAULT_DEPTH;
	cfg->ord = p && p->initiator_depth ? p->initiator_depth : SOFT_DEFAULT_DEPTH;
	cfg->ird = RR_MIN(cfg->ird, (uint16_t)SOFT_MAX_IRD);
	cfg->ord = RR_MIN(cfg->ord, (uint16_t)SOFT_MAX_ORD);
}

static int encode_out(struct soft_id *id, struct rr_mpa_frame *f)
{
	int n = rr_mpa_encode(f, id->out, sizeof(id->out));

	if (n < 0)
		return n;
	id->out_len = (size_t)n;
	id->out_off = 0;
	return 0;
}

/* A listener's TCP_DEFER_ACCEPT (docs/security.md "Half-open connections
 * and TCP_DEFER_ACCEPT"): on unless @off, for its handshake timeout
 * @hs_timeout_ms (0: the default) rounded up to whole seconds, so that a
 * peer whose Request never comes costs no descriptor and no half-open slot
 * for at least as long as it would have held one; the kernel rounds that up
 * again to SYN-ACK retransmissions (10 s: 15 s). A failure leaves the
 * socket as it was (accepted at once, as without it). Returns the deferral
 * the kernel holds, seconds; 0: off. */
static uint32_t defer_accept(int lfd, uint32_t hs_timeout_ms, bool off)
{
	uint32_t ms = hs_timeout_ms ? hs_timeout_ms : SOFT_DEFAULT_TIMEOUT_MS;
	int r = rr_soft_sock_defer_accept(lfd, off ? 0 : ms / 1000u + (ms % 1000u != 0));

	return r > 0 ? (uint32_t)r : 0;
}

/* --------------------------------------------------------- the ops -- */

int rr_soft_listen(struct rr_cm_channel *base, const struct sockaddr *addr, socklen_t addrlen,
		   int backlog, void *user_ctx, struct rr_cm_id **out)
{
	struct soft_chan *ch = chan_of(base);
	struct soft_ctx *c = ch->ctx;
	struct soft_id *id;
	int fd = rr_soft_sock_listen(addr, addrlen, backlog);
	uint32_t defer_s;

	if (fd < 0)
		return fd;
	defer_s = defer_accept(fd, 0, false);
	pthread_mutex_lock(&c->lock);
	id = id_new(ch, fd);
	if (!id) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return -ENOMEM;
	}
	id->obj.type = SOFT_OBJ_LISTEN;
	id->state = IDS_LISTEN;
	id->max_hs = RR_LISTEN_MAX_HANDSHAKES;
	id->defer_s = defer_s;
	rr_cm_id_init(base, &id->base, user_ctx, NULL, true); /* before events */
	rr_soft_obj_add(c, &id->obj, EPOLLIN);
	pthread_mutex_unlock(&c->lock);
	*out = &id->base;
	return 0;
}

/* A driven connect whose socket connected at once (a peer on this host,
 * nearly always) sends its Request now (c->lock held): its caller sets up
 * its buffers while the peer reads it and sets up its side, and the drive
 * then waits for the Reply (issue 16 part Q). The send itself tells
 * whether the socket connected (no poll and SO_ERROR first: issue 16 part
 * BX): -EAGAIN while TCP still connects (the drive waits for POLLOUT, as
 * before); an error (a refused or reset connect) was the socket's, which
 * the send took from SO_ERROR, so it is kept in early_err for the drive's
 * first look to fail the handshake with. */
static void connect_early(struct soft_id *id)
{
	struct iovec v = {id->out, id->out_len};
	ssize_t w = rr_soft_sock_writev(id->obj.fd, &v, 1);

	if (w == -EAGAIN)
		return;
	if (w < 0) {
		id->early_err = (int)w;
		return;
	}
	/* a part of the 20-600 bytes (never seen): the rest as the drive
	 * writes a whole Request; a failure there fails the handshake */
	if ((size_t)w < id->out_len &&
	    rr_soft_sock_write_all(id->obj.fd, id->out + w, id->out_len - (size_t)w) != 0) {
		id->early_err = -ECONNRESET;
		return;
	}
	id->state = IDS_AWAIT_REP;
}

int rr_soft_connect(struct rr_cm_channel *base, struct rr_qp *qpb, const struct sockaddr *dst,
		    socklen_t dstlen, const struct rpcrdma_conn_param *param, void *user_ctx,
		    struct rr_cm_id **out)
{
	struct soft_chan *ch = chan_of(base);
	struct soft_ctx *c = ch->ctx;
	struct soft_qp *qp = RR_CONTAINER_OF(qpb, struct soft_qp, base);
	struct rr_mpa_frame f;
	struct soft_id *id;
	int fd, r;

	if (qp->state != QPS_IDLE || qp->id)
		return -EINVAL;
	fd = rr_soft_sock_open(c, dst->sa_family);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&c->lock);
	id = id_new(ch, fd);
	if (!id) {
		pthread_mutex_unlock(&c->lock);
		close(fd);
		return -ENOMEM;
	}
	fill_cfg(&id->cfg, param);
	r = rr_mpa_make_request(&id->cfg, param ? param->private_data : NULL,
				param ? param->private_data_len : 0, &f);
	if (!r)
		r = encode_out(id, &f);
	id->commit = param && (param->flags & RPCRDMA_CONN_COMMIT);
	if (!r)
		r = rr_soft_sock_connect(fd, dst, dstlen);
	if (r) {
		id_unlink(id);
		pthread_mutex_unlock(&c->lock);
		close(fd);
		rr_free(c->env, id);
		return r;
	}
	memcpy(&id->peer, dst, RR_MIN((size_t)dstlen, sizeof(id->peer)));
	id->peerlen = dstlen;
	id->qp = qp;
	qp->id = id;
	id->state = IDS_CONNECTING;
	id->timeout_ms = param ? param->timeout_ms : 0;
	id->deadline_ns = deadline(c, id->timeout_ms);
	id->driven = param && (param->flags & RR_CONN_DRIVEN);
	timed_add(id);
	rr_mpa_parser_init(&id->parser, true);
	rr_cm_id_init(base, &id->base, user_ctx, qpb, false); /* before events */
	if (!id->driven)
		rr_soft_obj_add(c, &id->obj, EPOLLOUT | EPOLLIN);
	else
		connect_early(id);
	pthread_mutex_unlock(&c->lock);
	/* the progress thread learns the new deadline; a driven handshake is
	 * timed by its driver (and by the thread's next look) */
	if (!id->driven)
		rr_soft_wake(c);
	*out = &id->base;
	return 0;
}

/* The QP takes over the socket: data path from now on. Commit: an initiator
 * that offered it serves the peer's Commit Requests from now on (before any
 * FPDU of the peer is read: race-free) and posts Commits once the upper
 * layer has seen the peer agree; a responder that agreed does both. */
/* Wakes the progress thread when c->bal_next (go_rdma lowered it) comes
 * before the time it sleeps until (read under c->lock, which the thread
 * holds from its wake-up to its next sleep; the lock is dropped here). */
static void wake_for_deadline(struct soft_ctx *c)
{
	bool wake = c->bal_next < atomic_load(&c->sleep_until);

	pthread_mutex_unlock(&c->lock);
	if (wake)
		rr_soft_wake(c);
}

/* The FPDU size of @id's socket (its family from the peer's address). */
static size_t sock_fpdu_max(const struct soft_id *id)
{
	return rr_soft_sock_fpdu_max(id->obj.fd, id->peerlen ? id->peer.ss_family : AF_UNSPEC);
}

static void go_rdma(struct soft_id *id, bool active)
{
	struct soft_qp *qp = id->qp;
	int fd = id->obj.fd;
	bool fast;

	rr_soft_obj_del(id->ctx, &id->obj);
	/* the family from the peer's address (connect's, or accept's): no
	 * getsockname on the path to the first Call (issue 16 part AT); a
	 * driven connect's driver set the socket up already (drive_prep) */
	if (id->prepped) {
		qp->fpdu_max = id->pre_fpdu;
		fast = id->pre_fast;
	} else {
		qp->fpdu_max = sock_fpdu_max(id);
		fast = id->ctx->fast_wait && rr_soft_sock_fast_setup(fd) == 0;
	}
	/* Before rr_soft_qp_connected sets the state to RTS under rx_lock,
	 * but a CQ's fast waiter may look at the QP already (it is among its
	 * CQ's QPs since its creation): an atomic store, relaxed, and relaxed
	 * loads there (cq_wait.c): a look that finds the state RTS holds
	 * rx_lock taken after rr_soft_qp_connected let it go, so it sees this
	 * store; an earlier look goes no further than the state. */
	__atomic_store_n(&qp->fast_ok, fast, __ATOMIC_RELAXED);
	rr_soft_qp_connected(qp, fd, &id->conn, id->commit, id->commit && !active);
	id->state = IDS_CONNECTED;
	/* the progress thread serves it until its consumer shows up; one
	 * already attending takes it now. The balance decides (it hands the
	 * QP over when its CQ is not attended, then looks again): handing it
	 * first and taking it back cost two epoll_ctl calls per connect on
	 * each side, and the add woke the progress thread for nothing (issue
	 * 16 part Y) */
	rr_soft_balance_one(id->ctx, qp, rr_now_ns(id->ctx->env));
}

int rr_soft_accept(struct rr_cm_id *base, struct rr_qp *qpb, const struct rpcrdma_conn_param *param)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp = RR_CONTAINER_OF(qpb, struct soft_qp, base);
	struct rr_mpa_frame f;
	int r;

	pthread_mutex_lock(&c->lock);
	if (id->state != IDS_REQ_RCVD || qp->state != QPS_IDLE || qp->id) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	fill_cfg(&id->cfg, param);
	r = rr_mpa_responder_check(&id->cfg, &id->frame, &id->conn);
	if (!r)
		r = rr_mpa_make_reply(&id->conn, false, param ? param->private_data : NULL,
				      param ? param->private_data_len : 0, &f);
	if (!r)
		r = encode_out(id, &f);
	if (!r)
		r = rr_soft_sock_write_all(id->obj.fd, id->out, id->out_len);
	if (r) {
		pthread_mutex_unlock(&c->lock);
		return r;
	}
	id->commit = param && (param->flags & RPCRDMA_CONN_COMMIT);
	id->qp = qp;
	qp->id = id;
	go_rdma(id, false);
	rr_soft_id_event(id, RPCRDMA_CM_ESTABLISHED, 0, NULL);
	/* the progress thread serves the new QP (go_rdma balanced it: given
	 * back at once if its CQ is attended); it is woken when that made a
	 * deadline earlier than the one it sleeps until (the CQ's lease) */
	wake_for_deadline(c);
	return 0;
}

int rr_soft_reject(struct rr_cm_id *base, const void *data, uint16_t len)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct rr_mpa_frame f;
	int r;

	pthread_mutex_lock(&c->lock);
	if (id->state != IDS_REQ_RCVD) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	r = rr_mpa_make_reply(&id->conn, true, data, len, &f);
	if (!r)
		r = encode_out(id, &f);
	if (!r)
		r = rr_soft_sock_write_all(id->obj.fd, id->out, id->out_len);
	id_close_fd(id);
	id->state = IDS_CLOSED;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int rr_soft_disconnect(struct rr_cm_id *base)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp;

	pthread_mutex_lock(&c->lock);
	qp = id->qp;
	if (qp && id->state == IDS_CONNECTED) {
		rr_lock(&qp->rx_lock);
		rr_soft_qp_fatal(qp, 0, NULL);
		rr_unlock(&qp->rx_lock);
	} else if (id->state != IDS_LISTEN && id->state != IDS_CLOSED) {
		id_close_fd(id);
		id->state = IDS_CLOSED;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* Frees an id the consumer never received (c->lock held): a passive one
 * still waiting for its MPA Request, or one whose CONNECT_REQUEST is dropped
 * (@counted: then it is uncounted). Closing the socket tells the peer. */
static void id_discard(struct soft_id *id, bool counted)
{
	if (id->state == IDS_AWAIT_REQ && id->listen)
		id->listen->nhs--;
	id_close_fd(id);
	id_unlink(id);
	if (counted)
		rr_cm_id_dropped(&id->ch->base, &id->base);
	rr_free(id->ctx->env, id);
}

/* Drops the queued events naming @id (c->lock held), so that no consumer
 * ever reads a destroyed id. A CONNECT_REQUEST that came through the
 * listener @id names a new id nobody will receive: it is freed too. */
static void chan_purge(struct soft_id *id)
{
	struct soft_chan *ch = id->ch;
	struct rpcrdma_cm_id *pub = RR_PUB(cm_id, &id->base);
	unsigned keep = 0;

	pthread_mutex_lock(&ch->lock);
	for (unsigned i = 0; i < ch->ev_count; i++) {
		struct rpcrdma_cm_event *e = &ch->evs[(ch->ev_head + i) % ch->ev_cap];

		if (e->listen_id == pub && e->type == RPCRDMA_CM_CONNECT_REQUEST && e->id) {
			id_discard(id_of(RR_BASE(cm_id, e->id)), true);
			continue;
		}
		if (e->id == pub || e->listen_id == pub)
			continue;
		ch->evs[(ch->ev_head + keep++) % ch->ev_cap] = *e;
	}
	ch->ev_count = keep;
	if (!keep && ch->signaled) {
		uint64_t v;

		if (read(ch->efd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
		ch->signaled = false;
	}
	pthread_mutex_unlock(&ch->lock);
}

/* A listener going away takes the connections still waiting for their MPA
 * Request with it (c->lock held); delivered ones forget it. */
static void listener_gone(struct soft_id *l)
{
	struct soft_id *id = l->ctx->ids, *next;

	for (; id; id = next) {
		next = id->next_all;
		if (id->listen != l)
			continue;
		if (id->state == IDS_AWAIT_REQ)
			id_discard(id, false);
		else
			id->listen = NULL;
	}
}

/* ctx->lock, rx_lock and tx_lock held (destroy paths), the fast reader
 * gone: rr_soft_fast_quiesce called with rx_lock held before tx_lock was
 * taken, and rx_lock kept since (no new fast read; rx.c explains why the
 * quiesce may not wait with tx_lock held). */
void rr_soft_qp_closed(struct soft_qp *qp)
{
	if (qp->obj.in_epoll) {
		rr_soft_obj_del(qp->ctx, &qp->obj);
		atomic_fetch_sub(&qp->rcq->handed, 1);
		if (qp->scq != qp->rcq)
			atomic_fetch_sub(&qp->scq->handed, 1);
	}
	rr_soft_unwatch(qp);
	if (qp->id) {
		qp->id->qp = NULL;
		qp->id = NULL;
	}
	if (qp->obj.fd >= 0)
		close(qp->obj.fd);
	qp->obj.fd = -1;
	__atomic_store_n(&qp->state, QPS_ERROR, __ATOMIC_RELAXED);   /* soft.h */
}

int rr_soft_destroy_id(struct rr_cm_id *base)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	struct soft_qp *qp;

	pthread_mutex_lock(&c->lock);
	qp = id->qp;
	if (qp) {
		/* The id's socket is its QP's once connected: the QP closes
		 * it, so the id's registrations go first, while the
		 * descriptor is open (a DEL of a closed one fails and can
		 * leave the progress thread's registration behind, naming
		 * this id after it is freed). A handshake's socket is the
		 * id's alone: id_close_fd closes it below. */
		bool shared = id->obj.fd >= 0 && qp->obj.fd == id->obj.fd;

		if (shared) {
			lep_unwatch(id);
			rr_soft_obj_del(c, &id->obj);
		}
		rr_lock(&qp->rx_lock);
		if (qp->state == QPS_RTS) {
			qp->disconnect_reported = true; /* the id is going away */
			rr_soft_qp_fatal(qp, -ECONNABORTED, NULL);
		}
		rr_soft_fast_quiesce(qp); /* before tx_lock (rx.c) */
		rr_lock(&qp->tx_lock);
		rr_soft_qp_closed(qp);
		rr_unlock(&qp->tx_lock);
		rr_unlock(&qp->rx_lock);
		if (shared)
			id->obj.fd = -1;
	}
	if (id->state == IDS_LISTEN)
		listener_gone(id);
	chan_purge(id);
	id_close_fd(id);
	id_unlink(id);
	pthread_mutex_unlock(&c->lock);
	rr_free(c->env, id);
	return 0;
}

/* The local (@peer: remote) address of @base's socket, the handshake's or,
 * once connected, its QP's. */
static int id_addr(struct rr_cm_id *base, struct sockaddr_storage *ss, bool peer)
{
	struct soft_id *id = id_of(base);
	int fd = id->obj.fd >= 0 ? id->obj.fd : (id->qp ? id->qp->obj.fd : -1);

	if (fd < 0)
		return -ENOTCONN;
	return rr_soft_sock_name(fd, ss, peer);
}

int rr_soft_local_addr(struct rr_cm_id *base, struct sockaddr_storage *ss)
{
	return id_addr(base, ss, false);
}

int rr_soft_peer_addr(struct rr_cm_id *base, struct sockaddr_storage *ss)
{
	struct soft_id *id = id_of(base);

	if (id->peer_known) {
		memset(ss, 0, sizeof(*ss));
		memcpy(ss, &id->peer, id->peerlen);
		return 0;
	}
	return id_addr(base, ss, true);
}

/* --------------------------------------------------- the handshake -- */

static void id_fail(struct soft_id *id, enum rpcrdma_cm_event_type type, int status,
		    const struct rr_mpa_frame *f)
{
	bool active = id->qp != NULL;

	if (id->state == IDS_AWAIT_REQ) {
		/* a passive one nobody received: freed now (it used to stay
		 * in ctx->ids, closed, until the channel was destroyed: one
		 * soft_id per peer that connected and went away) */
		id_discard(id, false);
		return;
	}
	id_close_fd(id);
	id->state = IDS_CLOSED;
	if (active) {
		id->qp->id = NULL;
		id->qp = NULL;
		rr_soft_id_event(id, type, status, f);
	}
}

/* The handshake's bytes are not MPA (*@r -EPROTO: wrong key). A peer that
 * speaks ONC RPC over plain TCP is told apart: as initiator, a Reply in
 * record marking (a tcp:// server) fails the connection with -EPROTOTYPE
 * instead of a bare protocol error; as responder, whatever the bytes, the
 * peer gets an MPA Reject (R set, revision 1, no private data), the answer
 * to a Request the responder refuses, so a tcp:// client reads "MPA ID Rep
 * Frame" and can say that this server speaks rdma://. The rest of what it sent (up to 4
 * KiB: a Call) is read first, so closing sends a FIN, not a reset that
 * could overtake the Reject. */
static void handshake_foreign(struct soft_id *id, int *r)
{
	if (*r != -EPROTO)
		return;
	if (id->state == IDS_AWAIT_REP) {
		if (rr_mpa_looks_like_rpc(id->parser.buf, id->parser.have))
			*r = -EPROTOTYPE;
		return;
	}
	if (id->state == IDS_AWAIT_REQ) {
		struct rr_mpa_conn conn = {.rev = 1};
		struct rr_mpa_frame f;
		uint8_t sink[4096];
		struct iovec v = {sink, sizeof(sink)};

		(void)rr_soft_sock_readv(id->obj.fd, &v, 1);
		if (rr_mpa_make_reply(&conn, true, NULL, 0, &f) == 0 && encode_out(id, &f) == 0)
			rr_soft_sock_write_all(id->obj.fd, id->out, id->out_len);
	}
}

/* Reads exactly what the MPA parser asks for: never a byte of FPDU data.
 * True when the frame is not all here yet (the socket would block): @id
 * still waits for it. False otherwise, when @id may be gone (discarded). */
static bool handshake_read(struct soft_id *id)
{
	for (;;) {
		uint8_t *dst;
		size_t w = rr_mpa_want(&id->parser, &dst);
		struct iovec v = {dst, w};
		ssize_t n;
		int r;

		if (!w)
			break;
		n = rr_soft_sock_readv(id->obj.fd, &v, 1);
		if (n == -EAGAIN)
			return true;
		if (n <= 0) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, n == 0 ? -ECONNRESET : (int)n, NULL);
			return false;
		}
		r = rr_mpa_advance(&id->parser, (size_t)n);
		if (r < 0) {
			handshake_foreign(id, &r);
			id_fail(id, RPCRDMA_CM_ERROR, r, NULL);
			return false;
		}
		if (r == 1)
			break;
	}
	if (rr_mpa_parser_frame(&id->parser, &id->frame) != 0) {
		id_fail(id, RPCRDMA_CM_ERROR, -EPROTO, NULL);
		return false;
	}
	if (id->state == IDS_AWAIT_REP) {
		struct rr_term t;
		int r = rr_mpa_initiator_check(&id->cfg, &id->frame, &id->conn, &t);

		if (r == -ECONNREFUSED) {
			id_fail(id, RPCRDMA_CM_REJECTED, r, &id->frame);
			return false;
		}
		if (r) {
			id_fail(id, RPCRDMA_CM_ERROR, r, NULL);
			return false;
		}
		go_rdma(id, true);
		rr_soft_id_event(id, RPCRDMA_CM_ESTABLISHED, 0, &id->frame);
		return false;
	}
	/* passive: a Request */
	{
		struct rr_mpa_cfg prov = {.rev = 2, .ird = SOFT_MAX_IRD, .ord = SOFT_MAX_ORD};
		int r = rr_mpa_responder_check(&prov, &id->frame, &id->conn);
		struct rpcrdma_cm_event ev;

		if (r) {
			struct rr_mpa_frame f;

			/* siw: reject with R set, markers cleared */
			if (rr_mpa_make_reply(&id->conn, true, NULL, 0, &f) == 0 && encode_out(id, &f) == 0)
				rr_soft_sock_write_all(id->obj.fd, id->out, id->out_len);
			id_discard(id, false);
			return false;
		}
		if (id->listen)
			id->listen->nhs--;
		id->state = IDS_REQ_RCVD;
		lep_unwatch(id);
		rr_soft_obj_del(id->ctx, &id->obj);
		rr_cm_id_created(&id->ch->base, &id->base);
		memset(&ev, 0, offsetof(struct rpcrdma_cm_event, private_data));
		ev.type = RPCRDMA_CM_CONNECT_REQUEST;
		ev.id = RR_PUB(cm_id, &id->base);
		ev.listen_id = RR_PUB(cm_id, id->listen ? &id->listen->base : NULL);
		/* ev.user_ctx: filled at consumption by the dispatch layer. */
		ev.peer_ird = id->frame.enhanced ? (id->frame.ird & RR_MPA_IRDORD_MASK) : 0;
		ev.peer_ord = id->frame.enhanced ? (id->frame.ord & RR_MPA_IRDORD_MASK) : 0;
		ev.private_data_len = id->frame.pd_len;
		memcpy(ev.private_data, id->frame.pd, id->frame.pd_len);
		rr_soft_chan_push(id->ch, &ev);
	}
	return false;
}

/* The oldest half-open connection of listener @l (c->lock held), or NULL. */
static struct soft_id *hs_oldest(struct soft_id *l)
{
	struct soft_id *old = NULL;

	for (struct soft_id *id = l->ctx->timed; id; id = id->tm_next)
		if (id->listen == l && id->state == IDS_AWAIT_REQ &&
		    (!old || id->hs_seq < old->hs_seq))
			old = id;
	return old;
}

/* Closes the oldest half-open connection of @l (counted); false if none. */
static bool hs_drop_oldest(struct soft_id *l)
{
	struct soft_id *old = hs_oldest(l);

	if (!old)
		return false;
	l->lstats.handshakes_dropped++;
	id_discard(old, false);
	return true;
}

/* Driven listener @l goes back to the progress thread with the handshakes
 * waiting in its set (c->lock held); the listening socket itself joins the
 * thread's set only when accepting is not paused. */
static void lep_release(struct soft_id *l)
{
	l->ldriven = false;
	for (struct soft_id *id = l->ctx->ids; id; id = id->next_all)
		if (id->listen == l && id->in_lep) {
			lep_unwatch(id);
			rr_soft_obj_add(l->ctx, &id->obj, EPOLLIN);
		}
	if (!l->resume_ns)
		rr_soft_obj_add(l->ctx, &l->obj, EPOLLIN);
}

/* A handshake of listener @l waits for its Request (c->lock held): in the
 * set of @l's driver when it is driven, else the progress thread's. */
static void hs_watch(struct soft_id *l, struct soft_id *id)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &id->obj};

	if (l->ldriven && epoll_ctl(l->lep, EPOLL_CTL_ADD, id->obj.fd, &ev) == 0) {
		id->in_lep = true;
		l->lep_hs++;
	} else
		rr_soft_obj_add(l->ctx, &id->obj, EPOLLIN);
}

/* accept4 failed for want of file descriptors or memory (@err): the
 * listener leaves the epoll set for a while (rr_backoff_begin;
 * rr_soft_cm_timeouts puts it back); the connections it did not take wait in the
 * kernel's queue, and established ones keep being served. */
static void listen_backoff(struct soft_id *l, int err)
{
	l->resume_ns = rr_backoff_begin(&l->backoff, l->ctx->env, "soft provider", err);
	rr_soft_obj_del(l->ctx, &l->obj);
	/* a driven listener goes back to the progress thread, which ends
	 * the pause (rr_soft_listen_drive tells its driver to stop watching) */
	if (l->ldriven)
		lep_release(l);
	timed_add(l);
}

void rr_soft_cm_listen_ready(struct soft_id *l)
{
	for (int n = 0; n < SOFT_ACCEPT_BATCH; n++) {
		struct sockaddr_storage peer;
		socklen_t peerlen;
		int fd = rr_soft_sock_accept(l->obj.fd, &peer, &peerlen);
		struct soft_id *id;

		if (fd < 0) {
			int e = -fd;

			if (e == EAGAIN || e == EWOULDBLOCK)
				return;
			/* out of descriptors: a half-open connection's goes
			 * first (the peer that finishes its handshake gets
			 * served, the one that never will does not; the
			 * consumer sheds more for a connection's other fds:
			 * rr_cm_listen_shed) */
			if (e == EMFILE && hs_drop_oldest(l))
				continue;
			if (rr_backoff_wanted(e)) {
				listen_backoff(l, e);
				return;
			}
			/* a connection that failed before we took it
			 * (ECONNABORTED, network errors passed on by accept):
			 * it is gone from the queue; take the next */
			continue;
		}
		l->backoff.ms = 0;
		rr_soft_sock_accepted_opts(l->ctx, fd);
		if (l->nhs >= l->max_hs)
			hs_drop_oldest(l);
		id = id_new(l->ch, fd);
		if (!id) {
			close(fd);
			continue;
		}
		id->listen = l;
		/* the peer's address as accept gave it: the consumer asks for
		 * it (limits per host, the connection's peer) without a
		 * getpeername each time (issue 16 part Y) */
		if (peerlen > 0 && peerlen <= sizeof(peer)) {
			id->peer = peer;
			id->peerlen = peerlen;
			id->peer_known = true;
		}
		id->state = IDS_AWAIT_REQ;
		id->hs_seq = l->hs_next++;
		l->nhs++;
		id->deadline_ns = deadline(l->ctx, l->hs_timeout_ms);
		timed_add(id);
		rr_mpa_parser_init(&id->parser, false);
		/* a peer that connects and sends its Request at once (ours
		 * drive their handshake in the connecting thread) has it here
		 * already: read now, not after another turn of this thread
		 * (EAGAIN otherwise: one recvfrom); the socket joins the
		 * epoll set only when the Request is not all here (two
		 * epoll_ctl calls fewer per connection otherwise) */
		if (handshake_read(id)) {
			hs_watch(l, id);
			continue;
		}
		/* its handshake ended here (a CONNECT_REQUEST for the
		 * consumer, or a failure): the batch ends with it, so that
		 * its consumer answers it before this accepts again, without
		 * an accept4 that finds nothing in front of its MPA Reply (the
		 * listening socket is level-triggered: one still queued
		 * brings the next turn at once; issue 16 part DI) */
		return;
	}
}

int rr_soft_listen_driven(struct rr_cm_id *base, bool on)
{
	struct soft_id *l = id_of(base);
	struct soft_ctx *c = l->ctx;
	int r;

	pthread_mutex_lock(&c->lock);
	if (l->state != IDS_LISTEN) {
		r = -EINVAL;
	} else if (!on) {
		if (l->ldriven)
			lep_release(l);
		r = 0;
	} else if (l->resume_ns) {
		r = -EBUSY;              /* paused: the progress thread's */
	} else if (l->ldriven) {
		r = l->lep;
	} else {
		r = 0;
		if (!l->lep_ok) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &l->obj};

			l->lep = epoll_create1(EPOLL_CLOEXEC);
			if (l->lep < 0) {
				r = -errno;
			} else if (epoll_ctl(l->lep, EPOLL_CTL_ADD, l->obj.fd, &ev) != 0) {
				r = -errno;
				close(l->lep);
			} else {
				l->lep_ok = true;
			}
		}
		if (!r) {
			rr_soft_obj_del(c, &l->obj);
			l->ldriven = true;
			r = l->lep;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int rr_soft_listen_drive(struct rr_cm_id *base)
{
	struct soft_id *l = id_of(base);
	struct soft_ctx *c = l->ctx;
	struct epoll_event evs[SOFT_ACCEPT_BATCH];
	uint64_t due = UINT64_MAX;
	bool wake;
	int r = 0, n;

	pthread_mutex_lock(&c->lock);
	if (l->state != IDS_LISTEN || !l->ldriven) {
		pthread_mutex_unlock(&c->lock);
		return 1;
	}
	/* no handshake in the set: the listening socket is all it holds,
	 * and its readiness is what the driver was woken for; accepted at
	 * once, without asking the set (an epoll_wait per connect; at worst
	 * one accept4 finds nothing) */
	if (!l->lep_hs) {
		evs[0].data.ptr = &l->obj;
		n = 1;
	} else {
		n = epoll_wait(l->lep, evs, SOFT_ACCEPT_BATCH, 0);
	}
	/* the handshakes first: accepting may close one (the oldest at the
	 * half-open limit) whose readiness is further on in @evs; nothing
	 * else closes one meanwhile (c->lock) */
	for (int i = 0; i < n; i++)
		if (evs[i].data.ptr != &l->obj)
			rr_soft_cm_handshake_ready(RR_CONTAINER_OF(evs[i].data.ptr, struct soft_id, obj),
						   evs[i].events);
	for (int i = 0; i < n; i++)
		if (evs[i].data.ptr == &l->obj)
			rr_soft_cm_listen_ready(l);
	if (!l->ldriven) {
		r = 1;   /* paused: given back to the progress thread */
		due = l->resume_ns;
	} else if (l->nhs) {
		/* the newest half-open connection's deadline (the older
		 * ones' come first: a thread sleeping until one of those
		 * looks in time) */
		due = deadline(c, l->hs_timeout_ms);
	}
	/* the progress thread times the half-open connections left waiting
	 * for their Request (in the driver's set) and ends the pause: it
	 * looks before the deadline it sleeps until would have it */
	wake = due < atomic_load(&c->sleep_until);
	pthread_mutex_unlock(&c->lock);
	if (wake)
		rr_soft_wake(c);
	return r;
}

int rr_soft_listen_limits(struct rr_cm_id *base, const struct rr_listen_limits *lim)
{
	struct soft_id *l = id_of(base);
	struct soft_ctx *c = l->ctx;

	pthread_mutex_lock(&c->lock);
	l->max_hs = lim->max_handshakes ? lim->max_handshakes : RR_LISTEN_MAX_HANDSHAKES;
	l->hs_timeout_ms = lim->timeout_ms;
	l->defer_s = defer_accept(l->obj.fd, lim->timeout_ms, lim->no_defer_accept);
	while (l->nhs > l->max_hs && hs_drop_oldest(l)) {
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int rr_soft_listen_shed(struct rr_cm_id *base, unsigned n)
{
	struct soft_id *l = id_of(base);
	struct soft_ctx *c = l->ctx;
	unsigned k = 0;

	pthread_mutex_lock(&c->lock);
	while (k < n && hs_drop_oldest(l))
		k++;
	pthread_mutex_unlock(&c->lock);
	return (int)k;
}

int rr_soft_listen_stats(struct rr_cm_id *base, struct rr_listen_stats *out)
{
	struct soft_id *l = id_of(base);
	struct soft_ctx *c = l->ctx;

	pthread_mutex_lock(&c->lock);
	*out = l->lstats;
	out->accept_backoffs = l->backoff.count;
	out->handshakes = l->nhs;
	out->defer_accept_s = l->defer_s;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void rr_soft_cm_handshake_ready(struct soft_id *id, uint32_t events)
{
	if (id->state == IDS_CONNECTING) {
		int err;

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && !id->early_err)
			return;
		err = id->early_err ? id->early_err : rr_soft_sock_error(id->obj.fd);
		if (err) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, err, NULL);
			return;
		}
		if (rr_soft_sock_write_all(id->obj.fd, id->out, id->out_len) != 0) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -ECONNRESET, NULL);
			return;
		}
		id->state = IDS_AWAIT_REP;
		rr_soft_obj_mod(id->ctx, &id->obj, EPOLLIN);
		return;
	}
	if (id->state == IDS_AWAIT_REP || id->state == IDS_AWAIT_REQ)
		handshake_read(id);
}

/* MPA timeout on a silent peer, and the end of a listener's accept
 * back-off, on the injected clock. Returns the earliest deadline of the
 * handshakes still running and the pauses (UINT64_MAX: none). */
uint64_t rr_soft_cm_timeouts(struct soft_ctx *c, uint64_t now)
{
	struct soft_id *id = c->timed, *next;
	uint64_t first = UINT64_MAX;

	for (; id; id = next) {
		next = id->tm_next;
		if (!in_handshake(id) && !(id->state == IDS_LISTEN && id->resume_ns)) {
			timed_del(id); /* deadline gone: off the list */
			continue;
		}
		if (id->state == IDS_LISTEN) {
			/* accept back-off over: watched again (level-triggered:
			 * what waits in its queue wakes the thread at once) */
			if (now < id->resume_ns) {
				first = RR_MIN(first, id->resume_ns);
			} else {
				id->resume_ns = 0;
				rr_soft_obj_add(c, &id->obj, EPOLLIN);
			}
			continue;
		}
		if (id->drive_ev)
			continue; /* its driver times it (and polls its socket) */
		if (now < id->deadline_ns) {
			first = RR_MIN(first, id->deadline_ns);
			continue;
		}
		if (id->state == IDS_AWAIT_REQ) {
			if (id->listen)
				id->listen->lstats.handshakes_dropped++;
			id_discard(id, false);
		} else {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -ETIMEDOUT, NULL);
		}
	}
	return first;
}

/* poll(2)'s timeout until @end_ns on clock @env (UINT64_MAX: none) and
 * @real_end (real time), at least 1 ms when not due; an injected clock may
 * jump: then at most SOFT_TICK_MS. */
static int drive_sleep_ms(const struct soft_ctx *c, uint64_t end_ns, uint64_t real_end)
{
	uint64_t now = rr_now_ns(c->env), rnow = rr_now_ns(NULL), ms = UINT64_MAX;

	if (end_ns != UINT64_MAX)
		ms = end_ns > now ? (end_ns - now + 999999u) / 1000000u : 0;
	ms = RR_MIN(ms, real_end > rnow ? (real_end - rnow + 999999u) / 1000000u : 0);
	if (!c->coarse_res_ns)
		ms = RR_MIN(ms, (uint64_t)SOFT_TICK_MS);
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/* A driven connect whose Request is out (c->lock held): its socket set up
 * for the data path now, while the peer reads the Request and sets its
 * side up, not between the Reply and the first Call (issue 16 part DI):
 * the FPDU size (the TCP connection is up: its MSS and path MTU are
 * known), and, for fast waits, blocking with the receive timeout (every
 * handshake call on it passes MSG_DONTWAIT, as every other call does).
 * go_rdma takes what this found; a Reply that fails the handshake leaves
 * it unused. */
static void drive_prep(struct soft_id *id)
{
	id->pre_fpdu = sock_fpdu_max(id);
	id->pre_fast = id->ctx->fast_wait && rr_soft_sock_fast_setup(id->obj.fd) == 0;
	id->prepped = true;
}

int rr_soft_connect_drive(struct rr_cm_id *base, int timeout_ms, struct rpcrdma_cm_event *ev)
{
	struct soft_id *id = id_of(base);
	struct soft_ctx *c = id->ctx;
	uint64_t real_end = rr_now_ns(NULL) + (uint64_t)timeout_ms * 1000000u;
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (!id->driven || id->drive_ev || !in_handshake(id)) {
		pthread_mutex_unlock(&c->lock);
		return -EINVAL;
	}
	id->drive_ev = ev;
	id->drive_done = false;
	while (!id->drive_done) {
		struct pollfd pfd;
		int n;

		if (!in_handshake(id) || id->obj.fd < 0) {
			r = -ECONNABORTED; /* disconnected meanwhile */
			break;
		}
		if (rr_now_ns(c->env) >= id->deadline_ns) {
			id_fail(id, RPCRDMA_CM_UNREACHABLE, -ETIMEDOUT, NULL);
			continue;
		}
		if (rr_now_ns(NULL) >= real_end) {
			r = -ETIMEDOUT;
			break;
		}
		if (id->state == IDS_AWAIT_REP && !id->prepped) {
			drive_prep(id);
			/* the Reply is often here by now (the peer answered
			 * while the caller set up its buffers and this its
			 * socket): read before sleeping, no poll first */
			rr_soft_cm_handshake_ready(id, EPOLLIN);
			continue;
		}
		pfd.fd = id->obj.fd;
		pfd.events = id->state == IDS_CONNECTING ? POLLOUT : POLLIN;
		pfd.revents = 0;
		n = drive_sleep_ms(c, id->deadline_ns, real_end);
		pthread_mutex_unlock(&c->lock);
		n = poll(&pfd, 1, n);
		if (n < 0)
			n = errno == EINTR ? 0 : -errno;
		pthread_mutex_lock(&c->lock);
		if (n < 0) {
			r = n;
			break;
		}
		if (n > 0) {
			uint32_t e = ((pfd.revents & POLLIN) ? EPOLLIN : 0) |
				     ((pfd.revents & POLLOUT) ? EPOLLOUT : 0) |
				     ((pfd.revents & POLLERR) ? EPOLLERR : 0) |
				     ((pfd.revents & POLLHUP) ? EPOLLHUP : 0);

			rr_soft_cm_handshake_ready(id, e);
		}
	}
	id->drive_ev = NULL;
	/* established: the progress thread serves the QP until its consumer
	 * waits, and is told of a deadline go_rdma made */
	wake_for_deadline(c);
	return r;
}
