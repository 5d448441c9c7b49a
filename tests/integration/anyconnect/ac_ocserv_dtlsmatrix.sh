# Sourced by ac_ocserv.sh (after its setup and helpers) for the modes of one topic: our DTLS 1.2
# records (crypto/dtls_record) against ocserv, every cipher.
#   dtls_ciphers:  for AES-128-GCM, AES-256-GCM, CHACHA20-POLY1305 (records by espvpn) and AES-128-CBC
#                  (records by GnuTLS), ocserv restarted with tls-priorities allowing only that cipher
#                  (its DTLS-PSK priority is built from it): occtl's "DTLS cipher" and espvpn's "DTLS up"
#                  line name it and the record owner, ping + iperf3 both ways (dtls_traffic: the data on
#                  DTLS, not CSTP); a cipher not negotiated fails
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
*) echo "unknown mode $mode"; exit 2 ;;
esac
