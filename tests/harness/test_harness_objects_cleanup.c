/* SPDX-License-Identifier: BSD-2-Clause */
/* Tests that the shared transport harness's objects register their own
 * cleanups (tests/xprt_harness.h): a requester started with rr_th_cl_start
 * (on the test's thread) or rr_th_rresp_connect (started on another thread,
 * registered on the test's), and a rogue responder opened with
 * rr_th_rresp_open, are stopped and closed when a fatal check ends the
 * test. Without that, their threads and the provider go on writing into
 * the failed test's stack, which the next test reuses (the Debian 13 lab's
 * 28-minute hang, issue 16 part FF, came from the e2e server). Each case
 * runs in a forked child (rr_test_fresh_status) that ends in a failed
 * REQUIRE; a cleanup pushed first, so run last, reports through a pipe
 * whether the objects' own cleanups ran before it. */
#include <fcntl.h>
#include <unistd.h>

#include "test.h"
#include "xprt_harness.h"

static int oc_pipe[2];

struct oc_seen {
	struct rr_th_cl *c;
	struct rr_th_rresp *g;      /* NULL: no rogue responder in this case */
	struct rr_tp_server *srv;
	bool started;               /* @c (and @g) up when the check failed */
};

/* Pushed first: runs after every other cleanup of the child. Writes 'c'
 * if the requester was stopped, 'g' if the responder was closed. */
static void oc_report(void *arg)
{
	struct oc_seen *s = arg;
	char out[2];
	size_t n = 0;

	if (s->started && !s->c->tp)
		out[n++] = 'c';
	if (s->started && s->g && !s->g->data)
		out[n++] = 'g';
	if (n)
		CHECK_EQ(write(oc_pipe[1], out, n), (ssize_t)n);
}

static void oc_server_destroy(void *arg)
{
	rr_tp_server_destroy(arg);
}

static void oc_recv_drop(void *ctx, struct rr_conn_sreq *r)
{
	(void)ctx;
	(void)r;
}

static const uint8_t oc_pd[8] = {0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3};

/* the requester started by rr_th_rresp_connect's other thread, and the
 * rogue responder it connected to */
static void oc_body_rresp(void)
{
	struct rr_test_cleanup report;
	struct rr_th_rresp g;
	struct rr_th_cl c;
	struct rr_tp_conf cc;
	struct oc_seen seen = {&c, &g, NULL};

	memset(&c, 0, sizeof(c));
	rr_test_cleanup_push(&report, oc_report, &seen);
	REQUIRE_EQ(rr_th_rresp_open(&g), 0);
	rr_tp_conf_default(&cc);
	cc.ext_caps = 0;
	REQUIRE_EQ(rr_th_rresp_connect(&g, &c, &cc, rr_th_cl_count, oc_pd, sizeof(oc_pd)), 0);
	seen.started = true;
	fprintf(stderr, "  (a child test: the failed check below is expected)\n");
	REQUIRE(c.tp == NULL);
}

/* the requester started on the test's thread, against our server */
static void oc_body_cl(void)
{
	struct rr_test_cleanup report, srv;
	struct rr_th_cl c;
	struct rr_tp_conf sc, cc;
	struct oc_seen seen = {&c, NULL, NULL};

	memset(&c, 0, sizeof(c));
	rr_test_cleanup_push(&report, oc_report, &seen);
	rr_tp_conf_default(&sc);
	REQUIRE_EQ(rr_th_tp_server(&sc, oc_recv_drop, NULL, &seen.srv), 0);
	rr_test_cleanup_push(&srv, oc_server_destroy, seen.srv);
	rr_tp_conf_default(&cc);
	REQUIRE_EQ(rr_th_cl_start(&c, &cc, rr_tp_server_port(seen.srv), rr_th_cl_count), 0);
	seen.started = true;
	fprintf(stderr, "  (a child test: the failed check below is expected)\n");
	REQUIRE(c.tp == NULL);
}

/* Runs @body in a child that must fail; whether its report was @want. */
static bool oc_case(void (*body)(void), const char *name, const char *want)
{
	char got[8];
	ssize_t n;

	CHECK_EQ(rr_test_fresh_status(body), 1);
	n = read(oc_pipe[0], got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = 0;
	if (strcmp(got, want))
		printf("  %s case: \"%s\", want \"%s\"\n", name, got, want);
	return !strcmp(got, want);
}

TEST(harness_fatal_check_stops_harness_peers)
{
	if (!rr_th_soft_ok())
		return;
	REQUIRE_EQ(pipe(oc_pipe), 0);
	REQUIRE_EQ(fcntl(oc_pipe[0], F_SETFL, O_NONBLOCK), 0);
	CHECK(oc_case(oc_body_rresp, "rr_th_rresp_connect", "cg"));
	CHECK(oc_case(oc_body_cl, "rr_th_cl_start", "c"));
	close(oc_pipe[0]);
	close(oc_pipe[1]);
}
