/* SPDX-License-Identifier: BSD-2-Clause */
/* NFSv3 procedures of rpcrdma-nfsd that change names in directories
 * (RFC 1813 sections 3.3.8-3.3.15): CREATE (UNCHECKED, GUARDED, and
 * EXCLUSIVE with the verifier kept in the new file's atime/mtime as nfsd
 * does, so a retransmitted exclusive create succeeds), MKDIR, SYMLINK (its
 * target DDP-eligible, RFC 8267 section 3.3), MKNOD, REMOVE, RMDIR, RENAME,
 * LINK. Every name is one validated component and every change is a
 * single *at() system call relative to the directory's descriptor, as the
 * caller: the kernel checks the permissions and never follows a symbolic
 * link in the last component, so nothing is created or removed outside the
 * export. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nfsd.h"

static bool is_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* Opens the directory of @dirop for a change and validates its name into
 * @name; wcc pre-op attributes into @w. "." and ".." are answered @dots
 * (0: left to the caller). NFS3_OK with *@dfd open, or the status (*@dfd -1
 * when the handle itself failed). */
static uint32_t dir_for_change(struct nfs3_call *c, const struct nfs3_diropargs *dirop,
			       int *dfd, char *name, struct nfs3_wcc *w, uint32_t dots)
{
	struct stat dst;
	uint32_t s = nfs3_fh_get(c, &dirop->dir, dfd, &dst);

	if (s != NFS3_OK) {
		*dfd = -1;
		return s;
	}
	nfs3_wcc_pre(c, *dfd, w);
	if (!S_ISDIR(dst.st_mode))
		return NFS3ERR_NOTDIR;
	s = nfs3_name_check(&dirop->name, name);
	if (s == NFS3_OK && c->s->opts.read_only)
		s = NFS3ERR_ROFS;
	if (s == NFS3_OK && dots && is_dot(name))
		s = dots;
	return s;
}

static int finish_wcc(struct nfs3_call *c, uint32_t s, int dfd, struct nfs3_wcc *w)
{
	if (dfd >= 0) {
		nfs3_wcc_post(c, dfd, w);
		close(dfd);
	}
	nfs3_put_status_wcc(c, s, w);
	return (int)s;
}

/* Results of CREATE, MKDIR, SYMLINK, MKNOD: nfsstat3; OK: post_op_fh3 obj;
 * post_op_attr obj_attributes; wcc_data dir_wcc; FAIL: wcc_data dir_wcc.
 * @s NFS3_OK: @name was just made in @dfd; its remaining attributes @sa
 * (those not given at creation) are applied first. */
static int finish_new(struct nfs3_call *c, uint32_t s, int dfd, const char *name,
		      struct nfs3_wcc *w, const struct nfs3_sattr *sa)
{
	uint8_t fh[NFS3_FHSIZE];
	uint32_t fhlen = 0;
	struct nfs3_attr at;
	bool have_fh = false, have_attr = false;
	struct stat st;
	int f;

	if (s != NFS3_OK)
		return finish_wcc(c, s, dfd, w);
	f = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (f >= 0 && fstat(f, &st) == 0) {
		if (sa)
			s = nfs3_apply_sattr(c, f, &st, sa);
		have_fh = nfsd_fh_make(&c->s->exp, f, "", fh, &fhlen) == 0;
		have_attr = nfs3_stat_attr(c, f, &at);
	}
	if (f >= 0)
		close(f);
	if (s != NFS3_OK)
		return finish_wcc(c, s, dfd, w);
	nfs3_wcc_post(c, dfd, w);
	close(dfd);
	rpcrdma_xdr_put_u32(c->res, NFS3_OK);
	nfs3_put_post_op_fh(c->res, have_fh ? fh : NULL, fhlen);
	nfs3_put_post_op_attr(c->res, have_attr ? &at : NULL);
	nfs3_put_wcc(c->res, w);
	return NFS3_OK;
}

/* The attributes a create does not set by itself: owner and times, and the
 * size when @size (CREATE; the mode goes into the create call). */
static struct nfs3_sattr rest_of(const struct nfs3_sattr *sa, bool size)
{
	struct nfs3_sattr r = *sa;

	r.set_mode = false;
	r.set_size = r.set_size && size;
	return r;
}

