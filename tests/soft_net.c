/* SPDX-License-Identifier: BSD-2-Clause */
/* Two soft-provider endpoints over loopback for the provider tests
 * (soft_net.h). */
#include "soft_net.h"

#include "test.h"

#include <arpa/inet.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <time.h>
#include <stdlib.h>
#include <unistd.h>

#include "rdma/provider.h"
#include "rdma/soft/soft.h"

int soft_net_get_cm(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev)
{
	struct pollfd p = {.fd = rpcrdma_cm_channel_fd(ch), .events = POLLIN};

	for (int i = 0; i < RR_TEST_WAIT_MS / 10; i++) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return 0;
		poll(&p, 1, 10);
	}
	return -ETIMEDOUT;
}

bool soft_net_cm_readable(struct rpcrdma_cm_channel *ch, int ms)
{
	struct pollfd p = {.fd = rpcrdma_cm_channel_fd(ch), .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

static void net_up(struct net *n, int cqe, int backlog, const struct rpcrdma_env *env)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct rpcrdma_cq_attr ca = {.cqe = cqe};
	struct rpcrdma_open_attr oa = {0};

	memset(n, 0, sizeof(*n));
	oa.env = env;
	REQUIRE_EQ(rpcrdma_open("soft", env ? &oa : NULL, &n->ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(n->ctx, &n->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(n->ctx, &ca, &n->ccq), 0);
	REQUIRE_EQ(rpcrdma_cq_create(n->ctx, &ca, &n->scq), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(n->ctx, &n->ch), 0);
	REQUIRE_EQ(rpcrdma_listen(n->ch, (struct sockaddr *)&a, sizeof(a), backlog, NULL,
				  &n->listen), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(n->listen, &ss), 0);
	n->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void soft_net_up(struct net *n, int cqe, int backlog)
{
	net_up(n, cqe, backlog, NULL);
}

void soft_net_up_env(struct net *n, int cqe, int backlog, uint32_t len,
		     const struct rpcrdma_env *env)
{
	net_up(n, cqe, backlog, env);
	n->buf = calloc(1, len);
	REQUIRE(n->buf != NULL);
	n->buf_len = len;
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n->pd, n->buf, len, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &n->mr), 0);
}

void soft_net_up_buf(struct net *n, int cqe, int backlog, uint32_t len)
{
	soft_net_up_env(n, cqe, backlog, len, NULL);
}

uint64_t soft_net_real_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t held_now(void *ctx)
{
	uint64_t t = atomic_load(&((struct soft_net_clock *)ctx)->held_ns);

	return t ? t : soft_net_real_now_ns();
}

void soft_net_held_env(struct rpcrdma_env *env, struct soft_net_clock *clk)
{
	*env = *rpcrdma_env_default();
	env->now_ns = held_now;
	env->clock_ctx = clk;
}

void soft_net_down(struct net *n)
{
	if (n->mr)
		CHECK_EQ(rpcrdma_dereg_mr(n->mr), 0);
	free(n->buf);
	CHECK_EQ(rpcrdma_cm_id_destroy(n->listen), 0);
	CHECK_EQ(rpcrdma_cm_channel_destroy(n->ch), 0);
	CHECK_EQ(rpcrdma_cq_destroy(n->ccq), 0);
	CHECK_EQ(rpcrdma_cq_destroy(n->scq), 0);
	CHECK_EQ(rpcrdma_pd_free(n->pd), 0);
	CHECK_EQ(rpcrdma_close(n->ctx), 0);
}

struct rpcrdma_qp *soft_net_qp(struct net *n, struct rpcrdma_cq *cq, uint32_t depth)
{
	struct rpcrdma_qp_attr qa = {.send_cq = cq, .recv_cq = cq, .max_send_wr = depth,
				     .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1};
	struct rpcrdma_qp *qp;

	REQUIRE_EQ(rpcrdma_qp_create(n->pd, &qa, &qp), 0);
	return qp;
}

void soft_ep_make(struct rpcrdma_context *ctx, struct soft_ep *e, uint32_t depth, uint32_t sge)
{
	struct rpcrdma_cq_attr ca = {.cqe = 64};
	struct rpcrdma_qp_attr qa;

	REQUIRE_EQ(rpcrdma_pd_alloc(ctx, &e->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(ctx, &ca, &e->cq), 0);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = e->cq;
	qa.max_send_wr = qa.max_recv_wr = depth;
	qa.max_send_sge = qa.max_recv_sge = sge;
	REQUIRE_EQ(rpcrdma_qp_create(e->pd, &qa, &e->qp), 0);
}

void soft_ep_free(struct soft_ep *e)
{
	CHECK_EQ(rpcrdma_qp_destroy(e->qp), 0);
	CHECK_EQ(rpcrdma_cq_destroy(e->cq), 0);
	CHECK_EQ(rpcrdma_pd_free(e->pd), 0);
}

void soft_net_connect(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_cm_id **cid)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(n->port)};

	REQUIRE_EQ(rpcrdma_connect(n->ch, cqp, (struct sockaddr *)&a, sizeof(a), NULL, NULL, cid), 0);
}

void soft_net_link(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid)
{
	struct rpcrdma_cm_event ev;
	int est = 0;

	soft_net_connect(n, cqp, cid);
	REQUIRE_EQ(soft_net_get_cm(n->ch, &ev), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	*sid = ev.id;
	REQUIRE_EQ(rpcrdma_accept(*sid, sqp, NULL), 0);
	while (est < 2) {
		REQUIRE_EQ(soft_net_get_cm(n->ch, &ev), 0);
		REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
		est++;
	}
}

void soft_net_pair(struct net *n, uint32_t depth, struct rpcrdma_qp **cqp, struct rpcrdma_qp **sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid)
{
	*cqp = soft_net_qp(n, n->ccq, depth);
	*sqp = soft_net_qp(n, n->scq, depth);
	soft_net_link(n, *cqp, *sqp, cid, sid);
}

void soft_net_unpair(struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp, struct rpcrdma_cm_id *cid,
		     struct rpcrdma_cm_id *sid)
{
	CHECK_EQ(rpcrdma_cm_id_destroy(cid), 0);
	CHECK_EQ(rpcrdma_cm_id_destroy(sid), 0);
	CHECK_EQ(rpcrdma_qp_destroy(cqp), 0);
	CHECK_EQ(rpcrdma_qp_destroy(sqp), 0);
}

int soft_net_try_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			   uint32_t len)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_recv_wr rw = {.wr_id = id, .sg_list = &sg, .num_sge = 1};

	return rpcrdma_post_recv(qp, &rw, NULL);
}

