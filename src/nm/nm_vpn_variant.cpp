#include "src/nm/nm_vpn_variant.h"

#include "src/nm/libnm.h"

#include <cstring>

namespace espvpn::nm {
namespace {

// IPv4 addresses travel as a uint32 holding the bytes in network order.
guint32 ip4_u32(const Ip4Address& a) {
    guint32 v = 0;
    std::memcpy(&v, a.data(), sizeof v);
    return v;
}

GVariant* bytes_variant(const Ip6Address& a) {
    return g_variant_new_fixed_array(G_VARIANT_TYPE_BYTE, a.data(), a.size(), 1);
}

GVariant* ip4_list_variant(const std::vector<Ip4Address>& list) {
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE("au"));
    for (const auto& a : list) g_variant_builder_add(&b, "u", ip4_u32(a));
    return g_variant_builder_end(&b);
}

void add(GVariantBuilder* b, const char* key, GVariant* value) { g_variant_builder_add(b, "{sv}", key, value); }

}  // namespace

GVariant* generic_config_variant(const NmGenericConfig& c) {
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    if (const auto* v4 = std::get_if<Ip4Address>(&c.gateway))
        add(&b, NM_VPN_PLUGIN_CONFIG_EXT_GATEWAY, g_variant_new_uint32(ip4_u32(*v4)));
    else
        add(&b, NM_VPN_PLUGIN_CONFIG_EXT_GATEWAY, bytes_variant(std::get<Ip6Address>(c.gateway)));
    add(&b, NM_VPN_PLUGIN_CONFIG_TUNDEV, g_variant_new_string(c.tundev.c_str()));
    if (c.mtu) add(&b, NM_VPN_PLUGIN_CONFIG_MTU, g_variant_new_uint32(*c.mtu));
    if (!c.banner.empty()) add(&b, NM_VPN_PLUGIN_CONFIG_BANNER, g_variant_new_string(c.banner.c_str()));
    if (!c.proxy_pac.empty()) add(&b, NM_VPN_PLUGIN_CONFIG_PROXY_PAC, g_variant_new_string(c.proxy_pac.c_str()));
    // espvpn reconnects by itself (same cookie) when the path changes.
    add(&b, NM_VPN_PLUGIN_CAN_PERSIST, g_variant_new_boolean(TRUE));
    add(&b, NM_VPN_PLUGIN_CONFIG_HAS_IP4, g_variant_new_boolean(c.has_ip4));
    add(&b, NM_VPN_PLUGIN_CONFIG_HAS_IP6, g_variant_new_boolean(c.has_ip6));
    return g_variant_builder_end(&b);
}

GVariant* ip4_config_variant(const NmIp4Config& c) {
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    // A point-to-point tun: the peer address is our own (as NM-openconnect reports it).
    add(&b, NM_VPN_PLUGIN_IP4_CONFIG_ADDRESS, g_variant_new_uint32(ip4_u32(c.address)));
    add(&b, NM_VPN_PLUGIN_IP4_CONFIG_PTP, g_variant_new_uint32(ip4_u32(c.address)));
    add(&b, NM_VPN_PLUGIN_IP4_CONFIG_PREFIX, g_variant_new_uint32(c.prefix));
    if (!c.dns.empty()) add(&b, NM_VPN_PLUGIN_IP4_CONFIG_DNS, ip4_list_variant(c.dns));
    if (!c.nbns.empty()) add(&b, NM_VPN_PLUGIN_IP4_CONFIG_NBNS, ip4_list_variant(c.nbns));
    if (!c.domains.empty()) {
        GVariantBuilder d;
        g_variant_builder_init(&d, G_VARIANT_TYPE_STRING_ARRAY);
        for (const auto& domain : c.domains) g_variant_builder_add(&d, "s", domain.c_str());
        add(&b, NM_VPN_PLUGIN_IP4_CONFIG_DOMAINS, g_variant_builder_end(&d));
    }
    if (!c.routes.empty()) {
        // Each route: [network, prefix, next hop (0 = the tun), metric (0 = default)].
        GVariantBuilder r;
        g_variant_builder_init(&r, G_VARIANT_TYPE("aau"));
        for (const auto& route : c.routes) {
            const guint32 item[4] = {ip4_u32(route.network), route.prefix, 0, 0};
            g_variant_builder_add_value(&r, g_variant_new_fixed_array(G_VARIANT_TYPE_UINT32, item, 4, sizeof(guint32)));
        }
        add(&b, NM_VPN_PLUGIN_IP4_CONFIG_ROUTES, g_variant_builder_end(&r));
    }
    add(&b, NM_VPN_PLUGIN_IP4_CONFIG_NEVER_DEFAULT, g_variant_new_boolean(c.never_default));
    return g_variant_builder_end(&b);
}

GVariant* ip6_config_variant(const NmIp6Config& c) {
    GVariantBuilder b;
    g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
    add(&b, NM_VPN_PLUGIN_IP6_CONFIG_ADDRESS, bytes_variant(c.address));
    add(&b, NM_VPN_PLUGIN_IP6_CONFIG_PTP, bytes_variant(c.address));
    add(&b, NM_VPN_PLUGIN_IP6_CONFIG_PREFIX, g_variant_new_uint32(c.prefix));
    if (!c.dns.empty()) {
        GVariantBuilder d;
        g_variant_builder_init(&d, G_VARIANT_TYPE("aay"));
        for (const auto& a : c.dns) g_variant_builder_add_value(&d, bytes_variant(a));
        add(&b, NM_VPN_PLUGIN_IP6_CONFIG_DNS, g_variant_builder_end(&d));
    }
    if (!c.domain.empty()) add(&b, NM_VPN_PLUGIN_IP6_CONFIG_DOMAIN, g_variant_new_string(c.domain.c_str()));
    if (!c.routes.empty()) {
        // libnm's legacy IPv6 route tuple: (network, prefix, next hop, metric).
        static const Ip6Address kNoNextHop{};
        GVariantBuilder r;
        g_variant_builder_init(&r, G_VARIANT_TYPE("a(ayuayu)"));
        for (const auto& route : c.routes)
            g_variant_builder_add(&r, "(@ayu@ayu)", bytes_variant(route.network), route.prefix,
                                  bytes_variant(kNoNextHop), 0u);
        add(&b, NM_VPN_PLUGIN_IP6_CONFIG_ROUTES, g_variant_builder_end(&r));
    }
    add(&b, NM_VPN_PLUGIN_IP6_CONFIG_NEVER_DEFAULT, g_variant_new_boolean(c.never_default));
    return g_variant_builder_end(&b);
}

}  // namespace espvpn::nm
