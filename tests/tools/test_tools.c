/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of the example file service (tools/fileservice/fileservice.h) and of the tools
 * built from the tools folder: READ/WRITE/LIST/COMMIT round trips with the data
 * verified, hostile arguments (path escapes, "..", absolute paths, symlink
 * escapes, huge counts, undecodable arguments: GARBAGE_ARGS, RFC 5531
 * section 9), PROG_UNAVAIL/PROC_UNAVAIL, and the rpcrdma-server,
 * rpcrdma-ping and rpcrdma-demo executables spawned from the build
 * directory (the directory of this test binary). Transports: tcp:// always;
 * rdma:// as soon as the RPC layer has it (skipped with a note before). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "fileservice.h"

/* ---- an in-process server over a temporary export ---- */

struct fs_fixture {
	char dir[64];      /* the temporary directory: export is dir/export */
	char export_dir[96];
	struct fs_service svc;
	struct rpcrdma_server *srv;
	struct rpcrdma_client *clnt;
	char url[64];
};

static void rm_rf(const char *path)
{
	char cmd[256];

	if (strncmp(path, "/tmp/rr-tools-", 14) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", path);
}

/* The environment the next fx_start gives the file service (NULL: its
 * default), and an allocator for it that records the largest request. */
static const struct rpcrdma_env *fx_env;
static size_t fx_alloc_max;

static void *fx_alloc(void *ctx, size_t size)
{
	(void)ctx;
	if (size > fx_alloc_max)
		fx_alloc_max = size;
	return malloc(size);
}

static void fx_free(void *ctx, void *p)
{
	(void)ctx;
	free(p);
}

/* Starts a server on @scheme://127.0.0.1:0; returns false (test skipped)
 * when the scheme's transport is not built in. */
static bool fx_start(struct fs_fixture *fx, const char *scheme)
{
	char url[64];
	int rc;

	memset(fx, 0, sizeof(*fx));
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/rr-tools-XXXXXX");
	REQUIRE(mkdtemp(fx->dir) != NULL);
	snprintf(fx->export_dir, sizeof(fx->export_dir), "%s/export", fx->dir);
	REQUIRE(mkdir(fx->export_dir, 0755) == 0);
	REQUIRE_EQ(fs_service_init(&fx->svc, fx->export_dir), 0);
	if (fx_env)
		fx->svc.env = fx_env;
	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, NULL, &fx->srv);
	if (rc == -EPROTONOSUPPORT) {
		fprintf(stderr, "note: %s:// not available in this build\n", scheme);
		rr_test_mark_skipped("transport not built in");
		fs_service_fini(&fx->svc);
		rm_rf(fx->dir);
		return false;
	}
	REQUIRE_EQ(rc, 0);
	REQUIRE_EQ(fs_service_register(fx->srv, &fx->svc), 0);
	REQUIRE_EQ(rpcrdma_server_start(fx->srv), 0);
	snprintf(fx->url, sizeof(fx->url), "%s://127.0.0.1:%d", scheme,
		 rpcrdma_server_port(fx->srv));
	REQUIRE_EQ(rpcrdma_client_create(fx->url, FS_PROG, FS_VERS, NULL, &fx->clnt), 0);
	return true;
}

static void fx_stop(struct fs_fixture *fx)
{
	if (fx->clnt)
		rpcrdma_client_destroy(fx->clnt);
	if (fx->srv)
		rpcrdma_server_destroy(fx->srv);
	fs_service_fini(&fx->svc);
	rm_rf(fx->dir);
}

