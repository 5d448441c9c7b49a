#!/usr/bin/env bash
# AnyConnect logins as Cisco ASAs run them (issue 42 items 0 and 1) against fake_ac_asa.py on loopback
# (ocserv sends neither <client-cert-request> nor <session-token>), each case with espvpn and
# openconnect 9.01 on the same command line, their requests compared as the fake recorded them:
#
#   ac_asa_login.sh ESPVPN_BIN
# certfail:     <client-cert-request> first, no -c: the init again with <client-cert-fail/> on the
#               same connection and URL, then the password and challenge forms (the form has no
#               action: the replies go to "/"; the challenge has no <opaque>: the first one is
#               echoed); the cookie is the <session-token> (no Set-Cookie); -vv names its source,
#               the token is in no log, not even with --dump-http-traffic (the reply dumped redacted)
# certfail_c:   the same with -c: the init again on a new connection first, then <client-cert-fail/>
# insist:       the server asks for the certificate again after <client-cert-fail/>: exit 1,
#               "wants a client certificate", no cookie; openconnect exits 1 too
# both:         <session-token> and a different Set-Cookie webvpn: the token is the cookie (openconnect's choice)
# header:       Set-Cookie webvpn only: that is the cookie, -v says so
# bad:          a <session-token> with a ';': exit 1, a clear error without the token
set -euo pipefail
espvpn=$1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d /tmp/ac-asa.XXXXXX)
fake_pid=
trap '[[ -n $fake_pid ]] && kill "$fake_pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out "$work"/*.log "$work"/record.json; do [[ -f $f ]] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
have_oc=1; command -v openconnect >/dev/null || { have_oc=0; echo "(openconnect missing: comparisons skipped)"; }

# fake ARGS...: (re)starts fake_ac_asa.py; $url is its group URL (a path, as users give an ASA's group-url).
fake() {
  [[ -n $fake_pid ]] && { kill "$fake_pid" 2>/dev/null || true; wait "$fake_pid" 2>/dev/null || true; }
  rm -f "$work/ready"
  python3 "$here/fake_ac_asa.py" --ready-file "$work/ready" --record "$work/record.json" --max-runtime 60 "$@" &
  fake_pid=$!
  for ((i = 0; i < 100; i++)); do [[ -f $work/ready ]] && break; sleep 0.1; done
  [[ -f $work/ready ]] || fail "fake_ac_asa did not start"
  url=https://127.0.0.1:$(python3 -c "import json;print(json.load(open('$work/ready'))['port'])")/grp
}
# run NAME RC STDIN CMD...: CMD must exit RC within 30 s.
run() {
  local name=$1 want=$2 input=$3; shift 3
  local rc=0
  printf '%b' "$input" | timeout 30 "$@" >"$work/$name.out" 2>"$work/$name.log" || rc=$?
  [[ $rc -eq $want ]] || fail "$name: exit $rc, expected $want ($*)"
}
# The requests recorded since entry FROM, one line each: type, client-cert-fail, whether on the
# previous request's connection, path, echoed tunnel group, field names, group-access (init), the
# aggregate-auth-version attribute, the X-Transcend-Version and X-Aggregate-Auth headers.
requests() {
  python3 - "$work/record.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))[int(sys.argv[2]):]
for i, e in enumerate(r):
    conn = "first" if i == 0 else ("same" if e["conn"] == r[i - 1]["conn"] else "new")
    print(e["type"], "cert-fail" if e["cert_fail"] else "-", conn, e["path"], e["opaque"] or "-",
          ",".join(sorted(e["fields"])) or "-", e["group_access"] or "-", "v" + e["version"], *e["headers"])
EOF
}
count() { python3 -c "import json;print(len(json.load(open('$work/record.json'))))"; }
last() { python3 -c "import json;print(json.load(open('$work/record.json'))[-1].get('$1',''))"; }
cookie_of() {  # the webvpn value of NAME.out's COOKIE line (bare, or openconnect's composite string)
  sed -n "s/^COOKIE='\(.*\)'$/\1/p" "$work/$1.out" | tr ';' '\n' | sed 's/^ *//' |
    awk '/^webvpn=/ {sub(/^webvpn=/, ""); print; found=1} END {if (!found) exit 1}' ||
    sed -n "s/^COOKIE='\(.*\)'$/\1/p" "$work/$1.out"
}
# both NAME RC STDIN ARGS...: espvpn, then openconnect, with the same arguments against the same
# fake; their recorded requests go to NAME.req and NAME-oc.req, the tokens issued to NAME(-oc).token.
both() {
  local name=$1 want=$2 input=$3; shift 3
  local n
  n=$(count); run "$name" "$want" "$input" "$espvpn" --authenticate "$@"; requests "$n" >"$work/$name.req"
  last token >"$work/$name.token"
  if ((have_oc)); then
    n=$(count); run "$name-oc" "$want" "$input" openconnect --authenticate "$@"; requests "$n" >"$work/$name-oc.req"
    last token >"$work/$name-oc.token"
    diff "$work/$name.req" "$work/$name-oc.req" >"$work/$name.diff" ||
      fail "$name: espvpn's requests differ from openconnect's: $(cat "$work/$name.diff")"
  fi
}
login=(--cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin --non-inter)

