#!/usr/bin/env python3
"""GlobalProtect internal host detection: espvpn against tools/fake-gp-gateway with the
host's resolver answering as each case says.

  gp_internal_test.py ESPVPN CASE      (CASE = one of CASES below; "list" prints them)

Each case runs in a private mount and network namespace of its own (unshare, root only;
otherwise skipped, exit 77): /etc/hosts, /etc/nsswitch.conf and /etc/resolv.conf are
bind-mounted from files the case writes, so the reverse lookup espvpn makes through
getnameinfo/NSS returns what the case wants, and a "DNS server" on the namespace's
loopback can swallow queries without answering. The fake portal lists an external
gateway on one listener and an internal one on another; its per-listener getconfig
count shows which one espvpn used. Exit 0 = pass, 1 = fail, 77 = skipped.
"""

import os
import shlex
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, Failure, Fake, check, in_private_namespaces, resolver  # noqa: E402  (shared harness)

ESPVPN = None
INSIDE_ENV = "ESPVPN_GP_INTERNAL_NS"
DETECT = "10.99.0.1"
CORP = "gw.corp.example"


def espvpn(url, args=(), timeout=40):
    dry = [] if "--authenticate" in args else ["--dry-run"]
    cmd = [ESPVPN, "--protocol=gp", "--cafile", CA, *dry, "--no-cookie-cache", "-u", "alice",
           "--passwd-on-stdin", *args, url]
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    start = time.monotonic()
    r = subprocess.run(cmd, input="secret\n", capture_output=True, text=True, timeout=timeout)
    r.elapsed = time.monotonic() - start
    print(f"  espvpn exit {r.returncode} after {r.elapsed:.2f} s")
    return r


def show(r):
    sys.stdout.write("  ---- stdout ----\n" + r.stdout + "  ---- stderr ----\n" + r.stderr)


def getconfigs(f):
    per = f.stats().get("per_listener", {})
    return [per.get(str(p), {}).get("getconfigs", 0) for p in f.ports]


def internal_portal(*extra):
    # Listener 0: the portal and the external gateway; listener 1: the internal gateway.
    return Fake("--internal-gateway", "1:1:hq", "--internal-host-detection", f"{DETECT},GW.Corp.Example", *extra,
                listeners=2)


# ───────────────────────────── cases ─────────────────────────────

def case_inside():
    # The reverse lookup returns the expected name (other case, a trailing dot): inside.
    resolver([f"{DETECT} {CORP}."])
    with internal_portal() as f:
        r = espvpn(f.url)
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "the login exits 0")
        check(f"inside the corporate network: {DETECT} resolves to {CORP}" in r.stderr,
              "the verdict and why, at the default verbosity")
        check(getconfigs(f) == [0, 1], f"the internal gateway's getconfig was reached, not the external's: "
                                       f"{getconfigs(f)}")
        check("gateway: hq (127.0.0.1:%d), internal" % f.ports[1] in r.stderr, "the internal gateway is named")
        # --authgroup may name the external gateway from inside.
        r = espvpn(f.url, ["--authgroup", "gw0"])
        check(r.returncode == 0 and getconfigs(f) == [1, 1], "--authgroup names the external gateway: used")
        # --no-internal-detection: no lookup, external gateways only.
        r = espvpn(f.url, ["--no-internal-detection"])
        check(r.returncode == 0 and getconfigs(f) == [2, 1], "--no-internal-detection: the external gateway")
        check("internal host detection is off (--no-internal-detection)" in r.stderr, "and it says so")


def case_inside_ipv6():
    # IPv4 answers another name; the IPv6 entry matches: inside.
    resolver([f"{DETECT} printer.example", "fd00::99 gw6.corp.example"])
    with internal_portal("--internal-host-detection-v6", "fd00::99,gw6.corp.example") as f:
        r = espvpn(f.url)
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "the login exits 0")
        check("inside the corporate network: fd00::99 resolves to gw6.corp.example" in r.stderr,
              "the IPv6 check decides")
        check(getconfigs(f) == [0, 1], f"the internal gateway was used: {getconfigs(f)}")


