#!/usr/bin/env bash
# openconnect 9.01 and espvpn with the same command line for every option of
# `openconnect --help` (issue 17), in namespaces of their own:
#   client --veth-- gateway (fake-gp-gateway :4443 + esp-gateway, ocserv :4444, tinyproxy :8888)
#
#   compat_test.sh table ESPVPN_BIN ESP_GATEWAY_BIN
#     compat_table.py runs each row with both clients and writes the table; it must equal
#     docs/OPENCONNECT-COMPAT.md (ESPVPN_COMPAT_WRITE=1 rewrites that file instead).
#   compat_test.sh env ESPVPN_BIN ESP_GATEWAY_BIN
#     the vpnc-script environment at connect, espvpn vs openconnect 9.01, against the fake GP
#     gateway and against ocserv (tests/integration/host/compare_env.py; CISCO_CSTP_OPTIONS too)
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
mode=$1 espvpn=$2 gw_bin=$3
for tool in ocserv tinyproxy openconnect; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/compat-test.XXXXXX)
pids=()
# shellcheck source=../anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
oc_port=4444  # beside the fake GP gateway's 4443
trap ocserv_cleanup EXIT
trap 'exit 130' INT TERM
fail() {
  echo "FAIL: $*"
  local f
  for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
chmod 755 "$work"
topo_up
gateway_https_up
gateway_up aes-128-cbc:sha1 --tun "$ht_dev" --dns 10.202.0.53 --search corp.test --route 10.203.0.0/16 \
  --exclude 10.202.0.128/25 || fail "fake gateway did not start"
ocserv_up || fail "ocserv did not start"

case $mode in
table)
  {
    echo "User nobody"; echo "Group nogroup"; echo "Port 8888"; echo "Listen $gw_ip"; echo "Timeout 60"
    echo "LogFile \"$work/tinyproxy.log\""; echo "LogLevel Connect"; echo "MaxClients 20"; echo "Allow 10.201.0.0/24"
  } >"$work/tinyproxy.conf"
  : >"$work/tinyproxy.log"; chmod 666 "$work/tinyproxy.log"
  ip netns exec "$nsg" tinyproxy -d -c "$work/tinyproxy.conf" >"$work/tinyproxy.out" 2>&1 &
  pids+=($!)
  wait_listening "$nsg" tcp 8888 10 || fail "tinyproxy did not start"
  # What UDP reaches the servers (ESP to the esp-gateway, DTLS to ocserv): counted per row.
  ip netns exec "$nsg" nft -f - <<EOF
table inet compat {
  chain udp_in {
    type filter hook input priority 0;
    udp dport 4501 counter
    udp dport $oc_port counter
  }
}
EOF
  out=$work/OPENCONNECT-COMPAT.md
  $py "$here/compat_table.py" --espvpn "$espvpn" --ns "$nsc" --nsg "$nsg" --ac-port "$oc_port" --gp-url "https://$gw_ip:4443/" \
    --ac-url "https://$gw_ip:$oc_port/" --gw-ip "$gw_ip" --proxy "http://$gw_ip:8888/" --fake-log "$work/fake.log" \
    --proxy-log "$work/tinyproxy.log" --work "$work" --repo "$repo" --out "$out" \
    --record-env "$repo/tests/integration/host/record-env" --pin "$oc_pin" || fail "compat_table.py failed"
  if [[ -n ${ESPVPN_COMPAT_WRITE:-} ]]; then
    cp "$out" "$repo/docs/OPENCONNECT-COMPAT.md"
    echo "wrote docs/OPENCONNECT-COMPAT.md"
  elif ! diff -u "$repo/docs/OPENCONNECT-COMPAT.md" "$out"; then
    fail "docs/OPENCONNECT-COMPAT.md differs from what the clients do now (diff above); if the change is" \
         "intended, regenerate it: ESPVPN_COMPAT_WRITE=1 ctest --test-dir build -R compat_openconnect_table"
  fi
  ;;
env)
  # One connect per client and server; the helper stand-in records the environment.
  record_run() {  # NAME BIN ARGS... (password on stdin)
    local name=$1 bin=$2; shift 2
    local rec=$work/rec  # the same path for both clients: RECORD_DIR is compared too
    rm -rf "$rec"; mkdir -p "$rec"; chmod 1777 "$rec"
    echo "$password" | ip netns exec "$nsc" env RECORD_DIR="$rec" "$bin" "$@" \
      --script "$repo/tests/integration/host/record-env" >"$work/$name.out" 2>"$work/$name.log" &
    local pid=$! i
    pids+=("$pid")
    for ((i = 0; i < 300; i++)); do ls "$rec" | grep -q '\.connect$' && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    ls "$rec" | grep -q '\.connect$' || fail "$name: no connect call of the script"
    kill -INT "$pid"; wait "$pid" || true
    cp "$rec/$(ls "$rec" | grep '\.connect$' | head -1)" "$work/$name.connect.env"
  }
  password=secret
  gp=(--protocol=gp --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin)
  record_run espvpn-gp "$espvpn" "${gp[@]}" https://$gw_ip:4443/
  record_run openconnect-gp openconnect "${gp[@]}" https://$gw_ip:4443/
  echo "GlobalProtect (fake gateway), espvpn vs openconnect 9.01:"
  $py "$repo/tests/integration/host/compare_env.py" "$work/espvpn-gp.connect.env" "$work/openconnect-gp.connect.env" \
    || fail "GlobalProtect: the environments differ beyond the expected"
  password=$oc_password
  ac=(--protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser --passwd-on-stdin)
  record_run espvpn-ac "$espvpn" "${ac[@]}" https://$gw_ip:$oc_port/
  record_run openconnect-ac openconnect "${ac[@]}" https://$gw_ip:$oc_port/
  echo "AnyConnect (ocserv), espvpn vs openconnect 9.01:"
  $py "$repo/tests/integration/host/compare_env.py" --anyconnect "$work/espvpn-ac.connect.env" \
    "$work/openconnect-ac.connect.env" || fail "AnyConnect: the environments differ beyond the expected"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "PASS $mode"
