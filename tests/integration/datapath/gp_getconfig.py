#!/usr/bin/python3
"""Test helper (stands in for the GP session until it exists): logs in to the fake
GP gateway, POSTs getconfig COUNT times with the same authcookie (each one is a
rekey: fresh SPIs and keys), and writes the <ipsec> block of each reply as the
SA env file the esp-test-client reads (atomically, so its reload sees whole files).

  gp_getconfig.py --server HOST:PORT --ca CA.pem --out FILE [--count N] [--interval SEC]
"""
import argparse
import http.client
import os
import ssl
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET

LOGIN = {"jnlpReady": "jnlpReady", "ok": "Login", "direct": "yes", "clientVer": "4100", "prot": "https:",
         "clientos": "Linux", "os-version": "test", "computer": "dp-test", "user": "alice", "passwd": "secret", "server": "vpn.test",
         "ipv6-support": "yes"}


def post(conn, path, form):
    conn.request("POST", path, urllib.parse.urlencode(form),
                 {"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "PAN GlobalProtect"})
    r = conn.getresponse()
    body = r.read().decode()
    if r.status != 200:
        sys.exit(f"gp_getconfig: {path}: HTTP {r.status}: {body[:200]}")
    return body


def env_from_getconfig(body, generation):
    root = ET.fromstring(body)
    ipsec = root.find("ipsec")
    if ipsec is None:
        sys.exit("gp_getconfig: getconfig reply has no <ipsec> block")

    def key(name):
        e = ipsec.find(name)
        return e.findtext("val") if e is not None else ""
    lines = {"GENERATION": generation, "ENC": ipsec.findtext("enc-algo"), "AUTH": ipsec.findtext("hmac-algo") or "",
             "UDP_PORT": ipsec.findtext("udp-port"), "GW_ADDRESS": root.findtext("gw-address") or "",
             "CLIENT_IP": root.findtext("ip-address") or "", "CLIENT_IP6": root.findtext("ip-address-v6") or "",
             "C2S_SPI": ipsec.findtext("c2s-spi"), "C2S_EKEY": key("ekey-c2s"), "C2S_AKEY": key("akey-c2s"),
             "S2C_SPI": ipsec.findtext("s2c-spi"), "S2C_EKEY": key("ekey-s2c"), "S2C_AKEY": key("akey-s2c")}
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--interval", type=float, default=1.0)
    a = ap.parse_args()
    host, port = a.server.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.check_hostname = False  # the test gateway is addressed by a namespace-private IP
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
    args = [e.text or "" for e in ET.fromstring(post(conn, "/ssl-vpn/login.esp", LOGIN)).iter("argument")]
    cookie = {"authcookie": args[1], "portal": args[3], "user": args[4], "domain": urllib.parse.unquote(args[7]),
              "computer": "dp-test", "client-type": "1", "protocol-version": "p1", "ipv6-support": "yes"}
    for n in range(1, a.count + 1):
        if n > 1:
            time.sleep(a.interval)
        t0 = time.monotonic()
        # Unique across runs of this helper: each reply is a new SA pair.
        text = env_from_getconfig(post(conn, "/ssl-vpn/getconfig.esp", cookie), time.time_ns())
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, a.out)
        print(f"getconfig {n}: keys written ({(time.monotonic() - t0) * 1000:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()
