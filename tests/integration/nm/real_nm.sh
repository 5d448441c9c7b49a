#!/usr/bin/env bash
# nm-espvpn-service under the real NetworkManager (Debian's network-manager), in the
# client namespace of the shared topology with a system bus of its own
# (real_nm_env.sh), driven with nmcli as a user would:
#   real_nm.sh gp|ac SERVICE ESPVPN GATEWAY_BIN [NAME_FILE]
#   gp: against the fake GlobalProtect gateway + tools/esp-gateway; ac: against ocserv.
#   NAME_FILE: the installed plugin's .name file (the installed-package test); without
#   it the build tree's programs are used through a .name file written here.
# Cases, in one NetworkManager run:
#   stored password -> up; IP4/IP6 as NM shows them (address, routes, DNS, domain), the
#     namespace's routes on the tun, the tun's MTU = espvpn's; ping v4+v6 through it;
#     the password not in espvpn's argv nor in any log
#   nmcli connection down -> espvpn logs out (the gateway saw it) and exits, tun and
#     its routes gone, the service exits
#   cookie (what `espvpn --authenticate` prints, as secrets) -> up, ping, down
#   a password NM does not keep (password-flags=2): nmcli's agent runs our auth dialog
#     (--external-ui-mode), which asks for it; from passwd-file, then nmcli --ask
#   a wrong password typed at nmcli --ask's prompt -> asked again (SecretsRequired), then
#     the right one connects
#   the dialog's classic protocol (nm-applet's): it logs in itself and returns cookie,
#     gateway, gwcert; the service connects with those (no password, no second login)
#   wrong stored password -> activation fails with NM's reason LOGIN_FAILED ("Invalid
#     secrets"), espvpn gone
#   gateway killed mid-session -> espvpn gives up after reconnect_timeout, NM shows
#     the VPN down (Failed, "connect failed"), no tun, no routes left
#   NetworkManager killed (SIGKILL) while up -> the service sees its caller vanish,
#     espvpn logs out and exits, no tun left: nothing orphaned
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v NetworkManager >/dev/null || { echo "SKIP: network-manager not installed"; exit 77; }
command -v dbus-daemon >/dev/null || { echo "SKIP: dbus-daemon not installed"; exit 77; }
mode=$1 service=$2 espvpn=$3 gw_bin=$4 name_file=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/real-nm.XXXXXX)
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
  [[ $mode == ac ]] && ocserv_cleanup || topo_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
topo_up

policy=
if [[ -z $name_file ]]; then
  # The build tree's programs: a wrapper stands where the package puts the service.
  nm_build_tree_name "$service" "$espvpn"
  name_file=$work/nm-espvpn-service.name
  policy=$repo/src/nm/nm-espvpn-service.conf
fi
[[ -n ${NM_TEST_HOLD:-} ]] && trap "sleep $NM_TEST_HOLD; cleanup" EXIT
# AnyConnect finds the plugin in /etc/NetworkManager/VPN (a /usr/local install), GP in
# /usr/lib/NetworkManager/VPN (a package).
nm_up "$name_file" "$policy" "$([[ $mode == ac && -n $policy ]] && echo etc)" || fail "NetworkManager did not start"
nm_base_up || fail "the base connection did not come up"
say "NetworkManager $(NetworkManager --version) runs in $nsc (pid $nm_pid); base connection up"

if [[ $mode == ac ]]; then
  ocserv_up "ipv6-network = fd00:199::/64" "route = fd00:202::/64" || fail "ocserv did not start"
  url="https://$gw_ip:$oc_port/" user=testuser password=$oc_password
  want4=(dst\ =\ 10.202.0.0/24) want6=(dst\ =\ fd00:202::/64) dns4=$oc_server_tun domain=example.test
else
  gateway_up aes-128-gcm --dns 10.202.0.53 --dns6 fd00:202::53 --search corp.test || fail "fake gateway did not start"
  url="https://$gw_ip:4443/" user=alice password=secret
  want4=(dst\ =\ 10.202.0.0/24) want6=(dst\ =\ fd00:202::/64) dns4=10.202.0.53 domain=corp.test
fi
vpn_type=org.freedesktop.NetworkManager.espvpn
proto=$([[ $mode == ac ]] && echo anyconnect || echo gp)

