/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* One connection's provider resources and the session's actions on them
 * (struct rr_conn_io of proto/conn/conn.h): the PD (one per connection,
 * RFC 8166 section 8.2, unless it shares its pool's), its share of a port's
 * CQ (port.c) and its QP, its own Receive buffers or those of a shared
 * receive pool (pool.c), send slots grown by need in registered chunks,
 * registrations for the session (a memory window bound on
 * the QP where the provider has them, an MR otherwise), Local Invalidate,
 * RDMA Read, RDMA Writes chained before a Send (Send With Invalidate when
 * asked), Receives lent as Replies, and the completions turned back into
 * session inputs by work request type. Replies answered on the progress
 * thread are chained and posted after the batch of upcalls (deferred).
 * No protocol decision is made here. */
#include "transport/rdma/tp_int.h"
#include "rdma/post_own.h"

#include "rpcrdma/push.h"

/* Mapped zero-filled (rr_alloc_pages): with large inline sizes
 * (rr_tp_conf_inline) the pages of these buffers become resident only as
 * far as messages actually filled them, and all of them go back to the
 * system when the connection is freed (an allocator's arena would keep
 * them: docs/PERFORMANCE.md "Memory after connection churn"). */
static uint8_t *map_reg(struct tp_conn *cn, size_t len, struct rpcrdma_mr **mr)
{
	uint8_t *p = rr_alloc_pages(cn->ep->env, len);

	if (p && rpcrdma_reg_mr_simple(cn->pd, p, len, RPCRDMA_ACCESS_LOCAL_WRITE, mr)) {
		rr_free_pages(cn->ep->env, p, len);
		p = NULL;
	}
	return p;
}

/* One more chunk of send slots (TP_SLOTS_FIRST, a client's
 * TP_CL_SLOTS_FIRST, then as many as there are, up to nsend), their
 * numbers onto the free stack: a connection costs the slots its Sends in
 * flight need, not credits x the inline size up front (the first chunk
 * carries the pad's zero bytes). 0 or -ENOMEM. */
static int slots_grow(struct tp_conn *cn)
{
	struct tp_slots *k = &cn->sch[cn->nsch];
	uint32_t first = cn->ep->is_server ? TP_SLOTS_FIRST : TP_CL_SLOTS_FIRST;
	uint32_t n = RR_MIN(RR_MAX(cn->nslots, first), cn->nsend - cn->nslots);

	if (!n || cn->nsch == TP_SLOT_CHUNKS)
		return -ENOMEM;
	k->mem = map_reg(cn, (size_t)n * cn->ssize + (cn->nsch ? 0 : 4), &k->mr);
	if (!k->mem)
		return -ENOMEM;
	k->lkey = rpcrdma_mr_lkey(k->mr);
	k->first = cn->nslots;
	k->n = n;
	tp_slots_add(cn, k->first, n);
	cn->nslots += n;
	cn->nsch++;
	return 0;
}

/* The free slots: a slot below TP_SFREE_BITS is a bit of sfree_bits (in
 * the connection's hot lines), the lowest taken first (the one used last
 * at one Send in flight); a slot from TP_SFREE_BITS on is on the stack
 * sfree (last in, first out), taken only when no bit is left. A put of a
 * slot not made, or of one already free below TP_SFREE_BITS (its bit
 * set), is ignored; from there on only a put onto a full stack is, as
 * the stack alone did (its count at nslots). */
void tp_slots_add(struct tp_conn *cn, uint32_t first, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		uint32_t slot = first + i;

		if (slot < TP_SFREE_BITS)
			cn->sfree_bits |= (uint64_t)1 << slot;
		else
			cn->sfree[cn->nsfree_hi++] = slot;
		cn->nsfree++;
	}
}

bool tp_slot_take(struct tp_conn *cn, uint32_t *slot)
{
	if (cn->sfree_bits) {
		*slot = (uint32_t)__builtin_ctzll(cn->sfree_bits);
		cn->sfree_bits &= cn->sfree_bits - 1;
	} else if (cn->nsfree_hi) {
		*slot = cn->sfree[--cn->nsfree_hi];
	} else {
		return false;
	}
	cn->nsfree--;
	return true;
}

bool tp_slot_is_free(const struct tp_conn *cn, uint32_t slot)
{
	if (slot < TP_SFREE_BITS)
		return slot < cn->nslots && (cn->sfree_bits >> slot & 1u);
	for (uint32_t i = 0; i < cn->nsfree_hi; i++)
		if (cn->sfree[i] == slot)
			return true;
	return false;
}

void tp_slot_put(struct tp_conn *cn, uint32_t slot)
{
	if (slot >= cn->nslots)
		return;
	if (slot < TP_SFREE_BITS) {
		uint64_t b = (uint64_t)1 << slot;

		if (cn->sfree_bits & b)
			return;
		cn->sfree_bits |= b;
	} else {
		if (cn->nsfree_hi >= cn->nslots - TP_SFREE_BITS)
			return;
		cn->sfree[cn->nsfree_hi++] = slot;
	}
	cn->nsfree++;
}

/* The chunk holding @slot. The first chunk (slots from 0) is looked at
 * first: it holds every slot of a connection with one chunk, i.e. a
 * client whose Calls never had more than TP_CL_SLOTS_FIRST in flight (one
 * compare per look, not the walk from the last chunk down). */
static const struct tp_slots *slots_of(const struct tp_conn *cn, uint32_t slot)
{
	if (slot < cn->sch[0].n)   /* (sch[0].first is 0; n 0 before it is made) */
		return &cn->sch[0];
	for (uint32_t i = cn->nsch; i-- > 0;)
		if (slot >= cn->sch[i].first)
			return &cn->sch[i];
	return &cn->sch[0];
}

static int conn_alloc_bufs(struct tp_conn *cn, uint32_t nrecv, uint32_t rsize,
			   uint32_t nsend, uint32_t ssize)
{
	const struct rpcrdma_env *env = cn->ep->env;

	cn->nrecv = nrecv;
	cn->rsize = rsize;
	cn->nsend = nsend;
	cn->ssize = ssize;
	if (nsend > TP_SFREE_BITS) {
		cn->sfree = rr_alloc(env, sizeof(uint32_t) * (nsend - TP_SFREE_BITS));
		if (!cn->sfree)
			return -ENOMEM;
	}
	cn->stoken = rr_zalloc(env, sizeof(*cn->stoken) * nsend);
	if (!cn->stoken)
		return -ENOMEM;
	if (nrecv) {
		cn->rbuf = map_reg(cn, (size_t)nrecv * rsize, &cn->rmr);
		if (!cn->rbuf)
			return -ENOMEM;
		cn->rlkey = rpcrdma_mr_lkey(cn->rmr);
		if (!cn->ep->is_server) {
			cn->rfree = rr_alloc(env, sizeof(uint32_t) * nrecv);
			if (!cn->rfree)
				return -ENOMEM;
		}
	}
	return slots_grow(cn);
}

/* A connection's PD, CQ, QP (its Receives its own, @nrecv, or those of
 * @pool) and, with @bufs, its buffers (tp_conn_bufs later otherwise);
 * errors in cn->err (tp_conn_ok). */
