/* SPDX-License-Identifier: BSD-2-Clause */
/* The one table of transports, by URL scheme, and target URL parsing
 * (transport/xprt.h section 4): the RPC layer resolves a URL here and names
 * no transport itself. Built in: "tcp" (RFC 5531 section 11 record marking),
 * "rdma" (RFC 8166 on the soft iWARP provider) and "verbs" (RFC 8166 on
 * rdma-core; -EPROTONOSUPPORT at create when built without it, -ENODEV
 * without an RDMA device). A known scheme without a class answers
 * -EPROTONOSUPPORT. */
#include "transport/xprt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* The 3 built in, and room for an application's or the tests' own (the
 * whole suite in one process registers 6 more). */
#define RR_XPRT_MAX 16

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct rr_xprt_class *registry[RR_XPRT_MAX];
static bool builtin_done;

static const char *const known_schemes[] = {"tcp", "rdma", "verbs"};

static int register_locked(const struct rr_xprt_class *cls)
{
	for (unsigned i = 0; i < RR_XPRT_MAX; i++) {
		if (registry[i] && !strcmp(registry[i]->scheme, cls->scheme)) {
			registry[i] = cls;
			return 0;
		}
	}
	for (unsigned i = 0; i < RR_XPRT_MAX; i++) {
		if (!registry[i]) {
			registry[i] = cls;
			return 0;
		}
	}
	return -ENOSPC;
}

/* Registers the transports built into the library. Naming each class here
 * also makes a static link (librpcrdma.a) pull in its object file: a
 * constructor alone would not, since nothing else references it. */
static void rr_xprt_builtin_init(void)
{
	if (builtin_done)
		return;
	builtin_done = true;
	register_locked(&rr_xprt_tcp_class);
	register_locked(&rr_xprt_rdma_class);
	register_locked(&rr_xprt_verbs_class);
}

int rr_xprt_register(const struct rr_xprt_class *cls)
{
	int rc;

	if (!cls || !cls->scheme || !*cls->scheme || strlen(cls->scheme) >= 16)
		return -EINVAL;
	pthread_mutex_lock(&reg_lock);
	rr_xprt_builtin_init();
	rc = register_locked(cls);
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

int rr_xprt_lookup(const char *scheme, const struct rr_xprt_class **out)
{
	int rc = -EINVAL;

	pthread_mutex_lock(&reg_lock);
	rr_xprt_builtin_init();
	for (unsigned i = 0; i < RR_XPRT_MAX; i++) {
		if (registry[i] && !strcmp(registry[i]->scheme, scheme)) {
			*out = registry[i];
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	if (rc) {
		for (unsigned i = 0; i < RR_ARRAY_SIZE(known_schemes); i++)
			if (!strcmp(known_schemes[i], scheme))
				return -EPROTONOSUPPORT;
	}
	return rc;
}

/* scheme "://" host ":" port, host = name | IPv4 | "[" IPv6 "]";
 * the port is decimal 0..65535. Nothing may follow the port. */
int rr_xprt_parse_url(const char *url, struct rr_xprt_target *t)
{
	const char *sep, *h, *hend, *colon;
	size_t n;
	char *end;
	unsigned long port;

	if (!url)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	sep = strstr(url, "://");
	if (!sep || sep == url || (size_t)(sep - url) >= sizeof(t->scheme))
		return -EINVAL;
	for (const char *p = url; p < sep; p++)
		t->scheme[p - url] = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
	h = sep + 3;
	if (*h == '[') {
		hend = strchr(h, ']');
		if (!hend)
			return -EINVAL;
		h++;
		colon = hend + 1;
		if (*colon != ':')
			return -EINVAL;
	} else {
		colon = strrchr(h, ':');
		if (!colon)
			return -EINVAL;
		hend = colon;
	}
	n = (size_t)(hend - h);
	if (n == 0 || n >= sizeof(t->host))
		return -EINVAL;
	memcpy(t->host, h, n);
	if (!colon[1] || strlen(colon + 1) >= sizeof(t->port))
		return -EINVAL;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port > 65535 || colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	snprintf(t->port, sizeof(t->port), "%lu", port);
	return 0;
}

int rr_xprt_resolve(const char *url, bool server, struct rr_xprt_target *t,
		    const struct rr_xprt_class **out)
{
	int rc = rr_xprt_parse_url(url, t);

	if (rc)
		return rc;
	rc = rr_xprt_lookup(t->scheme, out);
	if (rc)
		return rc;
	if (server ? !(*out)->server : !(*out)->client)
		return -EPROTONOSUPPORT;
	return 0;
}