# The service (NM starts it detached) and espvpn (the service's child).
service_pid() {
  local p
  p=$(nm_procs nm-espvpn-serv)
  [[ $p =~ ^[0-9]+$ ]] && echo "$p"
}
children_of() { cat /proc/"$1"/task/*/children 2>/dev/null | xargs; }
tun_dev() { ip -n "$nsc" -o link show type tun 2>/dev/null | awk -F': ' '{print $2}' | head -1; }
no_tun() { [[ -z $(tun_dev) ]]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# reported_mtu PID: the first MTU that espvpn PID logged (GP: "ESP ... MTU N" or "HTTPS tunnel
# up ..., MTU N"; AnyConnect: "CSTP connected ..., MTU N"), relayed into NM's log by the service.
reported_mtu() {
  sed -n "/started espvpn (pid $1)/,\$p" "$work/nm.log" | grep -o "INTERNAL_IP4_MTU=[0-9]*\|MTU [0-9]*" | head -1 |
    grep -o '[0-9]*$' || true
}
vpn_state() { nmc -g GENERAL.STATE connection show "$1" 2>/dev/null || true; }

add_profile() {  # NAME DATA SECRETS
  nmc connection add type vpn con-name "$1" autoconnect no vpn-type "$vpn_type" vpn.data "$2" \
    ${3:+vpn.secrets "$3"} >/dev/null || fail "nmcli connection add $1"
}

# up_and_check NAME: activation, what NM applied, traffic. Sets svc, vpn_pid, tun.
up_and_check() {  # NAME [up: already activated by the caller]
  local name=$1 t=$SECONDS out
  if [[ ${2:-} != up ]]; then out=$(nmc --wait 40 connection up "$name" 2>&1) || fail "connection up $name: $out"; fi
  [[ $(vpn_state "$name") == activated ]] || fail "$name is not activated: $(vpn_state "$name")"
  svc=$(service_pid) || fail "no nm-espvpn-service under NetworkManager"
  vpn_pid=$(children_of "$svc")
  [[ $vpn_pid =~ ^[0-9]+$ ]] || fail "the service has not exactly one child: '$vpn_pid'"
  tun=$(tun_dev)
  [[ -n $tun ]] || fail "no tun device in $nsc"
  local ip46 r4 r6
  ip46=$(nmc -f IP4,IP6 connection show "$name")
  echo "$ip46" >"$work/$name.ip46"
  grep -q "^IP4.DNS\[1\]: *$dns4$" <<<"$ip46" || fail "IP4.DNS: want $dns4:\n$ip46"
  grep -q "^IP4.DOMAIN\[1\]: *$domain$" <<<"$ip46" || fail "IP4.DOMAIN: want $domain:\n$ip46"
  grep -q "^IP4.ROUTE\[[0-9]*\]: *${want4[0]}," <<<"$ip46" || fail "IP4.ROUTE: want ${want4[0]}:\n$ip46"
  grep -q "^IP6.ROUTE\[[0-9]*\]: *${want6[0]}," <<<"$ip46" || fail "IP6.ROUTE: want ${want6[0]}:\n$ip46"
  grep -q "^IP4.ADDRESS\[1\]:" <<<"$ip46" && grep -q "^IP6.ADDRESS\[1\]:" <<<"$ip46" ||
    fail "no IP4/IP6 address:\n$ip46"
  if [[ $mode == gp ]]; then
    grep -q "^IP4.ADDRESS\[1\]: *$tun_ip/32$" <<<"$ip46" || fail "IP4.ADDRESS: want $tun_ip/32:\n$ip46"
    grep -q "^IP6.DNS\[1\]: *fd00:202::53$" <<<"$ip46" || fail "IP6.DNS: want fd00:202::53:\n$ip46"
  else
    grep -q "^IP4.ADDRESS\[1\]: *192\.168\.99\.[0-9]*/24$" <<<"$ip46" || fail "IP4.ADDRESS: not ocserv's pool:\n$ip46"
  fi
  # The kernel's view: the routes on the tun, in the namespace's main table.
  r4=$(ip -n "$nsc" route show dev "$tun") r6=$(ip -n "$nsc" -6 route show dev "$tun")
  grep -q "^10\.202\.0\.0/24 " <<<"$r4" || fail "no 10.202.0.0/24 route on $tun:\n$r4"
  grep -q "^fd00:202::/64 " <<<"$r6" || fail "no fd00:202::/64 route on $tun:\n$r6"
  ! grep -q "^default" <<<"$r4" || fail "a default route on $tun (split tunnel):\n$r4"
  # The MTU NM set is the one this espvpn reported at connect (its log in NM's, from its
  # "started espvpn (pid N)" line on: the service relays it asynchronously, so awaited).
  local mtu want_mtu
  mtu=$(ip -n "$nsc" -o link show dev "$tun" | sed -n 's/.* mtu \([0-9]*\) .*/\1/p')
  nm_wait 10 "espvpn ($vpn_pid) to report its MTU" eval '[[ -n $(reported_mtu "$vpn_pid") ]]' ||
    fail "espvpn ($vpn_pid) reported no MTU in NM's log"
  want_mtu=$(reported_mtu "$vpn_pid")
  [[ $mtu -ge 1280 && $mtu -le 1500 ]] || fail "$tun mtu $mtu"
  [[ $mtu == "$want_mtu" ]] || fail "$tun mtu $mtu, espvpn reported $want_mtu"
  # The secret never in argv.
  ! tr '\0' ' ' <"/proc/$vpn_pid/cmdline" | grep -qF -- "$password" || fail "the password is in espvpn's argv"
  # The privilege split (docs/SECURITY.md): the service's espvpn is the broker (root, CAP_NET_ADMIN
  # only), its one child the session process (not root, no capability); the packet threads confined.
  local why
  why=$(work=/nonexistent bash -c '. "$1"; privsep_checked "$2" && pipelines_confined "$2" 2' _ \
    "$repo/tests/integration/lib.sh" "$vpn_pid") || fail "$name: $why"
  local p
  for p in "ping -c 2 -i 0.2 -W 2 $lan_ip" "ping -6 -c 2 -i 0.2 -W 2 $lan_ip6"; do
    ip netns exec "$nsc" $p >/dev/null || fail "$p through $tun failed"
  done
  say "$name up in $((SECONDS - t)) s: $tun mtu $mtu; NM shows $(grep -o '^IP4.ADDRESS\[1\]: *[^ ]*' <<<"$ip46" | awk '{print $2}'), routes ${want4[0]#dst = } ${want6[0]#dst = }, DNS $dns4, domain $domain; the namespace's routes are on $tun; ping v4+v6 through it"
}

