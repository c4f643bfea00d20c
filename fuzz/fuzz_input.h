/* SPDX-License-Identifier: BSD-2-Clause */
/* Reading a fuzz input as a sequence of fields, for the targets that
 * interpret their input as operations (fuzz_soft_rx, fuzz_rrep_rsp,
 * fuzz_fileservice; docs/fuzzing.md): bytes, 16- and 32-bit numbers, runs
 * of bytes. Past the end of the input every field reads as 0, so that any
 * input is a complete program. Each byte is read in its own statement: C
 * leaves the order of two calls in one expression unspecified, and the
 * libFuzzer build (clang) and the CTest replayer (gcc) must read an input
 * alike. Also the targets' failure report. */
#ifndef RR_FUZZ_INPUT_H
#define RR_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* FZ_MODEL marks a target's own bookkeeping and invariant checks, run
 * after every operation: not instrumented for coverage (their compares
 * are not the code under test, and tracing them took up to half of a
 * run's time; docs/fuzzing.md "Long runs"), and never inlined into an
 * instrumented caller. Clang 13 and later; elsewhere (the gcc replayer)
 * just noinline. */
#if defined(__clang__) && __clang_major__ >= 13
#define FZ_MODEL __attribute__((noinline, no_sanitize("coverage")))
#else
#define FZ_MODEL __attribute__((noinline))
#endif

struct fz_in {
	const uint8_t *p;
	size_t left;
};

static inline uint8_t fz_u8(struct fz_in *in)
{
	if (!in->left)
		return 0;
	in->left--;
	return *in->p++;
}

/* little endian */
static inline uint16_t fz_u16(struct fz_in *in)
{
	uint16_t lo = fz_u8(in);
	uint16_t hi = fz_u8(in);

	return (uint16_t)(lo | hi << 8);
}

/* little endian */
static inline uint32_t fz_u32(struct fz_in *in)
{
	uint32_t lo = fz_u16(in);
	uint32_t hi = fz_u16(in);

	return lo | hi << 16;
}

/* big endian */
static inline uint32_t fz_be32(struct fz_in *in)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v = v << 8 | fz_u8(in);
	return v;
}

/* The next @want bytes of the input, or what is left of it: *@n of them. */
static inline const uint8_t *fz_bytes(struct fz_in *in, size_t want, size_t *n)
{
	const uint8_t *p = in->p;

	*n = want < in->left ? want : in->left;
	in->p += *n;
	in->left -= *n;
	return p;
}

/* A violated invariant: the message, then abort (libFuzzer keeps the input). */
#define FZ_FAIL(...)                                                           \
	do {                                                                   \
		fprintf(stderr, FZ_NAME ": " __VA_ARGS__);                     \
		fprintf(stderr, " (line %d)\n", __LINE__);                     \
		abort();                                                       \
	} while (0)

#endif
