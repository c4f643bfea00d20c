/* SPDX-License-Identifier: BSD-2-Clause */
/* What the tools add after rpcrdma_strerror() when an error has a likely
 * cause the user can act on: a URL whose server speaks the other transport
 * (-EPROTOTYPE: say which scheme to use instead) or a transport this build
 * lacks (-EPROTONOSUPPORT). Public API only. */
#ifndef RPCRDMA_TOOLS_HINT_H
#define RPCRDMA_TOOLS_HINT_H

#include <errno.h>
#include <string.h>

/* A static suffix for the message about @rc on @url ("" when none). */
static inline const char *tool_hint(int rc, const char *url)
{
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
