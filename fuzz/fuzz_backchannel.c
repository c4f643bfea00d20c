/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the session's backchannel (proto/conn/backchannel.c,
 * RFC 8167) on an executor that does no I/O. The input is a series of
 * received messages (u16 length, then that many bytes; a length with bit
 * 15 set takes the connection down: the requester's comes up again, the
 * responder's session ends there) fed to two sessions:
 * - a requester granting 2 backward credits and serving reverse Calls:
 *   each one delivered is answered with its own message, or dropped
 *   without an answer, once the message that brought it was handled; with
 *   2 forward Calls of its own outstanding (XIDs 0xc0000, 0xc0001, the
 *   responder's backward ones: a reverse Call may carry a forward Call's
 *   XID, RFC 8167), so that the one-pass Reply's test and the reverse-Call
 *   test after it (requester.c rq_on_recv) meet both;
 * - a responder with 3 backward Calls submitted (XIDs 0xc0000..0xc0002),
 *   whose forward Calls are dropped by its upper layer.
 * Checked: no crash or leak; never more than 2 reverse Calls held at once
 * on one connection; every Send within its slot and the inline
 * threshold; a delivered reverse Call's bytes lie in the message that
 * brought it; every backward Call completes exactly once (by a Reply, an
 * RDMA_ERROR, the connection's loss or the session's end) and a completed
 * one's Reply is the RPC message of a Reply to its XID; a requester's
 * forward Call completes exactly once, and never by the message that was
 * delivered as a reverse Call; at the responder,
 * the two-word filter before bc_on_recv (bc_may_be_reply) passes every
 * message that bc_on_recv's first tests (bc_maybe, bc_maybe_error) would
 * look at further. */
#include <stdio.h>
#include <stdlib.h>

#include "proto/conn/conn.h"
#include "proto/conn/conn_int.h"

#define FAIL(msg)                                                              \
	do {                                                                   \
		fprintf(stderr, "fuzz_backchannel: %s (line %d)\n", msg, __LINE__); \
		abort();                                                       \
	} while (0)

#define SLOTS 16u
#define CAP 4096u

struct fake {
	uint8_t slot[SLOTS][CAP];
	bool busy[SLOTS];
	struct rr_conn_sreq *got[64];
	unsigned ngot;
	unsigned held;                /* requester: delivered, not done */
	unsigned completions[3];
	bool requester;               /* completions: forward Calls */
	struct rr_conn *c;
};

static int f_reg(void *ctx, struct rr_conn_mem *m)
{
	(void)ctx;
	m->handle = m;
	m->stag = 0x100;
	return 0;
}

static void f_unreg(void *ctx, struct rr_conn_mem *m)
{
	(void)ctx;
	m->handle = NULL;
}

static int f_inv(void *ctx, struct rr_conn_mem *m, uint64_t token)
{
	(void)ctx;
	(void)m;
	(void)token;
	return 0;
}

static uint8_t *f_slot_get(void *ctx, uint32_t *slot, uint32_t *cap)
{
	struct fake *f = ctx;

	for (uint32_t i = 0; i < SLOTS; i++)
		if (!f->busy[i]) {
			f->busy[i] = true;
			*slot = i;
			*cap = CAP;
			return f->slot[i];
		}
	return NULL;
}

static void f_slot_put(void *ctx, uint32_t slot)
{
	struct fake *f = ctx;

	if (slot >= SLOTS || !f->busy[slot])
		FAIL("slot put twice");
	f->busy[slot] = false;
}

/* A Send "completes" at once: its slot comes back. */
static int f_send(void *ctx, const struct rr_conn_send *s)
{
	struct fake *f = ctx;

	if (s->slot >= SLOTS || !f->busy[s->slot] || s->len > CAP)
		FAIL("send outside its slot");
	if (s->len > 4096)
		FAIL("send above the inline threshold");
	f->busy[s->slot] = false;
	return 0;
}

static int f_read(void *ctx, const struct rr_conn_read *r)
{
	(void)ctx;
	(void)r;
	return 0;   /* never completes: freed with the session */
}

static int f_post_recv(void *ctx, uint32_t idx)
{
	(void)ctx;
	(void)idx;
	return 0;
}

static void f_deliver(void *ctx, struct rr_conn_sreq *r)
{
	struct fake *f = ctx;

	if (f->ngot < 64)
		f->got[f->ngot++] = r;
	else
		FAIL("too many delivered");
}

static void f_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct fake *f = ctx;
	uint32_t i = rpc->xid - 0xc0000u;

	if (i >= 3 || ++f->completions[i] > 1)
		FAIL("a backward Call completed twice");
	if (f->requester) {
		/* a forward Call: whatever the general way took as its Reply */
		rr_conn_release_reply(f->c, rpc);
		return;
	}
	if (rpc->status == 0 &&
	    (rpc->reply_len < 8 || rr_get_be32(rpc->reply) != rpc->xid ||
	     rr_get_be32(rpc->reply + 4) != 1))
		FAIL("a Reply that is not the Reply of its Call");
	rr_free(NULL, rpc->reply);
	rpc->reply = NULL;
}

static void f_close(void *ctx)
{
	(void)ctx;
}

static const struct rr_conn_io fake_io = {
	.reg = f_reg, .unreg = f_unreg, .inv = f_inv, .slot_get = f_slot_get,
	.slot_put = f_slot_put, .send = f_send, .read = f_read, .post_recv = f_post_recv,
	.deliver = f_deliver, .complete = f_complete, .close = f_close,
};

