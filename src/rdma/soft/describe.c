/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's cq_describe op (provider.h): what a failure's dump
 * (tests/rogue/probe_diag.c, through the transport's rr_tp_debug_cqs) needs
 * to tell where a message that was read off a socket waits: the CQ's ring
 * (completions pending, armed or not), who attends it (waiters in it, QPs
 * handed to the progress thread, its lease's last use), and for each QP on
 * it who uses it (the caller's @name), its state, whether the progress
 * thread serves its socket, whether the socket is in the CQ's epoll set, a
 * caller's own wait, the bytes read but not parsed (the stage), the
 * Receives posted (its own queue, or its SRQ's and its quota) and the
 * completions it handed out through the CQ. Read without the receive
 * side's lock when another thread holds it (said so): a dump, not a
 * decision. No RFC behaviour here. */
#include "rdma/soft/describe.h"

#include "rdma/soft/cq.h"

static const char *qp_state_name(enum soft_qp_state s)
{
	switch (s) {
	case QPS_IDLE:
		return "idle";
	case QPS_RTS:
		return "rts";
	case QPS_ERROR:
		return "error";
	}
	return "?";
}

/* One line for @qp (qlock of its CQ held, so it stays). */
static void qp_line(struct soft_qp *qp, FILE *f, void (*name)(FILE *f, void *user_ctx))
{
	bool rx = rr_trylock(&qp->rx_lock);

	fprintf(f, "  diag:   qp %u", qp->base.qp_num);
	if (name)
		name(f, qp->base.user_ctx);
	fprintf(f, ": %s, socket %s, %s, own_wait %d, through the CQ rq %llu sq %llu",
		qp_state_name(__atomic_load_n(&qp->state, __ATOMIC_RELAXED)),
		__atomic_load_n(&qp->obj.in_epoll, __ATOMIC_RELAXED) ? "with the progress thread"
								    : "with the CQ's consumer",
		qp->cq_watched ? "in the CQ's epoll set" : "not in the CQ's epoll set",
		__atomic_load_n(&qp->own_wait, __ATOMIC_RELAXED),
		(unsigned long long)atomic_load(&qp->cq_rq),
		(unsigned long long)atomic_load(&qp->cq_sq));
	if (!rx) {
		fprintf(f, ", receive side busy\n");
		return;
	}
	fprintf(f, ", staged %zu", qp->stage_len - qp->stage_off);
	if (qp->srq) {
		uint32_t posted = 0;

		if (rr_trylock(&qp->srq->lock)) {
			posted = qp->srq->count;
			rr_unlock(&qp->srq->lock);
		}
		fprintf(f, ", srq posted %u, holds one %d, quota %s%u\n", posted, qp->srq_have,
			atomic_load(&qp->quota_on) ? "" : "off ", atomic_load(&qp->quota));
	} else {
		fprintf(f, ", receives posted %u\n", qp->rq_count);
	}
	rr_unlock(&qp->rx_lock);
}

void rr_soft_cq_describe(struct rr_cq *cq, FILE *f, void (*name)(FILE *f, void *user_ctx))
{
	struct soft_cq *q = scq_of(cq);

	fprintf(f, "  diag:   ring pending %u armed %d, waiting %d, QPs with the thread %d, live %u\n",
		rr_cq_ring_count(&q->ring), rr_cq_ring_armed(&q->ring), atomic_load(&q->waiting),
		atomic_load(&q->handed), __atomic_load_n(&q->nlive, __ATOMIC_RELAXED));
	pthread_mutex_lock(&q->qlock);
	for (uint32_t i = 0; i < q->nslots; i++)
		if (q->slots[i].qp)
			qp_line(q->slots[i].qp, f, name);
	pthread_mutex_unlock(&q->qlock);
}
