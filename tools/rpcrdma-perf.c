/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-perf: perftest-style measurements of the soft provider through the
 * public API only (include/rpcrdma headers): send_lat (Send ping-pong), write_bw
 * (RDMA Write stream), read_lat (RDMA Read round trip), commit_lat (Write +
 * RDMA Commit, draft-talpey-rdma-commit, into a durable file mapping). Both
 * ends run in this process on loopback by default; `--server` and `HOST` split
 * them over two processes / machines. Raw TCP ping-pong latency and stream
 * bandwidth are measured in the same run, between the same two ends, as the
 * floor, and the ratio is printed (--json: one object with ratio_to_tcp).
 * Every wait blocks in the kernel (rpcrdma_cq_wait), as the TCP floor blocks
 * in read(2); with --poll (opt-in, like perftest's busy polling) both spin
 * instead: rpcrdma_cq_poll and a non-blocking recv(2).
 *
 * Split mode: the server listens on PORT (RDMA, MPA over TCP) and PORT+1
 * (raw TCP floor). The client's connect private data carries the test, size
 * and iterations; the server's accept private data carries the STag and
 * address of its buffer (RDMA Write/Read target, or the durable Commit
 * target). After the RDMA test the client disconnects, then connects to
 * PORT+1 and sends {mode, size, iters} for the floor. The server serves one
 * client after another until killed. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define DIE(...) do { fprintf(stderr, "rpcrdma-perf: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define CK(x) do { int r_ = (x); if (r_ < 0) DIE("%s: %s", #x, rpcrdma_strerror(r_)); } while (0)

enum test { T_SEND_LAT = 1, T_WRITE_BW, T_READ_LAT, T_COMMIT_LAT };
static const char *const test_names[] = {NULL, "send_lat", "write_bw", "read_lat", "commit_lat"};

#define PERF_MAGIC 0x72725066u /* "rrPf" */

/* connect private data (client -> server), network byte order */
struct hello {
	uint32_t magic;
	uint32_t test;
	uint32_t size;
	uint32_t iters;
};

/* accept private data (server -> client): the remote buffer */
struct remote {
	uint32_t rkey;
	uint32_t pad;
	uint64_t addr;
};

struct ep {
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_id *id;
	struct rpcrdma_mr *mr;
	uint8_t *buf;
	/* commit target (server side) */
	struct rpcrdma_durable_map map;
	struct rpcrdma_mr *dmr;
	char path[64];
};

static struct rpcrdma_context *ctx;
static struct rpcrdma_cm_channel *ch;
static struct ep cli, srv;
static struct remote rem;  /* what the client writes / reads / commits */
static size_t bufsz;
static bool busy_poll;     /* --poll: spin on the CQ and on recv(2) */
static bool use_crc;       /* --crc: negotiate MPA CRC32c (off by default, as siw) */

/* rpcrdma_cq_wait, or with --poll a spin on rpcrdma_cq_poll. */
static int cq_get(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	int n;

	if (!busy_poll)
		return rpcrdma_cq_wait(cq, 1, wc, -1);
	while ((n = rpcrdma_cq_poll(cq, 1, wc)) == 0)
		;
	return n;
}

static void ep_make(struct ep *e, size_t sz)
{
	struct rpcrdma_cq_attr ca = {.cqe = 1024};
	struct rpcrdma_qp_attr qa = {0};

	memset(e, 0, sizeof(*e));
	CK(rpcrdma_pd_alloc(ctx, &e->pd));
	CK(rpcrdma_cq_create(ctx, &ca, &e->cq));
	qa.send_cq = qa.recv_cq = e->cq;
	qa.max_send_wr = qa.max_recv_wr = 256;
	qa.max_send_sge = qa.max_recv_sge = 1;
	CK(rpcrdma_qp_create(e->pd, &qa, &e->qp));
	e->buf = aligned_alloc(4096, (sz + 4095) & ~(size_t)4095);
	if (!e->buf)
		DIE("out of memory");
	memset(e->buf, 0x5a, sz);
	CK(rpcrdma_reg_mr_simple(e->pd, e->buf, sz, RPCRDMA_ACCESS_ALL & ~RPCRDMA_ACCESS_MW_BIND, &e->mr));
}

static void ep_free(struct ep *e)
{
	if (e->id)
		rpcrdma_cm_id_destroy(e->id);
	if (e->qp)
		CK(rpcrdma_qp_destroy(e->qp));
	if (e->dmr) {
		CK(rpcrdma_dereg_mr(e->dmr));
		rpcrdma_durable_unmap(&e->map);
		unlink(e->path);
	}
	if (e->mr)
		CK(rpcrdma_dereg_mr(e->mr));
	if (e->cq)
		CK(rpcrdma_cq_destroy(e->cq));
	if (e->pd)
		CK(rpcrdma_pd_free(e->pd));
	free(e->buf);
	memset(e, 0, sizeof(*e));
}

/* A durable file-backed target for commit_lat on @e. */
static void make_commit_target(struct ep *e, size_t sz, struct remote *r)
{
	struct rpcrdma_mr_attr a;
	int fd;

	snprintf(e->path, sizeof(e->path), "/tmp/rpcrdma-perf-XXXXXX");
	fd = mkstemp(e->path);
	if (fd < 0)
		DIE("mkstemp: %s", strerror(errno));
	close(fd);
	CK(rpcrdma_durable_map(e->path, sz, &e->map));
	CK(rpcrdma_durable_mr_attr(&e->map, e->map.addr, sz, RPCRDMA_ACCESS_LOCAL_WRITE |
				   RPCRDMA_ACCESS_REMOTE_WRITE, &a));
	CK(rpcrdma_reg_mr(e->pd, &a, &e->dmr));
	r->rkey = rpcrdma_mr_rkey(e->dmr);
	r->addr = rpcrdma_mr_remote_offset(e->dmr); /* not the address (mr_table.h) */
}

static void get_ev(struct rpcrdma_cm_event *ev, int ms)
{
	struct pollfd p = {.fd = rpcrdma_cm_channel_fd(ch), .events = POLLIN};
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u;

	for (;;) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return;
		if (ms >= 0 && now_ns() >= end)
			DIE("no connection event");
		poll(&p, 1, 100);
	}
}

static struct rpcrdma_conn_param conn_param(const void *pd, uint16_t len)
{
	/* both ends offer RDMA Commit (a real upper layer advertises it in its
	 * private data and reads the peer's before enabling it) */
	struct rpcrdma_conn_param cp = {.private_data = pd, .private_data_len = len,
					.responder_resources = 16, .initiator_depth = 16,
					.flags = RPCRDMA_CONN_COMMIT};

	if (use_crc)
		cp.flags |= RPCRDMA_CONN_SOFT_CRC;
	return cp;
}

static void setup_loopback(enum test t, size_t sz)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct rpcrdma_cm_id *l;
	struct rpcrdma_conn_param cp = conn_param(NULL, 0);
	struct rpcrdma_cm_event ev;

	bufsz = sz;
	CK(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &ctx));
	CK(rpcrdma_cm_channel_create(ctx, &ch));
	ep_make(&cli, sz);
	ep_make(&srv, sz);
	rem.rkey = rpcrdma_mr_rkey(srv.mr);
	rem.addr = rpcrdma_mr_remote_offset(srv.mr);
	if (t == T_COMMIT_LAT)
		make_commit_target(&srv, sz, &rem);
	CK(rpcrdma_listen(ch, (struct sockaddr *)&a, sizeof(a), 4, NULL, &l));
	CK(rpcrdma_cm_local_addr(l, &ss));
	a.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	CK(rpcrdma_connect(ch, cli.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &cli.id));
	get_ev(&ev, 10000);
	if (ev.type != RPCRDMA_CM_CONNECT_REQUEST)
		DIE("unexpected CM event %s", rpcrdma_cm_event_str(ev.type));
	srv.id = ev.id;
	CK(rpcrdma_accept(srv.id, srv.qp, &cp));
	get_ev(&ev, 10000);
	get_ev(&ev, 10000);
	CK(rpcrdma_qp_set_commit(cli.qp, true));
}

