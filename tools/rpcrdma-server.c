/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-server: serves the example file service (tools/fileservice/fileservice.h:
 * READ with its data as a Write chunk, WRITE with its data as a Read chunk,
 * LIST with large replies, COMMIT, PUSH_OPEN) over a directory, with the
 * librpcrdma RPC server API (RFC 5531 over RPC-over-RDMA v1, RFC 8166, or
 * over TCP with record marking). Calls for other programs get PROG_UNAVAIL
 * from the RPC layer; NULL is answered for FS_PROG. SIGINT/SIGTERM shut
 * down gracefully (requests in flight are finished). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileservice.h"
#include "rpcrdma/stats.h"
#include "faults.h"
#include "hint.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rpcrdma-server --export DIR [--listen ADDR:PORT] [--transport auto|rdma|tcp]\n"
		"                      [--threads N] [--max-conns N] [--max-conns-per-host N]\n"
		"                      [--max-handshakes N] [--no-defer-accept] [--idle-timeout SEC]\n"
		"                      [--send-timeout SEC] [--quiet] [--help]\n"
		"\n"
		"Serves the example file service (program 0x%08x, version %u) over DIR.\n"
		"  --export DIR        directory to export (required); paths never escape it\n"
		"  --listen ADDR:PORT  address to listen on (default 0.0.0.0:%d; port 0 picks one)\n"
		"  --transport T       rdma (RPC-over-RDMA on the software iWARP provider), tcp\n"
		"                      (RPC record marking), or auto (default: rdma if this build\n"
		"                      has it, else tcp)\n"
		"  --threads N         worker threads (default 4)\n"
		"Limits (a connection over them is refused; docs/security.md \"Limits\"):\n"
		"  --max-conns N       connections at once (default 1024)\n"
		"  --max-conns-per-host N\n"
		"                      connections from one IP address (default 64)\n"
		"  --max-handshakes N  rdma: TCP connections still waiting for their MPA\n"
		"                      Request; one more closes the oldest (default 128)\n"
		"  --no-defer-accept   rdma: accept a TCP connection at once, not when its\n"
		"                      MPA Request comes (by default the kernel holds a\n"
		"                      peer that sends nothing for 15 s first: TCP_DEFER_ACCEPT)\n"
		"  --idle-timeout SEC  close a connection that sent nothing for SEC seconds\n"
		"                      with nothing in progress (default 360; 0: never)\n"
		"  --send-timeout SEC  rdma: close a connection whose Sends made no progress\n"
		"                      for SEC seconds (1..3600, default 60); Replies left\n"
		"                      unproven for half of it get a probe (a zero-length\n"
		"                      RDMA Write). Sets RPCRDMA_SERVER_SEND_TIMEOUT_MS, the\n"
		"                      library's test knob (docs/api.md \"Environment\")\n"
		"  --quiet             no shutdown summary (calls served, connection counters,\n"
		"                      and over rdma:// the fault counters)\n"
		"The first line on stdout is \"listening on URL\" once the server is ready.\n",
		FS_PROG, FS_VERS, FS_DEFAULT_PORT);
}

