#include "protocols/http/response_parser.h"

#include <algorithm>

#include "protocols/base/ascii.h"
#include "protocols/base/hex.h"

namespace espvpn::http {

namespace {

// A chunk-size line is a hex number plus optional extensions; nothing legitimate
// is longer than this.
constexpr std::size_t kMaxChunkLine = 4096;

// Server bytes quoted for an error message: at most `max` of them, anything but
// printable ASCII as \xNN, so a hostile reply cannot write control sequences to the
// user's terminal or log through our errors.
std::string quoted(std::string_view bytes, std::size_t max) {
    std::string out = "\"";
    for (char c : bytes.substr(0, max)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
            out += c;
        } else {
            out += "\\x";
            append_hex(out, std::uint8_t{u});
        }
    }
    out += bytes.size() > max ? "\"..." : "\"";
    return out;
}

bool is_tchar(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_ascii_digit(c)) return true;
    return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Content-Length may be repeated or a list ("5, 5"), but every value must agree.
Result<std::uint64_t> parse_content_length(const std::vector<std::string_view>& values) {
    std::optional<std::uint64_t> length;
    for (auto field : values) {
        while (true) {
            auto comma = field.find(',');
            auto item = trim_blanks(field.substr(0, comma));
            if (item.empty() || !std::all_of(item.begin(), item.end(), is_ascii_digit) || item.size() > 18)
                return make_error("invalid Content-Length " + quoted(item, 32));
            std::uint64_t n = 0;
            for (char c : item) n = n * 10 + static_cast<std::uint64_t>(c - '0');
            if (length && *length != n) return make_error("conflicting Content-Length values");
            length = n;
            if (comma == std::string_view::npos) break;
            field.remove_prefix(comma + 1);
        }
    }
    return *length;
}

}  // namespace

void ResponseParser::begin(std::string_view request_method) {
    state_ = State::status_line;
    head_request_ = request_method == "HEAD";
    connect_request_ = request_method == "CONNECT";
    started_ = false;
    section_bytes_ = 0;
    interim_seen_ = 0;
    remaining_ = 0;
    line_.clear();
    body_.clear();
    response_ = Response{};
    error_ = Error{};
}

Status ResponseParser::fail(std::string message) {
    state_ = State::failed;
    error_ = make_error("HTTP response: " + std::move(message));
    line_.clear();
    body_.clear();
    return error_;
}

Result<std::size_t> ResponseParser::feed(std::span<const std::uint8_t> data) {
    if (state_ == State::failed) return error_;
    if (state_ == State::done || data.empty()) return std::size_t{0};
    started_ = true;
    std::size_t pos = 0;
    while (pos < data.size() && state_ != State::done) {
        auto rest = data.subspan(pos);
        switch (state_) {
        case State::body_length:
        case State::chunk_data: {
            auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, rest.size()));
            if (auto s = append_body(rest.first(n)); !s) return s.error();
            remaining_ -= n;
            pos += n;
            if (remaining_ == 0) {
                if (state_ == State::body_length) finish_message();
                else state_ = State::chunk_data_end;
            }
            break;
        }
        case State::body_until_close:
            if (auto s = append_body(rest); !s) return s.error();
            pos = data.size();
            break;
        default: {  // the line-oriented states
            auto nl = std::find(rest.begin(), rest.end(), std::uint8_t{'\n'});
            bool complete = nl != rest.end();
            std::size_t take = complete ? static_cast<std::size_t>(nl - rest.begin()) + 1 : rest.size();
            bool in_header_section = state_ == State::status_line || state_ == State::header_lines ||
                                     state_ == State::trailer_lines;
            if (in_header_section) {
                section_bytes_ += take;
                if (section_bytes_ > limits_.max_header_bytes)
                    return fail("header section exceeds the limit of " + std::to_string(limits_.max_header_bytes) +
                                " bytes").error();
            } else if (line_.size() + take > kMaxChunkLine) {
                return fail("chunk-size line longer than " + std::to_string(kMaxChunkLine) + " bytes").error();
            }
            line_.append(rest.first(take));
            pos += take;
            if (complete) {
                auto line = line_.text();
                line.remove_suffix(1);
                if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
                auto s = on_line(line);
                line_.clear();
                if (!s) return s.error();
            }
        }
        }
    }
    return pos;
}

Status ResponseParser::on_line(std::string_view line) {
    switch (state_) {
    case State::status_line:
        if (line.empty()) return {};  // tolerate blank lines before the status line
        return on_status_line(line);
    case State::header_lines:
        if (line.empty()) return on_headers_complete();
        return on_header_line(line, response_.headers);
    case State::chunk_size:
        return on_chunk_size_line(line);
    case State::chunk_data_end:
        if (!line.empty()) return fail("chunk data not followed by CRLF");
        state_ = State::chunk_size;
        return {};
    case State::trailer_lines:
        if (line.empty()) {
            finish_message();
            return {};
        }
        return on_header_line(line, response_.trailers);
    default:
        return fail("internal parser state error");
    }
}

