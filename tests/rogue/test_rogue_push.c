/* SPDX-License-Identifier: BSD-2-Clause */
/* Truncation under push mode (draft-talpey-rdma-commit-00 section 2, issue
 * 12 finding 2, docs/security.md "Durable regions"): a client opens a
 * push-mode region on a file (PUSH_OPEN of tools/fileservice/fileservice.h), another
 * client truncates that file with a WRITE, and the first one RDMA Writes
 * into the region and RDMA Commits it. The rule: the file behind an exposed
 * region cannot shrink under it, or an access past the file's end is a
 * Terminate on that connection -- never a signal -- and a Commit answers
 * durable (Status 0) only for bytes that are in the file. The server runs as
 * the rpcrdma-server child process, so a fatal signal is seen as such. */
#include <sys/wait.h>

#include "rogue_t.h"
#include "test.h"
#include "xprt_harness.h"

/* A small Write: the server reads all of it before it can refuse it, so
 * its Terminate is not lost to the TCP reset of a close with unread data. */
enum { REGION = 1u << 20, AT = 512u << 10, LEN = 1024 };

static void push_truncate(bool write_first)
{
	struct rr_fx_child c;
	struct rr_rogue *g;
	struct rt_push p;
	struct rpcrdma_client *cl;
	struct rpcrdma_client_opts co = {.timeout_ms = RT_MS};
	uint8_t *data = malloc(LEN), *back = calloc(1, LEN), *want = calloc(1, LEN);
	char url[64];
	uint32_t n;
	int st, rc;

	if (!rr_th_soft_ok())
		return;
	REQUIRE(data && back && want);
	REQUIRE_EQ(rr_fx_child_prepare(&c), 0);
	REQUIRE_EQ(rr_fx_file(&c.d, "t.bin", 4096, 1), 0);
	REQUIRE_EQ(rr_fx_child_run(&c, 0, 2), 0);
	g = rt_open(c.port, NULL);
	rt_push_open(g, 0x91000001, "t.bin", REGION, &p);
	CHECK_EQ(p.file_off, 4096);

	/* another client truncates the file to one byte */
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", c.port);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &cl), 0);
	rc = fs_write(cl, "t.bin", 0, FS_WRITE_TRUNC, "x", 1, &n);
	printf("  truncating WRITE: %d (%s), file now %lld bytes\n", rc,
	       rc > 0 ? fs_status_str((uint32_t)rc) : "ok", rr_fx_file_size(&c.d, "t.bin"));
	CHECK(rc >= 0);   /* an fs_status: done or refused, but answered */

	/* the rogue writes (or not) in the middle of its region, then commits */
	rr_fx_pattern(data, LEN, 2, 0);
	if (write_first) {
		memcpy(want, data, LEN);
		(void)rr_rogue_write(g, p.stag, p.to + AT, data, LEN);
	}
	st = rt_commit(g, 9, p.stag, p.to + AT, LEN);
	printf("  Commit: %d%s\n", st, st == -ECONNRESET ? " (Terminate)" : "");
	/* everybody else is served (a server that died of a signal is not) */
	rt_probe_ok(c.port);
	CHECK(rr_fx_child_alive(&c));
	if (c.reaped && WIFSIGNALED(c.status))
		fprintf(stderr, "  the server died of signal %d\n", WTERMSIG(c.status));
	if (st == 0) {
		/* durable: then the bytes are in the file */
		long long size = rr_fx_file_size(&c.d, "t.bin");

		if (size < (long long)(p.file_off + AT + LEN))
			fprintf(stderr, "  Commit said durable, file has %lld bytes, region ends at %llu\n",
				size, (unsigned long long)(p.file_off + AT + LEN));
		CHECK(size >= (long long)(p.file_off + AT + LEN));
		CHECK_EQ(rr_fx_file_read(&c.d, "t.bin", p.file_off + AT, back, LEN), LEN);
		CHECK_MEM(back, want, LEN);
	} else if (st < 0) {
		/* the connection ended: by a Terminate, not by a dead server */
		CHECK(g->got_term);
	}
	CHECK_EQ(fs_null(cl, NULL, 0), 0);   /* the truncating client's connection */
	rpcrdma_client_destroy(cl);
	rr_rogue_free(g);
	CHECK_EQ(rr_fx_child_stop(&c, RT_MS), 0);   /* a clean exit (ASan: no report) */
	free(data);
	free(back);
	free(want);
}

/* Finding 2 of issue 12: on 630ae3a the RDMA Write into the truncated part
 * killed the server with SIGBUS in the DDP receive path. */
TEST(rogue_finding2_push_write_after_truncate)
{
	push_truncate(true);
}

/* Finding 2, second half: on 630ae3a a Commit of the truncated range
 * answered durable although those bytes were no longer in the file. */
TEST(rogue_finding2_push_commit_after_truncate)
{
	push_truncate(false);
}
