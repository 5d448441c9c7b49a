#!/usr/bin/env bash
# The full espvpn GlobalProtect tunnel against Linux kernel ESP as the gateway's ESP
# end, every GP suite, in the three-namespace topology (tools/netns/gp-topology.sh):
#   client (espvpn)  --veth--  gateway (fake-gp-gateway; its keys as kernel xfrm
#   states + policies, ESP in UDP 4501, tunnel mode)  --veth--  lan (ping/iperf3)
# Per suite: login, the GP probe answered by the kernel, ping v4 + v6 to the lan host,
# iperf3 TCP both ways, no drops in espvpn's stats (a suite whose only drop is a datagram the
# guest's stack refused runs once more), the kernel's SAs counting without
# integrity or replay failures, SIGINT: exit 0, logout sent, tun removed. Then rekey:
# keys living 6 s, the kernel states swapped at every getconfig while a UDP stream
# runs; the largest gap is printed. Everything runs in one emulated guest when the host
# kernel has no ESP (tools/kernel-vm), so numbers here are correctness, not speed.
#   gp_tunnel_kernel.sh PATH/TO/espvpn     (ESPVPN_GP_KERNEL_SUITES overrides the suite list)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
espvpn=${1:?usage: gp_tunnel_kernel.sh PATH/TO/espvpn}
[[ -x $espvpn ]] || { echo "FAIL: $espvpn is not an executable (build the espvpn target)"; exit 1; }
espvpn=$(cd "$(dirname "$espvpn")" && pwd)/$(basename "$espvpn")
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces, kernel xfrm)"; exit 77; }
if [[ ${2:-} != --here ]]; then
  exec "$repo/tools/kernel-vm/with-esp-kernel" --timeout "${ESPVPN_GP_KERNEL_GUEST_TIMEOUT:-850}" -- \
    "$0" "$espvpn" --here
fi

started=$SECONDS
# ESPVPN_GP_KERNEL_WORK=DIR keeps the work files there (e.g. under build/, which the
# guest shares with the host) for a look afterwards; ESPVPN_GP_KERNEL_TRACE=1 prints
# each step with its time; ESPVPN_GP_KERNEL_REKEY=0 leaves the rekey case out.
if [[ -n ${ESPVPN_GP_KERNEL_WORK:-} ]]; then
  mkdir -p "$ESPVPN_GP_KERNEL_WORK" && work=$(mktemp -d "$ESPVPN_GP_KERNEL_WORK/run.XXXXXX") || exit 1
else
  work=$(mktemp -d /tmp/gp-tunnel-kernel.XXXXXX)
fi
step() { [[ ${ESPVPN_GP_KERNEL_TRACE:-0} == 0 ]] || echo "   [$((SECONDS - started)) s] $*"; }
wait_step=0.5  # polling costs two execs; under emulation those slow everything else
pids=() client_pid=
# shellcheck source=../../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"
cleanup() { local keep=$work; [[ -n ${ESPVPN_GP_KERNEL_WORK:-} ]] && work=/nonexistent; topo_cleanup; work=$keep; }
trap cleanup EXIT
trap 'exit 130' INT TERM
dump() { for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done
         echo "--- kernel xfrm state (gateway)"; ip -n "$nsg" -s xfrm state | grep -v -E '^\s+(enc|auth|auth-trunc|aead) ' || true
         echo "--- installed SAs"; cat "$work/kernel-sa/installed" 2>/dev/null
         echo "--- client UDP sockets"; ip netns exec "$nsc" ss -Hnua; ip netns exec "$nsc" conntrack -L 2>/dev/null; }

topo_up || { echo "FAIL: cannot build the namespaces"; exit 1; }
kernel_peer_prepare || { echo "FAIL: no ESP-in-UDP socket in the gateway namespace"; dump; exit 1; }
ip netns exec "$nsl" iperf3 -s -B $lan_ip >"$work/iperf-server.log" 2>&1 &
pids+=("$!")

suites=(aes-128-cbc:sha1 aes-128-cbc:sha256 aes-256-cbc:sha1 aes-256-cbc:sha256 aes-128-gcm aes-256-gcm)
modprobe -q md5 2>/dev/null || true
if grep -Eq '^name +: md5$' /proc/crypto; then suites+=(aes-128-cbc:md5 aes-256-cbc:md5)
else echo "NOTE: this kernel has no md5: the md5 suites are left out"; fi
[[ -n ${ESPVPN_GP_KERNEL_SUITES:-} ]] && read -r -a suites <<<"$ESPVPN_GP_KERNEL_SUITES"

