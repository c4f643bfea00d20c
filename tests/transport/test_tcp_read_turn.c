/* SPDX-License-Identifier: BSD-2-Clause */
/* The tcp:// record reader on a real socket (src/transport/tcp/tcp_io.h),
 * configured as a server connection's (its record buffer grows as bytes
 * arrive, recycled through a shared pool): one call reads a record as far
 * as the socket has bytes and stops at the record's end (a pipelined next
 * record stays in the socket for the next turn); with a bound per turn
 * (turn_max) a call takes at most that many bytes from the socket, so a
 * peer streaming a large record on a shared progress loop yields to the
 * loop's other connections between two reads, and the record still
 * completes, byte for byte, over several turns; through a bounce buffer
 * (a server loop's) the record arrives intact and the read still stops at
 * its end. The bytes left in the socket are counted with FIONREAD: no
 * timing involved. A blocking socket: only rr_tcp_read_wait waits. */
#include "test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "transport/tcp/rm.h"
#include "transport/tcp/tcp_io.h"

#define REC1 20000u   /* data bytes of the first record */
#define REC2 100u     /* of the pipelined second one */

/* Bytes waiting in @fd's receive queue. */
static int queued(int fd)
{
	int n = -1;

	return ioctl(fd, FIONREAD, &n) < 0 ? -1 : n;
}

/* Writes a record of @len bytes of pattern @seed as one fragment to @fd. */
static void send_rec(int fd, uint32_t len, uint8_t seed)
{
	uint8_t *b = malloc(4 + (size_t)len);

	REQUIRE(b != NULL);
	rr_rm_put_header(b, len, true);
	for (uint32_t i = 0; i < len; i++)
		b[4 + i] = (uint8_t)(seed + i * 7u);
	REQUIRE_EQ(write(fd, b, 4 + (size_t)len), (ssize_t)(4 + (size_t)len));
	free(b);
}

/* Takes the complete record and checks @len bytes of pattern @seed. */
static void take_rec(struct rr_tcp_reader *r, uint32_t len, uint8_t seed)
{
	size_t got, cap;
	uint8_t *b = rr_rm_dec_take(&r->dec, &got, &cap);
	bool same = true;

	REQUIRE(b != NULL);
	REQUIRE_EQ(got, (size_t)len);
	for (uint32_t i = 0; i < len; i++)
		same = same && b[i] == (uint8_t)(seed + i * 7u);
	CHECK(same);
	rr_tcp_reader_recycle(r, b, cap);
}

/* A server connection's reader on the read end of a stream socket pair
 * holding two records; @turn_max its bound per call. */
static void setup(struct rr_test_env *te, struct rr_tcp_cache *pool, struct rr_tcp_reader *r,
		  int sv[2], size_t turn_max)
{
	rr_test_env_init(te, 13);
	rr_tcp_cache_init(pool);
	rr_tcp_reader_init(r, &te->env, 1u << 20, RR_TCP_SPARE_MAX, pool, false, false);
	r->turn_max = turn_max;
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	send_rec(sv[1], REC1, 3);
	send_rec(sv[1], REC2, 9);
	REQUIRE_EQ(queued(sv[0]), (int)(4 + REC1 + 4 + REC2));
}

static void teardown(struct rr_test_env *te, struct rr_tcp_cache *pool, struct rr_tcp_reader *r,
		     int sv[2])
{
	rr_tcp_reader_fini(r);
	rr_tcp_cache_fini(pool, &te->env);
	close(sv[0]);
	close(sv[1]);
	CHECK_EQ(te->live, 0);
}

/* Without a bound: the whole first record in one call, the second left in
 * the socket; then the second, then 0 (the socket is empty). */
TEST(tcp_read_whole_record_in_one_call_and_stops_at_its_end)
{
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_reader r;
	int sv[2];

	setup(&te, &pool, &r, sv, 0);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	CHECK_EQ(queued(sv[0]), (int)(4 + REC2));
	take_rec(&r, REC1, 3);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC2, 9);
	CHECK_EQ(rr_tcp_read(&r, sv[0]), 0);
	CHECK(rr_rm_dec_idle(&r.dec));
	teardown(&te, &pool, &r, sv);
}

/* With a bound of 4096 bytes: each call takes exactly 4096 bytes while the
 * record lasts (0: come back), the last call only the record's rest; the
 * record arrives intact and the next record is untouched. */
TEST(tcp_read_turn_bound_yields_and_record_completes)
{
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_reader r;
	const int total = (int)(4 + REC1 + 4 + REC2);
	int sv[2], calls = 0, rc;

	setup(&te, &pool, &r, sv, 4096);
	for (;;) {
		rc = rr_tcp_read(&r, sv[0]);
		calls++;
		if (rc != 0)
			break;
		/* one bound taken, no more: the rest waits in the socket */
		REQUIRE_EQ(queued(sv[0]), total - 4096 * calls);
		REQUIRE(calls < 10);
	}
	REQUIRE_EQ(rc, RR_RM_RECORD);
	CHECK_EQ(calls, (int)((4 + REC1 + 4095) / 4096));
	CHECK_EQ(queued(sv[0]), (int)(4 + REC2));
	take_rec(&r, REC1, 3);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC2, 9);
	CHECK_EQ(rr_tcp_read(&r, sv[0]), 0);
	teardown(&te, &pool, &r, sv);
}

