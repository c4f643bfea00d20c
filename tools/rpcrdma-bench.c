/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench: one run, the same workloads over (a) librpcrdma rdma://
 * (RPC-over-RDMA v1, RFC 8166, on the software iWARP provider) when built,
 * (b) librpcrdma tcp:// (RFC 5531 record marking), (c) libtirpc over TCP
 * (clnttcp_create / svc_vc_create) when available, and (d) raw TCP with the
 * same message sizes as a ping-pong and as a one-way stream: the floor.
 *
 * Workloads: NULL latency; READ and WRITE of 1 KiB..8 MiB (bulk data
 * DDP-eligible: Write / Read chunks on RDMA); 1..64 outstanding READs on one
 * connection; 1..8 connections; pull-mode WRITE versus push-mode
 * Write+Commit of 4 KiB, durable on disk and on tmpfs (--workloads picks a
 * subset). Every server runs in a forked child on loopback (forked
 * before this process starts any thread), so client and server are separate
 * processes for every transport alike.
 *
 * The benchmark service (program BENCH_PROG = 0x2f5a0002, version 1) is
 * memory-only so that transports are compared, not file systems:
 *   1 READ(uint32 count) -> opaque data<> (DDP-eligible)
 *   2 WRITE(opaque data<> (DDP-eligible)) -> uint32 count
 * Raw TCP messages: [uint32 request length][uint32 response length] + pad;
 * the response is that many bytes; a stream is [0xffffffff][uint64 total]
 * [uint32 message size] + total bytes, acknowledged with 4 bytes. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <dirent.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "fileservice.h"
#include "rpcrdma/push.h"
#include "rpcrdma/stats.h"

#if defined(__has_include)
#if __has_include(<rpc/rpc.h>)
#include <rpc/rpc.h>
#define BENCH_HAVE_TIRPC 1
#endif
#endif
#ifndef BENCH_HAVE_TIRPC
#define BENCH_HAVE_TIRPC 0
#endif

#define BENCH_PROG 0x2f5a0002u
#define BENCH_VERS 1u
#define BENCH_READ 1u
#define BENCH_WRITE 2u
#define BENCH_PUSH_OPEN 3u   /* -> i32 rc; region (rpcrdma/push.h) */
#define BENCH_WRITE_SYNC 4u  /* data (DDP-eligible) -> count; written to a file and
                                fdatasync'd before the reply (durable, like Commit) */
#define BENCH_PUSH_OPEN_MEM 5u   /* BENCH_PUSH_OPEN, region file on tmpfs */
#define BENCH_WRITE_SYNC_MEM 6u  /* BENCH_WRITE_SYNC, file on tmpfs */
#define MAXIO (8u * 1024 * 1024)
#define MAX_SAMPLES (1u << 20)

enum tp { TP_RDMA, TP_TCP, TP_TIRPC, TP_RAW, TP_N };
static const char *const tp_name[TP_N] = {"rdma", "tcp", "tirpc", "raw"};

static bool tp_want[TP_N];
enum wl { WL_NULL, WL_READ, WL_WRITE, WL_OUTST, WL_CONNS, WL_PUSH, WL_SCALE, WL_N };
static const char *const wl_name[WL_N] = {"null", "read", "write", "outstanding", "conns", "push",
					  "scale"};
static bool wl_want[WL_N];
static bool tp_ok[TP_N];
static char tp_why[TP_N][160];
static int tp_port[TP_N];
static pid_t tp_pid[TP_N];
static double dur = 1.0;
static bool quick;
/* Spin-then-sleep budget in microseconds (--spin-us, else
 * RPCRDMA_SOFT_SPIN_US, else 20): exported as RPCRDMA_SOFT_SPIN_US to the
 * library in both processes and used by the raw "pingspin" floor. */
#ifdef RPCRDMA_SPIN_US_MAX
#define BENCH_SPIN_MAX RPCRDMA_SPIN_US_MAX
#else
#define BENCH_SPIN_MAX 1000u
#endif
#define BENCH_SPIN_DEFAULT 20u
static unsigned spin_us = BENCH_SPIN_DEFAULT;
static const char *spin_from = "default";
static uint8_t *srcbuf;  /* MAXIO bytes of pattern (client WRITE data, server READ data) */

/* ======================================================================
 * results
 * ====================================================================== */

struct rec {
	char workload[24];   /* null, read, write, read_outstanding, read_conns, write_4k_pull, ... */
	enum tp tp;
	char variant[12];    /* raw: "pingpong" or "stream"; "" otherwise */
	uint32_t size;
	unsigned outstanding, conns;
	uint64_t ops;
	double secs, p50_us, p99_us, mbps, ops_s;
	double ratio_raw, ratio_tirpc;  /* NaN-free: < 0 when not applicable */
	double rtrips;       /* rdma: network round trips per operation, from the
				client's counters; < 0 when not counted */
	double ratio_spin;   /* latency records: p50 / raw "pingspin" p50; < 0: n/a */
	double cpu_c, cpu_s; /* CPU us per operation of the client (this process)
				and of the server child; < 0 when not measured */
	int64_t cpu_c0, cpu_s0;  /* CPU ns at the start of the measured interval */
	/* scale: idle cost of each connection (client: this process; server:
	 * its process), the threads of each process with the connections
	 * open, and the p50 of connect + first NULL call; < 0: n/a */
	double client_rss_per_conn, server_rss_per_conn, fds_per_conn, server_fds_per_conn;
	double connect_p50_us;
	long client_threads, server_threads;
	char na[160];        /* non-empty: not available, why */
};

static struct rec *recs;
static unsigned nrecs, caprecs;

static struct rec *rec_new(const char *wl, enum tp tp, const char *variant, uint32_t size,
			   unsigned outst, unsigned conns)
{
	struct rec *r;

	if (nrecs == caprecs) {
		unsigned ncap = caprecs ? caprecs * 2 : 64;
		struct rec *n = realloc(recs, ncap * sizeof(*n));

		if (!n) {
			fprintf(stderr, "rpcrdma-bench: out of memory\n");
			exit(1);
		}
		recs = n;
		caprecs = ncap;
	}
	r = &recs[nrecs++];
	memset(r, 0, sizeof(*r));
	snprintf(r->workload, sizeof(r->workload), "%s", wl);
	snprintf(r->variant, sizeof(r->variant), "%s", variant ? variant : "");
	r->tp = tp;
	r->size = size;
	r->outstanding = outst;
	r->conns = conns;
	r->ratio_raw = r->ratio_tirpc = r->rtrips = r->ratio_spin = -1;
	r->cpu_c = r->cpu_s = -1;
	r->cpu_c0 = r->cpu_s0 = -1;
	r->client_rss_per_conn = r->server_rss_per_conn = r->fds_per_conn = -1;
	r->server_fds_per_conn = r->connect_p50_us = -1;
	r->client_threads = r->server_threads = -1;
	return r;
}

struct lat {
	uint64_t *v;
	size_t n, cap;
	pthread_mutex_t lock;
};

static void lat_init(struct lat *l)
{
	l->cap = MAX_SAMPLES;
	l->v = malloc(l->cap * sizeof(*l->v));
	l->n = 0;
	pthread_mutex_init(&l->lock, NULL);
}

static void lat_add(struct lat *l, uint64_t ns)
{
	pthread_mutex_lock(&l->lock);
	if (l->v && l->n < l->cap)
		l->v[l->n++] = ns;
	pthread_mutex_unlock(&l->lock);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Fills the record's statistics from the latencies and the totals. */
static void lat_finish(struct lat *l, struct rec *r, uint64_t ops, uint64_t bytes, double secs)
{
	if (l->n) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
		r->p50_us = (double)l->v[(l->n - 1) / 2] / 1e3;
		r->p99_us = (double)l->v[(l->n * 99 + 99) / 100 - 1] / 1e3;
	}
	r->ops = ops;
	r->secs = secs;
	r->ops_s = secs > 0 ? (double)ops / secs : 0;
	r->mbps = secs > 0 ? (double)bytes / secs / 1e6 : 0;
	free(l->v);
	l->v = NULL;
	pthread_mutex_destroy(&l->lock);
}

/* ======================================================================
 * CPU time per operation
 *
 * Nanoseconds on CPU of a whole process, every thread, including threads
 * that exited during the interval (run_conns' client threads start and end
 * inside it): the kernel's process CPU clock, which is the sum of the
 * threads' sum_exec_runtime, the first field of /proc/PID/task/TID/schedstat.
 * When that clock cannot be read, the schedstat sum over the live threads.
 * Both fail (-1) without /proc and without the clock, or when the process
 * is gone.
 * ====================================================================== */

static int64_t schedstat_sum(const char *taskdir)
{
	DIR *d = opendir(taskdir);
	struct dirent *e;
	int64_t sum = 0;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];
		unsigned long long v;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/schedstat", taskdir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;   /* the thread just exited */
		if (fscanf(f, "%llu", &v) == 1) {
			sum += (int64_t)v;
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n ? sum : -1;
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000ll + t->tv_nsec;
}

/* CPU ns of this process (@pid 0) or of the child @pid; -1: unknown. */
static int64_t cpu_ns(pid_t pid)
{
	struct timespec t;
	clockid_t cid = CLOCK_PROCESS_CPUTIME_ID;
	char dir[48];

	if (pid < 0)
		return -1;
	if ((pid == 0 || clock_getcpuclockid(pid, &cid) == 0) && clock_gettime(cid, &t) == 0)
		return ts_ns(&t);
	if (pid == 0)
		return schedstat_sum("/proc/self/task");
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	return schedstat_sum(dir);
}

/* The server process of @tp's records: the forked child; -1 when there is
 * none (every server here is a child of its own, one per transport, so no
 * server's CPU is shared with another transport's records). */
static pid_t server_pid(enum tp tp)
{
	return tp_pid[tp] > 0 ? tp_pid[tp] : -1;
}

/* Right before the measured interval of @r. */
static void cpu_begin(struct rec *r)
{
	r->cpu_s0 = cpu_ns(server_pid(r->tp));
	r->cpu_c0 = cpu_ns(0);
}

/* Right after it, over @ops operations. */
static void cpu_end(struct rec *r, uint64_t ops)
{
	int64_t c = cpu_ns(0), s = cpu_ns(server_pid(r->tp));

	if (!ops)
		return;
	if (c >= 0 && r->cpu_c0 >= 0 && c >= r->cpu_c0)
		r->cpu_c = (double)(c - r->cpu_c0) / 1e3 / (double)ops;
	if (s >= 0 && r->cpu_s0 >= 0 && s >= r->cpu_s0)
		r->cpu_s = (double)(s - r->cpu_s0) / 1e3 / (double)ops;
}

static unsigned progress_i, progress_n;

static void progress(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%3u/%3u] ", ++progress_i, progress_n);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

/* ======================================================================
 * servers (forked children)
 * ====================================================================== */

static int listen_loopback(int *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	*port = ntohs(sin.sin_port);
	return fd;
}

