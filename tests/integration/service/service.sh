#!/usr/bin/env bash
# The status socket and --always-on (issue 44; docs/SERVICE.md) on a GP tunnel, in three
# namespaces of their own (tools/netns/gp-topology.sh: fake-gp-gateway + esp-gateway).
#
#   service.sh MODE ESPVPN_BIN GATEWAY_BIN  (MODE: one of those below)
#   status:    espvpn --status-socket in a root-only directory, --status-user daemon: `espvpn status`
#              says connected over ESP (exit 0), so does tools/status-bar (waybar's JSON), --json matches docs/status.schema.json with bytes
#              that grow with a ping; a client of another uid (bin) is refused, daemon is let in;
#              a client sending 1 MiB without a newline is answered "too long" and closed, one that
#              never reads its replies is dropped, 20 silent ones are held or turned away: meanwhile
#              pings through the tunnel and `espvpn status` are answered; `espvpn reconnect`: a new
#              link with the same session; `espvpn disconnect`: logout, exit 0, tun and socket gone
#   always_on: --always-on --reconnect-timeout 3: the gateway session expires (the fake's
#              --cookie-max-age): after `espvpn reconnect` the cookie is refused and espvpn logs in
#              again with the portal cookie it saved, no password (stdin is spent): connected, ping;
#              the gateway gone for 8 s (longer than the
#              timeout): espvpn stays, the status says reconnecting; back (same sessions): connected
#              again by itself, ping; then the gateway restarts without its sessions and portal
#              cookies: the cookie is refused, the new login needs a password nobody types: the
#              status says needs-login, espvpn waits (no exit); `espvpn reconnect` tries again (logged);
#              SIGTERM ends it with exit 0, tun removed
#   unit:      debian/espvpn@.service: `systemd-analyze verify` passes (the binary's path put in, the
#              man page left out: neither is installed here; systemd is not started); its ExecStart
#              run as systemd would, with the profile /etc/espvpn/gp.conf moved to the test's
#              directory (server, CA, user, -F password): connected on the status socket, ping;
#              `espvpn disconnect gp`-style: logout, exit 0
#   captive:   a hotel's captive portal (captive_portal.py on 198.51.100.80, off the client's link,
#              through the default route) with --always-on --kill-switch and a full tunnel, the probe
#              by a name only the tunnel's DNS knows (tiny_dns.py on the lan): connected;
#              the gateway blocked (TCP reset, ESP dropped) while the portal redirects everything:
#              the status says captive-portal with the portal's URL (its control character escaped),
#              the URL is printed (no display), the tunnel is down, the kill switch stays and lets
#              HTTP to the portal pass (its DNS server named in the exception) while TCP 8080 and
#              UDP 5353 to the same host are dropped; a GET /login through the exception, the
#              gateway back: connected again with the same session (no new login), the exception
#              closed when the tunnel came up, ping; SIGTERM: exit 0, no kill switch left
#   captive_deadline: the same portal, found after the client's link went down and up (a new
#              network: the kernel flushed the probe's route), the exception's length from the GP portal config
#              (captive-portal-exception-timeout 3): after 3 s the broker closes it by itself,
#              HTTP to the portal is dropped, the status still says captive-portal; SIGTERM: exit
#              0, the kill switch gone, TCP 8080 reachable again
#   captive_login: --always-on started in the hotel (the gateway blocked from the start, no kill
#              switch): the login's server takes no TCP connection, the probe finds the portal:
#              captive-portal, the escaped URL printed and handed to the user's browser
#              (--external-browser=a program that notes it) by the browser launcher, as the
#              session process runs under its seccomp filter; the portal's login and the gateway
#              back: connected
#   captive_anyconnect: the same portal before the project's AnyConnect gateway (split tunnel,
#              DTLS), --always-on --kill-switch: the CSTP and DTLS blocked: captive-portal, HTTP to
#              the portal passes the kept kill switch; the portal's login and the gateway back:
#              connected again with the same cookie (the password on stdin is spent: a new login
#              could not pass), the exception closed
#   anyconnect: the project's AnyConnect gateway (tools/https-tunnel-gateway, beside GATEWAY_BIN's
#              folder): the status says connected, protocol anyconnect, transport DTLS once DTLS
#              carries, bytes grow with a ping; `espvpn disconnect`: exit 0
#   trusted:   --always-on --kill-switch --trusted-server on the corporate LAN (reached directly in the
#              office, else only through the tunnel), a full tunnel: trusted-network at the start;
#              leaving (and a route change): connected, ping; a network change away from the office:
#              the check goes around the tunnel, finds no server, stays connected, and its own rewrite
#              of the probe's table (IPv6 notifies it) starts no other check; no way around the
#              tunnel (link flap, no default route): the check, bound to the link, does not fall
#              back to the tunnel (where the server answers); arriving with the
#              tunnel up: logged out, trusted-network, the tun, kill switch and probe rule gone;
#              leaving again: a new login with the saved portal cookie, connected, ping
#   trusted_anyconnect: --always-on --trusted-domain with the project's AnyConnect gateway: the
#              client namespace's resolv.conf says corp.example: trusted-network, no login; another
#              search domain and a route change: connected over DTLS, ping
# shellcheck source=../gp_test_head.sh
. "$(dirname "$0")/../gp_test_head.sh" service "$@"
topo_up
client=$here/status_client.py
sock_dir=$work/run
sock=$sock_dir/gp.sock
chmod 0711 "$work"
mkdir -m 0755 "$sock_dir"