def case_outside():
    resolver([f"{DETECT} printer.example"])
    with internal_portal() as f:
        r = espvpn(f.url)
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "the login exits 0")
        check(f"outside the corporate network: {DETECT} resolves to printer.example, expected GW.Corp.Example"
              in r.stderr, "the verdict names what the lookup gave and what was expected")
        check(getconfigs(f) == [1, 0], f"the external gateway was used: {getconfigs(f)}")
        # An internal gateway named from outside is not offered.
        r = espvpn(f.url, ["--authgroup", "hq"])
        check(r.returncode == 1 and "names no gateway of this portal; it offers: gw0" in r.stderr,
              "--authgroup cannot pick an internal gateway from outside")
    # No name at all for the address: outside too.
    resolver([])
    with internal_portal() as f:
        r = espvpn(f.url)
        check(r.returncode == 0 and f"outside the corporate network: {DETECT} has no name" in r.stderr,
              "no reverse name: outside")
        check(getconfigs(f) == [1, 0], "the external gateway")
    # A broken detection entry (no name) is reported and not trusted.
    with Fake("--internal-gateway", "1:1:hq", "--internal-host-detection", f"{DETECT},", listeners=2) as f:
        r = espvpn(f.url)
        check(r.returncode == 0 and getconfigs(f) == [1, 0], "a detection entry without a name: outside")
        check(f'not using internal-host-detection: no host name for the address "{DETECT}"' in r.stderr,
              "the broken entry is named in a warning")


def case_resolver_silent():
    # hosts from DNS only, and the DNS server (on this namespace's loopback) never answers:
    # the verdict is "outside" when the 3 s bound ends, not when the resolver gives up (30 s).
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.53", 53))
    resolver([], nsswitch="dns", nameserver="127.0.0.53")
    with internal_portal() as f:
        r = espvpn(f.url)
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "the login exits 0")
        check(f"outside the corporate network: no answer for {DETECT} within 3 s" in r.stderr,
              "the verdict says the lookup did not answer in time")
        check(getconfigs(f) == [1, 0], f"the external gateway was used: {getconfigs(f)}")
        check(r.elapsed < 20, f"the run ended long before the resolver's own 30 s timeout ({r.elapsed:.1f} s)")
    sink.settimeout(0)
    try:
        query = sink.recv(512)
    except BlockingIOError:
        query = b""
    check(b"\x07in-addr\x04arpa" in query, "the PTR query did reach the silent server (the resolver was asked)")
    sink.close()


def case_only_internal_outside():
    resolver([f"{DETECT} printer.example"])
    with internal_portal("--no-external-gateway") as f:
        r = espvpn(f.url)
        check(r.returncode == 1, f"exit 1 (got {r.returncode})")
        check("lists only internal gateways (policy/gateways/internal/list), for use inside the corporate network,"
              f" and this host is outside the corporate network: {DETECT} resolves to printer.example" in r.stderr,
              "a clear error that says why")
        check(getconfigs(f) == [0, 0] and f.stats().get("login_ok", 0) == 0, "no gateway was contacted")


def case_inside_no_internal_gateway():
    resolver([f"{DETECT} {CORP}"])
    with Fake("--internal-host-detection", f"{DETECT},{CORP}") as f:
        r = espvpn(f.url)
        if r.returncode != 0:
            show(r)
        check(r.returncode == 0, "exit 0: nothing failed")
        check("no tunnel is needed: this host is inside the corporate network and the portal 127.0.0.1 lists no "
              "internal gateway" in r.stderr, "it says plainly that no tunnel is needed")
        check(getconfigs(f) == [0] and f.stats().get("login_ok", 0) == 0, "no gateway login, no tunnel")
        # --authenticate (scripts, the NetworkManager auth dialog): no COOKIE, the reason instead.
        r = espvpn(f.url, ["--authenticate"])
        check(r.returncode == 0, "--authenticate exits 0")
        check("COOKIE=" not in r.stdout and r.stdout.startswith("NO_TUNNEL='no tunnel is needed: this host is inside"),
              f"--authenticate prints NO_TUNNEL= and no COOKIE: {r.stdout!r}")


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
    rc = in_private_namespaces(INSIDE_ENV, 170)  # the bind mounts and the loopback DNS sink die with them
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
