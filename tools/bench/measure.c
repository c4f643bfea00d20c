/* SPDX-License-Identifier: BSD-2-Clause */
/* rpcrdma-bench's records and what goes into them: one record per workload,
 * transport and point (rec_new), the latency samples of a measured interval
 * and their percentiles, and the CPU time per operation of this process
 * (the client) and of the transport's server child. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_SAMPLES (1u << 20)

struct rec *recs;
unsigned nrecs;
static unsigned caprecs;

struct rec *rec_new(const char *wl, enum tp tp, const char *variant, uint32_t size,
		    unsigned outst, unsigned conns)
{
	struct rec *r;

	if (nrecs == caprecs) {
		unsigned ncap = caprecs ? caprecs * 2 : 64;
		struct rec *n = realloc(recs, ncap * sizeof(*n));

		if (!n) {
			fprintf(stderr, "rpcrdma-bench: out of memory\n");
			exit(1);
		}
		recs = n;
		caprecs = ncap;
	}
	r = &recs[nrecs++];
	memset(r, 0, sizeof(*r));
	snprintf(r->workload, sizeof(r->workload), "%s", wl);
	snprintf(r->variant, sizeof(r->variant), "%s", variant ? variant : "");
	r->tp = tp;
	r->size = size;
	r->outstanding = outst;
	r->conns = conns;
	r->ratio_raw = r->ratio_tirpc = r->rtrips = r->ratio_spin = -1;
	r->cpu_c = r->cpu_s = -1;
	r->cpu_c0 = r->cpu_s0 = -1;
	r->client_rss_per_conn = r->server_rss_per_conn = r->fds_per_conn = -1;
	r->server_fds_per_conn = r->connect_p50_us = -1;
	r->client_threads = r->server_threads = -1;
	return r;
}

FILE *ops_file;

void lat_init(struct lat *l)
{
	l->cap = MAX_SAMPLES;
	l->v = malloc(l->cap * sizeof(*l->v));
	l->at = ops_file ? malloc(l->cap * sizeof(*l->at)) : NULL;
	l->tid = ops_file ? malloc(l->cap * sizeof(*l->tid)) : NULL;
	l->n = 0;
	pthread_mutex_init(&l->lock, NULL);
}

void lat_add(struct lat *l, uint64_t ns)
{
	/* the end of the operation: taken before the lock, so that waiting
	 * for it is not counted */
	uint64_t end = l->at ? fs_now_ns() : 0;
	uint32_t tid = l->tid ? (uint32_t)syscall(SYS_gettid) : 0;

	pthread_mutex_lock(&l->lock);
	if (l->v && l->n < l->cap) {
		if (l->at && l->tid) {
			l->at[l->n] = end;
			l->tid[l->n] = tid;
		}
		l->v[l->n++] = ns;
	}
	pthread_mutex_unlock(&l->lock);
}

/* --ops: one line per operation of the point, in the order they ended:
 * the point, the thread, when the operation started (ns since the first
 * one started, at t0 on CLOCK_MONOTONIC, in the point's heading line) and
 * how long it took (ns); for histograms and for finding
 * what else ran while the slow ones waited (perf sched, strace -tt). */
static void lat_dump(const struct lat *l, const struct rec *r)
{
	uint64_t t0 = UINT64_MAX;

	if (!ops_file || !l->at || !l->tid)
		return;
	for (size_t i = 0; i < l->n; i++)
		if (l->at[i] - l->v[i] < t0)
			t0 = l->at[i] - l->v[i];
	fprintf(ops_file, "# %s %s %s size %u outstanding %u conns %u ops %zu t0 %llu\n",
		r->workload, tp_name[r->tp], r->variant[0] ? r->variant : "-", r->size,
		r->outstanding, r->conns, l->n, (unsigned long long)t0);
	for (size_t i = 0; i < l->n; i++)
		fprintf(ops_file, "%s %s %u %u %llu %llu\n", r->workload, tp_name[r->tp], r->conns,
			l->tid[i], (unsigned long long)(l->at[i] - l->v[i] - t0),
			(unsigned long long)l->v[i]);
	fflush(ops_file);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Fills the record's statistics from the latencies and the totals. */
void lat_finish(struct lat *l, struct rec *r, uint64_t ops, uint64_t bytes, double secs)
{
	lat_dump(l, r);
	if (l->n) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_u64);
		r->p50_us = (double)l->v[(l->n - 1) / 2] / 1e3;
		r->p99_us = (double)l->v[(l->n * 99 + 99) / 100 - 1] / 1e3;
	}
	r->ops = ops;
	r->secs = secs;
	r->ops_s = secs > 0 ? (double)ops / secs : 0;
	r->mbps = secs > 0 ? (double)bytes / secs / 1e6 : 0;
	lat_free(l);
}

