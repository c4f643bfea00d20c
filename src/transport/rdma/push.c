/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* Push mode (draft-talpey-rdma-commit section 2) on the RDMA transport: the
 * client's RDMA Write into a region a server exposed, then RDMA Commit of
 * it, on the current connection, waited for by the caller; the server's
 * exposure of durable (or visible) regions on one connection's PD, revoked
 * or released with the connection. Commit is used only when both peers
 * advertised it (the session's negotiation) and the provider enabled it. */
#include "transport/rdma/tp_int.h"

#include "rpcrdma/push.h"

/* ---- requester: RDMA Write + RDMA Commit into a peer's region ---- */

struct tp_push_op {
	uint32_t seq;
	bool done;
	bool commit;
	enum rpcrdma_wc_status status;
	uint32_t remote_status;
	uint32_t len;
	struct tp_push_op *next;
};

/* A completion of a push WR (lock held). The Write is unsignaled when a
 * Commit follows, so a success is always the operation's last WR. An error
 * other than a Commit Status (draft 5.1 item 3: the connection stays) is
 * fatal to the connection, as every failed work request. */
void tp_push_wc(struct rr_tp_client *c, struct tp_conn *cn, const struct rpcrdma_wc *wc)
{
	uint32_t seq = (uint32_t)WRVAL(wc->wr_id);
	struct tp_push_op *op;

	for (op = c->pushes; op; op = op->next)
		if (op->seq == seq)
			break;
	if (op && !op->done) {
		op->done = true;
		op->status = wc->status;
		op->remote_status = wc->remote_status;
		if (wc->status == RPCRDMA_WC_SUCCESS) {
			if (op->len) {
				c->ep.stats.push_writes++;
				c->ep.stats.push_write_bytes += op->len;
			}
			if (op->commit)
				c->ep.stats.commits++;
		} else if (op->commit) {
			c->ep.stats.commit_errors++;
		}
		pthread_cond_broadcast(&c->ep.cond);
	}
	if (wc->status != RPCRDMA_WC_SUCCESS && wc->status != RPCRDMA_WC_COMMIT_ERR &&
	    !cn->dead && !cn->closing) {
		cn->closing = true;   /* the caller (client loop) ends it */
		if (cn->id)
			(void)rpcrdma_disconnect(cn->id);
	}
}

int rr_tp_client_commit_ok(struct rr_tp_client *c)
{
	int rc;

	pthread_mutex_lock(&c->ep.lock);
	if (!(c->ep.conf.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT))
		rc = -EOPNOTSUPP;
	else if (!c->conn || !c->conn->established || c->conn->dead || c->conn->closing)
		rc = -ENOTCONN;
	else
		rc = c->conn->commit ? 0 : -EOPNOTSUPP;
	pthread_mutex_unlock(&c->ep.lock);
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

int rr_tp_client_push(struct rr_tp_client *c, struct rr_tp_push *p)
{
	struct tp_push_op op = {0};
	struct rpcrdma_send_wr wr[2];
	struct rpcrdma_sge sge;
	struct rpcrdma_mr *mr = NULL;
	struct tp_conn *cn;
	struct tp_push_op **pp;
	uint64_t end;
	unsigned nwr = 0;
	bool waiter = false;
	int rc;

	p->wc_status = RPCRDMA_WC_GENERAL_ERR;
	p->commit_status = 0;
	if ((!p->len && !p->commit) || (p->len && !p->buf))
		return -EINVAL;
	end = tp_now_ns(&c->ep) + (uint64_t)(p->timeout_ms ? p->timeout_ms : 30000) * 1000000u;
	pthread_mutex_lock(&c->ep.lock);
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
	memset(wr, 0, sizeof(wr));
	op.seq = ++c->push_seq;
	op.commit = p->commit;
	op.len = p->len;
	if (p->len) {
		rc = rpcrdma_reg_mr_simple(cn->pd, (void *)(uintptr_t)p->buf, p->len,
					   RPCRDMA_ACCESS_LOCAL_WRITE, &mr);
		if (rc)
			goto out;
		sge = (struct rpcrdma_sge){(uint64_t)(uintptr_t)p->buf, p->len,
					   rpcrdma_mr_lkey(mr)};
		wr[nwr].wr_id = WRID(WR_PUSH, op.seq);
		wr[nwr].sg_list = &sge;
		wr[nwr].num_sge = 1;
		wr[nwr].opcode = RPCRDMA_WR_RDMA_WRITE;
		wr[nwr].flags = p->commit ? 0 : RPCRDMA_SEND_SIGNALED;
		wr[nwr].u.rdma.stag = p->stag;
		wr[nwr].u.rdma.remote_offset = p->offset;
		nwr++;
	}
	if (p->commit) {
		wr[nwr].wr_id = WRID(WR_PUSH, op.seq);
		wr[nwr].opcode = RPCRDMA_WR_RDMA_COMMIT;
		wr[nwr].flags = RPCRDMA_SEND_SIGNALED | (p->visible ? RPCRDMA_SEND_VISIBLE : 0);
		wr[nwr].u.commit.regions = &p->region;
		wr[nwr].u.commit.num_regions = 1;
		if (nwr)
			wr[nwr - 1].next = &wr[nwr];
		nwr++;
	}
	op.next = c->pushes;
	c->pushes = &op;
	rc = rpcrdma_post_send(cn->qp, wr, NULL);
	if (rc) {
		/* Nothing (or only the Write) was posted: a refused WR is an
		 * error of the connection (cl_send does the same). */
		if (rc != -EOPNOTSUPP && rc != -EINVAL && !cn->dead && !cn->closing) {
			cn->closing = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
		}
		goto unlink;
	}
	/* Wait for the last WR, receiving on this thread when nobody else
	 * does (as rr_tp_client_wait). */
	while (!op.done) {
		uint64_t t = tp_now_ns(&c->ep);

		if (c->conn != cn || cn->dead || cn->closing || c->destroying) {
			rc = -ECONNRESET;
			break;
		}
		if (t >= end) {
			/* The peer never answered: the connection is unusable
			 * for this region (and our memory must be released). */
			rc = -ETIMEDOUT;
			cn->closing = true;
			if (cn->id)
				(void)rpcrdma_disconnect(cn->id);
			break;
		}
		if (!c->waiter || waiter) {
			/* the Commit Response costs one recvmsg, not arm +
			 * poll + epoll_wait + recvmsg */
			int n;

			c->waiter = waiter = true;
			n = tp_cl_wait_once(c, cn, end - t);
			if (n < 0 && !op.done) {
				struct timespec ts;

				tp_abs_deadline(&ts, 1);   /* no busy loop on a failing wait */
				(void)pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts);
			}
		} else {
			struct timespec ts;

			tp_abs_deadline(&ts, 20);
			(void)pthread_cond_timedwait(&c->ep.cond, &c->ep.lock, &ts);
		}
	}
	if (op.done) {
		rc = push_errno(&op);
		p->wc_status = op.status;
		p->commit_status = op.remote_status;
	}
unlink:
	for (pp = &c->pushes; *pp; pp = &(*pp)->next)
		if (*pp == &op) {
			*pp = op.next;
			break;
		}
	if (waiter) {
		c->waiter = false;
		/* a wake-up per push costs a thread switch and, with spinning
		 * waiters on two CPUs, the CPU it runs on */
		if (tp_cl_needs_progress(c, cn))
			tp_wake(&c->ep);
	}
out:
	if (mr)
		(void)rpcrdma_dereg_mr(mr);
	pthread_mutex_unlock(&c->ep.lock);
	return rc;
}

/* ---- responder: regions exposed on a connection ---- */

struct tp_expo {
	uint64_t id;
	struct rpcrdma_mr *mr;
	void (*released)(void *arg);
	void *arg;
	struct tp_expo *next;
};

#define TP_EXPO_MAX 64   /* regions per connection */

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

	rc = rpcrdma_query(cn->ep->ctx, &caps);
	if (rc)
		return rc;
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
	pthread_mutex_lock(&s->ep.lock);
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
		pthread_mutex_unlock(&s->ep.lock);
		rr_free(s->ep.env, x);
		return rc;
	}
	x->id = ++s->expo_seq;
	x->released = released;
	x->arg = arg;
	x->next = cn->expo;
	cn->expo = x;
	s->ep.stats.regions_exposed++;
	*stag = rpcrdma_mr_rkey(x->mr);
	*to = rpcrdma_mr_remote_offset(x->mr);
	*id = x->id;
	pthread_mutex_unlock(&s->ep.lock);
	return 0;
}

int rr_tp_server_revoke(struct rr_tp_server *s, uint64_t id)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&s->ep.lock);
	for (struct tp_conn *cn = s->conns; cn && rc; cn = cn->next) {
		for (struct tp_expo **pp = &cn->expo; *pp; pp = &(*pp)->next) {
			struct tp_expo *x = *pp;

			if (x->id != id)
				continue;
			*pp = x->next;
			(void)rpcrdma_dereg_mr(x->mr);
			s->ep.stats.regions_released++;
			if (x->released)
				x->released(x->arg);
			rr_free(s->ep.env, x);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&s->ep.lock);
	return rc;
}

