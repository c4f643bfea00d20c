/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared receive queues of the soft provider (include/rpcrdma/rdma.h
 * "shared receive queues", src/rdma/soft/srq.c): several QPs, each of its
 * own PD, take Receives of one SRQ of another PD, the newest first, the
 * completions going to each QP's CQ with that QP named; the one-shot limit
 * event; a message that finds the queue empty, or its QP's receive quota
 * spent, is that connection's overrun alone (Terminate, "no buffer for
 * MSN") while the queue's other QPs go on; a Receive taken for a message
 * that fails is flushed to that QP, one taken by a QP destroyed in the
 * middle of a message goes back; the life rules (busy while QPs use it). */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

#include "rdma/soft/soft.h"
#include "rdma/soft/srq.h"
#include "soft_net.h"
#include "test.h"

enum { SLOT = 256, NSLOTS = 32 };

/* An SRQ on its own PD over a registered buffer of NSLOTS slots, and
 * @nqp connected pairs whose server QPs (each on a PD of its own) use it. */
struct sq {
	struct net n;
	struct rpcrdma_pd *spd;              /* the SRQ's */
	struct rpcrdma_srq *srq;
	uint8_t *rbuf;
	struct rpcrdma_mr *rmr;
	struct rpcrdma_pd *qpd[4];
	struct rpcrdma_qp *cqp[4], *sqp[4];
	struct rpcrdma_cm_id *cid[4], *sid[4];
	unsigned nqp;
};

static void sq_post(struct sq *s, uint64_t id)
{
	struct rpcrdma_sge sg = {(uintptr_t)s->rbuf + (id % NSLOTS) * SLOT, SLOT,
				 rpcrdma_mr_lkey(s->rmr)};
	struct rpcrdma_recv_wr rw = {.wr_id = id, .sg_list = &sg, .num_sge = 1};

	REQUIRE_EQ(rpcrdma_post_srq_recv(s->srq, &rw, NULL), 0);
}

static void sq_up(struct sq *s, unsigned nqp, uint32_t max_wr)
{
	struct rpcrdma_srq_attr sa = {.max_wr = max_wr, .max_sge = 1};

	memset(s, 0, sizeof(*s));
	soft_net_up_buf(&s->n, 256, 16, 65536);
	REQUIRE_EQ(rpcrdma_pd_alloc(s->n.ctx, &s->spd), 0);
	s->rbuf = calloc(NSLOTS, SLOT);
	REQUIRE(s->rbuf);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s->spd, s->rbuf, NSLOTS * SLOT,
					 RPCRDMA_ACCESS_LOCAL_WRITE, &s->rmr), 0);
	REQUIRE_EQ(rpcrdma_srq_create(s->spd, &sa, &s->srq), 0);
	s->nqp = nqp;
	for (unsigned i = 0; i < nqp; i++) {
		struct rpcrdma_qp_attr qa = {.send_cq = s->n.scq, .recv_cq = s->n.scq,
					     .max_send_wr = 16, .max_send_sge = 1,
					     .srq = s->srq, .user_ctx = &s->sqp[i]};

		REQUIRE_EQ(rpcrdma_pd_alloc(s->n.ctx, &s->qpd[i]), 0);
		REQUIRE_EQ(rpcrdma_qp_create(s->qpd[i], &qa, &s->sqp[i]), 0);
		s->cqp[i] = soft_net_qp(&s->n, s->n.ccq, 16);
		soft_net_link(&s->n, s->cqp[i], s->sqp[i], &s->cid[i], &s->sid[i]);
	}
}

static void sq_down(struct sq *s)
{
	CHECK_EQ(rpcrdma_srq_destroy(s->srq), s->nqp ? -EBUSY : 0);
	for (unsigned i = 0; i < s->nqp; i++) {
		if (s->cid[i])
			soft_net_unpair(s->cqp[i], s->sqp[i], s->cid[i], s->sid[i]);
		CHECK_EQ(rpcrdma_pd_free(s->qpd[i]), 0);
	}
	CHECK_EQ(rpcrdma_pd_free(s->spd), -EBUSY);   /* its SRQ and MR */
	if (s->nqp)
		CHECK_EQ(rpcrdma_srq_destroy(s->srq), 0);
	CHECK_EQ(rpcrdma_dereg_mr(s->rmr), 0);
	CHECK_EQ(rpcrdma_pd_free(s->spd), 0);
	free(s->rbuf);
	soft_net_down(&s->n);
}

