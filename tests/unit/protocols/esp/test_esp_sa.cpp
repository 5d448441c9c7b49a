#include <doctest/doctest.h>

#include <gnutls/crypto.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "protocols/esp/esp_sa.h"
#include "tests/unit/esp_test_util.h"

using namespace espvpn;
using namespace espvpn::test;

namespace {

constexpr std::uint32_t kSpi = 0x5B1B67F8;

// A datapath-like buffer: maximum headroom, payload, maximum tailroom.
struct TxBuffer {
    Bytes storage;
    std::size_t offset = kEspMaxHeadroom;
    explicit TxBuffer(const Bytes& payload) : storage(kEspMaxHeadroom + payload.size() + kEspMaxTailroom, 0xee) {
        std::copy(payload.begin(), payload.end(), storage.begin() + static_cast<long>(offset));
    }
};

Bytes payload_of(std::size_t n, std::uint8_t seed = 0) {
    Bytes p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(seed + i * 13);
    return p;
}

Bytes seal_copy(EspOutboundSa& sa, const Bytes& payload, std::uint8_t nh = kEspNextHeaderIpv4) {
    TxBuffer b(payload);
    auto r = sa.seal(b.storage, b.offset, payload.size(), nh);
    REQUIRE(r.ok());
    return Bytes(r.packet.begin(), r.packet.end());
}

// ESP plaintext built by the test: payload | 1, 2, ... | pad length | next header.
Bytes esp_plaintext(const Bytes& payload, std::size_t block, std::uint8_t nh) {
    Bytes p = payload;
    std::size_t pad = (block - (payload.size() + 2) % block) % block;
    for (std::size_t i = 1; i <= pad; ++i) p.push_back(static_cast<std::uint8_t>(i));
    p.push_back(static_cast<std::uint8_t>(pad));
    p.push_back(nh);
    return p;
}

// Opens a copy; only the verdict is used (inner would point into the copy).
EspReceived open_copy(EspInboundSas& in, Bytes datagram) {
    EspReceived r = in.open(datagram);
    r.inner = {};
    return r;
}

}  // namespace

TEST_CASE("GCM ESP packet equals bytes built independently (GnuTLS one-shot AEAD)") {
    for (auto cipher : {EspCipher::aes128_gcm, EspCipher::aes256_gcm}) {
        EspSuite suite{cipher, EspIntegrity::none};
        auto keys = test_keys(suite, 9);
        auto sa = EspOutboundSa::create(kSpi, keys);
        REQUIRE(sa.ok());
        for (std::size_t n : {0, 1, 20, 61, 1400}) {
            const std::uint32_t seq = static_cast<std::uint32_t>(sa->next_sequence());
            Bytes payload = payload_of(n);
            Bytes packet = seal_copy(*sa, payload, kEspNextHeaderIpv6);

            auto k = keys.enc_key().reveal();
            const std::size_t klen = k.size() - 4;
            Bytes iv = concat({Bytes(4), be32(seq)});  // explicit IV = 64-bit counter
            Bytes nonce = concat({Bytes(k.begin() + static_cast<long>(klen), k.end()), iv});
            Bytes aad = concat({be32(kSpi), be32(seq)});
            Bytes plain = esp_plaintext(payload, 4, kEspNextHeaderIpv6);
            gnutls_aead_cipher_hd_t h;
            gnutls_datum_t kd{const_cast<std::uint8_t*>(k.data()), static_cast<unsigned>(klen)};
            REQUIRE(gnutls_aead_cipher_init(&h, cipher == EspCipher::aes128_gcm ? GNUTLS_CIPHER_AES_128_GCM
                                                                                 : GNUTLS_CIPHER_AES_256_GCM,
                                            &kd) == 0);
            Bytes ct(plain.size() + 16);
            std::size_t ct_len = ct.size();
            REQUIRE(gnutls_aead_cipher_encrypt(h, nonce.data(), nonce.size(), aad.data(), aad.size(), 16,
                                               plain.data(), plain.size(), ct.data(), &ct_len) == 0);
            gnutls_aead_cipher_deinit(h);
            CHECK(packet == concat({aad, iv, ct}));
        }
    }
}

