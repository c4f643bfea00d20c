/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's receive side (RFC 5040 sections 5-7, RFC 5041,
 * draft-talpey-rdma-commit-00 sections 3.2 and 5): the receive queue, the
 * parse loop that reads the socket into place or into the stage and feeds
 * the sans-I/O DDP parser (ddp.c), the placement callbacks that check every
 * tagged access against the STag table before a byte lands, at its header
 * and again for every piece of its payload (the placement fence of tx.c:
 * an invalidation cuts a segment being placed; durable memory through
 * pwrite, never the mapping), one handler per message (Send, Send
 * With Invalidate, Read Response, Read Request, Commit Request, Commit
 * Response, the peer's Terminate), our Terminate when the stream fails, the
 * QP's connection and error states, and what receiving does when memory a
 * placement targets is deregistered (rr_soft_qp_revoke). A QP of a shared
 * receive queue takes a Receive from it when a message begins (within its
 * receive quota, when one is set: beyond it, or with the queue empty, the
 * message is a Receive overrun, DDP "no buffer for MSN", as with its own
 * queue empty) and holds it until the message completes or is flushed. */
#include "rdma/soft/rx.h"

#include <sys/stat.h>
#include <unistd.h>

#include "rdma/soft/chan.h"
#include "rdma/soft/cq.h"
#include "rdma/soft/race.h"
#include "rdma/soft/sock.h"
#include "rdma/soft/srq.h"
#include "rdma/soft/tx.h"

/* ----------------------------------------------- the receive queue -- */

int rr_soft_post_recv(struct rr_qp *base, struct rpcrdma_recv_wr *wr, struct rpcrdma_recv_wr **bad)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	int ret = 0;

	rr_lock(&qp->rx_lock);
	for (; wr; wr = wr->next) {
		struct soft_qrqe *e;
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
		if (wr->num_sge > qp->rq_sge) {   /* wider than the ring's entries */
			ret = -EINVAL;
			break;
		}
		e = soft_rq_at(qp, ring_idx(qp->rq_head, qp->rq_count, qp->rq_cap));
		r = sge_resolve(qp, &qp->rq_lc, wr->sg_list, wr->num_sge,
				RPCRDMA_ACCESS_LOCAL_WRITE, e->iov, &e->iovcnt, &tot);
		if (r) {
			ret = -EINVAL;
			break;
		}
		e->wr_id = wr->wr_id;
		qp->rq_count++;
	}
	if (ret && bad)
		*bad = wr;
	rr_unlock(&qp->rx_lock);
	return ret;
}

static void rq_flush_locked(struct soft_qp *qp)
{
	if (qp->srq_have) {
		/* the shared queue's other Receives stay for its other QPs */
		struct rpcrdma_wc wc = {.wr_id = qp->srq_cur.wr_id,
					.status = RPCRDMA_WC_WR_FLUSH_ERR,
					.opcode = RPCRDMA_WC_RECV, .qp = RR_PUB(qp, &qp->base)};

		rr_soft_cq_push(qp->rcq, &wc);
		qp->srq_have = false;
	}
	while (qp->rq_count) {
		struct soft_qrqe *e = soft_rq_at(qp, qp->rq_head);
		struct rpcrdma_wc wc = {.wr_id = e->wr_id, .status = RPCRDMA_WC_WR_FLUSH_ERR,
					.opcode = RPCRDMA_WC_RECV, .qp = RR_PUB(qp, &qp->base)};

		rr_soft_cq_push(qp->rcq, &wc);
		qp->rq_head = ring_idx(qp->rq_head, 1, qp->rq_cap);
		qp->rq_count--;
	}
	qp->rq_flushed = true;
}

/* Caller holds rx_lock. */
void rr_soft_qp_fatal(struct soft_qp *qp, int err, const struct rr_term *peer_term)
{
	rr_lock(&qp->tx_lock);
	if (qp->state == QPS_RTS)
		rr_soft_qp_error_tx_locked(qp, peer_term);
	rr_soft_unwatch(qp); /* a dead socket must not wake the CQ's waiters */
	rr_unlock(&qp->tx_lock);
	if (!qp->last_err)
		qp->last_err = err;
	rq_flush_locked(qp);
	rr_soft_report_disconnect(qp, qp->last_err);
}

/* ------------------------------------------------------- placement -- */

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

/* Where a tagged segment for @ref lands: in place, or for durable
 * (file-backed) memory first in place_buf, written to the file once the
 * segment is complete and checked (rx_place_durable). */
static enum rr_rx_code rx_dst(struct soft_qp *qp, const struct rr_mrt_ref *ref, uint32_t len,
			      uint8_t **dst)
{
	if (!ref->durable) {
		*dst = ref->ptr;
		return RR_RXC_OK;
	}
	if (!qp->place_buf) {
		qp->place_buf = rr_alloc(qp->ctx->env, RR_ULPDU_MAX);
		if (!qp->place_buf)
			return RR_RXC_CATASTROPHIC;
	}
	qp->rxd.on = true;
	qp->rxd.fd = ref->durable_fd;
	qp->rxd.off = ref->durable_offset;
	qp->rxd.va = ref->ptr;
	qp->rxd.len = len;
	*dst = qp->place_buf;
	return RR_RXC_OK;
}

