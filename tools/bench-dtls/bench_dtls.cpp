// bench-dtls: throughput of the AnyConnect DTLS channel (src/io/dtls_channel.h)
// on one core, per direction, at a given inner packet size (see docs/PERFORMANCE.md).
//
//   bench-dtls [--size 1400] [--seconds 1] [--mode psk|legacy-gcm|legacy-cbc]
//
// A DtlsChannel handshakes (PSK or legacy resumption) over loopback UDP with
// a GnuTLS server session in this process. Then, in batches of 64 records:
//   seal:   DtlsChannel::seal_batch (type byte + packet -> DTLS record into a batch)
//   open:   DtlsChannel::open_batch of records the server session sealed
//           (the server's sealing is timed separately and not counted)
//   send:   seal_batch + UdpSocket::send_batch (sendmmsg, UDP GSO) to a drained socket
//   send1:  the same records one gnutls_record_send -> send(2) each (no batching)
// Times are this thread's CPU time, the best of 3 rounds.
#include <arpa/inet.h>
#include <gnutls/dtls.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "src/io/dtls_channel.h"
#include "src/io/packet_batch.h"
#include "src/io/udp_socket.h"

using namespace espvpn;

// Counts heap allocations during the batch calls (GnuTLS's record layer
// allocates a buffer per record; this says how many). Sanitizers own malloc.
#if !defined(__SANITIZE_ADDRESS__)
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
}
static thread_local bool g_counting = false;
static thread_local long g_allocations = 0;
extern "C" void* malloc(std::size_t n) {
    if (g_counting) ++g_allocations;
    return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t a, std::size_t b) {
    if (g_counting) ++g_allocations;
    return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, std::size_t n) {
    if (g_counting) ++g_allocations;
    return __libc_realloc(p, n);
}
#else
static thread_local bool g_counting = false;
static thread_local long g_allocations = -1;
#endif

namespace {

constexpr std::size_t kBatch = 64;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "bench-dtls: %s\n", what.c_str());
    std::exit(1);
}

double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The server session's transport after the handshake: records are sealed into
// / opened from a PacketBatch, like the client's batch calls.
struct ServerPipe {
    io::PacketBatch* out = nullptr;
    const io::PacketBatch* in = nullptr;
    std::size_t next = 0;
};
ssize_t server_push(gnutls_transport_ptr_t p, const void* data, size_t size) {
    auto* pipe = static_cast<ServerPipe*>(p);
    auto room = pipe->out->next_room();
    if (room.size() < size) {
        errno = EAGAIN;
        return -1;
    }
    std::memcpy(room.data(), data, size);
    pipe->out->commit(size);
    return static_cast<ssize_t>(size);
}
ssize_t server_pull(gnutls_transport_ptr_t p, void* data, size_t size) {
    auto* pipe = static_cast<ServerPipe*>(p);
    if (!pipe->in || pipe->next >= pipe->in->size()) {
        errno = EAGAIN;
        return -1;
    }
    auto d = pipe->in->packet(pipe->next++);
    std::memcpy(data, d.data(), std::min(size, d.size()));
    return static_cast<ssize_t>(std::min(size, d.size()));
}
int server_pull_timeout(gnutls_transport_ptr_t p, unsigned) {
    auto* pipe = static_cast<ServerPipe*>(p);
    return pipe->in && pipe->next < pipe->in->size() ? 1 : 0;
}

std::vector<unsigned char> g_psk;
int psk_for(gnutls_session_t, const char*, gnutls_datum_t* key) {
    key->data = static_cast<unsigned char*>(gnutls_malloc(g_psk.size()));
    std::memcpy(key->data, g_psk.data(), g_psk.size());
    key->size = static_cast<unsigned>(g_psk.size());
    return 0;
}

// Runs body() (one batch, returns CPU seconds to count) for ~budget seconds, 3 rounds, best rate.
double best_rate(double budget, const std::function<double()>& body) {
    double best = 0;
    for (int round = 0; round < 3; ++round) {
        double counted = 0;
        std::uint64_t batches = 0;
        const double start = cpu_now();
        while (cpu_now() - start < budget) {
            counted += body();
            ++batches;
        }
        best = std::max(best, batches * kBatch / counted);
    }
    return best;
}

