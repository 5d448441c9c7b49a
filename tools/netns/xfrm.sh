# shellcheck shell=bash
# Network-namespace + kernel xfrm helpers for ESP-in-UDP interop tests. Source it:
#   . tools/netns/xfrm.sh
# Everything is created with names the caller chooses (make them unique per run,
# e.g. with $$), recorded, and removed by netns_cleanup (installed on EXIT by
# netns_trap_cleanup). Process runs at most as many `ip` commands as needed, because
# each exec is slow in an emulated guest: SAs and policies go in as `ip -batch`.
#
# Suites use GlobalProtect names: aes-128-cbc+sha1, aes-256-cbc+sha256,
# aes-128-cbc+md5, aes-128-gcm, aes-256-gcm, ... For GCM the encryption key is
# key ‖ 4-byte salt (RFC 4106) and there is no authentication key.

NETNS_TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETNS_CREATED=()
NETNS_PIDS=()

netns_cleanup() {
  local pid ns
  for pid in "${NETNS_PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${NETNS_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
  for ns in "${NETNS_CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
  NETNS_PIDS=(); NETNS_CREATED=()
}

netns_trap_cleanup() { trap netns_cleanup EXIT; trap 'exit 130' INT TERM; }

# netns_pair NS_A NS_B ADDR_A/LEN ADDR_B/LEN: two namespaces with lo up, joined by a
# veth pair named NS_A-v / NS_B-v (names must fit IFNAMSIZ: keep NS names ≤ 13 chars).
netns_pair() {
  local a=$1 b=$2 addr_a=$3 addr_b=$4
  ip netns add "$a" && NETNS_CREATED+=("$a") || return 1
  ip netns add "$b" && NETNS_CREATED+=("$b") || return 1
  ip link add "$a-v" netns "$a" type veth peer name "$b-v" netns "$b" || return 1
  ip -n "$a" -batch - <<EOT || return 1
link set lo up
link set $a-v up
addr add $addr_a dev $a-v
EOT
  ip -n "$b" -batch - <<EOT || return 1
link set lo up
link set $b-v up
addr add $addr_b dev $b-v
EOT
}

# espinudp_listen PORT NS...: one background helper holding an ESP-in-UDP encap
# socket on PORT in every NS; returns once all are listening.
espinudp_listen() {
  local port=$1; shift
  local ready i
  ready=$(mktemp -u /tmp/espinudp-ready.XXXXXX)
  python3 "$NETNS_TOOLS_DIR/espinudp-listen" --port "$port" --ready "$ready" "$@" &
  NETNS_PIDS+=($!)
  for ((i = 0; i < 600; i++)); do
    [[ -f $ready ]] && { rm -f "$ready"; return 0; }
    kill -0 "${NETNS_PIDS[-1]}" 2>/dev/null || { echo "espinudp-listen died" >&2; return 1; }
    sleep 0.1
  done
  echo "espinudp-listen not ready after 60 s" >&2; return 1
}

# xfrm_key_bytes SUITE: prints "ENC_BYTES AUTH_BYTES" (GCM: key+salt, 0).
xfrm_key_bytes() {
  local enc=${1%%+*} auth=
  [[ $1 == *+* ]] && auth=${1#*+}
  local e a=0
  case $enc in
    aes-128-cbc) e=16 ;; aes-192-cbc) e=24 ;; aes-256-cbc) e=32 ;;
    aes-128-gcm) e=20 ;; aes-256-gcm) e=36 ;;
    *) echo "xfrm: unknown encryption '$enc' in suite '$1'" >&2; return 1 ;;
  esac
  case $auth in
    sha1) a=20 ;; sha256) a=32 ;; md5) a=16 ;; '') ;;
    *) echo "xfrm: unknown authentication '$auth' in suite '$1'" >&2; return 1 ;;
  esac
  echo "$e $a"
}

