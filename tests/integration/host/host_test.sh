#!/usr/bin/env bash
# Host integration of espvpn, in namespaces of its own (tools/netns/gp-topology.sh):
#   client (espvpn / openconnect)  --veth--  gateway (fake-gp-gateway + esp-gateway)  --veth--  lan
#
#   host_test.sh gp MODE ESPVPN_BIN GATEWAY_BIN   (GlobalProtect against the fake gateway; below)
#   host_test.sh ac MODE ESPVPN_BIN               (AnyConnect against ocserv: background, scripts,
#                                                   dns, dns_resolved; host_ac.sh)
#   nm:         NetworkManager-openconnect's invocation (its argv, cookie on stdin, NM_*
#               variables, as user nobody on a pre-created persistent tun vpn0, --syslog)
#               with a stand-in helper recording its environment; root then configures
#               vpn0 as NM would and pings through it; SIGINT ends it within NM's 2 s.
#               The same with openconnect 9.01; the recorded environments are compared.
#   scripts:    SIGUSR2 while a UDP stream flows through the tunnel, with attempt-reconnect
#               and reconnect scripts that each sleep 2 s: largest gap < 50 ms (printed);
#               no second login POST; both reasons get the connect environment. The gap
#               is also printed inside/outside that window, to tell a stall from load.
#   sighup:     SIGHUP leaves the session valid: a second run with --cookie carries
#               traffic; after its SIGINT logout the same cookie is refused (exit 2).
#   background: -b --pid-file --setuid nobody: the parent exits 0 once the tunnel is up;
#               the daemon (pid in the file, VPNPID of every script) is the broker (root,
#               CAP_NET_ADMIN only, runs the scripts), its session process runs as nobody;
#               it still reconnects on SIGUSR2 and logs out on SIGINT.
#   background_ctrl_c: a terminal's Ctrl-C (a pseudo-terminal: ctrl_c_pty.py) at the password
#               prompt with -b and without: one line, exit 1 once every process has ended,
#               the terminal's echo back on, no login at the gateway.
#   dns:        built-in setup (no --script): DNS written to a private /etc/resolv.conf
#               (bind mount in a mount namespace) and restored at exit; the host's file
#               is never touched.
#               A split tunnel: says once that resolv.conf cannot send only the VPN's
#               domains to its servers.
#   dns_resolved: with a stand-in systemd-resolved on a private bus: the per-link D-Bus
#               calls (servers, domains, RevertLink at exit); resolv.conf untouched. Split
#               tunnel: the search domain, the plain include-split-tunneling-domain entry as
#               routing domain (not the "*." / ":port" one), DefaultRoute=no.
#   dns_resolved_full: the same in a full tunnel (--full-tunnel): "~." and DefaultRoute=yes
#               besides the search and routing domains.
#   dns_real_resolved: the full tunnel again with the real systemd-resolved (unpacked by
#               tools/install-deps) on the private bus, checked with resolvectl while up.
#   dns_real_resolved_wild: a split tunnel with the wildcard *.apps.test and the real
#               systemd-resolved: the link names espvpn's DNS forwarder, resolvectl query
#               a.apps.test gets the answer of the VPN's DNS (fake_dns.py on the lan host),
#               and its address is routed via the tun by then.
# shellcheck source=../proto_head.sh
. "$(dirname "$0")/../proto_head.sh" host-test "$@"
chmod 755 "$work"  # the unprivileged client reaches the helper's record directory below it
topo_up

# Extra configuration so the environment has DNS, domains, include and exclude routes.
fake_extra=(--dns 10.202.0.53 --dns6 fd00:202::53 --search corp.test --route 10.203.0.0/16
            --exclude 10.202.0.128/25)
url=https://$gw_ip:4443/
stat() { json "$work/fake-stats.json" "$1"; }
logins() { stat 'd["requests_by_path"].get("/ssl-vpn/login.esp", 0)'; }

# new_records NAME: an empty directory the (possibly unprivileged) script writes into.
new_records() { rec=$work/rec-$1; rm -rf "$rec"; mkdir -p "$rec"; chmod 1777 "$rec"; }
record() { ls "$rec" | grep -E "\.$1\$" | head -1; }  # first record of a reason
envvar() { tr '\0' '\n' <"$rec/$1" | sed -n "s/^$2=//p" | head -1; }

