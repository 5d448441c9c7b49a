#include "src/datapath/pipeline_threads.h"

#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "src/log/logger.h"
#include "src/sandbox/seccomp_filter.h"

namespace espvpn::datapath {

ControlChannel::ControlChannel() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

ControlChannel::~ControlChannel() { ::close(fd_); }

void ControlChannel::notify() {
    pending_.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);  // only fails when the counter is saturated: still readable
}

void ControlChannel::drain() {
    std::uint64_t value;
    (void)!::read(fd_, &value, sizeof value);
}

void PipelineFailure::set(std::string message) {
    LOG_ERROR << "datapath: " << message;
    message_ = std::move(message);
    failed_.store(true, std::memory_order_release);
}

std::optional<std::string> PipelineFailure::get() const {
    if (!failed_.load(std::memory_order_acquire)) return std::nullopt;
    return message_;
}

bool wait_for_work(ControlChannel& control, int fd, int timeout_ms, PipelineFailure& failure) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {control.fd(), POLLIN, 0}};  // fd -1 is ignored
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
        failure.set(std::string("poll: ") + std::strerror(errno));
        return false;
    }
    if (fds[1].revents & POLLIN) control.drain();
    return true;
}

namespace {

// The thread's first acts: its name (by itself: naming another thread writes its /proc
// comm file, which the session's Landlock does not allow), then its seccomp filter
// (src/sandbox), before it touches a packet. A thread the kernel will not confine does not
// run; `refused` says why.
std::function<void()> confined(std::string name, std::function<void()> run, const PipelineThreads::Refused& refused,
                               bool tx) {
    return [name = std::move(name), run = std::move(run), refused, tx] {
        (void)::pthread_setname_np(::pthread_self(), name.c_str());
        // The rx linger (rx_linger.h) sleeps tens of microseconds: with the default 50 µs
        // slack it would sleep twice as long.
        if (!tx) (void)::prctl(PR_SET_TIMERSLACK, 1000UL);
        if (Status s = sandbox::confine_thread(sandbox::ThreadRole::datapath); !s) {
            refused(tx, s.error().message);
            return;
        }
        run();
    };
}

}  // namespace

void PipelineThreads::start(const char* tx_name, ControlChannel& tx, std::function<void()> tx_run,
                            const char* rx_name, ControlChannel& rx, std::function<void()> rx_run,
                            const Refused& refused) {
    tx_control_ = &tx;
    rx_control_ = &rx;
    tx_ = std::thread(confined(tx_name, std::move(tx_run), refused, true));
    rx_ = std::thread(confined(rx_name, std::move(rx_run), refused, false));
}

void PipelineThreads::stop() {
    for (ControlChannel* c : {tx_control_, rx_control_}) {
        if (!c) continue;
        c->stop.store(true, std::memory_order_release);
        c->notify();
    }
    if (tx_.joinable()) tx_.join();
    if (rx_.joinable()) rx_.join();
}

}  // namespace espvpn::datapath