/* A Send of @len bytes of byte @v from client QP @i. */
static void sq_send(struct sq *s, unsigned i, uint8_t v, uint32_t len)
{
	memset(s->n.buf + 1024 * i, v, len);
	soft_net_post_send(&s->n, s->cqp[i], 100 + i, RPCRDMA_WR_SEND, 1024 * i, len, 0, false);
}

static int sq_wait(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	for (int i = 0; i < 100; i++)
		if (rpcrdma_cq_wait(cq, 1, wc, 50) == 1)
			return 1;
	return 0;
}

static unsigned sq_count_of(struct soft_srq *q)
{
	unsigned n;

	rr_lock(&q->lock);
	n = q->count;
	rr_unlock(&q->lock);
	return n;
}

static unsigned sq_count(struct sq *s)
{
	return sq_count_of(RR_CONTAINER_OF(RR_BASE(srq, s->srq), struct soft_srq, base));
}

TEST(srq_soft_shared_by_qps_of_other_pds)
{
	struct rpcrdma_caps caps;
	struct sq s;
	struct rpcrdma_srq_attr sa;

	sq_up(&s, 3, 64);
	REQUIRE_EQ(rpcrdma_query(s.n.ctx, &caps), 0);
	CHECK(caps.flags & RPCRDMA_CAP_SRQ);
	CHECK(caps.flags & RPCRDMA_CAP_SRQ_ANY_PD);
	CHECK(caps.max_srq_wr >= 64);
	REQUIRE_EQ(rpcrdma_srq_query(s.srq, &sa), 0);
	CHECK_EQ(sa.max_wr, 64);
	CHECK_EQ(sa.srq_limit, 0);
	/* its QPs have no Receive queue of their own */
	CHECK_EQ(soft_net_try_post_recv(&s.n, s.sqp[0], 1, 0, 64), -EINVAL);
	for (uint64_t id = 0; id < 9; id++)
		sq_post(&s, id);
	CHECK_EQ(sq_count(&s), 9);
	/* three messages on each QP, interleaved: Receives taken the most
	 * recently posted first (LIFO: its entry and buffer are the ones
	 * last touched), whichever QP the message came on */
	for (unsigned r = 0; r < 3; r++) {
		for (unsigned i = 0; i < 3; i++) {
			struct rpcrdma_wc wc;
			uint64_t want = 8 - (r * 3 + i);

			sq_send(&s, i, (uint8_t)(0x10 * (i + 1) + r), 100 + r + i);
			REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
			REQUIRE_EQ(wc.status, RPCRDMA_WC_SUCCESS);
			CHECK_EQ(wc.opcode, RPCRDMA_WC_RECV);
			CHECK_EQ(wc.wr_id, want);
			CHECK(wc.qp == s.sqp[i]);
			CHECK_EQ(wc.byte_len, 100 + r + i);
			CHECK_EQ(s.rbuf[want * SLOT], 0x10 * (i + 1) + r);
			CHECK_EQ(s.rbuf[want * SLOT + 99 + r + i], 0x10 * (i + 1) + r);
		}
	}
	CHECK_EQ(sq_count(&s), 0);
	sq_down(&s);
}

/* The limit event: once fewer than the armed limit remain; once; disarmed
 * after; armed below the count it fires at once; 0 disarms. */
