// The signals a running tunnel answers (SIGINT/SIGTERM: log out, SIGHUP:
// disconnect keeping the session, SIGUSR2: reconnect/re-probe), read from a
// signalfd by the control loop. Construct it before any other thread starts:
// the mask is inherited, so no packet thread is ever interrupted by them.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>

namespace espvpn::session {

class SignalWatch {
public:
    SignalWatch();
    ~SignalWatch();
    SignalWatch(const SignalWatch&) = delete;
    SignalWatch& operator=(const SignalWatch&) = delete;

    int fd() const { return fd_; }
    // The next pending signal, 0 when none is pending.
    int next();

private:
    sigset_t set_{}, old_{};
    int fd_ = -1;
};

}  // namespace espvpn::session
