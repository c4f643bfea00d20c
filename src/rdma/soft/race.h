/* SPDX-License-Identifier: BSD-2-Clause */
/* Race points of the soft provider: the places of its receive path, its CQ
 * notifications and its hand-overs of a QP between threads where "bytes
 * are in user space or a completion is in the ring" meets "who looks next"
 * (docs/soft-iwarp.md "Race points"). A test hook (rr_soft_test_set_race_hook)
 * runs at each, so that a test can make another thread act exactly there;
 * RPCRDMA_SOFT_PERTURB makes every thread yield or sleep at them instead
 * (a debugging aid, to make rare races of a loaded machine common on an
 * idle one). Without either, each point costs one relaxed atomic load. */
#ifndef RR_RDMA_SOFT_RACE_H
#define RR_RDMA_SOFT_RACE_H

#include <stdatomic.h>
#include <stdint.h>

enum soft_race {
	SOFT_RACE_RX_READ = 0, /* rx.c qp_rx: bytes read off the socket, not yet parsed */
	SOFT_RACE_PUSH,        /* cq.c rr_soft_cq_push: in the ring, before the wake-ups */
	SOFT_RACE_ARM,         /* cq_wait.c rr_soft_arm_cq: before the ring is armed */
	SOFT_RACE_POLL,        /* cq_wait.c rr_soft_poll_cq: ring empty, before receiving */
	SOFT_RACE_CQ_EPOLL,    /* cq_wait.c cq_progress: sockets ready, before reading them */
	SOFT_RACE_HAND,        /* lease.c balance_qp: handed to the thread, before the re-look */
	SOFT_RACE_THREAD,      /* progress.c: the progress thread woke, before ctx->lock */
	SOFT_RACE_SPIN,        /* sock.c rr_soft_sock_readv_fast: a spin's look found
				  nothing and its budget is not spent: the next
				  look follows */
	SOFT_RACE_ONE_QP,      /* cq_wait.c cq_one_hold: the CQ's one QP read without
				  qlock and held (fast_hold), before its rx_lock */
	SOFT_RACE_QUIESCE,     /* rx.c rr_soft_fast_quiesce: the fast reader told
				  to leave (fast_kill, shutdown), before the wait
				  that releases rx_lock */
	SOFT_RACE_COUNT
};

/* @obj: the QP (RX_READ, HAND, SPIN, QUIESCE), the CQ (PUSH, ARM, POLL, CQ_EPOLL, ONE_QP) or the
 * context (THREAD), as struct soft_qp / soft_cq / soft_ctx. */
typedef void (*rr_soft_race_fn)(enum soft_race pt, void *obj);

extern _Atomic(rr_soft_race_fn) rr_soft_race_hook;

/* Process-wide; NULL: none. Not used by the library itself. */
void rr_soft_test_set_race_hook(rr_soft_race_fn fn);

/* Reads RPCRDMA_SOFT_PERTURB ("US" or "US,READS"; parse only, no hook
 * installed): *@us the longest sleep at a race point in microseconds (0:
 * off), *@reads the receive budget per turn (SOFT_RX_READS unless given,
 * 1 makes every turn stop after one read). -EINVAL when malformed. */
int rr_soft_perturb_parse(const char *s, uint32_t *us, uint32_t *reads);

/* Installs the perturbing hook (every thread, at every point, in turn:
 * nothing, sched_yield, nothing, a sleep of up to @us microseconds), unless
 * a test hook is installed already. */
void rr_soft_perturb_start(uint32_t us);

/* Points of each kind passed since a hook was installed (any hook). */
uint64_t rr_soft_race_count(enum soft_race pt);

/* A point passed with a hook installed: counted, then the hook. */
void rr_soft_race_pass(enum soft_race pt, void *obj);

static inline void soft_race(enum soft_race pt, void *obj)
{
	if (atomic_load_explicit(&rr_soft_race_hook, memory_order_relaxed))
		rr_soft_race_pass(pt, obj);
}

#endif
