/* SPDX-License-Identifier: BSD-2-Clause */
/* The rdma-core provider's connection manager (verbs_device.c has the mapping):
 * librdmacm event channels and ids behind the CM ops; address and route
 * resolution, QP creation and rdma_connect driven inside
 * rpcrdma_cm_get_event; each rdma_cm event translated to the library's
 * (vb_handle), with the IRD/ORD each side may use and the peer's private
 * data; a DISCONNECTED of a QP that an asynchronous error failed carries
 * its errno (verbs_async.c). */
#include "rdma/verbs/verbs.h"

#include <netinet/in.h>

int rr_verbs_create_channel(struct rr_context *ctx, struct rr_cm_channel **out)
{
	struct vb_ch *c = rr_zalloc(ctx->env, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->ec = rdma_create_event_channel();
	if (!c->ec) {
		rc = cm_err();
		rr_free(ctx->env, c);
		return rc;
	}
	rc = set_nonblock(c->ec->fd);
	if (rc < 0) {
		rdma_destroy_event_channel(c->ec);
		rr_free(ctx->env, c);
		return rc;
	}
	*out = &c->base;
	return 0;
}

int rr_verbs_destroy_channel(struct rr_cm_channel *ch)
{
	rdma_destroy_event_channel(VB_CH(ch)->ec);
	rr_free(ch->ctx->env, VB_CH(ch));
	return 0;
}

int rr_verbs_channel_fd(struct rr_cm_channel *ch)
{
	return VB_CH(ch)->ec->fd;
}

static struct vb_id *vb_id_new(struct rr_cm_channel *ch)
{
	return rr_zalloc(ch->ctx->env, sizeof(struct vb_id));
}

int rr_verbs_listen(struct rr_cm_channel *ch, const struct sockaddr *addr, socklen_t addrlen,
		    int backlog, void *user_ctx, struct rr_cm_id **out)
{
	struct vb_id *id = vb_id_new(ch);
	int rc;

	RR_UNUSED(addrlen);
	if (!id)
		return -ENOMEM;
	if (rdma_create_id(VB_CH(ch)->ec, &id->cm, id, RDMA_PS_TCP) != 0) {
		rc = cm_err();
		rr_free(ch->ctx->env, id);
		return rc;
	}
	rr_cm_id_init(ch, &id->base, user_ctx, NULL, true);
	if (rdma_bind_addr(id->cm, (struct sockaddr *)(uintptr_t)addr) != 0 ||
	    rdma_listen(id->cm, backlog) != 0) {
		rc = cm_err();
		rr_cm_id_dropped(ch, &id->base);
		rdma_destroy_id(id->cm);
		rr_free(ch->ctx->env, id);
		return rc;
	}
	*out = &id->base;
	return 0;
}

static void vb_fill_param(struct rdma_conn_param *cp, const struct vb_id *id, uint8_t ird,
			  uint8_t ord)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = id->pdata_len ? id->pdata : NULL;
	cp->private_data_len = id->pdata_len;
	cp->responder_resources = ird;
	cp->initiator_depth = ord;
	cp->retry_count = 6;
	cp->rnr_retry_count = 7;
}

int rr_verbs_connect(struct rr_cm_channel *ch, struct rr_qp *qp, const struct sockaddr *dst,
		     socklen_t dstlen, const struct rpcrdma_conn_param *p, void *user_ctx,
		     struct rr_cm_id **out)
{
	struct vb_ctx *c = VB_CTX(ch->ctx);
	struct vb_id *id;
	int rc;

