#include "src/session/link_attempt.h"

namespace espvpn::session {

LinkAttempt::LinkAttempt(Work work) : work_(std::move(work)) {
    thread_ = std::thread([this] {
        work_(cancel_.fd());
        finished_ = true;
        done_.cancel();
    });
}

LinkAttempt::~LinkAttempt() {
    cancel();
    wait();
}

void LinkAttempt::wait() {
    if (thread_.joinable()) thread_.join();
}

}  // namespace espvpn::session
