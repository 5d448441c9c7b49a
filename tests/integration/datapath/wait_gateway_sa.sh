#!/bin/sh
# fake-gp-gateway --sa-hook: returns once esp-gateway has loaded the SA file's
# generation (its --status-file says so), so getconfig answers only when the
# gateway already accepts the new keys (as a real gateway would).
#   wait_gateway_sa.sh STATUS_FILE SA_FILE
status=$1 sa=$2
gen=$(sed -n 's/^GENERATION=//p' "$sa")
i=0
while [ $i -lt 500 ]; do
  grep -qx "generation=$gen" "$status" 2>/dev/null && exit 0
  sleep 0.02
  i=$((i + 1))
done
echo "esp-gateway did not load SA generation $gen within 10 s" >&2
exit 1
