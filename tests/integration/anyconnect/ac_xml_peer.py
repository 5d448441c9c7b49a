"""The HTTPS side of the small AnyConnect login peers (csd_test.py, fake_ac_auth.py): Python's
http.server over TLS with the test server certificate, XML replies. Shares no code with espvpn."""
import http.server
import json
import os
import ssl
import threading


class XmlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body, set_cookie=None):
        """200 with an XML body; set_cookie: a Set-Cookie header value."""
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(data)))
        if set_cookie:
            self.send_header("Set-Cookie", set_cookie)
        self.end_headers()
        self.wfile.write(data)


def tls_server(handler, certs_dir, host="127.0.0.1", port=0):
    """A ThreadingHTTPServer for handler, its socket wrapped in TLS (certs/server.pem)."""
    server = http.server.ThreadingHTTPServer((host, port), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(certs_dir, "server.pem"), os.path.join(certs_dir, "server-key.pem"))
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    return server


def serve_ready(server, ready_file, max_runtime):
    """Announces {"port", "pid"} in ready_file (written whole, then renamed), then serves
    until killed or max_runtime seconds pass (then exits 3: a test that forgot us)."""
    with open(ready_file + ".tmp", "w") as f:
        json.dump({"port": server.server_address[1], "pid": os.getpid()}, f)
    os.rename(ready_file + ".tmp", ready_file)
    threading.Timer(max_runtime, lambda: os._exit(3)).start()
    server.serve_forever()
