#!/usr/bin/python3
"""libnm-vpn-plugin-espvpn.so loaded by libnm's own loader, as nm-connection-editor,
GNOME Settings and nmcli load it: NMVpnPluginInfo on the .name file, load_editor_plugin.

editor_plugin_load.py NAME_FILE PLUGIN_SO
Checks the plugin's name, service and capabilities; imports a NetworkManager-openconnect
keyfile (GlobalProtect), NM-openconnect's own export (AnyConnect) and an openconnect
--config file; exports and imports back; a profile espvpn cannot use is refused with why.
"""
import os
import sys
import tempfile

import gi

gi.require_version("NM", "1.0")
from gi.repository import GLib, NM  # noqa: E402

name_file, plugin_so = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp()


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write(name, text):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write(text)
    return path


with open(name_file) as f:
    name_text = f.read()
if "\n[libnm]\nplugin=" not in name_text:
    fail("the .name file has no [libnm] plugin=")
local = write("nm-espvpn-service.name",
              "".join(f"plugin={plugin_so}\n" if line.startswith("plugin=") else line + "\n"
                      for line in name_text.splitlines()))
info = NM.VpnPluginInfo.new_from_file(local)
plugin = info.load_editor_plugin()
if plugin.get_property("name") != "espvpn" or plugin.get_property("service") != "org.freedesktop.NetworkManager.espvpn":
    fail(f"name/service {plugin.get_property('name')} {plugin.get_property('service')}")
caps = plugin.get_capabilities()
want = NM.VpnEditorPluginCapability.IMPORT | NM.VpnEditorPluginCapability.EXPORT | NM.VpnEditorPluginCapability.IPV6
if caps != want:
    fail(f"capabilities {caps}")


def imported(path):
    try:
        c = plugin.import_(path)
    except GLib.Error as e:
        fail(f"import of {os.path.basename(path)}: {e.message}")
    vpn = c.get_setting_vpn()
    if vpn.get_service_type() != "org.freedesktop.NetworkManager.espvpn":
        fail(f"imported service type {vpn.get_service_type()}")
    if not c.verify():
        fail("the imported connection does not verify")
    return c, {k: vpn.get_data_item(k) for k in vpn.get_data_keys()}, \
        {k: vpn.get_secret(k) for k in (vpn.get_secret_keys() or [])}


def expect(got, want, what):
    for k, v in want.items():
        if got.get(k) != v:
            fail(f"{what}: {k} = {got.get(k)!r}, expected {v!r}")


c, data, secrets = imported(write("oc-gp.nmconnection", """[connection]
id=Work GP
uuid=0b7b3f4c-2f7e-4a3b-9a51-3b1c4d1e2f00
type=vpn

[vpn]
authtype=password
cacert=/etc/ssl/work-ca.pem
cookie-flags=2
gateway=vpn.example.com
protocol=gp
reported_os=win
stoken_source=totp
stoken_string-flags=1
service-type=org.freedesktop.NetworkManager.openconnect

[vpn-secrets]
form:_login:user=alice
stoken_string=base32:JBSWY3DPEHPK3PXP
"""))
if c.get_id() != "Work GP":
    fail(f"id {c.get_id()}")
expect(data, {"protocol": "gp", "gateway": "vpn.example.com", "cafile": "/etc/ssl/work-ca.pem", "user": "alice",
              "reported_os": "win", "token_mode": "totp", "token_secret-flags": "0", "password-flags": "2"}, "oc keyfile")
if "authtype" in data or "stoken_source" in data:
    fail(f"NM-openconnect's items came along: {data}")
if secrets != {"token_secret": "base32:JBSWY3DPEHPK3PXP"}:
    fail(f"secrets {sorted(secrets)}")

c, data, _ = imported(write("office.conf", "[openconnect]\nDescription=Office\nHost=https://ocserv.example.com/\n"
                                          "Protocol=anyconnect\nUserCertificate=(null)\n"))
expect(data, {"protocol": "anyconnect", "gateway": "https://ocserv.example.com/"}, "oc export")
if c.get_id() != "Office":
    fail(f"id {c.get_id()}")

c, data, secrets = imported(write("portal.conf", "protocol=gp\nserver=https://portal.example.com/\nuser alice\n"
                                                 "kill-switch\nversion-string=6.1.0-33\n"))
expect(data, {"protocol": "gp", "gateway": "https://portal.example.com/", "user": "alice", "kill_switch": "yes",
              "version_string": "6.1.0-33"}, "config file")
if c.get_id() != "portal":
    fail(f"a config file's profile is named after the file: {c.get_id()}")

c.get_setting_vpn().add_secret("password", "s3cret")
c.get_setting_vpn().add_data_item("password-flags", "0")
out = os.path.join(work, plugin.get_suggested_filename(c))
if not plugin.export(out, c):
    fail("export failed")
with open(out) as f:
    if "s3cret" in f.read():
        fail("export wrote the password")
c2, data2, secrets2 = imported(out)
if data2 != data | {"password-flags": "0"} or secrets2 or c2.get_id() != "portal":
    fail(f"export read back differs: {data2} {secrets2}")
os.symlink(os.path.join(work, "elsewhere"), os.path.join(work, "link.nmconnection"))
try:
    plugin.export(os.path.join(work, "link.nmconnection"), c)
    fail("export followed a symbolic link")
except GLib.Error:
    pass
if os.path.exists(os.path.join(work, "elsewhere")):
    fail("export wrote through a symbolic link")

for text, why in (("[openconnect]\nHost=h\nProtocol=nc\n", "'nc' is not one espvpn speaks"),
                  ("protocol=gp\n", "no server"),
                  ("[vpn]\nservice-type=org.freedesktop.NetworkManager.openvpn\nremote=h\n", "openvpn")):
    try:
        plugin.import_(write("bad.conf", text))
        fail(f"imported {text!r}")
    except GLib.Error as e:
        if why not in e.message:
            fail(f"refusal of {text!r} says {e.message!r}, not {why!r}")
print("ok: loaded by libnm (name, service, capabilities 7); imported NM-openconnect keyfile and export, "
      "an openconnect config file; export read back; refusals say why")
