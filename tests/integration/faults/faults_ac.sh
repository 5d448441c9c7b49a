# Sourced by faults.sh for `faults.sh ac MODE ESPVPN`: the faults on a running AnyConnect tunnel
# (espvpn against Debian's ocserv; DTLS on unless said). The topology, the stream and resumed()
# come from faults.sh; verdicts rest on espvpn's --stats-json counters and on what ocserv and
# the kernel show, not on espvpn's log wording.
#   netem:      5 % loss + 50 ms +-20 ms jitter on the DTLS path (tools/netns/udp-impair, reached
#               through a DNAT of ocserv's UDP port): iperf3 TCP 5 s completes, the stats say DTLS
#               carried it
#   restart:    ocserv killed, started again 2 s later (an AnyConnect server keeps no sessions
#               across a restart): the reconnect's CONNECT is refused, exit 2 (as openconnect),
#               no password login on the new server, tun removed, resolv.conf restored
#   linkflap:   the client's veth down 3 s, up again: traffic resumes, DTLS back; espvpn runs on
#   addrchange: the client's address moves to 10.201.0.5: the TCP and UDP sockets of the old address
#               are dead, espvpn reconnects (stats: reconnects >= 1) from the new one (CSTP and
#               DTLS sockets from 10.201.0.5), traffic resumes
#   blackhole_sigint: everything from the client dropped at ocserv's namespace (no RST, no ICMP):
#               DPD (--force-dpd 1) declares DTLS and CSTP dead (stats: transport none), reconnect
#               attempt 1 waits for a SYN answer: SIGINT then exits 0 within 3 s, tun removed,
#               resolv.conf restored
#   flood:      iperf3 UDP -b 3G for 3 s each way on DTLS and on CSTP (--no-dtls): espvpn's peak RSS
#               (VmHWM) < 100 MiB (800 under ASan), ping afterwards; one ocserv for both
#   roam_addrchange, roam_gwroute, roam_gwroute_late (+ _timing): roaming with ocserv's and espvpn's DEFAULT DPD
#               (faults.sh's roam_case: the path reconnect / probe counted in --stats-json "path")
# shellcheck shell=bash

resolv_conf=/etc/netns/$nsc/resolv.conf
resolv_orig=$(cat "$resolv_conf")

