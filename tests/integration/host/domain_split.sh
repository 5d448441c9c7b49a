#!/usr/bin/env bash
# The domain-based split tunnel (issue 22 item 4) against the fake GP gateway in namespaces
# (tools/netns/gp-topology.sh), with a small DNS server (fake_dns.py) on the lan host. The
# gateway sends (--domains-file) include-split-tunneling-domain inc.corp.test, port.corp.test:443,
# lost.corp.test (never answered), *.wild.test and exclude-split-tunneling-domain
# exc.corp.test, xport.corp.test:443 (an exclude with a port: not applied, never
# queried, it stays in the tunnel) and *.out.wild.test; its DNS server is the lan host, which is outside the tunnel's routes
# (10.202.0.128/25 only), so only queries bound to the tun reach it. The named hosts
# (10.203.0.0/24, fd00:203::/64) sit behind the lan host; the client has no route to them
# but the domain routes.
#   split: routes via the tun for the include names' A and AAAA answers (not for a name
#          not listed); the queries leave by the tun only (nft counters
#          on the client's output); a ping to an include address goes through the tun; the
#          exclude name's address (inside 10.202.0.128/25) is routed outside the tunnel and
#          its ping does not enter the tun; a changed answer (one address gone, one new) moves
#          the routes after the re-resolve (TTL 2 s, ESPVPN_DOMAIN_MIN_TTL=2); the lost name
#          counts failures; a SIGUSR2 reconnect keeps the routes and the answers coming; one
#          whose getconfig changes the lists (fake --domains-file) replaces them;
#          --stats-json domain_routes matches; the wildcard: the client's resolv.conf names
#          the forwarder on the tun's address, getent resolves a name under it and the
#          route is there when the answer is (ping through the tun), a name under the
#          exclude *.out.wild.test is routed outside the tunnel, a never-answered
#          name gets SERVFAIL (counted); SIGINT removes every route and puts resolv.conf
#          back; with --script nothing is applied.
#   relogin: --always-on with the wildcard *.wild.test: the forwarder answers in the first
#          session and, after a forced re-login (the gateway session expired, SIGUSR2: cookie
#          refused, a new login with the saved portal cookie), in the second one on its new tun.
#   domain_split.sh gp split|relogin ESPVPN GATEWAY_BIN
# shellcheck source=../proto_head.sh
. "$(dirname "$0")/../proto_head.sh" domain-split "$@"
[[ $proto == gp && ($mode == split || $mode == relogin) ]] ||
  { echo "usage: $0 gp split|relogin ESPVPN GATEWAY_BIN (AnyConnect has no domain lists)"; exit 2; }
topo_up
tun=espdom$$
tun=${tun:0:15}

# The named hosts behind the lan host; the exclude name's address is also the gateway's own
# (on the outer link), so a ping to it is answered by either path.
ip -n "$nsl" addr add 10.203.0.5/32 dev lo
ip -n "$nsl" addr add 10.203.0.6/32 dev lo
ip -n "$nsl" addr add 10.203.0.7/32 dev lo
ip -n "$nsl" addr add 10.203.0.8/32 dev lo
ip -n "$nsl" addr add 10.203.0.9/32 dev lo
ip -n "$nsl" addr add 10.203.0.10/32 dev lo
ip -n "$nsl" addr add 10.203.0.11/32 dev lo
ip -n "$nsl" addr add fd00:203::5/128 dev lo
ip -n "$nsg" route add 10.203.0.0/24 via $lan_ip
ip -n "$nsg" -6 route add fd00:203::/64 via $lan_ip6
ip -n "$nsg" addr add 10.202.0.200/32 dev "${topo}gc"
ip -n "$nsg" addr add 10.202.0.201/32 dev "${topo}gc"

answers() {  # JSON: written whole, then renamed (the server re-reads it at every query)
  printf '%s\n' "$1" >"$work/answers.tmp" && mv "$work/answers.tmp" "$work/answers.json"
}
answers '{"inc.corp.test": {"A": [["10.203.0.5", 2], ["10.203.0.6", 2]], "AAAA": [["fd00:203::5", 2]]},
          "port.corp.test": {"A": [["10.203.0.9", 60]]},
          "exc.corp.test": {"A": [["10.202.0.200", 60]]},
          "other.corp.test": {"A": [["10.203.0.7", 60]]},
          "new.corp.test": {"A": [["10.203.0.10", 60]]},
          "a.wild.test": {"A": [["10.203.0.11", 60]]},
          "b.out.wild.test": {"A": [["10.202.0.201", 60]]},
          "c.wild.test": {"A": [["10.203.0.10", 60]]},
          "lost.wild.test": {"drop": true},
          "lost.corp.test": {"drop": true}}'
