#!/usr/bin/python3
"""The espvpn VPN editor driven through the accessibility tree (AT-SPI), as a person uses it.

editor_gui.py GTK NAME_FILE [SCREENSHOT.png]
Run by editor_gui.sh inside Xvfb and a private session bus (the AT-SPI bus is activated
on it). Starts editor_host.py (the editor in a window, loaded through libnm's plugin
loader) for GTK 3 or 4 and, through AT-SPI only (entries' text, combo boxes' selection,
check buttons' and Save's actions, accessible names and descriptions):
  gp:      a GlobalProtect profile filled in field by field, saved, every vpn.data item checked;
  invalid: a URL without host, an MTU that is no number and a pin in no known form are
           marked invalid (accessible description) and Save fails saying why; corrected, it saves;
  edit:    an existing AnyConnect profile, one field changed: only that item changes;
  forget:  a GP profile's "Forget saved sign-in" removes its saved portal cookie (espvpn
           --forget-cookies, ESPVPN_NM_ESPVPN naming the built one), another portal's stays.
"""
import json
import os
import select
import shutil
import tempfile
import subprocess
import sys
import time

import pyatspi
from atspi_form import Form, FormError, find_app

HERE = os.path.dirname(os.path.abspath(__file__))
GTK = sys.argv[1]
NAME_FILE = sys.argv[2]
SHOT = sys.argv[3] if len(sys.argv) > 3 else None
APP = f"espvpn-editor-gtk{GTK}"


def fail(msg):
    print(f"FAIL (GTK {GTK}): {msg}", flush=True)
    sys.exit(1)


