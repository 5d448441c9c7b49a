# Sourced by ac_ocserv.sh (after its setup and helpers) for the modes of one topic: our DTLS 1.2
# records (crypto/dtls_record) against ocserv, every cipher, and on an impaired wire.
#   dtls_ciphers:  for AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305 (records by espvpn) and AES-128-CBC
#                  (records by GnuTLS), ocserv restarted with tls-priorities allowing only that cipher
#                  (its DTLS-PSK priority is built from it): occtl's "DTLS cipher" and espvpn's "DTLS up"
#                  line name it and the record owner, ping + iperf3 both ways (dtls_traffic: the data on
#                  DTLS, not CSTP); a cipher not negotiated fails
#   dtls_impaired: the client's UDP to ocserv goes through dtls_impair_relay.py (nftables DNAT in the
#                  client namespace), which replays, delays (reorders) and corrupts (a flipped tag byte,
#                  then the genuine record) application-data records both ways and drops none; ocserv
#                  finds the session by its App-ID although the datagrams come from the relay's port.
#                  ping loses nothing and sees no DUP! (neither end passed a replay), iperf3 TCP both ways;
#                  espvpn's dtls rx drop_discarded is the relay's replays + corrupted copies towards it
#                  (less only what the kernel dropped), every other datagram opened; ocserv's log shows
#                  undecryptable records (at most the relay's corrupted ones); one DTLS session throughout
#   dtls_lost_answer: the same relay loses the server's second handshake datagram (the ServerHelloDone
#                  after the ServerHello) once: espvpn resends its ClientHello (a new record sequence
#                  number) while the answer is incomplete, ocserv answers it again, DTLS up at the first
#                  attempt well inside its 12 s timeout (faults_ac_netem's failure: GnuTLS's client took
#                  the ServerHello as the acknowledgement and stopped, ocserv answers only what it hears)
# shellcheck shell=bash
oc_base_prio="NORMAL:%SERVER_PRECEDENCE:%COMPAT:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1:-VERS-TLS1.3"

# on_dtls_only NAME: DTLS came up once and stayed: one handshake, one switch (CSTP -> DTLS), no fallback
on_dtls_only() {
  stats_check "$1" "d['transport'] == 'dtls' and d['transport_switches'] == 1 and d['dtls']['handshakes'] == 1" ||
    fail "$1: the tunnel left DTLS (or re-handshook) at some point"
  ! grep -q "data over CSTP, next DTLS attempt" "$work/$1.log" || fail "$1: espvpn fell back to CSTP"
  [[ $(grep -c "data over DTLS" "$work/$1.log") -eq 1 ]] || fail "$1: DTLS came up more than once"
}

case $mode in
dtls_ciphers)
  # cipher (GnuTLS priority name, as occtl and espvpn print it) and who seals/opens its records
  matrix=("AES-128-GCM espvpn" "AES-256-GCM espvpn" "CHACHA20-POLY1305 espvpn" "AES-128-CBC GnuTLS")
  results=()
  for entry in "${matrix[@]}"; do
    read -r cipher owner <<<"$entry"
    name=c-${cipher,,}
    ocserv_down
    ocserv_up "tls-priorities = \"$oc_base_prio:-CIPHER-ALL:+$cipher\"" || fail "ocserv did not start for $cipher"
    espvpn_up "$name" -u testuser --passwd-on-stdin <<<"$oc_password"
    dtls_up "$name"
    occtl_run -j show user testuser >"$work/$name-user.json"
    got=$(sed -n 's/.*"DTLS cipher": *"\([^"]*\)".*/\1/p' "$work/$name-user.json" | head -1)
    [[ $got == *"(PSK)"*"($cipher)"* ]] || fail "$cipher: ocserv's DTLS cipher is '$got'"
    up_line=$(grep -m1 "DTLS up" "$work/$name.log" || true)
    [[ $up_line == *"($cipher)"*", records by $owner"* ]] || fail "$cipher: espvpn's DTLS line is '$up_line'"
    stats_check "$name" "'($cipher)' in d['dtls']['session']" || fail "$cipher: --stats-json names another session"
    dtls_traffic "$name" psk
    on_dtls_only "$name"
    espvpn_stop "$name"
    results+=("$cipher: ocserv '$got', espvpn records by $owner, up $up down $down Mbit/s")
  done
  printf '  %s\n' "${results[@]}"
  echo "PASS dtls_ciphers"
  ;;
