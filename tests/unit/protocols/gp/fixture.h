// Loads a hand-written reply from tests/unit/protocols/gp/fixtures/.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

inline std::string gp_fixture(const std::string& name) {
    std::ifstream in(std::string(GP_FIXTURE_DIR) + "/" + name, std::ios::binary);
    if (!in) throw std::runtime_error("missing fixture " + name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}
