# Sourceable: the three-namespace GlobalProtect topology used by the end-to-end
# tests, the demo and the tunnel benchmark.
#   client  --veth 10.201.0.0/24--  gateway (fake-gp-gateway :4443, esp-gateway :4501)
#           --veth 10.202.0.0/24 + fd00:202::/64--  lan (ping / iperf3 target)
# The caller sets: repo, work (a temp dir), pids (array), and calls topo_up.
# 10.201.0.1 is in the test certificate's SANs, so clients verify it with certs/ca.pem.
py=/usr/bin/python3; [[ -x $py ]] || py=python3
gw_ip=10.201.0.1 cl_ip=10.201.0.2
tun_ip=10.200.0.2 tun_ip6=fd00:200::2 gw_addr=10.200.255.1 gw_addr6=fd00:200::ffff
lan_ip=10.202.0.2 lan_ip6=fd00:202::2
topo=gp$$
nsc=${topo}c nsg=${topo}g nsl=${topo}l

topo_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "$nsc" "$nsg" "$nsl"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}

topo_up() {
  for ns in "$nsc" "$nsg" "$nsl"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  ip link add "${topo}cg" netns "$nsc" type veth peer name "${topo}gc" netns "$nsg"
  ip link add "${topo}gl" netns "$nsg" type veth peer name "${topo}lg" netns "$nsl"
  ip -n "$nsc" addr add $cl_ip/24 dev "${topo}cg"; ip -n "$nsc" link set "${topo}cg" up
  ip -n "$nsg" addr add $gw_ip/24 dev "${topo}gc"; ip -n "$nsg" link set "${topo}gc" up
  ip -n "$nsg" addr add 10.202.0.1/24 dev "${topo}gl"; ip -n "$nsg" addr add fd00:202::1/64 dev "${topo}gl" nodad
  ip -n "$nsg" link set "${topo}gl" up
  ip -n "$nsl" addr add $lan_ip/24 dev "${topo}lg"; ip -n "$nsl" addr add $lan_ip6/64 dev "${topo}lg" nodad
  ip -n "$nsl" link set "${topo}lg" up
  ip -n "$nsl" route add default via 10.202.0.1
  ip -n "$nsl" -6 route add default via fd00:202::1
  ip netns exec "$nsg" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
}

json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
wait_for() {  # FILE PATTERN SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}

# gateway_up SUITE [fake options...]: fake GP gateway + userspace ESP gateway in the
# gateway namespace; sets fake_pid, gw_pid. SUITE none: no ESP, no esp-gateway (gw_pid
# empty), e.g. for the HTTPS tunnel (--tun).
gateway_up() {
  local suite=$1; shift
  local dp=$repo/tests/integration/datapath
  rm -f "$work"/gw-sa.env "$work"/gw-status "$work"/fake-stats.json "$work"/gw-stats.json "$work"/fake.ready
  ip netns exec "$nsg" $py "$repo/tools/fake-gp-gateway/fake-gp-gateway" --listen $gw_ip:4443 --esp "$suite" \
    --sa-file "$work/gw-sa.env" --sa-file-format env --sa-hook "$dp/wait_gateway_sa.sh $work/gw-status" \
    --ip $tun_ip --ip6 $tun_ip6 --gw-address $gw_addr --route 10.202.0.0/24 --route6 fd00:202::/64 \
    --ready-file "$work/fake.ready" --stats-file "$work/fake-stats.json" --log-file "$work/fake.log" \
    --max-runtime 900 "$@" >"$work/fake.out" 2>&1 &
  fake_pid=$!; pids+=("$fake_pid")
  gw_pid=
  [[ $suite == none ]] && { wait_for "$work/fake.ready" pid 15; return; }
  ip netns exec "$nsg" "$gw_bin" --sa-file "$work/gw-sa.env" --tun-address $gw_addr/32 \
    --tun-address $gw_addr6/128 --route $tun_ip/32 --route $tun_ip6/128 --udp-local $gw_ip:4501 \
    --status-file "$work/gw-status" --stats-json "$work/gw-stats.json" --stats-interval-ms 200 \
    --seconds 900 >"$work/gw.out" 2>&1 &
  gw_pid=$!; pids+=("$gw_pid")
  wait_for "$work/fake.ready" pid 15
}

# gateway_https_up: the HTTPS-tunnel side of the gateway namespace. fake-gp-gateway
# --tun $ht_dev attaches to this persistent tun while a tunnel is open, which gives it
# carrier; traffic to the client's tunnel addresses takes it then (table 201, routes
# with linkdown ignored), else the ESP gateway's routes in main. Replies from the
# gw-address (ESP probe answers) always stay on ESP.
ht_dev=${topo}ht
gateway_https_up() {
  ip -n "$nsg" tuntap add mode tun name "$ht_dev"
  ip -n "$nsg" link set "$ht_dev" up
  ip netns exec "$nsg" sysctl -qw "net.ipv4.conf.$ht_dev.ignore_routes_with_linkdown=1" \
    "net.ipv6.conf.$ht_dev.ignore_routes_with_linkdown=1"
  ip -n "$nsg" route add $tun_ip/32 dev "$ht_dev" table 201
  ip -n "$nsg" -6 route add $tun_ip6/128 dev "$ht_dev" table 201
  ip -n "$nsg" rule add from $gw_addr lookup main pref 200
  ip -n "$nsg" -6 rule add from $gw_addr6 lookup main pref 200
  ip -n "$nsg" rule add to $tun_ip lookup 201 pref 201
  ip -n "$nsg" -6 rule add to $tun_ip6 lookup 201 pref 201
}

gateway_down() {
  if [[ -n ${gw_pid:-} ]]; then kill -TERM "$gw_pid" 2>/dev/null || true; wait "$gw_pid" 2>/dev/null || true; fi
  kill -TERM "$fake_pid" 2>/dev/null || true
  wait "$fake_pid" 2>/dev/null || true
}
