#!/usr/bin/python3
"""A steady UDP stream for the rekey test.
  udp_stream.py send HOST PORT SECONDS RATE   (RATE datagrams per second: seq + send time)
  udp_stream.py recv BIND PORT SECONDS [ARRIVALS]
                                              prints: received, lost, max_gap_ms (largest
                                              inter-arrival gap between the first and last packet);
                                              ARRIVALS: also writes each arrival's time.monotonic()
                                              there, one a line (tools/netns/rekey_gap.py reads it)
"""
import socket
import struct
import sys
import time


def send(host, port, seconds, rate):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    interval = 1.0 / rate
    start = time.monotonic()
    n = 0
    while True:
        due = start + n * interval
        now = time.monotonic()
        if now - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        s.sendto(struct.pack("!Qd", n, time.monotonic()) + b"x" * 100, (host, port))
        n += 1
    print(f"sent={n}", flush=True)


def recv(bind, port, seconds, arrivals_path=None):
    fam = socket.AF_INET6 if ":" in bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((bind, port))
    s.settimeout(0.2)
    end = time.monotonic() + seconds
    last = None
    got = 0
    top = -1
    max_gap = 0.0
    arrivals = []
    while time.monotonic() < end:
        try:
            data = s.recv(2048)
        except socket.timeout:
            continue
        now = time.monotonic()
        arrivals.append(now)
        seq, _ = struct.unpack("!Qd", data[:16])
        if last is not None:
            max_gap = max(max_gap, now - last)
        last = now
        got += 1
        top = max(top, seq)
    if arrivals_path:
        with open(arrivals_path, "w") as f:
            f.write("".join(f"{t:.6f}\n" for t in arrivals))
    print(f"received={got} lost={top + 1 - got} max_gap_ms={max_gap * 1000:.1f}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        recv(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