static int connect_loopback(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -errno;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One end of a "pingspin" connection waits the way the soft provider's
 * lone waiter does (src/rdma/soft: spin, then sleep): for each receive it
 * polls the socket with recv(MSG_DONTWAIT) for up to @us microseconds, then
 * blocks in recv. The same adaptation: after SPIN_MISSES budgets in a row
 * that ran out with nothing read, the next SPIN_SKIP receives block at once
 * (so two spinners sharing one CPU do not starve each other for the whole
 * budget on every message). */
#define SPIN_MISSES 4u
#define SPIN_SKIP 64u

struct spinner {
	unsigned us;      /* 0: never spin */
	unsigned miss, skip;
};

static ssize_t spin_recv(int fd, void *buf, size_t n, struct spinner *sp)
{
	if (sp->us && sp->skip) {
		sp->skip--;
	} else if (sp->us) {
		uint64_t t0 = fs_now_ns();

		for (;;) {
			ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);

			if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
				sp->miss = 0;
				return r;
			}
			if (fs_now_ns() - t0 >= (uint64_t)sp->us * 1000u)
				break;
		}
		if (++sp->miss >= SPIN_MISSES) {
			sp->miss = 0;
			sp->skip = SPIN_SKIP;
		}
	}
	return recv(fd, buf, n, 0);
}

/* Reads exactly @n bytes: 0, or -1 on EOF or error. Each receive goes
 * through spin_recv (@sp NULL or budget 0: a plain blocking read). */
static int spin_read_full(int fd, void *buf, size_t n, struct spinner *sp)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = sp && sp->us ? spin_recv(fd, (uint8_t *)buf + done, n - done, sp)
					 : read(fd, (uint8_t *)buf + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int read_full(int fd, void *buf, size_t n)
{
	return spin_read_full(fd, buf, n, NULL);
}

static int write_full(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = write(fd, (const uint8_t *)buf + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* -- raw TCP server: a thread per connection --
 * [0xfffffffe][spin us] (answered with 4 bytes) makes the connection's
 * thread wait for the requests that follow as the client waits for the
 * responses: spin_read_full with that budget (the "pingspin" floor). */
static void *raw_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint8_t *buf = malloc(MAXIO + 64);
	uint32_t h[2];
	struct spinner spin = {0, 0, 0};

	while (buf && spin_read_full(fd, h, 8, &spin) == 0) {
		uint32_t req = ntohl(h[0]), rsp = ntohl(h[1]);

		if (req == 0xfffffffeu) {
			uint32_t ack = 0;

			spin.us = rsp > BENCH_SPIN_MAX ? BENCH_SPIN_MAX : rsp;
			if (write_full(fd, &ack, 4))
				break;
			continue;
		}

		if (req == 0xffffffffu) {
			uint64_t total, got = 0;
			uint32_t ack = 0;

			if (read_full(fd, &total, 8))
				break;
			/* message-sized reads into a cache-warm buffer, like a
			 * receiver that consumes each message */
			uint32_t chunk;

			if (read_full(fd, &chunk, 4))
				break;
			chunk = ntohl(chunk);
			if (chunk == 0 || chunk > MAXIO)
				break;
			while (got < total) {
				size_t want = total - got < chunk ? (size_t)(total - got) : chunk;
				ssize_t r = read(fd, buf, want);

				if (r <= 0)
					goto out;
				got += (uint64_t)r;
			}
			if (write_full(fd, &ack, 4))
				break;
			continue;
		}
		if (req < 8 || req > MAXIO + 64 || rsp > MAXIO + 64)
			break;
		if (spin_read_full(fd, buf, req - 8, &spin) || write_full(fd, srcbuf, rsp))
			break;
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

static void raw_server(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (pthread_create(&t, NULL, raw_conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

/* -- librpcrdma bench service -- */
static int h_read(struct rpcrdma_req *req, void *ctx)
{
	uint32_t count;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(req), &count) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (count > MAXIO)
		count = MAXIO;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(req), srcbuf, count) ? RPCRDMA_SVC_SYSTEM_ERR
									    : RPCRDMA_SVC_OK;
}

static int h_write(struct rpcrdma_req *req, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(req), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(req), len) ? RPCRDMA_SVC_SYSTEM_ERR
								  : RPCRDMA_SVC_OK;
}

/* Durable pull-mode WRITE: the data is written at offset 0 of a file in the
 * directory of the push-mode region (@ctx: a struct sync_file) and
 * fdatasync'd before the Reply, so it compares like with like with Write +
 * Commit (msync). Two backings: the disk (/tmp on the machine's file system:
 * a synchronous write-back) and tmpfs (/dev/shm: fdatasync and msync return
 * at once; the stand-in for a persistent-memory mapping, where making bytes
 * durable is a CPU cache flush and the network round trips dominate). */
struct sync_file {
	const char *dir;
	pthread_mutex_t lock;
	int fd;
};

static struct sync_file sync_disk = {"/tmp", PTHREAD_MUTEX_INITIALIZER, -1};
static struct sync_file sync_mem = {"/dev/shm", PTHREAD_MUTEX_INITIALIZER, -1};

static int h_write_sync(struct rpcrdma_req *req, void *ctx)
{
	struct sync_file *sf = ctx;
	const void *p;
	uint32_t len;
	int rc = 0;

	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(req), &p, &len) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(req)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	pthread_mutex_lock(&sf->lock);
	if (sf->fd < 0) {
		char path[96];

		snprintf(path, sizeof(path), "%s/rpcrdma-bench-sync-%d", sf->dir, (int)getpid());
		sf->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (sf->fd >= 0)
			unlink(path);
	}
	if (sf->fd < 0 || pwrite(sf->fd, p, len, 0) != (ssize_t)len || fdatasync(sf->fd))
		rc = -1;
	pthread_mutex_unlock(&sf->lock);
	if (rc)
		return RPCRDMA_SVC_SYSTEM_ERR;
	return rpcrdma_xdr_put_u32(rpcrdma_req_results(req), len) ? RPCRDMA_SVC_SYSTEM_ERR
								  : RPCRDMA_SVC_OK;
}

/* Push mode: a 64 KiB durable region (a file under @ctx's directory,
 * unlinked at once) exposed to the calling connection; unmapped when the
 * transport releases it. */
struct bench_region {
	struct rpcrdma_durable_map map;
};

static void bench_region_released(void *arg)
{
	struct bench_region *g = arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
}

static int h_push_open(struct rpcrdma_req *req, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	struct bench_region *g = calloc(1, sizeof(*g));
	struct rpcrdma_push_region reg;
	struct rpcrdma_mr_attr a;
	const struct sync_file *sf = ctx;
	char path[96];
	uint64_t id;
	int rc;

	if (!g)
		return RPCRDMA_SVC_SYSTEM_ERR;
	g->map.fd = -1;
	snprintf(path, sizeof(path), "%s/rpcrdma-bench-push-%d-%p", sf->dir, (int)getpid(),
		 (void *)g);
	rc = rpcrdma_req_push_capable(req);
	if (!rc)
		rc = rpcrdma_durable_map(path, 65536, &g->map);
	unlink(path);
	if (!rc)
		rc = rpcrdma_durable_mr_attr(&g->map, g->map.addr, 65536, 0, &a);
	if (!rc)
		rc = rpcrdma_req_push_expose(req, &a, bench_region_released, g, &reg, &id);
	if (rc) {
		(void)rpcrdma_durable_unmap(&g->map);
		free(g);
		return rpcrdma_xdr_put_i32(e, rc) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
	}
	rpcrdma_xdr_put_i32(e, 0);
	rpcrdma_xdr_put_push_region(e, &reg);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

/* @scale: limits out of the way (every client comes from 127.0.0.1). */
static int rr_server(const char *scheme, int *port, bool scale)
{
	struct rpcrdma_server *srv;
	/* Memory-only handlers (the durable WRITE's fdatasync aside): run on
	 * the receiving thread, as libtirpc's svc_run and tcp:// do. */
	struct rpcrdma_server_opts so = {.threads = 4, .flags = getenv("BENCH_NOINLINE") ? 0 : RPCRDMA_SERVER_INLINE};

	if (scale) {
		so.max_conns = 1000000;
		so.max_conns_per_host = UINT_MAX;
		so.max_handshakes = 100000;
	}
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, &srv);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_READ, h_read, NULL);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE, h_write, NULL);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE_SYNC,
					     h_write_sync, &sync_disk);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_WRITE_SYNC_MEM,
					     h_write_sync, &sync_mem);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_PUSH_OPEN,
					     h_push_open, &sync_disk);
	if (!rc)
		rc = rpcrdma_server_register(srv, BENCH_PROG, BENCH_VERS, BENCH_PUSH_OPEN_MEM,
					     h_push_open, &sync_mem);
	if (!rc)
		rc = rpcrdma_server_start(srv);
	if (!rc)
		*port = rpcrdma_server_port(srv);
	return rc;
}

#if BENCH_HAVE_TIRPC
/* -- libtirpc -- */
struct tdata {
	char *buf;
	u_int len;
};

static bool_t xdr_tdata(XDR *x, struct tdata *d)
{
	return xdr_bytes(x, &d->buf, &d->len, MAXIO);
}

