/* SPDX-License-Identifier: BSD-2-Clause */
/* What a failed probe of the rogue suite (rr_fx_probe, rogue_fx.h) prints
 * about the server it probed and the process around it, so that a rare
 * failure seen once in a lab VM (docs/interop.md: the Debian 13 VM's probe
 * timeouts) can be told apart next time: the server's counters (live
 * connections, refused requests, half-open connections dropped, fatal
 * errors, Sends and Receives), the TCP sockets of its port (the accept
 * queue, each connection's state and bytes left unread on either side:
 * who is not reading), the transport's CQs (wanted, armed, watched by
 * their loop, who holds their consumer role: a completion nobody will
 * take), what the allocator's trims cost (they run on a progress loop,
 * common.h rr_mem_trim_tick), whether each progress loop of the engine
 * still runs its tasks (a blocked loop serves no listener and no shard),
 * and every thread of the process with its state, CPU time and kernel
 * wait channel (a thread of an earlier test still running, a provider
 * thread asleep where it should not be). Test code; no REQUIRE. */
#ifndef RR_TESTS_PROBE_DIAG_H
#define RR_TESTS_PROBE_DIAG_H

#include <stdio.h>

struct rpcrdma_server;

/* The in-process server listening on @port, for the dump of a probe of
 * that port (rr_fx_srv_start and _stop keep it; a server of a child
 * process is not known). Forgets @port with @s NULL. */
void rr_diag_server_set(int port, struct rpcrdma_server *s);

/* Posts a task to each of the engine's loops (up to @cap) and waits up to
 * @wait_ms for them all: @ms[i] is how long loop i took to run it, -1 when
 * it did not within @wait_ms (its task stays posted and is reused by the
 * next call). Returns the number of loops (0: engine not started). */
unsigned rr_diag_loops(unsigned wait_ms, long *ms, unsigned cap);

/* Prints the state above to @f, each line starting with "  diag: ". */
void rr_diag_dump(int port, FILE *f);

/* The same without the server's counters (before and after), for a server
 * that is not an RPC server of rr_diag_server_set (a transport server
 * prints its own): the sockets of @port, the trims, the CQs, the loops and
 * the threads. */
void rr_diag_dump_around(int port, FILE *f);

#endif
