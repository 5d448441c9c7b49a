#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "protocols/http/secret_buffer.h"

using espvpn::http::SecretBuffer;

namespace {

// The VmFlags line of /proc/self/smaps for the mapping holding `p` ("" when none).
std::string vm_flags_of(const void* p) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    std::ifstream smaps("/proc/self/smaps");
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        unsigned long lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
            inside = addr >= lo && addr < hi;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line + " ";
    }
    return {};
}

}  // namespace

// HTTP requests and replies carry cookies and passwords: the buffer they are built
// in grows inside Secret pages (no core dump), and keeps its content across growth.
TEST_CASE("SecretBuffer: grows in no-dump pages, keeps its bytes, empties on move and clear") {
    SecretBuffer b;
    CHECK(b.empty());
    CHECK(b.text().empty());
    std::string expect;
    for (int i = 0; i < 2000; ++i) {
        const std::string piece = "authcookie=" + std::to_string(i) + "&";
        b.append(piece);
        expect += piece;
    }
    CHECK(b.text() == expect);
    CHECK(vm_flags_of(b.bytes().data()).find(" dd ") != std::string::npos);
    SecretBuffer moved = std::move(b);
    CHECK(moved.text() == expect);
    CHECK(b.empty());
    auto secret = moved.take_secret();
    CHECK(secret.reveal_text() == expect);
    CHECK(moved.empty());
    moved.append("x");
    CHECK(moved.text() == "x");
    moved.clear();
    CHECK(moved.text().empty());
}
