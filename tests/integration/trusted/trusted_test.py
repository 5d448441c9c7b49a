#!/usr/bin/env python3
"""Trusted network detection for --always-on (docs/SERVICE.md): espvpn --always-on against
tools/fake-gp-gateway while the host's resolver and a TLS server on the namespace's loopback say
whether the network is trusted.

  trusted_test.py ESPVPN CASE   (CASE = one of CASES below; "list" prints them)

Each case runs in private mount and network namespaces (harness.in_private_namespaces and
harness.resolver, as gp_internal does; root only, otherwise skipped, exit 77). espvpn runs with
--dry-run: "the tunnel comes up" is the gateway login and the tunnel configuration printed, after
which a dry run exits 0 (tests/integration/service/service.sh's trusted and trusted_anyconnect
bring real tunnels up, and check --trusted-server while connected). Exit 0 = pass, 1 = fail,
77 = skipped.
"""

import base64
import hashlib
import json
import os
import shlex
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, CERTS, Failure, Fake, check, in_private_namespaces, resolver  # noqa: E402

ESPVPN = None
INSIDE_ENV = "ESPVPN_TRUSTED_NS"
LAN = "10.77.0.1"  # the trusted server's address, on the namespace's loopback


def pin_of(cert):
    """pin-sha256: of a PEM certificate's public key (computed here, not by espvpn)."""
    pub = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"], capture_output=True, check=True,
                         timeout=10).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, capture_output=True,
                         check=True, timeout=10).stdout
    return "pin-sha256:" + base64.b64encode(hashlib.sha256(der).digest()).decode()


class TlsServer:
    """A TLS server on LAN:port presenting `cert` (None: accepts TCP and never answers)."""

    def __init__(self, cert=None, key=None, port=8443):
        self.sock = socket.create_server((LAN, port))
        self.ctx = None
        if cert:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
        self.handshakes = 0
        self.stop = False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(0.2)
        held = []
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            if not self.ctx:
                held.append(conn)  # silent: never a byte back
                continue
            conn.settimeout(3)
            try:
                with self.ctx.wrap_socket(conn, server_side=True):
                    self.handshakes += 1
            except (ssl.SSLError, OSError):
                pass

    def close(self):
        self.stop = True
        self.sock.close()


