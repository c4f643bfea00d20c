/* SPDX-License-Identifier: BSD-2-Clause */
/* NFSv3 procedures of rpcrdma-nfsd that look at single objects (RFC 1813
 * sections 3.3.1-3.3.5 and 3.3.18-3.3.20): GETATTR, SETATTR, LOOKUP,
 * ACCESS, READLINK (its data DDP-eligible, RFC 8267 section 3.3), FSSTAT,
 * FSINFO, PATHCONF. Each returns the nfsstat3 it answered; the results are
 * in the request's encoder. LOOKUP is where names are confined: one
 * component, symbolic links never followed, ".." of the export is the
 * export, and nothing on another file system is answered. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nfsd.h"

/* Answers @s with the object's post-op attributes and closes @fd. */
static int fail_attr(struct nfs3_call *c, uint32_t s, int fd)
{
	nfs3_put_status_attr(c, s, fd);
	close(fd);
	return (int)s;
}

int nfs3_getattr(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_attr at;
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->fh, &fd, &st);

	rpcrdma_xdr_put_u32(c->res, s);
	if (s != NFS3_OK)
		return (int)s;            /* GETATTR3resfail: void */
	nfs3_attr_from_stat(&at, &st, c->s->exp.fsid);
	nfs3_put_fattr(c->res, &at);
	close(fd);
	return NFS3_OK;
}

/* SETATTR3res: nfsstat3; wcc_data obj_wcc (both arms) */
int nfs3_setattr(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_setattr_args *sa = &a->setattr;
	struct nfs3_wcc w = {0};
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &sa->obj, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_wcc(c, s, NULL), (int)s;
	nfs3_wcc_pre(c, fd, &w);
	if (sa->guard_check && ((uint32_t)st.st_ctim.tv_sec != sa->guard_ctime.sec ||
				(uint32_t)st.st_ctim.tv_nsec != sa->guard_ctime.nsec))
		s = NFS3ERR_NOT_SYNC;
	else if (c->s->opts.read_only)
		s = NFS3ERR_ROFS;
	else
		s = nfs3_apply_sattr(c, fd, &st, &sa->attr);
	nfs3_wcc_post(c, fd, &w);
	nfs3_put_status_wcc(c, s, &w);
	close(fd);
	return (int)s;
}

/* Opens @name in directory @dirfd (stat @dst) as LOOKUP does: "." is the
 * directory, ".." its parent except at the export's root (the root
 * itself), anything else one component opened without following a symbolic
 * link; an object of another file system (a mount point inside the export)
 * is not served (ACCES). NFS3_OK and *@out / *@st, or the status. */
