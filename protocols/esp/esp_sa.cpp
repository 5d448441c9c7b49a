#include "protocols/esp/esp_sa.h"

#include <algorithm>
#include <array>

#include "protocols/base/byte_order.h"

namespace espvpn {

namespace {

constexpr std::uint64_t kLastSequence = 0xFFFFFFFFu;

}  // namespace

std::string_view describe(EspSealStatus s) {
    switch (s) {
        case EspSealStatus::ok: return "ok";
        case EspSealStatus::no_headroom: return "buffer has too little headroom for the ESP header";
        case EspSealStatus::no_tailroom: return "buffer has too little tailroom for ESP padding and ICV";
        case EspSealStatus::sequence_exhausted: return "ESP sequence numbers exhausted; the SA needs a rekey";
        case EspSealStatus::crypto_failed: return "the crypto library failed to seal the packet";
    }
    return "unknown seal status";
}

std::string_view describe(EspDrop d) {
    switch (d) {
        case EspDrop::none: return "accepted";
        case EspDrop::short_packet: return "packet too short for an ESP header, one block and the ICV";
        case EspDrop::bad_length: return "ciphertext length is not a multiple of the cipher block size";
        case EspDrop::unknown_spi: return "unknown SPI";
        case EspDrop::replayed: return "replayed sequence number";
        case EspDrop::too_old: return "sequence number older than the replay window";
        case EspDrop::bad_icv: return "integrity check (ICV) failed";
        case EspDrop::bad_padding: return "bad ESP padding";
        case EspDrop::bad_next_header: return "next header is neither IPv4 (4) nor IPv6 (41)";
    }
    return "unknown drop reason";
}

// ---- outbound -----------------------------------------------------------------------

Result<EspOutboundSa> EspOutboundSa::create(std::uint32_t spi, const EspSaKeys& keys,
                                            std::uint32_t first_sequence) {
    auto sealer = EspSealer::create(keys);
    if (!sealer) return sealer.error();
    return EspOutboundSa(spi, std::move(*sealer), first_sequence);
}

EspSealResult EspOutboundSa::frame(std::span<std::uint8_t> buffer, std::size_t payload_offset,
                                   std::size_t payload_len, std::uint8_t next_header) noexcept {
    if (next_seq_ > kLastSequence) return {EspSealStatus::sequence_exhausted, {}};
    const EspSuite& su = suite();
    const std::size_t header = su.header_size();
    if (payload_offset < header) return {EspSealStatus::no_headroom, {}};
    const std::size_t pad = su.pad_size(payload_len);
    const std::size_t after = payload_len + pad + kEspTrailerSize + su.icv_size();
    if (payload_offset > buffer.size() || buffer.size() - payload_offset < after)
        return {EspSealStatus::no_tailroom, {}};

    std::uint8_t* start = buffer.data() + payload_offset - header;
    store_be32(start, spi_);
    store_be32(start + 4, static_cast<std::uint32_t>(next_seq_));
    std::uint8_t* trailer = buffer.data() + payload_offset + payload_len;
    for (std::size_t i = 0; i < pad; ++i) trailer[i] = static_cast<std::uint8_t>(i + 1);  // RFC 4303 2.4
    trailer[pad] = static_cast<std::uint8_t>(pad);
    trailer[pad + 1] = next_header;

    return {EspSealStatus::ok, std::span<std::uint8_t>(start, header + after)};
}

EspSealResult EspOutboundSa::seal(std::span<std::uint8_t> buffer, std::size_t payload_offset,
                                  std::size_t payload_len, std::uint8_t next_header) noexcept {
    Item item{buffer, payload_offset, payload_len, next_header, {}};
    seal_batch({&item, 1});
    return item.result;
}

void EspOutboundSa::seal_batch(std::span<Item> items) noexcept {
    constexpr std::size_t kChunk = 32;
    std::array<EspSealer::Job, kChunk> jobs;
    std::array<Item*, kChunk> of_job;
    for (std::size_t first = 0; first < items.size(); first += kChunk) {
        std::size_t n = 0;
        for (Item& it : items.subspan(first, std::min(kChunk, items.size() - first))) {
            it.result = frame(it.buffer, it.payload_offset, it.payload_len, it.next_header);
            if (!it.result.ok()) continue;
            // The sequence number doubles as the GCM explicit IV: unique because it never wraps.
            jobs[n] = EspSealer::Job{it.result.packet, next_seq_++};
            of_job[n++] = &it;
        }
        transform_.seal_batch({jobs.data(), n});
        for (std::size_t j = 0; j < n; ++j)
            if (!jobs[j].ok) of_job[j]->result = {EspSealStatus::crypto_failed, {}};
    }
}

// ---- inbound ------------------------------------------------------------------------

Result<EspInboundSa> EspInboundSa::create(std::uint32_t spi, const EspSaKeys& keys) {
    auto opener = EspOpener::create(keys);
    if (!opener) return opener.error();
    return EspInboundSa(spi, std::move(*opener));
}

namespace {

EspDrop replay_drop(ReplayVerdict v) {
    return v == ReplayVerdict::duplicate ? EspDrop::replayed : EspDrop::too_old;
}

// After the ICV verified and the sequence number was accepted: padding and next header.
void unwrap(std::span<std::uint8_t> datagram, const EspSuite& su, EspReceived& r) {
    std::uint8_t* text = datagram.data() + su.header_size();
    const std::size_t text_len = datagram.size() - su.header_size() - su.icv_size();
    const std::size_t pad = text[text_len - 2];
    r.next_header = text[text_len - 1];
    if (pad + kEspTrailerSize > text_len) {
        r.drop = EspDrop::bad_padding;
        return;
    }
    const std::size_t inner_len = text_len - kEspTrailerSize - pad;
    for (std::size_t i = 0; i < pad; ++i) {
        if (text[inner_len + i] != static_cast<std::uint8_t>(i + 1)) {
            r.drop = EspDrop::bad_padding;
            return;
        }
    }
    if (r.next_header != kEspNextHeaderIpv4 && r.next_header != kEspNextHeaderIpv6) {
        r.drop = EspDrop::bad_next_header;
        return;
    }
    r.inner = std::span<std::uint8_t>(text, inner_len);
}

}  // namespace

EspReceived EspInboundSa::open(std::span<std::uint8_t> datagram) noexcept {
    EspOpenItem item{datagram, {}};
    open_batch({&item, 1});
    return item.result;
}

void EspInboundSa::open_batch(std::span<EspOpenItem> items) noexcept {
    constexpr std::size_t kChunk = 32;
    std::array<EspOpener::Job, kChunk> jobs;
    const EspSuite& su = suite();
    for (std::size_t first = 0; first < items.size(); first += kChunk) {
        const std::span<EspOpenItem> chunk = items.subspan(first, std::min(kChunk, items.size() - first));
        // Length and replay first (no state change), so that the crypto work is spent
        // only on packets that may be delivered.
        std::size_t n = 0;
        for (std::size_t k = 0; k < chunk.size(); ++k) {
            EspReceived& r = chunk[k].result = EspReceived{};
            r.spi = spi_;
            const std::span<std::uint8_t> d = chunk[k].datagram;
            if (d.size() < su.header_size() + su.block_size() + su.icv_size()) {
                r.drop = EspDrop::short_packet;
                continue;
            }
            r.seq = load_be32(d.data() + 4);
            if (window_.check(r.seq) != ReplayVerdict::fresh) continue;  // its verdict: below
            jobs[n].packet = d;
            jobs[n++].tag = k;
        }
        transform_.open_batch({jobs.data(), n});
        // The window decides in packet order, as open() one packet at a time sees it: an
        // earlier packet of this batch may have used a number (a replay inside the batch) or
        // moved the window past it (a duplicate that is now too old).
        for (std::size_t k = 0, j = 0; k < chunk.size(); ++k) {
            EspOpenItem& it = chunk[k];
            EspReceived& r = it.result;
            if (r.drop == EspDrop::short_packet) continue;
            const bool opened = j < n && jobs[j].tag == k;
            const EspOpenStatus status = opened ? jobs[j++].status : EspOpenStatus::ok;
            if (const ReplayVerdict v = window_.check(r.seq); v != ReplayVerdict::fresh) {
                r.drop = replay_drop(v);
                continue;
            }
            // Fresh now, so fresh before (the window only moves on): the packet was opened.
            switch (status) {
                case EspOpenStatus::ok: break;
                case EspOpenStatus::bad_length: r.drop = EspDrop::bad_length; continue;
                case EspOpenStatus::bad_icv: r.drop = EspDrop::bad_icv; continue;
            }
            window_.accept(r.seq);
            unwrap(it.datagram, su, r);
        }
    }
}

void EspInboundSas::install(EspInboundSa sa) {
    if (current_) previous_.emplace(std::move(*current_));
    current_.emplace(std::move(sa));
}

EspInboundSa* EspInboundSas::find(std::uint32_t spi) {
    if (current_ && current_->spi() == spi) return &*current_;
    if (previous_ && previous_->spi() == spi) return &*previous_;
    return nullptr;
}

EspReceived EspInboundSas::open(std::span<std::uint8_t> datagram) noexcept {
    EspOpenItem item{datagram, {}};
    open_batch({&item, 1});
    return item.result;
}

void EspInboundSas::open_batch(std::span<EspOpenItem> items) noexcept {
    auto spi_of = [](const EspOpenItem& it) -> std::optional<std::uint32_t> {
        if (it.datagram.size() < kEspSpiSeqSize) return std::nullopt;
        return load_be32(it.datagram.data());
    };
    for (std::size_t i = 0; i < items.size();) {
        const std::optional<std::uint32_t> spi = spi_of(items[i]);
        EspInboundSa* sa = spi ? find(*spi) : nullptr;
        if (!sa) {
            items[i].result = EspReceived{};
            items[i].result.drop = spi ? EspDrop::unknown_spi : EspDrop::short_packet;
            items[i].result.spi = spi.value_or(0);
            ++i;
            continue;
        }
        std::size_t end = i + 1;
        while (end < items.size() && spi_of(items[end]) == spi) ++end;
        sa->open_batch(items.subspan(i, end - i));
        i = end;
    }
}

}  // namespace espvpn
