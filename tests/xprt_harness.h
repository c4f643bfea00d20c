/* Shared scaffolding of the end-to-end transport tests (tests/test_xprt_e2e.c,
 * tests/test_rrep_e2e.c, tests/test_verbsx.c, tests/test_push.c,
 * tests/test_xprt_rpc.c, tests/test_rpc_tcp.c): the soft-provider check,
 * millisecond sleeps, loopback rr_tp endpoints, counter waits, worker-thread
 * shutdown and the ECHO/BULK RPC handlers several tests register. Test code
 * only; compiled into rr-tests (tests/xprt_harness.c). */
#ifndef RR_TESTS_XPRT_HARNESS_H
#define RR_TESTS_XPRT_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpcrdma/rdma.h"
#include "rpcrdma/rpc.h"
#include "transport/rdma_tp.h"

/* True when the software iWARP provider is built in; otherwise prints a
 * "not run" line and returns false. */
bool rr_th_soft_ok(void);

void rr_th_sleep_ms(unsigned ms);

/* An rr_tp responder listening on 127.0.0.1, ephemeral port; @recv/@ctx as
 * for rr_tp_server_create. Returns 0 or a negative errno. */
int rr_th_tp_server(const struct rr_tp_conf *conf, rr_tp_recv_fn recv, void *ctx,
		    struct rr_tp_server **out);

/* An rr_tp requester connected to 127.0.0.1:@port. */
int rr_th_tp_client(const struct rr_tp_conf *conf, int port, rr_tp_complete_fn complete,
		    void *ctx, struct rr_tp_client **out);

/* Waits (about @ms plus up to 1 s) under @lock/@cond until *@count >= @n;
 * true when reached. */
bool rr_th_wait_count(pthread_mutex_t *lock, pthread_cond_t *cond, const unsigned *count,
		      unsigned n, unsigned ms);

/* Sets *@stop under @lock, wakes @cond and joins @worker. */
void rr_th_worker_stop(pthread_mutex_t *lock, pthread_cond_t *cond, bool *stop,
		       pthread_t worker);

/* ECHO: u32 v -> u32 v + 1. */
int rr_th_h_echo(struct rpcrdma_req *r, void *ctx);

/* BULK: args = u32 seed, ddp opaque; checks data[i] == (seed + i) & 0xff and
 * returns u32 len, the same bytes as a DDP-eligible result referenced from the
 * request, u32 0x7a11. */
int rr_th_h_bulk_seeded(struct rpcrdma_req *r, void *ctx);

#endif
