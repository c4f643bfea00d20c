/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for the example file service (tools/fileservice/fileservice.h): the
 * argument decoding of every procedure, with the RPC server's Call header
 * and credential decoding in front of it (src/rpc/svc.c, RFC 5531), through
 * an in-process transport ("fzfs", registered here: it hands Calls to the
 * server on this thread and takes its Replies back). Decoding and execution
 * of the service cannot be separated (each handler decodes, then acts on
 * the file system), so the service runs on an export in a temporary
 * directory, next to a directory outside the export that holds a secret
 * and that no Call may read, list, write or create anything in; the
 * export holds symbolic links that stay inside and ones that lead out.
 *
 * Input (docs/fuzzing.md "fuzz_fileservice"): one byte of flags (push mode
 * possible, exposure fails, paths resolved without openat2), then Calls: procedure, credential kind, and
 * arguments either raw or built from a table of hostile paths ("..",
 * absolute, escaping symbolic links, too long, "." ...) with fuzzer-chosen
 * numbers, optionally with trailing bytes or with WRITE's data delivered
 * apart (as an RDMA Read chunk would be). Checked: every Call whose header
 * decodes gets exactly one Reply with its XID; no Reply carries the
 * secret, no LIST names anything outside; nothing outside the export
 * changes; the export is put back as it was after each input. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "rpc/rpcmsg.h"
#include "transport/xprt.h"
#include "transport/xprt_ctl.h"
#include "fileservice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_fileservice"
#define FAIL FZ_FAIL

#define MAXREG 8

/* The file outside the export: a name and content drawn at random when the
 * process starts, so that no input can hold them (a Reply that does came
 * from outside). */
static uint8_t secret[32];
static char secret_name[32];

/* ---- the in-process transport ---- */

struct rr_xprt_server {
	struct rr_xprt_server_params p;
};

struct fzreg {
	void (*released)(void *arg);
	void *arg;
};

static struct {
	struct rr_xprt_server *xs;
	unsigned replies, dones;
	uint32_t reply_xid;
	bool reply_ok;            /* the Reply decoded as a Reply */
	bool push_ok, expose_fails;
	struct fzreg regs[MAXREG];
	unsigned nregs;
} T;

static int t_create(const struct rr_xprt_target *t, const struct rr_xprt_server_params *p,
		    struct rr_xprt_server **out)
{
	struct rr_xprt_server *s = calloc(1, sizeof(*s));

	(void)t;
	if (!s)
		return -ENOMEM;
	s->p = *p;
	T.xs = s;
	*out = s;
	return 0;
}

static int t_port(const struct rr_xprt_server *s)
{
	(void)s;
	return 1;
}

static int t_start(struct rr_xprt_server *s)
{
	(void)s;
	return 0;
}

/* Whether @hay holds @needle (memchr, then a byte loop: no comparison hook
 * that would teach the fuzzer the needle). */
static bool holds(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
	const uint8_t *p = hay, *end = hay + n;

	while (m && (size_t)(end - p) >= m && (p = memchr(p, needle[0], (size_t)(end - p - m + 1)))) {
		size_t i = 1;

		while (i < m && p[i] == needle[i])
			i++;
		if (i == m)
			return true;
		p++;
	}
	return false;
}

/* A Reply: its header decodes; neither its inline bytes nor its items hold
 * the secret's content or name. */
static int t_send_reply(struct rr_xprt_server *s, struct rr_xprt_req *req,
			const struct rr_xprt_msg *m)
{
	struct rr_xdr_dec d;
	struct rr_rpc_reply rep;

	(void)s, (void)req;
	T.replies++;
	rr_xdr_dec_init(&d, m->head, m->head_len);
	T.reply_ok = rr_rpcmsg_decode_reply(&d, &rep) == 0;
	T.reply_xid = rep.xid;
	if (holds(m->head, m->head_len, secret, sizeof(secret)) ||
	    holds(m->head, m->head_len, (const uint8_t *)secret_name, strlen(secret_name)))
		FAIL("a Reply holds what is outside the export");
	for (unsigned i = 0; i < m->nddp; i++)
		if (holds(m->ddp[i].ptr, m->ddp[i].len, secret, sizeof(secret)))
			FAIL("a Reply's data is the secret outside the export");
	return 0;
}

