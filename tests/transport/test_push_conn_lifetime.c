/* SPDX-License-Identifier: BSD-2-Clause */
/* A push (include/rpcrdma/push.h, draft-talpey-rdma-commit section 2) keeps
 * its connection until its source's MR is deregistered: the connection
 * dies while the push waits for its work requests with the client's lock
 * released, and the client's loop runs its turns meanwhile (the lost
 * connection settled, the dead ones swept: transport/rdma/progress.c
 * tp_grave_sweep). The sweep must skip that connection (cn->pushing): freed
 * there, its PD still held the push's MR, so the PD was refused and leaked
 * and the push then deregistered into it (seen as a rare 72-byte leak of
 * push_commit_beyond_region under ASan). The interleaving is forced: the
 * push's test hook (rr_tp_client_push_hook) runs in that window, cuts the
 * connection and runs the client's turns on its loop until the loss was
 * settled and swept, then looks at what is left. */
#include "test.h"

#include <errno.h>
#include <string.h>

#include "transport/rdma/tp.h"
#include "xprt_harness.h"

struct kill_in_push {
	struct rr_tp_client *c;
	unsigned calls;
	int cut;
	bool lost;             /* the loss settled by a turn (fatal_errors moved) */
	unsigned dead_kept;    /* dead connections left after the sweeps */
};

/* The push's thread, its Write posted and no lock held: the connection
 * dies and the loop sweeps, as when the peer ends it at that moment. */
static void kill_in_push_hook(void *arg)
{
	struct kill_in_push *k = arg;
	struct rr_xprt_stats st;
	uint64_t fatal0;

	if (k->calls++)
		return;
	rr_tp_client_stats(k->c, &st);
	fatal0 = st.fatal_errors;
	k->cut = rr_tp_client_cut(k->c);
	/* untimed: the provider hands the disconnect to the loop (at most
	 * ~10 s of naps, then the check below says so) */
	for (unsigned i = 0; i < 10000 && !k->lost; i++) {
		rr_tp_client_turn(k->c);
		rr_tp_client_stats(k->c, &st);
		k->lost = st.fatal_errors > fatal0;
		if (!k->lost)
			rr_th_sleep_ms(1);
	}
	/* a whole turn after the one that settled the loss (which may have
	 * been the after-work of a completion, which sweeps nothing) */
	rr_tp_client_turn(k->c);
	k->dead_kept = rr_tp_client_dead_conns(k->c);
}

TEST(push_keeps_dead_connection_until_deregistered)
{
	/* RFC 8797 private data of a responder: credits 3/3, R = 0 */
	static const uint8_t pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};
	static struct rr_th_rresp g;
	static uint8_t data[4096];
	struct rr_tp_conf conf;
	struct rr_th_cl cl;
	struct kill_in_push k;
	struct rr_tp_push p;
	int rc;

	if (!rr_th_soft_ok())
		return;
	/* a passive responder: nothing of its own ends the connection; no
	 * reconnection to it (nobody accepts there) */
	rr_tp_conf_default(&conf);
	conf.no_reconnect = true;
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	REQUIRE_EQ(rr_th_rresp_connect(&g, &cl, &conf, rr_th_cl_count, pd, sizeof(pd)), 0);
	memset(&k, 0, sizeof(k));
	k.c = cl.tp;
	rr_tp_client_push_hook(cl.tp, kill_in_push_hook, &k);
	/* an RDMA Write alone into the responder's registered memory (its
	 * source registered in the connection's PD for the call) */
	memset(data, 0x5c, sizeof(data));
	memset(&p, 0, sizeof(p));
	p.buf = data;
	p.len = sizeof(data);
	p.stag = g.data_stag;
	p.offset = rpcrdma_mr_remote_offset(g.dmr);
	p.timeout_ms = 10000;
	rc = rr_tp_client_push(cl.tp, &p);
	CHECK_EQ(k.calls, 1);
	CHECK_EQ(k.cut, 0);
	CHECK(k.lost);
	/* the sweeps left the push's connection alone (before: freed, its PD
	 * refused with the MR in it and leaked) */
	CHECK_EQ(k.dead_kept, 1);
	/* the Write completed before the cut was seen, or the push saw its
	 * connection go */
	CHECK(rc == 0 || rc == -ECONNRESET);
	/* the push let it go: the next turn frees it */
	rr_tp_client_turn(cl.tp);
	CHECK_EQ(rr_tp_client_dead_conns(cl.tp), 0);
	rr_tp_client_push_hook(cl.tp, NULL, NULL);
	rr_th_cl_stop(&cl);
	rr_th_rresp_close(&g);
}
