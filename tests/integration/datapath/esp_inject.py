#!/usr/bin/python3
"""Forged/replayed ESP datagrams at the client's UDP port, sent from the gateway's
address and port (the client's socket is connected, so only those get in).

  esp_inject.py capture IFACE GW_IP CLIENT_IP OUT [READY]
                                                       first ESP datagram GW:4501 -> client (10 s bound);
                                                       OUT gets "client_port hex_payload"; READY (if given)
                                                       gets "ready" once the capture socket is open
  esp_inject.py inject GW_IP CLIENT_IP CAPTURE N       sends N of each kind: replay (captured bytes again),
                                                       forged (seq moved ahead, ICV now wrong), unknown SPI,
                                                       short (SPI + seq only)
"""
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003  # outgoing packets reach only ETH_P_ALL taps


def capture(iface, gw, client, out, ready=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.5)
    if ready:
        with open(ready, "w") as f:
            f.write("ready\n")
    end = time.monotonic() + 10
    gw_b, cl_b = socket.inet_aton(gw), socket.inet_aton(client)
    while time.monotonic() < end:
        try:
            pkt = s.recv(65535)
        except socket.timeout:
            continue
        if len(pkt) < 28 or pkt[0] >> 4 != 4 or pkt[9] != 17 or pkt[12:16] != gw_b or pkt[16:20] != cl_b:
            continue
        ihl = (pkt[0] & 15) * 4
        sport, dport, ulen = struct.unpack("!HHH", pkt[ihl:ihl + 6])
        if sport != 4501:
            continue
        payload = pkt[ihl + 8:ihl + ulen]
        with open(out, "w") as f:
            f.write(f"{dport} {payload.hex()}\n")
        return
    sys.exit("esp_inject: no ESP datagram from the gateway seen in 10 s")


def inject(gw, client, cap, n):
    port, hexdata = open(cap).read().split()
    port, esp = int(port), bytes.fromhex(hexdata)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    spi, seq = struct.unpack("!II", esp[:8])

    def send(payload):
        udp = struct.pack("!HHHH", 4501, port, 8 + len(payload), 0) + payload
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x1234, 0x4000, 64, 17, 0,
                         socket.inet_aton(gw), socket.inet_aton(client))
        s.sendto(ip + udp, (client, 0))
        time.sleep(0.002)
    for k in range(n):
        send(esp)                                                    # replayed
        send(esp[:4] + struct.pack("!I", seq + 100000 + k) + esp[8:])  # forged: ICV no longer matches
        send(struct.pack("!I", spi ^ 0x5a5a5a5a) + esp[4:])            # unknown SPI
        send(esp[:8])                                                # short
    print(f"injected {n} each of replayed, forged, unknown-spi, short (spi=0x{spi:08x} seq={seq})", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "capture":
        capture(*sys.argv[2:7])
    else:
        inject(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