class Client:
    """espvpn --always-on --dry-run in the background, its log in a file, its status socket."""

    def __init__(self, url, args, user="alice", password="secret", protocol="gp"):
        self.dir = tempfile.mkdtemp(prefix="trusted.")
        self.sock = os.path.join(self.dir, "status.sock")
        self.log = os.path.join(self.dir, "espvpn.log")
        cmd = [ESPVPN, f"--protocol={protocol}", "--cafile", CA, "--dry-run", "--no-cookie-cache", "-u", user,
               "--passwd-on-stdin", "--status-socket", self.sock, *args, url]
        print("  $ " + " ".join(shlex.quote(c) for c in cmd))
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "w"), text=True)
        self.proc.stdin.write(password + "\n")
        self.proc.stdin.close()

    def text(self):
        with open(self.log) as f:
            return f.read()

    def status(self):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2)
                s.connect(self.sock)
                s.sendall(b'{"request": "status"}\n')
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            return json.loads(data)
        except (OSError, ValueError):
            return {}

    def state_when(self, want, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.proc.poll() is None:
            st = self.status().get("state")
            if st == want:
                return st
            time.sleep(0.1)
        return self.status().get("state")

    def exit_within(self, seconds):
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def show(self):
        sys.stdout.write("  ---- espvpn log ----\n" + self.text())


def logins(f):
    return f.stats().get("login_ok", 0)


def route_change():
    """What a network change looks like to espvpn's route watch: a route appears."""
    subprocess.run(["ip", "route", "add", "10.78.0.0/24", "dev", "lo"], check=True, timeout=10)
    return time.monotonic()


def stays_off(c, f, why):
    st = c.state_when("trusted-network", 15)
    if st != "trusted-network":
        c.show()
    check(st == "trusted-network", f"the status says trusted-network ({st})")
    time.sleep(1)
    check(c.proc.poll() is None and logins(f) == 0, "no login, no tunnel, still running")
    check(why in c.text(), f"the log says why: {why!r}")
    out = subprocess.run([ESPVPN, "status", "--status-socket", c.sock], capture_output=True, text=True, timeout=10)
    check(out.returncode == 3 and "state:      trusted-network" in out.stdout and "On a trusted network" in out.stdout,
          f"espvpn status says so (exit 3: no tunnel): {out.stdout!r}")


def comes_up(c, f, since, bound=5, what="the change"):
    rc = c.exit_within(20)
    took = time.monotonic() - since
    if rc != 0:
        c.show()
    check(rc == 0 and logins(f) >= 1, f"the gateway login and the (dry-run) tunnel followed: exit {rc}, "
                                      f"{logins(f)} login(s)")
    check(took < bound, f"within {bound} s of {what} ({took:.2f} s)")


# ───────────────────────────── cases ─────────────────────────────

def case_domain():
    d = resolver([], search=["hotel.example", "Corp.Example."])
    with Fake() as f:
        c = Client(f.url, ["--always-on", "--trusted-domain", "lab.example,corp.example"])
        try:
            stays_off(c, f, "trusted network: search domain corp.example matches --trusted-domain corp.example: "
                            "no tunnel (--always-on)")
            # Leaving: the DHCP client writes another resolv.conf, the routes change.
            with open(os.path.join(d, "resolv.conf"), "w") as r:
                r.write("search cafe.example\n")
            comes_up(c, f, route_change())
            check("untrusted network: no search domain matches --trusted-domain (/etc/resolv.conf: cafe.example): "
                  "connecting" in c.text(), "the log says why it is not trusted")
        finally:
            c.stop()
        # Without --always-on a run connects wherever it is, and says so.
        with open(os.path.join(d, "resolv.conf"), "w") as r:
            r.write("search corp.example\n")
        c = Client(f.url, ["--trusted-domain", "*.example"])
        rc = c.exit_within(30)
        check(rc == 0 and logins(f) == 2, f"without --always-on: connected on the trusted network (exit {rc})")
        check("--trusted-domain/--trusted-server are used with --always-on only: connecting" in c.text(),
              "and the log says the rule is for --always-on")


def case_server():
    resolver([])
    subprocess.run(["ip", "addr", "add", LAN + "/32", "dev", "lo"], check=True, timeout=10)
    srv = TlsServer(os.path.join(CERTS, "server.pem"), os.path.join(CERTS, "server-key.pem"))
    pin = pin_of(os.path.join(CERTS, "server.pem"))
    with Fake() as f:
        c = Client(f.url, ["--always-on", "--trusted-server", f"{LAN}:8443,{pin}"])
        try:
            stays_off(c, f, f"trusted network: {LAN}:8443 presented the certificate of --trusted-server {pin}")
            check(srv.handshakes >= 1, "the server saw the handshake")
            # Leaving: the server is gone with its address (a route change).
            srv.close()
            t0 = time.monotonic()
            subprocess.run(["ip", "addr", "del", LAN + "/32", "dev", "lo"], check=True, timeout=10)
            comes_up(c, f, t0)
            check(f"untrusted network: {LAN}:8443: cannot connect" in c.text(), "the log says why")
        finally:
            c.stop()


def case_wrong_cert():
    resolver([])
    subprocess.run(["ip", "addr", "add", LAN + "/32", "dev", "lo"], check=True, timeout=10)
    srv = TlsServer(os.path.join(CERTS, "rogue-server.pem"), os.path.join(CERTS, "rogue-server-key.pem"))
    pin = pin_of(os.path.join(CERTS, "server.pem"))
    rogue = pin_of(os.path.join(CERTS, "rogue-server.pem"))
    with Fake() as f:
        c = Client(f.url, ["--always-on", "--trusted-server", f"{LAN}:8443,{pin}"])
        try:
            t0 = time.monotonic()
            comes_up(c, f, t0, bound=10, what="the start")
            check(srv.handshakes >= 1, "the wrong server was asked")
            check(f"untrusted network: {LAN}:8443 presented {rogue}, not {pin}: connecting" in c.text(),
                  "the log names the certificate it saw and the pin it wanted")
        finally:
            c.stop()
            srv.close()
    # A short pin is refused: a certificate could be made to match it.
    r = subprocess.run([ESPVPN, "--always-on", "--trusted-server", f"{LAN}:8443,{pin[:16]}", "vpn.example"],
                       capture_output=True, text=True, timeout=10)
    check(r.returncode != 0 and "give the whole digest" in r.stderr, f"a weak pin is refused: {r.stderr.strip()!r}")
    r = subprocess.run([ESPVPN, "--always-on", "--trusted-server", f"{LAN}:8443", "vpn.example"],
                       capture_output=True, text=True, timeout=10)
    check(r.returncode != 0 and "needs the server certificate's pin" in r.stderr, "no pin: refused")


def case_silent_server():
    resolver([])
    subprocess.run(["ip", "addr", "add", LAN + "/32", "dev", "lo"], check=True, timeout=10)
    srv = TlsServer(None)  # takes the connection, never answers the handshake
    pin = pin_of(os.path.join(CERTS, "server.pem"))
    with Fake() as f:
        t0 = time.monotonic()
        c = Client(f.url, ["--always-on", "--trusted-server", f"{LAN}:8443,{pin}"])
        try:
            comes_up(c, f, t0, bound=12, what="the start")
            # The wait and the handshake's own timeout are both 2 s: whichever ends first words it.
            text = c.text()
            check(f"untrusted network: {LAN}:8443 did not answer within 2000 ms: connecting" in text or
                  f"untrusted network: {LAN}:8443: TLS handshake: The operation timed out: connecting" in text,
                  "not trusted when the 2 s bound ends")
        finally:
            c.stop()
            srv.close()


def case_gp_internal():
    # GlobalProtect's internal host detection: inside, with no internal gateway, the
    # always-on session stays off; outside, it logs in again.
    d = resolver(["10.99.0.1 gw.corp.example"])
    with Fake("--internal-host-detection", "10.99.0.1,gw.corp.example") as f:
        c = Client(f.url, ["--always-on"])
        try:
            stays_off(c, f, "inside the corporate network: 10.99.0.1 resolves to gw.corp.example")
            check("trusted network (GlobalProtect internal host detection): no tunnel (--always-on)" in c.text(),
                  "the trusted-network line")
            with open(os.path.join(d, "hosts"), "w") as h:
                h.write("127.0.0.1 localhost\n10.99.0.1 printer.example\n")
            t0 = route_change()
            # The password was on stdin once: the new portal login waits for a person.
            st = c.state_when("needs-login", 10)
            took = time.monotonic() - t0
            if st != "needs-login":
                c.show()
            check(st == "needs-login", f"after leaving: a new portal login ({st})")
            prelogins = f.stats().get("requests_by_path", {}).get("/global-protect/prelogin.esp", 0)
            check(prelogins == 2, f"the portal was asked again ({prelogins} prelogins)")
            check(took < 5, f"within 5 s of the route change ({took:.2f} s)")
        finally:
            c.stop()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global ESPVPN
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(f"usage: {sys.argv[0]} ESPVPN CASE  (CASE: {', '.join(CASES)})")
        return 1
    if os.geteuid() != 0:
        print("SKIP: needs root (mount and network namespaces)")
        return 77
    rc = in_private_namespaces(INSIDE_ENV, 110)
    if rc is not None:
        return rc
    ESPVPN = os.path.abspath(sys.argv[1])
    name = sys.argv[2]
    print(f"== {name}")
    try:
        CASES[name]()
    except Failure as e:
        print(f"FAIL {name}: {e}")
        return 1
    print(f"PASS {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
