# shellcheck shell=bash
# Sourced first by the drivers that run espvpn --protocol=anyconnect against Debian's ocserv
# in the shared topology (tests/integration/anyconnect/ocserv_env.sh), as gp_test_head.sh is
# for the fake GP gateway:
#   . "$(dirname "$0")/../ac_test_head.sh" WORK_PREFIX MODE ESPVPN [...]
# Skips (exit 77) unless root with ocserv installed; sets mode, espvpn, here, repo, dp, work (a
# fresh temp dir), pids, url (ocserv's), ca (the --cafile option); sources lib.sh (fail,
# wait_until, stats_get...) and ocserv_env.sh; stops ocserv and tears the topology down on exit.
set -euo pipefail
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
mode=$2 espvpn=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
dp=$repo/tests/integration/datapath
work=$(mktemp -d "/tmp/$1.XXXXXX")
pids=()
# shellcheck source=lib.sh
. "$repo/tests/integration/lib.sh"
# shellcheck source=anyconnect/ocserv_env.sh
. "$repo/tests/integration/anyconnect/ocserv_env.sh"
trap ocserv_cleanup EXIT
trap 'exit 130' INT TERM
url=https://$gw_ip:$oc_port/
ca=(--cafile "$repo/certs/ca.pem")
