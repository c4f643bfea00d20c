/* SPDX-License-Identifier: BSD-2-Clause */
/* Wire-level tests of the RPC layer's TCP transport with raw sockets
 * (RFC 5531 section 11 record marking): Calls split into fragments,
 * RPC_MISMATCH for rpcvers != 2, AUTH_ERROR for unsupported flavors and bad
 * verifiers, hostile bytes (garbage record, giant length, truncated record,
 * close mid-record) that must not disturb the server or its other clients,
 * the exact bytes a client sends for DDP-eligible items (XDR pad),
 * reconnection with retransmission under the same XID, and pipelined Calls
 * the server read ahead of the socket. Every socket read has a timeout. */
#include "test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpcrdma/rpc.h"
#include "rpc/rpcmsg.h"
#include "rpc_raw.h"
#include "xprt_harness.h"

#define PROG 0x20000077u

static struct rpcrdma_server *server(int *port)
{
	struct rpcrdma_server_opts o = {.threads = 2, .max_msg = 1 << 20};
	struct rpcrdma_server *s = NULL;

	REQUIRE_EQ(rpcrdma_server_create("tcp://127.0.0.1:0", &o, &s), 0);
	REQUIRE_EQ(rpcrdma_server_register(s, PROG, 1, 1, rr_th_h_echo, NULL), 0);
	REQUIRE_EQ(rpcrdma_server_start(s), 0);
	*port = rpcrdma_server_port(s);
	return s;
}

/* True when the peer closed the connection within @ms. */
static bool peer_closed(int fd, int ms)
{
	uint8_t b[256];

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t k;

		if (poll(&pfd, 1, ms) <= 0)
			return false;
		k = recv(fd, b, sizeof(b), 0);
		if (k <= 0)
			return true;
	}
}

/* Builds a Call record body: header with the given rpcvers/cred/verf, then
 * one u32 argument. Returns its length. */
static size_t build_call(uint8_t *buf, uint32_t xid, uint32_t rpcvers, uint32_t proc,
			 uint32_t cred_flavor, const uint8_t *cred, uint32_t cred_len,
			 uint32_t verf_flavor, uint32_t arg)
{
	size_t n = 0;

	rr_put_be32(buf + n, xid), n += 4;
	rr_put_be32(buf + n, 0), n += 4;
	rr_put_be32(buf + n, rpcvers), n += 4;
	rr_put_be32(buf + n, PROG), n += 4;
	rr_put_be32(buf + n, 1), n += 4;
	rr_put_be32(buf + n, proc), n += 4;
	rr_put_be32(buf + n, cred_flavor), n += 4;
	rr_put_be32(buf + n, cred_len), n += 4;
	if (cred_len)
		memcpy(buf + n, cred, cred_len);
	memset(buf + n + cred_len, 0, RR_ALIGN4(cred_len) - cred_len);
	n += RR_ALIGN4(cred_len);
	rr_put_be32(buf + n, verf_flavor), n += 4;
	rr_put_be32(buf + n, 0), n += 4;
	rr_put_be32(buf + n, arg), n += 4;
	return n;
}

static void send_record(int fd, const uint8_t *body, size_t n)
{
	uint8_t h[4];

	rr_put_be32(h, 0x80000000u | (uint32_t)n);
	rpc_raw_send_all(fd, h, 4);
	rpc_raw_send_all(fd, body, n);
}

static void expect_reply(int fd, uint32_t xid, struct rr_rpc_reply *r, uint32_t *result)
{
	uint8_t buf[512];
	long n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	struct rr_xdr_dec d;

	REQUIRE(n > 0);
	rr_xdr_dec_init(&d, buf, (size_t)n);
	REQUIRE_EQ(rr_rpcmsg_decode_reply(&d, r), 0);
	CHECK_EQ(r->xid, xid);
	if (result) {
		REQUIRE_EQ(rr_xdr_get_u32(&d, result), 0);
		CHECK_EQ(rr_xdr_dec_remaining(&d), 0);
	}
}

