#include "src/session/anyconnect/tunnel.h"

#include <algorithm>

#include "protocols/anyconnect/cstp.h"
#include "protocols/anyconnect/tunnel_mtu.h"
#include "src/io/dtls_channel.h"
#include "src/log/logger.h"
#include "src/session/anyconnect/cstp_link.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;

namespace {

using datapath::TlsPump;

// What the session did beyond carrying packets: reconnects and rekeys.
struct AcSessionCounters {
    std::uint64_t reconnects = 0;         // outages ended by a new connection
    std::uint64_t outage_drops = 0;       // tun packets dropped while no connection existed
    std::int64_t last_outage_ms = -1;
    std::uint64_t renewals = 0;           // connections replaced while up (SIGUSR2, rekey new-tunnel)
    std::int64_t last_switch_ms = -1;     // old connection stopped -> new one carrying
    std::uint64_t rekeys_ssl = 0;         // TLS rehandshakes done
    std::int64_t last_rehandshake_ms = -1;
    std::uint64_t rekey_fallbacks = 0;    // rehandshakes that failed (new tunnel instead)
};

// The session's counters at one moment: totals over every connection so far.
struct AcStatsSnapshot {
    datapath::TlsTunnelStats cstp;
    std::optional<AcDtlsStats> dtls;  // nullopt: DTLS not offered
    AcSessionCounters counters;
    bool connected = true;            // false during an outage
};

// --stats-json for AnyConnect: which channel carries data, both channels' counters
// (totals over every connection of the session), reconnects and rekeys.
std::string stats_json(const AcStatsSnapshot& s, int dpd_s, anyconnect::AcRekeyMethod rekey, int rekey_s) {
    const datapath::TlsTunnelStats& c = s.cstp;
    const std::optional<AcDtlsStats>& d = s.dtls;
    const AcSessionCounters& n = s.counters;
    std::string j = "{\"protocol\": \"anyconnect\"";
    j += std::string(", \"transport\": \"") + (!s.connected ? "none" : d && d->carrying ? "dtls" : "cstp") + "\"";
    j += ", \"transport_switches\": " + std::to_string(d ? d->transport_switches : 0);
    j += ", \"dpd_s\": " + std::to_string(dpd_s);
    j += ", \"cstp\": {";
    datapath::append_json_members(j, c);
    j += "}";
    if (d) {
        j += ", \"dtls\": {\"state\": \"" + std::string(d->carrying ? "up" : d->disabled ? "disabled" : "down") +
             "\", \"mode\": \"" + d->mode + "\", \"session\": \"" + d->description +
             "\", \"tunnel_mtu\": " + std::to_string(d->tunnel_mtu) + ", \"handshakes\": " +
             std::to_string(d->handshakes) + ", \"handshake_failures\": " + std::to_string(d->handshake_failures) +
             ", \"rekeys\": " + std::to_string(d->rekeys) + ", \"datapath\": " + d->totals.to_json() + "}";
    } else {
        j += ", \"dtls\": {\"state\": \"off\"}";
    }
    j += ", \"reconnect\": {\"reconnects\": " + std::to_string(n.reconnects) + ", \"outage_drops\": " +
         std::to_string(n.outage_drops) + ", \"last_outage_ms\": " + std::to_string(n.last_outage_ms) +
         ", \"renewals\": " + std::to_string(n.renewals) + ", \"last_switch_ms\": " + std::to_string(n.last_switch_ms) + "}";
    j += ", \"rekey\": {\"method\": \"" + std::string(anyconnect::rekey_method_name(rekey)) + "\", \"interval_s\": " +
         std::to_string(rekey_s) + ", \"ssl\": " + std::to_string(n.rekeys_ssl) + ", \"last_rehandshake_ms\": " +
         std::to_string(n.last_rehandshake_ms) + ", \"fallbacks\": " + std::to_string(n.rekey_fallbacks) + "}";
    j += ", \"drops\": " + std::to_string(datapath::drops_of(c) + (d ? d->totals.drops() : 0) + n.outage_drops) + "}";
    return j;
}

std::string stats_text(const AcStatsSnapshot& s) {
    const datapath::TlsTunnelStats& c = s.cstp;
    const std::optional<AcDtlsStats>& d = s.dtls;
    const AcSessionCounters& n = s.counters;
    std::string t = "CSTP: tx " + std::to_string(c.tx_packets) + " packets / " + std::to_string(c.tx_bytes) +
                    " bytes, rx " + std::to_string(c.rx_packets) + " packets / " + std::to_string(c.rx_bytes) +
                    " bytes, dropped " + std::to_string(datapath::drops_of(c)) + ", DPD answered " +
                    std::to_string(c.tx_dpd_responses);
    if (n.reconnects || n.renewals || n.rekeys_ssl || n.outage_drops)
        t += "; reconnects " + std::to_string(n.reconnects) + " (tun packets dropped meanwhile " +
             std::to_string(n.outage_drops) + "), new connections while up " + std::to_string(n.renewals) +
             ", TLS rehandshakes " + std::to_string(n.rekeys_ssl);
    if (!d) return t + "; DTLS off";
    return t + "\nDTLS (" + d->mode + ", " + (d->carrying ? "carrying data" : "down") + "): tx " +
           std::to_string(d->totals.tx.inner_packets) + " packets / " + std::to_string(d->totals.tx.inner_bytes) +
           " bytes, rx " + std::to_string(d->totals.rx.inner_packets) + " packets / " +
           std::to_string(d->totals.rx.inner_bytes) + " bytes, drops " + std::to_string(d->totals.drops()) +
           ", handshakes " + std::to_string(d->handshakes) + " (failed " + std::to_string(d->handshake_failures) +
           "), switches " + std::to_string(d->transport_switches) + ", rekeys " + std::to_string(d->rekeys);
}

// The AnyConnect driver of the session core: CstpLinks (with their DTLS
// channels) over the session's tun; the core owns signals, host, reporter and
// the outage. Steps the current link: DPD, keepalive, rekey (TLS rehandshake or
// a new tunnel), the pump's end.
class AcDriver final : public SessionDriver {
public:
    AcDriver(io::HttpsClient& https, const AcAuthenticated& auth, const TunnelOptions& o)
        : https_(https), auth_(auth), o_(o) {}

