#!/usr/bin/env bash
# espvpn --protocol=anyconnect against Debian's ocserv, in namespaces of its own
# (tests/integration/anyconnect/ocserv_env.sh):
#   client (espvpn / openconnect) --veth-- ocserv --veth-- lan (ping / iperf3 target)
#
#   ac_ocserv.sh MODE ESPVPN_BIN
#   login:        password login (--authenticate), COOKIE usable by espvpn --cookie (tunnel, ping)
#                 and by openconnect -C (tunnel up); logout invalidates it: exit 2 as openconnect
#   group:        select-group form: --authgroup by label prefix and by value, second init round
#   wrong_password: clear error, exit 1 (as openconnect), no cookie printed
#   tunnel:       full connect (built-in setup and --script), ping + iperf3 TCP both ways (2 s),
#                 SIGINT: BYE sent (ocserv closes the session), tun removed, exit 0
#   server_kill:  occtl disconnect: espvpn notices, tun removed, exit 1
#   compare:      CSTP throughput, espvpn vs openconnect 9.01, same ocserv, iperf3 TCP 2 s each way
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
mode=$1 espvpn=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/ac-ocserv.XXXXXX)
pids=()
# shellcheck source=ocserv_env.sh
. "$here/ocserv_env.sh"
trap ocserv_cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
  exit 1
}
url=https://$gw_ip:$oc_port/
ca=(--cafile "$repo/certs/ca.pem")
topo_up
[[ $mode == group ]] && export OC_GROUPS=1
# DTLS is not espvpn's yet: ocserv offers it, espvpn and openconnect are run with --no-dtls
# so both measure CSTP.
ocserv_up || fail "ocserv did not start"

# authenticate USER [espvpn options...]: prints the COOKIE=... lines into $work/auth.out
authenticate() {
  local user=$1; shift
  echo "$oc_password" | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u "$user" \
    --passwd-on-stdin "$@" "$url" >"$work/auth.out" 2>"$work/auth.log"
}
cookie_of() { sed -n "s/^COOKIE='\(.*\)'$/\1/p" "$work/auth.out"; }

# espvpn_up NAME [options...]: espvpn in the client namespace until "tunnel up"; sets client_pid.
espvpn_up() {
  local name=$1; shift
  ip netns exec "$nsc" "$espvpn" "${ca[@]}" --no-dtls "$@" "$url" <&0 >"$work/$name.out" 2>"$work/$name.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_for "$work/$name.log" "tunnel up" 20 || fail "$name: espvpn did not bring the tunnel up"
}

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
  sleep 0.5
}
iperf_mbps() {  # [-R]
  iperf_up
  timeout 30 ip netns exec "$nsc" iperf3 -c "$lan_ip" -t 2 ${1:-} -J >"$work/iperf.json" 2>&1 || fail "iperf3 $*"
  json "$work/iperf.json" '"%.0f" % (d["end"]["sum_received"]["bits_per_second"]/1e6)'
}

case $mode in
login)
  authenticate testuser || fail "espvpn --authenticate exited $?"
  for k in COOKIE HOST CONNECT_URL FINGERPRINT RESOLVE; do grep -q "^$k='" "$work/auth.out" || fail "no $k line"; done
  cookie=$(cookie_of)
  [[ $cookie == webvpn=* ]] || fail "cookie is not webvpn=...: ${cookie:0:10}"
  ! grep -q "$oc_password" "$work/auth.log" || fail "the password shows in the log"
  # espvpn --cookie (openconnect's composite form too), tunnel, ping; SIGHUP keeps the session
  espvpn_up cookie -C "openconnect_strapkey=AAAA; $cookie"
  ping_lan
  kill -HUP "$client_pid"; wait "$client_pid" || fail "espvpn exited $? after SIGHUP"
  # the same cookie with openconnect: tunnel up (then SIGINT logs it out)
  echo "$cookie" | ip netns exec "$nsc" timeout 30 openconnect --cookie-on-stdin "${ca[@]}" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not take espvpn's cookie"
  ping_lan
  kill -INT "$oc_client"; wait "$oc_client" || true
  # logged out: the cookie is dead now, exit 2 as openconnect
  rc=0
  ip netns exec "$nsc" timeout 30 "$espvpn" "${ca[@]}" --no-dtls -C "$cookie" "$url" >"$work/dead.out" \
    2>"$work/dead.log" || rc=$?
  [[ $rc -eq 2 ]] || fail "a logged-out cookie gave exit $rc, expected 2"
  grep -q "401" "$work/dead.log" || fail "no 401 reason in the log"
  # openconnect says the same about it
  rc=0
  echo "$cookie" | ip netns exec "$nsc" timeout 30 openconnect --cookie-on-stdin "${ca[@]}" --no-dtls "$url" \
    >"$work/oc-dead.out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "openconnect gave exit $rc for the logged-out cookie"
  echo "PASS login"
  ;;
