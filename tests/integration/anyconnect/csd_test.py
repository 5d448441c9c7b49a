#!/usr/bin/env python3
"""espvpn --protocol=anyconnect and a server that asks for a CSD host scan.

A small AnyConnect login server on loopback (Python's http.server over TLS, no
code shared with the client) answers the init POST with a <host-scan> request;
its wait page, fetched with the host scan's token as the "sdesktop" cookie, is an
HTML refresh page the first time and XML the second (the scan is done), and only
an init POSTed with that cookie gets the password form (as openconnect 9.01 goes
on: the init again once the wait page is XML), and only an answer carrying the
token as <host-scan-token> logs in. The --csd-wrapper records its
arguments and environment; they must be openconnect's (auth.c run_csd_script).

  csd_test.py ESPVPN_BIN CERTS_DIR wrapper|invoker|csd_user|no_wrapper
  wrapper:    --authenticate runs the wrapper once with openconnect's arguments
              and CSD_TOKEN/CSD_HOSTNAME/CSD_SHA256, the wait page comes with
              sdesktop=TOKEN (twice: refresh, then XML), the init again, the login
              completes (COOKIE printed), exit 0; openconnect 9.01 with the same
              arguments the same (the server sees the same requests); espvpn is
              root and nobody invoked it: the wrapper ran as nobody, and the log
              says so (openconnect runs it as root)
  invoker:    espvpn alone, with SUDO_UID (the user "daemon"): the wrapper ran as
              that user, not as root (it handles the server's data)
  csd_user:   SUDO_UID and --csd-user=nobody: --csd-user wins
  no_wrapper: the same server without --csd-wrapper: exit 1, the error names
              --csd-wrapper, no cookie printed
"""
import hashlib
import json
import os
import pwd
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading

from ac_xml_peer import XmlHandler, tls_server

TICKET, TOKEN = "TICKET-7c1e", "TOKEN-93ab"
HOST_SCAN = f"""<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="auth-request" aggregate-auth-version="2">
<opaque is-for="sg"><tunnel-group>main</tunnel-group></opaque>
<auth id="main"><message>Host scan first</message></auth>
<host-scan><host-scan-ticket>{TICKET}</host-scan-ticket><host-scan-token>{TOKEN}</host-scan-token>
<host-scan-base-uri>/+CSCOE+/sdesktop/token.xml</host-scan-base-uri>
<host-scan-wait-uri>/+CSCOE+/sdesktop/wait.html</host-scan-wait-uri></host-scan>
</config-auth>"""
FORM = """<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="auth-request" aggregate-auth-version="2">
<auth id="main"><message>Please enter your username and password.</message>
<form method="post" action="/auth"><input type="text" name="username" label="Username:" />
<input type="password" name="password" label="Password:" /></form></auth></config-auth>"""
REFRESH = """<html><head><meta http-equiv="refresh" content="1; URL=/+CSCOE+/sdesktop/wait.html"></head>
<body>Please wait while the host scan runs.</body></html>"""
SCAN_DONE = """<?xml version="1.0" encoding="UTF-8"?><hostscan><status>TOKEN_SUCCESS</status></hostscan>"""
DONE = """<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="complete" aggregate-auth-version="2">
<auth id="success"><message>Success</message></auth></config-auth>"""

seen = {"init": 0, "init_with_token": 0, "wait_with_token": 0, "wait_without_token": 0, "auth": 0}


