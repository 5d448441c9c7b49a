#!/usr/bin/env bash
# Our ESP engine (tools/esp-peer) against Linux kernel ESP, ESP-in-UDP on port 4501,
# every suite, both directions, plus tampered and replayed packets each way:
#   we seal → the kernel opens and answers; the kernel seals → we open;
#   the kernel drops our tampered / replayed packet (its xfrm counters say so);
#   we drop the kernel's packets re-fed with a flipped bit / a second time.
# Namespace A holds esp-peer on a plain UDP socket (no xfrm); namespace B is the
# kernel "gateway" with the SAs, policies, the encap socket and the inner address.
# Runs in an emulated guest when the host kernel has no ESP (tools/kernel-vm).
#   esp_peer_matrix.sh PATH/TO/esp-peer
set -uo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
peer=${1:?usage: esp_peer_matrix.sh PATH/TO/esp-peer}
[[ -x $peer ]] || { echo "FAIL: $peer is not an executable (build the esp-peer target)"; exit 1; }
peer=$(cd "$(dirname "$peer")" && pwd)/$(basename "$peer")
[[ $(id -u) -eq 0 ]] || { echo "SKIP: kernel xfrm tests need root"; exit 77; }
if [[ ${2:-} != --here ]]; then
  exec "$repo/tools/kernel-vm/with-esp-kernel" --timeout 800 -- "$repo/tests/integration/kernel/esp_peer_matrix.sh" "$peer" --here
fi

. "$repo/tools/netns/xfrm.sh"
netns_trap_cleanup
started=$SECONDS
A=kep$$u B=kep$$k             # us (esp-peer) and the kernel
OA=192.0.2.1 OB=192.0.2.2     # outer addresses
IA=10.77.0.1 IB=10.77.0.2     # our tunnel address; the kernel's inner address (on its lo)

netns_pair "$A" "$B" $OA/24 $OB/24 || { echo "FAIL: cannot build the namespaces"; exit 1; }
ip -n "$B" -batch - <<EOT || exit 1
addr add $IB/32 dev lo
route add $IA/32 dev $B-v src $IB
EOT
espinudp_listen 4501 "$B" || { echo "FAIL: no ESP-in-UDP socket"; exit 1; }

suites=(aes-128-cbc+sha1 aes-256-cbc+sha1 aes-256-cbc+sha256 aes-128-cbc+md5 aes-128-gcm aes-256-gcm)
failures=0
rows=()
i=0
for suite in "${suites[@]}"; do
  i=$((i + 1))
  c2s=$((0x5000 + i)) s2c=$((0x6000 + i))
  read -r eb ab < <(xfrm_key_bytes "$suite")
  ce=$(random_hex "$eb") se=$(random_hex "$eb") ca= sa=
  if ((ab)); then ca=$(random_hex "$ab") sa=$(random_hex "$ab"); fi
  xfrm_reset "$B"
  if ! { xfrm_sa $OA $OB $c2s "$suite" "$ce" "$ca" 4501 4501 32 &&
         xfrm_sa $OB $OA $s2c "$suite" "$se" "$sa" 4501 4501 32 &&
         xfrm_policies $OB $OA $IB/32 $IA/32; } | xfrm_apply "$B"; then
    rows+=("$(printf '%-20s %s' "$suite" "FAIL: the kernel refused the SAs")"); failures=$((failures + 1)); continue
  fi
  out=$(ip netns exec "$A" timeout 120 "$peer" --suite "$suite" --local $OA:4501 --remote $OB:4501 \
          --inner-src $IA --inner-dst $IB --c2s-spi $c2s --s2c-spi $s2c \
          --c2s-ekey "$ce" ${ca:+--c2s-akey "$ca"} --s2c-ekey "$se" ${sa:+--s2c-akey "$sa"} 2>&1)
  peer_rc=$?
  echo "--- $suite"; echo "$out"
  declare -A st=()
  xfrm_stats_load "$B" st
  read -r k_in _ _ k_in_replay k_in_icv _ <<<"${st[$(printf '0x%08x' $c2s)]:-x x x x x x}"
  read -r k_out _ _ _ _ k_oseq <<<"${st[$(printf '0x%08x' $s2c)]:-x x x x x x}"
  check() { grep -q "^CHECK $1 .*PASS" <<<"$out" && echo ok || echo FAIL; }
  # Every packet the kernel accepted was answered; exactly one bad ICV, exactly one replay.
  we_to_k=$(check echo-both-directions) k_to_we=$we_to_k probe=$(check gp-probe)
  [[ $k_in =~ ^[0-9]+$ ]] && ((k_in >= 16)) || we_to_k=FAIL
  [[ $k_out == "$k_in" ]] || k_to_we=FAIL
  k_tamper=$(check kernel-drops-tampered); [[ $k_in_icv == 1 ]] || k_tamper=FAIL
  k_replay=$(check kernel-drops-replay); [[ $k_in_replay == 1 ]] || k_replay=FAIL
  w_tamper=$(check we-drop-tampered) w_replay=$(check we-drop-replay)
  result=PASS
  for v in $probe $we_to_k $k_to_we $k_tamper $k_replay $w_tamper $w_replay; do [[ $v == ok ]] || result=FAIL; done
  ((peer_rc == 0)) || result=FAIL
  [[ $result == PASS ]] || failures=$((failures + 1))
  rows+=("$(printf '%-20s %-6s %-9s %-9s %-12s %-12s %-10s %-10s %s' "$suite" "$probe" \
    "$we_to_k($k_in)" "$k_to_we($k_out)" "$k_tamper(icv=$k_in_icv)" "$k_replay(rpl=$k_in_replay)" \
    "$w_tamper" "$w_replay" "$result")")
done

echo
printf '%-20s %-6s %-9s %-9s %-12s %-12s %-10s %-10s %s\n' suite probe "us>kern" "kern>us" \
  "kern-tamper" "kern-replay" "we-tamper" "we-replay" result
printf '%s\n' "${rows[@]}"
echo "esp-peer matrix: ${#suites[@]} suites, $failures failed, $((SECONDS - started)) s in the test"
((failures == 0))
