#!/usr/bin/env bash
# espvpn --protocol=anyconnect against Debian's ocserv, in namespaces of its own
# (tests/integration/anyconnect/ocserv_env.sh):
#   client (espvpn / openconnect) --veth-- ocserv --veth-- lan (ping / iperf3 target)
#
#   ac_ocserv.sh MODE ESPVPN_BIN
#   Modes by topic, each documented in its file:
#   ac_ocserv_connect.sh: cert cert_token cert_password cert_missing cert_wrong login group wrong_password tunnel full_tunnel server_kill compare
#   ac_ocserv_dtls.sh: dtls_psk dtls_legacy udp_blocked dtls_dies outer_v6
#   ac_ocserv_dtlsmatrix.sh: dtls_ciphers dtls_impaired dtls_lost_answer
#   ac_ocserv_reconnect.sh: reconnect_tls_drop reconnect_dpd reconnect_gone reconnect_cookie_refused sigusr2 blackhole_sigint sigusr2_blocked
#   ac_ocserv_rekey.sh: rekey_new_tunnel rekey_ssl rekey_ssl_busy rekey_tls13 rekey_dtls
# shellcheck source=../ac_test_head.sh
. "$(dirname "$0")/../ac_test_head.sh" ac-ocserv "$@"
topo_up
[[ $mode == group ]] && export OC_GROUPS=1
[[ $mode == dtls_dies ]] && export OC_DPD=2
# Process control (-b --pid-file --setuid -Q --csd-wrapper, CTest ac_ocserv_process_control): in the
# host suite, tests/integration/host/host_ac.sh (mode background), beside GP's host_background.
# The CSTP cases run espvpn (and openconnect) with --no-dtls; the dtls_* cases without.
dtls_opt=(--no-dtls)
oc_extra=() rk_opt=()
case $mode in
dtls_*|udp_blocked|server_kill) dtls_opt=() ;;&
dtls_psk) oc_extra=("ipv6-network = fd00:199::/64" "route = fd00:202::/64") ;;
dtls_legacy) oc_extra=("dtls-psk = false") ;;
full_tunnel) oc_routes=("route = default") ;;
outer_v6)
  dtls_opt=() oc_listen_host=$gw_ip6 url="https://[$gw_ip6]:$oc_port/"
  # A 1406-byte link: openconnect takes its base MTU from the TCP path MTU, espvpn defaults
  # to 1406, so both ask ocserv with the same base and the MTUs compare.
  ip -n "$nsc" link set "${topo}cg" mtu 1406; ip -n "$nsg" link set "${topo}gc" mtu 1406
  oc_extra=("ipv6-network = fd00:199::/64" "route = fd00:202::/64") ;;
esac
case $mode in
reconnect_dpd) dtls_opt=(); export OC_DPD=2 ;;
reconnect_*|sigusr2*|blackhole_*) dtls_opt=() ;;
rekey_new_tunnel) dtls_opt=(); oc_extra=("rekey-time = 30" "rekey-method = new-tunnel") ;;
# ssl: ocserv's DPD 20 s (it drops a client silent on TLS for 3 x DPD) and espvpn's --force-dpd 30: espvpn's
# only CSTP DPD request falls due with the 30-s rekey (see the case below)
rekey_ssl) dtls_opt=(); export OC_DPD=20; rk_opt=(--force-dpd 30); oc_extra=("rekey-time = 30" "rekey-method = ssl") ;;
rekey_ssl_busy) oc_extra=("rekey-time = 30" "rekey-method = ssl") ;;
# TLS 1.3 allowed (Debian's config and cisco-client-compat leave it out; the last tls-priorities line wins)
rekey_tls13|rekey_dtls) oc_extra=('tls-priorities = "NORMAL:%SERVER_PRECEDENCE"' "cisco-client-compat = false"
                                 "rekey-time = 30" "rekey-method = ssl") ;;&
rekey_dtls) dtls_opt=() ;;
esac
# rekey_tls13: ocserv's GnuTLS logs the key update it receives (GnuTLS reads GNUTLS_DEBUG_LEVEL at start)
[[ $mode == rekey_tls13 ]] && export GNUTLS_DEBUG_LEVEL=4
case $mode in
cert|cert_token|cert_missing|cert_wrong) oc_auth=('auth = "certificate"') ;;&
cert_password) oc_auth=("auth = \"plain[passwd=$work/oc/passwd]\"" 'auth = "certificate"') ;;&
cert*) oc_extra+=("ca-cert = $repo/certs/ca.pem" "cert-user-oid = 0.9.2342.19200300.100.1.1") ;;
esac
ocserv_up "${oc_extra[@]}" || fail "ocserv did not start"
unset GNUTLS_DEBUG_LEVEL