static void fill_pattern(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

struct list_acc {
	unsigned n;
	char names[400][FS_NAME_MAX + 1];
	uint64_t sizes[400];
	uint32_t types[400];
};

static void list_cb(void *arg, const struct fs_dirent *de)
{
	struct list_acc *a = arg;

	if (a->n < 400) {
		memcpy(a->names[a->n], de->name, sizeof(de->name));
		a->sizes[a->n] = de->size;
		a->types[a->n] = de->type;
	}
	a->n++;
}

static void roundtrip(const char *scheme)
{
	struct fs_fixture fx;
	const size_t big = 3u * 1024 * 1024 + 123;
	uint8_t *data, *back;
	uint32_t n, got;
	bool eof;
	static struct list_acc acc;

	if (!fx_start(&fx, scheme))
		return;
	data = malloc(big);
	back = malloc(big + 16);
	REQUIRE(data && back);
	fill_pattern(data, big, 7);

	/* WRITE in one call (DDP-eligible argument), COMMIT, READ back */
	REQUIRE_EQ(fs_write(fx.clnt, "big.bin", 0, FS_WRITE_CREATE | FS_WRITE_TRUNC, data,
			    (uint32_t)big, &n), FS_OK);
	CHECK_EQ(n, big);
	CHECK_EQ(fs_commit(fx.clnt, "big.bin"), FS_OK);
	memset(back, 0xee, big + 16);
	REQUIRE_EQ(fs_read(fx.clnt, "big.bin", 0, back, (uint32_t)big + 16, &got, &eof), FS_OK);
	CHECK_EQ(got, big);
	CHECK(eof);
	CHECK_MEM(back, data, big);
	/* READ in pieces of several sizes, and at / past the end */
	{
		static const uint32_t sizes[] = {1, 3, 4096, 65536, 1000000};
		uint64_t off = 0;

		for (unsigned i = 0; off < big; i = (i + 1) % 5) {
			uint32_t want = sizes[i];

			REQUIRE_EQ(fs_read(fx.clnt, "big.bin", off, back, want, &got, &eof), FS_OK);
			REQUIRE(got == (off + want <= big ? want : big - off));
			CHECK_MEM(back, data + off, got);
			CHECK_EQ(eof, off + got >= big);
			off += got;
		}
		REQUIRE_EQ(fs_read(fx.clnt, "big.bin", big, back, 100, &got, &eof), FS_OK);
		CHECK_EQ(got, 0);
		CHECK(eof);
		REQUIRE_EQ(fs_read(fx.clnt, "big.bin", (uint64_t)1 << 40, back, 100, &got, &eof),
			   FS_OK);
		CHECK_EQ(got, 0);
		REQUIRE_EQ(fs_read(fx.clnt, "big.bin", 5, back, 0, &got, &eof), FS_OK);
		CHECK_EQ(got, 0);
	}
	/* WRITE at an offset into an existing file, without CREATE */
	REQUIRE_EQ(fs_write(fx.clnt, "big.bin", 10, FS_WRITE_SYNC, "HELLO", 5, &n), FS_OK);
	CHECK_EQ(n, 5);
	REQUIRE_EQ(fs_read(fx.clnt, "big.bin", 8, back, 9, &got, &eof), FS_OK);
	CHECK_EQ(got, 9);
	CHECK_MEM(back, data + 8, 2);
	CHECK_MEM(back + 2, "HELLO", 5);
	CHECK_MEM(back + 7, data + 15, 2);
	/* empty WRITE creates an empty file */
	REQUIRE_EQ(fs_write(fx.clnt, "empty", 0, FS_WRITE_CREATE, "", 0, &n), FS_OK);
	CHECK_EQ(n, 0);

	/* LIST: 300 entries with long names (a reply far above any inline
	 * threshold), sorted, with sizes; then paging with cookies */
	{
		char name[FS_NAME_MAX + 1];
		char sub[64];
		uint32_t cookie = 0, total = 0;

		REQUIRE(snprintf(sub, sizeof(sub), "%s/dir", fx.export_dir) > 0);
		REQUIRE(mkdir(sub, 0755) == 0);
		for (unsigned i = 0; i < 300; i++) {
			memset(name, 'n', 200);
			snprintf(name + 200, sizeof(name) - 200, "%03u", i);
			REQUIRE(snprintf((char *)back, 400, "dir/%s", name) > 0);
			REQUIRE_EQ(fs_write(fx.clnt, (char *)back, 0, FS_WRITE_CREATE, data, i, &n),
				   FS_OK);
		}
		memset(&acc, 0, sizeof(acc));
		REQUIRE_EQ(fs_list(fx.clnt, "dir", 0, 1000, list_cb, &acc, &n, &eof), FS_OK);
		CHECK_EQ(n, 300);
		CHECK_EQ(acc.n, 300);
		CHECK(eof);
		for (unsigned i = 0; i < 300 && i < acc.n; i++) {
			memset(name, 'n', 200);
			snprintf(name + 200, sizeof(name) - 200, "%03u", i);
			CHECK(strcmp(acc.names[i], name) == 0);
			CHECK_EQ(acc.sizes[i], i);
			CHECK_EQ(acc.types[i], FS_TYPE_FILE);
		}
		memset(&acc, 0, sizeof(acc));
		do {
			REQUIRE_EQ(fs_list(fx.clnt, "dir/", cookie, 7, list_cb, &acc, &n, &eof),
				   FS_OK);
			REQUIRE(n <= 7);
			cookie += n;
			total += n;
		} while (!eof && n);
		CHECK_EQ(total, 300);
		CHECK(strcmp(acc.names[299] + 200, "299") == 0);
		/* the export root: big.bin, dir, empty */
		memset(&acc, 0, sizeof(acc));
		REQUIRE_EQ(fs_list(fx.clnt, "", 0, 10, list_cb, &acc, &n, &eof), FS_OK);
		REQUIRE_EQ(n, 3);
		CHECK(strcmp(acc.names[0], "big.bin") == 0 && acc.sizes[0] == big);
		CHECK(strcmp(acc.names[1], "dir") == 0 && acc.types[1] == FS_TYPE_DIR);
		CHECK(strcmp(acc.names[2], "empty") == 0 && acc.sizes[2] == 0);
		REQUIRE_EQ(fs_list(fx.clnt, ".", 3, 10, list_cb, &acc, &n, &eof), FS_OK);
		CHECK_EQ(n, 0);
		CHECK(eof);
	}
	/* NULL */
	CHECK_EQ(fs_null(fx.clnt, NULL, 0), 0);
	/* PUSH_OPEN: a push-mode region appended to a log (rdma://), or
	 * FS_ENOTSUP where RDMA Commit cannot be used (tcp://) */
	{
		struct rpcrdma_push_region reg;
		uint64_t foff = 1;
		uint32_t cst = 9;
		char lp[160];
		uint8_t lbuf[4096];
		int fd;

		if (!strcmp(scheme, "tcp")) {
			CHECK_EQ(fs_push_open(fx.clnt, "log", 4096, &reg, &foff), FS_ENOTSUP);
		} else {
			/* hostile arguments first */
			CHECK_EQ(fs_push_open(fx.clnt, "../log", 4096, &reg, &foff), FS_EACCES);
			CHECK_EQ(fs_push_open(fx.clnt, "log", 0, &reg, &foff), FS_EINVAL);
			CHECK_EQ(fs_push_open(fx.clnt, "log", (uint64_t)FS_PUSH_MAX + 1, &reg, &foff),
				 FS_EINVAL);
			CHECK_EQ(fs_push_open(fx.clnt, "dir", 4096, &reg, &foff), FS_EISDIR);
			REQUIRE_EQ(fs_write(fx.clnt, "log", 0, FS_WRITE_CREATE, "head", 4, &n), FS_OK);
			REQUIRE_EQ(fs_push_open(fx.clnt, "log", 4096, &reg, &foff), FS_OK);
			CHECK_EQ(foff, 4);   /* appended after the 4 bytes */
			CHECK_EQ(reg.length, 4096);
			CHECK_EQ(rpcrdma_push_write(fx.clnt, &reg, 0, data, 4096, RPCRDMA_PUSH_COMMIT,
						    &cst),
				 0);
			CHECK_EQ(cst, 0);
			snprintf(lp, sizeof(lp), "%s/log", fx.export_dir);
			fd = open(lp, O_RDONLY);
			REQUIRE(fd >= 0);
			CHECK_EQ(pread(fd, lbuf, 4096, 4), 4096);
			CHECK(memcmp(lbuf, data, 4096) == 0);
			close(fd);
			/* the second region starts after the first */
			REQUIRE_EQ(fs_push_open(fx.clnt, "log", 100, &reg, &foff), FS_OK);
			CHECK_EQ(foff, 4100);
		}
	}
	free(data);
	free(back);
	fx_stop(&fx);
}

TEST(tools_fs_roundtrip_tcp) { roundtrip("tcp"); }
TEST(tools_fs_roundtrip_rdma) { roundtrip("rdma"); }

/* Whether openat2(RESOLVE_BENEATH) works in this process (kernel >= 5.6,
 * no seccomp filter refusing it), asked of the kernel directly, not of the
 * service under test. */
static bool openat2_works(const char *dir)
{
	struct open_how how;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long fd;

	REQUIRE(dfd >= 0);
	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	fd = syscall(SYS_openat2, dfd, ".", &how, sizeof(how));
	if (fd >= 0)
		close((int)fd);
	close(dfd);
	return fd >= 0;
}

static void hostile_paths(bool no_openat2)
{
	struct fs_fixture fx;
	char path[200], outside[128];
	uint8_t buf[64];
	uint32_t got, n;
	bool eof;
	struct stat sb;
	int fd;

	if (!fx_start(&fx, "tcp"))
		return;
	/* the fallback resolver (per-component O_NOFOLLOW), as without openat2 */
	if (no_openat2)
		atomic_store(&fx.svc.openat2_state, -1);
	/* a secret file next to the export, and symlinks pointing at it */
	snprintf(outside, sizeof(outside), "%s/secret", fx.dir);
	fd = open(outside, O_WRONLY | O_CREAT, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, "SECRET", 6) == 6);
	close(fd);
	snprintf(path, sizeof(path), "%s/escape", fx.export_dir);
	REQUIRE(symlink(outside, path) == 0);
	snprintf(path, sizeof(path), "%s/escdir", fx.export_dir);
	REQUIRE(symlink(fx.dir, path) == 0);
	snprintf(path, sizeof(path), "%s/rel", fx.export_dir);
	REQUIRE(symlink("../secret", path) == 0);
	REQUIRE_EQ(fs_write(fx.clnt, "ok.txt", 0, FS_WRITE_CREATE, "fine", 4, &n), FS_OK);

	static const char *const bad[] = {
		"../secret", "/etc/passwd", "a/../../secret", "..", "./..", "ok.txt/../../secret",
		"escape", "escdir/secret", "rel", "escdir/export/ok.txt",
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = fs_read(fx.clnt, bad[i], 0, buf, sizeof(buf), &got, &eof);

		if (rc == FS_OK)
			fprintf(stderr, "path '%s' was served\n", bad[i]);
		CHECK(rc > 0);   /* an fs_status, not an RPC failure, and not OK */
		CHECK(rc == FS_EACCES || rc == FS_EXDEV || rc == FS_ELOOP);
		/* WRITE through the same paths must not touch anything outside */
		rc = fs_write(fx.clnt, bad[i], 0, FS_WRITE_CREATE | FS_WRITE_TRUNC, "PWNED", 5, &n);
		CHECK(rc > 0);
		CHECK(fs_commit(fx.clnt, bad[i]) > 0);
		CHECK(fs_list(fx.clnt, bad[i], 0, 10, NULL, NULL, &n, &eof) > 0);
	}
	REQUIRE(stat(outside, &sb) == 0);
	CHECK_EQ(sb.st_size, 6);
	snprintf(path, sizeof(path), "%s/secret", fx.dir);
	fd = open(path, O_RDONLY);
	REQUIRE(fd >= 0);
	REQUIRE(read(fd, buf, 6) == 6);
	close(fd);
	CHECK_MEM(buf, "SECRET", 6);
	snprintf(path, sizeof(path), "%s/etc", fx.export_dir);
	CHECK(stat(path, &sb) < 0);  /* "/etc/passwd" not created inside either */

	/* missing files and wrong types: a status, not a crash */
	CHECK_EQ(fs_read(fx.clnt, "missing", 0, buf, 10, &got, &eof), FS_ENOENT);
	CHECK_EQ(fs_write(fx.clnt, "missing", 0, 0, "x", 1, &n), FS_ENOENT);
	CHECK_EQ(fs_write(fx.clnt, "nodir/x", 0, FS_WRITE_CREATE, "x", 1, &n), FS_ENOENT);
	CHECK_EQ(fs_commit(fx.clnt, "missing"), FS_ENOENT);
	CHECK_EQ(fs_list(fx.clnt, "missing", 0, 10, NULL, NULL, &n, &eof), FS_ENOENT);
	CHECK_EQ(fs_list(fx.clnt, "ok.txt", 0, 10, NULL, NULL, &n, &eof), FS_ENOTDIR);
	CHECK_EQ(fs_read(fx.clnt, "", 0, buf, 10, &got, &eof), FS_EISDIR);
	CHECK_EQ(fs_read(fx.clnt, ".", 0, buf, 10, &got, &eof), FS_EISDIR);
	CHECK_EQ(fs_write(fx.clnt, "ok.txt", 0, 0x80, "x", 1, &n), FS_EINVAL);
	CHECK_EQ(fs_write(fx.clnt, "ok.txt", UINT64_MAX - 2, 0, "xyz", 3, &n), FS_EFBIG);
	/* a name component above 255 bytes */
	memset(path, 'a', 199);
	path[199] = 0;
	{
		char longp[600];

		snprintf(longp, sizeof(longp), "%s%s", path, path);
		CHECK_EQ(fs_read(fx.clnt, longp, 0, buf, 10, &got, &eof), FS_ENAMETOOLONG);
	}
	/* the server still works */
	REQUIRE_EQ(fs_read(fx.clnt, "ok.txt", 0, buf, sizeof(buf), &got, &eof), FS_OK);
	CHECK_EQ(got, 4);
	CHECK_MEM(buf, "fine", 4);
	/* a symlink that stays inside: followed with openat2, refused without */
	snprintf(path, sizeof(path), "%s/inside", fx.export_dir);
	REQUIRE(symlink("ok.txt", path) == 0);
	got = 0;
	if (no_openat2) {
		CHECK_EQ(fs_read(fx.clnt, "inside", 0, buf, sizeof(buf), &got, &eof), FS_ELOOP);
	} else if (openat2_works(fx.export_dir)) {
		/* the kernel resolves beneath the export: an inner symlink is
		 * followed */
		CHECK_EQ(fs_read(fx.clnt, "inside", 0, buf, sizeof(buf), &got, &eof), FS_OK);
		CHECK_EQ(got, 4);
		CHECK_MEM(buf, "fine", 4);
		CHECK_EQ(atomic_load(&fx.svc.openat2_state), 1);
	} else {
		/* no openat2 here: the service falls back and follows none */
		CHECK_EQ(fs_read(fx.clnt, "inside", 0, buf, sizeof(buf), &got, &eof), FS_ELOOP);
		CHECK_EQ(atomic_load(&fx.svc.openat2_state), -1);
	}
	/* nested directories through the fallback walk */
	snprintf(path, sizeof(path), "%s/d1", fx.export_dir);
	REQUIRE(mkdir(path, 0755) == 0);
	REQUIRE_EQ(fs_write(fx.clnt, "d1//./x", 0, FS_WRITE_CREATE, "nested", 6, &n), FS_OK);
	REQUIRE_EQ(fs_read(fx.clnt, "./d1/x", 0, buf, sizeof(buf), &got, &eof), FS_OK);
	CHECK_EQ(got, 6);
	CHECK_MEM(buf, "nested", 6);
	fx_stop(&fx);
}