static struct tp_conn *conn_new(struct tp_ep *ep, struct tp_pool *pool, uint32_t nrecv,
				uint32_t nsend, bool bufs)
{
	struct tp_conn *cn = rr_zalloc(ep->env, sizeof(*cn));
	struct rpcrdma_qp_attr qa = {0};
	const struct rpcrdma_caps *c = &ep->tc->caps;
	int rc;

	if (!cn)
		return NULL;
	cn->ep = ep;
	cn->refs = 1;
	cn->pool = pool;
	if (pool && pool->share_pd) {
		cn->pd = pool->pd;
	} else {
		rc = rpcrdma_pd_alloc(ep->ctx, &cn->pd);
		if (rc)
			goto fail;
		cn->own_pd = true;
	}
	qa.max_send_wr = RR_MIN(nsend * (2 * RR_XPRT_MAX_REGS + 4) + 64, c->max_qp_wr);
	qa.max_recv_wr = RR_MIN(nrecv, c->max_qp_wr);
	/* as many completions as its work queues can hold (a pooled
	 * connection's Receive completions: at most what its peer may send,
	 * within the credits granted), reserved in a CQ it shares with others
	 * of the port: never an overrun */
	cn->cqe = RR_MIN(qa.max_send_wr + (pool ? ep->conf.credits + ep->conf.rrep_max + 4
						: qa.max_recv_wr) + 64,
			 c->max_cqe);
	qa.max_send_sge = 1;
	qa.max_recv_sge = 1;
	qa.user_ctx = cn;
	qa.srq = pool ? pool->srq : NULL;
	/* A CQ the provider refuses the QP on (it overran: its QPs are in
	 * the error state; or its own count of its QPs' queues leaves no
	 * room) takes no more connections: this one tries another, once. */
	for (int tries = 0;; tries++) {
		rc = tp_cq_reserve(ep->port, cn->cqe, &cn->tcq);
		if (rc)
			goto fail;
		cn->cq = cn->tcq->cq;
		qa.send_cq = cn->cq;
		qa.recv_cq = cn->cq;
		rc = rpcrdma_qp_create(cn->pd, &qa, &cn->qp);
		if (!rc || (rc != -ENOSPC && rc != -EIO) || tries == 1) {
			tp_cq_created(cn->tcq, cn);
			break;
		}
		tp_cq_refused(cn->tcq);
		tp_fault_cq_refused(ep);
		tp_cq_unreserve(cn->tcq, cn->cqe);
		cn->tcq = NULL;
		cn->cq = NULL;
	}
	if (rc)
		goto fail;
	cn->nrecv = nrecv;
	cn->nsend = nsend;
	if (bufs) {
		rc = tp_conn_bufs(cn);
		if (rc)
			goto fail;
	}
	cn->use_mw = ep->conf.use_windows && (c->flags & RPCRDMA_CAP_INVALIDATABLE);
	/* Linux siw (6.1) transmits an unsignaled work request of a page or
	 * more straight from the user pages (zero-copy sendpage): its data is
	 * read when TCP sends, after later completions, so a Reply's source
	 * memory may already be reused by then (seen in the lab: corrupted
	 * Write-chunk data). A signaled one is copied before it completes.
	 * The completions are ignored. */
	cn->signal_writes = c->transport == RPCRDMA_TRANSPORT_IWARP &&
			    strcmp(rpcrdma_context_provider(ep->ctx), RPCRDMA_PROVIDER_VERBS) == 0;
	tp_conn_unsig_setup(cn);
	return cn;
fail:
	cn->err = rc;
	return cn; /* caller checks cn->qp / buffers via tp_conn_ok */
}

struct tp_conn *tp_conn_new(struct tp_ep *ep, uint32_t nrecv, uint32_t nsend, bool bufs)
{
	return conn_new(ep, NULL, nrecv, nsend, bufs);
}

struct tp_conn *tp_conn_new_pooled(struct tp_ep *ep, struct tp_pool *pool, uint32_t nsend)
{
	return conn_new(ep, pool, 0, nsend, true);
}

int tp_conn_bufs(struct tp_conn *cn)
{
	return conn_alloc_bufs(cn, cn->nrecv, cn->ep->conf.inline_recv, cn->nsend,
			       cn->ep->conf.inline_send);
}

bool tp_conn_ok(const struct tp_conn *cn)
{
	return cn && cn->qp && (cn->rmr || cn->pool) && cn->nsch;
}

/* After the QP is destroyed nothing can touch the session's buffers any
 * more: a server connection's session goes with it. A connection that was
 * established goes through progress.c (tp_grave_sweep), which destroys
 * its id and QP and drains what they left in the shared CQ first. */
void tp_conn_free(struct tp_conn *cn)
{
	const struct rpcrdma_env *env;

	if (!cn)
		return;
	env = cn->ep->env;
	tp_cq_unlink(cn);   /* before its id goes (tp_cq_failed) */
	tp_port_id_destroy(cn);
	if (cn->qp)
		(void)rpcrdma_qp_destroy(cn->qp);
	/* (a connection that wanted its CQ drained went through
	 * tp_conn_release, which took that back) */
	if (cn->tcq)
		tp_cq_unreserve(cn->tcq, cn->cqe);
	tp_expo_release_all(cn);
	/* a pooled session gives its reservation back to the pool the
	 * sessions of its shard share: under the shard's lock */
	if (cn->pool)
		rr_lock(&cn->ep->lock);
	if (cn->ep->is_server && cn->sess)
		rr_conn_destroy(cn->sess);
	if (cn->pool)
		rr_unlock(&cn->ep->lock);
	if (cn->rmr)
		(void)rpcrdma_dereg_mr(cn->rmr);
	for (uint32_t i = 0; i < cn->nsch; i++) {
		(void)rpcrdma_dereg_mr(cn->sch[i].mr);
		rr_free_pages(env, cn->sch[i].mem,
			      (size_t)cn->sch[i].n * cn->ssize + (i ? 0 : 4));
	}
	if (cn->pd && cn->own_pd)
		(void)rpcrdma_pd_free(cn->pd);
	rr_free_pages(env, cn->rbuf, (size_t)cn->nrecv * cn->rsize);
	if (cn->pool) {
		rr_lock(&cn->ep->lock);
		if (!--cn->pool->conns)
			cn->pool->empty_since = tp_now_ns(cn->ep);
		rr_unlock(&cn->ep->lock);
	}
	rr_free(env, cn->sfree);
	rr_free(env, cn->rfree);
	rr_free(env, cn->stoken);
	rr_free(env, cn->dwr);
	rr_free(env, cn->dsge);
	rr_free(env, cn);
}

/* A dead connection is freed at the end of the progress iteration that
 * buried it (no handler holds it then). Destroying its id drops the CM
 * events still queued for it in the provider, so none names it later. */
void tp_conn_bury(struct tp_conn *cn)
{
	struct tp_ep *ep = cn->ep;

	cn->dead = true;
	cn->established = false;
	cn->next = ep->grave;
	ep->grave = cn;
}

/* The Receive work request of the connection's own buffer @idx into
 * @wr / @sge (@wr->next NULL). */
static void recv_wr(const struct tp_conn *cn, uint32_t idx, struct rpcrdma_recv_wr *wr,
		    struct rpcrdma_sge *sge)
{
	*sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)(cn->rbuf + (size_t)idx * cn->rsize),
				    cn->rsize, cn->rlkey};
	*wr = (struct rpcrdma_recv_wr){WRID(WR_RECV, idx), NULL, sge, 1};
}

