#!/usr/bin/env bash
# nm-espvpn-service on a private D-Bus daemon (never the system bus), driven as
# NetworkManager drives a VPN plugin, in the shared three-namespace topology (the
# service runs in the client namespace), against the fake GlobalProtect gateway or,
# for the ac_* modes, against ocserv (tests/integration/anyconnect/ocserv_env.sh).
#   nm_plugin.sh errors|tunnel|ac_tunnel|ac_errors|ac_deputy SERVICE ESPVPN GATEWAY_BIN
#   errors: bad settings -> D-Bus error; NeedSecrets; wrong password ->
#           Failure(LOGIN_FAILED), espvpn gone; the helper alone: unusable env ->
#           Failure(BAD_IP_CONFIG); SIGTERM -> the service exits 0
#   tunnel: cookie -> Config/Ip4Config/Ip6Config carry the fake's address, routes,
#           DNS, MTU; ping v4+v6 through the tun; Disconnect -> espvpn logs out and
#           exits, tun removed, the fake saw the logout, the service quits
#   ac_tunnel: what NetworkManager-openconnect's auth dialog hands over (cookie,
#           gateway, gwcert pin; no CA file) with protocol=anyconnect -> Config/Ip4Config/
#           Ip6Config carry ocserv's pool address, routes, DNS, split domain, banner, MTU;
#           data on DTLS (ocserv lists the DTLS cipher); ping v4+v6, a full-MTU ping;
#           Disconnect -> logout: ocserv lists no session, tun gone, the service quits;
#           the logged-out cookie again -> Failure(LOGIN_FAILED)
#   ac_deputy: ocserv with certificate login; a profile the user nobody owns
#           (connection.permissions) naming root-only (0600 root) key/certificate ->
#           Connect refused with an error naming the item, no espvpn, ocserv saw nothing; a
#           missing file -> the same words; nobody's own copies -> connects (espvpn given
#           /dev/fd/N); a system profile naming root's files -> connects as before
#   ac_errors: a cookie ocserv never issued -> Failure(LOGIN_FAILED); a good cookie with a
#           wrong gwcert pin -> Failure(CONNECT_FAILED) and the cookie is not spent; each
#           time espvpn gone, no tun left
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v dbus-daemon >/dev/null || { echo "SKIP: dbus-daemon not installed"; exit 77; }
mode=$1 service=$2 espvpn=$3 gw_bin=$4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/nm-plugin.XXXXXX)
pids=()
fail() { echo "FAIL: $*"; for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -25 "$f"; }; done; exit 1; }
case $mode in
ac_*)
  command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
  # shellcheck source=../anyconnect/ocserv_env.sh
  . "$repo/tests/integration/anyconnect/ocserv_env.sh"
  trap ocserv_cleanup EXIT
  ;;
*)
  # shellcheck source=../../../tools/netns/gp-topology.sh
  . "$repo/tools/netns/gp-topology.sh"
  trap topo_cleanup EXIT
  ;;
esac
trap 'exit 130' INT TERM
topo_up
if [[ $mode == ac_* ]]; then
  oc_extra=()
  if [[ $mode == ac_deputy ]]; then  # certificate login: the client certificate's UID names the user
    # shellcheck disable=SC2034  # read by ocserv_conf
    oc_auth=('auth = "certificate"')
    oc_extra=("ca-cert = $repo/certs/ca.pem" "cert-user-oid = 0.9.2342.19200300.100.1.1")
  fi
  # An IPv6 pool and route too, so Ip6Config has something to carry.
  ocserv_up "ipv6-network = fd00:199::/64" "route = fd00:202::/64" "${oc_extra[@]}" || fail "ocserv did not start"
  target=(--gateway "https://$gw_ip:$oc_port/" --server-netns "$nsg" --occtl-socket "$work/oc/occtl.socket"
    --ocserv-log "$work/ocserv.log" --oc-password "$oc_password" --pin "$oc_pin")
else
  gateway_up aes-128-gcm --dns 10.202.0.53 --dns6 fd00:202::53 --search corp.test || fail "fake gateway did not start"
  target=(--gateway "https://$gw_ip:4443/" --tun-ip "$tun_ip" --tun-ip6 "$tun_ip6")
fi

# A session-style bus on a socket of our own; it also loads the plugin's D-Bus
# policy file, so a syntax error there fails the test (dbus-daemon refuses it).
cat >"$work/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$work/bus.sock</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <include>$repo/src/nm/nm-espvpn-service.conf</include>
</busconfig>
CONF
dbus-daemon --config-file="$work/bus.conf" --nofork --nosyslog >"$work/dbus.log" 2>&1 &
pids+=("$!")
wait_for_socket() { local i; for ((i = 0; i < 50; i++)); do [[ -S $work/bus.sock ]] && return 0; sleep 0.1; done; return 1; }
wait_for_socket || fail "dbus-daemon did not start"

rc=0
$py "$here/nm_driver.py" "$mode" --address "unix:path=$work/bus.sock" --service "$service" --espvpn "$espvpn" \
  --netns "$nsc" "${target[@]}" --ca "$repo/certs/ca.pem" --work "$work" --gw-ip $gw_ip \
  --lan-ip $lan_ip --lan-ip6 $lan_ip6 || rc=$?
[[ $rc -eq 0 ]] || fail "driver failed ($rc)"
if [[ $mode == ac_* ]]; then
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "a tun device was left behind"
  echo "ok: no tun left in the client namespace"
  echo "RESULT nm_plugin $mode: passed"
  exit 0
fi
if [[ $mode == tunnel ]]; then
  [[ $(json "$work/fake-stats.json" 'd["logouts"]') -ge 1 ]] || fail "the fake gateway saw no logout"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "a tun device was left behind"
  echo "ok: the fake gateway saw the logout; no tun left in the client namespace"
fi
if [[ $mode == errors ]]; then
  [[ $(json "$work/fake-stats.json" 'd["login_failed"]') -ge 1 ]] || fail "the fake gateway saw no failed login"
  # No session ever started, so esp-gateway still waits for its first SA file, with
  # SIGTERM blocked for up to 30 s; it has no tun yet, so SIGKILL loses nothing.
  kill -KILL "$gw_pid" 2>/dev/null || true
fi
gateway_down
echo "RESULT nm_plugin $mode: passed"
