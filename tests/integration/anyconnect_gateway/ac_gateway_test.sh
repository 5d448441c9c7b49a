#!/usr/bin/env bash
# The project's AnyConnect gateway (tools/https-tunnel-gateway/anyconnect.cpp, the tools/bench
# AnyConnect rows' gateway) against real clients, in the shared three-namespace topology
# (tools/netns/gp-topology.sh): its DTLS records are ours (crypto/dtls_record), openconnect's are
# GnuTLS's, so the openconnect modes check our record code against another implementation.
#   ac_gateway_test.sh MODE ESPVPN ANYCONNECT_GATEWAY
#   espvpn_dtls:      espvpn over DTLS: ping v4 + v6, iperf3 TCP both ways; espvpn's --stats-json
#                     and the gateway's counters say DTLS carried it, nothing discarded
#   openconnect_dtls: openconnect 9.01 over DTLS, once per cipher the gateway is limited to
#                     (AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305): openconnect names the cipher,
#                     ping, iperf3 both ways, the gateway's DTLS counters (no record discarded)
#   cstp:             espvpn, then openconnect, with --no-dtls: ping, iperf3 both ways, the gateway's
#                     CSTP counters; no DTLS
#   wrong_password:   espvpn with a wrong password: a login error, exit 1 (auth), no tunnel;
#                     the gateway logged the refusal and opened no tunnel
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
mode=$1 espvpn=$2 ac_bin=$3
repo=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d) pids=()
# shellcheck source=../../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"
trap topo_cleanup EXIT
fail() { echo "FAIL $mode: $*"; for f in "$work"/*.log; do echo "--- ${f##*/}"; tail -20 "$f"; done; exit 1; }
topo_up

# client_up NAME espvpn|openconnect [options]: starts the client (log $work/NAME.log), sets cpid.
client_up() {
  local name=$1 client=$2; shift 2
  if [[ $client == espvpn ]]; then
    echo "${password:-test123}" | ip netns exec "$nsc" "$espvpn" --protocol=anyconnect --cafile "$repo/certs/ca.pem" \
      -u testuser --passwd-on-stdin --stats-json "$work/$name-stats.json" "$@" "https://$gw_ip:4443/" \
      >"$work/$name.out" 2>"$work/$name.log" &
  else
    echo test123 | ip netns exec "$nsc" openconnect --cafile "$repo/certs/ca.pem" -u testuser --passwd-on-stdin \
      --script "$repo/tools/netns/minimal-vpnc-script" "$@" "https://$gw_ip:4443/" >"$work/$name.log" 2>&1 &
  fi
  cpid=$!; pids+=("$cpid")
}
client_down() {  # SIGINT; the client must exit 0
  kill -INT "$cpid"
  local rc=0
  wait "$cpid" || rc=$?
  [[ $rc -eq 0 ]] || fail "client exited $rc after SIGINT"
}
# traffic NAME: ping v4 (and v6 with 6), iperf3 TCP 2 s up and down; fails on loss or no data.
traffic() {
  local i
  for ((i = 0; i < 100; i++)); do ip netns exec "$nsc" ping -c 1 -W 1 $lan_ip >/dev/null 2>&1 && break; sleep 0.1; done
  ip netns exec "$nsc" ping -c 5 -i 0.2 -W 2 $lan_ip >"$work/$1-ping.out" 2>&1 || fail "$1: ping $lan_ip"
  if [[ ${2:-} == 6 ]]; then
    ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >"$work/$1-ping6.out" 2>&1 || fail "$1: ping -6 $lan_ip6"
  fi
  local dir mbps
  for dir in up down; do
    ip netns exec "$nsl" iperf3 -s -1 -B $lan_ip >/dev/null 2>&1 &
    pids+=($!)
    wait_listening "$nsl" tcp 5201 10 || fail "iperf3 server did not start"
    iperf_json 2 "$work/$1-$dir.json" $([[ $dir == down ]] && echo -R) || fail "$1: iperf3 $dir"
    mbps=$(json "$work/$1-$dir.json" "int(d['end']['sum_received']['bits_per_second'] / 1e6)")
    ((mbps > 0)) || fail "$1: iperf3 $dir moved nothing"
    echo "$1: iperf3 $dir $mbps Mbit/s"
  done
}
# gateway_check EXPR: the Python EXPR over d (the gateway's counters of the tunnel that just ended).
gateway_check() {
  local i
  for ((i = 0; i < 200; i++)); do [[ -s $work/ac-stats.json ]] && break; sleep 0.1; done  # a bound, not a pause
  json "$work/ac-stats.json" "$1" | grep -qx True || fail "gateway counters: not ($1): $(cat "$work/ac-stats.json" 2>/dev/null)"
}

