// Escaping for the XML documents we write (AnyConnect's config-auth replies, GP's
// HIP report). Parsing lives in document.h.
#pragma once

#include <string>
#include <string_view>

namespace espvpn::xml {

// The entity for one of & < > " ', or empty when `c` stands for itself.
std::string_view entity(char c);

// Whether XML 1.0 can carry `c` at all: control characters other than tab, LF
// and CR cannot appear in a document, not even as character references.
bool is_xml_char(char c);

// Text or attribute value: & < > " ' become entities; characters XML cannot carry
// are left out (a hostname or OS string with a stray control byte would otherwise
// make the whole document unparsable for the server).
std::string escape(std::string_view text);

}  // namespace espvpn::xml
