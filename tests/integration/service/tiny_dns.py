#!/usr/bin/env python3
"""A DNS server that knows one name (standard library only), for the captive-portal tests.

  tiny_dns.py LISTEN_ADDRESS NAME IPV4

UDP port 53: an A question for NAME gets IPV4, any other question about NAME an empty
answer, other names NXDOMAIN. Enough for getaddrinfo() behind the tunnel.
"""
import socket
import struct
import sys

listen, name, address = sys.argv[1], sys.argv[2].lower().rstrip("."), sys.argv[3]


def question(packet):
    labels, at = [], 12
    while packet[at]:
        n = packet[at]
        labels.append(packet[at + 1:at + 1 + n].decode("ascii", "replace").lower())
        at += 1 + n
    qtype, _ = struct.unpack("!HH", packet[at + 1:at + 5])
    return ".".join(labels), qtype, packet[12:at + 5]


s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((listen, 53))
while True:
    packet, peer = s.recvfrom(512)
    if len(packet) < 17:
        continue
    try:
        qname, qtype, q = question(packet)
    except (IndexError, struct.error):
        continue
    known = qname == name
    answers = b""
    if known and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(address)
    flags = 0x8180 if known else 0x8183  # a response, recursion available; NXDOMAIN for others
    header = packet[:2] + struct.pack("!HHHHH", flags, 1, 1 if answers else 0, 0, 0)
    s.sendto(header + q + answers, peer)