# resolved_up: a private system bus ($work/bus) with a stand-in systemd-resolved on it, which
# writes each call it gets to $work/resolved.jsonl.
resolved_up() {
  private_bus_up "$nsc"
  ip netns exec "$nsc" $py "$here/fake_resolved.py" "unix:path=$work/bus" "$work/resolved.jsonl" \
    "$work/resolved.ready" 120 >"$work/resolved.log" 2>&1 &
  pids+=("$!")
  wait_for "$work/resolved.ready" ready 15 || fail "the stand-in resolved did not start"
}
# real_resolved_up: the private bus and the real systemd-resolved (unpacked by tools/install-deps;
# skip without it) on it in the client namespace, as nobody with the capabilities it keeps when
# systemd starts it, in a mount namespace with its own /run/systemd and a resolved.conf without
# stub listener, LLMNR or mDNS; the host's files stay as they are. resolvectl talks to it.
resolved_bin=${ESPVPN_RESOLVED_DIR:-/opt/espvpn-test/systemd-resolved}
real_resolved_up() {
  [[ -x $resolved_bin/lib/systemd/systemd-resolved ]] || { echo "SKIP: no systemd-resolved in $resolved_bin (tools/install-deps)"; exit 77; }
  private_bus_up "$nsc"
  chmod 0666 "$work/bus"
  printf '[Resolve]\nDNSStubListener=no\nLLMNR=no\nMulticastDNS=no\n' >"$work/resolved.conf"
  ip netns exec "$nsc" unshare -m sh -c '
    mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; }
    mkdir -p /run/systemd/resolve && chown nobody /run/systemd/resolve
    mount --bind "$1" /etc/systemd/resolved.conf
    exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps=+setpcap,+net_raw,+net_bind_service \
      --ambient-caps=+setpcap,+net_raw,+net_bind_service env DBUS_SYSTEM_BUS_ADDRESS="$2" "$3"' \
    sh "$work/resolved.conf" "unix:path=$work/bus" "$resolved_bin/lib/systemd/systemd-resolved" \
    >"$work/resolved.log" 2>&1 &
  pids+=("$!")
  wait_until 10 resolvectl_run status >/dev/null 2>&1 || fail "systemd-resolved did not start: $(tail -5 "$work/resolved.log")"
}
# launch_on_bus: espvpn in the client namespace with $work/resolv.conf bind-mounted as its
# /etc/resolv.conf and the private bus ($work/bus) as its system bus; sets client_pid.
launch_on_bus() {
  echo secret | ip netns exec "$nsc" unshare -m sh -c \
    'mount --bind "$1" /etc/resolv.conf && shift && exec env DBUS_SYSTEM_BUS_ADDRESS="$1" "$@"' \
    sh "$work/resolv.conf" "unix:path=$work/bus" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin $url >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
}
resolvectl_run() { ip netns exec "$nsc" env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus" "$resolved_bin/usr/bin/resolvectl" "$@"; }
# resolved_check IFINDEX SERVERS DOMAINS [DEFAULT_ROUTE]: the calls were all for IFINDEX, with these
# servers and domains (JSON), SetLinkDefaultRoute DEFAULT_ROUTE (true/false, default false),
# RevertLink last; prints the methods in order.
resolved_check() { $py - "$work/resolved.jsonl" "$@" <<'PY'
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
idx, servers, domains = int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
default_route = json.loads(sys.argv[5]) if len(sys.argv) > 5 else False
by = {c["method"]: c for c in calls}
assert all(c["ifindex"] == idx for c in calls), calls
assert by["SetLinkDNS"]["servers"] == servers, by["SetLinkDNS"]
assert by["SetLinkDomains"]["domains"] == domains, by["SetLinkDomains"]
assert by["SetLinkDefaultRoute"]["enable"] is default_route, by["SetLinkDefaultRoute"]
assert calls[-1]["method"] == "RevertLink", calls
print(" ".join(c["method"] for c in calls))
PY
}

if [[ $proto == ac ]]; then
  # shellcheck source=host_ac.sh
  . "$here/host_ac.sh"
  exit 0
fi

# start_espvpn ARGS...: as root, password on stdin, log in $work/espvpn.log.
start_espvpn() {
  rm -f "$work/espvpn.log"
  echo secret | ip netns exec "$nsc" env RECORD_DIR="$rec" ${script_env[@]+"${script_env[@]}"} $chrt "$espvpn" \
    --protocol=gp --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin "$@" $url \
    >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
}
wait_connected() { wait_for "$work/espvpn.log" "${1:-ESP connected}" 30 || fail "espvpn did not bring ESP up"; }
stop_client() {  # SIGINT → exit 0
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
}
ping_lan() { ip netns exec "$nsc" ping -c "${1:-2}" -i 0.2 -W 2 $lan_ip >/dev/null; }
script_env=()
chrt=""

case $mode in
nm)
  gateway_up aes-128-cbc:sha1 "${fake_extra[@]}" || fail "fake gateway did not start"
  # One run as NetworkManager-openconnect 1.2.8 does it: secrets from an earlier
  # authentication (what its auth dialog returns), the service's argv and variables.
  nm_run() {  # NAME BINARY AUTH_ARGS...
    local name=$1 bin=$2; shift 2
    new_records nm  # the same path for both clients: RECORD_DIR is compared too
    local auth
    auth=$(echo secret | ip netns exec "$nsc" "$bin" --protocol=gp --authenticate --cafile "$repo/certs/ca.pem" \
      -u alice --passwd-on-stdin "$@" $url 2>"$work/$name-auth.log") || fail "$name --authenticate"
    local COOKIE CONNECT_URL FINGERPRINT
    eval "$(grep -E '^(COOKIE|CONNECT_URL|FINGERPRINT)=' <<<"$auth")"
    [[ -n $COOKIE && -n $FINGERPRINT ]] || fail "$name: no cookie/fingerprint from --authenticate"
    # The service's persistent tun, owned by its unprivileged user (TUNSETOWNER + TUNSETPERSIST).
    ip -n "$nsc" tuntap add dev vpn0 mode tun user nobody
    local t0 t1 rc=0
    printf '%s\n' "$COOKIE" | ip netns exec "$nsc" setpriv --reuid=nobody --regid=nogroup --clear-groups \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin RECORD_DIR="$rec" NM_VPN_LOG_LEVEL=5 NM_VPN_LOG_PREFIX_TOKEN=4711 \
      NM_DBUS_SERVICE_OPENCONNECT=org.freedesktop.NetworkManager.openconnect \
      "$bin" --protocol gp --servercert "$FINGERPRINT" --syslog --cookie-on-stdin \
      --script "$here/record-env" --interface vpn0 "$CONNECT_URL" --verbose \
      >"$work/$name.out" 2>"$work/$name.log" &
    client_pid=$!; pids+=("$client_pid")
    for ((i = 0; i < 300; i++)); do [[ -n $(record connect) ]] && break; sleep 0.1; done
    [[ -n $(record connect) ]] || fail "$name: no connect call of the helper"
    local uid
    uid=$(awk '/^Uid:/ {print $2 $3 $4 $5}' "/proc/$client_pid/status")
    [[ $uid == 65534655346553465534 ]] || fail "$name does not run as nobody (Uid: $uid)"
    # What NetworkManager does with the helper's report: address, link up, routes.
    local c=$rec/$(record connect)
    ip -n "$nsc" addr add "$(envvar "$(record connect)" INTERNAL_IP4_ADDRESS)/32" dev vpn0
    ip -n "$nsc" link set vpn0 up mtu "$(envvar "$(record connect)" INTERNAL_IP4_MTU)"
    ip -n "$nsc" route add 10.202.0.0/24 dev vpn0
    for ((i = 0; i < 20; i++)); do ping_lan 1 && break; sleep 0.5; done
    ping_lan 3 || fail "$name: no ping through vpn0 while running as nobody"
    t0=$(date +%s%N)
    kill -INT "$client_pid"
    wait "$client_pid" || rc=$?
    t1=$(date +%s%N)
    local ms=$(((t1 - t0) / 1000000))
    [[ $rc -eq 0 ]] || fail "$name exited $rc after SIGINT"
    # NetworkManager's contract for espvpn (it kills after 2 s); openconnect's exit time is
    # printed, not judged (a reference's speed on a loaded machine is not ours to fail on).
    [[ $name != espvpn || $ms -lt 2000 ]] || fail "$name took $ms ms after SIGINT (NetworkManager kills after 2 s)"
    [[ -n $(record disconnect) ]] || fail "$name: no disconnect call of the helper"
    ip -n "$nsc" link del vpn0
    echo "RESULT nm $name: unprivileged on vpn0, helper calls: $(ls "$rec" | sed 's/^[0-9]*\.//' | tr '\n' ' ')" \
         "ping ok, SIGINT -> exit 0 in $ms ms"
    cp "$c" "$work/$name.connect.env"
    mv "$rec" "$work/rec-$name"
  }
  nm_run espvpn "$espvpn"
  [[ $(logins) -eq 1 ]] || fail "espvpn: expected one login"
  for f in "$work"/rec-espvpn/*; do
    [[ $(tr '\0' '\n' <"$f" | sed -n 's/^RUN_AS_UID=//p') == 65534 ]] || fail "helper call $(basename "$f") not run as nobody"
  done
  # openconnect 9.01 logs in to this fake through the portal; --usergroup=gateway as
  # tools/bench-tunnel does, so it does not stop to ask which gateway.
  nm_run openconnect openconnect --usergroup=gateway
  echo "environment at connect, espvpn vs openconnect 9.01 (same fake gateway, same invocation):"
  $py "$here/compare_env.py" "$work/espvpn.connect.env" "$work/openconnect.connect.env" \
    || fail "the environments differ beyond the expected"
  ;;
scripts)
  # Real-time priority for client and stream (as the rekey test): load from other
  # work on a shared machine must not show up as gaps.
  chrt="chrt -f 20"
  gateway_up aes-128-gcm "${fake_extra[@]}" || fail "fake gateway did not start"
  new_records scripts
  script_env=(SCRIPT_SLEEP=${HOST_SCRIPT_SLEEP:-2} "SCRIPT_SLEEP_REASONS=attempt-reconnect reconnect")
  start_espvpn --script "$here/record-env && $repo/tools/netns/minimal-vpnc-script"
  wait_connected
  ip netns exec "$nsl" $chrt $py "$here/gap_recv.py" $lan_ip 5001 12 "$work/window.start" "$work/window.end" \
    >"$work/stream.out" &
  rpid=$!; pids+=("$rpid")
  wait_listening "$nsl" udp 5001 10 || fail "the stream receiver did not start"
  ip netns exec "$nsc" $chrt $py "$dp/udp_stream.py" send $lan_ip 5001 10 200 >/dev/null &
  spid=$!; pids+=("$spid")
  sleep 2
  date +%s.%N >"$work/window.start"
  kill -USR2 "$client_pid"
  wait_for "$work/espvpn.log" "SIGUSR2: reconnecting" 5 || fail "no reconnect on SIGUSR2"
  for ((i = 0; i < 100; i++)); do [[ -n $(record reconnect) ]] && break; sleep 0.1; done
  [[ -n $(record reconnect) ]] || fail "no reconnect script call after SIGUSR2"
  sleep 2.1  # the reconnect script's own 2 s
  date +%s.%N >"$work/window.end"
  wait "$spid" || true
  wait "$rpid" || true
  gap=$(sed -n 's/.*max_gap_ms=\([0-9.]*\).*/\1/p' "$work/stream.out")
  [[ -n $gap ]] || fail "no stream result: $(cat "$work/stream.out")"
  echo "RESULT scripts: attempt-reconnect + reconnect scripts sleeping 2 s each during SIGUSR2 reconnect;" \
       "$(cat "$work/stream.out")" "(window: SIGUSR2 to the end of the reconnect script)"
  $py -c "import sys; sys.exit(0 if float('$gap') < 50 else 1)" || fail "largest gap ${gap} ms >= 50 ms"
  [[ $(logins) -eq 1 ]] || fail "SIGUSR2 caused a second login POST ($(logins))"
  [[ $(stat 'd["getconfigs"]') -eq 2 ]] || fail "expected 2 getconfigs (connect + reconnect), got $(stat 'd["getconfigs"]')"
  # The contract: attempt-reconnect and reconnect get the connect environment, only reason differs.
  for r in attempt-reconnect reconnect; do
    diff <(tr '\0' '\n' <"$rec/$(record connect)" | grep -v '^reason=' | sort) \
         <(tr '\0' '\n' <"$rec/$(record $r)" | grep -v '^reason=' | sort) >"$work/env-$r.diff" \
      || fail "$r environment differs from connect: $(cat "$work/env-$r.diff")"
  done
  order=$(ls "$rec" | sed 's/^[0-9]*\.//' | tr '\n' ' ')
  [[ $order == "pre-init connect attempt-reconnect reconnect " ]] || fail "script order: $order"
  stop_client
  [[ -n $(record disconnect) ]] || fail "no disconnect script call"
  echo "RESULT scripts: one login POST, 2 getconfigs, reasons: $(ls "$rec" | sed 's/^[0-9]*\.//' | tr '\n' ' ')"
  ;;
