/* SPDX-License-Identifier: BSD-2-Clause */
/* The server role of tcp:// (tcp_server.c, RFC 5531 record marking): its
 * ops for the transport class (tcp.c). */
#ifndef RR_TRANSPORT_TCP_SERVER_H
#define RR_TRANSPORT_TCP_SERVER_H

#include "transport/xprt.h"

extern const struct rr_xprt_server_ops rr_tcp_server_ops;

#endif
