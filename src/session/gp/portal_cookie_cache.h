// The portal's authentication-override cookie kept across runs (docs/GP-LOGIN.md): one
// private file per portal in the user's state directory, holding the user name, the
// portal-userauthcookie / portal-prelogonuserauthcookie and their expiry. The directory
// and the files are the user's (made under their filesystem uid, or by root and handed
// over by descriptor for /var/lib/espvpn/UID), opened with O_NOFOLLOW: a symlink planted
// at either is refused, never followed. The cookies are Secrets in memory and appear in
// no message. The files are read, written and removed through StateFiles (state_files.h);
// the directory (made, checked, listed, a stale temporary file cleared) is handled here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "crypto/secret.h"
#include "protocols/base/result.h"
#include "protocols/http/url.h"
#include "src/io/unique_fd.h"
#include "src/session/state_files.h"

namespace espvpn::session {

struct SavedPortalCookie {
    std::string user;
    Secret userauthcookie;           // portal-userauthcookie ("" when none)
    Secret prelogonuserauthcookie;   // portal-prelogonuserauthcookie ("" when none)
    std::int64_t expires = 0;        // Unix time (seconds)
};

// Where the files live and whose they are.
struct CookieCacheLocation {
    std::string parent;   // made if missing (mkdir -p): as the owner, or by root when by_root
    std::string leaf;     // the private directory in it (mode 0700, the owner's)
    bool by_root = false; // /var/lib/espvpn/UID: parent and leaf made by root, leaf handed over by fd
    uid_t uid = 0;
    gid_t gid = 0;
    // Made and checked by root before the privilege split (PortalCookieCache::prepare): the
    // session process, another user, may be unable to open it; its files then go through
    // StateFiles alone (the broker's, which writes only in this directory).
    bool prepared = false;
    std::string path() const { return parent + "/" + leaf; }
};

// $XDG_STATE_HOME/espvpn when XDG_STATE_HOME is an absolute path, else HOME/.local/state/espvpn;
// /var/lib/espvpn/UID for root on its own or a user without a usable home ("" or "/").
CookieCacheLocation cookie_cache_location(uid_t uid, gid_t gid, const std::string& home, bool root_alone,
                                          const char* xdg_state_home);

// The cookie's lifetime when the portal names none: 8 hours (a working day). Palo Alto's
// default is 24 h, but a portal that says nothing may use any value; a shorter guess keeps
// the secret on disk no longer than a day's use needs, and a cookie that dies sooner is
// only one refused request before the normal login.
inline constexpr std::int64_t kDefaultCookieLifetimeS = 8 * 3600;

class PortalCookieCache {
public:
    // `files` outlives the cache.
    PortalCookieCache(CookieCacheLocation where, StateFiles& files) : where_(std::move(where)), files_(&files) {}

    // The cookie saved for `portal`; nullopt when none, or when it expired at `now` (the file
    // is then removed). Errors: the directory or file is a symlink, not the owner's, not
    // private, or unreadable.
    Result<std::optional<SavedPortalCookie>> load(const http::Url& portal, std::int64_t now);
    // Saves (replaces) the cookie for `portal`, creating the directory if needed.
    Status save(const http::Url& portal, const SavedPortalCookie& cookie);
    // Removes the cookie of `portal` (nullptr: of every portal). Returns how many were removed.
    Result<int> forget(const http::Url* portal);

    // Makes and checks the directory now (root, before the privilege split); the location
    // marked prepared for the session process.
    Result<CookieCacheLocation> prepare();
    const CookieCacheLocation& location() const { return where_; }
    static std::string file_name(const http::Url& portal);  // "gp-portal-HOST_PORT", [A-Za-z0-9._-] only

private:
    // The private directory, checked; an invalid fd (no error) when it does not exist and !create.
    Result<io::UniqueFd> open_dir(bool create);
    // Prepared by root and out of this process's reach (see CookieCacheLocation::prepared).
    bool out_of_reach() const;

    std::string file_path(const http::Url& portal) const { return where_.path() + "/" + file_name(portal); }

    CookieCacheLocation where_;
    StateFiles* files_;
};

// The file's text, and back (the format is espvpn's own: a header line, then "key value" lines).
Secret encode_saved_cookie(const http::Url& portal, const SavedPortalCookie& cookie);
Result<SavedPortalCookie> decode_saved_cookie(std::string_view text);

}  // namespace espvpn::session
