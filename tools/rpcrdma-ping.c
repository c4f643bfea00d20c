/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-ping: NULL RPC round trips (RFC 5531 procedure 0) to a server,
 * like ping(8): one line per reply, then a summary with loss and
 * min/avg/p50/p99/max round-trip time. Works on any librpcrdma transport
 * (rdma://, tcp://); any RPC server answers NULL for a program it serves,
 * and PROG_UNAVAIL for one it does not (reported as such). Exit status: 0
 * when at least one reply came back, 1 otherwise, 2 for usage errors. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileservice.h"
#include "faults.h"
#include "hint.h"

static volatile sig_atomic_t stop;

static void on_sigint(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rpcrdma-ping [-c COUNT] [-i INTERVAL] [-s SIZE] [-t TIMEOUT]\n"
		"                    [-P PROG] [-V VERS] [-q] URL\n"
		"\n"
		"Sends NULL RPCs to URL (rdma://host:port or tcp://host:port; a bare\n"
		"host:port means tcp://) and prints the round-trip times.\n"
		"  -c COUNT     number of calls (default 5; 0 = until interrupted)\n"
		"  -i INTERVAL  seconds between calls (default 1; 0 = back to back)\n"
		"  -s SIZE      bytes of (ignored) argument padding per call (default 0)\n"
		"  -t TIMEOUT   seconds to wait for each reply (default 5)\n"
		"  -P PROG      program number (default 0x%08x, the file service)\n"
		"  -V VERS      version (default %u)\n"
		"  -q           summary only\n"
		"Exit status: 0 if any reply came back, 1 if none, 2 on usage errors.\n",
		FS_PROG, FS_VERS);
}

/* The RPC answer of a call that completed with -EREMOTEIO (RFC 5531). */
static const char *rpc_answer_str(const struct rpcrdma_rpc_status *st)
{
	static char buf[96];

	if (st->reply_stat == RPCRDMA_MSG_DENIED)
		return st->reject_stat == RPCRDMA_RPC_MISMATCH ? "MSG_DENIED RPC_MISMATCH"
							       : "MSG_DENIED AUTH_ERROR";
	switch (st->accept_stat) {
	case RPCRDMA_PROG_UNAVAIL: return "PROG_UNAVAIL (the server does not serve this program)";
	case RPCRDMA_PROG_MISMATCH:
		snprintf(buf, sizeof(buf), "PROG_MISMATCH (server has versions %u..%u)", st->low,
			 st->high);
		return buf;
	case RPCRDMA_PROC_UNAVAIL: return "PROC_UNAVAIL";
	case RPCRDMA_GARBAGE_ARGS: return "GARBAGE_ARGS";
	case RPCRDMA_SYSTEM_ERR: return "SYSTEM_ERR";
	default: return "unknown accept_stat";
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return !errno && *end == '\0' && end != s && *out >= lo && *out <= hi;
}

static bool parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		return false;
	*out = (uint32_t)v;
	return true;
}

