/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's transmit side (RFC 5040 sections 5-7,
 * draft-talpey-rdma-commit-00 section 3.2): posting send work requests
 * (resolved through the STag table when posted), picking the next message
 * (responses to the peer's Reads and Commits first, in request order, then
 * the send queue, ORD-limited and fenced), segmenting it into FPDUs with the
 * sans-I/O DDP segmenter, writing batches of them (a small untagged FPDU in
 * one copy), completing and flushing the send queue, sending a Terminate,
 * what transmitting does when memory it still needs is deregistered
 * (rr_soft_tx_revoke), and the placement fence that lets an invalidation
 * wait for the receive side's pieces through its STag (rr_soft_place_*).
 * Read Responses from durable (file-backed) memory are copied from the
 * file with pread into a bounce buffer, never read through the mapping.
 * Bytes go out through sock.c. */
#include "rdma/soft/tx.h"

#include <sys/stat.h>
#include <unistd.h>

#include "rdma/soft/cq.h"
#include "rdma/soft/rdmap.h"
#include "rdma/soft/sock.h"

/* ----------------------------------------------------- completions -- */

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

/* Pops finished WQEs in order and completes them (tx_lock held). */
void rr_soft_sq_complete_locked(struct soft_qp *qp)
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

			rr_soft_cq_push(qp->scq, &wc);
		}
		rr_free(qp->ctx->env, w->inline_buf);
		w->inline_buf = NULL;
		qp->sq_head = ring_idx(qp->sq_head, 1, qp->sq_cap);
		qp->sq_count--;
		qp->sq_next--;
	}
	/* Empty: start again at slot 0, so that the queue's pages in use are
	 * as many as its depth needs, not all of them in turn (they are mapped
	 * on first touch: rr_alloc_pages). */
	if (!qp->sq_count)
		qp->sq_head = 0;
}

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
void rr_soft_qp_error_tx_locked(struct soft_qp *qp, const struct rr_term *t)
{
	bool first = true;

	__atomic_store_n(&qp->state, QPS_ERROR, __ATOMIC_RELAXED);   /* soft.h */
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
	qp->bcnt = qp->bpos = qp->bnf = 0;
	qp->bpart = false;
	qp->irq_count = qp->irq_sent = 0;
	rr_soft_sq_complete_locked(qp);
	rr_soft_sock_shutdown(qp);
}

/* --------------------------------------------------------- posting -- */

static enum rpcrdma_wc_status mrt_wc(int r)
{
	return r == -EACCES || r == -ENOENT || r == -ERANGE || r == -EPERM ? RPCRDMA_WC_LOC_PROT_ERR
									    : RPCRDMA_WC_LOC_QP_OP_ERR;
}

/* A Send, Send With Invalidate or Write into WQE @w: its payload copied now
 * (RPCRDMA_SEND_INLINE) or resolved through the STag table (a failure
 * completes the WQE with an error when its turn comes), its STags. 0, or
 * -EINVAL / -ENOMEM: the WR is refused. */
