#!/usr/bin/env python3
"""fake_ac_asa.py: an AnyConnect login as Cisco ASAs run it where ocserv cannot show it.

A small HTTPS peer (Python stdlib, written from Cisco's and openconnect's documented behaviour,
shares no code with espvpn) for issue 42 items 0 and 1:

  POST <init>            -> --cert request|insist: <client-cert-request/> and no <auth> (the TLS
                            handshake asks for no certificate, as on an ASA where certificates are
                            optional); an init carrying <client-cert-fail/> then gets the form
                            (request) or the certificate request again (insist)
                         -> otherwise, and after <client-cert-fail/>: <auth id="main"> with an
                            <opaque> (tunnel-group ASA), username and password, a form with no
                            action (Cisco's forms often omit it)
  POST <auth-reply>      -> every reply must echo the opaque's tunnel-group, else <error>;
                            alice/Pw-7x9q: <auth id="challenge"> (no opaque in it), a password
                            field "answer" wanting --code; then "complete"
  complete               -> --cookie token: <session-token> and no Set-Cookie (an independent
                            AnyConnect server's way); both: <session-token> and a different
                            Set-Cookie webvpn; header: Set-Cookie webvpn only; bad: a token with
                            a ';' in it

  fake_ac_asa.py --ready-file F --record F [--cert request|insist] [--cookie token|both|header|bad]
Every request goes to --record (JSON list: path, type, client-cert-fail, the TCP connection's
client port, the opaque's tunnel-group, the fields with passwords as "<n chars>"; a complete adds
the token and header cookie it issued; the init's group-access, the aggregate-auth-version
attribute, the X-Transcend-Version and X-Aggregate-Auth headers). Loopback only; exits after --max-runtime seconds (60).
"""
import argparse
import json
import os
import secrets
import sys
import threading
import xml.etree.ElementTree as ET

from ac_xml_peer import XmlHandler, serve_ready, tls_server

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<config-auth client="vpn" type="%s" aggregate-auth-version="2">'
CERT_REQUEST = (HEAD % "auth-request") + "<client-cert-request></client-cert-request></config-auth>"
OPAQUE = '<opaque is-for="sg"><tunnel-group>ASA</tunnel-group><config-hash>1595829378234</config-hash></opaque>'
MAIN_FORM = (HEAD % "auth-request") + OPAQUE + """<auth id="main"><title>Login</title><message>%s</message>
<form><input type="text" name="username" label="Username:" />
<input type="password" name="password" label="Password:" /></form></auth></config-auth>"""
CHALLENGE_FORM = (HEAD % "auth-request") + """<auth id="challenge"><message>Enter the code.</message>
<form><input type="password" name="answer" label="Code:" /></form></auth></config-auth>"""
NO_OPAQUE = (HEAD % "auth-request") + OPAQUE + """<auth id="main"><title>Login</title>
<error id="91" param1="" param2="">The request lacks the tunnel group (opaque)</error>
<form><input type="text" name="username" label="Username:" />
<input type="password" name="password" label="Password:" /></form></auth></config-auth>"""
COMPLETE = (HEAD % "complete") + """<session-id>24576</session-id>%s
<auth id="success"><message id="0" param1="" param2=""></message><banner>ASA welcome</banner></auth>
<capabilities><crypto-supported>ssl-dhe</crypto-supported></capabilities></config-auth>"""


class Handler(XmlHandler):
    def record(self, entry):
        with self.server.lock:
            self.server.record.append(entry)
            with open(self.server.cfg.record, "w") as f:
                json.dump(self.server.record, f)

    def do_POST(self):
        cfg = self.server.cfg
        n = int(self.headers.get("Content-Length", "0"))
        doc = ET.fromstring(self.rfile.read(n))
        auth = doc.find("auth")
        fields = {c.tag: (c.text or "") for c in (auth if auth is not None else [])}
        entry = {"path": self.path, "type": doc.get("type"), "cert_fail": doc.find("client-cert-fail") is not None,
                 "conn": self.client_address[1], "opaque": doc.findtext("opaque/tunnel-group") or "",
                 "fields": {k: (f"<{len(v)} chars>" if k == "password" else v) for k, v in fields.items()},
                 # What every request carries (compared with openconnect's by the test):
                 "group_access": doc.findtext("group-access") or "", "version": doc.get("aggregate-auth-version"),
                 "headers": [self.headers.get(h, "-") for h in ("X-Transcend-Version", "X-Aggregate-Auth")]}
        if doc.get("type") == "init":
            self.record(entry)
            if cfg.cert == "insist" or (cfg.cert == "request" and not entry["cert_fail"]):
                return self.reply(CERT_REQUEST)
            return self.reply(MAIN_FORM % "Please enter your username and password.")
        if entry["opaque"] != "ASA":
            self.record(entry)
            return self.reply(NO_OPAQUE)
        if "username" in fields:
            self.record(entry)
            if fields["username"] == "alice" and fields.get("password") == "Pw-7x9q":
                return self.reply(CHALLENGE_FORM)
            return self.reply(MAIN_FORM % "Login failed.")
        if fields.get("password") != cfg.code:
            self.record(entry)
            return self.reply(MAIN_FORM % "Login failed.")
        token = secrets.token_hex(16).upper() + "@24576@" + secrets.token_hex(2).upper()
        header = secrets.token_hex(16)
        if cfg.cookie == "bad":
            token = token[:8] + ";" + token[8:]
        entry.update(token=token if cfg.cookie != "header" else "", header=header if cfg.cookie in ("both", "header") else "")
        self.record(entry)
        element = f"<session-token>{token}</session-token>" if cfg.cookie != "header" else ""
        return self.reply(COMPLETE % element, f"webvpn={header}; path=/; Secure" if entry["header"] else None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--cert", choices=("none", "request", "insist"), default="none")
    p.add_argument("--cookie", choices=("token", "both", "header", "bad"), default="token")
    p.add_argument("--code", default="424242")
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
