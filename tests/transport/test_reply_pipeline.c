/* SPDX-License-Identifier: BSD-2-Clause */
/* Pipelined Replies of the RPC-over-RDMA v1 responder (RFC 8166 section 3.4,
 * transport/rdma/tp.h rr_tp_server_reply_async): a Reply's RDMA Writes and
 * Send are posted without waiting for their completion, the Reply's memory
 * (and its registrations) released by the Send completion. Over the soft
 * iWARP provider in one process: many outstanding Calls answered on the
 * progress thread with Write chunks and Reply chunks (data verified, no STag
 * left valid), a connection cut and a server destroyed while Replies of
 * several MiB are still being sent (every sent upcall exactly once, failed
 * ones with an error, all memory freed: ASan), and the same through the
 * public RPC API with inline handlers (RPCRDMA_SERVER_INLINE), Replies in
 * Write chunks and reliable-reply Read chunks.
 *
 * Test protocol (invented here). Call: xid, CALL(0), n (item length),
 * f (filler length). Reply: xid, REPLY(1), n, data<n> (DDP-eligible),
 * filler[f] (not DDP-eligible). */
#include <pthread.h>
#include <stdlib.h>

#include "rpcrdma/stats.h"
#include "test.h"

#include <unistd.h>
#include "engine/engine.h"
#include "engine/loop.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

static uint8_t ppat(uint32_t xid, uint32_t i)
{
	return (uint8_t)(xid * 29u + i * 13u + (i >> 11));
}

/* ---- responder: answers on the progress thread, asynchronously ---- */
struct psrv {
	struct rr_tp_server *tp;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned posted;     /* replies posted (async pending + inline) */
	unsigned pending;    /* rr_tp_server_reply_async returned 1 */
	unsigned sent_ok, sent_err, sent_calls;
	unsigned immediate;  /* returned 0: memory free at once */
	unsigned fail;       /* returned < 0 */
	bool cut_after;      /* cut the connections after this many posts */
	unsigned cut_at;
	/* destroy meeting a sent upcall that runs on a loop: the next one
	 * (off the destroying thread) waits there until the destroy hook
	 * tells the step of its loop's shard */
	bool hold;
	pthread_t destroyer;
	int held_loop;       /* -1: none held yet */
	unsigned phase;      /* the hook's first word for that loop */
};

struct pans {
	struct psrv *s;
	struct rr_conn_sreq *req;
	uint8_t hdr[12];
	uint8_t *data, *filler;
	unsigned calls;      /* sent upcalls seen for this answer */
};

static void pans_free(struct pans *a)
{
	rr_tp_server_done(a->s->tp, a->req);
	free(a->data);
	free(a->filler);
	free(a);
}

/* The loop index the calling thread runs, or -1. */
static int this_loop(void)
{
	struct rr_loop *l = rr_loop_current();

	for (unsigned i = 0; l && i < rr_engine_nloops(); i++)
		if (rr_engine_loop(i) == l)
			return (int)i;
	return -1;
}

/* The client configuration of these tests: no extension capabilities, a
 * 3 s connect, and with @no_reconnect none after a loss. */
static void pcl_conf(struct rr_tp_conf *cc, bool no_reconnect)
{
	rr_tp_conf_default(cc);
	cc->ext_caps = 0;
	cc->connect_timeout_ms = 3000;
	cc->no_reconnect = no_reconnect;
}

/* s->lock held. Whether destroy had freed the connection of this upcall's
 * request when the held upcall was let go (it must never have). */
static bool psrv_hold(struct psrv *s)
{
	if (!s->hold || pthread_equal(pthread_self(), s->destroyer) || this_loop() < 0 ||
	    (unsigned)this_loop() == rr_tp_server_listen_loop(s->tp))
		return false;
	s->hold = false;
	s->held_loop = this_loop();
	pthread_cond_broadcast(&s->cond);
	while (!s->phase)
		pthread_cond_wait(&s->cond, &s->lock);
	return s->phase == RR_TP_DESTROY_RELEASED;
}

