#!/usr/bin/env python3
"""fake_ac_sso.py: an AnyConnect server whose login is a SAML single sign-on (sso-v2), and its
identity provider, on loopback. ocserv has no SAML; this peer is Python stdlib, written from the
protocol notes (Cisco's aggregate auth as openconnect 9.x speaks it), and shares no code with espvpn.

One TLS port, two host names (the test maps both to 127.0.0.1: espvpn by --resolve, Chromium by
--host-resolver-rules; certs/server.pem covers *.espvpn.test):
  vpn.espvpn.test  the AnyConnect server
    POST / <init>        -> auth-request with <sso-v2-login>, <sso-v2-login-final>, <sso-v2-logout>,
                            <sso-v2-token-cookie-name>acSamlv2Token, <sso-v2-error-cookie-name>acSamlv2Error,
                            <form><input type="sso" name="sso-token"/></form> (always: a SAML-only group)
    GET  /+CSCOE+/saml/sp/login   -> 302 to the IdP (a SAMLRequest id)
    POST /+CSCOE+/saml/sp/acs     (SAMLResponse) -> 302 to the final URL with a one-time ticket
    GET  /+CSCOE+/saml_ac_login.html?ticket=T -> sets acSamlv2Token=<token> (or, --idp-error,
                            acSamlv2Error=<reason>) here, at the final URL
    POST / <auth-reply> with <sso-token> -> the token known and unused: complete + Set-Cookie webvpn;
                            else the sso form again with <error>
    GET  /+CSCOE+/session with Cookie webvpn=... -> 200 "session ok" for an issued cookie, else 403
  idp.espvpn.test  the identity provider
    GET  /idp/login?req=R -> a page whose login form is built by JavaScript, with a hidden field the
                            script computes (a browser without JavaScript cannot log in)
    POST /idp/login       -> right user/password and proof: a page whose JavaScript posts the
                            SAMLResponse to the ACS; wrong: the form again, "Wrong password"

--external-token T: the form says <sso-v2-browser-mode>external</sso-v2-browser-mode> (the flow whose
token comes back through http://localhost:29786/api/sso/...), and T is the token the server accepts (the
test's stand-in browser returns it). With --blob-file F and the client's X-AnyConnect-STRAP-Pubkey in init,
F gets the loopback target "/api/sso/<T encrypted to that key>?return=..." (STRAP), which the stand-in
browser hands back instead. --loopback-redirect: the external mode end to end: the ACS sends the browser
to http://localhost:29786/api/sso/<token, STRAP-encrypted when init carried a key>?return=<final URL>.

--autofill USER:PASS: the test's stand-in for the user's typing. The IdP page's own script types
these into the fields and submits, once (not after a failure, so a wrong password leaves the page
waiting). Product code has no test hook; the browser stays a real browser running real JavaScript.

  fake_ac_sso.py --ready-file F --record F [--autofill U:P] [--idp-error REASON] [--max-runtime S]
--record: a JSON object of what happened (capabilities sent in init, IdP attempts, tokens, cookies).
"""
import argparse
import html
import json
import os
import secrets
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET

from ac_xml_peer import XmlHandler, serve_ready, tls_server

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
VPN, IDP = "vpn.espvpn.test", "idp.espvpn.test"
USER, PASSWORD = "alice", "correct horse"
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<config-auth client="vpn" type="%s" aggregate-auth-version="2">'


def sso_form(base, error="", external=False):
    err = f"<error>{html.escape(error)}</error>" if error else ""
    mode = "<sso-v2-browser-mode>external</sso-v2-browser-mode>" if external else ""
    return (HEAD % "auth-request") + f"""<opaque is-for="sg"><tunnel-group>saml</tunnel-group>
<auth-method>single-sign-on-v2</auth-method><config-hash>1</config-hash></opaque>
<auth id="main"><title>Login</title>
<message>Please complete the authentication process in the AnyConnect Login window.</message>{err}
<sso-v2-login>{base}/+CSCOE+/saml/sp/login?tgname=saml&amp;acsamlcap=v2</sso-v2-login>
<sso-v2-login-final>{base}/+CSCOE+/saml_ac_login.html</sso-v2-login-final>
<sso-v2-logout>{base}/+CSCOE+/saml/sp/logout</sso-v2-logout>
<sso-v2-token-cookie-name>acSamlv2Token</sso-v2-token-cookie-name>
<sso-v2-error-cookie-name>acSamlv2Error</sso-v2-error-cookie-name>{mode}
<form><input type="sso" name="sso-token"></input></form></auth></config-auth>"""


SUCCESS = (HEAD % "complete") + '<auth id="success"><message>Welcome</message></auth></config-auth>'

