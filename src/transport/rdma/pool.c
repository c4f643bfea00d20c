/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* A responder's shared receive pool (issue 16): one shared receive queue
 * (rpcrdma_srq_create) whose Receives all the connections of one progress
 * loop take: one per shard of a server (struct tp_shard, keyed by the
 * loop's index), under the shard's lock. Its buffers are allocated by need, in chunks of
 * TP_POOL_CHUNK Receives mapped lazily and registered on the pool's PD,
 * and a chunk none of whose buffers is posted or held goes back to the
 * system: memory follows the messages in flight, not connections x
 * credits. What to post and what to release is the credit accounting's
 * decision (struct rr_cred_pool: rr_cred_pool_want, rr_cred_pool_keep);
 * this file only carries it out. The low-water limit event of the queue
 * (rpcrdma_srq_arm_limit) makes the progress loop refill it. */
#include "transport/rdma/tp_int.h"

/* The pool's own PD serves its buffers; its connections keep one PD each
 * (RFC 8166 section 8.2) when the provider lets a QP use an SRQ of another
 * PD, and share the pool's otherwise. */
int tp_pool_create(struct tp_ep *ep, unsigned key, struct tp_pool **out)
{
	struct rpcrdma_srq_attr sa = {.max_sge = 1};
	struct rpcrdma_caps caps;
	struct tp_pool *p;
	uint32_t cap;
	int rc;

	*out = NULL;
	rc = rpcrdma_query(ep->ctx, &caps);
	if (rc)
		return rc;
	if (!(caps.flags & RPCRDMA_CAP_SRQ) || !caps.max_srq_wr)
		return -EOPNOTSUPP;
	cap = ep->conf.pool_recvs ? ep->conf.pool_recvs : RR_TP_POOL_RECVS;
	cap = RR_MIN(cap, caps.max_srq_wr);
	p = rr_zalloc(ep->env, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ep = ep;
	p->key = key;
	p->empty_since = tp_now_ns(ep);
	p->rsize = ep->conf.inline_recv;
	p->share_pd = ep->conf.pool_share_pd || !(caps.flags & RPCRDMA_CAP_SRQ_ANY_PD);
	p->quota = (caps.flags & RPCRDMA_CAP_RECV_QUOTA) != 0;
	p->quota_op = p->quota ? RR_BASE(context, ep->ctx)->ops->qp_recv_quota : NULL;
	p->quota = p->quota_op != NULL;   /* (an op rpcrdma_qp_recv_quota would refuse) */
	p->nchunks = (cap + TP_POOL_CHUNK - 1) / TP_POOL_CHUNK;
	p->chunks = rr_zalloc(ep->env, sizeof(*p->chunks) * p->nchunks);
	rc = p->chunks ? rpcrdma_pd_alloc(ep->ctx, &p->pd) : -ENOMEM;
	sa.max_wr = cap;   /* never more posted than the accounting's cap */
	sa.user_ctx = p;
	if (rc == 0)
		rc = rpcrdma_srq_create(p->pd, &sa, &p->srq);
	if (rc) {
		tp_pool_destroy(p);
		return rc;
	}
	rr_cred_pool_init(&p->cred, cap, TP_POOL_SPARE, true);
	*out = p;
	return 0;
}

static void chunk_free(struct tp_pool *p, struct tp_chunk *k)
{
	if (k->mr)
		(void)rpcrdma_dereg_mr(k->mr);
	rr_free_pages(p->ep->env, k->mem, (size_t)TP_POOL_CHUNK * p->rsize);
	memset(k, 0, sizeof(*k));
	while (p->hi && !p->chunks[p->hi - 1].mem)
		p->hi--;
}

/* The queue first (its Receives name the chunks), then the chunks. */
void tp_pool_destroy(struct tp_pool *p)
{
	const struct rpcrdma_env *env;

	if (!p)
		return;
	env = p->ep->env;
	if (p->srq)
		(void)rpcrdma_srq_destroy(p->srq);
	for (uint32_t i = p->hi; p->chunks && i-- > 0;)
		if (p->chunks[i].mem)
			chunk_free(p, &p->chunks[i]);
	if (p->pd)
		(void)rpcrdma_pd_free(p->pd);
	rr_free(env, p->chunks);
	rr_free(env, p);
}

uint8_t *tp_pool_buf(const struct tp_pool *p, uint32_t id)
{
	return p->chunks[id / TP_POOL_CHUNK].mem + (size_t)(id % TP_POOL_CHUNK) * p->rsize;
}

static int post(struct tp_pool *p, uint32_t id)
{
	const struct tp_chunk *k = &p->chunks[id / TP_POOL_CHUNK];
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)tp_pool_buf(p, id), p->rsize,
				  rpcrdma_mr_lkey(k->mr)};
	struct rpcrdma_recv_wr wr = {WRID(WR_RECV, id), NULL, &sge, 1};

	return rpcrdma_post_srq_recv(p->srq, &wr, NULL);
}

