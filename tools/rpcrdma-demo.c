/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-demo: a guided tour of the RPC-over-RDMA v1 mechanisms (RFC 8166)
 * with the example file service (tools/fileservice/fileservice.h). It starts the file
 * server in a forked child on loopback and a client in this process, and
 * runs one step per mechanism: Short message (section 3.5.1), Read chunk
 * (WRITE data), Write chunk (READ data), Long Call and Long Reply
 * (sections 3.5.3-3.5.4), remote invalidation (section 4.2.1 / Send With
 * Invalidate), reliable reply (responder Read chunks + RDMA_DONE, the
 * project's extension), push-mode Write + Commit (draft-talpey-rdma-commit),
 * and a durable WRITE + COMMIT read back after a server restart.
 *
 * Honesty rules: every step verifies its data end to end; the mechanism
 * columns (message form, bytes inline / by RDMA, invalidations) are printed
 * only from transport counters; when the transport or a counter is not
 * available the step says "not available: <reason>" and never invents a
 * number. Exit status 0 only if every available step verified its data. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileservice.h"
#include "faults.h"
#include "hint.h"
#include "rpcrdma/stats.h"

/* ---- the server child ---- */

struct child {
	pid_t pid;
	char url[128];
	char scheme[8];
};

/* Forks a file server over @export on 127.0.0.1:0 (@transport: auto, rdma,
 * tcp). The child reports "scheme port" or "error <errno>" on a pipe. */
/* The tour shows every message form at the inline thresholds a Linux peer
 * advertises (4096); rdma:// alone defaults to larger ones, where the small
 * steps' data would travel inline (docs/transport.md "Inline thresholds"). */
static const struct rpcrdma_client_opts demo_opts = {.inline_size = 4096};

static int child_start(struct child *ch, const char *export_dir, const char *transport)
{
	int p[2];
	char line[128];
	ssize_t n;
	size_t have = 0;

	if (pipe(p) < 0)
		return -errno;
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0)
		return -errno;
	if (ch->pid == 0) {
		struct fs_service svc;
		struct rpcrdma_server *srv = NULL;
		sigset_t sigs;
		int rc, sig;
		const char *scheme = "rdma";

		close(p[0]);
		sigemptyset(&sigs);
		sigaddset(&sigs, SIGTERM);
		sigaddset(&sigs, SIGINT);
		pthread_sigmask(SIG_BLOCK, &sigs, NULL);
		rc = fs_service_init(&svc, export_dir);
		if (!rc) {
			rc = -EPROTONOSUPPORT;
			if (strcmp(transport, "tcp"))
				rc = rpcrdma_server_create("rdma://127.0.0.1:0", NULL, &srv);
			if (rc == -EPROTONOSUPPORT && strcmp(transport, "rdma")) {
				scheme = "tcp";
				rc = rpcrdma_server_create("tcp://127.0.0.1:0", NULL, &srv);
			}
		}
		if (!rc)
			rc = fs_service_register(srv, &svc);
		if (!rc)
			rc = rpcrdma_server_start(srv);
		if (rc) {
			dprintf(p[1], "error %d\n", -rc);
			_exit(1);
		}
		dprintf(p[1], "%s %d\n", scheme, rpcrdma_server_port(srv));
		close(p[1]);
		sigwait(&sigs, &sig);
		rpcrdma_server_destroy(srv);
		fs_service_fini(&svc);
		_exit(0);
	}
	close(p[1]);
	while (have + 1 < sizeof(line) && (n = read(p[0], line + have, sizeof(line) - 1 - have)) > 0)
		have += (size_t)n;
	close(p[0]);
	line[have] = 0;
	{
		int port = 0, err = 0;

		if (sscanf(line, "error %d", &err) == 1 || have == 0) {
			waitpid(ch->pid, NULL, 0);
			ch->pid = -1;
			return err ? -err : -EIO;
		}
		if (sscanf(line, "%7s %d", ch->scheme, &port) != 2 || port <= 0) {
			kill(ch->pid, SIGKILL);
			waitpid(ch->pid, NULL, 0);
			ch->pid = -1;
			return -EIO;
		}
		snprintf(ch->url, sizeof(ch->url), "%s://127.0.0.1:%d", ch->scheme, port);
	}
	return 0;
}

