/* SPDX-License-Identifier: BSD-2-Clause */
/* What providers call back into (provider.h): the base fields and channel
 * counts of connection ids they create (rr_cm_id_created / _init /
 * _dropped) and the spin budget of a context (rr_spin_us). Nothing here
 * calls a provider or the dispatch layer (rdma.c), so a provider depends on
 * this file without a loop. */
#include "rdma/provider.h"

#include <stdlib.h>
#include <string.h>

uint32_t rr_spin_us(uint32_t spin_us)
{
	if (spin_us == RPCRDMA_SPIN_OFF)
		return 0;
	if (spin_us == 0) {
		const char *e = getenv("RPCRDMA_SOFT_SPIN_US");
		char *end;
		unsigned long v;

		if (!e || !*e)
			return RPCRDMA_SPIN_US_DEFAULT;
		if (!strcmp(e, "off"))
			return 0;
		errno = 0;
		v = strtoul(e, &end, 10);
		if (errno || *end || e[0] == '-')
			return RPCRDMA_SPIN_US_DEFAULT; /* not a number: the default */
		spin_us = v > RPCRDMA_SPIN_US_MAX ? RPCRDMA_SPIN_US_MAX : (uint32_t)v;
		return spin_us;
	}
	return spin_us > RPCRDMA_SPIN_US_MAX ? RPCRDMA_SPIN_US_MAX : spin_us;
}

void rr_cm_id_created(struct rr_cm_channel *ch, struct rr_cm_id *id)
{
	id->ch = ch;
	id->qp = NULL;
	id->user_ctx = NULL;
	id->listener = false;
	atomic_fetch_add(&ch->nids, 1);
}

void rr_cm_id_init(struct rr_cm_channel *ch, struct rr_cm_id *id, void *user_ctx,
		   struct rr_qp *qp, bool listener)
{
	rr_cm_id_created(ch, id);
	id->user_ctx = user_ctx;
	id->listener = listener;
	if (qp) {
		id->qp = qp;
		qp->id = id;
	}
}

void rr_cm_id_dropped(struct rr_cm_channel *ch, struct rr_cm_id *id)
{
	if (id->qp && id->qp->id == id)
		id->qp->id = NULL;
	id->qp = NULL;
	atomic_fetch_sub(&ch->nids, 1);
}
