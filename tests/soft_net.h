/* Two endpoints of the soft provider in one process over loopback TCP, for
 * the provider tests (test_soft_progress.c, test_soft_fast.c,
 * test_soft_spin.c): one context,
 * PD, CM channel with a listener on an ephemeral port, a client CQ and a
 * server CQ; queue pairs made on either CQ and connected pairwise through the
 * public CM calls (RFC 5044 MPA exchange underneath); work requests on the
 * registered buffer of soft_net_up_buf. */
#ifndef RR_TESTS_SOFT_NET_H
#define RR_TESTS_SOFT_NET_H

#include <stdbool.h>
#include <stddef.h>
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
/* soft_net_qp on the client CQ (*@cqp) and on the server CQ (*@sqp), @depth
 * work requests each way, then soft_net_link. */
void soft_net_pair(struct net *n, uint32_t depth, struct rpcrdma_qp **cqp, struct rpcrdma_qp **sqp,
		   struct rpcrdma_cm_id **cid, struct rpcrdma_cm_id **sid);
/* Undoes soft_net_pair: destroys @cid, @sid, then @cqp, @sqp (each checked). */
void soft_net_unpair(struct rpcrdma_qp *cqp, struct rpcrdma_qp *sqp, struct rpcrdma_cm_id *cid,
		     struct rpcrdma_cm_id *sid);

/* A receive of @len bytes at @off of n->buf (soft_net_up_buf), wr_id @id. */
void soft_net_post_recv(struct net *n, struct rpcrdma_qp *qp, uint64_t id, size_t off,
			uint32_t len);
/* A work request @op of @len bytes at @off of n->buf, signaled when @sig;
 * an RDMA Write/Read targets @roff of n->buf through its rkey (ignored by
 * Sends). */
void soft_net_post_send(struct net *n, struct rpcrdma_qp *qp, uint64_t id,
			enum rpcrdma_wr_opcode op, size_t off, uint32_t len, size_t roff, bool sig);

#endif