static int child_stop(struct child *ch, int sig)
{
	int status = 0;

	if (ch->pid <= 0)
		return 0;
	kill(ch->pid, sig);
	waitpid(ch->pid, &status, 0);
	ch->pid = -1;
	return status;
}

/* ---- transport counters ----
 * Every mechanism column comes from the client's transport counters
 * (rpcrdma_client_stats, include/rpcrdma/stats.h), read before and after
 * the step: what this client's connection actually sent and received. The
 * server runs in another process; its side shows in what the client
 * received (forms, invalidations of our STags, bytes it placed or pulled). */
static struct rpcrdma_xprt_stats st_before;
static int st_rc;

static void meas_begin(struct rpcrdma_client *c)
{
	st_rc = c ? rpcrdma_client_stats(c, &st_before) : -ENOTCONN;
}

/* The counters' change since meas_begin, or NULL when not available. */
static const struct rpcrdma_xprt_stats *meas_end(struct rpcrdma_client *c,
						 struct rpcrdma_xprt_stats *d)
{
	struct rpcrdma_xprt_stats now;

	if (st_rc || !c || rpcrdma_client_stats(c, &now))
		return NULL;
	rpcrdma_xprt_stats_diff(&now, &st_before, d);
	return d;
}

static const char *counters_unavailable(const char *scheme)
{
	if (!strcmp(scheme, "tcp"))
		return "not available: tcp:// sends RPC records (RFC 5531 section 11), it has no "
		       "RPC-over-RDMA message forms, chunks or invalidations";
	return "not available: the transport gave no counters";
}

/* "RDMA_MSG x1, RDMA_DONE x1" */
static void forms(char *buf, size_t n, uint64_t msg, uint64_t nomsg, uint64_t err, uint64_t done)
{
	size_t o = 0;

	buf[0] = 0;
#define F(v, name)                                                                            \
	if (v && o < n)                                                                       \
		o += (size_t)snprintf(buf + o, n - o, "%s%s x%llu", o ? ", " : "", name,      \
				      (unsigned long long)v);
	F(msg, "RDMA_MSG")
	F(nomsg, "RDMA_NOMSG")
	F(err, "RDMA_ERROR")
	F(done, "RDMA_DONE")
#undef F
	if (!o)
		snprintf(buf, n, "none");
}

/* ---- output ---- */

struct summary {
	const char *step;
	const char *mech;
	char result[96];
	double ms;
};

static struct summary sums[16];
static unsigned nsums;
static int failures;

