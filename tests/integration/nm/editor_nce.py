#!/usr/bin/python3
"""nm-connection-editor with the espvpn editor, driven through AT-SPI; run by editor_nce.sh
inside the real NetworkManager's namespaces (nmcli talks to that NetworkManager).

editor_nce.py WORK [SHOT_DIR]
  gp:      a GlobalProtect profile created field by field, saved; every vpn.data item and
           the stored secrets checked with nmcli
  ac:      an AnyConnect profile, the same way
  invalid: a URL without host: Save stays insensitive and the field says why; corrected,
           Save is offered again; cancelled, nothing saved
  import:  a NetworkManager-openconnect profile through `nmcli connection import type
           espvpn file F`, opened with --edit, one field changed and saved: only that item
           changes; nmcli's export imports back the same; an openconnect --config file
           imported by nmcli
  import in the editor: nm-connection-editor --import FILE (the plugin's import), saved
  import and connect: a GP profile whose items NetworkManager-openconnect's own plugin made
           (its import of its [openconnect] form), added with nmcli, with the login its
           dialog saves; the keyfile NetworkManager wrote for it imported in the editor, saved,
           then `nmcli connection up` against the fake GP gateway (LIVE_GP_URL, CA LIVE_CA):
           activated, a ping to LIVE_PING through the tun, down: the tun gone; then the same
           for an AnyConnect one against ocserv (LIVE_AC_URL, LIVE_AC_USER, LIVE_AC_PASSWORD)
"""
import json
import os
import re
import subprocess
import sys
import time

import gi
import pyatspi

gi.require_version("NM", "1.0")
from gi.repository import NM  # noqa: E402

from atspi_form import Form, FormError, find_app

WORK = sys.argv[1]
SHOTS = sys.argv[2] if len(sys.argv) > 2 else None
t0 = time.monotonic()


def fail(msg):
    print(f"FAIL [{time.monotonic() - t0:.1f} s]: {msg}", flush=True)
    log = os.path.join(WORK, "nce.log")
    if os.path.exists(log):
        with open(log) as f:
            print("--- nm-connection-editor's stderr:\n" + "".join(f.readlines()[-20:]), flush=True)
    sys.exit(1)


def say(msg):
    print(f"ok [{time.monotonic() - t0:.1f} s]: {msg}", flush=True)


