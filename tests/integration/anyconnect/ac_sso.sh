#!/usr/bin/env bash
# AnyConnect single sign-on (sso-v2, issue 19) end to end: espvpn --authenticate against
# fake_ac_sso.py (an AnyConnect server and its identity provider on loopback, two host names),
# the login done in a real headless Chromium that espvpn starts and drives (--sso-browser).
# The IdP's page builds its form with JavaScript; its own script types the user name and password
# (--autofill, the test's stand-in for the user), so the browser stays a real browser.
# Chromium runs as the test's user with --no-sandbox (as root its sandbox refuses to start).
#
#   ac_sso.sh MODE ESPVPN_BIN
#   ok              capabilities = single-sign-on-v2 only; the token posted back as <sso-token>; the printed
#                   cookie is accepted by the server's session check; -vvv --dump-http-traffic shows neither
#                   token nor cookie
#   no_browser      no browser flow (-u --passwd-on-stdin and no browser option: the manual hand-off): no
#                   <capabilities> sent, a clear error naming --sso-browser, one request
#   default_v2      no option at all: the default external flow is advertised (single-sign-on-external-browser
#                   only); the server's sso-v2 form is then a clear error naming --sso-browser
#   wrong_password  the IdP refuses the password: espvpn keeps waiting (the browser open) until Ctrl-C
#                   (SIGINT), which ends it cleanly; no crash, nothing posted to the server
#   idp_error       the IdP sets the sso-v2-error-cookie-name cookie: its reason reported, exit 1
#   external        the form's sso-v2-browser-mode is external: AcLogin (ac_sso_login_probe, a test double for
#                   the external browser) advertises single-sign-on-external-browser only with a STRAP key
#                   on every request, hands it the sso-v2-login URL and loopback port 29786, opens the
#                   token the server encrypted to that key (what the loopback request carries), posts it
#                   back, gets the cookie
#   external_driven the same form with only --sso-browser: a clear error (the driven browser cannot see the
#                   loopback redirect), single-sign-on-v2 advertised, nothing posted
#   external_refused the stand-in browser returns a token the server refuses (STRAP-encrypted): one
#                   auth-reply, then a clear error with the server's reason (no second round in the browser)
#   external_plain  the stand-in browser returns the right token, but in the clear although STRAP was offered
#                   (what a local process injecting its own login would send): refused before anything is
#                   posted, a clear error
#   external_real   the external mode end to end: espvpn's external browser (--external-browser=PROGRAM, a
#                   wrapper starting headless Chromium) opens the
#                   IdP, the ACS sends Chromium to localhost:29786/api/sso/<STRAP-encrypted token>, espvpn's
#                   loopback listener takes it, espvpn opens it, the printed cookie is accepted; the
#                   session is under its seccomp filter while the browser (started by the launcher) is not
#   (ac_sso.sh external|external_refused|external_plain PROBE: ESPVPN_BIN is then the probe)
set -euo pipefail
mode=$1 espvpn=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
command -v chromium >/dev/null || { echo "SKIP: chromium not installed"; exit 77; }
work=$(mktemp -d /tmp/ac-sso.XXXXXX)
mkdir "$work/tmp"
server_pid=""
espvpn_pid=""
cleanup() {
  [[ -n $espvpn_pid ]] && kill "$espvpn_pid" 2>/dev/null || true
  # The detached external browser (external_real): killed, then gone before its profile is removed.
  pkill -KILL -f -- "--user-data-dir=$work/ext-profile" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do pgrep -f -- "--user-data-dir=$work/ext-profile" >/dev/null || break; sleep 0.1; done
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL $mode: $*"
  for f in "$work"/out "$work"/log "$work"/record.json; do [[ -f $f ]] && { echo "--- $f"; tail -40 "$f"; }; done
  exit 1
}
server_args=()
case $mode in
ok | no_browser | default_v2) server_args=(--autofill "alice:correct horse") ;;
wrong_password) server_args=(--autofill "alice:wrong") ;;
idp_error) server_args=(--autofill "alice:correct horse" --idp-error "Access denied by policy") ;;
external_real)
  server_args=(--loopback-redirect --autofill "alice:correct horse")
  ;;
external | external_driven | external_plain)
  ext_token=$(python3 -c 'import secrets;print(secrets.token_hex(16))')
  server_args=(--external-token "$ext_token" --blob-file "$work/blob")
  ;;
external_refused)
  ext_token=$(python3 -c 'import secrets;print(secrets.token_hex(16))')
  server_args=(--external-token "$ext_token" --blob-file "$work/blob" --blob-token "not${ext_token}")
  ;;
