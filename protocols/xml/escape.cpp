#include "protocols/xml/escape.h"

namespace espvpn::xml {

std::string_view entity(char c) {
    switch (c) {
        case '&': return "&amp;";
        case '<': return "&lt;";
        case '>': return "&gt;";
        case '"': return "&quot;";
        case '\'': return "&apos;";
        default: return {};
    }
}

bool is_xml_char(char c) {
    return static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r';
}

std::string escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (std::string_view e = entity(c); !e.empty()) out += e;
        else if (is_xml_char(c)) out += c;
    }
    return out;
}

}  // namespace espvpn::xml
