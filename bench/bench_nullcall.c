/* SPDX-License-Identifier: BSD-2-Clause */
/* The two ends of the per-call cost measurement (bench/callgrind-null.sh):
 * a server of program BENCH_PROG (NULL procedure only, answered on the
 * receiving thread) and a client that makes N synchronous NULL calls and
 * exits, over librpcrdma (rdma://, tcp://) or libtirpc (clnttcp_create,
 * svc_vc_create; when built with it). The script runs the client under
 * valgrind --tool=callgrind twice (N = 1000 and 3000) and divides the
 * difference of the instruction counts by 2000: the client's user-space
 * instructions per NULL call, setup and teardown cancelled out. Only the
 * public API; timing is never asserted.
 *   bench_nullcall server rdma|tcp|tirpc      prints "port P", serves
 *   bench_nullcall client URL N               (tirpc://127.0.0.1:P: libtirpc)
 * The "clients" mode drives C connections at once, as rpcrdma-bench's scale
 * workload does (one asynchronous NULL call in flight on each, K calls
 * each), so that a profiler attached to the server (perf stat -p,
 * callgrind_control -z / -d) counts per call with many connections active
 * (docs/PERFORMANCE.md "Issue 16 part P"); with --pause it connects
 * (one synchronous call each), prints "connected" on stderr and waits
 * for a line on stdin before the calls, and after them prints "called"
 * and waits for another line before it tears the connections down (the
 * calls counted apart from connect and teardown, as issue 16 part AQ
 * did). It prints the calls made, their
 * rate and this process's CPU time per call.
 *   bench_nullcall clients URL C K [--pause]  (rdma:// or tcp://)
 * The "read" mode makes N synchronous READ calls (procedure 1: the server
 * answers SIZE bytes, through a Write chunk into the client's sink where
 * the transport offers one, as rpcrdma-bench's READ does), so that the
 * same counts (callgrind, strace -c, perf stat) can be taken per 64 KiB
 * READ (docs/PERFORMANCE.md "Issue 16 part T").
 *   bench_nullcall read URL N SIZE             (SIZE <= 1 MiB)
 * The "areads" mode is the "clients" mode with READs of SIZE bytes in
 * place of the NULL calls (a sink per connection), as rpcrdma-bench's scale
 * workload makes its 64 KiB READs: at C = 1 the per-READ counts of its N = 1
 * point, where the Reply is taken and the next Call made by the client's
 * progress loop (the completion callback), not by a synchronous caller
 * (docs/PERFORMANCE.md "Issue 16 part AU").
 *   bench_nullcall areads URL C K SIZE         (rdma:// or tcp://) */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"

#if defined(__has_include)
#if __has_include(<rpc/rpc.h>)
#include <rpc/rpc.h>
#define HAVE_TIRPC 1
#endif
#endif
#ifndef HAVE_TIRPC
#define HAVE_TIRPC 0
#endif

#define BENCH_PROG 0x2f5a0006u
#define BENCH_VERS 1u
#define BENCH_READ 1u
#define READ_MAX (1u << 20)

/* what the READ procedure answers (zeroes; its content does not matter) */
static char read_src[READ_MAX];

#if HAVE_TIRPC
static bool_t xdr_nothing(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

/* READ's result: an opaque of @len bytes from read_src (encode), or into
 * the caller's buffer (decode: @p points to a struct tread) */
struct tread {
	char *buf;
	u_int len;
};

static bool_t xdr_tread(XDR *x, void *p)
{
	struct tread *t = p;

	return xdr_bytes(x, &t->buf, &t->len, READ_MAX);
}

static void dispatch(struct svc_req *rq, SVCXPRT *xp)
{
	u_int count = 0;
	struct tread t = {read_src, 0};

	if (rq->rq_proc == 0) {
		svc_sendreply(xp, (xdrproc_t)xdr_nothing, NULL);
	} else if (rq->rq_proc == BENCH_READ) {
		if (!svc_getargs(xp, (xdrproc_t)xdr_u_int, (char *)&count)) {
			svcerr_decode(xp);
			return;
		}
		t.len = count > READ_MAX ? READ_MAX : count;
		svc_sendreply(xp, (xdrproc_t)xdr_tread, (char *)&t);
	} else {
		svcerr_noproc(xp);
	}
}

static int tirpc_serve(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	SVCXPRT *xp;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl))
		return 1;
	xp = svc_vc_create(fd, 0, 0);
	if (!xp || !svc_register(xp, BENCH_PROG, BENCH_VERS, dispatch, 0))
		return 1;
	printf("port %d\n", ntohs(sin.sin_port));
	fflush(stdout);
	svc_run();
	return 1;
}