static void psrv_destroy_hook(void *arg, int phase, unsigned loop)
{
	struct psrv *s = arg;

	pthread_mutex_lock(&s->lock);
	if ((int)loop == s->held_loop && !s->phase) {
		s->phase = (unsigned)phase;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

static void psrv_sent(void *arg, int status)
{
	struct pans *a = arg;
	struct psrv *s = a->s;

	pthread_mutex_lock(&s->lock);
	if (psrv_hold(s)) {
		/* its request and connection are freed memory now */
		CHECK(!"destroy freed the connection under a running sent upcall");
		s->sent_calls++;
		pthread_mutex_unlock(&s->lock);
		free(a->data);
		free(a->filler);
		free(a);
		return;
	}
	a->calls++;
	s->sent_calls++;
	if (a->calls > 1)
		s->fail++;   /* never twice */
	if (status)
		s->sent_err++;
	else
		s->sent_ok++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	/* The transport no longer reads the Reply: scribble, then free (ASan
	 * reports a later read). */
	memset(a->data, 0xdd, rr_get_be32(a->hdr + 8));
	pans_free(a);
}

static void psrv_recv(void *ctx, struct rr_conn_sreq *r)
{
	struct psrv *s = ctx;
	struct pans *a = calloc(1, sizeof(*a));
	struct rr_xprt_part parts[3];
	uint32_t n, f;
	bool err = false, cut = false;
	int rc;

	/* an upcall on the transport's thread: CHECK, never REQUIRE */
	CHECK(a);
	if (!a) {
		rr_tp_server_done(s->tp, r);
		return;
	}
	a->s = s;
	a->req = r;
	if (r->len < 16) {
		rr_tp_server_done(s->tp, r);
		free(a);
		return;
	}
	n = rr_get_be32(r->msg + 8);
	f = rr_get_be32(r->msg + 12);
	a->data = malloc(n + 1);
	a->filler = malloc(f + 1);
	CHECK(a->data && a->filler);
	if (!a->data || !a->filler) {
		pans_free(a);   /* done with @r too */
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		a->data[i] = ppat(r->xid, i);
	for (uint32_t i = 0; i < f; i++)
		a->filler[i] = (uint8_t)(i * 5 + 3);
	rr_put_be32(a->hdr, r->xid);
	rr_put_be32(a->hdr + 4, 1);
	rr_put_be32(a->hdr + 8, n);
	parts[0] = (struct rr_xprt_part){a->hdr, 12, false};
	parts[1] = (struct rr_xprt_part){a->data, n, true};
	parts[2] = (struct rr_xprt_part){a->filler, f, false};
	rc = rr_tp_server_reply_async(s->tp, r, parts, 3, &err, psrv_sent, a);
	pthread_mutex_lock(&s->lock);
	s->posted++;
	if (rc == 1)
		s->pending++;
	else if (rc == 0 && !err)
		s->immediate++;
	else
		s->fail++;
	cut = s->cut_after && s->posted == s->cut_at;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (rc != 1)
		pans_free(a);
	if (cut)
		rr_tp_server_cut(s->tp);
}

static int psrv_start(struct psrv *s, unsigned credits)
{
	struct rr_tp_conf sc;
	int rc;

	memset(s, 0, sizeof(*s));
	s->held_loop = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	rr_tp_conf_default(&sc);
	sc.credits = credits;
	sc.ext_caps = 0;
	rc = rr_th_tp_server(&sc, psrv_recv, s, &s->tp);
	return rc ? rc : rr_tp_server_port(s->tp);
}

static void psrv_fini(struct psrv *s)
{
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
}

static unsigned psrv_get(struct psrv *s, const unsigned *field)
{
	unsigned v;

	pthread_mutex_lock(&s->lock);
	v = *field;
	pthread_mutex_unlock(&s->lock);
	return v;
}

/* ---- requester ---- */
struct pcall {
	struct rr_conn_rpc r;
	uint8_t call[16];
	struct rr_xprt_part part;
	struct rr_xprt_sink sink;
	uint8_t *sinkbuf;
	uint32_t n, f;
	unsigned completions;
};

static void pcl_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct rr_th_cl *c = ctx;
	struct pcall *p = RR_CONTAINER_OF(r, struct pcall, r);

	pthread_mutex_lock(&c->lock);
	p->completions++;
	c->done++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static struct pcall *pcall_new(uint32_t xid, uint32_t n, uint32_t f)
{
	struct pcall *p = calloc(1, sizeof(*p));

	REQUIRE(p);
	p->n = n;
	p->f = f;
	p->sinkbuf = malloc(n + 64);
	REQUIRE(p->sinkbuf);
	memset(p->sinkbuf, 0xee, n + 64);
	rr_put_be32(p->call, xid);
	rr_put_be32(p->call + 4, 0);
	rr_put_be32(p->call + 8, n);
	rr_put_be32(p->call + 12, f);
	p->part = (struct rr_xprt_part){p->call, 16, false};
	p->sink = (struct rr_xprt_sink){p->sinkbuf, n + 64};
	p->r.xid = xid;
	p->r.parts = &p->part;
	p->r.nparts = 1;
	p->r.sinks = &p->sink;
	p->r.nsinks = 1;
	p->r.max_reply = 12 + f + 64;   /* > 4096 with f large: a Reply chunk */
	return p;
}

static bool pcall_ok(const struct pcall *p)
{
	const uint8_t *m = p->r.reply;

	if (p->r.status || !m || p->r.reply_len != 12 + p->f)
		return false;
	if (rr_get_be32(m) != p->r.xid || rr_get_be32(m + 4) != 1 || rr_get_be32(m + 8) != p->n)
		return false;
	if (!p->r.is_placed[0] || p->r.placed[0] != p->n)
		return false;
	for (uint32_t i = 0; i < p->n; i++)
		if (p->sinkbuf[i] != ppat(p->r.xid, i))
			return false;
	if (p->sinkbuf[p->n] != 0xee)
		return false;
	for (uint32_t i = 0; i < p->f; i++)
		if (m[12 + i] != (uint8_t)(i * 5 + 3))
			return false;
	return true;
}

static void pcall_free(struct rr_th_cl *c, struct pcall *p)
{
	if (p->r.reply)
		rr_tp_client_release_reply(c->tp, &p->r);
	free(p->sinkbuf);
	free(p);
}

/* 64 Calls outstanding at once (grant 64), answered on the progress thread
 * without waiting for any Send: Write chunks of 1..9000 bytes, half of the
 * Replies through a Reply chunk (filler 6000 > the 4096 threshold), data of
 * every Reply verified, every sent upcall exactly once and successful, the
 * requester ends with no STag valid. Twice, so that a second burst meets the
 * send slots and registrations the first one released. */
TEST(xprt_pipe_inline_async_replies)
{
	enum { N = 64 };
	struct psrv s;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	struct pcall *p[N];
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, N);
	REQUIRE(port > 0);
	pcl_conf(&cc, false);
	cc.inline_ddp = false;   /* a Write chunk for every item, even small */
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, pcl_complete), 0);
	for (unsigned round = 0; round < 2; round++) {
		unsigned ok = 0, base = round * N;

		for (unsigned i = 0; i < N; i++) {
			uint32_t n = 1 + (i * 997u + round * 31u) % 9000u;

			p[i] = pcall_new(0x7000 + base + i, n, (i & 1) ? 6000 : 40);
			REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
		}
		REQUIRE(rr_th_cl_wait(&c, base + N, RR_TEST_WAIT_MS));
		for (unsigned i = 0; i < N; i++) {
			CHECK_EQ(p[i]->completions, 1);
			if (pcall_ok(p[i]))
				ok++;
			pcall_free(&c, p[i]);
		}
		CHECK_EQ(ok, N);
	}
	/* The sent upcalls may trail the requester's completions a little. */
	pthread_mutex_lock(&s.lock);
	for (uint64_t dl_ = rr_test_deadline();
	     s.sent_calls < s.pending &&
	     rr_test_wait_left(dl_, "s.sent_calls < s.pending to turn false");) {
		pthread_mutex_unlock(&s.lock);
		rr_th_sleep_ms(5);
		pthread_mutex_lock(&s.lock);
	}
	pthread_mutex_unlock(&s.lock);
	CHECK_EQ(psrv_get(&s, &s.posted), 2 * N);
	CHECK_EQ(psrv_get(&s, &s.pending), 2 * N);   /* every Reply has RDMA Writes */
	CHECK_EQ(psrv_get(&s, &s.sent_ok), 2 * N);
	CHECK_EQ(psrv_get(&s, &s.sent_err), 0);
	CHECK_EQ(psrv_get(&s, &s.fail), 0);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	rr_tp_server_destroy(s.tp);
	psrv_fini(&s);
}

