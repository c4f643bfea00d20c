/* rpcrdma-perf: perftest-style measurements of the soft provider through the
 * public API only (include/rpcrdma headers): send_lat (Send ping-pong), write_bw
 * (RDMA Write stream), read_lat (RDMA Read round trip), commit_lat (Write +
 * RDMA Commit into a durable file mapping). Both ends run in this process on
 * loopback; raw TCP ping-pong latency and stream bandwidth are measured in
 * the same run as the floor, and the ratio is printed (--json: one object
 * with ratio_to_tcp). Split mode (--server / HOST) is not implemented yet. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
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

struct ep {
	struct rpcrdma_pd *pd;
	struct rpcrdma_cq *cq;
	struct rpcrdma_qp *qp;
	struct rpcrdma_cm_id *id;
	struct rpcrdma_mr *mr;
	uint8_t *buf;
};

static struct rpcrdma_context *ctx;
static struct rpcrdma_cm_channel *ch;
static struct ep cli, srv;
static size_t bufsz;

static void ep_make(struct ep *e, size_t sz)
{
	struct rpcrdma_cq_attr ca = {.cqe = 1024};
	struct rpcrdma_qp_attr qa = {0};

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

static void get_ev(struct rpcrdma_cm_event *ev)
{
	for (int i = 0; i < 10000; i++) {
		if (rpcrdma_cm_get_event(ch, ev) == 0)
			return;
		usleep(1000);
	}
	DIE("no connection event");
}

static void setup(size_t sz)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_storage ss;
	struct rpcrdma_cm_id *l;
	struct rpcrdma_conn_param cp = {.responder_resources = 16, .initiator_depth = 16};
	struct rpcrdma_cm_event ev;

	bufsz = sz;
	CK(rpcrdma_open(RPCRDMA_PROVIDER_SOFT, NULL, &ctx));
	CK(rpcrdma_cm_channel_create(ctx, &ch));
	ep_make(&cli, sz);
	ep_make(&srv, sz);
	CK(rpcrdma_listen(ch, (struct sockaddr *)&a, sizeof(a), 4, NULL, &l));
	CK(rpcrdma_cm_local_addr(l, &ss));
	a.sin_port = ((struct sockaddr_in *)&ss)->sin_port;
	CK(rpcrdma_connect(ch, cli.qp, (struct sockaddr *)&a, sizeof(a), &cp, NULL, &cli.id));
	get_ev(&ev);
	if (ev.type != RPCRDMA_CM_CONNECT_REQUEST)
		DIE("unexpected CM event %d", ev.type);
	srv.id = ev.id;
	CK(rpcrdma_accept(srv.id, srv.qp, &cp));
	get_ev(&ev);
	get_ev(&ev);
}

static void wait1(struct rpcrdma_cq *cq, struct rpcrdma_wc *wc)
{
	int n;

	while ((n = rpcrdma_cq_poll(cq, 1, wc)) == 0)
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

static void post(struct ep *e, enum rpcrdma_wr_opcode op, size_t sz, struct ep *peer, bool sig)
{
	struct rpcrdma_sge s = {(uintptr_t)e->buf, (uint32_t)sz, rpcrdma_mr_lkey(e->mr)};
	struct rpcrdma_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = op,
				    .flags = sig ? RPCRDMA_SEND_SIGNALED : 0};

	if (peer) {
		w.u.rdma.stag = rpcrdma_mr_rkey(peer->mr);
		w.u.rdma.remote_offset = (uintptr_t)peer->buf;
	}
	CK(rpcrdma_post_send(e->qp, &w, NULL));
}

/* The server side of send_lat: echo every Send. */
static volatile int stop_srv;
static size_t g_size;
static long g_iters;

static void *srv_echo(void *arg)
{
	struct rpcrdma_wc wc;

	(void)arg;
	for (long i = 0; i < g_iters; i++) {
		wait1(srv.cq, &wc);
		post_recv(&srv, bufsz);
		post(&srv, RPCRDMA_WR_SEND, g_size, NULL, false);
	}
	return NULL;
}

