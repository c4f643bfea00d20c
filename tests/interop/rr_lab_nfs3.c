/* SPDX-License-Identifier: BSD-2-Clause */
/* rr_lab_nfs3: a small NFSv3 client (RFC 1813) on the public RPC API
 * (include/rpcrdma/rpc.h), run by the interop lab against the Linux kernel's
 * nfsd. It finds mountd through rpcbind (RFC 1833 PMAPPROC_GETPORT, version
 * 2) and gets the root file handle with MOUNT v3 MNT over tcp://, then talks
 * NFS over the URL it is given: tcp://host:2049 (RFC 5531 record marking),
 * rdma://host:20049 (our soft iWARP against kernel siw) or verbs://host:20049
 * (rdma-core: siw or rxe). Operations, sized to exercise every RPC-over-RDMA
 * (RFC 8166) chunk type against svcrdma:
 *   NULL, FSINFO (no reply size hint: the transport offers a Reply chunk,
 *          which Linux uses even for these tiny replies), GETATTR, LOOKUP
 *          (hinted small: inline Replies);
 *   READ   of a file in rtmax-sized pieces: data is DDP-eligible (RFC 5666
 *          section ... / RFC 8267 section 3.3), so over RDMA it lands in a
 *          Write chunk (our result sink);
 *   CREATE + WRITE (FILE_SYNC) in wtmax-sized pieces: DDP-eligible data, a
 *          Read chunk over RDMA;
 *   READDIR with a 32 KiB count on a big directory: a Reply larger than the
 *          4 KiB inline threshold, so a Reply chunk over RDMA.
 * Every byte is checked against the exported directory itself, which the
 * program also sees locally (same VM): READ data equals the local file,
 * WRITE data appears in the local file and reads back equal over NFS,
 * READDIR names equal the local directory listing, GETATTR size/fileid equal
 * stat(2).
 *
 * Output: one "ok NAME" / "not ok NAME: why" line per check. Exit 0 when all
 * passed, 1 otherwise, 77 when the NFS URL's transport is not built into
 * the library (-EPROTONOSUPPORT: "not yet available"). */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"

#define PMAP_PROG 100000u
#define MOUNT_PROG 100005u
#define NFS_PROG 100003u

enum { NFS3_NULL = 0, NFS3_GETATTR = 1, NFS3_LOOKUP = 3, NFS3_READ = 6, NFS3_WRITE = 7,
       NFS3_CREATE = 8, NFS3_READDIR = 16, NFS3_FSINFO = 19 };

#define FH_MAX 64
struct fh {
	uint32_t len;
	uint8_t data[FH_MAX];
};

struct fattr {
	uint32_t type, mode;
	uint64_t size, fileid;
};

static int failures;
static int checks;

static void result(bool ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (ok) {
		printf("ok %s", name);
	} else {
		failures++;
		printf("not ok %s", name);
	}
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}

/* ---- XDR helpers ---- */

static int put_fh(struct rpcrdma_xdr_enc *e, const struct fh *fh)
{
	return rpcrdma_xdr_put_opaque(e, fh->data, fh->len);
}

static int get_fh(struct rpcrdma_xdr_dec *d, struct fh *fh)
{
	const void *p;
	int rc = rpcrdma_xdr_get_opaque(d, FH_MAX, &p, &fh->len);

	if (rc == 0)
		memcpy(fh->data, p, fh->len);
	return rc;
}

static int skip(struct rpcrdma_xdr_dec *d, unsigned words)
{
	uint32_t v;

	for (unsigned i = 0; i < words; i++)
		if (rpcrdma_xdr_get_u32(d, &v))
			return -EBADMSG;
	return 0;
}

