#!/usr/bin/env bash
# A one-time code through the real NetworkManager (Debian's network-manager, harness
# real_nm_env.sh) and nmcli's agent, which runs the auth dialog in its external-UI mode
# exactly as GNOME Shell does (--external-ui-mode: one key file, one round): a GP
# profile with otp=yes against the fake gateway asking a code after the password
# (--gw-otp js:totp:KEY, respStatus "Challenge"; the code is RFC 6238's, computed here).
#   real_nm_otp.sh SERVICE ESPVPN GATEWAY_BIN
# Cases:
#   password and code not kept (password-flags=2, otp-flags=2): from a passwd-file with
#     both -> up; the gateway checked one code and logged in via "password+otp"
#   nmcli --ask: prompted "Password" then "One-time code", answered from stdin -> up
#   stored password (password-flags=0): only the code is asked (NM merges the agent's
#     otp with its own password) -> up
#   a wrong code typed -> the gateway refuses it, the service asks again (SecretsRequired),
#     the right one connects
# Each up: activated, a tun; each down: espvpn and the tun gone. The code and the
# password never in espvpn's argv nor in NM's log.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v NetworkManager >/dev/null || { echo "SKIP: network-manager not installed"; exit 77; }
command -v dbus-daemon >/dev/null || { echo "SKIP: dbus-daemon not installed"; exit 77; }
service=$1 espvpn=$2 gw_bin=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/real-nm-otp.XXXXXX)
chmod 755 "$work"
pids=()
t0=$SECONDS
say() { echo "ok [$((SECONDS - t0)) s]: $*"; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/nm.log "$work"/*.out; do [[ -f $f ]] && { echo "--- $f"; tail -40 "$f"; }; done
  exit 1
}
# shellcheck source=../../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"
# shellcheck source=real_nm_env.sh
. "$here/real_nm_env.sh"
cleanup() { nm_down; topo_cleanup; }
trap cleanup EXIT
trap 'exit 130' INT TERM
topo_up

nm_build_tree_name "$service" "$espvpn"
nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" || fail "NetworkManager did not start"
nm_base_up || fail "the base connection did not come up"
say "NetworkManager runs in $nsc (pid $nm_pid); base connection up"

password=s3cr3t-otp-pw key=JBSWY3DPEHPK3PXPNBSWY3DP
# totp: the current RFC 6238 code of $key (the gateway accepts the step before and after).
totp() {
  $py - "$key" <<'PY'
import base64, hashlib, hmac, struct, sys, time
k = base64.b32decode(sys.argv[1])
h = hmac.new(k, struct.pack(">Q", int(time.time()) // 30), hashlib.sha1).digest()
o = h[-1] & 15
print("%06d" % ((struct.unpack(">I", h[o:o + 4])[0] & 0x7fffffff) % 1000000))
PY
}
gateway_up aes-128-gcm --user "alice:$password" --gw-otp "js:totp:$key" || fail "fake gateway did not start"
url="https://$gw_ip:4443/"
base="gateway=$url, protocol=gp, user=alice, cafile=$repo/certs/ca.pem, otp=yes, otp-flags=2"

service_pid() { local p; p=$(nm_procs nm-espvpn-serv); [[ $p =~ ^[0-9]+$ ]] && echo "$p"; }
tun_dev() { ip -n "$nsc" -o link show type tun 2>/dev/null | awk -F': ' '{print $2}' | head -1; }
no_tun() { [[ -z $(tun_dev) ]]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
stat() { json "$work/fake-stats.json" "$1"; }
add_profile() {  # NAME DATA [SECRETS]
  nmc connection add type vpn con-name "$1" autoconnect no vpn-type org.freedesktop.NetworkManager.espvpn \
    vpn.data "$2" ${3:+vpn.secrets "$3"} >/dev/null || fail "nmcli connection add $1"
}
# check_up NAME: activated, a tun, espvpn under the service, no secret in its argv.
check_up() {
  [[ $(nmc -g GENERAL.STATE connection show "$1") == activated ]] || fail "$1 is not activated"
  [[ -n $(tun_dev) ]] || fail "$1: no tun in $nsc"
  svc=$(service_pid) || fail "no nm-espvpn-service under NetworkManager"
  vpn_pid=$(cat /proc/"$svc"/task/*/children 2>/dev/null | xargs)
  [[ $vpn_pid =~ ^[0-9]+$ ]] || fail "the service has not exactly one child: '$vpn_pid'"
  ! tr '\0' ' ' <"/proc/$vpn_pid/cmdline" | grep -qe "$code" -e "$password" || fail "a secret in espvpn's argv"
  echo "$code" >>"$work/codes"
}
check_down() {
  nmc connection down "$1" >/dev/null || fail "connection down $1"
  nm_wait 10 "espvpn ($vpn_pid) to exit" gone "$vpn_pid" || fail "espvpn still runs after down"
  nm_wait 5 "the tun to go" no_tun || fail "a tun is left after down: $(tun_dev)"
  nm_wait 10 "the service ($svc) to exit" gone "$svc" || fail "the service still runs after down"
}
otp_logins() { stat 'd["login_via"].get("password+otp+1otp", 0)'; }
codes_ok() { stat 'd.get("otp_codes_ok", 0)'; }

