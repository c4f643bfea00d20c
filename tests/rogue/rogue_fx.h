/* SPDX-License-Identifier: BSD-2-Clause */
/* The servers the rogue suite attacks and the well-behaved clients that
 * check the server still serves others (tests/rogue/test_rogue_*.c):
 *  - an in-process RPC server on rdma://127.0.0.1:0 with the example file
 *    service (tools/fileservice/fileservice.h), over a temporary export, as
 *    rpcrdma-server runs it (its transport counters are readable);
 *  - the rpcrdma-server executable of the build directory as a child
 *    process (for what only a process can show: a fatal signal, CPU time,
 *    RSS, a lowered RLIMIT_NOFILE);
 *  - a probe: a normal client on its own connection that must complete
 *    calls within a bound.
 * Test code; no TEST() here, no REQUIRE (usable from helper threads): 0 or
 * a negative errno. */
#ifndef RR_TESTS_ROGUE_FX_H
#define RR_TESTS_ROGUE_FX_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileservice.h"
#include "rpcrdma/stats.h"

/* The byte at offset @i of the test pattern @seed (position-independent, so
 * any slice of a file can be checked). */
static inline uint8_t rr_fx_byte(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed << 32 | seed);

	x ^= x >> 29;
	return (uint8_t)(x ^ (x >> 17));
}
void rr_fx_pattern(uint8_t *p, size_t n, uint32_t seed, uint64_t off);
/* The first offset in @p (@n bytes, file offset @off) that differs from
 * pattern @seed, or -1. */
long long rr_fx_pattern_diff(const uint8_t *p, size_t n, uint32_t seed, uint64_t off);

/* A temporary directory /tmp/rr-rogue-XXXXXX with an "export" inside. */
struct rr_fx_dir {
	char dir[64];
	char export_dir[96];
};
int rr_fx_dir_make(struct rr_fx_dir *d);
void rr_fx_dir_remove(struct rr_fx_dir *d);
/* Creates export/@name with @len bytes of pattern @seed. */
int rr_fx_file(const struct rr_fx_dir *d, const char *name, size_t len, uint32_t seed);
/* Reads up to @cap bytes of export/@name at @off; the count or -errno. */
long rr_fx_file_read(const struct rr_fx_dir *d, const char *name, uint64_t off, void *buf,
		     size_t cap);
/* Size of export/@name, or -errno. */
long long rr_fx_file_size(const struct rr_fx_dir *d, const char *name);

/* ---- in-process server ---- */
struct rr_fx_srv {
	struct rr_fx_dir d;
	struct fs_service svc;
	struct rpcrdma_server *srv;
	int port;
	char url[64];
};
/* Starts the file service on rdma://127.0.0.1:0 with @o (NULL: defaults).
 * -EPROTONOSUPPORT when the soft provider is not built in. */
int rr_fx_srv_start(struct rr_fx_srv *f, const struct rpcrdma_server_opts *o);
void rr_fx_srv_stop(struct rr_fx_srv *f);
/* The server's transport counters (rpcrdma_server_stats). */
int rr_fx_srv_stats(struct rr_fx_srv *f, struct rpcrdma_xprt_stats *st);
/* Waits up to @ms until @field of the counters (an offset into struct
 * rpcrdma_xprt_stats of a uint64_t) reaches @min; true when it did. */
bool rr_fx_srv_wait_stat(struct rr_fx_srv *f, size_t field, uint64_t min, unsigned ms);
#define RR_FX_STAT(name) offsetof(struct rpcrdma_xprt_stats, name)
/* Waits up to @ms until the server has at most @n live connections. */
bool rr_fx_srv_wait_conns(struct rr_fx_srv *f, uint32_t n, unsigned ms);

/* ---- child process: build/rpcrdma-server ---- */
struct rr_fx_child {
	struct rr_fx_dir d;
	const char *transport;   /* "rdma" (NULL) or "tcp": set before run */
	pid_t pid;
	int port;
	int status;       /* wait status once reaped */
	bool reaped;
};
/* Spawns rpcrdma-server --transport rdma --listen 127.0.0.1:0 over a new
 * export (files may be added with rr_fx_file on c->d before or after), with
 * RLIMIT_NOFILE lowered to @nofile when nonzero and @threads workers (0: 4),
 * and waits (bounded) for its "listening on" line. In sanitizer builds the
 * child's ASAN_OPTIONS add a small quarantine that is given back to the
 * system at once, so that its RSS means what it means without ASan. */
int rr_fx_child_start(struct rr_fx_child *c, unsigned long nofile, unsigned threads);
/* Creates c->d first (to put files in before the start); then start. */
int rr_fx_child_prepare(struct rr_fx_child *c);
int rr_fx_child_run(struct rr_fx_child *c, unsigned long nofile, unsigned threads);
/* True while the process lives; once it died, c->status says how. */
bool rr_fx_child_alive(struct rr_fx_child *c);
/* CPU time (user + system) of the child so far, seconds; < 0 on error. */
double rr_fx_child_cpu(const struct rr_fx_child *c);
/* Time the child's threads were runnable so far (running, or waiting for
 * a CPU: /proc/PID/task/N/schedstat), seconds; < 0 on error. Unlike CPU
 * time it does not shrink when other processes compete for the CPUs, so a
 * busy loop shows as such on a loaded machine too. */
double rr_fx_child_runnable(const struct rr_fx_child *c);
/* Resident set size, KiB; < 0 on error. */
long rr_fx_child_rss_kb(const struct rr_fx_child *c);
/* Open file descriptors of the child; < 0 on error. */
int rr_fx_child_nfds(const struct rr_fx_child *c);
/* Waits up to @ms until the child has at most @n descriptors open. */
bool rr_fx_child_wait_nfds(const struct rr_fx_child *c, int n, unsigned ms);
/* SIGTERM, up to @ms for a graceful exit, then SIGKILL; removes the
 * directory. Returns the exit code (0..255), or -signal number when it died
 * of a signal (also a SIGKILL we had to send), or -ECHILD. */
int rr_fx_child_stop(struct rr_fx_child *c, unsigned ms);

/* ---- well-behaved clients ---- */

/* A new client on its own connection to rdma://127.0.0.1:@port: a NULL
 * call and an ECHO of 1000 bytes (checked), each within @ms (connect
 * included). 0, or the -errno / -EBADMSG that failed. */
int rr_fx_probe(int port, unsigned ms);

/* A client that keeps calling in a thread until stopped; for "other
 * connections keep being served while the attack runs". */
struct rr_fx_busy {
	int port;
	uint32_t seed;     /* WRITE data pattern */
	size_t len;        /* WRITE size (0: NULL calls only) */
	char name[32];     /* file it writes */
	pthread_t th;
	atomic_bool stop;
	atomic_uint calls, failures;
	atomic_uint timeouts;   /* calls that got no answer at all */
	int first_err;
};
int rr_fx_busy_start(struct rr_fx_busy *b, int port, const char *name, size_t len,
		     uint32_t seed);
void rr_fx_busy_stop(struct rr_fx_busy *b);

/* A new client READs all @len bytes of @path (pattern @seed) through a
 * Write chunk within @ms: 0, -EBADMSG (wrong bytes) or the -errno. */
int rr_fx_client_read(int port, const char *path, uint32_t len, uint32_t seed, unsigned ms);

/* Monotonic milliseconds. */
uint64_t rr_fx_ms(void);

#endif
