/* SPDX-License-Identifier: BSD-2-Clause */
/* NFSv3 directory listing of rpcrdma-nfsd (RFC 1813 sections 3.3.16 and
 * 3.3.17): READDIR and READDIRPLUS. Cookies are the directory's own offsets
 * (getdents64 d_off, resumed with lseek), so a listing continues where it
 * stopped across calls and server restarts; the cookie verifier is always
 * zero and not checked (an offset lseek refuses is BAD_COOKIE). A reply is
 * never larger than the client's count (READDIR) or maxcount (READDIRPLUS,
 * whose dircount bounds the names and cookies alone): on RDMA the client
 * sized its Reply chunk from it (RFC 8267 section 4: large replies go in a
 * Reply chunk). READDIRPLUS entries carry attributes and handles under the
 * same confinement as LOOKUP (an entry of another file system gets
 * neither). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nfsd.h"

struct rd_dirent {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

#define RD_BUF 32768
#define PAD4(n) (((n) + 3u) & ~3u)

/* fixed part of a READDIR/READDIRPLUS success: status, post_op_attr,
 * cookieverf, the final "no more entries" and eof */
#define RD_FIXED (4u + NFS3_POST_OP_ATTR_SIZE + NFS3_VERF_SIZE + 4u + 4u)
/* the largest entry3 / entryplus3 */
#define RD_ENTRY_MAX (4u + 8u + 4u + 256u + 8u)
#define RD_PLUS_MAX (RD_ENTRY_MAX + NFS3_POST_OP_ATTR_SIZE + NFS3_POST_OP_FH_SIZE)

/* Attributes and handle of entry @name for READDIRPLUS. */
static void plus_info(struct nfs3_call *c, int dfd, const struct stat *dst, const char *name,
		      struct nfs3_attr *at, bool *have_at, uint8_t *fh, uint32_t *fhlen,
		      bool *have_fh)
{
	const struct nfsd_export *x = &c->s->exp;
	struct stat st;

	*have_at = *have_fh = false;
	if (strcmp(name, "..") == 0 && dst->st_ino == x->ino && dst->st_dev == x->dev)
		name = ".";  /* the export's parent is the export itself */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != x->dev)
		return;
	nfs3_attr_from_stat(at, &st, x->fsid);
	*have_at = true;
	if (strcmp(name, ".") == 0)
		*have_fh = nfsd_fh_make(x, dfd, "", fh, fhlen) == 0;
	else
		*have_fh = nfsd_fh_make(x, dfd, name, fh, fhlen) == 0;
}

static int readdir_common(struct nfs3_call *c, const struct nfs3_readdir_args *ra, bool plus)
{
	char buf[RD_BUF];
	struct stat dst;
	uint32_t used = RD_FIXED, dirbytes = 0, n = 0;
	/* a larger count than any reply we send is no reason to build one */
	uint32_t count = ra->count < NFSD_MAX_IO ? ra->count : NFSD_MAX_IO;
	bool eof = false, full = false;
	long got;
	int dfd, f = -1;
	uint32_t s = nfs3_fh_get(c, &ra->dir, &dfd, &dst);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	if (!S_ISDIR(dst.st_mode))
		s = NFS3ERR_NOTDIR;
	if (s == NFS3_OK) {
		f = nfs3_reopen(c, dfd, &dst, O_RDONLY | O_DIRECTORY, false);
		if (f < 0)
			s = nfs3_stat_from_errno(f);
	}
	if (s == NFS3_OK && ra->cookie != 0 && lseek(f, (off_t)ra->cookie, SEEK_SET) < 0)
		s = NFS3ERR_BAD_COOKIE;
	got = s == NFS3_OK ? syscall(SYS_getdents64, f, buf, sizeof(buf)) : 0;
	if (s == NFS3_OK && got < 0)
		s = nfs3_stat_from_errno(errno);
	/* room for the largest entry at least, so one always fits */
	if (s == NFS3_OK && count < RD_FIXED + (plus ? RD_PLUS_MAX : RD_ENTRY_MAX))
		s = NFS3ERR_TOOSMALL;
	if (s != NFS3_OK) {
		nfs3_put_status_attr(c, s, dfd);
		goto out;
	}
	nfs3_put_status_attr(c, NFS3_OK, dfd);
	rpcrdma_xdr_put_u64(c->res, 0);                /* cookieverf3 */
	while (!full) {
		if (got == 0) {
			eof = true;
			break;
		}
		for (long pos = 0; pos < got;) {
			const struct rd_dirent *d = (const void *)(buf + pos);
			uint32_t len = (uint32_t)strnlen(d->d_name, NFS3_NAME_MAX + 1);
			uint32_t dirsz = 8u + 4u + PAD4(len) + 8u, sz = 4u + dirsz;
			uint8_t fh[NFS3_FHSIZE];
			uint32_t fhlen = 0;
			struct nfs3_attr at;
			bool have_at = false, have_fh = false;

			if (d->d_reclen == 0 || pos + d->d_reclen > got)
				break;   /* cannot happen with a sane kernel */
			pos += d->d_reclen;
			if (len > NFS3_NAME_MAX)
				continue;
			if (plus) {
				plus_info(c, dfd, &dst, d->d_name, &at, &have_at, fh, &fhlen,
					  &have_fh);
				sz += (have_at ? NFS3_POST_OP_ATTR_SIZE : 4u) +
				      (have_fh ? 8u + PAD4(fhlen) : 4u);
			}
			if (used + sz > count || (plus && ra->dircount > 0 &&
						      dirbytes + dirsz > ra->dircount && n > 0)) {
				full = true;
				break;
			}
			used += sz;
			dirbytes += dirsz;
			n++;
			/* entry3: fileid3 fileid; filename3 name; cookie3 cookie
			 * entryplus3 adds post_op_attr name_attributes;
			 * post_op_fh3 name_handle */
			rpcrdma_xdr_put_bool(c->res, true);
			rpcrdma_xdr_put_u64(c->res, d->d_ino);
			rpcrdma_xdr_put_opaque(c->res, d->d_name, len);
			rpcrdma_xdr_put_u64(c->res, (uint64_t)d->d_off);
			if (plus) {
				nfs3_put_post_op_attr(c->res, have_at ? &at : NULL);
				nfs3_put_post_op_fh(c->res, have_fh ? fh : NULL, fhlen);
			}
		}
		if (!full) {
			got = syscall(SYS_getdents64, f, buf, sizeof(buf));
			if (got < 0)
				break;   /* what was listed stands; eof false */
		}
	}
	rpcrdma_xdr_put_bool(c->res, false);           /* no more entries */
	rpcrdma_xdr_put_bool(c->res, eof);
out:
	if (f >= 0)
		close(f);
	close(dfd);
	return (int)s;
}

int nfs3_readdir(struct nfs3_call *c, union nfs3_args *a)
{
	return readdir_common(c, &a->readdir, false);
}

int nfs3_readdirplus(struct nfs3_call *c, union nfs3_args *a)
{
	return readdir_common(c, &a->readdir, true);
}