/* xdr_void is declared without parameters; this one has the xdrproc_t shape */
static bool_t xdr_nothing(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

static uint8_t *tirpc_wbuf;

static void tirpc_dispatch(struct svc_req *rq, SVCXPRT *xp)
{
	switch (rq->rq_proc) {
	case 0:
		svc_sendreply(xp, (xdrproc_t)xdr_nothing, NULL);
		break;
	case BENCH_READ: {
		u_int count = 0;
		struct tdata d;

		if (!svc_getargs(xp, (xdrproc_t)xdr_u_int, (char *)&count)) {
			svcerr_decode(xp);
			break;
		}
		d.buf = (char *)srcbuf;
		d.len = count > MAXIO ? MAXIO : count;
		svc_sendreply(xp, (xdrproc_t)xdr_tdata, (char *)&d);
		break;
	}
	case BENCH_WRITE: {
		struct tdata d = {(char *)tirpc_wbuf, 0};

		if (!svc_getargs(xp, (xdrproc_t)xdr_tdata, (char *)&d)) {
			svcerr_decode(xp);
			break;
		}
		svc_sendreply(xp, (xdrproc_t)xdr_u_int, (char *)&d.len);
		break;
	}
	default:
		svcerr_noproc(xp);
	}
}

static int tirpc_server(int lfd)
{
	SVCXPRT *xp;

	tirpc_wbuf = malloc(MAXIO);
	xp = svc_vc_create(lfd, 0, 0);
	if (!tirpc_wbuf || !xp || !svc_register(xp, BENCH_PROG, BENCH_VERS, tirpc_dispatch, 0))
		return -EIO;
	return 0;
}
#endif

/* A server child dies with the benchmark. */
static void prctl_parent_death(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* Forks the server of @tp; the child reports "port" or "error errno". */
static void start_server(enum tp tp)
{
	int p[2], port = 0, rc = 0;
	char line[64] = "";
	ssize_t n;

	if (pipe(p) < 0) {
		snprintf(tp_why[tp], sizeof(tp_why[tp]), "pipe: %s", strerror(errno));
		return;
	}
	fflush(NULL);
	tp_pid[tp] = fork();
	if (tp_pid[tp] < 0) {
		snprintf(tp_why[tp], sizeof(tp_why[tp]), "fork: %s", strerror(errno));
		return;
	}
	if (tp_pid[tp] == 0) {
		int lfd = -1;

		close(p[0]);
		signal(SIGPIPE, SIG_IGN);
		prctl_parent_death();
		switch (tp) {
		case TP_RDMA: rc = rr_server("rdma", &port, false); break;
		case TP_TCP: rc = rr_server("tcp", &port, false); break;
		case TP_RAW:
		case TP_TIRPC:
			lfd = listen_loopback(&port);
			rc = lfd < 0 ? lfd : 0;
#if BENCH_HAVE_TIRPC
			if (!rc && tp == TP_TIRPC)
				rc = tirpc_server(lfd);
#endif
			break;
		default: rc = -EINVAL;
		}
		if (rc) {
			dprintf(p[1], "error %d\n", -rc);
			_exit(1);
		}
		dprintf(p[1], "%d\n", port);
		close(p[1]);
		if (tp == TP_RAW)
			raw_server(lfd);
#if BENCH_HAVE_TIRPC
		if (tp == TP_TIRPC)
			svc_run();
#endif
		for (;;)
			pause();
	}
	close(p[1]);
	n = read(p[0], line, sizeof(line) - 1);
	close(p[0]);
	line[n > 0 ? n : 0] = 0;
	if (sscanf(line, "error %d", &rc) == 1 || sscanf(line, "%d", &port) != 1 || port <= 0) {
		waitpid(tp_pid[tp], NULL, 0);
		tp_pid[tp] = 0;
		if (rc == EPROTONOSUPPORT)
			snprintf(tp_why[tp], sizeof(tp_why[tp]),
				 "%s:// transport not available in this build (-EPROTONOSUPPORT)",
				 tp_name[tp]);
		else
			snprintf(tp_why[tp], sizeof(tp_why[tp]), "server failed: %s",
				 rc ? strerror(rc) : "no answer");
		return;
	}
	tp_port[tp] = port;
	tp_ok[tp] = true;
}

/* ======================================================================
 * clients
 * ====================================================================== */

/* One synchronous operation on a connection of any transport. */
struct conn {
	enum tp tp;
	struct rpcrdma_client *rc;
	int fd;                 /* raw */
	struct spinner spin;    /* raw: how it waits ("pingspin": both ends spin) */
#if BENCH_HAVE_TIRPC
	CLIENT *tc;
#endif
	uint8_t *sink;          /* MAXIO */
};

/* RDMA inline size the next connections advertise (rpcrdma_client_opts
 * inline_size); 0: the transport's choice. The pull-mode 4K records use 4096
 * (RFC 8797 sizes as Linux advertises them), so their 4 KiB argument travels
 * as a Read chunk the server pulls, as "pull mode" means, rather than inline
 * in the Call under the soft provider's 132 KiB default. */
static uint32_t conn_inline;
/* Bytes of each connection's result sink; 0: none (scale: allocated later,
 * so that the idle cost measured is the library's). */
static size_t conn_sink = MAXIO + 64;

static int conn_open(struct conn *c, enum tp tp)
{
	memset(c, 0, sizeof(*c));
	c->tp = tp;
	c->fd = -1;
	/* raw reads its responses there: a NULL's at least */
	c->sink = conn_sink || tp == TP_RAW ? malloc(conn_sink ? conn_sink : 256) : NULL;
	if ((conn_sink || tp == TP_RAW) && !c->sink)
		return -ENOMEM;
	if (tp == TP_RDMA || tp == TP_TCP) {
		struct rpcrdma_client_opts o = {.inline_size = conn_inline};
		char url[64];

		snprintf(url, sizeof(url), "%s://127.0.0.1:%d", tp_name[tp], tp_port[tp]);
		return rpcrdma_client_create(url, BENCH_PROG, BENCH_VERS, &o, &c->rc);
	}
	if (tp == TP_RAW) {
		c->fd = connect_loopback(tp_port[tp]);
		return c->fd < 0 ? c->fd : 0;
	}
#if BENCH_HAVE_TIRPC
	{
		struct sockaddr_in sin = {.sin_family = AF_INET};
		int fd = connect_loopback(tp_port[tp]);

		if (fd < 0)
			return fd;
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sin.sin_port = htons((uint16_t)tp_port[tp]);
		c->tc = clnttcp_create(&sin, BENCH_PROG, BENCH_VERS, &fd, 0, 0);
		if (!c->tc) {
			close(fd);
			return -ECONNREFUSED;
		}
		clnt_control(c->tc, CLSET_FD_CLOSE, NULL);
		return 0;
	}
#else
	return -EPROTONOSUPPORT;
#endif
}

static void conn_close(struct conn *c)
{
	if (c->rc)
		rpcrdma_client_destroy(c->rc);
	if (c->fd >= 0)
		close(c->fd);
#if BENCH_HAVE_TIRPC
	if (c->tc)
		clnt_destroy(c->tc);
#endif
	free(c->sink);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* RPC message sizes on TCP (record mark + RFC 5531 headers, AUTH_NONE) */
#define CALL_HDR (4u + 40u)
#define REPLY_HDR (4u + 24u)
#define XDR_ALIGN(n) (((n) + 3u) & ~3u)

/* A raw connection becomes a "pingspin" one: both ends wait for each
 * message by spinning up to @us microseconds, then sleeping. */
static int conn_set_spin(struct conn *c, unsigned us)
{
	uint32_t h[2] = {htonl(0xfffffffeu), htonl(us)}, ack;

	if (c->tp != TP_RAW)
		return -EINVAL;
	if (write_full(c->fd, h, 8) || read_full(c->fd, &ack, 4))
		return -EIO;
	c->spin.us = us;
	return 0;
}

static int raw_pingpong(int fd, uint32_t req, uint32_t rsp, uint8_t *buf, struct spinner *spin)
{
	uint32_t h[2] = {htonl(req), htonl(rsp)};
	struct iovec iov[2] = {{h, 8}, {srcbuf, req - 8}};
	ssize_t n = writev(fd, iov, 2);

	if (n < 0)
		return -errno;
	if ((size_t)n < req) {
		size_t done = (size_t)n;

		if (done < 8) {
			if (write_full(fd, (uint8_t *)h + done, 8 - done))
				return -EIO;
			done = 8;
		}
		if (write_full(fd, srcbuf + (done - 8), req - done))
			return -EIO;
	}
	return spin_read_full(fd, buf, rsp, spin) ? -EIO : 0;
}

/* op: 0 NULL, 1 READ, 2 WRITE of @size, 3 durable WRITE to disk, 4 durable
 * WRITE to tmpfs (3 and 4: librpcrdma only).
 * 0 or a negative errno. */
static int conn_op(struct conn *c, int op, uint32_t size)
{
	if (c->tp == TP_RAW) {
		uint32_t req = CALL_HDR, rsp = REPLY_HDR;

		if (op == 1)
			req += 4, rsp += 4 + XDR_ALIGN(size);
		else if (op == 2)
			req += 4 + XDR_ALIGN(size), rsp += 4;
		return raw_pingpong(c->fd, req, rsp, c->sink, &c->spin);
	}
#if BENCH_HAVE_TIRPC
	if (c->tp == TP_TIRPC) {
		struct timeval tv = {30, 0};
		enum clnt_stat st;

		if (op == 0) {
			st = clnt_call(c->tc, 0, (xdrproc_t)xdr_nothing, NULL, (xdrproc_t)xdr_nothing, NULL,
				       tv);
		} else if (op == 1) {
			u_int count = size;
			struct tdata d = {(char *)c->sink, 0};

			st = clnt_call(c->tc, BENCH_READ, (xdrproc_t)xdr_u_int, (char *)&count,
				       (xdrproc_t)xdr_tdata, (char *)&d, tv);
			if (st == RPC_SUCCESS && d.len != size)
				return -EBADMSG;
		} else {
			struct tdata d = {(char *)srcbuf, size};
			u_int n = 0;

			st = clnt_call(c->tc, BENCH_WRITE, (xdrproc_t)xdr_tdata, (char *)&d,
				       (xdrproc_t)xdr_u_int, (char *)&n, tv);
			if (st == RPC_SUCCESS && n != size)
				return -EBADMSG;
		}
		return st == RPC_SUCCESS ? 0 : -EIO;
	}
#endif
	{
		struct rpcrdma_call *call;
		int rc = rpcrdma_call_create(c->rc, op == 0 ? 0 : op == 1 ? BENCH_READ :
						     op == 2 ? BENCH_WRITE : op == 3 ? BENCH_WRITE_SYNC
							   : BENCH_WRITE_SYNC_MEM, &call);

		if (rc)
			return rc;
		if (op == 1) {
			struct rpcrdma_ddp_sink sk = {c->sink, size};

			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), size);
			rc = rpcrdma_call_set_sinks(call, &sk, 1);
			/* the reduced Reply is 28 bytes (header, length word):
			 * a known bound lets small results come inline */
			rpcrdma_call_set_reply_hint(call, 64);
		} else if (op >= 2) {
			rc = rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), srcbuf, size);
		}
		if (!rc)
			rc = rpcrdma_call_run(call);
		if (!rc) {
			struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
			const void *p;
			uint32_t len = 0;

			if (op == 1)
				rc = rpcrdma_xdr_get_ddp(d, &p, &len);
			else if (op >= 2)
				rc = rpcrdma_xdr_get_u32(d, &len);
			if (!rc && op && len != size)
				rc = -EBADMSG;
		}
		rpcrdma_call_destroy(call);
		return rc;
	}
}

/* Raw one-way stream of @size-byte messages for the duration: MB/s. */
static int raw_stream(int port, uint32_t size, struct rec *r)
{
	int fd = connect_loopback(port);
	uint64_t t0, now, total = 0, sent = 0;
	uint32_t h[2] = {htonl(0xffffffffu), 0}, ack;
	uint64_t msgs;

	if (fd < 0)
		return fd;
	/* calibrate: send in chunks of @size until the duration is over; the
	 * total is declared up front, so measure a short probe first */
	msgs = 4;
	for (int round = 0; round < 2; round++) {
		uint64_t tot = msgs * size;

		if (round == 1)
			cpu_begin(r);
		t0 = fs_now_ns();
		uint32_t chunk = htonl(size);

		if (write_full(fd, h, 8) || write_full(fd, &tot, 8) || write_full(fd, &chunk, 4))
			goto fail;
		for (uint64_t i = 0; i < msgs; i++)
			if (write_full(fd, srcbuf, size))
				goto fail;
		if (read_full(fd, &ack, 4))
			goto fail;
		now = fs_now_ns();
		if (round == 1)
			cpu_end(r, msgs);
		total = tot;
		sent = now - t0;
		if (round == 0) {
			double rate = (double)tot / ((double)sent / 1e9);
			double want = rate * dur;

			msgs = (uint64_t)(want / size);
			if (msgs < 4)
				msgs = 4;
			if (msgs * size > 64ull << 30)
				msgs = (64ull << 30) / size;
		}
	}
	close(fd);
	r->ops = msgs;
	r->secs = (double)sent / 1e9;
	r->mbps = (double)total / r->secs / 1e6;
	r->ops_s = (double)msgs / r->secs;
	return 0;
fail:
	close(fd);
	return -EIO;
}

/* Sequential ops on one connection for the duration (at least 3 ops). */
/* Round trips the client's counters show between @a and now, over @ops
 * operations: one per Call sent (Call, Reply), one per Read chunk it offered
 * (the server's RDMA Read request and response), one per Commit (request,
 * response). RDMA Writes, Write chunks and Reply chunks travel one way. */
