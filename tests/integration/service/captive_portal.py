#!/usr/bin/env python3
"""A hotel's captive portal for the service_captive test (standard library only).

  captive_portal.py ADDRESS FLAG_FILE LOG_FILE

HTTP on ADDRESS:80: until FLAG_FILE exists every request is answered 302 to
http://ADDRESS/login?... (what a portal does to the connectivity check); GET /login
creates FLAG_FILE (the user "logged in"), GET /logout removes it; with FLAG_FILE,
/check_network_status.txt answers NetworkManager's expected body. Beside it, what the
kill switch must keep blocked during the portal's exception: TCP ADDRESS:8080 and UDP
ADDRESS:5353, each contact written to LOG_FILE ("tcp 8080" / "udp 5353").
"""
import http.server
import os
import socket
import socketserver
import sys
import threading

address, flag, log = sys.argv[1], sys.argv[2], sys.argv[3]


def note(line):
    with open(log, "a") as f:
        f.write(line + "\n")


class Portal(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/login":
            open(flag, "w").close()
            return self.answer(200, b"<html><body>Welcome to the hotel network.</body></html>", "text/html")
        if path == "/logout":
            if os.path.exists(flag):
                os.unlink(flag)
            return self.answer(200, b"bye", "text/plain")
        if os.path.exists(flag):
            if path == "/check_network_status.txt":
                return self.answer(200, b"NetworkManager is online\n", "text/plain")
            return self.answer(200, b"<html><body>You are online.</body></html>", "text/html")
        # A control character in the Location too: espvpn must never print it raw.
        self.send_response(302)
        self.send_header("Location", "http://%s/login?from=probe&x=\x1b[31mred" % address)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def answer(self, code, body, kind):
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        note("http " + (fmt % args))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def tcp_other():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((address, 8080))
    s.listen(8)
    while True:
        c, _ = s.accept()
        note("tcp 8080")
        c.close()


def udp_other():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((address, 5353))
    while True:
        s.recvfrom(2048)
        note("udp 5353")


threading.Thread(target=tcp_other, daemon=True).start()
threading.Thread(target=udp_other, daemon=True).start()
Server((address, 80), Portal).serve_forever()
