/* SPDX-License-Identifier: BSD-2-Clause */
/* The duplicate request cache of the RPC server (see src/rpc/drc.h for the
 * behaviour; RFC 5531 section 9 on XIDs and retransmission, RFC 8166
 * section 4.4 on retransmission over RPC-over-RDMA): a hash table of
 * entries keyed by XID, program, version, procedure, peer host address and
 * an argument checksum, with an LRU list ordered by last use (newest at the
 * head), under one mutex. IN PROGRESS entries are never evicted or expired
 * (their request still references them); DONE entries expire ttl_ns after
 * their last use and are evicted from the old end when the table is full.
 * Kept replies are reference-counted blocks so that a re-send in flight
 * survives the entry's eviction. */
#include "rpc/drc.h"

#include <pthread.h>

struct rr_drc {
	struct rr_drc_conf conf;
	pthread_mutex_t lock;
	struct rr_drc_entry **buckets;
	uint32_t mask;
	struct rr_drc_entry *newest, *oldest;
	struct rr_drc_counters n;
};

uint64_t rr_drc_sum(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint32_t key_hash(const struct rr_drc_key *k)
{
	uint64_t h = RR_DRC_SUM_INIT;
	uint32_t w[6] = {k->xid, k->prog, k->vers, k->proc, k->arg_len, k->family};

	h = rr_drc_sum(h, w, sizeof(w));
	h = rr_drc_sum(h, &k->arg_sum, sizeof(k->arg_sum));
	h = rr_drc_sum(h, k->addr, sizeof(k->addr));
	return (uint32_t)(h ^ (h >> 32));
}

static bool key_eq(const struct rr_drc_key *a, const struct rr_drc_key *b)
{
	return a->xid == b->xid && a->prog == b->prog && a->vers == b->vers &&
	       a->proc == b->proc && a->arg_len == b->arg_len && a->arg_sum == b->arg_sum &&
	       a->family == b->family && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

int rr_drc_create(const struct rr_drc_conf *conf, struct rr_drc **out)
{
	struct rr_drc *d;
	uint32_t nb = 16;

	if (!conf || !out || !conf->max_entries)
		return -EINVAL;
	while (nb < conf->max_entries && nb < (1u << 24))
		nb <<= 1;
	d = rr_zalloc(conf->env, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->buckets = rr_zalloc(conf->env, nb * sizeof(*d->buckets));
	if (!d->buckets) {
		rr_free(conf->env, d);
		return -ENOMEM;
	}
	d->conf = *conf;
	d->mask = nb - 1;
	pthread_mutex_init(&d->lock, NULL);
	*out = d;
	return 0;
}

/* ---- LRU and table (under d->lock) ---- */

static void lru_unlink(struct rr_drc *d, struct rr_drc_entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		d->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		d->oldest = e->newer;
	e->newer = e->older = NULL;
}

static void lru_push(struct rr_drc *d, struct rr_drc_entry *e)
{
	e->older = d->newest;
	e->newer = NULL;
	if (d->newest)
		d->newest->newer = e;
	else
		d->oldest = e;
	d->newest = e;
}

/* Unlinks @e from the table and the LRU list; returns its reply reference
 * for the caller to drop outside the lock. */
static struct rr_drc_reply *entry_remove(struct rr_drc *d, struct rr_drc_entry *e)
{
	struct rr_drc_entry **pp = &d->buckets[e->hash & d->mask];
	struct rr_drc_reply *rep = e->rep;

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	lru_unlink(d, e);
	d->n.entries--;
	return rep;
}

/* Frees a removed entry and drops its reply reference (outside the lock). */
static void entry_free(struct rr_drc *d, struct rr_drc_entry *e, struct rr_drc_reply *rep)
{
	if (rep)
		rr_drc_reply_put(d, rep);
	rr_free(d->conf.env, e);
}

/* Removes up to 8 expired DONE entries into @gone (oldest first). */
static unsigned expire_some(struct rr_drc *d, uint64_t now, struct rr_drc_entry **gone)
{
	unsigned n = 0;
	struct rr_drc_entry *e = d->oldest;

	while (e && n < 8) {
		struct rr_drc_entry *next = e->newer;

		if (now - e->stamp < d->conf.ttl_ns)
			break;   /* the rest is newer */
		if (e->done) {
			(void)entry_remove(d, e);
			gone[n++] = e;
			d->n.expirations++;
		}
		e = next;
	}
	return n;
}

/* The oldest DONE entry, or NULL when every entry is IN PROGRESS. */
static struct rr_drc_entry *oldest_done(struct rr_drc *d)
{
	for (struct rr_drc_entry *e = d->oldest; e; e = e->newer)
		if (e->done)
			return e;
	return NULL;
}

enum rr_drc_verdict rr_drc_lookup(struct rr_drc *d, const struct rr_drc_key *k, void *waiter,
				  struct rr_drc_entry **ent, struct rr_drc_reply **rep)
{
	struct rr_drc_entry *gone[9], *e;
	uint32_t h = key_hash(k);
	uint64_t now = rr_now_ns(d->conf.env);
	enum rr_drc_verdict v = RR_DRC_RUN;
	unsigned ngone;

	*ent = NULL;
	*rep = NULL;
	pthread_mutex_lock(&d->lock);
	ngone = expire_some(d, now, gone);
	for (e = d->buckets[h & d->mask]; e; e = e->hnext)
		if (e->hash == h && key_eq(&e->key, k))
			break;
	if (e && e->done) {
		d->n.hits++;
		rr_drc_reply_get(e->rep);
		*rep = e->rep;
		e->stamp = now;
		lru_unlink(d, e);
		lru_push(d, e);
		v = RR_DRC_REPLAY;
	} else if (e) {
		d->n.drops_in_progress++;
		if (e->nwaiters < RR_DRC_MAX_WAITERS) {
			e->waiters[e->nwaiters++] = waiter;
			v = RR_DRC_PARKED;
		} else {
			v = RR_DRC_DROP;
		}
	} else {
		if (d->n.entries >= d->conf.max_entries) {
			struct rr_drc_entry *old = oldest_done(d);

			if (old) {
				(void)entry_remove(d, old);
				gone[ngone++] = old;
				d->n.evictions++;
			}
		}
		e = NULL;
		if (d->n.entries < d->conf.max_entries)
			e = rr_zalloc(d->conf.env, sizeof(*e));
		if (e) {
			e->key = *k;
			e->hash = h;
			e->stamp = now;
			e->hnext = d->buckets[h & d->mask];
			d->buckets[h & d->mask] = e;
			lru_push(d, e);
			d->n.entries++;
			d->n.insertions++;
			*ent = e;
		} else {
			d->n.not_cached++;   /* full of running requests, or no memory */
		}
	}
	pthread_mutex_unlock(&d->lock);
	for (unsigned i = 0; i < ngone; i++)
		entry_free(d, gone[i], gone[i]->rep);
	return v;
}

unsigned rr_drc_complete(struct rr_drc *d, struct rr_drc_entry *e, struct rr_drc_reply *rep,
			 bool keep, void **waiters, bool *kept)
{
	unsigned n;

	pthread_mutex_lock(&d->lock);
	n = e->nwaiters;
	memcpy(waiters, e->waiters, n * sizeof(*waiters));
	e->nwaiters = 0;
	*kept = keep && rep;
	if (*kept) {
		e->done = true;
		e->rep = rep;
		e->stamp = rr_now_ns(d->conf.env);
		lru_unlink(d, e);
		lru_push(d, e);
	} else {
		(void)entry_remove(d, e);
		d->n.not_cached++;
	}
	pthread_mutex_unlock(&d->lock);
	if (!*kept)
		entry_free(d, e, NULL);
	return n;
}

/* ---- kept replies ---- */

static size_t msg_bytes(const struct rr_xprt_msg *m)
{
	size_t n = m->head_len;

	for (unsigned i = 0; i < m->nddp; i++)
		n += m->ddp[i].len;
	return n;
}

bool rr_drc_keepable(const struct rr_drc *d, const struct rr_xprt_msg *m)
{
	return m->nddp <= RR_RPC_MAX_DDP && msg_bytes(m) <= d->conf.max_reply;
}

struct rr_drc_reply *rr_drc_reply_copy(struct rr_drc *d, const struct rr_xprt_msg *m)
{
	struct rr_drc_reply *r;
	size_t n = msg_bytes(m), off;

	if (m->nddp > RR_RPC_MAX_DDP || n > SIZE_MAX - sizeof(*r))
		return NULL;
	r = rr_alloc(d->conf.env, sizeof(*r) + n);
	if (!r)
		return NULL;
	atomic_init(&r->refs, 1);
	r->head_len = m->head_len;
	r->xdr_len = m->xdr_len;
	r->nddp = m->nddp;
	if (m->head_len)
		memcpy(r->data, m->head, m->head_len);
	off = m->head_len;
	for (unsigned i = 0; i < m->nddp; i++) {
		r->ddp[i] = m->ddp[i];
		r->ddp[i].ptr = r->data + off;
		if (m->ddp[i].len)
			memcpy(r->data + off, m->ddp[i].ptr, m->ddp[i].len);
		off += m->ddp[i].len;
	}
	return r;
}

void rr_drc_reply_msg(const struct rr_drc_reply *rep, struct rr_xprt_msg *m)
{
	m->head = rep->data;
	m->head_len = rep->head_len;
	m->ddp = rep->ddp;
	m->nddp = rep->nddp;
	m->xdr_len = rep->xdr_len;
}

void rr_drc_reply_get(struct rr_drc_reply *rep)
{
	atomic_fetch_add_explicit(&rep->refs, 1, memory_order_relaxed);
}

void rr_drc_reply_put(struct rr_drc *d, struct rr_drc_reply *rep)
{
	if (rep && atomic_fetch_sub_explicit(&rep->refs, 1, memory_order_acq_rel) == 1)
		rr_free(d->conf.env, rep);
}

void rr_drc_counters(struct rr_drc *d, struct rr_drc_counters *c)
{
	pthread_mutex_lock(&d->lock);
	*c = d->n;
	pthread_mutex_unlock(&d->lock);
}

void rr_drc_destroy(struct rr_drc *d)
{
	if (!d)
		return;
	while (d->oldest) {
		struct rr_drc_entry *e = d->oldest;

		entry_free(d, e, entry_remove(d, e));
	}
	pthread_mutex_destroy(&d->lock);
	rr_free(d->conf.env, d->buckets);
	rr_free(d->conf.env, d);
}
