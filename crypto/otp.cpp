#include "crypto/otp.h"

#include <nettle/hmac.h>

#include <cctype>
#include <span>
#include <string>
#include <vector>

#include "protocols/base/ascii.h"
#include "protocols/base/hex.h"
namespace espvpn {

namespace {

// One HMAC over Nettle's per-hash functions; the context is zeroed afterwards.
template <class Ctx>
std::size_t hmac_once(void (*set_key)(Ctx*, std::size_t, const std::uint8_t*),
                        void (*update)(Ctx*, std::size_t, const std::uint8_t*),
                        void (*digest)(Ctx*, std::size_t, std::uint8_t*), std::size_t digest_size,
                        std::span<const std::uint8_t> key, std::span<const std::uint8_t> msg, std::uint8_t* out) {
    Ctx ctx;
    set_key(&ctx, key.size(), key.data());
    update(&ctx, msg.size(), msg.data());
    digest(&ctx, digest_size, out);
    secure_zero(&ctx, sizeof ctx);
    return digest_size;
}

// HMAC(key, 8-byte big-endian counter) into `out` (64 bytes of room); its length.
std::size_t hmac_counter(const Secret& key, OtpHash hash, std::uint64_t counter, std::uint8_t* out) {
    std::uint8_t msg[8];
    for (int i = 7; i >= 0; --i) {
        msg[i] = static_cast<std::uint8_t>(counter & 0xff);
        counter >>= 8;
    }
    const auto k = key.reveal();
    switch (hash) {
        case OtpHash::sha1:
            return hmac_once(hmac_sha1_set_key, hmac_sha1_update, hmac_sha1_digest, SHA1_DIGEST_SIZE, k, msg, out);
        case OtpHash::sha256:
            return hmac_once(hmac_sha256_set_key, hmac_sha256_update, hmac_sha256_digest, SHA256_DIGEST_SIZE, k,
                             msg, out);
        case OtpHash::sha512:
            return hmac_once(hmac_sha512_set_key, hmac_sha512_update, hmac_sha512_digest, SHA512_DIGEST_SIZE, k,
                             msg, out);
    }
    return 0;
}

int base32_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= '2' && c <= '7') return c - '2' + 26;
    return -1;
}

// RFC 4648 base32, either case; '=' padding optional (openconnect wants it; authenticator
// apps often drop it). A final group must hold whole bytes (2, 4, 5 or 7 characters).
Result<Secret> decode_base32(std::string_view text) {
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    static constexpr std::size_t kValidTail[] = {0, 2, 4, 5, 7};  // chars in a final group
    bool tail_ok = false;
    for (std::size_t t : kValidTail) tail_ok |= text.size() % 8 == t;
    if (text.empty() || !tail_ok) return make_error("not valid base32 (wrong length)");
    std::vector<std::uint8_t> out;
    out.reserve(text.size() * 5 / 8);
    std::uint32_t acc = 0;
    int bits = 0;
    for (char c : text) {
        int v = base32_value(c);
        if (v < 0) {
            secure_zero(out.data(), out.size());
            return make_error("not valid base32 (a character outside A-Z, 2-7)");
        }
        acc = (acc << 5) | static_cast<std::uint32_t>(v);
        bits += 5;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<std::uint8_t>(acc >> bits));
            acc &= (1u << bits) - 1;
        }
    }
    Secret key(std::span<const std::uint8_t>(out.data(), out.size()));
    secure_zero(out.data(), out.size());
    return key;
}

void append_base32(std::string& out, std::span<const std::uint8_t> bytes) {
    static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    std::uint32_t acc = 0;
    int bits = 0;
    std::size_t chars = 0;
    for (std::uint8_t b : bytes) {
        acc = (acc << 8) | b;
        bits += 8;
        while (bits >= 5) {
            bits -= 5;
            out += kAlphabet[(acc >> bits) & 31];
            ++chars;
        }
        acc &= (1u << bits) - 1;
    }
    if (bits > 0) {
        out += kAlphabet[(acc << (5 - bits)) & 31];
        ++chars;
    }
    while (chars % 8) {
        out += '=';
        ++chars;
    }
}

}  // namespace