int tp_post_recv(struct tp_conn *cn, uint32_t idx)
{
	struct rpcrdma_sge sge;
	struct rpcrdma_recv_wr wr;

	if (cn->pool)
		return tp_pool_repost(cn->pool, idx);
	recv_wr(cn, idx, &wr, &sge);
	return rpcrdma_post_recv(cn->qp, &wr, NULL);
}

/* ---- Receives by demand (client) ----
 * A client's connection keeps posted only the Receives its peer may use
 * now (RFC 8166 section 4.3: the requester never lets its peer send into
 * an empty queue), not all of its buffers: @rbase (bc_slots, for the
 * backward Calls the peer may send at any time: RFC 8167, and
 * TP_RECV_SLACK for messages sent unasked) plus one per Reply owed
 * (rr_conn_replies_owed: each Call holding a credit, an aborted one's
 * until its Reply came). The peer sends nothing else to a requester (an
 * RDMA_DONE goes the other way; an RDMA_ERROR is a Reply; Reply chunks and
 * Writes take no Receive). Before each Call's Send (c_send: its credit is
 * taken before) the posted ones are brought up to that demand, in one
 * chain that posts up to TP_RECV_BATCH - 1 more (a post per TP_RECV_BATCH
 * Calls, as the batched reposts of lent Replies before); a Receive
 * consumed goes back to the queue only while the posted ones are short of
 * the demand (c_post_recv: a dropped message, a backward Call, a pull),
 * else it is free, as is a lent one released (unlend). Free Receives are a
 * stack: the most recently freed is posted first, so a Reply lands in a
 * buffer written a few calls ago, not in the oldest of ~124 cycling
 * through the FIFO queue (cold at 100 connections even in the last-level
 * cache: docs/PERFORMANCE.md "Issue 16 part EA"). Posted: at most credits
 * + bc_slots + TP_RECV_SLACK + TP_RECV_BATCH - 1 (never more than the
 * credits + 8 + bc_slots posted at connect before); with TP_LEND_MAX lent,
 * within the client's credits + bc_slots + TP_CL_RECV_EXTRA buffers. */
_Static_assert(TP_RECV_SLACK + TP_RECV_BATCH - 1 <= 8,
	       "a client posts no more Receives than credits + 8 + bc_slots");

/* Chains of Receives: at connect up to TP_RECV_CHAIN per post, by demand
 * up to TP_RECV_BATCH (recv_more). */
#define TP_RECV_CHAIN 32u
/* recv_chain's @first for buffers taken off the free stack */
#define TP_RECV_FROM_FREE UINT32_MAX

/* Posts @m (at least 1) of the connection's own Receives as one chain
 * built in the caller's @wr / @sge (room for @m), one post: one pass
 * through the dispatch layer and one lock in the provider per chain rather
 * than per Receive, every buffer still checked there (its lkey, its
 * bounds). The buffers are @first, @first + 1, ... in that order, or with
 * @first TP_RECV_FROM_FREE the top @m of the free stack, the most recently
 * freed first (taken off it whatever the post does). 0, or the post's
 * error: a failure part-way leaves the Receives before the bad one posted
 * (as the API says), and the caller drops the connection. Inlined in both
 * callers (the by-demand one is on every fourth Call's path). */
static inline __attribute__((always_inline)) int
recv_chain(struct tp_conn *cn, uint32_t first, uint32_t m, struct rpcrdma_recv_wr *wr,
	   struct rpcrdma_sge *sge)
{
	for (uint32_t k = 0; k < m; k++) {
		recv_wr(cn, first == TP_RECV_FROM_FREE ? cn->rfree[--cn->nrfree] : first + k,
			&wr[k], &sge[k]);
		if (k)
			wr[k - 1].next = &wr[k];
	}
	return rpcrdma_post_recv(cn->qp, wr, NULL);
}

/* What a client's connection keeps posted now: its base and one per Reply
 * owed (above). */
static inline uint32_t recv_demand(const struct tp_conn *cn)
{
	return cn->rbase + rr_conn_replies_owed(cn->sess);
}

/* Posts free Receives, the most recently freed first, until @need are
 * posted (and up to TP_RECV_BATCH - 1 beyond, free ones allowing), one
 * chain per TP_RECV_BATCH. 0, -ENOBUFS (none free: not reached, see
 * above), or the post's error (the connection's: its QP in error). Not
 * inlined into c_send (called there for one Call in TP_RECV_BATCH): its
 * arrays and registers not in the frame of every Send (issue 16 part HC). */
static __attribute__((noinline)) int recv_more(struct tp_conn *cn, uint32_t need)
{
	struct rpcrdma_recv_wr wr[TP_RECV_BATCH];
	struct rpcrdma_sge sge[TP_RECV_BATCH];

	while (cn->rposted < need) {
		uint32_t n = RR_MIN(need - cn->rposted + TP_RECV_BATCH - 1, TP_RECV_BATCH);
		int rc;

		n = RR_MIN(n, cn->nrfree);
		if (!n)
			return -ENOBUFS;
		rc = recv_chain(cn, TP_RECV_FROM_FREE, n, wr, sge);
		if (rc)
			return rc;
		cn->rposted += n;
	}
	return 0;
}

/* A connection's own Receives at connect (a pooled one has none: the
 * pool's queue serves it): the first @n in buffer order as chains of up to
 * TP_RECV_CHAIN work requests (recv_chain); a client's others free, the
 * lowest on top. A failure part-way is returned: the caller drops the
 * connection. */
int tp_post_first_recvs(struct tp_conn *cn, uint32_t n)
{
	struct rpcrdma_recv_wr wr[TP_RECV_CHAIN];
	struct rpcrdma_sge sge[TP_RECV_CHAIN];

	if (cn->pool)
		return 0;
	n = RR_MIN(n, cn->nrecv);
	cn->nrfree = 0;
	if (cn->rfree)
		for (uint32_t i = cn->nrecv; i-- > n;)
			cn->rfree[cn->nrfree++] = i;
	for (uint32_t i = 0; i < n;) {
		uint32_t m = RR_MIN(n - i, TP_RECV_CHAIN);
		int rc = recv_chain(cn, i, m, wr, sge);

		if (rc)
			return rc;
		i += m;
		cn->rposted = i;
	}
	return 0;
}

int tp_post_all_recvs(struct tp_conn *cn)
{
	return tp_post_first_recvs(cn, cn->nrecv);
}

static uint8_t *slot_buf(const struct tp_conn *cn, uint32_t slot)
{
	const struct tp_slots *k = slots_of(cn, slot);

	return k->mem + (size_t)(slot - k->first) * cn->ssize;
}

static void slot_put(struct tp_conn *cn, uint32_t slot)
{
	tp_slot_put(cn, slot);
}

/* ---- the session's actions ---- */

static unsigned map_access(unsigned acc)
{
	unsigned a = RPCRDMA_ACCESS_LOCAL_WRITE;

	if (acc & RR_XPRT_ACC_REMOTE_READ)
		a |= RPCRDMA_ACCESS_REMOTE_READ;
	if (acc & RR_XPRT_ACC_REMOTE_WRITE)
		a |= RPCRDMA_ACCESS_REMOTE_WRITE;
	return a;
}

