/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's scale workload (issue 16): many connections at once.
 *
 * For each transport and N in 1, 10, 100, 1000 (10,000 with --big): a
 * fresh server (forked by the server factory, itself forked before this
 * process had any thread), then N clients in this process, each connected
 * and making one NULL call (connect + first call timed: connect_p50_us);
 * then, idle, what each connection costs on each side (RSS, file
 * descriptors; the threads of each process); then NULL and 64 KiB READ
 * calls with every connection active for the duration: rdma:// and tcp://
 * keep one asynchronous call in flight on each connection, raw TCP one
 * request per socket from one epoll loop, libtirpc (synchronous only)
 * min(N, 256) threads each calling on its connections in turn. READ 64K is
 * not run at 10,000 connections (one 64 KiB sink per connection). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const unsigned scale_ns[] = {1, 10, 100, 1000, 10000};
bool big;
static int fac_wr = -1, fac_rd = -1;   /* the server factory's pipes */
#define SCALE_TIRPC_THREADS 256u

/* The factory: forks a server of the transport named on each request line
 * and answers "PID PORT" (or "error ERRNO"). Its servers die with it, and
 * it dies with the benchmark. */
static void factory_main(int rd, int wr)
{
	char line[32];
	FILE *in = fdopen(rd, "r");

	signal(SIGCHLD, SIG_IGN);   /* killed servers are reaped */
	while (in && fgets(line, sizeof(line), in)) {
		int p[2], port = 0, rc = 0;
		enum tp tp = TP_N;
		pid_t pid;
		char ans[64] = "";
		ssize_t n;

		for (int t = 0; t < TP_N; t++)
			if (!strncmp(line, tp_name[t], strlen(tp_name[t])))
				tp = (enum tp)t;
		if (tp == TP_N || pipe(p) < 0) {
			dprintf(wr, "error %d\n", EINVAL);
			continue;
		}
		pid = fork();
		if (pid == 0) {
			close(p[0]);
			serve_child(tp, p[1], true);
		}
		close(p[1]);
		n = pid > 0 ? read(p[0], ans, sizeof(ans) - 1) : -1;
		close(p[0]);
		ans[n > 0 ? n : 0] = 0;
		if (pid < 0 || sscanf(ans, "%d", &port) != 1 || port <= 0)
			dprintf(wr, "error %d\n", pid < 0 ? errno : sscanf(ans, "error %d", &rc) == 1 ? rc : EIO);
		else
			dprintf(wr, "%d %d\n", (int)pid, port);
	}
	_exit(0);
}

static void factory_start(void)
{
	int a[2], b[2];
	pid_t pid;

	if (pipe(a) < 0 || pipe(b) < 0)
		return;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(a[1]);
		close(b[0]);
		prctl_parent_death();
		factory_main(a[0], b[1]);
	}
	close(a[0]);
	close(b[1]);
	if (pid < 0) {
		close(a[1]);
		close(b[0]);
		return;
	}
	fac_wr = a[1];
	fac_rd = b[0];
}

/* A fresh server of @tp: its pid and port, or -errno. */
static int factory_server(enum tp tp, pid_t *pid, int *port)
{
	char line[64];
	ssize_t n;
	int p = 0, e = 0;

	if (fac_wr < 0)
		return -ECHILD;
	dprintf(fac_wr, "%s\n", tp_name[tp]);
	n = read(fac_rd, line, sizeof(line) - 1);
	if (n <= 0)
		return -EIO;
	line[n] = 0;
	if (sscanf(line, "error %d", &e) == 1)
		return -e;
	if (sscanf(line, "%d %d", &p, port) != 2)
		return -EIO;
	*pid = p;
	return 0;
}

/* What a process holds: KiB resident, threads, file descriptors (pid 0:
 * this one). */
struct pstat {
	long rss_kib, threads, fds;
};

