#!/usr/bin/env bash
# CTest kernel_interop: tools/interop, the whole matrix (every suite, IPv4/IPv6 outer and
# inner, both directions, rekey, NAT-T, edges) against Linux kernel xfrm, in ONE guest
# boot when this host's kernel has no ESP (tools/kernel-vm). In that one kernel:
#   1. tools/interop --json --wrong-key: every real case's cells PASS or EDGE, the IPv6
#      cases present;
#   2. in the same run, the extra case with a wrong c2s key FAILs (the kernel's
#      integrity counter as proof) and the exit status is 1, so the matrix cannot be
#      green by construction;
#   3. tools/interop --peer against the kernel, with the SAs given as the kernel's own
#      `ip xfrm state` output: exit 0, and the kernel's counters show our tampered and
#      replayed packets; the same with one key byte changed in the file: exit 1.
#   interop.sh PATH/TO/esp-peer
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
peer=${1:?usage: interop.sh PATH/TO/esp-peer}
[[ -x $peer ]] || { echo "FAIL: $peer is not an executable (build the esp-peer target)"; exit 1; }
peer=$(cd "$(dirname "$peer")" && pwd)/$(basename "$peer")
[[ $(id -u) -eq 0 ]] || { echo "SKIP: kernel xfrm tests need root"; exit 77; }
if [[ ${2:-} != --here ]]; then
  "$repo/tools/kernel-vm/with-esp-kernel" --timeout 600 -- "$0" "$peer" --here
  rc=$?
  # No guest status at all (qemu missing, no kernel): the kernel peer cannot run here.
  ((rc == 125)) && { echo "SKIP: the kernel-vm guest did not run"; exit 77; }
  exit "$rc"
fi

started=$SECONDS
interop=$repo/tools/interop
work=$(mktemp -d /tmp/interop-test.XXXXXX)
. "$repo/tools/netns/xfrm.sh"
cleanup() { netns_cleanup; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# judge FILE: prints the Markdown matrix of a --json result and a summary line
# "cases cells fails edges v6outer v6inner".
judge() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cells = [(c, k, v) for c in r["cases"] for k, v in c["checks"].items()]
fails = [f"{c['case']}/{k}" for c, k, v in cells if v["verdict"] == "FAIL"]
print("SUMMARY", len(r["cases"]), len(cells), len(fails), sum(v["verdict"] == "EDGE" for _, _, v in cells),
      sum(c.get("outer") == "IPv6" for c in r["cases"]), sum(c.get("inner") == "IPv6" for c in r["cases"]),
      r.get("matrix_s"), r.get("sa_setup_s"), r.get("esp_probe_s"), r.get("wall_s"))
for f in fails: print("FAILED", f)
real = [k for c in r["cases"] if not c.get("wrong_key") for k, v in c["checks"].items() if v["verdict"] == "FAIL"]
print("REALFAILS", len(real))
for c in r["cases"]:
    if c.get("wrong_key"):
        print("BAD", c["case"], c["checks"]["echo"]["verdict"], c["kernel_counters"]["c2s"].get("integrity", 0))
for c in r["cases"]:
    for k, v in c["checks"].items():
        if v["verdict"] == "FAIL": print("  ", c["case"], k, v["proof"], "|", v["detail"])
PY
}

