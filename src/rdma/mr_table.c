/* SPDX-License-Identifier: BSD-2-Clause */
/* STag table of the software provider (RFC 5040 section 2.1 STags, section
 * 5.1 protection checks, section 7.1 error codes as listed in mr_table.h):
 * slots in lazily allocated chunks, O(1) lookup from the STag's index,
 * random key bytes never reused within a slot's epoch, epochs then slot
 * retirement so no STag value is ever issued twice. */
#include "rdma/mr_table.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpcrdma/rdma.h"

enum { ST_FREE = 0, ST_VALID, ST_INVALID, ST_RETIRED };

/* The access rights a check may ask for (with RR_MRT_LOCAL). */
#define MRT_RIGHTS RR_MRT_RIGHTS

struct rr_mrt_entry {
	uint32_t stag;          /* last STag issued (0 before the first) */
	uint8_t state;
	uint8_t kind;
	uint16_t keys_used;     /* in this epoch */
	uint32_t epoch;
	uint64_t keymap[4];     /* keys issued in this epoch */
	const void *pd;
	const void *qp;         /* windows: bound QP */
	void *owner;
	struct rr_mrt_region r;
	uint32_t parent_slot;   /* windows: parent MR while valid */
	uint32_t nbound;        /* MRs: valid windows bound through it */
	uint32_t next_free;
	/* MRs: a local check's cache was filled with this STag (check_locked):
	 * its rereg or dereg must move mr_gen; one no cache ever held needs
	 * not (no cache can answer for it), so the others' copies live on. */
	bool lcached;
};

static uint32_t chunk_size(const struct rr_mrt *t)
{
	return RR_MIN(RR_MRT_CHUNK, t->nslots);
}

/* A chunk's bytes. Its memory comes mapped zero-filled (rr_alloc_pages):
 * resident only as far as slots are used. From the allocator, calloc on a
 * progress thread cleared the chunk: 7 page faults in that memset at the
 * first registration of a fresh server, on the path to its first MPA
 * Reply (issue 16 part AT). */
static size_t chunk_bytes(const struct rr_mrt *t)
{
	return (size_t)chunk_size(t) * sizeof(struct rr_mrt_entry);
}

static struct rr_mrt_entry *slot_entry(struct rr_mrt *t, uint32_t slot)
{
	uint32_t cs = chunk_size(t);

	return &t->chunks[slot / cs][slot % cs];
}

int rr_mrt_init(struct rr_mrt *t, const struct rpcrdma_env *env, unsigned slot_bits)
{
	if (!t || slot_bits < RR_MRT_SLOT_BITS_MIN || slot_bits > RR_MRT_SLOT_BITS_MAX)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->env = rr_env(env);
	t->slot_bits = slot_bits;
	t->nslots = 1u << slot_bits;
	t->max_epoch = (1u << (24 - slot_bits)) - 1;
	t->nchunks = t->nslots / chunk_size(t);
	t->chunks = rr_zalloc(t->env, t->nchunks * sizeof(*t->chunks));
	if (!t->chunks)
		return -ENOMEM;
	t->next_unused = 1; /* slot 0 is never used: STag 0 is never issued */
	atomic_init(&t->mr_gen, 1);
	atomic_init(&t->rm_gen, 1);
	atomic_init(&t->local_misses, 0);
	if (pthread_mutex_init(&t->lock, NULL) != 0) {
		rr_free(t->env, t->chunks);
		t->chunks = NULL;
		return -ENOMEM;
	}
	return 0;
}

void rr_mrt_fini(struct rr_mrt *t)
{
	if (!t || !t->chunks)
		return;
	for (uint32_t i = 0; i < t->nchunks; i++)
		rr_free_pages(t->env, t->chunks[i], chunk_bytes(t));
	rr_free(t->env, t->chunks);
	t->chunks = NULL;
	memset(t->rnd, 0, sizeof(t->rnd));
	t->rnd_left = 0;
	pthread_mutex_destroy(&t->lock);
}

