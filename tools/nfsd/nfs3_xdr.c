/* SPDX-License-Identifier: BSD-2-Clause */
/* NFSv3 (RFC 1813 section 3) argument decoders and result item encoders of
 * rpcrdma-nfsd, and MOUNT v3's dirpath (RFC 1813 appendix I), on the public
 * checked XDR cursor (include/rpcrdma/xdr.h). Every read is bounds-checked by
 * the cursor; every value with a closed set (bools, enums, discriminants) is
 * checked here; a body with bytes left over is rejected. Wire layouts are
 * written above each decoder. */
#include <errno.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "nfs3_xdr.h"

/* nfs_fh3: opaque data<NFS3_FHSIZE> */
static int get_fh(struct rpcrdma_xdr_dec *d, struct nfs3_fh *fh)
{
	const void *p;
	int rc = rpcrdma_xdr_get_opaque(d, NFS3_FHSIZE, &p, &fh->len);

	fh->data = p;
	return rc;
}

/* filename3: string<> (at most NFS3_NAME_WIRE_MAX accepted; validity of the
 * bytes is the procedure's business: NAMETOOLONG / INVAL answers) */
static int get_name(struct rpcrdma_xdr_dec *d, struct nfs3_str *s, uint32_t max)
{
	const void *p;
	int rc = rpcrdma_xdr_get_opaque(d, max, &p, &s->len);

	s->p = p;
	return rc;
}

/* diropargs3: nfs_fh3 dir; filename3 name */
static int get_dirop(struct rpcrdma_xdr_dec *d, struct nfs3_diropargs *a)
{
	int rc = get_fh(d, &a->dir);

	return rc ? rc : get_name(d, &a->name, NFS3_NAME_WIRE_MAX);
}

/* nfstime3: uint32 seconds; uint32 nseconds (< 10^9) */
static int get_time(struct rpcrdma_xdr_dec *d, struct nfs3_time *t)
{
	int rc = rpcrdma_xdr_get_u32(d, &t->sec);

	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, &t->nsec);
	if (rc == 0 && t->nsec >= 1000000000u)
		rc = -EBADMSG;
	return rc;
}

/* set_atime / set_mtime: time_how how; SET_TO_CLIENT_TIME: nfstime3 */
static int get_set_time(struct rpcrdma_xdr_dec *d, uint32_t *how, struct nfs3_time *t)
{
	int rc = rpcrdma_xdr_get_u32(d, how);

	if (rc)
		return rc;
	if (*how > NFS3_SET_TO_CLIENT_TIME)
		return -EBADMSG;
	return *how == NFS3_SET_TO_CLIENT_TIME ? get_time(d, t) : 0;
}

/* set_uint32 (set_mode3 set_uid3 set_gid3): bool set_it; uint32 */
static int get_set_u32(struct rpcrdma_xdr_dec *d, bool *set, uint32_t *v)
{
	int rc = rpcrdma_xdr_get_bool(d, set);

	if (rc == 0 && *set)
		rc = rpcrdma_xdr_get_u32(d, v);
	return rc;
}

/* sattr3: set_mode3 mode; set_uid3 uid; set_gid3 gid; set_size3 size
 *         (bool; uint64); set_atime atime; set_mtime mtime */
static int get_sattr(struct rpcrdma_xdr_dec *d, struct nfs3_sattr *s)
{
	int rc;

	memset(s, 0, sizeof(*s));
	rc = get_set_u32(d, &s->set_mode, &s->mode);
	if (rc == 0)
		rc = get_set_u32(d, &s->set_uid, &s->uid);
	if (rc == 0)
		rc = get_set_u32(d, &s->set_gid, &s->gid);
	if (rc == 0)
		rc = rpcrdma_xdr_get_bool(d, &s->set_size);
	if (rc == 0 && s->set_size)
		rc = rpcrdma_xdr_get_u64(d, &s->size);
	if (rc == 0)
		rc = get_set_time(d, &s->atime_how, &s->atime);
	if (rc == 0)
		rc = get_set_time(d, &s->mtime_how, &s->mtime);
	return rc;
}