static void wait1(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	int n;

	/* block in the kernel like the raw TCP floor does (read(2)) */
	while ((n = cq_get(cq, wc)) == 0)
		;
	if (n < 0 || wc->status != RPCRDMA_WC_SUCCESS)
		DIE("completion error: %s (remote status %u)",
		    n < 0 ? rpcrdma_strerror(n) : rpcrdma_wc_status_str(wc->status), wc->remote_status);
}

static void post_recv(struct ep *e, size_t sz)
{
	struct rpcrdma_sge s = {(uintptr_t)e->buf, (uint32_t)sz, rpcrdma_mr_lkey(e->mr)};
	struct rpcrdma_recv_wr r = {.sg_list = &s, .num_sge = 1};

	CK(rpcrdma_post_recv(e->qp, &r, NULL));
}

static void post(struct ep *e, enum rpcrdma_wr_opcode op, size_t sz, bool sig)
{
	struct rpcrdma_sge s = {(uintptr_t)e->buf, (uint32_t)sz, rpcrdma_mr_lkey(e->mr)};
	struct rpcrdma_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = op,
				    .flags = sig ? RPCRDMA_SEND_SIGNALED : 0};

	w.u.rdma.stag = rem.rkey;
	w.u.rdma.remote_offset = rem.addr;
	CK(rpcrdma_post_send(e->qp, &w, NULL));
}

