# Sourced by ac_ocserv.sh (after its setup and helpers) for the modes of one topic:
# login, groups, wrong password, the CSTP tunnel (built-in setup and --script, full tunnel), server
# kill, throughput beside openconnect, client certificates.
#   login:        password login (--authenticate), COOKIE usable by espvpn --cookie (tunnel, ping)
#                 and by openconnect -C (tunnel up); logout invalidates it: exit 2 as openconnect
#   group:        select-group form: --authgroup by label prefix and by value, second init round
#   wrong_password: clear error, exit 1 (as openconnect), no cookie printed
#   tunnel:       full connect (built-in setup and --script), ping + iperf3 TCP both ways (2 s),
#                 SIGINT: BYE sent (ocserv closes the session), tun removed, exit 0
#   full_tunnel:  ocserv's "route = default" (and its no-route 10.202.0.128/25), the client namespace
#                 with a default route of its own: the built-in setup sends 198.51.100.7 and the lan
#                 through the tun, the server 10.201.0.1 and 10.202.0.130 not; ping; SIGINT: the
#                 route table is as before
#   server_kill:  occtl disconnect (data on DTLS): espvpn notices, tun removed, exit 1
#   compare:      CSTP throughput, espvpn vs openconnect 9.01, same ocserv, iperf3 TCP 2 s each way
# Client certificates (ocserv's ca-cert = certs/ca.pem, cert-user-oid = UID; certs/client.pem has UID testuser):
#   cert:         auth = "certificate": espvpn -c/-k --authenticate with stdin closed (no prompt) prints a
#                 cookie that connects (ping), the same with client.p12 -p; a full connect with -c/-k
#                 (ocserv names the user testuser from the certificate); client.p12 without -p: its pass
#                 phrase asked for (stdin), with --non-inter or at EOF exit 1 naming -p, a wrong one exit 1;
#                 openconnect 9.01 connects with the same certificate (ping)
#   cert_password: auth = "plain[...]" + auth = "certificate" (ocserv's "plain+certificate"): the
#                 certificate at TLS, then the username and password forms; tunnel, ping; openconnect
#                 the same; a wrong password still fails as such
#   cert_token:   auth = "certificate", the key and certificate on a SoftHSM2 token (pkcs11: URI): the PIN
#                 as pin-value, as -p, on stdin -> cookie; a wrong PIN -> exit 1, "the token refused the
#                 PIN", the PIN in no output; a full connect (ping); openconnect 9.01 with the same URI
#   cert_missing: both servers above, and certificate-only with cisco-client-compat = false (ocserv then
#                 drops the TLS handshake), no -c: exit 1 at once, the error says the server wants a client
#                 certificate and names -c; no cookie
#   cert_wrong:   the same three, a certificate from certs/rogue-ca.pem: exit 1, the error says the server
#                 refused the certificate (or that it is not from a CA the server names) and gives its subject
# shellcheck shell=bash
case $mode in
cert)
  client_cert=(-c "$repo/certs/client.pem" -k "$repo/certs/client-key.pem")
  p12=(-c "$repo/certs/client.p12" -p espvpn-p12)
  ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "${client_cert[@]}" "$url" </dev/null \
    >"$work/auth.out" 2>"$work/auth.log" || fail "espvpn --authenticate with -c/-k exited $?"
  grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the certificate login"
  ! grep -qi "password\|username" "$work/auth.log" || fail "a form was asked for in a certificate-only login"
  espvpn_up cookie -C "$(cookie_of)"
  ping_lan
  espvpn_stop cookie
  ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "${p12[@]}" "$url" </dev/null \
    >"$work/auth.out" 2>"$work/auth-p12.log" || fail "espvpn --authenticate with client.p12 -p exited $?"
  grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the PKCS#12 login"
  # without -p the pass phrase is asked for (here: a line of stdin), as openconnect asks
  echo espvpn-p12 | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -c "$repo/certs/client.p12" \
    "$url" >"$work/auth.out" 2>"$work/auth-ask.log" || fail "client.p12 with its password on stdin: exit $?"
  grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the PKCS#12 login with the asked password"
  for how in --non-inter ""; do
    rc=0
    ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -c "$repo/certs/client.p12" $how "$url" \
      </dev/null >"$work/auth.out" 2>"$work/auth-nop.log" || rc=$?
    [[ $rc -eq 1 ]] || fail "client.p12 without its password (${how:-stdin at EOF}) gave exit $rc"
    grep -q "client.p12 needs its password (-p/--key-password)" "$work/auth-nop.log" ||
      fail "no clear error for the PKCS#12 without a password (${how:-stdin at EOF})"
  done
  rc=0
  echo wrong | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -c "$repo/certs/client.p12" \
    "$url" >"$work/auth.out" 2>"$work/auth-wrongp.log" || rc=$?
  [[ $rc -eq 1 ]] && grep -q "client.p12 (PKCS#12; wrong password?)" "$work/auth-wrongp.log" ||
    fail "a wrong PKCS#12 password: exit $rc without a clear error"
  espvpn_up direct "${client_cert[@]}" </dev/null
  occtl_run show users >"$work/users.out"
  grep -q testuser "$work/users.out" || fail "ocserv does not list testuser (the certificate's UID)"
  ping_lan
  espvpn_stop direct
  # openconnect 9.01, the reference, with the same certificate and server
  ip netns exec "$nsc" timeout 30 openconnect --non-inter "${ca[@]}" "${p12[@]}" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" </dev/null >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not connect with the certificate"
  ping_lan
  kill -INT "$oc_client"; wait "$oc_client" || true
  echo "PASS cert"
  ;;