static void pstat_read(pid_t pid, struct pstat *s)
{
	char path[64], line[256];
	FILE *f;
	DIR *d;
	struct dirent *e;

	memset(s, 0, sizeof(*s));
	s->rss_kib = s->threads = s->fds = -1;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "VmRSS:", 6))
			s->rss_kib = atol(line + 6);
		else if (!strncmp(line, "Threads:", 8))
			s->threads = atol(line + 8);
	}
	if (f)
		fclose(f);
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	d = opendir(path);
	if (d) {
		s->fds = 0;
		while ((e = readdir(d)))
			s->fds += e->d_name[0] != '.';
		closedir(d);
		if (!pid)
			s->fds--;   /* the directory's own */
	}
}

/* One connection of the scale workload. */
struct sconn {
	struct conn c;          /* rdma, tcp, tirpc; raw: c.fd */
	uint64_t t0;            /* raw: the request's send time */
	uint32_t got;           /* raw: response bytes read so far */
};

/* rdma://, tcp://: one asynchronous call in flight on every connection. */
static int scale_async(struct sconn *cs, unsigned n, struct actx *s)
{
	struct aslot *sl = calloc(n, sizeof(*sl));
	int rc;

	if (!sl)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		sl[i].clnt = cs[i].c.rc;
		sl[i].sink = cs[i].c.sink;
	}
	rc = async_run(sl, n, s);
	free(sl);
	return rc;
}

/* raw TCP: one request in flight per socket, one epoll loop. */
static int scale_raw(struct sconn *cs, unsigned n, struct actx *s)
{
	uint32_t req = CALL_HDR + (s->op ? 4 : 0);
	uint32_t rsp = REPLY_HDR + (s->op ? 4 + XDR_ALIGN(s->size) : 0);
	uint32_t h[2] = {htonl(req), htonl(rsp)};
	uint8_t msg[64], *buf = malloc(MAXIO);
	int ep = epoll_create1(EPOLL_CLOEXEC), rc = 0;
	unsigned inflight = 0;

	memset(msg, 0, sizeof(msg));
	memcpy(msg, h, 8);
	for (unsigned i = 0; i < n && ep >= 0 && buf && !rc; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};

		cs[i].got = 0;
		cs[i].t0 = fs_now_ns();
		if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].c.fd, &ev) || write_full(cs[i].c.fd, msg, req))
			rc = -EIO;
		else
			inflight++;
	}
	while (!rc && inflight) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, 10000);

		if (k <= 0) {
			rc = k < 0 && errno == EINTR ? 0 : -ETIMEDOUT;
			continue;
		}
		for (int i = 0; i < k && !rc; i++) {
			struct sconn *sc = evs[i].data.ptr;
			ssize_t r = read(sc->c.fd, buf, rsp - sc->got);
			uint64_t now;

			if (r <= 0) {
				rc = -EIO;
				break;
			}
			sc->got += (uint32_t)r;
			if (sc->got < rsp)
				continue;
			now = fs_now_ns();
			lat_add(&s->l, now - sc->t0);
			s->ops++;
			sc->got = 0;
			if (now >= s->end) {
				inflight--;
				continue;
			}
			sc->t0 = now;
			if (write_full(sc->c.fd, msg, req))
				rc = -EIO;
		}
	}
	if (ep >= 0)
		close(ep);
	free(buf);
	return rc;
}

struct tslice {
	struct sconn *cs;
	unsigned n, stride, first;
	struct actx *s;
	uint64_t ops;
	int rc;
	pthread_t t;
};

static void *tirpc_slice(void *arg)
{
	struct tslice *t = arg;

	while (!t->rc && fs_now_ns() < t->s->end)
		for (unsigned i = t->first; i < t->n && !t->rc; i += t->stride) {
			uint64_t a = fs_now_ns();

			t->rc = conn_op(&t->cs[i].c, t->s->op, t->s->size);
			lat_add(&t->s->l, fs_now_ns() - a);
			t->ops++;
		}
	return NULL;
}