static void t_req_done(struct rr_xprt_server *s, struct rr_xprt_req *req)
{
	(void)s, (void)req;
	T.dones++;
}

static void t_stop(struct rr_xprt_server *s)
{
	(void)s;
}

static void t_destroy(struct rr_xprt_server *s)
{
	free(s);
}

/* Push mode (PUSH_OPEN): the connection can do RDMA Commit when the input
 * says so; an exposed region is kept until the input ends (the connection
 * goes), then released as the transport would. */
static int t_ctl(struct rr_xprt_server *s, struct rr_xprt_req *req, unsigned op, void *arg)
{
	(void)s;
	if (!req)
		return -EOPNOTSUPP;
	if (op == RR_CTL_COMMIT_OK)
		return T.push_ok ? 0 : -EOPNOTSUPP;
	if (op == RR_CTL_EXPOSE) {
		struct rr_ctl_expose *x = arg;
		struct stat st;

		if (T.expose_fails || T.nregs == MAXREG)
			return -ENOSPC;
		if (!(x->attr->flags & RPCRDMA_MR_DURABLE) || fstat(x->attr->durable_fd, &st) ||
		    !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size < x->attr->durable_offset + x->attr->length)
			FAIL("a push region not inside its file");
		T.regs[T.nregs++] = (struct fzreg){x->released, x->arg};
		x->stag = 0x1000 + T.nregs;
		x->to = 0x100000;
		x->id = T.nregs;
		return 0;
	}
	return -EOPNOTSUPP;
}

static const struct rr_xprt_server_ops fzfs_server = {
	.create = t_create,
	.port = t_port,
	.start = t_start,
	.send_reply = t_send_reply,
	.req_done = t_req_done,
	.stop = t_stop,
	.destroy = t_destroy,
	.inline_recv = true,
	.ctl = t_ctl,
};

static const struct rr_xprt_class fzfs_class = {"fzfs", NULL, &fzfs_server};

/* ---- the directories ---- */

static char top[64], exp_dir[96], out_dir[96];
static struct fs_service svc;
static struct rpcrdma_server *srv;

struct baseline {
	const char *path;     /* relative to the export */
	const char *content;
};

static const struct baseline files[] = {
	{"file_a", "the first file of the export\n"},
	{"sub/file_b", "a file one level down\n"},
	{"sub/deeper/file_c", "and two levels down\n"},
	{"empty", ""},
};

static char out_secret[64], up_secret[96], link_top_secret[96];

static const struct {
	const char *path, *target;
} links[] = {
	{"link_in", "file_a"},
	{"link_out", out_secret},
	{"link_abs", "/etc/passwd"},
	{"sub/link_up", ".."},
	{"sub/link_top", "../../outside"},
	{"loop", "loop"},
};

static const char *const dirs[] = {"", "sub", "sub/deeper"};

static void put_bytes(const char *dir, const char *rel, const void *content, size_t n)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, content, n) != (ssize_t)n || close(fd) != 0)
		FAIL("cannot write %s", p);
}

static void put_file(const char *dir, const char *rel, const char *content)
{
	put_bytes(dir, rel, content, strlen(content));
}

/* Removes @dir and everything under it (symbolic links are removed, never
 * followed). */
static void rm_tree(int parent, const char *dir)
{
	int fd = openat(parent, dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) != 0)
			rm_tree(dirfd(d), de->d_name);
	}
	closedir(d);
	(void)unlinkat(parent, dir, AT_REMOVEDIR);
}

/* The temporary directories go with the process (libFuzzer's end of run,
 * the corpus replayer's exit). */
static void cleanup(void)
{
	for (unsigned i = 0; i < T.nregs; i++)
		T.regs[i].released(T.regs[i].arg);
	T.nregs = 0;
	if (top[0])
		rm_tree(AT_FDCWD, top);
}

