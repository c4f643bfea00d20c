/* SPDX-License-Identifier: BSD-2-Clause */
/* The tcp:// transport class (URL scheme "tcp"): ONC RPC over TCP with
 * record marking (RFC 5531 section 11), the client role of tcp_client.c and
 * the server role of tcp_server.c; the registry (transport/registry.c)
 * lists it. */
#include "transport/tcp/tcp_client.h"
#include "transport/tcp/tcp_server.h"

const struct rr_xprt_class rr_xprt_tcp_class = {
	.scheme = "tcp",
	.client = &rr_tcp_client_ops,
	.server = &rr_tcp_server_ops,
};
