#!/usr/bin/env bash
# espvpn end to end: the real client logs in to the fake GlobalProtect gateway and
# carries traffic over userspace ESP, in three namespaces of its own:
#   client (espvpn)  --veth--  gateway (fake-gp-gateway + esp-gateway)  --veth--  lan
#
#   gp_tunnel.sh demo|suites|one_at_a_time|script|blocked|sigusr2|repeated_key|nodtls|rekey ESPVPN_BIN GATEWAY_BIN
#   demo:   one suite, ping + short iperf3 both ways, the tunnel's counters (tools/demo)
#   suites: GP_TUNNEL_SUITES (default aes-128-gcm aes-128-cbc:sha1 aes-256-cbc:sha256):
#           login, probe answered, ping v4+v6, iperf3 TCP both ways, SIGINT: logout
#           sent, tun removed, exit 0
#   one_at_a_time: a gateway that sends one datagram at a time (esp-gateway --no-udp-offload, as
#           ASAs and PAN-OS send): during a download the client's rx thread waits for more data
#           after its wake-ups (rx.lingers grows, src/datapath/rx_linger.h), never during the
#           upload before it (only ACKs arrive then); both directions carry their iperf3 run
#   session_killed: the session process killed by SIGSYS with the tunnel up (--kill-switch, built-in
#           DNS): the broker restores tun, routes, DNS and kill switch, exits non-zero, says why
#   script: the same with --script (a minimal vpnc-script) instead of the built-in setup
#   blocked: UDP to the gateway's ESP port dropped (nftables, gateway namespace): espvpn
#           falls back to the HTTPS tunnel within the probe timeout (5 s), ping + iperf3
#           TCP both ways through it; UDP let through again: back on ESP (stats JSON),
#           traffic still flowing; SIGINT: logout, tun removed, exit 0
#   nodtls: the tunnel GET refused (502): exit 2; --no-dtls: the HTTPS tunnel from the
#           start, no UDP at all; ping v4+v6 and iperf3 both ways; then openconnect 9.01
#           --no-dtls against the same gateway
#   native_https: espvpn --no-dtls and openconnect --no-dtls through tools/https-tunnel-gateway
#           (the HTTPS tunnel's gateway end on the project's TLS pump) in front of the fake
#   rekey:  gateway lifetime 6 s, so espvpn rekeys every 3 s: >= 3 rekeys during a
#           steady UDP stream through the tunnel; largest gap printed, < 50 ms asserted; a HIP
#           check after each rekey
#   repeated_key: a gateway that hands out the same ESP keys at every getconfig (the fake's
#           --repeat-keys): SIGUSR2's rekey is refused, naming the repeated key, and the session
#           ends (exit 1, tun removed) instead of reusing AES-GCM nonces under the old key
#   sigusr2: SIGUSR2 on ESP: new keys by a getconfig (no new login), the probe again and
#           answered, ESP kept; then a gateway with no gw-address (nothing to probe): ESP is
#           assumed up and stays up across SIGUSR2 (no HTTPS fallback after the probe timeout)
#   outer_v6_esp: the gateway reachable over IPv6 only: https://vpn.test:4443/ (a name with only
#           an AAAA record), then the portal's [fd00:201::1]:4443; login over TCPv6, ESP over
#           UDPv6 (GSO/GRO), Debian's vpnc-script sets up the host (VPNGATEWAY is the v6 address,
#           its host route to the gateway a v6 route off the tunnel); tun MTU 1310 (v4: 1342) on
#           a 1406-byte link, full-size DF packets pass, no outer fragments; ping v4+v6, iperf3
#           TCP both ways, stats say esp; SIGINT: logout, tun removed, host route gone
#   outer_v6_https: the same gateway with UDP dropped in the client namespace (nftables): the
#           HTTPS tunnel over TCPv6 carries ping v4+v6 and iperf3 both ways; UDP let through:
#           back on ESP; dropped again: ESP DPD declares it dead, HTTPS again; --no-dtls:
#           the HTTPS-only MTU for a TCPv6 outer (1297)
#   full_tunnel: the client namespace has default routes (v4 via the gateway namespace, v6
#           too: the "user's"); the gateway sends no access routes (--full-tunnel) and excludes
#           10.202.0.128/25 and 2001:db8:ff::/48: the built-in setup routes the lan host and
#           any other address (198.51.100.7, 2001:db8::7) through the tun, the gateway
#           10.201.0.1 and the excluded prefixes not; ping + iperf3 through the tunnel, ESP
#           counters grow; SIGINT: the route tables are exactly as before (defaults untouched,
#           nothing of ours left)
#   outer_v6_openconnect: openconnect 9.01 --protocol=gp to the same v6 gateway: ESP established,
#           ping through it (the gateway side of the v6 tests is right)
#   hip:    a gateway that enforces HIP (fake --hip-enforce: a session whose last report is older
#           than the portal's hip-report-interval, 4 s, + 4 s of grace is ended and its ESP keys
#           revoked): espvpn renews the report every 2 s and keeps the tunnel (ping through it)
#           across three intervals, no session ended (a client that reports only at the login is
#           cut off 8 s after it); then a --csd-wrapper that fails once and hangs once (killed at
#           its 5 s timeout): both logged, retried, the tunnel stays up; SIGINT while the wrapper
#           hangs: the check is cancelled, the wrapper killed, logout, exit 0
#   hip_openconnect: openconnect 9.01 and espvpn, the same command line (--force-trojan=2
#           --csd-wrapper=openconnect's hipreport.sh), each against the enforcing gateway: both
#           keep the tunnel across three intervals
# shellcheck source=../gp_test_head.sh
. "$(dirname "$0")/../gp_test_head.sh" gp-tunnel "$@"
say() { [[ $mode == demo ]] && printf '\n== %s\n' "$*" || true; }
topo_up

