# Sourceable: a real NetworkManager (Debian's network-manager) in the client namespace of
# the shared topology (tools/netns/gp-topology.sh), on a system bus of its own. Nothing
# of the host's NetworkManager, bus or files is touched:
#   - NM runs in `ip netns exec $nsc unshare --mount --uts --propagation private`;
#     inside that mount namespace /run, /etc/NetworkManager, /var/lib/NetworkManager
#     and /usr/lib/NetworkManager/VPN are bind mounts of directories under $work/nm,
#     and /sys is read-only (else NM waits for udev and never manages the veth);
#   - a dbus-daemon of ours listens on /run/dbus/system_bus_socket in that mount
#     namespace (the standard path: NM, nmcli and the plugin need no variable), with
#     the system bus's deny-by-default rules and the policy files of
#     /usr/share/dbus-1/system.d, /etc/dbus-1/system.d and $nm_policy;
#   - everything that talks to NM enters its namespaces: nmc ARGS = nsenter -t $nm_pid
#     -m -n -u nmcli ARGS.
# The caller sets repo, work, pids and nsc (topo_up done), then:
#   nm_up NAME_FILE [POLICY [etc]]  # installs NAME_FILE as the plugin's .name file in
#                              # /usr/lib/NetworkManager/VPN, or with "etc" in
#                              # /etc/NetworkManager/VPN (where a /usr/local install puts it);
#                              # POLICY: a D-Bus policy file for the bus; sets nm_pid
#   nm_base_up                 # the veth's profile (addresses + default route), activated
#   nm_down                    # SIGTERM to NM, then the bus (also done by nm_cleanup)
#   nm_build_tree_name SERVICE ESPVPN [PLUGIN]  # wrappers in $work that run the build tree's service and
#                              # auth dialog with this espvpn, and a .name file naming them:
#                              # $work/nm-espvpn-service.name (where a package puts the programs)
# NM's own log (--debug: stderr) is $work/nm.log; the plugin's output lands there too.

nm_root=$work/nm
nm_pid= nm_bus_pid= nm_mnt_ns=

# -r: the target's root too (setns into a mount namespace resets it; matters in a chroot).
nmc() { nsenter -t "$nm_pid" -m -n -u -r nmcli "$@"; }
nm_build_tree_name() {
  cat >"$work/nm-espvpn-service" <<SH
#!/bin/sh
exec "$1" --espvpn "$2" --debug "\$@"
SH
  cat >"$work/nm-espvpn-auth-dialog" <<SH
#!/bin/sh
exec "${1%/*}/nm-espvpn-auth-dialog" --espvpn "$2" "\$@"
SH
  chmod 755 "$work/nm-espvpn-service" "$work/nm-espvpn-auth-dialog"
  # $3: the editor plugin (libnm-vpn-plugin-espvpn.so) for nmcli's import/export and the
  # connection editors; default the name a package installs.
  sed -e "s|@ESPVPN_NM_PROGRAM_PATH@|$work|" -e "s|@ESPVPN_NM_EDITOR_PLUGIN@|${3:-libnm-vpn-plugin-espvpn.so}|" \
    "$repo/src/nm/nm-espvpn-service.name.in" >"$work/nm-espvpn-service.name"
}
# A command in NM's mount namespace (its bus, its /run): e.g. nm_ns cat /run/...
nm_ns() { nsenter -t "$nm_pid" -m -n -u -r "$@"; }

