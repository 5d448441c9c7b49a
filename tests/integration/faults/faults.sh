#!/usr/bin/env bash
# Faults on a running tunnel, for both protocols (issues 9 and 18), in three namespaces of
# their own (tools/netns/gp-topology.sh): GlobalProtect against the fake GP gateway +
# esp-gateway, AnyConnect against Debian's ocserv (tests/integration/anyconnect/ocserv_env.sh).
# Each case runs a UDP stream of 200 packets/s from the client through the tunnel to the lan
# host and prints its outage = the largest gap between two arrivals ("RESULT <case>: outage X ms ...").
#
#   faults.sh gp MODE ESPVPN_BIN GATEWAY_BIN     MODE: netem|restart|linkflap|addrchange|gone|forgotten|
#                                                      blackhole_sigint|flood|roam_addrchange|roam_linkflap|
#                                                      roam_gwroute|roam_gwroute_late|suspend (roam_*, suspend: + _timing)
#   faults.sh ac MODE ESPVPN_BIN                 MODE: netem|restart|linkflap|addrchange|blackhole_sigint|flood|
#                                                      roam_addrchange|roam_gwroute|roam_gwroute_late (+ _timing)
#                                                (the AnyConnect cases: faults_ac.sh)
# GlobalProtect:
#   netem:      5 % loss + 50 ms +-20 ms jitter on the ESP path: iperf3 TCP 5 s completes
#   restart:    fake gateway + esp-gateway killed, restarted 2 s later with the same
#               --state-file: espvpn comes back with its cookie (no second login POST)
#   linkflap:   the client's veth down 3 s, up again: traffic resumes (reconnect)
#   addrchange: the client's address moves to another in the same subnet: traffic
#               resumes, esp-gateway learns the new peer address (ESP from it)
#   gone:       gateway gone for longer than --reconnect-timeout 5: exit 1 with a clear
#               message, attempt-reconnect logged, tun removed
#   forgotten:  the gateway restarts without its sessions: the cookie is refused at the
#               reconnect, exit 2 with a clear message, no new login, tun removed
#   blackhole_sigint: everything from the client dropped at the gateway (no RST, no ICMP): ESP
#               dead, the HTTPS fallback times out (--http-timeout 8), the outage's reconnect
#               attempt 1 (getconfig) waits for a SYN answer: SIGINT then exits 0 within 3 s (the
#               attempt cancelled, no logout tried), tun removed
#   roam_addrchange, roam_linkflap, roam_gwroute: the address change (link down 2 s, the route to
#               the gateway moved to a second veth pair) with default DPD: the rtnetlink watch
#               reconnects / probes at once (issue 22 roaming; roam_case below, both protocols)
#   suspend:    a simulated suspend with default DPD: espvpn SIGSTOPped 10 s while the gateway
#               drops its ESP flow (the old path dead, as a NAT mapping gone during a sleep); then
#               SIGCONT and PrepareForSleep(false) from a stand-in logind (fake_logind.py) on a
#               private system bus: the resume is counted in --stats-json "path" (logind's signal
#               too), probed/reconnected, traffic flows while the stream runs (issue 22)
#   flood:      iperf3 UDP -b 3G for 5 s each way, on ESP and on the HTTPS tunnel:
#               espvpn's peak RSS (VmHWM) < 100 MiB (400 under ASan), loss reported, ping afterwards
# ocserv 1.1.6 may end an AnyConnect session on its own during a route change: its periodic check
# (every 30 s) takes the CSTP socket's TCP path MTU (TCP_INFO) as the link MTU, and a tiny reading
# makes its main process refuse the worker ("worker process invalid MTU 2", then DISCONNECT). That
# is the server's verdict, not espvpn's: such a roaming case runs once more, with a NOTE; a second
# failure, or any other failure, stands.
if [[ ${1:-} == ac && ${2:-} == roam_* && -z ${FAULTS_RERUN:-} ]]; then
  first=$(mktemp /tmp/faults-first.XXXXXX)
  FAULTS_RERUN=1 "$0" "$@" 2>&1 | tee "$first"  # shown as it comes (a ctest timeout keeps it)
  rc=${PIPESTATUS[0]}
  grep -q "worker process invalid MTU" "$first" && again=1 || again=0
  rm -f "$first"
  if ((rc != 0 && again)); then
    echo "NOTE: ocserv closed the session over its own MTU reading (above); the case runs once more"
    FAULTS_RERUN=1 exec "$0" "$@"
  fi
  exit "$rc"
