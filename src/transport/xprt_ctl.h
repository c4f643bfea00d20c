/* SPDX-License-Identifier: BSD-2-Clause */
/* Optional transport controls (transport/xprt.h, the ctl ops): what the
 * public counters (include/rpcrdma/stats.h) and push mode
 * (include/rpcrdma/push.h, draft-talpey-rdma-commit section 2) ask of a
 * transport. A transport without the ctl op, or that does not know an
 * operation, answers -EOPNOTSUPP (tcp:// has neither counters of RDMA
 * message forms nor RDMA Commit). Arguments are borrowed for the call. The
 * RPC layer routes them with rpc/ctl.h. */
#ifndef RR_TRANSPORT_XPRT_CTL_H
#define RR_TRANSPORT_XPRT_CTL_H

#include "rpcrdma/push.h"
#include "rpcrdma/stats.h"

enum rr_xprt_ctl_op {
	/* client ctl / server ctl with req == NULL: arg = struct rpcrdma_xprt_stats * */
	RR_CTL_STATS = 1,
	/* client: arg NULL; 0 when the connection can do RDMA Commit.
	 * server (req set): the same for req's connection. */
	RR_CTL_COMMIT_OK = 2,
	/* client: arg = struct rr_ctl_push * */
	RR_CTL_PUSH = 3,
	/* server, req set: arg = struct rr_ctl_expose * */
	RR_CTL_EXPOSE = 4,
	/* server, req NULL: arg = uint64_t * (region id) */
	RR_CTL_REVOKE = 5,
	/* server, req set: arg = struct sockaddr_storage *, the address of the
	 * peer that sent req (the duplicate request cache keys on its host) */
	RR_CTL_PEER_ADDR = 6,
};

struct rr_ctl_push {
	const void *buf;
	uint32_t len;
	bool commit;
	bool visible;             /* the Commit is for global visibility only */
	uint32_t stag;
	uint64_t offset;          /* Tagged Offset of the first byte written */
	uint64_t commit_offset;   /* Commit range */
	uint32_t commit_len;
	uint32_t timeout_ms;
	uint32_t commit_status;   /* out */
};

struct rr_ctl_expose {
	const struct rpcrdma_mr_attr *attr;
	void (*released)(void *arg);
	void *arg;
	uint32_t stag;    /* out */
	uint64_t to;      /* out: Tagged Offset of attr->addr */
	uint64_t id;      /* out */
	uint32_t levels;  /* out: RPCRDMA_PUSH_REGION_* */
};

#endif