TEST(srq_soft_limit_event_one_shot)
{
	struct rpcrdma_srq_attr sa;
	struct rpcrdma_wc wc;
	struct sq s;

	sq_up(&s, 1, 16);
	CHECK_EQ(rpcrdma_srq_arm_limit(s.srq, 17), -EINVAL);
	for (uint64_t id = 0; id < 5; id++)
		sq_post(&s, id);
	REQUIRE_EQ(rpcrdma_srq_arm_limit(s.srq, 3), 0);
	REQUIRE_EQ(rpcrdma_srq_query(s.srq, &sa), 0);
	CHECK_EQ(sa.srq_limit, 3);
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 0);
	for (int k = 0; k < 2; k++) {
		sq_send(&s, 0, 1, 8);
		REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	}
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 0);   /* 3 left: not below 3 */
	sq_send(&s, 0, 1, 8);
	REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 1);   /* 2 left */
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 0);   /* consumed */
	REQUIRE_EQ(rpcrdma_srq_query(s.srq, &sa), 0);
	CHECK_EQ(sa.srq_limit, 0);                   /* disarmed */
	sq_send(&s, 0, 1, 8);
	REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 0);   /* not armed: silent */
	REQUIRE_EQ(rpcrdma_srq_arm_limit(s.srq, 4), 0);
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 1);   /* 1 left: at once */
	for (uint64_t id = 5; id < 8; id++)
		sq_post(&s, id);
	REQUIRE_EQ(rpcrdma_srq_arm_limit(s.srq, 2), 0);   /* 4 left */
	REQUIRE_EQ(rpcrdma_srq_arm_limit(s.srq, 0), 0);
	sq_send(&s, 0, 1, 8);
	REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
	CHECK_EQ(rpcrdma_srq_get_event(s.srq), 0);   /* disarmed */
	sq_down(&s);
}

/* The client side's view of a server QP that ended: a DISCONNECTED on the
 * channel and, when the Terminate got through, its layer/type/code. */
static bool sq_ended(struct sq *s, unsigned i)
{
	struct rpcrdma_wc wc;

	/* the client's Send completes, then the connection goes */
	for (int k = 0; k < 200; k++) {
		int n = rpcrdma_cq_wait(s->n.ccq, 1, &wc, 25);

		if (n == 1 && wc.status != RPCRDMA_WC_SUCCESS && wc.qp == s->cqp[i])
			return true;
		if (n == 0 && soft_net_try_post_send(&s->n, s->cqp[i], 1, RPCRDMA_WR_SEND, 0, 4, 0,
						     true) != 0)
			return true;
	}
	return false;
}

/* The queue empty: a message on QP 0 is its overrun alone; QP 1 is served
 * by the Receives posted afterwards. */
TEST(srq_soft_empty_queue_ends_only_that_connection)
{
	struct rpcrdma_wc wc;
	struct sq s;

	sq_up(&s, 2, 16);
	sq_send(&s, 0, 7, 16);
	CHECK(sq_ended(&s, 0));
	CHECK_EQ(rpcrdma_cq_wait(s.n.scq, 1, &wc, 50), 0);   /* nothing received */
	sq_post(&s, 5);
	sq_send(&s, 1, 9, 16);
	REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK(wc.qp == s.sqp[1]);
	CHECK_EQ(wc.wr_id, 5);
	sq_down(&s);
}

/* Receive quotas: QP 0 may take 2; its third message ends its connection
 * and takes nothing, though the queue had plenty; QP 1 (no quota) takes
 * the rest. A quota on a QP without an SRQ: -EINVAL. */
TEST(srq_soft_quota_bounds_one_connection)
{
	struct rpcrdma_wc wc;
	struct sq s;
	struct rpcrdma_qp *plain;

	sq_up(&s, 2, 16);
	for (uint64_t id = 0; id < 8; id++)
		sq_post(&s, id);
	REQUIRE_EQ(rpcrdma_qp_recv_quota(s.sqp[0], 1), 0);
	REQUIRE_EQ(rpcrdma_qp_recv_quota(s.sqp[0], 1), 0);
	for (int k = 0; k < 2; k++) {
		sq_send(&s, 0, 3, 16);
		REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK(wc.qp == s.sqp[0]);
	}
	CHECK_EQ(sq_count(&s), 6);
	sq_send(&s, 0, 3, 16);
	CHECK(sq_ended(&s, 0));
	CHECK_EQ(sq_count(&s), 6);   /* it took none */
	for (int k = 0; k < 6; k++) {
		sq_send(&s, 1, 4, 16);
		REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK(wc.qp == s.sqp[1]);
	}
	plain = soft_net_qp(&s.n, s.n.scq, 4);
	CHECK_EQ(rpcrdma_qp_recv_quota(plain, 1), -EINVAL);
	CHECK_EQ(rpcrdma_qp_destroy(plain), 0);
	sq_down(&s);
}

