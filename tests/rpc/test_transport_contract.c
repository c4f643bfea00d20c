/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the RPC layer's transport contract (src/transport/xprt.h) with a fake
 * transport registered under its own URL scheme, the way the RPC-over-RDMA
 * transport plugs in: the client's Call arrives as inline bytes plus
 * referenced DDP items whose XDR positions must rebuild the complete message
 * (RFC 8166 section 3.4.3 reduction, Read chunk Positions); a Reply whose
 * DDP result was "placed" into the caller's sink (as by RDMA Write: only the
 * length word inline) decodes without copying; a placed length that
 * disagrees with the length word is rejected; completion from inside submit
 * defers the user's callback; and a server request whose DDP argument was
 * delivered outside the inline bytes (a pulled Read chunk) reaches the
 * handler at the right position. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "rpc/rpcmsg.h"
#include "transport/xprt.h"
#include "rpcrdma/rpc.h"

/* ---- fake client transport ---- */

struct rr_xprt_client {
	struct rr_xprt_client_params p;
};

static uint8_t loop_full[4096];   /* the rebuilt complete Call */
static size_t loop_full_len;
static uint8_t loop_reply[256];
static uint32_t loop_placed_delta;   /* 0: placed == length word */
static int loop_positions_ok;

static int loop_create(const struct rr_xprt_target *t, const struct rr_xprt_client_params *p,
		       struct rr_xprt_client **out)
{
	struct rr_xprt_client *x = calloc(1, sizeof(*x));

	(void)t;
	if (!x)
		return -ENOMEM;
	x->p = *p;
	*out = x;
	return 0;
}

/* Rebuilds the complete XDR message from inline bytes + items, checks every
 * item's xdr_pos, then answers: SUCCESS, u32 n, DDP length word (data
 * "placed" into sink 0), u32 trailer. Completes inside submit. */
static int loop_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	const struct rr_xprt_msg *m = &call->msg;
	size_t off = 0, n = 0, rn = 0;
	struct rr_xdr_dec d;
	struct rr_rpc_call hc;
	uint32_t item_len = 0;

	loop_positions_ok = 1;
	for (unsigned i = 0; i < m->nddp; i++) {
		const struct rr_rpc_ddp *it = &m->ddp[i];

		memcpy(loop_full + n, m->head + off, it->inline_off - off);
		n += it->inline_off - off;
		off = it->inline_off;
		if (it->xdr_pos != n)
			loop_positions_ok = 0;
		/* the length word just before the item equals its length */
		if (rr_get_be32(m->head + it->inline_off - 4) != it->len)
			loop_positions_ok = 0;
		memcpy(loop_full + n, it->ptr, it->len);
		memset(loop_full + n + it->len, 0, RR_ALIGN4((size_t)it->len) - it->len);
		n += RR_ALIGN4((size_t)it->len);
		item_len = it->len;
	}
	memcpy(loop_full + n, m->head + off, m->head_len - off);
	n += m->head_len - off;
	loop_full_len = n;
	if (n != m->xdr_len)
		loop_positions_ok = 0;
	rr_xdr_dec_init(&d, loop_full, n);
	if (rr_rpcmsg_decode_call(&d, &hc) || hc.xid != call->xid)
		loop_positions_ok = 0;

	/* The Reply, with the DDP result placed directly in sink 0. */
	rr_put_be32(loop_reply + rn, call->xid), rn += 4;
	rr_put_be32(loop_reply + rn, 1), rn += 4;
	memset(loop_reply + rn, 0, 16), rn += 16;
	rr_put_be32(loop_reply + rn, item_len), rn += 4;
	rr_put_be32(loop_reply + rn, item_len), rn += 4; /* length word only */
	rr_put_be32(loop_reply + rn, 0xfeedface), rn += 4;
	for (unsigned i = 0; i < RR_RPC_MAX_DDP; i++)
		call->placed[i] = RR_RPC_NOT_PLACED;
	if (call->nsinks >= 1 && item_len <= call->sinks[0].max && m->nddp) {
		memcpy(call->sinks[0].buf, m->ddp[m->nddp - 1].ptr, item_len);
		call->placed[0] = item_len + loop_placed_delta;
	}
	call->reply = loop_reply;
	call->reply_len = rn;
	call->reply_buf = NULL;
	call->status = 0;
	x->p.complete(x->p.ctx, call);   /* from inside submit */
	return 0;
}