static void row(const char *k, const char *fmt, ...)
{
	va_list ap;

	printf("  %-16s ", k);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void step_begin(unsigned n, const char *title, const char *mech, const char *rpc)
{
	printf("\n== step %u: %s ==\n", n, title);
	row("mechanism", "%s", mech);
	row("rpc", "%s", rpc);
}

static void step_end(const char *step, const char *mech, const char *scheme, double ms,
		     int verified, const char *detail, const struct rpcrdma_xprt_stats *d)
{
	struct summary *s = &sums[nsums++];

	/* verified: 1 ok, 0 failed, -1 not available */
	if (verified >= 0) {
		row("transport", "%s://", scheme);
		if (d) {
			char f[128];

			forms(f, sizeof(f), d->msg_sent, d->nomsg_sent, d->error_sent, d->done_sent);
			row("sent", "%s", f);
			forms(f, sizeof(f), d->msg_recv, d->nomsg_recv, d->error_recv, d->done_recv);
			row("received", "%s", f);
			row("chunks", "Read %llu, Write %llu, Reply %llu",
			    (unsigned long long)d->read_chunks, (unsigned long long)d->write_chunks,
			    (unsigned long long)d->reply_chunks);
			row("bytes inline", "%llu sent, %llu received (RPC-over-RDMA headers included)",
			    (unsigned long long)d->inline_sent_bytes,
			    (unsigned long long)d->inline_recv_bytes);
			row("bytes by RDMA", "%llu out of our memory (the server's RDMA Read), %llu "
			    "into it (the server's RDMA Write, or our RDMA Read of a reply)",
			    (unsigned long long)d->total_rdma_req,
			    (unsigned long long)d->total_rdma_rep);
			row("invalidations", "remote %llu (by the server's Send With Invalidate), "
			    "local %llu", (unsigned long long)d->remote_inv,
			    (unsigned long long)d->local_inv);
			if (d->push_writes || d->commits || d->commit_errors)
				row("push mode", "%llu RDMA Write(s), %llu bytes, %llu RDMA Commit(s) "
				    "answered durable, %llu failed", (unsigned long long)d->push_writes,
				    (unsigned long long)d->push_write_bytes,
				    (unsigned long long)d->commits,
				    (unsigned long long)d->commit_errors);
			if (tool_faults_sum(d)) {
				printf("  %-16s", "faults");
				tool_faults_print(stdout, "", d);
			}
		} else {
			row("form/bytes/inv", "%s", counters_unavailable(scheme));
		}
		row("latency", "%.3f ms", ms);
	}
	if (verified > 0)
		row("data", "verified: %s", detail);
	else if (verified == 0)
		row("data", "FAILED: %s", detail);
	else
		row("result", "%s", detail);
	s->step = step;
	s->mech = mech;
	s->ms = verified >= 0 ? ms : -1;
	snprintf(s->result, sizeof(s->result), "%s",
		 verified > 0 ? "verified" : verified == 0 ? "FAILED" : "not available");
	if (verified == 0)
		failures++;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (uint8_t)(seed >> 24);
	}
}

/* LIST entry i of step 5: "entry-NNN-" and 200 zeros (about 220 bytes) */
static void list_name(char *buf, size_t cap, unsigned i)
{
	snprintf(buf, cap, "many/entry-%03u-%0200u", i, 0u);
}

struct verify_ctx {
	unsigned i, bad;
};

