#!/usr/bin/env bash
# espvpn end to end: the real client logs in to the fake GlobalProtect gateway and
# carries traffic over userspace ESP, in three namespaces of its own:
#   client (espvpn)  --veth--  gateway (fake-gp-gateway + esp-gateway)  --veth--  lan
#
#   gp_tunnel.sh demo|suites|rekey ESPVPN_BIN GATEWAY_BIN
#   demo:   one suite, ping + short iperf3 both ways, the tunnel's counters (tools/demo)
#   suites: GP_TUNNEL_SUITES (default aes-128-gcm aes-128-cbc:sha1 aes-256-cbc:sha256):
#           login, probe answered, ping v4+v6, iperf3 TCP both ways, SIGINT: logout
#           sent, tun removed, exit 0
#   rekey:  gateway lifetime 6 s, so espvpn rekeys every 3 s: >= 3 rekeys during a
#           steady UDP stream through the tunnel; largest gap printed, < 50 ms asserted
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
mode=$1 espvpn=$2 gw_bin=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
py=/usr/bin/python3; [[ -x $py ]] || py=python3
fake=$repo/tools/fake-gp-gateway/fake-gp-gateway
dp=$repo/tests/integration/datapath
p=gt$$
nsc=${p}c nsg=${p}g nsl=${p}l
work=$(mktemp -d /tmp/gp-tunnel.XXXXXX)
pids=()
gw_ip=10.201.0.1 cl_ip=10.201.0.2  # 10.201.0.1 is in the test certificate's SANs
tun_ip=10.200.0.2 tun_ip6=fd00:200::2 gw_addr=10.200.255.1 gw_addr6=fd00:200::ffff
lan_ip=10.202.0.2 lan_ip6=fd00:202::2

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "$nsc" "$nsg" "$nsl"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -25 "$f"; }; done; exit 1; }
say() { [[ $mode == demo ]] && printf '\n== %s\n' "$*" || true; }

for ns in "$nsc" "$nsg" "$nsl"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add "${p}cg" netns "$nsc" type veth peer name "${p}gc" netns "$nsg"
ip link add "${p}gl" netns "$nsg" type veth peer name "${p}lg" netns "$nsl"
ip -n "$nsc" addr add $cl_ip/24 dev "${p}cg"; ip -n "$nsc" link set "${p}cg" up
ip -n "$nsg" addr add $gw_ip/24 dev "${p}gc"; ip -n "$nsg" link set "${p}gc" up
ip -n "$nsg" addr add 10.202.0.1/24 dev "${p}gl"; ip -n "$nsg" addr add fd00:202::1/64 dev "${p}gl" nodad
ip -n "$nsg" link set "${p}gl" up
ip -n "$nsl" addr add $lan_ip/24 dev "${p}lg"; ip -n "$nsl" addr add $lan_ip6/64 dev "${p}lg" nodad
ip -n "$nsl" link set "${p}lg" up
ip -n "$nsl" route add default via 10.202.0.1
ip -n "$nsl" -6 route add default via fd00:202::1
ip netns exec "$nsg" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1