/* The connection cut by the handler right after it answered the N-th Call
 * (small Replies: posted after the batch of upcalls, so that one meets a
 * dead QP): every Reply not sent is told -ENOTCONN, each sent upcall comes
 * exactly once, every buffer is freed (ASan), and the requester's Calls
 * complete (the cut ones with an error, the others with verified data). */
TEST(xprt_pipe_cut_before_post)
{
	enum { N = 8 };
	struct psrv s;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	struct pcall *p[N];
	unsigned failed = 0;
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, 16);
	REQUIRE(port > 0);
	s.cut_after = true;
	s.cut_at = N;
	pcl_conf(&cc, true);
	cc.inline_ddp = false;
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, pcl_complete), 0);
	for (unsigned i = 0; i < N; i++) {
		p[i] = pcall_new(0x9000 + i, 4096, 8);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	REQUIRE(rr_th_cl_wait(&c, N, RR_TEST_WAIT_MS));
	REQUIRE(rr_th_wait_count(&s.lock, &s.cond, &s.sent_calls, N, RR_TEST_WAIT_MS));
	CHECK_EQ(psrv_get(&s, &s.pending), N);
	CHECK_EQ(psrv_get(&s, &s.sent_calls), N);
	CHECK(psrv_get(&s, &s.sent_err) >= 1);   /* at least the N-th */
	CHECK_EQ(psrv_get(&s, &s.fail), 0);
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(p[i]->completions, 1);
		if (p[i]->r.status)
			failed++;
		else
			CHECK(pcall_ok(p[i]));
		pcall_free(&c, p[i]);
	}
	CHECK(failed >= 1);
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	rr_tp_server_destroy(s.tp);
	psrv_fini(&s);
}