TEST_CASE("CBC ESP packet equals bytes built independently for its IV") {
    for (const auto& suite : all_suites()) {
        if (suite.is_aead()) continue;
        CAPTURE(suite.name());
        auto keys = test_keys(suite, 3);
        auto sa = EspOutboundSa::create(kSpi, keys);
        REQUIRE(sa.ok());
        for (std::size_t n : {0, 14, 15, 16, 100, 1400}) {
            Bytes payload = payload_of(n, 5);
            Bytes packet = seal_copy(*sa, payload);
            Bytes iv(packet.begin() + 8, packet.begin() + 24);
            Bytes plain = esp_plaintext(payload, 16, kEspNextHeaderIpv4);

            auto k = keys.enc_key().reveal();
            gnutls_cipher_hd_t h;
            gnutls_datum_t kd{const_cast<std::uint8_t*>(k.data()), static_cast<unsigned>(k.size())};
            gnutls_datum_t ivd{iv.data(), 16};
            REQUIRE(gnutls_cipher_init(&h, suite.cipher == EspCipher::aes128_cbc ? GNUTLS_CIPHER_AES_128_CBC
                                                                                  : GNUTLS_CIPHER_AES_256_CBC,
                                       &kd, &ivd) == 0);
            Bytes ct(plain.size());
            REQUIRE(gnutls_cipher_encrypt2(h, plain.data(), plain.size(), ct.data(), ct.size()) == 0);
            gnutls_cipher_deinit(h);
            Bytes head = concat({be32(kSpi), packet.size() >= 8 ? Bytes(packet.begin() + 4, packet.begin() + 8) : Bytes{},
                                 iv, ct});
            Bytes akey(keys.auth_key().reveal().begin(), keys.auth_key().reveal().end());
            CHECK(packet == concat({head, reference_hmac(suite.integrity, akey, head, suite.icv_size())}));
        }
    }
}

TEST_CASE("seal_batch: every suite, batches of 0..70 mixed sizes, refusals inside, same packets as seal") {
    for (const auto& suite : all_suites()) {
        CAPTURE(suite.name());
        auto keys = test_keys(suite, 6);
        auto out = EspOutboundSa::create(kSpi, keys);
        REQUIRE(out.ok());
        auto sealer = EspSealer::create(keys);  // the reference: one packet at a time, the batch's IV
        REQUIRE(sealer.ok());
        EspInboundSas in;
        in.install(EspInboundSa::create(kSpi, keys).value());
        std::uint32_t expected_seq = 1;
        for (std::size_t count : {0u, 1u, 5u, 16u, 17u, 33u, 70u}) {
            CAPTURE(count);
            std::vector<Bytes> payloads;
            std::vector<TxBuffer> buffers;
            std::vector<EspOutboundSa::Item> items;
            for (std::size_t i = 0; i < count; ++i) {
                // TSO-like runs of equal sizes, odd sizes between them, the largest a tun reads.
                const std::size_t n = i % 7 == 3 ? 9000 : i % 5 == 1 ? 1 + i * 37 : 1388;
                payloads.push_back(payload_of(n, static_cast<std::uint8_t>(i)));
                buffers.emplace_back(payloads.back());
            }
            for (std::size_t i = 0; i < count; ++i) {
                TxBuffer& b = buffers[i];
                // Every 9th packet has no headroom: refused, and it takes no sequence number.
                const std::size_t offset = i % 9 == 4 ? suite.header_size() - 1 : b.offset;
                items.push_back({b.storage, offset, payloads[i].size(), kEspNextHeaderIpv4, {}});
            }
            out->seal_batch(items);
            for (std::size_t i = 0; i < count; ++i) {
                CAPTURE(i);
                const EspSealResult& r = items[i].result;
                if (i % 9 == 4) {
                    CHECK(r.status == EspSealStatus::no_headroom);
                    continue;
                }
                REQUIRE(r.ok());
                Bytes packet(r.packet.begin(), r.packet.end());
                // The same bytes sealed alone with this packet's IV.
                TxBuffer ref(payloads[i]);
                std::span<std::uint8_t> ref_packet(ref.storage.data() + ref.offset - suite.header_size(),
                                                   suite.packet_size(payloads[i].size()));
                std::copy(packet.begin(), packet.begin() + static_cast<long>(suite.header_size()), ref_packet.begin());
                const std::size_t text = suite.header_size() + payloads[i].size();
                const std::size_t plain_end = ref_packet.size() - suite.icv_size();
                Bytes plain = esp_plaintext(payloads[i], suite.block_size(), kEspNextHeaderIpv4);
                std::copy(plain.begin() + static_cast<long>(payloads[i].size()), plain.end(),
                          ref_packet.begin() + static_cast<long>(text));
                REQUIRE(text + plain.size() - payloads[i].size() == plain_end);
                REQUIRE(sealer->seal_with_iv(ref_packet, {packet.data() + 8, suite.iv_size()}));
                CHECK(packet == Bytes(ref_packet.begin(), ref_packet.end()));
                EspReceived got = in.open(r.packet);
                REQUIRE(got.ok());
                CHECK(got.seq == expected_seq++);
                CHECK(Bytes(got.inner.begin(), got.inner.end()) == payloads[i]);
            }
        }
        CHECK(out->next_sequence() == expected_seq);
    }
}

