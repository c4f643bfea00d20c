/* SPDX-License-Identifier: BSD-2-Clause */
/* lab_check.h - the report and data helpers shared by the interop lab's
 * programs (tests/interop/rr_lab_*.c): one "ok NAME: detail" / "not ok
 * NAME: detail" line per check on stdout, which tests/interop/vm-tests.sh
 * turns into PASS/FAIL lines, a seeded byte pattern for data checks, and
 * the ECHO procedure their servers share (u32 -> its complement).
 * Header-only: each program is one translation unit (and not every one
 * uses each helper: those are marked unused). */
#ifndef RR_LAB_CHECK_H
#define RR_LAB_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rpcrdma/rpc.h"

static int failures;

static void result(bool ok, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void result(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (!ok)
		failures++;
	printf("%s %s", ok ? "ok" : "not ok", name);
	if (fmt && *fmt) {
		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}

/* @n bytes of a xorshift pattern seeded by @seed. */
static __attribute__((unused)) void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13; x ^= x >> 17; x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* ECHO: u32 v -> u32 ~v */
static __attribute__((unused)) int h_echo(struct rpcrdma_req *r, void *ctx)
{
	uint32_t v;

	(void)ctx;
	if (rpcrdma_xdr_get_u32(rpcrdma_req_args(r), &v))
		return RPCRDMA_SVC_GARBAGE_ARGS;
	rpcrdma_xdr_put_u32(rpcrdma_req_results(r), ~v);
	return RPCRDMA_SVC_OK;
}

#endif
