/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench inside: the benchmark service's numbers, the transports and
 * workloads, the run's state (set from the options in rpcrdma-bench.c), a
 * record per measured point, a connection of any transport, and the
 * functions the parts of the program call across files (driver.c,
 * transports.c, backend_*.c, sock.c, measure.c, report.c). A tool's private
 * header: librpcrdma's public API only. */
#ifndef RPCRDMA_TOOLS_BENCH_H
#define RPCRDMA_TOOLS_BENCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fileservice.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"
#include "rpcrdma/xdr.h"

/* libtirpc where its header is found (backend_tirpc.c; "not available"
 * otherwise) */
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

enum tp { TP_RDMA, TP_TCP, TP_TIRPC, TP_RAW, TP_N };
enum wl { WL_NULL, WL_READ, WL_WRITE, WL_OUTST, WL_CONNS, WL_PUSH, WL_SCALE, WL_N };
#define OUT_SIZE 4096u    /* READ size of the outstanding-calls workload */
#define CONN_SIZE 65536u  /* READ size of the connections workload */

/* Spin-then-sleep budget in microseconds (--spin-us, else
 * RPCRDMA_SOFT_SPIN_US, else 20): exported as RPCRDMA_SOFT_SPIN_US to the
 * library in both processes and used by the raw "pingspin" floor. */
#ifdef RPCRDMA_SPIN_US_MAX
#define BENCH_SPIN_MAX RPCRDMA_SPIN_US_MAX
#else
#define BENCH_SPIN_MAX 1000u
#endif
#define BENCH_SPIN_DEFAULT 20u

/* ---- the run's state (rpcrdma-bench.c) ---- */
extern const char *const tp_name[TP_N];
extern bool tp_want[TP_N];        /* --transports */
extern bool wl_want[WL_N];        /* --workloads */
extern bool tp_ok[TP_N];          /* the server started (and connections open) */
extern char tp_why[TP_N][160];    /* why not */
extern int tp_port[TP_N];         /* the server's loopback port */
extern pid_t tp_pid[TP_N];        /* the server's process */
extern double dur;                /* seconds per point */
extern bool quick;
extern unsigned spin_us;
/* scale: the rounds each point is measured in (--rounds) */
#define BENCH_ROUNDS_MAX 32u
#define BENCH_ROUNDS_DEFAULT 5u
#define BENCH_SLICE_MIN 0.02   /* seconds: the shortest scale slice allowed */
extern unsigned bench_rounds;
/* the load average (1, 5, 15 minutes) when the run started and when it
 * ended; < 0: unknown */
extern double load_start[3], load_end[3];
extern uint8_t *srcbuf;  /* MAXIO bytes of pattern (client WRITE data, server READ data) */

/* ---- records (measure.c) ---- */
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
	int64_t cpu_c0, cpu_s0;  /* CPU ns at the start of the measured part */
	int64_t cpu_c_ns, cpu_s_ns;  /* CPU ns of the parts measured so far; < 0: unknown */
	/* scale: idle cost of each connection (client: this process; server:
	 * its process), the threads of each process with the connections
	 * open, and the p50 of connect + first NULL call; < 0: n/a */
	double client_rss_per_conn, server_rss_per_conn, fds_per_conn, server_fds_per_conn;
	double connect_p50_us;
	long client_threads, server_threads;
	/* scale: ops/s of each round's slice, and each connect round's p50 */
	unsigned rounds, connect_rounds;
	double round_ops_s[BENCH_ROUNDS_MAX], round_connect_us[BENCH_ROUNDS_MAX];
	char na[160];        /* non-empty: not available, why */
};

extern struct rec *recs;
extern unsigned nrecs;

/* Latency samples of one measured interval (any thread may add). */
struct lat {
	uint64_t *v;
	uint64_t *at;      /* with --ops: when each sample's operation ended */
	uint32_t *tid;     /* with --ops: the thread that made it */
	size_t n, cap;
	pthread_mutex_t lock;
};

/* --ops FILE: every operation of every measured point (NULL: not asked) */
extern FILE *ops_file;

/* A new record, not measured yet (ratios, CPU: -1). Exits when out of memory. */
struct rec *rec_new(const char *wl, enum tp tp, const char *variant, uint32_t size,
		    unsigned outst, unsigned conns);
void lat_init(struct lat *l);
void lat_add(struct lat *l, uint64_t ns);
/* Fills the record's statistics from the latencies and the totals, and
 * frees the samples. */
void lat_finish(struct lat *l, struct rec *r, uint64_t ops, uint64_t bytes, double secs);
/* Frees the samples of a lat that lat_finish will not take (none: nothing). */
void lat_free(struct lat *l);
/* Appends the samples of @src to @dst (as many as fit) and frees @src's. */
void lat_move(struct lat *dst, struct lat *src);
/* Right before a measured part of @r's interval. */
void cpu_begin(struct rec *r);
/* Right after a part: adds its CPU time to @r's. */
void cpu_pause(struct rec *r);
/* After the last part's cpu_pause: CPU per operation over @ops operations. */
void cpu_per_op(struct rec *r, uint64_t ops);
/* Right after a single measured interval (cpu_pause + cpu_per_op). */
void cpu_end(struct rec *r, uint64_t ops);
/* CPU ns of this process (@pid 0) or of the child @pid; -1: unknown. */
int64_t cpu_ns(pid_t pid);

/* ---- connections of any transport (transports.c) ---- */
/* How a raw connection's receiver waits ("pingspin": spin, then sleep). */
struct spinner {
	unsigned us;      /* 0: never spin */
	unsigned miss, skip;
};