static void count_rtrips(struct conn *c, const struct rpcrdma_xprt_stats *a, uint64_t ops,
			 struct rec *r)
{
	struct rpcrdma_xprt_stats b, d;

	if (c->tp != TP_RDMA || !ops || rpcrdma_client_stats(c->rc, &b))
		return;
	rpcrdma_xprt_stats_diff(&b, a, &d);
	r->rtrips = (double)(d.msg_sent + d.nomsg_sent + d.read_chunks + d.commits) / (double)ops;
}

static int run_sync(struct conn *c, int op, uint32_t size, struct rec *r)
{
	struct rpcrdma_xprt_stats st0 = {0};
	struct lat l;
	uint64_t t0, end, ops = 0;
	int rc = 0;

	for (int i = 0; i < 2 && !rc; i++)   /* warm up */
		rc = conn_op(c, op, size);
	if (rc)
		return rc;
	if (c->tp == TP_RDMA)
		rc = rpcrdma_client_stats(c->rc, &st0);
	if (rc)
		return rc;
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(dur * 1e9);
	do {
		uint64_t a = fs_now_ns();

		rc = conn_op(c, op, size);
		if (rc)
			break;
		lat_add(&l, fs_now_ns() - a);
		ops++;
	} while (fs_now_ns() < end || ops < 3);
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	count_rtrips(c, &st0, ops, r);
	return rc;
}

/* Push mode: PUSH_OPEN (@mem: the tmpfs-backed region) once, then RDMA Write
 * 4 KiB + RDMA Commit per operation (completes when the Commit Response says
 * durable: msync). */
static int run_push(struct conn *c, uint32_t size, bool mem, struct rec *r)
{
	struct rpcrdma_xprt_stats st0;
	struct rpcrdma_call *call;
	struct rpcrdma_push_region reg;
	struct rpcrdma_xdr_dec *d;
	struct lat l;
	uint64_t t0, end, ops = 0;
	int32_t st = 0;
	int rc;

	rc = rpcrdma_client_push_capable(c->rc);
	if (rc)
		return rc;
	rc = rpcrdma_call_create(c->rc, mem ? BENCH_PUSH_OPEN_MEM : BENCH_PUSH_OPEN, &call);
	if (rc)
		return rc;
	rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_i32(d, &st);
		if (!rc)
			rc = st;
		if (!rc)
			rc = rpcrdma_xdr_get_push_region(d, &reg);
	}
	rpcrdma_call_destroy(call);
	if (rc)
		return rc;
	if (size > reg.length)
		return -EMSGSIZE;
	for (int i = 0; i < 2 && !rc; i++)   /* warm up */
		rc = rpcrdma_push_write(c->rc, &reg, 0, srcbuf, size, RPCRDMA_PUSH_COMMIT, NULL);
	if (!rc)
		rc = rpcrdma_client_stats(c->rc, &st0);
	if (rc)
		return rc;
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(dur * 1e9);
	do {
		uint64_t a = fs_now_ns();

		rc = rpcrdma_push_write(c->rc, &reg, 0, srcbuf, size, RPCRDMA_PUSH_COMMIT, NULL);
		if (rc)
			break;
		lat_add(&l, fs_now_ns() - a);
		ops++;
	} while (fs_now_ns() < end || ops < 3);
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	count_rtrips(c, &st0, ops, r);
	return rc;
}

/* -- many connections: a thread each -- */
struct cthread {
	struct conn c;
	int op;
	uint32_t size;
	uint64_t end, ops;
	struct lat *l;
	int rc;
	pthread_t t;
};

static void *cthread_main(void *arg)
{
	struct cthread *t = arg;

	do {
		uint64_t a = fs_now_ns();

		t->rc = conn_op(&t->c, t->op, t->size);
		if (t->rc)
			break;
		lat_add(t->l, fs_now_ns() - a);
		t->ops++;
	} while (fs_now_ns() < t->end || t->ops < 3);
	return NULL;
}

/* @spin: raw connections wait as "pingspin" ones (conn_set_spin). */
static int run_conns(enum tp tp, unsigned nconn, int op, uint32_t size, bool spin, struct rec *r)
{
	struct cthread *ts = calloc(nconn, sizeof(*ts));
	struct lat l;
	uint64_t t0, ops = 0;
	int rc = 0;
	unsigned i, started = 0;

	if (!ts)
		return -ENOMEM;
	for (i = 0; i < nconn && !rc; i++) {
		rc = conn_open(&ts[i].c, tp);
		if (!rc && spin && tp == TP_RAW)
			rc = conn_set_spin(&ts[i].c, spin_us);
		if (!rc)
			rc = conn_op(&ts[i].c, op, size);
	}
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	for (i = 0; i < nconn && !rc; i++) {
		ts[i].op = op;
		ts[i].size = size;
		ts[i].l = &l;
		ts[i].end = t0 + (uint64_t)(dur * 1e9);
		if (pthread_create(&ts[i].t, NULL, cthread_main, &ts[i]))
			rc = -EAGAIN;
		else
			started++;
	}
	for (i = 0; i < started; i++) {
		pthread_join(ts[i].t, NULL);
		ops += ts[i].ops;
		if (ts[i].rc && !rc)
			rc = ts[i].rc;
	}
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	for (i = 0; i < nconn; i++)
		conn_close(&ts[i].c);
	free(ts);
	return rc;
}

/* -- outstanding calls on one connection -- */
struct aslot {
	struct actx *a;
	uint8_t *sink;
	uint64_t t0;
};

struct actx {
	struct rpcrdma_client *clnt;
	uint32_t size;
	uint64_t end;
	struct lat l;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned inflight;
	uint64_t ops;
	int err;
};

static void async_done(struct rpcrdma_call *call, int status, void *arg);

static int async_start(struct aslot *s)
{
	struct rpcrdma_call *call;
	struct rpcrdma_ddp_sink sk = {s->sink, s->a->size};
	int rc = rpcrdma_call_create(s->a->clnt, BENCH_READ, &call);

	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), s->a->size);
	rc = rpcrdma_call_set_sinks(call, &sk, 1);
	s->t0 = fs_now_ns();
	if (!rc)
		rc = rpcrdma_call_start(call, async_done, s);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void async_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct aslot *s = arg;
	struct actx *a = s->a;
	uint64_t now = fs_now_ns();
	int rc = status;

	if (!rc) {
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && len != a->size)
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	lat_add(&a->l, now - s->t0);
	pthread_mutex_lock(&a->lock);
	if (!rc)
		a->ops++;
	else if (!a->err)
		a->err = rc;
	pthread_mutex_unlock(&a->lock);
	if (!rc && now < a->end)
		rc = async_start(s);
	else if (!rc)
		rc = 1;   /* done */
	if (rc) {
		pthread_mutex_lock(&a->lock);
		if (rc < 0 && !a->err)
			a->err = rc;
		a->inflight--;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->lock);
	}
}

static int run_outstanding_rr(enum tp tp, unsigned window, uint32_t size, struct rec *r)
{
	struct conn c;
	struct actx a;
	struct aslot *slots;
	uint64_t t0;
	int rc;

	rc = conn_open(&c, tp);
	if (!rc)
		rc = conn_op(&c, 1, size);
	slots = calloc(window, sizeof(*slots));
	if (rc || !slots) {
		free(slots);
		conn_close(&c);
		return rc ? rc : -ENOMEM;
	}
	memset(&a, 0, sizeof(a));
	a.clnt = c.rc;
	a.size = size;
	lat_init(&a.l);
	pthread_mutex_init(&a.lock, NULL);
	pthread_cond_init(&a.cv, NULL);
	cpu_begin(r);
	t0 = fs_now_ns();
	a.end = t0 + (uint64_t)(dur * 1e9);
	for (unsigned i = 0; i < window; i++) {
		slots[i].a = &a;
		slots[i].sink = malloc(size ? size : 1);
		pthread_mutex_lock(&a.lock);
		a.inflight++;
		pthread_mutex_unlock(&a.lock);
		if (!slots[i].sink || async_start(&slots[i])) {
			pthread_mutex_lock(&a.lock);
			a.inflight--;
			a.err = a.err ? a.err : -EIO;
			pthread_mutex_unlock(&a.lock);
			break;
		}
	}
	pthread_mutex_lock(&a.lock);
	while (a.inflight)
		pthread_cond_wait(&a.cv, &a.lock);
	pthread_mutex_unlock(&a.lock);
	cpu_end(r, a.ops);
	lat_finish(&a.l, r, a.ops, a.ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	rc = a.err;
	for (unsigned i = 0; i < window; i++)
		free(slots[i].sink);
	free(slots);
	pthread_mutex_destroy(&a.lock);
	pthread_cond_destroy(&a.cv);
	conn_close(&c);
	return rc;
}

/* Raw pipelining: @window requests in flight on one socket. */
static int run_outstanding_raw(unsigned window, uint32_t size, struct rec *r)
{
	struct conn c;
	struct lat l;
	uint64_t *t0s, t0, end, ops = 0;
	uint32_t req = CALL_HDR + 4, rsp = REPLY_HDR + 4 + XDR_ALIGN(size);
	uint32_t h[2] = {htonl(req), htonl(rsp)};
	uint8_t msg[64];
	unsigned head = 0, inflight = 0;
	int rc;

	rc = conn_open(&c, TP_RAW);
	t0s = calloc(window, sizeof(*t0s));
	if (rc || !t0s) {
		free(t0s);
		conn_close(&c);
		return rc ? rc : -ENOMEM;
	}
	memset(msg, 0, sizeof(msg));
	memcpy(msg, h, 8);
	lat_init(&l);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(dur * 1e9);
	for (; inflight < window; inflight++) {
		t0s[(head + inflight) % window] = fs_now_ns();
		if (write_full(c.fd, msg, req)) {
			rc = -EIO;
			break;
		}
	}
	while (!rc && inflight) {
		if (read_full(c.fd, c.sink, rsp)) {
			rc = -EIO;
			break;
		}
		lat_add(&l, fs_now_ns() - t0s[head]);
		head = (head + 1) % window;
		inflight--;
		ops++;
		if (fs_now_ns() < end) {
			t0s[(head + inflight) % window] = fs_now_ns();
			if (write_full(c.fd, msg, req))
				rc = -EIO;
			inflight++;
		}
	}
	cpu_end(r, ops);
	lat_finish(&l, r, ops, ops * (uint64_t)size, (double)(fs_now_ns() - t0) / 1e9);
	free(t0s);
	conn_close(&c);
	return rc;
}

/* ======================================================================
 * workloads
 * ====================================================================== */

static void na(struct rec *r, const char *why)
{
	size_t n = strnlen(why, sizeof(r->na) - 1);

	memcpy(r->na, why, n);
	r->na[n] = '\0';
}

static void record_err(struct rec *r, int rc)
{
	if (rc)
		snprintf(r->na, sizeof(r->na), "failed: %s", rpcrdma_strerror(rc));
}

static const uint32_t sizes_full[] = {1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 8388608};
static const uint32_t sizes_quick[] = {1024, 65536, 1048576, 8388608};
static const unsigned win_full[] = {1, 2, 4, 8, 16, 32, 64};
static const unsigned win_quick[] = {1, 8, 32, 64};
static const unsigned conns_full[] = {1, 2, 4, 8};
static const unsigned conns_quick[] = {1, 4};
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define OUT_SIZE 4096u
#define CONN_SIZE 65536u

static void fmt_size(char *b, size_t cap, uint32_t s)
{
	if (s >= 1048576 && s % 1048576 == 0)
		snprintf(b, cap, "%uM", s / 1048576);
	else if (s >= 1024 && s % 1024 == 0)
		snprintf(b, cap, "%uK", s / 1024);
	else
		snprintf(b, cap, "%u", s);
}

/* ======================================================================
 * scale: many connections at once (issue 16)
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
 * not run at 10,000 connections (one 64 KiB sink per connection).
 * ====================================================================== */

static const unsigned scale_ns[] = {1, 10, 100, 1000, 10000};
static bool big;   /* --big: 10,000 connections too */
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
		int p[2], port = 0, rc = 0, lfd = -1;
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
			prctl_parent_death();
			if (tp == TP_RDMA || tp == TP_TCP) {
				rc = rr_server(tp_name[tp], &port, true);
			} else {
				lfd = listen_loopback(&port);
				rc = lfd < 0 ? lfd : 0;
#if BENCH_HAVE_TIRPC
				if (!rc && tp == TP_TIRPC)
					rc = tirpc_server(lfd);
#endif
			}
			dprintf(p[1], rc ? "error %d\n" : "%d\n", rc ? -rc : port);
			close(p[1]);
			if (rc)
				_exit(1);
			if (tp == TP_RAW)
				raw_server(lfd);
#if BENCH_HAVE_TIRPC
			if (tp == TP_TIRPC)
				svc_run();
#endif
			for (;;)
				pause();
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
	struct sctx *s;
	uint64_t t0;
	uint32_t got;           /* raw: response bytes read so far */
};

