#!/usr/bin/env python3
"""Client keys on a PKCS#11 token (issue 42 item 5): espvpn --protocol=gp against
tools/fake-gp-gateway in certificate-only mode, the key and certificate on a real
SoftHSM2 token (made by make_softhsm_token.sh in a temporary directory, reached
through p11-kit's softhsm2.module as on a user's machine), or in a software TPM
(swtpm) through tpm2-pkcs11 (gp_tpm2).

  token_test.py ESPVPN CASE      (CASE = one of CASES below; "list" prints them)

Loopback only, ephemeral ports, every process bounded in time. Exit 0 = pass,
1 = fail, 77 = skipped (no SoftHSM2; gp_tpm2: no swtpm/tpm2-pkcs11). The AnyConnect side (ocserv with
auth = "certificate") is ac_ocserv.sh's mode cert_token.
"""

import os
import pty
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from harness import CA, Failure, Fake, check  # noqa: E402  (shared harness)

ESPVPN = None
PIN = "4711-right"
WRONG = "9999-wrong"
URI = "pkcs11:token=espvpn-test;object=client"
# tpm2-pkcs11, when installed, is a p11-kit module too: quiet its "no TPM here" lines.
os.environ["TSS2_LOG"] = "all+NONE"
os.environ["TPM2_PKCS11_LOG_LEVEL"] = "0"


def make_token(d):
    r = subprocess.run([os.path.join(HERE, "make_softhsm_token.sh"), d, PIN], capture_output=True, text=True,
                       timeout=60)
    if r.returncode == 77:
        print(r.stdout)
        return 77
    check(r.returncode == 0, f"SoftHSM2 token made ({r.stdout}{r.stderr})")
    os.environ["SOFTHSM2_CONF"] = os.path.join(d, "softhsm2.conf")
    return 0


def run(cmd, stdin=""):
    print("  $ " + " ".join(shlex.quote(c) for c in cmd))
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=40)
    print(f"  exit {r.returncode}")
    return r