fi
# shellcheck source=../proto_head.sh
. "$(dirname "$0")/../proto_head.sh" faults "$@"
# Names of this task + PID (other tests build the same topology concurrently).
topo=flt$$ nsc=flt$$c nsg=flt$$g nsl=flt$$l ht_dev=flt$$ht
cl_veth=${topo}cg
topo_up
ip netns exec "$nsl" iperf3 -s -B $lan_ip >"$work/iperf-server.log" 2>&1 &
pids+=("$!")

# stream_start SECONDS: 200 packets/s client -> lan for SECONDS; stream_outage waits
# for it and sets gap = the largest gap in ms (the receiver runs 2 s longer).
stream_start() {
  ip netns exec "$nsl" $py "$dp/udp_stream.py" recv $lan_ip 5001 "$(($1 + 2))" >"$work/stream.out" &
  stream_rx=$!; pids+=("$stream_rx")
  wait_listening "$nsl" udp 5001 10 || fail "the UDP stream receiver did not start"
  ip netns exec "$nsc" $py "$dp/udp_stream.py" send $lan_ip 5001 "$1" 200 >"$work/stream-tx.out" &
  stream_tx=$!; pids+=("$stream_tx")
}
stream_outage() {
  wait "$stream_tx" || true
  wait "$stream_rx" || true
  grep -q "received=" "$work/stream.out" || fail "the UDP stream receiver printed nothing"
  [[ $(sed -n 's/received=\([0-9]*\).*/\1/p' "$work/stream.out") -ge 100 ]] \
    || fail "the stream barely passed: $(cat "$work/stream.out")"
  gap=$(sed -n 's/.*max_gap_ms=\([0-9]*\).*/\1/p' "$work/stream.out")
}
# client_stat EXPR: from espvpn's stats JSON (rewritten every second).
client_stat() { sleep 1.2; json "$work/cl-stats.json" "$1"; }
fake_stat() { json "$work/fake-stats.json" "$1"; }
ping_lan() { ip netns exec "$nsc" ping -c "${1:-3}" -i 0.2 -W 2 $lan_ip >/dev/null; }
logins() { fake_stat 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)'; }

# up [espvpn options...]: gateway (ESP + HTTPS side, sessions in a state file) and espvpn on ESP.
up() {
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" --state-file "$work/fake-state.json" || fail "fake gateway did not start"
  espvpn_up "$@"
  wait_for "$work/espvpn.log" "ESP connected" 30 "$client_pid" || fail "espvpn did not bring ESP up"
  ping_lan || fail "no ping through the fresh tunnel"
}
# Fast detection (dead after 2 s quiet) and a quick way back from HTTPS to ESP.
fast=(--force-dpd 1 --esp-retry-interval 2 --reconnect-timeout 60)

# resumed LABEL SECONDS: traffic flows again within SECONDS (ping through the tunnel), while
# the stream still runs: else its largest gap would not hold the outage (a slow machine's
# recovery after the stream's end measured nothing and passed).
resumed() {
  local end=$((SECONDS + $2))
  while ((SECONDS < end)); do
    if ping_lan 1 2>/dev/null; then
      kill -0 "$stream_tx" 2>/dev/null || fail "$1: traffic resumed only after the stream ended (outage not measured)"
      return 0
    fi
  done
  fail "$1: no traffic within $2 s"
}