dtls_impaired|dtls_lost_answer)
  relay_port=40998 relay_src=40999
  lose=(); [[ $mode == dtls_lost_answer ]] && lose=(2)
  # Output DNAT in the client namespace: espvpn's UDP to ocserv goes to the relay (on the client's own
  # address); the relay's own socket (source port $relay_src) is left alone. Conntrack gives the
  # replies ocserv's address back, so espvpn's connected socket takes them.
  ip netns exec "$nsc" nft add table ip acimpair
  ip netns exec "$nsc" nft add chain ip acimpair out "{ type nat hook output priority -100; }"
  ip netns exec "$nsc" nft add rule ip acimpair out ip daddr "$gw_ip" udp dport "$oc_port" \
    udp sport != "$relay_src" dnat to "$cl_ip:$relay_port"
  ip netns exec "$nsc" $py "$here/dtls_impair_relay.py" "$cl_ip" "$relay_port" "$gw_ip" "$oc_port" "$relay_src" \
    "$work/relay.json" "${lose[@]}" >"$work/relay.out" 2>&1 &
  relay_pid=$!; pids+=("$relay_pid")
  wait_listening "$nsc" udp "$relay_port" 10 || fail "the relay did not start"
  if [[ $mode == dtls_lost_answer ]]; then
    espvpn_up lost -u testuser --passwd-on-stdin <<<"$oc_password"
    dtls_up lost
    on_dtls_only lost
    stats_check lost "d['dtls']['handshake_failures'] == 0" || fail "a DTLS handshake failed"
    up_ms=$(sed -n 's/.*DTLS up in \([0-9]*\) ms.*/\1/p' "$work/lost.log")
    [[ -n $up_ms && $up_ms -lt 12000 ]] || fail "DTLS up after ${up_ms:-?} ms (its handshake timeout is 12000)"
    json "$work/relay.json" "d['server_to_client']['lost'] == 1 and len(d['client_to_server']['client_hello_seqs']) >= 2
        and len(set(d['client_to_server']['client_hello_seqs'])) == len(d['client_to_server']['client_hello_seqs'])" |
      grep -qx True || fail "the relay did not see the lost answer and a resent ClientHello: $(cat "$work/relay.json")"
    espvpn_stop lost
    echo "RESULT dtls_lost_answer: the server's ServerHelloDone lost once: ClientHello resent (record sequence numbers" \
         "$(json "$work/relay.json" "d['client_to_server']['client_hello_seqs']")), DTLS up in $up_ms ms at the first attempt"
    echo "PASS dtls_lost_answer"
    exit 0
  fi
  espvpn_up imp -u testuser --passwd-on-stdin <<<"$oc_password"
  dtls_up imp
  # ocserv found the session by its App-ID although the datagrams come from the relay's port
  ip netns exec "$nsg" ss -Hun state established "dst $cl_ip" >"$work/ss-g.out" || true
  grep -q "$cl_ip:$relay_src\b" "$work/ss-g.out" || fail "ocserv's DTLS socket is not the relay's: $(cat "$work/ss-g.out")"
  occtl_run -j show user testuser >"$work/user.json"
  grep -q '"DTLS cipher": *"[^"]*PSK' "$work/user.json" || fail "ocserv shows no DTLS-PSK session"
  wait_route
  ip netns exec "$nsc" ping -c 40 -i 0.05 -W 2 "$lan_ip" >"$work/ping-imp.out" 2>&1 || true
  grep -q " 0% packet loss" "$work/ping-imp.out" || fail "ping lost packets through the relay (which drops none)"
  ! grep -q "DUP!" "$work/ping-imp.out" || fail "a replayed record was delivered (ping saw DUP!)"
  iperf_mbps; up=$mbps; iperf_mbps -R; down=$mbps
  echo "through the impairing relay: up $up Mbit/s, down $down Mbit/s"
  on_dtls_only imp
  kill -TERM "$relay_pid" 2>/dev/null || true
  wait "$relay_pid" 2>/dev/null || true
  # The relay is gone (relay.json is its last word): the first stats write after it holds espvpn's final
  # counts (written every second; bounded well inside DTLS's DPD of 10 s).
  for ((i = 0; i < 80; i++)); do [[ $work/imp.json -nt $work/relay.json ]] && break; sleep 0.1; done
  [[ $work/imp.json -nt $work/relay.json ]] || fail "espvpn wrote no stats after the relay stopped"
  echo "relay: $(cat "$work/relay.json")"
  cp "$work/imp.json" "$work/imp-final.json"
  echo "espvpn dtls rx: $(json "$work/imp-final.json" "{k: v for k, v in d['dtls']['datapath']['rx'].items() if v}")"
  # ocserv logs each record it could not decrypt (its GnuTLS drops replays without a word)
  oc_bad=$(grep -c "Discarded message.*invalid decryption" "$work/ocserv.log" || true)
  $py - "$work/relay.json" "$work/imp-final.json" "$oc_bad" <<'EOF' || fail "the relay's and espvpn's counts do not match"
