/* SPDX-License-Identifier: BSD-2-Clause */
/* The wire-level rogue requester (rogue.h): TCP socket, MPA exchange (RFC
 * 5044 section 7.1, RFC 6581), FPDUs through the project's DDP segmenter and
 * receive parser (RFC 5041 sections 4-8, RFC 5040 sections 4-7), and
 * RPC-over-RDMA Version 1 messages (RFC 8166 section 4) around ONC RPC
 * (RFC 5531 section 9). The socket stays non-blocking; every wait is a
 * poll(2) with a deadline, so nothing here can hang a test. */
#include "rogue.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rdma/soft/crc32c.h"

#define ROGUE_IO_MS 10000u              /* a write may wait this long for room */
#define ROGUE_STAGE_MAX (512u << 20)    /* bytes read ahead of the parser */
#define ROGUE_CREDITS 32u               /* credit request in every Call */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void rr_rogue_opts_default(struct rr_rogue_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->send_size = 4096;
	o->recv_size = 4096;
	o->remote_inv = true;
	o->ext_caps = RR_PD_EXT_CAP_RELIABLE_REPLY | RR_PD_EXT_CAP_RDMA_COMMIT;
	o->ird = 16;
	o->ord = 16;
}

static void opts_fill(struct rr_rogue_opts *o)
{
	if (!o->send_size)
		o->send_size = 4096;
	if (!o->recv_size)
		o->recv_size = 4096;
	if (!o->ird)
		o->ird = 16;
	if (!o->ord)
		o->ord = 16;
	if (!o->fpdu_max)
		o->fpdu_max = 65483;
	if (!o->timeout_ms)
		o->timeout_ms = 10000;
}

static void local_pd(const struct rr_rogue_opts *o, struct rr_pd_local *l)
{
	l->send_size = o->send_size;
	l->recv_size = o->recv_size;
	l->remote_inv = o->remote_inv;
	l->ext_caps = o->ext_caps;
}

/* ------------------------------------------------------------ sockets -- */

static int tcp_connect(int port, int rcvbuf, const char *src, unsigned ms)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd pfd;
	int fd, one = 1, err = 0;
	socklen_t l = sizeof(err);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (src) {
		struct sockaddr_in b = {.sin_family = AF_INET};

		if (inet_pton(AF_INET, src, &b.sin_addr) != 1 ||
		    bind(fd, (struct sockaddr *)&b, sizeof(b)) < 0) {
			err = errno ? -errno : -EINVAL;
			close(fd);
			return err;
		}
	}
	if (rcvbuf > 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = -errno;
		close(fd);
		return err;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, (int)ms) != 1) {
		close(fd);
		return -ETIMEDOUT;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
		close(fd);
		return err ? -err : -ECONNREFUSED;
	}
	return fd;
}

int rr_rogue_tcp(int port, int rcvbuf, const char *src)
{
	return tcp_connect(port, rcvbuf, src, 5000);
}

/* Writes all of @p before @deadline (absolute ms). */
static int write_all_until(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		uint64_t now;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -EPIPE;
		now = mono_ms();
		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/* Reads exactly @n bytes before @deadline: 0, -ECONNRESET (EOF), -ETIMEDOUT. */
static int read_exact_until(int fd, uint8_t *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		uint64_t now;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return -ECONNRESET;
		now = mono_ms();
		if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/* ---------------------------------------------------------- MPA setup -- */

int rr_rogue_mpa_request(const struct rr_rogue_opts *oin, uint8_t *buf, size_t cap)
{
	struct rr_rogue_opts o = *oin;
	struct rr_mpa_cfg cfg;
	struct rr_mpa_frame f;
	struct rr_pd_local l;
	uint8_t pd[RR_PD_MAX_LEN];
	int pdlen = 0, r;

	opts_fill(&o);
	memset(&cfg, 0, sizeof(cfg));
	cfg.rev = 2;
	cfg.crc = o.crc;
	cfg.ird = o.ird;
	cfg.ord = o.ord;
	if (!o.no_pd) {
		local_pd(&o, &l);
		pdlen = rr_pd_encode(&l, pd, sizeof(pd));
		if (pdlen < 0)
			return pdlen;
	}
	r = rr_mpa_make_request(&cfg, pd, (size_t)pdlen, &f);
	if (r)
		return r;
	return rr_mpa_encode(&f, buf, cap);
}

static enum rr_rx_code rx_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to,
				 uint32_t len, bool last, uint8_t **dst);
static enum rr_rx_code rx_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len,
				   bool last, const struct iovec **iov, unsigned *iovcnt);
static const struct rr_ddp_rx_ops rogue_rx_ops = {.tagged = rx_tagged, .untagged = rx_untagged};