static double send_lat(size_t sz, long iters)
{
	pthread_t t;
	struct rpcrdma_wc wc;
	uint64_t t0;

	g_size = sz;
	g_iters = iters;
	for (int i = 0; i < 2; i++) {
		post_recv(&srv, bufsz);
		post_recv(&cli, bufsz);
	}
	pthread_create(&t, NULL, srv_echo, NULL);
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_SEND, sz, NULL, false);
		wait1(cli.cq, &wc);
		post_recv(&cli, bufsz);
	}
	pthread_join(t, NULL);
	return (double)(now_ns() - t0) / (double)iters / 2 / 1000.0; /* one-way us */
}

static double write_bw(size_t sz, long iters)
{
	struct rpcrdma_wc wc;
	uint64_t t0 = now_ns();
	long inflight = 0, done = 0;

	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_RDMA_WRITE, sz, &srv, true);
		if (++inflight >= 16) {
			wait1(cli.cq, &wc);
			inflight--;
			done++;
		}
	}
	while (inflight--)
		wait1(cli.cq, &wc);
	(void)done;
	return (double)sz * (double)iters / ((double)(now_ns() - t0) / 1e9) / 1e6; /* MB/s */
}

static double read_lat(size_t sz, long iters)
{
	struct rpcrdma_wc wc;
	uint64_t t0 = now_ns();

	for (long i = 0; i < iters; i++) {
		post(&cli, RPCRDMA_WR_RDMA_READ, sz, &srv, true);
		wait1(cli.cq, &wc);
	}
	return (double)(now_ns() - t0) / (double)iters / 1000.0; /* round trip us */
}

static double commit_lat(size_t sz, long iters)
{
	struct rpcrdma_durable_map map;
	struct rpcrdma_mr_attr a;
	struct rpcrdma_mr *dmr;
	char path[] = "/tmp/rpcrdma-perf-XXXXXX";
	int fd = mkstemp(path);
	struct rpcrdma_wc wc;
	uint64_t t0;

	if (fd < 0)
		DIE("mkstemp: %s", strerror(errno));
	close(fd);
	CK(rpcrdma_durable_map(path, sz, &map));
	CK(rpcrdma_durable_mr_attr(&map, map.addr, sz, RPCRDMA_ACCESS_LOCAL_WRITE |
				   RPCRDMA_ACCESS_REMOTE_WRITE, &a));
	CK(rpcrdma_reg_mr(srv.pd, &a, &dmr));
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		struct rpcrdma_sge s = {(uintptr_t)cli.buf, (uint32_t)sz, rpcrdma_mr_lkey(cli.mr)};
		struct rpcrdma_remote_region rg = {rpcrdma_mr_rkey(dmr), (uint32_t)sz, (uintptr_t)map.addr};
		struct rpcrdma_send_wr c = {.opcode = RPCRDMA_WR_RDMA_COMMIT, .flags = RPCRDMA_SEND_SIGNALED,
					    .u.commit = {.regions = &rg, .num_regions = 1}};
		struct rpcrdma_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = RPCRDMA_WR_RDMA_WRITE,
					    .next = &c,
					    .u.rdma = {.stag = rpcrdma_mr_rkey(dmr), .remote_offset = (uintptr_t)map.addr}};

		CK(rpcrdma_post_send(cli.qp, &w, NULL));
		wait1(cli.cq, &wc);
	}
	{
		double us = (double)(now_ns() - t0) / (double)iters / 1000.0;

		rpcrdma_dereg_mr(dmr);
		rpcrdma_durable_unmap(&map);
		unlink(path);
		return us;
	}
}

/* ---- raw TCP floor ---- */

static int tcp_pair(int *a, int *b)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(s);
	int one = 1, lf = socket(AF_INET, SOCK_STREAM, 0);

	if (lf < 0 || bind(lf, (struct sockaddr *)&s, sizeof(s)) || listen(lf, 1) ||
	    getsockname(lf, (struct sockaddr *)&s, &l))
		return -1;
	*a = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*a, (struct sockaddr *)&s, sizeof(s)))
		return -1;
	*b = accept(lf, NULL, NULL);
	close(lf);
	setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

static void xfer(int fd, void *b, size_t n, bool rd)
{
	uint8_t *p = b;

	while (n) {
		ssize_t r = rd ? read(fd, p, n) : write(fd, p, n);

		if (r <= 0)
			DIE("tcp %s failed", rd ? "read" : "write");
		p += r;
		n -= (size_t)r;
	}
}

struct tcparg { int fd; size_t sz; long iters; int mode; };

