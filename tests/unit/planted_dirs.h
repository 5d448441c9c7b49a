// Test helper for files espvpn (root) writes where another user can reach the path: a
// scratch directory owned by nobody (the user who plants symlinks), a root-only one beside
// it, and plant() to make a symlink as nobody would. Needs root (the chown).
#pragma once

#include <doctest/doctest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace espvpn::test {

struct PlantedDirs {
    std::string base, shared, root_only;
    uid_t nobody = 65534;
    gid_t nogroup = 65534;
    PlantedDirs() {
        char t[] = "/tmp/espvpn-planted-XXXXXX";
        REQUIRE(::mkdtemp(t));
        base = t;
        REQUIRE(::chmod(base.c_str(), 0755) == 0);
        if (const passwd* pw = ::getpwnam("nobody")) {
            nobody = pw->pw_uid;
            nogroup = pw->pw_gid;
        }
        shared = base + "/shared";
        root_only = base + "/root-only";
        REQUIRE(::mkdir(shared.c_str(), 0755) == 0);
        REQUIRE(::chown(shared.c_str(), nobody, nogroup) == 0);
        REQUIRE(::mkdir(root_only.c_str(), 0700) == 0);
    }
    ~PlantedDirs() { (void)!std::system(("rm -rf '" + base + "'").c_str()); }
    PlantedDirs(const PlantedDirs&) = delete;
    PlantedDirs& operator=(const PlantedDirs&) = delete;
    // A symlink made by nobody, as the attacker would.
    void plant(const std::string& at, const std::string& to) {
        REQUIRE(::symlink(to.c_str(), at.c_str()) == 0);
        REQUIRE(::lchown(at.c_str(), nobody, nogroup) == 0);
    }
};

inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

inline void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

inline bool exists(const std::string& path) {
    struct stat st{};
    return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace espvpn::test
