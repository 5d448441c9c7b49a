// Counters of the ESP data path: every packet, byte and drop, by reason.
//
// Each pipeline thread owns one counter block and is its only writer (relaxed
// atomic stores, no read-modify-write); anyone may take a snapshot at any time.
// The field lists below are the single source for the live counters, the
// snapshot structs and the JSON/text output.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace espvpn::datapath {

// tun -> ESP -> UDP
#define ESPVPN_TX_COUNTERS(X)                                                                 \
    X(tun_reads)            /* read(2) calls on the tun that returned data */                 \
    X(tun_super_packets)    /* reads carrying a TSO/USO super-packet */                       \
    X(inner_packets)        /* inner packets after splitting */                               \
    X(inner_bytes)                                                                            \
    X(esp_packets)          /* sealed */                                                      \
    X(esp_bytes)            /* UDP payload bytes sealed */                                    \
    X(udp_sent)             /* datagrams the kernel accepted */                               \
    X(udp_send_calls)       /* sendmmsg calls */                                              \
    X(udp_gso_messages)     /* messages carrying several segments */                          \
    X(send_retries)         /* waits for socket room before resending the rest of a batch */ \
    X(probes_sent)          /* GP ESP probes sealed and sent */                               \
    X(sa_installs)          /* outbound SAs taken into use */                                 \
    X(drop_split)           /* tun super-packets that could not be split (malformed) */      \
    X(drop_no_sa)           /* no outbound SA installed yet */                                \
    X(drop_too_big)         /* inner packet larger than the tunnel MTU */                     \
    X(icmp_too_big_sent)    /* ICMP frag-needed / ICMPv6 packet-too-big written to the tun */ \
    X(drop_not_ip)          /* neither IPv4 nor IPv6 */                                       \
    X(drop_seal_failed)     /* no room / crypto refused (not expected) */                     \
    X(drop_sequence_exhausted) /* 2^32 packets on one SA: a rekey is overdue */               \
    X(drop_socket_full)     /* socket send buffer still full after retries */                 \
    X(drop_no_buffers)      /* ENOBUFS (device queue full) after retries */                   \
    X(drop_unreachable)     /* ICMP unreachable / connection refused from the peer */         \
    X(drop_udp_too_big)     /* EMSGSIZE: ESP packet larger than the path allows */            \
    X(drop_send_error)      /* any other send failure */                                      \
    X(drop_no_peer)         /* gateway: no authentic packet has told us where to send yet */

// UDP -> ESP -> tun
#define ESPVPN_RX_COUNTERS(X)                                                                 \
    X(udp_recv_calls)                                                                         \
    X(udp_datagrams)                                                                          \
    X(udp_bytes)                                                                              \
    X(udp_gro_buffers)      /* received buffers holding several datagrams */                 \
    X(udp_peer_errors)      /* ICMP errors reported on the socket */                          \
    X(esp_ok)               /* authentic, decrypted */                                        \
    X(inner_packets)        /* delivered to the tun */                                        \
    X(inner_bytes)                                                                            \
    X(tun_writes)           /* write(2) calls (after coalescing) */                           \
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

// The HTTPS fallback tunnel (https_pipeline.h): tun <-> GP frames <-> TLS.
// tx_* and drop_tx_* are written by its send thread, rx_* and drop_rx_* by its
// receive thread.
#define ESPVPN_HTTPS_COUNTERS(X)                                                              \
    X(tx_tun_reads)         /* read(2) calls on the tun that returned data */                 \
    X(tx_super_packets)     /* reads carrying a TSO/USO super-packet */                       \
    X(tx_packets)           /* inner packets framed */                                        \
    X(tx_bytes)             /* inner bytes framed */                                          \
    X(tx_tls_records)       /* gnutls_record_send calls that wrote (one TLS record each) */   \
    X(tx_tls_bytes)         /* frame bytes handed to TLS */                                   \
    X(tx_write_waits)       /* waits for room in the TCP send buffer */                       \
    X(tx_keepalives)        /* keepalive frames sent */                                       \
    X(drop_tx_split)        /* tun super-packets that could not be split */                   \
    X(drop_tx_too_big)      /* inner packet larger than the tunnel MTU */                     \
    X(drop_tx_not_ip)       /* neither IPv4 nor IPv6 */                                       \
    X(rx_tls_reads)         /* gnutls_record_recv calls that returned data */                 \
    X(rx_tls_bytes)                                                                           \
    X(rx_frames)            /* data frames */                                                 \
    X(rx_packets)           /* inner packets delivered to the tun */                          \
    X(rx_bytes)                                                                               \
    X(rx_keepalives)        /* keepalive frames received (the gateway's echo) */              \
    X(rx_tun_writes)        /* write(2) calls (after coalescing) */                           \
    X(drop_rx_too_big)      /* frame larger than a tun slot */                                \
    X(drop_rx_not_ip)       /* frame type disagrees with the packet's IP version */           \
    X(drop_rx_tun_write)    /* the kernel refused a tun write */

struct TxStats {
#define ESPVPN_FIELD(name) std::uint64_t name = 0;
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    std::uint32_t spi = 0;           // current outbound SPI (0: none)
    std::uint64_t next_sequence = 0;
    bool needs_rekey = false;        // sequence numbers running out
};

struct RxStats {
#define ESPVPN_FIELD(name) std::uint64_t name = 0;
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    std::uint32_t spi = 0;           // current inbound SPI
    std::uint32_t previous_spi = 0;  // kept for the grace period (0: none)
};

struct HttpsStats {
#define ESPVPN_FIELD(name) std::uint64_t name = 0;
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
};

// What carries the packets now (GlobalProtect: ESP, or the HTTPS fallback).
enum class Transport { none, esp, https };
const char* transport_name(Transport t);

// The counters of the datapaths running now (each transport's start from zero
// when it is (re)started; the session logs them at every switch).
struct DatapathStats {
    Transport transport = Transport::esp;
    std::uint64_t transport_switches = 0;  // ESP <-> HTTPS changes so far
    TxStats tx;
    RxStats rx;
    HttpsStats https;
    std::uint64_t drops() const;     // every drop, both directions
    // one object: {"transport": "esp", "transport_switches": n, "tx": {...}, "rx": {...}, "https": {...}}
    std::string to_json() const;
    std::string to_text() const;     // one line per direction, for logs / SIGUSR1
};

// Live counters, one writer thread each.
struct TxCounters {
#define ESPVPN_FIELD(name) std::atomic<std::uint64_t> name{0};
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    std::atomic<std::uint32_t> spi{0};
    std::atomic<std::uint64_t> next_sequence{0};
    std::atomic<bool> needs_rekey{false};
    TxStats snapshot() const;
};

struct HttpsCounters {
#define ESPVPN_FIELD(name) std::atomic<std::uint64_t> name{0};
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    HttpsStats snapshot() const;
};

struct RxCounters {
#define ESPVPN_FIELD(name) std::atomic<std::uint64_t> name{0};
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    std::atomic<std::uint32_t> spi{0};
    std::atomic<std::uint32_t> previous_spi{0};
    RxStats snapshot() const;
};

// The single writer adds without a locked instruction.
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
// Mirrors a cumulative counter kept elsewhere by the same thread.
inline void mirror(std::atomic<std::uint64_t>& counter, std::uint64_t value) {
    counter.store(value, std::memory_order_relaxed);
}

}  // namespace espvpn::datapath