# authenticate USER [espvpn options...]: prints the COOKIE=... lines into $work/auth.out
authenticate() {
  local user=$1; shift
  echo "$oc_password" | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u "$user" \
    --passwd-on-stdin "$@" "$url" >"$work/auth.out" 2>"$work/auth.log"
}
cookie_of() { sed -n "s/^COOKIE='\(.*\)'$/\1/p" "$work/auth.out"; }

# espvpn_up NAME [options...]: espvpn in the client namespace (log $work/NAME.log, --stats-json
# $work/NAME.json) until its stats say a channel carries data; sets client_pid.
espvpn_up() {
  local name=$1; shift
  rm -f "$work/$name.json"
  ip netns exec "$nsc" "$espvpn" "${ca[@]}" "${dtls_opt[@]}" --stats-json "$work/$name.json" "$@" "$url" <&0 \
    >"$work/$name.out" 2>"$work/$name.log" &
  client_pid=$!; pids+=("$client_pid")
  stats_wait "$work/$name.json" "d['transport'] != 'none'" 20 || fail "$name: espvpn did not bring the tunnel up"
}
# dtls_up NAME: until the stats say DTLS carries the data.
dtls_up() { stats_wait "$work/$1.json" "d['transport'] == 'dtls'" 20 || fail "$1: DTLS did not come up"; }

espvpn_stop() {  # NAME: SIGINT, exit 0, tun gone, ocserv saw the logout
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "$1: espvpn exited $rc after SIGINT"
  grep -q "logout (DISCONNECT) sent" "$work/$1.log" || fail "$1: no logout sent"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "$1: tun device left behind"
}

wait_route() {  # the script may still be adding the route when the client says it is up
  local i
  for ((i = 0; i < 50; i++)); do
    ip -n "$nsc" route get "$lan_ip" 2>/dev/null | grep -q " dev tun" && return 0
    sleep 0.1
  done
  fail "no route to $lan_ip through a tun device"
}
ping_lan() {
  wait_route ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 "$lan_ip" >"$work/ping.out" 2>&1 || fail "ping $lan_ip through the tunnel"; }

iperf_up() {
  [[ -n ${iperf_pid:-} ]] && return 0
  ip netns exec "$nsl" iperf3 -s -B "$lan_ip" >"$work/iperf-server.log" 2>&1 &
  iperf_pid=$!; pids+=("$iperf_pid")
  wait_listening "$nsl" tcp 5201 15 || fail "iperf3 -s did not start"
}
iperf_mbps() {  # [-R]: 2 s of iperf3 TCP client -> lan (-R: lan -> client); sets mbps (received)
  iperf_up
  iperf_json 2 "$work/iperf.json" ${1:-} || fail "iperf3 ${1:-}"
  mbps=$(json "$work/iperf.json" '"%.0f" % (d["end"]["sum_received"]["bits_per_second"]/1e6)')
}

iperf_up

# script_logging FILE: $work/script appends each reason to FILE, then configures as minimal-vpnc-script.
script_logging() {
  printf '#!/bin/sh\necho "$reason" >>%s\nexec %s\n' "$1" "$repo/tools/netns/minimal-vpnc-script" >"$work/script"
  chmod +x "$work/script"
}
tun_name() { ip -n "$nsc" -o link show type tun | awk -F': ' '{print $2; exit}'; }

# DTLS helpers. stats_check NAME PYTHON-EXPR: the expression over d (the --stats-json object) must hold.
# stream_start RECV_NS DEST SEND_NS PORT SECONDS: 200 pkt/s of UDP from SEND_NS to DEST:PORT (received in RECV_NS)
stream_start() {
  ip netns exec "$1" $py "$here/../datapath/udp_stream.py" recv "$2" "$4" $(($5 + 2)) >"$work/stream.out" &
  rpid=$!; pids+=("$rpid")
  wait_listening "$1" udp "$4" 10 || fail "the stream receiver did not start"
  ip netns exec "$3" $py "$here/../datapath/udp_stream.py" send "$2" "$4" "$5" 200 >/dev/null &
  spid=$!; pids+=("$spid")
}
# stream_end: the stream is over, espvpn still runs, the largest gap in it is under 2 s
stream_end() {
  local gap
  wait "$spid" "$rpid" || true
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited across the rekey"
  echo "stream across the rekey: $(cat "$work/stream.out")"
  gap=$(sed -n 's/.*max_gap_ms=\([0-9.]*\).*/\1/p' "$work/stream.out")
  [[ -n $gap ]] || fail "no stream result"
  $py -c "import sys; sys.exit(0 if float('$gap') < 2000 else 1)" || fail "largest gap $gap ms across the rekey"
}