TEST_CASE("round trip, every suite, payload sizes 0..9000, in place") {
    for (const auto& suite : all_suites()) {
        CAPTURE(suite.name());
        auto keys = test_keys(suite, 4);
        auto out = EspOutboundSa::create(kSpi, keys);
        REQUIRE(out.ok());
        EspInboundSas in;
        in.install(EspInboundSa::create(kSpi, keys).value());
        std::uint32_t expected_seq = 1;
        for (std::size_t n = 0; n <= 9000; n += (n < 70 ? 1 : 97)) {
            CAPTURE(n);
            Bytes payload = payload_of(n, static_cast<std::uint8_t>(n));
            TxBuffer b(payload);
            const std::uint8_t nh = n % 2 ? kEspNextHeaderIpv4 : kEspNextHeaderIpv6;
            auto sealed = out->seal(b.storage, b.offset, n, nh);
            REQUIRE(sealed.ok());
            CHECK(sealed.packet.size() == suite.packet_size(n));
            CHECK(sealed.packet.data() == b.storage.data() + b.offset - suite.header_size());
            EspReceived got = in.open(sealed.packet);
            REQUIRE(got.ok());
            CHECK(got.seq == expected_seq++);
            CHECK(got.spi == kSpi);
            CHECK(got.next_header == nh);
            CHECK(got.inner.data() == b.storage.data() + b.offset);  // decrypted where it lies
            CHECK(Bytes(got.inner.begin(), got.inner.end()) == payload);
        }
    }
}

TEST_CASE("seal refusals: headroom, tailroom, sequence exhaustion and rekey signal") {
    EspSuite suite{EspCipher::aes128_cbc, EspIntegrity::hmac_sha256_128};
    auto keys = test_keys(suite);
    auto sa = EspOutboundSa::create(kSpi, keys);
    REQUIRE(sa.ok());
    CHECK(sa->next_sequence() == 1);
    Bytes buf(2000);
    CHECK(sa->seal(buf, 23, 100, 4).status == EspSealStatus::no_headroom);
    const std::size_t n = 1900;
    Bytes exact(suite.packet_size(n));  // header right at the start, nothing spare
    CHECK(sa->seal(exact, 24, n, 4).ok());
    Bytes one_short(exact.size() - 1);
    CHECK(sa->seal(one_short, 24, n, 4).status == EspSealStatus::no_tailroom);
    CHECK(sa->seal(buf, 3000, 0, 4).status == EspSealStatus::no_tailroom);
    CHECK(!describe(EspSealStatus::no_tailroom).empty());

    auto near_end = EspOutboundSa::create(kSpi, keys, kEspRekeySequence - 1);
    REQUIRE(near_end.ok());
    CHECK(!near_end->needs_rekey());
    CHECK(near_end->seal(buf, 24, 100, 4).ok());
    CHECK(near_end->needs_rekey());

    auto last = EspOutboundSa::create(kSpi, keys, 0xFFFFFFFFu);
    REQUIRE(last.ok());
    auto r = last->seal(buf, 24, 100, 4);
    REQUIRE(r.ok());
    CHECK(Bytes(r.packet.begin() + 4, r.packet.begin() + 8) == hex("ffffffff"));
    CHECK(last->seal(buf, 24, 100, 4).status == EspSealStatus::sequence_exhausted);
    CHECK(last->seal(buf, 24, 100, 4).status == EspSealStatus::sequence_exhausted);  // stays refused
}

