/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-nfsd's export and file handles. A handle is the kernel's own
 * (name_to_handle_at, stable across server restarts and reboots on file
 * systems with persistent inode numbers), wrapped and signed:
 *
 *   nfs_fh3 (RFC 1813 section 2.6, at most 64 bytes):
 *     0      version (1)
 *     1      n: bytes of the kernel handle (at most 48)
 *     2..3   kernel handle type (big-endian)
 *     4..7   export id (low 32 bits of the export's fsid)
 *     8..    the kernel handle (n bytes)
 *     8+n    SipHash-2-4 of bytes 0..8+n-1 under the server's key (8 bytes)
 *
 * The MAC is the confinement of handles: the server only signs handles of
 * objects it reached from the export by single-component lookups that never
 * follow symbolic links and never leave the export's file system, so a client
 * cannot present a handle of an object outside the export (say /etc/shadow on
 * the same file system) or of another file system: those are BADHANDLE.
 * open_by_handle_at() (which needs CAP_DAC_READ_SEARCH) opens only within the
 * export's file system. The key lives in a file (nfsd_key_load) so handles
 * survive restarts. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd.h"
#include "siphash.h"

#define FH_VERSION 1u
#define FH_HDR 8u
#define FH_MAC 8u
#define FH_KMAX (NFS3_FHSIZE - FH_HDR - FH_MAC)

struct kfh {
	struct file_handle h;
	uint8_t bytes[128];
};

static void put_be16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_mac(const struct nfsd_export *x, uint8_t *p, size_t len)
{
	uint64_t m = nfsd_siphash24(x->key, p, len);

	for (unsigned i = 0; i < FH_MAC; i++)
		p[len + i] = (uint8_t)(m >> (56 - 8 * i));
}

int nfsd_fh_make(const struct nfsd_export *x, int dirfd, const char *name, uint8_t *out,
		 uint32_t *len)
{
	struct kfh k;
	int mount_id = -1;
	int flags = (name && *name) ? 0 : AT_EMPTY_PATH;

	memset(&k, 0, sizeof(k));
	k.h.handle_bytes = sizeof(k.bytes);
	if (name_to_handle_at(dirfd, (name && *name) ? name : "", &k.h, &mount_id, flags) < 0)
		return errno == EOVERFLOW ? -EOVERFLOW : -errno;
	if (mount_id != x->mount_id)
		return -EXDEV;
	if (k.h.handle_bytes > FH_KMAX || k.h.handle_type < 0 || k.h.handle_type > 0xffff)
		return -EOVERFLOW;
	out[0] = FH_VERSION;
	out[1] = (uint8_t)k.h.handle_bytes;
	put_be16(out + 2, (uint32_t)k.h.handle_type);
	put_be32(out + 4, (uint32_t)x->fsid);
	memcpy(out + FH_HDR, k.h.f_handle, k.h.handle_bytes);
	put_mac(x, out, FH_HDR + k.h.handle_bytes);
	*len = FH_HDR + k.h.handle_bytes + FH_MAC;
	return 0;
}

uint32_t nfsd_fh_open(const struct nfsd_export *x, const struct nfs3_fh *fh, int *fd,
		      struct stat *st)
{
	struct kfh k;
	uint8_t check[NFS3_FHSIZE];
	uint32_t n;
	int f;

	/* validate everything first: shape, export, signature */
	if (fh->len < FH_HDR + FH_MAC || fh->data[0] != FH_VERSION)
		return NFS3ERR_BADHANDLE;
	n = fh->data[1];
	if (n == 0 || n > FH_KMAX || fh->len != FH_HDR + n + FH_MAC)
		return NFS3ERR_BADHANDLE;
	if (get_be32(fh->data + 4) != (uint32_t)x->fsid)
		return NFS3ERR_STALE;  /* a handle of another export of ours: gone */
	memcpy(check, fh->data, FH_HDR + n);
	put_mac(x, check, FH_HDR + n);
	if (memcmp(check + FH_HDR + n, fh->data + FH_HDR + n, FH_MAC) != 0)
		return NFS3ERR_BADHANDLE;
	memset(&k, 0, sizeof(k));
	k.h.handle_bytes = n;
	k.h.handle_type = (int)((uint32_t)fh->data[2] << 8 | fh->data[3]);
	memcpy(k.h.f_handle, fh->data + FH_HDR, n);
	f = open_by_handle_at(x->mountfd, &k.h, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0)
		return errno == ESTALE || errno == ENOENT ? NFS3ERR_STALE
							 : nfs3_stat_from_errno(errno);
	if (fstat(f, st) < 0 || st->st_dev != x->dev) {
		close(f);
		return NFS3ERR_STALE;
	}
	*fd = f;
	return NFS3_OK;
}

int nfsd_export_open(struct nfsd_export *x, const char *path, const uint8_t key[NFSD_KEY_SIZE])
{
	struct stat st;
	struct kfh k;
	int rc, fd;

	memset(x, 0, sizeof(*x));
	x->rootfd = x->mountfd = -1;
	if (strlen(path) >= sizeof(x->path))
		return -ENAMETOOLONG;
	snprintf(x->path, sizeof(x->path), "%s", path);
	memcpy(x->key, key, NFSD_KEY_SIZE);
	x->rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (x->rootfd < 0)
		return -errno;
	x->mountfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (x->mountfd < 0 || fstat(x->rootfd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	x->dev = st.st_dev;
	x->ino = st.st_ino;
	/* the fsid clients see: the device, folded so 32 bits tell exports apart */
	x->fsid = (uint64_t)st.st_dev ^ ((uint64_t)st.st_dev >> 32);
	memset(&k, 0, sizeof(k));
	k.h.handle_bytes = sizeof(k.bytes);
	if (name_to_handle_at(x->rootfd, "", &k.h, &x->mount_id, AT_EMPTY_PATH) < 0) {
		rc = errno == EOPNOTSUPP ? -EOPNOTSUPP : -errno;
		goto fail;
	}
	rc = nfsd_fh_make(x, x->rootfd, "", x->root_fh, &x->root_fh_len);
	if (rc)
		goto fail;
	/* open_by_handle_at needs CAP_DAC_READ_SEARCH: find out now */
	fd = open_by_handle_at(x->mountfd, &k.h, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	nfsd_export_close(x);
	return rc;
}

void nfsd_export_close(struct nfsd_export *x)
{
	if (x->rootfd >= 0)
		close(x->rootfd);
	if (x->mountfd >= 0)
		close(x->mountfd);
	x->rootfd = x->mountfd = -1;
}

int nfsd_key_load(const char *file, uint8_t key[NFSD_KEY_SIZE], bool *persistent)
{
	uint8_t buf[NFSD_KEY_SIZE + 1];
	ssize_t n;
	int fd, oerr;

	*persistent = false;
	fd = file ? open(file, O_RDONLY | O_CLOEXEC) : -1;
	oerr = errno;
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
		if (n != NFSD_KEY_SIZE)
			return -EINVAL;
		memcpy(key, buf, NFSD_KEY_SIZE);
		*persistent = true;
		return 0;
	}
	if (getrandom(key, NFSD_KEY_SIZE, 0) != NFSD_KEY_SIZE)
		return -EIO;
	if (!file || oerr != ENOENT)
		return 0;
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 0;
	if (write(fd, key, NFSD_KEY_SIZE) == NFSD_KEY_SIZE && fsync(fd) == 0)
		*persistent = true;
	close(fd);
	if (!*persistent)
		unlink(file);
	return 0;
}
