# Sourceable: the three-namespace GlobalProtect topology used by the end-to-end
# tests, the demo and the tunnel benchmark.
#   client  --veth 10.201.0.0/24 + fd00:201::/64--  gateway (fake-gp-gateway :4443, esp-gateway :4501)
#           --veth 10.202.0.0/24 + fd00:202::/64--  lan (ping / iperf3 target)
# The caller sets: repo, work (a temp dir), pids (array), and calls topo_up; topo_cleanup (the
# EXIT trap) also removes the paths in cleanup_paths (array, optional).
# Two ESP peers for the gateway: gateway_up (userspace tools/esp-gateway, gw_bin) or,
# on a kernel with ESP, kernel_peer_prepare once + gateway_kernel_up (kernel xfrm).
# 10.201.0.1 and fd00:201::1 are in the test certificate's SANs, so clients verify them with
# certs/ca.pem. The gateway is reached at $gw_outer (URLs, listen addresses): 10.201.0.1, or
# [fd00:201::1] after outer_v6 (a gateway reachable over IPv6 only).
py=/usr/bin/python3; [[ -x $py ]] || py=python3
# shellcheck source=xfrm.sh
. "${BASH_SOURCE[0]%/*}/xfrm.sh"   # the kernel ESP peer's SA lines
gw_ip=10.201.0.1 cl_ip=10.201.0.2 gw_ip6=fd00:201::1 cl_ip6=fd00:201::2
gw_outer=$gw_ip
outer_v6() { gw_outer="[$gw_ip6]"; }
tun_ip=10.200.0.2 tun_ip6=fd00:200::2 gw_addr=10.200.255.1 gw_addr6=fd00:200::ffff
lan_ip=10.202.0.2 lan_ip6=fd00:202::2
topo=gp$$
nsc=${topo}c nsg=${topo}g nsl=${topo}l

topo_cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "$nsc" "$nsg" "$nsl"; do ip netns del "$ns" 2>/dev/null || true; done
  # ESPVPN_KEEP_LOGS=DIR keeps the test's logs (a copy of $work) for a look after the run.
  [[ -n ${ESPVPN_KEEP_LOGS:-} && -d $work ]] && mkdir -p "$ESPVPN_KEEP_LOGS" && cp -a "$work" "$ESPVPN_KEEP_LOGS/"
  rm -rf "/etc/netns/$nsc" "$work" ${cleanup_paths[@]+"${cleanup_paths[@]}"}
}

topo_up() {
  for ns in "$nsc" "$nsg" "$nsl"; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
  # No IPv6 DAD on the veths' link-local addresses either (the global ones are nodad): its
  # end, a second or so after link up, is an address change that programs watching netlink
  # act on — Chromium cancels its requests with ERR_NETWORK_CHANGED and never retries a
  # POST (an SSO form submit), which stalled the sso tests now and then.
  for ns in "$nsc" "$nsg" "$nsl"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
  done
  # `ip netns exec $nsc` binds /etc/netns/$nsc/resolv.conf over /etc/resolv.conf in a
  # mount namespace of its own: espvpn's built-in DNS setup rewrites this stand-in,
  # never the host's file.
  mkdir -p "/etc/netns/$nsc"
  printf 'nameserver 192.0.2.53\nsearch home.test\n' >"/etc/netns/$nsc/resolv.conf"
  ip link add "${topo}cg" netns "$nsc" type veth peer name "${topo}gc" netns "$nsg"
  ip link add "${topo}gl" netns "$nsg" type veth peer name "${topo}lg" netns "$nsl"
  ip -n "$nsc" addr add $cl_ip/24 dev "${topo}cg"; ip -n "$nsc" addr add $cl_ip6/64 dev "${topo}cg" nodad
  ip -n "$nsc" link set "${topo}cg" up
  ip -n "$nsg" addr add $gw_ip/24 dev "${topo}gc"; ip -n "$nsg" addr add $gw_ip6/64 dev "${topo}gc" nodad
  ip -n "$nsg" link set "${topo}gc" up
  ip -n "$nsg" addr add 10.202.0.1/24 dev "${topo}gl"; ip -n "$nsg" addr add fd00:202::1/64 dev "${topo}gl" nodad
  ip -n "$nsg" link set "${topo}gl" up
  ip -n "$nsl" addr add $lan_ip/24 dev "${topo}lg"; ip -n "$nsl" addr add $lan_ip6/64 dev "${topo}lg" nodad
  ip -n "$nsl" link set "${topo}lg" up
  ip -n "$nsl" route add default via 10.202.0.1
  ip -n "$nsl" -6 route add default via fd00:202::1
  ip netns exec "$nsg" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
}

