/* SPDX-License-Identifier: BSD-2-Clause */
/* Public transport counters (include/rpcrdma/stats.h) and push mode
 * (include/rpcrdma/push.h, draft-talpey-rdma-commit-00 section 2) over
 * rdma:// on the soft iWARP provider:
 *  - the counters move as expected for each message form (RDMA_MSG short and
 *    chunked, RDMA_NOMSG Long Call, Long Reply (Reply chunk, or a Position-zero Read
 *    chunk + RDMA_DONE under reliable reply), RDMA_ERROR) and for remote
 *    vs local invalidation; -EOPNOTSUPP on tcp://;
 *  - Write + Commit into a durable file-backed region exposed by a handler,
 *    contents checked from another process;
 *  - Commit where it cannot be used: tcp://, a peer that did not advertise
 *    RDMA_COMMIT (both directions), all -EOPNOTSUPP, nothing sent;
 *  - Commit beyond the region: protection error, the connection is
 *    terminated (draft 5.1 item 2), the region released, the client
 *    reconnects and RPCs work again;
 *  - revoke then write: protection error; region released on disconnect. */
#include "test.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proto/conn/privdata.h"
#include "rpc/xbuf.h"
#include "rpcrdma/push.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"
#include "transport/rdma/tp.h"
#include "xprt_harness.h"

#define PROG 0x2000019au
#define P_ECHO 1u   /* u32 -> u32 + 1 */
#define P_BULK 2u   /* opaque<> (DDP) -> opaque<> (DDP) */
#define P_BIG 3u    /* u32 n -> opaque<n> inline (Long Reply) */
#define P_INL 4u    /* opaque<> inline -> u32 length (Long Call) */
#define P_OPEN 5u   /* string path, u64 size -> i32 rc [region, u64 id] */

struct rr_xprt_class;
extern const struct rr_xprt_class rr_xprt_rdma_class;
const void *volatile rr_test_pull_rdma_push = &rr_xprt_rdma_class;

static int h_bulk(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_ddp(rpcrdma_req_args(r), &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_ddp(rpcrdma_req_results(r), p, len);
	return RPCRDMA_SVC_OK;
}

static int h_big(struct rpcrdma_req *r, void *ctx)
{
	uint32_t n;
	uint8_t *b;
	int rc;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &n) || n > (1u << 20))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	b = malloc(n ? n : 1);
	if (!b)
		return RPCRDMA_SVC_SYSTEM_ERR;
	memset(b, 0x5a, n);
	rc = rpcrdma_xdr_put_opaque(rpcrdma_req_results(r), b, n);
	free(b);
	return rc ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static int h_inl(struct rpcrdma_req *r, void *ctx)
{
	const void *p;
	uint32_t len;

	(void)ctx;
	if (rpcrdma_xdr_get_opaque(rpcrdma_req_args(r), 1u << 20, &p, &len))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), len);
	return RPCRDMA_SVC_OK;
}

/* ---- push regions of the test server ---- */
struct region {
	struct rpcrdma_durable_map map;
};

static atomic_int released_count;
static _Atomic uint64_t last_id;

static void region_released(void *arg)
{
	struct region *g = arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
	atomic_fetch_add(&released_count, 1);
}

static int h_open(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	struct rpcrdma_push_region reg;
	struct rpcrdma_mr_attr a;
	struct region *g;
	char path[256];
	uint64_t size, id = 0;
	int rc;

	(void)ctx;
	if (rpcrdma_xdr_get_string(d, path, sizeof(path)) || rpcrdma_xdr_get_u64(d, &size))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rc = rpcrdma_req_push_capable(r);
	g = calloc(1, sizeof(*g));
	if (!g)
		return RPCRDMA_SVC_SYSTEM_ERR;
	g->map.fd = -1;
	if (!rc)
		rc = rpcrdma_durable_map(path, size, &g->map);
	if (!rc)
		rc = rpcrdma_durable_mr_attr(&g->map, g->map.addr, size, 0, &a);
	if (!rc)
		rc = rpcrdma_req_push_expose(r, &a, region_released, g, &reg, &id);
	if (rc) {
		/* not exposed: ours to free (also when expose itself failed) */
		(void)rpcrdma_durable_unmap(&g->map);
		free(g);
		rpcrdma_xdr_put_i32(e, rc);
		return RPCRDMA_SVC_OK;
	}
	atomic_store(&last_id, id);
	rpcrdma_xdr_put_i32(e, 0);
	rpcrdma_xdr_put_push_region(e, &reg);
	rpcrdma_xdr_put_u64(e, id);
	return RPCRDMA_SVC_OK;
}

static struct rpcrdma_server *start(const char *scheme, char *url, size_t n)
{
	struct rpcrdma_server_opts o = {.threads = 2};
	struct rpcrdma_server *s = NULL;
	char u[64];

