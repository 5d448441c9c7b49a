#include "protocols/gp/auth_reply.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "protocols/base/ascii.h"
#include "protocols/base/hex.h"

namespace espvpn::gp {

namespace {

std::size_t find_nocase(std::string_view hay, std::string_view needle, std::size_t from = 0) {
    return ascii_lower(hay).find(ascii_lower(needle), from);
}

void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | cp >> 6);
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | cp >> 12);
        out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x110000) {
        out += static_cast<char>(0xF0 | cp >> 18);
        out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
        out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::optional<unsigned> parse_hex(std::string_view digits) {
    if (digits.empty() || digits.size() > 6) return std::nullopt;
    unsigned v = 0;
    for (char c : digits) {
        const int d = hex_digit_value(c);
        if (d < 0) return std::nullopt;
        v = v * 16 + static_cast<unsigned>(d);
    }
    return v;
}

// Reads the JS string literal assigned in `<name> = "..."`, decoding escapes.
// nullopt: the statement is absent; error: it is present but malformed.
Result<std::optional<std::string>> js_assignment(std::string_view text, std::string_view name) {
    std::size_t at = text.find(name);
    if (at == std::string_view::npos) return std::optional<std::string>{};
    std::size_t i = at + name.size();
    auto skip_space = [&] {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    skip_space();
    if (i >= text.size() || text[i] != '=')
        return make_error("JavaScript reply: no '=' after " + std::string(name));
    ++i;
    skip_space();
    if (i >= text.size() || (text[i] != '"' && text[i] != '\''))
        return make_error("JavaScript reply: " + std::string(name) + " is not a string literal");
    const char quote = text[i++];
    std::string out;
    for (; i < text.size(); ++i) {
        char c = text[i];
        if (c == quote) return std::optional<std::string>(std::move(out));
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++i >= text.size()) break;
        switch (char e = text[i]) {
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'v': out += '\v'; break;
            case '0': out += '\0'; break;
            case 'x':
            case 'u': {
                std::size_t n = e == 'x' ? 2 : 4;
                auto cp = parse_hex(text.substr(i + 1, n));
                if (!cp || i + n >= text.size())
                    return make_error("JavaScript reply: bad \\" + std::string(1, e) +
                                      " escape in " + std::string(name));
                append_utf8(out, *cp);
                i += n;
                break;
            }
            default: out += e; break;  // \" \' \\ \/ and any other literal char
        }
    }
    return make_error("JavaScript reply: unterminated string for " + std::string(name));
}

std::string decode_entities(std::string_view s) {
    static const std::pair<std::string_view, char> named[] = {
        {"quot", '"'}, {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"apos", '\''}, {"nbsp", ' '}};
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        std::size_t semi = s[i] == '&' ? s.find(';', i) : std::string_view::npos;
        if (semi == std::string_view::npos || semi - i > 10) {
            out += s[i];
            continue;
        }
        std::string_view ent = s.substr(i + 1, semi - i - 1);
        bool done = false;
        if (!ent.empty() && ent[0] == '#') {
            std::optional<unsigned> cp;
            if (ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X')) {
                cp = parse_hex(ent.substr(2));
            } else if (ent.size() > 1 && ent.size() <= 8 &&
                       std::all_of(ent.begin() + 1, ent.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
                cp = static_cast<unsigned>(std::stoul(std::string(ent.substr(1))));
            }
            if (cp) {
                append_utf8(out, *cp);
                done = true;
            }
        } else {
            for (auto& [n, c] : named)
                if (ent == n) {
                    out += c;
                    done = true;
                }
        }
        if (done)
            i = semi;
        else
            out += s[i];
    }
    return out;
}

}  // namespace

GpErrorKind classify_error_message(std::string_view message) {
    const std::string m = ascii_lower(message);
    auto has = [&](std::string_view k) { return m.find(k) != std::string::npos; };
    if (has("invalid authentication cookie") || has("errors getting ssl/vpn config") ||
        has("portal name not found") || has("allow automatic restoration"))
        return GpErrorKind::CookieRejected;
    if (has("does not exist")) return GpErrorKind::WrongInterface;
    if (has("client certificate")) return GpErrorKind::ClientCertRequired;
    if (has("invalid username or password") || has("authentication failure") ||
        has("auth-failed"))
        return GpErrorKind::AuthFailed;
    return GpErrorKind::Other;
}

