/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcgen client of the CALC service (calc.x), using the rpcgen-generated
 * stubs (calc_clnt.c, calc_xdr.c: libtirpc xdrproc_t routines and
 * clnt_call). Moving it from libtirpc's TCP transport to librpcrdma is one
 * line: clnt_create(...) becomes rpcrdma_clnt_create(url, ...); the rest of
 * the program is unchanged. Build with -DCALC_USE_TIRPC_TCP for the
 * original libtirpc version (needs rpcbind). Exits 0 when every answer is
 * right. Usage: calc_client URL|HOST, e.g. tcp://127.0.0.1:20049. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calc.h"
#include "rpcrdma/rpc.h"

int main(int argc, char **argv)
{
	CLIENT *clnt;
	pair p = {.a = 40, .b = 2};
	int sum = 0;
	char *who = "rpcgen", *hello = NULL;
	int vals[5] = {1, 2, 3, 4, 1000000000};
	intlist list = {.intlist_len = 5, .intlist_val = vals};
	quad_t total = 0;
	int fails = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s URL   (e.g. tcp://127.0.0.1:20049)\n", argv[0]);
		return 2;
	}
#ifdef CALC_USE_TIRPC_TCP
	clnt = clnt_create(argv[1], CALC_PROG, CALC_VERS, "tcp");
#else
	clnt = rpcrdma_clnt_create(argv[1], CALC_PROG, CALC_VERS); /* the one line */
#endif
	if (!clnt) {
		clnt_pcreateerror(argv[1]);
		return 1;
	}

	if (add_1(&p, &sum, clnt) != RPC_SUCCESS) {
		clnt_perror(clnt, "ADD");
		fails++;
	} else if (sum != 42) {
		fprintf(stderr, "ADD: got %d\n", sum);
		fails++;
	}
	if (greet_1(&who, &hello, clnt) != RPC_SUCCESS) {
		clnt_perror(clnt, "GREET");
		fails++;
	} else {
		if (strcmp(hello, "hello, rpcgen") != 0) {
			fprintf(stderr, "GREET: got '%s'\n", hello);
			fails++;
		}
		clnt_freeres(clnt, (xdrproc_t)xdr_name, (caddr_t)&hello);
	}
	if (sum_1(&list, &total, clnt) != RPC_SUCCESS) {
		clnt_perror(clnt, "SUM");
		fails++;
	} else if (total != 1000000010) {
		fprintf(stderr, "SUM: got %lld\n", (long long)total);
		fails++;
	}
	clnt_destroy(clnt);
	printf("calc_client: ADD=%d SUM=%lld: %s\n", sum, (long long)total,
	       fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