# up [espvpn options...]: ocserv (started once) and espvpn, until the stats say DTLS (CSTP with
# --no-dtls) carries the data and a ping passes; sets client_pid.
up() {
  [[ -n ${oc_pid:-} ]] || ocserv_up "${oc_extra[@]}" || fail "ocserv did not start"
  rm -f "$work"/cl-stats.json "$work"/espvpn.out "$work"/espvpn.log
  ip netns exec "$nsc" "$espvpn" "${ca[@]}" -u testuser --passwd-on-stdin --stats-json "$work/cl-stats.json" "$@" \
    "$url" <<<"$oc_password" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  local want=dtls
  [[ " $* " == *" --no-dtls "* ]] && want=cstp
  stats_wait "$work/cl-stats.json" "d['transport'] == '$want'" 30 || fail "espvpn did not bring the tunnel up on $want"
  wait_until 10 ping_lan 1 || fail "no ping through the fresh tunnel"
}
# espvpn_down: SIGINT; fails unless espvpn exits 0 with its tun removed.
espvpn_down() {
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  client_pid=
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  no_tun_left "$nsc" || fail "tun device left behind"
}
running() { kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited: $(tail -3 "$work/espvpn.log")"; }
# exit_within SECONDS: waits for espvpn's exit; sets rc.
exit_within() {
  timeout "$1" tail --pid="$client_pid" -f /dev/null || fail "espvpn still running $1 s later"
  rc=0
  wait "$client_pid" || rc=$?
  client_pid=
}
# nft_drop NS TABLE RULE: a filter table on NS's input with one drop rule.
nft_drop() {
  ip netns exec "$1" nft add table inet "$2"
  ip netns exec "$1" nft add chain inet "$2" in "{ type filter hook input priority 0; }"
  ip netns exec "$1" nft add rule inet "$2" in "$3" drop
}
counters() { stats_get "$work/cl-stats.json" "'reconnects %d, transport switches %d, drops %d' % (d['reconnect']['reconnects'], d['transport_switches'], d['drops'])"; }

oc_extra=()
case $mode in
netem)
  # No sch_netem here: ocserv's UDP port is DNATed (for the client's datagrams) to udp-impair,
  # which relays them to ocserv from its own socket, with loss and delay both ways; ocserv finds
  # the DTLS session by its id, not by the source address. TCP (CSTP) goes straight.
  ip netns exec "$nsg" $py "$repo/tools/netns/udp-impair" --listen $gw_ip:4453 --to $gw_ip:$oc_port \
    --loss 5 --delay 50 --jitter 20 --seconds 300 >"$work/impair.out" 2>&1 &
  pids+=("$!")
  wait_listening "$nsg" udp 4453 10 || fail "udp-impair did not start"
  ip netns exec "$nsg" nft add table ip acimpair
  ip netns exec "$nsg" nft add chain ip acimpair pre "{ type nat hook prerouting priority dstnat; }"
  ip netns exec "$nsg" nft add rule ip acimpair pre ip saddr $cl_ip udp dport $oc_port dnat to $gw_ip:4453
  # counts every datagram that reached udp-impair (the nat chain sees a flow's first packet only)
  ip netns exec "$nsg" nft add chain ip acimpair in "{ type filter hook input priority 0; }"
  ip netns exec "$nsg" nft add rule ip acimpair in ip saddr $cl_ip udp dport 4453 counter
  up
  dtls0=$(stats_get "$work/cl-stats.json" "d['dtls']['datapath']['tx']['inner_bytes']")
  stream_start 10
  t0=$(date +%s%N)
  iperf_client "$nsc" "$work/iperf.json" 60 -c $lan_ip -t 5 || fail "iperf3 TCP under loss + jitter"
  took_ms=$((($(date +%s%N) - t0) / 1000000))
  mbit=$(json "$work/iperf.json" '"%.1f" % (d["end"]["sum_received"]["bits_per_second"]/1e6)')
  retr=$(json "$work/iperf.json" 'd["end"]["sum_sent"].get("retransmits", 0)')
  stream_outage
  [[ $took_ms -le 30000 ]] || fail "iperf3 took $took_ms ms"
  stats_wait "$work/cl-stats.json" "d['transport'] == 'dtls' and d['dtls']['datapath']['tx']['inner_bytes'] - $dtls0 > 500000" 10 ||
    fail "the stats do not show the TCP on DTLS: $(cat "$work/cl-stats.json")"
  relayed=$(ip netns exec "$nsg" nft list chain ip acimpair in | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
  ((${relayed:-0} > 1000)) || fail "the DTLS datagrams did not take udp-impair (DNAT counter ${relayed:-none})"
  ping_lan || fail "no ping under loss + jitter"
  running
  espvpn_down
  echo "RESULT ac netem: 5% loss + 50+-20 ms each way (udp-impair on the DTLS path): iperf3 TCP 5 s completed in ${took_ms} ms," \
       "$mbit Mbit/s, $retr retransmits; stream largest gap ${gap} ms, $(cat "$work/stream.out")"
  ;;
restart)
  up "${fast[@]}"
  ocserv_kill
  sleep 2
  ocserv_up "${oc_extra[@]}" || fail "ocserv did not start again"
  exit_within 60
  [[ $rc -eq 2 ]] || fail "espvpn exited $rc (expected 2) when the restarted server refused the cookie"
  no_tun_left "$nsc" || fail "tun device left behind"
  [[ $(cat "$resolv_conf") == "$resolv_orig" ]] || fail "resolv.conf stand-in not restored: $(cat "$resolv_conf")"
  ! grep -q "authenticate user" "$work/ocserv.log" || fail "espvpn logged in again with the password by itself"
  grep -q "failed cookie authentication" "$work/ocserv.log" || fail "the restarted ocserv saw no reconnect with the old cookie"
  echo "RESULT ac restart: ocserv down 2 s, sessions lost: exit 2, tun removed, resolv.conf restored, no new login;" \
       "$(grep -m1 -o "401.*\|session cookie.*" "$work/espvpn.log" || true)"
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
  running
  stats_wait "$work/cl-stats.json" "d['transport'] == 'dtls'" 30 || fail "DTLS did not come back after the link flap"
  ping_lan || fail "ping after link down/up"
  stats=$(counters)
  espvpn_down
  [[ $gap -lt 15000 ]] || fail "outage ${gap} ms"
  echo "RESULT ac linkflap: link down 3 s; outage ${gap} ms; ping ${back_ms} ms after down; $stats"
  ;;