/* Through a bounce buffer of 4096 bytes: the record's bulk passes through
 * it (it holds record bytes afterwards: the pattern repeats every 256
 * bytes and the pieces start at multiples of 4096), the rest goes straight
 * to the record, nothing beyond the record is taken from the socket, and
 * the record arrives intact. */
TEST(tcp_read_through_bounce_buffer_stops_at_record_end)
{
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_reader r;
	uint8_t bounce[4096], want[4096];
	int sv[2];

	setup(&te, &pool, &r, sv, 0);
	memset(bounce, 0xee, sizeof(bounce));
	r.bounce = bounce;
	r.bounce_cap = sizeof(bounce);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	CHECK_EQ(queued(sv[0]), (int)(4 + REC2));
	for (uint32_t i = 0; i < sizeof(want); i++)
		want[i] = (uint8_t)(3 + i * 7u);
	CHECK_MEM(bounce, want, sizeof(want));
	take_rec(&r, REC1, 3);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC2, 9);
	teardown(&te, &pool, &r, sv);
}

/* A stage shared by the readers of one loop: one recv stages both records;
 * after the first is taken, rr_tcp_reader_park moves the second's bytes
 * to the reader's own memory, so another reader may overwrite the shared
 * stage (here: filled with 0xee) and the second record still arrives
 * intact, without a byte left in the socket; then the reader is back on
 * the shared stage and owns nothing (the env counts what is live). */
TEST(tcp_read_shared_stage_parks_staged_bytes)
{
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_reader r;
	uint8_t *shared = calloc(1, 32768);
	int sv[2];

	REQUIRE(shared != NULL);
	setup(&te, &pool, &r, sv, 0);
	rr_tcp_reader_share_stage(&r, shared, 32768);
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	CHECK_EQ(queued(sv[0]), 0);   /* both records were staged */
	take_rec(&r, REC1, 3);
	REQUIRE(rr_tcp_reader_buffered(&r));
	REQUIRE_EQ(rr_tcp_reader_park(&r), 0);
	CHECK(r.stage != shared);
	memset(shared, 0xee, 32768);   /* another reader's turn */
	REQUIRE_EQ(rr_tcp_read(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC2, 9);
	CHECK(!rr_tcp_reader_buffered(&r));
	CHECK_EQ(rr_tcp_read(&r, sv[0]), 0);
	REQUIRE_EQ(rr_tcp_reader_park(&r), 0);
	CHECK(r.stage == shared);
	teardown(&te, &pool, &r, sv);
	free(shared);
}

/* A tcp:// client's socket is blocking (tcp_client.c clnt_sock_setup): a
 * caller waiting for its Reply sleeps in recv itself. rr_tcp_read must
 * still never wait on it (the loop's thread reads with it): on a blocking
 * socket holding half a record it returns 0 at once (a recv without
 * MSG_DONTWAIT would hang here). rr_tcp_read_wait waits in its first recv
 * only: it reads a complete record, and on an empty socket returns 0 when
 * SO_RCVTIMEO ends the wait. */
TEST(tcp_read_never_waits_on_a_blocking_socket_read_wait_once)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 10000};
	struct rr_test_env te;
	struct rr_tcp_cache pool;
	struct rr_tcp_reader r;
	uint8_t half[4 + 50];
	int sv[2];

	rr_test_env_init(&te, 13);
	rr_tcp_cache_init(&pool);
	rr_tcp_reader_init(&r, &te.env, 1u << 20, RR_TCP_SPARE_MAX, &pool, false, false);
	REQUIRE_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	rr_rm_put_header(half, REC2, true);
	memset(half + 4, 9, sizeof(half) - 4);
	REQUIRE_EQ(write(sv[1], half, sizeof(half)), (ssize_t)sizeof(half));
	CHECK_EQ(rr_tcp_read(&r, sv[0]), 0);        /* half a record: no wait */
	CHECK_EQ(queued(sv[0]), 0);
	CHECK_EQ(rr_tcp_read(&r, sv[0]), 0);        /* nothing at all: no wait */
	rr_tcp_reader_reset(&r);
	send_rec(sv[1], REC1, 3);
	REQUIRE_EQ(rr_tcp_read_wait(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC1, 3);
	REQUIRE_EQ(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	CHECK_EQ(rr_tcp_read_wait(&r, sv[0]), 0);   /* the timeout ends the wait */
	send_rec(sv[1], REC2, 9);
	REQUIRE_EQ(rr_tcp_read_wait(&r, sv[0]), RR_RM_RECORD);
	take_rec(&r, REC2, 9);
	rr_tcp_reader_fini(&r);
	rr_tcp_cache_fini(&pool, &te.env);
	close(sv[0]);
	close(sv[1]);
	CHECK_EQ(te.live, 0);
}