/* A healthy client keeps working. */
static void check_other_client(int port)
{
	struct rpcrdma_client_opts o = {.timeout_ms = 5000};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	char url[64];
	uint32_t v = 0;

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 100);
	CHECK_EQ(rpcrdma_call_run(call), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(v, 101);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
}

TEST(rpc_wire_fragments_and_denials)
{
	int port, fd;
	struct rpcrdma_server *s = server(&port);
	uint8_t body[600], sysbody[64];
	struct rr_rpc_reply r;
	uint32_t res = 0;
	size_t n;

	fd = rpc_raw_connect(port);
	/* A Call in three fragments (4, 13, rest bytes). */
	n = build_call(body, 0x1001, 2, 1, 0, NULL, 0, 0, 41);
	{
		uint8_t h[4];
		size_t cuts[] = {0, 4, 17, n};

		for (int i = 0; i < 3; i++) {
			size_t len = cuts[i + 1] - cuts[i];

			rr_put_be32(h, (i == 2 ? 0x80000000u : 0) | (uint32_t)len);
			rpc_raw_send_all(fd, h, 4);
			rpc_raw_send_all(fd, body + cuts[i], len);
		}
	}
	expect_reply(fd, 0x1001, &r, &res);
	CHECK_EQ(r.stat, RR_RPC_MSG_ACCEPTED);
	CHECK_EQ(r.accept_stat, RR_RPC_SUCCESS);
	CHECK_EQ(res, 42);
	/* A zero-length first fragment is legal too. */
	{
		uint8_t h[4] = {0, 0, 0, 0};

		rpc_raw_send_all(fd, h, 4);
		n = build_call(body, 0x1002, 2, 1, 0, NULL, 0, 0, 1);
		send_record(fd, body, n);
		expect_reply(fd, 0x1002, &r, &res);
		CHECK_EQ(res, 2);
	}

	/* rpcvers 3 -> MSG_DENIED RPC_MISMATCH low 2 high 2. */
	n = build_call(body, 0x2001, 3, 1, 0, NULL, 0, 0, 1);
	send_record(fd, body, n);
	expect_reply(fd, 0x2001, &r, NULL);
	CHECK_EQ(r.stat, RR_RPC_MSG_DENIED);
	CHECK_EQ(r.reject_stat, RR_RPC_RPC_MISMATCH);
	CHECK_EQ(r.low, 2);
	CHECK_EQ(r.high, 2);
	/* rpcvers 1 with a short body: still RPC_MISMATCH. */
	{
		uint8_t b[12];

		rr_put_be32(b, 0x2002);
		rr_put_be32(b + 4, 0);
		rr_put_be32(b + 8, 1);
		send_record(fd, b, 12);
		expect_reply(fd, 0x2002, &r, NULL);
		CHECK_EQ(r.reject_stat, RR_RPC_RPC_MISMATCH);
	}

	/* Unsupported flavor (AUTH_DH = 3) -> AUTH_ERROR AUTH_BADCRED. */
	n = build_call(body, 0x3001, 2, 1, 3, (const uint8_t *)"abcd", 4, 0, 1);
	send_record(fd, body, n);
	expect_reply(fd, 0x3001, &r, NULL);
	CHECK_EQ(r.stat, RR_RPC_MSG_DENIED);
	CHECK_EQ(r.reject_stat, RR_RPC_AUTH_ERROR);
	CHECK_EQ(r.auth_stat, RR_RPC_AUTH_BADCRED);
	/* RPCSEC_GSS (6) is not supported either. */
	n = build_call(body, 0x3002, 2, 1, 6, (const uint8_t *)"abcdefgh", 8, 0, 1);
	send_record(fd, body, n);
	expect_reply(fd, 0x3002, &r, NULL);
	CHECK_EQ(r.auth_stat, RR_RPC_AUTH_BADCRED);
	/* A malformed AUTH_SYS body -> AUTH_BADCRED. */
	memset(sysbody, 0, sizeof(sysbody));
	rr_put_be32(sysbody + 4, 300); /* machine name length > 255 */
	n = build_call(body, 0x3003, 2, 1, 1, sysbody, 20, 0, 1);
	send_record(fd, body, n);
	expect_reply(fd, 0x3003, &r, NULL);
	CHECK_EQ(r.auth_stat, RR_RPC_AUTH_BADCRED);
	/* A non-null verifier with AUTH_NONE -> AUTH_BADVERF. */
	n = build_call(body, 0x3004, 2, 1, 0, NULL, 0, 1, 1);
	send_record(fd, body, n);
	expect_reply(fd, 0x3004, &r, NULL);
	CHECK_EQ(r.auth_stat, RR_RPC_AUTH_BADVERF);
	/* A valid AUTH_SYS call is accepted. */
	memset(sysbody, 0, sizeof(sysbody));
	n = build_call(body, 0x3005, 2, 1, 1, sysbody, 20, 0, 7);
	send_record(fd, body, n);
	expect_reply(fd, 0x3005, &r, &res);
	CHECK_EQ(r.accept_stat, RR_RPC_SUCCESS);
	CHECK_EQ(res, 8);

	/* A Reply sent to the server, and an undecodable Call, are dropped
	 * without an answer; the connection stays usable. */
	{
		uint8_t b[24] = {0, 0, 0x40, 0x01, 0, 0, 0, 1};

		send_record(fd, b, sizeof(b));
		rr_put_be32(b, 0x4002);
		rr_put_be32(b + 4, 0);
		rr_put_be32(b + 8, 2); /* rpcvers 2 but the header ends early */
		send_record(fd, b, 16);
		n = build_call(body, 0x4003, 2, 1, 0, NULL, 0, 0, 9);
		send_record(fd, body, n);
		expect_reply(fd, 0x4003, &r, &res); /* the next answer is this one */
		CHECK_EQ(res, 10);
	}
	close(fd);
	rpcrdma_server_destroy(s);
}

