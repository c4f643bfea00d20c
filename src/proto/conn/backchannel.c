/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* The backchannel of the session (RFC 8167 "Bidirectional Remote Procedure
 * Call on RPC-over-RDMA Transports"): on one connection the responder also
 * sends Calls ("backward direction") and the requester also serves them.
 *
 * Telling the directions apart ("Sending and Receiving Operations in the
 * Reverse Direction"): a reverse message is an RDMA_MSG with three empty
 * chunk lists whose inline RPC message carries the XID of rdma_xid and the
 * msg_type of its direction -- a CALL arriving at the requester, a REPLY
 * arriving at the responder. Linux (xprtrdma's rpcrdma_is_bcall, svcrdma's
 * svc_rdma_is_reverse_direction_reply) tells them apart the same way and,
 * like it, this transport carries reverse messages inline only (the upper
 * layer bounds their size: NFSv4.1's back channel attributes). Anything
 * else goes to the role's own path as before.
 *
 * Credits ("Backward-Direction Credits") are accounted apart from the
 * forward ones: the requester grants cfg.bc_slots backward credits in the
 * rdma_credit of each backward Reply and has as many Receives posted for
 * them ("Managing Receive Buffers"; the executor posts them with the
 * forward ones, rr_conn_up's @nrecv); the responder asks for cfg.bc_slots
 * in each backward Call, assumes 1 before the first backward Reply (as RFC
 * 8166 section 4.3.3 has it for the forward direction), queues Calls beyond
 * the grant, and posts cfg.bc_slots Receives for their Replies. A reverse
 * Call that was not offered -- no slots, the upper layer not serving
 * (rr_conn_bc_enable), more at once than granted, or longer than our
 * Receives -- is dropped ("In the Absence of Support for Backward-Direction
 * Operation": the upper layer must not send what the peer did not offer;
 * here it costs the peer its Call, never an overrun: the Receive is posted
 * again at once). A backward Reply matching no Call of ours is dropped, as
 * RFC 8166 section 5.5 drops a bad Reply.
 *
 * Retransmission ("Backward-Direction Retransmission" leaves it to the
 * upper layer): only the requester can connect, so a backward Call pending
 * when the connection goes completes with -ECONNRESET, and the requester's
 * reverse Calls of a lost connection can no longer be answered
 * (-ENOTCONN). */
#include "proto/conn/conn_int.h"
#include "xdr/xdr.h"

/* A reverse message (RFC 8167 section 4.2, RFC 8166 section 4.2, RFC 5531
 * section 9): an RDMA_MSG with three empty chunk lists, then the RPC message
 * inline:
 *   rdma_xid | 1 | rdma_credit | RDMA_MSG | 0 | 0 | 0 | xid | msg_type ...
 * True when @buf decodes (struct rr_hdr, in direction @dir: a Call arriving
 * at the requester, a Reply at the responder) as one whose msg_type is
 * @mtype; @h then holds its header (rr_hdr_decode has checked that the RPC
 * XID is rdma_xid; the RPC message is at h->payload_off). */
static bool bc_classify(const uint8_t *buf, uint32_t len, enum rr_hdr_dir dir, uint32_t mtype,
			struct rr_hdr *h)
{
	struct rr_hdr_limits lim;
	struct rr_xdr_dec d;
	uint32_t xid, msg_type;

	rr_hdr_limits_init(&lim);
	lim.inline_threshold = UINT32_MAX;   /* bounded by the Receive */
	if (rr_hdr_decode(h, buf, len, dir, &lim) || h->proc != RR_HDR_MSG || h->nread ||
	    h->nwrite || h->has_reply)
		return false;
	rr_xdr_dec_init(&d, buf + h->payload_off, h->payload_len);
	return !rr_xdr_get_u32(&d, &xid) && !rr_xdr_get_u32(&d, &msg_type) && msg_type == mtype;
}

#define BC_HDR RR_HDR_MIN_MSG_SIZE   /* the header above, without the RPC message */

/* The first @n words of @buf into @w: false when it is shorter. */
static bool bc_words(const uint8_t *buf, uint32_t len, uint32_t *w, unsigned n)
{
	struct rr_xdr_dec d;

	rr_xdr_dec_init(&d, buf, len);
	for (unsigned i = 0; i < n; i++)
		if (rr_xdr_get_u32(&d, &w[i]))
			return false;
	return true;
}

/* Whether @buf may be a reverse message whose msg_type is @mtype: its
 * words 3 to 6 (RDMA_MSG, three empty chunk lists) and 8 (msg_type) are
 * those of the layout above. False: bc_classify would say false too, so
 * every forward message (a Reply at the requester, a Call at the
 * responder: msg_type differs) is told apart without a full header
 * decode; true: bc_classify decides. */
static bool bc_maybe(const uint8_t *buf, uint32_t len, uint32_t mtype)
{
	uint32_t w[9];

	return bc_words(buf, len, w, 9) && w[3] == RR_HDR_MSG && !w[4] && !w[5] && !w[6] &&
	       w[8] == mtype;
}

/* Whether @buf names RDMA_ERROR in its procedure word (RFC 8166 section
 * 4.2.1: word 3), the only other message bc_on_recv takes at a
 * responder. */
static bool bc_maybe_error(const uint8_t *buf, uint32_t len)
{
	uint32_t w[4];

	return bc_words(buf, len, w, 4) && w[3] == RR_HDR_ERROR;
}

/* The header of a reverse message (built in struct rr_hdr), then @parts
 * (items inline, with their XDR pads) into @buf of @cap bytes: its length,
 * or -EMSGSIZE. */
static int bc_marshal(uint32_t xid, uint32_t credit, const struct rr_xprt_part *parts,
		      unsigned nparts, uint8_t *buf, uint32_t cap)
{
	struct rr_xdr_enc e;
	struct rr_hdr h;

	rr_hdr_init(&h, xid, credit, RR_HDR_MSG);
	rr_xdr_enc_init(&e, buf, cap);
	if (rr_hdr_encode(&e, &h))
		return -EMSGSIZE;
	for (unsigned i = 0; i < nparts; i++) {
		static const uint8_t pad[4];
		uint32_t n = parts[i].len;

		if (n && rr_xdr_put_fixed(&e, parts[i].base, n))
			return -EMSGSIZE;
		/* an item's pad (the inline pieces keep theirs) */
		if (parts[i].ddp && RR_ALIGN4((size_t)n) != n &&
		    rr_xdr_put_fixed(&e, pad, RR_ALIGN4((size_t)n) - n))
			return -EMSGSIZE;
	}
	return (int)rr_xdr_enc_len(&e);
}

/* Bytes of the reverse message of @parts (header included). */
static uint64_t bc_size(const struct rr_xprt_part *parts, unsigned nparts)
{
	uint64_t n = BC_HDR;

	for (unsigned i = 0; i < nparts; i++)
		n += parts[i].ddp ? RR_ALIGN4((uint64_t)parts[i].len) : parts[i].len;
	return n;
}

/* Posts @len bytes of slot @slot; a post failure ends the connection. */
static int bc_post(struct rr_conn *c, uint32_t slot, uint8_t *buf, uint32_t len)
{
	struct rr_conn_send s;

	memset(&s, 0, sizeof(s));
	s.slot = slot;
	s.len = len;
	s.token = TOK(TOK_SEND, NULL);
	if (rr_conn_post_send(c, &s, buf)) {
		c->io.slot_put(c->io.ctx, slot);
		rr_conn_fail(c);
		return -ENOTCONN;
	}
	c->st->sends++;   /* once posted */
	return 0;
}

/* ---- requester: reverse Calls in, Replies out ---- */

void rr_conn_bc_enable(struct rr_conn *c, bool on)
{
	c->bc_on = on;
}

/* A reverse Call (its RPC message @msg of @len bytes): delivered with a
 * copy of it, or dropped. */
static void bc_call_in(struct rr_conn *c, const uint8_t *msg, uint32_t len, uint32_t xid)
{
	struct bc_req *r;

	if (!c->bc_on || c->bc_held >= c->cfg.bc_slots) {
		c->st->bc_calls_dropped++;
		return;
	}
	r = rr_zalloc(c->env, sizeof(*r));
	if (r)
		r->buf = rr_alloc(c->env, len);
	if (!r || !r->buf) {
		rr_free(c->env, r);
		c->st->bc_calls_dropped++;   /* as a peer overrunning us would be */
		return;
	}
	memcpy(r->buf, msg, len);
	r->pub.msg = r->buf;
	r->pub.len = len;
	r->pub.xid = xid;
	r->gen = c->gen;
	r->counted = true;
	c->bc_held++;
	r->next = c->breqs;
	c->breqs = r;
	c->st->bc_calls_recv++;
	c->io.deliver(c->io.ctx, &r->pub);
}

/* Its slot is free again (answered, or done without an answer). */
static void bc_uncount(struct rr_conn *c, struct bc_req *r)
{
	if (r->counted && r->gen == c->gen && c->bc_held)
		c->bc_held--;
	r->counted = false;
}

int rr_conn_bc_reply(struct rr_conn *c, struct rr_conn_sreq *pub,
		     const struct rr_xprt_part *parts, unsigned nparts)
{
	struct bc_req *r = RR_CONTAINER_OF(pub, struct bc_req, pub);
	uint32_t slot, cap;
	uint8_t *buf;
	int len;

	if (nparts && !parts)
		return -EINVAL;
	if (!c->up || r->gen != c->gen)
		return -ENOTCONN;
	/* inline only, within the requester's send threshold */
	if (bc_size(parts, nparts) > c->params.call_inline)
		return -EMSGSIZE;
	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf)
		return -ENOBUFS;
	len = bc_marshal(pub->xid, c->cfg.bc_slots, parts, nparts, buf, cap);
	if (len < 0) {
		c->io.slot_put(c->io.ctx, slot);
		return len;
	}
	if (bc_post(c, slot, buf, (uint32_t)len))
		return -ENOTCONN;
	c->st->bc_replies_sent++;
	bc_uncount(c, r);
	return 0;
}

void rr_conn_bc_done(struct rr_conn *c, struct rr_conn_sreq *pub)
{
	struct bc_req *r = RR_CONTAINER_OF(pub, struct bc_req, pub);

	for (struct bc_req **pp = &c->breqs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	bc_uncount(c, r);
	rr_free(c->env, r->buf);
	rr_free(c->env, r);
}

/* ---- responder: backward Calls out, Replies in ---- */

static struct bc_call *bc_find_xid(struct rr_conn *c, uint32_t xid)
{
	for (struct bc_call *k = c->bcalls; k; k = k->next)
		if (k->sent && k->xid == xid)
			return k;
	return NULL;
}

static void bc_unlink(struct rr_conn *c, struct bc_call *k)
{
	for (struct bc_call **pp = &c->bcalls; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			return;
		}
}

/* @k is over for the upper layer: told @status (with its Reply when 0). */
static void bc_complete(struct rr_conn *c, struct bc_call *k, int status)
{
	struct rr_conn_rpc *rpc = k->rpc;

	if (!rpc)
		return;
	k->rpc = NULL;
	rpc->priv = NULL;
	rpc->status = status;
	c->io.complete(c->io.ctx, rpc);
}

/* Marshals and posts @k. 0, -EAGAIN (no send slot: later), or an error. */
static int bc_send(struct rr_conn *c, struct bc_call *k)
{
	struct rr_conn_rpc *rpc = k->rpc;
	uint32_t slot, cap;
	uint8_t *buf;
	int len;

	buf = c->io.slot_get(c->io.ctx, &slot, &cap);
	if (!buf)
		return -EAGAIN;
	len = bc_marshal(rpc->xid, c->cfg.bc_slots, rpc->parts, rpc->nparts, buf, cap);
	if (len < 0) {
		c->io.slot_put(c->io.ctx, slot);
		return len;
	}
	/* the Receive of its Reply reserved before the peer can send it */
	rr_cred_rsp_bc_sent(&c->scred);
	rs_quota(c);
	if (bc_post(c, slot, buf, (uint32_t)len))
		return -ENOTCONN;
	k->sent = true;
	c->st->bc_calls_sent++;
	return 0;
}

void bc_pump(struct rr_conn *c)
{
	struct rr_cred_node *n;

	if (!c->up || !c->responder)
		return;
	while ((n = rr_cred_req_next(&c->bcred)) != NULL) {
		struct bc_call *k = RR_CONTAINER_OF(n, struct bc_call, node);
		int rc;

		if (!rr_cred_rsp_bc_room(&c->scred)) {
			/* no free Receive for its Reply: after the executor's
			 * next refill (rr_conn_resume) */
			(void)rr_cred_req_complete(&c->bcred);
			(void)rr_cred_req_requeue(&c->bcred, n);
			rr_cred_rsp_want_one(&c->scred);
			c->bc_wait_room = true;
			break;
		}
		k->has_credit = true;
		rc = bc_send(c, k);
		if (rc == 0)
			continue;
		(void)rr_cred_req_complete(&c->bcred);
		k->has_credit = false;
		if (rc == -EAGAIN) {
			(void)rr_cred_req_requeue(&c->bcred, n);
			break;
		}
		bc_unlink(c, k);
		bc_complete(c, k, rc);
		rr_free(c->env, k);
		if (!c->up)
			break;
	}
}

int rr_conn_bc_submit(struct rr_conn *c, struct rr_conn_rpc *rpc)
{
	struct bc_call *k;

	if (!rpc || (rpc->nparts && !rpc->parts) || c->cfg.role != RR_CONN_RESPONDER)
		return -EINVAL;
	if (!c->cfg.bc_slots)
		return -EOPNOTSUPP;
	if (!c->up)
		return -ENOTCONN;
	/* inline only, within the responder's send threshold */
	if (bc_size(rpc->parts, rpc->nparts) > c->params.reply_inline)
		return -EMSGSIZE;
	k = rr_zalloc(c->env, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->rpc = rpc;
	k->xid = rpc->xid;
	rpc->priv = k;
	rpc->status = 0;
	rpc->reply = NULL;
	rpc->reply_len = 0;
	k->next = c->bcalls;
	c->bcalls = k;
	if (rr_cred_req_submit(&c->bcred, &k->node) == 1) {
		/* a credit is free: the pump takes it (and a slot) */
		(void)rr_cred_req_complete(&c->bcred);
		(void)rr_cred_req_requeue(&c->bcred, &k->node);
	} else {
		c->st->bc_credits_exhausted++;
	}
	bc_pump(c);
	return 0;
}

void rr_conn_bc_abort(struct rr_conn *c, struct rr_conn_rpc *rpc, int status)
{
	struct bc_call *k = rpc->priv;

	if (!k || k->rpc != rpc)
		return;
	if (!k->sent)
		(void)rr_cred_req_cancel(&c->bcred, &k->node);
	else if (k->has_credit)
		(void)rr_cred_req_complete(&c->bcred);
	if (k->sent)
		c->bc_orphans++;   /* its Receive stays reserved */
	/* A sent Call's credit comes back now, not with a Reply that may
	 * never come (a requester that did not serve it dropped it): as the
	 * Linux server's backchannel, which frees its slot at the RPC's
	 * timeout. Should the Reply come after all, it matches nothing. */
	bc_unlink(c, k);
	bc_complete(c, k, status);
	rr_free(c->env, k);
	bc_pump(c);
}

bool rr_conn_bc_busy(const struct rr_conn *c)
{
	return c->bcalls != NULL;
}

/* A backward Reply (its RPC message @msg of @len bytes) or an RDMA_ERROR
 * for @k: its credit back, the upper layer told. */
static void bc_reply_in(struct rr_conn *c, struct bc_call *k, const uint8_t *msg, uint32_t len,
			uint32_t credit, bool error)
{
	if (k->has_credit)
		(void)rr_cred_req_on_reply(&c->bcred, credit);
	else
		(void)rr_cred_req_grant(&c->bcred, credit);
	k->has_credit = false;
	bc_unlink(c, k);
	c->st->bc_replies_recv++;
	if (error) {
		bc_complete(c, k, -EREMOTEIO);
	} else {
		k->rpc->reply = rr_alloc(c->env, len);
		if (k->rpc->reply) {
			memcpy(k->rpc->reply, msg, len);
			k->rpc->reply_len = len;
		}
		bc_complete(c, k, k->rpc->reply ? 0 : -ENOMEM);
	}
	rr_free(c->env, k);
}

/* Responder: the Receive a backward Reply (@known: of a Call in the table)
 * consumed, in the credit accounting (docs/protocol.md "Credits"). One of a Call in the table, or of a sent Call since aborted, was
 * owed; any other counts as a Call, settled without a Reply (an overrun past
 * the peer's permission ends the connection: false). */
static bool bc_account_reply(struct rr_conn *c, bool known)
{
	int r;

	if (!known && c->bc_orphans) {
		c->bc_orphans--;
		known = true;
	}
	if (known)
		r = rr_cred_rsp_on_bc_reply(&c->scred);
	else
		r = rr_cred_rsp_on_call(&c->scred) < 0 ? -EPROTO : 1;
	if (r < 0) {
		rs_overrun(c);
		return false;
	}
	if (r == 1)
		rs_settle(c);
	return true;
}

bool bc_on_recv(struct rr_conn *c, uint32_t idx, const uint8_t *buf, uint32_t len)
{
	struct rr_hdr h;
	struct bc_call *k;

	if (c->cfg.role == RR_CONN_REQUESTER) {
		if (!bc_maybe(buf, len, 0 /* CALL */) ||
		    !bc_classify(buf, len, RR_HDR_DIR_CALL, 0 /* CALL */, &h))
			return false;
		bc_call_in(c, buf + h.payload_off, h.payload_len, h.xid);
	} else if (!bc_maybe(buf, len, 1 /* REPLY */) && !bc_maybe_error(buf, len)) {
		return false;
	} else if (bc_classify(buf, len, RR_HDR_DIR_REPLY, 1 /* REPLY */, &h)) {
		k = bc_find_xid(c, h.xid);
		if (!bc_account_reply(c, k != NULL))
			return true;   /* an overrun: the connection ends */
		if (k)
			bc_reply_in(c, k, buf + h.payload_off, h.payload_len, h.credit, false);
		else
			c->st->bc_replies_dropped++;
	} else if (h.verdict == RR_HDR_OK && h.proc == RR_HDR_ERROR &&
		   (k = bc_find_xid(c, h.xid)) != NULL) {
		/* RDMA_ERROR (RFC 8166 section 5.5) naming a backward Call */
		if (!bc_account_reply(c, true))
			return true;
		c->st->err_received++;
		bc_reply_in(c, k, NULL, 0, h.credit, true);
	} else {
		return false;
	}
	/* reposted once its bytes were taken */
	if (c->cfg.role == RR_CONN_REQUESTER)
		(void)c->io.post_recv(c->io.ctx, idx);
	else if (c->io.post_recv(c->io.ctx, idx) == 0)
		rr_cred_rsp_posted(&c->scred, 1);
	if (c->cfg.role == RR_CONN_RESPONDER)
		bc_pump(c);   /* a credit may be free */
	return true;
}

/* ---- connection events ---- */

void bc_up(struct rr_conn *c)
{
	c->gen++;
	c->bc_held = 0;
	if (c->cfg.role == RR_CONN_RESPONDER)
		rr_cred_req_init(&c->bcred, c->cfg.bc_slots ? c->cfg.bc_slots : 1);
}

/* Only the requester connects: a backward Call of the lost connection is
 * never retransmitted; reverse Calls it delivered stay with the upper
 * layer until done (their Replies have nowhere to go). */
void bc_down(struct rr_conn *c)
{
	c->bc_held = 0;
	while (c->bcalls) {
		struct bc_call *k = c->bcalls;

		c->bcalls = k->next;
		if (!k->sent)
			(void)rr_cred_req_cancel(&c->bcred, &k->node);
		bc_complete(c, k, -ECONNRESET);
		rr_free(c->env, k);
	}
}

void bc_destroy(struct rr_conn *c)
{
	bc_down(c);
	while (c->breqs) {
		struct bc_req *r = c->breqs;

		c->breqs = r->next;
		rr_free(c->env, r->buf);
		rr_free(c->env, r);
	}
}
