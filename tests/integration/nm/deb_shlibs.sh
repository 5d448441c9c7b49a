#!/usr/bin/env bash
# The Debian package's runtime Depends as dh_shlibdeps would compute them, from the
# binaries of this build (no package build: that is a full rebuild, see deb_install):
# dpkg-shlibdeps over the three programs the package ships must name the package of
# every library they link (libnftables1 for the kill switch, libnm0 for the plugin, ...).
# A library linked without a shlibs entry (a private build, a missing -dev package's
# runtime) makes dpkg-shlibdeps fail, and this test with it.
#   deb_shlibs.sh REPO ESPVPN SERVICE DIALOG
set -euo pipefail
command -v dpkg-shlibdeps >/dev/null || { echo "SKIP: dpkg-shlibdeps (dpkg-dev) not installed"; exit 77; }
repo=$1; shift
work=$(mktemp -d /tmp/deb-shlibs.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/debian"
cp "$repo/debian/control" "$work/debian/"
args=()
for b in "$@"; do args+=("-e$(realpath "$b")"); done
out=$(cd "$work" && dpkg-shlibdeps -O "${args[@]}" 2>&1) || { echo "FAIL: dpkg-shlibdeps: $out"; exit 1; }
depends=$(sed -n 's/^shlibs:Depends=//p' <<<"$out")
[[ -n $depends ]] || { echo "FAIL: no shlibs:Depends in: $out"; exit 1; }
for lib in libc6 libstdc++6 libgnutls30 libnettle8 libxml2 libnftables1 libsystemd0 libnm0 libglib2.0-0; do
  sed 's/, /\n/g; s/ ([^)]*)//g' <<<"$depends" | grep -qxF "$lib" || { echo "FAIL: Depends lacks $lib: $depends"; exit 1; }
done
echo "ok: Depends: $depends"
echo "RESULT deb_shlibs: passed"
