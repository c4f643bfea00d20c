/* SPDX-License-Identifier: BSD-2-Clause */
/* Who serves a connected QP's socket: its consumer while its CQs are
 * attended, else the progress thread (lease.c); the progress thread's epoll
 * set and wake-up. */
#ifndef RR_SOFT_LEASE_H
#define RR_SOFT_LEASE_H

#include "rdma/soft/soft.h"

/* @o into / out of the progress thread's epoll set (ctx->lock held, except
 * rr_soft_obj_mod for a QP: tx_lock), interest @events. */
void rr_soft_obj_add(struct soft_ctx *c, struct soft_obj *o, uint32_t events);
void rr_soft_obj_mod(struct soft_ctx *c, struct soft_obj *o, uint32_t events);
void rr_soft_obj_del(struct soft_ctx *c, struct soft_obj *o);
/* Whether @o is still in the set (ctx->lock held): an event read before it
 * left is dropped. */
bool rr_soft_obj_live(struct soft_ctx *c, struct soft_obj *o);
/* The same for an object an event of the progress thread's latest wait
 * names, without a walk over the set (ctx->lock held; equal to
 * rr_soft_obj_live for such an object: tests/soft/test_epoll_set.c);
 * rr_soft_gone_forget, called by the thread before each wait with the
 * lock held, starts the count of departures it looks at. */
bool rr_soft_obj_live_since(struct soft_ctx *c, struct soft_obj *o);
void rr_soft_gone_forget(struct soft_ctx *c);
/* Wakes the progress thread: it looks at its deadlines. */
void rr_soft_wake(struct soft_ctx *ctx);
/* The progress thread serves (@on) or leaves the QP's socket; ctx->lock
 * held. The CQs count how many of their QPs it serves (soft_cq.handed). */
void rr_soft_qp_hand(struct soft_qp *qp, bool on);
/* A CQ's last use (soft_cq.last_use_ns) is a time on the lease clock, or
 * with this bit set an undated use: the library's own wait (wait_cq_own)
 * leaves without a clock read, its use after the time the other bits hold;
 * the progress thread's next look at the CQ dates it (its own clock read
 * at that look), so such a lease ends SOFT_LEASE_NS after that look: at
 * least SOFT_LEASE_NS after the wait left, and at most one more lease
 * (+ SOFT_TICK_MS) later (docs/soft-iwarp.md "Who reads a socket"). */
#define SOFT_USE_UNDATED (1ull << 63)

/* @q's consumer may have left it (its last waiter left, a completion
 * consumed its arm, it took QPs back): wakes the progress thread when the
 * thread would look later than the end of @q's lease (+ SOFT_TICK_MS); an
 * undated use counts from the time it holds (earlier than the use: the
 * thread may be woken when it need not be, never left asleep past the
 * lease). Callers store what changed (last_use_ns, waiting, the arm)
 * first. */
void rr_soft_lease_check(struct soft_cq *q);
/* Hands QPs nobody attends to the progress thread and takes attended ones
 * back from it (ctx->lock held). Returns the earliest moment a QP left
 * with its consumer could stop being attended (UINT64_MAX: none), or an
 * earlier one. rr_soft_balance walks by CQ and skips the QPs of a CQ that
 * is attended and serves none of them from the thread (the common case:
 * no look at each connection every lease); rr_soft_balance_all is the
 * general walk over every connected QP, which it must equal in what it
 * hands over (tests/soft/test_lease_walk.c). */
uint64_t rr_soft_balance(struct soft_ctx *c, uint64_t now);
uint64_t rr_soft_balance_all(struct soft_ctx *c, uint64_t now);
/* The same for one QP just connected (ctx->lock held): a consumer already
 * attending its CQ takes it at once, without a walk over every QP. Both
 * keep ctx->bal_next, the earliest moment a walk is due. */
void rr_soft_balance_one(struct soft_ctx *c, struct soft_qp *qp, uint64_t now);

#endif