/* A buffer neither posted nor held: from the lowest chunk that has one
 * (so that the highest drain and go), a new chunk when none has (the
 * lowest one not mapped). -ENOMEM at the pool's capacity or when memory
 * runs out. Only the chunks below p->hi are looked at: the table has a
 * chunk per 64 Receives of the pool's capacity (1,024 of 152 bytes at the
 * default 65,536), and a look over all of it, whenever no mapped chunk had
 * a free buffer, read 152 KiB: at a shard's first connection for the
 * first time (31 page faults measured on the path to the MPA Reply: issue
 * 16 part AT), then again at every 64th Receive the pool grew by. */
static int buf_get(struct tp_pool *p, uint32_t *id)
{
	uint32_t spare = p->hi;

	for (uint32_t i = 0; i < p->hi; i++) {
		struct tp_chunk *k = &p->chunks[i];

		if (k->mem && k->nfree) {
			*id = i * TP_POOL_CHUNK + k->free[--k->nfree];
			return 0;
		}
		if (!k->mem && spare == p->hi)
			spare = i;
	}
	if (spare == p->nchunks)
		return -ENOMEM;
	{
		struct tp_chunk *k = &p->chunks[spare];
		size_t len = (size_t)TP_POOL_CHUNK * p->rsize;

		/* mapped zero-filled: resident only as far as messages fill it */
		k->mem = rr_alloc_pages(p->ep->env, len);
		if (!k->mem || rpcrdma_reg_mr_simple(p->pd, k->mem, len, RPCRDMA_ACCESS_LOCAL_WRITE,
						     &k->mr)) {
			chunk_free(p, k);
			return -ENOMEM;
		}
		if (spare >= p->hi)
			p->hi = spare + 1;
		for (uint32_t j = 0; j < TP_POOL_CHUNK; j++)
			k->free[j] = (uint16_t)(TP_POOL_CHUNK - 1 - j);
		k->nfree = TP_POOL_CHUNK - 1;
		*id = spare * TP_POOL_CHUNK;
		return 0;
	}
}

/* @id is neither posted nor held any more; a chunk left with none of its
 * buffers in use goes back to the system. */
static void buf_put(struct tp_pool *p, uint32_t id)
{
	struct tp_chunk *k = &p->chunks[id / TP_POOL_CHUNK];

	k->free[k->nfree++] = (uint16_t)(id % TP_POOL_CHUNK);
	if (k->nfree == TP_POOL_CHUNK) {
		chunk_free(p, k);
		rr_mem_trim_due(p->ep->env);
	}
}

void tp_pool_fill(struct tp_pool *p)
{
	uint32_t n = rr_cred_pool_want(&p->cred), done = 0;

	while (done < n) {
		uint32_t id;

		if (buf_get(p, &id))
			break;
		if (post(p, id)) {
			buf_put(p, id);
			break;
		}
		done++;
	}
	if (done) {
		rr_cred_pool_posted(&p->cred, done);
		p->ep->stats.pool_grown += done;
	}
	/* the low-water mark: half the spare above what is reserved (the
	 * limit fires once; armed again on every fill) */
	{
		uint32_t lim = p->cred.reserved + TP_POOL_SPARE / 2;
		struct rpcrdma_srq_attr a;

		/* (not while the queue sits below it: at its cap, where
		 * refilling cannot help, it would fire on every turn). The
		 * queue's size is asked only when the mark is to move: a
		 * fill of every server turn, twice per call, posts nothing
		 * and moves nothing most of the time. */
		if (lim != p->limit && p->cred.posted > lim &&
		    rpcrdma_srq_query(p->srq, &a) == 0 && lim < a.max_wr &&
		    rpcrdma_srq_arm_limit(p->srq, lim) == 0)
			p->limit = lim;
	}
}

int tp_pool_repost(struct tp_pool *p, uint32_t id)
{
	if (!rr_cred_pool_keep(&p->cred)) {
		buf_put(p, id);
		p->ep->stats.pool_released++;
		return 1;
	}
	if (post(p, id)) {
		buf_put(p, id);
		return -EIO;
	}
	return 0;
}

void tp_pool_consumed(struct tp_pool *p, uint32_t id)
{
	rr_cred_pool_lost(&p->cred, 1);
	if (tp_pool_repost(p, id) == 0)
		rr_cred_pool_posted(&p->cred, 1);
}

void tp_pool_tick(struct tp_pool *p)
{
	if (rpcrdma_srq_get_event(p->srq) > 0) {
		p->ep->stats.srq_limit_events++;
		p->limit = 0;   /* fired: disarmed */
	}
	tp_pool_fill(p);
}
