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
 * [uint32 message size] + total bytes, acknowledged with 4 bytes.
 *
 * The program in parts (tools/bench/, declarations in bench.h): this file
 * (options, the run's state, main); driver.c (the workloads and the
 * measurement loops any transport shares); transports.c (servers forked,
 * connections of any transport); one backend per transport,
 * backend_rpcrdma.c (rdma:// and tcp://), backend_tirpc.c, backend_raw.c
 * (with sock.c: loopback sockets, spin-then-sleep reads); measure.c
 * (records, latency percentiles, CPU time per operation); report.c (ratios,
 * table, JSON, SVG). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

const char *const tp_name[TP_N] = {"rdma", "tcp", "tirpc", "raw"};
static const char *const wl_name[WL_N] = {"null", "read", "write", "outstanding", "conns", "push",
					  "scale"};
bool tp_want[TP_N];
bool wl_want[WL_N];
bool tp_ok[TP_N];
char tp_why[TP_N][160];
int tp_port[TP_N];
pid_t tp_pid[TP_N];
double dur = 1.0;
bool quick;
unsigned spin_us = BENCH_SPIN_DEFAULT;
unsigned bench_rounds = BENCH_ROUNDS_DEFAULT;
double load_start[3] = {-1, -1, -1}, load_end[3] = {-1, -1, -1};
static const char *spin_from = "default";
uint8_t *srcbuf;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rpcrdma-bench [--quick] [--duration SECS] [--transports LIST]\n"
		"                     [--workloads LIST] [--spin-us N] [--json FILE] [--svg FILE]\n"
		"                     [--ops FILE] [--rounds K] [--conns LIST] [--help]\n"
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
		"  --conns LIST       scale: only these connection counts, a comma-separated\n"
		"                     subset of 1,10,100,1000,10000 (default 1,10,100,1000;\n"
		"                     with --big, 10000 too); 10000 raises the descriptor\n"
		"                     limit as --big does\n"
		"  --rounds K         scale: measure each point in K rounds, 1..%u (default\n"
		"                     %u): the connects in K batches and the NULL and READ\n"
		"                     points in K slices of SECS/K each, alternating the\n"
		"                     transports (order rotated each round); reports the\n"
		"                     ratios of every round and their median, min and max\n"
		"                     (the total measured time per point stays SECS)\n"
		"  --spin-us N        spin-then-sleep budget, 0..%u microseconds: exported as\n"
		"                     RPCRDMA_SOFT_SPIN_US to the library (client and servers)\n"
		"                     and used by the raw \"pingspin\" floor, whose both ends\n"
		"                     poll with recv(MSG_DONTWAIT) that long before blocking;\n"
		"                     0: no spinning anywhere (default: RPCRDMA_SOFT_SPIN_US\n"
		"                     if set, else %u)\n"
		"  --json FILE        one JSON record per workload and transport\n"
		"  --svg FILE         plot of READ/WRITE throughput by size\n"
		"  --ops FILE         every measured operation, one line each: workload,\n"
		"                     transport, connections, thread id, start (ns since the\n"
		"                     point's first operation started) and latency (ns)\n"
		"Environment: RPCRDMA_PROGRESS_THREADS sets the progress loops of this\n"
		"process and, unless RPCRDMA_BENCH_SERVER_PROGRESS_THREADS is set, of the\n"
		"servers too; RPCRDMA_BENCH_SERVER_PROGRESS_THREADS=N sets the servers' alone\n"
		"(empty: their default).\n"
		"The JSON records carry the load average at the start and the end of the run.\n"
		"Progress goes to stderr. Transports that are not available are reported as\n"
		"such (rdma:// until the RDMA transport is built in; tirpc without libtirpc).\n",
		BENCH_ROUNDS_MAX, BENCH_ROUNDS_DEFAULT, BENCH_SPIN_MAX, BENCH_SPIN_DEFAULT);
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

/* The spin budget from RPCRDMA_SOFT_SPIN_US, read as the library reads it:
 * unset, empty or not a number: the default; "off": 0; capped. */
