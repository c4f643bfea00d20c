/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's close of a QP whose fast reader is asleep in its read
 * (docs/soft-iwarp.md "Fast wait", the lock order): the closer tells the
 * reader to leave and waits for it on fast_cv, which releases rx_lock; the
 * reader needs rx_lock to leave. A third thread that takes rx_lock in that
 * window and then tx_lock (rpcrdma_qp_set_commit; a dereg of other memory of
 * the PD, rr_soft_qp_revoke) must not find tx_lock held by the closer, or
 * the three wait for each other for ever (found by part BR's TSan run as a
 * lock-order inversion). The race hooks drive that interleaving exactly:
 * the reader is held in its spin (SOFT_RACE_SPIN), the id is destroyed by a
 * second thread up to SOFT_RACE_QUIESCE (the reader told to leave, the wait
 * next), then the third thread acts, then the reader is let go. Two endpoints
 * over loopback TCP through the public API. */
#include "test.h"

#include <pthread.h>
#include <stdlib.h>

#include "rdma/provider.h"
#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF (1u << 20)

enum third_act { THIRD_SET_COMMIT, THIRD_DEREG };

static struct {
	struct soft_qp *qp;
	atomic_int armed;    /* hold the reader at its next spin look */
	atomic_int held;     /* the reader is held in its read */
	atomic_int release;  /* let it go */
	atomic_int closing;  /* the closer is at SOFT_RACE_QUIESCE */
} close_race;

static bool flag_set(void *arg)
{
	return atomic_load((atomic_int *)arg) != 0;
}

static void close_hook(enum soft_race pt, void *obj)
{
	if (obj != close_race.qp)
		return;
	if (pt == SOFT_RACE_SPIN && atomic_exchange(&close_race.armed, 0)) {
		atomic_store(&close_race.held, 1);
		(void)rr_test_until(flag_set, &close_race.release, 2 * RR_TEST_WAIT_MS);
	} else if (pt == SOFT_RACE_QUIESCE) {
		atomic_store(&close_race.closing, 1);
	}
}

struct actor {
	pthread_t th;
	struct rpcrdma_cm_id *cid;  /* the closer's */
	struct rpcrdma_qp *qp;      /* THIRD_SET_COMMIT */
	struct rpcrdma_mr *mr;      /* THIRD_DEREG */
	enum third_act act;
	int rc;
	atomic_int done;
};

static void *closer_main(void *arg)
{
	struct actor *a = arg;

	a->rc = rpcrdma_cm_id_destroy(a->cid);
	atomic_store(&a->done, 1);
	return NULL;
}

static void *third_main(void *arg)
{
	struct actor *a = arg;

	a->rc = a->act == THIRD_SET_COMMIT ? rpcrdma_qp_set_commit(a->qp, false)
					   : rpcrdma_dereg_mr(a->mr);
	atomic_store(&a->done, 1);
	return NULL;
}

/* One round with @act as the third thread. Without the fix (the destroy
 * waiting for the reader with tx_lock held) the third thread never returns
 * and neither does the destroy: the test then fails, naming the deadlock,
 * and leaves the threads stuck (the runner's process ends with them). */
static void close_with_third(enum third_act act)
{
	static uint8_t other[4096];
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct soft_net_waiter w;
	struct actor closer = {0}, third = {0};
	struct rpcrdma_mr *mr2 = NULL;
	rr_soft_race_fn old = atomic_load(&rr_soft_race_hook);
	bool third_done, closed;

	/* a spin budget: the reader's first empty look passes SOFT_RACE_SPIN */
	setenv("RPCRDMA_SOFT_SPIN_US", "1000", 1);
	soft_net_up_buf(&n, 256, 16, NET_BUF);
	unsetenv("RPCRDMA_SOFT_SPIN_US");
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n.pd, other, sizeof(other), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &mr2),
		   0);
	/* the client CQ's consumer attends it (not the progress thread's) */
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the progress thread hands the new QP over");) {
		CHECK_EQ(rpcrdma_cq_wait(n.ccq, 1, &wc, 1), 0);
		if (!soft_net_handed(c))
			break;
	}
	REQUIRE(!soft_net_handed(c));
	close_race.qp = soft_net_qp_of(c);
	atomic_store(&close_race.held, 0);
	atomic_store(&close_race.release, 0);
	atomic_store(&close_race.closing, 0);
	atomic_store(&close_race.armed, 1);
	rr_soft_test_set_race_hook(close_hook);
	/* the reader: a fast wait on the client's CQ, held in its read with
	 * fast_rd set and rx_lock free (a wait that missed the spin sleeps
	 * SOFT_FAST_BLOCK_MS and spins again at its next turn) */
	soft_net_wait_start(&w, n.ccq, RR_TEST_WAIT_MS);
	REQUIRE(rr_test_until(flag_set, &close_race.held, RR_TEST_WAIT_MS));
	/* the closer: up to its wait for the reader */
	closer.cid = cid;
	REQUIRE_EQ(pthread_create(&closer.th, NULL, closer_main, &closer), 0);
	REQUIRE(rr_test_until(flag_set, &close_race.closing, RR_TEST_WAIT_MS));
	/* the third thread: rx_lock (free while the closer waits), then tx_lock */
	third.act = act;
	third.qp = c;
	third.mr = mr2;
	REQUIRE_EQ(pthread_create(&third.th, NULL, third_main, &third), 0);
	third_done = rr_test_wait_for(flag_set, &third.done, "the third thread, its locks taken while the closer waits");
	/* the reader's next look finds the socket shut down; it needs rx_lock */
	atomic_store(&close_race.release, 1);
	closed = rr_test_until(flag_set, &closer.done, RR_TEST_WAIT_MS);
	if (!third_done || !closed)
		fprintf(stderr,
			"deadlock: third thread (%s) %s, destroy %s with the fast reader let go\n",
			act == THIRD_SET_COMMIT ? "set_commit" : "dereg_mr",
			third_done ? "returned" : "blocked", closed ? "returned" : "blocked");
	REQUIRE(third_done);
	REQUIRE(closed);
	REQUIRE(rr_test_until(flag_set, &third.done, RR_TEST_WAIT_MS));
	pthread_join(closer.th, NULL);
	pthread_join(third.th, NULL);
	/* the waiter waits on in epoll (its QP closed): ended now */
	CHECK_EQ(rr_context_interrupt(n.ctx), 0);
	soft_net_wait_join(&w);
	CHECK_EQ(rr_soft_race_count(SOFT_RACE_QUIESCE), 1);
	rr_soft_test_set_race_hook(old);
	CHECK_EQ(closer.rc, 0);
	CHECK_EQ(third.rc, 0);
	CHECK(w.rc >= 0);
	if (act != THIRD_DEREG)
		CHECK_EQ(rpcrdma_dereg_mr(mr2), 0);
	CHECK_EQ(rpcrdma_qp_destroy(c), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(s), 0);
	soft_net_down(&n);
}

/* rpcrdma_qp_set_commit takes rx_lock then tx_lock (rx.c). Fails (the
 * deadlock message, both REQUIREs) with rr_soft_fast_quiesce moved back
 * under tx_lock in rr_soft_destroy_id. */
TEST(soft_close_quiesce_before_tx_lock)
{
	close_with_third(THIRD_SET_COMMIT);
}

/* A dereg of other memory of the QP's PD: rr_soft_qp_revoke takes rx_lock,
 * finds the reader's read not in the range, then takes tx_lock. Fails as
 * the one above without the fix. */
TEST(soft_close_quiesce_before_tx_lock_dereg)
{
	close_with_third(THIRD_DEREG);
}
