/* SPDX-License-Identifier: BSD-2-Clause */
/* The STag table a software provider uses to validate every tagged access
 * (RFC 5040 section 2.1 STags, section 5.1 memory protection checks, section
 * 7.1 Terminate error codes; draft-talpey-rdma-commit section 4 durable
 * regions): registration of long-lived regions and of invalidatable windows,
 * O(1) lookup by STag, key rotation, access-rights, bounds, PD and QP
 * association checks, local and remote invalidation.
 *
 * STag layout: bits 31..8 index, bits 7..0 key. The index is
 * (epoch << slot_bits) | slot, the table holding 2^slot_bits slots. Every
 * (re)registration, window bind or slot reuse draws a fresh key from
 * rr_random among the keys that slot has not yet issued in its current
 * epoch; when all 256 are used the epoch advances; when the epochs run out
 * the slot is retired for good (the registration moves to a fresh slot). So
 * an STag value, once invalidated or deregistered, is never issued again by
 * this table and never grants access again. Slot 0 of epoch 0 is never used:
 * STag 0 is never issued.
 *
 * Two address spaces: a local access (an lkey in an SGE, a window bind)
 * names bytes by their virtual address; a remote access names them by Tagged
 * Offset, base_to + i for byte i, where base_to is chosen by the provider
 * (the soft provider draws it at random, rr_mrt_random_to: a peer learns no
 * address of ours from the offsets it is given).
 *
 * Check results (negative errno -> RFC 5040 Terminate, layer RDMAP or DDP):
 *   -ENOENT     Invalid STag: unknown, freed, invalidated, unbound window, and
 *               for a remote access also an STag of another PD or a window
 *               bound to another QP (one answer for every STag the peer may
 *               not use, so a sweep learns nothing about STags that exist)
 *   -ERANGE     Base or bounds violation
 *   -EOVERFLOW  Tagged Offset wrap (offset + length overflows 64 bits)
 *   -EACCES     Access rights violation
 *   -EPERM      local access: STag not associated with this PD
 *   -EINVAL     STag cannot be invalidated (a long-lived MR of this PD)
 *
 * Zero-length accesses (RFC 5040 section 5.1: zero-length RDMA Read, Write
 * and Read Response carry no data) are checked with len 0: the STag must
 * still be valid, in the PD and have the right, and the offset must lie in
 * [base, base + length] (one past the end is allowed). The provider may skip
 * the lookup for zero-length DDP segments if its protocol says so.
 *
 * Thread safety: every function takes the table mutex, except the hit of
 * rr_mrt_check_local (a caller-owned copy checked against the table's
 * generation, an atomic); lookups return a copy (struct rr_mrt_ref), so the
 * caller never holds a pointer into the table. */
#ifndef RR_RDMA_MR_TABLE_H
#define RR_RDMA_MR_TABLE_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/common.h"
#include "rpcrdma/rdma.h"

#define RR_MRT_SLOT_BITS_MIN 2
#define RR_MRT_SLOT_BITS_MAX 20
#define RR_MRT_CHUNK 256u

enum rr_mrt_kind {
	RR_MRT_MR = 1,  /* long-lived: lkey and rkey, never invalidated */
	RR_MRT_MW = 2,  /* invalidatable window (type 2: QP-bound) */
};

/* Extra access bit for rr_mrt_check: the access is local (an lkey in an
 * SGE): windows are refused, a long-lived MR needs no remote right. */
#define RR_MRT_LOCAL (1u << 31)

/* A registered region as the provider describes it: byte i is at virtual
 * address addr + i (local accesses) and has Tagged Offset base_to + i
 * (remote accesses). */
struct rr_mrt_region {
	uint8_t *addr;
	uint64_t length;
	uint64_t base_to;
	uint32_t access;      /* RPCRDMA_ACCESS_* */
	bool durable;
	int durable_fd;
	uint64_t durable_offset;
};

/* What a successful check returns: where the access lands. */
struct rr_mrt_ref {
	uint8_t *ptr;         /* address of the first byte accessed */
	bool durable;
	int durable_fd;
	uint64_t durable_offset; /* file offset of ptr */
	void *owner;          /* the provider object registered with the STag */
	enum rr_mrt_kind kind;
};

