#include "src/session/gp/portal_cookie_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "src/io/owned_file.h"

namespace espvpn::session {

namespace {

constexpr std::string_view kHeader = "espvpn-portal-cookie 1";
constexpr std::string_view kPrefix = "gp-portal-";

std::string portal_name(const http::Url& portal) { return portal.host + ":" + std::to_string(portal.port); }

// mkdir -p: every missing directory of `path` (absolute), mode 0700. EEXIST is fine (what is
// there is checked where it matters: the leaf, opened O_NOFOLLOW).
Status make_parents(const std::string& path, mode_t mode) {
    if (path.empty() || path.front() != '/') return make_error("the state directory " + path + " is not absolute");
    for (std::size_t pos = 1; pos <= path.size(); ++pos) {
        if (pos != path.size() && path[pos] != '/') continue;
        std::string part = path.substr(0, pos);
        if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST)
            return make_error("cannot create " + part + ": " + std::strerror(errno));
    }
    return {};
}

std::optional<std::int64_t> parse_i64(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

}  // namespace

CookieCacheLocation cookie_cache_location(uid_t uid, gid_t gid, const std::string& home, bool root_alone,
                                          const char* xdg_state_home) {
    CookieCacheLocation where;
    where.uid = uid;
    where.gid = gid;
    if (xdg_state_home && xdg_state_home[0] == '/') {
        where.parent = xdg_state_home;
        where.leaf = "espvpn";
    } else if (!root_alone && uid != 0 && !home.empty() && home != "/") {
        where.parent = home + "/.local/state";
        where.leaf = "espvpn";
    } else {
        where.parent = "/var/lib/espvpn";
        where.leaf = std::to_string(uid);
        where.by_root = true;
    }
    while (where.parent.size() > 1 && where.parent.back() == '/') where.parent.pop_back();
    return where;
}

std::string PortalCookieCache::file_name(const http::Url& portal) {
    std::string name(kPrefix);
    for (char c : portal_name(portal)) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '-';
        name += ok ? c : '_';
    }
    return name;
}