Status ResponseParser::on_status_line(std::string_view line) {
    // HTTP/1.x SP 3DIGIT [SP reason]
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || !is_ascii_digit(line[7]) || line[8] != ' ' ||
        !is_ascii_digit(line[9]) || !is_ascii_digit(line[10]) || !is_ascii_digit(line[11]) || (line.size() > 12 && line[12] != ' '))
        return fail("malformed status line " + quoted(line, 64));
    response_.version_minor = line[7] - '0';
    response_.status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (response_.status < 100 || response_.status > 599)
        return fail("status code " + std::to_string(response_.status) + " out of range");
    response_.reason = line.size() > 13 ? std::string(line.substr(13)) : std::string();
    state_ = State::header_lines;
    return {};
}

Status ResponseParser::on_header_line(std::string_view line, Headers& into) {
    if (line.front() == ' ' || line.front() == '\t')
        return fail("obsolete header line folding is not supported");
    auto colon = line.find(':');
    if (colon == std::string_view::npos) return fail("malformed header line (no colon)");
    auto name = line.substr(0, colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_tchar))
        return fail("invalid header name " + quoted(name, 64));
    auto value = trim_blanks(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r'; }))
        return fail("control character in header " + std::string(name));
    std::size_t count = into.size() + (&into == &response_.headers ? response_.set_cookies.size() : 0);
    if (count + 1 > limits_.max_header_count)
        return fail("more than " + std::to_string(limits_.max_header_count) + " header fields");
    if (&into == &response_.headers && iequals(name, "Set-Cookie"))
        response_.set_cookies.push_back(Secret::from_string(value));
    else
        into.add(std::string(name), std::string(value));
    return {};
}

Status ResponseParser::on_headers_complete() {
    const int status = response_.status;
    const Headers& h = response_.headers;
    if (status >= 100 && status < 200 && status != 101) {
        if (++interim_seen_ > limits_.max_interim_responses)
            return fail("more than " + std::to_string(limits_.max_interim_responses) + " interim (1xx) responses");
        response_ = Response{};
        section_bytes_ = 0;
        state_ = State::status_line;
        return {};
    }
    response_.keep_alive = response_.version_minor >= 1 ? !h.list_contains("Connection", "close")
                                                        : h.list_contains("Connection", "keep-alive");
    if (status == 101 || head_request_ || status == 204 || status == 304 ||
        (connect_request_ && status >= 200 && status < 300)) {
        finish_message();
        return {};
    }
    if (auto codings = h.get_all("Transfer-Encoding"); !codings.empty()) {
        auto last = codings.back();
        if (auto comma = last.rfind(','); comma != std::string_view::npos) last.remove_prefix(comma + 1);
        if (!iequals(trim_blanks(last), "chunked"))
            return fail("unsupported Transfer-Encoding " + quoted(codings.back(), 64));
        // RFC 9112 6.3: with both framings the message is suspect; do not reuse the connection.
        if (h.has("Content-Length")) response_.keep_alive = false;
        state_ = State::chunk_size;
        return {};
    }
    if (auto lengths = h.get_all("Content-Length"); !lengths.empty()) {
        auto length = parse_content_length(lengths);
        if (!length) return fail(length.error().message);
        if (*length > limits_.max_body_bytes)
            return fail("body of " + std::to_string(*length) + " bytes exceeds the limit of " +
                        std::to_string(limits_.max_body_bytes) + " bytes");
        remaining_ = *length;
        if (remaining_ == 0) finish_message();
        else state_ = State::body_length;
        return {};
    }
    response_.keep_alive = false;
    state_ = State::body_until_close;
    return {};
}

Status ResponseParser::on_chunk_size_line(std::string_view line) {
    std::uint64_t size = 0;
    std::size_t i = 0;
    for (; i < line.size() && hex_digit_value(line[i]) >= 0; ++i) {
        size = size * 16 + static_cast<std::uint64_t>(hex_digit_value(line[i]));
        if (size > limits_.max_body_bytes)
            return fail("chunk size exceeds the body limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
    }
    auto rest = trim_blanks(line.substr(i));
    if (i == 0 || (!rest.empty() && rest.front() != ';'))
        return fail("invalid chunk size line " + quoted(line, 32));
    if (size == 0) {
        section_bytes_ = 0;
        state_ = State::trailer_lines;
        return {};
    }
    remaining_ = size;
    state_ = State::chunk_data;
    return {};
}

Status ResponseParser::append_body(std::span<const std::uint8_t> bytes) {
    if (body_.size() + bytes.size() > limits_.max_body_bytes)
        return fail("body exceeds the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
    body_.append(bytes);
    return {};
}

void ResponseParser::finish_message() {
    response_.body = body_.take_secret();
    state_ = State::done;
}

Status ResponseParser::finish_eof() {
    switch (state_) {
    case State::failed:
        return error_;
    case State::done:
        return {};
    case State::body_until_close:
        finish_message();
        return {};
    case State::status_line:
        if (!started_) return fail("connection closed before any response byte");
        [[fallthrough]];
    case State::header_lines:
        return fail("connection closed in the middle of the response headers");
    case State::body_length:
        return fail("connection closed with " + std::to_string(remaining_) + " body bytes still expected");
    default:
        return fail("connection closed in the middle of a chunked body");
    }
}

Response ResponseParser::take_response() {
    Response out = std::move(response_);
    response_ = Response{};
    return out;
}

}  // namespace espvpn::http
