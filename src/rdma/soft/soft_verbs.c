/* The soft provider's verbs: contexts, PDs, registrations (the generic STag
 * table, src/rdma/mr_table.h), memory windows, CQs (the generic ring), QPs,
 * work requests, and the RDMAP state machine (RFC 5040 sections 5-7,
 * draft-talpey-rdma-commit-00 sections 3.2 and 5) driving the sans-I/O DDP
 * codecs: placement callbacks that validate every tagged access against the
 * STag table before a byte lands, Read and Commit responders bounded by IRD,
 * ORD-limited requesters, Send with Invalidate, Terminate on every violation.
 * No socket calls here: bytes move through soft_io.c. */
#include "rdma/soft/soft.h"

#include <stdio.h>
#include <stdlib.h>

#include "rdma/soft/soft_provider.h"

/* ------------------------------------------------------------ context -- */

static int soft_open(const struct rpcrdma_open_attr *attr, const struct rpcrdma_env *env,
		     struct rr_context **out)
{
	struct soft_ctx *c = rr_zalloc(env, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->env = env;
	c->epfd = -1;
	/* RPCRDMA_SOFT_WAIT=epoll: no fast waits (measurements, debugging) */
	{
		const char *w = getenv("RPCRDMA_SOFT_WAIT");

		c->fast_wait = !(w && !strcmp(w, "epoll"));
		/* RPCRDMA_SOFT_TXCOPY=N: copy small Sends up to N bytes (A/B) */
		w = getenv("RPCRDMA_SOFT_TXCOPY");
		c->tx_copy_max = SOFT_TX_COPY_MAX;
		if (w && *w) {
			unsigned long v = strtoul(w, NULL, 10);

			c->tx_copy_max = (uint32_t)RR_MIN(v, (unsigned long)SOFT_TX_COPY_MAX);
		}
		c->spin_ns = (uint64_t)rr_spin_us(attr ? attr->spin_us : 0) * 1000u;
	}
	c->coarse_res_ns = rr_coarse_res_ns(env);
	/* RPCRDMA_SOFT_TCP_CC=cubic: that congestion control on every socket */
	r = soft_io_check_cc(c, getenv("RPCRDMA_SOFT_TCP_CC"));
	if (r) {
		rr_free(env, c);
		return r;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->cq_lock, NULL);
	r = rr_mrt_init(&c->mrt, env, 16);
	if (r) {
		rr_free(env, c);
		return r;
	}
	r = soft_io_start(c);
	if (r) {
		rr_mrt_fini(&c->mrt);
		rr_free(env, c);
		return r;
	}
	*out = &c->base;
	return 0;
}

static void soft_close(struct rr_context *base)
{
	struct soft_ctx *c = RR_CONTAINER_OF(base, struct soft_ctx, base);

	soft_io_stop(c);
	rr_mrt_fini(&c->mrt);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->cq_lock);
	rr_free(c->env, c);
}

int soft_query(struct rr_context *ctx, struct rpcrdma_caps *caps)
{
	RR_UNUSED(ctx);
	memset(caps, 0, sizeof(*caps));
	caps->flags = RPCRDMA_CAP_INVALIDATABLE | RPCRDMA_CAP_REMOTE_INV | RPCRDMA_CAP_COMMIT |
		      RPCRDMA_CAP_DURABLE | RPCRDMA_CAP_SOLICITED;
	caps->transport = RPCRDMA_TRANSPORT_IWARP;
	caps->max_sge = SOFT_MAX_SGE;
	caps->max_inline = SOFT_MAX_INLINE;
	caps->max_qp_wr = SOFT_MAX_WR;
	caps->max_cqe = 65536;
	caps->max_ird = SOFT_MAX_IRD;
	caps->max_ord = SOFT_MAX_ORD;
	caps->max_msg_size = 1u << 30;
	caps->max_commit_regions = RR_COMMIT_MAX_REGIONS;
	caps->max_mr_size = UINT64_MAX >> 1;
	caps->max_private_data_connect = RR_MPA_ULP_PD_MAX;
	caps->max_private_data_accept = RR_MPA_ULP_PD_MAX;
	caps->max_private_data_reject = RR_MPA_ULP_PD_MAX;
	snprintf(caps->provider, sizeof(caps->provider), "soft");
	snprintf(caps->device, sizeof(caps->device), "soft0");
	return 0;
}

static struct soft_ctx *sctx(struct rr_context *c)
{
	return RR_CONTAINER_OF(c, struct soft_ctx, base);
}

/* ------------------------------------------------------ PD, MR, MW -- */

static int soft_alloc_pd(struct rr_context *ctx, struct rr_pd **out)
{
	struct soft_pd *p = rr_zalloc(ctx->env, sizeof(*p));

	if (!p)
		return -ENOMEM;
	*out = &p->base;
	return 0;
}

static int soft_dealloc_pd(struct rr_pd *pd)
{
	rr_free(pd->ctx->env, RR_CONTAINER_OF(pd, struct soft_pd, base));
	return 0;
}

static void mr_region(const struct rpcrdma_mr_attr *a, struct rr_mrt_region *r)
{
	memset(r, 0, sizeof(*r));
	r->addr = a->addr;
	r->length = a->length;
	r->base_to = (uint64_t)(uintptr_t)a->addr;
	r->access = a->access;
	r->durable = a->flags & RPCRDMA_MR_DURABLE;
	r->durable_fd = a->durable_fd;
	r->durable_offset = a->durable_offset;
}

static int soft_reg_mr(struct rr_pd *pd, const struct rpcrdma_mr_attr *attr, struct rr_mr **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	struct soft_mr *m = rr_zalloc(c->env, sizeof(*m));
	struct rr_mrt_region reg;
	uint32_t stag;
	int r;

	if (!m)
		return -ENOMEM;
	mr_region(attr, &reg);
	r = rr_mrt_reg(&c->mrt, &reg, pd, m, &stag);
	if (r) {
		rr_free(c->env, m);
		return r;
	}
	m->base.lkey = m->base.rkey = stag;
	*out = &m->base;
	return 0;
}

static int soft_rereg_mr(struct rr_mr *mr, const struct rpcrdma_mr_attr *attr)
{
	struct soft_ctx *c = sctx(mr->pd->ctx);
	struct rr_mrt_region reg;
	uint32_t stag = mr->lkey;
	int r;

	mr_region(attr, &reg);
	r = rr_mrt_rereg(&c->mrt, &stag, &reg);
	if (!r)
		mr->lkey = mr->rkey = stag;
	return r;
}

static int soft_dereg_mr(struct rr_mr *mr)
{
	struct soft_ctx *c = sctx(mr->pd->ctx);
	int r = rr_mrt_dereg(&c->mrt, mr->lkey);

	if (r)
		return r;
	rr_free(c->env, RR_CONTAINER_OF(mr, struct soft_mr, base));
	return 0;
}

static int soft_alloc_mw(struct rr_pd *pd, struct rr_mw **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	struct soft_mw *w = rr_zalloc(c->env, sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	r = rr_mrt_mw_alloc(&c->mrt, pd, w, &w->base.rkey);
	if (r) {
		rr_free(c->env, w);
		return r;
	}
	*out = &w->base;
	return 0;
}

static int soft_dealloc_mw(struct rr_mw *mw)
{
	struct soft_ctx *c = sctx(mw->pd->ctx);

	rr_mrt_mw_free(&c->mrt, mw->rkey);
	rr_free(c->env, RR_CONTAINER_OF(mw, struct soft_mw, base));
	return 0;
}

/* ---------------------------------------------------------------- CQ -- */

static struct soft_cq *scq_of(struct rr_cq *cq)
{
	return RR_CONTAINER_OF(cq, struct soft_cq, base);
}

bool soft_cq_attended(struct soft_cq *q, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&q->last_use_ns, memory_order_relaxed);

	/* last may be later than now (stored after the caller's clock read) */
	return atomic_load(&q->waiting) > 0 || rr_cq_ring_armed(&q->ring) || last >= now ||
	       now - last < SOFT_LEASE_NS;
}