/* Reads @n replies to Calls 0x3000 + i (argument 100 + i) from @fd, in
 * any order: each one once, each one right. */
static void expect_echo_replies(int fd, unsigned n)
{
	bool seen[16] = {false};

	REQUIRE(n <= 16);
	for (unsigned k = 0; k < n; k++) {
		struct rr_rpc_reply r;
		uint8_t buf[512];
		long len = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
		struct rr_xdr_dec d;
		uint32_t res = 0, i;

		REQUIRE(len > 0);   /* a Call left in a stage: never answered */
		rr_xdr_dec_init(&d, buf, (size_t)len);
		REQUIRE_EQ(rr_rpcmsg_decode_reply(&d, &r), 0);
		i = r.xid - 0x3000;
		REQUIRE(i < n);
		CHECK(!seen[i]);
		seen[i] = true;
		CHECK_EQ(r.accept_stat, RR_RPC_SUCCESS);
		REQUIRE_EQ(rr_xdr_get_u32(&d, &res), 0);
		CHECK_EQ(res, 101 + i);
	}
}

/* Calls a client pipelines into one send: the server reads ahead (a
 * small Call costs one recv with its header). First a Call larger than
 * the stage (its first bytes through the stage, the rest straight into its
 * buffer, the read stopping at its end), then nine small ones that one
 * recv puts in the stage together, leaving the socket empty: every one is
 * answered all the same (in any order), though no byte is left to wake
 * the loop. Four connections at once, so that some share a progress loop
 * and its stage: what one connection read ahead is kept apart (parked)
 * before another reads. */
