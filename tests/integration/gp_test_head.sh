# Sourced first by the drivers that run the GP topology (tools/netns/gp-topology.sh):
#   . "$(dirname "$0")/../gp_test_head.sh" WORK_PREFIX "$@"
# Skips (exit 77) unless root; sets mode, espvpn, gw_bin (the driver's MODE ESPVPN GATEWAY
# arguments), here, repo, dp, work (a fresh temp dir), pids; sources gp-topology.sh; tears
# the topology down on exit; sources lib.sh (fail MESSAGE: the message and the tail of each
# log; wait_until, stats_get, ...).
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
mode=$2 espvpn=$3 gw_bin=$4
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dp=$repo/tests/integration/datapath
work=$(mktemp -d "/tmp/$1.XXXXXX")
# Saved GP portal cookies (docs/GP-LOGIN.md) stay in this test's directory, never the machine's.
export XDG_STATE_HOME=$work/state
pids=()
# shellcheck source=../../tools/netns/gp-topology.sh
. "$repo/tools/netns/gp-topology.sh"
trap topo_cleanup EXIT
trap 'exit 130' INT TERM
# shellcheck source=lib.sh
. "$repo/tests/integration/lib.sh"
