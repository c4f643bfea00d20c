/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests of rpcrdma-nfsd (tools/nfsd): the NFSv3/MOUNT argument decoders on
 * hostile bytes, the handle MAC (SipHash-2-4 reference vector), and the
 * whole server in-process on tcp:// and rdma:// driven by a small NFSv3
 * client on the public API: every one of the 22 procedures, WRITE
 * stability and the COMMIT verifier, exclusive CREATE retransmission, the
 * confinement of names and handles (no way out through "..", symbolic links,
 * "/" in names, forged or tampered handles, MOUNT paths), handles that
 * survive a restart while the write verifier changes, AUTH_SYS identities
 * and root squash. The server needs root (open_by_handle_at,
 * setfsuid): the end-to-end tests fail when not run as root. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "nfsd.h"
#include "siphash.h"
#include "rpc/xbuf.h"

/* ---- decoders ---- */

static int dec(uint32_t proc, const uint8_t *b, size_t n, union nfs3_args *a)
{
	struct rpcrdma_xdr_dec d;

	rr_xbuf_dec_init(&d, b, n);
	return nfs3_decode_args(&d, proc, a);
}

/* a small XDR writer for hand-made argument bodies */
struct wb {
	uint8_t b[2048];
	size_t n;
};

static void wu32(struct wb *w, uint32_t v)
{
	rr_put_be32(w->b + w->n, v);
	w->n += 4;
}

static void wopaque(struct wb *w, const void *p, uint32_t len)
{
	wu32(w, len);
	memcpy(w->b + w->n, p, len);
	w->n += len;
	while (w->n & 3)
		w->b[w->n++] = 0;
}

TEST(nfsd_decode_hostile_arguments)
{
	union nfs3_args a;
	struct wb w = {0};
	uint8_t fh[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	/* WRITE: fh, offset, count 5, FILE_SYNC, data<5> */
	wopaque(&w, fh, 8);
	wu32(&w, 0); wu32(&w, 100);
	wu32(&w, 5); wu32(&w, NFS3_FILE_SYNC);
	wopaque(&w, "hello", 5);
	REQUIRE_EQ(dec(NFS3_WRITE, w.b, w.n, &a), 0);
	CHECK_EQ(a.write.offset, 100);
	CHECK_EQ(a.write.count, 5);
	CHECK_EQ(a.write.data_len, 5);
	CHECK(memcmp(a.write.data, "hello", 5) == 0);
	/* every truncation is refused */
	for (size_t n = 0; n < w.n; n++)
		CHECK_EQ(dec(NFS3_WRITE, w.b, n, &a), -EBADMSG);
	/* a trailing word is refused */
	wu32(&w, 0);
	CHECK_EQ(dec(NFS3_WRITE, w.b, w.n, &a), -EBADMSG);
	/* count larger than the data; stable_how out of range */
	w.n = 0;
	wopaque(&w, fh, 8); wu32(&w, 0); wu32(&w, 0); wu32(&w, 6); wu32(&w, 0);
	wopaque(&w, "hello", 5);
	CHECK_EQ(dec(NFS3_WRITE, w.b, w.n, &a), -EBADMSG);
	w.n = 0;
	wopaque(&w, fh, 8); wu32(&w, 0); wu32(&w, 0); wu32(&w, 5); wu32(&w, 3);
	wopaque(&w, "hello", 5);
	CHECK_EQ(dec(NFS3_WRITE, w.b, w.n, &a), -EBADMSG);
	/* a handle longer than 64 bytes */
	w.n = 0;
	{
		uint8_t big[65] = {0};

		wopaque(&w, big, 65);
		CHECK_EQ(dec(NFS3_GETATTR, w.b, w.n, &a), -EBADMSG);
		w.n = 0;
		wopaque(&w, big, 64);
		CHECK_EQ(dec(NFS3_GETATTR, w.b, w.n, &a), 0);
	}
	/* SETATTR: a bool of 2; nseconds >= 10^9; time_how 3 */
	w.n = 0;
	wopaque(&w, fh, 8); wu32(&w, 2);
	CHECK_EQ(dec(NFS3_SETATTR, w.b, w.n, &a), -EBADMSG);
	w.n = 0;
	wopaque(&w, fh, 8);
	wu32(&w, 0); wu32(&w, 0); wu32(&w, 0); wu32(&w, 0);   /* mode uid gid size */
	wu32(&w, 2); wu32(&w, 1); wu32(&w, 1000000000u);     /* atime client time */
	wu32(&w, 0); wu32(&w, 0);                             /* mtime, no guard */
	CHECK_EQ(dec(NFS3_SETATTR, w.b, w.n, &a), -EBADMSG);
	w.n = 0;
	wopaque(&w, fh, 8);
	wu32(&w, 0); wu32(&w, 0); wu32(&w, 0); wu32(&w, 0); wu32(&w, 3); wu32(&w, 0); wu32(&w, 0);
	CHECK_EQ(dec(NFS3_SETATTR, w.b, w.n, &a), -EBADMSG);
	/* CREATE with createmode 3; MKNOD with ftype 9 */
	w.n = 0;
	wopaque(&w, fh, 8); wopaque(&w, "x", 1); wu32(&w, 3);
	CHECK_EQ(dec(NFS3_CREATE, w.b, w.n, &a), -EBADMSG);
	w.n = 0;
	wopaque(&w, fh, 8); wopaque(&w, "x", 1); wu32(&w, 9);
	CHECK_EQ(dec(NFS3_MKNOD, w.b, w.n, &a), -EBADMSG);
	/* a 1025-byte name is GARBAGE; 256 bytes decodes (NAMETOOLONG later) */
	{
		static char name[1025];

		memset(name, 'n', sizeof(name));
		w.n = 0;
		wopaque(&w, fh, 8); wopaque(&w, name, 1025);
		CHECK_EQ(dec(NFS3_LOOKUP, w.b, w.n, &a), -EBADMSG);
		w.n = 0;
		wopaque(&w, fh, 8); wopaque(&w, name, 256);
		REQUIRE_EQ(dec(NFS3_LOOKUP, w.b, w.n, &a), 0);
		CHECK_EQ(a.dirop.name.len, 256);
	}
	/* unknown procedure */
	CHECK_EQ(dec(22, w.b, w.n, &a), -EINVAL);
	/* MOUNT dirpath: more than 1024 bytes, trailing bytes */
	{
		static char p[1030];
		struct nfs3_str s;
		struct rpcrdma_xdr_dec d;

		memset(p, '/', sizeof(p));
		w.n = 0;
		wopaque(&w, p, 1025);
		rr_xbuf_dec_init(&d, w.b, w.n);
		CHECK_EQ(mnt3_decode_dirpath(&d, &s), -EBADMSG);
		w.n = 0;
		wopaque(&w, "/x", 2);
		wu32(&w, 1);
		rr_xbuf_dec_init(&d, w.b, w.n);
		CHECK_EQ(mnt3_decode_dirpath(&d, &s), -EBADMSG);
	}
}

/* SipHash-2-4 reference vector (the paper's appendix A): key 00..0f,
 * message 00..0e */
TEST(nfsd_siphash_reference_vector)
{
	uint8_t key[16], msg[15];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	CHECK(nfsd_siphash24(key, msg, 15) == 0xa129ca6149be45e5ull);
	CHECK(nfsd_siphash24(key, msg, 0) == 0x726fdb47dd0e0e31ull);
}

/* ---- the server in-process ---- */

struct fx {
	char dir[64], exp[96];
	struct nfsd s;
	struct rpcrdma_client *nfs;
	uint8_t key[NFSD_KEY_SIZE], verf[NFS3_VERF_SIZE];
	uint8_t root[NFS3_FHSIZE];
	uint32_t root_len;
	bool squash;
	bool identity;     /* procedures on identity threads (as on verbs://) */
};

static void fx_server(struct fx *f, const char *scheme)
{
	struct nfsd_opts o = {0};
	char url[64];

	snprintf(url, sizeof(url), "%s://127.0.0.1:0", scheme);
	o.export_dir = f->exp;
	o.url = url;
	o.mount_url = "tcp://127.0.0.1:0";
	o.root_squash = f->squash;
	o.identity_threads = f->identity;
	o.anon_uid = o.anon_gid = NFSD_ANON_ID;
	o.threads = 2;
	o.drc_entries = 64;
	o.key = f->key;
	o.write_verf = f->verf;
	REQUIRE_EQ(nfsd_create(&f->s, &o), 0);
	REQUIRE_EQ(nfsd_start(&f->s), 0);
	snprintf(url, sizeof(url), "%s://127.0.0.1:%d", scheme, nfsd_nfs_port(&f->s));
	REQUIRE_EQ(rpcrdma_client_create(url, NFS_PROG, NFS_V3, NULL, &f->nfs), 0);
}

static void fx_set_user(struct fx *f, uint32_t uid, uint32_t gid)
{
	struct rpcrdma_auth_sys sys = {.uid = uid, .gid = gid};

	snprintf(sys.machinename, sizeof(sys.machinename), "test-client");
	REQUIRE_EQ(rpcrdma_client_set_auth_sys(f->nfs, &sys), 0);
}

static bool start_with_identity_threads;

static void fx_start(struct fx *f, const char *scheme, bool squash)
{
	memset(f, 0, sizeof(*f));
	f->identity = start_with_identity_threads;
	REQUIRE_EQ(geteuid(), 0);   /* rpcrdma-nfsd needs root */
	snprintf(f->dir, sizeof(f->dir), "/tmp/rr-nfsd-XXXXXX");
	REQUIRE(mkdtemp(f->dir) != NULL);
	snprintf(f->exp, sizeof(f->exp), "%s/export", f->dir);
	REQUIRE_EQ(mkdir(f->exp, 0755), 0);
	for (int i = 0; i < NFSD_KEY_SIZE; i++)
		f->key[i] = (uint8_t)(i * 37 + 1);
	REQUIRE_EQ(getrandom(f->verf, sizeof(f->verf), 0), (ssize_t)sizeof(f->verf));
	f->squash = squash;
	fx_server(f, scheme);
	fx_set_user(f, 0, 0);
	memcpy(f->root, f->s.exp.root_fh, f->s.exp.root_fh_len);
	f->root_len = f->s.exp.root_fh_len;
}

static void fx_stop_server(struct fx *f)
{
	rpcrdma_client_destroy(f->nfs);
	f->nfs = NULL;
	nfsd_destroy(&f->s);
}

static void fx_stop(struct fx *f)
{
	char cmd[128];

	fx_stop_server(f);
	if (strncmp(f->dir, "/tmp/rr-nfsd-", 13) == 0) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
		CHECK_EQ(system(cmd), 0);
	}
}

