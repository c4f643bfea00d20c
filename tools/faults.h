/* SPDX-License-Identifier: BSD-2-Clause */
/* The tools' line of a transport's fault counters (group faults of
 * include/rpcrdma/stats.h: CQ overruns and failures, QPs a CQ refused, work
 * requests in error, the verbs asynchronous errors by cause), taken from
 * the counters' table so that a counter added to the group is shown with no
 * other change. Public API only. */
#ifndef RPCRDMA_TOOLS_FAULTS_H
#define RPCRDMA_TOOLS_FAULTS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rpcrdma/stats.h"

/* The sum of @st's fault counters. */
static inline uint64_t tool_faults_sum(const struct rpcrdma_xprt_stats *st)
{
	uint64_t n = 0;

#define TOOL_FAULT_ADD_(group, name, what) \
	if (strcmp(#group, "faults") == 0)  \
		n += st->name;
	RPCRDMA_XPRT_STATS(TOOL_FAULT_ADD_)
#undef TOOL_FAULT_ADD_
	return n;
}

/* Writes "@prefix" then " name value" for each fault counter of @st, then a
 * newline, to @f. */
static inline void tool_faults_print(FILE *f, const char *prefix,
				     const struct rpcrdma_xprt_stats *st)
{
	fputs(prefix, f);
#define TOOL_FAULT_PRINT_(group, name, what) \
	if (strcmp(#group, "faults") == 0)    \
		fprintf(f, " %s %llu", #name, (unsigned long long)st->name);
	RPCRDMA_XPRT_STATS(TOOL_FAULT_PRINT_)
#undef TOOL_FAULT_PRINT_
	fputc('\n', f);
}

#endif
