// Roaming (issue 22): suspend/resume. logind's PrepareForSleep(bool) signal on the system bus
// (sd-bus; true before sleep, false after resume), for the session loop's poll. Optional: no
// bus or no logind is not an error of the session (open() says why, roaming by rtnetlink and
// the clock-jump check of src/session/path_rule.h still work).
#pragma once

#include <memory>

#include "protocols/base/result.h"

struct sd_bus;
struct sd_bus_slot;

namespace espvpn::io {

class SleepWatch {
public:
    // The system bus ($DBUS_SYSTEM_BUS_ADDRESS or the default socket) with a match on
    // org.freedesktop.login1.Manager.PrepareForSleep from org.freedesktop.login1.
    static Result<SleepWatch> open();
    SleepWatch(SleepWatch&& other) noexcept;
    SleepWatch& operator=(SleepWatch&& other) noexcept;
    ~SleepWatch();

    int fd() const;
    short events() const;  // for pollfd.events (sd-bus may want POLLOUT too)
    // Processes what the bus has: the number of PrepareForSleep(false) (resumes) among it.
    // A failed bus is closed (fd() is -1 from then on: a resume is left to the clock check).
    unsigned drain();
    bool watching() const { return bus_ != nullptr; }

private:
    SleepWatch() = default;
    void close();
    sd_bus* bus_ = nullptr;
    sd_bus_slot* slot_ = nullptr;
    std::unique_ptr<unsigned> resumes_;  // counted by on_signal: a heap cell survives a move
};

}  // namespace espvpn::io
