#include "src/session/ac_tunnel.h"

#include <gnutls/crypto.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "protocols/anyconnect/cstp.h"
#include "protocols/http/response_parser.h"
#include "src/io/offload.h"
#include "src/log/logger.h"
#include "src/session/signal_watch.h"

namespace espvpn::session {

using anyconnect::CstpType;
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

constexpr int kPollMs = 100;
constexpr std::size_t kRxSlotCapacity = 65535;  // a packet, or coalesced TCP segments for one tun write

std::int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

// CSTP sends one TLS record per packet; written one by one that is a send()
// per packet, and GnuTLS reads a record in two recv() calls. This transport
// sits under the GnuTLS session while the tunnel runs: records written while
// corked are gathered and leave in one send(); reads take whatever the socket
// has (many records) and hand it to GnuTLS piece by piece.
class BatchingTransport {
public:
    BatchingTransport(gnutls_session_t session, int fd, const std::atomic<bool>& stopping)
        : session_(session), fd_(fd), stopping_(stopping), out_(new std::uint8_t[kOutSize]),
          in_(new std::uint8_t[kInSize]) {
        gnutls_transport_set_ptr(session_, this);
        gnutls_transport_set_push_function(session_, push);
        gnutls_transport_set_pull_function(session_, pull);
    }
    ~BatchingTransport() {
        // Back to plain socket calls for whatever the session still sends (close_notify).
        gnutls_transport_set_int(session_, fd_);
        gnutls_transport_set_push_function(session_, plain_push);
        gnutls_transport_set_pull_function(session_, plain_pull);
    }
    BatchingTransport(const BatchingTransport&) = delete;
    BatchingTransport& operator=(const BatchingTransport&) = delete;

    // tx thread: gather records from now on / send what was gathered.
    void cork() { corked_ = true; }
    bool uncork() {
        corked_ = false;
        return flush();
    }
    // rx thread: bytes read from the socket that GnuTLS has not taken yet.
    bool has_readahead() const { return in_off_ < in_len_; }

private:
    static constexpr std::size_t kOutSize = 256 * 1024;
    static constexpr std::size_t kInSize = 256 * 1024;

    static ssize_t plain_push(gnutls_transport_ptr_t p, const void* data, std::size_t n) {
        return send(static_cast<int>(reinterpret_cast<std::intptr_t>(p)), data, n, MSG_NOSIGNAL);
    }
    static ssize_t plain_pull(gnutls_transport_ptr_t p, void* data, std::size_t n) {
        return recv(static_cast<int>(reinterpret_cast<std::intptr_t>(p)), data, n, 0);
    }

    static ssize_t push(gnutls_transport_ptr_t p, const void* data, std::size_t n) {
        auto* t = static_cast<BatchingTransport*>(p);
        if (!t->corked_ || n > kOutSize) {
            if (!t->flush()) {
                errno = EPIPE;
                return -1;
            }
            return send(t->fd_, data, n, MSG_NOSIGNAL);
        }
        if (t->out_len_ + n > kOutSize && !t->flush()) {
            errno = EPIPE;
            return -1;
        }
        std::memcpy(t->out_.get() + t->out_len_, data, n);
        t->out_len_ += n;
        return static_cast<ssize_t>(n);
    }

    static ssize_t pull(gnutls_transport_ptr_t p, void* data, std::size_t n) {
        auto* t = static_cast<BatchingTransport*>(p);
        if (t->in_off_ == t->in_len_) {
            ssize_t r = recv(t->fd_, t->in_.get(), kInSize, 0);
            if (r <= 0) return r;  // errno tells GnuTLS EAGAIN from a failure
            t->in_off_ = 0;
            t->in_len_ = static_cast<std::size_t>(r);
        }
        std::size_t k = std::min(n, t->in_len_ - t->in_off_);
        std::memcpy(data, t->in_.get() + t->in_off_, k);
        t->in_off_ += k;
        return static_cast<ssize_t>(k);
    }

    // Writes everything gathered, waiting for room (until the tunnel stops).
    bool flush() {
        std::size_t off = 0;
        while (off < out_len_) {
            ssize_t r = send(fd_, out_.get() + off, out_len_ - off, MSG_NOSIGNAL);
            if (r > 0) {
                off += static_cast<std::size_t>(r);
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR) && !stopping_) {
                pollfd w{fd_, POLLOUT, 0};
                poll(&w, 1, kPollMs);
                continue;
            }
            out_len_ = 0;
            return false;
        }
        out_len_ = 0;
        return true;
    }