int rr_rogue_open(struct rr_rogue **out, int port, const struct rr_rogue_opts *oin)
{
	struct rr_rogue *g;
	struct rr_mpa_parser p;
	struct rr_mpa_cfg cfg;
	struct rr_pd_local l;
	struct rr_term t;
	uint8_t req[600];
	uint64_t deadline;
	int n, r;

	*out = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	if (oin)
		g->o = *oin;
	else
		rr_rogue_opts_default(&g->o);
	opts_fill(&g->o);
	g->msg = malloc(RR_ROGUE_RECV_MAX);
	g->st_cap = 256u << 10;
	g->stage = malloc(g->st_cap);
	if (!g->msg || !g->stage) {
		r = -ENOMEM;
		goto fail_nofd;
	}
	g->msg_iov.iov_base = g->msg;
	g->msg_iov.iov_len = RR_ROGUE_RECV_MAX;
	deadline = mono_ms() + g->o.timeout_ms;
	g->fd = tcp_connect(port, g->o.rcvbuf, g->o.src, g->o.timeout_ms);
	if (g->fd < 0) {
		r = g->fd;
		goto fail_nofd;
	}
	n = rr_rogue_mpa_request(&g->o, req, sizeof(req));
	if (n < 0) {
		r = n;
		goto fail;
	}
	r = write_all_until(g->fd, req, (size_t)n, deadline);
	if (r)
		goto fail;
	/* The Reply, byte by byte as the parser asks: never an FPDU byte. */
	rr_mpa_parser_init(&p, true);
	for (;;) {
		uint8_t *dst;
		size_t w = rr_mpa_want(&p, &dst);

		if (!w)
			break;
		r = read_exact_until(g->fd, dst, w, deadline);
		if (r)
			goto fail;
		r = rr_mpa_advance(&p, w);
		if (r < 0)
			goto fail;
		if (r == 1)
			break;
	}
	r = rr_mpa_parser_frame(&p, &g->rep);
	if (r)
		goto fail;
	memset(&cfg, 0, sizeof(cfg));
	cfg.rev = 2;
	cfg.crc = g->o.crc;
	cfg.ird = g->o.ird;
	cfg.ord = g->o.ord;
	r = rr_mpa_initiator_check(&cfg, &g->rep, &g->mpa, &t);
	if (r)
		goto fail;
	(void)rr_pd_parse(g->rep.pd, g->rep.pd_len, &g->peer);
	if (g->o.no_pd) {
		/* what the server computes without our block (RFC 8797 5.1) */
		memset(&l, 0, sizeof(l));
		l.send_size = l.recv_size = RR_PD_SIZE_DEFAULT;
	} else {
		local_pd(&g->o, &l);
	}
	r = rr_pd_negotiate(&l, RR_PD_REQUESTER, g->rep.pd, g->rep.pd_len, &g->neg);
	if (r)
		goto fail;
	g->commit = (g->neg.ext_caps & RR_PD_EXT_CAP_RDMA_COMMIT) != 0;
	for (int q = 0; q < RR_QN_COUNT; q++)
		g->tx_msn[q] = 1;
	rr_ddp_rx_init(&g->rx, &rogue_rx_ops, g, g->mpa.crc, g->commit);
	*out = g;
	return 0;
fail:
	close(g->fd);
fail_nofd:
	free(g->msg);
	free(g->stage);
	free(g);
	return r;
}

