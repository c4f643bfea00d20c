/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the software completion ring (src/rdma/cq_ring.c): order and
 * wrap-around, overrun as an error state, eventfd readiness with arming and
 * solicited-only notification, and several producer threads against one
 * consumer waiting on the fd. */
#include "test.h"
#include "rdma/cq_ring.h"

#include <poll.h>
#include <pthread.h>
#include <semaphore.h>

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static struct rpcrdma_wc wc_of(uint64_t id, enum rpcrdma_wc_opcode op, uint32_t flags,
			       enum rpcrdma_wc_status st)
{
	struct rpcrdma_wc wc = {.wr_id = id, .opcode = op, .flags = flags, .status = st};
	return wc;
}

TEST(rdma_cq_fill_poll_wrap)
{
	struct rr_test_env te;
	struct rr_cq_ring r;
	struct rpcrdma_wc out[8];
	uint64_t next_in = 0, next_out = 0;

	rr_test_env_init(&te, 1);
	REQUIRE_EQ(rr_cq_ring_init(&r, &te.env, 5), 0);
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), 0);
	for (int round = 0; round < 20; round++) {
		int k = 1 + round % 5;

		for (int i = 0; i < k; i++) {
			struct rpcrdma_wc w = wc_of(next_in++, RPCRDMA_WC_SEND, 0, 0);

			REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0);
		}
		CHECK_EQ(rr_cq_ring_count(&r), k);
		/* drain in two polls to cross the wrap point */
		int got = rr_cq_ring_poll(&r, 2, out);

		REQUIRE(got == RR_MIN(2, k));
		for (int i = 0; i < got; i++)
			CHECK_EQ(out[i].wr_id, next_out++);
		got = rr_cq_ring_poll(&r, 8, out);
		REQUIRE_EQ(got, k - RR_MIN(2, k));
		for (int i = 0; i < got; i++)
			CHECK_EQ(out[i].wr_id, next_out++);
	}
	CHECK_EQ(rr_cq_ring_poll(&r, 0, out), 0);
	CHECK_EQ(rr_cq_ring_poll(&r, -1, out), -EINVAL);
	rr_cq_ring_fini(&r);
	CHECK_EQ(te.live, 0);
	CHECK_EQ(rr_cq_ring_init(&r, NULL, 0), -EINVAL);
	te.fail_at = te.allocs + 1;
	CHECK_EQ(rr_cq_ring_init(&r, &te.env, 4), -ENOMEM);
}

/* The ring never empties (so its head never goes back to slot 0): pushes
 * and polls cross the end of the slots again and again, at every offset
 * of a capacity that is not a power of two, and order holds (the slot
 * index is wrapped without a division: cq_ring.c). */
TEST(rdma_cq_wrap_while_held)
{
	struct rr_cq_ring r;
	struct rpcrdma_wc out[8];
	uint64_t next_in = 0, next_out = 0;
	int held = 0;

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, 7), 0);
	for (int round = 0; round < 200; round++) {
		/* fill up to the capacity, then take 1..6 of them */
		while (held < 7) {
			struct rpcrdma_wc w = wc_of(next_in++, RPCRDMA_WC_SEND, 0, 0);

			REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0);
			held++;
		}
		int k = 1 + (round * 5) % 6, got = rr_cq_ring_poll(&r, k, out);

		REQUIRE_EQ(got, k);
		for (int i = 0; i < got; i++)
			REQUIRE_EQ(out[i].wr_id, next_out++);
		held -= got;
		REQUIRE_EQ(rr_cq_ring_count(&r), (uint32_t)held);
	}
	/* full: the next push overruns, the held ones still come in order */
	{
		struct rpcrdma_wc w = wc_of(next_in, RPCRDMA_WC_SEND, 0, 0);

		while (held < 7) {
			w.wr_id = next_in++;
			REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0);
			held++;
		}
		CHECK_EQ(rr_cq_ring_push(&r, &w), -EOVERFLOW);
	}
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), 7);
	for (int i = 0; i < 7; i++)
		CHECK_EQ(out[i].wr_id, next_out++);
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), -EOVERFLOW);
	rr_cq_ring_fini(&r);
}

