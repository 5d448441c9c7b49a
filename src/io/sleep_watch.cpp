#include "src/io/sleep_watch.h"

#include <poll.h>
#include <systemd/sd-bus.h>

#include <cstring>
#include <string>
#include <utility>

namespace espvpn::io {

namespace {

// PrepareForSleep(b): true before the sleep, false after the resume (counted).
int on_prepare_for_sleep(sd_bus_message* m, void* resumes, sd_bus_error*) {
    int going_down = 0;
    if (sd_bus_message_read(m, "b", &going_down) < 0) return 0;  // a malformed signal: ignored
    if (!going_down) ++*static_cast<unsigned*>(resumes);
    return 0;
}

}  // namespace

Result<SleepWatch> SleepWatch::open() {
    SleepWatch w;
    w.resumes_ = std::make_unique<unsigned>(0);
    if (int r = sd_bus_open_system(&w.bus_); r < 0) {
        w.bus_ = nullptr;
        return make_error(std::string("system bus: ") + strerror(-r));
    }
    int r = sd_bus_match_signal(w.bus_, &w.slot_, "org.freedesktop.login1", "/org/freedesktop/login1",
                                "org.freedesktop.login1.Manager", "PrepareForSleep", &on_prepare_for_sleep,
                                w.resumes_.get());
    if (r < 0) return make_error(std::string("PrepareForSleep match on the system bus: ") + strerror(-r));
    return w;
}

SleepWatch::SleepWatch(SleepWatch&& o) noexcept
    : bus_(std::exchange(o.bus_, nullptr)), slot_(std::exchange(o.slot_, nullptr)), resumes_(std::move(o.resumes_)) {}

SleepWatch& SleepWatch::operator=(SleepWatch&& o) noexcept {
    if (this != &o) {
        close();
        bus_ = std::exchange(o.bus_, nullptr);
        slot_ = std::exchange(o.slot_, nullptr);
        resumes_ = std::move(o.resumes_);
    }
    return *this;
}

SleepWatch::~SleepWatch() { close(); }

void SleepWatch::close() {
    sd_bus_slot_unref(slot_);
    slot_ = nullptr;
    sd_bus_flush_close_unref(bus_);
    bus_ = nullptr;
}

int SleepWatch::fd() const { return bus_ ? sd_bus_get_fd(bus_) : -1; }

short SleepWatch::events() const {
    if (!bus_) return 0;
    const int e = sd_bus_get_events(bus_);
    return e < 0 ? POLLIN : static_cast<short>(e);
}

unsigned SleepWatch::drain() {
    if (!bus_) return 0;
    const unsigned before = *resumes_;
    // Bounded: sd_bus_process handles one message per call; what is left wakes the next poll.
    for (int i = 0; i < 64; ++i) {
        const int r = sd_bus_process(bus_, nullptr);
        if (r == 0) break;  // nothing more
        if (r < 0) {
            // The bus went away (dbus-daemon restarted): stop watching it, or its hung-up fd
            // would wake every poll. The clock-jump check still notices a resume.
            close();
            break;
        }
    }
    return *resumes_ - before;
}

}  // namespace espvpn::io
