#include "protocols/proxy/ntlm.h"

#include <locale.h>
#include <nettle/base64.h>
#include <nettle/hmac.h>
#include <nettle/md4.h>
#include <wctype.h>

#include <algorithm>

#include "protocols/http/secret_buffer.h"

namespace espvpn::proxy::ntlm {

namespace {

constexpr std::uint8_t kSignature[8] = {'N', 'T', 'L', 'M', 'S', 'S', 'P', 0};
constexpr std::uint32_t kUnicode = 0x00000001;
constexpr std::uint32_t kOem = 0x00000002;
constexpr std::uint32_t kRequestTarget = 0x00000004;
constexpr std::uint32_t kNtlm = 0x00000200;
constexpr std::uint32_t kAlwaysSign = 0x00008000;
constexpr std::uint32_t kExtendedSessionSecurity = 0x00080000;
constexpr std::uint32_t kTargetInfo = 0x00800000;
constexpr std::uint32_t k128 = 0x20000000;
constexpr std::uint32_t k56 = 0x80000000;
constexpr std::uint16_t kAvEol = 0x0000;
constexpr std::uint16_t kAvTimestamp = 0x0007;
constexpr std::size_t kAuthenticateHeader = 64;  // no Version, no MIC
constexpr std::size_t kMaxToken = 64 * 1024;

std::uint16_t le16(std::span<const std::uint8_t> b, std::size_t at) {
    return static_cast<std::uint16_t>(b[at] | (b[at + 1] << 8));
}
std::uint32_t le32(std::span<const std::uint8_t> b, std::size_t at) {
    return static_cast<std::uint32_t>(b[at]) | (static_cast<std::uint32_t>(b[at + 1]) << 8) |
           (static_cast<std::uint32_t>(b[at + 2]) << 16) | (static_cast<std::uint32_t>(b[at + 3]) << 24);
}
void put16(std::span<std::uint8_t> b, std::size_t at, std::uint32_t v) {
    b[at] = static_cast<std::uint8_t>(v);
    b[at + 1] = static_cast<std::uint8_t>(v >> 8);
}
void put32(std::span<std::uint8_t> b, std::size_t at, std::uint32_t v) {
    put16(b, at, v);
    put16(b, at + 2, v >> 16);
}

// UTF-8 -> code points; nullopt for malformed input.
std::optional<std::u32string> decode_utf8(std::string_view s) {
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return std::nullopt;
        char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
        for (std::size_t k = 1; k < n; ++k) {
            const auto d = static_cast<unsigned char>(s[i + k]);
            if ((d >> 6) != 2) return std::nullopt;
            cp = (cp << 6) | (d & 0x3f);
        }
        static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return std::nullopt;
        out.push_back(cp);
        i += n;
    }
    return out;
}

void append_utf16le(http::SecretBuffer& out, const std::u32string& text) {
    for (char32_t cp : text) {
        auto unit = [&out](std::uint32_t u) {
            const std::uint8_t b[2] = {static_cast<std::uint8_t>(u), static_cast<std::uint8_t>(u >> 8)};
            out.append(b);
        };
        if (cp >= 0x10000) {
            unit(0xd800 + ((cp - 0x10000) >> 10));
            unit(0xdc00 + ((cp - 0x10000) & 0x3ff));
        } else {
            unit(cp);
        }
    }
}

Result<Secret> utf16le(std::string_view utf8, std::string_view what) {
    auto cps = decode_utf8(utf8);
    if (!cps) return make_error("the NTLM " + std::string(what) + " is not valid UTF-8");
    http::SecretBuffer out;
    append_utf16le(out, *cps);
    std::fill(cps->begin(), cps->end(), U'\0');
    return out.take_secret();
}

// Windows upper-cases the user name by Unicode case mapping; C.UTF-8's towupper is that.
char32_t to_upper(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    return utf8 ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(cp), utf8)) : cp;
}

std::optional<std::string> decode_utf16le(std::span<const std::uint8_t> b) {
    if (b.size() % 2) return std::nullopt;
    std::string out;
    for (std::size_t i = 0; i < b.size(); i += 2) {
        char32_t cp = le16(b, i);
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (i + 4 > b.size()) return std::nullopt;
            const char32_t low = le16(b, i + 2);
            if (low < 0xdc00 || low > 0xdfff) return std::nullopt;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            i += 2;
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return std::nullopt;
        }
        if (cp == 0) return std::nullopt;
        if (cp < 0x80) {
            out.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
            out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else if (cp < 0x10000) {
            out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        } else {
            out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
            out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        }
    }
    return out;
}

// A security buffer (len, maxlen, offset) at `at`: the bytes it names, or nullopt when
// they are not inside the message.
std::optional<std::span<const std::uint8_t>> field(std::span<const std::uint8_t> m, std::size_t at) {
    const std::size_t len = le16(m, at);
    const std::size_t offset = le32(m, at + 4);
    if (len == 0) return std::span<const std::uint8_t>{};
    if (offset > m.size() || len > m.size() - offset) return std::nullopt;
    return m.subspan(offset, len);
}