cert_password)
  client_cert=(-c "$repo/certs/client.pem" -k "$repo/certs/client-key.pem")
  authenticate testuser "${client_cert[@]}" || fail "certificate + password login exited $?"
  grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the certificate + password login"
  grep -q "Please enter your password" "$work/auth.log" || fail "no password form after the certificate"
  espvpn_up both "${client_cert[@]}" -u testuser --passwd-on-stdin <<<"$oc_password"
  ping_lan
  espvpn_stop both
  rc=0
  printf 'bad1\nbad2\nbad3\n' | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "${client_cert[@]}" \
    -u testuser --passwd-on-stdin "$url" >"$work/auth.out" 2>"$work/auth-bad.log" || rc=$?
  [[ $rc -eq 1 ]] && grep -q "rejected the credentials" "$work/auth-bad.log" ||
    fail "a wrong password with a good certificate gave exit $rc without the credentials error"
  echo "$oc_password" | ip netns exec "$nsc" timeout 30 openconnect --non-inter "${ca[@]}" "${client_cert[@]}" \
    -u testuser --passwd-on-stdin --no-dtls --script "$repo/tools/netns/minimal-vpnc-script" "$url" \
    >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not connect with certificate + password"
  ping_lan
  kill -INT "$oc_client"; wait "$oc_client" || true
  echo "PASS cert_password"
  ;;