/* A complete, checked tagged segment for durable memory: its bytes go to
 * the file (pwrite), never through the mapping, so a file that shrank under
 * its registration costs a Terminate on this connection (bounds), not a
 * SIGBUS in the process (draft-talpey-rdma-commit section 4; docs/security.md
 * "Durable regions"). */
static enum rr_rx_code rx_place_durable(struct soft_qp *qp, const struct rr_ddp_event *ev)
{
	struct stat st;
	uint64_t end = qp->rxd.off + qp->rxd.len;
	enum rr_rx_code code = RR_RXC_OK;
	size_t done = 0;
	int r;

	qp->rxd.on = false;
	/* the file is written now: the STag must still be valid now (a
	 * fence of an invalidation waits for this write) */
	r = rr_soft_place_begin(qp, ev->op, ev->stag, ev->to, NULL, qp->rxd.len);
	if (r)
		return mrt_code(r);
	if (fstat(qp->rxd.fd, &st) < 0 || st.st_size < 0 || (uint64_t)st.st_size < end)
		code = RR_RXC_BOUNDS;   /* past the end of the file */
	while (code == RR_RXC_OK && done < qp->rxd.len) {
		ssize_t n = pwrite(qp->rxd.fd, qp->place_buf + done, qp->rxd.len - done,
				   (off_t)(qp->rxd.off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			code = RR_RXC_CATASTROPHIC;
		else
			done += (size_t)n;
	}
	rr_soft_place_end(qp);
	return code;
}

/* A piece of tagged payload the parser copies from the stage
 * (rr_ddp_rx_ops.place): checked and copied under the placement fence. */
static enum rr_rx_code rx_place(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint8_t *dst,
				const uint8_t *src, size_t n)
{
	struct soft_qp *qp = ctx;
	int r = rr_soft_place_begin(qp, op, stag, to, qp->rxd.on ? NULL : dst, n);

	if (r)
		return mrt_code(r);
	memcpy(dst, src, n);
	rr_soft_place_end(qp);
	return RR_RXC_OK;
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
	qp->rxd.on = false;
	rr_soft_place_link(qp); /* a fence from now on looks at this QP */
	qp->place_gen = rr_soft_place_gen(qp->ctx); /* before the check */
	if (op == RR_OP_WRITE) {
		if (len == 0)
			return RR_RXC_OK; /* zero-length Write: nothing to place (as siw) */
		/* the same answer as rr_mrt_check's, from the copy its last
		 * success left while no entry changed (a Write chunk's
		 * segments one after another). A fence moves place_gen after
		 * its table change moved rm_gen: a place_gen read above that
		 * sees the fence makes this read see rm_gen moved (a miss). */
		r = rr_mrt_check_remote(&qp->ctx->mrt, &qp->wr_rc, stag, to, len,
					RPCRDMA_ACCESS_REMOTE_WRITE, &qp->pd->base, &qp->base, &ref);
		if (r)
			return mrt_code(r);
		return rx_dst(qp, &ref, len, dst);
	}
	rr_lock(&qp->tx_lock);
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
				code = rx_dst(qp, &ref, len, dst);
		}
	}
	rr_unlock(&qp->tx_lock);
	return code;
}

/* A message begins on a QP of a shared receive queue: one Receive of the
 * queue, within the quota, held by the QP (srq_cur) until the message
 * completes. Apart from rx_untagged (and called last there: a jump), so
 * that the look-up of a Receive already held or of the QP's own queue
 * saves and restores no registers. */
__attribute__((noinline)) static enum rr_rx_code rx_srq_begin(struct soft_qp *qp,
							     const struct iovec **iov,
							     unsigned *iovcnt)
{
	bool quota_on = atomic_load_explicit(&qp->quota_on, memory_order_acquire);

	if ((quota_on && !atomic_load_explicit(&qp->quota, memory_order_acquire)) ||
	    rr_soft_srq_take(qp->srq, &qp->srq_cur))
		return RR_RXC_NO_RECV;
	qp->srq_have = true;
	if (quota_on)   /* above 0: only this thread takes */
		atomic_fetch_sub_explicit(&qp->quota, 1, memory_order_relaxed);
	*iov = qp->srq_cur.iov;
	*iovcnt = qp->srq_cur.iovcnt;
	return RR_RXC_OK;
}

static enum rr_rx_code rx_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				   const struct iovec **iov, unsigned *iovcnt)
{
	struct soft_qp *qp = ctx;
	struct soft_qrqe *e;

	RR_UNUSED(msn), RR_UNUSED(mo), RR_UNUSED(len), RR_UNUSED(last);
	if (qp->srq) {
		if (!qp->srq_have)
			return rx_srq_begin(qp, iov, iovcnt);
		*iov = qp->srq_cur.iov;
		*iovcnt = qp->srq_cur.iovcnt;
		return RR_RXC_OK;
	}
	if (!qp->rq_count)
		return RR_RXC_NO_RECV;
	e = soft_rq_at(qp, qp->rq_head);
	*iov = e->iov;
	*iovcnt = e->iovcnt;
	return RR_RXC_OK;
}

