/* SPDX-License-Identifier: BSD-2-Clause */
/* The "rdma" scheme's transport controls (rpc/xprt_ctl.h): counters and push
 * mode, implemented over the driver (transport/rdma/tp.h). */
#ifndef RR_TRANSPORT_RDMA_EXT_H
#define RR_TRANSPORT_RDMA_EXT_H

#include "transport/xprt_ctl.h"
#include "transport/rdma/tp.h"

int rr_rdma_client_ctl(struct rr_tp_client *tp, unsigned op, void *arg);
/* @sreq: the request's connection, or NULL for the endpoint. */
int rr_rdma_server_ctl(struct rr_tp_server *tp, struct rr_conn_sreq *sreq, unsigned op, void *arg);

#endif