static void once(void)
{
	struct rpcrdma_server_opts o = {.threads = 1, .flags = RPCRDMA_SERVER_INLINE};
	char p[256];

	snprintf(top, sizeof(top), "%s/fuzz_fileservice.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(top))
		FAIL("mkdtemp");
	atexit(cleanup);
	snprintf(exp_dir, sizeof(exp_dir), "%s/export", top);
	snprintf(out_dir, sizeof(out_dir), "%s/outside", top);
	if (mkdir(exp_dir, 0755) || mkdir(out_dir, 0755))
		FAIL("mkdir");
	for (size_t i = 1; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", exp_dir, dirs[i]);
		if (mkdir(p, 0755))
			FAIL("mkdir");
	}
	{
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

		if (fd < 0 || read(fd, secret, sizeof(secret)) != (ssize_t)sizeof(secret))
			FAIL("no randomness");
		close(fd);
		snprintf(secret_name, sizeof(secret_name), "s-%02x%02x%02x%02x%02x%02x%02x%02x",
			 secret[0], secret[1], secret[2], secret[3], secret[4], secret[5],
			 secret[6], secret[7]);
		memmove(secret, secret + 8, 24);   /* content: bytes not in the name */
		snprintf(out_secret, sizeof(out_secret), "../outside/%s", secret_name);
		snprintf(up_secret, sizeof(up_secret), "sub/../../outside/%s", secret_name);
		snprintf(link_top_secret, sizeof(link_top_secret), "sub/link_top/%s",
			 secret_name);
	}
	put_bytes(out_dir, secret_name, secret, sizeof(secret));
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", exp_dir, links[i].path);
		if (symlink(links[i].target, p))
			FAIL("symlink");
	}
	if (fs_service_init(&svc, exp_dir) || rr_xprt_register(&fzfs_class) ||
	    rpcrdma_server_create("fzfs://fuzz:1", &o, &srv) || fs_service_register(srv, &svc) ||
	    rpcrdma_server_start(srv))
		FAIL("no file service");
}

static bool is_link(const char *rel)
{
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (!strcmp(links[i].path, rel))
			return true;
	return false;
}

static bool is_baseline(const char *rel)
{
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(files[i].path, rel))
			return true;
	for (size_t i = 1; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strcmp(dirs[i], rel))
			return true;
	return is_link(rel);
}

/* The export as it was: what a Call created goes, what it changed is
 * rewritten (a WRITE may truncate, extend or create). The links are left
 * alone: nothing the service does can replace a link (its opens do not
 * follow the final one out of the export, and it has no unlink). */
static void restore(void)
{
	char p[512], rel[300];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		DIR *d;
		struct dirent *de;

		snprintf(p, sizeof(p), "%s/%s", exp_dir, dirs[i]);
		d = opendir(p);
		if (!d)
			FAIL("a directory of the export is gone");
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			snprintf(rel, sizeof(rel), "%s%s%s", dirs[i], dirs[i][0] ? "/" : "",
				 de->d_name);
			if (is_baseline(rel))
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) != 0)
				FAIL("cannot remove %s", rel);
		}
		closedir(d);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		put_file(exp_dir, files[i].path, files[i].content);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char t[256];
		ssize_t n;

		snprintf(p, sizeof(p), "%s/%s", exp_dir, links[i].path);
		n = readlink(p, t, sizeof(t) - 1);
		if (n < 0 || (size_t)n != strlen(links[i].target) ||
		    memcmp(t, links[i].target, (size_t)n))
			FAIL("link %s changed", links[i].path);
	}
}

/* Nothing outside the export changed: its one file, and nothing new. */
static void check_outside(void)
{
	char p[256], buf[128];
	DIR *d = opendir(out_dir);
	struct dirent *de;
	unsigned n = 0;
	int fd;
	ssize_t got;

	if (!d)
		FAIL("outside directory gone");
	while ((de = readdir(d)))
		n++;
	closedir(d);
	if (n != 3)
		FAIL("something was created outside the export");
	snprintf(p, sizeof(p), "%s/%s", out_dir, secret_name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	got = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)sizeof(secret) || memcmp(buf, secret, sizeof(secret)))
		FAIL("the file outside the export changed");
	d = opendir(top);
	n = 0;
	while (d && (de = readdir(d)))
		n++;
	if (d)
		closedir(d);
	if (n != 4)
		FAIL("something was created next to the export");
}

/* ---- Calls ---- */

