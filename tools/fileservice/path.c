/* SPDX-License-Identifier: BSD-2-Clause */
/* Paths of the file service, server side: the lexical check of a relative
 * path (no leading "/", no ".." component, names and length bounded), its
 * decoding from a call's arguments, and opening it beneath the export with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), or where openat2 is
 * missing a component walk that follows no symlink (O_NOFOLLOW). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileservice.h"
#include "service_int.h"

/* Lexical check of a relative path: 0, or a positive fs_status. An empty
 * path or "." names the export itself (allowed only when @allow_root). */
uint32_t fs_path_check(const char *path, bool allow_root)
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
int fs_open_beneath(struct fs_service *svc, const char *path, int flags,
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
int fs_get_path(struct rpcrdma_xdr_dec *d, char *buf, bool allow_root)
{
	if (rpcrdma_xdr_get_string(d, buf, FS_PATH_MAX) < 0)
		return -1;
	return (int)fs_path_check(buf, allow_root);
}