*) fail "unknown mode" ;;
esac
python3 "$here/fake_ac_sso.py" --ready-file "$work/ready" --record "$work/record.json" --max-runtime 90 \
  "${server_args[@]}" &
server_pid=$!
for ((i = 0; i < 100; i++)); do [[ -f $work/ready ]] && break; sleep 0.1; done
[[ -f $work/ready ]] || fail "fake_ac_sso.py did not start"
port=$(python3 -c "import json;print(json.load(open('$work/ready'))['port'])")
url=https://vpn.espvpn.test:$port/
browser="chromium --headless=new --no-sandbox --disable-gpu --ignore-certificate-errors \
--host-resolver-rules='MAP *.espvpn.test 127.0.0.1, MAP * ~NOTFOUND'"
# The external browser is the user's own, detached from espvpn: a wrapper with a profile of ours, killed at the end.
# It notes its own seccomp mode and the session process's (espvpn's process of this run that
# is not root's) where it may write: the browser starts outside the session's filter.
cat >"$work/browser.sh" <<EOF
#!/bin/sh
for p in \$(pgrep -x espvpn); do
  grep -q "vpn.espvpn.test:$port" /proc/\$p/cmdline 2>/dev/null || continue
  [ "\$(awk '/^Uid:/ {print \$2}' /proc/\$p/status)" = 0 ] || echo "session \$(awk '/^Seccomp:/ {print \$2}' /proc/\$p/status)"
done >$work/ext-profile/seccomp.txt
echo "browser \$(awk '/^Seccomp:/ {print \$2}' /proc/self/status)" >>$work/ext-profile/seccomp.txt
exec chromium --headless=new --no-sandbox --disable-gpu --ignore-certificate-errors --user-data-dir=$work/ext-profile \
  --host-resolver-rules="MAP *.espvpn.test 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE localhost" "\$@"
EOF
chmod +x "$work/browser.sh"
# It runs as espvpn's session user (nobody when root runs espvpn, as here): a way in, a profile it may write.
chmod 711 "$work"
mkdir -m 777 "$work/ext-profile"
rec() { python3 -c "import json;r=json.load(open('$work/record.json'));print($1)"; }

# espvpn RC ARGS...: --authenticate at -vvv with the test CA, must exit RC (bounded by timeout 60).
run() {
  local want=$1; shift
  rc=0
  TMPDIR=$work/tmp timeout 60 "$espvpn" --protocol=anyconnect --authenticate -vvv --cafile "$repo/certs/ca.pem" \
    --resolve vpn.espvpn.test:127.0.0.1 "$@" "$url" </dev/null >"$work/out" 2>"$work/log" || rc=$?
  [[ $rc -eq $want ]] || fail "espvpn exit $rc, expected $want"
}
no_leftovers() {
  for ((i = 0; i < 50; i++)); do
    [[ -z $(pgrep -f -- "--user-data-dir=$work/tmp/espvpn-sso-" || true) ]] && break
    sleep 0.1
  done
  [[ -z $(pgrep -f -- "--user-data-dir=$work/tmp/espvpn-sso-" || true) ]] || fail "browser processes remain"
  [[ -z $(ls -A "$work/tmp") ]] || fail "the browser profile remains"
}

case $mode in
ok)
  run 0 --sso-browser="$browser" --dump-http-traffic
  [[ $(rec "r['init'][0]['capabilities']") == "['single-sign-on-v2']" ]] || fail "capabilities sent: $(rec "r['init']")"
  [[ $(rec "r['idp_attempts']") == "[{'user': 'alice', 'ok': True, 'proof': True}]" ]] || fail "IdP attempts"
  [[ $(rec "r['auth_replies']") == "[{'token_ok': True, 'opaque_ok': True}]" ]] || fail "the token was not posted back"
  token=$(rec "r['tokens'][0]")
  webvpn=$(rec "r['webvpn'][0]")
  grep -qx "COOKIE='webvpn=$webvpn'" "$work/out" || fail "the printed cookie is not the one issued"
  # The server accepts the printed cookie (an ocserv-independent tunnel needs a CSTP server; this is the verdict).
  check=$(curl -s --max-time 10 --cacert "$repo/certs/ca.pem" --resolve "vpn.espvpn.test:$port:127.0.0.1" \
    -b "webvpn=$webvpn" "https://vpn.espvpn.test:$port/+CSCOE+/session")
  [[ $check == "session ok" ]] || fail "the server refused the cookie: $check"
  bad=$(curl -s --max-time 10 --cacert "$repo/certs/ca.pem" --resolve "vpn.espvpn.test:$port:127.0.0.1" \
    -b "webvpn=${webvpn}x" "https://vpn.espvpn.test:$port/+CSCOE+/session")
  [[ $bad == "no session" ]] || fail "the session check accepts any cookie"
  for s in "$token" "$webvpn"; do
    if grep -qF -- "$s" "$work/log"; then fail "a secret is in the -vvv log"; fi
  done
  if grep -qF -- "$token" "$work/out"; then fail "the SSO token is on stdout"; fi
  grep -q "single sign-on for vpn.espvpn.test in the browser" "$work/log" || fail "no SSO log line"
  ;;