	snprintf(u, sizeof(u), "%s://127.0.0.1:0", scheme);
	REQUIRE_EQ(rpcrdma_server_create(u, &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_ECHO, rr_th_h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_BULK, h_bulk, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_BIG, h_big, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_INL, h_inl, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, P_OPEN, h_open, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	snprintf(url, n, "%s://127.0.0.1:%d", scheme, rpcrdma_server_port(s));
	return s;
}

static struct rpcrdma_client *connect_to(const char *url)
{
	/* 4096: the message-form expectations below are those of a Linux
	 * peer's thresholds (rdma:// alone would default to larger ones) */
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 5000,
					.inline_size = 4096};
	struct rpcrdma_client *c = NULL;

	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	return c;
}

/* A client that conveys every DDP-eligible item in a chunk, even small ones
 * (no_inline_ddp; tests/transport/test_small_items_inline.c covers the inline forms). */
static struct rpcrdma_client *connect_chunks(const char *url)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 10000, .connect_timeout_ms = 5000,
					.no_inline_ddp = true, .inline_size = 4096};
	struct rpcrdma_client *c = NULL;

	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	return c;
}

static void snap(struct rpcrdma_client *c, struct rpcrdma_server *s,
		 struct rpcrdma_xprt_stats *cs, struct rpcrdma_xprt_stats *ss)
{
	REQUIRE_EQ(rpcrdma_client_stats(c, cs), 0);
	REQUIRE_EQ(rpcrdma_server_stats(s, ss), 0);
}

/* Differences since @c0/@s0 after one call. */
static void delta(struct rpcrdma_client *c, struct rpcrdma_server *s,
		  struct rpcrdma_xprt_stats *c0, struct rpcrdma_xprt_stats *s0,
		  struct rpcrdma_xprt_stats *dc, struct rpcrdma_xprt_stats *ds)
{
	struct rpcrdma_xprt_stats c1, s1;

	/* the server counts its Send when posting it, before the Reply
	 * reaches us: nothing else runs, so the snapshot is stable */
	snap(c, s, &c1, &s1);
	rpcrdma_xprt_stats_diff(&c1, c0, dc);
	rpcrdma_xprt_stats_diff(&s1, s0, ds);
	*c0 = c1;
	*s0 = s1;
}

static int call_echo(struct rpcrdma_client *c, uint32_t v)
{
	struct rpcrdma_call *call;
	uint32_t r = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_ECHO, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
	rpcrdma_call_set_reply_hint(call, 64);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &r);
	if (!rc && r != v + 1)
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