struct rr_mrt_entry;

/* A one-entry cache of a successful local check (the lkey a QP posts again
 * and again: its connection's send or receive buffers), so that the next
 * check of that lkey takes no lock (rr_mrt_check_local). Owned by its
 * caller, who serializes its use (a QP's transmit lock, its receive lock);
 * zero-initialized = empty. It holds a copy of the MR's region, valid while
 * the table's mr_gen has not moved: every rereg, and every dereg of an MR
 * some cache was filled with, moves it (an MR no cache holds leaves the
 * others' copies good). A passed check that missed fills it, except that a
 * good copy of another MR is replaced only by an STag that missed twice
 * (@pending, kept across a fill by another STag): a region registered for
 * one work request (a Reply's Write source) does not evict the send
 * buffers' MR, and gives its copy back at the send buffers' next miss. A copy made stale by
 * another MR's change counts as good again, at such a miss, when its STag
 * still names a valid MR of its PD (checked under the table's lock). */
struct rr_mrt_lcache {
	uint64_t gen;         /* mr_gen when filled; 0: empty */
	uint32_t stag;
	uint32_t pending;     /* the STag that last missed and did not fill it
				 (0 once it filled it) */
	const void *pd;
	void *owner;
	struct rr_mrt_region r;
};

#define RR_MRT_RND_POOL 256u

struct rr_mrt {
	pthread_mutex_t lock;
	const struct rpcrdma_env *env;
	unsigned slot_bits;
	uint32_t nslots;
	uint32_t max_epoch;       /* inclusive */
	struct rr_mrt_entry **chunks;
	uint32_t nchunks;         /* allocated chunk count */
	uint32_t next_unused;     /* first slot never handed out */
	uint32_t free_head;       /* free list of reusable slots (0 = none) */
	uint32_t live;            /* slots in use */
	uint32_t retired;
	/* Key randomness drawn from rr_random RR_MRT_RND_POOL bytes at a time
	 * (one system call per many registrations, not one each); every byte
	 * is used once and wiped when used. */
	uint8_t rnd[RR_MRT_RND_POOL];
	uint32_t rnd_left;        /* unused bytes at the end of rnd[] */
	/* Moved (under lock) by every rereg and dereg: the only changes that
	 * can make a passed local check fail (a local check accepts MRs
	 * alone; windows never pass one). Starts at 1 (0: empty cache). */
	_Atomic uint64_t mr_gen;
	/* Local checks that a caller's cache did not answer (taken the
	 * table's lock): for tests and statistics (rr_mrt_local_misses). */
	_Atomic uint64_t local_misses;
	/* Moved (under lock) by every change that can make a passed remote
	 * check fail: an entry freed (slot_put: dereg, a window freed), a
	 * window invalidated (unbind), an entry re-keyed (entry_rekey: rereg,
	 * bind). Starts at 1 (0: empty cache). */
	_Atomic uint64_t rm_gen;
	/* Remote checks that a caller's cache did not answer. */
	_Atomic uint64_t remote_misses;
};

/* Initializes @t with 2^@slot_bits slots (RR_MRT_SLOT_BITS_MIN..MAX). */
int rr_mrt_init(struct rr_mrt *t, const struct rpcrdma_env *env, unsigned slot_bits);
/* Frees the table (registrations still present are dropped). */
void rr_mrt_fini(struct rr_mrt *t);

/* Long-lived registration of @r in PD @pd; *@stag gets a new STag. -ENOSPC
 * when no slot is left, -ENOMEM. */
int rr_mrt_reg(struct rr_mrt *t, const struct rr_mrt_region *r, const void *pd, void *owner,
	       uint32_t *stag);
/* Replaces the region of MR *@stag and re-keys it; on success *@stag is the
 * new STag and the old one is dead; on failure nothing changed. */
int rr_mrt_rereg(struct rr_mrt *t, uint32_t *stag, const struct rr_mrt_region *r);
/* Frees a long-lived registration. -EBUSY while windows bound through it
 * are valid. */
int rr_mrt_dereg(struct rr_mrt *t, uint32_t stag);