/* One unpredictable byte from the pool (refilled from rr_random). */
static uint8_t rnd_byte(struct rr_mrt *t)
{
	uint8_t b;

	if (!t->rnd_left) {
		rr_random(t->env, t->rnd, sizeof(t->rnd));
		t->rnd_left = sizeof(t->rnd);
	}
	b = t->rnd[sizeof(t->rnd) - t->rnd_left];
	t->rnd[sizeof(t->rnd) - t->rnd_left] = 0;
	t->rnd_left--;
	return b;
}

/* Draws a key the slot has not issued in its epoch, advancing the epoch when
 * all 256 are used: up to 16 random bytes until one is a free key, else the
 * first free key after the first byte. -ENOSPC when the slot is exhausted
 * (caller retires it). */
static int slot_rekey(struct rr_mrt *t, uint32_t slot, struct rr_mrt_entry *e)
{
	uint8_t rnd[16];
	int key = -1;

	if (e->keys_used == 256) {
		if (e->epoch >= t->max_epoch)
			return -ENOSPC;
		e->epoch++;
		memset(e->keymap, 0, sizeof(e->keymap));
		e->keys_used = 0;
	}
	for (size_t i = 0; i < sizeof(rnd) && key < 0; i++) {
		rnd[i] = rnd_byte(t);
		if (!(e->keymap[rnd[i] >> 6] >> (rnd[i] & 63) & 1))
			key = rnd[i];
	}
	for (unsigned i = 0; key < 0 && i < 256; i++) {
		unsigned k = (rnd[0] + i) & 255u;

		if (!(e->keymap[k >> 6] >> (k & 63) & 1))
			key = (int)k;
	}
	if (key < 0)
		return -ENOSPC; /* cannot happen: keys_used < 256 */
	e->keymap[key >> 6] |= 1ull << (key & 63);
	e->keys_used++;
	e->stag = ((e->epoch << t->slot_bits | slot) << 8) | (uint32_t)key;
	return 0;
}

/* Takes a slot off the free list or from the never-used range and keys it. */
static int slot_get(struct rr_mrt *t, uint32_t *slotp, struct rr_mrt_entry **ep)
{
	for (;;) {
		struct rr_mrt_entry *e;
		uint32_t slot;

		if (t->free_head) {
			slot = t->free_head;
			e = slot_entry(t, slot);
			t->free_head = e->next_free;
		} else if (t->next_unused < t->nslots) {
			uint32_t cs = chunk_size(t);

			slot = t->next_unused;
			if (!t->chunks[slot / cs]) {
				t->chunks[slot / cs] = rr_alloc_pages(t->env, chunk_bytes(t));
				if (!t->chunks[slot / cs])
					return -ENOMEM;
			}
			t->next_unused++;
			e = slot_entry(t, slot);
		} else {
			return -ENOSPC;
		}
		e->next_free = 0;
		if (slot_rekey(t, slot, e) < 0) {
			e->state = ST_RETIRED;
			t->retired++;
			continue;
		}
		*slotp = slot;
		*ep = e;
		return 0;
	}
}

static void slot_put(struct rr_mrt *t, uint32_t slot, struct rr_mrt_entry *e)
{
	atomic_fetch_add(&t->rm_gen, 1);   /* cached remote checks die */
	e->state = ST_FREE;
	e->owner = NULL;
	e->pd = NULL;
	e->qp = NULL;
	e->nbound = 0;
	e->next_free = t->free_head;
	t->free_head = slot;
}

/* The entry an STag names (any state), or NULL. */
static struct rr_mrt_entry *lookup(struct rr_mrt *t, uint32_t stag, uint32_t *slotp)
{
	uint32_t slot = (stag >> 8) & (t->nslots - 1);
	struct rr_mrt_entry *e;

	if (slot == 0 || slot >= t->next_unused)
		return NULL;
	e = slot_entry(t, slot);
	if (e->state == ST_FREE || e->state == ST_RETIRED || e->stag != stag)
		return NULL;
	if (slotp)
		*slotp = slot;
	return e;
}

/* Re-keys the entry in @slot; when the slot is exhausted the entry moves to a
 * fresh slot and the old one is retired. On failure nothing changed. */
