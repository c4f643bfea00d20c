/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's race points (src/rdma/soft/race.h, docs/soft-iwarp.md
 * "Race points"): the hook runs at each point of the receive path and of a
 * CQ's arm; RPCRDMA_SOFT_PERTURB's setting is parsed strictly; a receive
 * budget of one read per turn (a turn that stops with the rest of a message
 * still in the socket) still delivers a large Send to a consumer that
 * sleeps on its armed CQ's fd, as the RPC transport's loop does; and a
 * message whose bytes arrive between a consumer's last look and its arm
 * makes the armed CQ's fd readable (the arm, then the look). Two endpoints
 * over loopback TCP through the public API. */
#include "test.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "rpcrdma/rdma.h"
#include "soft_net.h"

#define NET_BUF 131072u

/* RPCRDMA_SOFT_PERTURB and the race hook as they were before a test
 * changed them (a run under RPCRDMA_SOFT_PERTURB keeps its perturbation
 * for the tests after these). */
static struct {
	char env[64];
	bool had_env;
	rr_soft_race_fn hook;
} saved;

static void perturb_save(void)
{
	const char *e = getenv("RPCRDMA_SOFT_PERTURB");

	saved.had_env = e != NULL;
	snprintf(saved.env, sizeof(saved.env), "%s", e ? e : "");
	saved.hook = atomic_load(&rr_soft_race_hook);
}

static void perturb_restore(void)
{
	if (saved.had_env)
		setenv("RPCRDMA_SOFT_PERTURB", saved.env, 1);
	else
		unsetenv("RPCRDMA_SOFT_PERTURB");
	rr_soft_test_set_race_hook(saved.hook);
}

TEST(soft_perturb_setting_parsed)
{
	uint32_t us = 7, reads = 7;

	CHECK_EQ(rr_soft_perturb_parse(NULL, &us, &reads), 0);
	CHECK_EQ(us, 0);
	CHECK_EQ(reads, SOFT_RX_READS);
	CHECK_EQ(rr_soft_perturb_parse("20", &us, &reads), 0);
	CHECK_EQ(us, 20);
	CHECK_EQ(reads, SOFT_RX_READS);
	CHECK_EQ(rr_soft_perturb_parse("0,1", &us, &reads), 0);
	CHECK_EQ(us, 0);
	CHECK_EQ(reads, 1);
	CHECK_EQ(rr_soft_perturb_parse("x", &us, &reads), -EINVAL);
	CHECK_EQ(rr_soft_perturb_parse("5,0", &us, &reads), -EINVAL);
	CHECK_EQ(rr_soft_perturb_parse("5,", &us, &reads), -EINVAL);
	CHECK_EQ(rr_soft_perturb_parse("5,65", &us, &reads), -EINVAL);
	CHECK_EQ(rr_soft_perturb_parse("5x", &us, &reads), -EINVAL);
	CHECK_EQ(rr_soft_perturb_parse("2000000", &us, &reads), -EINVAL);
	{
		/* a context is not opened with a malformed setting */
		struct rpcrdma_context *ctx = NULL;

		perturb_save();
		REQUIRE_EQ(setenv("RPCRDMA_SOFT_PERTURB", "1,x", 1), 0);
		CHECK_EQ(rpcrdma_open("soft", NULL, &ctx), -EINVAL);
		perturb_restore();
		if (ctx)
			rpcrdma_close(ctx);
	}
}

/* The transport's way with a CQ it watches (src/transport/rdma/progress.c
 * cq_serve): drain, arm, look once more, sleep in poll(2) on the fd, take
 * the notification; until one completion (1), or -ETIMEDOUT when the fd
 * stayed quiet for RR_TEST_WAIT_MS: a lost wake-up. */
static int serve_one(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	struct pollfd p = {.fd = rpcrdma_cq_fd(cq), .events = POLLIN};

	for (;;) {
		int r = rpcrdma_cq_poll(cq, 1, wc);

		if (r)
			return r;
		if (rpcrdma_cq_arm(cq, false) != 0)
			return -EIO;
		r = rpcrdma_cq_poll(cq, 1, wc);
		if (r)
			return r;
		if (poll(&p, 1, RR_TEST_WAIT_MS) != 1)
			return -ETIMEDOUT;
		(void)rpcrdma_cq_get_event(cq);
	}
}

static void count_points(enum soft_race pt, void *obj)
{
	RR_UNUSED(pt), RR_UNUSED(obj);
}

/* One read per receive turn (RPCRDMA_SOFT_PERTURB=0,1): eight Sends of
 * 6,000 bytes (more than ten reads of at most SOFT_STAGE_LOOK) take many
 * turns, each leaving the rest in the
 * socket for level-triggered readiness to report again; they arrive whole
 * and in order through the armed CQ. */
