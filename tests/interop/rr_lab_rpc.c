/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_rpc: the project's RPC layer end to end over one URL, as the interop
 * lab runs it in the VM: a server ("serve URL") and a client ("call URL") of
 * a small test program, over tcp:// (record marking, RFC 5531 section 11),
 * rdma:// (RPC-over-RDMA, RFC 8166, on the soft iWARP provider) or verbs://
 * (rdma-core: kernel siw or rxe). The client checks, byte-exact:
 *   ECHO    a short Call and Reply (Short messages, inline);
 *   BULK    DDP-eligible argument AND result of 1 B .. 1 MiB (a Read chunk in
 *           the Call, a Write chunk in the Reply over RDMA; writev on TCP);
 *   LIST    a result of N words with no DDP item, up to 256 KiB (a Reply
 *           chunk over RDMA once above the inline threshold);
 *   BIGARG  a 96 KiB non-DDP argument (a Long Call: position-zero Read chunk);
 *   PARALLEL 32 asynchronous BULK calls in flight (credits).
 * Then QUIT stops the server, which exits 0 if it served without error.
 * "quiet URL SEC" (against "serve URL", the server started with
 * RPCRDMA_SERVER_SEND_TIMEOUT_MS = SEC * 1000): the quiet Sends' probe
 * (docs/security.md "Limits") against a kernel peer. Three ECHOs whose
 * Replies go out unsignaled ("quiet"), then twice: idle 1.5 x SEC (past
 * half the send timeout, when the probe goes, and past the whole of it,
 * when an unproven Send would close the connection), then STATS: the
 * server's counters must show a probe more posted and as many completed,
 * no connection closed by send_stalls and no failed operation; the STATS
 * call itself answered is the call after the idle. "quiet URL SEC none":
 * a server that signals every Reply (verbs:// on Linux siw, conn.c
 * signal_writes) has no quiet Replies: no probe may go, and the same idles
 * must close nothing.
 * Exit 0: all passed; 1: a failure; 77: the URL's transport is not built into
 * the library (-EPROTONOSUPPORT), printed as "not yet available". */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"

#include "lab_check.h"

#define PROG 0x20000777u
#define VERS 1u
enum { P_ECHO = 1, P_BULK = 2, P_LIST = 3, P_BIGARG = 4, P_QUIT = 5, P_STATS = 6 };

/* ---- server ---- */

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static bool quit;
static int srv_errors;

static void free_buf(void *p)
{
	free(p);
}

/* BULK: {seed, opaque data} -> {check, opaque data (copy), 0x600d} where
 * check = 1 if data equals fill(seed) */
static int h_bulk(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	const void *p;
	uint32_t seed, len;
	uint8_t *want, *copy;
	bool good;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(d, &seed) || rpcrdma_xdr_get_ddp(d, &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	want = malloc(len + 1);
	copy = malloc(len + 1);
	if (!want || !copy) {
		free(want);
		free(copy);
		return RPCRDMA_SVC_SYSTEM_ERR;
	}
	fill(want, len, seed);
	good = memcmp(want, p, len) == 0;
	free(want);
	if (!good) {
		pthread_mutex_lock(&q_lock);
		srv_errors++;
		pthread_mutex_unlock(&q_lock);
	}
	memcpy(copy, p, len);
	rpcrdma_xdr_put_u32(e, good);
	rpcrdma_xdr_put_ddp(e, copy, len);
	rpcrdma_xdr_put_u32(e, 0x600d);
	rpcrdma_req_set_release(r, free_buf, copy);
	return RPCRDMA_SVC_OK;
}

static int h_list(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > (1u << 20))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), n);
	for (uint32_t i = 0; i < n; i++)
		rpcrdma_xdr_put_u32(rpcrdma_req_results(r), i * 7u + 3u);
	return rpcrdma_xdr_enc_error(rpcrdma_req_results(r)) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static int h_bigarg(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	uint32_t n, v, bad = 0;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(d, &n))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	for (uint32_t i = 0; i < n; i++) {
		if (rpcrdma_xdr_get_u32(d, &v))
			return RPCRDMA_SVC_GARBAGE_ARGS;
		bad += v != (i ^ 0x5a5a5a5au);
	}
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), bad);
	return RPCRDMA_SVC_OK;
}

