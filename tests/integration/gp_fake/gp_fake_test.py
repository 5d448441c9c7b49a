#!/usr/bin/env python3
"""Integration tests for tools/fake-gp-gateway.

  gp_fake_test.py CASE      (CASE = one of CASES below; "list" prints them)

The openconnect cases prove the fake speaks GlobalProtect as Debian's openconnect 9.01
understands it; the self-test cases drive the knobs openconnect cannot reach with
Python's http.client. Everything runs on 127.0.0.1 with ephemeral ports, so parallel
runs never clash. Exit 0 = pass, 1 = fail, 77 = skipped (openconnect missing).
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from harness import CA, FAKE, REPO, Failure, Fake, OC_TIMEOUT, check, openconnect  # noqa: E402,F401

HIPREPORT = "/usr/libexec/openconnect/hipreport.sh"


def auth_lines(out):
    return dict(re.findall(r"^([A-Z_]+)='?(.*?)'?$", out, re.M))


def expect_auth_ok(r):
    lines = auth_lines(r.stdout)
    if r.returncode != 0:
        sys.stdout.write(r.stderr)
    check(r.returncode == 0, "openconnect --authenticate exits 0")
    for k in ("COOKIE", "HOST", "CONNECT_URL", "FINGERPRINT"):
        check(k in lines, f"openconnect printed {k}")
    check("authcookie=" in lines["COOKIE"] and "user=alice" in lines["COOKIE"], "COOKIE holds authcookie and user")
    return lines


# ───────────────────────────── openconnect cases ─────────────────────────────

def case_oc_portal_password():
    with Fake() as f:
        lines = expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        s = f.stats()
        check(s["portal_config_ok"] == 1 and s["login_ok"] == 1, "portal getconfig then gateway login succeeded")
        check(s["login_via"] == {"password": 1}, "gateway accepted the replayed password")
        check(lines["CONNECT_URL"].endswith(f":{f.port}/"), "CONNECT_URL names the gateway from the portal list")


def case_oc_direct_gateway():
    with Fake() as f:
        expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin",
                                           "--usergroup", "gateway"], "secret\n"))
        s = f.stats()
        check(not any(p.startswith("/global-protect/") for p in s["requests_by_path"]), "portal never contacted")
        check(s["requests_by_path"].get("/ssl-vpn/prelogin.esp") == 1, "gateway prelogin ran once")
    with Fake("--no-portal") as f:
        expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        s = f.stats()
        check(s["requests_by_path"].get("/global-protect/prelogin.esp") == 1 and s["login_ok"] == 1,
              "'portal does not exist' makes openconnect retry the host as a gateway")


def case_oc_otp_two_rounds():
    # Prompts after the password are read from stdin (no --passwd-on-stdin needed).
    for forms in (("xml", "js"), ("js", "xml")):
        with Fake("--gw-otp", f"{forms[0]}:111111", "--gw-otp", f"{forms[1]}:222222") as f:
            expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway"],
                                       "secret\n111111\n222222\n"))
            s = f.stats()
            check(s["challenges_sent"] == 2 and s["login_via"] == {"password+otp+2otp": 1},
                  f"two challenge rounds ({'+'.join(forms)}) answered")
    # FINDING: openconnect 9.01 cannot parse the JS-inside-HTML challenge form.
    with Fake("--gw-otp", "html:111111") as f:
        r = openconnect(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway"], "secret\n111111\n")
        check(r.returncode != 0 and "Failed to parse server response" in r.stderr,
              "openconnect 9.01 rejects the html challenge form (newer clients parse it)")
    with Fake("--gw-otp", "js:111111") as f:
        r = openconnect(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway"], "secret\n999999\n")
        check(r.returncode != 0 and f.stats()["login_ok"] == 0, "wrong OTP answer is refused")


def case_oc_wrong_password():
    with Fake() as f:
        r = openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--usergroup", "gateway"],
                        "wrong\n")
        s = f.stats()
        check(r.returncode != 0, "openconnect exits non-zero")
        check("COOKIE=" not in r.stdout, "no cookie printed")
        check(s["login_failed"] >= 1 and s["login_ok"] == 0, "fake answered 512 auth-failed")
        check("512" in r.stderr, "openconnect saw HTTP 512")


def case_oc_keepalive_handshakes():
    for keepalive, extra in ((True, []), (False, ["--no-keepalive"])):
        with Fake(*extra) as f:
            expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
            s = f.stats()
            print(f"  MEASURED keepalive={'on' if keepalive else 'off'}: tls_handshakes={s['tls_handshakes']} "
                  f"requests={s['requests']} requests_per_connection={s['requests_per_connection']}")
            if keepalive:
                check(s["tls_handshakes"] == 1, "keep-alive on: openconnect reused one TLS connection")
            else:
                check(s["tls_handshakes"] == s["requests"], "keep-alive off: one handshake per request")


def case_oc_hip_csd_wrapper():
    if not os.access(HIPREPORT, os.X_OK):
        print(f"SKIP: {HIPREPORT} missing")
        return 77
    with Fake("--hip-needed", "--no-tunnel", "--esp", "aes-128-cbc:sha1") as f:
        # --no-tunnel: the tunnel GET answers 502, so openconnect stops after HIP.
        r = openconnect(f.url, ["-u", "alice", "--passwd-on-stdin", "--usergroup", "gateway", "--no-dtls",
                                "--csd-wrapper", HIPREPORT, "--script-tun", "--script", "true"], "secret\n")
        s = f.stats()
        check(s["getconfigs"] == 1 and s["hip_checks"] >= 1, "getconfig and hipreportcheck ran")
        check(s["hip_reports"] == 1 and s["hip_report_valid_xml"] == 1, "one well-formed HIP report received")
        check(re.fullmatch(r"[0-9a-f]{32}", s["hip_report_md5"][0] or ""), "report carries the md5 of the check")
        check(r.returncode == 2 and s["tunnels"] == 0, "tunnel refused with 502: openconnect exits 2")
        print(f"  MEASURED login+getconfig+HIP: tls_handshakes={s['tls_handshakes']} "
              f"requests_per_connection={s['requests_per_connection']} openconnect exit={r.returncode}")


def case_oc_portal_cookie():
    with Fake("--portal-cookie", "--gw-cookie-only") as f:
        expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        check(f.stats()["login_via"] == {"portal-userauthcookie": 1},
              "gateway logged in by portal-userauthcookie (password refused there)")


def case_oc_saml_prelogin_cookie():
    with Fake("--gw-saml", "REDIRECT", "--saml-cookie", "SAML-OK-42") as f:
        url = f"https://127.0.0.1:{f.port}/gateway:prelogin-cookie"
        expect_auth_ok(openconnect(url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "SAML-OK-42\n"))
        check(f.stats()["login_via"] == {"saml": 1}, "gateway accepted prelogin-cookie")


def case_oc_gateway_choice():
    # openconnect 9.01 lists portal gateways in document order and ignores <priority>;
    # with several gateways it asks, so the test picks one with --authgroup.
    with Fake("--gateway", "0:5:far", "--gateway", "1:1:near", listeners=2) as f:
        lines = expect_auth_ok(openconnect(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin",
                                                   "--authgroup", "near"], "secret\n"))
        check(lines["CONNECT_URL"].endswith(f":{f.ports[1]}/"), "openconnect went to the gateway named 'near'")
        pl = f.stats()["per_listener"]
        check(pl[str(f.ports[1])].get("login_ok") == 1, "login happened on the second listener")
        r = openconnect(f.url, ["--authenticate", "--non-inter", "-u", "alice", "--passwd-on-stdin"], "secret\n")
        check(r.returncode != 0 and "User input required" in r.stderr,
              "FINDING: with 2 gateways and --non-inter, openconnect 9.01 refuses instead of using priority")


TUNNEL_SCRIPT = r"""
import os, socket, struct, sys, time, signal
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b)//2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
fd = int(os.environ["VPNFD"]); src = socket.inet_aton(os.environ["INTERNAL_IP4_ADDRESS"])
icmp = bytearray(b"\x08\0\0\0\x12\x34\0\x01" + b"espvpn-fake-echo")
icmp[2:4] = struct.pack("!H", csum(bytes(icmp)))
ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20+len(icmp), 1, 0, 64, 1, 0, src, socket.inet_aton("10.200.0.1")))
ip[10:12] = struct.pack("!H", csum(bytes(ip)))
os.write(fd, bytes(ip) + bytes(icmp))
os.set_blocking(fd, False)
deadline = time.time() + 10; ok = False
while time.time() < deadline and not ok:
    try:
        pkt = os.read(fd, 65536)
        ok = pkt[20] == 0 and pkt[12:16] == socket.inet_aton("10.200.0.1") and b"espvpn-fake-echo" in pkt
    except BlockingIOError:
        time.sleep(0.05)