static uint32_t lookup_at(struct nfs3_call *c, int dirfd, const struct stat *dst,
			  const char *name, int *out, struct stat *st)
{
	const struct nfsd_export *x = &c->s->exp;
	int f;

	if (strcmp(name, ".") == 0 ||
	    (strcmp(name, "..") == 0 && dst->st_ino == x->ino && dst->st_dev == x->dev)) {
		f = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	} else {
		f = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (f < 0)
		return nfs3_stat_from_errno(errno);
	if (fstat(f, st) < 0 || st->st_dev != x->dev) {
		close(f);
		return NFS3ERR_ACCES;
	}
	*out = f;
	return NFS3_OK;
}

/* LOOKUP3res: nfsstat3; OK: nfs_fh3 object; post_op_attr obj_attributes;
 *             post_op_attr dir_attributes; FAIL: post_op_attr dir_attributes */
int nfs3_lookup(struct nfs3_call *c, union nfs3_args *a)
{
	char name[NFS3_NAME_MAX + 1];
	uint8_t fh[NFS3_FHSIZE];
	uint32_t fhlen = 0;
	struct nfs3_attr oa;
	struct stat dst, st;
	int dfd, fd = -1, rc;
	uint32_t s = nfs3_fh_get(c, &a->dirop.dir, &dfd, &dst);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (!S_ISDIR(dst.st_mode))
		s = NFS3ERR_NOTDIR;
	if (s == NFS3_OK)
		s = nfs3_name_check(&a->dirop.name, name);
	if (s == NFS3_OK)
		s = lookup_at(c, dfd, &dst, name, &fd, &st);
	if (s == NFS3_OK) {
		rc = nfsd_fh_make(&c->s->exp, fd, "", fh, &fhlen);
		if (rc)
			s = rc == -EXDEV ? NFS3ERR_ACCES : nfs3_stat_from_errno(rc);
	}
	if (s != NFS3_OK) {
		nfs3_put_status_attr(c, s, dfd);
	} else {
		rpcrdma_xdr_put_u32(c->res, NFS3_OK);
		rpcrdma_xdr_put_opaque(c->res, fh, fhlen);
		nfs3_attr_from_stat(&oa, &st, c->s->exp.fsid);
		nfs3_put_post_op_attr(c->res, &oa);
		nfs3_put_post_op_attr(c->res, nfs3_stat_attr(c, dfd, &oa) ? &oa : NULL);
	}
	if (fd >= 0)
		close(fd);
	close(dfd);
	return (int)s;
}

/* access(2) as the caller's file-system identity (AT_EACCESS: the current
 * credentials, which carry the fsuid), on the object itself */
static bool may(int fd, int mode)
{
	char p[64];

	nfs3_fd_path(fd, p, sizeof(p));
	return syscall(SYS_faccessat2, AT_FDCWD, p, mode, AT_EACCESS) == 0;
}

/* ACCESS3res: nfsstat3; OK: post_op_attr; uint32 access; FAIL: post_op_attr */
int nfs3_access(struct nfs3_call *c, union nfs3_args *a)
{
	uint32_t want = a->access.access, got = 0;
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->access.obj, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (S_ISLNK(st.st_mode)) {
		got = NFS3_ACCESS_READ;
	} else if (S_ISDIR(st.st_mode)) {
		if ((want & NFS3_ACCESS_READ) && may(fd, R_OK))
			got |= NFS3_ACCESS_READ;
		if ((want & NFS3_ACCESS_LOOKUP) && may(fd, X_OK))
			got |= NFS3_ACCESS_LOOKUP;
		if ((want & (NFS3_ACCESS_MODIFY | NFS3_ACCESS_EXTEND | NFS3_ACCESS_DELETE)) &&
		    may(fd, W_OK | X_OK))
			got |= NFS3_ACCESS_MODIFY | NFS3_ACCESS_EXTEND | NFS3_ACCESS_DELETE;
	} else {
		if ((want & NFS3_ACCESS_READ) && (may(fd, R_OK) || c->cred.uid == st.st_uid))
			got |= NFS3_ACCESS_READ;
		if ((want & (NFS3_ACCESS_MODIFY | NFS3_ACCESS_EXTEND)) && may(fd, W_OK))
			got |= NFS3_ACCESS_MODIFY | NFS3_ACCESS_EXTEND;
		if ((want & NFS3_ACCESS_EXECUTE) && may(fd, X_OK))
			got |= NFS3_ACCESS_EXECUTE;
	}
	if (c->s->opts.read_only)
		got &= ~(NFS3_ACCESS_MODIFY | NFS3_ACCESS_EXTEND | NFS3_ACCESS_DELETE);
	nfs3_put_status_attr(c, NFS3_OK, fd);
	rpcrdma_xdr_put_u32(c->res, got & want);
	close(fd);
	return NFS3_OK;
}

/* READLINK3res: nfsstat3; OK: post_op_attr; nfspath3 data (DDP-eligible,
 * RFC 8267 section 3.3: a Write chunk when the client offers one); FAIL:
 * post_op_attr */
int nfs3_readlink(struct nfs3_call *c, union nfs3_args *a)
{
	struct stat st;
	char *buf;
	ssize_t n;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->fh, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (!S_ISLNK(st.st_mode))
		return fail_attr(c, NFS3ERR_INVAL, fd);
	buf = malloc(NFS3_PATH_MAX);
	n = buf ? readlinkat(fd, "", buf, NFS3_PATH_MAX) : -1;
	if (n < 0) {
		s = buf ? nfs3_stat_from_errno(errno) : NFS3ERR_SERVERFAULT;
		free(buf);
		return fail_attr(c, s, fd);
	}
	nfs3_put_status_attr(c, NFS3_OK, fd);
	rpcrdma_xdr_put_ddp(c->res, buf, (uint32_t)n);
	rpcrdma_req_set_release(c->req, free, buf);
	close(fd);
	return NFS3_OK;
}

/* FSSTAT3res: nfsstat3; OK: post_op_attr; size3 tbytes fbytes abytes
 *             tfiles ffiles afiles; uint32 invarsec; FAIL: post_op_attr */
int nfs3_fsstat(struct nfs3_call *c, union nfs3_args *a)
{
	struct statvfs v;
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->fh, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (fstatvfs(fd, &v) < 0)
		return fail_attr(c, nfs3_stat_from_errno(errno), fd);
	nfs3_put_status_attr(c, NFS3_OK, fd);
	rpcrdma_xdr_put_u64(c->res, (uint64_t)v.f_blocks * v.f_frsize);
	rpcrdma_xdr_put_u64(c->res, (uint64_t)v.f_bfree * v.f_frsize);
	rpcrdma_xdr_put_u64(c->res, (uint64_t)v.f_bavail * v.f_frsize);
	rpcrdma_xdr_put_u64(c->res, v.f_files);
	rpcrdma_xdr_put_u64(c->res, v.f_ffree);
	rpcrdma_xdr_put_u64(c->res, v.f_favail);
	rpcrdma_xdr_put_u32(c->res, 0);
	close(fd);
	return NFS3_OK;
}

/* FSINFO3res: nfsstat3; OK: post_op_attr; uint32 rtmax rtpref rtmult
 *             wtmax wtpref wtmult dtpref; size3 maxfilesize; nfstime3
 *             time_delta; uint32 properties; FAIL: post_op_attr */
int nfs3_fsinfo(struct nfs3_call *c, union nfs3_args *a)
{
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->fh, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	nfs3_put_status_attr(c, NFS3_OK, fd);
	rpcrdma_xdr_put_u32(c->res, NFSD_MAX_IO);  /* rtmax */
	rpcrdma_xdr_put_u32(c->res, NFSD_MAX_IO);  /* rtpref */
	rpcrdma_xdr_put_u32(c->res, 4096);         /* rtmult */
	rpcrdma_xdr_put_u32(c->res, NFSD_MAX_IO);  /* wtmax */
	rpcrdma_xdr_put_u32(c->res, NFSD_MAX_IO);  /* wtpref */
	rpcrdma_xdr_put_u32(c->res, 4096);         /* wtmult */
	rpcrdma_xdr_put_u32(c->res, NFSD_DTPREF);  /* dtpref */
	rpcrdma_xdr_put_u64(c->res, (uint64_t)INT64_MAX);
	rpcrdma_xdr_put_u32(c->res, 0);            /* time_delta: 1 ns */
	rpcrdma_xdr_put_u32(c->res, 1);
	rpcrdma_xdr_put_u32(c->res, NFS3_FSF_LINK | NFS3_FSF_SYMLINK | NFS3_FSF_HOMOGENEOUS |
					    NFS3_FSF_CANSETTIME);
	close(fd);
	return NFS3_OK;
}

/* PATHCONF3res: nfsstat3; OK: post_op_attr; uint32 linkmax; uint32
 *               name_max; bool no_trunc chown_restricted case_insensitive
 *               case_preserving; FAIL: post_op_attr */
int nfs3_pathconf(struct nfs3_call *c, union nfs3_args *a)
{
	struct statvfs v;
	struct stat st;
	int fd;
	uint32_t s = nfs3_fh_get(c, &a->fh, &fd, &st);
	uint32_t name_max = NFS3_NAME_MAX;

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (fstatvfs(fd, &v) == 0 && v.f_namemax > 0 && v.f_namemax < name_max)
		name_max = (uint32_t)v.f_namemax;
	nfs3_put_status_attr(c, NFS3_OK, fd);
	rpcrdma_xdr_put_u32(c->res, 32000);        /* linkmax */
	rpcrdma_xdr_put_u32(c->res, name_max);
	rpcrdma_xdr_put_bool(c->res, true);        /* no_trunc: longer names fail */
	rpcrdma_xdr_put_bool(c->res, true);        /* chown_restricted */
	rpcrdma_xdr_put_bool(c->res, false);       /* case_insensitive */
	rpcrdma_xdr_put_bool(c->res, true);        /* case_preserving */
	close(fd);
	return NFS3_OK;
}
