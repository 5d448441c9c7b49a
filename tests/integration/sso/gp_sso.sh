#!/usr/bin/env bash
# GlobalProtect single sign-on through a real headless Chromium (docs/SSO.md, issue 19).
# The fake GP portal + gateway (tools/fake-gp-gateway --idp) answers prelogin with SAML and
# serves a fake identity provider under two host names (idp-a.test sends the browser to
# idp-b.test's sign-in form, which submits only with JavaScript); its ACS sends the browser to
# globalprotectcallback:<base64> ("default browser" mode). espvpn runs as root in the client
# namespace with SUDO_UID of a throw-away user, so it starts the browser "program"
# (chromium_user.py: Chromium over --remote-debugging-pipe, the user typing into the form) as
# that user; the program hands the callback to espvpn as xdg-open would, by the Exec line of
# the built desktop entry (espvpn --sso-callback %u) over the per-user socket.
#
#   gp_sso.sh MODE ESPVPN GATEWAY_BIN DESKTOP_FILE [AUTH_DIALOG]
#   tunnel:   portal SAML (POST: espvpn saves the IdP form for the browser) and gateway SAML
#             (REDIRECT): one IdP sign-in (the portal's cookie replayed at the gateway), ESP up,
#             ping through the tunnel, SIGINT: logout; no SAML cookie or callback URL in -vvv;
#             the session under its seccomp filter (privsep_checked) with --external-browser
#   gateway:  --usergroup gateway, REDIRECT: --authenticate, the gateway takes the cookie
#   replay:   portal and gateway SAML, no portal cookie: the portal's prelogin-cookie replayed
#             at the gateway (one sign-in, no gateway prelogin)
#   timeout:  the user never signs in: --sso-timeout 12 ends the login, naming the option;
#             SIGINT while waiting ends it too (exit 1), the callback socket removed
#   password: a wrong password first (the IdP shows its form again, espvpn keeps waiting),
#             then the right one: logged in
#   forged:   a callback when no login waits (refused), garbage while one waits (refused, it
#             keeps waiting), the real one (accepted), the same again (refused: used); a
#             well-formed callback with a made-up cookie: the gateway refuses it (exit 2)
#   peer:     another local user cannot reach the socket's directory; with the directory and
#             socket opened to all (as a careless admin might) the peer check still refuses it
#   xdg:      neither option, a display: xdg-open (a stand-in in PATH) as the user, DISPLAY passed;
#             started by the browser launcher (the user, CapEff 0, NoNewPrivs, no filter) while
#             the session is under its seccomp filter (Seccomp 2)
#   paste:    no display, no --external-browser: espvpn prints the IdP URL and no browser
#             starts; the callback pasted on stdin logs in
#   driven:   --sso-browser (espvpn drives Chromium itself over DevTools; the IdP page's script
#             types for the user: fake-gp-gateway --idp-autofill), no default-browser mode: the
#             ACS answers with the result in an HTML comment; portal POST + gateway REDIRECT,
#             one sign-in, ESP up, ping; no Chromium or profile left behind; then a second run
#             with a browser that cannot start (--sso-browser=false) and nothing to type: the
#             portal cookie the first run saved logs in, ESP up, ping, still one IdP sign-in
#   driven_headers: the same at a gateway alone, the result in the ACS reply's headers only;
#             --authenticate prints a cookie the gateway took
#   nm_dialog: NetworkManager's auth dialog (classic protocol, as nm-applet runs it: the
#             profile on stdin, no terminal) for a profile with external-browser=PROGRAM: it
#             runs espvpn --authenticate, the browser signs in, the dialog answers cookie and
#             gateway; the cookie logs in to the gateway (a connect with --cookie-on-stdin)
#   nm_dialog_cookie: the same dialog for a portal with SAML that hands out an authentication-
#             override cookie: the first login signs in through the browser, and espvpn (run by
#             the dialog for the user) saves the cookie in the user's state directory; a second
#             dialog login with a browser that cannot start answers a gateway cookie at once
# shellcheck source=../gp_test_head.sh
. "$(dirname "$0")/../gp_test_head.sh" gp-sso "$1" "$2" "$3"
desktop=$(realpath "$4") espvpn=$(realpath "$espvpn") dialog=${5:-}
[[ -x /usr/bin/chromium ]] || { echo "SKIP: no /usr/bin/chromium"; exit 77; }
command -v useradd >/dev/null || { echo "SKIP: no useradd"; exit 77; }