std::array<std::uint8_t, 16> hmac_md5(std::span<const std::uint8_t> key,
                                      std::initializer_list<std::span<const std::uint8_t>> parts) {
    hmac_md5_ctx ctx;
    hmac_md5_set_key(&ctx, key.size(), key.data());
    for (auto p : parts) hmac_md5_update(&ctx, p.size(), p.data());
    std::array<std::uint8_t, 16> out{};
    hmac_md5_digest(&ctx, out.size(), out.data());
    secure_zero(&ctx, sizeof ctx);
    return out;
}

}  // namespace

Bytes negotiate_message() {
    Bytes m(32, 0);
    std::copy(std::begin(kSignature), std::end(kSignature), m.begin());
    put32(m, 8, 1);
    put32(m, 12, kUnicode | kOem | kRequestTarget | kNtlm | kAlwaysSign | kExtendedSessionSecurity | k128 | k56);
    // Domain and workstation fields stay empty (offset 32: the end of the message).
    put32(m, 20, 32);
    put32(m, 28, 32);
    return m;
}

Result<Challenge> parse_challenge(std::span<const std::uint8_t> m) {
    if (m.size() < 32) return make_error("the proxy's NTLM challenge is too short (" + std::to_string(m.size()) + " bytes)");
    if (!std::equal(std::begin(kSignature), std::end(kSignature), m.begin()))
        return make_error("the proxy's NTLM token is not an NTLMSSP message");
    if (le32(m, 8) != 2)
        return make_error("the proxy's NTLM token is message type " + std::to_string(le32(m, 8)) + ", not a challenge (2)");
    Challenge c;
    c.flags = le32(m, 20);
    std::copy_n(m.begin() + 24, 8, c.server_challenge.begin());
    if (!(c.flags & kUnicode))
        return make_error("the proxy's NTLM challenge does not offer Unicode (OEM strings are not supported)");
    if (auto name = field(m, 12)) {
        if (auto text = decode_utf16le(*name)) c.target_name = std::move(*text);
    }
    // TargetInfoFields exist when the payload starts at or after byte 48 (older
    // challenges end at 32 or 40; squid's fake helper sends 40 and no target info).
    if (m.size() >= 48 && (c.flags & kTargetInfo)) {
        auto info = field(m, 40);
        if (!info) return make_error("the proxy's NTLM challenge has a target info outside the message");
        // The AV_PAIR list: each pair inside, ending with MsvAvEOL.
        std::size_t at = 0;
        bool ended = false;
        while (at + 4 <= info->size()) {
            const std::uint16_t id = le16(*info, at);
            const std::size_t len = le16(*info, at + 2);
            if (len > info->size() - at - 4) return make_error("the proxy's NTLM target info has a pair longer than itself");
            if (id == kAvEol) {
                ended = true;
                break;
            }
            if (id == kAvTimestamp) {
                if (len != 8) return make_error("the proxy's NTLM timestamp is not 8 bytes");
                c.timestamp = static_cast<std::uint64_t>(le32(*info, at + 4)) |
                              (static_cast<std::uint64_t>(le32(*info, at + 8)) << 32);
            }
            at += 4 + len;
        }
        if (!ended) return make_error("the proxy's NTLM target info does not end with MsvAvEOL");
        c.target_info.assign(info->begin(), info->end());
    }
    return c;
}

Result<Identity> split_user(std::string_view user, const Challenge& challenge) {
    if (user.empty()) return make_error("NTLM needs a user name: give --proxy http://DOMAIN%5Cuser:PASS@host:port/");
    if (auto slash = user.find('\\'); slash != std::string_view::npos) {
        if (slash + 1 == user.size()) return make_error("the NTLM user '" + std::string(user) + "' names no user after the domain");
        return Identity{std::string(user.substr(slash + 1)), std::string(user.substr(0, slash))};
    }
    if (user.find('@') != std::string_view::npos) return Identity{std::string(user), ""};
    if (!challenge.target_name)
        return make_error("the proxy's NTLM challenge names no usable domain: give the user as DOMAIN\\user "
                          "(%5C in the URL) or user@domain");
    return Identity{std::string(user), *challenge.target_name};
}

Result<Secret> ntowfv2(const Secret& password, std::string_view user, std::string_view domain) {
    auto pass16 = utf16le(password.reveal_text(), "password");
    if (!pass16) return pass16.error();
    md4_ctx md4;
    md4_init(&md4);
    md4_update(&md4, pass16->size(), pass16->reveal().data());
    Secret nt_hash(MD4_DIGEST_SIZE);
    md4_digest(&md4, MD4_DIGEST_SIZE, nt_hash.reveal_mutable().data());
    secure_zero(&md4, sizeof md4);

    auto cps = decode_utf8(user);
    if (!cps) return make_error("the NTLM user name is not valid UTF-8");
    for (auto& cp : *cps) cp = to_upper(cp);
    auto dom = decode_utf8(domain);
    if (!dom) return make_error("the NTLM domain is not valid UTF-8");
    cps->append(*dom);
    http::SecretBuffer identity;
    append_utf16le(identity, *cps);
    Secret key(16);
    auto mac = hmac_md5(nt_hash.reveal(), {identity.bytes()});
    std::copy(mac.begin(), mac.end(), key.reveal_mutable().begin());
    secure_zero(mac.data(), mac.size());
    return key;
}

