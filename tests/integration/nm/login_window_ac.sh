#!/usr/bin/env bash
# nm-espvpn-auth-dialog's login window against Debian's ocserv (group list, a wrong password
# asked again), driven through AT-SPI under Xvfb: the whole desktop (Xvfb, session and AT-SPI
# buses, the dialog) runs inside the client namespace of tests/integration/anyconnect/ocserv_env.sh.
#   login_window_ac.sh DIALOG ESPVPN
set -euo pipefail
dialog=$1 espvpn=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/login-window-ac.XXXXXX)
pids=()
fail() {
  echo "FAIL: $*"
  exit 1
}
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ocserv >/dev/null || fail "ocserv is missing (tools/install-deps installs it)"
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
trap ocserv_cleanup EXIT
trap 'exit 130' INT TERM
export OC_GROUPS=1
topo_up
ocserv_up || fail "ocserv did not start"
ip netns exec "$nsc" "$here/login_window_test.py" "$dialog" "$espvpn" ac --url "https://$gw_ip:$oc_port/" \
  --password "$oc_password" ${LOGIN_WINDOW_SHOTS:+--screenshot "$LOGIN_WINDOW_SHOTS"}
