// Tunnel-mode ESP (RFC 4303) packets for GlobalProtect: build and parse on top of the
// crypto transforms in crypto/esp_transform.h.
//
// Usage:
//   auto out = EspOutboundSa::create(c2s_spi, c2s_keys);        // tx thread owns it
//   // inner packet of n bytes at buf[off, off+n); off >= out->headroom(),
//   // buf.size() >= off + n + kEspMaxTailroom (or out->tailroom(n))
//   EspSealResult r = out->seal(buf, off, n, kEspNextHeaderIpv4);
//   if (r.ok()) send(r.packet);                                  // r.packet lies inside buf
//   out->seal_batch(items);                                      // many at once (faster for CBC)
//   if (out->needs_rekey()) ...                                  // nearing 2^32 packets
//
//   EspInboundSas in;                                            // rx thread owns it
//   in.install(EspInboundSa::create(s2c_spi, s2c_keys).value()); // current -> previous
//   EspReceived got = in.open(datagram);                         // decrypts in place
//   in.open_batch(items);                                        // many at once (faster for CBC+SHA1)
//   if (!got.ok()) count(got.drop), describe(got.drop);
//   else deliver(got.inner, got.next_header);                    // got.inner inside datagram
// Nothing here allocates, locks or makes a syscall per packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "crypto/esp_transform.h"
#include "crypto/replay_window.h"
#include "protocols/base/result.h"

namespace espvpn {

inline constexpr std::uint8_t kEspNextHeaderIpv4 = 4;
inline constexpr std::uint8_t kEspNextHeaderIpv6 = 41;

// Outbound sequence numbers this close to 2^32 ask for a rekey; the SA never wraps.
inline constexpr std::uint32_t kEspRekeySequence = 0xFF000000u;

enum class EspSealStatus : std::uint8_t {
    ok,
    no_headroom,         // payload_offset < headroom()
    no_tailroom,         // buffer too short for pad, trailer and ICV
    sequence_exhausted,  // 2^32 - 1 packets sent; a new SA is needed
    crypto_failed,       // the crypto library refused (not expected with valid keys)
};
std::string_view describe(EspSealStatus s);

struct EspSealResult {
    EspSealStatus status = EspSealStatus::ok;
    std::span<std::uint8_t> packet;  // the ESP packet (UDP payload), inside the buffer
    bool ok() const { return status == EspSealStatus::ok; }
};

class EspOutboundSa {
public:
    // first_sequence: 1 per RFC 4303 (a kernel peer with a replay window drops 0).
    static Result<EspOutboundSa> create(std::uint32_t spi, const EspSaKeys& keys,
                                        std::uint32_t first_sequence = 1);

    std::uint32_t spi() const { return spi_; }
    const EspSuite& suite() const { return transform_.suite(); }
    std::size_t headroom() const { return suite().header_size(); }
    std::size_t tailroom(std::size_t payload_len) const {
        return suite().packet_size(payload_len) - suite().header_size() - payload_len;
    }

    // Seals buffer[payload_offset, +payload_len) in place; the ESP header goes into the
    // headroom right before it, padding, trailer and ICV into the tailroom after it.
    EspSealResult seal(std::span<std::uint8_t> buffer, std::size_t payload_offset,
                       std::size_t payload_len, std::uint8_t next_header) noexcept;

    // One packet of seal_batch(): seal()'s arguments in, its result out.
    struct Item {
        std::span<std::uint8_t> buffer;
        std::size_t payload_offset = 0;
        std::size_t payload_len = 0;
        std::uint8_t next_header = 0;
        EspSealResult result;
    };
    // seal() for every item, sequence numbers in item order; the CBC suites are
    // faster this way (EspSealer::seal_batch). A packet the crypto library refused
    // (crypto_failed) has used its sequence number.
    void seal_batch(std::span<Item> items) noexcept;

    bool needs_rekey() const { return next_seq_ >= kEspRekeySequence; }
    // The sequence number the next packet will carry (2^32 once exhausted).
    std::uint64_t next_sequence() const { return next_seq_; }

private:
    // Writes SPI, sequence number, padding and trailer; the packet to encrypt.
    EspSealResult frame(std::span<std::uint8_t> buffer, std::size_t payload_offset, std::size_t payload_len,
                        std::uint8_t next_header) noexcept;

    EspOutboundSa(std::uint32_t spi, EspSealer t, std::uint32_t first)
        : spi_(spi), transform_(std::move(t)), next_seq_(first) {}
    std::uint32_t spi_;
    EspSealer transform_;
    std::uint64_t next_seq_;
};

// Why a received packet was dropped (none = accepted).
enum class EspDrop : std::uint8_t {
    none,
    short_packet,     // shorter than header + one block + ICV
    bad_length,       // ciphertext not a multiple of the cipher's block size
    unknown_spi,
    replayed,         // sequence number already seen
    too_old,          // sequence number behind the replay window
    bad_icv,          // integrity check failed (forged or wrong key)
    bad_padding,      // pad length too long or pad bytes not 1, 2, 3, ...
    bad_next_header,  // not 4 (IPv4) or 41 (IPv6)
};
inline constexpr std::size_t kEspDropReasons = 9;
std::string_view describe(EspDrop d);

struct EspReceived {
    EspDrop drop = EspDrop::none;
    std::span<std::uint8_t> inner;  // the decrypted inner IP packet, inside the datagram
    std::uint8_t next_header = 0;
    std::uint32_t spi = 0;
    std::uint32_t seq = 0;
    bool ok() const { return drop == EspDrop::none; }
};

// One datagram of open_batch(): the datagram in, open()'s result out.
struct EspOpenItem {
    std::span<std::uint8_t> datagram;
    EspReceived result;
};

class EspInboundSa {
public:
    static Result<EspInboundSa> create(std::uint32_t spi, const EspSaKeys& keys);

    std::uint32_t spi() const { return spi_; }
    const EspSuite& suite() const { return transform_.suite(); }
    const ReplayWindow& replay_window() const { return window_; }

    // Checks in this order: length, replay (no state change), ICV, then marks the
    // sequence number seen (an authentic packet uses its number even if its padding
    // is bad), then padding and next header.
    EspReceived open(std::span<std::uint8_t> datagram) noexcept;
    // open() for every item, in item order, with the same verdicts (a replay inside
    // the batch included); the CBC+SHA1 suites are faster this way (EspOpener::open_batch).
    void open_batch(std::span<EspOpenItem> items) noexcept;

private:
    EspInboundSa(std::uint32_t spi, EspOpener t) : spi_(spi), transform_(std::move(t)) {}
    std::uint32_t spi_;
    EspOpener transform_;
    ReplayWindow window_;
};

// Inbound SAs by SPI: the current one and, during a rekey, the previous one.
class EspInboundSas {
public:
    // The new SA becomes current; the old current stays as previous (an older previous
    // is dropped).
    void install(EspInboundSa sa);
    void retire_previous() { previous_.reset(); }

    const EspInboundSa* current() const { return current_ ? &*current_ : nullptr; }
    const EspInboundSa* previous() const { return previous_ ? &*previous_ : nullptr; }
    EspInboundSa* find(std::uint32_t spi);

    // Reads the SPI, picks the SA and opens the datagram (unknown_spi if none matches).
    EspReceived open(std::span<std::uint8_t> datagram) noexcept;
    // open() for every item, in order; runs of one SPI are opened as a batch.
    void open_batch(std::span<EspOpenItem> items) noexcept;

private:
    std::optional<EspInboundSa> current_;
    std::optional<EspInboundSa> previous_;
};

}  // namespace espvpn
