/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's cq_describe op (describe.c): a CQ's and its QPs'
 * state, for a failure's dump. */
#ifndef RR_SOFT_DESCRIBE_H
#define RR_SOFT_DESCRIBE_H

#include "rdma/soft/soft.h"

void rr_soft_cq_describe(struct rr_cq *cq, FILE *f, void (*name)(FILE *f, void *user_ctx));

#endif
