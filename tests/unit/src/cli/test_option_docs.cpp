// The man page, bash completion and --help against the option table, so an option
// added to the parser cannot go undocumented (and a removed one cannot linger).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "src/cli/options.h"

using espvpn::cli::option_list;

namespace {

std::string read_source_file(const std::string& relative) {
    std::ifstream in(std::string(ESPVPN_SOURCE_DIR) + "/" + relative);
    REQUIRE_MESSAGE(in.good(), "cannot read " << relative);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// roff writes a literal '-' as "\-".
std::string roff(const std::string& text) {
    std::string out;
    for (char c : text) out += c == '-' ? std::string("\\-") : std::string(1, c);
    return out;
}

bool contains_option(const std::string& text, const std::string& spelled) {
    // The option followed by something that cannot continue its name.
    for (std::size_t at = text.find(spelled); at != std::string::npos; at = text.find(spelled, at + 1)) {
        char next = at + spelled.size() < text.size() ? text[at + spelled.size()] : ' ';
        bool continues = std::isalnum(static_cast<unsigned char>(next)) || next == '\\' || next == '-';
        if (!continues) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("every option of the parser is in the man page") {
    const std::string page = read_source_file("docs/espvpn.8");
    for (const auto& o : option_list()) {
        CAPTURE(o.name);
        CHECK(contains_option(page, roff("--" + o.name)));
        if (o.short_name) CHECK(contains_option(page, roff(std::string("-") + o.short_name)));
    }
}

TEST_CASE("bash completion offers exactly the parser's options, and knows which take a value") {
    const std::string script = read_source_file("tools/completion/espvpn.bash");
    auto b = script.find("# options:begin"), e = script.find("# options:end");
    REQUIRE(b != std::string::npos);
    REQUIRE(e != std::string::npos);
    std::string block = script.substr(b, e - b);
    std::set<std::string> offered;
    std::regex word(R"((^|[\s"])(--?[a-zA-Z0-9][a-z0-9-]*))");
    for (std::sregex_iterator it(block.begin(), block.end(), word), end; it != end; ++it) offered.insert((*it)[2]);

    std::set<std::string> table;
    for (const auto& o : option_list()) {
        table.insert("--" + o.name);
        if (o.short_name) table.insert(std::string("-") + o.short_name);
        if (o.takes_value) {
            // A value-taking option must have its own case arm, or the value would be
            // completed as an option name.
            CAPTURE(o.name);
            CHECK((script.find("--" + o.name + ")") != std::string::npos ||
                   script.find("--" + o.name + "|") != std::string::npos));
        }
    }
    for (const auto& name : table) {
        CAPTURE(name);
        CHECK(offered.count(name) == 1);
    }
    for (const auto& name : offered) {
        CAPTURE(name);
        CHECK(table.count(name) == 1);
    }
}

TEST_CASE("--help lists every listed option under openconnect's group names") {
    const std::string help = espvpn::cli::usage_text();
    for (const auto& o : option_list()) {
        if (!o.listed) continue;
        CAPTURE(o.name);
        CHECK(contains_option(help, "--" + o.name));
    }
    // openconnect's order of sections.
    auto pos = [&](const char* g) { return help.find(std::string("\n") + g + ":\n"); };
    const char* order[] = {"General", "Set VPN protocol", "Authentication", "Server validation",
                           "Internet connectivity", "Authentication (two-phase)", "Process control",
                           "Logging (two-phase)", "VPN configuration script", "Tunnel control",
                           "Local system information", "Trojan binary (CSD) execution", "Server bugs"};
    for (std::size_t i = 0; i < std::size(order); ++i) {
        CAPTURE(order[i]);
        REQUIRE(pos(order[i]) != std::string::npos);
        if (i) CHECK(pos(order[i - 1]) < pos(order[i]));
    }
}