/* The server side of send_lat: echo every Send. */
struct echo_arg {
	size_t size;
	long iters;
};

static void *srv_echo(void *arg)
{
	struct echo_arg *a = arg;
	struct rpcrdma_wc wc;

	for (long i = 0; i < a->iters; i++) {
		int n = cq_get(srv.cq, &wc);

		if (n == 0)
			continue;
		if (n < 0 || wc.status != RPCRDMA_WC_SUCCESS) {
			/* the client went away (split mode): stop serving it */
			fprintf(stderr, "rpcrdma-perf: echo: %s\n", n < 0 ? rpcrdma_strerror(n)
					: rpcrdma_wc_status_str(wc.status));
			break;
		}
		post_recv(&srv, bufsz);
		post(&srv, RPCRDMA_WR_SEND, a->size, false);
	}
	return NULL;
}

static double send_lat(size_t sz, long iters, bool loopback)
{
	pthread_t t;
	struct rpcrdma_wc wc;
	struct echo_arg ea = {sz, iters};
	uint64_t t0;

	static bool primed;

	for (int i = 0; i < 2 && !primed; i++) { /* two receives stay posted */
		if (loopback)
			post_recv(&srv, bufsz);
		post_recv(&cli, bufsz);
	}
	primed = true;
	if (loopback)
		pthread_create(&t, NULL, srv_echo, &ea);
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_SEND, sz, false);
		wait1(cli.cq, &wc);
		post_recv(&cli, bufsz);
	}
	if (loopback)
		pthread_join(t, NULL);
	return (double)(now_ns() - t0) / (double)iters / 2 / 1000.0; /* one-way us */
}

static double write_bw(size_t sz, long iters)
{
	struct rpcrdma_wc wc;
	uint64_t t0 = now_ns();
	long inflight = 0;

	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_RDMA_WRITE, sz, true);
		if (++inflight >= 16) {
			wait1(cli.cq, &wc);
			inflight--;
		}
	}
	while (inflight--)
		wait1(cli.cq, &wc);
	/* A Write completes when its data is in the local socket; the floor
	 * stops when its peer has read everything. Stop likewise: a 1-byte
	 * Read is answered after every Write before it was placed. */
	post(&cli, RPCRDMA_WR_RDMA_READ, 1, true);
	wait1(cli.cq, &wc);
	return (double)sz * (double)iters / ((double)(now_ns() - t0) / 1e9) / 1e6; /* MB/s */
}

static double read_lat(size_t sz, long iters)
{
	struct rpcrdma_wc wc;
	uint64_t t0 = now_ns();

	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_RDMA_READ, sz, true);
		wait1(cli.cq, &wc);
	}
	return (double)(now_ns() - t0) / (double)iters / 1000.0; /* round trip us */
}

