// ac_sso_login_probe: espvpn's AnyConnect login (session::AcLogin) with a test double for the
// external browser (src/sso/external_browser comes from another branch): the double sees
// callbacks only, records what the login asked of it and answers with --token, as the loopback
// listener would after the identity provider's redirect. For ac_sso.sh's external modes.
//   ac_sso_login_probe URL --cafile F --resolve HOST:IP (--token T | --token-file F)
// --token-file: the token is that file's content once it exists (the server writes it, STRAP).
// Prints "asked url=<SsoStart.url> loopback_port=<n> final_url=<...>" and "webvpn=<cookie>";
// "error: ..." and exit 1 when the login fails.
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>
#include <string>

#include "protocols/http/url.h"
#include "src/io/https_client.h"
#include "src/log/logger.h"
#include "src/session/anyconnect/login.h"

using namespace espvpn;

namespace {

class ExternalDouble final : public session::SsoBrowser {
public:
    ExternalDouble(std::string token, std::string token_file) : token_(std::move(token)), file_(std::move(token_file)) {}
    Result<session::SsoResult> run(const session::SsoStart& start, const session::SsoFinish& finish) override {
        std::cout << "asked url=" << start.url << " loopback_port=" << finish.loopback_port
                  << " final_url=" << finish.final_url << std::endl;
        session::SsoResult r;
        r.kind = session::SsoResult::Kind::token;
        if (!file_.empty()) {
            for (int i = 0; i < 100 && token_.empty(); ++i) {  // bounded: 10 s
                std::ifstream in(file_);
                std::getline(in, token_);
                if (token_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            if (token_.empty()) return make_error("the test double found no token in " + file_);
        }
        r.token = Secret::from_string(token_);
        return r;
    }
    bool sees_responses() const override { return false; }
    bool sees_callbacks() const override { return true; }

private:
    std::string token_, file_;
};

class NoPrompts final : public session::LoginPrompter {
public:
    Result<std::string> ask_text(std::string_view p) override { return make_error("asked: " + std::string(p)); }
    Result<Secret> ask_secret(std::string_view p) override { return make_error("asked: " + std::string(p)); }
    void show(std::string_view) override {}
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    io::HttpsClientConfig config;
    std::string token, token_file;
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string a = argv[i], v = argv[i + 1];
        if (a == "--cafile") config.tls.ca_file = v;
        else if (a == "--resolve") config.tls.resolve[v.substr(0, v.find(':'))] = v.substr(v.find(':') + 1);
        else if (a == "--token") token = v;
        else if (a == "--token-file") token_file = v;
        else return 2;
    }
    log::Config lc;
    lc.level = log::Level::trace;
    log::configure(lc);
    auto url = http::parse_url(argv[1]);
    if (!url) return 2;
    auto https = io::HttpsClient::create(std::move(config));
    if (!https) {
        std::cout << "error: " << https.error().message << std::endl;
        return 1;
    }
    auto browser = std::make_shared<ExternalDouble>(token, token_file);
    NoPrompts prompter;
    session::AcLoginSettings s;
    s.server = *url;
    s.user_agent = "Open AnyConnect VPN Agent v9.01-3";
    s.dump_traffic = true;
    s.sso_browser = browser;
    session::AcLogin login(*https, std::move(s), prompter);
    auto done = login.run();
    if (!done) {
        std::cout << "error: " << done.error().message << std::endl;
        return 1;
    }
    std::cout << "webvpn=" << done->webvpn.reveal_text() << std::endl;
    return 0;
}