# 1. passwd-file with the password and the code.
add_profile file "$base, password-flags=2"
code=$(totp)
printf 'vpn.secrets.password:%s\nvpn.secrets.otp:%s\n' "$password" "$code" >"$work/passwd-file"
out=$(nmc --wait 40 connection up file passwd-file "$work/passwd-file" 2>&1) || fail "up file passwd-file: $out"
check_up file
[[ $(otp_logins) -eq 1 && $(codes_ok) -eq 1 ]] ||
  fail "the gateway saw no password+otp login: $(stat 'd["login_via"]') codes ok $(codes_ok)"
check_down file
say "passwd-file: the dialog asked password and code, the gateway checked the code (password+otp login)"

# 2. nmcli --ask: both prompted, answered from stdin.
code=$(totp)
out=$(printf '%s\n%s\n' "$password" "$code" | nmc --ask --wait 40 connection up file 2>&1) ||
  fail "nmcli --ask connection up file: $out"
grep -q "^Password (vpn.secrets.password):" <<<"$out" || fail "no password prompt: $out"
grep -q "One-time code (vpn.secrets.otp):" <<<"$out" || fail "no one-time code prompt: $out"
check_up file
[[ $(otp_logins) -eq 2 ]] || fail "the second login was not password+otp: $(stat 'd["login_via"]')"
check_down file
say "nmcli --ask: prompted 'Password' and 'One-time code', connected"

# 3. Stored password: only the code is asked.
add_profile kept "$base, password-flags=0" "password=$password"
code=$(totp)
out=$(nmc --ask --wait 40 connection up kept <<<"$code" 2>&1) || fail "nmcli --ask connection up kept: $out"
! grep -q "vpn.secrets.password" <<<"$out" || fail "the stored password was asked: $out"
grep -q "One-time code (vpn.secrets.otp):" <<<"$out" || fail "no one-time code prompt: $out"
check_up kept
[[ $(otp_logins) -eq 3 ]] || fail "the third login was not password+otp: $(stat 'd["login_via"]')"
check_down kept
say "stored password: only the code asked, connected"

# 4. A wrong code, then the right one (asked again).
bad_before=$(stat 'd.get("otp_codes_bad", 0)')
code=$(totp)
bad=$(printf '%06d' $(((10#$code + 500000) % 1000000)))  # a neighbour step's code: 2 in 10^6
out=$(printf '%s\n%s\n%s\n%s\n' "$password" "$bad" "$password" "$code" | nmc --ask --wait 60 connection up file 2>&1) ||
  fail "nmcli --ask with a wrong, then the right code: $out"
[[ $(stat 'd.get("otp_codes_bad", 0)') -gt $bad_before ]] || fail "the gateway saw no wrong code"
[[ $(grep -c "One-time code (vpn.secrets.otp):" <<<"$out") -ge 2 ]] || fail "the code was not asked again: $out"
check_up file
check_down file
say "a wrong code: refused by the gateway, asked again, the right one connected"

# (a 6-digit code can be part of a timestamp: only lines about secrets count)
while read -r c; do
  ! grep -F -- "$c" "$work/nm.log" | grep -qi "otp\|secret\|stdin" || fail "the code $c is in NetworkManager's log"
done <"$work/codes"
! grep -qF -- "$password" "$work/nm.log" || fail "the password is in NetworkManager's log"
echo "RESULT real_nm_otp: passed"
