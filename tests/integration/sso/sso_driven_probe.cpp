// sso_driven_probe: runs espvpn's driven browser (src/sso/devtools_browser) once, for the
// integration tests of tests/integration/sso/driven_browser.sh, and prints what it returned:
//   kind=acs_response url=<url> user=<saml-username> field=<cookie name> value=<cookie>
//        (the ACS result parsed by gp::parse_saml_acs_result, as the GP login will)
//   kind=callback_url user=... field=... value=...   (gp::parse_globalprotect_callback)
//   kind=token value=<token>
//   error: <message>   (exit 1)
// The log (trace level) goes to stderr, which the test greps for the secrets.
//   sso_driven_probe --browser "COMMAND" (--url URL | --html-file F) (--gp | --final URL --cookie NAME
//                    [--error-cookie NAME]) [--timeout S]
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "protocols/gp/saml.h"
#include "src/log/logger.h"
#include "src/sso/devtools_browser.h"

using namespace espvpn;

int main(int argc, char** argv) {
    sso::DrivenBrowserOptions options;
    session::SsoStart start;
    session::SsoFinish finish;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::cerr << "missing value for " << a << "\n";
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--browser") options.command = next();
        else if (a == "--url") start.url = next();
        else if (a == "--html-file") {
            std::ifstream in(next());
            std::stringstream ss;
            ss << in.rdbuf();
            start.html = ss.str();
        } else if (a == "--gp") finish.gp_acs = true;
        else if (a == "--final") finish.final_url = next();
        else if (a == "--cookie") finish.token_cookie = next();
        else if (a == "--error-cookie") finish.error_cookie = next();
        else if (a == "--timeout") options.timeout = std::chrono::seconds(std::stoi(next()));
        else {
            std::cerr << "unknown argument " << a << "\n";
            return 2;
        }
    }
    log::Config lc;
    lc.level = log::Level::trace;
    log::configure(lc);
    start.server = "the test page";
    auto browser = sso::make_driven_browser(options);
    auto result = browser->run(start, finish);
    if (!result) {
        std::cout << "error: " << result.error().message << std::endl;
        return 1;
    }
    using Kind = session::SsoResult::Kind;
    if (result->kind == Kind::token) {
        std::cout << "kind=token value=" << result->token.reveal_text() << std::endl;
        return 0;
    }
    Result<gp::GpSamlResult> parsed = result->kind == Kind::acs_response
                                          ? gp::parse_saml_acs_result(result->headers, result->body.reveal_text())
                                          : gp::parse_globalprotect_callback(result->url.reveal_text());
    if (!parsed) {
        std::cout << "error: the result does not parse: " << parsed.error().message << std::endl;
        return 1;
    }
    std::cout << "kind=" << (result->kind == Kind::acs_response ? "acs_response" : "callback_url")
              << " user=" << parsed->username << " field=" << parsed->field << " value=" << parsed->value.reveal_text()
              << " body=" << (result->body.empty() ? "no" : "yes") << std::endl;
    return 0;
}
