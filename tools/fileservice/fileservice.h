/* SPDX-License-Identifier: BSD-2-Clause */
/* The example file service of the librpcrdma tools: an ONC RPC (RFC 5531)
 * program over a directory, served by rpcrdma-server and used by
 * rpcrdma-demo, rpcrdma-bench and the tests. Header-only (every tool is its
 * own executable) and written against the public API only
 * (include/rpcrdma/rpc.h, xdr.h). Bulk data is DDP-eligible (RFC 8166
 * section 6, "Upper-Layer Binding Specifications"): READ's result data
 * travels as a Write chunk and WRITE's argument data as a Read chunk on an
 * RDMA transport (inline/writev on tcp://); LIST replies may exceed the
 * inline threshold (Long Reply: the client sets a reply hint).
 *
 * Program FS_PROG = 0x2f5a0001 (user-defined range 0x20000000-0x3fffffff,
 * RFC 5531 section 8.2), version FS_VERS = 1. XDR (RFC 4506):
 *
 *   typedef string fs_path<FS_PATH_MAX>;  relative to the export; no leading
 *                                         "/", no ".." component; "" or "."
 *                                         is the export itself (LIST only)
 *   enum fs_status { FS_OK = 0, ... };    Linux errno values, see below
 *
 *   0 NULL(void) -> void
 *   1 READ(fs_path, uint64 offset, uint32 count)
 *       -> fs_status; if FS_OK: bool eof; opaque data<> (DDP-eligible)
 *          count is capped at FS_MAX_IO (a short read, not an error)
 *   2 WRITE(fs_path, uint64 offset, uint32 flags, opaque data<> (DDP-eligible))
 *       -> fs_status; if FS_OK: uint32 count
 *          flags: FS_WRITE_CREATE (create if missing), FS_WRITE_TRUNC
 *          (truncate first), FS_WRITE_SYNC (fdatasync before replying)
 *   3 LIST(fs_path, uint32 cookie, uint32 max_entries)
 *       -> fs_status; if FS_OK: uint32 n; n x { string name<255>;
 *          uint32 type; uint64 size }; bool eof
 *          entries sorted by name; cookie = index of the first entry wanted;
 *          the next cookie is cookie + n. max_entries is capped at
 *          FS_LIST_MAX_ENTRIES and the reply at about FS_LIST_MAX_BYTES.
 *   4 COMMIT(fs_path) -> fs_status          (fsync of the file)
 *   5 PUSH_OPEN(fs_path, uint64 size) -> fs_status; if FS_OK:
 *          uint32 stag; uint64 offset; uint64 length; uint64 file_offset
 *          push-mode durable region for appends (draft-talpey-rdma-commit
 *          section 2, include/rpcrdma/push.h): the file (created if
 *          missing) is extended by @size zero bytes (1..FS_PUSH_MAX) at its
 *          end, that new range is mapped and exposed to the calling
 *          connection only, and the client RDMA Writes + RDMA Commits into
 *          it with rpcrdma_push_write() -- no server code runs for those.
 *          file_offset = where the region starts in the file. The region
 *          lives until the connection ends. FS_ENOTSUP when the connection
 *          cannot do RDMA Commit (tcp://, a peer without it).
 *   6 ECHO(opaque data<FS_MAX_IO>) -> opaque data<>   (NOT DDP-eligible:
 *          a diagnostic whose large arguments make a Long Call and whose
 *          large results make a Long Reply on RDMA)
 *
 * Safety of the server side: paths are resolved beneath the export with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) (symlinks that stay
 * inside are followed, those leading outside fail with EXDEV); without
 * openat2 each component is opened with O_NOFOLLOW (no symlinks at all).
 * Arguments that do not decode, or that leave bytes over, are GARBAGE_ARGS.
 * File errors are an fs_status in a successful RPC Reply, never a crash. */
#ifndef RPCRDMA_TOOLS_FILESERVICE_H
#define RPCRDMA_TOOLS_FILESERVICE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <sys/file.h>
#include <sys/mman.h>