/* fattr3: type mode nlink uid gid size used rdev(2) fsid fileid atime mtime ctime */
static int get_fattr(struct rpcrdma_xdr_dec *d, struct fattr *a)
{
	uint32_t nlink, uid, gid;
	uint64_t used;
	int rc = 0;

	rc |= rpcrdma_xdr_get_u32(d, &a->type);
	rc |= rpcrdma_xdr_get_u32(d, &a->mode);
	rc |= rpcrdma_xdr_get_u32(d, &nlink);
	rc |= rpcrdma_xdr_get_u32(d, &uid);
	rc |= rpcrdma_xdr_get_u32(d, &gid);
	rc |= rpcrdma_xdr_get_u64(d, &a->size);
	rc |= rpcrdma_xdr_get_u64(d, &used);
	rc |= skip(d, 2 + 2);                  /* rdev, fsid */
	rc |= rpcrdma_xdr_get_u64(d, &a->fileid);
	rc |= skip(d, 6);                      /* atime mtime ctime */
	return rc ? -EBADMSG : 0;
}

static int get_post_op_attr(struct rpcrdma_xdr_dec *d, struct fattr *a, bool *present)
{
	bool follows;
	struct fattr dummy;

	if (rpcrdma_xdr_get_bool(d, &follows))
		return -EBADMSG;
	if (present)
		*present = follows;
	return follows ? get_fattr(d, a ? a : &dummy) : 0;
}

static int skip_wcc_data(struct rpcrdma_xdr_dec *d)
{
	bool follows;

	if (rpcrdma_xdr_get_bool(d, &follows))
		return -EBADMSG;
	if (follows && skip(d, 6))           /* wcc_attr: size mtime ctime */
		return -EBADMSG;
	return get_post_op_attr(d, NULL, NULL);
}

/* ---- calls ---- */

static struct rpcrdma_call *new_call(struct rpcrdma_client *c, uint32_t proc)
{
	struct rpcrdma_call *call = NULL;
	int rc = rpcrdma_call_create(c, proc, &call);

	if (rc) {
		fprintf(stderr, "rpcrdma_call_create(%u): %s\n", proc, strerror(-rc));
		return NULL;
	}
	return call;
}

static int run(struct rpcrdma_call *call, const char *what)
{
	int rc = rpcrdma_call_run(call);

	if (rc) {
		struct rpcrdma_rpc_status st;

		memset(&st, 0, sizeof(st));
		rpcrdma_call_status(call, &st);
		fprintf(stderr, "%s: %s (reply_stat %u accept_stat %u)\n", what, strerror(-rc),
			st.reply_stat, st.accept_stat);
	}
	return rc;
}

static int pmap_getport(const char *url, uint32_t prog, uint32_t vers, uint32_t *port)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	int rc = rpcrdma_client_create(url, PMAP_PROG, 2, NULL, &c);

	if (rc) {
		fprintf(stderr, "rpcbind %s: %s\n", url, strerror(-rc));
		return rc;
	}
	call = new_call(c, 3 /* PMAPPROC_GETPORT */);
	rc = -ENOMEM;
	if (call) {
		e = rpcrdma_call_args(call);
		rpcrdma_xdr_put_u32(e, prog);
		rpcrdma_xdr_put_u32(e, vers);
		rpcrdma_xdr_put_u32(e, 6 /* IPPROTO_TCP */);
		rpcrdma_xdr_put_u32(e, 0);
		rc = run(call, "PMAPPROC_GETPORT");
		if (rc == 0)
			rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), port);
		rpcrdma_call_destroy(call);
	}
	rpcrdma_client_destroy(c);
	return rc;
}

static int mount_root(const char *url, const char *path, struct fh *root)
{
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_auth_sys sys;
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 1;
	int rc = rpcrdma_client_create(url, MOUNT_PROG, 3, NULL, &c);

	if (rc) {
		fprintf(stderr, "mountd %s: %s\n", url, strerror(-rc));
		return rc;
	}
	rpcrdma_auth_sys_self(&sys);
	rpcrdma_client_set_auth_sys(c, &sys);
	call = new_call(c, 1 /* MOUNTPROC3_MNT */);
	rc = -ENOMEM;
	if (call) {
		rpcrdma_xdr_put_string(rpcrdma_call_args(call), path);
		rc = run(call, "MOUNTPROC3_MNT");
		if (rc == 0) {
			d = rpcrdma_call_results(call);
			rc = rpcrdma_xdr_get_u32(d, &st);
			if (rc == 0 && st != 0) {
				fprintf(stderr, "MNT %s: mountstat3 %u\n", path, st);
				rc = -EACCES;
			} else if (rc == 0) {
				rc = get_fh(d, root);
			}
		}
		rpcrdma_call_destroy(call);
	}
	rpcrdma_client_destroy(c);
	return rc;
}

