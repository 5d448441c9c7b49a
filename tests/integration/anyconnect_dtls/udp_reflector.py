#!/usr/bin/env python3
"""Echoes every UDP datagram back to its sender, for SECONDS; waits for BIND_ADDR
to exist first (ocserv configures its tun only once the client connects).

  udp_reflector.py BIND_ADDR PORT SECONDS
"""
import socket
import sys
import time


def main():
    addr, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    end = time.monotonic() + seconds
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    while True:
        try:
            s.bind((addr, port))
            break
        except OSError:
            if time.monotonic() > end:
                sys.exit("reflector: %s never appeared" % addr)
            time.sleep(0.1)
    print("REFLECTOR READY", flush=True)
    s.settimeout(0.2)
    n = 0
    while time.monotonic() < end:
        try:
            data, src = s.recvfrom(65536)
        except socket.timeout:
            continue
        s.sendto(data, src)
        n += 1
    print("REFLECTED %d" % n, flush=True)


if __name__ == "__main__":
    main()