user=espsso$$ other=espsso$$x
useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$other"
uid=$(id -u "$user") other_uid=$(id -u "$other")
chmod 755 "$work"  # the user's browser program reads its config and writes its log here
mkdir "$work/user-tmp"; chown "$user" "$work/user-tmp"  # its Chromium profile (removed with $work)
# driver_stop: the browser program and its Chromium (by PID), gone within 15 s.
driver_stop() {
  local p
  for p in $(cat "$work"/driver.pid 2>/dev/null); do kill -TERM "$p" 2>/dev/null || true; done
  for p in $(cat "$work"/driver.pid 2>/dev/null); do
    timeout 15 tail --pid="$p" -f /dev/null || kill -KILL "$p" 2>/dev/null || true
  done
}
cleanup() {
  driver_stop
  topo_cleanup
  # userdel refuses a user with a process still running (a Chromium child on its way out).
  local u i
  for u in "$user" "$other"; do
    for ((i = 0; i < 50; i++)); do userdel "$u" 2>/dev/null && break; sleep 0.1; done
    getent passwd "$u" >/dev/null && userdel -f "$u" 2>/dev/null || true
  done
  rm -rf "/run/espvpn-sso/$uid" "/run/espvpn-sso/$other_uid"
}
trap cleanup EXIT

as_user() { ip netns exec "$nsc" setpriv --reuid="$1" --regid="$(id -g "$1")" --init-groups -- "${@:2}"; }
topo_up
fake_routes=(--route 10.202.0.0/24 --route6 fd00:202::/64)

# driver_config PASSWORDS... : the browser program's config (one password per sign-in form).
driver_config() {
  driver_stop
  local pw; pw=$(printf '"%s",' "$@"); pw="[${pw%,}]"
  cat >"$work/driver.json" <<JSON
{"user": "alice", "passwords": $pw, "log": "$work/driver.log", "pidfile": "$work/driver.pid",
 "resolver_rules": "MAP idp-a.test $gw_ip, MAP idp-b.test $gw_ip",
 "desktop": "${handler:-$desktop}", "espvpn": "$espvpn", "callback_out": "$work/callback.url",
 "tmp": "$work/user-tmp", "chromium_log": "$work/chromium.log", "deadline": ${driver_deadline:-40}}
JSON
  : >"$work/driver.log"; : >"$work/callback.url"; : >"$work/driver.pid"; : >"$work/chromium.log"
  chmod 644 "$work/driver.json"; chown "$user" "$work/driver.log" "$work/callback.url" "$work/driver.pid" "$work/chromium.log"
}

# run_espvpn ARGS...: espvpn as root with SUDO_UID of the test user, in the client namespace, -vvv.
run_espvpn() {
  rm -f "$work/espvpn.out" "$work/espvpn.log"
  ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY SUDO_UID="$uid" SUDO_USER="$user" \
    "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -vvv --sso-timeout 45 \
    --external-browser="$here/chromium_user.py $work/driver.json" "$@" \
    >"$work/espvpn.out" 2>"$work/espvpn.log" </dev/null &
  client_pid=$!; pids+=("$client_pid")
}

finish() {  # PID: waits up to 60 s (its --sso-timeout is 45 s); sets rc
  rc=0
  timeout 60 tail --pid="$1" -f /dev/null || kill -KILL "$1" 2>/dev/null || true
  wait "$1" || rc=$?
}

no_secrets() {  # every SAML cookie and portal cookie the fake issued, and the callback URL, absent
  local s leaked=0
  for s in $(json "$work/fake-stats.json" '" ".join(d.get("issued_secrets", []))'); do
    grep -qF -- "$s" "$work/espvpn.log" "$work/espvpn.out" && { echo "leaked: ${s:0:4}..."; leaked=1; }
  done
  if [[ -s $work/callback.url ]]; then
    s=$(cut -d: -f2- "$work/callback.url" | head -c 40)
    grep -qF -- "$s" "$work/espvpn.log" "$work/espvpn.out" && { echo "leaked: the callback URL"; leaked=1; }
  fi
  [[ $(json "$work/fake-stats.json" 'len(d.get("issued_secrets", []))') -ge 1 ]] || fail "no secret issued to check for"
  ((leaked == 0)) || fail "a SAML secret is in espvpn's -vvv output"
}

