/* SPDX-License-Identifier: BSD-2-Clause */
/* A raw TCP ONC RPC client for the wire-level tests (rpc_raw.h; RFC 5531
 * sections 9 and 11). */
#include "rpc_raw.h"

#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

int rpc_raw_connect_from(int port, const char *src)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	REQUIRE(fd >= 0);
	if (src) {
		struct sockaddr_in b = {.sin_family = AF_INET};

		REQUIRE_EQ(inet_pton(AF_INET, src, &b.sin_addr), 1);
		REQUIRE_EQ(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

int rpc_raw_connect(int port)
{
	return rpc_raw_connect_from(port, NULL);
}

int rpc_raw_try_connect(int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0), e;

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		return fd;
	e = -errno;
	close(fd);
	return e;
}

void rpc_raw_send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;
		b += k;
		n -= (size_t)k;
	}
}

size_t rpc_raw_recv_n(int fd, void *p, size_t n, int ms)
{
	uint8_t *b = p;
	size_t got = 0;

	while (got < n) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pfd, 1, ms) <= 0)
			break;
		k = recv(fd, b + got, n - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got;
}

long rpc_raw_recv_record(int fd, uint8_t *buf, size_t cap, int ms)
{
	size_t len = 0;

	for (;;) {
		uint8_t h[4];
		uint32_t v, n;

		if (rpc_raw_recv_n(fd, h, 4, ms) != 4)
			return -1;
		v = rr_get_be32(h);
		n = v & 0x7fffffffu;
		if (n > cap - len)
			return -1;
		if (rpc_raw_recv_n(fd, buf + len, n, ms) != n)
			return -1;
		len += n;
		if (v & 0x80000000u)
			return (long)len;
	}
}

/* Wire layout of the Call body (RFC 5531 section 9), u32 words:
 *   xid | 0 (CALL) | 2 (rpcvers) | prog | vers | proc
 *   | 0 (AUTH_NONE) | 0 (cred length) | 0 (AUTH_NONE) | 0 (verf length)
 *   | args[0] ... args[nargs - 1] */
size_t rpc_raw_call(uint8_t *b, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		    const uint32_t *args, unsigned nargs)
{
	const uint32_t hdr[10] = {xid, 0, 2, prog, vers, proc, 0, 0, 0, 0};

	for (unsigned i = 0; i < 10; i++)
		rr_put_be32(b + 4 * i, hdr[i]);
	for (unsigned i = 0; i < nargs; i++)
		rr_put_be32(b + 40 + 4 * i, args[i]);
	return 40 + 4 * (size_t)nargs;
}

void rpc_raw_send_call(int fd, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		       const uint32_t *args, unsigned nargs)
{
	uint8_t b[4 + 40 + 4 * RPC_RAW_MAX_ARGS];
	size_t n;

	REQUIRE(nargs <= RPC_RAW_MAX_ARGS);
	n = rpc_raw_call(b + 4, xid, prog, vers, proc, args, nargs);
	rr_put_be32(b, 0x80000000u | (uint32_t)n);
	REQUIRE_EQ(send(fd, b, n + 4, MSG_NOSIGNAL), (ssize_t)(n + 4));
}
