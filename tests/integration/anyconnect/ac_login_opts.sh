#!/usr/bin/env bash
# openconnect's login options with --protocol=anyconnect (issue 17: 1, 2, 3, 4, 8), each run
# with espvpn and openconnect 9.01 on the same command line against the same peer:
# Debian's ocserv in namespaces (tests/integration/anyconnect/ocserv_env.sh) or, for a <select>
# inside a form (ocserv has only its group list), tests/integration/anyconnect/fake_ac_auth.py on loopback.
#
#   ac_login_opts.sh MODE ESPVPN_BIN
#   stdin:      --passwd-on-stdin --non-inter (password only; no -u: line 1 the password, line 2 the
#               user name); --non-inter alone fails naming 'Password:'; the password never logged
#   servercert: pin-sha256/sha256/sha1/bare prefixes (from certtool/openssl) accepted, wrong ones refused
#               (exit 1, the error lists every fingerprint form), several --servercert; openconnect alike
#   group:      ocserv's select-group without --authgroup: --non-inter fails naming main:group_list and
#               [First Group|group2]; the next stdin line answers it (label prefix); -F main:group_list=
#   otp:        ocserv plain[otp=...] (liboath users file): TOTP --token-mode (ocserv checks it), the
#               code as a second stdin line, HOTP @FILE twice (the counter written back; ocserv refuses
#               a reused counter); openconnect 9.01 cannot answer ocserv's OTP form with its token (shown)
#   form_select: fake_ac_auth.py: -F main:method=sms sends "sms" (not the first option), then the
#               "challenge" form is answered by the TOTP token; no -F under --non-inter: fails naming
#               main:method and its labels; stdin answers it by label; openconnect alike
set -euo pipefail
mode=$1 espvpn=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/ac-login-opts.XXXXXX)
pids=()
ca=(--cafile "$repo/certs/ca.pem")
totp_key=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ  # base32 of "12345678901234567890" (RFC 6238)
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out "$work"/*.log; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
have_oc=1; command -v openconnect >/dev/null || { have_oc=0; echo "(openconnect missing: comparisons skipped)"; }
totp_now() {  # the current TOTP code of $totp_key, by Python's hmac (independent of espvpn)
  python3 -c "
import base64,hmac,hashlib,struct,time
k=base64.b32decode('$totp_key');m=hmac.new(k,struct.pack('>Q',int(time.time())//30),hashlib.sha1).digest();o=m[-1]&15
print('%06d'%((struct.unpack('>I',m[o:o+4])[0]&0x7fffffff)%1000000))"
}

# run NAME RC STDIN CMD...: CMD (espvpn or openconnect, in the client namespace when there is one) must exit RC.
run() {
  local name=$1 want=$2 input=$3; shift 3
  local rc=0
  printf '%b' "$input" | ${ns_exec:-} timeout 30 "$@" >"$work/$name.out" 2>"$work/$name.log" || rc=$?
  [[ $rc -eq $want ]] || fail "$name: exit $rc, expected $want ($*)"
}
both() {  # NAME RC STDIN ARGS...: espvpn and openconnect with the same arguments
  local name=$1 want=$2 input=$3; shift 3
  run "$name" "$want" "$input" "$espvpn" --authenticate "$@"
  ((have_oc)) && run "$name-oc" "$want" "$input" openconnect --authenticate "$@"
  return 0
}

if [[ $mode == form_select ]]; then
  python3 "$here/fake_ac_auth.py" --ready-file "$work/ready" --record "$work/record.json" --totp-key "$totp_key" \
    --code 424242 --max-runtime 100 &
  fake_pid=$!; pids+=("$fake_pid")
  trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
  for ((i = 0; i < 100; i++)); do [[ -f $work/ready ]] && break; sleep 0.1; done
  [[ -f $work/ready ]] || fail "fake_ac_auth did not start"
  url=https://127.0.0.1:$(python3 -c "import json;print(json.load(open('$work/ready'))['port'])")/
  last() { python3 -c "import json;print(json.load(open('$work/record.json'))[$1].get('$2',''))"; }
  both sms 0 "secret\n" "${ca[@]}" -u alice --passwd-on-stdin --non-inter -F main:method=sms \
    --token-mode=totp --token-secret "base32:$totp_key" "$url"
  [[ -z $(last -1 username) && $(last -1 password) == "<6 chars>" ]] || fail "the challenge was not answered with a 6-digit code"
  [[ $(last -2 method) == sms ]] || fail "-F main:method=sms sent $(last -2 method)"
  grep -q "COOKIE='" "$work/sms.out" || fail "no cookie"
  grep -q 'main: method = "SMS passcode"' "$work/sms.log" || fail "the choice is not logged"
  both nochoice 1 "secret\n" "${ca[@]}" -u alice --passwd-on-stdin --non-inter "$url"
  grep -q "main:method offers \[Duo Push|SMS passcode|Phone call\]" "$work/nochoice.log" \
    || fail "the --non-inter error does not name main:method and its choices"
  grep -q "Method: \[Duo Push|SMS passcode|Phone call\]:" "$work/nochoice.log" || fail "the prompt does not list the choices"
  n=$(python3 -c "import json;print(len(json.load(open('$work/record.json'))))")
  both typed 0 "secret\nSMS\n424242\n" "${ca[@]}" -u alice --passwd-on-stdin --non-inter "$url"
  [[ $(last -2 method) == sms ]] || fail "stdin 'SMS' did not choose the sms option"
  both phone 0 "secret\n" "${ca[@]}" -u alice --passwd-on-stdin --non-inter -F main:method=phone "$url"
  [[ $(last -1 method) == phone ]] || fail "-F main:method=phone sent $(last -1 method)"
  run wrongform 1 "secret\n" "$espvpn" --authenticate "${ca[@]}" -u alice --passwd-on-stdin --non-inter \
    -F other:method=sms "$url"
  ! grep -q "COOKIE=" "$work/wrongform.out" || fail "-F for another form id answered main:method"
  echo "PASS form_select ($n+ replies recorded)"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
# shellcheck source=ocserv_env.sh
. "$here/ocserv_env.sh"
trap ocserv_cleanup EXIT
trap 'exit 130' INT TERM
url=https://$gw_ip:$oc_port/
topo_up
ns_exec="ip netns exec $nsc"
case $mode in
group) export OC_GROUPS=1 ;;
otp)
  # liboath's users file: TOTP (HOTP/T30) users otp1-4 (a TOTP code is good once per user), counter HOTP
  # for otph; ocserv's sec-mod rewrites it. The users get passwords after ocserv_up (which makes the file).
  for u in otp1 otp2 otp3 otp4; do echo "HOTP/T30 $u - 3132333435363738393031323334353637383930"; done >"$work/users.oath"
  echo "HOTP otph - 3132333435363738393031323334353637383930 0" >>"$work/users.oath"
  chmod 600 "$work/users.oath"
  oc_auth=("auth = \"plain[passwd=$work/oc/passwd,otp=$work/users.oath]\"") ;;
esac
# otp: ocserv 1.1.6 scores each plain+otp login from an address like a wrong password and refuses the
# third within a few seconds ("added IP ... (with score 30) to ban list"): banning off for these runs.
oc_extra=()
[[ $mode == otp ]] && oc_extra=("max-ban-score = 0")
ocserv_up "${oc_extra[@]}" || fail "ocserv did not start"
if [[ $mode == otp ]]; then
  for u in otp1 otp2 otp3 otp4 otph; do printf '%s\n%s\n' $oc_password $oc_password | ocpasswd -c "$work/oc/passwd" $u; done
fi
# TOTP codes are made just before use: keep clear of a 30-s step's last 3 s (bounded: at most 3.2 s).
avoid_step_edge() { python3 -c "import time; r = 30 - time.time() % 30; r < 3 and time.sleep(r + 0.2)"; }

case $mode in
stdin)
  both pw 0 "$oc_password\n" "${ca[@]}" -u testuser --passwd-on-stdin --non-inter "$url"
  grep -q "^COOKIE='" "$work/pw.out" || fail "no cookie"
  ! grep -q "$oc_password" "$work/pw.log" || fail "the password shows in the log"
  both nouser 0 "$oc_password\ntestuser\n" "${ca[@]}" --passwd-on-stdin --non-inter "$url"
  both noline 1 "" "${ca[@]}" -u testuser --non-inter "$url"
  grep -q "'Password:'.*--non-inter" "$work/noline.log" || fail "the --non-inter error does not name the prompt"
  echo "PASS stdin"
  ;;
servercert)
  der_sha1=$(openssl x509 -in "$repo/certs/server.pem" -outform der | sha1sum | cut -c1-40)
  spki=$(openssl x509 -in "$repo/certs/server.pem" -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | cut -c1-64)
  spki1=$(openssl x509 -in "$repo/certs/server.pem" -pubkey -noout | openssl pkey -pubin -outform der | sha1sum | cut -c1-40)
  args=(-u testuser --passwd-on-stdin --non-inter)
  for pin in "$oc_pin" "${oc_pin:0:16}" "sha256:${spki:0:8}" "sha256:${spki^^}" "sha1:${spki1:0:6}" "${der_sha1:0:4}" \
             "${der_sha1^^}"; do
    both ok 0 "$oc_password\n" "${args[@]}" --servercert "$pin" "$url"
  done
  both bad 1 "$oc_password\n" "${args[@]}" --servercert "sha1:${der_sha1:0:8}" "$url"
  for form in "$oc_pin" "sha256:$spki" "sha1:$spki1" "$der_sha1"; do
    grep -qF -- "$form" "$work/bad.log" || fail "the mismatch error does not print $form"
  done
  run two 0 "$oc_password\n" "$espvpn" --authenticate "${args[@]}" --servercert "sha1:${der_sha1:0:8}" \
    --servercert "sha256:${spki:0:8}" "$url"
  run short 1 "$oc_password\n" "$espvpn" --authenticate "${args[@]}" --servercert "sha1:${spki1:0:3}" "$url"
  grep -q "from 4 to 40 characters" "$work/short.log" || fail "a 3-character prefix: no clear error"
  echo "PASS servercert"
  ;;
group)
  both nogroup 1 "$oc_password\n" "${ca[@]}" -u grpuser --passwd-on-stdin --non-inter "$url"
  grep -q "main:group_list offers \[First Group|group2\]" "$work/nogroup.log" || fail "the error does not name the field and choices"
  both typed 0 "$oc_password\nfirst\n" "${ca[@]}" -u grpuser --passwd-on-stdin --non-inter "$url"
  grep -q 'auth group "First Group" (group1)' "$work/typed.log" || fail "stdin 'first' did not choose group1"
  both byF 0 "$oc_password\n" "${ca[@]}" -u grpuser --passwd-on-stdin --non-inter -F main:group_list=group2 "$url"
  grep -q '(group2)' "$work/byF.log" || fail "-F main:group_list=group2 did not choose group2"
  echo "PASS group"
  ;;
otp)
  avoid_step_edge
  run totp 0 "$oc_password\n" "$espvpn" --authenticate "${ca[@]}" -u otp1 --passwd-on-stdin --non-inter \
    --token-mode=totp --token-secret "base32:$totp_key" "$url"
  grep -q "TOTP code from the soft token" "$work/totp.log" || fail "the OTP form was not answered by the token"
  grep -q "^COOKIE='" "$work/totp.out" || fail "no cookie after the TOTP login"
  if ((have_oc)); then
    run totp-oc 1 "$oc_password\n" openconnect --authenticate "${ca[@]}" -u otp2 --passwd-on-stdin --non-inter \
      --token-mode=totp --token-secret "base32:$totp_key" "$url"
    echo "(openconnect 9.01 does not give its token to ocserv's OTP form: exit 1, as expected)"
  fi
  avoid_step_edge
  run typed 0 "$oc_password\n$(totp_now)\n" "$espvpn" --authenticate "${ca[@]}" -u otp3 --passwd-on-stdin --non-inter "$url"
  ((have_oc)) && run typed-oc 0 "$oc_password\n$(totp_now)\n" openconnect --authenticate "${ca[@]}" -u otp4 \
    --passwd-on-stdin --non-inter "$url"
  run wrong 1 "$oc_password\n000000\n" "$espvpn" --authenticate "${ca[@]}" -u otp1 --passwd-on-stdin --non-inter "$url"
  run nocode 1 "$oc_password\n" "$espvpn" --authenticate "${ca[@]}" -u otp1 --passwd-on-stdin --non-inter "$url"
  grep -q "Password:.*--non-inter" "$work/nocode.log" || fail "stdin ended before the OTP: the error does not name the prompt"
  printf 'base32:%s,0\n' "$totp_key" >"$work/hotp"
  for n in 1 2; do
    run "hotp$n" 0 "$oc_password\n" "$espvpn" --authenticate "${ca[@]}" -u otph --passwd-on-stdin --non-inter \
      --token-mode=hotp --token-secret "@$work/hotp" "$url"
    [[ $(cat "$work/hotp") == "base32:$totp_key,$n" ]] || fail "HOTP counter not written back: $(cat "$work/hotp")"
  done
  printf 'base32:%s,1\n' "$totp_key" >"$work/hotp"  # an already used counter: ocserv refuses it
  run hotp-reused 1 "$oc_password\n" "$espvpn" --authenticate "${ca[@]}" -u otph --passwd-on-stdin --non-inter \
    --token-mode=hotp --token-secret "@$work/hotp" "$url"
  echo "PASS otp"
  ;;
*) fail "unknown mode $mode" ;;
esac