/* Replies of 8 MiB each (RDMA Writes of 1 MiB segments: posted at once, the
 * provider sends what the socket takes and queues the rest) and the
 * connection cut right after the last was posted: Sends still queued are
 * flushed with an error completion, Sends already in the socket complete;
 * either way each sent upcall comes exactly once, every buffer is freed
 * (ASan), and the requester's Calls complete (data verified when 0). */
TEST(xprt_pipe_cut_with_replies_in_flight)
{
	enum { N = 3, SZ = 8u << 20 };
	struct psrv s;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	struct pcall *p[N];
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, 16);
	REQUIRE(port > 0);
	s.cut_after = true;
	s.cut_at = N;
	pcl_conf(&cc, true);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, pcl_complete), 0);
	for (unsigned i = 0; i < N; i++) {
		p[i] = pcall_new(0x9100 + i, SZ, 8);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	REQUIRE(rr_th_cl_wait(&c, N, RR_TEST_WAIT_MS));
	REQUIRE(rr_th_wait_count(&s.lock, &s.cond, &s.sent_calls, N, RR_TEST_WAIT_MS));
	CHECK_EQ(psrv_get(&s, &s.pending), N);
	CHECK_EQ(psrv_get(&s, &s.sent_calls), N);
	CHECK_EQ(psrv_get(&s, &s.sent_ok) + psrv_get(&s, &s.sent_err), N);
	CHECK_EQ(psrv_get(&s, &s.fail), 0);
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(p[i]->completions, 1);
		CHECK(p[i]->r.status == 0 ? pcall_ok(p[i]) : p[i]->r.status < 0);
		pcall_free(&c, p[i]);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	rr_tp_server_destroy(s.tp);
	psrv_fini(&s);
}

/* The server destroyed while 4 MiB Replies are still queued: destroy tells
 * every pending Reply (-ENOTCONN) exactly once, after which its memory is
 * freed (ASan: no leak, no late read). */
TEST(xprt_pipe_destroy_with_replies_in_flight)
{
	enum { N = 4, SZ = 4u << 20 };
	struct psrv s;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	struct pcall *p[N];
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, 16);
	REQUIRE(port > 0);
	pcl_conf(&cc, true);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, port, pcl_complete), 0);
	for (unsigned i = 0; i < N; i++) {
		p[i] = pcall_new(0xa000 + i, SZ, 8);
		REQUIRE_EQ(rr_tp_client_submit(c.tp, &p[i]->r), 0);
	}
	REQUIRE(rr_th_wait_count(&s.lock, &s.cond, &s.posted, N, RR_TEST_WAIT_MS));
	rr_tp_server_destroy(s.tp);
	CHECK_EQ(psrv_get(&s, &s.pending), N);
	CHECK_EQ(psrv_get(&s, &s.sent_calls), N);   /* all told, by destroy at the latest */
	CHECK_EQ(psrv_get(&s, &s.fail), 0);
	REQUIRE(rr_th_cl_wait(&c, N, RR_TEST_WAIT_MS));
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(p[i]->completions, 1);
		pcall_free(&c, p[i]);
	}
	CHECK_EQ(rr_tp_client_live_stags(c.tp), 0);
	rr_th_cl_stop(&c);
	psrv_fini(&s);
}