TEST(tools_fs_hostile_paths) { hostile_paths(false); }
TEST(tools_fs_hostile_paths_fallback) { hostile_paths(true); }

/* A raw call: returns the call's status and the RPC answer in *@st. */
static int raw_call(struct rpcrdma_client *c, uint32_t proc, const void *args, size_t len,
		    struct rpcrdma_rpc_status *st)
{
	struct rpcrdma_call *call;
	int rc;

	memset(st, 0xff, sizeof(*st));
	REQUIRE_EQ(rpcrdma_call_create(c, proc, &call), 0);
	if (len)
		REQUIRE_EQ(rpcrdma_xdr_put_fixed(rpcrdma_call_args(call), args, len), 0);
	rc = rpcrdma_call_run(call);
	if (rpcrdma_call_status(call, st) != 0)
		memset(st, 0xff, sizeof(*st));
	rpcrdma_call_destroy(call);
	return rc;
}

static void garbage_args(const char *scheme)
{
	struct fs_fixture fx;
	struct rpcrdma_rpc_status st;
	struct rpcrdma_client *other;
	uint8_t args[64];

	if (!fx_start(&fx, scheme))
		return;
	/* no arguments at all, for each procedure that has some */
	for (uint32_t proc = FS_READ; proc <= FS_ECHO; proc++) {
		CHECK_EQ(raw_call(fx.clnt, proc, NULL, 0, &st), -EREMOTEIO);
		CHECK_EQ(st.reply_stat, RPCRDMA_MSG_ACCEPTED);
		CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	}
	/* a string length far beyond the message */
	memset(args, 0, sizeof(args));
	args[0] = 0x7f;
	CHECK_EQ(raw_call(fx.clnt, FS_READ, args, 16, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	/* a path above FS_PATH_MAX */
	{
		static uint8_t longpath[4 + 2048 + 12];

		memset(longpath, 'a', sizeof(longpath));
		longpath[0] = 0, longpath[1] = 0, longpath[2] = 0x08, longpath[3] = 0;
		memset(longpath + 4 + 2048, 0, 12);
		CHECK_EQ(raw_call(fx.clnt, FS_READ, longpath, sizeof(longpath), &st), -EREMOTEIO);
		CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	}
	/* a path with a NUL inside */
	{
		static const uint8_t nul[] = {0, 0, 0, 4, 'a', 0, 'b', 'c', 0, 0, 0, 0,
					      0, 0, 0, 0, 0, 0, 0, 9};

		CHECK_EQ(raw_call(fx.clnt, FS_READ, nul, sizeof(nul), &st), -EREMOTEIO);
		CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	}
	/* valid READ arguments followed by trailing bytes */
	{
		static const uint8_t trail[] = {0, 0, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 0,
						0, 0, 0, 0, 0, 0, 0, 9, 0xde, 0xad, 0xbe, 0xef};

		CHECK_EQ(raw_call(fx.clnt, FS_READ, trail, sizeof(trail), &st), -EREMOTEIO);
		CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
		/* and without the trailing bytes it is a proper answer (ENOENT) */
		CHECK_EQ(raw_call(fx.clnt, FS_READ, trail, sizeof(trail) - 4, &st), 0);
	}
	/* WRITE whose data length exceeds the message */
	{
		static const uint8_t w[] = {0, 0, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0, 0, 0, 1, 0x00, 0x10, 0x00, 0x00, 1, 2, 3, 4};

		CHECK_EQ(raw_call(fx.clnt, FS_WRITE, w, sizeof(w), &st), -EREMOTEIO);
		CHECK_EQ(st.accept_stat, RPCRDMA_GARBAGE_ARGS);
	}
	/* an unknown procedure, an unknown version, an unknown program */
	CHECK_EQ(raw_call(fx.clnt, 99, NULL, 0, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROC_UNAVAIL);
	REQUIRE_EQ(rpcrdma_client_create(fx.url, FS_PROG, 7, NULL, &other), 0);
	CHECK_EQ(raw_call(other, 0, NULL, 0, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROG_MISMATCH);
	CHECK_EQ(st.low, 1);
	CHECK_EQ(st.high, 1);
	rpcrdma_client_destroy(other);
	REQUIRE_EQ(rpcrdma_client_create(fx.url, 0x20000001, 1, NULL, &other), 0);
	CHECK_EQ(raw_call(other, 0, NULL, 0, &st), -EREMOTEIO);
	CHECK_EQ(st.accept_stat, RPCRDMA_PROG_UNAVAIL);
	rpcrdma_client_destroy(other);
	/* the server survived all of it */
	CHECK_EQ(fs_null(fx.clnt, NULL, 0), 0);
	fx_stop(&fx);
}

TEST(tools_fs_garbage_args) { garbage_args("tcp"); }
TEST(tools_fs_garbage_args_rdma) { garbage_args("rdma"); }

TEST(tools_fs_huge_count)
{
	struct fs_fixture fx;
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	struct rpcrdma_ddp_sink sink;
	const size_t fsize = FS_MAX_IO + 4096;
	uint8_t *data, *back;
	uint32_t st, n, len;
	const void *p;
	bool eof;

	if (!fx_start(&fx, "tcp"))
		return;
	data = malloc(fsize);
	back = malloc(fsize);
	REQUIRE(data && back);
	fill_pattern(data, fsize, 99);
	REQUIRE_EQ(fs_write(fx.clnt, "f", 0, FS_WRITE_CREATE, data, FS_MAX_IO, &n), FS_OK);
	REQUIRE_EQ(fs_write(fx.clnt, "f", FS_MAX_IO, 0, data + FS_MAX_IO, 4096, &n), FS_OK);
	/* count 0xffffffff: capped at FS_MAX_IO, a short read */
	REQUIRE_EQ(rpcrdma_call_create(fx.clnt, FS_READ, &call), 0);
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, "f");
	rpcrdma_xdr_put_u64(e, 0);
	rpcrdma_xdr_put_u32(e, UINT32_MAX);
	sink.buf = back;
	sink.max = fsize;
	REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sink, 1), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &st), 0);
	REQUIRE_EQ(st, FS_OK);
	REQUIRE_EQ(rpcrdma_xdr_get_bool(d, &eof), 0);
	CHECK(!eof);
	REQUIRE_EQ(rpcrdma_xdr_get_ddp(d, &p, &len), 0);
	CHECK_EQ(len, FS_MAX_IO);
	CHECK(p == back);
	CHECK_MEM(back, data, FS_MAX_IO);
	rpcrdma_call_destroy(call);
	/* the rest */
	REQUIRE_EQ(fs_read(fx.clnt, "f", FS_MAX_IO, back, 8192, &len, &eof), FS_OK);
	CHECK_EQ(len, 4096);
	CHECK(eof);
	CHECK_MEM(back, data + FS_MAX_IO, 4096);
	free(data);
	free(back);
	fx_stop(&fx);
}