case $mode in
espvpn_dtls)
  gateway_anyconnect_up || fail "anyconnect-gateway did not start"
  client_up dtls espvpn
  wait_for "$work/dtls.log" "data over DTLS" 20 "$cpid" || fail "espvpn: no DTLS"
  grep -q "DTLS up .*(DTLS1.2)-(PSK)-.*records by espvpn" "$work/dtls.log" || fail "espvpn's DTLS line: $(grep 'DTLS up' "$work/dtls.log")"
  grep -q "DTLS up: (DTLS1.2)-(PSK)-.*records by espvpn" "$work/ac.log" || fail "the gateway's DTLS line"
  traffic dtls 6
  client_down
  json "$work/dtls-stats.json" "d['transport'] == 'dtls' and d['dtls']['datapath']['tx']['inner_packets'] > 1000 and \
d['dtls']['datapath']['rx']['inner_packets'] > 1000 and d['dtls']['datapath']['rx']['drop_discarded'] == 0" | grep -qx True ||
    fail "espvpn's stats: $(cat "$work/dtls-stats.json")"
  gateway_check "d['tunnels'] == 1 and d['dtls']['rx']['inner_packets'] > 1000 and d['dtls']['tx']['inner_packets'] > 1000 \
and d['dtls']['rx']['drop_discarded'] == 0 and d['cstp']['rx_packets'] < 100"
  ;;
openconnect_dtls)
  for cipher in AES-128-GCM AES-256-GCM CHACHA20-POLY1305; do
    gateway_anyconnect_up --dtls-priority "NORMAL:-CIPHER-ALL:+$cipher" || fail "anyconnect-gateway did not start"
    client_up "oc-$cipher" openconnect
    wait_for "$work/oc-$cipher.log" "Established DTLS connection" 20 "$cpid" || fail "openconnect: no DTLS with $cipher"
    grep -q "Established DTLS connection.*(DTLS1.2)-(PSK)-($cipher)" "$work/oc-$cipher.log" ||
      fail "openconnect's DTLS is not $cipher: $(grep 'Established DTLS' "$work/oc-$cipher.log")"
    grep -q "DTLS up: (DTLS1.2)-(PSK)-($cipher).*records by espvpn" "$work/ac.log" || fail "the gateway's DTLS line ($cipher)"
    traffic "oc-$cipher"
    client_down
    gateway_down
    gateway_check "d['dtls']['rx']['inner_packets'] > 1000 and d['dtls']['tx']['inner_packets'] > 1000 \
and d['dtls']['rx']['drop_discarded'] == 0 and d['cstp']['rx_packets'] < 100"
    echo "openconnect DTLS $cipher: $(json "$work/ac-stats.json" "'gateway rx %d tx %d records' % (d['dtls']['rx']['records'], d['dtls']['tx']['records'])")"
  done
  ;;
cstp)
  for client in espvpn openconnect; do
    gateway_anyconnect_up || fail "anyconnect-gateway did not start"
    client_up "cstp-$client" $client --no-dtls
    traffic "cstp-$client"
    client_down
    gateway_down
    gateway_check "d['dtls'] is None and d['cstp']['rx_packets'] > 1000 and d['cstp']['tx_packets'] > 1000"
  done
  ! grep -q "DTLS up\|DTLS offered" "$work/cstp-espvpn.log" || fail "espvpn --no-dtls used DTLS: $(grep DTLS "$work/cstp-espvpn.log")"
  ;;
wrong_password)
  gateway_anyconnect_up || fail "anyconnect-gateway did not start"
  password=wrong client_up bad espvpn
  rc=0
  for ((i = 0; i < 300; i++)); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
  wait "$cpid" || rc=$?
  [[ $rc -ne 0 ]] || fail "espvpn accepted a wrong password"
  grep -qi "login failed" "$work/bad.log" || fail "espvpn did not say the login failed: $(tail -3 "$work/bad.log")"
  grep -q "login refused for 'testuser'" "$work/ac.log" || fail "the gateway did not refuse the login"
  ! grep -q "tunnel 1 up" "$work/ac.log" || fail "the gateway opened a tunnel"
  echo "espvpn exit $rc: $(grep -i 'login failed' "$work/bad.log" | head -1)"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "PASS $mode"