def nmcli(*args):
    r = subprocess.run(["nmcli", *args], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"nmcli {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def items(text):
    """nmcli -g's "key = value, key = value" (our values hold no ", "); -g escapes ':' and '\\'."""
    out = {}
    for part in filter(None, text.split(", ")):
        k, _, v = part.partition(" = ")
        out[k] = re.sub(r"\\(.)", r"\1", v)
    return out


def vpn_data(name):
    return items(nmcli("-g", "vpn.data", "connection", "show", name))


def vpn_secrets(name, expect=None):
    """The stored secrets (nmcli -s). Right after a save, nmcli now and then shows none on
    this loaded machine (a second query does): with `expect`, asked again for up to 5 s."""
    deadline = time.monotonic() + 5
    while True:
        got = items(nmcli("-s", "-g", "vpn.secrets", "connection", "show", name))
        if expect is None or got == expect or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


class Editor(Form):
    def __init__(self, *args):
        pyatspi.Registry.getDesktop(0).childCount  # the AT-SPI bus and registry up first
        log = open(os.path.join(WORK, "nce.log"), "a")
        for attempt in (1, 2):
            print(f"--- nm-connection-editor {' '.join(args)} (attempt {attempt})", file=log, flush=True)
            self.proc = subprocess.Popen(["nm-connection-editor", *args], stdout=log, stderr=log)
            try:
                app = find_app("nm-connection-editor", self.proc.pid, timeout=40)
                break
            except FormError as e:
                state = "running" if self.proc.poll() is None else f"exited with {self.proc.returncode}"
                self.proc.kill()
                self.proc.wait()
                # Seen once on a loaded machine: an editor that exited 1 at once, silently.
                if attempt == 2 or state == "running":
                    fail(f"{e}; nm-connection-editor {state}")
                print(f"nm-connection-editor {state} before it showed a window; starting it again", flush=True)
        super().__init__(app, 3)

    def connection_name(self):
        label = self.find("Connection name", ("label",))
        entry = label.parent[label.getIndexInParent() + 1]
        if entry is None or entry.getRoleName() != "text":
            fail("no entry beside 'Connection name'")
        return entry

    def shot(self, name):
        """The editor's window as a PNG (imagemagick), the pointer moved off it (no tooltip)."""
        if not SHOTS:
            return
        pyatspi.Registry.generateMouseEvent(0, 0, "abs")
        time.sleep(1.5)
        box = self.app[0].queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        subprocess.run(["import", "-window", "root", "-crop", f"{box.width}x{box.height}+{box.x}+{box.y}",
                        "+repage", "+dither", "-colors", "32", "PNG8:" + os.path.join(SHOTS, name)], check=False)

    def save_and_close(self):
        save = self.button("Save")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.sensitive(save):
            time.sleep(0.1)
        if not self.sensitive(save):
            fail(f"Save is not offered: {save.description!r}")
        self.press(save)
        self.wait_closed()

    def wait_closed(self):
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("nm-connection-editor did not close after Save/Cancel")


# The login's session secrets: never saved (the editor's save and the import add these flags).
SESSION_FLAGS = {"cookie-flags": "2", "gateway-flags": "2", "gwcert-flags": "2", "resolve-flags": "2",
                 "challenge-flags": "2", "challenge2-flags": "2", "challenge3-flags": "2"}


def expect(got, want, what):
    for k, v in want.items():
        if got.get(k) != v:
            fail(f"{what}: vpn.data item '{k}' is {got.get(k)!r}, expected {v!r} (all: {got})")


def case_gp():
    e = Editor("--create", "--type=vpn:org.freedesktop.NetworkManager.espvpn")
    e.type("Connection name", "gp-work", e.connection_name())
    e.choose("Protocol", "GlobalProtect")
    e.type("Gateway", "https://portal.example.com/")
    e.type("User name", "alice")
    e.type("Group", "Europe")
    e.type("Password", "pw-typed-in-the-editor")
    e.choose("Password storage", "Saved for all users")
    e.type("CA certificate", "/etc/ssl/work-ca.pem")
    e.type("Server pin", "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=")
    e.type("Proxy", "http://10.0.0.1:3128/")
    e.choose("Single sign-on", "In the desktop's browser")
    e.choose("Soft token", "TOTP (time-based)")
    e.type("Token secret", "base32:JBSWY3DPEHPK3PXP")
    e.choose("Token secret storage", "Saved for all users")
    e.toggle("Kill switch (block traffic outside the tunnel)")
    e.choose("Reported OS", "Windows")
    e.type("User agent", "PAN GlobalProtect")
    e.type("Version string", "6.1.0-33")
    e.type("MTU", "1300")
    e.type("Reconnect timeout (s)", "60")
    e.toggle("Disable IPv6 in the tunnel")
    time.sleep(0.5)  # drawn, for the picture
    e.shot("nce-gp.png")
    e.save_and_close()
    if nmcli("-g", "vpn.service-type", "connection", "show", "gp-work") != "org.freedesktop.NetworkManager.espvpn":
        fail("gp-work is not an espvpn VPN")
    data = vpn_data("gp-work")
    want = {"protocol": "gp", "gateway": "https://portal.example.com/", "user": "alice", "authgroup": "Europe",
            "password-flags": "0", "cafile": "/etc/ssl/work-ca.pem",
            "servercert": "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=", "proxy": "http://10.0.0.1:3128/",
            "external-browser": "yes", "token_mode": "totp", "token_secret-flags": "0", "kill_switch": "yes",
            "reported_os": "win", "useragent": "PAN GlobalProtect", "version_string": "6.1.0-33", "mtu": "1300",
            "reconnect_timeout": "60", "disable_ipv6": "yes", **SESSION_FLAGS}
    expect(data, want, "gp")
    if set(data) != set(want):
        fail(f"gp: unexpected items {sorted(set(data) - set(want))}")
    want_secrets = {"password": "pw-typed-in-the-editor", "token_secret": "base32:JBSWY3DPEHPK3PXP"}
    secrets = vpn_secrets("gp-work", want_secrets)
    if secrets != want_secrets:
        fail(f"gp: stored secrets {sorted(secrets)}")
    say(f"gp: created in nm-connection-editor, {len(want)} vpn.data items and 2 secrets as nmcli shows them")


def case_ac():
    e = Editor("--create", "--type=vpn:org.freedesktop.NetworkManager.espvpn")
    e.type("Connection name", "ac-office", e.connection_name())
    e.choose("Protocol", "Cisco AnyConnect (ocserv)")
    e.type("Gateway", "https://ocserv.example.com:8443/")
    e.type("User name", "bob")
    e.type("Group", "staff")
    e.choose("Password storage", "Ask every time")
    e.type("Client certificate", "/home/bob/cert.pem")
    e.type("Private key", "pkcs11:token=bob;object=vpn-key")
    e.type("Server pin", "sha256:4e9a0c11")
    e.choose("Single sign-on", "In a browser espvpn drives (Chromium)")
    e.choose("Reported OS", "Linux")
    e.type("MTU", "1400")
    e.save_and_close()
    data = vpn_data("ac-office")
    want = {"protocol": "anyconnect", "gateway": "https://ocserv.example.com:8443/", "user": "bob",
            "authgroup": "staff", "password-flags": "2", "usercert": "/home/bob/cert.pem",
            "userkey": "pkcs11:token=bob;object=vpn-key", "servercert": "sha256:4e9a0c11", "sso-browser": "chromium",
            "reported_os": "linux", "mtu": "1400", **SESSION_FLAGS}
    expect(data, want, "ac")
    if set(data) != set(want):
        fail(f"ac: unexpected items {sorted(set(data) - set(want))}")
    if vpn_secrets("ac-office"):
        fail("ac: a password asked every time was stored")
    say(f"ac: created in nm-connection-editor, {len(want)} vpn.data items, no secret stored")


def case_invalid():
    e = Editor("--create", "--type=vpn:org.freedesktop.NetworkManager.espvpn")
    e.type("Connection name", "never-saved", e.connection_name())
    e.type("Gateway", "https://")
    save = e.button("Save")
    time.sleep(0.5)
    if e.sensitive(save):
        fail("Save is offered for a gateway without host")
    why = e.entry("Gateway").description
    if "has no host" not in why:
        fail(f"the gateway field does not say why: {why!r}")
    # nm-connection-editor's Save says why too (its tooltip: the editor's refusal).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "has no host" not in (save.description or ""):
        time.sleep(0.1)
    if "has no host" not in (save.description or ""):
        fail(f"Save does not say why: {save.description!r}")
    e.type("MTU", "1300x")
    time.sleep(0.3)
    e.shot("nce-invalid.png")
    if "MTU must be a number" not in e.entry("MTU").description:
        fail(f"the MTU field does not say why: {e.entry('MTU').description!r}")
    e.type("Gateway", "vpn.example.com")
    e.type("MTU", "1300")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not e.sensitive(save):
        time.sleep(0.1)
    if not e.sensitive(save):
        fail("Save is not offered once the values are good")
    e.press(e.button("Cancel"))
    e.wait_closed()
    if "never-saved" in nmcli("-g", "NAME", "connection", "show").splitlines():
        fail("the cancelled profile was saved")
    say("invalid: Save withheld for a URL without host and an MTU '1300x', each field saying why; offered when good")


def case_import():
    path = os.path.join(WORK, "oc-office.nmconnection")
    with open(path, "w") as f:
        f.write("""[connection]
id=oc-office
uuid=7d1f0a52-6c1e-4a9b-8f0e-2a4b5c6d7e8f
type=vpn

[vpn]
authtype=password
cacert=/etc/ssl/office-ca.pem
cookie-flags=2
enable_csd_trojan=no
gateway=https://ocserv.example.com/
gwcert-flags=2
protocol=anyconnect
reported_os=linux-64
stoken_source=totp
stoken_string-flags=0
usercert=/home/carol/cert.pem
userkey=/home/carol/key.pem
service-type=org.freedesktop.NetworkManager.openconnect

[vpn-secrets]
form:main:username=carol
stoken_string=base32:JBSWY3DPEHPK3PXP
""")
    out = nmcli("connection", "import", "type", "espvpn", "file", path)
    if "successfully added" not in out:
        fail(f"nmcli import: {out}")
    uuid = nmcli("-g", "connection.uuid", "connection", "show", "oc-office")
    before = vpn_data("oc-office")
    expect(before, {"protocol": "anyconnect", "gateway": "https://ocserv.example.com/", "cafile": "/etc/ssl/office-ca.pem",
                    "user": "carol", "reported_os": "linux-64", "token_mode": "totp", "token_secret-flags": "0",
                    "usercert": "/home/carol/cert.pem", "userkey": "/home/carol/key.pem", "password-flags": "2"},
           "import")
    if nmcli("-g", "vpn.service-type", "connection", "show", "oc-office") != "org.freedesktop.NetworkManager.espvpn":
        fail("the imported profile is not an espvpn VPN")
    token = {"token_secret": "base32:JBSWY3DPEHPK3PXP"}
    if vpn_secrets("oc-office", token) != token:
        fail("import: the soft token's secret was not stored")
    e = Editor("--edit", uuid)
    shown = e.text_of(e.entry("Gateway"))
    if shown != "https://ocserv.example.com/":
        fail(f"the editor shows the imported gateway as {shown!r}")
    # A hidden entry's accessible text is its bullets: as many as the secret has characters.
    if len(e.text_of(e.entry("Token secret"))) != len("base32:JBSWY3DPEHPK3PXP"):
        fail("the editor does not hold the imported token secret")
    e.type("User name", "carol.smith")
    e.save_and_close()
    after = vpn_data("oc-office")
    if after != dict(before, user="carol.smith"):
        fail(f"the edit changed more than the user: {before} -> {after}")
    if vpn_secrets("oc-office", token) != token:
        fail("the edit lost the token secret")
    # nmcli's export goes through the plugin too; its file imports back as a twin.
    exported = os.path.join(WORK, "exported.nmconnection")
    nmcli("connection", "export", "oc-office", exported)
    with open(exported) as f:
        text = f.read()
    if "service-type=org.freedesktop.NetworkManager.espvpn" not in text or "JBSWY3DP" in text:
        fail(f"nmcli export wrote: {text}")
    nmcli("connection", "import", "type", "espvpn", "file", exported)
    uuids = [u for n, _, u in (line.partition(":") for line in
                               nmcli("-t", "-f", "NAME,UUID", "connection", "show").splitlines()) if n == "oc-office"]
    if len(uuids) != 2:
        fail(f"the exported file did not import as a second oc-office: {uuids}")
    twin = [u for u in uuids if u != uuid][0]
    if vpn_data(twin) != after:
        fail(f"export/import changed the items: {after} -> {vpn_data(twin)}")
    # openconnect's --config form through nmcli, named after the file.
    conf = os.path.join(WORK, "portal.conf")
    with open(conf, "w") as f:
        f.write("protocol=gp\nserver=https://portal.example.com/\nuser alice\nkill-switch\n")
    nmcli("connection", "import", "type", "espvpn", "file", conf)
    got = vpn_data("portal")
    want = {"protocol": "gp", "gateway": "https://portal.example.com/", "user": "alice", "kill_switch": "yes",
            **SESSION_FLAGS}
    if got != want:
        fail(f"nmcli import of an openconnect config file: {got} != {want}")
    say(f"import: NM-openconnect profile imported by nmcli ({len(before)} items), edited in "
        "nm-connection-editor: only the user changed; nmcli export imports back the same; "
        "an openconnect config file imported by nmcli")


def case_import_editor():
    """The editor's import: nm-connection-editor --import FILE (the plugin's import_from_file)
    opens the imported profile; saved, it is an espvpn VPN with the converted items."""
    path = os.path.join(WORK, "oc-gp.nmconnection")
    with open(path, "w") as f:
        f.write("""[connection]
id=oc-gp
uuid=5e0c2f1a-9b7d-4c3e-8a6f-1d2c3b4a5e6f
type=vpn

[vpn]
authtype=password
gateway=portal.example.com
protocol=gp
proxy=http://10.0.0.1:3128/
reported_os=win
service-type=org.freedesktop.NetworkManager.openconnect

[vpn-secrets]
form:_login:user=dave
""")
    e = Editor("--import", path)
    shown = e.text_of(e.entry("Gateway"))
    if shown != "portal.example.com":
        fail(f"the imported profile's gateway shows as {shown!r}")
    e.shot("nce-import.png")
    e.save_and_close()
    if nmcli("-g", "vpn.service-type", "connection", "show", "oc-gp") != "org.freedesktop.NetworkManager.espvpn":
        fail("the profile imported in the editor is not an espvpn VPN")
    data = vpn_data("oc-gp")
    want = {"protocol": "gp", "gateway": "portal.example.com", "proxy": "http://10.0.0.1:3128/", "reported_os": "win",
            "user": "dave", "password-flags": "2", **SESSION_FLAGS}
    if data != want:
        fail(f"editor import: {data} != {want}")
    say("import in the editor: nm-connection-editor --import of an NM-openconnect GP profile, saved as espvpn")


def tunnel_count(protocol):
    """Packets the tunnel carried: the ESP gateway's good ESP packets (GW_STATS) for GP; for
    AnyConnect, the packets received on the client's tun (only espvpn, from ocserv's session,
    writes there). 0 when unknown."""
    try:
        if protocol == "gp":
            with open(os.environ["GW_STATS"]) as f:
                return json.load(f)["rx"]["esp_ok"]
        links = json.loads(subprocess.run(["ip", "-j", "-s", "link", "show", "type", "tun"], capture_output=True,
                                          text=True, timeout=15).stdout)
        return sum(link["stats64"]["rx"]["packets"] for link in links)
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return 0


def case_import_connect(protocol):
    """A user's NetworkManager-openconnect profile (protocol "gp": the fake GP gateway;
    "anyconnect": ocserv), switched to espvpn in one step and used."""
    if protocol == "gp":
        url, name, user, password = os.environ["LIVE_GP_URL"], "oc-live", "alice", "secret"
        # The secrets NetworkManager-openconnect's auth dialog keeps after a GP login (its form ids).
        login = f"form:_login:user={user}, form:_login:passwd={password}"
    else:
        url, name = os.environ["LIVE_AC_URL"], "oc-live-ac"
        user, password = os.environ["LIVE_AC_USER"], os.environ["LIVE_AC_PASSWORD"]
        login = f"form:main:username={user}, form:main:password={password}"
    ca, target = os.environ["LIVE_CA"], os.environ["LIVE_PING"]
    src = os.path.join(WORK, name + ".conf")
    with open(src, "w") as f:
        f.write(f"[openconnect]\nDescription={name}\nHost={url}\nCACert={ca}\nProtocol={protocol}\n")
    # NetworkManager-openconnect's plugin (its import, through libnm's loader) makes the profile's
    # items. `nmcli connection import type openconnect` would too, but NM-openconnect 1.2.8's
    # import leaves ipv4.method unset and NetworkManager refuses it; so the items go to nmcli's
    # add. Its auth dialog, after a login with "Save passwords", keeps the form's user and
    # password as secrets of the profile: the same here.
    plugin = NM.VpnPluginInfo.new_from_file("/usr/lib/NetworkManager/VPN/nm-openconnect-service.name")
    made = plugin.load_editor_plugin().import_(src).get_setting_vpn()
    oc_data = {k: made.get_data_item(k) for k in made.get_data_keys()}
    if oc_data.get("gateway") != url or oc_data.get("protocol") != protocol:
        fail(f"NetworkManager-openconnect's import made {oc_data}")
    nmcli("connection", "add", "type", "vpn", "con-name", name, "autoconnect", "no", "vpn-type", "openconnect",
          "vpn.data", ", ".join(f"{k}={v}" for k, v in oc_data.items()), "vpn.secrets", login)
    oc_uuid = nmcli("-g", "connection.uuid", "connection", "show", name)
    if nmcli("-g", "vpn.service-type", "connection", "show", oc_uuid) != "org.freedesktop.NetworkManager.openconnect":
        fail("NetworkManager-openconnect's import did not make an openconnect profile")
    keyfile = [fn for u, _, fn in (line.partition(":") for line in
                                   nmcli("-t", "-f", "UUID,FILENAME", "connection", "show").splitlines()) if u == oc_uuid]
    if len(keyfile) != 1 or not os.path.isfile(keyfile[0]):
        fail(f"no keyfile for the NetworkManager-openconnect profile: {keyfile}")
    e = Editor("--import", keyfile[0])
    shown = e.text_of(e.entry("Gateway"))
    if shown != url:
        fail(f"the imported profile's gateway shows as {shown!r}")
    e.save_and_close()
    uuids = [u for n, _, u in (line.partition(":") for line in
                               nmcli("-t", "-f", "NAME,UUID", "connection", "show").splitlines())
             if n == name and u != oc_uuid]
    if len(uuids) != 1:
        fail(f"the editor's import did not save one more {name}: {uuids}")
    uuid = uuids[0]
    if nmcli("-g", "vpn.service-type", "connection", "show", uuid) != "org.freedesktop.NetworkManager.espvpn":
        fail("the profile imported in the editor is not an espvpn VPN")
    want = {"protocol": protocol, "gateway": url, "cafile": ca, "user": user, "password-flags": "0", **SESSION_FLAGS}
    if vpn_data(uuid) != want:
        fail(f"import and connect ({protocol}): {vpn_data(uuid)} != {want}")
    if vpn_secrets(uuid, {"password": password}) != {"password": password}:
        fail("the password NetworkManager-openconnect kept was not carried over")
    r = subprocess.run(["nmcli", "--wait", "40", "connection", "up", uuid], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        fail(f"nmcli connection up of the imported profile: {r.stdout.strip()} {r.stderr.strip()}")
    if nmcli("-g", "GENERAL.STATE", "connection", "show", uuid) != "activated":
        fail("the imported profile is not activated")
    tun = subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True, text=True).stdout
    if not tun.strip():
        fail("no tun device after connection up")
    # The gateway's namespace also forwards outside the tunnel: the route and the tunnel's
    # own count show that the ping crossed it.
    route = subprocess.run(["ip", "route", "get", target], capture_output=True, text=True).stdout
    if " dev tun" not in route:
        fail(f"{target} is not routed through the tunnel: {route.strip()}")
    before = tunnel_count(protocol)
    ping = subprocess.run(["ping", "-c", "2", "-i", "0.2", "-W", "2", target], capture_output=True, text=True,
                          timeout=20)
    if ping.returncode != 0:
        fail(f"no ping to {target} through the tunnel: {ping.stdout.strip()}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and tunnel_count(protocol) < before + 2:
        time.sleep(0.2)
    if tunnel_count(protocol) < before + 2:
        fail(f"the tunnel did not carry the pings ({protocol}): {before} -> {tunnel_count(protocol)}")
    carried = tunnel_count(protocol) - before
    nmcli("connection", "down", uuid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and subprocess.run(["ip", "-o", "link", "show", "type", "tun"],
                                                         capture_output=True, text=True).stdout.strip():
        time.sleep(0.1)
    if subprocess.run(["ip", "-o", "link", "show", "type", "tun"], capture_output=True, text=True).stdout.strip():
        fail("a tun is left after connection down")
    if nmcli("-g", "vpn.service-type", "connection", "show", oc_uuid) != "org.freedesktop.NetworkManager.openconnect":
        fail("the NetworkManager-openconnect profile was changed")
    say(f"import and connect ({protocol}): NetworkManager-openconnect's profile imported in the editor, up through "
        f"NetworkManager with its saved login, ping {target} through {tun.split(':')[1].strip()} "
        f"({carried} packets counted by the {'ESP gateway' if protocol == 'gp' else 'tun'}), down")


try:
    case_import_connect("gp")
    case_import_connect("anyconnect")
    case_import_editor()
    case_gp()
    case_ac()
    case_invalid()
    case_import()
except FormError as err:
    fail(str(err))