static int conn_reg(struct tp_conn *cn, struct rr_conn_mem *m)
{
	unsigned acc = map_access(m->access);
	unsigned remote = acc & (RPCRDMA_ACCESS_REMOTE_READ | RPCRDMA_ACCESS_REMOTE_WRITE);
	bool win = m->invalidatable && remote && cn->use_mw;
	struct rpcrdma_mr *mr;
	int rc;

	if (!cn || cn->dead)
		return -ENOTCONN;
	if (win)
		acc = (acc & ~remote) | RPCRDMA_ACCESS_MW_BIND;
	rc = rpcrdma_reg_mr_simple(cn->pd, m->base, m->len ? m->len : 4, acc, &mr);
	if (rc)
		return rc;
	m->handle = mr;
	m->handle2 = NULL;
	m->lkey = rpcrdma_mr_lkey(mr);
	m->window = false;
	if (win) {
		struct rpcrdma_mw *mw;
		struct rpcrdma_send_wr bw;

		rc = rpcrdma_mw_alloc(cn->pd, &mw);
		if (rc) {
			(void)rpcrdma_dereg_mr(mr);
			m->handle = NULL;
			return rc;
		}
		memset(&bw, 0, sizeof(bw));
		bw.wr_id = WRID(WR_BIND, 0);
		bw.opcode = RPCRDMA_WR_BIND_MW;
		bw.u.bind.mw = mw;
		bw.u.bind.mr = mr;
		bw.u.bind.addr = (uint64_t)(uintptr_t)m->base;
		bw.u.bind.length = m->len;
		bw.u.bind.access = remote;
		rc = rr_post_send_own(cn->qp, &bw);
		if (rc) {
			(void)rpcrdma_mw_free(mw);
			(void)rpcrdma_dereg_mr(mr);
			m->handle = NULL;
			return rc;
		}
		m->handle2 = mw;
		m->window = true;
		m->stag = rpcrdma_mw_rkey(mw);
		m->to = rpcrdma_mw_remote_offset(mw);
	} else {
		m->stag = rpcrdma_mr_rkey(mr);
		m->to = rpcrdma_mr_remote_offset(mr);
	}
	return 0;
}

static void conn_unreg(struct rr_conn_mem *m)
{
	if (m->handle2)
		(void)rpcrdma_mw_free(m->handle2);   /* a freed window is invalid */
	if (m->handle)
		(void)rpcrdma_dereg_mr(m->handle);
	m->handle = m->handle2 = NULL;
}

static int conn_inv(struct tp_conn *cn, struct rr_conn_mem *m, uint64_t token)
{
	struct rpcrdma_send_wr wr;

	if (!cn || cn->dead || !m->handle2)
		return -ENOTCONN;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID_TOK(token);
	wr.opcode = RPCRDMA_WR_LOCAL_INV;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	wr.u.local_inv.stag = rpcrdma_mw_rkey(m->handle2);
	return rr_post_send_own(cn->qp, &wr);
}

/* A free slot taken first; only with none free (tp_slot_take false: no
 * bit and an empty stack, nsfree 0) is a chunk more made and one taken
 * from it. */
static uint8_t *conn_slot_get(struct tp_conn *cn, uint32_t *slot, uint32_t *cap)
{
	if (!cn || cn->dead ||
	    (!tp_slot_take(cn, slot) && (slots_grow(cn) || !tp_slot_take(cn, slot))))
		return NULL;
	*cap = cn->ssize;
	return slot_buf(cn, *slot);
}

/* The work request storage of deferred Replies (on first use): room for
 * SV_DEFER_FIRST of them, or SV_DEFER_MAX once a batch filled that
 * (cn->dgrow, taken here when none is deferred: the chains point into the
 * arrays); more are posted before one more is deferred. Sized by need: a
 * connection with one Reply at a time never asks for the 15 KiB of a full
 * batch (issue 16 part CH). Without memory for the larger the smaller
 * stays; without any the Reply is sent at once (conn_send). */
static bool defer_ready(struct tp_conn *cn)
{
	const struct rpcrdma_env *env = cn->ep->env;
	struct rpcrdma_send_wr *wr;
	struct rpcrdma_sge *sge;
	uint32_t cap;

	if (cn->dwr && (!cn->dgrow || cn->ndefer))
		return true;
	cap = cn->dwr ? SV_DEFER_MAX : SV_DEFER_FIRST;
	cn->dgrow = false;
	wr = rr_alloc(env, sizeof(*wr) * cap * SV_DEFER_WR);
	sge = rr_alloc(env, sizeof(*sge) * cap * SV_DEFER_WR);
	if (!wr || !sge) {
		rr_free(env, wr);
		rr_free(env, sge);
		return cn->dwr != NULL;
	}
	rr_free(env, cn->dwr);
	rr_free(env, cn->dsge);
	cn->dwr = wr;
	cn->dsge = sge;
	cn->dcap = cap;
	return true;
}

/* The Send of @s into @wr (signaled, the last of its chain) and its one
 * SGE @sge: its slot's memory and key found with one look at the chunks.
 * Field by field, not the whole struct cleared (issue 16 part BM): every
 * field a Send's work request has (rdma.h; what rpcrdma_post_send checks
 * and the providers read for RPCRDMA_WR_SEND and _WITH_INV) is set, the
 * union's other members are not a Send's (test tp_send_wr_fill_sets_a_sends_fields). */
void tp_send_wr_fill(const struct tp_conn *cn, const struct rr_conn_send *s,
		     struct rpcrdma_send_wr *wr, struct rpcrdma_sge *sge)
{
	const struct tp_slots *k = slots_of(cn, s->slot);

	sge->addr = (uint64_t)(uintptr_t)(k->mem + (size_t)(s->slot - k->first) * cn->ssize);
	sge->length = s->len;
	sge->lkey = k->lkey;
	wr->wr_id = WRID(WR_SEND, s->slot);
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = s->inv ? RPCRDMA_WR_SEND_WITH_INV : RPCRDMA_WR_SEND;
	wr->flags = RPCRDMA_SEND_SIGNALED;
	wr->u.send.invalidate_stag = s->inv ? s->inv_stag : 0;
}

/* Builds the Writes of @s and its Send into @wr/@sge (nwrites + 1 each). */
void tp_send_wrs_build(const struct tp_conn *cn, const struct rr_conn_send *s,
		       struct rpcrdma_send_wr *wr, struct rpcrdma_sge *sge)
{
	unsigned n = s->nwrites;

	/* each work request written whole (a fixed-size store, no memset
	 * call of a variable length) */
	for (unsigned i = 0; i < n; i++) {
		const struct rr_conn_write *w = &s->writes[i];

		if (w->mem) {
			sge[i] = (struct rpcrdma_sge){(uint64_t)(uintptr_t)w->src, w->len,
						      w->mem->lkey};
		} else {
			/* XDR pad: from the zero bytes after the first slots */
			sge[i] = (struct rpcrdma_sge){
				(uint64_t)(uintptr_t)(cn->sch[0].mem + (size_t)cn->sch[0].n * cn->ssize),
				w->len, cn->sch[0].lkey};
		}
		wr[i] = (struct rpcrdma_send_wr){.wr_id = WRID(WR_WRITE, 0),
						 .sg_list = &sge[i],
						 .num_sge = 1,
						 .opcode = RPCRDMA_WR_RDMA_WRITE};
		if (cn->signal_writes)
			wr[i].flags = RPCRDMA_SEND_SIGNALED;
		wr[i].u.rdma.stag = w->stag;
		wr[i].u.rdma.remote_offset = w->to;
		wr[i].next = &wr[i + 1];
	}
	tp_send_wr_fill(cn, s, &wr[n], &sge[n]);
}

