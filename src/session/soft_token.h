// --token-mode=totp|hotp with --token-secret: one-time passwords made here instead
// of typed, as openconnect's liboath-free OATH support does. The secret is given
// inline or as @FILE (also a bare /path); an HOTP file gets the next counter
// written back after each code, so the token stays in step across runs. An HOTP file is
// read and rewritten through StateFiles (state_files.h), so that a session without the
// rights to it can ask the part of espvpn that has them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "crypto/otp.h"
#include "protocols/base/result.h"
#include "crypto/secret.h"
#include "src/session/state_files.h"

namespace espvpn::session {

class SoftToken {
public:
    virtual ~SoftToken() = default;
    // The next code, or an error when this token should not be tried again (the server
    // refused two of its codes: openconnect then falls back to asking).
    virtual Result<Secret> next_code() = 0;
};

enum class SoftTokenMode { totp, hotp };

// `secret_text`: the --token-secret value. `files`: an HOTP @FILE is read through it here
// and before each code, and its counter written back through it; it must outlive the
// token (a TOTP @FILE is read directly, once). `now`: the Unix time (tests pass their own).
Result<std::unique_ptr<SoftToken>> make_soft_token(SoftTokenMode mode, const Secret& secret_text, StateFiles& files,
                                                   std::function<std::int64_t()> now = {});

}  // namespace espvpn::session