    Result<Prepared> prepare() override;
    Result<std::optional<LinkEvent>> start(host::Host& host) override;
    std::string peer() const override { return "the server"; }
    std::string attempt_text() const override { return "new TLS connection, CONNECT with the same cookie"; }
    std::vector<LinkEvent> step(Clock::time_point now, const SessionControl& control) override;
    int poll_ms() const override {
        // While a rehandshake runs, both pump threads wait for the control loop: look often.
        // (Not after a failure: that state lasts while the fallback's new connection is made.)
        const TlsPump::Rehandshake rh = link_ ? link_->pump()->rehandshake_state() : TlsPump::Rehandshake::idle;
        return rh != TlsPump::Rehandshake::idle && rh != TlsPump::Rehandshake::failed ? 2 : SessionDriver::poll_ms();
    }
    std::string renew_blocked() const override {
        if (link_ && link_->pump()->rehandshake_state() != TlsPump::Rehandshake::idle) return "a TLS rehandshake is running";
        return {};
    }
    int session_lifetime_s() const override { return first_reply_.session_timeout_s; }
    std::string transport_name() const override {
        const AcStatsSnapshot s = snapshot();
        if (!s.connected) return {};
        return s.dtls && s.dtls->carrying ? "DTLS" : "CSTP";
    }
    datapath::StatsView stats_view() override {
        const int stats_dpd_s = dpd_s();
        return {[this, stats_dpd_s] { return stats_json(snapshot(), stats_dpd_s, first_reply_.rekey, first_reply_.rekey_s); },
                [this] { return stats_text(snapshot()); }};
    }
    // Roaming: the TCP peer's path; a DPD now; the link's last receive (CSTP or DTLS).
    std::string path_peer() const override { return peer_address_; }
    bool probe_path() override {
        if (!link_ || link_->pump()->ended() || link_->pump()->rehandshake_state() != TlsPump::Rehandshake::idle) return false;
        link_->pump()->request_dpd();
        return true;
    }
    Clock::time_point last_receive() const override {
        return link_ ? Clock::time_point{std::chrono::nanoseconds(link_->pump()->last_rx_ns())} : Clock::time_point{};
    }
    std::unique_ptr<LinkAttempt> begin_attempt(AttemptPurpose purpose) override;
    AttemptResult finish_attempt(AttemptPurpose purpose, bool in_outage, const std::string& why) override;
    void drop_link() override {
        retire_link();
        if (!drain_) {
            auto drain = std::make_unique<TunDrain>(host_->tun(), tun_mtu_);
            std::lock_guard<std::mutex> lock(link_mutex_);
            drain_ = std::move(drain);
        }
    }
    void outage_ended(Clock::duration length) override {
        count([&](AcSessionCounters& c) { c.last_outage_ms = ms_of(length); });
    }
    void logout() override {
        if (link_) link_->logout();
        else LOG_WARN << "no connection to the server: logout not sent (the server ends the session after its cookie timeout)";
    }
    void stop() override {
        if (!host_) return;  // never started: the first link (if any) closes with its owner
        LOG_INFO << "tunnel statistics:\n" << stats_text(snapshot());
        retire_link();
        drain_.reset();
        host_ = nullptr;
    }

private:
    // The new connection's reply must fit the tun as configured (address); the MTU may change.
    Status adopt_config(const anyconnect::AcCstpConfig& reply);
    void start_link(std::unique_ptr<CstpLink> link) {
        CstpLink::DtlsSetup d{o_.no_dtls ? nullptr : &o_, dtls_peer_address_, &master_secret_, settings_.base_mtu};
        link->start(host_->tun(), tun_mtu_, d);
        schedule_rekey(*link);
        std::lock_guard<std::mutex> lock(link_mutex_);
        link_ = std::move(link);
    }
    // Stops the current connection (no BYE) and folds its counters into the session's.
    void retire_link() {
        std::unique_ptr<CstpLink> old = take(link_);
        if (!old) return;
        AcDtlsStats d;
        old->stop(&d);
        std::lock_guard<std::mutex> lock(link_mutex_);
        cstp_history_.add(old->cstp_stats());
        add_dtls_history(dtls_history_, d);
    }
    // Make-before-break (SIGUSR2, rekey new-tunnel): the core makes the new link while this one carries data.
    LinkEvent renew_for_rekey(const std::string& why) {
        rekey_pending_ = true;
        return LinkEvent::renew(AttemptPurpose::renew, why, true);
    }
    int dpd_s() const {
        if (o_.force_dpd_s > 0) return o_.force_dpd_s;
        return link_ ? link_->reply().dpd_s : first_reply_.dpd_s;
    }
    AcStatsSnapshot snapshot() const;
    // Counter updates from the control thread, read by the reporter thread.
    template <typename F>
    void count(F&& update) {
        std::lock_guard<std::mutex> lock(link_mutex_);
        update(counters_);
    }
    // Takes the link or the drain out of the reporter's sight; it ends outside the lock.
    template <typename T>
    std::unique_ptr<T> take(std::unique_ptr<T>& p) {
        std::lock_guard<std::mutex> lock(link_mutex_);
        return std::move(p);
    }
    void schedule_rekey(CstpLink& link) const {
        const auto& r = link.reply();
        link.rekey_at = r.rekey_s > 0 && r.rekey != anyconnect::AcRekeyMethod::none
                            ? Clock::now() + std::chrono::seconds(r.rekey_s)
                            : Clock::time_point::max();
    }

