#include <doctest/doctest.h>

#include <gnutls/crypto.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "crypto/aes_gcm.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

gnutls_cipher_algorithm_t gcm_cipher(const Bytes& key) {
    return key.size() == 16 ? GNUTLS_CIPHER_AES_128_GCM : GNUTLS_CIPHER_AES_256_GCM;
}

// Seals into a buffer with guard bytes on both sides; fails if a guard changed.
Bytes our_seal(const AesGcm& gcm, const Bytes& nonce, const Bytes& aad, const Bytes& text, std::size_t offset) {
    Bytes buf(offset + text.size() + 16 + 64, 0xa5);
    std::uint8_t* out = buf.data() + offset;
    gcm.seal(nonce.data(), aad.data(), aad.size(), text.data(), out, text.size(), out + text.size());
    for (std::size_t i = 0; i < offset; ++i) REQUIRE(buf[i] == 0xa5);
    for (std::size_t i = offset + text.size() + 16; i < buf.size(); ++i) REQUIRE(buf[i] == 0xa5);
    return Bytes(out, out + text.size() + 16);
}

// Every vector path this CPU has (widest first); each test below runs on each of them.
std::vector<AesGcm::Path> vector_paths() {
    std::vector<AesGcm::Path> paths;
    for (AesGcm::Path p : {AesGcm::Path::avx512, AesGcm::Path::avx2})
        if (AesGcm::cpu_has(p)) paths.push_back(p);
    if (paths.empty()) MESSAGE("no VAES/VPCLMULQDQ with AVX2 or AVX-512 on this CPU: AesGcm is not used here");
    return paths;
}

}  // namespace

TEST_CASE("AES-GCM (VAES): each path the CPU has is the one set_key was given") {
    for (const AesGcm::Path p : vector_paths()) {
        AesGcm gcm;
        const Bytes key(16, 7);
        REQUIRE(gcm.set_key(key.data(), key.size(), p));
        CHECK(gcm.path() == p);
    }
    // GnuTLS's is not ours, and a path the CPU lacks is refused rather than run.
    AesGcm gcm;
    const Bytes key(16, 7);
    CHECK_FALSE(gcm.set_key(key.data(), key.size(), AesGcm::Path::gnutls));
    CHECK(gcm.path() == AesGcm::Path::gnutls);
    for (AesGcm::Path p : {AesGcm::Path::avx2, AesGcm::Path::avx512})
        if (!AesGcm::cpu_has(p)) CHECK_FALSE(gcm.set_key(key.data(), key.size(), p));
}

TEST_CASE("AES-GCM (VAES): ESPVPN_GCM_VAES narrows the path: 0 GnuTLS, avx2 at most 256-bit, avx512 or unset the CPU's") {
    const char* saved = std::getenv("ESPVPN_GCM_VAES");
    const std::string before = saved ? saved : "";
    const AesGcm::Path best = AesGcm::cpu_best();
    const AesGcm::Path narrow = AesGcm::cpu_has(AesGcm::Path::avx2) ? AesGcm::Path::avx2 : AesGcm::Path::gnutls;
    ::unsetenv("ESPVPN_GCM_VAES");
    CHECK(AesGcm::chosen() == best);
    ::setenv("ESPVPN_GCM_VAES", "0", 1);
    CHECK(AesGcm::chosen() == AesGcm::Path::gnutls);
    CHECK_FALSE(AesGcm::available());
    ::setenv("ESPVPN_GCM_VAES", "avx2", 1);
    CHECK(AesGcm::chosen() == narrow);
    ::setenv("ESPVPN_GCM_VAES", "avx512", 1);
    CHECK(AesGcm::chosen() == best);
    ::setenv("ESPVPN_GCM_VAES", "1", 1);
    CHECK(AesGcm::chosen() == best);
    if (saved) ::setenv("ESPVPN_GCM_VAES", before.c_str(), 1);
    else ::unsetenv("ESPVPN_GCM_VAES");
}