#include "rpcrdma/push.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/xdr.h"

#define FS_PROG 0x2f5a0001u
#define FS_VERS 1u
#define FS_DEFAULT_PORT 20051

enum fs_proc {
	FS_NULL = 0,
	FS_READ = 1,
	FS_WRITE = 2,
	FS_LIST = 3,
	FS_COMMIT = 4,
	FS_PUSH_OPEN = 5,
	FS_ECHO = 6,
};

#define FS_PATH_MAX 1024u
#define FS_NAME_MAX 255u
#define FS_MAX_IO (8u * 1024 * 1024)
#define FS_LIST_MAX_ENTRIES 65536u
#define FS_LIST_MAX_BYTES (4u * 1024 * 1024)
/* XDR bytes of one LIST entry at most: name length + name + pad, type, size */
#define FS_LIST_ENTRY_MAX (4u + 256u + 4u + 8u)

#define FS_PUSH_MAX (64u * 1024 * 1024)

#define FS_WRITE_CREATE 1u
#define FS_WRITE_TRUNC 2u
#define FS_WRITE_SYNC 4u

enum fs_status {
	FS_OK = 0,
	FS_EPERM = 1,
	FS_ENOENT = 2,
	FS_EIO = 5,
	FS_EBADF = 9,
	FS_EACCES = 13,
	FS_EEXIST = 17,
	FS_EXDEV = 18,
	FS_ENOTDIR = 20,
	FS_EISDIR = 21,
	FS_EINVAL = 22,
	FS_EFBIG = 27,
	FS_ENOSPC = 28,
	FS_EROFS = 30,
	FS_ENAMETOOLONG = 36,
	FS_ELOOP = 40,
	FS_ENOTSUP = 95,
};

enum fs_ftype { FS_TYPE_FILE = 1, FS_TYPE_DIR = 2, FS_TYPE_SYMLINK = 3, FS_TYPE_OTHER = 4 };

static inline const char *fs_status_str(uint32_t st)
{
	switch (st) {
	case FS_OK: return "ok";
	case FS_EPERM: return "not permitted";
	case FS_ENOENT: return "no such file or directory";
	case FS_EIO: return "I/O error";
	case FS_EBADF: return "bad file";
	case FS_EACCES: return "access denied (path outside the export)";
	case FS_EEXIST: return "exists";
	case FS_EXDEV: return "path leads outside the export";
	case FS_ENOTDIR: return "not a directory";
	case FS_EISDIR: return "is a directory";
	case FS_EINVAL: return "invalid argument";
	case FS_EFBIG: return "file too large";
	case FS_ENOSPC: return "no space";
	case FS_EROFS: return "read-only";
	case FS_ENAMETOOLONG: return "name too long";
	case FS_ELOOP: return "symbolic link refused";
	case FS_ENOTSUP: return "not supported";
	default: return "unknown status";
	}
}

/* A positive errno from libc -> the wire status. */
static inline uint32_t fs_status_from_errno(int e)
{
	switch (e) {
	case EPERM: return FS_EPERM;
	case ENOENT: return FS_ENOENT;
	case EBADF: return FS_EBADF;
	case EACCES: return FS_EACCES;
	case EEXIST: return FS_EEXIST;
	case EXDEV: return FS_EXDEV;
	case ENOTDIR: return FS_ENOTDIR;
	case EISDIR: return FS_EISDIR;
	case EINVAL: return FS_EINVAL;
	case EFBIG: return FS_EFBIG;
	case ENOSPC: return FS_ENOSPC;
	case EROFS: return FS_EROFS;
	case ENAMETOOLONG: return FS_ENAMETOOLONG;
	case ELOOP: return FS_ELOOP;
	case EOPNOTSUPP: return FS_ENOTSUP;
	default: return FS_EIO;
	}
}

static inline uint64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ======================================================================
 * Server side
 * ====================================================================== */