# launch: espvpn logging in to the gateway (already up) with client_args.
launch() {
  rm -f "$work"/cl-stats.json "$work"/espvpn.out "$work"/espvpn.log
  say "espvpn --protocol=gp https://$gw_outer:4443/ (password on stdin)"
  echo secret | ip netns exec "$nsc" $chrt "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin --stats-json "$work/cl-stats.json" "${client_args[@]}" \
    "${client_url:-https://$gw_outer:4443/}" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
}

# start SUITE [fake options...]: the gateway side, then espvpn logging in and bringing ESP up.
start() {
  local suite=$1; shift
  rm -f "$work"/*.json "$work"/*.out "$work"/*.log
  gateway_up "$suite" "$@" || fail "fake gateway did not start"
  launch
  wait_for "$work/espvpn.log" "ESP connected" 30 || fail "$suite: espvpn did not bring ESP up"
  [[ $mode == demo ]] && grep -E "ESP |ESP connected|tun device|handshake" "$work/espvpn.log" | sed 's/^/   /'
  return 0
}

# client_stat EXPR: a value from espvpn's stats JSON, fresh (it is rewritten every second).
client_stat() { sleep 1.2; json "$work/cl-stats.json" "$1"; }
# client_until EXPR: the stats JSON comes to say EXPR (True), within 15 s. A verdict on the
# state after an event: the file seen after a fixed sleep may still be from before it (its
# first write is 1 s after the tunnel comes up, later on a loaded machine).
client_until() { stats_until "$work/cl-stats.json" "$1" 15; }
# log_ms PATTERN: the time of day (ms) of espvpn's first log line matching PATTERN (--timestamp).
log_ms() {
  grep -m1 "$1" "$work/espvpn.log" | awk '{ split($2, t, /[:.]/); print ((t[1] * 60 + t[2]) * 60 + t[3]) * 1000 + t[4] }'
}
# https_side_idle: the fake let go of the gateway's HTTPS-side tun (the client closed the
# HTTPS tunnel), so the lan's replies take ESP again (gateway_https_up).
https_side_idle() { carrier "$nsg" "$ht_dev" no 15 || fail "the gateway's HTTPS-side tun kept its carrier"; }
# route_via_tun: the client's route to the lan host is through a tun (a script may still be adding it).
route_via_tun() {
  local end=$((SECONDS + 15))
  while ((SECONDS < end)); do ip -n "$nsc" route get $lan_ip 2>/dev/null | grep -q " dev tun" && return 0; sleep 0.1; done
  fail "no route to $lan_ip through a tun device"
}

# traffic LABEL: ping + iperf3 TCP 2 s each way to the lan host; prints "up X down Y Mbit/s".
traffic() {
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "$1: ping $lan_ip"
  local up down
  up=$(iperf_gbps 2) || exit 1
  down=$(iperf_gbps 2 -R) || exit 1
  awk -v u="$up" -v d="$down" 'BEGIN { printf "up %.0f down %.0f Mbit/s", u * 1000, d * 1000 }'
}

block_esp() {  # drop UDP to the ESP port in the gateway namespace
  ip netns exec "$nsg" nft -f - <<NFT
table inet gp_tunnel_block {
  chain in { type filter hook input priority 0; udp dport 4501 drop; }
}
NFT
}
unblock_esp() { ip netns exec "$nsg" nft delete table inet gp_tunnel_block; }

stop() {  # SIGINT: logout, tun removed, exit 0
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  [[ $(json "$work/fake-stats.json" 'd["logouts"]') -ge 1 ]] || fail "no logout.esp sent on SIGINT"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  gateway_down
}

iperf_gbps() {  # SECONDS [-R]
  iperf_json "$1" "$work/iperf.json" ${2:-} || fail "iperf3 $*"
  json "$work/iperf.json" '"%.4f" % (d["end"]["sum_received"]["bits_per_second"]/1e9)'
}

client_args=()
chrt=""
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
  host_resolv=$(sha256sum /etc/resolv.conf 2>/dev/null || echo none)
  for suite in ${GP_TUNNEL_SUITES:-aes-128-gcm aes-128-cbc:sha1 aes-256-cbc:sha256}; do
    start "$suite"
    # The built-in DNS setup writes the client namespace's stand-in (gp-topology.sh), not the host's file.
    grep -q "^# written by espvpn" "/etc/netns/$nsc/resolv.conf" || fail "$suite: the VPN's DNS servers were not applied"
    [[ $(sha256sum /etc/resolv.conf 2>/dev/null || echo none) == "$host_resolv" ]] || fail "$suite: the host's /etc/resolv.conf changed"
    ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "$suite: ping $lan_ip"
    ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "$suite: ping $lan_ip6"
    up=$(iperf_gbps 2) || exit 1
    down=$(iperf_gbps 2 -R) || exit 1
    grep -q "over 1 TLS handshake" "$work/espvpn.log" || fail "$suite: login took more than one TLS handshake"
    # The ESP threads run under their seccomp filter (src/sandbox), the control thread does not.
    why=$(pipelines_confined "$client_pid" 2) || fail "$suite: $why"
    why=$(privsep_checked "$client_pid") || fail "$suite: $why"
    grep -q $'^Seccomp:\t0$' "/proc/$client_pid/status" || fail "$suite: the main thread is under a filter"
    # The SAs reach the datapath before its first tun read: nothing dropped for want of one.
    [[ $(client_stat 'd["tx"]["drop_no_sa"]') -eq 0 ]] || fail "$suite: packets dropped before the SA was installed"
    stop
    [[ $(cat "/etc/netns/$nsc/resolv.conf") == $'nameserver 192.0.2.53\nsearch home.test' ]] || fail "$suite: DNS not restored"
    echo "RESULT $suite: login, probe answered, ping v4+v6, iperf3 up $up Gbit/s down $down Gbit/s, SIGINT -> logout, tun removed"
  done
  ;;
one_at_a_time)
  esp_gw_args=(--no-udp-offload)
  start aes-128-gcm
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip"
  up=$(iperf_gbps 2) || exit 1
  after_up=$(client_stat 'd["rx"]["lingers"]')
  [[ $after_up -eq 0 ]] || fail "the rx thread waited $after_up times while only the upload's ACKs arrived"
  down=$(iperf_gbps 2 -R) || exit 1
  client_until 'd["rx"]["lingers"] > 0' || fail "the rx thread never waited during the download"
  lingers=$(client_stat 'd["rx"]["lingers"]')
  stop
  echo "RESULT one_at_a_time: upload $up Gbit/s (0 rx lingers), download $down Gbit/s ($lingers rx lingers)"
  ;;
session_killed)
  # The privilege split (docs/SECURITY.md): the session process dies by SIGSYS (what a seccomp
  # filter does to a forbidden call) while the tunnel is up with --kill-switch and the built-in
  # DNS: the broker takes the host down (tun, routes, DNS, kill switch) and exits non-zero, saying why.
  routes_before=$(ip -n "$nsc" route show; ip -n "$nsc" -6 route show)
  client_args=(--kill-switch)
  start aes-128-gcm
  why=$(privsep_checked "$client_pid") || fail "$why"
  ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null || fail "--kill-switch: no table"
  grep -q "^# written by espvpn" "/etc/netns/$nsc/resolv.conf" || fail "the VPN's DNS servers were not applied"
  session=$(session_of "$client_pid")
  kill -SYS "$session"
  wait_until 20 eval '! kill -0 "$client_pid" 2>/dev/null' || fail "the broker is still running 20 s after its session died"
  rc=0; wait "$client_pid" || rc=$?
  ((rc != 0)) || fail "the broker exited 0 after its session was killed"
  grep -q "the session process was killed by SIGSYS (a forbidden system call); the tunnel is down" "$work/espvpn.log" \
    || fail "the broker did not say why the tunnel went down"
  no_tun_left "$nsc" || fail "tun device left behind"
  ! ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null 2>&1 || fail "the kill switch table was left behind"
  [[ $(cat "/etc/netns/$nsc/resolv.conf") == $'nameserver 192.0.2.53\nsearch home.test' ]] || fail "DNS not restored"
  [[ $(ip -n "$nsc" route show; ip -n "$nsc" -6 route show) == "$routes_before" ]] || fail "routes not restored"
  gateway_down
  echo "RESULT session_killed: session killed by SIGSYS -> broker exit $rc, tun, routes, DNS and kill switch restored"
  ;;
script)
  # The host setup done by a vpnc-script instead of the built-in netlink setup.
  # Also --dtls-local-port: the ESP socket's local port is the one asked for.
  client_args=(--script "$repo/tools/netns/minimal-vpnc-script" --dtls-local-port 4555)
  start aes-128-cbc:sha1
  ip netns exec "$nsc" ss -Hnu state all "sport = :4555" | grep -q . || fail "--dtls-local-port 4555: no UDP socket on 4555"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip with --script"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6 with --script"
  stop
  echo "RESULT script: vpnc-script set address and split routes; ping v4+v6 through the tunnel; ESP from local port 4555"
  ;;
blocked)
  gateway_https_up
  block_esp
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start"
  client_args=(--esp-retry-interval 2 --force-dpd 2 --timestamp)  # --timestamp: log_ms below
  t0=$(date +%s%N)
  launch
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 || fail "no fallback to the HTTPS tunnel"
  took_ms=$((($(date +%s%N) - t0) / 1000000))  # login included: printed, not judged
  grep -q "switching to the HTTPS tunnel: no answer to the ESP probe within 5 s" "$work/espvpn.log" \
    || fail "the switch to HTTPS was not logged with its reason"
  # The probe timeout on espvpn's own clock (its log), from the ESP start to the switch: 5 s,
  # plus the main loop's 100 ms poll (3 s of slack for a loaded machine).
  probe_ms=$(($(log_ms "switching to the HTTPS tunnel") - $(log_ms "ESP [^ ]* to ")))
  ((probe_ms >= 4990 && probe_ms < 8000)) || fail "the probe gave up after ${probe_ms} ms, not 5 s"
  client_until 'd["transport"] == "https"' || fail "stats JSON does not say https: $(cat "$work/cl-stats.json")"
  why=$(pipelines_confined "$client_pid" 2) || fail "HTTPS tunnel: $why"
  on_https=$(traffic "on HTTPS")
  client_until 'd["https"]["rx_packets"] > 1000 and d["https"]["tx_packets"] > 1000' \
    || fail "HTTPS counters do not show the traffic: $(cat "$work/cl-stats.json")"
  unblock_esp
  wait_for "$work/espvpn.log" "switching back to ESP" 20 || fail "did not go back to ESP after UDP was unblocked"
  https_side_idle
  on_esp=$(traffic "back on ESP")
  client_until 'd["transport"] == "esp" and d["transport_switches"] == 2 and d["tx"]["esp_packets"] > 1000 and d["tx"]["drop_no_sa"] == 0' \
    || fail "stats after the switch back (esp, 2 switches, ESP counters): $(cat "$work/cl-stats.json")"
  [[ $(json "$work/fake-stats.json" 'd["tunnels"]') -eq 1 ]] || fail "expected exactly one HTTPS tunnel"
  # ESP dying later (nothing received for 2 x --force-dpd = 4 s): the HTTPS tunnel again.
  block_esp
  wait_for "$work/espvpn.log" "switching to the HTTPS tunnel: ESP dead" 15 || fail "no fallback when ESP died"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping after ESP died"
  client_until 'd["transport"] == "https" and d["transport_switches"] == 3' \
    || fail "after ESP died: $(cat "$work/cl-stats.json")"
  stop
  echo "RESULT blocked: HTTPS tunnel up ${took_ms} ms after start (probe gave up after ${probe_ms} ms); on HTTPS $on_https; UDP unblocked -> ESP: $on_esp; ESP died -> HTTPS again"
  ;;
sigusr2)
  start aes-128-gcm
  kill -USR2 "$client_pid"
  wait_for "$work/espvpn.log" "rekey done" 30 || fail "SIGUSR2: no new keys"
  end=$((SECONDS + 20))
  while (($(grep -c "ESP connected: probe answered" "$work/espvpn.log") < 2)); do
    ((SECONDS < end)) || fail "SIGUSR2: the probe on the new keys was not answered"
    sleep 0.2
  done
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping after SIGUSR2"
  client_until 'd["transport"] == "esp" and d["transport_switches"] == 0' || fail "after SIGUSR2: $(cat "$work/cl-stats.json")"
  [[ $(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)') -eq 1 ]] \
    || fail "SIGUSR2 made a new login"
  stop
  # No gw-address: ESP assumed up; SIGUSR2 must not wait for a probe that cannot be answered.
  gateway_up aes-128-gcm --gw-address "" || fail "fake gateway did not start (no gw-address)"
  launch
  wait_for "$work/espvpn.log" "no gw-address to probe: ESP assumed up" 30 || fail "no gw-address: ESP not assumed up"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "no gw-address: ping"
  kill -USR2 "$client_pid"
  wait_for "$work/espvpn.log" "rekey done" 30 || fail "no gw-address, SIGUSR2: no new keys"
  sleep 8  # longer than the 5 s probe timeout: the fallback it would have caused comes before
  ! grep -q "switching to the HTTPS tunnel" "$work/espvpn.log" || fail "no gw-address: SIGUSR2 led to the HTTPS tunnel"
  client_until 'd["transport"] == "esp" and d["transport_switches"] == 0' || fail "no gw-address after SIGUSR2: $(cat "$work/cl-stats.json")"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "no gw-address: ping after SIGUSR2"
  stop
  echo "RESULT sigusr2: new keys without a login, probe answered, ESP kept; without a gw-address ESP stays up across SIGUSR2"
  ;;
repeated_key)
  start aes-128-gcm --repeat-keys
  ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "repeated keys: ping on the first SA"
  kill -USR2 "$client_pid"
  wait_for "$work/espvpn.log" "that this session has used before" 30 || fail "repeated keys: the rekey was not refused"
  end=$((SECONDS + 20))
  while kill -0 "$client_pid" 2>/dev/null; do
    ((SECONDS < end)) || fail "repeated keys: espvpn kept running after refusing the rekey"
    sleep 0.2
  done
  rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 1 ]] || fail "repeated keys: espvpn exited $rc (expected 1)"
  ! grep -q "rekey done" "$work/espvpn.log" || fail "repeated keys: the old key was installed again"
  [[ $(json "$work/fake-stats.json" 'd["getconfigs"]') -ge 2 ]] || fail "repeated keys: no second getconfig"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "repeated keys: tun device left behind"
  gateway_down
  echo "RESULT repeated_key: $(grep -m1 "used before" "$work/espvpn.log")"
  ;;
nodtls)
  # A gateway refusing the tunnel GET (HTTP 502: cookie rejected) ends it like openconnect: exit 2.
  gateway_up aes-128-gcm --no-tunnel || fail "fake gateway did not start (--no-tunnel)"
  rc=0
  echo secret | timeout 60 ip netns exec "$nsc" "$espvpn" --protocol=gp --no-dtls --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin https://$gw_ip:4443/ >"$work/espvpn.out" 2>"$work/espvpn.log" || rc=$?
  [[ $rc -eq 2 ]] || fail "tunnel GET refused with 502: espvpn exited $rc (expected 2)"
  grep -q "HTTP 502" "$work/espvpn.log" || fail "the 502 refusal is not named in the log"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind after the 502"
  gateway_down
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start"
  client_args=(--no-dtls)
  launch
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 || fail "--no-dtls: no HTTPS tunnel"
  grep -q "using the HTTPS tunnel: --no-dtls" "$work/espvpn.log" || fail "--no-dtls not logged as the reason"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6 over HTTPS"
  ours=$(traffic "--no-dtls")
  client_until 'd["transport"] == "https" and d["tx"]["esp_packets"] == 0 and d["tx"]["probes_sent"] == 0' \
    || fail "--no-dtls sent ESP or does not report https: $(cat "$work/cl-stats.json")"
  stop
  # openconnect 9.01 as the reference, on the same gateway and routes.
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start (openconnect)"
  echo secret | ip netns exec "$nsc" openconnect --protocol=gp --usergroup=gateway --no-dtls \
    --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin --script "$repo/tools/netns/minimal-vpnc-script" \
    https://$gw_ip:4443/ >"$work/oc.log" 2>&1 &
  oc_pid=$!; pids+=("$oc_pid")
  wait_for "$work/fake-stats.json" '"tunnels": 1' 30 || fail "openconnect did not open the HTTPS tunnel"
  carrier "$nsg" "$ht_dev" yes 15 || fail "the fake did not attach to the HTTPS-side tun"
  route_via_tun  # openconnect's script
  theirs=$(traffic "openconnect --no-dtls")
  kill -INT "$oc_pid"; wait "$oc_pid" 2>/dev/null || true
  gateway_down
  echo "RESULT nodtls: espvpn $ours; openconnect 9.01 --no-dtls $theirs"
  ;;
native_https)
  # The HTTPS tunnel's gateway end on the project's own TLS pump (tools/https-tunnel-gateway,
  # what tools/bench measures the HTTPS rows against), in front of the fake gateway: espvpn
  # --no-dtls, then openconnect 9.01 --no-dtls, carry ping v4+v6 and iperf3 both ways; the fake
  # saw the login and the tunnel GET, the native end the frames.
  gateway_native_https_up || fail "the native HTTPS end did not start"
  client_args=(--no-dtls --force-dpd 2)
  launch
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 || fail "espvpn: no HTTPS tunnel through the native end"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6 through the native end"
  ours=$(traffic "espvpn, native end")
  # Idle: espvpn's keepalives (every 1 s with --force-dpd 2) are echoed, so its DPD keeps the tunnel.
  client_until 'd["transport"] == "https" and d["https"]["rx_packets"] > 1000 and d["https"]["rx_keepalives"] >= 3' \
    || fail "espvpn does not report the HTTPS tunnel, or no keepalive echoed: $(cat "$work/cl-stats.json")"
  # (HIP's schedule line names reconnects too: not a sign of one.)
  ! grep -v '^HIP:' "$work/espvpn.log" | grep -qi "dead\|reconnect" \
    || fail "the idle tunnel was declared dead: $(grep -v '^HIP:' "$work/espvpn.log" | grep -i 'dead\|reconnect' | head -3)"
  stop
  h='d["stats"]["https"]'
  stats_until "$work/ht-stats.json" "d['tunnels'] == 1 and $h['rx_packets'] > 1000 and $h['tx_packets'] > 1000" 5 \
    || fail "the native end's counters: $(cat "$work/ht-stats.json" 2>/dev/null)"
  [[ $(json "$work/fake-stats.json" 'd["tunnels"]') -eq 1 ]] || fail "the fake did not see the tunnel GET"
  gateway_native_https_up || fail "the native HTTPS end did not start (openconnect)"
  echo secret | ip netns exec "$nsc" openconnect --protocol=gp --usergroup=gateway --no-dtls \
    --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin --script "$repo/tools/netns/minimal-vpnc-script" \
    https://$gw_ip:4443/ >"$work/oc.log" 2>&1 &
  oc_pid=$!; pids+=("$oc_pid")
  wait_for "$work/fake-stats.json" '"tunnels": 1' 30 || fail "openconnect did not open the HTTPS tunnel"
  route_via_tun
  theirs=$(traffic "openconnect, native end")
  kill -INT "$oc_pid"; wait "$oc_pid" 2>/dev/null || true
  gateway_down
  echo "RESULT native_https: espvpn $ours; openconnect 9.01 --no-dtls $theirs"
  ;;
rekey)
  # Real-time priority for the tunnel and the stream (as the datapath rekey test), so
  # other load on a shared 2-core machine does not show up as gaps.
  chrt="chrt -f 20"
  start aes-128-gcm --timeout 6
  ip netns exec "$nsl" $chrt $py "$dp/udp_stream.py" recv $lan_ip 5001 14 >"$work/stream.out" &
  rpid=$!; pids+=("$rpid")
  wait_listening "$nsl" udp 5001 10 || fail "the stream receiver did not start"
  ip netns exec "$nsc" $chrt $py "$dp/udp_stream.py" send $lan_ip 5001 12 200 >/dev/null
  wait "$rpid" || true
  rekeys=$(grep -c "rekey done" "$work/espvpn.log" || true)
  gap=$(sed -n 's/.*max_gap_ms=\([0-9.]*\).*/\1/p' "$work/stream.out")
  echo "RESULT rekeys=$rekeys $(cat "$work/stream.out")"
  [[ $rekeys -ge 3 ]] || fail "only $rekeys rekeys in 12 s"
  $py -c "import sys; sys.exit(0 if float('$gap') < 50 else 1)" || fail "largest gap ${gap} ms >= 50 ms"
  # Each rekey's getconfig is followed by a HIP check (its own thread: the gap above includes it).
  stats_until "$work/fake-stats.json" "d['hip_checks'] >= $rekeys + 1" 15 ||
    fail "HIP checks: $(json "$work/fake-stats.json" 'd["hip_checks"]') after $rekeys rekeys (one per rekey expected, and the login's)"
  stop
  ;;
outer_v6_esp)
  outer_v6
  # Debian's vpnc-script as a user runs it. espvpn runs in a private mount namespace with a
  # stand-in resolv.conf and /run (the script's state files), so the host's are never touched
  # (the script runs in espvpn's broker, which keeps CAP_NET_ADMIN only: it cannot mount).
  mkdir -p "$work/run"; echo "nameserver 192.0.2.53" >"$work/resolv.conf"
  cat >"$work/vpnc-script" <<SCRIPT
#!/bin/sh
env | grep -E '^(reason|VPNGATEWAY|INTERNAL_IP4_MTU)=' | sort >>"$work/script-env"
exec /usr/share/vpnc-scripts/vpnc-script
SCRIPT
  chmod +x "$work/vpnc-script"
  client_args=(--script "$work/vpnc-script")
  # By a name that resolves to the v6 address only (vpn.test is in the certificate's SANs);
  # espvpn sees a hosts file of its own.
  printf '%s vpn.test\n' "$gw_ip6" >"$work/hosts"
  cat >"$work/with-hosts" <<SCRIPT
#!/bin/sh
exec unshare -m sh -c 'mount --bind "\$0" /etc/hosts && mount --bind "$work/resolv.conf" /etc/resolv.conf && mount --bind "$work/run" /run && exec "\$@"' "$work/hosts" "\$@"
SCRIPT
  chmod +x "$work/with-hosts"
  chrt=$work/with-hosts client_url=https://vpn.test:4443/
  suite=aes-128-gcm want_mtu=1310  # base 1406 - 40 IPv6 - 8 UDP - 8 ESP - 8 IV - 16 ICV, whole blocks, - 2 (v4: 1342)
  # The outer link as small as the base MTU: an inner packet sized for an IPv4 outer (1342)
  # would leave as IPv6 fragments (counted below).
  ip -n "$nsc" link set "${topo}cg" mtu 1406; ip -n "$nsg" link set "${topo}gc" mtu 1406
  start $suite
  grep -q "portal vpn.test login succeeded" "$work/espvpn.log" || fail "no login to the portal by the name vpn.test"
  ip netns exec "$nsc" ss -Hun state established >"$work/ss.out"
  grep -q "\[$gw_ip6\]:4501" "$work/ss.out" || fail "the ESP socket is not connected to [$gw_ip6]:4501: $(cat "$work/ss.out")"
  route_via_tun  # vpnc-script
  grep -qx "VPNGATEWAY=$gw_ip6" "$work/script-env" || fail "VPNGATEWAY is not $gw_ip6: $(cat "$work/script-env")"
  grep -qx "INTERNAL_IP4_MTU=$want_mtu" "$work/script-env" || fail "INTERNAL_IP4_MTU is not $want_mtu: $(cat "$work/script-env")"
  # vpnc-script's host route to the gateway (so the tunnel's routes never capture the ESP packets).
  ip -n "$nsc" -6 route show "$gw_ip6/128" | grep -q "dev ${topo}cg" \
    || fail "no v6 host route to $gw_ip6: $(ip -n "$nsc" -6 route)"
  ip -n "$nsc" -6 route get "$gw_ip6" | grep -q "dev ${topo}cg" || fail "the gateway is not reached off the tunnel"
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  mtu=$(ip -n "$nsc" -o link show "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  [[ $mtu == "$want_mtu" ]] || fail "tun MTU $mtu, expected $want_mtu for $suite over an IPv6 outer"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6"
  ip netns exec "$nsc" ping -M do -s $((want_mtu - 28)) -c 3 -i 0.2 -W 2 $lan_ip >/dev/null \
    || fail "a full-size packet ($want_mtu bytes, DF) did not pass"
  ip netns exec "$nsc" ping -6 -M do -s $((want_mtu - 48)) -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null \
    || fail "a full-size IPv6 packet ($want_mtu bytes) did not pass"
  ! ip netns exec "$nsc" ping -M do -s $((want_mtu - 27)) -c 1 -W 2 $lan_ip >/dev/null 2>&1 \
    || fail "a packet above the tun MTU passed with DF set"
  frags=0
  for ns in "$nsc" "$nsg"; do
    frags=$((frags + $(ip netns exec "$ns" awk '$1 == "Ip6FragCreates" { print $2 }' /proc/net/snmp6)))
  done
  [[ $frags -eq 0 ]] || fail "$frags outer IPv6 fragments created: the tunnel MTU is too large for the link"
  up=$(iperf_gbps 2) || exit 1
  down=$(iperf_gbps 2 -R) || exit 1
  client_until 'd["transport"] == "esp" and d["tx"]["esp_packets"] > 1000 and d["rx"]["esp_ok"] > 1000' \
    || fail "the stats do not show ESP carrying the traffic: $(cat "$work/cl-stats.json")"
  # UDP GSO on the v6 socket (sendmmsg with UDP_SEGMENT); GRO receive is printed.
  offload=$(json "$work/cl-stats.json" '"gso %d gro %d" % (d["tx"]["udp_gso_messages"], d["rx"]["udp_gro_buffers"])')
  client_until 'd["tx"]["udp_gso_messages"] > 0 and d["rx"]["udp_gro_buffers"] > 0' \
    || fail "no UDP GSO/GRO on the IPv6 socket ($offload)"
  stop
  grep -q "reason=disconnect" "$work/script-env" || fail "vpnc-script not run for the disconnect"
  ! ip -n "$nsc" -6 route show "$gw_ip6/128" | grep -q . || fail "vpnc-script left the host route to the gateway"
  echo "RESULT outer_v6_esp: login + ESP over IPv6 to $gw_ip6, tun MTU $mtu, DF ping of $mtu bytes v4+v6, no outer fragments, v6 host route to the gateway; iperf3 up $up Gbit/s down $down Gbit/s; UDP $offload"
  ;;
outer_v6_https)
  outer_v6
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start"
  block_udp_v6() {  # in the client namespace: its ESP sends fail (EPERM), nothing comes back
    ip netns exec "$nsc" nft -f - <<NFT
table inet gp_v6_block {
  chain out { type filter hook output priority 0; udp dport 4501 drop; }
}
NFT
  }
  block_udp_v6
  client_args=(--esp-retry-interval 2 --force-dpd 2)
  launch
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 || fail "no fallback to the HTTPS tunnel over IPv6"
  grep "HTTPS tunnel up" "$work/espvpn.log" | grep -q "$gw_ip6" || fail "the HTTPS tunnel is not to $gw_ip6"
  client_until 'd["transport"] == "https"' || fail "stats JSON does not say https: $(cat "$work/cl-stats.json")"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6 over HTTPS"
  on_https=$(traffic "on HTTPS over IPv6")
  client_until 'd["https"]["rx_packets"] > 1000 and d["https"]["tx_packets"] > 1000' \
    || fail "HTTPS counters do not show the traffic: $(cat "$work/cl-stats.json")"
  # UDP let through: the ESP retry's probe over v6 is answered, traffic moves back.
  ip netns exec "$nsc" nft delete table inet gp_v6_block
  wait_for "$work/espvpn.log" "switching back to ESP" 20 || fail "did not go back to ESP over IPv6 after the unblock"
  https_side_idle
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping back on ESP"
  client_until 'd["transport"] == "esp"' || fail "stats JSON does not say esp after the switch back"
  # ESP dying later (ESP DPD: nothing received for 2 x --force-dpd): the HTTPS tunnel again.
  block_udp_v6
  wait_for "$work/espvpn.log" "switching to the HTTPS tunnel: ESP dead" 15 || fail "no fallback when ESP over IPv6 died"
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6 after ESP died"
  client_until 'd["transport"] == "https" and d["transport_switches"] == 3' \
    || fail "after ESP died: $(cat "$work/cl-stats.json")"
  stop
  # --no-dtls: HTTPS only from the start, its MTU for a TCPv6 outer:
  # 1406 - 40 IPv6 - 32 TCP - 21 TLS record - 16 GP frame header (v4: 1317).
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start (--no-dtls)"
  client_args=(--no-dtls)
  launch
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 || fail "--no-dtls: no HTTPS tunnel over IPv6"
  grep -q "HTTPS tunnel up to .*, MTU 1297$" "$work/espvpn.log" || fail "--no-dtls over IPv6: $(grep "HTTPS tunnel up" "$work/espvpn.log"), expected MTU 1297"
  ip netns exec "$nsc" ping -M do -s $((1297 - 28)) -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "full-size ping over --no-dtls"
  stop
  echo "RESULT outer_v6_https: UDP blocked in the client namespace: HTTPS tunnel over TCPv6 to $gw_ip6, ping v4+v6, $on_https; unblocked -> ESP; ESP dead (DPD) -> HTTPS again; --no-dtls MTU 1297"
  ;;
outer_v6_openconnect)
  outer_v6
  # A 1406-byte link: openconnect's base MTU is the TCP path MTU, espvpn's default 1406.
  ip -n "$nsc" link set "${topo}cg" mtu 1406; ip -n "$nsg" link set "${topo}gc" mtu 1406
  gateway_up aes-128-cbc:sha1 || fail "fake gateway did not start"  # openconnect 9.01 has no GCM for GP
  echo secret | ip netns exec "$nsc" openconnect --protocol=gp --usergroup=gateway --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin --script "$repo/tools/netns/minimal-vpnc-script" \
    "https://$gw_outer:4443/" >"$work/oc.log" 2>&1 &
  oc_pid=$!; pids+=("$oc_pid")
  wait_for "$work/oc.log" "ESP session established" 30 "$oc_pid" || fail "openconnect did not bring ESP up over IPv6"
  route_via_tun
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through openconnect's tunnel"
  ip netns exec "$nsc" ss -Hun state established | grep -q "\[$gw_ip6\]:4501" || fail "openconnect's ESP is not over IPv6"
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  oc_mtu=$(ip -n "$nsc" -o link show "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  kill -INT "$oc_pid"; wait "$oc_pid" 2>/dev/null || true
  gateway_down
  start aes-128-cbc:sha1  # espvpn, same suite and link
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  our_mtu=$(ip -n "$nsc" -o link show "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  stop
  [[ $oc_mtu == "$our_mtu" ]] || fail "tun MTU over IPv6 with CBC+SHA1: openconnect $oc_mtu, espvpn $our_mtu"
  echo "RESULT outer_v6_openconnect: openconnect 9.01 logged in over IPv6, ESP established to [$gw_ip6]:4501, ping through it; tun MTU $oc_mtu, espvpn's the same"
  ;;
hip)
  # GP_HIP_INTERVAL: another portal interval (e.g. 60, which a client that rejects short
  # intervals at the login accepts: the test against such a binary then takes minutes).
  hip_interval=${GP_HIP_INTERVAL:-4} hip_grace=4
  hip_period=$((hip_interval > 120 ? hip_interval - 60 : hip_interval / 2))
  hip_gateway() { gateway_up aes-128-gcm --hip-interval $hip_interval "$@" || fail "fake gateway did not start"; }
  # Three intervals and the grace, then the verdict (a client that reported only at the login
  # has been cut off for 6 s by then). Prints how many pings (one each 0.5 s) were answered.
  hip_across() {
    local pings=0 end=$((SECONDS + 3 * hip_interval + hip_grace + 2))
    while ((SECONDS < end)); do
      ip netns exec "$nsc" ping -c 1 -W 1 $lan_ip >/dev/null 2>&1 && pings=$((pings + 1))
      sleep 0.5
    done
    kill -0 "$client_pid" 2>/dev/null || fail "$1: espvpn exited"
    [[ $(json "$work/fake-stats.json" 'd["hip_enforced_ends"]') -eq 0 ]] ||
      fail "$1: the gateway ended the session (HIP report late; gaps: $(json "$work/fake-stats.json" 'd["hip_report_gaps"]'))"
    ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "$1: ping through the tunnel after three intervals"
    echo "$pings"
  }
  hip_gateway --hip-enforce $hip_grace
  client_args=(--timestamp)
  launch
  wait_for "$work/espvpn.log" "ESP connected" 30 "$client_pid" || fail "espvpn did not bring ESP up"
  pings=$(hip_across "enforcing gateway") || { echo "$pings"; exit 1; }
  reports=$(json "$work/fake-stats.json" 'd["hip_reports"]')
  gaps=$(json "$work/fake-stats.json" '" ".join("%g" % g for g in d["hip_report_gaps"])')
  ((reports >= 4)) || fail "only $reports HIP reports in three intervals"
  [[ -n ${GP_HIP_INTERVAL:-} ]] && { stop; echo "RESULT hip enforcing ($hip_interval s): $reports reports, gaps $gaps s"; exit 0; }
  grep -q "HIP: checking again every $hip_period s" "$work/espvpn.log" || fail "not logged: the HIP period from the portal's interval"
  stop
  echo "RESULT hip enforcing: interval ${hip_interval} s + grace ${hip_grace} s: tunnel kept across three intervals," \
       "$reports reports (gaps $gaps s), $pings pings answered meanwhile, no session ended"

  # A wrapper that fails once (exit 3), then hangs once (past its 5 s timeout), then works;
  # while $hip/hang exists it hangs again (writing its pid to $hip/hang.pid first).
  # espvpn runs the wrapper as nobody (root started it, nobody invoked it): its script and
  # state live in a folder nobody may use.
  hip="$work/hip"; mkdir -p "$hip"; chmod 0777 "$hip"; chmod 0711 "$work"
  # Its first call also does what a hostile wrapper (or code the server's data took over in
  # the session) would: write a file and read one outside the session's Landlock rules, in a
  # folder its user may write and read ($outside: 0777, not under /tmp). Both must be refused.
  outside=$(mktemp -d /var/tmp/gp-tunnel-outside.XXXXXX); cleanup_paths+=("$outside"); chmod 0777 "$outside"
  echo "not the session's" >"$outside/readable"; chmod 0644 "$outside/readable"
  cat >"$hip/hip-wrapper" <<WRAPPER
#!/bin/sh
n=\$((\$(cat "$hip/hip-calls" 2>/dev/null || echo 0) + 1)); echo \$n >"$hip/hip-calls"
if [ \$n -eq 1 ]; then
  { echo planted >"$outside/planted" && echo "write allowed" || echo "write refused"; } >"$hip/landlock" 2>&1
  { read -r line <"$outside/readable" && echo "read allowed" || echo "read refused"; } >>"$hip/landlock" 2>&1
fi
[ \$n -eq 2 ] && { echo "wrapper: simulated failure" >&2; exit 3; }
if [ \$n -eq 3 ] || [ -e "$hip/hang" ]; then echo \$\$ >"$hip/hang.pid"; exec sleep 300; fi
exec /usr/libexec/openconnect/hipreport.sh "\$@"
WRAPPER
  chmod 755 "$hip/hip-wrapper"
  rm -f "$hip/hip-calls" "$hip/hang" "$hip/hang.pid"
  hip_gateway --hip-enforce 1000  # every check asks for a report; no session is ended here
  client_args=(--timestamp --csd-wrapper "$hip/hip-wrapper")
  launch
  wait_for "$work/espvpn.log" "ESP connected" 30 "$client_pid" || fail "espvpn did not bring ESP up (wrapper)"
  stats_until "$work/fake-stats.json" 'd["hip_reports"] >= 3' 60 || fail "no report after the failing and hanging wrapper"
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited while the wrapper failed"
  grep -q "exited with status 3: wrapper: simulated failure.*; trying again in" "$work/espvpn.log" ||
    fail "the failing wrapper: not logged and retried"
  grep -q "did not finish within 5000 ms; trying again in" "$work/espvpn.log" || fail "the hanging wrapper: not logged and retried"
  landlock=$(landlock_expected)
  if ((landlock > 0)); then
    outcome=$(tr '\n' ' ' <"$hip/landlock" 2>/dev/null)
    [[ ! -e $outside/planted ]] || fail "the wrapper wrote outside the session's Landlock rules: $outcome"
    # the shell's own open()s (no program that a seccomp refusal could kill): EACCES both
    [[ $outcome == *"write refused"* && $outcome == *"read refused"* && $(grep -c "Permission denied" "$hip/landlock" 2>/dev/null) -eq 2 ]] ||
      fail "the wrapper, run by the session process (Landlock ABI $landlock), was not refused: $outcome"
    landlock_result="the wrapper (in the session's Landlock domain, ABI $landlock) wrote and read outside its rules: both EACCES"
  else
    landlock_result="no Landlock here (kernel or ESPVPN_LANDLOCK=0): the attack not checked"
  fi
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through the tunnel after the wrapper failed"
  touch "$hip/hang"; rm -f "$hip/hang.pid"
  wait_for "$hip/hang.pid" . 30 "$client_pid" || fail "the wrapper was not run again"
  hang_pid=$(cat "$hip/hang.pid")
  stop
  grep -q "HIP: the check in progress cancelled" "$work/espvpn.log" || fail "SIGINT: the hanging check was not cancelled"
  ! kill -0 "$hang_pid" 2>/dev/null || fail "the hanging wrapper (pid $hang_pid) outlived espvpn"
  echo "RESULT hip wrapper: a failing and a hanging wrapper logged and retried with the tunnel up;" \
       "SIGINT during a hanging one: cancelled, wrapper killed, logout, exit 0; $landlock_result"
  ;;
hip_openconnect)
  hip_args=(--force-trojan=2 --csd-wrapper=/usr/libexec/openconnect/hipreport.sh)
  gateway_up aes-128-cbc:sha1 --hip-interval 4 --hip-enforce 4 || fail "fake gateway did not start"  # 9.01: no GCM for GP
  echo secret | ip netns exec "$nsc" openconnect --protocol=gp --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin \
    --script "$repo/tools/netns/minimal-vpnc-script" "${hip_args[@]}" "https://$gw_outer:4443/" >"$work/oc.log" 2>&1 &
  oc_pid=$!; pids+=("$oc_pid")
  wait_for "$work/oc.log" "ESP session established" 30 "$oc_pid" || fail "openconnect did not bring ESP up"
  sleep 14  # three intervals and the grace
  kill -0 "$oc_pid" 2>/dev/null || fail "openconnect exited"
  route_via_tun
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through openconnect's tunnel after three intervals"
  oc_reports=$(json "$work/fake-stats.json" 'd["hip_reports"]')
  [[ $(json "$work/fake-stats.json" 'd["hip_enforced_ends"]') -eq 0 ]] || fail "openconnect's session was ended"
  kill -INT "$oc_pid"; wait "$oc_pid" 2>/dev/null || true
  gateway_down
  client_args=("${hip_args[@]}")
  start aes-128-cbc:sha1 --hip-interval 4 --hip-enforce 4
  sleep 14
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through espvpn's tunnel after three intervals"
  [[ $(json "$work/fake-stats.json" 'd["hip_enforced_ends"]') -eq 0 ]] || fail "espvpn's session was ended"
  grep -q "HIP: --force-trojan=2 overrides the portal's interval of 4 s" "$work/espvpn.log" ||
    fail "not logged: --force-trojan overriding the portal"
  our_reports=$(json "$work/fake-stats.json" 'd["hip_reports"]')
  stop
  echo "RESULT hip_openconnect: ${hip_args[*]} against a gateway enforcing 4 s + 4 s: openconnect 9.01 kept its" \
       "tunnel ($oc_reports reports), espvpn too ($our_reports reports)"
  ;;
