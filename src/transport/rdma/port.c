/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* What one progress loop (src/engine) has for one shared provider context
 * (ctx.c): a port. Its CM channel serves the connections and listeners
 * made on this loop; the loop reads it and hands each event to its
 * endpoint's queue (the id's user context is a connection, and a
 * connection knows its endpoint), which the endpoint's own loop handles in
 * its turn: a connection's events are handled where its completions are.
 * Ids are destroyed under the port's cm_lock, so that no event of a
 * destroyed id is on its way. Its completion queues are shared by its
 * connections up to their capacity (soft: a CQ is three file descriptors
 * and its ring is resident only as far as it is used; verbs: one CQ per
 * connection, each with its completion channel), with a consumer role that
 * one thread holds at a time (the loop, or a caller receiving for itself:
 * progress.c). Ports of the default environment's contexts stay with their
 * loop (a spare CQ, the channel); others go with their last endpoint. */
#include "transport/rdma/tp_int.h"

#include <sys/epoll.h>

/* CM events taken from a channel per readiness (the rest: next turn). */
#define PORT_CM_BATCH 16

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   /* tc->ports */

static bool port_lingers(const struct tp_port *p)
{
	return p->tc->env == rpcrdma_env_default();
}

/* ------------------------------------------------ handing CM events -- */

static void ev_refuse(const struct rpcrdma_cm_event *ev)
{
	if (ev->type == RPCRDMA_CM_CONNECT_REQUEST && ev->id) {
		(void)rpcrdma_reject(ev->id, NULL, 0);
		(void)rpcrdma_cm_id_destroy(ev->id);
	}
}

bool tp_ev_lazy(const struct tp_ep *ep, const struct tp_ev *e)
{
	return e && e->ev.type == RPCRDMA_CM_ESTABLISHED && ep->ops->lazy_established &&
	       ep->timer_ok;
}

bool tp_ev_hand(struct tp_port *p, const struct rpcrdma_cm_event *ev)
{
	struct tp_conn *cn = ev->user_ctx;
	struct tp_ev *e = NULL;
	struct tp_ep *ep;

	(void)p;
	if (!cn) {
		ev_refuse(ev);   /* nobody's: a listener going away */
		return false;
	}
	ep = cn->ep;
	rr_lock(&ep->evq_lock);
	if (ev->type != RPCRDMA_CM_CONNECT_REQUEST)
		for (unsigned i = 0; i < TP_CONN_EVS && !e; i++)
			if (!cn->evs[i].used)
				e = &cn->evs[i];
	if (!e) {
		e = rr_alloc(ep->env, sizeof(*e));
		if (e)
			e->heap = true;
	} else {
		e->heap = false;
	}
	if (!e) {
		/* no memory: a request is refused, a connection ends */
		if (ev->type == RPCRDMA_CM_CONNECT_REQUEST)
			ev_refuse(ev);
		else
			cn->cm_lost = ep->cm_lost = true;
	} else {
		e->ev = *ev;
		e->cn = cn;
		e->used = true;
		e->next = NULL;
		*ep->evq_tail = e;
		ep->evq_tail = &e->next;
	}
	/* posted under evq_lock: never after the endpoint left its loop
	 * (its events are then dropped by tp_ep_fini). An ESTABLISHED that
	 * its endpoint takes lazily (a server's shard) waits for the next
	 * turn, its tick at the latest: it wakes no loop (issue 16 part Y) */
	if (!ep->detached && !tp_ev_lazy(ep, e))
		rr_loop_post(ep->loop, &ep->kick);
	rr_unlock(&ep->evq_lock);
	return e != NULL;
}

struct tp_ev *tp_ep_take_events(struct tp_ep *ep)
{
	struct tp_ev *list;

	rr_lock(&ep->evq_lock);
	list = ep->evq;
	ep->evq = NULL;
	ep->evq_tail = &ep->evq;
	rr_unlock(&ep->evq_lock);
	return list;
}

void tp_ep_handle_events(struct tp_ep *ep)
{
	struct tp_ev *e = tp_ep_take_events(ep);

	while (e) {
		struct tp_ev *nx = e->next;

		ep->ops->on_cm(ep, &e->ev);
		tp_ev_free(ep, e);
		e = nx;
	}
}

void tp_ev_free(struct tp_ep *ep, struct tp_ev *e)
{
	if (e->heap) {
		rr_free(ep->env, e);
		return;
	}
	rr_lock(&ep->evq_lock);
	e->used = false;
	rr_unlock(&ep->evq_lock);
}