struct fs_service {
	int rootfd;                 /* the export directory (O_DIRECTORY) */
	atomic_int openat2_state;   /* 0 unknown, 1 works, -1 unavailable */
	atomic_ulong calls[7];      /* per procedure, for the server's summary */
};

/* Opens @dir as the export. 0 or a negative errno. */
static inline int fs_service_init(struct fs_service *svc, const char *dir)
{
	memset(svc, 0, sizeof(*svc));
	svc->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (svc->rootfd < 0)
		return -errno;
	return 0;
}

static inline void fs_service_fini(struct fs_service *svc)
{
	if (svc->rootfd >= 0)
		close(svc->rootfd);
	svc->rootfd = -1;
}

/* Lexical check of a relative path: 0, or a positive fs_status. An empty
 * path or "." names the export itself (allowed only when @allow_root). */
static inline uint32_t fs_path_check(const char *path, bool allow_root)
{
	const char *p = path;
	bool only_dots = true;

	if (path[0] == '/')
		return FS_EACCES;
	if (strlen(path) >= FS_PATH_MAX)
		return FS_ENAMETOOLONG;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return FS_EACCES;
		if (n > FS_NAME_MAX)
			return FS_ENAMETOOLONG;
		if (n && !(n == 1 && p[0] == '.'))
			only_dots = false;
		p += n;
		if (*p == '/')
			p++;
	}
	if (only_dots && !allow_root)
		return FS_EISDIR;
	return 0;
}

/* Opens @path beneath the export. Returns an fd, or a negative errno. */
static inline int fs_open_beneath(struct fs_service *svc, const char *path, int flags,
				  mode_t mode)
{
	const char *rel = path[0] ? path : ".";
	int st = atomic_load(&svc->openat2_state);

	flags |= O_CLOEXEC;
	if (st >= 0) {
		struct open_how how;
		long fd;

		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)flags;
		how.mode = (flags & O_CREAT) ? mode : 0;
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
		fd = syscall(SYS_openat2, svc->rootfd, rel, &how, sizeof(how));
		if (fd >= 0) {
			atomic_store(&svc->openat2_state, 1);
			return (int)fd;
		}
		if (errno != ENOSYS && !(errno == EPERM && st == 0))
			return -errno;
		/* no openat2 (old kernel or a seccomp filter): fall back */
		atomic_store(&svc->openat2_state, -1);
	}
	/* Component walk, no symlink followed anywhere. */
	{
		char buf[FS_PATH_MAX];
		char *p = buf, *slash;
		int dfd = svc->rootfd, fd;

		if (strlen(rel) >= sizeof(buf))
			return -ENAMETOOLONG;
		strcpy(buf, rel);
		for (;;) {
			while (*p == '/')
				p++;
			slash = strchr(p, '/');
			if (!slash || slash[strspn(slash, "/")] == '\0') {
				if (slash)
					*slash = '\0';
				if (!*p)
					p = (char *)".";
				fd = openat(dfd, p, flags | O_NOFOLLOW, mode);
				fd = fd < 0 ? -errno : fd;
				break;
			}
			*slash = '\0';
			fd = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0) {
				struct stat sb;

				fd = -errno;
				/* O_NOFOLLOW|O_DIRECTORY on a symlink says ENOTDIR */
				if (fd == -ENOTDIR && fstatat(dfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
				    S_ISLNK(sb.st_mode))
					fd = -ELOOP;
				break;
			}
			if (dfd != svc->rootfd)
				close(dfd);
			dfd = fd;
			p = slash + 1;
		}
		if (dfd != svc->rootfd)
			close(dfd);
		return fd;
	}
}

/* Decodes an fs_path argument: 0, a positive fs_status for a path refused
 * lexically, or -1 for arguments that do not decode (GARBAGE_ARGS). */
static inline int fs_get_path(struct rpcrdma_xdr_dec *d, char *buf, bool allow_root)
{
	if (rpcrdma_xdr_get_string(d, buf, FS_PATH_MAX) < 0)
		return -1;
	return (int)fs_path_check(buf, allow_root);
}