/* The lease clock: the injected one, or with the default environment the
 * coarse monotonic clock (a few ns where CLOCK_MONOTONIC costs ~100 ns on a
 * VM; it lags by at most a tick, well inside SOFT_LEASE_NS). */
static uint64_t lease_now(const struct soft_ctx *c)
{
	return rr_coarse_now_ns(c->env);
}

/* A wait's deadline clock: lease_now; the deadline adds coarse_res_ns (the
 * coarse clock lags by up to its resolution), so a wait never ends early
 * and may end up to one tick (~4 ms) late. */
static uint64_t wait_now(const struct soft_ctx *c)
{
	return lease_now(c);
}

static void cq_touch(struct soft_cq *q)
{
	atomic_store_explicit(&q->last_use_ns, lease_now(q->ctx), memory_order_relaxed);
	if (atomic_load(&q->handed) > 0)
		soft_io_reclaim(q);
}

static int soft_create_cq(struct rr_context *ctx, const struct rpcrdma_cq_attr *attr,
			  struct rr_cq **out)
{
	struct soft_cq *q = rr_zalloc(ctx->env, sizeof(*q));
	int r;

	if (!q)
		return -ENOMEM;
	r = rr_cq_ring_init(&q->ring, ctx->env, attr->cqe ? attr->cqe : 1);
	if (r) {
		rr_free(ctx->env, q);
		return r;
	}
	r = soft_io_cq_init(q);
	if (r) {
		rr_cq_ring_fini(&q->ring);
		rr_free(ctx->env, q);
		return r;
	}
	pthread_mutex_init(&q->qlock, NULL);
	q->ctx = sctx(ctx);
	q->base.cqe = attr->cqe ? attr->cqe : 1;
	pthread_mutex_lock(&q->ctx->cq_lock);
	q->next_cq = q->ctx->cqs;
	q->ctx->cqs = q;
	pthread_mutex_unlock(&q->ctx->cq_lock);
	*out = &q->base;
	return 0;
}

static int soft_destroy_cq(struct rr_cq *cq)
{
	struct soft_cq *q = scq_of(cq);

	pthread_mutex_lock(&q->ctx->cq_lock);
	for (struct soft_cq **p = &q->ctx->cqs; *p; p = &(*p)->next_cq)
		if (*p == q) {
			*p = q->next_cq;
			break;
		}
	pthread_mutex_unlock(&q->ctx->cq_lock);
	soft_io_cq_fini(q);
	rr_cq_ring_fini(&q->ring);
	pthread_mutex_destroy(&q->qlock);
	rr_free(q->ctx->env, q->slots);
	rr_free(q->ctx->env, q);
	return 0;
}

/* Inline progress: the polling thread receives what its QPs' sockets hold
 * (one epoll_wait for any number of QPs), no thread hop. */
static int soft_poll_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc)
{
	struct soft_cq *q = scq_of(cq);
	int got;

	cq_touch(q);
	got = rr_cq_ring_poll(&q->ring, n, wc);
	if (got != 0)
		return got;
	if (!soft_io_cq_fast_poll(q))
		soft_io_cq_progress(q, 0, false, false);
	return rr_cq_ring_poll(&q->ring, n, wc);
}

/* Blocking poll: sleeps in epoll on the sockets and receives itself; a
 * lone waiter on a single-QP CQ sleeps in the QP's recvmsg instead (fast
 * wait, soft_io_cq_fast_wait), in slices of SOFT_FAST_BLOCK_MS. */
static int soft_wait_cq(struct rr_cq *cq, int n, struct rpcrdma_wc *wc, int timeout_ms)
{
	struct soft_cq *q = scq_of(cq);
	struct soft_direct d = {.q = q, .wc = wc, .n = n > 0 && wc ? n : 0};
	uint64_t end = 0, now = 0;
	int got;

	cq_touch(q);
	/* one clock read per turn at most, none without a deadline */
	if (timeout_ms > 0) {
		now = wait_now(q->ctx);
		end = now + q->ctx->coarse_res_ns + (uint64_t)timeout_ms * 1000000u;
	}
	atomic_fetch_add(&q->waiting, 1);
	for (;;) {
		int ms = -1, r;

		/* A QP the progress thread serves while this thread waits: a
		 * new connection, or one handed over as this wait began (the
		 * thread's balance looks at waiting after handing; this looks
		 * at handed after waiting++: one of the two sees the other).
		 * Its thread no longer looks by itself (no tick): take it
		 * back here, one load per turn. */
		if (atomic_load(&q->handed) > 0)
			soft_io_reclaim(q);
		got = rr_cq_ring_pending(&q->ring) ? rr_cq_ring_poll(&q->ring, n, wc) : 0;
		if (got != 0 || (atomic_load(&q->intr) && atomic_exchange(&q->intr, 0)))
			break;
		if (timeout_ms >= 0) {
			if (timeout_ms > 0 && now == 0)
				now = wait_now(q->ctx);
			if (timeout_ms == 0 || now >= end) {
				/* last look at what is ready */
				soft_io_cq_progress(q, 0, true, true);
				got = rr_cq_ring_poll(&q->ring, n, wc);
				break;
			}
			ms = (int)((end - now + 999999u) / 1000000u);
			now = 0;
		}
		if ((ms < 0 || ms >= SOFT_FAST_BLOCK_MS) && soft_io_cq_fast_wait(q, &d)) {
			if (d.got) {
				/* its own completions, handed over directly; what
				 * came after the array was full is in the ring */
				got = d.got;
				break;
			}
			continue;
		}
		r = soft_io_cq_progress(q, ms, true, true);
		if (r < 0) {
			got = r;
			break;
		}
	}
	/* Leaving: the last use first (the progress thread reads waiting,
	 * then last_use_ns), then waiting. The last waiter of an unarmed CQ
	 * with QPs ends the CQ's hold: from now on only its lease keeps the
	 * QPs here, and the progress thread may be asleep without a deadline
	 * for this CQ (it counted on the waiter). */
	atomic_store_explicit(&q->last_use_ns, lease_now(q->ctx), memory_order_relaxed);
	if (atomic_fetch_sub(&q->waiting, 1) == 1 &&
	    __atomic_load_n(&q->nlive, __ATOMIC_RELAXED) > 0) {
		atomic_thread_fence(memory_order_seq_cst);
		if (!rr_cq_ring_armed(&q->ring))
			soft_io_lease_check(q);
	}
	if (atomic_load(&q->handed) > 0)
		soft_io_reclaim(q);
	return got;
}

static int soft_arm_cq(struct rr_cq *cq, bool solicited_only)
{
	struct soft_cq *q = scq_of(cq);

	cq_touch(q);
	return rr_cq_ring_arm(&q->ring, solicited_only);
}

static int soft_cq_fd(struct rr_cq *cq)
{
	return scq_of(cq)->epfd;
}

/* The fd woke: receive what is ready, then consume the notification. */
static int soft_cq_get_event(struct rr_cq *cq)
{
	struct soft_cq *q = scq_of(cq);

	cq_touch(q);
	if (!soft_io_cq_fast_poll(q))
		soft_io_cq_progress(q, 0, false, false);
	return rr_cq_ring_get_event(&q->ring);
}

static int cq_add_qp(struct soft_cq *q, struct soft_qp *qp, uint64_t *tok)
{
	uint32_t i;
	int r = 0;

	pthread_mutex_lock(&q->qlock);
	for (i = 0; i < q->nslots; i++)
		if (!q->slots[i].qp)
			break;
	if (i == q->nslots) {
		if (q->nslots == q->slot_cap) {
			uint32_t cap = q->slot_cap ? q->slot_cap * 2 : 8;
			struct soft_cq_slot *ns = rr_zalloc(q->ctx->env, sizeof(*ns) * cap);

			if (!ns) {
				r = -ENOMEM;
				goto out;
			}
			if (q->nslots)
				memcpy(ns, q->slots, sizeof(*ns) * q->nslots);
			rr_free(q->ctx->env, q->slots);
			q->slots = ns;
			q->slot_cap = cap;
		}
		q->nslots++;
	}
	q->slots[i].qp = qp;
	q->slots[i].gen = ++q->gen;
	__atomic_store_n(&q->nlive, q->nlive + 1, __ATOMIC_RELAXED); /* read unlocked */
	*tok = (uint64_t)i << 32 | q->slots[i].gen;
out:
	pthread_mutex_unlock(&q->qlock);
	return r;
}