/* A libtirpc TCP client of the bench program on 127.0.0.1:@port, or NULL. */
static CLIENT *tirpc_client(int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = RPC_ANYSOCK;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)port);
	return clnttcp_create(&sin, BENCH_PROG, BENCH_VERS, &fd, 0, 0);
}

static int tirpc_calls(int port, long n)
{
	struct timeval tv = {30, 0};
	CLIENT *c = tirpc_client(port);

	if (!c)
		return 1;
	for (long i = 0; i < n; i++)
		if (clnt_call(c, 0, (xdrproc_t)xdr_nothing, NULL, (xdrproc_t)xdr_nothing, NULL, tv) !=
		    RPC_SUCCESS)
			return 1;
	clnt_destroy(c);
	return 0;
}

static int tirpc_reads(int port, long n, u_int size, char *sink)
{
	struct timeval tv = {30, 0};
	CLIENT *c = tirpc_client(port);

	if (!c)
		return 1;
	for (long i = 0; i < n; i++) {
		u_int count = size;
		struct tread t = {sink, 0};

		if (clnt_call(c, BENCH_READ, (xdrproc_t)xdr_u_int, (char *)&count,
			      (xdrproc_t)xdr_tread, (char *)&t, tv) != RPC_SUCCESS || t.len != size)
			return 1;
	}
	clnt_destroy(c);
	return 0;
}
#endif

static int h_read(struct rpcrdma_req *r, void *ctx)
{
	uint32_t count;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &count) ||
	    rpcrdma_xdr_dec_remaining(rpcrdma_req_args(r)))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (count > READ_MAX)
		count = READ_MAX;
	return rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), read_src, count) ? RPCRDMA_SVC_SYSTEM_ERR
									   : RPCRDMA_SVC_OK;
}

static int rr_serve(const char *scheme)
{
	/* every client comes from 127.0.0.1: no per-host limit */
	struct rpcrdma_server_opts so = {.flags = RPCRDMA_SERVER_INLINE, .max_conns = 100000,
					 .max_conns_per_host = UINT_MAX, .max_handshakes = 10000};
	struct rpcrdma_server *s;
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, &so, &s);
	/* NULL (procedure 0) is answered for every registered (prog, vers) */
	if (!rc)
		rc = rpcrdma_server_register(s, BENCH_PROG, BENCH_VERS, BENCH_READ, h_read, NULL);
	if (!rc)
		rc = rpcrdma_server_start(s);
	if (rc) {
		fprintf(stderr, "bench_nullcall: server: %s\n", rpcrdma_strerror(rc));
		return 1;
	}
	printf("port %d\n", rpcrdma_server_port(s));
	fflush(stdout);
	for (;;)
		pause();
}

/* The synchronous loops' client: made, or the reason said. */
static int client_open(const char *url, struct rpcrdma_client **c)
{
	int rc = rpcrdma_client_create(url, BENCH_PROG, BENCH_VERS, NULL, c);

	if (rc)
		fprintf(stderr, "bench_nullcall: %s: %s\n", url, rpcrdma_strerror(rc));
	return rc;
}

/* Destroys @c; the exit status of a loop that ended with @rc (said, as @what's). */
static int client_close(struct rpcrdma_client *c, const char *what, int rc)
{
	rpcrdma_client_destroy(c);
	if (rc)
		fprintf(stderr, "bench_nullcall: %s: %s\n", what, rpcrdma_strerror(rc));
	return rc ? 1 : 0;
}

static int rr_calls(const char *url, long n)
{
	struct rpcrdma_client *c;
	int rc = client_open(url, &c);

	if (rc)
		return 1;
	for (long i = 0; i < n && !rc; i++) {
		struct rpcrdma_call *call;

		rc = rpcrdma_call_create(c, 0, &call);
		if (!rc) {
			rc = rpcrdma_call_run(call);
			rpcrdma_call_destroy(call);
		}
	}
	return client_close(c, "call", rc);
}

/* N synchronous READs of @size bytes into @sink, as rpcrdma-bench's READ
 * (the sink offered for the result, a 64-byte bound on the rest) */
