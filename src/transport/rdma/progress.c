/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* What the progress threads of both roles (one per endpoint: the client's
 * in client.c, the server's in server.c) share: draining a connection's CQ
 * into its session a bounded batch at a time (a busy connection does not
 * keep the thread from the others), arming it without losing a
 * notification, and the poll(2) over the wake-up eventfd, the CM channel and
 * the CQs, without the endpoint's lock. */
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

void tp_poll(struct tp_ep *ep, struct pollfd *pfd, unsigned n, int timeout)
{
	pthread_mutex_unlock(&ep->lock);
	(void)poll(pfd, n, timeout);
	pthread_mutex_lock(&ep->lock);
	if (pfd[0].revents & POLLIN) {
		uint64_t v;

		if (read(ep->evfd, &v, sizeof(v)) < 0) {
			/* nothing pending */
		}
	}
}