cert_token)
  # The key and certificate on a SoftHSM2 token (tests/integration/pkcs11/make_softhsm_token.sh),
  # reached through p11-kit as on a user's machine; quiet tpm2-pkcs11 if it is installed too.
  pin=4711-right wrong=9999-wrong uri="pkcs11:token=espvpn-test;object=client"
  export TSS2_LOG=all+NONE TPM2_PKCS11_LOG_LEVEL=0 SOFTHSM2_CONF=$work/token/softhsm2.conf
  "$repo/tests/integration/pkcs11/make_softhsm_token.sh" "$work/token" "$pin" || fail "no SoftHSM2 token"
  no_pin() { ! grep -q -e "$pin" -e "$wrong" "$@" || fail "a PIN shows in $*"; }
  token_ok() {  # ARGS...: --authenticate with them logs in, no PIN in any output
    ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "$@" --non-inter -v "$url" </dev/null \
      >"$work/auth.out" 2>"$work/auth-token.log" || fail "token login ($*): exit $?"
    grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the token login"
    no_pin "$work/auth.out" "$work/auth-token.log"
  }
  token_ok -c "$uri?pin-value=$pin"
  token_ok -c "$uri" -p "$pin"
  # the PIN as a line of standard input (no PIN in the URI, stdin not a terminal), as openconnect
  echo "$pin" | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -c "$uri" "$url" \
    >"$work/auth.out" 2>"$work/auth-token.log" || fail "token login with the PIN on stdin: exit $?"
  grep -q "^COOKIE='webvpn=" "$work/auth.out" || fail "no cookie for the token login with the PIN on stdin"
  # a wrong PIN: exit 1, a clear error naming the URI without its PIN, no PIN in any output
  wrong_pin() {  # ARGS...
    local rc=0
    ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "$@" -vv "$url" </dev/null \
      >"$work/auth.out" 2>"$work/auth-wrongpin.log" || rc=$?
    [[ $rc -eq 1 ]] || fail "a wrong PIN: exit $rc, expected 1"
    grep -q "client certificate $uri: the token refused the PIN" "$work/auth-wrongpin.log" ||
      fail "a wrong PIN: no clear error"
    ! grep -q COOKIE "$work/auth.out" || fail "a wrong PIN: a cookie was printed"
    no_pin "$work/auth.out" "$work/auth-wrongpin.log"
  }
  wrong_pin -c "$uri?pin-value=$wrong"
  wrong_pin -c "$uri" -p "$wrong"
  grep "error:" "$work/auth-wrongpin.log" | sed 's/^/  /'
  # a full connect with the token (ocserv names the user from the certificate), ping
  espvpn_up token -c "$uri" -p "$pin" </dev/null
  occtl_run show users >"$work/users.out"
  grep -q testuser "$work/users.out" || fail "ocserv does not list testuser (the token certificate's UID)"
  ping_lan
  espvpn_stop token
  no_pin "$work/token.log" "$work/token.out"
  # openconnect 9.01, the reference, with the same URI
  ip netns exec "$nsc" timeout 30 openconnect --non-inter "${ca[@]}" -c "$uri?pin-value=$pin" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" </dev/null >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not connect with the token"
  ping_lan
  kill -INT "$oc_client"; wait "$oc_client" || true
  echo "PASS cert_token"
  ;;
cert_missing|cert_wrong)
  presented=(); [[ $mode == cert_wrong ]] && presented=(-c "$repo/certs/rogue-client.pem" -k "$repo/certs/rogue-client-key.pem")
  refused() {  # SERVER-KIND PATTERN: exit 1 within 10 s with an error matching PATTERN, no cookie
    local t0=$SECONDS rc=0
    echo "$oc_password" | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" "${presented[@]}" \
      -u testuser --passwd-on-stdin "$url" >"$work/auth.out" 2>"$work/auth-$1.log" || rc=$?
    [[ $rc -eq 1 ]] || fail "$mode ($1): exit $rc, expected 1"
    ((SECONDS - t0 < 10)) || fail "$mode ($1): took $((SECONDS - t0)) s"
    ! grep -q COOKIE "$work/auth.out" || fail "$mode ($1): a cookie was printed"
    grep -q "$2" "$work/auth-$1.log" || fail "$mode ($1): no clear error"
    grep "error:" "$work/auth-$1.log" | sed 's/^/  /'
  }
  oc_restart() { ocserv_down; ocserv_up "${oc_extra[@]}" "$@" || fail "ocserv did not restart"; }
  subject='"UID=testuser,CN=testuser,O=espvpn tests"'
  if [[ $mode == cert_missing ]]; then
    want="wants a client certificate; give one with -c/--certificate"
    want_tls="asked for a client certificate and none is configured: -c/--certificate"
  else
    want="refused the client certificate $subject"
    want_tls="asked for a client certificate; $subject is not from a CA it names"
  fi
  refused certificate "$want"
  # the same against certificate + password (ocserv refuses after the username form)
  oc_auth=("auth = \"plain[passwd=$work/oc/passwd]\"" 'auth = "certificate"')
  oc_restart
  refused plain+certificate "$want"
  # cisco-client-compat = false: ocserv requires the certificate in the TLS handshake and drops it
  oc_auth=('auth = "certificate"')
  oc_restart "cisco-client-compat = false" "dtls-legacy = false"
  refused certificate-at-tls "$want_tls"
  echo "PASS $mode"
  ;;
