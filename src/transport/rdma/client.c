/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's client (requester side of transport/rdma/tp.h): it
 * connects with our private data (RFC 8797 and the extension block), hands
 * the established connection to its session (proto/conn), reconnects after
 * a loss when Calls wait to be retransmitted (or when the next one comes),
 * and offers the Call API: submit, abort, wait (the calling thread receives
 * for itself when it is the only one waiting), release. Every protocol
 * decision is the session's. */
#include "transport/rdma/tp_int.h"

/* Work only a drain of the CQ moves on: the progress thread watches the CQ
 * while there is some (and no caller thread receives). Idle, a synchronous
 * caller's Reply wakes that caller alone. */
bool tp_cl_busy(const struct rr_tp_client *c)
{
	/* reverse Calls (RFC 8167) come unasked: a client serving them is
	 * never idle */
	return rr_conn_busy(c->sess) || c->done || c->pushes || c->bc_on || c->bc_in;
}

/* After a caller thread received for itself (a synchronous call, a push)
 * on connection @cn: whether the progress thread must look again, i.e.
 * work is left for it (other calls, a lost or changed connection); an idle
 * client's next call needs nobody else. */
bool tp_cl_needs_progress(const struct rr_tp_client *c, const struct tp_conn *cn)
{
	return tp_cl_busy(c) || c->conn != cn || !c->conn || c->conn->dead || c->conn->closing ||
	       c->reconnect_at || c->destroying;
}

void tp_cl_schedule_reconnect(struct rr_tp_client *c, uint32_t delay_ms)
{
	c->reconnect_at = tp_now_ns(&c->ep) + (uint64_t)delay_ms * 1000000u;
	tp_wake(&c->ep);
}

/* Completed Calls and reverse Calls to the upper layer, without the
 * endpoint's lock. */
static void cl_deliver(struct rr_tp_client *c)
{
	while (c->bc_in) {
		struct rr_conn_sreq *r = c->bc_in;
		rr_tp_bc_recv_fn fn = c->bc_recv;
		void *ctx = c->bc_ctx;

		c->bc_in = r->xnext;
		if (!c->bc_in)
			c->bc_in_tail = &c->bc_in;
		r->xnext = NULL;
		if (!fn) {
			rr_conn_bc_done(c->sess, r);   /* nobody serves it any more */
			continue;
		}
		c->bc_running++;
		pthread_mutex_unlock(&c->ep.lock);
		fn(ctx, r);
		pthread_mutex_lock(&c->ep.lock);
		c->bc_running--;
		pthread_cond_broadcast(&c->ep.cond);
	}
	while (c->done) {
		struct rr_conn_rpc *rpc = c->done;

		c->done = rpc->xnext;
		if (!c->done)
			c->done_tail = &c->done;
		rpc->xnext = NULL;
		rpc->xdone = true;
		pthread_mutex_unlock(&c->ep.lock);
		c->complete(c->cctx, rpc);
		pthread_mutex_lock(&c->ep.lock);
	}
	pthread_cond_broadcast(&c->ep.cond);
}

int tp_cl_connect(struct rr_tp_client *c)
{
	uint8_t pd[RR_PD_MAX_LEN];
	struct rpcrdma_conn_param prm = {0};
	struct tp_conn *cn;
	int n, rc;

	/* Receives: a Reply per credit requested, 8 spare, one per reverse
	 * Call granted (RFC 8167); as many send slots */
	cn = tp_conn_new(&c->ep, c->ep.conf.credits + 8 + c->ep.conf.bc_slots,
			 c->ep.conf.credits + 8 + c->ep.conf.bc_slots);
	if (!tp_conn_ok(cn)) {
		tp_conn_free(cn);
		return -ENOMEM;
	}
	cn->sess = c->sess;
	rc = tp_post_all_recvs(cn);
	if (rc) {
		tp_conn_free(cn);
		return rc;
	}
	n = tp_encode_pd(&c->ep, pd, sizeof(pd));
	if (n < 0) {
		tp_conn_free(cn);
		return n;
	}
	prm.private_data = pd;
	prm.private_data_len = (uint16_t)n;
	prm.responder_resources = c->ep.conf.ird;
	prm.initiator_depth = c->ep.conf.ord;
	prm.timeout_ms = c->ep.conf.connect_timeout_ms;
	/* Our private data offers RDMA Commit: serve the peer's Commits from
	 * establishment on; post ours once its accept data agreed. */
	if (c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT)
		prm.flags |= RPCRDMA_CONN_COMMIT;
	c->conn = cn;
	rc = rpcrdma_connect(c->ep.ch, cn->qp, (const struct sockaddr *)&c->addr, c->addrlen, &prm,
			     cn, &cn->id);
	if (rc) {
		c->conn = NULL;
		tp_conn_free(cn);
		return rc;
	}
	return 0;
}