sighup)
  gateway_up aes-128-gcm || fail "fake gateway did not start"
  new_records sighup
  start_espvpn --printcookie
  wait_connected
  kill -HUP "$client_pid"
  rc=0; wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGHUP"
  [[ $(stat 'd["logouts"]') -eq 0 ]] || fail "SIGHUP logged out"
  cookie=$(head -1 "$work/espvpn.out")
  [[ -n $cookie ]] || fail "no cookie printed"
  # A second run with the cookie: the gateway still accepts it. Its log starts empty: the
  # shell truncates it only once the background job runs, and wait_connected must not find
  # the first run's "ESP connected" in it meanwhile.
  rm -f "$work/espvpn.log"
  ip netns exec "$nsc" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" --cookie "$cookie" $url \
    >"$work/espvpn2.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_connected
  ping_lan 3 || fail "no ping with the reused cookie"
  [[ $(logins) -eq 1 ]] || fail "the cookie run logged in again"
  stop_client
  [[ $(stat 'd["logouts"]') -eq 1 ]] || fail "SIGINT did not log out"
  # The control: after a logout the same cookie is refused (openconnect's exit 2).
  rc=0
  timeout 30 ip netns exec "$nsc" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" --cookie "$cookie" $url \
    >"$work/espvpn3.out" 2>"$work/espvpn3.log" || rc=$?
  [[ $rc -eq 2 ]] || fail "a logged-out cookie gave exit $rc (expected 2)"
  echo "RESULT sighup: SIGHUP -> exit 0, no logout; cookie reused: ping ok, still 1 login;" \
       "after SIGINT logout the cookie is refused (exit 2)"
  ;;