addrchange)
  up "${fast[@]}"
  stream_start 16
  sleep 3
  ip -n "$nsc" addr del $cl_ip/24 dev "$cl_veth"
  ip -n "$nsc" addr add 10.201.0.5/24 dev "$cl_veth"
  t_move=$(date +%s%N)
  resumed "after the address change" 25
  back_ms=$((($(date +%s%N) - t_move) / 1000000))
  stream_outage
  running
  stats_wait "$work/cl-stats.json" "d['reconnect']['reconnects'] >= 1 and d['transport'] == 'dtls'" 30 ||
    fail "no reconnect + DTLS from the new address: $(cat "$work/cl-stats.json")"
  ip netns exec "$nsc" ss -Htn state established "dst $gw_ip:$oc_port" | grep -q "10.201.0.5:" ||
    fail "the CSTP connection is not from 10.201.0.5: $(ip netns exec "$nsc" ss -Htn "dst $gw_ip:$oc_port")"
  ip netns exec "$nsc" ss -Hun state all "dst $gw_ip:$oc_port" | grep -q "10.201.0.5:" ||
    fail "the DTLS socket is not from 10.201.0.5: $(ip netns exec "$nsc" ss -Hun "dst $gw_ip:$oc_port")"
  ping_lan || fail "ping after the address change"
  stats=$(counters)
  espvpn_down
  [[ $gap -lt 20000 ]] || fail "outage ${gap} ms"
  echo "RESULT ac addrchange: $cl_ip -> 10.201.0.5; outage ${gap} ms; ping ${back_ms} ms after the move; $stats"
  ;;
blackhole_sigint)
  up --force-dpd 1 --reconnect-timeout 60
  nft_drop "$nsg" acbh "ip saddr $cl_ip"
  stats_wait "$work/cl-stats.json" "d['transport'] == 'none'" 30 || fail "espvpn did not notice the dead server (stats transport)"
  # The outage's first attempt starts at once; its TCP connect has a 10 s limit.
  wait_for "$work/espvpn.log" "reconnect attempt 1 (outage" 10 "$client_pid" || fail "no reconnect attempt in the outage"
  sleep 1
  grep -q "reconnect attempt 1 failed\|reconnected" "$work/espvpn.log" && fail "the attempt ended before the SIGINT"
  sigint_exit "$client_pid"
  client_pid=
  echo "SIGINT during a blackholed AnyConnect reconnect attempt: exit $rc after $exit_ms ms"
  [[ $rc -eq 0 ]] || fail "exit $rc after SIGINT, expected 0"
  no_tun_left "$nsc" || fail "tun device left behind"
  [[ $(cat "$resolv_conf") == "$resolv_orig" ]] || fail "resolv.conf stand-in not restored: $(cat "$resolv_conf")"
  ((exit_ms < 3000)) || fail "espvpn took $exit_ms ms to exit after SIGINT (limit 3000)"
  echo "RESULT ac blackhole_sigint: exit 0 ${exit_ms} ms after SIGINT during reconnect attempt 1"
  ;;
flood)
  lost=""
  flood() {  # [-R]: iperf3 UDP -b 3G for 3 s; appends the end-to-end loss % to $lost
    iperf_client "$nsc" "$work/flood.json" 40 -c $lan_ip -u -b 3G -l 1200 -t 3 ${1:-} \
      || fail "iperf3 UDP flood ${1:-up}"
    lost+="$(json "$work/flood.json" '"%.0f%%" % d["end"]["sum"]["lost_percent"]') "
    wait_until 10 ping_lan 1 || fail "no ping after the flood ${1:-up}"
    running
  }
  up
  flood; flood -R
  dtls_mb=$(peak_rss_mb "$client_pid") dtls_drops=$(stats_get "$work/cl-stats.json" "d['drops']")
  stats_wait "$work/cl-stats.json" "d['transport'] == 'dtls'" 5 || fail "not on DTLS after the floods"
  espvpn_down
  up --no-dtls
  flood; flood -R
  cstp_mb=$(peak_rss_mb "$client_pid") cstp_drops=$(stats_get "$work/cl-stats.json" "d['drops']")
  espvpn_down
  echo "RESULT ac flood: 3 Gbit/s UDP 3 s each way (iperf3 loss up/down DTLS, up/down CSTP: $lost);" \
       "DTLS: peak RSS $dtls_mb MiB, $dtls_drops drops in espvpn; CSTP: peak RSS $cstp_mb MiB, $cstp_drops drops; ping after each"
  # Under ASan: 100 MiB plus its quarantine (256 MiB) and shadow; GnuTLS allocates a buffer per
  # record, so a flood fills the quarantine (the DTLS flood peaked at 394-474 MiB there, 16 MiB in
  # release; unbounded growth would be GBs).
  limit=$(rss_limit_mb "$espvpn" 100 800)
  [[ $dtls_mb -lt $limit && $cstp_mb -lt $limit ]] || fail "peak RSS DTLS $dtls_mb MiB / CSTP $cstp_mb MiB >= $limit MiB"
  ;;
roam_addrchange|roam_gwroute|roam_gwroute_late) roam_case ;;
*) echo "usage: faults.sh ac netem|restart|linkflap|addrchange|blackhole_sigint|flood|roam_addrchange|roam_gwroute[_timing] ESPVPN" >&2; exit 2 ;;
esac