static const struct rr_ddp_rx_ops soft_rx_ops = {.tagged = rx_tagged, .untagged = rx_untagged,
						 .place = rx_place};

/* -------------------------------------------------------- messages -- */

/* The last segment of a Read Response placed (RFC 5040 5.3): the oldest
 * outstanding Read completes, if it got exactly what it asked for. */
static enum rr_rx_code rx_read_resp(struct soft_qp *qp, const struct rr_ddp_event *ev)
{
	enum rr_rx_code code = RR_RXC_OK;
	struct soft_wqe *w;

	rr_lock(&qp->tx_lock);
	w = orq_head(qp);
	if (w) {
		w->rresp_done += ev->len;
		if (ev->last) {
			if (w->rresp_done != w->len) {
				code = RR_RXC_BOUNDS;
			} else {
				w->state = WQE_DONE;
				w->byte_len = w->len;
				qp->orq_out--;
				rr_soft_sq_complete_locked(qp);
				rr_soft_qp_tx_locked(qp);
			}
		}
	}
	rr_unlock(&qp->tx_lock);
	return code;
}

/* Send With Invalidate (RFC 5040 5.4): the STag @inv_stag the peer names
 * is invalidated before the receive completes (which then says so).
 * Not inlined into rx_send: a plain Send (every NULL's Call and Reply)
 * then saves and restores no registers for it. */
__attribute__((noinline)) static enum rr_rx_code rx_send_inv(struct soft_qp *qp, uint32_t inv_stag)
{
	int r = rr_mrt_invalidate(&qp->ctx->mrt, inv_stag, &qp->pd->base, &qp->base);

	if (r)
		return r == -EPERM ? RR_RXC_PD : mrt_code(r);
	/* (a window is bound to this QP, whose segments are ordered before
	 * this Send: none is being placed; the fence keeps the rule local) */
	rr_soft_place_fence(qp->ctx, inv_stag);
	atomic_fetch_add_explicit(&soft_counters.remote_invs, 1, memory_order_relaxed);
	return RR_RXC_OK;
}

/* The wr_id of the Receive whose iovecs rx_untagged gave (@iov: its
 * entry's iov, the QP's own queue's or the SRQ's it holds, srq_cur):
 * found from the look-up the payload was placed by, not looked up again
 * (issue 16 part IA). Both entries keep wr_id first and the iovecs at the
 * same offset (asserted); read as the uint64_t it is. */
_Static_assert(offsetof(struct soft_qrqe, wr_id) == 0 && offsetof(struct soft_rqe, wr_id) == 0 &&
		       offsetof(struct soft_qrqe, iov) == offsetof(struct soft_rqe, iov),
	       "a Receive's wr_id at the same place before its iovecs in both entries");
static inline uint64_t rx_wr_id(const struct iovec *iov)
{
	return *(const uint64_t *)(const void *)((const uint8_t *)iov -
						 offsetof(struct soft_qrqe, iov));
}

/* A Receive's successful completion, into @w. */
static inline __attribute__((always_inline)) void rx_wc(struct rpcrdma_wc *w, struct soft_qp *qp,
							 uint64_t wr_id, uint32_t len,
							 uint32_t flags, uint32_t inv_stag)
{
	/* field by field: no zeroed copy first (the padding is no one's) */
	w->wr_id = wr_id;
	w->status = RPCRDMA_WC_SUCCESS;
	w->opcode = RPCRDMA_WC_RECV;
	w->byte_len = len;
	w->flags = flags;
	w->invalidated_stag = inv_stag;
	w->remote_status = 0;
	w->vendor_err = 0;
	w->qp = RR_PUB(qp, &qp->base);
}

/* The last segment of a Send (with Solicited Event, with Invalidate: @op)
 * of @len bytes placed into the oldest receive (@iov: its iovecs, as
 * rx_untagged gave them): it completes. The
 * Invalidate first (its outcome decides whether there is a completion and
 * what it says), then the Receive leaves its queue and its completion is
 * written once: straight into the fast waiter's array when it is that
 * waiter's own (rr_soft_cq_direct_slot), else built here and pushed
 * (issue 16 part IA; part ED's in-place build went through a pointer to
 * either, +18 on the server's pushes). Always inlined (rx_event and the
 * lone Send's one pass, rx_stage_parse: every Call's and Reply's): one
 * call, one frame less per message (issue 16 part GB). */
