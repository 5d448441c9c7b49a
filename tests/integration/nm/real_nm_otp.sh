#!/usr/bin/env bash
# A one-time code through the real NetworkManager (Debian's network-manager, harness
# real_nm_env.sh) and nmcli's agent, which runs the auth dialog in its external-UI mode
# exactly as GNOME Shell does (--external-ui-mode: one key file, one round): a profile
# with otp=yes against a server asking a code after the password (the code is RFC 6238's,
# computed here):
#   gp: the fake GP gateway (--gw-otp js:totp:KEY, respStatus "Challenge");
#   ac: ocserv 1.1.6 with plain[passwd=...,otp=USERS.OATH] (liboath checks the code in a
#       second form); one user per case, since liboath takes a TOTP code once per user.
#   real_nm_otp.sh gp|ac SERVICE ESPVPN GATEWAY_BIN
# Cases:
#   password and code not kept (password-flags=2, otp-flags=2): from a passwd-file with
#     both -> up; the server checked one code (gp: the gateway logged in via
#     "password+otp"; ac: ocserv has no session without it)
#   nmcli --ask: prompted "Password" then "One-time code", answered from stdin -> up
#   stored password (password-flags=0): only the code is asked (NM merges the agent's
#     otp with its own password) -> up
#   a wrong code typed -> the gateway refuses it, the service asks again (SecretsRequired),
#     the right one connects
#   a soft token (token_mode=totp, secret token_secret): nothing asked, the key on
#     espvpn's descriptor 3 answers the server's prompt
#   gp: prompt rounds: a plain password profile, the gateway asking two code rounds after
#     the password: each asked by nmcli in the server's words (secrets challenge,
#     challenge2), one login; the same from a passwd-file; not asked without
#     challenge-flags=2
#   ac: prompt rounds: a plain password profile, ocserv's OTP form asked by nmcli as a round
#     in ocserv's words
# Each up: activated, a tun; each down: espvpn and the tun gone. The code and the
# password never in espvpn's argv nor in NM's log.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v NetworkManager >/dev/null || { echo "SKIP: network-manager not installed"; exit 77; }
command -v dbus-daemon >/dev/null || { echo "SKIP: dbus-daemon not installed"; exit 77; }
mode=$1 service=$2 espvpn=$3 gw_bin=$4
[[ $mode == gp || $mode == ac ]] || { echo "usage: real_nm_otp.sh gp|ac SERVICE ESPVPN GATEWAY_BIN" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/real-nm-otp.XXXXXX)
chmod 755 "$work"
pids=()
t0=$SECONDS
say() { echo "ok [$((SECONDS - t0)) s]: $*"; }
fail() {
  echo "FAIL: $*"
  for f in "$work"/nm.log "$work"/*.out "$work"/ocserv.log; do [[ -f $f ]] && { echo "--- $f"; tail -40 "$f"; }; done
  exit 1
}
if [[ $mode == ac ]]; then
  command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
  # shellcheck source=../anyconnect/ocserv_env.sh
  . "$repo/tests/integration/anyconnect/ocserv_env.sh"
else
  # shellcheck source=../../../tools/netns/gp-topology.sh
  . "$repo/tools/netns/gp-topology.sh"
fi
# shellcheck source=real_nm_env.sh
. "$here/real_nm_env.sh"
cleanup() {
  nm_down
  if [[ $mode == ac ]]; then ocserv_cleanup; else topo_cleanup; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
topo_up

nm_build_tree_name "$service" "$espvpn"
nm_up "$work/nm-espvpn-service.name" "$repo/src/nm/nm-espvpn-service.conf" "$([[ $mode == ac ]] && echo etc)" || fail "NetworkManager did not start"
nm_base_up || fail "the base connection did not come up"
say "NetworkManager runs in $nsc (pid $nm_pid); base connection up"

key=JBSWY3DPEHPK3PXPNBSWY3DP
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
# A TOTP code is made just before use: keep clear of a 30-s step's last 3 s (at most 3.2 s).
avoid_step_edge() { $py -c "import time; r = 30 - time.time() % 30; r < 3 and time.sleep(r + 0.2)"; }
if [[ $mode == gp ]]; then
  password=s3cr3t-otp-pw
  gateway_up aes-128-gcm --user "alice:$password" --gw-otp "js:totp:$key" || fail "fake gateway did not start"
  url="https://$gw_ip:4443/"
  base() { echo "gateway=$url, protocol=gp, user=alice, cafile=$repo/certs/ca.pem, otp=yes, otp-flags=2"; }
else
  password=$oc_password
  hexkey=$($py -c "import base64, sys; print(base64.b32decode(sys.argv[1]).hex())" "$key")
  for u in otp1 otp2 otp3 otp4 otp5 otp6; do echo "HOTP/T30 $u - $hexkey"; done >"$work/users.oath"
  chmod 600 "$work/users.oath"
  oc_auth=("auth = \"plain[passwd=$work/oc/passwd,otp=$work/users.oath]\"")
  # ocserv scores each plain+otp login like a wrong password and bans the address after a few.
  ocserv_up "max-ban-score = 0" || fail "ocserv did not start"
  for u in otp1 otp2 otp3 otp4 otp5 otp6; do printf '%s\n%s\n' "$password" "$password" | ocpasswd -c "$work/oc/passwd" $u; done
  url="https://$gw_ip:$oc_port/"
  base() { echo "gateway=$url, protocol=anyconnect, user=$1, cafile=$repo/certs/ca.pem, otp=yes, otp-flags=2"; }
fi

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
# logins_are N: the server saw N logins with a code (gp: the fake's counters; ac: ocserv's
# log: its plain+otp method logs a user in only after liboath accepted the code).
logins_are() {
  if [[ $mode == ac ]]; then
    local n
    n=$(grep -c "main\[otp[0-9]\].* user logged in" "$work/ocserv.log" || true)
    [[ $n -eq $1 ]] || fail "ocserv logged $n users in, expected $1"
    return 0
  fi
  [[ $(otp_logins) -eq $1 && $(codes_ok) -ge $1 ]] ||
    fail "login $1 was not password+otp: $(stat 'd["login_via"]') codes ok $(codes_ok)"
}
# bad_codes: codes the server refused (gp: the fake's counter; ac: liboath's refusals in
# ocserv's log).
bad_codes() {
  if [[ $mode == gp ]]; then stat 'd.get("otp_codes_bad", 0)'
  else grep -c "OTP auth failed for" "$work/ocserv.log" || true; fi
}

# 1. passwd-file with the password and the code.
u1=alice u3=alice
[[ $mode == ac ]] && u1=otp1 u3=otp3
add_profile file "$(base $u1), password-flags=2"
avoid_step_edge
code=$(totp)
printf 'vpn.secrets.password:%s\nvpn.secrets.otp:%s\n' "$password" "$code" >"$work/passwd-file"
out=$(nmc --wait 40 connection up file passwd-file "$work/passwd-file" 2>&1) || fail "up file passwd-file: $out"
check_up file
logins_are 1
check_down file
say "passwd-file: the dialog asked password and code, the server checked the code"

# 2. nmcli --ask: both prompted, answered from stdin (ac: the next user, a code is good once).
[[ $mode == ac ]] && nmc connection modify file vpn.data "$(base otp2), password-flags=2" >/dev/null
avoid_step_edge
code=$(totp)
out=$(printf '%s\n%s\n' "$password" "$code" | nmc --ask --wait 40 connection up file 2>&1) ||
  fail "nmcli --ask connection up file: $out"
grep -q "^Password (vpn.secrets.password):" <<<"$out" || fail "no password prompt: $out"
grep -q "One-time code (vpn.secrets.otp):" <<<"$out" || fail "no one-time code prompt: $out"
check_up file
logins_are 2
check_down file
say "nmcli --ask: prompted 'Password' and 'One-time code', connected"

# 3. Stored password: only the code is asked.
add_profile kept "$(base $u3), password-flags=0" "password=$password"
avoid_step_edge
code=$(totp)
out=$(nmc --ask --wait 40 connection up kept <<<"$code" 2>&1) || fail "nmcli --ask connection up kept: $out"
! grep -q "vpn.secrets.password" <<<"$out" || fail "the stored password was asked: $out"
grep -q "One-time code (vpn.secrets.otp):" <<<"$out" || fail "no one-time code prompt: $out"
check_up kept
logins_are 3
check_down kept
say "stored password: only the code asked, connected"

# 4. A wrong code, then the right one (asked again).
[[ $mode == ac ]] && nmc connection modify file vpn.data "$(base otp4), password-flags=2" >/dev/null
bad_before=$(bad_codes)
avoid_step_edge
code=$(totp)
bad=$(printf '%06d' $(((10#$code + 500000) % 1000000)))  # a neighbour step's code: 2 in 10^6
out=$(printf '%s\n%s\n%s\n%s\n' "$password" "$bad" "$password" "$code" | nmc --ask --wait 60 connection up file 2>&1) ||
  fail "nmcli --ask with a wrong, then the right code: $out"
[[ $(bad_codes) -gt $bad_before ]] || fail "the server saw no wrong code"
[[ $(grep -c "One-time code (vpn.secrets.otp):" <<<"$out") -ge 2 ]] || fail "the code was not asked again: $out"
check_up file
check_down file
say "a wrong code: refused by the server, asked again, the right one connected"

# 5. A soft token (the editor's token_mode=totp, secret token_secret kept by NetworkManager):
# nothing is asked; the service hands espvpn the key on its descriptor 3 and espvpn answers
# the server's code prompt itself. The key is in no argv and no log.
u5=alice
[[ $mode == ac ]] && u5=otp5
add_profile token "gateway=$url, protocol=$([[ $mode == gp ]] && echo gp || echo anyconnect), user=$u5, cafile=$repo/certs/ca.pem, password-flags=0, token_mode=totp, token_secret-flags=0" \
  "password=$password, token_secret=base32:$key"
avoid_step_edge
code=$(totp)
out=$(nmc --wait 40 connection up token 2>&1) || fail "up token (soft token): $out"
check_up token
! tr '\0' ' ' <"/proc/$vpn_pid/cmdline" | grep -qF "$key" || fail "the token's key in espvpn's argv"
# (espvpn wipes --token-secret's value from its own argv: the mode shows the option came)
tr '\0' ' ' <"/proc/$vpn_pid/cmdline" | grep -qF -- "--token-mode=totp" || fail "espvpn got no --token-mode=totp"
grep -qF -- "--token-secret=@/dev/fd/3" "$work/nm.log" || fail "the service did not pass the key on descriptor 3"
logins_are 5  # after the four logins above
check_down token
! grep -qF -- "$key" "$work/nm.log" || fail "the token's key is in NetworkManager's log"
say "soft token: the service passed the key on descriptor 3, espvpn answered the server's code prompt"

# 6 (gp). Prompt rounds: a plain password profile (no otp=yes) against a gateway asking two
# code rounds after the password, each known only when the server sends it. The service runs
# espvpn's prompt channel: the password answers the first prompt, each round goes to nmcli as
# a new secrets request (the server's words as nmcli's prompt), the answer back to the waiting
# espvpn; one login, both codes checked by the server; nothing of it saved in the profile
# (challenge-flags=2, challenge2-flags=2: the editor writes them). Without those flags the
# round is not asked (NetworkManager would save the code in the profile): the connection
# fails and NetworkManager's log says what to add.
if [[ $mode == gp ]]; then
  gateway_down
  gateway_up aes-128-gcm --user "alice:$password" --gw-otp xml:111111 --gw-otp xml:222222 ||
    fail "fake gateway (two rounds) did not start"
  add_profile rounds "gateway=$url, protocol=gp, user=alice, cafile=$repo/certs/ca.pem, password-flags=2, challenge-flags=2, challenge2-flags=2"
  code=111111
  out=$(printf '%s\n%s\n%s\n' "$password" 111111 222222 | nmc --ask --wait 60 connection up rounds 2>&1) ||
    fail "nmcli --ask connection up rounds: $out"
  grep -q "^Password (vpn.secrets.password):" <<<"$out" || fail "no password prompt: $out"
  grep -q "Enter response 1 of 2 from your token (vpn.secrets.challenge):" <<<"$out" ||
    fail "the first round was not asked in the server's words: $out"
  grep -q "Enter response 2 of 2 from your token (vpn.secrets.challenge2):" <<<"$out" ||
    fail "the second round was not asked in the server's words: $out"
  check_up rounds
  # (fixed answers: the fake counts the login by its rounds, not in otp_codes_ok)
  [[ $(stat 'd["login_via"]') == "{'password+otp+2otp': 1}" ]] ||
    fail "the gateway did not take both codes in one login: $(stat 'd["login_via"]')"
  check_down rounds
  # The same rounds from a passwd-file (nmcli reads it at each request).
  printf 'vpn.secrets.password:%s\nvpn.secrets.challenge:111111\nvpn.secrets.challenge2:222222\n' "$password" \
    >"$work/passwd-rounds"
  out=$(nmc --wait 60 connection up rounds passwd-file "$work/passwd-rounds" 2>&1) ||
    fail "up rounds passwd-file: $out"
  check_up rounds
  [[ $(stat 'd["login_via"]') == "{'password+otp+2otp': 2}" ]] ||
    fail "the passwd-file's rounds did not log in: $(stat 'd["login_via"]')"
  check_down rounds
  ! grep -rq "challenge2\?=\|111111\|222222" "$nm_root/etc/system-connections" ||
    fail "a round's answer was saved in the profile"
  say "two code rounds through nmcli: each asked in the server's words after the password, one login; the same from a passwd-file"
  add_profile noflags "gateway=$url, protocol=gp, user=alice, cafile=$repo/certs/ca.pem, password-flags=2"
  ! out=$(printf '%s\n%s\n' "$password" 111111 | nmc --ask --wait 30 connection up noflags 2>&1) ||
    fail "a round without challenge-flags=2 connected: $out"
  ! grep -q "vpn.secrets.challenge" <<<"$out" || fail "a round without challenge-flags=2 was asked: $out"
  grep -q "vpn.data has no challenge-flags=2" "$work/nm.log" || fail "NetworkManager's log does not say why"
  say "without challenge-flags=2 the round is not asked; NetworkManager's log says to add it"
fi

# 6 (ac). ocserv's second form as a prompt round: a plain password profile (no otp=yes), the
# code asked by nmcli in ocserv's words after the password; one login.
if [[ $mode == ac ]]; then
  add_profile rounds "$(base otp6 | sed 's/, otp=yes, otp-flags=2//'), password-flags=2, challenge-flags=2"
  avoid_step_edge
  code=$(totp)
  out=$(printf '%s\n%s\n' "$password" "$code" | nmc --ask --wait 40 connection up rounds 2>&1) ||
    fail "nmcli --ask connection up rounds: $out"
  grep -q "Please enter your OTP password" <<<"$out" || fail "ocserv's words were not shown: $out"
  grep -q "(vpn.secrets.challenge):" <<<"$out" || fail "the code was not asked as a round: $out"
  ! grep -q "vpn.secrets.otp" <<<"$out" || fail "the profile's otp was asked: $out"
  check_up rounds
  logins_are 6
  check_down rounds
  say "ocserv's OTP form as a prompt round: asked by nmcli in ocserv's words after the password, one login"
fi

# (a 6-digit code can be part of a timestamp: only lines about secrets count)
while read -r c; do
  ! grep -F -- "$c" "$work/nm.log" | grep -qi "otp\|secret\|stdin" || fail "the code $c is in NetworkManager's log"
done <"$work/codes"
! grep -qF -- "$password" "$work/nm.log" || fail "the password is in NetworkManager's log"
echo "RESULT real_nm_otp $mode: passed in $((SECONDS - t0)) s"
