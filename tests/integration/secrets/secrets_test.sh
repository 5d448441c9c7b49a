#!/usr/bin/env bash
# Secrets never leave espvpn in logs or argv, for both protocols.
#   secrets_test.sh gp ESPVPN GATEWAY_BIN    GlobalProtect against the fake gateway
#   secrets_test.sh ac ESPVPN                AnyConnect against ocserv (secrets_ac.sh)
# GlobalProtect: espvpn runs the whole GP path at the
# most verbose level (-vvv --dump-http-traffic): portal + gateway login with a known
# password and OTP, HIP, getconfig, ESP with CBC+HMAC keys, a rekey (new keys), a
# --script (vpnc-script env), SIGUSR1 stats, --stats-json, logout. Everything it
# printed, the script's environment and /proc/PID/cmdline of espvpn and of every
# child seen are then scanned (secrets_scan.py) for the password, the OTP, the
# authcookie and every ESP key of both generations, in plain/hex/base64/percent forms.
# A second, shorter session logs with --syslog -vvv into a stand-in syslog socket
# (bound over /dev/log in a private mount namespace) and its log is scanned too.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
proto=$1 espvpn=$2 gw_bin=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/secrets-test.XXXXXX)
pids=()
# shellcheck source=../lib.sh
. "$repo/tests/integration/lib.sh"
fail_logs=("$work"/syslog.txt "$work"/espvpn2.err)
# shellcheck source=../../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"
trap topo_cleanup EXIT
trap 'exit 130' INT TERM
topo_up

password='Pw-Zq8v!x%41&k' otp='otp-7Rw3Nq'
mkdir -p "$work/sa" "$work/cmdline"
cat >"$work/script" <<SCRIPT
#!/bin/sh
{ echo "== reason=\$reason"; env; printf 'cmdline: '; tr '\\0' ' ' </proc/\$\$/cmdline; echo
  printf 'parent cmdline: '; tr '\\0' ' ' </proc/\$PPID/cmdline; echo; } >>"$work/script-env.log"
exec "$repo/tools/netns/minimal-vpnc-script"
SCRIPT
chmod +x "$work/script"

# Snapshots while it runs: every SA the gateway handed out, argv of espvpn and its children.
snapshot() {
  local sum; sum=$({ md5sum <"$work/gw-sa.env"; } 2>/dev/null | cut -c1-8) || true
  [[ -n $sum && ! -f $work/sa/$sum ]] && cp "$work/gw-sa.env" "$work/sa/$sum"
  local p
  for p in "$client_pid" $(awk -v pp="$client_pid" '$4 == pp {print $1}' /proc/[0-9]*/stat 2>/dev/null); do
    [[ -r /proc/$p/cmdline ]] && tr '\0' ' ' </proc/"$p"/cmdline >"$work/cmdline/$p" 2>/dev/null || true
  done
}
wait_snapshot() {  # PATTERN SECONDS [LOG]
  local i
  for ((i = 0; i < $2 * 10; i++)); do snapshot; grep -q "$1" "${3:-$work/espvpn.log}" && return 0; sleep 0.1; done
  return 1
}
# in_private_dev CMD... &: CMD in a mount namespace whose /dev is $work/dev (the stand-in /dev/log
# and the device nodes espvpn needs), so the host's syslog (if any) is neither used nor touched.
# Only in the background (it execs: $! is then CMD's pid).
in_private_dev() {
  exec ip netns exec "$nsc" unshare -m -- bash -c '
    set -e; d=$1; shift
    for n in null zero random urandom net/tun; do : >"$d/$n"; mount --bind "/dev/$n" "$d/$n"; done
    mount --rbind "$d" /dev
    exec "$@"' _ "$work/dev" "$@"
}
# syslog_sink_up: the stand-in syslog socket $work/dev/log, lines into $work/syslog.txt.
syslog_sink_up() {
  mkdir -p "$work/dev/net"
  : >"$work/syslog.txt"
  "$py" "$here/syslog_sink.py" "$work/dev/log" "$work/syslog.txt" 60 &
  pids+=("$!")
  wait_until 5 test -S "$work/dev/log" || fail "the stand-in syslog socket did not appear"
}

if [[ $proto == ac ]]; then
  # shellcheck source=secrets_ac.sh
  . "$here/secrets_ac.sh"
  exit 0
fi
[[ $proto == gp ]] || { echo "usage: $0 gp|ac ESPVPN [GATEWAY]" >&2; exit 2; }
gateway_up aes-128-cbc:sha1 --user "alice:$password" --gw-otp "js:$otp" --hip-needed --timeout 8 \
  || fail "fake gateway did not start"
printf '%s\n%s\n' "$password" "$otp" | ip netns exec "$nsc" "$espvpn" --protocol=gp \
  --cafile "$repo/certs/ca.pem" -u alice -vvv --dump-http-traffic --printcookie --script "$work/script" \
  --stats-json "$work/cl-stats.json" https://$gw_ip:4443/ >"$work/espvpn.out" 2>"$work/espvpn.log" &
