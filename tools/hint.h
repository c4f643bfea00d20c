/* SPDX-License-Identifier: BSD-2-Clause */
/* What the tools add after rpcrdma_strerror() when an error has a likely
 * cause the user can act on: a URL whose server speaks the other transport
 * (-EPROTOTYPE: say which scheme to use instead), an rdma:// connection
 * that the peer closed during the MPA exchange (-ECONNRESET while
 * connecting: most often a TCP service that is not iWARP, e.g. another
 * ONC RPC server, which drops the MPA Request as a bad record) or a
 * transport this build lacks (-EPROTONOSUPPORT). Public API only. */
#ifndef RPCRDMA_TOOLS_HINT_H
#define RPCRDMA_TOOLS_HINT_H

#include <errno.h>
#include <string.h>

/* A static suffix for the message about @rc on @url ("" when none);
 * @connecting: @rc came from creating the client. */
static inline const char *tool_hint(int rc, const char *url, int connecting)
{
	if (rc == -ECONNRESET && connecting && url && !strncmp(url, "rdma://", 7))
		return " (the peer closed the connection during the iWARP MPA exchange: "
		       "it may not be an rdma:// server)";
	if (rc == -EPROTOTYPE && url && !strncmp(url, "tcp://", 6))
		return " (it answered in iWARP MPA: use rdma:// with the same host and port)";
	if (rc == -EPROTOTYPE && url && !strncmp(url, "rdma://", 7))
		return " (it answered in ONC RPC record marking: use tcp:// with the same host "
		       "and port)";
	if (rc == -EPROTONOSUPPORT)
		return " (transport not available in this build)";
	return "";
}

#endif