static int nfs_getattr(struct rpcrdma_client *c, const struct fh *fh, struct fattr *a)
{
	struct rpcrdma_call *call = new_call(c, NFS3_GETATTR);
	uint32_t st;
	int rc;

	if (!call)
		return -ENOMEM;
	put_fh(rpcrdma_call_args(call), fh);
	rpcrdma_call_set_reply_hint(call, 256); /* inline: no Reply chunk */
	rc = run(call, "GETATTR");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0)
			rc = st ? -(int)st : get_fattr(d, a);
	}
	rpcrdma_call_destroy(call);
	return rc;
}

static int nfs_lookup(struct rpcrdma_client *c, const struct fh *dir, const char *name,
		      struct fh *out)
{
	struct rpcrdma_call *call = new_call(c, NFS3_LOOKUP);
	uint32_t st;
	int rc;

	if (!call)
		return -ENOMEM;
	put_fh(rpcrdma_call_args(call), dir);
	rpcrdma_xdr_put_string(rpcrdma_call_args(call), name);
	rpcrdma_call_set_reply_hint(call, 512);
	rc = run(call, "LOOKUP");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0)
			rc = st ? -(int)st : get_fh(d, out);
	}
	rpcrdma_call_destroy(call);
	return rc;
}

struct fsinfo {
	uint32_t rtmax, wtmax, dtpref;
};

static int nfs_fsinfo(struct rpcrdma_client *c, const struct fh *root, struct fsinfo *fi)
{
	struct rpcrdma_call *call = new_call(c, NFS3_FSINFO);
	uint32_t st, v;
	int rc;

	if (!call)
		return -ENOMEM;
	put_fh(rpcrdma_call_args(call), root);
	rc = run(call, "FSINFO");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0 && st)
			rc = -(int)st;
		if (rc == 0) {
			rc |= get_post_op_attr(d, NULL, NULL);
			rc |= rpcrdma_xdr_get_u32(d, &fi->rtmax);
			rc |= rpcrdma_xdr_get_u32(d, &v); /* rtpref */
			rc |= rpcrdma_xdr_get_u32(d, &v); /* rtmult */
			rc |= rpcrdma_xdr_get_u32(d, &fi->wtmax);
			rc |= rpcrdma_xdr_get_u32(d, &v); /* wtpref */
			rc |= rpcrdma_xdr_get_u32(d, &v); /* wtmult */
			rc |= rpcrdma_xdr_get_u32(d, &fi->dtpref);
			rc = rc ? -EBADMSG : 0;
		}
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* READ @count bytes at @off into @buf (a result sink: a Write chunk over
 * RDMA). Returns the byte count read, or a negative errno. */
static long nfs_read(struct rpcrdma_client *c, const struct fh *fh, uint64_t off, uint32_t count,
		     void *buf, bool *eof)
{
	struct rpcrdma_call *call = new_call(c, NFS3_READ);
	struct rpcrdma_ddp_sink sink = {.buf = buf, .max = count};
	struct rpcrdma_xdr_enc *e;
	uint32_t st, n;
	long rc;

	if (!call)
		return -ENOMEM;
	e = rpcrdma_call_args(call);
	put_fh(e, fh);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, count);
	rpcrdma_call_set_sinks(call, &sink, 1);
	rpcrdma_call_set_reply_hint(call, 256);
	rc = run(call, "READ");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);
		const void *p;
		uint32_t len;

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0 && st)
			rc = -(long)st;
		if (rc == 0) {
			rc = get_post_op_attr(d, NULL, NULL);
			rc = rc ? rc : rpcrdma_xdr_get_u32(d, &n);
			rc = rc ? rc : rpcrdma_xdr_get_bool(d, eof);
			rc = rc ? rc : rpcrdma_xdr_get_ddp(d, &p, &len);
			if (rc == 0 && (len != n || len > count))
				rc = -EBADMSG;
			if (rc == 0 && p != buf)
				memcpy(buf, p, len);
			if (rc == 0)
				rc = len;
		}
	}
	rpcrdma_call_destroy(call);
	return rc;
}

