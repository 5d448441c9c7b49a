#include <doctest/doctest.h>

#include <nettle/aes.h>
#include <nettle/cbc.h>

#include <random>
#include <vector>

#include "crypto/aes_cbc_lanes.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

// The reference: Nettle's CBC, one message at a time.
Bytes nettle_cbc(const Bytes& key, const Bytes& iv, Bytes text) {
    Bytes chain = iv;
    if (key.size() == 16) {
        aes128_ctx k;
        aes128_set_encrypt_key(&k, key.data());
        cbc_aes128_encrypt(&k, chain.data(), text.size(), text.data(), text.data());
    } else {
        aes256_ctx k;
        aes256_set_encrypt_key(&k, key.data());
        cbc_aes256_encrypt(&k, chain.data(), text.size(), text.data(), text.data());
    }
    return text;
}

}  // namespace

TEST_CASE("AES-CBC lanes: known answers (RFC 3602 case 2, SP 800-38A F.2.5)") {
    AesCbcLanes aes;
    Bytes k128 = hex("c286696d887c9aa0611bbb3e2025a45a");
    REQUIRE(aes.set_key(k128.data(), k128.size()));
    Bytes iv = hex("562e17996d093d28ddb3ba695a2e6f58");
    Bytes text = hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    AesCbcMessage m{iv.data(), text.data(), text.size()};
    aes.encrypt({&m, 1});
    CHECK(text == hex("d296cd94c2cccf8a3a863028b5e1dc0a7586602d253cfff91b8266bea6d61ab1"));

    Bytes k256 = hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4");
    REQUIRE(aes.set_key(k256.data(), k256.size()));
    Bytes iv2 = hex("000102030405060708090a0b0c0d0e0f");
    Bytes text2 = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51");
    AesCbcMessage m2{iv2.data(), text2.data(), text2.size()};
    aes.encrypt({&m2, 1});
    CHECK(text2 == hex("f58c4c04d6e5f1ba779eabfb5f7bfbd69cfc4e967edb808d679f777bc6702c7d"));
    CHECK(iv2 == hex("000102030405060708090a0b0c0d0e0f"));  // the IV is only read

    Bytes bad(24);
    CHECK_FALSE(aes.set_key(bad.data(), bad.size()));
}

TEST_CASE("AES-CBC lanes: any number of messages of mixed lengths equal Nettle's CBC of each") {
    std::mt19937 rng(20261203);
    for (std::size_t key_len : {16u, 32u}) {
        Bytes key = random_bytes(rng, key_len);
        AesCbcLanes aes;
        REQUIRE(aes.set_key(key.data(), key.size()));
        // 0..20 messages: fewer than, exactly and more than the lanes, lengths from 0 blocks to a
        // 64-KiB-sized message, equal lengths (a TSO batch) and all different ones.
        for (std::size_t count : {0u, 1u, 3u, 7u, 8u, 9u, 16u, 20u}) {
            for (int shape = 0; shape < 3; ++shape) {
                std::vector<Bytes> ivs, texts, expected;
                for (std::size_t i = 0; i < count; ++i) {
                    std::size_t blocks = shape == 0 ? 88 : shape == 1 ? rng() % 100 : (i == 2 ? 4096 : rng() % 3);
                    ivs.push_back(random_bytes(rng, 16));
                    texts.push_back(random_bytes(rng, blocks * 16));
                    expected.push_back(nettle_cbc(key, ivs.back(), texts.back()));
                }
                std::vector<AesCbcMessage> msgs;
                for (std::size_t i = 0; i < count; ++i) msgs.push_back({ivs[i].data(), texts[i].data(), texts[i].size()});
                aes.encrypt(msgs);
                for (std::size_t i = 0; i < count; ++i) {
                    CAPTURE(key_len);
                    CAPTURE(count);
                    CAPTURE(shape);
                    CAPTURE(i);
                    CHECK(texts[i] == expected[i]);
                }
            }
        }
    }
}
