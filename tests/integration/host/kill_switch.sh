#!/usr/bin/env bash
# --kill-switch, against the fake GP gateway in namespaces (tools/netns/gp-topology.sh),
# an IPv4-only full tunnel (--disable-ipv6). What leaves the client is counted on the
# gateway's end of the outer veth (a netdev ingress counter): every IPv4 packet not to
# the gateway's address and every IPv6 packet other than neighbour discovery. Probes:
# ping 10.201.0.9 and fd00:201::9 (addresses on the outer link, so the connected routes
# take them past the tunnel, and IPv6 is not tunnelled at all).
#   before espvpn: the probes arrive (the counter sees leaks);
#   tunnel up: traffic through the tunnel flows, the probes do not leave;
#   outage (the gateway drops the client): the rules stay, nothing leaves;
#   espvpn killed (SIGKILL): the table stays (fail closed), nothing leaves;
#   the next start with --kill-switch reports and replaces it; its SIGINT removes it and
#   the probes arrive again; a start without --kill-switch removes a leftover table;
#   --allow-lan PREFIX lets that prefix through; --allow-lan without --kill-switch and
#   --kill-switch works with --setuid (the broker of the privilege split keeps and removes the rules).
#   portal (gp): the portal on another address (10.201.0.3) than its gateway (10.201.0.1): the
#   table lets TCP to the portal's port through, so a new login (espvpn --authenticate) passes
#   while the tunnel runs; nothing else to the portal's address leaves.
#   kill_switch.sh gp|ac tunnel ESPVPN [GATEWAY_BIN]   (gp: the fake GP gateway; ac: ocserv)
#   kill_switch.sh gp portal ESPVPN GATEWAY_BIN
# shellcheck source=../proto_head.sh
. "$(dirname "$0")/../proto_head.sh" kill-switch "$@"
topo_up
fake_routes=(--full-tunnel)
oc_routes=("route = default")
ip -n "$nsg" addr add 10.201.0.9/24 dev "${topo}gc"
ip -n "$nsg" addr add fd00:201::9/64 dev "${topo}gc" nodad
ip netns exec "$nsg" nft -f - <<EOF
table netdev leak {
  counter v4 {}
  counter v6 {}
  chain in {
    type filter hook ingress device "${topo}gc" priority 0;
    ip daddr != $gw_ip counter name "v4"
    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, mld-listener-report, mld2-listener-report } accept
    ip6 daddr != $gw_ip6 counter name "v6"
  }
}
EOF
leaks() { ip netns exec "$nsg" nft list counter netdev leak "$1" | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }
probe() {  # one ping each way out of the tunnel; their failure is expected under the kill switch
  ip netns exec "$nsc" ping -c 1 -W 1 10.201.0.9 >/dev/null 2>&1 || true
  ip netns exec "$nsc" ping -6 -c 1 -W 1 fd00:201::9 >/dev/null 2>&1 || true
}
expect_leaks() {  # WHAT: the probes must arrive (both counters grow)
  local v4=$(leaks v4) v6=$(leaks v6)
  probe
  (($(leaks v4) > v4 && $(leaks v6) > v6)) || fail "$1: the probes did not arrive (v4 $v4 -> $(leaks v4), v6 $v6 -> $(leaks v6))"
}
expect_none() {  # WHAT: nothing leaves outside the tunnel
  local v4=$(leaks v4) v6=$(leaks v6)
  probe
  (($(leaks v4) == v4 && $(leaks v6) == v6)) || fail "$1: packets left outside the tunnel (v4 $v4 -> $(leaks v4), v6 $v6 -> $(leaks v6))"
  echo "$1: 0 packets outside the tunnel"
}
has_table() { ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null 2>&1; }
server_up() {
  if [[ $proto == gp ]]; then gateway_up aes-128-gcm; else ocserv_up; fi
}
server_url=https://$gw_ip:${oc_port:-4443}/
start_espvpn() {  # LOG ARGS...: until the stats say a transport carries the tunnel
  local log=$1 login=(--protocol=gp -u alice) pass=secret; shift
  [[ $proto == ac ]] && login=(--protocol=anyconnect -u testuser) pass=$oc_password
  rm -f "$work/$log.json"
  echo "$pass" | ip netns exec "$nsc" "$espvpn" "${login[@]}" --cafile "$repo/certs/ca.pem" \
    --passwd-on-stdin --disable-ipv6 --reconnect-timeout 600 --stats-json "$work/$log.json" "$@" \
    "$server_url" >"$work/$log.out" 2>"$work/$log.log" &
  client_pid=$!; pids+=("$client_pid")
  stats_wait "$work/$log.json" "d['transport'] != 'none'" 30 || fail "$log: espvpn did not bring the tunnel up"
}
ping_lan() { ip netns exec "$nsc" ping -c "${1:-2}" -i 0.2 -W 2 $lan_ip >/dev/null; }