static int nfs_create(struct rpcrdma_client *c, const struct fh *dir, const char *name,
		      struct fh *out)
{
	struct rpcrdma_call *call = new_call(c, NFS3_CREATE);
	struct rpcrdma_xdr_enc *e;
	uint32_t st;
	bool follows;
	int rc;

	if (!call)
		return -ENOMEM;
	e = rpcrdma_call_args(call);
	put_fh(e, dir);
	rpcrdma_xdr_put_string(e, name);
	rpcrdma_xdr_put_u32(e, 0);          /* UNCHECKED */
	rpcrdma_xdr_put_bool(e, true);      /* set mode */
	rpcrdma_xdr_put_u32(e, 0644);
	rpcrdma_xdr_put_bool(e, false);     /* uid */
	rpcrdma_xdr_put_bool(e, false);     /* gid */
	rpcrdma_xdr_put_bool(e, true);      /* size = 0 */
	rpcrdma_xdr_put_u64(e, 0);
	rpcrdma_xdr_put_u32(e, 0);          /* atime DONT_CHANGE */
	rpcrdma_xdr_put_u32(e, 0);          /* mtime DONT_CHANGE */
	rc = run(call, "CREATE");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0 && st)
			rc = -(int)st;
		if (rc == 0)
			rc = rpcrdma_xdr_get_bool(d, &follows);
		if (rc == 0)
			rc = follows ? get_fh(d, out) : -ENOENT;
	}
	rpcrdma_call_destroy(call);
	if (rc == -ENOENT) /* no handle in the reply: look it up */
		rc = nfs_lookup(c, dir, name, out);
	return rc;
}

