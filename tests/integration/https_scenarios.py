#!/usr/bin/env python3
"""HTTPS integration scenarios for espvpn's HttpsClient.

The peer is written independently of the client: Python's ssl module (OpenSSL)
and plain sockets on 127.0.0.1. It counts TLS handshakes and requests itself, so
"N requests over one connection" is checked on both sides. Each scenario runs
tests/integration/https_probe against a server behaviour and checks the outcome.

usage: https_scenarios.py --probe PATH --certs DIR SCENARIO
"""
import argparse
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

PROBE_TIMEOUT = 30  # seconds; every scenario is far below this


class Peer:
    """A TLS server on an ephemeral loopback port; `behaviour(peer, conn, index)`
    serves one accepted connection (index counts connections from 1)."""

    def __init__(self, cert, key, behaviour, client_ca=None, max_version=None):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if max_version:
            self.ctx.maximum_version = max_version
        self.ctx.load_cert_chain(cert, key)
        if client_ca:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(client_ca)
        self.behaviour = behaviour
        self.handshakes = 0
        self.requests = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def _accept_loop(self):
        index = 0
        while not self.stop.is_set():
            try:
                raw, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            index += 1
            threading.Thread(target=self._serve, args=(raw, index), daemon=True).start()

    def _serve(self, raw, index):
        raw.settimeout(10)
        try:
            conn = self.ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        with self.lock:
            self.handshakes += 1
        try:
            self.behaviour(self, conn, index)
        except (ssl.SSLError, OSError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.listener.close()

    # --- helpers for behaviours -------------------------------------------
    def read_request(self, conn):
        """Returns (method, path, headers dict lowercased, body) or None at EOF."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                return None
            data += chunk
            if len(data) > 65536:
                raise OSError("request head too large")
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = conn.recv(4096)
            if not chunk:
                return None
            rest += chunk
        with self.lock:
            self.requests += 1
        return method, path, headers, rest[:length]

    def stats_body(self):
        with self.lock:
            return f"server-handshakes={self.handshakes} server-requests={self.requests}"


def respond(conn, status, body=b"", headers=()):
    reason = {200: "OK", 302: "Found", 303: "See Other"}.get(status, "X")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
    for name, value in headers:
        head += f"{name}: {value}\r\n"
    conn.sendall(head.encode() + b"\r\n" + body)


def serve_ok(peer, conn, index, close_after=False, drop_second=False):
    """200 'ok' to every request; /stats reports the server's counters."""
    served = 0
    while True:
        req = peer.read_request(conn)
        if req is None:
            return
        served += 1
        if drop_second and served == 2:
            return  # read the request, then vanish without a byte of response
        method, path, headers, body = req
        if path == "/stats":
            respond(conn, 200, peer.stats_body().encode())
        else:
            respond(conn, 200, b"ok " + str(served).encode() + b" " + body)
        if close_after:
            return  # close without "Connection: close", like an idle timeout


def serve_stall(peer, conn, index):
    peer.read_request(conn)
    peer.stop.wait(20)


def serve_dribble(peer, conn, index):
    peer.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    deadline = time.monotonic() + 20
    while not peer.stop.is_set() and time.monotonic() < deadline:
        conn.sendall(b"x")
        time.sleep(0.05)


def serve_endless_headers(peer, conn, index, line_bytes, newline=True):
    peer.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    if not newline:
        conn.sendall(b"X-Endless: ")
    deadline = time.monotonic() + 20
    sent = 0
    while not peer.stop.is_set() and time.monotonic() < deadline and sent < 64 * 1024 * 1024:
        line = b"X-Filler-%d: %s\r\n" % (sent, b"a" * line_bytes) if newline else b"a" * line_bytes
        conn.sendall(line)
        sent += len(line)


def serve_huge_chunked(peer, conn, index):
    # Floods until the client hangs up (sendall fails) or 40 s have passed: far longer than
    # any deadline under test, and no byte cap a fast machine could reach before the
    # client's own deadline or limit ends the response.
    peer.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"z" * 65536)
    deadline = time.monotonic() + 40
    while not peer.stop.is_set() and time.monotonic() < deadline:
        conn.sendall(chunk)


def serve_huge_length(peer, conn, index):
    peer.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n")
    peer.stop.wait(20)