open(sys.argv[1], "w").write("echo-ok" if ok else "echo-missing")
os.set_blocking(fd, True)
end = time.time() + 60  # the test stops openconnect with SIGINT; leave when the fd closes
while time.time() < end:
    try:
        if not os.read(fd, 65536): break
    except OSError:
        break
"""


def case_oc_tunnel_echo():
    tunnel_round_trip(["--tunnel-echo"], [])


def case_oc_tunnel_tun_netns():
    """Phase 2 with a real tun device: the fake bridges frames to a tun in a private
    netns whose kernel answers the ping."""
    if os.geteuid() != 0:
        print("SKIP: needs root for a network namespace")
        return 77
    ns, dev = f"gpfk{os.getpid()}", "gpfktun0"
    ip = lambda *a: subprocess.run(["ip", *a], check=True, timeout=10)
    ip("netns", "add", ns)
    try:
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "tuntap", "add", "dev", dev, "mode", "tun")
        ip("-n", ns, "addr", "add", "10.200.0.1/24", "dev", dev)
        ip("-n", ns, "link", "set", dev, "up")
        tunnel_round_trip(["--tun", dev], ["ip", "netns", "exec", ns])
    finally:
        subprocess.run(["ip", "netns", "del", ns], timeout=10)


def tunnel_round_trip(fake_args, prefix):
    with Fake(*fake_args, prefix=prefix) as f:
        result = os.path.join(f.dir, "tunnel-result")
        script = os.path.join(f.dir, "tun.py")
        with open(script, "w") as fh:
            fh.write(TUNNEL_SCRIPT)
        cmd = [*prefix, "openconnect", "-v", "--protocol=gp", "--cafile", CA, "-u", "alice", "--passwd-on-stdin", "--usergroup",
               "gateway", "--no-dtls", "--script-tun", "--script", f"{sys.executable} {script} {result} </dev/null >/dev/null 2>&1", f.url]
        print("  $ " + " ".join(cmd))
        oc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        lines = []  # openconnect's output, read as it comes
        reader = threading.Thread(target=lambda: lines.extend(oc.stdout), daemon=True)
        try:
            oc.stdin.write("secret\n")
            oc.stdin.close()
            oc.stdin = None
            reader.start()
            # openconnect sends its first GPST keepalive after 10 s without traffic. SIGINT
            # only once it has logged the echo: the fake counts the keepalive as it sends the
            # echo, and a SIGINT right then can beat openconnect's read of it.
            deadline = time.monotonic() + 25
            while time.monotonic() < deadline and oc.poll() is None:
                if os.path.exists(result) and f.stats()["keepalives"] >= 1 and \
                        any("Got GPST DPD/keepalive response" in l for l in list(lines)):
                    break
                time.sleep(0.2)
            oc.send_signal(signal.SIGINT)
            oc.wait(timeout=15)
            reader.join(timeout=15)
            out = "".join(lines)
        finally:
            if oc.poll() is None:
                oc.kill()
                oc.wait()
        # The frame counters reach the stats file at the latest when the fake sees the tunnel
        # connection close, which may be after openconnect's exit.
        s = f.stats_when(lambda s: s["tunnel_frames_in"] >= 1 and s["tunnel_frames_out"] >= 1)
        if oc.returncode != 0:
            sys.stdout.write(out[-3000:])
        check(s["tunnels"] == 1, "openconnect accepted START_TUNNEL")
        check(os.path.exists(result) and open(result).read() == "echo-ok",
              "ICMP echo went through the 16-byte framed HTTPS tunnel and came back")
        check(s["tunnel_frames_in"] >= 1 and s["tunnel_frames_out"] >= 1, "frames counted both ways")
        check(s["keepalives"] >= 1 and "Got GPST DPD/keepalive response" in out, "keepalive echoed and understood")
        check(s["logouts"] == 1 and "Logout successful" in out,
              "openconnect logged out on SIGINT and the fake accepted the session fields")
        log = open(f.log).read()
        check("GET /ssl-tunnel-connect.sslvpn" in log and not re.search(r"(?<!md5=)\b[0-9a-f]{32}\b", log)
              and "secret" not in log, "fake log names every request but masks authcookie and password")
        print(f"  MEASURED full connect: tls_handshakes={s['tls_handshakes']} "
              f"requests_per_connection={s['requests_per_connection']} openconnect exit={oc.returncode}")


# ───────────────────────────── self-test (http.client) ─────────────────────────────

LOGIN_FORM = {"jnlpReady": "jnlpReady", "ok": "Login", "direct": "yes", "clientVer": "4100", "prot": "https:",
              "clientos": "Linux", "os-version": "test", "server": "127.0.0.1", "computer": "selftest",
              "user": "alice", "passwd": "secret", "ipv6-support": "no"}


def client_ctx(cert=False):
    ctx = ssl.create_default_context(cafile=CA)
    if cert:
        ctx.load_cert_chain(os.path.join(REPO, "certs/client.pem"), os.path.join(REPO, "certs/client-key.pem"))
    return ctx


def post(f, path, form, timeout=10, conn=None, cert=False):
    c = conn or http.client.HTTPSConnection("127.0.0.1", f.port, context=client_ctx(cert), timeout=timeout)
    c.request("POST", path, urllib.parse.urlencode(form), {"Content-Type": "application/x-www-form-urlencoded",
                                                           "User-Agent": "PAN GlobalProtect"})
    r = c.getresponse()
    return r.status, dict(r.getheaders()), r.read().decode()


def login(f, **over):
    status, _, body = post(f, "/ssl-vpn/login.esp", {**LOGIN_FORM, **over})
    if status != 200:
        raise Failure(f"login failed: {status} {body[:200]}")
    args = [a.text or "" for a in ET.fromstring(body).iter("argument")]
    return {"authcookie": args[1], "portal": args[3], "user": args[4], "domain": urllib.parse.unquote(args[7]),
            "computer": "selftest"}


def getconfig(f, cookie):
    status, _, body = post(f, "/ssl-vpn/getconfig.esp", {"client-type": "1", "protocol-version": "p1",
                                                         "ipv6-support": "no", **cookie})
    return status, body


def case_selftest_auth_errors():
    with Fake() as f:
        status, headers, body = post(f, "/ssl-vpn/login.esp", {**LOGIN_FORM, "passwd": "nope"})
        check(status == 512 and headers.get("X-Private-Pan-Globalprotect") == "auth-failed",
              "wrong password -> 512 + X-Private-Pan-Globalprotect: auth-failed")
        check('respStatus = "Error"' in body, "512 body is the JS error form")
        status, _, _ = post(f, "/ssl-vpn/login.esp", {k: v for k, v in LOGIN_FORM.items() if k != "jnlpReady"})
        check(status == 500, "login without jnlpReady -> 500")
        cookie = login(f)
        status, body = getconfig(f, {**cookie, "authcookie": "0" * 32})
        check(body == "errors getting SSL/VPN config", "bogus authcookie -> 'errors getting SSL/VPN config'")
        st, _, body = post(f, "/ssl-vpn/logout.esp", cookie)
        check("status=\"success\"" in body and f.stats()["logouts"] == 1, "logout with the session fields succeeds")
        check(getconfig(f, cookie)[1] == "errors getting SSL/VPN config", "cookie is dead after logout")
    # The fresh cookie's getconfig (a TLS handshake of its own) must come within the max age
    # of the login, also on a loaded machine: 3 s; the rejected one surely after it.
    with Fake("--cookie-max-age", "3") as f:
        cookie = login(f)
        issued_by = time.monotonic()
        check("<ip-address>" in getconfig(f, cookie)[1], "fresh cookie accepted")
        time.sleep(max(0.0, issued_by + 3.3 - time.monotonic()))
        check("Invalid authentication cookie" in getconfig(f, cookie)[1], "cookie older than max age rejected")
        check(f.stats()["expired_cookie_rejections"] == 1, "expiry counted")


def case_selftest_saml_and_portal():
    import base64
    with Fake("--portal-saml", "POST", "--gw-saml", "REDIRECT", "--portal-cookie",
              "--gateway", "0:3:a", "--gateway", "0:1:b") as f:
        _, _, body = post(f, "/global-protect/prelogin.esp", {})
        root = ET.fromstring(body)
        html_form = base64.b64decode(root.findtext("saml-request")).decode()
        check(root.findtext("saml-auth-method") == "POST" and "<form" in html_form, "portal SAML POST: base64 HTML form")
        _, _, body = post(f, "/ssl-vpn/prelogin.esp", {})
        url = base64.b64decode(ET.fromstring(body).findtext("saml-request")).decode()
        check(url.startswith("https://") and "/SAML20/SP/ACS" in url, "gateway SAML REDIRECT: base64 IdP URL")
        c = http.client.HTTPSConnection("127.0.0.1", f.port, context=client_ctx(), timeout=5)
        c.request("GET", "/SAML20/SP/ACS?user=bob")
        r = c.getresponse()
        r.read()
        check(r.getheader("saml-auth-status") == "1" and r.getheader("saml-username") == "bob"
              and r.getheader("prelogin-cookie") == "FAKE-SAML-COOKIE", "ACS answers with the saml-* headers")
        status, _, body = post(f, "/global-protect/getconfig.esp", {"user": "bob", "prelogin-cookie": "FAKE-SAML-COOKIE"})
        policy = ET.fromstring(body)
        puc = policy.findtext("portal-userauthcookie")
        prios = {e.findtext("description"): e.findtext("priority") for e in policy.iter("entry")
                 if e.findtext("description")}
        check(status == 200 and len(puc) == 32, "portal accepts the SAML cookie and issues portal-userauthcookie")
        check(prios == {"a": "3", "b": "1"}, "portal lists both gateways with their priorities")
        status, _, _ = post(f, "/ssl-vpn/login.esp", {**LOGIN_FORM, "user": "bob", "passwd": "",
                                                       "portal-userauthcookie": puc})
        check(status == 200, "gateway accepts the portal-userauthcookie")
        status, _, _ = post(f, "/ssl-vpn/login.esp", {**LOGIN_FORM, "user": "alice", "passwd": "",
                                                       "portal-userauthcookie": puc})
        check(status == 512, "portal-userauthcookie is bound to its user")


def case_selftest_stall_delay_malformed():
    with Fake("--stall", "/ssl-vpn/prelogin.esp=headers", "--stall", "/global-protect/prelogin.esp=silent",
              "--delay", "/ssl-vpn/login.esp=1.0", "--malformed", "/ssl-vpn/getconfig.esp") as f:
        c = http.client.HTTPSConnection("127.0.0.1", f.port, context=client_ctx(), timeout=1.5)
        c.request("POST", "/ssl-vpn/prelogin.esp", "")
        r = c.getresponse()
        check(r.status == 200, "stall=headers sends the status line and headers")
        try:
            r.read()
            raise Failure("stalled body was completed")
        except (socket.timeout, TimeoutError):
            check(True, "stall=headers never completes the body")
        try:
            post(f, "/global-protect/prelogin.esp", {}, timeout=1.5)
            raise Failure("silent stall answered")
        except (socket.timeout, TimeoutError):
            check(True, "stall=silent never answers")
        t0 = time.monotonic()
        cookie = login(f)
        check(time.monotonic() - t0 >= 1.0, "delay=1.0 delays the login reply")
        _, body = getconfig(f, cookie)
        try:
            ET.fromstring(body)
            raise Failure("malformed getconfig parsed")
        except ET.ParseError:
            check(True, "malformed getconfig is not well-formed XML")


def case_selftest_esp_suites():
    suites = ["aes-128-cbc:sha1", "aes-128-cbc:sha256", "aes-128-cbc:md5", "aes-256-cbc:sha1",
              "aes-256-cbc:sha256", "aes-256-cbc:md5", "aes-128-gcm", "aes-256-gcm"]
    ebits = {"aes-128-cbc": 128, "aes-256-cbc": 256, "aes-128-gcm": 160, "aes-256-gcm": 288}
    abits = {"sha1": 160, "sha256": 256, "md5": 128}
    for suite in suites:
        with tempfile.TemporaryDirectory() as d:
            sa_file, hook_out = os.path.join(d, "sa.json"), os.path.join(d, "hook.out")
            hook = os.path.join(d, "hook.sh")
            with open(hook, "w") as fh:
                fh.write(f"#!/bin/sh\ncat \"$1\" >> {hook_out}\n")
            os.chmod(hook, 0o755)
            with Fake("--esp", suite, "--sa-file", sa_file, "--sa-hook", hook, "--timeout", "120") as f:
                cookie = login(f)
                _, body1 = getconfig(f, cookie)
                sa1 = json.load(open(sa_file))
                _, body2 = getconfig(f, cookie)
                sa2 = json.load(open(sa_file))
            ips = ET.fromstring(body2).find("ipsec")
            enc, _, auth = suite.partition(":")
            ok = (ips.findtext("enc-algo") == enc and ips.findtext("c2s-spi") == sa2["c2s"]["spi"]
                  and ips.findtext("ekey-s2c/val") == sa2["s2c"]["ekey"]
                  and int(ips.findtext("ekey-c2s/bits")) == ebits[enc] == len(sa2["c2s"]["ekey"]) * 4
                  and ET.fromstring(body2).findtext("timeout") == "120")
            if auth:
                ok = ok and ips.findtext("hmac-algo") == auth and ips.findtext("akey-c2s/val") == sa2["c2s"]["akey"] \
                    and int(ips.findtext("akey-s2c/bits")) == abits[auth]
            else:
                ok = ok and ips.find("akey-c2s") is None
            check(ok, f"{suite}: <ipsec> block matches the sa file")
            check(sa2["generation"] == sa1["generation"] + 1 and sa2["c2s"]["spi"] != sa1["c2s"]["spi"]
                  and sa2["s2c"]["ekey"] != sa1["s2c"]["ekey"], f"{suite}: second getconfig = fresh SPIs and keys")
            check(open(hook_out).read().count('"generation"') == 2, f"{suite}: hook ran per getconfig")


def case_selftest_absurd_config():
    with Fake("--mtu", "0", "--netmask", "0.0.0.0", "--extra-routes", "10000", "--ip6", "fd00:200::2",
              "--route6", "fd00:200::/64", "--exclude", "10.200.9.0/24", "--dns", "10.0.0.1", "--dns", "10.0.0.2",
              "--search", "a.test", "--search", "b.test") as f:
        cookie = login(f, **{"ipv6-support": "yes"})
        _, _, body = post(f, "/ssl-vpn/getconfig.esp", {"ipv6-support": "yes", **cookie})
        root = ET.fromstring(body)
        check(root.findtext("mtu") == "0" and root.findtext("netmask") == "0.0.0.0", "MTU 0 and /0 netmask served")
        check(len(root.findall("access-routes/member")) == 10001, "10000 extra routes served")
        check(root.findtext("ip-address-v6") == "fd00:200::2" and
              [m.text for m in root.findall("access-routes-v6/member")] == ["fd00:200::/64"], "IPv6 address+route")
        check([m.text for m in root.findall("dns-suffix/member")] == ["a.test", "b.test"], "search domains")


def case_selftest_client_cert_and_admin():
    with Fake("--cert-only-login", "--gw-cookie-only") as f:
        status, _, body = post(f, "/ssl-vpn/prelogin.esp", {}, cert=True)
        cn = ET.fromstring(body).findtext("ccusername")
        check(status == 200 and cn, f"prelogin reports the client certificate subject ({cn})")
        status, _, _ = post(f, "/ssl-vpn/login.esp", {**LOGIN_FORM, "user": cn, "passwd": ""}, cert=True)
        check(status == 200, "client-certificate-only login accepted")
        status, _, _ = post(f, "/ssl-vpn/login.esp", LOGIN_FORM)
        check(status == 512, "without a certificate the password alone is refused")
        admin = http.client.HTTPConnection("127.0.0.1", f.admin_port, timeout=5)
        admin.request("GET", "/__stats")
        s = json.loads(admin.getresponse().read())
        check(s["login_via"] == {"client-certificate": 1} and s["tls_handshakes"] == 3, "/__stats serves the counters")
    with Fake("--require-client-cert") as f:
        try:
            post(f, "/ssl-vpn/prelogin.esp", {})
            raise Failure("handshake without certificate succeeded")
        except (ssl.SSLError, ConnectionError, OSError):
            pass
        s = f.stats_when(lambda s: s["tls_handshake_failures"] >= 1)
        check(s["tls_handshake_failures"] == 1, "required client cert: handshake without one fails, counted")


def case_selftest_keepalive_lifecycle():
    with Fake() as f:
        c = http.client.HTTPSConnection("127.0.0.1", f.port, context=client_ctx(), timeout=5)
        for _ in range(3):
            post(f, "/ssl-vpn/prelogin.esp", {}, conn=c)
        c.close()
        s = f.stats_when(lambda s: s["requests_per_connection"])
        check(s["tls_handshakes"] == 1 and s["requests_per_connection"] == [3], "3 requests on one connection")
    with Fake("--no-keepalive") as f:
        _, headers, _ = post(f, "/ssl-vpn/prelogin.esp", {})
        check(headers.get("Connection") == "close", "keep-alive off sends Connection: close")
    d = tempfile.mkdtemp(prefix="gpfake.")
    ready = os.path.join(d, "ready.json")
    p = subprocess.Popen([sys.executable, FAKE, "--ready-file", ready, "--max-runtime", "1"], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    check(line.startswith("fake-gp-gateway listening on 127.0.0.1:"), "prints the listening line")
    check(p.wait(10) == 3, "--max-runtime bound ends the process with exit 3")
    shutil.rmtree(d, ignore_errors=True)
    r = subprocess.run([sys.executable, FAKE, "--esp", "des-cbc"], capture_output=True, text=True, timeout=10)
    check(r.returncode != 0 and "unknown ESP suite" in r.stderr, "bad knob value gives a clear error")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: gp_fake_test.py CASE\ncases: " + " ".join(CASES))
        return 0 if len(sys.argv) == 2 and sys.argv[1] == "list" else 2
    name = sys.argv[1]
    if name.startswith("oc_") and not shutil.which("openconnect"):
        print("SKIP: openconnect not installed")
        return 77
    print(f"== {name}")
    try:
        rc = CASES[name]()
    except (Failure, subprocess.TimeoutExpired, OSError, ET.ParseError, KeyError) as e:
        print(f"FAIL: {name}: {e!r}")
        return 1
    if rc == 77:
        return 77
    print(f"PASS: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