static void cq_del_qp(struct soft_cq *q, struct soft_qp *qp)
{
	pthread_mutex_lock(&q->qlock);
	for (uint32_t i = 0; i < q->nslots; i++)
		if (q->slots[i].qp == qp) {
			q->slots[i].qp = NULL;
			__atomic_store_n(&q->nlive, q->nlive - 1, __ATOMIC_RELAXED);
		}
	pthread_mutex_unlock(&q->qlock);
}

/* The QPs of @q (qlock held by the caller): for soft_io_reclaim. */
void soft_cq_for_each_qp(struct soft_cq *q, void (*fn)(struct soft_qp *qp, void *arg), void *arg)
{
	for (uint32_t i = 0; i < q->nslots; i++)
		if (q->slots[i].qp)
			fn(q->slots[i].qp, arg);
}

/* ---------------------------------------------------------------- QP -- */

static void soft_destroy_qp_mem(struct soft_qp *qp)
{
	const struct rpcrdma_env *env = qp->ctx->env;

	for (uint32_t i = 0; i < qp->sq_cap; i++)
		rr_free(env, qp->sq[i].inline_buf);
	rr_free(env, qp->sq);
	rr_free(env, qp->rq);
	rr_free(env, qp->stage);
	rr_free(env, qp->fpdu);
	rr_free(env, qp->biov);
	rr_free(env, qp->irq);
	pthread_mutex_destroy(&qp->rx_lock);
	pthread_mutex_destroy(&qp->tx_lock);
	pthread_cond_destroy(&qp->fast_cv);
	rr_free(env, qp);
}

static int soft_create_qp(struct rr_pd *pd, const struct rpcrdma_qp_attr *attr, struct rr_qp **out)
{
	struct soft_ctx *c = sctx(pd->ctx);
	const struct rpcrdma_env *env = c->env;
	struct soft_qp *qp = rr_zalloc(env, sizeof(*qp));

	if (!qp)
		return -ENOMEM;
	if (attr->max_send_wr > SOFT_MAX_WR || attr->max_recv_wr > SOFT_MAX_WR ||
	    attr->max_send_sge > SOFT_MAX_SGE || attr->max_recv_sge > SOFT_MAX_SGE ||
	    attr->max_inline > SOFT_MAX_INLINE) {
		rr_free(env, qp);
		return -EINVAL;
	}
	qp->ctx = c;
	qp->pd = RR_CONTAINER_OF(pd, struct soft_pd, base);
	qp->scq = scq_of(RR_BASE(cq, attr->send_cq));
	qp->rcq = scq_of(RR_BASE(cq, attr->recv_cq));
	qp->obj.type = SOFT_OBJ_QP;
	qp->obj.fd = -1;
	qp->sq_cap = RR_MAX(attr->max_send_wr, 1u);
	qp->rq_cap = RR_MAX(attr->max_recv_wr, 1u);
	qp->sq = rr_zalloc(env, sizeof(*qp->sq) * qp->sq_cap);
	qp->rq = rr_zalloc(env, sizeof(*qp->rq) * qp->rq_cap);
	qp->stage = rr_alloc(env, SOFT_STAGE);
	qp->fpdu = rr_alloc(env, sizeof(*qp->fpdu) * SOFT_BATCH_FPDUS);
	qp->biov = rr_alloc(env, sizeof(*qp->biov) * SOFT_BATCH_IOV);
	qp->irq_cap = SOFT_MAX_IRD;
	qp->irq = rr_zalloc(env, sizeof(*qp->irq) * qp->irq_cap);
	if (!qp->sq || !qp->rq || !qp->stage || !qp->fpdu || !qp->biov || !qp->irq) {
		rr_free(env, qp->sq);
		rr_free(env, qp->rq);
		rr_free(env, qp->stage);
		rr_free(env, qp->fpdu);
		rr_free(env, qp->biov);
		rr_free(env, qp->irq);
		rr_free(env, qp);
		return -ENOMEM;
	}
	pthread_mutex_init(&qp->rx_lock, NULL);
	pthread_mutex_init(&qp->tx_lock, NULL);
	pthread_cond_init(&qp->fast_cv, NULL);
	qp->base.attr = *attr;
	qp->base.attr.max_send_wr = qp->sq_cap;
	qp->base.attr.max_recv_wr = qp->rq_cap;
	qp->base.attr.max_send_sge = SOFT_MAX_SGE;
	qp->base.attr.max_recv_sge = SOFT_MAX_SGE;
	qp->base.attr.max_inline = SOFT_MAX_INLINE;
	pthread_mutex_lock(&c->lock);
	qp->base.qp_num = ++c->next_qpn;
	pthread_mutex_unlock(&c->lock);
	if (cq_add_qp(qp->rcq, qp, &qp->rtok) != 0) {
		soft_destroy_qp_mem(qp);
		return -ENOMEM;
	}
	if (qp->scq != qp->rcq && cq_add_qp(qp->scq, qp, &qp->stok) != 0) {
		cq_del_qp(qp->rcq, qp);
		soft_destroy_qp_mem(qp);
		return -ENOMEM;
	}
	*out = &qp->base;
	return 0;
}

static int soft_destroy_qp(struct rr_qp *base)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	const struct rpcrdma_env *env = qp->ctx->env;

	cq_del_qp(qp->rcq, qp);
	if (qp->scq != qp->rcq)
		cq_del_qp(qp->scq, qp);
	pthread_mutex_lock(&qp->ctx->lock);
	pthread_mutex_lock(&qp->rx_lock);
	pthread_mutex_lock(&qp->tx_lock);
	soft_io_qp_closed(qp);
	pthread_mutex_unlock(&qp->tx_lock);
	pthread_mutex_unlock(&qp->rx_lock);
	pthread_mutex_unlock(&qp->ctx->lock);
	RR_UNUSED(env);
	soft_destroy_qp_mem(qp);
	return 0;
}

static enum rpcrdma_wc_opcode wc_op(enum rpcrdma_wr_opcode op)
{
	switch (op) {
	case RPCRDMA_WR_SEND:
	case RPCRDMA_WR_SEND_WITH_INV:
		return RPCRDMA_WC_SEND;
	case RPCRDMA_WR_RDMA_WRITE:
		return RPCRDMA_WC_RDMA_WRITE;
	case RPCRDMA_WR_RDMA_READ:
		return RPCRDMA_WC_RDMA_READ;
	case RPCRDMA_WR_RDMA_COMMIT:
		return RPCRDMA_WC_COMMIT;
	case RPCRDMA_WR_BIND_MW:
		return RPCRDMA_WC_BIND_MW;
	default:
		return RPCRDMA_WC_LOCAL_INV;
	}
}

/* (@a + @b) mod @cap for @a < @cap and @b <= @cap: ring indices without a
 * division (a div costs tens of cycles; several per message). */
static inline uint32_t ring_idx(uint32_t a, uint32_t b, uint32_t cap)
{
	uint32_t i = a + b;

	return i >= cap ? i - cap : i;
}

/* Pops finished WQEs in order and completes them (tx_lock held). */
static void sq_complete_locked(struct soft_qp *qp)
{
	while (qp->sq_count && qp->sq_next > 0) {
		struct soft_wqe *w = &qp->sq[qp->sq_head];

		if (w->state != WQE_DONE)
			break;
		if (w->signaled || w->status != RPCRDMA_WC_SUCCESS) {
			struct rpcrdma_wc wc = {
				.wr_id = w->wr_id,
				.status = w->status,
				.opcode = wc_op(w->op),
				.byte_len = w->byte_len,
				.remote_status = w->remote_status,
				.vendor_err = w->vendor_err,
				.qp = RR_PUB(qp, &qp->base),
			};

			soft_cq_push(qp->scq, &wc);
		}
		rr_free(qp->ctx->env, w->inline_buf);
		w->inline_buf = NULL;
		qp->sq_head = ring_idx(qp->sq_head, 1, qp->sq_cap);
		qp->sq_count--;
		qp->sq_next--;
	}
}

