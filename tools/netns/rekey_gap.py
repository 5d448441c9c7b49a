#!/usr/bin/python3
"""The largest traffic gap during ESP rekeys (tools/bench's rekey row).

  rekey_gap.py watch IFACE PORT SECONDS OUT
      Watches ESP-in-UDP datagrams to or from PORT on IFACE (AF_PACKET, run it in the
      gateway namespace) and writes one line per SPI change of each direction:
      "MONOTONIC_TIME SOURCE_IP SPI_HEX" (the first SPI of each direction too).
  rekey_gap.py report WINDOW_MS SPI_LOG NAME=ARRIVALS...
      ARRIVALS: time.monotonic() of each datagram of a steady stream, one a line
      (tests/integration/datapath/udp_stream.py recv ... ARRIVALS). Prints, per stream,
      the largest inter-arrival gap that touches WINDOW_MS around an SPI switch (a
      rekey), and the largest elsewhere (what load alone does to the stream):
      "NAME: switches=N rekey_gap_ms=X other_gap_ms=Y packets=P" (N: SPI switches, both
      directions, while the stream ran)
Both clocks are CLOCK_MONOTONIC, which network namespaces share.
"""
import socket
import struct
import sys
import time

ETH_P_IP = 0x0800


def watch(iface, port, seconds, out):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP))
    s.bind((iface, 0))
    s.settimeout(0.2)
    last = {}
    end = time.monotonic() + seconds
    with open(out, "w") as f:
        while time.monotonic() < end:
            try:
                pkt = s.recv(128)
            except socket.timeout:
                continue
            now = time.monotonic()
            if len(pkt) < 28 or pkt[0] >> 4 != 4 or pkt[9] != 17:
                continue
            ihl = (pkt[0] & 0x0F) * 4
            if len(pkt) < ihl + 12:
                continue
            sport, dport = struct.unpack("!HH", pkt[ihl:ihl + 4])
            if port not in (sport, dport):
                continue
            spi = struct.unpack("!I", pkt[ihl + 8:ihl + 12])[0]
            if spi == 0:
                continue  # not ESP (a NAT-T keepalive or IKE marker)
            src = socket.inet_ntoa(pkt[12:16])
            if last.get(src) != spi:
                last[src] = spi
                f.write(f"{now:.6f} {src} {spi:08x}\n")
                f.flush()


def report(window_ms, spi_log, streams):
    switches = []
    seen = set()
    for line in open(spi_log):
        t, src, _ = line.split()
        if src in seen:
            switches.append(float(t))  # a change, not the first SPI of that direction
        seen.add(src)
    window = window_ms / 1000.0
    for spec in streams:
        name, path = spec.split("=", 1)
        arrivals = [float(x) for x in open(path) if x.strip()]
        near = other = 0.0
        for a, b in zip(arrivals, arrivals[1:]):
            gap = b - a
            if any(a - window <= t <= b + window for t in switches):
                near = max(near, gap)
            else:
                other = max(other, gap)
        rekeys = sum(1 for t in switches if arrivals and arrivals[0] <= t <= arrivals[-1])
        print(f"{name}: switches={rekeys} rekey_gap_ms={near * 1000:.1f} other_gap_ms={other * 1000:.1f} "
              f"packets={len(arrivals)}")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "watch":
        watch(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) >= 5 and sys.argv[1] == "report":
        report(float(sys.argv[2]), sys.argv[3], sys.argv[4:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