void tp_post_deferred(struct tp_conn *cn)
{
	struct rpcrdma_send_wr *head = NULL, *tail = NULL;
	uint32_t n = cn->ndefer;

	if (!n)
		return;
	cn->ndefer = 0;   /* (its ep->deferred link goes with the next walk) */
	for (uint32_t i = 0; i < n; i++) {
		struct rpcrdma_send_wr *w = &cn->dwr[(size_t)i * SV_DEFER_WR];

		if (tail)
			tail->next = w;
		else
			head = w;
		while (w->next)
			w = w->next;
		tail = w;
	}
	if (cn->dead || rr_post_send_own_ops(RR_BASE(context, cn->ep->ctx)->ops, cn->qp, head)) {
		/* the connection ends: the Replies with Writes are told then
		 * (rr_conn_down) */
		if (!cn->closing)
			cn->ep->closing_asked++;
		cn->closing = true;
		if (cn->id && !cn->dead)
			(void)rpcrdma_disconnect(cn->id);
	}
}

void tp_post_all_deferred(struct tp_ep *ep)
{
	while (ep->deferred) {
		struct tp_conn *cn = ep->deferred;

		ep->deferred = cn->dnext;
		cn->dnext = NULL;
		cn->dlisted = false;
		tp_post_deferred(cn);
	}
}

/* ---- a client's unsignaled Sends ----
 * A synchronous client's Call costs its Send's completion: one more CQ
 * entry pushed, polled and fed, a second wait per call. Its Reply tells
 * the caller what it waits for; the Send's slot only needs to come back.
 * So a client's Sends go unsignaled, at most TP_UNSIG_RUN in a row, and
 * the next one is signaled: its completion tells that those before it are
 * done (a send queue completes its work requests in order, and a failed
 * or flushed one completes signaled or not), and their slots come back
 * then, told to the session together (rr_conn_on_sends). A Send is signaled when
 * no free slot would be left beside it (whoever takes the last one sends
 * signaled, and its completion brings back those held here), when
 * TP_UNSIG_MAX wait already, with RDMA Writes before it, and on Linux siw
 * through verbs (signal_writes: an unsignaled work request of a page or
 * more is read from memory after later completions, see conn_new). A
 * server's Send goes unsignaled only when the session marked it quiet (a
 * Reply copied whole into its slot: no request, no Writes ride on it, and
 * the session does not count it, rr_conn_post_send): its completion is not
 * told to the session at all, its slot only comes back here. A server's
 * other Sends are signaled (a Reply with Writes is finished by its
 * completion, rs_reply_sent). */
_Static_assert(TP_UNSIG_RUN < TP_UNSIG_MAX && TP_CL_SLOTS_FIRST > TP_UNSIG_RUN,
	       "a run of unsignaled Sends and its signaled one fit the first slots");

/* (tp_conn_unsig_setup and tp_unsig_choose: tp_int.h, inlined here.) */

/* The sequence number of the oldest unsignaled Send waiting (the ring's
 * head): the ring holds consecutive ones, the newest uposted - 1. */
static inline uint32_t unsig_head_seq(const struct tp_conn *cn)
{
	return (cn->uposted - cn->ucount) & TP_UNSIG_MASK;
}

void tp_unsig_posted(struct tp_conn *cn, uint32_t slot, bool unsig)
{
	if (!unsig) {
		cn->urun = 0;
		return;
	}
	cn->uslot[(cn->uhead + cn->ucount) % TP_UNSIG_MAX] = slot;
	cn->ucount++;
	cn->uposted++;
	cn->urun++;
}

/* (One pass over the Sends released, no test of each one's sequence
 * number: those before @mark are the first d of the ring. Their slots
 * below TP_SFREE_BITS go back as bits gathered in a register, each as
 * tp_slot_put would put it (one not made or already free ignored); the
 * others through tp_slot_put. Issue 16 part IC.) */
bool tp_unsig_release(struct tp_conn *cn, uint32_t mark, uint32_t self, unsigned *nother)
{
	uint32_t d = (mark - unsig_head_seq(cn)) & TP_UNSIG_MASK;
	uint32_t k = RR_MIN(d, cn->ucount), h = cn->uhead;
	uint32_t lim = RR_MIN(cn->nslots, TP_SFREE_BITS);
	uint64_t bits = cn->sfree_bits;
	uint32_t nbits = 0;
	bool had_self = false;

	if (d > TP_UNSIG_MASK / 2)
		k = 0;   /* a mark behind the head: none before it */
	cn->uhead = (h + k) % TP_UNSIG_MAX;
	cn->ucount -= k;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t slot = cn->uslot[(h + i) % TP_UNSIG_MAX];

		had_self |= slot == self;
		if (slot < lim) {
			uint64_t b = (uint64_t)1 << slot;

			nbits += !(bits & b);
			bits |= b;
		} else {
			tp_slot_put(cn, slot);
		}
	}
	cn->sfree_bits = bits;
	cn->nsfree += nbits;
	*nother = k - had_self;
	return had_self;
}

/* A Send's completion (@wc, of the Send in @self) came: the unsignaled
 * Sends posted before its mark are done. Their slots are put back and,
 * when it succeeded on a live connection, a client's session told of them
 * all at once (rr_conn_on_sends: one turn of its pump, not one per Send;
 * a Send without Writes, as every unsignaled one is, has nothing to tell
 * but its count); a server's were quiet, told nothing. Returns whether
 * @self was one of them (its slot put back here). */
static bool unsig_release(struct tp_conn *cn, const struct rpcrdma_wc *wc, uint32_t self)
{
	unsigned n;
	bool had_self = tp_unsig_release(cn, WRMARK(wc->wr_id), self, &n);

	if (n && !cn->ep->is_server && wc->status == RPCRDMA_WC_SUCCESS && !cn->dead &&
	    !cn->closing)
		rr_conn_on_sends(cn->sess, n);
	return had_self;
}

/* A server's quiet Sends are told to nobody, so the send-stall watch
 * (the session's send_timeout_ms) does not see them: on a connection that
 * goes silent after them, nothing proves them done, and a peer that stops
 * reading would hold their slots until the idle timeout. The timer walk
 * (every 10-100 ms, no work per call) notes the oldest one waiting and
 * since when; still the same after half the send timeout, it posts a
 * probe: a signaled zero-length RDMA Write (nothing is placed and no STag
 * is checked for it: InfiniBand's rule for zero-length RDMA operations,
 * Linux siw, the soft provider's rx_tagged), whose completion proves
 * every Send before it done and puts back their slots (unsig_release: its
 * mark covers all of them; none is still deferred). It is counted in
 * flight for the stall watch from when they were first seen waiting (the
 * probe given half the send timeout at least). A peer that reads gets its
 * slots back without a Send of ours to its Receives; one whose path takes
 * no more bytes loses the connection by the send timeout (send_stalls),
 * its slots freed with it. */
static void conn_close(struct tp_conn *cn);

