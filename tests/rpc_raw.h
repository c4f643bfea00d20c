/* SPDX-License-Identifier: BSD-2-Clause */
/* A raw TCP ONC RPC client for the wire-level tests (tests/rpc/test_tcp_wire.c,
 * tests/rpc/test_drc.c, tests/rpc/test_drc_tirpc.c; the send loop also in
 * tests/rpc/test_tcp_reconnect.c): a socket connected to
 * 127.0.0.1, whole-buffer sends, reads bounded by a poll timeout, record
 * marking (RFC 5531 section 11) and an AUTH_NONE Call header (section 9).
 * Test code only; compiled into rr-tests (tests/rpc_raw.c). */
#ifndef RR_TESTS_RPC_RAW_H
#define RR_TESTS_RPC_RAW_H

#include <stddef.h>
#include <stdint.h>

/* A TCP socket connected to 127.0.0.1:@port (REQUIREd to succeed: the
 * test's thread only). */
int rpc_raw_connect(int port);
/* The same for any thread: the socket, or a negative errno. */
int rpc_raw_try_connect(int port);
/* The same, bound first to the local address @src ("127.0.0.2"; NULL: no
 * bind). */
int rpc_raw_connect_from(int port, const char *src);

/* Sends all @n bytes, stopping quietly at the first failed send (the peer
 * may have closed: callers check what follows). */
void rpc_raw_send_all(int fd, const void *p, size_t n);

/* Reads exactly @n bytes, each read waiting at most @ms; returns the bytes
 * read (less on EOF or timeout). */
size_t rpc_raw_recv_n(int fd, void *p, size_t n, int ms);

/* Reads one record (any number of fragments) into @buf; returns its
 * length, or -1 on EOF, timeout, or a record longer than @cap. */
long rpc_raw_recv_record(int fd, uint8_t *buf, size_t cap, int ms);

/* The body of a Call (xid, CALL, rpcvers 2, @prog, @vers, @proc, AUTH_NONE
 * credential and verifier) followed by @nargs u32 arguments, into @b;
 * returns its length (40 + 4 * @nargs). */
size_t rpc_raw_call(uint8_t *b, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		    const uint32_t *args, unsigned nargs);

/* rpc_raw_call as one last-fragment record in a single send(2), REQUIREd
 * to go out whole; @nargs at most RPC_RAW_MAX_ARGS. */
#define RPC_RAW_MAX_ARGS 20u
void rpc_raw_send_call(int fd, uint32_t xid, uint32_t prog, uint32_t vers, uint32_t proc,
		       const uint32_t *args, unsigned nargs);

#endif
