/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-nfsd's service: one exported directory served over NFSv3
 * (RFC 1813) on any librpcrdma transport, with MOUNT v3 beside it. This
 * header ties the small library of tools/nfsd/ together:
 *   export.c   the export, its signed file handles (name_to_handle_at /
 *              open_by_handle_at, SipHash MAC) and the handle key file;
 *   cred.c     per-thread file-system credentials of the caller (AUTH_SYS,
 *              root squash);
 *   errmap.c   errno -> nfsstat3;
 *   nfs3_*.c   the NFSv3 procedures (attributes, I/O, names, directories);
 *   mount3.c   MOUNT v3;
 *   rpcb.c     registration with the local rpcbind (RFC 1833);
 *   service.c  the servers and their handlers, counters, shutdown.
 *
 * Threading model: the NFS server runs its handlers on a pool of worker
 * threads (librpcrdma's rpcrdma_server_opts.threads). A handler decodes its
 * arguments, opens the objects it names by handle with the server's own
 * credentials (open_by_handle_at needs CAP_DAC_READ_SEARCH), then switches
 * its thread's file-system identity to the caller's (setfsuid, setfsgid and
 * the raw setgroups system call, which unlike glibc's wrapper changes only
 * the calling thread) for every access to the file system, so the kernel
 * checks permissions as for a local process of that user, and switches back
 * before it returns. Handlers share nothing but the counters (atomics) and
 * the MOUNT list (a mutex).
 *
 * On verbs:// the identity switch happens on threads of our own instead
 * (identity threads, service.c): the kernel's RDMA character devices
 * (ib_uverbs, rdma_ucm) refuse a write(2) from a thread whose credentials
 * are not the very ones the device was opened with ("changed security
 * contexts after opening file descriptor"), and a thread that switched its
 * fsuid and back has new credentials. The library's handler thread, which
 * posts the Reply through those devices, hands the procedure to an identity
 * thread and waits for it, so it never changes its own credentials. */
#ifndef RPCRDMA_NFSD_NFSD_H
#define RPCRDMA_NFSD_NFSD_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "nfs3_xdr.h"
#include "rpcrdma/rpc.h"

#define NFSD_KEY_SIZE 16
#define NFSD_MAX_IO (1024u * 1024u)      /* rtmax / wtmax */
#define NFSD_DTPREF 65536u
#define NFSD_MAX_MOUNTS 64
#define NFSD_ANON_ID 65534u

/* ---- the export and its file handles (export.c) ---- */
struct nfsd_export {
	char path[PATH_MAX];      /* as given to --export (the MOUNT path) */
	int rootfd;               /* O_PATH | O_DIRECTORY */
	int mountfd;              /* O_RDONLY | O_DIRECTORY: open_by_handle_at's mount_fd */
	dev_t dev;
	ino_t ino;
	int mount_id;
	uint64_t fsid;            /* fattr3 fsid */
	uint8_t key[NFSD_KEY_SIZE];
	uint8_t root_fh[NFS3_FHSIZE];
	uint32_t root_fh_len;
};

/* Opens @path as the export, handles signed with @key. 0, or a negative
 * errno: -ENOTDIR, -EPERM (no CAP_DAC_READ_SEARCH: open_by_handle_at
 * refused), -EOPNOTSUPP (the file system has no exportable handles), or
 * what open(2) says. */
int nfsd_export_open(struct nfsd_export *x, const char *path, const uint8_t key[NFSD_KEY_SIZE]);
void nfsd_export_close(struct nfsd_export *x);

/* The handle of @name in @dirfd (an empty @name: @dirfd itself), in @out
 * (NFS3_FHSIZE bytes). 0, -EXDEV (another file system mounted inside the
 * export), -EOVERFLOW (the kernel's handle does not fit), or -errno. Does
 * not follow a symbolic link @name. */
int nfsd_fh_make(const struct nfsd_export *x, int dirfd, const char *name, uint8_t *out,
		 uint32_t *len);

/* Opens the object of handle @fh (O_PATH, not following symlinks) into
 * *@fd and stats it into *@st. Returns an nfsstat3: NFS3_OK, BADHANDLE
 * (malformed, or not signed with this export's key), STALE (the object no
 * longer exists, or is not on the export's file system). On NFS3_OK the
 * caller owns *@fd. */
uint32_t nfsd_fh_open(const struct nfsd_export *x, const struct nfs3_fh *fh, int *fd,
		      struct stat *st);

/* The handle key: read from @file, or created there (random, mode 0600) if
 * missing. *@persistent tells whether it is on disk (handles survive a
 * restart); when the file cannot be read or written, a random key for this
 * run only (0 still, *@persistent false). -errno only for a file that
 * exists but is not a valid key. */
int nfsd_key_load(const char *file, uint8_t key[NFSD_KEY_SIZE], bool *persistent);

/* ---- credentials (cred.c) ---- */
struct nfsd_cred {
	uint32_t uid, gid, ngroups;
	uint32_t groups[RPCRDMA_AUTHSYS_MAXGIDS];
};

/* Who a request acts as: AUTH_SYS uid/gid/gids, root mapped to the
 * anonymous ids when @root_squash; AUTH_NONE is anonymous. */
void nfsd_cred_of(const struct rpcrdma_req *req, bool root_squash, uint32_t anon_uid,
		  uint32_t anon_gid, struct nfsd_cred *out);
/* Switches the calling thread's file-system identity to @c / back to the
 * server's own (root). 0 or -errno. */
int nfsd_cred_enter(const struct nfsd_cred *c);
void nfsd_cred_leave(void);

/* ---- errno -> nfsstat3 (errmap.c) ---- */
uint32_t nfs3_stat_from_errno(int err);   /* positive or negative errno */

/* ---- the service (service.c) ---- */
struct nfsd_opts {
	const char *export_dir;
	const char *url;            /* NFS listen URL: rdma://, verbs:// or tcp:// */
	const char *mount_url;      /* MOUNT listen URL (tcp://) */
	bool root_squash;
	uint32_t anon_uid, anon_gid;
	unsigned threads;
	unsigned drc_entries;
	bool read_only;
	bool identity_threads;      /* run procedures on identity threads (verbs://) */
	const uint8_t *key;         /* NFSD_KEY_SIZE bytes */
	const uint8_t *write_verf;  /* NFS3_VERF_SIZE bytes: changes with every start */
};

struct nfsd_job;

struct nfsd_mount_entry {
	char host[MNT_NAME_MAX + 1];
	char path[MNT_PATH_MAX + 1];
};

struct nfsd {
	struct nfsd_opts opts;
	struct nfsd_export exp;
	uint8_t write_verf[NFS3_VERF_SIZE];
	struct rpcrdma_server *nfs_srv, *mnt_srv;
	atomic_ulong nfs_calls[NFS3_NPROC];
	atomic_ulong nfs_errors[NFS3_NPROC];     /* replies with a status other than NFS3_OK */
	atomic_ulong mnt_calls[MNT3_NPROC];
	atomic_ulong garbage;
	pthread_mutex_t mlock;
	unsigned nmounts;
	struct nfsd_mount_entry mounts[NFSD_MAX_MOUNTS];
	/* identity threads (verbs://): procedures queued by the handlers */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct nfsd_job *qhead, **qtail;
	bool qstop;
	unsigned nid;
	pthread_t *idthreads;
};

/* Opens the export and creates (not yet starts) both servers. 0 or -errno
 * (the export as nfsd_export_open; the servers as rpcrdma_server_create).
 * Borrows @o's strings and buffers for the life of @s. */
int nfsd_create(struct nfsd *s, const struct nfsd_opts *o);
int nfsd_start(struct nfsd *s);
/* The NFS and MOUNT ports actually bound. */
int nfsd_nfs_port(const struct nfsd *s);
int nfsd_mount_port(const struct nfsd *s);
/* Stops serving and frees; idempotent. */
void nfsd_destroy(struct nfsd *s);
/* Prints the procedures served (and the DRC's counters) to @f. */
void nfsd_print_summary(struct nfsd *s, FILE *f);

/* ---- procedures ---- */

/* One NFS request being served. */
struct nfs3_call {
	struct nfsd *s;
	struct rpcrdma_req *req;
	struct rpcrdma_xdr_enc *res;
	struct nfsd_cred cred;
	bool as_caller;              /* the thread currently has the caller's identity */
};

typedef int (*nfs3_proc_fn)(struct nfs3_call *c, union nfs3_args *a);

/* Opens the object of @fh as nfsd_fh_open (with the server's identity, then
 * back to the caller's). NFS3_OK or the status to answer. */
uint32_t nfs3_fh_get(struct nfs3_call *c, const struct nfs3_fh *fh, int *fd, struct stat *st);
/* Opens @fd (an O_PATH descriptor of @st) for I/O with @flags as the
 * caller; where the kernel says EACCES but NFS lets the owner in (NFS
 * clients check permissions at open time, so the owner may still read or
 * write a file whose mode no longer allows it, as nfsd's owner override),
 * opens it with the server's identity. The new descriptor, or -errno. */
int nfs3_reopen(struct nfs3_call *c, int fd, const struct stat *st, int flags,
		bool owner_override);
/* "/proc/self/fd/N" for @fd. */
void nfs3_fd_path(int fd, char *buf, size_t cap);
/* Leaves / re-enters the caller's identity inside a procedure. */
void nfs3_as_server(struct nfs3_call *c);
void nfs3_as_caller(struct nfs3_call *c);
/* Validates a filename3: NFS3_OK and the NUL-terminated copy in @out
 * (NFS3_NAME_MAX + 1 bytes), NAMETOOLONG, or ACCES for an empty name or one
 * with '/' or NUL (a path, not a name: no way out of the directory). */
uint32_t nfs3_name_check(const struct nfs3_str *n, char *out);
/* post-op attributes of @fd (false when fstat fails). */
bool nfs3_stat_attr(struct nfs3_call *c, int fd, struct nfs3_attr *a);
/* Puts the failure of a procedure whose error arm is just post_op_attr. */
int nfs3_put_status_attr(struct nfs3_call *c, uint32_t st, int fd);
/* Puts a failure whose error arm is wcc_data. */
int nfs3_put_status_wcc(struct nfs3_call *c, uint32_t st, const struct nfs3_wcc *w);
/* Pre-op / post-op halves of wcc_data from @fd. */
void nfs3_wcc_pre(struct nfs3_call *c, int fd, struct nfs3_wcc *w);
void nfs3_wcc_post(struct nfs3_call *c, int fd, struct nfs3_wcc *w);
/* Applies sattr3 to the object @fd (as the caller). NFS3_OK or the error. */
uint32_t nfs3_apply_sattr(struct nfs3_call *c, int fd, const struct stat *st,
			  const struct nfs3_sattr *sa);

/* nfs3_attr.c: GETATTR SETATTR LOOKUP ACCESS READLINK FSSTAT FSINFO PATHCONF */
int nfs3_getattr(struct nfs3_call *c, union nfs3_args *a);
int nfs3_setattr(struct nfs3_call *c, union nfs3_args *a);
int nfs3_lookup(struct nfs3_call *c, union nfs3_args *a);
int nfs3_access(struct nfs3_call *c, union nfs3_args *a);
int nfs3_readlink(struct nfs3_call *c, union nfs3_args *a);
int nfs3_fsstat(struct nfs3_call *c, union nfs3_args *a);
int nfs3_fsinfo(struct nfs3_call *c, union nfs3_args *a);
int nfs3_pathconf(struct nfs3_call *c, union nfs3_args *a);
/* nfs3_io.c: READ WRITE COMMIT */
int nfs3_read(struct nfs3_call *c, union nfs3_args *a);
int nfs3_write(struct nfs3_call *c, union nfs3_args *a);
int nfs3_commit(struct nfs3_call *c, union nfs3_args *a);
/* nfs3_names.c: CREATE MKDIR SYMLINK MKNOD REMOVE RMDIR RENAME LINK */
int nfs3_create(struct nfs3_call *c, union nfs3_args *a);
int nfs3_mkdir(struct nfs3_call *c, union nfs3_args *a);
int nfs3_symlink(struct nfs3_call *c, union nfs3_args *a);
int nfs3_mknod(struct nfs3_call *c, union nfs3_args *a);
int nfs3_remove(struct nfs3_call *c, union nfs3_args *a);
int nfs3_rmdir(struct nfs3_call *c, union nfs3_args *a);
int nfs3_rename(struct nfs3_call *c, union nfs3_args *a);
int nfs3_link(struct nfs3_call *c, union nfs3_args *a);
/* nfs3_dir.c: READDIR READDIRPLUS */
int nfs3_readdir(struct nfs3_call *c, union nfs3_args *a);
int nfs3_readdirplus(struct nfs3_call *c, union nfs3_args *a);

/* mount3.c: registers MOUNT v3's procedures on @srv. */
int mnt3_register(struct nfsd *s, struct rpcrdma_server *srv);

/* ---- rpcbind (rpcb.c) ---- */
/* Registers (@set) or unregisters program @prog version @vers, netid
 * @netid ("tcp", "rdma") at @port with the local rpcbind through its
 * AF_LOCAL socket @sock (NULL: /run/rpcbind.sock). 0, -ENOENT / -ECONNREFUSED
 * (no rpcbind), -EACCES (rpcbind said no), -EBADMSG (undecodable reply),
 * -ETIMEDOUT. */
int nfsd_rpcb(const char *sock, bool set, uint32_t prog, uint32_t vers, const char *netid,
	      int port);

#endif
