/* SPDX-License-Identifier: BSD-2-Clause */
/* NFS version 3 (RFC 1813) and MOUNT version 3 (RFC 1813 appendix I) on the
 * wire, for rpcrdma-nfsd: protocol constants, the parsed argument
 * structures of every procedure, their decoders (through the public,
 * bounds-checked XDR cursor of include/rpcrdma/xdr.h) and the result
 * encoders the procedures use. Decoders validate the whole argument body
 * and leave nothing over (a trailing byte is GARBAGE_ARGS, as nfsd);
 * variable-length items (names, paths, handles, WRITE data) point into the
 * received message and stay valid while the request is being served.
 * DDP-eligible items (RFC 8267 section 3.3: WRITE data, SYMLINK data;
 * results: READ data, READLINK data) are decoded / encoded with
 * rpcrdma_xdr_get_ddp / rpcrdma_xdr_put_ddp so that an RDMA transport moves
 * them in Read and Write chunks. */
#ifndef RPCRDMA_NFSD_NFS3_XDR_H
#define RPCRDMA_NFSD_NFS3_XDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "rpcrdma/xdr.h"

#define NFS_PROG 100003u
#define NFS_V3 3u
#define MOUNT_PROG 100005u
#define MOUNT_V3 3u

#define NFS3_FHSIZE 64u
#define NFS3_NAME_MAX 255u       /* longest file name served (PATHCONF name_max) */
#define NFS3_NAME_WIRE_MAX 1024u /* a longer filename3 is GARBAGE_ARGS; 256..1024 NAMETOOLONG */
#define NFS3_PATH_MAX 4096u      /* longest symlink target (nfspath3) */
#define MNT_PATH_MAX 1024u       /* MNTPATHLEN */
#define MNT_NAME_MAX 255u        /* MNTNAMLEN */
#define NFS3_VERF_SIZE 8u

enum nfs3_proc {
	NFS3_NULL = 0, NFS3_GETATTR = 1, NFS3_SETATTR = 2, NFS3_LOOKUP = 3, NFS3_ACCESS = 4,
	NFS3_READLINK = 5, NFS3_READ = 6, NFS3_WRITE = 7, NFS3_CREATE = 8, NFS3_MKDIR = 9,
	NFS3_SYMLINK = 10, NFS3_MKNOD = 11, NFS3_REMOVE = 12, NFS3_RMDIR = 13, NFS3_RENAME = 14,
	NFS3_LINK = 15, NFS3_READDIR = 16, NFS3_READDIRPLUS = 17, NFS3_FSSTAT = 18,
	NFS3_FSINFO = 19, NFS3_PATHCONF = 20, NFS3_COMMIT = 21,
	NFS3_NPROC = 22
};

enum mnt3_proc {
	MNT3_NULL = 0, MNT3_MNT = 1, MNT3_DUMP = 2, MNT3_UMNT = 3, MNT3_UMNTALL = 4,
	MNT3_EXPORT = 5, MNT3_NPROC = 6
};

/* nfsstat3 (RFC 1813 section 2.6) */
enum nfsstat3 {
	NFS3_OK = 0, NFS3ERR_PERM = 1, NFS3ERR_NOENT = 2, NFS3ERR_IO = 5, NFS3ERR_NXIO = 6,
	NFS3ERR_ACCES = 13, NFS3ERR_EXIST = 17, NFS3ERR_XDEV = 18, NFS3ERR_NODEV = 19,
	NFS3ERR_NOTDIR = 20, NFS3ERR_ISDIR = 21, NFS3ERR_INVAL = 22, NFS3ERR_FBIG = 27,
	NFS3ERR_NOSPC = 28, NFS3ERR_ROFS = 30, NFS3ERR_MLINK = 31, NFS3ERR_NAMETOOLONG = 63,
	NFS3ERR_NOTEMPTY = 66, NFS3ERR_DQUOT = 69, NFS3ERR_STALE = 70, NFS3ERR_REMOTE = 71,
	NFS3ERR_BADHANDLE = 10001, NFS3ERR_NOT_SYNC = 10002, NFS3ERR_BAD_COOKIE = 10003,
	NFS3ERR_NOTSUPP = 10004, NFS3ERR_TOOSMALL = 10005, NFS3ERR_SERVERFAULT = 10006,
	NFS3ERR_BADTYPE = 10007, NFS3ERR_JUKEBOX = 10008
};