# check_suite SUITE: one python run (each exec is slow in the guest) judging the
# client's stats, the fake's stats, both iperf3 runs and the kernel's SA counters;
# prints the RESULT line, fails with the reason.
check_suite() {
  xfrm_stats "$nsg" >"$work/xfrm.stats"
  $py - "$1" "$work" "$(sed -n 's/^C2S_SPI=//p' "$work/gw-sa.env")" "$(sed -n 's/^S2C_SPI=//p' "$work/gw-sa.env")" <<'PY'
import json, os, sys
suite, work, c2s, s2c = sys.argv[1:]
load = lambda n: json.load(open(f"{work}/{n}"))
cl, fake = load("cl-stats.json"), load("fake-stats.json")
rate = lambda n, d: load(n)["end"]["sum_received"]["bits_per_second"] / 1e6
up, down = rate("iperf-up.json", 0), rate("iperf-down.json", 0)
sas = {l.split()[0]: [int(x) if x.isdigit() else x for x in l.split()[1:]] for l in open(f"{work}/xfrm.stats")}
spi = lambda s: "0x%08x" % int(s, 16)
k_in, k_out = sas.get(spi(c2s)), sas.get(spi(s2c))
problems = []
# The tun is up a moment before the outbound SA is installed: the kernel's first IPv6
# router solicitation / MLD report may meet no SA (drop_no_sa). Nothing else may drop.
drops = {f"{d}.{k}": v for d in ("tx", "rx") for k, v in cl[d].items()
         if k.startswith("drop_") and v and not (d == "tx" and k == "drop_no_sa" and v <= 2)}
# A datagram the guest's own stack refused (tx.drop_send_error, errno in send_error_errno) is
# not the kernel peer's verdict: exit 2 when that is the only problem, and the suite runs again.
local_only = bool(drops) and set(drops) == {"tx.drop_send_error"}
if drops:
    err = cl["tx"].get("send_error_errno", 0)
    problems.append(f"espvpn drops {drops}" + (f" (send: {os.strerror(err)})" if err else ""))
if cl["rx"]["probe_replies"] < 1: problems.append("no probe reply counted")
if k_in is None or k_out is None: problems.append(f"kernel SAs {c2s}/{s2c} missing: {sorted(sas)}")
else:
    if k_in[0] < 100 or k_out[0] < 100: problems.append(f"kernel SAs counted only {k_in[0]} in / {k_out[0]} out")
    # Packets behind the kernel's 32-packet replay window: reordering on the emulated
    # 2-CPU guest (async AES-NI), not a client fault; up to 5% (2.2% seen) tolerated and printed.
    if k_in[3] or k_in[4]: problems.append(f"kernel c2s replay/integrity failures {k_in[3:5]}")
    if k_in[2] * 20 > k_in[0]: problems.append(f"kernel c2s: {k_in[2]} packets behind the replay window (> 5%)")
    if k_in[0] > cl["tx"]["esp_packets"] or k_out[0] > cl["rx"]["udp_datagrams"]:
        problems.append(f"kernel counts {k_in[0]}/{k_out[0]} exceed espvpn's {cl['tx']['esp_packets']}/{cl['rx']['udp_datagrams']}")
if fake["logouts"] < 1: problems.append("no logout.esp on SIGINT")
print(f"RESULT {suite:<19} PASS" if not problems else f"RESULT {suite:<19} FAIL: {'; '.join(problems)}")
if k_in and k_out:
    print(f"   espvpn tx {cl['tx']['esp_packets']} ESP (drop_no_sa {cl['tx']['drop_no_sa']}), rx {cl['rx']['esp_ok']} ESP "
          f"({cl['rx']['probe_replies']} probe replies); kernel c2s SA {k_in[0]} pkts "
          f"({k_in[2]} behind the replay window), s2c SA {k_out[0]} pkts; "
          f"iperf3 (emulated, not a speed) up {up:.0f} Mbit/s, down {down:.0f} Mbit/s")
sys.exit(0 if not problems else 2 if local_only and len(problems) == 1 else 1)
PY
}

t0=$SECONDS
kernel_peer_warm_up "${suites[@]}" || { echo "FAIL: the kernel refused the SAs of ${suites[*]}"; exit 1; }
echo "kernel algorithms instantiated for ${#suites[@]} suites in $((SECONDS - t0)) s"
failures=0
suite_fail() { echo "RESULT $suite FAIL: $*"; dump; espvpn_down >/dev/null 2>&1; gateway_down; }

