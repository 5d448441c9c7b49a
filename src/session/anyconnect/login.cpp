#include "src/session/anyconnect/login.h"

#include <chrono>
#include <thread>

#include "protocols/anyconnect/csd.h"
#include "protocols/anyconnect/strap.h"
#include "protocols/xml/escape.h"
#include "src/log/logger.h"
#include "src/session/csd_program.h"

namespace espvpn::session {

using anyconnect::AcAuthReply;
using anyconnect::AcFieldValue;
using anyconnect::AcFormField;

namespace {

bool is_user_field(std::string_view name) { return name.rfind("user", 0) == 0 || name.rfind("uname", 0) == 0; }

// may_use_token: openconnect's rule (a field named secondary_password, or any password field of a
// form with id "challenge"), or, beyond it, a password field of a later form once a password has
// been given and the server did not say the login failed: ocserv's OTP form is a second "main" form
// with a "password" field ("Please enter your OTP password."), which openconnect 9.01 cannot answer.
LoginField login_field(const AcAuthReply& form, const AcFormField& f, bool may_use_token) {
    LoginField out;
    out.form = form.auth_id;
    out.name = f.name;
    out.label = f.label.empty() ? f.name + ":" : f.label;
    switch (f.kind) {
        case AcFormField::Kind::select:
            out.kind = LoginField::Kind::select;
            for (const auto& o : f.options) out.choices.push_back({o.value, o.label});
            break;
        case AcFormField::Kind::password:
            out.kind = LoginField::Kind::secret;
            // Beyond openconnect only a plain "password"/"answer" field: never a new_password/verify_* one.
            out.token = (may_use_token && (f.name == "password" || f.name == "answer")) ||
                        f.name == "secondary_password" || form.auth_id == "challenge";
            break;
        default: out.kind = LoginField::Kind::text; break;
    }
    return out;
}

}  // namespace

http::Request AcLogin::request(const char* method, const std::string& target) const {
    http::Request req;
    req.method = method;
    req.target = target;
    req.host = s_.server.host;
    req.port = s_.server.port;
    req.headers.add("User-Agent", s_.user_agent);
    req.headers.add("X-Transcend-Version", "1");
    req.headers.add("X-Aggregate-Auth", "1");
    if (strap_) {
        const std::string pub = strap_->public_key_base64();
        req.headers.add(std::string(anyconnect::kStrapPubkeyHeader), pub);
        req.headers.add(std::string(anyconnect::kStrapDhPubkeyHeader), pub);
    }
    return req;
}

Result<AcAuthReply> AcLogin::post(const std::string& target, Secret body, const std::string& logged_body) {
    http::Request req = request("POST", target);
    req.headers.add("Accept", "*/*");
    req.headers.add("Accept-Encoding", "identity");
    req.headers.add("X-Pad", anyconnect::padding_for(body.size()));
    req.headers.add("Content-Type", "application/xml; charset=utf-8");
    req.body = std::move(body);
    if (s_.dump_traffic) {
        LOG_DEBUG << "> POST " << s_.server.host << ":" << s_.server.port << target;
        io::HttpsClient::dump_headers(req.headers);
        LOG_DEBUG << "> " << logged_body;
    }
    cert_fail_sent_ = false;
    auto response = https_.send(std::move(req));
    if (!response) return make_error("POST " + target + " to " + s_.server.host + ": " + response.error().message);
    if (s_.dump_traffic) {
        io::HttpsClient::dump_response_head(*response);
        // Forms hold no secrets; the session cookie is a header or a <session-token>.
        LOG_DEBUG << "< " << anyconnect::redact_session_token(response->body.reveal_text());
    }
    if ((response->status == 401 || response->status == 403) && anyconnect::refusal_names_certificate(response->reason))
        return make_error(anyconnect::client_certificate_error(s_.server.host, s_.client_certificate) + ": HTTP " +
                          std::to_string(response->status) + " " + response->reason);
    if (response->status == 401 || response->status == 403)
        return make_error("the server rejected the credentials: HTTP " + std::to_string(response->status) + " " +
                          response->reason);
    if (response->status != 200)
        return make_error("POST " + target + " to " + s_.server.host + ": HTTP " + std::to_string(response->status) +
                          " " + response->reason);
    return anyconnect::parse_auth_reply(response->body.reveal_text());
}

// Fills every field of the form: user name from -u, the group from
// --authgroup, hidden fields echoed, the rest asked through the prompter.
Result<std::vector<AcFieldValue>> AcLogin::answer(const AcAuthReply& form, std::string* logged) {
    std::vector<AcFieldValue> out;
    for (const AcFormField& f : form.fields) {
        AcFieldValue v{f.name, {}};
        std::string shown;
        switch (f.kind) {
            case AcFormField::Kind::hidden: v.value = Secret::from_string(f.value); shown = f.value; break;
            case AcFormField::Kind::sso:
                if (sso_token_.empty())
                    return make_error("the form's field \"" + f.name + "\" wants a single sign-on token, and the server "
                                      "sent no <sso-v2-login> to get one");
                v.value = sso_token_.clone();
                shown = "<redacted>";
                break;
            case AcFormField::Kind::select: {
                if (f.name == "group_list") continue;  // sent as <group-select>
                auto field = login_field(form, f, false);
                auto chosen = answers_.choose(field);
                if (!chosen) return chosen.error();
                v.value = Secret::from_string((*chosen)->value);
                shown = (*chosen)->value;
                LOG_INFO << "form " << form.auth_id << ": " << f.name << " = \"" << (*chosen)->label << "\"";
                break;
            }
            case AcFormField::Kind::text:
                if (is_user_field(f.name) && !s_.user.empty() && !user_used_) {
                    user_used_ = true;
                    v.value = Secret::from_string(s_.user);
                } else {
                    auto text = answers_.fill(login_field(form, f, false));
                    if (!text) return text.error();
                    v.value = std::move(*text);
                }
                shown = std::string(v.value.reveal_text());
                break;
            case AcFormField::Kind::password: {
                auto field = login_field(form, f, password_given_ && !retry_form_);
                auto secret = answers_.fill(field);
                if (!secret) return secret.error();
                password_given_ = true;
                v.value = std::move(*secret);
                shown = "<redacted>";
                break;
            }
        }
        const std::string element(anyconnect::reply_element(f.name));
        if (!element.empty()) *logged += "<" + element + ">" + xml::escape(shown) + "</" + element + ">";
        out.push_back(std::move(v));
    }
    return out;
}

Result<Secret> AcLogin::single_sign_on(const anyconnect::AcSsoRequest& sso) {
    SsoBrowser* browser = s_.sso_browser.get();
    const bool external = sso.external();
    if (!browser || (external ? !browser->sees_callbacks() : !browser->sees_responses())) {
        std::string have = !browser ? std::string("no browser flow is configured")
                                    : std::string("the configured browser cannot finish it");
        return make_error("the server " + s_.server.host + " wants a single sign-on in a browser (" +
                          (external ? "single-sign-on-external-browser" : "single-sign-on-v2") + "), and " + have +
                          (external ? ": give --external-browser[=PROGRAM]"
                                    : ": give --sso-browser=COMMAND (e.g. --sso-browser=chromium)") +
                          ", or log in elsewhere and pass the cookie with --cookie-on-stdin");
    }
    SsoStart start;
    auto login = http::resolve_location(http::Url{s_.server.host, s_.server.port, s_.server.target}, sso.login);
    if (!login) return make_error("the server's sso-v2-login \"" + sso.login + "\": " + login.error().message);
    start.url = login->to_string();
    start.server = s_.server.host;
    SsoFinish finish;
    if (external) {
        finish.loopback_port = anyconnect::kSsoExternalPort;
    } else {
        auto final_url = http::resolve_location(http::Url{s_.server.host, s_.server.port, s_.server.target}, sso.login_final);
        if (!final_url) return make_error("the server's sso-v2-login-final: " + final_url.error().message);
        finish.final_url = final_url->to_string();
        finish.token_cookie = sso.token_cookie;
        finish.error_cookie = sso.error_cookie;
    }
    LOG_INFO << "single sign-on for " << s_.server.host << " in the browser"
             << (external ? " (external, loopback port " + std::to_string(finish.loopback_port) + ")" : "");
    auto result = browser->run(start, finish);
    if (!result) return make_error("single sign-on: " + result.error().message);
    if (result->kind != SsoResult::Kind::token || result->token.empty())
        return make_error("single sign-on: the browser returned no token");
    if (external && strap_) {
        // The loopback redirect's token is encrypted to our STRAP key. Only the server has
        // that key, so a plain token did not come from it: a local process may be logging
        // the user into a session of its own (login CSRF). Refused, never posted.
        auto opened = anyconnect::open_strap_token(*strap_, result->token.reveal_text());
        if (!opened) return make_error("single sign-on: " + opened.error().message);
        if (!*opened)
            return make_error("single sign-on: the browser's return carried a plain token, not one encrypted to "
                              "the STRAP key espvpn offered; refused (it did not come from " + s_.server.host + ")");
        return std::move(**opened);
    }
    return std::move(result->token);
}

Result<AcAuthReply> AcLogin::run_host_scan(const anyconnect::AcHostScan& scan, const std::string& target) {
    const auto peer = https_.peer(s_.server.host, s_.server.port);
    anyconnect::CsdInputs in{s_.csd_wrapper, s_.server.host, s_.authgroup, peer ? peer->cert_md5 : "", "",
                             peer ? peer->pin : ""};
    auto command = anyconnect::csd_wrapper_command(scan, in);
    if (!command) return command.error();
    ProgramRun run;
    run.program = command->argv.front();
    run.args.assign(command->argv.begin() + 1, command->argv.end());
    for (const auto& [name, value] : command->env) run.extra_env.push_back(name + "=" + value);
    run.run_as_user = s_.csd_user;
    LOG_INFO << "the server asks for a CSD host scan: running " << run.program;
    auto out = run_for_output(run);
    // openconnect goes on after a failing wrapper too (the server decides); so do we, saying so.
    if (!out) LOG_WARN << "CSD wrapper " << run.program << ": " << out.error().message << "; the login may fail";
    else if (!out->empty()) LOG_DEBUG << "CSD wrapper printed: " << *out;
    https_.cookies().set(s_.server.host, "sdesktop", Secret::from_string(scan.token));
    host_scan_token_ = scan.token;
    // As openconnect: the wait page until it is XML (an HTML refresh page while the scan is not done,
    // fetched again a second later, here at most kCsdWaits times), then the init again.
    const std::string wait = anyconnect::csd_wait_path(scan);
    for (int fetched = 1;; ++fetched) {
        auto response = https_.send(request("GET", wait), io::Redirects::follow);
        if (!response) return make_error("CSD wait page " + wait + ": " + response.error().message);
        if (response->status != 200)
            return make_error("CSD wait page: HTTP " + std::to_string(response->status) + " " + response->reason);
        const auto state = anyconnect::classify_wait_page(response->body.reveal_text());
        if (state == anyconnect::CsdWait::done) break;
        if (state == anyconnect::CsdWait::unknown)
            return make_error("CSD wait page " + wait + ": neither XML nor a refresh page");
        if (fetched >= kCsdWaits)
            return make_error("CSD wait page " + wait + ": the host scan was not done after " +
                              std::to_string(kCsdWaits) + " s");
        LOG_INFO << "CSD: the server is not done with the host scan; asking again in 1 s";
        std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const std::string init = anyconnect::build_init_request(s_.client, group_);
    return post(target, Secret::from_string(init), init);
}

Result<AcAuthReply> AcLogin::answer_mca(const AcAuthReply& request, const std::string& target) {
    const anyconnect::AcMcaRequest& mca = *request.mca;
    if (!s_.mca)
        return make_error("the server " + s_.server.host + " asks for multiple-certificate authentication (a second, "
                          "user certificate): give --mca-certificate (and --mca-key)");
    auto hash = anyconnect::choose_mca_hash(mca);
    if (!hash) return hash.error();
    auto identity = McaIdentity::load(s_.mca->certificate, s_.mca->key, s_.mca->password);
    if (!identity) return identity.error();
    const McaIdentity& user = **identity;
    auto signature = user.sign_base64(mca.signed_document, *hash);
    if (!signature) return signature.error();
    LOG_INFO << "multiple-certificate authentication: the user certificate \"" << user.subject() << "\" signs the "
             << "server's request (" << *hash << ")";
    const std::string body = anyconnect::build_mca_reply(s_.client, opaque_, user.pkcs7_base64(), *hash, *signature);
    auto reply = post(target, Secret::from_string(body), body);
    const std::string refused = "the server " + s_.server.host + " refused the multiple-certificate authentication " +
                                "of \"" + user.subject() + "\"";
    if (!reply) return make_error(refused + ": " + reply.error().message);
    if (!reply->error.empty()) return make_error(refused + ": " + reply->error);
    if (reply->mca) return make_error(refused + " (it asked again)");
    return reply;
}

Result<AcAuthReply> AcLogin::answer_client_cert_request(const std::string& target) {
    if (cert_fail_sent_)  // it insists: no password login without a certificate here
        return make_error(anyconnect::client_certificate_error(s_.server.host, s_.client_certificate));
    bool fail = true;
    if (s_.client_certificate && !fresh_connection_tried_) {
        fresh_connection_tried_ = true;
        fail = false;
        LOG_INFO << "the server " << s_.server.host << " asks for the client certificate: asking again on a new "
                 << "connection";
        https_.close_all();
    } else if (s_.client_certificate) {
        LOG_WARN << "the server " << s_.server.host << " asks for a client certificate after one was offered: "
                 << "saying it has none (client-cert-fail) to go on with the next login form";
    } else {
        LOG_INFO << "the server " << s_.server.host << " asks for a client certificate and none is configured: "
                 << "saying so (client-cert-fail) to go on with the next login form";
    }
    const std::string init = anyconnect::build_init_request(s_.client, group_, fail);
    auto reply = post(target, Secret::from_string(init), init);
    cert_fail_sent_ = fail;
    return reply;
}

void AcLogin::keep_session_state(const AcAuthReply& reply) {
    if (!reply.opaque.empty()) opaque_ = reply.opaque;
    if (!reply.session_token.empty()) {
        // As openconnect: the token is the webvpn cookie, replacing one set in the same reply.
        session_token_ = reply.session_token.clone();
        https_.cookies().set(s_.server.host, "webvpn", session_token_.clone());
    }
}

Result<AcAuthenticated> AcLogin::run() {
    s_.client.group_access = s_.server.to_string();
    s_.client.multiple_cert = s_.mca.has_value();
    s_.client.sso_v2 = s_.sso_browser && s_.sso_browser->sees_responses();
    s_.client.sso_external = s_.sso_browser && s_.sso_browser->sees_callbacks();
    if (s_.client.sso_external) {
        auto key = crypto::EciesP256Key::generate();
        if (!key) return make_error("the STRAP key for single sign-on: " + key.error().message);
        strap_ = std::move(*key);
    }
    std::string target = s_.server.target;
    auto reply = post(target, Secret::from_string(anyconnect::build_init_request(s_.client)),
                      anyconnect::build_init_request(s_.client));
    bool group_sent = false;
    bool host_scan_done = false;
    bool mca_done = false;
    int failures = 0;
    for (int round = 0;; ++round) {
        if (!reply) return reply.error();
        keep_session_state(*reply);
        if (reply->client_cert_requested) {
            reply = answer_client_cert_request(target);
            continue;
        }
        if (reply->mca) {
            if (mca_done) return make_error("the server " + s_.server.host + " asked for the second certificate twice");
            mca_done = true;
            reply = answer_mca(*reply, target);
            continue;
        }
        if (reply->host_scan && host_scan_done && reply->fields.empty())
            return make_error("the server " + s_.server.host + " asks for the CSD host scan again after it ran" +
                              (reply->error.empty() ? std::string() : " (" + reply->error + ")"));
        if (reply->host_scan && !host_scan_done) {
            // As openconnect: the wrapper runs once, then the wait page with the token as a cookie.
            host_scan_done = true;
            reply = run_host_scan(*reply->host_scan, target);
            continue;
        }
        if (reply->success()) break;
        if (round >= s_.max_rounds)
            return make_error("login not finished after " + std::to_string(s_.max_rounds) + " forms; giving up");
        if (!reply->form_action.empty()) {
            auto next = http::resolve_location(http::Url{s_.server.host, s_.server.port, target}, reply->form_action);
            if (!next) return make_error("the form's action \"" + reply->form_action + "\": " + next.error().message);
            if (!next->same_origin(s_.server))
                return make_error("the form posts to another server (" + next->host + "), which espvpn does not follow");
            target = next->target;
        }
        if (!reply->banner.empty()) {
            if (auto st = prompter_.accept_banner(reply->banner); !st) return st.error();
        }
        bool login_failed = reply->message.rfind("Login failed", 0) == 0 || !reply->error.empty();
        if (!reply->error.empty()) {
            LOG_WARN << "server: " << reply->error;
            prompter_.form_message(reply->error, true);
        }
        if (!reply->message.empty()) {
            LOG_INFO << "server: " << reply->message;
            prompter_.form_message(reply->message, login_failed);
        }
        if (login_failed && ++failures >= 3)
            return make_error("the server rejected the credentials " + std::to_string(failures) + " times (" +
                              reply->message.substr(0, reply->message.find('\n')) + ")");

        // A group list: pick once, then start again with the group in init (the form may change).
        if (const AcFormField* groups = reply->group_list(); groups && !group_sent) {
            // --authgroup, else -F <form id>:group_list, else asked (openconnect's order).
            auto field = login_field(*reply, *groups, false);
            auto chosen = answers_.choose(field, s_.authgroup);
            if (!chosen) return chosen.error();
            group_ = (*chosen)->value;
            group_sent = true;
            LOG_INFO << "auth group \"" << (*chosen)->label << "\" (" << (*chosen)->value << ")";
            s_.client.group_access = http::Url{s_.server.host, s_.server.port, target}.to_string();
            std::string init = anyconnect::build_init_request(s_.client, group_);
            reply = post(target, Secret::from_string(init), init);
            continue;
        }
        if (reply->sso) {
            // A token the server refused is not worth another round in the browser.
            if (!sso_token_.empty() && login_failed)
                return make_error("the server " + s_.server.host + " refused the single sign-on token (" +
                                  (reply->error.empty() ? reply->message : reply->error) + ")");
            auto token = single_sign_on(*reply->sso);
            if (!token) return token.error();
            sso_token_ = std::move(*token);
        } else {
            sso_token_ = Secret();
        }
        std::string logged;
        retry_form_ = login_failed;
        auto fields = answer(*reply, &logged);
        if (!fields) {
            if (login_failed)
                return make_error("the server rejected the credentials (" +
                                  reply->message.substr(0, reply->message.find('\n')) + "): " + fields.error().message);
            return fields.error();
        }
        Secret body = anyconnect::build_auth_reply(s_.client, *fields, group_, opaque_, host_scan_token_);
        reply = post(target, std::move(body), "<auth>" + logged + "</auth>" +
                                                   (group_.empty() ? "" : "<group-select>" + group_ + "</group-select>"));
    }
    AcAuthenticated done;
    done.server = http::Url{s_.server.host, s_.server.port, "/"};
    done.banner = reply->banner;
    const Secret* cookie = https_.cookies().find(s_.server.host, "webvpn");
    if (!cookie || cookie->empty())
        return make_error("the server said the login succeeded but sent no session cookie (neither Set-Cookie webvpn "
                          "nor <session-token>)");
    done.webvpn = cookie->clone();
    LOG_DEBUG << "the session cookie: "
              << (!session_token_.empty() && cookie->equals(session_token_) ? "the server's <session-token>"
                                                                             : "the webvpn cookie the server set");
    if (!done.banner.empty()) {
        if (auto st = prompter_.accept_banner(done.banner); !st) return st.error();
    }
    LOG_INFO << "logged in to " << s_.server.host << (group_.empty() ? "" : " (group " + group_ + ")");
    return done;
}

}  // namespace espvpn::session
