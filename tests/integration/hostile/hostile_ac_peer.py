#!/usr/bin/env python3
"""hostile_ac_peer.py: a hostile AnyConnect server (Python stdlib: ssl + sockets; written from the
protocol notes, shares no code with espvpn). It logs in anyone (an aggregate-auth form: username and
password, then a webvpn cookie), answers CONNECT with a usable CSTP configuration, and misbehaves at
the one step --mode names:

  login:   huge-xml (40 MiB of XML), deep-xml (100 000 nested elements), malformed-xml, not-xml (an
           HTML page), status-500, status-404, redirect-loop (302 to itself, forever), endless-headers,
           garbage (not HTTP), stall (reads the request, never answers)
  CONNECT: connect-401, connect-503, connect-truncated (half a header block, then close),
           connect-endless-headers, connect-stall, connect-no-address, connect-mtu-huge (X-CSTP-MTU
           100000), connect-bad-address (X-CSTP-Address 300.1.2.3)
  CSTP (after a good CONNECT): cstp-bad-magic, cstp-huge-length (a frame header announcing 65535
           bytes, more than the MTU), cstp-truncated (half a frame, then close), cstp-unknown-type
           (frames of type 0x42), cstp-flood (data frames as fast as TLS takes them, 3 s),
           cstp-stall (silence: no DPD answer, nothing)

  hostile_ac_peer.py --mode MODE --ready-file F --stats-file F [--listen HOST:PORT] [--max-runtime S]
The ready file is {"port", "pid"}; the stats file counts requests by step and "hostile" replies sent.
Loopback (or a test namespace) only; exits after --max-runtime seconds (120).
"""
import argparse
import json
import os
import secrets
import socket
import ssl
import struct
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<config-auth client="vpn" type="%s" aggregate-auth-version="2">'
FORM = (HEAD % "auth-request") + """<auth id="main"><title>Login</title><message>Please log in.</message>
<form method="post" action="/"><input type="text" name="username" label="Username:" />
<input type="password" name="password" label="Password:" /></form></auth></config-auth>"""
SUCCESS = (HEAD % "complete") + '<auth id="success"><banner>hostile</banner></auth></config-auth>'
CSTP_OK = [("X-CSTP-Version", "1"), ("X-CSTP-Address", "192.168.77.2"), ("X-CSTP-Netmask", "255.255.255.0"),
           ("X-CSTP-MTU", "1300"), ("X-CSTP-DPD", "2"), ("X-CSTP-Keepalive", "20"),
           ("X-CSTP-Split-Include", "192.168.78.0/255.255.255.0")]


def frame(ftype, payload=b""):
    return b"STF\x01" + struct.pack(">H", len(payload)) + bytes([ftype, 0]) + payload


class Peer:
    def __init__(self, cfg):
        self.cfg = cfg
        self.lock = threading.Lock()
        self.stats = {"requests": {}, "hostile": 0, "connections": 0}
        self.write_stats()

    def count(self, key, hostile=False):
        with self.lock:
            self.stats["requests"][key] = self.stats["requests"].get(key, 0) + 1
            if hostile:
                self.stats["hostile"] += 1
        self.write_stats()

    def write_stats(self):
        with open(self.cfg.stats_file + ".tmp", "w") as f:
            json.dump(self.stats, f)
        os.rename(self.cfg.stats_file + ".tmp", self.cfg.stats_file)


