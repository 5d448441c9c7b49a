#!/usr/bin/env python3
"""Sends seeded random bytes over TCP and checks they arrive intact.

  tcp_integrity.py serve ADDR PORT      # prints "<bytes> <sha256>" of what arrived
  tcp_integrity.py send ADDR PORT MIB   # prints "<bytes> <sha256>" of what was sent
"""
import hashlib
import random
import socket
import sys


def main():
    mode, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
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