background)
  gateway_up aes-128-gcm || fail "fake gateway did not start"
  new_records background
  rc=0
  echo secret | timeout 60 ip netns exec "$nsc" env RECORD_DIR="$rec" "$espvpn" --protocol=gp \
    --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin -b --pid-file "$work/espvpn.pid" --setuid nobody \
    --script "$here/record-env && $repo/tools/netns/minimal-vpnc-script" $url \
    >"$work/espvpn.out" 2>"$work/espvpn.log" || rc=$?
  [[ $rc -eq 0 ]] || fail "the foreground parent exited $rc"
  grep -q "ESP connected" "$work/espvpn.log" || fail "the parent returned before ESP was up"
  daemon=$(cat "$work/espvpn.pid")
  [[ -d /proc/$daemon ]] || fail "no daemon with the pid-file's pid $daemon"
  pids+=("$daemon")
  # The daemon is the broker (root, CAP_NET_ADMIN only); its session process runs as nobody.
  why=$(privsep_checked "$daemon") || fail "$why"
  session=$(session_of "$daemon")
  uid=$(awk '/^Uid:/ {print $2 $3 $4 $5}' "/proc/$session/status")
  [[ $uid == 65534655346553465534 ]] || fail "the session process does not run as nobody (Uid: $uid)"
  # Real, effective, saved and filesystem ids all dropped, and no capability left.
  gids=$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$session/status")
  for g in $gids; do [[ $g != 0 ]] || fail "the session process kept group id 0 (Gid: $gids)"; done
  [[ $(awk '/^CapEff:/ {print $2}' "/proc/$session/status") =~ ^0+$ ]] || fail "the session process kept capabilities ($(grep Cap "/proc/$session/status" | tr '\n' ' '))"
  [[ $(awk '/^CapPrm:/ {print $2}' "/proc/$session/status") =~ ^0+$ ]] || fail "the session process can regain capabilities (CapPrm)"
  [[ $(envvar "$(record connect)" VPNPID) == "$daemon" ]] || fail "VPNPID is not the daemon's pid"
  [[ $(envvar "$(record connect)" RUN_AS_UID) == 0 ]] || fail "connect script not run as root"
  ping_lan 3 || fail "no ping through the daemon's tunnel"
  kill -USR2 "$daemon"
  for ((i = 0; i < 100; i++)); do [[ -n $(record reconnect) ]] && break; sleep 0.1; done
  [[ -n $(record reconnect) ]] || fail "no reconnect after SIGUSR2 as nobody"
  [[ $(envvar "$(record reconnect)" RUN_AS_UID) == 0 ]] || fail "reconnect script not run by the broker (root)"
  [[ $(envvar "$(record reconnect)" VPNPID) == "$daemon" ]] || fail "VPNPID changed"
  ping_lan 3 || fail "no ping after the unprivileged reconnect"
  kill -INT "$daemon"
  for ((i = 0; i < 100; i++)); do [[ -d /proc/$daemon ]] || break; sleep 0.1; done
  [[ ! -d /proc/$daemon ]] || fail "the daemon did not exit on SIGINT"
  [[ $(stat 'd["logouts"]') -eq 1 ]] || fail "no logout from the daemon"
  [[ $(logins) -eq 1 ]] || fail "more than one login"
  echo "RESULT background: parent exit 0 after ESP up; daemon $daemon as nobody (Gid $gids, CapEff/CapPrm 0; scripts: connect uid 0," \
       "reconnect uid 65534, VPNPID=$daemon); SIGUSR2 reconnect + ping as nobody; SIGINT -> logout"
  ;;
