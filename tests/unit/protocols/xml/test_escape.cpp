#include <doctest/doctest.h>

#include "protocols/xml/document.h"
#include "protocols/xml/escape.h"

using namespace espvpn;

TEST_CASE("xml::escape: the five special characters become entities, others stay") {
    CHECK(xml::escape("") == "");
    CHECK(xml::escape("plain text 123") == "plain text 123");
    CHECK(xml::escape("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d&quot;e&apos;f");
    CHECK(xml::escape("&amp;") == "&amp;amp;");  // not idempotent: escape once
    CHECK(xml::escape("gr\xc3\xbc\xc3\x9f") == "gr\xc3\xbc\xc3\x9f");  // UTF-8 bytes pass
}

TEST_CASE("xml::escape: control characters XML 1.0 cannot carry are left out") {
    CHECK(xml::escape(std::string("a\x01" "b\x1f" "c", 5)) == "abc");
    CHECK(xml::escape(std::string("a\0b", 3)) == "ab");
    CHECK(xml::escape("tab\there\nline\rcr") == "tab\there\nline\rcr");
    CHECK_FALSE(xml::is_xml_char('\x0b'));
    CHECK(xml::is_xml_char('\t'));
    CHECK(xml::entity('x').empty());
    CHECK(xml::entity('<') == "&lt;");
}

TEST_CASE("xml::escape: the escaped text reads back as the original through our parser") {
    const std::string original = "user \"<admin>\" & 'co'\x02";
    auto doc = xml::Document::parse("<r a=\"" + xml::escape(original) + "\">" + xml::escape(original) + "</r>");
    REQUIRE(doc);
    CHECK(doc->root().raw_text() == "user \"<admin>\" & 'co'");
    CHECK(doc->root().attribute("a") == "user \"<admin>\" & 'co'");
}