/* WRITE FILE_SYNC: the data is DDP-eligible (a Read chunk over RDMA). */
static long nfs_write(struct rpcrdma_client *c, const struct fh *fh, uint64_t off,
		      const void *buf, uint32_t count)
{
	struct rpcrdma_call *call = new_call(c, NFS3_WRITE);
	struct rpcrdma_xdr_enc *e;
	uint32_t st, n = 0, committed = 0;
	long rc;

	if (!call)
		return -ENOMEM;
	e = rpcrdma_call_args(call);
	put_fh(e, fh);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, count);
	rpcrdma_xdr_put_u32(e, 2);          /* FILE_SYNC */
	rpcrdma_xdr_put_ddp(e, buf, count);
	rpcrdma_call_set_reply_hint(call, 512);
	rc = run(call, "WRITE");
	if (rc == 0) {
		struct rpcrdma_xdr_dec *d = rpcrdma_call_results(call);

		rc = rpcrdma_xdr_get_u32(d, &st);
		if (rc == 0 && st)
			rc = -(long)st;
		if (rc == 0) {
			rc = skip_wcc_data(d);
			rc = rc ? rc : rpcrdma_xdr_get_u32(d, &n);
			rc = rc ? rc : rpcrdma_xdr_get_u32(d, &committed);
			rc = rc ? rc : skip(d, 2); /* writeverf3 */
			if (rc == 0 && committed != 2)
				fprintf(stderr, "WRITE: committed %u, asked FILE_SYNC\n", committed);
			if (rc == 0)
				rc = n;
		}
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* READDIR the whole directory: names into @names (newline separated,
 * without "." and ".."). Returns the number of READDIR calls or -errno. */
struct namelist {
	char **v;
	size_t n, cap;
};

static int add_name(struct namelist *l, const char *s)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n] = strdup(s);
	return l->v[l->n++] ? 0 : -ENOMEM;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(struct namelist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int nfs_readdir(struct rpcrdma_client *c, const struct fh *dir, uint32_t count,
		       struct namelist *names, size_t *max_reply)
{
	uint64_t cookie = 0;
	uint8_t verf[8] = {0};
	bool eof = false;
	int calls = 0;

	while (!eof) {
		struct rpcrdma_call *call = new_call(c, NFS3_READDIR);
		struct rpcrdma_xdr_enc *e;
		struct rpcrdma_xdr_dec *d;
		uint32_t st;
		bool more;
		int rc;

		if (!call)
			return -ENOMEM;
		e = rpcrdma_call_args(call);
		put_fh(e, dir);
		rpcrdma_xdr_put_u64(e, cookie);
		rpcrdma_xdr_put_fixed(e, verf, 8);
		rpcrdma_xdr_put_u32(e, count);
		rpcrdma_call_set_reply_hint(call, count + 256);
		rc = run(call, "READDIR");
		calls++;
		if (rc == 0) {
			d = rpcrdma_call_results(call);
			if (rpcrdma_xdr_dec_remaining(d) > *max_reply)
				*max_reply = rpcrdma_xdr_dec_remaining(d);
			rc = rpcrdma_xdr_get_u32(d, &st);
			if (rc == 0 && st)
				rc = -(int)st;
			rc = rc ? rc : get_post_op_attr(d, NULL, NULL);
			rc = rc ? rc : rpcrdma_xdr_get_fixed(d, verf, 8);
			rc = rc ? rc : rpcrdma_xdr_get_bool(d, &more);
			while (rc == 0 && more) {
				uint64_t fileid;
				char name[256];

				rc = rpcrdma_xdr_get_u64(d, &fileid);
				rc = rc ? rc : rpcrdma_xdr_get_string(d, name, sizeof(name));
				rc = rc ? rc : rpcrdma_xdr_get_u64(d, &cookie);
				rc = rc ? rc : rpcrdma_xdr_get_bool(d, &more);
				if (rc == 0 && strcmp(name, ".") && strcmp(name, ".."))
					rc = add_name(names, name);
			}
			rc = rc ? rc : rpcrdma_xdr_get_bool(d, &eof);
		}
		rpcrdma_call_destroy(call);
		if (rc)
			return rc;
		if (calls > 10000)
			return -ELOOP;
	}
	return calls;
}

static int local_names(const char *path, struct namelist *l)
{
	DIR *dir = opendir(path);
	struct dirent *de;
	int rc = 0;

	if (!dir)
		return -errno;
	while (rc == 0 && (de = readdir(dir)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			rc = add_name(l, de->d_name);
	closedir(dir);
	return rc;
}

static uint8_t *read_local(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rr_lab_nfs3 -s SERVER_ADDR -u NFS_URL -e EXPORT -l LOCAL_DIR\n"
		"       [-m MOUNT_PORT] [-f FILE] [-d DIR] [-w NAME] [-W BYTES] [-c READDIR_COUNT]\n"
		"  rpcbind at tcp://SERVER:111 gives mountd's port (-m: that port, no rpcbind);\n"
		"  MNT EXPORT gives the root handle; NFS goes to NFS_URL. LOCAL_DIR is EXPORT\n"
		"  as seen locally (checks).\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *server = NULL, *nfs_url = NULL, *export = NULL, *local = NULL;
	const char *fname = "big.bin", *dname = "dir", *wname = "written.bin";
	size_t wbytes = 2u << 20;
	uint32_t rdcount = 32768;
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_client_opts opts = {.timeout_ms = 60000, .connect_timeout_ms = 20000};
	struct rpcrdma_auth_sys sys;
	struct fsinfo fi = {0};
	struct fh root, fh, wfh;
	struct fattr a;
	char url[300], path[1024];
	uint32_t port = 0;
	int opt, rc;

	while ((opt = getopt(argc, argv, "s:u:e:l:m:f:d:w:W:c:")) != -1) {
		switch (opt) {
		case 'm': port = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': server = optarg; break;
		case 'u': nfs_url = optarg; break;
		case 'e': export = optarg; break;
		case 'l': local = optarg; break;
		case 'f': fname = optarg; break;
		case 'd': dname = optarg; break;
		case 'w': wname = optarg; break;
		case 'W': wbytes = strtoul(optarg, NULL, 0); break;
		case 'c': rdcount = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!server || !nfs_url || !export || !local)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* MOUNT over TCP: rpcbind, then MNT. */
	if (!port) {
		snprintf(url, sizeof(url), "tcp://%s:111", server);
		rc = pmap_getport(url, MOUNT_PROG, 3, &port);
		result(rc == 0 && port > 0, "rpcbind GETPORT mountd", "rc %d port %u", rc, port);
		if (rc || !port)
			return 1;
	}
	snprintf(url, sizeof(url), "tcp://%s:%u", server, port);
	rc = mount_root(url, export, &root);
	result(rc == 0 && root.len > 0, "MOUNT3 MNT root handle", "rc %d, %u-byte handle", rc,
	       root.len);
	if (rc)
		return 1;

	/* NFS over the URL under test. */
	rc = rpcrdma_client_create(nfs_url, NFS_PROG, 3, &opts, &c);
	if (rc == -EPROTONOSUPPORT) {
		printf("not yet available: %s transport not built into librpcrdma\n", nfs_url);
		return 77;
	}
	result(rc == 0, "connect", "%s: %s", nfs_url, rc ? strerror(-rc) : "connected");
	if (rc)
		return 1;
	rpcrdma_auth_sys_self(&sys);
	sys.uid = 0;
	sys.gid = 0;
	rpcrdma_client_set_auth_sys(c, &sys);

	{
		struct rpcrdma_call *call = new_call(c, NFS3_NULL);

		rc = call ? run(call, "NULL") : -ENOMEM;
		result(rc == 0 && rpcrdma_xdr_dec_remaining(rpcrdma_call_results(call)) == 0,
		       "NULL", "rc %d", rc);
		if (call)
			rpcrdma_call_destroy(call);
	}
	rc = nfs_fsinfo(c, &root, &fi);
	result(rc == 0 && fi.rtmax >= 4096 && fi.wtmax >= 4096, "FSINFO", "rc %d rtmax %u wtmax %u",
	       rc, fi.rtmax, fi.wtmax);
	if (rc)
		goto out;
	{
		struct stat sb;

		rc = nfs_getattr(c, &root, &a);
		stat(local, &sb);
		result(rc == 0 && a.type == 2 && a.fileid == (uint64_t)sb.st_ino, "GETATTR root",
		       "rc %d type %u fileid %llu (local ino %llu)", rc, a.type,
		       (unsigned long long)a.fileid, (unsigned long long)sb.st_ino);
	}

	/* LOOKUP + GETATTR + READ of the big file (Write chunks). */
	rc = nfs_lookup(c, &root, fname, &fh);
	result(rc == 0, "LOOKUP file", "%s: rc %d", fname, rc);
	rc = nfs_lookup(c, &root, "no-such-file-here", &wfh);
	result(rc == -2 /* NFS3ERR_NOENT */, "LOOKUP missing name -> NFS3ERR_NOENT", "rc %d", rc);
	snprintf(path, sizeof(path), "%s/%s", local, fname);
	{
		size_t llen = 0, got = 0;
		uint8_t *lbuf = read_local(path, &llen);
		uint32_t piece = fi.rtmax < (256u << 10) ? fi.rtmax : (256u << 10);
		uint8_t *rbuf = malloc(llen + piece);
		bool eof = false;
		int reads = 0;
		struct stat sb;

		stat(path, &sb);
		rc = nfs_getattr(c, &fh, &a);
		result(rc == 0 && a.size == llen && a.fileid == (uint64_t)sb.st_ino && a.type == 1,
		       "GETATTR file", "size %llu (local %zu)", (unsigned long long)a.size, llen);
		rc = 0;
		while (lbuf && rbuf && !eof && rc >= 0 && got <= llen) {
			long n = nfs_read(c, &fh, got, piece, rbuf + got, &eof);

			if (n < 0) {
				rc = (int)n;
				break;
			}
			got += (size_t)n;
			reads++;
			if (n == 0 && !eof) {
				rc = -EIO;
				break;
			}
		}
		result(lbuf && rbuf && rc == 0 && eof && got == llen && memcmp(lbuf, rbuf, llen) == 0,
		       "READ whole file byte-exact", "%zu of %zu bytes in %d READs of %u, rc %d",
		       got, llen, reads, piece, rc);
		free(lbuf);
		free(rbuf);
	}

	/* CREATE + WRITE (Read chunks), check locally and read back. */
	rc = nfs_create(c, &root, wname, &wfh);
	result(rc == 0, "CREATE", "%s: rc %d", wname, rc);
	if (rc == 0) {
		uint8_t *wbuf = malloc(wbytes), *back = malloc(wbytes + 65536), *lbuf;
		uint32_t piece = fi.wtmax < (256u << 10) ? fi.wtmax : (256u << 10);
		uint32_t x = (uint32_t)getpid() * 2654435761u;
		size_t off = 0, llen = 0, got = 0;
		bool eof = false;
		int writes = 0;

		for (size_t i = 0; wbuf && i < wbytes; i++) {
			x ^= x << 13; x ^= x >> 17; x ^= x << 5;
			wbuf[i] = (uint8_t)x;
		}
		rc = 0;
		while (wbuf && off < wbytes) {
			uint32_t n = wbytes - off < piece ? (uint32_t)(wbytes - off) : piece;
			long w = nfs_write(c, &wfh, off, wbuf + off, n);

			if (w <= 0) {
				rc = w ? (int)w : -EIO;
				break;
			}
			off += (size_t)w;
			writes++;
		}
		result(wbuf && rc == 0 && off == wbytes, "WRITE FILE_SYNC",
		       "%zu bytes in %d WRITEs of %u, rc %d", off, writes, piece, rc);
		snprintf(path, sizeof(path), "%s/%s", local, wname);
		lbuf = read_local(path, &llen);
		result(lbuf && wbuf && llen == wbytes && memcmp(lbuf, wbuf, wbytes) == 0,
		       "WRITE data byte-exact in the server's file", "local size %zu", llen);
		free(lbuf);
		rc = 0;
		while (back && !eof && got <= wbytes) {
			long n = nfs_read(c, &wfh, got, piece, back + got, &eof);

			if (n <= 0 && !eof) {
				rc = n ? (int)n : -EIO;
				break;
			}
			got += (size_t)(n > 0 ? n : 0);
		}
		result(wbuf && back && rc == 0 && got == wbytes && memcmp(back, wbuf, wbytes) == 0,
		       "READ back written file byte-exact", "%zu bytes, rc %d", got, rc);
		free(wbuf);
		free(back);
	}

	/* READDIR of a big directory (Reply chunk). */
	rc = nfs_lookup(c, &root, dname, &fh);
	result(rc == 0, "LOOKUP directory", "%s: rc %d", dname, rc);
	if (rc == 0) {
		struct namelist remote = {0}, mine = {0};
		size_t max_reply = 0;
		bool same;
		int calls = nfs_readdir(c, &fh, rdcount, &remote, &max_reply);

		snprintf(path, sizeof(path), "%s/%s", local, dname);
		local_names(path, &mine);
		qsort(remote.v, remote.n, sizeof(char *), cmp_str);
		qsort(mine.v, mine.n, sizeof(char *), cmp_str);
		same = calls > 0 && remote.n == mine.n && mine.n > 0;
		for (size_t i = 0; same && i < mine.n; i++)
			same = strcmp(remote.v[i], mine.v[i]) == 0;
		result(same, "READDIR names equal the local listing",
		       "%zu names (local %zu) in %d calls of count %u, largest reply %zu bytes",
		       remote.n, mine.n, calls, rdcount, max_reply);
		result(calls > 0 && max_reply > 4096, "READDIR reply larger than 4 KiB inline",
		       "largest reply %zu bytes", max_reply);
		free_names(&remote);
		free_names(&mine);
	}
out:
	rpcrdma_client_destroy(c);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