/* libtirpc: synchronous calls, min(N, SCALE_TIRPC_THREADS) threads. */
static int scale_tirpc(struct sconn *cs, unsigned n, struct actx *s)
{
	unsigned nt = n < SCALE_TIRPC_THREADS ? n : SCALE_TIRPC_THREADS, started = 0;
	struct tslice *ts = calloc(nt, sizeof(*ts));
	pthread_attr_t at;
	int rc = 0;

	if (!ts)
		return -ENOMEM;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (unsigned i = 0; i < nt; i++) {
		ts[i] = (struct tslice){cs, n, nt, i, s, 0, 0, 0};
		if (pthread_create(&ts[i].t, &at, tirpc_slice, &ts[i]))
			break;
		started++;
	}
	pthread_attr_destroy(&at);
	for (unsigned i = 0; i < started; i++) {
		pthread_join(ts[i].t, NULL);
		s->ops += ts[i].ops;
		if (ts[i].rc && !rc)
			rc = ts[i].rc;
	}
	free(ts);
	return started ? rc : -EAGAIN;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Connects @n clients of @tp to @port, each making one NULL call: the
 * p50 of those in microseconds in *@p50. */
static int scale_connect(struct sconn *cs, unsigned n, enum tp tp, double *p50)
{
	double *t = malloc(sizeof(*t) * n);
	int rc = 0;
	unsigned i;

	if (!t)
		return -ENOMEM;
	for (i = 0; i < n && !rc; i++) {
		uint64_t a = fs_now_ns();

		rc = conn_open(&cs[i].c, tp);
		if (!rc)
			rc = conn_op(&cs[i].c, 0, 0);
		t[i] = (double)(fs_now_ns() - a) / 1e3;
	}
	qsort(t, i, sizeof(*t), cmp_double);
	*p50 = i ? t[i / 2] : 0;
	free(t);
	return rc;
}

/* Every connection active for the duration: @op 0 NULL, 1 READ 64K, into
 * @r (server @spid's CPU too). */
static int scale_measure(enum tp tp, struct sconn *cs, unsigned n, pid_t spid, int op,
			 struct rec *r)
{
	struct actx s;
	int64_t cc0, sc0, cc1, sc1;
	uint64_t t0;
	int rc = 0;

	for (unsigned i = 0; op && i < n && !rc; i++) {
		if (!cs[i].c.sink)
			cs[i].c.sink = malloc(CONN_SIZE + 64);
		if (!cs[i].c.sink)
			rc = -ENOMEM;
	}
	if (rc)
		return rc;
	actx_init(&s, op, CONN_SIZE);
	cc0 = cpu_ns(0);
	sc0 = cpu_ns(spid);
	t0 = fs_now_ns();
	s.end = t0 + (uint64_t)(dur * 1e9);
	rc = tp == TP_RAW ? scale_raw(cs, n, &s)
	     : tp == TP_TIRPC ? scale_tirpc(cs, n, &s) : scale_async(cs, n, &s);
	cc1 = cpu_ns(0);
	sc1 = cpu_ns(spid);
	lat_finish(&s.l, r, s.ops, s.ops * (uint64_t)s.size, (double)(fs_now_ns() - t0) / 1e9);
	if (s.ops && cc0 >= 0 && cc1 >= cc0)
		r->cpu_c = (double)(cc1 - cc0) / 1e3 / (double)s.ops;
	if (s.ops && sc0 >= 0 && sc1 >= sc0)
		r->cpu_s = (double)(sc1 - sc0) / 1e3 / (double)s.ops;
	actx_fini(&s);
	return rc;
}

/* The idle costs of the @n connections open since @c0 (client) and @s0
 * (server @spid) into @r. */
static void scale_idle(struct rec *r, unsigned n, pid_t spid, const struct pstat *c0,
		       const struct pstat *s0)
{
	/* the counts settle (the server frees half-open state, the first
	 * calls' buffers are back) */
	struct timespec ts = {0, 300000000};
	struct pstat c1, s1;

	nanosleep(&ts, NULL);
	pstat_read(spid, &s1);
	pstat_read(0, &c1);
	r->client_rss_per_conn = (double)(c1.rss_kib - c0->rss_kib) / n;
	r->server_rss_per_conn = (double)(s1.rss_kib - s0->rss_kib) / n;
	r->fds_per_conn = (double)(c1.fds - c0->fds) / n;
	r->server_fds_per_conn = (double)(s1.fds - s0->fds) / n;
	r->client_threads = c1.threads;
	r->server_threads = s1.threads;
}

static void scale_point(enum tp tp, unsigned n)
{
	struct sconn *cs = calloc(n, sizeof(*cs));
	struct pstat c0, s0;
	pid_t spid = 0;
	int port = 0, rc, saved_port = tp_port[tp];
	double p50 = 0;
	struct rec *idle, *r;

	idle = rec_new("scale", tp, "null", 0, 1, n);
	if (!cs) {
		na(idle, "out of memory");
		return;
	}
	rc = factory_server(tp, &spid, &port);
	if (rc) {
		snprintf(idle->na, sizeof(idle->na), "server failed: %s", strerror(-rc));
		free(cs);
		return;
	}
	progress("scale: %u connections over %s", n, tp_name[tp]);
	pstat_read(spid, &s0);
	pstat_read(0, &c0);
	tp_port[tp] = port;   /* conn_open connects there */
	conn_sink = 0;        /* the sinks come after the idle measurement */
	rc = scale_connect(cs, n, tp, &p50);
	conn_sink = MAXIO + 64;
	tp_port[tp] = saved_port;
	if (rc) {
		snprintf(idle->na, sizeof(idle->na), "failed: connection %s (%s)",
			 rc == -EMFILE || rc == -ENFILE ? "refused for want of file descriptors"
							: "failed", rpcrdma_strerror(rc));
	} else {
		scale_idle(idle, n, spid, &c0, &s0);
		idle->connect_p50_us = p50;
		rc = scale_measure(tp, cs, n, spid, 0, idle);
		record_err(idle, rc);
		r = rec_new("scale", tp, "read64k", CONN_SIZE, 1, n);
		idle = &recs[nrecs - 2];   /* (rec_new may move the records) */
		r->connect_p50_us = idle->connect_p50_us;
		r->client_rss_per_conn = idle->client_rss_per_conn;
		r->server_rss_per_conn = idle->server_rss_per_conn;
		r->fds_per_conn = idle->fds_per_conn;
		r->server_fds_per_conn = idle->server_fds_per_conn;
		r->client_threads = idle->client_threads;
		r->server_threads = idle->server_threads;
		if (rc)
			na(r, "not run (NULL failed)");
		else if (n > 1000)
			na(r, "not run beyond 1000 connections (a 64 KiB sink each)");
		else
			record_err(r, scale_measure(tp, cs, n, spid, 1, r));
	}
	for (unsigned i = 0; i < n; i++)
		conn_close(&cs[i].c);
	free(cs);
	kill(spid, SIGKILL);
}

/* As many descriptors as the hard limit allows (root: raised). */
static void raise_nofile(unsigned conns)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)conns * 2 + 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_max < want) {
		struct rlimit up = {want, want};

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
}

void scale_setup(void)
{
	raise_nofile(big ? 10000 : 1000);
	factory_start();
}

unsigned scale_points(void)
{
	return big ? N(scale_ns) : N(scale_ns) - 1;
}

void run_scale(void)
{
	unsigned npts = scale_points();

	for (unsigned i = 0; i < npts; i++)
		for (int tp = 0; tp < TP_N; tp++) {
			if (!tp_want[tp])
				continue;
			if (!tp_ok[tp]) {
				na(rec_new("scale", (enum tp)tp, "null", 0, 1, scale_ns[i]), tp_why[tp]);
				continue;
			}
			scale_point((enum tp)tp, scale_ns[i]);
		}
}

