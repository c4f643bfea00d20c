/* SPDX-License-Identifier: BSD-2-Clause */
/* The soft provider's lifetime rule for memory a peer can reach
 * (docs/security.md "Lifetime rule"): once rpcrdma_dereg_mr() returns, no
 * byte of that memory is read or written again, whatever the peer does.
 * A raw TCP peer speaking MPA/DDP/RDMAP by hand (so it can stop reading its
 * socket, or send half a segment) against a soft-provider responder:
 *   - an RDMA Read Response stalled on the wire when its memory is
 *     deregistered: what leaves afterwards is only what was copied before;
 *     the connection ends (Terminate when the stream is at an FPDU boundary);
 *   - a queued Read Request whose memory is deregistered before its response
 *     starts: Terminate (RDMAP, Remote Protection Error, Invalid STag);
 *   - an RDMA Write whose target is deregistered halfway through a segment:
 *     the rest is not placed, it draws the Terminate of an invalid STag;
 *   - durable (file-backed) memory whose file shrank: a Write past the end is
 *     a Terminate (bounds), never a SIGBUS; Commit answers not durable. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rdma/soft/race.h"
#include "rdma/soft/soft.h"
#include "test.h"

/* ---- a raw peer ---- */

struct raw {
	int fd;
	uint32_t msn[RR_QN_COUNT];
	/* what came back: Read Response bytes, a Terminate, EOF */
	struct rr_ddp_rx rx;
	uint8_t *sink;            /* Read Response payload lands here */
	size_t sink_len;
	uint64_t resp_bytes;
	bool term;
	struct rr_term t;
	bool eof;
	bool commit_seen;
	struct rr_commit_resp commit;
};

/* Read Responses are placed at their offset into r->sink (sink STag 1,
 * offset 0 in the requests); nothing else is tagged. */
static enum rr_rx_code raw_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to, uint32_t len,
				  bool last, uint8_t **dst)
{
	struct raw *r = ctx;

	(void)last;
	if (op != RR_OP_READ_RESP || stag != 1 || to + len > r->sink_len)
		return RR_RXC_INVALID_STAG;
	*dst = r->sink + to;
	return RR_RXC_OK;
}

static enum rr_rx_code raw_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len, bool last,
				    const struct iovec **iov, unsigned *iovcnt)
{
	(void)ctx, (void)msn, (void)mo, (void)len, (void)last, (void)iov, (void)iovcnt;
	return RR_RXC_NO_RECV;   /* the tests never expect a Send */
}

static const struct rr_ddp_rx_ops raw_ops = {.tagged = raw_tagged, .untagged = raw_untagged};

/* Connects to the soft listener on @port with a receive buffer of @rcvbuf
 * bytes (0: default) and sends the MPA Request; the Reply is read by
 * raw_reply once the server accepted. */
