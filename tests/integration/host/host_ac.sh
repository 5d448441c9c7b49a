# Sourced by host_test.sh for `host_test.sh ac MODE ESPVPN`: host integration of espvpn
# --protocol=anyconnect against Debian's ocserv (ocserv pushes DNS 192.168.99.1, default domain and
# split DNS example.test, the lan route and the no-route 10.202.0.128/25).
#   background: -b --pid-file --setuid nobody -Q 64 --csd-wrapper (CTest ac_ocserv_process_control):
#               the parent exits 0 once the tunnel is up; the daemon (the pid file's pid, VPNPID of
#               the scripts) is the broker (root, CAP_NET_ADMIN only), its session process runs as
#               nobody with no capability; connect and SIGUSR2's reconnect scripts as root; ping before and after; the tun's txqueuelen is
#               64; ocserv asks for no CSD, so the wrapper never runs; SIGINT: BYE sent, tun gone
#   scripts:    the vpnc-script contract: pre-init, connect, SIGUSR2 (attempt-reconnect, reconnect),
#               disconnect in that order, attempt-reconnect and reconnect with the connect
#               environment (only reason differs), no second password login on ocserv
#   dns:        built-in setup: ocserv's DNS written to a private /etc/resolv.conf (bind mount in a
#               mount namespace), restored byte for byte at exit; the host's file untouched; ocserv's
#               split tunnel: one warning that resolv.conf cannot send only its domain to its server
#   dns_resolved: a stand-in systemd-resolved on a private bus gets the per-link calls (servers,
#               domains, RevertLink at exit); resolv.conf untouched. With a second split-dns
#               (lab.test): split tunnel → example.test searched, ~lab.test, DefaultRoute=no;
#   dns_resolved_full: the same with "route = default" (full tunnel) → also "~.", DefaultRoute=yes
# shellcheck shell=bash
case $mode in
dns_resolved) ocserv_up "split-dns = lab.test" || fail "ocserv did not start" ;;
dns_resolved_full) oc_routes=("route = default"); ocserv_up "split-dns = lab.test" || fail "ocserv did not start" ;;
*) ocserv_up || fail "ocserv did not start" ;;
esac
ping_lan() { wait_until 10 ip netns exec "$nsc" ping -c 1 -W 1 "$lan_ip" >/dev/null 2>&1; }
tun_name() { ip -n "$nsc" -o link show type tun | awk -F': ' '{print $2; exit}'; }
# start_espvpn [options...]: password on stdin, stats in $work/cl-stats.json, CSTP only (the host side
# does not depend on the data channel); returns once the stats say the tunnel is up.
start_espvpn() {
  rm -f "$work/espvpn.log" "$work/cl-stats.json"
  ip netns exec "$nsc" env RECORD_DIR="${rec:-}" "$espvpn" "${ca[@]}" --no-dtls -u testuser --passwd-on-stdin \
    --stats-json "$work/cl-stats.json" "$@" "$url" <<<"$oc_password" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  stats_wait "$work/cl-stats.json" "d['transport'] == 'cstp'" 30 || fail "espvpn did not bring the tunnel up"
}
stop_client() {  # SIGINT -> exit 0, tun gone
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  no_tun_left "$nsc" || fail "tun device left behind"
}
password_logins() { grep -c "authentication to authenticate user" "$work/ocserv.log" || true; }