static void loop_abort(struct rr_xprt_client *x, struct rr_xprt_call *call, int status)
{
	(void)x;
	(void)call;
	(void)status; /* every call completed inside submit */
}

static void loop_release(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	(void)x;
	call->reply = NULL;
}

static void loop_destroy(struct rr_xprt_client *x)
{
	free(x);
}

static const struct rr_xprt_client_ops loop_client_ops = {
	.create = loop_create,
	.submit = loop_submit,
	.abort = loop_abort,
	.release_reply = loop_release,
	.destroy = loop_destroy,
};

/* ---- fake server transport: requests injected by the test ---- */

struct rr_xprt_server {
	struct rr_xprt_server_params p;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint8_t reply[512];
	size_t reply_len;
	int replies;
	int dones;
};

static struct rr_xprt_server *loop_srv;

static int lsrv_create(const struct rr_xprt_target *t, const struct rr_xprt_server_params *p,
		       struct rr_xprt_server **out)
{
	struct rr_xprt_server *s = calloc(1, sizeof(*s));

	(void)t;
	if (!s)
		return -ENOMEM;
	s->p = *p;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cv, NULL);
	loop_srv = s;
	*out = s;
	return 0;
}

static int lsrv_port(const struct rr_xprt_server *s)
{
	(void)s;
	return 1;
}

static int lsrv_start(struct rr_xprt_server *s)
{
	(void)s;
	return 0;
}

/* Flattens the reply (inline + items with pads) like TCP would. */
static int lsrv_send_reply(struct rr_xprt_server *s, struct rr_xprt_req *req,
			   const struct rr_xprt_msg *m)
{
	size_t off = 0, n = 0;

	(void)req;
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < m->nddp; i++) {
		const struct rr_rpc_ddp *it = &m->ddp[i];

		memcpy(s->reply + n, m->head + off, it->inline_off - off);
		n += it->inline_off - off;
		off = it->inline_off;
		memcpy(s->reply + n, it->ptr, it->len);
		memset(s->reply + n + it->len, 0, RR_ALIGN4((size_t)it->len) - it->len);
		n += RR_ALIGN4((size_t)it->len);
	}
	memcpy(s->reply + n, m->head + off, m->head_len - off);
	s->reply_len = n + m->head_len - off;
	s->replies++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void lsrv_req_done(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	(void)req;
	pthread_mutex_lock(&s->lock);
	s->dones++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
}

static void lsrv_stop(struct rr_xprt_server *s)
{
	(void)s;
}

static void lsrv_destroy(struct rr_xprt_server *s)
{
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cv);
	free(s);
	loop_srv = NULL;
}

static const struct rr_xprt_server_ops loop_server_ops = {
	.create = lsrv_create,
	.port = lsrv_port,
	.start = lsrv_start,
	.send_reply = lsrv_send_reply,
	.req_done = lsrv_req_done,
	.stop = lsrv_stop,
	.destroy = lsrv_destroy,
};

static const struct rr_xprt_class loop_class = {"loop", &loop_client_ops, &loop_server_ops};

struct cb_ctx {
	atomic_int calls;
	pthread_t starter;
};

static void cb(struct rpcrdma_call *call, int status, void *arg)
{
	struct cb_ctx *c = arg;

	(void)call;
	(void)status;
	/* Must not run inside rpcrdma_call_start: not on the starting
	 * thread (the transport completed the call inside submit). */
	if (pthread_equal(c->starter, pthread_self()))
		atomic_store(&c->calls, -1000);
	else
		atomic_fetch_add(&c->calls, 1);
}