IDP_PAGE = """<!DOCTYPE html><html><head><title>Fake IdP</title></head><body>
<h1>Sign in</h1><p id="msg">%(msg)s</p><div id="slot"></div>
<noscript>This sign-in page needs JavaScript.</noscript>
<script>
// The form exists only once this script runs; its proof field is computed here.
var f = document.createElement('form');
f.method = 'POST'; f.action = '/idp/login';
f.innerHTML = '<input name="username" id="u"><input type="password" name="password" id="p">' +
  '<input type="hidden" name="req" value="%(req)s"><input type="hidden" name="proof" id="proof">' +
  '<button id="go">Sign in</button>';
document.getElementById('slot').appendChild(f);
document.getElementById('proof').value = ['%(req)s', 'js'].join(':').split('').reverse().join('');
var auto = %(autofill)s;
if (auto) {
  document.getElementById('u').value = auto[0];
  document.getElementById('p').value = auto[1];
  setTimeout(function () { document.getElementById('go').click(); }, 50);
}
</script></body></html>"""

POST_TO_ACS = """<!DOCTYPE html><html><body><p>Signing you in...</p>
<form id="f" method="POST" action="%(acs)s"><input type="hidden" name="SAMLResponse" value="%(resp)s">
<input type="hidden" name="RelayState" value="%(relay)s"></form>
<script>document.getElementById('f').submit();</script></body></html>"""


def strap_target(client_key_b64, token, base):
    """What the IdP's last redirect would carry to http://localhost:29786/api/sso/...: the token
    encrypted to the client's STRAP key (ECDH P-256, HKDF-SHA256 "AC_ECIES", AES-256-GCM, 12-byte
    tag), by pyca/cryptography, written as the loopback request's target."""
    import base64
    import struct
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    client = serialization.load_der_public_key(base64.b64decode(client_key_b64))
    eph = ec.generate_private_key(ec.SECP256R1())
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"AC_ECIES").derive(eph.exchange(ec.ECDH(), client))
    iv = os.urandom(12)
    enc = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
    ct = enc.update(token.encode()) + enc.finalize()
    spki = eph.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    blob = b"\x00\x01" + b"".join(struct.pack(">HH", t, len(v)) + v
                                  for t, v in ((1, spki), (2, enc.tag[:12]), (3, ct), (4, iv)))
    return "/api/sso/" + urllib.parse.quote(base64.b64encode(blob).decode(), safe="") + \
        "?return=" + urllib.parse.quote(base + "/+CSCOE+/saml_ac_login.html", safe="")


def write_strap_blob(path, client_key_b64, token, base):
    with open(path + ".tmp", "w") as f:
        f.write(strap_target(client_key_b64, token, base))
    os.rename(path + ".tmp", path)


