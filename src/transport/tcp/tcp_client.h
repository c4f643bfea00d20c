/* SPDX-License-Identifier: BSD-2-Clause */
/* The client role of tcp:// (tcp_client.c, RFC 5531 record marking): its
 * ops for the transport class (tcp.c), and its test hooks. A hook lets a
 * test stop a thread at a point of the client's reconnect/retransmit logic
 * and force an interleaving that would otherwise need a lucky schedule. Not
 * used by the library itself; with no hook set each point costs one atomic
 * load. */
#ifndef RR_TRANSPORT_TCP_CLIENT_H
#define RR_TRANSPORT_TCP_CLIENT_H

#include <stdint.h>

#include "transport/xprt.h"

extern const struct rr_xprt_client_ops rr_tcp_client_ops;

enum rr_tcp_test_point {
	/* A Call's record was written (or the write failed): the thread
	 * that wrote it runs the hook with no lock held, before it records
	 * the outcome. @xid: the Call's XID; @gen: the connection
	 * generation it was written on. */
	RR_TCP_TEST_SENT = 1,
	/* The receive thread reconnected and finished its retransmit scan
	 * (no lock held). @xid: 0; @gen: the new connection generation. */
	RR_TCP_TEST_RESENT = 2,
};

typedef void (*rr_tcp_test_hook_fn)(enum rr_tcp_test_point pt, uint32_t xid, uint64_t gen);

/* Installs @fn (NULL: none) for every tcp:// client of the process. */
void rr_tcp_test_set_hook(rr_tcp_test_hook_fn fn);

#endif
