#include <doctest/doctest.h>

#include <string>

#include "crypto/esp_transform.h"
#include "crypto/hmac.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

TEST_CASE("ESP suite names from GlobalProtect getconfig") {
    auto s = esp_suite_from_names("aes-128-cbc", "sha1");
    REQUIRE(s.ok());
    CHECK(s->cipher == EspCipher::aes128_cbc);
    CHECK(s->integrity == EspIntegrity::hmac_sha1_96);
    CHECK(s->icv_size() == 12);
    CHECK(s->header_size() == 24);
    CHECK(esp_suite_from_names("aes128", "md5")->cipher == EspCipher::aes128_cbc);
    CHECK(esp_suite_from_names("aes-256-cbc", "sha256")->icv_size() == 16);
    auto g = esp_suite_from_names("aes-256-gcm", "sha1");
    REQUIRE(g.ok());
    CHECK(g->is_aead());
    CHECK(g->header_size() == 16);
    CHECK(g->enc_key_size() == 36);
    auto bad = esp_suite_from_names("3des", "sha1");
    REQUIRE(!bad.ok());
    CHECK(bad.error().message.find("'3des'") != std::string::npos);
    auto badh = esp_suite_from_names("aes-128-cbc", "sha384");
    REQUIRE(!badh.ok());
    CHECK(badh.error().message.find("'sha384'") != std::string::npos);
}

TEST_CASE("ESP padding and sizes") {
    EspSuite cbc{EspCipher::aes128_cbc, EspIntegrity::hmac_sha1_96};
    CHECK(cbc.pad_size(14) == 0);
    CHECK(cbc.pad_size(0) == 14);
    CHECK(cbc.pad_size(15) == 15);
    CHECK(cbc.packet_size(1400) == 24 + 1408 + 12);  // 1400 + 2 rounded up to 16
    EspSuite gcm{EspCipher::aes128_gcm, EspIntegrity::none};
    CHECK(gcm.pad_size(2) == 0);
    CHECK(gcm.pad_size(3) == 3);
    CHECK(gcm.packet_size(1400) == 16 + 1400 + 2 + 2 + 16);
    for (const auto& s : all_suites())
        for (std::size_t n = 0; n < 40; ++n) {
            CHECK(s.header_size() <= kEspMaxHeadroom);
            CHECK(s.packet_size(n) - s.header_size() - n <= kEspMaxTailroom);
        }
}

TEST_CASE("ESP keys from getconfig hex, with clear refusals") {
    auto k = EspSaKeys::from_getconfig("aes-128-cbc", "sha1", "0x000102030405060708090a0b0c0d0e0f",
                                       "000102030405060708090a0b0c0d0e0f10111213");
    REQUIRE(k.ok());
    CHECK(k->enc_key().size() == 16);
    CHECK(k->auth_key().size() == 20);

    auto gcm = EspSaKeys::from_getconfig("aes-128-gcm", "", "000102030405060708090a0b0c0d0e0f10111213", "");
    REQUIRE(gcm.ok());
    CHECK(gcm->enc_key().size() == 20);
    CHECK(gcm->auth_key().empty());

    auto nosalt = EspSaKeys::from_getconfig("aes-128-gcm", "sha1", "000102030405060708090a0b0c0d0e0f", "");
    REQUIRE(!nosalt.ok());
    CHECK(nosalt.error().message.find("160 bits") != std::string::npos);
    CHECK(nosalt.error().message.find("salt") != std::string::npos);
    CHECK(nosalt.error().message.find("got 128 bits") != std::string::npos);
    CHECK(!EspSaKeys::from_getconfig("aes-256-gcm", "", std::string(64, 'a'), "").ok());
    CHECK(EspSaKeys::from_getconfig("aes-256-gcm", "", std::string(72, 'a'), "").ok());

    auto short_akey = EspSaKeys::from_getconfig("aes-128-cbc", "sha256", std::string(32, '1'), std::string(40, '2'));
    REQUIRE(!short_akey.ok());
    CHECK(short_akey.error().message.find("256 bits, got 160") != std::string::npos);
    auto badhex = EspSaKeys::from_getconfig("aes-128-cbc", "sha1", std::string(31, '1') + "g", std::string(40, '2'));
    REQUIRE(!badhex.ok());
    CHECK(badhex.error().message.find("ekey") != std::string::npos);
}

