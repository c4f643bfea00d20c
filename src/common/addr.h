/* Host identity of socket addresses, for what servers count or remember per
 * peer host (connections per source address, failed Calls by peer): the IP
 * address without the port, an IPv4-mapped IPv6 address being the IPv4
 * address it maps. No wire format. */
#ifndef RR_COMMON_ADDR_H
#define RR_COMMON_ADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* True when @a and @b (AF_INET or AF_INET6) name the same host; false for
 * any other family. */
bool rr_addr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

#endif