static inline __attribute__((always_inline)) enum rr_rx_code
rx_send(struct soft_qp *qp, uint8_t op, uint32_t len, uint32_t inv_stag, const struct iovec *iov)
{
	uint32_t flags = 0, inv = 0;
	struct rpcrdma_wc *slot;
	uint64_t wr_id;

	if (op == RR_OP_SEND_INV || op == RR_OP_SEND_SE_INV) {
		enum rr_rx_code code = rx_send_inv(qp, inv_stag);

		if (code != RR_RXC_OK)
			return code;
		flags = RPCRDMA_WC_WITH_INV;
		inv = inv_stag;
	}
	if (op == RR_OP_SEND_SE || op == RR_OP_SEND_SE_INV)
		flags |= RPCRDMA_WC_SOLICITED;
	wr_id = rx_wr_id(iov);
	if (qp->srq) {
		qp->srq_have = false;
	} else {
		qp->rq_head = ring_idx(qp->rq_head, 1, qp->rq_cap);
		qp->rq_count--;
	}
	slot = rr_soft_cq_direct_slot(qp->rcq, &qp->cq_rq);
	if (slot) {
		rx_wc(slot, qp, wr_id, len, flags, inv);
	} else {
		struct rpcrdma_wc wc;

		rx_wc(&wc, qp, wr_id, len, flags, inv);
		rr_soft_cq_push(qp->rcq, &wc);
	}
	return RR_RXC_OK;
}

/* A Read Request into IRQ entry @e: its source checked now (and again when
 * the response starts, tx.c). 0 or the STag table's -errno. */
static int rx_read_req(struct soft_qp *qp, struct soft_irqe *e, const struct rr_rreq *rq)
{
	struct rr_mrt_ref ref = {0};
	int r = 0;

	if (rq->size)
		r = rr_mrt_check(&qp->ctx->mrt, rq->src_stag, rq->src_to, rq->size,
				 RPCRDMA_ACCESS_REMOTE_READ, &qp->pd->base, &qp->base, &ref);
	e->sink_stag = rq->sink_stag;
	e->sink_to = rq->sink_to;
	e->src_stag = rq->src_stag;
	e->src_to = rq->src_to;
	e->len = rq->size;
	return r;
}

/* A Commit Request (draft-talpey-rdma-commit 3.2) into IRQ entry @e: every
 * region checked now (and again when the response starts, tx.c). 0 or the
 * STag table's -errno. */
static int rx_commit_req(struct soft_qp *qp, struct soft_irqe *e, const struct rr_commit_req *c)
{
	int r = 0;

	e->commit = true;
	e->commit_id = c->id;
	e->nregions = c->nregions;
	for (unsigned i = 0; i < c->nregions && !r; i++) {
		e->rlen[i] = c->region[i].len;
		e->creg[i] = c->region[i];
		r = rr_mrt_check(&qp->ctx->mrt, c->region[i].stag, c->region[i].to, c->region[i].len,
				 RPCRDMA_ACCESS_REMOTE_WRITE, &qp->pd->base, &qp->base, &e->ref[i]);
	}
	return r;
}

/* A Read or Commit Request: queued for its response, within IRD (RFC 5040
 * 6.4), and the transmit side started. The queue is mapped on the first
 * request (tx_lock; a QP nobody reads from never maps it): out of memory
 * then is the same local catastrophic error as for place_buf. */
static enum rr_rx_code rx_request(struct soft_qp *qp, const struct rr_ddp_event *ev)
{
	enum rr_rx_code code = RR_RXC_OK;

	rr_lock(&qp->tx_lock);
	if (qp->irq_count >= qp->ird || qp->irq_count >= qp->irq_cap) {
		code = RR_RXC_IRD;
	} else if (!qp->irq &&
		   !(qp->irq = rr_alloc_pages(qp->ctx->env, sizeof(*qp->irq) * qp->irq_cap))) {
		code = RR_RXC_CATASTROPHIC;
	} else {
		struct soft_irqe *e = &qp->irq[ring_idx(qp->irq_head, qp->irq_count, qp->irq_cap)];
		int r;

		memset(e, 0, sizeof(*e));
		if (ev->type == RR_EV_READ_REQ)
			r = rx_read_req(qp, e, &ev->u.rreq);
		else
			r = rx_commit_req(qp, e, &ev->u.creq);
		if (r) {
			code = mrt_code(r);
		} else {
			qp->irq_count++;
			rr_soft_qp_tx_locked(qp);
		}
	}
	rr_unlock(&qp->tx_lock);
	return code;
}

/* A Commit Response: the oldest outstanding request must be the Commit it
 * answers; a failed status completes it with RPCRDMA_WC_COMMIT_ERR (draft
 * 5.1: no Terminate). */
static enum rr_rx_code rx_commit_resp(struct soft_qp *qp, const struct rr_ddp_event *ev)
{
	enum rr_rx_code code = RR_RXC_OK;
	struct soft_wqe *w;

	rr_lock(&qp->tx_lock);
	w = orq_head(qp);
	if (!w || w->op != RPCRDMA_WR_RDMA_COMMIT || w->commit_id != ev->u.cresp.id) {
		code = RR_RXC_UNEXPECTED;
	} else {
		w->state = WQE_DONE;
		w->remote_status = ev->u.cresp.status;
		if (ev->u.cresp.status)
			w->status = RPCRDMA_WC_COMMIT_ERR; /* draft 5.1: no Terminate */
		qp->orq_out--;
		rr_soft_sq_complete_locked(qp);
		rr_soft_qp_tx_locked(qp);
	}
	rr_unlock(&qp->tx_lock);
	return code;
}

