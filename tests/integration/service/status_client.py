#!/usr/bin/env python3
"""Hostile and ordinary clients of espvpn's status socket (tests/integration/service/service.sh).

  status_client.py SOCKET ask REQUEST          one request, print the reply line
  status_client.py SOCKET many N               N status requests on one connection, timed
  status_client.py SOCKET longline OUT         1 MiB without a newline; OUT gets the reply and
                                               whether the server closed the connection
  status_client.py SOCKET noread SECONDS       requests as fast as the socket takes them, never
                                               reading a reply, for SECONDS; prints how it ended
  status_client.py SOCKET hold SECONDS         connects and says nothing for SECONDS
"""
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def main():
    path, what = sys.argv[1], sys.argv[2]
    if what == "ask":
        s = connect(path)
        try:
            s.sendall(('{"request": "%s"}\n' % sys.argv[3]).encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused at once: the reply waits in the receive buffer
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
        print(data.decode(errors="replace").strip())
    elif what == "many":
        # N status requests one after the other on one connection: the time per answer (printed, not judged).
        s = connect(path)
        n = int(sys.argv[3])
        f = s.makefile("rb")
        t0 = time.monotonic()
        for _ in range(n):
            s.sendall(b'{"request": "status"}\n')
            if b'"ok":true' not in f.readline():
                sys.exit("a status request failed")
        print("%d status requests in %.0f ms (%.0f us each)" % (n, (time.monotonic() - t0) * 1000,
                                                               (time.monotonic() - t0) * 1e6 / n))
    elif what == "longline":
        s = connect(path)
        sent = 0
        block = b"x" * 65536
        try:
            while sent < (1 << 20):
                sent += s.send(block)
        except (BrokenPipeError, ConnectionResetError, socket.timeout) as e:
            pass  # the server stopped reading: what it said is in the receive buffer
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            closed = "closed"
        except ConnectionResetError:
            closed = "closed"
        except socket.timeout:
            closed = "open"
        with open(sys.argv[3], "w") as f:
            f.write("%s sent=%d %s\n" % (closed, sent, data.decode(errors="replace").strip()))
    elif what == "noread":
        s = connect(path)
        s.settimeout(0.5)
        end = time.monotonic() + float(sys.argv[3])
        n = 0
        how = "still open"
        while time.monotonic() < end:
            try:
                s.send(b'{"request": "status"}\n')
                n += 1
            except socket.timeout:
                time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                how = "dropped by the server"
                break
        print("noread: %d requests, %s" % (n, how))
    elif what == "hold":
        s = connect(path)
        time.sleep(float(sys.argv[3]))
    else:
        sys.exit("unknown mode " + what)


if __name__ == "__main__":
    main()