TEST(stats_message_forms)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_xprt_stats c0, s0, dc, ds;
	struct rpcrdma_call *call;
	char url[64];
	const uint32_t big = 65536;
	uint8_t *src = malloc(big), *sink = malloc(big);
	const void *p;
	uint32_t len;

	if (!rr_th_soft_ok()) {
		free(src);
		free(sink);
		return;
	}
	REQUIRE(src && sink);
	for (uint32_t i = 0; i < big; i++)
		src[i] = (uint8_t)(i * 7);
	s = start("rdma", url, sizeof(url));
	c = connect_chunks(url);   /* small items in chunks too: the forms below */
	snap(c, s, &c0, &s0);
	CHECK_EQ(c0.connections, 1);
	CHECK(strcmp(c0.transport, "rdma") == 0);

	/* Short: RDMA_MSG both ways, no chunk, no STag */
	REQUIRE_EQ(call_echo(c, 41), 0);
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.msg_sent, 1);
	CHECK_EQ(dc.msg_recv, 1);
	CHECK_EQ(dc.nomsg_sent + dc.nomsg_recv + dc.error_recv + dc.done_sent, 0);
	CHECK_EQ(dc.short_msgs, 1);
	CHECK_EQ(dc.read_chunks + dc.write_chunks + dc.reply_chunks, 0);
	CHECK_EQ(dc.remote_inv + dc.local_inv, 0);
	CHECK_EQ(dc.total_rdma_req + dc.total_rdma_rep, 0);
	CHECK(dc.inline_sent_bytes > 28 && dc.inline_sent_bytes < 200);
	CHECK_EQ(ds.msg_recv, 1);
	CHECK_EQ(ds.msg_sent, 1);
	CHECK_EQ(ds.short_msgs, 1);

	/* Read chunk (argument) + Write chunk (result): RDMA_MSG with chunks,
	 * the Write chunk STag invalidated by the server (both set R), the
	 * Read chunk STag invalidated locally */
	{
		struct rpcrdma_ddp_sink sk = {sink, big};

		memset(sink, 0, big);
		REQUIRE_EQ(rpcrdma_call_create(c, P_BULK, &call), 0);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, big), 0);
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rpcrdma_call_set_reply_hint(call, 64);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &len), 0);
		CHECK_EQ(len, big);
		CHECK(memcmp(sink, src, big) == 0);
		rpcrdma_call_destroy(call);
	}
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.msg_sent, 1);
	CHECK_EQ(dc.msg_recv, 1);
	CHECK_EQ(dc.chunked_msgs, 1);
	CHECK_EQ(dc.read_chunks, 1);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.reply_chunks, 0);
	CHECK_EQ(dc.total_rdma_req, big);
	CHECK_EQ(dc.total_rdma_rep, big);
	CHECK_EQ(dc.remote_inv, 1);
	CHECK_EQ(dc.local_inv, 1);
	CHECK(dc.inline_sent_bytes < 400);  /* the data did not go inline */
	CHECK_EQ(ds.rdma_read_bytes, big);
	CHECK_EQ(ds.rdma_write_bytes, big);
	CHECK_EQ(ds.chunked_msgs, 1);

	/* Write chunk only: remote invalidation, no local one */
	{
		struct rpcrdma_ddp_sink sk = {sink, big};

		REQUIRE_EQ(rpcrdma_call_create(c, P_BULK, &call), 0);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, 100), 0);
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rpcrdma_call_set_reply_hint(call, 64);
		REQUIRE_EQ(rpcrdma_call_run(call), 0);
		rpcrdma_call_destroy(call);
	}
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.read_chunks, 0);
	CHECK_EQ(dc.write_chunks, 1);
	CHECK_EQ(dc.total_rdma_rep, 100);
	CHECK_EQ(dc.remote_inv, 1);
	CHECK_EQ(dc.local_inv, 0);

	/* Long Call: 64 KiB inline argument -> RDMA_NOMSG */
	REQUIRE_EQ(rpcrdma_call_create(c, P_INL, &call), 0);
	REQUIRE_EQ(rpcrdma_xdr_put_opaque(rpcrdma_call_args(call), src, big), 0);
	rpcrdma_call_set_reply_hint(call, 64);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &len), 0);
	CHECK_EQ(len, big);
	rpcrdma_call_destroy(call);
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.nomsg_sent, 1);
	CHECK_EQ(dc.msg_sent, 0);
	CHECK_EQ(dc.msg_recv, 1);
	CHECK_EQ(dc.long_msgs, 1);
	CHECK(dc.total_rdma_req > big);
	CHECK_EQ(ds.nomsg_recv, 1);
	CHECK_EQ(ds.long_msgs, 1);

	/* Long Reply: a 32 KiB inline result. Without reliable reply: the
	 * Reply chunk (RDMA_NOMSG back). With reliable reply negotiated (the
	 * default between librpcrdma peers): the responder exposes the Reply
	 * as a Read chunk, the client pulls it and sends RDMA_DONE. */
	REQUIRE_EQ(rpcrdma_call_create(c, P_BIG, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 32768);
	rpcrdma_call_set_reply_hint(call, 32768 + 128);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	REQUIRE_EQ(rpcrdma_xdr_get_opaque(rpcrdma_call_results(call), 1u << 20, &p, &len), 0);
	CHECK_EQ(len, 32768);
	rpcrdma_call_destroy(call);
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.msg_sent, 1);
	if (dc.done_sent) {
		/* RDMA_NOMSG with a Position-zero Read chunk (draft 4.1.1) */
		CHECK_EQ(dc.done_sent, 1);
		CHECK_EQ(dc.nomsg_recv, 1);
		CHECK_EQ(dc.reply_chunks, 0);
		CHECK_EQ(ds.nomsg_sent, 1);
		/* the server counts the RDMA_DONE when it arrives */
		for (uint64_t dl_ = rr_test_deadline();
		     ds.done_recv == 0 &&
		     rr_test_wait_left(dl_, "ds.done_recv == 0 to turn false");) {
			struct rpcrdma_xprt_stats s1;

			usleep(5000);
			REQUIRE_EQ(rpcrdma_server_stats(s, &s1), 0);
			rpcrdma_xprt_stats_diff(&s1, &s0, &ds);
		}
		CHECK_EQ(ds.done_recv, 1);
		REQUIRE_EQ(rpcrdma_server_stats(s, &s0), 0);
	} else {
		CHECK_EQ(dc.nomsg_recv, 1);
		CHECK_EQ(dc.reply_chunks, 1);
		CHECK_EQ(ds.nomsg_sent, 1);
		CHECK_EQ(ds.reply_chunks, 1);
	}
	CHECK(dc.total_rdma_rep + dc.total_rdma_req >= 32768);

	/* RDMA_ERROR: a DDP-eligible result larger than its Write chunk
	 * (ERR_CHUNK, RFC 8166 section 4.5.2) */
	{
		struct rpcrdma_ddp_sink sk = {sink, 1024};

		REQUIRE_EQ(rpcrdma_call_create(c, P_BULK, &call), 0);
		REQUIRE_EQ(rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), src, 4096), 0);
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		rpcrdma_call_set_reply_hint(call, 64);
		CHECK_EQ(rpcrdma_call_run(call), -EREMOTEIO);
		rpcrdma_call_destroy(call);
	}
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.error_recv, 1);
	CHECK_EQ(dc.err_received, 1);
	CHECK_EQ(dc.msg_recv + dc.nomsg_recv, 0);
	CHECK_EQ(ds.error_sent, 1);
	CHECK_EQ(ds.err_chunk_sent, 1);

	/* the connection is fine afterwards; the requester never receives
	 * RDMA_DONE, the responder never sends one */
	REQUIRE_EQ(call_echo(c, 1), 0);
	delta(c, s, &c0, &s0, &dc, &ds);
	CHECK_EQ(dc.msg_recv, 1);
	CHECK_EQ(c0.done_recv + s0.done_sent, 0);
	CHECK_EQ(c0.done_sent, s0.done_recv);
	CHECK_EQ(c0.fatal_errors + c0.reconnects, 0);
	{
		FILE *f = tmpfile();

		REQUIRE(f);
		CHECK_EQ(rpcrdma_xprt_stats_print(&c0, f), 0);
		CHECK(ftell(f) > 200);
		fclose(f);
	}
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	free(src);
	free(sink);
}