ip netns exec "$nsl" $py "$here/fake_dns.py" $lan_ip 53 "$work/answers.json" "$work/dns.jsonl" "$work/dns.ready" 120 \
  >"$work/dns.out" 2>&1 &
pids+=("$!")
wait_for "$work/dns.ready" ready 10 || fail "the DNS server did not start"

# What the client sends, counted on its way out (locally generated packets).
ip netns exec "$nsc" nft -f - <<EOF
table inet count {
  counter tun_dns {}
  counter out_dns {}
  counter tun_ping {}
  counter tun_ping_exc {}
  chain out {
    type filter hook output priority 0;
    oifname "$tun" udp dport 53 counter name "tun_dns"
    oifname != "$tun" udp dport 53 counter name "out_dns"
    oifname "$tun" ip daddr 10.202.0.200 icmp type echo-request counter name "tun_ping_exc"
    oifname "$tun" icmp type echo-request counter name "tun_ping"
    oifname "$tun" icmpv6 type echo-request counter name "tun_ping"
  }
}
EOF
count() { ip netns exec "$nsc" nft list counter inet count "$1" | sed -n 's/.*packets \([0-9]*\).*/\1/p'; }

fake_routes=(--route 10.202.0.128/25 --route6 fd00:202::/64)
domains() { printf '%s\n' "$1" >"$work/domains.tmp" && mv "$work/domains.tmp" "$work/domains.json"; }

if [[ $mode == relogin ]]; then
  # --always-on, a wildcard split domain, and a forced re-login: the first session's
  # forwarder answers; the gateway session expires (--cookie-max-age), a reconnect (SIGUSR2)
  # finds the cookie refused, the session is over and a new login (the saved portal cookie)
  # brings up a second session on a new tun: its forwarder answers too, on the port 53
  # socket the broker bound for the first one (it can bind port 53 no more).
  domains '{"include": ["*.wild.test"], "exclude": []}'
  gateway_up aes-128-gcm --dns $lan_ip --domains-file "$work/domains.json" --portal-cookie --cookie-max-age 4 ||
    fail "the gateway did not start"
  resolv=/etc/netns/$nsc/resolv.conf
  espvpn_up -i "$tun" --no-captive-probe --always-on --reconnect-timeout 3
  announced() { (($(grep -c "the host's name server is now espvpn's forwarder on $tun_ip:53" "$work/espvpn.log") >= $1)); }
  wait_until 30 announced 1 || fail "no forwarder in the first session: $(grep -i 'split\|error' "$work/espvpn.log")"
  t0=$SECONDS
  got=$(timeout 60 ip netns exec "$nsc" getent ahostsv4 a.wild.test) || fail "first session: getent a.wild.test failed"
  grep -q "^10.203.0.11 .*STREAM" <<<"$got" || fail "first session: getent a.wild.test: '$got'"
  # Past the gateway session's 4 s (its clock, not this machine's speed), then a reconnect.
  sleep $((t0 + 5 - SECONDS > 0 ? t0 + 5 - SECONDS : 0))
  kill -USR2 "$client_pid"
  wait_until 60 announced 2 || fail "no forwarder in the second session: $(grep -i 'split\|cookie\|error' "$work/espvpn.log")"
  grep -q "the server rejected the cookie: the session is over" "$work/espvpn.log" || fail "no forced re-login"
  [[ $(json "$work/fake-stats.json" 'd.get("portal_cookie_logins", 0)') -ge 1 ]] || fail "the second session is no new login"
  ! grep -q "not applied" "$work/espvpn.log" || fail "split domains not applied: $(grep 'not applied' "$work/espvpn.log")"
  grep -q "^nameserver $tun_ip$" "$resolv" || fail "resolv.conf does not name the forwarder: $(cat "$resolv")"
  got=$(timeout 60 ip netns exec "$nsc" getent ahostsv4 c.wild.test) || fail "second session: getent c.wild.test failed"
  grep -q "^10.203.0.10 .*STREAM" <<<"$got" || fail "second session: getent c.wild.test: '$got'"
  ip -n "$nsc" route show dev "$tun" | grep -q "^10.203.0.10" || fail "no route for c.wild.test in the second session"
  ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 10.203.0.10 >/dev/null || fail "ping c.wild.test's 10.203.0.10 failed"
  espvpn_down || fail "espvpn did not exit cleanly"
  [[ $(cat "$resolv") == $'nameserver 192.0.2.53\nsearch home.test' ]] || fail "resolv.conf not restored: $(cat "$resolv")"
  echo "PASS: the DNS forwarder answers in a second --always-on session (forced re-login)"
  exit 0
