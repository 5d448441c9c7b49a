// What the two TLS tunnel gateways for benchmarks and tests share
// (https-tunnel-gateway: GP's HTTPS tunnel; anyconnect-gateway: CSTP + DTLS):
// a blocking GnuTLS server session per client connection, HTTP head reading,
// the gateway's tun, and the accept loop that ends on SIGINT/SIGTERM.
#pragma once

#include <gnutls/gnutls.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "protocols/base/result.h"
#include "src/io/tun_device.h"
#include "src/io/unique_fd.h"
#include "src/log/logger.h"

namespace espvpn::tools {

// The value of header `name` in an HTTP head ("" if absent), case-insensitive.
std::string header_value(std::string_view head, std::string_view name);
// Content-Length of a head: 0 if absent, nullopt if malformed or above `max`.
std::optional<std::size_t> content_length(std::string_view head, std::size_t max);

// A GnuTLS server session on an accepted socket (blocking, 30 s I/O timeouts).
class ServerTls {
public:
    ServerTls(gnutls_certificate_credentials_t cred, io::UniqueFd fd);
    ~ServerTls();
    ServerTls(const ServerTls&) = delete;
    ServerTls& operator=(const ServerTls&) = delete;

    bool handshake();
    // Appends what one record brings to `buf`; false on EOF or error.
    bool read_more(std::string& buf);
    // Reads until `buf` holds a whole head ("\r\n\r\n"): its size with the blank
    // line, or 0 on EOF, error or a head above `max`.
    std::size_t read_head(std::string& buf, std::size_t max);
    bool write_all(std::string_view bytes);
    gnutls_session_t native() const { return session_; }
    int fd() const { return fd_.get(); }

private:
    io::UniqueFd fd_;
    gnutls_session_t session_ = nullptr;
};

// The certificate and key (PEM files) a gateway shows; nullptr with a message on stderr.
gnutls_certificate_credentials_t load_server_credentials(const std::string& cert, const std::string& key,
                                                         const char* program);

// The gateway's tun: offloads as asked, MTU, up, a route per prefix.
Result<io::TunDevice> open_gateway_tun(const std::string& name, bool offload, unsigned mtu,
                                       const std::vector<std::string>& routes);

// Accepts on `listen` (ADDR:PORT) and serves each connection on a thread of
// its own until SIGINT/SIGTERM or `seconds`; then sets stop, shuts down the
// connections still open and joins their threads. `ready` runs once the socket
// listens (the signals are blocked by then, for every thread).
class AcceptLoop {
public:
    std::atomic<bool> stop{false};

    // 0 when it ran; 1 with a message on stderr when it could not listen.
    int run(const std::string& listen, int seconds, const char* program, const std::function<void()>& ready,
            const std::function<void(io::UniqueFd)>& serve);

    // Registers a connection for the shutdown at exit while the object lives.
    class Tracked {
    public:
        Tracked(AcceptLoop& loop, int fd);
        ~Tracked();
        Tracked(const Tracked&) = delete;
        Tracked& operator=(const Tracked&) = delete;

    private:
        AcceptLoop& loop_;
        int fd_;
    };

private:
    std::mutex mutex_;
    std::vector<int> conns_;
};

// What both gateways hold and how they start: the server certificate, the tun,
// then the accept loop, with "ready listen=ADDR[ EXTRA] tun=NAME offload=0|1" on
// stdout once it listens (what the scripts wait for).
struct GatewaySetup {
    const char* program = nullptr;
    std::string cert, key;
    std::string tun_name;
    bool offload = true;
    unsigned mtu = 1400;
    std::vector<std::string> routes;
    std::string listen = "0.0.0.0:4443";
    int seconds = 900;
    std::string ready_extra;  // e.g. "dtls=ADDR:PORT"
};

// Writes `json` and a newline to `path` whole (a temporary file renamed over it), so a
// reader never sees half of it; nothing when `path` is empty.
void write_json_file(const std::string& path, const std::string& json);

// A whole number in (0, max), all of `text`.
std::optional<long> parse_count(const std::string& text, long max);

// The command line: GatewaySetup's options (--listen --cert --key --tun-name --route --mtu
// --seconds --no-offload) into `gw`, --help (usage, exit 0), and the tool's own through `own`:
// own(name, value) says whether it knows the option and sets `ok` false when its value is bad
// (value(out) reads the next argument; false when there is none). False, with a message on
// stderr, for an unknown option or a bad value.
using OptionValue = std::function<bool(std::string& out)>;
using OwnOptions = std::function<bool(const std::string& name, const OptionValue& value, bool& ok)>;
bool parse_gateway_options(int argc, char** argv, GatewaySetup& gw, void (*usage)(), const OwnOptions& own);

// A gateway's main(): the options (`parse`: nullopt = usage, exit 2), logging as
// `program`, then Gateway(options).run().
template <class Gateway, class Parse>
int gateway_main(int argc, char** argv, const char* program, Parse parse, void (*usage)()) {
    auto options = parse(argc, argv);
    if (!options) {
        usage();
        return 2;
    }
    log::Config lc;
    lc.ident = program;
    log::configure(lc);
    Gateway gateway(std::move(*options));
    return gateway.run();
}

class TlsGateway {
protected:
    ~TlsGateway();
    // 0 after SIGINT/SIGTERM or `seconds`; 1 with a message on stderr when it could not start.
    int serve_until_stopped(const GatewaySetup& setup, const std::function<void(io::UniqueFd)>& serve);

    gnutls_certificate_credentials_t server_cred_ = nullptr;
    std::optional<io::TunDevice> tun_;
    AcceptLoop loop_;
};

}  // namespace espvpn::tools
