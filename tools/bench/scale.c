/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's scale workload (issue 16): many connections at once.
 *
 * For each N in 1, 10, 100, 1000 (10,000 with --big), every transport at
 * once, in K rounds (--rounds, default 5) so that a burst of load from
 * another process lands on every transport alike rather than on one: the
 * transports alternate within a round and their order is rotated each
 * round (rdma tcp tirpc raw, then tcp tirpc raw rdma, ...).
 *
 * Connects: each transport's server is fresh (forked by the server
 * factory, itself forked before this process had any thread) and each
 * connect is timed with its first NULL call. With N >= K the N connections
 * are opened in K batches, one batch per transport per round; with N < K
 * each round gives each transport a fresh server and all N connections
 * (the last round's are kept). A round's connect p50 is its batch's
 * median; connect_p50_us is over all the connects. Then, idle, what each
 * connection costs on each side: the client's growth in RSS and file
 * descriptors across the transport's batches (the first round's when N <
 * K), the server's growth after a settle; the threads of each process.
 *
 * Throughput: K rounds of slices of --duration / K seconds each, NULL on
 * every transport, then 64 KiB READ on every transport, with every
 * connection active: rdma:// and tcp:// keep one asynchronous call in
 * flight on each connection, raw TCP one request per socket from one epoll
 * loop, libtirpc (synchronous only) min(N, 256) threads each calling on
 * its connections in turn. A slice is exactly one whole measurement of
 * before, shortened (connections open and warm before it; the threads and
 * calls started inside it, as they always were); a point's ops/s, latency
 * and CPU are over all its slices, and each slice's ops/s is kept for the
 * per-round ratios (report.c). READ 64K is not run at 10,000 connections
 * (one 64 KiB sink per connection). */
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
/* --conns: bit i for scale_ns[i]; 0: the default points (--big's) */
static unsigned scale_only;
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

/* The median of @n values (sorted in place; the upper one of an even
 * count, as the connect p50 always was); 0 for none. */
static double p50_of(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n ? v[n / 2] : 0;
}

/* The median of @n > 0 values, sorted in place (of an even count: the
 * mean of the middle two; a round's batch of two is not its slower one). */
