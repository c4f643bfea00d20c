/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma-core provider's asynchronous events (ibv_get_async_event(3)): a
 * thread per context waits on the context's async fd (made non-blocking)
 * and an eventfd that ends it, reads every event queued, acts on it as
 * rr_async_action says (src/rdma/async_event.h, the rule the soft provider's
 * CQ overrun follows too) and acknowledges it. A CQ error (IBV_EVENT_CQ_ERR)
 * fails the CQ for good (its poll and arm answer -EOVERFLOW, it takes no
 * new QP) and every QP completing there; a QP's fatal, invalid-request or
 * access error (IBV_EVENT_QP_FATAL / _REQ_ERR / _ACCESS_ERR) that QP; an
 * SRQ error the QPs of that SRQ; a device's fatal error everything. A
 * failed QP is moved to the error state (its work flushed) and its
 * connection disconnected (rdma_disconnect): rdma_cm then reports
 * DISCONNECTED, which verbs_cm.c hands on with the QP's errno as its
 * status. Counted in verbs_counters and said once per event on stderr;
 * each failed QP keeps the event as its cause (rr_qp_set_async_event), under
 * which the transport counts its connection's end (rpcrdma/stats.h faults).
 * An SRQ's limit event is noted on the SRQ (rpcrdma_srq_get_event). */
#include "rdma/verbs/verbs.h"

#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct rr_verbs_counters verbs_counters;

enum rr_async_event vb_async_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR: return RR_ASYNC_CQ_ERR;
	case IBV_EVENT_QP_FATAL: return RR_ASYNC_QP_FATAL;
	case IBV_EVENT_QP_REQ_ERR: return RR_ASYNC_QP_REQ_ERR;
	case IBV_EVENT_QP_ACCESS_ERR: return RR_ASYNC_QP_ACCESS_ERR;
	case IBV_EVENT_SRQ_ERR: return RR_ASYNC_SRQ_ERR;
	case IBV_EVENT_SRQ_LIMIT_REACHED: return RR_ASYNC_SRQ_LIMIT;
	case IBV_EVENT_DEVICE_FATAL: return RR_ASYNC_DEVICE_FATAL;
	default: return RR_ASYNC_OTHER;
	}
}

/* @q to the error state with @err for event @ev, recorded as its cause
 * (rr_qp_set_async_event: the transport's fault counters) (c->qlock held:
 * @q is in c->qps, its cm id alive). */
static void qp_fail_locked(struct vb_qp *q, enum rr_async_event ev, int err)
{
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};
	struct ibv_qp *iq = atomic_load(&q->ibv);
	int none = 0;

	if (!atomic_compare_exchange_strong(&q->fatal, &none, err))
		return;
	rr_qp_set_async_event(&q->base, ev);
	atomic_fetch_add(&verbs_counters.qp_errors, 1);
	if (iq)
		(void)ibv_modify_qp(iq, &qa, IBV_QP_STATE); /* flushes its work */
	if (q->cm)
		(void)rdma_disconnect(q->cm); /* rdma_cm reports DISCONNECTED */
}

static void cq_fail(struct vb_cq *cq, int err)
{
	int none = 0;

	if (atomic_compare_exchange_strong(&cq->err, &none, err))
		atomic_fetch_add(&verbs_counters.cq_errors, 1);
}