static int raw_connect(struct raw *r, uint16_t port, int rcvbuf)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				.sin_port = htons(port)};
	struct rr_mpa_cfg cfg = {.rev = 2, .ird = 8, .ord = 8};
	struct rr_mpa_frame f;
	uint8_t out[RR_MPA_HDR_LEN + RR_MPA_PD_MAX];
	int n;

	memset(r, 0, sizeof(*r));
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (r->fd < 0)
		return -errno;
	if (rcvbuf)
		(void)setsockopt(r->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (connect(r->fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return -errno;
	if (rr_mpa_make_request(&cfg, NULL, 0, &f))
		return -EINVAL;
	n = rr_mpa_encode(&f, out, sizeof(out));
	if (n <= 0 || write(r->fd, out, (size_t)n) != n)
		return -EIO;
	for (int q = 0; q < RR_QN_COUNT; q++)
		r->msn[q] = 1;
	rr_ddp_rx_init(&r->rx, &raw_ops, r, false, true);
	return 0;
}

static int raw_reply(struct raw *r)
{
	struct rr_mpa_parser p;
	struct rr_mpa_frame f;

	rr_mpa_parser_init(&p, true);
	for (;;) {
		uint8_t *dst;
		size_t w = rr_mpa_want(&p, &dst);
		ssize_t n;
		int rc;

		if (!w)
			break;
		n = read(r->fd, dst, w);
		if (n <= 0)
			return -EIO;
		rc = rr_mpa_advance(&p, (size_t)n);
		if (rc < 0)
			return rc;
		if (rc == 1)
			break;
	}
	return rr_mpa_parser_frame(&p, &f) == 0 && !(f.flags & RR_MPA_F_REJECT) ? 0 : -ECONNREFUSED;
}

/* Writes the whole message (all its FPDUs) described by @m. */
static int raw_send_msg(struct raw *r, struct rr_ddp_txmsg *m)
{
	struct rr_fpdu f;

	while (rr_ddp_tx_next(m, false, 16384, &f) == 1) {
		struct iovec *v = f.iov;
		unsigned c = f.iovcnt;

		while (c) {
			ssize_t n = writev(r->fd, v, (int)c);

			if (n <= 0)
				return -EIO;
			while (c && (size_t)n >= v->iov_len) {
				n -= (ssize_t)v->iov_len;
				v++;
				c--;
			}
			if (c) {
				v->iov_base = (uint8_t *)v->iov_base + n;
				v->iov_len -= (size_t)n;
			}
		}
		if (f.last)
			break;
	}
	return 0;
}

/* An RDMA Read Request for @size bytes at @to of @stag, into sink STag 1 at
 * offset @sink_to. */
static int raw_read_req(struct raw *r, uint32_t stag, uint64_t to, uint32_t size, uint64_t sink_to)
{
	struct rr_rreq q = {.sink_stag = 1, .sink_to = sink_to, .size = size, .src_stag = stag,
			    .src_to = to};
	uint8_t body[RR_RREQ_BODY];
	struct iovec v = {body, sizeof(body)};
	struct rr_ddp_txmsg m;

	rr_rdmap_rreq_encode(&q, body);
	if (rr_ddp_txmsg_untagged(&m, RR_OP_READ_REQ, RR_QN_READ, r->msn[RR_QN_READ]++, 0, &v, 1))
		return -EINVAL;
	return raw_send_msg(r, &m);
}

/* The header and the first @first bytes of an RDMA Write segment of @len
 * bytes of @data to @stag at @to (one FPDU); raw_write_rest sends the rest. */
static int raw_write_part(struct raw *r, uint32_t stag, uint64_t to, const uint8_t *data,
			  uint32_t len, uint32_t first, struct rr_fpdu *f)
{
	struct iovec v = {(void *)(uintptr_t)data, len};
	struct rr_ddp_txmsg m;
	size_t sent = 0, upto;

	if (rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, stag, to, &v, 1) ||
	    rr_ddp_tx_next(&m, false, len + 64, f) != 1 || !f->last)
		return -EINVAL;
	/* the header, then @first payload bytes */
	upto = f->iov[0].iov_len + first;
	for (unsigned i = 0; i < f->iovcnt && sent < upto; i++) {
		size_t n = RR_MIN(upto - sent, f->iov[i].iov_len);

		if (write(r->fd, f->iov[i].iov_base, n) != (ssize_t)n)
			return -EIO;
		sent += n;
		f->iov[i].iov_base = (uint8_t *)f->iov[i].iov_base + n;
		f->iov[i].iov_len -= n;
	}
	return 0;
}

static int raw_write_rest(struct raw *r, struct rr_fpdu *f)
{
	for (unsigned i = 0; i < f->iovcnt; i++)
		if (f->iov[i].iov_len &&
		    write(r->fd, f->iov[i].iov_base, f->iov[i].iov_len) != (ssize_t)f->iov[i].iov_len)
			return -EIO;
	return 0;
}

/* Reads and parses what comes back until EOF, a Terminate, a parse error,
 * a Commit Response (@until_commit) or ~@ms of silence. Reads one byte at a
 * time with @until_commit, so nothing after the Commit Response is taken. */
static void raw_drain_how(struct raw *r, int ms, bool until_commit)
{
	static uint8_t buf[65536];

	while (!r->eof && !r->term) {
		struct pollfd p = {r->fd, POLLIN, 0};
		size_t off = 0;
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return;
		n = read(r->fd, buf, until_commit ? 1 : sizeof(buf));
		if (n <= 0) {
			r->eof = true;
			return;
		}
		while (off < (size_t)n) {
			struct rr_ddp_event ev;
			size_t used;
			int rc = rr_ddp_rx_feed(&r->rx, buf + off, (size_t)n - off, &used, &ev);

			off += used;
			if (rc == 1 && ev.type == RR_EV_TAGGED)
				r->resp_bytes += ev.len;
			if (rc == 1 && ev.type == RR_EV_COMMIT_RESP) {
				r->commit_seen = true;
				r->commit = ev.u.cresp;
				if (until_commit)
					return;
			}
			if (rc == -ECONNRESET || (rc == 1 && ev.type == RR_EV_TERMINATE)) {
				r->term = true;
				r->t = ev.u.term;
				return;
			}
			if (rc < 0) {
				r->eof = true;   /* the stream broke off mid-FPDU */
				return;
			}
		}
	}
}

static void raw_drain(struct raw *r, int ms)
{
	raw_drain_how(r, ms, false);
}

static void raw_drain_until_commit(struct raw *r, int ms)
{
	raw_drain_how(r, ms, true);
}

/* ---- the soft responder ---- */

struct srv {
	struct rpcrdma_context *ctx;
	struct rpcrdma_cm_channel *ch;
	struct rpcrdma_cm_id *listen, *id;
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	uint16_t port;
};

static int srv_cm(struct srv *s, struct rpcrdma_cm_event *ev, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (rpcrdma_cm_get_event(s->ch, ev) == 0)
			return 0;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static void srv_up(struct srv *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct rpcrdma_cq_attr ca = {.cqe = 256};
	struct rpcrdma_qp_attr qa = {0};

	memset(s, 0, sizeof(*s));
	REQUIRE_EQ(rpcrdma_open("soft", NULL, &s->ctx), 0);
	REQUIRE_EQ(rpcrdma_cm_channel_create(s->ctx, &s->ch), 0);
	REQUIRE_EQ(rpcrdma_listen(s->ch, (struct sockaddr *)&a, sizeof(a), 8, NULL, &s->listen), 0);
	REQUIRE_EQ(rpcrdma_cm_local_addr(s->listen, &ss), 0);
	s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	REQUIRE_EQ(rpcrdma_pd_alloc(s->ctx, &s->pd), 0);
	REQUIRE_EQ(rpcrdma_cq_create(s->ctx, &ca, &s->cq), 0);
	qa.send_cq = qa.recv_cq = s->cq;
	qa.max_send_wr = qa.max_recv_wr = 64;
	qa.max_send_sge = qa.max_recv_sge = 4;
	REQUIRE_EQ(rpcrdma_qp_create(s->pd, &qa, &s->qp), 0);
}

/* Accepts the raw peer's connection request (Commit enabled). */
static void srv_accept(struct srv *s, struct raw *r)
{
	struct rpcrdma_cm_event ev;
	struct rpcrdma_conn_param cp = {.responder_resources = 8, .initiator_depth = 8,
					.flags = RPCRDMA_CONN_COMMIT};

	REQUIRE_EQ(srv_cm(s, &ev, 5000), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_CONNECT_REQUEST);
	s->id = ev.id;
	REQUIRE_EQ(rpcrdma_accept(s->id, s->qp, &cp), 0);
	REQUIRE_EQ(raw_reply(r), 0);
	REQUIRE_EQ(srv_cm(s, &ev, 5000), 0);
	REQUIRE_EQ(ev.type, RPCRDMA_CM_ESTABLISHED);
	REQUIRE_EQ(rpcrdma_qp_set_commit(s->qp, true), 0);
}

static struct soft_qp *sqp(struct srv *s)
{
	return RR_CONTAINER_OF(RR_BASE(qp, s->qp), struct soft_qp, base);
}

/* True once the server's transmit waits for the socket (the peer does not
 * read), within RR_TEST_WAIT_MS at least. */
static bool srv_tx_stalled(struct srv *s)
{
	struct soft_qp *q = sqp(s);

	for (int i = 0; i < RR_TEST_WAIT_MS; i++) {
		bool st;

		rr_lock(&q->tx_lock);
		st = q->want_out;
		rr_unlock(&q->tx_lock);
		if (st)
			return true;
		usleep(1000);
	}
	return false;
}

/* True once the server QP holds @n inbound Read Requests, within
 * RR_TEST_WAIT_MS at least. */
static bool srv_irq_count(struct srv *s, uint32_t n)
{
	struct soft_qp *q = sqp(s);

	for (int i = 0; i < RR_TEST_WAIT_MS; i++) {
		uint32_t c;

		rr_lock(&q->tx_lock);
		c = q->irq_count;
		rr_unlock(&q->tx_lock);
		if (c >= n)
			return true;
		usleep(1000);
	}
	return false;
}

/* Waits RR_TEST_WAIT_MS at least for the server QP's disconnect: true when
 * it came. */
static bool srv_disconnected(struct srv *s)
{
	struct rpcrdma_cm_event ev;

	while (srv_cm(s, &ev, RR_TEST_WAIT_MS) == 0)
		if (ev.type == RPCRDMA_CM_DISCONNECTED)
			return true;
	return false;
}

static void srv_down(struct srv *s)
{
	if (s->id)
		rpcrdma_cm_id_destroy(s->id);
	rpcrdma_qp_destroy(s->qp);
	rpcrdma_cq_destroy(s->cq);
	rpcrdma_pd_free(s->pd);
	rpcrdma_cm_id_destroy(s->listen);
	rpcrdma_cm_channel_destroy(s->ch);
	rpcrdma_close(s->ctx);
}

#define BIG (32u << 20)

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* A Read Response stalls on the wire (the peer does not read); the memory
 * is deregistered and freed, and other data takes its place. The peer then
 * reads everything: every byte it got is of the original memory (not the
 * new data), it did not get all of it, and the connection ended. Without
 * the rule: use after free (ASan), or the new data on the wire. */
TEST(soft_revoke_read_response_in_flight)
{
	struct srv s;
	struct raw r;
	uint8_t *mem = malloc(BIG), *other;
	struct rpcrdma_mr *mr;

	REQUIRE(mem);
	memset(mem, 'A', BIG);
	srv_up(&s);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, mem, BIG, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &mr), 0);
	REQUIRE_EQ(raw_connect(&r, s.port, 4096), 0);
	srv_accept(&s, &r);
	r.sink_len = BIG;
	r.sink = calloc(1, BIG);
	REQUIRE(r.sink);
	REQUIRE_EQ(raw_read_req(&r, rpcrdma_mr_rkey(mr), rpcrdma_mr_remote_offset(mr), BIG, 0), 0);
	REQUIRE(srv_tx_stalled(&s));
	REQUIRE_EQ(rpcrdma_dereg_mr(mr), 0);
	free(mem);
	other = malloc(BIG);   /* often the same memory again */
	REQUIRE(other);
	memset(other, 'Z', BIG);
	raw_drain(&r, 5000);
	CHECK(r.eof || r.term);
	CHECK(r.resp_bytes < BIG);
	/* what arrived is the old memory's, never the new data */
	{
		size_t placed = 0;

		while (placed < BIG && r.sink[placed] == 'A')
			placed++;
		CHECK(all_bytes(r.sink + placed, BIG - placed, 0));
	}
	CHECK(srv_disconnected(&s));
	free(other);
	free(r.sink);
	close(r.fd);
	srv_down(&s);
}

