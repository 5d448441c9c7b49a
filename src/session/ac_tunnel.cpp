#include "src/session/ac_tunnel.h"

#include <gnutls/crypto.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "protocols/anyconnect/cstp.h"
#include "protocols/http/response_parser.h"
#include "src/datapath/stats_reporter.h"
#include "src/log/logger.h"
#include "src/session/ac_cstp_pump.h"
#include "src/session/signal_watch.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;

const char* describe(AcTunnelEnd end) {
    switch (end) {
        case AcTunnelEnd::user_logout: return "logged out";
        case AcTunnelEnd::user_detach: return "detached (session kept)";
        case AcTunnelEnd::server_disconnect: return "session terminated by the server";
        case AcTunnelEnd::peer_dead: return "the server stopped answering (DPD)";
        case AcTunnelEnd::cookie_rejected: return "cookie rejected";
        case AcTunnelEnd::error: return "error";
    }
    return "?";
}

Result<TunnelConfig> map_ac_tunnel_config(const anyconnect::AcCstpConfig& r, const std::string& peer_address) {
    TunnelConfig c;
    c.gateway_address = peer_address;
    c.ip4_address = r.ipv4_address;
    c.ip4_netmask = r.ipv4_netmask;
    c.ip6_address = r.ipv6_address;
    c.ip6_prefix = r.ipv6_prefix;
    c.mtu = r.mtu;
    c.dns = r.dns;
    c.nbns = r.nbns;
    c.default_domain = r.default_domain;
    c.split_dns = r.split_dns;
    c.banner = r.banner;
    c.proxy_pac = r.proxy_pac;
    c.idle_timeout_s = r.idle_timeout_s;
    for (const auto& route : r.split_include) {
        auto p = IpPrefix::parse(route.text);
        if (!p) return make_error("split-include " + route.text + ": " + p.error().message);
        c.split_include.push_back(*p);
    }
    for (const auto& route : r.split_exclude) {
        auto p = IpPrefix::parse(route.text);
        if (!p) return make_error("split-exclude " + route.text + ": " + p.error().message);
        c.split_exclude.push_back(*p);
    }
    c.protocol_options = r.cstp_options;
    return c;
}

namespace {

using cstp::CstpPump;
using cstp::kPollMs;
using cstp::now_ns;

struct ConnectOutcome {
    anyconnect::AcCstpConfig config;
    std::vector<std::uint8_t> early_bytes;  // CSTP bytes read together with the reply
};

// Writes the CONNECT and reads the reply headers; `refusal` gets the status.
Result<ConnectOutcome> send_connect(io::TlsStream& tls, const Secret& request, anyconnect::AcConnectRefusal& refusal) {
    if (auto st = tls.write_all(request.reveal()); !st) return make_error("CONNECT: " + st.error().message);
    http::ResponseParser parser;
    parser.begin("CONNECT");
    std::vector<std::uint8_t> buf(16384 + 1024);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    ConnectOutcome out;
    while (!parser.done()) {
        auto n = tls.read_some(buf, deadline);
        if (!n || *n == 0) {
            // A refusal (ocserv: "401 Cookie is not acceptable") has no Content-Length and is
            // followed by a fatal alert: the reply ends where the connection does.
            if (parser.started() && parser.finish_eof() && parser.done()) break;
            return make_error("CONNECT reply: " + (n ? std::string("the server closed the connection") : n.error().message));
        }
        auto used = parser.feed(std::span<const std::uint8_t>(buf.data(), *n));
        if (!used) return make_error("CONNECT reply: " + used.error().message);
        if (parser.done()) out.early_bytes.assign(buf.begin() + static_cast<std::ptrdiff_t>(*used), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
    http::Response response = parser.take_response();
    auto config = anyconnect::parse_connect_reply(response, &refusal);
    if (!config) return config.error();
    out.config = std::move(*config);
    return out;
}

// --stats-json for AnyConnect: which channel carries data, and both channels' counters.
std::string stats_json(const cstp::CstpStats& c, const AcDataChannel* channel, int dpd_s) {
    std::string j = "{\"protocol\": \"anyconnect\"";
    const std::optional<AcDtlsStats> d = channel ? std::optional<AcDtlsStats>(channel->stats()) : std::nullopt;
    j += std::string(", \"transport\": \"") + (d && d->carrying ? "dtls" : "cstp") + "\"";
    j += ", \"transport_switches\": " + std::to_string(d ? d->transport_switches : 0);
    j += ", \"dpd_s\": " + std::to_string(dpd_s);
    j += ", \"cstp\": {\"tx_packets\": " + std::to_string(c.tx_packets) + ", \"tx_bytes\": " +
         std::to_string(c.tx_bytes) + ", \"rx_packets\": " + std::to_string(c.rx_packets) + ", \"rx_bytes\": " +
         std::to_string(c.rx_bytes) + ", \"drop_rx\": " + std::to_string(c.drop_rx) +
         ", \"dpd_requests_sent\": " + std::to_string(c.dpd_requests_sent) + ", \"dpd_answered\": " +
         std::to_string(c.dpd_answered) + ", \"keepalives_sent\": " + std::to_string(c.keepalives_sent) + "}";
    if (d) {
        j += ", \"dtls\": {\"state\": \"" + std::string(d->carrying ? "up" : d->disabled ? "disabled" : "down") +
             "\", \"mode\": \"" + d->mode + "\", \"session\": \"" + d->description +
             "\", \"tunnel_mtu\": " + std::to_string(d->tunnel_mtu) + ", \"handshakes\": " +
             std::to_string(d->handshakes) + ", \"handshake_failures\": " + std::to_string(d->handshake_failures) +
             ", \"datapath\": " + d->totals.to_json() + "}";
    } else {
        j += ", \"dtls\": {\"state\": \"off\"}";
    }
    j += ", \"drops\": " + std::to_string(c.drop_rx + (d ? d->totals.drops() : 0)) + "}";
    return j;
}

std::string stats_text(const cstp::CstpStats& c, const AcDataChannel* channel) {
    std::string t = "CSTP: tx " + std::to_string(c.tx_packets) + " packets / " + std::to_string(c.tx_bytes) +
                    " bytes, rx " + std::to_string(c.rx_packets) + " packets / " + std::to_string(c.rx_bytes) +
                    " bytes, dropped rx " + std::to_string(c.drop_rx) + ", DPD answered " +
                    std::to_string(c.dpd_answered);
    if (!channel) return t + "; DTLS off";
    const AcDtlsStats d = channel->stats();
    return t + "\nDTLS (" + d.mode + ", " + (d.carrying ? "carrying data" : "down") + "): tx " +
           std::to_string(d.totals.tx.inner_packets) + " packets / " + std::to_string(d.totals.tx.inner_bytes) +
           " bytes, rx " + std::to_string(d.totals.rx.inner_packets) + " packets / " +
           std::to_string(d.totals.rx.inner_bytes) + " bytes, drops " + std::to_string(d.totals.drops()) +
           ", handshakes " + std::to_string(d.handshakes) + " (failed " + std::to_string(d.handshake_failures) +
           "), switches " + std::to_string(d.transport_switches);
}

std::string local_hostname() {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) == 0 && name[0]) return name;
    return "localhost";
}

}  // namespace