	RR_UNUSED(dstlen);
	if (p->private_data_len > VB_PDATA_MAX)
		return -EMSGSIZE;
	id = vb_id_new(ch);
	if (!id)
		return -ENOMEM;
	id->qp = VB_QP(qp);
	id->active = true;
	id->timeout_ms = p->timeout_ms ? p->timeout_ms : VB_DEFAULT_TIMEOUT_MS;
	id->want_ird = (uint8_t)RR_MIN(p->responder_resources,
				       (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_rd_atom, 0), 255));
	id->want_ord = (uint8_t)RR_MIN(p->initiator_depth,
				       (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_init_rd_atom, 0), 255));
	id->pdata_len = (uint8_t)p->private_data_len;
	if (p->private_data_len)
		memcpy(id->pdata, p->private_data, p->private_data_len);
	if (rdma_create_id(VB_CH(ch)->ec, &id->cm, id, RDMA_PS_TCP) != 0) {
		rc = cm_err();
		rr_free(ch->ctx->env, id);
		return rc;
	}
	rr_cm_id_init(ch, &id->base, user_ctx, qp, false);
	if (rdma_resolve_addr(id->cm, (struct sockaddr *)(uintptr_t)p->src_addr,
			      (struct sockaddr *)(uintptr_t)dst,
			      (int)RR_MIN(id->timeout_ms, (uint32_t)INT32_MAX)) != 0) {
		rc = cm_err();
		rr_cm_id_dropped(ch, &id->base);
		rdma_destroy_id(id->cm);
		rr_free(ch->ctx->env, id);
		return rc;
	}
	*out = &id->base;
	return 0;
}

int rr_verbs_accept(struct rr_cm_id *bid, struct rr_qp *qp, const struct rpcrdma_conn_param *p)
{
	struct vb_id *id = VB_ID(bid);
	struct vb_ctx *c = VB_CTX(bid->ch->ctx);
	struct rdma_conn_param cp;
	int rc;

	if (p->private_data_len > VB_PDATA_MAX)
		return -EMSGSIZE;
	id->pdata_len = (uint8_t)p->private_data_len;
	if (p->private_data_len)
		memcpy(id->pdata, p->private_data, p->private_data_len);
	/* IRD: Reads we serve, at most what the peer will issue; ORD: Reads we
	 * issue, at most what the peer serves; both within the device. */
	id->ird = (uint16_t)RR_MIN(RR_MIN(p->responder_resources, id->peer_ord),
				   (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_rd_atom, 0), 255));
	id->ord = (uint16_t)RR_MIN(RR_MIN(p->initiator_depth, id->peer_ird),
				   (uint16_t)RR_MIN(RR_MAX(c->attr.max_qp_init_rd_atom, 0), 255));
	rc = rr_verbs_qp_attach(VB_QP(qp), id->cm);
	if (rc < 0)
		return rc;
	id->qp = VB_QP(qp);
	/* RPCRDMA_CONN_COMMIT on accept: both agreed, Commits may be posted */
	if ((p->flags & RPCRDMA_CONN_COMMIT) && vb_has_flush(c))
		atomic_store(&id->qp->commit_tx, true);
	vb_fill_param(&cp, id, (uint8_t)id->ird, (uint8_t)id->ord);
	if (rdma_accept(id->cm, &cp) != 0) {
		rc = cm_err();
		rr_verbs_qp_detach(id->qp, id->cm);
		id->qp = NULL;
		return rc;
	}
	return 0;
}

int rr_verbs_reject(struct rr_cm_id *bid, const void *data, uint16_t len)
{
	if (len > VB_PDATA_MAX)
		return -EMSGSIZE;
	if (rdma_reject(VB_ID(bid)->cm, data, (uint8_t)len) != 0)
		return cm_err();
	return 0;
}

int rr_verbs_disconnect(struct rr_cm_id *bid)
{
	if (rdma_disconnect(VB_ID(bid)->cm) != 0)
		return cm_err();
	return 0;
}

int rr_verbs_destroy_id(struct rr_cm_id *bid)
{
	struct vb_id *id = VB_ID(bid);

	if (id->qp)
		rr_verbs_qp_detach(id->qp, id->cm);
	if (rdma_destroy_id(id->cm) != 0)
		return cm_err();
	rr_free(bid->ch->ctx->env, id);
	return 0;
}

static int vb_copy_addr(const struct sockaddr *sa, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!sa)
		return -ENOTCONN;
	if (sa->sa_family == AF_INET)
		memcpy(ss, sa, sizeof(struct sockaddr_in));
	else if (sa->sa_family == AF_INET6)
		memcpy(ss, sa, sizeof(struct sockaddr_in6));
	else
		return -EAFNOSUPPORT;
	return 0;
}