void rr_rogue_shutdown(struct rr_rogue *g, bool reset)
{
	if (!g || g->fd < 0)
		return;
	if (reset) {
		struct linger lg = {1, 0};

		(void)setsockopt(g->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(g->fd);
	g->fd = -1;
	g->eof = true;
}

void rr_rogue_free(struct rr_rogue *g)
{
	if (!g)
		return;
	if (g->fd >= 0)
		close(g->fd);
	free(g->out);
	free(g->stage);
	free(g->msg);
	free(g);
}

/* ------------------------------------------------------------- memory -- */

struct rr_rogue_region *rr_rogue_mem_find(struct rr_rogue *g, uint32_t stag)
{
	for (unsigned i = 0; i < RR_ROGUE_MAX_REGIONS; i++)
		if (g->reg[i].used && g->reg[i].stag == stag)
			return &g->reg[i];
	return NULL;
}

int rr_rogue_mem_add(struct rr_rogue *g, uint32_t stag, uint64_t to, void *buf, uint64_t len)
{
	if (rr_rogue_mem_find(g, stag))
		return -EEXIST;
	for (unsigned i = 0; i < RR_ROGUE_MAX_REGIONS; i++) {
		struct rr_rogue_region *r = &g->reg[i];

		if (r->used)
			continue;
		memset(r, 0, sizeof(*r));
		r->used = true;
		r->stag = stag;
		r->to = to;
		r->buf = buf;
		r->len = len;
		return 0;
	}
	return -ENOSPC;
}

void rr_rogue_mem_del(struct rr_rogue *g, uint32_t stag)
{
	struct rr_rogue_region *r = rr_rogue_mem_find(g, stag);

	if (r)
		r->used = false;
}

/* [to, to + len) inside @r: a pointer to its first byte, else NULL. */
static uint8_t *region_at(const struct rr_rogue_region *r, uint64_t to, uint64_t len)
{
	if (to < r->to || to - r->to > r->len || len > r->len - (to - r->to))
		return NULL;
	return r->buf + (to - r->to);
}

/* ----------------------------------------------------------- transmit -- */

static int out_reserve(struct rr_rogue *g, size_t n)
{
	if (g->out_cap - g->out_len >= n)
		return 0;
	{
		size_t cap = g->out_cap ? g->out_cap : 65536;
		uint8_t *p;

		while (cap - g->out_len < n)
			cap *= 2;
		p = realloc(g->out, cap);
		if (!p)
			return -ENOMEM;
		g->out = p;
		g->out_cap = cap;
	}
	return 0;
}

/* Reads what the socket has into the staging buffer (never parses). Returns
 * the bytes read, 0 at EOF (g->eof set), or -EAGAIN. */
static ssize_t stage_read(struct rr_rogue *g)
{
	ssize_t k;

	if (g->fd < 0 || g->eof)
		return 0;
	if (g->st_off == g->st_len) {
		g->st_off = g->st_len = 0;
	} else if (g->st_off > 0 && g->st_cap - g->st_len < 65536) {
		memmove(g->stage, g->stage + g->st_off, g->st_len - g->st_off);
		g->st_len -= g->st_off;
		g->st_off = 0;
	}
	if (g->st_cap - g->st_len < 65536) {
		size_t cap = g->st_cap * 2;
		uint8_t *p;

		if (cap > ROGUE_STAGE_MAX)
			return -EAGAIN;   /* the test reads too little: let TCP push back */
		p = realloc(g->stage, cap);
		if (!p)
			return -EAGAIN;
		g->stage = p;
		g->st_cap = cap;
	}
	k = recv(g->fd, g->stage + g->st_len, g->st_cap - g->st_len, MSG_DONTWAIT);
	if (k > 0) {
		g->st_len += (size_t)k;
		g->bytes_read += (uint64_t)k;
		return k;
	}
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return -EAGAIN;
	g->eof = true;
	return 0;
}

/* Writes the pending output (unless corked); while the socket is full it
 * keeps reading into the staging buffer (unless stalled) so that a server
 * that writes too cannot deadlock with us. */
static int flush(struct rr_rogue *g)
{
	uint64_t deadline = mono_ms() + ROGUE_IO_MS;
	size_t off = 0;

	if (g->corked)
		return 0;
	if (g->fd < 0) {
		g->out_len = 0;
		return -EPIPE;
	}
	while (off < g->out_len) {
		ssize_t k = send(g->fd, g->out + off, g->out_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		struct pollfd pfd = {.fd = g->fd, .events = POLLOUT};
		uint64_t now;

		if (k > 0) {
			off += (size_t)k;
			g->bytes_sent += (uint64_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			g->out_len = 0;
			return -EPIPE;
		}
		now = mono_ms();
		if (now >= deadline) {
			g->out_len = 0;
			return -ETIMEDOUT;
		}
		if (!g->stalled && !g->eof)
			pfd.events |= POLLIN;
		if (poll(&pfd, 1, (int)(deadline - now)) > 0 && (pfd.revents & POLLIN))
			(void)stage_read(g);
	}
	g->out_len = 0;
	return 0;
}

void rr_rogue_cork(struct rr_rogue *g)
{
	g->corked = true;
}

int rr_rogue_uncork(struct rr_rogue *g)
{
	g->corked = false;
	return flush(g);
}

void rr_rogue_stall(struct rr_rogue *g, bool on)
{
	g->stalled = on;
}

/* Appends every FPDU of @m to the output. */
static int put_msg(struct rr_rogue *g, struct rr_ddp_txmsg *m)
{
	struct rr_fpdu f;

	while (rr_ddp_tx_next(m, g->mpa.crc, g->o.fpdu_max, &f) == 1) {
		int r = out_reserve(g, f.len);

		if (r)
			return r;
		for (unsigned i = 0; i < f.iovcnt; i++) {
			memcpy(g->out + g->out_len, f.iov[i].iov_base, f.iov[i].iov_len);
			g->out_len += f.iov[i].iov_len;
		}
	}
	return 0;
}

int rr_rogue_send(struct rr_rogue *g, uint8_t op, uint32_t inv_stag, const void *msg,
		  size_t len)
{
	struct iovec v = {.iov_base = (void *)(uintptr_t)msg, .iov_len = len};
	struct rr_ddp_txmsg m;
	int r;

	r = rr_ddp_txmsg_untagged(&m, op, RR_QN_SEND, g->tx_msn[RR_QN_SEND], inv_stag, &v, 1);
	if (r)
		return r;
	g->tx_msn[RR_QN_SEND]++;
	r = put_msg(g, &m);
	return r ? r : flush(g);
}

int rr_rogue_read_req(struct rr_rogue *g, const struct rr_rreq *rq, uint32_t tag)
{
	uint8_t body[RR_RREQ_BODY];
	struct iovec v = {.iov_base = body, .iov_len = sizeof(body)};
	struct rr_ddp_txmsg m;
	struct rr_rogue_rreq *e;
	int r;

	if (g->rreq_count == RR_ROGUE_MAX_READS)
		return -ENOSPC;
	rr_rdmap_rreq_encode(rq, body);
	r = rr_ddp_txmsg_untagged(&m, RR_OP_READ_REQ, RR_QN_READ, g->tx_msn[RR_QN_READ], 0, &v, 1);
	if (r)
		return r;
	g->tx_msn[RR_QN_READ]++;
	e = &g->rreq[(g->rreq_head + g->rreq_count) % RR_ROGUE_MAX_READS];
	e->r = *rq;
	e->got = 0;
	e->tag = tag;
	g->rreq_count++;
	r = put_msg(g, &m);
	return r ? r : flush(g);
}

int rr_rogue_write(struct rr_rogue *g, uint32_t stag, uint64_t to, const void *data, size_t len)
{
	struct iovec v = {.iov_base = (void *)(uintptr_t)data, .iov_len = len};
	struct rr_ddp_txmsg m;
	int r;

	r = rr_ddp_txmsg_tagged(&m, RR_OP_WRITE, stag, to, &v, 1);
	if (r)
		return r;
	r = put_msg(g, &m);
	return r ? r : flush(g);
}

int rr_rogue_commit(struct rr_rogue *g, const struct rr_commit_req *c)
{
	uint8_t body[RR_RX_BODY_MAX];
	struct iovec v = {.iov_base = body};
	struct rr_ddp_txmsg m;
	int n, r;

	if (!g->commit)
		return -EOPNOTSUPP;
	n = rr_rdmap_commit_req_encode(c, body, sizeof(body));
	if (n < 0)
		return n;
	v.iov_len = (size_t)n;
	r = rr_ddp_txmsg_untagged(&m, RR_OP_COMMIT_REQ, RR_QN_READ, g->tx_msn[RR_QN_READ], 0, &v,
				  1);
	if (r)
		return r;
	g->tx_msn[RR_QN_READ]++;
	r = put_msg(g, &m);
	return r ? r : flush(g);
}

int rr_rogue_terminate(struct rr_rogue *g, const struct rr_term *t)
{
	uint8_t f[RR_TERM_FPDU_MAX];
	size_t n = rr_ddp_build_terminate(t, g->tx_msn[RR_QN_TERM]++, g->mpa.crc, f);

	return rr_rogue_raw(g, f, n);
}

int rr_rogue_raw(struct rr_rogue *g, const void *bytes, size_t len)
{
	int r = out_reserve(g, len);

	if (r)
		return r;
	memcpy(g->out + g->out_len, bytes, len);
	g->out_len += len;
	return flush(g);
}

/* FPDU (RFC 5044 4.1, RFC 5041 4): ULPDU_Length BE16 | control BE16 | @hdr |
 * @payload | pad to 4 | CRC32c (zero unless CRC was negotiated) */
int rr_rogue_fpdu(struct rr_rogue *g, uint16_t ctrl, const uint8_t *hdr, size_t hlen,
		  const void *payload, size_t plen)
{
	size_t ulpdu = 2 + hlen + plen, pad = (4 - ((2 + ulpdu) & 3)) & 3;
	size_t total = 2 + ulpdu + pad + RR_CRC_LEN;
	uint8_t *p;
	int r;

	if (ulpdu > RR_ULPDU_MAX)
		return -EMSGSIZE;
	r = out_reserve(g, total);
	if (r)
		return r;
	p = g->out + g->out_len;
	rr_put_be16(p, (uint16_t)ulpdu);
	rr_put_be16(p + 2, ctrl);
	if (hlen)
		memcpy(p + 4, hdr, hlen);
	if (plen)
		memcpy(p + 4 + hlen, payload, plen);
	memset(p + 4 + hlen + plen, 0, pad + RR_CRC_LEN);
	if (g->mpa.crc)
		rr_crc32c_put(p + 2 + ulpdu + pad, rr_crc32c(p, 2 + ulpdu + pad));
	g->out_len += total;
	return flush(g);
}

/* Answers one of the server's Read Requests from a region: Read Response
 * FPDUs to (sink STag, sink TO); a request outside our memory gets the
 * RDMAP Terminate a provider would send (RFC 5040 7.2). */
static int serve_rreq(struct rr_rogue *g, const struct rr_rreq *rq)
{
	struct rr_rogue_region *reg = rr_rogue_mem_find(g, rq->src_stag);
	uint8_t *src = NULL;
	struct iovec v;
	struct rr_ddp_txmsg m;
	int r;

	if (reg)
		src = rq->size ? region_at(reg, rq->src_to, rq->size) : reg->buf;
	if (!src) {
		struct rr_term t;

		memset(&t, 0, sizeof(t));
		t.layer = RR_TL_RDMAP;
		t.etype = RR_RDMAP_ET_PROTECTION;
		t.ecode = reg ? RR_RDMAP_EC_BOUNDS : RR_RDMAP_EC_INVALID_STAG;
		return rr_rogue_terminate(g, &t);
	}
	v.iov_base = src;
	v.iov_len = rq->size;
	r = rr_ddp_txmsg_tagged(&m, RR_OP_READ_RESP, rq->sink_stag, rq->sink_to, &v, 1);
	if (r)
		return r;
	reg->read += rq->size;
	g->rreqs_served++;
	r = put_msg(g, &m);
	return r ? r : flush(g);
}

int rr_rogue_serve_held(struct rr_rogue *g)
{
	int r = 0;

	for (unsigned i = 0; i < g->nheld && !r; i++)
		r = serve_rreq(g, &g->held[i]);
	g->nheld = 0;
	return r;
}

/* ------------------------------------------------------------ receive -- */

/* Placement of the server's tagged segments: RDMA Writes into our regions,
 * Read Responses into the sink of our oldest Read Request at exactly its
 * next offset (RFC 5040 5.1, as a provider enforces it). */
static enum rr_rx_code rx_tagged(void *ctx, uint8_t op, uint32_t stag, uint64_t to,
				 uint32_t len, bool last, uint8_t **dst)
{
	struct rr_rogue *g = ctx;
	struct rr_rogue_region *reg;

	(void)last;
	if (op == RR_OP_READ_RESP) {
		struct rr_rogue_rreq *e;

		if (!g->rreq_count)
			return RR_RXC_UNEXPECTED;
		e = &g->rreq[g->rreq_head];
		if (stag != e->r.sink_stag)
			return RR_RXC_INVALID_STAG;
		if (to != e->r.sink_to + e->got || len > e->r.size - e->got)
			return RR_RXC_BOUNDS;
	}
	reg = rr_rogue_mem_find(g, stag);
	if (!reg)
		return RR_RXC_INVALID_STAG;
	if (len == 0)
		return RR_RXC_OK;
	*dst = region_at(reg, to, len);
	return *dst ? RR_RXC_OK : RR_RXC_BOUNDS;
}

static enum rr_rx_code rx_untagged(void *ctx, uint32_t msn, uint32_t mo, uint32_t len,
				   bool last, const struct iovec **iov, unsigned *iovcnt)
{
	struct rr_rogue *g = ctx;

	(void)msn, (void)mo, (void)len, (void)last;
	*iov = &g->msg_iov;
	*iovcnt = 1;
	return RR_RXC_OK;
}

/* Turns one parser event into a rogue event; false when it is not one the
 * caller sees (a middle segment). */
static bool on_event(struct rr_rogue *g, const struct rr_ddp_event *d, struct rr_rogue_ev *ev)
{
	ev->op = d->op;
	switch (d->type) {
	case RR_EV_TAGGED:
		if (d->op == RR_OP_WRITE) {
			struct rr_rogue_region *reg = rr_rogue_mem_find(g, d->stag);

			if (reg)
				reg->written += d->len;
			g->writes++;
			g->write_bytes += d->len;
			ev->type = RR_ROGUE_EV_WRITE;
			ev->stag = d->stag;
			ev->to = d->to;
			ev->len = d->len;
			return true;
		}
		{
			struct rr_rogue_rreq *e = &g->rreq[g->rreq_head];

			e->got += d->len;
			g->rresp_bytes += d->len;
			if (!d->last)
				return false;
			if (e->got != e->r.size) {
				/* the last Response before all bytes came */
				rr_ddp_rx_fail(&g->rx, RR_RXC_BOUNDS);
				g->violation = true;
				g->vterm = g->rx.term;
				ev->type = RR_ROGUE_EV_VIOLATION;
				ev->term = g->vterm;
				return true;
			}
			ev->type = RR_ROGUE_EV_READ_DONE;
			ev->rreq = e->r;
			ev->tag = e->tag;
			g->rreq_head = (g->rreq_head + 1) % RR_ROGUE_MAX_READS;
			g->rreq_count--;
			return true;
		}
	case RR_EV_SEND:
		if (!d->last)
			return false;
		g->msgs++;
		ev->type = RR_ROGUE_EV_MSG;
		ev->msg = g->msg;
		ev->msg_len = d->msg_len;
		ev->inv_stag = d->inv_stag;
		return true;
	case RR_EV_READ_REQ:
		ev->type = RR_ROGUE_EV_READ_REQ;
		ev->rreq = d->u.rreq;
		if (g->serve == RR_ROGUE_SERVE_AUTO) {
			(void)serve_rreq(g, &d->u.rreq);
		} else if (g->serve == RR_ROGUE_SERVE_HOLD && g->nheld < RR_ROGUE_MAX_HELD) {
			g->held[g->nheld++] = d->u.rreq;
		} else {
			struct rr_term t;

			memset(&t, 0, sizeof(t));
			t.layer = RR_TL_RDMAP;
			t.etype = RR_RDMAP_ET_PROTECTION;
			t.ecode = RR_RDMAP_EC_INVALID_STAG;
			(void)rr_rogue_terminate(g, &t);
		}
		return true;
	case RR_EV_COMMIT_RESP:
		ev->type = RR_ROGUE_EV_COMMIT_RESP;
		ev->cresp = d->u.cresp;
		return true;
	case RR_EV_TERMINATE:
		g->got_term = true;
		g->term = d->u.term;
		ev->type = RR_ROGUE_EV_TERMINATE;
		ev->term = d->u.term;
		return true;
	default:
		/* a Commit Request to a requester that never exposed memory
		 * durable: not something a server sends */
		rr_ddp_rx_fail(&g->rx, RR_RXC_UNEXPECTED);
		g->violation = true;
		g->vterm = g->rx.term;
		ev->type = RR_ROGUE_EV_VIOLATION;
		ev->term = g->vterm;
		return true;
	}
}

int rr_rogue_next(struct rr_rogue *g, struct rr_rogue_ev *ev, unsigned ms)
{
	uint64_t deadline = mono_ms() + ms;

	memset(ev, 0, sizeof(*ev));
	for (;;) {
		uint64_t now;
		struct pollfd pfd;
		int pr;

		if (g->st_off < g->st_len) {
			struct rr_ddp_event d;
			size_t used = 0;
			int r;

			if (g->rx.state == RR_RX_DEAD) {
				/* after a Terminate or a violation: nothing more
				 * is parsed, the bytes are dropped until EOF */
				g->st_off = g->st_len;
				continue;
			}
			r = rr_ddp_rx_feed(&g->rx, g->stage + g->st_off, g->st_len - g->st_off,
					   &used, &d);
			g->st_off += used;
			if (r == 1) {
				if (on_event(g, &d, ev))
					return ev->type;
				continue;
			}
			if (r < 0) {
				g->violation = true;
				g->vterm = g->rx.term;
				ev->type = RR_ROGUE_EV_VIOLATION;
				ev->term = g->vterm;
				return ev->type;
			}
			continue;
		}
		if (g->eof) {
			ev->type = RR_ROGUE_EV_EOF;
			return ev->type;
		}
		now = mono_ms();
		if (g->stalled || now >= deadline) {
			ev->type = RR_ROGUE_EV_TIMEOUT;
			return ev->type;
		}
		pfd.fd = g->fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		pr = poll(&pfd, 1, (int)(deadline - now));
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr > 0)
			(void)stage_read(g);
	}
}

/* The next event before @deadline (absolute, mono_ms). */
static int next_until(struct rr_rogue *g, struct rr_rogue_ev *ev, uint64_t deadline)
{
	uint64_t now = mono_ms();

	return rr_rogue_next(g, ev, now < deadline ? (unsigned)(deadline - now) : 0);
}

/* What an event that ends every wait means (0: it does not end one). */
static int end_result(int t)
{
	switch (t) {
	case RR_ROGUE_EV_TERMINATE:
		return -ECONNRESET;
	case RR_ROGUE_EV_EOF:
		return -EPIPE;
	case RR_ROGUE_EV_VIOLATION:
		return -EPROTO;
	case RR_ROGUE_EV_TIMEOUT:
		return -ETIMEDOUT;
	default:
		return t < 0 ? t : 0;
	}
}

int rr_rogue_wait_event(struct rr_rogue *g, enum rr_rogue_ev_type type, unsigned ms,
			struct rr_rogue_ev *ev)
{
	uint64_t deadline = mono_ms() + ms;

	for (;;) {
		int t = next_until(g, ev, deadline);

		if (t == (int)type)
			return t;
		if (end_result(t))
			return end_result(t);
	}
}

int rr_rogue_wait_msg(struct rr_rogue *g, unsigned ms)
{
	struct rr_rogue_ev ev;
	int t = rr_rogue_wait_event(g, RR_ROGUE_EV_MSG, ms, &ev);

	return t < 0 ? t : (int)ev.msg_len;
}

int rr_rogue_wait_end(struct rr_rogue *g, unsigned ms)
{
	uint64_t deadline = mono_ms() + ms;

	for (;;) {
		struct rr_rogue_ev ev;
		int t = next_until(g, &ev, deadline);

		if (t < 0)
			return t;
		if (t == RR_ROGUE_EV_EOF)
			return g->got_term ? 1 : 0;
		if (t == RR_ROGUE_EV_TIMEOUT)
			return -ETIMEDOUT;
	}
}

int rr_rogue_reads_wait(struct rr_rogue *g, unsigned ms)
{
	uint64_t deadline = mono_ms() + ms;

	while (g->rreq_count) {
		struct rr_rogue_ev ev;
		int r = end_result(next_until(g, &ev, deadline));

		if (r)
			return r;
	}
	return 0;
}

int rr_rogue_wait_held(struct rr_rogue *g, unsigned ms)
{
	uint64_t deadline = mono_ms() + ms;

	while (!g->nheld) {
		struct rr_rogue_ev ev;
		int r = end_result(next_until(g, &ev, deadline));

		if (r)
			return r;
	}
	return 0;
}

/* -------------------------------------------------------- RPC-over-RDMA -- */

int rr_rogue_rpc_call(uint8_t *buf, size_t cap, uint32_t xid, uint32_t prog, uint32_t vers,
		      uint32_t proc, const void *args, size_t alen)
{
	struct rr_rpc_call c;
	struct rr_xdr_enc e;

	memset(&c, 0, sizeof(c));
	c.xid = xid;
	c.rpcvers = RR_RPC_VERSION;
	c.prog = prog;
	c.vers = vers;
	c.proc = proc;
	c.cred.flavor = RR_RPC_AUTH_NONE;
	c.verf.flavor = RR_RPC_AUTH_NONE;
	rr_xdr_enc_init(&e, buf, cap);
	if (rr_rpcmsg_encode_call(&e, &c) || (alen && rr_xdr_put_fixed(&e, args, alen)))
		return -EMSGSIZE;
	return (int)rr_xdr_enc_len(&e);
}

int rr_rogue_send_rpcrdma(struct rr_rogue *g, const struct rr_hdr *h, const void *payload,
			  size_t plen, bool inv, uint32_t inv_stag)
{
	size_t cap = rr_hdr_encoded_size(h) + plen;
	struct rr_xdr_enc e;
	uint8_t *buf;
	int r;

	buf = malloc(cap ? cap : 1);
	if (!buf)
		return -ENOMEM;
	rr_xdr_enc_init(&e, buf, cap);
	r = (h->proc == RR_HDR_MSG || h->proc == RR_HDR_NOMSG) ? rr_hdr_encode_raw(&e, h)
								: -EINVAL;
	if (!r && plen)
		r = rr_xdr_put_fixed(&e, payload, plen);
	if (!r)
		r = rr_rogue_send(g, inv ? RR_OP_SEND_INV : RR_OP_SEND, inv ? inv_stag : 0, buf,
				  rr_xdr_enc_len(&e));
	free(buf);
	return r;
}

int rr_rogue_send_done(struct rr_rogue *g, uint32_t xid, bool inv, uint32_t inv_stag)
{
	uint8_t b[RR_HDR_DONE_SIZE];
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, b, sizeof(b));
	if (rr_hdr_encode_done(&e, xid, ROGUE_CREDITS))
		return -EMSGSIZE;
	return rr_rogue_send(g, inv ? RR_OP_SEND_INV : RR_OP_SEND, inv ? inv_stag : 0, b,
			     sizeof(b));
}

int rr_rogue_send_call(struct rr_rogue *g, uint32_t xid, const void *rpc, size_t rlen)
{
	struct rr_hdr h;

	rr_hdr_init(&h, xid, ROGUE_CREDITS, RR_HDR_MSG);
	return rr_rogue_send_rpcrdma(g, &h, rpc, rlen, false, 0);
}

int rr_rogue_parse_reply(const struct rr_rogue *g, const uint8_t *msg, size_t len,
			 struct rr_rogue_reply *out)
{
	struct rr_hdr_limits lim;
	struct rr_xdr_dec d;

	memset(out, 0, sizeof(*out));
	rr_hdr_limits_init(&lim);
	lim.reliable_reply = (g->neg.ext_caps & RR_PD_EXT_CAP_RELIABLE_REPLY) != 0;
	lim.inline_threshold = RR_ROGUE_RECV_MAX;
	if (rr_hdr_decode(&out->hdr, msg, len, RR_HDR_DIR_REPLY, &lim))
		return -EPROTO;
	if (out->hdr.proc == RR_HDR_NOMSG)
		out->rchunk = rr_hdr_pos0_chunk(&out->hdr);
	if (out->hdr.proc != RR_HDR_MSG)
		return 0;
	rr_xdr_dec_init(&d, msg + out->hdr.payload_off, out->hdr.payload_len);
	if (rr_rpcmsg_decode_reply(&d, &out->rpc))
		return -EBADMSG;
	out->has_rpc = true;
	out->res = rr_xdr_dec_ptr(&d);
	out->res_len = (uint32_t)rr_xdr_dec_remaining(&d);
	return 0;
}

long rr_rogue_pull_start(struct rr_rogue *g, const struct rr_rogue_reply *rep,
			 uint32_t sink_stag, uint8_t *sink, size_t cap)
{
	const struct rr_hdr_chunk *c = rep->rchunk;
	uint64_t off = 0;
	bool was_corked;
	int r;

	if (!c)
		return -EINVAL;
	if (c->length > cap)
		return -EMSGSIZE;
	rr_rogue_mem_del(g, sink_stag);
	r = rr_rogue_mem_add(g, sink_stag, 0, sink, cap);
	if (r)
		return r;
	was_corked = g->corked;
	rr_rogue_cork(g);
	for (uint32_t i = 0; i < c->nsegs; i++) {
		const struct rr_hdr_seg *s = &rep->hdr.segs[c->first + i];
		struct rr_rreq rq = {.sink_stag = sink_stag, .sink_to = off, .size = s->length,
				     .src_stag = s->handle, .src_to = s->offset};

		r = rr_rogue_read_req(g, &rq, i);
		if (r) {
			g->corked = was_corked;
			return r;
		}
		off += s->length;
	}
	if (was_corked)
		return (long)off;   /* the caller's uncork sends them */
	r = rr_rogue_uncork(g);
	return r ? r : (long)off;
}

/* ------------------------------------------------------- file service -- */

/* Program and procedures of tools/fileservice/fileservice.h (not included here: this
 * file stays independent of the service). */
#define ROGUE_FS_PROG 0x2f5a0001u
#define ROGUE_FS_VERS 1u

/* Arguments of the file service (tools/fileservice/fileservice.h, RFC 4506 XDR):
 *   READ:      string path<> | uint64 offset | uint32 count
 *   WRITE:     string path<> | uint64 offset | uint32 flags | opaque data<>
 *   PUSH_OPEN: string path<> | uint64 size */
int rr_rogue_fs_read_args(uint8_t *b, size_t cap, const char *path, uint64_t off,
			  uint32_t count)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, b, cap);
	if (rr_xdr_put_opaque(&e, path, (uint32_t)strlen(path)) || rr_xdr_put_u64(&e, off) ||
	    rr_xdr_put_u32(&e, count))
		return -EMSGSIZE;
	return (int)rr_xdr_enc_len(&e);
}