# down_and_check NAME: nmcli down -> espvpn logs out and exits, tun + routes gone, service exits.
down_and_check() {
  local name=$1 t=$SECONDS
  nmc connection down "$name" >/dev/null || fail "connection down $name"
  nm_wait 10 "espvpn ($vpn_pid) to exit" gone "$vpn_pid" || fail "espvpn still runs after down"
  nm_wait 5 "the tun to go" no_tun || fail "a tun is left after down: $(tun_dev)"
  nm_wait 10 "the service ($svc) to exit" gone "$svc" || fail "the service still runs after down"
  ! ip -n "$nsc" route show | grep -q "$tun" || fail "routes via $tun are left"
  ! grep -q "killing it" "$work/nm.log" || fail "espvpn had to be killed (no logout in time)"
  say "$name down in $((SECONDS - t)) s: espvpn exited, $tun and its routes gone, the service exited"
}

logouts() {
  if [[ $mode == gp ]]; then json "$work/fake-stats.json" 'd["logouts"]'
  else grep -c "reason: user disconnected" "$work/ocserv.log" || true; fi
}

# 1. Stored password (system-owned secret, in NM's keyfile).
if [[ $mode == gp ]]; then
  add_profile pw "gateway=$url, protocol=gp, user=$user, cafile=$repo/certs/ca.pem" "password=$password"
else
  add_profile pw "gateway=$url, protocol=anyconnect, user=$user, cafile=$repo/certs/ca.pem" "password=$password"
fi
up_and_check pw
before=$(logouts)
down_and_check pw
nm_wait 5 "the gateway to see the logout" test "$(logouts)" -gt "$before" || fail "the gateway saw no logout"
say "the gateway saw the logout"
! grep -qF -- "$password" "$work/nm.log" || fail "the password appears in NetworkManager's log"

# 2. Cookie (+ gateway, gwcert, resolve as NetworkManager-openconnect's dialog returns them).
auth=$(ip netns exec "$nsc" "$espvpn" --protocol=$proto --cafile "$repo/certs/ca.pem" -u $user --passwd-on-stdin \
  --authenticate "$url" <<<"$password" 2>"$work/authenticate.out") || fail "espvpn --authenticate"
val() { sed -n "s/^$1='\(.*\)'$/\1/p" <<<"$auth"; }
cookie=$(val COOKIE)
[[ -n $cookie ]] || fail "no COOKIE from --authenticate"
if [[ $mode == ac ]]; then
  add_profile cookie "gateway=$url, protocol=anyconnect" \
    "cookie=$cookie, gateway=$(val CONNECT_URL), gwcert=$(val FINGERPRINT), resolve=$(val RESOLVE)"
else
  add_profile cookie "gateway=$url, protocol=gp, user=$user, cafile=$repo/certs/ca.pem" "cookie=$cookie"