void tp_quiet_watch(struct tp_conn *cn, uint64_t now)
{
	uint64_t tmo = (uint64_t)cn->ep->conf.send_timeout_ms * 1000000u;
	struct rpcrdma_send_wr w;

	if (!cn->ucount || cn->qprobe || cn->dead || cn->closing || !tmo) {
		cn->qw_on = false;
		return;
	}
	if (!cn->qw_on || cn->qw_seq != unsig_head_seq(cn)) {
		cn->qw_on = true;
		cn->qw_seq = unsig_head_seq(cn);
		cn->qw_t0 = now;
		return;
	}
	if (now - cn->qw_t0 < tmo / 2 || cn->ndefer)
		return;
	w = (struct rpcrdma_send_wr){.wr_id = WRID_SEND(TP_PROBE_SLOT, cn->uposted),
				     .opcode = RPCRDMA_WR_RDMA_WRITE,
				     .flags = RPCRDMA_SEND_SIGNALED};
	if (rr_post_send_own(cn->qp, &w)) {
		conn_close(cn);
		return;
	}
	tp_unsig_posted(cn, TP_PROBE_SLOT, false);
	cn->qprobe = true;
	cn->ep->stats.quiet_probes++;
	cn->qw_on = false;
	/* a walk late on a coarse tick: the probe still has half the time */
	rr_conn_send_watch(cn->sess, now > tmo / 2 ? RR_MAX(cn->qw_t0, now - tmo / 2) : cn->qw_t0);
}

/* conn_send's way for a Send with RDMA Writes before it that is not
 * deferred: the chain built in arrays (on the stack up to 8 Writes) and
 * posted. Not inlined: its arrays and their registers are then not in the
 * frame of every lone Send (c_send, s_send; issue 16 part HC). */
static __attribute__((noinline)) int conn_send_chain(struct tp_conn *cn,
						     const struct rr_conn_send *s)
{
	struct rpcrdma_send_wr wstack[9], *wr = wstack;
	struct rpcrdma_sge sstack[9], *sge = sstack;
	bool unsig;
	int rc;

	if (s->nwrites + 1 > RR_ARRAY_SIZE(wstack)) {
		wr = rr_alloc(cn->ep->env, sizeof(*wr) * (s->nwrites + 1));
		sge = rr_alloc(cn->ep->env, sizeof(*sge) * (s->nwrites + 1));
		if (!wr || !sge) {
			if (wr != wstack)
				rr_free(cn->ep->env, wr);
			if (sge != sstack)
				rr_free(cn->ep->env, sge);
			return -ENOMEM;
		}
	}
	tp_send_wrs_build(cn, s, wr, sge);
	unsig = tp_unsig_choose(cn, s, &wr[s->nwrites]);
	rc = rr_post_send_own(cn->qp, wr);
	if (!rc) {
		tp_unsig_posted(cn, s->slot, unsig);
		rc = unsig && s->quiet ? 1 : 0;
	}
	if (wr != wstack)
		rr_free(cn->ep->env, wr);
	if (sge != sstack)
		rr_free(cn->ep->env, sge);
	return rc;
}

/* Posts @s on @cn. Inlined in its two callers (s_send, c_send: one frame
 * and one liveness check fewer per Send, issue 16 part GC); the same body
 * in both. */
static inline __attribute__((always_inline)) int conn_send(struct tp_conn *cn,
							   const struct rr_conn_send *s)
{
	bool unsig;
	int rc;

	if (!cn || cn->dead)
		return -ENOTCONN;
	cn->stoken[s->slot] = s->token;
	/* Deferred Replies wait for the end of the batch, but not for long:
	 * a batch of many, or one behind a slow handler, is posted now; and
	 * before any Send that is not deferred (the send queue takes them in
	 * the order tp_unsig_posted counted them: a signaled Send's completion
	 * must not vouch for an unsignaled one not yet posted). */
	if (cn->ndefer && (!cn->ep->defer || s->nwrites >= SV_DEFER_WR ||
			   cn->ndefer >= cn->dcap ||
			   tp_now_ns(cn->ep) - cn->defer_t0 > SV_DEFER_NS)) {
		if (cn->ndefer >= cn->dcap && cn->dcap < SV_DEFER_MAX)
			cn->dgrow = true;   /* room for a full batch next */
		tp_post_deferred(cn);
	}
	if (!s->nwrites && (!cn->ep->defer || (s->alone && !cn->ndefer))) {
		/* a lone Send (every inline Call; a Reply without Writes when
		 * not deferred, or when no other Call of its connection awaits
		 * a Reply and none is deferred: no chain to join, so the batch's
		 * end would post it alone, after touching this connection's
		 * lines and its deferred WR arrays once more): built in place,
		 * no arrays */
		struct rpcrdma_send_wr w;
		struct rpcrdma_sge g;

		tp_send_wr_fill(cn, s, &w, &g);
		unsig = tp_unsig_choose(cn, s, &w);
		/* the provider's ops from the endpoint's context (a line the
		 * Send reads anyway), as tp_post_deferred: not by the walk qp
		 * -> pd -> ctx, the QP's PD a cold line per Send at many
		 * connections (the QP and its PD are made on ep->ctx: conn_new);
		 * through the provider's one-SGE Send op (post_send1: no tests
		 * of the shape, which this builder fixes) */
		rc = rr_post_send1_own_ops(RR_BASE(context, cn->ep->ctx)->ops, cn->qp, &w);
		if (rc)
			return rc;
		tp_unsig_posted(cn, s->slot, unsig);
		return unsig && s->quiet ? 1 : 0;
	}
	if (cn->ep->defer && s->nwrites < SV_DEFER_WR && defer_ready(cn)) {
		struct rpcrdma_send_wr *dw = &cn->dwr[(size_t)cn->ndefer * SV_DEFER_WR];
		struct rpcrdma_sge *dg = &cn->dsge[(size_t)cn->ndefer * SV_DEFER_WR];

		/* a Reply without Writes (the common one): its Send alone, not
		 * through the Writes' loop (tp_send_wrs_build does the same
		 * for n = 0) */
		if (!s->nwrites)
			tp_send_wr_fill(cn, s, dw, dg);
		else
			tp_send_wrs_build(cn, s, dw, dg);
		/* counted as posted now, in the order the chain posts them: a
		 * chain that fails to post ends the connection, whose slots go
		 * with it (tp_post_deferred) */
		unsig = tp_unsig_choose(cn, s, &dw[s->nwrites]);
		tp_unsig_posted(cn, s->slot, unsig);
		if (!cn->ndefer) {
			cn->defer_t0 = tp_now_ns(cn->ep);
			/* listed once (it may be there from a post since):
			 * a flag, not a walk of the list (a batch of B
			 * connections walked B * B / 2 links, each another
			 * connection's, out of cache at 1,000 connections) */
			if (!cn->dlisted) {
				cn->dnext = cn->ep->deferred;
				cn->ep->deferred = cn;
				cn->dlisted = true;
			}
		}
		cn->ndefer++;
		return unsig && s->quiet ? 1 : 0;
	}
	return conn_send_chain(cn, s);
}

static int conn_read(struct tp_conn *cn, const struct rr_conn_read *r)
{
	struct rpcrdma_sge sge = {(uint64_t)(uintptr_t)r->dst, r->len, r->mem->lkey};
	struct rpcrdma_send_wr wr;

	if (!cn || cn->dead)
		return -ENOTCONN;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = WRID_TOK(r->token);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = RPCRDMA_WR_RDMA_READ;
	wr.flags = RPCRDMA_SEND_SIGNALED;
	wr.u.rdma.stag = r->stag;
	wr.u.rdma.remote_offset = r->to;
	return rr_post_send_own(cn->qp, &wr);
}