fi
domains '{"include": ["inc.corp.test", "port.corp.test:443", "lost.corp.test", "*.wild.test"], "exclude": ["exc.corp.test", "xport.corp.test:443", "*.out.wild.test"]}'
gateway_up aes-128-gcm --dns $lan_ip --domains-file "$work/domains.json" || fail "the gateway did not start"
export ESPVPN_DOMAIN_MIN_TTL=2
# --no-captive-probe: its host is looked up through the host resolver when the tunnel comes up,
# and here the VPN's name server (10.202.0.2) is not routed via the tunnel; every query counted
# below is the domain split's own.
espvpn_up -i "$tun" --no-captive-probe
stats_wait "$work/cl-stats.json" "d['transport'] != 'none'" 30 || fail "espvpn did not bring the tunnel up"
dr() { stats_get "$work/cl-stats.json" "d['domain_routes']$1"; }
stats_wait "$work/cl-stats.json" "d.get('domain_routes', {}).get('routes') == 5" 15 ||
  fail "domain routes not installed: $(stats_get "$work/cl-stats.json" "d.get('domain_routes')")"

routes4=$(ip -n "$nsc" route show dev "$tun")
routes6=$(ip -n "$nsc" -6 route show dev "$tun")
for a in 10.203.0.5 10.203.0.6 10.203.0.9; do
  grep -Eq "^$a( |$)" <<<"$routes4" || fail "no route for $a via $tun: $routes4"
done
grep -q "^fd00:203::5 " <<<"$routes6" || fail "no route for fd00:203::5 via $tun: $routes6"
! grep -q "10.203.0.7" <<<"$routes4" || fail "a route for other.corp.test (not listed): $routes4"
exc=$(ip -n "$nsc" route show 10.202.0.200)
grep -q "dev ${topo}cg" <<<"$exc" || fail "exc.corp.test's 10.202.0.200 not routed outside the tunnel: '$exc'"
ip -n "$nsc" route get 10.202.0.200 | grep -q "dev ${topo}cg" || fail "10.202.0.200 still goes into the tunnel"
echo "routes via $tun: $(tr '\n' ';' <<<"$routes4") $(tr '\n' ';' <<<"$routes6") exclude: $exc"

# The queries went by the tun only, from the tunnel's address, and only for listed plain names.
(($(count tun_dns) >= 6)) || fail "only $(count tun_dns) DNS queries left by the tun"
(($(count out_dns) == 0)) || fail "$(count out_dns) DNS queries left outside the tunnel"
field() { $py -c 'import json,sys; print(" ".join(sorted({json.loads(l)[sys.argv[2]] for l in open(sys.argv[1])})))' "$work/dns.jsonl" "$1"; }
[[ $(field src) == "$tun_ip" ]] || fail "queries came from $(field src), not the tunnel address $tun_ip"
[[ $(field name) == "exc.corp.test inc.corp.test lost.corp.test port.corp.test" ]] || fail "queried names: $(field name)"

# Include: through the tunnel (no other route to 10.203.0.0/24 exists); other.corp.test's address unreachable.
p0=$(count tun_ping)
ip netns exec "$nsc" ping -c 3 -i 0.2 -W 2 10.203.0.5 >/dev/null || fail "ping 10.203.0.5 (inc.corp.test) failed"
ip netns exec "$nsc" ping -6 -c 2 -i 0.2 -W 2 fd00:203::5 >/dev/null || fail "ping fd00:203::5 (inc.corp.test) failed"
(($(count tun_ping) >= p0 + 5)) || fail "the include pings did not go through the tun ($p0 -> $(count tun_ping))"
! ip netns exec "$nsc" ping -c 1 -W 1 10.203.0.7 >/dev/null 2>&1 || fail "10.203.0.7 (not listed) reachable"
# Exclude: answered around the tunnel, nothing of it enters the tun.
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 10.202.0.200 >/dev/null || fail "ping 10.202.0.200 (exc.corp.test) failed"
(($(count tun_ping_exc) == 0)) || fail "$(count tun_ping_exc) pings to exc.corp.test's address entered the tun"

# The lost name: both families time out (2 s) and count as failures.
stats_wait "$work/cl-stats.json" "d['domain_routes']['failures'] >= 2" 10 || fail "no failures counted for lost.corp.test"