/* one call: arguments already encoded by the caller into @call */
struct res {
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t st;
	int rc;
};

static struct rpcrdma_xdr_enc *begin(struct fx *f, uint32_t proc, struct res *r)
{
	memset(r, 0, sizeof(*r));
	REQUIRE_EQ(rpcrdma_call_create(f->nfs, proc, &r->call), 0);
	return rpcrdma_call_args(r->call);
}

static uint32_t finish(struct res *r)
{
	r->rc = rpcrdma_call_run(r->call);
	REQUIRE_EQ(r->rc, 0);
	r->d = rpcrdma_call_results(r->call);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(r->d, &r->st), 0);
	return r->st;
}

static void done(struct res *r)
{
	rpcrdma_call_destroy(r->call);
}

struct fh {
	uint8_t b[NFS3_FHSIZE];
	uint32_t len;
};

static void put_fh(struct rpcrdma_xdr_enc *e, const struct fh *h)
{
	rpcrdma_xdr_put_opaque(e, h->b, h->len);
}

static void get_fh(struct rpcrdma_xdr_dec *d, struct fh *h)
{
	const void *p;

	REQUIRE_EQ(rpcrdma_xdr_get_opaque(d, NFS3_FHSIZE, &p, &h->len), 0);
	memcpy(h->b, p, h->len);
}

/* fattr3 -> type, mode, uid, size, fileid */
struct attr {
	uint32_t type, mode, nlink, uid, gid;
	uint64_t size, fileid;
	uint32_t mtime, atime, ctime_s, ctime_ns;
};

static void get_fattr(struct rpcrdma_xdr_dec *d, struct attr *a)
{
	uint32_t v;
	uint64_t w;

	rpcrdma_xdr_get_u32(d, &a->type);
	rpcrdma_xdr_get_u32(d, &a->mode);
	rpcrdma_xdr_get_u32(d, &a->nlink);
	rpcrdma_xdr_get_u32(d, &a->uid);
	rpcrdma_xdr_get_u32(d, &a->gid);
	rpcrdma_xdr_get_u64(d, &a->size);
	rpcrdma_xdr_get_u64(d, &w);
	rpcrdma_xdr_get_u32(d, &v);
	rpcrdma_xdr_get_u32(d, &v);
	rpcrdma_xdr_get_u64(d, &w);
	rpcrdma_xdr_get_u64(d, &a->fileid);
	rpcrdma_xdr_get_u32(d, &a->atime);
	rpcrdma_xdr_get_u32(d, &v);
	rpcrdma_xdr_get_u32(d, &a->mtime);
	rpcrdma_xdr_get_u32(d, &v);
	rpcrdma_xdr_get_u32(d, &a->ctime_s);
	REQUIRE_EQ(rpcrdma_xdr_get_u32(d, &a->ctime_ns), 0);
}