/* A server destroyed while one of its loops runs a sent upcall (which
 * calls rr_tp_server_done: the request and its connection are still in
 * use): the upcall is held on its loop until the destroy hook tells how
 * far destroy got on that loop's shard. Destroy must wait for the upcall
 * before it frees the connections (RR_TP_DESTROY_WAIT_LOOP first); freeing
 * them under it was the crash 1 run in 40-120 of the test above. */
TEST(xprt_pipe_destroy_waits_for_running_sent_upcall)
{
	enum { NC = 2, N = 3 };
	struct psrv s;
	struct rr_th_cl c[NC];
	struct rr_tp_conf cc;
	struct pcall *p[NC][N];
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, 16);
	REQUIRE(port > 0);
	if (rr_engine_nloops() < 2) {
		/* the listener's loop must run while another is held */
		printf("  (skipped: one progress loop; RPCRDMA_PROGRESS_THREADS=2 runs it)\n");
		rr_tp_server_destroy(s.tp);
		psrv_fini(&s);
		return;
	}
	s.destroyer = pthread_self();
	pthread_mutex_lock(&s.lock);
	s.hold = true;
	pthread_mutex_unlock(&s.lock);
	rr_tp_server_destroy_hook(s.tp, psrv_destroy_hook, &s);
	pcl_conf(&cc, true);
	/* connections given round-robin: one on each of two shards */
	for (unsigned k = 0; k < NC; k++) {
		REQUIRE_EQ(rr_th_cl_start(&c[k], &cc, port, pcl_complete), 0);
		for (unsigned i = 0; i < N; i++) {
			p[k][i] = pcall_new(0xb000 + k * N + i, 20000, 8);
			REQUIRE_EQ(rr_tp_client_submit(c[k].tp, &p[k][i]->r), 0);
		}
	}
	/* untimed: a Reply's Send completes on the loop of no listener */
	pthread_mutex_lock(&s.lock);
	while (s.held_loop < 0)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	rr_tp_server_destroy(s.tp);
	CHECK_EQ(psrv_get(&s, &s.phase), RR_TP_DESTROY_WAIT_LOOP);
	CHECK_EQ(psrv_get(&s, &s.sent_calls), psrv_get(&s, &s.pending));
	CHECK_EQ(psrv_get(&s, &s.fail), 0);
	for (unsigned k = 0; k < NC; k++) {
		REQUIRE(rr_th_cl_wait(&c[k], N, RR_TEST_WAIT_MS));
		for (unsigned i = 0; i < N; i++) {
			CHECK_EQ(p[k][i]->completions, 1);
			pcall_free(&c[k], p[k][i]);
		}
		CHECK_EQ(rr_tp_client_live_stags(c[k].tp), 0);
		rr_th_cl_stop(&c[k]);
	}
	psrv_fini(&s);
}

/* The same on the requester's side: a completion upcall held on the
 * client's loop (it reads the Reply, which lies in a Receive buffer of the
 * connection) while rr_tp_client_destroy runs; destroy must wait for it
 * before it frees the connection. */
struct hcl {
	struct rr_th_cl c;   /* first: the upcall's ctx */
	pthread_t destroyer;
	bool hold;
	int held_loop;       /* -1: none held yet */
	unsigned phase;      /* the hook's first word for that loop */
	bool reply_ok;       /* the held upcall read its Reply whole */
};

static void hcl_complete(void *ctx, struct rr_conn_rpc *r)
{
	struct hcl *h = ctx;
	struct pcall *p = RR_CONTAINER_OF(r, struct pcall, r);

	pthread_mutex_lock(&h->c.lock);
	if (h->hold && !pthread_equal(pthread_self(), h->destroyer) && this_loop() >= 0) {
		h->hold = false;
		h->held_loop = this_loop();
		pthread_cond_broadcast(&h->c.cond);
		while (!h->phase)
			pthread_cond_wait(&h->c.cond, &h->c.lock);
		/* freed memory once the connection went: not read then */
		CHECK(h->phase != RR_TP_DESTROY_RELEASED);
		if (h->phase != RR_TP_DESTROY_RELEASED)
			h->reply_ok = !r->status && r->reply && r->reply_len >= 12 &&
				      rr_get_be32(r->reply) == r->xid &&
				      rr_get_be32(r->reply + 4) == 1;
	}
	p->completions++;
	h->c.done++;
	pthread_cond_broadcast(&h->c.cond);
	pthread_mutex_unlock(&h->c.lock);
}