def read_request(conn):
    """(method, target, headers dict lower-case, body) or None at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 1 << 20:
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    method, target = lines[0].split(" ")[:2]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    while len(body) < n:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return method, target, headers, body


def reply(conn, status, body=b"", headers=(), reason="OK"):
    h = [f"HTTP/1.1 {status} {reason}", f"Content-Length: {len(body)}", "Connection: keep-alive"]
    h += [f"{k}: {v}" for k, v in headers]
    conn.sendall(("\r\n".join(h) + "\r\n\r\n").encode() + body)


def stall(conn, seconds=60):
    end = time.monotonic() + seconds
    conn.settimeout(0.5)
    while time.monotonic() < end:
        try:
            if not conn.recv(65536):
                return
        except (socket.timeout, ssl.SSLError):
            continue
        except OSError:
            return


def hostile_login(peer, conn, mode):
    peer.count("login", hostile=True)
    if mode == "huge-xml":
        n = 40 << 20
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {n}\r\n\r\n".encode())
        chunk = b"<a>" + b"x" * 65530 + b"</a>"
        sent = 0
        while sent < n:
            conn.sendall(chunk[: min(len(chunk), n - sent)])
            sent += len(chunk)
    elif mode == "deep-xml":
        body = b'<?xml version="1.0"?><config-auth>' + b"<a>" * 100000 + b"</a>" * 100000 + b"</config-auth>"
        reply(conn, 200, body, [("Content-Type", "text/xml")])
    elif mode == "malformed-xml":
        reply(conn, 200, b'<?xml version="1.0"?><config-auth type="auth-request"><auth id="main"><form><input',
              [("Content-Type", "text/xml")])
    elif mode == "not-xml":
        reply(conn, 200, b"<html><body>Welcome to the captive portal</body></html>", [("Content-Type", "text/html")])
    elif mode == "status-500":
        reply(conn, 500, b"internal error", reason="Internal Server Error")
    elif mode == "status-404":
        reply(conn, 404, b"not found", reason="Not Found")
    elif mode == "redirect-loop":
        reply(conn, 302, b"", [("Location", "/")], reason="Found")
        return True  # keep serving: every request is redirected again
    elif mode == "endless-headers":
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        end = time.monotonic() + 60
        i = 0
        while time.monotonic() < end:
            conn.sendall(b"X-Filler-%d: %s\r\n" % (i, b"y" * 100))
            i += 1
    elif mode == "garbage":
        conn.sendall(b"\x16\x03\x01 this is not HTTP at all \x00\xff\r\n\r\n")
    elif mode == "stall":
        stall(conn)
    return False


def hostile_connect(peer, conn, mode):
    peer.count("connect", hostile=True)
    if mode == "connect-401":
        reply(conn, 401, b"", reason="Unauthorized")
    elif mode == "connect-503":
        reply(conn, 503, b"", reason="Service Unavailable")
    elif mode == "connect-truncated":
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-CSTP-Version: 1\r\nX-CSTP-Addr")
    elif mode == "connect-endless-headers":
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        end = time.monotonic() + 60
        i = 0
        while time.monotonic() < end:
            conn.sendall(b"X-CSTP-Filler-%d: %s\r\n" % (i, b"z" * 100))
            i += 1
    elif mode == "connect-stall":
        stall(conn)
    else:
        headers = dict(CSTP_OK)
        if mode == "connect-no-address":
            del headers["X-CSTP-Address"]
        elif mode == "connect-mtu-huge":
            headers["X-CSTP-MTU"] = "100000"
        elif mode == "connect-bad-address":
            headers["X-CSTP-Address"] = "300.1.2.3"
        conn.sendall(("HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) +
                      "\r\n").encode())
        stall(conn, 30)


def cstp(peer, conn, mode):
    """After a good CONNECT reply: the hostile frames."""
    conn.sendall(("HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in CSTP_OK) + "\r\n").encode())
    peer.count("connect")
    time.sleep(1)  # let the client bring its tun up: the hostile bytes then reach the pump
    peer.count("cstp", hostile=True)
    if mode == "cstp-bad-magic":
        conn.sendall(b"XTF\x01\x00\x04\x00\x00abcd")
    elif mode == "cstp-huge-length":
        conn.sendall(b"STF\x01\xff\xff\x00\x00" + b"\x45" * 65535)
    elif mode == "cstp-truncated":
        conn.sendall(frame(0, b"\x45" + b"\x00" * 40)[:20])
        return
    elif mode == "cstp-unknown-type":
        for _ in range(100):
            conn.sendall(frame(0x42, b"junk"))
    elif mode == "cstp-flood":
        # IPv4 packets to the client's address (it drops or delivers them: it must not hoard them).
        pkt = bytearray(1200)
        pkt[0], pkt[9] = 0x45, 17
        pkt[2:4] = struct.pack(">H", len(pkt))
        pkt[12:16] = bytes([192, 168, 78, 1])
        pkt[16:20] = bytes([192, 168, 77, 2])
        data = frame(0, bytes(pkt)) * 50
        end = time.monotonic() + 3
        try:
            while time.monotonic() < end:
                conn.sendall(data)
        except OSError:
            return
    stall(conn, 60)


def handle(peer, raw):
    cfg = peer.cfg
    with peer.lock:
        peer.stats["connections"] += 1
    try:
        conn = cfg.ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        return
    try:
        while True:
            req = read_request(conn)
            if req is None:
                return
            method, target, headers, body = req
            if method == "CONNECT":
                if cfg.mode.startswith("cstp-"):
                    return cstp(peer, conn, cfg.mode)
                if cfg.mode.startswith("connect-"):
                    return hostile_connect(peer, conn, cfg.mode)
                return hostile_connect(peer, conn, "connect-ok")
            if not cfg.mode.startswith(("connect-", "cstp-")):
                if hostile_login(peer, conn, cfg.mode):
                    continue
                return
            if b'type="init"' in body:
                peer.count("init")
                reply(conn, 200, FORM.encode(), [("Content-Type", "text/xml")])
            elif b"logout" in body:
                peer.count("logout")
                reply(conn, 200, b"", [("Content-Type", "text/xml")])
            else:
                peer.count("auth-reply")
                reply(conn, 200, SUCCESS.encode(), [("Content-Type", "text/xml"),
                                                      ("Set-Cookie", f"webvpn={secrets.token_hex(16)}; Secure")])
    except (OSError, ssl.SSLError):
        return
    finally:
        try:
            conn.close()
        except OSError:
            pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--stats-file", required=True)
    p.add_argument("--max-runtime", type=float, default=120)
    cfg = p.parse_args()
    cfg.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cfg.ctx.load_cert_chain(os.path.join(REPO, "certs", "server.pem"), os.path.join(REPO, "certs", "server-key.pem"))
    host, port = cfg.listen.rsplit(":", 1)
    srv = socket.create_server((host, int(port)))
    peer = Peer(cfg)
    with open(cfg.ready_file + ".tmp", "w") as f:
        json.dump({"port": srv.getsockname()[1], "pid": os.getpid()}, f)
    os.rename(cfg.ready_file + ".tmp", cfg.ready_file)
    threading.Timer(cfg.max_runtime, lambda: os._exit(3)).start()
    while True:
        raw, _ = srv.accept()
        threading.Thread(target=handle, args=(peer, raw), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
