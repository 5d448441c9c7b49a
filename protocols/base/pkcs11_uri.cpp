#include "protocols/base/pkcs11_uri.h"

#include "protocols/base/ascii.h"
#include "protocols/base/hex.h"

namespace espvpn {

namespace {

// The attribute name of "name=value" (or of a bare "name"), percent-decoded and lower-cased.
std::string attribute_name(std::string_view attribute) {
    std::string_view raw = attribute.substr(0, attribute.find('='));
    std::string out;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '%' && i + 2 < raw.size() && hex_digit_value(raw[i + 1]) >= 0 && hex_digit_value(raw[i + 2]) >= 0) {
            out += static_cast<char>(hex_digit_value(raw[i + 1]) * 16 + hex_digit_value(raw[i + 2]));
            i += 2;
        } else {
            out += raw[i];
        }
    }
    return ascii_lower(trim_blanks(out));
}

bool is_pin_attribute(std::string_view attribute) {
    const std::string name = attribute_name(attribute);
    return name == "pin-value" || name == "pin-source";
}

// `part` split at `separator`, the PIN attributes left out, joined again.
std::string without_pins(std::string_view part, char separator, bool& removed) {
    std::string out;
    while (true) {
        const std::size_t end = part.find(separator);
        const std::string_view attribute = part.substr(0, end);
        if (is_pin_attribute(attribute)) {
            removed = true;
        } else if (!attribute.empty()) {
            if (!out.empty()) out += separator;
            out += attribute;
        }
        if (end == std::string_view::npos) break;
        part.remove_prefix(end + 1);
    }
    return out;
}

}  // namespace

bool is_pkcs11_uri(std::string_view name) { return istarts_with(name, "pkcs11:"); }

std::string printable_key_name(std::string_view name) {
    if (!is_pkcs11_uri(name)) return std::string(name);
    const std::string_view rest = name.substr(7);
    const std::size_t q = rest.find('?');
    bool removed = false;
    std::string out = std::string(name.substr(0, 7)) + without_pins(rest.substr(0, q), ';', removed);
    if (q != std::string_view::npos) {
        const std::string query = without_pins(rest.substr(q + 1), '&', removed);
        if (!query.empty()) out += "?" + query;
    }
    return out;
}

bool pkcs11_uri_has_pin(std::string_view name) {
    return is_pkcs11_uri(name) && printable_key_name(name).size() != name.size();
}

}  // namespace espvpn
