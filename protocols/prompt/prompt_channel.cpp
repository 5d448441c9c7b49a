#include "protocols/prompt/prompt_channel.h"

#include <cstdio>

namespace espvpn::prompt {

namespace {

void escape_into(std::string& out, std::string_view field) {
    for (char ch : field) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    char hex[5];
                    std::snprintf(hex, sizeof hex, "\\x%02x", c);
                    out += hex;
                } else {
                    out += ch;
                }
        }
    }
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

Result<std::string> unescape(std::string_view field) {
    std::string out;
    out.reserve(field.size());
    for (std::size_t i = 0; i < field.size(); ++i) {
        const auto c = static_cast<unsigned char>(field[i]);
        if (c < 0x20 || c == 0x7f) return make_error("a raw control character in a prompt record");
        if (c != '\\') {
            out += field[i];
            continue;
        }
        if (++i >= field.size()) return make_error("a prompt record ends in a lone backslash");
        switch (field[i]) {
            case '\\': out += '\\'; break;
            case 't': out += '\t'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 'x': {
                const int hi = i + 2 < field.size() ? hex_digit(field[i + 1]) : -1;
                const int lo = hi >= 0 ? hex_digit(field[i + 2]) : -1;
                if (lo < 0) return make_error("a bad \\x escape in a prompt record");
                out += static_cast<char>(hi * 16 + lo);
                i += 2;
                break;
            }
            default: return make_error(std::string("an unknown escape \\") + field[i] + " in a prompt record");
        }
    }
    return out;
}

const char* type_name(RecordType t) {
    switch (t) {
        case RecordType::ask: return "ask";
        case RecordType::banner: return "banner";
        case RecordType::message: return "message";
        case RecordType::error: return "error";
    }
    return "message";
}

const char* kind_name(FieldKind k) {
    switch (k) {
        case FieldKind::text: return "text";
        case FieldKind::password: return "password";
        case FieldKind::select: return "select";
    }
    return "text";
}

}  // namespace

std::string encode(const Record& r) {
    std::string out = type_name(r.type);
    auto field = [&](std::string_view f) {
        out += '\t';
        escape_into(out, f);
    };
    if (r.type == RecordType::ask) {
        field(r.form);
        field(r.name);
        field(kind_name(r.kind));
        field(r.label);
        if (r.kind == FieldKind::select)
            for (const auto& c : r.choices) field(c);
    } else {
        field(r.text);
    }
    out += '\n';
    return out;
}

Result<Record> decode(std::string_view line) {
    if (line.size() > kMaxLine) return make_error("a prompt record longer than 64 KiB");
    std::vector<std::string> fields;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t tab = line.find('\t', pos);
        auto f = unescape(line.substr(pos, tab == std::string_view::npos ? std::string_view::npos : tab - pos));
        if (!f) return f.error();
        fields.push_back(std::move(*f));
        if (tab == std::string_view::npos) break;
        pos = tab + 1;
    }
    Record r;
    const std::string& type = fields[0];
    if (type == "ask") {
        r.type = RecordType::ask;
        if (fields.size() < 5) return make_error("a prompt record 'ask' with fewer than 4 fields");
        r.form = fields[1];
        r.name = fields[2];
        r.label = fields[4];
        if (fields[3] == "text") r.kind = FieldKind::text;
        else if (fields[3] == "password") r.kind = FieldKind::password;
        else if (fields[3] == "select") r.kind = FieldKind::select;
        else return make_error("a prompt record 'ask' of an unknown kind");
        if (r.kind == FieldKind::select) {
            r.choices.assign(fields.begin() + 5, fields.end());
            if (r.choices.empty()) return make_error("a prompt record 'ask' for a select without choices");
        } else if (fields.size() != 5) {
            return make_error("a prompt record 'ask' for a " + fields[3] + " field with extra fields");
        }
        return r;
    }
    if (type == "banner") r.type = RecordType::banner;
    else if (type == "message") r.type = RecordType::message;
    else if (type == "error") r.type = RecordType::error;
    else return make_error("a prompt record of an unknown type");
    if (fields.size() != 2) return make_error("a prompt record '" + type + "' without exactly one text");
    r.text = std::move(fields[1]);
    return r;
}

Result<Secret> encode_answer(const Secret& value) {
    for (char c : value.reveal_text())
        if (c == '\n' || c == '\r') return make_error("an answer cannot hold a line break");
    Secret out(value.size() + 2);
    auto bytes = out.reveal_mutable();
    bytes[0] = '=';
    for (std::size_t i = 0; i < value.size(); ++i) bytes[i + 1] = value.reveal()[i];
    bytes[value.size() + 1] = '\n';
    return out;
}

Result<Answer> decode_answer(const Secret& line) {
    const std::string_view text = line.reveal_text();
    Answer a;
    if (text == kCancel) {
        a.cancelled = true;
        return a;
    }
    if (text.empty() || text.front() != '=') return make_error("an answer line is neither '=VALUE' nor 'cancel'");
    a.value = Secret(line.reveal().subspan(1));
    return a;
}

}  // namespace espvpn::prompt
