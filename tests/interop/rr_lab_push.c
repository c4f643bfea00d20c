/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_push: push mode (include/rpcrdma/push.h, draft-talpey-rdma-commit
 * section 2) end to end over one URL, as the interop lab runs it in the VM:
 * RDMA Write + RDMA Commit into a file-backed region a server exposed, on
 * verbs:// (rdma-core: IBV_WR_FLUSH on Linux rxe 6.12) or rdma:// (the soft
 * iWARP provider: RDMAP Commit 0xC/0xD). The server runs in a child process
 * forked here, so that it can be killed with SIGKILL right after a Commit
 * completed, as the soft provider's durability tests do. Checks:
 *   levels      a region that must persist (DURABLE only) is exposed or
 *               refused with -EOPNOTSUPP (rxe: not persistent memory); one
 *               that accepts either level is exposed with what it got;
 *   refusal     a Commit level the region does not serve is refused locally
 *               with nothing sent (the counters stay);
 *   commit      Writes of 1 B .. 256 KiB, each with a Commit; the file holds
 *               the bytes as soon as each push returned;
 *   beyond      a Commit past the region is a remote access error: -EACCES,
 *               the connection is re-established, RPCs work again;
 *   kill -9     Write + Commit of 256 KiB, SIGKILL of the server at once, the
 *               file read back: equal.
 * With -x DEVDAX (a device-DAX node of persistent memory, e.g. an emulated
 * NVDIMM) the durable-only region and the kill -9 region are 2 MiB of it,
 * and the Commit asks for persistence: on rxe a FLUSH with persistent
 * placement, which rxe grants only to persistent-memory pages.
 * Exit 0: all passed; 1: a failure; 77: Commit is not available over this URL
 * (the reason, from rpcrdma_query's caps.commit, on the last line).
 *
 *   rr_lab_push URL [-d DIR] [-x DEVDAX]
 *                 URL: verbs://ADDR:PORT or rdma://ADDR:PORT (port 0: any);
 *                 DIR: where the region files live (/tmp) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpcrdma/push.h"
#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/stats.h"

#include "lab_check.h"

#define PROG 0x20000778u
#define VERS 1u
enum { P_ECHO = 1, P_OPEN = 2 };

static const char *levels_str(uint32_t f)
{
	switch (f & (RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE)) {
	case RPCRDMA_PUSH_REGION_DURABLE: return "persistence";
	case RPCRDMA_PUSH_REGION_VISIBLE: return "global visibility";
	case RPCRDMA_PUSH_REGION_DURABLE | RPCRDMA_PUSH_REGION_VISIBLE:
		return "persistence and global visibility";
	default: return "none";
	}
}

/* ---- server (child) ---- */

struct region {
	struct rpcrdma_durable_map map;
};

static void region_released(void *arg)
{
	struct region *g = arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
}

/* OPEN: {string path, u64 size, u32 mr flags} -> {i32 rc [, region, u64 id]} */
static int h_open(struct rpcrdma_req *r, void *ctx)
{
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(r);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(r);
	struct rpcrdma_push_region reg;
	struct rpcrdma_mr_attr a;
	struct region *g;
	char path[256];
	uint64_t size, id = 0;
	uint32_t flags;
	int rc;

	(void)ctx;
	if (rpcrdma_xdr_get_string(d, path, sizeof(path)) || rpcrdma_xdr_get_u64(d, &size) ||
	    rpcrdma_xdr_get_u32(d, &flags) || size == 0 || size > (64u << 20))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	g = calloc(1, sizeof(*g));
	if (!g)
		return RPCRDMA_SVC_SYSTEM_ERR;
	g->map.fd = -1;
	rc = rpcrdma_req_push_capable(r);
	if (!rc)
		rc = rpcrdma_durable_map(path, size, &g->map);
	if (!rc)
		rc = rpcrdma_durable_mr_attr(&g->map, g->map.addr, size, 0, &a);
	if (!rc) {
		a.flags = flags;
		rc = rpcrdma_req_push_expose(r, &a, region_released, g, &reg, &id);
	}
	printf("# server: OPEN %s %llu bytes, levels asked 0x%x: %s (region levels 0x%x)\n", path,
	       (unsigned long long)size, flags, rc ? rpcrdma_strerror(rc) : "exposed",
	       rc ? 0 : reg.flags);
	fflush(stdout);
	if (rc) {
		(void)rpcrdma_durable_unmap(&g->map);
		free(g);
		rpcrdma_xdr_put_i32(e, rc);
		return RPCRDMA_SVC_OK;
	}
	rpcrdma_xdr_put_i32(e, 0);
	rpcrdma_xdr_put_push_region(e, &reg);
	rpcrdma_xdr_put_u64(e, id);
	return RPCRDMA_SVC_OK;
}

/* Serves @url until killed; reports {0, port} or {error, 0} on @wfd once
 * ready. */
static void serve(const char *url, int wfd)
{
	struct rpcrdma_server_opts o = {.threads = 2};
	struct rpcrdma_server *s = NULL;
	int rc = rpcrdma_server_create(url, &o, &s), msg[2];

	if (!rc)
		rc = rpcrdma_server_register(s, PROG, VERS, P_ECHO, h_echo, NULL);
	if (!rc)
		rc = rpcrdma_server_register(s, PROG, VERS, P_OPEN, h_open, NULL);
	if (!rc)
		rc = rpcrdma_server_start(s);
	msg[0] = rc;
	msg[1] = rc ? 0 : rpcrdma_server_port(s);
	if (write(wfd, msg, sizeof(msg)) != sizeof(msg) || rc)
		_exit(3);
	close(wfd);
	for (;;)
		pause();
}

/* Forks the server of @url; *@port gets the port it listens on (the URL's,
 * or the one chosen for port 0). */
static pid_t server_start(const char *url, int *err, int *port)
{
	int p[2], msg[2] = {-EIO, 0}, rc;
	pid_t pid;

	if (pipe(p) < 0) {
		*err = -errno;
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		serve(url, p[1]);
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], msg, sizeof(msg)) != sizeof(msg))
		msg[0] = msg[0] ? msg[0] : -EIO;
	rc = msg[0];
	*port = msg[1];
	if (pid < 0 || rc) {
		close(p[0]);
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		*err = rc ? rc : -EIO;
		return -1;
	}
	close(p[0]);
	*err = 0;
	return pid;
}