TEST(rpc_wire_pipelined_calls_in_one_send_all_answered)
{
	enum { NCALLS = 10, BIG = 0, BIG_ARGS = 5000, NCONN = 4 };
	int port, fd[NCONN];
	struct rpcrdma_server *s = server(&port);
	size_t cap = NCALLS * 64 + 4 * BIG_ARGS + 64, off = 0;
	uint8_t *wire = calloc(1, cap);

	REQUIRE(wire != NULL);
	for (uint32_t i = 0; i < NCALLS; i++) {
		size_t n = build_call(wire + off + 4, 0x3000 + i, 2, 1, 0, NULL, 0, 0, 100 + i);

		if (i == BIG)   /* trailing words the echo handler ignores */
			n += 4 * BIG_ARGS;
		rr_put_be32(wire + off, 0x80000000u | (uint32_t)n);
		off += 4 + n;
	}
	for (int c = 0; c < NCONN; c++)
		fd[c] = rpc_raw_connect(port);
	for (int c = 0; c < NCONN; c++)
		rpc_raw_send_all(fd[c], wire, off);
	for (int c = 0; c < NCONN; c++) {
		expect_echo_replies(fd[c], NCALLS);
		close(fd[c]);
	}
	free(wire);
	rpcrdma_server_destroy(s);
}

TEST(rpc_wire_hostile_bytes)
{
	int port;
	struct rpcrdma_server *s = server(&port);
	uint8_t junk[4096];
	int fds[6];

	/* Keep a legitimate connection open across the abuse. */
	int good = rpc_raw_connect(port);
	uint8_t body[128];
	struct rr_rpc_reply r;
	uint32_t res;
	size_t n;

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 131 + 7);

	/* 1. A giant record length: the connection is closed at once. */
	fds[0] = rpc_raw_connect(port);
	rpc_raw_send_all(fds[0], "\xff\xff\xff\xff", 4);
	CHECK(peer_closed(fds[0], 5000));
	/* 2. Above the maximum (1 MiB) but below 2^31: closed. */
	fds[1] = rpc_raw_connect(port);
	rpc_raw_send_all(fds[1], "\x80\x20\x00\x00", 4);
	CHECK(peer_closed(fds[1], 5000));
	/* 3. A garbage record of valid framing: dropped, connection kept. */
	fds[2] = rpc_raw_connect(port);
	send_record(fds[2], junk, 1000);
	n = build_call(body, 0x5001, 2, 1, 0, NULL, 0, 0, 1);
	send_record(fds[2], body, n);
	expect_reply(fds[2], 0x5001, &r, &res);
	CHECK_EQ(res, 2);
	/* 4. Random bytes as framing: whatever length they claim is either
	 * too large (closed) or waits for more; closing is clean. */
	fds[3] = rpc_raw_connect(port);
	rpc_raw_send_all(fds[3], junk, sizeof(junk));
	/* 5. Truncated record: header says 100, 10 bytes sent, then close. */
	fds[4] = rpc_raw_connect(port);
	rpc_raw_send_all(fds[4], "\x80\x00\x00\x64" "0123456789", 14);
	/* 6. Closed in the middle of the record header. */
	fds[5] = rpc_raw_connect(port);
	rpc_raw_send_all(fds[5], "\x80\x00", 2);
	for (int i = 3; i < 6; i++)
		close(fds[i]);
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);

	/* The server still answers the old connection and new clients. */
	n = build_call(body, 0x5002, 2, 1, 0, NULL, 0, 0, 5);
	send_record(good, body, n);
	expect_reply(good, 0x5002, &r, &res);
	CHECK_EQ(res, 6);
	check_other_client(port);
	close(good);
	rpcrdma_server_destroy(s);
}

/* ---- a raw server for the client-side tests ---- */