namespace {

// An authentic packet (valid ICV) whose ESP plaintext the test writes by hand.
Bytes authentic_packet(const EspSaKeys& keys, std::uint32_t seq, const Bytes& plaintext, std::uint32_t spi = kSpi) {
    const EspSuite& s = keys.suite();
    auto sealer = EspSealer::create(keys);
    REQUIRE(sealer.ok());
    Bytes p = concat({be32(spi), be32(seq), Bytes(s.iv_size()), plaintext, Bytes(s.icv_size())});
    REQUIRE(sealer->seal(p, seq));
    return p;
}

}  // namespace

TEST_CASE("every rejection reason, with the window moved only by authentic packets") {
    for (const auto& suite : all_suites()) {
        CAPTURE(suite.name());
        auto keys = test_keys(suite, 7);
        auto out = EspOutboundSa::create(kSpi, keys);
        EspInboundSas in;
        in.install(EspInboundSa::create(kSpi, keys).value());
        const std::size_t bs = suite.block_size();

        Bytes tiny(suite.header_size() + bs + suite.icv_size() - 1, 0);
        std::copy_n(be32(kSpi).begin(), 4, tiny.begin());
        CHECK(in.open(tiny).drop == EspDrop::short_packet);
        Bytes four(4, 1);
        CHECK(in.open(four).drop == EspDrop::short_packet);

        Bytes good = seal_copy(*out, payload_of(40));  // seq 1
        Bytes unaligned = good;
        unaligned.insert(unaligned.begin() + 30, 0);
        CHECK(in.open(unaligned).drop == EspDrop::bad_length);

        Bytes other_spi = good;
        other_spi[0] ^= 0xff;
        CHECK(in.open(other_spi).drop == EspDrop::unknown_spi);

        // A forged packet far ahead: rejected, and the window does not move.
        Bytes forged = seal_copy(*out, payload_of(40));  // seq 2
        forged[5] = 0x7f;                                // seq 0x7f000002
        CHECK(in.open(forged).drop == EspDrop::bad_icv);
        CHECK(in.current()->replay_window().empty());

        Bytes copy = good;
        CHECK(in.open(copy).ok());
        CHECK(in.current()->replay_window().highest() == 1);
        copy = good;
        CHECK(in.open(copy).drop == EspDrop::replayed);
        Bytes forged_replay = good;
        forged_replay.back() ^= 1;
        CHECK(in.open(forged_replay).drop == EspDrop::replayed);  // replay check comes first

        // Authentic but malformed trailers.
        Bytes bad_pad_bytes = esp_plaintext(payload_of(7), bs, 4);
        if (bad_pad_bytes.size() >= 4 && bad_pad_bytes[bad_pad_bytes.size() - 2] > 0) {
            bad_pad_bytes[bad_pad_bytes.size() - 3] ^= 0x40;
            CHECK(open_copy(in, authentic_packet(keys, 10, bad_pad_bytes)).drop == EspDrop::bad_padding);
        }
        Bytes pad_too_long(bs * 2, 0);
        pad_too_long[pad_too_long.size() - 2] = static_cast<std::uint8_t>(bs * 2 - 1);
        pad_too_long[pad_too_long.size() - 1] = 4;
        CHECK(open_copy(in, authentic_packet(keys, 11, pad_too_long)).drop == EspDrop::bad_padding);
        CHECK(open_copy(in, authentic_packet(keys, 12, esp_plaintext(payload_of(9), bs, 5))).drop ==
              EspDrop::bad_next_header);
        CHECK(open_copy(in, authentic_packet(keys, 13, esp_plaintext(payload_of(9), bs, 59))).drop ==
              EspDrop::bad_next_header);
        // Authentic packets use up their numbers even when malformed.
        CHECK(open_copy(in, authentic_packet(keys, 12, esp_plaintext(payload_of(9), bs, 4))).drop == EspDrop::replayed);
        CHECK(open_copy(in, authentic_packet(keys, 14, esp_plaintext(payload_of(9), bs, 4))).ok());

        CHECK(open_copy(in, authentic_packet(keys, 5000, esp_plaintext(payload_of(9), bs, 41))).ok());
        CHECK(open_copy(in, authentic_packet(keys, 2, esp_plaintext(payload_of(9), bs, 41))).drop == EspDrop::too_old);
    }
    for (std::size_t i = 0; i < kEspDropReasons; ++i) CHECK(!describe(static_cast<EspDrop>(i)).empty());
}

