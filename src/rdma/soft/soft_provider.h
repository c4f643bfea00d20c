/* SPDX-License-Identifier: BSD-2-Clause */
/* The built-in software RDMA provider ("soft"): iWARP (RFC 5044 MPA,
 * RFC 5041 DDP, RFC 5040 RDMAP, draft-talpey-rdma-commit) over TCP in user
 * space. Declares its ops table (ops.c) for the registry in src/rdma/providers.c. */
#ifndef RR_SOFT_PROVIDER_H
#define RR_SOFT_PROVIDER_H

#include "rdma/provider.h"

extern const struct rr_provider_ops rr_soft_ops;

#endif
