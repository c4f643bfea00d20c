/* SPDX-License-Identifier: BSD-2-Clause */
/* Copyright (c) The librpcrdma authors */
/* One randomized run of the virtual-time session test: a requester session
 * and a responder session of src/proto/conn wired to each other by the
 * in-memory wire of vt_net.h, driven by a seeded scheduler that at every
 * step picks among the pending events (deliver a message, a Write, a Read
 * or its Response; run a completion; submit, abort or release a Call;
 * answer, refuse or finish a delivered Call; advance the virtual clock;
 * lose the connection, tell each side, connect again), then checks the
 * invariants. Everything is reproducible from the seed, which a failure
 * prints with the last events. */
#ifndef RR_TESTS_CONN_VT_WORLD_H
#define RR_TESTS_CONN_VT_WORLD_H

#include <stdbool.h>
#include <stdint.h>

/* What a run did (summed over seeds by the tests). */
struct vt_result {
	unsigned long steps, calls, completed_ok, completed_err, aborts, losses, connects,
		legit_fatal, alloc_fails, short_calls, read_calls, long_calls, write_chunks,
		reply_chunks, rrep_exposed, rrep_pulled, rrep_parked, rrep_expired, err_chunk,
		retransmits, swi, linv, sends, writes, reads, stalls;
};

struct vt_opts {
	bool trace;           /* print every event */
	bool quiet;           /* no report on failure (a seed expected to fail) */
	int fail_permille;    /* -1: chosen by the seed */
	unsigned long trap_alloc;  /* backtrace at this allocation (0: none) */
};

/* Runs seed @seed. Returns true when every invariant held; otherwise
 * prints the seed, the step, the violation and the last events. */
bool vt_run(uint64_t seed, const struct vt_opts *o, struct vt_result *res);

void vt_result_add(struct vt_result *sum, const struct vt_result *r);

#endif