static bool get_post_op(struct rpcrdma_xdr_dec *d, struct attr *a)
{
	bool f = false;
	struct attr dummy;

	REQUIRE_EQ(rpcrdma_xdr_get_bool(d, &f), 0);
	if (f)
		get_fattr(d, a ? a : &dummy);
	return f;
}

/* wcc_data: returns whether both halves were present */
static bool get_wcc(struct rpcrdma_xdr_dec *d)
{
	bool pre = false;
	uint64_t v;

	REQUIRE_EQ(rpcrdma_xdr_get_bool(d, &pre), 0);
	if (pre) {
		rpcrdma_xdr_get_u64(d, &v);
		rpcrdma_xdr_get_u64(d, &v);
		REQUIRE_EQ(rpcrdma_xdr_get_u64(d, &v), 0);
	}
	return get_post_op(d, NULL) && pre;
}

static struct fh root_of(struct fx *f)
{
	struct fh h;

	memcpy(h.b, f->root, f->root_len);
	h.len = f->root_len;
	return h;
}

static uint32_t getattr(struct fx *f, const struct fh *h, struct attr *a)
{
	struct res r;
	uint32_t st;

	put_fh(begin(f, NFS3_GETATTR, &r), h);
	st = finish(&r);
	if (st == NFS3_OK && a)
		get_fattr(r.d, a);
	done(&r);
	return st;
}

static uint32_t lookup(struct fx *f, const struct fh *dir, const char *name, struct fh *out,
		       struct attr *a)
{
	struct res r;
	struct rpcrdma_xdr_enc *e = begin(f, NFS3_LOOKUP, &r);
	uint32_t st;

	put_fh(e, dir);
	rpcrdma_xdr_put_opaque(e, name, (uint32_t)strlen(name));
	st = finish(&r);
	if (st == NFS3_OK) {
		get_fh(r.d, out);
		CHECK(get_post_op(r.d, a));
		CHECK(get_post_op(r.d, NULL));
	} else {
		get_post_op(r.d, NULL);
	}
	CHECK_EQ(rpcrdma_xdr_dec_remaining(r.d), 0);
	done(&r);
	return st;
}

static void put_sattr_mode(struct rpcrdma_xdr_enc *e, int mode /* -1: none */)
{
	rpcrdma_xdr_put_bool(e, mode >= 0);
	if (mode >= 0)
		rpcrdma_xdr_put_u32(e, (uint32_t)mode);
	for (int i = 0; i < 3; i++)
		rpcrdma_xdr_put_u32(e, 0);   /* uid gid size */
	rpcrdma_xdr_put_u32(e, 0);       /* atime */
	rpcrdma_xdr_put_u32(e, 0);       /* mtime */
}

/* CREATE how 0/1 with a mode, or 2 with @verf */
static uint32_t create(struct fx *f, const struct fh *dir, const char *name, uint32_t how,
		       const uint8_t *verf, struct fh *out)
{
	struct res r;
	struct rpcrdma_xdr_enc *e = begin(f, NFS3_CREATE, &r);
	uint32_t st;
	bool have = false;

	put_fh(e, dir);
	rpcrdma_xdr_put_opaque(e, name, (uint32_t)strlen(name));
	rpcrdma_xdr_put_u32(e, how);
	if (how == NFS3_EXCLUSIVE)
		rpcrdma_xdr_put_fixed(e, verf, 8);
	else
		put_sattr_mode(e, 0644);
	st = finish(&r);
	if (st == NFS3_OK) {
		REQUIRE_EQ(rpcrdma_xdr_get_bool(r.d, &have), 0);
		CHECK(have);
		if (have && out)
			get_fh(r.d, out);
		else if (have)
			get_fh(r.d, &(struct fh){{0}, 0});
		CHECK(get_post_op(r.d, NULL));
	}
	CHECK(get_wcc(r.d));
	CHECK_EQ(rpcrdma_xdr_dec_remaining(r.d), 0);
	done(&r);
	return st;
}

/* WRITE: returns status; *committed and verf out */
static uint32_t write3(struct fx *f, const struct fh *h, uint64_t off, const void *data,
		       uint32_t n, uint32_t stable, uint32_t *committed, uint8_t *verf)
{
	struct res r;
	struct rpcrdma_xdr_enc *e = begin(f, NFS3_WRITE, &r);
	uint32_t st, count = 0;

	put_fh(e, h);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, n);
	rpcrdma_xdr_put_u32(e, stable);
	rpcrdma_xdr_put_ddp(e, data, n);
	st = finish(&r);
	CHECK(get_wcc(r.d));
	if (st == NFS3_OK) {
		rpcrdma_xdr_get_u32(r.d, &count);
		rpcrdma_xdr_get_u32(r.d, committed);
		REQUIRE_EQ(rpcrdma_xdr_get_fixed(r.d, verf, 8), 0);
		CHECK_EQ(count, n);
	}
	done(&r);
	return st;
}

static uint32_t read3(struct fx *f, const struct fh *h, uint64_t off, uint32_t n, void *buf,
		      uint32_t *got, bool *eof)
{
	struct res r;
	struct rpcrdma_xdr_enc *e = begin(f, NFS3_READ, &r);
	struct rpcrdma_ddp_sink sink = {.buf = buf, .max = n};
	const void *p;
	uint32_t st, count, len;

	put_fh(e, h);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, n);
	rpcrdma_call_set_sinks(r.call, &sink, 1);
	st = finish(&r);
	get_post_op(r.d, NULL);
	if (st == NFS3_OK) {
		rpcrdma_xdr_get_u32(r.d, &count);
		rpcrdma_xdr_get_bool(r.d, eof);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(r.d, &p, &len), 0);
		CHECK_EQ(count, len);
		*got = len;
	}
	done(&r);
	return st;
}

/* dirop procedure with just a name (REMOVE, RMDIR): status, wcc checked */
static uint32_t dirop(struct fx *f, uint32_t proc, const struct fh *dir, const char *name)
{
	struct res r;
	struct rpcrdma_xdr_enc *e = begin(f, proc, &r);
	uint32_t st;

	put_fh(e, dir);
	rpcrdma_xdr_put_opaque(e, name, (uint32_t)strlen(name));
	st = finish(&r);
	CHECK(get_wcc(r.d));
	CHECK_EQ(rpcrdma_xdr_dec_remaining(r.d), 0);
	done(&r);
	return st;
}

/* READDIR(PLUS) of @dir, all of it, with small counts: number of names
 * seen (., .. included) and whether @want was among them */