/* Acts on one validated segment. Returns 0, or a negative errno after the
 * stream was failed (Terminate queued) or ended by the peer's Terminate. */
static int rx_event(struct soft_qp *qp, struct rr_ddp_event *ev)
{
	enum rr_rx_code code = RR_RXC_OK;

	switch (ev->type) {
	case RR_EV_TAGGED:
		if (qp->rxd.on)
			code = rx_place_durable(qp, ev);
		if (code == RR_RXC_OK && ev->op == RR_OP_READ_RESP)
			code = rx_read_resp(qp, ev);
		if (ev->last) /* the message is placed: no piece until the next */
			rr_soft_place_unlink(qp);
		break;
	case RR_EV_SEND:
		if (ev->last)
			code = rx_send(qp, ev->op, ev->msg_len, ev->inv_stag, qp->rx.uiov);
		break;
	case RR_EV_READ_REQ:
	case RR_EV_COMMIT_REQ:
		code = rx_request(qp, ev);
		break;
	case RR_EV_COMMIT_RESP:
		code = rx_commit_resp(qp, ev);
		break;
	case RR_EV_TERMINATE:
		/* the peer's (RFC 5040 7.2): the QP ends */
		qp->peer_term = ev->u.term;
		qp->peer_term_valid = true;
		rr_soft_qp_fatal(qp, -ECONNRESET, &ev->u.term);
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
		rr_lock(&qp->tx_lock);
		rr_soft_term_set(qp, &qp->rx.term);
		/* after the FPDU half on the wire, if the socket takes it
		 * now: a Terminate never cuts into an FPDU (best effort, as
		 * siw: none when the socket is full) */
		if (rr_soft_tx_end_batch(qp)) {
			qp->term_pending = true;
			rr_soft_qp_tx_locked(qp);
			qp->term_pending = false;
		}
		rr_unlock(&qp->tx_lock);
	}
	rr_soft_qp_fatal(qp, -EPROTO, NULL);
}

/* -------------------------------------------------- the parse loop -- */

/* How the fast waiter's read ended besides its result (rx_read_fast). */
enum rx_fast {
	RX_FAST_READ = 0,   /* *@n: the read's result */
	RX_FAST_LEAVE,      /* a completion, an interrupt or a transmit backlog
			       came first: nothing read, the waiter looks */
	RX_FAST_KILLED,     /* the QP is closing (fast_kill): leave at once */
	RX_FAST_VOID,       /* the QP failed meanwhile: the bytes are void */
};

/* The fast waiter's read of @v (rx_lock held, released while it sleeps):
 * @dst/@len is where a payload lands directly (a revoke of that memory
 * waits for the read); @piece: it is a piece of a tagged payload that
 * passed rr_soft_place_begin, ended here as soon as the read returns.
 * Nobody else reads the socket or touches the stage and the parser while
 * fast_rd (qp_rx skips); a close waits for it (rr_soft_fast_quiesce). */
static enum rx_fast rx_read_fast(struct soft_qp *qp, struct iovec *v, unsigned cnt, uint8_t *dst,
				 size_t len, bool piece, ssize_t *n)
{
	/* read once: own_wait is written under rx_lock only, and a thread
	 * that sets it while this read runs (rr_soft_wait_qp) finds fast_rd
	 * and clears it before it lets rx_lock go */
	const bool own = qp->own_wait;
	bool leave;
	int mode;

	/* fast_rd is written under rx_lock and read under it by the library;
	 * tests look at it without the lock (has the reader begun its read?):
	 * atomic stores, relaxed (nothing is published through it: such a
	 * look only decides when the test acts), a plain store on x86-64. */
	__atomic_store_n(&qp->fast_rd, true, __ATOMIC_RELAXED);
	qp->fast_dst = dst;
	qp->fast_len = len;
	if (own) {
		/* a waiter for this QP alone (rr_soft_wait_qp) on a CQ others
		 * share and consume: the CQ's ring, latch and fast_blocked are
		 * theirs; it waits for its socket only, in a blocking read
		 * that its timeout, data, a shutdown or a close ends */
		mode = SOFT_FAST_RECV;
		leave = __atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST);
	} else {
		mode = rr_soft_sock_fast_mode(qp);
		atomic_store(&qp->rcq->fast_blocked, mode);
		/* Set, then look: a completion pushed or an interrupt latched
		 * by another thread before this point is seen here; one after
		 * it sees fast_blocked (rr_soft_cq_push, rr_soft_interrupt,
		 * rr_soft_want_out) and either writes the CQ's wake eventfd
		 * (SOFT_FAST_POLL: the poll ends) or turns the fast wait off
		 * (SOFT_FAST_RECV: the read ends by its timeout). */
		leave = rr_cq_ring_pending(&qp->rcq->ring) || atomic_load(&qp->rcq->intr) ||
			__atomic_load_n(&qp->want_out, __ATOMIC_SEQ_CST);
		if (leave)
			atomic_store(&qp->rcq->fast_blocked, 0);
	}
	if (leave) {
		__atomic_store_n(&qp->fast_rd, false, __ATOMIC_RELAXED);
		if (piece)
			rr_soft_place_end(qp);
		return RX_FAST_LEAVE;
	}
	rr_unlock(&qp->rx_lock);
	*n = rr_soft_sock_readv_fast(qp, v, cnt, mode);
	if (piece)
		rr_soft_place_end(qp); /* before any lock: a fence may wait */
	rr_lock(&qp->rx_lock);
	if (!own)
		atomic_store(&qp->rcq->fast_blocked, 0);
	__atomic_store_n(&qp->fast_rd, false, __ATOMIC_RELAXED);
	qp->fast_len = 0;
	if (qp->revoke_waiters)
		rr_cond_broadcast(&qp->fast_cv);
	if (!own)
		atomic_fetch_add(&qp->rcq->fast_reads, 1);
	if (qp->fast_kill) {
		rr_cond_broadcast(&qp->fast_cv);
		return RX_FAST_KILLED;
	}
	if (qp->state != QPS_RTS)
		return RX_FAST_VOID;
	return RX_FAST_READ;
}