/* The connection is gone: the session settles what it had on it (Calls
 * back to the queue, STags invalid with the QP), and a reconnection is
 * scheduled when Calls wait. */
void tp_cl_conn_lost(struct rr_tp_client *c, struct tp_conn *cn)
{
	if (c->conn != cn)
		return;
	if (cn->established && !cn->dead)
		c->ep.stats.fatal_errors++;
	cn->dead = true;
	rr_conn_down(c->sess);
	c->conn = NULL;
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
	tp_conn_bury(cn);
	if (c->destroying)
		return;
	if (c->ep.conf.no_reconnect) {
		rr_conn_fail_queued(c->sess, -ECONNRESET);
		return;
	}
	/* Nothing to retransmit: connect again when a Call needs it
	 * (rr_tp_client_submit), not now: a server that closes idle
	 * connections would otherwise see this client come back at once,
	 * once per its idle timeout, for nothing. */
	if (!rr_conn_has_calls(c->sess) && !c->pushes)
		return;
	tp_cl_schedule_reconnect(c, c->ep.conf.reconnect_delay_ms);
}

void tp_cl_on_cm(struct rr_tp_client *c, const struct rpcrdma_cm_event *ev)
{
	struct tp_conn *cn = ev->user_ctx;

	if (!cn || cn != c->conn)
		return;
	switch (ev->type) {
	case RPCRDMA_CM_ESTABLISHED: {
		struct rpcrdma_conn_info info;
		uint16_t ord = rpcrdma_conn_query(cn->id, &info) == 0 ? info.ord : 1;

		cn->established = true;
		cn->ord = ord ? ord : 1;
		rr_conn_up(c->sess, ev->private_data, ev->private_data_len, cn->nrecv, cn->ord, 0);
		cn->commit = rr_conn_commit(c->sess) && rpcrdma_qp_set_commit(cn->qp, true) == 0;
		if (!cn->commit && (c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT))
			(void)rpcrdma_qp_set_commit(cn->qp, false);
		if (c->connect_status == 1)
			c->connect_status = 0;
		else
			c->ep.stats.reconnects++;
		pthread_cond_broadcast(&c->ep.cond);
		break;
	}
	case RPCRDMA_CM_REJECTED:
	case RPCRDMA_CM_UNREACHABLE:
	case RPCRDMA_CM_ERROR:
	case RPCRDMA_CM_DISCONNECTED:
		if (c->connect_status == 1) {
			c->connect_status = ev->status ? ev->status : -ECONNREFUSED;
			pthread_cond_broadcast(&c->ep.cond);
			c->conn = NULL;
			tp_conn_bury(cn);
			return;
		}
		tp_cl_conn_lost(c, cn);
		break;
	default:
		break;
	}
}

static void serve_client(struct rr_tp_client *c)
{
	struct tp_ep *ep = &c->ep;
	struct tp_conn *cn = c->waiter ? NULL : c->conn;

	if (cn && !tp_cl_busy(c) && !cn->dead) {
		/* Idle: the CQ's fd is not watched, so that the next
		 * synchronous caller's Reply wakes that caller alone; a look
		 * without blocking on each wake-up (at least every 100 ms)
		 * still notices what arrives unasked (a disconnection). */
		tp_drain_cq(ep, cn);
	} else if (cn) {
		(void)rpcrdma_cq_get_event(cn->cq);
		(void)tp_arm_drain(ep, cn);
	}
	if (cn && c->conn == cn && cn->closing && cn->established)
		tp_cl_conn_lost(c, cn);   /* a fatal completion: tear down now */
	if (c->reconnect_at && tp_now_ns(ep) >= c->reconnect_at && !c->conn && !c->destroying) {
		c->reconnect_at = 0;
		if (tp_cl_connect(c))
			tp_cl_schedule_reconnect(c, c->ep.conf.reconnect_delay_ms * 4);
	}
}