static int list_dir(struct fx *f, const struct fh *dir, bool plus, uint32_t count,
		    const char *want, bool *found, int *calls)
{
	uint64_t cookie = 0;
	int names = 0;
	bool eof = false;

	*found = false;
	*calls = 0;
	while (!eof && *calls < 1000) {
		struct res r;
		struct rpcrdma_xdr_enc *e = begin(f, plus ? NFS3_READDIRPLUS : NFS3_READDIR, &r);
		bool more;

		put_fh(e, dir);
		rpcrdma_xdr_put_u64(e, cookie);
		rpcrdma_xdr_put_u64(e, 0);
		if (plus)
			rpcrdma_xdr_put_u32(e, count / 2);
		rpcrdma_xdr_put_u32(e, count);
		REQUIRE_EQ(finish(&r), NFS3_OK);
		(*calls)++;
		get_post_op(r.d, NULL);
		{
			uint64_t verf;

			rpcrdma_xdr_get_u64(r.d, &verf);
		}
		for (;;) {
			uint64_t fileid;
			char name[256];

			REQUIRE_EQ(rpcrdma_xdr_get_bool(r.d, &more), 0);
			if (!more)
				break;
			rpcrdma_xdr_get_u64(r.d, &fileid);
			REQUIRE_EQ(rpcrdma_xdr_get_string(r.d, name, sizeof(name)), 0);
			REQUIRE_EQ(rpcrdma_xdr_get_u64(r.d, &cookie), 0);
			if (plus) {
				bool hf;

				get_post_op(r.d, NULL);
				REQUIRE_EQ(rpcrdma_xdr_get_bool(r.d, &hf), 0);
				if (hf)
					get_fh(r.d, &(struct fh){{0}, 0});
			}
			names++;
			if (want && strcmp(name, want) == 0)
				*found = true;
		}
		REQUIRE_EQ(rpcrdma_xdr_get_bool(r.d, &eof), 0);
		CHECK_EQ(rpcrdma_xdr_dec_remaining(r.d), 0);
		CHECK(rpcrdma_xdr_enc_len(rpcrdma_call_args(r.call)) > 0);
		done(&r);
	}
	return names;
}

