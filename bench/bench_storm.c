/* SPDX-License-Identifier: BSD-2-Clause */
/* A new client during a connect-and-vanish storm (issue 12 finding 7: "500
 * connect-and-vanish attempts delay a new client by 3.9 s"): a server in a
 * forked child, then N TCP connections to it as fast as they go, half of them
 * sending an MPA Request (RFC 5044 section 7.1, revision 2, no private data)
 * and closing, half staying silent, all from 127.0.0.2 (another host, as
 * far as the server's per-host limit goes); once half of them are made, one
 * client (from 127.0.0.1) connects and makes a NULL call while the rest of
 * the storm goes on. Reports that client's connect + call time, and the
 * same with no storm measured in the same run (the baseline: the figure is
 * their ratio), and how many of the storm's TCP handshakes needed a SYN retransmission (a
 * full listen queue drops SYNs; the client retries after 1 s, then 3 s).
 * Uses only the public API, so the same file measures an older library.
 * Timing is never asserted.
 * Usage: bench_storm [N (500)] [rounds (3)] */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"

#define PROG 0x2f5a0005u

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int h_nop(struct rpcrdma_req *req, void *ctx)
{
	(void)req;
	(void)ctx;
	return RPCRDMA_SVC_OK;
}

static _Noreturn void serve(int ctl)
{
	struct rpcrdma_server_opts so = {.threads = 2};
	struct rpcrdma_server *s = NULL;
	int port = -1;
	char c;

	if (rpcrdma_server_create("rdma://127.0.0.1:0", &so, &s) == 0 &&
	    rpcrdma_server_register(s, PROG, 1, 1, h_nop, NULL) == 0 &&
	    rpcrdma_server_start(s) == 0)
		port = rpcrdma_server_port(s);
	if (write(ctl, &port, sizeof(port)) != sizeof(port) || port < 0)
		_exit(1);
	while (read(ctl, &c, 1) == 1) {
	}
	rpcrdma_server_destroy(s);
	_exit(0);
}

/* Connect + NULL call of a new client, ms (negative: failed). */
static double probe(const char *url)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 20000, .connect_timeout_ms = 20000};
	struct rpcrdma_client *c;
	struct rpcrdma_call *call;
	double t0 = now_ms(), t;
	int rc = rpcrdma_client_create(url, PROG, 1, &o, &c);

	if (rc)
		return -1;
	rc = rpcrdma_call_create(c, 0, &call);
	if (!rc) {
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	t = now_ms() - t0;
	rpcrdma_client_destroy(c);
	return rc ? -1 : t;
}

struct storm {
	int port, n;
	int *silent, nsilent;
	atomic_int made;       /* connections made so far */
	unsigned retrans;      /* SYN retransmissions its handshakes needed */
};

/* The storm (a thread). The silent connections are left in s->silent
 * (closed by the caller). */
static void *storm(void *arg)
{
	static const unsigned char req[] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q',
					    ' ', 'F', 'r', 'a', 'm', 'e', 0x10, 2, 0, 4,
					    0, 16, 0, 16};
	struct storm *st = arg;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)st->port)};
	struct sockaddr_in src = {.sin_family = AF_INET};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
	for (int i = 0; i < st->n; i++, atomic_fetch_add(&st->made, 1)) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct tcp_info ti;
		socklen_t tl = sizeof(ti);

		if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
		    connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0)
			st->retrans += ti.tcpi_total_retrans;
		if (i % 2) {
			st->silent[st->nsilent++] = fd;
			continue;
		}
		if (send(fd, req, sizeof(req), MSG_NOSIGNAL) < 0) {
			/* the server may have closed it already */
		}
		close(fd);
	}
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 500, rounds = argc > 2 ? atoi(argv[2]) : 3;
	double quiet[16], during[16];
	int sv[2], port, wst, *silent;
	struct rlimit rl;
	char url[64];
	pid_t pid;

	if (n < 2 || rounds < 1 || rounds > 16) {
		fprintf(stderr, "usage: bench_storm [N >= 2] [rounds 1..16]\n");
		return 2;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	silent = calloc((size_t)n, sizeof(*silent));
	if (!silent || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		serve(sv[1]);
	}
	close(sv[1]);
	if (read(sv[0], &port, sizeof(port)) != sizeof(port) || port < 0) {
		fprintf(stderr, "bench_storm: the server did not start\n");
		return 1;
	}
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", port);
	for (int r = 0; r < rounds; r++) {
		struct storm st = {.port = port, .n = n, .silent = silent};
		pthread_t t;

		quiet[r] = probe(url);
		if (pthread_create(&t, NULL, storm, &st) != 0)
			return 1;
		while (atomic_load(&st.made) < n / 2)
			usleep(100);
		during[r] = probe(url);
		pthread_join(t, NULL);
		printf("round %d: new client %.1f ms quiet, %.1f ms during %d connect-and-vanish "
		       "(%.2fx); %u SYN retransmissions in the storm\n",
		       r + 1, quiet[r], during[r], n, during[r] / quiet[r], st.retrans);
		for (int i = 0; i < st.nsilent; i++)
			close(silent[i]);
		usleep(200000);   /* let the server see them go before the next round */
	}
	qsort(quiet, (size_t)rounds, sizeof(double), cmp);
	qsort(during, (size_t)rounds, sizeof(double), cmp);
	printf("median: %.1f ms quiet, %.1f ms during the storm: %.2fx\n", quiet[rounds / 2],
	       during[rounds / 2], during[rounds / 2] / quiet[rounds / 2]);
	close(sv[0]);
	waitpid(pid, &wst, 0);
	free(silent);
	return 0;
}
