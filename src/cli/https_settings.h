// The HTTPS/TLS settings every protocol's login takes from the command line
// (--cafile, --servercert, --certificate, --resolve, timeouts, keep-alive).
#pragma once

#include "src/cli/options.h"
#include "src/io/https_client.h"
#include "src/session/login_prompter.h"

namespace espvpn::cli {

io::HttpsClientConfig https_config(const ClientOptions& options);

// Once logging is set up: logs the no-op options, applies --gnutls-debug and
// --libproxy (the proxy from https_proxy/all_proxy, no_proxy), checks
// --key-password-from-fsid. An error means the options cannot work.
Status prepare_compat_options(ClientOptions& options);

// Without -p, a PKCS#12 file or encrypted key that needs a pass phrase has it
// asked for (a line of standard input when that is not a terminal; an error with
// --non-inter), as openconnect asks before its first request.
// A key on a token: "Enter PIN for token 'LABEL' (URI):"; through --prompt-fd a
// refused PIN is shown as an error and asked again (one token login per answer).
// A TPM key file GnuTLS cannot open (TSS2 PEM, tpmkey:) is a clear error here.
Status ask_key_password_if_needed(ClientOptions& options, session::LoginPrompter& prompter);

// AnyConnect --mca-certificate whose key is on a token that wants its PIN and none is
// given (--mca-key-password, pin-value): asked as the client key's PIN is.
Status ask_mca_pin_if_needed(ClientOptions& options, session::LoginPrompter& prompter);

}  // namespace espvpn::cli
