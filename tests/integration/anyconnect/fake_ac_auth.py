#!/usr/bin/env python3
"""fake_ac_auth.py: an AnyConnect aggregate-auth responder with a <select> inside a form.

ocserv cannot send a form whose select is not the group list, so this small HTTPS peer
(Python stdlib, written from the protocol notes, shares no code with espvpn) serves one:

  POST <init>        -> <auth id="main">: username (text), password, select "method"
                        (label "Method:", options push|sms|phone, labels "Duo Push",
                        "SMS passcode", "Phone call")
  POST <auth-reply>  -> user/password wrong: the main form again, "Login failed.";
                        method push|phone: success; sms: <auth id="challenge"> with a
                        password field "answer" (label "Code:"), which a Cisco client sends
                        back as <password> (as openconnect does), wanting the TOTP code of
                        --totp-key (RFC 6238, HMAC-SHA1, 30 s, this step or one either side)
                        or --code; then success (Set-Cookie webvpn=...)

  fake_ac_auth.py --listen HOST:PORT --ready-file F --record F [--totp-key B32] [--code C]
Every auth-reply's fields (passwords as "<n chars>") go to --record (JSON list), so a
test sees what was sent. Loopback only; exits after --max-runtime seconds (60).
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import struct
import sys
import threading
import time
import xml.etree.ElementTree as ET

from ac_xml_peer import XmlHandler, serve_ready, tls_server

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<config-auth client="vpn" type="%s" aggregate-auth-version="2">'
MAIN_FORM = (HEAD % "auth-request") + """<opaque is-for="sg"><tunnel-group>fake</tunnel-group></opaque>
<auth id="main"><title>Login</title><message>%s</message>
<form method="post" action="/auth"><input type="text" name="username" label="Username:" />
<input type="password" name="password" label="Password:" />
<select name="method" label="Method:"><option value="push">Duo Push</option><option value="sms">SMS passcode</option>
<option value="phone">Phone call</option></select></form></auth></config-auth>"""
CHALLENGE_FORM = (HEAD % "auth-request") + """<auth id="challenge"><message>Enter the code sent by SMS.</message>
<form method="post" action="/auth"><input type="password" name="answer" label="Code:" /></form></auth></config-auth>"""
SUCCESS = (HEAD % "complete") + '<auth id="success"><banner>welcome</banner></auth></config-auth>'


def totp_ok(key_b32, got):
    key = base64.b32decode(key_b32 + "=" * (-len(key_b32) % 8))
    step = int(time.time()) // 30
    for d in (-1, 0, 1):
        mac = hmac.new(key, struct.pack(">Q", step + d), hashlib.sha1).digest()
        off = mac[-1] & 15
        if hmac.compare_digest(got, "%06d" % ((struct.unpack(">I", mac[off:off + 4])[0] & 0x7FFFFFFF) % 1000000)):
            return True
    return False


class Handler(XmlHandler):
    def success(self):
        return self.reply(SUCCESS, f"webvpn={secrets.token_hex(16)}; Secure")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        doc = ET.fromstring(self.rfile.read(n))
        cfg = self.server.cfg
        if doc.get("type") == "init":
            return self.reply(MAIN_FORM % "Please log in.")
        auth = doc.find("auth")
        fields = {c.tag: (c.text or "") for c in (auth if auth is not None else [])}
        shown = {k: (f"<{len(v)} chars>" if k in ("password", "answer") else v) for k, v in fields.items()}
        with self.server.lock:
            self.server.record.append(shown)
            with open(cfg.record, "w") as f:
                json.dump(self.server.record, f)
        if "username" not in fields:  # the challenge's answer, as <password> (an <answer> element is not Cisco's)
            code = fields.get("password", "")
            ok = (cfg.totp_key and totp_ok(cfg.totp_key, code)) or (cfg.code and code == cfg.code)
            return self.success() if ok else self.reply(MAIN_FORM % "Login failed.")
        if fields.get("username") != "alice" or fields.get("password") != "secret":
            return self.reply(MAIN_FORM % "Login failed.")
        if fields.get("method") == "sms":
            return self.reply(CHALLENGE_FORM)
        if fields.get("method") in ("push", "phone"):
            return self.success()
        return self.reply(MAIN_FORM % "Login failed.")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--totp-key")
    p.add_argument("--code")
    p.add_argument("--max-runtime", type=float, default=60)
    cfg = p.parse_args()
    host, port = cfg.listen.rsplit(":", 1)
    srv = tls_server(Handler, os.path.join(REPO, "certs"), host, int(port))
    srv.cfg, srv.lock, srv.record = cfg, threading.Lock(), []
    with open(cfg.record, "w") as f:
        json.dump([], f)
    serve_ready(srv, cfg.ready_file, cfg.max_runtime)


if __name__ == "__main__":
    sys.exit(main())
