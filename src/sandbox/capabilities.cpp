#include "src/sandbox/capabilities.h"

#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace espvpn::sandbox {
namespace {

struct Caps {
    cap_t c;
    explicit Caps(cap_t v) : c(v) {}
    ~Caps() { cap_free(c); }
    Caps(const Caps&) = delete;
    Caps& operator=(const Caps&) = delete;
};

Status refused(const std::string& what) {
    return make_error("capabilities: " + what + ": " + std::strerror(errno));
}

// permitted = effective = inheritable = `caps` (and CAP_SETPCAP in permitted and
// effective when `keep_setpcap`, for the steps that still need it).
Status set_sets(const std::vector<cap_value_t>& caps, bool keep_setpcap) {
    Caps c(cap_init());  // all clear
    if (!c.c) return refused("cap_init");
    if (!caps.empty()) {
        for (cap_flag_t f : {CAP_PERMITTED, CAP_EFFECTIVE, CAP_INHERITABLE})
            if (cap_set_flag(c.c, f, static_cast<int>(caps.size()), caps.data(), CAP_SET) != 0)
                return refused("cap_set_flag");
    }
    if (keep_setpcap) {
        const cap_value_t setpcap = CAP_SETPCAP;
        for (cap_flag_t f : {CAP_PERMITTED, CAP_EFFECTIVE})
            if (cap_set_flag(c.c, f, 1, &setpcap, CAP_SET) != 0) return refused("cap_set_flag");
    }
    if (cap_set_proc(c.c) != 0) return refused("capset");
    return {};
}

}  // namespace

Status keep_only_capabilities(std::initializer_list<int> wanted, KeepSetpcap setpcap) {
    const cap_value_t last = cap_max_bits();  // the kernel's count (cap_last_cap + 1)
    std::vector<cap_value_t> caps;
    for (int cap : wanted) {
        if (cap < 0 || cap >= last) return make_error("capabilities: no capability " + std::to_string(cap));
        caps.push_back(cap);
    }
    // 1. Inheritable = caps first (raising ambient needs them there); CAP_SETPCAP kept
    //    for the bounding set and the securebits.
    if (Status s = set_sets(caps, true); !s) return s;
    // 2. The bounding set.
    for (cap_value_t cap = 0; cap < last; ++cap) {
        bool keep = false;
        for (cap_value_t k : caps) keep = keep || k == cap;
        if (!keep && cap_drop_bound(cap) != 0) return refused("PR_CAPBSET_DROP " + std::to_string(cap));
    }
    // 3. Ambient = caps: what an exec'd program gets with SECBIT_NOROOT.
    if (cap_reset_ambient() != 0) return refused("PR_CAP_AMBIENT_CLEAR_ALL");
    for (cap_value_t cap : caps)
        if (cap_set_ambient(cap, CAP_SET) != 0) return refused("PR_CAP_AMBIENT_RAISE " + std::to_string(cap));
    // 4. Securebits, locked: uid 0 is not special at execve; no keeping capabilities
    //    across a uid change; no raising the ambient set again.
    const unsigned bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                          SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (cap_set_secbits(bits) != 0) return refused("PR_SET_SECUREBITS");
    // 5. CAP_SETPCAP goes (or stays for drop_capability's bounding-set drops); then no_new_privs.
    if (Status s = set_sets(caps, setpcap == KeepSetpcap::yes); !s) return s;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return refused("PR_SET_NO_NEW_PRIVS");
    return {};
}

Status drop_capability(int cap) {
    if (cap < 0 || cap >= cap_max_bits()) return make_error("capabilities: no capability " + std::to_string(cap));
    const cap_value_t v = cap;
    // Ambient first: the kernel drops an ambient capability that leaves permitted or
    // inheritable anyway, but only at the capset; said here so that the order is plain.
    if (CAP_AMBIENT_SUPPORTED() && cap_set_ambient(v, CAP_CLEAR) != 0) return refused("PR_CAP_AMBIENT_LOWER");
    Caps c(cap_get_proc());
    if (!c.c) return refused("capget");
    // Out of the bounding set too, while CAP_SETPCAP is still held.
    cap_flag_value_t setpcap = CAP_CLEAR;
    if (cap_get_flag(c.c, CAP_SETPCAP, CAP_EFFECTIVE, &setpcap) != 0) return refused("cap_get_flag");
    if (setpcap == CAP_SET && CAP_IS_SUPPORTED(v) && cap_drop_bound(v) != 0)
        return refused("PR_CAPBSET_DROP " + std::to_string(cap));
    for (cap_flag_t f : {CAP_EFFECTIVE, CAP_PERMITTED, CAP_INHERITABLE})
        if (cap_set_flag(c.c, f, 1, &v, CAP_CLEAR) != 0) return refused("cap_set_flag");
    if (cap_set_proc(c.c) != 0) return refused("capset");
    return {};
}

}  // namespace espvpn::sandbox