TEST(rpc_xprt_contract_client)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	uint8_t a[7] = {1, 2, 3, 4, 5, 6, 7}, b[5] = {9, 8, 7, 6, 5}, sinkb[16];
	struct rpcrdma_ddp_sink sk = {sinkb, sizeof(sinkb)};
	const void *p;
	uint32_t len, v;
	struct cb_ctx cc;

	REQUIRE_EQ(rr_xprt_register(&loop_class), 0);
	REQUIRE_EQ(rpcrdma_client_create("loop://x:1", 7, 1, NULL, &c), 0);

	/* Two DDP items at odd sizes around inline words. */
	REQUIRE_EQ(rpcrdma_call_create(c, 3, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0x11111111);
	rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), a, 7);
	rpcrdma_xdr_put_string(rpcrdma_call_args(call), "mid");
	rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), b, 5);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0x22222222);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
	memset(sinkb, 0, sizeof(sinkb));
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(loop_positions_ok, 1);
	/* complete message: 40 header + 4 + (4+8) + (4+4) + (4+8) + 4 */
	CHECK_EQ(loop_full_len, 40 + 4 + 12 + 8 + 12 + 4);
	CHECK_EQ(rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 1), -EBUSY);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(v, 5);
	REQUIRE_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
	CHECK(p == sinkb);
	CHECK_EQ(len, 5);
	CHECK(memcmp(sinkb, b, 5) == 0);
	/* no data inline after the length word: the trailer follows at once */
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(v, 0xfeedface);
	rpcrdma_call_destroy(call);

	/* A placed length that disagrees with the length word is rejected. */
	loop_placed_delta = 1;
	REQUIRE_EQ(rpcrdma_call_create(c, 3, &call), 0);
	rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), b, 5);
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), -EBADMSG);
	rpcrdma_call_destroy(call);
	loop_placed_delta = 0;

	/* Completion inside submit: the callback runs later, elsewhere. */
	atomic_init(&cc.calls, 0);
	cc.starter = pthread_self();
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, cb, &cc), 0);
	CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
	CHECK_EQ(atomic_load(&cc.calls), 1);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
}

/* ---- fake client transports with wait, with and without submit_wait ---- */

static int sw_submits, sw_waits, sw_submit_waits, sw_rc;
static uint32_t sw_wait_ms;

static int sw_submit(struct rr_xprt_client *x, struct rr_xprt_call *call)
{
	sw_submits++;
	return loop_submit(x, call);
}

static void sw_wait(struct rr_xprt_client *x, struct rr_xprt_call *call, uint32_t timeout_ms)
{
	(void)x;
	(void)call;
	sw_waits++;
	sw_wait_ms = timeout_ms;
}

static int sw_submit_wait(struct rr_xprt_client *x, struct rr_xprt_call *call,
			  uint32_t timeout_ms)
{
	/* one first wait, of at most a slice (the lazy deadline) */
	CHECK(timeout_ms <= RR_XPRT_FIRST_WAIT_MS);
	sw_submit_waits++;
	sw_wait_ms = timeout_ms;
	if (sw_rc)
		return sw_rc;   /* not taken: no completion */
	return loop_submit(x, call);
}

static const struct rr_xprt_client_ops sw_client_ops = {
	.create = loop_create,
	.submit = sw_submit,
	.abort = loop_abort,
	.release_reply = loop_release,
	.destroy = loop_destroy,
	.wait = sw_wait,
	.submit_wait = sw_submit_wait,
};
static const struct rr_xprt_client_ops sv_wait_only_ops = {
	.create = loop_create,
	.submit = sw_submit,
	.abort = loop_abort,
	.release_reply = loop_release,
	.destroy = loop_destroy,
	.wait = sw_wait,
};
static const struct rr_xprt_class sw_class = {"loopsw", &sw_client_ops, NULL};
static const struct rr_xprt_class sv_wait_class = {"loopwait", &sv_wait_only_ops, NULL};

/* rpcrdma_call_run enters a transport that offers submit_wait once, through
 * it (its first wait: RR_XPRT_FIRST_WAIT_MS when the timeout and 1 ms is
 * longer), and neither submit nor wait when it answered; one without it
 * gets submit then wait; rpcrdma_call_start gets submit alone. A refused
 * submit_wait leaves the call new (it can be run again). The Call header
 * follows the credential set last (AUTH_NONE is encoded without the
 * client's lock) with consecutive XIDs. */
