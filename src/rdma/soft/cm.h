/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's connection manager (cm.c): the CM ops, the handshake
 * steps the progress thread drives, and closing a QP's socket. */
#ifndef RR_SOFT_CM_H
#define RR_SOFT_CM_H

#include "rdma/soft/soft.h"

int rr_soft_destroy_channel(struct rr_cm_channel *ch);
int rr_soft_listen(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		   int backlog, void *user_ctx, struct rr_cm_id **out);
int rr_soft_connect(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		    socklen_t dstlen, const struct rpcrdma_conn_param *param, void *user_ctx,
		    struct rr_cm_id **out);
/* The connect_drive op (provider.h): the creating thread runs the
 * handshake of a connect made with RR_CONN_DRIVEN. */
int rr_soft_connect_drive(struct rr_cm_id *id, int timeout_ms, struct rpcrdma_cm_event *ev);
int rr_soft_accept(struct rr_cm_id *id, struct rr_qp *qp, const struct rpcrdma_conn_param *param);
int rr_soft_reject(struct rr_cm_id *id, const void *data, uint16_t len);
int rr_soft_disconnect(struct rr_cm_id *id);
int rr_soft_destroy_id(struct rr_cm_id *id);
int rr_soft_local_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);
int rr_soft_peer_addr(struct rr_cm_id *id, struct sockaddr_storage *ss);
int rr_soft_listen_limits(struct rr_cm_id *id, const struct rr_listen_limits *lim);
int rr_soft_listen_stats(struct rr_cm_id *id, struct rr_listen_stats *out);
int rr_soft_listen_shed(struct rr_cm_id *id, unsigned n);
/* The listen_driven and listen_drive ops (provider.h): the consumer's
 * thread accepts a listener's connections and reads their MPA Requests. */
int rr_soft_listen_driven(struct rr_cm_id *id, bool on);
int rr_soft_listen_drive(struct rr_cm_id *id);

/* The progress thread's steps (ctx->lock held): listener @l has connections
 * to accept (a driven listener's: its driver's step, rr_soft_listen_drive);
 * handshake socket of @id is ready (@events). */
void rr_soft_cm_listen_ready(struct soft_id *l);
void rr_soft_cm_handshake_ready(struct soft_id *id, uint32_t events);
/* MPA timeouts on a silent peer and the end of accept back-offs, as of @now
 * (ctx->lock held). Returns the earliest deadline still running
 * (UINT64_MAX: none). */
uint64_t rr_soft_cm_timeouts(struct soft_ctx *c, uint64_t now);
/* Ids on @ch the consumer never received (c->lock held; @ch NULL: all of
 * them, the context is closing). */
void rr_soft_ids_discard_uncounted(struct soft_ctx *c, struct soft_chan *ch);
/* ctx->lock, rx_lock and tx_lock held (destroy paths): the QP's socket
 * leaves every epoll set and is closed; the QP is in error from now on. */
void rr_soft_qp_closed(struct soft_qp *qp);

#endif
