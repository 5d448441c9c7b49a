#include <doctest/doctest.h>

#include <gnutls/crypto.h>

#include <algorithm>
#include <array>
#include <string>
#include <random>
#include <vector>

#include "crypto/cpu_features.h"
#include "crypto/hmac_sha1_lanes.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

// The reference: GnuTLS's HMAC-SHA1, one message at a time.
Bytes gnutls_hmac_sha1(const Bytes& key, const Bytes& data) {
    Bytes out(20);
    REQUIRE(gnutls_hmac_fast(GNUTLS_MAC_SHA1, key.data(), key.size(), data.data(), data.size(), out.data()) == 0);
    return out;
}

}  // namespace

TEST_CASE("HMAC-SHA1 lanes: RFC 2202 test cases") {
    for (bool sha_ni : {true, false}) {
        CAPTURE(sha_ni);
        HmacSha1Lanes mac;
        Bytes key1(20, 0x0b), data1 = {'H', 'i', ' ', 'T', 'h', 'e', 'r', 'e'};
        Bytes key6(80, 0xaa);
        const std::string text6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        Bytes data6(text6.begin(), text6.end());
        std::array<std::uint8_t, 20> out1{}, out6{};
        mac.set_key(key1.data(), key1.size(), sha_ni);
        HmacSha1Message m1{data1.data(), data1.size(), out1.data(), 20};
        mac.compute({&m1, 1});
        CHECK(Bytes(out1.begin(), out1.end()) == hex("b617318655057264e28bc0b6fb378c8ef146be00"));
        mac.set_key(key6.data(), key6.size(), sha_ni);  // longer than a block: hashed first
        HmacSha1Message m6{data6.data(), data6.size(), out6.data(), 20};
        mac.compute({&m6, 1});
        CHECK(Bytes(out6.begin(), out6.end()) == hex("aa4ae5e15272d00e95705637ce8a3b55ed402112"));
    }
}

TEST_CASE("HMAC-SHA1 lanes: any number of messages of mixed lengths equal GnuTLS's HMAC of each") {
    if (!detect_cpu_features().sha_ni) MESSAGE("no SHA-NI on this CPU: only the portable path is compared");
    std::mt19937 rng(20261204);
    for (bool sha_ni : {true, false}) {
        for (std::size_t key_len : {0u, 20u, 64u, 65u}) {
            Bytes key = random_bytes(rng, key_len);
            HmacSha1Lanes mac;
            mac.set_key(key.data(), key.size(), sha_ni);
            // 0..13 messages: fewer than, exactly and more than the lanes. Lengths: every tail
            // shape (55 and 56 bytes: one padding block or two; 0; whole blocks), ESP-sized
            // packets, a 64-KiB one among tiny ones (lanes finish at different times).
            for (std::size_t count : {0u, 1u, 2u, 3u, 4u, 5u, 9u, 13u}) {
                for (int shape = 0; shape < 4; ++shape) {
                    std::vector<Bytes> data, expected;
                    std::vector<std::array<std::uint8_t, 20>> out(count);
                    std::vector<HmacSha1Message> msgs;
                    for (std::size_t i = 0; i < count; ++i) {
                        std::size_t len = shape == 0   ? 1424
                                          : shape == 1 ? rng() % 200
                                          : shape == 2 ? std::array<std::size_t, 6>{0, 55, 56, 63, 64, 119}[i % 6]
                                                       : (i == 1 ? 65536 : rng() % 70);
                        data.push_back(random_bytes(rng, len));
                        expected.push_back(gnutls_hmac_sha1(key, data.back()));
                    }
                    const std::size_t out_len = shape == 1 ? 20 : 12;  // ESP truncates to 96 bits
                    for (std::size_t i = 0; i < count; ++i)
                        msgs.push_back({data[i].data(), data[i].size(), out[i].data(), out_len});
                    mac.compute(msgs);
                    for (std::size_t i = 0; i < count; ++i) {
                        CAPTURE(sha_ni);
                        CAPTURE(key_len);
                        CAPTURE(count);
                        CAPTURE(shape);
                        CAPTURE(i);
                        CHECK(Bytes(out[i].begin(), out[i].begin() + out_len) ==
                              Bytes(expected[i].begin(), expected[i].begin() + out_len));
                        // Nothing written past out_len.
                        CHECK(std::all_of(out[i].begin() + out_len, out[i].end(), [](std::uint8_t b) { return b == 0; }));
                    }
                }
            }
        }
    }
}
