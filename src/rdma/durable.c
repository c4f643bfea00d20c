/* SPDX-License-Identifier: BSD-2-Clause */
/* Durable memory for registrations with RPCRDMA_MR_DURABLE
 * (draft-talpey-rdma-commit section 4, "durable memory regions", as a local
 * registration attribute): a file (or a device-DAX character device of
 * persistent memory) mapped MAP_SHARED, and the flush that RDMA Commit
 * performs before answering (msync MS_SYNC of the covering pages). */
#include "common/common.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"

/* A character device of the "dax" class (device-DAX persistent memory),
 * from sysfs; /dev/zero and the like are not durable memory. */
static bool is_devdax(const struct stat *st)
{
	char link[64], target[256];
	const char *base;
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u/subsystem", major(st->st_rdev),
		 minor(st->st_rdev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return false;
	target[n] = 0;
	base = strrchr(target, '/');
	return strcmp(base ? base + 1 : target, "dax") == 0;
}

RPCRDMA_API int rpcrdma_durable_map(const char *path, uint64_t size,
				    struct rpcrdma_durable_map *out)
{
	struct stat st;
	void *p;
	int fd, err;

	if (!path || !out || size == 0 || size > (uint64_t)SIZE_MAX ||
	    size > (uint64_t)INT64_MAX)
		return -EINVAL;
	out->addr = NULL;
	out->length = 0;
	out->fd = -1;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode) && !(S_ISCHR(st.st_mode) && is_devdax(&st))) {
		errno = EINVAL;
		goto fail;
	}
	/* a device-DAX node has its size; mmap refuses what it cannot map */
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)
		goto fail;
	p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	out->addr = p;
	out->length = size;
	out->fd = fd;
	return 0;
fail:
	err = -errno;
	close(fd);
	return err;
}

RPCRDMA_API int rpcrdma_durable_sync(void *addr, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t a, start, end;

	if (len == 0)
		return 0;
	if (!addr || pg <= 0)
		return -EINVAL;
	a = (uintptr_t)addr;
	if (len > (uint64_t)(UINTPTR_MAX - a))
		return -EINVAL;
	start = a & ~((uintptr_t)pg - 1);
	end = a + (uintptr_t)len;
	if (msync((void *)start, end - start, MS_SYNC) < 0)
		return errno == ENOMEM ? -EFAULT : -errno;
	return 0;
}

RPCRDMA_API int rpcrdma_durable_unmap(struct rpcrdma_durable_map *map)
{
	int rc = 0;

	if (!map)
		return -EINVAL;
	if (map->addr && munmap(map->addr, (size_t)map->length) < 0)
		rc = -errno;
	if (map->fd >= 0 && close(map->fd) < 0 && rc == 0)
		rc = -errno;
	map->addr = NULL;
	map->length = 0;
	map->fd = -1;
	return rc;
}

RPCRDMA_API int rpcrdma_durable_mr_attr(const struct rpcrdma_durable_map *map, void *addr,
					uint64_t len, uint32_t access,
					struct rpcrdma_mr_attr *attr)
{
	uintptr_t base, a;

	if (!map || !map->addr || !addr || !attr || len == 0)
		return -EINVAL;
	base = (uintptr_t)map->addr;
	a = (uintptr_t)addr;
	if (a < base || a - base > map->length || len > map->length - (a - base))
		return -ERANGE;
	memset(attr, 0, sizeof(*attr));
	attr->addr = addr;
	attr->length = len;
	attr->access = access;
	attr->flags = RPCRDMA_MR_DURABLE;
	attr->durable_fd = map->fd;
	attr->durable_offset = a - base;
	return 0;
}