static void all_procedures(const char *scheme)
{
	struct fx f;
	struct fh root, fh, fh2, dir, lnk;
	struct attr a, b;
	uint8_t verf[8], verf2[8], ev[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint32_t committed = 99, got = 0, st;
	static uint8_t data[300000], back[300000];
	bool eof = false, found;
	int calls, n;
	struct res r;
	struct rpcrdma_xdr_enc *e;

	fx_start(&f, scheme, false);
	root = root_of(&f);
	/* NULL */
	begin(&f, NFS3_NULL, &r);
	CHECK_EQ(rpcrdma_call_run(r.call), 0);
	done(&r);
	/* GETATTR of the root */
	REQUIRE_EQ(getattr(&f, &root, &a), NFS3_OK);
	CHECK_EQ(a.type, NF3DIR);
	/* CREATE unchecked, WRITE with each stability, READ back */
	REQUIRE_EQ(create(&f, &root, "file", NFS3_UNCHECKED, NULL, &fh), NFS3_OK);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + (i >> 9));
	CHECK_EQ(write3(&f, &fh, 0, data, 100000, NFS3_UNSTABLE, &committed, verf), NFS3_OK);
	CHECK_EQ(committed, NFS3_UNSTABLE);
	CHECK(memcmp(verf, f.verf, 8) == 0);
	CHECK_EQ(write3(&f, &fh, 100000, data + 100000, 100001, NFS3_DATA_SYNC, &committed, verf2),
		 NFS3_OK);
	CHECK_EQ(committed, NFS3_DATA_SYNC);
	CHECK_EQ(write3(&f, &fh, 200001, data + 200001, 99999, NFS3_FILE_SYNC, &committed, verf2),
		 NFS3_OK);
	CHECK_EQ(committed, NFS3_FILE_SYNC);
	CHECK(memcmp(verf, verf2, 8) == 0);
	REQUIRE_EQ(read3(&f, &fh, 0, sizeof(back), back, &got, &eof), NFS3_OK);
	CHECK_EQ(got, 300000);
	CHECK(eof);
	CHECK(memcmp(back, data, 300000) == 0);
	REQUIRE_EQ(read3(&f, &fh, 299999, 1001, back, &got, &eof), NFS3_OK);
	CHECK_EQ(got, 1);
	CHECK(eof);
	REQUIRE_EQ(read3(&f, &fh, 1, 1001, back, &got, &eof), NFS3_OK);
	CHECK_EQ(got, 1001);
	CHECK(!eof);
	CHECK(memcmp(back, data + 1, 1001) == 0);
	/* COMMIT returns the same verifier */
	e = begin(&f, NFS3_COMMIT, &r);
	put_fh(e, &fh);
	rpcrdma_xdr_put_u64(e, 0);
	rpcrdma_xdr_put_u32(e, 0);
	CHECK_EQ(finish(&r), NFS3_OK);
	CHECK(get_wcc(r.d));
	rpcrdma_xdr_get_fixed(r.d, verf2, 8);
	CHECK(memcmp(verf, verf2, 8) == 0);
	done(&r);
	/* CREATE guarded on an existing name; exclusive and its retransmission */
	CHECK_EQ(create(&f, &root, "file", NFS3_GUARDED, NULL, NULL), NFS3ERR_EXIST);
	CHECK_EQ(create(&f, &root, "excl", NFS3_EXCLUSIVE, ev, &fh2), NFS3_OK);
	CHECK_EQ(create(&f, &root, "excl", NFS3_EXCLUSIVE, ev, NULL), NFS3_OK);
	ev[7] ^= 1;
	CHECK_EQ(create(&f, &root, "excl", NFS3_EXCLUSIVE, ev, NULL), NFS3ERR_EXIST);
	CHECK_EQ(create(&f, &root, "file", NFS3_EXCLUSIVE, ev, NULL), NFS3ERR_EXIST);
	/* SETATTR: mode and size; a guard that does not match is NOT_SYNC */
	REQUIRE_EQ(getattr(&f, &fh, &a), NFS3_OK);
	e = begin(&f, NFS3_SETATTR, &r);
	put_fh(e, &fh);
	rpcrdma_xdr_put_bool(e, true); rpcrdma_xdr_put_u32(e, 0600);
	rpcrdma_xdr_put_u32(e, 0); rpcrdma_xdr_put_u32(e, 0);
	rpcrdma_xdr_put_bool(e, true); rpcrdma_xdr_put_u64(e, 12345);
	rpcrdma_xdr_put_u32(e, 0); rpcrdma_xdr_put_u32(e, 0);
	rpcrdma_xdr_put_bool(e, true);
	rpcrdma_xdr_put_u32(e, a.ctime_s); rpcrdma_xdr_put_u32(e, a.ctime_ns);
	CHECK_EQ(finish(&r), NFS3_OK);
	CHECK(get_wcc(r.d));
	done(&r);
	REQUIRE_EQ(getattr(&f, &fh, &b), NFS3_OK);
	CHECK_EQ(b.mode, 0600);
	CHECK_EQ(b.size, 12345);
	e = begin(&f, NFS3_SETATTR, &r);
	put_fh(e, &fh);
	put_sattr_mode(e, 0644);
	rpcrdma_xdr_put_bool(e, true);
	rpcrdma_xdr_put_u32(e, a.ctime_s - 1); rpcrdma_xdr_put_u32(e, 0);
	CHECK_EQ(finish(&r), NFS3ERR_NOT_SYNC);
	done(&r);
	/* ACCESS */
	e = begin(&f, NFS3_ACCESS, &r);
	put_fh(e, &fh);
	rpcrdma_xdr_put_u32(e, 0x3f);
	CHECK_EQ(finish(&r), NFS3_OK);
	get_post_op(r.d, NULL);
	rpcrdma_xdr_get_u32(r.d, &st);
	CHECK_EQ(st & (NFS3_ACCESS_READ | NFS3_ACCESS_MODIFY), NFS3_ACCESS_READ | NFS3_ACCESS_MODIFY);
	CHECK_EQ(st & NFS3_ACCESS_EXECUTE, 0);
	done(&r);
	/* MKDIR, SYMLINK + READLINK, MKNOD */
	e = begin(&f, NFS3_MKDIR, &r);
	put_fh(e, &root);
	rpcrdma_xdr_put_string(e, "dir");
	put_sattr_mode(e, 0755);
	CHECK_EQ(finish(&r), NFS3_OK);
	done(&r);
	REQUIRE_EQ(lookup(&f, &root, "dir", &dir, &a), NFS3_OK);
	CHECK_EQ(a.type, NF3DIR);
	e = begin(&f, NFS3_SYMLINK, &r);
	put_fh(e, &dir);
	rpcrdma_xdr_put_string(e, "sym");
	put_sattr_mode(e, -1);
	rpcrdma_xdr_put_ddp(e, "../file", 7);
	CHECK_EQ(finish(&r), NFS3_OK);
	done(&r);
	REQUIRE_EQ(lookup(&f, &dir, "sym", &lnk, &a), NFS3_OK);
	CHECK_EQ(a.type, NF3LNK);
	e = begin(&f, NFS3_READLINK, &r);
	put_fh(e, &lnk);
	CHECK_EQ(finish(&r), NFS3_OK);
	{
		const void *p;
		uint32_t len = 0;

		get_post_op(r.d, NULL);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(r.d, &p, &len), 0);
		CHECK(len == 7 && memcmp(p, "../file", 7) == 0);
	}
	done(&r);
	e = begin(&f, NFS3_READLINK, &r);
	put_fh(e, &fh);
	CHECK_EQ(finish(&r), NFS3ERR_INVAL);
	done(&r);
	e = begin(&f, NFS3_MKNOD, &r);
	put_fh(e, &dir);
	rpcrdma_xdr_put_string(e, "fifo");
	rpcrdma_xdr_put_u32(e, NF3FIFO);
	put_sattr_mode(e, 0600);
	CHECK_EQ(finish(&r), NFS3_OK);
	done(&r);
	e = begin(&f, NFS3_MKNOD, &r);
	put_fh(e, &dir);
	rpcrdma_xdr_put_string(e, "reg");
	rpcrdma_xdr_put_u32(e, NF3REG);
	CHECK_EQ(finish(&r), NFS3ERR_BADTYPE);
	done(&r);
	/* LINK, RENAME, REMOVE, RMDIR */
	e = begin(&f, NFS3_LINK, &r);
	put_fh(e, &fh);
	put_fh(e, &dir);
	rpcrdma_xdr_put_string(e, "hard");
	CHECK_EQ(finish(&r), NFS3_OK);
	CHECK(get_post_op(r.d, &a));
	CHECK_EQ(a.nlink, 2);
	CHECK(get_wcc(r.d));
	done(&r);
	e = begin(&f, NFS3_RENAME, &r);
	put_fh(e, &dir);
	rpcrdma_xdr_put_string(e, "hard");
	put_fh(e, &root);
	rpcrdma_xdr_put_string(e, "moved");
	CHECK_EQ(finish(&r), NFS3_OK);
	CHECK(get_wcc(r.d));
	CHECK(get_wcc(r.d));
	done(&r);
	CHECK_EQ(lookup(&f, &root, "moved", &fh2, &a), NFS3_OK);
	CHECK_EQ(lookup(&f, &dir, "hard", &fh2, NULL), NFS3ERR_NOENT);
	CHECK_EQ(dirop(&f, NFS3_RMDIR, &root, "dir"), NFS3ERR_NOTEMPTY);
	CHECK_EQ(dirop(&f, NFS3_REMOVE, &root, "moved"), NFS3_OK);
	CHECK_EQ(dirop(&f, NFS3_REMOVE, &root, "moved"), NFS3ERR_NOENT);
	CHECK_EQ(dirop(&f, NFS3_REMOVE, &dir, "sym"), NFS3_OK);
	CHECK_EQ(dirop(&f, NFS3_REMOVE, &dir, "fifo"), NFS3_OK);
	CHECK_EQ(dirop(&f, NFS3_RMDIR, &root, "dir"), NFS3_OK);
	CHECK_EQ(getattr(&f, &dir, NULL), NFS3ERR_STALE);
	/* READDIR / READDIRPLUS over a directory of 300 names, small counts */
	REQUIRE_EQ(mkdir("/tmp", 0777) == 0 || errno == EEXIST, 1);
	{
		char p[200];

		for (int i = 0; i < 300; i++) {
			snprintf(p, sizeof(p), "%s/entry-%03d", f.exp, i);
			close(open(p, O_CREAT | O_WRONLY, 0644));
		}
	}
	n = list_dir(&f, &root, false, 1024, "entry-299", &found, &calls);
	CHECK_EQ(n, 300 + 4);   /* . .. file excl */
	CHECK(found);
	CHECK(calls > 5);
	n = list_dir(&f, &root, true, 2048, "entry-000", &found, &calls);
	CHECK_EQ(n, 300 + 4);
	CHECK(found);
	CHECK(calls > 5);
	n = list_dir(&f, &root, true, 65536, NULL, &found, &calls);
	CHECK_EQ(n, 304);

	/* a count too small for one entry */
	e = begin(&f, NFS3_READDIR, &r);
	put_fh(e, &root);
	rpcrdma_xdr_put_u64(e, 0); rpcrdma_xdr_put_u64(e, 0); rpcrdma_xdr_put_u32(e, 100);
	CHECK_EQ(finish(&r), NFS3ERR_TOOSMALL);
	done(&r);
	/* FSSTAT FSINFO PATHCONF */
	e = begin(&f, NFS3_FSSTAT, &r);
	put_fh(e, &root);
	CHECK_EQ(finish(&r), NFS3_OK);
	done(&r);
	e = begin(&f, NFS3_FSINFO, &r);
	put_fh(e, &root);
	CHECK_EQ(finish(&r), NFS3_OK);
	get_post_op(r.d, NULL);
	rpcrdma_xdr_get_u32(r.d, &st);
	CHECK_EQ(st, NFSD_MAX_IO);
	done(&r);
	e = begin(&f, NFS3_PATHCONF, &r);
	put_fh(e, &root);
	CHECK_EQ(finish(&r), NFS3_OK);
	get_post_op(r.d, NULL);
	rpcrdma_xdr_get_u32(r.d, &st);
	rpcrdma_xdr_get_u32(r.d, &st);
	CHECK_EQ(st, 255);
	done(&r);
	/* every procedure was counted */
	for (uint32_t p = 0; p < NFS3_NPROC; p++)
		CHECK(atomic_load(&f.s.nfs_calls[p]) > 0);
	fx_stop(&f);
}

