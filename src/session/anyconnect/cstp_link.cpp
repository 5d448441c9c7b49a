#include "src/session/anyconnect/cstp_link.h"

#include <poll.h>

#include <algorithm>

#include "protocols/http/response_parser.h"
#include "src/session/anyconnect/dtls_channel.h"
#include "src/log/logger.h"

namespace espvpn::session {

using Clock = std::chrono::steady_clock;
using datapath::TlsPump;
constexpr int kPollMs = 100;

namespace {

// Writes the CONNECT and reads the reply headers; `refusal` gets the status, `early_bytes` the
// CSTP bytes read together with the reply.
Result<anyconnect::AcCstpConfig> send_connect(io::TlsStream& tls, const Secret& request,
                                              anyconnect::AcConnectRefusal& refusal,
                                              std::vector<std::uint8_t>& early_bytes) {
    if (auto st = tls.write_all(request.reveal()); !st) return make_error("CONNECT: " + st.error().message);
    http::ResponseParser parser;
    parser.begin("CONNECT");
    std::vector<std::uint8_t> buf(16384 + 1024);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
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
        if (parser.done()) early_bytes.assign(buf.begin() + static_cast<std::ptrdiff_t>(*used), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
    return anyconnect::parse_connect_reply(parser.take_response(), &refusal);
}

}  // namespace

void add_dtls_history(AcDtlsStats& sum, const AcDtlsStats& d) {
    sum.handshakes += d.handshakes;
    sum.handshake_failures += d.handshake_failures;
    sum.transport_switches += d.transport_switches;
    sum.rekeys += d.rekeys;
    sum.totals.add(d.totals);
}

TunDrain::TunDrain(io::TunDevice& tun, int mtu)
    : tun_(tun), batch_(io::PacketBatchShape{64, static_cast<std::size_t>(std::max(mtu, 1280)), 16, 0}) {
    thread_ = std::thread([this] { run(); });
}

TunDrain::~TunDrain() {
    stopping_ = true;
    thread_.join();
}

void TunDrain::run() {
    pollfd p{tun_.fd(), POLLIN, 0};
    while (!stopping_) {
        if (poll(&p, 1, kPollMs) <= 0 || !(p.revents & POLLIN)) continue;
        for (int rounds = 0; rounds < 16; ++rounds) {
            batch_.clear();
            auto got = tun_.read_packets(batch_);
            if (!got || *got == 0) break;
            dropped_ += *got;
        }
    }
}

Result<std::unique_ptr<CstpLink>> CstpLink::connect_on(std::unique_ptr<io::TlsStream> stream, const Secret& request,
                                                       anyconnect::AcConnectRefusal& refusal) {
    std::unique_ptr<CstpLink> link(new CstpLink(std::move(stream)));
    auto reply = send_connect(*link->tls_, request, refusal, link->early_bytes_);
    if (!reply) {
        link->tls_->close();
        return reply.error();
    }
    link->reply_ = std::move(*reply);
    return link;
}

void CstpLink::start(io::TunDevice& tun, int mtu, const DtlsSetup& dtls) {
    pump_ = std::make_unique<TlsPump>(tls_->native(), tls_->fd(), tun, datapath::cstp_framing(),
                                      datapath::client_pump_options(datapath::cstp_pump_options(mtu)));
    dtls_ = dtls;
    tun_ = &tun;
    open_channel(mtu);
    (void)pump_->start(early_bytes_);  // a failure is what ended() reports: the link is lost
}

std::unique_ptr<AcDataChannel> CstpLink::renew_channel(int mtu) {
    pump_->set_channel(nullptr);
    std::unique_ptr<AcDataChannel> old = std::move(channel_);
    open_channel(mtu);
    return old;
}

void CstpLink::logout() {
    if (!pump_) return;
    // A rehandshake that just finished leaves the threads parked; the BYE needs the tx thread.
    if (pump_->rehandshake_state() == TlsPump::Rehandshake::done) pump_->resume();
    pump_->request_logout();
    for (int i = 0; i < 20 && !pump_->logout_sent() && !pump_->ended(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (pump_->logout_sent()) LOG_INFO << "logout (DISCONNECT) sent";
    else LOG_WARN << "could not send the logout";
}

void CstpLink::stop(AcDtlsStats* history) {
    if (!pump_) return;
    // The pump's tx thread may be inside channel->send(): stop it before the channel goes.
    pump_->set_channel(nullptr);
    pump_->stop();
    if (channel_ && history) add_dtls_history(*history, channel_->stats());
    channel_.reset();
    stopped_cstp_ = pump_->stats();
    pump_.reset();
    tls_->close();
}

void CstpLink::open_channel(int mtu) {
    if (!reply_.dtls || !dtls_.options) return;
    AcDtlsContext ctx{tls_->native(), dtls_.peer_address, *reply_.dtls, dtls_.master_secret,
                      reply_.base_mtu > 0 ? reply_.base_mtu : dtls_.base_mtu, mtu, tun_};
    auto made = open_ac_dtls_channel(ctx, *pump_, *dtls_.options);
    if (!made) {
        LOG_WARN << "DTLS not started (" << made.error().message << "); data stays on CSTP";
        return;
    }
    channel_ = std::move(*made);
    pump_->set_channel(channel_.get());
}

Result<std::unique_ptr<CstpLink>> connect_cstp_link(const CstpLinkTarget& target, const Secret& request, int cancel_fd,
                                                    anyconnect::AcConnectRefusal& refusal) {
    io::TlsConnectControl control{target.address, cancel_fd};
    auto stream = io::TlsStream::connect(target.host, target.port, target.credentials, control);
    if (!stream) return make_error("TLS connection to " + target.host + ": " + stream.error().message);
    auto link = CstpLink::connect_on(std::move(*stream), request, refusal);
    // The cancel fd dies with the attempt; the link outlives it.
    if (link) (*link)->tls().set_cancel_fd(-1);
    return link;
}

}  // namespace espvpn::session
