#!/usr/bin/env python3
"""A userspace UDP relay that replays, reorders and corrupts DTLS records (the kernel
here has no netem, no nfqueue): ac_ocserv.sh dtls_impaired points the client's UDP to
ocserv's DTLS port at it with an nftables DNAT rule in the client namespace.

  dtls_impair_relay.py LISTEN_ADDR LISTEN_PORT UPSTREAM_ADDR UPSTREAM_PORT SOURCE_PORT COUNTS_FILE [LOSE_ANSWER]

It takes the first client that writes to LISTEN_ADDR:LISTEN_PORT (any later sender
becomes the client: a reconnect), forwards its datagrams to UPSTREAM from its own
socket bound to SOURCE_PORT (the DNAT rule leaves that port alone), and the replies
back. Only DTLS application-data records (first byte 23) are impaired, and only after
WARMUP of them in that direction (the handshake and the first records pass as they
are). Then, by the record's index i in its direction, i % 10 ==
  3: replayed: sent, and a copy sent again after two more records (or HOLD_S)
  6: delayed: held, sent after the next two records (or HOLD_S): reordered
  8: corrupted: a copy with its last byte (in the AEAD tag) flipped is sent first,
     then the genuine record (so nothing is lost: a receiver must discard the bad one)
No datagram is ever dropped by the relay. On SIGTERM/SIGINT (or after LIFETIME_S) it
writes its counts per direction as JSON to COUNTS_FILE and exits; it also rewrites the
file every second.
With LOSE_ANSWER = N it impairs nothing but the handshake: the server's N-th datagram is
lost (once; 2 = the ServerHelloDone after a PSK ServerHello), and the counts list the
record sequence numbers of the client's ClientHellos ("client_hello_seqs").
"""
import json
import os
import select
import signal
import socket
import sys
import time

WARMUP = 10
HOLD_S = 0.03
LIFETIME_S = 300


class Direction:
    def __init__(self, name):
        self.name = name
        self.c = dict(datagrams=0, app_records=0, replayed=0, delayed=0, reordered=0, corrupted=0, sent=0, lost=0,
                      client_hello_seqs=[])
        self.held = []  # [records still to pass, deadline, datagram, kind]

    def counts(self):
        return dict(self.c)


def main():
    laddr, lport, uaddr, uport, sport, counts_file = sys.argv[1:7]
    lose_answer = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    lport, uport, sport = int(lport), int(uport), int(sport)
    down = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # client side
    up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # ocserv side
    for s in (down, up):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for opt in ("SO_RCVBUFFORCE", "SO_SNDBUFFORCE"):  # root; else the plain ones
            try:
                s.setsockopt(socket.SOL_SOCKET, getattr(socket, opt), 8 << 20)
            except (OSError, AttributeError):
                s.setsockopt(socket.SOL_SOCKET, getattr(socket, opt.replace("FORCE", "")), 8 << 20)
    down.bind((laddr, lport))
    up.bind((laddr, sport))
    up.connect((uaddr, uport))
    c2s, s2c = Direction("client_to_server"), Direction("server_to_client")
    client = None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))

    def write_counts():
        with open(counts_file + ".tmp", "w") as f:
            json.dump({"client": "%s:%d" % client if client else None,
                       c2s.name: c2s.counts(), s2c.name: s2c.counts()}, f)
        os.replace(counts_file + ".tmp", counts_file)

    def send(d, data):
        try:
            if d is c2s:
                up.send(data)
            elif client:
                down.sendto(data, client)
            d.c["sent"] += 1
        except OSError:
            pass  # e.g. ECONNREFUSED from an ICMP error: UDP, the peer retries

    def release(d, now, passed_one):
        keep = []
        for h in d.held:
            if passed_one:
                h[0] -= 1
            if h[0] <= 0 or now >= h[1]:
                if h[3] == "delayed" and passed_one:
                    d.c["reordered"] += 1  # a later record went out before it
                send(d, h[2])
            else:
                keep.append(h)
        d.held = keep

    def handle(d, data):
        now = time.monotonic()
        d.c["datagrams"] += 1
        if lose_answer:
            # a handshake record of epoch 0: type 22, epoch 0 (bytes 3-4), message type at 13
            if d is c2s and len(data) > 13 and data[0] == 22 and data[3:5] == b"\0\0" and data[13] == 1:
                d.c["client_hello_seqs"].append(int.from_bytes(data[5:11], "big"))
            if d is s2c and d.c["datagrams"] == lose_answer:
                d.c["lost"] += 1
                return
            send(d, data)
            return
        if not data or data[0] != 23:
            send(d, data)
            return
        d.c["app_records"] += 1
        i = d.c["app_records"]
        if i <= WARMUP:
            send(d, data)
            release(d, now, False)
            return
        k = i % 10
        if k == 3:
            d.c["replayed"] += 1
            send(d, data)
            release(d, now, True)
            d.held.append([2, now + HOLD_S, data, "replay"])
        elif k == 6:
            d.c["delayed"] += 1
            d.held.append([3, now + HOLD_S, data, "delayed"])  # counts this record's own pass
            release(d, now, True)
        elif k == 8:
            d.c["corrupted"] += 1
            bad = bytearray(data)
            bad[-1] ^= 0x5A
            send(d, bytes(bad))
            send(d, data)
            release(d, now, True)
        else:
            send(d, data)
            release(d, now, True)

    started = last_write = time.monotonic()
    while not stop and time.monotonic() - started < LIFETIME_S:
        try:
            r, _, _ = select.select([down, up], [], [], HOLD_S / 3)
        except InterruptedError:
            continue
        if down in r:
            try:
                data, addr = down.recvfrom(65536)
                client = addr
                handle(c2s, data)
            except OSError:
                pass
        if up in r:
            try:
                data = up.recv(65536)
                handle(s2c, data)
            except OSError:
                pass
        now = time.monotonic()
        release(c2s, now, False)
        release(s2c, now, False)
        if now - last_write >= 1:
            write_counts()
            last_write = now
    for d in (c2s, s2c):
        for h in d.held:
            send(d, h[2])
        d.held = []
    write_counts()


if __name__ == "__main__":
    main()
