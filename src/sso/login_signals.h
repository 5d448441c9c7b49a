// The signals that end a browser login (the user gives up), read from a signalfd
// while the login waits; the thread's signal mask is restored afterwards.
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <initializer_list>

#include "src/io/unique_fd.h"

namespace espvpn::sso {

class LoginSignals {
public:
    // SIGPIPE may be among `signals`: it is only drained (a write to a browser that is gone).
    explicit LoginSignals(std::initializer_list<int> signals) {
        sigemptyset(&set_);
        for (int s : signals) sigaddset(&set_, s);
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
        fd_.reset(signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC));
    }
    ~LoginSignals() {
        next_quit();  // drains a SIGPIPE so it is not delivered when unblocked
        fd_.reset();
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    LoginSignals(const LoginSignals&) = delete;
    LoginSignals& operator=(const LoginSignals&) = delete;

    int fd() const { return fd_.get(); }
    // The first pending signal that ends the login, 0 when none.
    int next_quit() {
        signalfd_siginfo si;
        while (fd_.valid() && ::read(fd_.get(), &si, sizeof si) == sizeof si)
            if (si.ssi_signo != SIGPIPE) return static_cast<int>(si.ssi_signo);
        return 0;
    }

private:
    sigset_t set_{}, old_{};
    io::UniqueFd fd_;
};

}  // namespace espvpn::sso