static struct soft_wqe *sq_at(struct soft_qp *qp, uint32_t i)
{
	return &qp->sq[ring_idx(qp->sq_head, i, qp->sq_cap)];
}

/* The oldest WQE waiting for a Read or Commit Response. */
static struct soft_wqe *orq_head(struct soft_qp *qp)
{
	for (uint32_t i = 0; i < qp->sq_next; i++) {
		struct soft_wqe *w = sq_at(qp, i);

		if (w->state == WQE_AWAIT_RESP)
			return w;
	}
	return NULL;
}

static enum rpcrdma_wc_status mrt_wc(int r)
{
	return r == -EACCES || r == -ENOENT || r == -ERANGE || r == -EPERM ? RPCRDMA_WC_LOC_PROT_ERR
									    : RPCRDMA_WC_LOC_QP_OP_ERR;
}

/* Resolves local SGEs to addresses through the STag table. */
static int sge_resolve(struct soft_qp *qp, const struct rpcrdma_sge *sg, uint32_t n, uint32_t need,
		       struct iovec *iov, unsigned *cnt, uint32_t *total)
{
	uint64_t t = 0;

	*cnt = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct rr_mrt_ref ref;
		int r;

		if (!sg[i].length)
			continue;
		r = rr_mrt_check(&qp->ctx->mrt, sg[i].lkey, sg[i].addr, sg[i].length,
				 RR_MRT_LOCAL | need, &qp->pd->base, NULL, &ref);
		if (r)
			return r;
		iov[*cnt].iov_base = ref.ptr;
		iov[(*cnt)++].iov_len = sg[i].length;
		t += sg[i].length;
	}
	if (t > UINT32_MAX)
		return -EMSGSIZE;
	*total = (uint32_t)t;
	return 0;
}

static int soft_post_send(struct rr_qp *base, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	int ret = 0;

	pthread_mutex_lock(&qp->tx_lock);
	for (; wr; wr = wr->next) {
		struct soft_wqe *w;
		int r = 0;

		if (qp->state != QPS_RTS) {
			ret = qp->state == QPS_IDLE ? -ENOTCONN : -EPIPE;
			break;
		}
		if (qp->sq_count >= qp->sq_cap) {
			ret = -ENOMEM;
			break;
		}
		if (wr->opcode == RPCRDMA_WR_RDMA_COMMIT && !qp->commit_tx) {
			ret = -EOPNOTSUPP;
			break;
		}
		if (wr->opcode == RPCRDMA_WR_RDMA_READ && wr->num_sge > 1) {
			ret = -EINVAL;
			break;
		}
		w = sq_at(qp, qp->sq_count);
		rr_free(qp->ctx->env, w->inline_buf);
		/* everything up to body but the iovec array (iovcnt rules it) */
		memset(w, 0, offsetof(struct soft_wqe, iov));
		memset(&w->iovcnt, 0, offsetof(struct soft_wqe, body) - offsetof(struct soft_wqe, iovcnt));
		w->wr_id = wr->wr_id;
		w->op = wr->opcode;
		w->flags = wr->flags;
		w->signaled = (wr->flags & RPCRDMA_SEND_SIGNALED) || qp->base.attr.sq_sig_all;
		switch (wr->opcode) {
		case RPCRDMA_WR_SEND:
		case RPCRDMA_WR_SEND_WITH_INV:
		case RPCRDMA_WR_RDMA_WRITE:
			if (wr->flags & RPCRDMA_SEND_INLINE) {
				uint64_t tot = 0;

				for (uint32_t i = 0; i < wr->num_sge; i++)
					tot += wr->sg_list[i].length;
				if (tot > SOFT_MAX_INLINE) {
					r = -EINVAL;
					break;
				}
				w->inline_buf = rr_alloc(qp->ctx->env, tot);
				if (!w->inline_buf) {
					r = -ENOMEM;
					break;
				}
				tot = 0;
				for (uint32_t i = 0; i < wr->num_sge; i++) {
					memcpy(w->inline_buf + tot,
					       (const void *)(uintptr_t)wr->sg_list[i].addr,
					       wr->sg_list[i].length);
					tot += wr->sg_list[i].length;
				}
				w->iov[0].iov_base = w->inline_buf;
				w->iov[0].iov_len = tot;
				w->iovcnt = tot ? 1 : 0;
				w->len = (uint32_t)tot;
			} else {
				r = sge_resolve(qp, wr->sg_list, wr->num_sge, 0, w->iov, &w->iovcnt,
						&w->len);
				if (r) {
					w->status = mrt_wc(r);
					w->state = WQE_DONE;
					r = 0;
				}
			}
			if (wr->opcode == RPCRDMA_WR_SEND_WITH_INV)
				w->stag = wr->u.send.invalidate_stag;
			else if (wr->opcode == RPCRDMA_WR_RDMA_WRITE) {
				w->stag = wr->u.rdma.stag;
				w->to = wr->u.rdma.remote_offset;
			}
			break;
		case RPCRDMA_WR_RDMA_READ:
			w->stag = wr->u.rdma.stag;
			w->to = wr->u.rdma.remote_offset;
			if (wr->num_sge == 1) {
				w->sink_lkey = wr->sg_list[0].lkey;
				w->sink_to = wr->sg_list[0].addr;
				w->len = wr->sg_list[0].length;
				if (w->len) {
					r = rr_mrt_check(&qp->ctx->mrt, w->sink_lkey, w->sink_to, w->len,
							 RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE,
							 &qp->pd->base, NULL, NULL);
					if (r) {
						w->status = mrt_wc(r);
						w->state = WQE_DONE;
						r = 0;
					}
				}
			}
			w->byte_len = w->len;
			break;
		case RPCRDMA_WR_RDMA_COMMIT: {
			struct rr_commit_req c;
			int n;

			c.id = ++qp->next_commit_id;
			c.nregions = wr->u.commit.num_regions;
			if (c.nregions == 0 || c.nregions > RR_COMMIT_MAX_REGIONS) {
				r = -EINVAL;
				break;
			}
			for (unsigned i = 0; i < c.nregions; i++) {
				c.region[i].stag = wr->u.commit.regions[i].stag;
				c.region[i].len = wr->u.commit.regions[i].length;
				c.region[i].to = wr->u.commit.regions[i].offset;
			}
			n = rr_rdmap_commit_req_encode(&c, w->body, sizeof(w->body));
			if (n < 0) {
				r = n;
				break;
			}
			w->body_len = (uint32_t)n;
			w->commit_id = c.id;
			break;
		}
		case RPCRDMA_WR_BIND_MW:
			w->mw = RR_BASE(mw, wr->u.bind.mw);
			w->mr = RR_BASE(mr, wr->u.bind.mr);
			w->bind_addr = wr->u.bind.addr;
			w->bind_len = wr->u.bind.length;
			w->bind_access = wr->u.bind.access;
			/* The new STag is known at post time (rdma.h). */
			{
				uint32_t stag = w->mw->rkey;

				r = rr_mrt_mw_bind(&qp->ctx->mrt, &stag, w->mr->lkey, w->bind_addr,
						   w->bind_len, w->bind_access, &qp->pd->base,
						   &qp->base);
				if (r) {
					w->status = RPCRDMA_WC_MW_BIND_ERR;
					r = 0;
				} else {
					w->mw->rkey = stag;
					atomic_fetch_add_explicit(&soft_counters.mw_binds, 1,
								  memory_order_relaxed);
				}
				w->state = WQE_DONE;
			}
			break;
		case RPCRDMA_WR_LOCAL_INV:
			w->stag = wr->u.local_inv.stag;
			break;
		default:
			r = -EOPNOTSUPP;
		}
		if (r) {
			ret = r;
			break;
		}
		qp->sq_count++;
	}
	if (ret && bad)
		*bad = wr;
	soft_qp_tx_locked(qp);
	pthread_mutex_unlock(&qp->tx_lock);
	return ret;
}

