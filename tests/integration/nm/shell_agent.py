#!/usr/bin/env python3
"""Runs nm-espvpn-auth-dialog the way GNOME Shell's network agent runs an external-UI
auth dialog (js/ui/components/networkAgent.js, VPNRequestHandler; facts in
src/nm/README.md), and checks what it would show:
  - argv: DIALOG -u UUID -n NAME -s SERVICE --external-ui-mode [-i] [-r];
  - stdin: DATA_KEY=/DATA_VAL= and SECRET_KEY=/SECRET_VAL= pairs, each followed by an
    empty line, then "DONE" and an empty line; stdin then stays open (the Shell closes
    it only after the dialog's output is read, and never writes QUIT in this mode);
  - stdout read to end of file (the dialog must exit by itself), parsed as a key file:
    [VPN Plugin UI] Version must be 2, Title and Description are shown; each other
    group with ShouldAsk=true is a field (Label, Value, IsSecret = masked), one with
    ShouldAsk=false and a non-empty Value is handed over as is.
  shell_agent.py DIALOG CASE   (CASE: otp | otp_stored | plain | cookie)
Exit 0 when the dialog's answer is what CASE wants; the dialog must finish in 10 s."""
import configparser
import os
import subprocess
import sys
import time

SERVICE = "org.freedesktop.NetworkManager.espvpn"
BASE = {"gateway": "https://vpn.example.com/", "protocol": "gp", "user": "alice"}
CASES = {
    # data, secrets, flags -> {group: (ShouldAsk, IsSecret)} the Shell must see
    "otp": ({**BASE, "otp": "yes", "password-flags": "2", "otp-flags": "2"}, {}, ["-i"],
            {"password": (True, True), "otp": (True, True)}),
    "otp_stored": ({**BASE, "otp": "yes", "otp-flags": "2"}, {"password": "kept-pw"}, ["-i"],
                   {"password": (False, True), "otp": (True, True)}),
    "plain": ({**BASE, "password-flags": "2"}, {}, ["-i"], {"password": (True, True)}),
    "cookie": (dict(BASE), {"cookie": "c00kie"}, ["-i"], {}),
}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    dialog, case = sys.argv[1], sys.argv[2]
    data, secrets, flags, want = CASES[case]
    argv = [dialog, "-u", "8a1e4c52-0000-4000-8000-000000000001", "-n", "work", "-s", SERVICE,
            "--external-ui-mode", *flags]
    # No display: the key file for the Shell's own prompt (with a display and no terminal the
    # dialog would log in in its window instead: nm_gnome_settings).
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    req = "".join(f"DATA_KEY={k}\nDATA_VAL={v}\n\n" for k, v in data.items())
    req += "".join(f"SECRET_KEY={k}\nSECRET_VAL={v}\n\n" for k, v in secrets.items())
    p.stdin.write((req + "DONE\n\n").encode())
    p.stdin.flush()  # and left open, as the Shell does
    end = time.monotonic() + 10
    while p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    if p.poll() is None:
        p.kill()
        fail("the dialog did not exit with its stdin left open (GNOME Shell waits for end of file)")
    out = p.stdout.read().decode()
    p.stdin.close()
    if p.returncode != 0:
        fail(f"dialog exit status {p.returncode}: {p.stderr.read().decode()}")
    if not want and not out:
        print("ok: no output: the Shell confirms without a dialog")
        return
    kf = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    kf.optionxform = str
    kf.read_string(out)
    ui = kf["VPN Plugin UI"]
    if ui.get("Version") != "2":
        fail(f"Version is {ui.get('Version')!r}, the Shell rejects all but 2")
    for key in ("Title", "Description"):
        if not ui.get(key):
            fail(f"no {key}")
    seen, handed = {}, {}
    for g in kf.sections():
        if g == "VPN Plugin UI":
            continue
        sec = kf[g]
        ask = sec.get("ShouldAsk") == "true"
        if ask:
            if not sec.get("Label"):
                fail(f"field {g} has no Label")
            seen[g] = (True, sec.get("IsSecret") == "true")
        else:
            seen[g] = (False, sec.get("IsSecret") == "true")
            if sec.get("Value"):
                handed[g] = sec.get("Value")
    fields = {g: v for g, v in seen.items() if v[0]}
    want_fields = {g: v for g, v in want.items() if v[0]}
    if fields != want_fields:
        fail(f"the Shell would ask {fields}, want {want_fields}\n{out}")
    if handed:
        fail(f"values handed over as they are: {sorted(handed)} (a known secret echoed back)")
    for s in secrets.values():
        if s in out:
            fail("a known secret is in the dialog's output")
    print(f"ok: the Shell shows '{ui.get('Title')}': {ui.get('Description')}; fields "
          + ", ".join(f"{kf[g]['Label']} ({'masked' if v[1] else 'plain'})" for g, v in fields.items()))


main()
