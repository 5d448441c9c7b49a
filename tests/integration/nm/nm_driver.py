#!/usr/bin/python3
"""Plays NetworkManager against nm-espvpn-service on a private D-Bus daemon.

Called by nm_plugin.sh (which builds the namespaces, the fake GlobalProtect gateway
and the bus). Starts the service inside the client namespace, drives it with the
org.freedesktop.NetworkManager.VPN.Plugin calls NM makes, checks the signals, and
applies the reported configuration to the tun as NM would, then pings through it.
"""
import argparse
import base64
import ipaddress
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

from gi.repository import Gio, GLib

IFACE = "org.freedesktop.NetworkManager.VPN.Plugin"
PATH = "/org/freedesktop/NetworkManager/VPN/Plugin"
BUS_NAME = "org.freedesktop.NetworkManager.espvpn"
STATE_STARTED, STATE_STOPPED = 4, 6
FAILURE_LOGIN_FAILED, FAILURE_CONNECT_FAILED, FAILURE_BAD_IP_CONFIG = 0, 1, 2

args = None
services = []


T0 = time.monotonic()


def ok(msg):
    print("ok [%5.1f s]: %s" % (time.monotonic() - T0, msg), flush=True)


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def u32_ip(value):
    """NM's uint32 address (bytes in network order, read as a host integer)."""
    return socket.inet_ntoa(struct.pack("=I", value))


def ns(*cmd, check=True):
    return subprocess.run(["ip", "netns", "exec", args.netns, *cmd], check=check, capture_output=True, text=True,
                          timeout=30)


class Plugin:
    """One nm-espvpn-service process and what it signals."""

    def __init__(self, bus, persist):
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=args.address)
        cmd = ["ip", "netns", "exec", args.netns, args.service, "--espvpn", args.espvpn, "--debug"]
        if persist:
            cmd.append("--persist")
        self.log_path = os.path.join(args.work, "service-%d.log" % len(services))
        self.proc = subprocess.Popen(cmd, env=env, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        services.append(self)
        self.bus = bus
        self.signals = []
        bus.signal_subscribe(None, IFACE, None, PATH, None, Gio.DBusSignalFlags.NONE, self._on_signal)
        self.wait(lambda: self._owned(), 10, "the service to own " + BUS_NAME)

    def _owned(self):
        reply = self.bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                   "NameHasOwner", GLib.Variant("(s)", (BUS_NAME,)), None, 0, 2000, None)
        if self.proc.poll() is not None:
            fail("service exited %d at start-up:\n%s" % (self.proc.returncode, open(self.log_path).read()))
        return reply.unpack()[0]

    def _on_signal(self, _conn, _sender, _path, _iface, name, params):
        self.signals.append((name, params.unpack()))

    def wait(self, predicate, seconds, what):
        ctx = GLib.MainContext.default()
        deadline = time.monotonic() + seconds
        while not predicate():
            if time.monotonic() > deadline:
                fail("timed out after %d s waiting for %s; signals: %s" % (seconds, what, self.names()))
            ctx.iteration(False) or time.sleep(0.02)

    def names(self):
        return [n if n != "StateChanged" else "StateChanged(%d)" % p[0] for n, p in self.signals]

    def signal(self, name):
        for n, p in self.signals:
            if n == name:
                return p[0]
        return None

    def states(self):
        return [p[0] for n, p in self.signals if n == "StateChanged"]

    def call(self, method, params=None, timeout_ms=15000):
        return self.bus.call_sync(BUS_NAME, PATH, IFACE, method, params, None, 0, timeout_ms, None)

    def children(self):
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return [int(p) for p in f.read().split()]
        except FileNotFoundError:
            return []

    def log(self):
        return open(self.log_path).read()


def connection(data, secrets, permissions=()):
    """permissions: connection.permissions as NetworkManager sends them ("user:NAME:")."""
    settings = {"id": GLib.Variant("s", "espvpn-test"), "uuid": GLib.Variant("s", str(uuid.uuid4())),
                "type": GLib.Variant("s", "vpn")}
    if permissions:
        settings["permissions"] = GLib.Variant("as", list(permissions))
    return GLib.Variant("(a{sa{sv}})", ({
        "connection": settings,
        "vpn": {"service-type": GLib.Variant("s", BUS_NAME), "data": GLib.Variant("a{ss}", data),
                "secrets": GLib.Variant("a{ss}", secrets)},
    },))


