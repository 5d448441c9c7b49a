#!/usr/bin/python3
"""A small DNS server for the domain-split test: UDP, A and AAAA only, answers from a
JSON file re-read at every query ({"name": {"A": [[address, ttl], ...], "AAAA": [...],
"drop": true}}; a name not in it: NXDOMAIN; "drop": no reply at all). Each query is
appended to LOG as a JSON line {"src", "name", "type"}.

    fake_dns.py LISTEN_ADDR PORT ANSWERS_JSON LOG READY_FILE MAX_SECONDS
"""
import json
import socket
import struct
import sys
import time

TYPES = {1: "A", 28: "AAAA"}


def qname(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        if n > 63:
            raise ValueError("compressed or bad label in a question")
        labels.append(msg[off:off + n].decode("ascii"))
        off += n


def answer(msg, table):
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if flags & 0x8000 or qd != 1:
        return None, None, None
    name, end = qname(msg, 12)
    qtype, qclass = struct.unpack("!HH", msg[end:end + 4])
    question = msg[12:end + 4]
    entry = table.get(name)
    kind = TYPES.get(qtype)
    if entry is not None and entry.get("drop"):
        return name, kind, None
    records = []
    if entry is not None and kind:
        family = socket.AF_INET if kind == "A" else socket.AF_INET6
        for address, ttl in entry.get(kind, []):
            rdata = socket.inet_pton(family, address)
            records.append(struct.pack("!HHHIH", 0xC00C, qtype, 1, ttl, len(rdata)) + rdata)
    rcode = 3 if entry is None else 0
    header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, len(records), 0, 0)
    return name, kind, header + question + b"".join(records)


def main():
    addr, port, answers, log, ready, max_s = sys.argv[1:7]
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((addr, int(port)))
    s.settimeout(0.5)
    open(ready, "w").write("ready\n")
    end = time.monotonic() + float(max_s)
    while time.monotonic() < end:
        try:
            msg, src = s.recvfrom(4096)
        except socket.timeout:
            continue
        try:
            with open(answers) as f:
                table = json.load(f)
            name, kind, reply = answer(msg, table)
        except (ValueError, struct.error, IndexError, UnicodeDecodeError):
            continue
        with open(log, "a") as f:
            f.write(json.dumps({"src": src[0], "name": name, "type": kind}) + "\n")
        if reply is not None:
            s.sendto(reply, src)


if __name__ == "__main__":
    main()
