// ESP cryptographic transforms (RFC 4303 packet bytes, RFC 3602/2404/4868/2403/4106
// algorithms), sealing and opening packets in place.
//
// Usage (the packet framing around this lives in protocols/esp/esp_sa.h):
//   auto keys = EspSaKeys::from_getconfig("aes-128-cbc", "sha1", ekey_hex, akey_hex);
//   if (!keys) { /* keys.error().message says what was wrong */ }
//   auto sealer = EspSealer::create(*keys);   // outbound half, one thread
//   auto opener = EspOpener::create(*keys);   // inbound half, another thread
//   // packet = SPI|seq|IV space|plaintext (already padded to suite.block_size())|ICV space
//   sealer->seal(packet, seq);                // writes IV, encrypts, writes ICV
//   sealer->seal_batch(jobs);                 // the same for many packets (faster for CBC)
//   opener->open(packet);                     // verifies ICV (constant time), decrypts in place
// Buffers: reserve kEspMaxHeadroom bytes before and kEspMaxTailroom bytes after an
// inner packet and any suite can seal it where it lies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn {

enum class EspCipher : std::uint8_t { aes128_cbc, aes256_cbc, aes128_gcm, aes256_gcm };
enum class EspIntegrity : std::uint8_t { none /* AEAD */, hmac_sha1_96, hmac_sha256_128, hmac_md5_96 };

inline constexpr std::size_t kEspSpiSeqSize = 8;     // SPI(4) + sequence number(4)
inline constexpr std::size_t kEspMaxIvSize = 16;     // CBC; GCM carries 8
inline constexpr std::size_t kEspMaxIcvSize = 16;    // HMAC-SHA256-128 and the GCM tag
inline constexpr std::size_t kEspMaxPadSize = 15;    // CBC pads to 16-byte blocks
inline constexpr std::size_t kEspTrailerSize = 2;    // pad length + next header
// Bytes a buffer needs before / after an inner packet for any suite to seal it in place.
inline constexpr std::size_t kEspMaxHeadroom = kEspSpiSeqSize + kEspMaxIvSize;                     // 24
inline constexpr std::size_t kEspMaxTailroom = kEspMaxPadSize + kEspTrailerSize + kEspMaxIcvSize;  // 33

// A cipher + integrity pair as GlobalProtect names it, with its wire sizes.
struct EspSuite {
    EspCipher cipher = EspCipher::aes128_cbc;
    EspIntegrity integrity = EspIntegrity::hmac_sha1_96;

    bool is_aead() const { return integrity == EspIntegrity::none; }
    std::size_t iv_size() const { return is_aead() ? 8 : 16; }
    std::size_t icv_size() const;
    // The encrypted part (payload + pad + pad length + next header) is a multiple of this.
    std::size_t block_size() const { return is_aead() ? 4 : 16; }
    // Key bytes as getconfig carries them: GCM keys include the 4-byte salt.
    std::size_t enc_key_size() const;
    std::size_t auth_key_size() const;
    std::size_t header_size() const { return kEspSpiSeqSize + iv_size(); }
    std::size_t pad_size(std::size_t payload_len) const {
        return (block_size() - (payload_len + kEspTrailerSize) % block_size()) % block_size();
    }
    // Whole ESP packet for an inner packet of payload_len bytes.
    std::size_t packet_size(std::size_t payload_len) const {
        return header_size() + payload_len + pad_size(payload_len) + kEspTrailerSize + icv_size();
    }
    // e.g. "aes-128-cbc/hmac-sha1-96", "aes-256-gcm"
    std::string_view name() const;
};

// GlobalProtect <enc-algo>/<hmac-algo> (aes-128-cbc, aes128, aes-256-cbc, aes-128-gcm,
// aes-256-gcm / sha1, sha256, md5). For GCM the hmac name is ignored (may be empty).
Result<EspSuite> esp_suite_from_names(std::string_view enc_algo, std::string_view hmac_algo);

// The keys of one direction of an SA. Always consistent with its suite.
class EspSaKeys {
public:
    // From a GP getconfig <ipsec> block: enc-algo, hmac-algo, ekey val, akey val (hex).
    // GCM ekey must be 160 or 288 bits (key + salt); akey is then ignored.
    static Result<EspSaKeys> from_getconfig(std::string_view enc_algo, std::string_view hmac_algo,
                                            std::string_view ekey_hex, std::string_view akey_hex);
    static Result<EspSaKeys> create(EspSuite suite, Secret enc_key, Secret auth_key);