TEST_CASE("AES-GCM (VAES): the GCM specification's test cases 2, 3, 4 and 16") {
    struct Case {
        const char *key, *iv, *aad, *text, *cipher, *tag;
    };
    const Case cases[] = {
        {"00000000000000000000000000000000", "000000000000000000000000", "", "00000000000000000000000000000000",
         "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"},
        {"feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
         "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
         "4d5c2af327cd64a62cf35abd2ba6fab4"},
        {"feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
         "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
         "5bc94fbc3221a5db94fae95ae7121a47"},
        {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
         "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
         "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
         "76fc6ece0f4e1768cddf8853bb2d551b"},
    };
    for (const AesGcm::Path p : vector_paths()) {
        for (const Case& c : cases) {
            CAPTURE(AesGcm::name(p));
            CAPTURE(c.cipher);
            const Bytes key = hex(c.key), iv = hex(c.iv), aad = hex(c.aad), text = hex(c.text);
            AesGcm gcm;
            REQUIRE(gcm.set_key(key.data(), key.size(), p));
            const Bytes sealed = our_seal(gcm, iv, aad, text, 0);
            CHECK(Bytes(sealed.begin(), sealed.end() - 16) == hex(c.cipher));
            CHECK(Bytes(sealed.end() - 16, sealed.end()) == hex(c.tag));
            Bytes plain(text.size());
            CHECK(gcm.open(iv.data(), aad.data(), aad.size(), sealed.data(), plain.data(), text.size(),
                           sealed.data() + text.size(), 16));
            CHECK(plain == text);
        }
    }
}

TEST_CASE("AES-GCM (VAES): the same bytes as GnuTLS for every length 0-700, ESP and jumbo sizes, any AAD") {
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 700; ++n) lengths.push_back(n);
    for (std::size_t n : {1023, 1024, 1025, 1400, 1408, 1424, 4096, 9000, 65535, 65536 + 13}) lengths.push_back(n);
    for (const AesGcm::Path p : vector_paths()) {
        for (std::size_t key_len : {16, 32}) {
            std::mt19937 rng(20261204 + static_cast<unsigned>(key_len));
            const Bytes key = random_bytes(rng, key_len);
            AesGcm gcm;
            REQUIRE(gcm.set_key(key.data(), key.size(), p));
            for (std::size_t n : lengths) {
                const std::size_t aad_len =
                    std::array<std::size_t, 13>{0, 1, 2, 3, 7, 8, 12, 13, 14, 15, 16, 20, 45}[n % 13];
                CAPTURE(AesGcm::name(p));
                CAPTURE(key_len);
                CAPTURE(n);
                CAPTURE(aad_len);
                const Bytes nonce = random_bytes(rng, 12), aad = random_bytes(rng, aad_len), text = random_bytes(rng, n);
                const Bytes want = reference_aead_seal(gcm_cipher(key), key, nonce, aad, text);
                REQUIRE(our_seal(gcm, nonce, aad, text, n % 61) == want);

                // Open in place (as ESP does) and out of place, with the whole tag and a truncated one.
                Bytes buf(want.begin(), want.end() - 16);
                REQUIRE(gcm.open(nonce.data(), aad.data(), aad.size(), buf.data(), buf.data(), n, want.data() + n, 16));
                REQUIRE(buf == text);
                Bytes out(n + 1, 0x5a);
                REQUIRE(gcm.open(nonce.data(), aad.data(), aad.size(), want.data(), out.data(), n, want.data() + n, 12));
                REQUIRE(Bytes(out.begin(), out.end() - 1) == text);
                REQUIRE(out.back() == 0x5a);
            }
        }
    }
}

TEST_CASE("AES-GCM (VAES): open refuses any changed byte of text, AAD, nonce or tag, and leaves no plaintext") {
    for (const AesGcm::Path p : vector_paths()) {
        std::mt19937 rng(7);
        const Bytes key = random_bytes(rng, 16);
        AesGcm gcm;
        REQUIRE(gcm.set_key(key.data(), key.size(), p));
        for (std::size_t n : {0, 1, 15, 16, 17, 31, 33, 255, 256, 257, 1400}) {
            CAPTURE(AesGcm::name(p));
            CAPTURE(n);
            const Bytes nonce = random_bytes(rng, 12), aad = random_bytes(rng, 8), text = random_bytes(rng, n);
            const Bytes sealed = our_seal(gcm, nonce, aad, text, 0);
            auto opens = [&](Bytes s, Bytes a, Bytes iv, std::size_t tag_len) {
                Bytes out(n, 0x77);
                const bool ok = gcm.open(iv.data(), a.data(), a.size(), s.data(), out.data(), n, s.data() + n, tag_len);
                if (!ok) {
                    for (std::uint8_t b : out) REQUIRE(b == 0);
                }
                return ok;
            };
            REQUIRE(opens(sealed, aad, nonce, 16));
            for (std::size_t i = 0; i < sealed.size(); i += (i < 16 || i + 17 > sealed.size()) ? 1 : 37) {
                Bytes s = sealed;
                s[i] ^= static_cast<std::uint8_t>(1u << (i % 8));
                CAPTURE(i);
                CHECK_FALSE(opens(s, aad, nonce, 16));
            }
            for (std::size_t i = 0; i < aad.size(); ++i) {
                Bytes a = aad;
                a[i] ^= 0x80;
                CHECK_FALSE(opens(sealed, a, nonce, 16));
            }
            for (std::size_t i = 0; i < nonce.size(); ++i) {
                Bytes iv = nonce;
                iv[i] ^= 0x01;
                CHECK_FALSE(opens(sealed, aad, iv, 16));
            }
            Bytes longer_aad = aad;
            longer_aad.push_back(0);
            CHECK_FALSE(opens(sealed, longer_aad, nonce, 16));
            CHECK_FALSE(opens(sealed, aad, nonce, 0));
            CHECK_FALSE(opens(sealed, aad, nonce, 17));
            // Every truncation of the tag: its bytes are checked, the ones after it are not.
            for (std::size_t tag_len = 1; tag_len <= 16; ++tag_len) {
                CAPTURE(tag_len);
                Bytes s = sealed;
                if (tag_len < 16) s[n + tag_len] ^= 0x01;
                CHECK(opens(s, aad, nonce, tag_len));
                s[n + tag_len - 1] ^= 0x80;
                CHECK_FALSE(opens(s, aad, nonce, tag_len));
            }
        }
    }
}

