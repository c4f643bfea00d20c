/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's context, PD, MR, MW and QP ops (objects.c). */
#ifndef RR_SOFT_OBJECTS_H
#define RR_SOFT_OBJECTS_H

#include "rdma/soft/soft.h"

int rr_soft_open(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		 struct rr_context **out);
void rr_soft_close(struct rr_context *ctx);
int rr_soft_query(struct rr_context *ctx, struct rpcrdma_caps *caps);
int rr_soft_conn_query(struct rr_cm_id *id, struct rpcrdma_conn_info *info);
int rr_soft_alloc_pd(struct rr_context *ctx, struct rr_pd **out);
int rr_soft_dealloc_pd(struct rr_pd *pd);
int rr_soft_reg_mr(struct rr_pd *pd, const struct rpcrdma_mr_attr *attr, struct rr_mr **out);
int rr_soft_rereg_mr(struct rr_mr *mr, const struct rpcrdma_mr_attr *attr);
int rr_soft_dereg_mr(struct rr_mr *mr);
int rr_soft_alloc_mw(struct rr_pd *pd, struct rr_mw **out);
int rr_soft_dealloc_mw(struct rr_mw *mw);
int rr_soft_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *attr, struct rr_qp **out);
int rr_soft_destroy_qp(struct rr_qp *qp);

#endif
