// nm-espvpn-service: the NetworkManager VPN plugin service for espvpn.
//   nm-espvpn-service [--bus-name NAME] [--persist] [--debug] [--espvpn PATH]
//   nm-espvpn-service --helper     (the vpnc-script espvpn runs; see script_helper.h)
// NetworkManager starts it (the .name file) with --bus-name; it exits when its
// connection has ended (unless --persist) or on SIGTERM/SIGINT, after espvpn is gone.
#include <glib-unix.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/nm/espvpn_plugin.h"
#include "src/nm/script_helper.h"
#include "src/nm/service_names.h"

extern char** environ;

namespace {

void usage(FILE* out) {
    std::fprintf(out,
                 "usage: nm-espvpn-service [--bus-name NAME] [--persist] [--debug] [--espvpn PATH]\n"
                 "       nm-espvpn-service --helper   (run by espvpn as its vpnc-script)\n"
                 "  --bus-name NAME  D-Bus name to own (default %s)\n"
                 "  --persist        keep running when the connection ends\n"
                 "  --debug          run espvpn with --verbose --verbose\n"
                 "  --espvpn PATH    the espvpn program (default %s)\n",
                 espvpn::nm::kServiceBusName, espvpn::nm::kDefaultEspvpnBinary);
}

// Our own path, so espvpn can run us as its script whatever the install prefix.
std::string self_path() {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    return std::string(buf, static_cast<std::size_t>(n));
}

struct Service {
    GMainLoop* loop = nullptr;
    NMVpnServicePlugin* plugin = nullptr;
};

// Quits the main loop, but only once espvpn has logged out and exited: NM may
// stop the service right after Disconnect.
void quit_when_idle(Service* svc) {
    if (!espvpn::nm::espvpn_child_running(svc->plugin)) {
        g_main_loop_quit(svc->loop);
        return;
    }
    espvpn::nm::on_espvpn_child_gone(svc->plugin, [svc] { g_main_loop_quit(svc->loop); });
    nm_vpn_service_plugin_disconnect(svc->plugin, nullptr);  // no-op when already stopping
}

}  // namespace

int main(int argc, char** argv) {
    // It handles the VPN secrets: no core dump, no ptrace or /proc reads by other users.
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    espvpn::nm::PluginOptions options;
    options.bus_name = espvpn::nm::kServiceBusName;
    options.espvpn_binary = espvpn::nm::kDefaultEspvpnBinary;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char* what) -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "nm-espvpn-service: %s needs a value\n", what);
                std::exit(1);
            }
            return argv[++i];
        };
        if (a == "--helper") return espvpn::nm::run_script_helper(environ);
        if (a == "--bus-name") options.bus_name = value("--bus-name");
        else if (a == "--espvpn") options.espvpn_binary = value("--espvpn");
        else if (a == "--persist") options.watch_peer = false;
        else if (a == "--debug") options.verbosity = 2;
        else if (a == "--help" || a == "-h") { usage(stdout); return 0; }
        else {
            std::fprintf(stderr, "nm-espvpn-service: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 1;
        }
    }
    if (access(options.espvpn_binary.c_str(), X_OK) != 0) {
        std::fprintf(stderr, "nm-espvpn-service: cannot run '%s': %s\n", options.espvpn_binary.c_str(),
                     std::strerror(errno));
        return 1;
    }
    const std::string self = self_path();
    if (self.empty()) {
        std::fprintf(stderr, "nm-espvpn-service: cannot find its own program file\n");
        return 1;
    }
    gchar* quoted = g_shell_quote(self.c_str());
    options.helper_command = std::string(quoted) + " --helper";
    g_free(quoted);
    signal(SIGPIPE, SIG_IGN);  // a child that dies before reading its stdin must not kill us

    GError* error = nullptr;
    Service svc;
    svc.plugin = espvpn::nm::create_espvpn_plugin(options, &error);
    if (!svc.plugin) {
        std::fprintf(stderr, "nm-espvpn-service: cannot register %s on the system bus: %s\n",
                     options.bus_name.c_str(), error->message);
        g_error_free(error);
        return 1;
    }
    svc.loop = g_main_loop_new(nullptr, FALSE);
    g_signal_connect_swapped(svc.plugin, "quit", G_CALLBACK(+[](Service* s) { quit_when_idle(s); }), &svc);
    auto on_signal = +[](gpointer data) -> gboolean {
        quit_when_idle(static_cast<Service*>(data));
        return G_SOURCE_CONTINUE;
    };
    g_unix_signal_add(SIGTERM, on_signal, &svc);
    g_unix_signal_add(SIGINT, on_signal, &svc);
    g_message("nm-espvpn-service owns %s; espvpn is %s", options.bus_name.c_str(), options.espvpn_binary.c_str());

    g_main_loop_run(svc.loop);

    // The last signals (Failure, StateChanged) may still sit in the connection's
    // queue: NetworkManager must get them before our bus name goes, or it reports
    // "The VPN service stopped unexpectedly" instead of the reason.
    if (GDBusConnection* bus = nm_vpn_service_plugin_get_connection(svc.plugin)) {
        g_dbus_connection_flush_sync(bus, nullptr, nullptr);
        g_object_unref(bus);
    }
    nm_vpn_service_plugin_shutdown(svc.plugin);
    g_object_unref(svc.plugin);
    g_main_loop_unref(svc.loop);
    return 0;
}