/* A READ of FS_MAX_IO bytes from a one-byte file: the server allocates what
 * the file holds, not what the peer asked (finding of fuzz_fileservice: 32
 * such calls pinned 256 MiB); at or past the end it allocates nothing. */
TEST(tools_fs_read_allocates_what_the_file_holds)
{
	struct rpcrdma_env full = *rpcrdma_env_default();
	struct fs_fixture fx;
	uint8_t *back;
	uint32_t n, got;
	bool eof;

	full.alloc = fx_alloc;
	full.free = fx_free;
	fx_env = &full;
	fx_alloc_max = 0;
	if (!fx_start(&fx, "tcp")) {
		fx_env = NULL;
		return;
	}
	fx_env = NULL;
	back = malloc(FS_MAX_IO);
	REQUIRE(back != NULL);
	REQUIRE_EQ(fs_write(fx.clnt, "one", 0, FS_WRITE_CREATE, "x", 1, &n), FS_OK);
	REQUIRE_EQ(fs_read(fx.clnt, "one", 0, back, FS_MAX_IO, &got, &eof), FS_OK);
	CHECK_EQ(got, 1);
	CHECK(eof);
	CHECK_EQ(back[0], 'x');
	CHECK(fx_alloc_max > 0 && fx_alloc_max < 4096);
	fx_alloc_max = 0;
	REQUIRE_EQ(fs_read(fx.clnt, "one", 1, back, FS_MAX_IO, &got, &eof), FS_OK);
	CHECK_EQ(got, 0);
	CHECK(eof);
	REQUIRE_EQ(fs_read(fx.clnt, "one", UINT64_C(1) << 40, back, FS_MAX_IO, &got, &eof), FS_OK);
	CHECK_EQ(got, 0);
	CHECK(eof);
	CHECK_EQ(fx_alloc_max, 0);
	free(back);
	fx_stop(&fx);
}

