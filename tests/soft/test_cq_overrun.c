/* SPDX-License-Identifier: BSD-2-Clause */
/* A soft CQ that overruns loses no completion silently: the completion that
 * found the ring full is counted (cq_overflows), its CQ's QPs go to the
 * error state and their connections end with RPCRDMA_CM_DISCONNECTED
 * carrying -EOVERFLOW, and rpcrdma_cq_poll answers -EOVERFLOW after the
 * completions it held (the verbs answer to a CQ overrun, IBV_EVENT_CQ_ERR).
 * And the sizing it rests on: a QP whose work queues could overrun its CQ,
 * with the CQ's other QPs, is refused (-ENOSPC); a shared receive queue's
 * Receives are bounded by its QPs' receive quotas instead. */
#include "test.h"

#include <poll.h>
#include <unistd.h>

#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

/* Signaled RDMA Writes of 16 bytes on @qp, never polled, until @want of them
 * were posted (a full send queue is retried: its slots come back as the
 * Writes complete into the CQ). */
static void post_writes(struct net *n, struct rpcrdma_qp *qp, int want)
{
	uint64_t dl = rr_test_deadline();

	for (int posted = 0; posted < want;) {
		int r = soft_net_try_post_send(n, qp, 100 + (uint64_t)posted,
					       RPCRDMA_WR_RDMA_WRITE, 0, 16, 1024, true);

		REQUIRE(r == 0 || r == -ENOMEM);
		REQUIRE(r == 0 || rr_test_wait_left(dl, "a send queue slot back"));
		if (r == 0)
			posted++;
		else
			usleep(1000);
	}
}

TEST(soft_cq_overrun_fails_its_qps)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc[16];
	struct rpcrdma_cm_event ev;
	uint64_t lost0 = atomic_load(&soft_counters.cq_overflows);
	int got = 0, r, i;
	bool told = false;

	/* the client's CQ holds 8: its QP's 4 + 4, exactly */
	soft_net_up_buf(&n, 8, 4, 8192);
	soft_net_pair(&n, 4, &c, &s, &cid, &sid);
	/* the application posts 9 signaled Writes and polls none: the 9th
	 * completion finds the ring full */
	post_writes(&n, c, 9);
	for (uint64_t dl = rr_test_deadline();
	     atomic_load(&soft_counters.cq_overflows) == lost0 &&
	     rr_test_wait_left(dl, "the CQ overflow counted");)
		usleep(1000);
	CHECK(atomic_load(&soft_counters.cq_overflows) > lost0);
	/* the 8 it held, in order, then the error state */
	for (i = 0; i < 100; i++) {
		r = rpcrdma_cq_poll(n.ccq, 16, wc + got);
		if (r < 0)
			break;
		for (int k = 0; k < r; k++) {
			CHECK_EQ(wc[got + k].wr_id, 100 + (uint64_t)(got + k));
			CHECK_EQ(wc[got + k].status, RPCRDMA_WC_SUCCESS);
		}
		got += r;
		REQUIRE(got <= 8);
	}
	CHECK_EQ(got, 8);
	CHECK_EQ(r, -EOVERFLOW);
	/* the QP is in the error state: no more work on it */
	CHECK_EQ(soft_net_try_post_send(&n, c, 999, RPCRDMA_WR_RDMA_WRITE, 0, 16, 1024, true),
		 -EPIPE);
	/* and its connection ended, saying why; the peer's ends too */
	while (!told && soft_net_get_cm(n.ch, &ev) == 0) {
		if (ev.id == cid) {
			CHECK_EQ(ev.type, RPCRDMA_CM_DISCONNECTED);
			CHECK_EQ(ev.status, -EOVERFLOW);
			told = true;
		}
	}
	CHECK(told);
	/* an overrun CQ takes no new QP */
	{
		struct rpcrdma_qp_attr qa = {.send_cq = n.ccq, .recv_cq = n.ccq, .max_send_wr = 1,
					     .max_recv_wr = 1, .max_send_sge = 1,
					     .max_recv_sge = 1};
		struct rpcrdma_qp *q2 = NULL;

		CHECK_EQ(rpcrdma_qp_create(n.pd, &qa, &q2), -EIO);
		if (q2)
			CHECK_EQ(rpcrdma_qp_destroy(q2), 0);
	}
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* A QP of @sq / @rq work requests on @scq / @rcq (with @srq): create's
 * answer, the QP destroyed again at once when made unless @keep. */
static int try_qp(struct net *n, struct rpcrdma_cq *scq, struct rpcrdma_cq *rcq, uint32_t sq,
		  uint32_t rq, struct rpcrdma_srq *srq, struct rpcrdma_qp **keep)
{
	struct rpcrdma_qp_attr qa = {.send_cq = scq, .recv_cq = rcq, .max_send_wr = sq,
				     .max_recv_wr = rq, .max_send_sge = 1, .max_recv_sge = 1,
				     .srq = srq};
	struct rpcrdma_qp *qp = NULL;
	int r = rpcrdma_qp_create(n->pd, &qa, &qp);

	if (r == 0 && keep)
		*keep = qp;
	else if (r == 0)
		CHECK_EQ(rpcrdma_qp_destroy(qp), 0);
	return r;
}

TEST(soft_cq_refuses_qp_that_could_overrun)
{
	struct net n;
	struct rpcrdma_qp *a, *b, *x, *y;
	struct rpcrdma_srq *srq;
	struct rpcrdma_srq_attr sa = {.max_wr = 4, .max_sge = 1};

	soft_net_up(&n, 12, 4);
	/* one CQ for both queues: 8 + 4 fit in 12, 9 + 4 do not */
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 8, 4, NULL, NULL), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 9, 4, NULL, NULL), -ENOSPC);
	/* a CQ's QPs add up: 6 + 2 and then 2 + 2 fill it, one more entry
	 * does not fit; a destroyed QP gives its share back */
	REQUIRE_EQ(try_qp(&n, n.ccq, n.ccq, 6, 2, NULL, &a), 0);
	REQUIRE_EQ(try_qp(&n, n.ccq, n.ccq, 2, 2, NULL, &b), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 1, 1, NULL, NULL), -ENOSPC);
	CHECK_EQ(rpcrdma_qp_destroy(b), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 2, 2, NULL, NULL), 0);
	CHECK_EQ(rpcrdma_qp_destroy(a), 0);
	/* separate send and receive CQs: each counts its own queue */
	CHECK_EQ(try_qp(&n, n.ccq, n.scq, 12, 12, NULL, NULL), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.scq, 12, 13, NULL, NULL), -ENOSPC);
	/* a shared receive queue's Receives are bounded by each QP's receive
	 * quota, not by the CQ's entries: only the send queues count */
	REQUIRE_EQ(rpcrdma_srq_create(n.pd, &sa, &srq), 0);
	REQUIRE_EQ(try_qp(&n, n.ccq, n.ccq, 6, 0, srq, &x), 0);
	REQUIRE_EQ(try_qp(&n, n.ccq, n.ccq, 6, 0, srq, &y), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 1, 0, srq, NULL), -ENOSPC);
	CHECK_EQ(rpcrdma_qp_destroy(x), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 3, 3, NULL, NULL), 0);
	CHECK_EQ(try_qp(&n, n.ccq, n.ccq, 4, 3, NULL, NULL), -ENOSPC);
	CHECK_EQ(rpcrdma_qp_destroy(y), 0);
	CHECK_EQ(rpcrdma_srq_destroy(srq), 0);
	soft_net_down(&n);
}
