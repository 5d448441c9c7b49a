#!/usr/bin/env bash
# The Debian package in a fresh root: `dpkg -i` into a copy-on-write view of this
# machine (an overlay whose lower layer is /, in a mount namespace of its own: the
# host's files and dpkg database are never written), then, from the installed files
# only: `espvpn --version`, the package's file list and the real-NetworkManager test
# (real_nm.sh gp with /usr/sbin/espvpn, /usr/lib/NetworkManager/nm-espvpn-service, the
# installed .name file and the D-Bus policy the bus reads from /usr/share/dbus-1/system.d);
# with GNOME_DEB, the GUI test nm_gnome_settings (gnome_settings.sh --name-file) on the
# installed .name file, editor plugin and GTK4 editor, auth dialog and service.
#   deb_install.sh DEB GATEWAY_BIN [GNOME_DEB]
# GNOME_DEB: espvpn-gnome (the GTK editors), installed beside it and checked too.
# DEB: built with `dpkg-buildpackage -b -us -uc` (tools/package-check builds it and runs
# this; CI's package step). lintian runs on it too (errors fail, warnings are listed).
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (mount namespace, overlay)"; exit 77; }
deb=$(realpath "$1") gw_bin=$(realpath "$2") gnome_deb=${3:+$(realpath "$3")}
[[ -f $deb ]] || { echo "FAIL: no package at $1"; exit 1; }
[[ -z $gnome_deb || -f $gnome_deb ]] || { echo "FAIL: no package at $3"; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/deb-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{layer,root}

if [[ ${DEB_TEST_LINTIAN:-1} == 1 ]] && command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 "$deb" $gnome_deb >"$work/lintian.out" 2>&1 || true
  if grep -q "^E:" "$work/lintian.out"; then echo "FAIL: lintian errors:"; cat "$work/lintian.out"; exit 1; fi
  echo "ok: lintian: no errors$(grep -c '^W:' "$work/lintian.out" | sed 's/^0$//; s/^\(.\+\)$/, \1 warning(s):/')"
  grep '^W:' "$work/lintian.out" || true
fi

# Depends comes from shlibs (dh_shlibdeps): every library the binaries link, among them
# libnftables1 (the kill switch) and libnm0 (the plugin).
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libgnutls30 libnettle8 libxml2 libnftables1 libnm0 libglib2.0-0; do
  sed 's/, /\n/g; s/ ([^)]*)//g' <<<"$depends" | grep -qxF "$lib" || { echo "FAIL: Depends lacks $lib: $depends"; exit 1; }
done
echo "ok: Depends (shlibs): $depends"

# Everything below runs in a private mount namespace: the overlay, the binds and the
# chroot vanish with it.
unshare --mount --propagation private bash -euo pipefail -s "$work" "$here" "$gw_bin" "$deb" "$gnome_deb" <<'INNER'
work=$1 here=$2 gw_bin=$3 deb=$4 gnome_deb=$5
root=$work/root
# The writable layer on a tmpfs (an upper directory inside the lower one would overlap).
mount -t tmpfs tmpfs "$work/layer"
mkdir -p "$work/layer/upper" "$work/layer/ovl"
cp "$deb" "$work/layer/upper/espvpn.deb"
[[ -z $gnome_deb ]] || cp "$gnome_deb" "$work/layer/upper/espvpn-gnome.deb"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/layer/upper,workdir=$work/layer/ovl" "$root"
for d in proc sys dev; do mount --rbind "/$d" "$root/$d"; done
mount -t tmpfs tmpfs "$root/run"
chroot "$root" /bin/bash -euo pipefail -s "$here" "$gw_bin" <<'CHROOT'
here=$1 gw_bin=$2
! dpkg-query -W espvpn >/dev/null 2>&1 || { echo "FAIL: espvpn is installed already"; exit 1; }
[[ ! -e /usr/sbin/espvpn ]] || { echo "FAIL: /usr/sbin/espvpn exists before the install"; exit 1; }
DEBIAN_FRONTEND=noninteractive dpkg -i /espvpn.deb >/tmp/dpkg.out 2>&1 || { cat /tmp/dpkg.out; exit 1; }
echo "ok: dpkg -i: $(dpkg-query -W -f='${Package} ${Version}, depends ${Depends}' espvpn)"
for f in /usr/sbin/espvpn /usr/share/man/man8/espvpn.8.gz /usr/share/bash-completion/completions/espvpn \
  /usr/lib/NetworkManager/nm-espvpn-service /usr/lib/NetworkManager/nm-espvpn-auth-dialog \
  /usr/lib/NetworkManager/VPN/nm-espvpn-service.name /usr/share/dbus-1/system.d/nm-espvpn-service.conf \
  /usr/share/applications/espvpn-sso-callback.desktop; do
  dpkg -S "$f" >/dev/null || { echo "FAIL: the package does not own $f"; exit 1; }
done
grep -q "^program=/usr/lib/NetworkManager/nm-espvpn-service$" /usr/lib/NetworkManager/VPN/nm-espvpn-service.name ||
  { echo "FAIL: the .name file's program is not the installed service"; exit 1; }
grep -qx "Exec=/usr/sbin/espvpn --sso-callback %u" /usr/share/applications/espvpn-sso-callback.desktop ||
  { echo "FAIL: the SSO callback desktop entry does not run the installed espvpn"; exit 1; }
echo "ok: $(/usr/sbin/espvpn --version | head -1); the package owns espvpn, its man page, completion, the plugin, its .name file, D-Bus policy and SSO callback desktop entry"
# The editor plugin, loaded by libnm from the installed .name file (plugin= names it
# without a path: libnm's plugin directory), as nm-connection-editor and nmcli load it.
/usr/bin/python3 - <<'PY' || { echo "FAIL: libnm does not load the installed editor plugin"; exit 1; }
import gi
gi.require_version("NM", "1.0")
from gi.repository import NM
info = NM.VpnPluginInfo.new_from_file("/usr/lib/NetworkManager/VPN/nm-espvpn-service.name")
assert info.get_plugin() == "libnm-vpn-plugin-espvpn.so", info.get_plugin()
plugin = info.load_editor_plugin()
assert plugin.get_property("service") == "org.freedesktop.NetworkManager.espvpn"
assert int(plugin.get_capabilities()) == 7, plugin.get_capabilities()
PY
echo "ok: libnm loads the installed editor plugin (import, export, IPv6)"
if [[ -f /espvpn-gnome.deb ]]; then
  DEBIAN_FRONTEND=noninteractive dpkg -i /espvpn-gnome.deb >/tmp/dpkg.out 2>&1 || { cat /tmp/dpkg.out; exit 1; }
  for gtk in gtk3 gtk4; do
    lib=$(dpkg -L espvpn-gnome | grep "/NetworkManager/libnm-$gtk-vpn-plugin-espvpn-editor.so$") ||
      { echo "FAIL: espvpn-gnome has no $gtk editor"; exit 1; }
    # Every library it links resolves (its Depends brought them).
    /usr/bin/python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$lib" ||
      { echo "FAIL: $lib does not load"; exit 1; }
  done
  echo "ok: espvpn-gnome installs the GTK3 and GTK4 editors beside the plugin; both load"
fi
"$here/real_nm.sh" gp /usr/lib/NetworkManager/nm-espvpn-service /usr/sbin/espvpn "$gw_bin" \
  /usr/lib/NetworkManager/VPN/nm-espvpn-service.name
if [[ -f /espvpn-gnome.deb ]]; then
  # The desktop from the installed files only: GNOME Settings adds a GP profile in the installed
  # GTK4 editor (found by libnm from the installed .name file's plugin), nm-applet runs the
  # installed auth dialog, whose login window asks the password and an OTP round; the installed
  # service connects, a ping crosses as ESP.
  "$here/gnome_settings.sh" --name-file /usr/lib/NetworkManager/VPN/nm-espvpn-service.name - - - "$gw_bin"
fi
CHROOT
INNER
echo "RESULT deb_install: passed"