background_ctrl_c)
  # A terminal's Ctrl-C at the password prompt, with -b and without: the SIGINT reaches every
  # process of the terminal's foreground group at once (the waiting command, the broker, the
  # session). One line says so, the command exits 1 once all of them have ended (the
  # terminal closed), the terminal's echo is back on, and nothing reached the gateway.
  gateway_up aes-128-gcm || fail "fake gateway did not start"
  for bg in -b ""; do
    got=$(ip netns exec "$nsc" $py "$here/ctrl_c_pty.py" "$work/tty.out" "Password:" "$espvpn" --protocol=gp \
      --cafile "$repo/certs/ca.pem" -u alice $bg --pid-file "$work/espvpn.pid" $url)
    tr -d '\r' <"$work/tty.out" >"$work/espvpn.log"
    [[ $got == $'exit 1\necho on' ]] || fail "${bg:-foreground}: the command's end after Ctrl-C: $got"
    [[ $(grep -c . "$work/espvpn.log") -gt 0 ]] || fail "${bg:-foreground}: no output"
    [[ $(grep -c "interrupted (SIGINT) before the tunnel was up" "$work/espvpn.log") -eq 1 ]] ||
      fail "${bg:-foreground}: not exactly one line about the Ctrl-C"
    ! grep -qiE "error|killed" "$work/espvpn.log" || fail "${bg:-foreground}: an error after Ctrl-C"
    [[ ! -e $work/espvpn.pid ]] || fail "${bg:-foreground}: the pid file was left behind"
  done
  [[ $(logins) -eq 0 ]] || fail "a login reached the gateway"
  echo "RESULT background_ctrl_c: Ctrl-C at the password prompt (-b and foreground): exit 1 after every process ended," \
       "one line, echo on, no login"
  ;;