/* rx_stage_parse: a lone Send was parsed, placed and completed */
#define RX_STAGE_SENT 2

/* Parses what the stage holds from stage_off on: a lone small Send (a
 * Call, a Reply) in one pass (rr_ddp_rx_send1, its Receive looked up by
 * rx_untagged named here, the parser's ops of every soft QP: a direct
 * call in a link-time optimised build) and completed here from its three
 * values, no event built (RX_STAGE_SENT; issue 16 part IA), anything else by the general parser (the returns of
 * rr_ddp_rx_feed, its event in @ev); what was consumed leaves the stage.
 * A negative errno: the stream failed (its Terminate is set). */
static int rx_stage_parse(struct soft_qp *qp, struct rr_ddp_event *ev)
{
	const uint8_t *p = qp->stage + qp->stage_off;
	size_t used, avail = qp->stage_len - qp->stage_off;
	struct rr_ddp_send1 one;
	int r = rr_ddp_rx_send1(&qp->rx, rx_untagged, p, avail, &used, &one);

	qp->stage_off += used;
	if (r == 1) {
		enum rr_rx_code code = rx_send(qp, one.op, one.len, one.inv_stag, one.iov);

		if (code != RR_RXC_OK) {
			rr_ddp_rx_fail(&qp->rx, code);
			return -EPROTO;
		}
		return RX_STAGE_SENT;
	}
	if (r < 0)
		return r;
	r = rr_ddp_rx_feed(&qp->rx, p, avail, &used, ev);
	qp->stage_off += used;
	return r;
}

/* Receives what the socket holds (rx_lock held). @fast: the first read
 * sleeps with rx_lock released (fast wait); see rr_soft_qp_rx_fast.
 * The usual turn (a Call's or a Reply's: connected, the stage empty, no
 * payload half read) goes straight to its look-ahead read, and from a
 * look-ahead read straight to the parse (connected still): the loop's
 * looks that cannot fail there (the stage's, the read count's) are not
 * made (issue 16 part JC); the same read, parse and checks.
 * A short read emptied the socket: every caller comes back on
 * (level-triggered) readiness, so the EAGAIN read is skipped. After
 * SOFT_RX_READS reads, the rest is left for the next turn too: a peer that
 * sends without pause does not keep this thread from the other
 * connections it serves.
 * A payload is read straight into place; behind it only the trailer and
 * the next header (a few bytes), so the next payload is not read into the
 * stage and copied again; behind a long one, room for a short last FPDU
 * and a small Send too (SOFT_STAGE_TAIL_LONG). A short remainder comes
 * with the look-ahead and is placed from the stage by the parser
 * (ops->place: the same checks), with what follows it. Into registered
 * memory, its STag is checked again for each piece (an invalidation since
 * the header cuts the rest of the segment). Headers take a bounded
 * look-ahead, so that a large payload behind them is read in place, not
 * copied from the stage. */