static double commit_lat(size_t sz, long iters)
{
	struct rpcrdma_wc wc;
	uint64_t t0 = now_ns();

	for (long i = 0; i < iters; i++) {
		struct rpcrdma_sge s = {(uintptr_t)cli.buf, (uint32_t)sz, rpcrdma_mr_lkey(cli.mr)};
		struct rpcrdma_remote_region rg = {rem.rkey, (uint32_t)sz, rem.addr};
		struct rpcrdma_send_wr c = {.opcode = RPCRDMA_WR_RDMA_COMMIT, .flags = RPCRDMA_SEND_SIGNALED,
					    .u.commit = {.regions = &rg, .num_regions = 1}};
		struct rpcrdma_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = RPCRDMA_WR_RDMA_WRITE,
					    .next = &c,
					    .u.rdma = {.stag = rem.rkey, .remote_offset = rem.addr}};

		CK(rpcrdma_post_send(cli.qp, &w, NULL));
		wait1(cli.cq, &wc);
	}
	return (double)(now_ns() - t0) / (double)iters / 1000.0;
}

/* ---- raw TCP floor ---- */

static void set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int tcp_pair(int *a, int *b)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(s);
	int lf = socket(AF_INET, SOCK_STREAM, 0);

	if (lf < 0 || bind(lf, (struct sockaddr *)&s, sizeof(s)) || listen(lf, 1) ||
	    getsockname(lf, (struct sockaddr *)&s, &l))
		return -1;
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*a, (struct sockaddr *)&s, sizeof(s)))
		return -1;
	*b = accept(lf, NULL, NULL);
	close(lf);
	set_nodelay(*a);
	set_nodelay(*b);
	return 0;
}