TEST_CASE("HMAC known answers (RFC 2202, RFC 4231), state reused across messages") {
    struct Kat {
        EspIntegrity alg;
        Bytes key;
        std::string data;
        Bytes digest;
    };
    const Kat kats[] = {
        {EspIntegrity::hmac_sha1_96, Bytes(20, 0x0b), "Hi There", hex("b617318655057264e28bc0b6fb378c8ef146be00")},
        {EspIntegrity::hmac_sha1_96, Bytes{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
         hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")},
        {EspIntegrity::hmac_md5_96, Bytes(16, 0x0b), "Hi There", hex("9294727a3638bb1c13f48ef8158bfc9d")},
        {EspIntegrity::hmac_md5_96, Bytes{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
         hex("750c783e6ab0b503eaa86e310a5db738")},
        {EspIntegrity::hmac_sha256_128, Bytes(20, 0x0b), "Hi There",
         hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")},
        {EspIntegrity::hmac_sha256_128, Bytes{'J', 'e', 'f', 'e'}, "what do ya want for nothing?",
         hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")},
    };
    for (const auto& kat : kats) {
        Hmac h;
        REQUIRE(h.init(kat.alg, kat.key).ok());
        Bytes data(kat.data.begin(), kat.data.end());
        for (int round = 0; round < 3; ++round) {  // the keyed state must survive each digest
            Bytes out(Hmac::digest_size(kat.alg));
            h.compute(data, out.data(), out.size());
            CHECK(out == kat.digest);
            Bytes truncated(12);
            h.compute(data, truncated.data(), truncated.size());
            CHECK(truncated == Bytes(kat.digest.begin(), kat.digest.begin() + 12));
        }
    }
}

namespace {

// SPI | seq | IV space | plaintext | ICV space
Bytes esp_frame(const EspSuite& s, std::uint32_t spi, std::uint32_t seq, const Bytes& plaintext) {
    Bytes p = concat({be32(spi), be32(seq), Bytes(s.iv_size()), plaintext, Bytes(s.icv_size())});
    return p;
}

}  // namespace

TEST_CASE("AES-CBC known answers (RFC 3602, SP 800-38A) inside a full ESP packet") {
    struct Kat {
        EspCipher cipher;
        Bytes key, iv, plaintext, ciphertext;
    };
    const Kat kats[] = {
        {EspCipher::aes128_cbc, hex("06a9214036b8a15b512e03d534120006"), hex("3dafba429d9eb430b422da802c9fac41"),
         Bytes{'S', 'i', 'n', 'g', 'l', 'e', ' ', 'b', 'l', 'o', 'c', 'k', ' ', 'm', 's', 'g'},
         hex("e353779c1079aeb82708942dbe77181a")},
        {EspCipher::aes128_cbc, hex("c286696d887c9aa0611bbb3e2025a45a"), hex("562e17996d093d28ddb3ba695a2e6f58"),
         hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"),
         hex("d296cd94c2cccf8a3a863028b5e1dc0a7586602d253cfff91b8266bea6d61ab1")},
        {EspCipher::aes256_cbc, hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"),
         hex("000102030405060708090a0b0c0d0e0f"), hex("6bc1bee22e409f96e93d7e117393172a"),
         hex("f58c4c04d6e5f1ba779eabfb5f7bfbd6")},
    };
    for (const auto& kat : kats) {
        for (auto integ : {EspIntegrity::hmac_sha1_96, EspIntegrity::hmac_sha256_128, EspIntegrity::hmac_md5_96}) {
            EspSuite suite{kat.cipher, integ};
            Bytes akey(suite.auth_key_size(), 0x5a);
            auto keys = EspSaKeys::create(suite, Secret(kat.key), Secret(akey));
            REQUIRE(keys.ok());
            auto sealer = EspSealer::create(*keys);
            REQUIRE(sealer.ok());
            Bytes packet = esp_frame(suite, 0x11223344, 7, kat.plaintext);
            REQUIRE(sealer->seal_with_iv(packet, kat.iv));

            // Expected bytes built independently: header, IV, RFC ciphertext, HMAC over them.
            Bytes authenticated = concat({be32(0x11223344), be32(7), kat.iv, kat.ciphertext});
            Bytes expected = concat({authenticated, reference_hmac(integ, akey, authenticated, suite.icv_size())});
            CHECK(packet == expected);

            auto opener = EspOpener::create(*keys);
            REQUIRE(opener.ok());
            CHECK(opener->open(packet) == EspOpenStatus::ok);
            CHECK(Bytes(packet.begin() + 24, packet.end() - static_cast<long>(suite.icv_size())) == kat.plaintext);
        }
    }
}

TEST_CASE("AES-GCM known answers (draft-mcgrew-gcm-test-01, ESP-shaped: AAD = SPI | seq)") {
    struct Kat {
        EspCipher cipher;
        Bytes key_salt, aad, iv, plaintext, ciphertext_tag;
    };
    const Kat kats[] = {
        {EspCipher::aes256_gcm,
         hex("abbccddef00112233445566778899aababbccddef00112233445566778899aab11223344"), hex("4a2cbfe300000002"),
         hex("0102030405060708"),
         hex("4500003069a6400080062690c0a801029389155e0a9e008b2dc57ee0000000007002400020bf0000020405b40101040201020201"),
         hex("ff425c9b724599df7a3bcd510194e00d6a78107f1b0b1cbf06efae9d65a5d763748a637985771d347f0545659f14e99def842d8e"
             "b335f4eecfdbf831824b4c4915956c96")},
        {EspCipher::aes128_gcm, hex("0000000000000000000000000000000000000000"), hex("0000000000000001"),
         hex("0000000000000000"),
         hex("4500003c99c500008001cb7a40679318010101010800075c0200440061626364"
             "65666768696a6b6c6d6e6f707172737475767761626364656667686901020201"),
         hex("4688daf2f973a392732909c331d56d60f694abaa414b5e7ff5fdcdfff5e9a284"
             "456476492719ffb64de7d9dca1e1d894bc3bd57873ed4d181d19d4d5c8c18af3f821d496eeb096e98ad2b69e4799c71d")},
        {EspCipher::aes128_gcm, hex("7d773d00c144c525ac619d18c84a3f47d9664267"), hex("335467aeffffffff"),
         hex("43457e9182443bc6"), hex("01020201"), hex("437f866bcb3f699fe9b0822bac961c4504bef270")},
    };
    for (const auto& kat : kats) {
        EspSuite suite{kat.cipher, EspIntegrity::none};
        auto keys = EspSaKeys::create(suite, Secret(kat.key_salt), Secret());
        REQUIRE(keys.ok());
        auto sealer = EspSealer::create(*keys);
        REQUIRE(sealer.ok());
        Bytes packet = concat({kat.aad, Bytes(8), kat.plaintext, Bytes(16)});
        std::uint64_t counter = 0;
        for (auto b : kat.iv) counter = counter << 8 | b;
        REQUIRE(sealer->seal(packet, counter));  // GCM's explicit IV is the counter
        CHECK(packet == concat({kat.aad, kat.iv, kat.ciphertext_tag}));

        auto opener = EspOpener::create(*keys);
        REQUIRE(opener.ok());
        Bytes tampered = packet;
        tampered[3] ^= 1;  // the SPI is authenticated data
        CHECK(opener->open(tampered) == EspOpenStatus::bad_icv);
        CHECK(opener->open(packet) == EspOpenStatus::ok);
        CHECK(Bytes(packet.begin() + 16, packet.end() - 16) == kat.plaintext);
    }
}

TEST_CASE("every suite: tampering anywhere fails the ICV, bad lengths are refused") {
    for (const auto& suite : all_suites()) {
        CAPTURE(suite.name());
        auto keys = test_keys(suite);
        auto sealer = EspSealer::create(keys);
        auto opener = EspOpener::create(keys);
        REQUIRE(sealer.ok());
        REQUIRE(opener.ok());
        Bytes plain(64, 0xab);
        Bytes packet = esp_frame(suite, 1, 1, plain);
        REQUIRE(sealer->seal(packet, 1));
        for (std::size_t i = 0; i < packet.size(); i += 5) {
            Bytes t = packet;
            t[i] ^= 0x80;
            CHECK(opener->open(t) == EspOpenStatus::bad_icv);
        }
        Bytes unaligned = packet;
        unaligned.pop_back();
        CHECK(opener->open(unaligned) == EspOpenStatus::bad_length);
        CHECK(opener->open(std::span<std::uint8_t>(packet.data(), suite.header_size() + suite.icv_size())) ==
              EspOpenStatus::bad_length);
        Bytes odd = esp_frame(suite, 1, 1, Bytes(suite.block_size() + 1));
        CHECK(!sealer->seal(odd, 2));
        CHECK(opener->open(packet) == EspOpenStatus::ok);
        CHECK(Bytes(packet.begin() + static_cast<long>(suite.header_size()),
                    packet.end() - static_cast<long>(suite.icv_size())) == plain);
    }
}

TEST_CASE("CBC IVs are fresh per packet; GCM IV is the counter") {
    EspSuite cbc{EspCipher::aes128_cbc, EspIntegrity::hmac_sha1_96};
    auto keys = test_keys(cbc);
    auto a = EspSealer::create(keys);
    auto b = EspSealer::create(keys);
    Bytes p1 = esp_frame(cbc, 1, 1, Bytes(16)), p2 = p1, p3 = p1;
    REQUIRE(a->seal(p1, 1));
    REQUIRE(a->seal(p2, 1));
    REQUIRE(b->seal(p3, 1));  // another sealer with the same key picks different IVs
    Bytes iv1(p1.begin() + 8, p1.begin() + 24), iv2(p2.begin() + 8, p2.begin() + 24), iv3(p3.begin() + 8, p3.begin() + 24);
    CHECK(iv1 != iv2);
    CHECK(iv1 != iv3);
    CHECK(iv2 != iv3);

    EspSuite gcm{EspCipher::aes128_gcm, EspIntegrity::none};
    auto g = EspSealer::create(test_keys(gcm));
    Bytes p = esp_frame(gcm, 1, 1, Bytes(4));
    REQUIRE(g->seal(p, 0x0102030405060708ull));
    CHECK(Bytes(p.begin() + 8, p.begin() + 16) == hex("0102030405060708"));
}
