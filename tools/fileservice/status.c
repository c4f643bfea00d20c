/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service's wire statuses (tools/fileservice/fileservice.h,
 * enum fs_status: Linux errno values): their text for messages, the mapping
 * from a libc errno, and the monotonic clock the tools time calls with. */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "fileservice.h"

const char *fs_status_str(uint32_t st)
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
uint32_t fs_status_from_errno(int e)
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

uint64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
