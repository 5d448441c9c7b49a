#include "src/session/anyconnect/dtls_channel.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "protocols/tunnel/dpd_timer.h"
#include "src/datapath/pipeline_threads.h"
#include "src/datapath/rx_linger.h"
#include "src/io/dtls_channel.h"
#include "src/io/udp_socket.h"
#include "src/log/logger.h"

namespace espvpn::session {

namespace {

using Clock = std::chrono::steady_clock;

// ocserv ignores a second ClientHello for the same session within 3 s of the
// previous one (docs/protocols/anyconnect.md §4.5): attempts never start closer together than this.
constexpr auto kMinAttemptGap = std::chrono::milliseconds(3200);
constexpr int kSuperviseStepMs = 200;

// One established DTLS session: socket, channel and datapath, destroyed in
// reverse order (the datapath uses the other two) as members are.
struct LiveDtls {
    std::optional<io::UdpSocket> udp;
    std::unique_ptr<io::DtlsChannel> channel;
    std::unique_ptr<datapath::DtlsDatapath> datapath;
};

// Why an attempt or a session ended; `fatal` stops all further attempts.
struct DtlsEnd {
    std::string reason;
    bool fatal = false;
    bool retry_now = false;  // a session that worked died: try again at once (as OC)
    bool rekey = false;      // not a failure: the session reached its rekey time
};

class AcDtlsChannel final : public AcDataChannel {
public:
    AcDtlsChannel(const AcDtlsContext& context, datapath::PacketSink& sink, const TunnelOptions& options, Secret psk)
        : context_(context), sink_(sink), options_(options), psk_(std::move(psk)) {
        context_.master_secret = nullptr;  // copied below: the caller's may not outlive us
        if (context.master_secret) master_secret_ = context.master_secret->clone();
        current_mtu_ = context.tunnel_mtu;
        stats_.mode = context.params.mode == anyconnect::AcDtlsParams::Mode::psk ? "psk" : "legacy";
    }
    ~AcDtlsChannel() override {
        wake_.stop = true;
        wake_.notify();
        if (thread_.joinable()) thread_.join();
    }

    void start() { thread_ = std::thread([this] { run(); }); }

    bool carrying() const override { return carrying_.load(std::memory_order_acquire); }

    // The CSTP tx thread, once per batch: one lock, rarely contended (the supervisor
    // takes it to install or remove a session and to count, the reporter to read).
    Status send(io::PacketBatch& batch) override {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!live_ || !carrying_) return make_error("DTLS is down");
        Status st = live_->datapath->send(batch);
        if (!st) {
            carrying_ = false;
            send_failed_ = true;
            wake_.notify();
        }
        return st;
    }