# 1+2. The whole matrix, plus one extra case (a copy of aes-128-gcm v6/v4) in which
# espvpn has a wrong c2s key: every real case must pass, the extra one must fail (with
# the kernel's integrity counter as proof) and the exit status must be 1. One run, so
# the kernel's algorithm set-up is paid once.
t0=$SECONDS
# --this-kernel: with-esp-kernel has just chosen this kernel (host or guest) for its ESP.
"$interop" --this-kernel --esp-peer "$peer" --json --wrong-key aes-128-gcm/6/4 >"$work/full.json" 2>"$work/full.err"; rc=$?
s=$(judge "$work/full.json" 2>&1); echo "$s" | grep -Ev '^(SUMMARY|BAD|REALFAILS)'
read -r _ cases cells fails edges v6o v6i mat setup probe wall < <(grep ^SUMMARY <<<"$s")
bad=$(sed -n 's/^BAD //p' <<<"$s"); realfails=$(sed -n 's/^REALFAILS //p' <<<"$s")
echo "1. full matrix: exit $rc, $cases cases ($v6o IPv6-outer, $v6i IPv6-inner), $cells cells, $fails failed, $edges edge cells; $((SECONDS - t0)) s (matrix ${mat} s of which SA setup ${setup} s)"
echo "2. the wrong-key case: $bad (case, echo verdict, kernel integrity failures)"
((rc == 1)) || { fail "tools/interop exited $rc (want 1: the wrong-key case fails)"; tail -20 "$work/full.err"; }
((${cases:-0} >= 38 && ${v6o:-0} >= 17 && ${v6i:-0} >= 16 && ${edges:-0} > 0)) || fail "the matrix is not complete"
[[ $realfails == 0 ]] || fail "$realfails cells of real cases failed"
[[ $bad == "aes-128-gcm v6/v4 FAIL "* ]] || fail "the wrong-key case's echo did not fail"
(( ${bad##* } > 0 )) 2>/dev/null || fail "the kernel's integrity counter did not prove the wrong key"

# 3. --peer: a "gateway" (the kernel in its own namespace) checked by hand with its own
# `ip xfrm state` output as the SA file.
t0=$SECONDS
U=iopp$$u K=iopp$$k
netns_pair "$U" "$K" 192.0.2.1/24 192.0.2.2/24 || { fail "cannot build the namespaces"; exit 1; }
ip -n "$K" -batch - <<EOT || exit 1
addr add 10.78.0.2/32 dev lo
route add 10.78.0.1/32 dev $K-v src 10.78.0.2
EOT
espinudp_listen 4501 "$K" || { fail "no ESP-in-UDP socket"; exit 1; }
suite=aes-256-cbc+sha256
read -r eb ab < <(xfrm_key_bytes $suite)
sa_lines=$(xfrm_sa 192.0.2.1 192.0.2.2 0x7001 $suite "$(random_hex "$eb")" "$(random_hex "$ab")" &&
  xfrm_sa 192.0.2.2 192.0.2.1 0x7002 $suite "$(random_hex "$eb")" "$(random_hex "$ab")") || exit 1
{ echo "$sa_lines"; xfrm_policies 192.0.2.2 192.0.2.1 10.78.0.2/32 10.78.0.1/32; } | xfrm_apply "$K" ||
  { fail "SAs refused"; exit 1; }
ip -n "$K" xfrm state >"$work/gateway.sa"
ip netns exec "$U" "$interop" --esp-peer "$peer" --peer 192.0.2.2 --sa-file "$work/gateway.sa" \
  --inner-src 10.78.0.1 --inner-dst 10.78.0.2 >"$work/peer.md" 2>&1; rc=$?
read -r _ _ _ k_replay k_icv _ < <(xfrm_sa_stats "$K" 0x7001)
echo "3. --peer against the kernel: exit $rc; kernel c2s SA replay=$k_replay integrity failed=$k_icv"
cat "$work/peer.md"
((rc == 0)) || fail "--peer with the kernel's own SAs exited $rc"
[[ $k_replay == 1 && $k_icv == 1 ]] || fail "the kernel's counters do not show the tampered and the replayed packet"
# The same file with one key digit changed (the c2s encryption key): must fail.
python3 - "$work/gateway.sa" "$work/wrong.sa" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"dst 192\.0\.2\.2\n.*?enc cbc\(aes\) 0x([0-9a-f])", text, re.S)
i = m.start(1)
open(sys.argv[2], "w").write(text[:i] + ("0" if text[i] != "0" else "1") + text[i + 1:])
PY
# The same SAs again (fresh replay windows), then the altered file.
{ echo "xfrm state flush"; echo "$sa_lines"; } | xfrm_apply "$K" || fail "cannot reinstall the SAs"
ip netns exec "$U" "$interop" --esp-peer "$peer" --peer 192.0.2.2 --sa-file "$work/wrong.sa" --timeout-ms 1500 \
  --inner-src 10.78.0.1 --inner-dst 10.78.0.2 >"$work/wrong.md" 2>&1; rc=$?
read -r _ _ _ _ k_icv _ < <(xfrm_sa_stats "$K" 0x7001)
echo "   --peer with one key digit changed: exit $rc; kernel integrity failed=$k_icv"
((rc == 1)) || { fail "--peer with a wrong key exited $rc"; cat "$work/wrong.md"; }
((k_icv > 0)) 2>/dev/null || fail "the kernel did not count integrity failures for the wrong key"
echo "   $((SECONDS - t0)) s"

echo "kernel_interop: $failures failed, $((SECONDS - started)) s in the kernel"
((failures == 0))