/* ---- client ---- */

static int echo(struct rpcrdma_client *c, uint32_t v)
{
	struct rpcrdma_call *call;
	uint32_t got = 0;
	int rc = rpcrdma_call_create(c, P_ECHO, &call);

	if (rc)
		return rc;
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), v);
	rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &got);
	if (!rc && got != ~v)
		rc = -EBADMSG;
	rpcrdma_call_destroy(call);
	return rc;
}

/* The server's errno (negative) or 0 + @reg. */
static int push_open(struct rpcrdma_client *c, const char *path, uint64_t size, uint32_t flags,
		     struct rpcrdma_push_region *reg)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint64_t id;
	int32_t st = 0;
	int rc = rpcrdma_call_create(c, P_OPEN, &call);

	if (rc)
		return rc;
	rpcrdma_xdr_put_string(rpcrdma_call_args(call), path);
	rpcrdma_xdr_put_u64(rpcrdma_call_args(call), size);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), flags);
	rpcrdma_call_set_reply_hint(call, 128);
	rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_i32(d, &st);
		if (!rc && st == 0) {
			rc = rpcrdma_xdr_get_push_region(d, reg);
			if (!rc)
				rc = rpcrdma_xdr_get_u64(d, &id);
		}
		if (!rc)
			rc = st;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* The file's bytes [off, off+len) equal @want, read through the file (not
 * the server's mapping); a device-DAX node is read through a mapping of its
 * own (it has no read()). */
static bool file_has(const char *path, uint64_t off, const uint8_t *want, size_t len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	size_t done = 0;
	uint8_t *b;
	bool ok;

	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode)) {
		size_t maplen = (size_t)((off + len + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1));
		void *m = mmap(NULL, maplen, PROT_READ, MAP_SHARED, fd, 0);

		ok = m != MAP_FAILED && memcmp((uint8_t *)m + off, want, len) == 0;
		if (m != MAP_FAILED)
			munmap(m, maplen);
		close(fd);
		return ok;
	}
	b = malloc(len ? len : 1);
	ok = b != NULL;
	while (ok && done < len) {
		ssize_t n = pread(fd, b + done, len - done, (off_t)(off + done));

		if (n <= 0)
			ok = false;
		else
			done += (size_t)n;
	}
	ok = ok && memcmp(b, want, len) == 0;
	close(fd);
	free(b);
	return ok;
}

