# shellcheck shell=bash
# Sourced by the integration drivers (after they set work, the test's temp dir): the helpers
# every suite needs, once. tools/netns/gp-topology.sh (sourced before or after this) adds the
# topology and its own json / wait_for (a log pattern) / wait_listening / sigint_exit.
#   fail MESSAGE...           FAIL line, the tail of each log in $work (*.out, *.log and the
#                             files in $fail_logs), exit 1
#   wait_until SECONDS CMD... run CMD every 0.1 s until it succeeds, for SECONDS at most
#                             (wall clock); returns 1 on time-out
#   stats_get FILE EXPR       the Python EXPR over d, the JSON object in FILE (an espvpn
#                             --stats-json file); empty output and status 1 if it is unreadable
#   stats_wait FILE EXPR SECONDS   until EXPR over FILE is True (the file is rewritten every
#                             second: a read after a fixed sleep may see it from before the event)
#   no_tun_left NS            no tun device left in namespace NS
#   peak_rss_mb PID           VmHWM of PID in MiB
#   private_bus_up NS         a system-type dbus-daemon on $work/bus in namespace NS that anyone
#                             may own names on and call (bus_pid; the pid joins pids)
#   session_of PID            the session process of espvpn's broker PID (its one espvpn child,
#                             docs/SECURITY.md "Who holds what"); PID itself when it has none
#   pipelines_confined PID MIN   every packet pipeline thread of PID's session process (esp-, dtls-,
#                             tls- tx/rx) runs under a seccomp filter with no_new_privs, and there
#                             are at least MIN of them; else says which one is not (status 1)
#   privsep_checked PID       the privilege split of a running tunnel: the broker PID is uid 0 with
#                             CapEff = CapPrm = CapBnd = CAP_NET_ADMIN only, NoNewPrivs 1; its session
#                             process has uid != 0, CapEff 0, NoNewPrivs 1, Seccomp 2 (unless
#                             ESPVPN_SECCOMP=0); else says what (status 1)
#   landlock_expected         the Landlock ABI the session process applies here: the kernel's
#                             (landlock_create_ruleset's version), 0 without Landlock or with
#                             ESPVPN_LANDLOCK=0
#   rss_limit_mb BIN LIMIT [ASAN_LIMIT]   LIMIT, or for an AddressSanitizer build of BIN ASAN_LIMIT
#                             (default 4 x LIMIT: freed memory sits in ASan's quarantine)
lib_py=/usr/bin/python3; [[ -x $lib_py ]] || lib_py=python3
fail_logs=()

fail() {
  echo "FAIL: $*"
  local f
  for f in "$work"/*.out "$work"/*.log ${fail_logs[@]+"${fail_logs[@]}"}; do
    [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }
  done
  exit 1
}

wait_until() {
  local end=$((SECONDS + $1 + 1)); shift
  while ((SECONDS < end)); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

stats_get() {
  $lib_py -c 'import json, sys
try:
    d = json.load(open(sys.argv[1]))
    print(eval(sys.argv[2]))
except Exception:
    sys.exit(1)' "$1" "$2" 2>/dev/null
}

stats_wait() {
  local end=$((SECONDS + $3 + 1))
  while ((SECONDS < end)); do
    [[ $(stats_get "$1" "$2") == True ]] && return 0
    sleep 0.2
  done
  return 1
}

session_of() {
  local kids
  kids=$(pgrep -P "$1" -x espvpn 2>/dev/null | head -2)
  if [[ -n $kids && $kids != *$'\n'* ]]; then echo "$kids"; else echo "$1"; fi
}

status_field() { awk -v f="$2:" '$1 == f {print $2; exit}' "/proc/$1/status" 2>/dev/null; }

privsep_checked() {
  local broker=$1 session f v
  session=$(session_of "$broker")
  [[ $session != "$broker" ]] || { echo "pid $broker has no session process"; return 1; }
  [[ $(status_field "$broker" Uid) == 0 ]] || { echo "the broker $broker is not uid 0"; return 1; }
  for f in CapEff CapPrm CapBnd; do
    v=$(status_field "$broker" $f)
    [[ $v == 0000000000001000 ]] || { echo "the broker $broker has $f $v, expected CAP_NET_ADMIN only (0000000000001000)"; return 1; }
  done
  [[ $(status_field "$broker" NoNewPrivs) == 1 ]] || { echo "the broker $broker has no NoNewPrivs"; return 1; }
  v=$(status_field "$session" Uid)
  [[ -n $v && $v != 0 ]] || { echo "the session process $session runs as uid '$v'"; return 1; }
  v=$(status_field "$session" CapEff)
  [[ $v == 0000000000000000 ]] || { echo "the session process $session has CapEff $v"; return 1; }
  [[ $(status_field "$session" NoNewPrivs) == 1 ]] || { echo "the session process $session has no NoNewPrivs"; return 1; }
  # confine_session's seccomp filter (mode 2), unless the test turned the filters off.
  if [[ ${ESPVPN_SECCOMP:-} != 0 ]]; then
    v=$(status_field "$session" Seccomp)
    [[ $v == 2 ]] || { echo "the session process $session has Seccomp '$v', expected 2 (confine_session)"; return 1; }
  fi
}

pipelines_confined() {
  local pid n=0 t comm min=$2
  pid=$(session_of "$1")
  for t in /proc/"$pid"/task/*; do
    comm=$(cat "$t/comm" 2>/dev/null) || continue
    [[ $comm =~ ^(esp|dtls|tls)-(tx|rx)$ ]] || continue
    if ! grep -q $'^Seccomp:\t2$' "$t/status" || ! grep -q $'^NoNewPrivs:\t1$' "$t/status"; then
      echo "thread $comm (${t##*/}) is not confined: $(grep -E '^(Seccomp|NoNewPrivs):' "$t/status" | tr '\n\t' '  ')"
      return 1
    fi
    n=$((n + 1))
  done
  ((n >= min)) || { echo "$n pipeline threads of pid $pid found, expected at least $min"; return 1; }
}

landlock_expected() {
  [[ ${ESPVPN_LANDLOCK:-} == 0 ]] && { echo 0; return; }
  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): 444 on every architecture
  $lib_py -c 'import ctypes; v = ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1); print(max(v, 0))'
}

no_tun_left() { ! ip -n "$1" -o link show type tun 2>/dev/null | grep -q .; }

peak_rss_mb() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$1/status"; }

rss_limit_mb() {
  if [[ $(readelf --dyn-syms -W "$1" 2>/dev/null) == *__asan_init* ]]; then echo "${3:-$(($2 * 4))}"; else echo "$2"; fi
}

private_bus_up() {
  cat >"$work/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=$work/bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow eavesdrop="false"/></policy>
</busconfig>
CONF
  chmod o+x "$work"  # espvpn's session process (not root) connects to it too, as to the real system bus
  ip netns exec "$1" dbus-daemon --config-file="$work/bus.conf" --nofork --nopidfile >"$work/bus.log" 2>&1 &
  bus_pid=$!; pids+=("$bus_pid")
  wait_until 5 test -S "$work/bus" || fail "the private bus did not start"
}