# xfrm_alg_args SUITE EKEY_HEX [AKEY_HEX]: the algorithm part of `ip xfrm state add`.
xfrm_alg_args() {
  local suite=$1 ekey=${2#0x} akey=${3#0x}
  local enc=${suite%%+*} auth=
  [[ $suite == *+* ]] && auth=${suite#*+}
  local sizes; sizes=$(xfrm_key_bytes "$suite") || return 1
  read -r ebytes abytes <<<"$sizes"
  ((${#ekey} == 2 * ebytes)) || { echo "xfrm: $suite wants a $ebytes-byte encryption key, got ${#ekey} hex digits" >&2; return 1; }
  case $enc in
    *-gcm) [[ -z $auth ]] || { echo "xfrm: GCM suite '$suite' takes no HMAC" >&2; return 1; }
           echo "aead rfc4106(gcm(aes)) 0x$ekey 128"; return ;;
  esac
  [[ -n $auth ]] || { echo "xfrm: CBC suite '$suite' needs +sha1/+sha256/+md5" >&2; return 1; }
  ((${#akey} == 2 * abytes)) || { echo "xfrm: $suite wants a $abytes-byte HMAC key, got ${#akey} hex digits" >&2; return 1; }
  # sha256 must say 128 explicitly: plain `auth hmac(sha256)` truncates to 96 bits.
  local bits=96; [[ $auth == sha256 ]] && bits=128
  echo "enc cbc(aes) 0x$ekey auth-trunc hmac($auth) 0x$akey $bits"
}

# xfrm_sa SRC DST SPI SUITE EKEY AKEY [SPORT DPORT [REPLAY_WINDOW]]: one `ip -batch`
# line adding a tunnel-mode ESP-in-UDP SA. `flag af-unspec` keeps its selector
# family-free, so one SA carries inner IPv4 and IPv6 (else it is the outer family's only).
xfrm_sa() {
  local src=$1 dst=$2 spi=$3 suite=$4 ekey=$5 akey=$6 sport=${7:-4501} dport=${8:-4501} win=${9:-32}
  local algs; algs=$(xfrm_alg_args "$suite" "$ekey" "$akey") || return 1
  echo "xfrm state add src $src dst $dst proto esp spi $spi mode tunnel replay-window $win flag af-unspec" \
       "encap espinudp $sport $dport 0.0.0.0 $algs"
}

# xfrm_policies LOCAL_OUTER REMOTE_OUTER LOCAL_INNER REMOTE_INNER: `ip -batch` lines
# for tunnel-mode out/in/fwd policies between two inner prefixes.
xfrm_policies() {
  local lo=$1 ro=$2 li=$3 ri=$4
  echo "xfrm policy add src $li dst $ri dir out tmpl src $lo dst $ro proto esp mode tunnel"
  echo "xfrm policy add src $ri dst $li dir in tmpl src $ro dst $lo proto esp mode tunnel"
  echo "xfrm policy add src $ri dst $li dir fwd tmpl src $ro dst $lo proto esp mode tunnel"
}

# xfrm_apply NS: feeds `ip -batch` lines from stdin to namespace NS.
xfrm_apply() { ip -n "$1" -batch -; }

# xfrm_reset NS: removes every SA and policy in NS.
xfrm_reset() { printf 'xfrm state flush\nxfrm policy flush\n' | ip -n "$1" -batch -; }

# xfrm_stats NS: one line per SA in NS, from `ip -s xfrm state`:
#   SPI(0x%08x) PACKETS BYTES REPLAY_WINDOW_DROPS REPLAY_DROPS INTEGRITY_FAILED OSEQ
# One dump for all SAs, because every exec is slow in an emulated guest.
xfrm_stats() {
  ip -n "$1" -s xfrm state | awk '
    function flush() { if (spi != "") printf "%s %s %s %s %s %s %s\n", spi, packets, bytes, rw, rp, fl, oseq }
    /proto esp spi/       { flush(); split($4, s, "("); spi = s[1]; packets = bytes = rw = rp = fl = 0; oseq = "-" }
    /anti-replay context/ { for (i = 1; i <= NF; i++) if ($i == "oseq") { oseq = $(i + 1); sub(/,/, "", oseq) } }
    /lifetime current:/   { getline; gsub(/\(bytes\),|\(packets\)/, ""); bytes = $1; packets = $2 }
    /stats:/              { getline; rw = $2; rp = $4; fl = $6 }
    END { flush() }'
}

# xfrm_sa_stats NS SPI: the xfrm_stats line of one SA without its SPI, or failure.
xfrm_sa_stats() {
  local want; want=$(printf '0x%08x' "$(($2))")
  xfrm_stats "$1" | awk -v want="$want" '$1 == want { $1 = ""; sub(/^ /, ""); print; found = 1 } END { exit !found }'
}

# xfrm_stats_load NS ARRAY: fills the associative ARRAY (declare -A) with SPI → the
# rest of its xfrm_stats line; SPI keys are 0x%08x.
xfrm_stats_load() {
  local -n into=$2
  local spi rest
  while read -r spi rest; do into[$spi]=$rest; done < <(xfrm_stats "$1")
}

# random_hex BYTES: that many random bytes as hex.
random_hex() { od -An -tx1 -N "$1" /dev/urandom | tr -d ' \n'; }
