# Sourceable: Debian's ocserv as an AnyConnect peer, in the shared three-namespace
# topology (tools/netns/gp-topology.sh):
#   client 10.201.0.2 --veth-- ocserv 10.201.0.1:4443 (tcp+udp) --veth-- lan 10.202.0.2
# ocserv hands out 192.168.99.0/24 (its own end is 192.168.99.1) and routes
# 10.202.0.0/24 (the lan) into the tunnel; it forwards between them.
#
# The caller sets repo, work (a temp dir), pids (array); then:
#   topo_up                                  # from gp-topology.sh
#   ocserv_up [extra config lines...]        # sets oc_pid; waits until it listens
#   ocserv_down                              # SIGTERM (sessions told), ocserv_kill: SIGKILL
# Users (password test123): testuser (no group), grpuser (groups group1, group2).
# Knobs (set before ocserv_up): OC_DEBUG (ocserv -d, default 2), OC_DPD (default 10), OC_UDP (1: udp-port set, DTLS
# offered; 0: no udp-port), OC_GROUPS (1: select-group lines for group1/group2),
# oc_routes (the route lines; default the lan's /24), oc_auth (the auth lines; default
# the password file: oc_auth=("auth = \"certificate\"") for certificate-only login).
# Use trap ocserv_cleanup EXIT.
# shellcheck source=../../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"

oc_port=4443 oc_pool=192.168.99.0 oc_server_tun=192.168.99.1 oc_password=test123
oc_pin=$(certtool --certificate-info --infile "$repo/certs/server.pem" 2>/dev/null | sed -n 's/.*\(pin-sha256:[^ ]*\).*/\1/p' | head -1)

# The routes ocserv pushes (a caller may replace them, e.g. with "route = default").
oc_routes=("route = 10.202.0.0/255.255.255.0")
oc_auth=()

# ocserv_conf [extra lines...]: writes $work/ocserv.conf and the password file.
ocserv_conf() {
  mkdir -p "$work/oc"
  chmod 755 "$work" "$work/oc"
  : >"$work/oc/passwd"
  printf '%s\n%s\n' $oc_password $oc_password | ocpasswd -c "$work/oc/passwd" testuser
  printf '%s\n%s\n' $oc_password $oc_password | ocpasswd -c "$work/oc/passwd" -g "group1,group2" grpuser
  {
    if ((${#oc_auth[@]})); then printf '%s\n' "${oc_auth[@]}"; else echo "auth = \"plain[passwd=$work/oc/passwd]\""; fi
    echo "listen-host = ${oc_listen_host:-$gw_ip}"
    echo "tcp-port = $oc_port"
    [[ ${OC_UDP:-1} == 1 ]] && echo "udp-port = $oc_port"
    echo "run-as-user = nobody"
    echo "run-as-group = nogroup"
    echo "socket-file = $work/oc/socket"
    echo "server-cert = $repo/certs/server.pem"
    echo "server-key = $repo/certs/server-key.pem"
    echo "isolate-workers = false"
    echo "max-clients = 8"
    echo "max-same-clients = 4"
    echo "keepalive = 300"
    echo "dpd = ${OC_DPD:-10}"
    echo "mobile-dpd = 1800"
    echo "switch-to-tcp-timeout = 25"
    echo "try-mtu-discovery = false"
    echo 'tls-priorities = "NORMAL:%SERVER_PRECEDENCE:%COMPAT:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1:-VERS-TLS1.3"'
    echo "auth-timeout = 240"
    echo "cookie-timeout = 300"
    echo "rekey-time = 172800"
    echo "rekey-method = ssl"
    echo "use-occtl = true"
    echo "occtl-socket-file = $work/oc/occtl.socket"
    echo "pid-file = $work/oc/ocserv.pid"
    echo "log-level = 2"
    echo "device = vpns"
    echo "predictable-ips = true"
    echo "default-domain = example.test"
    echo "ipv4-network = $oc_pool"
    echo "ipv4-netmask = 255.255.255.0"
    echo "dns = $oc_server_tun"
    printf '%s\n' "${oc_routes[@]}"
    echo "no-route = 10.202.0.128/255.255.255.128"
    echo "split-dns = example.test"
    echo 'banner = "Hello from test ocserv"'
    echo "cisco-client-compat = true"
    echo "dtls-legacy = true"
    if [[ ${OC_GROUPS:-0} == 1 ]]; then
      echo "select-group = group1[First Group]"
      echo "select-group = group2"
    fi
    local line
    for line in "$@"; do echo "$line"; done
  } >"$work/oc/ocserv.conf"
}

# ocserv_up [extra config lines...]
ocserv_up() {
  ocserv_conf "$@"
  ocserv -t -c "$work/oc/ocserv.conf" >"$work/ocserv-check.log" 2>&1 || { cat "$work/ocserv-check.log"; return 1; }
  ip netns exec "$nsg" ocserv -f -d "${OC_DEBUG:-2}" -c "$work/oc/ocserv.conf" >"$work/ocserv.log" 2>&1 &
  oc_pid=$!; pids+=("$oc_pid")
  local i
  for ((i = 0; i < 100; i++)); do
    ip netns exec "$nsg" ss -ltn "sport = :$oc_port" 2>/dev/null | grep -q LISTEN && return 0
    kill -0 "$oc_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "ocserv did not start:"; tail -20 "$work/ocserv.log"
  return 1
}

# ocserv waits for its sessions to end on SIGTERM; after 3 s it gets SIGKILL, and
# so do its helper processes (sec-mod, workers), found by parent pid.
ocserv_down() {
  [[ -n ${oc_pid:-} ]] || return 0
  local kids i
  kids=$(pgrep -P "$oc_pid" 2>/dev/null || true)
  kill -TERM "$oc_pid" 2>/dev/null || true
  for ((i = 0; i < 30; i++)); do kill -0 "$oc_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$oc_pid" $kids 2>/dev/null || true
  wait "$oc_pid" 2>/dev/null || true
  oc_pid=
}

# ocserv_kill: ocserv and its workers die at once (no TERMINATE to the clients, unlike ocserv_down).
ocserv_kill() {
  [[ -n ${oc_pid:-} ]] || return 0
  local kids
  kids=$(pgrep -P "$oc_pid" 2>/dev/null || true)
  kill -KILL "$oc_pid" $kids 2>/dev/null || true
  wait "$oc_pid" 2>/dev/null || true
  oc_pid=
}

# Stops ocserv, then the rest of the topology (use as the EXIT trap).
ocserv_cleanup() {
  ocserv_down
  topo_cleanup
}

# occtl in the server namespace, e.g. occtl_run show users
occtl_run() { ip netns exec "$nsg" occtl -s "$work/oc/occtl.socket" "$@"; }