static void hcl_destroy_hook(void *arg, int phase, unsigned loop)
{
	struct hcl *h = arg;

	pthread_mutex_lock(&h->c.lock);
	if ((int)loop == h->held_loop && !h->phase) {
		h->phase = (unsigned)phase;
		pthread_cond_broadcast(&h->c.cond);
	}
	pthread_mutex_unlock(&h->c.lock);
}

TEST(xprt_pipe_client_destroy_waits_for_running_complete_upcall)
{
	struct psrv s;
	struct hcl h;
	struct rr_tp_conf cc;
	struct pcall *p;
	int port;

	if (!rr_th_soft_ok())
		return;
	port = psrv_start(&s, 16);
	REQUIRE(port > 0);
	pcl_conf(&cc, true);
	REQUIRE_EQ(rr_th_cl_start(&h.c, &cc, port, hcl_complete), 0);  /* zeroes h.c */
	h.destroyer = pthread_self();
	h.held_loop = -1;
	h.phase = 0;
	h.reply_ok = false;
	pthread_mutex_lock(&h.c.lock);
	h.hold = true;
	pthread_mutex_unlock(&h.c.lock);
	rr_tp_client_destroy_hook(h.c.tp, hcl_destroy_hook, &h);
	/* an inline Reply (in the Receive buffer) for a loop-run upcall */
	p = pcall_new(0xc000, 100, 8);
	REQUIRE_EQ(rr_tp_client_submit(h.c.tp, &p->r), 0);
	pthread_mutex_lock(&h.c.lock);
	while (h.held_loop < 0)
		pthread_cond_wait(&h.c.cond, &h.c.lock);
	pthread_mutex_unlock(&h.c.lock);
	/* the Reply stays lent to the upcall: destroy takes it back */
	rr_th_cl_stop(&h.c);
	CHECK_EQ(h.phase, RR_TP_DESTROY_WAIT_LOOP);
	CHECK(h.reply_ok);
	CHECK_EQ(p->completions, 1);
	free(p->sinkbuf);
	free(p);
	rr_tp_server_destroy(s.tp);
	psrv_fini(&s);
}

/* ---- the public RPC API with inline handlers ---- */
#define PIPE_PROG 0x20000377u

static unsigned releases;
static pthread_mutex_t rel_lock = PTHREAD_MUTEX_INITIALIZER;

static void rel_count(void *arg)
{
	free(arg);
	pthread_mutex_lock(&rel_lock);
	releases++;
	pthread_mutex_unlock(&rel_lock);
}

/* READ(n, f) -> data<n> (DDP-eligible, from a buffer released by
 * rpcrdma_req_set_release), filler opaque<f>. */
static int h_pread(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	uint32_t n, f, xid = rpcrdma_req_xid(r);
	uint8_t *d, *fl;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) ||
	    rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &f) || n > (1u << 20) || f > 65536)
		return RPCRDMA_SVC_GARBAGE_ARGS;
	d = malloc(n + 1);
	fl = malloc(f + 1);
	if (!d || !fl) {
		free(d);
		free(fl);
		return RPCRDMA_SVC_SYSTEM_ERR;
	}
	for (uint32_t i = 0; i < n; i++)
		d[i] = ppat(xid, i);
	for (uint32_t i = 0; i < f; i++)
		fl[i] = (uint8_t)(i * 5 + 3);
	rpcrdma_req_set_release(r, rel_count, d);
	rpcrdma_xdr_put_ddp(e, d, n);
	rpcrdma_xdr_put_opaque(e, fl, f);
	free(fl);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

struct pslot {
	uint8_t *sink;
	uint32_t n, f, xid;
	int status;
	bool ok, done;
};

static pthread_mutex_t ps_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ps_cond = PTHREAD_COND_INITIALIZER;
static unsigned ps_done;

static void ps_complete(struct rpcrdma_call *call, int status, void *arg)
{
	struct pslot *p = arg;
	bool ok = false;

	if (!status) {
		const void *d, *fl;
		uint32_t len = 0, flen = 0;

		ok = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &d, &len) == 0 &&
		     len == p->n && d == p->sink &&
		     rpcrdma_xdr_get_opaque(rpcrdma_call_results(call), 65536, &fl, &flen) == 0 &&
		     flen == p->f;
		for (uint32_t i = 0; ok && i < p->n; i++)
			ok = p->sink[i] == ppat(p->xid, i);
		for (uint32_t i = 0; ok && i < flen; i++)
			ok = ((const uint8_t *)fl)[i] == (uint8_t)(i * 5 + 3);
	}
	rpcrdma_call_destroy(call);
	pthread_mutex_lock(&ps_lock);
	p->status = status;
	p->ok = ok;
	p->done = true;
	ps_done++;
	pthread_cond_broadcast(&ps_cond);
	pthread_mutex_unlock(&ps_lock);
}

