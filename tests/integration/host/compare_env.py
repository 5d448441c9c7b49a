#!/usr/bin/python3
"""Compares the environments two vpnc-script runs recorded (record-env files).

  compare_env.py [--anyconnect] ESPVPN_FILE OPENCONNECT_FILE

Looks at what the contract covers (the vpnc-script variables, NetworkManager's NM_*
pass-through, the uid) and prints one line per variable. Differences listed in
EXPECTED (with the reason) are allowed; any other difference, or a variable only
one side sets, fails. Split routes are compared as sets: openconnect builds its
lists by prepending, so its index order is reversed. CISCO_CSTP_OPTIONS is compared
line by line (GlobalProtect: openconnect's NAME=value list of the getconfig items;
AnyConnect: the X-CSTP-* headers), with the per-line differences in LINE_EXPECTED.
"""
import re
import sys

CONTRACT = re.compile(r"^(reason|VPNGATEWAY|TUNDEV|VPNPID|LOG_LEVEL|IDLE_TIMEOUT|INTERNAL_IP[46]_\w+|CISCO_\w+"
                      r"|NM_\w+|RUN_AS_UID|RECORD_DIR)$")
ROUTE = re.compile(r"^(CISCO(?:_IPV6)?_SPLIT_(?:INC|EXC))_(\d+)_(ADDR|MASK|MASKLEN)$")

# Variables whose values differ on purpose (or that only one client sets), and why.
OC_V6_ROUTES = ("openconnect 9.01 bug: gpst.c puts <access-routes-v6> members on the exclude list "
                "(only <access-routes> become includes); espvpn includes them, as the gateway means")
EXPECTED = {
    "VPNPID": "the PID of each client process",
    "INTERNAL_IP4_MTU": "openconnect derives the ESP MTU from the path MTU it reads off its TLS socket "
                        "(1500 on this veth); espvpn, without --base-mtu, from openconnect's default base "
                        "MTU 1406: smaller, never fragments",
    "INTERNAL_IP6_NETMASK": "espvpn states the /128 the gateway implies; vpnc-script and the NM helper "
                            "use INTERNAL_IP6_ADDRESS/128 when it is unset: same configuration",
    "CISCO_IPV6_SPLIT_INC": OC_V6_ROUTES,
    "CISCO_IPV6_SPLIT_EXC": OC_V6_ROUTES,
}


# AnyConnect: what differs on purpose (the rest of EXPECTED is about GlobalProtect).
AC_EXPECTED = {
    "VPNPID": EXPECTED["VPNPID"],
    "INTERNAL_IP4_MTU": "openconnect announces X-CSTP-Base-MTU 1500 (its TLS socket's path MTU on this veth), "
                        "espvpn openconnect's default 1406 without --base-mtu; ocserv sizes the MTU from it",
}


def line_expected(ours, theirs, anyconnect):
    """Why one CISCO_CSTP_OPTIONS line may differ, or None."""
    k1, _, v1 = ours.partition("=")
    k2, _, v2 = theirs.partition("=")
    if anyconnect and k1 == k2 == "X-CSTP-Rekey-Time":
        return "ocserv adds a random part to each session's rekey time"
    if anyconnect and k1 == k2 and k1 in ("X-CSTP-Base-MTU", "X-CSTP-MTU"):
        return AC_EXPECTED["INTERNAL_IP4_MTU"]
    if not anyconnect and v1 == v2 and ":" in v1 and {k1, k2} == {"split-include", "split-exclude"}:
        return OC_V6_ROUTES
    return None


def compare_cstp_options(ours, theirs, anyconnect):
    a, b = (ours or "").split("\n"), (theirs or "").split("\n")
    bad = 0
    if len(a) != len(b):
        print(f"  CISCO_CSTP_OPTIONS: {len(a)} lines vs openconnect's {len(b)} MISMATCH")
        return 1
    for x, y in zip(a, b):
        if x == y:
            continue
        why = line_expected(x, y, anyconnect)
        print(f"  CISCO_CSTP_OPTIONS line: espvpn {x!r} openconnect {y!r} "
              + ("differs as expected: " + why if why else "MISMATCH"))
        bad += why is None
    print(f"  CISCO_CSTP_OPTIONS: {len(a)} lines, {'same' if not bad else 'MISMATCH'}")
    return bad


def load(path):
    raw = open(path, "rb").read().split(b"\0")
    env = {}
    for item in raw:
        if b"=" in item:
            k, v = item.decode().split("=", 1)
            if CONTRACT.match(k):
                env[k] = v
    return env


def routes(env):
    """{list name: set of (addr, mask, masklen)} and the env without the indexed entries."""
    lists, rest = {}, {}
    for k, v in env.items():
        m = ROUTE.match(k)
        if m:
            lists.setdefault(m.group(1), {}).setdefault(m.group(2), {})[m.group(3)] = v
        else:
            rest[k] = v
    return {name: sorted(tuple(sorted(e.items())) for e in idx.values()) for name, idx in lists.items()}, rest


def main():
    args = sys.argv[1:]
    anyconnect = args[:1] == ["--anyconnect"]
    if anyconnect:
        args = args[1:]
    expected = AC_EXPECTED if anyconnect else EXPECTED
    ours, theirs = load(args[0]), load(args[1])
    bad = compare_cstp_options(ours.pop("CISCO_CSTP_OPTIONS", None), theirs.pop("CISCO_CSTP_OPTIONS", None),
                               anyconnect)
    our_routes, ours = routes(ours)
    their_routes, theirs = routes(theirs)
    for k in sorted(set(ours) | set(theirs)):
        a, b = ours.get(k), theirs.get(k)
        if a == b:
            verdict = "same"
        elif k in expected:
            verdict = "differs as expected: " + expected[k]
        else:
            verdict = "MISMATCH"
            bad += 1
        shown = lambda v: "(unset)" if v is None else repr(v if len(v) < 40 else v[:37] + "...")
        print(f"  {k:28} espvpn={shown(a):32} openconnect={shown(b):32} {verdict}")
    for name in sorted(set(our_routes) | set(their_routes)):
        a, b = our_routes.get(name), their_routes.get(name)
        if a == b:
            verdict = "same set"
        elif name in expected:
            verdict = "differs as expected: " + expected[name]
        else:
            verdict = "MISMATCH"
            bad += 1
        print(f"  {name}_<i>_*: espvpn={a} openconnect={b} {verdict}")
    print(f"{bad} unexplained difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
