// The status and control interface (docs/SERVICE.md): a server on an AF_UNIX socket
// that somebody else created and bound (io::open_status_listener: the CLI, or a
// privileged parent passing the fd), answering one JSON request per line
// (protocols/status) on its own thread. Every client is checked with SO_PEERCRED:
// root, the session's own user and the profile's users and groups only. Bounded:
// kMaxClients at once, kMaxRequestLine per line, kMaxPending bytes of replies a client
// has not read (then it is dropped), kIdle without a request (then it is closed): no
// client can stall the tunnel or the control loop, which only reads a snapshot under a
// short lock and an eventfd of commands.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocols/base/result.h"
#include "protocols/status/status_protocol.h"
#include "src/io/cancel_event.h"
#include "src/io/status_socket.h"
#include "src/io/unique_fd.h"

namespace espvpn::session {

// Who may use the socket beside root and the session's own user.
struct StatusAccess {
    std::vector<uid_t> users;
    std::vector<gid_t> groups;  // the peer's primary or a supplementary group
};
bool status_allowed(const StatusAccess& access, const io::PeerCredentials& peer, uid_t self);

// What the status reports, written by the session (and the CLI between sessions), read by
// the server's thread.
class StatusBoard {
public:
    using Clock = std::chrono::system_clock;
    explicit StatusBoard(status::Snapshot initial = {});
    // A new state (its "since" is now when it changed); `error` replaces last_error when non-empty.
    void set_state(status::State state, const std::string& error = {});
    void set_error(const std::string& error);
    // The captive portal's page (printable: captive::printable_url), shown while the state is
    // captive_portal; any other state clears it.
    void set_portal(const std::string& url);
    void set_gateway(const std::string& gateway);
    // The tunnel's interface (0: none) and what names its transport now (empty: none);
    // both cleared when the tunnel goes.
    void set_link(int ifindex, std::string interface_name, std::function<std::string()> transport);
    void set_expires(std::int64_t unix_time);
    status::Snapshot snapshot() const;
    status::State state() const;

private:
    mutable std::mutex mu_;
    status::Snapshot s_;
    int ifindex_ = 0;
    std::function<std::string()> transport_;
};

class StatusServer {
public:
    static constexpr std::size_t kMaxClients = 16;
    static constexpr std::size_t kMaxPending = 64 * 1024;
    static constexpr std::chrono::seconds kIdle{30};

    // `listener`: listening, non-blocking; owned from here on. The thread starts here, with
    // every signal blocked (the control loop reads them from a signalfd).
    static Result<std::unique_ptr<StatusServer>> start(io::UniqueFd listener, StatusAccess access, StatusBoard& board);
    ~StatusServer();  // stops the thread, closes every client
    StatusServer(const StatusServer&) = delete;
    StatusServer& operator=(const StatusServer&) = delete;

    // Readable when a disconnect or reconnect request waits; take_commands() empties it.
    int commands_fd() const { return commands_.fd(); }
    std::vector<status::Request> take_commands();
    // Counters (tests, logs): clients refused by SO_PEERCRED, dropped for a bad or long line,
    // for replies they did not read, for being idle, or because kMaxClients were connected.
    struct Counters {
        std::uint64_t accepted = 0, refused = 0, too_long = 0, unread = 0, idle = 0, full = 0;
    };
    Counters counters() const;

private:
    StatusServer(io::UniqueFd listener, StatusAccess access, StatusBoard& board);
    struct Client {
        io::UniqueFd fd;
        std::string in, out;
        std::chrono::steady_clock::time_point last;
        bool closing = false;  // close once `out` is sent
    };
    void run();
    void accept_clients();
    // false: drop the client.
    bool read_client(Client& c);
    bool write_client(Client& c);
    void handle(Client& c, std::string_view line);

    io::UniqueFd listener_;
    StatusAccess access_;
    StatusBoard& board_;
    io::CancelEvent stop_;
    io::CancelEvent commands_;
    mutable std::mutex mu_;  // pending_, counters_
    std::vector<status::Request> pending_;
    Counters counters_;
    std::vector<Client> clients_;  // the server thread's only
    std::thread thread_;
};

}  // namespace espvpn::session