int nfs3_create(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_create_args *ca = &a->create;
	char name[NFS3_NAME_MAX + 1];
	struct nfs3_wcc w = {0};
	struct nfs3_sattr rest;
	struct stat st;
	uint32_t vm = 0, va = 0;
	mode_t mode;
	int dfd, f;
	uint32_t s = dir_for_change(c, &ca->where, &dfd, name, &w, NFS3ERR_EXIST);

	if (s != NFS3_OK)
		return finish_wcc(c, s, dfd, &w);
	if (ca->mode == NFS3_EXCLUSIVE) {
		vm = ((uint32_t)ca->verf[0] << 24 | (uint32_t)ca->verf[1] << 16 |
		      (uint32_t)ca->verf[2] << 8 | ca->verf[3]) & 0x7fffffffu;
		va = ((uint32_t)ca->verf[4] << 24 | (uint32_t)ca->verf[5] << 16 |
		      (uint32_t)ca->verf[6] << 8 | ca->verf[7]) & 0x7fffffffu;
		mode = 0;
	} else {
		mode = ca->attr.set_mode ? (ca->attr.mode & 07777) : 0644;
	}
	if (mknodat(dfd, name, S_IFREG | mode, 0) == 0) {
		if (ca->mode == NFS3_EXCLUSIVE) {
			struct nfs3_sattr v = {.atime_how = NFS3_SET_TO_CLIENT_TIME,
					       .mtime_how = NFS3_SET_TO_CLIENT_TIME,
					       .atime = {va, 0}, .mtime = {vm, 0}};

			return finish_new(c, NFS3_OK, dfd, name, &w, &v);
		}
		rest = rest_of(&ca->attr, true);
		return finish_new(c, NFS3_OK, dfd, name, &w, &rest);
	}
	if (errno != EEXIST || ca->mode == NFS3_GUARDED)
		return finish_wcc(c, nfs3_stat_from_errno(errno), dfd, &w);
	/* it exists: UNCHECKED sets the size of a regular file; EXCLUSIVE
	 * succeeds when it is our own earlier create (same verifier) */
	f = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0 || fstat(f, &st) < 0) {
		s = nfs3_stat_from_errno(errno);
		if (f >= 0)
			close(f);
		return finish_wcc(c, s, dfd, &w);
	}
	close(f);
	if (!S_ISREG(st.st_mode))
		return finish_wcc(c, NFS3ERR_EXIST, dfd, &w);
	if (ca->mode == NFS3_EXCLUSIVE) {
		if ((uint32_t)st.st_mtim.tv_sec != vm || (uint32_t)st.st_atim.tv_sec != va)
			return finish_wcc(c, NFS3ERR_EXIST, dfd, &w);
		return finish_new(c, NFS3_OK, dfd, name, &w, NULL);
	}
	memset(&rest, 0, sizeof(rest));
	rest.set_size = ca->attr.set_size;
	rest.size = ca->attr.size;
	return finish_new(c, NFS3_OK, dfd, name, &w, &rest);
}

int nfs3_mkdir(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_mkdir_args *ma = &a->mkdir;
	char name[NFS3_NAME_MAX + 1];
	struct nfs3_wcc w = {0};
	struct nfs3_sattr rest;
	int dfd;
	uint32_t s = dir_for_change(c, &ma->where, &dfd, name, &w, NFS3ERR_EXIST);

	if (s == NFS3_OK &&
	    mkdirat(dfd, name, ma->attr.set_mode ? (ma->attr.mode & 07777) : 0755) < 0)
		s = nfs3_stat_from_errno(errno);
	rest = rest_of(&ma->attr, false);
	return finish_new(c, s, dfd, name, &w, &rest);
}

int nfs3_symlink(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_symlink_args *sa = &a->symlink;
	char name[NFS3_NAME_MAX + 1];
	struct nfs3_wcc w = {0};
	struct nfs3_sattr rest;
	char *target = NULL;
	int dfd;
	uint32_t s = dir_for_change(c, &sa->where, &dfd, name, &w, NFS3ERR_EXIST);

	if (s == NFS3_OK && (sa->target.len == 0 || memchr(sa->target.p, '\0', sa->target.len)))
		s = NFS3ERR_INVAL;
	if (s == NFS3_OK) {
		target = malloc(sa->target.len + 1);
		if (!target)
			s = NFS3ERR_SERVERFAULT;
	}
	if (s == NFS3_OK) {
		memcpy(target, sa->target.p, sa->target.len);
		target[sa->target.len] = '\0';
		/* the target is stored, never followed by the server */
		if (symlinkat(target, dfd, name) < 0)
			s = nfs3_stat_from_errno(errno);
	}
	free(target);
	rest = rest_of(&sa->attr, false);
	return finish_new(c, s, dfd, name, &w, &rest);
}