static int soft_post_recv(struct rr_qp *base, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	int ret = 0;

	pthread_mutex_lock(&qp->rx_lock);
	for (; wr; wr = wr->next) {
		struct soft_rqe *e;
		uint32_t tot;
		int r;

		if (qp->state == QPS_ERROR) {
			ret = -EPIPE;
			break;
		}
		if (qp->rq_count >= qp->rq_cap) {
			ret = -ENOMEM;
			break;
		}
		e = &qp->rq[ring_idx(qp->rq_head, qp->rq_count, qp->rq_cap)];
		r = sge_resolve(qp, wr->sg_list, wr->num_sge, RPCRDMA_ACCESS_LOCAL_WRITE, e->iov,
				&e->iovcnt, &tot);
		if (r) {
			ret = -EINVAL;
			break;
		}
		e->wr_id = wr->wr_id;
		qp->rq_count++;
	}
	if (ret && bad)
		*bad = wr;
	pthread_mutex_unlock(&qp->rx_lock);
	return ret;
}

/* ------------------------------------------------------------ transmit -- */

static void soft_qp_error_tx_locked(struct soft_qp *qp, const struct rr_term *t);

/* Starts the next message: responses to the peer's Reads/Commits first
 * (answered in request order, RFC 5040 5.3), then the send queue in order.
 * Returns false when nothing can be sent now. */
static bool tx_pick(struct soft_qp *qp)
{
	if (qp->irq_sent < qp->irq_count) {
		struct soft_irqe *e = &qp->irq[ring_idx(qp->irq_head, qp->irq_sent, qp->irq_cap)];
		if (e->commit) {
			/* draft 3.2.3: everything placed before the request is
			 * in memory already (in-order stream); make it durable. */
			struct rr_commit_resp resp = {.id = e->commit_id, .status = SOFT_COMMIT_OK};

			for (unsigned i = 0; i < e->nregions; i++) {
				if (!e->rlen[i])
					continue;
				if (!e->ref[i].durable) {
					resp.status = SOFT_COMMIT_NOT_DURABLE;
					continue;
				}
				if (rr_mrt_make_durable(&e->ref[i], e->rlen[i]) != 0)
					resp.status = SOFT_COMMIT_FLUSH_FAILED;
			}
			rr_rdmap_commit_resp_encode(&resp, e->body);
			e->iov0 = (struct iovec){e->body, RR_COMMIT_RESP_BODY};
			qp->msg_is_irq = true;
			qp->msg_active = true;
			return rr_ddp_txmsg_untagged(&qp->msg, RR_OP_COMMIT_RESP, RR_QN_RESP,
						     qp->tx_msn[RR_QN_RESP]++, 0, &e->iov0, 1) == 0;
		}
		e->iov0 = (struct iovec){e->src, e->len};
		qp->msg_is_irq = true;
		qp->msg_active = true;
		return rr_ddp_txmsg_tagged(&qp->msg, RR_OP_READ_RESP, e->sink_stag, e->sink_to,
					   &e->iov0, e->len ? 1 : 0) == 0;
	}
	while (qp->sq_next < qp->sq_count) {
		struct soft_wqe *w = sq_at(qp, qp->sq_next);
		uint8_t op;
		int r;

		if (w->state == WQE_DONE) { /* failed at post, or bind */
			qp->sq_next++;
			if (w->status != RPCRDMA_WC_SUCCESS)
				return false; /* the caller moves the QP to error */
			continue;
		}
		if ((w->flags & RPCRDMA_SEND_FENCE) && qp->orq_out)
			return false;
		switch (w->op) {
		case RPCRDMA_WR_LOCAL_INV:
			r = rr_mrt_invalidate(&qp->ctx->mrt, w->stag, &qp->pd->base, NULL);
			w->status = r ? RPCRDMA_WC_LOC_PROT_ERR : RPCRDMA_WC_SUCCESS;
			if (!r)
				atomic_fetch_add_explicit(&soft_counters.local_invs, 1,
							  memory_order_relaxed);
			w->state = WQE_DONE;
			qp->sq_next++;
			if (r)
				return false;
			continue;
		case RPCRDMA_WR_SEND:
		case RPCRDMA_WR_SEND_WITH_INV:
			if (w->op == RPCRDMA_WR_SEND_WITH_INV)
				op = (w->flags & RPCRDMA_SEND_SOLICITED) ? RR_OP_SEND_SE_INV : RR_OP_SEND_INV;
			else
				op = (w->flags & RPCRDMA_SEND_SOLICITED) ? RR_OP_SEND_SE : RR_OP_SEND;
			r = rr_ddp_txmsg_untagged(&qp->msg, op, RR_QN_SEND, qp->tx_msn[RR_QN_SEND]++,
						  w->op == RPCRDMA_WR_SEND_WITH_INV ? w->stag : 0,
						  w->iov, w->iovcnt);
			break;
		case RPCRDMA_WR_RDMA_WRITE:
			r = rr_ddp_txmsg_tagged(&qp->msg, RR_OP_WRITE, w->stag, w->to, w->iov, w->iovcnt);
			break;
		case RPCRDMA_WR_RDMA_READ: {
			struct rr_rreq rq = {.sink_stag = w->sink_lkey, .sink_to = w->sink_to,
					     .size = w->len, .src_stag = w->stag, .src_to = w->to};

			if (qp->orq_out >= qp->ord)
				return false;
			rr_rdmap_rreq_encode(&rq, w->body);
			w->iov[0] = (struct iovec){w->body, RR_RREQ_BODY};
			qp->orq_out++;
			r = rr_ddp_txmsg_untagged(&qp->msg, RR_OP_READ_REQ, RR_QN_READ,
						  qp->tx_msn[RR_QN_READ]++, 0, w->iov, 1);
			break;
		}
		case RPCRDMA_WR_RDMA_COMMIT:
			if (qp->orq_out >= qp->ord)
				return false;
			w->iov[0] = (struct iovec){w->body, w->body_len};
			qp->orq_out++;
			r = rr_ddp_txmsg_untagged(&qp->msg, RR_OP_COMMIT_REQ, RR_QN_READ,
						  qp->tx_msn[RR_QN_READ]++, 0, w->iov, 1);
			break;
		default:
			r = -EINVAL;
		}
		if (r) {
			w->status = RPCRDMA_WC_LOC_QP_OP_ERR;
			w->state = WQE_DONE;
			qp->sq_next++;
			return false;
		}
		qp->msg_is_irq = false;
		qp->msg_active = true;
		return true;
	}
	return false;
}

static void tx_msg_done(struct soft_qp *qp)
{
	qp->msg_active = false;
	if (qp->msg_is_irq) {
		qp->irq_sent++;
		qp->b_irq_done++;
		return;
	}
	{
		struct soft_wqe *w = sq_at(qp, qp->sq_next);

		w->state = (w->op == RPCRDMA_WR_RDMA_READ || w->op == RPCRDMA_WR_RDMA_COMMIT)
				   ? WQE_AWAIT_RESP
				   : WQE_INFLIGHT;
		qp->sq_next++;
	}
}

static bool sq_failed(struct soft_qp *qp)
{
	for (uint32_t i = 0; i < qp->sq_next; i++) {
		struct soft_wqe *w = sq_at(qp, i);

		if (w->state == WQE_DONE && w->status != RPCRDMA_WC_SUCCESS)
			return true;
	}
	return false;
}

