# Sourced by ac_ocserv.sh (after its setup and helpers) for the modes of one topic:
# reconnects and fallbacks: a TLS drop, DPD, the server gone or restarted, SIGUSR2 (also with new
# connections blocked), SIGINT during a blackholed attempt.
# Reconnect and rekey (src/session/anyconnect/tunnel.cpp; DTLS on):
#   reconnect_tls_drop: the client's TCP socket destroyed under it (ss -K; ocserv keeps the session):
#                 a new TLS connection + CONNECT with the same cookie, no second login on ocserv,
#                 attempt-reconnect + reconnect scripts, same address, ping, DTLS back
#   reconnect_dpd: TCP to ocserv dropped (DPD 2 s): CSTP DPD declares the server dead within
#                 ~2 x DPD, unblocked: reconnected with the same cookie, ping
#   reconnect_gone: ocserv killed for good, --reconnect-timeout 5: exit 1 naming the option, < 15 s
#   reconnect_cookie_refused: ocserv killed and restarted (sessions gone): the reconnect's
#                 CONNECT gets 401: exit 2
#   sigusr2:      SIGUSR2: a new connection with the same cookie, then traffic (ping, DTLS back)
#   blackhole_sigint: TCP to ocserv dropped in its namespace (no RST), the client's socket destroyed
#                 (ss -K): SIGINT while reconnect attempt 1 waits for a SYN answer: exit 0 within 3 s
#                 (the attempt cancelled, not timed out), tun gone, the resolv.conf stand-in restored
#   sigusr2_blocked: new TCP connections to ocserv dropped (SYNs; the established one passes), CSTP
#                 DPD every 2 s: SIGUSR2's new connection fails after the connect timeout: WARN, the
#                 old link carries on (ping during and after, CSTP DPD answered, no outage); rule
#                 removed: SIGUSR2 switches as before
# shellcheck shell=bash
case $mode in
reconnect_tls_drop)
  script_logging "$work/reasons"
  espvpn_up drop -u testuser --passwd-on-stdin --script "$work/script" \
    <<<"$oc_password"
  dtls_up drop
  ping_lan
  addr=$(ip -n "$nsc" -4 -o addr show dev "$(tun_name)" | awk '{print $4}')
  # traffic during the outage: the tun's packets are dropped and counted
  ip netns exec "$nsc" ping -c 15 -i 0.2 -W 1 "$lan_ip" >"$work/ping-outage.out" 2>&1 &
  ping_pid=$!; pids+=("$ping_pid")
  sleep 0.3
  ip netns exec "$nsc" ss -K dst "$gw_ip" dport = ":$oc_port" >"$work/ss-kill.out" 2>&1 || true
  grep -q "$gw_ip:$oc_port" "$work/ss-kill.out" || fail "ss -K closed no socket: $(cat "$work/ss-kill.out")"
  t0=$SECONDS
  wait_for "$work/drop.log" "reconnected to .* after" 20 || fail "no reconnect within 20 s of the TLS drop"
  echo "reconnected $((SECONDS - t0)) s after the TLS drop: $(grep -o 'outage [0-9]* ms' "$work/drop.log" | tail -1)"
  grep -q "connection to the server lost" "$work/drop.log" || fail "the loss was not logged"
  # the same ocserv session resumed by cookie: one session id in sec-mod's lines, one password check
  sessions=$(grep -o "(session: [^)]*)" "$work/ocserv.log" | sort -u | wc -l)
  [[ $sessions -eq 1 ]] || fail "ocserv shows $sessions sessions, expected the one resumed: $(grep 'session:' "$work/ocserv.log")"
  [[ $(grep -c "authentication to authenticate user" "$work/ocserv.log") -eq 1 ]] ||
    fail "ocserv ran a second password authentication: $(grep 'authenticate user' "$work/ocserv.log")"
  [[ $(grep -c "initiating session for user 'testuser'" "$work/ocserv.log") -eq 2 ]] ||
    fail "ocserv did not resume the session by cookie"
  ping_lan
  [[ $(ip -n "$nsc" -4 -o addr show dev "$(tun_name)" | awk '{print $4}') == "$addr" ]] || fail "the address changed"
  grep -qx attempt-reconnect "$work/reasons" || fail "no attempt-reconnect script run: $(tr '\n' ' ' <"$work/reasons")"
  for ((i = 0; i < 50; i++)); do grep -qx reconnect "$work/reasons" && break; sleep 0.1; done
  grep -qx reconnect "$work/reasons" || fail "no reconnect script run: $(tr '\n' ' ' <"$work/reasons")"
  for ((i = 0; i < 100; i++)); do [[ $(grep -c "data over DTLS" "$work/drop.log") -ge 2 ]] && break; sleep 0.2; done
  [[ $(grep -c "data over DTLS" "$work/drop.log") -ge 2 ]] || fail "DTLS did not come back after the reconnect"
  wait "$ping_pid" || true
  stats_check drop "d['reconnect']['reconnects'] == 1 and d['transport'] == 'dtls' and d['reconnect']['outage_drops'] > 0 \
    and d['drops'] >= d['reconnect']['outage_drops']" || fail "the stats do not show the reconnect and the packets dropped meanwhile"
  echo "stats: $(json "$work/drop.json" "d['reconnect']")"
  occtl_run show users >"$work/users.out"
  [[ $(grep -c testuser "$work/users.out") -eq 1 ]] || fail "ocserv does not list exactly one session: $(cat "$work/users.out")"
  espvpn_stop drop
  echo "PASS reconnect_tls_drop"
  ;;