# A changed answer: 10.203.0.6 gone, 10.203.0.8 new; the re-resolve (80 % of 2 s) moves the routes.
r0=$(dr "['resolves']")
answers '{"inc.corp.test": {"A": [["10.203.0.5", 2], ["10.203.0.8", 2]], "AAAA": [["fd00:203::5", 2]]},
          "port.corp.test": {"A": [["10.203.0.9", 60]]},
          "exc.corp.test": {"A": [["10.202.0.200", 60]]},
          "new.corp.test": {"A": [["10.203.0.10", 60]]},
          "a.wild.test": {"A": [["10.203.0.11", 60]]},
          "b.out.wild.test": {"A": [["10.202.0.201", 60]]},
          "lost.wild.test": {"drop": true},
          "lost.corp.test": {"drop": true}}'
moved() { local r; r=$(ip -n "$nsc" route show dev "$tun"); grep -q "^10.203.0.8" <<<"$r" && ! grep -q "^10.203.0.6" <<<"$r"; }
wait_until 10 moved || fail "the routes did not follow the new answer: $(ip -n "$nsc" route show dev "$tun")"
ip netns exec "$nsc" ping -c 1 -W 2 10.203.0.8 >/dev/null || fail "ping 10.203.0.8 (the new address) failed"
stats_wait "$work/cl-stats.json" "d['domain_routes']['resolves'] > $r0" 5 || fail "no re-resolve counted"

# A reconnect with the same configuration (SIGUSR2: a getconfig, new ESP keys) keeps the routes,
# and the names are still answered through the tunnel afterwards.
g0=$(json "$work/fake-stats.json" 'd["getconfigs"]')
more_getconfigs() { (($(json "$work/fake-stats.json" 'd["getconfigs"]') > g0)); }
kill -USR2 "$client_pid"
wait_until 10 more_getconfigs || fail "SIGUSR2: no new getconfig"
r1=$(dr "['resolves']")
stats_wait "$work/cl-stats.json" "d['domain_routes']['resolves'] > $r1 + 2" 10 || fail "no answers after the reconnect"
ip netns exec "$nsc" ping -c 1 -W 2 10.203.0.5 >/dev/null || fail "ping 10.203.0.5 after the reconnect failed"
[[ $(dr "['generation']") == 0 ]] || fail "the same configuration made the routes again: $(dr "")"

# The counters: 6 rules (with the wildcards), 5 addresses, 5 routes, nothing evicted.
stats_wait "$work/cl-stats.json" "d['domain_routes']['addresses'] == 5 and d['domain_routes']['routes'] == 5" 5 ||
  fail "domain_routes: $(dr "")"
[[ $(dr "['rules']") == 6 && $(dr "['evicted']") == 0 ]] || fail "domain_routes: $(dr "")"
echo "domain_routes: $(dr "")"

# The wildcard *.wild.test: the client's resolver asks the forwarder on the tun's address (the
# reconnect above kept it), which routes a.wild.test's address before relaying the answer.
resolv=/etc/netns/$nsc/resolv.conf
(($(grep -c "split domains \*.wild.test, \*.out.wild.test: the host's name server is now espvpn's forwarder on $tun_ip:53" \
  "$work/espvpn.log") == 1)) || fail "the forwarder not announced once: $(grep -i 'wild' "$work/espvpn.log")"
grep -q "^nameserver $tun_ip$" "$resolv" && ! grep -q "^nameserver $lan_ip" "$resolv" ||
  fail "resolv.conf does not name the forwarder alone: $(cat "$resolv")"
