// ASCII text rules the parsers share: protocol names, header fields, XML values
// and DNS names compare and lower-case in ASCII, whatever the locale.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace espvpn {

inline char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
inline std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_lower(c);
    return out;
}
inline bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}
inline bool istarts_with(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}
inline bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
// Without the blanks (spaces and tabs) at either end.
inline std::string_view trim_blanks(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Text from a server, made safe for a terminal or a log: newlines and tabs
// (multi-line banners) and printable UTF-8 stay; every other C0 control, DEL,
// the C1 controls (U+0080..U+009F, e.g. a one-byte CSI) and every byte that is
// not part of valid UTF-8 become a visible "\xHH" per byte. So "\x1b]0;t\x07"
// (set the terminal's title) or "\x1b[2J" (clear the screen) is shown, not obeyed.
inline std::string printable(std::string_view s) {
    auto escape = [](std::string& out, unsigned char b) {
        static constexpr char kHex[] = "0123456789abcdef";
        out += "\\x";
        out += kHex[b >> 4];
        out += kHex[b & 15];
    };
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) escape(out, b);
            else out += static_cast<char>(b);
            ++i;
            continue;
        }
        // A UTF-8 sequence: its length, the smallest code point it may encode (no
        // overlong forms), and the continuation bytes.
        std::size_t len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
        char32_t cp = len == 2 ? b & 0x1f : len == 3 ? b & 0x0f : b & 0x07;
        bool valid = len != 0 && i + len <= s.size();
        for (std::size_t k = 1; valid && k < len; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            if ((c & 0xc0) != 0x80) valid = false;
            cp = cp << 6 | (c & 0x3f);
        }
        if (valid && ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
                      (len == 4 && (cp < 0x10000 || cp > 0x10ffff))))
            valid = false;
        if (valid && cp >= 0x80 && cp <= 0x9f) {  // C1 control: escape its bytes
            for (std::size_t k = 0; k < len; ++k) escape(out, static_cast<unsigned char>(s[i + k]));
            i += len;
        } else if (valid) {
            out.append(s.substr(i, len));
            i += len;
        } else {
            escape(out, b);
            ++i;
        }
    }
    return out;
}

}  // namespace espvpn