static void list_verify(void *arg, const struct fs_dirent *de)
{
	struct verify_ctx *vc = arg;
	char want[FS_NAME_MAX + 8];

	list_name(want, sizeof(want), vc->i);
	if (strcmp(de->name, want + 5) || de->type != FS_TYPE_FILE || de->size != vc->i)
		vc->bad++;
	vc->i++;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rpcrdma-demo [--transport auto|rdma|tcp] [--keep] [--help]\n"
		"\n"
		"Starts the example file server (forked child) and a client on loopback and\n"
		"tours the RPC-over-RDMA mechanisms, one table per step. Steps whose\n"
		"mechanism is not available say so. Exit 0 if every available step\n"
		"verified its data.\n"
		"  --transport T  rdma, tcp, or auto (default: rdma if built, else tcp)\n"
		"  --keep         keep the temporary export directory\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"transport", required_argument, NULL, 't'},
		{"keep", no_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *transport = "auto";
	bool keep = false;
	char dir[64], path[128];
	struct child ch = {.pid = -1};
	struct rpcrdma_client *c = NULL;
	const uint32_t big = 1024 * 1024;
	uint8_t *data = NULL, *back = NULL;
	uint32_t n, got;
	bool eof;
	uint64_t t0;
	double ms;
	int rc, opt;
	char detail[160];
	unsigned stepno = 0;
	struct rpcrdma_xprt_stats dlt;

	while ((opt = getopt_long(argc, argv, "t:kh", lopts, NULL)) != -1) {
		switch (opt) {
		case 't':
			if (strcmp(optarg, "auto") && strcmp(optarg, "rdma") && strcmp(optarg, "tcp")) {
				fprintf(stderr, "rpcrdma-demo: --transport must be auto, rdma or tcp\n");
				return 2;
			}
			transport = optarg;
			break;
		case 'k': keep = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/rpcrdma-demo-XXXXXX");
	if (!mkdtemp(dir)) {
		fprintf(stderr, "rpcrdma-demo: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	data = malloc(big);
	back = malloc(big);
	if (!data || !back) {
		fprintf(stderr, "rpcrdma-demo: out of memory\n");
		return 1;
	}
	fill(data, big, 1);

	rc = child_start(&ch, dir, transport);
	if (rc) {
		fprintf(stderr, "rpcrdma-demo: cannot start the server (%s transport): %s\n",
			transport, rpcrdma_strerror(rc));
		if (rc == -EPROTONOSUPPORT)
			fprintf(stderr, "rpcrdma-demo: that transport is not available in this build\n");
		goto out;
	}
	printf("rpcrdma-demo (librpcrdma %s): file server (program 0x%08x v%u) at %s, export %s\n",
	       rpcrdma_version(), FS_PROG, FS_VERS, ch.url, dir);
	if (!strcmp(ch.scheme, "tcp"))
		printf("note: rdma:// is not available in this build (rpcrdma_server_create "
		       "answered -EPROTONOSUPPORT);\n      the tour runs over tcp://, where every "
		       "RDMA mechanism is reported as not available.\n");
	rc = rpcrdma_client_create(ch.url, FS_PROG, FS_VERS, &demo_opts, &c);
	if (rc) {
		fprintf(stderr, "rpcrdma-demo: cannot connect to %s: %s%s\n", ch.url,
			rpcrdma_strerror(rc), tool_hint(rc, ch.url, 1));
		goto out;
	}

	/* 1. Short message: NULL */
	step_begin(++stepno, "Short message", "RDMA_MSG, everything inline in one Send",
		   "NULL()");
	meas_begin(c);
	t0 = fs_now_ns();
	rc = fs_null(c, NULL, 0);
	ms = (double)(fs_now_ns() - t0) / 1e6;
	snprintf(detail, sizeof(detail), rc ? "%s" : "empty reply received",
		 rpcrdma_strerror(rc));
	step_end("Short message", "RDMA_MSG inline", ch.scheme, ms, rc == 0, detail, meas_end(c, &dlt));

	/* 2. Read chunk: WRITE 1 MiB, DDP-eligible argument */
	step_begin(++stepno, "Read chunk (WRITE of 1 MiB)",
		   "RDMA_MSG with a Read chunk: the server pulls the data with RDMA Read",
		   "WRITE(\"tour.bin\", 0, CREATE|TRUNC, 1048576 bytes DDP-eligible)");
	meas_begin(c);
	t0 = fs_now_ns();
	rc = fs_write(c, "tour.bin", 0, FS_WRITE_CREATE | FS_WRITE_TRUNC, data, big, &n);
	ms = (double)(fs_now_ns() - t0) / 1e6;
	{
		int ok = rc == FS_OK && n == big;

		if (ok) {
			/* read back to verify what landed in the file */
			snprintf(path, sizeof(path), "%s/tour.bin", dir);
			FILE *f = fopen(path, "rb");

			memset(back, 0, big);
			ok = f && fread(back, 1, big, f) == big && !memcmp(back, data, big);
			if (f)
				fclose(f);
		}
		snprintf(detail, sizeof(detail), ok ? "the file holds the 1048576 bytes sent"
						    : "rc=%d count=%u, or file content differs",
			 rc, n);
		step_end("Read chunk", "WRITE data as Read chunk", ch.scheme, ms, ok, detail, meas_end(c, &dlt));
	}

	/* 3. Write chunk: READ 1 MiB into a sink */
	step_begin(++stepno, "Write chunk (READ of 1 MiB)",
		   "RDMA_MSG with a Write chunk: the server places the data with RDMA Write",
		   "READ(\"tour.bin\", 0, 1048576) into a registered sink");
	memset(back, 0, big);
	meas_begin(c);
	t0 = fs_now_ns();
	rc = fs_read(c, "tour.bin", 0, back, big, &got, &eof);
	ms = (double)(fs_now_ns() - t0) / 1e6;
	{
		int ok = rc == FS_OK && got == big && !memcmp(back, data, big);

		snprintf(detail, sizeof(detail),
			 ok ? "1048576 bytes equal to what was written" : "rc=%d got=%u or differs",
			 rc, got);
		step_end("Write chunk", "READ data as Write chunk", ch.scheme, ms, ok, detail, meas_end(c, &dlt));
	}

	/* 4. Long Call: ECHO with 64 KiB of inline arguments */
	{
		const uint32_t len = 64 * 1024;
		void *echo = NULL;
		uint32_t elen = 0;

		step_begin(++stepno, "Long Call (ECHO of 64 KiB inline arguments)",
			   "RDMA_NOMSG: the whole Call in a position-zero Read chunk",
			   "ECHO(opaque<65536>, not DDP-eligible)");
		meas_begin(c);
	t0 = fs_now_ns();
		rc = fs_echo(c, data, len, &echo, &elen);
		ms = (double)(fs_now_ns() - t0) / 1e6;
		{
			int ok = rc == 0 && elen == len && !memcmp(echo, data, len);

			snprintf(detail, sizeof(detail),
				 ok ? "65536 bytes echoed back equal" : "rc=%d len=%u or differs", rc,
				 elen);
			step_end("Long Call", "RDMA_NOMSG + position-zero Read chunk", ch.scheme, ms,
				 ok, detail, meas_end(c, &dlt));
		}
		free(echo);
	}

	/* 5. Long Reply: LIST of 200 entries */
	{
		char sub[96];
		uint32_t cnt = 0;
		unsigned bad = 0;
		struct verify_ctx vc = {0, 0};
		int ok;

		snprintf(sub, sizeof(sub), "%s/many", dir);
		mkdir(sub, 0755);
		for (unsigned i = 0; i < 200; i++) {
			char name[FS_NAME_MAX + 1];

			list_name(name, sizeof(name), i);
			if (fs_write(c, name, 0, FS_WRITE_CREATE, data, i, &n) != FS_OK)
				bad++;
		}
		step_begin(++stepno, "Long Reply (LIST of 200 entries, about 50 KiB)",
			   "RDMA_NOMSG reply written by the server into the client's Reply chunk "
			   "(RFC 8166 Long Reply)",
			   "LIST(\"many\", 0, 1000), the client knows the reply is at least 40 KiB");
		meas_begin(c);
		t0 = fs_now_ns();
		/* A known minimum above the inline threshold: the client provides
		 * a Reply chunk even with reliable reply negotiated (5.3.1). */
		rc = fs_list_range(c, "many", 0, 1000, 40 * 1024, list_verify, &vc, &cnt, &eof);
		ms = (double)(fs_now_ns() - t0) / 1e6;
		ok = rc == FS_OK && bad == 0 && cnt == 200 && eof && vc.i == 200 && vc.bad == 0;
		snprintf(detail, sizeof(detail),
			 ok ? "200 entries, names, types and sizes as created"
			    : "rc=%d n=%u mismatches=%u",
			 rc, cnt, vc.bad + bad);
		{
			const struct rpcrdma_xprt_stats *d = meas_end(c, &dlt);

			/* over rdma:// the counters must show the Reply chunk used */
			if (ok && d && (d->reply_chunks == 0 || d->done_sent)) {
				ok = 0;
				snprintf(detail, sizeof(detail),
					 "the reply did not come through a Reply chunk "
					 "(reply chunks %llu, RDMA_DONE sent %llu)",
					 (unsigned long long)d->reply_chunks,
					 (unsigned long long)d->done_sent);
			}
			step_end("Long Reply", "RDMA_NOMSG + Reply chunk", ch.scheme, ms, ok,
				 detail, d);
		}
	}

	/* 6. remote invalidation: proven from the counters */
	step_begin(++stepno, "Remote invalidation",
		   "the server answers with Send With Invalidate: the client's Write chunk "
		   "STag is invalidated by the peer, no local invalidation",
		   "READ(\"tour.bin\", 0, 65536) into a sink, no Reply chunk");
	if (!strcmp(ch.scheme, "tcp")) {
		step_end("Remote invalidation", "Send With Invalidate", ch.scheme, 0, -1,
			 "not available: needs rdma:// (RFC 8166 section 4.2.1 / RFC 8797)", NULL);
	} else {
		const struct rpcrdma_xprt_stats *d;
		int ok;

		memset(back, 0, 65536);
		meas_begin(c);
		t0 = fs_now_ns();
		rc = fs_read(c, "tour.bin", 0, back, 65536, &got, &eof);
		ms = (double)(fs_now_ns() - t0) / 1e6;
		d = meas_end(c, &dlt);
		ok = rc == FS_OK && got == 65536 && !memcmp(back, data, 65536);
		if (ok && d && d->remote_inv > 0 && d->local_inv == 0)
			snprintf(detail, sizeof(detail),
				 "65536 bytes equal; counters: %llu STag(s) invalidated by the "
				 "server, 0 locally",
				 (unsigned long long)d->remote_inv);
		else {
			snprintf(detail, sizeof(detail),
				 "rc=%d got=%u; counters remote_inv=%lld local_inv=%lld (want >0 / 0)",
				 rc, got, d ? (long long)d->remote_inv : -1,
				 d ? (long long)d->local_inv : -1);
			ok = 0;
		}
		step_end("Remote invalidation", "Send With Invalidate", ch.scheme, ms, ok, detail, d);
	}

	/* 7. reliable reply: a READ whose data has no client Write chunk */
	step_begin(++stepno, "Reliable reply",
		   "the server offers the reply as a responder Read chunk, the client pulls it "
		   "and sends RDMA_DONE so the server can release it",
		   "READ(\"tour.bin\", 0, 262144) without a client Write chunk");
	if (!strcmp(ch.scheme, "tcp")) {
		step_end("Reliable reply", "responder Read chunk + RDMA_DONE", ch.scheme, 0, -1,
			 "not available: needs rdma:// with the reliable-reply extension", NULL);
	} else {
		const struct rpcrdma_xprt_stats *d;
		struct rpcrdma_call *call = NULL;
		struct rpcrdma_xdr_enc *e;
		struct rpcrdma_xdr_dec *dd;
		const void *p = NULL;
		uint32_t st = 1, len = 0;
		bool b;
		int ok;

		meas_begin(c);
		t0 = fs_now_ns();
		rc = rpcrdma_call_create(c, FS_READ, &call);
		if (!rc) {
			e = rpcrdma_call_args(call);
			rpcrdma_xdr_put_string(e, "tour.bin");
			rpcrdma_xdr_put_u64(e, 0);
			rpcrdma_xdr_put_u32(e, 262144);
			rc = rpcrdma_xdr_enc_error(e);
		}
		if (!rc)
			rc = rpcrdma_call_run(call);
		if (!rc) {
			dd = rpcrdma_call_results(call);
			rc = rpcrdma_xdr_get_u32(dd, &st);
			if (!rc)
				rc = rpcrdma_xdr_get_bool(dd, &b);
			if (!rc)
				rc = rpcrdma_xdr_get_ddp(dd, &p, &len);
		}
		ms = (double)(fs_now_ns() - t0) / 1e6;
		ok = rc == 0 && st == FS_OK && len == 262144 && !memcmp(p, data, 262144);
		if (call)
			rpcrdma_call_destroy(call);
		d = meas_end(c, &dlt);
		if (ok && d && d->done_sent >= 1) {
			snprintf(detail, sizeof(detail),
				 "262144 bytes equal; counters: reply pulled by RDMA Read, %llu "
				 "RDMA_DONE sent", (unsigned long long)d->done_sent);
			step_end("Reliable reply", "responder Read chunk + RDMA_DONE", ch.scheme, ms,
				 1, detail, d);
		} else if (ok) {
			step_end("Reliable reply", "responder Read chunk + RDMA_DONE", ch.scheme, ms,
				 -1, "not available: the data came back, but the connection did not "
				 "use reliable reply (no RDMA_DONE in the counters)", d);
		} else {
			snprintf(detail, sizeof(detail), "rc=%d status=%u len=%u or data differs", rc,
				 st, len);
			step_end("Reliable reply", "responder Read chunk + RDMA_DONE", ch.scheme, ms,
				 0, detail, d);
		}
	}

	/* 8. push mode: Write + Commit, kill -9, restart, READ back */
	step_begin(++stepno, "Push-mode write with Commit, then server restart",
		   "client RDMA Writes into a durable file-backed region and RDMA Commits it "
		   "(no server code in the path); the server is killed (SIGKILL) right after "
		   "the Commit completed and restarted; the data is read back with READ",
		   "PUSH_OPEN(\"push.log\", 65536); RDMA Write 4096 + RDMA Commit; kill -9; READ");
	{
		struct rpcrdma_push_region reg;
		uint64_t foff = 0;
		uint32_t cst = 0;

		rc = fs_push_open(c, "push.log", 65536, &reg, &foff);
		if (rc == FS_ENOTSUP) {
			step_end("Push-mode Write+Commit", "RDMA Write + RDMA Commit", ch.scheme, 0, -1,
				 !strcmp(ch.scheme, "tcp")
					 ? "not available: tcp:// cannot do RDMA Commit (PUSH_OPEN "
					   "answered FS_ENOTSUP)"
					 : "not available: this connection did not negotiate RDMA "
					   "Commit (PUSH_OPEN answered FS_ENOTSUP)",
				 NULL);
		} else if (rc != FS_OK) {
			snprintf(detail, sizeof(detail), "PUSH_OPEN failed: %d (%s)", rc,
				 rc > 0 ? fs_status_str((uint32_t)rc) : rpcrdma_strerror(rc));
			step_end("Push-mode Write+Commit", "RDMA Write + RDMA Commit", ch.scheme, 0, 0,
				 detail, NULL);
		} else {
			const struct rpcrdma_xprt_stats *d;
			int ok;

			meas_begin(c);
			t0 = fs_now_ns();
			rc = rpcrdma_push_write(c, &reg, 0, data + 8192, 4096, RPCRDMA_PUSH_COMMIT,
						&cst);
			ms = (double)(fs_now_ns() - t0) / 1e6;
			d = meas_end(c, &dlt);
			/* durable: kill the server at once, no chance to flush */
			child_stop(&ch, SIGKILL);
			rpcrdma_client_destroy(c);
			c = NULL;
			ok = rc == 0 && d && d->commits == 1 && d->sends == 0;
			if (ok) {
				rc = child_start(&ch, dir, transport);
				ok = rc == 0;
				if (ok)
					printf("  %-16s server killed (SIGKILL) after the Commit, restarted "
					       "at %s\n", "restart", ch.url);
			}
			if (ok) {
				rc = rpcrdma_client_create(ch.url, FS_PROG, FS_VERS, &demo_opts, &c);
				ok = rc == 0;
			}
			if (ok) {
				memset(back, 0, 4096);
				rc = fs_read(c, "push.log", foff, back, 4096, &got, &eof);
				ok = rc == FS_OK && got == 4096 && !memcmp(back, data + 8192, 4096);
			}
			if (ok)
				snprintf(detail, sizeof(detail),
					 "4096 bytes at file offset %llu read back after kill -9 and "
					 "restart, equal; no RPC was sent for the write",
					 (unsigned long long)foff);
			else
				snprintf(detail, sizeof(detail),
					 "rc=%d commit status %u (or data lost after the restart)", rc,
					 cst);
			step_end("Push-mode Write+Commit", "RDMA Write + RDMA Commit", ch.scheme, ms, ok,
				 detail, d);
		}
	}

	/* 9. durability across a server restart (pull-mode WRITE + COMMIT) */
	step_begin(++stepno, "Durable WRITE + COMMIT, then server restart",
		   "WRITE (Read chunk) + COMMIT (fsync); the server is killed (SIGKILL) and "
		   "restarted; the data is read back through the new server",
		   "WRITE(\"durable.log\", 0, 4096) + COMMIT; kill -9; READ");
	{
		uint64_t tw;
		int ok;

		if (!c && rpcrdma_client_create(ch.url, FS_PROG, FS_VERS, &demo_opts, &c))
			c = NULL;
		meas_begin(c);
		t0 = fs_now_ns();
		rc = c ? fs_write(c, "durable.log", 0, FS_WRITE_CREATE | FS_WRITE_TRUNC, data + 4096,
			      4096, &n) : -ENOTCONN;
		if (rc == FS_OK)
			rc = fs_commit(c, "durable.log");
		tw = fs_now_ns() - t0;
		{
			const struct rpcrdma_xprt_stats *d9 = meas_end(c, &dlt);

			if (d9)
				dlt = *d9;
			else
				memset(&dlt, 0xff, sizeof(dlt));
		}
		rpcrdma_client_destroy(c);
		c = NULL;
		child_stop(&ch, SIGKILL);
		ok = rc == FS_OK;
		if (ok) {
			rc = child_start(&ch, dir, transport);
			ok = rc == 0;
			if (ok)
				printf("  %-16s server restarted at %s\n", "restart", ch.url);
		}
		if (ok) {
			rc = rpcrdma_client_create(ch.url, FS_PROG, FS_VERS, &demo_opts, &c);
			ok = rc == 0;
		}
		if (ok) {
			memset(back, 0, 4096);
			rc = fs_read(c, "durable.log", 0, back, 8192, &got, &eof);
			ok = rc == FS_OK && got == 4096 && eof && !memcmp(back, data + 4096, 4096);
		}
		snprintf(detail, sizeof(detail),
			 ok ? "4096 bytes read back after the restart, equal"
			    : "lost or different after the restart (rc=%d)",
			 rc);
		step_end("Durable WRITE+COMMIT + restart", "Read chunk + fsync", ch.scheme,
			 (double)tw / 1e6, ok, detail,
			 dlt.sends == UINT64_MAX ? NULL : &dlt);
	}

	/* summary */
	printf("\n%-32s %-38s %-14s %10s\n", "step",
	       strcmp(ch.scheme, "tcp") ? "mechanism" : "mechanism (on rdma://; not on tcp)",
	       "data", "latency");
	for (unsigned i = 0; i < nsums; i++) {
		char lat[32] = "-";

		if (sums[i].ms >= 0)
			snprintf(lat, sizeof(lat), "%.3f ms", sums[i].ms);
		printf("%-32s %-38s %-14s %10s\n", sums[i].step, sums[i].mech, sums[i].result, lat);
	}
	printf("\ntransport: %s; %s\n", ch.scheme,
	       failures ? "SOME STEPS FAILED" : "every available step verified its data");
out:
	if (c)
		rpcrdma_client_destroy(c);
	child_stop(&ch, SIGTERM);
	if (!keep && strncmp(dir, "/tmp/rpcrdma-demo-", 18) == 0) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "rpcrdma-demo: could not remove %s\n", dir);
	} else if (keep) {
		printf("export directory kept: %s\n", dir);
	}
	free(data);
	free(back);
	return (failures || nsums == 0) ? 1 : 0;
}