TEST(rpc_xprt_contract_submit_wait)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	struct rpcrdma_auth_sys sys = {.uid = 5};
	struct cb_ctx cc;
	uint32_t xid;

	REQUIRE_EQ(rr_xprt_register(&sw_class), 0);
	REQUIRE_EQ(rr_xprt_register(&sv_wait_class), 0);
	REQUIRE_EQ(rpcrdma_client_create("loopsw://x:1", 7, 1, NULL, &c), 0);
	sw_submits = sw_waits = sw_submit_waits = 0;
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	rpcrdma_call_set_timeout(call, 1234);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(sw_submit_waits, 1);
	CHECK_EQ(sw_submits, 0);
	CHECK_EQ(sw_waits, 0);
	CHECK_EQ(sw_wait_ms, RR_XPRT_FIRST_WAIT_MS);
	CHECK_EQ(loop_positions_ok, 1);
	CHECK_EQ(rr_get_be32(loop_full + 24), RPCRDMA_AUTH_NONE);
	xid = rpcrdma_call_xid(call);
	rpcrdma_call_destroy(call);

	/* refused: the error, and the call is new again */
	sw_rc = -ENOMEM;
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	CHECK_EQ(rpcrdma_call_xid(call), xid + 1);
	CHECK_EQ(rpcrdma_call_run(call), -ENOMEM);
	sw_rc = 0;
	CHECK_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(sw_submit_waits, 3);
	rpcrdma_call_destroy(call);

	/* AUTH_SYS then AUTH_NONE again, as the headers say */
	REQUIRE_EQ(rpcrdma_client_set_auth_sys(c, &sys), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rr_get_be32(loop_full + 24), RPCRDMA_AUTH_SYS);
	rpcrdma_call_destroy(call);
	REQUIRE_EQ(rpcrdma_client_set_auth_none(c), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rr_get_be32(loop_full + 24), RPCRDMA_AUTH_NONE);
	CHECK_EQ(rr_get_be32(loop_full + 28), 0);   /* empty body */
	rpcrdma_call_destroy(call);

	/* an asynchronous start: submit alone */
	atomic_init(&cc.calls, 0);
	cc.starter = pthread_self();
	sw_submits = sw_submit_waits = 0;
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, cb, &cc), 0);
	CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
	CHECK_EQ(sw_submits, 1);
	CHECK_EQ(sw_submit_waits, 0);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);

	/* wait without submit_wait: submit, then wait */
	REQUIRE_EQ(rpcrdma_client_create("loopwait://x:1", 7, 1, NULL, &c), 0);
	sw_submits = sw_waits = sw_submit_waits = 0;
	REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(sw_submits, 1);
	CHECK_EQ(sw_waits, 1);
	CHECK_EQ(sw_submit_waits, 0);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
}

static int h_ddp_arg(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	const void *p;
	uint32_t len, pre, post;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(d, &pre) || rpcrdma_xdr_get_ddp(d, &p, &len) ||
	    rpcrdma_xdr_get_u32(d, &post))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), pre);
	rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), p, len);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), post);
	return RPCRDMA_SVC_OK;
}