TEST(soft_budget_one_read_per_turn_delivers_every_send)
{
	enum { NS = 8, LEN = 6000 };
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;

	perturb_save();
	REQUIRE_EQ(setenv("RPCRDMA_SOFT_PERTURB", "0,1", 1), 0);
	soft_net_up_buf(&n, 64, 4, NET_BUF);
	perturb_restore();
	CHECK_EQ(RR_CONTAINER_OF(RR_BASE(context, n.ctx), struct soft_ctx, base)->rx_reads, 1);
	soft_net_pair(&n, 16, &c, &s, &cid, &sid);
	for (uint32_t i = 0; i < NS * LEN; i++)
		n.buf[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < NS; i++)
		soft_net_post_recv(&n, s, 100 + (uint64_t)i, 65536 + (size_t)i * LEN, LEN);
	rr_soft_test_set_race_hook(count_points);
	for (int i = 0; i < NS; i++)
		soft_net_post_send(&n, c, 200 + (uint64_t)i, RPCRDMA_WR_SEND, (size_t)i * LEN, LEN,
				   0, true);
	for (int i = 0; i < NS; i++) {
		REQUIRE_EQ(serve_one(n.scq, &wc), 1);
		CHECK_EQ(wc.wr_id, 100 + (uint64_t)i);
		CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, LEN);
	}
	CHECK_MEM(n.buf + 65536, n.buf, NS * LEN);
	/* 48,000 bytes in look-aheads of 4,096 and payloads read in place:
	 * a dozen reads, so a dozen turns of one read each */
	CHECK(rr_soft_race_count(SOFT_RACE_RX_READ) >= NS);
	perturb_restore();
	for (int i = 0; i < NS; i++) {
		REQUIRE_EQ(serve_one(n.ccq, &wc), 1);
		CHECK_EQ(wc.wr_id, 200 + (uint64_t)i);
	}
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}

/* The arm point: the peer's Send posted and its bytes in the server's
 * socket while the consumer is between its last look and its arm. */
static struct {
	struct net *n;
	struct rpcrdma_qp *c, *s;
	struct soft_cq *q;
	bool done;
} arm_race;

static void send_before_arm(enum soft_race pt, void *obj)
{
	if (pt != SOFT_RACE_ARM || obj != arm_race.q || arm_race.done)
		return;
	arm_race.done = true;
	soft_net_post_send(arm_race.n, arm_race.c, 9, RPCRDMA_WR_SEND, 0, 100, 0, true);
	REQUIRE(soft_net_until_socket_holds(arm_race.s, soft_net_send_fpdu(100)));
}

TEST(soft_bytes_before_arm_make_armed_fd_readable)
{
	struct net n;
	struct rpcrdma_qp *c, *s;
	struct rpcrdma_cm_id *cid, *sid;
	struct rpcrdma_wc wc;
	struct pollfd p;

	soft_net_up_buf(&n, 64, 4, NET_BUF);
	soft_net_pair(&n, 8, &c, &s, &cid, &sid);
	memset(n.buf, 0x5a, 100);
	soft_net_post_recv(&n, s, 8, 65536, 100);
	while (rpcrdma_cq_get_event(n.scq) == 1)
		;
	CHECK_EQ(rpcrdma_cq_poll(n.scq, 1, &wc), 0);
	arm_race.n = &n;
	arm_race.c = c;
	arm_race.s = s;
	arm_race.q = soft_net_cq_of(n.scq);
	arm_race.done = false;
	perturb_save();
	rr_soft_test_set_race_hook(send_before_arm);
	REQUIRE_EQ(rpcrdma_cq_arm(n.scq, false), 0);
	perturb_restore();
	CHECK(arm_race.done);
	/* no look after the arm: the fd alone must say it */
	p = (struct pollfd){.fd = rpcrdma_cq_fd(n.scq), .events = POLLIN};
	CHECK_EQ(poll(&p, 1, RR_TEST_WAIT_MS), 1);
	(void)rpcrdma_cq_get_event(n.scq);
	REQUIRE_EQ(serve_one(n.scq, &wc), 1);
	CHECK_EQ(wc.wr_id, 8);
	CHECK_EQ(wc.byte_len, 100);
	CHECK_MEM(n.buf + 65536, n.buf, 100);
	REQUIRE_EQ(serve_one(n.ccq, &wc), 1);
	CHECK_EQ(wc.wr_id, 9);
	soft_net_unpair(c, s, cid, sid);
	soft_net_down(&n);
}