static inline void fs_free_release(void *p) { free(p); }

static inline int fs_h_read(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	struct rpcrdma_xdr_enc *e = rpcrdma_req_results(req);
	char path[FS_PATH_MAX];
	uint64_t off;
	uint32_t count, st;
	int rc, fd;
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
	if (st == FS_OK && count) {
		buf = malloc(count);
		if (!buf) {
			close(fd);
			return RPCRDMA_SVC_SYSTEM_ERR;
		}
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
		if (buf)
			rpcrdma_req_set_release(req, fs_free_release, buf);
	} else {
		free(buf);
	}
	return rpcrdma_xdr_enc_error(e) ? RPCRDMA_SVC_SYSTEM_ERR : RPCRDMA_SVC_OK;
}

static inline int fs_h_write(struct rpcrdma_req *req, void *ctx)
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

static inline int fs_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static inline int fs_h_list(struct rpcrdma_req *req, void *ctx)
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

static inline int fs_h_commit(struct rpcrdma_req *req, void *ctx)
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

/* A region exposed by PUSH_OPEN: unmapped once the transport released it. */
struct fs_push_region {
	struct rpcrdma_durable_map map;
};

static inline void fs_push_released(void *arg)
{
	struct fs_push_region *g = (struct fs_push_region *)arg;

	(void)rpcrdma_durable_unmap(&g->map);
	free(g);
}

static inline int fs_h_push_open(struct rpcrdma_req *req, void *ctx)
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

/* NULL: no results; arguments (rpcrdma-ping -s pads them) are ignored.
 * Registered only to be counted in the server's summary. */
static inline int fs_h_null(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;

	(void)req;
	atomic_fetch_add(&svc->calls[FS_NULL], 1);
	return RPCRDMA_SVC_OK;
}

static inline int fs_h_echo(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	const void *p;
	uint32_t len;

	atomic_fetch_add(&svc->calls[FS_ECHO], 1);
	if (rpcrdma_xdr_get_opaque(d, FS_MAX_IO, &p, &len) || rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_opaque(rpcrdma_req_results(req), p, len) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
}

/* Registers every procedure of FS_PROG/FS_VERS on @srv (before start). */
static inline int fs_service_register(struct rpcrdma_server *srv, struct fs_service *svc)
{
	static const struct {
		uint32_t proc;
		rpcrdma_handler_fn fn;
	} t[] = {
		{FS_NULL, fs_h_null},
		{FS_READ, fs_h_read},     {FS_WRITE, fs_h_write},
		{FS_LIST, fs_h_list},     {FS_COMMIT, fs_h_commit},
		{FS_PUSH_OPEN, fs_h_push_open}, {FS_ECHO, fs_h_echo},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int rc = rpcrdma_server_register(srv, FS_PROG, FS_VERS, t[i].proc, t[i].fn, svc);

		if (rc)
			return rc;
	}
	return 0;
}

/* ======================================================================
 * Client side. Each returns a negative errno for an RPC failure (see
 * rpc.h: -EREMOTEIO when the server answered an RPC error), otherwise the
 * fs_status the server returned (0 = FS_OK).
 * ====================================================================== */

/* READ @count bytes at @off into @buf (the DDP sink): *@got bytes, *@eof. */
static inline int fs_read(struct rpcrdma_client *c, const char *path, uint64_t off, void *buf,
			  uint32_t count, uint32_t *got, bool *eof)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	struct rpcrdma_ddp_sink sink = {buf, count};
	uint32_t st = 0, len = 0;
	const void *p;
	bool b = false;
	int rc;

	rc = rpcrdma_call_create(c, FS_READ, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, count);
	rc = rpcrdma_xdr_enc_error(e);
	/* a zero-length sink is refused by some transports: no sink, no data */
	if (!rc && count)
		rc = rpcrdma_call_set_sinks(call, &sink, 1);
	/* the data comes in the Write chunk: the rest is small (no Reply
	 * chunk to register and invalidate) */
	if (count)
		rpcrdma_call_set_reply_hint(call, 64);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_u32(d, &st);
		if (!rc && st == FS_OK) {
			rc = rpcrdma_xdr_get_bool(d, &b);
			if (!rc)
				rc = rpcrdma_xdr_get_ddp(d, &p, &len);
			if (!rc && len > count)
				rc = -EBADMSG;
			if (!rc && len && p != buf)
				memcpy(buf, p, len);
		}
		if (!rc)
			rc = (int)st;
	}
	if (got)
		*got = len;
	if (eof)
		*eof = b;
	rpcrdma_call_destroy(call);
	return rc;
}

