#include <doctest/doctest.h>

#include <arpa/inet.h>

#include <string>

#include "src/nm/nm_vpn_variant.h"

using namespace espvpn::nm;

namespace {

// The dictionary as GVariant text, with its types (what NM receives).
std::string text_of(GVariant* floating) {
    GVariant* v = g_variant_ref_sink(floating);
    gchar* s = g_variant_print(v, TRUE);
    std::string out(s);
    g_free(s);
    g_variant_unref(v);
    return out;
}

Ip4Address v4(const char* text) {
    Ip4Address a{};
    inet_pton(AF_INET, text, a.data());
    return a;
}
Ip6Address v6(const char* text) {
    Ip6Address a{};
    inet_pton(AF_INET6, text, a.data());
    return a;
}
// The uint32 NM expects for an address: its bytes in network order.
std::string u32(const char* text) { return std::to_string(inet_addr(text)); }

}  // namespace

TEST_CASE("nm variant: generic config") {
    NmGenericConfig c;
    c.gateway = v4("10.201.0.1");
    c.tundev = "tun0";
    c.mtu = 1400;
    c.banner = "hi";
    c.has_ip4 = true;
    CHECK(text_of(generic_config_variant(c)) ==
          "{'gateway': <uint32 " + u32("10.201.0.1") +
              ">, 'tundev': <'tun0'>, 'mtu': <uint32 1400>, 'banner': <'hi'>, 'can-persist': <true>, "
              "'has-ip4': <true>, 'has-ip6': <false>}");
    c.gateway = v6("fd00::1");
    c.mtu.reset();
    c.banner.clear();
    c.proxy_pac = "http://pac.test/p.pac";
    CHECK(text_of(generic_config_variant(c)) ==
          "{'gateway': <[byte 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, "
          "0x00, 0x01]>, 'tundev': <'tun0'>, 'pac': <'http://pac.test/p.pac'>, 'can-persist': <true>, "
          "'has-ip4': <true>, 'has-ip6': <false>}");
}

TEST_CASE("nm variant: ip4 config") {
    NmIp4Config c;
    c.address = v4("10.200.0.2");
    c.prefix = 32;
    CHECK(text_of(ip4_config_variant(c)) == "{'address': <uint32 " + u32("10.200.0.2") + ">, 'ptp': <uint32 " +
                                               u32("10.200.0.2") +
                                               ">, 'prefix': <uint32 32>, 'never-default': <false>}");
    c.dns = {v4("10.202.0.53")};
    c.nbns = {v4("10.202.0.54")};
    c.domains = {"corp.test", "lab.test"};
    c.routes = {{v4("10.202.0.0"), 24}, {v4("172.16.0.0"), 12}};
    c.never_default = true;
    CHECK(text_of(ip4_config_variant(c)) ==
          "{'address': <uint32 " + u32("10.200.0.2") + ">, 'ptp': <uint32 " + u32("10.200.0.2") +
              ">, 'prefix': <uint32 32>, 'dns': <[uint32 " + u32("10.202.0.53") + "]>, 'nbns': <[uint32 " +
              u32("10.202.0.54") + "]>, 'domains': <['corp.test', 'lab.test']>, 'routes': <[[uint32 " +
              u32("10.202.0.0") + ", 24, 0, 0], [" + u32("172.16.0.0") + ", 12, 0, 0]]>, 'never-default': <true>}");
}

TEST_CASE("nm variant: ip6 config") {
    NmIp6Config c;
    c.address = v6("fd00:200::2");
    c.prefix = 64;
    c.dns = {v6("fd00::53")};
    c.domain = "corp.test";
    c.routes = {{v6("fd00:202::"), 64}};
    c.never_default = true;
    GVariant* v = g_variant_ref_sink(ip6_config_variant(c));
    CHECK(g_variant_is_of_type(v, G_VARIANT_TYPE_VARDICT));
    GVariant* routes = g_variant_lookup_value(v, "routes", G_VARIANT_TYPE("a(ayuayu)"));
    REQUIRE(routes);
    CHECK(g_variant_n_children(routes) == 1);
    GVariant* route = g_variant_get_child_value(routes, 0);
    GVariant* net = g_variant_get_child_value(route, 0);
    gsize n = 0;
    const auto* bytes = static_cast<const guint8*>(g_variant_get_fixed_array(net, &n, 1));
    CHECK(n == 16);
    CHECK(Ip6Address{bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8],
                     bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]} == v6("fd00:202::"));
    guint32 prefix = 0;
    g_variant_get_child(route, 1, "u", &prefix);
    CHECK(prefix == 64);
    g_variant_unref(net);
    g_variant_unref(route);
    g_variant_unref(routes);
    guint32 p = 0;
    CHECK(g_variant_lookup(v, "prefix", "u", &p));
    CHECK(p == 64);
    GVariant* dns = g_variant_lookup_value(v, "dns", G_VARIANT_TYPE("aay"));
    REQUIRE(dns);
    CHECK(g_variant_n_children(dns) == 1);
    g_variant_unref(dns);
    const char* domain = nullptr;
    CHECK(g_variant_lookup(v, "domain", "&s", &domain));
    CHECK(std::string(domain) == "corp.test");
    gboolean never_default = FALSE;
    CHECK(g_variant_lookup(v, "never-default", "b", &never_default));
    CHECK(never_default);
    GVariant* address = g_variant_lookup_value(v, "address", G_VARIANT_TYPE("ay"));
    CHECK(address != nullptr);
    if (address) g_variant_unref(address);
    g_variant_unref(v);
}
