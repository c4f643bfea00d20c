/* SPDX-License-Identifier: BSD-2-Clause */
/* The example file service of the librpcrdma tools: an ONC RPC (RFC 5531)
 * program over a directory, served by rpcrdma-server and used by
 * rpcrdma-demo, rpcrdma-bench and the tests. A small static library,
 * rr_fileservice: this header, the code in the .c files of
 * tools/fileservice/ (one per job), written against the public API only
 * (include/rpcrdma/rpc.h, xdr.h, push.h); whoever links it also links
 * librpcrdma. Bulk data is DDP-eligible (RFC 8166
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

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpcrdma/env.h"
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

/* The text of a wire status, for messages. */
const char *fs_status_str(uint32_t st);
/* A positive errno from libc -> the wire status. */
uint32_t fs_status_from_errno(int e);
/* CLOCK_MONOTONIC in nanoseconds (the tools time their calls with it). */
uint64_t fs_now_ns(void);

/* ======================================================================
 * Server side (tools/fileservice/service.c, path.c, read_write.c, list.c,
 * push.c)
 * ====================================================================== */

struct fs_service {
	int rootfd;                 /* the export directory (O_DIRECTORY) */
	/* READ's data buffers come from here (fs_service_init: the process
	 * defaults; a test may set its own before registering) */
	const struct rpcrdma_env *env;
	atomic_int openat2_state;   /* 0 unknown, 1 works, -1 unavailable */
	atomic_ulong calls[7];      /* per procedure, for the server's summary */
};

/* Opens @dir as the export. 0 or a negative errno. */
int fs_service_init(struct fs_service *svc, const char *dir);
/* Closes the export (the service must no longer be registered on a
 * running server). */
void fs_service_fini(struct fs_service *svc);
/* Registers every procedure of FS_PROG/FS_VERS on @srv (before start).
 * Borrows @svc for as long as @srv runs. 0 or a negative errno. */
int fs_service_register(struct rpcrdma_server *srv, struct fs_service *svc);

/* ======================================================================
 * Client side (tools/fileservice/client.c). Each returns a negative errno
 * for an RPC failure (see rpc.h: -EREMOTEIO when the server answered an
 * RPC error), otherwise the fs_status the server returned (0 = FS_OK).
 * ====================================================================== */

/* READ @count bytes at @off into @buf (the DDP sink): *@got bytes, *@eof. */
int fs_read(struct rpcrdma_client *c, const char *path, uint64_t off, void *buf,
	    uint32_t count, uint32_t *got, bool *eof);
/* WRITE @len bytes of @data at @off (borrowed until the call completes). */
int fs_write(struct rpcrdma_client *c, const char *path, uint64_t off, uint32_t flags,
	     const void *data, uint32_t len, uint32_t *written);
/* COMMIT (fsync) @path. */
int fs_commit(struct rpcrdma_client *c, const char *path);
/* PUSH_OPEN: a push-mode region of @size bytes appended to @path; *@reg
 * and *@file_off (where it starts in the file) when FS_OK. Then
 * rpcrdma_push_write(c, reg, ..., RPCRDMA_PUSH_COMMIT, ...). */
int fs_push_open(struct rpcrdma_client *c, const char *path, uint64_t size,
		 struct rpcrdma_push_region *reg, uint64_t *file_off);

struct fs_dirent {
	char name[FS_NAME_MAX + 1];
	uint32_t type;
	uint64_t size;
};

/* One LIST call from @cookie, at most @max entries: @cb(arg, entry) for
 * each; *@n entries, *@eof. The reply hint covers @max entries. */
int fs_list(struct rpcrdma_client *c, const char *path, uint32_t cookie, uint32_t max,
	    void (*cb)(void *, const struct fs_dirent *), void *arg, uint32_t *n, bool *eof);
/* fs_list with what the caller knows of the reply size: @min_reply is the
 * smallest Reply it expects (0: unknown). With reliable reply negotiated, a
 * known minimum above the inline threshold makes the transport provide a
 * Reply chunk (RFC 8166 Long Reply) instead of letting the server expose the
 * reply as a Read chunk (draft-cel-nfsv4-rpcrdma-reliable-reply 5.3.1). */
int fs_list_range(struct rpcrdma_client *c, const char *path, uint32_t cookie, uint32_t max,
		  size_t min_reply, void (*cb)(void *, const struct fs_dirent *), void *arg,
		  uint32_t *n, bool *eof);
/* ECHO @len bytes (inline arguments and results): *@back gets a malloc'd
 * copy of the answer (free it), *@backlen its length. */
int fs_echo(struct rpcrdma_client *c, const void *data, uint32_t len, void **back,
	    uint32_t *backlen);
/* A NULL call: 0 or a negative errno. @pad bytes of opaque argument (ignored
 * by servers; used by rpcrdma-ping -s) when non-zero. */
int fs_null(struct rpcrdma_client *c, const void *pad, uint32_t padlen);

#endif
