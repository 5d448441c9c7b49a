#!/usr/bin/env python3
"""espvpn --protocol=gp against tools/fake-gp-gateway: the whole login, end to end.

  gp_login_test.py ESPVPN CASE      (CASE = one of CASES below; "list" prints them)

Loopback only, ephemeral ports, every process bounded in time. The fake is the
independent peer (tests/integration/gp_fake/ proves it against openconnect); its
stats file is the witness for what reached the server (handshakes, logins, HIP,
logouts). Exit 0 = pass, 1 = fail, 77 = skipped.
"""

import base64
import json
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, CERTS, REPO, Failure, Fake, check, openconnect  # noqa: E402  (shared harness)

HIPREPORT = "/usr/libexec/openconnect/hipreport.sh"
ESPVPN = None
RUN_TIMEOUT = 40


def espvpn(url, args, stdin="", timeout=RUN_TIMEOUT, ca=True):
    # Connect runs here test the login only: --dry-run stops before the tunnel, so
    # no tun device is created outside a namespace (the tunnel has its own tests).
    dry = [] if {"--authenticate", "--cookieonly"} & set(args) else ["--dry-run"]
    cmd = [ESPVPN, "--protocol=gp", *(["--cafile", CA] if ca else []), *dry, *args, url]
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    start = time.monotonic()
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    r.elapsed = time.monotonic() - start
    print(f"  espvpn exit {r.returncode} after {r.elapsed:.2f} s")
    return r


def show(r):
    sys.stdout.write("  ---- stdout ----\n" + r.stdout + "  ---- stderr ----\n" + r.stderr)


def auth_lines(out):
    """Parses --authenticate output the way a shell's eval would (single quotes)."""
    lines = {}
    for line in out.splitlines():
        m = re.fullmatch(r"([A-Z_]+)=(.*)", line)
        if m:
            lines[m.group(1)] = shlex.split(m.group(2))[0] if m.group(2) else ""
    return lines


def expect_auth(r, user="alice"):
    if r.returncode != 0:
        show(r)
    check(r.returncode == 0, "espvpn --authenticate exits 0")
    lines = auth_lines(r.stdout)
    for k in ("COOKIE", "HOST", "CONNECT_URL", "FINGERPRINT", "RESOLVE"):
        check(k in lines, f"printed {k}=")
    check(re.search(r"(^|&)authcookie=[0-9a-f]{32}(&|$)", lines["COOKIE"]) and f"user={user}" in lines["COOKIE"],
          "COOKIE holds authcookie and user")
    check(lines["FINGERPRINT"].startswith("pin-sha256:"), "FINGERPRINT is a pin-sha256")
    return lines


def server_pin():
    """pin-sha256 of certs/server.pem computed by openssl (independent of espvpn)."""
    pub = subprocess.run(["openssl", "x509", "-in", os.path.join(CERTS, "server.pem"), "-pubkey", "-noout"],
                         capture_output=True, check=True, timeout=10).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, capture_output=True,
                         check=True, timeout=10).stdout
    import base64
    import hashlib
    return "pin-sha256:" + base64.b64encode(hashlib.sha256(der).digest()).decode()


def handshakes_per_listener(f):
    return {int(p): v.get("tls_handshakes", 0) for p, v in f.stats()["per_listener"].items()}


# ───────────────────────────── cases ─────────────────────────────

def case_portal_to_gateway():
    # Portal and gateway on one host: the whole login + getconfig + HIP + logout
    # is one TLS handshake.
    with Fake("--esp", "aes-128-cbc:sha1") as f:
        r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin"], "secret\n")
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "connect run (login, getconfig, HIP, logout) exits 0")
        # requests_per_connection: written once the fake has seen the connection close.
        s = f.stats_when(lambda s: s["requests_per_connection"])
        check(s["portal_config_ok"] == 1 and s["login_ok"] == 1 and s["login_via"] == {"password": 1},
              "portal getconfig, then the gateway accepted the replayed password (typed once)")
        check(s["getconfigs"] == 1 and s["hip_checks"] == 1 and s["logouts"] == 1, "getconfig, hipreportcheck, logout")
        check(s["tls_handshakes"] == 1 and s["requests_per_connection"] == [s["requests"]],
              f"exactly one TLS handshake for all {s['requests']} requests (keep-alive)")
        check("over 1 TLS handshake(s)" in r.stderr, "espvpn logs its handshake count at info")
        check("ESP: aes-128-cbc+sha1" in r.stderr and "SPI out 0x" in r.stderr, "ESP SA parameters kept and shown")
        check("dry run: not opening the tunnel" in r.stderr, "--dry-run stops before the tunnel")
    # Portal on one listener, gateway on another: one handshake per host.
    with Fake("--gateway", "1:1:second", listeners=2) as f:
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        check(lines["CONNECT_URL"] == f"https://127.0.0.1:{f.ports[1]}/", "CONNECT_URL is the portal's gateway")
        hs = handshakes_per_listener(f)
        check(hs == {f.ports[0]: 1, f.ports[1]: 1}, f"one TLS handshake per host (portal, gateway): {hs}")
    # Keep-alive off on the server: espvpn reconnects transparently.
    with Fake("--no-keepalive") as f:
        expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        s = f.stats()
        check(s["tls_handshakes"] == s["requests"] == 3, "server closes after each response: one handshake per request")


def case_direct_gateway():
    for url_suffix, extra in (("", ["--usergroup", "gateway"]), ("gateway", [])):
        with Fake() as f:
            expect_auth(espvpn(f.url + url_suffix, ["--authenticate", "-u", "alice", "--passwd-on-stdin", *extra],
                               "secret\n"))
            s = f.stats()
            check(not any(p.startswith("/global-protect/") for p in s["requests_by_path"]),
                  f"portal never contacted ({'URL path' if url_suffix else '--usergroup'})")
            check(s["requests_by_path"].get("/ssl-vpn/prelogin.esp") == 1 and s["login_ok"] == 1,
                  "gateway prelogin + login")
    with Fake("--no-portal") as f:
        expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        check(f.stats()["login_ok"] == 1, "'portal does not exist' → the same host as a gateway")
    with Fake("--no-portal") as f:
        r = espvpn(f.url + "portal", ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n")
        check(r.returncode == 1 and "portal does not exist" in r.stderr, "explicit portal: no fallback, clear error")


def case_challenge_rounds():
    # Two gateway rounds in two different shapes, answers one line each from stdin.
    for forms in (("xml", "html"), ("js", "xml")):
        with Fake("--gw-otp", f"{forms[0]}:111111", "--gw-otp", f"{forms[1]}:222222") as f:
            expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway"],
                               "secret\n111111\n222222\n"))
            s = f.stats()
            check(s["challenges_sent"] == 2 and s["login_via"] == {"password+otp+2otp": 1},
                  f"two challenge rounds ({'+'.join(forms)}) answered")
    # Portal challenge: no blind replay (OC's rule), so the gateway asks again.
    with Fake("--portal-otp", "js:333333") as f:
        expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice"], "secret\n333333\nsecret\n"))
        s = f.stats()
        check(s["portal_config_ok"] == 1 and s["login_ok"] == 1 and s["challenges_sent"] == 1,
              "portal OTP answered, then the gateway login")
    with Fake("--gw-otp", "js:111111") as f:
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway"], "secret\n999999\n")
        check(r.returncode == 2 and f.stats()["login_ok"] == 0 and "Invalid username or password" in r.stderr,
              "wrong OTP: exit 2 with the server's reason")
    with Fake("--gw-otp", "xml:111111") as f:
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--usergroup", "gateway", "--non-inter",
                           "--passwd-on-stdin"], "secret\n")
        check(r.returncode == 1 and "--non-inter" in r.stderr, "--non-inter: a challenge is a clear error")