login)
  authenticate testuser || fail "espvpn --authenticate exited $?"
  for k in COOKIE HOST CONNECT_URL FINGERPRINT RESOLVE; do grep -q "^$k='" "$work/auth.out" || fail "no $k line"; done
  cookie=$(cookie_of)
  [[ $cookie == webvpn=* ]] || fail "cookie is not webvpn=...: ${cookie:0:10}"
  ! grep -q "$oc_password" "$work/auth.log" || fail "the password shows in the log"
  # espvpn --cookie (openconnect's composite form too), tunnel, ping; SIGHUP keeps the session
  espvpn_up cookie -C "openconnect_strapkey=AAAA; $cookie"
  ping_lan
  kill -HUP "$client_pid"; wait "$client_pid" || fail "espvpn exited $? after SIGHUP"
  # the same cookie with openconnect: tunnel up (then SIGINT logs it out)
  echo "$cookie" | ip netns exec "$nsc" timeout 30 openconnect --cookie-on-stdin "${ca[@]}" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not take espvpn's cookie"
  ping_lan
  kill -INT "$oc_client"; wait "$oc_client" || true
  # logged out: the cookie is dead now, exit 2 as openconnect
  rc=0
  ip netns exec "$nsc" timeout 30 "$espvpn" "${ca[@]}" --no-dtls -C "$cookie" "$url" >"$work/dead.out" \
    2>"$work/dead.log" || rc=$?
  [[ $rc -eq 2 ]] || fail "a logged-out cookie gave exit $rc, expected 2"
  grep -q "401" "$work/dead.log" || fail "no 401 reason in the log"
  # openconnect says the same about it
  rc=0
  echo "$cookie" | ip netns exec "$nsc" timeout 30 openconnect --cookie-on-stdin "${ca[@]}" --no-dtls "$url" \
    >"$work/oc-dead.out" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "openconnect gave exit $rc for the logged-out cookie"
  echo "PASS login"
  ;;
group)
  authenticate grpuser --authgroup first || fail "--authgroup first: exit $?"
  grep -q 'auth group "First Group" (group1)' "$work/auth.log" || fail "group1 not chosen by label prefix"
  authenticate grpuser --authgroup group2 || fail "--authgroup group2: exit $?"
  grep -q '(group2)' "$work/auth.log" || fail "group2 not chosen"
  espvpn_up grp -C "$(cookie_of)"
  ping_lan
  espvpn_stop grp
  rc=0; authenticate grpuser --authgroup nosuch || rc=$?
  [[ $rc -eq 1 ]] || fail "an unknown group gave exit $rc"
  grep -q 'not offered; the server offers \[First Group|group2\]' "$work/auth.log" || fail "no list of groups"
  echo "PASS group"
  ;;
wrong_password)
  rc=0
  printf 'bad1\nbad2\nbad3\n' | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u testuser \
    --passwd-on-stdin "$url" >"$work/auth.out" 2>"$work/auth.log" || rc=$?
  [[ $rc -eq 1 ]] || fail "wrong password gave exit $rc, expected 1 (as openconnect)"
  grep -q "rejected the credentials" "$work/auth.log" || fail "no clear error"
  ! grep -q COOKIE "$work/auth.out" || fail "a cookie was printed"
  rc=0
  echo bad1 | ip netns exec "$nsc" timeout 30 "$espvpn" --authenticate "${ca[@]}" -u testuser --passwd-on-stdin \
    "$url" >"$work/auth.out" 2>"$work/auth1.log" || rc=$?
  [[ $rc -eq 1 ]] || fail "one wrong password then EOF gave exit $rc"
  grep -q "rejected the credentials (Login failed.)" "$work/auth1.log" || fail "no clear error after EOF"
  echo "PASS wrong_password"
  ;;