static int entry_rekey(struct rr_mrt *t, uint32_t *slotp, struct rr_mrt_entry **ep)
{
	struct rr_mrt_entry *e = *ep, save = *e, *n;
	uint32_t nslot;
	int rc;

	atomic_fetch_add(&t->rm_gen, 1);   /* cached remote checks die */
	rc = slot_rekey(t, *slotp, e);
	if (rc == 0)
		return 0;
	*e = save;
	rc = slot_get(t, &nslot, &n);
	if (rc < 0)
		return rc;
	n->state = e->state;
	n->kind = e->kind;
	n->pd = e->pd;
	n->qp = e->qp;
	n->owner = e->owner;
	n->r = e->r;
	n->parent_slot = e->parent_slot;
	n->nbound = e->nbound;
	e->state = ST_RETIRED;
	t->retired++;
	*slotp = nslot;
	*ep = n;
	return 0;
}

int rr_mrt_reg(struct rr_mrt *t, const struct rr_mrt_region *r, const void *pd, void *owner,
	       uint32_t *stag)
{
	struct rr_mrt_entry *e;
	uint32_t slot = 0;
	int rc;

	if (!t || !r || !stag || (r->length && !r->addr))
		return -EINVAL;
	if (r->length && r->base_to > UINT64_MAX - (r->length - 1))
		return -EOVERFLOW;
	pthread_mutex_lock(&t->lock);
	rc = slot_get(t, &slot, &e);
	if (rc == 0) {
		e->state = ST_VALID;
		e->kind = RR_MRT_MR;
		e->pd = pd;
		e->qp = NULL;
		e->owner = owner;
		e->r = *r;
		e->nbound = 0;
		e->lcached = false;
		t->live++;
		*stag = e->stag;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_rereg(struct rr_mrt *t, uint32_t *stag, const struct rr_mrt_region *r)
{
	struct rr_mrt_entry *e;
	uint32_t slot = 0;
	int rc;

	if (!t || !r || !stag || (r->length && !r->addr))
		return -EINVAL;
	if (r->length && r->base_to > UINT64_MAX - (r->length - 1))
		return -EOVERFLOW;
	pthread_mutex_lock(&t->lock);
	e = lookup(t, *stag, &slot);
	if (!e || e->kind != RR_MRT_MR) {
		rc = -ENOENT;
	} else if (e->nbound) {
		rc = -EBUSY;
	} else {
		rc = entry_rekey(t, &slot, &e);
		if (rc == 0) {
			e->r = *r;
			*stag = e->stag;
			e->lcached = false;   /* the new STag: in no cache yet */
			atomic_fetch_add(&t->mr_gen, 1);   /* cached checks die */
		}
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_dereg(struct rr_mrt *t, uint32_t stag)
{
	struct rr_mrt_entry *e;
	uint32_t slot = 0;
	int rc = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = lookup(t, stag, &slot);
	if (!e || e->kind != RR_MRT_MR) {
		rc = -ENOENT;
	} else if (e->nbound) {
		rc = -EBUSY;
	} else {
		/* a copy of it in a cache dies; without one no cache can
		 * name it (an STag is never issued twice), and the copies of
		 * other MRs in the caches stay good */
		if (e->lcached)
			atomic_fetch_add(&t->mr_gen, 1);
		e->lcached = false;
		slot_put(t, slot, e);
		t->live--;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_mw_alloc(struct rr_mrt *t, const void *pd, void *owner, uint32_t *stag)
{
	struct rr_mrt_entry *e;
	uint32_t slot = 0;
	int rc;

	if (!t || !stag)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	rc = slot_get(t, &slot, &e);
	if (rc == 0) {
		e->state = ST_INVALID;
		e->kind = RR_MRT_MW;
		e->pd = pd;
		e->qp = NULL;
		e->owner = owner;
		memset(&e->r, 0, sizeof(e->r));
		e->r.durable_fd = -1;
		t->live++;
		*stag = e->stag;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static void unbind(struct rr_mrt *t, struct rr_mrt_entry *e)
{
	struct rr_mrt_entry *p;

	if (e->state != ST_VALID)
		return;
	atomic_fetch_add(&t->rm_gen, 1);   /* cached remote checks die */
	e->state = ST_INVALID;
	e->qp = NULL;
	p = slot_entry(t, e->parent_slot);
	if (p->nbound)
		p->nbound--;
}

int rr_mrt_mw_bind(struct rr_mrt *t, uint32_t *stag, uint32_t parent_lkey, uint64_t addr,
		   uint64_t length, uint32_t access, const void *pd, const void *qp,
		   uint64_t base_to)
{
	struct rr_mrt_entry *e, *p;
	uint32_t slot = 0, pslot = 0;
	uint64_t off;
	int rc;

	if (!t || !stag)
		return -EINVAL;
	if (access & ~(RPCRDMA_ACCESS_LOCAL_WRITE | RPCRDMA_ACCESS_REMOTE_READ |
		       RPCRDMA_ACCESS_REMOTE_WRITE))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = lookup(t, *stag, &slot);
	p = lookup(t, parent_lkey, &pslot);
	if (!e || e->kind != RR_MRT_MW) {
		rc = -ENOENT;
		goto out;
	}
	if (e->pd != pd) {
		rc = -EPERM;
		goto out;
	}
	if (e->state == ST_VALID) {
		rc = -EBUSY;
		goto out;
	}
	if (!p || p->kind != RR_MRT_MR || p->state != ST_VALID) {
		rc = -ENOENT;
		goto out;
	}
	if (p->pd != pd) {
		rc = -EPERM;
		goto out;
	}
	if (!(p->r.access & RPCRDMA_ACCESS_MW_BIND) ||
	    ((access & RPCRDMA_ACCESS_REMOTE_WRITE) &&
	     !(p->r.access & RPCRDMA_ACCESS_LOCAL_WRITE))) {
		rc = -EACCES;
		goto out;
	}
	if (addr < (uint64_t)(uintptr_t)p->r.addr || length > UINT64_MAX - addr) {
		rc = -ERANGE;
		goto out;
	}
	off = addr - (uint64_t)(uintptr_t)p->r.addr;
	if (off > p->r.length || length > p->r.length - off) {
		rc = -ERANGE;
		goto out;
	}
	if (length && base_to > UINT64_MAX - (length - 1)) {
		rc = -EOVERFLOW;
		goto out;
	}
	rc = entry_rekey(t, &slot, &e);
	if (rc < 0)
		goto out;
	e->state = ST_VALID;
	e->qp = qp;
	e->parent_slot = pslot;
	e->r.addr = p->r.addr + off;
	e->r.length = length;
	e->r.base_to = base_to;
	e->r.access = access;
	e->r.durable = p->r.durable;
	e->r.durable_fd = p->r.durable_fd;
	e->r.durable_offset = p->r.durable_offset + off;
	p->nbound++;
	*stag = e->stag;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_mw_free(struct rr_mrt *t, uint32_t stag)
{
	struct rr_mrt_entry *e;
	uint32_t slot = 0;
	int rc = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = lookup(t, stag, &slot);
	if (!e || e->kind != RR_MRT_MW) {
		rc = -ENOENT;
	} else {
		unbind(t, e);
		slot_put(t, slot, e);
		t->live--;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_invalidate(struct rr_mrt *t, uint32_t stag, const void *pd, const void *qp)
{
	struct rr_mrt_entry *e;
	int rc = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = lookup(t, stag, NULL);
	if (!e || e->state != ST_VALID)
		rc = -ENOENT;
	else if (e->pd != pd)
		rc = qp ? -ENOENT : -EPERM;   /* remotely: no oracle */
	else if (e->kind != RR_MRT_MW)
		rc = -EINVAL;
	else if (qp && e->qp != qp)
		rc = -ENOENT;
	else
		unbind(t, e);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

/* Rights, wrap and bounds of an access to region @r (@local: by virtual
 * address, else by Tagged Offset); on success fills @ref (may be NULL). */
static int region_check(const struct rr_mrt_region *r, bool local, uint64_t to, uint64_t len,
			uint32_t need, void *owner, enum rr_mrt_kind kind, struct rr_mrt_ref *ref)
{
	uint64_t off, base;

	if ((need & MRT_RIGHTS) & ~r->access)
		return -EACCES;
	if (len > UINT64_MAX - to)
		return -EOVERFLOW;
	base = local ? (uint64_t)(uintptr_t)r->addr : r->base_to;
	if (to < base)
		return -ERANGE;
	off = to - base;
	if (off > r->length || len > r->length - off)
		return -ERANGE;
	if (ref) {
		ref->ptr = r->addr + off;
		ref->durable = r->durable;
		ref->durable_fd = r->durable ? r->durable_fd : -1;
		ref->durable_offset = r->durable ? r->durable_offset + off : 0;
		ref->owner = owner;
		ref->kind = kind;
	}
	return 0;
}

/* rr_mrt_check with the lock held; a passed local check fills @fill (may
 * be NULL) with the MR's copy, a passed remote one @rfill (may be NULL)
 * with the MR's or window's. */
static int check_locked(struct rr_mrt *t, uint32_t stag, uint64_t to, uint64_t len, uint32_t need,
			const void *pd, const void *qp, struct rr_mrt_ref *ref,
			struct rr_mrt_lcache *fill, struct rr_mrt_rcache *rfill)
{
	bool local = need & RR_MRT_LOCAL;
	struct rr_mrt_entry *e;
	int rc;

	e = lookup(t, stag, NULL);
	if (!e || e->state != ST_VALID || (local && e->kind != RR_MRT_MR))
		return -ENOENT;
	if (e->pd != pd || (e->kind == RR_MRT_MW && !local && e->qp != qp))
		/* remotely, an STag the peer may not use looks unknown */
		return local ? -EPERM : -ENOENT;
	rc = region_check(&e->r, local, to, len, need, e->owner, (enum rr_mrt_kind)e->kind, ref);
	if (rc == 0 && fill && local) {
		uint64_t gen = atomic_load_explicit(&t->mr_gen, memory_order_relaxed);

		if (fill->gen && fill->gen != gen && fill->stag != stag) {
			/* a copy made stale by another MR's change: exact again
			 * if its STag still names a valid MR of its PD (an MR's
			 * region changes only with its STag, at rereg, and an STag
			 * is never issued twice) */
			struct rr_mrt_entry *h = lookup(t, fill->stag, NULL);

			if (h && h->state == ST_VALID && h->kind == RR_MRT_MR && h->pd == fill->pd)
				fill->gen = gen;
		}
		if (fill->gen == gen && fill->stag != stag && fill->pending != stag) {
			/* a good copy of another MR is kept: this STag replaces it
			 * at its next miss (a region registered for one work
			 * request, as a Reply's Write source, never does); a fill
			 * by another STag meanwhile does not forget it, so the
			 * send buffers' MR gets its copy back from a one-shot one */
			fill->pending = stag;
		} else {
			fill->gen = gen;
			fill->stag = stag;
			fill->pd = pd;
			fill->owner = e->owner;
			fill->r = e->r;
			if (fill->pending == stag)
				fill->pending = 0;
			e->lcached = true;
		}
	}
	if (rc == 0 && rfill && !local) {
		rfill->gen = atomic_load_explicit(&t->rm_gen, memory_order_relaxed);
		rfill->stag = stag;
		rfill->pd = pd;
		rfill->qp = qp;
		rfill->owner = e->owner;
		rfill->kind = (enum rr_mrt_kind)e->kind;
		rfill->r = e->r;
	}
	return rc;
}

static int need_ok(uint32_t need)
{
	return need & ~(MRT_RIGHTS | RR_MRT_LOCAL) ? -EINVAL : 0;
}

int rr_mrt_check(struct rr_mrt *t, uint32_t stag, uint64_t to, uint64_t len, uint32_t need,
		 const void *pd, const void *qp, struct rr_mrt_ref *ref)
{
	int rc;

	if (!t)
		return -EINVAL;
	if (need_ok(need))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	rc = check_locked(t, stag, to, len, need, pd, qp, ref, NULL, NULL);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_check_local(struct rr_mrt *t, struct rr_mrt_lcache *c, uint32_t stag, uint64_t addr,
		       uint64_t len, uint32_t need, const void *pd, struct rr_mrt_ref *ref)
{
	int rc;

	if (!t || !c || !(need & RR_MRT_LOCAL) || need_ok(need))
		return -EINVAL;
	/* acquire: pairs with the rereg / dereg that moved it, so a hit
	 * means no change to any MR since the copy was made */
	if (c->gen && c->stag == stag && c->pd == pd &&
	    c->gen == atomic_load_explicit(&t->mr_gen, memory_order_acquire) &&
	    region_check(&c->r, true, addr, len, need, c->owner, RR_MRT_MR, ref) == 0)
		return 0;
	atomic_fetch_add_explicit(&t->local_misses, 1, memory_order_relaxed);
	pthread_mutex_lock(&t->lock);
	rc = check_locked(t, stag, addr, len, need, pd, NULL, ref, c, NULL);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_check_remote(struct rr_mrt *t, struct rr_mrt_rcache *c, uint32_t stag, uint64_t to,
			uint64_t len, uint32_t need, const void *pd, const void *qp,
			struct rr_mrt_ref *ref)
{
	int rc;

	if (!t || !c || (need & RR_MRT_LOCAL) || need_ok(need))
		return -EINVAL;
	/* acquire: pairs with the change that moved it (every one that can
	 * make a passed remote check fail: slot_put, unbind, entry_rekey) */
	if (c->gen && c->stag == stag && c->pd == pd && c->qp == qp &&
	    c->gen == atomic_load_explicit(&t->rm_gen, memory_order_acquire) &&
	    region_check(&c->r, false, to, len, need, c->owner, c->kind, ref) == 0)
		return 0;
	atomic_fetch_add_explicit(&t->remote_misses, 1, memory_order_relaxed);
	pthread_mutex_lock(&t->lock);
	rc = check_locked(t, stag, to, len, need, pd, qp, ref, NULL, c);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int rr_mrt_local_ptr_miss(struct rr_mrt *t, struct rr_mrt_lcache *c, uint32_t stag,
			  uint64_t addr, uint64_t len, uint32_t need, const void *pd, uint8_t **ptr)
{
	struct rr_mrt_ref ref;
	int rc = rr_mrt_check_local(t, c, stag, addr, len, need, pd, &ref);

	if (!rc)
		*ptr = ref.ptr;
	return rc;
}

uint64_t rr_mrt_random_to(struct rr_mrt *t, uint64_t va, uint64_t length)
{
	uint64_t r = 0, to;

	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < 8; i++)
		r = r << 8 | rnd_byte(t);
	pthread_mutex_unlock(&t->lock);
	/* page offset kept; random page number in [2^32, 2^62): never 0,
	 * never near a wrap */
	to = (r & ((1ull << 62) - 1) & ~0xfffull) | (va & 0xfffull) | (1ull << 32);
	if (length > (1ull << 62))
		to = va & 0xfffull;   /* a huge region: no room to randomise */
	return to;
}

uint32_t rr_mrt_live(struct rr_mrt *t)
{
	uint32_t n;

	pthread_mutex_lock(&t->lock);
	n = t->live;
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t rr_mrt_local_misses(struct rr_mrt *t)
{
	return atomic_load_explicit(&t->local_misses, memory_order_relaxed);
}

uint64_t rr_mrt_remote_misses(struct rr_mrt *t)
{
	return atomic_load_explicit(&t->remote_misses, memory_order_relaxed);
}

uint32_t rr_mrt_retired(struct rr_mrt *t)
{
	uint32_t n;

	pthread_mutex_lock(&t->lock);
	n = t->retired;
	pthread_mutex_unlock(&t->lock);
	return n;
}

int rr_mrt_make_durable(const struct rr_mrt_ref *ref, uint64_t len)
{
	struct stat st;

	if (!ref || !ref->durable)
		return -EINVAL;
	/* durable only for bytes that are in the file (it may have shrunk
	 * under the registration): never report past its end as durable */
	if (len && (fstat(ref->durable_fd, &st) < 0 || st.st_size < 0 ||
		    (uint64_t)st.st_size < ref->durable_offset ||
		    (uint64_t)st.st_size - ref->durable_offset < len))
		return -ERANGE;
	return rpcrdma_durable_sync(ref->ptr, len);
}
