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

namespace {

// `text` (ASCII) as UTF-16 with a byte-order mark.
std::string utf16(std::string_view text, bool big_endian) {
    std::string out = big_endian ? std::string("\xfe\xff", 2) : std::string("\xff\xfe", 2);
    for (char c : text) {
        if (big_endian) out += '\0';
        out += c;
        if (!big_endian) out += '\0';
    }
    return out;
}

// A refusal whose message says why: a DTD, or bytes that are not UTF-8 XML.
void check_refused(const std::string& doc, const std::string& what) {
    CAPTURE(what);
    auto r = Document::parse(doc);
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.error().message;
    CAPTURE(m);
    CHECK((m.find("DTD") != std::string::npos || m.find("not XML") != std::string::npos ||
           m.find("entity") != std::string::npos));
}

}  // namespace

// The DTD check is structural (after parsing, UTF-8 forced), not a byte scan: a
// document declared UTF-16 or UTF-7 carries its DTD past any scan of the raw bytes.
TEST_CASE("xml: a DTD in any declared encoding is refused") {
    const std::string dtd = R"(<!DOCTYPE r [<!ENTITY e "EXPANDED">]><r>&e;</r>)";
    check_refused(R"(<?xml version="1.0" encoding="UTF-8"?>)" + dtd, "UTF-8");
    check_refused(utf16(R"(<?xml version="1.0" encoding="UTF-16"?>)" + dtd, false), "UTF-16LE with BOM");
    check_refused(utf16(R"(<?xml version="1.0" encoding="UTF-16"?>)" + dtd, true), "UTF-16BE with BOM");
    check_refused(utf16(R"(<?xml version="1.0" encoding="UTF-16BE"?>)" + dtd, true).substr(2), "UTF-16BE, no BOM");
    // UTF-7: the DTD's '<', '[', '"', and the reference's '&' and ';' base64-encoded, so no
    // "<!" and no '&' byte anywhere; the root element written directly.
    const std::string utf7 = R"(<?xml version="1.0" encoding="UTF-7"?>)"
                             "+ADw-!DOCTYPE r +AFs-+ADw-!ENTITY e +ACI-EXPANDED+ACI->+AF0->"
                             "<r>+ACY-e+ADs-</r>";
    check_refused(utf7, "UTF-7");
    // A UTF-7 billion laughs and an external entity to a local file, likewise.
    const std::string utf7_laughs = R"(<?xml version="1.0" encoding="UTF-7"?>)"
        "+ADw-!DOCTYPE r +AFs-+ADw-!ENTITY a +ACI-aaaaaaaaaa+ACI->"
        "+ADw-!ENTITY b +ACI-+ACY-a+ADsAJg-a+ADsAJg-a+ADsAJg-a+ADsAJg-a+ADs-+ACI->"
        "+AF0-><r>+ACY-b+ADs-</r>";
    check_refused(utf7_laughs, "UTF-7 billion laughs");
    const std::string utf16_xxe = utf16(R"(<?xml version="1.0" encoding="UTF-16"?>)"
                                        R"(<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/hostname">]><r>&x;</r>)",
                                        false);
    check_refused(utf16_xxe, "UTF-16 external entity");
    // A bare external subset (no internal one) is refused too, and nothing is fetched.
    check_refused(utf16(R"(<!DOCTYPE r SYSTEM "http://192.0.2.1/x.dtd"><r/>)", false), "UTF-16 external subset");
    // A DTD whose entities are never referenced: still a DTD.
    check_refused(utf16(R"(<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE r [<!ENTITY e "x">]><r>t</r>)", true),
                  "UTF-16 unused DTD");
}

TEST_CASE("xml: billion laughs and external entities in UTF-8 are refused") {
    std::string laughs = R"(<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">)";
    std::string prev = "lol";
    for (int i = 1; i <= 9; ++i) {
        std::string name = "lol" + std::to_string(i);
        laughs += "<!ENTITY " + name + " \"";
        for (int j = 0; j < 10; ++j) laughs += "&" + prev + ";";
        laughs += "\">";
        prev = name;
    }
    laughs += "]><lolz>&lol9;</lolz>";
    check_refused(laughs, "billion laughs");
    check_refused(R"(<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/hostname">]><r>&x;</r>)",
                  "external entity");
    // An entity in an attribute value, too.
    check_refused(R"(<!DOCTYPE r [<!ENTITY x "v">]><r a="&x;"/>)", "entity in an attribute");
}

TEST_CASE("xml: ordinary server XML still parses; non-UTF-8 declarations are not honoured") {
    auto ok = Document::parse(
        R"(<?xml version="1.0" encoding="UTF-8"?><response status="success"><a>x &amp; y &lt;z&gt; &#65;&#x42; caf)"
        "\xc3\xa9"
        R"(</a><![CDATA[c]]><!-- note --><?pi x?></response>)");
    REQUIRE(ok.ok());
    CHECK(ok->root().child_text("a") == "x & y <z> AB caf\xc3\xa9");
    // The declaration's encoding is ignored: the bytes are read as UTF-8.
    auto latin = Document::parse(R"(<?xml version="1.0" encoding="ISO-8859-1"?><r>caf)"
                                 "\xc3\xa9</r>");
    REQUIRE(latin.ok());
    CHECK(latin->root().text() == "caf\xc3\xa9");
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
