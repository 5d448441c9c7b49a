#include "protocols/gp/base64.h"

namespace espvpn::gp {

Result<std::string> base64_decode(std::string_view text) {
    std::string out;
    unsigned acc = 0;
    int bits = 0;
    std::size_t pad = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        int v;
        if (c >= 'A' && c <= 'Z') v = c - 'A';
        else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
        else if (c >= '0' && c <= '9') v = c - '0' + 52;
        else if (c == '+') v = 62;
        else if (c == '/') v = 63;
        else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        else if (c == '=') { ++pad; continue; }
        else return make_error("invalid base64 character at offset " + std::to_string(i));
        if (pad) return make_error("base64 data after padding");
        acc = (acc << 6) | static_cast<unsigned>(v);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xFF);
        }
    }
    if (bits >= 6 || pad > 2) return make_error("truncated base64");
    return out;
}

}  // namespace espvpn::gp
