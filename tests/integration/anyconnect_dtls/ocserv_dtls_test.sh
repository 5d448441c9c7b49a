#!/usr/bin/env bash
# The DTLS channel against Debian's real ocserv (docs/protocols/anyconnect.md §11):
# openconnect --authenticate gets the webvpn cookie, then dtls-test-client makes
# a bare CONNECT and runs DtlsChannel + DtlsDatapath + tun; UDP traffic goes to
# ocserv's own tunnel address (192.168.99.1) and is echoed back, both ways over DTLS.
#   ocserv_dtls_test.sh MODE CLIENT CERTS PYTHON      MODE: psk | legacy | legacy-cbc
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
command -v ocserv >/dev/null && command -v openconnect >/dev/null || { echo "SKIP: no ocserv/openconnect"; exit 77; }
mode=$1 client=$2 certs=$3 python=${4:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
p=dtoc$$ nss=dtoc$$s nsc=dtoc$$c
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$nss" 2>/dev/null || true
  ip netns del "$nsc" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$nss"; ip netns add "$nsc"
ip link add "${p}s" netns "$nss" type veth peer name "${p}c" netns "$nsc"
ip -n "$nss" addr add 10.201.0.1/24 dev "${p}s"
ip -n "$nsc" addr add 10.201.0.2/24 dev "${p}c"
for ns in "$nss" "$nsc"; do ip -n "$ns" link set lo up; done
ip -n "$nss" link set "${p}s" up; ip -n "$nsc" link set "${p}c" up

printf 'test123\ntest123\n' | ocpasswd -c "$tmp/passwd" testuser
cat >"$tmp/ocserv.conf" <<CONF
auth = "plain[passwd=$tmp/passwd]"
listen-host = 10.201.0.1
tcp-port = 4443
udp-port = 4443
run-as-user = nobody
run-as-group = nogroup
socket-file = $tmp/ocserv-socket
server-cert = $certs/server.pem
server-key = $certs/server-key.pem
isolate-workers = false
max-clients = 4
max-same-clients = 2
keepalive = 300
dpd = 60
mobile-dpd = 1800
switch-to-tcp-timeout = 25
try-mtu-discovery = false
tls-priorities = "NORMAL:%SERVER_PRECEDENCE:%COMPAT:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1:-VERS-TLS1.3"
auth-timeout = 240
cookie-timeout = 300
rekey-time = 172800
rekey-method = ssl
use-occtl = false
pid-file = $tmp/ocserv.pid
log-level = 2
device = ${p}v
predictable-ips = true
ipv4-network = 192.168.99.0
ipv4-netmask = 255.255.255.0
cisco-client-compat = true
dtls-legacy = true
CONF
ip netns exec "$nss" ocserv -f -d 3 -c "$tmp/ocserv.conf" >"$tmp/ocserv.log" 2>&1 &
pids+=($!)
end=$((SECONDS + 30))  # a bound, not a pause: ocserv on a loaded machine may take seconds
while ((SECONDS < end)) && ! grep -q "listening (TCP)" "$tmp/ocserv.log" 2>/dev/null; do sleep 0.1; done

echo test123 | ip netns exec "$nsc" timeout 30 openconnect --authenticate -u testuser --passwd-on-stdin \
  --cafile "$certs/ca.pem" https://10.201.0.1:4443 >"$tmp/auth.env" 2>"$tmp/auth.log" ||
  { cat "$tmp/auth.log" "$tmp/ocserv.log"; echo "FAIL: openconnect --authenticate"; exit 1; }
# COOKIE='openconnect_strapkey=...; webvpn=VALUE' or COOKIE='VALUE'
cookie=$(sed -n "s/^COOKIE='\(.*\)'$/\1/p" "$tmp/auth.env")
cookie=${cookie##*webvpn=}
[[ -n $cookie ]] || { cat "$tmp/auth.env"; echo "FAIL: no cookie"; exit 1; }
printf '%s\n' "$cookie" >"$tmp/cookie"

ip netns exec "$nss" timeout 30 "$python" "$here/udp_reflector.py" 192.168.99.1 9999 20 >"$tmp/reflector.log" 2>&1 &
pids+=($!)
ip netns exec "$nsc" timeout 40 "$client" --ca "$certs/ca.pem" --ocserv 10.201.0.1:4443 --cookie-file "$tmp/cookie" \
  --mode "$mode" --tun dtlsoc0 --seconds 25 --stop-file "$tmp/stop" >"$tmp/client.log" 2>&1 &
client_pid=$!
pids+=($client_pid)
for _ in $(seq 150); do grep -q "TUNNEL UP" "$tmp/client.log" && break; sleep 0.1; done
for _ in $(seq 50); do grep -q "REFLECTOR READY" "$tmp/reflector.log" && break; sleep 0.1; done
addr=$(sed -n 's/^CONNECTED .*address=\([0-9.]*\)\/.*/\1/p' "$tmp/client.log")
echo_rc=0
ip netns exec "$nsc" timeout 20 "$python" "$here/udp_echo_check.py" "${addr:-0.0.0.0}" 192.168.99.1 1000 1000 0.7 9999 ||
  echo_rc=$?
touch "$tmp/stop"
client_rc=0; wait "$client_pid" || client_rc=$?
echo "--- client"; cat "$tmp/client.log"
echo "--- ocserv (DTLS lines)"; grep -iE "dtls|udp|psk|legacy|mtu" "$tmp/ocserv.log" | head -20 || true
if [[ $mode == psk ]]; then
  grep -q "setting up DTLS-PSK connection" "$tmp/ocserv.log" || { echo "FAIL: ocserv did not set up DTLS-PSK"; exit 1; }
else
  grep -q "setting up legacy DTLS" "$tmp/ocserv.log" || { echo "FAIL: ocserv did not set up legacy DTLS"; exit 1; }
fi
grep -q "DTLS handshake completed" "$tmp/ocserv.log" || { echo "FAIL: ocserv saw no DTLS handshake"; exit 1; }
if [[ $echo_rc -ne 0 || $client_rc -ne 0 ]]; then
  echo "FAIL ocserv $mode: echo=$echo_rc client=$client_rc"; exit 1
fi
echo "PASS ocserv $mode"
