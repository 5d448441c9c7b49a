#!/usr/bin/env python3
"""A stand-in for the syslog daemon: receives datagrams on a UNIX socket (bound
over /dev/log in a private mount namespace by the test) and appends each one as a
line to a file until SIGTERM or the time limit.
  syslog_sink.py SOCKET_PATH OUT_FILE MAX_SECONDS
"""
import os
import signal
import socket
import sys
import time

path, out, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
s.settimeout(0.2)
end = time.monotonic() + limit
with open(out, "ab", buffering=0) as f:
    while time.monotonic() < end:
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        f.write(data.rstrip(b"\0\n") + b"\n")