idp=(--idp --saml-default-browser)
case $mode in
tunnel)
  gateway_up aes-128-gcm --portal-saml POST --gw-saml REDIRECT --portal-cookie --gw-cookie-only "${idp[@]}" \
    || fail "fake gateway did not start"
  driver_config secret
  run_espvpn "https://$gw_outer:4443/"
  wait_for "$work/espvpn.log" "ESP connected" 60 "$client_pid" || fail "espvpn did not bring ESP up"
  # --external-browser: the session is under its seccomp filter all the same (the browser
  # was started by the launcher, forked before the filter).
  privsep_checked "$client_pid" || fail "the privilege split with --external-browser"
  ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip through the tunnel"
  [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_ok", 0)') -eq 1 ]] || fail "not exactly one IdP sign-in"
  [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'portal-userauthcookie': 1}" ]] \
    || fail "the gateway was not logged in by the portal's cookie: $(json "$work/fake-stats.json" 'd["login_via"]')"
  grep -q "handler exit 0" "$work/driver.log" || fail "the desktop entry's handler did not succeed"
  grep -q "page .*/espvpn-sso-.*/login.html" "$work/driver.log" || fail "the portal's POST form was not opened from a file"
  sigint_exit "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  no_secrets
  ;;
gateway)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config secret
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc"
  grep -q "^COOKIE=" "$work/espvpn.out" || fail "no COOKIE= line"
  [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'saml': 1}" ]] || fail "the gateway did not log in by SAML"
  no_secrets
  ;;
replay)
  # No portal cookie: the portal's SAML user + prelogin-cookie are replayed at the gateway.
  gateway_up none --portal-saml REDIRECT --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config secret
  run_espvpn --authenticate "https://$gw_outer:4443/"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc"
  [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_ok", 0)') -eq 1 ]] || fail "not exactly one IdP sign-in"
  [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'saml': 1}" ]] || fail "the gateway did not take the replayed cookie"
  [[ $(json "$work/fake-stats.json" 'd["requests_by_path"].get("/ssl-vpn/prelogin.esp", 0)') -eq 0 ]] \
    || fail "a gateway prelogin was needed"
  no_secrets
  ;;
timeout)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config   # no password: the user never signs in
  # 12 s: long enough for Chromium to start and show the form on a loaded machine (several
  # tests start browsers at once under tools/test --jobs; 4 s was not always enough).
  t0=$SECONDS
  run_espvpn --authenticate --usergroup gateway --sso-timeout 12 "https://$gw_outer:4443/"
  finish "$client_pid"
  [[ $rc -eq 1 ]] || fail "espvpn exited $rc, not 1, when the single sign-on timed out"
  grep -q "not finished within 12 s (--sso-timeout)" "$work/espvpn.log" || fail "the timeout error does not name --sso-timeout"
  ((SECONDS - t0 < 50)) || fail "the timeout took $((SECONDS - t0)) s"
  grep -q "sign-in form shown" "$work/driver.log" || fail "the browser never showed the IdP form"
  # Ctrl-C while waiting: a prompt, clean end.
  driver_config
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  wait_for "$work/driver.log" "sign-in form shown" 40 || fail "the browser never showed the IdP form"
  sigint_exit "$client_pid"
  [[ $rc -eq 1 ]] || fail "espvpn exited $rc, not 1, on SIGINT during the single sign-on"
  grep -q "single sign-on at .* cancelled (SIGINT)" "$work/espvpn.log" || fail "no cancel message"
  [[ ! -e /run/espvpn-sso/$uid/sso-callback ]] || fail "the callback socket was left behind"
  ;;