static int raw_listen(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t sl = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	REQUIRE(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	REQUIRE_EQ(listen(fd, 4), 0);
	getsockname(fd, (struct sockaddr *)&a, &sl);
	*port = ntohs(a.sin_port);
	return fd;
}

static int accept_timeout(int lfd, int ms)
{
	struct pollfd pfd = {.fd = lfd, .events = POLLIN};

	if (poll(&pfd, 1, ms) <= 0)
		return -1;
	return accept(lfd, NULL, NULL);
}

TEST(rpc_wire_ddp_padding_on_the_wire)
{
	static const uint32_t sizes[] = {0, 1, 3, 4, 5};
	int port, lfd = raw_listen(&port), fd;
	struct rpcrdma_client_opts o = {.timeout_ms = 5000};
	struct rpcrdma_client *c = NULL;
	char url[64];
	uint8_t buf[512];

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	fd = accept_timeout(lfd, 5000);
	REQUIRE(fd >= 0);
	for (size_t k = 0; k < RR_ARRAY_SIZE(sizes); k++) {
		uint32_t len = sizes[k];
		uint8_t data[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8};
		uint8_t sinkbuf[16];
		struct rpcrdma_ddp_sink sk = {sinkbuf, sizeof(sinkbuf)};
		struct rpcrdma_call *call;
		long n;
		size_t off, rn;
		struct rr_xdr_dec d;
		struct rr_rpc_call hc;
		uint32_t v;
		const void *p;
		uint32_t plen;

		REQUIRE_EQ(rpcrdma_call_create(c, 9, &call), 0);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0xaaaa0000u + len);
		rpcrdma_xdr_put_ddp(rpcrdma_call_args(call), data, len);
		rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 0xbbbbbbbbu);
		REQUIRE_EQ(rpcrdma_call_set_sinks(call, &sk, 1), 0);
		REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);

		/* The record: header, marker, length, data, zero pad, marker. */
		n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
		REQUIRE(n > 0);
		rr_xdr_dec_init(&d, buf, (size_t)n);
		REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &hc), 0);
		CHECK_EQ(hc.xid, rpcrdma_call_xid(call));
		CHECK_EQ(hc.proc, 9);
		off = rr_xdr_dec_pos(&d);
		CHECK_EQ((size_t)n, off + 4 + 4 + RR_ALIGN4(len) + 4);
		CHECK_EQ(rr_get_be32(buf + off), 0xaaaa0000u + len);
		CHECK_EQ(rr_get_be32(buf + off + 4), len);
		CHECK(memcmp(buf + off + 8, data, len) == 0);
		for (size_t i = len; i < RR_ALIGN4(len); i++)
			CHECK_EQ(buf[off + 8 + i], 0);
		CHECK_EQ(rr_get_be32(buf + off + 8 + RR_ALIGN4(len)), 0xbbbbbbbbu);

		/* Reply: SUCCESS, an opaque of len+1 bytes with NON-zero pad
		 * (pad contents are not checked), then a trailer word. */
		rn = 0;
		rr_put_be32(buf + rn, hc.xid), rn += 4;
		rr_put_be32(buf + rn, 1), rn += 4;
		memset(buf + rn, 0, 16), rn += 16;
		rr_put_be32(buf + rn, len + 1), rn += 4;
		memset(buf + rn, 0x5c, RR_ALIGN4(len + 1));
		rn += RR_ALIGN4(len + 1);
		rr_put_be32(buf + rn, 0xcccccccc), rn += 4;
		send_record(fd, buf, rn);
		CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
		REQUIRE_EQ(rpcrdma_xdr_get_ddp(rpcrdma_call_results(call), &p, &plen), 0);
		CHECK_EQ(plen, len + 1);
		CHECK(p == sinkbuf);
		CHECK_EQ(sinkbuf[len], 0x5c);
		REQUIRE_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
		CHECK_EQ(v, 0xcccccccc);
		rpcrdma_call_destroy(call);
	}
	/* Replies that do not match a pending XID, and non-replies, are
	 * discarded; the real reply still completes the call. */
	{
		struct rpcrdma_call *call;
		struct rr_xdr_dec d;
		struct rr_rpc_call hc;
		long n;
		uint8_t junk[24] = {0};

		REQUIRE_EQ(rpcrdma_call_create(c, 0, &call), 0);
		REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
		n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
		REQUIRE(n > 0);
		rr_xdr_dec_init(&d, buf, (size_t)n);
		REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &hc), 0);
		rr_put_be32(junk, hc.xid + 1000);
		rr_put_be32(junk + 4, 1);
		send_record(fd, junk, 24);           /* unknown XID */
		rr_put_be32(junk, hc.xid);
		rr_put_be32(junk + 4, 0);
		send_record(fd, junk, 24);           /* a Call, not a Reply */
		rr_put_be32(junk + 4, 7);
		send_record(fd, junk, 8);            /* not RPC at all */
		CHECK_EQ(rpcrdma_call_wait(call, 200), -EAGAIN);
		rr_put_be32(junk + 4, 1);
		send_record(fd, junk, 24);           /* the Reply */
		CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
		rpcrdma_call_destroy(call);
	}
	rpcrdma_client_destroy(c);
	close(fd);
	close(lfd);
}