int soft_net_try_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			   enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff,
			   bool sig)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				     .flags = sig ? RPCRDMA_SEND_SIGNALED : 0,
				     .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(n->mr) + roff,
						.stag = rpcrdma_mr_rkey(n->mr)}};

	return rpcrdma_post_send(qp, &wr, NULL);
}

void soft_net_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			uint32_t len)
{
	REQUIRE_EQ(soft_net_try_post_recv(n, qp, id, off, len), 0);
}

void soft_net_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff, bool sig)
{
	REQUIRE_EQ(soft_net_try_post_send(n, qp, id, op, off, len, roff, sig), 0);
}

void soft_net_read_check(struct net *n, struct rpcrdma_qp *c, uint64_t id, uint32_t len)
{
	struct rpcrdma_wc wc;
	struct rpcrdma_mr *src;

	for (uint32_t i = 0; i < len; i++)
		n->buf[i] = (uint8_t)(i * 7 + id);
	memset(n->buf + 4096, 0, len);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n->pd, n->buf, len, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &src), 0);
	{
		struct rpcrdma_sge sg = {(uintptr_t)n->buf + 4096, len, rpcrdma_mr_lkey(n->mr)};
		struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1,
					     .opcode = RPCRDMA_WR_RDMA_READ,
					     .flags = RPCRDMA_SEND_SIGNALED,
					     .u.rdma = {.remote_offset = rpcrdma_mr_remote_offset(src),
							.stag = rpcrdma_mr_rkey(src)}};

		REQUIRE_EQ(rpcrdma_post_send(c, &wr, NULL), 0);
	}
	REQUIRE_EQ(rpcrdma_cq_wait(n->ccq, 1, &wc, RR_TEST_WAIT_MS), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id);
	CHECK_EQ(wc.byte_len, len);
	CHECK_MEM(n->buf + 4096, n->buf, len);
	CHECK_EQ(rpcrdma_dereg_mr(src), 0);
}