int rr_verbs_local_addr(struct rr_cm_id *bid, struct sockaddr_storage *ss)
{
	return vb_copy_addr(rdma_get_local_addr(VB_ID(bid)->cm), ss);
}

int rr_verbs_peer_addr(struct rr_cm_id *bid, struct sockaddr_storage *ss)
{
	return vb_copy_addr(rdma_get_peer_addr(VB_ID(bid)->cm), ss);
}

/* Fills @ev with the peer's private data of @e. */
static void vb_ev_pdata(struct rpcrdma_cm_event *ev, const struct rdma_cm_event *e)
{
	uint16_t n = e->param.conn.private_data ? e->param.conn.private_data_len : 0;

	n = RR_MIN(n, (uint16_t)RPCRDMA_PRIVATE_DATA_MAX);
	ev->private_data_len = n;
	if (n)
		memcpy(ev->private_data, e->param.conn.private_data, n);
	ev->peer_ird = e->param.conn.responder_resources;
	ev->peer_ord = e->param.conn.initiator_depth;
}

static int status_or(int st, int dflt)
{
	return st < 0 ? st : dflt;
}

/* A connection request on a listener (vb_handle): a new id the consumer
 * receives with CONNECT_REQUEST (1), or rejected at once when it cannot be
 * had (0, *@destroy_new set). */
static int vb_on_connect_request(struct vb_ch *ch, struct rdma_cm_event *e,
				 struct rpcrdma_cm_event *ev, struct rdma_cm_id **destroy_new)
{
	struct vb_id *lid = e->listen_id ? e->listen_id->context : NULL;
	struct vb_id *nid = vb_id_new(&ch->base);

	if (!nid || !lid) {
		rr_free(ch->base.ctx->env, nid);
		rdma_reject(e->id, NULL, 0);
		*destroy_new = e->id;
		return 0;
	}
	nid->cm = e->id;
	e->id->context = nid;
	nid->timeout_ms = VB_DEFAULT_TIMEOUT_MS;
	rr_cm_id_created(&ch->base, &nid->base);
	ev->type = RPCRDMA_CM_CONNECT_REQUEST;
	ev->id = RR_PUB(cm_id, &nid->base);
	ev->listen_id = RR_PUB(cm_id, &lid->base);
	vb_ev_pdata(ev, e);
	/* A connection request's values come from the local side's point of
	 * view (iw_cm and the IB CM both swap the wire's): initiator_depth is
	 * what we may issue, the peer's IRD; responder_resources what we must
	 * serve, the peer's ORD. Taken unswapped, a Linux NFS client (IRD 128,
	 * ORD 0) left a server with ORD 0: every RDMA Read of a WRITE's Read
	 * chunk failed and the connection dropped. */
	ev->peer_ird = e->param.conn.initiator_depth;
	ev->peer_ord = e->param.conn.responder_resources;
	nid->peer_ird = ev->peer_ird;
	nid->peer_ord = ev->peer_ord;
	return 1;
}

/* ESTABLISHED on @id (vb_handle): the IRD/ORD the connection uses. */
static void vb_on_established(struct vb_id *id, const struct rdma_cm_event *e,
			      struct rpcrdma_cm_event *ev)
{
	ev->type = RPCRDMA_CM_ESTABLISHED;
	vb_ev_pdata(ev, e);
	if (id->active) {
		/* what the accept granted: the peer's IRD bounds our ORD
		 * and its ORD our IRD */
		id->peer_ird = ev->peer_ird;
		id->peer_ord = ev->peer_ord;
		id->ird = RR_MIN(id->want_ird, ev->peer_ord);
		id->ord = RR_MIN(id->want_ord, ev->peer_ird);
	} else {
		ev->peer_ird = id->peer_ird;
		ev->peer_ord = id->peer_ord;
	}
}

