// A one-way signal from one thread to the waits of another: an eventfd that
// turns readable once cancel() is called and stays so. A blocking loop polls
// fd() beside its socket, so a connection attempt ends at once when the user
// quits instead of running into its timeout. Also used as a "finished" flag a
// poll() can wait on.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace espvpn::io {

class CancelEvent {
public:
    CancelEvent() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        // Without it no attempt could be stopped: the program cannot go on.
        if (fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
    }
    ~CancelEvent() { ::close(fd_); }
    CancelEvent(const CancelEvent&) = delete;
    CancelEvent& operator=(const CancelEvent&) = delete;

    // Thread-safe; the counter is never read, so the fd stays readable.
    void cancel() {
        std::uint64_t one = 1;
        [[maybe_unused]] auto n = ::write(fd_, &one, sizeof one);
    }
    int fd() const { return fd_; }

private:
    int fd_;
};

}  // namespace espvpn::io
