// Opens the files a user's NetworkManager profile names with that user's rights, for
// the root service to hand to espvpn as descriptors (espvpn_command.h: ProfileFile).
#pragma once

#include <string>
#include <vector>

#include "protocols/base/result.h"
#include "src/nm/espvpn_command.h"

namespace espvpn::nm {

// A descriptor per file, in order (close them). They are opened by a child process
// running as `user` (its uid, primary group and supplementary groups: exactly what that
// user may read), read-only, and must be regular files. A file the user cannot open
// gives one error naming the item, the same whether it is missing or not readable, so
// a profile cannot probe which files exist.
Result<std::vector<int>> open_as_owner(const std::string& user, const std::vector<ProfileFile>& files);

}  // namespace espvpn::nm
