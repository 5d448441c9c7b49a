#!/usr/bin/python3
"""A window holding the espvpn VPN editor as a connection editor holds it, for the GUI test.

editor_host.py GTK NAME_FILE [JSON]
  GTK: 3 or 4 (the GTK this process loads; the plugin picks its editor library by it)
  NAME_FILE: an nm-espvpn-service.name whose [libnm] plugin= names the built plugin
  JSON: {"id": ..., "data": {...}, "secrets": {...}} the connection starts with
The plugin is loaded through libnm's own loader (NMVpnPluginInfo), the editor through
the plugin's get_editor. The window has the editor's widget and a "Save" button; Save
calls the editor's update_connection and prints one JSON line: {"ok": true, "data":
{...}, "secrets": {...}} or {"ok": false, "error": "..."}. Ends when stdin closes.
"""
import json
import sys

import gi

gtk_version = sys.argv[1]
gi.require_version("Gtk", "3.0" if gtk_version == "3" else "4.0")
gi.require_version("NM", "1.0")
from gi.repository import GLib, Gtk, NM  # noqa: E402

SERVICE = "org.freedesktop.NetworkManager.espvpn"


def main():
    GLib.set_prgname(f"espvpn-editor-gtk{gtk_version}")
    start = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    info = NM.VpnPluginInfo.new_from_file(sys.argv[2])
    plugin = info.load_editor_plugin()
    caps = plugin.get_capabilities()

    connection = NM.SimpleConnection.new()
    s_con = NM.SettingConnection.new()
    s_con.set_property(NM.SETTING_CONNECTION_ID, start.get("id", "test"))
    s_con.set_property(NM.SETTING_CONNECTION_TYPE, "vpn")
    s_con.set_property(NM.SETTING_CONNECTION_UUID, NM.utils_uuid_generate())
    connection.add_setting(s_con)
    s_vpn = NM.SettingVpn.new()
    s_vpn.set_property(NM.SETTING_VPN_SERVICE_TYPE, SERVICE)
    for k, v in start.get("data", {}).items():
        s_vpn.add_data_item(k, v)
    for k, v in start.get("secrets", {}).items():
        s_vpn.add_secret(k, v)
    connection.add_setting(s_vpn)

    editor = plugin.get_editor(connection)
    widget = editor.get_widget()
    changes = [0]
    editor.connect("changed", lambda *_: changes.__setitem__(0, changes[0] + 1))

    def report(obj):
        print(json.dumps(obj), flush=True)

    def on_save(_button):
        try:
            editor.update_connection(connection)
        except GLib.Error as e:
            report({"ok": False, "error": e.message, "changes": changes[0]})
            return
        vpn = connection.get_setting_vpn()
        data = {k: vpn.get_data_item(k) for k in vpn.get_data_keys() or []}
        secrets = {k: vpn.get_secret(k) for k in vpn.get_secret_keys() or []}
        report({"ok": True, "data": data, "secrets": secrets, "changes": changes[0]})

    window = Gtk.Window(title=f"espvpn editor (GTK {gtk_version})")
    window.set_default_size(640, 760)
    save = Gtk.Button(label="Save")
    save.connect("clicked", on_save)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
    if gtk_version == "3":
        box.pack_start(widget, True, True, 0)
        box.pack_start(save, False, False, 0)
        window.add(box)
        window.show_all()
    else:
        box.append(widget)
        box.append(save)
        window.set_child(box)
        window.present()

    loop = GLib.MainLoop()
    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_HUP | GLib.IO_IN, lambda *_: loop.quit() or False)
    report({"ready": True, "capabilities": int(caps), "name": plugin.get_property("name"),
            "service": plugin.get_property("service")})
    loop.run()


main()
