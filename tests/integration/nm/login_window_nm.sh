#!/usr/bin/env bash
# The login window's secrets connect through the real NetworkManager: ocserv in namespaces
# (group list, a wrong password, Try Again, the banner: login_window_test.py's `ac` case,
# driven through AT-SPI under Xvfb in the client namespace), then the cookie, gateway and
# gwcert the dialog returned go to a profile of Debian's NetworkManager (real_nm_env.sh), which
# connects with them; a ping crosses the tunnel; down. Then the same for GlobalProtect, in
# the same NetworkManager run: the fake GP gateway (two gateways on $gw_ip:4444 and :4445) +
# tools/esp-gateway (GATEWAY_BIN) in the gateway namespace; the window (login_window_test.py's
# `gp_nm` case: a wrong password, the password, an OTP round, the second gateway) returns the
# cookie for that gateway, NetworkManager connects with it over ESP, a ping, down. Uses a
# system bus of its own, so runs hold /tmp/espvpn-nm.lock (ctest: RESOURCE_LOCK).
#   login_window_nm.sh SERVICE ESPVPN DIALOG GATEWAY_BIN
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
service=$1 espvpn=$2 dialog=$3 gw_bin=$4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
for tool in NetworkManager dbus-daemon ocserv; do
  command -v $tool >/dev/null || { echo "FAIL: $tool is missing (tools/install-deps installs it)"; exit 1; }
done
work=$(mktemp -d /tmp/login-window-nm.XXXXXX)
chmod 755 "$work"
pids=()
t0=$SECONDS
say() { echo "ok [$((SECONDS - t0)) s]: $*"; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/nm.log "$work"/ocserv.log "$work"/fake.log "$work"/gw.out; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
  exit 1
}
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
# shellcheck source=real_nm_env.sh
. "$here/real_nm_env.sh"
cleanup() {
  nm_down
  ocserv_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export OC_GROUPS=1
topo_up
nm_build_tree_name "$service" "$espvpn"
nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" || fail "NetworkManager did not start"
nm_base_up || fail "the base connection did not come up"
ocserv_up || fail "ocserv did not start"
url="https://$gw_ip:$oc_port/"
say "NetworkManager (pid $nm_pid) and ocserv up"

ip netns exec "$nsc" "$here/login_window_test.py" "$dialog" "$espvpn" ac --url "$url" --password "$oc_password" \
  --secrets-out "$work/secrets" || fail "the login window"
[[ -s $work/secrets ]] || fail "the window returned no secrets"
secrets=$(cat "$work/secrets")
nmc connection add type vpn con-name window autoconnect no vpn-type org.freedesktop.NetworkManager.espvpn \
  vpn.data "gateway=$url, protocol=anyconnect" vpn.secrets "$secrets" >/dev/null || fail "nmcli connection add"
out=$(nmc --wait 40 connection up window 2>&1) || fail "connection up with the window's secrets: $out"
[[ $(nmc -g GENERAL.STATE connection show window) == activated ]] || fail "the VPN is not activated"
tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{print $2}' | head -1)
[[ -n $tun ]] || fail "no tun device"
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 "$lan_ip" >/dev/null || fail "ping $lan_ip through $tun"
say "NetworkManager connected with the window's cookie (pinned by its gwcert): ping $lan_ip through $tun"
nmc connection down window >/dev/null || fail "connection down"
cookie=${secrets#cookie=}; cookie=${cookie%%,*}
! grep -qF -- "$cookie" "$work/nm.log" || fail "the cookie appears in NetworkManager's log"
no_tun() { [[ -z $(ip -n "$nsc" -o link show type tun) ]]; }
nm_wait 10 "the tun to go" no_tun || fail "a tun is left after down"

# GlobalProtect: the portal and its two gateways beside ocserv (which has port 4443).
fake_listen=$gw_ip:4444 gateway_up aes-128-gcm --listen "$gw_ip:4445" --portal-otp xml:111111 --portal-cookie \
  --gateway 0:1:first --gateway 1:2:second || fail "the fake GP gateway did not start"
say "the fake GP portal (gateways $gw_ip:4444, $gw_ip:4445) and the ESP gateway up"
portal="https://$gw_ip:4444/"
ip netns exec "$nsc" "$here/login_window_test.py" "$dialog" "$espvpn" gp_nm --url "$portal" \
  --gateway-url "https://$gw_ip:4445/" --stats "$work/fake-stats.json" --secrets-out "$work/secrets-gp" ||
  fail "the login window (GP)"
[[ -s $work/secrets-gp ]] || fail "the window returned no GP secrets"
secrets=$(cat "$work/secrets-gp")
nmc connection add type vpn con-name window-gp autoconnect no vpn-type org.freedesktop.NetworkManager.espvpn \
  vpn.data "gateway=$portal, protocol=gp, user=alice, cafile=$repo/certs/ca.pem" vpn.secrets "$secrets" >/dev/null ||
  fail "nmcli connection add window-gp"
out=$(nmc --wait 40 connection up window-gp 2>&1) || fail "GP connection up with the window's secrets: $out"
[[ $(nmc -g GENERAL.STATE connection show window-gp) == activated ]] || fail "the GP VPN is not activated"
tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{print $2}' | head -1)
[[ -n $tun ]] || fail "no tun device (GP)"
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 "$lan_ip" >/dev/null || fail "ping $lan_ip through $tun (GP)"
# Over ESP: the ESP gateway decrypted the pings (its stats file is rewritten every 200 ms).
esp_ok() { [[ $(json "$work/gw-stats.json" 'd["rx"]["esp_ok"]' 2>/dev/null || echo 0) -ge 2 ]]; }
nm_wait 5 "the ESP gateway to count the pings" esp_ok || fail "the pings did not cross as ESP"
# The tunnel's getconfig went to the gateway chosen in the window, none to the first.
[[ $(json "$work/fake-stats.json" "d['per_listener'].get('4445', {}).get('getconfigs', 0)") -ge 1 &&
  $(json "$work/fake-stats.json" "d['per_listener'].get('4444', {}).get('getconfigs', 0)") == 0 ]] ||
  fail "the tunnel's getconfig did not go (only) to the chosen gateway: $(json "$work/fake-stats.json" "d['per_listener']")"
say "NetworkManager connected with the window's GP cookie, to the chosen gateway: ping $lan_ip through $tun"
nmc connection down window-gp >/dev/null || fail "GP connection down"
cookie=${secrets#cookie=}; cookie=${cookie%%,*}
! grep -qF -- "$cookie" "$work/nm.log" || fail "the GP cookie appears in NetworkManager's log"
echo "PASS nm"