int main(int argc, char **argv)
{
	uint32_t count = 5, size = 0, prog = FS_PROG, vers = FS_VERS;
	double interval = 1.0, timeout = 5.0;
	bool quiet = false;
	char url[600];
	struct rpcrdma_client *clnt = NULL;
	struct rpcrdma_client_opts co;
	size_t cap;
	uint64_t *rtt = NULL;
	uint8_t *pad = NULL;
	uint32_t sent = 0, recvd = 0, i;
	int c, rc;
	struct sigaction sa;

	static const struct option lopts[] = {
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};

	while ((c = getopt_long(argc, argv, "c:i:s:t:P:V:qh", lopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!parse_u32(optarg, 0, 100000000, &count))
				goto bad;
			break;
		case 'i':
			if (!parse_double(optarg, 0, 3600, &interval))
				goto bad;
			break;
		case 's':
			if (!parse_u32(optarg, 0, 8u << 20, &size))
				goto bad;
			break;
		case 't':
			if (!parse_double(optarg, 0.001, 3600, &timeout))
				goto bad;
			break;
		case 'P':
			if (!parse_u32(optarg, 0, UINT32_MAX, &prog))
				goto bad;
			break;
		case 'V':
			if (!parse_u32(optarg, 0, UINT32_MAX, &vers))
				goto bad;
			break;
		case 'q': quiet = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "rpcrdma-ping: exactly one URL expected\n");
		usage(stderr);
		return 2;
	}
	if (strlen(argv[optind]) > 512) {
		fprintf(stderr, "rpcrdma-ping: URL too long\n");
		return 2;
	}
	if (strstr(argv[optind], "://"))
		snprintf(url, sizeof(url), "%s", argv[optind]);
	else
		snprintf(url, sizeof(url), "tcp://%s", argv[optind]);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&co, 0, sizeof(co));
	co.timeout_ms = (uint32_t)(timeout * 1000);
	co.connect_timeout_ms = co.timeout_ms;
	rc = rpcrdma_client_create(url, prog, vers, &co, &clnt);
	if (rc) {
		fprintf(stderr, "rpcrdma-ping: cannot connect to %s: %s%s\n", url,
			rpcrdma_strerror(rc), tool_hint(rc, url, 1));
		return 1;
	}
	if (size) {
		pad = calloc(1, size);
		if (!pad) {
			fprintf(stderr, "rpcrdma-ping: out of memory\n");
			rpcrdma_client_destroy(clnt);
			return 1;
		}
	}
	rtt = calloc(count ? count : 1024, sizeof(*rtt));
	if (!rtt) {
		fprintf(stderr, "rpcrdma-ping: out of memory\n");
		free(pad);
		rpcrdma_client_destroy(clnt);
		return 1;
	}
	cap = count ? count : 1024;

	if (!quiet)
		printf("RPC NULL %s program 0x%08x version %u: %u bytes of arguments\n", url, prog,
		       vers, size);
	for (i = 0; !stop && (count == 0 || i < count); i++) {
		uint64_t t0, dt;

		if (i && interval > 0) {
			struct timespec ts = {(time_t)interval,
					      (long)((interval - (double)(time_t)interval) * 1e9)};

			while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			if (stop)
				break;
		}
		struct rpcrdma_call *call = NULL;
		struct rpcrdma_rpc_status st;

		rc = rpcrdma_call_create(clnt, 0, &call);
		if (!rc && size)
			rc = rpcrdma_xdr_put_fixed(rpcrdma_call_args(call), pad, size);
		t0 = fs_now_ns();
		if (!rc)
			rc = rpcrdma_call_run(call);
		dt = fs_now_ns() - t0;
		sent++;
		if (rc == 0) {
			if (recvd == cap) {
				uint64_t *n = realloc(rtt, cap * 2 * sizeof(*rtt));

				if (!n) {
					rpcrdma_call_destroy(call);
					break;
				}
				rtt = n;
				cap *= 2;
			}
			rtt[recvd++] = dt;
			if (!quiet)
				printf("reply from %s: seq=%u time=%.3f ms\n", url, i, (double)dt / 1e6);
		} else if (rc == -EREMOTEIO && call && rpcrdma_call_status(call, &st) == 0) {
			printf("RPC error from %s: seq=%u: %s\n", url, i, rpc_answer_str(&st));
		} else {
			printf("no reply from %s: seq=%u: %s%s\n", url, i, rpcrdma_strerror(rc),
			       tool_hint(rc, url, 0));
		}
		if (call)
			rpcrdma_call_destroy(call);
		fflush(stdout);
		if (rc == -EPROTOTYPE)
			break;   /* every further call would meet the same server */
	}
	printf("--- %s rpc ping statistics ---\n", url);
	printf("%u calls, %u replies, %.1f%% loss\n", sent, recvd,
	       sent ? 100.0 * (double)(sent - recvd) / (double)sent : 0.0);
	if (recvd) {
		double sum = 0;

		for (i = 0; i < recvd; i++)
			sum += (double)rtt[i];
		qsort(rtt, recvd, sizeof(*rtt), cmp_u64);
		printf("rtt min/avg/p50/p99/max = %.3f/%.3f/%.3f/%.3f/%.3f ms\n",
		       (double)rtt[0] / 1e6, sum / recvd / 1e6, (double)rtt[(recvd - 1) / 2] / 1e6,
		       (double)rtt[((size_t)recvd * 99 + 99) / 100 - 1] / 1e6,
		       (double)rtt[recvd - 1] / 1e6);
	}
	{
		/* rdma://: why connections ended, when a fault ended one
		 * (tcp:// has no such counters: -EOPNOTSUPP) */
		struct rpcrdma_xprt_stats xs;

		if (rpcrdma_client_stats(clnt, &xs) == 0 && tool_faults_sum(&xs))
			tool_faults_print(stdout, "transport faults:", &xs);
	}
	free(rtt);
	free(pad);
	rpcrdma_client_destroy(clnt);
	return recvd ? 0 : 1;
bad:
	fprintf(stderr, "rpcrdma-ping: bad value '%s' for -%c\n", optarg, c);
	usage(stderr);
	return 2;
}