static double median_of(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One transport at one N, through every round: its server, its
 * connections, the idle costs, and per operation (0 NULL, 1 READ 64K) the
 * slices measured so far. */
struct spt {
	bool on;                 /* still measured at this N */
	char why[160];           /* why not any more (a server or a connection failed) */
	struct sconn *cs;
	unsigned open;           /* connections open */
	pid_t spid;
	int port;
	struct pstat s0, s1;     /* the server before its first connection, and idle
				    with all of them open */
	long c_rss, c_fds;       /* the client's growth across this transport's connects */
	double *ct;              /* connect + first call of every connection, us */
	unsigned nct;
	double round_connect[BENCH_ROUNDS_MAX];
	unsigned connect_rounds;
	struct sop {
		struct lat l;
		uint64_t ops, bytes;
		double secs;
		int64_t cc, sc;      /* CPU ns of client and server in the slices; < 0: unknown */
		double round_ops_s[BENCH_ROUNDS_MAX];
		unsigned rounds;
		int rc;
	} m[2];
};

/* The transport order of round @r: the wanted order rotated by @r. */
static enum tp round_tp(unsigned r, unsigned i)
{
	return (enum tp)((r + i) % TP_N);
}

/* Closes @p's connections and kills its server. */
static void spt_drop(struct spt *p)
{
	for (unsigned i = 0; i < p->open; i++)
		conn_close(&p->cs[i].c);
	p->open = 0;
	if (p->spid > 0)
		kill(p->spid, SIGKILL);
	p->spid = 0;
}

static void spt_fail(struct spt *p, int rc)
{
	p->on = false;
	snprintf(p->why, sizeof(p->why), "failed: connection %s (%s)",
		 rc == -EMFILE || rc == -ENFILE ? "refused for want of file descriptors" : "failed",
		 rpcrdma_strerror(rc));
}

/* Round @r of the connects of @tp (@n connections, @rounds rounds): with
 * @n >= @rounds the connections [n*r/rounds, n*(r+1)/rounds) to the
 * point's one fresh server; with fewer connections than rounds every
 * round a fresh server and all @n connections (the last round's are kept).
 * Either way each connect is today's: connect + first NULL call to a
 * server that has had no connection but this round's and earlier rounds'
 * still open. */
static void connect_round(struct spt *p, enum tp tp, unsigned n, unsigned r, unsigned rounds)
{
	bool fresh = n < rounds;
	unsigned lo = fresh ? 0 : n * r / rounds, hi = fresh ? n : n * (r + 1) / rounds;
	int saved_port = tp_port[tp], rc = 0;
	struct pstat c0, c1;
	double *t;

	if (!p->on || lo == hi)
		return;
	if (fresh || r == 0) {
		spt_drop(p);
		rc = factory_server(tp, &p->spid, &p->port);
		if (rc) {
			p->on = false;
			snprintf(p->why, sizeof(p->why), "server failed: %s", strerror(-rc));
			return;
		}
		pstat_read(p->spid, &p->s0);
	}
	t = p->ct + p->nct;
	pstat_read(0, &c0);
	tp_port[tp] = p->port;   /* conn_open connects there */
	for (unsigned i = lo; i < hi && !rc; i++) {
		uint64_t a = fs_now_ns();

		rc = conn_open(&p->cs[i].c, tp);
		p->open = i + 1;   /* closed with conn_close even when it failed */
		if (!rc)
			rc = conn_op(&p->cs[i].c, 0, 0);
		p->ct[p->nct++] = (double)(fs_now_ns() - a) / 1e3;
	}
	tp_port[tp] = saved_port;
	pstat_read(0, &c1);
	/* the client's growth: with a fresh server each round, the first
	 * round's (as the first connects of a transport always were; the
	 * later ones follow a close of the same number of connections) */
	if (!fresh || r == 0) {
		p->c_rss += c1.rss_kib - c0.rss_kib;
		p->c_fds += c1.fds - c0.fds;
	}
	if (rc) {
		spt_fail(p, rc);
		return;
	}
	{
		double *v = malloc(sizeof(*v) * (hi - lo));

		if (v) {
			memcpy(v, t, sizeof(*v) * (hi - lo));
			p->round_connect[p->connect_rounds++] = median_of(v, hi - lo);
			free(v);
		}
	}
}

/* Adds @b - @a to *@acc; an unknown value makes the sum unknown (-1). */
static void ns_add(int64_t *acc, int64_t a, int64_t b)
{
	*acc = *acc < 0 || a < 0 || b < a ? -1 : *acc + (b - a);
}

/* One slice: every connection of @p active for @secs seconds, @op 0
 * NULL, 1 READ 64K (the same work as one whole measurement, shorter):
 * its operations, time, CPU and latencies added to @p's. */
static int scale_slice(struct spt *p, enum tp tp, int op, double secs)
{
	struct sop *m = &p->m[op];
	struct actx s;
	int64_t cc0, sc0, cc1, sc1;
	uint64_t t0;
	double t;
	int rc;

	actx_init(&s, op, CONN_SIZE);
	cc0 = cpu_ns(0);
	sc0 = cpu_ns(p->spid);
	t0 = fs_now_ns();
	s.end = t0 + (uint64_t)(secs * 1e9);
	rc = tp == TP_RAW ? scale_raw(p->cs, p->open, &s)
	     : tp == TP_TIRPC ? scale_tirpc(p->cs, p->open, &s) : scale_async(p->cs, p->open, &s);
	cc1 = cpu_ns(0);
	sc1 = cpu_ns(p->spid);
	t = (double)(fs_now_ns() - t0) / 1e9;
	ns_add(&m->cc, cc0, cc1);
	ns_add(&m->sc, sc0, sc1);
	lat_move(&m->l, &s.l);
	m->ops += s.ops;
	m->bytes += s.ops * (uint64_t)s.size;
	m->secs += t;
	if (m->rounds < BENCH_ROUNDS_MAX)
		m->round_ops_s[m->rounds++] = t > 0 ? (double)s.ops / t : 0;
	actx_fini(&s);
	return rc;
}

/* The READ slices' result buffers (after the idle costs were read). */
static int scale_sinks(struct spt *p)
{
	for (unsigned i = 0; i < p->open; i++) {
		if (!p->cs[i].c.sink)
			p->cs[i].c.sink = malloc(CONN_SIZE + 64);
		if (!p->cs[i].c.sink)
			return -ENOMEM;
	}
	return 0;
}

/* The idle costs of @p's @n connections (client: its connects' growth;
 * server: its own process since before its first connection) into @r. */
static void scale_idle(struct rec *r, const struct spt *p, unsigned n, const struct pstat *c1)
{
	const struct pstat s1 = p->s1;

	r->client_rss_per_conn = (double)p->c_rss / n;
	r->server_rss_per_conn = (double)(s1.rss_kib - p->s0.rss_kib) / n;
	r->fds_per_conn = (double)p->c_fds / n;
	r->server_fds_per_conn = (double)(s1.fds - p->s0.fds) / n;
	r->client_threads = c1->threads;
	r->server_threads = s1.threads;
}

/* @p's two records (NULL, READ 64K) at @n connections. */
static void scale_records(struct spt *p, enum tp tp, unsigned n, const struct pstat *c1)
{
	struct rec *r[2];

	r[0] = rec_new("scale", tp, "null", 0, 1, n);
	if (p->why[0] && !p->m[0].ops) {
		na(r[0], p->why);
		return;
	}
	r[1] = rec_new("scale", tp, "read64k", CONN_SIZE, 1, n);
	r[0] = r[1] - 1;   /* (rec_new may move the records) */
	for (int op = 0; op < 2; op++) {
		struct sop *m = &p->m[op];

		scale_idle(r[op], p, n, c1);
		r[op]->connect_p50_us = p50_of(p->ct, p->nct);
		r[op]->connect_rounds = p->connect_rounds;
		memcpy(r[op]->round_connect_us, p->round_connect, sizeof(p->round_connect));
		if (op && p->m[0].rc) {
			na(r[op], "not run (NULL failed)");
		} else if (op && n > 1000) {
			na(r[op], "not run beyond 1000 connections (a 64 KiB sink each)");
		} else {
			lat_finish(&m->l, r[op], m->ops, m->bytes, m->secs);
			if (m->ops && m->cc >= 0)
				r[op]->cpu_c = (double)m->cc / 1e3 / (double)m->ops;
			if (m->ops && m->sc >= 0)
				r[op]->cpu_s = (double)m->sc / 1e3 / (double)m->ops;
			r[op]->rounds = m->rounds;
			memcpy(r[op]->round_ops_s, m->round_ops_s, sizeof(m->round_ops_s));
			record_err(r[op], m->rc);
		}
	}
}

/* The client holds every transport's connections of a point at once (the
 * rounds alternate them): about one descriptor per connection each (an
 * rdma:// connection's socket, its shared ones aside: 1.2 per connection
 * measured), plus the process's own. A transport whose connections would
 * not fit under RLIMIT_NOFILE beside those of the transports before it is
 * reported not available with the reason, instead of failing part-way
 * with EMFILE (at 10,000 connections with a hard limit of 20,000 and no
 * right to raise it, two transports do not fit: run them one per run). */
static void fit_nofile(struct spt *pt, unsigned n)
{
	struct rlimit rl;
	unsigned long long used = 512, have;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY)
		return;
	have = (unsigned long long)rl.rlim_cur;
	for (int tp = 0; tp < TP_N; tp++) {
		struct spt *p = &pt[tp];
		unsigned long long need = (unsigned long long)n * 5 / 4;

		if (!p->on)
			continue;
		if (used + need > have) {
			p->on = false;
			snprintf(p->why, sizeof(p->why),
				 "needs ~%llu file descriptors beside %llu in use, RLIMIT_NOFILE is %llu: "
				 "fewer --transports per run",
				 need, used, have);
			continue;
		}
		used += need;
	}
}

