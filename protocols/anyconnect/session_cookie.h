// The AnyConnect session cookie as users and NetworkManager pass it around
// (docs/protocols/anyconnect.md §1.6): the bare `webvpn` value, or openconnect's composite string
// "openconnect_strapkey=...; webvpn=..." (HPKE builds such as Debian's 9.01).
// ocserv's values end in '=' padding, so a bare value must not be split there.
#pragma once

#include <string_view>

#include "protocols/base/result.h"
#include "crypto/secret.h"

namespace espvpn::anyconnect {

// The webvpn value from either form (surrounding spaces and a COOKIE='...'
// wrapper as --authenticate prints it are accepted). Error when empty or when
// a composite string has no webvpn part.
Result<Secret> webvpn_from_cookie_text(std::string_view text);

// What espvpn prints as the cookie (--authenticate, --cookieonly): "webvpn=<value>",
// which openconnect -C and espvpn --cookie both read.
Secret cookie_text(const Secret& webvpn);

}  // namespace espvpn::anyconnect