/* A message too long for the Receive it took (the newest): the
 * connection ends and that Receive is flushed to its QP (wr_id and QP
 * named), the others stay in the queue. */
TEST(srq_soft_failed_message_flushes_its_receive)
{
	struct rpcrdma_wc wc;
	struct sq s;
	bool flushed = false;

	sq_up(&s, 1, 16);
	for (uint64_t id = 0; id < 4; id++)
		sq_post(&s, id);
	sq_send(&s, 0, 1, SLOT + 100);
	for (int k = 0; k < 100 && !flushed; k++) {
		if (rpcrdma_cq_wait(s.n.scq, 1, &wc, 50) != 1)
			continue;
		CHECK_EQ(wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc.wr_id, 3);
		CHECK(wc.qp == s.sqp[0]);
		flushed = true;
	}
	CHECK(flushed);
	CHECK_EQ(sq_count(&s), 3);
	CHECK_EQ(rpcrdma_cq_wait(s.n.scq, 1, &wc, 50), 0);   /* only that one */
	sq_down(&s);
}

/* A connection that ends while its QP holds a Receive for a message not
 * yet complete (the state a partial message leaves; set up here directly):
 * the Receive comes back to the consumer as a flushed completion of that
 * QP. A QP destroyed in that state without ever having failed (never
 * connected) puts it back into the queue, first. Either way the consumer's
 * count of what is posted stays right. */
TEST(srq_soft_receive_of_a_partial_message_is_not_lost)
{
	struct rpcrdma_qp_attr qa;
	struct rpcrdma_wc wc;
	struct rpcrdma_qp *lone;
	struct soft_qp *q;
	struct soft_srq *sr;
	struct soft_rqe e;
	struct sq s;

	sq_up(&s, 1, 16);
	for (uint64_t id = 0; id < 3; id++)
		sq_post(&s, id);
	q = soft_net_qp_of(s.sqp[0]);
	sr = RR_CONTAINER_OF(RR_BASE(srq, s.srq), struct soft_srq, base);
	rr_lock(&q->rx_lock);
	REQUIRE_EQ(rr_soft_srq_take(sr, &q->srq_cur), 0);
	q->srq_have = true;
	rr_unlock(&q->rx_lock);
	CHECK_EQ(sq_count(&s), 2);
	CHECK_EQ(rpcrdma_disconnect(s.sid[0]), 0);
	REQUIRE_EQ(sq_wait(s.n.scq, &wc), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 2);   /* the newest of 0, 1, 2 */
	CHECK(wc.qp == s.sqp[0]);
	CHECK_EQ(sq_count(&s), 2);
	/* never connected, destroyed in the middle of "a message" */
	qa = (struct rpcrdma_qp_attr){.send_cq = s.n.scq, .recv_cq = s.n.scq, .max_send_wr = 4,
				      .max_send_sge = 1, .srq = s.srq};
	REQUIRE_EQ(rpcrdma_qp_create(s.n.pd, &qa, &lone), 0);
	q = soft_net_qp_of(lone);
	rr_lock(&q->rx_lock);
	REQUIRE_EQ(rr_soft_srq_take(sr, &q->srq_cur), 0);
	q->srq_have = true;
	rr_unlock(&q->rx_lock);
	CHECK_EQ(sq_count(&s), 1);
	CHECK_EQ(rpcrdma_qp_destroy(lone), 0);
	CHECK_EQ(sq_count(&s), 2);
	REQUIRE_EQ(rr_soft_srq_take(sr, &e), 0);
	CHECK_EQ(e.wr_id, 1);   /* first again */
	CHECK_EQ(rpcrdma_cq_wait(s.n.scq, 1, &wc, 50), 0);   /* no completion */
	sq_down(&s);
}

