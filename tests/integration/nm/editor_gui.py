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
  edit:    an existing AnyConnect profile, one field changed: only that item changes.
"""
import json
import os
import select
import subprocess
import sys
import time

import pyatspi

HERE = os.path.dirname(os.path.abspath(__file__))
GTK = sys.argv[1]
NAME_FILE = sys.argv[2]
SHOT = sys.argv[3] if len(sys.argv) > 3 else None
APP = f"espvpn-editor-gtk{GTK}"


# GTK 4.8's combo box shows its choices only in its popup, not in the accessibility
# tree; its Selection picks by index. The labels in the editor's order (profile_fields.cpp).
GTK4_CHOICES = {
    "Protocol": ["Cisco AnyConnect (ocserv)", "GlobalProtect"],
    "Password storage": ["Ask every time", "Saved for this user (keyring)", "Saved for all users", "Not required"],
    "Token secret storage": ["Saved for all users", "Saved for this user (keyring)"],
    "Single sign-on": ["None (a password)", "In the desktop's browser", "In a browser espvpn drives (Chromium)"],
    "Soft token": ["None", "TOTP (time-based)", "HOTP (counter; key in a file)"],
    "Reported OS": ["Default (linux-64)", "Linux 64-bit", "Linux", "Windows", "macOS", "Android", "iOS"],
}


def fail(msg):
    print(f"FAIL (GTK {GTK}): {msg}", flush=True)
    sys.exit(1)


class Host:
    def __init__(self, start=None):
        args = [sys.executable, os.path.join(HERE, "editor_host.py"), GTK, NAME_FILE]
        if start is not None:
            args.append(json.dumps(start))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.line(20)
        if not ready.get("ready"):
            fail(f"editor host did not start: {ready}")
        self.ready = ready
        self.app = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.app is None:
            desktop = pyatspi.Registry.getDesktop(0)
            for app in desktop:
                if app is not None and app.name == APP and app.get_process_id() == self.proc.pid:
                    self.app = app
            time.sleep(0.2)
        if self.app is None:
            fail("the editor window never appeared in the accessibility tree")

    def line(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            fail(f"no answer from the editor host within {timeout} s")
        text = self.proc.stdout.readline()
        if not text:
            fail("the editor host ended")
        return json.loads(text)

    def find(self, name, roles):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            hit = pyatspi.findDescendant(self.app, lambda a: a is not None and a.name == name
                                         and a.getRoleName() in roles)
            if hit is not None:
                return hit
            time.sleep(0.1)
        fail(f"no {'/'.join(roles)} named '{name}' in the editor")

    def entry(self, name):
        return self.find(name, ("text", "entry", "password text"))

    def type(self, name, text):
        acc = self.entry(name)
        if not acc.queryEditableText().setTextContents(text):
            fail(f"could not type into '{name}'")

    def choose(self, name, label):
        combo = self.find(name, ("combo box",))
        items = self.items(combo) if GTK == "3" else GTK4_CHOICES[name]
        if label not in items:
            fail(f"'{name}' offers {items}, not '{label}'")
        if not combo.querySelection().selectChild(items.index(label)):
            fail(f"could not choose '{label}' in '{name}'")
        if GTK == "3":  # GTK4: the saved items tell
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and self.combo_text(combo) != label:
                time.sleep(0.05)
            if self.combo_text(combo) != label:
                fail(f"'{name}' shows '{self.combo_text(combo)}' after choosing '{label}'")

    @staticmethod
    def items(combo):
        # GTK3: combo box > menu > menu items; GTK4: the choices are the combo's children's names.
        names = []
        for child in combo:
            if child is None:
                continue
            if child.getRoleName() == "menu":
                names += [c.name for c in child if c is not None]
            else:
                names.append(child.name)
        return names

    @staticmethod
    def combo_text(combo):
        try:
            sel = combo.querySelection()
            if sel.nSelectedChildren:
                return sel.getSelectedChild(0).name
        except NotImplementedError:
            pass
        return combo.name

    @staticmethod
    def press(acc):
        """Its first action (GTK3), else a click in its middle as a person would
        (GTK 4.8 has no AT-SPI actions on buttons; the registry clicks through XTest)."""
        try:
            action = acc.queryAction()
            if action.nActions > 0 and action.doAction(0):
                return
        except NotImplementedError:
            pass
        box = acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        pyatspi.Registry.generateMouseEvent(box.x + box.width // 2, box.y + box.height // 2, "b1c")

    def toggle(self, name):
        self.press(self.find(name, ("check box", "check button", "toggle button")))

    def save(self):
        self.press(self.find("Save", ("push button", "button")))
        return self.line(10)

    def description(self, name):
        return self.entry(name).description

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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
    h.choose("Token secret storage", "Saved for this user (keyring)")
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
        fail(f"the editor signalled 'changed' {r['changes']} times for 19 edits")
    expect_items(r["data"], {
        "protocol": "gp", "gateway": "https://portal.example.com/", "user": "alice", "authgroup": "Europe",
        "password-flags": "0", "cafile": "/etc/ssl/work-ca.pem",
        "servercert": "pin-sha256:9QvRbYqJ3n1p2nJ7Tk5LZb0Yq9x8F1Qm6mW0pL5o3sA=", "proxy": "socks5://10.0.0.1:1080/",
        "external-browser": "yes", "token_mode": "totp", "token_secret-flags": "1", "kill_switch": "yes",
        "reported_os": "win", "useragent": "PAN GlobalProtect", "version_string": "6.1.0-33", "mtu": "1300",
        "reconnect_timeout": "60", "disable_ipv6": "yes"}, "gp")
    if r["secrets"] != {"password": "pw-not-logged", "token_secret": "base32:JBSWY3DPEHPK3PXP"}:
        fail(f"gp: secrets {sorted(r['secrets'])}")
    h.close()
    print(f"ok gp (GTK {GTK}): 19 fields set through AT-SPI, {len(r['data'])} vpn.data items checked", flush=True)


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
    text = h.entry("Gateway").queryText()
    shown = text.getText(0, text.characterCount)
    if shown != "https://ocserv.example.com:8443/":
        fail(f"the editor shows the gateway {shown!r}")
    h.type("User name", "carol")
    r = h.save()
    if not r["ok"]:
        fail(f"edit refused: {r['error']}")
    want = dict(start["data"], user="carol")
    if r["data"] != want:
        fail(f"edit changed more than the user: {r['data']} != {want}")
    if r["secrets"] != {"password": "old"}:
        fail("edit lost the stored password")
    h.close()
    print(f"ok edit (GTK {GTK}): one field changed, the other {len(want) - 1} items kept", flush=True)


case_gp()
case_invalid()
case_edit()
