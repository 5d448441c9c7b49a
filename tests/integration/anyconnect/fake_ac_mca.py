#!/usr/bin/env python3
"""fake_ac_mca.py: an AnyConnect server that wants Cisco multiple-certificate authentication.

ocserv has no MCA, so this small HTTPS peer (Python stdlib + python3-cryptography, written from
what openconnect 9 sends, shares no code with espvpn) plays the ASA's part:

  TLS                -> a client certificate (the "machine" certificate) issued by --machine-ca
                        is required in the handshake
  POST <init>        -> <multiple-client-cert-request> (sha256, sha384, sha512), a fresh <random>,
                        <cert-authenticated/>: the whole document is what the client must sign
                        (sent whatever the capabilities said; the record shows whether the client
                        advertised <auth-method>multiple-cert</auth-method>)
  POST <auth-reply>  -> checks <client-cert-chain cert-store="1M"> (sent via protocol) and
                        "1U": the PKCS#7 certificates, the user certificate issued by --user-ca,
                        its signature (RSA PKCS#1 v1.5 or ECDSA) over the exact request document
                        with the hash named in hash-algorithm-chosen; then "complete" with a
                        webvpn cookie, else <error>Certificate Validation Failure</error>

  fake_ac_mca.py --ready-file F --record F --machine-ca PEM --user-ca PEM
Every request's findings go to --record (JSON list). Loopback only; exits after --max-runtime (60 s).
"""
import argparse
import base64
import json
import os
import secrets
import ssl
import sys
import threading
import warnings
import xml.etree.ElementTree as ET

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.serialization import pkcs7

from ac_xml_peer import XmlHandler, serve_ready, tls_server

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", ".."))
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<config-auth client="vpn" type="%s" aggregate-auth-version="2">'
MCA_REQUEST = (HEAD % "auth-request") + """
<opaque is-for="sg"><tunnel-group>MCA</tunnel-group><config-hash>1595829378234</config-hash></opaque>
<multiple-client-cert-request><hash-algorithm>sha256</hash-algorithm><hash-algorithm>sha384</hash-algorithm>
<hash-algorithm>sha512</hash-algorithm></multiple-client-cert-request>
<random>%s</random>
<cert-authenticated></cert-authenticated>
</config-auth>"""
REFUSED = (HEAD % "auth-request") + """<auth id="main"><title>Login</title>
<error id="cert-fail" param1="" param2="">Certificate Validation Failure</error></auth></config-auth>"""
SUCCESS = (HEAD % "complete") + """<session-id>4242</session-id><session-token>%s</session-token>
<auth id="success"><banner>MCA welcome</banner></auth></config-auth>"""
HASHES = {"sha256": hashes.SHA256, "sha384": hashes.SHA384, "sha512": hashes.SHA512}


def issued_by(cert, ca):
    """cert's signature checks out under ca's key (works with python3-cryptography 38)."""
    if cert.issuer != ca.subject:
        return False
    key = ca.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
        else:
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except InvalidSignature:
        return False
    return True


def is_ca(cert):
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def check_reply(doc, request_doc, user_ca):
    """The findings on an MCA auth-reply: a dict with 'ok' and 'why'."""
    auth = doc.find("auth")
    chains = auth.findall("client-cert-chain") if auth is not None else []
    stores = {c.get("cert-store"): c for c in chains}
    if "1M" not in stores or stores["1M"].find("client-cert-sent-via-protocol") is None:
        return {"ok": False, "why": "no 1M chain sent via protocol"}
    user = stores.get("1U")
    if user is None:
        return {"ok": False, "why": "no 1U chain"}
    cert_el, sig_el = user.find("client-cert"), user.find("client-cert-auth-signature")
    if cert_el is None or sig_el is None or cert_el.get("cert-format") != "pkcs7":
        return {"ok": False, "why": "1U lacks a pkcs7 client-cert or the signature"}
    algo = sig_el.get("hash-algorithm-chosen")
    if algo not in HASHES:
        return {"ok": False, "why": f"hash {algo!r} not offered"}
    with warnings.catch_warnings():  # GnuTLS's PKCS#7 (digestedData inside) is read as BER, with a warning
        warnings.simplefilter("ignore")
        certs = pkcs7.load_der_pkcs7_certificates(base64.b64decode(cert_el.text or ""))
    users = [c for c in certs if not is_ca(c)]
    if len(users) != 1:
        return {"ok": False, "why": f"{len(users)} user certificates in the PKCS#7"}
    cert = users[0]
    found = {"hash": algo, "subject": cert.subject.rfc4514_string(), "certs": len(certs)}
    if not issued_by(cert, user_ca):
        return dict(found, ok=False, why="user certificate not issued by the user CA")
    signature = base64.b64decode(sig_el.text or "")
    key = cert.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, request_doc, padding.PKCS1v15(), HASHES[algo]())
        else:
            key.verify(signature, request_doc, ec.ECDSA(HASHES[algo]()))
    except InvalidSignature:
        return dict(found, ok=False, why="bad signature over the request document")
    return dict(found, ok=True, why="")


class Handler(XmlHandler):
    def record(self, entry):
        with self.server.lock:
            self.server.record.append(entry)
            with open(self.server.cfg.record, "w") as f:
                json.dump(self.server.record, f)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        doc = ET.fromstring(self.rfile.read(n))
        machine = self.connection.getpeercert()
        machine_cn = dict(x[0] for x in machine.get("subject", ())).get("commonName", "") if machine else ""
        if doc.get("type") == "init":
            caps = [m.text for m in doc.findall("capabilities/auth-method")]
            body = MCA_REQUEST % secrets.token_hex(32).upper()
            with self.server.lock:
                self.server.request_doc = body.encode()
            self.record({"step": "init", "multiple_cert": "multiple-cert" in caps, "machine": machine_cn})
            return self.reply(body)
        with self.server.lock:
            request_doc = self.server.request_doc
        found = check_reply(doc, request_doc, self.server.user_ca)
        found.update(step="auth-reply", machine=machine_cn)
        self.record(found)
        if not found["ok"]:
            return self.reply(REFUSED)
        token = secrets.token_hex(32).upper()
        return self.reply(SUCCESS % token, f"webvpn={token}; Secure")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--machine-ca", required=True)
    p.add_argument("--user-ca", required=True)
    p.add_argument("--max-runtime", type=float, default=60)
    cfg = p.parse_args()
    host, port = cfg.listen.rsplit(":", 1)
    srv = tls_server(Handler, os.path.join(REPO, "certs"), host, int(port))
    # The machine certificate in the TLS handshake: the shared helper's context, plus a CA and
    # CERT_REQUIRED (Python's SSLSocket keeps the context it was wrapped with).
    srv.socket.context.load_verify_locations(cfg.machine_ca)
    srv.socket.context.verify_mode = ssl.CERT_REQUIRED
    with open(cfg.user_ca, "rb") as f:
        srv.user_ca = x509.load_pem_x509_certificate(f.read())
    srv.cfg, srv.lock, srv.record, srv.request_doc = cfg, threading.Lock(), [], b""
    with open(cfg.record, "w") as f:
        json.dump([], f)
    serve_ready(srv, cfg.ready_file, cfg.max_runtime)


if __name__ == "__main__":
    sys.exit(main())