TEST(stats_tcp_unsupported)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_xprt_stats st;
	char url[64];

	s = start("tcp", url, sizeof(url));
	c = connect_to(url);
	REQUIRE_EQ(call_echo(c, 1), 0);
	CHECK_EQ(rpcrdma_client_stats(c, &st), -EOPNOTSUPP);
	/* a tcp:// server has its connection counters, nothing of RDMA */
	memset(&st, 0xa5, sizeof(st));
	CHECK_EQ(rpcrdma_server_stats(s, &st), 0);
	CHECK_EQ(st.connections, 1);
	CHECK(strcmp(st.transport, "tcp") == 0);
	CHECK_EQ(st.sends, 0);
	CHECK_EQ(st.refused_conns, 0);
	CHECK_EQ(rpcrdma_client_stats(NULL, &st), -EINVAL);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
}

/* PUSH_OPEN-like call: the server's rc (negative errno) or 0 + region. */
static int push_open(struct rpcrdma_client *c, const char *path, uint64_t size,
		     struct rpcrdma_push_region *reg, uint64_t *id)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	int32_t st = 0;
	int rc;

	REQUIRE_EQ(rpcrdma_call_create(c, P_OPEN, &call), 0);
	rpcrdma_xdr_put_string(rpcrdma_call_args(call), path);
	rpcrdma_xdr_put_u64(rpcrdma_call_args(call), size);
	rpcrdma_call_set_reply_hint(call, 64);
	rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_i32(d, &st);
		if (!rc && st == 0) {
			rc = rpcrdma_xdr_get_push_region(d, reg);
			if (!rc)
				rc = rpcrdma_xdr_get_u64(d, id);
		}
		if (!rc)
			rc = st;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

static void tmp_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "/tmp/rr-test-push-%s-%d", tag, (int)getpid());
	unlink(buf);
}

