#!/usr/bin/python3
"""A stand-in systemd-resolved on a private D-Bus bus: owns org.freedesktop.resolve1,
implements the link calls espvpn makes (SetLinkDNS, SetLinkDomains, SetLinkDefaultRoute,
RevertLink) and appends each call as a JSON line to LOG_FILE.

  fake_resolved.py BUS_ADDRESS LOG_FILE READY_FILE SECONDS
"""
import json
import socket
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

IFACE = "org.freedesktop.resolve1.Manager"


class Manager(dbus.service.Object):
    def __init__(self, bus, log):
        super().__init__(bus, "/org/freedesktop/resolve1")
        self.log = log

    def record(self, method, ifindex, **args):
        with open(self.log, "a") as f:
            f.write(json.dumps({"method": method, "ifindex": int(ifindex), **args}) + "\n")

    @dbus.service.method(IFACE, in_signature="ia(iay)", out_signature="")
    def SetLinkDNS(self, ifindex, addresses):
        out = [socket.inet_ntop(int(fam), bytes(bytearray(addr))) for fam, addr in addresses]
        self.record("SetLinkDNS", ifindex, servers=out)

    @dbus.service.method(IFACE, in_signature="ia(sb)", out_signature="")
    def SetLinkDomains(self, ifindex, domains):
        self.record("SetLinkDomains", ifindex, domains=[[str(d), bool(r)] for d, r in domains])

    @dbus.service.method(IFACE, in_signature="ib", out_signature="")
    def SetLinkDefaultRoute(self, ifindex, enable):
        self.record("SetLinkDefaultRoute", ifindex, enable=bool(enable))

    @dbus.service.method(IFACE, in_signature="i", out_signature="")
    def RevertLink(self, ifindex):
        self.record("RevertLink", ifindex)


def main():
    address, log, ready, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    name = dbus.service.BusName("org.freedesktop.resolve1", bus)
    manager = Manager(bus, log)
    loop = GLib.MainLoop()
    GLib.timeout_add_seconds(seconds, loop.quit)
    open(ready, "w").write("ready\n")
    loop.run()
    del name, manager


if __name__ == "__main__":
    main()
