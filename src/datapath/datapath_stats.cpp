#include "src/datapath/datapath_stats.h"

#include <cstdio>
#include <sstream>
#include <string_view>

namespace espvpn::datapath {

TxStats TxCounters::snapshot() const {
    TxStats s;
#define ESPVPN_FIELD(name) s.name = name.load(std::memory_order_relaxed);
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    s.spi = spi.load(std::memory_order_relaxed);
    s.next_sequence = next_sequence.load(std::memory_order_relaxed);
    s.needs_rekey = needs_rekey.load(std::memory_order_relaxed);
    return s;
}

RxStats RxCounters::snapshot() const {
    RxStats s;
#define ESPVPN_FIELD(name) s.name = name.load(std::memory_order_relaxed);
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    s.spi = spi.load(std::memory_order_relaxed);
    s.previous_spi = previous_spi.load(std::memory_order_relaxed);
    return s;
}

HttpsStats HttpsCounters::snapshot() const {
    HttpsStats s;
#define ESPVPN_FIELD(name) s.name = name.load(std::memory_order_relaxed);
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return s;
}

const char* transport_name(Transport t) {
    switch (t) {
        case Transport::none: return "none";
        case Transport::esp: return "esp";
        case Transport::https: return "https";
    }
    return "none";
}

std::uint64_t DatapathStats::drops() const {
    std::uint64_t n = 0;
    auto add = [&](std::string_view name, std::uint64_t v) {
        if (name.substr(0, 5) == "drop_") n += v;
    };
#define ESPVPN_FIELD(name) add(#name, tx.name);
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
#define ESPVPN_FIELD(name) add(#name, rx.name);
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
#define ESPVPN_FIELD(name) add(#name, https.name);
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return n;
}

namespace {
std::string hex_spi(std::uint32_t spi) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%08x", spi);
    return text;
}
}  // namespace

std::string DatapathStats::to_json() const {
    std::ostringstream o;
    const char* sep = "";
    o << "{\"transport\": \"" << transport_name(transport) << "\", \"transport_switches\": " << transport_switches
      << ", \"tx\": {";
#define ESPVPN_FIELD(name) o << sep << "\"" #name "\": " << tx.name, sep = ", ";
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << ", \"spi\": \"" << hex_spi(tx.spi) << "\", \"next_sequence\": " << tx.next_sequence
      << ", \"needs_rekey\": " << (tx.needs_rekey ? "true" : "false") << "}, \"rx\": {";
    sep = "";
#define ESPVPN_FIELD(name) o << sep << "\"" #name "\": " << rx.name, sep = ", ";
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << ", \"spi\": \"" << hex_spi(rx.spi) << "\", \"previous_spi\": \"" << hex_spi(rx.previous_spi)
      << "\"}, \"https\": {";
    sep = "";
#define ESPVPN_FIELD(name) o << sep << "\"" #name "\": " << https.name, sep = ", ";
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << "}}";
    return o.str();
}

std::string DatapathStats::to_text() const {
    // Zero counters are left out: the line stays readable and every non-zero drop shows.
    std::ostringstream o;
    // The transport and HTTPS lines only once there is an HTTPS side to speak of.
    bool https_used = transport == Transport::https || transport_switches != 0;
#define ESPVPN_FIELD(name) https_used = https_used || https.name != 0;
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    if (https_used) o << "transport=" << transport_name(transport) << " switches=" << transport_switches << "\n";
    o << "tx spi=" << hex_spi(tx.spi) << " seq=" << tx.next_sequence;
#define ESPVPN_FIELD(name) \
    if (tx.name) o << " " #name "=" << tx.name;
    ESPVPN_TX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    o << "\nrx spi=" << hex_spi(rx.spi) << " previous=" << hex_spi(rx.previous_spi);
#define ESPVPN_FIELD(name) \
    if (rx.name) o << " " #name "=" << rx.name;
    ESPVPN_RX_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    if (!https_used) return o.str();
    o << "\nhttps";
#define ESPVPN_FIELD(name) \
    if (https.name) o << " " #name "=" << https.name;
    ESPVPN_HTTPS_COUNTERS(ESPVPN_FIELD)
#undef ESPVPN_FIELD
    return o.str();
}

}  // namespace espvpn::datapath