def serve_redirect_cookie(peer, conn, index):
    while True:
        req = peer.read_request(conn)
        if req is None:
            return
        method, path, headers, body = req
        if path == "/start":
            respond(conn, 302, b"", [("Location", "next?x=1"),
                                     ("Set-Cookie", "SESSION=s3cr3t-value; Path=/; Secure; HttpOnly")])
        elif path == "/loop":
            respond(conn, 302, b"", [("Location", "https://localhost:%d/loop" % peer.port)])
        elif path == "/next?x=1":
            ok = headers.get("cookie") == "SESSION=s3cr3t-value" and method == "GET"
            respond(conn, 200, b"cookie-ok" if ok else b"cookie-missing " + method.encode())
        else:
            respond(conn, 200, peer.stats_body().encode())


def public_key_pin(cert_path):
    """The pin as GnuTLS's certtool computes it (independent of the client code)."""
    out = subprocess.run(["certtool", "--certificate-info", "--infile", cert_path],
                         capture_output=True, text=True, check=True).stdout
    match = re.search(r"pin-sha256:[A-Za-z0-9+/=]+", out)
    if not match:
        raise RuntimeError("certtool printed no pin-sha256")
    return match.group(0)


class Failure(Exception):
    pass


def check(condition, what, result=None):
    if not condition:
        detail = ""
        if result is not None:
            detail = f"\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
        raise Failure(what + detail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    ap.add_argument("--certs", required=True)
    ap.add_argument("scenario")
    args = ap.parse_args()
    c = lambda name: os.path.join(args.certs, name)
    trusted = ["--no-system-trust", "--cafile", c("ca.pem")]

    def run(peer, *extra, path="/", env=None):
        cmd = [args.probe, f"https://localhost:{peer.port}{path}", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                              env=dict(os.environ, **(env or {})))

    def failed_after(result):
        m = re.search(r"failed after (\d+) ms", result.stdout)
        check(m, "probe printed no failure time", result)
        return int(m.group(1)) / 1000.0

    def stats(result):
        m = re.search(r"stats: handshakes=(\d+) requests=(\d+) reopened=(\d+)", result.stdout)
        check(m, "probe printed no stats line", result)
        return tuple(int(x) for x in m.groups())

    scenario = args.scenario
    peers = []

    def peer(cert="server.pem", key="server-key.pem", behaviour=serve_ok, client_ca=None, max_version=None):
        p = Peer(c(cert), c(key), behaviour, client_ca, max_version)
        peers.append(p)
        return p

    try:
        if scenario == "keepalive":
            p = peer()
            r = run(p, *trusted, "--requests", "5", "--method", "POST", "--body", "a=1",
                    "--then", f"https://localhost:{p.port}/stats", "--print-body")
            check(r.returncode == 0, "keep-alive requests failed", r)
            check(stats(r)[:2] == (1, 6), "expected 6 requests over 1 handshake", r)
            check("server-handshakes=1 server-requests=6" in r.stdout, "server saw more than one handshake", r)
            check("probe: 6 HTTPS request(s) over 1 TLS handshake(s)" in r.stderr, "no info summary", r)
        elif scenario == "release-connection":
            p = peer()
            r = run(p, *trusted, "--requests", "2", "--release")
            check(r.returncode == 0, "the released connection did not work", r)
            check("released body: server-handshakes=1 server-requests=3" in r.stdout,
                  "the released connection was not the kept-alive one", r)
        elif scenario == "server-closes-idle":
            p = peer(behaviour=lambda pe, co, i: serve_ok(pe, co, i, close_after=True))
            r = run(p, *trusted, "--requests", "3")
            check(r.returncode == 0, "requests after an idle close failed", r)
            check(stats(r)[:2] == (3, 3), "expected a new handshake per request", r)
        elif scenario == "server-drops-request":
            # The server reads the second request on a connection and closes
            # without answering: the client must resend it once on a new connection.
            p = peer(behaviour=lambda pe, co, i: serve_ok(pe, co, i, drop_second=True))
            r = run(p, *trusted, "--requests", "2", "--print-body")
            check(r.returncode == 0, "resend after a dropped request failed", r)
            check(stats(r) == (2, 2, 1), "expected 2 handshakes, 2 responses, 1 reopen", r)
            check(r.stdout.count("body: ok 1") == 2, "second request not answered on the new connection", r)
        elif scenario == "no-keepalive":
            p = peer()
            r = run(p, *trusted, "--requests", "3", "--no-keepalive")
            check(r.returncode == 0 and stats(r)[:2] == (3, 3), "expected one handshake per request", r)
        elif scenario == "pin-accepts-untrusted":
            p = peer("rogue-server.pem", "rogue-server-key.pem")
            pin = public_key_pin(c("rogue-server.pem"))
            r = run(p, "--no-system-trust", "--pin", public_key_pin(c("server.pem")), "--pin", pin)
            check(r.returncode == 0, "a matching pin did not accept the untrusted certificate", r)
        elif scenario == "pin-mismatch":
            p = peer("rogue-server.pem", "rogue-server-key.pem")
            r = run(p, *trusted, "--pin", public_key_pin(c("server.pem")))
            check(r.returncode == 1, "a pin mismatch was accepted", r)
            needed = public_key_pin(c("rogue-server.pem"))
            check(f"--servercert {needed}" in r.stderr, "the error does not print the needed pin", r)
            check(p.handshakes == 0, "server completed a handshake despite the mismatch")
        elif scenario == "untrusted-ca":
            p = peer("rogue-server.pem", "rogue-server-key.pem")
            r = run(p, *trusted)
            check(r.returncode == 1 and "failed verification" in r.stderr, "an untrusted CA was accepted", r)
            check(public_key_pin(c("rogue-server.pem")) in r.stderr, "the error does not print the pin", r)
        elif scenario == "wrong-hostname":
            p = peer("wrongname.pem", "wrongname-key.pem")
            r = run(p, *trusted)
            check(r.returncode == 1 and "failed verification" in r.stderr and "does not match" in r.stderr,
                  "a certificate for another name was accepted", r)
        elif scenario == "resolve-override":
            # vpn.test is in the certificate but resolves nowhere: --resolve maps it to loopback.
            p = peer()
            cmd = [args.probe, f"https://vpn.test:{p.port}/", *trusted, "--resolve", "vpn.test:127.0.0.1"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
            check(r.returncode == 0, "--resolve did not connect to the given address as vpn.test", r)
        elif scenario == "trusted-by-ip":
            p = peer()
            cmd = [args.probe, f"https://127.0.0.1:{p.port}/", *trusted]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT)
            check(r.returncode == 0, "a certificate with the 127.0.0.1 SAN was refused", r)
        elif scenario == "client-cert-required":
            p = peer(client_ca=c("ca.pem"))
            r = run(p, *trusted)
            check(r.returncode == 1, "the server's demand for a client certificate went unnoticed", r)
            r = run(p, *trusted, "--cert", c("client.pem"), "--key", c("client-key.pem"))
            check(r.returncode == 0, "PEM client certificate refused", r)
            r = run(p, *trusted, "--cert", c("client.p12"), "--key-password-env", "P12PW",
                    env={"P12PW": "espvpn-p12"})
            check(r.returncode == 0, "PKCS#12 client certificate refused", r)
            r = run(p, *trusted, "--cert", c("client.p12"), "--key-password-env", "P12PW",
                    env={"P12PW": "wrong"})
            check(r.returncode == 1 and "PKCS#12" in r.stderr, "a wrong PKCS#12 password went unnoticed", r)
            with tempfile.TemporaryDirectory() as tmp:  # a password-protected PKCS#8 PEM key
                encrypted = os.path.join(tmp, "client-key-encrypted.pem")
                subprocess.run(["certtool", "--to-p8", "--load-privkey", c("client-key.pem"), "--password",
                                "pem-pass", "--outfile", encrypted], capture_output=True, check=True)
                r = run(p, *trusted, "--cert", c("client.pem"), "--key", encrypted, "--key-password-env", "PW",
                        env={"PW": "pem-pass"})
                check(r.returncode == 0, "encrypted PEM key with the right password refused", r)
                r = run(p, *trusted, "--cert", c("client.pem"), "--key", encrypted, "--key-password-env", "PW",
                        env={"PW": "nope"})
                check(r.returncode == 1 and "cannot load client certificate" in r.stderr,
                      "encrypted PEM key with a wrong password accepted", r)
        elif scenario == "stalled-server":
            p = peer(behaviour=serve_stall)
            r = run(p, *trusted, "--io-timeout-ms", "1000")
            check(r.returncode == 1 and "timed out" in r.stderr, "a stalled server did not time out", r)
            # The bound includes connect and handshake on a loaded machine.
            took = failed_after(r)
            check(0.95 <= took < 4, f"timeout took {took:.2f} s, configured 1 s", r)
        elif scenario == "dribbling-server":
            p = peer(behaviour=serve_dribble)
            r = run(p, *trusted, "--io-timeout-ms", "1000", "--response-timeout-ms", "1500")
            check(r.returncode == 1 and "no complete response" in r.stderr, "a dribbling server did not time out", r)
            took = failed_after(r)
            check(1.45 <= took < 4.5, f"response timeout took {took:.2f} s, configured 1.5 s", r)
        elif scenario == "flooding-server":
            # Data always waiting: the response deadline must hold without a blocking read.
            p = peer(behaviour=serve_huge_chunked)
            # A body limit no machine reaches in the deadline (1 PB): the deadline must end it.
            r = run(p, *trusted, "--response-timeout-ms", "1500", "--max-body", str(10**15))
            check(r.returncode == 1 and "the server kept sending" in r.stderr,
                  "a server flooding a body below the size limit did not time out", r)
            took = failed_after(r)
            check(1.45 <= took < 4.5, f"response timeout took {took:.2f} s, configured 1.5 s", r)
        elif scenario == "endless-headers":
            for newline in (True, False):  # many long lines, or one line that never ends
                p = peer(behaviour=lambda pe, co, i, nl=newline: serve_endless_headers(pe, co, i, 1000, nl))
                r = run(p, *trusted, "--max-header-bytes", "32768")
                check(r.returncode == 1 and "header section exceeds the limit of 32768 bytes" in r.stderr,
                      "endless headers did not hit the byte limit", r)
            p = peer(behaviour=lambda pe, co, i: serve_endless_headers(pe, co, i, 10))
            r = run(p, *trusted)
            check(r.returncode == 1 and "more than 128 header fields" in r.stderr,
                  "endless short headers did not hit the count limit", r)
        elif scenario == "huge-body":
            p = peer(behaviour=serve_huge_chunked)
            r = run(p, *trusted, "--max-body", "1000000")
            check(r.returncode == 1 and "exceeds the limit of 1000000 bytes" in r.stderr,
                  "an endless chunked body did not hit the limit", r)
            p = peer(behaviour=serve_huge_length)
            r = run(p, *trusted, "--max-body", "1000000")
            check(r.returncode == 1 and "body of 10000000000 bytes exceeds" in r.stderr,
                  "a huge Content-Length was not refused at once", r)
            check(failed_after(r) < 3, "a huge Content-Length was not refused at once", r)
        elif scenario == "redirect-cookie":
            p = peer(behaviour=serve_redirect_cookie)
            r = run(p, *trusted, "--method", "POST", "--body", "user=a", "--follow", "--print-body", "--debug",
                    path="/start")
            check(r.returncode == 0 and "body: cookie-ok" in r.stdout,
                  "redirect with cookie not followed as GET with the cookie", r)
            check("s3cr3t" not in r.stderr, "a cookie value reached the log", r)
            check(stats(r)[:2] == (1, 2), "the redirect did not reuse the connection", r)
            r = run(p, *trusted, "--follow", path="/loop")
            check(r.returncode == 1 and "more than 10 redirects" in r.stderr, "a redirect loop was not cut off", r)
        elif scenario == "tls12":
            p = peer(max_version=ssl.TLSVersion.TLSv1_2)
            r = run(p, *trusted, "--requests", "2", "--debug")
            check(r.returncode == 0 and "(TLS1.2)" in r.stderr, "TLS 1.2 connection failed", r)
            check(stats(r)[:2] == (1, 2), "TLS 1.2 connection not kept alive", r)
        else:
            print(f"unknown scenario {scenario}", file=sys.stderr)
            return 2
    except Failure as failure:
        print(f"FAIL {scenario}: {failure}")
        return 1
    finally:
        for p in peers:
            p.close()
    print(f"PASS {scenario}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
