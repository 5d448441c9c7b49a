#include "src/nm/script_helper.h"

#include "src/nm/libnm.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "src/nm/espvpn_plugin.h"
#include "src/nm/nm_vpn_config.h"
#include "src/nm/nm_vpn_variant.h"

namespace espvpn::nm {
namespace {

constexpr int kCallTimeoutMs = 10000;

bool call(GDBusConnection* bus, const char* name, const char* method, GVariant* args) {
    GError* error = nullptr;
    GVariant* reply = g_dbus_connection_call_sync(bus, name, NM_VPN_DBUS_PLUGIN_PATH, NM_VPN_DBUS_PLUGIN_INTERFACE,
                                                  method, args, nullptr, G_DBUS_CALL_FLAGS_NONE, kCallTimeoutMs,
                                                  nullptr, &error);
    if (!reply) {
        std::fprintf(stderr, "nm-espvpn-helper: %s on %s failed: %s\n", method, name, error->message);
        g_error_free(error);
        return false;
    }
    g_variant_unref(reply);
    return true;
}

GVariant* one_dict(GVariant* dict) { return g_variant_new_tuple(&dict, 1); }

}  // namespace

int run_script_helper(char** environment) {
    ScriptEnvironment env;
    for (char** e = environment; e && *e; ++e) {
        const char* eq = std::strchr(*e, '=');
        if (eq) env.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
    }
    auto reason = env.find("reason");
    if (reason == env.end() || reason->second != "connect") return 0;

    auto name_it = env.find(kBusNameVariable);
    if (name_it == env.end() || name_it->second.empty()) {
        std::fprintf(stderr, "nm-espvpn-helper: %s is not set: not started by nm-espvpn-service?\n", kBusNameVariable);
        return 1;
    }
    const char* name = name_it->second.c_str();

    GError* error = nullptr;
    GDBusConnection* bus = g_bus_get_sync(G_BUS_TYPE_SYSTEM, nullptr, &error);
    if (!bus) {
        std::fprintf(stderr, "nm-espvpn-helper: cannot reach the system bus: %s\n", error->message);
        g_error_free(error);
        return 1;
    }

    int rc = 0;
    auto result = nm_config_from_script_env(env);
    if (auto* failure = std::get_if<NmConfigError>(&result)) {
        std::fprintf(stderr, "nm-espvpn-helper: unusable tunnel configuration: %s\n", failure->message.c_str());
        call(bus, name, "SetFailure", g_variant_new("(s)", failure->reason.c_str()));
        rc = 1;
    } else {
        const auto& config = std::get<NmVpnConfig>(result);
        bool ok = call(bus, name, "SetConfig", one_dict(generic_config_variant(config.generic)));
        if (ok && config.ip4) ok = call(bus, name, "SetIp4Config", one_dict(ip4_config_variant(*config.ip4)));
        if (ok && config.ip6) ok = call(bus, name, "SetIp6Config", one_dict(ip6_config_variant(*config.ip6)));
        rc = ok ? 0 : 1;
    }
    g_dbus_connection_flush_sync(bus, nullptr, nullptr);
    g_object_unref(bus);
    return rc;
}

}  // namespace espvpn::nm