static int qp_rx(struct soft_qp *qp, bool fast)
{
	struct rr_ddp_event ev;
	bool drained = false;
	unsigned reads = 0;
	uint8_t *dst;
	size_t w, tail;
	struct iovec v[2];
	unsigned cnt;
	bool piece;
	ssize_t n;
	int r;

	if (qp->state == QPS_RTS && qp->stage_off == qp->stage_len &&
	    qp->rx.state != RR_RX_PAYLOAD) {
		qp->stage_off = qp->stage_len = 0;
		reads = 1; /* within any limit: SOFT_RX_READS and the test's are 1 or more */
		goto look;
	}
	for (;;) {
		if (qp->state != QPS_RTS) {
			if (qp->state == QPS_ERROR && !qp->rq_flushed)
				rr_soft_qp_fatal(qp, -ECONNABORTED, NULL);
			return -ENOTCONN;
		}
		if (qp->stage_off < qp->stage_len) {
parse:
			r = rx_stage_parse(qp, &ev);
			if (r < 0 || (r == 1 && rx_event(qp, &ev) < 0))
				goto failed;
			/* the next turn's leave (socket and stage emptied, still
			 * connected) without the turn (issue 16 part IA) */
			if (drained && qp->stage_off == qp->stage_len && qp->state == QPS_RTS) {
				qp->stage_off = qp->stage_len = 0;
				return 0;
			}
			continue;
		}
		qp->stage_off = qp->stage_len = 0;
		/* drained, or SOFT_RX_READS reads made (above) */
		if (drained || ++reads > qp->ctx->rx_reads)
			return 0;
		/* the parser's want decides only for a payload (read in
		 * place); headers and trailers take the look-ahead below */
		dst = NULL;
		w = tail = 0;
		piece = false;
		if (qp->rx.state == RR_RX_PAYLOAD &&
		    (w = rr_ddp_rx_want(&qp->rx, &dst)) >= SOFT_PLACE_MIN) {
			/* payload straight into place, a tail behind it (above) */
			tail = w >= SOFT_TAIL_LONG_MIN ? SOFT_STAGE_TAIL_LONG : SOFT_STAGE_TAIL;
			v[0] = (struct iovec){dst, w};
			v[1] = (struct iovec){qp->stage, tail};
			cnt = 2;
			if (qp->rx.tagged) {
				/* registered memory: its STag again, for this piece */
				r = rr_soft_place_begin(qp, qp->rx.op, qp->rx.stag,
							qp->rx.to + qp->rx.placed,
							qp->rxd.on ? NULL : dst, w);
				if (r) {
					rr_ddp_rx_fail(&qp->rx, mrt_code(r));
					goto failed;
				}
				piece = true;
			}
		} else {
			/* headers: a bounded look-ahead (above) */
look:
			dst = NULL;
			w = tail = 0;
			piece = false;
			v[0] = (struct iovec){qp->stage, SOFT_STAGE_LOOK};
			cnt = 1;
		}
		if (fast) {
			enum rx_fast f;

			fast = false;
			f = rx_read_fast(qp, v, cnt, cnt == 2 ? dst : NULL, cnt == 2 ? w : 0, piece,
					 &n);
			if (f == RX_FAST_LEAVE)
				return 0;
			if (f == RX_FAST_KILLED)
				return -ENOTCONN;
			if (f == RX_FAST_VOID)
				continue; /* failed meanwhile: the bytes are void */
		} else {
			n = rr_soft_sock_readv(qp->obj.fd, v, cnt);
			if (piece)
				rr_soft_place_end(qp);
		}
		qp->rx_reads++;
		if (n == -EAGAIN)
			return 0;
		if (n <= 0) {
			rr_soft_qp_fatal(qp, n == 0 ? -ECONNRESET : (int)n, NULL);
			return -ENOTCONN;
		}
		soft_race(SOFT_RACE_RX_READ, qp);
		drained = (size_t)n < (cnt == 2 ? w + tail : SOFT_STAGE_LOOK);
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
			if (qp->state == QPS_RTS)
				goto parse; /* the loop's top, whose looks it passes */
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

int rr_soft_qp_rx(struct soft_qp *qp)
{
	if (qp->fast_rd)
		return 0; /* a fast waiter reads it and parses what comes */
	return qp_rx(qp, false);
}

int rr_soft_qp_rx_fast(struct soft_qp *qp)
{
	int r = qp_rx(qp, true);

	/* fast_kill: a closer waits for rx_lock, then frees the QP */
	rr_unlock(&qp->rx_lock);
	return r;
}

int rr_soft_qp_rx_own(struct soft_qp *qp)
{
	return qp_rx(qp, true);
}

/* rx_lock held, tx_lock NOT held; ctx->lock or the CQ's qlock may be.
 * The wait releases rx_lock alone and sleeps until the reader, back from its
 * read, takes rx_lock, clears fast_rd and leaves (fast_kill: no parse, no
 * other lock: rx_read_fast, then rr_soft_qp_rx_fast / rr_soft_wait_qp
 * unlock). Meanwhile any thread may take rx_lock, and the reader waits for
 * it; so the caller must hold no lock that a holder of rx_lock waits for:
 *  - tx_lock: rx_lock -> tx_lock is the order (rr_soft_set_commit,
 *    rr_soft_qp_revoke, rr_soft_qp_fatal, rx_terminate, lost_fail_one after
 *    its own quiesce); a closer that waited here holding tx_lock deadlocked
 *    with any of them (part BU: test soft_close_quiesce_before_tx_lock).
 *    Hence the destroys quiesce first, then take tx_lock and close.
 *  - ctx->lock, qlock: taken only before rx_lock (progress.c, cm.c,
 *    objects.c; cq_progress, cq_one_hold's callers, lost_fail_one), never
 *    with rx_lock or tx_lock held: nothing reached under rx_lock (qp_rx's
 *    parse, rr_soft_qp_fatal, rr_soft_report_disconnect -> the channel's
 *    lock, rr_soft_cq_push -> the ring's lock, an SRQ's lock) takes them.
 * Two quiescers (a destroy and lost_fail_one) both wait here: the reader's
 * broadcast wakes both. No new fast read starts while the caller keeps
 * rx_lock (fast_rd is set only under it, after a look at state). */
void rr_soft_fast_quiesce(struct soft_qp *qp)
{
	if (!qp->fast_rd)
		return;
	qp->fast_kill = true;
	rr_soft_sock_shutdown(qp); /* ends its recvmsg now */
	soft_race(SOFT_RACE_QUIESCE, qp);
	while (qp->fast_rd)
		rr_cond_wait(&qp->fast_cv, &qp->rx_lock);
}

int rr_soft_qp_recv_quota(struct rr_qp *base, uint32_t add)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);

	uint32_t q = atomic_load_explicit(&qp->quota, memory_order_relaxed), n;

	/* no lock: the receive path takes one at a time under rx_lock and
	 * never below 0, this only adds (saturated); quota is 0 until the
	 * first add, which turns the quota on after it is counted */
	do
		n = (uint64_t)q + add > UINT32_MAX ? UINT32_MAX : q + add;
	while (!atomic_compare_exchange_weak_explicit(&qp->quota, &q, n, memory_order_release,
						      memory_order_relaxed));
	if (!atomic_load_explicit(&qp->quota_on, memory_order_relaxed))
		atomic_store_explicit(&qp->quota_on, true, memory_order_release);
	return 0;
}