/* Every wanted transport at @n connections, in rounds: the connects in
 * @rounds rounds, then, after the idle costs, @rounds rounds of slices of
 * dur / @rounds seconds, NULL on every transport then READ 64K on every
 * transport, the order of the transports rotated each round. */
static void scale_n(unsigned n)
{
	struct spt *pt = calloc(TP_N, sizeof(*pt));
	struct timespec settle = {0, 300000000}, reround = {0, 100000000};
	double slice = dur / bench_rounds;
	struct pstat c1;

	if (!pt) {
		for (int tp = 0; tp < TP_N; tp++)
			if (tp_want[tp])
				na(rec_new("scale", (enum tp)tp, "null", 0, 1, n), "out of memory");
		return;
	}
	for (int tp = 0; tp < TP_N; tp++) {
		struct spt *p = &pt[tp];

		if (!tp_want[tp])
			continue;
		p->on = tp_ok[tp];   /* (not available: tp_why, below) */
		if (!p->on)
			continue;
		progress("scale: %u connections over %s, %u rounds", n, tp_name[tp], bench_rounds);
		p->cs = calloc(n, sizeof(*p->cs));
		p->ct = malloc(sizeof(*p->ct) * n * (n < bench_rounds ? bench_rounds : 1));
		for (int op = 0; op < 2; op++) {
			lat_init(&p->m[op].l);
			p->m[op].cc = p->m[op].sc = 0;
		}
		if (!p->cs || !p->ct) {
			p->on = false;
			snprintf(p->why, sizeof(p->why), "out of memory");
		}
	}
	fit_nofile(pt, n);
	conn_sink = 0;   /* the sinks come after the idle measurement */
	for (unsigned r = 0; r < bench_rounds; r++) {
		if (r && n < bench_rounds) {
			/* fresh servers again: every transport's previous
			 * round closed first, and a pause for the closes to
			 * finish (no round's connects overlap another
			 * connection's teardown, as no point's did) */
			for (int tp = 0; tp < TP_N; tp++)
				spt_drop(&pt[tp]);
			nanosleep(&reround, NULL);
		}
		for (unsigned i = 0; i < TP_N; i++)
			connect_round(&pt[round_tp(r, i)], round_tp(r, i), n, r, bench_rounds);
	}
	conn_sink = MAXIO + 64;
	/* the counts settle (the servers free half-open state, the first
	 * calls' buffers are back) */
	nanosleep(&settle, NULL);
	pstat_read(0, &c1);
	for (int tp = 0; tp < TP_N; tp++)
		if (pt[tp].on)
			pstat_read(pt[tp].spid, &pt[tp].s1);
	for (int tp = 0; tp < TP_N; tp++)
		if (pt[tp].on && n <= 1000)
			pt[tp].m[1].rc = scale_sinks(&pt[tp]);
	for (unsigned r = 0; r < bench_rounds; r++)
		for (int op = 0; op < 2; op++)
			for (unsigned i = 0; i < TP_N; i++) {
				enum tp tp = round_tp(r, i);
				struct spt *p = &pt[tp];

				if (!p->on || p->m[op].rc || (op && (p->m[0].rc || n > 1000)))
					continue;
				p->m[op].rc = scale_slice(p, tp, op, slice);
			}
	for (int tp = 0; tp < TP_N; tp++) {
		struct spt *p = &pt[tp];

		if (!tp_want[tp])
			continue;
		if (tp_ok[tp])
			scale_records(p, (enum tp)tp, n, &c1);
		else
			na(rec_new("scale", (enum tp)tp, "null", 0, 1, n), tp_why[tp]);
		for (int op = 0; op < 2; op++)
			lat_free(&p->m[op].l);
		spt_drop(p);
		free(p->cs);
		free(p->ct);
	}
	free(pt);
}