case $mode in
tunnel)
  # Refused combinations, before any network use.
  out=$("$espvpn" --allow-lan=10.0.0.0/8 https://192.0.2.1/ 2>&1) && fail "--allow-lan without --kill-switch was accepted"
  grep -q -- "--allow-lan needs --kill-switch" <<<"$out" || fail "unclear refusal: $out"

  server_up || fail "the $proto server did not start"
  expect_leaks "without espvpn"

  start_espvpn ks1 --kill-switch --setuid nobody
  grep -q "kill switch on" "$work/ks1.log" || fail "no 'kill switch on' in the log"
  has_table || fail "no nftables table inet espvpn_kill_switch while connected"
  # (the listing is read whole: grep -q stopping early would kill nft with SIGPIPE under pipefail)
  table=$(ip netns exec "$nsc" nft list table inet espvpn_kill_switch)
  grep -q "espvpn pid $client_pid" <<<"$table" || fail "the table does not name espvpn's pid $client_pid: $table"
  ping_lan || fail "no traffic through the tunnel with the kill switch on"
  expect_none "tunnel up"

  # Outage: the gateway drops everything from the client; the rules stay.
  ip netns exec "$nsg" nft -f - <<EOF
table inet outage {
  chain in {
    type filter hook input priority -10;
    ip saddr $cl_ip drop
  }
}
EOF
  ! ping_lan 1 || fail "the outage did not stop the tunnel"
  has_table || fail "the table went during the outage"
  expect_none "outage"
  ip netns exec "$nsg" nft delete table inet outage

  # SIGKILL: no clean-up runs; the table must stay and keep blocking.
  kill -KILL "$client_pid"; wait "$client_pid" 2>/dev/null || true
  killed=$client_pid
  has_table || fail "the table went with a killed espvpn (fail open)"
  expect_none "espvpn killed"

  start_espvpn ks2 --kill-switch --allow-lan=10.201.0.9/32
  grep -q "replacing the table espvpn pid $killed left behind" "$work/ks2.log" ||
    fail "the next start did not report the table pid $killed left"
  ping_lan || fail "no traffic through the tunnel after replacing the table"
  v4=$(leaks v4)
  ip netns exec "$nsc" ping -c 1 -W 2 10.201.0.9 >/dev/null || fail "--allow-lan 10.201.0.9/32: ping blocked"
  (($(leaks v4) > v4)) || fail "--allow-lan: the ping did not arrive"
  v6=$(leaks v6)
  ip netns exec "$nsc" ping -6 -c 1 -W 1 fd00:201::9 >/dev/null 2>&1 || true
  (($(leaks v6) == v6)) || fail "IPv6 leaked with --allow-lan (IPv4 only allowed)"
  sigint_exit "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  grep -q "kill switch off: it blocked [1-9][0-9]* packets out" "$work/ks2.log" || fail "no blocked count at exit"
  has_table && fail "the table stayed after a clean exit"
  expect_leaks "after a clean exit"

  # A leftover table and a start without --kill-switch: reported and removed.
  start_espvpn ks3 --kill-switch
  kill -KILL "$client_pid"; wait "$client_pid" 2>/dev/null || true
  killed=$client_pid
  start_espvpn ks4
  grep -q "removed the kill switch espvpn pid $killed left behind" "$work/ks4.log" ||
    fail "a start without --kill-switch did not report the leftover table"
  has_table && fail "the leftover table is still there"
  ping_lan || fail "no traffic through the tunnel after removing the leftover table"
  sigint_exit "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  echo "PASS: $proto kill switch (no packet outside the tunnel while up, in an outage and after SIGKILL)"
  ;;
portal)
  # The fake serves the portal on a second listener, 10.201.0.3 (in the test certificate), whose
  # configuration names the first, 10.201.0.1, as the gateway.
  portal_ip=10.201.0.3
  ip -n "$nsg" addr add $portal_ip/24 dev "${topo}gc"
  ip netns exec "$nsg" nft -f - <<EOF
table netdev portal {
  counter other {}
  chain in {
    type filter hook ingress device "${topo}gc" priority 1;
    ip daddr $portal_ip tcp dport != 4443 counter name "other"
    ip daddr $portal_ip meta l4proto != tcp counter name "other"
  }
}
EOF
  other() { ip netns exec "$nsg" nft list counter netdev portal other | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }
  gateway_up aes-128-gcm --listen $portal_ip:4443 || fail "the fake gateway did not start"
  server_url=https://$portal_ip:4443/
  start_espvpn ks1 --kill-switch
  table=$(ip netns exec "$nsc" nft list table inet espvpn_kill_switch)
  grep -q "ip daddr $portal_ip tcp dport 4443 accept" <<<"$table" || fail "no rule for the portal's TCP port: $table"
  grep -q "ip daddr $gw_ip accept" <<<"$table" || fail "the portal did not send espvpn to the gateway $gw_ip: $table"
  ping_lan || fail "no traffic through the tunnel with the kill switch on"
  # A new login to the portal (and its gateway) while the kill switch is on.
  echo secret | timeout 30 ip netns exec "$nsc" "$espvpn" --protocol=gp -u alice --cafile "$repo/certs/ca.pem" \
    --passwd-on-stdin --http-timeout 5 --authenticate "$server_url" >"$work/relogin.out" 2>"$work/relogin.log" ||
    fail "the login to the portal was blocked under the kill switch: $(tail -3 "$work/relogin.log")"
  grep -q "^COOKIE=" "$work/relogin.out" || fail "the new login printed no cookie"
  # Only TCP to its port: a ping, UDP and another TCP port to the portal's address stay blocked.
  n=$(other)
  ip netns exec "$nsc" ping -c 1 -W 1 $portal_ip >/dev/null 2>&1 || true
  ip netns exec "$nsc" bash -c "echo x >/dev/udp/$portal_ip/4443" 2>/dev/null || true
  ip netns exec "$nsc" timeout 2 bash -c "echo x >/dev/tcp/$portal_ip/4444" 2>/dev/null || true
  (($(other) == n)) || fail "packets other than TCP to 4443 reached the portal's address ($n -> $(other))"
  sigint_exit "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  has_table && fail "the table stayed after a clean exit"
  echo "PASS: gp kill switch lets a new login reach the portal $portal_ip:4443 (gateway $gw_ip), nothing else to it"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