/* ---- the executables ---- */

static void tool_path(char *out, size_t cap, const char *name)
{
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	REQUIRE(n > 0);
	self[n] = 0;
	slash = strrchr(self, '/');
	REQUIRE(slash != NULL);
	*slash = 0;
	snprintf(out, cap, "%s/%s", self, name);
}

/* Spawns @argv with stdout (and stderr when @err_too) on a pipe; *@outfd. */
static pid_t spawn(char *const argv[], int *outfd, bool err_too)
{
	int p[2];
	pid_t pid;

	REQUIRE(pipe2(p, O_CLOEXEC) == 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 1);
		if (err_too)
			dup2(p[1], 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	*outfd = p[0];
	return pid;
}

/* Reads @fd until EOF or @secs seconds (appends to @buf, NUL-terminated). */
static size_t read_for(int fd, char *buf, size_t cap, size_t have, double secs, bool line)
{
	uint64_t end = fs_now_ns() + (uint64_t)(secs * 1e9);

	while (have + 1 < cap) {
		struct pollfd pfd = {fd, POLLIN, 0};
		int64_t left = (int64_t)(end - fs_now_ns());
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)(left / 1000000) + 1) <= 0)
			break;
		n = read(fd, buf + have, cap - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		if (line && memchr(buf, '\n', have))
			break;
	}
	buf[have] = 0;
	return have;
}

/* Waits up to @secs for @pid; kills it after that. Returns the exit status
 * (or -1 if it had to be killed / died of a signal). */
static int wait_for(pid_t pid, double secs)
{
	uint64_t end = fs_now_ns() + (uint64_t)(secs * 1e9);
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (fs_now_ns() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "child %d killed after %.0f s\n", (int)pid, secs);
			return -1;
		}
		usleep(20000);
	}
}

static int run_tool(char *const argv[], char *out, size_t cap, double secs)
{
	int fd, rc;
	pid_t pid = spawn(argv, &fd, true);

	read_for(fd, out, cap, 0, secs, false);
	close(fd);
	rc = wait_for(pid, 5);
	return rc;
}

TEST(tools_server_and_ping)
{
	char server[600], ping[600], dir[64], exp[96], url[96];
	char out[8192];
	int fd, port = 0;
	pid_t pid;
	struct rpcrdma_client *c;
	uint32_t n, got;
	bool eof;
	uint8_t buf[32];

	tool_path(server, sizeof(server), "rpcrdma-server");
	tool_path(ping, sizeof(ping), "rpcrdma-ping");
	snprintf(dir, sizeof(dir), "/tmp/rr-tools-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(exp, sizeof(exp), "%s", dir);

	/* usage errors and a missing export fail with a message */
	{
		char *a1[] = {server, NULL};
		char *a2[] = {server, (char *)"--export", (char *)"/nonexistent/dir", NULL};
		char *a3[] = {server, (char *)"--export", exp, (char *)"--transport",
			      (char *)"carrier-pigeon", NULL};
		char *a4[] = {server, (char *)"--help", NULL};
		char *a5[] = {ping, NULL};
		char *a6[] = {ping, (char *)"-c", (char *)"x", (char *)"tcp://127.0.0.1:1", NULL};

		CHECK_EQ(run_tool(a1, out, sizeof(out), 10), 2);
		CHECK(strstr(out, "--export") != NULL);
		CHECK_EQ(run_tool(a2, out, sizeof(out), 10), 1);
		CHECK(strstr(out, "cannot open export") != NULL);
		CHECK_EQ(run_tool(a3, out, sizeof(out), 10), 2);
		CHECK_EQ(run_tool(a4, out, sizeof(out), 10), 0);
		CHECK(strstr(out, "usage:") != NULL);
		CHECK_EQ(run_tool(a5, out, sizeof(out), 10), 2);
		CHECK_EQ(run_tool(a6, out, sizeof(out), 10), 2);
	}

	/* the server on an ephemeral port: it prints its URL first */
	{
		char *argv[] = {server, (char *)"--export", exp, (char *)"--listen",
				(char *)"127.0.0.1:0", (char *)"--threads", (char *)"2", NULL};
		char *p;

		pid = spawn(argv, &fd, true);   /* and its shutdown summary */
		read_for(fd, out, sizeof(out), 0, 30, true);
		p = strstr(out, "listening on ");
		REQUIRE(p != NULL);
		p = strstr(p, "://");
		REQUIRE(p != NULL);
		p = strchr(p + 3, ':');
		REQUIRE(p != NULL);
		port = atoi(p + 1);
		REQUIRE(port > 0);
		REQUIRE(strncmp(out, "listening on ", 13) == 0);
		snprintf(url, sizeof(url), "%.*s", (int)(p - (out + 13)), out + 13);
		snprintf(url + strlen(url), sizeof(url) - strlen(url), ":%d", port);
	}
	/* file service round trip through the spawned server */
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, NULL, &c), 0);
	REQUIRE_EQ(fs_write(c, "hello.txt", 0, FS_WRITE_CREATE, "hello, world", 12, &n), FS_OK);
	REQUIRE_EQ(fs_read(c, "hello.txt", 7, buf, sizeof(buf), &got, &eof), FS_OK);
	CHECK_EQ(got, 5);
	CHECK_MEM(buf, "world", 5);
	CHECK_EQ(fs_read(c, "../etc/passwd", 0, buf, sizeof(buf), &got, &eof), FS_EACCES);
	rpcrdma_client_destroy(c);

	/* rpcrdma-ping against it: replies, summary, exit 0 */
	{
		char *argv[] = {ping, (char *)"-c", (char *)"4", (char *)"-i", (char *)"0.01", url,
				NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 0);
		CHECK(strstr(out, "4 calls, 4 replies, 0.0% loss") != NULL);
		CHECK(strstr(out, "rtt min/avg/p50/p99/max") != NULL);
		CHECK(strstr(out, "seq=3") != NULL);
	}
	/* a program the server does not serve: PROG_UNAVAIL, exit 1 */
	{
		char *argv[] = {ping, (char *)"-c", (char *)"2", (char *)"-i", (char *)"0",
				(char *)"-P", (char *)"0x20000001", url, NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 1);
		CHECK(strstr(out, "PROG_UNAVAIL") != NULL);
		CHECK(strstr(out, "2 calls, 0 replies, 100.0% loss") != NULL);
	}
	/* with argument padding */
	{
		char *argv[] = {ping, (char *)"-c", (char *)"2", (char *)"-i", (char *)"0",
				(char *)"-s", (char *)"65536", (char *)"-q", url, NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 0);
		CHECK(strstr(out, "2 calls, 2 replies") != NULL);
	}
	/* SIGTERM: graceful exit 0; over rdma:// the summary has the fault
	 * counters, none moved */
	kill(pid, SIGTERM);
	read_for(fd, out, sizeof(out), 0, 20, false);
	CHECK_EQ(wait_for(pid, 20), 0);
	close(fd);
	if (strncmp(url, "rdma://", 7) == 0)
		CHECK(strstr(out, "rpcrdma-server: faults: cq_overruns 0 cq_failures 0 ") != NULL);
	else
		CHECK(strstr(out, "faults:") == NULL);
	/* nobody listens any more: ping fails with exit 1 */
	{
		char *argv[] = {ping, (char *)"-c", (char *)"1", (char *)"-t", (char *)"2", url, NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 1);
		CHECK(strstr(out, "cannot connect") != NULL || strstr(out, "no reply") != NULL);
	}
	{
		char p2[128];

		snprintf(p2, sizeof(p2), "%s/hello.txt", dir);
		unlink(p2);
		rmdir(dir);
	}
}

