/* SPDX-License-Identifier: BSD-2-Clause */
/* The registry of built-in providers (provider.h "registry"): the one place
 * that names their ops tables, "soft" (src/rdma/soft/ops.c) always and
 * "verbs" (src/rdma/verbs/verbs_device.c) when built with rdma-core, in the order
 * rpcrdma_provider_list reports them. Kept apart from the dispatch layer
 * (rdma.c), which only looks providers up here, and from the helpers
 * providers call (provider.c): the providers' objects then never depend on
 * a unit that depends on them. */
#include "rdma/provider.h"

#include <string.h>

#if defined(__has_include)
#if __has_include("rdma/soft/soft_provider.h")
#include "rdma/soft/soft_provider.h"
#define RR_HAVE_SOFT 1
#endif
#endif

#ifdef RPCRDMA_HAVE_VERBS
extern const struct rr_provider_ops rr_verbs_ops;
#endif

static const struct rr_provider_ops *const registry[] = {
#ifdef RR_HAVE_SOFT
	&rr_soft_ops,
#endif
#ifdef RPCRDMA_HAVE_VERBS
	&rr_verbs_ops,
#endif
	NULL,
};

size_t rr_provider_count(void)
{
	return RR_ARRAY_SIZE(registry) - 1;
}

const struct rr_provider_ops *rr_provider_at(size_t i)
{
	return i < rr_provider_count() ? registry[i] : NULL;
}

const struct rr_provider_ops *rr_provider_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < rr_provider_count(); i++)
		if (strcmp(registry[i]->name, name) == 0)
			return registry[i];
	return NULL;
}

RPCRDMA_API size_t rpcrdma_provider_list(const char **names, size_t cap)
{
	size_t n = rr_provider_count();

	for (size_t i = 0; i < n && i < cap && names; i++)
		names[i] = registry[i]->name;
	return n;
}

RPCRDMA_API bool rpcrdma_provider_available(const char *name)
{
	return rr_provider_find(name) != NULL;
}
