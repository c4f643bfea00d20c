/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Public transport counters (include/rpcrdma/stats.h): snapshots routed to
 * the transport's ctl op (transport/xprt_ctl.h; tcp:// clients answer
 * -EOPNOTSUPP), the difference of two, and the printer -- the last two
 * generated from the table RPCRDMA_XPRT_STATS, so a counter added there is
 * subtracted and printed with no other change. */
#include "transport/xprt.h"
#include "rpc/ctl.h"

#include <stdio.h>

RPCRDMA_API int rpcrdma_client_stats(struct rpcrdma_client *c, struct rpcrdma_xprt_stats *st)
{
	if (!c || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	return rr_rpc_client_ctl(c, RR_CTL_STATS, st);
}

RPCRDMA_API int rpcrdma_server_stats(struct rpcrdma_server *s, struct rpcrdma_xprt_stats *st)
{
	if (!s || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	return rr_rpc_server_ctl(s, RR_CTL_STATS, st);
}

RPCRDMA_API void rpcrdma_xprt_stats_diff(const struct rpcrdma_xprt_stats *now,
					 const struct rpcrdma_xprt_stats *before,
					 struct rpcrdma_xprt_stats *out)
{
	struct rpcrdma_xprt_stats r = *now;

#define SUB_(group, name, what) r.name -= before->name;
	RPCRDMA_XPRT_STATS(SUB_)
#undef SUB_
	*out = r;
}

/* One entry per counter, in table order. */
static const struct {
	const char *group, *name;
	size_t off;
} stat_fields[] = {
#define ENTRY_(group, name, what) {#group, #name, offsetof(struct rpcrdma_xprt_stats, name)},
	RPCRDMA_XPRT_STATS(ENTRY_)
#undef ENTRY_
};

RPCRDMA_API int rpcrdma_xprt_stats_print(const struct rpcrdma_xprt_stats *s, FILE *f)
{
	const char *group = NULL;
	int n;

	if (!s || !f)
		return -EINVAL;
	n = fprintf(f, "xprt: %s connections %u", s->transport[0] ? s->transport : "?",
		    s->connections);
	for (size_t i = 0; i < RR_ARRAY_SIZE(stat_fields) && n >= 0; i++) {
		uint64_t v;

		memcpy(&v, (const char *)s + stat_fields[i].off, sizeof(v));
		if (!group || strcmp(group, stat_fields[i].group)) {
			group = stat_fields[i].group;
			n = fprintf(f, "\n\t%s:", group);
		}
		if (n >= 0)
			n = fprintf(f, " %s %llu", stat_fields[i].name, (unsigned long long)v);
	}
	if (n >= 0)
		n = fprintf(f, "\n");
	return n < 0 ? -EIO : 0;
}
