// Library choice per primitive, by measurement (tools/bench-esp, docs/PERFORMANCE.md):
//   AES-GCM        our own VAES/VPCLMULQDQ/AVX-512 code where the CPU has them (crypto/aead.h picks
//                  crypto/aes_gcm.h, 16 blocks a step); GnuTLS otherwise (its AVX/PCLMUL GCM is about twice Nettle 3.8's)
//   AES-CBC enc    our own AES-NI code, up to 8 packets side by side (crypto/aes_cbc_lanes.h:
//                  4.6x Nettle's cbc_aes128_encrypt on a batch of 1408-byte packets); Nettle
//                  without AES-NI (Nettle's was 2x GnuTLS's at 64 bytes, a tie from 512 up)
//   AES-CBC dec    GnuTLS (~1.3x Nettle's from 512 bytes up)
//   HMAC           GnuTLS for SHA-1/SHA-256 (5-9% faster from 512 B), Nettle for MD5 (tie);
//                  HMAC-SHA1/-SHA256 of a batch: our SHA-NI code, several packets side by side
//                  (crypto/hmac_lanes.h), where that was measured faster (AMD)
//   CBC IV         Nettle AES-128 of a counter under a per-SA random key
//                  (~50 cycles per packet; gnutls_rnd(NONCE) costs ~10x that)
#include "crypto/esp_transform.h"

#include "crypto/aes_cbc_lanes.h"
#include "crypto/aead.h"
#include "crypto/hmac.h"
#include "crypto/hmac_lanes.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nettle/aes.h>
#include <nettle/memops.h>

#include <array>
#include <cstring>
#include <optional>
#include <string>

#include "protocols/base/byte_order.h"