TEST(tools_demo_runs)
{
	char demo[600];
	static char out[65536];

	tool_path(demo, sizeof(demo), "rpcrdma-demo");
	{
		char *argv[] = {demo, NULL};
		int rc = run_tool(argv, out, sizeof(out), 120);

		if (rc != 0)
			fprintf(stderr, "%s\n", out);
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, "verified") != NULL);
		CHECK(strstr(out, "FAILED") == NULL);
	}
}

/* -- reading rpcrdma-bench --json output: one record per line -- */

/* The string value of "@key" in the record @line (into @out); false when
 * the key is not there. */
static bool bench_str(const char *line, const char *key, char *out, size_t cap)
{
	char pat[64];
	const char *p, *q;

	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	p += strlen(pat);
	q = strchr(p, '"');
	if (!q || (size_t)(q - p) >= cap)
		return false;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = 0;
	return true;
}

/* The number value of "@key" in @line; false when missing or not a number. */
static bool bench_num(const char *line, const char *key, double *v)
{
	char pat[64], *end;
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	p += strlen(pat);
	*v = strtod(p, &end);
	return end != p;
}

static size_t slurp(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, cap - 1, f);
		fclose(f);
	}
	buf[n] = 0;
	return n;
}

/* The CPU time per operation and the spin-then-sleep floor: every measured
 * record carries cpu_client_us_per_op, cpu_server_us_per_op, ratio_raw_spin
 * and spin_us; on Linux the CPU of rdma:// records is measured (> 0, and no
 * more than the wall time allows on this machine's CPUs); the raw
 * "pingspin" NULL record exists; the budget comes from --spin-us, else from
 * RPCRDMA_SOFT_SPIN_US, and bad budgets are usage errors. */