# run_suite: one suite end to end; 0 pass, 1 fail, 2 only a datagram the guest's stack refused.
run_suite() {
  t0=$SECONDS
  step "$suite: fake gateway"
  gateway_kernel_up "$suite" || { suite_fail "fake gateway did not start"; return 1; }
  step "$suite: espvpn"
  espvpn_up
  wait_for "$work/espvpn.log" "ESP connected" 60 "$client_pid" || { suite_fail "no ESP: the kernel did not answer the probe"; return 1; }
  step "$suite: ESP connected"
  probe=$(grep -o 'probe answered after [^,]*' "$work/espvpn.log" | head -1)
  v4=$(ip netns exec "$nsc" ping -n -q -c 3 -i 0.2 -W 3 $lan_ip | awk -F/ '/^rtt/ { print $5 " ms" }')
  [[ -n $v4 ]] || { suite_fail "ping $lan_ip through the tunnel"; return 1; }
  v6=$(ip netns exec "$nsc" ping -6 -n -q -c 3 -i 0.2 -W 3 $lan_ip6 | awk -F/ '/^rtt/ { print $5 " ms" }')
  [[ -n $v6 ]] || { suite_fail "ping $lan_ip6 through the tunnel"; return 1; }
  step "$suite: ping v4 $v4, v6 $v6"
  iperf_json 2 "$work/iperf-up.json" || { suite_fail "iperf3 client -> lan"; return 1; }
  iperf_json 2 "$work/iperf-down.json" -R || { suite_fail "iperf3 lan -> client"; return 1; }
  sleep 1.1  # one more --stats-json write after the traffic
  espvpn_down >"$work/down.txt" || { suite_fail "$(cat "$work/down.txt")"; return 1; }
  gateway_down
  local rc=0
  check_suite "$suite" || rc=$?
  ((rc == 0)) || dump
  echo "   $probe; ping v4 avg $v4, v6 avg $v6; SIGINT: exit 0, logout, tun removed; $((SECONDS - t0)) s"
  return $rc
}

for suite in "${suites[@]}"; do
  rc=0
  run_suite || rc=$?
  if ((rc == 2)); then
    echo "NOTE: $suite: the guest's stack refused a datagram (above); the suite runs once more"
    rc=0
    run_suite || rc=$?
  fi
  ((rc == 0)) || failures=$((failures + 1))
done

# Rekey: keys live 6 s, so espvpn fetches new ones every 3 s; each getconfig swaps the
# kernel's states (gp-kernel-sa). A UDP stream must keep flowing across the swaps.
t0=$SECONDS
suite=aes-128-gcm
if [[ ${ESPVPN_GP_KERNEL_REKEY:-1} == 0 ]]; then
  echo "NOTE: rekey case left out (ESPVPN_GP_KERNEL_REKEY=0)"
elif gateway_kernel_up $suite --timeout 6 && espvpn_up &&
   wait_for "$work/espvpn.log" "ESP connected" 60 "$client_pid"; then
  dp=$repo/tests/integration/datapath
  ip netns exec "$nsl" $py "$dp/udp_stream.py" recv $lan_ip 5001 13 >"$work/stream.out" &
  rpid=$!; pids+=("$rpid")
  sleep 0.5
  ip netns exec "$nsc" $py "$dp/udp_stream.py" send $lan_ip 5001 11 100 >"$work/stream-send.out"
  wait "$rpid" || true
  rekeys=$(grep -c "rekey done" "$work/espvpn.log" || true)
  gens=$(wc -l <"$work/kernel-sa/installed")
  v4=$(ip netns exec "$nsc" ping -n -q -c 2 -i 0.2 -W 3 $lan_ip | awk -F/ '/^rtt/ { print $5 " ms" }')
  sleep 1.1
  drops=$(json "$work/cl-stats.json" '" ".join("%s.%s=%d" % (x, k, v) for x in ("tx", "rx") for k, v in d[x].items() if k.startswith("drop_") and v) or "none"')
  stream=$(cat "$work/stream.out") sent=$(cat "$work/stream-send.out")
  why=; espvpn_down >"$work/down.txt" || why=$(cat "$work/down.txt")
  gateway_down
  received=$(sed -n 's/.*received=\([0-9]*\).*/\1/p' <<<"$stream")
  sent_n=${sent#sent=}
  result=PASS problems=
  ((rekeys >= 2)) || problems+=" only $rekeys rekeys in 11 s;"
  ((gens >= rekeys + 1)) || problems+=" the kernel got $gens key generations for $rekeys rekeys;"
  [[ -n $v4 ]] || problems+=" no ping after the rekeys;"
  # Kernel swaps are not atomic with the client's: a few packets may fall in the gap.
  ((${received:-0} * 100 >= ${sent_n:-1} * 95)) || problems+=" the stream lost more than 5%;"
  [[ -z $why ]] || problems+=" $why;"
  [[ -z $problems ]] || { result="FAIL:$problems"; failures=$((failures + 1)); dump; }
  echo "RESULT rekey/$suite $result"
  echo "   $rekeys rekeys, $gens kernel key generations, stream $sent -> $stream (100 pkt/s); espvpn drops: $drops; $((SECONDS - t0)) s"
else
  echo "RESULT rekey/$suite FAIL: tunnel did not come up"; dump; failures=$((failures + 1))
  espvpn_down >/dev/null 2>&1; gateway_down
fi

echo "gp tunnel vs kernel ESP: ${#suites[@]} suites + rekey, $failures failed, $((SECONDS - started)) s in the test"
((failures == 0))