/* Allocates an unbound window in @pd; *@stag is its (invalid) STag. */
int rr_mrt_mw_alloc(struct rr_mrt *t, const void *pd, void *owner, uint32_t *stag);
/* Binds window *@stag (must be unbound or invalidated: -EBUSY if valid) to
 * the virtual addresses [addr, addr + length) of the MR named by
 * @parent_lkey for @qp with remote @access; the window's Tagged Offsets start
 * at @base_to (its first byte). Checks: parent valid MR in the same PD with MW_BIND, range inside
 * the parent (-ERANGE), REMOTE_WRITE needs parent LOCAL_WRITE (-EACCES), as
 * verbs. Zero length binds are allowed (a window naming no bytes). On success
 * *@stag is the new STag (new key). */
int rr_mrt_mw_bind(struct rr_mrt *t, uint32_t *stag, uint32_t parent_lkey, uint64_t addr,
		   uint64_t length, uint32_t access, const void *pd, const void *qp,
		   uint64_t base_to);
/* Frees a window (bound or not). */
int rr_mrt_mw_free(struct rr_mrt *t, uint32_t stag);

/* Invalidates window @stag. @qp NULL = local invalidation by the owner (PD
 * check only); non-NULL = remote (Send with Invalidate arriving on @qp): the
 * window must be bound to that QP. Errors as listed above: -EINVAL for an MR
 * of @pd; remotely, an STag of another PD or QP is -ENOENT like an unknown
 * one. */
int rr_mrt_invalidate(struct rr_mrt *t, uint32_t stag, const void *pd, const void *qp);

/* Validates an access of @len bytes through @stag with rights @need
 * (RPCRDMA_ACCESS_REMOTE_READ / _REMOTE_WRITE at Tagged Offset @to, or
 * RR_MRT_LOCAL [| RPCRDMA_ACCESS_LOCAL_WRITE] for lkeys, @to then a virtual
 * address) from @pd / @qp (@qp may be NULL for local accesses). On success
 * fills @ref (may be NULL). */
int rr_mrt_check(struct rr_mrt *t, uint32_t stag, uint64_t to, uint64_t len, uint32_t need,
		 const void *pd, const void *qp, struct rr_mrt_ref *ref);

/* rr_mrt_check of a local access (@need includes RR_MRT_LOCAL, @qp NULL)
 * through the one-entry cache @c: a hit (same STag and PD, no rereg or
 * dereg since it was filled) checks rights and bounds against the cached
 * copy without the table's lock; anything else (a miss, a failure) is
 * rr_mrt_check's answer, and a success refills @c. Same results as
 * rr_mrt_check. @c is used under the caller's own serialization. */
int rr_mrt_check_local(struct rr_mrt *t, struct rr_mrt_lcache *c, uint32_t stag, uint64_t addr,
		       uint64_t len, uint32_t need, const void *pd, struct rr_mrt_ref *ref);

/* A one-entry cache of a successful remote check (the STag a peer's
 * tagged segments name one after another: a Write chunk's, placed segment
 * by segment), so that the next check of that STag from the same PD and
 * QP takes no lock (rr_mrt_check_remote). Owned by its caller, who
 * serializes its use (a QP's receive path); zero-initialized = empty. It
 * holds a copy of the MR's or window's region, valid while the table's
 * rm_gen has not moved. */
struct rr_mrt_rcache {
	uint64_t gen;         /* rm_gen when filled; 0: empty */
	uint32_t stag;
	enum rr_mrt_kind kind;
	const void *pd;
	const void *qp;
	void *owner;
	struct rr_mrt_region r;
};

/* rr_mrt_check of a remote access (@need without RR_MRT_LOCAL: -EINVAL)
 * through the one-entry cache @c: a hit (same STag, PD and QP, no entry
 * freed, invalidated or re-keyed since it was filled) checks rights, wrap
 * and bounds against the cached copy without the table's lock; anything
 * else (a miss, a failure) is rr_mrt_check's answer, and a success
 * refills @c. Same results as rr_mrt_check (test
 * rdma_mrt_remote_cache_as_check, fuzz_soft_rx). */