TEST(tools_bench_cpu_and_spin)
{
	char bench[600], json[96], dir[64];
	static char out[262144], js[262144];
	double ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
	unsigned measured = 0, rdma_recs = 0, spin_null = 0, rdma_null = 0;
	char *save = NULL, *line;

	tool_path(bench, sizeof(bench), "rpcrdma-bench");
	snprintf(dir, sizeof(dir), "/tmp/rr-tools-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(json, sizeof(json), "%s/c.json", dir);
	if (ncpu < 1)
		ncpu = 1;
	{
		char *argv[] = {bench, (char *)"--quick", (char *)"--duration", (char *)"0.02",
				(char *)"--transports", (char *)"rdma,raw", (char *)"--workloads",
				(char *)"null,write", (char *)"--spin-us", (char *)"5", (char *)"--json",
				json, NULL};
		int rc = run_tool(argv, out, sizeof(out), 240);

		if (rc != 0)
			fprintf(stderr, "%s\n", out);
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, "spin budget 5 us (from --spin-us; "
				  "exported RPCRDMA_SOFT_SPIN_US=5)") != NULL);
		CHECK(strstr(out, "cpu us/op") != NULL);
		CHECK(strstr(out, "raw ping-spin (spin 5 us)") != NULL);
	}
	REQUIRE(slurp(json, js, sizeof(js)) > 0);
	CHECK(js[0] == '[');
	for (line = strtok_r(js, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char wl[32] = "", tp[16] = "", var[16] = "";
		double c = -2, s = -2, rs = -2, sp = -2, ops = 0, secs = 0;

		if (!strstr(line, "\"available\": true"))
			continue;
		measured++;
		CHECK(bench_str(line, "workload", wl, sizeof(wl)));
		CHECK(bench_str(line, "transport", tp, sizeof(tp)));
		CHECK(bench_str(line, "variant", var, sizeof(var)));
		CHECK(bench_num(line, "cpu_client_us_per_op", &c));
		CHECK(bench_num(line, "cpu_server_us_per_op", &s));
		CHECK(bench_num(line, "ratio_raw_spin", &rs));
		CHECK(bench_num(line, "spin_us", &sp));
		CHECK(bench_num(line, "ops", &ops));
		CHECK(bench_num(line, "seconds", &secs));
		CHECK(sp == 5);
		/* -1 or a measurement, never anything else */
		CHECK(c == -1 || c >= 0);
		CHECK(s == -1 || s >= 0);
		if (!strcmp(wl, "null") && !strcmp(tp, "raw") && !strcmp(var, "pingspin"))
			spin_null++;
		/* the spin ratio is for latency records of the RPC transports only */
		if (strcmp(wl, "null") || !strcmp(tp, "raw"))
			CHECK(rs == -1);
#ifdef __linux__
		if (!strcmp(tp, "rdma")) {
			rdma_recs++;
			CHECK(c > 0);
			CHECK(s > 0);
			/* CPU spent in the interval fits in its wall time on every CPU
			 * (+ 2 ms for the samples taken around it): catches unit slips */
			CHECK(ops > 0);
			if (ops > 0)
				CHECK((c + s) * ops <= secs * 1e6 * ncpu * 1.05 + 2000);
			if (!strcmp(wl, "null")) {
				rdma_null++;
				CHECK(rs > 0);
			}
		}
#endif
	}
	CHECK(measured >= 10);   /* null x3, write 4 sizes x (rdma, pingpong, pingspin, stream) */
	CHECK_EQ(spin_null, 1u);
#ifdef __linux__
	CHECK_EQ(rdma_recs, 5u);
	CHECK_EQ(rdma_null, 1u);
#endif
	unlink(json);
	/* the budget from the environment when --spin-us is not given */
	{
		char *argv[] = {bench, (char *)"--duration", (char *)"0.02", (char *)"--transports",
				(char *)"raw", (char *)"--workloads", (char *)"null", NULL};
		int rc;

		REQUIRE(setenv("RPCRDMA_SOFT_SPIN_US", "7", 1) == 0);
		rc = run_tool(argv, out, sizeof(out), 60);
		unsetenv("RPCRDMA_SOFT_SPIN_US");
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, "spin budget 7 us (from RPCRDMA_SOFT_SPIN_US; "
				  "exported RPCRDMA_SOFT_SPIN_US=7)") != NULL);
		CHECK(strstr(out, "pingspin") != NULL);
	}
	{
		char *argv[] = {bench, (char *)"--duration", (char *)"0.02", (char *)"--transports",
				(char *)"raw", (char *)"--workloads", (char *)"null", (char *)"--spin-us",
				(char *)"0", NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 60), 0);
		CHECK(strstr(out, "spin budget 0 us (from --spin-us; "
				  "exported RPCRDMA_SOFT_SPIN_US=0)") != NULL);
	}
	{
		char *a1[] = {bench, (char *)"--spin-us", (char *)"1000000", NULL};
		char *a2[] = {bench, (char *)"--spin-us", (char *)"fast", NULL};
		char *a3[] = {bench, (char *)"--spin-us", (char *)"-1", NULL};

		CHECK_EQ(run_tool(a1, out, sizeof(out), 10), 2);
		CHECK(strstr(out, "--spin-us wants") != NULL);
		CHECK_EQ(run_tool(a2, out, sizeof(out), 10), 2);
		CHECK_EQ(run_tool(a3, out, sizeof(out), 10), 2);
	}
	rmdir(dir);
}

TEST(tools_bench_smoke)
{
	char bench[600], json[96], dir[64];
	static char out[262144];
	FILE *f;
	static char js[262144];
	size_t n;

	tool_path(bench, sizeof(bench), "rpcrdma-bench");
	snprintf(dir, sizeof(dir), "/tmp/rr-tools-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(json, sizeof(json), "%s/b.json", dir);
	{
		char *argv[] = {bench, (char *)"--quick", (char *)"--duration", (char *)"0.02",
				(char *)"--transports", (char *)"tcp,tirpc,raw", (char *)"--json",
				json, NULL};
		int rc = run_tool(argv, out, sizeof(out), 240);

		if (rc != 0)
			fprintf(stderr, "%s\n", out);
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, "-- NULL round trip") != NULL);
	}
	{
		char *argv[] = {bench, (char *)"--transports", (char *)"tcp,carrier-pigeon", NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 2);
	}
	{
		char *argv[] = {bench, (char *)"--workloads", (char *)"push,teleport", NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 30), 2);
	}
	{
		/* push vs durable pull on both backings, nothing else */
		char *argv[] = {bench, (char *)"--duration", (char *)"0.02", (char *)"--transports",
				(char *)"rdma", (char *)"--workloads", (char *)"push", NULL};
		int rc = run_tool(argv, out, sizeof(out), 120);

		if (rc != 0)
			fprintf(stderr, "%s\n", out);
		CHECK_EQ(rc, 0);
		CHECK(strstr(out, "push Write+Commit 4K on disk") != NULL);
		CHECK(strstr(out, "push Write+Commit 4K on tmpfs") != NULL);
		/* counted from the client's counters: Commit vs Call + RDMA Read */
		CHECK(strstr(out, "round trips per op: push 1.00, pull 2.00") != NULL);
		CHECK(strstr(out, "-- NULL round trip") == NULL);
	}
	f = fopen(json, "r");
	REQUIRE(f != NULL);
	n = fread(js, 1, sizeof(js) - 1, f);
	fclose(f);
	js[n] = 0;
	CHECK(js[0] == '[');
	CHECK(strstr(js, "\"workload\": \"null\", \"transport\": \"tcp\"") != NULL);
	CHECK(strstr(js, "\"workload\": \"read\", \"transport\": \"raw\", \"variant\": \"stream\"") !=
	      NULL);
	CHECK(strstr(js, "\"p50_us\"") != NULL);
	CHECK(strstr(js, "\"ratio_raw\"") != NULL);
	CHECK(strstr(js, "\"workload\": \"null\", \"transport\": \"raw\", \"variant\": "
			 "\"pingspin\"") != NULL);
	CHECK(strstr(js, "\"cpu_client_us_per_op\"") != NULL);
	CHECK(strstr(js, "\"cpu_server_us_per_op\"") != NULL);
	CHECK(strstr(js, "\"ratio_raw_spin\"") != NULL);
	unlink(json);
	rmdir(dir);
}

/* ---- errors the user sees ---- */

/* An in-process server on @scheme://127.0.0.1:0 serving nothing but NULL;
 * its port, or 0 when the scheme is not built in. */
static int bare_server(const char *scheme, struct rpcrdma_server **srv)
{
	char url[64];
	int rc;

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	rc = rpcrdma_server_create(url, NULL, srv);
	if (rc == -EPROTONOSUPPORT)
		return 0;
	REQUIRE_EQ(rc, 0);
	REQUIRE_EQ(rpcrdma_server_start(*srv), 0);
	return rpcrdma_server_port(*srv);
}

/* A tcp:// client meeting an rdma:// server reads an MPA Reject ("MPA ID
 * Rep Frame") and fails its calls with -EPROTOTYPE at once, not after its
 * timeout; an rdma:// client meeting a tcp:// server reads record marking
 * and fails to connect with -EPROTOTYPE; rpcrdma-ping says which scheme to
 * use and stops. */
