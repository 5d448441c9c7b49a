// crypto/aead.h: every engine (our VAES AES-GCM as chosen, each of its paths the
// CPU has, forced, and GnuTLS always) gives the same bytes as GnuTLS's one-shot gnutls_aead_cipher_encrypt
// for AES-128/256-GCM and ChaCha20-Poly1305, in every buffer layout the callers
// use (in place with a separate tag, out of place with the tag after the text,
// out of place with the tag elsewhere); open() takes back what seal() made,
// truncated tags included, and on any changed byte returns false with the
// output zeroed.
#include <doctest/doctest.h>
#include <gnutls/crypto.h>

#include <optional>
#include <random>
#include <vector>

#include "crypto/aead.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

enum class Layout { in_place, tag_after_text, tag_apart };
const char* name(Layout l) {
    return l == Layout::in_place ? "in place" : l == Layout::tag_after_text ? "tag after text" : "tag apart";
}

// Seals `text` with the layout; returns ciphertext ‖ tag. Guard bytes around
// every buffer.
Bytes seal_with(const Aead& a, Layout l, const Bytes& nonce, const Bytes& aad, const Bytes& text) {
    const std::size_t n = text.size();
    Bytes in(n + 16 + 32, 0x5a), out(n + 16 + 32, 0xa5), tag(16 + 32, 0xc3);
    std::copy(text.begin(), text.end(), in.begin() + 16);
    std::uint8_t* src = in.data() + 16;
    std::uint8_t* dst = l == Layout::in_place ? src : out.data() + 16;
    std::uint8_t* t = l == Layout::tag_after_text ? dst + n : tag.data() + 16;
    REQUIRE(a.seal(nonce.data(), aad.data(), aad.size(), src, dst, n, t));
    Bytes r(dst, dst + n);
    r.insert(r.end(), t, t + 16);
    if (l != Layout::in_place)
        for (std::size_t i = 0; i < n; ++i) REQUIRE(in[16 + i] == text[i]);  // the input is left alone
    return r;
}

// Opens ciphertext ‖ tag (tag_len bytes of it) with the layout; the plaintext,
// or nullopt (output checked zero).
std::optional<Bytes> open_with(const Aead& a, Layout l, const Bytes& nonce, const Bytes& aad, const Bytes& sealed,
                               std::size_t tag_len) {
    const std::size_t n = sealed.size() - 16;
    Bytes in(sealed.size() + 32, 0x5a), out(n + 32, 0xa5), tag(16 + 32, 0xc3);
    std::copy(sealed.begin(), sealed.end(), in.begin() + 16);
    std::copy(sealed.begin() + static_cast<std::ptrdiff_t>(n), sealed.end(), tag.begin() + 16);
    std::uint8_t* src = in.data() + 16;
    std::uint8_t* dst = l == Layout::in_place ? src : out.data() + 16;
    const std::uint8_t* t = l == Layout::tag_after_text ? src + n : tag.data() + 16;
    const bool ok = a.open(nonce.data(), aad.data(), aad.size(), src, dst, n, t, tag_len);
    for (std::size_t i = 0; i < 16; ++i) REQUIRE(out[i] == 0xa5);  // guards
    if (l != Layout::in_place)
        for (std::size_t i = n + 16; i < out.size(); ++i) REQUIRE(out[i] == 0xa5);
    if (!ok) {
        for (std::size_t i = 0; i < n; ++i) REQUIRE(dst[i] == 0);
        return std::nullopt;
    }
    return Bytes(dst, dst + n);
}

struct Case {
    gnutls_cipher_algorithm_t cipher;
    std::size_t key_len;
    const char* label;
};
const Case kCases[] = {{GNUTLS_CIPHER_AES_128_GCM, 16, "AES-128-GCM"},
                       {GNUTLS_CIPHER_AES_256_GCM, 32, "AES-256-GCM"},
                       {GNUTLS_CIPHER_CHACHA20_POLY1305, 32, "ChaCha20-Poly1305"}};

// fastest and gnutls, and each vector path the CPU has, forced.
std::vector<Aead::Engine> engines() {
    std::vector<Aead::Engine> e{Aead::Engine::fastest, Aead::Engine::gnutls};
    if (AesGcm::cpu_has(AesGcm::Path::avx2)) e.push_back(Aead::Engine::vaes_avx2);
    if (AesGcm::cpu_has(AesGcm::Path::avx512)) e.push_back(Aead::Engine::vaes_avx512);
    return e;
}
const char* name(Aead::Engine e) {
    switch (e) {
        case Aead::Engine::fastest: return "fastest";
        case Aead::Engine::gnutls: return "gnutls";
        case Aead::Engine::vaes_avx2: return "vaes_avx2";
        case Aead::Engine::vaes_avx512: return "vaes_avx512";
    }
    return "?";
}

// body(c, engine, key, aead) for every cipher and every engine, with a fresh
// random key.
template <class Body>
void for_each_key(std::mt19937& rng, Body body) {
    for (const Case& c : kCases) {
        for (const Aead::Engine e : engines()) {
            CAPTURE(c.label);
            CAPTURE(name(e));
            const Bytes key = random_bytes(rng, c.key_len);
            Aead a;
            REQUIRE(a.init(c.cipher, key.data(), key.size(), "test", e));
            body(c, e, key, a);
        }
    }
}

}  // namespace