client_pid=$!; pids+=("$client_pid")

# sa_keys: every ESP key of every SA snapshot in $work/sa, one "GEN-NAME=HEX" per line.
sa_keys() {
  local f k v
  for f in "$work"/sa/*; do
    while IFS='=' read -r k v; do
      case $k in *_EKEY|*_AKEY) [[ -n $v ]] && echo "$(basename "$f")-$k=$v" ;; esac
    done <"$f"
  done
}
wait_snapshot "ESP connected" 40 || fail "espvpn did not bring ESP up"
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through the tunnel"
wait_snapshot "rekey done" 20 || fail "no rekey within 20 s (gateway lifetime 8 s)"
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping after the rekey"
kill -USR1 "$client_pid"
sleep 1.2; snapshot
kill -INT "$client_pid"
rc=0; wait "$client_pid" || rc=$?
[[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"

grep -q "> body: " "$work/espvpn.log" || fail "the HTTP dump did not run (not the most verbose level?)"
cookie=$(sed -n 's/.*authcookie=\([0-9a-f]*\).*/\1/p' "$work/espvpn.out" | head -1)
[[ -n $cookie ]] || fail "--printcookie printed no authcookie"
grep -v "authcookie=$cookie" "$work/espvpn.out" >"$work/espvpn.out.rest" || true
mapfile -t keys < <(sa_keys)
gens=$(ls "$work/sa" | wc -l)
[[ $gens -ge 2 ]] || fail "saw $gens SA generation(s), expected the first and the rekeyed one"
nchild=$(($(ls "$work/cmdline" | wc -l) - 1))
[[ -s $work/script-env.log ]] || fail "the script never ran"
files=("$work/espvpn.log" "$work/espvpn.out.rest" "$work/cl-stats.json" "$work/script-env.log" "$work"/cmdline/*)

# The scanner must be able to fail: the raw stdout holds the --printcookie line.
if $py "$here/secrets_scan.py" --text "authcookie=$cookie" -- "$work/espvpn.out" >/dev/null; then
  fail "control: the scanner did not find the authcookie in the --printcookie output"
fi
$py "$here/secrets_scan.py" --text "password=$password" "otp=$otp" "authcookie=$cookie" --hex "${keys[@]}" \
  -- "${files[@]}" || fail "a secret leaked (above)"

# Phase 2: the same at -vvv --dump-http-traffic through syslog(3). /dev/log is our own
# socket, visible only in a private mount namespace (a copy of /dev holding the nodes
# espvpn needs), so the host's syslog (if any) is neither used nor touched.
syslog_sink_up
rm -f "$work/sa"/* && snapshot
printf '%s\n%s\n' "$password" "$otp" | in_private_dev "$espvpn" --protocol=gp --syslog \
  --cafile "$repo/certs/ca.pem" -u alice -vvv --dump-http-traffic --printcookie \
  https://$gw_ip:4443/ >"$work/espvpn2.out" 2>"$work/espvpn2.err" &
client_pid=$!; pids+=("$client_pid")
for ((i = 0; i < 400; i++)); do snapshot; grep -q "ESP connected" "$work/syslog.txt" && break; sleep 0.1; done
grep -q "ESP connected" "$work/syslog.txt" || fail "espvpn --syslog: no 'ESP connected' in the syslog stream"
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping through the tunnel (syslog run)"
kill -USR1 "$client_pid"; sleep 1; snapshot
kill -INT "$client_pid"
rc=0; wait "$client_pid" || rc=$?
[[ $rc -eq 0 ]] || fail "espvpn --syslog exited $rc after SIGINT"
sleep 0.3
grep -q "> body: " "$work/syslog.txt" || fail "the HTTP dump did not reach syslog"
[[ ! -s $work/espvpn2.err ]] || fail "espvpn --syslog wrote to stderr: $(head -3 "$work/espvpn2.err")"
cookie2=$(sed -n 's/.*authcookie=\([0-9a-f]*\).*/\1/p' "$work/espvpn2.out" | head -1)
[[ -n $cookie2 ]] || fail "--printcookie printed no authcookie (syslog run)"
mapfile -t keys2 < <(sa_keys)
[[ ${#keys2[@]} -gt 0 ]] || fail "no ESP keys seen for the syslog run"
$py "$here/secrets_scan.py" --text "password=$password" "otp=$otp" "authcookie=$cookie2" "authcookie1=$cookie" \
  --hex "${keys2[@]}" "${keys[@]}" -- "$work/syslog.txt" || fail "a secret leaked into syslog (above)"
echo "RESULT secrets (syslog): $(wc -l <"$work/syslog.txt") syslog lines at -vvv, ${#keys2[@]} ESP keys: no secret found"

echo "RESULT secrets: $(wc -l <"$work/espvpn.log") log lines at -vvv, ${#keys[@]} ESP keys from $gens SA generations," \
  "env + argv of $(grep -c '^== reason' "$work/script-env.log") script runs, argv of espvpn (+ $nchild other children seen):" \
  "no secret found"