! ip -n "$nsc" route show dev "$tun" | grep -q "^10.203.0.11" || fail "a route for a.wild.test before it was asked"
f0=$(dr "['forwarded']")
got=$(timeout 60 ip netns exec "$nsc" getent ahostsv4 a.wild.test) || fail "getent a.wild.test failed: $(dr "")"
# Taken right after the answer: the route was made before it was relayed.
routes4=$(ip -n "$nsc" route show dev "$tun")
grep -q "^10.203.0.11 .*STREAM" <<<"$got" || fail "getent a.wild.test: '$got'"
grep -q "^10.203.0.11" <<<"$routes4" || fail "no route for a.wild.test's 10.203.0.11 when its answer came: $routes4"
stats_wait "$work/cl-stats.json" "d['domain_routes']['forwarded'] > $f0" 10 || fail "no relayed answer counted: $(dr "")"
p0=$(count tun_ping)
ip netns exec "$nsc" ping -c 2 -i 0.2 -W 2 10.203.0.11 >/dev/null || fail "ping 10.203.0.11 (a.wild.test) failed"
(($(count tun_ping) >= p0 + 2)) || fail "the pings to a.wild.test did not go through the tun ($p0 -> $(count tun_ping))"
# A name under the exclude *.out.wild.test (the longer wildcard wins): routed outside the tunnel,
# which its prefix (10.202.0.128/25) would otherwise take.
ip -n "$nsc" route get 10.202.0.201 | grep -q "dev $tun" || fail "10.202.0.201 not in the tunnel before its lookup"
got=$(timeout 60 ip netns exec "$nsc" getent ahostsv4 b.out.wild.test) || fail "getent b.out.wild.test failed"
grep -q "^10.202.0.201 .*STREAM" <<<"$got" || fail "getent b.out.wild.test: '$got'"
ip -n "$nsc" route show 10.202.0.201 | grep -q "dev ${topo}cg" ||
  fail "b.out.wild.test's 10.202.0.201 not routed outside the tunnel: $(ip -n "$nsc" route get 10.202.0.201)"
# A name under it that is never answered: SERVFAIL after the forwarder's 2 s, counted (whatever
# the stub resolver does meanwhile: its own timeout is 5 s, then it may try the search domain).
s0=$(dr "['servfails']")
timeout 60 ip netns exec "$nsc" getent ahostsv4 lost.wild.test >"$work/lost.out" 2>&1 &
lost_pid=$!
stats_wait "$work/cl-stats.json" "d['domain_routes']['servfails'] > $s0" 30 || fail "no SERVFAIL counted: $(dr "")"
! wait "$lost_pid" || fail "getent lost.wild.test found an address: $(cat "$work/lost.out")"
echo "wildcard: a.wild.test routed via $tun, b.out.wild.test outside; lost.wild.test SERVFAIL; $(dr "")"

# A reconnect whose configuration changes the lists (port.corp.test out, new.corp.test in): the old
# routes go, the new lists' are made.
domains '{"include": ["inc.corp.test", "new.corp.test", "lost.corp.test", "*.wild.test"], "exclude": ["exc.corp.test"]}'
g0=$(json "$work/fake-stats.json" 'd["getconfigs"]')
kill -USR2 "$client_pid"
wait_until 10 more_getconfigs || fail "SIGUSR2: no new getconfig"
stats_wait "$work/cl-stats.json" "d['domain_routes']['generation'] == 1 and d['domain_routes']['routes'] == 5" 10 ||
  fail "the changed lists were not applied: $(dr "")"
routes4=$(ip -n "$nsc" route show dev "$tun")
grep -q "^10.203.0.10" <<<"$routes4" || fail "no route for new.corp.test's 10.203.0.10: $routes4"
! grep -q "^10.203.0.9" <<<"$routes4" || fail "port.corp.test's route stayed after it left the list: $routes4"
grep -q "^10.203.0.5" <<<"$routes4" || fail "inc.corp.test's route missing after the change: $routes4"
ip -n "$nsc" route show 10.202.0.200 | grep -q "dev ${topo}cg" || fail "the exclude route missing after the change"
ip netns exec "$nsc" ping -c 1 -W 2 10.203.0.10 >/dev/null || fail "ping 10.203.0.10 (new.corp.test) failed"

espvpn_down || fail "espvpn did not exit cleanly"
left=$(ip -n "$nsc" route show; ip -n "$nsc" -6 route show)
! grep -Eq "10\.203\.|10\.202\.0\.20[01]|fd00:203::" <<<"$left" || fail "routes left after SIGINT: $left"
[[ $(cat "$resolv") == $'nameserver 192.0.2.53\nsearch home.test' ]] || fail "resolv.conf not restored: $(cat "$resolv")"
[[ $(dr "['routes']") == 0 ]] || fail "the last stats still count routes: $(dr "")"

# With --script the routes are the script's: nothing applied, no domain_routes in the stats.
espvpn_up -i "$tun" --no-captive-probe --script /bin/true
stats_wait "$work/cl-stats.json" "d['transport'] != 'none'" 30 || fail "--script: espvpn did not bring the tunnel up"
sleep 0.5
stats_wait "$work/cl-stats.json" "'domain_routes' not in d" 2 || fail "--script: domain routes applied: $(dr "")"
! ip -n "$nsc" route show | grep -Eq "10\.203\.|10\.202\.0\.200" || fail "--script: domain routes added"
espvpn_down || fail "--script: espvpn did not exit cleanly"
echo "PASS: domain split tunnel"
