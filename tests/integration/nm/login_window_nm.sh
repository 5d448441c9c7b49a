#!/usr/bin/env bash
# The login window's secrets connect through the real NetworkManager: ocserv in namespaces
# (group list, a wrong password, Try Again, the banner: login_window_test.py's `ac` case,
# driven through AT-SPI under Xvfb in the client namespace), then the cookie, gateway and
# gwcert the dialog returned go to a profile of Debian's NetworkManager (real_nm_env.sh), which
# connects with them; a ping crosses the tunnel; down. Uses a system bus of its own, so
# runs hold /tmp/espvpn-nm.lock (ctest: RESOURCE_LOCK).
#   login_window_nm.sh SERVICE ESPVPN DIALOG
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
service=$1 espvpn=$2 dialog=$3
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
  for f in "$work"/nm.log "$work"/ocserv.log; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
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
echo "PASS nm"
