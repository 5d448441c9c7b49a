#!/usr/bin/env python3
"""Sends seeded random bytes over TCP (or a UDP burst) and checks they arrive intact.

  tcp_integrity.py serve ADDR PORT      # prints "<bytes> <sha256>" of what arrived
  tcp_integrity.py send ADDR PORT MIB   # prints "<bytes> <sha256>" of what was sent
  tcp_integrity.py udp-serve ADDR PORT N  # prints "<count> <sha256>" of N datagrams (in order)
  tcp_integrity.py udp-send ADDR PORT N   # sends N 1200-byte datagrams back to back
"""
import hashlib
import random
import socket
import sys


def main():
    mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    if mode == "udp-serve":
        n = int(sys.argv[4])
        s = socket.socket(family, socket.SOCK_DGRAM)
        # SO_RCVBUFFORCE (33): root may exceed rmem_max, so a burst is never dropped here.
        s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 8 << 20)
        s.bind((addr, port))
        s.settimeout(5)
        got = {}
        try:
            while len(got) < n:
                d = s.recv(65536)
                got[int.from_bytes(d[:4], "big")] = d
        except socket.timeout:
            pass
        h = hashlib.sha256()
        for i in sorted(got):
            h.update(got[i])
        print(len(got), h.hexdigest(), flush=True)
        return
    if mode == "udp-send":
        n = int(sys.argv[4])
        rnd = random.Random(9)
        s = socket.socket(family, socket.SOCK_DGRAM)
        h = hashlib.sha256()
        for i in range(n):
            d = i.to_bytes(4, "big") + rnd.randbytes(1196)
            h.update(d)
            s.sendto(d, (addr, port))
        print(n, h.hexdigest(), flush=True)
        return
    if mode == "serve":
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((addr, port))
        srv.listen(1)
        srv.settimeout(30)
        conn, _ = srv.accept()
        conn.settimeout(60)
        h, total = hashlib.sha256(), 0
        while True:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            total += len(chunk)
        print(total, h.hexdigest(), flush=True)
    else:
        size = int(sys.argv[4]) << 20
        data = random.Random(5).randbytes(size)
        s = socket.create_connection((addr, port), timeout=30)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
        print(size, hashlib.sha256(data).hexdigest(), flush=True)


if __name__ == "__main__":
    main()
