#!/usr/bin/env bash
# The espvpn VPN editor (GTK3 and GTK4) driven through AT-SPI under Xvfb (label "gui").
#   editor_gui.sh GTK NAME_FILE PLUGIN_SO [SCREENSHOT.png]
# NAME_FILE: the built nm-espvpn-service.name; a copy naming PLUGIN_SO (the built
# libnm-vpn-plugin-espvpn.so) by its full path is what libnm's loader reads here.
# A private X server (Xvfb) and session bus (dbus-run-session; the AT-SPI bus is
# activated on it and ends with it); both ended by PID. Skips (77) only when a package
# tools/install-deps installs is missing.
set -euo pipefail
gtk=$1 name_file=$2 plugin=$3 shot=${4:-}
here=$(cd "$(dirname "$0")" && pwd)

missing=()
command -v Xvfb >/dev/null || missing+=(xvfb)
command -v dbus-run-session >/dev/null || missing+=(dbus-daemon)
[[ -x /usr/libexec/at-spi-bus-launcher ]] || missing+=(at-spi2-core)
/usr/bin/python3 -c 'import pyatspi' 2>/dev/null || missing+=(python3-pyatspi)
/usr/bin/python3 -c "import gi; gi.require_version('NM', '1.0'); gi.require_version('Gtk', '$gtk.0')" 2>/dev/null ||
  missing+=(gir1.2-nm-1.0 "gir1.2-gtk-$gtk.0")
if ((${#missing[@]})); then echo "SKIP: missing ${missing[*]} (tools/install-deps installs them)"; exit 77; fi
[[ -z $shot ]] || command -v import >/dev/null || shot=""  # imagemagick: screenshots only

work=$(mktemp -d)
xvfb_pid=""
cleanup() {
  [[ -z $xvfb_pid ]] || kill "$xvfb_pid" 2>/dev/null || true
  [[ -z $xvfb_pid ]] || wait "$xvfb_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
sed "s|^plugin=.*|plugin=$plugin|" "$name_file" >"$work/espvpn.name"

# Xvfb picks a free display and writes its number to fd 3.
exec 3>"$work/display"
Xvfb -displayfd 3 -screen 0 1024x900x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
exec 3>&-
for _ in $(seq 100); do [[ -s $work/display ]] && break; sleep 0.1; done
[[ -s $work/display ]] || { echo "Xvfb did not start"; cat "$work/xvfb.log"; exit 1; }
export DISPLAY=":$(head -n1 "$work/display")"
# GTK4 without GL under Xvfb; no host theme or settings portal.
export GSK_RENDERER=cairo GTK_USE_PORTAL=0 NO_AT_BRIDGE=0 GTK_A11Y=atspi
unset DBUS_SESSION_BUS_ADDRESS
timeout 120 dbus-run-session -- /usr/bin/python3 "$here/editor_gui.py" "$gtk" "$work/espvpn.name" $shot 2> >(grep -v 'Failed to set fd limit' >&2)