/* N asynchronous READs outstanding against a server whose handlers run on
 * the transport's progress thread, each with a Write chunk of up to 64 KiB
 * and f bytes of non-DDP results (odd i: 6000) under a Reply hint of @hint;
 * every result verified, every result buffer released exactly once. */
static void rpc_inline_run(unsigned N, size_t hint)
{
	struct rpcrdma_xprt_stats st;
	/* Linux's 4096-byte inline sizes: the 6000-byte results exceed them */
	struct rpcrdma_server_opts so = {.threads = 2, .flags = RPCRDMA_SERVER_INLINE,
					 .inline_size = 4096};
	struct rpcrdma_client_opts co = {.inline_size = 4096};
	struct rpcrdma_server *srv;
	struct rpcrdma_client *cl;
	struct pslot *slots;
	char url[64];
	unsigned ok = 0;

	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(rpcrdma_server_create("rdma://127.0.0.1:0", &so, &srv), 0);
	REQUIRE_EQ(rpcrdma_server_register(srv, PIPE_PROG, 1, 1, h_pread, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(srv), 0);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rpcrdma_server_port(srv));
	REQUIRE_EQ(rpcrdma_client_create(url, PIPE_PROG, 1, &co, &cl), 0);
	slots = calloc(N, sizeof(*slots));
	REQUIRE(slots);
	pthread_mutex_lock(&rel_lock);
	releases = 0;
	pthread_mutex_unlock(&rel_lock);
	ps_done = 0;
	for (unsigned i = 0; i < N; i++) {
		struct rpcrdma_call *call;
		struct rpcrdma_ddp_sink sk;

		slots[i].n = 1 + (i * 4099u) % 65536u;
		slots[i].f = (i & 1) ? 6000 : 16;
		slots[i].sink = malloc(slots[i].n);
		REQUIRE(slots[i].sink);
		REQUIRE_EQ(rpcrdma_call_create(cl, 1, &call), 0);
		slots[i].xid = rpcrdma_call_xid(call);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), slots[i].n);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), slots[i].f);
		sk = (struct rpcrdma_ddp_sink){slots[i].sink, slots[i].n};
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rpcrdma_call_set_reply_hint(call, hint);
		REQUIRE_EQ(rpcrdma_call_start(call, ps_complete, &slots[i]), 0);
	}
	pthread_mutex_lock(&ps_lock);
	while (ps_done < N) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 10;
		if (pthread_cond_timedwait(&ps_cond, &ps_lock, &ts))
			break;
	}
	pthread_mutex_unlock(&ps_lock);
	REQUIRE_EQ(ps_done, N);
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(slots[i].status, 0);
		ok += slots[i].ok;
		free(slots[i].sink);
	}
	CHECK_EQ(ok, N);
	/* one RDMA_DONE per Read-chunk Reply; the requester sends it after
	 * completing the call, so the last ones may still be on their way */
	for (uint64_t dl = rr_test_deadline();
	     rr_test_wait_left(dl, "the RDMA_DONEs of the Read-chunk Replies");) {
		REQUIRE_EQ(rpcrdma_server_stats(srv, &st), 0);
		if (st.done_recv >= N / 2)
			break;
		usleep(10000);
	}
	CHECK_EQ(st.done_recv, N / 2);
	rpcrdma_client_destroy(cl);
	rpcrdma_server_destroy(srv);   /* waits for the releases */
	CHECK_EQ(releases, N);
	free(slots);
}

/* 64 outstanding. Reliable reply is negotiated (both sides' default): the
 * 6000-byte results go back in responder-provided Read chunks that the
 * requester pulls and releases with RDMA_DONE (one per such Reply), the
 * others use their Write chunk only; Reply chunks are covered above. */
TEST(xprt_pipe_rpc_inline_handlers_64)
{
	rpc_inline_run(64, 6200);
}

/* ---- the responder core's spares (rr_xprt_rsp_keep_spares) ---- */

/* An RDMA_MSG Call with one Write chunk of one segment and a 12-byte RPC
 * message (xid, CALL, 0). */