/* A second Read Request waits behind a stalled first one; its memory is
 * deregistered before its response starts: the peer gets the whole first
 * response, then the Terminate for an invalid STag, and nothing of the
 * second memory. */
TEST(soft_revoke_queued_read_request)
{
	struct srv s;
	struct raw r;
	uint8_t *a = malloc(BIG), *b = malloc(65536);
	struct rpcrdma_mr *ma, *mb;

	REQUIRE(a && b);
	memset(a, 'A', BIG);
	memset(b, 'B', 65536);
	srv_up(&s);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, a, BIG, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &ma), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, b, 65536, RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_READ, &mb), 0);
	REQUIRE_EQ(raw_connect(&r, s.port, 4096), 0);
	srv_accept(&s, &r);
	r.sink_len = BIG + 65536;
	r.sink = calloc(1, r.sink_len);
	REQUIRE(r.sink);
	REQUIRE_EQ(raw_read_req(&r, rpcrdma_mr_rkey(ma), rpcrdma_mr_remote_offset(ma), BIG, 0), 0);
	REQUIRE_EQ(raw_read_req(&r, rpcrdma_mr_rkey(mb), rpcrdma_mr_remote_offset(mb), 65536, BIG),
		   0);
	REQUIRE(srv_tx_stalled(&s));
	REQUIRE(srv_irq_count(&s, 2));
	REQUIRE_EQ(rpcrdma_dereg_mr(mb), 0);
	memset(b, 'Z', 65536);
	raw_drain(&r, 5000);
	CHECK_EQ(r.resp_bytes, BIG);
	CHECK(all_bytes(r.sink, BIG, 'A'));
	CHECK(all_bytes(r.sink + BIG, 65536, 0));
	REQUIRE(r.term);
	CHECK_EQ(r.t.layer, RR_TL_RDMAP);
	CHECK_EQ(r.t.etype, RR_RDMAP_ET_PROTECTION);
	CHECK_EQ(r.t.ecode, RR_RDMAP_EC_INVALID_STAG);
	CHECK(srv_disconnected(&s));
	REQUIRE_EQ(rpcrdma_dereg_mr(ma), 0);
	free(a);
	free(b);
	free(r.sink);
	close(r.fd);
	srv_down(&s);
}

