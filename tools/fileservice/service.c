/* SPDX-License-Identifier: BSD-2-Clause */
/* The file service as a whole, server side: the export opened and closed,
 * the NULL and ECHO procedures (ECHO: not DDP-eligible, so large arguments
 * and results make a Long Call and a Long Reply on RDMA), and every
 * procedure of FS_PROG/FS_VERS registered on a librpcrdma server. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fileservice.h"
#include "service_int.h"

/* Opens @dir as the export. 0 or a negative errno. */
int fs_service_init(struct fs_service *svc, const char *dir)
{
	memset(svc, 0, sizeof(*svc));
	svc->env = rpcrdma_env_default();
	svc->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (svc->rootfd < 0)
		return -errno;
	return 0;
}

void fs_service_fini(struct fs_service *svc)
{
	if (svc->rootfd >= 0)
		close(svc->rootfd);
	svc->rootfd = -1;
}

/* NULL: no results; arguments (rpcrdma-ping -s pads them) are ignored.
 * Registered only to be counted in the server's summary. */
int fs_h_null(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;

	(void)req;
	atomic_fetch_add(&svc->calls[FS_NULL], 1);
	return RPCRDMA_SVC_OK;
}

int fs_h_echo(struct rpcrdma_req *req, void *ctx)
{
	struct fs_service *svc = ctx;
	struct rpcrdma_xdr_dec *d = rpcrdma_req_args(req);
	const void *p;
	uint32_t len;

	atomic_fetch_add(&svc->calls[FS_ECHO], 1);
	if (rpcrdma_xdr_get_opaque(d, FS_MAX_IO, &p, &len) || rpcrdma_xdr_dec_remaining(d))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	return rpcrdma_xdr_put_opaque(rpcrdma_req_results(req), p, len) ? RPCRDMA_SVC_SYSTEM_ERR
									 : RPCRDMA_SVC_OK;
}

/* Registers every procedure of FS_PROG/FS_VERS on @srv (before start). */
int fs_service_register(struct rpcrdma_server *srv, struct fs_service *svc)
{
	static const struct {
		uint32_t proc;
		rpcrdma_handler_fn fn;
	} t[] = {
		{FS_NULL, fs_h_null},
		{FS_READ, fs_h_read},     {FS_WRITE, fs_h_write},
		{FS_LIST, fs_h_list},     {FS_COMMIT, fs_h_commit},
		{FS_PUSH_OPEN, fs_h_push_open}, {FS_ECHO, fs_h_echo},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int rc = rpcrdma_server_register(srv, FS_PROG, FS_VERS, t[i].proc, t[i].fn, svc);

		if (rc)
			return rc;
	}
	return 0;
}