namespace espvpn {

// ---- suite --------------------------------------------------------------------------

std::size_t EspSuite::icv_size() const {
    switch (integrity) {
        case EspIntegrity::none: return 16;
        case EspIntegrity::hmac_sha1_96: return 12;
        case EspIntegrity::hmac_sha256_128: return 16;
        case EspIntegrity::hmac_md5_96: return 12;
    }
    return 16;
}

static std::size_t aes_key_size(EspCipher c) {
    return (c == EspCipher::aes128_cbc || c == EspCipher::aes128_gcm) ? 16 : 32;
}

static constexpr std::size_t kGcmSaltSize = 4;

std::size_t EspSuite::enc_key_size() const { return aes_key_size(cipher) + (is_aead() ? kGcmSaltSize : 0); }

std::size_t EspSuite::auth_key_size() const {
    switch (integrity) {
        case EspIntegrity::none: return 0;
        case EspIntegrity::hmac_sha1_96: return 20;
        case EspIntegrity::hmac_sha256_128: return 32;
        case EspIntegrity::hmac_md5_96: return 16;
    }
    return 0;
}

std::string_view EspSuite::name() const {
    switch (cipher) {
        case EspCipher::aes128_gcm: return "aes-128-gcm";
        case EspCipher::aes256_gcm: return "aes-256-gcm";
        case EspCipher::aes128_cbc:
            switch (integrity) {
                case EspIntegrity::hmac_sha1_96: return "aes-128-cbc/hmac-sha1-96";
                case EspIntegrity::hmac_sha256_128: return "aes-128-cbc/hmac-sha256-128";
                case EspIntegrity::hmac_md5_96: return "aes-128-cbc/hmac-md5-96";
                case EspIntegrity::none: break;
            }
            break;
        case EspCipher::aes256_cbc:
            switch (integrity) {
                case EspIntegrity::hmac_sha1_96: return "aes-256-cbc/hmac-sha1-96";
                case EspIntegrity::hmac_sha256_128: return "aes-256-cbc/hmac-sha256-128";
                case EspIntegrity::hmac_md5_96: return "aes-256-cbc/hmac-md5-96";
                case EspIntegrity::none: break;
            }
            break;
    }
    return "invalid";
}

Result<EspSuite> esp_suite_from_names(std::string_view enc_algo, std::string_view hmac_algo) {
    EspSuite s;
    if (enc_algo == "aes-128-gcm" || enc_algo == "aes-256-gcm") {
        s.cipher = enc_algo == "aes-128-gcm" ? EspCipher::aes128_gcm : EspCipher::aes256_gcm;
        s.integrity = EspIntegrity::none;  // GCM authenticates itself; hmac-algo is ignored
        return s;
    }
    if (enc_algo == "aes-128-cbc" || enc_algo == "aes128") {
        s.cipher = EspCipher::aes128_cbc;
    } else if (enc_algo == "aes-256-cbc") {
        s.cipher = EspCipher::aes256_cbc;
    } else {
        return make_error("unsupported ESP enc-algo '" + std::string(enc_algo) +
                          "' (known: aes-128-cbc, aes-256-cbc, aes-128-gcm, aes-256-gcm)");
    }
    if (hmac_algo == "sha1") {
        s.integrity = EspIntegrity::hmac_sha1_96;
    } else if (hmac_algo == "sha256") {
        s.integrity = EspIntegrity::hmac_sha256_128;
    } else if (hmac_algo == "md5") {
        s.integrity = EspIntegrity::hmac_md5_96;
    } else {
        return make_error("unsupported ESP hmac-algo '" + std::string(hmac_algo) + "' for " +
                          std::string(enc_algo) + " (known: sha1, sha256, md5)");
    }
    return s;
}

// ---- keys ---------------------------------------------------------------------------

Result<EspSaKeys> EspSaKeys::create(EspSuite suite, Secret enc_key, Secret auth_key) {
    if (enc_key.size() != suite.enc_key_size()) {
        std::string msg = "ESP encryption key for " + std::string(suite.name()) + " must be " +
                          std::to_string(suite.enc_key_size() * 8) + " bits";
        if (suite.is_aead())
            msg += " (" + std::to_string(aes_key_size(suite.cipher) * 8) + "-bit AES key + 32-bit salt)";
        return make_error(msg + ", got " + std::to_string(enc_key.size() * 8) + " bits");
    }
    if (suite.is_aead()) {
        auth_key.clear();
    } else if (auth_key.size() != suite.auth_key_size()) {
        return make_error("ESP authentication key for " + std::string(suite.name()) + " must be " +
                          std::to_string(suite.auth_key_size() * 8) + " bits, got " +
                          std::to_string(auth_key.size() * 8) + " bits");
    }
    return EspSaKeys(suite, std::move(enc_key), std::move(auth_key));
}

Result<EspSaKeys> EspSaKeys::from_getconfig(std::string_view enc_algo, std::string_view hmac_algo,
                                            std::string_view ekey_hex, std::string_view akey_hex) {
    auto suite = esp_suite_from_names(enc_algo, hmac_algo);
    if (!suite) return suite.error();
    auto ekey = Secret::from_hex(ekey_hex);
    if (!ekey) return make_error("ESP ekey: " + ekey.error().message);
    Secret akey;
    if (!suite->is_aead()) {
        auto a = Secret::from_hex(akey_hex);
        if (!a) return make_error("ESP akey: " + a.error().message);
        akey = std::move(*a);
    }
    return create(*suite, std::move(*ekey), std::move(akey));
}

// ---- shared pieces --------------------------------------------------------------------

namespace {

gnutls_cipher_algorithm_t gnutls_cipher_of(EspCipher c) {
    switch (c) {
        case EspCipher::aes128_cbc: return GNUTLS_CIPHER_AES_128_CBC;
        case EspCipher::aes256_cbc: return GNUTLS_CIPHER_AES_256_CBC;
        case EspCipher::aes128_gcm: return GNUTLS_CIPHER_AES_128_GCM;
        case EspCipher::aes256_gcm: return GNUTLS_CIPHER_AES_256_GCM;
    }
    return GNUTLS_CIPHER_UNKNOWN;
}

Error gnutls_failure(const char* what, int rc) {
    return make_error(std::string(what) + " failed: " + gnutls_strerror(rc));
}

struct CbcHandle {
    gnutls_cipher_hd_t h = nullptr;
    CbcHandle() = default;
    CbcHandle(const CbcHandle&) = delete;
    CbcHandle& operator=(const CbcHandle&) = delete;
    ~CbcHandle() {
        if (h) gnutls_cipher_deinit(h);
    }
    Status init(EspCipher c, const Secret& key) {
        std::array<std::uint8_t, 16> iv{};
        auto k = key.reveal();
        gnutls_datum_t kd{const_cast<std::uint8_t*>(k.data()), static_cast<unsigned>(k.size())};
        gnutls_datum_t ivd{iv.data(), static_cast<unsigned>(iv.size())};
        int rc = gnutls_cipher_init(&h, gnutls_cipher_of(c), &kd, &ivd);
        if (rc < 0) {
            h = nullptr;
            return gnutls_failure("gnutls_cipher_init (AES-CBC)", rc);
        }
        return {};
    }
};

// AES-GCM (crypto/aead.h: our VAES code where the CPU has it, GnuTLS's otherwise) and the
// RFC 4106 nonce: the 4-byte salt from the key material, then the packet's 8-byte IV.
struct GcmHandle {
    Aead aead;
    std::array<std::uint8_t, 12> nonce{};  // salt(4) ‖ explicit IV(8)
    GcmHandle() = default;
    GcmHandle(const GcmHandle&) = delete;
    GcmHandle& operator=(const GcmHandle&) = delete;
    ~GcmHandle() { secure_zero(nonce.data(), nonce.size()); }
    Status init(EspCipher c, const Secret& key_and_salt) {
        auto k = key_and_salt.reveal();
        const std::size_t key_len = k.size() - kGcmSaltSize;
        std::memcpy(nonce.data(), k.data() + key_len, kGcmSaltSize);
        return aead.init(gnutls_cipher_of(c), k.data(), key_len, "ESP AES-GCM");
    }
    // In place; the explicit IV (8 bytes) from the packet; a 16-byte tag.
    bool seal(const std::uint8_t* iv, const std::uint8_t* aad, std::size_t aad_len, std::uint8_t* text,
              std::size_t len, std::uint8_t* tag) {
        std::memcpy(nonce.data() + kGcmSaltSize, iv, 8);
        return aead.seal(nonce.data(), aad, aad_len, text, text, len, tag);
    }
    bool open(const std::uint8_t* iv, const std::uint8_t* aad, std::size_t aad_len, std::uint8_t* text,
              std::size_t len, const std::uint8_t* tag, std::size_t tag_len) {
        std::memcpy(nonce.data() + kGcmSaltSize, iv, 8);
        return aead.open(nonce.data(), aad, aad_len, text, text, len, tag, tag_len);
    }
};

// The length of the encrypted part (between header and ICV) when a packet of this size
// can carry one: not empty, whole cipher blocks. 0 when it cannot.
std::size_t text_length(const EspSuite& suite, std::size_t packet_size) {
    const std::size_t overhead = suite.header_size() + suite.icv_size();
    if (packet_size <= overhead) return 0;
    const std::size_t n = packet_size - overhead;
    return n % suite.block_size() == 0 ? n : 0;
}

// HMAC-SHA1 / HMAC-SHA256 side by side for batches, where the CPU gains from it.
bool init_hmac_lanes(const EspSaKeys& keys, HmacLanes& lanes) {
    HmacLaneHash hash;
    switch (keys.suite().integrity) {
        case EspIntegrity::hmac_sha1_96: hash = HmacLaneHash::sha1; break;
        case EspIntegrity::hmac_sha256_128: hash = HmacLaneHash::sha256; break;
        default: return false;
    }
    if (!HmacLanes::worth_using(hash)) return false;
    const auto key = keys.auth_key().reveal();
    lanes.set_key(hash, key.data(), key.size());
    return true;
}

}  // namespace

// ---- sealer -------------------------------------------------------------------------

struct EspSealer::Impl {
    EspSuite suite;
    AesCbcLanes cbc;
    GcmHandle gcm;
    Hmac hmac;
    HmacLanes hmac_lanes;  // used for batches when use_lanes
    bool use_lanes = false;
    // CBC IVs: AES under a random key of (random prefix ‖ packet counter). Unpredictable
    // to anyone without iv_key, never repeating, and far cheaper than a RNG call.
    aes128_ctx iv_key{};
    std::array<std::uint8_t, 16> iv_block{};
    std::uint64_t iv_counter = 0;