int nfs3_mknod(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_mknod_args *ma = &a->mknod;
	char name[NFS3_NAME_MAX + 1];
	struct nfs3_wcc w = {0};
	struct nfs3_sattr rest;
	mode_t mode = ma->attr.set_mode ? (ma->attr.mode & 07777) : 0644;
	dev_t dev = 0;
	int dfd;
	uint32_t s = dir_for_change(c, &ma->where, &dfd, name, &w, NFS3ERR_EXIST);

	if (s == NFS3_OK) {
		switch (ma->type) {
		case NF3CHR: mode |= S_IFCHR; dev = makedev(ma->major, ma->minor); break;
		case NF3BLK: mode |= S_IFBLK; dev = makedev(ma->major, ma->minor); break;
		case NF3SOCK: mode |= S_IFSOCK; break;
		case NF3FIFO: mode |= S_IFIFO; break;
		default: s = NFS3ERR_BADTYPE; break;
		}
	}
	if (s == NFS3_OK && mknodat(dfd, name, mode, dev) < 0)
		s = nfs3_stat_from_errno(errno);
	rest = rest_of(&ma->attr, false);
	return finish_new(c, s, dfd, name, &w, &rest);
}

/* REMOVE3res / RMDIR3res: nfsstat3; wcc_data dir_wcc (both arms) */
static int unlink_common(struct nfs3_call *c, const struct nfs3_diropargs *d, int flags)
{
	char name[NFS3_NAME_MAX + 1];
	struct nfs3_wcc w = {0};
	int dfd;
	uint32_t s = dir_for_change(c, d, &dfd, name, &w, 0);

	if (s == NFS3_OK && strcmp(name, ".") == 0)
		s = NFS3ERR_INVAL;
	else if (s == NFS3_OK && strcmp(name, "..") == 0)
		s = flags ? NFS3ERR_NOTEMPTY : NFS3ERR_ISDIR;
	if (s == NFS3_OK && unlinkat(dfd, name, flags) < 0)
		s = errno == EEXIST ? NFS3ERR_NOTEMPTY : nfs3_stat_from_errno(errno);
	return finish_wcc(c, s, dfd, &w);
}

int nfs3_remove(struct nfs3_call *c, union nfs3_args *a)
{
	return unlink_common(c, &a->dirop, 0);
}

int nfs3_rmdir(struct nfs3_call *c, union nfs3_args *a)
{
	return unlink_common(c, &a->dirop, AT_REMOVEDIR);
}

/* RENAME3res: nfsstat3; wcc_data fromdir_wcc; wcc_data todir_wcc (both) */
int nfs3_rename(struct nfs3_call *c, union nfs3_args *a)
{
	char from[NFS3_NAME_MAX + 1], to[NFS3_NAME_MAX + 1];
	struct nfs3_wcc fw = {0}, tw = {0};
	int ffd, tfd = -1;
	uint32_t s = dir_for_change(c, &a->rename.from, &ffd, from, &fw, NFS3ERR_INVAL);

	if (s == NFS3_OK)
		s = dir_for_change(c, &a->rename.to, &tfd, to, &tw, NFS3ERR_INVAL);
	else if (ffd >= 0 && nfs3_fh_get(c, &a->rename.to.dir, &tfd, &(struct stat){0}) == NFS3_OK)
		nfs3_wcc_pre(c, tfd, &tw);
	if (s == NFS3_OK && renameat(ffd, from, tfd, to) < 0)
		s = nfs3_stat_from_errno(errno);
	if (ffd >= 0) {
		nfs3_wcc_post(c, ffd, &fw);
		close(ffd);
	}
	if (tfd >= 0) {
		nfs3_wcc_post(c, tfd, &tw);
		close(tfd);
	}
	nfs3_put_status_wcc(c, s, &fw);
	nfs3_put_wcc(c->res, &tw);
	return (int)s;
}

/* LINK3res: nfsstat3; post_op_attr file_attributes; wcc_data linkdir_wcc
 * (both arms) */
int nfs3_link(struct nfs3_call *c, union nfs3_args *a)
{
	char name[NFS3_NAME_MAX + 1], p[64];
	struct nfs3_wcc w = {0};
	struct stat st;
	int fd = -1, dfd = -1;
	uint32_t s = nfs3_fh_get(c, &a->link.file, &fd, &st);

	if (s == NFS3_OK)
		s = dir_for_change(c, &a->link.link, &dfd, name, &w, NFS3ERR_EXIST);
	if (s == NFS3_OK && S_ISDIR(st.st_mode))
		s = NFS3ERR_ISDIR;
	if (s == NFS3_OK) {
		/* through the descriptor's /proc link: linkat(AT_EMPTY_PATH)
		 * would need CAP_DAC_READ_SEARCH, which the caller lacks */
		nfs3_fd_path(fd, p, sizeof(p));
		if (linkat(AT_FDCWD, p, dfd, name, AT_SYMLINK_FOLLOW) < 0)
			s = nfs3_stat_from_errno(errno);
	}
	if (dfd >= 0) {
		nfs3_wcc_post(c, dfd, &w);
		close(dfd);
	}
	nfs3_put_status_attr(c, s, fd);
	nfs3_put_wcc(c->res, &w);
	if (fd >= 0)
		close(fd);
	return (int)s;
}
