/* The rdma-core provider ("verbs"): libibverbs + librdmacm behind the
 * provider ops table (src/rdma/provider.h). Work in progress: context
 * open/query/close; the other ops are added below as they are implemented
 * (missing ones answer -EOPNOTSUPP through the dispatch layer). */
#include "rdma/provider.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

struct vb_ctx {
	struct rr_context base;
	struct ibv_context *verbs; /* from rdma_get_devices(): shared with rdma_cm */
	struct ibv_context **devs;
	struct ibv_device_attr attr;
};

#define VB_CTX(c) RR_CONTAINER_OF((c), struct vb_ctx, base)

static int vb_open(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		   struct rr_context **out)
{
	struct ibv_context **devs;
	struct vb_ctx *c;
	int n = 0, pick = -1;

	devs = rdma_get_devices(&n);
	if (!devs)
		return -ENODEV;
	for (int i = 0; i < n && pick < 0; i++)
		if (!attr->device || strcmp(ibv_get_device_name(devs[i]->device), attr->device) == 0)
			pick = i;
	if (pick < 0) {
		rdma_free_devices(devs);
		return -ENODEV;
	}
	c = rr_zalloc(env, sizeof(*c));
	if (!c) {
		rdma_free_devices(devs);
		return -ENOMEM;
	}
	c->devs = devs;
	c->verbs = devs[pick];
	if (ibv_query_device(c->verbs, &c->attr) != 0) {
		rdma_free_devices(devs);
		rr_free(env, c);
		return -ENODEV;
	}
	*out = &c->base;
	return 0;
}

static void vb_close(struct rr_context *ctx)
{
	struct vb_ctx *c = VB_CTX(ctx);

	rdma_free_devices(c->devs);
	rr_free(ctx->env, c);
}

const struct rr_provider_ops rr_verbs_ops = {
	.name = "verbs",
	.open = vb_open,
	.close = vb_close,
};