# A second path between the client and gateway namespaces (roam_gwroute): a veth pair with no
# addresses of its own; gw_route_switch moves the traffic between $cl_ip and $gw_ip onto it (a /32
# each way, more specific than the connected /24s): the client keeps its source address.
second_path_up() {
  ip link add "${topo}c2" netns "$nsc" type veth peer name "${topo}g2" netns "$nsg"
  ip -n "$nsc" link set "${topo}c2" up
  ip -n "$nsg" link set "${topo}g2" up
}
gw_route_switch() {
  ip -n "$nsg" route add $cl_ip/32 dev "${topo}g2" src $gw_ip
  ip -n "$nsc" route add $gw_ip/32 dev "${topo}c2" src $cl_ip
}
tx_packets() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_packets"; }

# roam_case: roaming (issue 22) with the DEFAULT DPD settings, for both protocols (the caller's up
# and espvpn_down): the rtnetlink change makes espvpn check the path at once: a new local address
# reconnects (GP: getconfig with the cookie, a new ESP socket; AnyConnect: a new TLS connection,
# CONNECT with the cookie), the same one is probed (ESP probe / DPD). The behaviour verdict: the
# path reconnect/probe is counted in --stats-json ("path") and traffic flows while the stream runs;
# the outage is printed (its bound is the _timing twin's, ROAM_MAX_MS). ESPVPN_NO_ROAMING=1
# ROAM_STREAM_S=40 measures the same without roaming (DPD only).
#   roam_addrchange: the client's address moves to 10.201.0.5
#   roam_linkflap:   the client's veth down 2 s, up again
#   roam_gwroute:    the route to the gateway moves to a second veth pair (the source address
#                    kept), then the old path goes down (the gateway's end of the first veth)
#   roam_gwroute_late: the old path goes down first, the route moves 3 s later (GWROUTE_GAP_S):
#                    the probe goes unanswered, the reconnect attempt's SYN is lost on the dead
#                    path; the route's move cancels that attempt and makes it again at once
roam_case() {
  local stream_s=${ROAM_STREAM_S:-12} gap_s=0 c2_tx0=0
  [[ $mode == roam_gwroute_late ]] && gap_s=${GWROUTE_GAP_S:-3}
  if [[ $mode == roam_gwroute* ]]; then second_path_up; fi
  up --reconnect-timeout 60
  stream_start "$stream_s"
  sleep 2
  unusable_ms=0
  case $mode in
  roam_addrchange)
    ip -n "$nsc" addr del $cl_ip/24 dev "$cl_veth"
    ip -n "$nsc" addr add 10.201.0.5/24 dev "$cl_veth"
    t_usable=$(date +%s%N)
    ;;
  roam_linkflap)
    t_down=$(date +%s%N)
    ip -n "$nsc" link set dev "$cl_veth" down
    sleep 2
    ip -n "$nsc" link set dev "$cl_veth" up
    t_usable=$(date +%s%N)
    unusable_ms=$(((t_usable - t_down) / 1000000))
    ;;
  roam_gwroute*)
    c2_tx0=$(tx_packets "$nsc" "${topo}c2")
    if [[ $gap_s == 0 ]]; then
      gw_route_switch
      t_usable=$(date +%s%N)
      ip -n "$nsg" link set dev "${topo}gc" down
    else
      t_down=$(date +%s%N)
      ip -n "$nsg" link set dev "${topo}gc" down
      sleep "$gap_s"
      gw_route_switch
      t_usable=$(date +%s%N)
      unusable_ms=$(((t_usable - t_down) / 1000000))
    fi
    ;;
  esac
  resumed "after the path change" $((stream_s - 3))
  back_ms=$((($(date +%s%N) - t_usable) / 1000000))
  stream_outage
  ping_lan || fail "ping after the path change"
  path=$(client_stat 'd.get("path")')
  espvpn_down || fail "clean exit"
  local how=""
  if [[ $mode == roam_gwroute* ]]; then
    # The tunnel's packets took the new path (the stream's 200/s for its last seconds).
    local c2_tx=$(($(tx_packets "$nsc" "${topo}c2") - c2_tx0))
    ((c2_tx >= 400)) || fail "only $c2_tx packets left over the new path"
    how="; $c2_tx packets over the new path"
  fi
  if [[ -z ${ESPVPN_NO_ROAMING:-} ]]; then
    [[ $(json "$work/cl-stats.json" 'd["path"]["events"]') -ge 1 ]] || fail "no rtnetlink change counted: $path"
    case $mode in
    roam_addrchange)
      [[ $(json "$work/cl-stats.json" 'd["path"]["reconnects"]') -ge 1 ]] || fail "no path reconnect counted: $path"
      grep -q "path changed: the local address for the server changed" "$work/espvpn.log" \
        || fail "the reconnect was not caused by the path change"
      ;;
    roam_linkflap)
      [[ $(json "$work/cl-stats.json" 'd["path"]["probes"] + d["path"]["reconnects"]') -ge 1 ]] \
        || fail "the link's return was neither probed nor reconnected: $path"
      ;;
    roam_gwroute*)
      # The same source address: probed at once; no reconnect storm (one or two at most).
      [[ $(json "$work/cl-stats.json" 'd["path"]["probes"]') -ge 1 ]] || fail "the route change was not probed: $path"
      [[ $(json "$work/cl-stats.json" 'd["path"]["reconnects"]') -le 2 ]] || fail "a reconnect storm: $path"
      ;;
    esac
  fi
  # The outage past the time the network was unusable (the link down): what roaming shortens.
  after_ms=$((gap - unusable_ms))
  if [[ -n ${ROAM_MAX_MS:-} ]]; then
    ((after_ms <= ROAM_MAX_MS)) || fail "outage ${gap} ms: ${after_ms} ms after the network was usable (limit $ROAM_MAX_MS)"
  fi
  echo "RESULT $proto $mode (default DPD${ESPVPN_NO_ROAMING:+, roaming off}):" \
       "outage (largest stream gap) ${gap} ms, ${after_ms} ms of it after the network was usable; first ping ${back_ms} ms after;" \
       "path: $path$how; how: $(grep -o 'path changed[^;]*\|no answer to the probe[^;]*' "$work/espvpn.log" | head -3 | tr '\n' ';')"
}