static int xfer(int fd, void *b, size_t n, bool rd)
{
	uint8_t *p = b;

	while (n) {
		ssize_t r = rd ? (busy_poll ? recv(fd, p, n, MSG_DONTWAIT) : read(fd, p, n))
			       : write(fd, p, n);

		if (r < 0 && rd && busy_poll && (errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

struct tcparg { int fd; size_t sz; long iters; int mode; };

/* mode 0: echo ping-pong; mode 1: stream sink, 1 byte back at the end */
static void *tcp_peer(void *arg)
{
	struct tcparg *t = arg;
	uint8_t *b = malloc(t->sz ? t->sz : 1);

	if (!b)
		DIE("out of memory");
	for (long i = 0; i < t->iters; i++) {
		if (xfer(t->fd, b, t->sz, true) ||
		    (t->mode == 0 && xfer(t->fd, b, t->sz, false)))
			DIE("tcp peer failed");
	}
	if (t->mode == 1 && xfer(t->fd, b, 1, false))
		DIE("tcp peer failed");
	free(b);
	return NULL;
}

static double tcp_client(int a, size_t sz, long iters, int mode)
{
	uint8_t *buf = calloc(1, sz ? sz : 1);
	uint64_t t0;

	if (!buf)
		DIE("out of memory");
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		if (xfer(a, buf, sz, false) || (mode == 0 && xfer(a, buf, sz, true)))
			DIE("tcp floor failed");
	}
	if (mode == 1 && xfer(a, buf, 1, true))
		DIE("tcp floor failed");
	free(buf);
	return mode == 0 ? (double)(now_ns() - t0) / (double)iters / 2 / 1000.0
			 : (double)sz * (double)iters / ((double)(now_ns() - t0) / 1e9) / 1e6;
}

/* One round of the floor on a connection kept for all rounds. */
static double tcp_run(size_t sz, long iters, int mode)
{
	static int a = -1, b = -1;
	pthread_t th;
	struct tcparg t;

	if (a < 0 && tcp_pair(&a, &b))
		DIE("tcp setup failed");
	t = (struct tcparg){b, sz, iters, mode};
	pthread_create(&th, NULL, tcp_peer, &t);
	{
		double r = tcp_client(a, sz, iters, mode);

		pthread_join(th, NULL);
		return r;
	}
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- split mode ---- */

static struct addrinfo *resolve(const char *host, unsigned port, bool passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
	struct addrinfo *res;
	char ps[16];
	int r;

	snprintf(ps, sizeof(ps), "%u", port);
	r = getaddrinfo(host, ps, &hints, &res);
	if (r)
		DIE("%s: %s", host ? host : "listen address", gai_strerror(r));
	return res;
}

static void setup_client(const char *host, unsigned port, enum test t, size_t sz, long iters)
{
	struct addrinfo *ai = resolve(host, port, false);
	struct hello h = {htonl(PERF_MAGIC), htonl((uint32_t)t), htonl((uint32_t)sz),
			  htonl((uint32_t)iters)};
	struct rpcrdma_conn_param cp = conn_param(&h, sizeof(h));
	struct rpcrdma_cm_event ev;
	struct remote r;

	bufsz = sz;
	CK(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &ctx));
	CK(rpcrdma_cm_channel_create(ctx, &ch));
	ep_make(&cli, sz);
	CK(rpcrdma_connect(ch, cli.qp, ai->ai_addr, ai->ai_addrlen, &cp, NULL, &cli.id));
	freeaddrinfo(ai);
	get_ev(&ev, 10000);
	if (ev.type != RPCRDMA_CM_ESTABLISHED)
		DIE("connect: %s (%s)", rpcrdma_cm_event_str(ev.type), rpcrdma_strerror(ev.status));
	if (ev.private_data_len < sizeof(r))
		DIE("server sent no buffer description");
	memcpy(&r, ev.private_data, sizeof(r));
	rem.rkey = ntohl(r.rkey);
	rem.addr = be64toh(r.addr);
	/* the server agreed to Commit by accepting our test */
	CK(rpcrdma_qp_set_commit(cli.qp, true));
}

static double client_tcp_floor(const char *host, unsigned port, size_t sz, long iters, int mode)
{
	struct addrinfo *ai = resolve(host, port, false);
	uint32_t hdr[3] = {htonl((uint32_t)mode), htonl((uint32_t)sz), htonl((uint32_t)iters)};
	double r;
	int fd = socket(ai->ai_family, SOCK_STREAM, 0);

	for (int i = 0; fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0; i++) {
		if (i == 50)
			DIE("tcp floor: connect: %s", strerror(errno));
		usleep(100000);
	}
	freeaddrinfo(ai);
	if (fd < 0)
		DIE("socket: %s", strerror(errno));
	set_nodelay(fd);
	if (xfer(fd, hdr, sizeof(hdr), false))
		DIE("tcp floor: header");
	r = tcp_client(fd, sz, iters, mode);
	close(fd);
	return r;
}

/* Serves clients one after another: the RDMA test, then the TCP floor. */
static int run_server(unsigned port)
{
	struct addrinfo *ai = resolve(NULL, port, true), *ti = resolve(NULL, port + 1, true);
	struct rpcrdma_cm_id *l;
	int one = 1, tl = socket(ti->ai_family, SOCK_STREAM, 0);

	if (tl < 0 || setsockopt(tl, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(tl, ti->ai_addr, ti->ai_addrlen) || listen(tl, 4))
		DIE("tcp floor listen on port %u: %s", port + 1, strerror(errno));
	freeaddrinfo(ti);
	CK(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &ctx));
	CK(rpcrdma_cm_channel_create(ctx, &ch));
	CK(rpcrdma_listen(ch, ai->ai_addr, ai->ai_addrlen, 4, NULL, &l));
	freeaddrinfo(ai);
	fprintf(stderr, "rpcrdma-perf: server on port %u (RDMA) and %u (TCP floor)\n", port, port + 1);
	for (;;) {
		struct rpcrdma_cm_event ev;
		struct hello h;
		struct remote r;
		struct rpcrdma_conn_param cp;
		enum test t;
		size_t sz;
		long iters;
		uint32_t hdr[3];
		int fd;

		get_ev(&ev, -1);
		if (ev.type != RPCRDMA_CM_CONNECT_REQUEST)
			continue;
		memset(&h, 0, sizeof(h));
		memcpy(&h, ev.private_data, ev.private_data_len < sizeof(h) ? ev.private_data_len : sizeof(h));
		t = (enum test)ntohl(h.test);
		sz = ntohl(h.size);
		iters = (long)ntohl(h.iters);
		if (ev.private_data_len < sizeof(h) || ntohl(h.magic) != PERF_MAGIC || t < T_SEND_LAT ||
		    t > T_COMMIT_LAT || sz == 0 || sz > (1u << 30)) {
			rpcrdma_reject(ev.id, NULL, 0);
			rpcrdma_cm_id_destroy(ev.id);
			continue;
		}
		bufsz = sz;
		ep_make(&srv, sz);
		srv.id = ev.id;
		rem.rkey = rpcrdma_mr_rkey(srv.mr);
		rem.addr = rpcrdma_mr_remote_offset(srv.mr);
		if (t == T_COMMIT_LAT)
			make_commit_target(&srv, sz, &rem);
		r.rkey = htonl(rem.rkey);
		r.pad = 0;
		r.addr = htobe64(rem.addr);
		if (t == T_SEND_LAT)
			for (int i = 0; i < 2; i++)
				post_recv(&srv, bufsz);
		cp = conn_param(&r, sizeof(r));
		CK(rpcrdma_accept(srv.id, srv.qp, &cp));
		fprintf(stderr, "rpcrdma-perf: %s size %zu iters %ld\n", test_names[t], sz, iters);
		if (t == T_SEND_LAT) {
			struct echo_arg ea = {sz, iters};

			srv_echo(&ea);
		}
		/* passive otherwise: the provider answers Reads / Commits and
		 * places Writes; wait for the client to go */
		do
			get_ev(&ev, -1);
		while (ev.type != RPCRDMA_CM_DISCONNECTED && ev.type != RPCRDMA_CM_ERROR);
		ep_free(&srv);
		/* the floor */
		fd = accept(tl, NULL, NULL);
		if (fd < 0)
			continue;
		set_nodelay(fd);
		if (xfer(fd, hdr, sizeof(hdr), true) == 0) {
			struct tcparg ta = {fd, ntohl(hdr[1]), (long)ntohl(hdr[2]), (int)ntohl(hdr[0])};

			if (ta.sz <= (1u << 30) && (ta.mode == 0 || ta.mode == 1))
				tcp_peer(&ta);
		}
		close(fd);
	}
	return 0;
}

static void usage(void)
{
	printf("usage: rpcrdma-perf send_lat|write_bw|read_lat|commit_lat [--size N] [--iters N]\n"
	       "                    [--server | HOST] [--port P] [--rounds R] [--poll] [--crc] [--json]\n"
	       "Without --server / HOST both ends run in this process over loopback; with them\n"
	       "the server (rpcrdma-perf --server) listens on P (default 18515) for the soft\n"
	       "provider and P+1 for the raw TCP floor, and the client runs the test against\n"
	       "HOST. The raw TCP floor is measured in the same run between the same ends.\n"
	       "Latencies: send_lat one-way us (half the ping-pong), read_lat / commit_lat round\n"
	       "trip us; write_bw MB/s (16 Writes in flight). Waits block (rpcrdma_cq_wait);\n"
	       "--poll spins instead, on rpcrdma_cq_poll and on a non-blocking recv(2) for the\n"
	       "floor (both sides, like with like). --crc negotiates MPA CRC32c (default off, as\n"
	       "Linux siw; the floor has no CRC either way). Sockets: the floor's and the soft\n"
	       "provider's both set TCP_NODELAY only; the soft provider's data sockets also\n"
	       "carry SO_RCVTIMEO (its bounded fast wait).\n"
	       "Loopback runs R rounds (default 5) alternating soft and TCP, iters/R each, and\n"
	       "prints the medians and the median of the per-round ratios.\n");
}

int main(int argc, char **argv)
{
	const char *mode = NULL, *host = NULL;
	size_t size = 0;
	long iters = 0;
	unsigned port = 18515;
	bool json = false, server = false, loop;
	int rounds = 0;
	double vs[64], fs[64], rs[64];
	double v, floor, ratio;
	const char *unit;
	enum test t = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			return 0;
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
			iters = strtol(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			port = (unsigned)strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--poll")) {
			busy_poll = true;
		} else if (!strcmp(argv[i], "--crc")) {
			use_crc = true;
		} else if (!strcmp(argv[i], "--server")) {
			server = true;
		} else if (argv[i][0] != '-' && !mode) {
			mode = argv[i];
		} else if (argv[i][0] != '-' && !host) {
			host = argv[i];
		} else {
			usage();
			return 2;
		}
	}
	if (port == 0 || port > 65534) {
		fprintf(stderr, "rpcrdma-perf: bad port\n");
		return 2;
	}
	if (server)
		return run_server(port);
	for (int i = 1; i <= T_COMMIT_LAT && mode; i++)
		if (!strcmp(mode, test_names[i]))
			t = (enum test)i;
	if (!t) {
		usage();
		return 2;
	}
	if (t == T_WRITE_BW) {
		size = size ? size : 1 << 20;
		iters = iters ? iters : 2000;
	} else {
		size = size ? size : (t == T_COMMIT_LAT ? 4096 : 64);
		iters = iters ? iters : 20000;
	}
	if (size == 0 || size > (1u << 30) || iters <= 0 || iters > INT32_MAX) {
		fprintf(stderr, "rpcrdma-perf: bad size or iterations\n");
		return 2;
	}
	loop = host == NULL;
	if (loop)
		setup_loopback(t, size);
	else
		setup_client(host, port, t, size, iters);
	/* Loopback: alternate rounds of the soft test and the TCP floor so that
	 * load changes on a shared machine hit both alike; report medians. */
	if (!loop)
		rounds = 1;
	else if (rounds <= 0)
		rounds = 5;
	if (rounds > 64 || iters / rounds < 1) {
		fprintf(stderr, "rpcrdma-perf: bad --rounds\n");
		return 2;
	}
	unit = t == T_WRITE_BW ? "MB/s" : "us";
	for (int r = 0; r < rounds; r++) {
		long it = iters / rounds;

		switch (t) {
		case T_SEND_LAT:
			vs[r] = send_lat(size, it, loop);
			break;
		case T_WRITE_BW:
			vs[r] = write_bw(size, it);
			break;
		case T_READ_LAT:
			vs[r] = read_lat(size, it);
			break;
		default:
			vs[r] = commit_lat(size, it);
			break;
		}
		if (!loop) {
			rpcrdma_disconnect(cli.id);
			fs[r] = client_tcp_floor(host, port + 1, size, it, t == T_WRITE_BW ? 1 : 0);
		} else {
			fs[r] = tcp_run(size, it, t == T_WRITE_BW ? 1 : 0);
		}
		if (t == T_READ_LAT || t == T_COMMIT_LAT)
			fs[r] *= 2; /* round trip */
		rs[r] = vs[r] / fs[r];
	}
	v = median(vs, rounds);
	floor = median(fs, rounds);
	ratio = median(rs, rounds);
	if (srv.path[0])
		unlink(srv.path);
	if (json)
		printf("{\"test\":\"%s\",\"size\":%zu,\"iters\":%ld,\"mode\":\"%s\",\"rounds\":%d,\"poll\":%s,"
		       "\"crc\":%s,\"value\":%.3f,\"unit\":\"%s\",\"tcp\":%.3f,\"ratio_to_tcp\":%.3f}\n", mode,
		       size, iters, loop ? "loopback" : "split", rounds, busy_poll ? "true" : "false",
		       use_crc ? "true" : "false",
		       v, unit, floor, ratio);
	else
		printf("%-10s size %zu iters %ld (%s%s): %.3f %s; raw TCP %.3f %s; ratio to TCP %.3f\n",
		       mode, size, iters, loop ? "loopback" : "split", busy_poll ? ", poll" : "", v,
		       unit, floor, unit, ratio);
	return 0;
}
