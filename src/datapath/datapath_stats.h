// Counters of every packet pipeline (ESP, DTLS, the TLS-framed tunnels): every
// packet, byte and drop, by reason.
//
// Each pipeline thread owns one counter block and is its only writer (relaxed
// atomic stores, no read-modify-write); anyone may take a snapshot at any time.
// The field lists below are the single source for the live counters, the
// snapshot structs and the JSON/text output.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace espvpn::datapath {

// The UDP socket's side of every UDP pipeline (ESP, DTLS), copied from its
// io::UdpCounters by mirror_send_counters / mirror_receive_counters (udp_send.h).
#define ESPVPN_UDP_TX_COUNTERS(X)                                                             \
    X(udp_sent)             /* datagrams the kernel accepted */                               \
    X(udp_send_calls)       /* sendmmsg calls */                                              \
    X(udp_gso_messages)     /* messages carrying several segments */                          \
    X(send_retries)         /* waits for socket room before resending the rest of a batch */
#define ESPVPN_UDP_TX_DROPS(X)                                                                \
    X(drop_socket_full)     /* socket send buffer still full after retries */                 \
    X(drop_no_buffers)      /* ENOBUFS (device queue full) after retries */                   \
    X(drop_unreachable)     /* ICMP unreachable / connection refused from the peer */         \
    X(drop_udp_too_big)     /* EMSGSIZE: the datagram is larger than the path allows */       \
    X(drop_send_error)      /* any other send failure */                                   \
    X(send_error_errno)     /* errno of the latest of those (0: none) */
#define ESPVPN_UDP_RX_COUNTERS(X)                                                             \
    X(udp_recv_calls)                                                                         \
    X(udp_datagrams)                                                                          \
    X(udp_bytes)                                                                              \
    X(udp_gro_buffers)      /* received buffers holding several datagrams */                 \
    X(udp_peer_errors)      /* ICMP errors reported on the socket */

// tun -> ESP -> UDP
#define ESPVPN_TX_COUNTERS(X)                                                                 \
    X(tun_reads)            /* read(2) calls on the tun that returned data */                 \
    X(tun_super_packets)    /* reads carrying a TSO/USO super-packet */                       \
    X(inner_packets)        /* inner packets after splitting */                               \
    X(inner_bytes)                                                                            \
    X(esp_packets)          /* sealed */                                                      \
    X(esp_bytes)            /* UDP payload bytes sealed */                                    \
    ESPVPN_UDP_TX_COUNTERS(X) \
    X(probes_sent)          /* GP ESP probes sealed and sent */                               \
    X(sa_installs)          /* outbound SAs taken into use */                                 \
    X(drop_split)           /* tun super-packets that could not be split (malformed) */      \
    X(drop_no_sa)           /* no outbound SA installed yet */                                \
    X(drop_too_big)         /* inner packet larger than the tunnel MTU */                     \
    X(icmp_too_big_sent)    /* ICMP frag-needed / ICMPv6 packet-too-big written to the tun */ \
    X(drop_not_ip)          /* neither IPv4 nor IPv6 */                                       \
    X(drop_seal_failed)     /* no room / crypto refused (not expected) */                     \
    X(drop_sequence_exhausted) /* 2^32 packets on one SA: a rekey is overdue */               \
    ESPVPN_UDP_TX_DROPS(X) \
    X(drop_no_peer)         /* gateway: no authentic packet has told us where to send yet */

// UDP -> ESP -> tun
#define ESPVPN_RX_COUNTERS(X)                                                                 \
    ESPVPN_UDP_RX_COUNTERS(X) \
    X(esp_ok)               /* authentic, decrypted */                                        \
    X(inner_packets)        /* delivered to the tun */                                        \
    X(inner_bytes)                                                                            \
    X(tun_writes)           /* write(2) calls (after coalescing) */                           \
    X(lingers)              /* short waits before receiving a download (rx_linger.h) */       \
    X(probe_replies)        /* GP ESP probe replies (not delivered) */                        \
    X(sa_installs)          /* inbound SAs installed */                                       \
    X(sa_retired)           /* previous SAs dropped after the grace period */                 \
    X(peer_changes)         /* gateway: sender address learned or changed */                  \
    X(drop_truncated)       /* datagram larger than a buffer slot */                          \
    X(drop_short_packet)                                                                      \
    X(drop_bad_length)                                                                        \
    X(drop_unknown_spi)                                                                       \
    X(drop_replayed)                                                                          \
    X(drop_too_old)                                                                           \
    X(drop_bad_icv)                                                                           \
    X(drop_bad_padding)                                                                       \
    X(drop_bad_next_header)                                                                   \
    X(drop_tun_write)       /* the kernel refused a tun write (queue full, bad packet) */