password)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config wrong-password secret
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc after a wrong then a right password"
  [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_bad", 0)') -eq 1 ]] || fail "the wrong password was not tried"
  [[ $(grep -c "sign-in form shown" "$work/driver.log") -eq 2 ]] || fail "the IdP did not show its form again"
  no_secrets
  ;;
forged)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  handler=/nonexistent driver_config secret   # the browser does not hand over: the test does
  sed -i 's/"desktop": "\/nonexistent", //' "$work/driver.json"
  out=$(as_user "$user" "$espvpn" --sso-callback "globalprotectcallback:aGVsbG8=" 2>&1) && fail "a callback with no login waiting was accepted"
  grep -q "no espvpn login is waiting" <<<"$out" || fail "unexpected answer with no login waiting: $out"
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  wait_for "$work/callback.url" "globalprotectcallback:" 40 || fail "the browser never reached the callback"
  out=$(as_user "$user" "$espvpn" --sso-callback "globalprotectcallback:!!not-base64!!" 2>&1) && fail "a garbage callback was accepted"
  grep -q "refused" <<<"$out" || fail "no refusal for a garbage callback: $out"
  kill -0 "$client_pid" || fail "espvpn gave up after a garbage callback"
  as_user "$user" "$espvpn" --sso-callback "$(cat "$work/callback.url")" || fail "the real callback was refused"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc"
  grep -q "refused a single sign-on callback" "$work/espvpn.log" || fail "espvpn did not log the refusal"
  out=$(as_user "$user" "$espvpn" --sso-callback "$(cat "$work/callback.url")" 2>&1) && fail "a replayed callback was accepted"
  grep -q "no espvpn login is waiting" <<<"$out" || fail "unexpected answer to a replay: $out"
  no_secrets
  # Well-formed but made up: espvpn takes it, the gateway refuses the cookie (exit 2).
  made_up=$(printf '<html><!-- <saml-auth-status>1</saml-auth-status><saml-username>alice</saml-username><prelogin-cookie>made-up-cookie-1234</prelogin-cookie> --></html>' | base64 -w0)
  driver_config   # nobody signs in this time
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  wait_for "$work/driver.log" "sign-in form shown" 40 || fail "the browser never showed the IdP form"
  as_user "$user" "$espvpn" --sso-callback "globalprotectcallback:$made_up" || fail "a well-formed callback was refused"
  finish "$client_pid"
  [[ $rc -eq 2 ]] || fail "espvpn exited $rc, not 2, when the gateway refused a made-up cookie"
  ;;
peer)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  sock=/run/espvpn-sso/$uid/sso-callback
  handler=/nonexistent driver_config secret
  sed -i 's/"desktop": "\/nonexistent", //' "$work/driver.json"
  run_espvpn --authenticate --usergroup gateway "https://$gw_outer:4443/"
  wait_for "$work/callback.url" "globalprotectcallback:" 40 || fail "the browser never reached the callback"
  [[ $(stat -c '%U %a' "/run/espvpn-sso/$uid") == "$user 700" ]] || fail "socket directory: $(stat -c '%U %a' "/run/espvpn-sso/$uid")"
  [[ $(stat -c '%U %a' "$sock") == "$user 600" ]] || fail "socket: $(stat -c '%U %a' "$sock")"
  # The other user computes its own path; aim it at this user's socket through a symlinked dir.
  mkdir -p "/run/espvpn-sso/$other_uid"; chown "$other" "/run/espvpn-sso/$other_uid"; chmod 700 "/run/espvpn-sso/$other_uid"
  ln -s "$sock" "/run/espvpn-sso/$other_uid/sso-callback"
  out=$(as_user "$other" "$espvpn" --sso-callback "$(cat "$work/callback.url")" 2>&1) && fail "another user reached the socket"
  grep -q "Permission denied" <<<"$out" || fail "unexpected answer to another user: $out"
  chmod 755 "/run/espvpn-sso/$uid"; chmod 666 "$sock"   # a careless admin
  out=$(as_user "$other" "$espvpn" --sso-callback "$(cat "$work/callback.url")" 2>&1) && fail "another user's callback was accepted"
  grep -q "refused: this login belongs to another user" <<<"$out" || fail "no peer refusal: $out"
  grep -q "refused a single sign-on callback from uid $other_uid" "$work/espvpn.log" || fail "espvpn did not log the peer refusal"
  kill -0 "$client_pid" || fail "espvpn gave up after another user's callback"
  as_user "$user" "$espvpn" --sso-callback "$(cat "$work/callback.url")" || fail "the user's own callback was refused"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc"
  no_secrets
  ;;