# roam_*_timing: the roaming case with a bound on its outage (label timing).
if [[ $mode == roam_*_timing || $mode == suspend_timing ]]; then mode=${mode%_timing}; ROAM_MAX_MS=${ROAM_MAX_MS:-1000}; fi

if [[ $proto == ac ]]; then
  # shellcheck source=faults_ac.sh
  . "$here/faults_ac.sh"
  exit 0
fi

case $mode in
netem)
  # This kernel has no sch_netem: tools/netns/udp-impair in front of esp-gateway does
  # the same to the ESP datagrams (both ways), which carry the tunnel's TCP.
  gw_esp_port=4502
  ip netns exec "$nsg" $py "$repo/tools/netns/udp-impair" --listen $gw_ip:4501 --to $gw_ip:4502 \
    --loss 5 --delay 50 --jitter 20 --seconds 300 >"$work/impair.out" 2>&1 &
  pids+=("$!")
  up
  stream_start 10
  t0=$(date +%s%N)
  iperf_client "$nsc" "$work/iperf.json" 60 -c $lan_ip -t 5 || fail "iperf3 TCP under loss + jitter"
  took_ms=$((($(date +%s%N) - t0) / 1000000))
  mbit=$(json "$work/iperf.json" '"%.1f" % (d["end"]["sum_received"]["bits_per_second"]/1e6)')
  retr=$(json "$work/iperf.json" 'd["end"]["sum_sent"].get("retransmits", 0)')
  stream_outage
  [[ $took_ms -le 30000 ]] || fail "iperf3 took $took_ms ms"
  ping_lan || fail "no ping under loss + jitter"
  espvpn_down || fail "clean exit"
  echo "RESULT netem: 5% loss + 50+-20 ms each way (udp-impair on the ESP path): iperf3 TCP 5 s completed in ${took_ms} ms," \
       "$mbit Mbit/s, $retr retransmits; stream largest gap ${gap} ms, $(cat "$work/stream.out")"
  ;;
