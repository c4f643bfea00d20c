/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's report: the ratios of each record to the raw TCP floor
 * and to libtirpc measured in the same run (scale: also round by round,
 * with their median, min and max), the table on stdout with its summary
 * lines, one JSON record per point (--json) with the run's load average,
 * and an SVG plot of READ and WRITE throughput by message size (--svg). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

void fmt_size(char *b, size_t cap, uint32_t s)
{
	if (s >= 1048576 && s % 1048576 == 0)
		snprintf(b, cap, "%uM", s / 1048576);
	else if (s >= 1024 && s % 1024 == 0)
		snprintf(b, cap, "%uK", s / 1024);
	else
		snprintf(b, cap, "%u", s);
}

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

void loadavg_read(double l[3])
{
	FILE *f = fopen("/proc/loadavg", "r");

	l[0] = l[1] = l[2] = -1;
	if (!f)
		return;
	if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
		l[0] = l[1] = l[2] = -1;
	fclose(f);
}

/* scale: the baselines a record's rounds are compared with, in the order
 * of the JSON fields and of the summary lines */
enum { BASE_TCP, BASE_TIRPC, BASE_RAW, BASE_N };
static const char *const base_name[BASE_N] = {"tcp", "tirpc", "raw"};
static const enum tp base_tp[BASE_N] = {TP_TCP, TP_TIRPC, TP_RAW};

/* Round by round, @r over @base (@connect: the connect p50s, else ops/s)
 * into @out: how many, 0 when there is no such baseline, it is @r's own
 * transport or the two were not measured in the same number of rounds. */
static unsigned round_ratios(const struct rec *r, const struct rec *base, bool connect,
			     double out[BENCH_ROUNDS_MAX])
{
	unsigned k = connect ? r->connect_rounds : r->rounds;

	if (!base || base->tp == r->tp || k != (connect ? base->connect_rounds : base->rounds))
		return 0;
	for (unsigned i = 0; i < k; i++) {
		double a = connect ? r->round_connect_us[i] : r->round_ops_s[i];
		double b = connect ? base->round_connect_us[i] : base->round_ops_s[i];

		if (b <= 0 || a < 0)
			return 0;
		out[i] = a / b;
	}
	return k;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median (of an even count: the mean of the middle two), min and max of
 * @n > 0 values. */
static void spread(const double *v, unsigned n, double *med, double *min, double *max)
{
	double s[BENCH_ROUNDS_MAX];

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_dbl);
	*med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	*min = s[0];
	*max = s[n - 1];
}

/* The scale record of @tp like @r (same operation and N); NULL: none. */
static struct rec *scale_peer(const struct rec *r, enum tp tp)
{
	return find("scale", tp, r->variant, r->size, 1, r->conns);
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

void compute_ratios(void)
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

/* "median [min-max]" of @r over @base round by round, or "-". */
static void fmt_spread(char *b, size_t cap, const struct rec *r, const struct rec *base,
		       bool connect)
{
	double v[BENCH_ROUNDS_MAX], med, min, max;
	unsigned k = r ? round_ratios(r, base, connect, v) : 0;

	if (!k) {
		snprintf(b, cap, "-");
		return;
	}
	spread(v, k, &med, &min, &max);
	snprintf(b, cap, "%.2f [%.2f-%.2f]", med, min, max);
}

/* rdma's NULL record @r at one N: its ratios round by round, median
 * [min-max], to each baseline, with READ 64K's and connect's. */
static void print_rounds(const struct rec *r)
{
	const struct rec *rd = find("scale", TP_RDMA, "read64k", CONN_SIZE, 1, r->conns);
	char a[48], b[48], c[48], d[48], e[48];

	fmt_spread(a, sizeof(a), r, scale_peer(r, TP_TCP), false);
	fmt_spread(b, sizeof(b), r, scale_peer(r, TP_TIRPC), false);
	fmt_spread(c, sizeof(c), r, scale_peer(r, TP_RAW), false);
	fmt_spread(d, sizeof(d), rd, rd ? scale_peer(rd, TP_TIRPC) : NULL, false);
	fmt_spread(e, sizeof(e), r, scale_peer(r, TP_TCP), true);
	printf("%14s %u rounds, rdma over each, median [min-max]: NULL / tcp:// %s, / libtirpc "
	       "%s, / raw %s; READ 64K / libtirpc %s; connect / tcp:// %s\n", "", r->rounds, a,
	       b, c, d, e);
}

/* The scale workload's idle costs and its ratios to tcp:// (rdma only). */
void print_scale(void)
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
			       "%9s %8s %8s %11s\n", "xprt", "conns", "cli KiB/conn",
			       "srv KiB/conn", "cli fd/c", "srv fd/c", "cli thr", "srv thr",
			       "connect p50");
			head = true;
		}
		t = find("scale", TP_TCP, "null", 0, 1, r->conns);
		printf("%-5s %6u %12.1f %12.1f %9.2f %9.2f %8ld %8ld %9.0fus\n", tp_name[r->tp],
		       r->conns, r->client_rss_per_conn, r->server_rss_per_conn, r->fds_per_conn,
		       r->server_fds_per_conn, r->client_threads, r->server_threads,
		       r->connect_p50_us);
		if (r->tp == TP_RDMA && t && t->connect_p50_us > 0)
			printf("%61s connect %.2fx tcp://; NULL ops/s %.2fx tcp://\n", "",
			       r->connect_p50_us / t->connect_p50_us,
			       t->ops_s > 0 ? r->ops_s / t->ops_s : -1.0);
		if (r->tp == TP_RDMA && r->rounds > 1)
			print_rounds(r);
	}
}