V2Response v2_response(const Secret& key, const Challenge& challenge, std::uint64_t timestamp,
                       std::span<const std::uint8_t, 8> client_challenge) {
    const std::uint64_t ts = challenge.timestamp.value_or(timestamp);
    // The client blob ("temp" in [MS-NLMP] 3.3.2): versions 1 and 1, zeros, the time,
    // the client challenge, zeros, the proxy's target info, zeros.
    Bytes blob(28, 0);
    blob[0] = 1;
    blob[1] = 1;
    put32(blob, 8, static_cast<std::uint32_t>(ts));
    put32(blob, 12, static_cast<std::uint32_t>(ts >> 32));
    std::copy(client_challenge.begin(), client_challenge.end(), blob.begin() + 16);
    blob.insert(blob.end(), challenge.target_info.begin(), challenge.target_info.end());
    blob.insert(blob.end(), 4, 0);

    V2Response r;
    r.nt_proof = hmac_md5(key.reveal(), {challenge.server_challenge, blob});
    r.nt_response.assign(r.nt_proof.begin(), r.nt_proof.end());
    r.nt_response.insert(r.nt_response.end(), blob.begin(), blob.end());
    r.session_base_key = hmac_md5(key.reveal(), {r.nt_proof});
    if (challenge.timestamp) {
        // With the proxy's own timestamp the LM response is all zeros ([MS-NLMP] 3.1.5.1.2).
        r.lm_response.assign(24, 0);
    } else {
        auto lm = hmac_md5(key.reveal(), {challenge.server_challenge, client_challenge});
        r.lm_response.assign(lm.begin(), lm.end());
        r.lm_response.insert(r.lm_response.end(), client_challenge.begin(), client_challenge.end());
    }
    return r;
}

Result<Secret> authenticate_message(const Challenge& challenge, const Identity& identity, const Secret& password,
                                    std::string_view workstation, std::uint64_t timestamp,
                                    std::span<const std::uint8_t, 8> client_challenge) {
    auto key = ntowfv2(password, identity.user, identity.domain);
    if (!key) return key.error();
    const V2Response r = v2_response(*key, challenge, timestamp, client_challenge);
    auto domain = utf16le(identity.domain, "domain");
    auto user = utf16le(identity.user, "user name");
    auto host = utf16le(workstation, "workstation name");
    if (!domain) return domain.error();
    if (!user) return user.error();
    if (!host) return host.error();

    Bytes header(kAuthenticateHeader, 0);
    std::copy(std::begin(kSignature), std::end(kSignature), header.begin());
    put32(header, 8, 3);
    std::size_t offset = kAuthenticateHeader;
    bool too_long = false;
    auto fields = [&](std::size_t at, std::size_t len) {
        too_long = too_long || len > 0xffff;
        put16(header, at, static_cast<std::uint32_t>(len));
        put16(header, at + 2, static_cast<std::uint32_t>(len));
        put32(header, at + 4, static_cast<std::uint32_t>(offset));
        offset += len;
    };
    // Payload order: domain, user, workstation, LM, NT (any order is valid).
    fields(28, domain->size());
    fields(36, user->size());
    fields(44, host->size());
    fields(12, r.lm_response.size());
    fields(20, r.nt_response.size());
    fields(52, 0);
    const std::uint32_t flags = (challenge.flags & (kAlwaysSign | kExtendedSessionSecurity | kTargetInfo | k128 | k56 |
                                                    kRequestTarget)) |
                                kUnicode | kNtlm;
    put32(header, 60, flags);
    if (too_long) return make_error("a field of the NTLM authenticate message would be longer than 64 KiB");

    http::SecretBuffer out;
    out.append(header);
    out.append(*domain);
    out.append(*user);
    out.append(*host);
    out.append(r.lm_response);
    out.append(r.nt_response);
    return out.take_secret();
}

std::uint64_t filetime_from_unix(std::int64_t unix_seconds, std::uint32_t nanoseconds) {
    constexpr std::int64_t kEpochDelta = 11644473600;  // 1601-01-01 to 1970-01-01, in seconds
    return static_cast<std::uint64_t>(unix_seconds + kEpochDelta) * 10000000u + nanoseconds / 100;
}

Result<Bytes> decode_token(std::string_view text) {
    if (text.size() > kMaxToken) return make_error("the proxy's NTLM token is longer than 64 KiB");
    base64_decode_ctx ctx;
    base64_decode_init(&ctx);
    Bytes out(BASE64_DECODE_LENGTH(text.size()) + 1);
    std::size_t len = out.size();
    if (!base64_decode_update(&ctx, &len, out.data(), text.size(), text.data()) || !base64_decode_final(&ctx))
        return make_error("the proxy's NTLM token is not valid base64");
    out.resize(len);
    return out;
}

}  // namespace espvpn::proxy::ntlm