static int h_quit(struct rpcrdma_req *r, void *ctx)
{
	(void)r;
	(void)ctx;
	pthread_mutex_lock(&q_lock);
	quit = true;
	pthread_cond_signal(&q_cond);
	pthread_mutex_unlock(&q_lock);
	return RPCRDMA_SVC_OK;
}

static struct rpcrdma_server *srv;

/* STATS: {} -> {quiet_probes, quiet_probes_done, send_stalls,
 * fatal_errors, wr_errors}, the server's counters (u64 each) */
static int h_stats(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	struct rpcrdma_xprt_stats st;

	(void)ctx;
	if (rpcrdma_server_stats(srv, &st))
		return RPCRDMA_SVC_SYSTEM_ERR;
	printf("stats: quiet_probes %llu quiet_probes_done %llu send_stalls %llu "
	       "fatal_errors %llu wr_errors %llu\n", (unsigned long long)st.quiet_probes,
	       (unsigned long long)st.quiet_probes_done, (unsigned long long)st.send_stalls,
	       (unsigned long long)st.fatal_errors, (unsigned long long)st.wr_errors);
	rpcrdma_xdr_put_u64(e, st.quiet_probes);
	rpcrdma_xdr_put_u64(e, st.quiet_probes_done);
	rpcrdma_xdr_put_u64(e, st.send_stalls);
	rpcrdma_xdr_put_u64(e, st.fatal_errors);
	rpcrdma_xdr_put_u64(e, st.wr_errors);
	return RPCRDMA_SVC_OK;
}

static int serve(const char *url)
{
	struct rpcrdma_server_opts o = {.threads = 4};
	struct rpcrdma_server *s = NULL;
	int rc = rpcrdma_server_create(url, &o, &s);

	if (rc == -EPROTONOSUPPORT) {
		printf("not yet available: server %s: transport not built into librpcrdma\n", url);
		return 77;
	}
	if (rc) {
		printf("server %s: %s\n", url, strerror(-rc));
		return 1;
	}
	rpcrdma_server_register(s, PROG, VERS, P_ECHO, h_echo, NULL);
	rpcrdma_server_register(s, PROG, VERS, P_BULK, h_bulk, NULL);
	rpcrdma_server_register(s, PROG, VERS, P_LIST, h_list, NULL);
	rpcrdma_server_register(s, PROG, VERS, P_BIGARG, h_bigarg, NULL);
	rpcrdma_server_register(s, PROG, VERS, P_QUIT, h_quit, NULL);
	rpcrdma_server_register(s, PROG, VERS, P_STATS, h_stats, NULL);
	srv = s;
	rc = rpcrdma_server_start(s);
	if (rc) {
		printf("server start: %s\n", strerror(-rc));
		rpcrdma_server_destroy(s);
		return 1;
	}
	printf("serving %s (port %d)\n", url, rpcrdma_server_port(s));
	fflush(stdout);
	pthread_mutex_lock(&q_lock);
	while (!quit)
		pthread_cond_wait(&q_cond, &q_lock);
	pthread_mutex_unlock(&q_lock);
	/* graceful: the QUIT request in flight gets its reply first */
	rpcrdma_server_destroy(s);
	printf("server done, %d bad payloads\n", srv_errors);
	return srv_errors ? 1 : 0;
}

/* ---- client ---- */

