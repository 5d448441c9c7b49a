#!/usr/bin/env bash
# The AnyConnect DTLS channel end to end in a private network namespace
# (loopback): dtls-test-client (TlsStream + PSK export + DtlsChannel +
# DtlsDatapath + tun) against dtls-test-server (GnuTLS directly), then UDP
# traffic through the tun, reflected by the server.
#   dtls_channel_test.sh CASE CLIENT SERVER CERTS PYTHON
# CASE: psk | psk_lost_hello | legacy_gcm | legacy_cbc | refusals
#   refusals: a wrong PSK, a legacy server that does a full handshake instead
#   of resuming, and a UDP black hole must each fail the handshake, with a
#   message saying so, within the handshake timeout (2 s here).
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
case_=$1 client=$2 server=$3 certs=$4 python=${5:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
ns=dtls$$
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up

# refusal SERVER_FLAG CLIENT_MODE MESSAGE_REGEX
refusal() {
  local log=$tmp/refusal.log
  # A fresh server log: the background job truncates it only when it runs, and the READY
  # wait below must not find the previous refusal's server line meanwhile.
  rm -f "$tmp/refusal-server.log"
  ip netns exec "$ns" timeout 20 "$server" --certs "$certs" --tls-port 4443 --udp-port 4443 --seconds 10 "$1" \
    >"$tmp/refusal-server.log" 2>&1 &
  local spid=$!
  pids+=($spid)
  local end=$((SECONDS + 20))
  while ((SECONDS < end)) && ! grep -q READY "$tmp/refusal-server.log"; do sleep 0.1; done
  local rc=0 start=$SECONDS
  ip netns exec "$ns" timeout 20 "$client" --ca "$certs/ca.pem" --tls-port 4443 --udp-port 4443 --tun dtlst0 \
    --address 10.77.0.1/24 --mode "$2" --handshake-timeout 2000 >"$log" 2>&1 || rc=$?
  kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true
  echo "--- $1: client rc=$rc after $((SECONDS - start)) s"; cat "$log"
  [[ $rc -eq 3 ]] && grep -Eq "HANDSHAKE FAILED .*$3" "$log" && ! grep -q "TUNNEL UP" "$log" ||
    { echo "FAIL refusal $1"; exit 1; }
  # The handshake's own time (the client's clock, from the DTLS start: no process start-up or
  # TLS in it): within the configured 2 s (a timeout: at it), told apart from the client's
  # default 8 s and the channel's 12 s that an ignored --handshake-timeout would give.
  local ms low=0
  ms=$(sed -n 's/^HANDSHAKE FAILED .* after \([0-9]*\) ms$/\1/p' "$log")
  grep -q "HANDSHAKE FAILED .*timed out" "$log" && low=1990
  [[ -n $ms ]] && ((ms >= low && ms < 6000)) || { echo "FAIL refusal $1: the handshake gave up after ${ms:-?} ms (2 s configured)"; exit 1; }
}
if [[ $case_ == refusals ]]; then
  refusal --wrong-psk psk "timed out after the server answered"
  refusal --full-handshake legacy "did not resume the agreed session"
  refusal --no-dtls psk "no answer from the server"
  echo "PASS refusals"
  exit 0
fi

server_args=() client_args=(--mode psk)
case $case_ in
  psk) ;;
  psk_lost_hello) server_args+=(--drop-first-hello) ;;
  legacy_gcm) client_args=(--mode legacy); server_args+=(--legacy-cipher OC-DTLS1_2-AES256-GCM) ;;
  legacy_cbc) client_args=(--mode legacy); server_args+=(--legacy-cipher AES256-SHA --drop-first-hello) ;;
  *) echo "unknown case $case_"; exit 2 ;;
esac

ip netns exec "$ns" timeout 40 "$server" --certs "$certs" --tls-port 4443 --udp-port 4443 --seconds 30 \
  "${server_args[@]}" >"$tmp/server.log" 2>&1 &
pids+=($!)
end=$((SECONDS + 20))
while ((SECONDS < end)) && ! grep -q READY "$tmp/server.log"; do sleep 0.1; done
ip netns exec "$ns" timeout 40 "$client" --ca "$certs/ca.pem" --tls-port 4443 --udp-port 4443 \
  --tun dtlst0 --address 10.77.0.1/24 --seconds 25 --stop-file "$tmp/stop" "${client_args[@]}" >"$tmp/client.log" 2>&1 &
client_pid=$!
pids+=($client_pid)
for _ in $(seq 150); do grep -q "TUNNEL UP" "$tmp/client.log" && break; sleep 0.1; done
echo_rc=0
if grep -q "TUNNEL UP" "$tmp/client.log"; then
  ip netns exec "$ns" timeout 20 "$python" "$here/udp_echo_check.py" 10.77.0.1 10.77.0.2 2000 1200 0.8 || echo_rc=$?
else
  echo_rc=1
fi
touch "$tmp/stop"
client_rc=0; wait "$client_pid" || client_rc=$?
server_rc=0; wait "${pids[0]}" || server_rc=$?
pids=()
echo "--- server"; cat "$tmp/server.log"
echo "--- client"; cat "$tmp/client.log"
if [[ $case_ == *lost_hello || $case_ == legacy_cbc ]]; then
  grep -q "same_port=1" "$tmp/server.log" || { echo "FAIL: no retransmission from the same port"; exit 1; }
fi
if [[ $echo_rc -ne 0 || $client_rc -ne 0 || $server_rc -ne 0 ]]; then
  echo "FAIL $case_: echo=$echo_rc client=$client_rc server=$server_rc"
  exit 1
fi
echo "PASS $case_"
