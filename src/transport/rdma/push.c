/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Push mode (draft-talpey-rdma-commit section 2) on the RDMA transport, the
 * client's side: an RDMA Write into a region a server exposed
 * (push_region.c), then RDMA Commit of it, on the current connection,
 * waited for by the caller (completions: push_wc.c). Commit is used only
 * when both peers advertised it (the session's negotiation) and the
 * provider enabled it. */
#include "transport/rdma/tp_int.h"
#include "rdma/post_own.h"

#include "rpcrdma/push.h"



int rr_tp_client_commit_ok(struct rr_tp_client *c)
{
	int rc;

	rr_lock(&c->ep.lock);
	if (!(c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT))
		rc = -EOPNOTSUPP;
	else if (!c->conn || !c->conn->established || c->conn->dead || c->conn->closing)
		rc = -ENOTCONN;
	else
		rc = c->conn->commit ? 0 : -EOPNOTSUPP;
	rr_unlock(&c->ep.lock);
	return rc;
}

static int push_errno(const struct tp_push_op *op)
{
	switch (op->status) {
	case RPCRDMA_WC_SUCCESS:
		return 0;
	case RPCRDMA_WC_COMMIT_ERR:
		return -EIO;
	case RPCRDMA_WC_REM_ACCESS_ERR:
	case RPCRDMA_WC_LOC_PROT_ERR:
		return -EACCES;
	case RPCRDMA_WC_REM_INV_REQ_ERR:
		return -EOPNOTSUPP;
	case RPCRDMA_WC_WR_FLUSH_ERR:
	case RPCRDMA_WC_REM_ABORT_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* Registers @p's buffer in *@mr, posts its RDMA Write and/or Commit as
 * operation @op (linked in c->pushes whatever the result: the caller
 * unlinks it). A refused work request ends the connection. Lock held. */
static int push_post(struct rr_tp_client *c, struct tp_conn *cn, const struct rr_tp_push *p,
		     struct tp_push_op *op, struct rpcrdma_mr **mr)
{
	struct rpcrdma_send_wr wr[2];
	struct rpcrdma_sge sge;
	unsigned nwr = 0;
	int rc;

	memset(wr, 0, sizeof(wr));
	op->seq = ++c->push_seq;
	op->commit = p->commit;
	op->len = p->len;
	op->next = c->pushes;
	c->pushes = op;
	if (p->len) {
		rc = rpcrdma_reg_mr_simple(cn->pd, (void *)(uintptr_t)p->buf, p->len,
					   RPCRDMA_ACCESS_LOCAL_WRITE, mr);
		if (rc)
			return rc;
		sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)p->buf, p->len,
					   rpcrdma_mr_lkey(*mr)};
		wr[nwr].wr_id = WRID(WR_PUSH, op->seq);
		wr[nwr].sg_list = &sge;
		wr[nwr].num_sge = 1;
		wr[nwr].opcode = RPCRDMA_WR_RDMA_WRITE;
		wr[nwr].flags = p->commit ? 0 : RPCRDMA_SEND_SIGNALED;
		wr[nwr].u.rdma.stag = p->stag;
		wr[nwr].u.rdma.remote_offset = p->offset;
		nwr++;
	}
	if (p->commit) {
		wr[nwr].wr_id = WRID(WR_PUSH, op->seq);
		wr[nwr].opcode = RPCRDMA_WR_RDMA_COMMIT;
		wr[nwr].flags = RPCRDMA_SEND_SIGNALED | (p->visible ? RPCRDMA_SEND_VISIBLE : 0);
		wr[nwr].u.commit.regions = &p->region;
		wr[nwr].u.commit.num_regions = 1;
		if (nwr)
			wr[nwr - 1].next = &wr[nwr];
		nwr++;
	}
	rc = rr_post_send_own(cn->qp, wr);
	/* Nothing (or only the Write) was posted: a refused WR is an error of
	 * the connection (as a refused Send). */
	if (rc && rc != -EOPNOTSUPP && rc != -EINVAL && !cn->dead && !cn->closing) {
		cn->closing = true;
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
	}
	return rc;
}

void rr_tp_client_push_hook(struct rr_tp_client *c, rr_tp_push_hook_fn fn, void *arg)
{
	rr_lock(&c->ep.lock);
	c->push_hook = fn;
	c->push_hook_arg = arg;
	rr_unlock(&c->ep.lock);
}

/* Waits until @op's last work request completed, the connection went, or
 * @end (ns): receiving on this thread when nobody else does (as
 * rr_tp_client_wait; *@waiter: this thread took that role). Lock held
 * (released meanwhile: first for the test hook, when one is set). */
static int push_wait(struct rr_tp_client *c, struct tp_conn *cn, struct tp_push_op *op,
		     uint64_t end, bool *waiter)
{
	if (c->push_hook) {
		rr_tp_push_hook_fn fn = c->push_hook;

		rr_unlock(&c->ep.lock);
		fn(c->push_hook_arg);
		rr_lock(&c->ep.lock);
	}
	while (!op->done) {
		uint64_t t = tp_now_ns(&c->ep);
		struct timespec ts;

		if (c->conn != cn || cn->dead || cn->closing || c->destroying)
			return -ECONNRESET;
		if (t >= end) {
			/* The peer never answered: the connection is unusable
			 * for this region (and our memory must be released). */
			cn->closing = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
			return -ETIMEDOUT;
		}
		if ((!c->waiter || *waiter) && !rr_engine_app_driven()) {
			/* the Commit Response costs one recvmsg, not arm +
			 * poll + epoll_wait + recvmsg */
			c->waiter = *waiter = true;
			if (tp_cl_wait_once(c, cn, end - t) >= 0 || op->done)
				continue;
			tp_abs_deadline(&ts, 1);   /* no busy loop on a failing wait */
		} else {
			tp_ep_kick(&c->ep);   /* its loop serves the push */
			tp_abs_deadline(&ts, 20);
		}
		(void)rr_engine_cond_wait(&c->ep.cond, &c->ep.lock, &ts);
	}
	return 0;
}

int rr_tp_client_push(struct rr_tp_client *c, struct rr_tp_push *p)
{
	struct tp_push_op op = {0};
	struct rpcrdma_mr *mr = NULL;
	struct tp_conn *cn;
	uint64_t end;
	bool waiter = false;
	int rc;

	p->wc_status = RPCRDMA_WC_GENERAL_ERR;
	p->commit_status = 0;
	if ((!p->len && !p->commit) || (p->len && !p->buf))
		return -EINVAL;
	end = tp_now_ns(&c->ep) + (uint64_t)(p->timeout_ms ? p->timeout_ms : 30000) * 1000000u;
	rr_lock(&c->ep.lock);
	cn = c->conn;
	if (p->commit && !(c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT)) {
		rc = -EOPNOTSUPP;
		goto out;
	}
	if (!cn || !cn->established || cn->dead || cn->closing || c->destroying) {
		rc = -ENOTCONN;
		goto out;
	}
	if (p->commit && !cn->commit) {
		rc = -EOPNOTSUPP;   /* the peer did not advertise RDMA Commit */
		goto out;
	}
	rc = push_post(c, cn, p, &op, &mr);
	/* Its source's MR is in cn's PD until the end: cn is not freed
	 * before (tp_grave_sweep), even when the connection dies while this
	 * thread waits with the lock released. */
	if (mr)
		cn->pushing++;
	if (rc == 0)
		rc = push_wait(c, cn, &op, end, &waiter);
	if (rc == 0) {
		rc = push_errno(&op);
		p->wc_status = op.status;
		p->commit_status = op.remote_status;
	}
	for (struct tp_push_op **pp = &c->pushes; *pp; pp = &(*pp)->next)
		if (*pp == &op) {
			*pp = op.next;
			break;
		}
	if (waiter) {
		c->waiter = false;
		/* a wake-up per push costs a thread switch and, with spinning
		 * waiters on two CPUs, the CPU it runs on */
		if (tp_cl_needs_progress(c, cn))
			tp_ep_kick(&c->ep);
	}
out:
	if (mr) {
		(void)rpcrdma_dereg_mr(mr);
		/* a dead connection the sweeps skipped for this push: its
		 * loop frees it now */
		if (!--cn->pushing && cn->dead)
			tp_ep_kick(&c->ep);
	}
	rr_unlock(&c->ep.lock);
	return rc;
}
