// application/x-www-form-urlencoded bodies, as GlobalProtect and AnyConnect
// logins send them. Percent-encoding follows OpenConnect: everything except
// A-Z a-z 0-9 - _ . ~ is escaped, with lowercase hex.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::http {

std::string percent_encode(std::string_view text);
// Decodes %XX escapes and '+' as space. Rejects a truncated or non-hex escape.
Result<std::string> percent_decode(std::string_view text);

// Splits "a=1&b=2" into decoded pairs (a key without '=' gets an empty value).
Result<std::vector<std::pair<std::string, std::string>>> parse_form(std::string_view body);

// Builds a form body. Because a body may carry a password, it is built straight
// into a Secret-backed buffer and handed out as a Secret.
class FormBody {
public:
    FormBody() = default;
    FormBody(const FormBody&) = delete;
    FormBody& operator=(const FormBody&) = delete;
    ~FormBody();

    FormBody& add(std::string_view key, std::string_view value);
    FormBody& add(std::string_view key, const Secret& value);
    // Appends "key=value" without encoding the value (OC writes "prot=https:" so).
    FormBody& add_raw(std::string_view key, std::string_view raw_value);

    Secret finish();

private:
    void ensure(std::size_t extra);
    void separator();
    std::string buf_;
};

}  // namespace espvpn::http