up() {
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" --state-file "$work/fake-state.json" "${fake_extra[@]}" || fail "fake gateway did not start"
  espvpn_up --timestamp --status-socket "$sock" "$@"
  wait_for "$work/espvpn.log" "ESP connected" 30 "$client_pid" || fail "espvpn did not bring ESP up"
}
ping_lan() { ip netns exec "$nsc" ping -c "${1:-3}" -i 0.2 -W 2 "$lan_ip" >/dev/null; }
status_json() { "$espvpn" status --json --status-socket "$sock"; }
state_is() { [[ $(status_json 2>/dev/null | json /dev/stdin 'd["state"]' 2>/dev/null) == "$1" ]]; }
fake_extra=()

case $mode in
status)
  up --status-user daemon
  [[ $(stat -c %a "$sock") == 666 ]] || fail "socket mode $(stat -c %a "$sock") (666 expected with --status-user)"
  rc=0; out=$("$espvpn" status --status-socket "$sock") || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn status exited $rc while connected: $out"
  grep -q "^state: *connected" <<<"$out" || fail "status does not say connected: $out"
  grep -q "^transport: *ESP" <<<"$out" || fail "status names no ESP transport: $out"
  status_json >"$work/status1.json" || fail "espvpn status --json failed"
  $py - "$repo/docs/status.schema.json" "$work/status1.json" <<'PY' || fail "status --json does not match docs/status.schema.json"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))
PY
  bar=$("$py" "$repo/tools/status-bar/espvpn-status-bar" --status-socket "$sock") || fail "the status bar example failed"
  [[ $(json /dev/stdin 'd["class"]' <<<"$bar") == connected ]] || fail "the status bar example says: $bar"
  [[ $(json "$work/status1.json" 'd["expires"] is not None and d["expires"] > d["since"]') == True ]] \
    || fail "no session expiry from the gateway's lifetime: $(cat "$work/status1.json")"
  ping_lan 5 || fail "no ping through the tunnel"
  status_json >"$work/status2.json"
  [[ $(json "$work/status2.json" 'd["bytes_out"] > '"$(json "$work/status1.json" 'd["bytes_out"]')"' and d["bytes_in"] > 0') == True ]] \
    || fail "bytes did not grow with a ping: $(cat "$work/status1.json" "$work/status2.json")"
  echo "RESULT status: $("$py" "$client" "$sock" many 1000)"
  # Access: bin refused, daemon (a --status-user) let in. (Not nobody: espvpn's session
  # process, which serves the socket, runs as nobody here, and its own user is let in.)
  out=$(setpriv --reuid=bin --regid=bin --clear-groups "$py" "$client" "$sock" ask status) || true
  grep -q '"permission denied"' <<<"$out" || fail "a client of uid bin was not refused: $out"
  out=$(setpriv --reuid=daemon --regid=daemon --clear-groups "$py" "$client" "$sock" ask status)
  grep -q '"state":"connected"' <<<"$out" || fail "the --status-user daemon was not answered: $out"
  grep -q "status socket: refused a client (uid $(id -u bin)" "$work/espvpn.log" || fail "the refusal is not logged"
  # Hostile clients; the tunnel and the status answer meanwhile.
  "$py" "$client" "$sock" noread 6 >"$work/noread.out" 2>&1 & noread=$!; pids+=("$noread")
  "$py" "$client" "$sock" longline "$work/longline.out" & long=$!; pids+=("$long")
  sleep 0.5  # both admitted before the silent ones take the other slots
  holders=()
  for _ in $(seq 20); do "$py" "$client" "$sock" hold 30 & holders+=("$!"); pids+=("$!"); done
  t0=$(date +%s%N)
  ping_lan 10 || fail "no ping through the tunnel while the hostile clients ran"
  for _ in 1 2 3; do
    # Busy (16 clients held) is an answer too: the server is not stalled.
    out=$("$py" "$client" "$sock" ask status) || fail "no status answer while the hostile clients ran"
    grep -q '"state":"connected"\|"busy' <<<"$out" || fail "status during the attack: $out"
  done
  wait "$long" || fail "the long-line client failed"
  grep -q '^closed .*request line too long' "$work/longline.out" || fail "1 MiB without a newline: $(cat "$work/longline.out")"
  wait "$noread" || true
  grep -q "dropped by the server" "$work/noread.out" || fail "the client that never reads was not dropped: $(cat "$work/noread.out")"
  kill "${holders[@]}" 2>/dev/null || true
  wait "${holders[@]}" 2>/dev/null || true
  echo "RESULT status: hostile clients: $(cat "$work/noread.out"); $(cut -c1-80 "$work/longline.out"); ping + status answered in $((($(date +%s%N) - t0) / 1000000)) ms"
  # reconnect: a new link with the same session (no new login).
  logins0=$(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)')
  out=$("$espvpn" reconnect --status-socket "$sock") || fail "espvpn reconnect failed: $out"
  wait_for "$work/espvpn.log" "reconnect requested on the status socket" 10 || fail "the reconnect request is not logged"
  wait_until 20 state_is connected || fail "not connected after espvpn reconnect"
  ping_lan || fail "no ping after espvpn reconnect"
  [[ $(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)') == "$logins0" ]] || fail "reconnect logged in again"
  # disconnect: logout, exit 0, the tun and the socket gone.
  out=$("$espvpn" disconnect --status-socket "$sock") || fail "espvpn disconnect failed: $out"
  rc=0; timeout 20 tail --pid="$client_pid" -f /dev/null || true
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after espvpn disconnect"
  [[ $(json "$work/fake-stats.json" 'd["logouts"]') -ge 1 ]] || fail "no logout sent on disconnect"
  no_tun_left "$nsc" || fail "tun device left behind"
  [[ ! -e $sock ]] || fail "the status socket was left behind"
  rc=0; "$espvpn" status --status-socket "$sock" >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 1 ]] || fail "espvpn status exited $rc with nothing running (1 expected)"
  ;;