def case_portal_cookie():
    with Fake("--portal-cookie", "--gw-cookie-only", "--portal-otp", "xml:123456") as f:
        expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice"], "secret\n123456\n"))
        s = f.stats()
        check(s["login_via"] == {"portal-userauthcookie": 1},
              "gateway logged in by portal-userauthcookie after a portal OTP (password typed once)")


def case_saml_handoff():
    with Fake("--gw-saml", "REDIRECT", "--saml-cookie", "SAML-OK-42") as f:
        # A gp-saml-gui style helper: it finishes the IdP round trip, reads the
        # ACS headers, and pipes the cookie in.
        with urllib.request.urlopen(f"https://127.0.0.1:{f.port}/SAML20/SP/ACS?user=alice",
                                    context=ssl.create_default_context(cafile=CA), timeout=10) as resp:
            cookie, user = resp.headers["prelogin-cookie"], resp.headers["saml-username"]
        lines = expect_auth(espvpn(f.url + "gateway:prelogin-cookie",
                                   ["--authenticate", "-u", user, "--passwd-on-stdin"], cookie + "\n"))
        check(f.stats()["login_via"] == {"saml": 1}, "gateway accepted the prelogin-cookie (URL path form)")
        check(cookie not in lines["COOKIE"], "the SAML cookie is not the session cookie")
    with Fake("--gw-saml", "REDIRECT", "--saml-cookie", "SAML-OK-42") as f:
        # No display, no browser option: the IdP URL is printed and the globalprotectcallback:
        # URL (base64 of the ACS body) pasted on stdin finishes the login (docs/SSO.md).
        with urllib.request.urlopen(f"https://127.0.0.1:{f.port}/SAML20/SP/ACS?user=alice",
                                    context=ssl.create_default_context(cafile=CA), timeout=10) as resp:
            callback = "globalprotectcallback:" + base64.b64encode(resp.read()).decode()
        env_display = {k: os.environ.pop(k) for k in ("DISPLAY", "WAYLAND_DISPLAY") if k in os.environ}
        try:
            r = espvpn(f.url, ["--authenticate", "--usergroup", "gateway"], callback + "\n")
        finally:
            os.environ.update(env_display)
        expect_auth(r)
        check(f"https://127.0.0.1:{f.port}/SAML20/SP/ACS" in r.stderr,
              "SAML detected in prelogin: the IdP URL is printed for a browser")
        check(f.stats()["login_via"] == {"saml": 1}, "the pasted globalprotectcallback: URL logged in")
        check(callback.split(":", 1)[1][:24] not in r.stderr + r.stdout, "the callback URL is not echoed")
    with Fake("--gw-saml", "REDIRECT", "--saml-cookie", "SAML-OK-42") as f:
        # openconnect's spelling for a SAML helper: -u USER --passwd-on-stdin, the cookie as password.
        expect_auth(espvpn(f.url, ["--authenticate", "--usergroup", "gateway", "-u", "alice", "--passwd-on-stdin"],
                           "SAML-OK-42\n"))
        check(f.stats()["login_via"] == {"saml": 1}, "-u and the prelogin-cookie on stdin (manual hand-off)")
    with Fake("--portal-saml", "REDIRECT", "--saml-cookie", "SAML-PORTAL-77", "--portal-cookie",
              "--gw-cookie-only") as f:
        expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--usergroup", "portal:prelogin-cookie",
                                   "--passwd-on-stdin"], "SAML-PORTAL-77\n"))
        check(f.stats()["login_via"] == {"portal-userauthcookie": 1},
              "portal SAML, then the gateway by the portal's cookie (--usergroup portal:prelogin-cookie)")


def case_client_cert():
    for label, cert_args in (("PEM", ["-c", os.path.join(CERTS, "client.pem"), "-k", os.path.join(CERTS, "client-key.pem")]),
                             ("PKCS#12", ["-c", os.path.join(CERTS, "client.p12"), "-p", "espvpn-p12"])):
        with Fake("--cert-only-login", "--client-ca", CA) as f:
            r = espvpn(f.url, ["--authenticate", "--usergroup", "gateway", "--non-inter", *cert_args], "")
            lines = auth_lines(r.stdout)
            if r.returncode != 0:
                show(r)
            check(r.returncode == 0 and "COOKIE" in lines, f"{label}: certificate-only login, no prompt")
            s = f.stats()
            check(s["login_via"] == {"client-certificate": 1} and s["client_certs"],
                  f"{label}: the gateway logged in by the certificate ({s['client_certs'][:1]})")
        with Fake("--client-ca", CA, "--require-client-cert") as f:
            r = espvpn(f.url, ["--authenticate", "--usergroup", "gateway", "--no-passwd", *cert_args], "")
            check(r.returncode == 1 and "--no-passwd" in r.stderr,
                  f"{label}: gateway not in certificate-only mode: the password prompt fails under --no-passwd")
    with Fake("--client-ca", CA, "--require-client-cert", "--user", "testuser:pw9") as f:
        cert = ["-c", os.path.join(CERTS, "client.pem"), "-k", os.path.join(CERTS, "client-key.pem")]
        r = espvpn(f.url, ["--authenticate", "--usergroup", "gateway", *cert], "pw9\n")
        check(r.returncode == 0 and f.stats()["login_via"] == {"password": 1} and f.stats()["login_failed"] == 1,
              "certificate alone refused → user from the certificate, password asked once, login ok")
    with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
        r = espvpn(f.url, ["--authenticate", "--usergroup", "gateway", "--non-inter"], "")
        check(r.returncode == 1, "without a certificate the required client auth fails (exit 1)")


def case_wrong_password():
    with Fake() as f:
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "wrong\n")
        check(r.returncode == 2, "exit 2: credentials rejected")
        check("COOKIE=" not in r.stdout, "no cookie printed")
        check("Invalid username or password" in r.stderr and "512" in r.stderr,
              "message names the server's reason and HTTP 512")
        check(f.stats()["login_failed"] == 1, "the fake refused one login")


def case_pin_mismatch():
    pin = server_pin()
    wrong = "pin-sha256:" + "A" * 43 + "="
    with Fake() as f:
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--servercert", wrong],
                   "secret\n", ca=False)
        check(r.returncode == 1 and "COOKIE=" not in r.stdout, "wrong pin: refused, exit 1")
        check(pin in r.stderr, "the error prints the pin the user would need (computed by openssl)")
        check(f.stats()["login_ok"] == 0 and not f.stats()["requests_by_path"], "no request reached the server")
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--no-system-trust"],
                   "secret\n", ca=False)
        check(r.returncode == 1 and pin in r.stderr, "untrusted CA: refused, pin printed")
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--servercert",
                                           pin, "--no-system-trust"], "secret\n", ca=False))
        check(lines["FINGERPRINT"] == pin, "--servercert pin match: accepted without any CA; FINGERPRINT = that pin")


