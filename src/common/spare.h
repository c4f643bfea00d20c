/* SPDX-License-Identifier: BSD-2-Clause */
/* A few freed objects of one kind kept for reuse (issue 16 "Per-call
 * cost": no allocation per call on the hot path). An owner (an RPC client,
 * a transport client, a session) puts the object of a finished call into
 * its spare slots instead of freeing it, and takes it back for the next
 * call instead of allocating; objects that find no free slot are freed,
 * so at most RR_SPARE_SLOTS objects stay allocated per owner beyond the
 * ones in use. The objects still come from rr_alloc (struct rpcrdma_env)
 * and go back through rr_free when the owner drains its slots at its
 * destruction. Lock-free: a slot is taken by an atomic exchange and filled
 * by a compare-and-swap, so any thread may put or take (release on put,
 * acquire on take: what the putter wrote is seen by the taker). A taken
 * object holds whatever its last user left: the taker initialises every
 * field it relies on. */
#ifndef RR_SPARE_H
#define RR_SPARE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"

/* Enough for a synchronous caller (1) and a few asynchronous ones; more
 * calls in flight than this allocate and free as before. */
#define RR_SPARE_SLOTS 4

struct rr_spare {
	void *_Atomic slot[RR_SPARE_SLOTS];
};

/* A spare object, or NULL (none kept): the caller owns it. */
static inline void *rr_spare_take(struct rr_spare *s)
{
	for (unsigned i = 0; i < RR_SPARE_SLOTS; i++) {
		void *p;

		if (!atomic_load_explicit(&s->slot[i], memory_order_relaxed))
			continue;
		p = atomic_exchange_explicit(&s->slot[i], NULL, memory_order_acquire);
		if (p)
			return p;
	}
	return NULL;
}

/* Keeps @p for a later rr_spare_take: true, and @s owns it; false (every
 * slot full), and the caller still owns it (and frees it). */
static inline bool rr_spare_put(struct rr_spare *s, void *p)
{
	for (unsigned i = 0; i < RR_SPARE_SLOTS; i++) {
		void *expected = NULL;

		if (atomic_load_explicit(&s->slot[i], memory_order_relaxed))
			continue;
		if (atomic_compare_exchange_strong_explicit(&s->slot[i], &expected, p,
							    memory_order_release,
							    memory_order_relaxed))
			return true;
	}
	return false;
}

/* A zero-filled object of @size bytes, from @s or else from rr_zalloc on
 * @env, except that in a spare one the @keep_len bytes at @keep_off keep
 * what they held (a buffer its owner reuses); NULL: no memory. *@fresh
 * tells which. */
static inline void *rr_spare_take_zeroed(struct rr_spare *s, const struct rpcrdma_env *env,
					 size_t size, size_t keep_off, size_t keep_len,
					 bool *fresh)
{
	unsigned char *p = rr_spare_take(s);

	*fresh = p == NULL;
	if (!p)
		return rr_zalloc(env, size);
	memset(p, 0, keep_off);
	memset(p + keep_off + keep_len, 0, size - keep_off - keep_len);
	return p;
}

#endif
