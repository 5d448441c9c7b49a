#!/usr/bin/env bash
# UdpSocket GSO/GRO between two namespaces over a veth pair, IPv4 and IPv6.
#   udp_gso.sh CHECK_BINARY
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root"; exit 77; }
bin=$1
p=ug$$
nsa=${p}a nsb=${p}b
cleanup() {
  ip netns del "$nsa" 2>/dev/null || true
  ip netns del "$nsb" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$nsa"
ip netns add "$nsb"
ip link add "${p}x" netns "$nsa" type veth peer name "${p}y" netns "$nsb"
ip -n "$nsa" addr add 10.98.0.1/24 dev "${p}x"
ip -n "$nsb" addr add 10.98.0.2/24 dev "${p}y"
ip -n "$nsa" addr add fd98::1/64 dev "${p}x" nodad
ip -n "$nsb" addr add fd98::2/64 dev "${p}y" nodad
for ns in "$nsa" "$nsb"; do ip -n "$ns" link set lo up; done
ip -n "$nsa" link set "${p}x" up
ip -n "$nsb" link set "${p}y" up
timeout 30 "$bin" /run/netns/"$nsa" /run/netns/"$nsb" 10.98.0.1 10.98.0.2
timeout 30 "$bin" /run/netns/"$nsa" /run/netns/"$nsb" fd98::1 fd98::2