restart)
  up "${fast[@]}"
  stream_start 16
  sleep 3
  gateway_down
  t_down=$(date +%s%N)
  sleep 2
  gateway_up aes-128-gcm --tun "$ht_dev" --state-file "$work/fake-state.json" || fail "fake gateway did not restart"
  resumed "after the gateway restart" 20
  back_ms=$((($(date +%s%N) - t_down) / 1000000))
  wait_for "$work/espvpn.log" "switching back to ESP\|reconnected over ESP" 20 "$client_pid" || fail "not back on ESP"
  stream_outage
  [[ $(logins) -eq 0 ]] || fail "the restarted gateway saw a login POST: a new password was used"
  [[ $(fake_stat 'd["getconfigs"]') -ge 1 ]] || fail "no getconfig with the old cookie"
  path=$(grep -o "reconnected over [A-Z]*\|switching to the HTTPS tunnel: ESP dead\|switching back to ESP" "$work/espvpn.log" | tr '\n' ';')
  ping_lan || fail "ping after the restart"
  espvpn_down || fail "clean exit"
  [[ $gap -lt 15000 ]] || fail "outage ${gap} ms"
  echo "RESULT restart: gateway down 2 s; outage (largest stream gap) ${gap} ms; ping ${back_ms} ms after the kill;" \
       "no login POST, $(fake_stat 'd["getconfigs"]') getconfig(s) with the old cookie; path: $path"
  ;;
linkflap)
  up "${fast[@]}"
  stream_start 16
  sleep 3
  ip -n "$nsc" link set dev "$cl_veth" down
  t_down=$(date +%s%N)
  sleep 3
  ip -n "$nsc" link set dev "$cl_veth" up
  resumed "after link down/up" 20
  back_ms=$((($(date +%s%N) - t_down) / 1000000))
  stream_outage
  # Which way back depends on when the link returns: the HTTPS fallback's TCP connect may
  # outlive the 3 s (SYN retried), else the reconnect attempts find it up.
  path=$(grep -o "reconnected over [A-Z]*\|switching to the HTTPS tunnel: ESP dead\|switching back to ESP\|reconnect attempt [0-9]* failed" "$work/espvpn.log" | tr '\n' ';')
  attempts=$(grep -c "reconnect attempt [0-9]* (outage" "$work/espvpn.log" || true)
  ping_lan || fail "ping after link down/up"
  espvpn_down || fail "clean exit"
  [[ $gap -lt 15000 ]] || fail "outage ${gap} ms"
  echo "RESULT linkflap: link down 3 s; outage ${gap} ms; ping ${back_ms} ms after down; $attempts reconnect attempt(s); path: $path"
  ;;
addrchange)
  up "${fast[@]}"
  stream_start 16
  sleep 3
  ip -n "$nsc" addr del $cl_ip/24 dev "$cl_veth"
  ip -n "$nsc" addr add 10.201.0.5/24 dev "$cl_veth"
  t_move=$(date +%s%N)
  resumed "after the address change" 20
  back_ms=$((($(date +%s%N) - t_move) / 1000000))
  wait_for "$work/espvpn.log" "switching back to ESP\|reconnected over ESP" 20 "$client_pid" || fail "not back on ESP"
  stream_outage
  ping_lan || fail "ping after the address change"
  # esp-gateway learned the new source address (first peer + the change).
  changes=$(json "$work/gw-stats.json" 'd["rx"]["peer_changes"]')
  [[ $changes -ge 2 ]] || fail "esp-gateway did not learn the new peer address (peer_changes=$changes)"
  ip netns exec "$nsc" ss -Hnu state all "dst $gw_ip:4501" | grep -q "10.201.0.5:" || fail "the ESP socket is not from 10.201.0.5"
  espvpn_down || fail "clean exit"
  [[ $gap -lt 15000 ]] || fail "outage ${gap} ms"
  echo "RESULT addrchange: $cl_ip -> 10.201.0.5; outage ${gap} ms; ping ${back_ms} ms after the move;" \
       "esp-gateway peer_changes=$changes (ESP from the new address)"
  ;;