/* Acts on one event (c->alock held). */
static void vb_async_act(struct vb_ctx *c, const struct ibv_async_event *ev)
{
	enum rr_async_event e = vb_async_event(ev->event_type);
	struct rr_async_action a = rr_async_action(e);
	struct vb_cq *cq = NULL;
	struct rr_srq *srq = NULL;

	switch (a.scope) {
	case RR_ASYNC_NONE:
		return;
	case RR_ASYNC_NOTE_SRQ:
		if (ev->element.srq && ev->element.srq->srq_context)
			atomic_store(&((struct vb_srq *)ev->element.srq->srq_context)->fired, 1);
		return;
	case RR_ASYNC_FAIL_CQ:
		if (!ev->element.cq || !ev->element.cq->cq_context)
			return;
		cq = ev->element.cq->cq_context;
		cq_fail(cq, a.err);
		break;
	case RR_ASYNC_FAIL_SRQ:
		if (!ev->element.srq || !ev->element.srq->srq_context)
			return;
		srq = &((struct vb_srq *)ev->element.srq->srq_context)->base;
		break;
	case RR_ASYNC_FAIL_ALL:
		atomic_fetch_add(&verbs_counters.device_fatal, 1);
		break;
	case RR_ASYNC_FAIL_QP:
		break;
	}
	fprintf(stderr, "librpcrdma: verbs device %s: %s: %s\n",
		ibv_get_device_name(c->verbs->device), rr_async_name(e),
		a.scope == RR_ASYNC_FAIL_CQ ? "its CQ and QPs fail" :
		a.scope == RR_ASYNC_FAIL_QP ? "its connection ends" : "their connections end");
	pthread_mutex_lock(&c->qlock);
	for (struct vb_qp *q = c->qps; q; q = q->next) {
		struct ibv_qp *iq = atomic_load(&q->ibv);
		bool hit;

		switch (a.scope) {
		case RR_ASYNC_FAIL_CQ:
			hit = q->base.send_cq == &cq->base || q->base.recv_cq == &cq->base;
			break;
		case RR_ASYNC_FAIL_QP:
			hit = ev->element.qp && iq == ev->element.qp;
			break;
		case RR_ASYNC_FAIL_SRQ:
			hit = q->base.srq == srq;
			break;
		default: /* RR_ASYNC_FAIL_ALL */
			hit = true;
			break;
		}
		if (hit)
			qp_fail_locked(q, e, a.err);
		if (a.scope == RR_ASYNC_FAIL_ALL) {
			/* after the QP: its cause is recorded before a poll
			 * of its CQ can fail (the transport counts the
			 * connection under the first it sees) */
			cq_fail(VB_CQ(q->base.send_cq), a.err);
			cq_fail(VB_CQ(q->base.recv_cq), a.err);
		}
	}
	pthread_mutex_unlock(&c->qlock);
}

void vb_async_drain(struct vb_ctx *c)
{
	struct ibv_async_event ev;

	pthread_mutex_lock(&c->alock);
	while (c->async_nb && ibv_get_async_event(c->verbs, &ev) == 0) {
		vb_async_act(c, &ev);
		ibv_ack_async_event(&ev);
	}
	pthread_mutex_unlock(&c->alock);
}

static void *vb_async_main(void *arg)
{
	struct vb_ctx *c = arg;

	for (;;) {
		struct pollfd p[2] = {{.fd = c->verbs->async_fd, .events = POLLIN},
				      {.fd = c->async_stop, .events = POLLIN}};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			break; /* the device is gone: nothing more comes */
		vb_async_drain(c);
	}
	return NULL;
}

int vb_async_start(struct vb_ctx *c)
{
	int rc = set_nonblock(c->verbs->async_fd);

	if (rc < 0)
		return rc;
	c->async_nb = true;
	c->async_stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->async_stop < 0)
		return -errno;
	rc = pthread_create(&c->async_thr, NULL, vb_async_main, c);
	if (rc) {
		close(c->async_stop);
		c->async_stop = -1;
		return -rc;
	}
	c->async_on = true;
	return 0;
}

void vb_async_stop(struct vb_ctx *c)
{
	uint64_t one = 1;

	if (!c->async_on)
		return;
	if (write(c->async_stop, &one, sizeof(one)) != (ssize_t)sizeof(one))
		(void)0; /* an eventfd at its first write cannot fail */
	pthread_join(c->async_thr, NULL);
	close(c->async_stop);
	c->async_on = false;
}