static void *wait_thread(void *arg)
{
	struct soft_net_waiter *w = arg;
	uint64_t t0 = rr_now_ns(NULL), end = t0 + (uint64_t)w->timeout_ms * 1000000u;

	do
		w->rc = rpcrdma_cq_wait(w->cq, 1, &w->wc, w->timeout_ms);
	while (w->again && w->rc == 0 && rr_now_ns(NULL) < end);
	w->end_ns = rr_now_ns(NULL);
	w->ns = w->end_ns - t0;
	return NULL;
}

static void wait_start(struct soft_net_waiter *w, struct rpcrdma_cq *cq, int timeout_ms,
		       bool again)
{
	*w = (struct soft_net_waiter){.cq = cq, .timeout_ms = timeout_ms, .again = again};
	REQUIRE_EQ(pthread_create(&w->th, NULL, wait_thread, w), 0);
}

void soft_net_wait_start(struct soft_net_waiter *w, struct rpcrdma_cq *cq, int timeout_ms)
{
	wait_start(w, cq, timeout_ms, false);
}

void soft_net_wait_start_again(struct soft_net_waiter *w, struct rpcrdma_cq *cq, int timeout_ms)
{
	wait_start(w, cq, timeout_ms, true);
}

void soft_net_wait_join(struct soft_net_waiter *w)
{
	REQUIRE_EQ(pthread_join(w->th, NULL), 0);
}

struct soft_cq *soft_net_cq_of(struct rpcrdma_cq *cq)
{
	return RR_CONTAINER_OF(RR_BASE(cq, cq), struct soft_cq, base);
}

struct soft_qp *soft_net_qp_of(struct rpcrdma_qp *qp)
{
	return RR_CONTAINER_OF(RR_BASE(qp, qp), struct soft_qp, base);
}

bool soft_net_handed(struct rpcrdma_qp *qp)
{
	struct soft_qp *q = soft_net_qp_of(qp);
	bool on;

	rr_lock(&q->tx_lock);
	on = q->obj.in_epoll;
	rr_unlock(&q->tx_lock);
	return on;
}

static bool fast_blocked(void *arg)
{
	return atomic_load(&((struct soft_cq *)arg)->fast_blocked) != 0;
}

bool soft_net_until_fast_blocked(struct rpcrdma_cq *cq)
{
	return rr_test_until(fast_blocked, soft_net_cq_of(cq), RR_TEST_WAIT_MS);
}

static bool thread_asleep(void *arg)
{
	return atomic_load(&((struct soft_ctx *)arg)->sleep_until) == UINT64_MAX;
}

bool soft_net_until_thread_asleep(struct rpcrdma_context *ctx)
{
	return rr_test_until(thread_asleep,
			     RR_CONTAINER_OF(RR_BASE(context, ctx), struct soft_ctx, base),
			     RR_TEST_WAIT_MS);
}

struct waiting_arg {
	struct soft_cq *q;
	int n;
};

static bool waiting_n(void *arg)
{
	struct waiting_arg *a = arg;

	return atomic_load(&a->q->waiting) >= a->n;
}

bool soft_net_until_waiting(struct rpcrdma_cq *cq, int n)
{
	struct waiting_arg a = {soft_net_cq_of(cq), n};

	return rr_test_until(waiting_n, &a, RR_TEST_WAIT_MS);
}

struct holds_arg {
	int fd;
	size_t bytes;
};

static bool holds(void *arg)
{
	struct holds_arg *a = arg;
	int n = 0;

	return ioctl(a->fd, FIONREAD, &n) == 0 && (size_t)n >= a->bytes;
}

bool soft_net_until_socket_holds(struct rpcrdma_qp *qp, size_t bytes)
{
	struct holds_arg a = {soft_net_qp_of(qp)->obj.fd, bytes};

	return rr_test_until(holds, &a, 5000);
}

size_t soft_net_send_fpdu(uint32_t len)
{
	/* ULPDU length (2) + untagged header (2 + 16) + payload, padded to
	 * 4, + CRC field (4, present when CRC is off too) */
	return RR_ALIGN4(2u + 18u + (size_t)len) + 4u;
}