    const EspSuite& suite() const { return suite_; }
    const Secret& enc_key() const { return enc_key_; }    // GCM: key ‖ salt
    const Secret& auth_key() const { return auth_key_; }  // empty for GCM
    EspSaKeys clone() const { return EspSaKeys(suite_, enc_key_.clone(), auth_key_.clone()); }

private:
    EspSaKeys(EspSuite suite, Secret enc, Secret auth)
        : suite_(suite), enc_key_(std::move(enc)), auth_key_(std::move(auth)) {}
    EspSuite suite_;
    Secret enc_key_;
    Secret auth_key_;
};

// Outbound half of an SA's crypto. Owns its cipher/HMAC state: use from one thread.
// Key schedules and HMAC inner/outer states are computed once, in create().
class EspSealer {
public:
    static Result<EspSealer> create(const EspSaKeys& keys);
    EspSealer(EspSealer&&) noexcept;
    EspSealer& operator=(EspSealer&&) noexcept;
    ~EspSealer();

    const EspSuite& suite() const { return suite_; }

    // packet: SPI|seq (filled by the caller)|IV space|plaintext|ICV space, plaintext a
    // multiple of suite().block_size(). Writes the IV (GCM: `counter`, big-endian, which
    // must never repeat under this key; CBC: a fresh unpredictable IV), encrypts the
    // plaintext in place and writes the ICV. False only if the sizes are inconsistent.
    bool seal(std::span<std::uint8_t> packet, std::uint64_t counter) noexcept;
    // As seal(), with the caller's explicit IV (iv_size() bytes): for known-answer tests
    // and interop tools that need reproducible packets. The datapath uses seal().
    bool seal_with_iv(std::span<std::uint8_t> packet, std::span<const std::uint8_t> iv) noexcept;

    // One packet of seal_batch(): seal()'s arguments, and whether it was sealed.
    struct Job {
        std::span<std::uint8_t> packet;
        std::uint64_t counter = 0;
        bool ok = false;
    };
    // seal() for every job. The CBC suites encrypt several packets side by side
    // (crypto/aes_cbc_lanes.h): one packet's CBC chain is serial, a batch's are not.
    void seal_batch(std::span<Job> jobs) noexcept;

    struct Impl;

private:
    EspSealer(EspSuite suite, std::unique_ptr<Impl> impl);
    EspSuite suite_;
    std::unique_ptr<Impl> impl_;
};

enum class EspOpenStatus : std::uint8_t { ok, bad_length, bad_icv };

// Inbound half of an SA's crypto. Use from one thread.
class EspOpener {
public:
    static Result<EspOpener> create(const EspSaKeys& keys);
    EspOpener(EspOpener&&) noexcept;
    EspOpener& operator=(EspOpener&&) noexcept;
    ~EspOpener();

    const EspSuite& suite() const { return suite_; }

    // packet: a whole received ESP packet. CBC: checks the HMAC in constant time and only
    // then decrypts; GCM: decrypts and checks the tag in one pass. Either way the
    // plaintext ends up in place at packet[header_size(), size - icv_size()) and is only
    // meaningful when the result is ok.
    // bad_length: the ciphertext is empty or not a multiple of the block size.
    EspOpenStatus open(std::span<std::uint8_t> packet) noexcept;

    // One packet of open_batch(): open()'s argument in, its result out. `tag` is the
    // caller's (open_batch leaves it alone); `mac` is scratch.
    struct Job {
        std::span<std::uint8_t> packet;
        EspOpenStatus status = EspOpenStatus::ok;
        std::size_t tag = 0;
        std::array<std::uint8_t, kEspMaxIcvSize> mac{};
    };
    // open() for every job (open() is a batch of one). With HMAC-SHA1 or -SHA256 on CPUs
    // where it pays (HmacLanes::worth_using), the packets' HMACs are computed side by side
    // before each is checked and decrypted.
    void open_batch(std::span<Job> jobs) noexcept;

    struct Impl;

private:
    EspOpener(EspSuite suite, std::unique_ptr<Impl> impl);
    EspOpenStatus open_gcm(std::span<std::uint8_t> packet, std::size_t text_len) noexcept;
    EspOpenStatus check_and_decrypt(std::span<std::uint8_t> packet, const std::uint8_t* expected) noexcept;
    EspSuite suite_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace espvpn