dns)
  gateway_up aes-128-gcm "${fake_extra[@]}" || fail "fake gateway did not start"
  host_sum=$(sha256sum /etc/resolv.conf 2>/dev/null || echo none)
  printf 'nameserver 192.0.2.1\nsearch home.test\noptions edns0\n' >"$work/resolv.conf"
  cp "$work/resolv.conf" "$work/resolv.conf.orig"
  # A private /etc/resolv.conf: a bind mount in a mount namespace of the client's own;
  # no system bus there, so the resolv.conf method is used.
  echo secret | ip netns exec "$nsc" unshare -m sh -c \
    'mount --bind "$1" /etc/resolv.conf && shift && exec env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent "$@"' \
    sh "$work/resolv.conf" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin $url \
    >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_connected
  grep -q "^nameserver 10.202.0.53$" "$work/resolv.conf" || fail "VPN DNS not written: $(cat "$work/resolv.conf")"
  grep -q "^nameserver fd00:202::53$" "$work/resolv.conf" || fail "VPN IPv6 DNS not written"
  grep -q "^search corp.test home.test$" "$work/resolv.conf" || fail "search domains: $(cat "$work/resolv.conf")"
  ! grep -q "192.0.2.1" "$work/resolv.conf" || fail "the old nameserver was kept"
  [[ $(grep -c "resolv.conf cannot send only corp.test to the VPN" "$work/espvpn.log") -eq 1 ]] ||
    fail "no (or more than one) note that resolv.conf cannot split DNS: $(grep DNS "$work/espvpn.log")"
  written=$(grep -c . "$work/resolv.conf")
  ping_lan 2 || fail "no ping with the built-in setup"
  stop_client
  cmp -s "$work/resolv.conf" "$work/resolv.conf.orig" || fail "resolv.conf not restored: $(cat "$work/resolv.conf")"
  [[ $(sha256sum /etc/resolv.conf 2>/dev/null || echo none) == "$host_sum" ]] || fail "the host's resolv.conf changed"
  echo "RESULT dns: private resolv.conf rewritten ($written lines: VPN servers v4+v6, search corp.test first)," \
       "restored byte for byte on exit; host file untouched"
  ;;