/* WRITE @len bytes of @data at @off (borrowed until the call completes). */
static inline int fs_write(struct rpcrdma_client *c, const char *path, uint64_t off,
			   uint32_t flags, const void *data, uint32_t len, uint32_t *written)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0, n = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_WRITE, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, off);
	rpcrdma_xdr_put_u32(e, flags);
	rpcrdma_xdr_put_ddp(e, data, len);
	rc = rpcrdma_xdr_enc_error(e);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_u32(d, &st);
		if (!rc && st == FS_OK)
			rc = rpcrdma_xdr_get_u32(d, &n);
		if (!rc)
			rc = (int)st;
	}
	if (written)
		*written = n;
	rpcrdma_call_destroy(call);
	return rc;
}

/* COMMIT (fsync) @path. */
static inline int fs_commit(struct rpcrdma_client *c, const char *path)
{
	struct rpcrdma_call *call;
	uint32_t st = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_COMMIT, &call);
	if (rc)
		return rc;
	rc = rpcrdma_xdr_put_string(rpcrdma_call_args(call), path);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &st);
	if (!rc)
		rc = (int)st;
	rpcrdma_call_destroy(call);
	return rc;
}

/* PUSH_OPEN: a push-mode region of @size bytes appended to @path; *@reg
 * and *@file_off (where it starts in the file) when FS_OK. Then
 * rpcrdma_push_write(c, reg, ..., RPCRDMA_PUSH_COMMIT, ...). */
static inline int fs_push_open(struct rpcrdma_client *c, const char *path, uint64_t size,
			       struct rpcrdma_push_region *reg, uint64_t *file_off)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0;
	int rc;

	rc = rpcrdma_call_create(c, FS_PUSH_OPEN, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u64(e, size);
	rc = rpcrdma_xdr_enc_error(e);
	rpcrdma_call_set_reply_hint(call, 64);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_u32(d, &st);
		if (!rc && st == FS_OK) {
			rc = rpcrdma_xdr_get_push_region(d, reg);
			if (!rc)
				rc = rpcrdma_xdr_get_u64(d, file_off);
		}
	}
	if (!rc)
		rc = (int)st;
	rpcrdma_call_destroy(call);
	return rc;
}

struct fs_dirent {
	char name[FS_NAME_MAX + 1];
	uint32_t type;
	uint64_t size;
};

/* One LIST call from @cookie, at most @max entries: @cb(arg, entry) for
 * each; *@n entries, *@eof. The reply hint covers @max entries. */
/* LIST with what the caller knows of the reply size: @min_reply is the
 * smallest Reply it expects (0: unknown). With reliable reply negotiated, a
 * known minimum above the inline threshold makes the transport provide a
 * Reply chunk (RFC 8166 Long Reply) instead of letting the server expose the
 * reply as a Read chunk (draft-cel-nfsv4-rpcrdma-reliable-reply 5.3.1). */
