/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's driver: the workloads (NULL latency, READ and WRITE by
 * size, outstanding calls, connections, pull versus push mode) over every
 * transport asked for, in a fixed order, one record per point; the
 * measurement loops that any transport shares (sequential operations on one
 * connection, a thread per connection); progress on stderr. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static unsigned progress_i, progress_n;

void progress(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "[%3u/%3u] ", ++progress_i, progress_n);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
}

/* One point of sequential operations on one connection, measured in one or
 * more parts: the latencies, operations, wall and CPU time and round trips of
 * the parts add up into the point's record. */
struct sync_pt {
	struct conn *c;
	unsigned ri;      /* recs[ri]: an index, as rec_new may move the records */
	char what[96];    /* progress line */
	int op;
	uint32_t size;
	struct lat l;
	uint64_t ops, ns, trips;
	int rc;
};

static void sync_begin(struct sync_pt *p, struct conn *c, int op, uint32_t size, struct rec *r)
{
	memset(p, 0, sizeof(*p));
	p->c = c;
	p->ri = (unsigned)(r - recs);
	p->op = op;
	p->size = size;
	lat_init(&p->l);
}

/* A part of @secs (at least 3 operations) after a warm-up of a tenth of
 * that (at least 2): without it the first point of a run (READ 1K over the
 * first transport) pays for the forked servers' and this process's first
 * touches and the CPUs' wake-up alone, and its throughput ratio with them. */
static void sync_part(struct sync_pt *p, double secs)
{
	struct rec *r = &recs[p->ri];
	uint64_t t0, end, trips0, ops = 0;
	int rc = 0;

	if (p->rc)
		return;
	end = fs_now_ns() + (uint64_t)(secs * 1e8);
	for (int i = 0; !rc && (i < 2 || fs_now_ns() < end); i++)
		rc = conn_op(p->c, p->op, p->size);
	if (rc) {
		p->rc = rc;
		return;
	}
	trips0 = rtrips_now(p->c);
	cpu_begin(r);
	t0 = fs_now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	do {
		uint64_t a = fs_now_ns();

		rc = conn_op(p->c, p->op, p->size);
		if (rc)
			break;
		lat_add(&p->l, fs_now_ns() - a);
		ops++;
	} while (fs_now_ns() < end || ops < 3);
	cpu_pause(r);
	p->ns += fs_now_ns() - t0;
	p->ops += ops;
	p->trips += rtrips_now(p->c) - trips0;
	p->rc = rc;
}

/* Fills the record from the parts; returns the first error of a part. */
static int sync_end(struct sync_pt *p)
{
	struct rec *r = &recs[p->ri];

	cpu_per_op(r, p->ops);
	lat_finish(&p->l, r, p->ops, p->ops * (uint64_t)p->size, (double)p->ns / 1e9);
	if (p->c->tp == TP_RDMA && p->ops)
		r->rtrips = (double)p->trips / (double)p->ops;
	return p->rc;
}

/* Sequential ops on one connection for the duration (at least 3 ops). */
int run_sync(struct conn *c, int op, uint32_t size, struct rec *r)
{
	struct sync_pt p;

	sync_begin(&p, c, op, size, r);
	sync_part(&p, dur);
	return sync_end(&p);
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
int run_conns(enum tp tp, unsigned nconn, int op, uint32_t size, bool spin, struct rec *r)
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

void na(struct rec *r, const char *why)
{
	size_t n = strnlen(why, sizeof(r->na) - 1);

	memcpy(r->na, why, n);
	r->na[n] = '\0';
}

void record_err(struct rec *r, int rc)
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

/* How many points the workloads asked for measure: the count progress() shows. */
static void plan_progress(size_t nsizes, size_t nwins, size_t ncons)
{
	unsigned nt = 0, raw = tp_ok[TP_RAW] && tp_want[TP_RAW];
	int tp;

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
		progress_n += scale_points() * nt;
}

/* The points of one size, one per transport (and the raw "pingspin" one),
 * measured in two halves: in transport order, then in reverse order, so
 * that no transport is always measured first or right after a given one
 * (A B B A). The order otherwise moved the ratios at 1 KiB by a few per
 * cent (docs/PERFORMANCE.md). */
static void sync_points(struct sync_pt *pts, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		progress("%s", pts[i].what);
		sync_part(&pts[i], dur / 2);
	}
	for (i = n; i-- > 0;)
		sync_part(&pts[i], dur / 2);
	for (i = 0; i < n; i++)
		record_err(&recs[pts[i].ri], sync_end(&pts[i]));
}