static struct rr_conn *session(struct fake *f, enum rr_conn_role role)
{
	struct rr_conn_config cfg;
	struct rr_conn_io io = fake_io;
	struct rr_conn *c = NULL;

	memset(&cfg, 0, sizeof(cfg));
	cfg.role = role;
	cfg.credits = 4;
	cfg.max_seg_len = 1u << 20;
	cfg.max_segs = 16;
	cfg.max_call = 1u << 20;
	cfg.send_size = cfg.recv_size = 4096;
	cfg.local.send_size = cfg.local.recv_size = 4096;
	cfg.bc_slots = 2;
	io.ctx = f;
	if (rr_conn_create(&cfg, &io, &c))
		return NULL;
	f->c = c;
	return c;
}

/* A private data block (RFC 8797): 4096 / 4096. */
static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};

/* The requester's upper layer after a message: answers or drops what it
 * got; a delivered Call's bytes must lie in @msg. */
static void serve(struct fake *f, const uint8_t *msg, size_t len, unsigned k)
{
	for (unsigned i = 0; i < f->ngot; i++) {
		struct rr_conn_sreq *r = f->got[i];
		struct rr_xprt_part part = {r->msg, r->len, (k + i) & 2};

		if (r->len > len || r->len < 8 || memcmp(r->msg, msg + (len - r->len), r->len))
			FAIL("a reverse Call that is not what came");
		if (++f->held > 2)
			FAIL("more reverse Calls held than granted");
		if ((k + i) & 1)
			(void)rr_conn_bc_reply(f->c, r, &part, 1);
		rr_conn_bc_done(f->c, r);
		f->held--;
	}
	f->ngot = 0;
}

/* backchannel.c's first tests at a responder: a reverse Reply (RDMA_MSG,
 * three empty chunk lists, msg_type REPLY) or an RDMA_ERROR. */
static bool bc_looks_reply(const uint8_t *buf, size_t len)
{
	uint32_t w[9];

	for (unsigned i = 0; i < 9; i++)
		w[i] = 4 * i + 4 <= len ? rr_get_be32(buf + 4 * i) : 0xdeadbeefu;
	return (len >= 36 && w[3] == RR_HDR_MSG && !w[4] && !w[5] && !w[6] && w[8] == 1) ||
	       (len >= 16 && w[3] == RR_HDR_ERROR);
}

/* @rpc: a 16-byte Call (or reverse Call) of XID @xid in @call, one part. */
static void call_fill(struct rr_conn_rpc *rpc, struct rr_xprt_part *part, uint8_t *call,
		      uint32_t xid)
{
	memset(call, 0, 16);
	rr_put_be32(call, xid);
	*part = (struct rr_xprt_part){call, 16, false};
	memset(rpc, 0, sizeof(*rpc));
	rpc->xid = xid;
	rpc->parts = part;
	rpc->nparts = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fake f;
	struct rr_conn_rpc rpc[3];
	uint8_t calls[3][16];
	struct rr_xprt_part parts[3];
	struct rr_conn *c;

	for (int role = 0; role < 2; role++) {
		size_t off = 0;
		unsigned k = 0, done0;

		memset(&f, 0, sizeof(f));
		c = session(&f, role ? RR_CONN_RESPONDER : RR_CONN_REQUESTER);
		if (!c)
			return 0;
		rr_conn_up(c, pd, sizeof(pd), 16, 4, 1);
		if (role == 0) {
			rr_conn_bc_enable(c, true);
			f.requester = true;
			for (unsigned i = 0; i < 2; i++) {
				call_fill(&rpc[i], &parts[i], calls[i], 0xc0000u + i);
				rpc[i].max_reply = 256;
				if (rr_conn_submit(c, &rpc[i]))
					FAIL("submit refused");
			}
		} else {
			for (unsigned i = 0; i < 3; i++) {
				call_fill(&rpc[i], &parts[i], calls[i], 0xc0000u + i);
				if (rr_conn_bc_submit(c, &rpc[i]))
					FAIL("submit refused");
			}
		}
		while (off + 2 <= size) {
			uint16_t n = (uint16_t)(data[off] << 8 | data[off + 1]);
			size_t len = n & 0x7fffu;

			off += 2;
			if (len > size - off)
				len = size - off;
			if ((n & 0x8000u) && role == 1)
				break;   /* a responder's session ends with its connection */
			if (n & 0x8000u) {
				rr_conn_down(c);
				rr_conn_up(c, pd, sizeof(pd), 16, 4, 1);
			}
			if (role == 1 && bc_looks_reply(data + off, len) &&
			    !bc_may_be_reply(data + off, (uint32_t)len))
				FAIL("bc_may_be_reply drops what bc_on_recv takes");
			done0 = f.completions[0] + f.completions[1];
			rr_conn_on_recv(c, k++ % 16, data + off, (uint32_t)len, false, 0);
			if (role == 0 && f.ngot && f.completions[0] + f.completions[1] != done0)
				FAIL("a reverse Call also completed a forward Call");
			if (role == 0) {
				serve(&f, data + off, len, k);
			} else {
				for (unsigned i = 0; i < f.ngot; i++)
					(void)rr_conn_done(c, f.got[i]);
				f.ngot = 0;
			}
			off += len;
		}
		rr_conn_down(c);
		for (unsigned i = 0; i < f.ngot; i++)
			(void)rr_conn_done(c, f.got[i]);
		f.ngot = 0;
		rr_conn_destroy(c);
		for (unsigned i = 0; i < (role == 1 ? 3u : 2u); i++)
			if (f.completions[i] != 1)
				FAIL("a Call never completed");
	}
	return 0;
}
