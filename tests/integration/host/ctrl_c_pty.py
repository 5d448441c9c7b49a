#!/usr/bin/env python3
"""A terminal's Ctrl-C during a login: runs COMMAND on a new pseudo-terminal (its own
session, the terminal's foreground process group), waits for PROMPT in its output, types
Ctrl-C (the kernel sends SIGINT to the whole foreground group, as a real terminal does), and
reads until the terminal closes (every process that had it is gone). Writes the transcript to
TRANSCRIPT and prints "exit N" or "signal N" for COMMAND's own end, then "echo on" or
"echo off": the terminal's echo setting left behind.

  ctrl_c_pty.py TRANSCRIPT PROMPT COMMAND...
"""
import os
import pty
import select
import sys
import termios
import time


def main():
    transcript, prompt, argv = sys.argv[1], sys.argv[2].encode(), sys.argv[3:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    out = b""
    typed = False
    deadline = time.monotonic() + 60
    status = None
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            out += chunk
        if not typed and prompt in out:
            os.write(fd, b"\x03")
            typed = True
            deadline = time.monotonic() + 30  # every process ends within 30 s of it
        if status is None:
            got, st = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                status = st
    if status is None:
        got, st = os.waitpid(pid, os.WNOHANG)
        if got != pid:
            os.kill(pid, 9)
            got, st = os.waitpid(pid, 0)
        status = st
    try:
        echo = "echo on" if termios.tcgetattr(fd)[3] & termios.ECHO else "echo off"
    except termios.error:
        echo = "echo unknown"
    with open(transcript, "wb") as f:
        f.write(out)
    if not typed:
        print("no prompt")
    elif os.WIFEXITED(status):
        print("exit %d" % os.WEXITSTATUS(status))
    else:
        print("signal %d" % os.WTERMSIG(status))
    print(echo)


main()
