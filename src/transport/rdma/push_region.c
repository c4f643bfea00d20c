/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Push mode (draft-talpey-rdma-commit section 2), the server's side: a
 * durable (or visible) region exposed on one connection's PD for the
 * client to RDMA Write and Commit into, at most TP_EXPO_MAX per
 * connection; revoked by its owner, or released with the connection (its
 * STag stops granting access at once: deregistration first, then the
 * owner is told). The client's side is push.c. */
#include "transport/rdma/tp_int.h"

#include "rpcrdma/push.h"

struct tp_expo {
	uint64_t id;
	struct rpcrdma_mr *mr;
	void (*released)(void *arg);
	void *arg;
	struct tp_expo *next;
};

/* Deregisters every region of @cn (its STags stop granting access at once)
 * and tells their owners (lock held, or no other thread). */
void tp_expo_release_all(struct tp_conn *cn)
{
	while (cn->expo) {
		struct tp_expo *x = cn->expo;

		cn->expo = x->next;
		(void)rpcrdma_dereg_mr(x->mr);
		cn->ep->stats.regions_released++;
		if (x->released)
			x->released(x->arg);
		rr_free(cn->ep->env, x);
	}
}

static int expo_register(struct tp_conn *cn, const struct rpcrdma_mr_attr *attr,
			 struct rpcrdma_mr **mr, uint32_t *levels)
{
	const uint32_t want = attr->flags & (RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE);
	struct rpcrdma_mr_attr a = *attr;
	struct rpcrdma_caps caps;
	bool vis_cap;
	int rc;

	caps = cn->ep->tc->caps;
	vis_cap = (caps.flags & RPCRDMA_CAP_COMMIT_VISIBLE) != 0;
	a.access = RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_WRITE;
	a.flags = want;
	/* Without visibility-only Commits (soft) a visibility Commit travels
	 * as a persistent one: a durable region serves both. */
	if (!vis_cap)
		a.flags &= ~RPCRDMA_MR_VISIBLE;
	if (!(caps.flags & RPCRDMA_CAP_DURABLE))
		a.flags &= ~RPCRDMA_MR_DURABLE;
	if (!a.flags)
		return -EOPNOTSUPP;
	rc = rpcrdma_reg_mr(cn->pd, &a, mr);
	if (rc == -EOPNOTSUPP && (a.flags & RPCRDMA_MR_DURABLE) && (a.flags & RPCRDMA_MR_VISIBLE)) {
		/* memory the device cannot persist (rxe without pmem): the
		 * caller accepted visibility alone */
		a.flags = RPCRDMA_MR_VISIBLE;
		rc = rpcrdma_reg_mr(cn->pd, &a, mr);
	}
	if (rc)
		return rc;
	*levels = 0;
	if (a.flags & RPCRDMA_MR_DURABLE)
		*levels |= RPCRDMA_PUSH_REGION_DURABLE;
	if ((a.flags & RPCRDMA_MR_VISIBLE) || (!vis_cap && (a.flags & RPCRDMA_MR_DURABLE)))
		*levels |= RPCRDMA_PUSH_REGION_VISIBLE;
	return 0;
}

int rr_tp_server_expose(struct rr_tp_server *s, struct rr_conn_sreq *req,
			const struct rpcrdma_mr_attr *attr, void (*released)(void *arg),
			void *arg, uint32_t *stag, uint64_t *to, uint64_t *id, uint32_t *levels)
{
	struct tp_conn *cn = req->xconn;
	struct tp_expo *x;
	unsigned n = 0;
	int rc;

	if (!attr || !(attr->flags & (RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE)) || !attr->length)
		return -EINVAL;
	x = rr_zalloc(s->ep.env, sizeof(*x));
	if (!x)
		return -ENOMEM;
	rr_lock(&cn->ep->lock);
	for (struct tp_expo *e = cn->expo; e; e = e->next)
		n++;
	if (cn->dead)
		rc = -ENOTCONN;
	else if (!cn->commit)
		rc = -EOPNOTSUPP;
	else if (n >= TP_EXPO_MAX)
		rc = -ENOSPC;
	else
		rc = expo_register(cn, attr, &x->mr, levels);
	if (rc) {
		rr_unlock(&cn->ep->lock);
		rr_free(s->ep.env, x);
		return rc;
	}
	x->id = atomic_fetch_add(&s->expo_seq, 1) + 1;
	x->released = released;
	x->arg = arg;
	x->next = cn->expo;
	cn->expo = x;
	cn->ep->stats.regions_exposed++;
	*stag = rpcrdma_mr_rkey(x->mr);
	*to = rpcrdma_mr_remote_offset(x->mr);
	*id = x->id;
	rr_unlock(&cn->ep->lock);
	return 0;
}

/* Region @id among the connections of shard @sh (lock held): revoked. */
static int revoke_in(struct tp_shard *sh, uint64_t id)
{
	for (struct tp_conn *cn = sh->conns; cn; cn = cn->next) {
		for (struct tp_expo **pp = &cn->expo; *pp; pp = &(*pp)->next) {
			struct tp_expo *x = *pp;

			if (x->id != id)
				continue;
			*pp = x->next;
			(void)rpcrdma_dereg_mr(x->mr);
			sh->ep.stats.regions_released++;
			if (x->released)
				x->released(x->arg);
			rr_free(sh->ep.env, x);
			return 0;
		}
	}
	return -ENOENT;
}

int rr_tp_server_revoke(struct rr_tp_server *s, uint64_t id)
{
	int rc = -ENOENT;

	for (unsigned i = 0; i < s->nshards && rc; i++) {
		rr_lock(&s->shards[i]->ep.lock);
		rc = revoke_in(s->shards[i], id);
		rr_unlock(&s->shards[i]->ep.lock);
	}
	return rc;
}

