/* SPDX-License-Identifier: BSD-2-Clause */
/* errno -> nfsstat3 (RFC 1813 section 2.6) for rpcrdma-nfsd: the answer a
 * client gets for each failure of the local file system, as Linux nfsd maps
 * them (fs/nfsd/nfsproc.c nfserrno). Anything unlisted is NFS3ERR_IO. */
#include <errno.h>

#include "nfsd.h"

uint32_t nfs3_stat_from_errno(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return NFS3_OK;
	case EPERM: return NFS3ERR_PERM;
	case ENOENT: return NFS3ERR_NOENT;
	case EIO: return NFS3ERR_IO;
	case ENXIO: return NFS3ERR_NXIO;
	case EACCES: return NFS3ERR_ACCES;
	case EEXIST: return NFS3ERR_EXIST;
	case EXDEV: return NFS3ERR_XDEV;
	case ENODEV: return NFS3ERR_NODEV;
	case ENOTDIR: return NFS3ERR_NOTDIR;
	case EISDIR: return NFS3ERR_ISDIR;
	case EINVAL: return NFS3ERR_INVAL;
	case EFBIG: return NFS3ERR_FBIG;
	case ENOSPC: return NFS3ERR_NOSPC;
	case EROFS: return NFS3ERR_ROFS;
	case EMLINK: return NFS3ERR_MLINK;
	case ENAMETOOLONG: return NFS3ERR_NAMETOOLONG;
	case ENOTEMPTY: return NFS3ERR_NOTEMPTY;
	case EDQUOT: return NFS3ERR_DQUOT;
	case ESTALE: return NFS3ERR_STALE;
	case EOPNOTSUPP: return NFS3ERR_NOTSUPP;
	case ELOOP: return NFS3ERR_ACCES;      /* a symlink where none may be followed */
	case EBUSY: return NFS3ERR_ACCES;      /* a mount point, the export itself */
	case EBADF: return NFS3ERR_BADHANDLE;
	case EAGAIN: return NFS3ERR_JUKEBOX;
	case ENOMEM: return NFS3ERR_SERVERFAULT;
	case EOVERFLOW: return NFS3ERR_FBIG;
	case ETXTBSY: return NFS3ERR_ACCES;
	default: return NFS3ERR_IO;
	}
}