always_on)
  # The portal hands out its authentication-override cookie (saved by espvpn); gateway
  # sessions expire after 5 s.
  fake_extra=(--portal-cookie --cookie-max-age 5)
  up --always-on --reconnect-timeout 3 --force-dpd 1
  state_is connected || fail "not connected at the start: $(status_json)"
  # The session expires; a reconnect finds it refused: a new login with the saved portal
  # cookie (the password was on stdin once: no one types it again).
  sleep 5.5
  "$espvpn" reconnect --status-socket "$sock" >/dev/null || fail "espvpn reconnect failed"
  portal_cookie_login() { [[ $(json "$work/fake-stats.json" 'd.get("portal_cookie_logins", 0)') -ge 1 ]]; }
  wait_until 30 portal_cookie_login || fail "no new login with the saved portal cookie: $(status_json)"
  wait_until 30 state_is connected || fail "not connected after the new login: $(status_json)"
  ping_lan || fail "no ping after the new login"
  grep -q "the server rejected the cookie: the session is over" "$work/espvpn.log" || fail "the refused cookie is not logged"
  gateway_down
  wait_until 15 state_is reconnecting || fail "the status did not say reconnecting: $(status_json)"
  sleep 8
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn --always-on exited when the gateway stayed away"
  state_is reconnecting || fail "not reconnecting after 8 s: $(status_json)"
  grep -q "reconnecting until it is back (--always-on)" "$work/espvpn.log" || fail "the outage start is not logged as always-on"
  gateway_up aes-128-gcm --tun "$ht_dev" --state-file "$work/fake-state.json" || fail "fake gateway did not restart"
  t0=$SECONDS
  wait_until 40 state_is connected || fail "not connected again after the gateway came back: $(status_json)"
  ping_lan || fail "no ping after the gateway came back"
  echo "RESULT always_on: reconnected $((SECONDS - t0)) s after the gateway came back (outage > --reconnect-timeout 3)"
  # A gateway without its sessions: the cookie is refused, the new login needs a password.
  gateway_down
  rm -f "$work/fake-state.json"
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not restart"
  wait_until 60 state_is needs-login || fail "the status did not say needs-login: $(status_json)"
  grep -q "needs-login" "$work/espvpn.log" || fail "needs-login is not in the log"
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited instead of waiting for a login"
  n0=$(grep -c "needs-login:" "$work/espvpn.log")
  asked_again() { [[ $(grep -c "needs-login:" "$work/espvpn.log") -gt $n0 ]]; }
  "$espvpn" reconnect --status-socket "$sock" >/dev/null || fail "espvpn reconnect failed"
  wait_until 30 asked_again || fail "espvpn reconnect did not try the login again"
  kill -TERM "$client_pid"
  rc=0; wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM while waiting for a login"
  no_tun_left "$nsc" || fail "tun device left behind"
  ;;
unit)
  unit=$repo/debian/espvpn@.service
  command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
  sed -e "s#/usr/sbin/espvpn#$espvpn#" -e '/^Documentation=/d' "$unit" >"$work/espvpn@gp.service"
  out=$(systemd-analyze verify "$work/espvpn@gp.service" 2>&1) || fail "systemd-analyze verify: $out"
  [[ -z $out ]] || fail "systemd-analyze verify complains: $out"
  mkdir -p "$work/etc"
  cat >"$work/etc/gp.conf" <<CONF