void lat_free(struct lat *l)
{
	if (!l->v)
		return;
	free(l->v);
	free(l->at);
	free(l->tid);
	l->v = l->at = NULL;
	l->tid = NULL;
	pthread_mutex_destroy(&l->lock);
}

void lat_move(struct lat *dst, struct lat *src)
{
	size_t k = src->n < dst->cap - dst->n ? src->n : dst->cap - dst->n;

	if (dst->v && src->v)
		memcpy(dst->v + dst->n, src->v, k * sizeof(*dst->v));
	if (dst->at && src->at)
		memcpy(dst->at + dst->n, src->at, k * sizeof(*dst->at));
	if (dst->tid && src->tid)
		memcpy(dst->tid + dst->n, src->tid, k * sizeof(*dst->tid));
	if (dst->v)
		dst->n += k;
	lat_free(src);
}

/* ======================================================================
 * CPU time per operation
 *
 * Nanoseconds on CPU of a whole process, every thread, including threads
 * that exited during the interval (run_conns' client threads start and end
 * inside it): the kernel's process CPU clock, which is the sum of the
 * threads' sum_exec_runtime, the first field of /proc/PID/task/TID/schedstat.
 * When that clock cannot be read, the schedstat sum over the live threads.
 * Both fail (-1) without /proc and without the clock, or when the process
 * is gone.
 * ====================================================================== */

static int64_t schedstat_sum(const char *taskdir)
{
	DIR *d = opendir(taskdir);
	struct dirent *e;
	int64_t sum = 0;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300];
		unsigned long long v;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/schedstat", taskdir, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;   /* the thread just exited */
		if (fscanf(f, "%llu", &v) == 1) {
			sum += (int64_t)v;
			n++;
		}
		fclose(f);
	}
	closedir(d);
	return n ? sum : -1;
}

static int64_t ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000ll + t->tv_nsec;
}

int64_t cpu_ns(pid_t pid)
{
	struct timespec t;
	clockid_t cid = CLOCK_PROCESS_CPUTIME_ID;
	char dir[48];

	if (pid < 0)
		return -1;
	if ((pid == 0 || clock_getcpuclockid(pid, &cid) == 0) && clock_gettime(cid, &t) == 0)
		return ts_ns(&t);
	if (pid == 0)
		return schedstat_sum("/proc/self/task");
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	return schedstat_sum(dir);
}

/* The server process of @tp's records: the forked child; -1 when there is
 * none (every server here is a child of its own, one per transport, so no
 * server's CPU is shared with another transport's records). */
static pid_t server_pid(enum tp tp)
{
	return tp_pid[tp] > 0 ? tp_pid[tp] : -1;
}

/* Right before a measured part of @r's interval. */
void cpu_begin(struct rec *r)
{
	r->cpu_s0 = cpu_ns(server_pid(r->tp));
	r->cpu_c0 = cpu_ns(0);
}

/* Adds now - @t0 to *@acc; an unknown end, start or sum stays unknown (-1). */
static void cpu_add(int64_t *acc, int64_t t0, int64_t t)
{
	if (*acc < 0 || t0 < 0 || t < t0)
		*acc = -1;
	else
		*acc += t - t0;
}

/* Right after a part: adds its CPU time to @r's. */
void cpu_pause(struct rec *r)
{
	int64_t c = cpu_ns(0), s = cpu_ns(server_pid(r->tp));

	cpu_add(&r->cpu_c_ns, r->cpu_c0, c);
	cpu_add(&r->cpu_s_ns, r->cpu_s0, s);
}

/* After the last part's cpu_pause: CPU per operation over @ops operations. */
void cpu_per_op(struct rec *r, uint64_t ops)
{
	if (!ops)
		return;
	if (r->cpu_c_ns >= 0)
		r->cpu_c = (double)r->cpu_c_ns / 1e3 / (double)ops;
	if (r->cpu_s_ns >= 0)
		r->cpu_s = (double)r->cpu_s_ns / 1e3 / (double)ops;
}

/* Right after a single measured interval, over @ops operations. */
void cpu_end(struct rec *r, uint64_t ops)
{
	cpu_pause(r);
	cpu_per_op(r, ops);
}