static size_t spare_call(uint8_t *b, uint32_t xid, uint32_t stag, uint32_t len)
{
	uint32_t w[] = {xid, 1, 32, 0, /* no Read list */ 0,
			/* Write list: one chunk of one segment (handle, length, offset) */
			1, 1, stag, len, 0, 0x1000, /* end of Write list */ 0,
			/* no Reply chunk */ 0, /* RPC */ xid, 0, 0};

	for (unsigned i = 0; i < RR_ARRAY_SIZE(w); i++)
		rr_put_be32(b + 4 * i, w[i]);
	return sizeof(w);
}

/* Reuse of released Call contexts and of the Reply header changes nothing
 * in what the responder decides or sends: 200 Calls answered through a
 * responder keeping spares and one that does not, byte for byte, with the
 * contexts released out of order; rr_xprt_rsp_fini frees the spares (ASan
 * reports a leak otherwise). */
TEST(xprt_pipe_responder_spares)
{
	struct rr_xprt_responder a, b;
	struct rr_xprt_params p;
	struct rr_xprt_rcall *held_a[8] = {0}, *held_b[8] = {0};
	static uint8_t data[9000];
	struct rr_xprt_reply_plan *pa = malloc(sizeof(*pa)), *pb = malloc(sizeof(*pb));
	uint8_t call[128], sa[4096], sb[4096], err[32];
	unsigned same = 0;

	REQUIRE(pa && pb);
	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 11);
	rr_xprt_params_default(&p);
	p.call_inline = p.reply_inline = 4096;
	rr_xprt_rsp_init(&a, NULL, &p, NULL);
	rr_xprt_rsp_init(&b, NULL, &p, NULL);
	rr_xprt_rsp_keep_spares(&a, 4);
	for (uint32_t i = 0; i < 200; i++) {
		size_t n = spare_call(call, 0x100 + i, 0x5000 + i, 4096 + (i % 3) * 2000);
		struct rr_xprt_rcall *ra, *rb;
		struct rr_xprt_part parts[3];
		uint8_t hdr[8];
		size_t ea, eb;
		int xa, xb;

		REQUIRE_EQ(rr_xprt_rsp_recv(&a, call, n, 8, err, &ea, &ra), RR_XPRT_A_DELIVER);
		REQUIRE_EQ(rr_xprt_rsp_recv(&b, call, n, 8, err, &eb, &rb), RR_XPRT_A_DELIVER);
		CHECK_EQ(ra->msg_len, rb->msg_len);
		CHECK(memcmp(ra->msg, rb->msg, rb->msg_len) == 0);
		rr_put_be32(hdr, 0x100 + i);
		rr_put_be32(hdr + 4, 1);
		parts[0] = (struct rr_xprt_part){hdr, 8, false};
		parts[1] = (struct rr_xprt_part){data, 1 + (i * 37) % 8000, true};
		parts[2] = (struct rr_xprt_part){hdr, 4, false};
		memset(sa, 0, sizeof(sa));
		memset(sb, 0, sizeof(sb));
		xa = rr_xprt_rsp_reply(&a, ra, parts, 3, 8, sa, sizeof(sa), pa);
		xb = rr_xprt_rsp_reply(&b, rb, parts, 3, 8, sb, sizeof(sb), pb);
		CHECK_EQ(xa, xb);
		if (xa == 0 && pa->send_len == pb->send_len && pa->nwrites == pb->nwrites &&
		    pa->is_error == pb->is_error && !memcmp(sa, sb, pa->send_len) &&
		    (pa->nwrites == 0 || (pa->writes[0].len == pb->writes[0].len &&
					  pa->writes[0].stag == pb->writes[0].stag)))
			same++;
		/* keep some, release others out of order */
		rr_xprt_rcall_release(&a, held_a[i % 8]);
		rr_xprt_rcall_release(&b, held_b[i % 8]);
		held_a[i % 8] = (i % 3) ? ra : NULL;
		held_b[i % 8] = (i % 3) ? rb : NULL;
		if (!(i % 3)) {
			rr_xprt_rcall_release(&a, ra);
			rr_xprt_rcall_release(&b, rb);
		}
	}
	CHECK_EQ(same, 200);
	CHECK(a.nspares > 0 && a.nspares <= 4);
	CHECK_EQ(b.nspares, 0);
	for (unsigned i = 0; i < 8; i++) {
		rr_xprt_rcall_release(&a, held_a[i]);
		rr_xprt_rcall_release(&b, held_b[i]);
	}
	rr_xprt_rsp_fini(&a);
	rr_xprt_rsp_fini(&b);
	free(pa);
	free(pb);
}