class Host(Form):
    def __init__(self, start=None):
        args = [sys.executable, os.path.join(HERE, "editor_host.py"), GTK, NAME_FILE]
        if start is not None:
            args.append(json.dumps(start))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.line(20)
        if not ready.get("ready"):
            fail(f"editor host did not start: {ready}")
        self.ready = ready
        super().__init__(find_app(APP, self.proc.pid), int(GTK))

    def line(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            fail(f"no answer from the editor host within {timeout} s")
        text = self.proc.stdout.readline()
        if not text:
            fail("the editor host ended")
        return json.loads(text)

    def save(self):
        self.press(self.button("Save"))
        return self.line(10)

    def label_starting(self, prefix, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = pyatspi.findDescendant(self.app, lambda a: a is not None and a.getRoleName() == "label"
                                         and a.name.startswith(prefix))
            if hit is not None:
                return hit.name
            time.sleep(0.1)
        fail(f"no text '{prefix}...' shown")

    def description(self, name):
        return self.entry(name).description

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# The login's session secrets: never saved (the editor adds these flags on save).
SESSION_FLAGS = {"cookie-flags": "2", "gateway-flags": "2", "gwcert-flags": "2", "resolve-flags": "2",
                 "challenge-flags": "2", "challenge2-flags": "2", "challenge3-flags": "2"}


def expect_items(got, want, what):
    for k, v in want.items():
        if got.get(k) != v:
            fail(f"{what}: vpn.data item '{k}' is {got.get(k)!r}, expected {v!r} (all: {got})")


def case_gp():
    h = Host()
    if h.ready["capabilities"] != 7:  # import | export | ipv6
        fail(f"capabilities {h.ready['capabilities']}")
    h.choose("Protocol", "GlobalProtect")
    h.type("Gateway", "https://portal.example.com/")
    h.type("User name", "alice")
    h.type("Group", "Europe")
    h.type("Password", "pw-not-logged")
    h.choose("Password storage", "Saved for all users")
    h.type("CA certificate", "/etc/ssl/work-ca.pem")
    h.type("Server pin", "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=")
    h.type("Proxy", "socks5://10.0.0.1:1080/")
    h.choose("Single sign-on", "In the desktop's browser")
    h.choose("Soft token", "TOTP (time-based)")
    h.type("Token secret", "base32:JBSWY3DPEHPK3PXP")
    h.choose("Token secret storage", "Saved for all users")
    h.toggle("Sign in afresh at every connection (GlobalProtect: keep no portal cookie)")
    h.toggle("Kill switch (block traffic outside the tunnel)")
    h.choose("Reported OS", "Windows")
    h.type("User agent", "PAN GlobalProtect")
    h.type("Version string", "6.1.0-33")
    h.type("MTU", "1300")
    h.type("Reconnect timeout (s)", "60")
    h.toggle("Disable IPv6 in the tunnel")
    r = h.save()
    if SHOT:  # after Save: every edit is drawn by then
        subprocess.run(["import", "-window", "root", "-crop", "660x870+0+0", SHOT], check=False)
    if not r["ok"]:
        fail(f"a valid GP profile was refused: {r['error']}")
    if r["changes"] < 10:
        fail(f"the editor signalled 'changed' {r['changes']} times for 20 edits")
    expect_items(r["data"], {
        "protocol": "gp", "gateway": "https://portal.example.com/", "user": "alice", "authgroup": "Europe",
        "password-flags": "0", "cafile": "/etc/ssl/work-ca.pem",
        "servercert": "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=", "proxy": "socks5://10.0.0.1:1080/",
        "external-browser": "yes", "token_mode": "totp", "token_secret-flags": "0", "kill_switch": "yes",
        "no_cookie_cache": "yes",
        "reported_os": "win", "useragent": "PAN GlobalProtect", "version_string": "6.1.0-33", "mtu": "1300",
        "reconnect_timeout": "60", "disable_ipv6": "yes"}, "gp")
    if r["secrets"] != {"password": "pw-not-logged", "token_secret": "base32:JBSWY3DPEHPK3PXP"}:
        fail(f"gp: secrets {sorted(r['secrets'])}")
    h.close()
    print(f"ok gp (GTK {GTK}): 20 fields set through AT-SPI, {len(r['data'])} vpn.data items checked", flush=True)


def case_invalid():
    h = Host()
    h.type("Gateway", "https://")
    h.type("MTU", "abc")
    h.type("Server pin", "not-a-pin")
    r = h.save()
    if r["ok"]:
        fail("a URL without host, an MTU 'abc' and a bad pin were saved")
    for why in ("has no host", "MTU must be a number", "no known form"):
        if why not in r["error"]:
            fail(f"Save's error does not say '{why}': {r['error']!r}")
    for name, why in (("Gateway", "has no host"), ("MTU", "number"), ("Server pin", "no known form")):
        d = h.description(name)
        if not d.startswith("invalid:") or why not in d:
            fail(f"'{name}' is not marked invalid in the accessibility tree: {d!r}")
    h.type("Gateway", "vpn.example.com")
    h.type("MTU", "1400")
    h.type("Server pin", "sha256:4e9a0c11")
    if h.description("Gateway").startswith("invalid:"):
        fail("the corrected gateway is still marked invalid")
    r = h.save()
    if not r["ok"]:
        fail(f"the corrected profile was refused: {r['error']}")
    expect_items(r["data"], {"gateway": "vpn.example.com", "mtu": "1400", "servercert": "sha256:4e9a0c11",
                             "protocol": "anyconnect", "password-flags": "2"}, "invalid")
    if r["secrets"]:
        fail("a password asked every time was stored")
    h.close()
    print(f"ok invalid (GTK {GTK}): bad gateway/MTU/pin marked and explained; corrected, saved", flush=True)


def case_edit():
    start = {"data": {"gateway": "https://ocserv.example.com:8443/", "protocol": "anyconnect", "user": "bob",
                      "authgroup": "staff", "password-flags": "1", "resolve": "ocserv.example.com:10.0.0.5"},
             "secrets": {"password": "old"}}
    h = Host(start)
    shown = h.text_of(h.entry("Gateway"))
    if shown != "https://ocserv.example.com:8443/":
        fail(f"the editor shows the gateway {shown!r}")
    h.type("User name", "carol")
    r = h.save()
    if not r["ok"]:
        fail(f"edit refused: {r['error']}")
    want = dict(start["data"], user="carol", **SESSION_FLAGS)
    if r["data"] != want:
        fail(f"edit changed more than the user: {r['data']} != {want}")
    if r["secrets"] != {"password": "old"}:
        fail("edit lost the stored password")
    h.close()
    print(f"ok edit (GTK {GTK}): one field changed, the other {len(want) - 1} items kept", flush=True)


def case_forget():
    """'Forget saved sign-in' of a GP profile: the portal cookie the login window saved for it (a
    file in the desktop user's $XDG_STATE_HOME/espvpn) is removed by espvpn --forget-cookies, run by
    the editor; another portal's stays."""
    state = tempfile.mkdtemp(prefix="editor-state.")
    os.environ["XDG_STATE_HOME"] = state  # the editor host and the espvpn it runs read it
    d = os.path.join(state, "espvpn")
    os.makedirs(d, 0o700)
    files = {}
    for portal in ("portal.example.com_443", "other.example.com_443"):
        files[portal] = os.path.join(d, "gp-portal-" + portal)
        fd = os.open(files[portal], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.write(fd, b"saved\n")
        os.close(fd)
    h = Host({"data": {"gateway": "https://portal.example.com/", "protocol": "gp"}, "secrets": {}})
    h.press(h.button("Forget saved sign-in"))
    said = h.label_starting("Saved sign-in forgotten")
    if os.path.exists(files["portal.example.com_443"]) or not os.path.exists(files["other.example.com_443"]):
        fail(f"the profile's portal cookie is not the one removed ({os.listdir(d)})")
    if "removed 1 saved portal cookie of portal.example.com:443" not in said:
        fail(f"the editor says {said!r}")
    h.close()
    shutil.rmtree(state, ignore_errors=True)
    print(f"ok forget (GTK {GTK}): the profile's saved portal cookie removed, the other kept; shown: {said!r}",
          flush=True)


try:
    case_gp()
    case_invalid()
    case_edit()
    case_forget()
except FormError as e:
    fail(str(e))
