/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service's data procedures, server side: READ (its data a
 * DDP-eligible result, sent from a buffer released with the Reply), WRITE
 * (its data a DDP-eligible argument; create, truncate and fdatasync on
 * request) and COMMIT (fsync). Only regular files: FIFOs and devices could
 * block the handler. File errors are an fs_status in the results. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileservice.h"
#include "service_int.h"

/* A READ's data, held until its Reply is gone; from the service's env. */
struct fs_rbuf {
	const struct rpcrdma_env *env;
	uint8_t data[];
};

static void fs_rbuf_release(void *p)
{
	struct fs_rbuf *rb = p;

	rb->env->free(rb->env->alloc_ctx, rb);
}

int fs_h_read(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	char path[FS_PATH_MAX];
	uint64_t off;
	uint32_t count, st;
	int rc, fd;
	struct fs_rbuf *rb = NULL;
	uint8_t *buf = NULL;
	ssize_t got = 0;
	struct stat sb;

	atomic_fetch_add(&svc->calls[FS_READ], 1);
	rc = fs_get_path(d, path, false);
	if (rc < 0 || rpcrdma_xdr_get_u64(d, &off) || rpcrdma_xdr_get_u32(d, &count) ||
	    rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (rc > 0)
		return rpcrdma_xdr_put_u32(e, (uint32_t)rc) ? RPCRDMA_SVC_SYSTEM_ERR
							     : RPCRDMA_SVC_OK;
	if (count > FS_MAX_IO)
		count = FS_MAX_IO;
	if (off > (uint64_t)INT64_MAX)
		return rpcrdma_xdr_put_u32(e, FS_EINVAL) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
	fd = fs_open_beneath(svc, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0)
		return rpcrdma_xdr_put_u32(e, fs_status_from_errno(-fd)) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
	st = FS_OK;
	if (fstat(fd, &sb) < 0)
		st = fs_status_from_errno(errno);
	else if (S_ISDIR(sb.st_mode))
		st = FS_EISDIR;
	else if (!S_ISREG(sb.st_mode))
		st = FS_EINVAL;   /* no FIFOs or devices: they could block */
	/* never more than the file holds past @off: a peer asking 8 MiB of a
	 * small file makes the server hold what it reads, not what it asks */
	if (st == FS_OK && off >= (uint64_t)sb.st_size)
		count = 0;
	else if (st == FS_OK && count > (uint64_t)sb.st_size - off)
		count = (uint32_t)((uint64_t)sb.st_size - off);
	if (st == FS_OK && count) {
		rb = svc->env->alloc(svc->env->alloc_ctx, sizeof(*rb) + count);
		if (!rb) {
			close(fd);
			return RPCRDMA_SVC_SYSTEM_ERR;
		}
		rb->env = svc->env;
		buf = rb->data;
		while ((uint32_t)got < count) {
			ssize_t n = pread(fd, buf + got, count - (size_t)got, (off_t)(off + (uint64_t)got));

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				st = fs_status_from_errno(errno);
				break;
			}
			if (n == 0)
				break;
			got += n;
		}
	}
	close(fd);
	rpcrdma_xdr_put_u32(e, st);
	if (st == FS_OK) {
		bool eof = (uint64_t)sb.st_size <= off + (uint64_t)got;

		rpcrdma_xdr_put_bool(e, eof);
		/* the buffer is referenced: free it once the reply is gone */
		rpcrdma_xdr_put_ddp(e, buf ? buf : (const void *)"", (uint32_t)got);
		if (rb)
			rpcrdma_req_set_release(req, fs_rbuf_release, rb);
	} else if (rb) {
		fs_rbuf_release(rb);
	}
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

int fs_h_write(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	char path[FS_PATH_MAX];
	uint64_t off;
	uint32_t flags, len, st = FS_OK;
	const void *data;
	int rc, fd, oflags;
	size_t done = 0;

	atomic_fetch_add(&svc->calls[FS_WRITE], 1);
	rc = fs_get_path(d, path, false);
	if (rc < 0 || rpcrdma_xdr_get_u64(d, &off) || rpcrdma_xdr_get_u32(d, &flags) ||
	    rpcrdma_xdr_get_ddp(d, &data, &len) || rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (rc > 0)
		st = (uint32_t)rc;
	else if (flags & ~(FS_WRITE_CREATE | FS_WRITE_TRUNC | FS_WRITE_SYNC))
		st = FS_EINVAL;
	else if (off > (uint64_t)INT64_MAX - len)
		st = FS_EFBIG;
	if (st != FS_OK)
		return rpcrdma_xdr_put_u32(e, st) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
	oflags = O_WRONLY | O_NOCTTY | O_NONBLOCK;
	if (flags & FS_WRITE_CREATE)
		oflags |= O_CREAT;
	if (flags & FS_WRITE_TRUNC)
		oflags |= O_TRUNC;
	fd = fs_open_beneath(svc, path, oflags, 0644);
	if (fd < 0)
		return rpcrdma_xdr_put_u32(e, fs_status_from_errno(-fd)) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
	{
		struct stat sb;

		if (fstat(fd, &sb) < 0)
			st = fs_status_from_errno(errno);
		else if (!S_ISREG(sb.st_mode))
			st = FS_EINVAL;
	}
	while (st == FS_OK && done < len) {
		ssize_t n = pwrite(fd, (const uint8_t *)data + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st = fs_status_from_errno(errno);
			break;
		}
		done += (size_t)n;
	}
	if (st == FS_OK && (flags & FS_WRITE_SYNC) && fdatasync(fd) < 0)
		st = fs_status_from_errno(errno);
	close(fd);
	rpcrdma_xdr_put_u32(e, st);
	if (st == FS_OK)
		rpcrdma_xdr_put_u32(e, (uint32_t)done);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

int fs_h_commit(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	char path[FS_PATH_MAX];
	uint32_t st = FS_OK;
	int rc, fd;

	atomic_fetch_add(&svc->calls[FS_COMMIT], 1);
	rc = fs_get_path(d, path, false);
	if (rc < 0 || rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (rc > 0) {
		st = (uint32_t)rc;
	} else {
		fd = fs_open_beneath(svc, path, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
		if (fd < 0) {
			st = fs_status_from_errno(-fd);
		} else {
			if (fsync(fd) < 0)
				st = fs_status_from_errno(errno);
			close(fd);
		}
	}
	return rpcrdma_xdr_put_u32(e, st) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}