void tp_port_read_events(struct tp_port *p)
{
	for (int i = 0; i < PORT_CM_BATCH; i++) {
		struct rpcrdma_cm_event ev;
		int rc;

		pthread_mutex_lock(&p->cm_lock);
		rc = rpcrdma_cm_get_event(p->ch, &ev);
		if (rc == 0)
			(void)tp_ev_hand(p, &ev);
		pthread_mutex_unlock(&p->cm_lock);
		if (rc)
			break;
	}
}

bool tp_port_quiet_begin(struct tp_port *p)
{
	return rr_cm_channel_quiet(p->ch, true) == 0;
}

void tp_port_quiet_end(struct tp_port *p, bool quiet)
{
	tp_port_read_events(p);
	if (quiet)
		(void)rr_cm_channel_quiet(p->ch, false);
}

/* The channel is readable (on the port's loop). */
static void ch_ready(struct rr_loop_src *src, uint32_t events)
{
	(void)events;
	tp_port_read_events(RR_CONTAINER_OF(src, struct tp_port, ch_src));
}

void tp_port_id_destroy(struct tp_conn *cn)
{
	/* a server connection's id lives on its listener's channel */
	struct tp_port *p = cn->chport ? cn->chport : cn->ep->port;
	struct tp_ep *ep = cn->ep;

	if (!cn->id)
		return;
	pthread_mutex_lock(&p->cm_lock);
	(void)rpcrdma_cm_id_destroy(cn->id);
	cn->id = NULL;
	rr_lock(&ep->evq_lock);
	for (struct tp_ev **pp = &ep->evq; *pp;) {
		struct tp_ev *e = *pp;

		if (e->cn != cn) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		if (e->heap)
			rr_free(ep->env, e);
		else
			e->used = false;
	}
	ep->evq_tail = &ep->evq;
	while (*ep->evq_tail)
		ep->evq_tail = &(*ep->evq_tail)->next;
	rr_unlock(&ep->evq_lock);
	pthread_mutex_unlock(&p->cm_lock);
}

/* ------------------------------------------------------------- CQs -- */

int tp_cq_reserve(struct tp_port *p, uint32_t cqe, struct tp_cq **out)
{
	const struct tp_ctx *tc = p->tc;
	/* soft: a CQ is three fds, shared; verbs: one per connection */
	bool share = strcmp(tc->provider, RPCRDMA_PROVIDER_SOFT) == 0;
	struct rpcrdma_cq_attr ca = {0};
	struct tp_cq *q;
	int rc;

	pthread_mutex_lock(&p->lock);
	for (q = p->cqs; q; q = q->next) {
		if ((share || q->nconn == 0) && q->cap - q->used >= cqe && !q->releasing &&
		    !q->closed) {
			q->used += cqe;
			q->nconn++;
			q->creating++;
			pthread_mutex_unlock(&p->lock);
			*out = q;
			return 0;
		}
	}
	pthread_mutex_unlock(&p->lock);
	q = rr_zalloc(tc->env, sizeof(*q));
	if (!q)
		return -ENOMEM;
	ca.cqe = share ? RR_MAX(cqe, tc->caps.max_cqe) : cqe;
	ca.cqe = RR_MIN(ca.cqe, tc->caps.max_cqe ? tc->caps.max_cqe : ca.cqe);
	if (ca.cqe < cqe) {
		rr_free(tc->env, q);
		return -EINVAL;
	}
	ca.user_ctx = q;
	rc = rpcrdma_cq_create(tc->ctx, &ca, &q->cq);
	if (rc) {
		rr_free(tc->env, q);
		return rc;
	}
	q->port = p;
	q->cap = ca.cqe;
	q->used = cqe;
	q->nconn = 1;
	q->creating = 1;
	q->src.fd = -1;
	pthread_mutex_init(&q->lock, NULL);
	atomic_init(&q->owner, TP_CQ_FREE);
	atomic_init(&q->missed, false);
	pthread_mutex_lock(&p->lock);
	q->next = p->cqs;
	p->cqs = q;
	pthread_mutex_unlock(&p->lock);
	*out = q;
	return 0;
}

static void cq_free(struct tp_port *p, struct tp_cq *q)
{
	if (q->added)
		rr_loop_del(p->loop, &q->src);
	rr_loop_task_cancel(p->loop, &q->task);
	(void)rpcrdma_cq_destroy(q->cq);
	pthread_mutex_destroy(&q->lock);
	rr_free(p->tc->env, q);
}

