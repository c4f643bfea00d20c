/* SPDX-License-Identifier: BSD-2-Clause */
/* NFSv3 file I/O of rpcrdma-nfsd (RFC 1813 sections 3.3.6, 3.3.7, 3.3.21):
 * READ, WRITE and COMMIT. Bulk data is DDP-eligible (RFC 8267 section 3.3):
 * READ's result data is put by reference (rpcrdma_xdr_put_ddp) into a
 * buffer the request owns until its release callback, so on RDMA it goes
 * straight into the client's Write chunk; WRITE's data is used where the
 * transport received it (a Read chunk on RDMA). WRITE honours the three
 * stability levels (UNSTABLE: the page cache; DATA_SYNC: fdatasync;
 * FILE_SYNC: fsync) and answers the server's write verifier, which COMMIT
 * (fsync) also returns: the verifier changes whenever the server restarts,
 * so a client knows to resend unstable data it had not committed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd.h"

static uint32_t io_type_check(const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return NFS3ERR_ISDIR;
	return S_ISREG(st->st_mode) ? NFS3_OK : NFS3ERR_INVAL;
}

/* READ3res: nfsstat3; OK: post_op_attr file_attributes; count3 count; bool
 *           eof; opaque data<> (DDP-eligible); FAIL: post_op_attr */
int nfs3_read(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_read_args *r = &a->read;
	uint32_t count = r->count < NFSD_MAX_IO ? r->count : NFSD_MAX_IO;
	size_t got = 0;
	uint8_t *buf = NULL;
	struct stat st;
	bool eof;
	int fd, f = -1;
	uint32_t s = nfs3_fh_get(c, &r->file, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_attr(c, s, -1), (int)s;
	s = io_type_check(&st);
	if (s == NFS3_OK) {
		f = nfs3_reopen(c, fd, &st, O_RDONLY, true);
		if (f < 0)
			s = nfs3_stat_from_errno(f);
	}
	if (s == NFS3_OK && count > 0 && r->offset < (uint64_t)st.st_size) {
		buf = malloc(count);
		if (!buf)
			s = NFS3ERR_SERVERFAULT;
		while (buf && got < count) {
			ssize_t n = pread(f, buf + got, count - got, (off_t)(r->offset + got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				s = nfs3_stat_from_errno(errno);
				break;
			}
			if (n == 0)
				break;
			got += (size_t)n;
		}
	}
	if (s != NFS3_OK) {
		free(buf);
		nfs3_put_status_attr(c, s, fd);
	} else {
		struct stat now;

		eof = fstat(f, &now) == 0 ? r->offset + got >= (uint64_t)now.st_size : got < count;
		nfs3_put_status_attr(c, NFS3_OK, fd);
		rpcrdma_xdr_put_u32(c->res, (uint32_t)got);
		rpcrdma_xdr_put_bool(c->res, eof);
		rpcrdma_xdr_put_ddp(c->res, buf, (uint32_t)got);
		if (buf)
			rpcrdma_req_set_release(c->req, free, buf);
	}
	if (f >= 0)
		close(f);
	close(fd);
	return (int)s;
}

/* WRITE3res: nfsstat3; OK: wcc_data file_wcc; count3 count; stable_how
 *            committed; writeverf3 verf; FAIL: wcc_data file_wcc */
int nfs3_write(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_write_args *w = &a->write;
	struct nfs3_wcc wcc = {0};
	size_t done = 0;
	struct stat st;
	int fd, f = -1;
	uint32_t s = nfs3_fh_get(c, &w->file, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_wcc(c, s, NULL), (int)s;
	nfs3_wcc_pre(c, fd, &wcc);
	s = io_type_check(&st);
	if (s == NFS3_OK && c->s->opts.read_only)
		s = NFS3ERR_ROFS;
	if (s == NFS3_OK && (w->offset > (uint64_t)INT64_MAX ||
			     (uint64_t)INT64_MAX - w->offset < w->count))
		s = NFS3ERR_FBIG;
	if (s == NFS3_OK) {
		f = nfs3_reopen(c, fd, &st, O_WRONLY, true);
		if (f < 0)
			s = nfs3_stat_from_errno(f);
	}
	while (s == NFS3_OK && done < w->count) {
		ssize_t n = pwrite(f, w->data + done, w->count - done, (off_t)(w->offset + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			s = n < 0 ? nfs3_stat_from_errno(errno) : NFS3ERR_IO;
			break;
		}
		done += (size_t)n;
	}
	if (s == NFS3_OK && w->stable == NFS3_FILE_SYNC && fsync(f) < 0)
		s = nfs3_stat_from_errno(errno);
	if (s == NFS3_OK && w->stable == NFS3_DATA_SYNC && fdatasync(f) < 0)
		s = nfs3_stat_from_errno(errno);
	nfs3_wcc_post(c, fd, &wcc);
	nfs3_put_status_wcc(c, s, &wcc);
	if (s == NFS3_OK) {
		rpcrdma_xdr_put_u32(c->res, (uint32_t)done);
		rpcrdma_xdr_put_u32(c->res, w->stable);
		rpcrdma_xdr_put_fixed(c->res, c->s->write_verf, NFS3_VERF_SIZE);
	}
	if (f >= 0)
		close(f);
	close(fd);
	return (int)s;
}

/* COMMIT3res: nfsstat3; OK: wcc_data file_wcc; writeverf3 verf; FAIL:
 *             wcc_data file_wcc. The whole file is flushed whatever the
 *             range (allowed: section 3.3.21). */
int nfs3_commit(struct nfs3_call *c, union nfs3_args *a)
{
	struct nfs3_wcc wcc = {0};
	struct stat st;
	char p[64];
	int fd, f;
	uint32_t s = nfs3_fh_get(c, &a->commit.file, &fd, &st);

	if (s != NFS3_OK)
		return nfs3_put_status_wcc(c, s, NULL), (int)s;
	nfs3_wcc_pre(c, fd, &wcc);
	s = io_type_check(&st);
	if (s == NFS3_OK) {
		/* flushing needs no permission beyond holding the handle */
		nfs3_fd_path(fd, p, sizeof(p));
		nfs3_as_server(c);
		f = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (f < 0 || fsync(f) < 0)
			s = nfs3_stat_from_errno(errno);
		if (f >= 0)
			close(f);
		nfs3_as_caller(c);
	}
	nfs3_wcc_post(c, fd, &wcc);
	nfs3_put_status_wcc(c, s, &wcc);
	if (s == NFS3_OK)
		rpcrdma_xdr_put_fixed(c->res, c->s->write_verf, NFS3_VERF_SIZE);
	close(fd);
	return (int)s;
}