/* As many descriptors as the hard limit allows (root: raised). */
static void raise_nofile(unsigned conns)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)conns * 8 + 1024;   /* every transport's at once */

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

int scale_conns_parse(const char *list)
{
	unsigned mask = 0;
	const char *p = list;

	for (;;) {
		char *end;
		unsigned long v;
		unsigned i;

		errno = 0;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = strtoul(p, &end, 10);
		for (i = 0; i < N(scale_ns) && scale_ns[i] != v; i++)
			;
		if (errno || i == N(scale_ns) || (mask & (1u << i)))
			return -EINVAL;
		mask |= 1u << i;
		if (!*end)
			break;
		if (*end != ',')
			return -EINVAL;
		p = end + 1;
	}
	scale_only = mask;
	return 0;
}

/* scale_ns[i] is measured */
static bool scale_on(unsigned i)
{
	if (scale_only)
		return (scale_only >> i) & 1u;
	return big || i < N(scale_ns) - 1;
}

void scale_setup(void)
{
	raise_nofile(scale_on(N(scale_ns) - 1) ? 10000 : 1000);
	factory_start();
}

unsigned scale_points(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < N(scale_ns); i++)
		n += scale_on(i);
	return n;
}

void run_scale(void)
{
	for (unsigned i = 0; i < N(scale_ns); i++)
		if (scale_on(i))
			scale_n(scale_ns[i]);
}
