#!/usr/bin/env bash
# The release binary's hardening, as readelf sees it: PIE, full RELRO (BIND_NOW),
# stack protector and FORTIFY (__*_chk) symbols. (The privilege drop after --setuid is
# checked on a running tunnel by host_background.)
#   hardening.sh ESPVPN_BIN
set -euo pipefail
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
command -v readelf >/dev/null || fail "readelf not found (binutils)"
readelf -h "$bin" | grep -q "Type:.*DYN" || fail "not a position-independent executable (ELF type $(readelf -h "$bin" | sed -n 's/.*Type: *//p'))"
readelf -d "$bin" | grep -q "(FLAGS).*BIND_NOW" || readelf -d "$bin" | grep -q "(BIND_NOW)" || fail "no BIND_NOW (lazy binding)"
readelf -d "$bin" | grep -q "(FLAGS_1).*PIE" || fail "DT_FLAGS_1 has no PIE"
readelf -lW "$bin" | grep -q "GNU_RELRO" || fail "no GNU_RELRO segment"
readelf -lW "$bin" | grep "GNU_STACK" | grep -q "RWE" && fail "executable stack"
syms=$(readelf --dyn-syms -W "$bin")
grep -q "__stack_chk_fail" <<<"$syms" || fail "no stack protector (__stack_chk_fail not referenced)"
chk=$(grep -o "__[a-z_]*_chk\b" <<<"$syms" | grep -v "^__stack_chk$" | sort -u | tr '\n' ' ')
[[ -n $chk ]] || fail "no FORTIFY_SOURCE checks (__*_chk) referenced"
echo "RESULT hardening: PIE, BIND_NOW + GNU_RELRO (full RELRO), non-executable stack, __stack_chk_fail, FORTIFY: $chk"