Result<io::UniqueFd> PortalCookieCache::open_dir(bool create) {
    const std::string shown = where_.path();
    const bool by_root = where_.by_root && ::geteuid() == 0;
    if (create) {
        if (by_root) {
            if (auto st = make_parents(where_.parent, 0755); !st) return st.error();
        } else {
            io::FsIdentity as(where_.uid, where_.gid);
            if (as.failed()) return make_error("cannot act as uid " + std::to_string(where_.uid));
            if (auto st = make_parents(where_.parent, 0700); !st) return st.error();
        }
    }
    io::UniqueFd parent(::open(where_.parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent.valid()) {
        if (!create && errno == ENOENT) return io::UniqueFd();
        return make_error("cannot open the directory " + where_.parent + ": " + std::strerror(errno));
    }
    io::UniqueFd dir;
    {
        std::optional<io::FsIdentity> as;
        if (!by_root) as.emplace(where_.uid, where_.gid);
        if (create && ::mkdirat(parent.get(), where_.leaf.c_str(), 0700) != 0 && errno != EEXIST)
            return make_error("cannot create " + shown + ": " + std::strerror(errno));
        dir.reset(::openat(parent.get(), where_.leaf.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!dir.valid()) {
        const int err = errno;
        if (!create && err == ENOENT) return io::UniqueFd();
        if (err == ELOOP || err == ENOTDIR)
            return make_error("refusing the state directory " + shown + ": it is a symlink or not a directory " +
                              "(not followed; remove it if it is yours)");
        return make_error("cannot open " + shown + ": " + std::strerror(err));
    }
    struct stat st{};
    if (::fstat(dir.get(), &st) != 0) return make_error("cannot stat " + shown + ": " + std::strerror(errno));
    // Made by root for someone else: handed over by its descriptor, never by path.
    if (by_root && st.st_uid == 0 && where_.uid != 0 && (st.st_mode & 07777) == 0700) {
        if (::fchown(dir.get(), where_.uid, where_.gid) != 0)
            return make_error("cannot hand " + shown + " over: " + std::strerror(errno));
        st.st_uid = where_.uid;
    }
    if (st.st_uid != where_.uid || (st.st_mode & 077) != 0)
        return make_error("refusing the state directory " + shown + ": not private to uid " +
                          std::to_string(where_.uid) + " (owner " + std::to_string(st.st_uid) + ", mode " +
                          std::to_string(st.st_mode & 0777) + " decimal)");
    return dir;
}

Result<CookieCacheLocation> PortalCookieCache::prepare() {
    auto dir = open_dir(true);
    if (!dir) return dir.error();
    CookieCacheLocation prepared = where_;
    prepared.prepared = true;
    return prepared;
}

bool PortalCookieCache::out_of_reach() const {
    return where_.prepared && ::access(where_.path().c_str(), R_OK | W_OK | X_OK) != 0;
}

Result<std::optional<SavedPortalCookie>> PortalCookieCache::load(const http::Url& portal, std::int64_t now) {
    if (!out_of_reach()) {
        auto dir = open_dir(false);
        if (!dir) return dir.error();
        if (!dir->valid()) return std::optional<SavedPortalCookie>();
    }
    const std::string shown = file_path(portal);
    io::FsIdentity as(where_.uid, where_.gid);
    auto text = files_->read(shown);
    if (!text) return text.error();
    if (!*text) return std::optional<SavedPortalCookie>();
    // Only a file its owner made private is trusted (the directory is checked already).
    if ((*text)->uid != where_.uid || ((*text)->mode & 077) != 0)
        return make_error("refusing " + shown + ": not a private file of uid " + std::to_string(where_.uid));
    auto saved = decode_saved_cookie((*text)->bytes.reveal_text());
    if (!saved) {
        (void)files_->remove(shown);
        return make_error(shown + ": " + saved.error().message + " (removed)");
    }
    if (saved->expires <= now) {
        if (auto gone = files_->remove(shown); !gone) return gone.error();
        return std::optional<SavedPortalCookie>();
    }
    return std::optional<SavedPortalCookie>(std::move(*saved));
}

Status PortalCookieCache::save(const http::Url& portal, const SavedPortalCookie& cookie) {
    for (std::string_view v : {std::string_view(cookie.user), cookie.userauthcookie.reveal_text(),
                               cookie.prelogonuserauthcookie.reveal_text()})
        for (char ch : v)
            if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
                return make_error("not saving the portal cookie: a control character in it or the user name");
    Secret data = encode_saved_cookie(portal, cookie);
    // Root made and checked the directory before the privilege split: the broker writes the
    // file (StateFiles' rules: a new file by rename, nothing followed).
    if (out_of_reach()) return files_->write(file_path(portal), data.reveal_text(), io::Sync::yes, 0600);
    auto dir = open_dir(true);
    if (!dir) return dir.error();
    io::FsIdentity as(where_.uid, where_.gid);
    if (as.failed()) return make_error("cannot act as uid " + std::to_string(where_.uid));
    // The directory was just checked (the owner's, 0700): only its owner can change what its
    // path names now, and what is in it at our names is safe to clear (unlink never follows
    // a link). A temporary file left by a run killed mid-save would block every later save;
    // a symlink or a file that is not the owner's private one (which load refuses) would be
    // kept, with its owner and mode, by the replacement.
    const std::string name = file_name(portal);
    ::unlinkat(dir->get(), (name + std::string(io::kStateTmpSuffix)).c_str(), 0);
    struct stat st{};
    if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(st.st_mode) || st.st_uid != where_.uid || (st.st_mode & 07777) != 0600))
        ::unlinkat(dir->get(), name.c_str(), 0);
    return files_->write(file_path(portal), data.reveal_text(), io::Sync::yes, 0600);
}

Result<int> PortalCookieCache::forget(const http::Url* portal) {
    if (portal && out_of_reach()) {  // the broker removes it (see save)
        auto gone = files_->remove(file_path(*portal));
        if (!gone) return gone.error();
        return *gone ? 1 : 0;
    }
    auto dir = open_dir(false);
    if (!dir) return dir.error();
    if (!dir->valid()) return 0;
    std::vector<std::string> names;
    if (portal) {
        names.push_back(file_name(*portal));
    } else {
        DIR* d = ::fdopendir(::dup(dir->get()));
        if (!d) return make_error("cannot list " + where_.path() + ": " + std::strerror(errno));
        while (dirent* e = ::readdir(d))
            if (std::string_view(e->d_name).starts_with(kPrefix)) names.emplace_back(e->d_name);
        ::closedir(d);
    }
    io::FsIdentity as(where_.uid, where_.gid);
    int removed = 0;
    for (const auto& name : names) {
        auto gone = files_->remove(where_.path() + "/" + name);
        if (!gone) return gone.error();
        if (*gone) ++removed;
    }
    return removed;
}

Secret encode_saved_cookie(const http::Url& portal, const SavedPortalCookie& cookie) {
    const std::string head = std::string(kHeader) + "\nportal " + portal_name(portal) + "\nuser " + cookie.user +
                             "\nexpires " + std::to_string(cookie.expires) + "\n";
    const std::string_view k1 = "portal-userauthcookie ", k2 = "\nportal-prelogonuserauthcookie ";
    Secret out(head.size() + k1.size() + cookie.userauthcookie.size() + k2.size() +
               cookie.prelogonuserauthcookie.size() + 1);
    auto* p = out.reveal_mutable().data();
    auto put = [&p](std::string_view s) {
        if (s.empty()) return;  // an empty Secret's view has no data pointer: memcpy would get null
        std::memcpy(p, s.data(), s.size());
        p += s.size();
    };
    put(head);
    put(k1);
    put(cookie.userauthcookie.reveal_text());
    put(k2);
    put(cookie.prelogonuserauthcookie.reveal_text());
    put("\n");
    return out;
}

Result<SavedPortalCookie> decode_saved_cookie(std::string_view text) {
    SavedPortalCookie c;
    bool header = false, expires = false;
    while (!text.empty()) {
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
        if (!header) {
            if (line != kHeader) return make_error("not an espvpn cookie file");
            header = true;
            continue;
        }
        const auto sp = line.find(' ');
        std::string_view key = line.substr(0, sp);
        std::string_view value = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
        for (char ch : value)
            if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) return make_error("a control character in it");
        if (key == "user") c.user = std::string(value);
        else if (key == "portal-userauthcookie") c.userauthcookie = Secret::from_string(value);
        else if (key == "portal-prelogonuserauthcookie") c.prelogonuserauthcookie = Secret::from_string(value);
        else if (key == "expires") {
            auto v = parse_i64(value);
            if (!v) return make_error("a bad expiry");
            c.expires = *v;
            expires = true;
        }
    }
    if (!header || !expires || c.user.empty() || (c.userauthcookie.empty() && c.prelogonuserauthcookie.empty()))
        return make_error("incomplete");
    return c;
}

}  // namespace espvpn::session