static int conn_lend(struct tp_conn *cn, void **handle)
{
	if (!cn)
		return -ENOBUFS;
	tp_conn_unlend_drain(cn, cn);
	if (cn->lent >= TP_LEND_MAX)
		return -ENOBUFS;
	cn->lent++;
	*handle = cn;
	return 0;
}

/* The session asks to end the connection: marked, ended by the caller of
 * the session once it returns (tp_on_wc's callers, the API). */
static void conn_close(struct tp_conn *cn)
{
	if (!cn || cn->closing || cn->dead)
		return;
	cn->closing = true;
	cn->ep->closing_asked++;
	if (cn->id)
		(void)rpcrdma_disconnect(cn->id);
}

/* ---- server: ctx is the connection ---- */

static int s_reg(void *ctx, struct rr_conn_mem *m)
{
	return conn_reg(ctx, m);
}

static void s_unreg(void *ctx, struct rr_conn_mem *m)
{
	(void)ctx;
	conn_unreg(m);
}

static int s_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	return conn_inv(ctx, m, token);
}

static uint8_t *s_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	return conn_slot_get(ctx, slot, cap);
}

static void s_slot_put(void *ctx, uint32_t slot)
{
	slot_put(ctx, slot);
}

static int s_send(void *ctx, const struct rr_conn_send *s)
{
	return conn_send(ctx, s);
}

static int s_read(void *ctx, const struct rr_conn_read *r)
{
	return conn_read(ctx, r);
}

static int s_post_recv(void *ctx, uint32_t idx)
{
	struct tp_conn *cn = ctx;

	if (cn->dead && cn->pool) {
		tp_pool_consumed(cn->pool, idx);   /* counted by the pool itself */
		return 1;
	}
	return cn->dead ? -ENOTCONN : tp_post_recv(cn, idx);
}

/* Each grant's increase, before the peer can learn of it: the provider
 * lets the connection take that many more Receives from the shared queue
 * (where it can bound it: rpcrdma_qp_recv_quota, whose op the pool keeps:
 * tp_pool's quota_op; the QP was made on the pool's SRQ, conn_new). */
static void s_recv_quota(void *ctx, uint32_t add)
{
	struct tp_conn *cn = ctx;

	if (cn->pool && cn->pool->quota && cn->qp)
		(void)cn->pool->quota_op(RR_BASE(qp, cn->qp), add);
}

static void s_deliver(void *ctx, struct rr_conn_sreq *r)
{
	struct tp_conn *cn = ctx;
	struct tp_shard *s = tp_shard_of(cn->ep);

	r->xconn = cn;
	r->xnext = NULL;
	*s->deliver_tail = r;
	s->deliver_tail = &r->xnext;
}

/* A Reply's memory is free: a synchronous replier is woken; an
 * asynchronous one is queued for its sent upcall (sv_sent_upcalls, without
 * the lock). */
static void s_sent(void *ctx, struct rr_conn_sreq *r, int status)
{
	struct tp_conn *cn = ctx;
	struct tp_shard *s = tp_shard_of(cn->ep);

	r->xsent_done = true;
	r->xsent_status = status;
	if (r->xsent) {
		r->xnext = NULL;
		*s->sent_tail = r;
		s->sent_tail = &r->xnext;
	}
	rr_cond_broadcast(&cn->ep->cond);
}

static void s_close(void *ctx)
{
	conn_close(ctx);
}

/* A backward Call completed: queued for its upcall (tp_sv_bc_upcalls,
 * without the lock). */
static void s_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct tp_conn *cn = ctx;
	struct tp_shard *s = tp_shard_of(cn->ep);

	rpc->xnext = NULL;
	*s->bc_done_tail = rpc;
	s->bc_done_tail = &rpc->xnext;
	if (!tp_on_progress_thread(cn->ep))
		tp_ep_kick(cn->ep);   /* its turn runs the upcall */
}

const struct rr_conn_io tp_server_io = {
	.reg = s_reg, .unreg = s_unreg, .inv = s_inv, .slot_get = s_slot_get,
	.slot_put = s_slot_put, .send = s_send, .read = s_read, .post_recv = s_post_recv,
	.recv_quota = s_recv_quota, .deliver = s_deliver, .sent = s_sent, .close = s_close,
	.complete = s_complete,
};

/* ---- client: ctx is the client, the connection its current one ---- */

static struct tp_conn *cur(void *ctx)
{
	return ((struct rr_tp_client *)ctx)->conn;
}

static int c_reg(void *ctx, struct rr_conn_mem *m)
{
	return conn_reg(cur(ctx), m);
}

static int c_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	return conn_inv(cur(ctx), m, token);
}

static uint8_t *c_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	return conn_slot_get(cur(ctx), slot, cap);
}

static void c_slot_put(void *ctx, uint32_t slot)
{
	if (cur(ctx))
		slot_put(cur(ctx), slot);
}

/* A Call's Send (or an RDMA_DONE's, a backward Reply's: no Reply owed
 * more) after the Receives its Reply may use (conn.c "Receives by
 * demand"): a failure to post them is the Send's. */
static int c_send(void *ctx, const struct rr_conn_send *s)
{
	struct tp_conn *cn = cur(ctx);
	uint32_t need;

	if (!cn || cn->dead)
		return -ENOTCONN;   /* (conn_send's answer) */
	need = recv_demand(cn);
	if (cn->rposted < need) {
		int rc = recv_more(cn, need);

		if (rc)
			return rc;
	}
	return conn_send(cn, s);
}

static int c_read(void *ctx, const struct rr_conn_read *r)
{
	return conn_read(cur(ctx), r);
}

/* Receive @idx, consumed, goes back to the queue while the posted ones
 * are short of the demand (its message a Reply or a backward Call's
 * repost, or dropped); else it is free, the next to post (conn.c
 * "Receives by demand"). */
static __attribute__((noinline)) int c_post_recv_now(struct tp_conn *cn, uint32_t idx)
{
	int rc = tp_post_recv(cn, idx);

	if (rc == 0)
		cn->rposted++;
	return rc;
}

/* (the post, and its work request's frame, out of line: a Reply's
 * Receive usually goes onto the free stack, issue 16 part HD) */
static int c_post_recv(void *ctx, uint32_t idx)
{
	struct tp_conn *cn = cur(ctx);

	if (!cn || cn->dead)
		return -ENOTCONN;
	if (cn->rposted >= recv_demand(cn)) {
		cn->rfree[cn->nrfree++] = idx;
		return 0;
	}
	return c_post_recv_now(cn, idx);
}

static int c_lend(void *ctx, uint32_t idx, void **handle)
{
	(void)idx;
	return conn_lend(cur(ctx), handle);
}

/* Receive @idx of @cn, lent to a Reply, is given back: free, the next to
 * post (conn.c "Receives by demand"), when @cn is @current and alive (the
 * connection is not freed while lent: tp_grave_sweep). Its Reply owed no
 * more, the posted ones still cover the demand: nothing to post now. */
static void unlend(struct tp_conn *cn, struct tp_conn *current, uint32_t idx)
{
	cn->lent--;
	if (cn->dead || current != cn)
		return;
	cn->rfree[cn->nrfree++] = idx;
}

/* The Reply was the Receive buffer itself (the session's release). */
static void c_unlend(void *ctx, void *handle, uint32_t idx)
{
	unlend(handle, cur(ctx), idx);
}