def espvpn(url, args, stdin=""):
    return run([ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway", *args, url],
               stdin)


def show(r):
    sys.stdout.write("  ---- stdout ----\n" + r.stdout + "  ---- stderr ----\n" + r.stderr)


def no_pin_in(r, what):
    for pin in (PIN, WRONG):
        check(pin not in r.stdout and pin not in r.stderr, f"{what}: no PIN in stdout or stderr")


def logged_in_by_cert(f, r, what):
    if r.returncode != 0:
        show(r)
    s = f.stats()
    check(r.returncode == 0 and "COOKIE=" in r.stdout, f"{what}: exit 0, a cookie")
    check(s["login_via"] == {"client-certificate": 1} and s["client_certs"],
          f"{what}: the gateway logged in by the token's certificate ({s['client_certs'][:1]})")


def case_gp_softhsm():
    with tempfile.TemporaryDirectory(prefix="espvpn-token.") as d:
        if make_token(d) == 77:
            return 77
        # 1. The PIN in the URI, as -p, as a line of standard input: logged in, the PIN nowhere.
        for what, args, stdin in (("pin-value in the URI", ["-c", f"{URI}?pin-value={PIN}", "--non-inter", "-v"], ""),
                                  ("-p PIN", ["-c", URI, "-p", PIN, "--non-inter", "-v"], ""),
                                  ("the PIN on stdin", ["-c", URI, "-v"], PIN + "\n"),
                                  ("type=cert URI, key found as type=private", ["-c", f"{URI};type=cert", "-p", PIN], "")):
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = espvpn(f.url, args, stdin)
                logged_in_by_cert(f, r, what)
                no_pin_in(r, what)
        # 2. A wrong PIN (in the URI, or -p): a clear error, exit 1, no login, the PIN in no output.
        for what, args in (("wrong pin-value", ["-c", f"{URI}?pin-value={WRONG}", "-vv"]),
                           ("wrong -p", ["-c", URI, "-p", WRONG, "-vv"])):
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = espvpn(f.url, args)
                show(r)
                check(r.returncode == 1 and "the token refused the PIN" in r.stderr, f"{what}: exit 1, a clear error")
                check("COOKIE=" not in r.stdout and f.stats()["login_via"] == {}, f"{what}: no login")
                check(URI in r.stderr, f"{what}: the error names the URI (without its PIN)")
                no_pin_in(r, what)
        # The token still takes the right PIN: the wrong ones above were one try each, not a loop
        # that would have locked it (SoftHSM2 locks no PIN; a smart card would).
        # 3. No PIN anywhere and nobody to ask: exit 1, naming -p; no login tried.
        r = espvpn("https://127.0.0.1:9/", ["-c", URI, "--non-inter"])
        check(r.returncode == 1 and "needs its PIN (-p/--key-password)" in r.stderr and "--non-inter" in r.stderr,
              "no PIN with --non-inter: exit 1, the error names -p/--key-password")
        # 4. openconnect 9.01, same token and URI (it reaches tokens through p11-kit too). It shows
        # the gateway's login form even when the certificate suffices: a user name and any password.
        if shutil.which("openconnect"):
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = run(["openconnect", "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway",
                         "-u", "testuser", "--passwd-on-stdin", "-c", f"{URI}?pin-value={PIN}", f.url], "unused\n")
                if r.returncode != 0:
                    show(r)
                check(r.returncode == 0 and "COOKIE=" in r.stdout and f.stats()["login_via"] == {"client-certificate": 1},
                      "openconnect 9.01 logs in with the same URI (the reference)")
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = run(["openconnect", "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway",
                         "-u", "testuser", "--passwd-on-stdin", "-c", f"{URI}?pin-value={WRONG}", f.url], "unused\n")
                print("  openconnect with a wrong PIN: exit %d, %s" % (r.returncode, r.stderr.strip().splitlines()[-1:]))
                check(r.returncode != 0, "openconnect refuses a wrong PIN too")


def case_tty_pin():
    """No PIN in the URI, on a terminal: 'Enter PIN for ...' with echo off, the typed PIN logs in."""
    with tempfile.TemporaryDirectory(prefix="espvpn-token.") as d:
        if make_token(d) == 77:
            return 77
        with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
            cmd = [ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway", "-c", URI, f.url]
            print("  $ (on a pty) " + " ".join(cmd))
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(cmd[0], cmd)
            out = b""
            echo_at_pin = None
            sent = False
            deadline = time.monotonic() + 20
            try:
                while time.monotonic() < deadline:
                    ready, _, _ = select.select([fd], [], [], 0.2)
                    if ready:
                        try:
                            chunk = os.read(fd, 4096)
                        except OSError:
                            break
                        if not chunk:
                            break
                        out += chunk
                    if not sent and b"Enter PIN for" in out:
                        echo_at_pin = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
                        os.write(fd, PIN.encode() + b"\n")
                        sent = True
            finally:
                end = time.monotonic() + 5
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done or time.monotonic() > end:
                        break
                    time.sleep(0.05)
                if not done:
                    os.kill(pid, signal.SIGKILL)
                    _, status = os.waitpid(pid, 0)
                os.close(fd)
            text = out.decode(errors="replace")
            print("  ---- pty transcript ----\n" + text.replace("\r", ""))
            check(sent, "asked 'Enter PIN for pkcs11:token=espvpn-test;object=client:' on the terminal")
            check(echo_at_pin is False, "echo was off while the PIN was typed")
            check(PIN not in text, "the PIN never appeared on the terminal")
            check(os.WEXITSTATUS(status) == 0 and "COOKIE=" in text and
                  f.stats()["login_via"] == {"client-certificate": 1}, "the typed PIN opened the token: logged in")


def prompt_agent(sock, answers, seconds):
    """The login window's side of --prompt-fd: each record line read, each 'ask' answered with
    the next of `answers` ("=VALUE" lines), until espvpn closes the channel. The records seen."""
    records, buf = [], b""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if not ready:
            continue
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            fields = line.decode().split("\t")
            records.append(fields)
            if fields[0] == "ask":
                sock.sendall((answers.pop(0) if answers else "cancel").encode() + b"\n")
    return records


def case_prompt_channel_pin():
    """The PIN through the NetworkManager login window's channel (espvpn --authenticate --prompt-fd, a
    fake agent on the socket): a password field of form 'token' labelled with the token's label; a
    wrong PIN comes back as an error record and the same field again (one token login each); the
    right one logs in; no PIN in any output. Then the window's Cancel at the PIN: exit 1, no login."""
    import socket
    with tempfile.TemporaryDirectory(prefix="espvpn-token.") as d:
        if make_token(d) == 77:
            return 77
        for what, answers in (("wrong then right", ["=" + WRONG, "=" + PIN]), ("cancel", ["cancel"])):
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                ours, theirs = socket.socketpair()
                cmd = [ESPVPN, "--protocol=gp", "--cafile", CA, "--authenticate", "--usergroup", "gateway",
                       "-c", URI, f"--prompt-fd={theirs.fileno()}", "-vv", f.url]
                print(f"  $ {' '.join(cmd)}   ({what})")
                p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     pass_fds=(theirs.fileno(),))
                theirs.close()
                records = prompt_agent(ours, answers, 30)
                out, err = p.communicate(timeout=30)
                ours.close()
                r = subprocess.CompletedProcess(cmd, p.returncode, out, err)
                print(f"  exit {r.returncode}; records: {records}")
                asks = [x for x in records if x[0] == "ask"]
                check(asks and all(x[1:4] == ["token", "pin", "password"] for x in asks),
                      f"{what}: the PIN asked as a password field of form 'token' ({asks[:1]})")
                check("espvpn-test" in asks[0][4] and URI in asks[0][4],
                      f"{what}: the prompt names the token's label and the key ({asks[0][4]!r})")
                no_pin_in(r, what)
                check(all(PIN not in "\t".join(x) and WRONG not in "\t".join(x) for x in records),
                      f"{what}: no PIN in any record")
                if what == "cancel":
                    check(r.returncode == 1 and len(asks) == 1 and "cancelled" in r.stderr and
                          f.stats()["login_via"] == {}, "cancel: exit 1, asked once, no login")
                    continue
                errors = [x for x in records if x[0] == "error"]
                check([x[0] for x in records] == ["ask", "error", "ask"],
                      "a wrong PIN: an error record, then the PIN asked again")
                check("Wrong PIN" in errors[0][1] and "espvpn-test" in errors[0][1],
                      f"the error says the token refused it ({errors[0][1]!r})")
                logged_in_by_cert(f, r, "the right PIN after a wrong one")


def case_tss2_key():
    """A TPM2 key file (-----BEGIN TSS2 PRIVATE KEY-----, what openconnect loads through its tpm2 code):
    Debian 12's GnuTLS 3.7.9 has no TPM support, so espvpn says so and names the way that works (a
    tpm2-pkcs11 URI): exit 1, before any connection; a tpmkey: URL (TPM 1.2) likewise."""
    with tempfile.TemporaryDirectory(prefix="espvpn-tss2.") as d:
        key = os.path.join(d, "tpm.key")
        with open(key, "w") as f:  # the shape of tpm2-tss-engine's files; its content never reaches a TPM
            f.write("-----BEGIN TSS2 PRIVATE KEY-----\nMIIBAAYGZ4EFCgEDoAMBAQECBQCAAAAB\n-----END TSS2 PRIVATE KEY-----\n")
        cert = os.path.join(HERE, "..", "..", "..", "certs", "client.pem")
        for what, args in (("-c CERT -k TSS2", ["-c", cert, "-k", key]),
                           ("-c tpmkey:", ["-c", "tpmkey:file=" + key])):
            r = run([ESPVPN, "--protocol=gp", "--authenticate", "--non-inter", *args, "https://127.0.0.1:9/"])
            show(r)
            expect = "TSS2 key files are not supported" if "TSS2" in what else "TPM 1.2 keys (tpmkey:) are not supported"
            check(r.returncode == 1 and expect in r.stderr and "use a tpm2-pkcs11 URI" in r.stderr,
                  f"{what}: exit 1, '{expect}', the tpm2-pkcs11 URI named")


def free_port_pair():
    """A free loopback TCP port P with P+1 free too (the swtpm TCTI finds the control port at P+1)."""
    import socket
    for _ in range(20):
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise Failure("no two free adjacent loopback ports")


def socket_open(port):
    import socket
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_until(fn, seconds, what):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if fn():
            return
        time.sleep(0.1)
    raise Failure(f"{what}: not within {seconds} s")


# espvpn run by root opens PKCS#11 tokens in its session process, which runs as nobody here
# (espvpn(8) PRIVILEGE SPLIT): the TPM's private bus, its resource manager and the token store
# are nobody's, as a user's own would be theirs.
AS_TOKEN_USER = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if os.geteuid() == 0 else []


def lockout_counter():
    r = subprocess.run([*AS_TOKEN_USER, "tpm2_getcap", "properties-variable"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0, "tpm2_getcap properties-variable")
    lines = r.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("TPM2_PT_LOCKOUT_COUNTER"):
            value = line.split(":", 1)[1].strip() or lines[i + 1].split(":", 1)[1].strip()
            return int(value, 0)
    raise Failure("no TPM2_PT_LOCKOUT_COUNTER in tpm2_getcap's answer")


def case_gp_tpm2():
    """The key in a (software) TPM 2.0 through tpm2-pkcs11, the same path as any PKCS#11 token:
    swtpm on loopback, tpm2-abrmd on a private D-Bus (swtpm has no resource manager of its own),
    tpm2_ptool importing certs/client-key.pem under a token PIN."""
    tools = ["swtpm", "tpm2-abrmd", "tpm2_ptool", "tpm2_getcap", "dbus-daemon"]
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        print(f"SKIP: missing {missing} (swtpm, tpm2-abrmd, libtpm2-pkcs11-tools, tpm2-tools, dbus-daemon)")
        return 77
    procs = []
    with tempfile.TemporaryDirectory(prefix="espvpn-tpm.") as d:
        try:
            t0 = time.monotonic()
            os.mkdir(os.path.join(d, "state"))
            os.mkdir(os.path.join(d, "store"))
            os.mkdir(os.path.join(d, "run"))
            if AS_TOKEN_USER:
                os.chmod(d, 0o755)
                for sub in ("store", "run"):
                    shutil.chown(os.path.join(d, sub), "nobody")
            port = free_port_pair()
            ctrl = port + 1
            procs.append(subprocess.Popen(
                ["swtpm", "socket", "--tpm2", "--tpmstate", f"dir={d}/state", "--flags", "not-need-init,startup-clear",
                 "--server", f"type=tcp,port={port},bindaddr=127.0.0.1",
                 "--ctrl", f"type=tcp,port={ctrl},bindaddr=127.0.0.1"], stdout=subprocess.DEVNULL))
            bus = subprocess.Popen([*AS_TOKEN_USER, "dbus-daemon", "--session", "--nofork", "--print-address=1",
                                    f"--address=unix:path={d}/run/bus"], stdout=subprocess.PIPE, text=True)
            procs.append(bus)
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus.stdout.readline().strip()
            abrmd = [*AS_TOKEN_USER, "tpm2-abrmd", "--session", f"--tcti=swtpm:host=127.0.0.1,port={port}"]
            wait_until(lambda: socket_open(port), 10, "swtpm listening")
            procs.append(subprocess.Popen(abrmd, stdout=subprocess.DEVNULL, stderr=open(f"{d}/abrmd.log", "w")))
            tcti = "tabrmd:bus_type=session"
            os.environ.update(TPM2TOOLS_TCTI=tcti, TPM2_PKCS11_TCTI=tcti, TPM2_PKCS11_STORE=f"{d}/store")
            try:
                wait_until(lambda: subprocess.run([*AS_TOKEN_USER, "tpm2_getcap", "properties-fixed"], capture_output=True,
                                                  timeout=5).returncode == 0, 10, "swtpm + tpm2-abrmd up")
            except Failure:
                print(open(f"{d}/abrmd.log").read())
                print(subprocess.run([*AS_TOKEN_USER, "tpm2_getcap", "properties-fixed"], capture_output=True, text=True).stderr)
                raise
            key = os.path.join(d, "key.pem")
            with open(os.path.join(HERE, "..", "..", "..", "certs", "client-key.pem")) as f:
                text = f.read()
            with open(key, "w") as f:
                f.write(text[text.index("-----BEGIN"):])
            if AS_TOKEN_USER:
                shutil.chown(key, "nobody")
            store = ["--path", f"{d}/store"]
            for cmd in (["init"], ["addtoken", "--pid", "1", "--sopin", "0000", "--userpin", PIN, "--label", "espvpn-tpm"],
                        ["import", "--algorithm", "rsa", "--privkey", key, "--key-label", "client", "--userpin", PIN,
                         "--label", "espvpn-tpm"],
                        ["addcert", "--label", "espvpn-tpm", "--key-label", "client",
                         os.path.join(os.path.dirname(CA), "client.pem")]):
                r = subprocess.run([*AS_TOKEN_USER, "tpm2_ptool", *cmd, *store], capture_output=True, text=True, timeout=60)
                check(r.returncode == 0, f"tpm2_ptool {cmd[0]} ({r.stderr.strip()[-300:]})")
            os.unlink(key)
            print(f"  TPM token ready in {time.monotonic() - t0:.1f} s")
            uri = "pkcs11:token=espvpn-tpm;object=client"
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = espvpn(f.url, ["-c", uri, "-p", PIN, "--non-inter", "-v"])
                logged_in_by_cert(f, r, "TPM2 key, right PIN")
                no_pin_in(r, "TPM2 key, right PIN")
            before = lockout_counter()
            with Fake("--cert-only-login", "--client-ca", CA, "--require-client-cert") as f:
                r = espvpn(f.url, ["-c", uri, "-p", WRONG, "-vv"])
                show(r)
                check(r.returncode == 1 and f"client certificate {uri}: the token refused the PIN" in r.stderr,
                      "TPM2 key, wrong PIN: exit 1, a clear error")
                check(f.stats()["login_via"] == {}, "TPM2 key, wrong PIN: no login")
                no_pin_in(r, "TPM2 key, wrong PIN")
            # The TPM counts refused authorisations (dictionary-attack lockout): exactly one try was made.
            after = lockout_counter()
            print(f"  TPM2_PT_LOCKOUT_COUNTER: {before} -> {after}")
            check(after == before + 1, "the wrong PIN was tried once: the TPM's lockout counter rose by 1")
        finally:
            for p in reversed(procs):
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}


def main():
    global ESPVPN
    if len(sys.argv) == 2 and sys.argv[1] == "list":
        print("\n".join(CASES))
        return 0
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(f"usage: {sys.argv[0]} ESPVPN CASE  (CASE: {', '.join(CASES)})")
        return 1
    ESPVPN = os.path.abspath(sys.argv[1])
    name = sys.argv[2]
    print(f"== {name}")
    try:
        rc = CASES[name]()
    except Failure as e:
        print(f"FAIL {name}: {e}")
        return 1
    if rc == 77:
        return 77
    print(f"PASS {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