tunnel)
  espvpn_up builtin -u testuser --passwd-on-stdin <<<"$oc_password"
  grep -q "handshakes" "$work/builtin.log" && grep "TLS handshake" "$work/builtin.log" | head -3 || true
  ping_lan
  iperf_mbps; up=$mbps; iperf_mbps -R; down=$mbps
  echo "espvpn CSTP (built-in setup): up $up Mbit/s, down $down Mbit/s"
  occtl_run show users >"$work/users.out"
  grep -q testuser "$work/users.out" || fail "ocserv does not list the session"
  espvpn_stop builtin
  # ocserv's worker ends the session after the BYE in its own time: wait for it (bounded).
  for ((i = 0; i < 100; i++)); do occtl_run show users >"$work/users.out"; grep -q testuser "$work/users.out" || break; sleep 0.1; done
  ! grep -q testuser "$work/users.out" || fail "ocserv still lists the session 10 s after the logout"
  espvpn_up script -u testuser --passwd-on-stdin --script "$repo/tools/netns/minimal-vpnc-script" <<<"$oc_password"
  ping_lan
  espvpn_stop script
  echo "PASS tunnel"
  ;;
full_tunnel)
  ip -n "$nsc" route add default via "$gw_ip"
  routes_before=$(ip -n "$nsc" route show)
  espvpn_up full -u testuser --passwd-on-stdin <<<"$oc_password"
  tun=$(ip -n "$nsc" -o link show type tun | awk -F': ' '{ print $2; exit }')
  via_tun() { ip -n "$nsc" route get "$1" | grep -q " dev $tun "; }
  for dst in "$lan_ip" 198.51.100.7; do via_tun "$dst" || fail "$dst not through $tun: $(ip -n "$nsc" route get "$dst")"; done
  for dst in "$gw_ip" 10.202.0.130; do ! via_tun "$dst" || fail "$dst through $tun, should not be"; done
  grep -qF "route 10.202.0.128/25 via $gw_ip dev ${topo}cg (excluded" "$work/full.log" || fail "the exclude not routed outside"
  ping_lan
  espvpn_stop full
  [[ $(ip -n "$nsc" route show) == "$routes_before" ]] || fail "routes changed: $(ip -n "$nsc" route show)"
  echo "PASS full_tunnel"
  ;;
server_kill)
  espvpn_up killed -u testuser --passwd-on-stdin <<<"$oc_password"
  dtls_up killed
  ping_lan
  id=$(occtl_run -j show users | json /dev/stdin 'd[0]["ID"]')
  occtl_run disconnect id "$id" >/dev/null
  rc=0
  for ((i = 0; i < 100; i++)); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$client_pid" 2>/dev/null && fail "espvpn still running 10 s after the server ended the session"
  wait "$client_pid" || rc=$?
  [[ $rc -eq 1 ]] || fail "exit $rc after the server ended the session, expected 1 (as openconnect)"
  grep -q "terminated by the server" "$work/killed.log" || fail "no reason logged"
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || fail "tun device left behind"
  echo "PASS server_kill"
  ;;
compare)
  espvpn_up cmp -u testuser --passwd-on-stdin <<<"$oc_password"
  iperf_mbps; e_up=$mbps; iperf_mbps -R; e_down=$mbps
  espvpn_stop cmp
  echo "$oc_password" | ip netns exec "$nsc" openconnect -u testuser --passwd-on-stdin "${ca[@]}" --no-dtls \
    --script "$repo/tools/netns/minimal-vpnc-script" "$url" >"$work/oc.out" 2>&1 &
  oc_client=$!; pids+=("$oc_client")
  wait_for "$work/oc.out" "Configured as\|CSTP connected" 20 || fail "openconnect did not connect"
  wait_route
  iperf_mbps; o_up=$mbps; iperf_mbps -R; o_down=$mbps
  kill -INT "$oc_client"; wait "$oc_client" || true
  echo "CSTP over TLS through ocserv 1.1.6, iperf3 TCP 2 s (Mbit/s):"
  echo "  espvpn      up $e_up  down $e_down"
  echo "  openconnect up $o_up  down $o_down"
  echo "PASS compare"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