void soft_qp_tx_locked(struct soft_qp *qp)
{
	for (;;) {
		unsigned nf = 0;

		if (qp->state != QPS_RTS)
			return;
		while (qp->bpos < qp->bcnt) {
			ssize_t n = soft_io_writev(qp->obj.fd, qp->biov + qp->bpos,
						   RR_MIN(qp->bcnt - qp->bpos, 1024u));

			if (n == -EAGAIN) {
				if (!qp->want_out)
					soft_io_want_out(qp, true);
				return;
			}
			if (n < 0) {
				qp->last_err = (int)n;
				return; /* the receive side sees the reset */
			}
			while (n > 0) {
				struct iovec *v = &qp->biov[qp->bpos];

				if ((size_t)n >= v->iov_len) {
					n -= (ssize_t)v->iov_len;
					qp->bpos++;
				} else {
					v->iov_base = (uint8_t *)v->iov_base + n;
					v->iov_len -= (size_t)n;
					n = 0;
				}
			}
		}
		if (qp->bcnt) {
			/* the whole batch is in the socket */
			for (uint32_t i = 0; i < qp->sq_next; i++) {
				struct soft_wqe *w = sq_at(qp, i);

				if (w->state == WQE_INFLIGHT) {
					w->state = WQE_DONE;
					w->byte_len = w->len;
				}
			}
			qp->irq_head = ring_idx(qp->irq_head, qp->b_irq_done, qp->irq_cap);
			qp->irq_count -= qp->b_irq_done;
			qp->irq_sent -= qp->b_irq_done;
			qp->b_irq_done = 0;
			qp->bcnt = qp->bpos = 0;
			sq_complete_locked(qp);
		}
		if (qp->term_pending) {
			struct iovec v = {qp->term_fpdu, qp->term_len};

			(void)soft_io_writev(qp->obj.fd, &v, 1);
			qp->term_pending = false;
			return;
		}
		while (nf < SOFT_BATCH_FPDUS && qp->bcnt + RR_FPDU_MAX_IOV <= SOFT_BATCH_IOV) {
			struct rr_fpdu *f = &qp->fpdu[nf];
			int r;

			if (!qp->msg_active && !tx_pick(qp))
				break;
			r = rr_ddp_tx_next(&qp->msg, qp->crc, qp->fpdu_max, f);
			if (r == 1) {
				memcpy(qp->biov + qp->bcnt, f->iov, sizeof(*f->iov) * f->iovcnt);
				qp->bcnt += f->iovcnt;
				nf++;
			}
			if (r == 0 || f->last)
				tx_msg_done(qp);
		}
		if (nf == 1 && qp->bcnt > 1 && qp->fpdu[0].len <= qp->ctx->tx_copy_max &&
		    !(qp->fpdu[0].hdr[2] & (RR_DDP_T >> 8))) {
			/* one small untagged FPDU: one buffer, one send(2) */
			size_t off = 0;

			for (unsigned i = 0; i < qp->bcnt; i++) {
				memcpy(qp->txcopy + off, qp->biov[i].iov_base, qp->biov[i].iov_len);
				off += qp->biov[i].iov_len;
			}
			qp->biov[0] = (struct iovec){qp->txcopy, off};
			qp->bcnt = 1;
		}
		if (!qp->bcnt) {
			sq_complete_locked(qp);
			if (qp->want_out)
				soft_io_want_out(qp, false);
			if (sq_failed(qp))
				soft_qp_error_tx_locked(qp, NULL);
			return;
		}
	}
}

/* ------------------------------------------------------- errors, flush -- */

static enum rpcrdma_wc_status term_wc(const struct rr_term *t)
{
	if (!t)
		return RPCRDMA_WC_WR_FLUSH_ERR;
	if ((t->layer == RR_TL_RDMAP && t->etype == RR_RDMAP_ET_PROTECTION) ||
	    (t->layer == RR_TL_DDP && t->etype == RR_DDP_ET_TAGGED))
		return RPCRDMA_WC_REM_ACCESS_ERR;
	if (t->layer == RR_TL_RDMAP && t->etype == RR_RDMAP_ET_OPERATION &&
	    t->ecode == RR_RDMAP_EC_CANNOT_INVALIDATE)
		return RPCRDMA_WC_INV_STAG_ERR;
	if (t->layer == RR_TL_RDMAP && t->etype == RR_RDMAP_ET_OPERATION)
		return RPCRDMA_WC_REM_INV_REQ_ERR;
	if (t->layer == RR_TL_DDP && t->etype == RR_DDP_ET_UNTAGGED)
		return RPCRDMA_WC_REM_OP_ERR;
	return RPCRDMA_WC_REM_ABORT_ERR;
}

/* QP to the error state from the send side (tx_lock held): flush the send
 * queue (the first unfinished WQE carries the peer's Terminate, if any) and
 * shut the socket; the receive side flushes the receive queue. */
static void soft_qp_error_tx_locked(struct soft_qp *qp, const struct rr_term *t)
{
	bool first = true;

	qp->state = QPS_ERROR;
	for (uint32_t i = 0; i < qp->sq_count; i++) {
		struct soft_wqe *w = sq_at(qp, i);

		if (w->state == WQE_DONE)
			continue;
		w->state = WQE_DONE;
		w->status = first && t ? term_wc(t) : RPCRDMA_WC_WR_FLUSH_ERR;
		if (first && t)
			w->vendor_err = (uint32_t)t->layer << 16 | (uint32_t)t->etype << 8 | t->ecode;
		first = false;
	}
	qp->sq_next = qp->sq_count;
	qp->msg_active = false;
	qp->bcnt = qp->bpos = 0;
	qp->irq_count = qp->irq_sent = 0;
	sq_complete_locked(qp);
	soft_io_shutdown(qp);
}

static void rq_flush_locked(struct soft_qp *qp)
{
	while (qp->rq_count) {
		struct soft_rqe *e = &qp->rq[qp->rq_head];
		struct rpcrdma_wc wc = {.wr_id = e->wr_id, .status = RPCRDMA_WC_WR_FLUSH_ERR,
					.opcode = RPCRDMA_WC_RECV, .qp = RR_PUB(qp, &qp->base)};

		soft_cq_push(qp->rcq, &wc);
		qp->rq_head = ring_idx(qp->rq_head, 1, qp->rq_cap);
		qp->rq_count--;
	}
	qp->rq_flushed = true;
}

/* Caller holds rx_lock. */
void soft_qp_fatal(struct soft_qp *qp, int err, const struct rr_term *peer_term)
{
	pthread_mutex_lock(&qp->tx_lock);
	if (qp->state == QPS_RTS)
		soft_qp_error_tx_locked(qp, peer_term);
	soft_io_unwatch(qp); /* a dead socket must not wake the CQ's waiters */
	pthread_mutex_unlock(&qp->tx_lock);
	if (!qp->last_err)
		qp->last_err = err;
	rq_flush_locked(qp);
	soft_io_report_disconnect(qp, qp->last_err);
}

/* ------------------------------------------------------------- receive -- */

static enum rr_rx_code mrt_code(int r)
{
	switch (r) {
	case -ENOENT: return RR_RXC_INVALID_STAG;
	case -ERANGE: return RR_RXC_BOUNDS;
	case -EOVERFLOW: return RR_RXC_TO_WRAP;
	case -EACCES: return RR_RXC_ACCESS;
	case -EPERM: return RR_RXC_PD;
	case -EINVAL: return RR_RXC_CANNOT_INV;
	default: return RR_RXC_CATASTROPHIC;
	}
}

/* Tagged placement (RFC 5040 5.1, RFC 5041 7): Writes through the STag
 * table with the remote-write right; Read Responses only into the sink of
 * the oldest outstanding Read, at exactly the next offset. */