default_v2)
  run 1
  grep -q "wants a single sign-on in a browser (single-sign-on-v2), and the configured browser cannot finish it: give --sso-browser" \
    "$work/log" || fail "no clear error"
  [[ $(rec "r['init'][0]['capabilities']") == "['single-sign-on-external-browser']" ]] || fail "capabilities sent: $(rec "r['init']")"
  [[ $(rec "len(r['init'])") == 1 && $(rec "len(r.get('auth_replies', []))") == 0 ]] ||
    fail "more requests after the SSO form"
  ;;
no_browser)
  rc=0
  echo "not-a-password" | TMPDIR=$work/tmp timeout 60 "$espvpn" --protocol=anyconnect --authenticate -vvv \
    --cafile "$repo/certs/ca.pem" --resolve vpn.espvpn.test:127.0.0.1 -u alice --passwd-on-stdin "$url" \
    >"$work/out" 2>"$work/log" || rc=$?
  [[ $rc -eq 1 ]] || fail "espvpn exit $rc, expected 1"
  grep -q "wants a single sign-on in a browser (single-sign-on-v2), and no browser flow is configured: give --sso-browser" \
    "$work/log" || fail "no clear error"
  [[ $(rec "r['init'][0]['has_capabilities']") == False ]] || fail "capabilities were advertised without a browser"
  [[ $(rec "len(r['init'])") == 1 && $(rec "len(r.get('auth_replies', []))") == 0 ]] ||
    fail "more requests after the SSO form"
  ;;
wrong_password)
  # Condition-based: once the IdP has shown its "Wrong password" page espvpn must still be waiting;
  # then Ctrl-C ends it cleanly (the timeout itself: sso_driven_timeout).
  TMPDIR=$work/tmp "$espvpn" --protocol=anyconnect --authenticate -vvv --cafile "$repo/certs/ca.pem" \
    --resolve vpn.espvpn.test:127.0.0.1 --sso-browser="$browser" --sso-timeout=120 "$url" \
    </dev/null >"$work/out" 2>"$work/log" &
  espvpn_pid=$!
  for ((i = 0; i < 300; i++)); do
    [[ $(rec "[p for p in r.get('idp_pages', []) if p['failed']] != []") == True ]] && break
    kill -0 "$espvpn_pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ $(rec "[p for p in r.get('idp_pages', []) if p['failed']] != []") == True ]] || fail "the IdP never showed its failure page"
  sleep 1  # can only let a wrong early exit show; never makes the test fail when espvpn is right
  kill -0 "$espvpn_pid" 2>/dev/null || fail "espvpn stopped waiting after the wrong password"
  kill -INT "$espvpn_pid"
  for ((i = 0; i < 200; i++)); do kill -0 "$espvpn_pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$espvpn_pid" 2>/dev/null && fail "espvpn did not end on SIGINT"
  rc=0
  wait "$espvpn_pid" || rc=$?
  [[ $rc -eq 1 ]] || fail "espvpn exit $rc after SIGINT, expected 1"
  grep -q "the login was interrupted (Interrupt)" "$work/log" || fail "no interrupted error"
  [[ $(rec "r['idp_attempts']") == "[{'user': 'alice', 'ok': False, 'proof': True}]" ]] || fail "IdP attempts"
  [[ $(rec "len(r.get('auth_replies', []))") == 0 ]] || fail "something was posted back"
  ;;
idp_error)
  run 1 --sso-browser="$browser"
  grep -q 'the identity provider refused the login (cookie acSamlv2Error: "Access%20denied%20by%20policy")' \
    "$work/log" || fail "the IdP's error is not reported"
  [[ $(rec "len(r.get('auth_replies', []))") == 0 ]] || fail "something was posted back"
  ;;
