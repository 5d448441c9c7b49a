#!/usr/bin/env bash
# The release binary's hardening, as readelf sees it: PIE, full RELRO (BIND_NOW),
# stack protector and FORTIFY (__*_chk) symbols. (The privilege drop after --setuid is
# checked on a running tunnel by host_background.)
#   hardening.sh ESPVPN_BIN
set -euo pipefail
bin=$1
fail() { echo "FAIL: $*"; exit 1; }
command -v readelf >/dev/null || fail "readelf not found (binutils)"
# Outputs captured first: `readelf | grep -q` under pipefail fails when grep quits early.
header=$(readelf -h "$bin") dynamic=$(readelf -d "$bin") segments=$(readelf -lW "$bin")
grep -q "Type:.*DYN" <<<"$header" || fail "not a position-independent executable ($(grep Type: <<<"$header"))"
grep -q "(FLAGS).*BIND_NOW\|(BIND_NOW)" <<<"$dynamic" || fail "no BIND_NOW (lazy binding)"
grep -q "(FLAGS_1).*PIE" <<<"$dynamic" || fail "DT_FLAGS_1 has no PIE"
grep -q "GNU_RELRO" <<<"$segments" || fail "no GNU_RELRO segment"
! grep "GNU_STACK" <<<"$segments" | grep -q "RWE" || fail "executable stack"
syms=$(readelf --dyn-syms -W "$bin")
grep -q "__stack_chk_fail" <<<"$syms" || fail "no stack protector (__stack_chk_fail not referenced)"
chk=$(grep -o "__[a-z_]*_chk\b" <<<"$syms" | grep -v "^__stack_chk$" | sort -u | tr "\n" " " || true)
[[ -n $chk ]] || fail "no FORTIFY_SOURCE checks (__*_chk) referenced"
echo "RESULT hardening: PIE, BIND_NOW + GNU_RELRO (full RELRO), non-executable stack, __stack_chk_fail, FORTIFY: $chk"
