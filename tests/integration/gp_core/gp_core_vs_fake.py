#!/usr/bin/env python3
"""The sans-IO GlobalProtect core against the independent fake gateway.

  gp_core_vs_fake.py PROBE CASE     (PROBE = the gp_core_probe binary)

Python only moves bytes over HTTPS (http.client, a cookie jar); every request
body comes from our builders and every reply is judged by our parsers. The fake
(tools/fake-gp-gateway) was written from the protocol notes without our code, so
agreement here means both read the notes the same way. Loopback only, ephemeral
port. Exit 0 = pass, 1 = fail.
"""

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CERTS, FAKE, REPO, Failure, check  # noqa: E402,F401  (shared harness)


class Session:
    def __init__(self, probe, *fake_args):
        self.probe = probe
        self.dir = tempfile.mkdtemp(prefix="gpcore.")
        ready = os.path.join(self.dir, "ready.json")
        cmd = [sys.executable, FAKE, "--listen", "127.0.0.1:0", "--ready-file", ready,
               "--cert", os.path.join(CERTS, "server.pem"), "--key", os.path.join(CERTS, "server-key.pem"),
               "--log-file", os.path.join(self.dir, "fake.log"), "--max-runtime", "60", *fake_args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not os.path.exists(ready) or os.path.getsize(ready) == 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"fake did not start: {cmd}")
            time.sleep(0.05)
        time.sleep(0.05)
        with open(ready) as f:
            self.port = json.load(f)["listeners"][0]["port"]
        self.ctx = ssl.create_default_context(cafile=os.path.join(CERTS, "ca.pem"))
        self.cookies = {}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def post(self, target, body):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=15)
        headers = {"User-Agent": "PAN GlobalProtect", "Content-Type": "application/x-www-form-urlencoded"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn.request("POST", target, body=body, headers=headers)
        resp = conn.getresponse()
        for value in resp.headers.get_all("Set-Cookie") or []:
            k, _, v = value.split(";")[0].partition("=")
            self.cookies[k.strip()] = v.strip()
        data = resp.read()
        conn.close()
        return resp.status, data

    def run(self, *args, stdin=b""):
        p = subprocess.run([self.probe, *args], input=stdin, capture_output=True, timeout=15)
        if p.returncode != 0:
            raise Failure(f"probe {args} failed: {p.stderr.decode().strip()}")
        return p.stdout

    def parse(self, kind, reply):
        out = self.run("parse", kind, stdin=reply).decode()
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def login(self, iface, user, password):
        """Portal getconfig or gateway login, answering one challenge with `password`'s OTP."""
        target = "/global-protect/getconfig.esp" if iface == "portal" else "/ssl-vpn/login.esp"
        kind = "portal" if iface == "portal" else "login"
        _, reply = self.post(target, self.run("login", iface, "127.0.0.1", user, password[0]))
        r = self.parse(kind, reply)
        if r["kind"] == "challenge":
            _, reply = self.post(target, self.run("login", iface, "127.0.0.1", user, password[1], r["input_str"]))
            r = self.parse(kind, reply)
        return r


def case_full_flow(probe):
    s = Session(probe, "--portal-otp", "html:111111", "--gw-otp", "js:424242", "--hip-needed",
                "--esp", "aes-256-cbc:sha256", "--ip6", "fd00::5")
    try:
        _, reply = s.post("/global-protect/prelogin.esp?tmp=tmp&clientVer=4100&clientos=Linux", b"cas-support=yes")
        check(s.parse("prelogin", reply)["status"] == "Success", "portal prelogin parsed")
        portal = s.login("portal", "alice", ("secret", "111111"))
        check(portal["kind"] == "ok" and portal["gateway"] == f"127.0.0.1:{s.port}",
              "portal login through an HTML-wrapped JS challenge, gateway list parsed")
        gw = s.login("gateway", "alice", ("secret", "424242"))
        check(gw["kind"] == "ok" and "authcookie=" in gw["cookie"], "gateway login through a JS challenge")
        cookie = gw["cookie"].encode()
        _, reply = s.post("/ssl-vpn/getconfig.esp", s.run("getconfig-body", stdin=cookie))
        cfg = s.parse("getconfig", reply)
        check(cfg["kind"] == "ok" and cfg["ip6"] == "fd00::5" and cfg["enc"] == "aes-256-cbc"
              and cfg["hmac"] == "sha256" and cfg["c2s_key_bytes"] == "32",
              "getconfig accepted our session cookie; SAs parsed")
        _, reply = s.post("/ssl-vpn/hipreportcheck.esp", s.run("hipcheck-body", cfg["ip"], stdin=cookie))
        check(s.parse("hipcheck", reply)["needed"] == "1", "HIP check says a report is needed")
        _, reply = s.post("/ssl-vpn/hipreport.esp", s.run("hipreport-body", cfg["ip"], stdin=cookie))
        check(s.parse("ack", reply)["kind"] == "ok", "HIP report accepted")
        _, reply = s.post("/ssl-vpn/hipreportcheck.esp", s.run("hipcheck-body", cfg["ip"], stdin=cookie))
        check(s.parse("hipcheck", reply)["needed"] == "0", "HIP check satisfied after the report (md5 matched)")
        _, reply = s.post("/ssl-vpn/logout.esp", s.run("logout-body", stdin=cookie))
        check(s.parse("ack", reply)["kind"] == "ok", "logout accepted")
        _, reply = s.post("/ssl-vpn/getconfig.esp", s.run("getconfig-body", stdin=cookie))
        r = s.parse("getconfig", reply)
        check(r["kind"] == "error" and r["error_kind"] == "2", "cookie rejected after logout (CookieRejected)")
    finally:
        s.stop()


def case_xml_challenge_gcm_errors(probe):
    s = Session(probe, "--no-portal", "--gw-otp", "xml:4242", "--esp", "aes-128-gcm")
    try:
        _, reply = s.post("/global-protect/prelogin.esp?tmp=tmp&clientVer=4100&clientos=Linux", b"cas-support=yes")
        r = s.parse("prelogin", reply)
        check(r["kind"] == "error" and r["error_kind"] == "3", "missing portal is WrongInterface")
        bad = s.login("gateway", "alice", ("wrong", "x"))
        check(bad["kind"] == "error" and bad["error_kind"] == "1", "bad password is AuthFailed")
        gw = s.login("gateway", "alice", ("secret", "4242"))
        check(gw["kind"] == "ok", "gateway login through an XML challenge")
        _, reply = s.post("/ssl-vpn/getconfig.esp", s.run("getconfig-body", stdin=gw["cookie"].encode()))
        cfg = s.parse("getconfig", reply)
        check(cfg["enc"] == "aes-128-gcm" and cfg["hmac"] == "" and cfg["c2s_key_bytes"] == "20",
              "GCM SA parsed as key + salt, no HMAC")
    finally:
        s.stop()


CASES = {"full_flow": case_full_flow, "xml_challenge_gcm_errors": case_xml_challenge_gcm_errors}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(f"usage: {sys.argv[0]} PROBE {'|'.join(CASES)}", file=sys.stderr)
        return 2
    try:
        CASES[sys.argv[2]](sys.argv[1])
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