/* An option's unsigned value in [@lo, @hi]: 0, or -1 after the message. */
static int parse_count(const char *opt, const char *arg, unsigned long lo, unsigned long hi,
		       unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || *out < lo || *out > hi) {
		fprintf(stderr, "rpcrdma-server: %s wants %lu..%lu, got '%s'\n", opt, lo, hi, arg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"export", required_argument, NULL, 'e'},
		{"listen", required_argument, NULL, 'l'},
		{"transport", required_argument, NULL, 't'},
		{"threads", required_argument, NULL, 'n'},
		{"max-conns", required_argument, NULL, 'C'},
		{"max-conns-per-host", required_argument, NULL, 'H'},
		{"max-handshakes", required_argument, NULL, 'S'},
		{"idle-timeout", required_argument, NULL, 'I'},
		{"send-timeout", required_argument, NULL, 'T'},
		{"no-defer-accept", no_argument, NULL, 'D'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *export_dir = NULL, *transport = "auto";
	char listen[300], url[340];
	struct rpcrdma_server_opts so;
	struct rpcrdma_server *srv = NULL;
	struct fs_service svc;
	sigset_t sigs;
	unsigned long threads = 4, max_conns = 0, per_host = 0, handshakes = 0, idle_s = 360;
	unsigned long send_s = 0;
	bool quiet = false, no_defer = false;
	int c, rc, sig;
	char *end;

	snprintf(listen, sizeof(listen), "0.0.0.0:%d", FS_DEFAULT_PORT);
	while ((c = getopt_long(argc, argv, "e:l:t:n:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 'e': export_dir = optarg; break;
		case 'l':
			if (strlen(optarg) >= sizeof(listen) || !strchr(optarg, ':') ||
			    strstr(optarg, "://")) {
				fprintf(stderr, "rpcrdma-server: --listen wants ADDR:PORT, got '%s'\n",
					optarg);
				return 2;
			}
			snprintf(listen, sizeof(listen), "%s", optarg);
			break;
		case 't':
			if (strcmp(optarg, "rdma") && strcmp(optarg, "tcp") && strcmp(optarg, "auto")) {
				fprintf(stderr,
					"rpcrdma-server: --transport must be rdma, tcp or auto, got '%s'\n",
					optarg);
				return 2;
			}
			transport = optarg;
			break;
		case 'n':
			errno = 0;
			threads = strtoul(optarg, &end, 10);
			if (errno || *end || threads < 1 || threads > 1024) {
				fprintf(stderr, "rpcrdma-server: --threads wants 1..1024, got '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'C':
			if (parse_count("--max-conns", optarg, 1, 1000000, &max_conns))
				return 2;
			break;
		case 'H':
			if (parse_count("--max-conns-per-host", optarg, 1, 1000000, &per_host))
				return 2;
			break;
		case 'S':
			if (parse_count("--max-handshakes", optarg, 1, 1000000, &handshakes))
				return 2;
			break;
		case 'I':
			if (parse_count("--idle-timeout", optarg, 0, 4000000, &idle_s))
				return 2;
			break;
		case 'T':
			if (parse_count("--send-timeout", optarg, 1, 3600, &send_s))
				return 2;
			break;
		case 'D': no_defer = true; break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "rpcrdma-server: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (!export_dir) {
		fprintf(stderr, "rpcrdma-server: --export DIR is required\n");
		usage(stderr);
		return 2;
	}
	rc = fs_service_init(&svc, export_dir);
	if (rc) {
		fprintf(stderr, "rpcrdma-server: cannot open export '%s': %s\n", export_dir,
			strerror(-rc));
		return 1;
	}

	/* Signals are taken by sigwait below; library threads inherit the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (send_s) {
		char ms[16];

		snprintf(ms, sizeof(ms), "%lu", send_s * 1000u);
		setenv("RPCRDMA_SERVER_SEND_TIMEOUT_MS", ms, 1);
	}
	memset(&so, 0, sizeof(so));
	so.threads = (unsigned)threads;
	so.max_conns = (unsigned)max_conns;            /* 0: the library's defaults */
	so.max_conns_per_host = (unsigned)per_host;
	so.max_handshakes = (unsigned)handshakes;
	so.flags = no_defer ? RPCRDMA_SERVER_NO_DEFER_ACCEPT : 0;
	so.idle_timeout_ms = idle_s ? (uint32_t)(idle_s * 1000u) : UINT32_MAX;
	rc = -EPROTONOSUPPORT;
	if (!strcmp(transport, "rdma") || !strcmp(transport, "auto")) {
		snprintf(url, sizeof(url), "rdma://%s", listen);
		rc = rpcrdma_server_create(url, &so, &srv);
		if (rc == -EPROTONOSUPPORT && !strcmp(transport, "auto"))
			fprintf(stderr, "rpcrdma-server: rdma:// transport not available in "
					"this build (-EPROTONOSUPPORT); using tcp://\n");
	}
	if (rc == -EPROTONOSUPPORT && strcmp(transport, "rdma")) {
		snprintf(url, sizeof(url), "tcp://%s", listen);
		rc = rpcrdma_server_create(url, &so, &srv);
	}
	if (rc) {
		fprintf(stderr, "rpcrdma-server: cannot listen on %s: %s%s\n", url,
			rpcrdma_strerror(rc), tool_hint(rc, url, 0));
		fs_service_fini(&svc);
		return 1;
	}
	rc = fs_service_register(srv, &svc);
	if (!rc)
		rc = rpcrdma_server_start(srv);
	if (rc) {
		fprintf(stderr, "rpcrdma-server: cannot start: %s\n", rpcrdma_strerror(rc));
		rpcrdma_server_destroy(srv);
		fs_service_fini(&svc);
		return 1;
	}
	{
		char *colon = strrchr(url, ':');

		if (colon)
			*colon = '\0';
		printf("listening on %s:%d (program 0x%08x version %u, export %s, %lu threads)\n",
		       url, rpcrdma_server_port(srv), FS_PROG, FS_VERS, export_dir, threads);
		fflush(stdout);
	}

	do {
		sig = 0;
		rc = sigwait(&sigs, &sig);
	} while (rc == EINTR);
	if (!quiet)
		fprintf(stderr, "rpcrdma-server: %s, shutting down\n",
			sig == SIGINT ? "SIGINT" : "SIGTERM");
	rpcrdma_server_shutdown(srv);
	if (!quiet) {
		struct rpcrdma_xprt_stats st;

		if (rpcrdma_server_stats(srv, &st) == 0) {
			fprintf(stderr,
				"rpcrdma-server: connections refused %llu, closed idle %llu, "
				"accept back-offs %llu, half-open dropped %llu\n",
				(unsigned long long)st.refused_conns,
				(unsigned long long)st.idle_closed,
				(unsigned long long)st.accept_backoffs,
				(unsigned long long)st.handshakes_dropped);
			/* rdma:// only (tcp:// has no CQs or QPs) */
			if (strcmp(st.transport, "tcp") != 0) {
				tool_faults_print(stderr, "rpcrdma-server: faults:", &st);
				fprintf(stderr,
					"rpcrdma-server: watch: quiet_probes %llu "
					"quiet_probes_done %llu send_stalls %llu\n",
					(unsigned long long)st.quiet_probes,
					(unsigned long long)st.quiet_probes_done,
					(unsigned long long)st.send_stalls);
			}
		}
	}
	rpcrdma_server_destroy(srv);
	if (!quiet)
		fprintf(stderr,
			"rpcrdma-server: served NULL %lu, READ %lu, WRITE %lu, LIST %lu, "
			"COMMIT %lu, PUSH_OPEN %lu, ECHO %lu\n",
			atomic_load(&svc.calls[FS_NULL]),
			atomic_load(&svc.calls[FS_READ]), atomic_load(&svc.calls[FS_WRITE]),
			atomic_load(&svc.calls[FS_LIST]), atomic_load(&svc.calls[FS_COMMIT]),
			atomic_load(&svc.calls[FS_PUSH_OPEN]), atomic_load(&svc.calls[FS_ECHO]));
	fs_service_fini(&svc);
	return 0;
}
