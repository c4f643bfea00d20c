/* SPDX-License-Identifier: BSD-2-Clause */
/* What the servers' listeners share (listen.h): host identity of socket
 * addresses (an IPv4-mapped IPv6 address, RFC 4291 section 2.5.5.2, is the
 * IPv4 address it maps) and the accept back-off. */
#include "common/listen.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

/* The host's address bytes (4 or 16) in @out; 0 for another family. */
static size_t host_bytes(const struct sockaddr_storage *a, const unsigned char **out)
{
	if (a->ss_family == AF_INET) {
		*out = (const unsigned char *)&((const struct sockaddr_in *)a)->sin_addr;
		return 4;
	}
	if (a->ss_family == AF_INET6) {
		const struct in6_addr *x = &((const struct sockaddr_in6 *)a)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(x)) {
			*out = x->s6_addr + 12;
			return 4;
		}
		*out = x->s6_addr;
		return 16;
	}
	return 0;
}

bool rr_addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const unsigned char *x, *y;
	size_t n = host_bytes(a, &x);

	return n && n == host_bytes(b, &y) && memcmp(x, y, n) == 0;
}

bool rr_backoff_wanted(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

uint64_t rr_backoff_begin(struct rr_backoff *b, const struct rpcrdma_env *env, const char *who,
			  int err)
{
	b->ms = b->ms ? RR_MIN(b->ms * 2, RR_BACKOFF_MAX_MS) : RR_BACKOFF_MIN_MS;
	b->count++;
	if (!b->logged) {
		b->logged = true;
		fprintf(stderr,
			"librpcrdma: %s: accept: %s; not accepting for %u ms, then up to %u ms "
			"at a time while it lasts (counted as accept_backoffs; established "
			"connections are still served)\n",
			who, strerror(err), b->ms, RR_BACKOFF_MAX_MS);
	}
	return rr_now_ns(env) + (uint64_t)b->ms * 1000000u;
}
