/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's CM event channels: a queue of struct rpcrdma_cm_event
 * behind an eventfd that is readable exactly while events wait, the events
 * the connection manager and the data path push (rr_soft_id_event,
 * rr_soft_report_disconnect), the consumer's rpcrdma_cm_get_event, and its
 * quiet (rr_soft_channel_quiet: a thread that reads the channel after
 * making events on it writes no eventfd for them). A
 * context whose owner uses interrupts has its CQ waits ended by every event
 * (docs/soft-iwarp.md "CM events end CQ waits"). Destroying a channel and
 * dropping an id's queued events free ids, so they are in cm.c. */
#include "rdma/soft/chan.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma/soft/cq.h"

int rr_soft_create_channel(struct rr_context *ctx, struct rr_cm_channel **out)
{
	struct soft_chan *ch = rr_zalloc(ctx->env, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	ch->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ch->efd < 0) {
		int e = -errno;

		rr_free(ctx->env, ch);
		return e;
	}
	ch->ctx = RR_CONTAINER_OF(ctx, struct soft_ctx, base);
	pthread_mutex_init(&ch->lock, NULL);
	*out = &ch->base;
	return 0;
}

int rr_soft_channel_fd(struct rr_cm_channel *ch)
{
	return chan_of(ch)->efd;
}

void rr_soft_chan_push(struct soft_chan *ch, const struct rpcrdma_cm_event *ev)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ch->lock);
	if (ch->ev_count == ch->ev_cap) {
		unsigned cap = ch->ev_cap ? ch->ev_cap * 2 : 16;
		struct rpcrdma_cm_event *n = rr_alloc(ch->ctx->env, sizeof(*n) * cap);

		if (!n) {
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (unsigned i = 0; i < ch->ev_count; i++)
			n[i] = ch->evs[(ch->ev_head + i) % ch->ev_cap];
		rr_free(ch->ctx->env, ch->evs);
		ch->evs = n;
		ch->ev_cap = cap;
		ch->ev_head = 0;
	}
	ch->evs[(ch->ev_head + ch->ev_count++) % ch->ev_cap] = *ev;
	/* under the lock: the fd is readable exactly while signaled; not
	 * written for the thread that keeps the channel quiet (it reads the
	 * channel before it ends the quiet, which signals what it left) */
	if (!ch->signaled && !(ch->quiet && pthread_equal(ch->quiet_tid, pthread_self())) &&
	    write(ch->efd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		ch->signaled = true;
	pthread_mutex_unlock(&ch->lock);
	/* A context whose owner uses interrupts (the RPC responder sleeps in
	 * its one connection's CQ and looks at the channel after each wait):
	 * the event ends its CQ waits. No cool-down: CM events are rare, and
	 * the existing connection keeps its fast waits. */
	if (atomic_load(&ch->ctx->cm_intr))
		rr_soft_cqs_interrupt(ch->ctx, false);
}

int rr_soft_get_event(struct rr_cm_channel *base, struct rpcrdma_cm_event *ev)
{
	struct soft_chan *ch = chan_of(base);
	int r = -EAGAIN;

	pthread_mutex_lock(&ch->lock);
	if (ch->ev_count) {
		*ev = ch->evs[ch->ev_head];
		ch->ev_head = (ch->ev_head + 1) % ch->ev_cap;
		ch->ev_count--;
		r = 0;
	}
	/* empty: the fd goes quiet (no system call when it already is, so
	 * that a loop looking at the channel on every turn stays cheap) */
	if (!ch->ev_count && ch->signaled) {
		uint64_t v;

		if (read(ch->efd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
		ch->signaled = false;
	}
	pthread_mutex_unlock(&ch->lock);
	return r;
}

/* A consumer that reads the channel in the thread that makes its events
 * (the server's listener: the CONNECT_REQUESTs its drive reads, the
 * ESTABLISHEDs its accepts make) writes and reads the eventfd for nothing
 * (two system calls per event, and a turn of its loop for the
 * readiness): quiet, its own pushes are queued only. */
int rr_soft_channel_quiet(struct rr_cm_channel *base, bool on)
{
	struct soft_chan *ch = chan_of(base);
	uint64_t one = 1;
	int r = 0;

	pthread_mutex_lock(&ch->lock);
	if (on) {
		if (ch->quiet) {
			r = -EBUSY;
		} else {
			ch->quiet = true;
			ch->quiet_tid = pthread_self();
		}
	} else if (!ch->quiet || !pthread_equal(ch->quiet_tid, pthread_self())) {
		r = -EINVAL;
	} else {
		ch->quiet = false;
		/* what the quiet thread left unread is signaled now */
		if (ch->ev_count && !ch->signaled &&
		    write(ch->efd, &one, sizeof(one)) == (ssize_t)sizeof(one))
			ch->signaled = true;
	}
	pthread_mutex_unlock(&ch->lock);
	return r;
}

void rr_soft_id_event(struct soft_id *id, enum rpcrdma_cm_event_type type, int status,
		      const struct rr_mpa_frame *f)
{
	struct rpcrdma_cm_event ev;

	memset(&ev, 0, offsetof(struct rpcrdma_cm_event, private_data));
	ev.type = type;
	ev.status = status;
	ev.id = RR_PUB(cm_id, &id->base);
	/* ev.user_ctx is filled by the dispatch layer when the event is consumed
	 * (rpcrdma_cm_get_event): reading it here, in the progress thread, would
	 * race with rpcrdma_listen/connect storing it after the op returns. */
	if (f) {
		ev.peer_ird = f->enhanced ? (f->ird & RR_MPA_IRDORD_MASK) : 0;
		ev.peer_ord = f->enhanced ? (f->ord & RR_MPA_IRDORD_MASK) : 0;
		ev.private_data_len = f->pd_len;
		memcpy(ev.private_data, f->pd, f->pd_len);
	}
	if (id->drive_ev) {
		/* the end of a driven handshake: to its driver, not the
		 * channel (rr_soft_connect_drive) */
		*id->drive_ev = ev;
		id->drive_done = true;
		return;
	}
	rr_soft_chan_push(id->ch, &ev);
}

void rr_soft_report_disconnect(struct soft_qp *qp, int err)
{
	if (qp->disconnect_reported || !qp->id)
		return;
	qp->disconnect_reported = true;
	if (qp->id->state == IDS_CONNECTED)
		rr_soft_id_event(qp->id, RPCRDMA_CM_DISCONNECTED, err, NULL);
}
