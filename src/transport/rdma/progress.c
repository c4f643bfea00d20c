/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The RDMA transport's progress thread, one per endpoint: it sleeps in
 * poll(2) over the CM channel, a wake-up eventfd and the CQs of the
 * connections it serves (a server with one connection sleeps in that
 * connection's CQ instead: one system call per Call), feeds completions and
 * CM events to the sessions, runs their timers, and delivers the upcalls
 * (a Call to the server's upper layer, a completed Call to the client's)
 * without the endpoint's lock. A busy connection is served a bounded batch
 * per turn, so it does not keep the thread from the others. */
#include "transport/rdma/tp_int.h"

#include <unistd.h>

/* Polls @cn's CQ until a short batch (or 8 full ones: a busy peer's
 * completions wait for the next turn); the number of completions. */
int tp_drain_cq(struct tp_ep *ep, struct tp_conn *cn)
{
	struct rpcrdma_wc wc[32];
	int n, total = 0, batches = 0;

	/* A short batch emptied the queue: stop there rather than poll once
	 * more (on soft, a poll of an empty queue is a system call: it looks
	 * at the sockets). What arrives later makes the CQ's fd readable. */
	do {
		n = rpcrdma_cq_poll(cn->cq, (int)RR_ARRAY_SIZE(wc), wc);
		ep->stats.cq_polls++;
		for (int i = 0; i < n; i++)
			tp_on_wc(cn, &wc[i]);
		if (n > 0)
			total += n;
	} while (n == (int)RR_ARRAY_SIZE(wc) && ++batches < 8);
	return total;
}

/* Arms @cn's CQ and polls it, again until a poll after the arm finds
 * nothing: a completion that the poll's own receive pushes uses the arm up
 * without a notification (soft: rr_cq_ring_push_ex quiet), and a CQ left
 * disarmed stops counting as attended, so the provider could then receive
 * for it with no notification at all (a lost wake-up). Whether it is armed. */
bool tp_arm_drain(struct tp_ep *ep, struct tp_conn *cn)
{
	for (int i = 0; i < 64; i++) {
		if (rpcrdma_cq_arm(cn->cq, false) != 0)
			return false;
		if (tp_drain_cq(ep, cn) == 0)
			return true;
		if (cn->dead)
			break;
	}
	return false; /* still busy: the caller serves it on its next turn */
}

void tp_deliver_upcalls(struct tp_ep *ep)
{
	if (ep->is_server) {
		struct rr_tp_server *s = (struct rr_tp_server *)ep;

		while (s->deliver) {
			struct rr_conn_sreq *r = s->deliver;

			s->deliver = r->xnext;
			if (!s->deliver)
				s->deliver_tail = &s->deliver;
			r->xnext = NULL;
			pthread_mutex_unlock(&ep->lock);
			s->recv(s->rctx, r);
			pthread_mutex_lock(&ep->lock);
		}
		return;
	}
	{
		struct rr_tp_client *c = (struct rr_tp_client *)ep;

		while (c->done) {
			struct rr_conn_rpc *rpc = c->done;

			c->done = rpc->xnext;
			if (!c->done)
				c->done_tail = &c->done;
			rpc->xnext = NULL;
			rpc->xdone = true;
			pthread_mutex_unlock(&ep->lock);
			c->complete(c->cctx, rpc);
			pthread_mutex_lock(&ep->lock);
		}
		pthread_cond_broadcast(&ep->cond);
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
	struct rpcrdma_cm_event ev;
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
	while (rpcrdma_cm_get_event(ep->ch, &ev) == 0)
		tp_sv_on_cm(s, &ev);
	tp_sv_timers(s, one);
	tp_deliver_upcalls(ep);
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
static unsigned gather(struct tp_ep *ep, struct pollfd *pfd, struct tp_conn **cns, unsigned cap,
		       unsigned *ncn, int *timeout)
{
	unsigned n = 0;

	*ncn = 0;
	pfd[n++] = (struct pollfd){ep->evfd, POLLIN, 0};
	pfd[n++] = (struct pollfd){rpcrdma_cm_channel_fd(ep->ch), POLLIN, 0};
	if (ep->is_server) {
		struct rr_tp_server *s = (struct rr_tp_server *)ep;
		bool unarmed = false;

		/* beyond @cap (an allocation failed): served on every turn,
		 * woken by the others or the 100 ms timeout */
		for (struct tp_conn *cn = s->conns; cn; cn = cn->next) {
			cn->in_set = *ncn < cap;
			if (cn->in_set)
				cns[(*ncn)++] = cn;
			unarmed |= !cn->armed && !cn->dead;
		}
		if (unarmed)
			*timeout = 0; /* served at once, then armed */
	} else {
		struct rr_tp_client *c = (struct rr_tp_client *)ep;

		/* While a caller thread receives, it alone drains the CQ (one
		 * consumer: no lost notification). */
		if (c->conn && !c->waiter && tp_cl_busy(c))
			cns[(*ncn)++] = c->conn;
		if (c->reconnect_at) {
			uint64_t t = tp_now_ns(ep);

			*timeout = c->reconnect_at > t ?
				(int)((c->reconnect_at - t) / 1000000u) + 1 : 0;
		}
	}
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
	tp_deliver_upcalls(ep);
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

void *tp_progress(void *arg)
{
	struct tp_ep *ep = arg;

	/* named for top -H, gdb, perf */
	pthread_setname_np(pthread_self(), ep->is_server ? "rr-rdma-srv" : "rr-rdma-clnt");
	pthread_mutex_lock(&ep->lock);
	while (!ep->stop) {
		struct pollfd pfd_one[3], *pfd = pfd_one;
		struct tp_conn *cns_one[1], **cns = cns_one;
		unsigned n, ncn, cap = 1;
		int timeout = 100;
		struct rpcrdma_cm_event ev;

		if (ep->is_server) {
			struct rr_tp_server *s = (struct rr_tp_server *)ep;

			if (server_one(s))
				continue;
			tp_sv_poll_grow(s);
			if (s->pfd) {
				pfd = s->pfd;
				cns = s->pcns;
				cap = s->pcap;
			}
		}
		n = gather(ep, pfd, cns, cap, &ncn, &timeout);
		pthread_mutex_unlock(&ep->lock);
		(void)poll(pfd, n, timeout);
		pthread_mutex_lock(&ep->lock);
		if (ep->is_server) {
			/* traffic on a CQ: back to the one-connection wait */
			for (unsigned i = 2; i < n; i++)
				if (pfd[i].revents)
					((struct rr_tp_server *)ep)->idle_waits = 0;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;

			if (read(ep->evfd, &v, sizeof(v)) < 0) {
				/* nothing pending */
			}
		}
		/* The channel's fd is readable while events are queued. */
		while ((pfd[1].revents & POLLIN) && rpcrdma_cm_get_event(ep->ch, &ev) == 0) {
			if (ep->is_server)
				tp_sv_on_cm((struct rr_tp_server *)ep, &ev);
			else
				tp_cl_on_cm((struct rr_tp_client *)ep, &ev);
		}
		if (ep->is_server)
			serve_server((struct rr_tp_server *)ep, pfd, cns, ncn);
		else
			serve_client((struct rr_tp_client *)ep);
		tp_deliver_upcalls(ep);
		if (ep->is_server) {
			tp_sv_after_upcalls((struct rr_tp_server *)ep);
			tp_sv_idle_sweep((struct rr_tp_server *)ep);
		}
		tp_grave_sweep(ep);
		if (ep->is_server)
			rr_mem_trim_tick();
	}
	pthread_mutex_unlock(&ep->lock);
	return NULL;
}