TEST(tools_wrong_transport)
{
	struct rpcrdma_server *rs = NULL, *ts = NULL;
	struct rpcrdma_client *c;
	struct rpcrdma_client_opts co = {.timeout_ms = 60000, .connect_timeout_ms = 60000};
	char url[96], ping[600], out[8192];
	int rport, tport;
	uint64_t t0;

	rport = bare_server("rdma", &rs);
	if (!rport) {
		fprintf(stderr, "rdma:// not built in: skipped\n");
		return;
	}
	tport = bare_server("tcp", &ts);
	REQUIRE(tport > 0);

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", rport);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &c), 0);
	t0 = fs_now_ns();
	CHECK_EQ(fs_null(c, NULL, 0), -EPROTOTYPE);
	CHECK_EQ(fs_null(c, NULL, 0), -EPROTOTYPE);
	/* not the 60 s timeout: a generous bound, not a timing assertion */
	CHECK(fs_now_ns() - t0 < 30ull * 1000000000ull);
	CHECK(strstr(rpcrdma_strerror(-EPROTOTYPE), "another transport") != NULL);
	rpcrdma_client_destroy(c);

	tool_path(ping, sizeof(ping), "rpcrdma-ping");
	{
		char *argv[] = {ping, (char *)"-c", (char *)"3", (char *)"-i", (char *)"0",
				(char *)"-t", (char *)"60", url, NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 50), 1);
		CHECK(strstr(out, "use rdma://") != NULL);
		CHECK(strstr(out, "seq=1") == NULL);   /* stopped after the first */
	}

	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", tport);
	CHECK_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &c), -EPROTOTYPE);
	{
		char *argv[] = {ping, (char *)"-c", (char *)"1", url, NULL};

		CHECK_EQ(run_tool(argv, out, sizeof(out), 50), 1);
		CHECK(strstr(out, "use tcp://") != NULL);
	}
	/* a TCP service that drops the MPA Request and closes (another ONC
	 * RPC server would): the hint says it may not be an rdma:// server */
	{
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof(sa);
		int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), cfd, pfd;
		char buf[64];
		pid_t pid;

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		REQUIRE(lfd >= 0);
		REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		REQUIRE(listen(lfd, 4) == 0);
		REQUIRE(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
		snprintf(url, sizeof(url), "rdma://127.0.0.1:%u", ntohs(sa.sin_port));
		{
			char *argv[] = {ping, (char *)"-c", (char *)"1", (char *)"-t", (char *)"20",
					url, NULL};

			pid = spawn(argv, &pfd, true);
		}
		cfd = accept(lfd, NULL, NULL);
		REQUIRE(cfd >= 0);
		CHECK(read(cfd, buf, sizeof(buf)) > 0);   /* the MPA Request */
		close(cfd);
		read_for(pfd, out, sizeof(out), 0, 30, false);
		close(pfd);
		CHECK_EQ(wait_for(pid, 10), 1);
		CHECK(strstr(out, "it may not be an rdma:// server") != NULL);
		close(lfd);
	}
	/* both servers still answer their own transport (PROG_UNAVAIL:
	 * they serve no program) */
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", tport);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &c), 0);
	CHECK_EQ(fs_null(c, NULL, 0), -EREMOTEIO);
	rpcrdma_client_destroy(c);
	snprintf(url, sizeof(url), "rdma://127.0.0.1:%d", rport);
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, &co, &c), 0);
	CHECK_EQ(fs_null(c, NULL, 0), -EREMOTEIO);
	rpcrdma_client_destroy(c);
	rpcrdma_server_destroy(rs);
	rpcrdma_server_destroy(ts);
}

/* A busy port is named ("address already in use", not "unknown error"),
 * and the shutdown summary counts NULL and ECHO too. */
TEST(tools_server_busy_port_and_summary)
{
	char server[600], ping[600], dir[64], url[96], port_s[32];
	static char out[16384];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int lfd, fd;
	pid_t pid;
	size_t have;
	struct rpcrdma_client *c;
	void *back = NULL;
	uint32_t backlen = 0;

	tool_path(server, sizeof(server), "rpcrdma-server");
	tool_path(ping, sizeof(ping), "rpcrdma-ping");
	snprintf(dir, sizeof(dir), "/tmp/rr-tools-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(lfd >= 0);
	REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(listen(lfd, 4) == 0);
	REQUIRE(getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(port_s, sizeof(port_s), "127.0.0.1:%u", ntohs(sa.sin_port));
	for (int i = 0; i < 2; i++) {
		char *argv[] = {server, (char *)"--export", dir, (char *)"--listen", port_s,
				(char *)"--transport", (char *)(i ? "rdma" : "tcp"), NULL};
		int rc = run_tool(argv, out, sizeof(out), 30);

		if (i && strstr(out, "not available in this build"))
			continue;
		CHECK_EQ(rc, 1);
		CHECK(strstr(out, "address already in use") != NULL);
		CHECK(strstr(out, "unknown error") == NULL);
	}
	close(lfd);
	CHECK(strcmp(rpcrdma_strerror(-EADDRINUSE), "address already in use") == 0);
	CHECK(strcmp(rpcrdma_strerror(-EHOSTUNREACH), "no route to host") == 0);
	CHECK(strcmp(rpcrdma_strerror(-123456), "unknown error") == 0);

	{
		char *argv[] = {server, (char *)"--export", dir, (char *)"--listen",
				(char *)"127.0.0.1:0", (char *)"--transport", (char *)"tcp", NULL};
		char *p;

		pid = spawn(argv, &fd, true);
		have = read_for(fd, out, sizeof(out), 0, 30, true);
		p = strstr(out, "listening on ");
		REQUIRE(p != NULL);
		REQUIRE(sscanf(p, "listening on %95[^ ]", url) == 1);
	}
	{
		char *argv[] = {ping, (char *)"-c", (char *)"2", (char *)"-i", (char *)"0",
				(char *)"-q", url, NULL};
		char po[4096];

		CHECK_EQ(run_tool(argv, po, sizeof(po), 30), 0);
	}
	REQUIRE_EQ(rpcrdma_client_create(url, FS_PROG, FS_VERS, NULL, &c), 0);
	CHECK_EQ(fs_echo(c, "hi", 2, &back, &backlen), FS_OK);
	CHECK_EQ(backlen, 2);
	free(back);
	rpcrdma_client_destroy(c);
	kill(pid, SIGTERM);
	read_for(fd, out, sizeof(out), have, 20, false);
	CHECK_EQ(wait_for(pid, 20), 0);
	close(fd);
	CHECK(strstr(out, "served NULL 2, READ 0,") != NULL);
	CHECK(strstr(out, "ECHO 1") != NULL);
	rmdir(dir);
}
