#!/usr/bin/env bash
# The driven browser (src/sso/devtools_browser) in a real headless Chromium against GlobalProtect-style
# SAML ends served by acs_pages.py on loopback (two host names mapped to 127.0.0.1 by Chromium's
# --host-resolver-rules; every other name fails to resolve, so nothing leaves the machine).
# Chromium runs as the test's user with --no-sandbox (the suite runs as root, where Chromium's
# sandbox refuses to start; as another user the flag is harmless).
#
#   driven_browser.sh MODE SSO_DRIVEN_PROBE
#   acs_headers  redirect gp -> idp (JavaScript) -> gp ACS answering saml-* headers: the result from headers
#   acs_comment  the same, the result only inside an HTML comment of the ACS body (Network.getResponseBody)
#   acs_split    saml-auth-status as a header, the cookie only in the body
#   acs_post     an HTML page (GP's POST binding) whose form posts to the ACS
#   callback     a page whose script goes to globalprotectcallback:<base64>
#   timeout      a login that never ends: a clear timeout error within the bound
#   killed       the browser killed mid-login: "the browser was closed before the login finished", no hang
#   sigint       Ctrl-C (SIGINT to espvpn's side) mid-login: "interrupted", the browser closed
#   not_chromium --sso-browser=/bin/true and a program that does not exist: clear errors at once
#   as_user      root with SUDO_UID of a throw-away user (useradd here, removed after): the browser runs
#                as that user (its processes, its profile dir), never as root; SIGINT cleans up
# Every mode: the probe's trace log holds no proof cookie, no browser process and no profile dir remain.
set -euo pipefail
mode=$1 probe=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v chromium >/dev/null || { echo "SKIP: chromium not installed"; exit 77; }
work=$(mktemp -d /tmp/sso-driven.XXXXXX)
mkdir "$work/tmp"
server_pid=""
probe_pid=""
test_user=""
cleanup() {
  [[ -n $probe_pid ]] && kill "$probe_pid" 2>/dev/null || true
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  [[ -n $test_user ]] && userdel "$test_user" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL $mode: $*"
  for f in "$work"/out "$work"/log; do [[ -f $f ]] && { echo "--- $f"; tail -30 "$f"; }; done
  exit 1
}
secret=$(python3 -c 'import secrets;print(secrets.token_hex(12))')
python3 "$here/acs_pages.py" --ready-file "$work/ready" --secret "$secret" --max-runtime 90 &
server_pid=$!
for ((i = 0; i < 100; i++)); do [[ -f $work/ready ]] && break; sleep 0.1; done
[[ -f $work/ready ]] || fail "acs_pages.py did not start"
port=$(python3 -c "import json;print(json.load(open('$work/ready'))['port'])")
gp=https://gp.espvpn.test:$port
browser="chromium --headless=new --no-sandbox --disable-gpu --ignore-certificate-errors \
--host-resolver-rules='MAP *.espvpn.test 127.0.0.1, MAP * ~NOTFOUND'"

if [[ $mode == as_user ]]; then
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (useradd)"; exit 77; }
  test_user=esso$$
  mkdir "$work/home"
  chmod 711 "$work" "$work/tmp"
  useradd -M -d "$work/home" -s /usr/sbin/nologin "$test_user" || fail "useradd"
  chown "$test_user" "$work/home"
  export SUDO_UID SUDO_USER=$test_user
  SUDO_UID=$(id -u "$test_user")
fi

# probe ARGS...: runs the probe in the background with TMPDIR=$work/tmp (its profile dir goes there).
probe() {
  TMPDIR=$work/tmp "$probe" --browser "$browser" "$@" >"$work/out" 2>"$work/log" &
  probe_pid=$!
}
# finish BOUND: waits up to BOUND s for the probe; its exit status in $rc.
finish() {
  local bound=$1
  for ((i = 0; i < bound * 10; i++)); do kill -0 "$probe_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$probe_pid" 2>/dev/null && fail "the probe did not return within ${bound} s"
  rc=0
  wait "$probe_pid" || rc=$?
  probe_pid=""
}
expect_result() {  # KIND VALUE [BODY]
  finish 40
  [[ $rc -eq 0 ]] || fail "exit $rc"
  grep -q "^kind=$1 user=alice field=prelogin-cookie value=$2 " "$work/out" || fail "expected kind=$1 value=$2"
  [[ -z ${3:-} ]] || grep -q " body=$3\$" "$work/out" || fail "expected body=$3"
}
browser_procs() {  # the browser processes of this run (their command line names our profile dir)
  pgrep -f -- "--user-data-dir=$work/tmp/espvpn-sso-" || true
}