TEST_CASE("inbound SAs across a rekey: current and previous by SPI") {
    EspSuite suite{EspCipher::aes256_gcm, EspIntegrity::none};
    auto k1 = test_keys(suite, 1), k2 = test_keys(suite, 2), k3 = test_keys(suite, 3);
    auto o1 = EspOutboundSa::create(0x100, k1), o2 = EspOutboundSa::create(0x200, k2),
         o3 = EspOutboundSa::create(0x300, k3);
    EspInboundSas in;
    Bytes p1 = seal_copy(*o1, payload_of(30));
    CHECK(in.open(p1).drop == EspDrop::unknown_spi);
    in.install(EspInboundSa::create(0x100, k1).value());
    CHECK(in.open(p1).ok());
    in.install(EspInboundSa::create(0x200, k2).value());
    CHECK(in.current()->spi() == 0x200);
    CHECK(in.previous()->spi() == 0x100);
    Bytes p2 = seal_copy(*o2, payload_of(30));
    CHECK(in.open(p2).ok());
    Bytes late_old = seal_copy(*o1, payload_of(30));
    CHECK(in.open(late_old).ok());  // the old SA still works during the overlap
    in.install(EspInboundSa::create(0x300, k3).value());
    Bytes later_old = seal_copy(*o1, payload_of(30));
    CHECK(in.open(later_old).drop == EspDrop::unknown_spi);
    CHECK(open_copy(in, seal_copy(*o2, payload_of(30))).ok());
    in.retire_previous();
    CHECK(in.previous() == nullptr);
    CHECK(open_copy(in, seal_copy(*o2, payload_of(30))).drop == EspDrop::unknown_spi);
    CHECK(open_copy(in, seal_copy(*o3, payload_of(30))).ok());
    // Same SPI, wrong key: an ICV failure, not a crash.
    auto wrong = EspOutboundSa::create(0x300, k1, 100);
    CHECK(open_copy(in, seal_copy(*wrong, payload_of(30))).drop == EspDrop::bad_icv);
}

