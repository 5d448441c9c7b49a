#!/usr/bin/python3
"""nm-espvpn-auth-dialog's GTK4 login window driven as a person would: under Xvfb, read and
typed through the accessibility tree (AT-SPI, at-spi2-core's bus started for the test), the
window running `espvpn --authenticate --prompt-fd` against a real server, ending with the
secrets the dialog hands to NetworkManager (classic protocol: key/value lines, then QUIT).

  login_window_test.py DIALOG ESPVPN CASE [--screenshot DIR]
  gp: tools/fake-gp-gateway: a wrong password (the portal refuses: asked again with the
      server's word), the password, an OTP round, the portal's gateway choice (drop-down:
      the second one); the cookie is for that gateway, the password (flags 0) comes back.
  gp_cancel: the dialog's stderr closed (as GNOME Shell runs it); Escape at the password prompt:
      no secrets, exit 1, espvpn gone.
  gp_pin: a client key on a SoftHSM2 token: the PIN asked by the token's label (not answered by the
      saved password), a wrong one shown and asked again, the right one logs in; the PIN nowhere.
  gp_sso_cancel: a SAML portal and an external-browser profile: "continue in your browser", no
      field; Escape cancels.
  ac --url URL --password PW [--secrets-out FILE]: ocserv, from login_window_nm.sh (root,
      namespaces; it then connects NetworkManager with the secrets written to FILE): the group list
      as a drop-down, a wrong password refused ("Login failed." shown) and asked again, espvpn
      giving up after ocserv's third refusal and "Try Again", the banner accepted; the password
      (flags 2) is not handed back.
  gp_nm --url URL --gateway-url URL2 --stats FILE --secrets-out FILE: the gp case against the fake
      GP gateway login_window_nm.sh runs in namespaces (URL2: its second gateway; FILE: its stats),
      the secrets written for NetworkManager to connect with.

Run with Debian's python3 (python3-pyatspi). Needs xvfb, at-spi2-core, dbus (tools/install-deps).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, Failure, Fake, check  # noqa: E402

SERVICE = "org.freedesktop.NetworkManager.espvpn"
STEP_TIMEOUT = 20  # seconds for the window to show what is awaited


class Desktop:
    """Xvfb + a session bus + the AT-SPI bus, each started here and stopped by PID."""

    def __init__(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="loginwin.")

    def start(self):
        r, w = os.pipe()
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1024x768x24", "-nolisten", "tcp",
                                 "-noreset"], pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(xvfb)
        os.close(w)
        display = b""
        deadline = time.monotonic() + 15
        while not display.endswith(b"\n"):
            if time.monotonic() > deadline or xvfb.poll() is not None:
                raise Failure("Xvfb did not start")
            chunk = os.read(r, 16)
            if not chunk:
                raise Failure("Xvfb did not say its display")
            display += chunk
        os.close(r)
        os.environ["DISPLAY"] = ":" + display.decode().strip()
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.procs.append(bus)
        address = bus.stdout.readline().strip()
        if not address:
            raise Failure("the session bus did not start")
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
        os.environ["XDG_RUNTIME_DIR"] = self.dir
        os.environ["XDG_STATE_HOME"] = os.path.join(self.dir, "state")  # saved GP portal cookies stay here
        os.environ["GSETTINGS_BACKEND"] = "memory"
        os.environ["GDK_BACKEND"] = "x11"
        os.environ["NO_AT_BRIDGE"] = "0"
        os.environ.pop("WAYLAND_DISPLAY", None)
        launcher = subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(launcher)
        # The launcher owns org.a11y.Bus on the session bus once it is ready.
        deadline = time.monotonic() + 15
        while subprocess.run(["dbus-send", "--session", "--dest=org.a11y.Bus", "--print-reply", "/org/a11y/bus",
                              "org.a11y.Bus.GetAddress"], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise Failure("the AT-SPI bus did not start")
            time.sleep(0.1)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # at-spi-bus-launcher starts its own dbus-daemon for the a11y bus, and the registry:
        # their PIDs are children of the launcher, gone with it (it kills its bus); the
        # registry exits when its bus goes.
        shutil.rmtree(self.dir, ignore_errors=True)

    def screenshot(self, path):
        subprocess.run(["import", "-window", "root", path], check=True, timeout=20,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Dialog:
    def __init__(self, dialog, espvpn, data, secrets=(), close_stderr=False):
        # close_stderr: as GNOME Shell runs a classic dialog (its stderr closed).
        self.proc = subprocess.Popen([dialog, "-u", str(uuid.uuid4()), "-n", "work", "-s", SERVICE, "-i",
                                      "--espvpn", espvpn], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=None if close_stderr else subprocess.PIPE, start_new_session=True,
                                     preexec_fn=(lambda: os.close(2)) if close_stderr else None)
        req = "".join(f"DATA_KEY={k}\nDATA_VAL={v}\n\n" for k, v in data.items())
        req += "".join(f"SECRET_KEY={k}\nSECRET_VAL={v}\n\n" for k, v in secrets)
        self.proc.stdin.write((req + "DONE\n\n").encode())
        self.proc.stdin.flush()

    def finish(self):
        """The classic reply (key/value lines ending with an empty pair), then QUIT."""
        out = b""
        deadline = time.monotonic() + STEP_TIMEOUT
        os.set_blocking(self.proc.stdout.fileno(), False)
        while not out.endswith(b"\n\n\n") and time.monotonic() < deadline and self.proc.poll() is None:
            chunk = self.proc.stdout.read()
            if chunk:
                out += chunk
            else:
                time.sleep(0.05)
        try:
            self.proc.stdin.write(b"QUIT\n\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.proc.wait(STEP_TIMEOUT)
        rest = self.proc.stdout.read() or b""
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        return rc, out + rest, err

    def kill(self):
        """After a failure: the dialog and its espvpn killed, their stderr shown."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            if self.proc.stderr:
                os.set_blocking(self.proc.stderr.fileno(), False)
                err = (self.proc.stderr.read() or b"").decode(errors="replace")
                sys.stdout.write("---- dialog stderr ----\n" + err[-3000:] + "\n")