case $mode in
background)
  chmod 0711 "$work"  # the scripts run as nobody after the drop
  mkdir -m 0777 "$work/rec"
  install -m 0666 /dev/null "$work/rec/reasons"  # appended to by root (connect) and nobody (reconnect)
  printf '#!/bin/sh\necho "$reason $(id -u) $VPNPID" >>%s\nexec %s\n' "$work/rec/reasons" \
    "$repo/tools/netns/minimal-vpnc-script" >"$work/script"
  printf '#!/bin/sh\ntouch %s\n' "$work/rec/csd-ran" >"$work/csd"
  chmod 0755 "$work/script" "$work/csd"
  rc=0
  echo "$oc_password" | timeout 60 ip netns exec "$nsc" "$espvpn" "${ca[@]}" --no-dtls -u testuser --passwd-on-stdin \
    -b --pid-file "$work/ac.pid" --setuid nobody -Q 64 --csd-wrapper "$work/csd" --script "$work/script" \
    --stats-json "$work/rec/stats.json" "$url" >"$work/pc.out" 2>"$work/pc.log" || rc=$?
  [[ $rc -eq 0 ]] || fail "the foreground parent exited $rc: $(tail -3 "$work/pc.log")"
  # The parent returns only once the tunnel is up: the daemon's connect script has run by then.
  grep -q "^connect " "$work/rec/reasons" || fail "the parent returned before the tunnel was up"
  daemon=$(cat "$work/ac.pid")
  [[ -d /proc/$daemon ]] || fail "no daemon with the pid file's pid $daemon"
  pids+=("$daemon")
  # The daemon is the broker (root, CAP_NET_ADMIN only); its session process runs as nobody.
  why=$(privsep_checked "$daemon") || fail "$why"
  session=$(session_of "$daemon")
  uid=$(awk '/^Uid:/ {print $2 $3 $4 $5}' "/proc/$session/status")
  [[ $uid == 65534655346553465534 ]] || fail "the session process does not run as nobody (Uid: $uid)"
  gids=$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$session/status")
  for g in $gids; do [[ $g != 0 ]] || fail "the session process kept group id 0 (Gid: $gids)"; done
  [[ $(awk '/^CapEff:/ {print $2}' "/proc/$session/status") =~ ^0+$ ]] || fail "the session process kept capabilities"
  [[ $(awk '/^CapPrm:/ {print $2}' "/proc/$session/status") =~ ^0+$ ]] || fail "the session process can regain capabilities"
  grep -qx "connect 0 $daemon" "$work/rec/reasons" || fail "connect script not run as root with VPNPID=$daemon: $(cat "$work/rec/reasons")"
  ping_lan || fail "no ping through the daemon's tunnel"
  qlen=$(ip -n "$nsc" -d link show "$(tun_name)" | grep -o 'qlen [0-9]*')
  [[ $qlen == "qlen 64" ]] || fail "-Q 64: the tun has $qlen"
  kill -USR2 "$daemon"
  stats_wait "$work/rec/stats.json" "d['reconnect']['renewals'] >= 1 and d['transport'] == 'cstp'" 20 ||
    fail "no new connection after SIGUSR2 as nobody"
  wait_until 10 grep -q "^reconnect " "$work/rec/reasons" || true
  grep -qx "reconnect 0 $daemon" "$work/rec/reasons" || fail "no reconnect script by the broker after SIGUSR2: $(cat "$work/rec/reasons")"
  ping_lan || fail "no ping after the unprivileged reconnect"
  kill -INT "$daemon"
  wait_until 10 test ! -d "/proc/$daemon" || fail "the daemon did not exit on SIGINT"
  grep -q "logout (DISCONNECT) sent" "$work/pc.log" || fail "no logout from the daemon"
  no_tun_left "$nsc" || fail "tun device left behind"
  [[ ! -e $work/rec/csd-ran ]] || fail "the CSD wrapper ran though ocserv asked for no host scan"
  [[ $(password_logins) -eq 1 ]] || fail "more than one password login on ocserv"
  echo "RESULT process_control: parent exit 0 after the tunnel came up; broker $daemon, session $session as nobody (Gid $gids); scripts:" \
       "$(tr '\n' ';' <"$work/rec/reasons")" "$qlen; CSD wrapper not run"
  echo "PASS process_control"
  ;;
scripts)
  new_records scripts
  start_espvpn --script "$here/record-env && $repo/tools/netns/minimal-vpnc-script"
  wait_until 10 test -n "$(record connect)" || fail "no connect script call"
  ping_lan || fail "no ping through the tunnel"
  kill -USR2 "$client_pid"
  stats_wait "$work/cl-stats.json" "d['reconnect']['renewals'] >= 1 and d['transport'] == 'cstp'" 20 ||
    fail "no new connection after SIGUSR2"
  wait_until 10 test -n "$(record reconnect)" || fail "no reconnect script call after SIGUSR2"
  ping_lan || fail "no ping after SIGUSR2"
  for r in attempt-reconnect reconnect; do
    [[ -n $(record $r) ]] || fail "no $r script call: $(ls "$rec")"
    diff <(tr '\0' '\n' <"$rec/$(record connect)" | grep -v '^reason=' | sort) \
         <(tr '\0' '\n' <"$rec/$(record $r)" | grep -v '^reason=' | sort) >"$work/env-$r.diff" \
      || fail "$r environment differs from connect: $(cat "$work/env-$r.diff")"
  done
  [[ $(envvar "$(record connect)" CISCO_DEF_DOMAIN) == example.test ]] || fail "CISCO_DEF_DOMAIN is not ocserv's default-domain"
  [[ $(envvar "$(record connect)" INTERNAL_IP4_DNS) == "$oc_server_tun" ]] || fail "INTERNAL_IP4_DNS is not ocserv's dns"
  [[ $(envvar "$(record connect)" VPNPID) == "$client_pid" ]] || fail "VPNPID is not espvpn's pid"
  stop_client
  [[ -n $(record disconnect) ]] || fail "no disconnect script call"
  order=$(ls "$rec" | sed 's/^[0-9]*\.//' | tr '\n' ' ')
  [[ $order == "pre-init connect attempt-reconnect reconnect disconnect " ]] || fail "script order: $order"
  [[ $(password_logins) -eq 1 ]] || fail "SIGUSR2 caused a second password login on ocserv"
  echo "RESULT scripts ac: reasons $order; attempt-reconnect + reconnect with the connect environment; one password login"
  ;;