dns_resolved|dns_resolved_full)
  # systemd-resolved present: a stand-in owning org.freedesktop.resolve1 on a private
  # bus (given to espvpn as the system bus) gets the per-link calls; resolv.conf (a
  # private bind mount again) stays as it was.
  domains=(--include-domain wiki.test --include-domain '*.apps.test:443')
  if [[ $mode == dns_resolved_full ]]; then
    gateway_up aes-128-gcm "${fake_extra[@]}" "${domains[@]}" --full-tunnel || fail "fake gateway did not start"
    want='[["corp.test", false], ["wiki.test", true], [".", true]]' default_route=true
  else
    gateway_up aes-128-gcm "${fake_extra[@]}" "${domains[@]}" || fail "fake gateway did not start"
    want='[["corp.test", false], ["wiki.test", true]]' default_route=false
  fi
  resolved_up
  printf 'nameserver 192.0.2.1\n' >"$work/resolv.conf"
  launch_on_bus
  wait_connected
  ifindex=$(ip netns exec "$nsc" cat /sys/class/net/"$(sed -n 's/.*tun device \([^ ]*\).*/\1/p' "$work/espvpn.log")"/ifindex)
  stop_client
  calls=$(resolved_check "$ifindex" '["10.202.0.53", "fd00:202::53"]' "$want" $default_route) ||
    fail "resolved calls: $(cat "$work/resolved.jsonl")"
  # The wildcard *.apps.test:443: in the split tunnel the link names espvpn's forwarder (the tun's
  # address, apps.test routed to it) while up, the VPN's servers again before the revert; in the full
  # tunnel no forwarder (its names take the tunnel anyway).
  $py - "$work/resolved.jsonl" "$mode" "$tun_ip" <<'PY' || fail "the forwarder on the link: $(cat "$work/resolved.jsonl")"
import json, sys
calls = [json.loads(l) for l in open(sys.argv[1])]
dns = [c["servers"] for c in calls if c["method"] == "SetLinkDNS"]
domains = [c["domains"] for c in calls if c["method"] == "SetLinkDomains"]
vpn = ["10.202.0.53", "fd00:202::53"]
if sys.argv[2] == "dns_resolved":
    assert dns == [vpn, [sys.argv[3]], vpn] and ["apps.test", True] in domains[1], calls
else:
    assert dns == [vpn], calls
PY
  [[ $(cat "$work/resolv.conf") == "nameserver 192.0.2.1" ]] || fail "resolv.conf was touched with resolved present"
  echo "RESULT $mode: D-Bus calls on link $ifindex: $calls; domains $want, DefaultRoute=$default_route;" \
       "resolv.conf untouched"
  ;;
