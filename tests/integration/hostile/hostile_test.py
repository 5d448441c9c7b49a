#!/usr/bin/env python3
"""espvpn against hostile servers, for both protocols. GlobalProtect: tools/fake-gp-gateway --hostile,
--malformed, absurd tunnel config, bad certificates; AnyConnect: hostile_ac_peer.py (hostile_ac.py).
Each input must end in a clear error (or a clean, bounded acceptance), never a crash or hang, with
espvpn's peak RSS measured and bounded.

  hostile_test.py ESPVPN gp CASE     CASE: http | config | tls
  hostile_test.py ESPVPN ac CASE     CASE: ac_login | ac_connect | ac_cstp | ac_cstp_break (the last two: root)

Loopback only, ephemeral ports, every run bounded (--http-timeout, timeout=).
Prints one RESULT line per input: outcome, seconds, peak RSS. Exit 0/1.
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, CERTS, Failure, Fake, check, error_line, is_asan, run_measured  # noqa: E402
import hostile_ac  # noqa: E402

ESPVPN = None
HTTP_TIMEOUT = 3
# An ASan build keeps freed memory in quarantine and shadow memory on top: the
# bound is for what the program keeps, so it is looser there.
RSS_LIMIT_MB = 64


def run(url, args, stdin="secret\n", timeout=40, ca=True):
    """espvpn --dry-run; returns (returncode, stdout, stderr, seconds, peak RSS in MiB)."""
    cmd = [ESPVPN, "--protocol=gp", *(["--cafile", CA] if ca else []), "--dry-run", "--http-timeout",
           str(HTTP_TIMEOUT), "-u", "alice", "--passwd-on-stdin", *args, url]
    rc, stdout, stderr, took, rss_mb = run_measured(cmd, stdin, timeout)
    if rc < 0 or rc > 2:
        sys.stdout.write(stderr[-3000:])
        raise Failure(f"espvpn died: exit {rc} ({' '.join(cmd)})")
    return rc, stdout, stderr, took, rss_mb


def case_http():
    # mode -> what the error must say
    expect = {
        "endless-headers": r"header|kept sending",
        "long-header-line": r"header|kept sending",
        "huge-body": r"exceeds|too big|limit|kept sending",
        "endless-chunked": r"exceeds|too big|limit|kept sending",
        "dribble": r"tim(ed out|eout)|no complete response",
        "huge-xml": r"too big|limit|unusable",
        "deep-xml": r"deep|nest|unusable",
        "bad-length": r"Content-Length|length",
        "garbage": r"status line|HTTP|unusable|malformed",
    }
    # The HTTP layer names the path; the reply parsers name the step.
    for path, what in (("/ssl-vpn/login.esp", r"login\.esp|gateway login"), ("/ssl-vpn/getconfig.esp", r"getconfig")):
        for mode, pattern in expect.items():
            if path != "/ssl-vpn/login.esp" and mode not in ("huge-xml", "deep-xml", "endless-chunked"):
                continue  # the HTTP layer is shared; getconfig adds only the bigger parse
            with Fake("--hostile", f"{path}={mode}") as f:
                rc, _, stderr, took, rss = run(f.url, [])
                err = error_line(stderr)
                print(f"RESULT http {mode} on {path}: exit {rc} after {took:.1f} s, peak RSS {rss:.0f} MiB: {err}")
                check(rc == 1, f"{mode} on {path}: exit 1")
                check(re.search(pattern, err, re.I) and re.search(what, err), f"{mode}: the error names the cause and request")
                check(not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", err), f"{mode}: no control bytes in the error")
                # Each request has its own HTTP_TIMEOUT; the run also holds the login before
                # it, which takes seconds on a loaded machine. The fake gives up after 30 s.
                check(took < 20, f"{mode}: gave up in {took:.1f} s (timeout {HTTP_TIMEOUT} s per request)")
                check(rss < RSS_LIMIT_MB, f"{mode}: peak RSS {rss:.0f} MiB < {RSS_LIMIT_MB} MiB")
                check(f.stats().get("hostile_replies", 0) >= 1, f"{mode}: the fake sent its hostile reply")


def case_config():
    # (fake options, expected exit, what the error (exit 1) or the --dry-run output (exit 0) must show)
    inputs = [
        (["--mtu", "0"], 0, r"MTU: not given \(computed"),
        (["--mtu", "1"], 1, r"<mtu> is \"1\", expected 0 or 576"),
        (["--mtu", "100000"], 1, r"<mtu> is \"100000\""),
        # /0 is passed on as the vpnc-script's INTERNAL_IP4_NETMASK (as openconnect does);
        # it must not turn into a route: only the split-include routes are used.
        (["--netmask", "0.0.0.0"], 0, r"netmask 0\.0\.0\.0\n(.*\n)*include routes: 10\.200\.0\.0/16\n"),
        (["--netmask", "255.0.255.0"], 1, r"<netmask> is not contiguous"),
        (["--extra-routes", "10000"], 1, r"more than 4096 routes"),
        (["--ip", ""], 1, r"missing element <response/ip-address>"),
        (["--ip", "300.1.2.3"], 1, r"<ip-address> is not an IPv4 address"),
        (["--timeout", "0"], 0, r"ESP: aes-128-gcm"),
    ]
    for args, want_rc, pattern in inputs:
        with Fake(*args, "--esp", "aes-128-gcm") as f:
            rc, out, stderr, took, rss = run(f.url, [])
            err = error_line(stderr)
            print(f"RESULT config {' '.join(args)}: exit {rc} after {took:.1f} s, peak RSS {rss:.0f} MiB: "
                  f"{err or 'accepted'}")
            check(rc == want_rc, f"{args}: exit {want_rc}, got {rc}")
            shown = err if rc == 1 else out + stderr
            check(re.search(pattern, shown), f"{args}: output shows {pattern!r}")
            check(took < 20, f"{args}: done in {took:.1f} s")
            check(rss < RSS_LIMIT_MB, f"{args}: peak RSS {rss:.0f} MiB")


def case_tls():
    def refused(label, fake_args, args, ca, pattern):
        with Fake(*fake_args) as f:
            rc, _, stderr, took, rss = run(f.url, args, ca=ca)
            err = error_line(stderr)
            print(f"RESULT tls {label}: exit {rc} after {took:.1f} s: {err}")
            check(rc == 1 and re.search(pattern, err, re.I), f"{label}: refused, saying why")
            check(f.stats()["login_ok"] == 0 and not f.stats()["requests_by_path"], f"{label}: no request was sent")
            check(took < HTTP_TIMEOUT + 4, f"{label}: refused in {took:.1f} s")

    cert = lambda name: ["--cert", os.path.join(CERTS, f"{name}.pem"), "--key", os.path.join(CERTS, f"{name}-key.pem")]
    refused("wrong-name certificate", cert("wrongname"), [], True, r"name in the certificate does not match")
    refused("server signed by an untrusted CA", cert("rogue-server"), [], True, r"issuer is unknown")
    refused("no CA given, system trust off", [], ["--no-system-trust"], False, r"issuer is unknown")


CASES = {"gp": {"http": case_http, "config": case_config, "tls": case_tls},
         "ac": {name: (lambda c=c: c(ESPVPN, RSS_LIMIT_MB)) for name, c in hostile_ac.CASES.items()}}


def main():
    global ESPVPN, RSS_LIMIT_MB
    if len(sys.argv) != 4 or sys.argv[2] not in CASES or sys.argv[3] not in CASES[sys.argv[2]]:
        print(f"usage: {sys.argv[0]} ESPVPN gp|ac CASE  (gp: {', '.join(CASES['gp'])}; ac: {', '.join(CASES['ac'])})")
        return 1
    ESPVPN = os.path.abspath(sys.argv[1])
    if is_asan(ESPVPN):
        RSS_LIMIT_MB = 400
    name = sys.argv[3]
    print(f"== {name}")
    try:
        CASES[sys.argv[2]][name]()
    except Failure as e:
        print(f"FAIL {name}: {e}")
        return 1
    print(f"PASS {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