/* Another process opens the file and compares [off, off+len) with @want. */
static bool file_has(const char *path, uint64_t off, const uint8_t *want, size_t len)
{
	pid_t pid;
	int status = 0;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open(path, O_RDONLY);
		uint8_t b[4096];
		size_t done = 0;

		if (fd < 0)
			_exit(2);
		while (done < len) {
			size_t n = len - done < sizeof(b) ? len - done : sizeof(b);
			ssize_t got = pread(fd, b, n, (off_t)(off + done));

			if (got <= 0)
				_exit(3);
			if (memcmp(b, want + done, (size_t)got))
				_exit(4);
			done += (size_t)got;
		}
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool wait_released(int want)
{
	for (uint64_t dl = rr_test_deadline(); rr_test_wait_left(dl, "the released count");) {
		if (atomic_load(&released_count) >= want)
			return true;
		usleep(10000);
	}
	return false;
}

TEST(push_write_commit_durable)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_push_region reg;
	struct rpcrdma_xprt_stats cs, ss;
	char url[64], path[128];
	uint8_t data[8192];
	uint64_t id = 0;
	uint32_t st = 99;
	int rel0;

	if (!rr_th_soft_ok())
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + 5);
	tmp_path(path, sizeof(path), "ok");
	rel0 = atomic_load(&released_count);
	s = start("rdma", url, sizeof(url));
	c = connect_to(url);
	CHECK_EQ(rpcrdma_client_push_capable(c), 0);
	REQUIRE_EQ(push_open(c, path, 65536, &reg, &id), 0);
	CHECK_EQ(reg.length, 65536);
	CHECK(reg.stag != 0);
	/* 4 KiB at 0 with Commit, then 4 KiB at 12288 with Commit */
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 4096, RPCRDMA_PUSH_COMMIT, &st), 0);
	CHECK_EQ(st, 0);
	CHECK(file_has(path, 0, data, 4096));
	CHECK_EQ(rpcrdma_push_write(c, &reg, 12288, data + 4096, 4096, 0, NULL), 0);
	CHECK_EQ(rpcrdma_push_commit(c, &reg, 12288, 4096, &st), 0);
	CHECK_EQ(st, 0);
	CHECK(file_has(path, 12288, data + 4096, 4096));
	/* odd sizes and the last byte of the region */
	CHECK_EQ(rpcrdma_push_write(c, &reg, 65535, data, 1, RPCRDMA_PUSH_COMMIT, &st), 0);
	CHECK(file_has(path, 65535, data, 1));
	/* local range checks: nothing sent */
	CHECK_EQ(rpcrdma_push_write(c, &reg, 65535, data, 2, RPCRDMA_PUSH_COMMIT, &st), -ERANGE);
	CHECK_EQ(rpcrdma_push_commit(c, &reg, 0, 0, &st), -EINVAL);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 1, 0x80, &st), -EINVAL);
	REQUIRE_EQ(rpcrdma_client_stats(c, &cs), 0);
	CHECK_EQ(cs.commits, 3);
	CHECK_EQ(cs.push_writes, 3);
	CHECK_EQ(cs.push_write_bytes, 4096 + 4096 + 1);
	CHECK_EQ(cs.commit_errors + cs.fatal_errors, 0);
	REQUIRE_EQ(rpcrdma_server_stats(s, &ss), 0);
	CHECK_EQ(ss.regions_exposed, 1);
	/* the server's upper layer saw only the PUSH_OPEN call */
	CHECK_EQ(ss.recvs, 1);
	/* RPCs still work on the same connection */
	CHECK_EQ(call_echo(c, 7), 0);
	/* disconnect releases the region */
	rpcrdma_client_destroy(c);
	CHECK(wait_released(rel0 + 1));
	REQUIRE_EQ(rpcrdma_server_stats(s, &ss), 0);
	CHECK_EQ(ss.regions_released, 1);
	rpcrdma_server_destroy(s);
	CHECK(file_has(path, 0, data, 4096));
	unlink(path);
}

TEST(push_tcp_unsupported)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_push_region reg = {1, 4096, 4096, RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE};
	char url[64], path[128];
	uint64_t id;
	uint8_t b[16] = {0};

	tmp_path(path, sizeof(path), "tcp");
	s = start("tcp", url, sizeof(url));
	c = connect_to(url);
	CHECK_EQ(rpcrdma_client_push_capable(c), -EOPNOTSUPP);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, b, 16, RPCRDMA_PUSH_COMMIT, NULL), -EOPNOTSUPP);
	CHECK_EQ(rpcrdma_push_commit(c, &reg, 0, 16, NULL), -EOPNOTSUPP);
	/* the handler's expose answers -EOPNOTSUPP too */
	CHECK_EQ(push_open(c, path, 4096, &reg, &id), -EOPNOTSUPP);
	CHECK_EQ(rpcrdma_server_push_revoke(s, 1), -EOPNOTSUPP);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	unlink(path);
}

/* ---- a peer that did not advertise RDMA_COMMIT (transport level) ---- */

struct raw_client {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
};

static void raw_complete(void *ctx, struct rr_conn_rpc *rpc)
{
	struct raw_client *rc = ctx;

	(void)rpc;
	pthread_mutex_lock(&rc->lock);
	rc->done = true;
	pthread_cond_broadcast(&rc->cv);
	pthread_mutex_unlock(&rc->lock);
}

static struct rr_tp_client *raw_connect(int port, uint32_t ext_caps, struct raw_client *rc)
{
	struct rr_tp_conf conf;
	struct sockaddr_in sin;
	struct rr_tp_client *c = NULL;

	rr_tp_conf_default(&conf);
	conf.ext_caps = ext_caps;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(0x7f000001);
	pthread_mutex_init(&rc->lock, NULL);
	pthread_cond_init(&rc->cv, NULL);
	REQUIRE_EQ(rr_tp_client_create(&conf, (struct sockaddr *)&sin, sizeof(sin), raw_complete,
				       rc, &c),
		   0);
	return c;
}

/* Sends P_OPEN(path, 4096) as a hand-encoded RPC Call (RFC 5531) and
 * returns the server's i32 result. */