/* The first part of soft_revoke_write_in_progress_refused's Write placed:
 * seen by the thread that placed it (the provider's reader, at
 * SOFT_RACE_RX_READ, right after its read into the target), which says so
 * under a lock; it never looks at the target again after that (the test
 * reuses the memory then). */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	const uint8_t *tgt;   /* the byte that ends the first part */
	bool placed;
} wip = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, false};

static void wip_hook(enum soft_race pt, void *obj)
{
	(void)obj;
	if (pt != SOFT_RACE_RX_READ)
		return;
	pthread_mutex_lock(&wip.lock);
	if (wip.tgt && !wip.placed && *wip.tgt == 'W') {
		wip.placed = true;
		pthread_cond_broadcast(&wip.cv);
	}
	pthread_mutex_unlock(&wip.lock);
}

static bool wip_wait_placed(void)
{
	struct timespec dl;
	bool placed;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += RR_TEST_WAIT_MS / 1000;
	pthread_mutex_lock(&wip.lock);
	while (!wip.placed && rc == 0)
		rc = pthread_cond_timedwait(&wip.cv, &wip.lock, &dl);
	placed = wip.placed;
	pthread_mutex_unlock(&wip.lock);
	return placed;
}

/* An RDMA Write segment arrives in two parts; between them its target is
 * deregistered and reused: the second part is not placed there, and it is
 * refused as siw refuses it (its STag is checked for every piece): the
 * Terminate of an invalid STag (DDP, tagged buffer, Invalid STag) and the
 * connection ends (its Receive flushed). (Until issue 12 the rest was
 * dropped silently and the connection went on.) */