nm_up() {
  local name_file=$1 policy=${2:-} where=${3:-}
  mkdir -p "$nm_root"/{run,etc/conf.d,etc/system-connections,etc/VPN,lib,vpn}
  chmod 700 "$nm_root/etc/system-connections"
  if [[ $where == etc ]]; then cp "$name_file" "$nm_root/etc/VPN/"; else cp "$name_file" "$nm_root/vpn/"; fi
  cat >"$nm_root/etc/NetworkManager.conf" <<CONF
[main]
plugins=keyfile
no-auto-default=*
auth-polkit=false
hostname-mode=none
rc-manager=unmanaged
dns=default
[keyfile]
unmanaged-devices=*,except:interface-name:${topo}cg,except:type:tun
[logging]
level=${NM_TEST_LOG_LEVEL:-INFO}
CONF
  # The system bus's rules (deny by default, holes from the policy files), written here:
  # /usr/share/dbus-1/system.conf would also fork, log to syslog and activate services.
  cat >"$nm_root/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
  <includedir>/etc/dbus-1/system.d</includedir>
$([[ -n $policy ]] && echo "  <include>$policy</include>")
</busconfig>
CONF
  cat >"$nm_root/start" <<'SH'
#!/bin/bash
# Runs in the client network namespace, in a mount + UTS namespace of its own.
set -e
root=$1
mount --bind "$root/run" /run
mount --bind "$root/etc" /etc/NetworkManager
mount --bind "$root/lib" /var/lib/NetworkManager
mount --bind "$root/vpn" /usr/lib/NetworkManager/VPN
mount -o remount,ro /sys
mkdir -p /run/dbus
dbus-daemon --config-file="$root/bus.conf" --nofork --nosyslog --print-pid=3 3>"$root/bus.pid" \
  >"$root/dbus.log" 2>&1 &
for ((i = 0; i < 100; i++)); do [[ -S /run/dbus/system_bus_socket ]] && break; sleep 0.05; done
exec NetworkManager --debug
SH
  chmod +x "$nm_root/start"
  ip netns exec "$nsc" unshare --mount --uts --propagation private "$nm_root/start" "$nm_root" \
    >"$work/nm.log" 2>&1 &
  nm_pid=$!
  pids+=("$nm_pid")
  # `ip netns exec` and unshare exec (no fork), so $! becomes NetworkManager itself.
  local i
  for ((i = 0; i < 200; i++)); do
    kill -0 "$nm_pid" 2>/dev/null || { echo "NetworkManager exited:"; tail -30 "$work/nm.log"; return 1; }
    if [[ $(cat "/proc/$nm_pid/comm" 2>/dev/null) == NetworkManager ]] &&
      [[ $(nmc -t -f RUNNING general 2>/dev/null) == running ]]; then
      nm_bus_pid=$(cat "$nm_root/bus.pid")
      nm_mnt_ns=$(readlink "/proc/$nm_pid/ns/mnt")
      pids+=("$nm_bus_pid")
      return 0
    fi
    sleep 0.1
  done
  echo "NetworkManager did not answer in 20 s:"; tail -30 "$work/nm.log"
  return 1
}

# The client veth's profile: the addresses topo_up gave it and a default route (NM
# needs one before any VPN: else "Could not find source connection").
nm_base_up() {
  nmc connection add type ethernet ifname "${topo}cg" con-name base autoconnect no \
    ipv4.method manual ipv4.addresses "$cl_ip/24" ipv4.gateway "$gw_ip" \
    ipv6.method manual ipv6.addresses "$cl_ip6/64" ipv6.gateway "$gw_ip6" >/dev/null || return 1
  nmc --wait 30 connection up base >/dev/null || { tail -30 "$work/nm.log"; return 1; }
}

# nm_wait SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds (every 0.1 s).
nm_wait() {
  local end=$((SECONDS + $1 + 1)) what=$2; shift 2
  while ((SECONDS < end)); do
    "$@" && return 0
    sleep 0.1
  done
  echo "timed out after $end s waiting for: $what"
  return 1
}

# nm_procs COMM_PREFIX: the PIDs of the processes in NM's mount namespace whose name
# starts so (NM starts its VPN services detached: their parent is init, not NM).
nm_procs() {
  local d
  for d in /proc/[0-9]*; do
    [[ $(readlink "$d/ns/mnt" 2>/dev/null) == "$nm_mnt_ns" ]] || continue
    [[ $(cat "$d/comm" 2>/dev/null) == "$1"* ]] && echo "${d#/proc/}"
  done
  return 0
}

nm_down() {
  local i
  if [[ -n $nm_pid ]]; then
    kill -TERM "$nm_pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do kill -0 "$nm_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$nm_pid" 2>/dev/null || true
    wait "$nm_pid" 2>/dev/null || true
  fi
  [[ -z $nm_bus_pid ]] || kill -TERM "$nm_bus_pid" 2>/dev/null || true
  nm_pid= nm_bus_pid=
}