def base_data():
    return {"gateway": args.gateway, "protocol": "gp", "user": "alice", "cafile": args.ca}


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_service(p, how):
    p.proc.send_signal(how)
    try:
        rc = p.proc.wait(10)
    except subprocess.TimeoutExpired:
        fail("service did not exit 10 s after signal %d" % how)
    if rc != 0:
        fail("service exited %d after signal %d" % (rc, how))


def scenario_errors(bus):
    """Bad settings, NeedSecrets, and a rejected password -> Failure(LOGIN_FAILED)."""
    p = Plugin(bus, persist=True)
    try:
        p.call("Connect", connection({"protocol": "gp"}, {"password": "secret"}))
        fail("Connect without a gateway succeeded")
    except GLib.Error as e:
        if "no gateway" not in e.message:
            fail("Connect without a gateway: unclear error: " + e.message)
        ok("Connect without a gateway -> D-Bus error: %s" % e.message.split(": ", 1)[-1])
    p.wait(lambda: STATE_STOPPED in p.states(), 5, "StateChanged(stopped) after the refused Connect")

    need = p.call("NeedSecrets", connection(base_data(), {})).unpack()[0]
    have = p.call("NeedSecrets", connection(base_data(), {"password": "x"})).unpack()[0]
    if (need, have) != ("vpn", ""):
        fail("NeedSecrets: without a secret %r (want 'vpn'), with a password %r (want '')" % (need, have))
    ok("NeedSecrets asks for the vpn setting only without a cookie or password")

    p.signals.clear()
    p.call("Connect", connection(base_data(), {"password": "wrong-password"}))
    p.wait(lambda: p.signal("Failure") is not None, 30, "a Failure signal for a wrong password")
    first = p.signal("Failure")
    if first != FAILURE_LOGIN_FAILED:
        fail("first Failure reason %d, want LOGIN_FAILED (0)" % first)
    p.wait(lambda: STATE_STOPPED in p.states(), 10, "StateChanged(stopped) after the login failure")
    p.wait(lambda: not p.children(), 5, "espvpn to be gone after the login failure")
    if "wrong-password" in p.log():
        fail("the password appears in the service log")
    ok("wrong password -> Failure(LOGIN_FAILED), state stopped, espvpn gone; signals %s" % p.names())

    # The helper alone, as espvpn runs it: an unusable environment -> SetFailure,
    # which libnm reports as Failure(BAD_IP_CONFIG); other reasons do nothing.
    helper_env = {"PATH": os.environ["PATH"], "DBUS_SYSTEM_BUS_ADDRESS": args.address,
                  "NM_ESPVPN_SERVICE_BUS_NAME": BUS_NAME, "VPNGATEWAY": args.gw_ip,
                  "INTERNAL_IP4_ADDRESS": args.tun_ip}
    p.signals.clear()
    quiet = subprocess.run([args.service, "--helper"], env=dict(helper_env, reason="disconnect"), timeout=20)
    bad = subprocess.run([args.service, "--helper"], env=dict(helper_env, reason="connect"), timeout=20,
                         capture_output=True, text=True)
    if quiet.returncode != 0 or bad.returncode != 1 or "TUNDEV is not set" not in bad.stderr:
        fail("helper: reason=disconnect exit %d (want 0); no TUNDEV exit %d (want 1), stderr %r"
             % (quiet.returncode, bad.returncode, bad.stderr))
    p.wait(lambda: p.signal("Failure") is not None, 5, "Failure after the helper's SetFailure")
    if p.signal("Failure") != FAILURE_BAD_IP_CONFIG or p.signal("Config") is not None:
        fail("helper without TUNDEV: signals %s, want Failure(BAD_IP_CONFIG) only" % p.signals)
    ok("helper: reason=disconnect is a no-op; no TUNDEV -> SetFailure -> Failure(BAD_IP_CONFIG), exit 1 (%s)"
       % bad.stderr.strip().split(": ", 1)[-1])

    stop_service(p, signal.SIGTERM)
    ok("SIGTERM -> the idle service exits 0")