/* Acts on one rdma_cm event. Returns 1 when @ev holds an event for the
 * caller, 0 for internal steps. *@destroy_new is set when a new id must be
 * destroyed after the event is acknowledged. */
static int vb_handle(struct vb_ch *ch, struct rdma_cm_event *e, struct rpcrdma_cm_event *ev,
		     struct rdma_cm_id **destroy_new)
{
	struct vb_id *id = e->id ? e->id->context : NULL;
	struct rdma_conn_param cp;
	int rc;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id->cm, (int)RR_MIN(id->timeout_ms, (uint32_t)INT32_MAX)) == 0)
			return 0;
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = cm_err();
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rc = rr_verbs_qp_attach(id->qp, id->cm);
		if (rc == 0) {
			vb_fill_param(&cp, id, id->want_ird, id->want_ord);
			if (rdma_connect(id->cm, &cp) == 0)
				return 0;
			rc = cm_err();
		}
		ev->type = rc == -ENODEV ? RPCRDMA_CM_UNREACHABLE : RPCRDMA_CM_ERROR;
		ev->status = rc;
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = status_or(e->status, -ENETUNREACH);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		ev->type = RPCRDMA_CM_UNREACHABLE;
		ev->status = status_or(e->status, -ETIMEDOUT);
		break;
	case RDMA_CM_EVENT_REJECTED: {
		struct vb_ctx *c = VB_CTX(ch->base.ctx);

		/* IB CM: reason 28 = consumer reject (carries the peer's
		 * private data); others (8 = no listener) are unreachable.
		 * iWARP reports -ECONNREFUSED for both. */
		if (c->transport != RPCRDMA_TRANSPORT_IWARP && e->status != 28) {
			ev->type = RPCRDMA_CM_UNREACHABLE;
			ev->status = -ECONNREFUSED;
		} else {
			ev->type = RPCRDMA_CM_REJECTED;
			ev->status = -ECONNREFUSED;
			vb_ev_pdata(ev, e);
		}
		break;
	}
	case RDMA_CM_EVENT_CONNECT_ERROR:
		ev->type = RPCRDMA_CM_ERROR;
		ev->status = status_or(e->status, -ECONNABORTED);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return vb_on_connect_request(ch, e, ev, destroy_new);
	case RDMA_CM_EVENT_ESTABLISHED:
		vb_on_established(id, e, ev);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		ev->type = RPCRDMA_CM_DISCONNECTED;
		/* a QP an asynchronous error failed (verbs_async.c, which
		 * disconnected it): its errno, as the soft provider's */
		if (id && id->qp)
			ev->status = atomic_load(&id->qp->fatal);
		/* complete the handshake (IB CM: answer the DREQ with a DREP;
		 * otherwise the peer waits for its DREQ timeout); an error
		 * just means we had started the disconnect ourselves */
		if (id)
			rdma_disconnect(id->cm);
		if (id && id->qp) {
			struct ibv_qp *iq = atomic_load(&id->qp->ibv);
			struct ibv_qp_attr qa = {.qp_state = IBV_QPS_ERR};

			if (iq) /* flush what is still queued */
				ibv_modify_qp(iq, &qa, IBV_QP_STATE);
		}
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		ev->type = RPCRDMA_CM_ERROR;
		ev->status = -ENODEV;
		break;
	default: /* TIMEWAIT_EXIT, ADDR_CHANGE, CONNECT_RESPONSE, multicast */
		return 0;
	}
	ev->id = id ? RR_PUB(cm_id, &id->base) : NULL;
	return 1;
}

int rr_verbs_get_event(struct rr_cm_channel *bch, struct rpcrdma_cm_event *ev)
{
	struct vb_ch *ch = VB_CH(bch);

	for (;;) {
		struct rdma_cm_event *e;
		struct rdma_cm_id *destroy_new = NULL;
		int got;

		if (rdma_get_cm_event(ch->ec, &e) != 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : cm_err();
		got = vb_handle(ch, e, ev, &destroy_new);
		rdma_ack_cm_event(e);
		if (destroy_new)
			rdma_destroy_id(destroy_new);
		if (got)
			return 0;
	}
}