def parse_reply(out):
    lines = out.decode().split("\n")
    secrets = {}
    i = 0
    while i + 1 < len(lines) and lines[i]:
        secrets[lines[i]] = lines[i + 1]
        i += 2
    return secrets


class Screen:
    """The dialog's window as AT-SPI shows it."""

    def __init__(self, pyatspi, desktop, shots):
        self.a = pyatspi
        self.desktop = desktop
        self.shots = shots

    def app(self):
        d = self.a.Registry.getDesktop(0)
        for i in range(d.childCount):
            c = d.getChildAtIndex(i)
            if c is not None and c.name == "nm-espvpn-auth-dialog":
                return c
        return None

    def find_all(self, pred):
        found = []

        def walk(node, depth):
            if node is None or depth > 30:
                return
            try:
                if pred(node):
                    found.append(node)
                for i in range(node.childCount):
                    walk(node.getChildAtIndex(i), depth + 1)
            except Exception:  # a node gone while we read it: the next poll sees the new tree
                return

        walk(self.app(), 0)
        return found

    def showing(self, node):
        try:
            return node.getState().contains(self.a.STATE_VISIBLE)
        except Exception:
            return False

    def wait_for(self, what, pred, timeout=STEP_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            nodes = [n for n in self.find_all(pred) if self.showing(n)]
            if nodes:
                return nodes[0]
            time.sleep(0.1)
        raise Failure(f"the window never showed {what}; it shows: {self.texts()}")

    def texts(self):
        return [n.name for n in self.find_all(lambda n: n.getRoleName() == "label") if self.showing(n)]

    def field(self, role, label):
        return self.wait_for(f"a {role} field '{label}'",
                             lambda n: n.getRoleName() == role and n.name == label)

    def label(self, contains):
        return self.wait_for(f"the text '{contains}'", lambda n: n.getRoleName() == "label" and contains in n.name)

    def focused(self, node):
        """node or a part of it (a drop-down's button) has the keyboard focus."""
        def has_focus(n, depth=0):
            if n is None or depth > 4:
                return False
            if n.getState().contains(self.a.STATE_FOCUSED):
                return True
            return any(has_focus(n.getChildAtIndex(i), depth + 1) for i in range(n.childCount))

        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            if has_focus(node):
                return True
            time.sleep(0.05)
        return False

    def key(self, name):
        code = self.keysym(name)
        self.a.Registry.generateKeyboardEvent(code, None, self.a.KEY_SYM)
        time.sleep(0.05)

    @staticmethod
    def keysym(name):
        table = {"Return": 0xff0d, "Escape": 0xff1b, "Down": 0xff54, "space": 0x20, "Tab": 0xff09}
        return table[name] if name in table else ord(name)

    def pick_second(self, combo, shot=None):
        """A drop-down's second choice by keyboard: Space opens the list, Down, Enter picks,
        each step awaited (the list open, then closed with the focus back on the drop-down)."""
        def state_of(role, state):
            return lambda n: n.getRoleName() == role and n.getState().contains(state)

        self.key("space")
        self.wait_for("the list open", state_of("list item", self.a.STATE_FOCUSED))
        if shot:
            self.shot(shot)
        self.key("Down")
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            items = [n for n in self.find_all(lambda n: n.getRoleName() == "list item") if self.showing(n)]
            if len(items) > 1 and items[1].getState().contains(self.a.STATE_FOCUSED):
                break
            time.sleep(0.05)
        self.key("Return")
        deadline = time.monotonic() + STEP_TIMEOUT
        button = None
        while time.monotonic() < deadline:
            buttons = [combo.getChildAtIndex(i) for i in range(combo.childCount)]
            button = next((b for b in buttons if b is not None and b.getRoleName() == "push button"), None)
            if button is not None and button.getState().contains(self.a.STATE_FOCUSED):
                break
            time.sleep(0.05)
        else:
            raise Failure("the drop-down's list did not close")

    def type(self, text):
        for ch in text:
            self.key(ch)

    def shot(self, name):
        if self.shots:
            time.sleep(0.3)
            self.desktop.screenshot(os.path.join(self.shots, name))


def gp_profile(url, **extra):
    data = {"gateway": url, "protocol": "gp", "user": "alice", "cafile": CA, "password-flags": "0"}
    data.update(extra)
    return data


def gp_window(screen, d, second_gateway, challenges):
    """The fake GP gateway's login in the window: a wrong password, the password, an OTP round,
    the second gateway; returns the secrets the dialog handed back. second_gateway: its URL;
    challenges(): how many OTP rounds the fake sent."""
    try:
        pw = screen.field("password text", "Password:")
        check(screen.focused(pw), "the password field has the focus")
        screen.shot("login-window-password.png")
        screen.type("wrong")
        screen.key("Return")
        # The portal refuses; the window says so and asks again.
        msg = screen.label("Invalid username or password")
        check(msg is not None, f"the server's refusal is shown: {msg.name!r}")
        pw = screen.field("password text", "Password:")
        screen.shot("login-window-refused.png")
        check(screen.focused(pw), "asked again, the password field has the focus")
        screen.type("secret")
        screen.key("Return")
        otp = screen.field("password text", "Enter response 1 of 1 from your token")
        check(screen.focused(otp), "the OTP round: the server's own prompt, focused")
        screen.shot("login-window-otp.png")
        screen.type("111111")
        screen.key("Return")
        combo = screen.field("combo box", "Gateway:")
        check(screen.focused(combo), "the gateway choice: a drop-down, focused")
        screen.pick_second(combo, "login-window-gateway.png")
        screen.key("Return")  # submits
        rc, out, err = d.finish()
    finally:
        d.kill()
    check(rc == 0, f"the dialog exits 0 (stderr: {err[-400:]!r})")
    secrets = parse_reply(out)
    check(secrets.get("cookie", "").startswith("authcookie="), "the reply holds the cookie")
    check(secrets.get("gateway") == second_gateway,
          f"the cookie is for the chosen gateway 'second' ({second_gateway}): {secrets.get('gateway')}")
    check(secrets.get("password") == "secret", "password-flags 0: the typed password goes back to NetworkManager")
    check("111111" not in out.decode() and "wrong" not in out.decode(), "no one-time code, no refused password")
    check("secret" not in err and "authcookie" not in err, "no secret on the dialog's stderr")
    check(challenges() == 1, "one OTP round, answered (the portal gave its config)")
    return secrets


def case_gp(screen, dialog_bin, espvpn):
    with Fake("--portal-otp", "xml:111111", "--portal-cookie", "--gateway", "0:1:first", "--gateway",
              "1:2:second", listeners=2) as f:
        d = Dialog(dialog_bin, espvpn, gp_profile(f.url))
        gp_window(screen, d, f"https://127.0.0.1:{f.ports[1]}/",
                  lambda: f.stats_when(lambda s: s.get("challenges_sent", 0) >= 1).get("challenges_sent", 0))


def case_gp_nm(screen, dialog_bin, espvpn, url, gateway_url, stats, secrets_out):
    """The same against the fake GP gateway login_window_nm.sh runs in its gateway namespace
    (portal URL, the second gateway's URL, the fake's stats file); the secrets go to FILE for
    NetworkManager to connect with."""
    def challenges():
        # The fake writes its stats file as events happen: read until the round is counted.
        deadline = time.monotonic() + 10
        while True:
            try:
                with open(stats) as f:
                    n = json.load(f).get("challenges_sent", 0)
            except (OSError, ValueError):
                n = 0
            if n >= 1 or time.monotonic() > deadline:
                return n
            time.sleep(0.1)

    d = Dialog(dialog_bin, espvpn, gp_profile(url))
    save_secrets(secrets_out, gp_window(screen, d, gateway_url, challenges))


def case_gp_cancel(screen, dialog_bin, espvpn):
    with Fake() as f:
        # stderr closed, as GNOME Shell runs a classic dialog: the window works the same.
        d = Dialog(dialog_bin, espvpn, gp_profile(f.url, **{"password-flags": "2"}), close_stderr=True)
        try:
            screen.field("password text", "Password:")
            fd2 = os.readlink(f"/proc/{d.proc.pid}/fd/2")
            check(fd2 == "/dev/null", f"its closed stderr is /dev/null, not a descriptor opened later ({fd2})")
            pids = subprocess.run(["pgrep", "-P", str(d.proc.pid)], capture_output=True, text=True).stdout.split()
            check(len(pids) == 1, "espvpn --authenticate runs under the dialog")
            screen.key("Escape")
            rc, out, err = d.finish()
        finally:
            d.kill()
        check(rc == 1 and out == b"", f"Escape cancels: exit {rc}, nothing returned")
        deadline = time.monotonic() + 5
        while os.path.exists(f"/proc/{pids[0]}") and time.monotonic() < deadline:
            time.sleep(0.05)
        check(not os.path.exists(f"/proc/{pids[0]}"), "espvpn is gone")


def save_secrets(path, secrets):
    """--secrets-out FILE: the secrets the dialog returned, as nmcli's vpn.secrets value, in a
    new file only its owner reads (for login_window_nm.sh, which connects with them)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(", ".join(f"{k}={v}" for k, v in secrets.items() if k in ("cookie", "gateway", "gwcert", "resolve")))


def case_ac(screen, dialog_bin, espvpn, url, password, secrets_out=None):
    """ocserv (run by login_window_nm.sh, this script in its client namespace): the group list
    as a drop-down (group2), the password refused once ("Login failed." shown, asked again)."""
    data = {"gateway": url, "protocol": "anyconnect", "user": "grpuser", "cafile": CA, "password-flags": "2"}
    d = Dialog(dialog_bin, espvpn, data)

    def choose_group2(shot=None):
        combo = screen.wait_for("the group list", lambda n: n.getRoleName() == "combo box")
        check(screen.focused(combo), f"the group list '{combo.name}': a drop-down, focused")
        screen.pick_second(combo, shot)  # group2
        screen.key("Return")  # submits

    try:
        choose_group2("login-window-group.png")
        pw = screen.field("password text", "Password:")
        check(screen.focused(pw), "the password field has the focus")
        screen.type("wrong1")
        screen.key("Return")
        msg = screen.label("Login failed")
        check(msg is not None, f"the server's word is shown: {msg.name!r}")
        pw = screen.field("password text", "Password:")
        check(screen.focused(pw), "asked again, focused")
        screen.shot("login-window-ac-refused.png")
        # ocserv 1.1.6 refuses every answer to its retry form once a password was wrong (espvpn's
        # CLI sees the same); after its third refusal espvpn gives up and the window offers a new run.
        for wrong in ("wrong2", "wrong3"):
            screen.type(wrong)
            screen.key("Return")
            if wrong == "wrong2":
                screen.field("password text", "Password:")
        again = screen.wait_for("Try Again", lambda n: n.getRoleName() == "push button" and "Try Again" in n.name)
        check(screen.focused(again), "espvpn gave up: the error shown, Try Again focused")
        screen.label("rejected the credentials")
        screen.key("Return")
        choose_group2()
        pw = screen.field("password text", "Password:")
        check(screen.focused(pw), "a new run: the password field has the focus")
        screen.type(password)
        screen.key("Return")
        # ocserv's banner (ocserv_env.sh) comes after the login: accepted with Enter.
        banner = screen.label("Hello from test ocserv")
        accept = screen.wait_for("the Accept button", lambda n: n.getRoleName() == "push button" and "Accept" in n.name)
        check(banner is not None and screen.focused(accept), "the server's banner, the Accept button focused")
        screen.shot("login-window-banner.png")
        screen.key("Return")
        rc, out, err = d.finish()
    finally:
        d.kill()
    check(rc == 0, f"the dialog exits 0 (stderr: {err[-400:]!r})")
    secrets = parse_reply(out)
    check(len(secrets.get("cookie", "")) > 8, "the reply holds the cookie")
    check(secrets.get("gwcert", "").startswith("pin-sha256:"), "and the server's pin (gwcert)")
    check("password" not in secrets, "password-flags 2: the password is not handed back")
    check('auth group "group2"' in err, "ocserv was asked for group2")
    check(password not in err and "wrong" not in err, "no password on the dialog's stderr")
    if secrets_out:
        save_secrets(secrets_out, secrets)


def case_gp_sso_cancel(screen, dialog_bin, espvpn):
    """A single sign-on profile: the portal wants SAML, espvpn opens the "browser" (a stand-in
    that records its URL and waits); the window says to continue there; Escape cancels."""
    # espvpn run by root (as here) starts the browser from its session process, which runs as
    # nobody: the stand-in and the file it writes are in a directory of nobody's.
    bdir = tempfile.mkdtemp(prefix="espvpn-browser.")
    if os.geteuid() == 0:
        shutil.chown(bdir, "nobody")
        os.chmod(bdir, 0o755)
    with Fake("--portal-saml", "REDIRECT") as f:
        opened = os.path.join(bdir, "browser-url")
        browser = os.path.join(bdir, "browser")
        with open(browser, "w") as b:
            b.write(f"#!/bin/sh\nprintf '%s\\n' \"$1\" > {opened}\nexec sleep 30\n")
        os.chmod(browser, 0o755)
        d = Dialog(dialog_bin, espvpn, gp_profile(f.url, **{"external-browser": browser, "password-flags": "2"}))
        try:
            screen.label("Continue the login in your web browser")
            deadline = time.monotonic() + STEP_TIMEOUT
            while not os.path.exists(opened) and time.monotonic() < deadline:
                time.sleep(0.05)
            check(os.path.exists(opened), "espvpn opened the browser")
            cancel = screen.wait_for("Cancel", lambda n: n.getRoleName() == "push button" and "Cancel" in n.name)
            check(screen.focused(cancel), "the page says to continue in the browser; Cancel has the focus")
            check(not screen.find_all(lambda n: n.getRoleName() in ("password text", "text")), "no field asked")
            screen.shot("login-window-sso.png")
            screen.key("Escape")
            rc, out, err = d.finish()
        finally:
            d.kill()
            shutil.rmtree(bdir, ignore_errors=True)
        check(rc == 1 and out == b"", f"Escape cancels the single sign-on: exit {rc}, nothing returned")


def case_gp_pin(screen, dialog_bin, espvpn):
    """A client key on a SoftHSM2 token (pkcs11: URI without PIN) and a saved password: the window
    asks the token's PIN by the token's label (the saved password does not answer it), a wrong PIN
    is shown as an error and asked again, the right one logs in by the certificate; the PIN goes
    nowhere (not in the reply to NetworkManager, not on stderr)."""
    pin, wrong = "4711-right", "9999-wrong"
    uri = "pkcs11:token=espvpn-test;object=client"
    with tempfile.TemporaryDirectory(prefix="loginwin-token.") as tok:
        r = subprocess.run([os.path.join(HERE, "..", "pkcs11", "make_softhsm_token.sh"), tok, pin],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"SoftHSM2 token made ({r.stdout}{r.stderr})")
        os.environ["SOFTHSM2_CONF"] = os.path.join(tok, "softhsm2.conf")
        os.environ["TSS2_LOG"] = "all+NONE"  # tpm2-pkcs11, a p11-kit module too: no "no TPM here" lines
        os.environ["TPM2_PKCS11_LOG_LEVEL"] = "0"
        with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
            d = Dialog(dialog_bin, espvpn, gp_profile(f.url, usercert=uri, usergroup="gateway"),
                       secrets=[("password", "saved-pw")])
            label = f"Enter PIN for token 'espvpn-test' ({uri}):"
            try:
                field = screen.field("password text", label)
                check(screen.focused(field), "the PIN field, named by the token's label, has the focus")
                screen.type(wrong)
                screen.key("Return")
                msg = screen.label("Wrong PIN")
                check("espvpn-test" in msg.name, f"the refusal is shown: {msg.name!r}")
                field = screen.field("password text", label)
                check(screen.focused(field), "the PIN asked again, focused")
                screen.shot("login-window-pin.png")
                screen.type(pin)
                screen.key("Return")
                rc, out, err = d.finish()
            finally:
                d.kill()
            via = f.stats()["login_via"]
        check(rc == 0, f"the dialog exits 0 (stderr: {err[-400:]!r})")
        secrets = parse_reply(out)
        check(secrets.get("cookie", "").startswith("authcookie="), "the reply holds the cookie")
        check(via == {"client-certificate": 1}, f"the gateway logged in by the token's certificate ({via})")
        text = out.decode() + err
        check(pin not in text and wrong not in text, "no PIN in the reply to NetworkManager or on stderr")
        check("password" not in secrets, "the PIN is not handed back as the password")


CASES = {"gp": case_gp, "gp_cancel": case_gp_cancel, "gp_sso_cancel": case_gp_sso_cancel, "ac": case_ac,
         "gp_nm": case_gp_nm, "gp_pin": case_gp_pin}


def main():
    args = sys.argv[1:]
    shots = None
    if "--screenshot" in args:
        i = args.index("--screenshot")
        shots = args[i + 1]
        del args[i:i + 2]
    extra = {}
    for opt in ("--url", "--password", "--secrets-out", "--gateway-url", "--stats"):
        if opt in args:
            i = args.index(opt)
            extra[opt[2:].replace("-", "_")] = args[i + 1]
            del args[i:i + 2]
    dialog_bin, espvpn, case = args
    for tool in ("Xvfb", "dbus-daemon", "dbus-send", "import"):
        if not shutil.which(tool):
            print(f"FAIL {case}: {tool} is missing (tools/install-deps installs it)")
            return 1
    desktop = Desktop()
    try:
        desktop.start()
        import pyatspi  # after DISPLAY and the session bus are set
        start = time.monotonic()
        CASES[case](Screen(pyatspi, desktop, shots), os.path.abspath(dialog_bin), os.path.abspath(espvpn), **extra)
        print(f"PASS {case} ({time.monotonic() - start:.1f} s)")
        return 0
    except Failure as e:
        print(f"FAIL {case}: {e}")
        return 1
    finally:
        desktop.stop()


if __name__ == "__main__":
    sys.exit(main())