TEST_CASE("Aead: both engines, every layout, the same bytes as GnuTLS's one-shot call; open takes them back") {
    std::mt19937 rng(21);
    for_each_key(rng, [&](const Case& c, Aead::Engine e, const Bytes& key, const Aead& a) {
        CHECK(a.ready());
        if (e == Aead::Engine::gnutls || c.cipher == GNUTLS_CIPHER_CHACHA20_POLY1305)
            CHECK(a.gcm_path() == AesGcm::Path::gnutls);
        else if (e == Aead::Engine::fastest)
            CHECK(a.gcm_path() == AesGcm::chosen());
        else
            CHECK(a.gcm_path() == (e == Aead::Engine::vaes_avx2 ? AesGcm::Path::avx2 : AesGcm::Path::avx512));
        CHECK(a.vector_path() == (a.gcm_path() != AesGcm::Path::gnutls));
        for (const std::size_t len : {0u, 1u, 15u, 16u, 17u, 255u, 1024u, 1400u, 1433u, 9000u}) {
            const Bytes nonce = random_bytes(rng, 12), aad = random_bytes(rng, len % 3 == 0 ? 8 : 13);
            const Bytes text = random_bytes(rng, len);
            const Bytes want = reference_aead_seal(c.cipher, key, nonce, aad, text);
            for (const Layout l : {Layout::in_place, Layout::tag_after_text, Layout::tag_apart}) {
                CAPTURE(len);
                CAPTURE(name(l));
                CHECK(seal_with(a, l, nonce, aad, text) == want);
                const auto back = open_with(a, l, nonce, aad, want, 16);
                REQUIRE(back);
                CHECK(*back == text);
            }
        }
    });
}

TEST_CASE("Aead: a changed byte of text, tag, AAD or nonce is refused with the output zeroed; truncated tags") {
    std::mt19937 rng(7);
    for_each_key(rng, [&](const Case& c, Aead::Engine, const Bytes& key, const Aead& a) {
        const Bytes nonce = random_bytes(rng, 12), aad = random_bytes(rng, 8), text = random_bytes(rng, 300);
        const Bytes sealed = reference_aead_seal(c.cipher, key, nonce, aad, text);
        for (const Layout l : {Layout::in_place, Layout::tag_after_text, Layout::tag_apart}) {
            CAPTURE(name(l));
            for (const std::size_t at :
                 {std::size_t{0}, std::size_t{150}, std::size_t{299}, std::size_t{300}, std::size_t{315}}) {
                Bytes bad = sealed;
                bad[at] ^= 0x01;
                CHECK(!open_with(a, l, nonce, aad, bad, 16));
            }
            Bytes bad_aad = aad;
            bad_aad[3] ^= 0x80;
            CHECK(!open_with(a, l, nonce, bad_aad, sealed, 16));
            Bytes bad_nonce = nonce;
            bad_nonce[11] ^= 0x01;
            CHECK(!open_with(a, l, bad_nonce, aad, sealed, 16));
            if (c.cipher != GNUTLS_CIPHER_CHACHA20_POLY1305) {  // ESP's truncated ICVs
                                                                // are AES-GCM's
                for (const std::size_t tag_len : {8u, 12u}) {
                    CAPTURE(tag_len);
                    Bytes cut = sealed;
                    cut[text.size() + tag_len] ^= 0xff;  // a byte beyond the truncated tag: not checked
                    const auto back = open_with(a, l, nonce, aad, cut, tag_len);
                    REQUIRE(back);
                    CHECK(*back == text);
                    cut[text.size() + tag_len - 1] ^= 0x01;  // its last byte: checked
                    CHECK(!open_with(a, l, nonce, aad, cut, tag_len));
                }
            }
            CHECK(!open_with(a, l, nonce, aad, sealed, 0));   // no tag
            CHECK(!open_with(a, l, nonce, aad, sealed, 17));  // beyond the cipher's
        }
    });
}

TEST_CASE("Aead: wrong key sizes and ciphers are clear errors; a reset handle refuses to work") {
    const Bytes key(32, 1);
    Aead a;
    auto st = a.init(GNUTLS_CIPHER_AES_128_GCM, key.data(), 32, "ESP AES-GCM");
    REQUIRE(!st);
    CHECK(st.error().message.find("ESP AES-GCM") == 0);
    CHECK(st.error().message.find("32 bytes") != std::string::npos);
    CHECK(!a.ready());
    CHECK(!a.init(GNUTLS_CIPHER_NULL, key.data(), 0));
    REQUIRE(a.init(GNUTLS_CIPHER_AES_256_GCM, key.data(), 32));
    a.reset();
    CHECK(!a.ready());
    Bytes nonce(12), buf(64, 9), tag(16);
    CHECK(!a.seal(nonce.data(), nullptr, 0, buf.data(), buf.data(), buf.size(), tag.data()));
    CHECK(!a.open(nonce.data(), nullptr, 0, buf.data(), buf.data(), buf.size(), tag.data(), 16));
    CHECK(buf == Bytes(64, 0));
}
