# Sourced by ac_ocserv.sh (after its setup and helpers) for the modes of one topic:
# the DTLS data channel: PSK and legacy modes, UDP blocked (CSTP, then DTLS), DTLS dying mid-
# session, an IPv6 outer address.
#   dtls_psk:     password login (two form rounds: username, then password), DTLS in PSK-NEGOTIATE mode:
#                 ocserv lists the DTLS session, ping v4 + v6, iperf3 TCP both ways (2 s), --stats-json
#                 says the data went over DTLS (not CSTP); SIGUSR1 prints both channels; logout
#   dtls_legacy:  the same (v4 only) with ocserv's dtls-psk = false (legacy resumption mode), and
#                 --dtls-local-port pins the UDP socket's local port
#   udp_blocked:  nftables drops UDP to ocserv's port: CSTP carries ping + iperf3, stats say CSTP;
#                 unblocked: DTLS comes back within the retry period (--esp-retry-interval 4)
#   dtls_dies:    UDP from ocserv dropped once DTLS is up: back to CSTP within ~2 x DPD (DPD 2 s),
#                 ping over CSTP, no exit; a new DTLS once UDP flows again
#   outer_v6:     ocserv reachable over IPv6 only (https://[fd00:201::1]:4443/): CSTP over TCPv6,
#                 DTLS (PSK) over UDPv6, ping v4 + v6, iperf3 both ways on DTLS; the tun MTU equals
#                 openconnect 9.01's against the same ocserv (ocserv's v6 figure)
# shellcheck shell=bash
case $mode in
dtls_psk|dtls_legacy)
  want=${mode#dtls_}
  port_opt=(); [[ $want == legacy ]] && port_opt=(--dtls-local-port 40123)
  espvpn_up dtls -u testuser --passwd-on-stdin "${port_opt[@]}" <<<"$oc_password"
  dtls_up dtls
  # The DTLS (and CSTP) threads run under their seccomp filter (src/sandbox).
  why=$(pipelines_confined "$client_pid" 2) || fail "$why"
  why=$(privsep_checked "$client_pid") || fail "$why"
  if [[ $want == legacy ]]; then
    ip netns exec "$nsc" ss -Hun state established >"$work/ss.out"
    grep -q "$cl_ip:40123 *$gw_ip:$oc_port" "$work/ss.out" || fail "--dtls-local-port 40123 not used: $(cat "$work/ss.out")"
  fi
  occtl_run show users >"$work/users.out"
  occtl_run show sessions all >"$work/sessions.out" 2>&1 || true
  occtl_run -j show user testuser >"$work/user.json"
  grep -q '"DTLS cipher": *"[^"(]*(DTLS' "$work/user.json" || fail "ocserv does not show a DTLS cipher for the session"
  if [[ $want == psk ]]; then
    grep -q 'PSK' "$work/user.json" || fail "ocserv's DTLS session is not PSK"
    grep -q "fd00:199::" "$work/dtls.log" || fail "no IPv6 address from the pool"
    for ((i = 0; i < 30; i++)); do ip -n "$nsc" -6 route get "$lan_ip6" 2>/dev/null | grep -q " dev tun" && break; sleep 0.1; done
    ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 "$lan_ip6" >"$work/ping6.out" 2>&1 || fail "ping -6 $lan_ip6 through DTLS"
  else
    ! grep -q 'PSK' "$work/user.json" || fail "ocserv's DTLS session is PSK, expected legacy"
  fi
  dtls_traffic dtls "$want"
  grep -h "DTLS up\|tun MTU\|CSTP connected" "$work/dtls.log" | sed 's/^/  /'
  kill -USR1 "$client_pid"
  wait_for "$work/dtls.log" "DTLS ($want, carrying data)" 10 || fail "SIGUSR1 printed no DTLS line"
  espvpn_stop dtls
  echo "PASS $mode"
  ;;
udp_blocked)
  udp_block both
  espvpn_up blocked -u testuser --passwd-on-stdin --esp-retry-interval 4 \
    <<<"$oc_password"
  ping_lan
  iperf_mbps; up=$mbps; iperf_mbps -R; down=$mbps
  echo "espvpn with UDP blocked (CSTP): up $up Mbit/s, down $down Mbit/s"
  stats_check blocked "d['transport'] == 'cstp' and d['cstp']['tx_bytes'] > 1000000 and \
    d['cstp']['rx_bytes'] > 1000000 and d['dtls']['datapath']['tx']['inner_packets'] == 0" ||
    fail "the stats do not show CSTP carrying the data"
  # ocserv writes a TLS record per packet: the CSTP rx thread lingered during the download.
  stats_check blocked "d['cstp']['rx_lingers'] > 0" || fail "the CSTP rx thread never lingered during the download"
  grep -q "DTLS: .*data over CSTP, next DTLS attempt" "$work/blocked.log" || fail "no failed DTLS attempt logged"
  udp_unblock
  t0=$SECONDS
  wait_for "$work/blocked.log" "data over DTLS" 25 || fail "DTLS did not come back within 25 s of the unblock"
  echo "DTLS back $((SECONDS - t0)) s after the unblock"
  dtls_traffic blocked psk
  espvpn_stop blocked
  echo "PASS udp_blocked"
  ;;