static int raw_open(struct rr_tp_client *c, struct raw_client *rc, const char *path)
{
	uint8_t msg[256];
	size_t n = 0, pl = strlen(path);
	struct rr_xprt_part part;
	struct rr_conn_rpc rpc;
	int32_t res = 1;

#define PUT32(v) (rr_put_be32(msg + n, (uint32_t)(v)), n += 4)
	PUT32(0x1234567);
	PUT32(0); /* CALL */
	PUT32(2);
	PUT32(PROG);
	PUT32(1);
	PUT32(P_OPEN);
	PUT32(0);
	PUT32(0);
	PUT32(0);
	PUT32(0);
	PUT32(pl);
	memcpy(msg + n, path, pl);
	n += pl;
	while (n & 3)
		msg[n++] = 0;
	PUT32(0);
	PUT32(4096);
#undef PUT32
	part = (struct rr_xprt_part){msg, (uint32_t)n, false};
	memset(&rpc, 0, sizeof(rpc));
	rpc.xid = 0x1234567;
	rpc.parts = &part;
	rpc.nparts = 1;
	rpc.max_reply = 512;
	rc->done = false;
	REQUIRE_EQ(rr_tp_client_submit(c, &rpc), 0);
	pthread_mutex_lock(&rc->lock);
	while (!rc->done)
		pthread_cond_wait(&rc->cv, &rc->lock);
	pthread_mutex_unlock(&rc->lock);
	/* xid, REPLY, MSG_ACCEPTED, verf(0,0), SUCCESS, i32 */
	if (rpc.status == 0 && rpc.reply_len >= 28 && rr_get_be32(rpc.reply + 20) == 0)
		res = (int32_t)rr_get_be32(rpc.reply + 24);
	else
		res = rpc.status ? rpc.status : -EBADMSG;
	rr_tp_client_release_reply(c, &rpc);
	return res;
}

static void no_calls(void *ctx, struct rr_conn_sreq *r)
{
	(void)ctx;
	(void)r;
	rr_test_fail(__FILE__, __LINE__, "no Call expected", false);
}

TEST(push_peer_without_commit)
{
	struct rpcrdma_server *s;
	struct raw_client rc;
	struct rr_tp_client *c;
	struct rr_tp_push p;
	char url[64], path[128];
	uint8_t b[64] = {1};
	int port;

	if (!rr_th_soft_ok())
		return;
	tmp_path(path, sizeof(path), "nocommit");
	s = start("rdma", url, sizeof(url));
	port = rpcrdma_server_port(s);
	/* A requester that does not advertise RDMA_COMMIT (as Linux): the
	 * server's handler cannot expose a region on its connection. */
	c = raw_connect(port, 0, &rc);
	CHECK_EQ(rr_tp_client_commit_ok(c), -EOPNOTSUPP);
	CHECK_EQ(raw_open(c, &rc, path), -EOPNOTSUPP);
	/* and a Commit is refused locally: nothing is sent */
	memset(&p, 0, sizeof(p));
	p.buf = b;
	p.len = sizeof(b);
	p.stag = 0x100;
	p.offset = 4096;
	p.commit = true;
	p.region = (struct rpcrdma_remote_region){0x100, sizeof(b), 4096};
	CHECK_EQ(rr_tp_client_push(c, &p), -EOPNOTSUPP);
	rr_tp_client_destroy(c);
	pthread_mutex_destroy(&rc.lock);
	pthread_cond_destroy(&rc.cv);
	rpcrdma_server_destroy(s);

	/* A responder that does not advertise it: our requester offered it,
	 * the responder's accept data did not agree -> not usable. */
	{
		struct rr_tp_conf conf;
		struct rr_tp_server *ts = NULL;
		struct sockaddr_in sin;

		rr_tp_conf_default(&conf);
		conf.ext_caps = 0;
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_addr.s_addr = htonl(0x7f000001);
		REQUIRE_EQ(rr_tp_server_create(&conf, (struct sockaddr *)&sin, sizeof(sin),
					       no_calls, NULL, &ts),
			   0);
		c = raw_connect(rr_tp_server_port(ts), RR_PD_EXT_CAP_RDMA_COMMIT, &rc);
		CHECK_EQ(rr_tp_client_commit_ok(c), -EOPNOTSUPP);
		CHECK_EQ(rr_tp_client_push(c, &p), -EOPNOTSUPP);
		rr_tp_client_destroy(c);
		pthread_mutex_destroy(&rc.lock);
		pthread_cond_destroy(&rc.cv);
		rr_tp_server_destroy(ts);
	}
	unlink(path);
}

/* A server whose shared receive queue needs its connections in one PD
 * (verbs; forced here over the soft provider) cannot isolate a push region
 * of one peer from the STags of another in that PD: a peer that asks for
 * RDMA Commit gets a PD and Receives of its own and keeps Commit, while a
 * peer that does not ask joins the pool. (Before: the first pooled
 * connection turned Commit off for the whole server, so push over
 * verbs:// on rxe was no longer negotiated.) */
