/* SPDX-License-Identifier: BSD-2-Clause */
/* Inside the file service library, server side: the procedure handlers
 * that service.c registers (one file per job: read_write.c, list.c,
 * push.c, service.c) and the path helpers of path.c they share. Not for
 * the tools: they use fileservice.h. */
#ifndef RPCRDMA_TOOLS_FILESERVICE_SERVICE_INT_H
#define RPCRDMA_TOOLS_FILESERVICE_SERVICE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fileservice.h"

/* Lexical check of a relative path: 0, or a positive fs_status. An empty
 * path or "." names the export itself (allowed only when @allow_root). */
uint32_t fs_path_check(const char *path, bool allow_root);
/* Opens @path beneath the export. Returns an fd, or a negative errno. */
int fs_open_beneath(struct fs_service *svc, const char *path, int flags, mode_t mode);
/* Decodes an fs_path argument into @buf (FS_PATH_MAX bytes): 0, a positive
 * fs_status for a path refused lexically, or -1 for arguments that do not
 * decode (GARBAGE_ARGS). */
int fs_get_path(struct rpcrdma_xdr_dec *d, char *buf, bool allow_root);

/* The procedures (rpcrdma_handler_fn; @ctx: the struct fs_service). */
int fs_h_null(struct rpcrdma_req *req, void *ctx);
int fs_h_read(struct rpcrdma_req *req, void *ctx);
int fs_h_write(struct rpcrdma_req *req, void *ctx);
int fs_h_list(struct rpcrdma_req *req, void *ctx);
int fs_h_commit(struct rpcrdma_req *req, void *ctx);
int fs_h_push_open(struct rpcrdma_req *req, void *ctx);
int fs_h_echo(struct rpcrdma_req *req, void *ctx);

#endif