import json, sys
r = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2])); oc_bad = int(sys.argv[3])
rx = e['dtls']['datapath']['rx']; tx = e['dtls']['datapath']['tx']
ok = True
def need(cond, what):
    global ok
    print(("  ok   " if cond else "  FAIL ") + what)
    ok = ok and cond
for d in ('client_to_server', 'server_to_client'):
    c = r[d]
    need(c['replayed'] > 0 and c['delayed'] > 0 and c['corrupted'] > 0 and c['reordered'] > 0,
         "%s: the relay replayed, delayed, reordered and corrupted records: %s" % (d, c))
s, c = r['server_to_client'], r['client_to_server']
# The relay's datagrams that are not application data (the handshake) do not reach espvpn's
# datapath counters; a datagram the kernel dropped on the way (socket full) is a copy espvpn
# never saw: both bounded, so the counts below must agree up to them.
hs = s['datagrams'] - s['app_records']
lost = s['sent'] - hs - rx['udp_datagrams']
need(0 <= lost <= 0.05 * s['sent'], "espvpn received %d datagrams of the relay's %d (%d handshake)"
     % (rx['udp_datagrams'], s['sent'], hs))
bad = s['replayed'] + s['corrupted']
need(bad - lost <= rx['drop_discarded'] <= bad + hs,
     "espvpn discarded %d datagrams; the relay sent it %d replays + %d corrupted"
     % (rx['drop_discarded'], s['replayed'], s['corrupted']))
need(rx['records'] + rx['drop_discarded'] == rx['udp_datagrams'] - rx['drop_truncated'],
     "espvpn opened %d records and discarded %d of %d datagrams" % (rx['records'], rx['drop_discarded'], rx['udp_datagrams']))
c_hs = c['datagrams'] - c['app_records']
need(0 <= c['datagrams'] - tx['udp_sent'] <= c_hs,
     "the relay got %d datagrams from espvpn (%d handshake), which sent %d" % (c['datagrams'], c_hs, tx['udp_sent']))
# ocserv's socket may overflow under iperf3 (its log then shows fewer): some, never more
need(0 < oc_bad <= c['corrupted'], "ocserv discarded %d records as undecryptable; the relay corrupted %d towards it"
     % (oc_bad, c['corrupted']))
sys.exit(0 if ok else 1)
EOF
  espvpn_stop imp
  echo "PASS dtls_impaired"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