TEST(rpc_wire_reconnect_same_xid)
{
	int port, lfd = raw_listen(&port), fd;
	struct rpcrdma_client_opts o = {.timeout_ms = 8000, .connect_timeout_ms = 2000};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	char url[64];
	uint8_t buf[512];
	long n;
	struct rr_xdr_dec d;
	struct rr_rpc_call h1, h2;
	uint32_t arg1, arg2, v = 0;

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	fd = accept_timeout(lfd, 5000);
	REQUIRE(fd >= 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	rpcrdma_xdr_put_u32(rpcrdma_call_args(call), 77);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	REQUIRE(n > 0);
	rr_xdr_dec_init(&d, buf, (size_t)n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &h1), 0);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &arg1), 0);
	/* Drop the connection without replying. */
	close(fd);
	fd = accept_timeout(lfd, 5000);
	REQUIRE(fd >= 0);
	n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	REQUIRE(n > 0);
	rr_xdr_dec_init(&d, buf, (size_t)n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &h2), 0);
	REQUIRE_EQ(rr_xdr_get_u32(&d, &arg2), 0);
	CHECK_EQ(h2.xid, h1.xid);   /* retransmitted with the same XID */
	CHECK_EQ(arg2, arg1);
	{
		size_t rn = 0;

		rr_put_be32(buf + rn, h2.xid), rn += 4;
		rr_put_be32(buf + rn, 1), rn += 4;
		memset(buf + rn, 0, 16), rn += 16;
		rr_put_be32(buf + rn, arg2 + 1), rn += 4;
		send_record(fd, buf, rn);
	}
	CHECK_EQ(rpcrdma_call_wait(call, 5000), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(call), &v), 0);
	CHECK_EQ(v, 78);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	close(fd);
	close(lfd);
}

TEST(rpc_wire_oversized_reply_fails_only_its_call)
{
	int port, lfd = raw_listen(&port), fd;
	struct rpcrdma_client_opts o = {.timeout_ms = 5000, .max_msg = 4096};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *c1, *c2;
	char url[64];
	static uint8_t buf[16384];
	struct rr_xdr_dec d;
	struct rr_rpc_call h1, h2;
	long n;
	size_t rn;
	uint32_t v = 0;

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	fd = accept_timeout(lfd, 5000);
	REQUIRE(fd >= 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &c1), 0);
	REQUIRE_EQ(rpcrdma_call_start(c1, NULL, NULL), 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &c2), 0);
	REQUIRE_EQ(rpcrdma_call_start(c2, NULL, NULL), 0);
	n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	REQUIRE(n > 0);
	rr_xdr_dec_init(&d, buf, (size_t)n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &h1), 0);
	n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	REQUIRE(n > 0);
	rr_xdr_dec_init(&d, buf, (size_t)n);
	REQUIRE_EQ(rr_rpcmsg_decode_call(&d, &h2), 0);

	/* Reply to the first call with 10000 bytes in two fragments (above
	 * the client's 4096), then a normal reply to the second. */
	memset(buf, 0, 10000);
	rr_put_be32(buf, h1.xid);
	rr_put_be32(buf + 4, 1);
	{
		uint8_t h[4];

		rr_put_be32(h, 3000);
		rpc_raw_send_all(fd, h, 4);
		rpc_raw_send_all(fd, buf, 3000);
		rr_put_be32(h, 0x80000000u | 7000);
		rpc_raw_send_all(fd, h, 4);
		rpc_raw_send_all(fd, buf + 3000, 7000);
	}
	rn = 0;
	rr_put_be32(buf + rn, h2.xid), rn += 4;
	rr_put_be32(buf + rn, 1), rn += 4;
	memset(buf + rn, 0, 16), rn += 16;
	rr_put_be32(buf + rn, 99), rn += 4;
	send_record(fd, buf, rn);

	CHECK_EQ(rpcrdma_call_wait(c1, 5000), -EMSGSIZE);
	CHECK_EQ(rpcrdma_call_wait(c2, 5000), 0);
	CHECK_EQ(rpcrdma_xdr_get_u32(rpcrdma_call_results(c2), &v), 0);
	CHECK_EQ(v, 99);
	/* Same connection throughout: no reconnection happened. */
	CHECK_EQ(accept_timeout(lfd, 100), -1);
	rpcrdma_call_destroy(c1);
	rpcrdma_call_destroy(c2);
	rpcrdma_client_destroy(c);
	close(fd);
	close(lfd);
}