class Handler(XmlHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        # The answer by its type, wherever it is posted (openconnect 9.01 posts the first answer after a
        # host scan to the URL it started at, not to the form's action).
        if 'type="auth-reply"' in body and "<password>secret</password>" in body and \
                f"<host-scan-token>{TOKEN}</host-scan-token>" in body:
            seen["auth"] += 1
            self.reply(DONE, "webvpn=CSDTESTCOOKIE; Secure")
        elif f"sdesktop={TOKEN}" in self.headers.get("Cookie", "") and seen["wait_with_token"] >= 2:
            seen["init_with_token"] += 1
            self.reply(FORM)
        else:
            seen["init"] += 1
            self.reply(HOST_SCAN)

    def do_GET(self):
        if self.path == "/+CSCOE+/sdesktop/wait.html":
            key = "wait_with_token" if f"sdesktop={TOKEN}" in self.headers.get("Cookie", "") else "wait_without_token"
            seen[key] += 1
            self.reply(REFRESH if seen[key] == 1 else SCAN_DONE)
        else:
            self.send_error(404)


def main():
    espvpn, certs, mode = sys.argv[1:4]
    if mode in ("invoker", "csd_user") and os.geteuid() != 0:
        print(f"SKIP {mode}: needs root")
        sys.exit(77)
    server = tls_server(Handler, certs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    work = tempfile.mkdtemp(prefix="csd-test.")
    os.chmod(work, 0o777)  # the wrapper may run as another user and records its run here
    record = os.path.join(work, "wrapper.json")
    wrapper = os.path.join(work, "csd-wrapper")
    with open(wrapper, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os, sys\n"
                f"json.dump({{'argv': sys.argv[1:], 'uid': os.getuid(), "
                f"'env': {{k: v for k, v in os.environ.items() if k.startswith('CSD_')}}}}, open({record!r}, 'w'))\n")
    os.chmod(wrapper, 0o755)
    # Who espvpn runs the wrapper as: nobody when root started it and nobody invoked it, the
    # SUDO_UID user, or --csd-user.
    env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID", "SUDO_USER", "PKEXEC_UID")}
    nobody, daemon = pwd.getpwnam("nobody"), pwd.getpwnam("daemon")
    extra = []
    want_uid = nobody.pw_uid if os.geteuid() == 0 else os.geteuid()
    if mode in ("invoker", "csd_user"):
        env["SUDO_UID"] = str(daemon.pw_uid)
        want_uid = daemon.pw_uid
    if mode == "csd_user":
        extra = ["--csd-user=nobody"]
        want_uid = nobody.pw_uid

    def run(client):
        """client's --authenticate login, from a fresh count of what the server saw."""
        for k in seen:
            seen[k] = 0
        if os.path.exists(record):
            os.unlink(record)
        args = [client, "--protocol=anyconnect", "--authenticate", "--cafile", os.path.join(certs, "ca.pem"),
                "-u", "alice", "--passwd-on-stdin", f"https://127.0.0.1:{port}/"]
        if mode != "no_wrapper":
            args[2:2] = ["--csd-wrapper", wrapper] + extra
        return subprocess.run(args, input="secret\n", capture_output=True, text=True, timeout=60, env=env), dict(seen)

    r, saw = run(espvpn)

    def fail(why, res=r, got=saw):
        print(f"FAIL {mode}: {why}\nexit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}\nserver saw: {got}")
        sys.exit(1)

    if mode == "no_wrapper":
        server.shutdown()
        if r.returncode != 1: fail("expected exit 1")
        if "--csd-wrapper" not in r.stderr: fail("the error does not name --csd-wrapper")
        if "COOKIE=" in r.stdout: fail("a cookie was printed")
        if os.path.exists(record): fail("something ran the wrapper")
        print(f"PASS no_wrapper: exit 1, {r.stderr.strip().splitlines()[-1]}")
        return
    check_wrapper_login("espvpn", r, saw, record, certs, fail)
    ran_as = json.load(open(record))["uid"]
    if ran_as != want_uid: fail(f"espvpn ran the wrapper as uid {ran_as}, expected {want_uid}")
    if mode == "wrapper" and os.geteuid() == 0 and "--csd-wrapper runs as nobody" not in r.stderr:
        fail("the log does not say the wrapper runs as nobody")
    clients = ["espvpn"]
    if mode == "wrapper" and shutil.which("openconnect"):  # the reference, with the same arguments against the same server
        r_oc, saw_oc = run("openconnect")
        check_wrapper_login("openconnect", r_oc, saw_oc, record, certs, lambda why: fail(why, r_oc, saw_oc))
        clients.append("openconnect")
    server.shutdown()
    print(f"PASS {mode}: {', '.join(clients)}: ran the wrapper (espvpn's as uid {ran_as}) with openconnect's arguments and "
          "CSD_TOKEN/CSD_HOSTNAME/CSD_SHA256; the wait page twice with sdesktop (refresh, then XML); the init again; "
          "cookie printed")


def check_wrapper_login(name, r, saw, record, certs, fail):
    if r.returncode != 0: fail(f"{name}: expected exit 0")
    if "webvpn=CSDTESTCOOKIE" not in r.stdout and "COOKIE='CSDTESTCOOKIE'" not in r.stdout:
        fail(f"{name}: no COOKIE line with the server's webvpn cookie")
    if not os.path.exists(record): fail(f"{name}: the wrapper did not run")
    got = json.load(open(record))
    argv = got["argv"]
    want = ["", "-ticket", f'"{TICKET}"', "-stub", '"0"', "-group", '""', "-certhash", None, "-url",
            f'"https://127.0.0.1/+CSCOE+/sdesktop/token.xml"', "-langselen"]
    if len(argv) != len(want) or any(w is not None and a != w for a, w in zip(argv, want)):
        fail(f"{name}: wrapper arguments {argv}, expected {want}")
    der = ssl.PEM_cert_to_DER_cert(open(os.path.join(certs, "server.pem")).read())
    if argv[8] != f'"{hashlib.md5(der).hexdigest().upper()}:"':  # upper-case hex, as openconnect 9.01 prints it
        fail(f"{name}: -certhash {argv[8]} is not the server certificate's MD5 in upper-case hex")
    env = got["env"]
    if env.get("CSD_TOKEN") != TOKEN or env.get("CSD_HOSTNAME") != "127.0.0.1" or not env.get("CSD_SHA256"):
        fail(f"{name}: wrapper environment {env}")
    if saw != {"init": 1, "wait_with_token": 2, "wait_without_token": 0, "init_with_token": 1, "auth": 1}:
        fail(f"{name}: not init, the wait page twice with sdesktop=TOKEN, the init again, the password: {saw}")

if __name__ == "__main__":
    main()