roam_addrchange|roam_linkflap|roam_gwroute|roam_gwroute_late) roam_case ;;
suspend)
  # 10 s of SIGSTOP, not the issue's 30: what matters is that the old path died meanwhile and
  # the loop sees the resume; longer only lengthens CI. SUSPEND_S / ROAM_STREAM_S change them
  # (ESPVPN_NO_ROAMING=1 ROAM_STREAM_S=60 measures without roaming: DPD only).
  stop_s=${SUSPEND_S:-10} stream_s=${ROAM_STREAM_S:-$((${SUSPEND_S:-10} + 9))}
  private_bus_up "$nsc"
  ip netns exec "$nsc" $py "$here/fake_logind.py" "unix:path=$work/bus" "$work/logind.log" "$work/logind.ready" 120 \
    >"$work/logind.out" 2>&1 &
  logind_pid=$!; pids+=("$logind_pid")
  wait_for "$work/logind.ready" ready 15 || fail "the stand-in logind did not start"
  DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus" up --reconnect-timeout 60
  stream_start "$stream_s"
  sleep 2
  sport=$(ip netns exec "$nsc" ss -Hnu state all "dst $gw_ip:4501" | awk '{split($(NF-1), a, ":"); print a[length(a)]; exit}')
  [[ -n $sport ]] || fail "no ESP socket to $gw_ip:4501"
  kill -USR2 "$logind_pid"
  wait_until 5 grep -q sleep "$work/logind.log" || fail "the stand-in logind did not signal the sleep"
  # Both of espvpn's processes sleep, as in a suspend: the session (login, tunnel) and its broker.
  session=$(session_of "$client_pid")
  kill -STOP "$session" "$client_pid"
  t_stop=$(date +%s%N)
  # The old path dies while espvpn sleeps: the gateway drops its ESP flow (that source port).
  ip netns exec "$nsg" nft add table inet gpsl
  ip netns exec "$nsg" nft add chain inet gpsl in "{ type filter hook input priority 0; }"
  ip netns exec "$nsg" nft add rule inet gpsl in ip saddr $cl_ip udp sport "$sport" drop
  sleep "$stop_s"
  kill -CONT "$client_pid" "$session"
  t_usable=$(date +%s%N)
  kill -USR1 "$logind_pid"
  stopped_ms=$(((t_usable - t_stop) / 1000000))
  resumed "after the resume" $((stream_s - stop_s - 3))
  back_ms=$((($(date +%s%N) - t_usable) / 1000000))
  stream_outage
  ping_lan || fail "ping after the resume"
  path=$(client_stat 'd.get("path")')
  if [[ -z ${ESPVPN_NO_ROAMING:-} ]]; then
    # The bus goes away (dbus-daemon restarted): espvpn stops watching it, says so, and the
    # tunnel carries on (a hung-up bus fd left in the poll would wake the loop for ever).
    kill "$bus_pid"
    wait_for "$work/espvpn.log" "the system bus went away" 10 "$client_pid" || fail "the bus's end not noticed"
    ping_lan || fail "ping after the bus went away"
    [[ $(client_stat 'd["path"]["logind"]') == False ]] || fail "still watching a bus that is gone: $(client_stat 'd["path"]')"
  fi
  espvpn_down || fail "clean exit"
  if [[ -z ${ESPVPN_NO_ROAMING:-} ]]; then
    [[ $(json "$work/cl-stats.json" 'd["path"]["resumes"]') -ge 1 ]] || fail "no resume counted: $path"
    [[ $(json "$work/cl-stats.json" 'd["path"]["sleep_signals"]') -ge 1 ]] || fail "logind's PrepareForSleep(false) not counted: $path"
    [[ $(json "$work/cl-stats.json" 'd["path"]["probes"] + d["path"]["reconnects"]') -ge 1 ]] \
      || fail "the resume was neither probed nor reconnected: $path"
    grep -q "resumed" "$work/espvpn.log" || fail "no resume logged"
  fi
  after_ms=$((gap - stopped_ms))
  if [[ -n ${ROAM_MAX_MS:-} ]]; then
    ((after_ms <= ROAM_MAX_MS)) || fail "outage ${gap} ms: ${after_ms} ms after the resume (limit $ROAM_MAX_MS)"
  fi
  echo "RESULT suspend (default DPD${ESPVPN_NO_ROAMING:+, roaming off}): stopped ${stopped_ms} ms, outage (largest stream gap)" \
       "${gap} ms, ${after_ms} ms of it after the resume; first ping ${back_ms} ms after; path: $path;" \
       "how: $(grep -o 'path changed: [^;]*\|no answer to the probe[^;]*' "$work/espvpn.log" | head -2 | tr '\n' ';')"
  ;;
