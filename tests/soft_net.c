/* Two soft-provider endpoints over loopback for the provider tests
 * (soft_net.h). */
#include "soft_net.h"

#include "test.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>

int soft_net_get_cm(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev)
{
	struct pollfd p = {.fd = rpcrdma_cm_channel_fd(ch), .events = POLLIN};

	for (int i = 0; i < 500; i++) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return 0;
		poll(&p, 1, 10);
	}
	return -ETIMEDOUT;
}

void soft_net_up(struct net *n, int cqe, int backlog)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct rpcrdma_cq_attr ca = {.cqe = cqe};

	memset(n, 0, sizeof(*n));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &n->ctx), 0);
	REQUIRE_EQ(rpcrdma_pd_alloc(n->ctx, &n->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(n->ctx, &ca, &n->ccq), 0);
	REQUIRE_EQ(rpcrdma_cq_create(n->ctx, &ca, &n->scq), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(n->ctx, &n->ch), 0);
	REQUIRE_EQ(rpcrdma_listen(n->ch, (struct sockaddr *)&a, sizeof(a), backlog, NULL,
				  &n->listen), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(n->listen, &ss), 0);
	n->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void soft_net_up_buf(struct net *n, int cqe, int backlog, uint32_t len)
{
	soft_net_up(n, cqe, backlog);
	n->buf = calloc(1, len);
	REQUIRE(n->buf != NULL);
	n->buf_len = len;
	REQUIRE_EQ(rpcrdma_reg_mr_simple(n->pd, n->buf, len, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &n->mr), 0);
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

void soft_net_link(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(n->port)};
	struct rpcrdma_cm_event ev;
	int est = 0;

	REQUIRE_EQ(rpcrdma_connect(n->ch, cqp, (struct sockaddr *)&a, sizeof(a), NULL, NULL, cid), 0);
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

void soft_net_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			uint32_t len)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_recv_wr rw = {.wr_id = id, .sg_list = &sg, .num_sge = 1};

	REQUIRE_EQ(rpcrdma_post_recv(qp, &rw, NULL), 0);
}

void soft_net_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff, bool sig)
{
	struct rpcrdma_sge sg = {(uintptr_t)n->buf + off, len, rpcrdma_mr_lkey(n->mr)};
	struct rpcrdma_send_wr wr = {.wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				     .flags = sig ? RPCRDMA_SEND_SIGNALED : 0,
				     .u.rdma = {.remote_offset = (uintptr_t)n->buf + roff,
						.stag = rpcrdma_mr_rkey(n->mr)}};

	REQUIRE_EQ(rpcrdma_post_send(qp, &wr, NULL), 0);
}