/* SETATTR3args: nfs_fh3 object; sattr3 new_attributes;
 *               sattrguard3 guard (bool check; nfstime3 obj_ctime) */
static int dec_setattr(struct rpcrdma_xdr_dec *d, struct nfs3_setattr_args *a)
{
	int rc = get_fh(d, &a->obj);

	if (rc == 0)
		rc = get_sattr(d, &a->attr);
	if (rc == 0)
		rc = rpcrdma_xdr_get_bool(d, &a->guard_check);
	if (rc == 0 && a->guard_check)
		rc = get_time(d, &a->guard_ctime);
	return rc;
}

/* READ3args: nfs_fh3 file; offset3 offset; count3 count
 * COMMIT3args: the same layout */
static int dec_fh_off_count(struct rpcrdma_xdr_dec *d, struct nfs3_fh *fh, uint64_t *off,
			    uint32_t *count)
{
	int rc = get_fh(d, fh);

	if (rc == 0)
		rc = rpcrdma_xdr_get_u64(d, off);
	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, count);
	return rc;
}

/* WRITE3args: nfs_fh3 file; offset3 offset; count3 count; stable_how stable;
 *             opaque data<> (DDP-eligible, RFC 8267 section 3.3: a Read chunk
 *             on RDMA). count larger than the data is GARBAGE_ARGS (nfsd);
 *             count smaller writes count bytes. */
static int dec_write(struct rpcrdma_xdr_dec *d, struct nfs3_write_args *a)
{
	const void *p = NULL;
	int rc = dec_fh_off_count(d, &a->file, &a->offset, &a->count);

	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, &a->stable);
	if (rc == 0 && a->stable > NFS3_FILE_SYNC)
		rc = -EBADMSG;
	if (rc == 0)
		rc = rpcrdma_xdr_get_ddp(d, &p, &a->data_len);
	if (rc == 0 && a->count > a->data_len)
		rc = -EBADMSG;
	a->data = p;
	return rc;
}

/* CREATE3args: diropargs3 where; createhow3 how:
 *   UNCHECKED | GUARDED: sattr3 obj_attributes; EXCLUSIVE: createverf3 verf */
static int dec_create(struct rpcrdma_xdr_dec *d, struct nfs3_create_args *a)
{
	int rc = get_dirop(d, &a->where);

	memset(&a->attr, 0, sizeof(a->attr));
	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, &a->mode);
	if (rc)
		return rc;
	switch (a->mode) {
	case NFS3_UNCHECKED:
	case NFS3_GUARDED:
		return get_sattr(d, &a->attr);
	case NFS3_EXCLUSIVE:
		return rpcrdma_xdr_get_fixed(d, a->verf, NFS3_VERF_SIZE);
	default:
		return -EBADMSG;
	}
}

/* SYMLINK3args: diropargs3 where; symlinkdata3 (sattr3 symlink_attributes;
 *               nfspath3 symlink_data: DDP-eligible, RFC 8267 section 3.3) */
static int dec_symlink(struct rpcrdma_xdr_dec *d, struct nfs3_symlink_args *a)
{
	const void *p = NULL;
	int rc = get_dirop(d, &a->where);

	if (rc == 0)
		rc = get_sattr(d, &a->attr);
	if (rc == 0)
		rc = rpcrdma_xdr_get_ddp(d, &p, &a->target.len);
	if (rc == 0 && a->target.len > NFS3_PATH_MAX)
		rc = -EBADMSG;
	a->target.p = p;
	return rc;
}

/* MKNOD3args: diropargs3 where; mknoddata3: ftype3 type;
 *   NF3CHR | NF3BLK: devicedata3 (sattr3 dev_attributes; specdata3 spec);
 *   NF3SOCK | NF3FIFO: sattr3 pipe_attributes; other types: void */
