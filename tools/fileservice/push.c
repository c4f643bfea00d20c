/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service's PUSH_OPEN procedure, server side: appends a zeroed
 * range to a file, maps it and exposes it to the calling connection as a
 * push-mode durable region (draft-talpey-rdma-commit section 2,
 * include/rpcrdma/push.h), which the client then fills with RDMA Write +
 * RDMA Commit without any server code running. The mapping is undone when
 * the transport releases the region (the connection ended). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileservice.h"
#include "service_int.h"
#include "rpcrdma/push.h"

/* A region exposed by PUSH_OPEN: unmapped once the transport released it. */
struct fs_push_region {
	struct rpcrdma_durable_map map;
};

static void fs_push_released(void *arg)
{
	struct fs_push_region *g = (struct fs_push_region *)arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
}

int fs_h_push_open(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	struct rpcrdma_push_region reg;
	struct rpcrdma_mr_attr a;
	struct fs_push_region *g;
	char path[FS_PATH_MAX];
	uint64_t size, start = 0, id;
	uint32_t st = FS_OK;
	struct stat sb;
	long pg = sysconf(_SC_PAGESIZE);
	int rc, fd = -1;

	atomic_fetch_add(&svc->calls[FS_PUSH_OPEN], 1);
	rc = fs_get_path(d, path, false);
	if (rc < 0 || rpcrdma_xdr_get_u64(d, &size) || rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (rc > 0)
		st = (uint32_t)rc;
	else if (size == 0 || size > FS_PUSH_MAX || pg <= 0)
		st = FS_EINVAL;
	else if (rpcrdma_req_push_capable(req) != 0)
		st = FS_ENOTSUP;   /* tcp://, or a peer without RDMA Commit */
	if (st == FS_OK) {
		fd = fs_open_beneath(svc, path, O_RDWR | O_CREAT | O_NOCTTY | O_NONBLOCK, 0644);
		if (fd < 0)
			st = fs_status_from_errno(-fd);
	}
	g = st == FS_OK ? (struct fs_push_region *)calloc(1, sizeof(*g)) : NULL;
	if (st == FS_OK && !g)
		st = FS_EIO;
	/* append: the region is the new tail [st_size, st_size + size) */
	if (st == FS_OK && flock(fd, LOCK_EX) < 0)
		st = fs_status_from_errno(errno);
	if (st == FS_OK && fstat(fd, &sb) < 0)
		st = fs_status_from_errno(errno);
	if (st == FS_OK && !S_ISREG(sb.st_mode))
		st = FS_EINVAL;
	if (st == FS_OK && (uint64_t)sb.st_size > (uint64_t)INT64_MAX - size)
		st = FS_EFBIG;
	if (st == FS_OK) {
		start = (uint64_t)sb.st_size;
		if (ftruncate(fd, (off_t)(start + size)) < 0)
			st = fs_status_from_errno(errno);
	}
	if (fd >= 0)
		(void)flock(fd, LOCK_UN);
	if (st == FS_OK) {
		uint64_t map_off = start & ~((uint64_t)pg - 1);
		void *p = mmap(NULL, (size_t)(start + size - map_off), PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, (off_t)map_off);

		if (p == MAP_FAILED) {
			st = fs_status_from_errno(errno);
		} else {
			g->map.addr = p;
			g->map.length = start + size - map_off;
			g->map.fd = fd;
			fd = -1;   /* owned by the map now */
			memset(&a, 0, sizeof(a));
			a.addr = (uint8_t *)p + (start - map_off);
			a.length = size;
			a.flags = RPCRDMA_MR_DURABLE;
			a.durable_fd = g->map.fd;
			a.durable_offset = start;
			rc = rpcrdma_req_push_expose(req, &a, fs_push_released, g, &reg, &id);
			if (rc) {
				st = rc == -EOPNOTSUPP ? FS_ENOTSUP : fs_status_from_errno(-rc);
				(void)rpcrdma_durable_unmap(&g->map);
			} else {
				g = NULL;   /* the transport's until released */
			}
		}
	}
	if (fd >= 0)
		close(fd);
	free(g);
	rpcrdma_xdr_put_u32(e, st);
	if (st == FS_OK) {
		rpcrdma_xdr_put_push_region(e, &reg);
		rpcrdma_xdr_put_u64(e, start);
	}
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}