/* On the port's loop: the CQs no connection uses any more go (their file
 * descriptors and ring with them: a server's memory comes back after
 * churn). */
static void port_gc(struct rr_loop_task *t)
{
	struct tp_port *p = RR_CONTAINER_OF(t, struct tp_port, gc);
	struct tp_cq *dead = NULL;

	pthread_mutex_lock(&p->lock);
	for (struct tp_cq **pp = &p->cqs; *pp;) {
		struct tp_cq *q = *pp;

		if (q->nconn || !tp_cq_claim(q, TP_CQ_LOOP)) {
			pp = &q->next;
			continue;
		}
		*pp = q->next;
		q->next = dead;
		dead = q;
	}
	pthread_mutex_unlock(&p->lock);
	while (dead) {
		struct tp_cq *q = dead;

		dead = q->next;
		cq_free(p, q);
	}
}

void tp_cq_refused(struct tp_cq *q)
{
	pthread_mutex_lock(&q->port->lock);
	q->closed = true;
	q->creating--;
	pthread_mutex_unlock(&q->port->lock);
}

void tp_cq_created(struct tp_cq *q, struct tp_conn *cn)
{
	pthread_mutex_lock(&q->port->lock);
	q->creating--;
	if (cn && cn->qp) {
		cn->qnext = q->conns;
		q->conns = cn;
	}
	pthread_mutex_unlock(&q->port->lock);
}

void tp_cq_unlink(struct tp_conn *cn)
{
	struct tp_cq *q = cn->tcq;

	if (!q)
		return;
	pthread_mutex_lock(&q->port->lock);
	for (struct tp_conn **pp = &q->conns; *pp; pp = &(*pp)->qnext)
		if (*pp == cn) {
			*pp = cn->qnext;
			break;
		}
	cn->qnext = NULL;
	pthread_mutex_unlock(&q->port->lock);
}

bool tp_cq_failed(struct tp_cq *q, int rc)
{
	int none = 0;

	if (rc >= 0 || rc == -EAGAIN || rc == -EINTR || rc == -ETIMEDOUT)
		return atomic_load(&q->err) != 0;
	if (!atomic_compare_exchange_strong(&q->err, &none, rc))
		return true;   /* failed before */
	pthread_mutex_lock(&q->port->lock);
	q->closed = true;
	/* each linked connection's id is not destroyed yet (tp_cq_unlink
	 * comes first): its endpoint gets the event on its loop */
	for (struct tp_conn *cn = q->conns; cn; cn = cn->qnext) {
		struct rpcrdma_cm_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.type = RPCRDMA_CM_DISCONNECTED;
		ev.status = rc;
		ev.user_ctx = cn;
		(void)tp_ev_hand(q->port, &ev);
	}
	pthread_mutex_unlock(&q->port->lock);
	return true;
}

