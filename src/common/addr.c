/* Host identity of socket addresses (addr.h): the IP address without the
 * port, an IPv4-mapped IPv6 address (RFC 4291 section 2.5.5.2) being the
 * IPv4 address it maps. */
#include "common/addr.h"

#include <netinet/in.h>
#include <string.h>

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