int rr_rogue_fs_write_args(uint8_t *b, size_t cap, const char *path, uint64_t off,
			   uint32_t flags, const void *data, uint32_t len)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, b, cap);
	if (rr_xdr_put_opaque(&e, path, (uint32_t)strlen(path)) || rr_xdr_put_u64(&e, off) ||
	    rr_xdr_put_u32(&e, flags))
		return -EMSGSIZE;
	if (data ? rr_xdr_put_opaque(&e, data, len) : rr_xdr_put_u32(&e, len))
		return -EMSGSIZE;
	return (int)rr_xdr_enc_len(&e);
}

int rr_rogue_fs_push_args(uint8_t *b, size_t cap, const char *path, uint64_t size)
{
	struct rr_xdr_enc e;

	rr_xdr_enc_init(&e, b, cap);
	if (rr_xdr_put_opaque(&e, path, (uint32_t)strlen(path)) || rr_xdr_put_u64(&e, size))
		return -EMSGSIZE;
	return (int)rr_xdr_enc_len(&e);
}

int rr_rogue_fs_call(struct rr_rogue *g, uint32_t xid, uint32_t proc, const void *args,
		     size_t alen, const struct rr_hdr_seg *writes, unsigned nwrites,
		     const struct rr_hdr_seg *reply)
{
	struct rr_hdr h;
	uint8_t *rpc;
	int n, r;

	if (nwrites > RR_HDR_MAX_WRITE_CHUNKS)
		return -EINVAL;
	rpc = malloc(alen + RR_RPC_CALL_HDR_MAX);
	if (!rpc)
		return -ENOMEM;
	n = rr_rogue_rpc_call(rpc, alen + RR_RPC_CALL_HDR_MAX, xid, ROGUE_FS_PROG, ROGUE_FS_VERS,
			      proc, args, alen);
	if (n < 0) {
		free(rpc);
		return n;
	}
	rr_hdr_init(&h, xid, ROGUE_CREDITS, RR_HDR_MSG);
	for (unsigned i = 0; i < nwrites; i++)
		(void)rr_hdr_add_write(&h, &writes[i], 1);   /* nwrites checked above */
	if (reply)
		(void)rr_hdr_add_reply(&h, reply, 1);
	r = rr_rogue_send_rpcrdma(g, &h, rpc, (size_t)n, false, 0);
	free(rpc);
	return r;
}

const char *rr_rogue_term_str(const struct rr_term *t, char *buf, size_t cap)
{
	static const char *const layer[] = {"RDMAP", "DDP", "LLP"};

	snprintf(buf, cap, "%s/%u/0x%02x", t->layer < 3 ? layer[t->layer] : "?", t->etype,
		 t->ecode);
	return buf;
}
