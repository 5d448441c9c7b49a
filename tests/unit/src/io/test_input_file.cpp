#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "src/io/input_file.h"
#include "src/io/tls_stream.h"

using namespace espvpn;
using namespace espvpn::io;

TEST_CASE("read_input_file: a path, /dev/fd/N read from the descriptor, a pipe, errors that name the file") {
    char path[] = "/tmp/input-file-test.XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "key bytes", 9) == 9);
    auto by_path = read_input_file(path);
    REQUIRE(by_path.ok());
    CHECK(by_path->reveal_text() == "key bytes");
    // The descriptor's offset is at the end: the read is from offset 0 all the same, and again.
    const std::string dev = "/dev/fd/" + std::to_string(fd);
    CHECK(descriptor_of(dev) == fd);
    CHECK(descriptor_of("/proc/self/fd/" + std::to_string(fd)) == fd);
    CHECK(descriptor_of("/dev/fd/x") == -1);
    CHECK(descriptor_of(path) == -1);
    for (int i = 0; i < 2; ++i) {
        auto by_fd = read_input_file(dev);
        REQUIRE(by_fd.ok());
        CHECK(by_fd->reveal_text() == "key bytes");
    }
    CHECK_FALSE(read_input_file(path, 4).ok());  // larger than allowed
    int p[2];
    REQUIRE(pipe(p) == 0);
    REQUIRE(write(p[1], "from a pipe", 11) == 11);
    close(p[1]);
    auto piped = read_input_file("/dev/fd/" + std::to_string(p[0]));
    REQUIRE(piped.ok());
    CHECK(piped->reveal_text() == "from a pipe");
    close(p[0]);
    auto missing = read_input_file("/nonexistent/espvpn-key.pem");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().message.find("/nonexistent/espvpn-key.pem") != std::string::npos);
    CHECK_FALSE(read_input_file("/tmp").ok());  // a directory
    close(fd);
    unlink(path);
}

TEST_CASE("read_input_file: a root-only key opened before a switch to nobody is read through its descriptor") {
    if (geteuid() != 0) return;  // needs root to switch user
    // The privilege split's case: root opens the file, the session (nobody) cannot reopen
    // /proc/self/fd/N (the reopen checks the inode's permissions), but reads the descriptor.
    const std::string key = std::string(ESPVPN_CERT_DIR) + "/client-key.pem";
    char path[] = "/tmp/input-file-root.XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    std::ifstream in(key, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    REQUIRE(fchmod(fd, 0600) == 0);
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
        const std::string dev = "/dev/fd/" + std::to_string(fd);
        if (::open(dev.c_str(), O_RDONLY) >= 0) _exit(11);   // reopening is refused
        if (::open(path, O_RDONLY) >= 0) _exit(12);          // and so is the path
        auto bytes = read_input_file(dev);
        if (!bytes || bytes->reveal_text() != text) _exit(13);
        // GnuTLS gets the credentials from memory: a client certificate with that key loads.
        TlsClientConfig c;
        c.system_trust = false;
        c.client_cert_file = std::string(ESPVPN_CERT_DIR) + "/client.pem";
        c.client_key_file = dev;
        if (!TlsCredentials::load(c).ok()) _exit(14);
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);  // else the step that failed (10..14)
    close(fd);
    unlink(path);
}
