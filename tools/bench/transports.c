/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's transports seen alike by the driver: each server forked
 * into a child of its own on loopback (before the benchmark starts any
 * thread), and one connection of any transport opened, used for one
 * synchronous operation at a time and closed, by handing over to the
 * transport's backend (backend_rpcrdma.c for rdma:// and tcp://,
 * backend_tirpc.c, backend_raw.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

size_t conn_sink = MAXIO + 64;

void prctl_parent_death(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

/* RPCRDMA_BENCH_SERVER_PROGRESS_THREADS, when set, is the servers' own
 * RPCRDMA_PROGRESS_THREADS (empty: the default, whatever this process has), so
 * one side's loops can be set apart from the other's (issue 16 part AD). */
static void server_progress_threads(void)
{
	const char *v = getenv("RPCRDMA_BENCH_SERVER_PROGRESS_THREADS");

	if (!v)
		return;
	if (*v)
		(void)setenv("RPCRDMA_PROGRESS_THREADS", v, 1);
	else
		(void)unsetenv("RPCRDMA_PROGRESS_THREADS");
}

void serve_child(enum tp tp, int wfd, bool scale)
{
	int lfd = -1, port = 0, rc;

	signal(SIGPIPE, SIG_IGN);
	prctl_parent_death();
	server_progress_threads();
	switch (tp) {
	case TP_RDMA: rc = rr_server("rdma", &port, scale); break;
	case TP_TCP: rc = rr_server("tcp", &port, scale); break;
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
		dprintf(wfd, "error %d\n", -rc);
		_exit(1);
	}
	dprintf(wfd, "%d\n", port);
	close(wfd);
	if (tp == TP_RAW)
		raw_server(lfd);
#if BENCH_HAVE_TIRPC
	if (tp == TP_TIRPC)
		svc_run();
#endif
	for (;;)
		pause();
}

/* Forks the server of @tp; the child reports "port" or "error errno". */
void start_server(enum tp tp)
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
		close(p[0]);
		serve_child(tp, p[1], false);
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

/* Opens a connection of transport @tp to its server: 0 or a negative errno
 * (@c is to be closed with conn_close either way). */
int conn_open(struct conn *c, enum tp tp)
{
	memset(c, 0, sizeof(*c));
	c->tp = tp;
	c->fd = -1;
	/* raw reads its responses there: a NULL's at least */
	if (conn_sink || tp == TP_RAW) {
		c->sink = malloc(conn_sink ? conn_sink : 256);
		if (!c->sink)
			return -ENOMEM;
	}
	if (tp == TP_RDMA || tp == TP_TCP)
		return rr_open(c);
	if (tp == TP_RAW)
		return raw_open(c);
#if BENCH_HAVE_TIRPC
	return tirpc_open(c);
#else
	return -EPROTONOSUPPORT;
#endif
}

void conn_close(struct conn *c)
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

/* op: 0 NULL, 1 READ, 2 WRITE of @size, 3 durable WRITE to disk, 4 durable
 * WRITE to tmpfs (3 and 4: librpcrdma only).
 * 0 or a negative errno. */
int conn_op(struct conn *c, int op, uint32_t size)
{
	if (c->tp == TP_RAW)
		return raw_op(c, op, size);
#if BENCH_HAVE_TIRPC
	if (c->tp == TP_TIRPC)
		return tirpc_op(c, op, size);
#endif
	return rr_op(c, op, size);
}
