#!/usr/bin/env python3
"""acs_pages.py: GlobalProtect-style SAML ends for the driven-browser tests, on loopback HTTPS.
Python stdlib, written from the protocol notes (what PAN-OS's ACS answers), shares no code with espvpn.

Two host names (the test maps *.espvpn.test to 127.0.0.1 in Chromium's --host-resolver-rules);
certs/server.pem covers them. --secret S makes every proof cookie "S-<path name>".
  gp.espvpn.test
    GET  /start/NAME     -> 302 to idp.espvpn.test/idp?next=NAME (the redirect across two hosts)
    GET  /acs-headers    -> 200, saml-auth-status: 1, saml-username: alice, prelogin-cookie (headers)
    GET  /acs-comment    -> 200, the result only inside an HTML comment of the body
    GET  /acs-split      -> 200, saml-auth-status and saml-username as headers, the cookie only in the body
    POST /acs-post       -> 200 with the headers (the GP POST binding: SAMLResponse posted by a form)
    GET  /callback       -> a page whose script goes to globalprotectcallback:<base64 of an ACS body>
    GET  /never          -> a page that never finishes a login
  idp.espvpn.test
    GET  /idp?next=NAME  -> a page whose JavaScript sends the browser on to gp.espvpn.test/acs-NAME
  acs_pages.py --ready-file F --secret S [--max-runtime S]
"""
import argparse
import base64
import http.server
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "anyconnect"))
from ac_xml_peer import serve_ready, tls_server  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
GP, IDP = "gp.espvpn.test", "idp.espvpn.test"


def acs_xml(cookie):
    return ("<saml-auth-status>1</saml-auth-status><saml-username>alice</saml-username>"
            f"<prelogin-cookie>{cookie}</prelogin-cookie><saml-slo>no</saml-slo>")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body="", headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def port(self):
        return self.server.server_address[1]

    def secret(self, name):
        return f"{self.server.cfg.secret}-{name}"

    def saml_headers(self, name, with_cookie=True):
        h = [("saml-auth-status", "1"), ("saml-username", "alice"), ("saml-slo", "no")]
        if with_cookie:
            h.append(("prelogin-cookie", self.secret(name)))
        return h

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        host = (self.headers.get("Host") or "").split(":")[0].lower()
        if host == IDP and url.path == "/idp":
            nxt = urllib.parse.quote(q.get("next", ""))
            return self.send(200, "<html><body><p>Identity provider</p><script>"
                             f"setTimeout(function(){{location.href='https://{GP}:{self.port()}/acs-{nxt}';}},30);"
                             "</script></body></html>")
        if host != GP:
            return self.send(404, "no such host")
        if url.path.startswith("/start/"):
            name = url.path[len("/start/"):]
            return self.send(302, headers=[("Location", f"https://{IDP}:{self.port()}/idp?next={name}")])
        if url.path == "/acs-headers":
            return self.send(200, "<html><body>Login successful</body></html>", self.saml_headers("headers"))
        if url.path == "/acs-comment":
            return self.send(200, "<html><body>Login successful<!-- " + acs_xml(self.secret("comment")) +
                             " --></body></html>")
        if url.path == "/acs-split":
            return self.send(200, "<html><body>Done<!-- " + acs_xml(self.secret("split")) + " --></body></html>",
                             self.saml_headers("split", with_cookie=False))
        if url.path == "/callback":
            data = base64.b64encode(acs_xml(self.secret("callback")).encode()).decode()
            return self.send(200, "<html><body>Opening GlobalProtect...<script>"
                             f"setTimeout(function(){{location.href='globalprotectcallback:{data}';}},30);"
                             "</script></body></html>")
        if url.path == "/never":
            return self.send(200, "<html><body>Waiting for a login that never ends</body></html>")
        return self.send(404, "not found")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        fields = urllib.parse.parse_qs(self.rfile.read(n).decode())
        if self.path == "/acs-post" and fields.get("SAMLResponse", [""])[0] == "fake-assertion":
            return self.send(200, "<html><body>Login successful</body></html>", self.saml_headers("post"))
        return self.send(403, "bad assertion")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ready-file", required=True)
    p.add_argument("--secret", required=True)
    p.add_argument("--max-runtime", type=float, default=60)
    cfg = p.parse_args()
    srv = tls_server(Handler, os.path.join(REPO, "certs"))
    srv.cfg = cfg
    serve_ready(srv, cfg.ready_file, cfg.max_runtime)


if __name__ == "__main__":
    sys.exit(main())
