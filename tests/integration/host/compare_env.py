#!/usr/bin/python3
"""Compares the environments two vpnc-script runs recorded (record-env files).

  compare_env.py ESPVPN_FILE OPENCONNECT_FILE

Looks at what the contract covers (the vpnc-script variables, NetworkManager's NM_*
pass-through, the uid) and prints one line per variable. Differences listed in
EXPECTED (with the reason) are allowed; any other difference, or a variable only
one side sets, fails. Split routes are compared as sets: openconnect builds its
lists by prepending, so its index order is reversed.
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
    "CISCO_CSTP_OPTIONS": "openconnect 9.01 dumps its internal GlobalProtect option list there; the "
                          "contract defines it as AnyConnect's X-CSTP-* headers, which GP has none of; "
                          "the NM helper ignores it",
    "CISCO_IPV6_SPLIT_INC": OC_V6_ROUTES,
    "CISCO_IPV6_SPLIT_EXC": OC_V6_ROUTES,
}


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
    ours, theirs = load(sys.argv[1]), load(sys.argv[2])
    our_routes, ours = routes(ours)
    their_routes, theirs = routes(theirs)
    bad = 0
    for k in sorted(set(ours) | set(theirs)):
        a, b = ours.get(k), theirs.get(k)
        if a == b:
            verdict = "same"
        elif k in EXPECTED:
            verdict = "differs as expected: " + EXPECTED[k]
        else:
            verdict = "MISMATCH"
            bad += 1
        shown = lambda v: "(unset)" if v is None else repr(v if len(v) < 40 else v[:37] + "...")
        print(f"  {k:28} espvpn={shown(a):32} openconnect={shown(b):32} {verdict}")
    for name in sorted(set(our_routes) | set(their_routes)):
        a, b = our_routes.get(name), their_routes.get(name)
        if a == b:
            verdict = "same set"
        elif name in EXPECTED:
            verdict = "differs as expected: " + EXPECTED[name]
        else:
            verdict = "MISMATCH"
            bad += 1
        print(f"  {name}_<i>_*: espvpn={a} openconnect={b} {verdict}")
    print(f"{bad} unexplained difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