case $mode in
acs_headers) probe --url "$gp/start/headers" --gp; expect_result acs_response "$secret-headers" no ;;
acs_comment) probe --url "$gp/start/comment" --gp; expect_result acs_response "$secret-comment" yes ;;
acs_split) probe --url "$gp/start/split" --gp; expect_result acs_response "$secret-split" yes ;;
acs_post)
  cat >"$work/post.html" <<EOF
<html><body onload="document.forms[0].submit()"><form method="POST" action="$gp/acs-post">
<input type="hidden" name="SAMLResponse" value="fake-assertion"></form></body></html>
EOF
  probe --html-file "$work/post.html" --gp
  expect_result acs_response "$secret-post" no
  ;;
callback)
  probe --url "$gp/callback" --gp
  expect_result callback_url "$secret-callback"
  ;;
timeout)
  probe --url "$gp/never" --gp --timeout 3
  finish 30
  [[ $rc -eq 1 ]] || fail "exit $rc, expected 1"
  grep -q "^error: the login in the browser did not finish within 3 s (--sso-timeout)" "$work/out" ||
    fail "no timeout error"
  ;;
killed | sigint | as_user)
  probe --url "$gp/never" --gp --timeout 60
  # The browser is up once its process names our profile; then its main process (the probe's child) dies.
  main=""
  for ((i = 0; i < 200; i++)); do
    main=$(pgrep -P "$probe_pid" -f -- "--user-data-dir=$work/tmp/espvpn-sso-" || true)
    [[ -n $main ]] && grep -q "watching a page" "$work/log" && break
    sleep 0.1
  done
  [[ -n $main ]] || fail "the browser did not start"
  if [[ $mode == as_user ]]; then
    [[ $(ps -o uid= -p "$main" | tr -d ' ') == "$SUDO_UID" ]] || fail "the browser runs as uid $(ps -o uid= -p "$main")"
    for p in $(browser_procs); do
      [[ $(ps -o uid= -p "$p" | tr -d ' ') != 0 ]] || fail "a browser process runs as root"
    done
    [[ $(stat -c %U "$work"/tmp/espvpn-sso-*) == "$test_user" ]] || fail "the profile is not the user's"
    grep -q "started the browser /usr/bin/chromium (pid [0-9]*) as $test_user" "$work/log" || fail "no log line"
  fi
  if [[ $mode == killed ]]; then
    kill -9 "$main"
    finish 20
    [[ $rc -eq 1 ]] || fail "exit $rc, expected 1"
    grep -q "^error: the browser was closed before the login finished" "$work/out" || fail "no closed-browser error"
  else
    kill -INT "$probe_pid"
    finish 20
    [[ $rc -eq 1 ]] || fail "exit $rc, expected 1"
    grep -q "^error: the login was interrupted (Interrupt)" "$work/out" || fail "no interrupted error"
  fi
  ;;
not_chromium)
  TMPDIR=$work/tmp timeout 20 "$probe" --browser "/bin/true --flag" --url "$gp/never" --gp >"$work/out" 2>"$work/log" &&
    fail "/bin/true accepted"
  grep -q "^error: the browser exited without answering on the DevTools pipe" "$work/out" || fail "no clear error"
  TMPDIR=$work/tmp timeout 20 "$probe" --browser "no-such-browser-$$" --url "$gp/never" --gp >"$work/out" 2>"$work/log" &&
    fail "a missing program accepted"
  grep -q "^error: --sso-browser: no program \"no-such-browser-$$\" found in PATH" "$work/out" || fail "no clear error"
  ;;
*) fail "unknown mode" ;;
esac

if grep -qF -- "$secret" "$work/log"; then fail "a proof cookie is in the log"; fi
for ((i = 0; i < 50; i++)); do [[ -z $(browser_procs) ]] && break; sleep 0.1; done
[[ -z $(browser_procs) ]] || fail "browser processes remain: $(browser_procs | tr '\n' ' ')"
[[ -z $(ls -A "$work/tmp") ]] || fail "the profile directory remains: $(ls "$work/tmp")"
echo "PASS $mode"