static int bulk(struct rpcrdma_client *c, uint32_t len, uint32_t seed)
{
	uint8_t *out = malloc(len + 1), *in = malloc(len + 1);
	struct rpcrdma_ddp_sink sink = {.buf = in, .max = len};
	struct rpcrdma_call *call = NULL;
	int rc = -ENOMEM;

	if (!out || !in || rpcrdma_call_create(c, P_BULK, &call))
		goto done;
	fill(out, len, seed);
	memset(in, 0xee, len + 1);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), seed);
	rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), out, len);
	rpcrdma_call_set_sinks(call, &sink, 1);
	rpcrdma_call_set_reply_hint(call, 64);
	rc = rpcrdma_call_run(call);
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
		uint32_t good = 0, tag = 0, n = 0;
		const void *p;

		rc = rpcrdma_xdr_get_u32(d, &good);
		rc = rc ? rc : rpcrdma_xdr_get_ddp(d, &p, &n);
		rc = rc ? rc : rpcrdma_xdr_get_u32(d, &tag);
		if (rc == 0 && (!good || n != len || tag != 0x600d || memcmp(p, out, len)))
			rc = -EBADMSG;
	}
done:
	if (call)
		rpcrdma_call_destroy(call);
	free(out);
	free(in);
	return rc;
}

/* QUIT (the server ends), reported, then the client gone; the program's
 * exit status: 0 when every result passed. */
static int quit_and_close(struct rpcrdma_client *c)
{
	struct rpcrdma_call *call;
	int rc = rpcrdma_call_create(c, P_QUIT, &call);

	if (rc == 0) {
		rc = rpcrdma_call_run(call);
		rpcrdma_call_destroy(call);
	}
	result(rc == 0, "QUIT", "rc %d", rc);
	rpcrdma_client_destroy(c);
	return failures ? 1 : 0;
}

struct async_slot {
	struct rpcrdma_call *call;
	uint8_t *out, *in;
	uint32_t len;
};

/* The connect's outcome reported: 0, 77 when the transport is not built
 * in (the program's "not yet available" status), else 1. */
static int connect_result(const char *url, int rc)
{
	if (rc == -EPROTONOSUPPORT) {
		printf("not yet available: client %s: transport not built into librpcrdma\n", url);
		return 77;
	}
	result(rc == 0, "connect", "%s: %s", url, rc ? strerror(-rc) : "ok");
	return rc ? 1 : 0;
}