static const char *const paths[] = {
	"file_a", "sub/file_b", "sub/deeper/file_c", "empty", "new_file", "sub/new_file",
	"..", out_secret, up_secret, "/etc/passwd",
	"link_in", "link_out", "link_abs", "sub/link_up/file_a", link_top_secret,
	"loop", ".", "", "./file_a", "sub//file_b", "sub/", "sub/deeper", "sub/..",
	"a/b/c/d", "file_a/x", "sub/link_up/../outside", "...", ". /x", "sub/./../file_a",
};

static void put_be32(uint8_t *b, size_t *n, uint32_t v)
{
	rr_put_be32(b + *n, v);
	*n += 4;
}

/* An XDR string/opaque (length, bytes, pad). */
static void put_opaque(uint8_t *b, size_t *n, const void *p, uint32_t len)
{
	put_be32(b, n, len);
	memcpy(b + *n, p, len);
	*n += len;
	while (*n & 3)
		b[(*n)++] = 0;
}

/* A path argument: from the table, or raw bytes of the input, or a long
 * one. */
static void put_path(struct fz_in *in, uint8_t *b, size_t *n)
{
	uint8_t k = fz_u8(in);

	if (k < 0xe0) {
		const char *s = paths[k % (sizeof(paths) / sizeof(paths[0]))];

		put_opaque(b, n, s, (uint32_t)strlen(s));
	} else if (k < 0xf8) {
		size_t len;
		const uint8_t *raw = fz_bytes(in, fz_u8(in), &len);

		put_opaque(b, n, raw, (uint32_t)len);
	} else {
		static char longp[FS_PATH_MAX + 64];
		uint32_t len = FS_PATH_MAX - 8 + (k & 7) * 4;

		for (uint32_t i = 0; i < len; i++)
			longp[i] = (i % 64 == 63) ? '/' : (char)('a' + i % 26);
		put_opaque(b, n, longp, len);
	}
}

static uint8_t msg[FS_PATH_MAX * 2 + 70000];
static uint8_t ext_data[65536];