    io::HttpsClient& https_;
    const AcAuthenticated& auth_;
    const TunnelOptions& o_;
    anyconnect::AcConnectSettings settings_;
    Secret master_secret_;
    Secret request_;              // the CONNECT, built once per address set
    std::string peer_address_;       // the TCP peer (VPNGATEWAY): the server, or the proxy
    std::string dtls_peer_address_;  // the server itself, for DTLS
    anyconnect::AcCstpConfig first_reply_;
    std::unique_ptr<CstpLink> first_;  // connected by prepare(), started by start()
    host::Host* host_ = nullptr;
    int tun_mtu_ = 0;

    mutable std::mutex link_mutex_;  // link_ swaps vs. the stats reporter
    std::unique_ptr<CstpLink> link_;
    datapath::TlsTunnelStats cstp_history_;
    AcDtlsStats dtls_history_;
    AcSessionCounters counters_;
    std::unique_ptr<TunDrain> drain_;

    // The attempt's outcome, written by its thread before it is done.
    std::optional<Result<std::unique_ptr<CstpLink>>> attempt_link_;
    anyconnect::AcConnectRefusal refusal_;
    bool rekey_pending_ = false;  // the next renewal is a rekey (tried again later if it fails)
    bool attempt_is_rekey_ = false;
};

std::unique_ptr<LinkAttempt> AcDriver::begin_attempt(AttemptPurpose purpose) {
    attempt_is_rekey_ = purpose == AttemptPurpose::renew && rekey_pending_;
    rekey_pending_ = false;
    attempt_link_.reset();
    refusal_ = {};
    // To the address of the first connection: no resolver (which nothing could cancel), and
    // the session stays on the server that holds it.
    auto target = std::make_shared<CstpLinkTarget>(
        CstpLinkTarget{auth_.server.host, auth_.server.port, peer_address_, https_.credentials()});
    auto request = std::make_shared<Secret>(request_.clone());
    return std::make_unique<LinkAttempt>([this, target, request](int cancel_fd) {
        attempt_link_.emplace(connect_cstp_link(*target, *request, cancel_fd, refusal_));
    });
}

AttemptResult AcDriver::finish_attempt(AttemptPurpose, bool in_outage, const std::string& why) {
    Result<std::unique_ptr<CstpLink>> link = std::move(*attempt_link_);
    attempt_link_.reset();
    if (!link) {
        AttemptResult r = AttemptResult::of(
            refusal_.cookie_rejected() ? AttemptResult::Kind::cookie_rejected : AttemptResult::Kind::failed,
            link.error().message);
        if (r.kind == AttemptResult::Kind::cookie_rejected || in_outage) return r;
        // The old connection ended meanwhile (or a failed rehandshake left it unusable): the next step says how.
        if (link_->pump()->ended()) {
            r.old_link_down = true;
        } else if (attempt_is_rekey_) {
            const auto wait = std::clamp(std::chrono::seconds(link_->reply().rekey_s / 4), std::chrono::seconds(1),
                                         std::chrono::seconds(60));
            link_->rekey_at = Clock::now() + wait;
            r.note = "; trying again in " + std::to_string(wait.count()) + " s";
        }
        return r;
    }
    if (Status st = adopt_config((*link)->reply()); !st) return AttemptResult::fatal(st.error().message);
    if (in_outage) {
        std::unique_ptr<TunDrain> drain = take(drain_);
        const std::uint64_t dropped = drain ? drain->dropped() : 0;
        drain.reset();  // the tun reader stops before the pump's starts
        start_link(std::move(*link));
        count([&](AcSessionCounters& c) {
            c.outage_drops += dropped;
            ++c.reconnects;
        });
        return AttemptResult::opened("to " + link_->tls().endpoint(),
                                     " (tun packets dropped meanwhile: " + std::to_string(dropped) + ")");
    }
    const Clock::time_point t0 = Clock::now();
    retire_link();
    start_link(std::move(*link));
    const std::int64_t switch_ms = ms_of(Clock::now() - t0);
    count([&](AcSessionCounters& c) {
        c.last_switch_ms = switch_ms;
        ++c.renewals;
    });
    return AttemptResult::opened("to " + link_->tls().endpoint() + " (" + why + ") after 1 attempt(s); outage " +
                                 std::to_string(switch_ms) + " ms (old connection stopped -> new one carrying)");
}

Status AcDriver::adopt_config(const anyconnect::AcCstpConfig& r) {
    const TunnelConfig &now = r.tunnel, &was = first_reply_.tunnel;
    if (now.ip4_address != was.ip4_address || now.ip4_netmask != was.ip4_netmask || now.ip6_address != was.ip6_address) {
        // One tun configuration per run (routes, DNS and scripts were set up for it).
        return make_error("the server assigned other addresses on the new connection (" + now.ip4_address + " " +
                          now.ip6_address + ", was " + was.ip4_address + " " + was.ip6_address +
                          "); ending: start espvpn again for the new configuration");
    }
    const int mtu = o_.mtu > 0 ? o_.mtu : r.cstp_mtu;
    if (mtu != tun_mtu_) {
        if (Status st = host_->tun().set_mtu(static_cast<unsigned>(mtu)); !st)
            LOG_WARN << "tun MTU " << tun_mtu_ << " -> " << mtu << ": " << st.error().message;
        else
            LOG_INFO << "tun MTU changed from " << tun_mtu_ << " to " << mtu << " (new CONNECT reply)";
        tun_mtu_ = mtu;
    }
    return {};
}

std::vector<LinkEvent> AcDriver::step(Clock::time_point now, const SessionControl& control) {
    if (!link_) return {};  // an outage: the core makes the attempts
    const bool attempting = control.attempt_in_flight();
    CstpLink& link = *link_;
    TlsPump& pump = *link.pump();
    using RH = TlsPump::Rehandshake;
    const RH rh = pump.rehandshake_state();
    if (rh == RH::done) {
        // A TLS 1.2 renegotiation gives the session a new exporter secret, so later DTLS handshakes
        // need a new PSK: a new channel now. A TLS 1.3 key update leaves the exporter (and the PSK)
        // as they were: the DTLS channel carries on (and keeps its own rekey time).
        const bool new_psk = gnutls_protocol_get_version(link.tls().native()) != GNUTLS_TLS1_3;
        std::unique_ptr<AcDataChannel> old;
        {
            std::lock_guard<std::mutex> lock(link_mutex_);  // the channel swap vs. the reporter
            if (new_psk) old = link.renew_channel(tun_mtu_);
            ++counters_.rekeys_ssl;
            counters_.last_rehandshake_ms = pump.rehandshake_ms();
        }
        pump.resume();
        if (old) {
            const AcDtlsStats last = old->stats();
            old.reset();
            std::lock_guard<std::mutex> lock(link_mutex_);
            add_dtls_history(dtls_history_, last);
        }
        schedule_rekey(link);
        LOG_INFO << "rekey (ssl): TLS rehandshake done in " << pump.rehandshake_ms() << " ms, after "
                 << pump.rehandshake_wait_ms() << " ms waiting for a pause in the server's data ("
                 << link.tls().description() << ")"
                 << (!link.channel() ? "" : new_psk ? "; new DTLS handshake" : "; DTLS carries on (same PSK)");
        return {};
    }
    if (rh == RH::failed || rh == RH::declined) {
        // Failed: the old connection is unusable, but its DTLS channel may carry data until the
        // new one is up. Declined: no handshake began, the connection is sound and carries on.
        if (link.fallback_started) return {};
        count([](AcSessionCounters& c) { ++c.rekey_fallbacks; });
        if (rh == RH::declined) pump.resume();
        else link.fallback_started = true;
        const std::string why = std::string("rekey: TLS rehandshake ") + (rh == RH::failed ? "failed" : "not attempted") +
                                " (" + pump.rehandshake_failure() + "), new tunnel instead";
        if (!attempting) return {renew_for_rekey(why)};  // else the one being made takes over
        return {};
    }
    if (auto e = pump.ended()) {
        // While its replacement is being made, the old link's end waits for that attempt: a server
        // moving the session to the new connection (ocserv: "session re-use") ends the old one first.
        if (attempting) return {};
        if (e->first == datapath::TlsPumpEnd::connection_lost) return {LinkEvent::lost(e->second)};
        const bool server = e->first == datapath::TlsPumpEnd::server_disconnect;
        return {LinkEvent::ended(server ? TunnelEnd::server_disconnect : TunnelEnd::error, e->second)};
    }
    if (rh != RH::idle) return {};  // no DPD into a renegotiation's way, no verdict while it runs
    const int dpd = dpd_s();
    // The pump stamps its start as its first receive and send: the timer starts at "never".
    if (!link.dpd) link.dpd.emplace(DpdSettings{std::chrono::seconds(dpd), std::chrono::seconds(link.reply().keepalive_s)},
                                    Clock::time_point{});
    auto stamp = [](std::int64_t ns) { return Clock::time_point{std::chrono::nanoseconds(ns)}; };
    const Clock::time_point t = stamp(datapath::now_ns());
    link.dpd->on_receive(stamp(pump.last_rx_ns()));
    link.dpd->on_send(stamp(pump.last_tx_ns()));
    switch (link.dpd->poll(t)) {
        case DpdAction::peer_dead: {
            const auto quiet = std::chrono::duration_cast<std::chrono::seconds>(t - link.dpd->last_receive()).count();
            return {LinkEvent::lost("nothing received for " + std::to_string(quiet) + " s (DPD " + std::to_string(dpd) +
                                    " s)")};
        }
        case DpdAction::send_dpd_request: pump.request_dpd(); break;
        case DpdAction::send_keepalive: pump.request_keepalive(); break;
        case DpdAction::none: break;
    }
    if (now >= link.rekey_at && !attempting) {
        link.rekey_at = Clock::time_point::max();
        if (link.reply().rekey == anyconnect::AcRekeyMethod::ssl) {
            LOG_INFO << "rekey (ssl) after " << link.reply().rekey_s << " s: TLS rehandshake";
            pump.request_rehandshake();
            return {};
        }
        return {renew_for_rekey("rekey (new-tunnel) after " + std::to_string(link.reply().rekey_s) + " s")};
    }
    return {};
}

AcStatsSnapshot AcDriver::snapshot() const {
    std::lock_guard<std::mutex> lock(link_mutex_);
    AcStatsSnapshot s;
    s.cstp = cstp_history_;
    if (link_) s.cstp.add(link_->cstp_stats());
    s.counters = counters_;
    if (drain_) s.counters.outage_drops += drain_->dropped();
    s.connected = link_ != nullptr;
    if (settings_.dtls && first_reply_.dtls) {
        AcDtlsStats d;
        if (link_ && link_->channel()) d = link_->channel()->stats();
        else d.mode = first_reply_.dtls->mode == anyconnect::AcDtlsParams::Mode::psk ? "psk" : "legacy";
        add_dtls_history(d, dtls_history_);
        s.dtls = std::move(d);
    }
    return s;
}

Result<SessionDriver::Prepared> AcDriver::prepare() {
    // The login's kept connection (a new one if none); its peer's family sizes the MTU request.
    auto stream = https_.release_connection(auth_.server.host, auth_.server.port);
    if (!stream) return stream.error();
    const auto peer = https_.peer(auth_.server.host, auth_.server.port);
    peer_address_ = peer ? peer->address : auth_.server.host;
    // With --proxy the TCP peer is the proxy; DTLS goes directly to the server.
    dtls_peer_address_ = peer ? peer->server_address : auth_.server.host;
    if (peer && peer->via_proxy && !dtls_peer_address_.empty())
        LOG_INFO << "DTLS goes directly to " << auth_.server.host << " at " << dtls_peer_address_
                 << " (not through the proxy)";
    anyconnect::AcConnectSettings& s = settings_;
    s.host = auth_.server.host;
    s.port = auth_.server.port;
    s.user_agent = o_.user_agent;
    s.hostname = o_.hostname;
    s.base_mtu = std::max(o_.base_mtu > 0 ? o_.base_mtu : 1406, 1280);
    const bool outer_v6 = peer_address_.find(':') != std::string::npos;
    s.mtu = o_.mtu > 0 ? o_.mtu : anyconnect::requested_tunnel_mtu(s.base_mtu, outer_v6);
    s.ipv6 = !o_.host.disable_ipv6;
    // DTLS is offered only when something can run it; otherwise ocserv would size
    // the MTU for a UDP channel that never comes.
    if (!o_.no_dtls && dtls_peer_address_.empty())
        LOG_INFO << "no address for DTLS to the server: data runs over CSTP (TLS)";
    if (!o_.no_dtls && !dtls_peer_address_.empty()) {
        auto secret = io::make_dtls_master_secret();
        if (!secret) return secret.error();
        anyconnect::AcDtlsOffer offer;
        offer.master_secret = std::move(*secret);
        master_secret_ = offer.master_secret.clone();
        if (!o_.dtls_ciphers.empty()) offer.cipher_suites = o_.dtls_ciphers;
        if (!o_.dtls12_ciphers.empty()) offer.dtls12_cipher_suites = o_.dtls12_ciphers;
        s.dtls = std::move(offer);
    }
    auto request = anyconnect::build_connect_request(s, auth_.webvpn);
    if (!request) return request.error();
    request_ = std::move(*request);
    anyconnect::AcConnectRefusal refusal;
    auto first = CstpLink::connect_on(std::move(*stream), request_, refusal);
    if (!first) {
        LOG_ERROR << first.error().message;
        return Prepared{refusal.cookie_rejected() ? TunnelEnd::cookie_rejected : TunnelEnd::error};
    }
    CstpLink& link = **first;
    first_reply_ = link.reply();
    const anyconnect::AcCstpConfig& reply = first_reply_;
    TunnelConfig config = reply.tunnel;  // the reply parser filled it; where we reached the server is ours
    config.gateway_address = peer_address_;
    if (dtls_peer_address_ != peer_address_) config.direct_udp_address = dtls_peer_address_;
    tun_mtu_ = o_.mtu > 0 ? o_.mtu : reply.cstp_mtu;
    LOG_INFO << "CSTP connected to " << link.tls().endpoint() << " (" << link.tls().description() << "): address "
             << (config.ip4_address.empty() ? config.ip6_address : config.ip4_address)
             << (config.ip6_address.empty() || config.ip4_address.empty() ? "" : " and " + config.ip6_address)
             << ", MTU " << tun_mtu_ << ", DPD " << reply.dpd_s << " s, keepalive " << reply.keepalive_s << " s";
    if (reply.rekey_s > 0 || !reply.rekey_method.empty()) {
        LOG_INFO << "rekey: " << (reply.rekey_method.empty() ? "(no method)" : reply.rekey_method) << " every "
                 << reply.rekey_s << " s"
                 << (reply.dtls && reply.dtls->rekey_s > 0 ? "; DTLS every " + std::to_string(reply.dtls->rekey_s) + " s" : "");
        if (!anyconnect::parse_rekey_method(reply.rekey_method))
            LOG_WARN << "unknown X-CSTP-Rekey-Method \"" << reply.rekey_method << "\": no CSTP rekey";
    }
    if (reply.dtls)
        LOG_INFO << "DTLS offered: " << reply.dtls->cipher_suite << " on UDP port " << reply.dtls->port;
    else if (settings_.dtls)
        LOG_INFO << "no DTLS" << (reply.dtls_unusable.empty() ? "" : " (" + reply.dtls_unusable + ")");
    if (!config.banner.empty()) LOG_INFO << "banner: " << config.banner;

    if (o_.dry_run) {
        LOG_INFO << "dry run: not opening the tun; logging out";
        auto bye = anyconnect::cstp_logout_packet("Aborted by caller");
        if (auto st = link.tls().write_all(bye); !st) LOG_WARN << "logout: " << st.error().message;
        link.tls().close();
        return Prepared{TunnelEnd::user_logout};
    }
    first_ = std::move(*first);
    return Prepared{HostPlan{std::move(config), tun_mtu_}};
}

Result<std::optional<LinkEvent>> AcDriver::start(host::Host& host) {
    host_ = &host;
    // From now on a reconnect asks for the same addresses (X-CSTP-Address).
    settings_.previous_ipv4 = first_reply_.tunnel.ip4_address;
    settings_.previous_ipv6 = first_reply_.tunnel.ip6_address;
    if (auto request = anyconnect::build_connect_request(settings_, auth_.webvpn)) request_ = std::move(*request);
    start_link(std::move(first_));
    LOG_INFO << "tunnel up on " << host_->tun().name() << " (data over CSTP"
             << (link_->channel() ? "; DTLS handshake started)" : ")");
    return std::optional<LinkEvent>{LinkEvent::up("to " + link_->tls().endpoint())};
}

}  // namespace

Result<TunnelEnd> run_ac_tunnel(io::HttpsClient& https, const AcAuthenticated& auth, const TunnelOptions& o) {
    AcDriver driver(https, auth, o);
    return run_tunnel_session(driver, o);
}

}  // namespace espvpn::session
