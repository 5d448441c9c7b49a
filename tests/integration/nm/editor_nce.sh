#!/usr/bin/env bash
# nm-connection-editor (Debian's network-manager-gnome, GTK3) with the espvpn editor,
# against a real NetworkManager (the real_nm_env.sh harness: its own namespaces and
# system bus), under Xvfb, driven through AT-SPI by editor_nce.py (label "gui"; root).
#   editor_nce.sh SERVICE ESPVPN PLUGIN_SO GATEWAY_BIN [SHOT_DIR]
# Cases (editor_nce.py): a GlobalProtect and an AnyConnect profile created field by field
# and saved (nmcli -g vpn.data checked item by item); an invalid gateway keeps Save
# insensitive with the reason; a NetworkManager-openconnect profile imported with
# `nmcli connection import type espvpn file F`, opened in the editor, one field edited;
# a GP profile made by NetworkManager-openconnect itself (its plugin's import, Debian's
# network-manager-openconnect), imported in the editor from the keyfile NetworkManager
# wrote, saved, connected with `nmcli connection up` against the fake GP gateway +
# tools/esp-gateway (GATEWAY_BIN), a ping through the tunnel, down; the same for an
# AnyConnect profile NetworkManager-openconnect made, against Debian's ocserv.
# Skips (77) only when a package tools/install-deps installs is missing.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
service=$1 espvpn=$2 plugin=$3 gw_bin=$4 shots=${5:-}
missing=()
for c in NetworkManager dbus-daemon Xvfb nm-connection-editor dbus-run-session ocserv; do
  command -v $c >/dev/null || missing+=("$c")
done
oc_name=/usr/lib/NetworkManager/VPN/nm-openconnect-service.name
[[ -f $oc_name ]] || missing+=(network-manager-openconnect)
/usr/bin/python3 -c 'import pyatspi' 2>/dev/null || missing+=(python3-pyatspi)
if ((${#missing[@]})); then echo "SKIP: missing ${missing[*]} (tools/install-deps installs them)"; exit 77; fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/editor-nce.XXXXXX)
chmod 755 "$work"
pids=()
xvfb_pid=
fail() {
  echo "FAIL: $*"
  [[ -f $work/nm.log ]] && { echo "--- nm.log"; tail -30 "$work/nm.log"; }
  [[ -f $work/ocserv.log ]] && { echo "--- ocserv.log"; tail -20 "$work/ocserv.log"; }
  exit 1
}
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"  # and tools/netns/gp-topology.sh
oc_port=8443  # the fake GP portal has 4443
# shellcheck source=real_nm_env.sh
. "$here/real_nm_env.sh"
cleanup() {
  [[ -z $xvfb_pid ]] || { kill "$xvfb_pid" 2>/dev/null || true; wait "$xvfb_pid" 2>/dev/null || true; }
  nm_down
  ocserv_cleanup  # ocserv (if started), then topo_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
topo_up
nm_build_tree_name "$service" "$espvpn" "$plugin"
nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" || fail "NetworkManager did not start"
# NetworkManager-openconnect's .name file beside ours: nmcli finds its plugin (import) by it.
cp "$oc_name" "$nm_root/vpn/"
# For the imported profiles' connects: a default route (NetworkManager wants one before a
# VPN), the fake GP portal/gateway + the ESP gateway, and ocserv (its LAN is the same $lan_ip).
nm_base_up || fail "the base connection did not come up"
gateway_up aes-128-gcm || fail "the fake gateway did not start"
ocserv_up || fail "ocserv did not start"

# The X server's socket is a file in /tmp (shared with NM's mount namespace); its
# abstract socket would be in the host's network namespace only.
exec 3>"$work/display"
Xvfb -displayfd 3 -screen 0 1024x1000x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
exec 3>&-
for _ in $(seq 100); do [[ -s $work/display ]] && break; sleep 0.1; done
[[ -s $work/display ]] || fail "Xvfb did not start: $(cat "$work/xvfb.log")"
display=":$(head -n1 "$work/display")"

# The driver and the editor in NM's namespaces (its bus, its nmcli), on a session bus of
# their own (dbus-run-session: the AT-SPI bus is activated there and ends with it).
nm_ns env -u DBUS_SESSION_BUS_ADDRESS DISPLAY="$display" NO_AT_BRIDGE=0 GTK_USE_PORTAL=0 HOME="$work" \
  LIVE_GP_URL="https://$gw_ip:4443/" LIVE_CA="$repo/certs/ca.pem" LIVE_PING="$lan_ip" \
  GW_STATS="$work/gw-stats.json" LIVE_AC_URL="https://$gw_ip:$oc_port/" LIVE_AC_USER=testuser \
  LIVE_AC_PASSWORD="$oc_password" \
  timeout 150 dbus-run-session -- /usr/bin/python3 "$here/editor_nce.py" "$work" $shots \
  2> >(grep -v 'Failed to set fd limit\|dbus-daemon\[' >&2) || fail "editor_nce.py failed"
echo "RESULT editor_nce: passed"
