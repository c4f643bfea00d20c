/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's shared receive queues (include/rpcrdma/rdma.h "shared
 * receive queues"): a stack of Receives, each resolved against the SRQ's PD
 * when posted (the memory is local to us: a QP of another PD of the
 * context may use it, RPCRDMA_CAP_SRQ_ANY_PD), taken by a QP when a
 * message begins on it (rx.c), and the limit event, one-shot as verbs'
 * IBV_EVENT_SRQ_LIMIT_REACHED. A message takes the newest Receive (LIFO,
 * docs/rdma-provider.md): under load the same few entries and buffers are
 * reused while warm, where a FIFO walked the whole ring and every posted
 * buffer between two uses. The queue is a stack of entries as wide as the
 * SGEs asked for: a queue of tens of thousands of one-SGE Receives is a
 * few pages per thousand, and it is mapped lazily (as the QPs' queues). */
#include "rdma/soft/srq.h"

/* One posted Receive on the stack: @iovcnt of the SRQ's max_sge iovecs. */
struct srq_ent {
	uint64_t wr_id;
	uint32_t iovcnt;
	struct iovec iov[];
};

static size_t ent_size(const struct soft_srq *s)
{
	return sizeof(struct srq_ent) + sizeof(struct iovec) * s->base.attr.max_sge;
}

static struct srq_ent *ent_at(struct soft_srq *s, uint32_t i)
{
	return (struct srq_ent *)(void *)((uint8_t *)s->rq + ent_size(s) * i);
}

static struct soft_srq *srq_of(struct rr_srq *b)
{
	return RR_CONTAINER_OF(b, struct soft_srq, base);
}

int rr_soft_create_srq(struct rr_pd *pd, const struct rpcrdma_srq_attr *attr, struct rr_srq **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	struct soft_pd *sp = RR_CONTAINER_OF(pd, struct soft_pd, base);
	struct soft_srq *s;

	if (attr->max_wr > SOFT_MAX_SRQ_WR || attr->max_sge > SOFT_MAX_SGE)
		return -EINVAL;
	s = rr_zalloc(c->env, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = c;
	s->pd = sp;
	s->cap = attr->max_wr;
	s->base.attr.max_wr = attr->max_wr;
	s->base.attr.max_sge = RR_MAX(attr->max_sge, 1u);
	s->rq = rr_alloc_pages(c->env, ent_size(s) * s->cap);
	if (!s->rq) {
		rr_free(c->env, s);
		return -ENOMEM;
	}
	atomic_init(&s->event, 0);
	s->limit = attr->srq_limit;
	s->base.attr.srq_limit = attr->srq_limit;
	pthread_mutex_lock(&sp->lock);
	s->pd_next = sp->srqs;
	sp->srqs = s;
	pthread_mutex_unlock(&sp->lock);
	*out = &s->base;
	return 0;
}

int rr_soft_destroy_srq(struct rr_srq *b)
{
	struct soft_srq *s = srq_of(b);
	const struct rpcrdma_env *env = s->ctx->env;

	pthread_mutex_lock(&s->pd->lock);
	for (struct soft_srq **pp = &s->pd->srqs; *pp; pp = &(*pp)->pd_next)
		if (*pp == s) {
			*pp = s->pd_next;
			break;
		}
	pthread_mutex_unlock(&s->pd->lock);
	rr_free_pages(env, s->rq, ent_size(s) * s->cap);
	rr_free(env, s);
	return 0;
}

/* The cache of the SRQ's local checks that serves @lkey: the STag's index
 * (above its 8-bit key) picks it, so that MRs registered one after another
 * use different ones. */
static inline struct rr_mrt_lcache *srq_lc(struct soft_srq *s, uint32_t lkey)
{
	return &s->lc[(lkey >> 8) & (SOFT_SRQ_LC - 1)];
}

/* The Receive's SGEs, checked against the SRQ's PD (local write): 0, or
 * -EINVAL (-EMSGSIZE: more than 2^32 - 1 bytes). One SGE (the transport's
 * every Receive) through sge_resolve_one (soft.h), which answers as the
 * loop below does for one SGE (test soft_sge_resolve_one_as_all: the loop
 * there is this one with one cache). */
static int resolve(struct soft_srq *s, const struct rpcrdma_recv_wr *wr, struct srq_ent *e)
{
	uint64_t t = 0;

	if (wr->num_sge == 1) {
		uint32_t tot;
		unsigned n;
		int r = sge_resolve_one(&s->ctx->mrt, &s->pd->base, srq_lc(s, wr->sg_list[0].lkey),
					wr->sg_list, RPCRDMA_ACCESS_LOCAL_WRITE, e->iov, &n, &tot);

		e->iovcnt = n;
		return r ? -EINVAL : 0;
	}

	e->iovcnt = 0;
	for (uint32_t i = 0; i < wr->num_sge; i++) {
		const struct rpcrdma_sge *sg = &wr->sg_list[i];
		struct rr_mrt_lcache *lc = srq_lc(s, sg->lkey);
		uint8_t *p;

		if (!sg->length)
			continue;
		/* a cache hit checked inline, no rr_mrt_ref built (the same
		 * checks and results as rr_mrt_check_local) */
		if (rr_mrt_local_ptr(&s->ctx->mrt, lc, sg->lkey, sg->addr, sg->length,
				     RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, &s->pd->base, &p))
			return -EINVAL;
		e->iov[e->iovcnt].iov_base = p;
		e->iov[e->iovcnt++].iov_len = sg->length;
		t += sg->length;
	}
	return t > UINT32_MAX ? -EMSGSIZE : 0;
}

int rr_soft_post_srq_recv(struct rr_srq *b, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad)
{
	struct soft_srq *s = srq_of(b);
	int ret = 0;

	rr_lock(&s->lock);
	for (; wr; wr = wr->next) {
		struct srq_ent *e;

		if (s->count >= s->cap) {
			ret = -ENOMEM;
			break;
		}
		e = ent_at(s, s->count);
		if (resolve(s, wr, e)) {
			ret = -EINVAL;
			break;
		}
		e->wr_id = wr->wr_id;
		s->count++;
	}
	if (ret && bad)
		*bad = wr;
	rr_unlock(&s->lock);
	return ret;
}

/* Fires the limit when armed and fewer than it remain (lock held). */
static void limit_check(struct soft_srq *s)
{
	if (s->limit && s->count < s->limit) {
		s->limit = 0;
		atomic_store(&s->event, 1);
	}
}

int rr_soft_arm_srq_limit(struct rr_srq *b, uint32_t limit)
{
	struct soft_srq *s = srq_of(b);

	rr_lock(&s->lock);
	s->limit = limit;
	limit_check(s);   /* already below it: at once */
	rr_unlock(&s->lock);
	return 0;
}

int rr_soft_srq_get_event(struct rr_srq *b)
{
	return atomic_exchange(&srq_of(b)->event, 0) ? 1 : 0;
}

/* @n iovecs from @src to @dst: the usual one (the transport's Receives
 * have one SGE) by assignment, more by memcpy. */
static inline void iov_copy(struct iovec *dst, const struct iovec *src, uint32_t n)
{
	if (n == 1)
		dst[0] = src[0];
	else
		memcpy(dst, src, sizeof(src[0]) * n);
}

int rr_soft_srq_take(struct soft_srq *s, struct soft_rqe *out)
{
	struct srq_ent *e;

	rr_lock(&s->lock);
	if (!s->count) {
		rr_unlock(&s->lock);
		return -ENOBUFS;
	}
	/* the newest: its entry and its buffer were touched last */
	e = ent_at(s, --s->count);
	out->wr_id = e->wr_id;
	out->iovcnt = e->iovcnt;
	iov_copy(out->iov, e->iov, e->iovcnt);
	limit_check(s);
	rr_unlock(&s->lock);
	return 0;
}

void rr_soft_srq_untake(struct soft_srq *s, const struct soft_rqe *e)
{
	struct srq_ent *d;

	rr_lock(&s->lock);
	if (s->count < s->cap) {
		d = ent_at(s, s->count);
		d->wr_id = e->wr_id;
		d->iovcnt = e->iovcnt;
		iov_copy(d->iov, e->iov, e->iovcnt);
		s->count++;
	}
	rr_unlock(&s->lock);
}