blackhole_sigint)
  up --force-dpd 1 --reconnect-timeout 60 --http-timeout 8
  ip netns exec "$nsg" nft add table inet gpbh
  ip netns exec "$nsg" nft add chain inet gpbh in "{ type filter hook input priority 0; }"
  ip netns exec "$nsg" nft add rule inet gpbh in ip saddr $cl_ip drop
  wait_for "$work/espvpn.log" "reconnect attempt 1 (outage" 40 "$client_pid" || fail "no reconnect attempt after ESP died"
  sleep 1  # well inside the attempt's TCP connect (8 s limit)
  grep -q "reconnect attempt 1 failed\|reconnected" "$work/espvpn.log" && fail "the attempt ended before the SIGINT"
  sigint_exit "$client_pid"
  client_pid=
  echo "SIGINT during a blackholed GP reconnect attempt: exit $rc after $exit_ms ms ($(grep -o 'cancelled in [0-9]* ms' "$work/espvpn.log" || echo 'no cancel logged'))"
  [[ $rc -eq 0 ]] || fail "exit $rc after SIGINT, expected 0"
  grep -q "connection attempt in progress .* cancelled" "$work/espvpn.log" || fail "the cancelled attempt is not logged"
  grep -q "no connection to the gateway: logout not sent" "$work/espvpn.log" || fail "no word on the logout"
  no_tun_left "$nsc" || fail "tun device left behind"
  ((exit_ms < 3000)) || fail "espvpn took $exit_ms ms to exit after SIGINT (limit 3000)"
  echo "RESULT blackhole_sigint: exit 0 ${exit_ms} ms after SIGINT during reconnect attempt 1"
  ;;
gone)
  up --force-dpd 1 --reconnect-timeout 5
  gateway_down
  t_down=$(date +%s%N)
  rc=0
  timeout 60 tail --pid="$client_pid" -f /dev/null || true
  wait "$client_pid" || rc=$?
  client_pid=
  took_ms=$((($(date +%s%N) - t_down) / 1000000))
  [[ $rc -eq 1 ]] || fail "espvpn exited $rc (expected 1) when the gateway stayed away"
  grep -q "giving up (--reconnect-timeout 5)" "$work/espvpn.log" || fail "no clear give-up message"
  grep -q "reconnecting for up to 5 s" "$work/espvpn.log" || fail "the outage start is not logged"
  no_tun_left "$nsc" || fail "tun device left behind"
  attempts=$(grep -c "reconnect attempt [0-9]* (outage" "$work/espvpn.log" || true)
  [[ $attempts -ge 3 ]] || fail "only $attempts reconnect attempts in 5 s (1, 3 and 5 s expected)"
  # It gave up at the deadline, not after an attempt past it: the outage espvpn itself
  # measured (its clock, from the loss) is 5 s plus its 100 ms poll; held off by an attempt
  # in flight it would be 5 s plus that attempt's limit (10 s). The wall clock here (DPD
  # detection first, a loaded machine's exit) is printed, not judged.
  outage=$(sed -n 's/.*no connection to the gateway for \([0-9.]*\) s, giving up.*/\1/p' "$work/espvpn.log" | head -1)
  [[ -n $outage ]] || fail "the give-up line names no outage"
  $py -c "import sys; sys.exit(0 if 5 <= float(sys.argv[1]) < 9 else 1)" "$outage" || fail "gave up after an outage of $outage s"
  echo "RESULT gone: exit 1 ${took_ms} ms after the gateway went away (outage $outage s); $attempts attempts;" \
       "$(grep -o "no connection to the gateway.*" "$work/espvpn.log" | head -1)"
  ;;
