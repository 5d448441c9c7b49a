#include <doctest/doctest.h>

#include <gnutls/crypto.h>

#include <algorithm>
#include <array>
#include <string>
#include <random>
#include <vector>

#include "crypto/cpu_features.h"
#include "crypto/hmac_lanes.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

// The reference: GnuTLS's HMAC, one message at a time.
Bytes gnutls_hmac(HmacLaneHash hash, const Bytes& key, const Bytes& data) {
    const bool sha1 = hash == HmacLaneHash::sha1;
    Bytes out(sha1 ? 20 : 32);
    REQUIRE(gnutls_hmac_fast(sha1 ? GNUTLS_MAC_SHA1 : GNUTLS_MAC_SHA256, key.data(), key.size(), data.data(),
                             data.size(), out.data()) == 0);
    return out;
}

}  // namespace

TEST_CASE("HMAC-SHA1 lanes: RFC 2202 test cases") {
    for (bool sha_ni : {true, false}) {
        CAPTURE(sha_ni);
        HmacLanes mac;
        Bytes key1(20, 0x0b), data1 = {'H', 'i', ' ', 'T', 'h', 'e', 'r', 'e'};
        Bytes key6(80, 0xaa);
        const std::string text6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        Bytes data6(text6.begin(), text6.end());
        std::array<std::uint8_t, 20> out1{}, out6{};
        mac.set_key(HmacLaneHash::sha1, key1.data(), key1.size(), sha_ni);
        HmacMessage m1{data1.data(), data1.size(), out1.data(), 20};
        mac.compute({&m1, 1});
        CHECK(Bytes(out1.begin(), out1.end()) == hex("b617318655057264e28bc0b6fb378c8ef146be00"));
        mac.set_key(HmacLaneHash::sha1, key6.data(), key6.size(), sha_ni);  // longer than a block: hashed first
        HmacMessage m6{data6.data(), data6.size(), out6.data(), 20};
        mac.compute({&m6, 1});
        CHECK(Bytes(out6.begin(), out6.end()) == hex("aa4ae5e15272d00e95705637ce8a3b55ed402112"));
    }
}

