/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's client (requester side of transport/rdma/tp.h): it
 * connects with our private data (RFC 8797 and the extension block), hands
 * the established connection to its session (proto/conn), reconnects after
 * a loss when Calls wait to be retransmitted (or when the next one comes),
 * and offers the Call API: submit, abort, wait (the calling thread receives
 * for itself when it is the only one waiting), release. It has no thread:
 * its CM events and completions are served by its progress loop (the
 * port's channel and CQ, port.c and progress.c), which runs its turn
 * (reconnection, upcalls) when kicked. Every protocol decision is the
 * session's. */
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
static inline __attribute__((always_inline)) bool cl_needs_progress(const struct rr_tp_client *c,
								    const struct tp_conn *cn)
{
	return tp_cl_busy(c) || c->conn != cn || !c->conn || c->conn->dead || c->conn->closing ||
	       c->reconnect_at || c->destroying;
}

/* (inline in cl_wait_locked, every synchronous call's end) */
bool tp_cl_needs_progress(const struct rr_tp_client *c, const struct tp_conn *cn)
{
	return cl_needs_progress(c, cn);
}

/* The loop's timer for the reconnection (real time; a virtual clock is
 * looked at again at least every 100 ms). */
static void reconnect_timer(struct rr_tp_client *c)
{
	uint64_t now = tp_now_ns(&c->ep), d;

	if (!c->reconnect_at || !c->ep.timer_ok)
		return;
	d = c->reconnect_at > now ? c->reconnect_at - now : 0;
	if (c->ep.env != rpcrdma_env_default())
		d = RR_MIN(d, 100000000ull);
	rr_loop_timer_set(c->ep.loop, &c->ep.timer, rr_now_ns(NULL) + d);
}

void tp_cl_schedule_reconnect(struct rr_tp_client *c, uint32_t delay_ms)
{
	c->reconnect_at = tp_now_ns(&c->ep) + (uint64_t)delay_ms * 1000000u;
	reconnect_timer(c);
}

/* Whether @rpc is on the completed list @done. */
static bool done_has(const struct rr_conn_rpc *done, const struct rr_conn_rpc *rpc)
{
	for (; done; done = done->xnext)
		if (done == rpc)
			return true;
	return false;
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
		rr_unlock(&c->ep.lock);
		fn(ctx, r);
		rr_lock(&c->ep.lock);
		c->bc_running--;
		rr_cond_broadcast(&c->ep.cond);
	}
	while (c->done) {
		struct rr_conn_rpc *rpc = c->done;

		c->done = rpc->xnext;
		if (!c->done)
			c->done_tail = &c->done;
		rpc->xnext = NULL;
		rpc->xdone = true;
		rr_unlock(&c->ep.lock);
		c->complete(c->cctx, rpc);
		rr_lock(&c->ep.lock);
	}
	rr_cond_broadcast(&c->ep.cond);
}

/* The connection's buffers and Receives (before any byte of the peer
 * can be read): 0 or -errno. */
static int cl_conn_bufs(struct tp_conn *cn)
{
	int rc = tp_conn_bufs(cn);

	if (rc == 0 && !tp_conn_ok(cn))
		rc = -ENOMEM;
	if (rc)
		return rc;
	/* its backward Receives and a batch; the others by demand (conn.c
	 * "Receives by demand") */
	cn->rbase = cn->ep->conf.bc_slots + TP_RECV_SLACK;
	return tp_post_first_recvs(cn, cn->rbase + TP_RECV_BATCH - 1);
}