/* ------------------------------------------------ connection state -- */

int rr_soft_qp_connected(struct soft_qp *qp, int fd, const struct rr_mpa_conn *conn, bool commit_rx,
			 bool commit_tx)
{
	rr_lock(&qp->rx_lock);
	rr_lock(&qp->tx_lock);
	qp->obj.fd = fd;
	qp->crc = conn->crc;
	qp->tx_send_max = (uint32_t)rr_ddp_tx_send_max(qp->fpdu_max, qp->ctx->tx_copy_max);
	qp->commit_rx |= commit_rx;
	qp->commit_tx |= commit_tx;
	qp->ird = RR_MIN(conn->ird, (uint16_t)SOFT_MAX_IRD);
	qp->ord = RR_MIN(conn->ord, (uint16_t)SOFT_MAX_ORD);
	for (int i = 0; i < RR_QN_COUNT; i++)
		qp->tx_msn[i] = 1;
	rr_ddp_rx_init(&qp->rx, &soft_rx_ops, qp, qp->crc, qp->commit_rx);
	__atomic_store_n(&qp->state, QPS_RTS, __ATOMIC_RELAXED);   /* soft.h */
	rr_soft_watch(qp);
	rr_unlock(&qp->tx_lock);
	rr_unlock(&qp->rx_lock);
	return 0;
}

/* The upper layer's Commit decision (rpcrdma_qp_set_commit). Takes effect
 * for the next segment parsed and the next WR posted. */
int rr_soft_set_commit(struct rr_qp *base, bool enable)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);

	rr_lock(&qp->rx_lock);
	rr_lock(&qp->tx_lock);
	qp->commit_rx = qp->commit_tx = enable;
	qp->rx.commit = enable;
	rr_unlock(&qp->tx_lock);
	rr_unlock(&qp->rx_lock);
	return 0;
}

/* ----------------------------------------------- memory going away -- */

/* rx.h. Caller holds no lock of @qp. */
void rr_soft_qp_revoke(struct soft_qp *qp, uintptr_t lo, uintptr_t hi)
{
	bool killed = false;

	rr_lock(&qp->rx_lock);
	/* a fast reader (no rx_lock) writing into the range, or receiving a
	 * segment bound for it: its read ends within SOFT_FAST_BLOCK_MS */
	while (qp->fast_rd && (range_hits(qp->fast_dst, qp->fast_len, lo, hi) ||
			       (qp->rxd.on && range_hits(qp->rxd.va, qp->rxd.len, lo, hi)))) {
		qp->revoke_waiters++;
		rr_cond_wait(&qp->fast_cv, &qp->rx_lock);
		qp->revoke_waiters--;
	}
	/* The rest of a tagged segment bound for the range (its STag is gone
	 * from the table already): its next piece, or the pwrite of a durable
	 * one, finds the STag invalid (rr_soft_place_begin) and the peer gets
	 * the Terminate an invalid STag gets at header time, as from siw. */
	rr_lock(&qp->tx_lock);
	if (qp->state == QPS_RTS && rr_soft_tx_needs(qp, lo, hi)) {
		rr_soft_tx_revoke(qp);
		killed = true;
	}
	rr_unlock(&qp->tx_lock);
	if (killed)
		rr_soft_qp_fatal(qp, -EPROTO, NULL);
	rr_unlock(&qp->rx_lock);
}
