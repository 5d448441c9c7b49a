#include "protocols/anyconnect/strap.h"

#include <nettle/base64.h>

#include <array>
#include <cctype>
#include <string>
#include <vector>

#include "protocols/http/form.h"

namespace espvpn::anyconnect {

namespace {

std::optional<std::vector<std::uint8_t>> base64_bytes(std::string text) {
    for (char& c : text) {
        if (c == '-') c = '+';
        else if (c == '_') c = '/';
    }
    while (text.size() % 4) text += '=';
    std::vector<std::uint8_t> out(BASE64_DECODE_LENGTH(text.size()));
    base64_decode_ctx ctx;
    base64_decode_init(&ctx);
    std::size_t n = out.size();
    if (!base64_decode_update(&ctx, &n, out.data(), text.size(), text.data()) || !base64_decode_final(&ctx))
        return std::nullopt;
    out.resize(n);
    return out;
}

}  // namespace

Result<std::optional<Secret>> open_strap_token(const crypto::EciesP256Key& key, std::string_view received) {
    std::string_view blob_text = received;
    if (auto at = blob_text.find("/api/sso/"); at != std::string_view::npos) blob_text.remove_prefix(at + 9);
    blob_text = blob_text.substr(0, blob_text.find_first_of("?#"));
    std::string decoded(blob_text);
    if (blob_text.find('%') != std::string_view::npos) {
        auto d = http::percent_decode(blob_text);
        if (!d) return std::optional<Secret>();
        decoded = std::move(*d);
    }
    auto bytes = base64_bytes(decoded);
    if (!bytes || bytes->size() < 2 || (*bytes)[0] != 0 || (*bytes)[1] != 1) return std::optional<Secret>();

    std::array<std::span<const std::uint8_t>, 5> tlv{};
    std::array<bool, 5> seen{};
    const std::vector<std::uint8_t>& b = *bytes;
    std::size_t pos = 2;
    while (pos < b.size()) {
        if (pos + 4 > b.size()) return make_error("the STRAP token is cut short");
        unsigned tag = (b[pos] << 8) | b[pos + 1];
        std::size_t len = (b[pos + 2] << 8) | b[pos + 3];
        if (tag < 1 || tag > 4 || seen[tag] || pos + 4 + len > b.size())
            return make_error("the STRAP token has a bad element (tag " + std::to_string(tag) + ")");
        seen[tag] = true;
        tlv[tag] = std::span<const std::uint8_t>(b.data() + pos + 4, len);
        pos += 4 + len;
    }
    if (!seen[1] || !seen[2] || !seen[3] || !seen[4] || tlv[2].size() != 12 || tlv[4].size() != 12)
        return make_error("the STRAP token lacks its key, tag, ciphertext or IV");
    auto plain = key.open(tlv[1], tlv[4], tlv[2], tlv[3]);
    if (!plain) return make_error("the STRAP token: " + plain.error().message);
    if (plain->empty()) return make_error("the STRAP token is empty");
    for (std::uint8_t c : plain->reveal())
        if (!std::isalnum(c)) return make_error("the STRAP token is not alphanumeric");
    return std::optional<Secret>(std::move(*plain));
}

}  // namespace espvpn::anyconnect
