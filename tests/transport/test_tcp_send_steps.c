/* SPDX-License-Identifier: BSD-2-Clause */
/* A tcp:// record sent in steps (src/transport/tcp/tcp_io.h
 * rr_tcp_send_init / rr_tcp_send_more), as the client's submit does: one
 * non-blocking try that the socket cannot take whole stops with -EAGAIN
 * and the bytes it wrote, and later steps go on from there, so the peer
 * receives exactly one record (RFC 5531 section 11: a last-fragment
 * header, then the message's bytes), nothing sent twice or skipped. A
 * record the socket takes whole goes in one try. A socket pair with a
 * small send buffer; no timing involved. */
#include "test.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/tcp/rm.h"
#include "transport/tcp/tcp_io.h"

#define BIG 600000u   /* more than a small socket pair holds */

static void pattern(uint8_t *b, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed + i * 13u);
}

/* Reads what @fd has now (non-blocking) into @out at *@off. */
static void drain(int fd, uint8_t *out, size_t cap, size_t *off)
{
	for (;;) {
		ssize_t n = recv(fd, out + *off, cap - *off, MSG_DONTWAIT);

		if (n <= 0)
			return;
		*off += (size_t)n;
	}
}

TEST(tcp_send_in_steps_resumes_where_it_stopped)
{
	int sv[2], small = 4096;
	uint8_t *msg = malloc(BIG), *got = malloc(BIG + 8);
	struct rr_xprt_msg m = {0};
	struct rr_tcp_send s;
	size_t off = 0;
	unsigned steps = 0;
	int rc;

	REQUIRE(msg != NULL && got != NULL);
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	pattern(msg, BIG, 5);
	m.head = msg;
	m.head_len = BIG;
	m.xdr_len = BIG;
	REQUIRE_EQ(rr_tcp_send_init(&s, &m), 0);
	/* the first try cannot take it whole */
	rc = rr_tcp_send_more(sv[0], &s, NULL, 0);
	CHECK_EQ(rc, -EAGAIN);
	CHECK(s.sent > 0 && s.sent < s.total);
	CHECK_EQ(s.total, (size_t)BIG + RR_RM_HDR_LEN);
	/* the peer reads, the sender goes on, until the record is out */
	while (rc == -EAGAIN && steps++ < 100000) {
		drain(sv[1], got, BIG + 8, &off);
		rc = rr_tcp_send_more(sv[0], &s, NULL, 0);
	}
	CHECK_EQ(rc, 0);
	CHECK(steps > 1);
	drain(sv[1], got, BIG + 8, &off);
	REQUIRE_EQ(off, (size_t)BIG + RR_RM_HDR_LEN);
	CHECK_EQ(rr_get_be32(got), RR_RM_LAST | BIG);
	CHECK(memcmp(got + RR_RM_HDR_LEN, msg, BIG) == 0);
	/* a small record: one try, whole */
	m.head_len = m.xdr_len = 100;
	REQUIRE_EQ(rr_tcp_send_init(&s, &m), 0);
	CHECK_EQ(rr_tcp_send_more(sv[0], &s, NULL, 0), 0);
	off = 0;
	drain(sv[1], got, BIG + 8, &off);
	CHECK_EQ(off, 104u);
	CHECK(memcmp(got + RR_RM_HDR_LEN, msg, 100) == 0);
	close(sv[0]);
	close(sv[1]);
	free(msg);
	free(got);
}
