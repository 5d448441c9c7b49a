#!/usr/bin/env bash
# espvpn through real proxies (issue 17 item 7), in namespaces of its own
# (tools/netns/gp-topology.sh): the proxies run in the gateway namespace beside the
# server, and the client namespace rejects every direct TCP connection to the server
# (nftables), so a login or tunnel that works went through the proxy. UDP (ESP, DTLS)
# is left open: it goes directly, as espvpn(8) says.
#
#   proxy_test.sh MODE ESPVPN_BIN ESP_GATEWAY_BIN
#   http:        tinyproxy (HTTP CONNECT, no auth) before the fake GP gateway: a full connect
#                with ESP (direct), ping; --no-dtls: the HTTPS tunnel through the proxy, ping;
#                https_proxy in the environment is not used without --libproxy (exit 1, a note
#                says so), with --libproxy it is, and no_proxy sends the host direct again;
#                openconnect 9.01 --authenticate with the same --proxy (reference)
#   http_auth:   tinyproxy with BasicAuth: the right user/password with --proxy-auth=basic logs in;
#                a wrong password, none at all, or no --proxy-auth=basic (openconnect keeps Basic
#                off by default): exit 1, the error names the refusal (tinyproxy answers 401 to
#                wrong credentials), the password is in no log at -vvv; openconnect 9.01 the same
#                (and with the right password it fails against tinyproxy: printed, see below)
#   socks5:      dante (no auth) before the fake GP gateway: --no-dtls tunnel through it, ping;
#                openconnect 9.01 --authenticate with the same --proxy
#   socks5_auth: dante with username auth (a user of its own, in a private /etc/passwd):
#                right password logs in; wrong one: exit 1, the SOCKS refusal named, no
#                password in the log; openconnect 9.01 the same
#   anyconnect:  tinyproxy before ocserv: --protocol=anyconnect through the proxy (CSTP),
#                DTLS directly to ocserv, ping; openconnect 9.01 --authenticate with the proxy
#   ntlm:        squid 5.7 with NTLM authentication (auth_param ntlm, Debian's ntlm_fake_auth
#                helper): --proxy http://EXAMPLE%5Calice:PASS@... (no --proxy-auth: NTLM is in the
#                default order, as in openconnect) logs in and carries the HTTPS tunnel (ping);
#                the fake helper accepts any response, so the helper's lines are captured and
#                ntlm_verify.py (independent Python, its own MD4) checks each NTLMv2 response
#                against the password: the right one verifies, a wrong one is shown to mismatch,
#                user@domain verifies with an empty domain;
#                openconnect 9.01 through the same squid (reported)
#   ntlm_refused: squid whose helper refuses every authenticate message: exit 1 naming the NTLM
#                refusal, at most 3 CONNECTs (no loop); no user: exit 1 saying how to give one
# shellcheck source=../gp_test_head.sh
. "$(dirname "$0")/../gp_test_head.sh" proxy-test "$@"
case $mode in
http | http_auth | anyconnect) command -v tinyproxy >/dev/null || { echo "SKIP: tinyproxy not installed"; exit 77; } ;;
socks5 | socks5_auth) command -v danted >/dev/null || { echo "SKIP: dante-server not installed"; exit 77; } ;;
ntlm | ntlm_refused)
  command -v squid >/dev/null && [[ -x /usr/lib/squid/ntlm_fake_auth ]] || { echo "SKIP: squid not installed"; exit 77; } ;;
esac
if [[ $mode == anyconnect ]]; then
  command -v ocserv >/dev/null || { echo "SKIP: ocserv not installed"; exit 77; }
  # shellcheck source=../anyconnect/ocserv_env.sh
  . "$repo/tests/integration/anyconnect/ocserv_env.sh"
  trap ocserv_cleanup EXIT
fi
topo_up
url=https://$gw_ip:4443/
proxy_port=8888 socks_port=1080

