// A StateFiles (src/io/state_files.h) that keeps the files in memory and records every
// call, to show that a user of the interface reads, writes and removes its state through it
// (and so through the privileged part's requests, once the session runs unprivileged).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/io/state_files.h"

namespace espvpn::test {

class RecordingStateFiles final : public io::StateFiles {
public:
    struct Call {
        enum class Op { read, write, remove } op;
        std::string path;
        std::string bytes;  // write: what was written
        io::Sync sync = io::Sync::yes;
        mode_t new_mode = 0;
    };

    Result<std::optional<io::StateFile>> read(const std::string& path) override {
        calls.push_back({Call::Op::read, path, {}, io::Sync::yes, 0});
        auto it = files.find(path);
        if (it == files.end()) return std::optional<io::StateFile>();
        return std::optional<io::StateFile>(
            io::StateFile{Secret::from_string(it->second.bytes), uid, gid, it->second.mode});
    }
    Status write(const std::string& path, std::string_view bytes, io::Sync sync, mode_t new_mode) override {
        calls.push_back({Call::Op::write, path, std::string(bytes), sync, new_mode});
        if (!fail_writes.empty()) return make_error(fail_writes);
        auto it = files.find(path);
        files[path] = {std::string(bytes), it == files.end() ? new_mode : it->second.mode};
        return {};
    }
    Result<bool> remove(const std::string& path) override {
        calls.push_back({Call::Op::remove, path, {}, io::Sync::yes, 0});
        return files.erase(path) == 1;
    }

    // The calls of one kind, in order.
    std::vector<Call> of(Call::Op op) const {
        std::vector<Call> out;
        for (const auto& c : calls)
            if (c.op == op) out.push_back(c);
        return out;
    }

    struct File {
        std::string bytes;
        mode_t mode = 0600;
    };
    std::map<std::string, File> files;  // what a read finds
    uid_t uid = 0;                      // the owner reads report
    gid_t gid = 0;
    std::string fail_writes;            // not empty: every write fails with this message
    std::vector<Call> calls;
};

}  // namespace espvpn::test
