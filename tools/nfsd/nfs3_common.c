/* SPDX-License-Identifier: BSD-2-Clause */
/* What every NFSv3 procedure of rpcrdma-nfsd shares (RFC 1813 section 3):
 * opening the object of a file handle, re-opening it for I/O as the caller,
 * file name validation (the confinement of names: one component, never
 * "/"), weak cache consistency data (section 2.6 "wcc_data"), the error
 * arms of the results, and applying sattr3 (SETATTR, CREATE, MKDIR,
 * SYMLINK, MKNOD). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd.h"

void nfs3_as_server(struct nfs3_call *c)
{
	if (c->as_caller) {
		nfsd_cred_leave();
		c->as_caller = false;
	}
}

void nfs3_as_caller(struct nfs3_call *c)
{
	if (!c->as_caller && nfsd_cred_enter(&c->cred) == 0)
		c->as_caller = true;
}

uint32_t nfs3_fh_get(struct nfs3_call *c, const struct nfs3_fh *fh, int *fd, struct stat *st)
{
	bool was = c->as_caller;
	uint32_t s;

	nfs3_as_server(c);
	s = nfsd_fh_open(&c->s->exp, fh, fd, st);
	if (was)
		nfs3_as_caller(c);
	return s;
}

void nfs3_fd_path(int fd, char *buf, size_t cap)
{
	snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

int nfs3_reopen(struct nfs3_call *c, int fd, const struct stat *st, int flags,
		bool owner_override)
{
	char p[64];
	int f;

	nfs3_fd_path(fd, p, sizeof(p));
	f = open(p, flags | O_CLOEXEC | O_NOCTTY);
	if (f >= 0)
		return f;
	if (errno != EACCES || !owner_override || !c->as_caller || c->cred.uid != st->st_uid)
		return -errno;
	nfs3_as_server(c);
	f = open(p, flags | O_CLOEXEC | O_NOCTTY);
	if (f < 0)
		f = -errno;
	nfs3_as_caller(c);
	return f;
}

uint32_t nfs3_name_check(const struct nfs3_str *n, char *out)
{
	if (n->len > NFS3_NAME_MAX)
		return NFS3ERR_NAMETOOLONG;
	if (n->len == 0 || memchr(n->p, '/', n->len) || memchr(n->p, '\0', n->len))
		return NFS3ERR_ACCES;
	memcpy(out, n->p, n->len);
	out[n->len] = '\0';
	return NFS3_OK;
}

bool nfs3_stat_attr(struct nfs3_call *c, int fd, struct nfs3_attr *a)
{
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return false;
	nfs3_attr_from_stat(a, &st, c->s->exp.fsid);
	return true;
}

int nfs3_put_status_attr(struct nfs3_call *c, uint32_t st, int fd)
{
	struct nfs3_attr a;

	rpcrdma_xdr_put_u32(c->res, st);
	return nfs3_put_post_op_attr(c->res, nfs3_stat_attr(c, fd, &a) ? &a : NULL);
}

int nfs3_put_status_wcc(struct nfs3_call *c, uint32_t st, const struct nfs3_wcc *w)
{
	struct nfs3_wcc none = {0};

	rpcrdma_xdr_put_u32(c->res, st);
	return nfs3_put_wcc(c->res, w ? w : &none);
}

void nfs3_wcc_pre(struct nfs3_call *c, int fd, struct nfs3_wcc *w)
{
	w->pre_valid = nfs3_stat_attr(c, fd, &w->pre);
}

void nfs3_wcc_post(struct nfs3_call *c, int fd, struct nfs3_wcc *w)
{
	w->post_valid = nfs3_stat_attr(c, fd, &w->post);
}

static void to_ts(struct timespec *ts, uint32_t how, const struct nfs3_time *t)
{
	ts->tv_sec = 0;
	switch (how) {
	case NFS3_SET_TO_SERVER_TIME:
		ts->tv_nsec = UTIME_NOW;
		break;
	case NFS3_SET_TO_CLIENT_TIME:
		ts->tv_sec = t->sec;
		ts->tv_nsec = t->nsec;
		break;
	default:
		ts->tv_nsec = UTIME_OMIT;
		break;
	}
}

/* Applies sattr3: size, owner, mode, times, in that order (a chown clears
 * set-id bits, so the mode comes after it). Symbolic links have no mode of
 * their own on Linux and are never followed. */
uint32_t nfs3_apply_sattr(struct nfs3_call *c, int fd, const struct stat *st,
			  const struct nfs3_sattr *sa)
{
	char p[64];
	int f;

	nfs3_fd_path(fd, p, sizeof(p));
	if (sa->set_size) {
		if (S_ISDIR(st->st_mode))
			return NFS3ERR_ISDIR;
		if (!S_ISREG(st->st_mode))
			return NFS3ERR_INVAL;
		if (sa->size > (uint64_t)INT64_MAX)
			return NFS3ERR_FBIG;
		f = nfs3_reopen(c, fd, st, O_WRONLY, true);
		if (f < 0)
			return nfs3_stat_from_errno(f);
		if (ftruncate(f, (off_t)sa->size) < 0) {
			int e = errno;

			close(f);
			return nfs3_stat_from_errno(e);
		}
		close(f);
	}
	if (sa->set_uid || sa->set_gid) {
		if (fchownat(fd, "", sa->set_uid ? sa->uid : (uid_t)-1,
			     sa->set_gid ? sa->gid : (gid_t)-1, AT_EMPTY_PATH) < 0)
			return nfs3_stat_from_errno(errno);
	}
	if (sa->set_mode && !S_ISLNK(st->st_mode)) {
		if (fchmodat(AT_FDCWD, p, sa->mode & 07777, 0) < 0)
			return nfs3_stat_from_errno(errno);
	}
	if (sa->atime_how != NFS3_DONT_CHANGE || sa->mtime_how != NFS3_DONT_CHANGE) {
		struct timespec ts[2];

		to_ts(&ts[0], sa->atime_how, &sa->atime);
		to_ts(&ts[1], sa->mtime_how, &sa->mtime);
		if (S_ISLNK(st->st_mode)) {
			if (utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
				return nfs3_stat_from_errno(errno);
		} else if (utimensat(AT_FDCWD, p, ts, 0) < 0) {
			return nfs3_stat_from_errno(errno);
		}
	}
	return NFS3_OK;
}