// The TLS-framed tunnels (GP's HTTPS tunnel, AnyConnect's CSTP): tun <->
// frames <-> TLS records. tx_* and drop_tx_* are written by the send thread,
// rx_* and drop_rx_* by the receive thread. dpd_* stay 0 for GP (its
// keepalive is echoed by the gateway and doubles as DPD).
#define ESPVPN_TLS_COUNTERS(X)                                                                \
    X(tx_tun_reads)         /* read(2) calls on the tun that returned data */                 \
    X(tx_super_packets)     /* reads carrying a TSO/USO super-packet */                       \
    X(tx_packets)           /* inner packets framed */                                        \
    X(tx_bytes)             /* inner bytes framed */                                          \
    X(tx_tls_records)       /* gnutls_record_send calls that wrote (one TLS record each) */   \
    X(tx_tls_bytes)         /* frame bytes handed to TLS */                                   \
    X(tx_write_waits)       /* waits for room in the TCP send buffer */                       \
    X(tx_keepalives)        /* keepalive frames sent */                                       \
    X(tx_dpd_requests)      /* DPD requests sent (CSTP) */                                    \
    X(tx_dpd_responses)     /* answers to the server's DPD requests (CSTP) */                 \
    X(tx_icmp_too_big_sent) /* ICMP frag-needed / packet-too-big written to the tun */        \
    X(drop_tx_split)        /* tun super-packets that could not be split */                   \
    X(drop_tx_too_big)      /* inner packet larger than the tunnel MTU */                     \
    X(drop_tx_not_ip)       /* neither IPv4 nor IPv6 */                                       \
    X(rx_tls_reads)         /* gnutls_record_recv calls that returned data */                 \
    X(rx_tls_bytes)                                                                           \
    X(rx_frames)            /* data frames */                                                 \
    X(rx_packets)           /* inner packets delivered to the tun */                          \
    X(rx_bytes)                                                                               \
    X(rx_keepalives)        /* keepalive frames received */                                   \
    X(rx_dpd_requests)      /* DPD requests from the server (CSTP; answered by tx) */         \
    X(rx_dpd_responses)     /* answers to our DPD requests (CSTP) */                          \
    X(rx_tun_writes)        /* write(2) calls (after coalescing) */                           \
    X(rx_lingers)           /* short waits before reading a download (rx_linger.h) */         \
    X(drop_rx_too_big)      /* frame larger than a tun slot */                                \
    X(drop_rx_not_ip)       /* frame type disagrees with the packet's IP version */           \
    X(drop_rx_tun_write)    /* the kernel refused a tun write */

// IP packets -> DTLS -> UDP (AnyConnect; the tun is read by the CSTP pump: its tx_tun_reads)
#define ESPVPN_DTLS_TX_COUNTERS(X)                                                        \
    X(inner_packets)        /* IP packets handed to send() */                             \
    X(inner_bytes)                                                                        \
    X(records)              /* DTLS records sealed (data and control) */                  \
    X(record_bytes)         /* UDP payload bytes sealed */                                \
    ESPVPN_UDP_TX_COUNTERS(X) \
    X(dpd_requests_sent)                                                                  \
    X(dpd_responses_sent)   /* answers to the server's DPD requests */                    \
    X(keepalives_sent)                                                                    \
    X(icmp_too_big_sent)    /* ICMP frag-needed / packet-too-big written to the tun */    \
    X(drop_too_big)         /* inner packet larger than the tunnel MTU */                 \
    X(drop_not_ip)          /* neither IPv4 nor IPv6 */                                   \
    X(drop_seal_failed)     /* GnuTLS refused the record */                               \
    ESPVPN_UDP_TX_DROPS(X)

// UDP -> DTLS -> the tun's owner (AnyConnect; the CSTP pump writes the tun)
#define ESPVPN_DTLS_RX_COUNTERS(X)                                                        \
    ESPVPN_UDP_RX_COUNTERS(X) \
    X(records)              /* authentic records opened */                                \
    X(inner_packets)        /* data packets delivered to the tun */                       \
    X(inner_bytes)                                                                        \
    X(lingers)              /* short waits before receiving a download (rx_linger.h) */   \
    X(dpd_requests)         /* from the server (answered by tx) */                        \
    X(dpd_responses)                                                                      \
    X(keepalives)                                                                         \
    X(disconnects)          /* disconnect / terminate from the server */                  \
    X(drop_truncated)       /* datagram larger than a buffer slot */                      \
    X(drop_discarded)       /* datagrams GnuTLS discarded: bad MAC, replay, not DTLS */   \
    X(drop_empty)           /* record without a type byte */                              \
    X(drop_not_ip)          /* data record that is not IPv4/IPv6 */                       \
    X(drop_compressed)      /* compressed data (never negotiated) */                      \
    X(drop_unknown_type)                                                                  \
    X(drop_dpd_backlog)     /* DPD requests not answered: the rx->tx queue was full */