def case_stalled_server():
    for mode in ("headers", "silent"):
        with Fake("--stall", f"/ssl-vpn/login.esp={mode}") as f:
            r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--http-timeout", "2"],
                       "secret\n")
            check(r.returncode == 1 and "COOKIE=" not in r.stdout, f"stall ({mode}): exit 1")
            check(re.search(r"tim(ed out|eout)", r.stderr, re.I) and "login.esp" in r.stderr,
                  f"stall ({mode}): the error says timeout and names the request")
            # The bound tells the configured 2 s from the default 30 s (--http-timeout ignored);
            # the run also holds the process start and the requests before the stalled one.
            check(r.elapsed < 15, f"stall ({mode}): gave up after {r.elapsed:.1f} s (configured 2 s, default 30 s)")


def case_malformed_xml():
    for path, what in (("/ssl-vpn/getconfig.esp", "getconfig"), ("/global-protect/getconfig.esp", "portal login"),
                       ("/ssl-vpn/login.esp", "gateway login")):
        with Fake("--malformed", path) as f:
            r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin"], "secret\n")
            check(r.returncode == 1, f"malformed {path}: exit 1")
            m = re.search(r"error: .*", r.stderr)
            check(m and what in m.group(0) and "unusable reply" in m.group(0),
                  f"malformed {path}: clear error: {m.group(0) if m else r.stderr[-200:]!r}")


def case_hip_needed():
    with Fake("--hip-needed") as f:
        r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin"], "secret\n")
        check(r.returncode == 0, "connect run exits 0")
        s = f.stats()
        check(s["hip_checks"] == 1 and s["hip_reports"] == 1 and s["hip_report_valid_xml"] == 1,
              "built-in generator: one well-formed report sent")
        check(re.fullmatch(r"[0-9a-f]{32}", s["hip_report_md5"][0] or ""), "report carries the md5 of the check")
        check("HIP: report sent (built-in generator)" in r.stderr, "logged")
    if not os.access(HIPREPORT, os.X_OK):
        print(f"  (skipping --csd-wrapper part: {HIPREPORT} missing)")
        return
    with Fake("--hip-needed") as f:
        r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin", "--csd-wrapper", HIPREPORT], "secret\n")
        s = f.stats()
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0 and s["hip_reports"] == 1 and s["hip_report_valid_xml"] == 1,
              "--csd-wrapper openconnect's hipreport.sh: its report sent")
    with Fake("--hip-needed") as f:
        r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin", "--csd-wrapper", "/bin/false"], "secret\n")
        check(r.returncode == 1 and "exited with status 1" in r.stderr and f.stats()["logouts"] == 1,
              "a failing wrapper is a clear error, and the session is still logged out")


def case_logout():
    with Fake() as f:
        r = espvpn(f.url, ["-u", "alice", "--passwd-on-stdin"], "secret\n")
        s = f.stats()
        check(r.returncode == 0 and s["logouts"] == 1 and "logged out" in r.stderr, "logout.esp sent and accepted")
        check(s["tls_handshakes"] == 1, "logout reused the login's TLS connection")


def case_cookie_handoff():
    # espvpn --authenticate output, eval'd by a shell, fed to espvpn --cookie-on-stdin.
    with Fake("--esp", "aes-256-cbc:sha256") as f:
        script = (f"eval \"$({shlex.quote(ESPVPN)} --protocol=gp --cafile {CA} --authenticate -u alice "
                  f"--passwd-on-stdin {f.url} <<< secret)\" && "
                  f"echo \"$COOKIE\" | {shlex.quote(ESPVPN)} --protocol=gp --dry-run --cookie-on-stdin --servercert "
                  f"\"$FINGERPRINT\" --resolve \"$RESOLVE\" \"$CONNECT_URL\"")
        print("  $ bash -c " + shlex.quote(script))
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=RUN_TIMEOUT)
        s = f.stats()
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "shell eval of --authenticate + --cookie-on-stdin exits 0")
        check(s["login_ok"] == 1 and s["getconfigs"] == 1 and s["logouts"] == 1,
              "one login; the cookie run did getconfig and logout without logging in again")
    # COOKIE='...' line as printed also accepted; -C too.
    with Fake() as f:
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        r = espvpn(lines["CONNECT_URL"], ["--cookie-on-stdin"], f"COOKIE={shlex.quote(lines['COOKIE'])}\n")
        check(r.returncode == 0 and f.stats()["getconfigs"] == 1, "a whole COOKIE='...' line is accepted")
        r = espvpn(lines["CONNECT_URL"], ["-C", lines["COOKIE"]])
        check(r.returncode == 2 and "no longer valid" in r.stderr,
              "-C with the logged-out cookie: rejected, exit 2 (the first run logged out)")
    # openconnect's cookie works in espvpn, and espvpn's in openconnect.
    if subprocess.run(["which", "openconnect"], capture_output=True).returncode != 0:
        print("  (openconnect missing: skipping the cross-checks)")
        return
    with Fake("--no-tunnel") as f:
        oc = subprocess.run(["openconnect", "--protocol=gp", "--cafile", CA, "--authenticate", "-u", "alice",
                             "--passwd-on-stdin", f.url], input="secret\n", capture_output=True, text=True,
                            timeout=RUN_TIMEOUT)
        oc_lines = auth_lines(oc.stdout)
        r = espvpn(oc_lines["CONNECT_URL"], ["--cookie-on-stdin"], oc_lines["COOKIE"] + "\n")
        check(r.returncode == 0 and f.stats()["getconfigs"] == 1, "openconnect's COOKIE accepted by espvpn")
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        oc = subprocess.run(["openconnect", "--protocol=gp", "--cafile", CA, "--cookie-on-stdin", "--no-dtls",
                             "--script", "true", lines["CONNECT_URL"]], input=lines["COOKIE"] + "\n",
                            capture_output=True, text=True, timeout=RUN_TIMEOUT)
        s = f.stats()
        check(s["getconfigs"] == 2 and oc.returncode == 2,
              "espvpn's COOKIE accepted by openconnect (getconfig ok; the fake's tunnel answers 502 → exit 2)")


def case_expired_cookie():
    with Fake("--cookie-max-age", "1") as f:
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        time.sleep(1.5)
        r = espvpn(lines["CONNECT_URL"], ["--cookie-on-stdin"], lines["COOKIE"] + "\n")
        check(r.returncode == 2, "expired cookie: exit 2")
        check("Invalid authentication cookie" in r.stderr, "message names the server's reason")
        check(f.stats()["expired_cookie_rejections"] == 1, "the fake rejected it as expired")


