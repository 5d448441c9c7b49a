#!/usr/bin/env bash
# Issue 41's confused deputy under the real NetworkManager (real_nm_env.sh), against ocserv
# with certificate-only login (auth = "certificate", the client certificate's UID names the
# user): a profile the unprivileged user nobody owns (connection.permissions user:nobody)
#   attack: names a root-only (0600 root) key and certificate -> activation fails with an
#     error naming the item, espvpn is never started, ocserv sees no connection at all
#   probe: names a file that does not exist -> the very same error (no way to tell a
#     root-only file from a missing one)
#   own: the same profile with nobody's own copies (0600 nobody) -> connects (espvpn given
#     /dev/fd/N, never the user's paths), ping through the tunnel, down
# and a system profile (no permissions: only an administrator may write it) naming the
# root-only files -> connects, as before (the administrator's choice).
#   real_nm_deputy.sh ac SERVICE ESPVPN
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v NetworkManager >/dev/null || { echo "SKIP: network-manager not installed"; exit 77; }
command -v dbus-daemon >/dev/null || { echo "SKIP: dbus-daemon not installed"; exit 77; }
command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
getent passwd nobody >/dev/null || { echo "SKIP: no user nobody"; exit 77; }
mode=$1 service=$2 espvpn=$3
[[ $mode == ac ]] || { echo "unknown mode $mode"; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/real-nm-deputy.XXXXXX)
chmod 755 "$work"
pids=()
t0=$SECONDS
say() { echo "ok [$((SECONDS - t0)) s]: $*"; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/nm.log "$work"/ocserv.log; do [[ -f $f ]] && { echo "--- $f"; tail -40 "$f"; }; done
  exit 1
}
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
# shellcheck source=real_nm_env.sh
. "$here/real_nm_env.sh"
cleanup() {
  nm_down
  ocserv_cleanup
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
topo_up

# The root-only key and certificate (as /etc/ssl/private would hold), and nobody's own.
install -d -m 700 "$work/root"
install -m 600 "$repo/certs/client.pem" "$repo/certs/client-key.pem" "$work/root/"
install -d -m 700 -o nobody "$work/user"
install -m 600 -o nobody "$repo/certs/client.pem" "$repo/certs/client-key.pem" "$repo/certs/ca.pem" "$work/user/"

nm_build_tree_name "$service" "$espvpn"
nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" etc || fail "NetworkManager did not start"
nm_base_up || fail "the base connection did not come up"
oc_auth=('auth = "certificate"')
ocserv_up "ca-cert = $repo/certs/ca.pem" "cert-user-oid = 0.9.2342.19200300.100.1.1" || fail "ocserv did not start"
say "NetworkManager (pid $nm_pid) and ocserv (certificate login) up"
url="https://$gw_ip:$oc_port/"

add_profile() {  # NAME PERMISSIONS CERT KEY
  nmc connection add type vpn con-name "$1" autoconnect no connection.permissions "$2" \
    vpn-type org.freedesktop.NetworkManager.espvpn \
    vpn.data "gateway=$url, protocol=anyconnect, cafile=$work/user/ca.pem, usercert=$3, userkey=$4, password-flags=0" \
    vpn.secrets "password=unused" >/dev/null || fail "nmcli connection add $1"
}
started() { grep -c "started espvpn (pid" "$work/nm.log" || true; }
# ocserv's client activity so far: its workers' lines (a certificate verified, or not) and
# sec-mod's logins.
oc_seen() { grep -c "worker: \|authenticate user" "$work/ocserv.log" || true; }
gone() { ! kill -0 "$1" 2>/dev/null; }
tun_dev() { ip -n "$nsc" -o link show type tun 2>/dev/null | awk -F': ' '{print $2}' | head -1; }
no_tun() { [[ -z $(tun_dev) ]]; }
# refused NAME ITEM: activation fails with the service's error naming ITEM; espvpn never
# started, ocserv saw nothing. Sets err to the error.
refused() {
  local before_started before_oc out
  before_started=$(started) before_oc=$(oc_seen)
  if out=$(nmc --wait 30 connection up "$1" 2>&1); then fail "$1 connected: $out"; fi
  err=$(grep -o "espvpn not started: the profile's '[a-z_]*' is not a file .*" "$work/nm.log" | tail -1)
  [[ $err == *"'$2'"* ]] || fail "$1: no error naming '$2' in NetworkManager's log (nmcli: $out)"
  [[ $(started) == "$before_started" ]] || fail "$1: espvpn was started"
  sleep 0.5
  [[ $(oc_seen) == "$before_oc" ]] || fail "$1: ocserv saw a connection"
  no_tun || fail "$1: a tun exists"
  ! grep -q "BEGIN\|PRIVATE" <<<"$err" || fail "$1: the file's content in the error"
}

# 1. A user's profile naming root's key: refused, the key never used.
add_profile attack user:nobody "$work/root/client.pem" "$work/root/client-key.pem"
refused attack usercert
attack_err=$err
say "attack refused, espvpn not started, ocserv saw nothing: $attack_err"
# 2. A missing file: the very same words.
add_profile probe user:nobody "$work/root/missing.pem" "$work/root/client-key.pem"
refused probe usercert
probe_err=$err
[[ $probe_err == "$attack_err" ]] || fail "a missing file reads differently: '$probe_err' vs '$attack_err'"
add_profile keyonly user:nobody "$work/user/client.pem" "$work/root/client-key.pem"
refused keyonly userkey
say "a missing file gives the same error; a root-only key beside the user's certificate: $err"

# up NAME: activated, one espvpn, ping through the tun; sets vpn_pid.
up() {
  local out svc
  out=$(nmc --wait 40 connection up "$1" 2>&1) || fail "connection up $1: $out"
  [[ $(nmc -g GENERAL.STATE connection show "$1") == activated ]] || fail "$1 not activated"
  svc=$(nm_procs nm-espvpn-serv)
  vpn_pid=$(cat /proc/"$svc"/task/*/children 2>/dev/null | xargs)
  [[ $vpn_pid =~ ^[0-9]+$ ]] || fail "$1: no single espvpn under the service: '$vpn_pid'"
  ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 "$lan_ip" >/dev/null || fail "$1: no ping through $(tun_dev)"
}
down() {
  nmc connection down "$1" >/dev/null || fail "connection down $1"
  nm_wait 10 "espvpn to exit" gone "$vpn_pid" || fail "$1: espvpn still runs"
  nm_wait 5 "the tun to go" no_tun || fail "$1: tun left"
}

# 3. The user's own key: connects; espvpn got descriptors, not the user's paths.
add_profile own user:nobody "$work/user/client.pem" "$work/user/client-key.pem"
before_oc=$(oc_seen)
up own
# The pattern that saw nothing above sees this connection (so "saw nothing" meant something).
(($(oc_seen) > before_oc)) || fail "oc_seen does not count ocserv's connections"
grep -q "client certificate verification succeeded" "$work/ocserv.log" || fail "ocserv verified no client certificate"
cmdline=$(tr '\0' ' ' <"/proc/$vpn_pid/cmdline")
[[ $cmdline == *"--certificate=/dev/fd/"* && $cmdline == *"--sslkey=/dev/fd/"* && $cmdline == *"--cafile=/dev/fd/"* ]] ||
  fail "espvpn's argv does not name descriptors: $cmdline"
[[ $cmdline != *"$work/user"* ]] || fail "espvpn's argv names the user's paths: $cmdline"
grep -q "opened the profile's usercert, userkey, cafile as nobody" "$work/nm.log" || fail "the service did not say it opened them as nobody"
occtl_run show users | grep -q testuser || fail "ocserv has no session for testuser (the certificate's user)"
down own
say "nobody's own key: connected (espvpn given /dev/fd/N), ping, down"

# 4. A system profile (no permissions): the administrator's files, opened as before.
add_profile system "" "$work/root/client.pem" "$work/root/client-key.pem"
up system
down system
say "a system profile naming root's files connects, as before"
echo "PASS real_nm_deputy_$mode"
