/* SPDX-License-Identifier: BSD-2-Clause */
/* A soft context's progress thread (progress.c). */
#ifndef RR_SOFT_PROGRESS_H
#define RR_SOFT_PROGRESS_H

#include "rdma/soft/soft.h"

/* Creates the context's epoll set and wake eventfd and starts its thread:
 * 0 or -errno. */
int rr_soft_progress_start(struct soft_ctx *ctx);
/* Stops the thread, frees the ids nobody received, closes the set. */
void rr_soft_progress_stop(struct soft_ctx *ctx);

#endif