def case_gateway_choice():
    with Fake("--gateway", "0:5:far", "--gateway", "1:1:near", listeners=2) as f:
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin"], "secret\n"))
        check(lines["CONNECT_URL"] == f"https://127.0.0.1:{f.ports[1]}/", "lowest priority value wins ('near')")
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--authgroup", "far"],
                                   "secret\n"))
        check(lines["CONNECT_URL"] == f"https://127.0.0.1:{f.ports[0]}/", "--authgroup far picks 'far'")
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--authgroup", "nowhere"], "secret\n")
        check(r.returncode == 1 and "far" in r.stderr and "near" in r.stderr, "unknown --authgroup lists the choices")
    # Latency: the preferred gateway accepts TCP but never speaks TLS; the probe
    # gives up on it within its budget and the live one is chosen.
    black_hole = socket.socket()
    black_hole.bind(("127.0.0.1", 0))
    black_hole.listen(8)
    try:
        hole = black_hole.getsockname()[1]
        cfg = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump({"portal": {"gateways": [
            {"name": f"127.0.0.1:{hole}", "description": "black-hole", "priority": 1},
            {"listener": 0, "description": "alive", "priority": 2}]}}, cfg)
        cfg.close()
        with Fake("--config", cfg.name) as f:
            r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--gateway-select=latency"],
                       "secret\n")
            sys.stdout.write("  ---- espvpn stderr ----\n" + r.stderr)
            lines = expect_auth(r)
            check(lines["CONNECT_URL"] == f"https://127.0.0.1:{f.port}/", "latency choice: the live gateway")
            # Given up by the latency budget, or by its own handshake timeout when that fires first
            # (both are 3 s: on a loaded machine either may win).
            check("black-hole" in r.stderr and ("no TLS connect within" in r.stderr or
                                                "timed out in the TLS handshake" in r.stderr),
                  "the silent one was given up on")
            check(r.elapsed < 3 + 7, f"bounded: whole login took {r.elapsed:.1f} s (probe budget 3 s)")
            pl = re.findall(r"alive .*TLS connect in ([0-9.]+) ms", r.stderr)
            print(f"  MEASURED TLS connect latency to the live gateway: {pl[0] if pl else '?'} ms")
        os.unlink(cfg.name)
    finally:
        black_hole.close()


def case_secrets_not_logged():
    password, otp1, otp2 = "Pw-7f3k9Q-unique", "918273", "564738"
    with Fake("--user", f"alice:{password}", "--portal-otp", f"xml:{otp1}", "--gw-otp", f"js:{otp2}",
              "--portal-cookie", "--esp", "aes-128-cbc:sha1", "--hip-needed") as f:
        sa_file = os.path.join(f.dir, "sa.json")
        r = espvpn(f.url, ["--authenticate", "-vvv", "--dump-http-traffic", "-u", "alice"],
                   f"{password}\n{otp1}\n{otp2}\n")
        lines = expect_auth(r)
        authcookie = re.search(r"authcookie=([0-9a-f]+)", lines["COOKIE"]).group(1)
        check("> body: " in r.stderr and "passwd=<redacted>" in r.stderr, "traffic dump ran, with redaction")
        for name, value in (("password", password), ("OTP 1", otp1), ("OTP 2", otp2), ("authcookie", authcookie)):
            check(value not in r.stderr, f"--authenticate -vvv: {name} not in the log")
        check(password not in r.stdout and otp1 not in r.stdout, "stdout has only the COOKIE etc.")
    with Fake("--esp", "aes-128-cbc:sha1", "--hip-needed", "--sa-file", os.path.join(tempfile.gettempdir(),
              f"gplogin-sa-{os.getpid()}.json")) as f:
        sa_path = os.path.join(tempfile.gettempdir(), f"gplogin-sa-{os.getpid()}.json")
        r = espvpn(f.url, ["-vvv", "--dump-http-traffic", "-u", "alice", "--passwd-on-stdin", "--printcookie"],
                   "secret\n")
        check(r.returncode == 0, "connect run at -vvv exits 0")
        authcookie = re.search(r"authcookie=([0-9a-f]+)", r.stdout).group(1)
        with open(sa_path) as fh:
            sa = json.load(fh)
        os.unlink(sa_path)
        keys = [sa[d][k] for d in ("c2s", "s2c") for k in ("ekey", "akey") if sa[d][k]]
        check(len(keys) == 4, "the fake's SA file gives the 4 ESP keys to look for")
        everything = r.stdout.replace(f"authcookie={authcookie}", "", 1) + r.stderr
        check(authcookie not in everything, "authcookie only in the one --printcookie line")
        check(all(k.lower() not in everything.lower() for k in keys), "no ESP key in any output")
        check("getconfig.esp" in r.stderr and "hipreport.esp" in r.stderr and "logout.esp" in r.stderr,
              "the dump covered getconfig, HIP report and logout")


def case_tty_prompt():
    """On a terminal: user name echoed, password read from /dev/tty with echo off."""
    import pty
    import select
    import termios
    # Under strace, each ioctl (tcgetattr/tcsetattr among them) waits 300 ms, as on a slow
    # machine: echo must be off before the prompt shows, or what the user types right after
    # it is echoed (and flushed by the echo-off switch). Without strace, as it comes.
    slow = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=ioctl", "-e", "inject=ioctl:delay_enter=300000"]
    if not shutil.which("strace"):
        slow = []
    # LeakSanitizer's exit check ptraces the process, which strace already does: off for this run.
    asan = "__asan_init" in subprocess.run(["readelf", "--dyn-syms", "-W", ESPVPN], capture_output=True,
                                           text=True).stdout
    child_env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0") \
        if asan and slow else None
    with Fake("--user", "alice:pty-pass-123") as f:
        cmd = [*slow, ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway", f.url]
        print("  $ (on a pty) " + " ".join(cmd))
        pid, fd = pty.fork()
        if pid == 0:
            if child_env:
                os.execvpe(cmd[0], cmd, child_env)
            os.execvp(cmd[0], cmd)
        out = b""
        echo_at_password = None
        deadline = time.monotonic() + 20
        sent_user = sent_password = False
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.2)
                if ready:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
                if not sent_user and b"Username:" in out:
                    os.write(fd, b"alice\n")
                    sent_user = True
                if sent_user and not sent_password and b"Password:" in out:
                    # At once, as a user types after the prompt: echo must be off already
                    # (and what is typed now must not be flushed by the echo-off switch).
                    echo_at_password = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
                    os.write(fd, b"pty-pass-123\n")
                    sent_password = True
        finally:
            # Bounded: an espvpn still waiting for its password (it was flushed) is killed.
            end = time.monotonic() + 5
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done or time.monotonic() > end:
                    break
                time.sleep(0.05)
            if not done:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
            os.close(fd)
        text = out.decode(errors="replace")
        print("  ---- pty transcript ----\n" + text.replace("\r", ""))
        check(sent_user and sent_password, "prompted for Username: and Password: on the terminal")
        check(echo_at_password is False, "echo was off while the password was typed")
        check("pty-pass-123" not in text, "the password never appeared on the terminal")
        check("alice" in text, "the user name was echoed as typed")
        check(os.WEXITSTATUS(status) == 0 and f.stats()["login_ok"] == 1 and "COOKIE=" in text,
              "the typed password reached the server intact: login ok, exit 0")


def case_measure_vs_openconnect():
    """Login time and handshakes, espvpn vs openconnect --authenticate (reported, not asserted)."""
    if subprocess.run(["which", "openconnect"], capture_output=True).returncode != 0:
        print("SKIP: openconnect missing")
        return 77
    rows = []
    for name, cmd in (("espvpn", [ESPVPN, "--protocol=gp"]), ("openconnect", ["openconnect", "--protocol=gp"])):
        for run in range(3):
            with Fake() as f:
                start = time.monotonic()
                r = subprocess.run([*cmd, "--cafile", CA, "--authenticate", "-u", "alice", "--passwd-on-stdin",
                                    f.url], input="secret\n", capture_output=True, text=True, timeout=RUN_TIMEOUT)
                ms = (time.monotonic() - start) * 1000
                s = f.stats()
                check(r.returncode == 0, f"{name} run {run + 1} ok")
                rows.append((name, ms, s["tls_handshakes"], s["requests"]))
    for name in ("espvpn", "openconnect"):
        mine = [r for r in rows if r[0] == name]
        print(f"  MEASURED {name}: portal+gateway --authenticate "
              f"min {min(r[1] for r in mine):.0f} ms / median {sorted(r[1] for r in mine)[1]:.0f} ms, "
              f"tls_handshakes={mine[0][2]} requests={mine[0][3]}")


