/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The transport's counters (struct rr_xprt_stats, proto/xprt.h) exported
 * to the public struct: both are generated from the one table of
 * include/rpcrdma/stats.h, so every counter goes out under its name. */
#include "proto/xprt.h"

void rr_xprt_stats_export(const struct rr_xprt_stats *s, struct rpcrdma_xprt_stats *o)
{
#define COPY_(group, name, what) o->name = s->name;
	RPCRDMA_XPRT_STATS(COPY_)
#undef COPY_
}
