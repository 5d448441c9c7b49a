# Sourced by secrets_test.sh for `secrets_test.sh ac ESPVPN`: AnyConnect against Debian's ocserv.
# ocserv at debug level 9 logs every request header it receives: the webvpn cookie and each
# X-DTLS-Master-Secret (legacy DTLS, dtls-psk = false: the client makes one per session and
# sends it with every CONNECT), which is how the test learns the secrets espvpn made itself. espvpn runs at -vvv
# --dump-http-traffic --printcookie: password login (two forms), CONNECT, legacy DTLS, a --script,
# --stats-json, SIGUSR2 (a new connection: a second CONNECT with the cookie), SIGUSR1, logout. Its stderr, the rest of its stdout, the stats JSON, the script's
# environment and argv of espvpn and every child seen are scanned for the password, the cookie and
# every master secret; then a second session with --syslog -vvv, its syslog stream scanned the same.
# shellcheck shell=bash
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
trap ocserv_cleanup EXIT
oc_password=$password
url=https://$gw_ip:$oc_port/
OC_DEBUG=9 ocserv_up "dtls-psk = false" || fail "ocserv did not start"

# snapshot_until FILE EXPR SECONDS: stats_wait, taking argv snapshots meanwhile.
snapshot_until() {
  local end=$((SECONDS + $3 + 1))
  while ((SECONDS < end)); do
    snapshot
    [[ $(stats_get "$1" "$2") == True ]] && return 0
    sleep 0.1
  done
  return 1
}
# oc_secrets: the cookie values and master secrets ocserv was sent, one NAME=VALUE a line
# (the text ones first: "text NAME=VALUE", the hex ones "hex NAME=VALUE").
oc_secrets() {
  sed -n 's/.*HTTP processing: X-DTLS-Master-Secret: \([0-9a-fA-F]*\).*/hex master-secret=\1/p' "$work/ocserv.log" | sort -u
  sed -n 's/.*HTTP processing: Cookie: \(.*\)$/\1/p' "$work/ocserv.log" | tr ';' '\n' |
    sed -n 's/^ *\([A-Za-z0-9_-]*\)=\(.\{8,\}\)$/text cookie-\1=\2/p' | sort -u
}
ping_lan() { wait_until 10 ip netns exec "$nsc" ping -c 1 -W 1 $lan_ip >/dev/null 2>&1; }

ip netns exec "$nsc" "$espvpn" --cafile "$repo/certs/ca.pem" -u testuser --passwd-on-stdin -vvv --dump-http-traffic \
  --printcookie --script "$work/script" --stats-json "$work/cl-stats.json" "$url" <<<"$password" \
  >"$work/espvpn.out" 2>"$work/espvpn.log" &
client_pid=$!; pids+=("$client_pid")
snapshot_until "$work/cl-stats.json" "d['transport'] == 'dtls' and d['dtls']['mode'] == 'legacy'" 30 ||
  fail "espvpn did not bring legacy DTLS up"
ping_lan || fail "ping through the tunnel"
kill -USR2 "$client_pid"
snapshot_until "$work/cl-stats.json" "d['reconnect']['renewals'] >= 1 and d['transport'] == 'dtls'" 30 ||
  fail "no new connection (with DTLS) after SIGUSR2"