/* mountstat3 (RFC 1813 appendix I) */
enum mountstat3 {
	MNT3_OK = 0, MNT3ERR_PERM = 1, MNT3ERR_NOENT = 2, MNT3ERR_IO = 5, MNT3ERR_ACCES = 13,
	MNT3ERR_NOTDIR = 20, MNT3ERR_INVAL = 22, MNT3ERR_NAMETOOLONG = 63,
	MNT3ERR_NOTSUPP = 10004, MNT3ERR_SERVERFAULT = 10006
};

enum ftype3 { NF3REG = 1, NF3DIR = 2, NF3BLK = 3, NF3CHR = 4, NF3LNK = 5, NF3SOCK = 6, NF3FIFO = 7 };
enum stable_how { NFS3_UNSTABLE = 0, NFS3_DATA_SYNC = 1, NFS3_FILE_SYNC = 2 };
enum createmode3 { NFS3_UNCHECKED = 0, NFS3_GUARDED = 1, NFS3_EXCLUSIVE = 2 };
enum time_how { NFS3_DONT_CHANGE = 0, NFS3_SET_TO_SERVER_TIME = 1, NFS3_SET_TO_CLIENT_TIME = 2 };

#define NFS3_ACCESS_READ 0x01u
#define NFS3_ACCESS_LOOKUP 0x02u
#define NFS3_ACCESS_MODIFY 0x04u
#define NFS3_ACCESS_EXTEND 0x08u
#define NFS3_ACCESS_DELETE 0x10u
#define NFS3_ACCESS_EXECUTE 0x20u

#define NFS3_FSF_LINK 0x01u
#define NFS3_FSF_SYMLINK 0x02u
#define NFS3_FSF_HOMOGENEOUS 0x08u
#define NFS3_FSF_CANSETTIME 0x10u

/* XDR sizes used to bound replies */
#define NFS3_FATTR_SIZE 84u                      /* fattr3 */
#define NFS3_POST_OP_ATTR_SIZE (4u + NFS3_FATTR_SIZE)
#define NFS3_WCC_DATA_SIZE (4u + 24u + NFS3_POST_OP_ATTR_SIZE)
#define NFS3_POST_OP_FH_SIZE (4u + 4u + NFS3_FHSIZE)

/* ---- argument items ---- */

/* nfs_fh3: opaque data<NFS3_FHSIZE> (in place) */
struct nfs3_fh {
	const uint8_t *data;
	uint32_t len;
};

/* filename3 / nfspath3 / dirpath as received (in place, not NUL-terminated) */
struct nfs3_str {
	const char *p;
	uint32_t len;
};

struct nfs3_time {
	uint32_t sec, nsec;
};

/* sattr3 (RFC 1813 section 2.6 "sattr3") */
struct nfs3_sattr {
	bool set_mode, set_uid, set_gid, set_size;
	uint32_t mode, uid, gid;
	uint64_t size;
	uint32_t atime_how, mtime_how;     /* enum time_how */
	struct nfs3_time atime, mtime;
};

/* diropargs3: nfs_fh3 dir; filename3 name */
struct nfs3_diropargs {
	struct nfs3_fh dir;
	struct nfs3_str name;
};