TEST_CASE("HMAC lanes: any number of messages of mixed lengths equal GnuTLS's HMAC of each (SHA-1, SHA-256)") {
    if (!detect_cpu_features().sha_ni) MESSAGE("no SHA-NI on this CPU: only the portable path is compared");
    std::mt19937 rng(20261204);
    for (HmacLaneHash hash : {HmacLaneHash::sha1, HmacLaneHash::sha256}) {
        const std::size_t digest = hash == HmacLaneHash::sha1 ? 20 : 32;
        for (bool sha_ni : {true, false}) {
            for (std::size_t key_len : {0u, 20u, 32u, 64u, 65u, 200u}) {
                Bytes key = random_bytes(rng, key_len);
                HmacLanes mac;
                mac.set_key(hash, key.data(), key.size(), sha_ni);
                // 0..13 messages: fewer than, exactly and more than the lanes. Lengths: every tail
                // shape (55 and 56 bytes: one padding block or two; 0; whole blocks), ESP-sized
                // packets, a 64-KiB one among tiny ones (lanes finish at different times).
                for (std::size_t count : {0u, 1u, 2u, 3u, 4u, 5u, 9u, 13u}) {
                    for (int shape = 0; shape < 4; ++shape) {
                        std::vector<Bytes> data, expected;
                        std::vector<std::array<std::uint8_t, 32>> out(count);
                        std::vector<HmacMessage> msgs;
                        for (std::size_t i = 0; i < count; ++i) {
                            std::size_t len = shape == 0   ? 1424
                                              : shape == 1 ? rng() % 200
                                              : shape == 2 ? std::array<std::size_t, 6>{0, 55, 56, 63, 64, 119}[i % 6]
                                                           : (i == 1 ? 65536 : rng() % 70);
                            data.push_back(random_bytes(rng, len));
                            expected.push_back(gnutls_hmac(hash, key, data.back()));
                        }
                        // ESP truncates SHA-1 to 96 bits, SHA-256 to 128; shape 1 takes the whole digest.
                        const std::size_t out_len = shape == 1 ? digest : hash == HmacLaneHash::sha1 ? 12 : 16;
                        for (std::size_t i = 0; i < count; ++i)
                            msgs.push_back({data[i].data(), data[i].size(), out[i].data(), out_len});
                        mac.compute(msgs);
                        for (std::size_t i = 0; i < count; ++i) {
                            CAPTURE(static_cast<int>(hash));
                            CAPTURE(sha_ni);
                            CAPTURE(key_len);
                            CAPTURE(count);
                            CAPTURE(shape);
                            CAPTURE(i);
                            CHECK(Bytes(out[i].begin(), out[i].begin() + out_len) ==
                                  Bytes(expected[i].begin(), expected[i].begin() + out_len));
                            // Nothing written past out_len.
                            CHECK(std::all_of(out[i].begin() + out_len, out[i].end(),
                                              [](std::uint8_t b) { return b == 0; }));
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("HMAC-SHA256 lanes: RFC 4231 test cases") {
    for (bool sha_ni : {true, false}) {
        CAPTURE(sha_ni);
        HmacLanes mac;
        // Test case 1: a 20-byte key; test case 6: a 131-byte key (hashed first).
        Bytes key1(20, 0x0b), data1 = {'H', 'i', ' ', 'T', 'h', 'e', 'r', 'e'};
        Bytes key6(131, 0xaa);
        const std::string text6 = "Test Using Larger Than Block-Size Key - Hash Key First";
        Bytes data6(text6.begin(), text6.end());
        std::array<std::uint8_t, 32> out1{}, out6{};
        mac.set_key(HmacLaneHash::sha256, key1.data(), key1.size(), sha_ni);
        HmacMessage m1{data1.data(), data1.size(), out1.data(), 32};
        mac.compute({&m1, 1});
        CHECK(Bytes(out1.begin(), out1.end()) ==
              hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"));
        mac.set_key(HmacLaneHash::sha256, key6.data(), key6.size(), sha_ni);
        HmacMessage m6{data6.data(), data6.size(), out6.data(), 32};
        // Test case 6 three times in one batch: the two lanes and a third after them.
        std::array<std::array<std::uint8_t, 32>, 3> outs{};
        std::array<HmacMessage, 3> ms;
        for (std::size_t i = 0; i < 3; ++i) ms[i] = {data6.data(), data6.size(), outs[i].data(), 32};
        mac.compute(ms);
        mac.compute({&m6, 1});
        const Bytes want6 = hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        CHECK(Bytes(out6.begin(), out6.end()) == want6);
        for (const auto& o : outs) CHECK(Bytes(o.begin(), o.end()) == want6);
    }
}

TEST_CASE("HMAC lanes: a key set again replaces the old one, across hashes") {
    std::mt19937 rng(4231);
    const Bytes data = random_bytes(rng, 1500), k1 = random_bytes(rng, 20), k2 = random_bytes(rng, 32);
    HmacLanes mac;
    std::array<std::uint8_t, 32> out{};
    HmacMessage m{data.data(), data.size(), out.data(), 32};
    mac.set_key(HmacLaneHash::sha256, k2.data(), k2.size());
    mac.compute({&m, 1});
    CHECK(Bytes(out.begin(), out.end()) == gnutls_hmac(HmacLaneHash::sha256, k2, data));
    mac.set_key(HmacLaneHash::sha1, k1.data(), k1.size());
    m.out_len = 20;
    out.fill(0);
    mac.compute({&m, 1});
    CHECK(Bytes(out.begin(), out.begin() + 20) == gnutls_hmac(HmacLaneHash::sha1, k1, data));
    CHECK(std::all_of(out.begin() + 20, out.end(), [](std::uint8_t b) { return b == 0; }));
}