struct sctx {
	enum tp tp;
	int op;                 /* 0 NULL, 1 READ 64K */
	uint32_t size;
	uint64_t end;
	struct lat l;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned inflight;
	uint64_t ops;
	int err;
};

static void scale_done(struct rpcrdma_call *call, int status, void *arg);

static int scale_start(struct sconn *sc)
{
	struct sctx *s = sc->s;
	struct rpcrdma_call *call;
	int rc = rpcrdma_call_create(sc->c.rc, s->op ? BENCH_READ : 0, &call);

	if (rc)
		return rc;
	if (s->op) {
		struct rpcrdma_ddp_sink sk = {sc->c.sink, s->size};

		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), s->size);
		rc = rpcrdma_call_set_sinks(call, &sk, 1);
		rpcrdma_call_set_reply_hint(call, 64);
	}
	sc->t0 = fs_now_ns();
	if (!rc)
		rc = rpcrdma_call_start(call, scale_done, sc);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void scale_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct sconn *sc = arg;
	struct sctx *s = sc->s;
	uint64_t now = fs_now_ns();
	int rc = status;

	if (!rc && s->op) {
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && len != s->size)
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	lat_add(&s->l, now - sc->t0);
	if (!rc && now < s->end)
		rc = scale_start(sc);
	else if (!rc)
		rc = 1;
	pthread_mutex_lock(&s->lock);
	if (status == 0)
		s->ops++;
	if (rc) {
		if (rc < 0 && !s->err)
			s->err = rc;
		s->inflight--;
		pthread_cond_signal(&s->cv);
	}
	pthread_mutex_unlock(&s->lock);
}

/* rdma://, tcp://: one call in flight on every connection. */
static int scale_async(struct sconn *cs, unsigned n, struct sctx *s)
{
	for (unsigned i = 0; i < n; i++) {
		pthread_mutex_lock(&s->lock);
		s->inflight++;
		pthread_mutex_unlock(&s->lock);
		if (scale_start(&cs[i])) {
			pthread_mutex_lock(&s->lock);
			s->inflight--;
			s->err = s->err ? s->err : -EIO;
			pthread_mutex_unlock(&s->lock);
			break;
		}
	}
	pthread_mutex_lock(&s->lock);
	while (s->inflight)
		pthread_cond_wait(&s->cv, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return s->err;
}

/* raw TCP: one request in flight per socket, one epoll loop. */
static int scale_raw(struct sconn *cs, unsigned n, struct sctx *s)
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
	struct sctx *s;
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
static int scale_tirpc(struct sconn *cs, unsigned n, struct sctx *s)
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
	int rc = 0, saved = tp_port[tp];
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
	(void)saved;
	qsort(t, i, sizeof(*t), cmp_double);
	*p50 = i ? t[i / 2] : 0;
	free(t);
	return rc;
}

