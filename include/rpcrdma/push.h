/* SPDX-License-Identifier: BSD-2-Clause */
/* librpcrdma public API: push mode (draft-talpey-rdma-commit-00 section 2).
 *
 * A server exposes a durable, file-backed region to ONE client connection;
 * the client writes into it with RDMA Write and makes it durable with RDMA
 * Commit (RDMAP opcodes 0xC/0xD). The client's call completes only once the
 * Commit Response said the data is durable (Status 0). No upper-layer code
 * runs on the server for the Write or the Commit: the server's RDMA
 * provider places the data and flushes it (msync) before answering.
 *
 * Commit is used only when both peers advertised RDMA_COMMIT in the
 * project's private-data extension block (docs/protocol.md) and the provider
 * can carry it: the soft iWARP provider (RDMAP 0xC/0xD), and "verbs" as
 * IBV_WR_FLUSH where the library was built against rdma-core >= 45 and the
 * device has FLUSH (Linux rxe since 6.2; not rdma-core 44 / Linux 6.1, not
 * siw). Where it cannot be used -- tcp://, a peer that did not advertise it
 * (Linux and every other implementation), a provider without Commit --
 * every function here answers -EOPNOTSUPP: nothing pretends durability.
 *
 * Two levels (a region says which it serves, in its flags):
 *  - persistence (RPCRDMA_PUSH_COMMIT): soft: msync of the file mapping;
 *    verbs: FLUSH with persistent placement, which the device grants only to
 *    memory it can persist (Linux rxe: persistent memory, e.g. a device-DAX
 *    mapping of an NVDIMM);
 *  - global visibility (RPCRDMA_PUSH_VISIBLE): verbs: FLUSH with global
 *    visibility placement: the bytes are in the server's memory (for a file
 *    mapping: its page cache, which outlives a killed server process but
 *    not a crash of its kernel); soft: carried as a persistent Commit.
 *
 * Server, inside a handler (the region belongs to the calling connection):
 *   struct rpcrdma_durable_map map;   rpcrdma_durable_map(path, size, &map);
 *   struct rpcrdma_mr_attr a;         rpcrdma_durable_mr_attr(&map, map.addr, size, 0, &a);
 *   struct rpcrdma_push_region reg;   uint64_t id;
 *   rpcrdma_req_push_expose(req, &a, unmap_cb, &map, &reg, &id);
 *   rpcrdma_xdr_put_push_region(rpcrdma_req_results(req), &reg);
 * Client:
 *   rpcrdma_xdr_get_push_region(rpcrdma_call_results(call), &reg);
 *   rpcrdma_push_write(clnt, &reg, 0, data, len, RPCRDMA_PUSH_COMMIT, &status);
 *
 * Lifetime: the region is valid until rpcrdma_server_push_revoke(), or until
 * its connection is lost (a client that reconnects must ask for a new
 * region); then the server's @released callback runs and the memory is no
 * longer referenced. A Write or Commit naming a revoked region, or a range
 * outside it, is a protection error: the server's provider terminates that
 * connection (RFC 5040 section 7; draft section 5.1 item 2) and the client
 * reconnects. */
#ifndef RPCRDMA_PUSH_H
#define RPCRDMA_PUSH_H

#include <stdint.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "rpcrdma/xdr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The handle a server returns to its client: STag, Tagged Offset of the
 * region's first byte, length, and the Commit levels the region serves.
 * XDR: uint32 stag, uint64 offset, uint64 length, uint32 flags (24 bytes). */
#define RPCRDMA_PUSH_REGION_DURABLE 1u /* RPCRDMA_PUSH_COMMIT: persistence */
#define RPCRDMA_PUSH_REGION_VISIBLE 2u /* RPCRDMA_PUSH_VISIBLE: visibility */
struct rpcrdma_push_region {
	uint32_t stag;
	uint64_t offset;
	uint64_t length;
	uint32_t flags;   /* RPCRDMA_PUSH_REGION_* */
};

RPCRDMA_API int rpcrdma_xdr_put_push_region(struct rpcrdma_xdr_enc *e,
					    const struct rpcrdma_push_region *r);
RPCRDMA_API int rpcrdma_xdr_get_push_region(struct rpcrdma_xdr_dec *d,
					    struct rpcrdma_push_region *r);