/* Empty fragments cannot keep a record open forever (RFC 5531 section 11
 * does not forbid them, src/transport/tcp/rm.h counts them): with records
 * of at most 1 MiB a record may have 1024 fragments. 1023 empty ones before
 * a Call's one are answered; 1025 empty ones close the connection (before
 * the limit the server read them for ever). */
TEST(rpc_wire_server_fragment_limit)
{
	int port, fd;
	struct rpcrdma_server *s = server(&port);
	static uint8_t empties[1025 * 4];
	uint8_t body[128];
	struct rr_rpc_reply r;
	uint32_t res = 0;
	size_t n;

	fd = rpc_raw_connect(port);
	rpc_raw_send_all(fd, empties, 1023 * 4);
	n = build_call(body, 0x6001, 2, 1, 0, NULL, 0, 0, 10);
	send_record(fd, body, n);
	expect_reply(fd, 0x6001, &r, &res);
	CHECK_EQ(res, 11);
	rpc_raw_send_all(fd, empties, sizeof(empties));
	CHECK(peer_closed(fd, 5000));
	close(fd);
	check_other_client(port);
	rpcrdma_server_destroy(s);
}

/* The client side of the same limit: a server answering with empty
 * fragments without end gets its connection closed (with no_reconnect the
 * Call fails) instead of a client reading for ever. */
TEST(rpc_wire_client_fragment_limit)
{
	int port, lfd = raw_listen(&port), fd;
	struct rpcrdma_client_opts o = {.timeout_ms = 30000, .max_msg = 4096,
					.no_reconnect = true};
	struct rpcrdma_client *c = NULL;
	struct rpcrdma_call *call;
	static uint8_t buf[4096], empties[1025 * 4];
	char url[64];
	long n;

	snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", port);
	REQUIRE_EQ(rpcrdma_client_create(url, PROG, 1, &o, &c), 0);
	fd = accept_timeout(lfd, 5000);
	REQUIRE(fd >= 0);
	REQUIRE_EQ(rpcrdma_call_create(c, 1, &call), 0);
	REQUIRE_EQ(rpcrdma_call_start(call, NULL, NULL), 0);
	n = rpc_raw_recv_record(fd, buf, sizeof(buf), 5000);
	REQUIRE(n > 0);
	rpc_raw_send_all(fd, empties, sizeof(empties));
	CHECK(peer_closed(fd, 5000));
	CHECK_EQ(rpcrdma_call_wait(call, 5000), -ECONNRESET);
	rpcrdma_call_destroy(call);
	rpcrdma_client_destroy(c);
	close(fd);
	close(lfd);
}