static int rr_reads(const char *url, long n, uint32_t size, char *sink)
{
	struct rpcrdma_client *c;
	int rc = client_open(url, &c);

	if (rc)
		return 1;
	for (long i = 0; i < n && !rc; i++) {
		struct rpcrdma_ddp_sink sk = {sink, size};
		struct rpcrdma_call *call;
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_call_create(c, BENCH_READ, &call);
		if (rc)
			break;
		rc = rpcrdma_xdr_put_u32(rpcrdma_call_args(call), size);
		if (!rc)
			rc = rpcrdma_call_set_sinks(call, &sk, 1);
		rpcrdma_call_set_reply_hint(call, 64);
		if (!rc)
			rc = rpcrdma_call_run(call);
		if (!rc)
			rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && len != size)
			rc = -EBADMSG;
		rpcrdma_call_destroy(call);
	}
	return client_close(c, "read", rc);
}

/* -- clients: C connections, one asynchronous call in flight on each -- */

struct cslot {
	struct rpcrdma_client *c;
	long left;                  /* calls still to make */
	char *sink;                 /* READ's result (areads), else NULL */
	uint32_t size;              /* READ's size (areads) */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned active;            /* connections still calling */
	long calls;
	int err;
} cs = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void cs_done(struct rpcrdma_call *call, int status, void *arg);

static int cs_start(struct cslot *sl)
{
	struct rpcrdma_call *call;
	int rc = rpcrdma_call_create(sl->c, sl->sink ? BENCH_READ : 0, &call);

	if (rc)
		return rc;
	if (sl->sink) {
		struct rpcrdma_ddp_sink sk = {sl->sink, sl->size};

		rc = rpcrdma_xdr_put_u32(rpcrdma_call_args(call), sl->size);
		if (!rc)
			rc = rpcrdma_call_set_sinks(call, &sk, 1);
		rpcrdma_call_set_reply_hint(call, 64);
	}
	if (!rc)
		rc = rpcrdma_call_start(call, cs_done, sl);
	if (rc)
		rpcrdma_call_destroy(call);
	return rc;
}

static void cs_done(struct rpcrdma_call *call, int status, void *arg)
{
	struct cslot *sl = arg;
	int rc = status;

	if (!rc && sl->sink) {
		const void *p;
		uint32_t len = 0;

		rc = rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len);
		if (!rc && len != sl->size)
			rc = -EBADMSG;
	}
	rpcrdma_call_destroy(call);
	pthread_mutex_lock(&cs.mu);
	if (!rc)
		cs.calls++;
	pthread_mutex_unlock(&cs.mu);
	if (!rc && --sl->left > 0 && (rc = cs_start(sl)) == 0)
		return;
	pthread_mutex_lock(&cs.mu);
	if (rc && !cs.err)
		cs.err = rc;
	cs.active--;
	pthread_cond_signal(&cs.cv);
	pthread_mutex_unlock(&cs.mu);
}

static double tv_us(struct timeval a, struct timeval b)
{
	return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_usec - a.tv_usec);
}

