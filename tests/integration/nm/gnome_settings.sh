#!/usr/bin/env bash
# GNOME Settings' network panel (Debian's gnome-control-center 43) and nm-applet (the
# secret agent, network-manager-gnome 1.30) with the espvpn plugin, against a real
# NetworkManager (the real_nm_env.sh harness: its own namespaces and system bus), under Xvfb
# on a session bus of their own with an unlocked gnome-keyring, driven through AT-SPI by
# gnome_settings.py (label "gui"; root; ~30 s):
#   gnome_settings.sh [ac|shell] [--name-file FILE] SERVICE ESPVPN PLUGIN_SO GATEWAY_BIN [SHOT_DIR]
# --name-file: an installed package's .name file (tests/integration/nm/deb_install.sh): the
# programs and editor plugin it names are used as installed, and the bus takes the D-Bus policy
# from /usr/share/dbus-1/system.d; SERVICE, ESPVPN and PLUGIN_SO are not used. Without it, the
# build tree's SERVICE (run with ESPVPN) and PLUGIN_SO, through a .name file written here.
# A GP profile added in Settings (VPN + > espvpn > the GTK4 editor), edited there, switched
# on in the panel: nm-applet runs nm-espvpn-auth-dialog, whose login window asks the password
# and the portal's OTP round (--portal-otp), the tunnel carries a ping as ESP to the fake GP
# gateway + tools/esp-gateway (GATEWAY_BIN); the password kept as password-flags say (1: the
# keyring, answering the next connect's password prompt; 2: asked each time, never saved).
# With "ac": AnyConnect against ocserv (group list, banner) instead: an AnyConnect profile
# made in Settings' editor (vpn.data checked item by item), switched on in the panel, nm-applet's request brings up the login window, which asks the group
# (a drop-down), the password and the banner; a ping crosses the tunnel to ocserv's LAN, ocserv
# has the session in the chosen group (10-30 s).
# With "shell": GNOME Shell 43 instead of Settings and nm-applet (`gnome-shell --x11`, an X11
# session on the Xvfb, in NetworkManager's mount namespace: its private /run has no
# /run/systemd/seats, so the Shell uses no logind; its network agent on the harness's system
# bus): a GP profile switched on with the VPN toggle of the Shell's quick settings, the Shell's
# agent runs the dialog (external UI), the login window asks the password and the OTP round,
# the Shell hands the cookie on; a ping as ESP (~20 s).
# What Settings needs here: a session bus (dbus-run-session: the AT-SPI bus is activated
# on it), NetworkManager's system bus, XDG_CURRENT_DESKTOP=GNOME; no gnome-session, no
# gnome-shell, no accounts-daemon, no window manager.
# Skips (77) only when a package tools/install-deps installs is missing.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
case=gp
[[ ${1:-} == ac || ${1:-} == shell ]] && { case=$1; shift; }
name_file=
[[ ${1:-} == --name-file ]] && { name_file=$2; shift 2; }
service=$1 espvpn=$2 plugin=$3 gw_bin=$4 shots=${5:-}
missing=()
for c in NetworkManager dbus-daemon Xvfb dbus-run-session gnome-control-center nm-applet gnome-keyring-daemon \
  secret-tool; do
  command -v $c >/dev/null || missing+=("$c")
done
/usr/bin/python3 -c 'import pyatspi' 2>/dev/null || missing+=(python3-pyatspi)
[[ $case != ac ]] || command -v ocserv >/dev/null || missing+=(ocserv)
[[ $case != shell ]] || command -v gnome-shell >/dev/null || missing+=(gnome-shell)
if ((${#missing[@]})); then echo "SKIP: missing ${missing[*]} (tools/install-deps installs them)"; exit 77; fi
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/gnome-settings.XXXXXX)
chmod 755 "$work"
pids=()
xvfb_pid=
fail() {
  echo "FAIL: $*"
  [[ -f $work/nm.log ]] && { echo "--- nm.log"; grep -v DEBUG "$work/nm.log" | tail -30; }
  [[ -f $work/ocserv.log ]] && { echo "--- ocserv.log"; tail -20 "$work/ocserv.log"; }
  exit 1
}
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"  # and tools/netns/gp-topology.sh
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
if [[ -n $name_file ]]; then
  nm_up "$name_file" || fail "NetworkManager did not start"
else
  nm_build_tree_name "$service" "$espvpn" "$plugin"
  nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" || fail "NetworkManager did not start"
fi
nm_base_up || fail "the base connection did not come up"
if [[ $case == ac ]]; then
  # ocserv_env.sh: grpuser in group1 ("First Group") and group2, its banner; ocserv's LAN is $lan_ip's.
  OC_GROUPS=1 ocserv_up || fail "ocserv did not start"
  live=(GS_CASE=ac LIVE_AC_URL="https://$gw_ip:$oc_port/" LIVE_AC_USER=grpuser LIVE_AC_PASSWORD="$oc_password"
    OCCTL_SOCKET="$work/oc/occtl.socket")
else
  gateway_up aes-128-gcm --portal-otp xml:111111 --portal-cookie || fail "the fake gateway did not start"
  live=("GS_CASE=$case" LIVE_GP_URL="https://$gw_ip:4443/" GW_STATS="$work/gw-stats.json")
fi

# The X server's socket is a file in /tmp (shared with NM's mount namespace).
exec 3>"$work/display"
Xvfb -displayfd 3 -screen 0 1280x1000x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
exec 3>&-
for _ in $(seq 600); do [[ -s $work/display ]] && break; sleep 0.1; done  # 60 s: a loaded machine
[[ -s $work/display ]] || fail "Xvfb did not start: $(cat "$work/xvfb.log")"
display=":$(head -n1 "$work/display")"
mkdir -p "$work/home"

# The driver, Settings, nm-applet and the keyring in NM's namespaces (its bus, its nmcli),
# on a session bus of their own (dbus-run-session: it ends with the driver).
nm_ns env -u DBUS_SESSION_BUS_ADDRESS -u XDG_RUNTIME_DIR DISPLAY="$display" NO_AT_BRIDGE=0 GTK_USE_PORTAL=0 \
  HOME="$work/home" XDG_CURRENT_DESKTOP=GNOME "${live[@]}" LIVE_CA="$repo/certs/ca.pem" LIVE_PING="$lan_ip" \
  timeout 170 dbus-run-session -- /usr/bin/python3 "$here/gnome_settings.py" "$work" $shots \
  2> >(grep -v 'Failed to set fd limit\|dbus-daemon\[' >&2) || fail "gnome_settings.py failed"
if [[ $case == gp ]]; then echo "RESULT gnome_settings: passed"; else echo "RESULT gnome_settings $case: passed"; fi