stats_check() {
  local i
  for ((i = 0; i < 30; i++)); do  # the file is rewritten every second
    [[ -s $work/$1.json ]] && json "$work/$1.json" "$2" 2>/dev/null | grep -qx True && return 0
    sleep 0.2
  done
  echo "--- $work/$1.json"; cat "$work/$1.json" 2>/dev/null || true
  return 1
}
# udp_block [in|out|both] / udp_unblock: nftables in the client namespace drops UDP to/from ocserv's port.
udp_block() {
  ip netns exec "$nsc" nft add table inet acblock
  ip netns exec "$nsc" nft add chain inet acblock out "{ type filter hook output priority 0; }"
  ip netns exec "$nsc" nft add chain inet acblock in "{ type filter hook input priority 0; }"
  [[ $1 == in ]] || ip netns exec "$nsc" nft add rule inet acblock out udp dport $oc_port drop
  [[ $1 == out ]] || ip netns exec "$nsc" nft add rule inet acblock in udp sport $oc_port drop
}
udp_unblock() { ip netns exec "$nsc" nft delete table inet acblock; }
# dtls_traffic NAME MODE: ping, iperf3 both ways, and the stats say all of it went over DTLS:
# both DTLS directions carried > 1 MB, CSTP data grew by less than 5 % of that meanwhile.
dtls_traffic() {
  local name=$1 want=$2 cstp0 dtls0
  stats_check "$name" "d['transport'] == 'dtls'" || fail "$name: the stats do not say DTLS"
  cstp0=$(json "$work/$name.json" "d['cstp']['tx_bytes'] + d['cstp']['rx_bytes']")
  dtls0=$(json "$work/$name.json" "d['dtls']['datapath']['tx']['inner_bytes']")
  ping_lan
  iperf_mbps; up=$mbps; iperf_mbps -R; down=$mbps
  echo "espvpn DTLS ($want): up $up Mbit/s, down $down Mbit/s"
  stats_check "$name" "d['transport'] == 'dtls' and d['dtls']['mode'] == '$want' and \
    d['dtls']['datapath']['tx']['inner_bytes'] - $dtls0 > 1000000 and d['dtls']['datapath']['rx']['inner_bytes'] > 1000000 \
    and d['cstp']['tx_bytes'] + d['cstp']['rx_bytes'] - $cstp0 < 0.05 * (d['dtls']['datapath']['tx']['inner_bytes'] - $dtls0)" ||
    fail "$name: the stats do not show the data on DTLS ($want)"
  # ocserv sends one datagram at a time: during the download the rx thread waited for more
  # before receiving (src/datapath/rx_linger.h), and nothing was lost for it (iperf3 above).
  stats_check "$name" "d['dtls']['datapath']['rx']['lingers'] > 0" ||
    fail "$name: the rx thread never lingered during a download from ocserv"
}

# The modes, by topic (one file each, sourced here after the setup above).
case $mode in
cert|cert_token|cert_password|cert_missing|cert_wrong|login|group|wrong_password|tunnel|full_tunnel|server_kill|compare) topic=connect ;;
dtls_psk|dtls_legacy|udp_blocked|dtls_dies|outer_v6) topic=dtls ;;
dtls_ciphers|dtls_impaired|dtls_lost_answer) topic=dtlsmatrix ;;
reconnect_tls_drop|reconnect_dpd|reconnect_gone|reconnect_cookie_refused|sigusr2|blackhole_sigint|sigusr2_blocked) topic=reconnect ;;
rekey_new_tunnel|rekey_ssl|rekey_ssl_busy|rekey_tls13|rekey_dtls) topic=rekey ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
# shellcheck source=ac_ocserv_connect.sh
. "$here/ac_ocserv_$topic.sh"
