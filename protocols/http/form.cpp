#include "protocols/http/form.h"

#include <algorithm>

#include "protocols/base/hex.h"

namespace espvpn::http {

static bool unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

static void encode_into(std::string& out, std::string_view text) {
    for (unsigned char c : text) {
        if (unreserved(c)) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            append_hex(out, std::uint8_t{c});
        }
    }
}

std::string percent_encode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    encode_into(out, text);
    return out;
}

Result<std::string> percent_decode(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (c == '+') {
            out += ' ';
        } else if (c == '%') {
            if (i + 2 >= text.size())
                return make_error("truncated percent-escape at offset " + std::to_string(i));
            int hi = hex_digit_value(text[i + 1]), lo = hex_digit_value(text[i + 2]);
            if (hi < 0 || lo < 0)
                return make_error("invalid percent-escape at offset " + std::to_string(i));
            out += static_cast<char>(hi << 4 | lo);
            i += 2;
        } else {
            out += c;
        }
    }
    return out;
}

Result<std::vector<std::pair<std::string, std::string>>> parse_form(std::string_view body) {
    std::vector<std::pair<std::string, std::string>> pairs;
    while (!body.empty()) {
        std::size_t amp = body.find('&');
        std::string_view item = body.substr(0, amp);
        body = amp == std::string_view::npos ? std::string_view{} : body.substr(amp + 1);
        if (item.empty()) continue;
        std::size_t eq = item.find('=');
        auto key = percent_decode(item.substr(0, eq));
        if (!key) return key.error();
        auto value = percent_decode(eq == std::string_view::npos ? std::string_view{}
                                                                 : item.substr(eq + 1));
        if (!value) return value.error();
        pairs.emplace_back(std::move(*key), std::move(*value));
    }
    return pairs;
}

FormBody::~FormBody() { secure_zero(buf_.data(), buf_.size()); }

// Grows the buffer by hand so that a reallocation never frees a copy of a
// password without zeroing it.
void FormBody::ensure(std::size_t extra) {
    if (buf_.size() + extra <= buf_.capacity()) return;
    std::string bigger;
    bigger.reserve(std::max<std::size_t>(2 * buf_.capacity(), buf_.size() + extra + 64));
    bigger = buf_;
    secure_zero(buf_.data(), buf_.size());
    buf_.swap(bigger);
}

void FormBody::separator() {
    if (!buf_.empty()) buf_ += '&';
}

FormBody& FormBody::add(std::string_view key, std::string_view value) {
    ensure(1 + 3 * key.size() + 1 + 3 * value.size());
    separator();
    encode_into(buf_, key);
    buf_ += '=';
    encode_into(buf_, value);
    return *this;
}

FormBody& FormBody::add(std::string_view key, const Secret& value) {
    return add(key, value.reveal_text());
}

FormBody& FormBody::add_raw(std::string_view key, std::string_view raw_value) {
    ensure(1 + 3 * key.size() + 1 + raw_value.size());
    separator();
    encode_into(buf_, key);
    buf_ += '=';
    buf_ += raw_value;
    return *this;
}

Secret FormBody::finish() {
    Secret out = Secret::from_string(buf_);
    secure_zero(buf_.data(), buf_.size());
    buf_.clear();
    return out;
}

}  // namespace espvpn::http