fi
up_and_check cookie
! tr '\0' ' ' <"/proc/$vpn_pid/cmdline" | grep -qF -- "$cookie" || fail "the cookie is in espvpn's argv"
down_and_check cookie
! grep -qF -- "$cookie" "$work/nm.log" || fail "the cookie appears in NetworkManager's log"

# 3. A password NM does not keep (password-flags=2, "not saved"): NetworkManager asks
# nmcli's agent, which runs our auth dialog (--external-ui-mode) to learn what to ask,
# and answers from a passwd-file, then from its prompt (--ask, fed on stdin).
add_profile ask "gateway=$url, protocol=$proto, user=$user, cafile=$repo/certs/ca.pem, password-flags=2"
printf 'vpn.secrets.password:%s\n' "$password" >"$work/passwd-file"
out=$(nmc --wait 40 connection up ask passwd-file "$work/passwd-file" 2>&1) || fail "up ask passwd-file: $out"
up_and_check ask up
down_and_check ask
say "passwd-file: the dialog asked for the password, nmcli took it from the file"
out=$(nmc --ask --wait 40 connection up ask <<<"$password" 2>&1) || fail "nmcli --ask connection up ask: $out"
grep -q "^Password (vpn.secrets.password):" <<<"$out" || fail "nmcli --ask did not prompt for the password: $out"
up_and_check ask up
down_and_check ask
say "nmcli --ask: '$(grep -m1 -o '^Password (vpn.secrets.password):' <<<"$out")' answered from stdin, connected"
# A wrong password typed at the prompt: the service asks NetworkManager for it again
# (SecretsRequired -> the agent runs the dialog with -r -> nmcli prompts again).
out=$(printf 'wrong-%s\n%s\n' "$password" "$password" | nmc --ask --wait 60 connection up ask 2>&1) ||
  fail "nmcli --ask with a wrong, then the right password: $out"
grep -q "asking for it again (1 of 2)" "$work/nm.log" || fail "the service did not ask for the password again"
[[ $(grep -c "^Password (vpn.secrets.password):" <<<"$out") -ge 2 ]] || fail "nmcli did not prompt twice: $out"
up_and_check ask up
down_and_check ask
say "nmcli --ask, wrong then right password: asked again, connected"

# 3b. The dialog's classic protocol (nm-applet's): the profile and the password on its
# stdin, it logs in itself (espvpn --authenticate, in the client namespace) and answers
# cookie/gateway/gwcert[/resolve] as key/value lines, then waits for QUIT; the service
# connects with those and never sees the password.
dialog=$(sed -n 's/^auth-dialog=//p' "$name_file")
[[ -x $dialog ]] || fail "the .name file names no runnable auth-dialog: '$dialog'"
request=$(printf 'DATA_KEY=%s\nDATA_VAL=%s\n\n' gateway "$url" protocol "$proto" user "$user" \
  cafile "$repo/certs/ca.pem"; printf 'SECRET_KEY=password\nSECRET_VAL=%s\n\nDONE\n' "$password")
reply=$(printf '%s\nQUIT\n' "$request" | ip netns exec "$nsc" "$dialog" -u "$(cat /proc/sys/kernel/random/uuid)" \
  -n classic -s "$vpn_type" -i 2>"$work/dialog.err") || fail "the dialog failed: $(cat "$work/dialog.err")"
! grep -qF -- "$password" <<<"$reply" || fail "the dialog's reply holds the password"
declare -A got=()
while IFS= read -r k && [[ -n $k ]] && IFS= read -r v; do got[$k]=$v; done <<<"$reply"
[[ -n ${got[cookie]:-} && ${got[gateway]:-} == "$url" && ${got[gwcert]:-} == pin-sha256:* ]] ||
  fail "the dialog's reply: keys ${!got[*]}, gateway '${got[gateway]:-}', gwcert '${got[gwcert]:-}'"
[[ $mode == gp ]] || [[ ${got[gwcert]} == "$oc_pin" ]] || fail "gwcert ${got[gwcert]}, ocserv's pin is $oc_pin"
add_profile classic "gateway=$url, protocol=$proto" \
  "cookie=${got[cookie]}, gateway=${got[gateway]}, gwcert=${got[gwcert]}"
up_and_check classic
! tr '\0' '\n' <"/proc/$vpn_pid/cmdline" | grep -q -- "--passwd-on-stdin" || fail "the service logged in with a password"
down_and_check classic
say "classic dialog: it logged in (keys ${!got[*]}), the service connected with the cookie, pinned to ${got[gwcert]:0:20}..."