    gnutls_session_t session_;
    int fd_;
    const std::atomic<bool>& stopping_;
    std::unique_ptr<std::uint8_t[]> out_, in_;
    std::size_t out_len_ = 0;
    std::size_t in_off_ = 0, in_len_ = 0;
    bool corked_ = false;
};

// The CSTP packet pump over the tunnel's TLS session: the tx thread is the
// only writer (data from the tun, and the control packets others ask for), the
// rx thread the only reader. GnuTLS allows one sender and one receiver at once.
class CstpPump : public AcPacketSink {
public:
    CstpPump(io::TlsStream& tls, io::TunDevice& tun, int mtu)
        : tls_(tls), session_(tls.native()), tun_(tun),
          tx_batch_(io::PacketBatchShape{64, static_cast<std::size_t>(std::max(mtu, 1280)),
                                         anyconnect::kCstpHeaderSize + 8, 0}),
          rx_batch_(io::PacketBatchShape{64, kRxSlotCapacity, 16, 0}),
          rx_buf_(new std::uint8_t[kRxBufSize]), transport_(session_, tls.fd(), stopping_) {
        wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        last_rx_ns_ = last_tx_ns_ = now_ns();
    }
    ~CstpPump() override {
        stop();
        if (wake_fd_ >= 0) close(wake_fd_);
    }

    void start(const std::vector<std::uint8_t>& early_bytes) {
        early_.assign(early_bytes.begin(), early_bytes.end());
        tx_ = std::thread([this] { tx_loop(); });
        rx_ = std::thread([this] { rx_loop(); });
    }
    void stop() {
        stopping_ = true;
        wake();
        if (tx_.joinable()) tx_.join();
        if (rx_.joinable()) rx_.join();
    }

    void set_channel(AcDataChannel* channel) { channel_.store(channel); }

    // Control requests, sent by the tx thread.
    void request_dpd() { request(kDpd); }
    void request_keepalive() { request(kKeepalive); }
    void request_logout() { request(kLogout); }
    bool logout_sent() const { return logout_sent_; }

    std::int64_t last_rx_ns() const { return last_rx_ns_; }
    std::int64_t last_tx_ns() const { return last_tx_ns_; }
    // Set once the receive side ended (server BYE, EOF, error); says why.
    std::optional<std::pair<AcTunnelEnd, std::string>> ended() const {
        if (!ended_) return std::nullopt;
        std::lock_guard<std::mutex> lock(end_mutex_);
        return std::make_pair(end_, end_reason_);
    }

    std::string stats_text() const {
        return "tx " + std::to_string(tx_packets_) + " packets / " + std::to_string(tx_bytes_) + " bytes, rx " +
               std::to_string(rx_packets_) + " packets / " + std::to_string(rx_bytes_) + " bytes, dropped rx " +
               std::to_string(rx_dropped_) + ", DPD answered " + std::to_string(dpd_answered_);
    }

    void deliver(io::PacketBatch& batch) override {
        std::lock_guard<std::mutex> lock(tun_write_mutex_);
        if (auto w = tun_.write_packets(batch); !w) LOG_DEBUG << "tun write: " << w.error().message;
    }

private:
    static constexpr std::size_t kRxBufSize = 16384 + 2048;  // one TLS record
    static constexpr unsigned kDpd = 1, kKeepalive = 2, kLogout = 4, kDpdAnswer = 8;

    void request(unsigned what) {
        pending_.fetch_or(what);
        wake();
    }
    void wake() {
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = write(wake_fd_, &one, sizeof one);
    }
    void finish(AcTunnelEnd end, std::string reason) {
        std::lock_guard<std::mutex> lock(end_mutex_);
        if (ended_) return;
        end_ = end;
        end_reason_ = std::move(reason);
        ended_ = true;
    }

    // One packet = one TLS record; waits (bounded by stop) while the socket is full.
    bool send_record(const std::uint8_t* p, std::size_t n) {
        for (;;) {
            ssize_t r = gnutls_record_send(session_, p, n);
            if (r >= 0) {
                last_tx_ns_ = now_ns();
                return true;
            }
            if (r != GNUTLS_E_AGAIN && r != GNUTLS_E_INTERRUPTED) {
                finish(AcTunnelEnd::error, std::string("sending on the TLS connection failed: ") + gnutls_strerror(static_cast<int>(r)));
                return false;
            }
            if (stopping_) return false;
            pollfd w{tls_.fd(), POLLOUT, 0};
            poll(&w, 1, kPollMs);
        }
    }