TEST(soft_revoke_write_in_progress_refused)
{
	struct srv s;
	struct raw r;
	static uint8_t tgt[8192], data[8192], rbuf[64];
	struct rpcrdma_mr *mt, *mrecv;
	struct rr_fpdu f;
	struct rpcrdma_wc wc;
	rr_soft_race_fn old = atomic_load(&rr_soft_race_hook);

	memset(tgt, 0, sizeof(tgt));
	memset(data, 'W', sizeof(data));
	wip.tgt = &tgt[4095];
	wip.placed = false;
	rr_soft_test_set_race_hook(wip_hook);
	srv_up(&s);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, tgt, sizeof(tgt), RPCRDMA_ACCESS_LOCAL_WRITE |
					 RPCRDMA_ACCESS_REMOTE_WRITE, &mt), 0);
	REQUIRE_EQ(rpcrdma_reg_mr_simple(s.pd, rbuf, sizeof(rbuf), RPCRDMA_ACCESS_LOCAL_WRITE,
					 &mrecv), 0);
	{
		struct rpcrdma_sge sg = {(uintptr_t)rbuf, sizeof(rbuf), rpcrdma_mr_lkey(mrecv)};
		struct rpcrdma_recv_wr rw = {.wr_id = 7, .sg_list = &sg, .num_sge = 1};

		REQUIRE_EQ(rpcrdma_post_recv(s.qp, &rw, NULL), 0);
	}
	REQUIRE_EQ(raw_connect(&r, s.port, 0), 0);
	srv_accept(&s, &r);
	REQUIRE_EQ(raw_write_part(&r, rpcrdma_mr_rkey(mt), rpcrdma_mr_remote_offset(mt), data,
				  sizeof(data), 4096, &f), 0);
	/* the first half lands (the progress thread serves the socket and
	 * says so: the target is not read here while it may be written) */
	REQUIRE(wip_wait_placed());
	REQUIRE_EQ(tgt[4095], 'W');
	REQUIRE_EQ(rpcrdma_dereg_mr(mt), 0);
	memset(tgt, 'M', sizeof(tgt));   /* the memory has a new owner */
	REQUIRE_EQ(raw_write_rest(&r, &f), 0);
	raw_drain(&r, 5000);
	REQUIRE(r.term);
	CHECK_EQ(r.t.layer, RR_TL_DDP);
	CHECK_EQ(r.t.etype, RR_DDP_ET_TAGGED);
	CHECK_EQ(r.t.ecode, RR_DDP_EC_T_INVALID_STAG);
	REQUIRE_EQ(rpcrdma_cq_wait(s.cq, 1, &wc, 5000), 1);
	CHECK_EQ(wc.status, RPCRDMA_WC_WR_FLUSH_ERR);   /* the Receive: flushed */
	CHECK_EQ(wc.wr_id, 7);
	CHECK(all_bytes(tgt, sizeof(tgt), 'M'));
	CHECK_EQ(sqp(&s)->state, QPS_ERROR);
	REQUIRE_EQ(rpcrdma_dereg_mr(mrecv), 0);
	close(r.fd);
	srv_down(&s);
	rr_soft_test_set_race_hook(old);
	wip.tgt = NULL;
}

