#include <doctest/doctest.h>

#include <string>

#include "protocols/xml/document.h"

using namespace espvpn;
using espvpn::xml::Document;

TEST_CASE("xml: paths, text, attributes and children") {
    auto doc = Document::parse(R"(<?xml version="1.0"?>
<policy a="1"><gateways><external><list>
  <entry name="gw1"><description> One </description></entry>
  <entry name="gw2"/>
  <other/>
</list></external></gateways><x>  padded
</x></policy>)");
    REQUIRE(doc.ok());
    CHECK(doc->root_name() == "policy");
    CHECK(doc->expect_root("policy").ok());
    CHECK(doc->root().attribute("a") == std::optional<std::string>("1"));
    CHECK_FALSE(doc->root().attribute("b").has_value());
    auto list = doc->root().child("gateways/external/list");
    REQUIRE(list);
    auto entries = list.children("entry");
    REQUIRE(entries.size() == 2);
    CHECK(list.children().size() == 3);
    CHECK(entries[0].attribute("name") == std::optional<std::string>("gw1"));
    CHECK(entries[0].child_text("description") == std::optional<std::string>("One"));
    CHECK_FALSE(entries[1].child_text("description").has_value());
    CHECK(doc->root().child_text_or_empty("x") == "padded");
    CHECK(doc->root().child("x").raw_text() == "  padded\n");
    CHECK(doc->root().child("x").text_secret().reveal_text() == "padded");
    // Absent paths answer "absent" all the way down, never crash.
    CHECK_FALSE(doc->root().child("nope/deeper"));
    CHECK(doc->root().child("nope").children().empty());
    CHECK(doc->root().child("nope").text().empty());
}

TEST_CASE("xml: errors name what was wrong") {
    CHECK(Document::parse("").error().message == "empty document");
    CHECK(Document::parse(" \r\n ").error().message == "empty document");
    auto not_xml = Document::parse("var respStatus = \"Error\";");
    REQUIRE_FALSE(not_xml.ok());
    CHECK(not_xml.error().message.rfind("not XML: ", 0) == 0);

    auto doc = Document::parse("<jnlp/>");
    REQUIRE(doc.ok());
    auto st = doc->expect_root("response");
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message == "unexpected root <jnlp>, expected <response>");
    auto missing = doc->require("application-desc");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message == "missing element <jnlp/application-desc>");

    xml::ParseLimits small;
    small.max_bytes = 100;
    auto big = Document::parse("<a>" + std::string(200, 'x') + "</a>", small);
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().message == "document too big (207 bytes, limit 100)");
}

TEST_CASE("xml: lenient like OC's recover mode: bare & and mismatched closing tags") {
    // The OC fake server misspells </hmac-alog>; elements after it must survive.
    auto doc = Document::parse(
        "<r><ipsec><hmac-algo>sha1</hmac-alog><c2s-spi>0x1</c2s-spi></ipsec><after>1</after></r>");
    REQUIRE(doc.ok());
    CHECK(doc->root().child_text_or_empty("ipsec/hmac-algo") == "sha1");
    CHECK(doc->root().child_text_or_empty("ipsec/c2s-spi") == "0x1");
    CHECK(doc->root().child_text_or_empty("after") == "1");

    // A bare '&' is kept as a character, real references still decode.
    auto amp = Document::parse("<r><m>Tom & Jerry &amp; &#65;&#x42; &lt;x&gt; a&b; &</m></r>");
    REQUIRE(amp.ok());
    CHECK(amp->root().child_text_or_empty("m") == "Tom & Jerry & AB <x> a&b; &");
}

TEST_CASE("xml: truncated documents are rejected, not half-parsed") {
    const std::string full = "<response><ip-address>10.0.0.1</ip-address><mtu>1400</mtu></response>";
    REQUIRE(Document::parse(full).ok());
    // Every cut that leaves an open element must fail.
    for (std::size_t n = 1; n < full.size(); ++n) {
        auto r = Document::parse(full.substr(0, n));
        CAPTURE(n);
        CHECK_FALSE(r.ok());
    }
    auto cut = Document::parse("<a><b>x");
    REQUIRE_FALSE(cut.ok());
    CHECK(cut.error().message.find("truncated XML document") == 0);
}

TEST_CASE("xml: no DTDs, no entity expansion, no network") {
    auto xxe = Document::parse(R"(<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><r>&x;</r>)");
    REQUIRE_FALSE(xxe.ok());
    CHECK(xxe.error().message.find("DTD") != std::string::npos);
    auto laughs = Document::parse(R"(<!doctype r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><r>&b;</r>)");
    CHECK_FALSE(laughs.ok());
    // An undeclared entity reference is kept as literal text, and the text
    // after it survives (libxml2's recover mode alone would drop it).
    auto undeclared = Document::parse("<r>x&nbsp;y &x; z</r>");
    REQUIRE(undeclared.ok());
    CHECK(undeclared->root().text() == "x&nbsp;y &x; z");
}

TEST_CASE("xml: deep nesting is refused") {
    auto nested = [](int depth) {
        std::string s;
        for (int i = 0; i < depth; ++i) s += "<a>";
        for (int i = 0; i < depth; ++i) s += "</a>";
        return s;
    };
    CHECK(Document::parse(nested(64)).ok());
    auto deep = Document::parse(nested(65));
    REQUIRE_FALSE(deep.ok());
    CHECK(deep.error().message == "document nested deeper than 64 elements");
    // Far past libxml2's own 256 limit: still a clean error.
    xml::ParseLimits lim;
    lim.max_depth = 100000;
    CHECK_FALSE(Document::parse(nested(5000), lim).ok());
    CHECK_FALSE(Document::parse(nested(5000)).ok());
}