/* The client's progress thread: it sleeps in poll(2) over the wake-up
 * eventfd, the CM channel and, while work only a drain moves on is pending
 * and no caller thread receives for itself, the connection's CQ; it feeds
 * CM events and completions to the session, reconnects when due, and runs
 * the completion upcalls. */
static void *cl_progress(void *arg)
{
	struct rr_tp_client *c = arg;
	struct tp_ep *ep = &c->ep;

	pthread_setname_np(pthread_self(), "rr-rdma-clnt");   /* top -H, gdb, perf */
	pthread_mutex_lock(&ep->lock);
	while (!ep->stop) {
		struct pollfd pfd[3];
		struct rpcrdma_cm_event ev;
		unsigned n = 2;
		int timeout = 100;

		pfd[0] = (struct pollfd){ep->evfd, POLLIN, 0};
		pfd[1] = (struct pollfd){rpcrdma_cm_channel_fd(ep->ch), POLLIN, 0};
		/* While a caller thread receives, it alone drains the CQ (one
		 * consumer: no lost notification). */
		if (c->conn && !c->waiter && tp_cl_busy(c))
			pfd[n++] = (struct pollfd){rpcrdma_cq_fd(c->conn->cq), POLLIN, 0};
		if (c->reconnect_at) {
			uint64_t t = tp_now_ns(ep);

			timeout = c->reconnect_at > t ?
				(int)((c->reconnect_at - t) / 1000000u) + 1 : 0;
		}
		tp_poll(ep, pfd, n, timeout);
		/* The channel's fd is readable while events are queued. */
		while ((pfd[1].revents & POLLIN) && rpcrdma_cm_get_event(ep->ch, &ev) == 0)
			tp_cl_on_cm(c, &ev);
		serve_client(c);
		cl_deliver(c);
		tp_grave_sweep(ep);
	}
	pthread_mutex_unlock(&ep->lock);
	return NULL;
}

/* Frees what create made (the progress thread is stopped; c->sess may be
 * NULL, destroyed already). */
static void cl_free(struct rr_tp_client *c)
{
	const struct rpcrdma_env *env = c->ep.env;

	if (c->conn) {
		if (c->conn->id)
			(void)rpcrdma_disconnect(c->conn->id);
		tp_conn_free(c->conn);
		c->conn = NULL;
	}
	tp_grave_sweep(&c->ep);
	tp_ep_fini(&c->ep);
	rr_conn_destroy(c->sess);
	rr_free(env, c);
}

int rr_tp_client_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_complete_fn complete, void *ctx,
			struct rr_tp_client **out)
{
	const struct rpcrdma_env *env = rr_env(conf->env);
	struct rr_conn_config cfg;
	struct rr_tp_client *c;
	struct timespec ts;
	int rc;

