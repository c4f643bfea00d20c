#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the seed corpora of fuzz_soft_rx, fuzz_rrep_rsp and
fuzz_fileservice (fuzz/corpus/<name>/seed-*): one small input per scenario
the targets were built for, in the operation encoding each target's source
documents (docs/fuzzing.md has the tables). Run from the repository root:
    python3 fuzz/mkseeds.py
The files are committed; this script only regenerates them (it deletes the
seed-* files of those three corpora first, never other files, e.g. crash
reproducers). Python 3 standard library only."""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def le16(v):
    return struct.pack("<H", v & 0xFFFF)


def be32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


# ---------------------------------------------------------------- soft_rx --
# header: flags (bit0 CRC, bit1 Commit, bit2 small socket buffers,
# bits 3-4 log2 IRD, bits 5-6 log2 ORD), fpdu (QP fpdu_max 64 + 8 fpdu),
# Receives posted, RNG seed
R_RW, R_RO, WIN, R_PARENT, R_DUR, R_SINK, DEAD = 0, 1, 2, 3, 4, 5, 6
LONG = 0x20  # a length beyond the short default


def sx_hdr(crc=False, commit=False, small=False, ird=3, ord_=3, fpdu=174, nrecv=4, seed=1):
    f = (1 if crc else 0) | (2 if commit else 0) | (4 if small else 0) | (ird << 3) | (ord_ << 5)
    return bytes([f, fpdu, nrecv, seed])


def sx_write(sel, off, ln, seg=88):
    return bytes([0, sel]) + le16(off) + le16(ln) + bytes([seg])


def sx_send(kind, ln, isel=0, seg=88):
    # kind: 0 Send, 1 Send+Inv, 2 Send+SE, 3 Send+SE+Inv
    return bytes([1, kind | (seg << 2 & 0xFC), isel]) + le16(ln)


def sx_read_req(sel, off, size, sink_to=0):
    return bytes([2, sel]) + le16(off) + le16(size) + le16(sink_to)


def sx_read_resp(n=0, adj=0, seg=88):
    return bytes([3]) + le16(n) + bytes([adj, seg])


def sx_term(layer=0, etype=1, ecode=0):
    return bytes([4, layer, etype, ecode])


def sx_commit_req(regions, cid=9):
    out = bytes([5, len(regions) - 1, cid])
    for sel, off, ln in regions:
        out += bytes([sel]) + le16(off) + le16(ln)
    return out


def sx_commit_resp(status=0, adj=0):
    return bytes([6, status, adj])


def sx_raw(data):
    return bytes([7, len(data)]) + data


def sx_corrupt(pos, x):
    return bytes([8]) + le16(pos) + bytes([x])


def sx_push(n=0):
    return bytes([9]) + le16(n)


RX, TX, PEER = bytes([10]), bytes([11]), bytes([12])


def sx_dereg(i):  # 0 R_RW 1 R_RO 2 R_PARENT 3 R_SINK 4 R_DUR
    return bytes([13, i])


LOCAL_INV = bytes([14])


def sx_rebind(off4, len4, acc=3):
    return bytes([15, off4, len4, acc])


def sx_truncate(size):
    return bytes([16]) + le16(size)


def sx_post_read(sink=0, size=64, soff=0, sto=0):  # sink 0 R_SINK 1 R_DUR 2 R_RW
    return bytes([17, sink, size, soff]) + le16(sto)


def sx_post_commit(regions):
    out = bytes([18, len(regions) - 1])
    for stag8, ln, off in regions:
        out += bytes([stag8]) + le16(ln) + le16(off)
    return out


def sx_post_send(off=0, k=0, ln=40):
    return bytes([19, off, k]) + le16(ln)


def sx_post_write(off=0, k=0, ln=40):
    return bytes([20, off, k]) + le16(ln)


def sx_post_recv(n=1):
    return bytes([21, n])


POLL = bytes([22])


def sx_alloc_fail(n=1):
    return bytes([23, n])


def sx_set_commit(on=1):
    return bytes([24, on])


PEER_EOF = bytes([25])

SOFT_RX = {
    "write-send-read": sx_hdr() + sx_write(R_RW, 16, 100) + sx_send(0, 60) + sx_read_req(R_RO, 8, 200)
    + sx_push() + PEER + POLL,
    "write-split-every-way": sx_hdr(crc=True, fpdu=0) + sx_write(R_RW, 0, 300, seg=2) + sx_push(7)
    + sx_push(30) + RX + sx_push() + POLL,
    "bounds-and-access": sx_hdr() + sx_write(R_RO, 0, 10) + sx_push() + PEER,
    "bounds-past-end": sx_hdr() + sx_write(R_RW, 500, 100) + sx_push() + PEER,
    "invalid-stag-dead": sx_hdr() + sx_dereg(0) + sx_write(DEAD, 0, 10) + sx_push() + PEER,
    "window-write-then-send-inv": sx_hdr() + sx_write(WIN, 0, 64) + sx_send(1, 20, isel=WIN)
    + sx_write(WIN, 0, 64) + sx_push() + PEER + POLL,
    "window-local-inv-mid-segment": sx_hdr() + sx_write(WIN, 3, 257, seg=16) + sx_push(91) + LOCAL_INV
    + sx_push() + PEER + POLL,
    "window-rebind": sx_hdr() + LOCAL_INV + sx_rebind(10, 20, 3) + sx_write(WIN, 0, 40) + sx_push() + POLL,
    "send-inv-mr-cannot": sx_hdr() + sx_send(1, 8, isel=R_RW) + sx_push() + PEER + POLL,
    "dereg-mid-write": sx_hdr(small=True) + sx_write(R_RW, 0, 400, seg=60) + sx_push(100) + sx_dereg(0)
    + sx_push() + sx_send(0, 10) + sx_push() + POLL,
    "dereg-stalled-read-response": sx_hdr(small=True, ird=3) + b"".join(
        sx_read_req(R_DUR | LONG, 0, 6000) for _ in range(6)) + sx_push() + sx_dereg(4) + PEER + POLL,
    "dereg-queued-read-request": sx_hdr(small=True, ird=3) + sx_read_req(R_DUR | LONG, 0, 6000)
    + sx_read_req(R_DUR | LONG, 0, 6000) + sx_read_req(R_DUR | LONG, 0, 6000) + sx_read_req(R_RW, 0, 500)
    + sx_push() + sx_dereg(0) + PEER + TX + PEER + POLL,
    "durable-write-commit": sx_hdr(commit=True) + sx_write(R_DUR, 0, 500) + sx_commit_req([(R_DUR, 0, 500)])
    + sx_push() + PEER,
    "durable-truncate-commit-past-eof": sx_hdr(commit=True) + sx_truncate(1000)
    + sx_commit_req([(R_DUR, 0, 4000)]) + sx_write(R_DUR | 0x10, 3000, 200) + sx_push() + PEER,
    "durable-truncate-read-crc": sx_hdr(crc=True) + sx_read_req(R_DUR, 0, 341) + sx_truncate(0) + sx_push()
    + PEER,
    "durable-truncate-during-read": sx_hdr(crc=True, small=True, fpdu=1) + sx_read_req(R_DUR | LONG, 0, 6000)
    + sx_read_req(R_DUR | LONG, 0, 6000) + sx_push() + sx_truncate(4000) + PEER + TX + PEER,
    "durable-truncate-under-fpdu": sx_hdr(crc=True, small=True, fpdu=0) + sx_read_req(R_DUR | LONG, 0, 6000)
    + sx_push() + sx_truncate(5000) + PEER + TX + PEER,
    "commit-not-durable": sx_hdr(commit=True) + sx_commit_req([(R_RW, 0, 100), (R_DUR, 0, 0)]) + sx_push()
    + PEER,
    "local-read-and-response": sx_hdr(ord_=2) + sx_post_read(0, 100, 10) + sx_read_resp(40) + sx_read_resp(0)
    + sx_push() + PEER + POLL,
    "local-read-into-durable": sx_hdr() + sx_post_read(1, 200, 0) + sx_read_resp(0) + sx_push() + POLL,
    "local-read-response-wrong": sx_hdr() + sx_post_read(0, 100) + sx_read_resp(10, adj=0x81) + sx_push()
    + PEER + POLL,
    "local-commit-and-response": sx_hdr(commit=True) + sx_post_commit([(1, 100, 0), (2, 0, 8)])
    + sx_commit_resp(0) + sx_post_commit([(3, 10, 0)]) + sx_commit_resp(1) + sx_push() + PEER + POLL,
    "local-send-write-inline": sx_hdr() + sx_post_send(0, 0, 30) + sx_post_send(4, 5, 64)
    + sx_post_write(0, 0x30, 100) + PEER + POLL,
    "local-send-then-dereg": sx_hdr(small=True) + b"".join(sx_post_send(0, 0, 300) for _ in range(12))
    + sx_dereg(0) + PEER + POLL,
    "fenced-send-behind-read": sx_hdr() + sx_post_read(0, 50) + sx_post_send(0, 8, 20) + PEER
    + sx_read_resp(0) + sx_push() + PEER + POLL,
    "ird-overflow": sx_hdr(ird=0) + sx_read_req(R_RW, 0, 10) + sx_read_req(R_RW, 0, 10) + sx_push() + PEER,
    "no-receive": sx_hdr(nrecv=0) + sx_send(0, 10) + sx_push() + PEER + POLL,
    "receive-too-short": sx_hdr(nrecv=1) + sx_send(0, 200) + sx_push() + PEER + POLL,
    "peer-terminate": sx_hdr() + sx_term(1, 2, 3) + sx_push() + POLL + sx_post_send() + POLL,
    "corrupt-crc": sx_hdr(crc=True) + sx_send(0, 20) + sx_corrupt(25, 0x40) + sx_push() + PEER + POLL,
    "corrupt-header": sx_hdr() + sx_write(R_RW, 0, 40) + sx_corrupt(2, 0x80) + sx_push() + PEER,
    "raw-bytes": sx_hdr() + sx_raw(bytes([0, 20, 0x43, 0x03]) + bytes(40)) + sx_push() + PEER,
    "alloc-failure-durable": sx_hdr() + sx_alloc_fail(3) + sx_write(R_DUR, 0, 50) + sx_push() + PEER,
    "commit-off-then-on": sx_hdr() + sx_commit_req([(R_DUR, 0, 8)]) + sx_set_commit(1) + sx_push() + PEER,
    "peer-eof": sx_hdr() + sx_write(R_RW, 0, 50, seg=4) + sx_push(30) + PEER_EOF + RX + POLL,
    "every-op-once": sx_hdr(crc=True, commit=True, small=True) + bytes(range(26)) * 2,
}

# -------------------------------------------------------------- rrep_rsp --
# header: flags (bit0 the requester's R, bit1 the responder's R, bit2
# windows, bit3 the requester's inline DDP, bit4 the requester offers no
# reliable reply, bits 5-7 ORD - 1), inline 1024 + 16 x, max segment
# 256 + 256 x, credits 1 + x % 32, rrep_max 1 + x % 8, timeout x + 1 ms,
# Reply memory per connection 4 KiB (1 + x) (255: 16 MiB), send slots
# 1 + (x & 7) (bit3: send timeout 50 ms)


def rr_hdr(flags=3, inline=0, seg=3, credits=15, rrep_max=3, timeout=100, mem=255, slots=7):
    return bytes([flags, inline, seg, credits, rrep_max, timeout, mem, slots])


def rr_call(alen=32, ilen=0, nsinks=0, slen=0, max_reply=4000, min_reply=0, unknown=True, corrupt=None):
    k = nsinks | (4 if unknown else 0) | (0x80 if corrupt else 0)
    pos, x = corrupt if corrupt else (0, 0)
    return bytes([0]) + le16(alen) + le16(ilen) + bytes([k]) + le16(slen) + le16(pos) + bytes([x]) \
        + le16(max_reply) + le16(min_reply)


def rr_done(k=0, sel=0, xid=None, credit=1):
    # k % 4: 0 the XID of Call sel, 1 a recent XID, 2 @xid, 3 Call sel's or
    # the next; 4: Send With Invalidate of an exposure's STag, 8: of an
    # unknown STag, 16: of a fenced one
    out = bytes([1, k, sel, credit])
    if k % 4 == 2:
        out += struct.pack("<HH", (xid or 0) & 0xFFFF, (xid or 0) >> 16)
    return out


def rr_reply(idx=0, hlen=2900, ilen=0, tlen=100, item=False, refuse=False):
    return bytes([2, idx]) + le16(hlen) + le16(ilen) + le16(tlen) + bytes([(1 if item else 0) | (2 if refuse else 0)])


def rr_time(tenth_ms):
    return bytes([3]) + le16(tenth_ms)


def rr_raw(data, inv=False, dead=False):
    return bytes([4, (1 if inv else 0) | (2 if dead else 0), len(data) // 2]) + data


DISC = bytes([5])


def rr_complete(n=16, fail=False):
    return bytes([6, (0xF0 if fail else 0) | ((n - 1) & 15)])


def rr_pull(idx=0, done=True, inv=False):
    return bytes([7, idx | (0 if done else 0x80) | (0x40 if inv else 0)])


def rr_finish(idx=0, early=False):
    return bytes([8, idx | (0x80 if early else 0)])


def rr_refuse(idx=0):
    return bytes([9, idx])


def rr_fail(n=1):
    return bytes([10, n])


C = rr_complete()

RREP_RSP = {
    "pull-then-done": rr_hdr() + rr_call() + C + rr_reply(0) + C + rr_finish(0) + rr_pull(0) + C,
    "done-as-send-with-invalidate": rr_hdr() + rr_call() + rr_reply(0) + rr_pull(0, inv=True) + C,
    "windows-local-invalidate": rr_hdr(flags=4 | 3) + rr_call() + rr_reply(0) + rr_pull(0) + C
    + rr_call() + rr_reply(1) + rr_time(2000) + C,
    "done-early-and-twice": rr_hdr() + rr_call() + rr_done(1, 0) + rr_reply(0) + rr_done(0, 0)
    + rr_done(0, 0) + rr_pull(0) + C,
    "done-unknown-xid": rr_hdr() + rr_done(2, 0, xid=0xdeadbeef) + rr_call() + rr_reply(0)
    + rr_done(2, 0, xid=7) + C,
    "forged-invalidate-other-reply": rr_hdr() + rr_call() + rr_call() + rr_reply(0) + rr_reply(1)
    + rr_done(4, 1) + rr_pull(0) + rr_pull(1) + C + rr_time(2000),
    "invalidate-unknown-stag": rr_hdr() + rr_call() + rr_reply(0) + rr_done(8, 0),
    "invalidate-fenced-stag": rr_hdr(timeout=0) + rr_call() + rr_reply(0) + rr_time(100) + C
    + rr_done(16, 0),
    "timeout-then-late-pull": rr_hdr(timeout=5) + rr_call() + rr_reply(0) + rr_time(30) + rr_time(100)
    + C + rr_pull(0),
    "disconnect-with-exposures": rr_hdr() + rr_call() + rr_call() + rr_reply(0) + rr_reply(1) + DISC
    + rr_done(0, 0),
    "rrep-max-parks": rr_hdr(rrep_max=0) + rr_call() + rr_call() + rr_call() + rr_reply(0) + rr_reply(1)
    + rr_reply(2) + rr_pull(0) + C + rr_time(2000) + C,
    "over-memory-budget": rr_hdr(mem=0) + rr_call() + rr_call() + rr_reply(0) + rr_reply(1) + C,
    "write-chunk-and-read-chunk": rr_hdr(flags=0) + rr_call(nsinks=1, slen=8000)
    + rr_reply(0, 2900, 5000, 100, True) + C + rr_finish(0) + rr_pull(0) + C,
    "read-chunks-in-call": rr_hdr() + rr_call(alen=200, ilen=3000) + C + rr_reply(0, 100)
    + rr_call(alen=3000) + C + rr_reply(1, 200) + C,
    "reads-ord-one": rr_hdr(flags=3) + rr_call(alen=200, ilen=3000) + rr_call(alen=3000)
    + rr_complete(1) + rr_complete(1) + rr_complete(1) + C,
    "read-fails": rr_hdr() + rr_call(alen=200, ilen=3000) + rr_complete(1, fail=True)
    + rr_call(alen=200, ilen=3000) + C,
    "reply-chunk": rr_hdr() + rr_call(max_reply=6000, min_reply=3000, unknown=False) + rr_reply(0, 4000)
    + C + rr_finish(0),
    "inline-reply": rr_hdr() + rr_call(max_reply=200, unknown=False) + rr_reply(0, 100) + C,
    "no-reliable-reply": rr_hdr(flags=16 | 3) + rr_call() + rr_reply(0) + C + rr_done(0, 0),
    "corrupted-call": rr_hdr() + rr_call(corrupt=(13, 0x7f)) + rr_call(corrupt=(20, 0x3)) + C
    + rr_reply(0) + rr_reply(1) + C,
    "raw-messages": rr_hdr() + rr_raw(bytes(16)) + rr_raw(be32(1) + be32(1) + be32(4) + be32(3))
    + rr_raw(be32(1) + be32(2) + be32(4) + be32(0), inv=True),
    "no-receive-left": rr_hdr(credits=0, rrep_max=0) + rr_call() * 7,
    "calls-beyond-credits": rr_hdr(credits=0) + rr_call(max_reply=200, unknown=False) * 20 + rr_reply(3, 100)
    + C,
    "alloc-failure": rr_hdr() + rr_fail(1) + rr_call() + rr_fail(2) + rr_call() + rr_reply(0)
    + rr_fail(1) + rr_reply(1, refuse=True) + C,
    "refuse-and-finish": rr_hdr() + rr_call() + rr_call() + rr_refuse(0) + rr_finish(1) + C,
    "slots-exhausted": rr_hdr(slots=0) + rr_call() + rr_call() + rr_reply(0, 100) + rr_reply(1, 100) + C
    + rr_reply(1, 100) + C,
    "send-stall": rr_hdr(slots=8 | 3) + rr_call() + rr_reply(0, 100) + rr_time(1000),
    "send-fails": rr_hdr() + rr_call(nsinks=1, slen=3000) + rr_reply(0, 100, 2000, 10, True)
    + rr_complete(1, fail=True),
    "orphaned-reply": rr_hdr(flags=0) + rr_call(nsinks=1, slen=8000) + rr_reply(0, 300, 5000, 100, True)
    + rr_finish(0, early=True) + C,
}

# ----------------------------------------------------------- fileservice --
# flags: bit0 the connection can do push mode, bit1 exposing fails, bit2
# paths resolved by the component walk (as without openat2).
# A Call: procedure (7: a 32-bit number follows), credential (bits 0-1:
# none, AUTH_SYS, other flavor, body too long; 0x10 verifier; 0x20 wrong
# version; 0x40 RPC version 3; 0x80 wrong program), how (bit0 raw
# arguments; 2 WRITE data apart; 4 apart with a wrong length; 8 64-bit
# numbers; 0x10 bytes left over; 0x20 cut short).
P = {"file_a": 0, "sub/file_b": 1, "deep": 2, "empty": 3, "new": 4, "sub/new": 5, "..": 6,
     "../outside/secret": 7, "sub/../../outside/secret": 8, "/etc/passwd": 9, "link_in": 10,
     "link_out": 11, "link_abs": 12, "sub/link_up/file_a": 13, "sub/link_top/secret": 14, "loop": 15,
     ".": 16, "": 17, "./file_a": 18, "sub//file_b": 19, "sub/": 20, "sub/deeper": 21, "sub/..": 22,
     "a/b/c/d": 23, "file_a/x": 24, "up-out": 25, "...": 26, "dot-space": 27, "sub/./../file_a": 28}


def fs_path(name):
    return bytes([P[name]])


def fs_raw_path(s):
    return bytes([0xE0, len(s)]) + s


def fs_call(proc, args=b"", cred=0, how=0):
    return bytes([proc, cred, how]) + args


def fs_read(path, off=0, count=100, cred=0, how=0):
    return fs_call(1, path + be32(0) + be32(off) + be32(count), cred, how)


def fs_write(path, off=0, flags=1, ln=30, how=0):
    return fs_call(2, bytes([ln // 3]) + path + be32(off) + be32(flags), 0, how)


def fs_list(path, cookie=0, maxent=100):
    return fs_call(3, path + be32(cookie) + be32(maxent))


def fs_commit(path):
    return fs_call(4, path)


def fs_push(path, size_4k=1):
    return fs_call(5, path + bytes([size_4k]))


def fs_echo(data):
    return fs_call(6, bytes([len(data) // 16]) + data)


FILESERVICE = {
    "read-write-list": bytes([0]) + fs_read(fs_path("file_a")) + fs_write(fs_path("new"), 10, 1, 30)
    + fs_read(fs_path("new"), 0, 64) + fs_list(fs_path(".")) + fs_list(fs_path("sub/")),
    "escapes-read": bytes([0]) + b"".join(fs_read(fs_path(p)) for p in (
        "..", "../outside/secret", "sub/../../outside/secret", "/etc/passwd", "link_out", "link_abs",
        "sub/link_top/secret", "loop", "up-out", "file_a/x")),
    "escapes-list": bytes([0]) + b"".join(fs_list(fs_path(p)) for p in (
        "..", "sub/link_top/secret", "sub/link_up/file_a", "link_out", "sub/..", "", "sub/")),
    "escapes-write": bytes([0]) + b"".join(fs_write(fs_path(p), 0, 3, 9) for p in (
        "../outside/secret", "link_out", "sub/link_top/secret", "link_abs", "..", "sub/link_up/file_a")),
    "inside-links": bytes([0]) + fs_read(fs_path("link_in")) + fs_read(fs_path("sub/link_up/file_a"))
    + fs_write(fs_path("link_in"), 0, 2, 6),
    "odd-paths": bytes([0]) + b"".join(fs_read(fs_path(p)) for p in (
        ".", "", "./file_a", "sub//file_b", "sub/", "sub/deeper", "...", "dot-space", "sub/./../file_a"))
    + fs_read(bytes([0xF8])) + fs_read(fs_raw_path(b"sub/\x00/x")),
    "write-flags": bytes([0]) + fs_write(fs_path("file_a"), 5, 2, 30) + fs_write(fs_path("new"), 0, 5, 60)
    + fs_write(fs_path("empty"), 0, 7, 3) + fs_write(fs_path("file_a"), 0, 9, 3),
    "write-data-apart": bytes([0]) + fs_write(fs_path("new"), 0, 1, 90, how=2)
    + fs_write(fs_path("new"), 0, 1, 90, how=6),
    "commit-and-push": bytes([1]) + fs_commit(fs_path("file_a")) + fs_commit(fs_path("link_out"))
    + fs_push(fs_path("file_a"), 1) + fs_push(fs_path("new"), 2) + fs_push(fs_path("link_out"), 1)
    + fs_push(fs_path("file_a"), 0),
    "push-refused": bytes([2 | 1]) + fs_push(fs_path("file_a"), 1) + fs_push(fs_path("new"), 1),
    "push-not-capable": bytes([0]) + fs_push(fs_path("file_a"), 1),
    "no-openat2-walk": bytes([4 | 1]) + b"".join(fs_read(fs_path(p)) for p in (
        "file_a", "sub/file_b", "deep", "link_in", "link_out", "sub/link_up/file_a", "sub/link_top/secret",
        "..", "../outside/secret", "/etc/passwd", "sub//file_b", "sub/./../file_a", "file_a/x", "loop"))
    + fs_list(fs_path("sub/")) + fs_write(fs_path("sub/new"), 0, 1, 9) + fs_push(fs_path("new"), 1),
    "echo-null-unknown": bytes([0]) + fs_echo(bytes(range(32))) + fs_call(0) + fs_call(7, be32(99))
    + fs_call(7, be32(0)),
    "credentials": bytes([0]) + fs_read(fs_path("file_a"), cred=1) + fs_read(fs_path("file_a"), cred=1 | 0x1C)
    + fs_read(fs_path("file_a"), cred=2) + fs_read(fs_path("file_a"), cred=3)
    + fs_read(fs_path("file_a"), cred=0x10) + fs_read(fs_path("file_a"), cred=0x20)
    + fs_read(fs_path("file_a"), cred=0x40) + fs_read(fs_path("file_a"), cred=0x80),
    "garbage-args": bytes([0]) + fs_read(fs_path("file_a"), how=0x10)
    + fs_call(3, fs_path("sub/") + be32(0) + be32(10), 0, 0x20) + bytes([5])
    + fs_call(2, b"\x02\xff\x00\x00\x00\x20\x00\x00", 0, 1),
    "huge-numbers": bytes([0]) + fs_call(1, fs_path("file_a") + be32(0x7fffffff) + be32(0xffffffff)
                                         + be32(0xffffffff), 0, 8)
    + fs_list(fs_path("."), 0xffffffff, 0xffffffff) + fs_call(5, fs_path("file_a") + be32(0xffffffff), 0, 8),
}


def write_corpus(name, seeds):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.unlink(os.path.join(d, f))
    for k, v in seeds.items():
        with open(os.path.join(d, "seed-" + k), "wb") as fh:
            fh.write(v)


write_corpus("soft_rx", SOFT_RX)
write_corpus("rrep_rsp", RREP_RSP)
write_corpus("fileservice", FILESERVICE)
