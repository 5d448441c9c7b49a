"""Filling a GTK form through the accessibility tree (AT-SPI), as a person would with a
screen reader: for the espvpn editor tests (editor_gui.py, editor_nce.py)."""
import time

import pyatspi

# GTK 4.8's combo box shows its choices only in its popup, not in the accessibility
# tree; its Selection picks by index. The labels in the editor's order (profile_fields.cpp).
GTK4_CHOICES = {
    "Protocol": ["Cisco AnyConnect (ocserv)", "GlobalProtect"],
    "Password storage": ["Ask every time", "Saved for this user (keyring)", "Saved for all users", "Not required"],
    "Token secret storage": ["Saved for all users"],
    "Single sign-on": ["None (a password)", "In the desktop's browser", "In a browser espvpn drives (Chromium)"],
    "Soft token": ["None", "TOTP (time-based)", "HOTP (counter; key in a file)"],
    "Reported OS": ["Default (linux-64)", "Linux 64-bit", "Linux", "Windows", "macOS", "Android", "iOS"],
}


class FormError(Exception):
    pass


def find_app(name, pid=None, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for app in pyatspi.Registry.getDesktop(0):
            if app is not None and app.name == name and (pid is None or app.get_process_id() == pid):
                return app
        time.sleep(0.2)
    seen = [(a.name, a.get_process_id()) for a in pyatspi.Registry.getDesktop(0) if a is not None]
    raise FormError(f"{name} (pid {pid}) never appeared in the accessibility tree (there: {seen})")


class Form:
    def __init__(self, app, gtk):
        self.app = app
        self.gtk = gtk

    def find(self, name, roles, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = pyatspi.findDescendant(self.app, lambda a: a is not None and a.name == name
                                         and a.getRoleName() in roles)
            if hit is not None:
                return hit
            time.sleep(0.1)
        raise FormError(f"no {'/'.join(roles)} named '{name}'")

    def entry(self, name):
        return self.find(name, ("text", "entry", "password text"))

    def type(self, name, text, acc=None):
        acc = acc or self.entry(name)
        if not acc.queryEditableText().setTextContents(text):
            raise FormError(f"could not type into '{name}'")

    @staticmethod
    def text_of(acc):
        t = acc.queryText()
        return t.getText(0, t.characterCount)

    def choose(self, name, label):
        combo = self.find(name, ("combo box",))
        if self.gtk == 3:  # combo box > menu > menu items
            items = [c.name for menu in combo if menu is not None for c in menu if c is not None]
        else:
            items = GTK4_CHOICES[name]
        if label not in items:
            raise FormError(f"'{name}' offers {items}, not '{label}'")
        if not combo.querySelection().selectChild(items.index(label)):
            raise FormError(f"could not choose '{label}' in '{name}'")
        if self.gtk == 3:  # GTK3 names the combo box by its shown choice when it has no label
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                sel = combo.querySelection()
                if sel.nSelectedChildren and sel.getSelectedChild(0).name == label:
                    return
                time.sleep(0.05)
            raise FormError(f"'{name}' does not show '{label}' after choosing it")

    @staticmethod
    def press(acc):
        """Its first action (GTK3), else a click in its middle as a person would
        (GTK 4.8 has no AT-SPI actions on buttons; the registry clicks through XTest)."""
        try:
            action = acc.queryAction()
            if action.nActions > 0 and action.doAction(0):
                return
        except NotImplementedError:
            pass
        # GTK4 on X11 reports window coordinates; under Xvfb with no window manager the
        # window sits at the origin, so they are the screen's.
        box = acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        pyatspi.Registry.generateMouseEvent(box.x + box.width // 2, box.y + box.height // 2, "b1c")

    def toggle(self, name):
        self.press(self.find(name, ("check box", "check button", "toggle button")))

    def button(self, name):
        return self.find(name, ("push button", "button"))

    @staticmethod
    def sensitive(acc):
        return acc.getState().contains(pyatspi.STATE_SENSITIVE)