/* One synchronous operation on a connection of any transport. */
struct conn {
	enum tp tp;
	struct rpcrdma_client *rc;
	int fd;                 /* raw */
	struct spinner spin;    /* raw: how it waits ("pingspin": both ends spin) */
#if BENCH_HAVE_TIRPC
	CLIENT *tc;
#endif
	uint8_t *sink;          /* conn_sink bytes (raw: at least a NULL's) */
};
/* Bytes of the result sink of the next connections (MAXIO + 64); 0: none
 * (scale: allocated later, so that the idle cost measured is the library's). */
extern size_t conn_sink;

/* RPC message sizes on TCP (record mark + RFC 5531 headers, AUTH_NONE) */
#define CALL_HDR (4u + 40u)
#define REPLY_HDR (4u + 24u)
#define XDR_ALIGN(n) (((n) + 3u) & ~3u)

/* Forks the server of @tp; the child reports "port" or "error errno".
 * Sets tp_ok, tp_port, tp_pid or tp_why. */
void start_server(enum tp tp);
/* In a forked child: starts the server of @tp (@scale: connection limits out
 * of the way, every client comes from 127.0.0.1), writes "port" or "error
 * errno" to @wfd and serves until killed. Never returns. */
void serve_child(enum tp tp, int wfd, bool scale) __attribute__((noreturn));
/* A forked child dies with the benchmark. */
void prctl_parent_death(void);
int conn_open(struct conn *c, enum tp tp);
void conn_close(struct conn *c);
int conn_op(struct conn *c, int op, uint32_t size);

/* ---- loopback sockets (sock.c) ---- */
int listen_loopback(int *port);
int connect_loopback(int port);
/* Reads exactly @n bytes: 0, or -1 on EOF or error (@sp: spin first). */
int spin_read_full(int fd, void *buf, size_t n, struct spinner *sp);
int read_full(int fd, void *buf, size_t n);
int write_full(int fd, const void *buf, size_t n);

/* ---- backends: librpcrdma rdma:// and tcp:// (backend_rpcrdma.c) ---- */
extern uint32_t conn_inline;   /* inline size of the next connections; 0: default */
int rr_server(const char *scheme, int *port, bool scale);
int rr_open(struct conn *c);
int rr_op(struct conn *c, int op, uint32_t size);
/* rdma://: the client's network round trips so far (messages sent, Read
 * chunks pulled, Commits); 0 for other transports or when unknown. */
uint64_t rtrips_now(struct conn *c);
int run_push(struct conn *c, uint32_t size, bool mem, struct rec *r);
int run_outstanding_rr(enum tp tp, unsigned window, uint32_t size, struct rec *r);
/* Asynchronous calls for the duration (until @end), one in flight per slot:
 * @op 0 NULL, 1 READ of @size into the slot's sink. Any thread may add to
 * @l, @ops, @err under @lock. */
struct actx {
	int op;
	uint32_t size;
	uint64_t end;
	struct lat l;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	unsigned inflight;
	uint64_t ops;
	int err;
};
struct aslot {
	struct actx *a;                /* set by async_run */
	struct rpcrdma_client *clnt;
	uint8_t *sink;                 /* READ: @size bytes */
	uint64_t t0;
};
void actx_init(struct actx *a, int op, uint32_t size);
void actx_fini(struct actx *a);
/* Starts a call on each of the @n slots and waits until every slot has
 * stopped (duration over, or an error): 0 or the first error. */
int async_run(struct aslot *slots, unsigned n, struct actx *a);

/* ---- libtirpc (backend_tirpc.c, when BENCH_HAVE_TIRPC) ---- */
int tirpc_server(int lfd);
int tirpc_open(struct conn *c);
int tirpc_op(struct conn *c, int op, uint32_t size);

/* ---- raw TCP (backend_raw.c) ---- */
void raw_server(int lfd);
int raw_open(struct conn *c);
int conn_set_spin(struct conn *c, unsigned us);
int raw_op(struct conn *c, int op, uint32_t size);
int raw_stream(int port, uint32_t size, struct rec *r);
int run_outstanding_raw(unsigned window, uint32_t size, struct rec *r);

/* ---- the driver (driver.c) ---- */
/* One line of progress on stderr, "[i/n] ..." */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void na(struct rec *r, const char *why);
/* @rc != 0: the record says "failed: ..." */
void record_err(struct rec *r, int rc);
int run_sync(struct conn *c, int op, uint32_t size, struct rec *r);
int run_conns(enum tp tp, unsigned nconn, int op, uint32_t size, bool spin, struct rec *r);
void run_all(void);

/* ---- the scale workload (scale.c) ---- */
extern bool big;   /* --big: 10,000 connections too */
/* Before any thread: the descriptor limit raised, the server factory forked. */
void scale_setup(void);
/* --conns LIST: only those of 1,10,100,1000,10000 (comma-separated);
 * 0 or -EINVAL (anything else, empty, a repeat). */
int scale_conns_parse(const char *list);
/* How many points run_scale measures per transport. */
unsigned scale_points(void);
void run_scale(void);

/* ---- the report (report.c) ---- */
/* The load average now into @l (1, 5, 15 minutes; -1 each when unknown). */
void loadavg_read(double l[3]);
void fmt_size(char *b, size_t cap, uint32_t s);
void compute_ratios(void);
void print_table(void);
/* The scale records' idle costs (after the table). */
void print_scale(void);
int write_json(const char *path);
int write_svg(const char *path);

#endif