static enum rr_rx_code rx_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
				 bool last, uint8_t **dst)
{
	struct soft_qp *qp = ctx;
	struct rr_mrt_ref ref;
	enum rr_rx_code code = RR_RXC_OK;
	int r;

	RR_UNUSED(last);
	if (op == RR_OP_WRITE) {
		if (len == 0)
			return RR_RXC_OK; /* zero-length Write: nothing to place (as siw) */
		r = rr_mrt_check(&qp->ctx->mrt, stag, to, len, RPCRDMA_ACCESS_REMOTE_WRITE,
				 &qp->pd->base, &qp->base, &ref);
		if (r)
			return mrt_code(r);
		*dst = ref.ptr;
		return RR_RXC_OK;
	}
	pthread_mutex_lock(&qp->tx_lock);
	{
		struct soft_wqe *w = orq_head(qp);

		if (!w || w->op != RPCRDMA_WR_RDMA_READ)
			code = RR_RXC_UNEXPECTED;
		else if (stag != w->sink_lkey)
			code = RR_RXC_INVALID_STAG;
		else if (to != w->sink_to + w->rresp_done || len > w->len - w->rresp_done)
			code = RR_RXC_BOUNDS;
		else if (len) {
			r = rr_mrt_check(&qp->ctx->mrt, stag, to, len,
					 RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, &qp->pd->base, NULL,
					 &ref);
			if (r)
				code = mrt_code(r);
			else
				*dst = ref.ptr;
		}
	}
	pthread_mutex_unlock(&qp->tx_lock);
	return code;
}

static enum rr_rx_code rx_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				   const struct iovec **iov, unsigned *iovcnt)
{
	struct soft_qp *qp = ctx;
	struct soft_rqe *e;

	RR_UNUSED(msn), RR_UNUSED(mo), RR_UNUSED(len), RR_UNUSED(last);
	if (!qp->rq_count)
		return RR_RXC_NO_RECV;
	e = &qp->rq[qp->rq_head];
	*iov = e->iov;
	*iovcnt = e->iovcnt;
	return RR_RXC_OK;
}

struct soft_counters soft_counters;

static const struct rr_ddp_rx_ops soft_rx_ops = {.tagged = rx_tagged, .untagged = rx_untagged};

/* Acts on one validated segment. Returns 0, or a negative errno after the
 * stream was failed (Terminate queued). */
static int rx_event(struct soft_qp *qp, struct rr_ddp_event *ev)
{
	struct rr_mrt *t = &qp->ctx->mrt;
	enum rr_rx_code code = RR_RXC_OK;

	switch (ev->type) {
	case RR_EV_TAGGED:
		if (ev->op != RR_OP_READ_RESP)
			return 0;
		pthread_mutex_lock(&qp->tx_lock);
		{
			struct soft_wqe *w = orq_head(qp);

			if (w) {
				w->rresp_done += ev->len;
				if (ev->last) {
					if (w->rresp_done != w->len) {
						code = RR_RXC_BOUNDS;
					} else {
						w->state = WQE_DONE;
						w->byte_len = w->len;
						qp->orq_out--;
						sq_complete_locked(qp);
						soft_qp_tx_locked(qp);
					}
				}
			}
		}
		pthread_mutex_unlock(&qp->tx_lock);
		break;
	case RR_EV_SEND:
		if (!ev->last)
			return 0;
		{
			struct soft_rqe *e = &qp->rq[qp->rq_head];
			struct rpcrdma_wc wc = {.wr_id = e->wr_id, .status = RPCRDMA_WC_SUCCESS,
						.opcode = RPCRDMA_WC_RECV, .byte_len = ev->msg_len,
						.qp = RR_PUB(qp, &qp->base)};

			if (ev->op == RR_OP_SEND_INV || ev->op == RR_OP_SEND_SE_INV) {
				int r = rr_mrt_invalidate(t, ev->inv_stag, &qp->pd->base, &qp->base);

				if (r) {
					code = r == -EPERM ? RR_RXC_PD : mrt_code(r);
					break;
				}
				atomic_fetch_add_explicit(&soft_counters.remote_invs, 1,
							  memory_order_relaxed);
				wc.flags |= RPCRDMA_WC_WITH_INV;
				wc.invalidated_stag = ev->inv_stag;
			}
			if (ev->op == RR_OP_SEND_SE || ev->op == RR_OP_SEND_SE_INV)
				wc.flags |= RPCRDMA_WC_SOLICITED;
			qp->rq_head = ring_idx(qp->rq_head, 1, qp->rq_cap);
			qp->rq_count--;
			soft_cq_push(qp->rcq, &wc);
		}
		break;
	case RR_EV_READ_REQ:
	case RR_EV_COMMIT_REQ:
		pthread_mutex_lock(&qp->tx_lock);
		if (qp->irq_count >= qp->ird || qp->irq_count >= qp->irq_cap) {
			code = RR_RXC_IRD;
		} else {
			struct soft_irqe *e = &qp->irq[ring_idx(qp->irq_head, qp->irq_count, qp->irq_cap)];
			struct rr_mrt_ref ref = {0};
			int r = 0;

			memset(e, 0, sizeof(*e));
			if (ev->type == RR_EV_READ_REQ) {
				const struct rr_rreq *rq = &ev->u.rreq;

				if (rq->size)
					r = rr_mrt_check(t, rq->src_stag, rq->src_to, rq->size,
							 RPCRDMA_ACCESS_REMOTE_READ, &qp->pd->base,
							 &qp->base, &ref);
				e->sink_stag = rq->sink_stag;
				e->sink_to = rq->sink_to;
				e->src = ref.ptr;
				e->len = rq->size;
			} else {
				const struct rr_commit_req *c = &ev->u.creq;

				e->commit = true;
				e->commit_id = c->id;
				e->nregions = c->nregions;
				for (unsigned i = 0; i < c->nregions && !r; i++) {
					e->rlen[i] = c->region[i].len;
					r = rr_mrt_check(t, c->region[i].stag, c->region[i].to,
							 c->region[i].len, RPCRDMA_ACCESS_REMOTE_WRITE,
							 &qp->pd->base, &qp->base, &e->ref[i]);
				}
			}
			if (r) {
				code = mrt_code(r);
			} else {
				qp->irq_count++;
				soft_qp_tx_locked(qp);
			}
		}
		pthread_mutex_unlock(&qp->tx_lock);
		break;
	case RR_EV_COMMIT_RESP:
		pthread_mutex_lock(&qp->tx_lock);
		{
			struct soft_wqe *w = orq_head(qp);

			if (!w || w->op != RPCRDMA_WR_RDMA_COMMIT || w->commit_id != ev->u.cresp.id) {
				code = RR_RXC_UNEXPECTED;
			} else {
				w->state = WQE_DONE;
				w->remote_status = ev->u.cresp.status;
				if (ev->u.cresp.status)
					w->status = RPCRDMA_WC_COMMIT_ERR; /* draft 5.1: no Terminate */
				qp->orq_out--;
				sq_complete_locked(qp);
				soft_qp_tx_locked(qp);
			}
		}
		pthread_mutex_unlock(&qp->tx_lock);
		break;
	case RR_EV_TERMINATE:
		qp->peer_term = ev->u.term;
		qp->peer_term_valid = true;
		soft_qp_fatal(qp, -ECONNRESET, &ev->u.term);
		return -ECONNRESET;
	default:
		break;
	}
	if (code != RR_RXC_OK) {
		rr_ddp_rx_fail(&qp->rx, code);
		return -EPROTO;
	}
	return 0;
}

/* The stream failed locally: send the Terminate (RFC 5040 7.1), then fail. */
static void rx_terminate(struct soft_qp *qp)
{
	if (qp->rx.term_valid) {
		pthread_mutex_lock(&qp->tx_lock);
		qp->term_len = rr_ddp_build_terminate(&qp->rx.term, qp->tx_msn[RR_QN_TERM]++, qp->crc,
						      qp->term_fpdu);
		if (qp->bpos == 0 || qp->bpos == qp->bcnt) {
			/* at an FPDU boundary: a partially written batch
			 * cannot be interrupted (best effort, as siw) */
			qp->bcnt = qp->bpos = 0;
			qp->term_pending = true;
			qp->msg_active = false;
			soft_qp_tx_locked(qp);
			qp->term_pending = false;
		}
		pthread_mutex_unlock(&qp->tx_lock);
	}
	soft_qp_fatal(qp, -EPROTO, NULL);
}

/* Receives what the socket holds (rx_lock held). @fast: the first read
 * sleeps with rx_lock released (fast wait); see soft_qp_rx_fast. */