static int dec_mknod(struct rpcrdma_xdr_dec *d, struct nfs3_mknod_args *a)
{
	int rc = get_dirop(d, &a->where);

	memset(&a->attr, 0, sizeof(a->attr));
	a->major = a->minor = 0;
	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, &a->type);
	if (rc)
		return rc;
	switch (a->type) {
	case NF3CHR:
	case NF3BLK:
		rc = get_sattr(d, &a->attr);
		if (rc == 0)
			rc = rpcrdma_xdr_get_u32(d, &a->major);
		if (rc == 0)
			rc = rpcrdma_xdr_get_u32(d, &a->minor);
		return rc;
	case NF3SOCK:
	case NF3FIFO:
		return get_sattr(d, &a->attr);
	case NF3REG:
	case NF3DIR:
	case NF3LNK:
		return 0; /* valid discriminant, void arm: answered BADTYPE */
	default:
		return -EBADMSG;
	}
}

/* READDIR3args: nfs_fh3 dir; cookie3 cookie; cookieverf3 verf; count3 count
 * READDIRPLUS3args: nfs_fh3 dir; cookie3; cookieverf3; count3 dircount;
 *                   count3 maxcount */
static int dec_readdir(struct rpcrdma_xdr_dec *d, struct nfs3_readdir_args *a, bool plus)
{
	int rc = get_fh(d, &a->dir);

	a->dircount = 0;
	if (rc == 0)
		rc = rpcrdma_xdr_get_u64(d, &a->cookie);
	if (rc == 0)
		rc = rpcrdma_xdr_get_fixed(d, a->verf, NFS3_VERF_SIZE);
	if (rc == 0 && plus)
		rc = rpcrdma_xdr_get_u32(d, &a->dircount);
	if (rc == 0)
		rc = rpcrdma_xdr_get_u32(d, &a->count);
	return rc;
}

int nfs3_decode_args(struct rpcrdma_xdr_dec *d, uint32_t proc, union nfs3_args *a)
{
	int rc;

	memset(a, 0, sizeof(*a));
	switch (proc) {
	case NFS3_GETATTR:
	case NFS3_READLINK:
	case NFS3_FSSTAT:
	case NFS3_FSINFO:
	case NFS3_PATHCONF:
		rc = get_fh(d, &a->fh);        /* nfs_fh3 object */
		break;
	case NFS3_SETATTR:
		rc = dec_setattr(d, &a->setattr);
		break;
	case NFS3_LOOKUP:
	case NFS3_REMOVE:
	case NFS3_RMDIR:
		rc = get_dirop(d, &a->dirop);  /* diropargs3 */
		break;
	case NFS3_ACCESS:
		rc = get_fh(d, &a->access.obj); /* nfs_fh3 object; uint32 access */
		if (rc == 0)
			rc = rpcrdma_xdr_get_u32(d, &a->access.access);
		break;
	case NFS3_READ:
		rc = dec_fh_off_count(d, &a->read.file, &a->read.offset, &a->read.count);
		break;
	case NFS3_WRITE:
		rc = dec_write(d, &a->write);
		break;
	case NFS3_CREATE:
		rc = dec_create(d, &a->create);
		break;
	case NFS3_MKDIR:
		rc = get_dirop(d, &a->mkdir.where); /* diropargs3 where; sattr3 */
		if (rc == 0)
			rc = get_sattr(d, &a->mkdir.attr);
		break;
	case NFS3_SYMLINK:
		rc = dec_symlink(d, &a->symlink);
		break;
	case NFS3_MKNOD:
		rc = dec_mknod(d, &a->mknod);
		break;
	case NFS3_RENAME:
		rc = get_dirop(d, &a->rename.from); /* diropargs3 from; diropargs3 to */
		if (rc == 0)
			rc = get_dirop(d, &a->rename.to);
		break;
	case NFS3_LINK:
		rc = get_fh(d, &a->link.file);      /* nfs_fh3 file; diropargs3 link */
		if (rc == 0)
			rc = get_dirop(d, &a->link.link);
		break;
	case NFS3_READDIR:
		rc = dec_readdir(d, &a->readdir, false);
		break;
	case NFS3_READDIRPLUS:
		rc = dec_readdir(d, &a->readdir, true);
		break;
	case NFS3_COMMIT:
		rc = dec_fh_off_count(d, &a->commit.file, &a->commit.offset, &a->commit.count);
		break;
	default:
		return -EINVAL;
	}
	if (rc == 0 && rpcrdma_xdr_dec_remaining(d) != 0)
		rc = -EBADMSG;
	return rc ? -EBADMSG : 0;
}