external)
  rc=0
  timeout 30 "$espvpn" "$url" --cafile "$repo/certs/ca.pem" --resolve vpn.espvpn.test:127.0.0.1 \
    --token-file "$work/blob" >"$work/out" 2>"$work/log" || rc=$?
  [[ $rc -eq 0 ]] || fail "probe exit $rc"
  [[ $(rec "r['init'][0]['capabilities']") == "['single-sign-on-external-browser']" ]] ||
    fail "capabilities sent: $(rec "r['init']")"
  grep -qxF "asked url=https://vpn.espvpn.test:$port/+CSCOE+/saml/sp/login?tgname=saml&acsamlcap=v2 loopback_port=29786 final_url=" \
    "$work/out" || fail "the browser was not asked for the external flow"
  [[ $(rec "r['auth_replies']") == "[{'token_ok': True, 'opaque_ok': True}]" ]] || fail "the token was not posted back"
  grep -qx "webvpn=$(rec "r['webvpn'][0]")" "$work/out" || fail "not the issued cookie"
  # STRAP: one key on every request (both headers), the token came back encrypted to it.
  [[ $(rec "len(set(r['strap_keys']))") == 1 && $(rec "r['strap_keys'][0].startswith('MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE')") == True ]] ||
    fail "STRAP keys sent: $(rec "r['strap_keys']")"
  grep -q "^/api/sso/" "$work/blob" || fail "no STRAP blob was made"
  if grep -qF -- "$ext_token" "$work/log"; then fail "the token is in the log (--dump-http-traffic, trace)"; fi
  ;;
external_refused)
  rc=0
  timeout 30 "$espvpn" "$url" --cafile "$repo/certs/ca.pem" --resolve vpn.espvpn.test:127.0.0.1 \
    --token-file "$work/blob" >"$work/out" 2>"$work/log" || rc=$?
  [[ $rc -eq 1 ]] || fail "probe exit $rc, expected 1"
  grep -q "^error: the server vpn.espvpn.test refused the single sign-on token (Invalid SSO token)" "$work/out" ||
    fail "no clear error"
  [[ $(rec "r['auth_replies']") == "[{'token_ok': False, 'opaque_ok': True}]" ]] || fail "auth replies: $(rec "r['auth_replies']")"
  [[ $(grep -c "^asked " "$work/out") == 1 ]] || fail "the browser was asked more than once"
  ;;
external_plain)
  rc=0
  timeout 30 "$espvpn" "$url" --cafile "$repo/certs/ca.pem" --resolve vpn.espvpn.test:127.0.0.1 \
    --token "$ext_token" >"$work/out" 2>"$work/log" || rc=$?
  [[ $rc -eq 1 ]] || fail "probe exit $rc, expected 1"
  grep -q "^error: single sign-on: the browser's return carried a plain token, not one encrypted to the STRAP key" \
    "$work/out" || fail "no clear error"
  [[ $(rec "r.get('auth_replies', [])") == "[]" ]] || fail "a plain token was posted: $(rec "r.get('auth_replies')")"
  ;;
external_real)
  run 0 --external-browser="$work/browser.sh"
  # The session under its seccomp filter, the browser (started by the launcher) outside it.
  [[ $(cat "$work/ext-profile/seccomp.txt") == $'session 2\nbrowser 0' ]] ||
    fail "seccomp modes (session, browser): $(cat "$work/ext-profile/seccomp.txt")"
  [[ $(rec "r['init'][0]['capabilities']") == "['single-sign-on-external-browser']" ]] ||
    fail "capabilities sent: $(rec "r['init']")"
  [[ $(rec "r['loopback_redirects']") == "[{'strap': True}]" ]] || fail "no STRAP redirect: $(rec "r.get('loopback_redirects')")"
  [[ $(rec "r['auth_replies']") == "[{'token_ok': True, 'opaque_ok': True}]" ]] || fail "the token was not posted back"
  webvpn=$(rec "r['webvpn'][0]")
  grep -qx "COOKIE='webvpn=$webvpn'" "$work/out" || fail "the printed cookie is not the one issued"
  check=$(curl -s --max-time 10 --cacert "$repo/certs/ca.pem" --resolve "vpn.espvpn.test:$port:127.0.0.1" \
    -b "webvpn=$webvpn" "https://vpn.espvpn.test:$port/+CSCOE+/session")
  [[ $check == "session ok" ]] || fail "the server refused the cookie: $check"
  for s in "$(rec "r['tokens'][0]")" "$webvpn"; do
    if grep -qF -- "$s" "$work/log"; then fail "a secret is in the -vvv log"; fi
  done
  ;;
external_driven)
  run 1 --sso-browser="$browser"
  grep -q "wants a single sign-on in a browser (single-sign-on-external-browser), and the configured browser cannot finish it: give --external-browser" \
    "$work/log" || fail "no clear error"
  [[ $(rec "r['init'][0]['capabilities']") == "['single-sign-on-v2']" ]] || fail "capabilities sent: $(rec "r['init']")"
  [[ $(rec "len(r.get('auth_replies', []))") == 0 ]] || fail "something was posted back"
  ;;
esac
no_leftovers
echo "PASS $mode"