Secret hotp_code(const Secret& key, OtpHash hash, std::uint64_t counter, int digits) {
    std::uint8_t mac[64];
    const std::size_t n = hmac_counter(key, hash, counter, mac);
    const unsigned offset = mac[n - 1] & 0x0f;  // RFC 4226 5.3 (RFC 6238 keeps it for SHA-2)
    std::uint32_t bin = (static_cast<std::uint32_t>(mac[offset] & 0x7f) << 24) |
                        (static_cast<std::uint32_t>(mac[offset + 1]) << 16) |
                        (static_cast<std::uint32_t>(mac[offset + 2]) << 8) | mac[offset + 3];
    secure_zero(mac, sizeof mac);
    if (digits < 6) digits = 6;
    if (digits > 9) digits = 9;
    std::uint32_t mod = 1;
    for (int i = 0; i < digits; ++i) mod *= 10;
    bin %= mod;
    Secret code(static_cast<std::size_t>(digits));
    auto out = code.reveal_mutable();
    for (int i = digits - 1; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>('0' + bin % 10);
        bin /= 10;
    }
    return code;
}

Secret totp_code(const Secret& key, OtpHash hash, std::int64_t unix_time, int step, int digits) {
    if (step <= 0) step = 30;
    const std::int64_t t = unix_time < 0 ? 0 : unix_time / step;
    return hotp_code(key, hash, static_cast<std::uint64_t>(t), digits);
}

Result<OtpSecret> parse_otp_secret(std::string_view text, bool hotp) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    OtpSecret s;
    if (istarts_with(text, "sha1:")) {
        text.remove_prefix(5);
    } else if (istarts_with(text, "sha256:")) {
        s.hash = OtpHash::sha256;
        text.remove_prefix(7);
    } else if (istarts_with(text, "sha512:")) {
        s.hash = OtpHash::sha512;
        text.remove_prefix(7);
    }
    if (hotp) {
        if (auto comma = text.rfind(','); comma != std::string_view::npos) {
            std::string_view n = text.substr(comma + 1);
            while (!n.empty() && std::isspace(static_cast<unsigned char>(n.back()))) n.remove_suffix(1);
            while (!n.empty() && std::isspace(static_cast<unsigned char>(n.front()))) n.remove_prefix(1);
            std::uint64_t counter = 0;
            if (n.empty() || n.size() > 19) return make_error("the HOTP counter after ',' is not a number");
            for (char c : n) {
                if (c < '0' || c > '9') return make_error("the HOTP counter after ',' is not a number");
                counter = counter * 10 + static_cast<std::uint64_t>(c - '0');
            }
            s.counter = counter;
            text = text.substr(0, comma);
            while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
        }
    }
    if (istarts_with(text, "base32:")) {
        s.format = OtpSecret::Format::base32;
        auto key = decode_base32(text.substr(7));
        if (!key) return make_error("the token secret is " + key.error().message);
        s.key = std::move(*key);
    } else if (text.substr(0, 2) == "0x") {
        s.format = OtpSecret::Format::hex;
        std::string_view hex = text.substr(2);
        std::string padded;
        if (hex.size() % 2) padded = "0";  // openconnect reads an odd first nibble alone
        padded += hex;
        auto key = Secret::from_hex(padded);
        secure_zero(padded.data(), padded.size());
        if (!key || hex.empty()) return make_error("the token secret after 0x is not hexadecimal");
        s.key = std::move(*key);
    } else {
        s.key = Secret::from_string(text);
    }
    if (s.key.empty()) return make_error("the token secret is empty");
    return s;
}

Secret format_otp_secret(const OtpSecret& secret) {
    std::string out;
    out.reserve(16 + 2 * secret.key.size() + 24);
    if (secret.hash == OtpHash::sha256) out += "sha256:";
    else if (secret.hash == OtpHash::sha512) out += "sha512:";
    switch (secret.format) {
        case OtpSecret::Format::base32: {
            out += "base32:";
            append_base32(out, secret.key.reveal());
            break;
        }
        case OtpSecret::Format::hex:
            out += "0x";
            append_hex(out, secret.key.reveal());  // `out` has room reserved: no copy left unzeroed
            break;
        case OtpSecret::Format::raw: out += secret.key.reveal_text(); break;
    }
    out += "," + std::to_string(secret.counter);
    Secret result = Secret::from_string(out);
    secure_zero(out.data(), out.size());
    return result;
}

}  // namespace espvpn