TEST(push_pool_shared_pd_keeps_commit)
{
	struct rr_tp_conf conf;
	struct rr_tp_server *ts = NULL;
	struct rr_tp_client *a, *b, *a2;
	struct raw_client ra, rb, ra2;
	struct rr_cred_pool cp, sum = {0};
	struct sockaddr_in sin;

	if (!rr_th_soft_ok())
		return;
	rr_tp_conf_default(&conf);
	conf.ext_caps |= RR_PD_EXT_CAP_RDMA_COMMIT;
	conf.pool_share_pd = true;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(0x7f000001);
	REQUIRE_EQ(rr_tp_server_create(&conf, (struct sockaddr *)&sin, sizeof(sin), no_calls,
				       NULL, &ts),
		   0);
	b = raw_connect(rr_tp_server_port(ts), 0, &rb);
	a = raw_connect(rr_tp_server_port(ts), RR_PD_EXT_CAP_RDMA_COMMIT, &ra);
	a2 = raw_connect(rr_tp_server_port(ts), RR_PD_EXT_CAP_RDMA_COMMIT, &ra2);
	CHECK_EQ(rr_tp_client_commit_ok(b), -EOPNOTSUPP);
	CHECK_EQ(rr_tp_client_commit_ok(a), 0);
	CHECK_EQ(rr_tp_client_commit_ok(a2), 0);
	/* one pooled connection (b): a and a2 have their own Receives */
	for (unsigned key = 0; key < 256; key++)
		if (rr_tp_server_pool(ts, key, &cp) == 0)
			sum.members += cp.members;
	CHECK_EQ(sum.members, 1);
	rr_tp_client_destroy(a2);
	rr_tp_client_destroy(a);
	rr_tp_client_destroy(b);
	rr_tp_server_destroy(ts);
	pthread_mutex_destroy(&ra.lock);
	pthread_cond_destroy(&ra.cv);
	pthread_mutex_destroy(&ra2.lock);
	pthread_cond_destroy(&ra2.cv);
	pthread_mutex_destroy(&rb.lock);
	pthread_cond_destroy(&rb.cv);
}

TEST(push_commit_beyond_region)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_push_region reg, forged;
	struct rpcrdma_xprt_stats cs, ss;
	char url[64], path[128];
	uint8_t data[4096];
	uint64_t id;
	uint32_t st = 0;
	int rel0;

	if (!rr_th_soft_ok())
		return;
	memset(data, 0xa5, sizeof(data));
	tmp_path(path, sizeof(path), "beyond");
	rel0 = atomic_load(&released_count);
	s = start("rdma", url, sizeof(url));
	c = connect_to(url);
	REQUIRE_EQ(push_open(c, path, 8192, &reg, &id), 0);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 4096, RPCRDMA_PUSH_COMMIT, &st), 0);
	/* a client that lies about the length: the server's provider checks
	 * the Commit's range against the registration (protection error,
	 * Terminate, draft 5.1 item 2) */
	forged = reg;
	forged.length = reg.length * 2;
	CHECK_EQ(rpcrdma_push_commit(c, &forged, 4096, 8192, &st), -EACCES);
	/* the connection ended: the region went with it */
	CHECK(wait_released(rel0 + 1));
	REQUIRE_EQ(rpcrdma_server_stats(s, &ss), 0);
	CHECK_EQ(ss.regions_released, 1);
	CHECK(ss.fatal_errors >= 1);
	/* the client reconnects; RPCs work again; the old region is gone */
	CHECK_EQ(call_echo(c, 3), 0);
	REQUIRE_EQ(rpcrdma_client_stats(c, &cs), 0);
	CHECK(cs.reconnects >= 1);
	CHECK_EQ(cs.commit_errors, 1);
	CHECK_EQ(cs.commits, 1);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 16, RPCRDMA_PUSH_COMMIT, &st), -EACCES);
	CHECK_EQ(call_echo(c, 4), 0);
	/* what was committed before survived */
	CHECK(file_has(path, 0, data, 4096));
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	unlink(path);
}

TEST(push_revoke_then_write)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_push_region reg;
	char url[64], path[128];
	uint8_t data[512];
	uint64_t id = 0;
	int rel0;

	if (!rr_th_soft_ok())
		return;
	memset(data, 0x3c, sizeof(data));
	tmp_path(path, sizeof(path), "revoke");
	rel0 = atomic_load(&released_count);
	s = start("rdma", url, sizeof(url));
	c = connect_to(url);
	REQUIRE_EQ(push_open(c, path, 4096, &reg, &id), 0);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 512, RPCRDMA_PUSH_COMMIT, NULL), 0);
	CHECK_EQ(rpcrdma_server_push_revoke(s, id), 0);
	CHECK_EQ(atomic_load(&released_count), rel0 + 1);
	CHECK_EQ(rpcrdma_server_push_revoke(s, id), -ENOENT);
	/* a Write + Commit into the revoked region: the Write draws the
	 * protection error (Terminate). (A Write alone completes locally
	 * when sent, as RDMA Writes do: only a Commit proves placement.) */
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 512, RPCRDMA_PUSH_COMMIT, NULL), -EACCES);
	CHECK_EQ(call_echo(c, 9), 0);   /* reconnected */
	/* a new region on the new connection works */
	REQUIRE_EQ(push_open(c, path, 4096, &reg, &id), 0);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 512, data, 512, RPCRDMA_PUSH_COMMIT, NULL), 0);
	rpcrdma_server_destroy(s);   /* releases the second region */
	CHECK_EQ(atomic_load(&released_count), rel0 + 2);
	rpcrdma_client_destroy(c);
	CHECK(file_has(path, 0, data, 512));
	CHECK(file_has(path, 512, data, 512));
	unlink(path);
}

