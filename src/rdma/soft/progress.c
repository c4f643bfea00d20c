/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's progress thread, one per context: an epoll loop over
 * the context's set (lease.c) that accepts connections and steps their MPA
 * handshakes (cm.c), receives and transmits for the QPs nobody attends
 * (rx.c, tx.c), and looks at its deadlines (handshake timeouts, the end of
 * attended CQs' leases) only when one is due or something woke it: an idle
 * context's thread does not wake at all (docs/soft-iwarp.md "Idle progress
 * thread"). */
#include "rdma/soft/progress.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdma/soft/cm.h"
#include "rdma/soft/lease.h"
#include "rdma/soft/race.h"
#include "rdma/soft/rx.h"
#include "rdma/soft/tx.h"

/* epoll_wait's timeout until @next (UINT64_MAX: none, -1). An injected
 * clock may jump: then at most SOFT_TICK_MS while a deadline exists. */
static int sleep_ms(const struct soft_ctx *c, uint64_t next, uint64_t now)
{
	uint64_t ms;

	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	ms = (next - now + 999999u) / 1000000u;
	if (!c->coarse_res_ns && ms > SOFT_TICK_MS)
		ms = SOFT_TICK_MS;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

static void *progress_main(void *arg)
{
	pthread_setname_np(pthread_self(), "rr-soft");   /* for top -H, gdb */
	struct soft_ctx *c = arg;
	struct epoll_event evs[64];
	uint64_t next = 0; /* the next look at deadlines (0: at once) */
	int timeout = 0;

	/* Sleeps until the next deadline, not on a tick: an idle context's
	 * thread does not wake at all. What makes an earlier deadline wakes
	 * it through c->wake (connect, accept, rr_soft_lease_check); a
	 * wake-up, a handshake step or a due deadline makes it look. */
	for (;;) {
		int n = epoll_wait(c->epfd, evs, 64, timeout);
		bool look = false, look_bal = false;
		uint64_t now;

		soft_race(SOFT_RACE_THREAD, c);
		pthread_mutex_lock(&c->lock);
		if (c->stop) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		for (int i = 0; i < n; i++) {
			struct soft_obj *o = evs[i].data.ptr;

			if (o == &c->wake) {
				uint64_t v;

				if (read(c->wake.fd, &v, sizeof(v)) < 0) {
					/* spurious */
				}
				look = true;
				/* a consumer left (rr_soft_lease_check) */
				if (atomic_exchange(&c->bal_wanted, false))
					look_bal = true;
				continue;
			}
			if (!rr_soft_obj_live_since(c, o))
				continue;
			switch (o->type) {
			case SOFT_OBJ_LISTEN:
				rr_soft_cm_listen_ready(RR_CONTAINER_OF(o, struct soft_id, obj));
				look = true; /* new handshake deadlines */
				break;
			case SOFT_OBJ_HANDSHAKE:
				rr_soft_cm_handshake_ready(RR_CONTAINER_OF(o, struct soft_id, obj), evs[i].events);
				look = true; /* (a QP connected: balanced there) */
				break;
			case SOFT_OBJ_QP: {
				struct soft_qp *qp = RR_CONTAINER_OF(o, struct soft_qp, obj);

				if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
					int r;

					rr_lock(&qp->rx_lock);
					r = rr_soft_qp_rx(qp);
					rr_unlock(&qp->rx_lock);
					if (r < 0)
						rr_soft_qp_hand(qp, false);
				}
				if ((evs[i].events & EPOLLOUT) && qp->obj.in_epoll) {
					rr_lock(&qp->tx_lock);
					rr_soft_qp_tx_locked(qp);
					rr_unlock(&qp->tx_lock);
				}
				break;
			}
			default:
				break;
			}
		}
		now = rr_now_ns(c->env);
		if (look || now >= next) {
			/* announce the look before it (rr_soft_lease_check):
			 * a consumer leaving meanwhile wakes the thread */
			atomic_store(&c->sleep_until, UINT64_MAX);
			atomic_thread_fence(memory_order_seq_cst);
			if (look_bal || now >= c->bal_next)
				(void)rr_soft_balance(c, now);
			next = RR_MIN(rr_soft_cm_timeouts(c, now), c->bal_next);
		}
		timeout = sleep_ms(c, next, now);
		atomic_store(&c->sleep_until, next);
		/* what leaves the set from now on may still have an event in
		 * the coming wait */
		rr_soft_gone_forget(c);
		pthread_mutex_unlock(&c->lock);
	}
	return NULL;
}

int rr_soft_progress_start(struct soft_ctx *c)
{
	c->live.next = c->live.prev = &c->live;
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0)
		return -errno;
	c->wake.type = SOFT_OBJ_WAKE;
	c->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wake.fd < 0) {
		int e = -errno;

		close(c->epfd);
		return e;
	}
	{
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->wake};

		epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->wake.fd, &ev);
	}
	if (pthread_create(&c->thread, NULL, progress_main, c) != 0) {
		close(c->wake.fd);
		close(c->epfd);
		return -EAGAIN;
	}
	c->thread_started = true;
	return 0;
}

void rr_soft_progress_stop(struct soft_ctx *c)
{
	if (c->thread_started) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_mutex_unlock(&c->lock);
		rr_soft_wake(c);
		pthread_join(c->thread, NULL);
	}
	rr_soft_ids_discard_uncounted(c, NULL);
	close(c->wake.fd);
	close(c->epfd);
}