static int qp_rx(struct soft_qp *qp, bool fast)
{
	struct rr_ddp_event ev;
	bool drained = false;

	for (;;) {
		uint8_t *dst;
		size_t w;
		struct iovec v[2];
		unsigned cnt;
		ssize_t n;
		int r;

		if (qp->state != QPS_RTS) {
			if (qp->state == QPS_ERROR && !qp->rq_flushed)
				soft_qp_fatal(qp, -ECONNABORTED, NULL);
			return -ENOTCONN;
		}
		if (qp->stage_off < qp->stage_len) {
			size_t used;

			r = rr_ddp_rx_feed(&qp->rx, qp->stage + qp->stage_off,
					   qp->stage_len - qp->stage_off, &used, &ev);
			qp->stage_off += used;
			if (r == 1) {
				if (rx_event(qp, &ev) < 0)
					goto failed;
				continue;
			}
			if (r < 0)
				goto failed;
			continue;
		}
		qp->stage_off = qp->stage_len = 0;
		/* A short read emptied the socket: every caller comes back on
		 * (level-triggered) readiness, so skip the EAGAIN read. */
		if (drained)
			return 0;
		w = rr_ddp_rx_want(&qp->rx, &dst);
		if (qp->rx.state == RR_RX_PAYLOAD && w > 0) {
			/* payload straight into place; behind it only the
			 * trailer and the next header (a few bytes), so the next
			 * payload is not read into the stage and copied again */
			v[0] = (struct iovec){dst, w};
			v[1] = (struct iovec){qp->stage, SOFT_STAGE_TAIL};
			cnt = 2;
		} else {
			/* headers: a bounded look-ahead, so that a large payload
			 * behind them is read in place, not copied from here */
			v[0] = (struct iovec){qp->stage, SOFT_STAGE_LOOK};
			cnt = 1;
		}
		if (fast) {
			int mode;

			/* Nobody else reads the socket or touches the stage
			 * and the parser while fast_rd (qp_rx skips); a close
			 * waits for it (soft_io_fast_quiesce). */
			fast = false;
			qp->fast_rd = true;
			mode = soft_io_fast_mode(qp);
			atomic_store(&qp->rcq->fast_blocked, mode);
			/* Set, then look: a completion pushed or an interrupt
			 * latched by another thread before this point is seen
			 * here; one after it sees fast_blocked (soft_cq_push,
			 * soft_interrupt, soft_io_want_out) and either writes
			 * the CQ's wake eventfd (SOFT_FAST_POLL: the poll ends)
			 * or turns the fast wait off (SOFT_FAST_RECV: the read
			 * ends by its timeout). */
			if (rr_cq_ring_pending(&qp->rcq->ring) || atomic_load(&qp->rcq->intr) ||
			    __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST)) {
				atomic_store(&qp->rcq->fast_blocked, 0);
				qp->fast_rd = false;
				return 0;
			}
			pthread_mutex_unlock(&qp->rx_lock);
			n = soft_io_readv_fast(qp, v, cnt, mode);
			pthread_mutex_lock(&qp->rx_lock);
			atomic_store(&qp->rcq->fast_blocked, 0);
			qp->fast_rd = false;
			atomic_fetch_add(&qp->rcq->fast_reads, 1);
			if (qp->fast_kill) {
				pthread_cond_broadcast(&qp->fast_cv);
				return -ENOTCONN;
			}
			if (qp->state != QPS_RTS)
				continue; /* failed meanwhile: the bytes are void */
		} else {
			n = soft_io_readv(qp->obj.fd, v, cnt);
		}
		if (n == -EAGAIN)
			return 0;
		if (n <= 0) {
			soft_qp_fatal(qp, n == 0 ? -ECONNRESET : (int)n, NULL);
			return -ENOTCONN;
		}
		drained = (size_t)n < (cnt == 2 ? w + SOFT_STAGE_TAIL : SOFT_STAGE_LOOK);
		if (cnt == 2) {
			size_t a = RR_MIN((size_t)n, w);

			r = rr_ddp_rx_advance(&qp->rx, a, &ev);
			qp->stage_len = (size_t)n - a;
			if (r < 0)
				goto failed;
			if (r == 1 && rx_event(qp, &ev) < 0)
				goto failed;
		} else {
			qp->stage_len = (size_t)n;
		}
	}
failed:
	if (qp->state == QPS_RTS) {
		if (qp->rx.err == -ECONNRESET)
			return -ENOTCONN; /* peer's Terminate: handled */
		rx_terminate(qp);
	}
	return -ENOTCONN;
}

int soft_qp_rx(struct soft_qp *qp)
{
	if (qp->fast_rd)
		return 0; /* a fast waiter reads it and parses what comes */
	return qp_rx(qp, false);
}

int soft_qp_rx_fast(struct soft_qp *qp)
{
	int r = qp_rx(qp, true);

	/* fast_kill: a closer waits for rx_lock, then frees the QP */
	pthread_mutex_unlock(&qp->rx_lock);
	return r;
}

int soft_qp_connected(struct soft_qp *qp, int fd, const struct rr_mpa_conn *conn, bool commit_rx,
		      bool commit_tx)
{
	pthread_mutex_lock(&qp->rx_lock);
	pthread_mutex_lock(&qp->tx_lock);
	qp->obj.fd = fd;
	qp->crc = conn->crc;
	qp->commit_rx |= commit_rx;
	qp->commit_tx |= commit_tx;
	qp->ird = RR_MIN(conn->ird, (uint16_t)SOFT_MAX_IRD);
	qp->ord = RR_MIN(conn->ord, (uint16_t)SOFT_MAX_ORD);
	for (int i = 0; i < RR_QN_COUNT; i++)
		qp->tx_msn[i] = 1;
	rr_ddp_rx_init(&qp->rx, &soft_rx_ops, qp, qp->crc, qp->commit_rx);
	qp->state = QPS_RTS;
	soft_io_watch(qp);
	pthread_mutex_unlock(&qp->tx_lock);
	pthread_mutex_unlock(&qp->rx_lock);
	return 0;
}

/* The upper layer's Commit decision (rpcrdma_qp_set_commit). Takes effect
 * for the next segment parsed and the next WR posted. */
int soft_set_commit(struct rr_qp *base, bool enable)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);

	pthread_mutex_lock(&qp->rx_lock);
	pthread_mutex_lock(&qp->tx_lock);
	qp->commit_rx = qp->commit_tx = enable;
	qp->rx.commit = enable;
	pthread_mutex_unlock(&qp->tx_lock);
	pthread_mutex_unlock(&qp->rx_lock);
	return 0;
}

/* ------------------------------------------------------------ the table -- */

const struct rr_provider_ops rr_soft_ops = {
	.name = "soft",
	.open = soft_open,
	.close = soft_close,
	.query = soft_query,
	.alloc_pd = soft_alloc_pd,
	.dealloc_pd = soft_dealloc_pd,
	.reg_mr = soft_reg_mr,
	.rereg_mr = soft_rereg_mr,
	.dereg_mr = soft_dereg_mr,
	.alloc_mw = soft_alloc_mw,
	.dealloc_mw = soft_dealloc_mw,
	.create_cq = soft_create_cq,
	.destroy_cq = soft_destroy_cq,
	.poll_cq = soft_poll_cq,
	.wait_cq = soft_wait_cq,
	.arm_cq = soft_arm_cq,
	.cq_fd = soft_cq_fd,
	.cq_get_event = soft_cq_get_event,
	.create_qp = soft_create_qp,
	.destroy_qp = soft_destroy_qp,
	.post_send = soft_post_send,
	.post_recv = soft_post_recv,
	.create_channel = soft_create_channel,
	.destroy_channel = soft_destroy_channel,
	.channel_fd = soft_channel_fd,
	.get_event = soft_get_event,
	.listen = soft_listen,
	.connect = soft_connect,
	.accept = soft_accept,
	.reject = soft_reject,
	.disconnect = soft_disconnect,
	.destroy_id = soft_destroy_id,
	.local_addr = soft_local_addr,
	.peer_addr = soft_peer_addr,
	.conn_query = soft_conn_query,
	.set_commit = soft_set_commit,
	.interrupt = soft_interrupt,
};