Result<AcTunnelEnd> run_ac_tunnel(io::HttpsClient& https, const AcAuthenticated& auth, const AcTunnelOptions& o,
                                  const AcDtlsFactory& dtls_factory) {
    // Signals are blocked before any thread starts, so every thread inherits the mask.
    SignalWatch signals;
    auto stream = https.release_connection(auth.server.host, auth.server.port);
    if (!stream) return stream.error();
    std::unique_ptr<io::TlsStream> tls = std::move(*stream);
    const auto peer = https.peer(auth.server.host, auth.server.port);
    const std::string peer_address = peer ? peer->address : auth.server.host;
    const bool outer_v6 = peer_address.find(':') != std::string::npos;

    anyconnect::AcConnectSettings s;
    s.host = auth.server.host;
    s.port = auth.server.port;
    s.user_agent = o.user_agent;
    s.hostname = o.hostname.empty() ? local_hostname() : o.hostname;
    s.base_mtu = std::max(o.base_mtu > 0 ? o.base_mtu : 1406, 1280);
    s.mtu = o.mtu > 0 ? o.mtu : anyconnect::requested_tunnel_mtu(s.base_mtu, outer_v6);
    s.ipv6 = !o.host.disable_ipv6;
    Secret master_secret;
    // DTLS is offered only when something can run it; otherwise ocserv would size
    // the MTU for a UDP channel that never comes.
    if (!o.no_dtls && !dtls_factory) LOG_INFO << "no DTLS channel in this build: data runs over CSTP (TLS)";
    if (!o.no_dtls && dtls_factory) {
        anyconnect::AcDtlsOffer offer;
        offer.master_secret = Secret(48);
        if (gnutls_rnd(GNUTLS_RND_KEY, offer.master_secret.reveal_mutable().data(), 48) != 0)
            return make_error("no random bytes for the DTLS master secret");
        master_secret = offer.master_secret.clone();
        s.dtls = std::move(offer);
    }
    auto request = anyconnect::build_connect_request(s, auth.webvpn);
    if (!request) return request.error();
    anyconnect::AcConnectRefusal refusal;
    auto connected = send_connect(*tls, *request, refusal);
    if (!connected) {
        LOG_ERROR << connected.error().message;
        return refusal.cookie_rejected() ? AcTunnelEnd::cookie_rejected : AcTunnelEnd::error;
    }
    const anyconnect::AcCstpConfig& reply = connected->config;
    auto config = map_ac_tunnel_config(reply, peer_address);
    if (!config) return config.error();
    int mtu = o.mtu > 0 ? o.mtu : reply.cstp_mtu;
    LOG_INFO << "CSTP connected to " << tls->endpoint() << " (" << tls->description() << "): address "
             << (reply.ipv4_address.empty() ? reply.ipv6_address : reply.ipv4_address)
             << (reply.ipv6_address.empty() || reply.ipv4_address.empty() ? "" : " and " + reply.ipv6_address)
             << ", MTU " << mtu << ", DPD " << reply.dpd_s << " s, keepalive " << reply.keepalive_s << " s";
    if (reply.dtls)
        LOG_INFO << "DTLS offered: " << reply.dtls->cipher_suite << " on UDP port " << reply.dtls->port;
    else if (s.dtls)
        LOG_INFO << "no DTLS" << (reply.dtls_unusable.empty() ? "" : " (" + reply.dtls_unusable + ")");
    if (!reply.banner.empty()) LOG_INFO << "banner: " << reply.banner;

    if (o.dry_run) {
        LOG_INFO << "dry run: not opening the tun; logging out";
        auto bye = anyconnect::cstp_logout_packet("Aborted by caller");
        if (auto st = tls->write_all(bye); !st) LOG_WARN << "logout: " << st.error().message;
        tls->close();
        return AcTunnelEnd::user_logout;
    }

    TunnelHost host(o.host);
    if (Status st = host.bring_up(*config, mtu); !st) return st.error();
    CstpPump pump(*tls, host.tun(), mtu);
    // The DTLS channel before the pump threads start: its factory exports the
    // PSK from the TLS session they are about to use.
    std::unique_ptr<AcDataChannel> channel;
    if (reply.dtls && dtls_factory) {
        AcDtlsContext ctx{tls->native(), peer_address, *reply.dtls, &master_secret,
                          reply.base_mtu > 0 ? reply.base_mtu : s.base_mtu, mtu, &host.tun()};
        auto made = dtls_factory(ctx, pump);
        if (!made) LOG_WARN << "DTLS not started (" << made.error().message << "); data stays on CSTP";
        else channel = std::move(*made);
        pump.set_channel(channel.get());
    }
    pump.start(connected->early_bytes);
    LOG_INFO << "tunnel up on " << host.tun().name() << " (data over CSTP"
             << (channel ? "; DTLS handshake started)" : ")");

    const int dpd_s = o.force_dpd_s > 0 ? o.force_dpd_s : reply.dpd_s;
    const std::int64_t dpd_ns = std::int64_t{dpd_s} * 1000000000;
    const std::int64_t keepalive_ns = std::int64_t{reply.keepalive_s} * 1000000000;
    std::int64_t last_dpd_sent = 0;
    datapath::StatsReporterOptions report;
    report.json_path = o.stats_json;
    auto reporter = datapath::StatsReporter::start(
        datapath::StatsView{[&] { return stats_json(pump.stats(), channel.get(), dpd_s); },
                            [&] { return stats_text(pump.stats(), channel.get()); }},
        report);
    if (!reporter) LOG_WARN << reporter.error().message;
    AcTunnelEnd end = AcTunnelEnd::user_logout;
    std::string reason;
    for (bool running = true; running;) {
        pollfd p{signals.fd(), POLLIN, 0};
        poll(&p, 1, kPollMs);
        for (int sig; (sig = signals.next()) != 0;) {
            if (sig == SIGHUP) {
                end = AcTunnelEnd::user_detach;
                running = false;
            } else if (sig == SIGINT || sig == SIGTERM) {
                end = AcTunnelEnd::user_logout;
                running = false;
            } else {
                LOG_INFO << "SIGUSR2: reconnect is not built yet; ignored";
            }
        }
        if (!running) break;
        if (auto e = pump.ended()) {
            end = e->first;
            reason = e->second;
            break;
        }
        const std::int64_t now = now_ns();
        const std::int64_t quiet = now - pump.last_rx_ns();
        if (dpd_ns > 0 && quiet > 2 * dpd_ns) {
            end = AcTunnelEnd::peer_dead;
            reason = "nothing received for " + std::to_string(quiet / 1000000000) + " s (DPD " + std::to_string(dpd_s) +
                     " s); reconnect is not built yet";
            break;
        }
        if (dpd_ns > 0 && quiet > dpd_ns && now - last_dpd_sent > dpd_ns / 2) {
            pump.request_dpd();
            last_dpd_sent = now;
        }
        if (keepalive_ns > 0 && now - pump.last_tx_ns() > keepalive_ns) pump.request_keepalive();
    }
    if (end == AcTunnelEnd::user_logout) {
        pump.request_logout();
        for (int i = 0; i < 20 && !pump.logout_sent() && !pump.ended(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (pump.logout_sent()) LOG_INFO << "logout (DISCONNECT) sent";
        else LOG_WARN << "could not send the logout";
    }
    // The reporter's last write (--stats-json) while the DTLS datapath still holds its counters.
    if (reporter) reporter->reset();
    LOG_INFO << "tunnel statistics:\n" << stats_text(pump.stats(), channel.get());
    // The pump's tx thread may be inside channel->send(): stop it before the channel goes.
    pump.set_channel(nullptr);
    pump.stop();
    channel.reset();
    if (!reason.empty()) {
        if (end == AcTunnelEnd::error || end == AcTunnelEnd::peer_dead) LOG_ERROR << reason;
        else LOG_INFO << reason;
    }
    tls->close();
    host.tear_down();
    return end;
}

}  // namespace espvpn::session
