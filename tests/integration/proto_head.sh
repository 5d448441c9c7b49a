# shellcheck shell=bash
# Sourced first by the drivers that run for both protocols, whose first argument is the protocol:
#   . "$(dirname "$0")/../proto_head.sh" WORK_PREFIX "$@"     (the driver's args: gp|ac MODE ESPVPN [GATEWAY])
# Sets proto, then sources gp_test_head.sh (the fake GP gateway) or ac_test_head.sh (ocserv)
# with WORK_PREFIX MODE ESPVPN [GATEWAY].
proto=${2:-}
case $proto in
gp)
  # shellcheck source=gp_test_head.sh
  . "${BASH_SOURCE[0]%/*}/gp_test_head.sh" "$1" "${@:3}" ;;
ac)
  # shellcheck source=ac_test_head.sh
  . "${BASH_SOURCE[0]%/*}/ac_test_head.sh" "$1" "${@:3}" ;;
*) echo "usage: $0 gp|ac MODE ESPVPN [GATEWAY]" >&2; exit 2 ;;
esac