group)
  authenticate grpuser --authgroup first || fail "--authgroup first: exit $?"
  grep -q 'auth group "First Group" (group1)' "$work/auth.log" || fail "group1 not chosen by label prefix"
  authenticate grpuser --authgroup group2 || fail "--authgroup group2: exit $?"
  grep -q '(group2)' "$work/auth.log" || fail "group2 not chosen"
  espvpn_up grp -C "$(cookie_of)"
  ping_lan
  espvpn_stop grp
  rc=0; authenticate grpuser --authgroup nosuch || rc=$?
  [[ $rc -eq 1 ]] || fail "an unknown group gave exit $rc"
  grep -q 'not offered; the server offers \[First Group|group2\]' "$work/auth.log" || fail "no list of groups"
  echo "PASS group"
  ;;
wrong_password)
  rc=0
  printf 'bad1\nbad2\nbad3\n' | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u testuser \
    --passwd-on-stdin "$url" >"$work/auth.out" 2>"$work/auth.log" || rc=$?
  [[ $rc -eq 1 ]] || fail "wrong password gave exit $rc, expected 1 (as openconnect)"
  grep -q "rejected the credentials" "$work/auth.log" || fail "no clear error"
  ! grep -q COOKIE "$work/auth.out" || fail "a cookie was printed"
  rc=0
  echo bad1 | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u testuser --passwd-on-stdin \
    "$url" >"$work/auth.out" 2>"$work/auth1.log" || rc=$?
  [[ $rc -eq 1 ]] || fail "one wrong password then EOF gave exit $rc"
  grep -q "rejected the credentials (Login failed.)" "$work/auth1.log" || fail "no clear error after EOF"
  echo "PASS wrong_password"
  ;;
tunnel)
  espvpn_up builtin -u testuser --passwd-on-stdin <<<"$oc_password"
  grep -q "handshakes" "$work/builtin.log" && grep "TLS handshake" "$work/builtin.log" | head -3 || true
  ping_lan
  up=$(iperf_mbps); down=$(iperf_mbps -R)
  echo "espvpn CSTP (built-in setup): up $up Mbit/s, down $down Mbit/s"
  occtl_run show users >"$work/users.out"
  grep -q testuser "$work/users.out" || fail "ocserv does not list the session"
  espvpn_stop builtin
  sleep 0.5
  occtl_run show users >"$work/users.out"
  ! grep -q testuser "$work/users.out" || fail "ocserv still lists the session after the logout"
  espvpn_up script -u testuser --passwd-on-stdin --script "$repo/tools/netns/minimal-vpnc-script" <<<"$oc_password"
  ping_lan
  espvpn_stop script
  echo "PASS tunnel"
  ;;
server_kill)
  espvpn_up killed -u testuser --passwd-on-stdin <<<"$oc_password"
  ping_lan
  id=$(occtl_run -j show users | json /dev/stdin 'd[0]["ID"]')
  occtl_run disconnect id "$id" >/dev/null
  rc=0
  for ((i = 0; i < 100; i++)); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$client_pid" 2>/dev/null && fail "espvpn still running 10 s after the server ended the session"
  wait "$client_pid" || rc=$?
  [[ $rc -eq 1 ]] || fail "exit $rc after the server ended the session, expected 1 (as openconnect)"
  grep -q "terminated by the server" "$work/killed.log" || fail "no reason logged"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  echo "PASS server_kill"
  ;;
compare)
  espvpn_up cmp -u testuser --passwd-on-stdin <<<"$oc_password"
  e_up=$(iperf_mbps); e_down=$(iperf_mbps -R)
  espvpn_stop cmp
  echo "$oc_password" | ip netns exec "$nsc" openconnect -u testuser --passwd-on-stdin "${ca[@]}" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not connect"
  wait_route
  o_up=$(iperf_mbps); o_down=$(iperf_mbps -R)
  kill -INT "$oc_client"; wait "$oc_client" || true
  echo "CSTP over TLS through ocserv 1.1.6, iperf3 TCP 2 s (Mbit/s):"
  echo "  espvpn      up $e_up  down $e_down"
  echo "  openconnect up $o_up  down $o_down"
  echo "PASS compare"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