static void scale_point(enum tp tp, unsigned n)
{
	struct sconn *cs = calloc(n, sizeof(*cs));
	struct pstat c0, c1, s0, s1;
	pid_t spid = 0;
	int port = 0, rc, saved_port = tp_port[tp];
	double p50 = 0;
	struct rec *idle;

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
		/* idle: the counts settle (the server frees half-open state,
		 * the first calls' buffers are back) */
		struct timespec ts = {0, 300000000};

		nanosleep(&ts, NULL);
		pstat_read(spid, &s1);
		pstat_read(0, &c1);
		idle->connect_p50_us = p50;
		idle->client_rss_per_conn = (double)(c1.rss_kib - c0.rss_kib) / n;
		idle->server_rss_per_conn = (double)(s1.rss_kib - s0.rss_kib) / n;
		idle->fds_per_conn = (double)(c1.fds - c0.fds) / n;
		idle->server_fds_per_conn = (double)(s1.fds - s0.fds) / n;
		idle->client_threads = c1.threads;
		idle->server_threads = s1.threads;
		for (int op = 0; op < 2 && !rc; op++) {
			struct rec *r = op ? rec_new("scale", tp, "read64k", CONN_SIZE, 1, n) : idle;
			struct sctx s;
			int64_t cc0, sc0, cc1, sc1;
			uint64_t t0;

			if (op) {
				r->connect_p50_us = idle->connect_p50_us;
				r->client_rss_per_conn = idle->client_rss_per_conn;
				r->server_rss_per_conn = idle->server_rss_per_conn;
				r->fds_per_conn = idle->fds_per_conn;
				r->server_fds_per_conn = idle->server_fds_per_conn;
				r->client_threads = idle->client_threads;
				r->server_threads = idle->server_threads;
			}
			if (op && n > 1000) {
				na(r, "not run beyond 1000 connections (a 64 KiB sink each)");
				continue;
			}
			for (unsigned i = 0; op && i < n && !rc; i++) {
				cs[i].c.sink = malloc(CONN_SIZE + 64);
				if (!cs[i].c.sink)
					rc = -ENOMEM;
			}
			if (rc) {
				record_err(r, rc);
				break;
			}
			memset(&s, 0, sizeof(s));
			s.tp = tp;
			s.op = op;
			s.size = op ? CONN_SIZE : 0;
			lat_init(&s.l);
			pthread_mutex_init(&s.lock, NULL);
			pthread_cond_init(&s.cv, NULL);
			for (unsigned i = 0; i < n; i++)
				cs[i].s = &s;
			cc0 = cpu_ns(0);
			sc0 = cpu_ns(spid);
			t0 = fs_now_ns();
			s.end = t0 + (uint64_t)(dur * 1e9);
			rc = tp == TP_RAW ? scale_raw(cs, n, &s)
			     : tp == TP_TIRPC ? scale_tirpc(cs, n, &s) : scale_async(cs, n, &s);
			cc1 = cpu_ns(0);
			sc1 = cpu_ns(spid);
			lat_finish(&s.l, r, s.ops, s.ops * (uint64_t)s.size,
				   (double)(fs_now_ns() - t0) / 1e9);
			if (s.ops && cc0 >= 0 && cc1 >= cc0)
				r->cpu_c = (double)(cc1 - cc0) / 1e3 / (double)s.ops;
			if (s.ops && sc0 >= 0 && sc1 >= sc0)
				r->cpu_s = (double)(sc1 - sc0) / 1e3 / (double)s.ops;
			record_err(r, rc);
			pthread_mutex_destroy(&s.lock);
			pthread_cond_destroy(&s.cv);
		}
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

static void run_scale(void)
{
	unsigned npts = big ? N(scale_ns) : N(scale_ns) - 1;

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

static void run_all(void)
{
	const uint32_t *sizes = quick ? sizes_quick : sizes_full;
	size_t nsizes = quick ? N(sizes_quick) : N(sizes_full);
	const unsigned *wins = quick ? win_quick : win_full;
	size_t nwins = quick ? N(win_quick) : N(win_full);
	const unsigned *cons = quick ? conns_quick : conns_full;
	size_t ncons = quick ? N(conns_quick) : N(conns_full);
	struct conn conn[TP_N], spinc;   /* spinc: the raw "pingspin" connection */
	bool open_ok[TP_N], spin_ok = false;
	char sz[16], spin_why[160] = "";
	int tp, rc;

	{
		unsigned nt = 0, raw = tp_ok[TP_RAW] && tp_want[TP_RAW];

		for (tp = 0; tp < TP_N; tp++)
			nt += tp_want[tp] && tp_ok[tp];
		progress_n = 0;
		if (wl_want[WL_NULL])
			progress_n += nt + raw;   /* + pingspin */
		for (int w = WL_READ; w <= WL_WRITE; w++)
			if (wl_want[w])
				progress_n += (unsigned)nsizes * (nt + 2 * raw);  /* + pingspin, stream */
		if (wl_want[WL_OUTST]) {
			progress_n += (unsigned)nwins * nt;
			if (tp_ok[TP_TIRPC] && tp_want[TP_TIRPC])
				progress_n -= (unsigned)(nwins - 1);
		}
		if (wl_want[WL_CONNS])
			progress_n += (unsigned)ncons * (nt + raw);
		if (wl_want[WL_PUSH]) {
			/* pull, durable pull x2, push x2 (rdma only) */
			progress_n += tp_want[TP_RDMA] && tp_ok[TP_RDMA] ? 5 : 0;
			progress_n += tp_want[TP_TCP] && tp_ok[TP_TCP] ? 3 : 0;
		}
		if (wl_want[WL_SCALE])
			progress_n += (unsigned)(big ? N(scale_ns) : N(scale_ns) - 1) * nt;
	}
	for (tp = 0; tp < TP_N; tp++) {
		open_ok[tp] = false;
		if (!tp_want[tp] || !tp_ok[tp])
			continue;
		rc = conn_open(&conn[tp], (enum tp)tp);
		if (rc) {
			snprintf(tp_why[tp], sizeof(tp_why[tp]), "connect failed: %s",
				 rpcrdma_strerror(rc));
			tp_ok[tp] = false;
			conn_close(&conn[tp]);
		} else {
			open_ok[tp] = true;
		}
	}
	if (open_ok[TP_RAW] && (wl_want[WL_NULL] || wl_want[WL_READ] || wl_want[WL_WRITE])) {
		rc = conn_open(&spinc, TP_RAW);
		if (!rc)
			rc = conn_set_spin(&spinc, spin_us);
		if (rc) {
			snprintf(spin_why, sizeof(spin_why), "connect failed: %s",
				 rpcrdma_strerror(rc));
			conn_close(&spinc);
		} else {
			spin_ok = true;
		}
	} else {
		snprintf(spin_why, sizeof(spin_why), "%s", tp_why[TP_RAW]);
	}
	/* NULL latency */
	for (tp = 0; tp < TP_N && wl_want[WL_NULL]; tp++) {
		struct rec *r;

		if (!tp_want[tp])
			continue;
		r = rec_new("null", (enum tp)tp, tp == TP_RAW ? "pingpong" : NULL, 0, 1, 1);
		if (!open_ok[tp]) {
			na(r, tp_why[tp]);
			continue;
		}
		progress("null latency over %s", tp_name[tp]);
		record_err(r, run_sync(&conn[tp], 0, 0, r));
		if (tp != TP_RAW)
			continue;
		r = rec_new("null", TP_RAW, "pingspin", 0, 1, 1);
		if (!spin_ok) {
			na(r, spin_why);
			continue;
		}
		progress("null latency over raw, spin then sleep (%u us)", spin_us);
		record_err(r, run_sync(&spinc, 0, 0, r));
	}
	/* READ / WRITE sizes */
	for (int op = 1; op <= 2; op++) {
		if (!wl_want[op == 1 ? WL_READ : WL_WRITE])
			continue;
		for (size_t i = 0; i < nsizes; i++) {
			fmt_size(sz, sizeof(sz), sizes[i]);
			for (tp = 0; tp < TP_N; tp++) {
				struct rec *r;

				if (!tp_want[tp])
					continue;
				r = rec_new(op == 1 ? "read" : "write", (enum tp)tp,
					    tp == TP_RAW ? "pingpong" : NULL, sizes[i], 1, 1);
				if (!open_ok[tp]) {
					na(r, tp_why[tp]);
					continue;
				}
				progress("%s %s over %s", op == 1 ? "READ" : "WRITE", sz,
					 tp_name[tp]);
				record_err(r, run_sync(&conn[tp], op, sizes[i], r));
				if (tp == TP_RAW) {
					r = rec_new(op == 1 ? "read" : "write", TP_RAW, "pingspin",
						    sizes[i], 1, 1);
					if (!spin_ok) {
						na(r, spin_why);
					} else {
						progress("%s %s over raw, spin then sleep (%u us)",
							 op == 1 ? "READ" : "WRITE", sz, spin_us);
						record_err(r, run_sync(&spinc, op, sizes[i], r));
					}
					r = rec_new(op == 1 ? "read" : "write", TP_RAW, "stream",
						    sizes[i], 1, 1);
					progress("raw stream of %s messages", sz);
					record_err(r, raw_stream(tp_port[TP_RAW], sizes[i], r));
				}
			}
		}
	}
	for (tp = 0; tp < TP_N; tp++)
		if (open_ok[tp])
			conn_close(&conn[tp]);
	if (spin_ok)
		conn_close(&spinc);
	/* outstanding READs of 4 KiB on one connection */
	for (size_t i = 0; i < nwins && wl_want[WL_OUTST]; i++) {
		for (tp = 0; tp < TP_N; tp++) {
			struct rec *r;

			if (!tp_want[tp])
				continue;
			r = rec_new("read_outstanding", (enum tp)tp, tp == TP_RAW ? "pipeline" : NULL,
				    OUT_SIZE, wins[i], 1);
			if (!tp_ok[tp]) {
				na(r, tp_why[tp]);
				continue;
			}
			if (tp == TP_TIRPC) {
				if (wins[i] > 1) {
					na(r, "libtirpc clnt_call is synchronous: one outstanding "
					      "call per CLIENT");
					continue;
				}
				progress("READ 4K, 1 outstanding over tirpc");
				struct conn c1;

				rc = conn_open(&c1, TP_TIRPC);
				if (!rc)
					rc = run_sync(&c1, 1, OUT_SIZE, r);
				conn_close(&c1);
				record_err(r, rc);
				continue;
			}
			progress("READ 4K, %u outstanding over %s", wins[i], tp_name[tp]);
			rc = tp == TP_RAW ? run_outstanding_raw(wins[i], OUT_SIZE, r)
					  : run_outstanding_rr((enum tp)tp, wins[i], OUT_SIZE, r);
			record_err(r, rc);
		}
	}
	/* connections */
	for (size_t i = 0; i < ncons && wl_want[WL_CONNS]; i++) {
		for (tp = 0; tp < TP_N; tp++) {
			struct rec *r;

			if (!tp_want[tp])
				continue;
			r = rec_new("read_conns", (enum tp)tp, tp == TP_RAW ? "pingpong" : NULL,
				    CONN_SIZE, 1, cons[i]);
			if (!tp_ok[tp]) {
				na(r, tp_why[tp]);
				continue;
			}
			progress("READ 64K on %u connections over %s", cons[i], tp_name[tp]);
			record_err(r, run_conns((enum tp)tp, cons[i], 1, CONN_SIZE, false, r));
			if (tp != TP_RAW)
				continue;
			r = rec_new("read_conns", TP_RAW, "pingspin", CONN_SIZE, 1, cons[i]);
			progress("READ 64K on %u connections over raw, spin then sleep (%u us)",
				 cons[i], spin_us);
			record_err(r, run_conns(TP_RAW, cons[i], 1, CONN_SIZE, true, r));
		}
	}
	/* pull-mode WRITE vs push-mode Write+Commit, 4 KiB */
	for (tp = 0; tp < TP_N && wl_want[WL_PUSH]; tp++) {
		struct rec *r;
		struct conn c1;

		if (!tp_want[tp] || tp == TP_RAW || tp == TP_TIRPC)
			continue;
		r = rec_new("write_4k_pull", (enum tp)tp, NULL, 4096, 1, 1);
		if (!tp_ok[tp]) {
			na(r, tp_why[tp]);
		} else {
			progress("pull-mode WRITE 4K over %s", tp_name[tp]);
			conn_inline = 4096;   /* a Read chunk: pull mode */
			rc = conn_open(&c1, (enum tp)tp);
			conn_inline = 0;
			if (!rc)
				rc = run_sync(&c1, 2, 4096, r);
			conn_close(&c1);
			record_err(r, rc);
		}
		/* tmpfs first: the disk runs leave write-back behind them */
		for (int m = 1; m >= 0; m--) {
			const char *var = m ? "tmpfs" : "disk";

			r = rec_new("write_4k_pull_sync", (enum tp)tp, var, 4096, 1, 1);
			if (!tp_ok[tp]) {
				na(r, tp_why[tp]);
			} else {
				progress("durable pull-mode WRITE 4K (%s, fdatasync) over %s", var,
					 tp_name[tp]);
				conn_inline = 4096;
				rc = conn_open(&c1, (enum tp)tp);
				conn_inline = 0;
				if (!rc)
					rc = run_sync(&c1, 3 + m, 4096, r);
				conn_close(&c1);
				record_err(r, rc);
			}
			r = rec_new("write_4k_push_commit", (enum tp)tp, var, 4096, 1, 1);
			if (tp == TP_TCP) {
				na(r, "push mode needs RDMA Write + Commit (rdma:// only)");
			} else if (!tp_ok[tp]) {
				na(r, tp_why[tp]);
			} else {
				progress("push-mode Write+Commit 4K (%s) over %s", var, tp_name[tp]);
				rc = conn_open(&c1, (enum tp)tp);
				if (!rc)
					rc = run_push(&c1, 4096, m, r);
				conn_close(&c1);
				if (rc == -EOPNOTSUPP)
					na(r, "this connection cannot do RDMA Commit");
				else
					record_err(r, rc);
			}
		}
	}
	if (wl_want[WL_SCALE])
		run_scale();
}

/* ======================================================================
 * ratios, table, JSON, SVG
 * ====================================================================== */

static struct rec *find(const char *wl, enum tp tp, const char *variant, uint32_t size,
			unsigned outst, unsigned conns)
{
	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i];

		if (!strcmp(r->workload, wl) && r->tp == tp && r->size == size &&
		    r->outstanding == outst && r->conns == conns && !r->na[0] &&
		    (!variant || !strcmp(r->variant, variant)))
			return r;
	}
	return NULL;
}

/* latency workloads (null, write_4k_*): p50 ratio (lower is better), to the
 * blocking raw ping-pong (ratio_raw) and to the raw ping-pong that waits the
 * library's way, spin then sleep (ratio_spin); throughput workloads:
 * throughput ratio (higher is better), against the raw stream for READ/WRITE
 * sizes, against raw of the same shape otherwise (blocking ping-pong for
 * connections, pipeline for outstanding calls). */
static bool is_latency(const struct rec *r)
{
	return !strcmp(r->workload, "null") || !strncmp(r->workload, "write_4k", 8);
}

static void compute_ratios(void)
{
	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i], *raw, *ti;

		if (r->na[0] || r->tp == TP_RAW)
			continue;
		if (!strcmp(r->workload, "scale")) {
			/* throughput with every connection active, same shape */
			raw = find("scale", TP_RAW, r->variant, r->size, 1, r->conns);
			ti = find("scale", TP_TIRPC, r->variant, r->size, 1, r->conns);
			if (raw && raw->ops_s > 0)
				r->ratio_raw = r->ops_s / raw->ops_s;
			if (ti && ti->ops_s > 0 && r->tp != TP_TIRPC)
				r->ratio_tirpc = r->ops_s / ti->ops_s;
			continue;
		}
		if (is_latency(r)) {
			struct rec *spin = !strcmp(r->workload, "null")
						   ? find("null", TP_RAW, "pingspin", 0, 1, 1)
						   : find("write", TP_RAW, "pingspin", 4096, 1, 1);

			if (spin && spin->p50_us > 0)
				r->ratio_spin = r->p50_us / spin->p50_us;
			raw = !strcmp(r->workload, "null")
				      ? find("null", TP_RAW, "pingpong", 0, 1, 1)
				      : find("write", TP_RAW, "pingpong", 4096, 1, 1);
			ti = !strcmp(r->workload, "null") ? find("null", TP_TIRPC, NULL, 0, 1, 1)
							  : find("write", TP_TIRPC, NULL, 4096, 1, 1);
			if (raw && raw->p50_us > 0)
				r->ratio_raw = r->p50_us / raw->p50_us;
			if (ti && ti->p50_us > 0 && r->tp != TP_TIRPC)
				r->ratio_tirpc = r->p50_us / ti->p50_us;
			continue;
		}
		if (!strcmp(r->workload, "read") || !strcmp(r->workload, "write"))
			raw = find(r->workload, TP_RAW, "stream", r->size, 1, 1);
		else
			raw = find(r->workload, TP_RAW,
				   !strcmp(r->workload, "read_outstanding") ? "pipeline" : "pingpong",
				   r->size, r->outstanding, r->conns);
		ti = find(r->workload, TP_TIRPC, NULL, r->size, r->outstanding, r->conns);
		if (raw && raw->mbps > 0)
			r->ratio_raw = r->mbps / raw->mbps;
		if (ti && ti->mbps > 0 && r->tp != TP_TIRPC)
			r->ratio_tirpc = r->mbps / ti->mbps;
	}
}