def authenticate(protocol, user, password):
    """espvpn --authenticate in the client namespace: its COOKIE/CONNECT_URL/FINGERPRINT/RESOLVE values."""
    out = subprocess.run(["ip", "netns", "exec", args.netns, args.espvpn, "--protocol=" + protocol, "--cafile",
                          args.ca, "-u", user, "--passwd-on-stdin", "--authenticate", args.gateway],
                         input=password + "\n", capture_output=True, text=True, timeout=30)
    values = dict(re.findall(r"^([A-Z_]+)='([^']*)'$", out.stdout, re.M))
    if out.returncode != 0 or not values.get("COOKIE"):
        fail("espvpn --authenticate failed (%d): %s" % (out.returncode, out.stderr[-500:]))
    return values


def connect_until_started(p, data, secrets):
    """Connect; once started: (Config, Ip4Config, Ip6Config, espvpn's pid). The secret never in argv."""
    p.call("Connect", connection(data, secrets))
    p.wait(lambda: STATE_STARTED in p.states() or p.signal("Failure") is not None, 40, "StateChanged(started)")
    if STATE_STARTED not in p.states():
        fail("Failure(%d) instead of started; signals %s" % (p.signal("Failure"), p.names()))
    cfg, ip4, ip6 = p.signal("Config"), p.signal("Ip4Config"), p.signal("Ip6Config")
    if cfg is None or ip4 is None or ip6 is None:
        fail("missing config signals: %s" % p.names())
    children = p.children()
    if len(children) != 1:
        fail("expected one espvpn child, found %s" % children)
    cmdline = open("/proc/%d/cmdline" % children[0], "rb").read()
    for key in ("cookie", "password"):  # gateway, gwcert, resolve are options, by design
        if key in secrets and secrets[key].encode() in cmdline:
            fail("the %s is in espvpn's argv" % key)
    if ns("ip", "link", "show", "dev", cfg["tundev"], check=False).returncode != 0:
        fail("tundev %s does not exist in the client namespace" % cfg["tundev"])
    return cfg, ip4, ip6, children[0]


def check_all(checks):
    for what, got, want in checks:
        if got != want:
            fail("%s: got %r, want %r" % (what, got, want))


def ip6_text(value):
    return str(ipaddress.IPv6Address(bytes(value)))


def scenario_tunnel(bus):
    """Cookie login -> Config/Ip4Config/Ip6Config -> traffic -> Disconnect -> all gone."""
    cookie = authenticate("gp", "alice", "secret")["COOKIE"]
    p = Plugin(bus, persist=False)  # as NM starts it: watches its caller, quits when done
    cfg, ip4, ip6, espvpn_pid = connect_until_started(p, base_data(), {"cookie": cookie})
    tundev, mtu = cfg["tundev"], cfg.get("mtu")
    check_all([
        ("Config gateway", u32_ip(cfg["gateway"]), args.gw_ip),
        ("Config has-ip4/has-ip6", (cfg["has-ip4"], cfg["has-ip6"]), (True, True)),
        ("Ip4Config address", u32_ip(ip4["address"]), args.tun_ip),
        ("Ip4Config prefix", ip4["prefix"], 32),
        ("Ip4Config routes", sorted((u32_ip(r[0]), r[1]) for r in ip4.get("routes", [])), [("10.202.0.0", 24)]),
        ("Ip4Config dns", [u32_ip(d) for d in ip4.get("dns", [])], ["10.202.0.53"]),
        ("Ip4Config domains", ip4.get("domains"), ["corp.test"]),
        ("Ip4Config never-default", ip4.get("never-default"), True),
        ("Ip4Config tundev (copied by libnm)", ip4.get("tundev"), tundev),
        ("Ip6Config address", ip6_text(ip6["address"]), args.tun_ip6),
        ("Ip6Config routes", [(ip6_text(r[0]), r[1]) for r in ip6.get("routes", [])], [("fd00:202::", 64)]),
        ("Ip6Config dns", [ip6_text(d) for d in ip6.get("dns", [])], ["fd00:202::53"]),
        ("Config mtu", isinstance(mtu, int) and 576 <= mtu <= 1500, True),
    ])
    ok("Config/Ip4Config/Ip6Config: tundev %s mtu %d, %s/32 routes 10.202.0.0/24 dns 10.202.0.53, "
          "%s routes fd00:202::/64, never-default" % (tundev, mtu, args.tun_ip, args.tun_ip6))

    apply_like_nm(cfg, ip4, ip6)
    ping_lan(tundev)
    disconnect_and_check(p, espvpn_pid, tundev, cookie)


