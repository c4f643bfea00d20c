/* Two endpoints of the soft provider in one process over loopback TCP, for
 * the provider tests (test_soft_progress.c, test_soft_fast.c): one context,
 * PD, CM channel with a listener on an ephemeral port, a client CQ and a
 * server CQ; queue pairs made on either CQ and connected pairwise through the
 * public CM calls (RFC 5044 MPA exchange underneath). */
#ifndef RR_TESTS_SOFT_NET_H
#define RR_TESTS_SOFT_NET_H

#include <stdint.h>

#include "rpcrdma/rdma.h"

struct net {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *listen;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *ccq, *scq;
	uint16_t port;
	uint8_t *buf;              /* net_up_buf: @buf_len bytes, registered */
	uint32_t buf_len;
	struct rpcrdma_mr *mr;
};

/* The next CM event of @ch within ~5 s: 0, or -ETIMEDOUT. */
int soft_net_get_cm(struct rpcrdma_cm_channel *ch, struct rpcrdma_cm_event *ev);
/* Everything but buffers; CQs of @cqe entries, a listen backlog of @backlog. */
void soft_net_up(struct net *n, int cqe, int backlog);
/* soft_net_up plus @len zeroed bytes registered local + remote write. */
void soft_net_up_buf(struct net *n, int cqe, int backlog, uint32_t len);
void soft_net_down(struct net *n);
/* A QP whose send and receive CQ is @cq, @depth work requests each way. */
struct rpcrdma_qp *soft_net_qp(struct net *n, struct rpcrdma_cq *cq, uint32_t depth);
/* Connects @cqp to @sqp through the listener; returns the two ids. */
void soft_net_link(struct net *n, struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid);

#endif