static int client(const char *url)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 60000, .connect_timeout_ms = 20000};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call = NULL;
	int rc = rpcrdma_client_create(url, PROG, VERS, &o, &c);

	rc = connect_result(url, rc);
	if (rc)
		return rc;

	/* ECHO */
	{
		int bad = 0;

		for (uint32_t i = 0; i < 200; i++) {
			uint32_t v = 0;

			rc = rpcrdma_call_create(c, P_ECHO, &call);
			if (rc == 0) {
				rpcrdma_xdr_put_u32(rpcrdma_call_args(call), i * 977u);
				rc = rpcrdma_call_run(call);
				if (rc == 0)
					rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v);
				rpcrdma_call_destroy(call);
			}
			bad += rc != 0 || v != ~(i * 977u);
		}
		result(bad == 0, "ECHO x200", "%d bad", bad);
	}
	/* BULK sizes across the inline threshold */
	{
		static const uint32_t sizes[] = {1, 3, 1020, 1024, 4093, 4096, 4097, 8192, 65536,
						 65537, 262144, 1u << 20};
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			char name[64];

			snprintf(name, sizeof(name), "BULK %u bytes both ways", sizes[i]);
			rc = bulk(c, sizes[i], i + 11);
			result(rc == 0, name, "rc %d", rc);
		}
	}
	/* LIST: Reply chunk */
	{
		static const uint32_t counts[] = {10, 1000, 1100, 16384, 65536};

		for (unsigned i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			uint32_t n = 0, v, bad = 0;
			char name[64];

			rc = rpcrdma_call_create(c, P_LIST, &call);
			if (rc == 0) {
				rpcrdma_xdr_put_u32(rpcrdma_call_args(call), counts[i]);
				/* the hint is the whole Reply: RPC reply header
				 * (24 bytes with an AUTH_NONE verifier) + results */
				rpcrdma_call_set_reply_hint(call, 4u * counts[i] + 4u + 64u);
				rc = rpcrdma_call_run(call);
				if (rc == 0) {
					struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

					rc = rpcrdma_xdr_get_u32(d, &n);
					for (uint32_t k = 0; rc == 0 && k < n; k++) {
						rc = rpcrdma_xdr_get_u32(d, &v);
						bad += v != k * 7u + 3u;
					}
				}
				rpcrdma_call_destroy(call);
			}
			snprintf(name, sizeof(name), "LIST %u words (%u bytes)", counts[i],
				 4 * counts[i] + 4);
			result(rc == 0 && n == counts[i] && bad == 0, name, "rc %d n %u bad %u", rc,
			       n, bad);
		}
	}
	/* BIGARG: Long Call */
	{
		uint32_t n = 24576, bad = 1;

		rc = rpcrdma_call_create(c, P_BIGARG, &call);
		if (rc == 0) {
			rpcrdma_xdr_put_u32(rpcrdma_call_args(call), n);
			for (uint32_t i = 0; i < n; i++)
				rpcrdma_xdr_put_u32(rpcrdma_call_args(call), i ^ 0x5a5a5a5au);
			rc = rpcrdma_call_run(call);
			if (rc == 0)
				rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &bad);
			rpcrdma_call_destroy(call);
		}
		result(rc == 0 && bad == 0, "BIGARG 96 KiB argument (Long Call)", "rc %d bad %u", rc,
		       bad);
	}
	/* PARALLEL: 32 asynchronous BULK calls */
	{
		struct async_slot s[32];
		int bad = 0;

		memset(s, 0, sizeof(s));
		for (unsigned i = 0; i < 32; i++) {
			struct rpcrdma_ddp_sink sink;

			s[i].len = 1000u + i * 3001u;
			s[i].out = malloc(s[i].len);
			s[i].in = malloc(s[i].len);
			if (!s[i].out || !s[i].in || rpcrdma_call_create(c, P_BULK, &s[i].call)) {
				bad++;
				continue;
			}
			fill(s[i].out, s[i].len, 1000 + i);
			sink.buf = s[i].in;
			sink.max = s[i].len;
			rpcrdma_xdr_put_u32(rpcrdma_call_args(s[i].call), 1000 + i);
			rpcrdma_xdr_put_ddp(rpcrdma_call_args(s[i].call), s[i].out, s[i].len);
			rpcrdma_call_set_sinks(s[i].call, &sink, 1);
			if (rpcrdma_call_start(s[i].call, NULL, NULL))
				bad++;
		}
		for (unsigned i = 0; i < 32; i++) {
			if (!s[i].call)
				continue;
			rc = rpcrdma_call_wait(s[i].call, 60000);
			if (rc == 0) {
				struct rpcrdma_xdr_dec *d = rpcrdma_call_results(s[i].call);
				uint32_t good = 0, n = 0;
				const void *p;

				rc = rpcrdma_xdr_get_u32(d, &good);
				rc = rc ? rc : rpcrdma_xdr_get_ddp(d, &p, &n);
				if (rc == 0 && (!good || n != s[i].len || memcmp(p, s[i].out, n)))
					rc = -EBADMSG;
			}
			if (rc)
				printf("  PARALLEL call %u (%u bytes): rc %d (%s)\n", i, s[i].len, rc,
				       rpcrdma_strerror(rc));
			bad += rc != 0;
			rpcrdma_call_destroy(s[i].call);
			free(s[i].out);
			free(s[i].in);
		}
		result(bad == 0, "PARALLEL 32 async BULK calls", "%d bad", bad);
	}
	return quit_and_close(c);
}

struct qstats {
	uint64_t probes, done, stalls, fatal, wr_errors;
};

