/* SPDX-License-Identifier: BSD-2-Clause */
/* The thread-exit hooks of the library's per-thread caches (tls_exit.h):
 * one pthread key per user, made on the first rr_tls_exit_arm under a lock
 * (once per thread and user, off the hot path), whose destructor drains
 * the exiting thread's cache; at unload the calling thread's caches are
 * drained and every key deleted. */
#include "common/tls_exit.h"

static pthread_mutex_t tls_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rr_tls_exit *tls_exit_users;

static void tls_exit_run(void *arg)
{
	((struct rr_tls_exit *)arg)->drain();
}

bool rr_tls_exit_arm(struct rr_tls_exit *e)
{
	bool ok;

	pthread_mutex_lock(&tls_exit_lock);
	if (!e->made) {
		e->made = pthread_key_create(&e->key, tls_exit_run) == 0 ? 1 : -1;
		if (e->made > 0) {
			e->next = tls_exit_users;
			tls_exit_users = e;
		}
	}
	ok = e->made > 0;
	pthread_mutex_unlock(&tls_exit_lock);
	/* the key's value (non-NULL) only makes its destructor run */
	return ok && pthread_setspecific(e->key, e) == 0;
}

/* The library unloaded (dlclose) or the process exiting: the calling
 * thread's caches freed, no later thread exit calling into the library. */
__attribute__((destructor)) static void tls_exit_unload(void)
{
	pthread_mutex_lock(&tls_exit_lock);
	for (struct rr_tls_exit *e = tls_exit_users; e; e = e->next) {
		e->drain();
		(void)pthread_key_delete(e->key);
		e->made = 0;
	}
	tls_exit_users = NULL;
	pthread_mutex_unlock(&tls_exit_lock);
}