/* The scale workload's idle costs and its ratios to tcp:// (rdma only). */
static void print_scale(void)
{
	bool head = false;

	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i], *t;

		if (strcmp(r->workload, "scale") || strcmp(r->variant, "null") || r->na[0] ||
		    r->client_rss_per_conn < -0.5)
			continue;
		if (!head) {
			printf("\n-- scale, idle cost per connection (client: this process, server: "
			       "its own) and connect + first NULL call\n%-5s %6s %12s %12s %9s "
			       "%9s %8s %8s %11s %9s\n", "xprt", "conns", "cli KiB/conn",
			       "srv KiB/conn", "cli fd/c", "srv fd/c", "cli thr", "srv thr",
			       "connect p50", "vs tcp");
			head = true;
		}
		t = find("scale", TP_TCP, "null", 0, 1, r->conns);
		printf("%-5s %6u %12.1f %12.1f %9.2f %9.2f %8ld %8ld %9.0fus %9s\n", tp_name[r->tp],
		       r->conns, r->client_rss_per_conn, r->server_rss_per_conn, r->fds_per_conn,
		       r->server_fds_per_conn, r->client_threads, r->server_threads,
		       r->connect_p50_us, "");
		if (r->tp == TP_RDMA && t && t->connect_p50_us > 0)
			printf("%71s connect %.2fx tcp://; NULL ops/s %.2fx tcp://\n", "",
			       r->connect_p50_us / t->connect_p50_us,
			       t->ops_s > 0 ? r->ops_s / t->ops_s : -1.0);
	}
}

static void print_table(void)
{
	const char *last = "";

	printf("\n%-20s %-5s %-8s %5s %4s %4s %8s %8s %8s %8s %7s %8s %9s\n", "workload", "xprt",
	       "variant", "size", "outs", "conn", "p50 us", "p99 us", "MB/s", "ops/s", "vs raw",
	       "vs tirpc", "cpu us/op");
	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i];
		char sz[16], a[16] = "-", b[16] = "-", cpu[24] = "-";

		if (strcmp(last, r->workload)) {
			if (!strcmp(r->workload, "null"))
				printf("-- NULL round trip (ratios: p50 / raw ping-pong p50 and / "
				       "libtirpc p50; lower is better; cpu: client + server)\n");
			else if (!strcmp(r->workload, "read"))
				printf("-- READ, 1 outstanding (ratios: MB/s / raw stream MB/s and "
				       "/ libtirpc; higher is better)\n");
			else if (!strcmp(r->workload, "write"))
				printf("-- WRITE, 1 outstanding (same ratios)\n");
			else if (!strcmp(r->workload, "read_outstanding"))
				printf("-- READ 4K, N outstanding on one connection (ratio: / raw "
				       "pipelined)\n");
			else if (!strcmp(r->workload, "read_conns"))
				printf("-- READ 64K, N connections, one call each (ratio: / raw "
				       "ping-pong on N connections)\n");
			else if (!strcmp(r->workload, "scale"))
				printf("-- scale: N connections in one process, every one active "
				       "(ratios: ops/s / raw and / libtirpc), then the idle cost "
				       "per connection below\n");
			else if (!strncmp(r->workload, "write_4k", 8) && strncmp(last, "write_4k", 8))
				printf("-- 4K write: pull-mode WRITE RPC (2 network round trips: "
				       "Call, RDMA Read request/response, Reply; data kept in server "
				       "memory), the same made durable (write_4k_pull_sync: pwrite + "
				       "fdatasync before the Reply) vs push-mode RDMA Write + RDMA "
				       "Commit (1 round trip: Commit request/response; durable: msync "
				       "of the written page before the response)\n");
			last = r->workload;
		}
		fmt_size(sz, sizeof(sz), r->size);
		if (r->na[0]) {
			printf("%-20s %-5s %-8s %5s %4u %4u   not available: %s\n", r->workload,
			       tp_name[r->tp], r->variant, sz, r->outstanding, r->conns, r->na);
			continue;
		}
		if (r->ratio_raw >= 0)
			snprintf(a, sizeof(a), "%.2fx", r->ratio_raw);
		if (r->ratio_tirpc >= 0)
			snprintf(b, sizeof(b), "%.2fx", r->ratio_tirpc);
		if (r->cpu_c >= 0 && r->cpu_s >= 0)
			snprintf(cpu, sizeof(cpu), "%.1f", r->cpu_c + r->cpu_s);
		printf("%-20s %-5s %-8s %5s %4u %4u %8.1f %8.1f %8.1f %8.0f %7s %8s %9s\n",
		       r->workload, tp_name[r->tp], r->variant, sz, r->outstanding, r->conns,
		       r->p50_us, r->p99_us, r->mbps, r->ops_s, a, b, cpu);
	}
	print_scale();
	/* against the floor that waits the same way: spin, then sleep */
	for (int tp = 0; tp < TP_N; tp++) {
		struct rec *n = find("null", (enum tp)tp, NULL, 0, 1, 1);

		if (tp == TP_RAW || !n || n->ratio_spin < 0 || n->ratio_raw < 0)
			continue;
		printf("%s: NULL p50 %.1f us = %.2fx raw ping-pong (blocking), %.2fx raw ping-spin "
		       "(spin %u us)", tp_name[tp], n->p50_us, n->ratio_raw, n->ratio_spin,
		       spin_us);
		/* and how busy each side was: CPU time per wall time */
		if (n->cpu_c >= 0 && n->cpu_s >= 0)
			printf("; CPU us/op client %.1f + server %.1f (busy %.2f + %.2f CPUs)",
			       n->cpu_c, n->cpu_s, n->cpu_c * n->ops_s / 1e6,
			       n->cpu_s * n->ops_s / 1e6);
		printf("\n");
	}
	/* the scaling target: 32 outstanding vs 1 */
	for (int tp = 0; tp < TP_N; tp++) {
		struct rec *one = find("read_outstanding", (enum tp)tp, NULL, OUT_SIZE, 1, 1);
		struct rec *w32 = find("read_outstanding", (enum tp)tp, NULL, OUT_SIZE, 32, 1);

		if (one && w32 && one->mbps > 0)
			printf("%s: 32 outstanding READ 4K give %.2fx the throughput of 1\n",
			       tp_name[tp], w32->mbps / one->mbps);
	}
	/* push vs pull, 4K: the durable pulls are the like-with-like baselines */
	for (int m = 0; m < 2; m++) {
		const char *var = m ? "tmpfs" : "disk";
		struct rec *pu = find("write_4k_pull", TP_RDMA, NULL, 4096, 1, 1);
		struct rec *ps = find("write_4k_pull_sync", TP_RDMA, var, 4096, 1, 1);
		struct rec *pc = find("write_4k_push_commit", TP_RDMA, var, 4096, 1, 1);

		if (pu && ps && pc && pc->p50_us > 0 && ps->p50_us > 0 && pu->p50_us > 0 &&
		    !pc->na[0])
			printf("rdma: push Write+Commit 4K on %s p50 %.1f us = %.2fx durable pull "
			       "WRITE on %s (%.1f us), %.2fx non-durable pull WRITE (%.1f us); "
			       "round trips per op: push %.2f, pull %.2f\n",
			       var, pc->p50_us, pc->p50_us / ps->p50_us, var, ps->p50_us,
			       pc->p50_us / pu->p50_us, pu->p50_us, pc->rtrips, ps->rtrips);
	}
}

static int write_json(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "[\n");
	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i];

		fprintf(f,
			"  {\"workload\": \"%s\", \"transport\": \"%s\", \"variant\": \"%s\", "
			"\"size\": %u, \"outstanding\": %u, \"connections\": %u, ",
			r->workload, tp_name[r->tp], r->variant, r->size, r->outstanding, r->conns);
		if (r->na[0]) {
			fprintf(f, "\"available\": false, \"reason\": \"");
			for (const char *p = r->na; *p; p++)
				fprintf(f, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
			fprintf(f, "\"}%s\n", i + 1 < nrecs ? "," : "");
			continue;
		}
		fprintf(f,
			"\"available\": true, \"ops\": %llu, \"seconds\": %.4f, \"p50_us\": %.2f, "
			"\"p99_us\": %.2f, \"throughput_MBps\": %.2f, \"ops_per_s\": %.1f, "
			"\"ratio_raw\": ",
			(unsigned long long)r->ops, r->secs, r->p50_us, r->p99_us, r->mbps, r->ops_s);
		if (r->ratio_raw >= 0)
			fprintf(f, "%.4f", r->ratio_raw);
		else
			fprintf(f, "null");
		fprintf(f, ", \"ratio_tirpc\": ");
		if (r->ratio_tirpc >= 0)
			fprintf(f, "%.4f", r->ratio_tirpc);
		else
			fprintf(f, "null");
		if (r->rtrips >= 0)
			fprintf(f, ", \"round_trips_per_op\": %.3f", r->rtrips);
		fprintf(f, ", \"ratio_raw_spin\": %.4f, \"spin_us\": %u",
			r->ratio_spin >= 0 ? r->ratio_spin : -1.0, spin_us);
		fprintf(f, ", \"cpu_client_us_per_op\": %.3f, \"cpu_server_us_per_op\": %.3f",
			r->cpu_c >= 0 ? r->cpu_c : -1.0, r->cpu_s >= 0 ? r->cpu_s : -1.0);
		if (!strcmp(r->workload, "scale"))
			fprintf(f, ", \"conns\": %u, \"op\": \"%s\", \"server_rss_kib_per_conn\": %.2f, "
				"\"client_rss_kib_per_conn\": %.2f, \"client_threads\": %ld, "
				"\"server_threads\": %ld, \"fds_per_conn\": %.3f, "
				"\"server_fds_per_conn\": %.3f, \"connect_p50_us\": %.1f", r->conns,
				r->variant, r->server_rss_per_conn, r->client_rss_per_conn,
				r->client_threads, r->server_threads, r->fds_per_conn,
				r->server_fds_per_conn, r->connect_p50_us);
		fprintf(f, ", \"ratio_kind\": \"%s\"}%s\n",
			is_latency(r) ? "p50_latency" : "throughput", i + 1 < nrecs ? "," : "");
	}
	fprintf(f, "]\n");
	return fclose(f) ? -errno : 0;
}

/* log2 without libm (exact for powers of two, linear between them) */
static double lg2(double v)
{
	uint32_t u = v < 1 ? 1 : (uint32_t)v;
	int e = 31 - __builtin_clz(u);

	return e + (v / (double)(1u << e) - 1.0);
}

/* Two panels (READ, WRITE): MB/s against message size (log2 axis), one
 * line per transport (raw: stream and ping-pong). */
