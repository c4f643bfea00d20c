/* SPDX-License-Identifier: BSD-2-Clause */
/* RPC-over-RDMA Version 1 credit accounting (RFC 8166 sections 4.3.1 and
 * 4.3.3) for requester and responder, with the project's RDMA_DONE rule for
 * the reliable-reply extension (draft-cel-nfsv4-rpcrdma-reliable-reply-04
 * section 5.2.3; docs/protocol.md "Credits"). Counters and an intrusive FIFO;
 * no allocation, no system call. */
#include "proto/conn/credits.h"

#define RR_CRED_REQUEST_MAX 65535u

/* ---- intrusive FIFO (circular, sentinel) ---- */

static void fifo_init(struct rr_cred_node *h)
{
	h->next = h;
	h->prev = h;
	h->queued = false;
}

static void fifo_insert(struct rr_cred_node *prev, struct rr_cred_node *n)
{
	n->prev = prev;
	n->next = prev->next;
	prev->next->prev = n;
	prev->next = n;
	n->queued = true;
}

static void fifo_unlink(struct rr_cred_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = NULL;
	n->prev = NULL;
	n->queued = false;
}

/* ---- requester ---- */

void rr_cred_req_init(struct rr_cred_req *c, uint32_t request)
{
	memset(c, 0, sizeof(*c));
	if (request == 0)
		request = 1;
	if (request > RR_CRED_REQUEST_MAX)
		request = RR_CRED_REQUEST_MAX;
	c->request = request;
	c->grant = 1; /* RFC 8166 section 4.3.3: assume one credit */
	fifo_init(&c->head);
}

bool rr_cred_req_can_send(const struct rr_cred_req *c)
{
	return c->queued == 0 && c->outstanding < c->grant;
}

int rr_cred_req_submit(struct rr_cred_req *c, struct rr_cred_node *n)
{
	if (!n || n->queued)
		return -EINVAL;
	if (rr_cred_req_can_send(c)) {
		c->outstanding++;
		return 1;
	}
	fifo_insert(c->head.prev, n);
	c->queued++;
	return 0;
}

int rr_cred_req_requeue(struct rr_cred_req *c, struct rr_cred_node *n)
{
	if (!n || n->queued)
		return -EINVAL;
	fifo_insert(&c->head, n);
	c->queued++;
	return 0;
}

struct rr_cred_node *rr_cred_req_next(struct rr_cred_req *c)
{
	struct rr_cred_node *n;

	if (c->queued == 0 || c->outstanding >= c->grant)
		return NULL;
	n = c->head.next;
	fifo_unlink(n);
	c->queued--;
	c->outstanding++;
	return n;
}

int rr_cred_req_cancel(struct rr_cred_req *c, struct rr_cred_node *n)
{
	struct rr_cred_node *it;

	if (!n || !n->queued)
		return -ENOENT;
	/* Check membership: a node queued on another requester is not ours. */
	for (it = c->head.next; it != &c->head; it = it->next)
		if (it == n)
			break;
	if (it != n)
		return -ENOENT;
	fifo_unlink(n);
	c->queued--;
	return 0;
}

uint32_t rr_cred_req_grant(struct rr_cred_req *c, uint32_t grant)
{
	if (grant == 0)
		grant = 1; /* a grant of 0 would deadlock: Linux treats it as 1 */
	if (grant > c->request)
		grant = c->request;
	c->grant = grant;
	c->granted = true;
	return grant;
}

int rr_cred_req_complete(struct rr_cred_req *c)
{
	if (c->outstanding == 0)
		return -EPROTO;
	c->outstanding--;
	return 0;
}

int rr_cred_req_on_reply(struct rr_cred_req *c, uint32_t grant)
{
	rr_cred_req_grant(c, grant);
	return rr_cred_req_complete(c);
}

void rr_cred_req_on_read_reply(struct rr_cred_req *c)
{
	c->done_owed++;
}

int rr_cred_req_done_sent(struct rr_cred_req *c)
{
	if (c->done_owed == 0)
		return -EPROTO;
	c->done_owed--;
	return 0;
}

void rr_cred_req_reset(struct rr_cred_req *c)
{
	c->grant = 1;
	c->granted = false;
	c->outstanding = 0;
	c->done_owed = 0;
}

/* ---- responder ---- */

void rr_cred_rsp_init(struct rr_cred_rsp *c, uint32_t max_credits, uint32_t done_max)
{
	memset(c, 0, sizeof(*c));
	c->max_credits = max_credits ? max_credits : 1;
	c->done_max = done_max;
	c->hw_grant = 1; /* RFC 8166 section 4.3.3: the peer assumes one */
}

void rr_cred_rsp_posted(struct rr_cred_rsp *c, uint32_t n)
{
	uint64_t p = (uint64_t)c->posted + n;

	c->posted = p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
}

uint32_t rr_cred_rsp_need(const struct rr_cred_rsp *c, bool read_chunk)
{
	uint64_t want = (uint64_t)c->max_credits + c->done_owed + (read_chunk ? 1 : 0);

	return want > c->posted ? (uint32_t)(want - c->posted) : 0;
}

int rr_cred_rsp_on_call(struct rr_cred_rsp *c)
{
	if (c->posted == 0)
		return -EPROTO;
	c->posted--;
	c->in_progress++;
	return 0;
}

int rr_cred_rsp_on_done(struct rr_cred_rsp *c)
{
	int rc = 0;

	if (c->posted == 0)
		rc = -EPROTO;
	else
		c->posted--;
	if (c->done_owed == 0)
		return -EPROTO;
	c->done_owed--;
	return rc;
}

int rr_cred_rsp_on_stray(struct rr_cred_rsp *c)
{
	if (c->posted == 0)
		return -EPROTO;
	c->posted--;
	return 0;
}

int rr_cred_rsp_reply(struct rr_cred_rsp *c, bool read_chunk, uint32_t *grant)
{
	uint64_t done_after, in_after, avail, g;

	if (c->in_progress == 0)
		return -EPROTO;
	if (read_chunk && c->done_owed >= c->done_max)
		return -ENOSPC;
	done_after = (uint64_t)c->done_owed + (read_chunk ? 1 : 0);
	in_after = (uint64_t)c->in_progress - 1;
	/* The grant never exceeds the Receives posted and not reserved for
	 * RDMA_DONE, and is never 0. */
	if (c->posted < done_after + 1)
		return -ENOBUFS;
	avail = c->posted - done_after;
	g = RR_MIN((uint64_t)c->max_credits, avail);
	/* Once this Reply frees a credit, the peer may send up to
	 * max(hw_grant, g) - in_after more Calls plus done_after RDMA_DONEs:
	 * all must find a posted Receive. */
	if ((uint64_t)c->posted + in_after < RR_MAX((uint64_t)c->hw_grant, g) + done_after)
		return -ENOBUFS;
	c->in_progress--;
	c->done_owed = (uint32_t)done_after;
	if (g > c->hw_grant)
		c->hw_grant = (uint32_t)g;
	c->last_grant = (uint32_t)g;
	*grant = (uint32_t)g;
	return 0;
}

bool rr_cred_rsp_safe(const struct rr_cred_rsp *c)
{
	return (uint64_t)c->posted + c->in_progress >=
	       (uint64_t)c->hw_grant + c->done_owed;
}

void rr_cred_rsp_reset(struct rr_cred_rsp *c)
{
	rr_cred_rsp_init(c, c->max_credits, c->done_max);
}