    bool send_control(CstpType type, std::span<const std::uint8_t> payload = {}) {
        std::uint8_t buf[anyconnect::kCstpHeaderSize + 1600];
        std::size_t n = std::min(payload.size(), sizeof buf - anyconnect::kCstpHeaderSize);
        anyconnect::write_cstp_header(type, static_cast<std::uint16_t>(n), buf);
        if (n) std::memcpy(buf + anyconnect::kCstpHeaderSize, payload.data(), n);
        return send_record(buf, anyconnect::kCstpHeaderSize + n);
    }

    void handle_requests() {
        unsigned what = pending_.exchange(0);
        if (what & kDpdAnswer) {
            std::uint8_t copy[1600];
            std::size_t n;
            {
                std::lock_guard<std::mutex> lock(dpd_mutex_);
                n = dpd_payload_len_;
                std::memcpy(copy, dpd_payload_, n);
            }
            if (send_control(CstpType::dpd_response, {copy, n})) ++dpd_answered_;
        }
        if (what & kDpd) send_control(CstpType::dpd_request);
        if (what & kKeepalive) send_control(CstpType::keepalive);
        if (what & kLogout) {
            auto bye = anyconnect::cstp_logout_packet("Aborted by caller");
            if (send_record(bye.data(), bye.size())) logout_sent_ = true;
        }
    }

    void tx_loop() {
        pollfd fds[2] = {{tun_.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
        while (!stopping_) {
            if (poll(fds, 2, kPollMs) < 0 && errno != EINTR) break;
            if (fds[1].revents & POLLIN) {
                std::uint64_t v;
                [[maybe_unused]] auto n = read(wake_fd_, &v, sizeof v);
            }
            handle_requests();
            if (stopping_) break;
            if (!(fds[0].revents & POLLIN)) continue;
            // Drain the tun in batches, each leaving in one send(); control requests
            // get a turn between batches.
            for (int rounds = 0; rounds < 16 && !stopping_; ++rounds) {
                if (!transport_.uncork()) {
                    finish(AcTunnelEnd::error, "sending on the TLS connection failed");
                    return;
                }
                transport_.cork();
                tx_batch_.clear();
                auto got = tun_.read_packets(tx_batch_);
                if (!got) {
                    finish(AcTunnelEnd::error, "tun read: " + got.error().message);
                    return;
                }
                if (*got == 0) break;
                AcDataChannel* channel = channel_.load();
                if (channel && channel->carrying()) {
                    if (auto st = channel->send(tx_batch_); !st) {
                        LOG_WARN << "DTLS send failed (" << st.error().message << "); data goes over CSTP";
                        channel_.store(nullptr);
                    }
                    continue;
                }
                for (std::size_t i = 0; i < tx_batch_.size(); ++i) {
                    std::size_t len = tx_batch_.length(i);
                    if (!tx_batch_.grow_front(i, anyconnect::kCstpHeaderSize)) continue;
                    auto pkt = tx_batch_.packet(i);
                    anyconnect::write_cstp_header(CstpType::data, static_cast<std::uint16_t>(len), pkt.data());
                    if (!send_record(pkt.data(), pkt.size())) return;
                    ++tx_packets_;
                    tx_bytes_ += len;
                }
                handle_requests();
            }
            if (!transport_.uncork()) {
                finish(AcTunnelEnd::error, "sending on the TLS connection failed");
                return;
            }
        }
    }

    void flush_rx() {
        if (rx_batch_.size() == 0) return;
        deliver(rx_batch_);
        rx_batch_.clear();
    }

    // Returns false when the tunnel ends.
    bool on_packet(const anyconnect::CstpPacket& p) {
        switch (p.type) {
            case CstpType::data: {
                if (p.payload.empty()) return true;
                if (rx_batch_.full()) flush_rx();
                auto room = rx_batch_.next_room();
                if (p.payload.size() > room.size()) {
                    ++rx_dropped_;
                    return true;
                }
                std::memcpy(room.data(), p.payload.data(), p.payload.size());
                rx_batch_.commit(p.payload.size());
                ++rx_packets_;
                rx_bytes_ += p.payload.size();
                return true;
            }
            case CstpType::dpd_request: {
                {
                    std::lock_guard<std::mutex> lock(dpd_mutex_);
                    dpd_payload_len_ = std::min(p.payload.size(), sizeof dpd_payload_);
                    std::memcpy(dpd_payload_, p.payload.data(), dpd_payload_len_);
                }
                request(kDpdAnswer);
                return true;
            }
            case CstpType::dpd_response:
            case CstpType::keepalive: return true;
            case CstpType::disconnect: {
                std::string text;
                if (p.payload.size() > 1)
                    text.assign(reinterpret_cast<const char*>(p.payload.data()) + 1, p.payload.size() - 1);
                finish(AcTunnelEnd::server_disconnect,
                       "the server sent DISCONNECT" + (text.empty() ? std::string() : ": " + text));
                return false;
            }
            case CstpType::terminate:
                finish(AcTunnelEnd::server_disconnect, "the server sent TERMINATE (shutting down)");
                return false;
            case CstpType::compressed_data: break;  // refused by the decoder
        }
        return true;
    }

    bool consume(std::span<const std::uint8_t> in) {
        while (true) {
            auto p = decoder_.next(in);
            if (!p) {
                finish(AcTunnelEnd::error, p.error().message);
                return false;
            }
            if (!*p) return true;
            if (!on_packet(**p)) return false;
        }
    }

    void rx_loop() {
        if (!early_.empty() && !consume(early_)) return;
        pollfd r{tls_.fd(), POLLIN, 0};
        while (!stopping_) {
            if (gnutls_record_check_pending(session_) == 0 && !transport_.has_readahead()) {
                flush_rx();
                if (poll(&r, 1, kPollMs) < 0 && errno != EINTR) break;
                if (!(r.revents & (POLLIN | POLLHUP | POLLERR))) continue;
            }
            ssize_t n = gnutls_record_recv(session_, rx_buf_.get(), kRxBufSize);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_REHANDSHAKE) continue;
            if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
                if (!stopping_) finish(AcTunnelEnd::server_disconnect, "the server closed the TLS connection");
                break;
            }
            if (n < 0) {
                if (!stopping_)
                    finish(AcTunnelEnd::server_disconnect,
                           std::string("the TLS connection failed: ") + gnutls_strerror(static_cast<int>(n)));
                break;
            }
            last_rx_ns_ = now_ns();
            if (!consume({rx_buf_.get(), static_cast<std::size_t>(n)})) break;
        }
        flush_rx();
    }