# --- AnyConnect against ocserv -------------------------------------------------------

# ocserv_env.sh's pool and ocserv's own tunnel address; nm_plugin.sh adds the IPv6 pool.
OC_POOL, OC_POOL6, OC_SERVER_TUN = ipaddress.ip_network("192.168.99.0/24"), ipaddress.ip_network("fd00:199::/64"), \
    "192.168.99.1"


def occtl(*cmd):
    r = subprocess.run(["ip", "netns", "exec", args.server_netns, "occtl", "-s", args.occtl_socket, *cmd],
                       capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        fail("occtl %s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr + r.stdout))
    return r.stdout


def udp_datagrams():
    """(OutDatagrams, InDatagrams) of the client namespace's UDP."""
    rows = [line.split() for line in ns("cat", "/proc/net/snmp").stdout.splitlines() if line.startswith("Udp:")]
    counters = dict(zip(rows[0][1:], (int(v) for v in rows[1][1:])))
    return counters["OutDatagrams"], counters["InDatagrams"]


def ocserv_users():
    return [u["Username"] for u in json.loads(occtl("-j", "show", "users") or "[]")]


def ac_dialog_secrets(auth):
    """The secrets NetworkManager-openconnect's auth dialog returns (doc B.2)."""
    return {"cookie": auth["COOKIE"], "gateway": auth["CONNECT_URL"], "gwcert": auth["FINGERPRINT"],
            "resolve": auth["RESOLVE"]}


def ac_data():
    # A profile as NM-openconnect keeps it: gateway + protocol; no CA file, so the pin
    # from the dialog is all that verifies ocserv's certificate.
    return {"gateway": args.gateway, "protocol": "anyconnect"}


def expect_failure(p, data, secrets, reason, what):
    """Connect that must end in Failure(reason): state stopped, espvpn gone, no tun, no secret logged."""
    p.signals.clear()
    before = len(p.log())
    p.call("Connect", connection(data, secrets))
    p.wait(lambda: p.signal("Failure") is not None, 30, "a Failure signal for " + what)
    if p.signal("Failure") != reason:
        fail("%s: Failure(%d), want %d; signals %s" % (what, p.signal("Failure"), reason, p.names()))
    p.wait(lambda: STATE_STOPPED in p.states(), 10, "StateChanged(stopped) after " + what)
    p.wait(lambda: not p.children(), 5, "espvpn to be gone after " + what)
    if p.signal("Config") is not None or STATE_STARTED in p.states():
        fail("%s: the connection was reported up: %s" % (what, p.names()))
    if ns("ip", "-o", "link", "show", "type", "tun").stdout.strip():
        fail("%s: a tun device is left: %s" % (what, ns("ip", "-o", "link", "show", "type", "tun").stdout))
    if secrets["cookie"] in p.log():
        fail("%s: the cookie appears in the service log" % what)
    return p.log()[before:]


def scenario_ac_tunnel(bus):
    """protocol=anyconnect with the auth dialog's secrets -> ocserv's config over D-Bus -> DTLS
    data -> Disconnect logs out -> the spent cookie gives Failure(LOGIN_FAILED)."""
    auth = authenticate("anyconnect", "testuser", args.oc_password)
    if auth.get("FINGERPRINT") != args.pin or auth.get("CONNECT_URL") != args.gateway:
        fail("--authenticate: FINGERPRINT %r (ocserv's pin %r), CONNECT_URL %r"
             % (auth.get("FINGERPRINT"), args.pin, auth.get("CONNECT_URL")))
    secrets = ac_dialog_secrets(auth)
    p = Plugin(bus, persist=False)
    t0 = time.monotonic()
    cfg, ip4, ip6, espvpn_pid = connect_until_started(p, ac_data(), secrets)
    started = time.monotonic() - t0
    tundev, mtu = cfg["tundev"], cfg.get("mtu")
    address, address6 = u32_ip(ip4["address"]), ip6_text(ip6["address"])
    check_all([
        ("Config gateway", u32_ip(cfg["gateway"]), args.gw_ip),
        ("Config has-ip4/has-ip6", (cfg["has-ip4"], cfg["has-ip6"]), (True, True)),
        ("Config banner", cfg.get("banner"), "Hello from test ocserv"),
        ("Ip4Config address in ocserv's pool", ipaddress.ip_address(address) in OC_POOL
         and address != OC_SERVER_TUN, True),
        ("Ip4Config prefix (X-CSTP-Netmask)", ip4["prefix"], OC_POOL.prefixlen),
        # ocserv's no-route 10.202.0.128/25 is a split exclude: NM cannot express it (as NM-openconnect)
        ("Ip4Config routes", sorted((u32_ip(r[0]), r[1]) for r in ip4.get("routes", [])), [("10.202.0.0", 24)]),
        ("Ip4Config dns", [u32_ip(d) for d in ip4.get("dns", [])], [OC_SERVER_TUN]),
        ("Ip4Config domains (split-dns)", ip4.get("domains"), ["example.test"]),
        ("Ip4Config never-default", ip4.get("never-default"), True),
        ("Ip6Config address in ocserv's pool", ipaddress.ip_address(address6) in OC_POOL6, True),
        ("Ip6Config routes", [(ip6_text(r[0]), r[1]) for r in ip6.get("routes", [])], [("fd00:202::", 64)]),
        ("Ip6Config domain (default-domain)", ip6.get("domain"), "example.test"),
        ("Ip6Config never-default", ip6.get("never-default"), True),
        ("Config mtu", isinstance(mtu, int) and 1280 <= mtu <= 1500, True),
    ])
    # The MTU NM is told must be the one espvpn works with (it lowers the tun for DTLS
    # if DTLS needs less; NM would set the Config value and undo that).
    m = re.search(r"CSTP connected to .*, MTU (\d+),", p.log())
    if not m or int(m.group(1)) != mtu:
        fail("Config mtu %r, espvpn's CSTP MTU %s" % (mtu, m.group(1) if m else "not logged"))
    ok("Config/Ip4Config/Ip6Config after %.2f s: tundev %s mtu %d banner, %s/%d routes 10.202.0.0/24 dns %s "
       "domain example.test, %s/%d routes fd00:202::/64, never-default"
       % (started, tundev, mtu, address, ip4["prefix"], OC_SERVER_TUN, address6, ip6["prefix"]))

    # The data path NM users get: DTLS, as ocserv sees it.
    p.wait(lambda: "data over DTLS" in p.log(), 20, "espvpn to put the data on DTLS")
    if "tun MTU lowered" in p.log():
        fail("espvpn lowered the tun MTU for DTLS after reporting %d to NM" % mtu)
    user = json.loads(occtl("-j", "show", "user", "testuser"))
    dtls_cipher = user[0].get("DTLS cipher", "") if user else ""
    if "(DTLS" not in dtls_cipher or user[0].get("IPv4") != address:
        fail("ocserv's view of the session: DTLS cipher %r, IPv4 %r (want %s)"
             % (dtls_cipher, user[0].get("IPv4") if user else None, address))
    ok("data over DTLS; ocserv: %s, IPv4 %s" % (dtls_cipher, address))

    apply_like_nm(cfg, ip4, ip6)
    # A ping filling the MTU NM was given, not fragmented: that MTU fits the DTLS path.
    udp0 = udp_datagrams()
    ping_lan(tundev, extra=(["ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", str(mtu - 28),
                             args.lan_ip],))
    # 8 echo requests and replies: DTLS is the client namespace's only UDP.
    sent, received = (b - a for a, b in zip(udp0, udp_datagrams()))
    if sent < 8 or received < 8:
        fail("the pings did not go over DTLS: %d UDP datagrams out, %d in" % (sent, received))
    ok("the pings went over DTLS: %d UDP datagrams out, %d in" % (sent, received))

    disconnect_and_check(p, espvpn_pid, tundev, auth["COOKIE"])
    if "logout (DISCONNECT) sent" not in p.log():
        fail("espvpn did not log the logout")
    deadline = time.monotonic() + 5
    while "testuser" in ocserv_users():
        if time.monotonic() > deadline:
            fail("ocserv still lists the session 5 s after the logout: %s" % occtl("show", "users"))
        time.sleep(0.1)
    # occtl drops a detached session from its list too: its log tells a logout apart.
    oc_log = open(args.ocserv_log, errors="replace").read()
    if "received BYE packet" not in oc_log or "reason: user disconnected" not in oc_log:
        fail("ocserv's log shows no BYE / user disconnect")
    ok("ocserv lists no session after the logout; its log: BYE received, user disconnected")

    # NM would hand the same secrets again (e.g. autoconnect): the logged-out cookie is refused.
    p2 = Plugin(bus, persist=True)
    log = expect_failure(p2, ac_data(), secrets, FAILURE_LOGIN_FAILED, "the logged-out cookie")
    if "rejected the cookie" not in log:
        fail("the log does not say the cookie was rejected")
    ok("the logged-out cookie again -> Failure(LOGIN_FAILED), espvpn gone, no tun")
    stop_service(p2, signal.SIGTERM)


def scenario_ac_errors(bus):
    """A cookie ocserv never issued -> LOGIN_FAILED; a wrong server pin -> CONNECT_FAILED, cookie unspent."""
    auth = authenticate("anyconnect", "testuser", args.oc_password)
    p = Plugin(bus, persist=True)
    # The shape of a real one (the webvpn value's length), random content: what a cookie
    # from before a server restart looks like.
    real = re.search(r"webvpn=([^;]*)", auth["COOKIE"]).group(1)
    bogus = dict(ac_dialog_secrets(auth), cookie="webvpn=" + base64.b64encode(
        os.urandom(len(base64.b64decode(real)))).decode())
    log = expect_failure(p, ac_data(), bogus, FAILURE_LOGIN_FAILED, "a cookie ocserv never issued")
    if "rejected the cookie" not in log:
        fail("the log does not say the cookie was rejected")
    ok("a cookie ocserv never issued -> Failure(LOGIN_FAILED), espvpn gone, no tun")

    wrong_pin = dict(ac_dialog_secrets(auth), gwcert="pin-sha256:" + base64.b64encode(bytes(32)).decode())
    log = expect_failure(p, ac_data(), wrong_pin, FAILURE_CONNECT_FAILED, "a wrong gwcert pin")
    if "--servercert fingerprint(s) matches the server certificate" not in log:
        fail("the log does not name the pin mismatch:\n" + log[-1500:])
    # The cookie went to nobody: ocserv still takes it (espvpn alone, no NM, as a check).
    r = subprocess.run(["ip", "netns", "exec", args.netns, args.espvpn, "--protocol=anyconnect", "--servercert",
                        auth["FINGERPRINT"], "--cookie-on-stdin", "--dry-run", args.gateway],
                       input=auth["COOKIE"] + "\n", capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail("the cookie no longer works after the pin failure (%d): %s" % (r.returncode, r.stderr[-500:]))
    ok("wrong gwcert pin -> Failure(CONNECT_FAILED), espvpn gone, no tun; the cookie still works (--dry-run)")
    stop_service(p, signal.SIGTERM)
    ok("SIGTERM -> the idle service exits 0")


def scenario_ac_deputy(bus):
    """Issue 41's confused deputy: a profile the user nobody owns names root's key -> Connect
    refused naming the item, no espvpn, ocserv saw nothing; a missing file reads the same;
    nobody's own key connects (espvpn given /dev/fd/N); a system profile keeps root's files."""
    import pwd
    import shutil
    nobody = pwd.getpwnam("nobody")
    certs = os.path.dirname(args.ca)
    os.chmod(args.work, 0o755)
    root_dir, user_dir = os.path.join(args.work, "root-files"), os.path.join(args.work, "nobody-files")
    for d, uid in ((root_dir, 0), (user_dir, nobody.pw_uid)):
        os.mkdir(d, 0o700)
        os.chown(d, uid, -1)
        for name in ("client.pem", "client-key.pem", "ca.pem"):
            dst = os.path.join(d, name)
            shutil.copyfile(os.path.join(certs, name), dst)
            os.chmod(dst, 0o600)
            os.chown(dst, uid, -1)

    def data(where, cert="client.pem"):
        return {"gateway": args.gateway, "protocol": "anyconnect", "cafile": os.path.join(user_dir, "ca.pem"),
                "usercert": os.path.join(where, cert), "userkey": os.path.join(where, "client-key.pem")}

    def oc_lines():
        return len(re.findall(r"worker: |authenticate user", open(args.ocserv_log).read()))

    secrets = {"password": "unused"}
    owner = ("user:nobody:",)
    p = Plugin(bus, persist=True)

    def refused(d, item, what):
        before = oc_lines()
        try:
            p.call("Connect", connection(d, secrets, owner))
        except GLib.Error as e:
            message = e.message
        else:
            fail("%s: Connect was accepted" % what)
        if "the profile's '%s' is not a file nobody" % item not in message:
            fail("%s: the error does not name '%s' as not readable by nobody: %s" % (what, item, message))
        time.sleep(0.5)
        if p.children():
            fail("%s: espvpn was started" % what)
        if oc_lines() != before:
            fail("%s: ocserv saw a client" % what)
        if "BEGIN" in message or "PRIVATE" in message:
            fail("%s: a file's content in the error" % what)
        return message.split("invalid connection: ", 1)[-1]

    attack = refused(data(root_dir), "usercert", "root's key and certificate")
    ok("a profile of nobody's naming root's key: refused (%s), no espvpn, ocserv saw nothing" % attack)
    probe = refused(data(root_dir, "missing.pem"), "usercert", "a missing certificate")
    if probe != attack:
        fail("a missing file reads differently: %r vs %r" % (probe, attack))
    key = refused(dict(data(user_dir), userkey=os.path.join(root_dir, "client-key.pem")), "userkey",
                  "nobody's certificate with root's key")
    ok("a missing file gives the same words; root's key beside nobody's certificate: %s" % key)

    def up_and_down(d, permissions, what):
        before = oc_lines()
        p.signals.clear()
        p.call("Connect", connection(d, secrets, permissions))
        p.wait(lambda: STATE_STARTED in p.states() or p.signal("Failure") is not None, 40, what + " to start")
        if STATE_STARTED not in p.states():
            fail("%s: Failure(%s); signals %s" % (what, p.signal("Failure"), p.names()))
        children = p.children()
        if len(children) != 1:
            fail("%s: expected one espvpn, found %s" % (what, children))
        cmdline = open("/proc/%d/cmdline" % children[0], "rb").read().decode().split("\0")
        if "testuser" not in ocserv_users():
            fail("%s: ocserv has no session for the certificate's user" % what)
        if oc_lines() <= before:
            fail("ocserv's worker lines were not counted: the 'saw nothing' checks mean nothing")
        p.call("Disconnect")
        p.wait(lambda: STATE_STOPPED in p.states(), 10, what + " to stop")
        p.wait(lambda: not pid_alive(children[0]), 10, "espvpn to exit after " + what)
        return cmdline

    argv = up_and_down(data(user_dir), owner, "nobody's own key")
    for option in ("--certificate=", "--sslkey=", "--cafile="):
        if not any(a.startswith(option + "/dev/fd/") for a in argv):
            fail("espvpn's %s is not a descriptor: %s" % (option, argv))
    if any(user_dir in a for a in argv):
        fail("espvpn's argv names nobody's paths: %s" % argv)
    if "opened the profile's usercert, userkey, cafile as nobody" not in p.log():
        fail("the service did not log that it opened the files as nobody")
    ok("nobody's own key: connected, espvpn given /dev/fd/N (%s), ocserv's session for testuser, disconnected"
       % " ".join(a for a in argv if "/dev/fd/" in a))
    argv = up_and_down(data(root_dir), (), "a system profile naming root's files")
    if not any(a == "--certificate=" + os.path.join(root_dir, "client.pem") for a in argv):
        fail("a system profile's certificate was not passed as a path: %s" % argv)
    ok("a system profile (no permissions) naming root's files connects, as before")
    stop_service(p, signal.SIGTERM)


def apply_like_nm(cfg, ip4, ip6):
    """What NetworkManager does with the config signals (the test stands in for it)."""
    tundev = cfg["tundev"]
    ns("ip", "link", "set", "dev", tundev, "up", "mtu", str(cfg["mtu"]))
    ns("ip", "addr", "add", "%s/%d" % (u32_ip(ip4["address"]), ip4["prefix"]), "dev", tundev)
    ns("ip", "-6", "addr", "add", "%s/%d" % (ipaddress.IPv6Address(bytes(ip6["address"])), ip6["prefix"]), "dev",
       tundev, "nodad")
    for r in ip4["routes"]:
        ns("ip", "route", "add", "%s/%d" % (u32_ip(r[0]), r[1]), "dev", tundev)
    for r in ip6["routes"]:
        ns("ip", "-6", "route", "add", "%s/%d" % (ipaddress.IPv6Address(bytes(r[0])), r[1]), "dev", tundev)


def ping_lan(tundev, extra=()):
    for cmd in (["ping", "-c", "3", "-i", "0.2", "-W", "2", args.lan_ip],
                ["ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", args.lan_ip6], *extra):
        r = ns(*cmd, check=False)
        if r.returncode != 0:
            fail("%s through the tunnel failed:\n%s" % (" ".join(cmd), r.stdout + r.stderr))
    ok("ping %s and %s%s through %s" % (args.lan_ip, args.lan_ip6, " (+ %d more)" % len(extra) if extra else "",
                                        tundev))


def disconnect_and_check(p, espvpn_pid, tundev, cookie):
    """Disconnect as NM does: espvpn logs out within the grace period, the tun goes, the service quits."""
    t0 = time.monotonic()
    p.call("Disconnect")
    p.wait(lambda: STATE_STOPPED in p.states(), 5, "StateChanged(stopped) after Disconnect")
    p.wait(lambda: not pid_alive(espvpn_pid), 8, "espvpn to exit after Disconnect")
    gone = time.monotonic() - t0
    if ns("ip", "link", "show", "dev", tundev, check=False).returncode == 0:
        fail("tundev %s still exists after Disconnect" % tundev)
    try:
        rc = p.proc.wait(5)
    except subprocess.TimeoutExpired:
        fail("the service (no --persist) did not quit after its connection ended")
    if rc != 0:
        fail("the service exited %d" % rc)
    log = p.log()
    if "SIGKILL" in log or "killing it" in log:
        fail("espvpn had to be killed: it did not log out within the grace period")
    if cookie in log:
        fail("the cookie appears in the service log")
    ok("Disconnect -> espvpn exited after %.2f s (SIGINT, logout), %s removed, service quit 0" % (gone, tundev))


def main():
    global args
    ap = argparse.ArgumentParser()
    for a in ("address", "service", "espvpn", "netns", "gateway", "ca", "work", "gw-ip", "lan-ip", "lan-ip6"):
        ap.add_argument("--" + a, required=True)
    for a in ("tun-ip", "tun-ip6",  # the fake GP gateway's tunnel addresses
              "server-netns", "occtl-socket", "ocserv-log", "oc-password", "pin"):  # ocserv
        ap.add_argument("--" + a)
    ap.add_argument("scenario", choices=["errors", "tunnel", "ac_tunnel", "ac_errors", "ac_deputy"])
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("FAIL: terminated"))
    bus = Gio.DBusConnection.new_for_address_sync(
        args.address,
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)
    try:
        {"errors": scenario_errors, "tunnel": scenario_tunnel, "ac_tunnel": scenario_ac_tunnel,
         "ac_errors": scenario_ac_errors, "ac_deputy": scenario_ac_deputy}[args.scenario](bus)
    except SystemExit:
        for s in services:
            print("--- %s" % s.log_path)
            print(s.log()[-3000:])
        raise
    finally:
        for s in services:
            if s.proc.poll() is None:
                s.proc.terminate()
                try:
                    s.proc.wait(5)
                except subprocess.TimeoutExpired:
                    s.proc.kill()
                    s.proc.wait()


if __name__ == "__main__":
    main()
