#!/usr/bin/env python3
"""Sends UDP datagrams from the tunnel address to a peer address routed into the
tun; the DTLS test server reflects each one (IP source/destination swapped), so
they come back to this socket. Checks that enough come back intact.

  udp_echo_check.py BIND_ADDR PEER_ADDR COUNT SIZE MIN_FRACTION [PEER_PORT]
(PEER_PORT: send there, to a udp_reflector.py, instead of to our own port.)
"""
import socket
import sys
import time


def main():
    bind, peer, count, size, min_fraction = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((bind, 0))
    s.settimeout(0.5)
    port = int(sys.argv[6]) if len(sys.argv) > 6 else s.getsockname()[1]
    got = set()
    bad = 0
    for i in range(count):
        payload = i.to_bytes(4, "big") + bytes((i + k) & 0xFF for k in range(size - 4))
        s.sendto(payload, (peer, port))
        if i % 32 == 31:  # pace: drain echoes so neither side's buffers overflow
            time.sleep(0.002)
            try:
                while True:
                    data = s.recv(65536)
                    n = int.from_bytes(data[:4], "big")
                    expected = n.to_bytes(4, "big") + bytes((n + k) & 0xFF for k in range(size - 4))
                    if data == expected:
                        got.add(n)
                    else:
                        bad += 1
                    s.settimeout(0.0)
            except (BlockingIOError, socket.timeout):
                s.settimeout(0.5)
    deadline = time.monotonic() + 2
    s.settimeout(0.2)
    while time.monotonic() < deadline and len(got) < count:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        n = int.from_bytes(data[:4], "big")
        expected = n.to_bytes(4, "big") + bytes((n + k) & 0xFF for k in range(size - 4))
        if data == expected:
            got.add(n)
        else:
            bad += 1
    print(f"ECHO sent={count} received={len(got)} corrupted={bad} size={size}")
    ok = len(got) >= min_fraction * count and bad == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
