/* SPDX-License-Identifier: BSD-2-Clause */
/* Recycled record buffers of tcp:// (tcp_bufs.h): small caches of used
 * buffers under a lock, and the policy the record marking decoder's
 * buffer provider follows: a recycled buffer when one is large enough (its
 * memory is already ours, so using it whole costs nothing), else a new one
 * of the size the decoder asked for. The last buffer put back waits in a
 * lock-free slot first (tcp_bufs.h). */
#include "transport/tcp/tcp_bufs.h"

void rr_tcp_cache_init(struct rr_tcp_cache *k)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
}

void rr_tcp_cache_fini(struct rr_tcp_cache *k, const struct rpcrdma_env *env)
{
	for (unsigned i = 0; i < RR_TCP_CACHE_SLOTS; i++)
		rr_free(env, k->buf[i]);
	pthread_mutex_destroy(&k->lock);
}

/* Keeps @buf (capacity @cap) in an empty slot or in place of a smaller
 * one; frees what is not kept. */
static void cache_put(struct rr_tcp_cache *k, const struct rpcrdma_env *env, uint8_t *buf,
		      size_t cap)
{
	unsigned small = 0;

	pthread_mutex_lock(&k->lock);
	for (unsigned i = 1; i < RR_TCP_CACHE_SLOTS; i++)
		if (!k->buf[i] || (k->buf[small] && k->cap[i] < k->cap[small]))
			small = i;
	if (!k->buf[small] || k->cap[small] < cap) {
		uint8_t *t = k->buf[small];

		k->buf[small] = buf;
		k->cap[small] = cap;
		buf = t;
	}
	pthread_mutex_unlock(&k->lock);
	rr_free(env, buf);
}

/* The smallest kept buffer of at least @want bytes and more than @above
 * (*@cap), or NULL. */
static uint8_t *cache_take(struct rr_tcp_cache *k, size_t want, size_t above, size_t *cap)
{
	uint8_t *b = NULL;
	int pick = -1;

	pthread_mutex_lock(&k->lock);
	for (unsigned i = 0; i < RR_TCP_CACHE_SLOTS; i++)
		if (k->buf[i] && k->cap[i] >= want && k->cap[i] > above &&
		    (pick < 0 || k->cap[i] < k->cap[pick]))
			pick = (int)i;
	if (pick >= 0) {
		b = k->buf[pick];
		*cap = k->cap[pick];
		k->buf[pick] = NULL;
		k->cap[pick] = 0;
	}
	pthread_mutex_unlock(&k->lock);
	return b;
}

void rr_tcp_bufs_init(struct rr_tcp_bufs *b, const struct rpcrdma_env *env, size_t spare_max,
		      struct rr_tcp_cache *pool)
{
	b->env = env;
	b->spare_max = spare_max;
	b->pool = pool;
	atomic_init(&b->hot, NULL);
	rr_tcp_cache_init(&b->spare);
}

void rr_tcp_bufs_fini(struct rr_tcp_bufs *b)
{
	rr_free(b->env, atomic_exchange(&b->hot, NULL));
	rr_tcp_cache_fini(&b->spare, b->env);
}

/* The capacity a buffer of the hot slot carries in its first bytes. */
static size_t hot_cap(const uint8_t *buf)
{
	size_t cap;

	memcpy(&cap, buf, sizeof(cap));
	return cap;
}

void rr_tcp_bufs_put(struct rr_tcp_bufs *b, uint8_t *buf, size_t cap)
{
	if (!buf)
		return;
	if (cap <= b->spare_max && cap >= sizeof(size_t)) {
		/* into the hot slot; what was there goes to the cache */
		memcpy(buf, &cap, sizeof(cap));
		buf = atomic_exchange_explicit(&b->hot, buf, memory_order_acq_rel);
		if (!buf)
			return;
		cap = hot_cap(buf);
	}
	if (cap <= b->spare_max)
		cache_put(&b->spare, b->env, buf, cap);
	else if (b->pool)
		cache_put(b->pool, b->env, buf, cap);
	else
		rr_free(b->env, buf);
}

/* A recycled buffer, if large enough; a record above spare_max takes a pool
 * buffer when the whole record so far (@need) fits it (no growth steps),
 * else one of at least @min bytes, as from the spare: memory already ours
 * serves the growth steps, and only what no kept buffer holds is new. (When
 * a large record arrives while the previous one's buffer is still held, its
 * Reply being sent, the pool holds the previous record's last growth step;
 * taking only buffers that fit the whole record allocated every step of the
 * new record again, 1, 2, 4 and 8 MiB and the record, where one allocation,
 * the record's, was needed: rpc_tcp_large_write_while_one_is_held.) Else
 * @min new bytes. */
static uint8_t *bufs_get(void *arg, size_t min, size_t need, size_t above, size_t *cap)
{
	struct rr_tcp_bufs *b = arg;
	uint8_t *nb = NULL;

	if (atomic_load_explicit(&b->hot, memory_order_relaxed)) {
		nb = atomic_exchange_explicit(&b->hot, NULL, memory_order_acquire);
		if (nb) {
			size_t hc = hot_cap(nb);

			if (hc >= need && hc > above) {
				*cap = hc;
				return nb;
			}
			cache_put(&b->spare, b->env, nb, hc);   /* too small here */
			nb = NULL;
		}
	}
	if (need > b->spare_max && b->pool) {
		nb = cache_take(b->pool, need, above, cap);
		if (!nb)
			nb = cache_take(b->pool, min, above, cap);
	}
	if (!nb)
		nb = cache_take(&b->spare, need, above, cap);
	if (!nb)
		nb = cache_take(&b->spare, min, above, cap);
	if (!nb) {
		nb = rr_alloc(b->env, min);
		*cap = min;
	}
	return nb;
}

static void bufs_put(void *arg, uint8_t *buf, size_t cap)
{
	rr_tcp_bufs_put(arg, buf, cap);
}

struct rr_rm_bufs rr_tcp_bufs_provider(struct rr_tcp_bufs *b)
{
	return (struct rr_rm_bufs){.get = bufs_get, .put = bufs_put, .arg = b};
}