json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
wait_for() {  # FILE PATTERN SECONDS
  for _ in $(seq $(($3 * 10))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# start SUITE [fake options...]: the gateway side, then espvpn logging in and bringing ESP up.
start() {
  local suite=$1; shift
  rm -f "$work"/gw-sa.env "$work"/gw-status "$work"/*.json "$work"/fake.ready "$work"/*.out "$work"/*.log
  ip netns exec "$nsg" $py "$fake" --listen $gw_ip:4443 --esp "$suite" --sa-file "$work/gw-sa.env" \
    --sa-file-format env --sa-hook "$dp/wait_gateway_sa.sh $work/gw-status" --ip $tun_ip --ip6 $tun_ip6 \
    --gw-address $gw_addr --route 10.202.0.0/24 --route6 fd00:202::/64 --ready-file "$work/fake.ready" \
    --stats-file "$work/fake-stats.json" --log-file "$work/fake.log" --max-runtime 500 "$@" \
    >"$work/fake.out" 2>&1 &
  fake_pid=$!; pids+=("$fake_pid")
  ip netns exec "$nsg" "$gw_bin" --sa-file "$work/gw-sa.env" --tun-address $gw_addr/32 \
    --tun-address $gw_addr6/128 --route $tun_ip/32 --route $tun_ip6/128 --udp-local $gw_ip:4501 \
    --status-file "$work/gw-status" --stats-json "$work/gw-stats.json" --stats-interval-ms 200 \
    --seconds 500 >"$work/gw.out" 2>&1 &
  gw_pid=$!; pids+=("$gw_pid")
  wait_for "$work/fake.ready" pid 15 || fail "fake gateway did not start"
  say "espvpn --protocol=gp https://$gw_ip:4443/ (password on stdin)"
  echo secret | ip netns exec "$nsc" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin --stats-json "$work/cl-stats.json" \
    https://$gw_ip:4443/ >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_for "$work/espvpn.log" "ESP connected" 30 || fail "$suite: espvpn did not bring ESP up"
  [[ $mode == demo ]] && grep -E "ESP |ESP connected|tun device|handshake" "$work/espvpn.log" | sed 's/^/   /'
  return 0
}

stop() {  # SIGINT: logout, tun removed, exit 0
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  [[ $(json "$work/fake-stats.json" 'd["logouts"]') -ge 1 ]] || fail "no logout.esp sent on SIGINT"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  kill -TERM "$gw_pid" "$fake_pid" 2>/dev/null || true
  wait "$gw_pid" 2>/dev/null || true
  wait "$fake_pid" 2>/dev/null || true
}

iperf_gbps() {  # SECONDS [-R]
  timeout $(($1 + 30)) ip netns exec "$nsc" iperf3 -c $lan_ip -t "$1" ${2:-} -J >"$work/iperf.json" \
    || fail "iperf3 $*"
  json "$work/iperf.json" '"%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9)'
}

ip netns exec "$nsl" iperf3 -s -B $lan_ip >"$work/iperf-server.log" 2>&1 &
pids+=("$!")

case $mode in
demo)
  start aes-128-gcm
  say "ping through the tunnel to the lan host $lan_ip"
  ip netns exec "$nsc" ping -c 3 -i 0.3 -W 2 $lan_ip || fail "ping"
  ip netns exec "$nsc" ping -6 -c 2 -i 0.3 -W 2 $lan_ip6 || fail "ping6"
  say "iperf3 TCP, 3 s each way"
  echo "   client -> lan: $(iperf_gbps 3) Gbit/s"
  echo "   lan -> client: $(iperf_gbps 3 -R) Gbit/s"
  say "tunnel counters (espvpn --stats-json)"
  sleep 1.2
  json "$work/cl-stats.json" '"   tx: %d ESP packets, %d drops; rx: %d ESP packets, %d probe replies, %d drops" % (d["tx"]["esp_packets"], sum(v for k,v in d["tx"].items() if k.startswith("drop_")), d["rx"]["esp_ok"], d["rx"]["probe_replies"], sum(v for k,v in d["rx"].items() if k.startswith("drop_")))'
  say "SIGINT: espvpn logs out and removes its tun"
  stop
  echo "   done: logout sent, tun removed"
  ;;
suites)
  for suite in ${GP_TUNNEL_SUITES:-aes-128-gcm aes-128-cbc:sha1 aes-256-cbc:sha256}; do
    start "$suite"
    ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "$suite: ping $lan_ip"
    ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "$suite: ping $lan_ip6"
    up=$(iperf_gbps 2) || exit 1
    down=$(iperf_gbps 2 -R) || exit 1
    grep -q "over 1 TLS handshake" "$work/espvpn.log" || fail "$suite: login took more than one TLS handshake"
    stop
    echo "RESULT $suite: login, probe answered, ping v4+v6, iperf3 up $up Gbit/s down $down Gbit/s, SIGINT -> logout, tun removed"
  done
  ;;
rekey)
  start aes-128-gcm --timeout 6
  ip netns exec "$nsl" $py "$dp/udp_stream.py" recv $lan_ip 5001 14 >"$work/stream.out" &
  rpid=$!; pids+=("$rpid")
  sleep 0.5
  ip netns exec "$nsc" $py "$dp/udp_stream.py" send $lan_ip 5001 12 200 >/dev/null
  wait "$rpid" || true
  rekeys=$(grep -c "rekey done" "$work/espvpn.log" || true)
  gap=$(sed -n 's/.*max_gap_ms=\([0-9.]*\).*/\1/p' "$work/stream.out")
  echo "RESULT rekeys=$rekeys $(cat "$work/stream.out")"
  [[ $rekeys -ge 3 ]] || fail "only $rekeys rekeys in 12 s"
  $py -c "import sys; sys.exit(0 if float('$gap') < 50 else 1)" || fail "largest gap ${gap} ms >= 50 ms"
  stop
  ;;
*) echo "usage: $0 demo|suites|rekey ESPVPN GATEWAY" >&2; exit 2 ;;
esac
