// The making of a new link (TCP + TLS + the protocol's request: AnyConnect's
// CONNECT, GP's getconfig and tunnel GET) on a thread of its own, so the session's
// control loop never waits for a server. The owner polls done_fd() beside its
// other fds; cancel() (or the destructor) makes every wait inside end at once
// (the work polls cancel_fd beside its sockets), so a blackholed server costs
// nobody a timeout. What the work produces it leaves where its creator reads it
// after done().
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "src/io/cancel_event.h"

namespace espvpn::session {

class LinkAttempt {
public:
    using Work = std::function<void(int cancel_fd)>;
    explicit LinkAttempt(Work work);
    ~LinkAttempt();  // cancels and waits for the thread
    LinkAttempt(const LinkAttempt&) = delete;
    LinkAttempt& operator=(const LinkAttempt&) = delete;

    // Readable once the work has returned (either way).
    int done_fd() const { return done_.fd(); }
    bool done() const { return finished_; }
    // Joins the thread: after it, what the work wrote may be read.
    void wait();
    void cancel() { cancel_.cancel(); }

private:
    Work work_;
    io::CancelEvent cancel_;
    io::CancelEvent done_;
    std::atomic<bool> finished_{false};
    std::thread thread_;
};

}  // namespace espvpn::session