static int wqe_send_write(struct soft_qp *qp, struct soft_wqe *w, const struct rpcrdma_send_wr *wr)
{
	int r;

	if (wr->flags & RPCRDMA_SEND_INLINE) {
		uint64_t tot = 0;

		for (uint32_t i = 0; i < wr->num_sge; i++)
			tot += wr->sg_list[i].length;
		if (tot > SOFT_MAX_INLINE)
			return -EINVAL;
		w->inline_buf = rr_alloc(qp->ctx->env, tot);
		if (!w->inline_buf)
			return -ENOMEM;
		tot = 0;
		for (uint32_t i = 0; i < wr->num_sge; i++) {
			memcpy(w->inline_buf + tot, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			tot += wr->sg_list[i].length;
		}
		w->iov[0].iov_base = w->inline_buf;
		w->iov[0].iov_len = tot;
		w->iovcnt = tot ? 1 : 0;
		w->len = (uint32_t)tot;
	} else {
		r = sge_resolve(qp, &qp->sq_lc, wr->sg_list, wr->num_sge, 0, w->iov, &w->iovcnt,
				&w->len);
		if (r) {
			w->status = mrt_wc(r);
			w->state = WQE_DONE;
		}
	}
	if (wr->opcode == RPCRDMA_WR_SEND_WITH_INV)
		w->stag = wr->u.send.invalidate_stag;
	else if (wr->opcode == RPCRDMA_WR_RDMA_WRITE) {
		w->stag = wr->u.rdma.stag;
		w->to = wr->u.rdma.remote_offset;
	}
	return 0;
}

/* An RDMA Read into WQE @w: its sink checked now (a failure completes the
 * WQE with an error when its turn comes). */
static void wqe_read(struct soft_qp *qp, struct soft_wqe *w, const struct rpcrdma_send_wr *wr)
{
	int r;

	w->stag = wr->u.rdma.stag;
	w->to = wr->u.rdma.remote_offset;
	if (wr->num_sge == 1) {
		w->sink_lkey = wr->sg_list[0].lkey;
		w->sink_to = wr->sg_list[0].addr;
		w->len = wr->sg_list[0].length;
		if (w->len) {
			r = rr_mrt_check(&qp->ctx->mrt, w->sink_lkey, w->sink_to, w->len,
					 RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE, &qp->pd->base,
					 NULL, NULL);
			if (r) {
				w->status = mrt_wc(r);
				w->state = WQE_DONE;
			}
		}
	}
	w->byte_len = w->len;
}

/* An RDMA Commit into WQE @w: its Commit Request body encoded now (the
 * next Commit id). 0, or -EINVAL / the codec's error: the WR is refused. */
static int wqe_commit(struct soft_qp *qp, struct soft_wqe *w, const struct rpcrdma_send_wr *wr)
{
	struct rr_commit_req c;
	int n;

	c.id = ++qp->next_commit_id;
	c.nregions = wr->u.commit.num_regions;
	if (c.nregions == 0 || c.nregions > RR_COMMIT_MAX_REGIONS)
		return -EINVAL;
	for (unsigned i = 0; i < c.nregions; i++) {
		c.region[i].stag = wr->u.commit.regions[i].stag;
		c.region[i].len = wr->u.commit.regions[i].length;
		c.region[i].to = wr->u.commit.regions[i].offset;
	}
	n = rr_rdmap_commit_req_encode(&c, w->body, sizeof(w->body));
	if (n < 0)
		return n;
	w->body_len = (uint32_t)n;
	w->commit_id = c.id;
	return 0;
}

/* The RDMAP opcode of a Send or Send With Invalidate (@op) with @flags. */
static uint8_t send_op(enum rpcrdma_wr_opcode op, uint32_t flags)
{
	if (op == RPCRDMA_WR_SEND_WITH_INV)
		return (flags & RPCRDMA_SEND_SOLICITED) ? RR_OP_SEND_SE_INV : RR_OP_SEND_INV;
	return (flags & RPCRDMA_SEND_SOLICITED) ? RR_OP_SEND_SE : RR_OP_SEND;
}

/* The next free slot of the send queue, taken for @wr (tx_lock held, room
 * checked): cleared up to its body, its id, opcode and flags set. */
static struct soft_wqe *wqe_take(struct soft_qp *qp, const struct rpcrdma_send_wr *wr)
{
	struct soft_wqe *w = sq_at(qp, qp->sq_count);

	/* A slot never posted into is still the mapping's zero fill (no
	 * inline buffer): not read before it is written, which would cost a
	 * second page fault, the zero page's, on a connection's first Send
	 * (issue 16 part J). */
	if ((uint32_t)(w - qp->sq) >= qp->sq_touched)
		qp->sq_touched = (uint32_t)(w - qp->sq) + 1;
	else
		rr_free(qp->ctx->env, w->inline_buf);
	/* everything up to body but the iovec array (iovcnt rules it) */
	memset(w, 0, offsetof(struct soft_wqe, iov));
	memset(&w->iovcnt, 0, offsetof(struct soft_wqe, body) - offsetof(struct soft_wqe, iovcnt));
	w->wr_id = wr->wr_id;
	w->op = wr->opcode;
	w->flags = wr->flags;
	w->signaled = (wr->flags & RPCRDMA_SEND_SIGNALED) || qp->base.attr.sq_sig_all;
	return w;
}

/* tx_lock held: WQE @w, the next to send, whose one FPDU (@len bytes) is in
 * txcopy and of which the socket took @n bytes (or -errno): taken whole,
 * it is done and completed here; a reset ends the QP (as in the batch
 * loop); otherwise it is left as the batch loop's one-buffer batch, less
 * what went, which that loop finishes (or fails) as it would its own. */
static void tx_one_end(struct soft_qp *qp, struct soft_wqe *w, size_t len, ssize_t n)
{
	qp->tx_msn[RR_QN_SEND]++;
	qp->sq_next++;
	qp->tx_one++;
	if (n == (ssize_t)len) {
		w->state = WQE_DONE;
		w->byte_len = w->len;
		rr_soft_sq_complete_locked(qp);
		return;
	}
	w->state = WQE_INFLIGHT;
	qp->tx_one_left++;
	if (n < 0 && n != -EAGAIN) {
		/* reset: never retried, the QP ends (as in the batch loop) */
		qp->last_err = (int)n;
		rr_soft_qp_error_tx_locked(qp, NULL);
		return;
	}
	if (n < 0)
		n = 0;
	qp->biov[0] = (struct iovec){qp->txcopy + n, len - (size_t)n};
	qp->bcnt = 1;
	qp->bpos = 0;
	qp->bnf = 1;
	qp->bend[0] = 1;
	qp->bpart = n > 0;
	qp->bnc_used = 0;
	qp->bnc_ok = false;
	rr_soft_qp_tx_locked(qp);
}

/* The layout by use (soft.h, issue 16 part CU), on the QP's 64-byte
 * aligned block (objects.c): what a Send and a Receive both read in obj's
 * second line; a message's receive fields and the parser's Send fields in
 * four lines from rx_lock; a Send's in three from tx_lock: a Send
 * without a WQE (tx_send_bare) in the first, and the lkey cache's hit
 * fields in the second. */
_Static_assert(_Alignof(struct soft_qp) == 64, "soft_qp: line-aligned");
_Static_assert(offsetof(struct soft_qp, ctx) / 64 == 2 &&
		       (offsetof(struct soft_qp, tx_send_max) + sizeof(uint32_t) - 1) / 64 == 2,
	       "soft_qp: the shared per-message fields beyond obj's second line");
_Static_assert(offsetof(struct soft_qp, rx_lock) % 64 == 0 &&
		       offsetof(struct soft_qp, rx) + offsetof(struct rr_ddp_rx, commit) -
				       offsetof(struct soft_qp, rx_lock) <= 4 * 64,
	       "soft_qp: a Receive's fields beyond four cache lines");
_Static_assert(offsetof(struct soft_qp, srq_cur.iov[1]) - offsetof(struct soft_qp, srq_cur) <= 64 &&
		       offsetof(struct soft_qp, srq_cur) % 64 <= 64 - 32,
	       "soft_qp: an SRQ Receive's one-SGE fields beyond a cache line");
_Static_assert(offsetof(struct soft_qp, sq_lc) - offsetof(struct soft_qp, tx_lock) == 64 &&
		       offsetof(struct soft_qp, tx_bare) + sizeof(uint64_t) -
				       offsetof(struct soft_qp, tx_lock) <= 64 &&
		       offsetof(struct soft_qp, tx_one_left) + sizeof(uint64_t) -
				       offsetof(struct soft_qp, tx_lock) <= 3 * 64,
	       "soft_qp: a Send's fields beyond three cache lines");

/* tx_lock held: whether the transmit side is idle (nothing batched or
 * being segmented, no Read/Commit response or Terminate waiting). */
static bool tx_idle(const struct soft_qp *qp)
{
	return !qp->bcnt && !qp->msg_active && !qp->term_pending && !qp->want_out &&
	       qp->irq_sent == qp->irq_count;
}

/* tx_lock held, QP in RTS: the last WQE posted, when the transmit side is
 * idle and every earlier WQE sent, and it is a Send or Send With
 * Invalidate whose one FPDU fits txcopy (tx_copy_max): built in one pass
 * into txcopy (rr_ddp_tx_one: the bytes the batch loop would write, one
 * small untagged FPDU copied whole) and written with one send(2), then
 * tx_one_end. false: the batch loop's turn, nothing changed. */
static bool tx_one_fast(struct soft_qp *qp)
{
	struct soft_wqe *w;
	size_t len;

	uint8_t fp[SOFT_TX_COPY_MAX];
	ssize_t n;

	if (!tx_idle(qp) || qp->sq_next + 1 != qp->sq_count)
		return false;
	w = sq_at(qp, qp->sq_next);
	if (w->state != WQE_QUEUED || (w->op != RPCRDMA_WR_SEND && w->op != RPCRDMA_WR_SEND_WITH_INV) ||
	    ((w->flags & RPCRDMA_SEND_FENCE) && qp->orq_out))
		return false;
	len = rr_ddp_tx_one(send_op(w->op, w->flags), RR_QN_SEND, qp->tx_msn[RR_QN_SEND],
			    w->op == RPCRDMA_WR_SEND_WITH_INV ? w->stag : 0, w->iov, w->iovcnt, qp->crc,
			    qp->fpdu_max, fp, qp->ctx->tx_copy_max);
	if (!len)
		return false;
	n = rr_soft_sock_writev(qp->obj.fd, &(struct iovec){fp, len}, 1);
	if (n != (ssize_t)len)
		memcpy(qp->txcopy, fp, len); /* the batch loop sends the rest */
	tx_one_end(qp, w, len, n);
	return true;
}

/* tx_lock held, QP in RTS: @wr, posted alone, a Send or Send With
 * Invalidate (not inline), on an empty send queue with the transmit side
 * idle, whose one FPDU fits txcopy: its SGEs checked as a WQE's are
 * (sge_resolve), the FPDU built in one pass and written with one send(2).
 * Taken whole by the socket, the Send is done and takes no WQE:
 * unsignaled it has no completion to make; signaled (or on a QP that
 * signals all) its completion is pushed now, the one
 * rr_soft_sq_complete_locked would push for its WQE at this point (the
 * queue was empty: nothing of this QP's send queue is older). Otherwise it
 * becomes the WQE it would have been, ended by tx_one_end. false: nothing
 * done, the WQE path's turn (an SGE that fails its check completes in
 * error there). Its caller (rr_soft_post_send1, the post_send1 op) has
 * the shape checked: a Send or Send With Invalidate of one SGE, not
 * inline, alone (rr_soft_post_send tests it; the library's own lone Send
 * vouches for it, rdma/post_own.h): its one SGE resolved without the
 * general loop (sge_resolve_one, as sge_resolve does for one). Inlined into
 * rr_soft_post_send1, its one caller: one call, one set of saved
 * registers per Send less. */
static inline __attribute__((always_inline)) bool tx_send_bare(struct soft_qp *qp,
								const struct rpcrdma_send_wr *wr)
{
	struct iovec iov[1];
	/* the FPDU, built on the stack (warm), not in the QP's txcopy (a
	 * connection's own lines, cold when many take turns: issue 16 part
	 * CU); copied there only when the socket does not take it whole */
	uint8_t fp[SOFT_TX_COPY_MAX];
	struct soft_wqe *w;
	unsigned cnt;
	uint32_t tot, inv = wr->opcode == RPCRDMA_WR_SEND_WITH_INV ? wr->u.send.invalidate_stag : 0;
	size_t len;
	ssize_t n;

	if (qp->sq_count || !qp->sq_cap || !tx_idle(qp))
		return false;
	if (sge_resolve_one(&qp->ctx->mrt, &qp->pd->base, &qp->sq_lc, wr->sg_list, 0, iov, &cnt,
			    &tot))
		return false;
	/* one piece (the transport's every Send) that fits one FPDU and
	 * txcopy: built without rr_ddp_tx_one's checks, which the op and the
	 * limit stand for (the same bytes: test ddp_tx_send1_as_tx_one) */
	if (cnt <= 1 && tot <= qp->tx_send_max)
		len = rr_ddp_tx_send1(send_op(wr->opcode, wr->flags), qp->tx_msn[RR_QN_SEND], inv,
				      cnt ? iov[0].iov_base : NULL, tot, qp->crc, fp);
	else
		len = rr_ddp_tx_one(send_op(wr->opcode, wr->flags), RR_QN_SEND,
				    qp->tx_msn[RR_QN_SEND], inv, iov, cnt, qp->crc, qp->fpdu_max,
				    fp, qp->ctx->tx_copy_max);
	if (!len)
		return false;
	n = rr_soft_sock_writev(qp->obj.fd, &(struct iovec){fp, len}, 1);
	if (n == (ssize_t)len) {
		qp->tx_msn[RR_QN_SEND]++;
		qp->tx_one++;
		qp->tx_bare++;
		if ((wr->flags & RPCRDMA_SEND_SIGNALED) || qp->base.attr.sq_sig_all) {
			struct rpcrdma_wc wc = {.wr_id = wr->wr_id,
						.status = RPCRDMA_WC_SUCCESS,
						.opcode = RPCRDMA_WC_SEND,
						.byte_len = tot,
						.qp = RR_PUB(qp, &qp->base)};

			rr_soft_cq_push(qp->scq, &wc);
		}
		return true;
	}
	memcpy(qp->txcopy, fp, len); /* the batch loop sends the rest */
	w = wqe_take(qp, wr);
	memcpy(w->iov, iov, sizeof(iov[0]) * cnt);
	w->iovcnt = cnt;
	w->len = tot;
	w->stag = inv;
	qp->sq_count++;
	tx_one_end(qp, w, len, n);
	return true;
}

/* A memory window bind into WQE @w: executed at post time, so that the new
 * STag is known when post_send returns (rdma.h); the WQE is finished (with
 * RPCRDMA_WC_MW_BIND_ERR when the bind failed). */
static void wqe_bind(struct soft_qp *qp, struct soft_wqe *w, const struct rpcrdma_send_wr *wr)
{
	uint32_t stag;
	uint64_t to;
	int r;

	w->mw = RR_BASE(mw, wr->u.bind.mw);
	w->mr = RR_BASE(mr, wr->u.bind.mr);
	w->bind_addr = wr->u.bind.addr;
	w->bind_len = wr->u.bind.length;
	w->bind_access = wr->u.bind.access;
	stag = w->mw->rkey;
	to = rr_mrt_random_to(&qp->ctx->mrt, w->bind_addr, w->bind_len);
	r = rr_mrt_mw_bind(&qp->ctx->mrt, &stag, w->mr->lkey, w->bind_addr, w->bind_len,
			   w->bind_access, &qp->pd->base, &qp->base, to);
	if (r) {
		w->status = RPCRDMA_WC_MW_BIND_ERR;
	} else {
		w->mw->rkey = stag;
		w->mw->to = to;
		atomic_fetch_add_explicit(&soft_counters.mw_binds, 1, memory_order_relaxed);
	}
	w->state = WQE_DONE;
}

/* tx_lock held: the chain @wr posted as work requests (each checked
 * against the QP's state and room, its WQE built), then the transmit side
 * run (tx_one_fast, else the batch loop). 0 or the first refusal's errno
 * (*@bad, when @bad is not NULL, the refused work request). Out of line:
 * the lone Send's path (tx_send_bare) of both post ops keeps its frame
 * free of the loop's registers. */
static __attribute__((noinline)) int post_send_wqes(struct soft_qp *qp, struct rpcrdma_send_wr *wr,
						    struct rpcrdma_send_wr **bad)
{
	int ret = 0;

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
		w = wqe_take(qp, wr);
		switch (wr->opcode) {
		case RPCRDMA_WR_SEND:
		case RPCRDMA_WR_SEND_WITH_INV:
		case RPCRDMA_WR_RDMA_WRITE:
			r = wqe_send_write(qp, w, wr);
			break;
		case RPCRDMA_WR_RDMA_READ:
			wqe_read(qp, w, wr);
			break;
		case RPCRDMA_WR_RDMA_COMMIT:
			r = wqe_commit(qp, w, wr);
			break;
		case RPCRDMA_WR_BIND_MW:
			wqe_bind(qp, w, wr);
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
	if (qp->state != QPS_RTS || !tx_one_fast(qp))
		rr_soft_qp_tx_locked(qp);
	return ret;
}

/* The post_send1 op (provider.h): @wr, a lone Send or Send With
 * Invalidate of one SGE, not inline (its caller
 * vouches for the shape: rr_soft_post_send below, or the library's own
 * lone Send, rdma/post_own.h), without a WQE when it can
 * (tx_send_bare), else as a work request (post_send_wqes). The one body
 * of a lone Send for both ops. */
int rr_soft_post_send1(struct rr_qp *base, struct rpcrdma_send_wr *wr)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	int ret;

	rr_lock(&qp->tx_lock);
	if (RR_LIKELY(qp->state == QPS_RTS) && tx_send_bare(qp, wr)) {
		rr_unlock(&qp->tx_lock);
		return 0;
	}
	ret = post_send_wqes(qp, wr, NULL);
	rr_unlock(&qp->tx_lock);
	return ret;
}

/* A lone Send or Send With Invalidate of one SGE, not inline (the shape
 * rr_soft_post_send1 takes): that op, its refusal's *@bad set here;
 * anything else as work requests (a lone Send of another SGE count too:
 * through its WQE, in one pass by tx_one_fast when it can). */
int rr_soft_post_send(struct rr_qp *base, struct rpcrdma_send_wr *wr, struct rpcrdma_send_wr **bad)
{
	struct soft_qp *qp = RR_CONTAINER_OF(base, struct soft_qp, base);
	int ret;

	if (!wr->next && (wr->opcode == RPCRDMA_WR_SEND || wr->opcode == RPCRDMA_WR_SEND_WITH_INV) &&
	    !(wr->flags & RPCRDMA_SEND_INLINE) && wr->num_sge == 1) {
		ret = rr_soft_post_send1(base, wr);
		if (ret && bad)
			*bad = wr;
		return ret;
	}
	rr_lock(&qp->tx_lock);
	ret = post_send_wqes(qp, wr, bad);
	rr_unlock(&qp->tx_lock);
	return ret;
}

/* -------------------------------------------------------- transmit -- */

/* Builds the QP's Terminate from @t (tx_lock held), unless one is pending
 * already: the QP ends with the first error it found. Each Terminate built
 * takes the next MSN of queue 2, so a second one sent in place of the
 * first would arrive with a gap the peer takes for an MSN error (RFC 5041
 * 5.1; fuzz_soft_rx found a pending Invalid STag Terminate overwritten by
 * a receive error's). */
void rr_soft_term_set(struct soft_qp *qp, const struct rr_term *t)
{
	if (qp->term_pending)
		return;
	qp->term_len = rr_ddp_build_terminate(t, qp->tx_msn[RR_QN_TERM]++, qp->crc, qp->term_fpdu);
}

/* The Terminate for a Read or Commit Request whose memory went away after
 * it arrived (RDMAP, Remote Protection Error, @ecode): Invalid STag when it
 * was deregistered (what an unknown STag draws on arrival), Base or bounds
 * when the file of durable memory no longer holds it. Sent after what is
 * already batched, then the QP ends (tx_lock held). */
static void tx_fail_term(struct soft_qp *qp, uint8_t ecode)
{
	struct rr_term term;

	memset(&term, 0, sizeof(term));
	term.layer = RR_TL_RDMAP;
	term.etype = RR_RDMAP_ET_PROTECTION;
	term.ecode = ecode;
	rr_soft_term_set(qp, &term);
	qp->term_pending = true;
	qp->term_fatal = true;
}

/* Whether the file of a Read Response's durable source holds the bytes
 * asked for when the response starts (the peer gets a Terminate, Base or
 * bounds, before any byte when not). The bytes are then copied from the
 * file batch by batch (tx_bounce), never read through the mapping, which
 * faults (SIGBUS) past the end of a file that shrank (docs/security.md
 * "Durable regions"). */
static bool tx_irq_src_ok(const struct soft_irqe *e)
{
	struct stat st;
	uint64_t end = e->doff + e->len;

	if (!e->durable || e->commit)
		return true;
	return fstat(e->dfd, &st) == 0 && st.st_size >= 0 && (uint64_t)st.st_size >= end;
}

static _Atomic(rr_soft_durable_hook_fn) durable_hook;

void rr_soft_test_set_durable_hook(rr_soft_durable_hook_fn fn)
{
	atomic_store(&durable_hook, fn);
}

/* Before the next FPDU of the durable Read Response @e (the active
 * message) is built: its payload from qp->msg.done on must be in the bounce
 * buffer. When it is not, as much of it as this batch's share of the
 * bounce holds (whole FPDUs) is copied from the file now with pread, and
 * the message is pointed at the copy: the CRC is computed over, and the
 * socket sent from, the same bytes, which no truncation can take away. 1:
 * build the FPDU; 0: no room left in this batch (send it first); -1: the
 * file no longer holds the bytes (it shrank): the Terminate (RDMAP, Remote
 * Protection Error, Base or bounds) follows what is batched and the message
 * ends (tx_lock held). */
_Static_assert(SOFT_BOUNCE >= RR_ULPDU_MAX, "the bounce holds an FPDU's payload");

static int tx_bounce(struct soft_qp *qp, struct soft_irqe *e)
{
	size_t done = qp->msg.done, left = qp->msg.total - done;
	size_t pay = rr_ddp_seg_payload(RR_HDR_TAGGED, qp->fpdu_max);
	size_t next = RR_MIN(left, pay), room = SOFT_BOUNCE - qp->bnc_used, n, got = 0;
	rr_soft_durable_hook_fn hook;

	if (!left || (qp->bnc_ok && done + next <= qp->bnc_end))
		return 1;
	n = left <= room ? left : room - room % pay;
	if (n < next)
		return 0;   /* never with an empty batch: SOFT_BOUNCE >= pay */
	hook = atomic_load(&durable_hook);
	if (hook)
		hook(qp);
	while (got < n) {
		ssize_t k = pread(e->dfd, qp->bnc + qp->bnc_used + got, n - got,
				  (off_t)(e->doff + done + got));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	if (got < n) {
		qp->msg_active = false;
		tx_fail_term(qp, RR_RDMAP_EC_BOUNDS);
		return -1;
	}
	e->iov0 = (struct iovec){qp->bnc + qp->bnc_used, n};
	rr_ddp_txmsg_rebase(&qp->msg, &e->iov0, 1);
	qp->bnc_used += n;
	qp->bnc_end = done + n;
	qp->bnc_ok = true;
	return 1;
}

/* Starts the Commit Response to the peer's Commit Request @e (draft 3.2.3:
 * everything placed before the request is in memory already, in-order
 * stream; it is made durable now). false: nothing to send (its memory was
 * deregistered: the QP ends with a Terminate). */
static bool tx_start_commit_resp(struct soft_qp *qp, struct soft_irqe *e)
{
	struct rr_mrt *t = &qp->ctx->mrt;
	struct rr_commit_resp resp = {.id = e->commit_id, .status = SOFT_COMMIT_OK};
	int r;

	for (unsigned i = 0; i < e->nregions; i++) {
		if (!e->rlen[i])
			continue;
		/* still registered? (checked on arrival too) */
		if (rr_mrt_check(t, e->creg[i].stag, e->creg[i].to, e->creg[i].len,
				 RPCRDMA_ACCESS_REMOTE_WRITE, &qp->pd->base, &qp->base, &e->ref[i])) {
			tx_fail_term(qp, RR_RDMAP_EC_INVALID_STAG);
			return false;
		}
		if (!e->ref[i].durable) {
			resp.status = SOFT_COMMIT_NOT_DURABLE;
			continue;
		}
		r = rr_mrt_make_durable(&e->ref[i], e->rlen[i]);
		if (r == -ERANGE)
			resp.status = SOFT_COMMIT_PAST_EOF;
		else if (r)
			resp.status = SOFT_COMMIT_FLUSH_FAILED;
	}
	rr_rdmap_commit_resp_encode(&resp, e->body);
	e->iov0 = (struct iovec){e->body, RR_COMMIT_RESP_BODY};
	qp->msg_is_irq = true;
	qp->msg_active = true;
	return rr_ddp_txmsg_untagged(&qp->msg, RR_OP_COMMIT_RESP, RR_QN_RESP,
				     qp->tx_msn[RR_QN_RESP]++, 0, &e->iov0, 1) == 0;
}

/* Starts the Read Response to the peer's Read Request @e, from its source
 * resolved now. false: nothing to send (its memory was deregistered: the QP
 * ends with a Terminate). */
static bool tx_start_read_resp(struct soft_qp *qp, struct soft_irqe *e)
{
	struct rr_mrt *t = &qp->ctx->mrt;
	struct rr_mrt_ref ref;

	e->src = NULL;
	if (e->len) {
		/* the memory is read now, so it must still be registered */
		if (rr_mrt_check(t, e->src_stag, e->src_to, e->len, RPCRDMA_ACCESS_REMOTE_READ,
				 &qp->pd->base, &qp->base, &ref)) {
			tx_fail_term(qp, RR_RDMAP_EC_INVALID_STAG);
			return false;
		}
		e->src = ref.ptr;
		e->durable = ref.durable;
		e->dfd = ref.durable_fd;
		e->doff = ref.durable_offset;
		if (!tx_irq_src_ok(e)) {
			tx_fail_term(qp, RR_RDMAP_EC_BOUNDS);
			return false;
		}
		if (e->durable && !qp->bnc) {
			qp->bnc = rr_alloc(qp->ctx->env, SOFT_BOUNCE);
			if (!qp->bnc) {
				/* no memory to copy it through: not served */
				tx_fail_term(qp, RR_RDMAP_EC_UNSPECIFIED);
				return false;
			}
		}
	}
	qp->bnc_ok = false;
	e->iov0 = (struct iovec){e->src, e->len};
	qp->msg_is_irq = true;
	qp->msg_active = true;
	return rr_ddp_txmsg_tagged(&qp->msg, RR_OP_READ_RESP, e->sink_stag, e->sink_to, &e->iov0,
				   e->len ? 1 : 0) == 0;
}

/* Starts the next message: responses to the peer's Reads/Commits first
 * (answered in request order, RFC 5040 5.3), then the send queue in order.
 * Returns false when nothing can be sent now. */
static bool tx_pick(struct soft_qp *qp)
{
	if (qp->term_pending)
		return false;   /* the QP ends after its Terminate */
	if (qp->irq_sent < qp->irq_count) {
		struct soft_irqe *e = &qp->irq[ring_idx(qp->irq_head, qp->irq_sent, qp->irq_cap)];

		return e->commit ? tx_start_commit_resp(qp, e) : tx_start_read_resp(qp, e);
	}
	while (qp->sq_next < qp->sq_count) {
		struct soft_wqe *w = sq_at(qp, qp->sq_next);
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
			if (!r) /* a segment being placed through it is cut */
				rr_soft_place_fence(qp->ctx, w->stag);
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
			r = rr_ddp_txmsg_untagged(&qp->msg, send_op(w->op, w->flags), RR_QN_SEND, qp->tx_msn[RR_QN_SEND]++,
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

/* tx_lock held, the batch empty (nothing in biov or fpdu is in use): the
 * full batch's arrays (SOFT_BATCH_FPDUS FPDUs, SOFT_BATCH_IOV iovecs) in
 * place of the first ones in the QP's block, asked for once; without
 * memory the first ones stay (the same bytes go, in more writes). */
static void batch_grow(struct soft_qp *qp)
{
	size_t ioff = ((sizeof(struct rr_fpdu) * SOFT_BATCH_FPDUS) + 63u) & ~(size_t)63u;
	uint8_t *b = rr_alloc(qp->ctx->env, ioff + sizeof(struct iovec) * SOFT_BATCH_IOV);

	qp->bgrow = false;
	if (!b)
		return;
	qp->bbig = b;
	qp->fpdu = (struct rr_fpdu *)b;
	qp->biov = (struct iovec *)(b + ioff);
	qp->bfcap = SOFT_BATCH_FPDUS;
}

/* tx_lock held: a new batch, nothing in it yet: the bounce is free, and
 * the full arrays are taken if the last batch asked for them. Returns the
 * batch's FPDU limit (qp->bfcap, unchanged until the next batch). */
static inline unsigned batch_start(struct soft_qp *qp)
{
	qp->bnc_used = 0;
	qp->bnc_ok = false;
	if (qp->bgrow)
		batch_grow(qp);
	return qp->bfcap;
}

/* tx_lock held, the batch of @nf FPDUs built, @fcap its limit: the first
 * arrays full with more to send (the rest of a message, more work requests
 * or Read Responses) ask for the full ones for the next batch. The first
 * arrays are full exactly when nf == fcap (their iovecs cannot run out
 * first: BATCH_FIRST_IOV_ROOM below), so the common case, a batch short of
 * its limit, is one compare of two registers (issue 16 part CK). */
static inline void batch_filled(struct soft_qp *qp, unsigned nf, unsigned fcap)
{
	if (nf == fcap && !qp->bbig &&
	    (qp->msg_active || qp->sq_next < qp->sq_count || qp->irq_sent < qp->irq_count))
		qp->bgrow = true;
}

/* The batch loop's iovec bound is the full arrays' (a constant): a batch in
 * the first arrays stops at SOFT_BATCH_FPDUS_FIRST FPDUs of at most
 * RR_FPDU_MAX_IOV iovecs each, which their iovecs hold (the batch starts
 * empty: bcnt is 0 at batch_start), so their own iovec bound would never
 * be the one reached. */
_Static_assert(SOFT_BATCH_IOV_FIRST >= SOFT_BATCH_FPDUS_FIRST * RR_FPDU_MAX_IOV,
	       "BATCH_FIRST_IOV_ROOM: the first iovecs hold the first FPDUs' pieces");
_Static_assert(SOFT_BATCH_IOV_FIRST <= SOFT_BATCH_IOV && SOFT_BATCH_FPDUS_FIRST <= SOFT_BATCH_FPDUS,
	       "the first arrays are the smaller");

void rr_soft_qp_tx_locked(struct soft_qp *qp)
{
	for (;;) {
		unsigned nf = 0, fcap;

		if (qp->state != QPS_RTS)
			return;
		while (qp->bpos < qp->bcnt) {
			ssize_t n = rr_soft_sock_writev(qp->obj.fd, qp->biov + qp->bpos,
							RR_MIN(qp->bcnt - qp->bpos, 1024u));

			if (n == -EAGAIN) {
				if (!qp->want_out)
					rr_soft_want_out(qp, true);
				return;
			}
			if (n < 0) {
				/* reset: never retried, the QP ends */
				qp->last_err = (int)n;
				rr_soft_qp_error_tx_locked(qp, NULL);
				return;
			}
			while (n > 0) {
				struct iovec *v = &qp->biov[qp->bpos];

				if ((size_t)n >= v->iov_len) {
					n -= (ssize_t)v->iov_len;
					qp->bpos++;
					qp->bpart = false;
				} else {
					v->iov_base = (uint8_t *)v->iov_base + n;
					v->iov_len -= (size_t)n;
					qp->bpart = true;
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
			if (!qp->irq_count)
				qp->irq_head = 0;   /* as the send queue */
			qp->b_irq_done = 0;
			qp->bcnt = qp->bpos = qp->bnf = 0;
			rr_soft_sq_complete_locked(qp);
		}
		if (qp->term_pending) {
			struct iovec v = {qp->term_fpdu, qp->term_len};

			(void)rr_soft_sock_writev(qp->obj.fd, &v, 1);
			qp->term_pending = false;
			if (qp->term_fatal)
				rr_soft_qp_error_tx_locked(qp, NULL);
			return;
		}
		fcap = batch_start(qp);
		while (nf < fcap && qp->bcnt + RR_FPDU_MAX_IOV <= SOFT_BATCH_IOV) {
			struct rr_fpdu *f = &qp->fpdu[nf];
			int r;

			if (!qp->msg_active && !tx_pick(qp))
				break;
			if (qp->msg_is_irq) {
				struct soft_irqe *e =
					&qp->irq[ring_idx(qp->irq_head, qp->irq_sent, qp->irq_cap)];

				r = e->durable && !e->commit ? tx_bounce(qp, e) : 1;
				if (r == 0)
					break;
				if (r < 0)
					continue; /* the Terminate: nothing more is picked */
			}
			r = rr_ddp_tx_next(&qp->msg, qp->crc, qp->fpdu_max, f);
			if (r == 1) {
				memcpy(qp->biov + qp->bcnt, f->iov, sizeof(*f->iov) * f->iovcnt);
				qp->bcnt += f->iovcnt;
				qp->bend[nf] = (uint16_t)qp->bcnt;
				nf++;
				qp->bnf = nf;
			}
			if (r == 0 || f->last)
				tx_msg_done(qp);
		}
		batch_filled(qp, nf, fcap);
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
			qp->bend[0] = 1;
		}
		if (!qp->bcnt) {
			bool failed;

			if (qp->term_pending)
				continue;   /* nothing batched before it: send it now */
			/* looked at before the completions pop the failed WQE */
			failed = sq_failed(qp);
			rr_soft_sq_complete_locked(qp);
			if (qp->want_out)
				rr_soft_want_out(qp, false);
			if (failed)
				rr_soft_qp_error_tx_locked(qp, NULL);
			return;
		}
	}
}

/* ----------------------------------------------- memory going away -- */

static bool iov_hits(const struct iovec *v, unsigned cnt, size_t skip, uintptr_t lo, uintptr_t hi)
{
	for (unsigned i = 0; i < cnt; i++, skip = 0)
		if (v[i].iov_len > skip &&
		    range_hits((const uint8_t *)v[i].iov_base + skip, v[i].iov_len - skip, lo, hi))
			return true;
	return false;
}

/* Whether transmitting still needs bytes of [@lo, @hi): unsent batch
 * entries, the rest of the message being segmented, Sends and Writes not
 * yet started. (Queued Read and Commit Requests are checked again when
 * their response starts, tx_pick.) tx_lock held. */
bool rr_soft_tx_needs(struct soft_qp *qp, uintptr_t lo, uintptr_t hi)
{
	if (qp->bpos < qp->bcnt && iov_hits(qp->biov + qp->bpos, qp->bcnt - qp->bpos, 0, lo, hi))
		return true;
	if (qp->msg_active && qp->msg.iov_idx < qp->msg.iovcnt &&
	    iov_hits(qp->msg.iov + qp->msg.iov_idx, qp->msg.iovcnt - qp->msg.iov_idx,
		     qp->msg.iov_off, lo, hi))
		return true;
	if (qp->msg_active && qp->msg_is_irq) {
		/* a durable Read Response is sent from the bounce buffer, its
		 * rest still read from the registration's file */
		const struct soft_irqe *e = &qp->irq[ring_idx(qp->irq_head, qp->irq_sent, qp->irq_cap)];

		if (e->durable && !e->commit && qp->msg.done < e->len &&
		    range_hits(e->src + qp->msg.done, e->len - qp->msg.done, lo, hi))
			return true;
	}
	for (uint32_t i = qp->sq_next; i < qp->sq_count; i++) {
		struct soft_wqe *w = sq_at(qp, i);

		if (w->state != WQE_DONE && !w->inline_buf &&
		    iov_hits(w->iov, w->iovcnt, 0, lo, hi))
			return true;
	}
	return false;
}

/* Writes @cnt entries of @v now, as far as the socket takes them without
 * waiting: true when all went. */
static bool tx_write_now(struct soft_qp *qp, struct iovec *v, unsigned cnt)
{
	while (cnt) {
		ssize_t n = rr_soft_sock_writev(qp->obj.fd, v, RR_MIN(cnt, 1024u));

		if (n <= 0)
			return false;
		while (cnt && (size_t)n >= v->iov_len) {
			n -= (ssize_t)v->iov_len;
			v++;
			cnt--;
		}
		if (cnt && n) {
			v->iov_base = (uint8_t *)v->iov_base + n;
			v->iov_len -= (size_t)n;
		}
	}
	return true;
}

/* Ends the batch being sent (tx_lock held): the FPDU half on the wire is
 * finished now, as far as the socket takes it without waiting, the rest of
 * the batch is never sent. True when the stream is then at an FPDU
 * boundary, so that a Terminate may follow (RFC 5044 7: an FPDU is never
 * interleaved with another). The batch's memory must still be valid. */
bool rr_soft_tx_end_batch(struct soft_qp *qp)
{
	bool framed = true;

	if (qp->bpos < qp->bcnt) {
		unsigned k = 0, start;

		while (k < qp->bnf && qp->bend[k] <= qp->bpos)
			k++;
		start = k ? qp->bend[k - 1] : 0;
		if (k < qp->bnf && (qp->bpos > start || qp->bpart))
			framed = tx_write_now(qp, qp->biov + qp->bpos, qp->bend[k] - qp->bpos);
	}
	qp->bcnt = qp->bpos = qp->bnf = 0;
	qp->bpart = false;
	qp->msg_active = false;
	return framed;
}

/* Transmit needs memory that is being deregistered (tx_lock held, QP in
 * RTS): the FPDU half on the wire is finished from that memory now (it is
 * still valid: the deregistration waits for this), then the Terminate
 * (Invalid STag), both as far as the socket takes them without waiting;
 * the rest is never sent and the QP ends. */
void rr_soft_tx_revoke(struct soft_qp *qp)
{
	if (rr_soft_tx_end_batch(qp)) {
		struct iovec v;

		tx_fail_term(qp, RR_RDMAP_EC_INVALID_STAG);
		v = (struct iovec){qp->term_fpdu, qp->term_len};
		(void)tx_write_now(qp, &v, 1);
		qp->term_pending = false;
	}
	rr_soft_qp_error_tx_locked(qp, NULL);
}

/* --------------------------------------------- the placement fence -- */

/* The fence's list holds the QPs in a tagged message (linked at its first
 * header, unlinked after its last segment or when the QP is destroyed), so
 * that a fence looks at those only, not at every QP of the context. Only
 * the receive side of @qp links or unlinks it (rx_lock or fast_rd), so
 * place_linked is read there without place_lock; a fence never changes
 * it. */
void rr_soft_place_link(struct soft_qp *qp)
{
	struct soft_ctx *c = qp->ctx;

	if (qp->place_linked)
		return;
	pthread_mutex_lock(&c->place_lock);
	qp->place_prev = NULL;
	qp->place_next = c->placing;
	if (c->placing)
		c->placing->place_prev = qp;
	c->placing = qp;
	qp->place_linked = true;
	pthread_mutex_unlock(&c->place_lock);
}

void rr_soft_place_unlink(struct soft_qp *qp)
{
	struct soft_ctx *c = qp->ctx;

	if (!qp->place_linked)
		return;
	pthread_mutex_lock(&c->place_lock);
	if (qp->place_prev)
		qp->place_prev->place_next = qp->place_next;
	else
		c->placing = qp->place_next;
	if (qp->place_next)
		qp->place_next->place_prev = qp->place_prev;
	qp->place_next = qp->place_prev = NULL;
	qp->place_linked = false;
	pthread_mutex_unlock(&c->place_lock);
}

/* rr_soft_place_begin's piece that finds a fence came since its segment's
 * check (or its QP not linked): linked first, then the generation read,
 * then the STag looked up. A fence whose place_lock section came before
 * the link made its generation and its invalidation visible to the read
 * and the lookup; one after it finds the QP listed with @stag published. */
static int place_begin_slow(struct soft_qp *qp, uint8_t op, uint32_t stag, uint64_t to,
			    const uint8_t *dst, size_t n)
{
	struct soft_ctx *c = qp->ctx;
	bool write = op == RR_OP_WRITE;
	struct rr_mrt_ref ref;
	uint64_t g;
	int r;

	rr_soft_place_link(qp);
	g = atomic_load(&c->place_gen);
	r = rr_mrt_check(&c->mrt, stag, to, n,
			 write ? RPCRDMA_ACCESS_REMOTE_WRITE : RR_MRT_LOCAL | RPCRDMA_ACCESS_LOCAL_WRITE,
			 &qp->pd->base, write ? &qp->base : NULL, &ref);
	if (!r && dst && !ref.durable && ref.ptr != dst)
		r = -EFAULT;
	if (r) {
		rr_soft_place_end(qp); /* a fence may be waiting for it */
		return r;
	}
	qp->place_gen = g;
	return 0;
}

/* No lock per piece: the piece publishes its STag (a sequentially
 * consistent store), then reads the fence generation (a sequentially
 * consistent load); a fence adds to the generation, then reads the STag
 * of every linked QP. Of the two, one sees the other's write first (the
 * single total order of sequentially consistent operations): either the
 * piece sees a new generation and looks its STag up again (finding it
 * invalid), or the fence sees the piece's STag and waits for it. The QP
 * was linked before its segment's generation was read (rx_tagged), so a
 * fence that came after that read looks at it. */
int rr_soft_place_begin(struct soft_qp *qp, uint8_t op, uint32_t stag, uint64_t to,
			const uint8_t *dst, size_t n)
{
	atomic_store(&qp->place_stag, stag);
	if (RR_LIKELY(qp->place_linked && atomic_load(&qp->ctx->place_gen) == qp->place_gen))
		return 0; /* the segment's check holds: no fence since */
	return place_begin_slow(qp, op, stag, to, dst, n);
}

/* The piece's end published (sequentially consistent), then the waiters
 * read: a fence counts itself a waiter before it reads the STag a last
 * time and sleeps, so either it sees the piece ended or the piece sees it
 * and wakes it (under place_lock, which the fence holds until it sleeps). */
void rr_soft_place_end(struct soft_qp *qp)
{
	struct soft_ctx *c = qp->ctx;

	atomic_store(&qp->place_stag, 0);
	if (RR_UNLIKELY(atomic_load(&c->place_waiters) != 0)) {
		pthread_mutex_lock(&c->place_lock);
		pthread_cond_broadcast(&c->place_cv);
		pthread_mutex_unlock(&c->place_lock);
	}
}

uint64_t rr_soft_place_gen(struct soft_ctx *c)
{
	return atomic_load(&c->place_gen);
}

void rr_soft_place_fence(struct soft_ctx *c, uint32_t stag)
{
	pthread_mutex_lock(&c->place_lock);
	atomic_fetch_add(&c->place_gen, 1); /* every segment checks again */
	for (;;) {
		struct soft_qp *q = c->placing;

		while (q && atomic_load(&q->place_stag) != stag)
			q = q->place_next;
		if (!q)
			break;
		/* a read or a copy in progress, holding no lock: it ends */
		atomic_fetch_add(&c->place_waiters, 1);
		if (atomic_load(&q->place_stag) == stag)
			pthread_cond_wait(&c->place_cv, &c->place_lock);
		atomic_fetch_sub(&c->place_waiters, 1);
	}
	pthread_mutex_unlock(&c->place_lock);
}
