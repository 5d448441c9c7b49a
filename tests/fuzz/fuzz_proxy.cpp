// libFuzzer target: the proxy side of --proxy (protocols/proxy): the first byte picks
// what the rest is fed to: a --proxy URL (+ no_proxy list and --proxy-auth), an HTTP
// CONNECT reply, a SOCKS5 server's replies (method choice, auth reply, CONNECT reply), or
// an NTLM challenge (type 2) answered with an authenticate message.
#include "protocols/proxy/ntlm.h"
#include "protocols/proxy/proxy.h"
#include "tests/fuzz/fuzz_input.h"

using namespace espvpn;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::uint8_t mode = data[0] % 5;
    std::span<const std::uint8_t> rest(data + 1, size - 1);
    std::string_view text = fuzz::as_text(rest.data(), rest.size());
    switch (mode) {
        case 0: {
            std::string_view url = text.substr(0, text.find('\n'));
            if (auto spec = proxy::parse_proxy_url(url); spec) {
                (void)spec->display();
                (void)proxy::build_connect_request(*spec, "vpn.example.com", 443, true);
            }
            (void)proxy::bypasses_proxy("vpn.example.com", text);
            (void)proxy::bypasses_proxy("10.0.0.1", text);
            (void)proxy::parse_proxy_auth(text);
            break;
        }
        case 1: (void)proxy::parse_connect_reply(rest); break;
        case 2:
            if (rest.size() >= 2) {
                (void)proxy::parse_socks5_choice(rest.first(2), true);
                (void)proxy::parse_socks5_auth_reply(rest.first(2));
            }
            break;
        case 3: {
            // The CONNECT reply as the socket side reads it: grow the input until complete.
            for (std::size_t n = 0; n <= rest.size(); ++n) {
                auto r = proxy::parse_socks5_connect_reply(rest.first(n));
                if (!r || r->complete) break;
            }
            break;
        }
        case 4: {
            auto challenge = proxy::ntlm::parse_challenge(rest);
            if (!challenge) break;
            auto id = proxy::ntlm::split_user("alice", *challenge);
            if (!id) break;
            const std::uint8_t nonce[8] = {1, 2, 3, 4, 5, 6, 7, 8};
            (void)proxy::ntlm::authenticate_message(*challenge, *id, Secret::from_string("pw"), "HOST", 0,
                                                    std::span<const std::uint8_t, 8>(nonce));
            break;
        }
    }
    return 0;
}