# ───────────── openconnect's login options (issue 17: 1, 2, 3, 8), each beside openconnect 9.01 ─────────────

TOTP_KEY = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"  # base32 of RFC 6238's "12345678901234567890"


def same_as_openconnect(url, args, stdin, want_rc, what):
    """Runs espvpn and openconnect 9.01 with the same command line; both must exit want_rc."""
    r = espvpn(url, ["--authenticate", *args], stdin)
    if r.returncode != want_rc:
        show(r)
    check(r.returncode == want_rc, f"espvpn: {what}: exit {want_rc}")
    if not shutil.which("openconnect"):
        print("  (openconnect not installed: comparison skipped)")
        return r, None
    o = openconnect(url, ["--authenticate", *args], stdin)
    check(o.returncode == want_rc, f"openconnect 9.01: {what}: exit {want_rc} too (got {o.returncode})")
    return r, o


def case_passwd_on_stdin():
    base = ["-u", "alice", "--passwd-on-stdin", "--non-inter"]
    with Fake() as f:
        r, _ = same_as_openconnect(f.url, base, "secret\n", 0, "--passwd-on-stdin --non-inter, password only")
        check("COOKIE=" in r.stdout, "a cookie printed")
        # The first line is the password even when the user name is asked first (read up front, as openconnect).
        r, o = same_as_openconnect(f.url, ["--passwd-on-stdin", "--non-inter"], "secret\nalice\n", 0,
                                   "no -u: line 1 = password, line 2 = the user name prompt")
        check("user=alice" in r.stdout, "logged in as alice")
        r, _ = same_as_openconnect(f.url, ["-u", "alice", "--non-inter"], "secret\n", 1,
                                   "--non-inter without --passwd-on-stdin: the password prompt fails")
        check("'Password:'" in r.stderr and "--non-inter" in r.stderr, "the error names the prompt and --non-inter")
    with Fake("--gw-otp", "xml:111111") as f:
        r, _ = same_as_openconnect(f.url, base, "secret\n111111\n", 0, "further stdin lines answer the OTP challenge")
        check(f.stats()["login_via"].get("password+otp+1otp", 0) >= 1, "the challenge was answered from stdin")
        r, o = same_as_openconnect(f.url, base, "secret\n", 1, "stdin ends before the OTP: fails")
        check("Enter response 1 of 1 from your token" in r.stderr and "--non-inter" in r.stderr,
              "the error names the challenge prompt")
        check(o is None or "User input required in non-interactive mode" in o.stderr, "(openconnect says the same)")
        # Without --non-inter, stdin at its end is also the end (openconnect: fgets (stdin) error, exit 1).
        same_as_openconnect(f.url, ["-u", "alice", "--passwd-on-stdin"], "secret\n", 1, "no --non-inter, stdin ends")
    # Portal and gateway on different hosts: the portal's password is replayed; one line is enough.
    with Fake("--gateway", "1:1:second", listeners=2) as f:
        same_as_openconnect(f.url, [*base, "--authgroup", "second"], "secret\n", 0, "portal then gateway, one password")


def fingerprints(pem):
    """The four --servercert spellings of a certificate, computed by openssl (independent of espvpn)."""
    import base64
    import hashlib
    der = subprocess.run(["openssl", "x509", "-in", pem, "-outform", "der"], capture_output=True, check=True,
                         timeout=10).stdout
    pub = subprocess.run(["openssl", "x509", "-in", pem, "-pubkey", "-noout"], capture_output=True, check=True,
                         timeout=10).stdout
    spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub, capture_output=True,
                          check=True, timeout=10).stdout
    return {"pin-sha256": base64.b64encode(hashlib.sha256(spki).digest()).decode(),
            "sha256": hashlib.sha256(spki).hexdigest(), "sha1": hashlib.sha1(spki).hexdigest(),
            "cert": hashlib.sha1(der).hexdigest()}


def case_servercert():
    fp = fingerprints(os.path.join(CERTS, "server.pem"))
    flip = lambda c: "0" if c != "0" else "1"  # noqa: E731  (a different first hex digit)
    good = [f"pin-sha256:{fp['pin-sha256']}", f"pin-sha256:{fp['pin-sha256'][:6]}", f"sha256:{fp['sha256']}",
            f"sha256:{fp['sha256'][:8].upper()}", f"sha1:{fp['sha1'][:4]}", f"sha1:{fp['sha1'].upper()}",
            fp["cert"], fp["cert"][:10].upper()]
    bad = [f"sha256:{flip(fp['sha256'][0])}{fp['sha256'][1:8]}", f"sha1:{fp['cert'][:8]}",  # the cert's, not the key's
           f"{fp['sha1'][:8]}",  # the key's SHA-1 given bare: bare hex is the certificate's
           f"pin-sha256:{'B' if fp['pin-sha256'][0] == 'A' else 'A'}{fp['pin-sha256'][1:6]}"]
    args = ["-u", "alice", "--passwd-on-stdin"]
    # Bits a pin fixes: 4 a hex digit, 6 a base64 one (no padding), at most the digest's.
    bits = lambda pin: min(len(pin.split(":")[-1].rstrip("=")) * (6 if pin.startswith("pin-") else 4),  # noqa: E731
                           256 if "256" in pin else 160)
    with Fake() as f:
        for pin in good:
            r = espvpn(f.url, ["--authenticate", *args, "--servercert", pin], "secret\n", ca=False)
            if r.returncode:
                show(r)
            check(r.returncode == 0, f"--servercert {pin}: accepted (no CA given)")
            # Accepted as openconnect does, but a pin under 128 bits is never silent.
            warned = re.search(r"WARNING: --servercert \S+ pins only (\d+) bits", r.stderr)
            if bits(pin) < 128:
                check(warned and int(warned.group(1)) == bits(pin), f"--servercert {pin}: a WARNING naming {bits(pin)} bits")
            else:
                check(not warned and "WARNING" not in r.stderr, f"--servercert {pin}: a full pin, no warning")
        for pin in bad:
            r = espvpn(f.url, ["--authenticate", *args, "--servercert", pin], "secret\n", ca=False)
            check(r.returncode == 1 and "COOKIE=" not in r.stdout, f"--servercert {pin}: refused, exit 1")
            for form in (f"pin-sha256:{fp['pin-sha256']}", f"sha256:{fp['sha256']}", f"sha1:{fp['sha1']}", fp["cert"]):
                check(form in r.stderr, f"the mismatch error prints {form[:20]}... to paste")
        check(f.stats()["login_ok"] == len(good), "only the matching runs logged in")
        r = espvpn(f.url, ["--authenticate", *args, "--servercert", bad[0], "--servercert", good[4]], "secret\n", ca=False)
        check(r.returncode == 0, "several --servercert: one of them matching is enough")
        r = espvpn(f.url, ["--authenticate", *args, "--servercert", "sha1:abc"], "secret\n", ca=False)
        check(r.returncode == 1 and "from 4 to 40 characters" in r.stderr, "a 3-character prefix: refused, says why")
        r = espvpn(f.url, ["--authenticate", *args, "--servercert", "md5:0011"], "secret\n", ca=False)
        check(r.returncode == 1 and "unknown fingerprint type" in r.stderr, "an unknown type: refused, says why")
        if shutil.which("openconnect"):
            for pin, rc in ((good[4], 0), (good[7], 0), (bad[0], 1), (bad[1], 1)):
                cmd = ["openconnect", "--protocol=gp", "--authenticate", *args, "--servercert", pin, f.url]
                o = subprocess.run(cmd, input="secret\n", capture_output=True, text=True, timeout=RUN_TIMEOUT)
                check(o.returncode == rc, f"openconnect 9.01 --servercert {pin}: exit {rc} as espvpn")


