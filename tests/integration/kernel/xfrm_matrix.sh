#!/usr/bin/env bash
# Kernel ESP ↔ kernel ESP, ESP-in-UDP tunnel mode on port 4501, every suite: proves
# the netns/xfrm harness (tools/netns/xfrm.sh) before our engine is put against it.
# Two namespaces joined by a veth pair; a ping between their inner addresses must
# come back through the tunnel, and all four SAs must count the packets. One
# wrong-key case must fail and show up as integrity failures, so this test can fail.
# Runs in an emulated guest when the host kernel has no ESP (tools/kernel-vm).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
[[ $(id -u) -eq 0 ]] || { echo "SKIP: kernel xfrm tests need root"; exit 77; }
if [[ ${1:-} != --here ]]; then
  exec "$repo/tools/kernel-vm/with-esp-kernel" --timeout 800 -- "$repo/tests/integration/kernel/xfrm_matrix.sh" --here
fi

. "$repo/tools/netns/xfrm.sh"
netns_trap_cleanup
started=$SECONDS
A=kxm$$c B=kxm$$g            # client and gateway namespaces
OA=192.0.2.1 OB=192.0.2.2     # outer (veth) addresses
IA=10.77.0.1 IB=10.77.0.2     # inner addresses, on lo, reached only through the tunnel

netns_pair "$A" "$B" $OA/24 $OB/24 || { echo "FAIL: cannot build the namespaces"; exit 1; }
ip -n "$A" -batch - <<EOT || exit 1
addr add $IA/32 dev lo
route add $IB/32 dev $A-v src $IA
EOT
ip -n "$B" -batch - <<EOT || exit 1
addr add $IB/32 dev lo
route add $IA/32 dev $B-v src $IB
EOT
espinudp_listen 4501 "$A" "$B" || { echo "FAIL: no ESP-in-UDP sockets"; exit 1; }

# configure SUITE C2S_SPI S2C_SPI C2S_EKEY C2S_AKEY S2C_EKEY S2C_AKEY [B_C2S_EKEY]:
# both sides' SAs and policies (B may get a different c2s key, for the negative case).
configure() {
  local suite=$1 c2s=$2 s2c=$3 ce=$4 ca=$5 se=$6 sa=$7 bce=${8:-$4}
  xfrm_reset "$A"; xfrm_reset "$B"
  { xfrm_sa $OA $OB "$c2s" "$suite" "$ce" "$ca" && xfrm_sa $OB $OA "$s2c" "$suite" "$se" "$sa" &&
    xfrm_policies $OA $OB $IA/32 $IB/32; } | xfrm_apply "$A" || return 1
  { xfrm_sa $OA $OB "$c2s" "$suite" "$bce" "$ca" && xfrm_sa $OB $OA "$s2c" "$suite" "$se" "$sa" &&
    xfrm_policies $OB $OA $IB/32 $IA/32; } | xfrm_apply "$B" || return 1
}

# keys SUITE: sets EK/AK to fresh random keys of the suite's sizes.
keys() {
  local sizes; sizes=$(xfrm_key_bytes "$1") || return 1
  read -r eb ab <<<"$sizes"
  EK=$(random_hex "$eb"); AK=
  if ((ab)); then AK=$(random_hex "$ab"); fi
}

# sa NS_STATS SPI FIELD: one counter of an SA from a loaded stats array
# (fields: 1 packets, 2 bytes, 3 replay-window drops, 4 replay drops, 5 integrity fails).
sa() {
  local -n st=$1
  local key; printf -v key '0x%08x' "$(($2))"
  local f=(${st[$key]:-missing missing missing missing missing missing})
  echo "${f[$3 - 1]}"
}

suites=(aes-128-cbc+sha1 aes-256-cbc+sha1 aes-256-cbc+sha256 aes-128-cbc+md5 aes-128-gcm aes-256-gcm)
failures=0
printf '%-20s %-6s %-11s %-11s %-11s %-11s %s\n' suite result "A out(c2s)" "B in(c2s)" "B out(s2c)" "A in(s2c)" "integrity fails"
i=0
for suite in "${suites[@]}"; do
  i=$((i + 1))
  c2s=$((0x1000 + i)) s2c=$((0x2000 + i))
  keys "$suite" || exit 1; ce=$EK ca=$AK
  keys "$suite" || exit 1; se=$EK sa=$AK
  if ! configure "$suite" $c2s $s2c "$ce" "$ca" "$se" "$sa"; then
    printf '%-20s FAIL   (the kernel refused the SAs)\n' "$suite"; failures=$((failures + 1)); continue
  fi
  got=$(ip netns exec "$A" ping -n -q -c 3 -i 0.2 -W 3 -I $IA $IB 2>&1 | awk '/received/ { print $4 }')
  declare -A sa_a=() sa_b=()
  xfrm_stats_load "$A" sa_a; xfrm_stats_load "$B" sa_b
  a_out=$(sa sa_a $c2s 1) b_in=$(sa sa_b $c2s 1) b_out=$(sa sa_b $s2c 1) a_in=$(sa sa_a $s2c 1)
  fails=$(( $(sa sa_a $c2s 5) + $(sa sa_b $c2s 5) + $(sa sa_b $s2c 5) + $(sa sa_a $s2c 5) ))
  result=PASS
  if [[ ${got:-0} != 3 ]] || ((a_out < 3 || b_in < 3 || b_out < 3 || a_in < 3 || fails)); then
    result=FAIL; failures=$((failures + 1))
  fi
  printf '%-20s %-6s %-11s %-11s %-11s %-11s %s   (ping: %s/3 replies)\n' "$suite" $result \
    "$a_out" "$b_in" "$b_out" "$a_in" "$fails" "${got:-0}"
done

# Negative control: the gateway holds a different c2s encryption key... for an AEAD
# suite a wrong key is an ICV failure, so no reply and B's integrity counter rises.
suite=aes-128-gcm
keys $suite; ce=$EK; keys $suite; se=$EK; keys $suite; wrong=$EK
configure $suite 0x3001 0x3002 "$ce" "" "$se" "" "$wrong" || exit 1
got=$(ip netns exec "$A" ping -n -q -c 2 -i 0.2 -W 2 -I $IA $IB 2>&1 | awk '/received/ { print $4 }')
declare -A sa_b=(); xfrm_stats_load "$B" sa_b; b_in_fail=$(sa sa_b 0x3001 5)
result=PASS
if [[ ${got:-0} != 0 ]] || ((b_in_fail < 2)); then result=FAIL; failures=$((failures + 1)); fi
printf '%-20s %-6s wrong c2s key at the gateway: %s replies, %s integrity failures (want 0, 2)\n' \
  "$suite/badkey" $result "${got:-0}" "$b_in_fail"

echo "xfrm matrix: ${#suites[@]} suites + 1 negative case, $failures failed, $((SECONDS - started)) s"
((failures == 0))