xdg)
  # Neither option, a display: the default is the user's browser through xdg-open, run as the
  # user with the session's DISPLAY (a stand-in xdg-open first in PATH opens chromium_user.py).
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config secret
  mkdir -p "$work/bin"
  # It also notes its own seccomp mode, and the session's and the launcher's status (the
  # broker's PID comes in client.pid), while espvpn waits for the sign-in.
  cat >"$work/bin/xdg-open" <<SH
#!/bin/sh
st() { awk -v f="\$2:" '\$1 == f {print \$2; exit}' /proc/\$1/status; }
for i in \$(seq 100); do [ -s $work/client.pid ] && break; sleep 0.1; done
s=\$(pgrep -P "\$(cat $work/client.pid)" -x espvpn); l=\$(pgrep -P "\$s" -x espvpn-browser)
{ env; echo "UID_IS=\$(id -u)"; echo "SECCOMP_IS=\$(st self Seccomp)"; echo "SESSION_SECCOMP=\$(st "\$s" Seccomp)"
  echo "LAUNCHER=\$(st "\$l" Uid) \$(st "\$l" CapEff) \$(st "\$l" NoNewPrivs) \$(st "\$l" Seccomp)"; } >$work/xdg-env
exec $here/chromium_user.py $work/driver.json "\$1"
SH
  chmod 755 "$work/bin" "$work/bin/xdg-open"; : >"$work/xdg-env"; chown "$user" "$work/xdg-env"
  : >"$work/client.pid"; chmod 644 "$work/client.pid"
  rm -f "$work/espvpn.out" "$work/espvpn.log"
  ip netns exec "$nsc" env PATH="$work/bin:$PATH" DISPLAY=:77 SUDO_UID="$uid" SUDO_USER="$user" \
    "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -vvv --sso-timeout 45 --authenticate --usergroup gateway \
    "https://$gw_outer:4443/" </dev/null >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  echo "$client_pid" >"$work/client.pid"
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc with the default browser"
  grep -q "opening the identity provider in xdg-open as $user" "$work/espvpn.log" || fail "xdg-open not used as $user"
  grep -qx "DISPLAY=:77" "$work/xdg-env" || fail "the session's DISPLAY did not reach the browser"
  grep -qx "HOME=/nonexistent" "$work/xdg-env" || fail "the browser did not get the user's HOME"
  grep -qx "USER=$user" "$work/xdg-env" || fail "the browser did not run with the user's name"
  grep -qx "UID_IS=$uid" "$work/xdg-env" || fail "the browser did not run as the user (uid $uid)"
  # The session under its seccomp filter; the browser outside it (started by the launcher:
  # the user, no capability, no_new_privs, no filter).
  grep -qx "SESSION_SECCOMP=2" "$work/xdg-env" || fail "the session was not under its seccomp filter: $(grep SESSION_ "$work/xdg-env")"
  grep -qx "SECCOMP_IS=0" "$work/xdg-env" || fail "the browser ran under a seccomp filter: $(grep SECCOMP_IS "$work/xdg-env")"
  grep -qx "LAUNCHER=$uid 0000000000000000 1 0" "$work/xdg-env" || fail "the launcher's status: $(grep LAUNCHER "$work/xdg-env")"
  # The launcher was forked before the session's Landlock rules: the session keeps them.
  landlock=$(landlock_expected)
  if ((landlock > 0)); then
    grep -q "Landlock ABI $landlock" "$work/espvpn.log" || fail "the session did not apply Landlock with the user's browser: $(grep -m1 'Landlock' "$work/espvpn.log")"
  fi
  no_secrets
  ;;