static void spin_from_env(void)
{
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

/* --json and --svg files written (when asked for), and the closing line:
 * 0, or 1 when a file could not be written, a measurement failed or none
 * was made. @t0: when the run started. */
static int write_outputs(const char *json, const char *svg, uint64_t t0)
{
	int rc = 0;

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
		printf("\n%u measurements, %u failed, %.1f s; load average %.2f at the start, "
		       "%.2f at the end\n", measured, failed, (double)(fs_now_ns() - t0) / 1e9,
		       load_start[0], load_end[0]);
		if (failed || !measured)
			rc = 1;
	}
	return rc;
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
		{"ops", required_argument, NULL, 'o'},
		{"spin-us", required_argument, NULL, 'S'},
		{"big", no_argument, NULL, 'B'},
		{"rounds", required_argument, NULL, 'R'},
		{"conns", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *json = NULL, *svg = NULL, *list = "rdma,tcp,tirpc,raw";
	const char *wlist = "null,read,write,outstanding,conns,push";
	bool dur_set = false;
	int c, rc = 0;
	uint64_t t0 = fs_now_ns();

	spin_from_env();
	while ((c = getopt_long(argc, argv, "qd:t:w:j:s:o:S:BR:C:h", lopts, NULL)) != -1) {
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
		case 'o':
			if (ops_file)
				fclose(ops_file);
			ops_file = fopen(optarg, "w");
			if (!ops_file) {
				fprintf(stderr, "rpcrdma-bench: %s: %s\n", optarg, strerror(errno));
				return 2;
			}
			break;
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
		case 'R': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-' || v < 1 ||
			    v > BENCH_ROUNDS_MAX) {
				fprintf(stderr, "rpcrdma-bench: --rounds wants 1..%u\n",
					BENCH_ROUNDS_MAX);
				return 2;
			}
			bench_rounds = (unsigned)v;
			break;
		}
		case 'C':
			if (scale_conns_parse(optarg)) {
				fprintf(stderr, "rpcrdma-bench: --conns wants a comma-separated subset "
					"of 1,10,100,1000,10000, not '%s'\n", optarg);
				return 2;
			}
			break;
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
	if (wl_want[WL_SCALE] && dur / bench_rounds < BENCH_SLICE_MIN) {
		fprintf(stderr, "rpcrdma-bench: a scale slice (--duration / --rounds = %.4f s) "
			"under %.2f s measures little but its start and end: fewer rounds or a "
			"longer --duration\n", dur / bench_rounds, BENCH_SLICE_MIN);
		return 2;
	}
	loadavg_read(load_start);
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
	if (wl_want[WL_SCALE])
		scale_setup();   /* forks too: before any thread */
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
	       "(from %s; exported RPCRDMA_SOFT_SPIN_US=%u); load average %.2f\n",
	       rpcrdma_version(), quick ? " --quick" : "", dur, spin_us, spin_from, spin_us,
	       load_start[0]);
	if (wl_want[WL_SCALE])
		printf("scale: %u rounds per point, slices of %.3f s%s\n", bench_rounds,
		       dur / bench_rounds,
		       bench_rounds > 1 && dur / bench_rounds < 0.2
			       ? " (under 0.2 s, libtirpc and raw at one connection lose whole "
				 "slices to slow wake-ups on a loaded machine: docs/PERFORMANCE.md)"
			       : "");
	for (int tp = 0; tp < TP_N; tp++)
		if (tp_want[tp])
			printf("  %-6s %s\n", tp_name[tp], tp_ok[tp] ? "available" : tp_why[tp]);
	run_all();
	loadavg_read(load_end);
	compute_ratios();
	print_table();
	for (int tp = 0; tp < TP_N; tp++)
		if (tp_pid[tp] > 0) {
			kill(tp_pid[tp], SIGKILL);
			waitpid(tp_pid[tp], NULL, 0);
		}
	rc = write_outputs(json, svg, t0);
	free(recs);
	free(srcbuf);
	return rc;
}