# a profile as /etc/espvpn/NAME.conf holds it
protocol gp
server https://$gw_outer:4443/
cafile $repo/certs/ca.pem
user alice
form-entry _login:passwd=secret
stats-json $work/cl-stats.json
timestamp
CONF
  chmod 0600 "$work/etc/gp.conf"
  exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
  [[ -n $exec_start ]] || fail "no ExecStart in $unit"
  exec_start=${exec_start//\/usr\/sbin\/espvpn/$espvpn}
  exec_start=${exec_start//\/etc\/espvpn\/%i/$work/etc/gp}
  exec_start=${exec_start//\/run\/espvpn\/%i/$sock_dir/gp}
  [[ $exec_start != *%* ]] || fail "a specifier left in ExecStart: $exec_start"
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start"
  # The unit's capability bounding set and no_new_privs, as systemd applies them.
  caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr '[:upper:]' '[:lower:]' | sed -e 's/cap_/+/g' -e 's/ /,/g')
  [[ -n $caps ]] || fail "no CapabilityBoundingSet in $unit"
  # shellcheck disable=SC2086 # the unit's words, as systemd splits them (no quotes in it)
  ip netns exec "$nsc" setpriv --bounding-set=-all,"$caps" --no-new-privs $exec_start </dev/null \
    >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_until 30 state_is connected || fail "the unit's ExecStart did not connect: $(status_json 2>&1)"
  ping_lan || fail "no ping through the unit's tunnel"
  grep -q '"always_on":true' <(status_json) || fail "the unit's session is not always-on"
  msg=$(privsep_checked "$client_pid") || fail "the unit's espvpn: $msg"
  out=$("$espvpn" disconnect --status-socket "$sock") || fail "espvpn disconnect failed: $out"
  rc=0; timeout 20 tail --pid="$client_pid" -f /dev/null || true
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "the unit's espvpn exited $rc after disconnect (0: Restart=on-failure leaves it stopped)"
  no_tun_left "$nsc" || fail "tun device left behind"
  echo "RESULT unit: verify clean; ExecStart connected, disconnected with exit 0"
  ;;
anyconnect)
  gateway_anyconnect_up || fail "anyconnect-gateway did not start"
  echo test123 | ip netns exec "$nsc" "$espvpn" --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
    --passwd-on-stdin --status-socket "$sock" "https://$gw_ip:4443/" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_until 30 state_is connected || fail "AnyConnect: not connected: $(status_json 2>&1)"
  wait_for "$work/espvpn.log" "data over DTLS" 20 "$client_pid" || fail "AnyConnect: no DTLS"
  transport_is() { [[ $(status_json 2>/dev/null | json /dev/stdin 'd["transport"]') == "$1" ]]; }
  wait_until 10 transport_is DTLS || fail "the status does not say DTLS: $(status_json)"
  status_json >"$work/status1.json"
  [[ $(json "$work/status1.json" 'd["protocol"]') == anyconnect ]] || fail "protocol: $(cat "$work/status1.json")"
  ping_lan 5 || fail "no ping through the AnyConnect tunnel"
  status_json >"$work/status2.json"
  [[ $(json "$work/status2.json" 'd["bytes_in"] > '"$(json "$work/status1.json" 'd["bytes_in"]')") == True ]] \
    || fail "bytes did not grow with a ping: $(cat "$work/status1.json" "$work/status2.json")"
  out=$("$espvpn" disconnect --status-socket "$sock") || fail "espvpn disconnect failed: $out"
  rc=0; timeout 20 tail --pid="$client_pid" -f /dev/null || true
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after espvpn disconnect"
  no_tun_left "$nsc" || fail "tun device left behind"
  echo "RESULT anyconnect: $(cut -c1-200 "$work/status2.json")"
  ;;
captive|captive_deadline|captive_login|captive_anyconnect)
  portal=198.51.100.80
  ip -n "$nsg" addr add $portal/32 dev lo
  ip -n "$nsc" route add default via $gw_ip
  touch "$work/portal.log"
  ip netns exec "$nsg" $py "$here/captive_portal.py" $portal "$work/portal-login" "$work/portal.log" \
    >"$work/portal.out" 2>&1 &
  pids+=("$!")
  wait_listening "$nsg" tcp 80 10 || fail "the captive portal did not start"
  fake_routes=(--full-tunnel)
  probe=(--captive-probe "http://$portal/check_network_status.txt")
  hotel() {  # [UDP_PORT]: the gateway's TCP 4443 refused, its UDP port (ESP 4501) dropped
    ip netns exec "$nsg" nft -f - <<NFT
table inet hotel {
  chain input {
    type filter hook input priority filter;
    ip saddr $cl_ip ip daddr $gw_ip tcp dport 4443 reject with tcp reset
    ip saddr $cl_ip ip daddr $gw_ip udp dport ${1:-4501} drop
  }
}
NFT
  }
  if [[ $mode == captive_anyconnect ]]; then
    gateway_anyconnect_up || fail "anyconnect-gateway did not start"
    echo test123 | ip netns exec "$nsc" "$espvpn" --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
      --passwd-on-stdin --status-socket "$sock" --always-on --kill-switch --force-dpd 1 "${probe[@]}" \
      "https://$gw_ip:4443/" >"$work/espvpn.out" 2>"$work/espvpn.log" &
    client_pid=$!; pids+=("$client_pid")
    wait_until 30 state_is connected || fail "AnyConnect: not connected: $(status_json)"
    wait_for "$work/espvpn.log" "data over DTLS" 20 "$client_pid" || fail "AnyConnect: no DTLS"
    hotel 4443
    # The test gateway serves one tunnel at a time and would hold the old one until its DPD
    # gives up: it learns now that the client has gone (a real gateway takes the reconnect).
    ip netns exec "$nsg" ss -K src $gw_ip sport = :4443 dst $cl_ip >/dev/null 2>&1
    wait_until 90 state_is captive-portal || fail "AnyConnect: the status did not say captive-portal: $(status_json)"
    wait_for "$work/espvpn.log" "the kill switch lets through TCP 80/443" 20 "$client_pid" || fail "no exception opened"
    code=$(ip netns exec "$nsc" curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$portal/login") || true
    [[ $code == 200 ]] || fail "the portal's login through the exception: $code"
    ip netns exec "$nsg" nft delete table inet hotel
    wait_until 90 state_is connected || fail "AnyConnect: not connected after the portal let go: $(status_json)"
    grep -q "the kill switch's exception is closed (a tunnel is being brought up)" "$work/espvpn.log" \
      || fail "the exception was not closed when the tunnel came up"
    ping_lan || fail "AnyConnect: no ping after the captive portal"
    kill -TERM "$client_pid"
    rc=0; wait "$client_pid" || rc=$?
    [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM"
    ! ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null 2>&1 || fail "the kill switch was left behind"
    echo "RESULT captive_anyconnect: captive-portal, connected again with the same cookie after the portal's login"
    gateway_down
    echo PASS
    exit 0
  fi
  if [[ $mode == captive_login ]]; then
    gateway_https_up
    gateway_up aes-128-gcm --tun "$ht_dev" || fail "fake gateway did not start"
    hotel
    # The user's browser: a program that notes what it was asked to open (the session user,
    # not root, runs it: it writes where anyone may).
    mkdir -m 1777 "$work/browser"
    printf '#!/bin/sh\nprintf "%%s\\n" "$1" >>%s/browser/opened\n' "$work" >"$work/open-portal"
    chmod 0755 "$work/open-portal"
    espvpn_up --timestamp --status-socket "$sock" --always-on "${probe[@]}" --external-browser="$work/open-portal"
    wait_until 60 state_is captive-portal || fail "the status did not say captive-portal: $(status_json)"
    url="http://$portal/login?from=probe&x=%1B[31mred"
    [[ $(status_json | json /dev/stdin 'd["portal"]') == "$url" ]] || fail "the portal's URL: $(status_json)"
    wait_for "$work/browser/opened" "." 10 || fail "the browser was not started: $(grep -i 'captive' "$work/espvpn.log")"
    [[ $(cat "$work/browser/opened") == "$url" ]] || fail "the browser was asked to open: $(cat -v "$work/browser/opened")"
    # Opened from under the session's seccomp filter: by the launcher forked before it; the
    # escaped URL is printed as well.
    if [[ ${ESPVPN_SECCOMP:-} != 0 ]]; then
      [[ $(status_field "$(session_of "$client_pid")" Seccomp) == 2 ]] || fail "the session process has no seccomp filter"
    fi
    grep -qF "its page opened by the browser launcher" "$work/espvpn.log" \
      || fail "the page was not opened by the browser launcher: $(grep -i 'captive' "$work/espvpn.log")"
    grep -qF "  $url" "$work/espvpn.log" || fail "the escaped URL is not printed"
    code=$(ip netns exec "$nsc" curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$portal/login") || true
    [[ $code == 200 ]] || fail "the portal's login: $code"
    ip netns exec "$nsg" nft delete table inet hotel
    wait_until 90 state_is connected || fail "not connected after the portal let go: $(status_json)"
    ping_lan || fail "no ping after the captive portal"
    kill -TERM "$client_pid"
    rc=0; wait "$client_pid" || rc=$?
    [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM"
    echo "RESULT captive_login: captive-portal before the first login, connected after the portal's login"
    gateway_down
    echo PASS
    exit 0
  fi
  if [[ $mode == captive ]]; then
    # The probe by name, as NetworkManager's: the tunnel's DNS (a server on the lan, the only
    # one that knows the name) answers it while the tunnel carries; during the outage and the
    # portal no DNS server answers it (the network's, 192.0.2.53, is a black hole).
    ip netns exec "$nsl" $py "$here/tiny_dns.py" $lan_ip portal.hotel.test $portal >"$work/dns.out" 2>&1 &
    pids+=("$!")
    wait_listening "$nsl" udp 53 10 || fail "the DNS server did not start"
    probe=(--captive-probe "http://portal.hotel.test/check_network_status.txt")
    fake_extra=(--dns $lan_ip)
    up --always-on --kill-switch --force-dpd 1 "${probe[@]}" --captive-exception-timeout 120
  else
    fake_extra=(--captive-exception-timeout 3)
    up --always-on --kill-switch --force-dpd 1 "${probe[@]}"
  fi
  wait_until 20 state_is connected || fail "not connected at the start: $(status_json)"
  logins0=$(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)')
  if [[ $mode == captive_deadline ]]; then
    # The laptop joins the hotel's network: its link goes down and up and the default route
    # comes back as DHCP gives it. The kernel flushed every route through the link, the
    # probe's own table's too: the probe's way around the tunnel must be found again.
    ip -n "$nsc" link set "${topo}cg" down
    ip -n "$nsc" link set "${topo}cg" up
    ip -n "$nsc" addr replace $cl_ip6/64 dev "${topo}cg" nodad
    ip -n "$nsc" route replace default via $gw_ip
  fi
  # The hotel: the gateway does not answer, the portal redirects everything.
  hotel
  t0=$SECONDS
  wait_until 90 state_is captive-portal || fail "the status did not say captive-portal: $(status_json)"
  echo "RESULT $mode: captive-portal $((SECONDS - t0)) s after the gateway was blocked"
  status_json >"$work/status-captive.json" || true  # exit 3: reachable, not connected
  $py - "$repo/docs/status.schema.json" "$work/status-captive.json" <<'PY' || fail "status --json does not match the schema"
import json, sys, jsonschema
jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])))
PY
  url=$(json "$work/status-captive.json" 'd["portal"]')
  [[ $url == "http://$portal/login?from=probe&x=%1B[31mred" ]] || fail "the portal's URL: $url"
  grep -qF "Log in to it in a browser:" "$work/espvpn.log" || fail "the portal's URL is not printed"
  grep -qF "  $url" "$work/espvpn.log" || fail "the printed URL is not the escaped one"
  ! grep -q $'\x1b' "$work/espvpn.log" "$work/espvpn.out" || fail "a raw control character reached the terminal"
  bar=$("$py" "$repo/tools/status-bar/espvpn-status-bar" --status-socket "$sock") || true
  [[ $(json /dev/stdin 'd["class"]' <<<"$bar") == captive-portal ]] || fail "the status bar example says: $bar"
  rc=0; out=$("$espvpn" status --status-socket "$sock") || rc=$?
  [[ $rc -eq 3 ]] && grep -qF "portal:     $url" <<<"$out" || fail "espvpn status (exit $rc): $out"
  no_tun_left "$nsc" || fail "the tun device is still there during the captive portal"
  nft_list() { ip netns exec "$nsc" nft list table inet espvpn_kill_switch 2>/dev/null; }
  nft_list >/dev/null || fail "the kill switch went with the tunnel"
  blocked_out() { nft_list | sed -n 's/.*counter packets \([0-9]*\) bytes [0-9]* drop comment "blocked out".*/\1/p'; }
  if [[ $mode == captive ]]; then
    wait_for "$work/espvpn.log" "the kill switch lets through TCP 80/443" 20 "$client_pid" || fail "no exception opened"
    nft_list | grep -A4 "set captive_dns4" | grep -q "192.0.2.53" || fail "the network's DNS server is not in the exception: $(nft_list)"
    code=$(ip netns exec "$nsc" curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$portal/") || true
    [[ $code == 302 ]] || fail "HTTP to the portal through the exception: $code"
    b0=$(blocked_out)
    rc=0; ip netns exec "$nsc" curl -s -o /dev/null --max-time 2 "http://$portal:8080/" || rc=$?
    [[ $rc -eq 28 ]] || fail "TCP 8080 to the portal's host was not dropped (curl exit $rc)"
    ip netns exec "$nsc" bash -c "echo hello >/dev/udp/$portal/5353" 2>/dev/null || true  # EPERM: dropped on the way out
    b1=$(blocked_out)
    ((b1 > b0)) || fail "the kill switch counted no blocked packet ($b0 -> $b1)"
    ! grep -q "tcp 8080\|udp 5353" "$work/portal.log" || fail "TCP 8080 or UDP 5353 reached the portal's host: $(cat "$work/portal.log")"
    # The user logs in on the portal's page; the hotel lets the gateway through.
    code=$(ip netns exec "$nsc" curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://$portal/login") || true
    [[ $code == 200 && -e $work/portal-login ]] || fail "the portal's login through the exception: $code"
    ip netns exec "$nsg" nft delete table inet hotel
    t0=$SECONDS
    wait_until 90 state_is connected || fail "not connected after the portal let go: $(status_json)"
    echo "RESULT captive: connected $((SECONDS - t0)) s after the portal's login"
    grep -q "the kill switch's exception is closed (a tunnel is being brought up)" "$work/espvpn.log" \
      || fail "the exception was not closed when the tunnel came up"
    ! nft_list | grep -A4 "set captive_tcp" | grep -q "elements" || fail "exception elements left: $(nft_list)"
    [[ $(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)') == "$logins0" ]] \
      || fail "a new login after the captive portal (the session should have been used again)"
    ping_lan || fail "no ping after the captive portal"
  else
    grep -q "for 3 s" "$work/espvpn.log" || wait_for "$work/espvpn.log" "for 3 s" 20 "$client_pid" \
      || fail "the exception is not the portal config's 3 s"
    wait_for "$work/espvpn.log" "the kill switch's exception is closed (its time is up)" 30 "$client_pid" \
      || fail "the broker did not close the exception at its deadline"
    rc=0; ip netns exec "$nsc" curl -s -o /dev/null --max-time 2 "http://$portal/" || rc=$?
    [[ $rc -eq 28 ]] || fail "HTTP to the portal passed after the exception closed (curl exit $rc)"
    state_is captive-portal || fail "not captive-portal after the exception closed: $(status_json)"
  fi
  kill -TERM "$client_pid"
  rc=0; wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM"
  ! nft_list >/dev/null || fail "the kill switch was left behind"
  ! ip netns exec "$nsc" ip rule | grep -q 0x65737076 || fail "the probe's policy rule was left behind"
  if [[ $mode == captive_deadline ]]; then
    ip netns exec "$nsc" curl -s -o /dev/null --max-time 5 "http://$portal:8080/" || true
    wait_for "$work/portal.log" "tcp 8080" 5 || fail "TCP 8080 to the portal's host is not reachable without espvpn (the check above proved nothing)"
  fi
  ;;
trusted)
  # The office: the trusted server ($lan_ip:8443, the pinned certificate) is on the corporate
  # LAN behind the gateway's namespace; in the office it is reached directly (the namespace
  # forwards the client's packets to the LAN), elsewhere only through the tunnel. The check
  # while connected must go around the tunnel: through it the server answers everywhere.
  ip -n "$nsc" route add default via $gw_ip
  ip -n "$nsc" -6 route add default via $gw_ip6  # dual stack: IPv6 route changes are notified even when unchanged
  away() {
    ip netns exec "$nsg" nft -f - <<NFT
table inet office {
  chain forward {
    type filter hook forward priority filter;
    iifname "${topo}gc" oifname "${topo}gl" drop
  }
}
NFT
  }
  office() { ip netns exec "$nsg" nft delete table inet office; }
  # What the laptop sees of a network change: a route on its own link comes or goes.
  net_change() { ip -n "$nsc" route "$1" 198.18.0.0/24 via $gw_ip; }
  touch "$work/tls.log"
  ip netns exec "$nsl" $py - $lan_ip 8443 "$repo/certs/server.pem" "$repo/certs/server-key.pem" "$work/tls.log" <<'PY' &
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[3], sys.argv[4])
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    conn, peer = srv.accept()
    conn.settimeout(5)
    try:
        with ctx.wrap_socket(conn, server_side=True):
            with open(sys.argv[5], "a") as log:
                log.write(f"handshake from {peer[0]}\n")
    except OSError:
        pass
PY
  pids+=("$!")
  wait_listening "$nsl" tcp 8443 10 || fail "the trusted server did not start"
  pin=pin-sha256:$(openssl x509 -in "$repo/certs/server.pem" -pubkey -noout | openssl pkey -pubin -outform der \
    | openssl dgst -sha256 -binary | base64)
  fake_routes=(--full-tunnel)
  # The portal's cookie is saved: the logins after the first need no person (stdin is spent).
  fake_extra=(--portal-cookie)
  gateway_https_up
  gateway_up aes-128-gcm --tun "$ht_dev" --state-file "$work/fake-state.json" "${fake_extra[@]}" || fail "fake gateway did not start"
  logins() { json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)'; }
  # 1. Started in the office: no tunnel.
  espvpn_up -v --timestamp --status-socket "$sock" --always-on --kill-switch --force-dpd 1 --trusted-server "$lan_ip:8443,$pin"
  wait_until 30 state_is trusted-network || fail "not trusted-network in the office: $(status_json)"
  [[ $(logins) == 0 ]] || fail "a login in the office"
  # 2. Leaving: a real tunnel, a ping through it.
  away
  net_change add
  t0=$(date +%s%N)
  wait_until 30 state_is connected || fail "not connected after leaving the office: $(status_json)"
  t_up=$((($(date +%s%N) - t0) / 1000000))
  ping_lan || fail "no ping through the tunnel after leaving the office"
  [[ $(status_json | json /dev/stdin 'd["transport"]') == ESP ]] || fail "not over ESP: $(status_json)"
  # 3. A network change away from the office: the server answers through the tunnel, but the
  # check goes around it, where the LAN is not reached: connected.
  h0=$(grep -c . "$work/tls.log" || true)
  n0=$(grep -c "staying connected" "$work/espvpn.log" || true)
  checked() { [[ $(grep -c "staying connected" "$work/espvpn.log" || true) -gt $n0 ]]; }
  net_change del
  wait_until 20 checked || fail "no check around the tunnel on a network change"
  # Each check rewrites the probe's route table: that is no network change (no check after it).
  sleep 1
  asked=$(grep -c "asking --trusted-server around the tunnel" "$work/espvpn.log" || true)
  answered=$(grep -c "staying connected" "$work/espvpn.log" || true)
  [[ $asked == "$answered" ]] || fail "checks without a network change ($asked asked, $answered answered)"
  grep -q "the host's network changed: untrusted network: $lan_ip:8443" "$work/espvpn.log" || fail "the verdict is not logged"
  state_is connected || fail "not connected after a check away from the office: $(status_json)"
  [[ $(grep -c . "$work/tls.log" || true) == "$h0" ]] || fail "the check reached the server (through the tunnel?)"
  ping_lan || fail "no ping after the check"
  # No way around the tunnel (the link went down and up, which flushed the probe's table, and
  # no default route came back): the check's connection, bound to the link, must not fall
  # back to the tunnel's routes, where the server answers.
  n0=$(grep -c "staying connected" "$work/espvpn.log" || true)
  ip -n "$nsc" route del default via $gw_ip
  ip -n "$nsc" link set "${topo}cg" down
  ip -n "$nsc" link set "${topo}cg" up
  ip -n "$nsc" addr replace $cl_ip6/64 dev "${topo}cg" nodad
  wait_until 20 checked || fail "no check after the link came back: $(grep 'network changed' "$work/espvpn.log" | tail -2)"
  ! grep -q "logging out (--always-on)" "$work/espvpn.log" || fail "trusted by the tunnel's own path"
  [[ $(grep -c . "$work/tls.log" || true) == "$h0" ]] || fail "the check made a handshake through the tunnel"
  ip -n "$nsc" route add default via $gw_ip
  wait_until 30 state_is connected || fail "not connected after the link came back: $(status_json)"
  ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null 2>&1 || fail "no kill switch while connected"
  # 4. Arriving at the office with the tunnel up: logged out, off, the kill switch gone.
  lo0=$(json "$work/fake-stats.json" 'd["logouts"]')
  office
  net_change add
  t0=$(date +%s%N)
  wait_until 30 state_is trusted-network || fail "not trusted-network after arriving with the tunnel up: $(status_json)"
  t_off=$((($(date +%s%N) - t0) / 1000000))
  grep -q "(asked around the tunnel): logging out (--always-on)" "$work/espvpn.log" || fail "the arrival is not logged"
  grep -q "handshake from $cl_ip" "$work/tls.log" || fail "the server was not asked from the client's own address"
  no_tun_left "$nsc" || fail "the tun device is still there on the trusted network"
  ! ip netns exec "$nsc" nft list table inet espvpn_kill_switch >/dev/null 2>&1 || fail "the kill switch stayed on the trusted network"
  ! ip netns exec "$nsc" ip rule | grep -q 0x65737076 || fail "the probe's policy rule stayed on the trusted network"
  [[ $(json "$work/fake-stats.json" 'd["logouts"]') -gt $lo0 ]] || fail "no logout at the gateway"
  kill -0 "$client_pid" || fail "espvpn exited on the trusted network"
  # 5. Leaving again: a new login (the saved portal cookie), the tunnel, a ping.
  away
  net_change del
  t0=$(date +%s%N)
  wait_until 30 state_is connected || fail "not connected after leaving again: $(status_json)"
  t_up2=$((($(date +%s%N) - t0) / 1000000))
  ping_lan || fail "no ping after leaving again"
  kill -TERM "$client_pid"
  rc=0; wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM"
  no_tun_left "$nsc" || fail "tun device left behind"
  echo "RESULT trusted: left the office: connected in $t_up ms; arrived with the tunnel up: trusted-network in $t_off ms; left again: connected in $t_up2 ms"
  ;;
trusted_anyconnect)
  # --trusted-domain with the project's AnyConnect gateway: the search domain from the client
  # namespace's own resolv.conf (ip netns exec mounts /etc/netns/NAME/resolv.conf; removed with
  # the topology).
  mkdir -p "/etc/netns/$nsc"
  echo "search corp.example" >"/etc/netns/$nsc/resolv.conf"
  gateway_anyconnect_up || fail "anyconnect-gateway did not start"
  echo test123 | ip netns exec "$nsc" "$espvpn" --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
    --passwd-on-stdin --status-socket "$sock" --always-on --trusted-domain corp.example --timestamp \
    "https://$gw_ip:4443/" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_until 30 state_is trusted-network || fail "AnyConnect: not trusted-network: $(status_json)"
  grep -q "trusted network: search domain corp.example matches --trusted-domain corp.example: no tunnel" \
    "$work/espvpn.log" || fail "the verdict is not logged"
  ! grep -q "login of" "$work/ac.out" "$work/ac.log" || fail "AnyConnect: a login on the trusted network"
  # Leaving: another search domain, a route change; a real tunnel (DTLS), a ping through it.
  echo "search cafe.example" >"/etc/netns/$nsc/resolv.conf"
  ip -n "$nsc" route add 198.18.0.0/24 via $gw_ip
  t0=$(date +%s%N)
  wait_until 30 state_is connected || fail "AnyConnect: not connected after leaving: $(status_json)"
  t_up=$((($(date +%s%N) - t0) / 1000000))
  wait_for "$work/espvpn.log" "data over DTLS" 20 "$client_pid" || fail "AnyConnect: no DTLS"
  status_json >"$work/status1.json"
  ping_lan 3 || fail "AnyConnect: no ping through the tunnel after leaving"
  status_json >"$work/status2.json"
  [[ $(json "$work/status2.json" 'd["bytes_in"] > '"$(json "$work/status1.json" 'd["bytes_in"]')") == True ]] \
    || fail "bytes did not grow with a ping: $(cat "$work/status1.json" "$work/status2.json")"
  grep -q "untrusted network: no search domain matches --trusted-domain (/etc/resolv.conf: cafe.example): connecting" \
    "$work/espvpn.log" || fail "leaving is not logged"
  kill -TERM "$client_pid"
  rc=0; wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGTERM"
  no_tun_left "$nsc" || fail "tun device left behind"
  echo "RESULT trusted_anyconnect: left the trusted network: connected $t_up ms after the route change"
  ;;
*) fail "unknown mode $mode" ;;
esac
gateway_down
echo PASS
