/* SPDX-License-Identifier: BSD-2-Clause */
/* Defines HAVE_TIRPC_HDR when libtirpc's <rpc/rpc.h> is on the include
 * path: the tests that talk to libtirpc (tests/rpc/test_tirpc_interop.c,
 * tests/rpc/test_drc_tirpc.c) are built only then. Test code only. */
#ifndef RR_TESTS_TIRPC_HDR_H
#define RR_TESTS_TIRPC_HDR_H

#if defined(__has_include)
#if __has_include(<rpc/rpc.h>)
#define HAVE_TIRPC_HDR 1
#endif
#endif

#endif
