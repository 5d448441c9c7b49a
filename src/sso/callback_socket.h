// The globalprotectcallback: hand-off (docs/SSO.md): the user's browser opens
// the URL with the handler registered for the scheme (data/espvpn-sso-callback.desktop:
// `espvpn --sso-callback %u`), which passes it to the waiting espvpn over a unix
// socket at a per-user path. The socket's directory is reachable only by that
// user (and root), and each connection's peer credentials (SO_PEERCRED) are
// checked again: the user's uid or root, nobody else. The socket exists only
// while a login waits for a callback.
//
// Wire: the handler writes the URL and a newline, then shuts down its side;
// espvpn answers one line, "ok" or "refused: <why>", and closes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "src/io/unique_fd.h"
#include "src/sso/invoking_user.h"

namespace espvpn::sso {

// /run/user/UID/espvpn-sso-callback when that directory is the user's (a desktop
// session has it), else /run/espvpn-sso/UID/sso-callback (created by espvpn as root).
std::string callback_socket_path(uid_t uid);
// As root, before the privilege split: /run/espvpn-sso/UID made for `uid` when that is where
// its callback socket goes (the session process, no longer root, could not make it).
Status prepare_callback_dir(uid_t uid, gid_t gid);

class CallbackListener {
public:
    // Creates the directory if needed (mode 0700, owned by the user) and binds the
    // socket (mode 0600, owned by the user). Refuses a directory someone else could
    // write to, and a socket another espvpn still listens on.
    static Result<CallbackListener> open(const InvokingUser& user);
    CallbackListener(CallbackListener&& other) noexcept = default;
    CallbackListener& operator=(CallbackListener&&) = delete;
    ~CallbackListener();  // closes and removes the socket

    int fd() const { return fd_.get(); }
    const std::string& path() const { return path_; }

    struct Call {
        int fd = -1;       // the connection, to answer with reply()
        uid_t peer = 0;
        bool peer_allowed = false;
        Secret data;       // what the peer sent (one line), read within a few seconds
    };
    // After poll() said fd() is readable: one connection, its peer and its line.
    Result<Call> accept_call();
    // Answers and closes the connection.
    static void reply(Call& call, const std::string& line);

private:
    CallbackListener(io::UniqueFd fd, std::string path, uid_t uid)
        : fd_(std::move(fd)), path_(std::move(path)), uid_(uid) {}
    io::UniqueFd fd_;
    std::string path_;
    uid_t uid_ = 0;
};

// The handler's side (`espvpn --sso-callback URL`): sends `url` to the login that
// waits for it as this process's user; returns espvpn's answer, or an error
// saying none waits / it refused.
Status send_callback(std::string_view url, std::chrono::seconds timeout = std::chrono::seconds(15));

}  // namespace espvpn::sso