reconnect_dpd)
  espvpn_up dpd -u testuser --passwd-on-stdin <<<"$oc_password"
  dtls_up dpd
  ping_lan
  ip netns exec "$nsc" nft add table inet acblock
  ip netns exec "$nsc" nft add chain inet acblock in "{ type filter hook input priority 0; }"
  ip netns exec "$nsc" nft add rule inet acblock in tcp sport $oc_port drop
  t0=$SECONDS
  wait_for "$work/dpd.log" "connection to the server lost: nothing received for" 12 || fail "CSTP DPD did not declare the server dead"
  echo "CSTP declared dead $((SECONDS - t0)) s after the block (DPD 2 s)"
  ip netns exec "$nsc" nft delete table inet acblock
  wait_for "$work/dpd.log" "reconnected to .* after" 15 || fail "no reconnect after the unblock"
  grep -o "after [0-9]* attempt(s); outage [0-9]* ms" "$work/dpd.log" | tail -1
  ping_lan
  espvpn_stop dpd
  echo "PASS reconnect_dpd"
  ;;
reconnect_gone|reconnect_cookie_refused)
  timeout_s=5; [[ $mode == reconnect_cookie_refused ]] && timeout_s=20  # time for ocserv to come back
  espvpn_up gone -u testuser --passwd-on-stdin --reconnect-timeout "$timeout_s" <<<"$oc_password"
  ping_lan
  ocserv_kill
  t0=$SECONDS
  if [[ $mode == reconnect_cookie_refused ]]; then
    ocserv_up || fail "ocserv did not start again"
  fi
  rc=0
  for ((i = 0; i < 150; i++)); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$client_pid" 2>/dev/null && fail "espvpn still running 15 s after ocserv went away"
  wait "$client_pid" || rc=$?
  echo "espvpn exited $rc after $((SECONDS - t0)) s: $(grep -m1 'giving up\|401\|rejected' "$work/gone.log" || true)"
  grep -q "connection to the server lost" "$work/gone.log" || fail "the loss was not logged"
  if [[ $mode == reconnect_gone ]]; then
    [[ $rc -eq 1 ]] || fail "exit $rc, expected 1"
    grep -q "giving up (--reconnect-timeout 5); last error: " "$work/gone.log" || fail "no message naming --reconnect-timeout"
  else
    [[ $rc -eq 2 ]] || fail "exit $rc for the refused cookie, expected 2"
    grep -q "401" "$work/gone.log" || fail "no 401 in the log"
  fi
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  echo "PASS $mode"
  ;;
sigusr2)
  script_logging "$work/reasons"
  espvpn_up usr2 -u testuser --passwd-on-stdin --script "$work/script" <<<"$oc_password"
  dtls_up usr2
  ping_lan
  kill -USR2 "$client_pid"
  wait_for "$work/usr2.log" "reconnected to .*(SIGUSR2)" 15 || fail "no reconnect after SIGUSR2"
  grep -o "(SIGUSR2) after .*" "$work/usr2.log" | head -1
  ping_lan
  for ((i = 0; i < 100; i++)); do [[ $(grep -c "data over DTLS" "$work/usr2.log") -ge 2 ]] && break; sleep 0.2; done
  [[ $(grep -c "data over DTLS" "$work/usr2.log") -ge 2 ]] || fail "DTLS did not come back after SIGUSR2"
  ping_lan
  for ((i = 0; i < 50; i++)); do grep -qx reconnect "$work/reasons" && break; sleep 0.1; done
  grep -qx reconnect "$work/reasons" || fail "no reconnect script run"
  espvpn_stop usr2
  echo "PASS sigusr2"
  ;;