/* How Commit travels on the client's side of @url, from the provider. */
static void commit_note(const char *url, char *buf, size_t n)
{
	const char *prov = !strncmp(url, "verbs://", 8) ? "verbs" : !strncmp(url, "rdma://", 7) ? "soft"
											     : NULL;
	struct rpcrdma_context *ctx = NULL;
	struct rpcrdma_open_attr oa;
	struct rpcrdma_caps caps;
	struct sockaddr_in sin;
	char host[64];
	const char *h = strstr(url, "://");
	const char *colon;

	if (!prov) {
		snprintf(buf, n, "no RDMA transport in this URL");
		return;
	}
	snprintf(buf, n, "%s: unknown", prov);
	memset(&sin, 0, sizeof(sin));
	memset(&oa, 0, sizeof(oa));
	if (h && (colon = strrchr(h + 3, ':')) && (size_t)(colon - h - 3) < sizeof(host)) {
		memcpy(host, h + 3, (size_t)(colon - h - 3));
		host[colon - h - 3] = 0;
		sin.sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &sin.sin_addr) == 1)
			oa.addr = (struct sockaddr *)&sin;
	}
	if (rpcrdma_open(prov, &oa, &ctx) == 0) {
		if (rpcrdma_query(ctx, &caps) == 0)
			snprintf(buf, n, "%s %.64s: %.128s", prov, caps.device, caps.commit);
		rpcrdma_close(ctx);
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: rr_lab_push URL [-d DIR] [-x DEVDAX]   "
		"(URL: verbs://ADDR:PORT | rdma://ADDR:PORT)\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct rpcrdma_client_opts co = {.timeout_ms = 20000, .connect_timeout_ms = 10000};
	const char *url, *dir = "/tmp", *pmem = NULL;
	char curl[128];
	int port = 0;
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_push_region reg, forged;
	struct rpcrdma_xprt_stats before, after;
	char note[256], path[300];
	static uint8_t data[1u << 20];
	uint32_t level, st = 0;
	pid_t pid;
	int rc, status = 0;

	if (argc < 2 || argv[1][0] == '-' || !strstr(argv[1], "://") || !strrchr(argv[1], ':'))
		return usage();
	url = argv[1];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-d") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "-x") && i + 1 < argc)
			pmem = argv[++i];
		else
			return usage();
	}
	/* the server first: a child must not inherit this process's verbs
	 * contexts (rdma-core device files and mappings are per process) */
	pid = server_start(url, &rc, &port);
	commit_note(url, note, sizeof(note));
	printf("# client side: %s\n", note);
	if (pid < 0) {
		if (rc == -EPROTONOSUPPORT) {
			printf("not yet available: %s is not built into the library\n", url);
			return 77;
		}
		result(false, "server", "%s: %s", url, rpcrdma_strerror(rc));
		return 1;
	}
	/* the server's port (port 0 in @url: the one it chose) */
	snprintf(curl, sizeof(curl), "%.*s:%d", (int)(strrchr(url, ':') - url), url, port);
	rc = rpcrdma_client_create(curl, PROG, VERS, &co, &c);
	result(rc == 0, "connect", "%s", rc ? rpcrdma_strerror(rc) : curl);
	if (rc)
		goto out;
	rc = rpcrdma_client_push_capable(c);
	if (rc == -EOPNOTSUPP) {
		printf("not yet available: no RDMA Commit on this connection (%s)\n", note);
		rpcrdma_client_destroy(c);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 77;
	}
	result(rc == 0, "push capable", "%s", rc ? rpcrdma_strerror(rc) : note);
	rc = echo(c, 77);
	result(rc == 0, "rpc", "ECHO %s", rc ? rpcrdma_strerror(rc) : "answered");

	/* levels: persistence only (of persistent memory with -x), then either */
	snprintf(path, sizeof(path), "%s/rr-lab-push-durable.bin", dir);
	unlink(path);
	rc = push_open(c, pmem ? pmem : path, pmem ? 2u << 20 : 1u << 20, RPCRDMA_MR_DURABLE, &reg);
	if (rc == 0)
		result(reg.flags & RPCRDMA_PUSH_REGION_DURABLE, "levels: durable-only region",
		       "%s exposed, serves %s", pmem ? pmem : "file", levels_str(reg.flags));
	else
		result(rc == -EOPNOTSUPP && !pmem, "levels: durable-only region",
		       "%s refused with %s (the device cannot persist this memory)",
		       pmem ? pmem : "file", rpcrdma_strerror(rc));
	snprintf(path, sizeof(path), "%s/rr-lab-push.bin", dir);
	unlink(path);
	rc = push_open(c, path, 1u << 20, RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE, &reg);
	result(rc == 0 && reg.flags, "levels: region accepting either level",
	       "%s, serves %s", rc ? rpcrdma_strerror(rc) : "exposed", rc ? "-" : levels_str(reg.flags));
	if (rc || !reg.flags)
		goto out;
	level = (reg.flags & RPCRDMA_PUSH_REGION_DURABLE) ? RPCRDMA_PUSH_COMMIT : RPCRDMA_PUSH_VISIBLE;

	/* refusal: the other level, where the region lacks it */
	forged = reg;
	forged.flags &= level == RPCRDMA_PUSH_COMMIT ? ~RPCRDMA_PUSH_REGION_DURABLE
						      : ~RPCRDMA_PUSH_REGION_VISIBLE;
	if (rpcrdma_client_stats(c, &before) == 0) {
		rc = rpcrdma_push_write(c, &forged, 0, data, 64, level, &st);
		rpcrdma_client_stats(c, &after);
		result(rc == -EOPNOTSUPP && after.commits == before.commits &&
		       after.push_writes == before.push_writes,
		       "refusal: a level the region does not serve", "%s, nothing sent",
		       rpcrdma_strerror(rc));
	}

	/* commit: 1 B .. 256 KiB at spread offsets, each visible in the file
	 * when the push returned */
	{
		static const uint32_t sizes[] = {1, 3, 64, 4095, 4096, 4097, 65536, 262144};
		uint64_t off = 0;
		unsigned bad = 0, n = 0;

		rpcrdma_client_stats(c, &before);
		for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			fill(data, sizes[i], 100 + i);
			rc = rpcrdma_push_write(c, &reg, off, data, sizes[i], level, &st);
			if (rc || !file_has(path, off, data, sizes[i])) {
				bad++;
				printf("#   %u bytes at %llu: %s\n", sizes[i], (unsigned long long)off,
				       rc ? rpcrdma_strerror(rc) : "file differs");
			}
			n++;
			off += sizes[i] + 4093; /* odd offsets */
		}
		rpcrdma_client_stats(c, &after);
		result(bad == 0 && after.commits - before.commits == n,
		       "commit: Write + Commit 1 B .. 256 KiB",
		       "%u of %u in the file when the push returned (%s), %llu Commits, %llu bytes",
		       n - bad, n, level == RPCRDMA_PUSH_COMMIT ? "persistent" : "global visibility",
		       (unsigned long long)(after.commits - before.commits),
		       (unsigned long long)(after.push_write_bytes - before.push_write_bytes));
	}

	/* beyond: the region forged longer; the server's device refuses */
	forged = reg;
	forged.length += 65536;
	rc = rpcrdma_push_write(c, &forged, reg.length, data, 4096, level, &st);
	result(rc == -EACCES || rc == -ECONNRESET, "beyond: Commit past the region",
	       "%s (remote access error)", rpcrdma_strerror(rc));
	rc = -1;
	for (int i = 0; i < 50 && rc; i++) {
		rc = echo(c, 0x1234 + (uint32_t)i);
		if (rc)
			usleep(100000);
	}
	result(rc == 0, "beyond: RPCs after the reconnect", "%s", rc ? rpcrdma_strerror(rc) : "ECHO");

	/* kill -9 right after the Commit completed (with -x: a persistent
	 * Commit into persistent memory) */
	snprintf(path, sizeof(path), "%s/rr-lab-push-kill9.bin", dir);
	unlink(path);
	if (pmem)
		snprintf(path, sizeof(path), "%s", pmem);
	rc = push_open(c, path, pmem ? 2u << 20 : 1u << 20,
		       pmem ? RPCRDMA_MR_DURABLE : RPCRDMA_MR_DURABLE | RPCRDMA_MR_VISIBLE, &reg);
	if (rc == 0 && pmem)
		level = RPCRDMA_PUSH_COMMIT;
	if (rc == 0) {
		fill(data, 262144, 4242);
		rc = rpcrdma_push_write(c, &reg, 8192, data, 262144, level, &st);
		kill(pid, SIGKILL); /* no chance to flush or unmap */
		waitpid(pid, &status, 0);
		pid = -1;
		result(rc == 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
		       file_has(path, 8192, data, 262144), "kill -9 after the Commit",
		       "%s (%s); server killed; 262144 bytes %s in %s",
		       rc ? rpcrdma_strerror(rc) : "Commit completed",
		       level == RPCRDMA_PUSH_COMMIT ? "persistent" : "global visibility",
		       file_has(path, 8192, data, 262144) ? "equal" : "NOT equal", path);
	} else {
		result(false, "kill -9 after the Commit", "OPEN: %s", rpcrdma_strerror(rc));
	}
out:
	if (c)
		rpcrdma_client_destroy(c);
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	return failures ? 1 : 0;
}