/* Durable memory whose file shrank under its registration: an RDMA Write
 * past the file's end is a Terminate on that connection (DDP tagged base or
 * bounds), not a SIGBUS; the file does not grow. */
TEST(soft_durable_write_past_eof_terminates)
{
	struct srv s;
	struct raw r;
	char path[] = "/tmp/rr-revoke-XXXXXX";
	int fd = mkstemp(path);
	struct rpcrdma_durable_map map;
	struct rpcrdma_mr_attr a;
	struct rpcrdma_mr *mr;
	static uint8_t data[4096];
	struct rr_fpdu f;
	struct stat st;

	REQUIRE(fd >= 0);
	close(fd);
	REQUIRE_EQ(rpcrdma_durable_map(path, 65536, &map), 0);
	srv_up(&s);
	REQUIRE_EQ(rpcrdma_durable_mr_attr(&map, map.addr, 65536, RPCRDMA_ACCESS_LOCAL_WRITE |
					   RPCRDMA_ACCESS_REMOTE_WRITE, &a), 0);
	REQUIRE_EQ(rpcrdma_reg_mr(s.pd, &a, &mr), 0);
	REQUIRE_EQ(raw_connect(&r, s.port, 0), 0);
	srv_accept(&s, &r);
	memset(data, 'D', sizeof(data));
	/* in the file: placed */
	REQUIRE_EQ(raw_write_part(&r, rpcrdma_mr_rkey(mr), rpcrdma_mr_remote_offset(mr), data,
				  sizeof(data), sizeof(data), &f), 0);
	REQUIRE_EQ(raw_write_rest(&r, &f), 0);
	for (int i = 0; i < RR_TEST_WAIT_MS && ((uint8_t *)map.addr)[4095] != 'D'; i++)
		usleep(1000);
	CHECK_EQ(((uint8_t *)map.addr)[4095], 'D');
	/* someone truncates the file: a Commit past its end is not durable,
	 * the next Write there is a Terminate */
	REQUIRE_EQ(truncate(path, 4096), 0);
	{
		struct rr_commit_req c = {.id = 1, .nregions = 1};
		uint8_t body[RR_RX_BODY_MAX];
		struct iovec v = {body, 0};
		struct rr_ddp_txmsg m;
		int n;

		c.region[0] = (struct rr_commit_region){rpcrdma_mr_rkey(mr), 8192,
							rpcrdma_mr_remote_offset(mr)};
		n = rr_rdmap_commit_req_encode(&c, body, sizeof(body));
		REQUIRE(n > 0);
		v.iov_len = (size_t)n;
		REQUIRE_EQ(rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, RR_QN_READ,
						 r.msn[RR_QN_READ]++, 0, &v, 1), 0);
		REQUIRE_EQ(raw_send_msg(&r, &m), 0);
		raw_drain_until_commit(&r, 5000);
		REQUIRE(r.commit_seen);
		CHECK_EQ(r.commit.status, SOFT_COMMIT_PAST_EOF);
	}
	REQUIRE_EQ(raw_write_part(&r, rpcrdma_mr_rkey(mr), rpcrdma_mr_remote_offset(mr) + 8192,
				  data, sizeof(data), sizeof(data), &f), 0);
	REQUIRE_EQ(raw_write_rest(&r, &f), 0);
	raw_drain(&r, 5000);
	REQUIRE(r.term);
	CHECK_EQ(r.t.layer, RR_TL_DDP);
	CHECK_EQ(r.t.etype, RR_DDP_ET_TAGGED);
	CHECK_EQ(r.t.ecode, RR_DDP_EC_T_BOUNDS);
	REQUIRE_EQ(stat(path, &st), 0);
	CHECK_EQ(st.st_size, 4096);
	CHECK(srv_disconnected(&s));
	REQUIRE_EQ(rpcrdma_dereg_mr(mr), 0);
	rpcrdma_durable_unmap(&map);
	unlink(path);
	close(r.fd);
	srv_down(&s);
}