static void *tcp_peer(void *arg)
{
	struct tcparg *t = arg;
	uint8_t *b = malloc(t->sz ? t->sz : 1);

	for (long i = 0; i < t->iters; i++) {
		xfer(t->fd, b, t->sz, true);
		if (t->mode == 0)
			xfer(t->fd, b, t->sz, false);
	}
	if (t->mode == 1)
		xfer(t->fd, b, 1, false);
	free(b);
	return NULL;
}

static double tcp_run(size_t sz, long iters, int mode)
{
	int a, b;
	pthread_t th;
	struct tcparg t;
	uint8_t *buf = calloc(1, sz ? sz : 1);
	uint64_t t0;
	double r;

	if (tcp_pair(&a, &b))
		DIE("tcp setup failed");
	t = (struct tcparg){b, sz, iters, mode};
	pthread_create(&th, NULL, tcp_peer, &t);
	t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		xfer(a, buf, sz, false);
		if (mode == 0)
			xfer(a, buf, sz, true);
	}
	if (mode == 1)
		xfer(a, buf, 1, true);
	pthread_join(th, NULL);
	r = mode == 0 ? (double)(now_ns() - t0) / (double)iters / 2 / 1000.0
		      : (double)sz * (double)iters / ((double)(now_ns() - t0) / 1e9) / 1e6;
	close(a);
	close(b);
	free(buf);
	return r;
}

static void usage(void)
{
	printf("usage: rpcrdma-perf send_lat|write_bw|read_lat|commit_lat [--size N] [--iters N]\n"
	       "                    [--server | HOST] [--port P] [--json] [--help]\n"
	       "Runs both ends on loopback over the soft provider and measures raw TCP in the\n"
	       "same run as the floor. Latencies: send_lat one-way us (half the ping-pong),\n"
	       "read_lat / commit_lat round trip us; write_bw MB/s.\n");
}

int main(int argc, char **argv)
{
	const char *mode = NULL;
	size_t size = 0;
	long iters = 0;
	bool json = false;
	double v, floor, ratio;
	const char *unit;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage();
			return 0;
		} else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
			size = strtoull(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
			iters = strtol(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--port") && i + 1 < argc) {
			i++;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--server") || argv[i][0] != '-') {
			if (!mode && argv[i][0] != '-') {
				mode = argv[i];
				continue;
			}
			fprintf(stderr, "rpcrdma-perf: split mode (--server / HOST) is not implemented; "
					"both ends run on loopback\n");
			return 2;
		} else {
			usage();
			return 2;
		}
	}
	if (!mode) {
		usage();
		return 2;
	}
	if (!strcmp(mode, "write_bw")) {
		size = size ? size : 1 << 20;
		iters = iters ? iters : 2000;
	} else {
		size = size ? size : (strcmp(mode, "commit_lat") ? 64 : 4096);
		iters = iters ? iters : 20000;
	}
	setup(size);
	if (!strcmp(mode, "send_lat")) {
		v = send_lat(size, iters);
		floor = tcp_run(size, iters, 0);
		unit = "us";
		ratio = v / floor;
	} else if (!strcmp(mode, "write_bw")) {
		v = write_bw(size, iters);
		floor = tcp_run(size, iters, 1);
		unit = "MB/s";
		ratio = v / floor;
	} else if (!strcmp(mode, "read_lat")) {
		v = read_lat(size, iters);
		floor = 2 * tcp_run(size, iters, 0);
		unit = "us";
		ratio = v / floor;
	} else if (!strcmp(mode, "commit_lat")) {
		v = commit_lat(size, iters);
		floor = 2 * tcp_run(size, iters, 0);
		unit = "us";
		ratio = v / floor;
	} else {
		usage();
		return 2;
	}
	if (json)
		printf("{\"test\":\"%s\",\"size\":%zu,\"iters\":%ld,\"value\":%.3f,\"unit\":\"%s\","
		       "\"tcp\":%.3f,\"ratio_to_tcp\":%.3f}\n", mode, size, iters, v, unit, floor, ratio);
	else
		printf("%-10s size %zu iters %ld: %.3f %s; raw TCP %.3f %s; ratio to TCP %.3f\n", mode,
		       size, iters, v, unit, floor, unit, ratio);
	return 0;
}