TEST(rdma_cq_overflow_is_error_state)
{
	struct rr_cq_ring r;
	struct rpcrdma_wc out[8], w = wc_of(1, RPCRDMA_WC_RECV, 0, 0);

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, 3), 0);
	for (int i = 0; i < 3; i++) {
		w.wr_id = (uint64_t)i;
		REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0);
	}
	CHECK(!fd_readable(rr_cq_ring_fd(&r))); /* not armed */
	w.wr_id = 3;
	CHECK_EQ(rr_cq_ring_push(&r, &w), -EOVERFLOW);
	/* the consumer is woken even though it never armed */
	CHECK(fd_readable(rr_cq_ring_fd(&r)));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	/* held completions first, then the error, for good */
	CHECK_EQ(rr_cq_ring_poll(&r, 2, out), 2);
	CHECK_EQ(out[0].wr_id, 0);
	CHECK_EQ(out[1].wr_id, 1);
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), 1);
	CHECK_EQ(out[0].wr_id, 2);
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), -EOVERFLOW);
	/* room again, but the ring stays in the error state */
	CHECK_EQ(rr_cq_ring_push(&r, &w), -EOVERFLOW);
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), -EOVERFLOW);
	rr_cq_ring_fini(&r);
}

TEST(rdma_cq_fd_arm_semantics)
{
	struct rr_cq_ring r;
	struct rpcrdma_wc out[4];
	struct rpcrdma_wc send = wc_of(1, RPCRDMA_WC_SEND, 0, RPCRDMA_WC_SUCCESS);
	struct rpcrdma_wc recv = wc_of(2, RPCRDMA_WC_RECV, 0, RPCRDMA_WC_SUCCESS);
	struct rpcrdma_wc srecv = wc_of(3, RPCRDMA_WC_RECV, RPCRDMA_WC_SOLICITED, 0);
	struct rpcrdma_wc err = wc_of(4, RPCRDMA_WC_SEND, 0, RPCRDMA_WC_WR_FLUSH_ERR);
	int fd;

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, 64), 0);
	fd = rr_cq_ring_fd(&r);
	REQUIRE(fd >= 0);
	CHECK_EQ(rr_cq_ring_get_event(&r), 0);
	/* unarmed: no notification */
	REQUIRE_EQ(rr_cq_ring_push(&r, &send), 0);
	CHECK(!fd_readable(fd));
	/* arming does not fire for completions already held */
	REQUIRE_EQ(rr_cq_ring_arm(&r, false), 0);
	CHECK(!fd_readable(fd));
	REQUIRE_EQ(rr_cq_ring_push(&r, &recv), 0);
	CHECK(fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	CHECK(!fd_readable(fd));
	/* one-shot: disarmed after firing */
	REQUIRE_EQ(rr_cq_ring_push(&r, &recv), 0);
	CHECK(!fd_readable(fd));
	/* solicited only: plain completions do not fire, solicited ones do */
	REQUIRE_EQ(rr_cq_ring_arm(&r, true), 0);
	REQUIRE_EQ(rr_cq_ring_push(&r, &send), 0);
	REQUIRE_EQ(rr_cq_ring_push(&r, &recv), 0);
	CHECK(!fd_readable(fd));
	REQUIRE_EQ(rr_cq_ring_push(&r, &srecv), 0);
	CHECK(fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	/* errors count as solicited */
	REQUIRE_EQ(rr_cq_ring_arm(&r, true), 0);
	REQUIRE_EQ(rr_cq_ring_push(&r, &err), 0);
	CHECK(fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	/* "any" is not narrowed by a later solicited-only arm */
	REQUIRE_EQ(rr_cq_ring_arm(&r, false), 0);
	REQUIRE_EQ(rr_cq_ring_arm(&r, true), 0);
	REQUIRE_EQ(rr_cq_ring_push(&r, &send), 0);
	CHECK(fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	/* a solicited flag on a send completion is not a solicited receive */
	REQUIRE_EQ(rr_cq_ring_arm(&r, true), 0);
	send.flags = RPCRDMA_WC_SOLICITED;
	REQUIRE_EQ(rr_cq_ring_push(&r, &send), 0);
	CHECK(!fd_readable(fd));
	int total = 0, n;

	while ((n = rr_cq_ring_poll(&r, 4, out)) > 0)
		total += n;
	CHECK_EQ(n, 0);
	CHECK_EQ(total, 9);
	rr_cq_ring_fini(&r);
}

#define MT_PRODUCERS 4
#define MT_PER 20000
#define MT_CAP 64

struct mt_ctx {
	struct rr_cq_ring *r;
	sem_t credits;
	int idx;
	int overflows;
};

struct mt_arg {
	struct mt_ctx *c;
	int idx;
};

static void *mt_producer(void *p)
{
	struct mt_arg *a = p;

	for (uint64_t i = 0; i < MT_PER; i++) {
		struct rpcrdma_wc w = wc_of((uint64_t)a->idx << 32 | i, RPCRDMA_WC_RECV,
					    (i % 7 == 0) ? RPCRDMA_WC_SOLICITED : 0, 0);

		while (sem_wait(&a->c->credits) != 0)
			;
		if (rr_cq_ring_push(a->c->r, &w) != 0)
			__atomic_fetch_add(&a->c->overflows, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Several producers, one consumer that sleeps on the fd with the
 * arm-then-poll-again discipline; nothing is lost, per-producer order holds,
 * the consumer never hangs (poll timeouts bound it). */
TEST(rdma_cq_multithread_producers)
{
	struct rr_cq_ring r;
	struct mt_ctx c = {.r = &r};
	struct mt_arg args[MT_PRODUCERS];
	pthread_t th[MT_PRODUCERS];
	uint64_t next[MT_PRODUCERS] = {0};
	uint64_t total = 0, waits = 0, stalls = 0;
	struct rpcrdma_wc out[16];

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, MT_CAP), 0);
	REQUIRE_EQ(sem_init(&c.credits, 0, MT_CAP), 0);
	for (int i = 0; i < MT_PRODUCERS; i++) {
		args[i].c = &c;
		args[i].idx = i;
		REQUIRE_EQ(pthread_create(&th[i], NULL, mt_producer, &args[i]), 0);
	}
	while (total < (uint64_t)MT_PRODUCERS * MT_PER && stalls < 50) {
		int n = rr_cq_ring_poll(&r, 16, out);

		REQUIRE(n >= 0);
		if (n == 0) {
			struct pollfd p = {.fd = rr_cq_ring_fd(&r), .events = POLLIN};

			REQUIRE_EQ(rr_cq_ring_arm(&r, (waits & 1) != 0), 0);
			n = rr_cq_ring_poll(&r, 16, out); /* closes the race */
			REQUIRE(n >= 0);
			if (n == 0) {
				waits++;
				if (poll(&p, 1, 100) == 0)
					stalls++; /* solicited-only arms may wait longer */
				rr_cq_ring_get_event(&r);
				continue;
			}
		}
		for (int i = 0; i < n; i++) {
			unsigned who = (unsigned)(out[i].wr_id >> 32);
			uint64_t seq = out[i].wr_id & 0xffffffffu;

			REQUIRE(who < MT_PRODUCERS);
			CHECK_EQ(seq, next[who]);
			next[who] = seq + 1;
			sem_post(&c.credits);
		}
		total += (uint64_t)n;
	}
	for (int i = 0; i < MT_PRODUCERS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(total, (uint64_t)MT_PRODUCERS * MT_PER);
	CHECK_EQ(c.overflows, 0);
	for (int i = 0; i < MT_PRODUCERS; i++)
		CHECK_EQ(next[i], MT_PER);
	CHECK_EQ(rr_cq_ring_poll(&r, 16, out), 0);
	sem_destroy(&c.credits);
	rr_cq_ring_fini(&r);
}

/* A completion pushed by the consumer's own inline progress (quiet) consumes
 * the arm without writing the fd; the consumer finds it by polling. A later
 * push needs a new arm, as after any notification. get_event only reads the
 * fd after a notification was written. */
TEST(rdma_cq_quiet_push_consumes_arm)
{
	struct rr_cq_ring r;
	struct rpcrdma_wc out[4];
	struct rpcrdma_wc recv = wc_of(7, RPCRDMA_WC_RECV, 0, RPCRDMA_WC_SUCCESS);
	int fd;

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, 8), 0);
	fd = rr_cq_ring_fd(&r);
	REQUIRE_EQ(rr_cq_ring_arm(&r, false), 0);
	CHECK(rr_cq_ring_armed(&r));
	REQUIRE_EQ(rr_cq_ring_push_ex(&r, &recv, true), 0);
	CHECK(!fd_readable(fd));
	CHECK(!rr_cq_ring_armed(&r));
	CHECK_EQ(rr_cq_ring_get_event(&r), 0);
	CHECK_EQ(rr_cq_ring_poll(&r, 4, out), 1);
	CHECK_EQ(out[0].wr_id, 7u);
	/* disarmed: a normal push does not notify either */
	REQUIRE_EQ(rr_cq_ring_push(&r, &recv), 0);
	CHECK(!fd_readable(fd));
	/* re-armed: it does, once */
	REQUIRE_EQ(rr_cq_ring_arm(&r, false), 0);
	REQUIRE_EQ(rr_cq_ring_push(&r, &recv), 0);
	CHECK(fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 1);
	CHECK(!fd_readable(fd));
	CHECK_EQ(rr_cq_ring_get_event(&r), 0);
	/* a quiet push on an unarmed ring changes nothing */
	REQUIRE_EQ(rr_cq_ring_push_ex(&r, &recv, true), 0);
	CHECK(!fd_readable(fd));
	CHECK_EQ(rr_cq_ring_poll(&r, 4, out), 3);
	rr_cq_ring_fini(&r);
}

/* One QP's completions taken out of a ring that others share
 * (rr_cq_ring_take_qp, the soft provider's wait_qp): its own, oldest first,
 * and only from a queue of which the ring holds as many as the caller says
 * nobody else took; the others keep their order. */
TEST(rdma_cq_take_qp_keeps_order_and_others)
{
	struct rr_cq_ring r;
	struct rpcrdma_wc out[8];
	struct rpcrdma_qp *a = (void *)0x1000, *b = (void *)0x2000;
	struct rr_cq_ring_take t = {.qp = a};
	/* pushed: a.recv 1, b.recv 2, a.send 3, b.send 4, a.recv 5, a.send 6 */
	static const struct {
		int qp; /* 0: a */
		enum rpcrdma_wc_opcode op;
	} seq[] = {{0, RPCRDMA_WC_RECV}, {1, RPCRDMA_WC_RECV}, {0, RPCRDMA_WC_SEND},
		   {1, RPCRDMA_WC_SEND}, {0, RPCRDMA_WC_RECV}, {0, RPCRDMA_WC_SEND}};

	REQUIRE_EQ(rr_cq_ring_init(&r, NULL, 8), 0);
	/* an empty ring: nothing */
	CHECK_EQ(rr_cq_ring_take_qp(&r, &t, 8, out), 0);
	CHECK_EQ(t.held_rq + t.held_sq, 0u);
	/* the head moved on first, so that the compaction crosses the end */
	for (int i = 0; i < 5; i++) {
		struct rpcrdma_wc w = wc_of(90, RPCRDMA_WC_SEND, 0, 0);

		w.qp = b;
		REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0);
	}
	CHECK_EQ(rr_cq_ring_poll(&r, 4, out), 4); /* one b.send 90 left at 4 */
	for (size_t i = 0; i < RR_ARRAY_SIZE(seq); i++) {
		struct rpcrdma_wc w = wc_of(1 + i, seq[i].op, 0, 0);

		w.qp = seq[i].qp ? b : a;
		REQUIRE_EQ(rr_cq_ring_push(&r, &w), 0); /* 4 wraps past the end */
	}
	CHECK(rr_cq_ring_holds_qp(&r, a));
	/* the caller counts 1 receive of a's nobody else has: the ring holds
	 * 2, so another consumer has one of them: no receive is taken; of the
	 * sends, 2 expected and held: taken, in order */
	t = (struct rr_cq_ring_take){.qp = a, .want_rq = 1, .want_sq = 2};
	CHECK_EQ(rr_cq_ring_take_qp(&r, &t, 8, out), 2);
	CHECK_EQ(t.held_rq, 2u);
	CHECK_EQ(t.held_sq, 2u);
	CHECK_EQ(t.took_rq, 0u);
	CHECK_EQ(t.took_sq, 2u);
	CHECK_EQ(out[0].wr_id, 3u);
	CHECK_EQ(out[1].wr_id, 6u);
	CHECK_EQ(rr_cq_ring_count(&r), 5u);
	/* now as many as expected, one at most per call: oldest first */
	t = (struct rr_cq_ring_take){.qp = a, .want_rq = 2};
	CHECK_EQ(rr_cq_ring_take_qp(&r, &t, 1, out), 1);
	CHECK_EQ(out[0].wr_id, 1u);
	CHECK_EQ(out[0].qp, a);
	CHECK_EQ(t.took_rq, 1u);
	t = (struct rr_cq_ring_take){.qp = a, .want_rq = 1};
	CHECK_EQ(rr_cq_ring_take_qp(&r, &t, 8, out), 1);
	CHECK_EQ(out[0].wr_id, 5u);
	CHECK(!rr_cq_ring_holds_qp(&r, a));
	/* b's are all there, in their order */
	CHECK_EQ(rr_cq_ring_poll(&r, 8, out), 3);
	CHECK_EQ(out[0].wr_id, 90u);
	CHECK_EQ(out[1].wr_id, 2u);
	CHECK_EQ(out[2].wr_id, 4u);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(out[i].qp, b);
	CHECK_EQ(rr_cq_ring_take_qp(&r, NULL, 8, out), -EINVAL);
	rr_cq_ring_fini(&r);
}
