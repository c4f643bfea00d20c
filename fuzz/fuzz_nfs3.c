/* SPDX-License-Identifier: BSD-2-Clause */
/* libFuzzer target for rpcrdma-nfsd's NFSv3 argument decoders (RFC 1813
 * section 3, tools/nfsd/nfs3_xdr.c): the first byte picks the procedure
 * (1..21, and the out-of-range values), the rest is the argument body as
 * the public XDR cursor (rpcrdma_xdr_dec) hands it to the server. A decoder
 * must accept or refuse (-EBADMSG; -EINVAL only for an unknown procedure),
 * never read out of bounds (ASan) or crash; what it accepts must hold the
 * invariants the procedures rely on: every in-place item lies inside the
 * input, handles are at most 64 bytes, names at most 1024, WRITE's count
 * at most its data, enums in range. */
#include <stdlib.h>

#include "nfs3_xdr.h"
#include "rpc/xbuf.h"

static void check(int cond)
{
	if (!cond)
		abort();
}

static const uint8_t *lo, *hi;

static void inside(const void *p, size_t n)
{
	check(n == 0 || ((const uint8_t *)p >= lo && (const uint8_t *)p + n <= hi));
}

static void fh_ok(const struct nfs3_fh *fh)
{
	check(fh->len <= NFS3_FHSIZE);
	inside(fh->data, fh->len);
}

static void dirop_ok(const struct nfs3_diropargs *d)
{
	fh_ok(&d->dir);
	check(d->name.len <= NFS3_NAME_WIRE_MAX);
	inside(d->name.p, d->name.len);
}

static void sattr_ok(const struct nfs3_sattr *s)
{
	check(s->atime_how <= NFS3_SET_TO_CLIENT_TIME && s->mtime_how <= NFS3_SET_TO_CLIENT_TIME);
	check(s->atime.nsec < 1000000000u && s->mtime.nsec < 1000000000u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpcrdma_xdr_dec d;
	union nfs3_args a;
	uint32_t proc;
	int rc;

	if (size < 1)
		return 0;
	proc = data[0] % 24;   /* 22 and 23: unknown procedures */
	lo = data + 1;
	hi = data + size;
	rr_xbuf_dec_init(&d, data + 1, size - 1);
	rc = nfs3_decode_args(&d, proc, &a);
	if (proc == 0 || proc >= NFS3_NPROC) {
		check(rc == -EINVAL);
		return 0;
	}
	check(rc == 0 || rc == -EBADMSG);
	if (rc)
		return 0;
	switch (proc) {
	case NFS3_GETATTR: case NFS3_READLINK: case NFS3_FSSTAT: case NFS3_FSINFO:
	case NFS3_PATHCONF:
		fh_ok(&a.fh);
		break;
	case NFS3_SETATTR:
		fh_ok(&a.setattr.obj);
		sattr_ok(&a.setattr.attr);
		break;
	case NFS3_LOOKUP: case NFS3_REMOVE: case NFS3_RMDIR:
		dirop_ok(&a.dirop);
		break;
	case NFS3_ACCESS:
		fh_ok(&a.access.obj);
		break;
	case NFS3_READ:
		fh_ok(&a.read.file);
		break;
	case NFS3_WRITE:
		fh_ok(&a.write.file);
		check(a.write.stable <= NFS3_FILE_SYNC);
		check(a.write.count <= a.write.data_len);
		inside(a.write.data, a.write.data_len);
		break;
	case NFS3_CREATE:
		dirop_ok(&a.create.where);
		check(a.create.mode <= NFS3_EXCLUSIVE);
		sattr_ok(&a.create.attr);
		break;
	case NFS3_MKDIR:
		dirop_ok(&a.mkdir.where);
		sattr_ok(&a.mkdir.attr);
		break;
	case NFS3_SYMLINK:
		dirop_ok(&a.symlink.where);
		check(a.symlink.target.len <= NFS3_PATH_MAX);
		inside(a.symlink.target.p, a.symlink.target.len);
		break;
	case NFS3_MKNOD:
		dirop_ok(&a.mknod.where);
		check(a.mknod.type >= NF3REG && a.mknod.type <= NF3FIFO);
		break;
	case NFS3_RENAME:
		dirop_ok(&a.rename.from);
		dirop_ok(&a.rename.to);
		break;
	case NFS3_LINK:
		fh_ok(&a.link.file);
		dirop_ok(&a.link.link);
		break;
	case NFS3_READDIR: case NFS3_READDIRPLUS:
		fh_ok(&a.readdir.dir);
		break;
	case NFS3_COMMIT:
		fh_ok(&a.commit.file);
		break;
	}
	return 0;
}
