#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the RoCEv2 captures of tshark-check.sh (the lab's capture check,
run-lab.sh cmd_check): Ethernet / IPv4 / UDP 4791 / InfiniBand BTH (IBTA
spec vol. 1 section 9.2; RETH 9.3.3) frames, pcap format, no real traffic.
"ours" sends from 192.0.2.1, the peer from 192.0.2.2.

  roce-writes.pcap  RDMA WRITE First, Middle, Last and Only from ours whose
                    short payloads Wireshark 4.0 dissects as ethertype
                    frames and marks malformed (the lab's 65,537-byte READ
                    result: a WRITE Last of one byte, 0x90, and 3 pad
                    bytes, "LOOP"); a malformed frame of the peer; a good
                    Send of ours. None of ours counts: the check passes.
  roce-send.pcap    the same, plus a Send Only of ours with a one-byte
                    payload (a real malformed RPC-over-RDMA message): the
                    check fails with exactly 1 of ours malformed.

Usage: roce_pcap.py DIR"""
import os
import struct
import sys

OURS, PEER = "192.0.2.1", "192.0.2.2"
# RC opcodes (BTH)
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY, SEND_ONLY = 6, 7, 8, 10, 4


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def frame(opcode, payload, pad=0, psn=0, src=OURS, dst=PEER, reth=False):
    # BTH: opcode, SE/M/PadCnt/TVer, P_Key, reserved + dest QP, A + PSN
    bth = struct.pack("!BBHII", opcode, (pad & 3) << 4, 0xFFFF, 0x11, psn & 0xFFFFFF)
    # RETH: virtual address, R_Key, DMA length
    ext = struct.pack("!QII", 0x1000, 0x1234, len(payload)) if reth else b""
    ib = bth + ext + payload + b"\0" * pad + b"\0" * 4  # ICRC (not checked)
    udp = struct.pack("!HHHH", 49152, 4791, 8 + len(ib), 0) + ib
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), psn & 0xFFFF, 0x4000, 64, 17, 0,
                     bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00" + ip + udp


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1700000000 + i, 0, len(fr), len(fr)))
            f.write(fr)


def main():
    out = sys.argv[1]
    # an RPC-over-RDMA RDMA_MSG (RFC 8166 section 4.2): XID, version 1,
    # credits 32, RDMA_MSG, three empty chunk lists, then an RPC Call
    # header's first words (XID, CALL)
    good = struct.pack("!IIIIIII", 7, 1, 32, 0, 0, 0, 0) + struct.pack("!II", 7, 0)
    base = [
        frame(WRITE_FIRST, b"\x90", pad=3, psn=1, reth=True),
        frame(WRITE_MIDDLE, b"\x90\x00\x00\x00", psn=2),
        frame(WRITE_LAST, b"\x90", pad=3, psn=3),
        frame(WRITE_ONLY, b"\x90", pad=3, psn=4, reth=True),
        frame(WRITE_LAST, b"\x90", pad=3, psn=5, src=PEER, dst=OURS),
        frame(SEND_ONLY, good, psn=6),
    ]
    write_pcap(os.path.join(out, "roce-writes.pcap"), base)
    write_pcap(os.path.join(out, "roce-send.pcap"),
               base + [frame(SEND_ONLY, b"\x90", pad=3, psn=7)])


if __name__ == "__main__":
    main()