static inline int fs_list_range(struct rpcrdma_client *c, const char *path, uint32_t cookie,
				uint32_t max, size_t min_reply,
				void (*cb)(void *, const struct fs_dirent *), void *arg,
				uint32_t *n, bool *eof)
{
	struct rpcrdma_call *call;
	struct rpcrdma_xdr_enc *e;
	struct rpcrdma_xdr_dec *d;
	uint32_t st = 0, cnt = 0, i;
	bool b = false;
	size_t hint;
	int rc;

	rc = rpcrdma_call_create(c, FS_LIST, &call);
	if (rc)
		return rc;
	e = rpcrdma_call_args(call);
	rpcrdma_xdr_put_string(e, path);
	rpcrdma_xdr_put_u32(e, cookie);
	rpcrdma_xdr_put_u32(e, max);
	rc = rpcrdma_xdr_enc_error(e);
	hint = 64 + (size_t)(max < FS_LIST_MAX_ENTRIES ? max : FS_LIST_MAX_ENTRIES) *
			    FS_LIST_ENTRY_MAX;
	if (hint > FS_LIST_MAX_BYTES + 64)
		hint = FS_LIST_MAX_BYTES + 64;
	if (min_reply)
		rpcrdma_call_set_reply_range(call, min_reply < hint ? min_reply : hint, hint);
	else
		rpcrdma_call_set_reply_hint(call, hint);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc) {
		d = rpcrdma_call_results(call);
		rc = rpcrdma_xdr_get_u32(d, &st);
		if (!rc && st == FS_OK) {
			rc = rpcrdma_xdr_get_u32(d, &cnt);
			for (i = 0; !rc && i < cnt; i++) {
				struct fs_dirent de;

				rc = rpcrdma_xdr_get_string(d, de.name, sizeof(de.name));
				if (!rc)
					rc = rpcrdma_xdr_get_u32(d, &de.type);
				if (!rc)
					rc = rpcrdma_xdr_get_u64(d, &de.size);
				if (!rc && cb)
					cb(arg, &de);
			}
			if (!rc)
				rc = rpcrdma_xdr_get_bool(d, &b);
		}
		if (!rc)
			rc = (int)st;
	}
	if (n)
		*n = cnt;
	if (eof)
		*eof = b;
	rpcrdma_call_destroy(call);
	return rc;
}

static inline int fs_list(struct rpcrdma_client *c, const char *path, uint32_t cookie,
			  uint32_t max, void (*cb)(void *, const struct fs_dirent *), void *arg,
			  uint32_t *n, bool *eof)
{
	return fs_list_range(c, path, cookie, max, 0, cb, arg, n, eof);
}

/* ECHO @len bytes (inline arguments and results): *@back gets a malloc'd
 * copy of the answer (free it), *@backlen its length. */
static inline int fs_echo(struct rpcrdma_client *c, const void *data, uint32_t len, void **back,
			  uint32_t *backlen)
{
	struct rpcrdma_call *call;
	const void *p;
	uint32_t n = 0;
	int rc;

	*back = NULL;
	*backlen = 0;
	rc = rpcrdma_call_create(c, FS_ECHO, &call);
	if (rc)
		return rc;
	rc = rpcrdma_xdr_put_opaque(rpcrdma_call_args(call), data, len);
	rpcrdma_call_set_reply_hint(call, (size_t)len + 64);
	if (!rc)
		rc = rpcrdma_call_run(call);
	if (!rc)
		rc = rpcrdma_xdr_get_opaque(rpcrdma_call_results(call), FS_MAX_IO, &p, &n);
	if (!rc) {
		*back = malloc(n ? n : 1);
		if (!*back)
			rc = -ENOMEM;
		else
			memcpy(*back, p, n);
		*backlen = n;
	}
	rpcrdma_call_destroy(call);
	return rc;
}

/* A NULL call: 0 or a negative errno. @pad bytes of opaque argument (ignored
 * by servers; used by rpcrdma-ping -s) when non-zero. */
static inline int fs_null(struct rpcrdma_client *c, const void *pad, uint32_t padlen)
{
	struct rpcrdma_call *call;
	int rc;

	rc = rpcrdma_call_create(c, FS_NULL, &call);
	if (rc)
		return rc;
	if (padlen)
		rc = rpcrdma_xdr_put_fixed(rpcrdma_call_args(call), pad, padlen);
	if (!rc)
		rc = rpcrdma_call_run(call);
	rpcrdma_call_destroy(call);
	return rc;
}

#endif