int tp_cl_connect(struct rr_tp_client *c, bool *driven)
{
	uint8_t pd[RR_PD_MAX_LEN];
	struct rpcrdma_conn_param prm = {0};
	struct tp_conn *cn;
	/* A driven handshake's Request goes out at connect (the soft
	 * provider, when the socket connected at once) and its Reply is
	 * read only by the drive: the buffers are made meanwhile, while the
	 * server sets its side up, not before the Request (issue 16 part Q) */
	bool late = driven && rr_cm_can_drive(c->ep.port->ch);
	int n, rc;

	/* Receives: a Reply per credit requested, one per reverse Call
	 * granted (RFC 8167), TP_CL_RECV_EXTRA more (posted by demand: conn.c
	 * "Receives by demand"); send slots: credits + 8 + bc_slots */
	cn = tp_conn_new(&c->ep, c->ep.conf.credits + TP_CL_RECV_EXTRA + c->ep.conf.bc_slots,
			 c->ep.conf.credits + 8 + c->ep.conf.bc_slots, false);
	if (!cn || !cn->qp) {
		tp_conn_free(cn);
		return -ENOMEM;
	}
	cn->sess = c->sess;
	cn->chport = c->ep.port;
	rc = late ? 0 : cl_conn_bufs(cn);
	if (rc) {
		tp_conn_free(cn);
		return rc;
	}
	n = tp_encode_pd(&c->ep, 0, pd, sizeof(pd));
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
	if (driven)
		rc = rr_cm_connect_driven(c->ep.port->ch, cn->qp, (const struct sockaddr *)&c->addr,
					  c->addrlen, &prm, cn, &cn->id, driven);
	else
		rc = rpcrdma_connect(c->ep.port->ch, cn->qp, (const struct sockaddr *)&c->addr,
				     c->addrlen, &prm, cn, &cn->id);
	if (rc == 0 && late)
		rc = cl_conn_bufs(cn);
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
	if (!cn->dead)
		tp_fault_conn_lost(cn, &c->ep.stats);
	cn->dead = true;
	rr_conn_down(c->sess);
	c->conn = NULL;
	tp_cq_want(cn, false);
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

static void cl_on_cm(struct tp_ep *ep, const struct rpcrdma_cm_event *ev)
{
	struct rr_tp_client *c = RR_CONTAINER_OF(ep, struct rr_tp_client, ep);
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
		rr_cond_broadcast(&c->ep.cond);
		break;
	}
	case RPCRDMA_CM_REJECTED:
	case RPCRDMA_CM_UNREACHABLE:
	case RPCRDMA_CM_ERROR:
	case RPCRDMA_CM_DISCONNECTED:
		if (c->connect_status == 1) {
			c->connect_status = ev->status ? ev->status : -ECONNREFUSED;
			rr_cond_broadcast(&c->ep.cond);
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

/* The session asked to end the connection while the caller held it. */
static void cl_settle(struct rr_tp_client *c)
{
	if (c->conn && ((c->conn->closing && !c->conn->dead) ||
			(c->conn->cm_lost && !c->conn->dead)))
		tp_cl_conn_lost(c, c->conn);
}

/* Whether the loop drains the connection's CQ for it: asynchronous work
 * and no caller thread receiving for itself. Idle, the CQ's fd is not
 * watched for it, so that the next synchronous caller's Reply wakes that
 * caller alone. */
static void cl_want(struct rr_tp_client *c)
{
	struct tp_conn *cn = c->conn;

	if (cn)
		tp_cq_want(cn, !cn->dead && !c->waiter && tp_cl_busy(c));
}

/* After completions of its connection were fed in (lock held). */
static void cl_after(struct tp_ep *ep)
{
	struct rr_tp_client *c = RR_CONTAINER_OF(ep, struct rr_tp_client, ep);

	cl_settle(c);
	cl_deliver(c);
	cl_want(c);
}

/* The client's turn on its loop (kicked, or its timer): CM events, an end
 * asked for, a reconnection that is due, the upcalls, the CQ watched or
 * not, dead connections freed. */
static void cl_turn(struct tp_ep *ep)
{
	struct rr_tp_client *c = RR_CONTAINER_OF(ep, struct rr_tp_client, ep);

	tp_ep_handle_events(ep);
	cl_settle(c);
	if (c->reconnect_at && !c->conn && !c->destroying) {
		if (tp_now_ns(ep) >= c->reconnect_at) {
			c->reconnect_at = 0;
			if (tp_cl_connect(c, NULL))
				tp_cl_schedule_reconnect(c, c->ep.conf.reconnect_delay_ms * 4);
		} else {
			reconnect_timer(c);
		}
	}
	cl_deliver(c);
	cl_want(c);
	if (c->conn)
		tp_conn_unlend_drain(c->conn, c->conn);   /* Replies released since */
	tp_grave_sweep(ep);
}

static const struct tp_ep_ops cl_ops = {.on_cm = cl_on_cm, .after = cl_after, .turn = cl_turn};

/* The test hook of destroy (tp.h), lock held: it runs without it. */
static void cl_destroy_hook(struct rr_tp_client *c, int phase)
{
	unsigned i = 0;

	if (!c->destroy_hook)
		return;
	while (i < rr_engine_nloops() && rr_engine_loop(i) != c->ep.loop)
		i++;
	rr_unlock(&c->ep.lock);
	c->destroy_hook(c->destroy_hook_arg, phase, i);
	rr_lock(&c->ep.lock);
}

void rr_tp_client_destroy_hook(struct rr_tp_client *c, rr_tp_destroy_hook_fn fn, void *arg)
{
	c->destroy_hook = fn;
	c->destroy_hook_arg = arg;
}

/* Frees the client's connections (lock held, dropped meanwhile) once no
 * upcall of its loop runs any more (one may still read a Reply in a
 * Receive buffer of the connection), waits until no drain holds the
 * client, and takes it off its loop. */
static void cl_release_all(struct rr_tp_client *c)
{
	struct tp_conn *cn = c->conn;

	c->conn = NULL;
	cl_destroy_hook(c, RR_TP_DESTROY_WAIT_LOOP);
	tp_ep_quiesce(&c->ep);
	rr_unlock(&c->ep.lock);
	if (cn) {
		cn->dead = true;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
		tp_conn_release(cn);
	}
	rr_lock(&c->ep.lock);
	while (c->ep.grave) {
		cn = c->ep.grave;
		c->ep.grave = cn->next;
		rr_unlock(&c->ep.lock);
		tp_conn_release(cn);
		rr_lock(&c->ep.lock);
	}
	cl_destroy_hook(c, RR_TP_DESTROY_RELEASED);
	while (c->ep.pins)
		(void)rr_engine_cond_wait(&c->ep.cond, &c->ep.lock, NULL);
	rr_unlock(&c->ep.lock);
	tp_ep_detach(&c->ep);
	rr_lock(&c->ep.lock);
}

/* Frees what create made (its turns are over; c->sess may be NULL,
 * destroyed already). */
static void cl_free(struct rr_tp_client *c)
{
	const struct rpcrdma_env *env = c->ep.env;

	rr_lock(&c->ep.lock);
	cl_release_all(c);
	rr_unlock(&c->ep.lock);
	rr_conn_destroy(c->sess);
	c->sess = NULL;
	tp_ep_fini(&c->ep);
	rr_free(env, c);
}

int rr_tp_client_create(const struct rr_tp_conf *conf, const struct sockaddr *addr,
			socklen_t addrlen, rr_tp_complete_fn complete, void *ctx,
			struct rr_tp_client **out)
{
	const struct rpcrdma_env *env = rr_env(conf->env);
	struct rr_conn_config cfg;
	struct rr_tp_client *c;
	struct tp_conn *cn;
	struct timespec ts;
	bool driven = false;
	int rc;

	*out = NULL;
	if (addrlen > sizeof(c->addr) || !complete)
		return -EINVAL;
	c = rr_zalloc(env, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->done_tail = &c->done;
	c->bc_in_tail = &c->bc_in;
	rc = tp_ep_init(&c->ep, conf, false, addr, conf->loop, &cl_ops);
	if (!rc) {
		c->io = tp_client_io;
		c->io.ctx = c;
		tp_sess_config(&c->ep, &cfg);
		rc = rr_conn_create(&cfg, &c->io, &c->sess);
	}
	if (rc) {
		if (c->ep.loop)
			tp_ep_detach(&c->ep);
		tp_ep_fini(&c->ep);
		rr_free(env, c);
		return rc;
	}
	memcpy(&c->addr, addr, addrlen);
	c->addrlen = addrlen;
	c->complete = complete;
	c->cctx = ctx;
	rr_lock(&c->ep.lock);
	c->connect_status = 1;
	/* The creating thread drives the handshake, unless the application
	 * drives progress (then the wait below runs the loops, which a
	 * server of this process may need to answer) or this is a loop's
	 * thread (whose other work must not wait a round trip). */
	rc = tp_cl_connect(c, rr_engine_app_driven() || rr_loop_current() ? NULL : &driven);
	cn = c->conn;
	rr_unlock(&c->ep.lock);
	if (rc) {
		cl_free(c);
		return rc;
	}
	if (driven) {
		/* This thread runs the handshake (no hand-off to the
		 * provider's thread, to the loop and back: issue 16 part G);
		 * nothing else touches the connection before create returns. */
		struct rpcrdma_cm_event ev;

		rc = rr_cm_connect_drive(cn->id, (int)RR_MIN(c->ep.conf.connect_timeout_ms + 1000u,
							     (uint32_t)INT32_MAX), &ev);
		rr_lock(&c->ep.lock);
		if (rc == 0)
			cl_on_cm(&c->ep, &ev);
		else if (c->connect_status == 1)
			c->connect_status = rc;
		cl_settle(c);
		cl_want(c);
		rr_unlock(&c->ep.lock);
	}
	tp_abs_deadline(&ts, c->ep.conf.connect_timeout_ms + 1000);
	rr_lock(&c->ep.lock);
	while (c->connect_status == 1) {
		if (rr_engine_cond_wait(&c->ep.cond, &c->ep.lock, &ts) == -ETIMEDOUT) {
			c->connect_status = -ETIMEDOUT;
			break;
		}
	}
	rc = c->connect_status;
	if (rc)
		c->destroying = true;
	rr_unlock(&c->ep.lock);
	if (rc) {
		cl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* rr_tp_client_submit with the lock held (kept). Inline in both callers,
 * as cl_wait_locked: a synchronous call's submit and wait are one frame
 * (rr_tp_client_submit_wait, itself inline in the rdma:// adapter's
 * cl_start), not three (issue 16 part FA). *@mine is set when this thread
 * took the receiving role for @rpc (c->waiter, c->wait_for) on an
 * established connection that is not dead, and the client is not being
 * destroyed: what cl_wait_locked's first turn would test again. */
static inline __attribute__((always_inline)) int cl_submit_locked(struct rr_tp_client *c, struct rr_conn_rpc *rpc,
								  bool *mine)
{
	bool up, wake = true;
	int rc;

	rpc->xdone = false;
	rpc->xnext = NULL;
	if (c->destroying)
		return -ESHUTDOWN;
	rc = rr_conn_submit(c->sess, rpc);
	if (rc)
		return rc;
	cl_settle(c);
	if (!c->conn && !c->reconnect_at && c->connect_status != 1)
		tp_cl_schedule_reconnect(c, 0);   /* lost while idle: connect now */
	up = c->conn && c->conn->established && !c->conn->dead;
	if (rpc->caller_waits && !c->waiter && up && !rr_engine_app_driven()) {
		/* This thread will receive the Reply itself: no hop through
		 * the progress loop, which is not woken. (When the application
		 * drives progress, the caller's wait drives the loop, which
		 * receives: a thread asleep in the CQ would not run the loop
		 * that the other end may be served by.) */
		c->waiter = true;
		c->wait_for = rpc;
		*mine = true;
		wake = false;
	} else if (tp_on_progress_thread(&c->ep)) {
		cl_want(c);     /* its loop: the CQ watched from now on */
		wake = false;
	}
	if (wake)
		tp_ep_kick(&c->ep);
	return 0;
}

int rr_tp_client_submit(struct rr_tp_client *c, struct rr_conn_rpc *rpc)
{
	bool mine = false;
	int rc;

	if (!rpc)
		return -EINVAL;
	rr_lock(&c->ep.lock);
	rc = cl_submit_locked(c, rpc, &mine);
	rr_unlock(&c->ep.lock);
	return rc;
}

void rr_tp_client_abort(struct rr_tp_client *c, struct rr_conn_rpc *rpc, int status)
{
	rr_lock(&c->ep.lock);
	rr_conn_abort(c->sess, rpc, status);
	cl_settle(c);
	tp_ep_kick(&c->ep);
	rr_unlock(&c->ep.lock);
}

/* tp_cq_wait_once's question (lock held), for a caller waiting for a
 * Reply on @cn: whether it may wait again at once. Not when there is work
 * for the caller's loop in rr_tp_client_wait: a completed Call or a reverse
 * Call to deliver (cl_deliver), a connection lost, closing or replaced, a
 * destroy. */
static bool cl_wait_again(struct tp_ep *ep, struct tp_conn *cn)
{
	struct rr_tp_client *c = RR_CONTAINER_OF(ep, struct rr_tp_client, ep);

	return !c->done && !c->bc_in && !c->destroying && c->conn == cn && cn->established &&
	       !cn->dead && !cn->closing;
}

/* One wait of the thread that holds the receiving role (c->waiter) for at
 * most @left_ns (and 20 ms): sleeps on the connection's CQ and receives on
 * this thread (rpcrdma_cq_wait, through progress.c: completions of other
 * connections sharing the CQ go to them), then handles what came. When
 * another thread consumes the CQ now, waits for it to bring ours. Bounded
 * so that state changes made by the loop (connection loss) are seen; the
 * connection is not freed meanwhile (in_wait). A push's wait (push.c); a
 * Call's is cl_wait_locked. Called and returns with the lock held; returns
 * rpcrdma_cq_wait's result. */
/* The wait on @cn's CQ of tp_cl_wait_once and cl_wait_locked (@again:
 * tp_cq_wait_once's), then a connection the session asked to end, or
 * whose CQ failed, is lost. Inline in both (a call, its frame and the
 * arguments passed again per synchronous call, ~10 instructions). */
static inline __attribute__((always_inline)) int
cl_cq_wait(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns,
	   bool (*again)(struct tp_ep *, struct tp_conn *))
{
	/* RR_MIN(left_ns / 1000000 + 1, 20) ms, the division only for a
	 * deadline under 19 ms away (the usual wait's 20 ms: a compare, not a
	 * multiply-shift and a clamp, ~5 instructions per synchronous call) */
	int n = tp_cq_wait_once(&c->ep, cn,
				left_ns >= 19000000u ? 20 : (int)(left_ns / 1000000u) + 1, again);

	if (c->conn == cn && cn->closing && cn->established)
		tp_cl_conn_lost(c, cn);
	/* its CQ failed (tp_cq_failed): the connection ends here, not after
	 * waits that would answer the same error at once */
	if (n < 0 && c->conn == cn && cn->tcq && atomic_load(&cn->tcq->err))
		tp_cl_conn_lost(c, cn);
	return n;
}

int tp_cl_wait_once(struct rr_tp_client *c, struct tp_conn *cn, uint64_t left_ns)
{
	int n = cl_cq_wait(c, cn, left_ns, NULL);

	cl_deliver(c);
	return n;
}

void rr_tp_client_abort_asked(struct rr_tp_client *c, rr_tp_abort_asked_fn fn)
{
	c->abort_asked = fn;
}

/* After a turn of @rpc's caller's wait that did not complete it (one that
 * brought nothing, or other traffic: reverse Calls, other callers'
 * Replies), lock held: an abort its caller asked for (c->abort_asked, a
 * status) may have come before this client held the Call, and found
 * nothing (xprt.h abort): made here, so that the Call completes now with
 * that status (at once, or once its STags are invalid) and the wait ends
 * with it, not at its deadline nor at the first quiet wait (a connection
 * with a steady stream of other traffic may have none). A Call an abort
 * already reached is left as it is (rr_conn_abort: a no-op), so this may
 * run after every such turn. Not inlined: the caller's loop stays as it
 * was without it (instructions per call). */
__attribute__((noinline)) static void cl_abort_asked(struct rr_tp_client *c,
						  struct rr_conn_rpc *rpc)
{
	int status = c->abort_asked ? c->abort_asked(rpc) : 0;

	if (!status)
		return;
	rr_conn_abort(c->sess, rpc, status);
	cl_settle(c);
}

/* rr_tp_client_wait from the lock held (c->ep.lock, released on return);
 * @t0: the clock when the wait began, @end its deadline. @once (a
 * constant): one turn only, and no clock read (rr_tp_client_submit_wait:
 * @t0 then only stands for its start, @end - @t0 its length). @mine:
 * cl_submit_locked's, under this same hold of the lock (this thread holds
 * the receiving role for @rpc on an established, live connection, the
 * client not destroying, @rpc not delivered: nothing of it changed since),
 * so the first turn does not test it again (issue 16 part JE). The completed
 * Calls found at the end are delivered after the unlock (their xdone set
 * before it): the caller's own Reply costs no second hold of the lock. */
static inline __attribute__((always_inline)) void
cl_wait_locked(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint64_t t0, uint64_t end,
	       bool once, bool mine)
{
	struct tp_conn *cn0 = NULL;
	struct rr_conn_rpc *done;
	rr_tp_complete_fn complete = c->complete;
	void *cctx = c->cctx;
	bool wake;

	if (!mine && c->waiter && c->wait_for != rpc) {
		rr_unlock(&c->ep.lock);
		return;
	}
	c->waiter = true;
	c->wait_for = NULL;
	cn0 = c->conn;
	/* as tp_cl_wait_once, and a wait that brought nothing to deliver is
	 * followed by a second one at once (cl_wait_again): a synchronous
	 * Call's Send completion, then its Reply */
	while (mine || (!rpc->xdone && !c->destroying)) {
		struct tp_conn *cn = c->conn;
		uint64_t t;
		int n;

		if (!mine && (!cn || !cn->established || cn->dead))
			break;
		mine = false;
		/* one clock read per call when the Reply comes in the first
		 * wait (~100 ns each on a VM) */
		t = t0 ? t0 : tp_now_ns(&c->ep);
		t0 = 0;
		if (t >= end)
			break;
		n = cl_cq_wait(c, cn, end - t, cl_wait_again);
		if (n < 0)
			break;
		if (c->bc_in)
			cl_deliver(c);   /* reverse Calls: on this thread, as before */
		else if (c->done && done_has(c->done, rpc))
			break;           /* ours came: delivered below */
		else if (c->done)
			cl_deliver(c);
		/* a cancel's, a deadline's: after every turn that did not
		 * complete the Call (other traffic, a steady stream of it
		 * included, does not hold it back) */
		if (!rpc->xdone)
			cl_abort_asked(c, rpc);
		if (once)
			break;
	}
	c->waiter = false;
	/* Take what completed; the caller of rr_tp_client_destroy has no Call
	 * in flight (tp.h), so none waits for this list to empty. */
	done = c->done;
	c->done = NULL;
	c->done_tail = &c->done;
	for (struct rr_conn_rpc *r = done; r; r = r->xnext)
		r->xdone = true;
	/* Other threads' xdone, and a push waiting for the receiving role
	 * (push.c; the only wait on the cond a Call's end concerns: the
	 * others wait for a connect, a destroy's drain, the pins, a reverse
	 * Call's upcall, none of which this changes): no wake-up when the
	 * caller's own Call is all that came and no push exists (a
	 * synchronous call's usual end, ~30 instructions). */
	if (done && (done != rpc || done->xnext || c->pushes))
		rr_cond_broadcast(&c->ep.cond);
	wake = cl_needs_progress(c, cn0);
	if (wake)
		tp_ep_kick(&c->ep);
	rr_unlock(&c->ep.lock);
	while (done) {
		struct rr_conn_rpc *r = done;

		done = r->xnext;
		r->xnext = NULL;
		complete(cctx, r);
	}
}

void rr_tp_client_wait(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint32_t timeout_ms)
{
	uint64_t t0 = rr_now_ns(c->ep.env);

	if (rr_engine_app_driven())
		return;   /* the caller's wait drives the loop (submit) */
	rr_lock(&c->ep.lock);
	cl_wait_locked(c, rpc, t0, t0 + (uint64_t)timeout_ms * 1000000u, false, false);
}

int rr_tp_client_submit_wait(struct rr_tp_client *c, struct rr_conn_rpc *rpc, uint32_t timeout_ms)
{
	bool mine = false;
	int rc;

	if (!rpc)
		return -EINVAL;
	if (!rpc->caller_waits || rr_engine_app_driven())
		return rr_tp_client_submit(c, rpc);
	rr_lock(&c->ep.lock);
	rc = cl_submit_locked(c, rpc, &mine);
	if (rc) {
		rr_unlock(&c->ep.lock);
		return rc;
	}
	/* one turn, undated: its start 1 (a stand-in that nothing reads as a
	 * time), its end @timeout_ms later less 1 ns (the turn's slice is the
	 * time left in ms rounded up: @timeout_ms) */
	cl_wait_locked(c, rpc, 1, (uint64_t)timeout_ms * 1000000u, true, mine);
	return 0;
}

/* rr_tp_client_release_reply's way under the lock. Out of line: the
 * usual release (tp_conn_unlend_later) keeps no frame for it. */
__attribute__((noinline)) static void cl_release_locked(struct rr_tp_client *c,
							struct rr_conn_rpc *rpc)
{
	rr_lock(&c->ep.lock);
	rr_conn_release_reply(c->sess, rpc);
	rr_unlock(&c->ep.lock);
}

void rr_tp_client_release_reply(struct rr_tp_client *c, struct rr_conn_rpc *rpc)
{
	/* A Reply in its Receive buffer (the session's lend, whose handle
	 * is the connection: tp_client_io) is given back without the lock:
	 * noted in its connection (tp_conn_unlend_later), then reposted as
	 * the session's unlend would, by the next lend on that connection
	 * (the next Reply kept in its Receive) or the client's next turn
	 * (whose sweep frees the connection if it died). One critical
	 * section fewer per call. A short Reply the session copied into
	 * @rpc needs neither (rr_conn_release_own). */
	if (rr_conn_release_own(rpc))
		return;
	if (rpc->lent && tp_conn_unlend_later(rpc->lent, rpc->lent_idx)) {
		rpc->lent = NULL;
		rpc->reply = NULL;
		rpc->reply_len = 0;
		return;
	}
	cl_release_locked(c, rpc);
}

void rr_tp_client_destroy(struct rr_tp_client *c)
{
	struct timespec ts;

	if (!c)
		return;
	rr_lock(&c->ep.lock);
	c->destroying = true;
	rr_conn_abort_all(c->sess, -ECANCELED);
	cl_settle(c);
	/* Wait (bounded) for local invalidations and upcalls. */
	tp_abs_deadline(&ts, 2000);
	while (rr_conn_has_calls(c->sess) || c->done) {
		tp_ep_kick(&c->ep);
		if (rr_engine_cond_wait(&c->ep.cond, &c->ep.lock, &ts) == -ETIMEDOUT)
			break;
	}
	/* Whatever is left (connection stuck): the session deregisters it
	 * and completes it; then the upcalls. */
	if (c->conn) {
		c->conn->dead = true;
		rr_conn_down(c->sess);
	}
	c->bc_recv = NULL;   /* reverse Calls not delivered yet: dropped */
	cl_deliver(c);
	/* Replies must be released before destroy (tp.h); any still lent no
	 * longer keeps its connection. */
	if (c->conn)
		c->conn->lent = 0;
	for (struct tp_conn *cn = c->ep.grave; cn; cn = cn->next)
		cn->lent = 0;
	rr_unlock(&c->ep.lock);
	cl_free(c);
}

/* ---- backchannel (RFC 8167) ---- */

void rr_tp_client_bc_set(struct rr_tp_client *c, rr_tp_bc_recv_fn recv, void *ctx)
{
	rr_lock(&c->ep.lock);
	c->bc_recv = recv;
	c->bc_ctx = ctx;
	/* once it returns no upcall runs the one it replaced */
	while (c->bc_running)
		(void)rr_engine_cond_wait(&c->ep.cond, &c->ep.lock, NULL);
	rr_unlock(&c->ep.lock);
}

void rr_tp_client_bc_enable(struct rr_tp_client *c, bool on)
{
	rr_lock(&c->ep.lock);
	c->bc_on = on && c->ep.conf.bc_slots;
	rr_conn_bc_enable(c->sess, c->bc_on);
	cl_want(c);   /* its loop watches the CQ from now on */
	rr_unlock(&c->ep.lock);
	tp_ep_kick(&c->ep);
}

int rr_tp_client_bc_reply(struct rr_tp_client *c, struct rr_conn_sreq *req,
			  const struct rr_xprt_part *parts, unsigned nparts)
{
	int rc;

	rr_lock(&c->ep.lock);
	rc = rr_conn_bc_reply(c->sess, req, parts, nparts);
	cl_settle(c);
	rr_unlock(&c->ep.lock);
	return rc;
}

void rr_tp_client_bc_done(struct rr_tp_client *c, struct rr_conn_sreq *req)
{
	rr_lock(&c->ep.lock);
	rr_conn_bc_done(c->sess, req);
	rr_unlock(&c->ep.lock);
}

void rr_tp_client_stats(struct rr_tp_client *c, struct rr_xprt_stats *out)
{
	rr_lock(&c->ep.lock);
	*out = c->ep.stats;
	rr_unlock(&c->ep.lock);
	tp_fault_fold(&c->ep, out);
}

uint32_t rr_tp_client_live_stags(struct rr_tp_client *c)
{
	uint32_t n;

	rr_lock(&c->ep.lock);
	n = rr_conn_live_stags(c->sess);
	rr_unlock(&c->ep.lock);
	return n;
}

int rr_tp_client_cut(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	rr_lock(&c->ep.lock);
	if (c->conn && c->conn->id && c->conn->established && !c->conn->dead)
		rc = rpcrdma_disconnect(c->conn->id);
	rr_unlock(&c->ep.lock);
	return rc;
}

void rr_tp_client_turn(struct rr_tp_client *c)
{
	tp_ep_turn_now(&c->ep);
}

unsigned rr_tp_client_dead_conns(struct rr_tp_client *c)
{
	unsigned n = 0;

	rr_lock(&c->ep.lock);
	for (const struct tp_conn *cn = c->ep.grave; cn; cn = cn->next)
		n++;
	rr_unlock(&c->ep.lock);
	return n;
}

int rr_tp_client_params(struct rr_tp_client *c, struct rr_xprt_params *out, uint32_t *grant)
{
	int rc = -ENOTCONN;

	rr_lock(&c->ep.lock);
	if (c->conn && c->conn->established && rr_conn_is_up(c->sess)) {
		*out = *rr_conn_params(c->sess);
		if (grant)
			*grant = rr_conn_grant(c->sess);
		rc = 0;
	}
	rr_unlock(&c->ep.lock);
	return rc;
}

int rr_tp_client_reliable_reply(struct rr_tp_client *c)
{
	int rc = -ENOTCONN;

	rr_lock(&c->ep.lock);
	if (c->conn && c->conn->established)
		rc = rr_conn_reliable_reply(c->sess) ? 1 : 0;
	rr_unlock(&c->ep.lock);
	return rc;
}
