/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service's LIST procedure, server side: the entries of a
 * directory beneath the export, sorted by name, from a cookie (the index of
 * the first entry wanted), at most FS_LIST_MAX_ENTRIES of them and about
 * FS_LIST_MAX_BYTES of reply (a Long Reply on RDMA when over the inline
 * threshold). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileservice.h"
#include "service_int.h"

static int fs_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int fs_h_list(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	char path[FS_PATH_MAX];
	uint32_t cookie, maxent, n = 0, i;
	int rc, fd;
	DIR *dir;
	struct dirent *de;
	char **names = NULL;
	size_t nnames = 0, cap = 0, bytes = 0;
	bool eof, oom = false;

	atomic_fetch_add(&svc->calls[FS_LIST], 1);
	rc = fs_get_path(d, path, true);
	if (rc < 0 || rpcrdma_xdr_get_u32(d, &cookie) || rpcrdma_xdr_get_u32(d, &maxent) ||
	    rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	if (rc > 0)
		return rpcrdma_xdr_put_u32(e, (uint32_t)rc) ? RPCRDMA_SVC_SYSTEM_ERR
							     : RPCRDMA_SVC_OK;
	if (maxent > FS_LIST_MAX_ENTRIES)
		maxent = FS_LIST_MAX_ENTRIES;
	fd = fs_open_beneath(svc, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return rpcrdma_xdr_put_u32(e, fs_status_from_errno(-fd)) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
	dir = fdopendir(fd);
	if (!dir) {
		rc = errno;
		close(fd);
		return rpcrdma_xdr_put_u32(e, fs_status_from_errno(rc)) ? RPCRDMA_SVC_SYSTEM_ERR
									: RPCRDMA_SVC_OK;
	}
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (nnames == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof(*nn));

			if (!nn) {
				oom = true;
				break;
			}
			names = nn;
			cap = ncap;
		}
		names[nnames] = strdup(de->d_name);
		if (!names[nnames]) {
			oom = true;
			break;
		}
		nnames++;
	}
	if (!oom)
		qsort(names, nnames, sizeof(*names), fs_name_cmp);
	rpcrdma_xdr_put_u32(e, oom ? FS_EIO : FS_OK);
	if (!oom) {
		/* how many fit (the encoder may move its buffer: no back-patching) */
		for (i = cookie; i < nnames && n < maxent; i++) {
			size_t nl = strlen(names[i]);
			size_t b = 4 + ((nl + 3) & ~(size_t)3) + 12;

			if (bytes + b > FS_LIST_MAX_BYTES)
				break;
			bytes += b;
			n++;
		}
		rpcrdma_xdr_put_u32(e, n);
		for (i = cookie; i < cookie + n; i++) {
			struct stat sb;
			uint32_t type = FS_TYPE_OTHER;
			uint64_t size = 0;

			if (fstatat(dirfd(dir), names[i], &sb, AT_SYMLINK_NOFOLLOW) == 0) {
				size = (uint64_t)sb.st_size;
				type = S_ISREG(sb.st_mode)   ? FS_TYPE_FILE
				       : S_ISDIR(sb.st_mode) ? FS_TYPE_DIR
				       : S_ISLNK(sb.st_mode) ? FS_TYPE_SYMLINK
							     : FS_TYPE_OTHER;
			}
			rpcrdma_xdr_put_string(e, names[i]);
			rpcrdma_xdr_put_u32(e, type);
			rpcrdma_xdr_put_u64(e, size);
		}
		eof = (uint64_t)cookie + n >= nnames;
		rpcrdma_xdr_put_bool(e, eof);
	}
	for (size_t k = 0; k < nnames; k++)
		free(names[k]);
	free(names);
	closedir(dir);
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}