TEST(nfsd_tcp_all_procedures)
{
	all_procedures("tcp");
}

TEST(nfsd_rdma_all_procedures)
{
	all_procedures("rdma");
}

/* the procedures on identity threads, as rpcrdma-nfsd runs them on
 * verbs:// (tools/nfsd/nfsd.h): same answers, and the library's handler
 * threads keep their credentials */
TEST(nfsd_identity_threads_all_procedures)
{
	start_with_identity_threads = true;
	all_procedures("rdma");
	start_with_identity_threads = false;
}

/* no way out of the export: "..", symlinks, names with "/", forged,
 * tampered and foreign handles, MOUNT paths */
TEST(nfsd_confinement)
{
	struct fx f;
	struct fh root, h, lnk, forged;
	struct attr a, ra;
	char p[256];
	struct res r;
	struct rpcrdma_xdr_enc *e;

	fx_start(&f, "tcp", false);
	root = root_of(&f);
	REQUIRE_EQ(getattr(&f, &root, &ra), NFS3_OK);
	/* ".." of the export is the export */
	REQUIRE_EQ(lookup(&f, &root, "..", &h, &a), NFS3_OK);
	CHECK_EQ(a.fileid, ra.fileid);
	CHECK(h.len == root.len && memcmp(h.b, root.b, h.len) == 0);
	REQUIRE_EQ(lookup(&f, &h, "..", &h, &a), NFS3_OK);
	CHECK_EQ(a.fileid, ra.fileid);
	/* a secret beside the export */
	snprintf(p, sizeof(p), "%s/secret", f.dir);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	/* names with "/" are not paths */
	CHECK_EQ(lookup(&f, &root, "../secret", &h, NULL), NFS3ERR_ACCES);
	CHECK_EQ(lookup(&f, &root, "/etc", &h, NULL), NFS3ERR_ACCES);
	CHECK_EQ(lookup(&f, &root, "", &h, NULL), NFS3ERR_ACCES);
	CHECK_EQ(create(&f, &root, "../escape", NFS3_UNCHECKED, NULL, NULL), NFS3ERR_ACCES);
	snprintf(p, sizeof(p), "%s/escape", f.dir);
	CHECK(access(p, F_OK) != 0);
	/* a symlink leading out is only a symlink: never followed */
	snprintf(p, sizeof(p), "%s/out", f.exp);
	REQUIRE_EQ(symlink(f.dir, p), 0);
	snprintf(p, sizeof(p), "%s/etc", f.exp);
	REQUIRE_EQ(symlink("/etc", p), 0);
	REQUIRE_EQ(lookup(&f, &root, "out", &lnk, &a), NFS3_OK);
	CHECK_EQ(a.type, NF3LNK);
	CHECK_EQ(lookup(&f, &lnk, "secret", &h, NULL), NFS3ERR_NOTDIR);
	CHECK_EQ(create(&f, &lnk, "x", NFS3_UNCHECKED, NULL, NULL), NFS3ERR_NOTDIR);
	REQUIRE_EQ(lookup(&f, &root, "etc", &lnk, &a), NFS3_OK);
	CHECK_EQ(lookup(&f, &lnk, "passwd", &h, NULL), NFS3ERR_NOTDIR);
	{
		uint32_t got = 0;
		bool eof;
		uint8_t buf[64];

		CHECK_EQ(read3(&f, &lnk, 0, sizeof(buf), buf, &got, &eof), NFS3ERR_INVAL);
	}
	/* tampered: every byte of the handle flipped in turn */
	for (uint32_t i = 0; i < root.len; i++) {
		h = root;
		h.b[i] ^= 0x40;
		CHECK(getattr(&f, &h, NULL) != NFS3_OK);
	}
	h = root;
	h.len = 7;
	CHECK_EQ(getattr(&f, &h, NULL), NFS3ERR_BADHANDLE);
	h.len = 0;
	CHECK_EQ(getattr(&f, &h, NULL), NFS3ERR_BADHANDLE);
	/* forged: the kernel handle of the secret (same file system), in our
	 * layout but not signed with the server's key */
	{
		struct nfsd_export other;
		uint8_t key2[NFSD_KEY_SIZE];

		memcpy(key2, f.key, sizeof(key2));
		key2[0] ^= 1;
		REQUIRE_EQ(nfsd_export_open(&other, f.exp, key2), 0);
		snprintf(p, sizeof(p), "%s/secret", f.dir);
		{
			int sfd = open(p, O_PATH | O_CLOEXEC);

			REQUIRE(sfd >= 0);
			REQUIRE_EQ(nfsd_fh_make(&other, sfd, "", forged.b, &forged.len), 0);
			close(sfd);
		}
		nfsd_export_close(&other);
		CHECK_EQ(getattr(&f, &forged, NULL), NFS3ERR_BADHANDLE);
		/* the same with the right key is accepted: the MAC is what keeps it out */
		REQUIRE_EQ(nfsd_export_open(&other, f.exp, f.key), 0);
		{
			int sfd = open(p, O_PATH | O_CLOEXEC);

			REQUIRE(sfd >= 0);
			REQUIRE_EQ(nfsd_fh_make(&other, sfd, "", forged.b, &forged.len), 0);
			close(sfd);
		}
		nfsd_export_close(&other);
		CHECK_EQ(getattr(&f, &forged, NULL), NFS3_OK);
	}
	/* a handle of another file system (/proc): not even made */
	{
		struct nfsd_export x2;
		int pfd = open("/proc/self", O_PATH | O_CLOEXEC);

		REQUIRE_EQ(nfsd_export_open(&x2, f.exp, f.key), 0);
		CHECK(pfd < 0 || nfsd_fh_make(&x2, pfd, "", h.b, &h.len) != 0);
		if (pfd >= 0)
			close(pfd);
		nfsd_export_close(&x2);
	}
	/* names: 255 bytes fine, 256 too long */
	memset(p, 'n', 255);
	p[255] = '\0';
	CHECK_EQ(create(&f, &root, p, NFS3_UNCHECKED, NULL, NULL), NFS3_OK);
	CHECK_EQ(lookup(&f, &root, p, &h, NULL), NFS3_OK);
	e = begin(&f, NFS3_LOOKUP, &r);
	put_fh(e, &root);
	memset(p, 'n', 256);
	rpcrdma_xdr_put_opaque(e, p, 256);
	CHECK_EQ(finish(&r), NFS3ERR_NAMETOOLONG);
	done(&r);
	/* GARBAGE_ARGS for undecodable arguments */
	e = begin(&f, NFS3_GETATTR, &r);
	rpcrdma_xdr_put_u32(e, 1000);
	CHECK_EQ(rpcrdma_call_run(r.call), -EREMOTEIO);
	{
		struct rpcrdma_rpc_status rs;

		REQUIRE_EQ(rpcrdma_call_status(r.call, &rs), 0);
		CHECK_EQ(rs.accept_stat, RPCRDMA_GARBAGE_ARGS);
	}
	done(&r);
	CHECK(atomic_load(&f.s.garbage) == 1);
	fx_stop(&f);
}