def case_argv_and_dump():
    """Secrets given on the command line leave /proc/PID/cmdline once parsed (every spelling
    getopt takes), and the process is not dumpable: /proc/PID belongs to root even when espvpn
    runs as another user (so no other user may read it or ptrace it)."""
    forms = ["-F", "_login:passwd=SECRETX1", "--form-entry=_challenge:passwd=SECRETX2", "-vF_x:y=SECRETX3",
             "--form-e", "_z:w=SECRETX4", "--key-password=SECRETX5", "-pSECRETX6"]
    as_other = os.geteuid() == 0 and shutil.which("setpriv")
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_other else []
    with Fake("--delay", "/global-protect/prelogin.esp=3") as f:
        p = subprocess.Popen([*prefix, ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "-u", "alice",
                              "--non-inter", *forms, f.url],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Its first request (held 3 s by the fake) says it is past option parsing.
            asked = f.stats_when(lambda s: s["requests"] > 0)["requests"]
            with open(f"/proc/{p.pid}/cmdline", "rb") as c:
                cmdline = c.read()
            owner = os.stat(f"/proc/{p.pid}/status").st_uid
            with open(f"/proc/{p.pid}/status") as st:
                uid = int(re.search(r"^Uid:\s+(\d+)", st.read(), re.M).group(1))
        finally:
            p.kill()
            p.wait()
    print(f"  cmdline {cmdline!r}; /proc/PID owner {owner}, uid {uid}")
    check(asked > 0, "espvpn reached the fake (past option parsing) before its argv was read")
    check(b"SECRETX" not in cmdline, "no -F / --form-entry / --key-password / -p value left in /proc/PID/cmdline")
    check(b"_login:passwd=" in cmdline and b"--form-entry=_challenge:passwd=" in cmdline,
          "the form and field names stay readable")
    if as_other:
        check(uid == 65534, "espvpn ran as nobody")
        check(owner == 0, "espvpn is not dumpable: its /proc files belong to root, not to its user")
    else:
        print("  (not root or no setpriv: the non-dumpable check needs espvpn as another user)")


def case_server_text_escaped():
    """A gateway's prompt with terminal escapes (set the window title, clear the screen) reaches
    stderr as visible \\xHH text, never as the control characters themselves."""
    evil = "Code\x1b]0;pwned\x07 please\x1b[2J\u009b2J"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cfg:
        json.dump({"gateway": {"challenges": [{"form": "js", "answer": "111111", "message": evil}]}}, cfg)
    try:
        with Fake("--config", cfg.name) as f:
            # The challenge cannot be answered (--non-inter, no more input): the error names the prompt.
            r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--non-inter"], "secret\n")
    finally:
        os.unlink(cfg.name)
    show(r)
    check(r.returncode == 1, "the unanswered challenge ends the login, exit 1")
    check("Code\\x1b]0;pwned\\x07 please\\x1b[2J" in r.stderr, "the prompt is shown with its escapes made visible")
    check("\\xc2\\x9b2J" in r.stderr, "a C1 control (U+009B, CSI) is made visible too")
    check(not re.search(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]", r.stderr), "no control character reaches stderr")


def case_form_entry():
    with Fake("--gw-otp", "xml:111111") as f:
        # Every field from -F, stdin closed: openconnect's GP form names (_login, _challenge).
        r, _ = same_as_openconnect(f.url, ["--non-inter", "-F", "_login:user=alice", "-F", "_login:passwd=secret",
                                           "-F", "_challenge:passwd=111111"], "", 0, "-F fills user, password, OTP")
        check("user=alice" in r.stdout, "the user from -F _login:user")
        # -F for another form changes nothing: the prompt still fails under --non-inter.
        r, _ = same_as_openconnect(f.url, ["--non-inter", "-u", "alice", "-F", "main:passwd=secret"], "", 1,
                                   "-F main:passwd does not answer GP's _login form")
        # -F answers the challenge, stdin only the password.
        same_as_openconnect(f.url, ["-u", "alice", "--passwd-on-stdin", "--non-inter", "-F", "_challenge:passwd=111111"],
                            "secret\n", 0, "--passwd-on-stdin + -F _challenge:passwd")
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "-F", "_challenge:passwd=999999"],
                   "secret\n")
        check(r.returncode != 0 and f.stats()["login_failed"] >= 1, "a wrong -F OTP reached the server (refused)")
    # _portal:gateway picks the gateway as --authgroup does (openconnect's portal form).
    with Fake("--gateway", "0:1:first", "--gateway", "1:2:second", listeners=2) as f:
        lines = expect_auth(espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin",
                                           "-F", "_portal:gateway=second"], "secret\n"))
        check(lines["CONNECT_URL"] == f"https://127.0.0.1:{f.ports[1]}/", "-F _portal:gateway=second chose it")
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "-F", "_portal:gateway=nosuch"],
                   "secret\n")
        check(r.returncode == 1 and "names no gateway" in r.stderr, "an unknown gateway: clear error")