# 4. Wrong password: the reason NM gives.
add_profile bad "gateway=$url, protocol=$proto, user=$user, cafile=$repo/certs/ca.pem" "password=wrong-$password"
if out=$(nmc --wait 40 connection up bad 2>&1); then fail "a wrong password activated the VPN"; fi
echo "$out" >"$work/bad.out"
# NM's reason LOGIN_FAILED, which nmcli words "Invalid secrets" (not "The VPN service
# stopped unexpectedly" nor "Unknown reason"), and the last failure NM logged says so.
grep -q "Connection activation failed: Invalid secrets" <<<"$out" ||
  fail "wrong password: nmcli says '$out', want NM's login-failed reason (\"Invalid secrets\")"
last=$(grep '"bad"[^]]*\]: dbus: failure:' "$work/nm.log" | tail -1 || true)
[[ $last == *"failure: login-failed (0)" ]] || fail "NM's last failure for bad: '$last'"
nm_wait 10 "the service to exit after the failure" eval '! service_pid >/dev/null'
no_tun || fail "a tun is left after the login failure"
say "wrong password -> nmcli: $(head -1 <<<"$out"); NM: $last"

# Server unreachable (nothing listens on the port): a connect failure, with espvpn's
# own words in the log.
add_profile unreachable "gateway=https://$gw_ip:4999/, protocol=$proto, user=$user, cafile=$repo/certs/ca.pem" \
  "password=$password"
if out=$(nmc --wait 40 connection up unreachable 2>&1); then fail "an unreachable server activated the VPN"; fi
last=$(grep '"unreachable"[^]]*\]: dbus: failure:' "$work/nm.log" | tail -1 || true)
[[ $last == *"failure: connect-failed (1)" ]] || fail "NM's last failure for unreachable: '$last'"
why=$(grep "espvpn failed: " "$work/nm.log" | tail -1 || true)
grep -q "4999" <<<"$why" || fail "the log does not say why espvpn failed: '$why'"
nm_wait 10 "the service to exit after the failure" eval '! service_pid >/dev/null'
say "unreachable server -> nmcli: $(head -1 <<<"$out"); the log: ${why#*: }"

# 5. Gateway killed mid-session: espvpn gives up after reconnect_timeout, NM shows it down.
add_profile lost "gateway=$url, protocol=$proto, user=$user, cafile=$repo/certs/ca.pem, reconnect_timeout=5" \
  "password=$password"
up_and_check lost
t=$SECONDS
if [[ $mode == ac ]]; then ocserv_down; else { kill -KILL "$gw_pid" "$fake_pid"; wait "$gw_pid" "$fake_pid"; } 2>/dev/null || true; fi
nm_wait 90 "espvpn to give up" gone "$vpn_pid" || fail "espvpn still runs 90 s after the gateway died"
nm_wait 10 "NM to show the VPN down" eval '[[ $(vpn_state lost) != activated ]]' || fail "NM still shows lost activated"
nm_wait 5 "the tun to go" no_tun || fail "a tun is left after the gateway died"
! ip -n "$nsc" route show | grep -q "$tun" || fail "routes via $tun are left"
nm_wait 10 "the service to exit" gone "$svc" || fail "the service still runs"
last=$(grep '"lost"[^]]*\]: dbus: failure:' "$work/nm.log" | tail -1 || true)
[[ $last == *"failure: connect-failed (1)" ]] || fail "NM's last failure for lost: '$last'"
[[ -z $(nmc -g NAME connection show --active | grep -x lost) ]] || fail "NM still lists lost as active"
say "gateway killed -> espvpn gave up after $((SECONDS - t)) s, NM: ${last##*: }, not active; no tun, no routes; $(grep "espvpn failed: " "$work/nm.log" | tail -1 | sed 's/.*espvpn failed/espvpn failed/')"

# 6. NetworkManager killed while the VPN is up: nothing orphaned.
if [[ $mode == ac ]]; then ocserv_up "ipv6-network = fd00:199::/64" "route = fd00:202::/64" || fail "ocserv restart"
else gateway_up aes-128-gcm --dns 10.202.0.53 --dns6 fd00:202::53 --search corp.test || fail "gateway restart"; fi
up_and_check pw
kill -KILL "$nm_pid"
wait "$nm_pid" 2>/dev/null || true
t=$SECONDS
nm_wait 15 "espvpn to exit after NetworkManager died" gone "$vpn_pid" || fail "espvpn orphaned"
nm_wait 10 "the service to exit after NetworkManager died" gone "$svc" || fail "the service orphaned"
nm_wait 5 "the tun to go" no_tun || fail "a tun is left after NetworkManager died"
say "NetworkManager killed -> espvpn exited after $((SECONDS - t)) s, the service too, no tun"
nm_pid=
echo "RESULT real_nm $mode: passed in $((SECONDS - t0)) s"