dns)
  host_sum=$(sha256sum /etc/resolv.conf 2>/dev/null || echo none)
  printf 'nameserver 192.0.2.1\nsearch home.test\noptions edns0\n' >"$work/resolv.conf"
  cp "$work/resolv.conf" "$work/resolv.conf.orig"
  ip netns exec "$nsc" unshare -m sh -c \
    'mount --bind "$1" /etc/resolv.conf && shift && exec env DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent "$@"' \
    sh "$work/resolv.conf" "$espvpn" "${ca[@]}" --no-dtls -u testuser --passwd-on-stdin --stats-json "$work/cl-stats.json" \
    "$url" <<<"$oc_password" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  stats_wait "$work/cl-stats.json" "d['transport'] == 'cstp'" 30 || fail "espvpn did not bring the tunnel up"
  grep -q "^nameserver $oc_server_tun$" "$work/resolv.conf" || fail "VPN DNS not written: $(cat "$work/resolv.conf")"
  grep -q "^search .*example.test" "$work/resolv.conf" || fail "ocserv's domain not searched: $(cat "$work/resolv.conf")"
  ! grep -q "192.0.2.1" "$work/resolv.conf" || fail "the old nameserver was kept"
  [[ $(grep -c "resolv.conf cannot send only example.test to the VPN" "$work/espvpn.log") -eq 1 ]] ||
    fail "no (or more than one) note that resolv.conf cannot split DNS: $(grep DNS "$work/espvpn.log")"
  written=$(tr '\n' ';' <"$work/resolv.conf")
  ping_lan || fail "no ping with the built-in setup"
  stop_client
  cmp -s "$work/resolv.conf" "$work/resolv.conf.orig" || fail "resolv.conf not restored: $(cat "$work/resolv.conf")"
  [[ $(sha256sum /etc/resolv.conf 2>/dev/null || echo none) == "$host_sum" ]] || fail "the host's resolv.conf changed"
  echo "RESULT dns ac: private resolv.conf rewritten ($written), restored byte for byte on exit; host file untouched"
  ;;
dns_resolved|dns_resolved_full)
  if [[ $mode == dns_resolved_full ]]; then
    want='[["example.test", false], ["lab.test", true], [".", true]]' default_route=true
  else
    want='[["example.test", false], ["lab.test", true]]' default_route=false
  fi
  resolved_up
  printf 'nameserver 192.0.2.1\n' >"$work/resolv.conf"
  ip netns exec "$nsc" unshare -m sh -c \
    'mount --bind "$1" /etc/resolv.conf && shift && exec env DBUS_SYSTEM_BUS_ADDRESS="$1" "$@"' \
    sh "$work/resolv.conf" "unix:path=$work/bus" "$espvpn" "${ca[@]}" --no-dtls -u testuser --passwd-on-stdin \
    --stats-json "$work/cl-stats.json" "$url" <<<"$oc_password" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  stats_wait "$work/cl-stats.json" "d['transport'] == 'cstp'" 30 || fail "espvpn did not bring the tunnel up"
  ifindex=$(ip netns exec "$nsc" cat "/sys/class/net/$(tun_name)/ifindex")
  stop_client
  calls=$(resolved_check "$ifindex" '["192.168.99.1"]' "$want" $default_route) ||
    fail "resolved calls: $(cat "$work/resolved.jsonl")"
  [[ $(cat "$work/resolv.conf") == "nameserver 192.0.2.1" ]] || fail "resolv.conf was touched with resolved present"
  echo "RESULT $mode ac: D-Bus calls on link $ifindex: $calls; domains $want, DefaultRoute=$default_route;" \
       "resolv.conf untouched"
  ;;
*) echo "usage: host_test.sh ac background|scripts|dns|dns_resolved|dns_resolved_full ESPVPN" >&2; exit 2 ;;
esac