/* Life rules and argument checks. */
TEST(srq_soft_life_and_arguments)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_srq *srq = NULL;
	struct rpcrdma_srq_attr sa = {.max_wr = 0, .max_sge = 1, .user_ctx = &sa};
	struct rpcrdma_recv_wr rw = {.wr_id = 1, .num_sge = 2};
	struct rpcrdma_sge sg[2] = {{0, 0, 0}, {0, 0, 0}};

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(ctx, &pd), 0);
	CHECK_EQ(rpcrdma_srq_create(pd, &sa, &srq), -EINVAL);
	sa.max_wr = SOFT_MAX_SRQ_WR + 1;
	CHECK_EQ(rpcrdma_srq_create(pd, &sa, &srq), -EINVAL);
	sa.max_wr = 4;
	sa.srq_limit = 5;
	CHECK_EQ(rpcrdma_srq_create(pd, &sa, &srq), -EINVAL);
	sa.srq_limit = 0;
	REQUIRE_EQ(rpcrdma_srq_create(pd, &sa, &srq), 0);
	CHECK(rpcrdma_srq_user_ctx(srq) == &sa);
	rw.sg_list = sg;
	CHECK_EQ(rpcrdma_post_srq_recv(srq, &rw, NULL), -EINVAL);   /* 2 SGEs > 1 */
	{
		/* an lkey that names nothing of its PD */
		struct rpcrdma_sge bad = {(uintptr_t)&sa, 8, 0x12345678u};
		struct rpcrdma_recv_wr w = {.wr_id = 2, .sg_list = &bad, .num_sge = 1};
		struct rpcrdma_recv_wr *b = NULL;

		CHECK_EQ(rpcrdma_post_srq_recv(srq, &w, &b), -EINVAL);
		CHECK(b == &w);
	}
	CHECK_EQ(rpcrdma_pd_free(pd), -EBUSY);
	CHECK_EQ(rpcrdma_srq_destroy(srq), 0);
	CHECK_EQ(rpcrdma_pd_free(pd), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* A responder's pool registers its Receive buffers in chunks, each an MR
 * of its own, and reposts them in the order their messages came: across
 * the chunks. The SRQ checks each Receive's lkey against the STag table
 * through a cache of the MRs it checked last; one entry per STag index
 * (SOFT_SRQ_LC), so reposts alternating over a few MRs take the table's
 * lock only the first time each MR is met (with one entry, every repost
 * alternating between two MRs missed: 60 misses in 60 posts). */
TEST(srq_soft_reposts_across_mrs_hit_the_lkey_cache)
{
	enum { NMR = 4, POSTS = 60 };
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_srq *srq = NULL;
	struct rpcrdma_srq_attr sa = {.max_wr = POSTS, .max_sge = 1};
	struct rpcrdma_mr *mr[NMR];
	static uint8_t buf[NMR][512];
	struct rr_mrt *t;
	uint64_t m0;

	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	t = &sctx(RR_BASE(context, ctx))->mrt;
	REQUIRE_EQ(rpcrdma_pd_alloc(ctx, &pd), 0);
	REQUIRE_EQ(rpcrdma_srq_create(pd, &sa, &srq), 0);
	for (unsigned i = 0; i < NMR; i++)
		REQUIRE_EQ(rpcrdma_reg_mr_simple(pd, buf[i], sizeof(buf[i]),
						 RPCRDMA_ACCESS_LOCAL_WRITE, &mr[i]), 0);
	m0 = rr_mrt_local_misses(t);
	for (unsigned i = 0; i < POSTS; i++) {
		struct rpcrdma_sge sg = {(uintptr_t)buf[i % NMR] + 64, 128,
					 rpcrdma_mr_lkey(mr[i % NMR])};
		struct rpcrdma_recv_wr rw = {.wr_id = i, .sg_list = &sg, .num_sge = 1};

		REQUIRE_EQ(rpcrdma_post_srq_recv(srq, &rw, NULL), 0);
	}
	/* the first post with each MR fills its entry; every later one hits */
	CHECK_EQ(rr_mrt_local_misses(t) - m0, (uint64_t)NMR);
	CHECK_EQ(rpcrdma_srq_destroy(srq), 0);
	for (unsigned i = 0; i < NMR; i++)
		CHECK_EQ(rpcrdma_dereg_mr(mr[i]), 0);
	CHECK_EQ(rpcrdma_pd_free(pd), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
}

/* The SRQ's lock (an rr_lock since part BP): a thread posting Receives one
 * at a time and another taking them as messages would (rr_soft_srq_take)
 * race on the stack; every Receive posted is taken exactly once, with its
 * own buffer, and none is left. Without the lock the two threads' count
 * updates interleave and Receives are lost or taken twice. */
enum { RACE_N = 200000, RACE_CAP = 64 };

struct srq_race {
	struct rpcrdma_srq *srq;
	struct rpcrdma_mr *mr;
	uint8_t *buf;
	atomic_bool posted_all;
	atomic_bool stop;   /* the taker saw the stack broken: give up */
};

static void *srq_race_poster(void *arg)
{
	struct srq_race *r = arg;

	for (uint32_t i = 0; i < RACE_N;) {
		struct rpcrdma_sge sg = {(uintptr_t)r->buf + i % RACE_CAP, 1, rpcrdma_mr_lkey(r->mr)};
		struct rpcrdma_recv_wr rw = {.wr_id = i, .sg_list = &sg, .num_sge = 1};
		int rc = rpcrdma_post_srq_recv(r->srq, &rw, NULL);

		if (rc == 0)
			i++;
		else if (rc != -ENOMEM || atomic_load(&r->stop))
			break;   /* the taker finds Receives missing */
	}
	atomic_store(&r->posted_all, true);
	return NULL;
}

TEST(srq_soft_post_and_take_race_loses_none)
{
	struct rpcrdma_context *ctx;
	struct rpcrdma_pd *pd;
	struct rpcrdma_srq_attr sa = {.max_wr = RACE_CAP, .max_sge = 1};
	struct srq_race r = {0};
	struct soft_srq *q;
	uint8_t *seen = calloc(RACE_N, 1);
	uint32_t taken = 0, twice = 0, wrong_buf = 0;
	pthread_t th;

	REQUIRE(seen);
	r.buf = calloc(RACE_CAP, 1);
	REQUIRE(r.buf);
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(ctx, &pd), 0);
	REQUIRE_EQ(rpcrdma_srq_create(pd, &sa, &r.srq), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(pd, r.buf, RACE_CAP, RPCRDMA_ACCESS_LOCAL_WRITE, &r.mr), 0);
	q = RR_CONTAINER_OF(RR_BASE(srq, r.srq), struct soft_srq, base);
	REQUIRE_EQ(pthread_create(&th, NULL, srq_race_poster, &r), 0);
	for (;;) {
		struct soft_rqe e;
		bool done = atomic_load(&r.posted_all);

		if (rr_soft_srq_take(q, &e) == 0) {
			if (e.wr_id >= RACE_N || seen[e.wr_id]++) {
				if (++twice == 1000)
					atomic_store(&r.stop, true);
				if (twice > 1000 && atomic_load(&r.posted_all))
					break;
			} else {
				taken++;
				if (e.iovcnt != 1 || e.iov[0].iov_base != r.buf + e.wr_id % RACE_CAP)
					wrong_buf++;
			}
			continue;
		}
		if (done)
			break;   /* posted all and the stack was empty after that */
	}
	pthread_join(th, NULL);
	CHECK_EQ(taken, (uint32_t)RACE_N);
	CHECK_EQ(twice, 0u);
	CHECK_EQ(wrong_buf, 0u);
	CHECK_EQ(sq_count_of(q), 0u);
	CHECK_EQ(rpcrdma_dereg_mr(r.mr), 0);
	CHECK_EQ(rpcrdma_srq_destroy(r.srq), 0);
	CHECK_EQ(rpcrdma_pd_free(pd), 0);
	CHECK_EQ(rpcrdma_close(ctx), 0);
	free(r.buf);
	free(seen);
}