/* MOUNT: the export, a directory below it, nothing else */
static uint32_t mnt(struct rpcrdma_client *c, const char *path, struct fh *out)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 99, n, fl;

	REQUIRE_EQ(rpcrdma_call_create(c, MNT3_MNT, &call), 0);
	rpcrdma_xdr_put_string(rpcrdma_call_args(call), path);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	rpcrdma_xdr_get_u32(d, &st);
	if (st == MNT3_OK) {
		get_fh(d, out);
		rpcrdma_xdr_get_u32(d, &n);
		CHECK_EQ(n, 1);
		rpcrdma_xdr_get_u32(d, &fl);
		CHECK_EQ(fl, RPCRDMA_AUTH_SYS);
	}
	CHECK_EQ(rpcrdma_xdr_dec_remaining(d), 0);
	rpcrdma_call_destroy(call);
	return st;
}

TEST(nfsd_mount_protocol)
{
	struct fx f;
	struct rpcrdma_client *m;
	struct rpcrdma_auth_sys sys = {.uid = 0};
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_dec *d;
	struct fh h, sub;
	struct attr a;
	char url[64], p[256], host[256];
	bool more;

	fx_start(&f, "tcp", false);
	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", nfsd_mount_port(&f.s));
	REQUIRE_EQ(rpcrdma_client_create(url, MOUNT_PROG, MOUNT_V3, NULL, &m), 0);
	snprintf(sys.machinename, sizeof(sys.machinename), "client-a");
	rpcrdma_client_set_auth_sys(m, &sys);
	REQUIRE_EQ(mnt(m, f.exp, &h), MNT3_OK);
	CHECK(h.len == f.root_len && memcmp(h.b, f.root, h.len) == 0);
	snprintf(p, sizeof(p), "%s/", f.exp);
	CHECK_EQ(mnt(m, p, &h), MNT3_OK);
	snprintf(p, sizeof(p), "%s/sub", f.exp);
	REQUIRE_EQ(mkdir(p, 0755), 0);
	REQUIRE_EQ(mnt(m, p, &sub), MNT3_OK);
	REQUIRE_EQ(getattr(&f, &sub, &a), NFS3_OK);
	CHECK_EQ(a.type, NF3DIR);
	snprintf(p, sizeof(p), "%s/sub/..", f.exp);
	CHECK_EQ(mnt(m, p, &h), MNT3ERR_ACCES);
	snprintf(p, sizeof(p), "%s/link", f.exp);
	REQUIRE_EQ(symlink("/", p), 0);
	CHECK(mnt(m, p, &h) != MNT3_OK);
	CHECK_EQ(mnt(m, f.dir, &h), MNT3ERR_NOENT);
	CHECK_EQ(mnt(m, "/etc", &h), MNT3ERR_NOENT);
	snprintf(p, sizeof(p), "%sx", f.exp);
	CHECK_EQ(mnt(m, p, &h), MNT3ERR_NOENT);
	/* DUMP lists client-a twice (two paths) */
	REQUIRE_EQ(rpcrdma_call_create(m, MNT3_DUMP, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	REQUIRE_EQ(rpcrdma_xdr_get_bool(d, &more), 0);
	CHECK(more);
	REQUIRE_EQ(rpcrdma_xdr_get_string(d, host, sizeof(host)), 0);
	CHECK(strcmp(host, "client-a") == 0);
	rpcrdma_call_destroy(call);
	/* UMNTALL empties it */
	REQUIRE_EQ(rpcrdma_call_create(m, MNT3_UMNTALL, &call), 0);
	CHECK_EQ(rpcrdma_call_run(call), 0);
	rpcrdma_call_destroy(call);
	CHECK_EQ(f.s.nmounts, 0);
	/* EXPORT: our path, everyone */
	REQUIRE_EQ(rpcrdma_call_create(m, MNT3_EXPORT, &call), 0);
	REQUIRE_EQ(rpcrdma_call_run(call), 0);
	d = rpcrdma_call_results(call);
	REQUIRE_EQ(rpcrdma_xdr_get_bool(d, &more), 0);
	CHECK(more);
	REQUIRE_EQ(rpcrdma_xdr_get_string(d, p, sizeof(p)), 0);
	CHECK(strcmp(p, f.exp) == 0);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(m);
	fx_stop(&f);
}

/* handles survive a restart (same key); the write verifier changes */
TEST(nfsd_restart_handles_and_verifier)
{
	struct fx f;
	struct fh root, fh;
	uint8_t v1[8], v2[8];
	uint32_t committed;

	fx_start(&f, "tcp", false);
	root = root_of(&f);
	REQUIRE_EQ(create(&f, &root, "keep", NFS3_UNCHECKED, NULL, &fh), NFS3_OK);
	REQUIRE_EQ(write3(&f, &fh, 0, "abc", 3, NFS3_UNSTABLE, &committed, v1), NFS3_OK);
	fx_stop_server(&f);
	REQUIRE_EQ(getrandom(f.verf, sizeof(f.verf), 0), (ssize_t)sizeof(f.verf));
	fx_server(&f, "tcp");
	fx_set_user(&f, 0, 0);
	CHECK_EQ(getattr(&f, &root, NULL), NFS3_OK);
	CHECK_EQ(getattr(&f, &fh, NULL), NFS3_OK);
	REQUIRE_EQ(write3(&f, &fh, 3, "def", 3, NFS3_UNSTABLE, &committed, v2), NFS3_OK);
	CHECK(memcmp(v1, v2, 8) != 0);
	/* another key: the old handles are refused */
	fx_stop_server(&f);
	f.key[3] ^= 0x80;
	fx_server(&f, "tcp");
	CHECK_EQ(getattr(&f, &fh, NULL), NFS3ERR_BADHANDLE);
	fx_stop(&f);
}

/* AUTH_SYS identities: files belong to the caller; others' files are
 * refused; root squash maps uid 0 to the anonymous user */
TEST(nfsd_identity_and_root_squash)
{
	struct fx f;
	struct fh root, fh;
	struct attr a;
	uint8_t v[8];
	uint32_t committed;
	char p[200];

	fx_start(&f, "tcp", true);
	root = root_of(&f);
	REQUIRE_EQ(chmod(f.exp, 01777), 0);
	/* uid 0 squashed: the new file is the anonymous user's */
	REQUIRE_EQ(create(&f, &root, "by-root", NFS3_UNCHECKED, NULL, &fh), NFS3_OK);
	REQUIRE_EQ(getattr(&f, &fh, &a), NFS3_OK);
	CHECK_EQ(a.uid, NFSD_ANON_ID);
	/* a root-owned 0644 file cannot be written by squashed root */
	snprintf(p, sizeof(p), "%s/rootfile", f.exp);
	close(open(p, O_CREAT | O_WRONLY, 0644));
	REQUIRE_EQ(lookup(&f, &root, "rootfile", &fh, NULL), NFS3_OK);
	CHECK_EQ(write3(&f, &fh, 0, "x", 1, NFS3_FILE_SYNC, &committed, v), NFS3ERR_ACCES);
	/* uid 1000 creates its own files, reads world-readable ones, not 0600 */
	fx_set_user(&f, 1000, 1000);
	REQUIRE_EQ(create(&f, &root, "by-1000", NFS3_UNCHECKED, NULL, &fh), NFS3_OK);
	REQUIRE_EQ(getattr(&f, &fh, &a), NFS3_OK);
	CHECK_EQ(a.uid, 1000);
	CHECK_EQ(a.gid, 1000);
	/* the owner may write its file even after making it read-only
	 * (owner override, as nfsd) */
	REQUIRE_EQ(chmod(p, 0600), 0);
	snprintf(p, sizeof(p), "%s/by-1000", f.exp);
	REQUIRE_EQ(chmod(p, 0444), 0);
	CHECK_EQ(write3(&f, &fh, 0, "y", 1, NFS3_FILE_SYNC, &committed, v), NFS3_OK);
	REQUIRE_EQ(lookup(&f, &root, "rootfile", &fh, NULL), NFS3_OK);
	{
		uint8_t buf[8];
		uint32_t got;
		bool eof;

		CHECK_EQ(read3(&f, &fh, 0, sizeof(buf), buf, &got, &eof), NFS3ERR_ACCES);
	}
	/* another user's file in a sticky directory: EPERM from the kernel */
	CHECK_EQ(dirop(&f, NFS3_REMOVE, &root, "by-root"), NFS3ERR_PERM);
	/* without root squash, uid 0 is root */
	fx_stop_server(&f);
	f.squash = false;
	fx_server(&f, "tcp");
	fx_set_user(&f, 0, 0);
	REQUIRE_EQ(create(&f, &root, "by-real-root", NFS3_UNCHECKED, NULL, &fh), NFS3_OK);
	REQUIRE_EQ(getattr(&f, &fh, &a), NFS3_OK);
	CHECK_EQ(a.uid, 0);
	fx_stop(&f);
}

#include "rpc_raw.h"

/* A non-idempotent Call retransmitted with the same XID (as a client does
 * after a reconnect) runs once: the duplicate request cache answers the
 * second MKDIR with the first one's NFS3_OK, where running it again would
 * say NFS3ERR_EXIST (as a new XID does). */
TEST(nfsd_drc_retransmitted_mkdir_runs_once)
{
	struct fx f;
	uint8_t rec[512], rep[1024];
	struct wb body = {0};
	size_t n;
	long len;
	int fd;

	fx_start(&f, "tcp", false);
	REQUIRE_EQ(chmod(f.exp, 0777), 0);
	wopaque(&body, f.root, f.root_len);
	wopaque(&body, "d", 1);
	wu32(&body, 1); wu32(&body, 0755);                  /* mode */
	for (int i = 0; i < 5; i++)
		wu32(&body, 0);                             /* uid gid size atime mtime */
	fd = rpc_raw_connect(nfsd_nfs_port(&f.s));
	for (int round = 0; round < 3; round++) {
		uint32_t xid = round < 2 ? 0x5eed0001u : 0x5eed0002u;

		n = 4 + rpc_raw_call(rec + 4, xid, NFS_PROG, NFS_V3, NFS3_MKDIR, NULL, 0);
		memcpy(rec + n, body.b, body.n);
		n += body.n;
		rr_put_be32(rec, 0x80000000u | (uint32_t)(n - 4));
		rpc_raw_send_all(fd, rec, n);
		len = rpc_raw_recv_record(fd, rep, sizeof(rep), 10000);
		REQUIRE(len >= 28);
		CHECK_EQ(rr_get_be32(rep), xid);
		CHECK_EQ(rr_get_be32(rep + 20), 0);           /* SUCCESS */
		/* nfsstat3: OK for the first run and its retransmission */
		CHECK_EQ(rr_get_be32(rep + 24), round < 2 ? NFS3_OK : NFS3ERR_EXIST);
	}
	close(fd);
	CHECK_EQ(atomic_load(&f.s.nfs_calls[NFS3_MKDIR]), 2);
	{
		struct rpcrdma_drc_stats st;

		REQUIRE_EQ(rpcrdma_server_drc_stats(f.s.nfs_srv, &st), 0);
		CHECK_EQ(st.hits, 1);
	}
	fx_stop(&f);
}

/* A READDIRPLUS count of 4 GiB over a directory whose listing is larger than
 * the largest message: answered in pieces within the server's own limit,
 * never an encoding failure (SYSTEM_ERR) */
TEST(nfsd_readdirplus_hostile_count)
{
	struct fx f;
	struct fh root;
	char p[400], name[201];
	bool found;
	int calls, n;

	fx_start(&f, "tcp", false);
	root = root_of(&f);
	memset(name, 'x', 200);
	name[200] = '\0';
	for (int i = 0; i < 4000; i++) {
		snprintf(p, sizeof(p), "%s/%05d%s", f.exp, i, name + 5);
		close(open(p, O_CREAT | O_WRONLY, 0644));
	}
	n = list_dir(&f, &root, true, 0xffffffffu, NULL, &found, &calls);
	CHECK_EQ(n, 4002);
	CHECK(calls >= 2);
	fx_stop(&f);
}