dtls_dies)
  espvpn_up dies -u testuser --passwd-on-stdin --esp-retry-interval 4 <<<"$oc_password"
  dtls_up dies
  ping_lan
  udp_block in
  t0=$SECONDS
  # ping keeps traffic going so the loss is noticed by the data as well as by DPD
  ip netns exec "$nsc" ping -c 40 -i 0.25 -W 1 "$lan_ip" >"$work/ping-dies.out" 2>&1 &
  ping_pid=$!; pids+=("$ping_pid")
  wait_for "$work/dies.log" "DTLS: no DTLS packet for 2 x DPD" 10 || fail "DTLS death not noticed within 10 s"
  echo "DTLS declared dead $((SECONDS - t0)) s after the block (DPD 2 s)"
  stats_check dies "d['transport'] == 'cstp'" || fail "the stats do not say CSTP after the DTLS death"
  sleep 1
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 "$lan_ip" >"$work/ping-cstp.out" 2>&1 || fail "no ping over CSTP after the DTLS death"
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited after the DTLS death"
  udp_unblock
  for ((i = 0; i < 100; i++)); do [[ $(grep -c "data over DTLS" "$work/dies.log") -ge 2 ]] && break; sleep 0.2; done
  [[ $(grep -c "data over DTLS" "$work/dies.log") -ge 2 ]] || fail "DTLS did not come back after UDP flowed again"
  stats_check dies "d['transport'] == 'dtls' and d['transport_switches'] >= 3" || fail "the stats do not show the switches"
  espvpn_stop dies
  echo "PASS dtls_dies"
  ;;
outer_v6)
  espvpn_up v6 -u testuser --passwd-on-stdin <<<"$oc_password"
  dtls_up v6
  ip netns exec "$nsc" ss -Htn state established "dst [$gw_ip6]:$oc_port" | grep -q . ||
    fail "CSTP is not over TCPv6 to [$gw_ip6]:$oc_port"
  ip netns exec "$nsc" ss -Hun state established "dst [$gw_ip6]:$oc_port" | grep -q . ||
    fail "DTLS is not over UDPv6 to [$gw_ip6]:$oc_port"
  occtl_run -j show user testuser >"$work/user.json"
  grep -q 'PSK' "$work/user.json" || fail "ocserv's DTLS session is not PSK"
  ping_lan
  for ((i = 0; i < 30; i++)); do ip -n "$nsc" -6 route get "$lan_ip6" 2>/dev/null | grep -q " dev tun" && break; sleep 0.1; done
  ip netns exec "$nsc" ping -6 -c 3 -i 0.2 -W 2 "$lan_ip6" >"$work/ping6.out" 2>&1 || fail "ping -6 $lan_ip6 through DTLS"
  dtls_traffic v6 psk
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  e_mtu=$(ip -n "$nsc" -o link show "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  # 1406 - 40 IPv6 - 8 UDP - 38 DTLS (1 type + 13 header + 8 nonce + 16 tag): 1320 (v4: 1340).
  [[ $e_mtu == 1320 ]] || fail "tun MTU $e_mtu over the IPv6 outer, expected 1320"
  ip netns exec "$nsc" ping -M do -s $((e_mtu - 28)) -c 3 -i 0.2 -W 2 "$lan_ip" >"$work/ping-df.out" 2>&1 ||
    fail "a full-size packet ($e_mtu bytes, DF) did not pass DTLS"
  frags=0
  for ns in "$nsc" "$nsg"; do
    frags=$((frags + $(ip netns exec "$ns" awk '$1 == "Ip6FragCreates" { print $2 }' /proc/net/snmp6)))
  done
  [[ $frags -eq 0 ]] || fail "$frags outer IPv6 fragments created: the tunnel MTU is too large for the link"
  grep -h "DTLS up\|tun MTU\|CSTP connected\|MTU" "$work/v6.log" | sed 's/^/  /'
  espvpn_stop v6
  echo "$oc_password" | ip netns exec "$nsc" openconnect -u testuser --passwd-on-stdin "${ca[@]}" \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Established DTLS connection" 30 "$oc_client" || fail "openconnect did not bring DTLS up over IPv6"
  wait_route
  ping_lan
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  o_mtu=$(ip -n "$nsc" -o link show "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  kill -INT "$oc_client"; wait "$oc_client" || true
  # openconnect probes the DTLS path with padded DPD and may settle lower ("Detected MTU of N
  # bytes (was M)"); M is the MTU it had from ocserv, the one to compare.
  o_given=$(sed -n 's/.*Detected MTU of [0-9]* bytes (was \([0-9]*\)).*/\1/p' "$work/oc.out" | head -1)
  echo "tun MTU over the IPv6 outer: espvpn $e_mtu; openconnect 9.01 ${o_given:-$o_mtu} from ocserv, tun $o_mtu after its probing"
  [[ $e_mtu == "${o_given:-$o_mtu}" ]] || fail "tun MTU espvpn $e_mtu != openconnect's ${o_given:-$o_mtu}"
  echo "PASS outer_v6"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