	*out = NULL;
	if (addrlen > sizeof(c->addr) || !complete)
		return -EINVAL;
	c = rr_zalloc(env, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->done_tail = &c->done;
	c->bc_in_tail = &c->bc_in;
	rc = tp_ep_init(&c->ep, conf, false, addr);
	if (!rc) {
		c->io = tp_client_io;
		c->io.ctx = c;
		tp_sess_config(&c->ep, &cfg);
		rc = rr_conn_create(&cfg, &c->io, &c->sess);
	}
	if (rc) {
		tp_ep_fini(&c->ep);
		rr_free(env, c);
		return rc;
	}
	memcpy(&c->addr, addr, addrlen);
	c->addrlen = addrlen;
	c->complete = complete;
	c->cctx = ctx;
	pthread_mutex_lock(&c->ep.lock);
	c->connect_status = 1;
	rc = tp_cl_connect(c);
	pthread_mutex_unlock(&c->ep.lock);
	if (rc == 0)
		rc = tp_ep_start(&c->ep, cl_progress);
	if (rc) {
		cl_free(c);
		return rc;
	}
	tp_abs_deadline(&ts, c->ep.conf.connect_timeout_ms + 1000);
	pthread_mutex_lock(&c->ep.lock);
	while (c->connect_status == 1) {
		if (pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts)) {
			c->connect_status = -ETIMEDOUT;
			break;
		}
	}
	rc = c->connect_status;
	pthread_mutex_unlock(&c->ep.lock);
	if (rc) {
		c->destroying = true;
		tp_ep_stop(&c->ep);
		cl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* The session asked to end the connection while the caller held it. */
static void cl_settle(struct rr_tp_client *c)
{
	if (c->conn && c->conn->closing && !c->conn->dead)
		tp_cl_conn_lost(c, c->conn);
}

int rr_tp_client_submit(struct rr_tp_client *c, struct rr_conn_rpc *rpc)
{
	bool up, wake = true;
	int rc;

	if (!rpc)
		return -EINVAL;
	rpc->xdone = false;
	rpc->xnext = NULL;
	pthread_mutex_lock(&c->ep.lock);
	if (c->destroying) {
		pthread_mutex_unlock(&c->ep.lock);
		return -ESHUTDOWN;
	}
	rc = rr_conn_submit(c->sess, rpc);
	if (rc) {
		pthread_mutex_unlock(&c->ep.lock);
		return rc;
	}
	cl_settle(c);
	if (!c->conn && !c->reconnect_at && c->connect_status != 1)
		tp_cl_schedule_reconnect(c, 0);   /* lost while idle: connect now */
	up = c->conn && c->conn->established && !c->conn->dead;
	if (rpc->caller_waits && !c->waiter && up) {
		/* This thread will receive the Reply itself: no hop through
		 * the progress thread, which is not woken. */
		c->waiter = true;
		c->wait_for = rpc;
		wake = false;
	} else if (tp_on_progress_thread(&c->ep)) {
		wake = false;   /* it recomputes its wait set next */
	}
	pthread_mutex_unlock(&c->ep.lock);
	if (wake)
		tp_wake(&c->ep);
	return 0;
}

void rr_tp_client_abort(struct rr_tp_client *c, struct rr_conn_rpc *rpc, int status)
{
	pthread_mutex_lock(&c->ep.lock);
	rr_conn_abort(c->sess, rpc, status);
	cl_settle(c);
	pthread_mutex_unlock(&c->ep.lock);
	tp_wake(&c->ep);
}

/* One wait of the thread that holds the receiving role (c->waiter) for at
 * most @left_ns (and 20 ms): sleeps on the connection's socket and receives
 * on this thread (rpcrdma_cq_wait), then handles what came. Bounded so that
 * state changes made by the progress thread (connection loss) are seen; the
 * connection is not freed meanwhile (in_wait). Called and returns with the
 * lock held; returns rpcrdma_cq_wait's result. */
int tp_cl_wait_once(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns)
{
	struct rpcrdma_wc wc[32];
	int n;

	cn->in_wait = true;
	pthread_mutex_unlock(&c->ep.lock);
	n = rpcrdma_cq_wait(cn->cq, (int)RR_ARRAY_SIZE(wc), wc,
			    (int)RR_MIN(left_ns / 1000000u + 1, 20u));
	pthread_mutex_lock(&c->ep.lock);
	cn->in_wait = false;
	for (int i = 0; i < n; i++)
		tp_on_wc(cn, &wc[i]);
	if (c->conn == cn && cn->closing && cn->established)
		tp_cl_conn_lost(c, cn);
	cl_deliver(c);
	return n;
}

void rr_tp_client_wait(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint32_t timeout_ms)
{
	uint64_t t0 = rr_now_ns(c->ep.env), end = t0 + (uint64_t)timeout_ms * 1000000u;
	struct tp_conn *cn0 = NULL;
	bool wake;

	pthread_mutex_lock(&c->ep.lock);
	if (c->waiter && c->wait_for != rpc) {
		pthread_mutex_unlock(&c->ep.lock);
		return;
	}
	c->waiter = true;
	c->wait_for = NULL;
	cn0 = c->conn;
	while (!rpc->xdone && !c->destroying) {
		struct tp_conn *cn = c->conn;
		uint64_t t;

		if (!cn || !cn->established || cn->dead)
			break;
		/* one clock read per call when the Reply comes in the first
		 * wait (~100 ns each on a VM) */
		t = t0 ? t0 : tp_now_ns(&c->ep);
		t0 = 0;
		if (t >= end)
			break;
		if (tp_cl_wait_once(c, cn, end - t) < 0)
			break;
	}
	c->waiter = false;
	wake = tp_cl_needs_progress(c, cn0);
	pthread_mutex_unlock(&c->ep.lock);
	if (wake)
		tp_wake(&c->ep);
}

void rr_tp_client_release_reply(struct rr_tp_client *c, struct rr_conn_rpc *rpc)
{
	pthread_mutex_lock(&c->ep.lock);
	rr_conn_release_reply(c->sess, rpc);
	pthread_mutex_unlock(&c->ep.lock);
}

void rr_tp_client_destroy(struct rr_tp_client *c)
{
	struct timespec ts;

	if (!c)
		return;
	pthread_mutex_lock(&c->ep.lock);
	c->destroying = true;
	rr_conn_abort_all(c->sess, -ECANCELED);
	cl_settle(c);
	/* Wait (bounded) for local invalidations and upcalls. */
	tp_abs_deadline(&ts, 2000);
	while (rr_conn_has_calls(c->sess) || c->done) {
		tp_wake(&c->ep);
		if (pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts))
			break;
	}
	pthread_mutex_unlock(&c->ep.lock);
	tp_ep_stop(&c->ep);
	pthread_mutex_lock(&c->ep.lock);
	/* Whatever is left (connection stuck): the session deregisters it
	 * and completes it; then the upcalls. */
	if (c->conn) {
		c->conn->dead = true;
		rr_conn_down(c->sess);
	}
	c->bc_recv = NULL;   /* reverse Calls not delivered yet: dropped */
	cl_deliver(c);
	rr_conn_destroy(c->sess);
	c->sess = NULL;
	if (c->conn)
		c->conn->sess = NULL;
	cl_deliver(c);
	/* Replies must be released before destroy (tp.h); any still lent no
	 * longer keeps its connection. */
	for (struct tp_conn *cn = c->ep.grave; cn; cn = cn->next)
		cn->lent = 0;
	pthread_mutex_unlock(&c->ep.lock);
	cl_free(c);   /* its session is gone already */
}

/* ---- backchannel (RFC 8167) ---- */

void rr_tp_client_bc_set(struct rr_tp_client *c, rr_tp_bc_recv_fn recv, void *ctx)
{
	pthread_mutex_lock(&c->ep.lock);
	c->bc_recv = recv;
	c->bc_ctx = ctx;
	/* once it returns no upcall runs the one it replaced */
	while (c->bc_running)
		pthread_cond_wait(&c->ep.cond, &c->ep.lock);
	pthread_mutex_unlock(&c->ep.lock);
}

void rr_tp_client_bc_enable(struct rr_tp_client *c, bool on)
{
	pthread_mutex_lock(&c->ep.lock);
	c->bc_on = on && c->ep.conf.bc_slots;
	rr_conn_bc_enable(c->sess, c->bc_on);
	pthread_mutex_unlock(&c->ep.lock);
	tp_wake(&c->ep);   /* the progress thread watches the CQ from now on */
}

int rr_tp_client_bc_reply(struct rr_tp_client *c, struct rr_conn_sreq *req,
			  const struct rr_xprt_part *parts, unsigned nparts)
{
	int rc;

	pthread_mutex_lock(&c->ep.lock);
	rc = rr_conn_bc_reply(c->sess, req, parts, nparts);
	cl_settle(c);
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

void rr_tp_client_bc_done(struct rr_tp_client *c, struct rr_conn_sreq *req)
{
	pthread_mutex_lock(&c->ep.lock);
	rr_conn_bc_done(c->sess, req);
	pthread_mutex_unlock(&c->ep.lock);
}

void rr_tp_client_stats(struct rr_tp_client *c, struct rr_xprt_stats *out)
{
	pthread_mutex_lock(&c->ep.lock);
	*out = c->ep.stats;
	pthread_mutex_unlock(&c->ep.lock);
}

uint32_t rr_tp_client_live_stags(struct rr_tp_client *c)
{
	uint32_t n;

	pthread_mutex_lock(&c->ep.lock);
	n = rr_conn_live_stags(c->sess);
	pthread_mutex_unlock(&c->ep.lock);
	return n;
}

int rr_tp_client_cut(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->id && c->conn->established && !c->conn->dead)
		rc = rpcrdma_disconnect(c->conn->id);
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

int rr_tp_client_params(struct rr_tp_client *c, struct rr_xprt_params *out, uint32_t *grant)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->established && rr_conn_is_up(c->sess)) {
		*out = *rr_conn_params(c->sess);
		if (grant)
			*grant = rr_conn_grant(c->sess);
		rc = 0;
	}
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

int rr_tp_client_reliable_reply(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&c->ep.lock);
	if (c->conn && c->conn->established)
		rc = rr_conn_reliable_reply(c->sess) ? 1 : 0;
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}