    io::TlsStream& tls_;
    gnutls_session_t session_;
    io::TunDevice& tun_;
    io::PacketBatch tx_batch_;
    io::PacketBatch rx_batch_;
    std::unique_ptr<std::uint8_t[]> rx_buf_;
    std::atomic<bool> stopping_{false};
    BatchingTransport transport_;
    anyconnect::CstpDecoder decoder_;
    std::vector<std::uint8_t> early_;  // tunnel bytes that came with the CONNECT reply
    int wake_fd_ = -1;
    std::thread tx_, rx_;
    std::atomic<unsigned> pending_{0};
    std::atomic<bool> logout_sent_{false};
    std::atomic<AcDataChannel*> channel_{nullptr};
    std::atomic<std::int64_t> last_rx_ns_{0}, last_tx_ns_{0};
    std::mutex dpd_mutex_;
    std::uint8_t dpd_payload_[1600] = {};
    std::size_t dpd_payload_len_ = 0;
    std::mutex tun_write_mutex_;
    mutable std::mutex end_mutex_;
    std::atomic<bool> ended_{false};
    AcTunnelEnd end_ = AcTunnelEnd::error;
    std::string end_reason_;
    std::atomic<std::uint64_t> tx_packets_{0}, tx_bytes_{0}, rx_packets_{0}, rx_bytes_{0}, rx_dropped_{0},
        dpd_answered_{0};
};

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
    pump.start(connected->early_bytes);

    std::unique_ptr<AcDataChannel> channel;
    if (reply.dtls && dtls_factory) {
        AcDtlsContext ctx{tls->native(), peer_address, *reply.dtls, &master_secret, reply.base_mtu, mtu};
        auto made = dtls_factory(ctx, pump);
        if (!made) LOG_WARN << "DTLS not started (" << made.error().message << "); data stays on CSTP";
        else channel = std::move(*made);
        pump.set_channel(channel.get());
    }
    LOG_INFO << "tunnel up on " << host.tun().name() << " (data over CSTP)";

    const int dpd_s = o.force_dpd_s > 0 ? o.force_dpd_s : reply.dpd_s;
    const std::int64_t dpd_ns = std::int64_t{dpd_s} * 1000000000;
    const std::int64_t keepalive_ns = std::int64_t{reply.keepalive_s} * 1000000000;
    std::int64_t last_dpd_sent = 0;
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
    pump.set_channel(nullptr);
    channel.reset();
    pump.stop();
    if (!reason.empty()) {
        if (end == AcTunnelEnd::error || end == AcTunnelEnd::peer_dead) LOG_ERROR << reason;
        else LOG_INFO << reason;
    }
    LOG_INFO << "tunnel statistics: " << pump.stats_text();
    tls->close();
    host.tear_down();
    return end;
}

}  // namespace espvpn::session
