#!/usr/bin/env bash
# The anchor for real_nm.sh: NetworkManager-openconnect (Debian's network-manager-openconnect,
# with openconnect) under the same real NetworkManager harness against ocserv, the same
# cases where NM-openconnect has them. Prints one line per case; a measurement for the
# table in src/nm/README.md, not a pass/fail test (run by hand, root):
#   real_nm_oc_anchor.sh
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
[[ -x /usr/lib/NetworkManager/nm-openconnect-service ]] || { echo "SKIP: network-manager-openconnect not installed"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/real-nm-oc.XXXXXX)
chmod 755 "$work"
pids=()
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
. "$here/real_nm_env.sh"
trap 'nm_down; ocserv_cleanup' EXIT
topo_up
nm_up /usr/lib/NetworkManager/VPN/nm-openconnect-service.name
nm_base_up
ocserv_up "ipv6-network = fd00:199::/64" "route = fd00:202::/64"
url="https://$gw_ip:$oc_port/"
tun() { ip -n "$nsc" -o link show type tun 2>/dev/null | awk -F': ' '{print $2}' | head -1; }
oc_procs() { nm_procs openconnect; }
row() { printf '| %s | %s |\n' "$1" "$2"; }
add() { nmc connection add type vpn con-name "$1" autoconnect no vpn-type org.freedesktop.NetworkManager.openconnect \
  vpn.data "$2" ${3:+vpn.secrets "$3"} >/dev/null; }
auth=$(ip netns exec "$nsc" openconnect --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
  --passwd-on-stdin --authenticate "$url" <<<"$oc_password" 2>>"$work/oc-auth.err" || true)
val() { sed -n "s/^$1='\(.*\)'$/\1/p" <<<"$auth"; }
add cookie "gateway=$url, protocol=anyconnect" \
  "cookie=$(val COOKIE), gateway=$(val CONNECT_URL), gwcert=$(val FINGERPRINT)"
t=$SECONDS; out=$(nmc --wait 40 connection up cookie 2>&1) || true
ping_ok=no; ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 10.202.0.2 >/dev/null 2>&1 && ping_ok=yes
row "cookie + gateway/gwcert secrets" "$(head -1 <<<"$out" | cut -c1-60) in $((SECONDS - t)) s; tun $(tun); ping $ping_ok; IP4 $(nmc -g IP4.ADDRESS connection show cookie | head -1)"
before=$(grep -c "reason: user disconnected" "$work/ocserv.log" || true)
nmc connection down cookie >/dev/null || true
end=$((SECONDS + 5)); while ((SECONDS < end)) && [[ -n $(oc_procs) ]]; do sleep 0.2; done
sleep 1
row "nmcli connection down" "openconnect left: '$(oc_procs)'; tun left: '$(tun)'; ocserv logouts +$(( $(grep -c "reason: user disconnected" "$work/ocserv.log" || true) - before ))"
out=$(nmc --wait 40 connection up cookie 2>&1) || true
row "the logged-out cookie again" "$(head -1 <<<"$out")"
add pw "gateway=$url, protocol=anyconnect, cafile=$repo/certs/ca.pem" "password=$oc_password"
out=$(nmc --wait 40 connection up pw 2>&1) || true
row "stored password" "$(head -1 <<<"$out")"
printf 'vpn.secrets.password:%s\n' "$oc_password" >"$work/pw"
out=$(nmc --wait 40 connection up pw passwd-file "$work/pw" 2>&1) || true
row "passwd-file with the password" "$(head -1 <<<"$out")"
auth=$(ip netns exec "$nsc" openconnect --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
  --passwd-on-stdin --authenticate "$url" <<<"$oc_password" 2>>"$work/oc-auth.err" || true)
nmc connection modify cookie vpn.secrets "cookie=$(val COOKIE), gateway=$(val CONNECT_URL), gwcert=$(val FINGERPRINT)" || echo "modify failed" >&2
nmc --wait 40 connection up cookie >/dev/null 2>&1 || true
oc=$(oc_procs); t=$SECONDS
ocserv_down
end=$((SECONDS + 90)); while ((SECONDS < end)) && [[ -n $(oc_procs) ]]; do sleep 0.2; done
row "ocserv stopped mid-session" "openconnect exited after $((SECONDS - t)) s (was '$oc'); NM: $(grep '"cookie"[^]]*\]: dbus: failure:' "$work/nm.log" | tail -1 | sed 's/.*failure: //'); tun left '$(tun)'"
ocserv_up "ipv6-network = fd00:199::/64" "route = fd00:202::/64"
auth=$(ip netns exec "$nsc" openconnect --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser \
  --passwd-on-stdin --authenticate "$url" <<<"$oc_password" 2>>"$work/oc-auth.err" || true)
nmc connection modify cookie vpn.secrets "cookie=$(val COOKIE), gateway=$(val CONNECT_URL), gwcert=$(val FINGERPRINT)" || echo "modify failed" >&2
nmc --wait 40 connection up cookie >/dev/null 2>&1 || true
oc=$(oc_procs)
kill -KILL "$nm_pid"; wait "$nm_pid" 2>/dev/null || true; t=$SECONDS
end=$((SECONDS + 15)); while ((SECONDS < end)) && [[ -n $(oc_procs) ]]; do sleep 0.2; done
row "NetworkManager SIGKILLed while up" "openconnect ('$oc') left after $((SECONDS - t)) s: '$(oc_procs)'; tun left '$(tun)'"
for p in $(oc_procs) $(nm_procs nm-openconnect); do kill "$p" 2>/dev/null || true; done
nm_pid=