static int call_stats(struct rpcrdma_client *c, struct qstats *q)
{
	struct rpcrdma_call *call = NULL;
	int rc = rpcrdma_call_create(c, P_STATS, &call);

	if (rc)
		return rc;
	rc = rpcrdma_call_run(call);
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u64(d, &q->probes);
		rc = rc ? rc : rpcrdma_xdr_get_u64(d, &q->done);
		rc = rc ? rc : rpcrdma_xdr_get_u64(d, &q->stalls);
		rc = rc ? rc : rpcrdma_xdr_get_u64(d, &q->fatal);
		rc = rc ? rc : rpcrdma_xdr_get_u64(d, &q->wr_errors);
	}
	rpcrdma_call_destroy(call);
	return rc;
}

static int echo_once(struct rpcrdma_client *c, uint32_t x)
{
	struct rpcrdma_call *call = NULL;
	uint32_t v = 0;
	int rc = rpcrdma_call_create(c, P_ECHO, &call);

	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), x);
	rc = rpcrdma_call_run(call);
	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v);
	rpcrdma_call_destroy(call);
	return rc ? rc : v == ~x ? 0 : -EBADMSG;
}

static int quiet_client(const char *url, unsigned sec, bool none)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 60000, .connect_timeout_ms = 20000};
	struct rpcrdma_client *c = NULL;
	struct qstats q0 = {0}, q;
	int rc = rpcrdma_client_create(url, PROG, VERS, &o, &c);
	int bad = 0;

	rc = connect_result(url, rc);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < 3; i++)
		bad += echo_once(c, i * 31u) != 0;
	result(bad == 0, "ECHO x3 (quiet Replies)", "%d bad", bad);
	for (unsigned round = 1; round <= 2; round++) {
		char name[96];

		/* idle past half the send timeout (the probe) and past all of
		 * it (an unproven quiet Send would have closed the connection) */
		for (unsigned k = 0; k < sec * 3; k++)
			usleep(500000);
		rc = call_stats(c, &q);
		snprintf(name, sizeof(name), "idle %u.%u s, then a call answered (round %u)",
			 sec * 3 / 2, sec * 3 % 2 ? 5 : 0, round);
		result(rc == 0, name, "rc %d (%s)", rc, rpcrdma_strerror(rc));
		if (rc)
			break;
		printf("  server: quiet_probes %llu quiet_probes_done %llu send_stalls %llu "
		       "fatal_errors %llu wr_errors %llu\n", (unsigned long long)q.probes,
		       (unsigned long long)q.done, (unsigned long long)q.stalls,
		       (unsigned long long)q.fatal, (unsigned long long)q.wr_errors);
		if (none) {
			snprintf(name, sizeof(name), "no probe: every Reply signaled (round %u)",
				 round);
			result(q.probes == 0 && q.done == 0, name, "probes %llu, completed %llu",
			       (unsigned long long)q.probes, (unsigned long long)q.done);
		} else {
			snprintf(name, sizeof(name),
				 "probe posted and completed while idle (round %u)", round);
			result(q.probes > q0.probes && q.done == q.probes, name,
			       "probes %llu -> %llu, completed %llu",
			       (unsigned long long)q0.probes, (unsigned long long)q.probes,
			       (unsigned long long)q.done);
		}
		snprintf(name, sizeof(name), "no send stall, no failed operation (round %u)", round);
		result(q.stalls == 0 && q.fatal == 0 && q.wr_errors == 0, name,
		       "send_stalls %llu fatal_errors %llu wr_errors %llu",
		       (unsigned long long)q.stalls, (unsigned long long)q.fatal,
		       (unsigned long long)q.wr_errors);
		q0 = q;
	}
	rc = echo_once(c, 12345u);
	result(rc == 0, "ECHO after the idles", "rc %d", rc);
	return quit_and_close(c);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "call"))
		return client(argv[2]);
	if ((argc == 4 || (argc == 5 && !strcmp(argv[4], "none"))) && !strcmp(argv[1], "quiet") &&
	    atoi(argv[3]) > 0 && atoi(argv[3]) < 60)
		return quiet_client(argv[2], (unsigned)atoi(argv[3]), argc == 5);
	fprintf(stderr, "usage: rr_lab_rpc serve URL | call URL | quiet URL SEC [none]\n");
	return 2;
}
