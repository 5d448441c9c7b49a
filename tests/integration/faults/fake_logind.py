#!/usr/bin/python3
"""A stand-in logind on a private D-Bus bus: owns org.freedesktop.login1 and emits
org.freedesktop.login1.Manager.PrepareForSleep(true) on SIGUSR2 (going to sleep) and
PrepareForSleep(false) on SIGUSR1 (resumed), appending "sleep"/"resume" to LOG_FILE each time.

  fake_logind.py BUS_ADDRESS LOG_FILE READY_FILE SECONDS
"""
import signal
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

IFACE = "org.freedesktop.login1.Manager"


class Manager(dbus.service.Object):
    def __init__(self, bus):
        super().__init__(bus, "/org/freedesktop/login1")

    @dbus.service.signal(IFACE, signature="b")
    def PrepareForSleep(self, start):
        pass


def main():
    address, log, ready, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    name = dbus.service.BusName("org.freedesktop.login1", bus)
    manager = Manager(bus)
    loop = GLib.MainLoop()

    def emit(start):
        manager.PrepareForSleep(dbus.Boolean(start))
        with open(log, "a") as f:
            f.write(("sleep" if start else "resume") + "\n")
        return True

    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, emit, False)
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR2, emit, True)
    GLib.timeout_add_seconds(seconds, loop.quit)
    open(ready, "w").write("ready\n")
    loop.run()
    del name, manager


if __name__ == "__main__":
    main()