/* ---- per-procedure arguments ---- */
struct nfs3_setattr_args {
	struct nfs3_fh obj;
	struct nfs3_sattr attr;
	bool guard_check;
	struct nfs3_time guard_ctime;
};
struct nfs3_access_args {
	struct nfs3_fh obj;
	uint32_t access;
};
struct nfs3_read_args {
	struct nfs3_fh file;
	uint64_t offset;
	uint32_t count;
};
struct nfs3_write_args {
	struct nfs3_fh file;
	uint64_t offset;
	uint32_t count;
	uint32_t stable;
	const uint8_t *data;               /* DDP-eligible (RFC 8267) */
	uint32_t data_len;
};
struct nfs3_create_args {
	struct nfs3_diropargs where;
	uint32_t mode;                     /* enum createmode3 */
	struct nfs3_sattr attr;            /* UNCHECKED / GUARDED */
	uint8_t verf[NFS3_VERF_SIZE];      /* EXCLUSIVE */
};
struct nfs3_mkdir_args {
	struct nfs3_diropargs where;
	struct nfs3_sattr attr;
};
struct nfs3_symlink_args {
	struct nfs3_diropargs where;
	struct nfs3_sattr attr;
	struct nfs3_str target;            /* DDP-eligible (RFC 8267) */
};
struct nfs3_mknod_args {
	struct nfs3_diropargs where;
	uint32_t type;                     /* enum ftype3 */
	struct nfs3_sattr attr;
	uint32_t major, minor;
};
struct nfs3_rename_args {
	struct nfs3_diropargs from, to;
};
struct nfs3_link_args {
	struct nfs3_fh file;
	struct nfs3_diropargs link;
};
struct nfs3_readdir_args {
	struct nfs3_fh dir;
	uint64_t cookie;
	uint8_t verf[NFS3_VERF_SIZE];
	uint32_t dircount;                 /* READDIRPLUS only */
	uint32_t count;                    /* READDIR count / READDIRPLUS maxcount */
};
struct nfs3_commit_args {
	struct nfs3_fh file;
	uint64_t offset;
	uint32_t count;
};

/* Every NFSv3 argument body, by procedure. */
union nfs3_args {
	struct nfs3_fh fh;                 /* GETATTR READLINK FSSTAT FSINFO PATHCONF */
	struct nfs3_setattr_args setattr;
	struct nfs3_diropargs dirop;       /* LOOKUP REMOVE RMDIR */
	struct nfs3_access_args access;
	struct nfs3_read_args read;
	struct nfs3_write_args write;
	struct nfs3_create_args create;
	struct nfs3_mkdir_args mkdir;
	struct nfs3_symlink_args symlink;
	struct nfs3_mknod_args mknod;
	struct nfs3_rename_args rename;
	struct nfs3_link_args link;
	struct nfs3_readdir_args readdir;  /* READDIR READDIRPLUS */
	struct nfs3_commit_args commit;
};

/* Decodes the arguments of NFSv3 procedure @proc (1..21) from @d into @a.
 * 0, -EBADMSG (malformed, or bytes left over: GARBAGE_ARGS), -EINVAL
 * (unknown procedure). The result points into @d's message. */
int nfs3_decode_args(struct rpcrdma_xdr_dec *d, uint32_t proc, union nfs3_args *a);

/* MOUNT dirpath<MNTPATHLEN> (MNT, UMNT). Same conventions. */
int mnt3_decode_dirpath(struct rpcrdma_xdr_dec *d, struct nfs3_str *path);

/* ---- results ---- */

/* The attributes of an object as NFSv3 sees them (fattr3, wcc_attr). */
struct nfs3_attr {
	uint32_t type, mode, nlink, uid, gid;
	uint64_t size, used;
	uint32_t rdev_major, rdev_minor;
	uint64_t fsid, fileid;
	struct nfs3_time atime, mtime, ctime;
};

/* fattr3 from a stat(2) result; @fsid is the export's. */
void nfs3_attr_from_stat(struct nfs3_attr *a, const struct stat *st, uint64_t fsid);

/* pre_op_attr / post_op_attr holders: @valid false encodes "no attributes". */
struct nfs3_wcc {
	bool pre_valid, post_valid;
	struct nfs3_attr pre, post;
};

/* fattr3: type mode nlink uid gid size used rdev(2) fsid fileid atime mtime ctime */
int nfs3_put_fattr(struct rpcrdma_xdr_enc *e, const struct nfs3_attr *a);
/* post_op_attr: bool attributes_follow; fattr3 */
int nfs3_put_post_op_attr(struct rpcrdma_xdr_enc *e, const struct nfs3_attr *a /* NULL: none */);
/* wcc_data: pre_op_attr (bool; size mtime ctime) post_op_attr */
int nfs3_put_wcc(struct rpcrdma_xdr_enc *e, const struct nfs3_wcc *w);
/* post_op_fh3: bool handle_follows; nfs_fh3 */
int nfs3_put_post_op_fh(struct rpcrdma_xdr_enc *e, const uint8_t *fh /* NULL: none */,
			uint32_t len);

/* A readable name for an nfsstat3 / procedure (logs, summaries). */
const char *nfs3_stat_name(uint32_t st);
const char *nfs3_proc_name(uint32_t proc);
const char *mnt3_proc_name(uint32_t proc);

#endif