TEST(rpc_xprt_contract_server_ext_items)
{
	struct rpcrdma_server *s = NULL;
	static const uint8_t chunk[6] = {0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5};
	uint8_t msg[128];
	size_t n = 0;
	struct rr_rpc_ext ext;
	struct rr_xprt_req req;
	struct rr_xdr_dec d;
	struct rr_rpc_reply r;
	uint32_t v;
	const uint8_t *q;

	REQUIRE_EQ(rr_xprt_register(&loop_class), 0);
	REQUIRE_EQ(rpcrdma_server_create("loop://x:1", NULL, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 7, 1, 5, h_ddp_arg, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	REQUIRE(loop_srv != NULL);

	/* Inline Call: header, u32, length word 6 (data removed, as after a
	 * Read chunk was pulled), u32. */
	rr_put_be32(msg + n, 0xabc), n += 4;
	rr_put_be32(msg + n, 0), n += 4;
	rr_put_be32(msg + n, 2), n += 4;
	rr_put_be32(msg + n, 7), n += 4;
	rr_put_be32(msg + n, 1), n += 4;
	rr_put_be32(msg + n, 5), n += 4;
	memset(msg + n, 0, 16), n += 16;
	rr_put_be32(msg + n, 0x1234), n += 4;
	rr_put_be32(msg + n, 6), n += 4;
	ext.inline_off = n;
	ext.ptr = chunk;
	ext.len = 6;
	rr_put_be32(msg + n, 0x5678), n += 4;
	memset(&req, 0, sizeof(req));
	req.msg = msg;
	req.len = n;
	req.ext = &ext;
	req.n_ext = 1;
	loop_srv->p.recv(loop_srv->p.ctx, &req);

	pthread_mutex_lock(&loop_srv->lock);
	for (uint64_t dl_ = rr_test_deadline();
	     loop_srv->dones < 1 &&
	     rr_test_wait_left(dl_, "loop_srv->dones < 1 to turn false");) {
		pthread_mutex_unlock(&loop_srv->lock);
		usleep(10000);
		pthread_mutex_lock(&loop_srv->lock);
	}
	CHECK_EQ(loop_srv->replies, 1);
	CHECK_EQ(loop_srv->dones, 1);
	rr_xdr_dec_init(&d, loop_srv->reply, loop_srv->reply_len);
	pthread_mutex_unlock(&loop_srv->lock);
	REQUIRE_EQ(rr_rpcmsg_decode_reply(&d, &r), 0);
	CHECK_EQ(r.xid, 0xabc);
	CHECK_EQ(r.accept_stat, RR_RPC_SUCCESS);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &v), 0);
	CHECK_EQ(v, 0x1234);
	REQUIRE_EQ(rr_xdr_get_opaque_ref(&d, 64, &q, &v), 0);
	CHECK_EQ(v, 6);
	CHECK(memcmp(q, chunk, 6) == 0);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &v), 0);
	CHECK_EQ(v, 0x5678);
	rpcrdma_server_destroy(s);
}

/* ---- send_reply_done: the reply and the transport's done in one step ---- */

static int rd_reply_dones, rd_order;   /* rd_order: 1 release hook, 2 req_done */
static int rd_release_seen_done;

static int lsrv_send_reply_done(struct rr_xprt_server *s, struct rr_xprt_req *req,
				const struct rr_xprt_msg *m, void (*sent)(void *arg, int status),
				void *arg)
{
	int rc;

	(void)sent;
	(void)arg;
	rc = lsrv_send_reply(s, req, m);
	if (rc == 0) {
		pthread_mutex_lock(&s->lock);
		rd_reply_dones++;
		s->dones++;   /* finished here: req_done must not follow */
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->lock);
	}
	return rc;
}

static void rd_req_done(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	rd_order = rd_order * 10 + 2;
	lsrv_req_done(s, req);
}

static const struct rr_xprt_server_ops rd_server_ops = {
	.create = lsrv_create,
	.port = lsrv_port,
	.start = lsrv_start,
	.send_reply = lsrv_send_reply,
	.send_reply_done = lsrv_send_reply_done,
	.req_done = rd_req_done,
	.stop = lsrv_stop,
	.destroy = lsrv_destroy,
};

static const struct rr_xprt_class rd_class = {"loopdone", &loop_client_ops, &rd_server_ops};

static void rd_release(void *arg)
{
	(void)arg;
	rd_release_seen_done = loop_srv->dones;
	rd_order = rd_order * 10 + 1;
}

/* proc 1: no release hook; proc 2: a results release hook */
static int h_rd(struct rpcrdma_req *r, void *ctx)
{
	(void)ctx;
	if (rpcrdma_req_proc(r) == 2)
		rpcrdma_req_set_release(r, rd_release, NULL);
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), 0x77);
	return RPCRDMA_SVC_OK;
}