json() { $py -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
wait_for() {  # FILE PATTERN SECONDS [PID: give up when it exits] (wall clock: execs are slow in a guest)
  local end=$((SECONDS + $3 + 1))
  while ((SECONDS < end)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    [[ -z ${4:-} ]] || kill -0 "$4" 2>/dev/null || return 1
    sleep ${wait_step:-0.1}
  done
  return 1
}
# wait_listening NS tcp|udp PORT SECONDS: until a socket in NS is bound to PORT (a server or
# receiver started in the background is ready only then; a fixed sleep races its start-up).
wait_listening() {
  local end=$((SECONDS + $4 + 1)) opt=-Hltn
  [[ $2 == udp ]] && opt=-Hlun
  while ((SECONDS < end)); do
    [[ -n $(ip netns exec "$1" ss $opt "sport = :$3" 2>/dev/null) ]] && return 0
    sleep 0.05
  done
  return 1
}
# stats_until FILE EXPR SECONDS: until the Python EXPR over d (a stats JSON file, rewritten
# periodically) is True; a read after a fixed sleep can see the file from before the event.
stats_until() {
  local end=$((SECONDS + $3 + 1))
  while ((SECONDS < end)); do
    [[ $(json "$1" "$2" 2>/dev/null) == True ]] && return 0
    sleep 0.2
  done
  return 1
}

# sigint_exit PID: SIGINT to PID (a child of this shell); sets exit_ms, how long it took to
# be gone (polled every 20 ms, for 3 s at most), and rc, its exit status once it has exited
# (awaited for 60 s more, then SIGKILL: rc 137).
sigint_exit() {
  local t0 t1 i
  t0=$(date +%s%N)
  kill -INT "$1"
  for ((i = 0; i < 150; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.02; done
  t1=$(date +%s%N)
  exit_ms=$(((t1 - t0) / 1000000))
  timeout 60 tail --pid="$1" -f /dev/null || kill -KILL "$1" 2>/dev/null || true
  rc=0
  wait "$1" || rc=$?
}

# What getconfig routes through the tunnel; a driver may replace it (e.g. with --full-tunnel).
fake_routes=(--route 10.202.0.0/24 --route6 fd00:202::/64)

# fake_up SUITE SA_HOOK [fake options...]: the fake GP portal + gateway in the gateway
# namespace, writing its keys to $work/gw-sa.env and running SA_HOOK after each
# getconfig; sets fake_pid. Returns once it listens (the caller waits for that). It listens on
# $fake_listen if set (behind tools/https-tunnel-gateway), else on $gw_outer:4443.
fake_up() {
  local suite=$1 hook=$2; shift 2
  rm -f "$work"/gw-sa.env "$work"/fake-stats.json "$work"/fake.ready
  ip netns exec "$nsg" $py "$repo/tools/fake-gp-gateway/fake-gp-gateway" --listen "${fake_listen:-$gw_outer:4443}" --esp "$suite" \
    --sa-file "$work/gw-sa.env" --sa-file-format env --sa-hook "$hook" \
    --ip $tun_ip --ip6 $tun_ip6 --gw-address $gw_addr "${fake_routes[@]}" \
    --ready-file "$work/fake.ready" --stats-file "$work/fake-stats.json" --log-file "$work/fake.log" \
    --max-runtime 900 "$@" >"$work/fake.out" 2>&1 &
  fake_pid=$!; pids+=("$fake_pid")
}

# gateway_up SUITE [fake options...]: fake GP gateway + userspace ESP gateway (on
# ${gw_esp_port:-4501}; the fake always announces 4501, so another port needs a relay; the array
# esp_gw_args, if set, adds esp-gateway options, e.g. --no-udp-offload) in the
# gateway namespace; sets fake_pid, gw_pid. SUITE none: no ESP, no esp-gateway (gw_pid
# empty), e.g. for the HTTPS tunnel (--tun).
gateway_up() {
  local suite=$1; shift
  local dp=$repo/tests/integration/datapath
  rm -f "$work"/gw-status "$work"/gw-stats.json
  fake_up "$suite" "$dp/wait_gateway_sa.sh $work/gw-status" "$@"
  gw_pid=
  [[ $suite == none ]] && { wait_for "$work/fake.ready" pid 15; return; }
  ip netns exec "$nsg" "$gw_bin" --sa-file "$work/gw-sa.env" --tun-address $gw_addr/32 \
    --tun-address $gw_addr6/128 --route $tun_ip/32 --route $tun_ip6/128 --udp-local "$gw_outer:${gw_esp_port:-4501}" \
    --status-file "$work/gw-status" --stats-json "$work/gw-stats.json" --stats-interval-ms 200 \
    --seconds 900 ${esp_gw_args[@]+"${esp_gw_args[@]}"} >"$work/gw.out" 2>&1 &
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

# gateway_native_https_up [fake options...]: the HTTPS tunnel's gateway end on the project's own
# TLS pump (tools/https-tunnel-gateway, $ht_bin; default beside $gw_bin's folder) on
# $gw_outer:4443, in front of the fake gateway on 127.0.0.1:4444: the login is relayed to the
# fake, which also checks the tunnel GET (--tunnel-external), the frames are the native end's,
# to and from its own tun ${topo}ht (routes to the client's tunnel addresses). Sets fake_pid and
# ht_pid (gateway_down stops both); its counters go to $work/ht-stats.json when a tunnel ends.
gateway_native_https_up() {
  local bin=${ht_bin:-${gw_bin%/*/*}/https-tunnel-gateway/https-tunnel-gateway} i
  # The portal names the gateway as clients reach it (this end), not the fake's listener.
  echo "{\"portal\": {\"gateways\": [{\"name\": \"$gw_outer:4443\", \"priority\": 1}]}}" >"$work/ht-fake.json"
  fake_listen=127.0.0.1:4444 gateway_up none --tunnel-external --config "$work/ht-fake.json" "$@" || return 1
  rm -f "$work/ht.out" "$work/ht-stats.json"
  ip netns exec "$nsg" "$bin" --listen "$gw_outer:4443" --backend 127.0.0.1:4444 --backend-ca "$repo/certs/ca.pem" \
    --cert "$repo/certs/server.pem" --key "$repo/certs/server-key.pem" --tun-name ${topo}ht --route $tun_ip/32 \
    --route $tun_ip6/128 --mtu ${mtu:-1400} --stats-json "$work/ht-stats.json" >"$work/ht.out" 2>"$work/ht.log" &
  ht_pid=$!; pids+=("$ht_pid")
  for ((i = 0; i < 200; i++)); do grep -q '^ready' "$work/ht.out" 2>/dev/null && return 0; sleep 0.05; done
  echo "https-tunnel-gateway did not start: $(tail -1 "$work/ht.log")" >&2
  return 1
}

# gateway_anyconnect_up [anyconnect-gateway options...]: the project's AnyConnect gateway
# (tools/https-tunnel-gateway/anyconnect.cpp) on $gw_outer:4443, TCP (CSTP) and UDP (DTLS),
# user testuser / test123, handing out $tun_ip and $tun_ip6 with the lan's prefixes as split
# routes; its counters go to $work/ac-stats.json when a tunnel ends. Sets ac_pid.
gateway_anyconnect_up() {
  local bin=${ac_bin:-${gw_bin%/*/*}/https-tunnel-gateway/anyconnect-gateway} i
  rm -f "$work/ac.out" "$work/ac-stats.json"
  ip netns exec "$nsg" "$bin" --listen "$gw_outer:4443" --cert "$repo/certs/server.pem" \
    --key "$repo/certs/server-key.pem" --tun-name ${topo}ac --route $tun_ip/32 --route $tun_ip6/128 \
    --client-ip $tun_ip --client-ip6 $tun_ip6/64 --split 10.202.0.0/255.255.255.0 --split6 fd00:202::/64 \
    --stats-json "$work/ac-stats.json" "$@" >"$work/ac.out" 2>"$work/ac.log" &
  ac_pid=$!; pids+=("$ac_pid")
  for ((i = 0; i < 200; i++)); do grep -q '^ready' "$work/ac.out" 2>/dev/null && return 0; sleep 0.05; done
  echo "anyconnect-gateway did not start: $(tail -1 "$work/ac.log")" >&2
  return 1
}

# carrier NS DEV yes|no SECONDS: until DEV in NS has carrier (a process holds the tun, e.g.
# fake-gp-gateway --tun while an HTTPS tunnel is open) or has none (it let go: the routes via
# DEV are then ignored, so replies take the ESP gateway again).
carrier() {
  local end=$((SECONDS + $4 + 1)) up
  while ((SECONDS < end)); do
    up=yes; ip -n "$1" -o link show dev "$2" 2>/dev/null | grep -q NO-CARRIER && up=no
    [[ $up == "$3" ]] && return 0
    sleep 0.05
  done
  return 1
}

gateway_down() {
  local pid
  for pid in ${gw_pid:-} ${fake_pid:-} ${ht_pid:-} ${ac_pid:-}; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in ${gw_pid:-} ${fake_pid:-} ${ht_pid:-} ${ac_pid:-}; do wait "$pid" 2>/dev/null || true; done
  gw_pid= fake_pid= ht_pid= ac_pid=
}

# --- Kernel ESP peer: the gateway namespace's own kernel xfrm is the ESP end ---------
# kernel_peer_prepare: once after topo_up. The gateway owns gw_addr (the GP probe's
# target) and routes the client's tunnel addresses towards it (the xfrm policies
# then encrypt); an ESP-in-UDP encap socket on 4501 lets the kernel see the ESP.
# The kernel's s2c SA must name the client's UDP port, which espvpn picks only when
# the tunnel starts (a real gateway learns it from a NAT-T mapping; espvpn gives up
# after 10 s of unanswered probes, too short to learn it here under emulation): a
# NAT in the client namespace maps espvpn's ESP source port to 4501, as a home
# router would, so the SAs can say 4501 from the start.
kernel_peer_prepare() {
  ip netns exec "$nsc" nft -f - <<NFT || return 1
table ip gp_kernel_peer_nat {
  chain post { type nat hook postrouting priority srcnat; ip daddr $gw_ip udp dport 4501 snat to $cl_ip:4501; }
}
NFT
  # A finished client's mapping would hold 4501 (and push the next client's to another
  # port) for the default 30/120 s: let idle UDP mappings expire after 5 s.
  ip netns exec "$nsc" sysctl -qw net.netfilter.nf_conntrack_udp_timeout=3 \
    net.netfilter.nf_conntrack_udp_timeout_stream=5 || return 1
  ip -n "$nsg" -batch - <<EOT || return 1
addr add $gw_addr/32 dev lo
addr add $gw_addr6/128 dev lo
route add $tun_ip/32 dev ${topo}gc
route add $tun_ip6/128 dev ${topo}gc
EOT
  rm -f "$work/espinudp.ready"
  $py "$repo/tools/netns/espinudp-listen" --port 4501 --ready "$work/espinudp.ready" "$nsg" \
    >"$work/espinudp.out" 2>&1 &
  pids+=("$!")
  wait_for "$work/espinudp.ready" ready 30
}

# kernel_peer_warm_up SUITE...: SAs of every suite added and flushed once in the
# gateway namespace, so the kernel instantiates each algorithm (tens of seconds under
# emulation) before any login waits on it.
kernel_peer_warm_up() {
  local suite i=0 k a eb ab
  {
    for suite in "$@"; do
      i=$((i + 1))
      read -r eb ab < <(xfrm_key_bytes "${suite/:/+}") || return 1
      k=$(printf '%0*d' $((2 * eb)) 0); a=; ((ab)) && a=$(printf '%0*d' $((2 * ab)) 0)
      xfrm_sa 192.0.2.1 192.0.2.2 $((0x7000 + i)) "${suite/:/+}" "$k" "$a" || return 1
    done
    echo "xfrm state flush"
  } | ip -n "$nsg" -batch -
}

# gateway_kernel_up SUITE [fake options...]: the fake GP gateway, whose keys
# tools/netns/gp-kernel-sa installs as kernel xfrm states + policies in the gateway
# namespace at each getconfig (state in $work/kernel-sa); sets fake_pid.
gateway_kernel_up() {
  local suite=$1; shift
  rm -rf "$work/kernel-sa"
  printf 'xfrm state flush\nxfrm policy flush\n' | ip -n "$nsg" -batch - || return 1
  # The first SA of an algorithm makes the kernel instantiate it: slow under emulation.
  fake_up "$suite" "$repo/tools/netns/gp-kernel-sa $nsg $gw_ip $cl_ip $work/kernel-sa" \
    --sa-hook-timeout 120 "$@"
  gw_pid=
  wait_for "$work/fake.ready" pid 120  # python under emulation on a loaded host: slow
}

# --- The client ----------------------------------------------------------------------
# espvpn_up [espvpn options...]: the real client ($espvpn) in the client namespace,
# alice/secret, CA-verified; output in $work/espvpn.{out,log}, stats in
# $work/cl-stats.json; sets client_pid.
espvpn_up() {
  rm -f "$work"/cl-stats.json "$work"/espvpn.out "$work"/espvpn.log
  echo secret | ip netns exec "$nsc" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" \
    -u alice --passwd-on-stdin --stats-json "$work/cl-stats.json" "$@" \
    "https://$gw_outer:4443/" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
}

# espvpn_down: SIGINT; says why and fails unless espvpn exits 0 with its tun removed.
espvpn_down() {
  [[ -n ${client_pid:-} ]] || return 0
  kill -INT "$client_pid"
  local rc=0
  wait "$client_pid" || rc=$?
  client_pid=
  [[ $rc -eq 0 ]] || { echo "espvpn exited $rc after SIGINT"; return 1; }
  ! ip -n "$nsc" -o link show type tun 2>/dev/null | grep -q . || { echo "tun device left behind"; return 1; }
}

# iperf_client NS OUT LIMIT ARGS...: `iperf3 -J ARGS` (a client) in namespace NS, for LIMIT
# seconds at most, its JSON into OUT; status 0 only for a test that ran to its end. iperf3 3.12
# exits 0 when a test fails after it began, with the reason under "error" in its JSON: that is a
# failure here, said on stderr. "the server is busy running a test" means the one-test-at-a-time
# server had not yet closed the previous client's test (it reads its listening socket before that
# client's last message): tried again, 10 times at most, 0.3 s apart.
iperf_client() {
  local ns=$1 out=$2 limit=$3 try rc err
  shift 3
  for ((try = 1; try <= 10; try++)); do
    rc=0
    timeout "$limit" ip netns exec "$ns" iperf3 -J "$@" >"$out" 2>"$out.err" || rc=$?
    err=$(json "$out" 'd.get("error", "")' 2>/dev/null) ||
      err="no JSON (exit $rc): $(head -c 300 "$out.err")"
    [[ $rc -eq 0 && -z $err ]] && return 0
    [[ $err == *"server is busy"* ]] || break
    sleep 0.3
  done
  echo "iperf3 $* (namespace $ns, try $try): ${err:-exit $rc}" >&2
  return 1
}

# iperf_json SECONDS OUT [-R]: iperf3 TCP from the client to the lan host ($lan_ip, a
# server the caller started), JSON into OUT.
iperf_json() {
  iperf_client "$nsc" "$2" $(($1 + 30)) -c $lan_ip -t "$1" ${3:-}
}