blackhole_sigint)
  resolv_orig=$(cat "/etc/netns/$nsc/resolv.conf")
  espvpn_up bh -u testuser --passwd-on-stdin <<<"$oc_password"
  ping_lan
  grep -q "^nameserver $oc_server_tun" "/etc/netns/$nsc/resolv.conf" ||
    fail "the VPN DNS is not in the namespace's resolv.conf stand-in: $(cat "/etc/netns/$nsc/resolv.conf")"
  # ocserv's port goes silent (SYNs dropped, no RST), then the client's connection is destroyed under it.
  ip netns exec "$nsg" nft add table inet acbh
  ip netns exec "$nsg" nft add chain inet acbh in "{ type filter hook input priority 0; }"
  ip netns exec "$nsg" nft add rule inet acbh in tcp dport $oc_port drop
  ip netns exec "$nsc" ss -K dst "$gw_ip" dport = ":$oc_port" >"$work/ss-kill.out" 2>&1 || true
  wait_for "$work/bh.log" "reconnect attempt 1 (outage" 10 || fail "no reconnect attempt after the TLS drop"
  sleep 1  # well inside the attempt's TCP connect (10 s limit)
  grep -q "reconnect attempt 1 failed\|reconnected" "$work/bh.log" && fail "the attempt ended before the SIGINT"
  sigint_exit "$client_pid"
  echo "SIGINT during a blackholed reconnect attempt: exit $rc after $exit_ms ms ($(grep -o 'cancelled in [0-9]* ms' "$work/bh.log" || echo 'no cancel logged'))"
  ((exit_ms < 3000)) || fail "espvpn took $exit_ms ms to exit after SIGINT (limit 3000)"
  [[ $rc -eq 0 ]] || fail "exit $rc after SIGINT, expected 0"
  grep -q "connection attempt in progress .* cancelled" "$work/bh.log" || fail "the cancelled attempt is not logged"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  [[ $(cat "/etc/netns/$nsc/resolv.conf") == "$resolv_orig" ]] ||
    fail "the resolv.conf stand-in was not restored: $(cat "/etc/netns/$nsc/resolv.conf")"
  echo "PASS blackhole_sigint"
  ;;
sigusr2_blocked)
  # --force-dpd 2: a CSTP link that stopped answering would be declared dead within ~4 s.
  espvpn_up u2b -u testuser --passwd-on-stdin --force-dpd 2 <<<"$oc_password"
  dtls_up u2b
  ping_lan
  # New connections to ocserv dropped (their SYNs: a conntrack "ct state new" rule would also
  # catch the established connection, picked up mid-stream as new); it and DTLS pass.
  ip netns exec "$nsg" nft add table inet acnew
  ip netns exec "$nsg" nft add chain inet acnew in "{ type filter hook input priority 0; }"
  ip netns exec "$nsg" nft add rule inet acnew in "tcp dport $oc_port tcp flags & (syn | ack) == syn drop"
  ip netns exec "$nsc" ping -c 48 -i 0.25 -W 1 "$lan_ip" >"$work/ping-during.out" 2>&1 &
  ping_pid=$!; pids+=("$ping_pid")
  kill -USR2 "$client_pid"
  wait_for "$work/u2b.log" "SIGUSR2: no new connection\|connection to the server lost" 15 ||
    fail "no word about the failed new connection"
  ! grep -q "connection to the server lost" "$work/u2b.log" ||
    fail "the old link was dropped, an outage started: $(grep 'connection to the server lost' "$work/u2b.log")"
  grep -q "SIGUSR2: no new connection (.*); the current one carries on" "$work/u2b.log" ||
    fail "no WARN about the failed new connection"
  grep -o "SIGUSR2: no new connection.*" "$work/u2b.log"
  grep -q "warning: SIGUSR2: no new connection" "$work/u2b.log" || fail "the failure is not logged as a warning"
  rc=0; wait "$ping_pid" || rc=$?
  received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$work/ping-during.out")
  echo "ping across the failed attempt: ${received:-0} of 48 answered"
  ((${received:-0} >= 44)) || fail "the old link did not carry the ping across the failed attempt: $(tail -2 "$work/ping-during.out")"
  ping_lan
  kill -0 "$client_pid" 2>/dev/null || fail "espvpn exited"
  ! grep -q "connection to the server lost" "$work/u2b.log" || fail "an outage started: $(grep 'connection to the server lost' "$work/u2b.log")"
  dpd0=$(json "$work/u2b.json" "d['cstp']['tx_dpd_requests']")
  stats_check u2b "d['transport'] != 'none' and d['reconnect']['renewals'] == 0 and d['reconnect']['reconnects'] == 0 \
    and d['cstp']['tx_dpd_requests'] > $dpd0" || fail "the stats show a reconnect, no transport or no CSTP DPD sent"
  ip netns exec "$nsg" nft delete table inet acnew
  kill -USR2 "$client_pid"
  wait_for "$work/u2b.log" "reconnected to .*(SIGUSR2)" 15 || fail "no new connection after SIGUSR2 once unblocked"
  grep -o "(SIGUSR2) after .*" "$work/u2b.log" | head -1
  ping_lan
  espvpn_stop u2b
  echo "PASS sigusr2_blocked"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