std::string html_body_text(std::string_view html) {
    std::size_t start = find_nocase(html, "<body");
    if (start != std::string_view::npos) {
        std::size_t gt = html.find('>', start);
        start = gt == std::string_view::npos ? html.size() : gt + 1;
    } else {
        start = 0;
    }
    std::size_t end = find_nocase(html, "</body", start);
    std::string_view body = html.substr(start, end == std::string_view::npos ? html.npos : end - start);
    std::string text;
    for (std::size_t i = 0; i < body.size(); ++i) {
        if (body[i] == '<') {
            std::size_t gt = body.find('>', i);
            if (gt == std::string_view::npos) break;
            i = gt;
        } else {
            text += body[i];
        }
    }
    return decode_entities(text);
}

Result<std::variant<GpChallenge, GpServerError>> parse_js_reply(std::string_view text) {
    using Out = std::variant<GpChallenge, GpServerError>;
    auto status = js_assignment(text, "respStatus");
    if (!status) return status.error();
    if (!*status) return make_error("JavaScript reply without respStatus");
    auto msg = js_assignment(text, "respMsg");
    if (!msg) return msg.error();
    std::string message = msg->value_or("");
    if (iequals(**status, "Error")) {
        if (message.empty()) message = "server reported an error without a message";
        GpErrorKind kind = classify_error_message(message);
        return Out(GpServerError{std::move(message), kind});
    }
    if (!iequals(**status, "Challenge"))
        return make_error("JavaScript reply: unknown respStatus \"" + **status + "\"");
    auto input = js_assignment(text, "thisForm.inputStr.value");
    if (!input) return input.error();
    if (!*input) return make_error("JavaScript challenge without thisForm.inputStr.value");
    return Out(GpChallenge{std::move(message), std::move(**input)});
}

Result<GpReply> classify_reply(std::string_view body) {
    std::string_view t = xml::trim(body);
    if (t.empty()) return make_error("empty reply");

    const bool looks_html = find_nocase(t.substr(0, 64), "<html") != std::string_view::npos ||
                            find_nocase(t.substr(0, 64), "<!doctype html") != std::string_view::npos;
    if (t.find("respStatus") != std::string_view::npos && (t.front() != '<' || looks_html)) {
        const std::string text = t.front() == '<' ? html_body_text(t) : std::string(t);
        auto js = parse_js_reply(text);
        if (!js) return js.error();
        return std::visit([](auto&& v) { return Result<GpReply>(GpReply(std::move(v))); },
                          std::move(*js));
    }
    if (looks_html)  // a login page or a proxy's error page, not GP
        return make_error("server sent an HTML page without a GlobalProtect reply");
    if (t.front() != '<') {
        // e.g. "errors getting SSL/VPN config" with HTTP 200
        std::string message(t.substr(0, 200));
        GpErrorKind kind = classify_error_message(message);
        return GpReply(GpServerError{std::move(message), kind});
    }

    auto doc = xml::Document::parse(t);
    if (!doc) return doc.error();
    xml::Node root = doc->root();
    const std::string_view name = root.name();
    auto error_from = [](std::string message) {
        if (message.empty()) message = "server reported an error without a message";
        GpErrorKind kind = classify_error_message(message);
        return GpReply(GpServerError{std::move(message), kind});
    };
    if (name == "response" && iequals(root.attribute("status").value_or(""), "error"))
        return error_from(root.child_text_or_empty("error"));
    if (name == "error") return error_from(root.text());
    if (name == "prelogin-response" &&
        iequals(root.child_text_or_empty("status"), "error"))
        return error_from(root.child_text_or_empty("msg"));
    if (name == "challenge") {
        auto input = root.child_text("inputstr");
        if (!input) return make_error("<challenge> without <inputstr>");
        return GpReply(GpChallenge{root.child_text_or_empty("respmsg"), std::move(*input)});
    }
    return GpReply(std::move(*doc));
}

}  // namespace espvpn::gp
