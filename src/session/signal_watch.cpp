#include "src/session/signal_watch.h"

#include <pthread.h>
#include <unistd.h>

#include <initializer_list>

namespace espvpn::session {

SignalWatch::SignalWatch() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR2}) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
}

SignalWatch::~SignalWatch() {
    if (fd_ >= 0) close(fd_);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

int SignalWatch::next() {
    signalfd_siginfo si;
    return read(fd_, &si, sizeof si) == sizeof si ? static_cast<int>(si.ssi_signo) : 0;
}

}  // namespace espvpn::session