/* ---- server ---- */

/* 0 when the connection of @req can serve RDMA Commit; -EOPNOTSUPP (tcp://,
 * peer without Commit), -ENOTCONN. */
RPCRDMA_API int rpcrdma_req_push_capable(struct rpcrdma_req *req);
/* Exposes @attr to the client of @req's connection and fills @out ({STag,
 * Tagged Offset, length, levels}) and @id (for revoke). @attr->flags names
 * the Commit levels the caller accepts: RPCRDMA_MR_DURABLE (persistence; a
 * file mapping, see rpcrdma_durable_mr_attr) and/or RPCRDMA_MR_VISIBLE
 * (global visibility); the access is set to remote write. The region gets
 * every accepted level the provider and the memory allow: a provider whose
 * Commits always persist (soft) serves visibility through DURABLE; where
 * the memory cannot be persisted (verbs on rxe without persistent memory)
 * and VISIBLE was accepted, the region is VISIBLE only. @out->flags says
 * what it got. @released(@arg) runs once the region is deregistered
 * (revoke, disconnect, server destroy), on a library thread that must not
 * be blocked and from which the library must not be called; after it the
 * memory may be unmapped. Borrows @attr. -EOPNOTSUPP (see above, or no
 * accepted level is possible here), -EINVAL (neither level named), -ENOSPC
 * (64 regions per connection), -ENOTCONN. */
RPCRDMA_API int rpcrdma_req_push_expose(struct rpcrdma_req *req,
					const struct rpcrdma_mr_attr *attr,
					void (*released)(void *arg), void *arg,
					struct rpcrdma_push_region *out, uint64_t *id);
/* Revokes region @id now (its STag stops granting access). 0, -ENOENT
 * (already released), -EOPNOTSUPP. Any thread. */
RPCRDMA_API int rpcrdma_server_push_revoke(struct rpcrdma_server *s, uint64_t id);

/* ---- client ---- */

/* 0 when the client's current connection can do RDMA Commit, else
 * -EOPNOTSUPP (tcp://, peer or provider without Commit) or -ENOTCONN. */
RPCRDMA_API int rpcrdma_client_push_capable(struct rpcrdma_client *c);

#define RPCRDMA_PUSH_COMMIT 1u   /* RDMA Commit [off, off+len) after the Write,
				   for persistence (region DURABLE) */
#define RPCRDMA_PUSH_VISIBLE 2u  /* the same for global visibility only
				   (region VISIBLE); not with COMMIT */

/* RDMA Writes @len bytes of @buf at byte @off of region @r and, with
 * RPCRDMA_PUSH_COMMIT, RDMA Commits that range: returns 0 only once the
 * Commit Response said it is durable. Without the flag it returns once the
 * Write completed locally (sent: an RDMA Write is not acknowledged, so
 * neither placement nor durability is known; a later Commit tells both;
 * a protection error then ends the connection). Synchronous; any thread; @buf is
 * only read. Errors: -EOPNOTSUPP (no Commit on this connection; nothing
 * sent), -ERANGE (outside @r, checked locally), -EMSGSIZE (len > 2^31),
 * -EIO (Commit Status != 0 in *@commit_status: placed, not durable; the
 * connection stays), -EOPNOTSUPP also when @r does not serve the level
 * asked (nothing sent), -EACCES (the server refused the STag or range: the
 * connection was terminated and is being re-established), -ECONNRESET,
 * -ETIMEDOUT (30 s), -ENOTCONN. @commit_status may be NULL. */
RPCRDMA_API int rpcrdma_push_write(struct rpcrdma_client *c, const struct rpcrdma_push_region *r,
				   uint64_t off, const void *buf, size_t len, uint32_t flags,
				   uint32_t *commit_status);
/* RDMA Commit of [off, off+len) of @r alone (data written earlier). Same
 * results as rpcrdma_push_write with RPCRDMA_PUSH_COMMIT. */
RPCRDMA_API int rpcrdma_push_commit(struct rpcrdma_client *c, const struct rpcrdma_push_region *r,
				    uint64_t off, uint64_t len, uint32_t *commit_status);

#ifdef __cplusplus
}
#endif
#endif