/* Injects a Call of (7, 1, @proc) with XID @xid and waits for its done. */
static void rd_call(uint32_t xid, uint32_t proc, int dones)
{
	uint8_t msg[64];
	size_t n = 0;
	struct rr_xprt_req req;

	rr_put_be32(msg + n, xid), n += 4;
	rr_put_be32(msg + n, 0), n += 4;
	rr_put_be32(msg + n, 2), n += 4;
	rr_put_be32(msg + n, 7), n += 4;
	rr_put_be32(msg + n, 1), n += 4;
	rr_put_be32(msg + n, proc), n += 4;
	memset(msg + n, 0, 16), n += 16;
	memset(&req, 0, sizeof(req));
	req.msg = msg;
	req.len = n;
	loop_srv->p.recv(loop_srv->p.ctx, &req);
	pthread_mutex_lock(&loop_srv->lock);
	for (uint64_t dl_ = rr_test_deadline();
	     loop_srv->dones < dones &&
	     rr_test_wait_left(dl_, "loop_srv->dones < dones to turn false");) {
		pthread_mutex_unlock(&loop_srv->lock);
		usleep(10000);
		pthread_mutex_lock(&loop_srv->lock);
	}
	pthread_mutex_unlock(&loop_srv->lock);
}

/* A transport offering send_reply_done: a Reply with nothing to release
 * finishes the request there (no req_done after it: one step, one hold of
 * the transport's lock per call on rdma://); a request whose results have
 * a release hook still goes reply, hook, req_done, in that order. */
TEST(rpc_xprt_contract_server_reply_done)
{
	struct rpcrdma_server *s = NULL;

	rd_reply_dones = rd_order = 0;
	rd_release_seen_done = -1;
	REQUIRE_EQ(rr_xprt_register(&rd_class), 0);
	REQUIRE_EQ(rpcrdma_server_create("loopdone://x:1", NULL, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 7, 1, 1, h_rd, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, 7, 1, 2, h_rd, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	REQUIRE(loop_srv != NULL);

	rd_call(0x100, 1, 1);
	pthread_mutex_lock(&loop_srv->lock);
	CHECK_EQ(loop_srv->replies, 1);
	CHECK_EQ(loop_srv->dones, 1);
	pthread_mutex_unlock(&loop_srv->lock);
	CHECK_EQ(rd_reply_dones, 1);
	CHECK_EQ(rd_order, 0);   /* req_done not called again */

	rd_call(0x101, 2, 2);
	pthread_mutex_lock(&loop_srv->lock);
	CHECK_EQ(loop_srv->replies, 2);
	CHECK_EQ(loop_srv->dones, 2);
	pthread_mutex_unlock(&loop_srv->lock);
	CHECK_EQ(rd_reply_dones, 1);         /* not used: a hook to run first */
	CHECK_EQ(rd_order, 12);              /* the hook, then req_done */
	CHECK_EQ(rd_release_seen_done, 1);   /* before this request's done */
	rpcrdma_server_destroy(s);
}

TEST(rpc_xprt_registry)
{
	const struct rr_xprt_class *cls;
	static const struct rr_xprt_class bad = {"", NULL, NULL};
	static const struct rr_xprt_class noclient = {"srvonly", NULL, &loop_server_ops};
	struct rpcrdma_client *c;

	CHECK_EQ(rr_xprt_lookup("tcp", &cls), 0);
	CHECK(cls == &rr_xprt_tcp_class);
	/* built in, so a static link has it without a constructor */
	CHECK_EQ(rr_xprt_lookup("rdma", &cls), 0);
	CHECK(cls == &rr_xprt_rdma_class);
	CHECK_EQ(rr_xprt_lookup("nope", &cls), -EINVAL);
	CHECK_EQ(rr_xprt_register(&bad), -EINVAL);
	CHECK_EQ(rr_xprt_register(NULL), -EINVAL);
	REQUIRE_EQ(rr_xprt_register(&noclient), 0);
	CHECK_EQ(rpcrdma_client_create("srvonly://h:1", 1, 1, NULL, &c), -EPROTONOSUPPORT);
}