ping_lan || fail "ping after SIGUSR2"
kill -USR1 "$client_pid"
sleep 1.2; snapshot
kill -INT "$client_pid"
rc=0; wait "$client_pid" || rc=$?
[[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"

grep -q "^> " "$work/espvpn.log" || fail "the HTTP dump did not run (not the most verbose level?)"
cookie=$(sed -n 's/^webvpn=\(.*\)$/\1/p' "$work/espvpn.out" | head -1)
[[ -n $cookie ]] || fail "--printcookie printed no webvpn cookie: $(cat "$work/espvpn.out")"
grep -vF "webvpn=$cookie" "$work/espvpn.out" >"$work/espvpn.out.rest" || true
mapfile -t texts < <(oc_secrets | sed -n 's/^text //p')
mapfile -t masters < <(oc_secrets | sed -n 's/^hex //p')
# One master secret per session (the SIGUSR2 connection sends the same one, as openconnect does).
[[ $(grep -c "HTTP CONNECT" "$work/ocserv.log") -ge 2 ]] || fail "ocserv did not see two CONNECTs (login + SIGUSR2)"
[[ ${#masters[@]} -ge 1 ]] || fail "ocserv saw no X-DTLS-Master-Secret"
printf '%s\n' "${texts[@]}" | grep -qF "cookie-webvpn=$cookie" || fail "ocserv's log does not show the printed cookie"
nchild=$(($(ls "$work/cmdline" | wc -l) - 1))
[[ -s $work/script-env.log ]] || fail "the script never ran"
files=("$work/espvpn.log" "$work/espvpn.out.rest" "$work/cl-stats.json" "$work/script-env.log" "$work"/cmdline/*)

# The scanner must be able to fail: the raw stdout holds the --printcookie line, ocserv's log
# every master secret.
$py "$here/secrets_scan.py" --text "webvpn=$cookie" -- "$work/espvpn.out" >/dev/null &&
  fail "control: the scanner did not find the cookie in the --printcookie output"
$py "$here/secrets_scan.py" --hex "${masters[@]}" -- "$work/ocserv.log" >/dev/null &&
  fail "control: the scanner did not find the master secrets in ocserv's log"
$py "$here/secrets_scan.py" --text "password=$password" "webvpn=$cookie" "${texts[@]}" --hex "${masters[@]}" \
  -- "${files[@]}" || fail "a secret leaked (above)"
echo "RESULT secrets ac: $(wc -l <"$work/espvpn.log") log lines at -vvv, cookie + ${#texts[@]} cookie value(s) and" \
  "${#masters[@]} DTLS master secrets from ocserv, env + argv of $(grep -c '^== reason' "$work/script-env.log")" \
  "script runs, argv of espvpn (+ $nchild other children seen): no secret found"

# Phase 2: -vvv --dump-http-traffic through syslog(3) into the stand-in socket.
syslog_sink_up
rm -rf "$work/cmdline" && mkdir "$work/cmdline"
in_private_dev "$espvpn" --syslog --cafile "$repo/certs/ca.pem" -u testuser --passwd-on-stdin -vvv \
  --dump-http-traffic --printcookie --stats-json "$work/cl2-stats.json" "$url" <<<"$password" \
  >"$work/espvpn2.out" 2>"$work/espvpn2.err" &
client_pid=$!; pids+=("$client_pid")
snapshot_until "$work/cl2-stats.json" "d['transport'] == 'dtls'" 30 || fail "espvpn --syslog did not bring DTLS up"
ping_lan || fail "ping through the tunnel (syslog run)"
kill -USR1 "$client_pid"; sleep 1; snapshot
kill -INT "$client_pid"
rc=0; wait "$client_pid" || rc=$?
[[ $rc -eq 0 ]] || fail "espvpn --syslog exited $rc after SIGINT"
wait_until 5 grep -q "logout" "$work/syslog.txt" || true
grep -q "> " "$work/syslog.txt" || fail "the HTTP dump did not reach syslog"
# stderr holds only what the login shows the user (ocserv's banner and form messages, as
# openconnect prints them), no log line.
! grep -vx -e "Hello from test ocserv" -e "server: .*" "$work/espvpn2.err" ||
  fail "espvpn --syslog wrote log lines to stderr (above)"
cookie2=$(sed -n 's/^webvpn=\(.*\)$/\1/p' "$work/espvpn2.out" | head -1)
[[ -n $cookie2 ]] || fail "--printcookie printed no cookie (syslog run)"
mapfile -t texts < <(oc_secrets | sed -n 's/^text //p')
mapfile -t masters < <(oc_secrets | sed -n 's/^hex //p')
[[ ${#masters[@]} -ge 2 ]] || fail "no master secret of the syslog run in ocserv's log"
$py "$here/secrets_scan.py" --text "password=$password" "webvpn=$cookie2" "webvpn1=$cookie" "${texts[@]}" \
  --hex "${masters[@]}" -- "$work/syslog.txt" "$work/espvpn2.err" "$work"/cmdline/* || fail "a secret leaked into syslog or argv (above)"
echo "RESULT secrets ac (syslog): $(wc -l <"$work/syslog.txt") syslog lines at -vvv, ${#masters[@]} master secrets: no secret found"