/* One Call; returns false when the input is used up. */
static bool call(struct fz_in *in, uint32_t xid, bool *mutated)
{
	uint8_t pk = fz_u8(in), ck = fz_u8(in), how = fz_u8(in);
	uint32_t proc = pk % 8 == 7 ? fz_be32(in) : pk % 8;
	size_t n = 0, hdr;
	struct rr_rpc_ext ext;
	struct rr_xprt_req req = {.msg = msg};
	unsigned replies = T.replies, dones = T.dones;
	bool header_ok = true;

	if (!in->left && pk == 0)
		return false;
	/* the Call header (RFC 5531 section 9) */
	put_be32(msg, &n, xid);
	put_be32(msg, &n, RR_RPC_CALL);
	put_be32(msg, &n, (ck & 0x40) ? 3 : RR_RPC_VERSION);
	put_be32(msg, &n, (ck & 0x80) ? FS_PROG + 1 : FS_PROG);
	put_be32(msg, &n, (ck & 0x20) ? FS_VERS + 1 : FS_VERS);
	put_be32(msg, &n, proc);
	switch (ck & 3) {
	case 0:   /* AUTH_NONE */
		put_be32(msg, &n, RR_RPC_AUTH_NONE);
		put_be32(msg, &n, 0);
		break;
	case 1: { /* AUTH_SYS: stamp, machinename, uid, gid, gids */
		uint8_t body[64];
		size_t bn = 0;

		put_be32(body, &bn, 1);
		put_opaque(body, &bn, "fuzzhost", 8);
		put_be32(body, &bn, 1000);
		put_be32(body, &bn, 1000);
		put_be32(body, &bn, (ck >> 2) & 7);   /* gids: maybe more than follow */
		put_be32(msg, &n, RR_RPC_AUTH_SYS);
		put_opaque(msg, &n, body, (uint32_t)bn);
		break;
	}
	case 2:   /* another flavor */
		put_be32(msg, &n, 6);
		put_be32(msg, &n, 0);
		break;
	default:  /* a body longer than the message */
		put_be32(msg, &n, RR_RPC_AUTH_NONE);
		put_be32(msg, &n, 0x7fffffffu);
		header_ok = false;
		break;
	}
	put_be32(msg, &n, RR_RPC_AUTH_NONE);   /* verifier */
	put_be32(msg, &n, (ck & 0x10) ? 4 : 0);
	if (ck & 0x10)
		put_be32(msg, &n, 0);
	hdr = n;
	if (how & 1) {
		/* raw arguments */
		size_t len;
		const uint8_t *raw = fz_bytes(in, (size_t)fz_u8(in) * 4 + (how >> 6), &len);

		memcpy(msg + n, raw, len);
		n += len;
	} else {
		switch (proc) {
		case FS_READ:
			put_path(in, msg, &n);
			put_be32(msg, &n, fz_be32(in));   /* offset, high word */
			put_be32(msg, &n, fz_be32(in));
			/* count: below 64 KiB unless asked for (the service
			 * allocates the count it is asked for, up to 8 MiB,
			 * before it reads: each such READ costs a millisecond
			 * here; docs/fuzzing.md "Findings") */
			put_be32(msg, &n, (how & 8) ? fz_be32(in) : fz_be32(in) % 65536);
			break;
		case FS_WRITE: {
			uint32_t len = (uint32_t)fz_u8(in) * 3;

			put_path(in, msg, &n);
			put_be32(msg, &n, (how & 8) ? fz_be32(in) : 0);
			put_be32(msg, &n, fz_be32(in) % 65536);
			put_be32(msg, &n, fz_be32(in) % 8);   /* flags (some unknown) */
			if (how & 2) {
				/* the data apart, as an RDMA Read chunk */
				memset(ext_data, 'w', len);
				put_be32(msg, &n, len);
				ext = (struct rr_rpc_ext){n, ext_data, (how & 4) ? len + 1 : len};
				req.ext = &ext;
				req.n_ext = 1;
			} else {
				put_be32(msg, &n, len);
				memset(msg + n, 'w', len);
				memset(msg + n + len, 0, RR_ALIGN4(len) - len);
				n += RR_ALIGN4(len);
			}
			*mutated = true;
			break;
		}
		case FS_LIST:
			put_path(in, msg, &n);
			put_be32(msg, &n, fz_be32(in));
			put_be32(msg, &n, fz_be32(in));
			break;
		case FS_COMMIT:
			put_path(in, msg, &n);
			break;
		case FS_PUSH_OPEN:
			put_path(in, msg, &n);
			put_be32(msg, &n, 0);
			put_be32(msg, &n, (how & 8) ? fz_be32(in) : (uint32_t)fz_u8(in) << 12);
			*mutated = true;
			break;
		case FS_ECHO: {
			size_t len;
			const uint8_t *raw = fz_bytes(in, (size_t)fz_u8(in) * 16, &len);

			put_opaque(msg, &n, raw, (uint32_t)len);
			break;
		}
		default:
			break;
		}
		if (how & 0x10)
			put_be32(msg, &n, 0x0badbeef);   /* bytes left over */
	}
	/* WRITE with raw arguments may also write or create */
	if (proc == FS_WRITE || proc == FS_PUSH_OPEN)
		*mutated = true;
	if (how & 0x20 && n > hdr)
		n -= 1 + fz_u8(in) % (n - hdr);          /* cut short */
	req.len = n;
	T.xs->p.recv(T.xs->p.ctx, &req);
	if (T.dones != dones + 1)
		FAIL("a Call was not finished exactly once");
	if (header_ok && T.replies != replies + 1)
		FAIL("a Call whose header decodes got %u Replies", T.replies - replies);
	if (T.replies != replies && (!T.reply_ok || T.reply_xid != xid))
		FAIL("a Reply that is not the Call's");
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz_in in = {data, size};
	bool mutated = false;
	uint8_t f;

	if (!srv)
		once();
	f = fz_u8(&in);
	T.push_ok = f & 1;
	T.expose_fails = f & 2;
	/* paths resolved by openat2(RESOLVE_BENEATH), or by the walk that
	 * opens each component with O_NOFOLLOW (kernels without openat2) */
	atomic_store(&svc.openat2_state, (f & 4) ? -1 : 0);
	for (uint32_t xid = 1; in.left && call(&in, xid, &mutated); xid++)
		;
	/* the connection ends: its push regions are released */
	for (unsigned i = 0; i < T.nregs; i++)
		T.regs[i].released(T.regs[i].arg);
	T.nregs = 0;
	if (mutated) {
		check_outside();
		restore();
	}
	return 0;
}
