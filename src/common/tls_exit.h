/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-thread caches of library objects freed when their thread exits: the
 * Reply plan a thread reuses (proto/conn/request.c, issue 16 part L) and the
 * call objects a thread destroyed last (rpc/clnt.c, part CR). A user
 * describes its cache with a drain function that frees the calling
 * thread's cache; rr_tls_exit_arm, once per thread before the thread keeps
 * anything, makes its thread's exit run that drain (a pthread key per user,
 * made on first use). When the library is unloaded or the process exits,
 * the calling thread's caches are drained and the keys deleted (no thread's
 * exit may call into an unloaded library); other threads' caches are then
 * left to the process. */
#ifndef RR_COMMON_TLS_EXIT_H
#define RR_COMMON_TLS_EXIT_H

#include <pthread.h>
#include <stdbool.h>

struct rr_tls_exit {
	void (*drain)(void);          /* frees the calling thread's cache */
	/* tls_exit.c's, under its lock */
	pthread_key_t key;
	int made;                     /* 0 not yet, 1 made, -1 failed */
	struct rr_tls_exit *next;     /* the users whose key was made */
};

/* Makes the calling thread's exit run @e->drain. true: armed (the caller
 * may keep objects in its thread's cache); false (no key), the caller
 * keeps nothing. The caller calls it once per thread (a __thread flag). */
bool rr_tls_exit_arm(struct rr_tls_exit *e);

#endif