/* dirpath: string<MNTPATHLEN> */
int mnt3_decode_dirpath(struct rpcrdma_xdr_dec *d, struct nfs3_str *path)
{
	int rc = get_name(d, path, MNT_PATH_MAX);

	if (rc == 0 && rpcrdma_xdr_dec_remaining(d) != 0)
		rc = -EBADMSG;
	return rc ? -EBADMSG : 0;
}

/* ---- results ---- */

void nfs3_attr_from_stat(struct nfs3_attr *a, const struct stat *st, uint64_t fsid)
{
	memset(a, 0, sizeof(*a));
	switch (st->st_mode & S_IFMT) {
	case S_IFREG: a->type = NF3REG; break;
	case S_IFDIR: a->type = NF3DIR; break;
	case S_IFBLK: a->type = NF3BLK; break;
	case S_IFCHR: a->type = NF3CHR; break;
	case S_IFLNK: a->type = NF3LNK; break;
	case S_IFSOCK: a->type = NF3SOCK; break;
	default: a->type = NF3FIFO; break;
	}
	a->mode = st->st_mode & 07777;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->size = (uint64_t)st->st_size;
	a->used = (uint64_t)st->st_blocks * 512u;
	a->rdev_major = major(st->st_rdev);
	a->rdev_minor = minor(st->st_rdev);
	a->fsid = fsid;
	a->fileid = st->st_ino;
	a->atime.sec = (uint32_t)st->st_atim.tv_sec;
	a->atime.nsec = (uint32_t)st->st_atim.tv_nsec;
	a->mtime.sec = (uint32_t)st->st_mtim.tv_sec;
	a->mtime.nsec = (uint32_t)st->st_mtim.tv_nsec;
	a->ctime.sec = (uint32_t)st->st_ctim.tv_sec;
	a->ctime.nsec = (uint32_t)st->st_ctim.tv_nsec;
}

static void put_time(struct rpcrdma_xdr_enc *e, const struct nfs3_time *t)
{
	rpcrdma_xdr_put_u32(e, t->sec);
	rpcrdma_xdr_put_u32(e, t->nsec);
}

/* fattr3 (84 bytes) */
int nfs3_put_fattr(struct rpcrdma_xdr_enc *e, const struct nfs3_attr *a)
{
	rpcrdma_xdr_put_u32(e, a->type);
	rpcrdma_xdr_put_u32(e, a->mode);
	rpcrdma_xdr_put_u32(e, a->nlink);
	rpcrdma_xdr_put_u32(e, a->uid);
	rpcrdma_xdr_put_u32(e, a->gid);
	rpcrdma_xdr_put_u64(e, a->size);
	rpcrdma_xdr_put_u64(e, a->used);
	rpcrdma_xdr_put_u32(e, a->rdev_major);
	rpcrdma_xdr_put_u32(e, a->rdev_minor);
	rpcrdma_xdr_put_u64(e, a->fsid);
	rpcrdma_xdr_put_u64(e, a->fileid);
	put_time(e, &a->atime);
	put_time(e, &a->mtime);
	put_time(e, &a->ctime);
	return rpcrdma_xdr_enc_error(e);
}