/* The region handle carries the Commit levels it serves (24 bytes of XDR);
 * a level this library does not know is refused both ways. */
TEST(push_region_xdr_levels)
{
	struct rpcrdma_xdr_enc e;
	struct rpcrdma_xdr_dec d;
	uint8_t buf[24];
	struct rpcrdma_push_region in = {0x11223344u, 0x7f0000001000ull, 65536,
					 RPCRDMA_PUSH_REGION_VISIBLE}, out;

	rr_xbuf_enc_init(&e, NULL, 64);
	REQUIRE_EQ(rpcrdma_xdr_put_push_region(&e, &in), 0);
	REQUIRE_EQ(rpcrdma_xdr_enc_len(&e), 24);
	memcpy(buf, e.buf, 24);
	rr_xbuf_enc_free(&e);
	CHECK_EQ(buf[23], RPCRDMA_PUSH_REGION_VISIBLE);
	rr_xbuf_dec_init(&d, buf, 24);
	memset(&out, 0xee, sizeof(out));
	REQUIRE_EQ(rpcrdma_xdr_get_push_region(&d, &out), 0);
	CHECK_EQ(out.stag, in.stag);
	CHECK_EQ(out.offset, in.offset);
	CHECK_EQ(out.length, in.length);
	CHECK_EQ(out.flags, RPCRDMA_PUSH_REGION_VISIBLE);
	/* unknown level bits */
	buf[23] = 0x04;
	rr_xbuf_dec_init(&d, buf, 24);
	CHECK_EQ(rpcrdma_xdr_get_push_region(&d, &out), -EBADMSG);
	in.flags = 0x04;
	rr_xbuf_enc_init(&e, NULL, 64);
	CHECK_EQ(rpcrdma_xdr_put_push_region(&e, &in), -EINVAL);
	rr_xbuf_enc_free(&e);
	/* truncated (the 20-byte handle of before) */
	rr_xbuf_dec_init(&d, buf, 20);
	CHECK(rpcrdma_xdr_get_push_region(&d, &out) < 0);
}

/* Levels on the soft provider: its one Commit persists, so a durable region
 * serves visibility Commits too (RPCRDMA_PUSH_VISIBLE works end to end); a
 * region that does not serve the level asked is refused locally, nothing
 * sent (never a weaker Commit than asked). */
TEST(push_levels_soft)
{
	struct rpcrdma_server *s;
	struct rpcrdma_client *c;
	struct rpcrdma_push_region reg, vis_only;
	struct rpcrdma_xprt_stats cs;
	char url[64], path[128];
	uint8_t data[4096];
	uint64_t id = 0;
	uint32_t st = 99;

	if (!rr_th_soft_ok())
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	tmp_path(path, sizeof(path), "levels");
	s = start("rdma", url, sizeof(url));
	c = connect_to(url);
	REQUIRE_EQ(push_open(c, path, 65536, &reg, &id), 0);
	CHECK_EQ(reg.flags, RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE);
	CHECK_EQ(rpcrdma_push_write(c, &reg, 4096, data, sizeof(data), RPCRDMA_PUSH_VISIBLE, &st), 0);
	CHECK_EQ(st, 0);
	CHECK(file_has(path, 4096, data, sizeof(data)));
	/* both levels at once: -EINVAL */
	CHECK_EQ(rpcrdma_push_write(c, &reg, 0, data, 16, RPCRDMA_PUSH_COMMIT | RPCRDMA_PUSH_VISIBLE,
				    &st), -EINVAL);
	/* a region serving visibility only: no persistent Commit, nothing sent */
	vis_only = reg;
	vis_only.flags = RPCRDMA_PUSH_REGION_VISIBLE;
	CHECK_EQ(rpcrdma_push_write(c, &vis_only, 0, data, 16, RPCRDMA_PUSH_COMMIT, &st), -EOPNOTSUPP);
	CHECK_EQ(rpcrdma_push_commit(c, &vis_only, 0, 16, &st), -EOPNOTSUPP);
	vis_only.flags = 0;
	CHECK_EQ(rpcrdma_push_write(c, &vis_only, 0, data, 16, RPCRDMA_PUSH_VISIBLE, &st), -EOPNOTSUPP);
	/* a plain Write needs no level */
	CHECK_EQ(rpcrdma_push_write(c, &vis_only, 0, data, 16, 0, &st), 0);
	REQUIRE_EQ(rpcrdma_client_stats(c, &cs), 0);
	CHECK_EQ(cs.commits, 1);
	CHECK_EQ(cs.push_writes, 2);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(s);
	unlink(path);
}