static int rr_clients(const char *url, long nconn, long k, bool pause_first, uint32_t size)
{
	struct cslot *sl = calloc((size_t)nconn, sizeof(*sl));
	struct timespec t0, t1;
	struct rusage r0, r1;
	long made = 0;
	int rc = sl ? 0 : -ENOMEM;

	for (long i = 0; i < nconn && !rc; i++, made++) {
		struct rpcrdma_call *call;

		rc = rpcrdma_client_create(url, BENCH_PROG, BENCH_VERS, NULL, &sl[i].c);
		if (rc)
			break;
		rc = rpcrdma_call_create(sl[i].c, 0, &call);   /* connected, answered */
		if (!rc) {
			rc = rpcrdma_call_run(call);
			rpcrdma_call_destroy(call);
		}
		sl[i].left = k;
		sl[i].size = size;
		if (size && !(sl[i].sink = malloc(size))) {
			rc = -ENOMEM;
			made++;
			break;
		}
	}
	if (!rc && pause_first) {
		char line[16];

		fprintf(stderr, "connected\n");
		if (!fgets(line, sizeof(line), stdin))
			line[0] = 0;
	}
	getrusage(RUSAGE_SELF, &r0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < nconn && !rc; i++) {
		pthread_mutex_lock(&cs.mu);
		cs.active++;
		pthread_mutex_unlock(&cs.mu);
		rc = cs_start(&sl[i]);
		if (rc) {
			pthread_mutex_lock(&cs.mu);
			cs.active--;
			pthread_mutex_unlock(&cs.mu);
		}
	}
	pthread_mutex_lock(&cs.mu);
	while (cs.active)
		pthread_cond_wait(&cs.cv, &cs.mu);
	rc = rc ? rc : cs.err;
	pthread_mutex_unlock(&cs.mu);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	getrusage(RUSAGE_SELF, &r1);
	if (cs.calls) {
		double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

		printf("calls %ld connections %ld seconds %.3f calls/s %.0f client_cpu_us/call "
		       "user %.2f sys %.2f\n", cs.calls, nconn, secs, (double)cs.calls / secs,
		       tv_us(r0.ru_utime, r1.ru_utime) / (double)cs.calls,
		       tv_us(r0.ru_stime, r1.ru_stime) / (double)cs.calls);
	}
	if (pause_first) {
		char line[16];

		/* the calls' counts apart from the teardown (a profiler
		 * attached to the server dumps now) */
		fflush(stdout);
		fprintf(stderr, "called\n");
		if (!fgets(line, sizeof(line), stdin))
			line[0] = 0;
	}
	for (long i = 0; i < made; i++) {
		rpcrdma_client_destroy(sl[i].c);
		free(sl[i].sink);
	}
	free(sl);
	if (rc)
		fprintf(stderr, "bench_nullcall: clients: %s\n", rpcrdma_strerror(rc));
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server")) {
		if (!strcmp(argv[2], "tirpc")) {
#if HAVE_TIRPC
			return tirpc_serve();
#else
			fprintf(stderr, "bench_nullcall: built without libtirpc\n");
			return 77;
#endif
		}
		return rr_serve(argv[2]);
	}
	if (argc == 4 && !strcmp(argv[1], "client")) {
		long n = strtol(argv[3], NULL, 10);

		if (!strncmp(argv[2], "tirpc://", 8)) {
#if HAVE_TIRPC
			const char *colon = strrchr(argv[2], ':');

			return tirpc_calls(colon ? atoi(colon + 1) : 0, n);
#else
			fprintf(stderr, "bench_nullcall: built without libtirpc\n");
			return 77;
#endif
		}
		return rr_calls(argv[2], n);
	}
	if (argc == 5 && !strcmp(argv[1], "read")) {
		long n = strtol(argv[3], NULL, 10), size = strtol(argv[4], NULL, 10);
		static char sink[READ_MAX];

		if (size <= 0 || size > (long)READ_MAX)
			goto usage;
		if (!strncmp(argv[2], "tirpc://", 8)) {
#if HAVE_TIRPC
			const char *colon = strrchr(argv[2], ':');

			return tirpc_reads(colon ? atoi(colon + 1) : 0, n, (u_int)size, sink);
#else
			fprintf(stderr, "bench_nullcall: built without libtirpc\n");
			return 77;
#endif
		}
		return rr_reads(argv[2], n, (uint32_t)size, sink);
	}
	if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "--pause"))) &&
	    !strcmp(argv[1], "clients")) {
		long nconn = strtol(argv[3], NULL, 10), k = strtol(argv[4], NULL, 10);

		if (nconn > 0 && k > 0 && strncmp(argv[2], "tirpc://", 8))
			return rr_clients(argv[2], nconn, k, argc == 6, 0);
	}
	if (argc == 6 && !strcmp(argv[1], "areads")) {
		long nconn = strtol(argv[3], NULL, 10), k = strtol(argv[4], NULL, 10);
		long size = strtol(argv[5], NULL, 10);

		if (nconn > 0 && k > 0 && size > 0 && size <= (long)READ_MAX &&
		    strncmp(argv[2], "tirpc://", 8))
			return rr_clients(argv[2], nconn, k, false, (uint32_t)size);
	}
usage:
	fprintf(stderr, "usage: bench_nullcall server rdma|tcp|tirpc\n"
			"       bench_nullcall client URL N   (URL tirpc://127.0.0.1:P for libtirpc)\n"
			"       bench_nullcall clients URL C K [--pause]   (rdma:// or tcp://: C\n"
			"         connections, one NULL call in flight on each, K calls each)\n"
			"       bench_nullcall read URL N SIZE   (N synchronous READs of SIZE <= 1 MiB\n"
			"         bytes; URL as for client)\n"
			"       bench_nullcall areads URL C K SIZE   (as clients, READs of SIZE bytes)\n");
	return 2;
}