TEST_CASE("open_batch: the same verdicts, sequence numbers and inner packets as open() one at a time") {
    // Both HMAC-SHA1 and -SHA256 paths: packets side by side (lanes) and one at a time (GnuTLS).
    for (const char* lanes : {"1", "0"}) {
        REQUIRE(setenv("ESPVPN_SHA1_LANES", lanes, 1) == 0);
        REQUIRE(setenv("ESPVPN_SHA256_LANES", lanes, 1) == 0);
        for (const auto& suite : all_suites()) {
            CAPTURE(lanes);
            CAPTURE(suite.name());
            const std::size_t bs = suite.block_size();
            auto ka = test_keys(suite, 21), kb = test_keys(suite, 22);
            auto oa = EspOutboundSa::create(0xA0, ka), ob = EspOutboundSa::create(0xB0, kb);
            REQUIRE(oa.ok());
            REQUIRE(ob.ok());
            // The datagrams: runs of two SAs (previous and current), and inside them every way
            // a packet can fail, some only because of a packet before it in the same batch.
            std::vector<Bytes> datagrams;
            for (int i = 0; i < 20; ++i) datagrams.push_back(seal_copy(*ob, payload_of(1388, static_cast<std::uint8_t>(i))));
            datagrams.push_back(datagrams[3]);                      // a replay inside the batch
            for (int i = 0; i < 3; ++i) datagrams.push_back(seal_copy(*oa, payload_of(100 + i)));
            Bytes forged = seal_copy(*ob, payload_of(300));
            forged[forged.size() - 1] ^= 1;
            datagrams.push_back(forged);                            // bad ICV
            datagrams.push_back(Bytes(suite.header_size() + bs + suite.icv_size() - 1, 0));
            std::copy_n(be32(0xB0).begin(), 4, datagrams.back().begin());  // too short
            datagrams.push_back(Bytes(3, 0xB0));                    // no SPI
            Bytes unaligned = seal_copy(*ob, payload_of(64));
            unaligned.insert(unaligned.begin() + 30, 0);
            datagrams.push_back(unaligned);                         // bad length
            Bytes stranger = seal_copy(*ob, payload_of(64));
            stranger[0] ^= 0xff;
            datagrams.push_back(stranger);                          // unknown SPI
            datagrams.push_back(authentic_packet(kb, 5000, esp_plaintext(payload_of(50), bs, 41), 0xB0));  // far ahead
            datagrams.push_back(datagrams[5]);                      // now behind the window: too old
            Bytes forged_old = datagrams[6];
            forged_old[forged_old.size() - 1] ^= 1;
            datagrams.push_back(forged_old);                        // too old (checked before its ICV)
            Bytes bad_pad = esp_plaintext(payload_of(7), bs, 4);
            if (bad_pad[bad_pad.size() - 2] > 0) bad_pad[bad_pad.size() - 3] ^= 0x40;
            datagrams.push_back(authentic_packet(kb, 5001, bad_pad, 0xB0));
            datagrams.push_back(authentic_packet(kb, 5002, esp_plaintext(payload_of(9), bs, 59), 0xB0));
            for (int i = 0; i < 30; ++i) datagrams.push_back(authentic_packet(kb, 5003 + i, esp_plaintext(payload_of(900 + i), bs, 4), 0xB0));
            datagrams.push_back(datagrams.back());                  // a replay across a chunk boundary
            for (int i = 0; i < 3; ++i) datagrams.push_back(seal_copy(*oa, payload_of(200 + i)));

            for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, datagrams.size()}) {
                CAPTURE(count);
                EspInboundSas one, batch;
                for (EspInboundSas* in : {&one, &batch}) {
                    in->install(EspInboundSa::create(0xA0, ka).value());
                    in->install(EspInboundSa::create(0xB0, kb).value());
                }
                std::vector<Bytes> copies(datagrams.begin(), datagrams.begin() + static_cast<long>(count));
                std::vector<EspOpenItem> items;
                for (Bytes& d : copies) items.push_back({d, {}});
                batch.open_batch(items);
                std::size_t accepted = 0;
                for (std::size_t i = 0; i < count; ++i) {
                    CAPTURE(i);
                    Bytes alone = datagrams[i];
                    const EspReceived want = one.open(alone);
                    const EspReceived& got = items[i].result;
                    CHECK(got.drop == want.drop);
                    CHECK(got.spi == want.spi);
                    CHECK(got.seq == want.seq);
                    CHECK(got.next_header == want.next_header);
                    CHECK(Bytes(got.inner.begin(), got.inner.end()) == Bytes(want.inner.begin(), want.inner.end()));
                    accepted += got.ok();
                }
                if (count == datagrams.size()) CHECK(accepted == 20 + 3 + 1 + 30 + 3);
            }
        }
    }
    REQUIRE(unsetenv("ESPVPN_SHA1_LANES") == 0);
    REQUIRE(unsetenv("ESPVPN_SHA256_LANES") == 0);
}
