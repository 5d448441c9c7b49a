// Who a browser runs as (docs/SSO.md): the user who invoked espvpn through sudo
// (SUDO_UID) or pkexec (PKEXEC_UID), with that user's desktop session (HOME,
// DISPLAY, WAYLAND_DISPLAY, XDG_RUNTIME_DIR, DBUS_SESSION_BUS_ADDRESS); espvpn's
// own user when it does not run as root. Never root on behalf of someone else.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "protocols/base/result.h"

namespace espvpn::sso {

struct InvokingUser {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string name;
    std::string home;
    bool is_root_alone = false;  // espvpn is root and nobody invoked it through sudo/pkexec
    // NAME=VALUE for the browser: the user's session variables and a PATH.
    std::vector<std::string> environment;
    // A graphical session to open a browser in (DISPLAY or WAYLAND_DISPLAY).
    bool has_display() const;
};

Result<InvokingUser> invoking_user();

// `path` is a directory (not a symlink to one) that `uid` owns.
bool is_dir_of(const std::string& path, uid_t uid);

// Starts `program` (split on spaces) with `argument` appended, as `user`, detached
// (it is not espvpn's child once started: a double fork, so nothing is left to
// reap), stdin from /dev/null and stdout to espvpn's stderr. Errors: the program
// could not be started (exec failed, no such user).
Status start_as_user(const InvokingUser& user, const std::string& program, const std::string& argument);

// What a child process does to become `user`, looked up before fork() (getgrouplist is
// not async-signal-safe). Nothing to do when espvpn already runs as that user.
struct UserSwitch {
    bool needed = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // the user's supplementary groups
};
UserSwitch user_switch(const InvokingUser& user);

// In a forked child only (async-signal-safe): setgroups, setgid, setuid, in that order.
// 0 when done (or nothing to do), else the step that failed (1 setgroups, 2 setgid,
// 3 setuid) with errno set.
int become_user(const UserSwitch& s);

// Removes `dir` (made by espvpn, owned by `user`) and what is in it. The contents are
// removed as `user`, so root never walks a tree that user could change under it (a
// symlink swapped in for a directory); `dir` itself by espvpn (its parent, e.g. $TMPDIR,
// may not be writable by the user). Errors: something could not be removed.
Status remove_dir_as_user(const InvokingUser& user, const std::string& dir);

}  // namespace espvpn::sso