full_tunnel)
  ip -n "$nsc" route add default via $gw_ip
  ip -n "$nsc" -6 route add default via $gw_ip6
  routes_before=$(ip -n "$nsc" route show; ip -n "$nsc" -6 route show)
  fake_routes=(--full-tunnel)
  start aes-128-gcm --exclude 10.202.0.128/25 --exclude6 2001:db8:ff::/48
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  [[ -n $tun ]] || fail "no tun device"
  via_tun() { ip -n "$nsc" route get "$1" | grep -q " dev $tun "; }
  for dst in $lan_ip 198.51.100.7 $lan_ip6 2001:db8::7; do via_tun $dst || fail "$dst: not through $tun: $(ip -n "$nsc" route get $dst)"; done
  for dst in $gw_ip 10.202.0.130 2001:db8:ff::1 $gw_ip6; do ! via_tun $dst || fail "$dst: through $tun, should not be"; done
  ip -n "$nsc" route get $gw_ip | grep -q "dev ${topo}cg" || fail "the gateway: not on its link"
  ip -n "$nsc" route get 10.202.0.130 | grep -q "via $gw_ip dev ${topo}cg" || fail "10.202.0.130: not via the user's default"
  ip -n "$nsc" -6 route get 2001:db8:ff::1 | grep -q "via $gw_ip6 dev ${topo}cg" || fail "2001:db8:ff::1: not via the user's default"
  for r in "0.0.0.0/1 dev $tun" "128.0.0.0/1 dev $tun" "::/1 dev $tun" "8000::/1 dev $tun" "10.201.0.1/32 dev ${topo}cg (gateway" \
           "10.202.0.128/25 via $gw_ip dev ${topo}cg (excluded" "2001:db8:ff::/48 via $gw_ip6 dev ${topo}cg (excluded"; do
    grep -qF "route $r" "$work/espvpn.log" || fail "not logged: route $r"
  done
  esp_before=$(client_stat 'd["tx"]["esp_packets"]')
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 $lan_ip6 >/dev/null || fail "ping $lan_ip6"
  rates=$(traffic full_tunnel) || exit 1
  client_until "d['tx']['esp_packets'] > $esp_before + 1000" || true
  esp_after=$(json "$work/cl-stats.json" 'd["tx"]["esp_packets"]')
  ((esp_after > esp_before + 1000)) || fail "ESP tx packets $esp_before -> $esp_after: the traffic did not take the tunnel"
  stop
  routes_after=$(ip -n "$nsc" route show; ip -n "$nsc" -6 route show)
  [[ $routes_after == "$routes_before" ]] || fail "routes changed: before
$routes_before
after
$routes_after"
  echo "RESULT full_tunnel: lan, 198.51.100.7, 2001:db8::7 via $tun; gateway and excludes (v4+v6) outside; $rates; ESP tx $esp_before -> $esp_after; routes as before after SIGINT"
  ;;
*) echo "usage: $0 demo|suites|script|blocked|nodtls|native_https|rekey|outer_v6_esp|outer_v6_https|outer_v6_openconnect|full_tunnel ESPVPN GATEWAY" >&2; exit 2 ;;
esac