TEST_CASE("AES-GCM (VAES): set_key takes 16 and 32 bytes only; keys do not leak between objects") {
    for (const AesGcm::Path p : vector_paths()) {
        CAPTURE(AesGcm::name(p));
        AesGcm gcm;
        const Bytes k24(24, 1);
        CHECK_FALSE(gcm.set_key(k24.data(), k24.size(), p));
        CHECK_FALSE(gcm.set_key(k24.data(), 0, p));
        // A key change takes effect in full (round keys and the powers of H).
        std::mt19937 rng(3);
        const Bytes k1 = random_bytes(rng, 32), k2 = random_bytes(rng, 16);
        const Bytes nonce = random_bytes(rng, 12), text = random_bytes(rng, 300), aad;
        REQUIRE(gcm.set_key(k1.data(), k1.size(), p));
        CHECK(our_seal(gcm, nonce, aad, text, 0) ==
              reference_aead_seal(GNUTLS_CIPHER_AES_256_GCM, k1, nonce, aad, text));
        REQUIRE(gcm.set_key(k2.data(), k2.size(), p));
        CHECK(our_seal(gcm, nonce, aad, text, 0) ==
              reference_aead_seal(GNUTLS_CIPHER_AES_128_GCM, k2, nonce, aad, text));
    }
}

TEST_CASE("AES-GCM (VAES): reads nothing past the text, AAD or tag (each ending at an unmapped page)") {
    // Each buffer is placed so that its last byte is the last of a page whose next page is
    // unmapped: a load of a whole vector over the end would fault.
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    void* map = ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    auto* base = static_cast<std::uint8_t*>(map);
    REQUIRE(::mprotect(base + page, page, PROT_NONE) == 0);
    std::uint8_t* const end = base + page;
    std::mt19937 rng(11);
    for (const AesGcm::Path p : vector_paths()) {
        const Bytes key = random_bytes(rng, 16);
        AesGcm gcm;
        REQUIRE(gcm.set_key(key.data(), key.size(), p));
        for (std::size_t n = 0; n <= 300; ++n) {
            CAPTURE(AesGcm::name(p));
            CAPTURE(n);
            const std::size_t aad_len = n % 17, tag_len = 1 + n % 16;
            const Bytes nonce = random_bytes(rng, 12), aad = random_bytes(rng, aad_len), text = random_bytes(rng, n);
            const Bytes want = reference_aead_seal(gcm_cipher(key), key, nonce, aad, text);
            // The text at the end of the page, sealed and opened in place; then the AAD, then the tag.
            std::uint8_t* t = end - n;
            std::copy(text.begin(), text.end(), t);
            std::uint8_t tag[16];
            gcm.seal(nonce.data(), aad.data(), aad.size(), t, t, n, tag);
            REQUIRE(Bytes(t, end) == Bytes(want.begin(), want.end() - 16));
            REQUIRE(gcm.open(nonce.data(), aad.data(), aad.size(), t, t, n, want.data() + n, 16));
            REQUIRE(Bytes(t, end) == text);
            std::uint8_t* a = end - aad_len;
            std::copy(aad.begin(), aad.end(), a);
            Bytes c(want.begin(), want.end() - 16), out(n);
            REQUIRE(gcm.open(nonce.data(), a, aad_len, c.data(), out.data(), n, want.data() + n, 16));
            std::uint8_t* g = end - tag_len;
            std::copy(want.begin() + static_cast<std::ptrdiff_t>(n),
                      want.begin() + static_cast<std::ptrdiff_t>(n + tag_len), g);
            REQUIRE(gcm.open(nonce.data(), aad.data(), aad.size(), c.data(), out.data(), n, g, tag_len));
            REQUIRE(out == text);
        }
    }
    ::munmap(map, 2 * page);
}
