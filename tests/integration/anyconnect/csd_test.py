#!/usr/bin/env python3
"""espvpn --protocol=anyconnect and a server that asks for a CSD host scan.

A small AnyConnect login server on loopback (Python's http.server over TLS, no
code shared with the client) answers the init POST with a <host-scan> request,
then wants the wait page fetched with the host scan's token as the "sdesktop"
cookie before it shows the password form. The --csd-wrapper records its
arguments and environment; they must be openconnect's (auth.c run_csd_script).

  csd_test.py ESPVPN_BIN CERTS_DIR wrapper|invoker|csd_user|no_wrapper
  wrapper:    --authenticate runs the wrapper once with openconnect's arguments
              and CSD_TOKEN/CSD_HOSTNAME/CSD_SHA256, the wait page comes with
              sdesktop=TOKEN, the login completes (COOKIE printed), exit 0; espvpn
              is root and nobody invoked it: the wrapper ran as nobody, and the log
              says so
  invoker:    the same with SUDO_UID (the user "daemon"): the wrapper ran as that
              user, not as root (it handles the server's data)
  csd_user:   SUDO_UID and --csd-user=nobody: --csd-user wins
  no_wrapper: the same server without --csd-wrapper: exit 1, the error names
              --csd-wrapper, no cookie printed
"""
import json
import os
import pwd
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
DONE = """<?xml version="1.0" encoding="UTF-8"?>
<config-auth client="vpn" type="complete" aggregate-auth-version="2">
<auth id="success"><message>Success</message></auth></config-auth>"""

seen = {"init": 0, "wait_with_token": 0, "wait_without_token": 0, "auth": 0}


class Handler(XmlHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        if self.path == "/auth" and "<password>secret</password>" in body:
            seen["auth"] += 1
            self.reply(DONE, "webvpn=CSDTESTCOOKIE; Secure")
        else:
            seen["init"] += 1
            self.reply(HOST_SCAN)

    def do_GET(self):
        if self.path == "/+CSCOE+/sdesktop/wait.html":
            key = "wait_with_token" if f"sdesktop={TOKEN}" in self.headers.get("Cookie", "") else "wait_without_token"
            seen[key] += 1
            self.reply(FORM)
        else:
            self.send_error(404)


def main():
    espvpn, certs, mode = sys.argv[1:4]
    server = tls_server(Handler, certs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    if mode in ("invoker", "csd_user") and os.geteuid() != 0:
        print(f"SKIP {mode}: needs root")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="csd-test.")
    os.chmod(work, 0o777)  # the wrapper may run as another user and records its run here
    record = os.path.join(work, "wrapper.json")
    wrapper = os.path.join(work, "csd-wrapper")
    with open(wrapper, "w") as f:
        f.write("#!/usr/bin/env python3\nimport json, os, sys\n"
                f"json.dump({{'argv': sys.argv[1:], 'uid': os.getuid(), 'gid': os.getgid(), "
                f"'env': {{k: v for k, v in os.environ.items() if k.startswith('CSD_')}}}}, open({record!r}, 'w'))\n")
    os.chmod(wrapper, 0o755)
    args = [espvpn, "--protocol=anyconnect", "--authenticate", "--cafile", os.path.join(certs, "ca.pem"),
            "-u", "alice", "--passwd-on-stdin", f"https://127.0.0.1:{port}/"]
    env = {k: v for k, v in os.environ.items() if k not in ("SUDO_UID", "SUDO_GID", "SUDO_USER", "PKEXEC_UID")}
    nobody, daemon = pwd.getpwnam("nobody"), pwd.getpwnam("daemon")
    want_uid = os.geteuid()
    if mode != "no_wrapper":
        args[2:2] = ["--csd-wrapper", wrapper]
        if os.geteuid() == 0:
            want_uid = nobody.pw_uid
    if mode in ("invoker", "csd_user"):
        env["SUDO_UID"] = str(daemon.pw_uid)
        want_uid = daemon.pw_uid
    if mode == "csd_user":
        args[2:2] = ["--csd-user=nobody"]
        want_uid = nobody.pw_uid
    r = subprocess.run(args, input="secret\n", capture_output=True, text=True, timeout=60, env=env)
    server.shutdown()

    def fail(why):
        print(f"FAIL {mode}: {why}\nexit {r.returncode}\nstdout: {r.stdout}\nstderr: {r.stderr}\nserver saw: {seen}")
        sys.exit(1)

    if mode == "no_wrapper":
        if r.returncode != 1: fail("expected exit 1")
        if "--csd-wrapper" not in r.stderr: fail("the error does not name --csd-wrapper")
        if "COOKIE=" in r.stdout: fail("a cookie was printed")
        if os.path.exists(record): fail("something ran the wrapper")
        print(f"PASS no_wrapper: exit 1, {r.stderr.strip().splitlines()[-1]}")
        return
    if r.returncode != 0: fail("expected exit 0")
    if "COOKIE='webvpn=CSDTESTCOOKIE'" not in r.stdout and "COOKIE='CSDTESTCOOKIE'" not in r.stdout:
        fail("no COOKIE line with the server's webvpn cookie")
    if not os.path.exists(record): fail("the wrapper did not run")
    got = json.load(open(record))
    if got["uid"] != want_uid: fail(f"the wrapper ran as uid {got['uid']}, expected {want_uid}")
    if mode == "wrapper" and os.geteuid() == 0 and "--csd-wrapper runs as nobody" not in r.stderr:
        fail("the log does not say the wrapper runs as nobody")
    argv = got["argv"]
    want = ["", "-ticket", f'"{TICKET}"', "-stub", '"0"', "-group", '""', "-certhash", None, "-url",
            f'"https://127.0.0.1/+CSCOE+/sdesktop/token.xml"', "-langselen"]
    if len(argv) != len(want) or any(w is not None and a != w for a, w in zip(argv, want)):
        fail(f"wrapper arguments {argv}, expected {want}")
    der = ssl.PEM_cert_to_DER_cert(open(os.path.join(certs, "server.pem")).read())
    import hashlib
    if argv[8] != f'"{hashlib.md5(der).hexdigest()}:"': fail(f"-certhash {argv[8]} is not the server certificate's MD5")
    env = got["env"]
    if env.get("CSD_TOKEN") != TOKEN or env.get("CSD_HOSTNAME") != "127.0.0.1" or not env.get("CSD_SHA256"):
        fail(f"wrapper environment {env}")
    if seen["wait_with_token"] != 1 or seen["wait_without_token"] != 0 or seen["auth"] != 1:
        fail("the wait page was not fetched once with sdesktop=TOKEN before the password")
    print(f"PASS {mode}: ran as uid {got['uid']} with {' '.join(argv)}; CSD_TOKEN/CSD_HOSTNAME/CSD_SHA256 set; "
          "wait page with sdesktop; cookie printed")


if __name__ == "__main__":
    main()