    AcDtlsStats stats() const override {
        std::lock_guard<std::mutex> lock(mutex_);
        AcDtlsStats s = stats_;
        s.carrying = carrying_;
        if (live_) s.totals.add(live_->datapath->stats());
        return s;
    }

private:
    // Empties the wake eventfd (stop and send_failed_ say why it was written),
    // so a stale wake-up cannot turn a later wait into a busy loop.
    void drain_wake(const pollfd& p) {
        if (p.revents & POLLIN) wake_.drain();
    }
    // Sleeps until `until` or stop; false when stopping.
    bool sleep_until(Clock::time_point until) {
        while (!wake_.stop) {
            const auto left = ms_of(until - Clock::now());
            if (left <= 0) return true;
            pollfd p{wake_.fd(), POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000))) > 0) drain_wake(p);
        }
        return false;
    }

    void run() {
        Clock::time_point next_attempt = Clock::now();
        while (!wake_.stop) {
            if (!sleep_until(next_attempt)) return;
            const Clock::time_point began = Clock::now();
            DtlsEnd end;
            auto live = establish();
            if (!live) {
                if (wake_.stop) return;
                end = {live.error().message, attempt_fatal_ || is_not_resumed(live.error().message), false};
                std::lock_guard<std::mutex> lock(mutex_);
                ++stats_.handshake_failures;
            } else {
                end = carry(std::move(*live));
                if (wake_.stop) return;
            }
            if (end.rekey) {
                LOG_INFO << "DTLS: " << end.reason;
                {
                    std::lock_guard<std::mutex> lock(mutex_);
                    ++stats_.rekeys;
                }
                next_attempt = std::max(Clock::now(), began + kMinAttemptGap);
                continue;
            }
            if (end.fatal || options_.udp_retry.count() == 0) {
                LOG_WARN << "DTLS: " << end.reason << "; data stays on CSTP (no more DTLS attempts)";
                std::lock_guard<std::mutex> lock(mutex_);
                stats_.disabled = true;
                return;
            }
            const Clock::time_point gap = began + kMinAttemptGap;
            next_attempt = end.retry_now ? std::max(Clock::now(), gap) : std::max(began + options_.udp_retry, gap);
            const auto in_s = std::chrono::duration_cast<std::chrono::seconds>(next_attempt - Clock::now()).count();
            LOG_WARN << "DTLS: " << end.reason << "; data over CSTP, next DTLS attempt in " << std::max<long long>(in_s, 0)
                     << " s";
        }
    }

    // DtlsChannel's refusal of a full handshake in legacy mode (someone else answered).
    static bool is_not_resumed(const std::string& why) { return why.find("did not resume") != std::string::npos; }

    // Socket + handshake (polled against stop) + datapath in session mode.
    Result<std::unique_ptr<LiveDtls>> establish() {
        const auto& p = context_.params;
        io::DtlsChannelOptions co;
        co.ipv6_outer = context_.peer_address.find(':') != std::string::npos;
        co.base_mtu = static_cast<std::size_t>(context_.base_mtu > 0 ? context_.base_mtu : 1406);
        if (p.mode == anyconnect::AcDtlsParams::Mode::psk) {
            io::DtlsPskMode m;
            m.psk = psk_.clone();
            m.app_id.assign(p.session_id.begin(), p.session_id.end());
            co.mode = std::move(m);
        } else {
            io::DtlsLegacyMode m;
            auto suite = io::find_dtls_legacy_suite(p.cipher_suite, p.dtls12_header);
            attempt_fatal_ = true;  // nothing below changes by trying again
            if (!suite) return suite.error();
            if (master_secret_.size() != io::kDtlsMasterSecretSize)
                return make_error("no master secret for the legacy mode");
            attempt_fatal_ = false;
            m.suite = *suite;
            m.master_secret = master_secret_.clone();
            m.session_id.assign(p.session_id.begin(), p.session_id.end());
            m.tunnel_mtu = static_cast<std::size_t>(p.mtu > 0 ? p.mtu : context_.tunnel_mtu);
            co.mode = std::move(m);
        }
        auto live = std::make_unique<LiveDtls>();
        io::UdpOptions u;
        u.remote = io::endpoint_text(context_.peer_address, p.port);
        if (options_.udp_local_port > 0) u.local = io::any_endpoint_like(context_.peer_address, options_.udp_local_port);
        u.make_socket = options_.udp_socket;
        auto udp = io::UdpSocket::open(u);
        if (!udp) return make_error("UDP socket to " + u.remote + ": " + udp.error().message);
        live->udp.emplace(std::move(*udp));
        auto channel = io::DtlsChannel::create(live->udp->fd(), std::move(co));
        if (!channel) return channel.error();
        live->channel = std::move(*channel);
        const Clock::time_point t0 = Clock::now();
        for (;;) {
            auto done = live->channel->handshake_step();
            if (!done) return make_error("handshake with " + u.remote + " failed: " + done.error().message);
            if (*done) break;
            pollfd fds[2] = {{live->udp->fd(), POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
            if (::poll(fds, 2, std::max(live->channel->handshake_wait_ms(), 1)) > 0) drain_wake(fds[1]);
            if (wake_.stop) return make_error("stopped");
        }
        const auto ms = ms_of(Clock::now() - t0);
        datapath::DtlsDatapathOptions d;
        d.deliver = [this](io::PacketBatch& batch) { sink_.deliver(batch); };
        d.rx_linger = datapath::client_rx_linger();
        auto dp = datapath::DtlsDatapath::start(context_.tun, *live->udp, *live->channel, d);
        if (!dp) return dp.error();
        live->datapath = std::move(*dp);
        LOG_INFO << "DTLS up in " << ms << " ms: " << live->channel->description() << " to " << u.remote
                 << ", tunnel MTU " << live->channel->tunnel_mtu()
                 << (live->channel->records_ours() ? ", records by espvpn" : ", records by GnuTLS");
        return live;
    }

    // Puts data on DTLS until it dies; then back to CSTP.
    DtlsEnd carry(std::unique_ptr<LiveDtls> live) {
        const int tunnel_mtu = static_cast<int>(live->channel->tunnel_mtu());
        // One tun MTU for both channels: the smaller wins and stays (docs/protocols/anyconnect.md §7.3; see anyconnect/tunnel.h).
        if (context_.tun && tunnel_mtu < current_mtu_) {
            if (Status st = context_.tun->set_mtu(static_cast<unsigned>(tunnel_mtu)); !st)
                LOG_WARN << "DTLS: cannot lower the tun MTU to " << tunnel_mtu << ": " << st.error().message;
            else {
                LOG_INFO << "tun MTU lowered from " << current_mtu_ << " to " << tunnel_mtu << " for DTLS";
                current_mtu_ = tunnel_mtu;
            }
        }
        datapath::DtlsDatapath* dp = live->datapath.get();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++stats_.handshakes;
            ++stats_.transport_switches;
            stats_.description = live->channel->description();
            stats_.tunnel_mtu = live->channel->tunnel_mtu();
            live_ = std::move(live);
            send_failed_ = false;
            carrying_ = true;
        }
        LOG_INFO << "data over DTLS";
        const auto& p = context_.params;
        DpdSettings ds;
        ds.dpd = std::chrono::seconds(options_.force_dpd_s > 0 ? options_.force_dpd_s : p.dpd_s);
        ds.keepalive = std::chrono::seconds(p.keepalive_s);
        DpdTimer dpd(ds, Clock::now());
        // DTLS rekey (docs/protocols/anyconnect.md §6): ocserv offers "ssl" (a rehandshake of this session); a new
        // handshake with the same PSK/App-ID renews the keys just as well and is the
        // path a DTLS failure takes anyway. Data rides CSTP for the handshake's duration.
        const Clock::time_point rekey_at =
            p.rekey_s > 0 ? Clock::now() + std::chrono::seconds(p.rekey_s) : Clock::time_point::max();
        DtlsEnd end{"", false, true};
        while (!wake_.stop) {
            pollfd pfd{wake_.fd(), POLLIN, 0};
            if (::poll(&pfd, 1, kSuperviseStepMs) > 0) drain_wake(pfd);
            if (wake_.stop) break;
            const datapath::DtlsLiveness l = dp->liveness();
            dpd.on_receive(l.last_rx);  // "never" (the epoch) is older than any start: ignored
            if (send_failed_) {
                end.reason = "sending failed (UDP refused or unreachable)";
                break;
            }
            if (auto f = dp->failure()) {
                end.reason = "datapath stopped: " + *f;
                break;
            }
            if (l.peer_disconnected || l.peer_closed) {
                end = {l.peer_disconnected ? "the server sent DISCONNECT on DTLS" : "the server closed DTLS", false, false};
                break;
            }
            bool dead = false;
            switch (dpd.poll(Clock::now())) {
                case DpdAction::send_dpd_request: dp->send_dpd_request(); break;
                case DpdAction::send_keepalive: dp->send_keepalive(); break;
                case DpdAction::peer_dead: dead = true; break;
                case DpdAction::none: break;
            }
            if (dead) {
                end.reason = "no DTLS packet for 2 x DPD (" + std::to_string(ds.dpd.count()) + " s)";
                break;
            }
            if (Clock::now() >= rekey_at) {
                end.reason = "rekey after " + std::to_string(p.rekey_s) + " s (X-DTLS-Rekey-Time): new handshake";
                end.rekey = true;
                break;
            }
        }
        std::unique_ptr<LiveDtls> gone;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            carrying_ = false;
            gone = std::move(live_);
        }
        gone->datapath->stop();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stats_.totals.add(gone->datapath->stats());
            ++stats_.transport_switches;
        }
        return end;
    }

    AcDtlsContext context_;
    datapath::PacketSink& sink_;
    const TunnelOptions& options_;
    Secret psk_;
    Secret master_secret_;
    int current_mtu_ = 0;         // supervisor thread only
    bool attempt_fatal_ = false;  // supervisor thread only: the last attempt cannot succeed ever
    datapath::ControlChannel wake_;  // stop, or a send failed
    std::atomic<bool> carrying_{false};
    std::atomic<bool> send_failed_{false};
    mutable std::mutex mutex_;  // live_ and stats_
    std::unique_ptr<LiveDtls> live_;
    AcDtlsStats stats_;
    std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<AcDataChannel>> open_ac_dtls_channel(const AcDtlsContext& context, datapath::PacketSink& sink,
                                                            const TunnelOptions& options) {
    Secret psk;
    if (context.params.mode == anyconnect::AcDtlsParams::Mode::psk) {
        // From the CSTP session before its pump threads use it (GnuTLS: one reader, one writer).
        auto exported = io::export_dtls_psk(context.cstp_session);
        if (!exported) return exported.error();
        psk = std::move(*exported);
    }
    try {
        auto channel = std::make_unique<AcDtlsChannel>(context, sink, options, std::move(psk));
        channel->start();
        return std::unique_ptr<AcDataChannel>(std::move(channel));
    } catch (const std::exception& e) {
        return make_error(std::string("DTLS: cannot start: ") + e.what());
    }
}

}  // namespace espvpn::session