static int write_svg(const char *path)
{
	static const char *const colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#7f7f7f",
					     "#bcbd22"};
	const int W = 1000, H = 440, pw = 420, ph = 300, top = 60, lefts[2] = {70, 570};
	FILE *f = fopen(path, "w");
	double ymax[2] = {1, 1};
	uint32_t smin = UINT32_MAX, smax = 0;

	if (!f)
		return -errno;
	for (unsigned i = 0; i < nrecs; i++) {
		struct rec *r = &recs[i];
		int p = !strcmp(r->workload, "read") ? 0 : !strcmp(r->workload, "write") ? 1 : -1;

		if (p < 0 || r->na[0])
			continue;
		if (r->mbps > ymax[p])
			ymax[p] = r->mbps;
		if (r->size < smin)
			smin = r->size;
		if (r->size > smax)
			smax = r->size;
	}
	if (smin >= smax)
		smax = smin * 2;
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<text x=\"%d\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">rpcrdma-bench: "
		"throughput by message size (1 outstanding, 1 connection, loopback)</text>\n",
		W, H, W / 2);
	for (int p = 0; p < 2; p++) {
		int x0 = lefts[p], y0 = top + ph;
		double lmin = lg2((double)smin), lmax = lg2((double)smax);

		fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" text-anchor=\"middle\">%s</text>\n",
			x0 + pw / 2, top - 8, p ? "WRITE" : "READ");
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
			   "stroke=\"black\"/>\n", x0, top, pw, ph);
		for (int t = 0; t <= 4; t++) {
			int y = y0 - ph * t / 4;

			fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ddd\"/>"
				   "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.0f</text>\n",
				x0, y, x0 + pw, y, x0 - 4, y + 4, ymax[p] * t / 4);
		}
		for (uint32_t s = smin; s <= smax && s; s *= 4) {
			char sz[16];
			double x = x0 + pw * (lg2((double)s) - lmin) / (lmax - lmin);

			fmt_size(sz, sizeof(sz), s);
			fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x,
				y0 + 16, sz);
			if (s > UINT32_MAX / 4)
				break;
		}
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">message size</text>\n",
			x0 + pw / 2, y0 + 34);
		fprintf(f, "<text x=\"%d\" y=\"%d\" transform=\"rotate(-90 %d %d)\" "
			   "text-anchor=\"middle\">MB/s</text>\n",
			x0 - 50, top + ph / 2, x0 - 50, top + ph / 2);
		for (int line = 0; line < 5; line++) {
			enum tp tp = line < 4 ? (enum tp)line : TP_RAW;
			const char *variant = line == 3 ? "stream" : line == 4 ? "pingpong" : NULL;
			bool any = false;

			for (unsigned i = 0; i < nrecs; i++) {
				struct rec *r = &recs[i];

				if (strcmp(r->workload, p ? "write" : "read") || r->tp != tp ||
				    r->na[0] || (variant && strcmp(r->variant, variant)))
					continue;
				double x = x0 + pw * (lg2((double)r->size) - lmin) /
							(lmax - lmin);
				double y = y0 - ph * r->mbps / ymax[p];

				if (!any)
					fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" "
						   "stroke-width=\"2\" points=\"", colors[line]);
				fprintf(f, "%.1f,%.1f ", x, y);
				any = true;
			}
			if (any)
				fprintf(f, "\"/>\n");
		}
	}
	for (int line = 0; line < 5; line++) {
		static const char *const label[] = {"librpcrdma rdma://", "librpcrdma tcp://",
						    "libtirpc tcp", "raw TCP stream",
						    "raw TCP ping-pong"};
		int x = 120 + line * 170;

		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>"
			   "<text x=\"%d\" y=\"%d\">%s</text>\n",
			x, H - 24, colors[line], x + 18, H - 18, label[line]);
	}
	fprintf(f, "</svg>\n");
	return fclose(f) ? -errno : 0;
}

/* ====================================================================== */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rpcrdma-bench [--quick] [--duration SECS] [--transports LIST]\n"
		"                     [--workloads LIST] [--spin-us N] [--json FILE] [--svg FILE]\n"
		"                     [--help]\n"
		"\n"
		"Runs the same workloads over librpcrdma rdma:// and tcp://, libtirpc over TCP\n"
		"and raw TCP (the floor), servers in forked children on loopback, and prints a\n"
		"table with ratios to raw TCP and to libtirpc and the CPU time per operation\n"
		"(client process + server process).\n"
		"  --quick            fewer sizes and points, 0.15 s each (under a minute)\n"
		"  --duration SECS    seconds per measurement point (default 1.0)\n"
		"  --transports LIST  comma-separated subset of rdma,tcp,tirpc,raw (default all)\n"
		"  --workloads LIST   comma-separated subset of null,read,write,outstanding,\n"
		"                     conns,push,scale (default all but scale)\n"
		"  --big              scale: 10,000 connections too (the file descriptor limit\n"
		"                     is raised as far as the hard limit, or beyond as root)\n"
		"  --spin-us N        spin-then-sleep budget, 0..%u microseconds: exported as\n"
		"                     RPCRDMA_SOFT_SPIN_US to the library (client and servers)\n"
		"                     and used by the raw \"pingspin\" floor, whose both ends\n"
		"                     poll with recv(MSG_DONTWAIT) that long before blocking;\n"
		"                     0: no spinning anywhere (default: RPCRDMA_SOFT_SPIN_US\n"
		"                     if set, else %u)\n"
		"  --json FILE        one JSON record per workload and transport\n"
		"  --svg FILE         plot of READ/WRITE throughput by size\n"
		"Progress goes to stderr. Transports that are not available are reported as\n"
		"such (rdma:// until the RDMA transport is built in; tirpc without libtirpc).\n",
		BENCH_SPIN_MAX, BENCH_SPIN_DEFAULT);
}

/* Sets want[i] for every comma-separated name of @list found in
 * names[0..n-1]; 0, or -1 after saying which name is unknown (@what). */
static int pick(const char *list, const char *const *names, int n, bool *want, const char *what)
{
	char buf[128], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int i;

		for (i = 0; i < n && strcmp(tok, names[i]); i++)
			;
		if (i == n) {
			fprintf(stderr, "rpcrdma-bench: unknown %s '%s' (", what, tok);
			for (i = 0; i < n; i++)
				fprintf(stderr, "%s%s", i ? ", " : "", names[i]);
			fprintf(stderr, ")\n");
			return -1;
		}
		want[i] = true;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"quick", no_argument, NULL, 'q'},
		{"duration", required_argument, NULL, 'd'},
		{"transports", required_argument, NULL, 't'},
		{"workloads", required_argument, NULL, 'w'},
		{"json", required_argument, NULL, 'j'},
		{"svg", required_argument, NULL, 's'},
		{"spin-us", required_argument, NULL, 'S'},
		{"big", no_argument, NULL, 'B'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *json = NULL, *svg = NULL, *list = "rdma,tcp,tirpc,raw";
	const char *wlist = "null,read,write,outstanding,conns,push";
	bool dur_set = false;
	int c, rc = 0;
	uint64_t t0 = fs_now_ns();

	{
		/* the library's reading of the variable: unset, empty or not a
		 * number: the default; "off": 0; capped */
		const char *e = getenv("RPCRDMA_SOFT_SPIN_US");
		char *end;
		unsigned long v;

		if (e && !strcmp(e, "off")) {
			spin_us = 0;
			spin_from = "RPCRDMA_SOFT_SPIN_US";
		} else if (e && *e && e[0] != '-') {
			errno = 0;
			v = strtoul(e, &end, 10);
			if (!errno && !*end) {
				spin_us = v > BENCH_SPIN_MAX ? BENCH_SPIN_MAX : (unsigned)v;
				spin_from = "RPCRDMA_SOFT_SPIN_US";
			}
		}
	}
	while ((c = getopt_long(argc, argv, "qd:t:w:j:s:S:Bh", lopts, NULL)) != -1) {
		switch (c) {
		case 'q': quick = true; break;
		case 'B': big = true; break;
		case 'd': {
			char *end;

			dur = strtod(optarg, &end);
			if (*end || dur < 0.01 || dur > 600) {
				fprintf(stderr, "rpcrdma-bench: --duration wants 0.01..600 seconds\n");
				return 2;
			}
			dur_set = true;
			break;
		}
		case 't': list = optarg; break;
		case 'w': wlist = optarg; break;
		case 'j': json = optarg; break;
		case 's': svg = optarg; break;
		case 'S': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-' || v > BENCH_SPIN_MAX) {
				fprintf(stderr, "rpcrdma-bench: --spin-us wants 0..%u microseconds\n",
					BENCH_SPIN_MAX);
				return 2;
			}
			spin_us = (unsigned)v;
			spin_from = "--spin-us";
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (quick && !dur_set)
		dur = 0.15;
	if (pick(list, tp_name, TP_N, tp_want, "transport") ||
	    pick(wlist, wl_name, WL_N, wl_want, "workload"))
		return 2;
	{
		/* the same budget for the library in this process and in the
		 * servers forked below */
		char v[16];

		snprintf(v, sizeof(v), "%u", spin_us);
		if (setenv("RPCRDMA_SOFT_SPIN_US", v, 1)) {
			fprintf(stderr, "rpcrdma-bench: setenv: %s\n", strerror(errno));
			return 1;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	srcbuf = malloc(MAXIO + 64);
	if (!srcbuf) {
		fprintf(stderr, "rpcrdma-bench: out of memory\n");
		return 1;
	}
	for (uint32_t i = 0; i < MAXIO + 64; i++)
		srcbuf[i] = (uint8_t)(i * 2654435761u >> 24);
	if (wl_want[WL_SCALE]) {
		raise_nofile(big ? 10000 : 1000);
		factory_start();   /* before any thread too */
	}
	/* servers first: fork before this process has any thread */
	for (int tp = 0; tp < TP_N; tp++) {
		if (!tp_want[tp])
			continue;
#if !BENCH_HAVE_TIRPC
		if (tp == TP_TIRPC) {
			snprintf(tp_why[tp], sizeof(tp_why[tp]), "built without libtirpc");
			continue;
		}
#endif
		start_server((enum tp)tp);
		if (!tp_ok[tp])
			fprintf(stderr, "rpcrdma-bench: %s: not available: %s\n", tp_name[tp],
				tp_why[tp]);
	}
	printf("rpcrdma-bench (librpcrdma %s)%s: %.2f s per point, loopback, spin budget %u us "
	       "(from %s; exported RPCRDMA_SOFT_SPIN_US=%u)\n", rpcrdma_version(),
	       quick ? " --quick" : "", dur, spin_us, spin_from, spin_us);
	for (int tp = 0; tp < TP_N; tp++)
		if (tp_want[tp])
			printf("  %-6s %s\n", tp_name[tp], tp_ok[tp] ? "available" : tp_why[tp]);
	run_all();
	compute_ratios();
	print_table();
	for (int tp = 0; tp < TP_N; tp++)
		if (tp_pid[tp] > 0) {
			kill(tp_pid[tp], SIGKILL);
			waitpid(tp_pid[tp], NULL, 0);
		}
	if (json) {
		int e = write_json(json);

		if (e) {
			fprintf(stderr, "rpcrdma-bench: cannot write %s: %s\n", json, strerror(-e));
			rc = 1;
		} else {
			fprintf(stderr, "rpcrdma-bench: wrote %s\n", json);
		}
	}
	if (svg) {
		int e = write_svg(svg);

		if (e) {
			fprintf(stderr, "rpcrdma-bench: cannot write %s: %s\n", svg, strerror(-e));
			rc = 1;
		} else {
			fprintf(stderr, "rpcrdma-bench: wrote %s\n", svg);
		}
	}
	{
		unsigned failed = 0, measured = 0;

		for (unsigned i = 0; i < nrecs; i++) {
			if (!strncmp(recs[i].na, "failed", 6))
				failed++;
			else if (!recs[i].na[0])
				measured++;
		}
		printf("\n%u measurements, %u failed, %.1f s\n", measured, failed,
		       (double)(fs_now_ns() - t0) / 1e9);
		if (failed || !measured)
			rc = 1;
	}
	free(recs);
	free(srcbuf);
	return rc;
}