    ~Impl() {
        secure_zero(&iv_key, sizeof iv_key);
        secure_zero(iv_block.data(), iv_block.size());
    }
};

EspSealer::EspSealer(EspSuite suite, std::unique_ptr<Impl> impl) : suite_(suite), impl_(std::move(impl)) {}
EspSealer::EspSealer(EspSealer&&) noexcept = default;
EspSealer& EspSealer::operator=(EspSealer&&) noexcept = default;
EspSealer::~EspSealer() = default;

Result<EspSealer> EspSealer::create(const EspSaKeys& keys) {
    auto impl = std::make_unique<Impl>();
    impl->suite = keys.suite();
    if (keys.suite().is_aead()) {
        if (auto st = impl->gcm.init(keys.suite().cipher, keys.enc_key()); !st) return st.error();
    } else {
        auto enc = keys.enc_key().reveal();
        if (!impl->cbc.set_key(enc.data(), enc.size())) return make_error("AES-CBC key of unexpected size");
        if (auto st = impl->hmac.init(keys.suite().integrity, keys.auth_key().reveal()); !st) return st.error();
        impl->use_lanes = init_hmac_lanes(keys, impl->hmac_lanes);
        std::array<std::uint8_t, 16> k{};
        int rc = gnutls_rnd(GNUTLS_RND_KEY, k.data(), k.size());
        if (rc >= 0) rc = gnutls_rnd(GNUTLS_RND_NONCE, impl->iv_block.data(), 8);
        if (rc < 0) return gnutls_failure("gnutls_rnd (CBC IV key)", rc);
        aes128_set_encrypt_key(&impl->iv_key, k.data());
        secure_zero(k.data(), k.size());
    }
    return EspSealer(keys.suite(), std::move(impl));
}

bool EspSealer::seal(std::span<std::uint8_t> packet, std::uint64_t counter) noexcept {
    Job job{packet, counter};
    seal_batch({&job, 1});
    return job.ok;
}

void EspSealer::seal_batch(std::span<Job> jobs) noexcept {
    std::array<std::uint8_t, kEspMaxIvSize> iv;
    if (suite_.is_aead()) {
        for (Job& j : jobs) {
            store_be64(iv.data(), j.counter);
            j.ok = seal_with_iv(j.packet, {iv.data(), suite_.iv_size()});
        }
        return;
    }
    // CBC: IVs and the checks first, then the encryption of a chunk of packets side by side,
    // then their HMACs (a chunk stays in the L1 cache between the two passes).
    Impl& s = *impl_;
    const std::size_t header = suite_.header_size();
    const std::size_t icv = suite_.icv_size();
    constexpr std::size_t kChunk = 2 * AesCbcLanes::kLanes;
    for (std::size_t first = 0; first < jobs.size(); first += kChunk) {
        const std::span<Job> chunk = jobs.subspan(first, std::min(kChunk, jobs.size() - first));
        std::array<AesCbcMessage, kChunk> msgs;
        std::size_t n = 0;
        for (Job& j : chunk) {
            const std::size_t text_len = text_length(suite_, j.packet.size());
            j.ok = text_len != 0;
            if (!j.ok) continue;
            std::uint8_t* p = j.packet.data();
            store_be64(s.iv_block.data() + 8, ++s.iv_counter);
            aes128_encrypt(&s.iv_key, 16, p + kEspSpiSeqSize, s.iv_block.data());
            msgs[n++] = AesCbcMessage{p + kEspSpiSeqSize, p + header, text_len};
        }
        s.cbc.encrypt({msgs.data(), n});
        // The HMACs: side by side (lanes) or one at a time.
        std::array<HmacMessage, kChunk> macs;
        std::size_t m = 0;
        for (Job& j : chunk) {
            if (!j.ok) continue;
            const std::size_t signed_len = j.packet.size() - icv;
            std::uint8_t* out = j.packet.data() + signed_len;
            if (s.use_lanes) {
                macs[m++] = HmacMessage{j.packet.data(), signed_len, out, icv};
            } else {
                s.hmac.compute({j.packet.data(), signed_len}, out, icv);
            }
        }
        if (m) s.hmac_lanes.compute({macs.data(), m});
    }
}

bool EspSealer::seal_with_iv(std::span<std::uint8_t> packet, std::span<const std::uint8_t> iv_in) noexcept {
    const std::size_t header = suite_.header_size();
    const std::size_t icv = suite_.icv_size();
    const std::size_t text_len = text_length(suite_, packet.size());
    if (iv_in.size() != suite_.iv_size() || text_len == 0) return false;
    std::uint8_t* p = packet.data();
    std::uint8_t* iv = p + kEspSpiSeqSize;
    std::uint8_t* text = p + header;
    std::memcpy(iv, iv_in.data(), iv_in.size());
    Impl& s = *impl_;

    if (suite_.is_aead()) return s.gcm.seal(iv, p, kEspSpiSeqSize, text, text_len, text + text_len);
    const AesCbcMessage m{iv, text, text_len};
    s.cbc.encrypt({&m, 1});
    s.hmac.compute({p, header + text_len}, text + text_len, icv);
    return true;
}

// ---- opener -------------------------------------------------------------------------

struct EspOpener::Impl {
    EspSuite suite;
    CbcHandle cbc;
    GcmHandle gcm;
    Hmac hmac;
    HmacLanes hmac_lanes;  // used for batches when use_lanes
    bool use_lanes = false;
};

EspOpener::EspOpener(EspSuite suite, std::unique_ptr<Impl> impl) : suite_(suite), impl_(std::move(impl)) {}
EspOpener::EspOpener(EspOpener&&) noexcept = default;
EspOpener& EspOpener::operator=(EspOpener&&) noexcept = default;
EspOpener::~EspOpener() = default;

Result<EspOpener> EspOpener::create(const EspSaKeys& keys) {
    auto impl = std::make_unique<Impl>();
    impl->suite = keys.suite();
    if (keys.suite().is_aead()) {
        if (auto st = impl->gcm.init(keys.suite().cipher, keys.enc_key()); !st) return st.error();
    } else {
        if (auto st = impl->cbc.init(keys.suite().cipher, keys.enc_key()); !st) return st.error();
        if (auto st = impl->hmac.init(keys.suite().integrity, keys.auth_key().reveal()); !st) return st.error();
        impl->use_lanes = init_hmac_lanes(keys, impl->hmac_lanes);
    }
    return EspOpener(keys.suite(), std::move(impl));
}

EspOpenStatus EspOpener::open(std::span<std::uint8_t> packet) noexcept {
    Job job{packet};
    open_batch({&job, 1});
    return job.status;
}

// GCM: decrypts and checks the tag in one pass.
EspOpenStatus EspOpener::open_gcm(std::span<std::uint8_t> packet, std::size_t text_len) noexcept {
    std::uint8_t* p = packet.data();
    std::uint8_t* text = p + suite_.header_size();
    const bool ok = impl_->gcm.open(p + kEspSpiSeqSize, p, kEspSpiSeqSize, text, text_len, text + text_len,
                                    suite_.icv_size());
    return ok ? EspOpenStatus::ok : EspOpenStatus::bad_icv;
}

// CBC after the HMAC: compares it with the packet's ICV in constant time, and only
// then decrypts in place.
EspOpenStatus EspOpener::check_and_decrypt(std::span<std::uint8_t> packet, const std::uint8_t* expected) noexcept {
    const std::size_t header = suite_.header_size();
    const std::size_t icv = suite_.icv_size();
    const std::size_t text_len = packet.size() - header - icv;
    std::uint8_t* text = packet.data() + header;
    if (!memeql_sec(expected, text + text_len, icv)) return EspOpenStatus::bad_icv;
    gnutls_cipher_set_iv(impl_->cbc.h, packet.data() + kEspSpiSeqSize, 16);
    if (gnutls_cipher_decrypt2(impl_->cbc.h, text, text_len, text, text_len) < 0) return EspOpenStatus::bad_length;
    return EspOpenStatus::ok;
}

void EspOpener::open_batch(std::span<Job> jobs) noexcept {
    Impl& s = *impl_;
    const std::size_t icv = suite_.icv_size();
    constexpr std::size_t kChunk = 16;
    for (std::size_t first = 0; first < jobs.size(); first += kChunk) {
        const std::span<Job> chunk = jobs.subspan(first, std::min(kChunk, jobs.size() - first));
        std::array<HmacMessage, kChunk> macs;
        std::size_t m = 0;
        for (Job& j : chunk) {
            const std::size_t text_len = text_length(suite_, j.packet.size());
            if (text_len == 0) {
                j.status = EspOpenStatus::bad_length;
                continue;
            }
            if (suite_.is_aead()) {
                j.status = open_gcm(j.packet, text_len);
                continue;
            }
            // CBC: the HMAC first, side by side (lanes) or one at a time; decryption only
            // after it matched.
            j.status = EspOpenStatus::ok;
            const std::size_t signed_len = j.packet.size() - icv;
            if (s.use_lanes) {
                macs[m++] = HmacMessage{j.packet.data(), signed_len, j.mac.data(), icv};
            } else {
                s.hmac.compute({j.packet.data(), signed_len}, j.mac.data(), icv);
            }
        }
        if (suite_.is_aead()) continue;
        if (m) s.hmac_lanes.compute({macs.data(), m});
        for (Job& j : chunk) {
            if (j.status == EspOpenStatus::ok) j.status = check_and_decrypt(j.packet, j.mac.data());
            secure_zero(j.mac.data(), j.mac.size());
        }
    }
}

}  // namespace espvpn
