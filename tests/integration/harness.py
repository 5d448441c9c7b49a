"""The Python side of the integration tests, shared by the suites (one harness instead of tests
importing each other): paths, the check/Failure pair, the fake GP gateway as a context manager,
openconnect --protocol=gp, and espvpn runs measured for exit code, time and peak RSS.

  from harness import REPO, CA, CERTS, Failure, check, Fake, openconnect, run_measured, error_line, resolver,
    in_private_namespaces
(a test puts tests/integration on sys.path first: sys.path.insert(0, <its dir>/..)).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
FAKE = os.path.join(REPO, "tools", "fake-gp-gateway", "fake-gp-gateway")
CA = os.path.join(REPO, "certs", "ca.pem")
OC_TIMEOUT = 30


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)
    print(f"  ok: {what}")


class Fake:
    """One fake-gp-gateway process in a temporary directory."""

    def __init__(self, *args, listeners=1, prefix=()):
        self.dir = tempfile.mkdtemp(prefix="gpfake.")
        self.ready = os.path.join(self.dir, "ready.json")
        self.stats_file = os.path.join(self.dir, "stats.json")
        self.log = os.path.join(self.dir, "fake.log")
        listen = []
        for _ in range(listeners):
            listen += ["--listen", "127.0.0.1:0"]
        cmd = [*prefix, sys.executable, FAKE, *listen, "--ready-file", self.ready, "--stats-file", self.stats_file,
               "--log-file", self.log, "--admin-port", "0", "--max-runtime", "120", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"fake did not start: {cmd}")
            time.sleep(0.05)
        with open(self.ready) as f:
            info = json.load(f)
        self.ports = [l["port"] for l in info["listeners"]]
        self.port = self.ports[0]
        self.admin_port = info["admin_port"]
        self.url = f"https://127.0.0.1:{self.port}/"

    def stats(self):
        with open(self.stats_file) as f:
            return json.load(f)

    def stats_when(self, predicate, seconds=10):
        """The stats once predicate(stats) holds (or after `seconds`: the caller's check then
        fails with what they say). For counts the fake writes after the client is done, e.g.
        at a connection's close or a failed handshake: read at once, they may not be there yet."""
        deadline = time.monotonic() + seconds
        while True:
            s = self.stats()
            if predicate(s) or time.monotonic() > deadline:
                return s
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise Failure("fake ignored SIGTERM for 10 s")
            if rc != 0:
                raise Failure(f"fake exited {rc} on SIGTERM")

    def dump_log(self):
        if os.path.exists(self.log):
            sys.stdout.write("---- fake log ----\n" + open(self.log).read())

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        try:
            if exc_type is not None:
                self.dump_log()
            self.stop()
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            shutil.rmtree(self.dir, ignore_errors=True)


def resolver(hosts_lines, nsswitch="files", nameserver=None, search=()):
    """This namespace's resolver (the caller is in a private mount namespace of its own): /etc/hosts
    with `hosts_lines`, NSS hosts from `nsswitch`, /etc/resolv.conf naming `nameserver` and the
    search domains `search`. Returns the directory of the bound files: a test rewrites one in place
    (same inode) to change what the host sees."""
    d = tempfile.mkdtemp(prefix="gpinternal-etc.")
    files = {
        "hosts": "127.0.0.1 localhost\n::1 localhost\n" + "".join(l + "\n" for l in hosts_lines),
        "nsswitch.conf": f"passwd: files\ngroup: files\nhosts: {nsswitch}\n",
        # One attempt with a long timeout: a resolver left to itself would wait 30 s.
        "resolv.conf": (f"nameserver {nameserver}\noptions timeout:30 attempts:1\n" if nameserver else "") +
                       (f"search {' '.join(search)}\n" if search else ""),
    }
    for name, text in files.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        target = "/etc/" + name
        if not os.path.exists(target):
            open(target, "a").close()  # private mount namespace, but /etc is the host's: only if missing
        subprocess.run(["mount", "--bind", path, target], check=True, timeout=10)
    return d



def in_private_namespaces(marker_env, timeout):
    """For a test that needs resolver(): None when this process already runs in fresh mount and
    network namespaces (loopback up); otherwise runs this script again in them and returns its
    exit code (the bind mounts, the namespace's listeners and routes die with them)."""
    if os.environ.get(marker_env) == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
        return None
    env = dict(os.environ, **{marker_env: "1"})
    return subprocess.run(["unshare", "--mount", "--net", "--propagation", "private", "--", sys.executable,
                           os.path.realpath(sys.argv[0]), *sys.argv[1:]], env=env, timeout=timeout).returncode


def openconnect(url, args, stdin="", timeout=OC_TIMEOUT):
    cmd = ["openconnect", "--protocol=gp", "--cafile", CA, *args, url]
    print("  $ " + " ".join(cmd))
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
    print("  openconnect exit", r.returncode)
    return r


CERTS = os.path.join(REPO, "certs")


def is_asan(binary):
    """An AddressSanitizer build (its freed memory sits in quarantine: RSS bounds are looser)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def run_measured(cmd, stdin="", timeout=40):
    """cmd (a list) under GNU time; returns (returncode, stdout, stderr, seconds, peak RSS in MiB).
    Killed (its whole process group) and a Failure after timeout seconds. Peak RSS through GNU
    time: a child's ru_maxrss starts from its parent's RSS at exec (Linux keeps the old mm's
    high-water mark), so measured from here it would include this Python process's own memory."""
    rss_file = tempfile.NamedTemporaryFile(prefix="espvpn-rss-", delete=False)
    rss_file.close()
    timed = ["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file.name, *cmd]
    start = time.monotonic()
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(timed, stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True)
        try:
            proc.stdin.write(stdin.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # time and espvpn
            proc.wait()
            os.unlink(rss_file.name)
            raise Failure(f"still running after {timeout} s: {' '.join(cmd)}")
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    took = time.monotonic() - start
    with open(rss_file.name) as f:
        rss_lines = f.read().split()
    os.unlink(rss_file.name)
    if not rss_lines or not rss_lines[-1].isdigit():
        raise Failure(f"GNU time gave no peak RSS for: {' '.join(cmd)}")
    return proc.returncode, stdout, stderr, took, int(rss_lines[-1]) / 1024


def error_line(stderr):
    """The first "error: " line of espvpn's output ("" if none)."""
    m = re.search(r"^.*error: .*$", stderr, re.M)
    return m.group(0) if m else ""