/* cn->rel: 4 lanes of 16 bits (TP_LEND_MAX of them). Every Reply noted
 * there is lent (counted in cn->lent, which never passes TP_LEND_MAX:
 * conn_lend), and the caller's own is not noted yet: at most
 * TP_LEND_MAX - 1 lanes are taken in any value the word has, so each
 * attempt finds a free one, and one fails only when another thread
 * changed the word meanwhile. The release orders the caller's reads of
 * the Reply before the repost that lets the provider write it again. */
_Static_assert(TP_LEND_MAX == 4, "cn->rel has 4 lanes of 16 bits");

bool tp_conn_unlend_later(struct tp_conn *cn, uint32_t idx)
{
	uint64_t v = atomic_load_explicit(&cn->rel, memory_order_relaxed);

	if (idx >= 0xffffu)
		return false;   /* (no such queue: the lock's way) */
	for (;;) {
		unsigned lane = 0;

		while (lane < TP_LEND_MAX && ((v >> (16 * lane)) & 0xffffu))
			lane++;
		if (lane == TP_LEND_MAX)
			return false;   /* (not reached: see above) */
		if (atomic_compare_exchange_weak_explicit(
			    &cn->rel, &v, v | (uint64_t)(idx + 1) << (16 * lane),
			    memory_order_release, memory_order_relaxed))
			return true;
	}
}

void tp_conn_unlend_drain(struct tp_conn *cn, struct tp_conn *current)
{
	uint64_t v;

	if (!atomic_load_explicit(&cn->rel, memory_order_relaxed))
		return;
	v = atomic_exchange_explicit(&cn->rel, 0, memory_order_acquire);
	for (; v; v >>= 16)
		if (v & 0xffffu)
			unlend(cn, current, (uint32_t)(v & 0xffffu) - 1);
}

static void c_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct rr_tp_client *c = ctx;

	rpc->xnext = NULL;
	*c->done_tail = rpc;
	c->done_tail = &rpc->xnext;
}

static void c_close(void *ctx)
{
	conn_close(cur(ctx));
}

/* A reverse Call (RFC 8167): queued for its upcall (cl_deliver, without
 * the lock). */
static void c_deliver(void *ctx, struct rr_conn_sreq *r)
{
	struct rr_tp_client *c = ctx;

	r->xnext = NULL;
	*c->bc_in_tail = r;
	c->bc_in_tail = &r->xnext;
}

const struct rr_conn_io tp_client_io = {
	.reg = c_reg, .unreg = s_unreg, .inv = c_inv, .slot_get = c_slot_get,
	.slot_put = c_slot_put, .send = c_send, .read = c_read, .post_recv = c_post_recv,
	.lend = c_lend, .unlend = c_unlend, .complete = c_complete, .close = c_close,
	.deliver = c_deliver,
};

/* ---- completions ---- */

/* A successful Receive of live connection @cn (no pool's: tp_on_wc's
 * checks made) to its session; @client: @cn is a client's (known by the
 * caller: tp_on_wc_own), whose session is a requester and whose Receives
 * are not counted for an idle timeout. One body for both ways. */
static inline __attribute__((always_inline)) void on_recv_body(struct tp_conn *cn,
							       const struct rpcrdma_wc *wc,
							       bool client)
{
	uint32_t idx = (uint32_t)WRVAL(wc->wr_id);
	const uint8_t *buf;
	uint32_t len = RR_MIN(wc->byte_len, cn->rsize);
	bool has_inv = (wc->flags & RPCRDMA_WC_WITH_INV) != 0;

	cn->rposted--;   /* (a server's is not kept after connect) */
	if (client) {
		rr_conn_on_recv_rq(cn->sess, idx, cn->rbuf + (size_t)idx * cn->rsize, len,
				   has_inv, wc->invalidated_stag);
		return;
	}
	/* its idle timeout: the first Receive since the sweep's last look
	 * reads the clock, the others are counted (server_conns.c
	 * tp_sv_idle_sweep) */
	if (cn->nrx++ == cn->idle_nrx && cn->ep->is_server)
		cn->last_rx_ns = tp_now_ns(cn->ep);
	buf = cn->pool ? tp_pool_buf(cn->pool, idx) : cn->rbuf + (size_t)idx * cn->rsize;
	rr_conn_on_recv(cn->sess, idx, buf, len, has_inv, wc->invalidated_stag);
}

/* (Inlined in its callers where the link-time optimiser sees them:
 * tp_cq_wait_once's batch of one, the waiter's Reply without a call.) */
inline __attribute__((always_inline)) void tp_on_wc_own(struct tp_conn *cn,
							 const struct rpcrdma_wc *wc)
{
	/* not a successful Receive of a live connection: tp_on_wc's way
	 * (a client's connection has no pool: conn.c tp_pool_*) */
	if (WRTYPE(wc->wr_id) != WR_RECV || wc->status != RPCRDMA_WC_SUCCESS || cn->dead ||
	    cn->closing) {
		tp_on_wc(cn, wc);
		return;
	}
	on_recv_body(cn, wc, true);
}

void tp_on_wc(struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	unsigned t = WRTYPE(wc->wr_id);

	if (t == WR_PUSH) {
		tp_push_wc(RR_CONTAINER_OF(cn->ep, struct rr_tp_client, ep), cn, wc);
		return;
	}
	if (t == WR_SEND && !unsig_release(cn, wc, (uint32_t)WRVAL(wc->wr_id))) {
		if ((uint32_t)WRVAL(wc->wr_id) == TP_PROBE_SLOT) {
			cn->qprobe = false;   /* no slot: told with token 0 */
			if (wc->status == RPCRDMA_WC_SUCCESS)
				cn->ep->stats.quiet_probes_done++;
		} else {
			slot_put(cn, (uint32_t)WRVAL(wc->wr_id));
		}
	}
	if (t == WR_RECV && cn->pool &&
	    (cn->dead || cn->closing || wc->status != RPCRDMA_WC_SUCCESS)) {
		/* a Receive of the shared queue no session takes: back to it */
		tp_pool_consumed(cn->pool, (uint32_t)WRVAL(wc->wr_id));
		if (!cn->dead && !cn->closing)
			conn_close(cn);
		return;
	}
	/* A dead connection's completions (flushed) tell the session
	 * nothing: rr_conn_down settled everything it had in flight. */
	if (cn->dead || cn->closing) {
		if (wc->status != RPCRDMA_WC_SUCCESS)
			tp_fault_wc(cn, wc);
		return;
	}
	if (wc->status != RPCRDMA_WC_SUCCESS) {
		/* a failed work request is fatal; a failed Read is told to
		 * the session first, which remembers its XID */
		tp_fault_wc(cn, wc);
		if (t == WR_TOKEN && wc->status != RPCRDMA_WC_WR_FLUSH_ERR)
			rr_conn_on_work(cn->sess, WRVAL(wc->wr_id), -EIO);
		conn_close(cn);
		return;
	}
	switch (t) {
	case WR_RECV:
		on_recv_body(cn, wc, false);
		break;
	case WR_SEND:
		rr_conn_on_send(cn->sess,
				(uint32_t)WRVAL(wc->wr_id) == TP_PROBE_SLOT
					? 0
					: cn->stoken[(uint32_t)WRVAL(wc->wr_id)],
				0);
		break;
	case WR_TOKEN:
		rr_conn_on_work(cn->sess, WRVAL(wc->wr_id), 0);
		break;
	default:
		break;
	}
}
