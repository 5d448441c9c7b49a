// libnm for C++: some of its headers (nm-errors.h) lack extern "C", so the
// declarations would get C++ linkage. GLib comes first, outside the block (it
// has its own C++ guards and templates).
#pragma once

#include <gio/gio.h>
#include <glib.h>

extern "C" {
#include <NetworkManager.h>
}