# certfail: item 1 without a certificate, item 0's token as the only cookie.
fake --cert request --cookie token
both certfail 0 "Pw-7x9q\n424242\n" "${login[@]}" -vv --dump-http-traffic "$url"
token=$(cat "$work/certfail.token")
[[ -n $token && $(cookie_of certfail) == "$token" ]] || fail "certfail: the cookie is not the <session-token>"
((have_oc)) && { [[ $(cookie_of certfail-oc) == "$(cat "$work/certfail-oc.token")" ]] ||
  fail "certfail: openconnect's cookie is not the token"; }
cat >"$work/certfail.want" <<EOF
init - first /grp - - $url v2 1 1
init cert-fail same /grp - - $url v2 1 1
auth-reply - same / ASA password,username - v2 1 1
auth-reply - same / ASA password - v2 1 1
EOF
diff "$work/certfail.want" "$work/certfail.req" || fail "certfail: not the requests expected"
grep -q "asks for a client certificate and none is configured: saying so (client-cert-fail)" "$work/certfail.log" ||
  fail "certfail: the client-cert-fail step is not logged"
grep -q "the session cookie: the server's <session-token>" "$work/certfail.log" || fail "certfail: -v does not say the cookie's source"
! grep -q "$token" "$work/certfail.log" || fail "certfail: the token is in the log"
! grep -q "Pw-7x9q\|424242" "$work/certfail.log" || fail "certfail: a password is in the log"
grep -q "<session-token><redacted></session-token>" "$work/certfail.log" || fail "certfail: the complete reply is not dumped redacted"
echo "RESULT certfail: $(cut -d' ' -f1-6 "$work/certfail.req" | tr '\n' ';')$( ((have_oc)) && echo " (openconnect: the same)")"

# certfail_c: with a certificate configured (the fake's TLS asks for none), a new connection first.
both certfail_c 0 "Pw-7x9q\n424242\n" "${login[@]}" -c "$repo/certs/client.pem" -k "$repo/certs/client-key.pem" "$url"
cat >"$work/certfail_c.want" <<EOF
init - first /grp - - $url v2 1 1
init - new /grp - - $url v2 1 1
init cert-fail same /grp - - $url v2 1 1
auth-reply - same / ASA password,username - v2 1 1
auth-reply - same / ASA password - v2 1 1
EOF
diff "$work/certfail_c.want" "$work/certfail_c.req" || fail "certfail_c: not the requests expected"
grep -q "after one was offered" "$work/certfail_c.log" || fail "certfail_c: the second request is not logged"
[[ $(cookie_of certfail_c) == "$(cat "$work/certfail_c.token")" ]] || fail "certfail_c: the cookie is not the <session-token>"
echo "RESULT certfail with -c: $(cut -d' ' -f1-6 "$work/certfail_c.req" | tr '\n' ';')"

# insist: no password login without a certificate.
fake --cert insist
n=$(count)
run insist 1 "Pw-7x9q\n424242\n" "$espvpn" --authenticate "${login[@]}" "$url"
grep -q "wants a client certificate; give one with -c/--certificate" "$work/insist.log" || fail "insist: no clear error"
! grep -q "^COOKIE=" "$work/insist.out" || fail "insist: a cookie was printed"
[[ "$(requests "$n" | cut -d' ' -f1,2 | tr '\n' ';')" == "init -;init cert-fail;" ]] || fail "insist: not init, then one client-cert-fail"
((have_oc)) && run insist-oc 1 "Pw-7x9q\n424242\n" openconnect --authenticate "${login[@]}" "$url"
echo "RESULT insist: exit 1, $(grep -o 'the server.*wants a client certificate' "$work/insist.log" | head -1)"

# both: the token wins over Set-Cookie webvpn, as in openconnect.
fake --cookie both
both both 0 "Pw-7x9q\n424242\n" "${login[@]}" -v "$url"
[[ $(cookie_of both) == "$(cat "$work/both.token")" ]] || fail "both: the cookie is not the <session-token>"
((have_oc)) && { [[ $(cookie_of both-oc) == "$(cat "$work/both-oc.token")" ]] ||
  fail "both: openconnect's cookie is not the token"; }
grep -q "the session cookie: the server's <session-token>" "$work/both.log" || fail "both: -v does not name the token"
echo "RESULT both: the <session-token> is the cookie$( ((have_oc)) && echo ", as openconnect's")"

fake --cookie header
run header 0 "Pw-7x9q\n424242\n" "$espvpn" --authenticate "${login[@]}" -v "$url"
[[ $(cookie_of header) == "$(last header)" ]] || fail "header: the cookie is not Set-Cookie's"
grep -q "the session cookie: the webvpn cookie the server set" "$work/header.log" || fail "header: -v does not name Set-Cookie"

fake --cookie bad
run bad 1 "Pw-7x9q\n424242\n" "$espvpn" --authenticate "${login[@]}" "$url"
grep -q "<session-token> is not a usable cookie value" "$work/bad.log" || fail "bad: no clear error"
! grep -q "$(last token | cut -c1-8)" "$work/bad.log" || fail "bad: the token is in the error"
! grep -q "^COOKIE=" "$work/bad.out" || fail "bad: a cookie was printed"
echo "PASS ac_asa_login"