class Handler(XmlHandler):
    def host(self):
        return (self.headers.get("Host") or "").split(":")[0].lower()

    def base(self, host):
        return f"https://{host}:{self.server.server_address[1]}"

    def send(self, status, body="", ctype="text/html", headers=()):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def note(self, key, value):
        with self.server.lock:
            rec = self.server.record
            rec.setdefault(key, []).append(value)
            with open(self.server.cfg.record + ".tmp", "w") as f:
                json.dump(rec, f)
            os.rename(self.server.cfg.record + ".tmp", self.server.cfg.record)

    def form_fields(self):
        n = int(self.headers.get("Content-Length", "0"))
        return {k: v[0] for k, v in urllib.parse.parse_qs(self.rfile.read(n).decode()).items()}

    def cookies(self):
        out = {}
        for part in (self.headers.get("Cookie") or "").split(";"):
            if "=" in part:
                k, v = part.strip().split("=", 1)
                out[k] = v
        return out

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        st = self.server.state
        host = self.host()
        if host == IDP and url.path == "/idp/login":
            req = q.get("req", "")
            if req not in st["requests"]:
                return self.send(400, "unknown SAML request")
            self.note("idp_pages", {"failed": bool(q.get("failed"))})
            auto = self.server.cfg.autofill
            autofill = json.dumps(auto.split(":", 1)) if auto and not q.get("failed") else "null"
            return self.send(200, IDP_PAGE % {"msg": "Wrong password." if q.get("failed") else "",
                                              "req": req, "autofill": autofill})
        if host != VPN:
            return self.send(404, "no such host")
        if url.path == "/+CSCOE+/saml/sp/login":
            req = secrets.token_hex(8)
            st["requests"].add(req)
            return self.send(302, headers=[("Location", f"{self.base(IDP)}/idp/login?req={req}")])
        if url.path == "/+CSCOE+/saml_ac_login.html":
            ticket = q.get("ticket", "")
            if ticket not in st["tickets"]:
                return self.send(200, "<html><body>No login in progress.</body></html>")
            st["tickets"].discard(ticket)
            if self.server.cfg.idp_error:
                cookie = "acSamlv2Error=" + urllib.parse.quote(self.server.cfg.idp_error) + "; path=/; Secure"
                self.note("idp_error_sent", True)
            else:
                token = secrets.token_hex(24)
                st["tokens"].add(token)
                self.note("tokens", token)
                cookie = f"acSamlv2Token={token}; path=/; Secure; HttpOnly"
            return self.send(200, "<html><body>Login complete. You may close this window.</body></html>",
                             headers=[("Set-Cookie", cookie)])
        if url.path == "/+CSCOE+/session":
            ok = self.cookies().get("webvpn", "") in st["webvpn"]
            self.note("session_checks", ok)
            return self.send(200 if ok else 403, "session ok\n" if ok else "no session\n", "text/plain")
        return self.send(404, "not found")

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        st = self.server.state
        host = self.host()
        if host == IDP and url.path == "/idp/login":
            f = self.form_fields()
            req = f.get("req", "")
            proof_ok = f.get("proof", "") == (req + ":js")[::-1]
            ok = req in st["requests"] and proof_ok and f.get("username") == USER and f.get("password") == PASSWORD
            self.note("idp_attempts", {"user": f.get("username", ""), "ok": ok, "proof": proof_ok})
            if not ok:
                return self.send(302, headers=[("Location", f"/idp/login?req={req}&failed=1")])
            st["requests"].discard(req)
            assertion = secrets.token_hex(16)
            st["assertions"].add(assertion)
            return self.send(200, POST_TO_ACS % {"acs": f"{self.base(VPN)}/+CSCOE+/saml/sp/acs",
                                                 "resp": assertion, "relay": "saml"})
        if host != VPN:
            return self.send(404, "no such host")
        if url.path == "/+CSCOE+/saml/sp/acs":
            f = self.form_fields()
            if f.get("SAMLResponse", "") not in st["assertions"]:
                return self.send(403, "bad assertion")
            st["assertions"].discard(f["SAMLResponse"])
            if self.server.cfg.loopback_redirect:
                # The external flow: the browser goes to the client's loopback listener with the token,
                # encrypted to the client's STRAP key when it sent one.
                token = secrets.token_hex(24)
                st["tokens"].add(token)
                self.note("tokens", token)
                key = st.get("strap_key")
                target = strap_target(key, token, self.base(VPN)) if key else f"/api/sso/{token}"
                self.note("loopback_redirects", {"strap": bool(key)})
                return self.send(302, headers=[("Location", "http://localhost:29786" + target)])
            ticket = secrets.token_hex(8)
            st["tickets"].add(ticket)
            return self.send(302, headers=[("Location", f"/+CSCOE+/saml_ac_login.html?ticket={ticket}")])
        # The AnyConnect XML.
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(n)
        try:
            doc = ET.fromstring(raw)
        except ET.ParseError:
            return self.send(400, "not XML")
        strap = self.headers.get("X-AnyConnect-STRAP-Pubkey")
        self.note("strap_keys", strap if strap == self.headers.get("X-AnyConnect-STRAP-DH-Pubkey") else "mismatch")
        if doc.get("type") == "init":
            caps = [m.text for m in doc.findall("capabilities/auth-method")]
            self.note("init", {"capabilities": caps, "has_capabilities": doc.find("capabilities") is not None})
            if strap:
                st["strap_key"] = strap
            if self.server.cfg.blob_file and strap:
                write_strap_blob(self.server.cfg.blob_file, strap,
                                 self.server.cfg.blob_token or self.server.cfg.external_token, self.base(VPN))
            return self.reply(sso_form(self.base(VPN), external=bool(self.server.cfg.external_token or
                                                                     self.server.cfg.loopback_redirect)))
        token = (doc.findtext("auth/sso-token") or "").strip()
        opaque_ok = doc.findtext("opaque/tunnel-group") == "saml"
        ok = token in st["tokens"] and opaque_ok
        self.note("auth_replies", {"token_ok": ok, "opaque_ok": opaque_ok})
        if not ok:
            return self.reply(sso_form(self.base(VPN), "Invalid SSO token",
                                       bool(self.server.cfg.external_token or self.server.cfg.loopback_redirect)))
        st["tokens"].discard(token)
        webvpn = secrets.token_hex(20)
        st["webvpn"].add(webvpn)
        self.note("webvpn", webvpn)
        return self.reply(SUCCESS, f"webvpn={webvpn}; path=/; Secure")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--autofill")
    p.add_argument("--idp-error")
    p.add_argument("--external-token")
    p.add_argument("--blob-file")
    p.add_argument("--blob-token")  # what the STRAP blob carries, when not --external-token (a wrong one)
    p.add_argument("--loopback-redirect", action="store_true")
    p.add_argument("--max-runtime", type=float, default=120)
    cfg = p.parse_args()
    host, port = cfg.listen.rsplit(":", 1)
    srv = tls_server(Handler, os.path.join(REPO, "certs"), host, int(port))
    srv.cfg, srv.lock, srv.record = cfg, threading.Lock(), {}
    srv.state = {"requests": set(), "assertions": set(), "tickets": set(), "tokens": set(), "webvpn": set()}
    if cfg.external_token:
        srv.state["tokens"].add(cfg.external_token)
    with open(cfg.record, "w") as f:
        json.dump({}, f)
    serve_ready(srv, cfg.ready_file, cfg.max_runtime)


if __name__ == "__main__":
    sys.exit(main())