void report(const char* what, std::size_t size, double pps) {
    std::printf("| %-6s | %5zu | %10.0f | %7.2f | %6.0f |\n", what, size, pps, pps * size * 8 / 1e9, 1e9 / pps);
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t size = 1400;
    double seconds = 1;
    std::string mode = "psk";
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--size" && i + 1 < argc) size = std::stoul(argv[++i]);
        else if (a == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
        else if (a == "--mode" && i + 1 < argc) mode = argv[++i];
        else if (a == "--quick") seconds = 0.05;
        else die("usage: bench-dtls [--size N] [--seconds S] [--mode psk|legacy-gcm|legacy-cbc] [--quick]");
    }

    // Loopback UDP pair.
    int sfd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (::bind(sfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) die("bind");
    ::getsockname(sfd, reinterpret_cast<sockaddr*>(&sa), &sl);
    int big = 8 << 20;
    ::setsockopt(sfd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    io::UdpOptions uo;
    uo.remote = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    auto udp_r = io::UdpSocket::open(uo);
    if (!udp_r) die(udp_r.error().message);
    io::UdpSocket udp = std::move(udp_r.value());
    auto local = udp.local_address();
    if (!local || ::connect(sfd, reinterpret_cast<const sockaddr*>(&local->storage), local->length) != 0)
        die("connect server socket");

    // The channel and the server session.
    io::DtlsChannelOptions options;
    gnutls_session_t server;
    gnutls_psk_server_credentials_t pcred = nullptr;
    gnutls_certificate_credentials_t xcred = nullptr;
    if (gnutls_init(&server, GNUTLS_SERVER | GNUTLS_DATAGRAM) < 0) die("server init");
    if (mode == "psk") {
        g_psk.assign(32, 0x5a);
        io::DtlsPskMode psk;
        psk.psk = Secret(std::span<const std::uint8_t>(g_psk.data(), g_psk.size()));
        psk.app_id.assign(32, 0xab);
        options.mode = std::move(psk);
        gnutls_priority_set_direct(server, "NORMAL:-VERS-ALL:-KX-ALL:+PSK:+VERS-DTLS1.2:-CIPHER-ALL:+AES-256-GCM", nullptr);
        gnutls_psk_allocate_server_credentials(&pcred);
        gnutls_psk_set_server_credentials_function(pcred, psk_for);
        gnutls_credentials_set(server, GNUTLS_CRD_PSK, pcred);
    } else if (mode == "legacy-gcm" || mode == "legacy-cbc") {
        const bool gcm = mode == "legacy-gcm";
        io::DtlsLegacyMode legacy;
        legacy.master_secret = io::make_dtls_master_secret().value();
        legacy.session_id.assign(32, 0xcd);
        legacy.suite = io::find_dtls_legacy_suite(gcm ? "OC-DTLS1_2-AES256-GCM" : "AES256-SHA", false).value();
        legacy.tunnel_mtu = std::max<std::size_t>(size, 1400);
        std::string prio = std::string(legacy.suite->priority) + ":%NO_SESSION_HASH:%DISABLE_SAFE_RENEGOTIATION";
        gnutls_priority_set_direct(server, prio.c_str(), nullptr);
        const gnutls_datum_t m{const_cast<unsigned char*>(legacy.master_secret.reveal().data()), 48};
        const gnutls_datum_t sid{legacy.session_id.data(), 32};
        gnutls_session_set_premaster(server, GNUTLS_SERVER, legacy.suite->version, legacy.suite->kx,
                                     legacy.suite->cipher, legacy.suite->mac, GNUTLS_COMP_NULL, &m, &sid);
        gnutls_certificate_allocate_credentials(&xcred);
        gnutls_credentials_set(server, GNUTLS_CRD_CERTIFICATE, xcred);
        options.mode = std::move(legacy);
    } else {
        die("unknown --mode " + mode);
    }
    options.base_mtu = size + 200;  // room for one packet per record whatever the size
    gnutls_transport_set_int(server, sfd);
    gnutls_dtls_set_mtu(server, static_cast<unsigned>(options.base_mtu));
    std::atomic<int> server_rc{1};
    std::thread server_thread([&] {
        int rc;
        do rc = gnutls_handshake(server);
        while (rc < 0 && !gnutls_error_is_fatal(rc));
        server_rc = rc;
    });
    auto channel_r = io::DtlsChannel::create(udp.fd(), std::move(options));
    if (!channel_r) die(channel_r.error().message);
    auto& channel = *channel_r.value();
    if (auto s = channel.handshake(); !s) die(s.error().message);
    server_thread.join();
    if (server_rc != 0) die(std::string("server handshake: ") + gnutls_strerror(server_rc));
    if (channel.record_payload_mtu() < size + 1) die("record MTU below the packet size");
    std::printf("bench-dtls: %s, %zu-byte packets, batches of %zu, best of 3 x %.2f s CPU\n",
                channel.description().c_str(), size, kBatch, seconds);
    std::printf("| op     | bytes | packets/s  | Gbit/s  | ns/pkt |\n|---|---:|---:|---:|---:|\n");

    ServerPipe pipe;
    gnutls_transport_set_ptr(server, &pipe);
    gnutls_transport_set_push_function(server, server_push);
    gnutls_transport_set_pull_function(server, server_pull);
    gnutls_transport_set_pull_timeout_function(server, server_pull_timeout);

    io::PacketBatchShape shape{kBatch, size + 1 + io::kDtlsMaxRecordOverhead + 64, 16, 0};
    io::PacketBatch plain(shape), records(shape), opened(shape);
    for (std::size_t i = 0; i < kBatch; ++i) {
        auto room = plain.next_room();
        room[0] = 0x00;
        room[1] = 0x45;
        for (std::size_t k = 2; k <= size; ++k) room[k] = static_cast<std::uint8_t>(k * 7 + i);
        plain.commit(size + 1);
    }

    // seal
    report("seal", size, best_rate(seconds, [&] {
               records.clear();
               const double t0 = cpu_now();
               auto o = channel.seal_batch(plain, records);
               const double t = cpu_now() - t0;
               if (o.records != kBatch) die("seal_batch sealed " + std::to_string(o.records));
               return t;
           }));

    // open (records sealed by the server session, not timed)
    report("open", size, best_rate(seconds, [&] {
               records.clear();
               pipe.out = &records;
               for (std::size_t i = 0; i < kBatch; ++i)
                   if (gnutls_record_send(server, plain.packet(i).data(), plain.length(i)) < 0) die("server seal");
               opened.clear();
               const double t0 = cpu_now();
               auto o = channel.open_batch(records, opened);
               const double t = cpu_now() - t0;
               if (!o || o->records != kBatch) die("open_batch opened too few");
               return t;
           }));

    // Heap allocations per record in the batch calls.
    {
        records.clear();
        g_counting = true;
        const long a0 = g_allocations;
        (void)channel.seal_batch(plain, records);
        const long sealed = g_allocations - a0;
        g_counting = false;
        io::PacketBatch server_records(shape);
        pipe.out = &server_records;
        for (std::size_t i = 0; i < kBatch; ++i) (void)gnutls_record_send(server, plain.packet(i).data(), plain.length(i));
        opened.clear();
        g_counting = true;
        const long a1 = g_allocations;
        (void)channel.open_batch(server_records, opened);
        const long opened_allocs = g_allocations - a1;
        g_counting = false;
        std::printf("heap allocations per record: seal %.2f, open %.2f%s\n", double(sealed) / kBatch,
                    double(opened_allocs) / kBatch, g_allocations < 0 ? " (not counted under sanitizers)" : "");
    }

    // Drain the server socket while the client sends for real.
    std::atomic<bool> stop{false};
    std::thread drain([&] {
        std::vector<char> buf(65536);
        while (!stop.load()) {
            pollfd p{sfd, POLLIN, 0};
            if (::poll(&p, 1, 50) == 1)
                while (::recv(sfd, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
                }
        }
    });
    report("send", size, best_rate(seconds, [&] {
               records.clear();
               const double t0 = cpu_now();
               (void)channel.seal_batch(plain, records);
               (void)udp.send_batch(records);
               return cpu_now() - t0;
           }));
    report("send1", size, best_rate(seconds, [&] {
               const double t0 = cpu_now();
               for (std::size_t i = 0; i < kBatch; ++i) (void)channel.send_record(plain.packet(i));
               return cpu_now() - t0;
           }));
    stop = true;
    drain.join();
    const io::UdpCounters& c = udp.counters();
    std::printf("udp: %llu datagrams in %llu sendmmsg calls, %llu GSO messages, %llu dropped (socket full)\n",
                static_cast<unsigned long long>(c.sent), static_cast<unsigned long long>(c.send_calls),
                static_cast<unsigned long long>(c.gso_messages), static_cast<unsigned long long>(c.drop_would_block));
    gnutls_deinit(server);
    if (pcred) gnutls_psk_free_server_credentials(pcred);
    if (xcred) gnutls_certificate_free_credentials(xcred);
    ::close(sfd);
    return 0;
}
