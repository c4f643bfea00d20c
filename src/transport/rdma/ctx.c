/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Provider contexts shared by the process's RDMA endpoints: one per
 * provider, device, environment, spin budget and role (passive: servers;
 * active: clients), opened by the first endpoint that needs it. A soft
 * context runs one "NIC" thread (connection setup, sockets nobody attends)
 * and a verbs one holds the device: sharing them keeps threads and file
 * descriptors independent of the number of connections. A verbs endpoint
 * that names no device gets the one its address leads to, shared with the
 * endpoints already on that device. Contexts of the default environment
 * stay open once made (the next endpoint does not pay for the open); those
 * of an injected environment, which the caller owns, close with their last
 * endpoint. A forked child forgets the parent's (their threads are not
 * there) and opens its own. */
#include "transport/rdma/tp_int.h"

#include <stdio.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tp_ctx *g_ctxs;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void after_fork_child(void)
{
	pthread_mutex_init(&g_lock, NULL);
	g_ctxs = NULL;   /* the parent's stay as they are */
}

static void fork_hook(void)
{
	(void)pthread_atfork(NULL, NULL, after_fork_child);
}

static bool lingers(const struct tp_ctx *tc)
{
	return tc->env == rpcrdma_env_default();
}

/* g_lock held: an open context for this key. */
static struct tp_ctx *find(const char *provider, const char *device, const char *resolved,
			   const struct rpcrdma_env *env, uint32_t spin_us, bool passive)
{
	for (struct tp_ctx *tc = g_ctxs; tc; tc = tc->next) {
		if (strcmp(tc->provider, provider) || tc->env != env || tc->spin_us != spin_us ||
		    tc->passive != passive)
			continue;
		if (device[0] ? !strcmp(tc->device, device)
			      : (resolved ? !strcmp(tc->caps.device, resolved) : !tc->device[0]))
			return tc;
	}
	return NULL;
}

int tp_ctx_get(const struct rr_tp_conf *conf, const struct sockaddr *addr, bool passive,
	       struct tp_ctx **out)
{
	const char *provider = conf->provider ? conf->provider : RPCRDMA_PROVIDER_SOFT;
	const char *device = conf->device ? conf->device : "";
	const struct rpcrdma_env *env = rr_env(conf->env);
	bool soft = strcmp(provider, RPCRDMA_PROVIDER_SOFT) == 0;
	struct rpcrdma_open_attr oa = {0};
	struct tp_ctx *tc, *old;
	int rc;

	pthread_once(&g_once, fork_hook);
	if (strlen(provider) >= sizeof(tc->provider) || strlen(device) >= sizeof(tc->device))
		return -EINVAL;
	pthread_mutex_lock(&g_lock);
	/* soft has one device; verbs by address is known after the open */
	tc = soft || device[0] ? find(provider, device, NULL, env, conf->spin_us, passive) : NULL;
	if (tc)
		tc->refs++;
	pthread_mutex_unlock(&g_lock);
	if (tc) {
		*out = tc;
		return 0;
	}
	tc = rr_zalloc(env, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	oa.env = conf->env;
	oa.device = conf->device;
	oa.addr = addr;
	oa.passive = passive;
	oa.spin_us = conf->spin_us;
	rc = rpcrdma_open(provider, &oa, &tc->ctx);
	if (!rc)
		rc = rpcrdma_query(tc->ctx, &tc->caps);
	if (rc) {
		if (tc->ctx)
			(void)rpcrdma_close(tc->ctx);
		rr_free(env, tc);
		return rc;
	}
	snprintf(tc->provider, sizeof(tc->provider), "%s", provider);
	snprintf(tc->device, sizeof(tc->device), "%s", device);
	tc->env = env;
	tc->spin_us = conf->spin_us;
	tc->passive = passive;
	tc->refs = 1;
	pthread_mutex_lock(&g_lock);
	/* made meanwhile by another thread, or (verbs) the device found by
	 * address is open already: that one */
	old = find(provider, device, soft || device[0] ? NULL : tc->caps.device, env,
		   conf->spin_us, passive);
	if (old) {
		old->refs++;
		pthread_mutex_unlock(&g_lock);
		(void)rpcrdma_close(tc->ctx);
		rr_free(env, tc);
		*out = old;
		return 0;
	}
	tc->next = g_ctxs;
	g_ctxs = tc;
	pthread_mutex_unlock(&g_lock);
	*out = tc;
	return 0;
}

void tp_ctx_each(void (*fn)(struct tp_ctx *tc, void *arg), void *arg)
{
	pthread_mutex_lock(&g_lock);
	for (struct tp_ctx *tc = g_ctxs; tc; tc = tc->next)
		fn(tc, arg);
	pthread_mutex_unlock(&g_lock);
}

struct tp_ctx *tp_ctx_ref(struct tp_ctx *tc)
{
	pthread_mutex_lock(&g_lock);
	tc->refs++;
	pthread_mutex_unlock(&g_lock);
	return tc;
}

void tp_ctx_put(struct tp_ctx *tc)
{
	bool close_it = false;

	if (!tc)
		return;
	pthread_mutex_lock(&g_lock);
	if (--tc->refs == 0 && !lingers(tc)) {
		for (struct tp_ctx **pp = &g_ctxs; *pp; pp = &(*pp)->next)
			if (*pp == tc) {
				*pp = tc->next;
				break;
			}
		close_it = true;
	}
	pthread_mutex_unlock(&g_lock);
	if (!close_it)
		return;
	/* its ports went with their last endpoints (port.c) */
	(void)rpcrdma_close(tc->ctx);
	rr_free(tc->env, tc);
}