void print_table(void)
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

/* ", "NAME": [v, ...]" with @n values */
static void json_list(FILE *f, const char *name, const double *v, unsigned n)
{
	fprintf(f, ", \"%s\": [", name);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%s%.4f", i ? ", " : "", v[i]);
	fprintf(f, "]");
}

/* ", "PREFIX_rounds": [...], "PREFIX_median": m, "PREFIX_min": ...,
 * "PREFIX_max": ..." of @r over @base (all null when not comparable). */
static void json_ratio_rounds(FILE *f, const char *prefix, const struct rec *r,
			      const struct rec *base, bool connect)
{
	double v[BENCH_ROUNDS_MAX], med, min, max;
	unsigned k = round_ratios(r, base, connect, v);
	char name[48];

	snprintf(name, sizeof(name), "%s_rounds", prefix);
	if (!k) {
		fprintf(f, ", \"%s\": null, \"%s_median\": null, \"%s_min\": null, "
			"\"%s_max\": null", name, prefix, prefix, prefix);
		return;
	}
	spread(v, k, &med, &min, &max);
	json_list(f, name, v, k);
	fprintf(f, ", \"%s_median\": %.4f, \"%s_min\": %.4f, \"%s_max\": %.4f", prefix, med,
		prefix, min, prefix, max);
}

/* A scale record's rounds: the per-round figures, and each per-round
 * ratio to each baseline with their median, min and max. */
static void json_rounds(FILE *f, const struct rec *r)
{
	fprintf(f, ", \"rounds\": %u", r->rounds);
	json_list(f, "round_ops_per_s", r->round_ops_s, r->rounds);
	fprintf(f, ", \"connect_rounds\": %u", r->connect_rounds);
	json_list(f, "round_connect_p50_us", r->round_connect_us, r->connect_rounds);
	for (int b = 0; b < BASE_N; b++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "ratio_%s", base_name[b]);
		json_ratio_rounds(f, prefix, r, scale_peer(r, base_tp[b]), false);
	}
	json_ratio_rounds(f, "connect_ratio_tcp", r, scale_peer(r, TP_TCP), true);
}

/* The run's load average, start and end, in every record. */
static void json_load(FILE *f)
{
	fprintf(f, ", \"loadavg_start\": [%.2f, %.2f, %.2f], \"loadavg_end\": [%.2f, %.2f, %.2f]",
		load_start[0], load_start[1], load_start[2], load_end[0], load_end[1], load_end[2]);
}

int write_json(const char *path)
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
		if (!strcmp(r->workload, "scale"))
			json_rounds(f, r);
		json_load(f);
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
int write_svg(const char *path)
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