def case_soft_token():
    totp = ["--token-mode=totp", "--token-secret", f"base32:{TOTP_KEY}"]
    with Fake("--gw-otp", f"xml:totp:{TOTP_KEY}") as f:
        r, _ = same_as_openconnect(f.url, ["-u", "alice", "--passwd-on-stdin", "--non-inter", *totp], "secret\n", 0,
                                   "TOTP answers the challenge, no human")
        s = f.stats()
        check(s["otp_codes_ok"] >= 1 and not s.get("otp_codes_bad"), "the fake verified a real TOTP code")
        # The same key in openconnect's other spellings.
        for secret in ("0x3132333435363738393031323334353637383930", "12345678901234567890", f"sha1:base32:{TOTP_KEY}"):
            r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--non-inter",
                               "--token-mode=totp", "--token-secret", secret], "secret\n")
            check(r.returncode == 0, f"--token-secret {secret[:12]}...: accepted by the fake")
        bad = f.stats().get("otp_codes_bad", 0)
        r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--non-inter", "--token-mode=totp",
                           "--token-secret", "base32:GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJR"], "secret\n")
        check(r.returncode != 0 and f.stats()["otp_codes_bad"] == bad + 1, "a wrong key's code: refused by the fake")
        check("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJR" not in r.stderr, "the secret is not logged")
    with tempfile.TemporaryDirectory() as d, Fake("--gw-otp", f"xml:hotp:{TOTP_KEY}") as f:
        tok = os.path.join(d, "token")
        with open(tok, "w") as t:
            t.write(f"base32:{TOTP_KEY.lower()},0\n")
        hotp = ["-u", "alice", "--passwd-on-stdin", "--non-inter", "--token-mode=hotp", "--token-secret", "@" + tok]
        for run in (1, 2):
            r = espvpn(f.url, ["--authenticate", *hotp], "secret\n")
            if r.returncode:
                show(r)
            check(r.returncode == 0, f"HOTP run {run}: the fake accepted the code")
            with open(tok) as t:
                content = t.read()
            check(content == f"base32:{TOTP_KEY},{run}", f"the counter was written back: {content!r}")
        check(f.stats()["hotp_counter"] == 2 and f.stats()["otp_codes_ok"] == 2, "the fake saw counters 0 and 1")
        if shutil.which("openconnect"):
            o = openconnect(f.url, ["--authenticate", *hotp], "secret\n")
            with open(tok) as t:
                content = t.read()
            check(o.returncode == 0 and content == f"base32:{TOTP_KEY},3",
                  f"openconnect 9.01 takes over the same file (counter 2) and writes 3 as espvpn does: {content!r}")
    # Issue 41: the token file's directory is writable by user nobody, who plants a symlink at the
    # temporary name pointing into a root-only directory: root must not create a file there.
    if os.geteuid() == 0:
        with tempfile.TemporaryDirectory() as d, Fake("--gw-otp", f"xml:hotp:{TOTP_KEY}") as f:
            os.chmod(d, 0o755)
            shared, root_only = os.path.join(d, "shared"), os.path.join(d, "root-only")
            os.mkdir(shared)
            os.chown(shared, 65534, 65534)
            os.mkdir(root_only, 0o700)
            tok = os.path.join(shared, "token")
            with open(tok, "w") as t:
                t.write(f"base32:{TOTP_KEY},0\n")
            os.chown(tok, 65534, 65534)
            target = os.path.join(root_only, "cron-entry")
            subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ln", "-s", target,
                            tok + ".espvpn-new"], check=True)
            r = espvpn(f.url, ["--authenticate", "-u", "alice", "--passwd-on-stdin", "--non-inter", "--token-mode=hotp",
                               "--token-secret", "@" + tok], "secret\n")
            check(not os.path.lexists(target), "nothing created through the planted symlink")
            check(r.returncode != 0 and "symlink is already there" in r.stderr,
                  f"the planted name: a clear error: {r.stderr.strip().splitlines()[-1:]!r}")
            with open(tok) as t:
                check(t.read() == f"base32:{TOTP_KEY},0\n", "the token file is unchanged")
    # The secret is wiped from the command line (/proc/PID/cmdline), as -C and -p are.
    with Fake("--delay", "/global-protect/prelogin.esp=3") as f:
        p = subprocess.Popen([ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "-u", "alice",
                              "--passwd-on-stdin", "--token-mode=totp", f"--token-secret=base32:{TOTP_KEY}", f.url],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Its first request (held 3 s by the fake) says it is past option parsing.
            asked = f.stats_when(lambda s: s["requests"] > 0)["requests"]
            with open(f"/proc/{p.pid}/cmdline", "rb") as c:
                cmdline = c.read()
        finally:
            p.kill()
            p.wait()
        check(asked > 0, "espvpn reached the fake (past option parsing) before its argv was read")
        check(b"--token-secret=" in cmdline and TOTP_KEY.encode() not in cmdline, "--token-secret wiped from argv")
    r = espvpn("https://127.0.0.1:1/", ["--authenticate", "--token-mode=rsa", "--token-secret", "x"], "")
    check(r.returncode == 1 and "only totp and hotp" in r.stderr, "--token-mode=rsa: refused with a reason")
    r = espvpn("https://127.0.0.1:1/", ["--authenticate", "--token-mode=totp"], "")
    check(r.returncode == 1 and "needs --token-secret" in r.stderr, "--token-mode without a secret: refused")



# -- the portal's authentication-override cookie kept across runs (issue 42 item 4) --
# main() points XDG_STATE_HOME at a private temporary directory, so these runs never touch the
# real user's state; the fake's issued_secrets are the cookies to look for in every output.

def cookie_path(f):
    return os.path.join(os.environ["XDG_STATE_HOME"], "espvpn", f"gp-portal-127.0.0.1_{f.port}")


def cookie_fields(path):
    with open(path) as fh:
        lines = fh.read().splitlines()
    check(lines and lines[0] == "espvpn-portal-cookie 1", f"{path} is espvpn's cookie file")
    return dict(line.partition(" ")[::2] for line in lines[1:])


def no_issued_cookie_in(f, runs, what):
    issued = f.stats().get("issued_secrets", [])
    check(issued, "the fake issued portal cookies")
    for r in runs:
        check(all(c not in r.stdout and c not in r.stderr for c in issued), f"{what}: no portal cookie in any output")


def revoke_portal_cookies(f):
    with urllib.request.urlopen(f"http://127.0.0.1:{f.admin_port}/__revoke-portal-cookies", timeout=10) as r:
        return json.load(r)["revoked"]


def password_run(f, *extra):
    r = espvpn(f.url, ["-vv", "-u", "alice", "--passwd-on-stdin", *extra], "secret\n")
    if r.returncode != 0:
        show(r)
    check(r.returncode == 0, "the password login exits 0")
    return r


def case_cookie_cache_reuse():
    with Fake("--portal-cookie-lifetime", "3600", "--gw-cookie-only") as f:
        path = cookie_path(f)
        first = password_run(f)
        check("kept for 60 min (the portal's lifetime)" in first.stderr, "the portal's lifetime is said and used")
        st = os.stat(path)
        check(st.st_mode & 0o777 == 0o600 and st.st_uid == os.getuid(), "the cookie file is 0600, the user's")
        check(os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700, "its directory is 0700")
        fields = cookie_fields(path)
        check(fields["user"] == "alice" and fields["portal-userauthcookie"] in f.stats()["issued_secrets"],
              "the file holds alice's issued cookie")
        check(abs(int(fields["expires"]) - (time.time() + 3600)) < 120, "expiry = now + the portal's 3600 s")
        # No -u, no password, nothing to type: the saved cookie alone logs in.
        second = espvpn(f.url, ["-vv", "--non-inter"], "")
        if second.returncode != 0:
            show(second)
        check(second.returncode == 0, "the second run connects without a password")
        check("with the authentication cookie saved by an earlier login" in second.stderr, "it says how")
        s = f.stats()
        check(s.get("portal_cookie_logins") == 1, "the portal's getconfig took the saved cookie")
        check(s["login_via"] == {"portal-userauthcookie": 2}, "the gateway took the portal cookie both times")
        check(cookie_fields(path)["portal-userauthcookie"] != fields["portal-userauthcookie"],
              "the portal's fresh cookie replaced the used one")
        no_issued_cookie_in(f, (first, second), "-vv")


def case_cookie_cache_revoked():
    with Fake("--portal-cookie", "--gw-cookie-only") as f:
        path = cookie_path(f)
        first = password_run(f)
        check("kept for 480 min" in first.stderr, "no lifetime from the portal: the 8 h default")
        check(revoke_portal_cookies(f) == 1, "the portal revoked the cookie it issued")
        refused = espvpn(f.url, ["-vv", "--non-inter"], "")
        check(refused.returncode != 0, "revoked and no password to fall back on: the run fails")
        check("refused the saved authentication cookie" in refused.stderr and "it is forgotten" in refused.stderr,
              "it says the saved cookie was refused")
        check(not os.path.exists(path), "the refused cookie is removed")
        check(f.stats().get("portal_cookie_refused", 0) >= 1, "the portal saw the revoked cookie")
        # Revoked again, with a password: the normal login follows in the same run.
        password_run(f)
        check(revoke_portal_cookies(f) == 1, "revoked once more")
        again = password_run(f)
        check("refused the saved authentication cookie" in again.stderr, "refused, then the password login")
        check(cookie_fields(path)["portal-userauthcookie"] == f.stats()["issued_secrets"][-1],
              "the new login's cookie is kept")
        no_issued_cookie_in(f, (first, refused, again), "-vv")


def case_cookie_cache_gateway_refuses():
    """The portal takes the saved cookie, its gateway does not (no authentication override there):
    forgotten, and the gateway's own login runs in the same run."""
    with Fake("--portal-cookie", "--gw-no-portal-cookie") as f:
        path = cookie_path(f)
        first = password_run(f)
        check(os.path.exists(path), "the portal's cookie is saved")
        second = password_run(f)
        check("gateway 127.0.0.1 refused the saved authentication cookie" in second.stderr and
              "it is forgotten" in second.stderr, "it says the gateway refused the saved cookie")
        s = f.stats()
        check(s.get("portal_cookie_logins") == 1, "the portal took the saved cookie")
        check(s["login_via"] == {"password": 2}, "the gateway logged in by password both times")
        check(not os.path.exists(path), "the refused cookie is removed")
        no_issued_cookie_in(f, (first, second), "-vv")


def case_cookie_cache_expiry():
    with Fake("--portal-cookie", "--gw-cookie-only") as f:
        path = cookie_path(f)
        password_run(f)
        fields = cookie_fields(path)
        check(abs(int(fields["expires"]) - (time.time() + 8 * 3600)) < 120, "expiry = now + 8 h")
        # The portal would still take it; espvpn must not send it once its time is over.
        with open(path) as fh:
            text = fh.read()
        with open(path, "w") as fh:
            fh.write(text.replace("expires " + fields["expires"], "expires " + str(int(time.time()) - 5)))
        r = espvpn(f.url, ["-vv", "--non-inter"], "")
        check(r.returncode != 0, "an expired cookie is not used (no password: the login fails)")
        s = f.stats()
        check(s.get("portal_cookie_logins", 0) == 0 and s.get("portal_cookie_refused", 0) == 0,
              "the expired cookie never reached the portal")
        check(not os.path.exists(path), "the expired cookie is removed")


def case_cookie_cache_off():
    with Fake("--portal-cookie", "--gw-cookie-only") as f:
        path = cookie_path(f)
        password_run(f, "--no-cookie-cache")
        check(not os.path.exists(path), "--no-cookie-cache: nothing saved")
        password_run(f)
        check(os.path.exists(path), "saved without it")
        r = espvpn(f.url, ["-vv", "--non-inter", "--no-cookie-cache"], "")
        check(r.returncode != 0 and f.stats().get("portal_cookie_logins", 0) == 0,
              "--no-cookie-cache: the saved cookie is not used")
        forget = subprocess.run([ESPVPN, "--forget-cookies", f"https://127.0.0.1:{f.port}/"], capture_output=True,
                                text=True, timeout=RUN_TIMEOUT)
        check(forget.returncode == 0 and not os.path.exists(path), "--forget-cookies PORTAL removes it")
        check("removed 1 saved portal cookie" in forget.stderr, "and says so")
        password_run(f)
        other = os.path.join(os.path.dirname(path), "gp-portal-192.0.2.1_443")
        shutil.copy(path, other)
        forget = subprocess.run([ESPVPN, "--forget-cookies"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
        check(forget.returncode == 0 and not os.path.exists(path) and not os.path.exists(other),
              "--forget-cookies without a portal removes every portal's")


def case_cookie_cache_symlink():
    """espvpn as root for a user (SUDO_UID): the state is made as that user, and a symlink the
    user planted at the file or the directory is refused, never followed as root."""
    nobody = 65534
    state = os.environ["XDG_STATE_HOME"]
    os.chown(state, nobody, nobody)
    env = dict(os.environ, SUDO_UID=str(nobody))
    victim_dir = tempfile.mkdtemp(prefix="gplogin-victim.")  # root's, 0700
    victim = os.path.join(victim_dir, "root-file")
    with open(victim, "w") as fh:
        fh.write("root's\n")
    try:
        if os.getuid() != 0:
            print("SKIP: needs root (SUDO_UID is only honoured for root)")
            return 77
        with Fake("--portal-cookie", "--gw-cookie-only") as f:
            path = cookie_path(f)

            def run():
                print(f"  (SUDO_UID={nobody} XDG_STATE_HOME={state})")
                r = subprocess.run([ESPVPN, "--protocol=gp", "--cafile", CA, "--dry-run", "-vv", "-u", "alice",
                                    "--passwd-on-stdin", f.url], input="secret\n", capture_output=True, text=True,
                                   timeout=RUN_TIMEOUT, env=env)
                if r.returncode != 0:
                    show(r)
                check(r.returncode == 0, "the login itself succeeds")
                return r

            # The directory planted as a symlink to root's directory.
            os.symlink(victim_dir, os.path.join(state, "espvpn"))
            os.lchown(os.path.join(state, "espvpn"), nobody, nobody)
            r = run()
            check("refusing the state directory" in r.stderr, "a symlinked state directory is refused")
            check(os.listdir(victim_dir) == ["root-file"], "nothing was written through it")
            os.unlink(os.path.join(state, "espvpn"))
            r = run()
            st = os.stat(path)
            check(st.st_uid == nobody and st.st_mode & 0o777 == 0o600, "the cookie file is the user's, 0600")
            check(os.stat(os.path.dirname(path)).st_uid == nobody, "so is its directory")
            # The file replaced by a symlink to a root file.
            os.unlink(path)
            os.symlink(victim, path)
            os.lchown(path, nobody, nobody)
            r = run()
            check("refusing" in r.stderr and "symlink" in r.stderr, "a symlinked cookie file is refused")
            with open(victim) as fh:
                check(fh.read() == "root's\n", "root's file is untouched")
            check(not os.path.islink(path) and os.stat(path).st_uid == nobody,
                  "the new cookie replaced the link (rename), as the user")
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)

CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global ESPVPN
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(f"usage: {sys.argv[0]} ESPVPN CASE  (CASE: {', '.join(CASES)})")
        return 1
    ESPVPN = os.path.abspath(sys.argv[1])
    name = sys.argv[2]
    print(f"== {name}")
    # Saved portal cookies (--no-cookie-cache to avoid) go to a private directory of this run.
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="gplogin-state.")
    try:
        rc = CASES[name]()
    except Failure as e:
        print(f"FAIL {name}: {e}")
        return 1
    finally:
        shutil.rmtree(os.environ["XDG_STATE_HOME"], ignore_errors=True)
    if rc == 77:
        return 77
    print(f"PASS {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