forgotten)
  # The gateway restarts without its sessions: the cookie is refused at the reconnect.
  up --force-dpd 1 --reconnect-timeout 60
  gateway_down
  rm -f "$work/fake-state.json"
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not restart"
  rc=0
  timeout 60 tail --pid="$client_pid" -f /dev/null || true
  wait "$client_pid" || rc=$?
  client_pid=
  [[ $rc -eq 2 ]] || fail "espvpn exited $rc (expected 2) when the restarted gateway refused the cookie"
  # Refused at the tunnel GET (HTTP 502) or at the getconfig, whichever comes first.
  grep -q "session cookie rejected\|log in again" "$work/espvpn.log" || fail "no clear message that the cookie is no longer valid"
  no_tun_left "$nsc" || fail "tun device left behind"
  [[ $(logins) -eq 0 ]] || fail "espvpn logged in again by itself"
  echo "RESULT forgotten: exit 2, tun removed, no login; $(grep -m1 "session cookie rejected\|log in again" "$work/espvpn.log")"
  ;;
flood)
  # flood [-R]: iperf3 UDP -b 3G for 5 s; appends the end-to-end loss % to $lost.
  lost=""
  flood() {
    iperf_client "$nsc" "$work/flood.json" 40 -c $lan_ip -u -b 3G -l 1300 -t 5 ${1:-} \
      || fail "iperf3 UDP flood ${1:-up}"
    lost+="$(json "$work/flood.json" '"%.0f%%" % d["end"]["sum"]["lost_percent"]') "
    ping_lan || fail "no ping after the flood ${1:-up}"
  }
  drops() {  # espvpn's drop counters (every transport), summed
    client_stat 'sum(v for part in ("tx", "rx", "https") if isinstance(d.get(part), dict) for k, v in d[part].items() if k.startswith("drop"))'
  }
  up
  flood; flood -R
  esp_drops=$(drops) esp_mb=$(peak_rss_mb "$client_pid")
  espvpn_down || fail "clean exit"
  espvpn_up --no-dtls
  wait_for "$work/espvpn.log" "HTTPS tunnel up" 30 "$client_pid" || fail "--no-dtls: no HTTPS tunnel"
  carrier "$nsg" "$ht_dev" yes 15 || fail "the fake did not attach to the HTTPS-side tun"
  flood; flood -R
  https_drops=$(drops) https_mb=$(peak_rss_mb "$client_pid")
  espvpn_down || fail "clean exit"
  # espvpn blocks on a full socket/tun instead of dropping: the excess is lost in the
  # kernel's queues in front of it (tun txqueue, UDP receive buffer), not in espvpn.
  echo "RESULT flood: 3 Gbit/s UDP 5 s each way (iperf3 loss up/down ESP, up/down HTTPS: $lost);" \
       "ESP: peak RSS $esp_mb MiB, $esp_drops drops in espvpn; HTTPS tunnel: peak RSS $https_mb MiB," \
       "$https_drops drops in espvpn; ping after each"
  # Under ASan freed memory sits in its quarantine (256 MiB by default): a higher bound,
  # still far below unbounded growth (openconnect's HTTPS tunnel: 7 GB in 30 s).
  limit=$(rss_limit_mb "$espvpn" 100)
  [[ $esp_mb -lt $limit && $https_mb -lt $limit ]] || fail "peak RSS ESP $esp_mb MiB / HTTPS $https_mb MiB >= $limit MiB"
  ;;
*) echo "usage: $0 netem|restart|linkflap|addrchange|gone|forgotten|flood ESPVPN GATEWAY" >&2; exit 2 ;;
esac
