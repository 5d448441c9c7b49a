#!/usr/bin/python3
"""Receives the udp_stream.py stream and reports the largest inter-arrival gap, overall
and split by a window given as two files holding wall-clock times (written by the test
when it signals and when the scripts are done), so a gap can be told apart from load
on the machine outside the window.

  gap_recv.py BIND PORT SECONDS WINDOW_START_FILE WINDOW_END_FILE
  prints: received=N lost=N max_gap_ms=X in_window_ms=X outside_ms=X largest_ends_at=T
"""
import socket
import struct
import sys
import time


def main():
    bind, port, seconds, start_file, end_file = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), *sys.argv[4:6]
    s = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, port))
    s.settimeout(0.2)
    end = time.monotonic() + seconds
    arrivals, top = [], -1
    while time.monotonic() < end:
        try:
            data = s.recv(2048)
        except socket.timeout:
            continue
        arrivals.append(time.time())
        top = max(top, struct.unpack("!Qd", data[:16])[0])

    def read_time(path):
        try:
            return float(open(path).read().strip())
        except (OSError, ValueError):
            return None
    w0, w1 = read_time(start_file), read_time(end_file)
    if w0 is not None and w1 is None:
        w1 = float("inf")  # the scripts were still running when the stream ended
    inside = outside = overall = 0.0
    worst_at = 0.0
    for a, b in zip(arrivals, arrivals[1:]):
        gap = b - a
        if gap > overall and w0 is not None:
            worst_at = b - w0
        overall = max(overall, gap)
        if w0 is not None and w1 is not None and b >= w0 and a <= w1:
            inside = max(inside, gap)
        else:
            outside = max(outside, gap)
    print(f"received={len(arrivals)} lost={top + 1 - len(arrivals)} max_gap_ms={overall * 1000:.1f} "
          f"in_window_ms={inside * 1000:.1f} outside_ms={outside * 1000:.1f} "
          f"largest_ends_at={worst_at:+.2f}s_after_signal", flush=True)


if __name__ == "__main__":
    main()