/* NULL latency and READ/WRITE by size, 1 outstanding: one connection per
 * transport for all of them, and the raw "pingspin" one; each size's
 * synchronous points in both orders (sync_points), then the raw stream. */
static void run_sizes(const uint32_t *sizes, size_t nsizes)
{
	struct conn conn[TP_N], spinc;   /* spinc: the raw "pingspin" connection */
	struct sync_pt pts[TP_N + 1];
	bool open_ok[TP_N], spin_ok = false;
	char sz[16], spin_why[160] = "";
	int tp, rc;

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
	/* op 0: NULL latency; 1, 2: READ, WRITE by size */
	for (int op = 0; op <= 2; op++) {
		if (!wl_want[op == 0 ? WL_NULL : op == 1 ? WL_READ : WL_WRITE])
			continue;
		for (size_t i = 0; i < (op ? nsizes : 1); i++) {
			const char *wl = op == 0 ? "null" : op == 1 ? "read" : "write";
			const char *opn = op == 0 ? "null latency" : op == 1 ? "READ" : "WRITE";
			uint32_t size = op ? sizes[i] : 0;
			size_t n = 0;

			fmt_size(sz, sizeof(sz), size);
			for (tp = 0; tp < TP_N; tp++) {
				struct rec *r;

				if (!tp_want[tp])
					continue;
				r = rec_new(wl, (enum tp)tp, tp == TP_RAW ? "pingpong" : NULL, size,
					    1, 1);
				if (!open_ok[tp]) {
					na(r, tp_why[tp]);
					continue;
				}
				sync_begin(&pts[n], &conn[tp], op, size, r);
				snprintf(pts[n++].what, sizeof(pts[0].what), "%s%s%s over %s", opn,
					 op ? " " : "", op ? sz : "", tp_name[tp]);
				if (tp != TP_RAW)
					continue;
				r = rec_new(wl, TP_RAW, "pingspin", size, 1, 1);
				if (!spin_ok) {
					na(r, spin_why);
					continue;
				}
				sync_begin(&pts[n], &spinc, op, size, r);
				snprintf(pts[n++].what, sizeof(pts[0].what),
					 "%s%s%s over raw, spin then sleep (%u us)", opn, op ? " " : "",
					 op ? sz : "", spin_us);
			}
			sync_points(pts, n);
			if (op && tp_want[TP_RAW] && open_ok[TP_RAW]) {
				struct rec *r = rec_new(wl, TP_RAW, "stream", size, 1, 1);

				progress("raw stream of %s messages", sz);
				record_err(r, raw_stream(tp_port[TP_RAW], size, r));
			}
		}
	}
	for (tp = 0; tp < TP_N; tp++)
		if (open_ok[tp])
			conn_close(&conn[tp]);
	if (spin_ok)
		conn_close(&spinc);
}

/* READ 4K with 1..64 calls outstanding on one connection. */
static void run_outstanding_all(const unsigned *wins, size_t nwins)
{
	int tp, rc;

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
}

/* READ 64K on 1..8 connections, one call each. */
static void run_conns_all(const unsigned *cons, size_t ncons)
{
	int tp;

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
}

/* Pull-mode WRITE, durable pull-mode WRITE and push-mode Write + Commit of
 * 4 KiB. */
static void run_push_all(void)
{
	int tp, rc;

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
}

/* Every workload asked for over every transport asked for, in a fixed
 * order: one record each (rec_new), measured or saying why not. */
void run_all(void)
{
	const uint32_t *sizes = quick ? sizes_quick : sizes_full;
	size_t nsizes = quick ? N(sizes_quick) : N(sizes_full);
	const unsigned *wins = quick ? win_quick : win_full;
	size_t nwins = quick ? N(win_quick) : N(win_full);
	const unsigned *cons = quick ? conns_quick : conns_full;
	size_t ncons = quick ? N(conns_quick) : N(conns_full);

	plan_progress(nsizes, nwins, ncons);
	run_sizes(sizes, nsizes);
	run_outstanding_all(wins, nwins);
	run_conns_all(cons, ncons);
	run_push_all();
	if (wl_want[WL_SCALE])
		run_scale();
}