// One counter block from one list above: `Values` (plain numbers: snapshots,
// sums over restarts) and `Live` (one writer thread, relaxed atomics), with the
// one loop over the fields that JSON, text, drops and sums are written with.
#define ESPVPN_FIELD_VALUE(name) std::uint64_t name = 0;
#define ESPVPN_FIELD_ATOMIC(name) std::atomic<std::uint64_t> name{0};
#define ESPVPN_FIELD_VISIT(name) f(#name, name);
#define ESPVPN_FIELD_LOAD(name) s.name = name.load(std::memory_order_relaxed);
#define ESPVPN_FIELD_ADD(name) name += o.name;
#define ESPVPN_COUNTER_BLOCK(Values, Live, LIST)                                           \
    struct Values {                                                                        \
        LIST(ESPVPN_FIELD_VALUE)                                                           \
        template <class F>                                                                 \
        void for_each(F&& f) const {                                                       \
            LIST(ESPVPN_FIELD_VISIT)                                                       \
        }                                                                                  \
        void add(const Values& o) { LIST(ESPVPN_FIELD_ADD) }                               \
    };                                                                                     \
    struct Live {                                                                          \
        LIST(ESPVPN_FIELD_ATOMIC)                                                          \
        void load_into(Values& s) const { LIST(ESPVPN_FIELD_LOAD) }                        \
        Values snapshot() const {                                                          \
            Values s;                                                                      \
            load_into(s);                                                                  \
            return s;                                                                      \
        }                                                                                  \
    };

ESPVPN_COUNTER_BLOCK(EspTxCounts, EspTxLiveCounts, ESPVPN_TX_COUNTERS)
ESPVPN_COUNTER_BLOCK(EspRxCounts, EspRxLiveCounts, ESPVPN_RX_COUNTERS)
ESPVPN_COUNTER_BLOCK(TlsTunnelStats, TlsTunnelCounters, ESPVPN_TLS_COUNTERS)
ESPVPN_COUNTER_BLOCK(DtlsTxStats, DtlsTxCounters, ESPVPN_DTLS_TX_COUNTERS)
ESPVPN_COUNTER_BLOCK(DtlsRxStats, DtlsRxCounters, ESPVPN_DTLS_RX_COUNTERS)

// The same output for every block: the sum of its drop_* fields, its fields as
// JSON members ("name": n, ...), the non-zero ones as " name=n".
template <class Values>
std::uint64_t drops_of(const Values& v) {
    std::uint64_t n = 0;
    v.for_each([&](std::string_view name, std::uint64_t x) {
        if (name.starts_with("drop_")) n += x;
    });
    return n;
}
template <class Values>
void append_json_members(std::string& out, const Values& v) {
    const char* sep = "";
    v.for_each([&](std::string_view name, std::uint64_t x) {
        out.append(sep).append("\"").append(name).append("\": ").append(std::to_string(x));
        sep = ", ";
    });
}
template <class Values>
void append_nonzero_text(std::string& out, const Values& v) {
    v.for_each([&](std::string_view name, std::uint64_t x) {
        if (x) out.append(" ").append(name).append("=").append(std::to_string(x));
    });
}

// The GP HTTPS tunnel's counters keep their old name.
using HttpsStats = TlsTunnelStats;
using HttpsCounters = TlsTunnelCounters;

struct EspTxStats : EspTxCounts {
    std::uint32_t spi = 0;           // current outbound SPI (0: none)
    std::uint64_t next_sequence = 0;
    bool needs_rekey = false;        // sequence numbers running out
};

struct EspRxStats : EspRxCounts {
    std::uint32_t spi = 0;           // current inbound SPI
    std::uint32_t previous_spi = 0;  // kept for the grace period (0: none)
};

// What carries the packets now (GlobalProtect: ESP, or the HTTPS fallback).
enum class Transport { none, esp, https };
const char* transport_name(Transport t);

// The counters of the datapaths running now (each transport's start from zero
// when it is (re)started; the session logs them at every switch).
struct DatapathStats {
    Transport transport = Transport::esp;
    std::uint64_t transport_switches = 0;  // ESP <-> HTTPS changes so far
    EspTxStats tx;
    EspRxStats rx;
    HttpsStats https;
    std::uint64_t drops() const;     // every drop, both directions
    // one object: {"transport": "esp", "transport_switches": n, "tx": {...}, "rx": {...}, "https": {...}}
    std::string to_json() const;
    std::string to_text() const;     // one line per direction, for logs / SIGUSR1
};

// Live counters, one writer thread each.
struct EspTxCounters : EspTxLiveCounts {
    std::atomic<std::uint32_t> spi{0};
    std::atomic<std::uint64_t> next_sequence{0};
    std::atomic<bool> needs_rekey{false};
    EspTxStats snapshot() const;
};

struct EspRxCounters : EspRxLiveCounts {
    std::atomic<std::uint32_t> spi{0};
    std::atomic<std::uint32_t> previous_spi{0};
    EspRxStats snapshot() const;
};

// The single writer adds without a locked instruction.
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
// Mirrors a cumulative counter kept elsewhere by the same thread. The tun's
// counters outlive every pipeline on it (GP: ESP <-> HTTPS; AnyConnect: DTLS
// renewals), so a pipeline mirrors them relative to its start (TunCountsSince,
// tun_counts.h): each pipeline's counters say what that pipeline did.
inline void mirror(std::atomic<std::uint64_t>& counter, std::uint64_t value) {
    counter.store(value, std::memory_order_relaxed);
}

}  // namespace espvpn::datapath