# No direct TCP from the client to the server: only the proxies' ports are reachable.
ip netns exec "$nsc" nft -f - <<EOF
table inet proxytest {
  chain out {
    type filter hook output priority 0;
    ip daddr $gw_ip tcp dport { 4443, 4444 } counter reject with tcp reset
  }
}
EOF
direct_rejected() { ip netns exec "$nsc" nft list chain inet proxytest out | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'; }

tinyproxy_up() {  # [BasicAuth user pass]
  {
    echo "User nobody"; echo "Group nogroup"
    echo "Port $proxy_port"; echo "Listen $gw_ip"; echo "Timeout 60"
    echo "LogFile \"$work/tinyproxy.log\""; echo "LogLevel Connect"
    echo "MaxClients 20"; echo "Allow 10.201.0.0/24"; echo "ConnectPort 4443"
    [[ $# -eq 2 ]] && echo "BasicAuth $1 $2"
  } >"$work/tinyproxy.conf"
  : >"$work/tinyproxy.log"; chmod 666 "$work/tinyproxy.log"; chmod 755 "$work"
  ip netns exec "$nsg" tinyproxy -d -c "$work/tinyproxy.conf" >"$work/tinyproxy.out" 2>&1 &
  pids+=($!)
  wait_listening "$nsg" tcp $proxy_port 10 || fail "tinyproxy did not start"
}

danted_up() {  # none | username
  {
    echo "logoutput: $work/danted.log"
    echo "internal: $gw_ip port = $socks_port"
    echo "external: $gw_ip"
    echo "clientmethod: none"
    echo "socksmethod: $1"
    echo "user.privileged: root"
    echo "user.unprivileged: nobody"
    printf '%s\n' "client pass {" "  from: 10.201.0.0/24 to: 0.0.0.0/0" "}"
    printf '%s\n' "socks pass {" "  from: 10.201.0.0/24 to: 0.0.0.0/0" "  command: connect" "  log: connect error" "}"
  } >"$work/danted.conf"
  if [[ $1 == username ]]; then
    # dante checks the system's password database: give it one of its own, in a mount namespace.
    cp /etc/passwd "$work/passwd"; cp /etc/shadow "$work/shadow"
    echo "sockuser:x:64999:65534::/nonexistent:/usr/sbin/nologin" >>"$work/passwd"
    echo "sockuser:$(openssl passwd -6 sockpass):19000:0:99999:7:::" >>"$work/shadow"
    ip netns exec "$nsg" unshare -m sh -c "mount --bind '$work/passwd' /etc/passwd && \
      mount --bind '$work/shadow' /etc/shadow && exec danted -f '$work/danted.conf'" >"$work/danted.out" 2>&1 &
  else
    ip netns exec "$nsg" danted -f "$work/danted.conf" >"$work/danted.out" 2>&1 &
  fi
  pids+=($!)
  wait_listening "$nsg" tcp $socks_port 10 || fail "danted did not start"
}

squid_port=3128
squid_up() {  # accept | refuse: what the NTLM helper answers to an authenticate message
  local d=$work/squid
  mkdir -p "$d"; chmod 777 "$d"; chmod 755 "$work"
  : >"$d/helper.in"; : >"$d/helper.out"; chmod 666 "$d/helper.in" "$d/helper.out"
  local filter=cat
  [[ $1 == refuse ]] && filter="sed -u 's/^AF .*/NA refused by the test/'"
  # squid runs this as its NTLM helper: the lines both ways are kept for ntlm_verify.py.
  printf '#!/bin/sh\ntee -a %s | /usr/lib/squid/ntlm_fake_auth | %s | tee -a %s\n' \
    "$d/helper.in" "$filter" "$d/helper.out" >"$d/helper"
  chmod 755 "$d/helper"
  cat >"$d/squid.conf" <<EOF
http_port $gw_ip:$squid_port
pid_filename $d/squid.pid
cache_log $d/cache.log
access_log stdio:$d/access.log
logfile_rotate 0
cache deny all
cache_mem 1 MB
coredump_dir $d
cache_effective_user proxy
shutdown_lifetime 0 seconds
pinger_enable off
dns_nameservers 127.0.0.1
auth_param ntlm program $d/helper
auth_param ntlm children 1 startup=1 idle=1
auth_param ntlm keep_alive on
acl CONNECT method CONNECT
acl vpn_port port 4443
acl authed proxy_auth REQUIRED
http_access deny !vpn_port
http_access allow CONNECT authed
http_access deny all
EOF
  ip netns exec "$nsg" squid -N -f "$d/squid.conf" >"$work/squid.out" 2>&1 &
  pids+=($!)
  wait_listening "$nsg" tcp $squid_port 20 || { cat "$d/cache.log" >&2; fail "squid did not start"; }
}
ntlm_verify() {  # PASSWORD [USER DOMAIN]: the NTLMv2 responses in the helper's log, checked against it
  python3 "$here/ntlm_verify.py" "$work/squid/helper.in" "$work/squid/helper.out" "${2:-alice}" "${3-EXAMPLE}" "$1"
}
squid_connects() { grep -c CONNECT "$work/squid/access.log" || true; }

# client NAME BIN ARGS...: runs to completion in the client namespace, password on stdin;
# sets rc; stdout in $work/NAME.out, stderr in $work/NAME.log.
client() {
  local name=$1 bin=$2; shift 2
  rc=0
  echo "${client_password:-secret}" | timeout 60 ip netns exec "$nsc" env ${client_env[@]+"${client_env[@]}"} \
    "$bin" "$@" >"$work/$name.out" 2>"$work/$name.log" || rc=$?
}
client_env=()

# connect_and_ping NAME ARGS...: a full espvpn connect, ping the lan, SIGINT.
connect_and_ping() {
  local name=$1; shift
  : >"$work/$name.log"
  echo "${client_password:-secret}" | ip netns exec "$nsc" "$espvpn" "$@" >"$work/$name.out" 2>"$work/$name.log" &
  local pid=$!; pids+=("$pid")
  wait_for "$work/$name.log" "${connected_pattern:-connected}" 40 "$pid" || fail "$name: no tunnel"
  local i ok=0
  for ((i = 0; i < 20; i++)); do ip netns exec "$nsc" ping -c 1 -W 1 $lan_ip >/dev/null && { ok=1; break; }; sleep 0.5; done
  [[ $ok == 1 ]] || fail "$name: no ping through the tunnel"
  kill -INT "$pid"
  local r=0
  wait "$pid" || r=$?
  [[ $r -eq 0 ]] || fail "$name: exit $r after SIGINT"
  echo "RESULT $name: tunnel up, ping ok, exit 0"
}

no_secret_in_logs() {  # SECRET
  if grep -rl -- "$1" "$work"/*.log "$work"/*.out 2>/dev/null | grep -v -e tinyproxy -e danted; then
    fail "the password '$1' appears in a client log"
  fi
}

gp=(--protocol=gp --cafile "$repo/certs/ca.pem" -u alice --passwd-on-stdin)

case $mode in
http)
  gateway_https_up
  gateway_up aes-128-cbc:sha1 --tun "$ht_dev" || fail "fake gateway did not start"
  tinyproxy_up
  proxy=http://$gw_ip:$proxy_port/
  client direct "$espvpn" "${gp[@]}" --authenticate $url
  [[ $rc -eq 1 ]] || fail "a direct connection was not rejected (rc $rc): the test would prove nothing"
  before=$(direct_rejected)
  connected_pattern="ESP connected" connect_and_ping esp "${gp[@]}" --proxy "$proxy" $url
  grep -q "ESP goes directly" "$work/esp.log" || fail "espvpn did not say ESP goes directly"
  connected_pattern="HTTPS tunnel up" connect_and_ping https "${gp[@]}" --proxy "$proxy" --no-dtls $url
  [[ $(direct_rejected) == "$before" ]] || fail "espvpn tried direct TCP to the server despite --proxy"
  grep -q "CONNECT.*$gw_ip:4443" "$work/tinyproxy.log" || fail "tinyproxy logged no CONNECT"
  echo "RESULT tinyproxy CONNECTs: $(grep -c 'CONNECT' "$work/tinyproxy.log")"
  # The environment: only with --libproxy; no_proxy goes direct (and is rejected here).
  client_env=(https_proxy=$proxy)
  client env_ignored "$espvpn" "${gp[@]}" --authenticate $url
  [[ $rc -eq 1 ]] || fail "https_proxy was used without --libproxy (rc $rc)"
  grep -q "pass --libproxy" "$work/env_ignored.log" || fail "no note that https_proxy is not used"
  client env_used "$espvpn" "${gp[@]}" --libproxy --authenticate $url
  [[ $rc -eq 0 ]] && grep -q "^COOKIE=" "$work/env_used.out" || fail "--libproxy did not log in through https_proxy (rc $rc)"
  client_env=(https_proxy=$proxy no_proxy=example.test,$gw_ip)
  client env_bypassed "$espvpn" "${gp[@]}" --libproxy --authenticate $url
  [[ $rc -eq 1 ]] || fail "no_proxy did not send $gw_ip direct (rc $rc)"
  client_env=()
  client oc "openconnect" "${gp[@]}" --usergroup=gateway --proxy "$proxy" --authenticate $url
  [[ $rc -eq 0 ]] && grep -q "^COOKIE=" "$work/oc.out" || fail "openconnect 9.01 failed through the proxy (rc $rc)"
  echo "RESULT openconnect 9.01 --authenticate through the same proxy: exit 0"
  ;;
http_auth)
  gateway_up none || fail "fake gateway did not start"
  tinyproxy_up puser proxypass-Right7
  right=(--proxy "http://puser:proxypass-Right7@$gw_ip:$proxy_port/" --proxy-auth=basic)
  client right "$espvpn" "${gp[@]}" "${right[@]}" --authenticate $url
  [[ $rc -eq 0 ]] && grep -q "^COOKIE=" "$work/right.out" || fail "login through the authenticating proxy failed (rc $rc)"
  client wrong "$espvpn" "${gp[@]}" -vvv --dump-http-traffic --proxy "http://puser:WrongPass-x9@$gw_ip:$proxy_port/" \
    --proxy-auth=basic --authenticate $url
  [[ $rc -eq 1 ]] || fail "a wrong proxy password gave exit $rc, not 1"
  grep -q "refused the connection.*40[17] .*not accepted" "$work/wrong.log" || fail "the error does not name the 407/401"
  client none "$espvpn" "${gp[@]}" --proxy "http://$gw_ip:$proxy_port/" --authenticate $url
  [[ $rc -eq 1 ]] || fail "no proxy credentials gave exit $rc, not 1"
  grep -q "40[17] .*USER:PASS" "$work/none.log" || fail "the error does not say how to give credentials"
  # As openconnect: Basic (clear text) only when --proxy-auth names it.
  client no_basic "$espvpn" "${gp[@]}" -vvv --proxy "http://puser:proxypass-Right7@$gw_ip:$proxy_port/" --authenticate $url
  [[ $rc -eq 1 ]] || fail "Basic was used without --proxy-auth=basic (rc $rc)"
  grep -q "off unless --proxy-auth=basic" "$work/no_basic.log" || fail "the error does not name --proxy-auth=basic"
  grep -h "refused the connection" "$work/wrong.log" "$work/none.log" "$work/no_basic.log" | sed 's/^/RESULT espvpn: /'
  no_secret_in_logs WrongPass-x9
  no_secret_in_logs proxypass-Right7
  oc=(openconnect "${gp[@]}" --usergroup=gateway)
  # openconnect 9.01 answers a 407 only on the same connection; tinyproxy's comes as HTTP/1.0 with
  # "Connection: close", so openconnect fails even with the right password (espvpn sends Basic at
  # once). Reported, not asserted: it is openconnect's limitation.
  client oc_right "${oc[@]}" "${right[@]}" --authenticate $url
  echo "RESULT openconnect 9.01 with the right password and --proxy-auth=basic: exit $rc (espvpn: 0)"
  client oc_wrong "${oc[@]}" --proxy "http://puser:WrongPass-x9@$gw_ip:$proxy_port/" --proxy-auth=basic --authenticate $url
  [[ $rc -eq 1 ]] || fail "openconnect 9.01 with a wrong proxy password: exit $rc (espvpn: 1)"
  client oc_no_basic "${oc[@]}" --proxy "http://puser:proxypass-Right7@$gw_ip:$proxy_port/" --authenticate $url
  [[ $rc -eq 1 ]] || fail "openconnect 9.01 without --proxy-auth=basic: exit $rc (espvpn: 1)"
  echo "RESULT openconnect 9.01: wrong password exit 1, no --proxy-auth=basic exit 1 (espvpn the same)"
  ;;
socks5)
  gateway_https_up
  gateway_up none --tun "$ht_dev" || fail "fake gateway did not start"
  danted_up none
  connected_pattern="HTTPS tunnel up" connect_and_ping socks "${gp[@]}" --proxy "socks5://$gw_ip:$socks_port/" \
    --no-dtls $url
  grep -q "SOCKS5 proxy .* connected us" "$work/socks.log" || true
  client oc openconnect "${gp[@]}" --usergroup=gateway --proxy "socks5://$gw_ip:$socks_port/" --authenticate $url
  [[ $rc -eq 0 ]] || fail "openconnect 9.01 through dante: exit $rc"
  echo "RESULT openconnect 9.01 --authenticate through the same SOCKS5 proxy: exit 0"
  ;;
socks5_auth)
  gateway_up none || fail "fake gateway did not start"
  danted_up username
  client right "$espvpn" "${gp[@]}" --proxy "socks5://sockuser:sockpass@$gw_ip:$socks_port/" --authenticate $url
  [[ $rc -eq 0 ]] && grep -q "^COOKIE=" "$work/right.out" || fail "login through SOCKS5 with a user failed (rc $rc)"
  client wrong "$espvpn" "${gp[@]}" -vvv --proxy "socks5://sockuser:Bad-Sock-7@$gw_ip:$socks_port/" --authenticate $url
  [[ $rc -eq 1 ]] || fail "a wrong SOCKS5 password gave exit $rc, not 1"
  grep -q "refused the user name and password" "$work/wrong.log" || fail "the error does not name the SOCKS refusal"
  client none "$espvpn" "${gp[@]}" --proxy "socks5://$gw_ip:$socks_port/" --authenticate $url
  [[ $rc -eq 1 ]] && grep -q "requires authentication" "$work/none.log" || fail "no user for an authenticating SOCKS5 proxy"
  grep -h "SOCKS5" "$work/wrong.log" "$work/none.log" | grep -i "error\|refused\|requires" | sed 's/^/RESULT espvpn: /'
  no_secret_in_logs Bad-Sock-7
  client oc_right openconnect "${gp[@]}" --usergroup=gateway --proxy "socks5://sockuser:sockpass@$gw_ip:$socks_port/" \
    --authenticate $url
  [[ $rc -eq 0 ]] || fail "openconnect 9.01 with the SOCKS5 user and password: exit $rc (espvpn: 0)"
  client oc_wrong openconnect "${gp[@]}" --usergroup=gateway --proxy "socks5://sockuser:Bad-Sock-7@$gw_ip:$socks_port/" \
    --authenticate $url
  [[ $rc -eq 1 ]] || fail "openconnect 9.01 with a wrong SOCKS5 password: exit $rc (espvpn: 1)"
  echo "RESULT openconnect 9.01 through SOCKS5: right password exit 0, wrong exit 1 (espvpn the same)"
  ;;
anyconnect)
  ocserv_up || fail "ocserv did not start"
  tinyproxy_up
  client_password=$oc_password
  connected_pattern="data over DTLS" connect_and_ping ac --protocol=anyconnect --cafile "$repo/certs/ca.pem" \
    -u testuser --passwd-on-stdin --proxy "http://$gw_ip:$proxy_port/" $url
  grep -q "DTLS goes directly" "$work/ac.log" || fail "espvpn did not say DTLS goes directly"
  grep -q "CONNECT.*$gw_ip:4443" "$work/tinyproxy.log" || fail "tinyproxy logged no CONNECT"
  client oc openconnect --protocol=anyconnect --cafile "$repo/certs/ca.pem" -u testuser --passwd-on-stdin \
    --proxy "http://$gw_ip:$proxy_port/" --authenticate $url
  [[ $rc -eq 0 ]] || fail "openconnect 9.01 to ocserv through the proxy: exit $rc"
  echo "RESULT openconnect 9.01 --authenticate to ocserv through the same proxy: exit 0"
  ;;
ntlm)
  gateway_https_up
  gateway_up none --tun "$ht_dev" || fail "fake gateway did not start"
  squid_up accept
  pw=Ntlm-Right-5
  ntlm_proxy="http://EXAMPLE%5Calice:$pw@$gw_ip:$squid_port/"
  # The verifier first checks an independent client's NTLMv2: curl's.
  if command -v curl >/dev/null; then
    ip netns exec "$nsc" timeout 20 curl -s -o /dev/null --cacert "$repo/certs/ca.pem" \
      --proxy "http://$gw_ip:$squid_port" --proxy-ntlm --proxy-user "EXAMPLE\\alice:$pw" "https://$gw_ip:4443/" || true
    ntlm_verify "$pw" >"$work/verify_curl.txt" || { cat "$work/verify_curl.txt"; fail "curl's NTLMv2 does not verify"; }
    echo "RESULT curl's NTLMv2 through squid verifies: the verifier is sound"
    : >"$work/squid/helper.in"; : >"$work/squid/helper.out"
  fi
  client right "$espvpn" "${gp[@]}" -vv --proxy "$ntlm_proxy" --authenticate $url
  [[ $rc -eq 0 ]] && grep -q "^COOKIE=" "$work/right.out" || fail "login through squid with NTLM failed (rc $rc)"
  grep -q "trying NTLM authentication" "$work/right.log" || fail "espvpn did not answer with NTLM"
  ntlm_verify "$pw" >"$work/verify_right.txt" || { cat "$work/verify_right.txt"; fail "the NTLMv2 responses do not verify"; }
  echo "RESULT espvpn NTLMv2 through squid: $(grep -c ': ok' "$work/verify_right.txt") authenticate message(s) verified"
  # The verifier tells a wrong password (ntlm_fake_auth lets it through, the check does not).
  : >"$work/squid/helper.in"; : >"$work/squid/helper.out"
  client wrong "$espvpn" "${gp[@]}" --proxy "http://EXAMPLE%5Calice:Ntlm-Wrong-6@$gw_ip:$squid_port/" --authenticate $url
  ! ntlm_verify "$pw" >"$work/verify_wrong.txt" || fail "a wrong password verified as the right one"
  grep -q "mismatch" "$work/verify_wrong.txt" || { cat "$work/verify_wrong.txt"; fail "the wrong password was not caught"; }
  ntlm_verify Ntlm-Wrong-6 >/dev/null || fail "the wrong password's responses do not verify as that password"
  echo "RESULT a wrong password: the verifier reports $(grep -m1 -o 'mismatch' "$work/verify_wrong.txt")"
  # A UPN user: the whole name as user, an empty domain ([MS-NLMP] 3.1.5.1.2).
  : >"$work/squid/helper.in"; : >"$work/squid/helper.out"
  client upn "$espvpn" "${gp[@]}" --proxy "http://alice%40example.test:$pw@$gw_ip:$squid_port/" --authenticate $url
  [[ $rc -eq 0 ]] || fail "login as user@domain through squid failed (rc $rc)"
  ntlm_verify "$pw" alice@example.test "" >"$work/verify_upn.txt" ||
    { cat "$work/verify_upn.txt"; fail "the user@domain NTLMv2 responses do not verify"; }
  echo "RESULT user@domain: $(grep -c ': ok' "$work/verify_upn.txt") authenticate message(s) verified"
  no_secret_in_logs "$pw"
  no_secret_in_logs Ntlm-Wrong-6
  # The HTTPS tunnel through the NTLM-authenticated connection.
  connected_pattern="HTTPS tunnel up" connect_and_ping https "${gp[@]}" --proxy "$ntlm_proxy" --proxy-auth=ntlm \
    --no-dtls $url
  [[ $(direct_rejected) == 0 ]] || fail "espvpn tried direct TCP to the server despite --proxy"
  client oc openconnect "${gp[@]}" --usergroup=gateway --proxy "$ntlm_proxy" --authenticate $url
  echo "RESULT openconnect 9.01 through the same squid: exit $rc (its NTLM is v1/NTLM2-session, not v2)"
  ;;
ntlm_refused)
  gateway_up none || fail "fake gateway did not start"
  squid_up refuse
  client refused "$espvpn" "${gp[@]}" --proxy "http://EXAMPLE%5Calice:Ntlm-Right-5@$gw_ip:$squid_port/" --authenticate $url
  [[ $rc -eq 1 ]] || fail "a refusing NTLM proxy gave exit $rc, not 1"
  grep -q "refused the connection.*407.*NTLM authentication as user 'EXAMPLE.alice' was not accepted" "$work/refused.log" ||
    fail "the error does not name the NTLM refusal"
  n=$(squid_connects)
  [[ $n -ge 2 && $n -le 3 ]] || fail "$n CONNECTs for one refused login (expected 2-3: no loop)"
  grep -h "refused the connection" "$work/refused.log" | sed 's/^/RESULT espvpn: /'
  echo "RESULT squid saw $n CONNECT requests"
  client nouser "$espvpn" "${gp[@]}" --proxy "http://$gw_ip:$squid_port/" --authenticate $url
  [[ $rc -eq 1 ]] && grep -q "it wants NTLM.*USER:PASS" "$work/nouser.log" || fail "no user: rc $rc, no clear error"
  no_secret_in_logs Ntlm-Right-5
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo "PASS $mode"