paste)
  gateway_up none --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  handler=/nonexistent driver_config secret
  sed -i 's/"desktop": "\/nonexistent", //' "$work/driver.json"
  mkfifo "$work/stdin"
  rm -f "$work/espvpn.out" "$work/espvpn.log"
  # No display, no --external-browser: nothing is started; the URL is printed.
  ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY SUDO_UID="$uid" SUDO_USER="$user" \
    "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -vvv --authenticate --usergroup gateway \
    "https://$gw_outer:4443/" <"$work/stdin" >"$work/espvpn.out" 2>"$work/espvpn.log" &
  client_pid=$!; pids+=("$client_pid")
  exec 7>"$work/stdin"
  wait_for "$work/espvpn.log" "https://idp-a.test:4443/idp/sso?SAMLRequest=" 30 "$client_pid" || fail "no IdP URL printed"
  grep -q "paste the globalprotectcallback: URL here" "$work/espvpn.log" || fail "no paste prompt"
  url=$(grep -o "https://idp-a.test:4443/idp/sso?SAMLRequest=[^ ]*" "$work/espvpn.log" | head -1)
  [[ ! -s $work/driver.log ]] || fail "a browser was started with no display"
  # The user opens it in a browser elsewhere, and pastes what the browser was sent to.
  echo "not a callback" >&7
  as_user "$user" "$here/chromium_user.py" "$work/driver.json" "$url" || fail "the browser program failed"
  cat "$work/callback.url" >&7
  exec 7>&-
  finish "$client_pid"
  [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc with the pasted callback"
  grep -q "that line is not usable" "$work/espvpn.log" || fail "the bad pasted line was not refused"
  grep -q "^COOKIE=" "$work/espvpn.out" || fail "no COOKIE= line"
  no_secrets
  ;;
driven | driven_headers)
  # Chromium as root here (no SUDO_UID): it needs --no-sandbox; gp_sso's other modes and
  # sso_driven_as_user run it as a user.
  browser="chromium --headless=new --no-sandbox --disable-gpu --ignore-certificate-errors \
--host-resolver-rules='MAP idp-a.test $gw_ip, MAP idp-b.test $gw_ip'"
  if [[ $mode == driven ]]; then
    gateway_up aes-128-gcm --portal-saml POST --gw-saml REDIRECT --portal-cookie --gw-cookie-only --idp \
      --acs-result comment --idp-autofill alice:secret || fail "fake gateway did not start"
    args=("https://$gw_outer:4443/")
  else
    gateway_up none --gw-saml REDIRECT --idp --acs-result headers --idp-autofill alice:secret ||
      fail "fake gateway did not start"
    args=(--authenticate --usergroup gateway "https://$gw_outer:4443/")
  fi
  # The browser's profile goes under this test's own TMPDIR, so the checks below see only
  # this test's browser (other tests may run Chromium at the same time: tools/test --jobs).
  mkdir -p "$work/tmp"
  rm -f "$work/espvpn.out" "$work/espvpn.log"
  ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY -u SUDO_UID -u SUDO_USER TMPDIR="$work/tmp" \
    "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -vvv --sso-timeout 45 --sso-browser="$browser" \
    "${args[@]}" >"$work/espvpn.out" 2>"$work/espvpn.log" </dev/null &
  client_pid=$!; pids+=("$client_pid")
  if [[ $mode == driven ]]; then
    wait_for "$work/espvpn.log" "ESP connected" 60 "$client_pid" || fail "espvpn did not bring ESP up"
    ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip through the tunnel"
    [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_ok", 0)') -eq 1 ]] || fail "not exactly one IdP sign-in"
    [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'portal-userauthcookie': 1}" ]] \
      || fail "the gateway was not logged in by the portal's cookie: $(json "$work/fake-stats.json" 'd["login_via"]')"
    sigint_exit "$client_pid"
    [[ $rc -eq 0 ]] || fail "espvpn exited $rc after SIGINT"
  else
    finish "$client_pid"
    [[ $rc -eq 0 ]] || fail "espvpn --authenticate exited $rc: $(tail -3 "$work/espvpn.log")"
    grep -q "^COOKIE=" "$work/espvpn.out" || fail "no COOKIE= line"
    [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'saml': 1}" ]] || fail "the gateway did not log in by SAML"
  fi
  [[ $(json "$work/fake-stats.json" 'd.get("saml_acs_ok", 0)') -eq 1 ]] || fail "the ACS did not issue exactly one result"
  # The browser ran with its profile there (else the checks below would see nothing), and
  # it is gone, and so is its private profile. espvpn run by root: its session process runs
  # as nobody, which cannot write this root-only TMPDIR: the profile goes into that user's
  # private directory made before the privilege split (/run/user/UID or /run/espvpn-sso/UID).
  pbase=$work/tmp
  if ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -w "$work/tmp" 2>/dev/null; then
    pbase=/run/user/$(id -u nobody)
    [[ -d $pbase ]] || pbase=/run/espvpn-sso/$(id -u nobody)
  fi
  profile=$(grep -o "started the browser .*, profile $pbase/espvpn-sso-[A-Za-z0-9]*" "$work/espvpn.log" | sed 's/.*, profile //')
  [[ -n $profile ]] || fail "the browser's profile was not under $pbase: $(grep 'started the browser' "$work/espvpn.log")"
  for ((i = 0; i < 50; i++)); do
    [[ -z $(pgrep -f -- "--user-data-dir=$profile" || true) ]] && break
    sleep 0.1
  done
  [[ -z $(pgrep -f -- "--user-data-dir=$profile" || true) ]] || fail "a Chromium process was left behind"
  [[ -z $(ls -A "$work/tmp") ]] || fail "the browser profile was left behind: $(ls -A "$work/tmp")"
  [[ ! -e $profile ]] || fail "the browser profile $profile was left behind"
  if [[ $mode == driven ]]; then
    # Issue 42 item 4: the portal's cookie, saved by that login, logs in again without a browser.
    ls "$XDG_STATE_HOME/espvpn/gp-portal-"* >/dev/null || fail "the portal cookie was not saved"
    mv "$work/espvpn.log" "$work/espvpn-sso.log"
    ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY -u SUDO_UID -u SUDO_USER \
      "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" -vvv --non-inter --sso-browser=false \
      "https://$gw_outer:4443/" >>"$work/espvpn.out" 2>"$work/espvpn.log" </dev/null &
    client_pid=$!; pids+=("$client_pid")
    wait_for "$work/espvpn.log" "ESP connected" 60 "$client_pid" || fail "the saved cookie did not bring ESP up"
    ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip through the second tunnel"
    sigint_exit "$client_pid"
    [[ $rc -eq 0 ]] || fail "the second espvpn exited $rc after SIGINT"
    grep -q "with the authentication cookie saved by an earlier login" "$work/espvpn.log" \
      || fail "the second run did not log in with the saved cookie"
    ! grep -q "started the browser" "$work/espvpn.log" || fail "the second run started a browser"
    [[ $(json "$work/fake-stats.json" 'd.get("portal_cookie_logins", 0)') -eq 1 ]] \
      || fail "the portal did not take the saved cookie"
    [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_ok", 0)') -eq 1 ]] || fail "a second IdP sign-in happened"
    cat "$work/espvpn-sso.log" >>"$work/espvpn.log"
  fi
  no_secrets
  ;;
nm_dialog)
  [[ -x $dialog ]] || fail "nm_dialog needs the auth dialog binary as the 5th argument"
  gateway_up aes-128-gcm --gw-saml REDIRECT "${idp[@]}" || fail "fake gateway did not start"
  driver_config secret
  url="https://$gw_outer:4443/"
  request=$(printf 'DATA_KEY=%s\nDATA_VAL=%s\n\n' gateway "$url" protocol gp usergroup gateway \
    cafile "$repo/certs/ca.pem" external-browser "$here/chromium_user.py $work/driver.json" sso-timeout 45
    printf 'DONE\n')
  # setsid: no controlling terminal, as under nm-applet; the user's session as in run_espvpn.
  reply=$(printf '%s\nQUIT\n' "$request" | ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY \
    SUDO_UID="$uid" SUDO_USER="$user" setsid -w timeout 90 "$dialog" -u "$(cat /proc/sys/kernel/random/uuid)" \
    -n sso -s org.freedesktop.NetworkManager.espvpn -i --espvpn "$espvpn" 2>"$work/espvpn.log") ||
    fail "the dialog failed: $(tail -5 "$work/espvpn.log")"
  : >"$work/espvpn.out"
  declare -A got=()
  while IFS= read -r k && [[ -n $k ]] && IFS= read -r v; do got[$k]=$v; done <<<"$reply"
  [[ -n ${got[cookie]:-} ]] || fail "the dialog's reply has no cookie (keys: ${!got[*]})"
  [[ ${got[gateway]:-} == https://* ]] || fail "the dialog's reply has no gateway: '${got[gateway]:-}'"
  [[ $(json "$work/fake-stats.json" 'd["login_via"]') == "{'saml': 1}" ]] || fail "the gateway did not log in by SAML"
  grep -q "handler exit 0" "$work/driver.log" || fail "the desktop entry's handler did not succeed"
  # The service's side: the cookie alone brings the tunnel up (as nm-espvpn-service runs espvpn).
  printf '%s\n' "${got[cookie]}" >"$work/cookie"
  ip netns exec "$nsc" "$espvpn" --protocol=gp --cafile "$repo/certs/ca.pem" --cookie-on-stdin --non-inter \
    -vvv "${got[gateway]}" <"$work/cookie" >>"$work/espvpn.out" 2>"$work/connect.log" &
  client_pid=$!; pids+=("$client_pid")
  wait_for "$work/connect.log" "ESP connected" 60 "$client_pid" || fail "the dialog's cookie did not bring ESP up"
  ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 $lan_ip >/dev/null || fail "ping $lan_ip through the tunnel"
  sigint_exit "$client_pid"
  rm -f "$work/cookie"
  cat "$work/connect.log" >>"$work/espvpn.log"
  no_secrets
  ;;
nm_dialog_cookie)
  [[ -x $dialog ]] || fail "nm_dialog_cookie needs the auth dialog binary as the 5th argument"
  gateway_up none --portal-saml REDIRECT --gw-saml REDIRECT --portal-cookie --gw-cookie-only "${idp[@]}" \
    || fail "fake gateway did not start"
  install -d -o "$user" -m 700 "$work/user-state"
  export XDG_STATE_HOME=$work/user-state  # the user's, as their desktop session would have it
  driver_config secret
  : >"$work/espvpn.log"; : >"$work/espvpn.out"
  dialog_cookie() {  # EXTERNAL_BROWSER: the dialog's login; prints its reply's cookie
    local request reply k v
    request=$(printf 'DATA_KEY=%s\nDATA_VAL=%s\n\n' gateway "https://$gw_outer:4443/" protocol gp \
      cafile "$repo/certs/ca.pem" external-browser "$1" sso-timeout 45; printf 'DONE\n')
    reply=$(printf '%s\nQUIT\n' "$request" | ip netns exec "$nsc" env -u DISPLAY -u WAYLAND_DISPLAY \
      SUDO_UID="$uid" SUDO_USER="$user" setsid -w timeout 90 "$dialog" -u "$(cat /proc/sys/kernel/random/uuid)" \
      -n sso -s org.freedesktop.NetworkManager.espvpn -i --espvpn "$espvpn" 2>>"$work/espvpn.log") || return 1
    while IFS= read -r k && [[ -n $k ]] && IFS= read -r v; do
      if [[ $k == cookie ]]; then printf '%s' "$v"; fi
    done <<<"$reply"
  }
  first=$(dialog_cookie "$here/chromium_user.py $work/driver.json") || fail "the first dialog login failed"
  [[ -n $first ]] || fail "the first dialog reply has no cookie"
  saved=("$work/user-state/espvpn/gp-portal-"*)
  [[ -f ${saved[0]} ]] || fail "espvpn did not save the portal cookie in the user's state directory"
  [[ $(stat -c '%u %a' "${saved[0]}") == "$uid 600" ]] || fail "the saved cookie is not the user's, 0600"
  driver_stop
  second=$(dialog_cookie false) || fail "the second dialog login (no browser) failed"
  [[ -n $second && $second != "$first" ]] || fail "the second dialog reply has no new cookie"
  grep -q "with the authentication cookie saved by an earlier login" "$work/espvpn.log" \
    || fail "the second login did not use the saved cookie"
  [[ $(json "$work/fake-stats.json" 'd.get("idp_logins_ok", 0)') -eq 1 ]] || fail "not exactly one IdP sign-in"
  [[ $(json "$work/fake-stats.json" 'd.get("portal_cookie_logins", 0)') -eq 1 ]] \
    || fail "the portal did not take the saved cookie"
  no_secrets
  ;;
*) fail "unknown mode $mode" ;;
esac
echo "PASS: gp_sso $mode"
