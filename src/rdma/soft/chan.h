/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's CM event channels (chan.c). */
#ifndef RR_SOFT_CHAN_H
#define RR_SOFT_CHAN_H

#include "rdma/soft/soft.h"

int rr_soft_create_channel(struct rr_context *ctx, struct rr_cm_channel **out);
int rr_soft_channel_fd(struct rr_cm_channel *ch);
int rr_soft_get_event(struct rr_cm_channel *ch, struct rpcrdma_cm_event *ev);
/* The channel_quiet op (provider.h). */
int rr_soft_channel_quiet(struct rr_cm_channel *ch, bool on);
/* Queues @ev on @ch (dropped when out of memory); ends the context's CQ
 * waits when its owner uses interrupts. */
void rr_soft_chan_push(struct soft_chan *ch, const struct rpcrdma_cm_event *ev);
/* Queues event @type (@status) for @id, with the peer's IRD/ORD and private
 * data from @f when not NULL. */
void rr_soft_id_event(struct soft_id *id, enum rpcrdma_cm_event_type type, int status,
		      const struct rr_mpa_frame *f);
/* Reports DISCONNECTED (status @err) for the QP's id, once. */
void rr_soft_report_disconnect(struct soft_qp *qp, int err);

#endif