dns_real_resolved)
  # The real systemd-resolved: a full tunnel whose gateway also names a search domain and an
  # include-split-tunneling-domain; while up, resolvectl shows the VPN's servers, the search
  # domain, ~wiki.test and ~. with DefaultRoute on the tun; after exit the tun is gone from it.
  gateway_up aes-128-gcm "${fake_extra[@]}" --include-domain wiki.test --include-domain '*.apps.test:443' \
    --full-tunnel || fail "fake gateway did not start"
  real_resolved_up
  printf 'nameserver 192.0.2.1\n' >"$work/resolv.conf"
  launch_on_bus
  wait_connected
  tun=$(sed -n 's/.*tun device \([^ ]*\).*/\1/p' "$work/espvpn.log")
  grep -q "systemd-resolved serves" "$work/espvpn.log" || fail "systemd-resolved not used: $(grep DNS "$work/espvpn.log")"
  resolvectl_run status "$tun" >"$work/resolvectl.txt" 2>&1 || fail "resolvectl status $tun: $(cat "$work/resolvectl.txt")"
  $py - "$work/resolvectl.txt" <<'PY' || fail "resolved's link settings: $(cat "$work/resolvectl.txt")"
import re, sys
text = open(sys.argv[1]).read()
def field(name):
    m = re.search(r"^\s*%s:\s*(.*(?:\n\s{10,}\S.*)*)" % name, text, re.M)
    return m.group(1).split() if m else []
assert "+DefaultRoute" in field("Protocols"), field("Protocols")
assert set(field("DNS Servers")) == {"10.202.0.53", "fd00:202::53"}, field("DNS Servers")
assert sorted(field("DNS Domain")) == sorted(["corp.test", "~wiki.test", "~."]), field("DNS Domain")
PY
  domains=$(sed -n 's/^ *DNS Domain: //p' "$work/resolvectl.txt")
  stop_client
  ! grep -q "RevertLink" "$work/espvpn.log" || fail "RevertLink refused: $(grep RevertLink "$work/espvpn.log")"
  grep -q "link settings reverted" "$work/espvpn.log" || fail "no revert logged"
  # The real resolved accepted RevertLink (no warning above); the tun is gone from it.
  ! resolvectl_run status "$tun" 2>&1 | grep -q "DNS Servers" || fail "resolved still has $tun's servers after exit"
  [[ $(cat "$work/resolv.conf") == "nameserver 192.0.2.1" ]] || fail "resolv.conf was touched with resolved present"
  echo "RESULT dns_real_resolved: systemd-resolved 252 on link $tun: DNS Domain $domains, +DefaultRoute;" \
       "reverted at exit; resolv.conf untouched"
  ;;
dns_real_resolved_wild)
  printf '{"a.apps.test": {"A": [["10.203.0.11", 60]]}}\n' >"$work/answers.json"
  ip netns exec "$nsl" $py "$here/fake_dns.py" $lan_ip 53 "$work/answers.json" "$work/dns.jsonl" "$work/dns.ready" 120 \
    >"$work/dns.out" 2>&1 &
  pids+=("$!")
  wait_for "$work/dns.ready" ready 10 || fail "the DNS server did not start"
  gateway_up aes-128-gcm --dns $lan_ip --include-domain '*.apps.test' || fail "fake gateway did not start"
  real_resolved_up
  printf 'nameserver 192.0.2.1\n' >"$work/resolv.conf"
  launch_on_bus
  wait_connected
  tun=$(sed -n 's/.*tun device \([^ ]*\).*/\1/p' "$work/espvpn.log")
  on_forwarder() { resolvectl_run status "$tun" 2>&1 | grep -Eq "DNS Servers: $tun_ip\$"; }
  wait_until 20 on_forwarder || fail "the link does not name the forwarder: $(resolvectl_run status "$tun" 2>&1)"
  got=$(timeout 60 ip netns exec "$nsc" env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus" \
    "$resolved_bin/usr/bin/resolvectl" query a.apps.test 2>&1) || fail "resolvectl query a.apps.test: $got"
  grep -q "a.apps.test: 10.203.0.11" <<<"$got" || fail "resolvectl query a.apps.test: $got"
  ip -n "$nsc" route show dev "$tun" | grep -q "^10.203.0.11 " || fail "a.apps.test's address not routed via $tun"
  stop_client
  ! resolvectl_run status "$tun" 2>&1 | grep -q "DNS Servers" || fail "resolved still has $tun's servers after exit"
  echo "RESULT dns_real_resolved_wild: systemd-resolved asked the forwarder on $tun_ip, a.apps.test routed via $tun"
  ;;
*) echo "usage: $0 gp nm|scripts|sighup|background|dns|dns_resolved|dns_resolved_full|dns_real_resolved|dns_real_resolved_wild ESPVPN GATEWAY" >&2; exit 2 ;;
esac
