// The session's state files (the HOTP counter, the portal cookie cache): the interface is
// io::StateFiles (src/io/state_files.h), in io/ so that datapath/'s --stats-json writer,
// which may not include session/, uses the same one.
#pragma once

#include "src/io/state_files.h"

namespace espvpn::session {

using StateFile = io::StateFile;
using StateFiles = io::StateFiles;
using LocalStateFiles = io::LocalStateFiles;

}  // namespace espvpn::session
