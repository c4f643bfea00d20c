/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcgen server of the CALC service (calc.x): the service routines
 * (add_1_svc, ...) and the rpcgen-generated dispatch function calc_prog_1
 * (calc_svc.c, generated with -m -M) run unchanged on a librpcrdma server:
 * rpcrdma_server_register_svc() takes the place of svc_create()/svc_reg().
 * Prints the bound port, serves until SIGINT/SIGTERM, then shuts down
 * gracefully. Usage: calc_server [URL] (default tcp://127.0.0.1:0). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calc.h"
#include "rpcrdma/rpc.h"

void calc_prog_1(struct svc_req *rqstp, SVCXPRT *transp);

bool_t add_1_svc(pair *argp, int *result, struct svc_req *rqstp)
{
	(void)rqstp;
	*result = argp->a + argp->b;
	return TRUE;
}

bool_t greet_1_svc(name *argp, name *result, struct svc_req *rqstp)
{
	size_t n = strlen(*argp) + 8;

	(void)rqstp;
	*result = malloc(n);
	if (!*result)
		return FALSE;
	snprintf(*result, n, "hello, %s", *argp);
	return TRUE;
}

bool_t sum_1_svc(intlist *argp, quad_t *result, struct svc_req *rqstp)
{
	(void)rqstp;
	*result = 0;
	for (u_int i = 0; i < argp->intlist_len; i++)
		*result += argp->intlist_val[i];
	return TRUE;
}

int calc_prog_1_freeresult(SVCXPRT *transp, xdrproc_t xdr_result, caddr_t result)
{
	(void)transp;
	xdr_free(xdr_result, result);
	return 1;
}

int main(int argc, char **argv)
{
	const char *url = argc > 1 ? argv[1] : "tcp://127.0.0.1:0";
	struct rpcrdma_server *srv;
	sigset_t set;
	int sig, rc;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts */

	rc = rpcrdma_server_create(url, NULL, &srv);
	if (!rc)
		rc = rpcrdma_server_register_svc(srv, CALC_PROG, CALC_VERS, calc_prog_1);
	if (!rc)
		rc = rpcrdma_server_start(srv);
	if (rc) {
		fprintf(stderr, "calc_server: %s: %s\n", url, rpcrdma_strerror(rc));
		return 1;
	}
	printf("%d\n", rpcrdma_server_port(srv));
	fflush(stdout);
	sigwait(&set, &sig);
	rpcrdma_server_destroy(srv);
	return 0;
}