void tp_cq_quiet_begin(struct tp_cq *q)
{
	struct tp_port *p = q->port;

	pthread_mutex_lock(&p->lock);
	q->releasing++;
	/* a QP being created on it now comes first (a creation holds none
	 * of the releaser's locks: it ends) */
	while (q->creating) {
		pthread_mutex_unlock(&p->lock);
		rr_engine_nap();
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
}

void tp_cq_quiet_end(struct tp_cq *q)
{
	pthread_mutex_lock(&q->port->lock);
	q->releasing--;
	pthread_mutex_unlock(&q->port->lock);
}

void tp_cq_unreserve(struct tp_cq *q, uint32_t cqe)
{
	struct tp_port *p = q->port;
	bool empty;

	pthread_mutex_lock(&p->lock);
	q->used -= cqe;
	empty = --q->nconn == 0;
	pthread_mutex_unlock(&p->lock);
	if (empty)
		rr_loop_post(p->loop, &p->gc);
}

bool tp_cq_claim(struct tp_cq *q, int who)
{
	int f = TP_CQ_FREE;

	return atomic_compare_exchange_strong(&q->owner, &f, who);
}

void tp_cq_release(struct tp_cq *q)
{
	atomic_store(&q->owner, TP_CQ_FREE);
	/* the loop found it held meanwhile: it drains now */
	if (atomic_load(&q->missed) && atomic_exchange(&q->missed, false) &&
	    __atomic_load_n(&q->task.fn, __ATOMIC_RELAXED))   /* ever wanted: tp_cq_want */
		rr_loop_post(q->port->loop, &q->task);
}

/* ------------------------------------------------------------ ports -- */

int tp_port_get(struct tp_ctx *tc, struct rr_loop *l, struct tp_port **out)
{
	struct tp_port *p;
	int rc;

	pthread_mutex_lock(&g_lock);
	for (p = tc->ports; p; p = p->next)
		if (p->loop == l)
			break;
	if (p) {
		p->refs++;
		pthread_mutex_unlock(&g_lock);
		*out = p;
		return 0;
	}
	p = rr_zalloc(tc->env, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&g_lock);
		return -ENOMEM;
	}
	p->tc = tc;
	p->loop = l;
	p->refs = 1;
	p->ch_src.fd = -1;
	p->gc.fn = port_gc;
	pthread_mutex_init(&p->cm_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	rc = rpcrdma_cm_channel_create(tc->ctx, &p->ch);
	if (!rc)
		rc = rr_loop_add(l, &p->ch_src, rpcrdma_cm_channel_fd(p->ch), EPOLLIN, ch_ready);
	if (rc) {
		if (p->ch)
			(void)rpcrdma_cm_channel_destroy(p->ch);
		pthread_mutex_destroy(&p->cm_lock);
		pthread_mutex_destroy(&p->lock);
		rr_free(tc->env, p);
		pthread_mutex_unlock(&g_lock);
		return rc;
	}
	p->next = tc->ports;
	tc->ports = p;
	pthread_mutex_unlock(&g_lock);
	*out = p;
	return 0;
}

/* On the port's loop: its sources go, then its CQs and channel. */
static void port_teardown(void *arg)
{
	struct tp_port *p = arg;

	rr_loop_del(p->loop, &p->ch_src);
	rr_loop_task_cancel(p->loop, &p->gc);
	while (p->cqs) {
		struct tp_cq *q = p->cqs;

		p->cqs = q->next;
		cq_free(p, q);
	}
}

void tp_port_put(struct tp_port *p)
{
	struct tp_ctx *tc;
	bool gone = false;

	if (!p)
		return;
	tc = p->tc;
	pthread_mutex_lock(&g_lock);
	if (--p->refs == 0 && !port_lingers(p)) {
		for (struct tp_port **pp = &tc->ports; *pp; pp = &(*pp)->next)
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		gone = true;
	}
	pthread_mutex_unlock(&g_lock);
	if (!gone)
		return;
	rr_engine_call(p->loop, port_teardown, p);
	(void)rpcrdma_cm_channel_destroy(p->ch);
	pthread_mutex_destroy(&p->cm_lock);
	pthread_mutex_destroy(&p->lock);
	rr_free(tc->env, p);
}

/* ------------------------------------------------------ diagnostics -- */

/* Who uses a QP of a CQ (rr_cq_describe's @name): its connection, read
 * without the endpoint's lock (a dump). */
static void conn_name(FILE *f, void *user_ctx)
{
	const struct tp_conn *cn = user_ctx;

	if (!cn) {
		fprintf(f, " (no connection)");
		return;
	}
	fprintf(f, " (%s connection, wants the loop %d, fed from the CQ rq %llu sq %llu%s)",
		cn->ep->is_server ? "server" : "client", cn->wants,
		(unsigned long long)cn->seen.rq, (unsigned long long)cn->seen.sq,
		cn->dead ? ", dead" : "");
}

static void ctx_cqs(struct tp_ctx *tc, void *arg)
{
	FILE *f = arg;

	pthread_mutex_lock(&g_lock);
	for (struct tp_port *p = tc->ports; p; p = p->next) {
		unsigned li = 0;

		while (li < rr_engine_nloops() && rr_engine_loop(li) != p->loop)
			li++;
		pthread_mutex_lock(&p->lock);
		for (struct tp_cq *q = p->cqs; q; q = q->next) {
			pthread_mutex_lock(&q->lock);
			fprintf(f, "  diag: cq %s loop %u: conns %u want %u armed %d watched %d "
				   "owner %d missed %d\n",
				tc->provider, li, q->nconn, q->want, q->armed, q->watched,
				atomic_load(&q->owner), atomic_load(&q->missed));
			pthread_mutex_unlock(&q->lock);
			/* the provider's side: its ring, each QP and its user */
			rr_cq_describe(q->cq, f, conn_name);
		}
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&g_lock);
}

void rr_tp_debug_cqs(FILE *f)
{
	tp_ctx_each(ctx_cqs, f);
}