int nfs3_put_post_op_attr(struct rpcrdma_xdr_enc *e, const struct nfs3_attr *a)
{
	rpcrdma_xdr_put_bool(e, a != NULL);
	return a ? nfs3_put_fattr(e, a) : rpcrdma_xdr_enc_error(e);
}

/* wcc_data: pre_op_attr before (bool; wcc_attr: size3 size; nfstime3 mtime;
 *           nfstime3 ctime); post_op_attr after */
int nfs3_put_wcc(struct rpcrdma_xdr_enc *e, const struct nfs3_wcc *w)
{
	rpcrdma_xdr_put_bool(e, w->pre_valid);
	if (w->pre_valid) {
		rpcrdma_xdr_put_u64(e, w->pre.size);
		put_time(e, &w->pre.mtime);
		put_time(e, &w->pre.ctime);
	}
	return nfs3_put_post_op_attr(e, w->post_valid ? &w->post : NULL);
}

int nfs3_put_post_op_fh(struct rpcrdma_xdr_enc *e, const uint8_t *fh, uint32_t len)
{
	rpcrdma_xdr_put_bool(e, fh != NULL);
	if (fh)
		rpcrdma_xdr_put_opaque(e, fh, len);
	return rpcrdma_xdr_enc_error(e);
}

const char *nfs3_stat_name(uint32_t st)
{
	switch (st) {
	case NFS3_OK: return "OK";
	case NFS3ERR_PERM: return "PERM";
	case NFS3ERR_NOENT: return "NOENT";
	case NFS3ERR_IO: return "IO";
	case NFS3ERR_NXIO: return "NXIO";
	case NFS3ERR_ACCES: return "ACCES";
	case NFS3ERR_EXIST: return "EXIST";
	case NFS3ERR_XDEV: return "XDEV";
	case NFS3ERR_NODEV: return "NODEV";
	case NFS3ERR_NOTDIR: return "NOTDIR";
	case NFS3ERR_ISDIR: return "ISDIR";
	case NFS3ERR_INVAL: return "INVAL";
	case NFS3ERR_FBIG: return "FBIG";
	case NFS3ERR_NOSPC: return "NOSPC";
	case NFS3ERR_ROFS: return "ROFS";
	case NFS3ERR_MLINK: return "MLINK";
	case NFS3ERR_NAMETOOLONG: return "NAMETOOLONG";
	case NFS3ERR_NOTEMPTY: return "NOTEMPTY";
	case NFS3ERR_DQUOT: return "DQUOT";
	case NFS3ERR_STALE: return "STALE";
	case NFS3ERR_REMOTE: return "REMOTE";
	case NFS3ERR_BADHANDLE: return "BADHANDLE";
	case NFS3ERR_NOT_SYNC: return "NOT_SYNC";
	case NFS3ERR_BAD_COOKIE: return "BAD_COOKIE";
	case NFS3ERR_NOTSUPP: return "NOTSUPP";
	case NFS3ERR_TOOSMALL: return "TOOSMALL";
	case NFS3ERR_SERVERFAULT: return "SERVERFAULT";
	case NFS3ERR_BADTYPE: return "BADTYPE";
	case NFS3ERR_JUKEBOX: return "JUKEBOX";
	default: return "?";
	}
}

const char *nfs3_proc_name(uint32_t proc)
{
	static const char *const names[NFS3_NPROC] = {
		"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
		"CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK",
		"READDIR", "READDIRPLUS", "FSSTAT", "FSINFO", "PATHCONF", "COMMIT"};

	return proc < NFS3_NPROC ? names[proc] : "?";
}

const char *mnt3_proc_name(uint32_t proc)
{
	static const char *const names[MNT3_NPROC] = {"NULL", "MNT", "DUMP", "UMNT", "UMNTALL",
						      "EXPORT"};

	return proc < MNT3_NPROC ? names[proc] : "?";
}
