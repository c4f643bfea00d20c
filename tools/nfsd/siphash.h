/* SPDX-License-Identifier: BSD-2-Clause */
/* SipHash-2-4, the keyed MAC of rpcrdma-nfsd's file handles (siphash.c). */
#ifndef RPCRDMA_NFSD_SIPHASH_H
#define RPCRDMA_NFSD_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The 64-bit SipHash-2-4 of @data under @key. */
uint64_t nfsd_siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