int rr_mrt_check_remote(struct rr_mrt *t, struct rr_mrt_rcache *c, uint32_t stag, uint64_t to,
			uint64_t len, uint32_t need, const void *pd, const void *qp,
			struct rr_mrt_ref *ref);

/* The access rights a check may ask for (with RR_MRT_LOCAL). */
#define RR_MRT_RIGHTS (RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_READ | \
		       RPCRDMA_ACCESS_REMOTE_WRITE)

/* rr_mrt_local_ptr past a cache hit: rr_mrt_check_local's answer. Never
 * inlined: a miss is rare, and inlined (link-time) into a work request's
 * post it made the hit path keep its arguments on the stack (issue 16
 * part HA). */
__attribute__((noinline)) int rr_mrt_local_ptr_miss(struct rr_mrt *t, struct rr_mrt_lcache *c, uint32_t stag,
			  uint64_t addr, uint64_t len, uint32_t need, const void *pd, uint8_t **ptr);

/* rr_mrt_check_local when only the address is wanted (a work request's
 * local SGE; @t and @c not NULL): on success *@ptr is where @addr lands.
 * A cache hit is checked inline (the same checks as rr_mrt_check_local's
 * hit, in its order) and builds no rr_mrt_ref; anything else goes the long
 * way, which gives the errno. Same results as rr_mrt_check_local. Always
 * inlined: with more callers GCC made it a function (a call and its saved
 * registers per SGE; issue 16 part DG). */
static inline __attribute__((always_inline)) int
rr_mrt_local_ptr(struct rr_mrt *t, struct rr_mrt_lcache *c, uint32_t stag, uint64_t addr,
		 uint64_t len, uint32_t need, const void *pd, uint8_t **ptr)
{
	if ((need & RR_MRT_LOCAL) && !(need & ~(RR_MRT_RIGHTS | RR_MRT_LOCAL)) && c->gen &&
	    c->stag == stag && c->pd == pd &&
	    c->gen == atomic_load_explicit(&t->mr_gen, memory_order_acquire) &&
	    !((need & RR_MRT_RIGHTS) & ~c->r.access)) {
		uint64_t base = (uint64_t)(uintptr_t)c->r.addr;

		if (addr >= base && addr - base <= c->r.length &&
		    len <= c->r.length - (addr - base)) {
			*ptr = c->r.addr + (addr - base);
			return 0;
		}
	}
	return rr_mrt_local_ptr_miss(t, c, stag, addr, len, need, pd, ptr);
}

/* An unpredictable Tagged Offset base for a region at virtual address @va
 * of @length bytes: random bits above the page offset (which is kept), and
 * room for @length bytes below 2^63. From the table's random pool. */
uint64_t rr_mrt_random_to(struct rr_mrt *t, uint64_t va, uint64_t length);

/* The Tagged Offset base of a region no remote access can reach (no
 * remote right, no MW_BIND): fixed, drawing nothing from the pool, and as
 * rr_mrt_random_to's it tells nothing of @va but its page offset: 2^32 plus
 * the page offset (0 plus it for a region of more than 2^62 bytes). */
static inline uint64_t rr_mrt_local_to(uint64_t va, uint64_t length)
{
	if (length > (1ull << 62))
		return va & 0xfffull;
	return (va & 0xfffull) | (1ull << 32);
}

/* Introspection for tests and statistics. */
uint32_t rr_mrt_live(struct rr_mrt *t);
uint32_t rr_mrt_retired(struct rr_mrt *t);
/* How many rr_mrt_check_local calls the caller's cache did not answer. */
uint64_t rr_mrt_local_misses(struct rr_mrt *t);
/* How many rr_mrt_check_remote calls the caller's cache did not answer. */
uint64_t rr_mrt_remote_misses(struct rr_mrt *t);

/* Makes [ptr, ptr + len) of a durable region durable (msync MS_SYNC over the
 * covering pages). 0 or negative errno: -ERANGE when the range reaches past
 * the end of the region's file (it shrank), -EIO etc. */
int rr_mrt_make_durable(const struct rr_mrt_ref *ref, uint64_t len);

#endif
