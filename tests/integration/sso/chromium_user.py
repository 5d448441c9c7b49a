#!/usr/bin/python3
"""The user at a real headless Chromium, for the single sign-on tests (docs/SSO.md).

Given to espvpn as --external-browser="chromium_user.py CONFIG.json", so espvpn
starts it as the invoking user with the page to open as the last argument (a URL, or
the path of the IdP form espvpn saved for a SAML POST). It starts Chromium
(--headless=new) with the DevTools protocol on a pipe (fds 3/4, NUL-separated JSON),
opens the page, and acts as the user: on the fake IdP's sign-in form it types the
user name and the next password of its list into the JavaScript form and clicks the
button; when the gateway sends the browser to a globalprotectcallback: URL it does
what xdg-open does with the installed desktop entry: runs its Exec line with the URL.

CONFIG (JSON): user, passwords [..] (one per sign-in form shown; when they run out,
the user stops: a login never finished), resolver_rules (--host-resolver-rules),
desktop (the desktop entry whose Exec line handles the URL), espvpn (the program to
run for the entry's espvpn, as it is not installed), callback_out (a file to write
the URL to, for tests that hand it over themselves; then the handler is not run
unless desktop is also given), log (this program's log), chromium_log (Chromium's stderr), pidfile (gets "OWN_PID CHROMIUM_PID"), tmp (where
Chromium's profile and HOME go),
deadline (seconds, default 60).
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

cfg = json.load(open(sys.argv[1]))
target = sys.argv[-1]
log_file = open(cfg["log"], "a", buffering=1)


def log(msg):
    log_file.write("%.3f chromium_user: %s\n" % (time.monotonic(), msg))


class Cdp:
    def __init__(self, proc, to_browser, from_browser):
        self.proc, self.w, self.r = proc, to_browser, from_browser
        self.buf = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None, wait=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        if not wait:
            return None
        want = self.next_id
        while True:
            m = self.read(deadline)
            if m.get("id") == want:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            if not self.pass_through(m, session):
                self.events.append(m)

    def pass_through(self, m, session):
        """A paused response that is not the callback goes on at once, even while a command
        waits for its answer (that answer may wait for the page's navigation)."""
        if m.get("method") != "Fetch.requestPaused":
            return False
        p = m["params"]
        headers = {h["name"].lower(): h["value"] for h in p.get("responseHeaders") or []}
        if headers.get("location", "").startswith("globalprotectcallback:"):
            return False
        log("response %s %s" % (p.get("responseStatusCode"), p["request"]["url"].split("?")[0]))
        self.send("Fetch.continueRequest", {"requestId": p["requestId"]}, session=session, wait=False)
        return True

    def read(self, until):
        while b"\0" not in self.buf:
            left = until - time.monotonic()
            if left <= 0:
                raise TimeoutError("no DevTools message before the deadline")
            import select
            ready, _, _ = select.select([self.r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.r, 1 << 16)
                if not chunk:
                    raise EOFError("Chromium closed the DevTools pipe")
                self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\0")
        return json.loads(raw)

    def event(self, until):
        if self.events:
            return self.events.pop(0)
        return self.read(until)


def hand_over(url):
    log("the browser was sent to a globalprotectcallback: URL (%d bytes)" % len(url))
    if cfg.get("callback_out"):
        fd = os.open(cfg["callback_out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (url + "\n").encode())
        os.close(fd)
    if not cfg.get("desktop"):
        return 0
    # xdg-open: the entry's Exec line, %u = the URL.
    exec_line = next(line.split("=", 1)[1] for line in open(cfg["desktop"]) if line.startswith("Exec="))
    argv = [url if a == "%u" else a for a in shlex.split(exec_line)]
    if cfg.get("espvpn") and os.path.basename(argv[0]) == "espvpn":
        argv[0] = cfg["espvpn"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    log("handler exit %d: %s" % (r.returncode, (r.stdout + r.stderr).strip()))
    return r.returncode


deadline = time.monotonic() + float(cfg.get("deadline", 60))
# Under the test's own directory (tmp) when given, so the test removes whatever is left.
profile = tempfile.mkdtemp(prefix="espvpn-sso-chromium-", dir=cfg.get("tmp"))
home = tempfile.mkdtemp(prefix="espvpn-sso-home-", dir=cfg.get("tmp"))
import fcntl


def high(fd):  # above 4, so the shell's redirections to 3 and 4 cannot clobber it
    h = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return h


to_r, to_w = map(high, os.pipe())
from_r, from_w = map(high, os.pipe())
args = ["/usr/bin/chromium", "--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + profile,
        "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--ignore-certificate-errors",
        "--disable-background-networking", "--disable-extensions"]
if cfg.get("resolver_rules"):
    args.append("--host-resolver-rules=" + cfg["resolver_rules"])
if os.getuid() == 0:
    args.append("--no-sandbox")  # Chromium refuses root with its sandbox; the tests run it as a user
args.append("about:blank")
env = dict(os.environ, HOME=home)
env.pop("DBUS_SESSION_BUS_ADDRESS", None)
chromium_log = open(cfg["chromium_log"], "a") if cfg.get("chromium_log") else subprocess.DEVNULL


def devtools_fds():  # in the child: Chromium reads commands on fd 3 and writes on fd 4
    os.dup2(to_r, 3)
    os.dup2(from_w, 4)


proc = subprocess.Popen(args, preexec_fn=devtools_fds, close_fds=False, env=env,
                        stdin=subprocess.DEVNULL, stdout=chromium_log, stderr=chromium_log)
os.close(to_r)
os.close(from_w)
log("chromium pid %d, page %s" % (proc.pid, target))
# The test ends us with SIGTERM: Chromium and its profile go too (the finally below).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
rc = 1
try:
    if cfg.get("pidfile"):
        with open(cfg["pidfile"], "w") as f:
            f.write("%d %d\n" % (os.getpid(), proc.pid))
    cdp = Cdp(proc, to_w, from_r)
    pages = [t for t in cdp.send("Target.getTargets")["targetInfos"] if t["type"] == "page"]
    sid = cdp.send("Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True})["sessionId"]
    cdp.send("Page.enable", session=sid)
    cdp.send("Network.enable", session=sid)
    cdp.send("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Response"}]}, session=sid)
    url = target if "://" in target else "file://" + os.path.abspath(target)
    cdp.send("Page.navigate", {"url": url}, session=sid, wait=False)  # its answer waits for the paused request
    passwords = list(cfg.get("passwords", []))
    done = False
    reloads = 0
    submitted = False  # a sign-in was submitted and no page has answered it yet
    while not done:
        try:
            m = cdp.event(min(deadline, time.monotonic() + 10))
        except TimeoutError:
            # Seen rarely under load: Chromium aborts its TLS handshakes to the ACS and then
            # goes quiet. The user presses reload (a POST result page posts again), twice at most.
            if time.monotonic() >= deadline:
                raise
            if not submitted or reloads >= 2:
                continue
            reloads += 1
            log("nothing for 10 s: reload %d" % reloads)
            cdp.send("Page.reload", {"ignoreCache": True}, session=sid, wait=False)
            continue
        method, p = m.get("method"), m.get("params", {})
        if cdp.pass_through(m, sid):
            continue
        if method == "Network.loadingFailed":
            log("request failed: %s" % p.get("errorText"))
        if method == "Fetch.requestPaused":
            headers = {h["name"].lower(): h["value"] for h in p.get("responseHeaders") or []}
            loc = headers.get("location", "")
            if loc.startswith("globalprotectcallback:"):
                cdp.send("Fetch.failRequest", {"requestId": p["requestId"], "errorReason": "Aborted"},
                         session=sid, wait=False)
                rc = hand_over(loc)
                done = True
            else:
                cdp.send("Fetch.continueRequest", {"requestId": p["requestId"]}, session=sid, wait=False)
        elif method == "Network.requestWillBeSent" and p["request"]["url"].startswith("globalprotectcallback:"):
            rc = hand_over(p["request"]["url"])
            done = True
        elif method == "Page.loadEventFired":
            res = cdp.send("Runtime.evaluate", {"expression":
                           "document.getElementById('go') ? document.getElementById('msg').textContent : ''",
                           "returnByValue": True}, session=sid)
            msg = res.get("result", {}).get("value", "")
            if not msg:
                continue
            submitted = False
            log("sign-in form shown: %s" % msg)
            if not passwords:
                log("no password left: the user walks away")
                continue
            pw = passwords.pop(0)
            for field, text in (("user", cfg.get("user", "alice")), ("pass", pw)):
                cdp.send("Runtime.evaluate", {"expression": "document.getElementById('%s').focus()" % field},
                         session=sid)
                cdp.send("Input.insertText", {"text": text}, session=sid)
            cdp.send("Runtime.evaluate", {"expression": "document.getElementById('go').click()"}, session=sid)
            submitted = True
            log("typed the user name and a password, clicked Sign in")
except (TimeoutError, EOFError, RuntimeError, OSError, StopIteration) as e:
    log("stopped: %s" % e)
finally:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(profile, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    log("chromium stopped, exit %d" % rc)
sys.exit(rc)
